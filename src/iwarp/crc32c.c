/* CRC32c: carry-less multiply folding on 512-bit (AVX-512 VPCLMULQDQ), 256-bit (AVX2
 * VPCLMULQDQ) and 128-bit (PCLMULQDQ) registers, the last two also beside three crc32 streams,
 * the SSE4.2 three-stream kernel, and a table fallback, behind one function; which one runs is
 * chosen at first use. */
#include "iwarp/crc32c.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/clock.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <nmmintrin.h>
#define SNDK_HAVE_X86 1
#else
#define SNDK_HAVE_X86 0
#endif

#define CRC32C_POLY_REFLECTED 0x82f63b78u

/* Raw register update: no pre/post inversion. */
typedef uint32_t (*crc_update_fn)(uint32_t reg, const uint8_t *p, size_t n);

/* ---------------------------------------------------------------- portable slicing-by-8 */

static uint32_t sw_table[8][256];
static pthread_once_t sw_once = PTHREAD_ONCE_INIT;

static void sw_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1u) ? CRC32C_POLY_REFLECTED : 0u);
        sw_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            sw_table[t][i] = (sw_table[t - 1][i] >> 8) ^ sw_table[0][sw_table[t - 1][i] & 0xffu];
}

static uint32_t sw_update(uint32_t c, const uint8_t *p, size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7u)) {
        c = sw_table[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        /* Byte-wise assembly keeps this endian-independent. */
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = sw_table[7][lo & 0xffu] ^ sw_table[6][(lo >> 8) & 0xffu] ^
            sw_table[5][(lo >> 16) & 0xffu] ^ sw_table[4][lo >> 24] ^ sw_table[3][p[4]] ^
            sw_table[2][p[5]] ^ sw_table[1][p[6]] ^ sw_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = sw_table[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
    return c;
}

uint32_t sndk_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&sw_once, sw_init);
    return ~sw_update(~crc, buf, len);
}

/* ---------------------------------------------------------------- SSE4.2 */

#if SNDK_HAVE_X86
static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v); /* unaligned-safe; host order is what crc32 wants (x86 is LE) */
    return v;
}

/* The crc32 instruction has a latency of 3 cycles and a throughput of 1, so one dependent chain
 * uses a third of the unit. Three independent streams over adjacent blocks run at full rate and
 * are recombined with "shift by N zero bytes" operators, which are linear in the register value
 * and therefore 4 byte-indexed tables each (built once from the instruction itself). */
#define HW_LONG  4096u /* bytes per stream for big buffers */
#define HW_SHORT 256u  /* bytes per stream for medium buffers */

struct shift_tab {
    uint32_t t[4][256];
};
static struct shift_tab hw_long1, hw_long2, hw_short1, hw_short2;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2"))) static uint32_t hw_zeros(uint32_t c, size_t n)
{
    uint64_t r = c;
    for (size_t i = 0; i < n; i += 8)
        r = _mm_crc32_u64(r, 0);
    return (uint32_t)r;
}

static void shift_tab_build(struct shift_tab *s, size_t nbytes)
{
    uint32_t basis[32];
    for (int b = 0; b < 32; b++)
        basis[b] = hw_zeros(1u << b, nbytes);
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t x = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1u << b))
                    x ^= basis[8 * k + b];
            s->t[k][v] = x;
        }
}

static inline uint32_t shift_apply(const struct shift_tab *s, uint32_t c)
{
    return s->t[0][c & 0xffu] ^ s->t[1][(c >> 8) & 0xffu] ^ s->t[2][(c >> 16) & 0xffu] ^
           s->t[3][c >> 24];
}

static void hw_init(void)
{
    shift_tab_build(&hw_long1, HW_LONG);
    shift_tab_build(&hw_long2, 2 * HW_LONG);
    shift_tab_build(&hw_short1, HW_SHORT);
    shift_tab_build(&hw_short2, 2 * HW_SHORT);
}

__attribute__((target("sse4.2"))) static uint32_t hw_update(uint32_t c, const uint8_t *p,
                                                            size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7u)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    while (n >= 3 * HW_LONG) {
        uint64_t a = c, b = 0, d = 0;
        for (size_t i = 0; i < HW_LONG; i += 8) {
            a = _mm_crc32_u64(a, load64(p + i));
            b = _mm_crc32_u64(b, load64(p + HW_LONG + i));
            d = _mm_crc32_u64(d, load64(p + 2 * HW_LONG + i));
        }
        c = shift_apply(&hw_long2, (uint32_t)a) ^ shift_apply(&hw_long1, (uint32_t)b) ^
            (uint32_t)d;
        p += 3 * HW_LONG;
        n -= 3 * HW_LONG;
    }
    while (n >= 3 * HW_SHORT) {
        uint64_t a = c, b = 0, d = 0;
        for (size_t i = 0; i < HW_SHORT; i += 8) {
            a = _mm_crc32_u64(a, load64(p + i));
            b = _mm_crc32_u64(b, load64(p + HW_SHORT + i));
            d = _mm_crc32_u64(d, load64(p + 2 * HW_SHORT + i));
        }
        c = shift_apply(&hw_short2, (uint32_t)a) ^ shift_apply(&hw_short1, (uint32_t)b) ^
            (uint32_t)d;
        p += 3 * HW_SHORT;
        n -= 3 * HW_SHORT;
    }
    uint64_t r = c;
    while (n >= 8) {
        r = _mm_crc32_u64(r, load64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)r;
    while (n-- > 0)
        c = _mm_crc32_u8(c, *p++);
    return c;
}

int sndk_crc32c_hw_available(void)
{
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

uint32_t sndk_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&hw_once, hw_init);
    return ~hw_update(~crc, buf, len);
}
#else
int sndk_crc32c_hw_available(void)
{
    return 0;
}

uint32_t sndk_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return sndk_crc32c_sw(crc, buf, len);
}
#endif

/* ---------------------------------------------------------------- carry-less multiply folding */

/* Folding as in Intel's white paper "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
 * Instruction" (Gopal et al., 2009), written here from its maths for CRC32c (RFC 3385, RFC 7143)
 * and ending in the crc32 instruction instead of the paper's Barrett reduction.
 *
 * The maths, in the reflected domain the CRC lives in. A 16-byte block loaded little-endian into
 * a 128-bit register has bit j = the coefficient of x^(127-j) of that block's polynomial (byte 0,
 * bit 0 is the highest power: the CRC consumes each byte least-significant bit first). Split such
 * a value X into its two 64-bit lanes: X = A*x^64 + B, A the low lane, B the high lane, each again
 * "bit i = coefficient of x^(63-i)". Moving X forward over D bits of later data means replacing it
 * by X*x^D = A*x^(D+64) + B*x^D, which only has to be right modulo P:
 *   X*x^D == A*(x^(D+64) mod P) + B*(x^D mod P)  (mod P),
 * a 64x32-bit carry-less product per lane, < 128 bits, so it can simply be XORed into the block
 * D bits further on. PCLMULQDQ on two reflected 64-bit operands returns a 128-bit reflected value
 * that is their product times x (bit k of the raw product is the coefficient of x^(126-k), which
 * the 128-bit reading calls x^(127-k)), so the constants are x^(D+63) mod P for the low lane and
 * x^(D-1) mod P for the high lane, in the same "bit i = x^(63-i)" lane form.
 *
 * Put the incoming register into the first 4 bytes of the message (it is the same as starting
 * from it), fold everything down to one 16-byte block, and that block followed by the unfolded
 * tail is congruent to the message modulo P: its CRC from register 0 (the crc32 instruction over
 * the 16 bytes, then the tail) is the answer.
 *
 * fold_k[k] holds the pair for D = 128*k bits (16*k bytes), k = 1..16; it is computed once, here,
 * from the polynomial, so no constant in this file is more than the polynomial itself. */
#define FOLD_KMAX 16
static _Alignas(64) uint64_t fold_k[FOLD_KMAX + 1][2];
/* Lanes 0..2 of a 512-bit register brought to lane 3 (48, 32 and 16 bytes on); lane 3 stays. */
static _Alignas(64) uint64_t fold_lanes[8];
static pthread_once_t fold_once = PTHREAD_ONCE_INIT;

/* Polynomials mod P in normal form (bit d = coefficient of x^d), P without its x^32 term. */
static uint32_t poly_normal(void)
{
    uint32_t r = 0;
    for (int b = 0; b < 32; b++)
        if (CRC32C_POLY_REFLECTED & (1u << b))
            r |= 1u << (31 - b);
    return r;
}

static uint32_t poly_mulmod(uint32_t a, uint32_t b, uint32_t pn)
{
    uint32_t r = 0;
    for (int i = 31; i >= 0; i--) { /* Horner over the bits of b, highest first */
        r = (r << 1) ^ ((r & 0x80000000u) ? pn : 0u);
        if (b & (1u << i))
            r ^= a;
    }
    return r;
}

/* x^n mod P by square-and-multiply. */
static uint32_t poly_xpow(unsigned n, uint32_t pn)
{
    uint32_t r = 1, sq = 2; /* 1 and x */
    for (; n; n >>= 1) {
        if (n & 1u)
            r = poly_mulmod(r, sq, pn);
        sq = poly_mulmod(sq, sq, pn);
    }
    return r;
}

/* Normal form -> 64-bit lane form (bit i = coefficient of x^(63-i)). */
static uint64_t poly_to_lane(uint32_t v)
{
    uint64_t lane = 0;
    for (int d = 0; d < 32; d++)
        if (v & (1u << d))
            lane |= 1ull << (63 - d);
    return lane;
}

static void fold_init(void)
{
    uint32_t pn = poly_normal();
    for (unsigned k = 1; k <= FOLD_KMAX; k++) {
        fold_k[k][0] = poly_to_lane(poly_xpow(128 * k + 63, pn));
        fold_k[k][1] = poly_to_lane(poly_xpow(128 * k - 1, pn));
    }
    for (unsigned l = 0; l < 3; l++) {
        fold_lanes[2 * l] = fold_k[3 - l][0];
        fold_lanes[2 * l + 1] = fold_k[3 - l][1];
    }
    fold_lanes[6] = fold_lanes[7] = 0;
}

int sndk_crc32c_fold_constant(unsigned k, uint64_t lanes[2])
{
    if (k < 1 || k > FOLD_KMAX)
        return -EINVAL;
    pthread_once(&fold_once, fold_init);
    lanes[0] = fold_k[k][0];
    lanes[1] = fold_k[k][1];
    return 0;
}

#if SNDK_HAVE_X86
/* Below this the single crc32 chain is as fast as setting up the folds (measured: folding wins
 * from 128 bytes, loses at 64, for every width). The kernels themselves need at least 64 (512-bit),
 * 32 (256-bit) and 16 (128-bit) bytes. */
#define CLMUL_MIN 128u

/* Three widths of the same folding, per-function target attributes (no global -m flags), each
 * entered only when the CPU (and the OS, for the wide registers) can run it:
 *   512-bit: SSE4.2, PCLMULQDQ, AVX512F/VL, VPCLMULQDQ, OS saves ZMM state (Ice Lake, Zen 4 on);
 *   256-bit: SSE4.2, PCLMULQDQ, AVX, AVX2, VPCLMULQDQ, OS saves YMM state (also Alder Lake and
 *            other AVX2-only CPUs with VPCLMULQDQ, Zen 3);
 *   128-bit: SSE4.2 and PCLMULQDQ (every x86-64 CPU since Westmere / Bulldozer).
 * PCLMULQDQ issues about once per cycle on Intel since Broadwell, once per 2 on some AMD cores
 * (Zen 5: 128-bit folding ran at ~15 GB/s there, under the three crc32 streams' ~33), so which
 * one is fastest is measured at start-up (sndk_crc32c_select, AUTO) rather than assumed. */
#define TARGET_PCLMUL __attribute__((target("sse4.2,pclmul")))
#define TARGET_V256   __attribute__((target("sse4.2,pclmul,avx,avx2,vpclmulqdq")))
#define TARGET_VCLMUL __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))

/* What the CPU and the OS allow, found once by kernel_detect. */
static bool have_sse42, have_pclmul, have_v256, have_v512;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

/* cpuid/xgetbv by hand (not __builtin_cpu_supports) so the OS check is explicit and nothing
 * depends on the compiler runtime's feature numbering. Intel SDM vol. 1, 13.2 and 15.2: a wide
 * register kind may be used only if the OS set XCR0's bits for its state (OSXSAVE tells that
 * XGETBV is usable): bits 1 (SSE) and 2 (AVX, the upper YMM halves) for 256-bit code, plus 5
 * (opmask), 6 (upper halves of ZMM0-15) and 7 (ZMM16-31) for AVX-512. */
static void kernel_detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    have_sse42 = (c & bit_SSE4_2) != 0;
    have_pclmul = have_sse42 && (c & bit_PCLMUL);
    if (!have_pclmul || !(c & bit_OSXSAVE) || !(c & bit_AVX))
        return;
    if (__get_cpuid_max(0, NULL) < 7)
        return;
    uint32_t xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0u));
    const uint32_t ymm_state = (1u << 1) | (1u << 2);
    const uint32_t zmm_state = ymm_state | (1u << 5) | (1u << 6) | (1u << 7);
    __cpuid_count(7, 0, a, b, c, d);
    const bool vpclmul = (c & bit_VPCLMULQDQ) != 0;
    have_v256 = vpclmul && (b & bit_AVX2) && (xlo & ymm_state) == ymm_state;
    have_v512 =
        vpclmul && (b & bit_AVX512F) && (b & bit_AVX512VL) && (xlo & zmm_state) == zmm_state;
}

/* X*x^D + Y for the constant pair k = {x^(D+63), x^(D-1)} (see above). */
TARGET_PCLMUL static inline __m128i fold16(__m128i x, __m128i k, __m128i y)
{
    return _mm_xor_si128(
        _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), y);
}

TARGET_PCLMUL static inline __m128i kpair128(unsigned k)
{
    return _mm_load_si128((const __m128i *)(const void *)fold_k[k]);
}

TARGET_PCLMUL static inline __m128i load128(const uint8_t *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* The folded block and the tail after it, from register 0. */
TARGET_PCLMUL static inline uint32_t fold_finish(__m128i x, const uint8_t *p, size_t n)
{
    const __m128i k1 = kpair128(1);
    while (n >= 16) {
        x = fold16(x, k1, load128(p));
        p += 16;
        n -= 16;
    }
    uint64_t r = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    r = _mm_crc32_u64(r, (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x)));
    if (n >= 8) {
        r = _mm_crc32_u64(r, load64(p));
        p += 8;
        n -= 8;
    }
    uint32_t c = (uint32_t)r;
    while (n-- > 0)
        c = _mm_crc32_u8(c, *p++);
    return c;
}

/* ------------------------------------------------ 128-bit PCLMULQDQ */

/* Eight 16-byte accumulators, 128 bytes per round (16 carry-less products, enough in flight to
 * cover the instruction's latency), then the eight onto the last, then 16-byte steps. */
TARGET_PCLMUL static uint32_t clmul128_update(uint32_t c, const uint8_t *p, size_t n)
{
    if (n < CLMUL_MIN)
        return hw_update(c, p, n);
    __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128((int)c));
    __m128i x1 = load128(p + 16), x2 = load128(p + 32), x3 = load128(p + 48);
    __m128i x4 = load128(p + 64), x5 = load128(p + 80), x6 = load128(p + 96);
    __m128i x7 = load128(p + 112);
    p += 128;
    n -= 128;
    const __m128i k8 = kpair128(8);
    while (n >= 128) {
        x0 = fold16(x0, k8, load128(p));
        x1 = fold16(x1, k8, load128(p + 16));
        x2 = fold16(x2, k8, load128(p + 32));
        x3 = fold16(x3, k8, load128(p + 48));
        x4 = fold16(x4, k8, load128(p + 64));
        x5 = fold16(x5, k8, load128(p + 80));
        x6 = fold16(x6, k8, load128(p + 96));
        x7 = fold16(x7, k8, load128(p + 112));
        p += 128;
        n -= 128;
    }
    /* x0..x6 are 112, 96, ..., 16 bytes before x7 */
    __m128i acc = fold16(x0, kpair128(7), x7);
    acc = fold16(x1, kpair128(6), acc);
    acc = fold16(x2, kpair128(5), acc);
    acc = fold16(x3, kpair128(4), acc);
    acc = fold16(x4, kpair128(3), acc);
    acc = fold16(x5, kpair128(2), acc);
    acc = fold16(x6, kpair128(1), acc);
    return fold_finish(acc, p, n);
}

/* ------------------------------------------------ 256-bit VPCLMULQDQ (AVX2) */

TARGET_V256 static inline __m256i fold32(__m256i x, __m256i k, __m256i y)
{
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00),
                                             _mm256_clmulepi64_epi128(x, k, 0x11)),
                            y);
}

TARGET_V256 static inline __m256i kpair256(unsigned k)
{
    return _mm256_broadcastsi128_si256(kpair128(k));
}

TARGET_V256 static inline __m256i load256(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* Four 32-byte accumulators (two 16-byte lanes each), 128 bytes per round, then the four onto the
 * last, 32-byte steps, the low lane onto the high one (16 bytes on) and 16-byte steps. */
TARGET_V256 static uint32_t clmul256_update(uint32_t c, const uint8_t *p, size_t n)
{
    if (n < CLMUL_MIN)
        return hw_update(c, p, n);
    __m256i z0 = _mm256_xor_si256(load256(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)c)));
    __m256i z1 = load256(p + 32), z2 = load256(p + 64), z3 = load256(p + 96);
    p += 128;
    n -= 128;
    const __m256i k8 = kpair256(8);
    while (n >= 128) {
        z0 = fold32(z0, k8, load256(p));
        z1 = fold32(z1, k8, load256(p + 32));
        z2 = fold32(z2, k8, load256(p + 64));
        z3 = fold32(z3, k8, load256(p + 96));
        p += 128;
        n -= 128;
    }
    /* z0, z1, z2 are 96, 64, 32 bytes before z3 */
    const __m256i k2 = kpair256(2);
    __m256i acc = fold32(z0, kpair256(6), z3);
    acc = fold32(z1, kpair256(4), acc);
    acc = fold32(z2, k2, acc);
    while (n >= 32) {
        acc = fold32(acc, k2, load256(p));
        p += 32;
        n -= 32;
    }
    __m128i x = fold16(_mm256_castsi256_si128(acc), kpair128(1), _mm256_extracti128_si256(acc, 1));
    return fold_finish(x, p, n);
}

/* ------------------------------------------------ 512-bit VPCLMULQDQ (AVX-512) */

TARGET_VCLMUL static inline __m512i fold64(__m512i x, __m512i k, __m512i y)
{
    /* 0x96: three-way XOR */
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

TARGET_VCLMUL static inline __m512i kpair512(unsigned k)
{
    return _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(const void *)fold_k[k]));
}

/* 512-bit registers, four 16-byte lanes each: four accumulators, 256 bytes per round, then one
 * for the rest in 64-byte steps, the lanes to one, and 16-byte steps. */
TARGET_VCLMUL static uint32_t clmul512_update(uint32_t c, const uint8_t *p, size_t n)
{
    if (n < CLMUL_MIN)
        return hw_update(c, p, n);
    const __m512i reg = _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c));
    const __m512i k4 = kpair512(4);
    __m512i acc;
    if (n >= 256) {
        __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)p), reg);
        __m512i z1 = _mm512_loadu_si512((const void *)(p + 64));
        __m512i z2 = _mm512_loadu_si512((const void *)(p + 128));
        __m512i z3 = _mm512_loadu_si512((const void *)(p + 192));
        p += 256;
        n -= 256;
        const __m512i k16 = kpair512(16);
        while (n >= 256) {
            z0 = fold64(z0, k16, _mm512_loadu_si512((const void *)p));
            z1 = fold64(z1, k16, _mm512_loadu_si512((const void *)(p + 64)));
            z2 = fold64(z2, k16, _mm512_loadu_si512((const void *)(p + 128)));
            z3 = fold64(z3, k16, _mm512_loadu_si512((const void *)(p + 192)));
            p += 256;
            n -= 256;
        }
        /* z0, z1, z2 are 192, 128, 64 bytes before z3 */
        acc = fold64(z0, kpair512(12), z3);
        acc = fold64(z1, kpair512(8), acc);
        acc = fold64(z2, k4, acc);
    } else {
        acc = _mm512_xor_si512(_mm512_loadu_si512((const void *)p), reg);
        p += 64;
        n -= 64;
    }
    while (n >= 64) {
        acc = fold64(acc, k4, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }
    /* The four lanes to one: lanes 0..2 folded onto lane 3 (whose constants are zero, so its
     * product is zero and it is put back as it is), then the lanes XORed together. */
    const __m512i kl = _mm512_load_si512((const void *)fold_lanes);
    __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(acc, kl, 0x00),
                                 _mm512_clmulepi64_epi128(acc, kl, 0x11));
    t = _mm512_mask_xor_epi64(t, 0xc0, t, acc);
    __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    __m128i x = _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return fold_finish(x, p, n);
}

/* ------------------------------------------------ folding beside three crc32 streams */

/* The folding kernels keep the carry-less multiplier busy and leave the crc32 instruction, which
 * issues on another unit, idle; the three-stream kernel does the opposite. A hybrid kernel runs
 * both at once on different bytes: the buffer is cut into blocks of HYBRID_ROUNDS rounds, each
 * block a run of bytes for the folding (its width's accumulators, one fold each per round)
 * followed by three runs of equal length for three crc32 streams (HYBRID_WORDS* 8-byte words
 * each per round). One loop interleaves the two, so the core issues both kinds together.
 *
 * Why the parts add up: the CRC register is linear in the data, so the CRC of the buffer from
 * register c is the XOR of the CRC (from c) of the buffer with the stream runs zeroed and the CRC
 * (from 0) of the buffer with the fold runs zeroed.
 * - The folds skip the stream runs: at a block's first round the accumulators move forward over
 *   one round's bytes and the three runs (the constant pair `jump`, same maths as fold_k), so
 *   they carry the CRC of the fold runs with zeros between them. Their result after the last
 *   block is the CRC up to the end of its fold run, moved over its three stream runs.
 * - The streams start each block from 0; a block's streams combine as a*x^(2S) + b*x^S + d
 *   (S bytes per run), and the running value R of all blocks so far as R*x^(block) + that, since
 *   the zeroed fold runs add nothing to a CRC from 0.
 * Moving a 32-bit CRC register r over n zero bytes (n >= 16) is one product: r placed in the first
 * 4 bytes of a 16-byte block (the same as starting from r), the block folded forward by n - 16
 * bytes onto the last 16 (only its low lane is non-zero: one PCLMULQDQ by x^(8(n-16)+63) mod P),
 * and the CRC of those 16 bytes from 0 (two crc32 instructions). The bytes after the last whole
 * block go to the width's folding kernel.
 *
 * The words per round balance the two units: a round folds 128 bytes with 8 carry-less products
 * (four 256-bit or eight 128-bit ones, two products each), a stream word is one crc32 (latency
 * 3, one per cycle). How fast the multiplier is differs by core: on Zen 5 the 256-bit folding
 * runs at half the 512-bit one's rate and the 128-bit one at half the crc32 streams'. Measured
 * there (bench/wire_bench, 64 KiB): 256-bit folding 26-28 GB/s alone, 40-42 beside 4 words per
 * stream per round. In a first trial of the same loop outside the library, 3 words left the
 * crc32 unit idle (41 against 44-46 with 4), and 5-6 were a little faster there (48-52) but
 * would make the streams the longer chain on a core whose multiplier is twice as fast. The start-up
 * choice measures the hybrids beside the plain kernels, so a CPU where one is slower keeps the
 * other.
 *
 * No 512-bit hybrid: one beside the AVX-512 folding measured 62-71 GB/s alone against 54-56 on
 * Zen 5, yet made `ndkperf send_bw -e -s 1048576` slower there, in 7 of 8 interleaved rounds
 * (docs/datapath.md, "CRC32c kernels"): at that rate the CRC is most likely bound by where the
 * bytes come from, and three more streams of loads do not help. */
#define HYBRID_ROUNDS   8u
#define HYBRID_WORDS256 4u
#define HYBRID_WORDS128 6u

/* Bytes of one stream run, and of a whole block, for a width's fold bytes per round and words per
 * stream per round: compile-time constants, so the loops address with immediates. */
#define HYBRID_RUN(words) ((size_t)HYBRID_ROUNDS * (words)*8u)
#define HYBRID_BLOCK(fold_round, words)                                                            \
    ((size_t)HYBRID_ROUNDS * (fold_round) + 3u * HYBRID_RUN(words))

/* A width's constants (built once, by hybrid_init). */
struct hybrid_shape {
    _Alignas(16) uint64_t jump[2]; /* fold pair over one round's fold bytes and the three runs */
    uint64_t over_run;             /* x^(8(n-16)+63) mod P lanes to move a register over n = run, */
    uint64_t over_two_runs;        /* 2 * run, */
    uint64_t over_three_runs;      /* 3 * run */
    uint64_t over_block;           /* and block bytes */
};
static _Alignas(64) struct hybrid_shape hybrid256_shape, hybrid128_shape;

static uint64_t move_lane(size_t n, uint32_t pn)
{
    return poly_to_lane(poly_xpow((unsigned)(8 * (n - 16) + 63), pn));
}

static void hybrid_shape_init(struct hybrid_shape *h, size_t fold_round, unsigned words)
{
    uint32_t pn = poly_normal();
    const size_t run = HYBRID_RUN(words);
    unsigned d = (unsigned)(8 * (fold_round + 3 * run)); /* bits the accumulators move */
    h->jump[0] = poly_to_lane(poly_xpow(d + 63, pn));
    h->jump[1] = poly_to_lane(poly_xpow(d - 1, pn));
    h->over_run = move_lane(run, pn);
    h->over_two_runs = move_lane(2 * run, pn);
    h->over_three_runs = move_lane(3 * run, pn);
    h->over_block = move_lane(HYBRID_BLOCK(fold_round, words), pn);
}

static void hybrid_init(void)
{
    hybrid_shape_init(&hybrid256_shape, 128, HYBRID_WORDS256);
    hybrid_shape_init(&hybrid128_shape, 128, HYBRID_WORDS128);
}

/* The register r moved over the zero bytes the lane constant k stands for (see above). */
TARGET_PCLMUL static inline uint32_t move_register(uint32_t r, uint64_t k)
{
    __m128i x =
        _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)r), _mm_cvtsi64_si128((long long)k), 0x00);
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x)));
}

/* One round's words of the three streams of a block whose runs start at runs (words and run are
 * constants where it is inlined, so the loop unrolls). */
TARGET_PCLMUL static inline void hybrid_stream_round(uint64_t s[3], const uint8_t *runs, size_t run,
                                                     unsigned words, unsigned round)
{
    const uint8_t *q = runs + (size_t)round * words * 8u;
    for (unsigned w = 0; w < words; w++) {
        s[0] = _mm_crc32_u64(s[0], load64(q + 8u * w));
        s[1] = _mm_crc32_u64(s[1], load64(q + run + 8u * w));
        s[2] = _mm_crc32_u64(s[2], load64(q + 2u * run + 8u * w));
    }
}

/* The running stream value after one more block whose streams ended at s. */
TARGET_PCLMUL static inline uint32_t hybrid_block_done(const struct hybrid_shape *h, uint32_t r,
                                                       const uint64_t s[3])
{
    return move_register(r, h->over_block) ^ move_register((uint32_t)s[0], h->over_two_runs) ^
           move_register((uint32_t)s[1], h->over_run) ^ (uint32_t)s[2];
}

/* The register after every whole block: the folds' 16-byte result (the last fold run's end),
 * moved over the last three runs, and the streams' value. */
TARGET_PCLMUL static inline uint32_t hybrid_finish(const struct hybrid_shape *h, __m128i x,
                                                   uint32_t streams)
{
    return move_register(fold_finish(x, NULL, 0), h->over_three_runs) ^ streams;
}

TARGET_V256 static uint32_t hybrid256_update(uint32_t c, const uint8_t *p, size_t n)
{
    const struct hybrid_shape *h = &hybrid256_shape;
    const size_t run = HYBRID_RUN(HYBRID_WORDS256), block = HYBRID_BLOCK(128, HYBRID_WORDS256);
    if (n < block)
        return clmul256_update(c, p, n);
    const size_t blocks = n / block;
    const uint8_t *f = p;
    __m256i z0 = _mm256_xor_si256(load256(f), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)c)));
    __m256i z1 = load256(f + 32), z2 = load256(f + 64), z3 = load256(f + 96);
    f += 128;
    const __m256i k8 = kpair256(8);
    const __m256i kjump =
        _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(const void *)h->jump));
    uint32_t streams = 0;
    for (size_t b = 0; b < blocks; b++) {
        const uint8_t *runs = p + b * block + (size_t)HYBRID_ROUNDS * 128;
        uint64_t s[3] = {0, 0, 0};
        for (unsigned r = 0; r < HYBRID_ROUNDS; r++) {
            if (b || r) {
                const __m256i k = r ? k8 : kjump;
                z0 = fold32(z0, k, load256(f));
                z1 = fold32(z1, k, load256(f + 32));
                z2 = fold32(z2, k, load256(f + 64));
                z3 = fold32(z3, k, load256(f + 96));
                f += 128;
            }
            hybrid_stream_round(s, runs, run, HYBRID_WORDS256, r);
        }
        f += 3 * run;
        streams = hybrid_block_done(h, streams, s);
    }
    /* z0, z1, z2 are 96, 64, 32 bytes before z3 */
    __m256i acc = fold32(z0, kpair256(6), z3);
    acc = fold32(z1, kpair256(4), acc);
    acc = fold32(z2, kpair256(2), acc);
    __m128i x = fold16(_mm256_castsi256_si128(acc), kpair128(1), _mm256_extracti128_si256(acc, 1));
    const size_t done = blocks * block;
    return clmul256_update(hybrid_finish(h, x, streams), p + done, n - done);
}

TARGET_PCLMUL static uint32_t hybrid128_update(uint32_t c, const uint8_t *p, size_t n)
{
    const struct hybrid_shape *h = &hybrid128_shape;
    const size_t run = HYBRID_RUN(HYBRID_WORDS128), block = HYBRID_BLOCK(128, HYBRID_WORDS128);
    if (n < block)
        return clmul128_update(c, p, n);
    const size_t blocks = n / block;
    const uint8_t *f = p;
    __m128i x[8];
    x[0] = _mm_xor_si128(load128(f), _mm_cvtsi32_si128((int)c));
    for (int i = 1; i < 8; i++)
        x[i] = load128(f + 16 * i);
    f += 128;
    const __m128i k8 = kpair128(8);
    const __m128i kjump = _mm_load_si128((const __m128i *)(const void *)h->jump);
    uint32_t streams = 0;
    for (size_t b = 0; b < blocks; b++) {
        const uint8_t *runs = p + b * block + (size_t)HYBRID_ROUNDS * 128;
        uint64_t s[3] = {0, 0, 0};
        for (unsigned r = 0; r < HYBRID_ROUNDS; r++) {
            if (b || r) {
                const __m128i k = r ? k8 : kjump;
                for (int i = 0; i < 8; i++)
                    x[i] = fold16(x[i], k, load128(f + 16 * i));
                f += 128;
            }
            hybrid_stream_round(s, runs, run, HYBRID_WORDS128, r);
        }
        f += 3 * run;
        streams = hybrid_block_done(h, streams, s);
    }
    /* x[i] is 16 * (7 - i) bytes before x[7] */
    __m128i acc = x[7];
    for (int i = 0; i < 7; i++)
        acc = fold16(x[i], kpair128(7 - (unsigned)i), acc);
    const size_t done = blocks * block;
    return clmul128_update(hybrid_finish(h, acc, streams), p + done, n - done);
}

static pthread_once_t clmul_once = PTHREAD_ONCE_INIT;

static void clmul_init(void)
{
    pthread_once(&fold_once, fold_init);
    pthread_once(&hw_once, hw_init); /* short inputs go to hw_update */
    hybrid_init();
}

int sndk_crc32c_clmul_available(void)
{
    pthread_once(&detect_once, kernel_detect);
    return have_v512 ? 1 : 0;
}

int sndk_crc32c_clmul256_available(void)
{
    pthread_once(&detect_once, kernel_detect);
    return have_v256 ? 1 : 0;
}

int sndk_crc32c_clmul128_available(void)
{
    pthread_once(&detect_once, kernel_detect);
    return have_pclmul ? 1 : 0;
}

/* A folding kernel's raw update behind the public contract: its constants built once, the
 * register inverted on the way in and out (the compiler inlines the constant fn). */
static inline uint32_t clmul_entry(crc_update_fn fn, uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&clmul_once, clmul_init);
    return ~fn(~crc, buf, len);
}

uint32_t sndk_crc32c_clmul(uint32_t crc, const void *buf, size_t len)
{
    return clmul_entry(clmul512_update, crc, buf, len);
}

uint32_t sndk_crc32c_clmul256(uint32_t crc, const void *buf, size_t len)
{
    return clmul_entry(clmul256_update, crc, buf, len);
}

uint32_t sndk_crc32c_clmul128(uint32_t crc, const void *buf, size_t len)
{
    return clmul_entry(clmul128_update, crc, buf, len);
}

uint32_t sndk_crc32c_hybrid256(uint32_t crc, const void *buf, size_t len)
{
    return clmul_entry(hybrid256_update, crc, buf, len);
}

uint32_t sndk_crc32c_hybrid128(uint32_t crc, const void *buf, size_t len)
{
    return clmul_entry(hybrid128_update, crc, buf, len);
}
#else
int sndk_crc32c_clmul_available(void)
{
    return 0;
}

int sndk_crc32c_clmul256_available(void)
{
    return 0;
}

int sndk_crc32c_clmul128_available(void)
{
    return 0;
}

uint32_t sndk_crc32c_clmul(uint32_t crc, const void *buf, size_t len)
{
    return sndk_crc32c_sw(crc, buf, len);
}

uint32_t sndk_crc32c_clmul256(uint32_t crc, const void *buf, size_t len)
{
    return sndk_crc32c_sw(crc, buf, len);
}

uint32_t sndk_crc32c_clmul128(uint32_t crc, const void *buf, size_t len)
{
    return sndk_crc32c_sw(crc, buf, len);
}

uint32_t sndk_crc32c_hybrid256(uint32_t crc, const void *buf, size_t len)
{
    return sndk_crc32c_sw(crc, buf, len);
}

uint32_t sndk_crc32c_hybrid128(uint32_t crc, const void *buf, size_t len)
{
    return sndk_crc32c_sw(crc, buf, len);
}
#endif

/* ---------------------------------------------------------------- dispatch */

static const char *const impl_names[] = {
    [SNDK_CRC32C_AUTO] = "auto",
    [SNDK_CRC32C_HW] = "sse42",
    [SNDK_CRC32C_SW] = "table",
    [SNDK_CRC32C_CLMUL] = "avx512",
    [SNDK_CRC32C_CLMUL256] = "vpclmul256",
    [SNDK_CRC32C_CLMUL128] = "pclmul",
    [SNDK_CRC32C_HYBRID256] = "hybrid256",
    [SNDK_CRC32C_HYBRID128] = "hybrid128",
};
#define IMPL_COUNT (sizeof impl_names / sizeof impl_names[0])
_Static_assert(IMPL_COUNT == SNDK_CRC32C_IMPL_COUNT, "a name for every implementation");

const char *sndk_crc32c_impl_name(enum sndk_crc32c_impl impl)
{
    return (unsigned)impl < IMPL_COUNT ? impl_names[impl] : NULL;
}

int sndk_crc32c_impl_parse(const char *name)
{
    for (unsigned i = 0; name && i < IMPL_COUNT; i++)
        if (strcasecmp(name, impl_names[i]) == 0)
            return (int)i;
    return -EINVAL;
}

int sndk_crc32c_available(enum sndk_crc32c_impl impl)
{
    switch (impl) {
    case SNDK_CRC32C_AUTO:
    case SNDK_CRC32C_SW:
        return 1;
    case SNDK_CRC32C_HW:
        return sndk_crc32c_hw_available();
    case SNDK_CRC32C_CLMUL:
        return sndk_crc32c_clmul_available();
    case SNDK_CRC32C_CLMUL256:
    case SNDK_CRC32C_HYBRID256: /* the same instructions, and the crc32 one all of them need */
        return sndk_crc32c_clmul256_available();
    case SNDK_CRC32C_CLMUL128:
    case SNDK_CRC32C_HYBRID128:
        return sndk_crc32c_clmul128_available();
    }
    return 0;
}

sndk_crc32c_fn sndk_crc32c_kernel(enum sndk_crc32c_impl impl)
{
    if (impl == SNDK_CRC32C_AUTO || !sndk_crc32c_available(impl))
        return NULL;
    switch (impl) {
    case SNDK_CRC32C_HW:
        return sndk_crc32c_hw;
    case SNDK_CRC32C_CLMUL:
        return sndk_crc32c_clmul;
    case SNDK_CRC32C_CLMUL256:
        return sndk_crc32c_clmul256;
    case SNDK_CRC32C_CLMUL128:
        return sndk_crc32c_clmul128;
    case SNDK_CRC32C_HYBRID256:
        return sndk_crc32c_hybrid256;
    case SNDK_CRC32C_HYBRID128:
        return sndk_crc32c_hybrid128;
    default:
        return sndk_crc32c_sw;
    }
}

/* The raw update of a kernel the CPU can run, its tables built. */
static crc_update_fn update_of(enum sndk_crc32c_impl impl)
{
#if SNDK_HAVE_X86
    switch (impl) {
    case SNDK_CRC32C_CLMUL:
        pthread_once(&clmul_once, clmul_init);
        return clmul512_update;
    case SNDK_CRC32C_CLMUL256:
        pthread_once(&clmul_once, clmul_init);
        return clmul256_update;
    case SNDK_CRC32C_CLMUL128:
        pthread_once(&clmul_once, clmul_init);
        return clmul128_update;
    case SNDK_CRC32C_HYBRID256:
        pthread_once(&clmul_once, clmul_init);
        return hybrid256_update;
    case SNDK_CRC32C_HYBRID128:
        pthread_once(&clmul_once, clmul_init);
        return hybrid128_update;
    case SNDK_CRC32C_HW:
        pthread_once(&hw_once, hw_init);
        return hw_update;
    default:
        break;
    }
#else
    (void)impl;
#endif
    pthread_once(&sw_once, sw_init);
    return sw_update;
}

/* ------------------------------------------------ the start-up choice (AUTO) */

/* Every kernel the CPU has, besides the table, is a candidate; with more than one, each computes
 * the CRC of the same cache-hot 4 KiB buffer CHOICE_REPS times per trial, and each keeps its
 * shortest trial (the least disturbed by other work on the core). One run measured the AVX-512
 * kernel at 17.5 GB/s against its usual 80 in all three of its trials, back to back within a
 * microsecond, and chose a narrower kernel: a disturbance that long (a descheduled vCPU, or a
 * core powering its wide units up after a quiet spell, which takes tens of microseconds) must
 * not decide. So the candidates first run in turn for CHOICE_WARM_NS, then take one trial each,
 * in turn, CHOICE_ROUNDS times (the first of each round rotating): every candidate samples the
 * same stretch of time (1.3-1.6 ms in all on a Zen 3 VM, shift tables included). What is left
 * is a core whose speed differs by kernel: on a Zen 3 VM one vCPU measured, in half of the
 * process starts, the hybrids at 80 % of their usual rate and the others at 95 % (hybrid256
 * 23.4-24.8 GB/s against vpclmul256 24.1-24.4, against 29.7 and 25.6 on its other vCPU and at
 * other times: a busy sibling thread of the host's core, most likely, which the hybrid, using
 * two units, feels most). Taking the faster there took the 256-bit folding for the whole
 * process in 12 of 40 starts, 16 % slower than the hybrid everywhere else. So figures within
 * CHOICE_TIE_PCT of the fastest count as a tie, and a tie goes to the candidate later in the
 * order below (the one using more of the core: where it is not slower it is the one that gains
 * when the core is not shared); docs/decisions.md.
 * SOFTNDK_CRC_KERNEL=<name> skips the measurement. */
#define CHOICE_LEN     4096u
#define CHOICE_REPS    4
#define CHOICE_ROUNDS  32
#define CHOICE_WARM_NS 1000000u
#define CHOICE_TIE_PCT 5u

static enum sndk_crc32c_impl auto_impl = SNDK_CRC32C_SW;
static int env_status; /* 0, or why SOFTNDK_CRC_KERNEL was not followed */
static char auto_reason[320];
static pthread_once_t auto_once = PTHREAD_ONCE_INIT;

/* One trial: CHOICE_REPS calls, in ns (at least 1). */
static uint64_t trial_ns(crc_update_fn fn, const uint8_t *buf, volatile uint32_t *c)
{
    uint64_t t0 = sndk_clock_ns(CLOCK_MONOTONIC);
    for (int r = 0; r < CHOICE_REPS; r++)
        *c = fn(*c, buf, CHOICE_LEN);
    uint64_t dt = sndk_clock_ns(CLOCK_MONOTONIC) - t0;
    return dt ? dt : 1;
}

unsigned sndk_crc32c_choice_rule(const uint64_t best_ns[], unsigned n, unsigned *fastest_out)
{
    unsigned fastest = n;
    for (unsigned i = 0; i < n; i++)
        if (best_ns[i] != UINT64_MAX && (fastest == n || best_ns[i] < best_ns[fastest]))
            fastest = i;
    if (fastest_out)
        *fastest_out = fastest;
    if (fastest == n)
        return n;
    /* within CHOICE_TIE_PCT of the fastest's rate: ns <= fastest's ns * 100 / (100 - tie) */
    unsigned pick = fastest;
    for (unsigned i = fastest + 1; i < n; i++)
        if (best_ns[i] != UINT64_MAX &&
            best_ns[i] * (100u - CHOICE_TIE_PCT) <= best_ns[fastest] * 100u)
            pick = i;
    return pick;
}

static void auto_choose(void)
{
    const char *env = getenv("SOFTNDK_CRC_KERNEL");
    if (env && *env && strcmp(env, "auto") != 0) {
        int impl = sndk_crc32c_impl_parse(env);
        if (impl < 0) {
            env_status = -EINVAL;
        } else if (!sndk_crc32c_available((enum sndk_crc32c_impl)impl)) {
            env_status = -ENOTSUP;
        } else {
            auto_impl = (enum sndk_crc32c_impl)impl;
            snprintf(auto_reason, sizeof auto_reason, "forced by SOFTNDK_CRC_KERNEL");
            return;
        }
    }
    /* the order of sndk_crc32c_choice_rule: a tie goes to the later */
    static const enum sndk_crc32c_impl order[] = {SNDK_CRC32C_HW,        SNDK_CRC32C_CLMUL128,
                                                  SNDK_CRC32C_HYBRID128, SNDK_CRC32C_CLMUL256,
                                                  SNDK_CRC32C_HYBRID256, SNDK_CRC32C_CLMUL};
    static _Alignas(64) uint8_t buf[CHOICE_LEN];
    for (unsigned i = 0; i < CHOICE_LEN; i++)
        buf[i] = (uint8_t)(i * 131u + 7u);
    enum { NORDER = sizeof order / sizeof order[0] };
    crc_update_fn fns[NORDER] = {NULL};
    unsigned cand[NORDER], ncand = 0;
    uint64_t min_ns[NORDER];
    for (unsigned i = 0; i < NORDER; i++) {
        min_ns[i] = UINT64_MAX;
        if (sndk_crc32c_available(order[i])) {
            fns[i] = update_of(order[i]);
            cand[ncand++] = i;
        }
    }
    volatile uint32_t c = 0;
    if (ncand > 1) {
        uint64_t warm_end = sndk_clock_ns(CLOCK_MONOTONIC) + CHOICE_WARM_NS;
        while (sndk_clock_ns(CLOCK_MONOTONIC) < warm_end)
            for (unsigned j = 0; j < ncand; j++)
                (void)trial_ns(fns[cand[j]], buf, &c);
        for (unsigned round = 0; round < CHOICE_ROUNDS; round++)
            for (unsigned j = 0; j < ncand; j++) {
                unsigned i = cand[(j + round) % ncand];
                uint64_t ns = trial_ns(fns[i], buf, &c);
                if (ns < min_ns[i])
                    min_ns[i] = ns;
            }
    }
    char figures[224] = ""; /* six candidates: ~100 characters */
    char tie[96] = "";
    if (ncand == 1) {
        auto_impl = order[cand[0]];
    } else if (ncand > 1) {
        size_t used = 0;
        for (unsigned j = 0; j < ncand && used < sizeof figures; j++) {
            unsigned i = cand[j];
            int w = snprintf(figures + used, sizeof figures - used, "%s%s %.1f", used ? ", " : "",
                             impl_names[order[i]],
                             (double)CHOICE_LEN * CHOICE_REPS / (double)min_ns[i]);
            used += w > 0 ? (size_t)w : 0;
        }
        unsigned fastest;
        unsigned pick = sndk_crc32c_choice_rule(min_ns, NORDER, &fastest);
        auto_impl = order[pick];
        if (fastest != pick)
            snprintf(tie, sizeof tie, "; %s within %u %% of %s, a tie: the later taken",
                     impl_names[order[pick]], CHOICE_TIE_PCT, impl_names[order[fastest]]);
    }
    const char *why = env_status == -EINVAL ? "; SOFTNDK_CRC_KERNEL names no kernel"
                      : env_status == -ENOTSUP
                          ? "; SOFTNDK_CRC_KERNEL's kernel needs what this CPU lacks"
                          : "";
    if (ncand == 0)
        snprintf(auto_reason, sizeof auto_reason, "the only kernel this CPU can run%s", why);
    else if (ncand == 1)
        snprintf(auto_reason, sizeof auto_reason, "the only hardware kernel this CPU has%s", why);
    else
        snprintf(auto_reason, sizeof auto_reason, "fastest measured at 4 KiB, GB/s: %s%s%s",
                 figures, tie, why);
}

static enum sndk_crc32c_impl auto_choice(void)
{
    pthread_once(&auto_once, auto_choose);
    return auto_impl;
}

const char *sndk_crc32c_reason(void)
{
    pthread_once(&auto_once, auto_choose);
    return auto_reason;
}

int sndk_crc32c_env_status(void)
{
    pthread_once(&auto_once, auto_choose);
    return env_status;
}

/* ------------------------------------------------ the active kernel */

static uint32_t resolve_update(uint32_t c, const uint8_t *p, size_t n);
/* Starts at the resolver; the first call replaces it by the chosen kernel (tables built first,
 * then the pointer published with release order, so a reader that sees a kernel sees its tables).
 */
static _Atomic(crc_update_fn) active_update = resolve_update;
/* Which kernel active_update is (a relaxed companion, only read by sndk_crc32c_current). */
static _Atomic(int) active_impl = SNDK_CRC32C_AUTO;

static crc_update_fn prepare(enum sndk_crc32c_impl impl)
{
    if (impl == SNDK_CRC32C_AUTO)
        impl = auto_choice();
    atomic_store_explicit(&active_impl, (int)impl, memory_order_relaxed);
    return update_of(impl);
}

static uint32_t resolve_update(uint32_t c, const uint8_t *p, size_t n)
{
    crc_update_fn fn = prepare(SNDK_CRC32C_AUTO);
    atomic_store_explicit(&active_update, fn, memory_order_release);
    return fn(c, p, n);
}

int sndk_crc32c_select(enum sndk_crc32c_impl impl)
{
    if ((unsigned)impl >= IMPL_COUNT)
        return -EINVAL;
    if (!sndk_crc32c_available(impl))
        return -ENOTSUP;
    atomic_store_explicit(&active_update, prepare(impl), memory_order_release);
    return 0;
}

enum sndk_crc32c_impl sndk_crc32c_current(void)
{
    crc_update_fn fn = atomic_load_explicit(&active_update, memory_order_acquire);
    if (fn == resolve_update)
        return auto_choice();
    return (enum sndk_crc32c_impl)atomic_load_explicit(&active_impl, memory_order_relaxed);
}

uint32_t sndk_crc32c(uint32_t crc, const void *buf, size_t len)
{
    crc_update_fn fn = atomic_load_explicit(&active_update, memory_order_acquire);
    return ~fn(~crc, buf, len);
}

uint32_t sndk_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt)
{
    crc_update_fn fn = atomic_load_explicit(&active_update, memory_order_acquire);
    uint32_t c = ~crc;
    for (int i = 0; i < iovcnt; i++)
        c = fn(c, iov[i].iov_base, iov[i].iov_len);
    return ~c;
}
