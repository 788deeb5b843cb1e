/* The progress engine: see engine.h for the contract and docs/engine.md for the model.
 *
 * Locking (the order is top to bottom; nothing is taken in the other direction):
 *   e->quiesce_lock     serialises quiescers (held while one waits)
 *   t->lock             one per progress thread: its work queue, timer list, poller list.
 *                       Two of them are held together only to move a timer between threads,
 *                       lower thread index first.
 *   e->drain_lock       guards nothing but the drain_cond wait; a leaf.
 * No lock is ever held while a work, source, timer or poller fn runs.
 */
#include "engine/engine.h"

#include "util/lock.h"
#include "util/log.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define SUBSYS "engine"
#define MAX_EVENTS 64

/* Source lifecycle. Add: UNUSED (or REMOVED, a source reused after its done ran) -> CLAIMED ->
 * ADDING -> ACTIVE, or back to UNUSED when epoll_ctl fails. Remove: ACTIVE -> REMOVED (final).
 * A remove that comes before the add finished (UNUSED, CLAIMED or ADDING: the caller did not
 * order remove after add, e.g. another thread failed the object while it was being set up)
 * moves to EARLY and leaves its done item in s->early_done; the add, when it reaches its next
 * step, undoes what it did, sets REMOVED and queues that done item. Only the adder leaves
 * CLAIMED, ADDING and EARLY. All transitions are in sndk_source_add and sndk_source_remove. */
enum source_state {
    SRC_UNUSED = 0,  /* never added, or add failed */
    SRC_ACTIVE = 1,  /* in epoll; fn may be called */
    SRC_REMOVED = 2, /* out of epoll; fn is not called again (but for an in-flight call) */
    SRC_CLAIMED = 3, /* add under way: writing owner, fn, fd (not yet published) */
    SRC_ADDING = 4,  /* add under way: fields published, epoll_ctl(ADD) running; dispatch waits */
    SRC_EARLY = 5,   /* removed before its add finished: the add queues s->early_done */
    SRC_QUIET = 6,   /* added, out of epoll (sndk_source_quiet) until a modify watches it again */
    SRC_STATE_COUNT
};
static const char *const source_state_names[SRC_STATE_COUNT] = {
    "UNUSED", "ACTIVE", "REMOVED", "CLAIMED", "ADDING", "EARLY", "QUIET"};

_Static_assert(SRC_STATE_COUNT == SNDK_ENGINE_SOURCE_STATES, "engine.h's count of source states");

static const char *source_state_name(int st)
{
    return st >= 0 && st < SRC_STATE_COUNT ? source_state_names[st] : "?";
}

const char *sndk_engine_source_state_name(unsigned st)
{
    return source_state_name(st < SRC_STATE_COUNT ? (int)st : -1);
}

/* Engine lifecycle: RUNNING -> STOPPING -> EXITING, driven by sndk_engine_destroy (and by a
 * failed create, RUNNING -> EXITING). */
enum engine_state {
    ENG_RUNNING = 0,  /* normal operation */
    ENG_STOPPING = 1, /* destroy began: no more timers, source or poller calls; work drains */
    ENG_EXITING = 2,  /* all work drained: threads leave their loop */
    ENG_STATE_COUNT
};
static const char *const engine_state_names[ENG_STATE_COUNT] = {"RUNNING", "STOPPING",
                                                                 "EXITING"};
_Static_assert(ENG_STATE_COUNT == SNDK_ENGINE_STATES, "engine.h's count of engine states");

const char *sndk_engine_state_name(unsigned st)
{
    return st < ENG_STATE_COUNT ? engine_state_names[st] : "?";
}

/* Where a progress thread runs (engine.h, sndk_engine_note_waiter; docs/engine.md, "Following
 * the waiter"). Moved by the thread itself only, judging a window of FOLLOW_WINDOW notes:
 * any -> following (the window's notes all named one CPU, and the thread mostly waited), following
 * -> following another CPU (the same, at least FOLLOW_HOLD_US after the last move), following ->
 * any (the thread mostly worked, or no note came for FOLLOW_IDLE_US). */
enum progress_place {
    PLACE_ANY = 0,       /* any CPU of the process's affinity at create */
    PLACE_FOLLOWING = 1, /* pinned to the CPU where the consumers it notifies wait */
    PLACE_COUNT
};
static const char *const progress_place_names[PLACE_COUNT] = {"any CPU", "following"};
_Static_assert(PLACE_COUNT == SNDK_ENGINE_PLACES, "engine.h's count of places");

#define FOLLOW_WINDOW                                                                              \
    16u                         /* notes judged together: all naming one CPU, and the thread       \
                                   busy less than a third of their time, to follow; busy more      \
                                   than two thirds, to leave */
#define FOLLOW_HOLD_US 100000u  /* a follow comes at least this long after the last move */
#define FOLLOW_IDLE_US 1000000u /* following, no note for this long: back to any CPU */
#define FOLLOW_BACKOFF_MAX                                                                         \
    7u /* the hold before following again doubles up to 2^7 times                                  \
          (12.8 s) after each leave for being busy */

struct sndk_progress {
    /* Immutable while the thread runs. Aligned so that two threads' hot fields (sleeping,
     * nwork, the lock) never share a cache line. */
    _Alignas(64) struct sndk_engine *e;
    unsigned idx;
    int epfd;                 /* this thread's epoll: its sources and evfd */
    int evfd;                 /* wake-up eventfd, in epfd with data.ptr == &evfd */
    pthread_t tid;

    /* Set by the thread just before it blocks in epoll_wait, cleared by a waker (exchange) or by
     * the thread when it returns. A waker writes evfd only when it takes the flag from true to
     * false, so a running or spinning thread costs its producers no syscall. See wake(). */
    atomic_bool sleeping;
    atomic_uint nsources;     /* load for "least loaded"; approximate by nature */
    atomic_uint nwork;        /* = length of the queue below; written under lock, read without
                                 it as a hint by the thread itself while spinning */
    _Atomic uint64_t next_deadline; /* head of the timer list or UINT64_MAX; same rules */

    struct sndk_mutex lock;
    /* --- under lock --- */
    struct sndk_work *head, *tail;           /* FIFO of queued work */
    struct sndk_timer *timers, *timers_tail; /* pending timers by deadline, then arming order */
    uint64_t timer_seq;                      /* arming sequence */
    struct sndk_poller *pollers;             /* registered pollers */
    struct sndk_poller *poll_cursor;         /* the poller run_pollers touches next (it may be
                                                in its fn): removers must not unlink it */

    /* --- the thread's own: only it writes them (place_cpu: read by others too) --- */
    atomic_int place_cpu; /* the CPU followed (its place: place_of); -1 while on any */
    uint64_t moved_us;    /* the last move (0: never) */
    uint64_t noted_us;    /* the last note */
    uint64_t busy_us;     /* time on its sources' events while a window of notes is open */
    /* the window of notes being gathered: how many, since when, busy_us then, the one CPU
     * they all named (-1: several) */
    unsigned win_notes;
    uint64_t win_start_us, win_busy_start;
    int win_cpu;
    unsigned busy_leaves; /* times in a row it left a CPU for being busy there: each one
                             doubles the wait before it follows again */
};

struct sndk_engine {
    unsigned nthreads;
    unsigned spin_us;
    bool follow;       /* threads follow their waiters (two usable CPUs or more) */
    cpu_set_t allowed; /* the process's affinity at create: "any CPU" */
    char name[16];

    atomic_int state;     /* enum engine_state */

    /* Outstanding work (queued or running) for quiesce and destroy, in one word so that "read
     * the current generation and count an item in it" is one atomic step: bits 0-30 count
     * generation 0, bits 32-62 generation 1, bit 63 is the current generation. Items queued
     * from inside a work fn inherit the generation of that fn, so a quiescer waits for the
     * transitive closure of what was queued before it, but not for later arrivals. */
    _Atomic uint64_t work_count;
    atomic_int drain_waiters; /* quiescers or a destroyer waiting on drain_cond */

    struct sndk_mutex quiesce_lock;
    struct sndk_mutex drain_lock;
    struct sndk_cond drain_cond;

    struct sndk_progress thr[];
};

#define WC_GEN_BIT (UINT64_C(1) << 63)

static inline uint64_t wc_unit(unsigned gen)
{
    return UINT64_C(1) << (32 * gen);
}

static inline uint32_t wc_count(uint64_t v, unsigned gen)
{
    return (uint32_t)(v >> (32 * gen)) & 0x7fffffffu;
}

/* The progress thread the caller is, if any (of any engine). */
static SNDK_TLS struct sndk_progress *tls_self;
/* Generation of the work fn running on this thread, or -1 outside work fns. */
static SNDK_TLS int tls_work_gen = -1;
/* Home progress thread index of a non-progress caller (modulo the thread count). */
static SNDK_TLS unsigned tls_home;
static SNDK_TLS bool tls_home_set;
static atomic_uint home_counter;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static bool stopping(const struct sndk_engine *e)
{
    return atomic_load_explicit(&e->state, memory_order_relaxed) >= ENG_STOPPING;
}

static bool exiting(struct sndk_engine *e)
{
    return atomic_load(&e->state) == ENG_EXITING; /* seq_cst: see wake() */
}

static void set_state(struct sndk_engine *e, enum engine_state to)
{
    int from = atomic_exchange(&e->state, (int)to); /* seq_cst: see wake() */
    sndk_debug(SUBSYS, "%s: %s => %s", e->name, engine_state_names[from], engine_state_names[to]);
}

static struct sndk_progress *self_in(const struct sndk_engine *e)
{
    struct sndk_progress *t = tls_self;
    return t && t->e == e ? t : NULL;
}

const char *sndk_engine_place_name(unsigned place)
{
    return place < PLACE_COUNT ? progress_place_names[place] : "?";
}

/* One progress thread at most follows a given CPU, in the whole process (two spinners sharing a
 * core each burn a slice while the other holds the event: engine.h, the spin policy); a thread
 * whose waiters are on a CPU another follows stays where it is. */
static atomic_uchar cpu_followed[CPU_SETSIZE];

/* The place is the CPU followed, or none: one word, which sndk_engine_thread_cpu reads too. */
static enum progress_place place_of(const struct sndk_progress *t)
{
    return atomic_load_explicit(&t->place_cpu, memory_order_relaxed) >= 0 ? PLACE_FOLLOWING
                                                                          : PLACE_ANY;
}

static bool place_may_move(const struct sndk_progress *t, enum progress_place to, int cpu)
{
    if (to == PLACE_FOLLOWING)
        return place_of(t) == PLACE_ANY ||
               atomic_load_explicit(&t->place_cpu, memory_order_relaxed) != cpu;
    return to == PLACE_ANY && place_of(t) == PLACE_FOLLOWING;
}

/* The thread moves itself: true when it did. */
static bool set_place(struct sndk_progress *t, enum progress_place to, int cpu, const char *why)
{
    assert(tls_self == t);
    enum progress_place from = place_of(t);
    if (!place_may_move(t, to, cpu)) {
        sndk_err(SUBSYS, "%s-%u: refused %s => %s (%s)", t->e->name, t->idx,
                 progress_place_names[from], progress_place_names[to], why);
        assert(!"illegal progress thread place transition");
        return false;
    }
    unsigned char free_mark = 0;
    if (to == PLACE_FOLLOWING &&
        !atomic_compare_exchange_strong(&cpu_followed[cpu], &free_mark, (unsigned char)1))
        return false; /* another progress thread follows that CPU */
    cpu_set_t set;
    if (to == PLACE_FOLLOWING) {
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
    } else {
        set = t->e->allowed;
    }
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0) {
        if (to == PLACE_FOLLOWING)
            atomic_store(&cpu_followed[cpu], 0);
        sndk_info(SUBSYS, "%s-%u: stays %s: cannot move (%s) to %s", t->e->name, t->idx,
                  progress_place_names[from], strerror(rc), why);
        return false;
    }
    int was = atomic_load_explicit(&t->place_cpu, memory_order_relaxed);
    if (was >= 0)
        atomic_store(&cpu_followed[was], 0);
    char from_cpu[16] = "", to_cpu[16] = "";
    if (was >= 0)
        snprintf(from_cpu, sizeof from_cpu, " CPU %d", was);
    if (to == PLACE_FOLLOWING)
        snprintf(to_cpu, sizeof to_cpu, " CPU %d", cpu);
    sndk_debug(SUBSYS, "%s-%u: %s%s => %s%s (%s)", t->e->name, t->idx, progress_place_names[from],
               from_cpu, progress_place_names[to], to_cpu, why);
    atomic_store_explicit(&t->place_cpu, to == PLACE_FOLLOWING ? cpu : -1, memory_order_relaxed);
    t->moved_us = now_us();
    return true;
}

void sndk_engine_note_waiter(struct sndk_engine *e, int cpu)
{
    struct sndk_progress *t = self_in(e);
    assert(t != NULL);
    if (!t || !e->follow || cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &e->allowed))
        return;
    uint64_t now = now_us();
    t->noted_us = now;
    if (t->win_notes++ == 0) {
        t->win_start_us = now;
        t->win_busy_start = t->busy_us;
        t->win_cpu = cpu;
        return;
    }
    if (cpu != t->win_cpu)
        t->win_cpu = -1; /* waiters on several CPUs: nowhere to follow */
    if (t->win_notes < FOLLOW_WINDOW)
        return;
    /* A window's worth of notes: judge it. Only a thread that mostly waited gains from running
     * beside the consumer: one that mostly worked (a stream, not a conversation) would share
     * that CPU with the consumer's own work, where a CPU of its own moves more (docs/engine.md,
     * "Following the waiter"). Two thresholds, so that what following changes in the share
     * does not move it straight back. */
    uint64_t busy = t->busy_us - t->win_busy_start, span = now - t->win_start_us;
    int to = t->win_cpu;
    t->win_notes = 0;
    int at = atomic_load_explicit(&t->place_cpu, memory_order_relaxed);
    if (at >= 0 && busy * 3 > span * 2) {
        if (set_place(t, PLACE_ANY, -1, "busy between notifications: it needs a CPU of its own"))
            t->busy_leaves++;
        return;
    }
    if (at >= 0 && to == at) {
        if (now - t->moved_us > FOLLOW_IDLE_US)
            t->busy_leaves = 0; /* followed for a while without being too busy there */
        return;
    }
    if (to < 0 || (at < 0 && busy * 3 >= span))
        return;
    /* A thread that had to leave for being busy waits longer each time before it follows
     * again (a stream whose consumer waits now and then would move it back and forth). */
    uint64_t hold = FOLLOW_HOLD_US
                    << (t->busy_leaves < FOLLOW_BACKOFF_MAX ? t->busy_leaves : FOLLOW_BACKOFF_MAX);
    if (t->moved_us && now - t->moved_us < hold)
        return;
    set_place(t, PLACE_FOLLOWING, to,
              at < 0 ? "the consumer it notifies waits there"
                     : "the consumer it notifies waits there now");
}

/* About to block: a thread that followed waiters nobody has been for a while goes back to any
 * CPU (a consumer that polls now would otherwise share its CPU with the thread's timers). */
static void place_check_idle(struct sndk_progress *t)
{
    if (place_of(t) == PLACE_FOLLOWING && now_us() - t->noted_us > FOLLOW_IDLE_US)
        set_place(t, PLACE_ANY, -1, "no consumer it notified has waited for a second");
}

int sndk_engine_thread_cpu(const struct sndk_engine *e, unsigned thread)
{
    if (thread >= e->nthreads)
        return -1;
    return atomic_load_explicit(&e->thr[thread].place_cpu, memory_order_relaxed);
}

/* Where an unpinned item goes: the caller's own thread, or the caller's fixed home thread, so
 * that one thread's items keep their order. */
static struct sndk_progress *pick_thread(struct sndk_engine *e)
{
    struct sndk_progress *t = self_in(e);
    if (t)
        return t;
    if (!tls_home_set) {
        tls_home = atomic_fetch_add_explicit(&home_counter, 1, memory_order_relaxed);
        tls_home_set = true;
    }
    return &e->thr[tls_home % e->nthreads];
}

/* Wake t if it is blocked or about to block.
 *
 * Memory-ordering argument (no lost wake-up). A producer changes t's state (appends work or
 * a timer) under t->lock and, still holding it, calls wake(): exchange(sleeping, false). The thread, before it
 * blocks, stores sleeping = true (seq_cst) and then inspects its state under t->lock (and
 * reads e->state, seq_cst). Take the two critical sections in their lock order:
 *  - the thread's comes first: its store of sleeping happens-before its unlock, which
 *    happens-before the producer's lock, so the producer's exchange reads true (or a later
 *    false written by another waker, who then wrote evfd, or by the thread itself once awake)
 *    and writes evfd; epoll_wait then returns at once;
 *  - the producer's comes first: the thread sees the new work or timer and does not block.
 * For e->state (not under the lock) both sides are seq_cst: destroy stores EXITING then
 * exchanges sleeping, the thread stores sleeping then loads state; in the single total order
 * one of the two sees the other's store. */
static void wake(struct sndk_progress *t)
{
    if (atomic_exchange(&t->sleeping, false)) {
        uint64_t one = 1;
        /* EAGAIN means the counter is already non-zero: the thread will wake anyway. */
        if (write(t->evfd, &one, sizeof one) < 0 && errno != EAGAIN)
            sndk_warn(SUBSYS, "eventfd write: %s", strerror(errno));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Work */

void sndk_work_init(struct sndk_work *w, void (*fn)(struct sndk_work *w))
{
    w->next = NULL;
    w->fn = fn;
    atomic_init(&w->queued, false);
    w->epoch = 0;
}

/* Count one more outstanding item and return its generation. */
static unsigned account_queue(struct sndk_engine *e)
{
    if (tls_work_gen >= 0 && self_in(e)) {
        unsigned gen = (unsigned)tls_work_gen;
        atomic_fetch_add(&e->work_count, wc_unit(gen));
        return gen;
    }
    uint64_t v = atomic_load_explicit(&e->work_count, memory_order_relaxed);
    for (;;) {
        unsigned gen = (unsigned)(v >> 63);
        if (atomic_compare_exchange_weak(&e->work_count, &v, v + wc_unit(gen)))
            return gen;
    }
}

static void account_done(struct sndk_engine *e, unsigned gen)
{
    uint64_t v = atomic_fetch_sub(&e->work_count, wc_unit(gen)) - wc_unit(gen);
    /* seq_cst fetch_sub then seq_cst load of drain_waiters, against the waiter's seq_cst
     * increment then load of work_count: one of the two sees the other (see wait_work). */
    if (wc_count(v, gen) == 0 && atomic_load(&e->drain_waiters) > 0) {
        sndk_mutex_lock(&e->drain_lock);
        sndk_cond_broadcast(&e->drain_cond);
        sndk_mutex_unlock(&e->drain_lock);
    }
}

static bool queue_to(struct sndk_engine *e, struct sndk_progress *t, struct sndk_work *w)
{
    bool expected = false;
    /* acq_rel: pairs with the release that un-queued w before its previous fn, so our writes
     * of w->next/epoch come after the previous run's reads. */
    if (!atomic_compare_exchange_strong_explicit(&w->queued, &expected, true,
                                                 memory_order_acq_rel, memory_order_relaxed))
        return false;
    unsigned gen = account_queue(e);
    sndk_mutex_lock(&t->lock);
    w->next = NULL;
    w->epoch = (unsigned char)gen;
    if (t->tail)
        t->tail->next = w;
    else
        t->head = w;
    t->tail = w;
    atomic_store_explicit(&t->nwork, atomic_load_explicit(&t->nwork, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    /* Wake under the lock: once we unlock, t may run w, and w may be the last close of an
     * adapter whose SoftNdkCloseAdapter (on yet another thread) then frees this engine. After
     * the unlock the producer must not touch e or t again. */
    if (t != tls_self)
        wake(t);
    sndk_mutex_unlock(&t->lock);
    return true;
}

bool sndk_engine_queue(struct sndk_engine *e, struct sndk_work *w)
{
    return queue_to(e, pick_thread(e), w);
}

bool sndk_engine_queue_on(struct sndk_engine *e, unsigned thread, struct sndk_work *w)
{
    assert(thread < e->nthreads);
    if (thread >= e->nthreads)
        thread = 0; /* release builds: better on the wrong thread than lost */
    return queue_to(e, &e->thr[thread], w);
}

/* Run the work queued at this moment (items queued meanwhile wait for the next pass, so timers
 * and sources are not starved by a work item that re-queues itself). Progress thread only. */
static bool run_work(struct sndk_progress *t)
{
    if (atomic_load_explicit(&t->nwork, memory_order_relaxed) == 0)
        return false; /* a stale zero only delays: the sleep path re-checks under the lock */
    sndk_mutex_lock(&t->lock);
    struct sndk_work *w = t->head;
    t->head = t->tail = NULL;
    atomic_store_explicit(&t->nwork, 0, memory_order_relaxed);
    sndk_mutex_unlock(&t->lock);
    bool ran = w != NULL;
    while (w) {
        /* Read everything needed before un-queueing: from then on w may be queued again
         * (rewriting next/epoch) or freed by its fn. */
        struct sndk_work *next = w->next;
        unsigned gen = w->epoch;
        void (*fn)(struct sndk_work *) = w->fn;
        atomic_store_explicit(&w->queued, false, memory_order_release);
        tls_work_gen = (int)gen;
        fn(w);
        tls_work_gen = -1;
        account_done(t->e, gen);
        w = next;
    }
    return ran;
}

static bool drained(uint64_t v, int gen)
{
    if (gen < 0)
        return wc_count(v, 0) == 0 && wc_count(v, 1) == 0;
    return wc_count(v, (unsigned)gen) == 0;
}

/* Block until generation gen (or everything, gen < 0) has no outstanding work. */
static void wait_work(struct sndk_engine *e, int gen)
{
    atomic_fetch_add(&e->drain_waiters, 1);
    sndk_mutex_lock(&e->drain_lock);
    while (!drained(atomic_load(&e->work_count), gen))
        sndk_cond_wait(&e->drain_cond, &e->drain_lock);
    sndk_mutex_unlock(&e->drain_lock);
    atomic_fetch_sub(&e->drain_waiters, 1);
}

void sndk_engine_quiesce(struct sndk_engine *e)
{
    assert(!self_in(e));
    sndk_mutex_lock(&e->quiesce_lock);
    /* Flip the generation: everything counted so far is in the old one, and the old one can
     * only grow through work fns of its own (inheritance). The previous quiescer drained the
     * new generation to zero before it returned, and nothing joins it until this flip. */
    uint64_t old = atomic_fetch_xor(&e->work_count, WC_GEN_BIT);
    wait_work(e, (int)(old >> 63));
    sndk_mutex_unlock(&e->quiesce_lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Timers */

void sndk_timer_init(struct sndk_timer *t, void (*fn)(struct sndk_timer *t))
{
    t->next = t->prev = NULL;
    t->fn = fn;
    t->deadline_us = 0;
    t->seq = 0;
    t->upkeep = false;
    atomic_init(&t->owner, NULL);
}

void sndk_timer_init_upkeep(struct sndk_timer *t, void (*fn)(struct sndk_timer *t))
{
    sndk_timer_init(t, fn);
    t->upkeep = true;
}

static void publish_deadline(struct sndk_progress *t)
{
    sndk_assert_held(&t->lock);
    atomic_store_explicit(&t->next_deadline, t->timers ? t->timers->deadline_us : UINT64_MAX,
                          memory_order_relaxed);
}

/* Caller must hold t->lock; tm is pending on t. */
static void timer_unlink(struct sndk_progress *t, struct sndk_timer *tm)
{
    sndk_assert_held(&t->lock);
    if (tm->prev)
        tm->prev->next = tm->next;
    else
        t->timers = tm->next;
    if (tm->next)
        tm->next->prev = tm->prev;
    else
        t->timers_tail = tm->prev;
    tm->next = tm->prev = NULL;
}

/* Caller must hold t->lock. Insert after every timer due no later, so equal deadlines keep
 * arming order. The scan starts at the tail because most timers use the same few delays and
 * land there; a deadline-ordered list is O(n) in the worst case (a heap or wheel would be the
 * next step if thousands of distinct delays become common). Returns true if tm is the head. */
static bool timer_insert(struct sndk_progress *t, struct sndk_timer *tm)
{
    sndk_assert_held(&t->lock);
    struct sndk_timer *after = t->timers_tail;
    while (after && after->deadline_us > tm->deadline_us)
        after = after->prev;
    tm->prev = after;
    if (after) {
        tm->next = after->next;
        after->next = tm;
    } else {
        tm->next = t->timers;
        t->timers = tm;
    }
    if (tm->next)
        tm->next->prev = tm;
    else
        t->timers_tail = tm;
    return t->timers == tm;
}

/* Returns whether tm was not pending when it was put on its list: the check and the insert are
 * one critical section under the lock(s) that also serialise its firing and its cancel, so
 * exactly one of "fire", "successful cancel" and "arm saw it pending" follows each arm that
 * returned true (engine.h, "References"). */
static bool timer_arm(struct sndk_engine *e, struct sndk_progress *want, struct sndk_timer *tm,
                      uint64_t delay_us)
{
    uint64_t deadline = now_us() + delay_us;
    if (deadline < delay_us)
        deadline = UINT64_MAX - 1; /* "never", but still cancellable */
    for (;;) {
        struct sndk_progress *cur = atomic_load_explicit(&tm->owner, memory_order_acquire);
        struct sndk_progress *dst = want ? want : cur ? cur : pick_thread(e);
        struct sndk_progress *first = dst, *second = NULL;
        if (cur && cur != dst) {
            first = cur->idx < dst->idx ? cur : dst;
            second = cur->idx < dst->idx ? dst : cur;
        }
        sndk_mutex_lock(&first->lock);
        if (second) /* same rank: the order is the thread index (docs/engine.md#locking) */
            sndk_mutex_lock_nested(&second->lock);
        if (atomic_load_explicit(&tm->owner, memory_order_relaxed) != cur) {
            /* It fired, was cancelled or moved meanwhile: start over. */
            if (second)
                sndk_mutex_unlock(&second->lock);
            sndk_mutex_unlock(&first->lock);
            continue;
        }
        if (cur) {
            timer_unlink(cur, tm);
            if (cur != dst)
                publish_deadline(cur);
        }
        tm->deadline_us = deadline;
        tm->seq = dst->timer_seq++;
        bool head = timer_insert(dst, tm);
        publish_deadline(dst);
        atomic_store_explicit(&tm->owner, dst, memory_order_release);
        /* Only a new head can shorten the thread's sleep; the thread itself recomputes its
         * timeout before it blocks. Woken under the lock for the reason given in queue_to. */
        if (head && dst != tls_self)
            wake(dst);
        if (second)
            sndk_mutex_unlock(&second->lock);
        sndk_mutex_unlock(&first->lock);
        return cur == NULL;
    }
}

bool sndk_timer_arm(struct sndk_engine *e, struct sndk_timer *t, uint64_t delay_us)
{
    return timer_arm(e, NULL, t, delay_us);
}

bool sndk_timer_arm_on(struct sndk_engine *e, unsigned thread, struct sndk_timer *t,
                       uint64_t delay_us)
{
    assert(thread < e->nthreads);
    if (thread >= e->nthreads)
        thread = 0;
    return timer_arm(e, &e->thr[thread], t, delay_us);
}

bool sndk_timer_cancel(struct sndk_timer *tm)
{
    for (;;) {
        struct sndk_progress *cur = atomic_load_explicit(&tm->owner, memory_order_acquire);
        if (!cur)
            return false;
        sndk_mutex_lock(&cur->lock);
        if (atomic_load_explicit(&tm->owner, memory_order_relaxed) == cur) {
            timer_unlink(cur, tm);
            publish_deadline(cur);
            atomic_store_explicit(&tm->owner, NULL, memory_order_relaxed);
            sndk_mutex_unlock(&cur->lock);
            /* A later wake-up for a deadline that no longer exists costs one empty pass;
             * not worth a wake() here. */
            return true;
        }
        sndk_mutex_unlock(&cur->lock);
    }
}

bool sndk_timer_pending(const struct sndk_timer *t)
{
    return atomic_load_explicit(&t->owner, memory_order_acquire) != NULL;
}

/* Fire the due timers armed before this pass began (a timer re-armed with no delay from its
 * own fn waits for the next pass). Progress thread only. True when one fired that was not an
 * upkeep timer: activity, as a work item is. */
static bool run_timers(struct sndk_progress *t)
{
    if (atomic_load_explicit(&t->next_deadline, memory_order_relaxed) == UINT64_MAX ||
        stopping(t->e))
        return false;
    uint64_t now = now_us();
    if (atomic_load_explicit(&t->next_deadline, memory_order_relaxed) > now)
        return false;
    bool fired = false;
    sndk_mutex_lock(&t->lock);
    uint64_t limit = t->timer_seq;
    struct sndk_timer *tm;
    while ((tm = t->timers) && tm->deadline_us <= now && tm->seq < limit &&
           !stopping(t->e)) {
        timer_unlink(t, tm);
        publish_deadline(t);
        void (*fn)(struct sndk_timer *) = tm->fn;
        bool upkeep = tm->upkeep; /* read before fn, which may free tm */
        atomic_store_explicit(&tm->owner, NULL, memory_order_release);
        sndk_mutex_unlock(&t->lock);
        fn(tm); /* may re-arm or free tm */
        fired |= !upkeep;
        sndk_mutex_lock(&t->lock);
    }
    sndk_mutex_unlock(&t->lock);
    return fired;
}

/* ------------------------------------------------------------------------------------------ */
/* Sources */

static struct sndk_progress *least_loaded(struct sndk_engine *e)
{
    struct sndk_progress *best = &e->thr[0];
    unsigned best_n = atomic_load_explicit(&best->nsources, memory_order_relaxed);
    for (unsigned i = 1; i < e->nthreads; i++) {
        unsigned n = atomic_load_explicit(&e->thr[i].nsources, memory_order_relaxed);
        if (n < best_n) {
            best = &e->thr[i];
            best_n = n;
        }
    }
    return best;
}

/* The add of s found that s was removed before it finished (state EARLY, seen with acquire):
 * complete that removal now. s is not (or no longer) in epoll. Returns 0: the add and the remove
 * both happened, in that order, as far as the caller can tell. */
static int add_finish_early(struct sndk_progress *t, struct sndk_source *s, int fd)
{
    struct sndk_work *done = s->early_done;
    s->early_done = NULL;
    /* Release: publishes owner/fn/fd for sndk_source_thread and a later add of a reused s. */
    atomic_store_explicit(&s->state, SRC_REMOVED, memory_order_release);
    /* Not a word about s after this store: done may free it as soon as it is queued. */
    sndk_err(SUBSYS, "source fd %d on %s-%u: removed before its add finished: not left in "
                     "epoll, fn not called, removal completed by the add", fd, t->e->name, t->idx);
    if (done && !queue_to(t->e, t, done))
        sndk_err(SUBSYS, "source fd %d: its done item was already queued", fd);
    return 0;
}

int sndk_source_add(struct sndk_engine *e, struct sndk_source *s, int fd, uint32_t events,
                    sndk_source_fn fn, int thread)
{
    if (thread < -1 || thread >= (int)e->nthreads || fd < 0 || !fn)
        return -EINVAL;
    /* Claim s first, so that a source already added keeps its fields and a remove that races
     * with the add sees which step it came before (see enum source_state). */
    int st = atomic_load_explicit(&s->state, memory_order_acquire);
    for (;;) {
        if (st != SRC_UNUSED && st != SRC_REMOVED && st != SRC_EARLY) {
            sndk_err(SUBSYS, "source fd %d: add in state %s", fd, source_state_name(st));
            return -EINVAL;
        }
        if (atomic_compare_exchange_weak_explicit(&s->state, &st, SRC_CLAIMED,
                                                  memory_order_acq_rel, memory_order_acquire))
            break;
    }
    bool early = st == SRC_EARLY;
    struct sndk_progress *t = thread < 0 ? least_loaded(e) : &e->thr[thread];
    s->owner = t;
    s->fn = fn;
    s->fd = fd;
    if (early)
        return add_finish_early(t, s, fd);
    /* Release: the progress thread's acquire load of state (in dispatch) then sees owner, fn
     * and fd, without relying on epoll_ctl/epoll_wait as a synchronisation the tools see.
     * Fails only when a remove came meanwhile (CLAIMED -> EARLY). */
    st = SRC_CLAIMED;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &st, SRC_ADDING, memory_order_acq_rel,
                                                 memory_order_acquire))
        return add_finish_early(t, s, fd);
    atomic_fetch_add_explicit(&t->nsources, 1, memory_order_relaxed);
    struct epoll_event ev = {.events = events, .data.ptr = s};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int err = errno;
        atomic_fetch_sub_explicit(&t->nsources, 1, memory_order_relaxed);
        st = SRC_ADDING;
        if (!atomic_compare_exchange_strong_explicit(&s->state, &st, SRC_UNUSED,
                                                     memory_order_acq_rel, memory_order_acquire))
            return add_finish_early(t, s, fd); /* removed meanwhile: that is all it wanted */
        return -err;
    }
    /* From the successful exchange on, fn may run on t, remove s and free it: s is not touched
     * again. A dispatch that fetched s meanwhile waits for this step (see dispatch). */
    st = SRC_ADDING;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &st, SRC_ACTIVE, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        /* Removed while being added: the remover left the epoll side to us. */
        if (epoll_ctl(t->epfd, EPOLL_CTL_DEL, fd, NULL) < 0 && errno != ENOENT)
            sndk_warn(SUBSYS, "epoll_ctl(DEL, fd %d): %s", fd, strerror(errno));
        atomic_fetch_sub_explicit(&t->nsources, 1, memory_order_relaxed);
        return add_finish_early(t, s, fd);
    }
    sndk_debug(SUBSYS, "source fd %d on %s-%u: UNUSED => ACTIVE", fd, e->name, t->idx);
    return 0;
}

/* A move between ACTIVE and QUIET, made by the owner's modify or quiet; calls for one source are
 * ordered by its owner (as against remove, whose done may free s), so the exchange only catches
 * a caller that breaks that. */
static bool source_move(struct sndk_source *s, int from, int to, const char *why)
{
    int st = from;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &st, to, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        sndk_err(SUBSYS, "source fd %d: %s => %s (%s) raced: found %s", s->fd,
                 source_state_name(from), source_state_name(to), why, source_state_name(st));
        assert(!"sndk_source: modify or quiet raced with another call or a remove");
        return false;
    }
    sndk_debug(SUBSYS, "source fd %d on %s-%u: %s => %s (%s)", s->fd, s->owner->e->name,
               s->owner->idx, source_state_name(from), source_state_name(to), why);
    return true;
}

int sndk_source_modify(struct sndk_source *s, uint32_t events)
{
    int st = atomic_load_explicit(&s->state, memory_order_acquire);
    if (st != SRC_ACTIVE && st != SRC_QUIET)
        return -ENOENT;
    struct sndk_progress *t = s->owner;
    struct epoll_event ev = {.events = events, .data.ptr = s};
    if (st == SRC_ACTIVE) {
        if (epoll_ctl(t->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
            return -errno;
        return 0;
    }
    /* Back into epoll: ACTIVE first, so that a report the ADD makes possible finds s callable;
     * if the ADD fails, s goes back to QUIET. */
    if (!source_move(s, SRC_QUIET, SRC_ACTIVE, "watched again"))
        return -ENOENT;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
        int err = errno;
        source_move(s, SRC_ACTIVE, SRC_QUIET, "could not be watched again");
        return -err;
    }
    return 0;
}

/* Quiet: the owner has someone else watching fd (a polling consumer reads the socket itself)
 * and takes it out of epoll altogether. In the set, even watched for nothing, every wake-up of
 * the fd's wait queue (each segment a socket receives) still runs epoll's callback under its
 * lock: 0.17 us a message on a parked connection (docs/engine.md, "Quiet sources"). */
int sndk_source_quiet(struct sndk_source *s)
{
    int st = atomic_load_explicit(&s->state, memory_order_acquire);
    if (st == SRC_QUIET)
        return 0;
    if (st != SRC_ACTIVE)
        return -ENOENT;
    /* Out of epoll first, then QUIET: a batch fetched before the DEL may still name s, and
     * dispatch calls fn for a QUIET source as for an active one. */
    if (epoll_ctl(s->owner->epfd, EPOLL_CTL_DEL, s->fd, NULL) < 0 && errno != ENOENT)
        return -errno;
    return source_move(s, SRC_ACTIVE, SRC_QUIET, "quiet: watched elsewhere") ? 0 : -ENOENT;
}

unsigned sndk_source_thread(const struct sndk_source *s)
{
    return s->owner->idx;
}

bool sndk_source_watched(const struct sndk_source *s)
{
    int st = atomic_load_explicit(&s->state, memory_order_acquire);
    return st == SRC_ACTIVE || st == SRC_QUIET;
}

void sndk_source_remove(struct sndk_source *s, struct sndk_work *done)
{
    int prev = atomic_load_explicit(&s->state, memory_order_acquire);
    for (;;) {
        if (prev == SRC_ACTIVE || prev == SRC_QUIET) {
            if (atomic_compare_exchange_weak_explicit(&s->state, &prev, SRC_REMOVED,
                                                      memory_order_acq_rel, memory_order_acquire))
                break;
        } else if (prev == SRC_UNUSED || prev == SRC_CLAIMED || prev == SRC_ADDING) {
            /* Before its add finished. Dropping done here would leave whoever waits for it
             * (an object's close) waiting forever; queueing it now would let it close fd and
             * free s under the add. Hand it to the add, which queues it at its next step. The
             * fields of s may be being written by the add: only its address is logged. */
            s->early_done = done;
            if (atomic_compare_exchange_weak_explicit(&s->state, &prev, SRC_EARLY,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                sndk_err(SUBSYS, "source %p: remove in state %s (before its add finished): the "
                                 "add will complete it", (void *)s, source_state_name(prev));
                return;
            }
        } else {
            /* REMOVED or EARLY: removed twice. Its first done item will run (or has run and
             * may have freed s): nothing may be done with this one. */
            sndk_err(SUBSYS, "source %p: remove in state %s (removed twice): ignored", (void *)s,
                     source_state_name(prev));
            assert(!"sndk_source_remove: source removed twice");
            return;
        }
    }
    struct sndk_progress *t = s->owner;
    sndk_debug(SUBSYS, "source fd %d on %s-%u: %s => REMOVED", s->fd, t->e->name, t->idx,
               source_state_name(prev));
    /* NULL done is only safe from s's own fn: a later entry of the batch being dispatched may
     * still point at s, and only the thread's work queue runs after the batch. */
    assert(done || tls_self == t);
    /* ENOENT: destroy's drain already dropped it. A QUIET source is not in epoll. */
    if (prev == SRC_ACTIVE && epoll_ctl(t->epfd, EPOLL_CTL_DEL, s->fd, NULL) < 0 && errno != ENOENT)
        sndk_warn(SUBSYS, "epoll_ctl(DEL, fd %d): %s", s->fd, strerror(errno));
    atomic_fetch_sub_explicit(&t->nsources, 1, memory_order_relaxed);
    /* t runs its work queue only between epoll batches, never during a source fn: once done
     * runs, the batch that may hold s is finished and later batches cannot contain it. */
    if (done) {
        bool queued = queue_to(t->e, t, done);
        assert(queued);
        (void)queued;
    }
}

/* Deliver one epoll batch. Progress thread only; no lock held. */
static bool dispatch(struct sndk_progress *t, const struct epoll_event *evs, int n)
{
    bool called = false;
    bool stop = stopping(t->e);
    for (int i = 0; i < n; i++) {
        void *ptr = evs[i].data.ptr;
        if (ptr == &t->evfd) {
            uint64_t v;
            if (read(t->evfd, &v, sizeof v) < 0 && errno != EAGAIN)
                sndk_warn(SUBSYS, "eventfd read: %s", strerror(errno));
            continue;
        }
        struct sndk_source *s = ptr;
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        /* An add on another thread put s in epoll and is about to mark it ACTIVE (or to see that
         * it was removed meanwhile): a few instructions without a lock. Wait rather than skip,
         * or an edge-triggered event would be lost; skipping would also let fn run only after
         * that add no longer touches s. */
        for (unsigned spins = 0; st == SRC_ADDING; spins++) {
            if (spins < 64)
                cpu_relax();
            else
                sched_yield();
            st = atomic_load_explicit(&s->state, memory_order_acquire);
        }
        if (st != SRC_ACTIVE && st != SRC_QUIET)
            continue;
        if (stop) {
            /* Destroy: no more calls; keep a level-triggered fd from spinning the drain. */
            epoll_ctl(t->epfd, EPOLL_CTL_DEL, s->fd, NULL);
            continue;
        }
        s->fn(s, evs[i].events);
        called = true;
    }
    return called;
}

/* ------------------------------------------------------------------------------------------ */
/* Pollers */

void sndk_poller_init(struct sndk_poller *p, bool (*fn)(struct sndk_poller *p))
{
    p->next = p->prev = NULL;
    p->fn = fn;
    p->owner = NULL;
    p->done = NULL;
    p->removed = false;
}

int sndk_poller_add(struct sndk_engine *e, struct sndk_poller *p, int thread)
{
    if (thread < -1 || thread >= (int)e->nthreads || !p->fn)
        return -EINVAL;
    struct sndk_progress *t = thread >= 0 ? &e->thr[thread] : self_in(e) ? self_in(e) : &e->thr[0];
    sndk_mutex_lock(&t->lock);
    p->owner = t;
    p->removed = false;
    p->done = NULL;
    p->prev = NULL;
    p->next = t->pollers;
    if (t->pollers)
        t->pollers->prev = p;
    t->pollers = p;
    sndk_mutex_unlock(&t->lock);
    return 0;
}

/* Caller must hold t->lock. */
static void poller_unlink(struct sndk_progress *t, struct sndk_poller *p)
{
    sndk_assert_held(&t->lock);
    if (p->prev)
        p->prev->next = p->next;
    else
        t->pollers = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->next = p->prev = NULL;
}

void sndk_poller_remove(struct sndk_poller *p, struct sndk_work *done)
{
    struct sndk_progress *t = p->owner;
    sndk_mutex_lock(&t->lock);
    assert(!p->removed);
    p->removed = true;
    if (t->poll_cursor == p) {
        /* In its fn, or about to be looked at: run_pollers unlinks it and queues done. */
        p->done = done;
        sndk_mutex_unlock(&t->lock);
        return;
    }
    poller_unlink(t, p);
    sndk_mutex_unlock(&t->lock);
    if (done)
        queue_to(t->e, t, done);
}

/* One pass over the pollers. Progress thread only. */
static bool run_pollers(struct sndk_progress *t)
{
    bool progress = false;
    struct sndk_poller *p;
    sndk_mutex_lock(&t->lock);
    t->poll_cursor = t->pollers;
    while ((p = t->poll_cursor)) {
        bool call = !p->removed;
        struct sndk_work *done = NULL;
        if (!call) {
            t->poll_cursor = p->next;
            poller_unlink(t, p);
            done = p->done;
        }
        sndk_mutex_unlock(&t->lock);
        if (call)
            progress |= p->fn(p);
        else if (done)
            queue_to(t->e, t, done);
        sndk_mutex_lock(&t->lock);
        if (call) {
            /* p is still linked: while it was the cursor nobody could unlink it. If it was
             * removed meanwhile, the next turn of the loop finishes the removal. */
            if (!p->removed)
                t->poll_cursor = p->next;
        }
    }
    sndk_mutex_unlock(&t->lock);
    return progress;
}

/* ------------------------------------------------------------------------------------------ */
/* Progress threads */

/* Decide whether to block and for how long: 0 = do not block (something is pending), -1 =
 * until woken, else nanoseconds. On a non-zero return, sleeping is true. */
static int64_t prepare_sleep(struct sndk_progress *t)
{
    struct sndk_engine *e = t->e;
    atomic_store(&t->sleeping, true); /* seq_cst: see wake() */
    int64_t timeout = -1;
    if (exiting(e)) {
        timeout = 0;
    } else {
        sndk_mutex_lock(&t->lock);
        if (t->head) {
            timeout = 0;
        } else if (t->timers && !stopping(e)) {
            uint64_t now = now_us();
            uint64_t dl = t->timers->deadline_us;
            if (dl <= now)
                timeout = 0;
            else if (dl - now < (uint64_t)INT64_MAX / 1000)
                timeout = (int64_t)(dl - now) * 1000;
        }
        sndk_mutex_unlock(&t->lock);
    }
    if (timeout == 0)
        atomic_store(&t->sleeping, false);
    return timeout;
}

static int wait_events(struct sndk_progress *t, struct epoll_event *evs, int64_t timeout_ns)
{
    static atomic_bool no_pwait2;
    int n;
    if (timeout_ns <= 0) {
        n = epoll_wait(t->epfd, evs, MAX_EVENTS, timeout_ns < 0 ? -1 : 0);
    } else if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        /* Timers have µs resolution; epoll_wait's ms would make every short timer late. */
        struct timespec ts = {.tv_sec = timeout_ns / 1000000000,
                              .tv_nsec = timeout_ns % 1000000000};
        n = epoll_pwait2(t->epfd, evs, MAX_EVENTS, &ts, NULL);
        if (n < 0 && errno == ENOSYS) {
            atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
            return 0; /* the caller loops and comes back with the fallback */
        }
    } else {
        int64_t ms = (timeout_ns + 999999) / 1000000;
        n = epoll_wait(t->epfd, evs, MAX_EVENTS, ms > INT_MAX ? INT_MAX : (int)ms);
    }
    if (n < 0) {
        if (errno != EINTR)
            sndk_err(SUBSYS, "epoll_wait: %s", strerror(errno));
        n = 0;
    }
    return n;
}

static void *progress_main(void *arg)
{
    struct sndk_progress *t = arg;
    struct sndk_engine *e = t->e;
    char name[16];
    /* "<name>-<i>" within the 15 characters Linux allows: cut the prefix, keep the index. */
    int idx_len = snprintf(NULL, 0, "-%u", t->idx);
    snprintf(name, sizeof name, "%.*s-%u", 15 - idx_len, e->name, t->idx);
    pthread_setname_np(pthread_self(), name);
    tls_self = t;

    struct epoll_event evs[MAX_EVENTS];
    uint64_t spin_until = 0;
    /* A pass that made progress earns one more poll whatever the clock says: a thread preempted
     * between that pass and its window check would otherwise find its window gone and block,
     * leaving a poller that reported progress uncalled with no event to wake the thread. */
    bool busy_before = false;
    for (;;) {
        bool busy = run_work(t);
        busy |= run_timers(t);
        if (exiting(e))
            break; /* set only once all work has drained and nothing can queue more */
        int64_t timeout_ns = 0;
        bool slept = false;
        if (!busy) {
            if (e->spin_us && !stopping(e) && (busy_before || now_us() < spin_until)) {
                if (run_pollers(t))
                    busy = true;
                else
                    cpu_relax();
            } else {
                place_check_idle(t);
                timeout_ns = prepare_sleep(t);
                slept = timeout_ns != 0;
            }
        }
        int n = wait_events(t, evs, timeout_ns);
        if (slept)
            atomic_store(&t->sleeping, false);
        if (n > 0) {
            /* While a window of notes is open (sndk_engine_note_waiter), the time its events
             * take is counted: the receiving, the stream's work. Not the work items: a
             * notification's callback yields to the consumer it woke (cq.c), whose own time
             * would count as ours. A thread nobody's notes concern reads no clock here. */
            bool timed = t->win_notes > 0;
            uint64_t events_at = timed ? now_us() : 0;
            if (dispatch(t, evs, n))
                busy = true;
            if (timed)
                t->busy_us += now_us() - events_at;
        }
        /* Stay hot after any activity: the next event of a conversation usually follows
         * within a round trip, and catching it spinning saves a ~27 µs cross-core wake-up.
         * Not after a sleep that only ran out: what was due then is an upkeep timer (nothing
         * follows it) or another, whose firing counts as activity on the next pass. */
        if (e->spin_us && (busy || (slept && n > 0)))
            spin_until = now_us() + e->spin_us;
        busy_before = busy;
    }
    if (place_of(t) == PLACE_FOLLOWING)
        atomic_store(&cpu_followed[atomic_load(&t->place_cpu)], 0); /* the thread ends */
    tls_self = NULL;
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Engine */

void sndk_engine_options_default(struct sndk_engine_options *opt)
{
    opt->threads = 1;
    opt->spin_us = SNDK_ENGINE_DEFAULT_SPIN;
    opt->follow_waiters = true;
    opt->name = SNDK_ENGINE_DEFAULT_NAME;
}

/* CPUs this process may run on: the affinity mask (taskset, cgroups cpusets), bounded by the
 * online count. */
static unsigned usable_cpus(void)
{
    unsigned n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = (unsigned)CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online > 0 && (n == 0 || (unsigned long)online < n))
        n = (unsigned)online;
    return n ? n : 1;
}

unsigned sndk_engine_threads(const struct sndk_engine *e)
{
    return e->nthreads;
}

unsigned sndk_engine_spin_us(const struct sndk_engine *e)
{
    return e->spin_us;
}

bool sndk_engine_on_progress_thread(const struct sndk_engine *e)
{
    return self_in(e) != NULL;
}

int sndk_engine_current_thread(const struct sndk_engine *e)
{
    struct sndk_progress *t = self_in(e);
    return t ? (int)t->idx : -1;
}

/* Free an engine whose threads are joined (or were never started). */
static void engine_free(struct sndk_engine *e)
{
    for (unsigned i = 0; i < e->nthreads; i++) {
        struct sndk_progress *t = &e->thr[i];
        /* Pending timers are dropped; clear their owner so a later cancel returns false
         * instead of touching freed memory. */
        for (struct sndk_timer *tm = t->timers, *next; tm; tm = next) {
            next = tm->next;
            tm->next = tm->prev = NULL;
            atomic_store_explicit(&tm->owner, NULL, memory_order_relaxed);
        }
        if (t->evfd >= 0)
            close(t->evfd);
        if (t->epfd >= 0)
            close(t->epfd);
        sndk_mutex_destroy(&t->lock);
    }
    sndk_cond_destroy(&e->drain_cond);
    sndk_mutex_destroy(&e->drain_lock);
    sndk_mutex_destroy(&e->quiesce_lock);
    free(e);
}

static void stop_threads(struct sndk_engine *e, unsigned started)
{
    set_state(e, ENG_EXITING);
    for (unsigned i = 0; i < started; i++)
        wake(&e->thr[i]);
    for (unsigned i = 0; i < started; i++)
        pthread_join(e->thr[i].tid, NULL);
}

int sndk_engine_create(const struct sndk_engine_options *opt, struct sndk_engine **out)
{
    struct sndk_engine_options def;
    *out = NULL;
    if (!opt) {
        sndk_engine_options_default(&def);
        opt = &def;
    }
    unsigned n = opt->threads ? opt->threads : 1;
    if (n > SNDK_ENGINE_MAX_THREADS)
        return -EINVAL;

    size_t size = sizeof(struct sndk_engine) + n * sizeof(struct sndk_progress);
    size = (size + 63) & ~(size_t)63; /* aligned_alloc wants a multiple of the alignment */
    struct sndk_engine *e = aligned_alloc(64, size);
    if (!e)
        return -ENOMEM;
    memset(e, 0, size);
    e->nthreads = n;
    snprintf(e->name, sizeof e->name, "%s", opt->name ? opt->name : SNDK_ENGINE_DEFAULT_NAME);

    /* Spin policy. Spinning buys latency only while the spinner has a core to itself: two
     * spinners time-sharing a core each burn a scheduler slice while the other holds the
     * event (round trips grow to milliseconds), and the consumer's own polling thread needs a
     * core too. With one usable CPU, or more progress threads than CPUs, block at once. */
    unsigned cpus = usable_cpus();
    e->spin_us = opt->spin_us;
    e->follow = opt->follow_waiters && cpus > 1 &&
                sched_getaffinity(0, sizeof e->allowed, &e->allowed) == 0;
    if (e->spin_us && (cpus <= 1 || n > cpus)) {
        sndk_debug(SUBSYS, "spin %u us -> 0: %u threads on %u cpus", e->spin_us, n, cpus);
        e->spin_us = 0;
    }

    atomic_init(&e->state, ENG_RUNNING);
    atomic_init(&e->work_count, 0);
    atomic_init(&e->drain_waiters, 0);
    sndk_mutex_init_ranked(&e->quiesce_lock, SNDK_LOCK_ENGINE_QUIESCE);
    sndk_mutex_init_ranked(&e->drain_lock, SNDK_LOCK_ENGINE_DRAIN);
    sndk_cond_init(&e->drain_cond);

    int err = 0;
    for (unsigned i = 0; i < n; i++) {
        struct sndk_progress *t = &e->thr[i];
        t->e = e;
        t->idx = i;
        t->epfd = t->evfd = -1;
        atomic_init(&t->sleeping, false);
        atomic_init(&t->nsources, 0);
        atomic_init(&t->nwork, 0);
        atomic_init(&t->next_deadline, UINT64_MAX);
        atomic_init(&t->place_cpu, -1);
        sndk_mutex_init_ranked(&t->lock, SNDK_LOCK_ENGINE_THREAD);
    }
    for (unsigned i = 0; i < n && !err; i++) {
        struct sndk_progress *t = &e->thr[i];
        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (t->epfd < 0) {
            err = -errno;
            break;
        }
        t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (t->evfd < 0) {
            err = -errno;
            break;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->evfd};
        if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev) < 0)
            err = -errno;
    }
    if (err) {
        sndk_err(SUBSYS, "engine fds: %s", strerror(-err));
        engine_free(e);
        return err;
    }

    /* Threads inherit the creator's signal mask: block everything while creating them so that
     * the host's signals are never delivered on our threads, and give the caller its mask back.
     * Not the signals of a fault: one raised while blocked kills the process before any handler
     * (a sanitizer's, the WDK harness's bugcheck report) can say where a consumer callback
     * crashed. */
    sigset_t all, saved;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    unsigned started = 0;
    for (; started < n; started++) {
        int rc = pthread_create(&e->thr[started].tid, NULL, progress_main, &e->thr[started]);
        if (rc) {
            err = -rc;
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (err) {
        sndk_err(SUBSYS, "pthread_create: %s", strerror(-err));
        stop_threads(e, started);
        engine_free(e);
        return err;
    }
    sndk_debug(SUBSYS, "%s: %u threads, spin %u us (%u cpus), %s", e->name, n, e->spin_us, cpus,
               e->follow ? "following waiters" : "on any CPU");
    *out = e;
    return 0;
}

void sndk_engine_destroy(struct sndk_engine *e)
{
    if (!e)
        return;
    assert(!self_in(e));
    /* 1: no more timers, source or poller calls. Waking lets a thread that sleeps until a
     * timer deadline recompute its timeout (now infinite). */
    set_state(e, ENG_STOPPING);
    for (unsigned i = 0; i < e->nthreads; i++)
        wake(&e->thr[i]);
    /* 2: run all work, including what it queues in turn. Nothing else can queue now. */
    wait_work(e, -1);
    /* 3, 4 */
    stop_threads(e, e->nthreads);
    engine_free(e);
}
