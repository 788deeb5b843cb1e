/* CRC32c (CRC-32/ISCSI, Castagnoli) for the MPA trailer.
 *
 * One entry point, zlib style: sndk_crc32c(0, buf, len) is the CRC of buf, and
 * sndk_crc32c(sndk_crc32c(0, a, la), b, lb) is the CRC of a||b, so a CRC can be carried across
 * pieces (header, payload iovecs, pad) as they are sent or as they land. The value goes on the
 * wire least-significant byte first: sndk_put_le32(trailer, crc).
 *
 * The SSE4.2 crc32 instruction is used when the CPU has it (checked once at run time), a
 * slicing-by-8 table otherwise; both give identical results. */
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
    SNDK_CRC32C_AUTO = 0, /* hardware if present, else table */
    SNDK_CRC32C_HW = 1,   /* SSE4.2 */
    SNDK_CRC32C_SW = 2,   /* portable slicing-by-8 */
};
/* Select what sndk_crc32c uses from now on (process-wide). -ENOTSUP if HW is asked for on a CPU
 * without SSE4.2. Not meant to be flipped while other threads compute CRCs. */
int sndk_crc32c_select(enum sndk_crc32c_impl impl);
/* What sndk_crc32c uses now (HW or SW, never AUTO). */
enum sndk_crc32c_impl sndk_crc32c_current(void);
/* Direct entry points, same contract as sndk_crc32c; the HW one must only be called when
 * sndk_crc32c_hw_available(). */
int sndk_crc32c_hw_available(void);
uint32_t sndk_crc32c_hw(uint32_t crc, const void *buf, size_t len);
uint32_t sndk_crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif
