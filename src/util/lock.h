/* Mutex wrapper with owner tracking, so that every "caller must hold X" comment can be paired
 * with sndk_assert_held(&X) (docs/datapath.md#locking), and with lock ranks, so that taking a
 * lock out of the documented order (docs/architecture.md#lock-order) aborts at once, on the
 * first run that does it, not under load when two threads happen to deadlock.
 *
 * The owner and the ranks are tracked when assertions are on (NDEBUG undefined: every build,
 * unless SOFTNDK_ASSERTS=OFF) or SOFTNDK_LOCK_DEBUG is defined; otherwise the wrapper compiles
 * down to the lock word alone.
 *
 * The mutex itself is one 32-bit word and futex(2), not a pthread_mutex_t: a lock and an unlock
 * that nobody contends are one atomic instruction each, inline, where glibc's were two calls
 * that also checked the mutex's type and kept its owner and user count. That difference was a
 * tenth of the data path's work on one core (seven locks a Send and its receive:
 * docs/datapath.md#locking). The word is 0 (free), 1 (held) or 2 (held, and a thread may sleep
 * on it): a locker that finds it held swaps in 2 and sleeps while it reads back non-zero, and an
 * unlock that swaps out a 2 wakes one sleeper, the classic three-state futex mutex. No spinning
 * before the sleep, as glibc's default mutex. Under ThreadSanitizer the operations are
 * annotated as a mutex's, so its reports and its lock-order checks know them.
 *
 * Ranks: a blocking lock of rank r may be taken only while every ranked lock the thread holds
 * has a rank below r. A try-lock never waits, so it may be taken out of order (the CQ poll's
 * try-lock of rx_lock); it counts as held for the locks taken after it. Rank 0 is unranked.
 *
 * Why the owner is an atomic word and not a pthread_t: sndk_mutex_held() is read by threads
 * that do not hold the lock. A thread that holds the lock wrote the owner itself, so it reads
 * its own identity; a thread that does not hold it can never read its own identity, whatever
 * stale value it sees. Relaxed ordering is therefore enough, and the atomic keeps the race
 * defined (and TSan quiet). The identity is the address of a thread-local byte: unique among
 * live threads and cheaper than pthread_self(). */
#ifndef SOFTNDK_UTIL_LOCK_H
#define SOFTNDK_UTIL_LOCK_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#if !defined(NDEBUG) || defined(SOFTNDK_LOCK_DEBUG)
#define SNDK_LOCK_TRACK 1
#else
#define SNDK_LOCK_TRACK 0
#endif

/* The lock order, outermost first: every mutex of the library has a rank here, and the table in
 * docs/architecture.md#lock-order lists the same locks in the same order. The QP and CQ locks
 * in the middle are the data path's order of src/device/qp_state.h. Locks that nest nothing (the
 * adapter's, the observability locks) sit after the data path's so that any of them may be
 * taken under any data-path lock; the engine's come last, as nothing is taken under them. */
enum sndk_lock_rank {
    SNDK_LOCK_UNRANKED,
    SNDK_LOCK_DEVICES,        /* adapter.c: the process's device list */
    SNDK_LOCK_LISTENER,       /* l->lock */
    SNDK_LOCK_CONNECTOR,      /* c->lock */
    SNDK_LOCK_ADMISSION,      /* l->adm.lock: the listener's door */
    SNDK_LOCK_ENDPOINTS,      /* endpoint.c: the table of bound local addresses */
    SNDK_LOCK_QP_VERIFY_POST, /* qp->verify_rq_serial: receive posts, under the verifier */
    SNDK_LOCK_CQ_VERIFY_POLL, /* cq->verify_poll_serial: polls, under the verifier */
    SNDK_LOCK_CQ_CONN,        /* cq->conn_lock */
    SNDK_LOCK_QP_STATE,       /* qp->state_lock */
    SNDK_LOCK_QP_RX,          /* qp->rx_lock */
    SNDK_LOCK_QP_TX,          /* qp->tx_lock */
    SNDK_LOCK_SRQ,            /* srq->lock */
    SNDK_LOCK_CQ,             /* cq->lock */
    SNDK_LOCK_STAG,           /* the PD's STag table lock (stag.h) */
    SNDK_LOCK_CQ_READY,       /* cq->ready_mu */
    SNDK_LOCK_ADAPTER,        /* a->lock: the adapter's live objects (an object's last put) */
    SNDK_LOCK_FAULTS,         /* f->lock: the fault rules' counts */
    SNDK_LOCK_STAT,           /* s->lock: the ndkstat endpoint's clients */
    SNDK_LOCK_COUNTERS,       /* a->ctrs.lock: the counter registry */
    SNDK_LOCK_PCAP_LIST,      /* pcap.c: the open capture files */
    SNDK_LOCK_PCAP,           /* p->lock: one capture file */
    SNDK_LOCK_TRACE,          /* trace.c: the trace log */
    SNDK_LOCK_SHM_MAPS,       /* stream_shm.c: the rings this process mapped */
    SNDK_LOCK_ENGINE_QUIESCE, /* e->quiesce_lock */
    SNDK_LOCK_ENGINE_THREAD,  /* t->lock, a progress thread's (two: sndk_mutex_lock_nested) */
    SNDK_LOCK_ENGINE_DRAIN,   /* e->drain_lock */
    SNDK_LOCK_RANKS
};

/* "cq->lock" for SNDK_LOCK_CQ (the lock order's own names); "?" past the last rank. */
const char *sndk_lock_rank_name(enum sndk_lock_rank r);

#if defined(__SANITIZE_THREAD__)
#define SNDK_LOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SNDK_LOCK_TSAN 1
#endif
#endif
#ifndef SNDK_LOCK_TSAN
#define SNDK_LOCK_TSAN 0
#endif
#if SNDK_LOCK_TSAN
#include <sanitizer/tsan_interface.h>
#endif

struct sndk_mutex {
    _Atomic uint32_t word; /* 0 free, 1 held, 2 held with a possible sleeper (futex(2)) */
    unsigned char rank;    /* enum sndk_lock_rank */
#if SNDK_LOCK_TRACK
    /* The rank as the checks' mask, made once: its bit (0 for an unranked lock, so that its
     * checks test nothing without a branch); the ranks from it on are ~(rank_bit - 1). */
    uint64_t rank_bit;
    _Atomic uintptr_t owner; /* sndk_lock_self() of the holder, 0 when free */
#endif
};

/* A rank's bit (struct sndk_mutex): none for the unranked. */
#define SNDK_LOCK_RANK_BIT(r) ((r) ? (uint64_t)1 << (r) : (uint64_t)0)

/* Thread-local state on the hot path: the initial-exec model makes an access one load from the
 * thread pointer instead of a __tls_get_addr call, which a shared library pays by default (it
 * was ~2 % of a polling consumer's samples). Costs a few bytes of the static TLS block, which
 * glibc keeps spare room for, also for a library loaded with dlopen. */
#define SNDK_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#if SNDK_LOCK_TRACK
_Static_assert(SNDK_LOCK_RANKS <= 64, "the held ranks are one 64-bit mask");
/* The ranks of which the calling thread holds a lock, as one mask (util/lock.c): the check of
 * every lock taken is one test of it. A thread mostly holds one lock of a rank, so the mask is
 * all the bookkeeping a lock and an unlock do; the locks held beyond the first of their rank
 * (a nested take, an out-of-order try-lock of a rank already held) are counted apart, per rank
 * and in total, and an unlock looks at those counts only when the total is not zero. This
 * bookkeeping is on the path of every lock of every message (seven locks for a Send and its
 * receive): the mask took about 10 ns a message off a polling ping-pong, against a count per
 * rank on every lock and unlock (docs/datapath.md#locking). */
extern SNDK_TLS uint64_t sndk_lock_held_mask;
extern SNDK_TLS unsigned sndk_lock_extra_total;
extern SNDK_TLS unsigned char sndk_lock_extra[SNDK_LOCK_RANKS];
/* The calling thread's identity as a word: the address of a thread-local of util/lock.c (one
 * variable for the whole library, unlike a static in this header), with no call. */
extern SNDK_TLS char sndk_lock_me;
/* Report "taking rank r while holding rank held" and abort. */
_Noreturn void sndk_lock_order_violation(unsigned r, unsigned held);

/* Abort when the thread holds a lock of a rank in `ranks`: l's rank and those after it, or only
 * those after it for a nested lock of l's own rank. */
static inline void sndk_lock_rank_check(const struct sndk_mutex *l, uint64_t ranks)
{
    uint64_t held = sndk_lock_held_mask & ranks;
    if (__builtin_expect(held != 0, 0))
        sndk_lock_order_violation(l->rank, (unsigned)__builtin_ctzll(held));
}
static inline void sndk_lock_rank_take(const struct sndk_mutex *l)
{
    uint64_t held = sndk_lock_held_mask;
    if (__builtin_expect((held & l->rank_bit) != 0, 0)) {
        sndk_lock_extra[l->rank]++;
        sndk_lock_extra_total++;
    } else {
        sndk_lock_held_mask = held | l->rank_bit;
    }
}
static inline void sndk_lock_rank_drop(const struct sndk_mutex *l)
{
    if (__builtin_expect(sndk_lock_extra_total != 0, 0) && sndk_lock_extra[l->rank] > 0) {
        sndk_lock_extra[l->rank]--;
        sndk_lock_extra_total--;
        return;
    }
    assert((sndk_lock_held_mask & l->rank_bit) == l->rank_bit);
    sndk_lock_held_mask &= ~l->rank_bit;
}
#endif

/* The calling thread as a word (only the tracking uses it): the address of util/lock.c's
 * thread-local, one variable for the whole library. */
static inline uintptr_t sndk_lock_self(void)
{
#if SNDK_LOCK_TRACK
    return (uintptr_t)&sndk_lock_me;
#else
    return (uintptr_t)pthread_self();
#endif
}

static inline void sndk_mutex_init_ranked(struct sndk_mutex *l, enum sndk_lock_rank rank)
{
    atomic_init(&l->word, 0);
    l->rank = (unsigned char)rank;
#if SNDK_LOCK_TSAN
    __tsan_mutex_create(l, 0);
#endif
#if SNDK_LOCK_TRACK
    l->rank_bit = SNDK_LOCK_RANK_BIT(rank);
    atomic_init(&l->owner, 0);
#endif
}

static inline void sndk_mutex_init(struct sndk_mutex *l)
{
    sndk_mutex_init_ranked(l, SNDK_LOCK_UNRANKED);
}

/* For a lock with static storage (a file's table lock), which has no init call to give it its
 * rank. The owner word is left to static zero-initialisation, valid for an atomic. */
#if SNDK_LOCK_TRACK
#define SNDK_MUTEX_INITIALIZER(r)                                                                  \
    {                                                                                              \
        .word = 0, .rank = (unsigned char)(r), .rank_bit = SNDK_LOCK_RANK_BIT(r)                   \
    }
#else
#define SNDK_MUTEX_INITIALIZER(r)                                                                  \
    {                                                                                              \
        .word = 0, .rank = (unsigned char)(r)                                                      \
    }
#endif

static inline void sndk_mutex_destroy(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) == 0);
#endif
    assert(atomic_load_explicit(&l->word, memory_order_relaxed) == 0);
#if SNDK_LOCK_TSAN
    __tsan_mutex_destroy(l, 0);
#else
    (void)l;
#endif
}

/* The bookkeeping of a lock just taken, whichever way it was taken: this thread owns it and
 * holds one more of its rank. */
static inline void sndk_mutex_now_owned(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    atomic_store_explicit(&l->owner, sndk_lock_self(), memory_order_relaxed);
    sndk_lock_rank_take(l);
#else
    (void)l;
#endif
}

/* The bookkeeping of a lock about to be let go (unlocked, or given up to a condition wait):
 * this thread must own it. */
static inline void sndk_mutex_now_released(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) == sndk_lock_self());
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
    sndk_lock_rank_drop(l);
#else
    (void)l;
#endif
}

/* Time a thread spent blocked on softndk's own mutexes, counted while it asks for it (the
 * verifier does, inside a consumer callback: a callback that waited for a lock a preempted
 * progress thread held inside NdkGetCqResults or NdkArmCq did not wait of its own accord). Only
 * a lock that was not free on the first try is timed; one that was costs nothing more. */
struct sndk_lock_waited {
    unsigned timing; /* > 0: time the waits (nested scopes count up) */
    uint64_t ns;     /* blocked on contended locks while timing, in total */
    uint64_t waits;  /* how many such locks */
};
extern SNDK_TLS struct sndk_lock_waited sndk_lock_waited;

/* Take l, which the first try found held (util/lock.c): sleeps on the word until it is free,
 * timed when the thread asks for it. */
void sndk_mutex_lock_contended(struct sndk_mutex *l);
/* Wake one thread sleeping on l's word (util/lock.c). */
void sndk_mutex_wake(struct sndk_mutex *l);

static inline bool sndk_mutex_try_word(struct sndk_mutex *l)
{
    uint32_t free_word = 0;
    return atomic_compare_exchange_strong_explicit(&l->word, &free_word, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void sndk_mutex_lock_raw(struct sndk_mutex *l)
{
#if SNDK_LOCK_TSAN
    __tsan_mutex_pre_lock(l, 0);
#endif
    if (__builtin_expect(!sndk_mutex_try_word(l), 0))
        sndk_mutex_lock_contended(l);
#if SNDK_LOCK_TSAN
    __tsan_mutex_post_lock(l, 0, 0);
#endif
}

static inline void sndk_mutex_unlock_raw(struct sndk_mutex *l)
{
#if SNDK_LOCK_TSAN
    __tsan_mutex_pre_unlock(l, 0);
#endif
    if (__builtin_expect(atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2, 0))
        sndk_mutex_wake(l);
#if SNDK_LOCK_TSAN
    __tsan_mutex_post_unlock(l, 0);
#endif
}

static inline void sndk_mutex_lock(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    /* Recursive locking deadlocks silently with default mutexes; catch it here instead. */
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) != sndk_lock_self());
    sndk_lock_rank_check(l, ~(l->rank_bit - 1)); /* l's rank and those after it */
#endif
    sndk_mutex_lock_raw(l);
    sndk_mutex_now_owned(l);
}

/* Take l while holding another lock of the same rank, which the ranks alone would refuse. For
 * locks whose caller orders them among themselves by something the ranks cannot see (the
 * engine's progress-thread locks: lower thread index first); still checked against every
 * rank above l's. */
static inline void sndk_mutex_lock_nested(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) != sndk_lock_self());
    assert(l->rank && (sndk_lock_held_mask & l->rank_bit));
    sndk_lock_rank_check(l, ~((l->rank_bit << 1) - 1)); /* the ranks after l's */
#endif
    sndk_mutex_lock_raw(l);
    sndk_mutex_now_owned(l);
}

/* Never waits: true when taken. Out of rank order is allowed (see the top). */
static inline bool sndk_mutex_trylock(struct sndk_mutex *l)
{
#if SNDK_LOCK_TSAN
    __tsan_mutex_pre_lock(l, __tsan_mutex_try_lock);
#endif
    bool got = sndk_mutex_try_word(l);
#if SNDK_LOCK_TSAN
    __tsan_mutex_post_lock(l, got ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
#endif
    if (!got)
        return false;
    sndk_mutex_now_owned(l);
    return true;
}

static inline void sndk_mutex_unlock(struct sndk_mutex *l)
{
    sndk_mutex_now_released(l);
    sndk_mutex_unlock_raw(l);
}

/* A condition variable for sndk_mutex: a sequence word that every signal moves, and futex(2).
 * A waiter reads it with the mutex held, lets the mutex go and sleeps while the word is what it
 * read, so a signal from any time after the read, made with the mutex held as every one of the
 * library's is, wakes it or keeps it from sleeping. Wake-ups may be spurious: callers wait in a
 * loop on their condition. Timed waits take CLOCK_MONOTONIC deadlines. */
struct sndk_cond {
    _Atomic uint32_t seq;
};
static inline void sndk_cond_init(struct sndk_cond *c)
{
    atomic_init(&c->seq, 0);
}
static inline void sndk_cond_destroy(struct sndk_cond *c)
{
    (void)c;
}
/* Wake every waiter of c. */
void sndk_cond_broadcast(struct sndk_cond *c);

/* Wait on c with l held; l is held again on return. The owner is given up while blocked, since
 * another thread takes the mutex meanwhile. */
void sndk_cond_wait(struct sndk_cond *c, struct sndk_mutex *l);
/* sndk_cond_wait until an absolute CLOCK_MONOTONIC deadline: 0, or ETIMEDOUT once it passed; l
 * is held again on return whatever it is. */
int sndk_cond_timedwait(struct sndk_cond *c, struct sndk_mutex *l, const struct timespec *deadline);

/* True when the calling thread holds l. Always true when tracking is compiled out, so it is
 * only meaningful inside assert(). */
static inline bool sndk_mutex_held(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    return atomic_load_explicit(&l->owner, memory_order_relaxed) == sndk_lock_self();
#else
    (void)l;
    return true;
#endif
}

#define sndk_assert_held(l)     assert(sndk_mutex_held(l))
#define sndk_assert_not_held(l) assert(!SNDK_LOCK_TRACK || !sndk_mutex_held(l))

#endif
