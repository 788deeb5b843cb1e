/* Receiver not ready (docs/datapath.md): under the roce profile (RnrWaitMs) a Send that finds
 * no receive posted waits for one instead of ending the connection; under iwarp it is the
 * Terminate at once. Every test sets its profile in the environment (one process per test). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datapath.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)

/* ProviderDisconnectReason: who sent the Terminate, layer/etype/code. */
#define SENT(l, t, c) (0x01000000u | (l) << 16 | (t) << 8 | (c))
#define RECV(l, t, c) (0x02000000u | (l) << 16 | (t) << 8 | (c))

static void open_pair(struct dp_pair *p, const char *profile, const char *wait_ms)
{
    setenv("SOFTNDK_PROFILE", profile, 1);
    if (wait_ms)
        setenv("SOFTNDK_RNR_WAIT_MS", wait_ms, 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.two_adapters = true; /* y's counters are y's alone */
    dp_pair_open(p, &o);
}

TEST(rnr_roce_early_send_waits_and_is_delivered_when_the_receive_comes)
{
    struct dp_pair p;
    open_pair(&p, "roce", NULL);
    dp_fill(p.x.buf, 64, 7);
    dp_post_send(&p.x, (void *)4, 0, 64, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    usleep(50 * 1000); /* within the bound (1000 ms): nothing ends */
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    dp_post_recv(&p.y, (void *)1, 0, 100);
    NDK_RESULT_EX r;
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 64, YCTX, (void *)1, NdkOperationTypeReceive);
    CHECK(memcmp(p.x.buf, p.y.buf, 64) == 0);
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 64, XCTX, (void *)4, NdkOperationTypeSend);
    SOFTNDK_COUNTERS c = dp_counters(p.ay);
    CHECK_EQ_U64(c.RnrWaits, 1);
    CHECK_EQ_U64(c.RnrTimeouts, 0);
    CHECK_EQ_U64(c.TerminatesSent[1], 0);
    /* the connection goes on: a second exchange, receive posted first, does not wait */
    dp_post_recv(&p.y, (void *)2, 100, 100);
    dp_post_send(&p.x, (void *)5, 0, 10, 0);
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 10, YCTX, (void *)2, NdkOperationTypeReceive);
    dp_expect(p.x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 10, XCTX, (void *)5, NdkOperationTypeSend);
    CHECK_EQ_U64(dp_counters(p.ay).RnrWaits, 1);
    dp_pair_close(&p);
}

TEST(rnr_roce_sends_queued_behind_the_held_one_arrive_in_order)
{
    struct dp_pair p;
    open_pair(&p, "roce", NULL);
    for (int i = 0; i < 3; i++) {
        p.x.buf[i * 16] = (uint8_t)(0xA0 + i);
        dp_post_send(&p.x, (void *)(uintptr_t)(10 + i), (size_t)i * 16, 16, 0);
    }
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    for (int i = 0; i < 3; i++) {
        dp_post_recv(&p.y, (void *)(uintptr_t)(20 + i), (size_t)i * 100, 100);
        usleep(5 * 1000); /* one at a time: each later Send waits again */
    }
    NDK_RESULT_EX r[3];
    dp_expect(p.y.cq, r, 3, 20);
    for (int i = 0; i < 3; i++) {
        dp_check_result(&r[i], STATUS_SUCCESS, 16, YCTX, (void *)(uintptr_t)(20 + i),
                        NdkOperationTypeReceive);
        CHECK_EQ_U64(p.y.buf[i * 100], 0xA0 + i);
    }
    dp_expect(p.x.cq, r, 3, 20);
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_pair_close(&p);
}

TEST(rnr_iwarp_send_without_receive_is_the_terminate_at_once)
{
    struct dp_pair p;
    open_pair(&p, "iwarp", NULL);
    dp_post_send(&p.x, (void *)4, 0, 10, 0);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(1u, 2u, 2u)); /* DDP / untagged / no buffer */
    CHECK_EQ_U64(p.x.link.abort_reason, RECV(1u, 2u, 2u));
    SOFTNDK_COUNTERS c = dp_counters(p.ay);
    CHECK_EQ_U64(c.RnrWaits, 0);
    CHECK_EQ_U64(c.RnrTimeouts, 0);
    dp_pair_close(&p);
}

TEST(rnr_timeout_is_the_same_terminate_after_the_bound)
{
    struct dp_pair p;
    open_pair(&p, "roce", "200");
    uint64_t t0 = fixture_now_ms();
    dp_post_send(&p.x, (void *)4, 0, 10, 0);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    uint64_t took = fixture_now_ms() - t0;
    CHECK_MSG(took >= 190, "the wait ended after %llu ms, before its 200 ms bound",
              (unsigned long long)took);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_status, STATUS_CONNECTION_ABORTED);
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(1u, 2u, 2u));
    CHECK_EQ_U64(p.x.link.abort_reason, RECV(1u, 2u, 2u));
    NDK_RESULT_EX r;
    /* the Send was in TCP: iWARP has no per-Send acknowledgement (docs/decisions.md) */
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 10, XCTX, (void *)4, NdkOperationTypeSend);
    dp_expect(p.y.cq, &r, 0, 20);
    SOFTNDK_COUNTERS c = dp_counters(p.ay);
    CHECK_EQ_U64(c.RnrWaits, 1);
    CHECK_EQ_U64(c.RnrTimeouts, 1);
    CHECK_EQ_U64(c.TerminatesSent[1], 1);
    /* a receive posted after the end completes flushed */
    dp_post_recv(&p.y, (void *)1, 0, 100);
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_pair_close(&p);
}

TEST(rnr_explicit_off_overrides_the_roce_profile)
{
    struct dp_pair p;
    open_pair(&p, "roce", "off");
    dp_post_send(&p.x, (void *)4, 0, 10, 0);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(1u, 2u, 2u));
    CHECK_EQ_U64(dp_counters(p.ay).RnrWaits, 0);
    dp_pair_close(&p);
}

TEST(rnr_close_of_the_waiting_qp_ends_the_wait_at_once)
{
    struct dp_pair p;
    open_pair(&p, "roce", "5000");
    dp_post_send(&p.x, (void *)4, 0, 10, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    uint64_t t0 = fixture_now_ms();
    dp_close_qp(p.y.qp);
    p.y.qp = NULL;
    CHECK_MSG(fixture_now_ms() - t0 < 2000, "the close waited %llu ms for the bound",
              (unsigned long long)(fixture_now_ms() - t0));
    /* the peer learns it from the socket, long before the 5 s bound */
    CHECK(harness_event_wait(&p.x.link.aborted, 1, 3000));
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 0);
    dp_pair_close(&p);
}

TEST(rnr_peer_disconnect_during_the_wait_ends_it_within_the_bound)
{
    struct dp_pair p;
    open_pair(&p, "roce", "300");
    dp_post_send(&p.x, (void *)4, 0, 10, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    /* the sender disconnects gracefully: its FIN sits behind the held Send, so y does not
     * see it; the bound ends y's wait with the Terminate, x's disconnect completes */
    uint64_t t0 = fixture_now_ms();
    sndk_qp_shutdown((struct sndk_qp *)p.x.qp, 5000);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(1u, 2u, 2u));
    CHECK(harness_event_wait(&p.x.link.shutdown_done, 1, DP_TIMEOUT_MS));
    CHECK_MSG(fixture_now_ms() - t0 < 5000, "the disconnect took %llu ms",
              (unsigned long long)(fixture_now_ms() - t0));
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 1);
    dp_pair_close(&p);
}

TEST(rnr_srq_post_resumes_the_waiting_connection)
{
    setenv("SOFTNDK_PROFILE", "roce", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    memset(&p, 0, sizeof p);
    p.ax = dp_open_adapter();
    p.ay = dp_open_adapter();
    dp_side_init(&p.x, p.ax, &o);
    dp_side_init(&p.y, p.ay, &o);
    CHECK_EQ_U64(p.y.pd->Dispatch->NdkCreateSrq(p.y.pd, 16, o.rsge, 0, NULL, NULL, NULL, NULL,
                                                NULL, &p.y.srq),
                 STATUS_SUCCESS);
    dp_side_create_qp(&p.x, &o, XCTX);
    dp_side_create_qp(&p.y, &o, YCTX);
    int a, b;
    dp_tcp_pair(&a, &b);
    dp_attach(&p.x, a, o.crc);
    dp_attach(&p.y, b, o.crc);
    dp_post_send(&p.x, (void *)4, 0, 32, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    NDK_SGE sge = dp_sge(&p.y, 0, 100);
    CHECK_EQ_U64(p.y.srq->Dispatch->NdkSrqReceive(p.y.srq, (void *)1, &sge, 1), STATUS_SUCCESS);
    NDK_RESULT_EX r;
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 32, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 32, XCTX, (void *)4, NdkOperationTypeSend);
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 0);
    dp_pair_close(&p);
}

TEST(rnr_the_verifier_names_the_late_receiver_and_the_connection_survives)
{
    setenv("SOFTNDK_VERIFY", "warn", 1);
    struct dp_pair p;
    open_pair(&p, "roce", NULL);
    dp_post_send(&p.x, (void *)4, 0, 16, 0);
    CHECK(dp_wait_rnr(p.ay, 1, DP_TIMEOUT_MS));
    dp_post_recv(&p.y, (void *)1, 0, 100);
    NDK_RESULT_EX r;
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 16, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_expect(p.x.cq, &r, 1, 20);
    SOFTNDK_COUNTERS cy = dp_counters(p.ay), cx = dp_counters(p.ax);
    CHECK_EQ_U64(cy.VerifyViolations[SoftNdkVerifyNoReceivePosted], 1); /* the late side */
    CHECK_EQ_U64(cx.VerifyViolations[SoftNdkVerifyNoReceivePosted], 0);
    CHECK_EQ_U64(cy.RnrWaits, 1);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_pair_close(&p);
    unsetenv("SOFTNDK_VERIFY");
}

/* Three connections wait on one SRQ; the one listed between the two others closes, which takes
 * it off the SRQ's list from the middle; the two receives posted then reach the two still
 * waiting, whose Sends complete. The list is the waiters' own links (struct sndk_rnr_waiter). */
TEST(rnr_srq_three_waiters_one_leaves_from_the_middle_the_others_resume)
{
    setenv("SOFTNDK_PROFILE", "roce", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *ax = dp_open_adapter(), *ay = dp_open_adapter();
    struct dp_side x[3], y[3];
    dp_side_init(&y[0], ay, &o);
    CHECK_EQ_U64(y[0].pd->Dispatch->NdkCreateSrq(y[0].pd, 16, o.rsge, 0, NULL, NULL, NULL, NULL,
                                                 NULL, &y[0].srq),
                 STATUS_SUCCESS);
    for (int i = 0; i < 3; i++) {
        if (i > 0) {
            y[i] = y[0]; /* the same PD, CQ, MR and SRQ; a QP and link events of its own */
            harness_event_init(&y[i].link.peer_closed);
            harness_event_init(&y[i].link.aborted);
            harness_event_init(&y[i].link.shutdown_done);
        }
        dp_side_create_qp(&y[i], &o, YCTX);
        dp_side_init(&x[i], ax, &o);
        dp_side_create_qp(&x[i], &o, XCTX);
        int a, b;
        dp_tcp_pair(&a, &b);
        dp_attach(&x[i], a, o.crc);
        dp_attach(&y[i], b, o.crc);
    }
    for (int i = 0; i < 3; i++) {
        dp_post_send(&x[i], (void *)(uintptr_t)(10 + i), 0, 32, 0);
        CHECK(dp_wait_rnr(ay, (uint64_t)i + 1, DP_TIMEOUT_MS)); /* listed in this order */
    }
    dp_close_qp(y[1].qp);
    y[1].qp = NULL;
    CHECK(harness_event_wait(&x[1].link.aborted, 1, DP_TIMEOUT_MS));
    for (uintptr_t k = 1; k <= 2; k++) {
        NDK_SGE sge = dp_sge(&y[0], 128 * k, 100);
        CHECK_EQ_U64(y[0].srq->Dispatch->NdkSrqReceive(y[0].srq, (void *)k, &sge, 1),
                     STATUS_SUCCESS);
    }
    NDK_RESULT_EX r[2];
    dp_expect(y[0].cq, r, 2, 20);
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_U64(r[k].Status, STATUS_SUCCESS);
        CHECK_EQ_U64(r[k].BytesTransferred, 32);
    }
    CHECK(r[0].RequestContext != r[1].RequestContext);
    NDK_RESULT_EX s;
    dp_expect(x[0].cq, &s, 1, 20);
    dp_check_result(&s, STATUS_SUCCESS, 32, XCTX, (void *)10, NdkOperationTypeSend);
    dp_expect(x[2].cq, &s, 1, 20);
    dp_check_result(&s, STATUS_SUCCESS, 32, XCTX, (void *)12, NdkOperationTypeSend);
    SOFTNDK_COUNTERS cy = dp_counters(ay);
    CHECK_EQ_U64(cy.RnrWaits, 3);
    CHECK_EQ_U64(cy.RnrTimeouts, 0);
    dp_close_qp(y[2].qp);
    for (int i = 0; i < 3; i++)
        dp_side_close(&x[i]);
    dp_side_close(&y[0]);
    SoftNdkCloseAdapter(ax);
    SoftNdkCloseAdapter(ay);
}

/* The receive posted just as a Send finds the queue empty: posts on another thread one at a
 * time, each after the last completed, so most Sends wait and many meet their receive in the
 * window between the empty look and the wait. Every one must go on when its receive comes (a
 * post that kicked nobody while the wait was being entered is looked at again), none waits out
 * the bound. */
struct rnr_poster {
    struct dp_side *s;
    NDK_ADAPTER *a; /* s's, for its RnrWaits */
    unsigned n;
    atomic_uint received; /* by the test thread */
    atomic_bool stop;
};

static void *post_one_at_a_time(void *arg)
{
    struct rnr_poster *p = arg;
    /* the first receive only once the first Send waits for it: at least one wait, however
     * the threads are scheduled (under a sanitizer the poster may always be ahead after) */
    if (!dp_wait_rnr(p->a, 1, DP_TIMEOUT_MS))
        return NULL;
    for (unsigned i = 0; i < p->n && !atomic_load(&p->stop);) {
        if (atomic_load(&p->received) < i) {
            sched_yield();
            continue;
        }
        /* 0-12 µs late: most Sends find the queue empty, some just as the receive lands */
        uint64_t until = fixture_now_us() + i % 13;
        while (fixture_now_us() < until)
            ;
        dp_post_recv(p->s, (void *)(uintptr_t)(i + 1), 0, 64);
        i++;
    }
    return NULL;
}

TEST(rnr_roce_receives_posted_as_sends_wait_each_deliver_one)
{
    struct dp_pair p;
    open_pair(&p, "roce", "3000"); /* a lost wake-up would be a Terminate after 3 s */
    const unsigned n = 2000;
    struct rnr_poster rp = {.s = &p.y, .a = p.ay, .n = n};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, post_one_at_a_time, &rp) == 0);
    unsigned sent = 0, sends_done = 0, received = 0;
    uint64_t end = fixture_now_ms() + 4 * DP_TIMEOUT_MS;
    while (received < n && fixture_now_ms() < end && harness_event_count(&p.y.link.aborted) == 0) {
        if (sent < n && sent - sends_done < 32) {
            dp_post_send(&p.x, (void *)(uintptr_t)(sent + 1), 0, 16, 0);
            sent++;
        }
        NDK_RESULT_EX r[16];
        ULONG got = p.x.cq->Dispatch->NdkGetCqResultsEx(p.x.cq, r, 16);
        for (ULONG i = 0; i < got; i++)
            CHECK_EQ_U64(r[i].Status, STATUS_SUCCESS);
        sends_done += got;
        got = p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, r, 16);
        for (ULONG i = 0; i < got; i++) {
            CHECK_EQ_U64(r[i].Status, STATUS_SUCCESS);
            CHECK_EQ_U64((uintptr_t)r[i].RequestContext, received + 1);
            received++;
        }
        atomic_store(&rp.received, received);
    }
    atomic_store(&rp.stop, true);
    pthread_join(t, NULL);
    CHECK_MSG(received == n, "%u of %u Sends received", received, n);
    CHECK(dp_counters(p.ay).RnrWaits > 0); /* the wait was entered (the first Send's at least) */
    CHECK_EQ_U64(dp_counters(p.ay).RnrTimeouts, 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_pair_close(&p);
}
