/* Pool allocation: zeroing, alignment, accounting by tag, and the misuse Windows bugchecks. */
#include "wdk_test.h"

static SOFTNDK_WDK_POOL_TAG *find(SOFTNDK_WDK_POOL_TAG *t, ULONG n, ULONG tag)
{
    for (ULONG i = 0; i < n; i++)
        if (t[i].Tag == tag)
            return &t[i];
    return NULL;
}

TEST(wdk_pool_zeroing_alignment_and_tags)
{
    ULONG64 since = SoftNdkWdkPoolSequence();
    unsigned char *a = ExAllocatePool2(POOL_FLAG_NON_PAGED, 100, TAG_TEST1);
    unsigned char *b = ExAllocatePool2(POOL_FLAG_PAGED | POOL_FLAG_UNINITIALIZED, 3 * PAGE_SIZE,
                                       TAG_TEST1);
    unsigned char *c = ExAllocatePoolWithTag(NonPagedPoolNx, 24, TAG_TEST2);
    unsigned char *d = ExAllocatePoolZero(PagedPool, 8, TAG_TEST2);
    CHECK(a && b && c && d);
    for (int i = 0; i < 100; i++)
        CHECK_EQ_U64(a[i], 0);
    CHECK_EQ_U64(b[0], 0xBD); /* uninitialised pool is visibly garbage */
    CHECK_EQ_U64(c[23], 0xBD);
    CHECK_EQ_U64(d[7], 0);
    CHECK_EQ_U64((uintptr_t)a % 16, 0);
    CHECK_EQ_U64((uintptr_t)b % PAGE_SIZE, 0);

    SOFTNDK_WDK_POOL_TAG t[8];
    ULONG n = SoftNdkWdkQueryPool(since, t, 8);
    CHECK_EQ_U64(n, 2);
    SOFTNDK_WDK_POOL_TAG *t1 = find(t, n, TAG_TEST1), *t2 = find(t, n, TAG_TEST2);
    CHECK(t1 && t2);
    CHECK_EQ_U64(t1->Allocations, 2);
    CHECK_EQ_U64(t1->Bytes, 100 + 3 * PAGE_SIZE);
    CHECK_EQ_U64(t2->Allocations, 2);
    CHECK_EQ_U64(t2->Bytes, 32);
    char name[5];
    SoftNdkWdkFormatTag(TAG_TEST1, name);
    CHECK(strcmp(name, "Tst1") == 0);

    ExFreePoolWithTag(a, TAG_TEST1);
    ExFreePoolWithTag(b, TAG_TEST1);
    ExFreePool(c);
    ExFreePoolWithTag(d, TAG_TEST2);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, t, 8), 0);
}

static void wrong_tag(void *arg)
{
    (void)arg;
    void *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 16, TAG_TEST1);
    ExFreePoolWithTag(p, TAG_TEST2);
}

static void double_free(void *arg)
{
    (void)arg;
    void *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 16, TAG_TEST1);
    void *keep = ExAllocatePool2(POOL_FLAG_NON_PAGED, 16, TAG_TEST1);
    (void)keep;
    ExFreePool(p);
    ExFreePool(p);
}

static void foreign_free(void *arg)
{
    (void)arg;
    static char not_pool[512];
    ExFreePool(not_pool + 256);
}

static void bad_flags(void *arg)
{
    (void)arg;
    ExAllocatePool2(POOL_FLAG_NON_PAGED | POOL_FLAG_PAGED, 16, TAG_TEST1);
}

static void zero_tag(void *arg)
{
    (void)arg;
    ExAllocatePool2(POOL_FLAG_NON_PAGED, 16, 0);
}

static void paged_at_dispatch(void *arg)
{
    (void)arg;
    KIRQL irql = KeRaiseIrqlToDpcLevel();
    ExAllocatePool2(POOL_FLAG_PAGED, 16, TAG_TEST1);
    KeLowerIrql(irql);
}

TEST(wdk_pool_misuse_bugchecks)
{
    CHECK(wdk_bugchecks(wrong_tag, NULL, "allocated as 'Tst1'"));
    CHECK(wdk_bugchecks(foreign_free, NULL, "BAD_POOL_CALLER"));
    CHECK(wdk_bugchecks(bad_flags, NULL, "exactly one of"));
    CHECK(wdk_bugchecks(zero_tag, NULL, "tag 0"));
    CHECK(wdk_bugchecks(paged_at_dispatch, NULL, "IRQL_NOT_LESS_OR_EQUAL"));
}

TEST(wdk_pool_double_free_bugchecks)
{
    /* ASan finds the double free first when it is on; either way the process must die. */
    CHECK(wdk_bugchecks(double_free, NULL, NULL));
}

TEST(wdk_pool_allocation_at_dispatch_is_fine)
{
    KSPIN_LOCK lock;
    KIRQL irql;
    KeInitializeSpinLock(&lock);
    KeAcquireSpinLock(&lock, &irql);
    void *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 64, TAG_TEST1);
    CHECK(p != NULL);
    ExFreePoolWithTag(p, TAG_TEST1);
    KeReleaseSpinLock(&lock, irql);
}

TEST(wdk_pool_priority_quota_pool3_and_lookaside)
{
    ULONG64 since = SoftNdkWdkPoolSequence();
    unsigned char *a =
        ExAllocatePoolWithTagPriority(NonPagedPoolNx, 40, TAG_TEST1, NormalPoolPriority);
    unsigned char *b = ExAllocatePoolPriorityZero(PagedPool, 40, TAG_TEST1, HighPoolPriority);
    unsigned char *c = ExAllocatePoolWithQuotaTag(NonPagedPool, 8, TAG_TEST2);
    unsigned char *d = ExAllocatePoolQuotaZero(NonPagedPool, 8, TAG_TEST2);
    POOL_EXTENDED_PARAMETER prio = {{PoolExtendedParameterPriority, 0, 0}, {0}};
    prio.Priority = LowPoolPriority;
    unsigned char *e = ExAllocatePool3(POOL_FLAG_NON_PAGED, 16, TAG_TEST2, &prio, 1);
    POOL_EXTENDED_PARAMETER secure = {{PoolExtendedParameterSecurePool, 0, 0}, {0}};
    CHECK(ExAllocatePool3(POOL_FLAG_NON_PAGED, 16, TAG_TEST2, &secure, 1) == NULL);
    CHECK(a && b && c && d && e);
    CHECK_EQ_U64(a[39], 0xBD); /* WithTagPriority: uninitialised, as WithTag */
    CHECK_EQ_U64(b[39], 0);
    CHECK_EQ_U64(c[0], 0xBD);
    CHECK_EQ_U64(d[0], 0);
    CHECK_EQ_U64(e[15], 0); /* Pool3 as Pool2: zeroed */
    SOFTNDK_WDK_POOL_TAG t[8];
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, t, 8), 2);

    NPAGED_LOOKASIDE_LIST np;
    ExInitializeNPagedLookasideList(&np, NULL, NULL, 0, 24, TAG_TEST1, 0);
    LOOKASIDE_LIST_EX ex;
    CHECK_EQ_I64(ExInitializeLookasideListEx(&ex, NULL, NULL, NonPagedPoolNx, 0, 32, TAG_TEST2, 0),
                 STATUS_SUCCESS);
    void *l1 = ExAllocateFromNPagedLookasideList(&np);
    void *l2 = ExAllocateFromLookasideListEx(&ex);
    CHECK(l1 && l2);
    ULONG n = SoftNdkWdkQueryPool(since, t, 8);
    CHECK_EQ_U64(n, 2);
    SOFTNDK_WDK_POOL_TAG *t1 = find(t, n, TAG_TEST1);
    CHECK(t1 && t1->Allocations == 3 &&
          t1->Bytes == 40 + 40 + 24); /* lookaside blocks: the list's tag */
    ExFreeToNPagedLookasideList(&np, l1);
    ExFreeToLookasideListEx(&ex, l2);
    ExDeleteNPagedLookasideList(&np);
    ExDeleteLookasideListEx(&ex);

    ExFreePoolWithTag(a, TAG_TEST1);
    ExFreePool2(b, TAG_TEST1, NULL, 0);
    ExFreePool(c);
    ExFreePoolWithTag(d, TAG_TEST2);
    ExFreePoolWithTag(e, TAG_TEST2);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, t, 8), 0);
}

TEST(wdk_pool_freed_memory_reads_poison_not_stale_data)
{
    /* Without ASan: what a use after free reads is the free fill, not the old contents, and
     * the block is not handed out again while it is in the quarantine. */
    ULONG64 *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 64, TAG_TEST1);
    CHECK(p != NULL);
    for (int i = 0; i < 8; i++)
        p[i] = 0x1122334455667788ull;
    ExFreePoolWithTag(p, TAG_TEST1);
    volatile ULONG64 *stale = p;
    CHECK_EQ_U64(stale[3], 0xFDFDFDFDFDFDFDFDull); /* a pointer read from it is non-canonical */
    SOFTNDK_WDK_FREED_POOL info;
    CHECK(SoftNdkWdkQueryFreedPool((const char *)p + 10, &info));
    CHECK(info.Block == p && info.Tag == TAG_TEST1 && info.Bytes == 64);
    CHECK(info.AllocatedBy != NULL && info.FreedBy != NULL);
    void *again = ExAllocatePool2(POOL_FLAG_NON_PAGED, 64, TAG_TEST1);
    CHECK(again != NULL && again != (void *)p);
    ExFreePoolWithTag(again, TAG_TEST1);
    CHECK(SoftNdkWdkCheckFreedPool(FALSE) >= 2); /* nothing written after free: no bugcheck */
    CHECK(SoftNdkWdkCheckFreedPool(TRUE) >= 2);
    CHECK(!SoftNdkWdkQueryFreedPool(p, NULL));
}

static void write_after_free_checked(void *arg)
{
    (void)arg;
    unsigned char *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 48, TAG_TEST2);
    ExFreePoolWithTag(p, TAG_TEST2);
    p[17] = 0x42; /* the consumer's bug */
    SoftNdkWdkCheckFreedPool(FALSE);
}

static void write_after_free_evicted(void *arg)
{
    (void)arg;
    unsigned char *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 48, TAG_TEST2);
    ExFreePoolWithTag(p, TAG_TEST2);
    p[5] = 0;
    /* Push it out of the (32 MiB) quarantine: the check runs on eviction. */
    for (int i = 0; i < 40; i++)
        ExFreePoolWithTag(ExAllocatePool2(POOL_FLAG_NON_PAGED, 1 << 20, TAG_TEST1), TAG_TEST1);
}

TEST(wdk_pool_write_after_free_is_reported_with_tag_and_freeing_site)
{
    CHECK(wdk_bugchecks(write_after_free_checked, NULL, "write after free"));
    CHECK(wdk_bugchecks(write_after_free_checked, NULL, "tag 'Tst2'"));
    CHECK(wdk_bugchecks(write_after_free_checked, NULL, "byte 17 is 0x42"));
    CHECK(wdk_bugchecks(write_after_free_evicted, NULL, "freed from 0x"));
    CHECK(wdk_bugchecks(write_after_free_evicted, NULL, "SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION"));
}
