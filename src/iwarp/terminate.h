/* RDMAP Terminate: names for layer/etype/code, encoding and decoding of the Terminate body,
 * and the one table that maps a receive-side protocol fault to the Terminate it must cause
 * (docs/iwarp-notes.md [IW-TERM]). Knows no NDK object. */
#ifndef SOFTNDK_IWARP_TERMINATE_H
#define SOFTNDK_IWARP_TERMINATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iwarp/wire.h"

/* Every protocol fault the wire layer (or the data path using it) can detect. The parser records
 * the first one; callbacks of the parser return -SNDK_WERR_xxx to raise one. */
enum sndk_wire_err {
    SNDK_WERR_NONE = 0,
    SNDK_WERR_CRC,           /* MPA CRC mismatch */
    SNDK_WERR_SEG_LEN,       /* ULPDU_Length too short for its header, over the limit, or
                                not the fixed length of its opcode */
    SNDK_WERR_NO_LAST,       /* single-segment message (Read Request, Terminate) with L=0 */
    SNDK_WERR_DDP_VERSION,   /* DV != 1 */
    SNDK_WERR_DDP_RSVD,      /* DDP reserved control bits set (strict mode only) */
    SNDK_WERR_RDMAP_VERSION, /* RV != 1 */
    SNDK_WERR_RDMAP_RSVD,    /* RDMAP reserved control bits set (strict mode only) */
    SNDK_WERR_OPCODE,        /* reserved opcode, opcode against its T bit, or interleaving */
    SNDK_WERR_QN,            /* wrong queue number for the opcode */
    SNDK_WERR_MSN_NO_BUF,    /* Send with no receive buffer posted */
    SNDK_WERR_MSN_RANGE,     /* MSN is not the next expected one */
    SNDK_WERR_MO,            /* MO is not the bytes received so far, or wraps */
    SNDK_WERR_TOO_LONG,      /* Send longer than the posted buffer */
    SNDK_WERR_STAG,          /* tagged: unknown/invalid STag, key mismatch, no access */
    SNDK_WERR_BOUNDS,        /* tagged: [TO, TO+len) outside the region */
    SNDK_WERR_UNASSOC,       /* tagged: STag of another PD / stream */
    SNDK_WERR_TO_WRAP,       /* tagged: TO + len wraps 2^64 */
    SNDK_WERR_RREQ_IRD,      /* more Read Requests outstanding than IRD */
    SNDK_WERR_RREQ_STAG,     /* Read Request source STag invalid */
    SNDK_WERR_RREQ_BOUNDS,   /* Read Request source out of bounds */
    SNDK_WERR_RREQ_ACCESS,   /* Read Request source lacks remote read */
    SNDK_WERR_RREQ_UNASSOC,  /* Read Request source STag of another PD */
    SNDK_WERR_RREQ_TO_WRAP,  /* Read Request source TO + size wraps */
    SNDK_WERR_INV_STAG,      /* Send with Invalidate: STag unknown or not invalidatable */
    SNDK_WERR_INV_STAG_PD,   /* Send with Invalidate: STag of another PD */
    SNDK_WERR_LOCAL,         /* local catastrophic failure */
    SNDK_WERR_MPA_FRAME,     /* invalid MPA Request/Reply */
    SNDK_WERR_MPA_IRD,       /* RFC 6581 insufficient IRD */
    SNDK_WERR_MPA_RTR,       /* RFC 6581 no matching RTR option */
    SNDK_WERR_CONN_LOST,     /* TCP closed mid-FPDU or mid-handshake */
    SNDK_WERR_COUNT
};

const char *sndk_wire_err_name(enum sndk_wire_err err); /* "SNDK_WERR_CRC"; never NULL */

struct sndk_term_code {
    uint8_t layer; /* enum sndk_term_layer */
    uint8_t etype;
    uint8_t code;
};

/* The Terminate layer/etype/code for a fault. `tagged` picks between the tagged and untagged
 * variants of the DDP version codes; it is ignored otherwise. */
struct sndk_term_code sndk_wire_err_term(enum sndk_wire_err err, bool tagged);

/* "RDMAP", "DDP", "LLP"; etype and code names per layer ("Remote Protection Error",
 * "invalid STag"); "unknown" for values no table holds. Never NULL. */
const char *sndk_term_layer_name(unsigned layer);
const char *sndk_term_etype_name(unsigned layer, unsigned etype);
const char *sndk_term_code_name(unsigned layer, unsigned etype, unsigned code);

/* What the receive side knew when it found a fault: enough to build the Terminate. */
struct sndk_wire_fault {
    enum sndk_wire_err err;
    bool tagged;       /* T bit of the offending segment (when known) */
    uint8_t hdr_len;   /* 0, 14 or 18: bytes of the offending DDP header in hdr */
    bool have_rreq;    /* the segment was a Read Request and its body is in rreq */
    uint32_t ulpdu_len;
    uint8_t hdr[SNDK_DDP_UNTAGGED_HDR_LEN];
    uint8_t rreq[SNDK_RDMAP_READ_REQ_LEN];
};

/* A Terminate body (everything after the 18-byte untagged header), decoded or to encode. */
struct sndk_term {
    uint8_t layer, etype, code;
    uint32_t hdrct;           /* SNDK_TERM_HDRCT_M | _D | _R as sent/received */
    uint16_t ddp_seg_len;     /* valid when M */
    uint8_t ddp_hdr_len;      /* 0, 14 or 18 bytes of ddp_hdr present */
    bool rdmap_hdr_present;   /* 28 bytes of rdmap_hdr present */
    uint8_t ddp_hdr[SNDK_DDP_UNTAGGED_HDR_LEN];
    uint8_t rdmap_hdr[SNDK_RDMAP_READ_REQ_LEN];
    bool siw_layout; /* decoded: the control word came in Linux siw's little-endian
                        bitfield layout and was read as siw meant it (never sent) */
    uint8_t wire_ctrl[4]; /* decoded: the control word's bytes as they came, for the log (a
                             layout guessed wrong is then still readable) */
};

/* Encode t into body[0..cap): control word, then DDP Segment Length when M or D, the DDP header
 * when D, the RDMAP header when R. Returns the body length (4..52), or 0 if cap is too small or
 * D/R are set without the header they announce. */
size_t sndk_term_encode(const struct sndk_term *t, uint8_t *body, size_t cap);

/* Decode a received Terminate body of len bytes. Sizes come from len, not from the Hdrct bits
 * (siw sets R with no RDMAP header): a field is reported present only if its bytes are there.
 * Linux siw on little-endian hosts fills the control word through a C bitfield: Layer in the
 * low nibble of byte 0 and EType in the high one, M/D/R in bits 0/1/2 of byte 2 — where RFC
 * 5040 has reserved bits (and M/D/R in bits 7/6/5). A word with any of those reserved bits 0..2
 * set and all of bits 7..3 and byte 3 clear is read as siw meant it (siw_layout); without any
 * of M/D/R, so too when only siw's reading names a defined code (siw's MPA CRC error has no
 * flag); when both or neither do, the RFC's layout is used (docs/interop.md).
 * Returns 0, or -EPROTO when len < 4. */
int sndk_term_decode(struct sndk_term *t, const uint8_t *body, size_t len);

/* The Terminate to send for fault f ([IW-TERM]): codes from the table; M=D=1 with the
 * offending DDP header when the fault has one and the code is not an LLP, DDP-version or
 * DDP-catastrophic one; R=1 with the Read Request body for RDMAP errors on a Read Request.
 * DDP Segment Length = the offending ULPDU_Length (RFC 5040: DDP header + payload). */
void sndk_term_from_fault(struct sndk_term *t, const struct sndk_wire_fault *f);

/* ---- Inbound: what a received Terminate says about the request it refused ---- */

/* Why the peer refused the request a Terminate names. */
enum sndk_term_blame {
    SNDK_TERM_BLAME_RESOURCES, /* it could not take it: bounds, IRD, a Send, anything else */
    SNDK_TERM_BLAME_ACCESS,    /* it refused the token: invalid STag, rights, PD, TO wrap */
};

/* Which of our requests a Terminate's included DDP header names. */
enum sndk_term_names {
    SNDK_TERM_NAMES_NONE,  /* no header, or one of no request of ours */
    SNDK_TERM_NAMES_SEND,  /* an untagged header on queue 0: by MSN */
    SNDK_TERM_NAMES_READ,  /* an untagged header on queue 1: by sink STag, else by MSN */
    SNDK_TERM_NAMES_WRITE, /* a tagged Write header: by data sink STag and TO */
};

struct sndk_term_target {
    enum sndk_term_names names;
    uint32_t msn;  /* SEND, READ: the header's MSN */
    uint32_t stag; /* READ: the included Read Request's sink STag (0: none included; Linux siw
                      puts the read size where the MSN belongs, so the STag names it surer);
                      WRITE: the data sink STag */
    uint64_t to;   /* WRITE: the refused segment's tagged offset */
    enum sndk_term_blame blame;
};

/* Decode what a received Terminate names and why (the inbound table, docs/iwarp-notes.md
 * [IW-TERM-IN]): a Send is always BLAME_RESOURCES; a Read or Write BLAME_ACCESS for a DDP tagged
 * or RDMAP remote protection error other than base-or-bounds, else BLAME_RESOURCES. */
void sndk_term_target(const struct sndk_term *t, struct sndk_term_target *out);

#endif
