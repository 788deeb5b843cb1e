/* CQ paths the public interface cannot reach before the data path exists: solicited receives,
 * direct posting. */
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "device/cq.h"
#include "util/clock.h"
#include "harness.h"

static struct harness_event notified;
static NTSTATUS last_status;

static VOID on_cq(PVOID ctx, NTSTATUS st)
{
    (void)ctx;
    last_status = st;
    harness_event_signal(&notified);
}

static NDK_ADAPTER *open_lo(void)
{
    NDK_ADAPTER *a;
    NDK_VERSION v = {2, 0};
    CHECK_EQ_U64(SoftNdkOpenAdapter(if_nametoindex("lo"), v, NULL, &a), STATUS_SUCCESS);
    return a;
}

static VOID on_closed(PVOID ctx)
{
    harness_event_signal(ctx);
}

/* Close and wait for the close to finish, whether inline or pending. */
static void close_cq(NDK_CQ *cq)
{
    struct harness_event done;
    harness_event_init(&done);
    NTSTATUS st = cq->Dispatch->NdkCloseCq(&cq->Header, on_closed, &done);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        CHECK(harness_event_wait(&done, 1, 5000));
    else
        CHECK_EQ_U64(harness_event_count(&done), 0); /* inline close: no callback */
    harness_event_destroy(&done);
}

static NDK_RESULT_EX receive_result(NTSTATUS st, void *ctx)
{
    NDK_RESULT_EX r = {.Status = st, .BytesTransferred = 8, .RequestContext = ctx,
                       .Type = NdkOperationTypeReceive};
    return r;
}

TEST(cq_solicited_arm_fires_on_solicited_success_only)
{
    harness_event_init(&notified);
    NDK_ADAPTER *a = open_lo();
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 8, on_cq, NULL, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_SOLICITED);
    NDK_RESULT_EX r = receive_result(STATUS_SUCCESS, (void *)1);
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(!harness_event_wait(&notified, 1, 50)); /* an unsolicited success: no callback */
    r.RequestContext = (void *)2;
    CHECK(sndk_cq_post(cq, &r, true));
    CHECK(harness_event_wait(&notified, 1, 5000));
    CHECK_EQ_U64(last_status, STATUS_SUCCESS);
    NDK_RESULT_EX out[4];
    CHECK_EQ_U64(pub->Dispatch->NdkGetCqResultsEx(pub, out, 4), 2);
    CHECK(out[0].RequestContext == (void *)1 && out[1].RequestContext == (void *)2);
    CHECK_EQ_U64(out[1].BytesTransferred, 8);
    close_cq(pub);
    SoftNdkCloseAdapter(a);
}

TEST(cq_overrun_reports_buffer_overflow_and_drops)
{
    harness_event_init(&notified);
    NDK_ADAPTER *a = open_lo();
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 2, on_cq, NULL, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ERRORS);
    NDK_RESULT_EX r = receive_result(STATUS_SUCCESS, NULL);
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(!harness_event_wait(&notified, 1, 50)); /* ERRORS ignores ordinary completions */
    CHECK(!sndk_cq_post(cq, &r, false));
    CHECK(harness_event_wait(&notified, 1, 5000));
    CHECK_EQ_U64(last_status, STATUS_BUFFER_OVERFLOW);
    CHECK(!sndk_cq_post(cq, &r, false));
    NDK_RESULT out[4];
    CHECK_EQ_U64(pub->Dispatch->NdkGetCqResults(pub, out, 4), 0);
    close_cq(pub);
    SoftNdkCloseAdapter(a);
}

struct poster {
    struct sndk_cq *cq;
    unsigned n;
};

static void *post_many(void *arg)
{
    struct poster *p = arg;
    NDK_RESULT_EX r = receive_result(STATUS_SUCCESS, NULL);
    for (unsigned i = 0; i < p->n; i++)
        sndk_cq_post(p->cq, &r, false);
    return NULL;
}

static _Atomic unsigned in_callback, overlaps, callbacks;

static VOID on_cq_count(PVOID ctx, NTSTATUS st)
{
    (void)st;
    NDK_CQ *pub = ctx;
    if (atomic_fetch_add(&in_callback, 1) != 0)
        atomic_fetch_add(&overlaps, 1);
    atomic_fetch_add(&callbacks, 1);
    /* Drain and re-arm from inside the callback, as consumers do. */
    NDK_RESULT out[64];
    while (pub->Dispatch->NdkGetCqResults(pub, out, 64) > 0)
        ;
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    atomic_fetch_sub(&in_callback, 1);
}

static bool some_callback(void *arg)
{
    (void)arg;
    return atomic_load(&callbacks) > 0;
}

TEST(cq_notifications_never_overlap_under_concurrent_posting)
{
    NDK_ADAPTER *a;
    NDK_VERSION v = {2, 0};
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.ProgressThreads = 4;
    CHECK_EQ_U64(SoftNdkOpenAdapter(0, v, &o, &a), STATUS_SUCCESS);
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 1u << 16, on_cq_count, NULL, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    /* The callback drains its own CQ: its context is known only after creation, and nothing
     * can notify before the first arm below. */
    cq->notify_ctx = pub;
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    pthread_t th[3];
    struct poster p = {cq, 5000};
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, post_many, &p);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    /* the posters are done; the first notification may still be on its way */
    CHECK(harness_wait_until(some_callback, NULL, 5000));
    CHECK_EQ_U64(atomic_load(&overlaps), 0);
    close_cq(pub);
    SoftNdkCloseAdapter(a); /* returns only once the last callback returned */
    CHECK_EQ_U64(atomic_load(&in_callback), 0);
}

/* A held-back notification's moderation timer holds a reference while pending (a new interval
 * only moves it); the close cancels it and gives that reference back, so the close completes
 * inline, with no callback. */
TEST(cq_close_cancels_the_moderation_timer_and_its_reference)
{
    harness_event_init(&notified);
    NDK_ADAPTER *a = open_lo();
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 8, on_cq, NULL, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    CHECK_EQ_U64(pub->Dispatch->NdkControlCqInterruptModeration(pub, 10u * 1000 * 1000, MAXULONG),
                 STATUS_SUCCESS);
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    NDK_RESULT_EX r = receive_result(STATUS_SUCCESS, NULL);
    CHECK(sndk_cq_post(cq, &r, false));
    sndk_mutex_lock(&cq->lock);
    bool held_back = cq->moderating && sndk_timer_pending(&cq->mod_timer);
    sndk_mutex_unlock(&cq->lock);
    CHECK(held_back);
    CHECK_EQ_U64(atomic_load(&cq->base.refs), 2); /* open + the pending timer's */
    CHECK_EQ_U64(pub->Dispatch->NdkControlCqInterruptModeration(pub, 20u * 1000 * 1000, MAXULONG),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(atomic_load(&cq->base.refs), 2); /* moved: the same period */
    struct harness_event done;
    harness_event_init(&done);
    CHECK_EQ_U64(pub->Dispatch->NdkCloseCq(&pub->Header, on_closed, &done), STATUS_SUCCESS);
    CHECK_EQ_U64(harness_event_count(&notified), 0);
    SoftNdkCloseAdapter(a);
}

/* The count releases a held-back notification before its interval: one callback, the
 * cancelled timer's reference given back (the close completes, pending only while the
 * notification's work still holds its own). */
TEST(cq_moderation_count_first_gives_back_the_timer_reference)
{
    harness_event_init(&notified);
    NDK_ADAPTER *a = open_lo();
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 8, on_cq, NULL, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    CHECK_EQ_U64(pub->Dispatch->NdkControlCqInterruptModeration(pub, 10u * 1000 * 1000, 2),
                 STATUS_SUCCESS);
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    NDK_RESULT_EX r = receive_result(STATUS_SUCCESS, NULL);
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(harness_event_wait(&notified, 1, 5000));
    sndk_mutex_lock(&cq->lock);
    bool pending = sndk_timer_pending(&cq->mod_timer);
    sndk_mutex_unlock(&cq->lock);
    CHECK(!pending);
    close_cq(pub);
    CHECK_EQ_U64(harness_event_count(&notified), 1);
    SoftNdkCloseAdapter(a);
}

/* The verifier's callback rule (callback_slow) takes out the time a callback spent blocked on
 * softndk's own locks: a CQ notification that polls its CQ while a progress thread, preempted,
 * holds a lock that poll needs did not wait of its own accord. A poll that finds entries takes
 * none, one that finds the CQ empty takes its connection list's to drive them: here the test
 * thread holds that one, for 300 ms against a threshold of 50 ms, under strict (a report would
 * abort the test). */
struct lock_wait_rig {
    struct sndk_cq *cq;
    NDK_CQ *pub;
    _Atomic int locked;
    struct harness_event entered, done;
    uint64_t took_ms, lock_waits;
    ULONG polled, polled_empty;
};

static VOID poll_behind_a_held_lock(PVOID ctx, NTSTATUS st)
{
    (void)st;
    struct lock_wait_rig *r = ctx;
    NDK_RESULT_EX out[4];
    r->polled = r->pub->Dispatch->NdkGetCqResultsEx(r->pub, out, 4); /* no lock taken */
    harness_event_signal(&r->entered);
    while (!atomic_load(&r->locked)) /* spin: a sleep here would be the callback's own wait */
        ;
    uint64_t t0 = sndk_clock_ns(CLOCK_MONOTONIC), w0 = sndk_lock_waited.waits;
    r->polled_empty = r->pub->Dispatch->NdkGetCqResultsEx(r->pub, out, 4);
    r->took_ms = (sndk_clock_ns(CLOCK_MONOTONIC) - t0) / 1000000u;
    r->lock_waits = sndk_lock_waited.waits - w0;
    harness_event_signal(&r->done);
}

TEST(cq_callback_blocked_on_softndk_lock_is_not_slow)
{
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "50", 1) == 0); /* this process only */
    struct lock_wait_rig *r = calloc(1, sizeof *r);
    harness_event_init(&r->entered);
    harness_event_init(&r->done);
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.Verify = SoftNdkVerifyStrict;
    NDK_ADAPTER *a;
    NDK_VERSION v = {2, 0};
    CHECK_EQ_U64(SoftNdkOpenAdapter(if_nametoindex("lo"), v, &o, &a), STATUS_SUCCESS);
    CHECK_EQ_U64(
        a->Dispatch->NdkCreateCq(a, 8, poll_behind_a_held_lock, r, NULL, NULL, NULL, &r->pub),
        STATUS_SUCCESS);
    r->cq = sndk_cq_from(r->pub);
    r->pub->Dispatch->NdkArmCq(r->pub, NDK_CQ_NOTIFY_ANY);
    NDK_RESULT_EX res = receive_result(STATUS_SUCCESS, (void *)1);
    CHECK(sndk_cq_post(r->cq, &res, false));
    CHECK(harness_event_wait(&r->entered, 1, 5000));
    sndk_mutex_lock(&r->cq->conn_lock);
    atomic_store(&r->locked, 1);
    struct timespec hold = {0, 300 * 1000000L};
    nanosleep(&hold, NULL);
    sndk_mutex_unlock(&r->cq->conn_lock);
    CHECK(harness_event_wait(&r->done, 1, 5000));
    CHECK_EQ_U64(r->polled, 1);
    CHECK_EQ_U64(r->polled_empty, 0);
    CHECK(r->took_ms >= 250);  /* it did wait, far past the threshold */
    CHECK(r->lock_waits >= 1); /* and the lock counted it */
    SOFTNDK_COUNTERS c = {.Size = sizeof c};
    CHECK_EQ_U64(SoftNdkQueryCounters(a, &c), STATUS_SUCCESS);
    for (unsigned i = 0; i < SoftNdkVerifyRuleCount; i++)
        CHECK_EQ_U64(c.VerifyViolations[i], 0);
    close_cq(r->pub);
    SoftNdkCloseAdapter(a);
    harness_event_destroy(&r->entered);
    harness_event_destroy(&r->done);
    free(r);
}

/* NdkResizeCq is not among the calls NDKPI makes a consumer serialize with its polls, and a
 * poll takes without the CQ's lock: resizes from a third thread while a producer posts and the
 * consumer polls hand out every completion once, in order, and lose none (an old ring is freed
 * by the poll after, never under one). The producer keeps fewer queued than the smallest depth,
 * so every resize succeeds and nothing overruns. */
struct resize_rig {
    struct sndk_cq *cq;
    NDK_CQ *pub;
    unsigned n;
    atomic_bool done;
    unsigned resizes;
    NTSTATUS bad;
};

static void *produce(void *arg)
{
    struct resize_rig *r = arg;
    uint64_t end = sndk_clock_ns(CLOCK_MONOTONIC) + 10ull * 1000000000u;
    for (unsigned i = 1; i <= r->n && sndk_clock_ns(CLOCK_MONOTONIC) < end;) {
        if (sndk_cq_queued(r->cq) >= 24) {
            sched_yield();
            continue;
        }
        NDK_RESULT_EX res = receive_result(STATUS_SUCCESS, (void *)(uintptr_t)i);
        if (!sndk_cq_post(r->cq, &res, false))
            break;
        i++;
    }
    atomic_store(&r->done, true);
    return NULL;
}

static void *resize_until_done(void *arg)
{
    struct resize_rig *r = arg;
    static const ULONG depths[] = {32, 100, 33, 64, 257};
    for (unsigned k = 0; !atomic_load(&r->done); k++) {
        NTSTATUS st = r->pub->Dispatch->NdkResizeCq(r->pub, depths[k % 5], NULL, NULL);
        if (st != STATUS_SUCCESS) {
            r->bad = st;
            break;
        }
        r->resizes++;
        /* a resize now and then, not a lock held back to back (the producer would starve) */
        struct timespec gap = {0, 20 * 1000};
        nanosleep(&gap, NULL);
    }
    return NULL;
}

TEST(cq_resized_while_polled_hands_out_each_completion_once_in_order)
{
    NDK_ADAPTER *a = open_lo();
    struct resize_rig r = {.n = 100000};
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 64, on_cq, NULL, NULL, NULL, NULL, &r.pub),
                 STATUS_SUCCESS);
    r.cq = sndk_cq_from(r.pub);
    pthread_t tp, tr;
    CHECK(pthread_create(&tp, NULL, produce, &r) == 0);
    CHECK(pthread_create(&tr, NULL, resize_until_done, &r) == 0);
    unsigned next = 1;
    uint64_t end = sndk_clock_ns(CLOCK_MONOTONIC) + 20ull * 1000000000u;
    while (next <= r.n && sndk_clock_ns(CLOCK_MONOTONIC) < end) {
        NDK_RESULT_EX out[7];
        ULONG got = r.pub->Dispatch->NdkGetCqResultsEx(r.pub, out, 7);
        for (ULONG i = 0; i < got; i++, next++)
            CHECK_MSG((uintptr_t)out[i].RequestContext == next, "got %u where %u was next",
                      (unsigned)(uintptr_t)out[i].RequestContext, next);
    }
    pthread_join(tp, NULL);
    pthread_join(tr, NULL);
    CHECK_MSG(next == r.n + 1, "%u of %u completions", next - 1, r.n);
    CHECK_EQ_U64(r.bad, STATUS_SUCCESS);
    CHECK(r.resizes > 10);
    NDK_RESULT_EX extra;
    CHECK_EQ_U64(r.pub->Dispatch->NdkGetCqResultsEx(r.pub, &extra, 1), 0);
    close_cq(r.pub);
    SoftNdkCloseAdapter(a);
}
