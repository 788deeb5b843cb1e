#include "core/stag.h"

#include <stdlib.h>

bool sndk_stag_table_init(struct sndk_stag_table *t)
{
    sndk_mutex_init_ranked(&t->lock, SNDK_LOCK_STAG);
    t->capacity = 256;
    t->entries = calloc(t->capacity, sizeof *t->entries);
    t->used = 1; /* index 0 is reserved */
    t->free_head = 0;
    t->max_index = SNDK_STAG_MAX_INDEX;
    if (!t->entries) {
        sndk_mutex_destroy(&t->lock);
        return false;
    }
    return true;
}

void sndk_stag_table_destroy(struct sndk_stag_table *t)
{
    free(t->entries);
    t->entries = NULL;
    sndk_mutex_destroy(&t->lock);
}

/* Keys start at a value derived from the index and advance by one per rekey, so that the
 * first STag of each index differs and a key repeats only after 256 re-registrations. */
static uint8_t first_key(uint32_t index)
{
    return (uint8_t)(index * 37u + 1u);
}

uint32_t sndk_stag_alloc(struct sndk_stag_table *t, struct sndk_obj *owner)
{
    sndk_mutex_lock(&t->lock);
    uint32_t index;
    if (t->free_head) {
        index = t->free_head;
        t->free_head = t->entries[index].next_free;
    } else {
        if (t->used > t->max_index) {
            sndk_mutex_unlock(&t->lock);
            return 0;
        }
        if (t->used == t->capacity) {
            uint32_t cap = t->capacity * 2;
            if (cap > t->max_index + 1)
                cap = t->max_index + 1;
            struct sndk_stag_entry *e = realloc(t->entries, (size_t)cap * sizeof *e);
            if (!e) {
                sndk_mutex_unlock(&t->lock);
                return 0;
            }
            for (uint32_t i = t->capacity; i < cap; i++)
                e[i] = (struct sndk_stag_entry){NULL, 0, first_key(i)};
            t->entries = e;
            t->capacity = cap;
        }
        index = t->used++;
        t->entries[index].key = first_key(index);
    }
    struct sndk_stag_entry *e = &t->entries[index];
    e->owner = owner;
    e->key++; /* a reused index never comes back with its previous key */
    uint32_t stag = sndk_stag_make(index, e->key);
    sndk_mutex_unlock(&t->lock);
    return stag;
}

uint32_t sndk_stag_rekey(struct sndk_stag_table *t, uint32_t stag)
{
    uint32_t index = sndk_stag_index(stag);
    sndk_mutex_lock(&t->lock);
    struct sndk_stag_entry *e = &t->entries[index];
    e->key++;
    uint32_t fresh = sndk_stag_make(index, e->key);
    sndk_mutex_unlock(&t->lock);
    return fresh;
}

void sndk_stag_free(struct sndk_stag_table *t, uint32_t stag)
{
    uint32_t index = sndk_stag_index(stag);
    if (index == 0)
        return;
    sndk_mutex_lock(&t->lock);
    struct sndk_stag_entry *e = &t->entries[index];
    e->owner = NULL;
    e->key++;
    e->next_free = t->free_head;
    t->free_head = index;
    sndk_mutex_unlock(&t->lock);
}

struct sndk_obj *sndk_stag_lookup(struct sndk_stag_table *t, uint32_t stag)
{
    uint32_t index = sndk_stag_index(stag);
    struct sndk_obj *owner = NULL;
    sndk_mutex_lock(&t->lock);
    if (index != 0 && index < t->used && t->entries[index].owner &&
        t->entries[index].key == sndk_stag_key(stag))
        owner = t->entries[index].owner;
    sndk_mutex_unlock(&t->lock);
    return owner;
}
