/* churn_stall: bench/churn with sndk_cq_conn_add held up after it linked a QP to its CQ, which
 * is what a progress thread preempted inside sndk_qp_attach does under load. Linked with
 * -Wl,--wrap=sndk_cq_conn_add; the stall applies only when CHURN_STALL_LINK_US is set
 * (microseconds). It widens the attach race's window (a polling consumer receiving on a QP that is on
 * its CQ but not yet connected) from a few instructions to the whole stall:
 *   CHURN_STALL_LINK_US=2000 build/bench/churn_stall --only answer --answer 300
 * Before the fix that run reported resets (STATUS_CONNECTION_INVALID answers); now none. */
#include <stdlib.h>
#include <unistd.h>

#include "device/cq.h"

void __real_sndk_cq_conn_add(struct sndk_cq *cq, struct sndk_cq_conn *node,
                             const struct sndk_cq_conn_ops *ops, void *owner, int fd,
                             uint32_t events);
void __wrap_sndk_cq_conn_add(struct sndk_cq *cq, struct sndk_cq_conn *node,
                             const struct sndk_cq_conn_ops *ops, void *owner, int fd,
                             uint32_t events);

void __wrap_sndk_cq_conn_add(struct sndk_cq *cq, struct sndk_cq_conn *node,
                             const struct sndk_cq_conn_ops *ops, void *owner, int fd,
                             uint32_t events)
{
    __real_sndk_cq_conn_add(cq, node, ops, owner, fd, events);
    static long us = -1;
    if (us < 0) {
        const char *v = getenv("CHURN_STALL_LINK_US");
        us = v ? strtol(v, NULL, 10) : 0;
    }
    if (us > 0)
        usleep((useconds_t)us);
}
