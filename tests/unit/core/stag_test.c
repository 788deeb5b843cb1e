#include <string.h>

#include "device/stag.h"
#include "harness.h"

TEST(stag_fresh_key_on_rekey_and_reuse)
{
    struct sndk_stag_table t;
    CHECK(sndk_stag_table_init(&t));
    struct sndk_obj *owner = (struct sndk_obj *)&t; /* any non-NULL pointer */
    uint32_t a = sndk_stag_alloc(&t, owner);
    CHECK(a != 0);
    CHECK((a >> 8) != 0);
    CHECK(sndk_stag_lookup(&t, a) == owner);
    uint32_t b = sndk_stag_rekey(&t, a);
    CHECK(b != a);
    CHECK_EQ_U64(b >> 8, a >> 8);           /* same index, fresh key */
    CHECK(sndk_stag_lookup(&t, a) == NULL); /* stale key */
    CHECK(sndk_stag_lookup(&t, b) == owner);
    sndk_stag_free(&t, b);
    CHECK(sndk_stag_lookup(&t, b) == NULL);
    uint32_t c = sndk_stag_alloc(&t, owner); /* reuses the slot */
    CHECK_EQ_U64(c >> 8, a >> 8);
    CHECK(c != b); /* never the key it replaces */
    CHECK(sndk_stag_lookup(&t, b) == NULL);
    CHECK(sndk_stag_lookup(&t, 0) == NULL);
    sndk_stag_table_destroy(&t);
}

TEST(stag_many_indices_grow_and_exhaust)
{
    struct sndk_stag_table t;
    CHECK(sndk_stag_table_init(&t));
    t.max_index = 5000; /* a small table to reach the end quickly */
    struct sndk_obj *owner = (struct sndk_obj *)&t;
    uint32_t n = 0, seventeenth = 0;
    uint32_t s;
    while ((s = sndk_stag_alloc(&t, owner)) != 0) {
        if (++n == 17)
            seventeenth = s;
        CHECK((s >> 8) != 0); /* index 0 is never handed out */
        CHECK(sndk_stag_lookup(&t, s) == owner);
    }
    /* slots 1..5000, minus the one whose index would be 0 if it is among them */
    CHECK_EQ_U64(n, t.zero_slot >= 1 && t.zero_slot <= 5000 ? 4999 : 5000);
    sndk_stag_free(&t, seventeenth);
    CHECK(sndk_stag_lookup(&t, seventeenth) == NULL);
    CHECK(sndk_stag_alloc(&t, owner) != 0);
    CHECK_EQ_U64(sndk_stag_alloc(&t, owner), 0);
    sndk_stag_table_destroy(&t);
}

/* What a peer sees must not say what comes next: two tables (two adapters, or two runs) give
 * different STags for the same allocation order, consecutive STags of one table are not a
 * step apart, and the bijection still finds every live STag and refuses the rest. */
TEST(stag_sequences_are_unpredictable_and_lookups_exact)
{
    enum { N = 64 };
    static struct sndk_stag_table t1, t2;
    CHECK(sndk_stag_table_init(&t1));
    CHECK(sndk_stag_table_init(&t2));
    struct sndk_obj *owner = (struct sndk_obj *)&t1;
    uint32_t s1[N], s2[N];
    for (int i = 0; i < N; i++) {
        s1[i] = sndk_stag_alloc(&t1, owner);
        s2[i] = sndk_stag_alloc(&t2, owner);
        CHECK(s1[i] != 0 && s2[i] != 0);
    }
    CHECK(memcmp(s1, s2, sizeof s1) != 0);
    int same_index = 0, same_step = 0;
    for (int i = 0; i < N; i++)
        same_index += (s1[i] >> 8) == (s2[i] >> 8);
    CHECK_MSG(same_index < 4, "%d of %d indices agree between two tables", same_index, N);
    for (int i = 2; i < N; i++)
        same_step += (s1[i] >> 8) - (s1[i - 1] >> 8) == (s1[i - 1] >> 8) - (s1[i - 2] >> 8);
    /* index = slot * mult ^ mask: the XOR breaks constant steps; allow a few by chance */
    CHECK_MSG(same_step < N / 4, "%d constant steps in %d indices", same_step, N);
    /* keys: not all the same, not a counter */
    int same_key = 0;
    for (int i = 1; i < N; i++)
        same_key += (uint8_t)s1[i] == (uint8_t)(s1[i - 1] + 1);
    CHECK_MSG(same_key < N / 4, "%d keys one above the last", same_key);
    for (int i = 0; i < N; i++) {
        CHECK(sndk_stag_lookup(&t1, s1[i]) == owner);
        CHECK(sndk_stag_lookup(&t1, s1[i] ^ 0x01) == NULL); /* another key */
    }
    /* every key of one index but the current one is refused */
    int accepted = 0;
    for (unsigned k = 0; k < 256; k++)
        accepted += sndk_stag_lookup(&t1, (s1[5] & ~0xffu) | k) != NULL;
    CHECK_EQ_I64(accepted, 1);
    /* re-registration: a fresh key, the old one refused, lookups exact */
    for (int i = 0; i < N; i++) {
        uint32_t fresh = sndk_stag_rekey(&t1, s1[i]);
        CHECK(fresh != s1[i]);
        CHECK(sndk_stag_lookup(&t1, s1[i]) == NULL);
        CHECK(sndk_stag_lookup(&t1, fresh) == owner);
        s1[i] = fresh;
    }
    for (int i = 0; i < N; i++)
        sndk_stag_free(&t1, s1[i]);
    for (int i = 0; i < N; i++)
        CHECK(sndk_stag_lookup(&t1, s1[i]) == NULL);
    sndk_stag_table_destroy(&t1);
    sndk_stag_table_destroy(&t2);
}

TEST(stag_slot_bijection_round_trips)
{
    struct sndk_stag_table t;
    CHECK(sndk_stag_table_init(&t));
    CHECK(t.mult & 1u);
    CHECK_EQ_U64((t.mult * t.mult_inv) & SNDK_STAG_INDEX_MASK, 1);
    for (uint32_t slot = 0; slot < 100000; slot += 7) {
        uint32_t stag = sndk_stag_of_slot(&t, slot, 0x5a);
        CHECK_EQ_U64(sndk_stag_slot(&t, stag), slot);
        CHECK_EQ_U64(sndk_stag_key(stag), 0x5a);
    }
    CHECK_EQ_U64(sndk_stag_of_slot(&t, t.zero_slot, 0) >> 8, 0);
    sndk_stag_table_destroy(&t);
}
