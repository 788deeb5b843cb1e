/* NDK tokens are iWARP STags: a 24-bit index and an 8-bit key. Local token = remote token = the
 * STag. A peer must not be able to predict them (RFC 5042 §5 discusses STag guessing: a peer
 * that can name a remote-enabled region it was never told about can read or write it if the
 * access check lets it), so neither part follows allocation order:
 *
 * - the table keeps its entries dense (slot 1, 2, 3, ... as allocated, freed slots reused) and
 *   the STag's index is a bijection of the slot drawn per table at creation: index =
 *   (slot * mult mod 2^24) XOR mask, mult a random odd number, mask random; the lookup inverts
 *   it with mult's inverse mod 2^24: still O(1), and different for every adapter and run;
 * - each registration, deregistration, fast registration, bind and free draws a random key,
 *   neither the one it replaces nor the one before that, so the token of the registration
 *   before is refused at once (also across a deregistration or a free and reuse of the slot);
 *   an older one matches again only by chance (1 in 254).
 * The randomness is a per-table xorshift generator seeded from getrandom(). Two slots are never
 * handed out: slot 0, and the slot whose index would be 0 (STag index 0 has a meaning of its own
 * on the wire: RFC 6581's zero-length RTR uses STag 0/1). The owner's own state (registered?
 * fast-registered valid?) is checked too, since an MR's slot stays live from its creation on. */
#ifndef SOFTNDK_DEVICE_STAG_H
#define SOFTNDK_DEVICE_STAG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/lock.h"

#define SNDK_STAG_INDEX_BITS 24
#define SNDK_STAG_INDEX_MASK ((1u << SNDK_STAG_INDEX_BITS) - 1)
#define SNDK_STAG_MAX_INDEX  SNDK_STAG_INDEX_MASK

struct sndk_obj;

struct sndk_stag_entry {
    struct sndk_obj *owner; /* MR, MW or PD (privileged token); NULL when free */
    uint32_t next_free;     /* free-list link when free */
    uint8_t key;            /* key of the current STag */
    uint8_t last_key;       /* the key before it: the next one is neither */
};

struct sndk_stag_table {
    struct sndk_mutex lock;
    struct sndk_stag_entry *entries; /* by slot */
    uint32_t capacity;               /* entries allocated */
    uint32_t used;                   /* highest slot handed out + 1 */
    uint32_t free_head;              /* 0 = none */
    uint32_t max_index;              /* highest slot that may be handed out */
    uint32_t mult, mult_inv, mask;   /* slot <-> STag index bijection */
    uint32_t zero_slot;              /* the slot whose index would be 0: never handed out */
    uint64_t rng;                    /* xorshift64 state; under lock */
};

/* The STag of a slot with key, and back (any thread: mult/mask never change). */
static inline uint32_t sndk_stag_of_slot(const struct sndk_stag_table *t, uint32_t slot,
                                         uint8_t key)
{
    uint32_t index = ((slot * t->mult) & SNDK_STAG_INDEX_MASK) ^ t->mask;
    return (index << 8) | key;
}
static inline uint32_t sndk_stag_slot(const struct sndk_stag_table *t, uint32_t stag)
{
    return (((stag >> 8) ^ t->mask) * t->mult_inv) & SNDK_STAG_INDEX_MASK;
}
static inline uint8_t sndk_stag_key(uint32_t stag)
{
    return (uint8_t)stag;
}

bool sndk_stag_table_init(struct sndk_stag_table *t);
void sndk_stag_table_destroy(struct sndk_stag_table *t);

/* Allocate a slot for owner; returns its first STag (0 when the table is full). */
uint32_t sndk_stag_alloc(struct sndk_stag_table *t, struct sndk_obj *owner);
/* Give the slot of stag a fresh key; returns the new STag. */
uint32_t sndk_stag_rekey(struct sndk_stag_table *t, uint32_t stag);
/* The same, t->lock held (registration paths that change region fields in the same critical
 * section). */
uint32_t sndk_stag_rekey_locked(struct sndk_stag_table *t, uint32_t stag);
void sndk_stag_free(struct sndk_stag_table *t, uint32_t stag);
/* The owner of stag when its slot is live and its key current, else NULL. */
struct sndk_obj *sndk_stag_lookup(struct sndk_stag_table *t, uint32_t stag);
/* The same, t->lock held. */
struct sndk_obj *sndk_stag_lookup_locked(struct sndk_stag_table *t, uint32_t stag);

#endif
