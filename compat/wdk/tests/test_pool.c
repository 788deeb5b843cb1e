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
