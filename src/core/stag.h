/* NDK tokens are iWARP STags: a 24-bit index into the adapter's table and an 8-bit key.
 * Local token = remote token = the STag. Each (re-)registration, fast registration or bind
 * draws a fresh key, so a stale token does not match the current one until the 8-bit key comes
 * round again (256 re-registrations of one index, as on iWARP hardware). The owner's own state
 * (registered? fast-registered valid?) is checked too, since an MR's index stays live from its
 * creation on. Index 0 is never used:
 * STag 0 has a meaning of its own on the wire (RFC 6581 zero-length RTR Read). */
#ifndef SOFTNDK_CORE_STAG_H
#define SOFTNDK_CORE_STAG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/lock.h"

#define SNDK_STAG_INDEX_BITS 24
#define SNDK_STAG_MAX_INDEX  ((1u << SNDK_STAG_INDEX_BITS) - 1)

static inline uint32_t sndk_stag_make(uint32_t index, uint8_t key)
{
    return (index << 8) | key;
}
static inline uint32_t sndk_stag_index(uint32_t stag)
{
    return stag >> 8;
}
static inline uint8_t sndk_stag_key(uint32_t stag)
{
    return (uint8_t)stag;
}

struct sndk_obj;

struct sndk_stag_entry {
    struct sndk_obj *owner; /* MR, MW or PD (privileged token); NULL when free */
    uint32_t next_free;     /* free-list link when free */
    uint8_t key;            /* key of the current STag */
};

struct sndk_stag_table {
    struct sndk_mutex lock;
    struct sndk_stag_entry *entries;
    uint32_t capacity; /* entries allocated */
    uint32_t used;     /* highest index handed out + 1 */
    uint32_t free_head;/* 0 = none */
    uint32_t max_index;
};

bool sndk_stag_table_init(struct sndk_stag_table *t);
void sndk_stag_table_destroy(struct sndk_stag_table *t);

/* Allocate an index for owner; returns the first STag (0 when the table is full). */
uint32_t sndk_stag_alloc(struct sndk_stag_table *t, struct sndk_obj *owner);
/* Give the index of stag a fresh key; returns the new STag. */
uint32_t sndk_stag_rekey(struct sndk_stag_table *t, uint32_t stag);
void sndk_stag_free(struct sndk_stag_table *t, uint32_t stag);
/* The owner of stag when its index is live and its key current, else NULL. */
struct sndk_obj *sndk_stag_lookup(struct sndk_stag_table *t, uint32_t stag);

#endif
