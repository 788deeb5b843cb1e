/* CRC32c carry-less multiply folding kernel (SNDK_CRC32C_CLMUL): its constants against a slow
 * x^n mod P, the RFC 3720 B.4 vectors, equality with the table kernel at every length 0..1100 and
 * alignment 0..15 (exact-size buffers, so ASan sees any read past either end) and at random
 * lengths up to 3 MiB, chaining, and the dispatcher. Skips where the CPU cannot run it (no AVX-512
 * VPCLMULQDQ); the constants test runs everywhere. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "iwarp/crc32c.h"
#include "iwarp/wire.h"
#include "wire_util.h"

#define NEED_CLMUL()                                                                               \
    do {                                                                                           \
        if (!sndk_crc32c_clmul_available())                                                        \
            SKIP("CPU lacks SSE4.2/PCLMULQDQ/AVX512F/AVX512VL/VPCLMULQDQ or OS ZMM state");        \
    } while (0)

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint8_t *random_buf(size_t len)
{
    uint8_t *b = malloc(len ? len : 1);
    CHECK(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(rng() >> 56);
    return b;
}

/* ---------------------------------------------------------------- constants */

/* x^n mod P, one multiplication by x at a time, in the CRC register's own reflected form (bit i =
 * coefficient of x^(31-i)): a different route from the library's normal-form square-and-multiply.
 */
static uint32_t slow_xpow_reflected(unsigned n)
{
    uint32_t r = 0x80000000u; /* x^0 */
    for (unsigned i = 0; i < n; i++)
        r = (r >> 1) ^ ((r & 1u) ? 0x82f63b78u : 0u);
    return r;
}

/* As a 64-bit lane (bit i = coefficient of x^(63-i)): the register's bits, 32 up. */
static uint64_t slow_lane(unsigned n)
{
    return (uint64_t)slow_xpow_reflected(n) << 32;
}

TEST(crc32c_fold_constants)
{
    /* the reference itself: x^31 is the register's bit 0, x^32 is P's low terms */
    CHECK_EQ_U64(slow_xpow_reflected(31), 1u);
    CHECK_EQ_U64(slow_xpow_reflected(32), 0x82f63b78u);
    for (unsigned k = 1; k <= 16; k++) {
        uint64_t l[2];
        CHECK_EQ_I64(sndk_crc32c_fold_constant(k, l), 0);
        CHECK_MSG(l[0] == slow_lane(128 * k + 63), "k %u: x^%u lane %016llx, want %016llx", k,
                  128 * k + 63, (unsigned long long)l[0],
                  (unsigned long long)slow_lane(128 * k + 63));
        CHECK_MSG(l[1] == slow_lane(128 * k - 1), "k %u: x^%u lane %016llx, want %016llx", k,
                  128 * k - 1, (unsigned long long)l[1],
                  (unsigned long long)slow_lane(128 * k - 1));
    }
    uint64_t l[2];
    CHECK_EQ_I64(sndk_crc32c_fold_constant(0, l), -EINVAL);
    CHECK_EQ_I64(sndk_crc32c_fold_constant(17, l), -EINVAL);
}

/* ---------------------------------------------------------------- RFC 3720 B.4 */

static void check_rfc3720(crc_fn fn)
{
    uint8_t d[32], want[4], got[4];
    CHECK_EQ_U64(fn(0, "123456789", 9), 0xe3069283u);
    CHECK_EQ_U64(fn(0, NULL, 0), 0);
    memset(d, 0, 32);
    wu_unhex("aa36918a", want, 4);
    sndk_put_le32(got, fn(0, d, 32));
    CHECK_MEM(got, want, 4);
    memset(d, 0xff, 32);
    wu_unhex("43aba862", want, 4);
    sndk_put_le32(got, fn(0, d, 32));
    CHECK_MEM(got, want, 4);
    for (int i = 0; i < 32; i++)
        d[i] = (uint8_t)i;
    wu_unhex("4e79dd46", want, 4);
    sndk_put_le32(got, fn(0, d, 32));
    CHECK_MEM(got, want, 4);
    for (int i = 0; i < 32; i++)
        d[i] = (uint8_t)(31 - i);
    wu_unhex("5cdb3f11", want, 4);
    sndk_put_le32(got, fn(0, d, 32));
    CHECK_MEM(got, want, 4);
    uint8_t cmd[48];
    size_t n = wu_unhex("01c00000 00000000 00000000 00000000 14000000 00000400"
                        "00000014 00000018 28000000 00000000 02000000 00000000",
                        cmd, sizeof cmd);
    wu_unhex("563a96d9", want, 4);
    sndk_put_le32(got, fn(0, cmd, n));
    CHECK_MEM(got, want, 4);
}

TEST(crc32c_clmul_rfc3720)
{
    NEED_CLMUL();
    check_rfc3720(sndk_crc32c_clmul);
    /* The vectors are shorter than the folding threshold; the same CRCs continued over long
     * zero runs (folded) must still agree with the table. */
    uint8_t *z = calloc(1, 70000);
    CHECK(z);
    for (size_t len = 128; len <= 70000; len = len * 3 + 17) {
        uint32_t c = sndk_crc32c_clmul(0, "123456789", 9);
        CHECK_EQ_U64(sndk_crc32c_clmul(c, z, len), sndk_crc32c_sw(c, z, len));
    }
    free(z);
}

/* ---------------------------------------------------------------- against the table */

static const uint32_t inits[] = {0, 0xffffffffu, 0x12345678u, 0x82f63b78u};

/* Every length 0..1100 at every alignment 0..15, the data ending exactly at the end of its
 * allocation. */
TEST(crc32c_clmul_equals_sw_every_length)
{
    NEED_CLMUL();
    const size_t maxlen = 1100;
    uint8_t *src = random_buf(maxlen);
    for (size_t len = 0; len <= maxlen; len++)
        for (size_t a = 0; a < 16; a++) {
            uint8_t *tight = malloc(a + len ? a + len : 1);
            CHECK(tight);
            if (len)
                memcpy(tight + a, src, len);
            for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
                uint32_t want = sndk_crc32c_sw(inits[i], src, len);
                uint32_t got = sndk_crc32c_clmul(inits[i], tight + a, len);
                CHECK_MSG(got == want, "len %zu align %zu init %08x: %08x, want %08x", len, a,
                          inits[i], got, want);
            }
            free(tight);
        }
    free(src);
}

TEST_T(crc32c_clmul_equals_sw_random, 120)
{
    NEED_CLMUL();
    const size_t cap = (3u << 20) + 64;
    uint8_t *buf = random_buf(cap);
    for (int r = 0; r < 60; r++) {
        size_t a = (size_t)(rng() % 64), len = (size_t)(rng() % (cap - a + 1));
        if (r < 4)
            len = cap - a; /* the whole 3 MiB */
        uint32_t init = (uint32_t)rng();
        uint32_t want = sndk_crc32c_sw(init, buf + a, len);
        uint32_t got = sndk_crc32c_clmul(init, buf + a, len);
        CHECK_MSG(got == want, "len %zu align %zu init %08x: %08x, want %08x", len, a, init, got,
                  want);
    }
    free(buf);
}

/* ---------------------------------------------------------------- chaining */

TEST(crc32c_clmul_chaining)
{
    NEED_CLMUL();
    const size_t len = 5000;
    uint8_t *buf = random_buf(len);
    const uint32_t whole = sndk_crc32c_sw(0, buf, len);
    CHECK_EQ_U64(sndk_crc32c_clmul(0, buf, len), whole);
    /* crc(a||b) == crc(crc(a), b) at every split */
    for (size_t k = 0; k <= len; k++) {
        uint32_t c = sndk_crc32c_clmul(sndk_crc32c_clmul(0, buf, k), buf + k, len - k);
        CHECK_MSG(c == whole, "split at %zu: %08x, want %08x", k, c, whole);
    }
    /* random pieces, directly and through the iovec entry point with CLMUL selected */
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_CLMUL), 0);
    for (int r = 0; r < 200; r++) {
        struct iovec iov[16];
        int n = 0;
        size_t off = 0;
        uint32_t c = 0;
        while (off < len && n < 15) {
            size_t piece = (size_t)(rng() % 1200);
            if (piece > len - off)
                piece = len - off;
            iov[n].iov_base = buf + off;
            iov[n++].iov_len = piece;
            c = sndk_crc32c_clmul(c, buf + off, piece);
            off += piece;
        }
        iov[n].iov_base = buf + off;
        iov[n++].iov_len = len - off;
        c = sndk_crc32c_clmul(c, buf + off, len - off);
        CHECK_EQ_U64(c, whole);
        CHECK_EQ_U64(sndk_crc32c_iov(0, iov, n), whole);
    }
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_AUTO), 0);
    free(buf);
}

/* ---------------------------------------------------------------- dispatch */

TEST(crc32c_clmul_dispatch)
{
    uint8_t *buf = random_buf(10000);
    const uint32_t want = sndk_crc32c_sw(7, buf, 10000);
    /* a fresh process (each test is forked): AUTO picks CLMUL > HW > SW without being asked */
    enum sndk_crc32c_impl best = sndk_crc32c_clmul_available() ? SNDK_CRC32C_CLMUL
                                 : sndk_crc32c_hw_available()  ? SNDK_CRC32C_HW
                                                               : SNDK_CRC32C_SW;
    CHECK_EQ_U64(sndk_crc32c_current(), best);
    CHECK_EQ_U64(sndk_crc32c(7, buf, 10000), want);
    CHECK_EQ_I64(sndk_crc32c_select((enum sndk_crc32c_impl)99), -EINVAL);
    CHECK_EQ_U64(sndk_crc32c_current(), best);
    if (!sndk_crc32c_clmul_available()) {
        CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_CLMUL), -ENOTSUP);
        CHECK_EQ_U64(sndk_crc32c_current(), best);
        free(buf);
        SKIP("no AVX-512 VPCLMULQDQ folding on this CPU (checked: select(CLMUL) is -ENOTSUP)");
    }
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_SW), 0);
    CHECK_EQ_U64(sndk_crc32c_current(), SNDK_CRC32C_SW);
    CHECK_EQ_U64(sndk_crc32c(7, buf, 10000), want);
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_CLMUL), 0);
    CHECK_EQ_U64(sndk_crc32c_current(), SNDK_CRC32C_CLMUL);
    CHECK_EQ_U64(sndk_crc32c(7, buf, 10000), want);
    check_rfc3720(sndk_crc32c);
    if (sndk_crc32c_hw_available()) {
        CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_HW), 0);
        CHECK_EQ_U64(sndk_crc32c_current(), SNDK_CRC32C_HW);
        CHECK_EQ_U64(sndk_crc32c(7, buf, 10000), want);
    }
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_AUTO), 0);
    CHECK_EQ_U64(sndk_crc32c_current(), SNDK_CRC32C_CLMUL);
    CHECK_EQ_U64(sndk_crc32c(7, buf, 10000), want);
    free(buf);
}
