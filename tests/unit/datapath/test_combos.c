/* Features that were built apart, together: the receiver-not-ready wait (docs/datapath.md)
 * with a CQ's readiness set, with the header probe staged by a direct read, with a Write
 * behind the held Send and with placed Write completion. One process per test: each sets its
 * profile in the environment. */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "datapath.h"
#include "device/cq.h"
#include "iwarp/fpdu.h"
#include "iwarp/terminate.h"
#include "iwarp/wire.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)

/* ---------------------------------------------------------------- the readiness set */

#define CONNS 4 /* > SNDK_CQ_DIRECT_POLL_MAX: empty polls of the hub's CQ use its readiness set */

static int ready_now(NDK_CQ *cq)
{
    struct epoll_event ev[CONNS + 1];
    return epoll_wait(sndk_cq_from(cq)->ready_fd, ev, CONNS + 1, 0);
}

/* A Send held for a receive leaves its bytes in the socket: the progress thread stops
 * watching EPOLLIN, and so must the CQ's readiness set, or every empty poll of the CQ would
 * find that connection ready and run a pass that can do nothing (a busy loop for a polling
 * consumer). A receive posted on the QP resumes it and puts it back. */
TEST(rnr_held_connection_leaves_the_cq_readiness_set_until_a_receive_resumes_it)
{
    setenv("SOFTNDK_PROFILE", "roce", 1);
    setenv("SOFTNDK_RNR_WAIT_MS", "5000", 1);
    enum { BIG = 128 * 1024 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 2 * BIG;
    NDK_ADAPTER *ah = dp_open_adapter(), *ap = dp_open_adapter();
    struct dp_side hub, peer[CONNS];
    NDK_QP *hq[CONNS];
    dp_side_init(&hub, ah, &o);
    for (int i = 0; i < CONNS; i++) {
        dp_side_init(&peer[i], ap, &o);
        dp_side_create_qp(&peer[i], &o, (void *)(uintptr_t)(0x500 + i));
        CHECK_EQ_U64(hub.pd->Dispatch->NdkCreateQp(hub.pd, hub.cq, hub.cq,
                                                   (void *)(uintptr_t)(0x100 + i), 64, 64, 4, 4, 0,
                                                   NULL, NULL, &hq[i]),
                     STATUS_SUCCESS);
        int fa, fb;
        dp_tcp_pair(&fa, &fb);
        hub.qp = hq[i];
        dp_attach(&hub, fb, true);
        dp_attach(&peer[i], fa, true);
    }
    hub.qp = NULL;
    CHECK(sndk_cq_from(hub.cq)->ready_on);
    NDK_RESULT_EX r[2];
    CHECK_EQ_U64(hub.cq->Dispatch->NdkGetCqResultsEx(hub.cq, r, 2), 0);
    CHECK_EQ_I64(ready_now(hub.cq), 0);
    /* connection 2's peer sends before the hub posted a receive: the hub holds it. A large
     * Send behind it keeps bytes in the socket (the held one may sit in the staging buffer) */
    memset(peer[2].buf, 0x5c, 48);
    dp_fill(peer[2].buf + BIG, BIG, 3);
    dp_post_send(&peer[2], (void *)0x77, 0, 48, 0);
    dp_post_send(&peer[2], (void *)0x79, BIG, BIG, 0);
    CHECK(dp_wait_rnr(ah, 1, DP_TIMEOUT_MS));
    usleep(20 * 1000); /* the large Send reaches the hub's socket */
    /* bytes are in the socket, yet the set reports nothing, poll after poll */
    for (int k = 0; k < 20; k++) {
        CHECK_EQ_U64(hub.cq->Dispatch->NdkGetCqResultsEx(hub.cq, r, 2), 0);
        CHECK_EQ_I64(ready_now(hub.cq), 0);
        usleep(1000);
    }
    /* the receives resume it: both Sends complete, bytes and all */
    NDK_SGE g = dp_sge(&hub, 0, 64);
    CHECK_EQ_U64(hq[2]->Dispatch->NdkReceive(hq[2], (void *)0x42, &g, 1), STATUS_SUCCESS);
    g = dp_sge(&hub, BIG, BIG);
    CHECK_EQ_U64(hq[2]->Dispatch->NdkReceive(hq[2], (void *)0x44, &g, 1), STATUS_SUCCESS);
    dp_expect(hub.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 48, (void *)(uintptr_t)0x102, (void *)0x42,
                    NdkOperationTypeReceive);
    dp_check_result(&r[1], STATUS_SUCCESS, BIG, (void *)(uintptr_t)0x102, (void *)0x44,
                    NdkOperationTypeReceive);
    for (int i = 0; i < 48; i++)
        CHECK_EQ_U64(hub.buf[i], 0x5c);
    CHECK(memcmp(hub.buf + BIG, peer[2].buf + BIG, BIG) == 0);
    dp_expect(peer[2].cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 48, (void *)(uintptr_t)0x502, (void *)0x77,
                    NdkOperationTypeSend);
    dp_check_result(&r[1], STATUS_SUCCESS, BIG, (void *)(uintptr_t)0x502, (void *)0x79,
                    NdkOperationTypeSend);
    /* back in the set: the next message on it is received by a poll as before */
    g = dp_sge(&hub, 64, 8);
    CHECK_EQ_U64(hq[2]->Dispatch->NdkReceive(hq[2], (void *)0x43, &g, 1), STATUS_SUCCESS);
    dp_post_send(&peer[2], (void *)0x78, 0, 8, NDK_OP_FLAG_SILENT_SUCCESS);
    dp_expect(hub.cq, r, 1, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 8, (void *)(uintptr_t)0x102, (void *)0x43,
                    NdkOperationTypeReceive);
    SOFTNDK_COUNTERS c = dp_counters(ah);
    CHECK(c.RnrWaits >= 1 && c.RnrWaits <= 2); /* the large Send may have waited too */
    CHECK_EQ_U64(c.RnrTimeouts, 0);
    for (int i = 0; i < CONNS; i++) {
        dp_side_close(&peer[i]);
        dp_close_qp(hq[i]);
    }
    dp_side_close(&hub);
    SoftNdkCloseAdapter(ah);
    SoftNdkCloseAdapter(ap);
}

/* ---------------------------------------------------------------- the staged probe */

/* A large Send is read straight into its receive; the read ends with the probe of the next
 * header in the staging buffer. That next FPDU is a Send with no receive (held from the
 * staged bytes), behind it a Write and a last Send. Nothing behind the held Send is placed
 * while it waits (the stream is in order); once its receive comes every byte lands. */
TEST(rnr_hold_from_the_staged_probe_then_a_write_and_a_send_behind_it)
{
    enum { LEN = 256 * 1024, GUARD = 4096 };
    setenv("SOFTNDK_PROFILE", "roce", 1);
    setenv("SOFTNDK_RNR_WAIT_MS", "5000", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    o.two_adapters = true;
    o.buf_len = 2 * LEN + 3 * GUARD;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    /* y: guard | Write target | guard | receives | guard */
    uint8_t *wdst = p.y.buf + GUARD, *rdst = p.y.buf + 2 * GUARD + LEN;
    uint32_t ytok = 0;
    NDK_MR *ymr = dp_reg(&p.y, GUARD, LEN,
                         NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &ytok);
    memset(p.y.buf, 0xee, o.buf_len);
    dp_fill(p.x.buf, LEN, 11);       /* the big Send */
    dp_fill(p.x.buf + LEN, LEN, 12); /* the Write */
    dp_post_recv(&p.y, (void *)1, 2 * GUARD + LEN, LEN);
    dp_post_send(&p.x, (void *)11, 0, LEN, 0);
    dp_post_send(&p.x, (void *)12, 100, 40, 0); /* no receive for it yet */
    NDK_SGE ws = dp_sge(&p.x, LEN, LEN);
    CHECK_EQ_U64(
        p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)13, &ws, 1, (uint64_t)(uintptr_t)wdst, ytok, 0),
        STATUS_SUCCESS);
    dp_post_send(&p.x, (void *)14, 200, 24, 0);
    NDK_RESULT_EX r[3];
    dp_expect(p.y.cq, r, 1, 0); /* polling: y reads the big payload directly */
    dp_check_result(&r[0], STATUS_SUCCESS, LEN, YCTX, (void *)1, NdkOperationTypeReceive);
    CHECK(memcmp(rdst, p.x.buf, LEN) == 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    usleep(30 * 1000);
    CHECK_EQ_U64(dp_poll(p.y.cq, r, 1, 20), 0);
    for (size_t i = 0; i < LEN; i++)
        if (wdst[i] != 0xee)
            CHECK_MSG(false, "the Write behind the held Send was placed at %zu", i);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    /* both receives at once, in posting order: the held Send takes the first */
    dp_post_recv(&p.y, (void *)2, 2 * GUARD + LEN, 64);
    dp_post_recv(&p.y, (void *)3, 2 * GUARD + LEN + 64, 64);
    dp_expect(p.y.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 40, YCTX, (void *)2, NdkOperationTypeReceive);
    dp_check_result(&r[1], STATUS_SUCCESS, 24, YCTX, (void *)3, NdkOperationTypeReceive);
    CHECK(memcmp(rdst, p.x.buf + 100, 40) == 0);
    CHECK(memcmp(rdst + 64, p.x.buf + 200, 24) == 0);
    /* the last Send came after the Write: the Write is placed */
    CHECK(memcmp(wdst, p.x.buf + LEN, LEN) == 0);
    for (size_t i = 0; i < GUARD; i++)
        CHECK_MSG(p.y.buf[i] == 0xee && wdst[LEN + i] == 0xee && rdst[LEN + i] == 0xee,
                  "a byte outside its region changed (guard offset %zu)", i);
    NDK_RESULT_EX s[4];
    dp_expect(p.x.cq, s, 4, 20);
    dp_check_result(&s[0], STATUS_SUCCESS, LEN, XCTX, (void *)11, NdkOperationTypeSend);
    dp_check_result(&s[1], STATUS_SUCCESS, 40, XCTX, (void *)12, NdkOperationTypeSend);
    dp_check_result(&s[2], STATUS_SUCCESS, LEN, XCTX, (void *)13, NdkOperationTypeWrite);
    dp_check_result(&s[3], STATUS_SUCCESS, 24, XCTX, (void *)14, NdkOperationTypeSend);
    SOFTNDK_COUNTERS c = dp_counters(p.ay);
    CHECK_EQ_U64(c.RnrTimeouts, 0);
    CHECK_EQ_U64(c.TerminatesSent[1], 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* Placed Write completion across a held Send: x's Write is followed by its fence Read; the
 * Send before the Write is held at y, so the fence's response cannot come and the Write must
 * not complete. When the receive comes, the Write is placed, the fence answered, and the
 * Write completes. */
TEST(rnr_hold_before_a_placed_write_keeps_the_write_incomplete_until_the_resume)
{
    enum { LEN = 64 * 1024 };
    setenv("SOFTNDK_PROFILE", "roce", 1);
    setenv("SOFTNDK_RNR_WAIT_MS", "5000", 1);
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.two_adapters = true;
    o.buf_len = 2 * LEN;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok = 0;
    NDK_MR *ymr = dp_reg(&p.y, LEN, LEN,
                         NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &ytok);
    memset(p.y.buf, 0, 2 * LEN);
    dp_fill(p.x.buf, 2 * LEN, 21);
    dp_post_send(&p.x, (void *)1, 0, 32, 0);
    NDK_SGE ws = dp_sge(&p.x, LEN, LEN);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)2, &ws, 1,
                                            (uint64_t)(uintptr_t)(p.y.buf + LEN), ytok, 0),
                 STATUS_SUCCESS);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    NDK_RESULT_EX r[2];
    usleep(30 * 1000);
    /* the Send went to TCP (it completes: docs/decisions.md); the Write waits for its fence */
    dp_expect(p.x.cq, r, 1, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 32, XCTX, (void *)1, NdkOperationTypeSend);
    dp_post_recv(&p.y, (void *)3, 0, 64);
    dp_expect(p.y.cq, r, 1, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 32, YCTX, (void *)3, NdkOperationTypeReceive);
    dp_expect(p.x.cq, r, 1, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, LEN, XCTX, (void *)2, NdkOperationTypeWrite);
    CHECK(memcmp(p.y.buf + LEN, p.x.buf + LEN, LEN) == 0);
    CHECK(memcmp(p.y.buf, p.x.buf, 32) == 0);
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 1);
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* SRQ receiver-not-ready under the verifier (warn): its dispatch table wraps NdkSrqReceive;
 * the wrapped post must still wake the waiting connection, and the late receive is reported
 * once as NoReceivePosted, nothing else. */
TEST(rnr_srq_post_through_the_verifier_wrapper_resumes_the_waiting_connection)
{
    setenv("SOFTNDK_PROFILE", "roce", 1);
    setenv("SOFTNDK_RNR_WAIT_MS", "5000", 1);
    setenv("SOFTNDK_VERIFY", "warn", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    memset(&p, 0, sizeof p);
    p.ax = dp_open_adapter();
    p.ay = dp_open_adapter();
    dp_side_init(&p.x, p.ax, &o);
    dp_side_init(&p.y, p.ay, &o);
    CHECK_EQ_U64(p.y.pd->Dispatch->NdkCreateSrq(p.y.pd, 16, o.rsge, 0, NULL, NULL, NULL, NULL, NULL,
                                                &p.y.srq),
                 STATUS_SUCCESS);
    dp_side_create_qp(&p.x, &o, XCTX);
    dp_side_create_qp(&p.y, &o, YCTX);
    int a, b;
    dp_tcp_pair(&a, &b);
    dp_attach(&p.x, a, o.crc);
    dp_attach(&p.y, b, o.crc);
    dp_post_send(&p.x, (void *)4, 0, 32, 0);
    dp_post_send(&p.x, (void *)5, 32, 32, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    NDK_RESULT_EX r[2];
    for (int i = 0; i < 2; i++) {
        NDK_SGE sge = dp_sge(&p.y, (size_t)i * 100, 100);
        CHECK_EQ_U64(p.y.srq->Dispatch->NdkSrqReceive(p.y.srq, (void *)(uintptr_t)(1 + i), &sge, 1),
                     STATUS_SUCCESS);
        dp_expect(p.y.cq, r, 1, 0);
        dp_check_result(&r[0], STATUS_SUCCESS, 32, YCTX, (void *)(uintptr_t)(1 + i),
                        NdkOperationTypeReceive);
        CHECK(memcmp(p.y.buf + i * 100, p.x.buf + i * 32, 32) == 0);
    }
    dp_expect(p.x.cq, r, 2, 20);
    SOFTNDK_COUNTERS cy = dp_counters(p.ay);
    CHECK_EQ_U64(cy.RnrTimeouts, 0);
    CHECK(cy.RnrWaits >= 1 && cy.RnrWaits <= 2);
    /* once per object and rule (docs/verifier.md), however many waits */
    CHECK_EQ_U64(cy.VerifyViolations[SoftNdkVerifyNoReceivePosted], 1);
    CHECK_EQ_U64(cy.VerifyViolations[SoftNdkVerifySrqConcurrent], 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_pair_close(&p);
    unsetenv("SOFTNDK_VERIFY");
}

/* ---------------------------------------------------------------- the fence and the hooks */

#define KiB           1024u
#define REMOTE_RW     (NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE)
#define SENT(l, t, c) (0x01000000u | (l) << 16 | (t) << 8 | (c))
#define RECV(l, t, c) (0x02000000u | (l) << 16 | (t) << 8 | (c))

/* A placed pair with fault rules on both adapters (each rule is written so that only x's
 * traffic reaches it: y sends one FPDU, the fence's response). */
static NDK_MR *fence_pair(struct dp_pair *p, const char *faults, uint32_t *ytok)
{
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    if (faults)
        setenv("SOFTNDK_FAULTS", faults, 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    o.two_adapters = true;
    o.buf_len = 64 * KiB;
    dp_pair_open(p, &o);
    memset(p->y.buf, 0, p->y.len);
    dp_fill(p->x.buf, 4 * KiB, 31);
    return dp_reg(&p->y, 0, p->y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, ytok);
}

static void post_write(struct dp_pair *p, void *ctx, uint32_t ytok, size_t len)
{
    NDK_SGE g = dp_sge(&p->x, 0, len);
    CHECK_EQ_U64(
        p->x.qp->Dispatch->NdkWrite(p->x.qp, ctx, &g, 1, (uint64_t)(uintptr_t)p->y.buf, ytok, 0),
        STATUS_SUCCESS);
}

/* The fence is FPDU 2 of x's stream; a CRC rule corrupts it: y detects the CRC error and
 * sends its Terminate, the Write was never known placed and completes cancelled. */
TEST(fence_read_corrupted_by_a_crc_rule_ends_the_connection_and_cancels_the_write)
{
    struct dp_pair p;
    uint32_t ytok = 0;
    NDK_MR *ymr = fence_pair(&p, "crc:dir=tx,after_fpdus=1", &ytok);
    post_write(&p, (void *)1, ytok, 100);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(2u, 0u, 2u)); /* MPA / CRC error */
    CHECK_EQ_U64(p.x.link.abort_reason, RECV(2u, 0u, 2u));
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK(memcmp(p.y.buf, p.x.buf, 100) == 0); /* the Write itself was good and placed */
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 1);
    CHECK_EQ_U64(dp_counters(p.ay).CrcErrors, 1);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* A stall rule at the fence: the fence waits, so the Write completes (successfully) only
 * after the stall. */
TEST(fence_read_behind_a_stall_rule_completes_the_write_after_the_stall)
{
    struct dp_pair p;
    uint32_t ytok = 0;
    NDK_MR *ymr = fence_pair(&p, "stall:dir=tx,after_fpdus=1,ms=200", &ytok);
    uint64_t t0 = fixture_now_ms();
    post_write(&p, (void *)1, ytok, 100);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    uint64_t took = fixture_now_ms() - t0;
    dp_check_result(&r, STATUS_SUCCESS, 100, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK_MSG(took >= 190, "the Write completed after %llu ms, inside the 200 ms stall",
              (unsigned long long)took);
    CHECK(memcmp(p.y.buf, p.x.buf, 100) == 0);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    /* the connection goes on: a second Write and its fence */
    post_write(&p, (void *)2, ytok, 200);
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 200, XCTX, (void *)2, NdkOperationTypeWrite);
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 2);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* A terminate rule in place of the fence: x sends the Terminate and aborts; the Write is
 * cancelled. */
TEST(fence_read_replaced_by_a_terminate_rule_cancels_the_write)
{
    struct dp_pair p;
    uint32_t ytok = 0;
    NDK_MR *ymr = fence_pair(&p, "terminate:after_fpdus=1", &ytok);
    post_write(&p, (void *)1, ytok, 100);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.abort_reason, SENT(0u, 0u, 0u)); /* RDMAP / local catastrophic */
    CHECK_EQ_U64(p.y.link.abort_reason, RECV(0u, 0u, 0u));
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 0); /* never cut */
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* A drop rule at the fence: the connection is reset before it; the Write is cancelled. */
TEST(fence_read_cut_off_by_a_drop_rule_cancels_the_write)
{
    struct dp_pair p;
    uint32_t ytok = 0;
    NDK_MR *ymr = fence_pair(&p, "drop:dir=tx,after_fpdus=1", &ytok);
    post_write(&p, (void *)1, ytok, 100);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.abort_status, STATUS_CONNECTION_RESET);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_status, STATUS_CONNECTION_RESET);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* The source check beside the fence: the check attaches to every FPDU record, the fence's
 * (cut by cut_fence, with no payload of the consumer's) included; untouched sources count
 * nothing and every placed Write completes with its data at the peer. */
TEST(fence_read_with_the_source_check_counts_nothing_for_an_untouched_write)
{
    setenv("SOFTNDK_SOURCE_CHECK", "on", 1);
    struct dp_pair p;
    uint32_t ytok = 0;
    NDK_MR *ymr = fence_pair(&p, NULL, &ytok);
    for (int i = 0; i < 5; i++) {
        post_write(&p, (void *)(uintptr_t)(1 + i), ytok, 1000 + (size_t)i);
        NDK_RESULT_EX r;
        dp_expect(p.x.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, 1000 + (ULONG)i, XCTX, (void *)(uintptr_t)(1 + i),
                        NdkOperationTypeWrite);
        CHECK(memcmp(p.y.buf, p.x.buf, 1000 + (size_t)i) == 0);
    }
    SOFTNDK_COUNTERS c = dp_counters(p.ax);
    CHECK_EQ_U64(c.FenceReads, 5);
    CHECK_EQ_U64(c.SourceModified, 0);
    CHECK_EQ_U64(dp_counters(p.ay).CrcErrors, 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

/* The peer's Terminate where the fence's response should be: the Write's placement is not
 * known, so it completes cancelled (the Terminate names no request of ours), the link sees
 * the peer's reason. */
TEST(fence_read_answered_by_the_peers_terminate_cancels_the_write)
{
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side s;
    dp_side_init(&s, a, &o);
    dp_side_create_qp(&s, &o, XCTX);
    int fa, raw;
    dp_tcp_pair(&fa, &raw);
    dp_attach(&s, fa, true);
    NDK_SGE g = dp_sge(&s, 0, 10);
    CHECK_EQ_U64(s.qp->Dispatch->NdkWrite(s.qp, (void *)7, &g, 1, 0x1000, 0x1234, 0),
                 STATUS_SUCCESS);
    uint8_t f[256];
    for (int i = 0; i < 2; i++) { /* the Write, then the fence */
        CHECK(dp_read_exact(raw, f, 2, DP_TIMEOUT_MS));
        size_t total = 2 + sndk_get_be16(f);
        total += (4 - total % 4) % 4 + 4;
        CHECK(total <= sizeof f);
        CHECK(dp_read_exact(raw, f + 2, total - 2, DP_TIMEOUT_MS));
    }
    CHECK_EQ_U64(f[3] & 0x0f, SNDK_OP_READ_REQ);
    NDK_RESULT_EX r;
    CHECK_EQ_U64(dp_poll(s.cq, &r, 1, 30), 0); /* not before the response */
    struct sndk_term t = {.layer = SNDK_TERM_LAYER_RDMAP,
                          .etype = SNDK_TERM_RDMAP_REMOTE_OP,
                          .code = SNDK_TERM_RDMAP_UNSPECIFIED};
    struct sndk_fpdu tf;
    struct iovec iov[8];
    int n = sndk_fpdu_terminate(&tf, 1, &t, true, iov, 8);
    CHECK(n > 0);
    for (int i = 0; i < n; i++)
        dp_write_all(raw, iov[i].iov_base, iov[i].iov_len);
    CHECK(harness_event_wait(&s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(s.link.abort_status, STATUS_CONNECTION_ABORTED);
    CHECK_EQ_U64(s.link.abort_reason, RECV(0u, 2u, 0xffu));
    dp_expect(s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)7, NdkOperationTypeWrite);
    dp_side_close(&s);
    SoftNdkCloseAdapter(a);
    close(raw);
}

/* The receive that resumes a held Send names memory that is not there: the receive
 * completes with an access violation and the connection ends with a Terminate (as without
 * the wait), within a bounded time, not left in the parser's error state. */
TEST(rnr_resume_with_a_receive_of_bad_memory_ends_the_connection)
{
    setenv("SOFTNDK_PROFILE", "roce", 1);
    setenv("SOFTNDK_RNR_WAIT_MS", "5000", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.two_adapters = true;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_post_send(&p.x, (void *)4, 0, 16, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    NDK_SGE g = dp_sge(&p.y, 0, 64);
    g.MemoryRegionToken ^= 0x00ffff00u; /* no region of y's */
    uint64_t t0 = fixture_now_ms();
    CHECK_EQ_U64(p.y.qp->Dispatch->NdkReceive(p.y.qp, (void *)1, &g, 1), STATUS_SUCCESS);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_MSG(fixture_now_ms() - t0 < 2000, "the end took %llu ms (the bound is 5000)",
              (unsigned long long)(fixture_now_ms() - t0));
    CHECK_EQ_U64(p.y.link.abort_status, STATUS_CONNECTION_ABORTED);
    NDK_RESULT_EX r;
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_ACCESS_VIOLATION, 0, YCTX, (void *)1, NdkOperationTypeReceive);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 0);
    dp_pair_close(&p);
}

/* The close of a QP whose connection waits for a receive, under the verifier (warn; strict
 * would abort at the wait's report, docs/verifier.md): the close is no post, so nothing but
 * the late receive is reported, and the wait ends with the close, long before its bound. */
TEST(rnr_close_during_the_wait_under_the_verifier_reports_only_the_late_receive)
{
    setenv("SOFTNDK_PROFILE", "roce", 1);
    setenv("SOFTNDK_RNR_WAIT_MS", "5000", 1);
    setenv("SOFTNDK_VERIFY", "warn", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.two_adapters = true;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_post_send(&p.x, (void *)4, 0, 10, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    uint64_t t0 = fixture_now_ms();
    dp_close_qp(p.y.qp);
    p.y.qp = NULL;
    CHECK_MSG(fixture_now_ms() - t0 < 2000, "the close waited %llu ms",
              (unsigned long long)(fixture_now_ms() - t0));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, 3000));
    SOFTNDK_COUNTERS cy = dp_counters(p.ay);
    for (unsigned rule = 0; rule < SoftNdkVerifyRuleCount; rule++)
        CHECK_EQ_U64(cy.VerifyViolations[rule], rule == SoftNdkVerifyNoReceivePosted ? 1u : 0u);
    CHECK_EQ_U64(cy.RnrTimeouts, 0);
    dp_pair_close(&p);
    unsetenv("SOFTNDK_VERIFY");
}
