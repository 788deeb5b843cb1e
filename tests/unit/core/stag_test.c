#include "core/stag.h"
#include "harness.h"

TEST(stag_fresh_key_on_rekey_and_reuse)
{
    struct sndk_stag_table t;
    CHECK(sndk_stag_table_init(&t));
    struct sndk_obj *owner = (struct sndk_obj *)&t; /* any non-NULL pointer */
    uint32_t a = sndk_stag_alloc(&t, owner);
    CHECK(a != 0);
    CHECK(sndk_stag_index(a) != 0);
    CHECK(sndk_stag_lookup(&t, a) == owner);
    uint32_t b = sndk_stag_rekey(&t, a);
    CHECK(b != a);
    CHECK_EQ_U64(sndk_stag_index(b), sndk_stag_index(a));
    CHECK(sndk_stag_lookup(&t, a) == NULL); /* stale key */
    CHECK(sndk_stag_lookup(&t, b) == owner);
    sndk_stag_free(&t, b);
    CHECK(sndk_stag_lookup(&t, b) == NULL);
    uint32_t c = sndk_stag_alloc(&t, owner); /* reuses the index */
    CHECK_EQ_U64(sndk_stag_index(c), sndk_stag_index(a));
    CHECK(c != a && c != b);
    CHECK(sndk_stag_lookup(&t, 0) == NULL);
    sndk_stag_table_destroy(&t);
}

TEST(stag_many_indices_grow_and_exhaust)
{
    struct sndk_stag_table t;
    CHECK(sndk_stag_table_init(&t));
    t.max_index = 5000; /* a small table to reach the end quickly */
    struct sndk_obj *owner = (struct sndk_obj *)&t;
    uint32_t n = 0;
    while (sndk_stag_alloc(&t, owner) != 0)
        n++;
    CHECK_EQ_U64(n, 5000); /* indices 1..5000 */
    sndk_stag_free(&t, sndk_stag_make(17, 0));
    CHECK(sndk_stag_alloc(&t, owner) != 0);
    CHECK_EQ_U64(sndk_stag_alloc(&t, owner), 0);
    sndk_stag_table_destroy(&t);
}
