/* Callbacks that a call makes due before it returns (docs/verifier.md, "Callbacks a call fires
 * before it returns"): the verifier never names a correct consumer for them. NdkArmCq that finds
 * a completion already queued fires the notification at once, and the callback polls the CQ on
 * a progress thread while the arming thread may still be inside NdkArmCq; a Write completes
 * inside NdkWrite, and its completion callback posts the next Write while the first NdkWrite
 * may still be running. Both are the ordinary NDK
 * pattern (arm from one thread, poll and post in the callback). Each is done thousands of times
 * under strict, where a report aborts the process; the callback keeps calling while the caller
 * has not returned yet (bounded), so that every overlap that can happen does. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "fixture.h"
#include "harness.h"
#include "rig.h"

#define REENTRY_ROUNDS   20000u
#define REENTRY_SPIN_US  500u /* how long a callback keeps calling while the caller is inside */
#define REENTRY_BOUND_MS 60000u

struct reentry {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    uint8_t buf[4096];
    struct harness_event done; /* one per callback */
    atomic_bool caller_inside; /* the main thread has not returned from its call yet */
    unsigned results;          /* completions the callbacks took */
    unsigned overlaps;         /* callbacks that ran while the caller was still inside */
};

/* Every thread of the process on one CPU (threads created later inherit it): the progress
 * thread that a call wakes then tends to preempt the caller at once, so that the callback runs
 * while the caller is still inside the call, the overlap these tests are about. */
static void one_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &set);
    CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

/* The notification: poll what is there and, while the caller is still inside its call, keep
 * polling for up to REENTRY_SPIN_US. Never waits. */
static void reentry_notify(void *ctx, NTSTATUS st)
{
    (void)st;
    struct reentry *r = ctx;
    NDK_RESULT res[4];
    uint64_t until = fixture_now_us() + REENTRY_SPIN_US;
    bool overlapped = false;
    do {
        r->results += r->cq->Dispatch->NdkGetCqResults(r->cq, res, 4);
        if (!atomic_load(&r->caller_inside))
            break;
        overlapped = true;
    } while (fixture_now_us() < until);
    r->overlaps += overlapped;
    harness_event_signal(&r->done);
}

/* What every test here runs under: the callback threshold for this process only, as a loaded
 * machine can stall a callback inside the kernel and the callbacks here spin up to
 * REENTRY_SPIN_US and never wait (docs/verifier.md, "The suites under strict"); and one CPU. */
static void reentry_process(void)
{
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "1000", 1) == 0);
    one_cpu();
}

/* No verifier rule counted on a; `who` starts the failure message. */
static void check_no_violations(NDK_ADAPTER *a, const char *who)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    for (int i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        CHECK_MSG(c.VerifyViolations[i] == 0, "%sVerifyViolations[%d] = %llu", who, i,
                  (unsigned long long)c.VerifyViolations[i]);
}

static void reentry_open(struct reentry *r)
{
    memset(r, 0, sizeof *r);
    harness_event_init(&r->done);
    reentry_process();
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    o.Verify = SoftNdkVerifyStrict;
    r->a = fx_open_with(&o);
    rig_objects_open(r->a, reentry_notify, r, r->buf, sizeof r->buf, &r->pd, &r->cq, &r->qp,
                     &r->mr);
}

/* No rule counted, and the adapter closes saying so. */
static void reentry_close(struct reentry *r)
{
    check_no_violations(r->a, "");
    fixture_close_wait(&r->qp->Header);
    fixture_close_wait(&r->mr->Header);
    fixture_close_wait(&r->cq->Header);
    fixture_close_wait(&r->pd->Header);
    ndk_close_adapter(r->a);
    harness_event_destroy(&r->done);
}

/* [CQ-3], [CQ-6]: a completion is queued (a receive flushed on the idle QP, no arm yet); the arm
 * finds it and fires at once; the callback polls while NdkArmCq may not have returned. */
TEST(arm_that_fires_at_once_and_a_callback_that_polls_are_not_named)
{
    struct reentry *r = malloc(sizeof *r);
    CHECK(r != NULL);
    reentry_open(r);
    uint64_t t0 = fixture_now_ms();
    for (unsigned i = 0; i < REENTRY_ROUNDS; i++) {
        NDK_SGE sge = rig_sge(r->buf, r->mr);
        CHECK_STATUS(r->qp->Dispatch->NdkReceive(r->qp, (void *)(uintptr_t)(i + 1), &sge, 1),
                     STATUS_SUCCESS);
        r->qp->Dispatch->NdkFlush(r->qp); /* one cancelled completion, queued */
        atomic_store(&r->caller_inside, true);
        r->cq->Dispatch->NdkArmCq(r->cq, NDK_CQ_NOTIFY_ANY);
        atomic_store(&r->caller_inside, false);
        CHECK_MSG(harness_event_wait(&r->done, i + 1, FIXTURE_WAIT_MS), "round %u: no notification",
                  i);
        CHECK_MSG(fixture_now_ms() - t0 < REENTRY_BOUND_MS, "round %u: past the bound", i);
    }
    CHECK_EQ_U64(r->results, REENTRY_ROUNDS);
    fprintf(stderr, "%u rounds, %u callback(s) polled while NdkArmCq had not returned\n",
            REENTRY_ROUNDS, r->overlaps);
    reentry_close(r);
    free(r);
}

/* [POST-2], over a connected pair: the caller's post completes inside the call, its completion
 * fires the armed notification, and the callback polls it and posts again on the same queue
 * while the caller's call may not have returned. The two tests below differ in the queue and
 * so in how they post (post_rig.post). */
struct post_rig {
    struct fx_pair *p;
    atomic_bool caller_inside;
    unsigned overlaps, posts, results;
    /* one post on s's queue, RequestContext ctx */
    NTSTATUS (*post)(struct post_rig *w, struct fx_side *s, uintptr_t ctx);
};

/* The notification: poll what is there and, while the caller is still inside its call, keep
 * polling for up to REENTRY_SPIN_US, posting once (RequestContext 0x5151). Never waits. */
static void post_again(struct fx_side *s, void *arg)
{
    struct post_rig *w = arg;
    NDK_RESULT res[4];
    uint64_t until = fixture_now_us() + REENTRY_SPIN_US;
    bool overlapped = false, posted = false;
    do {
        w->results += s->cq->Dispatch->NdkGetCqResults(s->cq, res, 4);
        if (!atomic_load(&w->caller_inside))
            break;
        overlapped = true;
        if (!posted) {
            CHECK_STATUS(w->post(w, s, 0x5151), STATUS_SUCCESS);
            posted = true;
            w->posts++;
        }
    } while (fixture_now_us() < until);
    w->overlaps += overlapped;
}

/* Both adapters under strict, in reentry_process()'s conditions; the client's Writes complete
 * when handed to TCP where handed_writes. */
static struct fx_pair *strict_pair(bool handed_writes)
{
    reentry_process();
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, NULL);
    fx_options(&os, NULL);
    oc.Verify = os.Verify = SoftNdkVerifyStrict;
    if (handed_writes)
        oc.WriteCompletion = SoftNdkWriteCompletionHanded;
    return fx_pair_open_with(&oc, &os, 1u << 16, 16, 16);
}

/* With s's notification going to post_again, REENTRY_ROUNDS rounds on s: take what is on its CQ
 * (no callback can run now, none armed), arm it, and post (round i + 1) marked as inside the
 * call; each round's notification comes within the bounds. */
static void post_rounds(struct post_rig *w, struct fx_side *s)
{
    s->on_notify_arg = w;
    s->on_notify = post_again;
    unsigned base = harness_event_count(&s->cq_ev);
    uint64_t t0 = fixture_now_ms();
    NDK_RESULT res[4];
    for (unsigned i = 0; i < REENTRY_ROUNDS; i++) {
        unsigned n;
        while ((n = s->cq->Dispatch->NdkGetCqResults(s->cq, res, 4)) > 0)
            w->results += n;
        s->cq->Dispatch->NdkArmCq(s->cq, NDK_CQ_NOTIFY_ANY);
        atomic_store(&w->caller_inside, true);
        NTSTATUS st = w->post(w, s, i + 1);
        atomic_store(&w->caller_inside, false);
        CHECK_STATUS(st, STATUS_SUCCESS);
        CHECK_MSG(harness_event_wait(&s->cq_ev, base + i + 1, FIXTURE_WAIT_MS),
                  "round %u: no notification", i);
        CHECK_MSG(fixture_now_ms() - t0 < REENTRY_BOUND_MS, "round %u: past the bound", i);
    }
}

/* No verifier rule counted on either side of the pair. */
static void check_pair_clean(struct fx_pair *p)
{
    check_no_violations(p->ac, "side 0: ");
    check_no_violations(p->as, "side 1: ");
}

/* A Write completes inside NdkWrite (WriteCompletion handed: when its bytes are in TCP); the
 * callback posts the next Write on the same initiator queue. */
static NTSTATUS post_write(struct post_rig *w, struct fx_side *s, uintptr_t ctx)
{
    return fx_try_write(s, ctx, 0, 64, &w->p->sv, 0, 0);
}

TEST(write_whose_completion_callback_posts_again_is_not_named)
{
    struct post_rig w = {.p = strict_pair(true), .post = post_write};
    struct fx_side *cl = &w.p->cl;
    unsigned base = harness_event_count(&cl->cq_ev);
    post_rounds(&w, cl);
    NDK_RESULT res[4];
    uint64_t end = fixture_now_ms() + FIXTURE_WAIT_MS;
    while (w.results < REENTRY_ROUNDS + w.posts && fixture_now_ms() < end) {
        unsigned n = cl->cq->Dispatch->NdkGetCqResults(cl->cq, res, 4);
        w.results += n;
    }
    CHECK_EQ_U64(harness_event_count(&cl->cq_ev) - base, REENTRY_ROUNDS);
    CHECK_EQ_U64(w.results, REENTRY_ROUNDS + w.posts);
    fprintf(stderr, "%u rounds, %u Write(s) posted by callbacks while NdkWrite had not returned\n",
            REENTRY_ROUNDS, w.posts);
    cl->on_notify = NULL;
    fx_disconnect(cl, &w.p->sv);
    check_pair_clean(w.p);
    fx_pair_close(w.p);
}

/* The receive queue: a receive posted on a QP in its error state (NdkFlush of the live
 * connection put it there) completes at once, flushed, from inside NdkReceive; the callback
 * posts the next receive on the same queue. */
static NTSTATUS post_receive(struct post_rig *w, struct fx_side *s, uintptr_t ctx)
{
    (void)w;
    NDK_SGE g = fx_sge(s, 0, 64);
    return s->qp->Dispatch->NdkReceive(s->qp, (void *)ctx, &g, 1);
}

TEST(receive_whose_completion_callback_posts_again_is_not_named)
{
    struct post_rig w = {.p = strict_pair(false), .post = post_receive};
    struct fx_side *sv = &w.p->sv;
    sv->qp->Dispatch->NdkFlush(sv->qp); /* the error state: receives complete at once */
    post_rounds(&w, sv);
    NDK_RESULT res[4];
    unsigned n;
    while ((n = sv->cq->Dispatch->NdkGetCqResults(sv->cq, res, 4)) > 0)
        w.results += n;
    CHECK_EQ_U64(w.results, REENTRY_ROUNDS + w.posts);
    fprintf(stderr,
            "%u rounds, %u receive(s) posted by callbacks while NdkReceive had not returned\n",
            REENTRY_ROUNDS, w.posts);
    sv->on_notify = NULL;
    check_pair_clean(w.p);
    fx_pair_close(w.p);
}
