/* Pool allocation with per-tag accounting. Each block has a header just before the caller's
 * memory; live blocks are on one list (for the leak report and for catching double and foreign
 * frees before they corrupt the heap).
 *
 * Freed blocks are filled with WDK_POOL_FREED_FILL and kept in a bounded FIFO quarantine, as
 * Driver Verifier's special pool keeps freed memory out of reuse: a use after free reads poison
 * (a pointer loaded from it is non-canonical, so dereferencing it faults at once) instead of
 * stale data or another allocation's, a second free is recognised, and a write after free is
 * found when the block leaves the quarantine (or at SoftNdkWdkCheckFreedPool, which the runner
 * calls after DriverUnload) and reported with the tag, the allocating and the freeing caller. */
#include "wdk_internal.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

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
    void *freer;                  /* the caller of the free, once freed */
    struct pool_hdr *prev, *next; /* the live list, or the quarantine once freed */
    uint32_t alloc_stack, free_stack; /* stack depot ids (crash.c), 0: not kept */
    uint64_t alloc_ns, free_ns;
    size_t map_len; /* special pool: the mapping at base (the guard page is its last), else 0 */
};
/* The caller's memory follows the header, so the header keeps 16-byte alignment. */
#define POOL_HDR_SIZE ((sizeof(struct pool_hdr) + 15) & ~(size_t)15)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool_hdr pool_head = {.prev = &pool_head, .next = &pool_head};
static ULONG64 pool_seq = 1;

/* The quarantine, oldest first; pool_lock. Bounded in bytes and in blocks. */
static struct pool_hdr quarantine = {.prev = &quarantine, .next = &quarantine};
static size_t quarantine_bytes, quarantine_blocks;
static size_t quarantine_max_bytes = (size_t)-1; /* resolved on first use */
#define QUARANTINE_DEFAULT_BYTES ((size_t)32 << 20)
#define QUARANTINE_MAX_BLOCKS    65536u

static size_t quarantine_limit(void)
{
    if (quarantine_max_bytes == (size_t)-1) {
        const char *e = getenv("SOFTNDK_WDK_POOL_QUARANTINE");
        char *end = NULL;
        unsigned long long v = e && *e ? strtoull(e, &end, 0) : 0;
        quarantine_max_bytes = e && *e && end && !*end ? (size_t)v : QUARANTINE_DEFAULT_BYTES;
    }
    return quarantine_max_bytes;
}

/* The first byte of a quarantined block that is not the fill, or -1. */
static long first_written(const struct pool_hdr *h)
{
    const unsigned char *u = (const unsigned char *)h + POOL_HDR_SIZE;
    for (size_t i = 0; i < h->size; i++)
        if (u[i] != WDK_POOL_FREED_FILL)
            return (long)i;
    return -1;
}

static __attribute__((noreturn)) void report_write_after_free(const struct pool_hdr *h, long at)
{
    wdk_crash_block((const char *)h + POOL_HDR_SIZE);
    char tag[5];
    SoftNdkWdkFormatTag(h->tag, tag);
    const unsigned char *u = (const unsigned char *)h + POOL_HDR_SIZE;
    wdk_bugcheck_msg(SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION,
                     "write after free: pool block %p tag '%s' (0x%08x), %zu bytes, allocated "
                     "from %p, freed from %p: byte %ld is 0x%02x, not the free fill 0x%02x",
                     (const void *)u, tag, h->tag, (size_t)h->size, h->caller, h->freer, at, u[at],
                     WDK_POOL_FREED_FILL);
}

/* Take the oldest block out of the quarantine (pool_lock held); the caller frees ->base. */
static struct pool_hdr *quarantine_pop_locked(void)
{
    struct pool_hdr *h = quarantine.next;
    if (h == &quarantine)
        return NULL;
    h->prev->next = h->next;
    h->next->prev = h->prev;
    quarantine_bytes -= h->size;
    quarantine_blocks--;
    return h;
}

static void release_evicted(struct pool_hdr *h)
{
    long at = first_written(h);
    if (at >= 0)
        report_write_after_free(h, at);
    h->magic = 0;
    free(h->base);
}

/* ------------------------------------------------------------------------------------------ */
/* Special pool (softndk_wdk.h): a chosen block ends at the end of its own pages, a no-access
 * guard page behind it; freed, its pages turn no-access and its header is copied into a record
 * of the special quarantine (its pages can no longer be read), unmapped when the record leaves.
 * pool_lock guards all of it. */

#define SPECIAL_MAX_TAGS         16u
#define SPECIAL_LIVE_MAX         16384u /* each block is two mappings: below vm.max_map_count */
#define SPECIAL_QUARANTINE_BLOCKS 8192u
#define SPECIAL_SLACK_FILL       0xABu /* the bytes between the block's end and its guard page */

static bool special_all;
static ULONG special_tags[SPECIAL_MAX_TAGS];
static unsigned special_ntags;
static size_t special_live;
static bool special_full_logged;

struct special_freed {
    struct pool_hdr h; /* the header as it was at the free (h.base: the mapping) */
    void *user;
    struct special_freed *prev, *next; /* the special quarantine, oldest first */
    struct special_freed *hnext;       /* its hash chain, by user */
};
static struct special_freed special_q = {.prev = &special_q, .next = &special_q};
static size_t special_q_blocks;
#define SPECIAL_HASH 16384u
static struct special_freed *special_hash[SPECIAL_HASH];

static unsigned special_bucket(const void *user)
{
    return (unsigned)(((uintptr_t)user >> 4) % SPECIAL_HASH);
}

static void special_hash_remove(struct special_freed *f)
{
    for (struct special_freed **pp = &special_hash[special_bucket(f->user)]; *pp;
         pp = &(*pp)->hnext)
        if (*pp == f) {
            *pp = f->hnext;
            return;
        }
}

/* The freed special block whose address is exactly user (a second free), or NULL. */
static struct special_freed *special_freed_exact_locked(const void *user)
{
    for (struct special_freed *f = special_hash[special_bucket(user)]; f; f = f->hnext)
        if (f->user == user)
            return f;
    return NULL;
}

NTSTATUS SoftNdkWdkSetSpecialPool(PCSTR Tags)
{
    ULONG tags[SPECIAL_MAX_TAGS];
    unsigned n = 0;
    bool all = Tags && !strcmp(Tags, "all");
    for (const char *p = Tags; !all && p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || len > 4 || n == SPECIAL_MAX_TAGS)
            return STATUS_INVALID_PARAMETER;
        /* the tag as it reads in memory ("Rdma" is 'amdR'), spaces padding a short one */
        unsigned char b[4] = {' ', ' ', ' ', ' '};
        memcpy(b, p, len);
        tags[n++] = (ULONG)b[0] | (ULONG)b[1] << 8 | (ULONG)b[2] << 16 | (ULONG)b[3] << 24;
        p = end ? end + 1 : p + len;
    }
    pthread_mutex_lock(&pool_lock);
    special_all = all;
    memcpy(special_tags, tags, n * sizeof *tags);
    special_ntags = n;
    pthread_mutex_unlock(&pool_lock);
    return STATUS_SUCCESS;
}

static bool special_wanted_locked(ULONG tag)
{
    if (special_all)
        return true;
    for (unsigned i = 0; i < special_ntags; i++)
        if (special_tags[i] == tag)
            return true;
    return false;
}

/* The block's pages: header and block at the end of them, then the guard page. NULL: no. */
static char *special_alloc(SIZE_T size, void **base, size_t *map_len)
{
    size_t body = (size + 15) & ~(size_t)15;
    if (body == 0)
        body = 16;
    size_t pages = (POOL_HDR_SIZE + body + PAGE_SIZE - 1) / PAGE_SIZE;
    size_t len = (pages + 1) * PAGE_SIZE;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *guard = m + pages * PAGE_SIZE;
    if (mprotect(guard, PAGE_SIZE, PROT_NONE) != 0) {
        munmap(m, len);
        return NULL;
    }
    char *user = guard - body;
    memset(user + size, SPECIAL_SLACK_FILL, body - size);
    *base = m;
    *map_len = len;
    return user;
}

/* The freed special block with this address (pool_lock held), or NULL. */
static struct special_freed *special_freed_find_locked(const char *a, bool whole_mapping)
{
    for (struct special_freed *f = special_q.next; f != &special_q; f = f->next) {
        const char *lo = whole_mapping ? (const char *)f->h.base : (const char *)f->user;
        const char *hi = whole_mapping ? (const char *)f->h.base + f->h.map_len
                                       : (const char *)f->user + (f->h.size ? f->h.size : 1);
        if (a >= lo && a < hi)
            return f;
    }
    return NULL;
}

/* Free special block h (pool_lock held, unlinked from the live list). Returns a record evicted
 * from the special quarantine for the caller to release, or NULL. */
static struct special_freed *special_free_locked(struct pool_hdr *h, void *user)
{
    special_live--;
    struct special_freed *f = malloc(sizeof *f);
    size_t pages = h->map_len / PAGE_SIZE - 1;
    if (!f) { /* no record: the pages go at once */
        munmap(h->base, h->map_len);
        return NULL;
    }
    f->h = *h; /* h is on the pages about to go: only the copy from here on */
    f->user = user;
    madvise(f->h.base, pages * PAGE_SIZE, MADV_DONTNEED);
    mprotect(f->h.base, pages * PAGE_SIZE, PROT_NONE);
    f->prev = special_q.prev;
    f->next = &special_q;
    special_q.prev->next = f;
    special_q.prev = f;
    unsigned b = special_bucket(user);
    f->hnext = special_hash[b];
    special_hash[b] = f;
    if (++special_q_blocks <= SPECIAL_QUARANTINE_BLOCKS)
        return NULL;
    struct special_freed *old = special_q.next;
    old->prev->next = old->next;
    old->next->prev = old->prev;
    special_hash_remove(old);
    special_q_blocks--;
    return old;
}

static void special_release(struct special_freed *f)
{
    if (!f)
        return;
    munmap(f->h.base, f->h.map_len);
    free(f);
}

/* The slack between a special block's end and its guard page must still be the fill. */
static long special_slack_written(const struct pool_hdr *h, const char *user)
{
    const char *guard = (const char *)h->base + h->map_len - PAGE_SIZE;
    for (const char *p = user + h->size; p < guard; p++)
        if ((unsigned char)*p != SPECIAL_SLACK_FILL)
            return (long)(p - user);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */

bool wdk_pool_find(const void *addr, struct wdk_pool_hit *hit)
{
    const char *a = addr;
    /* From a signal handler: the lock may be held by the thread that crashed. */
    bool locked = false;
    for (int i = 0; i < 1000 && !(locked = pthread_mutex_trylock(&pool_lock) == 0); i++)
        usleep(100);
    if (!locked)
        return false;
    bool found = false;
    memset(hit, 0, sizeof *hit);
    struct special_freed *sf = special_freed_find_locked(a, true);
    const struct pool_hdr *h = NULL;
    const char *u = NULL;
    if (sf) {
        h = &sf->h;
        u = sf->user;
        hit->freed = true;
        found = true;
    }
    for (struct pool_hdr *q = quarantine.next; !found && q != &quarantine; q = q->next) {
        const char *qu = (const char *)q + POOL_HDR_SIZE;
        if (a >= qu && a < qu + (q->size ? q->size : 1)) {
            h = q, u = qu, hit->freed = true, found = true;
        }
    }
    for (struct pool_hdr *l = pool_head.next; !found && l != &pool_head; l = l->next) {
        const char *lu = (const char *)l + POOL_HDR_SIZE;
        const char *end = l->map_len ? (const char *)l->base + l->map_len : lu + l->size;
        const char *start = l->map_len ? (const char *)l->base : lu;
        if (a >= start && a < end) {
            h = l, u = lu, found = true;
        }
    }
    if (found) {
        hit->user = (void *)(uintptr_t)u;
        hit->size = h->size;
        hit->offset = (size_t)(a - u);
        hit->tag = h->tag;
        hit->special = h->map_len != 0;
        hit->after = a >= u + h->size;
        hit->before = a < u;
        hit->alloc_stack = h->alloc_stack;
        hit->free_stack = h->free_stack;
        hit->alloc_caller = h->caller;
        hit->free_caller = h->freer;
        hit->alloc_ns = h->alloc_ns;
        hit->free_ns = h->free_ns;
    }
    pthread_mutex_unlock(&pool_lock);
    return found;
}

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
    char *user = NULL;
    size_t map_len = 0;
    pthread_mutex_lock(&pool_lock);
    bool special = (special_all || special_ntags) && special_wanted_locked(tag);
    if (special && special_live >= SPECIAL_LIVE_MAX) {
        if (!special_full_logged)
            wdk_log("special pool: %u blocks live, the limit: further blocks are ordinary pool",
                    SPECIAL_LIVE_MAX);
        special_full_logged = true;
        special = false;
    }
    if (special)
        special_live++;
    pthread_mutex_unlock(&pool_lock);
    if (special) {
        user = special_alloc(size, &base, &map_len);
        if (!user) {
            pthread_mutex_lock(&pool_lock);
            special_live--;
            pthread_mutex_unlock(&pool_lock);
            return NULL;
        }
    } else {
        if (posix_memalign(&base, align, lead + (size ? size : 1)) != 0)
            return NULL;
        user = (char *)base + lead;
    }
    struct pool_hdr *h = (struct pool_hdr *)(void *)(user - POOL_HDR_SIZE); /* 16-aligned */
    h->magic = POOL_LIVE;
    h->tag = tag;
    h->paged = paged;
    h->size = size;
    h->base = base;
    h->map_len = map_len;
    h->caller = caller;
    h->freer = NULL;
    h->alloc_stack = wdk_stack_save(1);
    h->free_stack = 0;
    h->alloc_ns = wdk_now_ns();
    h->free_ns = 0;
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
    struct special_freed *f = special_q_blocks ? special_freed_exact_locked(p) : NULL;
    if (f) {
        /* its header is on a no-access page now: name it from the record */
        void *alloc = f->h.caller, *freer = f->h.freer;
        pthread_mutex_unlock(&pool_lock);
        wdk_crash_block(p);
        wdk_bugcheck_msg(BAD_POOL_CALLER,
                         "special pool block %p freed twice (second free from %p; allocated from "
                         "%p, first freed from %p)",
                         p, caller, alloc, freer);
    }
    uint64_t magic = h->magic;
    if (magic != POOL_LIVE) {
        pthread_mutex_unlock(&pool_lock);
        if (magic == POOL_DEAD) {
            wdk_crash_block(p);
            wdk_bugcheck_msg(BAD_POOL_CALLER, "pool block %p freed twice (second free from %p)",
                             p, caller);
        }
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
    BOOLEAN paged = h->paged;
    pthread_mutex_unlock(&pool_lock);
    wdk_require_irql_max(paged ? APC_LEVEL : DISPATCH_LEVEL, "pool free");
    pthread_mutex_lock(&pool_lock);
    if (h->magic != POOL_LIVE) { /* freed by another thread meanwhile */
        pthread_mutex_unlock(&pool_lock);
        wdk_crash_block(p);
        wdk_bugcheck_msg(BAD_POOL_CALLER, "pool block %p freed twice (second free from %p)", p,
                         caller);
    }
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->magic = POOL_DEAD;
    h->freer = caller;
    h->free_stack = wdk_stack_save(1);
    h->free_ns = wdk_now_ns();
    if (h->map_len) {
        long at = special_slack_written(h, p);
        if (at >= 0) {
            char name[5];
            SoftNdkWdkFormatTag(h->tag, name);
            size_t size = h->size;
            void *alloc = h->caller;
            pthread_mutex_unlock(&pool_lock);
            wdk_bugcheck_msg(SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION,
                             "write past the end of special pool block %p tag '%s', %zu bytes "
                             "(allocated from %p, freed from %p): byte %ld, in the slack before "
                             "its guard page, was written",
                             p, name, size, alloc, caller, at);
        }
        struct special_freed *evict = special_free_locked(h, p);
        pthread_mutex_unlock(&pool_lock);
        special_release(evict);
        return;
    }
    memset(p, WDK_POOL_FREED_FILL, h->size);
    size_t limit = quarantine_limit();
    struct pool_hdr *evict[8];
    unsigned nevict = 0;
    if (h->size > limit) {
        evict[nevict++] = h; /* larger than the whole quarantine: checked and freed at once */
    } else {
        h->prev = quarantine.prev;
        h->next = &quarantine;
        quarantine.prev->next = h;
        quarantine.prev = h;
        quarantine_bytes += h->size;
        quarantine_blocks++;
        while (nevict < 8 &&
               (quarantine_bytes > limit || quarantine_blocks > QUARANTINE_MAX_BLOCKS))
            evict[nevict++] = quarantine_pop_locked();
    }
    pthread_mutex_unlock(&pool_lock);
    for (unsigned i = 0; i < nevict; i++)
        release_evicted(evict[i]);
}

ULONG SoftNdkWdkCheckFreedPool(BOOLEAN Release)
{
    ULONG checked = 0;
    pthread_mutex_lock(&pool_lock);
    if (!Release) {
        for (struct pool_hdr *h = quarantine.next; h != &quarantine; h = h->next, checked++) {
            long at = first_written(h);
            if (at >= 0) {
                pthread_mutex_unlock(&pool_lock);
                report_write_after_free(h, at);
            }
        }
        pthread_mutex_unlock(&pool_lock);
        return checked;
    }
    struct pool_hdr *h;
    while ((h = quarantine_pop_locked()) != NULL) {
        pthread_mutex_unlock(&pool_lock);
        release_evicted(h);
        checked++;
        pthread_mutex_lock(&pool_lock);
    }
    while (special_q.next != &special_q) {
        struct special_freed *f = special_q.next;
        f->prev->next = f->next;
        f->next->prev = f->prev;
        special_hash_remove(f);
        special_q_blocks--;
        special_release(f);
        checked++;
    }
    pthread_mutex_unlock(&pool_lock);
    return checked;
}

BOOLEAN SoftNdkWdkQueryFreedPool(const VOID *Address, SOFTNDK_WDK_FREED_POOL *Info)
{
    BOOLEAN found = FALSE;
    const char *a = Address;
    pthread_mutex_lock(&pool_lock);
    for (struct pool_hdr *h = quarantine.next; h != &quarantine; h = h->next) {
        const char *u = (const char *)h + POOL_HDR_SIZE;
        if (a >= u && a < u + (h->size ? h->size : 1)) {
            if (Info)
                *Info = (SOFTNDK_WDK_FREED_POOL){(PVOID)u, h->tag, h->size, h->caller, h->freer};
            found = TRUE;
            break;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return found;
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

static POOL_FLAGS flags_of_legacy(POOL_TYPE type, bool zero)
{
    POOL_FLAGS f = flags_of_type(type);
    if (!zero && !((int)type & POOL_ZERO_ALLOCATION))
        f |= POOL_FLAG_UNINITIALIZED;
    return f;
}

PVOID ExAllocatePoolWithTagPriority(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                    EX_POOL_PRIORITY Priority)
{
    (void)Priority;
    return wdk_pool_alloc(flags_of_legacy(PoolType, false), NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePoolPriorityZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                 EX_POOL_PRIORITY Priority)
{
    (void)Priority;
    return wdk_pool_alloc(flags_of_legacy(PoolType, true), NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePoolPriorityUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                          EX_POOL_PRIORITY Priority)
{
    (void)Priority;
    return wdk_pool_alloc(flags_of_type(PoolType) | POOL_FLAG_UNINITIALIZED, NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePoolWithQuotaTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return wdk_pool_alloc(flags_of_legacy(PoolType, false), NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePoolQuotaZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return wdk_pool_alloc(flags_of_legacy(PoolType, true), NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePoolQuotaUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return wdk_pool_alloc(flags_of_type(PoolType) | POOL_FLAG_UNINITIALIZED, NumberOfBytes, Tag,
                          __builtin_return_address(0));
}

PVOID ExAllocatePool3(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag,
                      PCPOOL_EXTENDED_PARAMETER ExtendedParameters, ULONG ExtendedParametersCount)
{
    for (ULONG i = 0; i < ExtendedParametersCount; i++) {
        unsigned type = (unsigned)ExtendedParameters[i].Type;
        if (type != PoolExtendedParameterPriority && type != PoolExtendedParameterNumaNode) {
            wdk_log("ExAllocatePool3: extended parameter type %u is not provided (secure pool); "
                    "returning NULL",
                    type);
            return NULL;
        }
    }
    return ExAllocatePool2(Flags, NumberOfBytes, Tag);
}

VOID ExFreePool2(PVOID P, ULONG Tag, PCPOOL_EXTENDED_PARAMETER ExtendedParameters,
                 ULONG ExtendedParametersCount)
{
    (void)ExtendedParameters, (void)ExtendedParametersCount;
    wdk_pool_free(P, Tag, true, __builtin_return_address(0));
}

/* Lookaside lists (wdm.h): no caching, so every block goes through the pool's checks. */
static void lookaside_init(SOFTNDK_WDK_LOOKASIDE *l, POOL_TYPE type, SIZE_T size, ULONG tag)
{
    memset(l, 0, sizeof *l);
    l->Type = type;
    l->Size = size;
    l->Tag = tag;
}

static PVOID lookaside_alloc(SOFTNDK_WDK_LOOKASIDE *l, PLOOKASIDE_LIST_EX ex, void *caller)
{
    PVOID p;
    if (l->AllocateEx)
        p = l->AllocateEx(l->Type, l->Size, l->Tag, ex);
    else if (l->Allocate)
        p = l->Allocate(l->Type, l->Size, l->Tag);
    else
        p = wdk_pool_alloc(flags_of_legacy(l->Type, false), l->Size, l->Tag, caller);
    if (p)
        __atomic_add_fetch(&l->Outstanding, 1, __ATOMIC_RELAXED);
    return p;
}

static void lookaside_free(SOFTNDK_WDK_LOOKASIDE *l, PLOOKASIDE_LIST_EX ex, PVOID p, void *caller)
{
    __atomic_sub_fetch(&l->Outstanding, 1, __ATOMIC_RELAXED);
    if (l->FreeEx)
        l->FreeEx(p, ex);
    else if (l->Free)
        l->Free(p);
    else
        wdk_pool_free(p, l->Tag, true, caller);
}

VOID ExInitializeNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                     PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                     USHORT Depth)
{
    (void)Flags, (void)Depth;
    lookaside_init(&Lookaside->L, NonPagedPoolNx, Size, Tag);
    Lookaside->L.Allocate = Allocate;
    Lookaside->L.Free = Free;
}

VOID ExDeleteNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside)
{
    (void)Lookaside;
}

PVOID ExAllocateFromNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside)
{
    return lookaside_alloc(&Lookaside->L, NULL, __builtin_return_address(0));
}

VOID ExFreeToNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry)
{
    lookaside_free(&Lookaside->L, NULL, Entry, __builtin_return_address(0));
}

VOID ExInitializePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                    PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                    USHORT Depth)
{
    (void)Flags, (void)Depth;
    lookaside_init(&Lookaside->L, PagedPool, Size, Tag);
    Lookaside->L.Allocate = Allocate;
    Lookaside->L.Free = Free;
}

VOID ExDeletePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside)
{
    (void)Lookaside;
}

PVOID ExAllocateFromPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside)
{
    return lookaside_alloc(&Lookaside->L, NULL, __builtin_return_address(0));
}

VOID ExFreeToPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry)
{
    lookaside_free(&Lookaside->L, NULL, Entry, __builtin_return_address(0));
}

NTSTATUS ExInitializeLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PALLOCATE_FUNCTION_EX Allocate,
                                     PFREE_FUNCTION_EX Free, POOL_TYPE PoolType, ULONG Flags,
                                     SIZE_T Size, ULONG Tag, USHORT Depth)
{
    (void)Flags, (void)Depth;
    if (!Lookaside)
        return STATUS_INVALID_PARAMETER;
    lookaside_init(&Lookaside->L, PoolType, Size, Tag);
    Lookaside->L.AllocateEx = Allocate;
    Lookaside->L.FreeEx = Free;
    return STATUS_SUCCESS;
}

VOID ExDeleteLookasideListEx(PLOOKASIDE_LIST_EX Lookaside)
{
    (void)Lookaside;
}

VOID ExFlushLookasideListEx(PLOOKASIDE_LIST_EX Lookaside)
{
    (void)Lookaside;
}

PVOID ExAllocateFromLookasideListEx(PLOOKASIDE_LIST_EX Lookaside)
{
    return lookaside_alloc(&Lookaside->L, Lookaside, __builtin_return_address(0));
}

VOID ExFreeToLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PVOID Entry)
{
    lookaside_free(&Lookaside->L, Lookaside, Entry, __builtin_return_address(0));
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
