/* The checked mutex (util/lock.h): ranks in order pass, out of order abort at once, a try-lock
 * may be out of order. Each violation runs in a child process: it must die with SIGABRT. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util/lock.h"

/* Run fn in a child; true when the child was killed by SIGABRT. */
static bool aborts(void (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        /* the violation's own message is expected: keep the test log readable */
        if (!freopen("/dev/null", "w", stderr))
            _exit(3);
        fn();
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static struct sndk_mutex conn, state, rx, tx, cq;

static void init_all(void)
{
    sndk_mutex_init_ranked(&conn, SNDK_LOCK_CQ_CONN);
    sndk_mutex_init_ranked(&state, SNDK_LOCK_QP_STATE);
    sndk_mutex_init_ranked(&rx, SNDK_LOCK_QP_RX);
    sndk_mutex_init_ranked(&tx, SNDK_LOCK_QP_TX);
    sndk_mutex_init_ranked(&cq, SNDK_LOCK_CQ);
}

static void tx_then_state(void)
{
    sndk_mutex_lock(&tx);
    sndk_mutex_lock(&state); /* inner before outer: must abort here */
}

static void cq_then_rx(void)
{
    sndk_mutex_lock(&cq);
    sndk_mutex_lock(&rx);
}

static void state_twice(void)
{
    sndk_mutex_lock(&state);
    sndk_mutex_lock(&state); /* recursive: the owner check */
}

TEST(lock_ranks_in_order_pass_out_of_order_abort)
{
#if !SNDK_LOCK_TRACK
    harness_skip("lock checks compiled out (SOFTNDK_ASSERTS=OFF)");
#else
    init_all();
    /* the documented order, outermost first, and out-of-order unlocking */
    sndk_mutex_lock(&conn);
    sndk_mutex_lock(&state);
    sndk_mutex_lock(&rx);
    sndk_mutex_lock(&tx);
    sndk_mutex_lock(&cq);
    CHECK(sndk_mutex_held(&tx));
    sndk_mutex_unlock(&rx);
    sndk_mutex_unlock(&cq);
    sndk_mutex_unlock(&tx);
    sndk_mutex_unlock(&state);
    sndk_mutex_unlock(&conn);
    /* a try-lock out of order never waits: allowed; what follows it is checked against it */
    sndk_mutex_lock(&tx);
    CHECK(sndk_mutex_trylock(&rx));
    sndk_mutex_unlock(&rx);
    sndk_mutex_unlock(&tx);
    CHECK(aborts(tx_then_state));
    CHECK(aborts(cq_then_rx));
    CHECK(aborts(state_twice));
    /* the counts are back to zero: the order starts afresh */
    sndk_mutex_lock(&state);
    sndk_mutex_lock(&tx);
    sndk_mutex_unlock(&tx);
    sndk_mutex_unlock(&state);
#endif
}

static struct sndk_mutex thr_a, thr_b, drain;

static void init_engine_like(void)
{
    sndk_mutex_init_ranked(&thr_a, SNDK_LOCK_ENGINE_THREAD);
    sndk_mutex_init_ranked(&thr_b, SNDK_LOCK_ENGINE_THREAD);
    sndk_mutex_init_ranked(&drain, SNDK_LOCK_ENGINE_DRAIN);
}

static void same_rank_plain(void)
{
    sndk_mutex_lock(&thr_a);
    sndk_mutex_lock(&thr_b); /* two of one rank without saying so: must abort */
}

static void nested_under_higher_rank(void)
{
    sndk_mutex_lock(&thr_a);
    sndk_mutex_lock(&drain);
    sndk_mutex_lock_nested(&thr_b); /* drain ranks after it: still a violation */
}

static void nested_alone(void)
{
    sndk_mutex_lock_nested(&thr_b); /* no lock of its rank held: not a nesting */
}

/* Two progress threads' locks are held together to move a timer (engine.c): the nested take
 * lets the second one in, and only it. */
TEST(lock_nested_same_rank_only_when_asked)
{
#if !SNDK_LOCK_TRACK
    harness_skip("lock checks compiled out (SOFTNDK_ASSERTS=OFF)");
#else
    init_engine_like();
    sndk_mutex_lock(&thr_a);
    sndk_mutex_lock_nested(&thr_b);
    sndk_mutex_lock(&drain);
    sndk_mutex_unlock(&drain);
    sndk_mutex_unlock(&thr_b);
    sndk_mutex_unlock(&thr_a);
    CHECK(aborts(same_rank_plain));
    CHECK(aborts(nested_under_higher_rank));
    CHECK(aborts(nested_alone));
#endif
}

/* A thread that asks for it learns how long it was blocked on softndk's locks (the verifier
 * asks inside consumer callbacks); one that does not pays and counts nothing. */
static struct sndk_mutex held_lock;
static _Atomic int holder_has_it;

static void *hold_100ms(void *arg)
{
    (void)arg;
    sndk_mutex_lock(&held_lock);
    atomic_store(&holder_has_it, 1);
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    sndk_mutex_unlock(&held_lock);
    return NULL;
}

static void wait_behind_holder(void)
{
    pthread_t t;
    atomic_store(&holder_has_it, 0);
    CHECK(pthread_create(&t, NULL, hold_100ms, NULL) == 0);
    while (!atomic_load(&holder_has_it))
        sched_yield();
    sndk_mutex_lock(&held_lock);
    sndk_mutex_unlock(&held_lock);
    CHECK(pthread_join(t, NULL) == 0);
}

TEST(lock_waits_timed_only_when_asked)
{
    sndk_mutex_init(&held_lock);
    struct sndk_lock_waited before = sndk_lock_waited;
    wait_behind_holder();
    CHECK_EQ_U64(sndk_lock_waited.waits, before.waits);
    CHECK_EQ_U64(sndk_lock_waited.ns, before.ns);
    sndk_lock_waited.timing++;
    wait_behind_holder();
    sndk_lock_waited.timing--;
    CHECK_EQ_U64(sndk_lock_waited.waits, before.waits + 1);
    CHECK(sndk_lock_waited.ns - before.ns >= 50 * 1000000ull); /* most of the 100 ms */
    sndk_mutex_lock(&held_lock);                               /* free: not a wait */
    sndk_mutex_unlock(&held_lock);
    CHECK_EQ_U64(sndk_lock_waited.waits, before.waits + 1);
    sndk_mutex_destroy(&held_lock);
}

/* Locks held beyond the first of their rank (a nested take, a try-lock of a rank already held)
 * are counted apart from the mask of held ranks: letting either of the two go, in any order,
 * leaves the rank held until the other goes too. */
static struct sndk_mutex rx2;

static void nested_first_released_then_lower(void)
{
    sndk_mutex_lock(&thr_a);
    sndk_mutex_lock_nested(&thr_b);
    sndk_mutex_unlock(&thr_a); /* thr_b still holds the rank */
    sndk_mutex_lock(&state);   /* ranks before the engine's: must abort */
}

static void trylock_extra_first_released_then_lower(void)
{
    sndk_mutex_lock(&rx);
    CHECK(sndk_mutex_trylock(&rx2)); /* a second lock of rx's rank */
    sndk_mutex_unlock(&rx);          /* rx2 still holds the rank */
    sndk_mutex_lock(&state);         /* state ranks before rx: must abort */
}

TEST(lock_second_of_a_rank_keeps_the_rank_until_both_are_let_go)
{
#if !SNDK_LOCK_TRACK
    harness_skip("lock checks compiled out (SOFTNDK_ASSERTS=OFF)");
#else
    init_all();
    init_engine_like();
    sndk_mutex_init_ranked(&rx2, SNDK_LOCK_QP_RX);
    CHECK(aborts(nested_first_released_then_lower));
    CHECK(aborts(trylock_extra_first_released_then_lower));
    /* both orders of letting go; after each the order starts afresh */
    for (int first = 0; first < 2; first++) {
        sndk_mutex_lock(&rx);
        CHECK(sndk_mutex_trylock(&rx2));
        sndk_mutex_unlock(first ? &rx2 : &rx);
        CHECK(sndk_mutex_held(first ? &rx : &rx2));
        sndk_mutex_unlock(first ? &rx : &rx2);
        sndk_mutex_lock(&state);
        sndk_mutex_lock(&rx);
        sndk_mutex_unlock(&rx);
        sndk_mutex_unlock(&state);
    }
    sndk_mutex_lock(&thr_a);
    sndk_mutex_lock_nested(&thr_b);
    sndk_mutex_unlock(&thr_a);
    sndk_mutex_unlock(&thr_b);
    sndk_mutex_lock(&state);
    sndk_mutex_lock(&thr_a);
    sndk_mutex_unlock(&thr_a);
    sndk_mutex_unlock(&state);
#endif
}

/* A lock with static storage gets its rank from SNDK_MUTEX_INITIALIZER, and is checked as one
 * initialised at run time is. */
static struct sndk_mutex static_cq = SNDK_MUTEX_INITIALIZER(SNDK_LOCK_CQ);

static void static_cq_then_rx(void)
{
    sndk_mutex_lock(&static_cq);
    sndk_mutex_lock(&rx);
}

TEST(lock_with_static_storage_is_ranked)
{
#if !SNDK_LOCK_TRACK
    harness_skip("lock checks compiled out (SOFTNDK_ASSERTS=OFF)");
#else
    init_all();
    sndk_mutex_lock(&rx);
    sndk_mutex_lock(&static_cq);
    sndk_mutex_unlock(&static_cq);
    sndk_mutex_unlock(&rx);
    CHECK(aborts(static_cq_then_rx));
#endif
}

/* The mutex is a futex word of three states (util/lock.h): threads that contend, sleep and are
 * woken must still exclude each other and lose no wake-up. Four threads on two CPUs add to a
 * counter that is not atomic, each holding the lock across a yield now and then so that the
 * others find it held and sleep; the total is exact and every thread finishes. */
static struct sndk_mutex counted;
static uint64_t counter;          /* under counted */
static atomic_ulong slept_for_it; /* locks found held, summed over the threads */

static void *add_under_lock(void *arg)
{
    unsigned n = (unsigned)(uintptr_t)arg;
    sndk_lock_waited.timing++; /* counts the locks this thread found held */
    for (unsigned i = 0; i < n; i++) {
        sndk_mutex_lock(&counted);
        uint64_t v = counter;
        if (i % 64 == 0)
            sched_yield(); /* held while another runs: it must sleep, then be woken */
        counter = v + 1;
        sndk_mutex_unlock(&counted);
    }
    atomic_fetch_add(&slept_for_it, sndk_lock_waited.waits);
    return NULL;
}

TEST(lock_contended_by_four_threads_excludes_and_wakes_them_all)
{
    sndk_mutex_init(&counted);
    counter = 0;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, add_under_lock, (void *)(uintptr_t)50000) == 0);
    for (int i = 0; i < 4; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK_EQ_U64(counter, 200000);
    CHECK(atomic_load(&slept_for_it) > 0); /* the sleeping path ran */
    CHECK(sndk_mutex_trylock(&counted));   /* left free */
    CHECK(!sndk_mutex_trylock(&counted));
    sndk_mutex_unlock(&counted);
    sndk_mutex_destroy(&counted);
}

/* The condition variable: a broadcast under the lock wakes every waiter (none sleeps through
 * it), a timed wait returns ETIMEDOUT at its CLOCK_MONOTONIC deadline and holds the lock again
 * either way. */
static struct sndk_mutex cv_lock;
static struct sndk_cond cv;
static unsigned cv_round, cv_seen; /* under cv_lock */

static void *wait_rounds(void *arg)
{
    unsigned rounds = (unsigned)(uintptr_t)arg;
    sndk_mutex_lock(&cv_lock);
    for (unsigned r = 1; r <= rounds; r++) {
        while (cv_round < r)
            sndk_cond_wait(&cv, &cv_lock);
        CHECK(sndk_mutex_held(&cv_lock));
        cv_seen++;
        sndk_cond_broadcast(&cv); /* the driver waits for every waiter's count */
    }
    sndk_mutex_unlock(&cv_lock);
    return NULL;
}

TEST(lock_cond_broadcast_wakes_every_waiter_and_timed_waits_time_out)
{
    sndk_mutex_init(&cv_lock);
    sndk_cond_init(&cv);
    cv_round = cv_seen = 0;
    enum { WAITERS = 3, ROUNDS = 2000 };
    pthread_t t[WAITERS];
    for (int i = 0; i < WAITERS; i++)
        CHECK(pthread_create(&t[i], NULL, wait_rounds, (void *)(uintptr_t)ROUNDS) == 0);
    sndk_mutex_lock(&cv_lock);
    for (unsigned r = 1; r <= ROUNDS; r++) {
        cv_round = r;
        sndk_cond_broadcast(&cv);
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 10; /* a lost wake-up would stop here */
        while (cv_seen < r * WAITERS)
            CHECK_EQ_I64(sndk_cond_timedwait(&cv, &cv_lock, &deadline), 0);
    }
    sndk_mutex_unlock(&cv_lock);
    for (int i = 0; i < WAITERS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK_EQ_U64(cv_seen, (uint64_t)WAITERS * ROUNDS);

    sndk_mutex_lock(&cv_lock);
    struct timespec t0, deadline;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    deadline = t0;
    deadline.tv_nsec += 50 * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    int rc;
    do
        rc = sndk_cond_timedwait(&cv, &cv_lock, &deadline); /* nobody signals */
    while (rc == 0);
    CHECK_EQ_I64(rc, ETIMEDOUT);
    CHECK(sndk_mutex_held(&cv_lock));
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ms = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000u + (uint64_t)(t1.tv_nsec / 1000000) -
                  (uint64_t)(t0.tv_nsec / 1000000);
    CHECK(ms >= 45);
    sndk_mutex_unlock(&cv_lock);
    sndk_cond_destroy(&cv);
    sndk_mutex_destroy(&cv_lock);
}
