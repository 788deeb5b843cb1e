/* iWARP wire formats: MPA (RFC 5044, enhanced setup RFC 6581), DDP (RFC 5041), RDMAP (RFC 5040).
 *
 * This header knows bytes, never NDK objects. Every header is a struct of byte arrays so that it
 * can be overlaid on any buffer (no alignment requirement, no padding, no packed attribute) and
 * every multi-byte field is read and written through the big-endian accessors below. The one
 * little-endian item on the wire is the MPA CRC trailer (docs/iwarp-notes.md [IW-CRC]).
 *
 * Protocol versions: MPA Rev 1 = RFC 5044; Rev 2 = RFC 6581 (adds the IRD/ORD word and the RTR
 * negotiation at the start of the private data, flagged by byte 16 bit 0x10). Rev 0 was the
 * pre-IETF RDMAC MPA and is not supported. DDP version 1 and RDMAP version 1 are the only
 * versions the RFCs define (the pre-IETF RDMAC drafts used 0).
 */
#ifndef SOFTNDK_IWARP_WIRE_H
#define SOFTNDK_IWARP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* ---------------------------------------------------------------- byte order helpers */

static inline uint16_t sndk_get_be16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}
static inline uint32_t sndk_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t sndk_get_be64(const uint8_t *p)
{
    return (uint64_t)sndk_get_be32(p) << 32 | sndk_get_be32(p + 4);
}
static inline uint32_t sndk_get_le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static inline void sndk_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void sndk_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void sndk_put_be64(uint8_t *p, uint64_t v)
{
    sndk_put_be32(p, (uint32_t)(v >> 32));
    sndk_put_be32(p + 4, (uint32_t)v);
}
static inline void sndk_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---------------------------------------------------------------- MPA Request / Reply */

#define SNDK_MPA_KEY_LEN 16
#define SNDK_MPA_KEY_REQ "MPA ID Req Frame" /* 16 bytes, no NUL on the wire */
#define SNDK_MPA_KEY_REP "MPA ID Rep Frame"

/* Byte 16 of a Request/Reply. */
#define SNDK_MPA_FLAG_MARKERS  0x80u /* M: sender wants markers in what its peer sends */
#define SNDK_MPA_FLAG_CRC      0x40u /* C: CRC wanted; OR of both frames decides */
#define SNDK_MPA_FLAG_REJECT   0x20u /* R: Reply only, connection refused */
#define SNDK_MPA_FLAG_ENHANCED 0x10u /* RFC 6581 enhanced setup (reserved in RFC 5044) */
#define SNDK_MPA_FLAG_RSVD     0x0fu /* send 0, ignore on receive (siw experiments used 0x08) */

#define SNDK_MPA_REV1 1u /* RFC 5044 */
#define SNDK_MPA_REV2 2u /* RFC 6581: IRD/ORD word when the enhanced flag is set */

#define SNDK_MPA_PD_MAX_RFC 512u /* RFC 5044 maximum PD_Length */
/* What we send and accept: Linux siw caps the whole private data at RDMA_MAX_PRIVATE_DATA = 256,
 * including the 4-byte Rev 2 word, and drops the connection beyond it. */
#define SNDK_MPA_PD_MAX     256u

struct sndk_mpa_rr_hdr {
    uint8_t key[SNDK_MPA_KEY_LEN];
    uint8_t flags;
    uint8_t rev;
    uint8_t pd_len[2];
    /* followed by pd_len bytes of private data */
};
_Static_assert(sizeof(struct sndk_mpa_rr_hdr) == 20, "MPA Request/Reply header is 20 bytes");
_Static_assert(offsetof(struct sndk_mpa_rr_hdr, flags) == 16, "MPA flags at 16");
_Static_assert(offsetof(struct sndk_mpa_rr_hdr, rev) == 17, "MPA rev at 17");
_Static_assert(offsetof(struct sndk_mpa_rr_hdr, pd_len) == 18, "MPA PD_Length at 18");

static inline uint16_t sndk_mpa_rr_pd_len(const struct sndk_mpa_rr_hdr *h)
{
    return sndk_get_be16(h->pd_len);
}

/* RFC 6581 IRD/ORD word: the first 4 bytes of private data when Rev = 2 and ENHANCED is set. */
struct sndk_mpa_v2_word {
    uint8_t ird[2]; /* A | B | IRD(14) */
    uint8_t ord[2]; /* C | D | ORD(14) */
};
_Static_assert(sizeof(struct sndk_mpa_v2_word) == 4, "MPA v2 IRD/ORD word is 4 bytes");

#define SNDK_MPA_V2_P2P        0x8000u /* ird word, A: peer-to-peer, an RTR will be exchanged */
#define SNDK_MPA_V2_RTR_SEND   0x4000u /* ird word, B: zero-length Send as RTR */
#define SNDK_MPA_V2_RTR_WRITE  0x8000u /* ord word, C: zero-length RDMA Write as RTR */
#define SNDK_MPA_V2_RTR_READ   0x4000u /* ord word, D: zero-length RDMA Read as RTR */
#define SNDK_MPA_V2_IRDORD_MAX 0x3fffu /* 14-bit IRD and ORD */

/* ---------------------------------------------------------------- MPA FPDU framing */

#define SNDK_MPA_LEN_SIZE  2u      /* ULPDU_Length, big-endian, counts the DDP segment only */
#define SNDK_MPA_CRC_SIZE  4u      /* CRC32c, stored least-significant byte first */
#define SNDK_MPA_ULPDU_MAX 65535u
/* Length + CRC + worst pad: what an FPDU adds around its ULPDU. */
#define SNDK_MPA_OVERHEAD_MAX (SNDK_MPA_LEN_SIZE + 3u + SNDK_MPA_CRC_SIZE)

/* Pad that makes 2 + ulpdu_len a multiple of 4. */
static inline unsigned sndk_mpa_pad(uint32_t ulpdu_len)
{
    return (unsigned)(-(SNDK_MPA_LEN_SIZE + ulpdu_len)) & 3u;
}
/* Whole FPDU on the wire: length field, ULPDU, pad, CRC. */
static inline uint32_t sndk_mpa_fpdu_len(uint32_t ulpdu_len)
{
    return SNDK_MPA_LEN_SIZE + ulpdu_len + sndk_mpa_pad(ulpdu_len) + SNDK_MPA_CRC_SIZE;
}

/* ---------------------------------------------------------------- DDP */

/* Byte 0 of every DDP segment. */
#define SNDK_DDP_TAGGED   0x80u /* T */
#define SNDK_DDP_LAST     0x40u /* L */
#define SNDK_DDP_RSVD     0x3cu /* zero on send; RFC 5041: not checked on receive */
#define SNDK_DDP_DV_MASK  0x03u
#define SNDK_DDP_VERSION  1u

/* Byte 1 of every DDP segment: RsvdULP[0..7], owned by RDMAP. */
#define SNDK_RDMAP_RV_MASK  0xc0u
#define SNDK_RDMAP_RV_SHIFT 6
#define SNDK_RDMAP_RSVD     0x30u /* zero on send; RFC 5040: not checked on receive */
#define SNDK_RDMAP_OP_MASK  0x0fu
#define SNDK_RDMAP_VERSION  1u

struct sndk_ddp_ctrl {
    uint8_t ddp;   /* T | L | Rsvd | DV */
    uint8_t rdmap; /* RV | Rsv | Opcode */
};
_Static_assert(sizeof(struct sndk_ddp_ctrl) == 2, "DDP/RDMAP control is 2 bytes");

static inline bool sndk_ddp_tagged(const struct sndk_ddp_ctrl *c)
{
    return (c->ddp & SNDK_DDP_TAGGED) != 0;
}
static inline bool sndk_ddp_last(const struct sndk_ddp_ctrl *c)
{
    return (c->ddp & SNDK_DDP_LAST) != 0;
}
static inline unsigned sndk_ddp_version(const struct sndk_ddp_ctrl *c)
{
    return c->ddp & SNDK_DDP_DV_MASK;
}
static inline unsigned sndk_rdmap_version(const struct sndk_ddp_ctrl *c)
{
    return (c->rdmap & SNDK_RDMAP_RV_MASK) >> SNDK_RDMAP_RV_SHIFT;
}
static inline unsigned sndk_rdmap_opcode(const struct sndk_ddp_ctrl *c)
{
    return c->rdmap & SNDK_RDMAP_OP_MASK;
}
static inline void sndk_ddp_ctrl_set(struct sndk_ddp_ctrl *c, bool tagged, bool last,
                                     unsigned opcode)
{
    c->ddp = (uint8_t)((tagged ? SNDK_DDP_TAGGED : 0u) | (last ? SNDK_DDP_LAST : 0u) |
                       SNDK_DDP_VERSION);
    c->rdmap = (uint8_t)(SNDK_RDMAP_VERSION << SNDK_RDMAP_RV_SHIFT | (opcode & SNDK_RDMAP_OP_MASK));
}

/* Tagged buffer model: RDMA Write, RDMA Read Response. */
struct sndk_ddp_tagged_hdr {
    struct sndk_ddp_ctrl ctrl;
    uint8_t stag[4]; /* data sink STag */
    uint8_t to[8];   /* tagged offset of this segment's first payload byte */
};
_Static_assert(sizeof(struct sndk_ddp_tagged_hdr) == 14, "DDP tagged header is 14 bytes");
_Static_assert(offsetof(struct sndk_ddp_tagged_hdr, stag) == 2, "tagged STag at 2");
_Static_assert(offsetof(struct sndk_ddp_tagged_hdr, to) == 6, "tagged TO at 6");

/* Untagged buffer model: Sends, Read Request, Terminate. */
struct sndk_ddp_untagged_hdr {
    struct sndk_ddp_ctrl ctrl;
    uint8_t rsvdulp[4]; /* RDMAP: Invalidate STag for Send-with-Invalidate, else reserved 0 */
    uint8_t qn[4];
    uint8_t msn[4];
    uint8_t mo[4];
};
_Static_assert(sizeof(struct sndk_ddp_untagged_hdr) == 18, "DDP untagged header is 18 bytes");
_Static_assert(offsetof(struct sndk_ddp_untagged_hdr, rsvdulp) == 2, "Invalidate STag at 2");
_Static_assert(offsetof(struct sndk_ddp_untagged_hdr, qn) == 6, "QN at 6");
_Static_assert(offsetof(struct sndk_ddp_untagged_hdr, msn) == 10, "MSN at 10");
_Static_assert(offsetof(struct sndk_ddp_untagged_hdr, mo) == 14, "MO at 14");

#define SNDK_DDP_TAGGED_HDR_LEN   14u
#define SNDK_DDP_UNTAGGED_HDR_LEN 18u

/* Untagged queue numbers used by RDMAP (RFC 5040 §4.1, Figure 4). */
enum sndk_ddp_qn {
    SNDK_QN_SEND = 0,      /* Send, Send with Invalidate / SE / SE and Invalidate */
    SNDK_QN_READ_REQ = 1,  /* RDMA Read Request */
    SNDK_QN_TERMINATE = 2, /* Terminate */
    SNDK_QN_COUNT = 3
    /* 3: RFC 7306 atomic requests; not used by NDK */
};

/* ---------------------------------------------------------------- RDMAP */

enum sndk_rdmap_opcode {
    SNDK_OP_WRITE = 0x0,
    SNDK_OP_READ_REQ = 0x1,
    SNDK_OP_READ_RESP = 0x2,
    SNDK_OP_SEND = 0x3,
    SNDK_OP_SEND_INV = 0x4,
    SNDK_OP_SEND_SE = 0x5,
    SNDK_OP_SEND_SE_INV = 0x6,
    SNDK_OP_TERMINATE = 0x7,
    SNDK_OP_COUNT = 0x8
    /* 0x8..0xf reserved by RFC 5040; RFC 7306 uses 0x8/0x9 (immediate data) and 0xa/0xb
     * (atomics). Not part of NDK; rejected as unexpected opcodes, as siw does. */
};

/* Name of an opcode ("Send with SE"), "reserved" for 8..15. Never NULL. */
const char *sndk_rdmap_opcode_name(unsigned opcode);

static inline bool sndk_op_is_tagged(unsigned op)
{
    return op == SNDK_OP_WRITE || op == SNDK_OP_READ_RESP;
}
static inline bool sndk_op_is_send(unsigned op)
{
    return op >= SNDK_OP_SEND && op <= SNDK_OP_SEND_SE_INV;
}
static inline bool sndk_op_has_inval(unsigned op)
{
    return op == SNDK_OP_SEND_INV || op == SNDK_OP_SEND_SE_INV;
}
static inline bool sndk_op_has_se(unsigned op)
{
    return op == SNDK_OP_SEND_SE || op == SNDK_OP_SEND_SE_INV;
}

/* RDMA Read Request body, after the untagged header (ULPDU offset 18). */
struct sndk_rdmap_read_req {
    uint8_t sink_stag[4];
    uint8_t sink_to[8];
    uint8_t size[4];
    uint8_t src_stag[4];
    uint8_t src_to[8];
};
_Static_assert(sizeof(struct sndk_rdmap_read_req) == 28, "RDMA Read Request header is 28 bytes");
_Static_assert(offsetof(struct sndk_rdmap_read_req, size) == 12, "Read size at 12");
_Static_assert(offsetof(struct sndk_rdmap_read_req, src_stag) == 16, "Source STag at 16");
_Static_assert(offsetof(struct sndk_rdmap_read_req, src_to) == 20, "Source TO at 20");

#define SNDK_RDMAP_READ_REQ_LEN   28u
#define SNDK_READ_REQ_ULPDU_LEN   (SNDK_DDP_UNTAGGED_HDR_LEN + SNDK_RDMAP_READ_REQ_LEN) /* 46 */

/* Host-order view of a Read Request body. */
struct sndk_read_req {
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    uint32_t src_stag;
    uint64_t src_to;
};
static inline void sndk_read_req_put(struct sndk_rdmap_read_req *w, const struct sndk_read_req *r)
{
    sndk_put_be32(w->sink_stag, r->sink_stag);
    sndk_put_be64(w->sink_to, r->sink_to);
    sndk_put_be32(w->size, r->size);
    sndk_put_be32(w->src_stag, r->src_stag);
    sndk_put_be64(w->src_to, r->src_to);
}
static inline void sndk_read_req_get(struct sndk_read_req *r, const struct sndk_rdmap_read_req *w)
{
    r->sink_stag = sndk_get_be32(w->sink_stag);
    r->sink_to = sndk_get_be64(w->sink_to);
    r->size = sndk_get_be32(w->size);
    r->src_stag = sndk_get_be32(w->src_stag);
    r->src_to = sndk_get_be64(w->src_to);
}

/* ---------------------------------------------------------------- Terminate */

/* Terminate Control word (ULPDU offset 18), then optional fields selected by M/D/R. */
#define SNDK_TERM_LAYER_SHIFT 28
#define SNDK_TERM_LAYER_MASK  0xf0000000u
#define SNDK_TERM_ETYPE_SHIFT 24
#define SNDK_TERM_ETYPE_MASK  0x0f000000u
#define SNDK_TERM_CODE_SHIFT  16
#define SNDK_TERM_CODE_MASK   0x00ff0000u
#define SNDK_TERM_HDRCT_M     0x00008000u /* DDP Segment Length valid */
#define SNDK_TERM_HDRCT_D     0x00004000u /* terminated DDP header included */
#define SNDK_TERM_HDRCT_R     0x00002000u /* terminated RDMAP (Read Request) header included */
#define SNDK_TERM_RSVD        0x00001fffu

struct sndk_term_hdr {
    uint8_t ctrl[4];
    uint8_t ddp_seg_len[2];                      /* when M or D */
    uint8_t ddp_hdr[SNDK_DDP_UNTAGGED_HDR_LEN];  /* 14 (tagged) or 18 bytes used, when D */
    uint8_t rdmap_hdr[SNDK_RDMAP_READ_REQ_LEN];  /* when R */
};
_Static_assert(sizeof(struct sndk_term_hdr) == 52, "largest Terminate body is 4+2+18+28");
_Static_assert(offsetof(struct sndk_term_hdr, ddp_seg_len) == 4, "DDP Segment Length at 22");
_Static_assert(offsetof(struct sndk_term_hdr, ddp_hdr) == 6, "terminated DDP header at 24");
#define SNDK_TERM_BODY_MAX ((uint32_t)sizeof(struct sndk_term_hdr))
#define SNDK_TERM_ULPDU_MAX (SNDK_DDP_UNTAGGED_HDR_LEN + SNDK_TERM_BODY_MAX) /* 70 */

enum sndk_term_layer {
    SNDK_TERM_LAYER_RDMAP = 0x0,
    SNDK_TERM_LAYER_DDP = 0x1,
    SNDK_TERM_LAYER_LLP = 0x2, /* MPA */
};

/* Error types, per layer. */
enum sndk_term_etype_rdmap {
    SNDK_TERM_RDMAP_LOCAL_CATA = 0x0,
    SNDK_TERM_RDMAP_REMOTE_PROT = 0x1,
    SNDK_TERM_RDMAP_REMOTE_OP = 0x2,
};
enum sndk_term_etype_ddp {
    SNDK_TERM_DDP_LOCAL_CATA = 0x0,
    SNDK_TERM_DDP_TAGGED = 0x1,
    SNDK_TERM_DDP_UNTAGGED = 0x2,
    SNDK_TERM_DDP_RSVD_LLP = 0x3, /* reserved for the LLP */
};
enum sndk_term_etype_llp {
    SNDK_TERM_LLP_MPA = 0x0,
};

/* Error codes: RDMAP, remote protection (etype 1) and remote operation (etype 2). */
enum sndk_term_code_rdmap {
    SNDK_TERM_RDMAP_INV_STAG = 0x00,       /* prot */
    SNDK_TERM_RDMAP_BASE_BOUNDS = 0x01,    /* prot */
    SNDK_TERM_RDMAP_ACCESS = 0x02,         /* prot */
    SNDK_TERM_RDMAP_UNASSOC_STAG = 0x03,   /* prot */
    SNDK_TERM_RDMAP_TO_WRAP = 0x04,        /* prot */
    SNDK_TERM_RDMAP_INV_VERSION = 0x05,    /* op */
    SNDK_TERM_RDMAP_UNEXP_OPCODE = 0x06,   /* op */
    SNDK_TERM_RDMAP_CATA_STREAM = 0x07,    /* op */
    SNDK_TERM_RDMAP_CATA_GLOBAL = 0x08,    /* op */
    SNDK_TERM_RDMAP_CANT_INV_STAG = 0x09,  /* prot and op */
    SNDK_TERM_RDMAP_UNSPECIFIED = 0xff,    /* prot and op */
};
/* DDP, tagged buffer (etype 1). */
enum sndk_term_code_ddp_tagged {
    SNDK_TERM_DDP_T_INV_STAG = 0x00,
    SNDK_TERM_DDP_T_BASE_BOUNDS = 0x01,
    SNDK_TERM_DDP_T_UNASSOC_STAG = 0x02,
    SNDK_TERM_DDP_T_TO_WRAP = 0x03,
    SNDK_TERM_DDP_T_INV_VERSION = 0x04,
};
/* DDP, untagged buffer (etype 2). */
enum sndk_term_code_ddp_untagged {
    SNDK_TERM_DDP_U_INV_QN = 0x01,
    SNDK_TERM_DDP_U_MSN_NO_BUF = 0x02,
    SNDK_TERM_DDP_U_MSN_RANGE = 0x03,
    SNDK_TERM_DDP_U_INV_MO = 0x04,
    SNDK_TERM_DDP_U_TOO_LONG = 0x05,
    SNDK_TERM_DDP_U_INV_VERSION = 0x06,
};
/* LLP (MPA), etype 0. */
enum sndk_term_code_llp {
    SNDK_TERM_LLP_CONN_LOST = 0x01,
    SNDK_TERM_LLP_CRC = 0x02,
    SNDK_TERM_LLP_MARKER_LEN = 0x03,
    SNDK_TERM_LLP_BAD_FRAME = 0x04,  /* invalid MPA Request or Reply */
    SNDK_TERM_LLP_LOCAL_CATA = 0x05, /* RFC 6581 */
    SNDK_TERM_LLP_IRD = 0x06,        /* RFC 6581: insufficient IRD resources */
    SNDK_TERM_LLP_NO_RTR = 0x07,     /* RFC 6581: no matching RTR option */
};

static inline uint32_t sndk_term_ctrl_make(unsigned layer, unsigned etype, unsigned code,
                                           uint32_t hdrct)
{
    return (uint32_t)(layer & 0xfu) << SNDK_TERM_LAYER_SHIFT |
           (uint32_t)(etype & 0xfu) << SNDK_TERM_ETYPE_SHIFT |
           (uint32_t)(code & 0xffu) << SNDK_TERM_CODE_SHIFT |
           (hdrct & (SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D | SNDK_TERM_HDRCT_R));
}
static inline unsigned sndk_term_ctrl_layer(uint32_t ctrl)
{
    return (ctrl & SNDK_TERM_LAYER_MASK) >> SNDK_TERM_LAYER_SHIFT;
}
static inline unsigned sndk_term_ctrl_etype(uint32_t ctrl)
{
    return (ctrl & SNDK_TERM_ETYPE_MASK) >> SNDK_TERM_ETYPE_SHIFT;
}
static inline unsigned sndk_term_ctrl_code(uint32_t ctrl)
{
    return (ctrl & SNDK_TERM_CODE_MASK) >> SNDK_TERM_CODE_SHIFT;
}

/* ---------------------------------------------------------------- sizes the codecs share */

/* Largest header an encoder puts in front of payload: MPA length + untagged header + the
 * biggest RDMAP body (a full Terminate). */
#define SNDK_FPDU_HDR_MAX (SNDK_MPA_LEN_SIZE + SNDK_TERM_ULPDU_MAX) /* 72 */
/* Largest trailer: 3 pad bytes + CRC. */
#define SNDK_FPDU_TRAILER_MAX (3u + SNDK_MPA_CRC_SIZE)

#endif
