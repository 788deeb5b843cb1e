/* fuzz_connection_stall: fuzz_connection with the QP attach held up where it used to race with
 * the consumer (finding F3, history/f3-findings.md). Linked with -Wl,--wrap for the two symbols
 * below; each stall applies only when its variable is set (milliseconds):
 *   FUZZ_STALL_ADD_MS     in sndk_qp_attach, just before it adds the socket source: the QP is
 *                         already CONNECTED and on its CQs (window 1: a close, a CQ poll or a
 *                         post on the consumer's thread fails the connection first);
 *   FUZZ_STALL_ATTACH_MS  in sndk_qp_attach, before qp->io is published (window 2: the
 *                         connector's close finds no io yet).
 * Run one input at a time, e.g.
 *   FUZZ_STALL_ADD_MS=300 build-fuzz/fuzz/fuzz_connection_stall
 * fuzz/corpus/fuzz_connection/rev1_sends The stall is what a preempted progress thread does under
 * load (two fuzzers on two CPUs). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "engine/engine.h"
#include "datapath/conn.h"

int __real_sndk_source_add(struct sndk_engine *e, struct sndk_source *s, int fd, uint32_t events,
                           sndk_source_fn fn, int thread);
int __wrap_sndk_source_add(struct sndk_engine *e, struct sndk_source *s, int fd, uint32_t events,
                           sndk_source_fn fn, int thread);
void __real_sndk_tx_init(struct sndk_conn *io, bool crc, uint32_t max_fpdu, uint32_t ird,
                         uint32_t ord);
void __wrap_sndk_tx_init(struct sndk_conn *io, bool crc, uint32_t max_fpdu, uint32_t ird,
                         uint32_t ord);

static void stall(const char *var, const char *where)
{
    const char *v = getenv(var);
    if (!v)
        return;
    fprintf(stderr, "fuzz_connection_stall: %s: %s ms\n", where, v);
    usleep((useconds_t)strtoul(v, NULL, 10) * 1000u);
}

int __wrap_sndk_source_add(struct sndk_engine *e, struct sndk_source *s, int fd, uint32_t events,
                           sndk_source_fn fn, int thread)
{
    /* Only sndk_qp_attach adds with a fixed thread and EPOLLIN (listener and connector pass
     * -1, the stat server EPOLLOUT). */
    if (thread >= 0 && events == EPOLLIN)
        stall("FUZZ_STALL_ADD_MS", "attach, before the socket source is added");
    return __real_sndk_source_add(e, s, fd, events, fn, thread);
}

void __wrap_sndk_tx_init(struct sndk_conn *io, bool crc, uint32_t max_fpdu, uint32_t ird,
                         uint32_t ord)
{
    stall("FUZZ_STALL_ATTACH_MS", "attach, before qp->io is published");
    __real_sndk_tx_init(io, crc, max_fpdu, ird, ord);
}
