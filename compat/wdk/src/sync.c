/* Parking lot, spin locks, events, semaphores, waits, fast mutexes, rundown protection and the
 * interlocked list helpers. */
#include "wdk_internal.h"

#include <errno.h>
#include <sched.h>

/* ------------------------------------------------------------------------------------------ */
/* Parking lot */
#define WDK_BUCKETS 64
static struct wdk_bucket buckets[WDK_BUCKETS];
static pthread_once_t buckets_once = PTHREAD_ONCE_INIT;

static void buckets_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (int i = 0; i < WDK_BUCKETS; i++) {
        pthread_mutex_init(&buckets[i].lock, NULL);
        pthread_cond_init(&buckets[i].cond, &ca);
    }
    pthread_condattr_destroy(&ca);
}

struct wdk_bucket *wdk_bucket_of(const volatile void *addr)
{
    pthread_once(&buckets_once, buckets_init);
    uintptr_t a = (uintptr_t)addr;
    a ^= a >> 17;
    a *= 0x9E3779B97F4A7C15ull;
    return &buckets[(a >> 58) % WDK_BUCKETS];
}

void wdk_wake(const volatile void *addr)
{
    /* Only the address is used: the object may already be gone (see wdk_internal.h). */
    struct wdk_bucket *b = wdk_bucket_of(addr);
    pthread_mutex_lock(&b->lock);
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

bool wdk_bucket_wait(struct wdk_bucket *b, const struct timespec *deadline)
{
    if (!deadline) {
        pthread_cond_wait(&b->cond, &b->lock);
        return true;
    }
    return pthread_cond_timedwait(&b->cond, &b->lock, deadline) != ETIMEDOUT;
}

/* ------------------------------------------------------------------------------------------ */
/* Spin locks. The lock word holds a per-thread owner id (never 0) while held. */
static _Thread_local ULONG_PTR tls_owner;
static ULONG_PTR next_owner = 1;

static ULONG_PTR owner_id(void)
{
    if (!tls_owner)
        tls_owner = __atomic_fetch_add(&next_owner, 1, __ATOMIC_RELAXED);
    return tls_owner;
}

void wdk_spin_acquire(PKSPIN_LOCK lock)
{
    ULONG_PTR me = owner_id();
    if (__atomic_load_n(lock, __ATOMIC_RELAXED) == me)
        wdk_bugcheck_msg(SPIN_LOCK_ALREADY_OWNED, "spin lock %p acquired again by its owner",
                         (void *)lock);
    for (unsigned spins = 0;; spins++) {
        ULONG_PTR expected = 0;
        if (__atomic_load_n(lock, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(lock, &expected, me, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        /* Spin briefly, then let a preempted holder run: user-space threads, unlike
         * processors at DISPATCH_LEVEL, can be descheduled while they hold the lock. */
        if (spins < 100)
            YieldProcessor();
        else
            sched_yield();
    }
}

void wdk_spin_release(PKSPIN_LOCK lock)
{
    ULONG_PTR me = owner_id();
    ULONG_PTR cur = __atomic_load_n(lock, __ATOMIC_RELAXED);
    if (cur != me)
        wdk_bugcheck_msg(SPIN_LOCK_NOT_OWNED, "spin lock %p released by a thread that %s",
                         (void *)lock, cur ? "does not hold it" : "finds it free");
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

KIRQL KeAcquireSpinLockRaiseToDpc(PKSPIN_LOCK SpinLock)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "KeAcquireSpinLock");
    KIRQL old = KfRaiseIrql(DISPATCH_LEVEL);
    wdk_spin_acquire(SpinLock);
    return old;
}

VOID KeReleaseSpinLock(PKSPIN_LOCK SpinLock, KIRQL NewIrql)
{
    wdk_spin_release(SpinLock);
    KeLowerIrql(NewIrql);
}

VOID KeAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock)
{
    wdk_require_irql_min(DISPATCH_LEVEL, "KeAcquireSpinLockAtDpcLevel");
    wdk_spin_acquire(SpinLock);
}

VOID KeReleaseSpinLockFromDpcLevel(PKSPIN_LOCK SpinLock)
{
    wdk_require_irql_min(DISPATCH_LEVEL, "KeReleaseSpinLockFromDpcLevel");
    wdk_spin_release(SpinLock);
}

BOOLEAN KeTryToAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock)
{
    wdk_require_irql_min(DISPATCH_LEVEL, "KeTryToAcquireSpinLockAtDpcLevel");
    ULONG_PTR expected = 0;
    return __atomic_compare_exchange_n(SpinLock, &expected, owner_id(), false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

BOOLEAN KeTestSpinLock(PKSPIN_LOCK SpinLock)
{
    return __atomic_load_n(SpinLock, __ATOMIC_RELAXED) == 0;
}

/* In-stack queued spin locks: the same lock word; the handle carries the lock and the IRQL.
 * (Not a true queue: waiters are not served in FIFO order.) */
VOID KeAcquireInStackQueuedSpinLock(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "KeAcquireInStackQueuedSpinLock");
    LockHandle->LockQueue.Next = NULL;
    LockHandle->LockQueue.Lock = SpinLock;
    LockHandle->OldIrql = KfRaiseIrql(DISPATCH_LEVEL);
    wdk_spin_acquire(SpinLock);
}

VOID KeReleaseInStackQueuedSpinLock(PKLOCK_QUEUE_HANDLE LockHandle)
{
    wdk_spin_release(LockHandle->LockQueue.Lock);
    KeLowerIrql(LockHandle->OldIrql);
}

VOID KeAcquireInStackQueuedSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle)
{
    wdk_require_irql_min(DISPATCH_LEVEL, "KeAcquireInStackQueuedSpinLockAtDpcLevel");
    LockHandle->LockQueue.Next = NULL;
    LockHandle->LockQueue.Lock = SpinLock;
    LockHandle->OldIrql = DISPATCH_LEVEL;
    wdk_spin_acquire(SpinLock);
}

VOID KeReleaseInStackQueuedSpinLockFromDpcLevel(PKLOCK_QUEUE_HANDLE LockHandle)
{
    wdk_spin_release(LockHandle->LockQueue.Lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Events and semaphores */
VOID KeInitializeEvent(PRKEVENT Event, EVENT_TYPE Type, BOOLEAN State)
{
    memset(Event, 0, sizeof *Event);
    Event->Header.Type = (UCHAR)Type;
    __atomic_store_n(&Event->Header.SignalState, State ? 1 : 0, __ATOMIC_RELEASE);
}

LONG KeSetEvent(PRKEVENT Event, KPRIORITY Increment, BOOLEAN Wait)
{
    (void)Increment, (void)Wait;
    wdk_require_irql_max(DISPATCH_LEVEL, "KeSetEvent");
    LONG prev = __atomic_exchange_n(&Event->Header.SignalState, 1, __ATOMIC_SEQ_CST);
    if (!prev)
        wdk_wake(Event);
    return prev;
}

VOID KeClearEvent(PRKEVENT Event)
{
    __atomic_store_n(&Event->Header.SignalState, 0, __ATOMIC_SEQ_CST);
}

LONG KeResetEvent(PRKEVENT Event)
{
    return __atomic_exchange_n(&Event->Header.SignalState, 0, __ATOMIC_SEQ_CST);
}

LONG KeReadStateEvent(PRKEVENT Event)
{
    return __atomic_load_n(&Event->Header.SignalState, __ATOMIC_ACQUIRE);
}

VOID KeInitializeSemaphore(PRKSEMAPHORE Semaphore, LONG Count, LONG Limit)
{
    memset(Semaphore, 0, sizeof *Semaphore);
    Semaphore->Header.Type = SOFTNDK_WDK_SEMAPHORE_OBJECT;
    Semaphore->Limit = Limit;
    __atomic_store_n(&Semaphore->Header.SignalState, Count, __ATOMIC_RELEASE);
}

LONG KeReleaseSemaphore(PRKSEMAPHORE Semaphore, KPRIORITY Increment, LONG Adjustment, BOOLEAN Wait)
{
    (void)Increment, (void)Wait;
    wdk_require_irql_max(DISPATCH_LEVEL, "KeReleaseSemaphore");
    LONG cur = __atomic_load_n(&Semaphore->Header.SignalState, __ATOMIC_RELAXED);
    do {
        if (Adjustment <= 0 || cur > Semaphore->Limit - Adjustment)
            /* Windows raises STATUS_SEMAPHORE_LIMIT_EXCEEDED; without SEH that is fatal. */
            wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                             "KeReleaseSemaphore(%p, %d) beyond its limit %d (count %d)",
                             (void *)Semaphore, Adjustment, Semaphore->Limit, cur);
    } while (!__atomic_compare_exchange_n(&Semaphore->Header.SignalState, &cur, cur + Adjustment,
                                          false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    wdk_wake(Semaphore);
    return cur;
}

LONG KeReadStateSemaphore(PRKSEMAPHORE Semaphore)
{
    return __atomic_load_n(&Semaphore->Header.SignalState, __ATOMIC_ACQUIRE);
}

/* Try to satisfy a wait without blocking: consume the signal where the object type says so. */
static bool try_satisfy(DISPATCHER_HEADER *h)
{
    LONG s = __atomic_load_n(&h->SignalState, __ATOMIC_ACQUIRE);
    switch (h->Type) {
    case NotificationEvent:
        return s != 0;
    case SynchronizationEvent:
        return s != 0 && __atomic_compare_exchange_n(&h->SignalState, &s, 0, false,
                                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    case SOFTNDK_WDK_SEMAPHORE_OBJECT:
        while (s > 0) {
            if (__atomic_compare_exchange_n(&h->SignalState, &s, s - 1, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                return true;
        }
        return false;
    default:
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "KeWaitForSingleObject on %p: not an initialised KEVENT or KSEMAPHORE "
                         "(type %u; the harness waits on events and semaphores only)",
                         (void *)h, h->Type);
    }
}

NTSTATUS KeWaitForSingleObject(PVOID Object, KWAIT_REASON WaitReason, KPROCESSOR_MODE WaitMode,
                               BOOLEAN Alertable, PLARGE_INTEGER Timeout)
{
    (void)WaitReason, (void)WaitMode, (void)Alertable;
    DISPATCHER_HEADER *h = (DISPATCHER_HEADER *)Object;
    if (try_satisfy(h))
        return STATUS_SUCCESS;
    if (Timeout && Timeout->QuadPart == 0)
        return STATUS_TIMEOUT;
    /* A wait that can block is allowed below DISPATCH_LEVEL only. */
    wdk_require_irql_max(APC_LEVEL, "KeWaitForSingleObject with a non-zero timeout");
    struct timespec deadline;
    bool bounded = wdk_deadline(Timeout, &deadline);
    struct wdk_bucket *b = wdk_bucket_of(h);
    NTSTATUS st = STATUS_SUCCESS;
    pthread_mutex_lock(&b->lock);
    while (!try_satisfy(h)) {
        if (!wdk_bucket_wait(b, bounded ? &deadline : NULL)) {
            /* a signal that raced the timeout still wins */
            if (!try_satisfy(h))
                st = STATUS_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&b->lock);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Fast mutexes: Count 1 = free. */
VOID ExInitializeFastMutex(PFAST_MUTEX FastMutex)
{
    memset(FastMutex, 0, sizeof *FastMutex);
    FastMutex->Count = 1;
    KeInitializeEvent(&FastMutex->Event, SynchronizationEvent, FALSE);
}

VOID ExAcquireFastMutex(PFAST_MUTEX FastMutex)
{
    wdk_require_irql_max(APC_LEVEL, "ExAcquireFastMutex");
    PVOID me = (PVOID)(uintptr_t)owner_id();
    if (__atomic_load_n(&FastMutex->Owner, __ATOMIC_RELAXED) == me)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "fast mutex %p acquired again by its owner (deadlock)", (void *)FastMutex);
    KIRQL old = KfRaiseIrql(APC_LEVEL);
    if (InterlockedDecrement(&FastMutex->Count) != 0) {
        __atomic_fetch_add(&FastMutex->Contention, 1, __ATOMIC_RELAXED);
        KeWaitForSingleObject(&FastMutex->Event, Executive, KernelMode, FALSE, NULL);
    }
    __atomic_store_n(&FastMutex->Owner, me, __ATOMIC_RELAXED);
    FastMutex->OldIrql = old;
}

BOOLEAN ExTryToAcquireFastMutex(PFAST_MUTEX FastMutex)
{
    wdk_require_irql_max(APC_LEVEL, "ExTryToAcquireFastMutex");
    KIRQL old = KfRaiseIrql(APC_LEVEL);
    if (InterlockedCompareExchange(&FastMutex->Count, 0, 1) != 1) {
        KeLowerIrql(old);
        return FALSE;
    }
    __atomic_store_n(&FastMutex->Owner, (PVOID)(uintptr_t)owner_id(), __ATOMIC_RELAXED);
    FastMutex->OldIrql = old;
    return TRUE;
}

VOID ExReleaseFastMutex(PFAST_MUTEX FastMutex)
{
    if (__atomic_load_n(&FastMutex->Owner, __ATOMIC_RELAXED) != (PVOID)(uintptr_t)owner_id())
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "fast mutex %p released by a thread that does not own it",
                         (void *)FastMutex);
    KIRQL old = (KIRQL)FastMutex->OldIrql;
    __atomic_store_n(&FastMutex->Owner, NULL, __ATOMIC_RELAXED);
    if (InterlockedIncrement(&FastMutex->Count) != 1)
        KeSetEvent(&FastMutex->Event, IO_NO_INCREMENT, FALSE);
    KeLowerIrql(old);
}

/* ------------------------------------------------------------------------------------------ */
/* Rundown protection: Count = 2 x references | 1 once rundown started. */
#define RUNDOWN_ACTIVE ((ULONG_PTR)1)

VOID ExInitializeRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    __atomic_store_n(&RunRef->Count, 0, __ATOMIC_RELEASE);
}

VOID ExReInitializeRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    ULONG_PTR c = __atomic_load_n(&RunRef->Count, __ATOMIC_ACQUIRE);
    if (c != 0 && c != RUNDOWN_ACTIVE)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "ExReInitializeRundownProtection(%p) with %llu references held",
                         (void *)RunRef, (unsigned long long)(c >> 1));
    __atomic_store_n(&RunRef->Count, 0, __ATOMIC_RELEASE);
}

BOOLEAN ExAcquireRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count)
{
    ULONG_PTR c = __atomic_load_n(&RunRef->Count, __ATOMIC_RELAXED);
    do {
        if (c & RUNDOWN_ACTIVE)
            return FALSE;
    } while (!__atomic_compare_exchange_n(&RunRef->Count, &c, c + 2 * (ULONG_PTR)Count, false,
                                          __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
    return TRUE;
}

BOOLEAN ExAcquireRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    return ExAcquireRundownProtectionEx(RunRef, 1);
}

VOID ExReleaseRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count)
{
    ULONG_PTR c = __atomic_load_n(&RunRef->Count, __ATOMIC_RELAXED);
    do {
        if ((c >> 1) < Count)
            wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                             "ExReleaseRundownProtection(%p) of %u references, %llu held",
                             (void *)RunRef, Count, (unsigned long long)(c >> 1));
    } while (!__atomic_compare_exchange_n(&RunRef->Count, &c, c - 2 * (ULONG_PTR)Count, false,
                                          __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    if (c - 2 * (ULONG_PTR)Count == RUNDOWN_ACTIVE)
        wdk_wake(RunRef); /* the last reference during rundown */
}

VOID ExReleaseRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    ExReleaseRundownProtectionEx(RunRef, 1);
}

VOID ExWaitForRundownProtectionRelease(PEX_RUNDOWN_REF RunRef)
{
    wdk_require_irql_max(APC_LEVEL, "ExWaitForRundownProtectionRelease");
    ULONG_PTR c = __atomic_or_fetch(&RunRef->Count, RUNDOWN_ACTIVE, __ATOMIC_ACQ_REL);
    if (c == RUNDOWN_ACTIVE)
        return;
    struct wdk_bucket *b = wdk_bucket_of(RunRef);
    pthread_mutex_lock(&b->lock);
    while (__atomic_load_n(&RunRef->Count, __ATOMIC_ACQUIRE) != RUNDOWN_ACTIVE)
        wdk_bucket_wait(b, NULL);
    pthread_mutex_unlock(&b->lock);
}

VOID ExRundownCompleted(PEX_RUNDOWN_REF RunRef)
{
    __atomic_store_n(&RunRef->Count, RUNDOWN_ACTIVE, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------------------------ */
/* Interlocked lists */
PLIST_ENTRY ExInterlockedInsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry, PKSPIN_LOCK Lock)
{
    KIRQL irql;
    KeAcquireSpinLock(Lock, &irql);
    PLIST_ENTRY first = IsListEmpty(ListHead) ? NULL : ListHead->Flink;
    InsertHeadList(ListHead, Entry);
    KeReleaseSpinLock(Lock, irql);
    return first;
}

PLIST_ENTRY ExInterlockedInsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry, PKSPIN_LOCK Lock)
{
    KIRQL irql;
    KeAcquireSpinLock(Lock, &irql);
    PLIST_ENTRY last = IsListEmpty(ListHead) ? NULL : ListHead->Blink;
    InsertTailList(ListHead, Entry);
    KeReleaseSpinLock(Lock, irql);
    return last;
}

PLIST_ENTRY ExInterlockedRemoveHeadList(PLIST_ENTRY ListHead, PKSPIN_LOCK Lock)
{
    KIRQL irql;
    KeAcquireSpinLock(Lock, &irql);
    PLIST_ENTRY e = IsListEmpty(ListHead) ? NULL : RemoveHeadList(ListHead);
    KeReleaseSpinLock(Lock, irql);
    return e;
}

PSINGLE_LIST_ENTRY ExInterlockedPushEntryList(PSINGLE_LIST_ENTRY ListHead, PSINGLE_LIST_ENTRY Entry,
                                              PKSPIN_LOCK Lock)
{
    KIRQL irql;
    KeAcquireSpinLock(Lock, &irql);
    PSINGLE_LIST_ENTRY first = ListHead->Next;
    PushEntryList(ListHead, Entry);
    KeReleaseSpinLock(Lock, irql);
    return first;
}

PSINGLE_LIST_ENTRY ExInterlockedPopEntryList(PSINGLE_LIST_ENTRY ListHead, PKSPIN_LOCK Lock)
{
    KIRQL irql;
    KeAcquireSpinLock(Lock, &irql);
    PSINGLE_LIST_ENTRY e = PopEntryList(ListHead);
    KeReleaseSpinLock(Lock, irql);
    return e;
}
