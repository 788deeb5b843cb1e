/* CRC32c (CRC-32/ISCSI, Castagnoli) for the MPA trailer.
 *
 * One entry point, zlib style: sndk_crc32c(0, buf, len) is the CRC of buf, and
 * sndk_crc32c(sndk_crc32c(0, a, la), b, lb) is the CRC of a||b, so a CRC can be carried across
 * pieces (header, payload iovecs, pad) as they are sent or as they land. The value goes on the
 * wire least-significant byte first: sndk_put_le32(trailer, crc).
 *
 * What computes it is picked once, at run time, from what the CPU has (cpuid, and xgetbv for the
 * OS side of AVX-512): carry-less multiply folding on 512-bit registers when it has SSE4.2,
 * PCLMULQDQ, AVX512F/VL and VPCLMULQDQ and the OS saves the ZMM state (inputs under 128 bytes
 * still take the crc32 instruction), else the SSE4.2 crc32 instruction in three streams, else a
 * slicing-by-8 table. All give identical results. */
#ifndef SOFTNDK_IWARP_CRC32C_H
#define SOFTNDK_IWARP_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

uint32_t sndk_crc32c(uint32_t crc, const void *buf, size_t len);

/* CRC over iovec pieces in order, continuing from crc. */
uint32_t sndk_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt);

/* --- internal: implementation selection, for tests and the benchmark --- */
enum sndk_crc32c_impl {
    SNDK_CRC32C_AUTO = 0,  /* the best one present: CLMUL, else HW, else SW */
    SNDK_CRC32C_HW = 1,    /* SSE4.2 crc32 instruction, three streams */
    SNDK_CRC32C_SW = 2,    /* portable slicing-by-8 */
    SNDK_CRC32C_CLMUL = 3, /* AVX-512 VPCLMULQDQ folding (+ SSE4.2 crc32 for short inputs) */
};
/* Select what sndk_crc32c uses from now on (process-wide). -ENOTSUP if HW or CLMUL is asked for
 * on a CPU without it. Not meant to be flipped while other threads compute CRCs. */
int sndk_crc32c_select(enum sndk_crc32c_impl impl);
/* What sndk_crc32c uses now (CLMUL, HW or SW, never AUTO). */
enum sndk_crc32c_impl sndk_crc32c_current(void);
/* Direct entry points, same contract as sndk_crc32c; the HW one must only be called when
 * sndk_crc32c_hw_available(), the CLMUL one only when sndk_crc32c_clmul_available(). */
int sndk_crc32c_hw_available(void);
uint32_t sndk_crc32c_hw(uint32_t crc, const void *buf, size_t len);
uint32_t sndk_crc32c_sw(uint32_t crc, const void *buf, size_t len);
int sndk_crc32c_clmul_available(void);
uint32_t sndk_crc32c_clmul(uint32_t crc, const void *buf, size_t len);
/* The folding constants, for tests: for k = 1..16 (a fold over 16*k bytes, D = 128*k bits),
 * lanes[0] = x^(D+63) mod P and lanes[1] = x^(D-1) mod P, as 64-bit lanes with bit i = the
 * coefficient of x^(63-i) (the reflected form PCLMULQDQ multiplies). -EINVAL for other k. */
int sndk_crc32c_fold_constant(unsigned k, uint64_t lanes[2]);

#endif
