#include "device/stag.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/log.h"

static uint64_t rng_next(struct sndk_stag_table *t)
{
    uint64_t x = t->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t->rng = x;
    return x;
}

/* A seed nobody outside can know; getrandom() does not fail for 8 bytes once the pool is
 * initialised, but a fallback keeps the table usable (and logs it) if it ever does. */
static uint64_t seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
            (uint64_t)(uintptr_t)&s;
        sndk_warn("stag", "getrandom failed: STags seeded from the clock");
    }
    return s ? s : 0x2545f4914f6cdd1dull; /* xorshift must not start at 0 */
}

/* The inverse of an odd number modulo 2^32 (Newton: each step doubles the correct bits). */
static uint32_t odd_inverse(uint32_t m)
{
    uint32_t x = m; /* right to 3 bits */
    for (int i = 0; i < 5; i++)
        x *= 2u - m * x;
    return x;
}

bool sndk_stag_table_init(struct sndk_stag_table *t)
{
    memset(t, 0, sizeof *t);
    sndk_mutex_init_ranked(&t->lock, SNDK_LOCK_STAG);
    t->capacity = 256;
    t->entries = calloc(t->capacity, sizeof *t->entries);
    t->used = 1; /* slot 0 is reserved */
    t->free_head = 0;
    t->max_index = SNDK_STAG_MAX_INDEX;
    if (!t->entries) {
        sndk_mutex_destroy(&t->lock);
        return false;
    }
    t->rng = seed();
    t->mult = ((uint32_t)rng_next(t) | 1u) & SNDK_STAG_INDEX_MASK;
    t->mult_inv = odd_inverse(t->mult) & SNDK_STAG_INDEX_MASK;
    t->mask = (uint32_t)(rng_next(t) >> 20) & SNDK_STAG_INDEX_MASK;
    t->zero_slot = sndk_stag_slot(t, 0);
    for (uint32_t i = 0; i < t->capacity; i++) {
        t->entries[i].key = (uint8_t)rng_next(t);
        t->entries[i].last_key = (uint8_t)(t->entries[i].key + 1u);
    }
    return true;
}

void sndk_stag_table_destroy(struct sndk_stag_table *t)
{
    free(t->entries);
    t->entries = NULL;
    sndk_mutex_destroy(&t->lock);
}

/* A random key for e other than the one it replaces and the one before that (a deregistration
 * or a free draws one too: the next registration must not bring back the key of the one
 * before); t->lock held. */
static void next_key(struct sndk_stag_table *t, struct sndk_stag_entry *e)
{
    uint8_t k = (uint8_t)rng_next(t);
    while (k == e->key || k == e->last_key)
        k++; /* at most twice */
    e->last_key = e->key;
    e->key = k;
}

uint32_t sndk_stag_alloc(struct sndk_stag_table *t, struct sndk_obj *owner)
{
    sndk_mutex_lock(&t->lock);
    uint32_t slot;
    if (t->free_head) {
        slot = t->free_head;
        t->free_head = t->entries[slot].next_free;
    } else {
        if (t->used == t->zero_slot)
            t->used++; /* its STag index would be 0 */
        if (t->used > t->max_index) {
            sndk_mutex_unlock(&t->lock);
            return 0;
        }
        if (t->used >= t->capacity) {
            uint32_t cap = t->capacity * 2;
            if (cap > t->max_index + 1)
                cap = t->max_index + 1;
            if (cap <= t->used)
                cap = t->used + 1;
            struct sndk_stag_entry *e = realloc(t->entries, (size_t)cap * sizeof *e);
            if (!e) {
                sndk_mutex_unlock(&t->lock);
                return 0;
            }
            for (uint32_t i = t->capacity; i < cap; i++)
                e[i] = (struct sndk_stag_entry){NULL, 0, (uint8_t)rng_next(t), 0};
            t->entries = e;
            t->capacity = cap;
        }
        slot = t->used++;
    }
    struct sndk_stag_entry *e = &t->entries[slot];
    e->owner = owner;
    next_key(t, e); /* a reused slot never comes back with its previous key */
    uint32_t stag = sndk_stag_of_slot(t, slot, e->key);
    sndk_mutex_unlock(&t->lock);
    return stag;
}

uint32_t sndk_stag_rekey_locked(struct sndk_stag_table *t, uint32_t stag)
{
    sndk_assert_held(&t->lock);
    uint32_t slot = sndk_stag_slot(t, stag);
    struct sndk_stag_entry *e = &t->entries[slot];
    next_key(t, e);
    return sndk_stag_of_slot(t, slot, e->key);
}

uint32_t sndk_stag_rekey(struct sndk_stag_table *t, uint32_t stag)
{
    sndk_mutex_lock(&t->lock);
    uint32_t fresh = sndk_stag_rekey_locked(t, stag);
    sndk_mutex_unlock(&t->lock);
    return fresh;
}

void sndk_stag_free(struct sndk_stag_table *t, uint32_t stag)
{
    if (stag == 0)
        return; /* never allocated (allocation failed) */
    sndk_mutex_lock(&t->lock);
    uint32_t slot = sndk_stag_slot(t, stag);
    if (slot == 0 || slot >= t->used || !t->entries[slot].owner) {
        sndk_mutex_unlock(&t->lock);
        return;
    }
    struct sndk_stag_entry *e = &t->entries[slot];
    e->owner = NULL;
    next_key(t, e);
    e->next_free = t->free_head;
    t->free_head = slot;
    sndk_mutex_unlock(&t->lock);
}

struct sndk_obj *sndk_stag_lookup_locked(struct sndk_stag_table *t, uint32_t stag)
{
    sndk_assert_held(&t->lock);
    uint32_t slot = sndk_stag_slot(t, stag);
    if (slot == 0 || slot >= t->used)
        return NULL;
    const struct sndk_stag_entry *e = &t->entries[slot];
    return e->owner && e->key == sndk_stag_key(stag) ? e->owner : NULL;
}

struct sndk_obj *sndk_stag_lookup(struct sndk_stag_table *t, uint32_t stag)
{
    sndk_mutex_lock(&t->lock);
    struct sndk_obj *owner = sndk_stag_lookup_locked(t, stag);
    sndk_mutex_unlock(&t->lock);
    return owner;
}
