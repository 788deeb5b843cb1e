/* The shared-memory stream (datapath/stream_shm.c, docs/transport-shm.md) on its own, whatever
 * SOFTNDK_TRANSPORT says: a 1 MiB Send and Write byte-exact through the rings, a peer process
 * killed with SIGKILL (the survivor's requests complete and its link reports a reset within a
 * bound), and a hostile peer that writes garbage into the shared ring header (the connection
 * fails with an error; nothing reads or writes outside the rings — run under ASan too); large
 * RDMA Writes and Read Responses taken with one copy (or none pulled, staged), and a span lent
 * from outside the peer's memory failing the connection. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datapath.h"
#include "datapath/conn.h"
#include "device/cq.h"
#include "datapath/link.h"
#include "datapath/stream.h"
#include "datapath/watch.h"

/* The garbage-header case plays a hostile peer by writing the shared header with plain stores
 * from this process, beside the library's atomics: a real peer writes from another process,
 * out of ThreadSanitizer's view, so under TSan that one case is a race of the test's making
 * and is left to the other builds (ASan runs it). */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)
#define MIB  (1u << 20)

struct shm_pair {
    struct dp_pair p;
    void *xs, *ys; /* the streams' state: x created the rings */
};

static void shm_pair_open(struct shm_pair *sp, size_t buf_len)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = buf_len;
    struct dp_pair *p = &sp->p;
    memset(p, 0, sizeof *p);
    p->ax = p->ay = dp_open_adapter();
    dp_side_init(&p->x, p->ax, &o);
    dp_side_init(&p->y, p->ay, &o);
    dp_side_create_qp(&p->x, &o, XCTX);
    dp_side_create_qp(&p->y, &o, YCTX);
    int sv[2];
    CHECK_EQ_I64(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    sp->xs = dp_attach_shm(&p->x, sv[0], true, true, 16, 16);
    sp->ys = dp_attach_shm(&p->y, sv[1], false, true, 16, 16);
}

TEST(shm_a_mebibyte_send_and_write_arrive_byte_exact)
{
    struct shm_pair sp;
    shm_pair_open(&sp, 4u * MIB);
    struct dp_pair *p = &sp.p;
    CHECK(strcmp(((struct sndk_qp *)p->x.qp)->io->stream.ops->name, "shm") == 0);
    dp_fill(p->x.buf, MIB, 11);
    dp_post_recv(&p->y, (void *)0xa1, 0, MIB);
    dp_post_send(&p->x, (void *)0xb1, 0, MIB, 0);
    NDK_RESULT_EX r;
    dp_expect(p->x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, MIB, XCTX, (void *)0xb1, NdkOperationTypeSend);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, MIB, YCTX, (void *)0xa1, NdkOperationTypeReceive);
    CHECK_MEM(p->y.buf, p->x.buf, MIB);
    /* and back the other way as an RDMA Write into x's second mebibyte */
    uint32_t xtok = 0;
    NDK_MR *xmr = dp_reg(&p->x, MIB, MIB,
                         NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &xtok);
    dp_fill(p->y.buf + 2u * MIB, MIB, 12);
    NDK_SGE g = dp_sge(&p->y, 2u * MIB, MIB);
    CHECK_EQ_U64(p->y.qp->Dispatch->NdkWrite(p->y.qp, (void *)0xc1, &g, 1,
                                             (UINT64)(uintptr_t)(p->x.buf + MIB), xtok, 0),
                 STATUS_SUCCESS);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, MIB, YCTX, (void *)0xc1, NdkOperationTypeWrite);
    /* a Send behind the Write: once it is in, the Write was placed before it */
    dp_post_recv(&p->x, (void *)0xa2, 3u * MIB, 16);
    dp_post_send(&p->y, (void *)0xb2, 0, 16, 0);
    dp_expect(p->x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 16, XCTX, (void *)0xa2, NdkOperationTypeReceive);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 16, YCTX, (void *)0xb2, NdkOperationTypeSend);
    CHECK_MEM(p->x.buf + MIB, p->y.buf + 2u * MIB, MIB);
    dp_close_mr(xmr);
    dp_pair_close(p);
}

/* The peer is another process, killed with SIGKILL mid-connection: no FIN, no end mark, only
 * its socket's end. The survivor's outstanding receive completes STATUS_CANCELLED and its link
 * reports a reset, as for a TCP peer that vanished. */
TEST(shm_peer_killed_is_a_reset_and_completes_outstanding_requests)
{
    int sv[2];
    CHECK_EQ_I64(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    int ready[2];
    CHECK_EQ_I64(pipe(ready), 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        /* The peer: a softndk of its own (no thread of the parent's came along: this test
         * opens nothing before the fork), sends one message, then waits to be killed. */
        close(sv[0]);
        close(ready[0]);
        struct dp_opts o;
        dp_opts_default(&o);
        struct dp_side s;
        NDK_ADAPTER *a = dp_open_adapter();
        dp_side_init(&s, a, &o);
        dp_side_create_qp(&s, &o, XCTX);
        dp_attach_shm(&s, sv[1], true, true, 16, 16);
        dp_fill(s.buf, 64u * 1024u, 21);
        dp_post_send(&s, (void *)0xb1, 0, 64u * 1024u, 0);
        NDK_RESULT_EX r;
        if (dp_poll(s.cq, &r, 1, DP_TIMEOUT_MS) == 1 && r.Status == STATUS_SUCCESS)
            (void)!write(ready[1], "k", 1);
        for (;;)
            pause();
    }
    close(sv[1]);
    close(ready[1]);
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_side s;
    NDK_ADAPTER *a = dp_open_adapter();
    dp_side_init(&s, a, &o);
    dp_side_create_qp(&s, &o, YCTX);
    dp_post_recv(&s, (void *)0xa1, 0, 64u * 1024u);
    dp_post_recv(&s, (void *)0xa2, 64u * 1024u, 64u * 1024u);
    dp_attach_shm(&s, sv[0], false, true, 16, 16);
    NDK_RESULT_EX r[2];
    dp_expect(s.cq, r, 1, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 64u * 1024u, YCTX, (void *)0xa1,
                    NdkOperationTypeReceive);
    uint8_t want[64u * 1024u];
    dp_fill(want, sizeof want, 21);
    CHECK_MEM(s.buf, want, sizeof want);
    char k = 0;
    CHECK_EQ_I64(read(ready[0], &k, 1), 1); /* its Send completed there too */
    close(ready[0]);
    uint64_t t0 = fixture_now_ms();
    CHECK_EQ_I64(kill(child, SIGKILL), 0);
    int status = 0;
    CHECK_EQ_I64(waitpid(child, &status, 0), child);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(harness_event_wait(&s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(fixture_now_ms() - t0 < DP_TIMEOUT_MS);
    CHECK_EQ_U64(s.link.abort_status, STATUS_CONNECTION_RESET);
    CHECK_EQ_U64(SNDK_LINK_REASON_CLASS(s.link.abort_reason), SNDK_LINK_REASON_RESET);
    dp_expect(s.cq, r, 1, 20);
    dp_check_result(&r[0], STATUS_CANCELLED, 0, YCTX, (void *)0xa2, NdkOperationTypeReceive);
    CHECK_EQ_U64(s.qp->Dispatch->NdkSend(s.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    dp_side_close(&s);
    SoftNdkCloseAdapter(a);
}

/* A pair whose ends have both mapped the rings: one 4096-byte Send from x to y passed
 * (receive 0xa1, Send 0xb1). */
static void shm_pair_open_mapped(struct shm_pair *sp)
{
    shm_pair_open(sp, 1u * MIB);
    struct dp_pair *p = &sp->p;
    dp_post_recv(&p->y, (void *)0xa1, 0, 4096);
    dp_post_send(&p->x, (void *)0xb1, 0, 4096, 0);
    NDK_RESULT_EX r;
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 4096, YCTX, (void *)0xa1, NdkOperationTypeReceive);
    dp_expect(p->x.cq, &r, 1, 0);
}

/* Garbage in the shared header page after magic, version and size: every index, flag and
 * count, as a hostile (or broken) peer could write it. */
static void shm_header_garbage(struct shm_pair *sp)
{
    size_t len = 0;
    uint8_t *m = sndk_stream_shm_mapping(sp->ys, &len);
    CHECK(m != NULL);
    CHECK(len > 4096);
    memset(m + 16, 0xA5, 4096 - 16);
}

/* Garbage in every index of the shared header, as a hostile (or broken) peer could write it:
 * the next look at an index finds it outside its ring and fails the stream. Both QPs end with
 * an error, their requests complete, and no byte outside the mapping is touched. */
TEST(shm_garbage_in_the_ring_header_fails_the_connection)
{
#ifdef UNDER_TSAN
    SKIP("TSan: the test's own plain stores into the shared header (see the top of the file)");
#endif
    struct shm_pair sp;
    shm_pair_open_mapped(&sp);
    struct dp_pair *p = &sp.p;
    dp_post_recv(&p->y, (void *)0xa2, 0, 4096);
    dp_post_recv(&p->x, (void *)0xa3, 0, 4096);
    shm_header_garbage(&sp);
    /* x's next write may still fit the room x saw before (the head is not read again then), so
     * its Send may complete as handed over; whoever next reads an index finds it outside */
    dp_post_send(&p->x, (void *)0xb2, 0, 4096, 0);
    CHECK(harness_event_wait(&p->x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p->y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(p->x.link.abort_status != STATUS_SUCCESS);
    CHECK(p->y.link.abort_status != STATUS_SUCCESS);
    /* every request completed: x's receive and Send, y's receive. x's receive not with success
     * (y sends nothing); x's Send and y's receive either way: x's write may have gone into the
     * ring and stored x's own, right tail over the garbage, and then y took a whole, valid
     * Send before it met the garbage elsewhere (as a Send handed to TCP before a reset) */
    NDK_RESULT_EX rs[2];
    dp_expect(p->x.cq, rs, 2, 20);
    bool saw_recv = false, saw_send = false;
    for (int i = 0; i < 2; i++) {
        if (rs[i].RequestContext == (void *)0xa3) {
            saw_recv = true;
            CHECK(rs[i].Status != STATUS_SUCCESS);
        } else if (rs[i].RequestContext == (void *)0xb2) {
            saw_send = true;
        }
    }
    CHECK(saw_recv && saw_send);
    dp_expect(p->y.cq, rs, 1, 20);
    CHECK(rs[0].RequestContext == (void *)0xa2);
    CHECK_EQ_U64(p->x.qp->Dispatch->NdkSend(p->x.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    dp_pair_close(p);
}

/* The same garbage met by a pass that parsed a message where it lies in the ring: the Send is
 * whole and valid and its receive completes, and moving past it reads the garbage (the
 * writer's flag and tail), which fails the stream and ends the connection as a reset would. */
TEST(shm_garbage_met_moving_past_a_message_parsed_in_the_ring_fails_the_connection)
{
#ifdef UNDER_TSAN
    SKIP("TSan: the test's own plain stores into the shared header (see the top of the file)");
#endif
    struct shm_pair sp;
    shm_pair_open_mapped(&sp);
    struct dp_pair *p = &sp.p;
    /* x's next Send goes into the ring (its write reads no index then: the room it saw holds
     * it), then the header turns to garbage before anybody looks again */
    dp_post_recv(&p->y, (void *)0xa2, 0, 4096);
    dp_hold_progress(p->ay);
    dp_post_send(&p->x, (void *)0xb2, 0, 64, 0);
    shm_header_garbage(&sp);
    NDK_RESULT_EX r;
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 64, YCTX, (void *)0xa2, NdkOperationTypeReceive);
    dp_release_progress();
    CHECK(harness_event_wait(&p->y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(p->y.link.abort_status != STATUS_SUCCESS);
    CHECK_EQ_U64(p->y.qp->Dispatch->NdkSend(p->y.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    dp_pair_close(p);
}

/* Warm-up: one message each way, so that each end has read once (probed the other's memory,
 * said whether spans are welcome) before the payloads that may be lent. */
static void shm_warm_up(struct dp_pair *p)
{
    NDK_RESULT_EX r;
    dp_post_recv(&p->y, (void *)0x91, 0, 64);
    dp_post_send(&p->x, (void *)0x92, 0, 64, 0);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_expect(p->x.cq, &r, 1, 0);
    dp_post_recv(&p->x, (void *)0x93, 0, 64);
    dp_post_send(&p->y, (void *)0x94, 0, 64, 0);
    dp_expect(p->x.cq, &r, 1, 0);
    dp_expect(p->y.cq, &r, 1, 0);
}

/* x writes 1 MiB into y's memory and then reads 1 MiB of y's: both with `mode` copies. The
 * Write's bytes are taken by y, the Read Response's by x; `pulled_min` of them must have come
 * straight from the other's memory (one copy), or none (staged). */
static void shm_write_and_read(const char *mode, bool one_copy)
{
    setenv("SOFTNDK_SHM_COPY", mode, 1);
    const char *why = NULL;
    CHECK_EQ_U64(sndk_stream_shm_one_copy(&why), one_copy);
    struct shm_pair sp;
    shm_pair_open(&sp, 4u * MIB);
    struct dp_pair *p = &sp.p;
    shm_warm_up(p);
    uint32_t ytok = 0;
    NDK_MR *ymr = dp_reg(&p->y, MIB, 2u * MIB,
                         NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &ytok);
    dp_fill(p->x.buf + MIB, MIB, 21);
    dp_fill(p->y.buf + 2u * MIB, MIB, 22);
    NDK_SGE g = dp_sge(&p->x, MIB, MIB);
    CHECK_EQ_U64(p->x.qp->Dispatch->NdkWrite(p->x.qp, (void *)0xc1, &g, 1,
                                             (UINT64)(uintptr_t)(p->y.buf + MIB), ytok, 0),
                 STATUS_SUCCESS);
    NDK_SGE rg = dp_sge(&p->x, 2u * MIB, MIB);
    CHECK_EQ_U64(p->x.qp->Dispatch->NdkRead(p->x.qp, (void *)0xc2, &rg, 1,
                                            (UINT64)(uintptr_t)(p->y.buf + 2u * MIB), ytok, 0),
                 STATUS_SUCCESS);
    NDK_RESULT_EX r[2];
    dp_expect(p->x.cq, r, 2, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, MIB, XCTX, (void *)0xc1, NdkOperationTypeWrite);
    dp_check_result(&r[1], STATUS_SUCCESS, MIB, XCTX, (void *)0xc2, NdkOperationTypeRead);
    /* the Read behind the Write: once its data is in, the Write was placed */
    CHECK_MEM(p->y.buf + MIB, p->x.buf + MIB, MIB);
    CHECK_MEM(p->x.buf + 2u * MIB, p->y.buf + 2u * MIB, MIB);
    uint64_t by_y = sndk_stream_shm_pulled(sp.ys), by_x = sndk_stream_shm_pulled(sp.xs);
    if (one_copy) {
        /* every payload piece of 16 KiB or more: all of it, FPDU headers and CRCs aside */
        CHECK(by_y >= MIB - MIB / 64 && by_y <= MIB);
        CHECK(by_x >= MIB - MIB / 64 && by_x <= MIB);
    } else {
        CHECK_EQ_U64(by_y, 0);
        CHECK_EQ_U64(by_x, 0);
    }
    dp_close_mr(ymr);
    dp_pair_close(p);
}

TEST(shm_one_copy_write_and_read_are_pulled_byte_exact)
{
    shm_write_and_read("one", true);
}

TEST(shm_staged_copies_pull_nothing)
{
    shm_write_and_read("staged", false);
}

/* A hostile writer lends a span that is not in its memory: the reader's pull fails, its stream
 * fails with an error, and the connection ends (the receive posted completes, not with
 * success); nothing is written anywhere. The span is made by x's own stream, as any writer's. */
TEST(shm_a_span_outside_the_peers_memory_fails_the_connection)
{
    setenv("SOFTNDK_SHM_COPY", "one", 1);
    CHECK(sndk_stream_shm_one_copy(NULL));
    struct shm_pair sp;
    shm_pair_open(&sp, 1u * MIB);
    struct dp_pair *p = &sp.p;
    shm_warm_up(p);
    dp_fill(p->y.buf, 4096, 31); /* the receive's buffer: nothing may land in it */
    uint8_t before[4096];
    memcpy(before, p->y.buf, sizeof before);
    dp_post_recv(&p->y, (void *)0xa1, 0, 4096);
    struct sndk_qp *xq = (struct sndk_qp *)p->x.qp;
    /* an address no process maps (the first page), lent as a payload */
    struct iovec bogus = {(void *)(uintptr_t)4096, 65536};
    uint8_t lend = 1;
    sndk_mutex_lock(&xq->tx_lock);
    ssize_t w = sndk_stream_writev_lent(&xq->io->stream, &bogus, 1, &lend);
    sndk_mutex_unlock(&xq->tx_lock);
    CHECK_EQ_I64(w, 65536);
    CHECK(harness_event_wait(&p->y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(p->y.link.abort_status != STATUS_SUCCESS);
    NDK_RESULT_EX r;
    dp_expect(p->y.cq, &r, 1, 20);
    CHECK(r.Status != STATUS_SUCCESS);
    CHECK_MEM(p->y.buf, before, sizeof before);
    dp_pair_close(p);
}

/* The stream on its own, over a socket pair: this process is the writer (w, the active end)
 * and the reader (r), whose first read takes the rings and finds nothing. */
struct raw_pair {
    void *w, *r;
    struct sndk_stream ws, rs;
};

static void raw_pair_open(struct raw_pair *p)
{
    int sv[2];
    CHECK_EQ_I64(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    p->w = sndk_stream_shm_new(sv[0], true);
    p->r = sndk_stream_shm_new(sv[1], false);
    CHECK(p->w != NULL && p->r != NULL);
    p->rs = (struct sndk_stream){
        .ops = &sndk_stream_shm_ops, .fd = sndk_stream_shm_fd(p->r), .priv = p->r};
    p->ws = (struct sndk_stream){
        .ops = &sndk_stream_shm_ops, .fd = sndk_stream_shm_fd(p->w), .priv = p->w};
    uint8_t b[1];
    struct iovec v = {b, sizeof b};
    CHECK_EQ_I64(p->rs.ops->readv(&p->rs, &v, 1), -EAGAIN); /* takes the rings: nothing yet */
}

static void raw_pair_close(struct raw_pair *p, bool reader_aborts)
{
    p->rs.ops->close(&p->rs, reader_aborts);
    p->ws.ops->close(&p->ws, false);
}

/* The size of ring 0 (the active end's, after the header page). */
static uint64_t raw_ring_size(struct raw_pair *p)
{
    size_t len = 0;
    CHECK(sndk_stream_shm_mapping(p->w, &len) != NULL);
    return (len - 4096) / 2;
}

/* Publish one record as raw ring bytes (its stamp is publish_raw's): a header of `kind` and
 * `len`, then `data_len` bytes of data padded to 8. */
static void raw_record(struct raw_pair *p, uint32_t kind, uint32_t len, const void *data,
                       size_t data_len)
{
    uint8_t rec[64] = {0};
    CHECK(data_len <= sizeof rec - 16);
    memcpy(rec + 8, &kind, 4);
    memcpy(rec + 12, &len, 4);
    memcpy(rec + 16, data, data_len);
    CHECK_EQ_I64(sndk_stream_shm_publish_raw(p->w, rec, 16 + ((data_len + 7) & ~(size_t)7), 0), 0);
}

#define REC_KIND_BYTES 0x42594553u /* "SEYB" */
#define REC_KIND_LAP   0x2050414cu /* "LAP " */

/* A record is taken by its stamp alone (docs/transport-shm.md, "The stamp"): the stream on its
 * own, over a socket pair, this process playing the writer. A framed record is read by a
 * polling reader; the next one, its stamp replaced by what an older lap left at that position,
 * is not there for a polling reader, and a reader that checks the writer's tail (one about to
 * sleep) finds bytes published without their stamp and fails the stream, for good. */
TEST(shm_stream_takes_a_record_by_its_stamp_and_fails_one_without)
{
    struct raw_pair p;
    raw_pair_open(&p);
    struct sndk_stream *rs = &p.rs;
    uint8_t got[64];
    struct iovec v = {got, sizeof got};
    size_t len = 0;
    uint8_t *m = sndk_stream_shm_mapping(p.w, &len);
    uint64_t ring = raw_ring_size(&p);
    /* a bytes record: stamp (publish_raw writes it), kind, length, 8 bytes */
    raw_record(&p, REC_KIND_BYTES, 8, "ABCDEFGH", 8);
    rs->poll_only = true;
    CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), 8);
    CHECK(memcmp(got, "ABCDEFGH", 8) == 0);
    /* the second record at position 24; its stamp becomes the one a lap ago held there */
    raw_record(&p, REC_KIND_BYTES, 8, "IJKLMNOP", 8);
    uint64_t stamp = 0;
    memcpy(&stamp, m + 4096 + 24, sizeof stamp);
    uint64_t older = stamp ^ 24u ^ (24u - ring); /* (pos - ring) ^ key, where pos ^ key is */
    memcpy(m + 4096 + 24, &older, sizeof older);
    for (int i = 0; i < 8; i++)
        CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), -EAGAIN);
    rs->poll_only = false;
    CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), -EPROTO);
    CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), -EPROTO);
    CHECK_EQ_I64(rs->ops->error(rs), EPROTO);
    raw_pair_close(&p, true);
}

/* Bytes where they lie (stream.h, in_place; docs/transport-shm.md, "Parsed in the ring"): the
 * stream on its own, this process both writer and reader. A written record's bytes are handed
 * out in the ring, contiguous and no more than the record holds; what is taken is gone (the
 * next look starts after it, and a readv goes on from there); an empty ring is "nothing" to a
 * poll-only reader and "read" otherwise; a lap record on the way is taken as readv takes it;
 * the end is readv's to report. */
TEST(shm_stream_hands_out_bytes_where_they_lie)
{
    struct raw_pair p;
    raw_pair_open(&p);
    struct sndk_stream *rs = &p.rs, *ws = &p.ws;
    size_t avail = 1;
    rs->poll_only = true;
    CHECK(rs->ops->in_place(rs, &avail) == NULL);
    CHECK_EQ_U64(avail, 0); /* empty, polled: nothing */
    rs->poll_only = false;
    CHECK(rs->ops->in_place(rs, &avail) == NULL);
    CHECK_EQ_U64(avail, SIZE_MAX); /* empty, a reader that may sleep: readv says it waits */
    rs->poll_only = true;
    uint8_t msg[100], got[100];
    for (unsigned i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 3 + 1);
    struct iovec out = {msg, sizeof msg};
    CHECK_EQ_I64(ws->ops->writev(ws, &out, 1), (int64_t)sizeof msg);
    const uint8_t *at = rs->ops->in_place(rs, &avail);
    CHECK(at != NULL);
    CHECK_EQ_U64(avail, sizeof msg);
    CHECK_MEM(at, msg, sizeof msg);
    CHECK_EQ_I64(rs->ops->take_in_place(rs, 30), 0);
    at = rs->ops->in_place(rs, &avail);
    CHECK(at != NULL);
    CHECK_EQ_U64(avail, sizeof msg - 30);
    CHECK_MEM(at, msg + 30, sizeof msg - 30);
    /* the rest by readv, from where the take left it */
    struct iovec in = {got, sizeof got};
    CHECK_EQ_I64(rs->ops->readv(rs, &in, 1), (int64_t)sizeof msg - 30);
    CHECK_MEM(got, msg + 30, sizeof msg - 30);
    CHECK(rs->ops->in_place(rs, &avail) == NULL);
    CHECK_EQ_U64(avail, 0);
    /* quiet messages lap back to the warm page: the looks take the lap records on the way */
    uint64_t ring = raw_ring_size(&p), laps = 0, last = sndk_stream_shm_tail(p.w);
    for (unsigned i = 0; i < 200; i++) {
        msg[0] = (uint8_t)i;
        CHECK_EQ_I64(ws->ops->writev(ws, &out, 1), (int64_t)sizeof msg);
        uint64_t tail = sndk_stream_shm_tail(p.w);
        laps += tail / ring != last / ring;
        last = tail;
        at = rs->ops->in_place(rs, &avail);
        CHECK_MSG(at != NULL && avail == sizeof msg && at[0] == (uint8_t)i, "message %u", i);
        CHECK_EQ_I64(rs->ops->take_in_place(rs, avail), 0);
    }
    CHECK(laps >= 4);
    /* the end: readv's to report */
    sndk_stream_shutdown_write(ws);
    CHECK(rs->ops->in_place(rs, &avail) == NULL);
    CHECK_EQ_U64(avail, SIZE_MAX);
    CHECK_EQ_I64(rs->ops->readv(rs, &in, 1), 0);
    CHECK(rs->ops->in_place(rs, &avail) == NULL);
    CHECK_EQ_U64(avail, SIZE_MAX);
    CHECK_EQ_I64(rs->ops->error(rs), 0);
    raw_pair_close(&p, false);
}

/* n receives of len bytes posted at y, then, with the progress thread held (so that only
 * polls move bytes), n Sends of the same slots of x's buffer (filled from `seed`) posted at
 * x: receive i has context 0x100 + i, Send i 0x200 + i. The caller releases the thread. */
static void queue_sends_held(struct dp_pair *p, unsigned n, size_t len, uint32_t seed)
{
    dp_fill(p->x.buf, n * len, seed);
    for (unsigned i = 0; i < n; i++)
        dp_post_recv(&p->y, (void *)(uintptr_t)(0x100 + i), (size_t)i * len, len);
    dp_hold_progress(p->ay);
    for (unsigned i = 0; i < n; i++)
        dp_post_send(&p->x, (void *)(uintptr_t)(0x200 + i), (size_t)i * len, len, 0);
}

/* A CQ holds `want` completions, read without a poll (which would run a pass itself): for
 * harness_wait_until. */
struct cq_count {
    struct sndk_cq *cq;
    uint32_t want;
};
static bool cq_holds(void *arg)
{
    const struct cq_count *c = arg;
    return sndk_cq_queued(c->cq) >= c->want;
}

/* A receive pass takes at most 64 FPDUs; what is left after one (in the ring, after a pass that
 * parsed them in place) must still wake the progress thread, which nobody's poll replaces
 * here: 200 small Sends queued while it was held all complete without the consumer polling.
 * Over each transport of the suite's run. */
TEST(shm_progress_takes_more_than_a_pass_without_a_poll)
{
    enum { N = 200, LEN = 64 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.rq_depth = o.sq_depth = N;
    struct dp_pair pair, *p = &pair;
    dp_pair_open(p, &o);
    queue_sends_held(p, N, LEN, 31);
    dp_release_progress();
    /* nobody polls until the progress thread's passes completed every receive */
    struct cq_count all = {sndk_cq_from(p->y.cq), N};
    CHECK(harness_wait_until(cq_holds, &all, DP_TIMEOUT_MS));
    NDK_RESULT_EX r;
    for (unsigned i = 0; i < N; i++) {
        dp_expect(p->y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, LEN, YCTX, (void *)(uintptr_t)(0x100 + i),
                        NdkOperationTypeReceive);
    }
    CHECK_MEM(p->y.buf, p->x.buf, (size_t)N * LEN);
    for (unsigned i = 0; i < N; i++)
        dp_expect(p->x.cq, &r, 1, 0);
    dp_pair_close(p);
}

/* Warm pages (docs/transport-shm.md, "Warm pages"): the stream on its own, this process both
 * writer and reader. Messages read one by one stay on the pages already touched: once the
 * writer reaches the end of them, it laps to the ring's start instead of faulting a new page,
 * and every byte arrives in order. Messages that pile up unread (the ring not empty) go on
 * into new pages. */
TEST(shm_stream_keeps_a_quiet_stream_on_warm_pages_and_a_busy_one_goes_on)
{
    struct raw_pair p;
    raw_pair_open(&p);
    struct sndk_stream *rs = &p.rs, *ws = &p.ws;
    void *w = p.w;
    uint8_t got[200], msg[100];
    struct iovec in = {got, sizeof got};
    rs->poll_only = true;
    uint64_t ring = raw_ring_size(&p);
    /* quiet: 2,000 messages of 100 bytes (a record of 120), each read before the next is
     * written: 240,000 bytes of records, 59 pages' worth, on the first page alone */
    uint64_t laps = 0, last = 0;
    for (unsigned i = 0; i < 2000; i++) {
        memset(msg, (int)(i & 0xff), sizeof msg);
        struct iovec out = {msg, sizeof msg};
        CHECK_EQ_I64(ws->ops->writev(ws, &out, 1), (int64_t)sizeof msg);
        uint64_t tail = sndk_stream_shm_tail(w);
        CHECK_MSG(tail % ring < 4096, "message %u went to ring offset %llu", i,
                  (unsigned long long)(tail % ring));
        laps += tail / ring != last / ring;
        last = tail;
        CHECK_EQ_I64(rs->ops->readv(rs, &in, 1), (int64_t)sizeof msg);
        CHECK_MSG(got[0] == (i & 0xff) && got[99] == (i & 0xff), "message %u", i);
    }
    CHECK(laps >= 50);
    /* busy: 100 messages written before any is read go on past the warm page: after the
     * first (which may lap, the ring being empty), one record after the other, 11,880 bytes
     * of them, into new pages */
    uint64_t start = 0;
    for (unsigned i = 0; i < 100; i++) {
        memset(msg, (int)(0x80 | (i & 0x7f)), sizeof msg);
        struct iovec out = {msg, sizeof msg};
        CHECK_EQ_I64(ws->ops->writev(ws, &out, 1), (int64_t)sizeof msg);
        if (i == 0)
            start = sndk_stream_shm_tail(w);
    }
    CHECK_EQ_U64(sndk_stream_shm_tail(w) - start, 99u * 120u);
    CHECK(sndk_stream_shm_tail(w) % ring > 4096);
    for (unsigned i = 0; i < 100; i++) {
        struct iovec one = {got, sizeof msg};
        CHECK_EQ_I64(rs->ops->readv(rs, &one, 1), (int64_t)sizeof msg);
        CHECK_MSG(got[0] == (0x80 | (i & 0x7f)) && got[99] == got[0], "busy message %u", i);
    }
    CHECK_EQ_I64(rs->ops->readv(rs, &in, 1), -EAGAIN);
    CHECK_EQ_I64(rs->ops->error(rs), 0);
    raw_pair_close(&p, false);
}

/* A lap record says only "the next record is at the next lap's start": one that carries a
 * length, one at a lap's start (where a writer never laps: a hostile one could make a reader
 * chase laps), or one whose header would straddle the ring's end, fails the stream; one after
 * a record, with no length, moves the reader to the next lap, where nothing is yet: the
 * record published right behind it is not read. */
enum lap_case { LAP_GOOD, LAP_WITH_LENGTH, LAP_AT_START };

static void lap_record(enum lap_case c)
{
    struct raw_pair p;
    raw_pair_open(&p);
    struct sndk_stream *rs = &p.rs;
    uint8_t got[64];
    struct iovec v = {got, sizeof got};
    rs->poll_only = true;
    if (c != LAP_AT_START) {
        raw_record(&p, REC_KIND_BYTES, 8, "ABCDEFGH", 8);
        CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), 8);
    }
    raw_record(&p, REC_KIND_LAP, c == LAP_WITH_LENGTH ? 8 : 0, "", 0);
    /* right behind the lap record, where a reader that did not lap would find it */
    raw_record(&p, REC_KIND_BYTES, 8, "IJKLMNOP", 8);
    if (c == LAP_GOOD) {
        CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), -EAGAIN);
        CHECK_EQ_I64(rs->ops->error(rs), 0);
    } else {
        CHECK_EQ_I64(rs->ops->readv(rs, &v, 1), -EPROTO);
        CHECK_EQ_I64(rs->ops->error(rs), EPROTO);
    }
    raw_pair_close(&p, true);
}

TEST(shm_stream_takes_a_lap_record_and_fails_one_with_a_length_or_at_a_laps_start)
{
    lap_record(LAP_GOOD);
    lap_record(LAP_WITH_LENGTH);
    lap_record(LAP_AT_START);
}

/* Ring r's pages that are resident (mincore: in the memfd, so in both processes). */
static unsigned ring_resident_pages(void *state, unsigned r)
{
    size_t len = 0;
    uint8_t *m = sndk_stream_shm_mapping(state, &len);
    CHECK(m != NULL);
    size_t ring = (len - 4096) / 2, pages = ring / 4096;
    unsigned char *vec = malloc(pages);
    CHECK(vec != NULL);
    CHECK_EQ_I64(mincore(m + 4096 + r * ring, ring, vec), 0);
    unsigned n = 0;
    for (size_t i = 0; i < pages; i++)
        n += vec[i] & 1u;
    free(vec);
    return n;
}

/* Ring 0 holds no more than the first page and the lap record's (harness_wait_until). */
static bool ring_trimmed(void *state)
{
    return ring_resident_pages(state, 0) <= 2;
}

/* Giving back (docs/transport-shm.md, "Giving back"): the stream on its own, this process both
 * writer and reader. A busy period touches many of the ring's pages; once the stream wrote
 * nothing for a whole trim period and its ring is empty, trim keeps the first page and the lap
 * record's and gives back the rest, and the stream goes on from the ring's start, every byte in
 * order. Bytes in flight, or writes since the last look, keep everything. */
TEST(shm_stream_gives_back_a_busy_rings_pages_once_quiet)
{
    struct raw_pair p;
    raw_pair_open(&p);
    struct sndk_stream *rs = &p.rs, *ws = &p.ws;
    rs->poll_only = true;
    uint64_t ring = raw_ring_size(&p);
    static uint8_t big[65536], got[65536];
    /* busy: 256 KiB written before any of it is read */
    for (unsigned i = 0; i < 4; i++) {
        memset(big, (int)(0x10 + i), sizeof big);
        struct iovec out = {big, sizeof big};
        CHECK_EQ_I64(sndk_stream_writev(ws, &out, 1), (int64_t)sizeof big);
    }
    CHECK(ws->trim_wanted);
    unsigned busy = ring_resident_pages(p.w, 0);
    CHECK_MSG(busy >= 64, "%u pages resident after 256 KiB", busy);
    /* written since the last look (the first): not quiet yet */
    CHECK(ws->ops->trim(ws));
    /* bytes in flight: nothing goes, whatever the period */
    CHECK(ws->ops->trim(ws));
    CHECK_EQ_U64(ring_resident_pages(p.w, 0), busy);
    for (unsigned i = 0; i < 4; i++) {
        size_t n = 0;
        while (n < sizeof got) {
            struct iovec in = {got + n, sizeof got - n};
            ssize_t r = rs->ops->readv(rs, &in, 1);
            CHECK_MSG(r > 0, "busy write %u: read %zd", i, r);
            n += (size_t)r;
        }
        CHECK_MSG(got[0] == 0x10 + i && got[sizeof got - 1] == 0x10 + i, "busy write %u", i);
    }
    /* quiet and empty: the first page and the lap record's stay */
    CHECK(!ws->ops->trim(ws));
    CHECK(!ws->trim_wanted);
    CHECK_MSG(ring_resident_pages(p.w, 0) <= 2, "%u pages resident after the trim",
              ring_resident_pages(p.w, 0));
    CHECK_EQ_U64(sndk_stream_shm_tail(p.w) % ring, 0); /* lapped to the ring's start */
    CHECK(!ws->ops->trim(ws));                         /* nothing left to give */
    /* and on: the reader takes the lap record, then the messages, all on the first page */
    uint8_t msg[100];
    for (unsigned i = 0; i < 200; i++) {
        memset(msg, (int)(i & 0xff), sizeof msg);
        struct iovec out = {msg, sizeof msg};
        CHECK_EQ_I64(sndk_stream_writev(ws, &out, 1), (int64_t)sizeof msg);
        CHECK(sndk_stream_shm_tail(p.w) % ring <= 4096);
        struct iovec in = {got, sizeof msg};
        CHECK_EQ_I64(rs->ops->readv(rs, &in, 1), (int64_t)sizeof msg);
        CHECK_MSG(got[0] == (i & 0xff) && got[99] == (i & 0xff), "message %u", i);
    }
    CHECK(ring_resident_pages(p.w, 0) <= 2);
    CHECK_EQ_I64(rs->ops->error(rs), 0);
    raw_pair_close(&p, false);
}

/* The same through a connection: Sends that pile up in x's ring while nobody reads it (y's
 * progress thread held) make the stream ask to be trimmed, and the connection's trim timer
 * gives the pages back within two periods of the last write; a Send after that arrives
 * byte-exact. Staged copies, so that the Sends' bytes go through the ring. */
TEST(shm_connection_gives_back_its_rings_pages_when_quiet)
{
    setenv("SOFTNDK_SHM_COPY", "staged", 1);
    struct shm_pair sp;
    shm_pair_open(&sp, 4u * MIB);
    struct dp_pair *p = &sp.p;
    NDK_RESULT_EX r;
    enum { N = 32, LEN = 8192 };
    queue_sends_held(p, N, LEN, 21);
    unsigned busy = ring_resident_pages(sp.xs, 0);
    CHECK_MSG(busy >= N * LEN / 4096, "%u pages resident with %u KiB in the ring", busy,
              N * LEN / 1024);
    dp_release_progress();
    for (unsigned i = 0; i < N; i++) {
        dp_expect(p->y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, LEN, YCTX, (void *)(uintptr_t)(0x100 + i),
                        NdkOperationTypeReceive);
        dp_expect(p->x.cq, &r, 1, 0);
        CHECK(r.Status == STATUS_SUCCESS);
    }
    CHECK_MEM(p->y.buf, p->x.buf, (size_t)N * LEN);
    /* quiet: within two periods (and a margin), the first page and the lap record's stay */
    bool trimmed = harness_wait_until(ring_trimmed, sp.xs, 2 * SNDK_CONN_TRIM_MS + 2000);
    CHECK_MSG(trimmed, "%u of %u pages still resident", ring_resident_pages(sp.xs, 0), busy);
    dp_fill(p->x.buf, 4096, 22);
    dp_post_recv(&p->y, (void *)0xa1, 0, 4096);
    dp_post_send(&p->x, (void *)0xb1, 0, 4096, 0);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 4096, YCTX, (void *)0xa1, NdkOperationTypeReceive);
    dp_expect(p->x.cq, &r, 1, 0);
    CHECK_MEM(p->y.buf, p->x.buf, 4096);
    dp_pair_close(p);
}
