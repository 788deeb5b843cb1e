/* Pool allocation with per-tag accounting. Each block has a header just before the caller's
 * memory; live blocks are on one list (for the leak report and for catching double and foreign
 * frees before they corrupt the heap). */
#include "wdk_internal.h"

#include <stdlib.h>

#define POOL_LIVE 0x4C4F4F50574B444Eull /* "NDKWPOOL" */
#define POOL_DEAD 0x44414544574B444Eull

struct pool_hdr {
    uint64_t magic;
    ULONG tag;
    BOOLEAN paged;
    ULONG64 seq;
    SIZE_T size;
    void *base; /* what free() takes */
    void *caller;
    struct pool_hdr *prev, *next;
};
/* The caller's memory follows the header, so the header keeps 16-byte alignment. */
#define POOL_HDR_SIZE ((sizeof(struct pool_hdr) + 15) & ~(size_t)15)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool_hdr pool_head = {0, 0, 0, 0, 0, NULL, NULL, &pool_head, &pool_head};
static ULONG64 pool_seq = 1;

PVOID wdk_pool_alloc(POOL_FLAGS flags, SIZE_T size, ULONG tag, void *caller)
{
    BOOLEAN paged = (flags & POOL_FLAG_PAGED) != 0;
    wdk_require_irql_max(paged ? APC_LEVEL : DISPATCH_LEVEL,
                         paged ? "paged pool allocation" : "pool allocation");
    if (size > ((SIZE_T)1 << 40))
        return NULL;
    /* Page-aligned from a page up (as Windows' pool), else 16-byte aligned. */
    size_t align = size >= PAGE_SIZE ? PAGE_SIZE : 16;
    size_t lead = size >= PAGE_SIZE ? PAGE_SIZE : POOL_HDR_SIZE;
    void *base = NULL;
    if (posix_memalign(&base, align, lead + (size ? size : 1)) != 0)
        return NULL;
    char *user = (char *)base + lead;
    struct pool_hdr *h = (struct pool_hdr *)(void *)(user - POOL_HDR_SIZE); /* 16-aligned */
    h->magic = POOL_LIVE;
    h->tag = tag;
    h->paged = paged;
    h->size = size;
    h->base = base;
    h->caller = caller;
    if (flags & POOL_FLAG_UNINITIALIZED)
        memset(user, 0xBD, size); /* visible garbage, deterministic across runs */
    else
        memset(user, 0, size);
    pthread_mutex_lock(&pool_lock);
    h->seq = pool_seq++;
    h->prev = pool_head.prev;
    h->next = &pool_head;
    pool_head.prev->next = h;
    pool_head.prev = h;
    pthread_mutex_unlock(&pool_lock);
    return user;
}

void wdk_pool_free(PVOID p, ULONG tag, bool check_tag, void *caller)
{
    if (!p)
        wdk_bugcheck_msg(BAD_POOL_CALLER, "ExFreePool(NULL) from %p", caller);
    struct pool_hdr *h = (struct pool_hdr *)(void *)((char *)p - POOL_HDR_SIZE);
    pthread_mutex_lock(&pool_lock);
    uint64_t magic = h->magic;
    if (magic != POOL_LIVE) {
        pthread_mutex_unlock(&pool_lock);
        if (magic == POOL_DEAD)
            wdk_bugcheck_msg(BAD_POOL_CALLER, "pool block %p freed twice (second free from %p)",
                             p, caller);
        wdk_bugcheck_msg(BAD_POOL_CALLER, "ExFreePool(%p) from %p: not a pool allocation", p,
                         caller);
    }
    if (check_tag && h->tag != tag) {
        char want[5], have[5];
        SoftNdkWdkFormatTag(tag, want);
        SoftNdkWdkFormatTag(h->tag, have);
        pthread_mutex_unlock(&pool_lock);
        wdk_bugcheck_msg(BAD_POOL_CALLER, "ExFreePoolWithTag(%p, '%s') from %p: allocated as '%s'",
                         p, want, caller, have);
    }
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->magic = POOL_DEAD;
    BOOLEAN paged = h->paged;
    void *base = h->base;
    pthread_mutex_unlock(&pool_lock);
    wdk_require_irql_max(paged ? APC_LEVEL : DISPATCH_LEVEL, "pool free");
    free(base);
}

static POOL_FLAGS flags_of_type(POOL_TYPE type)
{
    switch ((int)type & ~(POOL_RAISE_IF_ALLOCATION_FAILURE | POOL_COLD_ALLOCATION)) {
    case PagedPool:
    case PagedPoolCacheAligned:
    case PagedPoolSession:
        return POOL_FLAG_PAGED;
    default:
        return POOL_FLAG_NON_PAGED;
    }
}

PVOID ExAllocatePoolWithTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    POOL_FLAGS f = flags_of_type(PoolType) | POOL_FLAG_UNINITIALIZED;
    if ((int)PoolType & POOL_ZERO_ALLOCATION)
        f &= ~POOL_FLAG_UNINITIALIZED;
    return wdk_pool_alloc(f, NumberOfBytes, Tag, __builtin_return_address(0));
}

PVOID ExAllocatePoolZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return wdk_pool_alloc(flags_of_type(PoolType), NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePoolUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return wdk_pool_alloc(flags_of_type(PoolType) | POOL_FLAG_UNINITIALIZED, NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag)
{
    const POOL_FLAGS known = POOL_FLAG_USE_QUOTA | POOL_FLAG_UNINITIALIZED | POOL_FLAG_SESSION |
                             POOL_FLAG_CACHE_ALIGNED | POOL_FLAG_RAISE_ON_FAILURE |
                             POOL_FLAG_NON_PAGED | POOL_FLAG_NON_PAGED_EXECUTE | POOL_FLAG_PAGED;
    POOL_FLAGS kind = Flags & (POOL_FLAG_NON_PAGED | POOL_FLAG_NON_PAGED_EXECUTE | POOL_FLAG_PAGED);
    if (Tag == 0 || (Flags & 0xFFFFFFFFull & ~known) || (kind & (kind - 1)) || kind == 0)
        wdk_bugcheck_msg(BAD_POOL_CALLER,
                         "ExAllocatePool2(0x%llx, %zu, 0x%08x) from %p: %s",
                         (unsigned long long)Flags, (size_t)NumberOfBytes, Tag,
                         __builtin_return_address(0),
                         Tag == 0 ? "tag 0"
                         : kind == 0 || (kind & (kind - 1))
                             ? "exactly one of NON_PAGED, NON_PAGED_EXECUTE, PAGED is required"
                             : "unknown required flag");
    PVOID p = wdk_pool_alloc(Flags, NumberOfBytes, Tag, __builtin_return_address(0));
    if (!p && (Flags & POOL_FLAG_RAISE_ON_FAILURE))
        wdk_bugcheck_msg(BAD_POOL_CALLER, "ExAllocatePool2 with POOL_FLAG_RAISE_ON_FAILURE "
                                          "failed (no SEH to raise to)");
    return p;
}

VOID ExFreePoolWithTag(PVOID P, ULONG Tag)
{
    wdk_pool_free(P, Tag, true, __builtin_return_address(0));
}

VOID ExFreePool(PVOID P)
{
    wdk_pool_free(P, 0, false, __builtin_return_address(0));
}

ULONG64 SoftNdkWdkPoolSequence(VOID)
{
    pthread_mutex_lock(&pool_lock);
    ULONG64 s = pool_seq;
    pthread_mutex_unlock(&pool_lock);
    return s;
}

ULONG SoftNdkWdkQueryPool(ULONG64 Since, SOFTNDK_WDK_POOL_TAG *Tags, ULONG MaxTags)
{
    /* Tags are few; a linear table is enough. Count every tag even beyond MaxTags. */
    enum { MAX = 256 };
    SOFTNDK_WDK_POOL_TAG t[MAX];
    ULONG n = 0, total = 0;
    pthread_mutex_lock(&pool_lock);
    for (struct pool_hdr *h = pool_head.next; h != &pool_head; h = h->next) {
        if (h->seq < Since)
            continue;
        ULONG i;
        for (i = 0; i < n && t[i].Tag != h->tag; i++) {
        }
        if (i == n) {
            total++;
            if (n == MAX)
                continue;
            t[n++] = (SOFTNDK_WDK_POOL_TAG){h->tag, 0, 0, h->caller};
        }
        t[i].Allocations++;
        t[i].Bytes += h->size;
    }
    pthread_mutex_unlock(&pool_lock);
    for (ULONG i = 0; i < n && i < MaxTags; i++)
        Tags[i] = t[i];
    return total;
}

VOID SoftNdkWdkFormatTag(ULONG Tag, char Buffer[5])
{
    /* Memory order, as poolmon and !poolused print it: 'kdnS' shows as "Sndk". */
    for (int i = 0; i < 4; i++) {
        unsigned char c = (unsigned char)(Tag >> (8 * i));
        Buffer[i] = (char)(c >= 0x20 && c < 0x7F ? c : '.');
    }
    Buffer[4] = 0;
}
