/* CRC32c: SSE4.2 three-stream kernel with a table fallback, behind one function. */
#include "iwarp/crc32c.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define SNDK_HAVE_X86 1
#else
#define SNDK_HAVE_X86 0
#endif

#define CRC32C_POLY_REFLECTED 0x82f63b78u

/* Raw register update: no pre/post inversion. */
typedef uint32_t (*crc_update_fn)(uint32_t reg, const uint8_t *p, size_t n);

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v); /* unaligned-safe; host order is what crc32 wants (x86 is LE) */
    return v;
}

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

/* ---------------------------------------------------------------- dispatch */

static uint32_t resolve_update(uint32_t c, const uint8_t *p, size_t n);
/* Starts at the resolver; the first call replaces it by the chosen kernel (tables built first,
 * then the pointer published with release order, so a reader that sees a kernel sees its tables). */
static _Atomic(crc_update_fn) active_update = resolve_update;

static crc_update_fn prepare(enum sndk_crc32c_impl impl)
{
#if SNDK_HAVE_X86
    if (impl == SNDK_CRC32C_HW || (impl == SNDK_CRC32C_AUTO && sndk_crc32c_hw_available())) {
        pthread_once(&hw_once, hw_init);
        return hw_update;
    }
#endif
    pthread_once(&sw_once, sw_init);
    return sw_update;
}

static uint32_t resolve_update(uint32_t c, const uint8_t *p, size_t n)
{
    crc_update_fn fn = prepare(SNDK_CRC32C_AUTO);
    atomic_store_explicit(&active_update, fn, memory_order_release);
    return fn(c, p, n);
}

int sndk_crc32c_select(enum sndk_crc32c_impl impl)
{
    if (impl == SNDK_CRC32C_HW && !sndk_crc32c_hw_available())
        return -ENOTSUP;
    if (impl != SNDK_CRC32C_AUTO && impl != SNDK_CRC32C_HW && impl != SNDK_CRC32C_SW)
        return -EINVAL;
    atomic_store_explicit(&active_update, prepare(impl), memory_order_release);
    return 0;
}

enum sndk_crc32c_impl sndk_crc32c_current(void)
{
    crc_update_fn fn = atomic_load_explicit(&active_update, memory_order_acquire);
    if (fn == resolve_update)
        fn = prepare(SNDK_CRC32C_AUTO);
    return fn == sw_update ? SNDK_CRC32C_SW : SNDK_CRC32C_HW;
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
