/* Parking (docs/datapath.md, "Who receives"): the progress thread stops reading a connection
 * while its consumer polls, and must never leave it unread once the consumer blocks. */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "datapath.h"
#include "device/cq.h"
#include "datapath/conn.h"

#define YCTX ((void *)0x2002) /* dp_pair_open's QP context of y */

/* NDK's blocking idiom: arm, look once more, then wait. That last look must not count as
 * polling: the progress thread would park the connection while the consumer sleeps, and a
 * message longer than one receive pass would wait for the park timer. */
TEST(armed_last_look_does_not_mark_the_cq_polled)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_cq *cq = sndk_cq_from(p.y.cq);
    NDK_RESULT_EX r;

    CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    CHECK(sndk_cq_polling(cq));
    p.y.cq->Dispatch->NdkArmCq(p.y.cq, NDK_CQ_NOTIFY_ANY);
    CHECK(!sndk_cq_polling(cq));
    CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    CHECK(!sndk_cq_polling(cq));

    dp_post_recv(&p.y, (void *)1, 0, 64);
    dp_post_send(&p.x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS);
    CHECK(harness_event_wait(&p.y.cq_notified, 1, DP_TIMEOUT_MS));
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 40, YCTX, (void *)1, NdkOperationTypeReceive);
    /* polling again after the notification does count */
    CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    CHECK(sndk_cq_polling(cq));
    dp_pair_close(&p);
}

/* The idiom end to end with messages of many FPDUs, every byte checked: each message is
 * received by the progress thread while the consumer sleeps. */
TEST(blocking_consumer_receives_multi_fpdu_messages)
{
    enum { MSGS = 24, LEN = 256 * 1024 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    o.buf_len = 2 * LEN;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    NDK_RESULT_EX r;
    for (unsigned i = 0; i < MSGS; i++) {
        dp_fill(p.x.buf, LEN, i + 1);
        memset(p.y.buf + LEN, 0, LEN);
        dp_post_recv(&p.y, (void *)(uintptr_t)(i + 1), LEN, LEN);
        /* poll empty (as a consumer finishing its previous batch), arm, look once more */
        CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
        unsigned seen = harness_event_count(&p.y.cq_notified);
        p.y.cq->Dispatch->NdkArmCq(p.y.cq, NDK_CQ_NOTIFY_ANY);
        CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
        dp_post_send(&p.x, NULL, 0, LEN, NDK_OP_FLAG_SILENT_SUCCESS);
        CHECK_MSG(harness_event_wait(&p.y.cq_notified, seen + 1, DP_TIMEOUT_MS),
                  "message %u: no notification", i);
        dp_expect(p.y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, LEN, YCTX, (void *)(uintptr_t)(i + 1),
                        NdkOperationTypeReceive);
        CHECK(memcmp(p.x.buf, p.y.buf + LEN, LEN) == 0);
    }
    dp_pair_close(&p);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t quiet_until(NDK_QP *qp)
{
    return atomic_load(&((struct sndk_qp *)qp)->io->rx_quiet_until_ns);
}

/* Empty polls right after a message (docs/datapath.md): a polled pass that took a message and
 * emptied the socket between two FPDUs keeps the next polls from reading for
 * SNDK_RX_QUIET_NS; a pass that emptied it inside a payload sets no quiet window (its back-off
 * is the payload's); and a poll that keeps polling through the window receives what came
 * meanwhile: ping-pongs of every size, every byte checked, both ends polling. */
TEST(poll_after_a_message_waits_a_microsecond_and_loses_nothing)
{
    enum { ROUNDS = 200, MAX = 300 * 1024 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    o.buf_len = 2 * MAX;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    NDK_RESULT_EX r;

    /* one small message, taken by a poll (the progress thread is held, so no pass of its
     * own takes it): the window is set, and ends within 1 µs of the pass */
    dp_hold_progress(p.ay);
    dp_post_recv(&p.y, (void *)1, 0, 64);
    uint64_t before = mono_ns();
    dp_post_send(&p.x, NULL, 0, 64, NDK_OP_FLAG_SILENT_SUCCESS);
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 64, YCTX, (void *)1, NdkOperationTypeReceive);
    uint64_t q = quiet_until(p.y.qp);
    uint64_t after = mono_ns();
    CHECK_MSG(q > before && q <= after + SNDK_RX_QUIET_NS, "quiet until %llu, the poll ran %llu..%llu",
              (unsigned long long)q, (unsigned long long)before, (unsigned long long)after);
    /* a 300 KiB message read by polls (x's polls push its side): the pass that took its last
     * FPDU emptied the socket between FPDUs, so the window is set again */
    dp_post_recv(&p.y, (void *)2, MAX, MAX);
    dp_post_send(&p.x, NULL, 0, MAX, NDK_OP_FLAG_SILENT_SUCCESS);
    unsigned got = 0;
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    while (!got && fixture_now_ms() < end) {
        got = p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1);
        /* x's polls push what its full socket held back (its progress thread is held too) */
        CHECK_EQ_U64(p.x.cq->Dispatch->NdkGetCqResultsEx(p.x.cq, &(NDK_RESULT_EX){0}, 1), 0);
    }
    CHECK_EQ_U64(got, 1);
    dp_check_result(&r, STATUS_SUCCESS, MAX, YCTX, (void *)2, NdkOperationTypeReceive);
    /* where an empty poll costs nothing (the same-host stream, once the consumer's polls
     * parked the connection: poll_only), a poll reads at once and no window is kept */
    const struct sndk_stream *ys = &((struct sndk_qp *)p.y.qp)->io->stream;
    if (ys->ops->cheap_empty_polls && ys->poll_only)
        CHECK_EQ_U64(quiet_until(p.y.qp), 0);
    else
        CHECK(quiet_until(p.y.qp) != 0);
    dp_release_progress();

    /* ping-pong: sizes from 1 byte to 300 KiB, x and y each answering what it got */
    for (unsigned i = 0; i < ROUNDS; i++) {
        size_t len = 1 + ((size_t)i * 7919u * (i % 3 ? 1u : 37u)) % MAX;
        struct dp_side *from = i % 2 ? &p.y : &p.x, *to = i % 2 ? &p.x : &p.y;
        dp_fill(from->buf, len, i + 7);
        memset(to->buf + MAX, 0xee, MAX);
        dp_post_recv(to, (void *)(uintptr_t)(i + 10), MAX, MAX);
        dp_post_send(from, NULL, 0, len, NDK_OP_FLAG_SILENT_SUCCESS);
        dp_expect(to->cq, &r, 1, 0);
        CHECK_EQ_U64(r.Status, STATUS_SUCCESS);
        CHECK_EQ_U64(r.BytesTransferred, len);
        CHECK_EQ_U64((uintptr_t)r.RequestContext, i + 10);
        CHECK_MSG(memcmp(to->buf + MAX, from->buf, len) == 0, "round %u (%zu bytes)", i, len);
        CHECK_MSG(len == MAX || to->buf[MAX + len] == 0xee, "round %u: a byte past the message", i);
    }
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_pair_close(&p);
}

static bool cq_parked_is(struct sndk_cq *cq, unsigned n)
{
    return atomic_load(&cq->parked) == n;
}
static bool one_parked(void *arg)
{
    return cq_parked_is(arg, 1);
}
static bool none_parked(void *arg)
{
    return cq_parked_is(arg, 0);
}
static bool park_check_pending(struct sndk_cq *cq)
{
    sndk_mutex_lock(&cq->lock);
    bool on = sndk_timer_pending(&cq->park_timer);
    sndk_mutex_unlock(&cq->lock);
    return on;
}
static bool park_check_stopped(void *arg)
{
    return !park_check_pending(arg);
}

/* Who reads the connection's stream (enum sndk_rx_park), read as watch.c does, under tx_lock. */
static enum sndk_rx_park park_phase(NDK_QP *ndk_qp)
{
    struct sndk_qp *qp = (struct sndk_qp *)ndk_qp;
    sndk_mutex_lock(&qp->tx_lock);
    enum sndk_rx_park p = (enum sndk_rx_park)qp->io->rx_park;
    sndk_mutex_unlock(&qp->tx_lock);
    return p;
}

/* A consumer whose own polls receive parks the connection itself: the progress thread may
 * never see the bytes arrive (here it is held; over shared memory a fast poll takes the
 * peer's wake byte before the progress thread's epoll reports it), and unparked, every
 * message would cost the sender a wake-up of a thread nobody needs. Only a consumer that
 * polls steadily (SNDK_CQ_STEADY_POLLS empty polls since its last arm): one that drains its
 * CQ after a notification and arms again parks nothing, or each message would pay for a park
 * and an unpark. Arming unparks. */
TEST(a_consumer_whose_polls_receive_parks_the_connection_itself)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_cq *cq = sndk_cq_from(p.y.cq);
    NDK_RESULT_EX r;
    dp_hold_progress(p.ay);
    CHECK(cq_parked_is(cq, 0));
    CHECK_EQ_U64(park_phase(p.y.qp), SNDK_RX_WATCHED);
    for (unsigned i = 0; i < SNDK_CQ_STEADY_POLLS; i++)
        CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    dp_post_recv(&p.y, (void *)1, 0, 64);
    dp_post_send(&p.x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS);
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 40, YCTX, (void *)1, NdkOperationTypeReceive);
    CHECK(cq_parked_is(cq, 1));
    CHECK_EQ_U64(park_phase(p.y.qp), SNDK_RX_PARKED);
    /* the receive side is the consumer's: the progress thread does not watch it */
    CHECK(!atomic_load(&((struct sndk_qp *)p.y.qp)->io->rx_watched));
    dp_release_progress();
    /* the consumer blocks: arming hands the receiving back, and a message then arrives
     * through the progress thread and a notification */
    unsigned seen = harness_event_count(&p.y.cq_notified);
    p.y.cq->Dispatch->NdkArmCq(p.y.cq, NDK_CQ_NOTIFY_ANY);
    CHECK(cq_parked_is(cq, 0));
    CHECK_EQ_U64(park_phase(p.y.qp), SNDK_RX_WATCHED);
    dp_post_recv(&p.y, (void *)2, 0, 64);
    dp_post_send(&p.x, NULL, 0, 50, NDK_OP_FLAG_SILENT_SUCCESS);
    CHECK(harness_event_wait(&p.y.cq_notified, seen + 1, DP_TIMEOUT_MS));
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 50, YCTX, (void *)2, NdkOperationTypeReceive);
    /* the idiom again, its consumer's polls receiving: a drain before the arm parks nothing */
    for (unsigned i = 3; i < 8; i++) {
        p.y.cq->Dispatch->NdkArmCq(p.y.cq, NDK_CQ_NOTIFY_ANY);
        dp_post_recv(&p.y, (void *)(uintptr_t)i, 0, 64);
        dp_post_send(&p.x, NULL, 0, 60, NDK_OP_FLAG_SILENT_SUCCESS);
        ULONG got = 0;
        for (unsigned k = 0; k < 2 && !got; k++)
            got = p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1);
        CHECK_MSG(cq_parked_is(cq, 0), "round %u: a drain parked the connection", i);
        if (!got)
            dp_expect(p.y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, 60, YCTX, (void *)(uintptr_t)i,
                        NdkOperationTypeReceive);
        /* (dp_expect's own wait polls steadily, and may park: the next arm unparks) */
    }
    dp_pair_close(&p);
}

/* A parked connection costs no timer of its own: the CQ's one park check runs while any of its
 * connections is parked, unparks them all once the consumer stopped polling without arming,
 * then stops (idle connections cost nothing). */
TEST(one_park_check_per_cq_unparks_when_the_consumer_stops_polling)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_cq *cq = sndk_cq_from(p.y.cq);
    NDK_RESULT_EX r;
    CHECK(!park_check_pending(cq));
    /* the consumer polls (empty), then a message comes: the progress thread receives it while
     * the CQ counts as polled, and parks the receive side. A progress thread that woke after
     * the poll stamp went stale (a loaded machine, a sanitizer) receives without parking: the
     * round is taken again, a bounded number of times. */
    bool parked = false;
    for (unsigned round = 1; round <= 20 && !parked; round++) {
        CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
        dp_post_recv(&p.y, (void *)(uintptr_t)round, 0, 64);
        dp_post_send(&p.x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS);
        parked = harness_wait_until(one_parked, cq, 100);
        if (parked) {
            CHECK(park_check_pending(cq));
            /* the consumer stops polling, without arming: the check unparks (the poll stamp
             * is stale after SNDK_CQ_POLLING_MS), then, nothing parked, stops */
            CHECK(harness_wait_until(none_parked, cq, DP_TIMEOUT_MS));
            CHECK(harness_wait_until(park_check_stopped, cq, DP_TIMEOUT_MS));
        }
        dp_expect(p.y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, 40, YCTX, (void *)(uintptr_t)round,
                        NdkOperationTypeReceive);
    }
    CHECK_MSG(parked, "the connection never parked in 20 rounds");
    /* The last dp_expect polled: a progress thread woken meanwhile (over shared memory a wake
     * byte can come after its bytes were read by a poll) parks again, and the check then runs
     * until it unparks. Either way it stops. */
    CHECK(harness_wait_until(park_check_stopped, cq, DP_TIMEOUT_MS));
    dp_pair_close(&p);
}

/* How many epoll sets of this process watch fd: each epoll's fdinfo names its targets by
 * "tfd:" (proc(5)), so what the kernel's wake-ups walk is read, not what the code believes. */
static unsigned epoll_sets_watching(int fd)
{
    unsigned sets = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char path[300], target[64], line[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, "anon_inode:[eventpoll]") != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%s", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int tfd;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd)
                sets++;
        fclose(f);
    }
    closedir(d);
    return sets;
}

static void park_by_polling(struct dp_pair *p, unsigned ctx)
{
    NDK_RESULT_EX r;
    for (unsigned i = 0; i < SNDK_CQ_STEADY_POLLS; i++)
        CHECK_EQ_U64(p->y.cq->Dispatch->NdkGetCqResultsEx(p->y.cq, &r, 1), 0);
    dp_post_recv(&p->y, (void *)(uintptr_t)ctx, 0, 64);
    dp_post_send(&p->x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 40, YCTX, (void *)(uintptr_t)ctx, NdkOperationTypeReceive);
    CHECK_EQ_U64(park_phase(p->y.qp), SNDK_RX_PARKED);
}

/* Parked, a socket's connection leaves its progress thread's epoll set altogether: in it, even
 * watched for nothing, every segment's wake-up runs epoll's callback (docs/engine.md, "Quiet
 * sources"). Unparked, it is watched again; parked again, the consumer's own polls see the
 * peer's reset, as the progress thread's hang-up would have. A stream whose fd must stay
 * watched (shared memory: stream.h, parked_quiet) stays in; the reset is seen all the same. */
TEST(a_parked_sockets_connection_leaves_epoll_and_its_polls_see_a_reset)
{
    /* x's second FPDU is never sent: its socket is closed with RST instead */
    setenv("SOFTNDK_FAULTS", "drop:dir=tx,after_fpdus=2", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    o.two_adapters = true; /* the rule is x's adapter's; y's progress thread is held alone */
    struct dp_pair p;
    dp_pair_open(&p, &o);
    unsetenv("SOFTNDK_FAULTS");
    struct sndk_cq *cq = sndk_cq_from(p.y.cq);
    const struct sndk_stream *ys = &((struct sndk_qp *)p.y.qp)->io->stream;
    int yfd = ys->fd;
    unsigned watching = ys->ops->parked_quiet ? 0u : 1u;
    CHECK_EQ_U64(epoll_sets_watching(yfd), 1);

    dp_hold_progress(p.ay);
    park_by_polling(&p, 1);
    CHECK_EQ_U64(epoll_sets_watching(yfd), watching);
    dp_release_progress();
    /* the consumer stops polling without arming: the CQ's park check unparks */
    CHECK(harness_wait_until(none_parked, cq, DP_TIMEOUT_MS));
    CHECK_EQ_U64(epoll_sets_watching(yfd), 1);

    dp_hold_progress(p.ay);
    park_by_polling(&p, 2);
    CHECK_EQ_U64(epoll_sets_watching(yfd), watching);
    /* x's end of the drop (its RST) is its progress thread's work: released, while y's
     * consumer keeps polling, so y stays parked and, over TCP, only its polls read */
    dp_release_progress();
    dp_post_recv(&p.y, (void *)3, 0, 64);
    dp_post_send(&p.x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS); /* its FPDU: the drop */
    NDK_RESULT_EX r;
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    ULONG got = 0; /* the poll that reads the reset may also return the receive it flushed */
    while (!got && sndk_qp_state((struct sndk_qp *)p.y.qp) != SNDK_QP_ERROR &&
           fixture_now_ms() < end) {
        CHECK_EQ_U64(epoll_sets_watching(yfd), watching);
        got = p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1);
    }
    CHECK(sndk_qp_state((struct sndk_qp *)p.y.qp) == SNDK_QP_ERROR);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_status, STATUS_CONNECTION_RESET);
    if (!got)
        dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_CANCELLED, 0, YCTX, (void *)3, NdkOperationTypeReceive);
    dp_pair_close(&p);
}
