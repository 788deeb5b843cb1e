/* The progress engine: a small pool of progress threads running epoll, timers, deferred work and
 * spin-phase pollers. It knows no NDK object. Each adapter owns one engine; the RX path,
 * connection management and consumer callbacks run on it. docs/engine.md has the full model.
 *
 * General contract
 * - Every callback (work, source, timer, poller fn) runs on a progress thread with NO engine
 *   lock held, so it may re-enter the engine freely: queue work (itself included), arm or cancel
 *   timers, add, modify or remove sources (its own included). It must not block for long: it
 *   holds up everything else on its thread.
 * - Every item (work, source, timer, poller) is embedded in its owner's object; the engine never
 *   allocates per item, so queueing and arming cannot fail. The owner keeps the item alive and
 *   unmoved while the engine may touch it (stated per item below).
 * - Nothing here blocks except sndk_engine_create, sndk_engine_destroy and sndk_engine_quiesce,
 *   which must never be called from a progress thread of the same engine (they would wait for
 *   themselves); they assert this.
 * - Threads are numbered 0 .. threads-1; "thread" arguments use these numbers.
 */
#ifndef SOFTNDK_ENGINE_ENGINE_H
#define SOFTNDK_ENGINE_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sndk_engine;
struct sndk_progress; /* one progress thread, private */

/* ------------------------------------------------------------------------------------------ */
/* Engine */

#define SNDK_ENGINE_MAX_THREADS   64
#define SNDK_ENGINE_DEFAULT_SPIN  50 /* µs */
#define SNDK_ENGINE_DEFAULT_NAME  "sndk-prog"

struct sndk_engine_options {
    unsigned threads;   /* progress threads; 0 = 1; at most SNDK_ENGINE_MAX_THREADS */
    unsigned spin_us;   /* spin before blocking, in µs (0 = block at once); see the policy below */
    bool follow_waiters; /* a thread moves to the CPU its notes name (sndk_engine_note_waiter) */
    const char *name;   /* thread name prefix; threads are "<name>-<i>", cut to 15 chars; NULL =
                           SNDK_ENGINE_DEFAULT_NAME */
};
/* Initialise *opt to the defaults (1 thread, SNDK_ENGINE_DEFAULT_SPIN, default name). Start from
 * this rather than from a zeroed struct, which would mean "no spinning". */
void sndk_engine_options_default(struct sndk_engine_options *opt);

/* Create an engine and start its threads. opt may be NULL for the defaults.
 * Spin policy: spin_us is forced to 0 when the process may run on only one CPU, or when
 * threads exceeds the CPUs it may run on (two spinners on one core starve each other: round
 * trips grow to milliseconds). The effective value is sndk_engine_spin_us().
 * Progress threads start with every signal blocked (the caller's mask is restored before
 * return) and named. Returns 0, -EINVAL (bad options), -ENOMEM, -EMFILE/-ENFILE (fds),
 * -EAGAIN (threads). On failure nothing is left behind. Blocking; any non-progress thread. */
int sndk_engine_create(const struct sndk_engine_options *opt, struct sndk_engine **out);

/* Destroy an engine. Blocking; never from a progress thread of e, and not concurrently with any
 * other call on e from outside its progress threads.
 * Order: (1) timers stop firing and source/poller fns are no longer called; (2) every queued
 * work item runs, with whatever it queues in turn, until none is left (so done items of
 * sources removed before or during destroy do run; work that re-queues itself forever makes
 * destroy wait forever); (3) threads are joined; (4) the epoll fds
 * and eventfds are closed and the memory freed. When it returns no callback is running and
 * none will run. Timers still pending are dropped (a later sndk_timer_cancel returns false);
 * sources and pollers still registered are forgotten (their fds stay the owner's, which
 * must not call sndk_source_remove on them afterwards). */
void sndk_engine_destroy(struct sndk_engine *e);

unsigned sndk_engine_threads(const struct sndk_engine *e);
unsigned sndk_engine_spin_us(const struct sndk_engine *e); /* after the spin policy */

/* The names the engine logs its internal states by (a source's, the engine's lifecycle), by
 * value; "?" from the count on. The states are engine.c's own, their counts are here so that
 * the name tables can be walked from outside (engine.c checks them statically). */
#define SNDK_ENGINE_SOURCE_STATES 7
#define SNDK_ENGINE_STATES        3
const char *sndk_engine_source_state_name(unsigned st);
const char *sndk_engine_state_name(unsigned st);

/* Where a progress thread runs (docs/engine.md, "Following the waiter"): on any CPU the process
 * may use, or on the one CPU where the consumer that waits for what it delivers runs. Only the
 * thread moves itself. The names by value; "?" from the count on. */
#define SNDK_ENGINE_PLACES 2
const char *sndk_engine_place_name(unsigned place);

/* The consumer waiting for what the calling progress thread just delivered (a CQ notification)
 * runs on `cpu`. With follow_waiters, a thread whose notes keep naming one CPU it is not on
 * moves there, so that its wake-up of that consumer is a local one, not a cross-CPU wake-up
 * (on a VM an idle vCPU's wake-up can cost tens of µs). A CPU outside the process's affinity
 * at create, or a negative one, is ignored. Progress threads of e only (asserted). */
void sndk_engine_note_waiter(struct sndk_engine *e, int cpu);

/* The CPU a progress thread of e is pinned to by following (-1: any CPU); for ndkstat and
 * tests. Any thread; a snapshot. */
int sndk_engine_thread_cpu(const struct sndk_engine *e, unsigned thread);

/* Is the caller one of e's progress threads? Any thread. */
bool sndk_engine_on_progress_thread(const struct sndk_engine *e);
/* Index of the calling progress thread of e, or -1 when the caller is not one. Any thread. */
int sndk_engine_current_thread(const struct sndk_engine *e);

/* ------------------------------------------------------------------------------------------ */
/* Deferred work */

struct sndk_work {
    struct sndk_work *next;          /* queue link; owned by the queue holding the item */
    void (*fn)(struct sndk_work *w);
    atomic_bool queued;              /* set by queue, cleared just before fn is called */
    unsigned char epoch;             /* quiesce generation, see engine.c */
};

/* Initialise a work item. Must not be called while the item is queued. */
void sndk_work_init(struct sndk_work *w, void (*fn)(struct sndk_work *w));

/* Queue w to run once on a progress thread. Any thread, including progress threads and work,
 * source, timer and poller fns; never blocks, never allocates, never fails.
 * Returns false (and does nothing) when w is already queued, on any thread of any engine;
 * true when it was not: the owner then takes one reference and fn drops it (see "References"
 * below, at the timers), so the owner needs no "queued" flag.
 * w is unqueued just before fn is called, so fn may queue w again; the engine does not touch w
 * after calling fn, so fn may free it.
 * Thread choice: a progress thread queues to itself; any other thread always queues to the
 * same progress thread (chosen once per calling thread), so items queued by one thread run in
 * the order queued (FIFO). Items queued by different threads are unordered unless pinned to
 * the same thread with sndk_engine_queue_on. A re-queued item may run on another thread than
 * before, concurrently with the tail of its previous fn; pin it if that matters. */
bool sndk_engine_queue(struct sndk_engine *e, struct sndk_work *w);

/* As sndk_engine_queue, on progress thread `thread` (< sndk_engine_threads(e)). Items queued to
 * one thread run in the order they were queued, one at a time. */
bool sndk_engine_queue_on(struct sndk_engine *e, unsigned thread, struct sndk_work *w);

/* Return once every work item queued before the call, and every item those queue in turn
 * (transitively, from inside their fns), has finished running. Work queued by other threads,
 * timers or source fns after the call started is not waited for (so quiesce cannot be starved
 * by steady traffic, but a work chain that re-queues itself forever never quiesces).
 * Blocking; never from a progress thread of e. Concurrent calls are serialised. */
void sndk_engine_quiesce(struct sndk_engine *e);

/* ------------------------------------------------------------------------------------------ */
/* fd sources: a fd watched by one progress thread's epoll. */

struct sndk_source;
typedef void (*sndk_source_fn)(struct sndk_source *s, uint32_t epoll_events);

struct sndk_source {
    struct sndk_progress *owner;     /* thread that watches fd; set by add */
    sndk_source_fn fn;
    int fd;
    atomic_int state;                /* enum in engine.c; publishes the fields above */
    struct sndk_work *early_done;    /* done of a remove that came before add finished */
};

/* Watch fd for `events` (EPOLLIN, EPOLLOUT, EPOLLET, EPOLLONESHOT, ...) on progress thread
 * `thread`, or on the thread with the fewest sources when thread is -1. fn(s, revents) is then
 * called on that thread, and only there, whenever epoll reports the fd (EPOLLERR/EPOLLHUP
 * included). s must stay valid until the done item of sndk_source_remove has run. fd stays the
 * caller's; the engine never closes it. The call may come on the progress thread before add
 * returns. s starts zeroed (never added); a source whose done item has run may be added again.
 * Any thread. Returns 0, -EINVAL (bad thread or s already added or being added) or the
 * epoll_ctl error (-EEXIST, -EPERM for regular files, -ENOMEM, -ENOSPC).
 * If sndk_source_remove(s, done) came first (before or while this add ran), the add completes
 * that removal: fd is not left in epoll, fn is not called, done is queued to s's thread, and
 * 0 is returned (logged as an error: the caller should order remove after add). */
int sndk_source_add(struct sndk_engine *e, struct sndk_source *s, int fd, uint32_t events,
                    sndk_source_fn fn, int thread);

/* Change the watched events (same flags as add; with EPOLLONESHOT this re-arms); a quiet source
 * goes back into epoll (a hang-up or error already there is then reported, level-triggered).
 * Any thread, but calls of modify and quiet for one source are ordered by its owner, and none
 * races with its remove (whose done may free s). Returns 0, -ENOENT when s was removed, or the
 * epoll_ctl error (for a quiet source, of the ADD: -ENOMEM, -ENOSPC; s then stays quiet). */
int sndk_source_modify(struct sndk_source *s, uint32_t events);

/* Take s's fd out of epoll altogether, until the next modify: not even a hang-up or an error is
 * reported meanwhile. For an owner that has someone else reading fd (a consumer polling a
 * parked connection's socket), as watching for nothing (events 0) still costs every wake-up of
 * the fd's wait queue epoll's callback. The source stays added (sndk_source_watched; remove it
 * as any other). Same ordering rules as modify. Returns 0 (also when already quiet), -ENOENT
 * when s was removed, or the epoll_ctl error. */
int sndk_source_quiet(struct sndk_source *s);

/* Index of the progress thread that runs s's fn. */
unsigned sndk_source_thread(const struct sndk_source *s);

/* Is s watched: its add returned 0 (and found no earlier remove) and no remove came since? A
 * snapshot, stable when the owner serialises add and remove (under its lock, as it must for
 * remove-after-add anyway): the owner then asks the engine whether it still has a source to
 * remove, rather than keeping an "added" flag beside it. Any thread. */
bool sndk_source_watched(const struct sndk_source *s);

/* Stop watching s. Any thread, including s's own fn; non-blocking. When it returns, fd is out
 * of epoll and no new call of fn starts, except one that the progress thread had already
 * committed to (its readiness was fetched before the removal and it raced with it): that call
 * and any call already running count as "in flight". `done` is queued to s's progress thread
 * (it must not be queued elsewhere at that moment) and runs after every in-flight call has
 * returned; from then on the engine never touches s or fd, so done may free s and close fd.
 * done may be NULL only when s removes itself from its own fn: once that fn returns nothing
 * is in flight and the batch cannot name s again, so fn may even close fd and free s before
 * returning. Removing twice is a bug (asserted; logged and ignored without assertions).
 * Removing a source whose add has not finished (never added, or another thread is adding it)
 * is a caller race, logged as an error, but never loses done: it is kept in s and that add
 * queues it (see sndk_source_add). Queueing it at once would be wrong (done may close fd and
 * free s while the add still uses them), so a source that is removed and then never added
 * never runs its done: remove only what was, or is being, added. */
void sndk_source_remove(struct sndk_source *s, struct sndk_work *done);

/* ------------------------------------------------------------------------------------------ */
/* Timers: one-shot, CLOCK_MONOTONIC, µs resolution. */

struct sndk_timer {
    struct sndk_timer *next, *prev;  /* owner thread's deadline list; under its lock */
    void (*fn)(struct sndk_timer *t);
    uint64_t deadline_us;
    uint64_t seq;                    /* arm sequence; bounds one firing pass */
    _Atomic(struct sndk_progress *) owner; /* thread it is pending on; NULL when not pending */
    bool upkeep; /* sndk_timer_init_upkeep: its firing opens no spin window */
};

/* Initialise a timer (not pending). Must not be called while it is pending. */
void sndk_timer_init(struct sndk_timer *t, void (*fn)(struct sndk_timer *t));
/* As sndk_timer_init, for a timer that is the library's own upkeep (a periodic look, a trim)
 * rather than a step of a conversation with a peer: its firing opens no spin window
 * (docs/engine.md, "Spin policy"), so a thread that had nothing else to do goes back to sleep
 * when its fn returns. A check every few ms on a thread whose consumer polls for itself then
 * costs the fn, not the fn and 50 µs of spinning on the consumer's CPUs. */
void sndk_timer_init_upkeep(struct sndk_timer *t, void (*fn)(struct sndk_timer *t));

/* References. A pending timer or a queued work item usually keeps its owner alive: the owner
 * takes a reference when the item becomes pending and the item gives it back when it is no
 * longer pending. The engine's own pending state is the record of that reference, so the owner
 * needs no "armed" or "queued" flag of its own:
 *   - sndk_timer_arm (and _arm_on) returns true when t was not pending: a new pending period
 *     begins and the owner takes one reference (false: t was pending and was only moved, the
 *     period and its reference go on);
 *   - each pending period ends exactly once: either fn is called (fn drops the reference) or
 *     sndk_timer_cancel returns true (its caller drops it). A cancel that returns false ended
 *     nothing: the fn that is running or about to run drops it;
 *   - so an arm while fn runs (t already not pending) returns true and takes a second
 *     reference, for the new period; the running fn still drops the first;
 *   - for work, sndk_engine_queue returning true begins the period and fn ends it.
 * Take the reference when arm or queue returned true (the object is alive then: the caller
 * holds its own reference or the owner's lock), so the take never races with the drop. Arm and
 * cancel must be serialised by the owner (its lock), as below; fn's start is not, and need
 * not be: the engine decides "pending" under its own lock. A timer still pending when its
 * engine is destroyed never ends its period (destroy comes after every owner is gone). */

/* Arm t to fire once, delay_us from now. A pending timer is moved to the new deadline and stays
 * on its thread; otherwise it goes on the caller's progress thread, or for other callers on
 * the thread sndk_engine_queue would pick. Timers with equal deadlines fire in arming order.
 * fn runs on that thread with no engine lock held; t is no longer pending when fn starts,
 * so fn may re-arm or free it. Any thread, including t's own fn; never fails.
 * Returns true when t was not pending (a new pending period: take a reference, see above),
 * false when a pending t was moved. */
bool sndk_timer_arm(struct sndk_engine *e, struct sndk_timer *t, uint64_t delay_us);

/* As sndk_timer_arm, but on progress thread `thread` (moving t there if pending elsewhere). */
bool sndk_timer_arm_on(struct sndk_engine *e, unsigned thread, struct sndk_timer *t,
                       uint64_t delay_us);

/* Cancel t. Returns true when it was pending and now will not run (the caller ends its pending
 * period: drops the reference its arm took); false when it was not pending: never armed,
 * already ran, or is running right now (fn may still be executing on its thread: the caller
 * synchronises with it through its own state, and that fn drops the reference). Any thread.
 * Arm and cancel of one timer from different threads at once are not ordered; the owner
 * serialises them (it normally does so under its own lock). */
bool sndk_timer_cancel(struct sndk_timer *t);

/* Is t pending? A snapshot: only stable when the owner serialises arm/cancel/fn. */
bool sndk_timer_pending(const struct sndk_timer *t);

/* ------------------------------------------------------------------------------------------ */
/* Pollers: called by a spinning progress thread (no ready events, inside its spin window),
 * e.g. "try to receive on my connections". They are an optimisation over epoll readiness,
 * never the only path to progress: with spin_us == 0 they are never called. */

struct sndk_poller {
    struct sndk_poller *next, *prev; /* owner thread's list; under its lock */
    bool (*fn)(struct sndk_poller *p);
    struct sndk_progress *owner;     /* set by add */
    struct sndk_work *done;          /* removal completion, while fn is in flight */
    bool removed;                    /* under the owner's lock */
};

/* fn returns true when it made progress (the thread then keeps spinning). */
void sndk_poller_init(struct sndk_poller *p, bool (*fn)(struct sndk_poller *p));

/* Register p on progress thread `thread` (-1: the caller's progress thread, else thread 0).
 * Any thread. Returns 0 or -EINVAL. */
int sndk_poller_add(struct sndk_engine *e, struct sndk_poller *p, int thread);

/* Unregister p. Any thread, including p's fn; non-blocking. When it returns, no new call of fn
 * starts; done (may be NULL) is queued to p's thread once no call is in flight, after which
 * the engine never touches p. */
void sndk_poller_remove(struct sndk_poller *p, struct sndk_work *done);

#endif
