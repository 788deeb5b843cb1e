/* CRC32c (CRC-32/ISCSI, Castagnoli) for the MPA trailer.
 *
 * One entry point, zlib style: sndk_crc32c(0, buf, len) is the CRC of buf, and
 * sndk_crc32c(sndk_crc32c(0, a, la), b, lb) is the CRC of a||b, so a CRC can be carried across
 * pieces (header, payload iovecs, pad) as they are sent or as they land. The value goes on the
 * wire least-significant byte first: sndk_put_le32(trailer, crc).
 *
 * What computes it is picked once, at first use, from what the CPU has (cpuid, and xgetbv for the
 * OS side of the wide registers): carry-less multiply folding on 512-bit registers (AVX-512
 * VPCLMULQDQ, OS saves ZMM state), on 256-bit registers (AVX2 VPCLMULQDQ, OS saves YMM state) or
 * on 128-bit registers (PCLMULQDQ), the last two also beside three crc32 instruction streams
 * ("hybrid"), the SSE4.2 crc32 instruction in three streams alone, or a slicing-by-8 table. Every
 * folding kernel also needs SSE4.2 (inputs under 128 bytes and the last 16 go through the crc32
 * instruction). Where the CPU has more than one hardware kernel, each is timed briefly on 4 KiB and
 * the fastest taken; SOFTNDK_CRC_KERNEL=avx512|hybrid256|vpclmul256|hybrid128|pclmul|sse42|table
 * forces one. All give identical results. */
#ifndef SOFTNDK_IWARP_CRC32C_H
#define SOFTNDK_IWARP_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

uint32_t sndk_crc32c(uint32_t crc, const void *buf, size_t len);

/* CRC over iovec pieces in order, continuing from crc. */
uint32_t sndk_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt);

/* --- internal: implementation selection, for tests, the benchmark and the adapter's log --- */
enum sndk_crc32c_impl {
    SNDK_CRC32C_AUTO = 0,     /* "auto": the start-up choice (forced or measured) */
    SNDK_CRC32C_HW = 1,       /* "sse42": SSE4.2 crc32 instruction, three streams */
    SNDK_CRC32C_SW = 2,       /* "table": portable slicing-by-8 */
    SNDK_CRC32C_CLMUL = 3,    /* "avx512": AVX-512 VPCLMULQDQ folding, 512-bit registers */
    SNDK_CRC32C_CLMUL256 = 4, /* "vpclmul256": AVX2 VPCLMULQDQ folding, 256-bit registers */
    SNDK_CRC32C_CLMUL128 = 5, /* "pclmul": PCLMULQDQ folding, 128-bit registers */
    /* The 256- and 128-bit foldings, each beside three crc32 instruction streams over other
     * bytes of the buffer (the two run on different units of the core); same CPU needs. */
    SNDK_CRC32C_HYBRID256 = 6, /* "hybrid256" */
    SNDK_CRC32C_HYBRID128 = 7, /* "hybrid128" */
};
/* Not an enumerator, so that the switches over the implementations need no case for it. */
#define SNDK_CRC32C_IMPL_COUNT 8
typedef uint32_t (*sndk_crc32c_fn)(uint32_t crc, const void *buf, size_t len);

/* Select what sndk_crc32c uses from now on (process-wide). -EINVAL for no such kernel, -ENOTSUP
 * if the CPU cannot run it. AUTO is the start-up choice. Not meant to be flipped while other
 * threads compute CRCs. */
int sndk_crc32c_select(enum sndk_crc32c_impl impl);
/* What sndk_crc32c uses now (never AUTO); makes the start-up choice if it was not made yet. */
enum sndk_crc32c_impl sndk_crc32c_current(void);
/* The kernel's name as SOFTNDK_CRC_KERNEL spells it ("avx512", ...), NULL for no such kernel;
 * parse is the reverse (-EINVAL for an unknown name). */
const char *sndk_crc32c_impl_name(enum sndk_crc32c_impl impl);
int sndk_crc32c_impl_parse(const char *name);
/* 1 if this CPU (and OS) can run the kernel; AUTO and SW always. */
int sndk_crc32c_available(enum sndk_crc32c_impl impl);
/* The kernel's direct entry point (same contract as sndk_crc32c), NULL for AUTO or a kernel the
 * CPU cannot run. */
sndk_crc32c_fn sndk_crc32c_kernel(enum sndk_crc32c_impl impl);
/* Why AUTO is what it is: "forced by SOFTNDK_CRC_KERNEL", or the measured GB/s of each candidate
 * ("fastest measured at 4 KiB, GB/s: sse42 19.8, pclmul 14.0, ..."), with a note when
 * SOFTNDK_CRC_KERNEL was set but not followed. Static, valid for the process's life. */
const char *sndk_crc32c_reason(void);
/* The start-up choice's rule, given each candidate's shortest trial in ns (UINT64_MAX: not a
 * candidate), in the order slowest-expected first: the index of the fastest, or of a later one
 * within 5 % of its rate (a tie goes to the later: crc32c.c, "the start-up choice"); n when
 * there is no candidate. *fastest (when not NULL): the fastest's index, n when none. Exposed
 * for its test. */
unsigned sndk_crc32c_choice_rule(const uint64_t best_ns[], unsigned n, unsigned *fastest);
/* 0, or why SOFTNDK_CRC_KERNEL was not followed: -EINVAL (names no kernel), -ENOTSUP (the CPU
 * cannot run it). Unset, empty and "auto" are 0. */
int sndk_crc32c_env_status(void);
/* Direct entry points, same contract as sndk_crc32c; each must only be called when its
 * _available() says 1 (sndk_crc32c_kernel checks that). */
int sndk_crc32c_hw_available(void);
uint32_t sndk_crc32c_hw(uint32_t crc, const void *buf, size_t len);
uint32_t sndk_crc32c_sw(uint32_t crc, const void *buf, size_t len);
int sndk_crc32c_clmul_available(void);
uint32_t sndk_crc32c_clmul(uint32_t crc, const void *buf, size_t len);
int sndk_crc32c_clmul256_available(void);
uint32_t sndk_crc32c_clmul256(uint32_t crc, const void *buf, size_t len);
int sndk_crc32c_clmul128_available(void);
uint32_t sndk_crc32c_clmul128(uint32_t crc, const void *buf, size_t len);
uint32_t sndk_crc32c_hybrid256(uint32_t crc, const void *buf, size_t len);
uint32_t sndk_crc32c_hybrid128(uint32_t crc, const void *buf, size_t len);
/* The folding constants, for tests: for k = 1..16 (a fold over 16*k bytes, D = 128*k bits),
 * lanes[0] = x^(D+63) mod P and lanes[1] = x^(D-1) mod P, as 64-bit lanes with bit i = the
 * coefficient of x^(63-i) (the reflected form PCLMULQDQ multiplies). -EINVAL for other k. */
int sndk_crc32c_fold_constant(unsigned k, uint64_t lanes[2]);

#endif
