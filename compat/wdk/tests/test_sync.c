/* KEVENT, KSEMAPHORE, waits and timeouts, spin locks and IRQL, fast mutexes, rundown
 * protection, lists and interlocked operations. */
#include "wdk_test.h"

TEST(wdk_event_notification_stays_signaled)
{
    KEVENT ev;
    LARGE_INTEGER zero = {.QuadPart = 0};
    KeInitializeEvent(&ev, NotificationEvent, FALSE);
    CHECK_EQ_I64(KeReadStateEvent(&ev), 0);
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    CHECK_EQ_I64(KeSetEvent(&ev, IO_NO_INCREMENT, FALSE), 0);
    CHECK_EQ_I64(KeSetEvent(&ev, IO_NO_INCREMENT, FALSE), 1);
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, NULL), STATUS_SUCCESS);
    CHECK_EQ_I64(KeResetEvent(&ev), 1);
    CHECK_EQ_I64(KeResetEvent(&ev), 0);
    KeSetEvent(&ev, 0, FALSE);
    KeClearEvent(&ev);
    CHECK_EQ_I64(KeReadStateEvent(&ev), 0);
    KeInitializeEvent(&ev, NotificationEvent, TRUE);
    CHECK_EQ_I64(KeReadStateEvent(&ev), 1);
}

TEST(wdk_event_synchronization_resets_on_wait)
{
    KEVENT ev;
    LARGE_INTEGER zero = {.QuadPart = 0};
    KeInitializeEvent(&ev, SynchronizationEvent, TRUE);
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    CHECK_EQ_I64(KeReadStateEvent(&ev), 0);
}

TEST(wdk_wait_relative_and_absolute_timeouts)
{
    KEVENT ev;
    KeInitializeEvent(&ev, NotificationEvent, FALSE);
    LARGE_INTEGER t = {.QuadPart = -20 * 10000}; /* 20 ms relative */
    uint64_t start = wdk_test_ms();
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &t), STATUS_TIMEOUT);
    CHECK(wdk_test_ms() - start >= 19);

    LARGE_INTEGER now;
    KeQuerySystemTime(&now);
    /* system time is 100 ns since 1601: after 2020 and before 2200 */
    CHECK(now.QuadPart > 132223104000000000LL && now.QuadPart < 195000000000000000LL);
    t.QuadPart = now.QuadPart + 20 * 10000; /* 20 ms absolute */
    start = wdk_test_ms();
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &t), STATUS_TIMEOUT);
    CHECK(wdk_test_ms() - start >= 15);
    t.QuadPart = now.QuadPart - 10000000; /* in the past: returns at once */
    start = wdk_test_ms();
    CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &t), STATUS_TIMEOUT);
    CHECK(wdk_test_ms() - start < 1000);
    /* KeDelayExecutionThread uses the same timeouts */
    t.QuadPart = -5 * 10000;
    start = wdk_test_ms();
    CHECK_EQ_I64(KeDelayExecutionThread(KernelMode, FALSE, &t), STATUS_SUCCESS);
    CHECK(wdk_test_ms() - start >= 4);
}

struct setter {
    KEVENT *ev;
    KIRQL irql;
};

static void *set_later(void *arg)
{
    struct setter *s = arg;
    s->irql = KeGetCurrentIrql(); /* a thread the driver does not own */
    KeSetEvent(s->ev, IO_NO_INCREMENT, FALSE);
    return NULL;
}

TEST(wdk_event_set_from_another_thread_on_a_stack_event)
{
    /* The Windows pattern: the waiter's event lives on its stack and is gone as soon as the
     * wait returns, possibly before KeSetEvent has returned on the other thread. */
    for (int i = 0; i < 2000; i++) {
        KEVENT ev;
        KeInitializeEvent(&ev, (i & 1) ? SynchronizationEvent : NotificationEvent, FALSE);
        struct setter s = {&ev, 0};
        pthread_t t;
        wdk_on_thread(set_later, &s, &t);
        CHECK_EQ_I64(KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, NULL),
                     STATUS_SUCCESS);
        pthread_join(t, NULL);
        CHECK_EQ_U64(s.irql, DISPATCH_LEVEL);
    }
}

struct waiter {
    KEVENT *ev;
    atomic_int *woken;
};

static void *wait_once(void *arg)
{
    struct waiter *w = arg;
    SoftNdkWdkEnterDriverThread();
    LARGE_INTEGER t = {.QuadPart = -5LL * 10000000};
    if (KeWaitForSingleObject(w->ev, Executive, KernelMode, FALSE, &t) == STATUS_SUCCESS)
        atomic_fetch_add(w->woken, 1);
    return NULL;
}

static bool one_woken(void *arg)
{
    return atomic_load((atomic_int *)arg) >= 1;
}

TEST(wdk_synchronization_event_releases_one_waiter_per_set)
{
    KEVENT ev;
    atomic_int woken = 0;
    KeInitializeEvent(&ev, SynchronizationEvent, FALSE);
    struct waiter w = {&ev, &woken};
    pthread_t a, b;
    wdk_on_thread(wait_once, &w, &a);
    wdk_on_thread(wait_once, &w, &b);
    KeSetEvent(&ev, 0, FALSE);
    CHECK(harness_wait_until(one_woken, &woken, 5000));
    /* the "must not happen" window: the second waiter stays blocked */
    KeStallExecutionProcessor(50000);
    CHECK_EQ_I64(atomic_load(&woken), 1);
    KeSetEvent(&ev, 0, FALSE);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ_I64(atomic_load(&woken), 2);
}

TEST(wdk_semaphore_counts)
{
    KSEMAPHORE s;
    LARGE_INTEGER zero = {.QuadPart = 0};
    KeInitializeSemaphore(&s, 0, 2);
    CHECK_EQ_I64(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    CHECK_EQ_I64(KeReleaseSemaphore(&s, 0, 2, FALSE), 0);
    CHECK_EQ_I64(KeReadStateSemaphore(&s), 2);
    CHECK_EQ_I64(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    CHECK_EQ_I64(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, NULL), STATUS_SUCCESS);
    CHECK_EQ_I64(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
}

static void over_release(void *arg)
{
    (void)arg;
    KSEMAPHORE s;
    KeInitializeSemaphore(&s, 1, 1);
    KeReleaseSemaphore(&s, 0, 1, FALSE);
}

TEST(wdk_semaphore_over_limit_bugchecks)
{
    CHECK(wdk_bugchecks(over_release, NULL, "beyond its limit"));
}

TEST(wdk_spin_lock_raises_to_dispatch)
{
    KSPIN_LOCK lock;
    KIRQL old;
    KLOCK_QUEUE_HANDLE h;
    KeInitializeSpinLock(&lock);
    CHECK_EQ_U64(KeGetCurrentIrql(), PASSIVE_LEVEL);
    CHECK(KeTestSpinLock(&lock));
    KeAcquireSpinLock(&lock, &old);
    CHECK_EQ_U64(old, PASSIVE_LEVEL);
    CHECK_EQ_U64(KeGetCurrentIrql(), DISPATCH_LEVEL);
    CHECK(!KeTestSpinLock(&lock));
    KeReleaseSpinLock(&lock, old);
    CHECK_EQ_U64(KeGetCurrentIrql(), PASSIVE_LEVEL);

    KeAcquireInStackQueuedSpinLock(&lock, &h);
    CHECK_EQ_U64(KeGetCurrentIrql(), DISPATCH_LEVEL);
    KeReleaseInStackQueuedSpinLock(&h);
    CHECK_EQ_U64(KeGetCurrentIrql(), PASSIVE_LEVEL);

    old = KeRaiseIrqlToDpcLevel();
    KeAcquireSpinLockAtDpcLevel(&lock);
    CHECK(!KeTryToAcquireSpinLockAtDpcLevel(&lock)); /* held (by us) */
    KeReleaseSpinLockFromDpcLevel(&lock);
    CHECK(KeTryToAcquireSpinLockAtDpcLevel(&lock));
    KeReleaseSpinLockFromDpcLevel(&lock);
    KeAcquireInStackQueuedSpinLockAtDpcLevel(&lock, &h);
    KeReleaseInStackQueuedSpinLockFromDpcLevel(&h);
    KeLowerIrql(old);
    CHECK_EQ_U64(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

struct counter {
    KSPIN_LOCK lock;
    unsigned long value;
    bool queued;
};

static void *count_up(void *arg)
{
    struct counter *c = arg;
    for (int i = 0; i < 20000; i++) {
        if (c->queued && (i & 1)) {
            KLOCK_QUEUE_HANDLE h;
            KeAcquireInStackQueuedSpinLock(&c->lock, &h);
            c->value++;
            KeReleaseInStackQueuedSpinLock(&h);
        } else {
            KIRQL irql;
            KeAcquireSpinLock(&c->lock, &irql);
            c->value++;
            KeReleaseSpinLock(&c->lock, irql);
        }
    }
    return NULL;
}

TEST(wdk_spin_lock_excludes)
{
    struct counter c = {0, 0, true};
    KeInitializeSpinLock(&c.lock);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        wdk_on_thread(count_up, &c, &t[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_U64(c.value, 80000);
}

static void spin_twice(void *arg)
{
    (void)arg;
    KSPIN_LOCK lock;
    KIRQL a, b;
    KeInitializeSpinLock(&lock);
    KeAcquireSpinLock(&lock, &a);
    KeAcquireSpinLock(&lock, &b);
}

static void release_unowned(void *arg)
{
    (void)arg;
    KSPIN_LOCK lock;
    KeInitializeSpinLock(&lock);
    KeReleaseSpinLock(&lock, PASSIVE_LEVEL);
}

static void wait_at_dispatch(void *arg)
{
    (void)arg;
    KEVENT ev;
    KSPIN_LOCK lock;
    KIRQL irql;
    LARGE_INTEGER t = {.QuadPart = -10000};
    KeInitializeEvent(&ev, NotificationEvent, FALSE);
    KeInitializeSpinLock(&lock);
    KeAcquireSpinLock(&lock, &irql);
    KeWaitForSingleObject(&ev, Executive, KernelMode, FALSE, &t);
}

static void *paged_code_on_foreign_thread(void *arg)
{
    (void)arg;
    PAGED_CODE();
    return NULL;
}

static void paged_code_in_callback(void *arg)
{
    (void)arg;
    pthread_t t;
    pthread_create(&t, NULL, paged_code_on_foreign_thread, NULL);
    pthread_join(t, NULL);
}

TEST(wdk_irql_violations_bugcheck)
{
    CHECK(wdk_bugchecks(spin_twice, NULL, "SPIN_LOCK_ALREADY_OWNED"));
    CHECK(wdk_bugchecks(release_unowned, NULL, "SPIN_LOCK_NOT_OWNED"));
    CHECK(wdk_bugchecks(wait_at_dispatch, NULL, "IRQL_NOT_LESS_OR_EQUAL"));
    CHECK(wdk_bugchecks(paged_code_in_callback, NULL, "PAGED_CODE()"));
}

struct fm {
    FAST_MUTEX m;
    unsigned long value;
};

static void *fm_count(void *arg)
{
    struct fm *f = arg;
    SoftNdkWdkEnterDriverThread();
    for (int i = 0; i < 5000; i++) {
        ExAcquireFastMutex(&f->m);
        if (KeGetCurrentIrql() != APC_LEVEL)
            abort();
        f->value++;
        ExReleaseFastMutex(&f->m);
    }
    return NULL;
}

TEST(wdk_fast_mutex_excludes_at_apc_level)
{
    struct fm f = {.value = 0};
    ExInitializeFastMutex(&f.m);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        wdk_on_thread(fm_count, &f, &t[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_U64(f.value, 15000);
    CHECK(ExTryToAcquireFastMutex(&f.m));
    CHECK_EQ_U64(KeGetCurrentIrql(), APC_LEVEL);
    ExReleaseFastMutex(&f.m);
    CHECK_EQ_U64(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

struct rundown {
    EX_RUNDOWN_REF ref;
    KEVENT go;
    atomic_int released;
};

static void *release_later(void *arg)
{
    struct rundown *r = arg;
    SoftNdkWdkEnterDriverThread();
    KeWaitForSingleObject(&r->go, Executive, KernelMode, FALSE, NULL);
    atomic_store(&r->released, 1);
    ExReleaseRundownProtectionEx(&r->ref, 2);
    return NULL;
}

TEST(wdk_rundown_waits_for_references_then_refuses)
{
    struct rundown r;
    ExInitializeRundownProtection(&r.ref);
    KeInitializeEvent(&r.go, NotificationEvent, FALSE);
    atomic_init(&r.released, 0);
    CHECK(ExAcquireRundownProtection(&r.ref));
    ExReleaseRundownProtection(&r.ref);
    CHECK(ExAcquireRundownProtectionEx(&r.ref, 2));
    pthread_t t;
    wdk_on_thread(release_later, &r, &t);
    KeSetEvent(&r.go, 0, FALSE);
    ExWaitForRundownProtectionRelease(&r.ref);
    CHECK_EQ_I64(atomic_load(&r.released), 1);
    CHECK(!ExAcquireRundownProtection(&r.ref));
    ExRundownCompleted(&r.ref);
    pthread_join(t, NULL);
    ExReInitializeRundownProtection(&r.ref);
    CHECK(ExAcquireRundownProtection(&r.ref));
    ExReleaseRundownProtection(&r.ref);
    ExWaitForRundownProtectionRelease(&r.ref); /* none held: returns at once */
}

static void release_too_many(void *arg)
{
    (void)arg;
    EX_RUNDOWN_REF r;
    ExInitializeRundownProtection(&r);
    ExReleaseRundownProtection(&r);
}

TEST(wdk_rundown_release_without_acquire_bugchecks)
{
    CHECK(wdk_bugchecks(release_too_many, NULL, "ExReleaseRundownProtection"));
}

struct item {
    int value;
    LIST_ENTRY link;
    SINGLE_LIST_ENTRY slink;
};

TEST(wdk_lists_and_containing_record)
{
    LIST_ENTRY head;
    struct item it[4];
    InitializeListHead(&head);
    CHECK(IsListEmpty(&head));
    for (int i = 0; i < 4; i++) {
        it[i].value = i;
        if (i < 2)
            InsertTailList(&head, &it[i].link);
        else
            InsertHeadList(&head, &it[i].link);
    }
    /* 3 2 0 1 */
    int want[4] = {3, 2, 0, 1}, k = 0;
    for (PLIST_ENTRY e = head.Flink; e != &head; e = e->Flink)
        CHECK_EQ_I64(CONTAINING_RECORD(e, struct item, link)->value, want[k++]);
    CHECK_EQ_I64(CONTAINING_RECORD(RemoveTailList(&head), struct item, link)->value, 1);
    CHECK_EQ_I64(CONTAINING_RECORD(RemoveHeadList(&head), struct item, link)->value, 3);
    CHECK(!RemoveEntryList(&it[2].link));
    CHECK(RemoveEntryList(&it[0].link)); /* now empty */
    CHECK(IsListEmpty(&head));

    SINGLE_LIST_ENTRY s = {NULL};
    PushEntryList(&s, &it[0].slink);
    PushEntryList(&s, &it[1].slink);
    CHECK(PopEntryList(&s) == &it[1].slink);
    CHECK(PopEntryList(&s) == &it[0].slink);
    CHECK(PopEntryList(&s) == NULL);

    KSPIN_LOCK lock;
    KeInitializeSpinLock(&lock);
    CHECK(ExInterlockedInsertTailList(&head, &it[0].link, &lock) == NULL);
    CHECK(ExInterlockedInsertTailList(&head, &it[1].link, &lock) == &it[0].link);
    CHECK(ExInterlockedInsertHeadList(&head, &it[2].link, &lock) == &it[0].link);
    CHECK(ExInterlockedRemoveHeadList(&head, &lock) == &it[2].link);
    CHECK(ExInterlockedRemoveHeadList(&head, &lock) == &it[0].link);
    CHECK(ExInterlockedRemoveHeadList(&head, &lock) == &it[1].link);
    CHECK(ExInterlockedRemoveHeadList(&head, &lock) == NULL);
    CHECK(ExInterlockedPushEntryList(&s, &it[3].slink, &lock) == NULL);
    CHECK(ExInterlockedPopEntryList(&s, &lock) == &it[3].slink);
    CHECK_EQ_U64(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

static void corrupt_list(void *arg)
{
    (void)arg;
    LIST_ENTRY head, a, b;
    InitializeListHead(&head);
    InsertTailList(&head, &a);
    InsertTailList(&head, &b);
    a.Flink = &head; /* b is lost: a's forward link no longer matches b's back link */
    RemoveEntryList(&b);
}

TEST(wdk_list_corruption_bugchecks)
{
    CHECK(wdk_bugchecks(corrupt_list, NULL, "KERNEL_SECURITY_CHECK_FAILURE"));
}

TEST(wdk_interlocked_return_values)
{
    volatile LONG v = 5;
    CHECK_EQ_I64(InterlockedIncrement(&v), 6);
    CHECK_EQ_I64(InterlockedDecrement(&v), 5);
    CHECK_EQ_I64(InterlockedExchange(&v, 9), 5);
    CHECK_EQ_I64(InterlockedCompareExchange(&v, 1, 8), 9); /* no match: unchanged */
    CHECK_EQ_I64(v, 9);
    CHECK_EQ_I64(InterlockedCompareExchange(&v, 1, 9), 9);
    CHECK_EQ_I64(v, 1);
    CHECK_EQ_I64(InterlockedExchangeAdd(&v, 10), 1);
    CHECK_EQ_I64(InterlockedAdd(&v, 10), 21);
    CHECK_EQ_I64(InterlockedOr(&v, 0x100), 21);
    CHECK_EQ_I64(InterlockedAnd(&v, 0x100), 0x115);
    volatile LONG64 w = 1;
    CHECK_EQ_I64(InterlockedIncrement64(&w), 2);
    CHECK_EQ_I64(InterlockedCompareExchange64(&w, 7, 2), 2);
    CHECK_EQ_I64(InterlockedExchangeAdd64(&w, 3), 7);
    int x, y;
    PVOID volatile p = &x;
    CHECK(InterlockedCompareExchangePointer(&p, &y, &x) == &x);
    CHECK(InterlockedExchangePointer(&p, NULL) == &y);
    CHECK(p == NULL);
}

/* NT_ASSERT and friends as statements (NT_ASSERT(FALSE); is common in drivers): no
 * -Wunused-value under -Werror (this file is built with the project's warnings); as
 * expressions they are TRUE when they hold; a failed one bugchecks naming the expression. */
static void assert_false(void *arg)
{
    (void)arg;
    NT_ASSERT(FALSE);
}

TEST(wdk_nt_assert_is_a_statement_and_an_expression)
{
    int x = 1;
    NT_ASSERT(x == 1);
    NT_ASSERTMSG("x is one", x == 1);
    NT_VERIFY(x == 1);
    NT_VERIFYMSG("x is one", x == 1);
    ASSERT(x);
    CHECK(NT_VERIFY(x == 1) == TRUE);
    CHECK(NT_ASSERT(x != 0) == TRUE);
    CHECK(wdk_bugchecks(assert_false, NULL, "assertion failed"));
    CHECK(wdk_bugchecks(assert_false, NULL, "KERNEL_SECURITY_CHECK_FAILURE"));
}
