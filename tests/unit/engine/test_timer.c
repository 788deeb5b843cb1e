/* Timers: order, lateness bounds, re-arm, cancel semantics, thread choice. */
#include "common.h"

#include <time.h>

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct ttimer {
    struct sndk_timer t;
    struct sndk_engine *e;
    unsigned id;
    uint64_t armed_at, delay, fired_at;
    uint64_t deadline; /* the one the engine computed, read when it fires */
    int thread;
    unsigned rearm; /* re-arm itself this many more times */
    atomic_uint fires;
};

static atomic_uint order_next;
static unsigned order[16];

static void ttimer_fn(struct sndk_timer *t)
{
    struct ttimer *tt = (struct ttimer *)t;
    CHECK(!sndk_timer_pending(t));
    tt->fired_at = mono_us();
    tt->deadline = t->deadline_us;
    tt->thread = sndk_engine_current_thread(tt->e);
    unsigned pos = atomic_fetch_add(&order_next, 1);
    if (pos < 16)
        order[pos] = tt->id;
    if (tt->rearm > 0) {
        tt->rearm--;
        tt->armed_at = mono_us();
        sndk_timer_arm(tt->e, t, tt->delay);
        CHECK(sndk_timer_pending(t));
    }
    atomic_fetch_add(&tt->fires, 1); /* last: the test may reuse tt once it sees this */
}

static void ttimer_init(struct ttimer *tt, struct sndk_engine *e, unsigned id, uint64_t delay)
{
    tt->e = e;
    tt->id = id;
    tt->delay = delay;
    tt->thread = -1;
    tt->rearm = 0;
    atomic_init(&tt->fires, 0);
    sndk_timer_init(&tt->t, ttimer_fn);
}

struct blocking_timer {
    struct sndk_timer t;
    struct harness_event entered, release;
};

static void blocking_fn(struct sndk_timer *t)
{
    struct blocking_timer *b = (struct blocking_timer *)t;
    harness_event_signal(&b->entered);
    CHECK(harness_event_wait(&b->release, 1, WAIT_MS));
}

/* Hold progress thread `thread` inside a timer's fn: nothing else runs on it until
 * hold_release. What a test arms meanwhile cannot fire, however slowly it arms. */
static void hold_thread(struct sndk_engine *e, unsigned thread, struct blocking_timer *b)
{
    harness_event_init(&b->entered);
    harness_event_init(&b->release);
    sndk_timer_init(&b->t, blocking_fn);
    sndk_timer_arm_on(e, thread, &b->t, 0);
    CHECK(harness_event_wait(&b->entered, 1, WAIT_MS));
}

static void hold_release(struct blocking_timer *b)
{
    harness_event_signal(&b->release);
}

/* Once the held fn has returned (the thread ran something after it, or the engine is gone). */
static void hold_destroy(struct blocking_timer *b)
{
    harness_event_destroy(&b->entered);
    harness_event_destroy(&b->release);
}

TEST(timer_fire_in_order)
{
    /* The contract: a thread fires its due timers in the order of the deadlines it computed
     * when they were armed (equal deadlines in arming order). That holds whatever the clock
     * does, so it is judged on the deadlines the engine recorded, not on the ones the test
     * meant: a slow arming loop (a sanitizer on a loaded 2-vCPU runner, where CI once saw a
     * late round) moves the deadlines, never the rule. Thread 0 is held inside another
     * timer's fn while the five are armed, so none can fire before all are on its list and
     * "pending" right after an arm is certain. */
    static const unsigned delay_ms[] = {12, 3, 9, 6, 15};
    static const unsigned want[] = {1, 3, 2, 0, 4};
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct sndk_engine *e = mk_engine(threads, SNDK_ENGINE_DEFAULT_SPIN);
        bool saw_wanted = false;
        for (unsigned round = 0; round < 5 && !saw_wanted; round++) {
            atomic_store(&order_next, 0);
            struct blocking_timer hold;
            hold_thread(e, 0, &hold);

            /* Armed in an order unlike their deadlines, 3 ms apart, each delay what is left
             * of a deadline fixed from the first arm. */
            struct ttimer tt[5];
            uint64_t t0 = mono_us();
            for (unsigned i = 0; i < 5; i++) {
                uint64_t now = mono_us(), deadline = t0 + delay_ms[i] * 1000u;
                ttimer_init(&tt[i], e, i, deadline > now ? deadline - now : 0);
                tt[i].armed_at = now;
                CHECK(sndk_timer_arm_on(e, 0, &tt[i].t, tt[i].delay)); /* was not pending */
                CHECK(sndk_timer_pending(&tt[i].t));
            }
            hold_release(&hold);
            for (unsigned i = 0; i < 5; i++)
                CHECK(wait_ge(&tt[i].fires, 1, WAIT_MS)); /* bumped after order[] is written */
            for (unsigned i = 0; i < 5; i++) {
                CHECK(tt[i].deadline >= tt[i].armed_at + tt[i].delay);
                CHECK(tt[i].fired_at >= tt[i].deadline); /* never early */
                CHECK_EQ_I64(tt[i].thread, 0);
                CHECK_EQ_U64(atomic_load(&tt[i].fires), 1);
                CHECK(!sndk_timer_cancel(&tt[i].t)); /* already ran */
            }
            CHECK_EQ_U64(atomic_load(&order_next), 5);
            for (unsigned k = 1; k < 5; k++) {
                const struct ttimer *a = &tt[order[k - 1]], *b = &tt[order[k]];
                CHECK(a->deadline < b->deadline || (a->deadline == b->deadline && a->id < b->id));
            }
            /* Shows the order was tested against an arming order unlike it: true unless the
             * arming thread was held up 3 ms inside an arm; then the round is run again. */
            bool wanted = true;
            for (unsigned i = 0; i < 5; i++)
                wanted &= order[i] == want[i];
            saw_wanted = wanted;
            hold_destroy(&hold); /* its fn returned before the five fired on its thread */
        }
        CHECK(saw_wanted); /* five rounds in a row held up mid-arm: something else is wrong */
        sndk_engine_destroy(e);
    }
}

TEST(timer_arm_on_thread_and_caller_thread)
{
    enum { T = 3 };
    struct sndk_engine *e = mk_engine(T, 0);
    struct ttimer tt[T];
    atomic_store(&order_next, 0);
    for (unsigned i = 0; i < T; i++) {
        ttimer_init(&tt[i], e, i, 100);
        sndk_timer_arm_on(e, i, &tt[i].t, 100);
    }
    for (unsigned i = 0; i < T; i++) {
        CHECK(wait_ge(&tt[i].fires, 1, WAIT_MS));
        CHECK_EQ_I64(tt[i].thread, (int)i);
    }
    /* Re-armed from its own fn (no explicit thread): stays on the firing thread. */
    tt[2].rearm = 3;
    sndk_timer_arm_on(e, 2, &tt[2].t, 100);
    CHECK(wait_ge(&tt[2].fires, 5, WAIT_MS));
    CHECK_EQ_I64(tt[2].thread, 2);
    CHECK(!sndk_timer_pending(&tt[2].t));
    sndk_engine_destroy(e);
}

TEST(timer_rearm_moves)
{
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    struct ttimer a;
    ttimer_init(&a, e, 0, 0);
    /* Pending far away, re-armed close: fires at the new deadline, once. */
    sndk_timer_arm_on(e, 1, &a.t, 60u * 1000000u);
    a.armed_at = mono_us();
    sndk_timer_arm(e, &a.t, 2000);
    CHECK(wait_ge(&a.fires, 1, WAIT_MS));
    CHECK(a.fired_at >= a.armed_at + 2000);
    CHECK_EQ_I64(a.thread, 1); /* a pending timer stays on its thread */
    /* Close, then pushed far away: does not fire; cancel finds it pending. Thread 1 is held
     * in another timer's fn across the two arms: a test thread preempted for 1 ms between
     * them would otherwise see the close deadline rightly fire. The close arm names thread 1
     * (a timer that is not pending would go to the caller's home thread, maybe the other). */
    struct blocking_timer hold;
    hold_thread(e, 1, &hold);
    sndk_timer_arm_on(e, 1, &a.t, 1000);
    sndk_timer_arm(e, &a.t, 60u * 1000000u); /* pending: stays on thread 1 */
    hold_release(&hold);
    struct ttimer probe;
    ttimer_init(&probe, e, 1, 20000);
    sndk_timer_arm_on(e, 1, &probe.t, 20000); /* fires after a's first deadline would have */
    CHECK(wait_ge(&probe.fires, 1, WAIT_MS));
    CHECK_EQ_U64(atomic_load(&a.fires), 1);
    CHECK(sndk_timer_pending(&a.t));
    /* Moved to another thread while pending. */
    sndk_timer_arm_on(e, 0, &a.t, 500);
    CHECK(wait_ge(&a.fires, 2, WAIT_MS));
    CHECK_EQ_I64(a.thread, 0);
    sndk_engine_destroy(e);
    hold_destroy(&hold);
}

TEST(timer_cancel_semantics)
{
    struct sndk_engine *e = mk_engine(1, 0);
    struct ttimer a;
    ttimer_init(&a, e, 0, 0);
    CHECK(!sndk_timer_cancel(&a.t)); /* never armed */
    sndk_timer_arm(e, &a.t, 60u * 1000000u);
    CHECK(sndk_timer_pending(&a.t));
    CHECK(sndk_timer_cancel(&a.t));
    CHECK(!sndk_timer_pending(&a.t));
    CHECK(!sndk_timer_cancel(&a.t)); /* once */
    /* Cancelled timers do not fire even when their time has come. The thread is held in
     * another timer's fn from before the arm until after the cancel (a bare 1 ms window failed
     * once in a CI run: the test thread was preempted between the arm and the cancel); the
     * probe fires well after the cancelled deadline. */
    struct blocking_timer hold;
    hold_thread(e, 0, &hold);
    sndk_timer_arm(e, &a.t, 1000);
    CHECK(sndk_timer_cancel(&a.t));
    hold_release(&hold);
    struct ttimer probe;
    ttimer_init(&probe, e, 1, 100000);
    sndk_timer_arm(e, &probe.t, 100000);
    CHECK(wait_ge(&probe.fires, 1, WAIT_MS));
    CHECK_EQ_U64(atomic_load(&a.fires), 0);

    /* Running right now: cancel says false, and re-arming from outside works. */
    struct blocking_timer b;
    hold_thread(e, 0, &b);
    CHECK(!sndk_timer_cancel(&b.t));
    CHECK(!sndk_timer_pending(&b.t));
    sndk_timer_arm(e, &b.t, 60u * 1000000u);
    CHECK(sndk_timer_cancel(&b.t));
    hold_release(&b);
    sndk_engine_quiesce(e);
    sndk_engine_destroy(e);
    hold_destroy(&b);
    hold_destroy(&hold);
}

/* The reference rule of engine.h ("References"): arm returns true exactly when a pending
 * period begins, and each period ends once, by fn or by a cancel that returns true. refs is
 * what an owner following the rule would hold for the timer. */
struct reftimer {
    struct sndk_timer t;
    atomic_int refs;
    atomic_uint fires;
    atomic_bool block;
    struct harness_event entered, release;
};

static void ref_fn(struct sndk_timer *t)
{
    struct reftimer *r = (struct reftimer *)t;
    if (atomic_load(&r->block)) {
        harness_event_signal(&r->entered);
        CHECK(harness_event_wait(&r->release, 1, WAIT_MS));
    }
    atomic_fetch_sub(&r->refs, 1); /* the period that fired ends here */
    atomic_fetch_add(&r->fires, 1);
}

static void reftimer_init(struct reftimer *r)
{
    atomic_init(&r->refs, 0);
    atomic_init(&r->fires, 0);
    atomic_init(&r->block, false);
    harness_event_init(&r->entered);
    harness_event_init(&r->release);
    sndk_timer_init(&r->t, ref_fn);
}

static void reftimer_destroy(struct reftimer *r)
{
    harness_event_destroy(&r->entered);
    harness_event_destroy(&r->release);
}

/* What an owner does: take a reference when arm says a period began, drop it on a cancel. */
static void ref_arm(struct sndk_engine *e, struct reftimer *r, uint64_t delay_us)
{
    if (sndk_timer_arm(e, &r->t, delay_us))
        atomic_fetch_add(&r->refs, 1);
}

static bool ref_cancel(struct reftimer *r)
{
    bool ended = sndk_timer_cancel(&r->t);
    if (ended)
        atomic_fetch_sub(&r->refs, 1);
    return ended;
}

TEST(timer_arm_reports_pending_period)
{
    struct sndk_engine *e = mk_engine(1, 0);
    struct reftimer r;
    reftimer_init(&r);
    CHECK(sndk_timer_arm(e, &r.t, 60u * 1000000u));        /* not pending: a period begins */
    CHECK(!sndk_timer_arm(e, &r.t, 30u * 1000000u));       /* pending: only moved */
    CHECK(!sndk_timer_arm_on(e, 0, &r.t, 60u * 1000000u)); /* likewise, pinned */
    CHECK(sndk_timer_cancel(&r.t));                        /* ends it */
    CHECK(!sndk_timer_cancel(&r.t));                       /* once */
    CHECK(sndk_timer_arm_on(e, 0, &r.t, 0));               /* cancelled: a new period */
    atomic_fetch_add(&r.refs, 1);
    CHECK(wait_ge(&r.fires, 1, WAIT_MS)); /* fn ended it */
    flush_thread(e, 0);
    CHECK_EQ_I64(atomic_load(&r.refs), 0);
    CHECK(!sndk_timer_cancel(&r.t));                /* fired: nothing to end */
    CHECK(sndk_timer_arm(e, &r.t, 60u * 1000000u)); /* fired: a new period */
    CHECK(sndk_timer_cancel(&r.t));
    CHECK_EQ_U64(atomic_load(&r.fires), 1);

    /* Armed again while fn runs: t is not pending, so that arm begins a second period (and
     * takes a second reference) while the running fn has yet to end the first. */
    atomic_store(&r.block, true);
    ref_arm(e, &r, 0);
    CHECK_EQ_I64(atomic_load(&r.refs), 1);
    CHECK(harness_event_wait(&r.entered, 1, WAIT_MS));
    CHECK(!sndk_timer_pending(&r.t));
    CHECK(!ref_cancel(&r));                /* running: cancel ends nothing */
    CHECK_EQ_I64(atomic_load(&r.refs), 1); /* the running fn's period */
    atomic_store(&r.block, false);
    ref_arm(e, &r, 60u * 1000000u); /* the second period */
    CHECK_EQ_I64(atomic_load(&r.refs), 2);
    ref_arm(e, &r, 50u * 1000000u); /* pending: no third */
    CHECK_EQ_I64(atomic_load(&r.refs), 2);
    harness_event_signal(&r.release);
    CHECK(wait_ge(&r.fires, 2, WAIT_MS));
    flush_thread(e, 0);
    CHECK_EQ_I64(atomic_load(&r.refs), 1); /* the first ended in fn; the second is pending */
    CHECK(sndk_timer_pending(&r.t));
    CHECK(ref_cancel(&r));
    CHECK_EQ_I64(atomic_load(&r.refs), 0);
    CHECK_EQ_U64(atomic_load(&r.fires), 2);
    sndk_engine_destroy(e);
    reftimer_destroy(&r);
}

/* Arm and cancel (serialised by one owner thread, as the rule asks) racing with the timer
 * firing on a progress thread, also moved between threads: whatever wins each race, every
 * period ends exactly once, so an owner's count comes back to zero and the periods begun are
 * the fires plus the successful cancels. */
TEST(timer_reference_cancel_vs_fire)
{
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    struct reftimer r;
    reftimer_init(&r);
    unsigned begun = 0, cancelled = 0;
    for (unsigned i = 0; i < 4000; i++) {
        uint64_t delay = i % 4 == 0 ? 0 : (i * 7u) % 40u;
        bool began =
            i % 2 ? sndk_timer_arm_on(e, (i / 2) % 2, &r.t, delay) : sndk_timer_arm(e, &r.t, delay);
        if (began) {
            atomic_fetch_add(&r.refs, 1);
            begun++;
        }
        for (volatile unsigned spin = 0; spin < (i * 13u) % 200u; spin++)
            ;
        if (i % 3 == 0 && sndk_timer_arm(e, &r.t, delay)) { /* re-arm, maybe as it fires */
            atomic_fetch_add(&r.refs, 1);
            begun++;
        }
        if (i % 5 != 4 && ref_cancel(&r))
            cancelled++;
    }
    if (ref_cancel(&r))
        cancelled++;
    /* Nothing is pending now; a fn that was running or about to run has finished once each
     * thread has gone round its loop. */
    flush_thread(e, 0);
    flush_thread(e, 1);
    CHECK(!sndk_timer_pending(&r.t));
    CHECK_EQ_I64(atomic_load(&r.refs), 0);
    CHECK_EQ_U64(atomic_load(&r.fires) + cancelled, begun);
    sndk_engine_destroy(e);
    reftimer_destroy(&r);
}

/* A timer armed from another thread with an earlier deadline must wake a thread that is
 * blocked until a later one. */
TEST(timer_earlier_deadline_wakes_sleeper)
{
    struct sndk_engine *e = mk_engine(1, 0);
    struct ttimer late, early;
    ttimer_init(&late, e, 0, 0);
    ttimer_init(&early, e, 1, 0);
    sndk_timer_arm(e, &late.t, 60u * 1000000u);
    flush_thread(e, 0); /* the thread now sleeps towards the 60 s deadline */
    early.armed_at = mono_us();
    sndk_timer_arm(e, &early.t, 1000);
    CHECK(wait_ge(&early.fires, 1, 2000));
    CHECK(sndk_timer_cancel(&late.t));
    sndk_engine_destroy(e);
}

/* Many timers armed and cancelled from several threads at once. */
#include <pthread.h>
struct churn {
    struct sndk_engine *e;
    struct ttimer tt[64];
};

static void churn_fn(struct sndk_timer *t)
{
    /* Other threads re-arm and cancel this timer while it fires: it may be pending again
     * already, so nothing to check but that it is called on a progress thread. */
    struct ttimer *tt = (struct ttimer *)t;
    CHECK(sndk_engine_on_progress_thread(tt->e));
}

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    for (unsigned i = 0; i < 64; i++) {
        ttimer_init(&c->tt[i], c->e, i, 0);
        sndk_timer_init(&c->tt[i].t, churn_fn);
    }
    for (unsigned round = 0; round < 200; round++)
        for (unsigned i = 0; i < 64; i++) {
            struct ttimer *tt = &c->tt[i];
            if ((round + i) % 3 == 0)
                sndk_timer_cancel(&tt->t);
            else
                sndk_timer_arm_on(c->e, (round + i) % 2, &tt->t, (round * 7 + i) % 300);
        }
    for (unsigned i = 0; i < 64; i++)
        sndk_timer_cancel(&c->tt[i].t);
    return NULL;
}

TEST(timer_churn_many_threads)
{
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    struct churn c[3];
    pthread_t tid[3];
    for (int i = 0; i < 3; i++) {
        c[i].e = e;
        CHECK_EQ_I64(pthread_create(&tid[i], NULL, churn_main, &c[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(tid[i], NULL);
    /* Every timer is cancelled or fired; wait until none runs, then nothing is pending. */
    flush_thread(e, 0);
    flush_thread(e, 1);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 64; j++)
            CHECK(!sndk_timer_pending(&c[i].tt[j].t));
    sndk_engine_destroy(e);
}
