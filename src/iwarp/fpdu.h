/* FPDU encoders: build the iovec of one FPDU around caller memory (MPA length + DDP/RDMAP
 * header | payload iovecs | pad + CRC) without copying payload, and cut a message into DDP
 * segments of at most a configurable FPDU size. Knows no NDK object.
 *
 * Typical TX path (one message):
 *     struct sndk_tx_msg m; struct sndk_fpdu f; struct iovec iov[8];
 *     sndk_tx_send(&m, &cfg, msn, SNDK_OP_SEND, 0, sgl, nsge);
 *     while ((n = sndk_tx_msg_next(&m, &f, iov, 8)) > 0)
 *         writev(fd, iov, n);  // keep f and iov alive until all f.wire_len bytes are out
 */
#ifndef SOFTNDK_IWARP_FPDU_H
#define SOFTNDK_IWARP_FPDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "iwarp/terminate.h"
#include "iwarp/wire.h"

/* Default largest FPDU on the wire, all bytes included: the largest multiple of 4 that fits one
 * loopback TCP segment (MSS 65483). A writev of <= one MSS goes out as one segment and is ~2.5x
 * faster on loopback than 64 KiB + header (docs/wire.md#fpdu-size). The data path should
 * lower it to the connection's TCP_MAXSEG rounded down to 4 on real links. */
#define SNDK_FPDU_MAX_DEFAULT 65480u
/* Smallest accepted max_fpdu for segmented messages: 8 payload bytes behind an untagged header.
 * (Read Request and Terminate FPDUs are single and built on their own.) Tiny sizes exist for
 * tests that reproduce captured multi-segment traffic; real links use an MSS. */
#define SNDK_FPDU_MAX_MIN 32u
/* Largest: ULPDU_Length is 16 bits. */
#define SNDK_FPDU_MAX_MAX (SNDK_MPA_LEN_SIZE + SNDK_MPA_ULPDU_MAX + 3u + SNDK_MPA_CRC_SIZE)

struct sndk_tx_cfg {
    uint32_t max_fpdu; /* whole FPDU bytes; 0 = SNDK_FPDU_MAX_DEFAULT */
    bool crc;          /* compute CRC32c; else the field is sent as zero (as siw does) */
};

/* Header and trailer storage of one FPDU; the iovec built around it points here. */
struct sndk_fpdu {
    uint8_t hdr[SNDK_FPDU_HDR_MAX];
    uint8_t trailer[SNDK_FPDU_TRAILER_MAX];
    uint8_t hdr_len;      /* MPA length + DDP/RDMAP header (+ RDMAP body) */
    uint8_t trailer_len;  /* pad + CRC */
    uint32_t ulpdu_len;
    uint32_t payload_len;
    uint32_t wire_len;    /* bytes this FPDU puts on the wire */
};

/* What goes into the DDP/RDMAP header of one segment. */
struct sndk_seg_hdr {
    uint8_t opcode; /* enum sndk_rdmap_opcode; T bit follows from it */
    bool last;
    uint32_t stag;  /* tagged: data sink STag; Send with Invalidate: the Invalidate STag */
    uint64_t to;    /* tagged */
    uint32_t qn, msn, mo; /* untagged */
};

/* Build one FPDU: header (with body appended to it: a Read Request or Terminate body, or
 * nothing), the npay payload iovecs as given, pad, CRC. Fills out[] = [hdr][payload...][trailer]
 * (zero-length payload iovecs are dropped). Returns the iovec count, or -EINVAL (bad opcode, body
 * too big), -EMSGSIZE (ULPDU over 65535), -ENOSPC (max_out too small). */
int sndk_fpdu_build(struct sndk_fpdu *f, const struct sndk_seg_hdr *h, const void *body,
                    size_t body_len, const struct iovec *pay, int npay, bool crc,
                    struct iovec *out, int max_out);

/* Single-FPDU messages. */
int sndk_fpdu_read_req(struct sndk_fpdu *f, uint32_t msn, const struct sndk_read_req *rr, bool crc,
                       struct iovec *out, int max_out);
/* Terminate on QN 2 (the first one carries MSN 1). */
int sndk_fpdu_terminate(struct sndk_fpdu *f, uint32_t msn, const struct sndk_term *t, bool crc,
                        struct iovec *out, int max_out);

/* A message being cut into segments: a cursor over the caller's SGL (iovecs). The SGL memory
 * must stay valid and unchanged until the last FPDU has been written. */
struct sndk_tx_msg {
    struct sndk_seg_hdr h; /* template of the next segment (mo / to advance) */
    const struct iovec *sgl;
    int nsge;
    int sge;            /* cursor: current SGE and offset in it */
    size_t sge_off;
    uint64_t total;
    uint64_t done;      /* payload bytes already handed out */
    uint32_t max_payload;
    bool crc;
    bool finished;
};

/* Message builders: check arguments and set up the cursor; no byte is written yet.
 * Send family: opcode is SNDK_OP_SEND, _SEND_INV, _SEND_SE or _SEND_SE_INV; inv_stag is used by
 * the Invalidate ones. Return 0 or -EINVAL (bad opcode/config, message over 2^32-1 bytes for
 * untagged, TO + length wraps for tagged). */
int sndk_tx_send(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg, uint32_t msn,
                 unsigned opcode, uint32_t inv_stag, const struct iovec *sgl, int nsge);
int sndk_tx_write(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg, uint32_t stag,
                  uint64_t to, const struct iovec *sgl, int nsge);
int sndk_tx_read_resp(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg, uint32_t sink_stag,
                      uint64_t sink_to, const struct iovec *sgl, int nsge);

/* Next FPDU of the message into f/out. Returns the iovec count (>= 2), 0 when the message is
 * complete, or -ENOSPC when max_out < 3. A segment holds at most max_out - 2 payload iovecs, so
 * a scattered SGL may give shorter segments; a zero-length message gives one FPDU with L=1. */
int sndk_tx_msg_next(struct sndk_tx_msg *m, struct sndk_fpdu *f, struct iovec *out, int max_out);

/* Payload bytes per segment for a header of hdr_len under max_fpdu (a multiple of 8, so the pad
 * is 0 and every segment after the first starts 8-byte aligned in the target buffer). */
uint32_t sndk_fpdu_max_payload(uint32_t max_fpdu, uint32_t hdr_len);

/* --- iovec helpers for the data path --- */
size_t sndk_iov_len(const struct iovec *iov, int n);
/* Copy the bytes of iov into buf (at most cap); returns bytes copied. */
size_t sndk_iov_gather(const struct iovec *iov, int n, void *buf, size_t cap);
/* Drop the first `bytes` bytes of the iovec array in place (after a partial writev);
 * *iov and *n are updated, the first remaining entry may be trimmed. */
void sndk_iov_advance(struct iovec **iov, int *n, size_t bytes);

#endif
