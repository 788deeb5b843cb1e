/* Mutex wrapper with owner tracking, so that every "caller must hold X" comment can be paired
 * with sndk_assert_held(&X) (docs/datapath.md#locking).
 *
 * The owner is tracked only when assertions are on (NDEBUG undefined) or SOFTNDK_LOCK_DEBUG is
 * defined; otherwise the wrapper compiles down to the plain pthread calls.
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

#if !defined(NDEBUG) || defined(SOFTNDK_LOCK_DEBUG)
#define SNDK_LOCK_TRACK 1
#else
#define SNDK_LOCK_TRACK 0
#endif

struct sndk_mutex {
    pthread_mutex_t m;
#if SNDK_LOCK_TRACK
    _Atomic uintptr_t owner; /* sndk_lock_self() of the holder, 0 when free */
#endif
};

/* The calling thread as a word. Not the address of a static thread-local here: a static in a
 * header function is one variable per translation unit, so a lock taken in one file would look
 * unowned from another. pthread_t is an unsigned long on glibc and musl. */
static inline uintptr_t sndk_lock_self(void)
{
    return (uintptr_t)pthread_self();
}

static inline void sndk_mutex_init(struct sndk_mutex *l)
{
    /* Default attributes cannot fail to initialise on Linux; abort rather than run unlocked. */
    if (pthread_mutex_init(&l->m, NULL) != 0)
        abort();
#if SNDK_LOCK_TRACK
    atomic_init(&l->owner, 0);
#endif
}

static inline void sndk_mutex_destroy(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) == 0);
#endif
    pthread_mutex_destroy(&l->m);
}

static inline void sndk_mutex_lock(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    /* Recursive locking deadlocks silently with default mutexes; catch it here instead. */
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) != sndk_lock_self());
#endif
    pthread_mutex_lock(&l->m);
#if SNDK_LOCK_TRACK
    atomic_store_explicit(&l->owner, sndk_lock_self(), memory_order_relaxed);
#endif
}

static inline void sndk_mutex_unlock(struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) == sndk_lock_self());
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
#endif
    pthread_mutex_unlock(&l->m);
}

/* Wait on a condition variable with l held. The owner is given up while blocked, since another
 * thread takes the mutex meanwhile. */
static inline void sndk_cond_wait(pthread_cond_t *c, struct sndk_mutex *l)
{
#if SNDK_LOCK_TRACK
    assert(atomic_load_explicit(&l->owner, memory_order_relaxed) == sndk_lock_self());
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
#endif
    pthread_cond_wait(c, &l->m);
#if SNDK_LOCK_TRACK
    atomic_store_explicit(&l->owner, sndk_lock_self(), memory_order_relaxed);
#endif
}

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
