/* Terminate names, codec, and the fault -> Terminate table. */
#include "iwarp/terminate.h"

#include <errno.h>
#include <string.h>

/* ---------------------------------------------------------------- opcode names */

static const char *const opcode_names[SNDK_OP_COUNT] = {
    [SNDK_OP_WRITE] = "RDMA Write",
    [SNDK_OP_READ_REQ] = "RDMA Read Request",
    [SNDK_OP_READ_RESP] = "RDMA Read Response",
    [SNDK_OP_SEND] = "Send",
    [SNDK_OP_SEND_INV] = "Send with Invalidate",
    [SNDK_OP_SEND_SE] = "Send with SE",
    [SNDK_OP_SEND_SE_INV] = "Send with SE and Invalidate",
    [SNDK_OP_TERMINATE] = "Terminate",
};

const char *sndk_rdmap_opcode_name(unsigned opcode)
{
    return opcode < SNDK_OP_COUNT ? opcode_names[opcode] : "reserved";
}

/* ---------------------------------------------------------------- fault table */

/* How much of the offending segment a Terminate carries for this fault. */
enum hdr_policy {
    HDR_NONE, /* LLP errors, DDP version and catastrophic errors: header not trustworthy */
    HDR_DDP,  /* M=1 D=1 + DDP header */
    HDR_RREQ, /* M=1 D=1 R=1 + DDP header + Read Request body (when the segment was one) */
};

struct fault_entry {
    const char *name;
    uint8_t layer, etype, code;
    uint8_t policy;
};

#define F(e, l, t, c, p) [e] = {#e, (l), (t), (c), (p)}
static const struct fault_entry fault_table[SNDK_WERR_COUNT] = {
    F(SNDK_WERR_NONE, 0, 0, 0, HDR_NONE),
    F(SNDK_WERR_CRC, SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_CRC, HDR_NONE),
    /* irdma's "segment too small" / "no L bit": DDP local catastrophic. */
    F(SNDK_WERR_SEG_LEN, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_LOCAL_CATA, 0x00, HDR_NONE),
    F(SNDK_WERR_NO_LAST, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_LOCAL_CATA, 0x00, HDR_NONE),
    /* tagged variant chosen in sndk_wire_err_term */
    F(SNDK_WERR_DDP_VERSION, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED,
      SNDK_TERM_DDP_U_INV_VERSION, HDR_NONE),
    F(SNDK_WERR_DDP_RSVD, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED,
      SNDK_TERM_DDP_U_INV_VERSION, HDR_NONE),
    F(SNDK_WERR_RDMAP_VERSION, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP,
      SNDK_TERM_RDMAP_INV_VERSION, HDR_DDP),
    F(SNDK_WERR_RDMAP_RSVD, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP,
      SNDK_TERM_RDMAP_INV_VERSION, HDR_DDP),
    F(SNDK_WERR_OPCODE, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP,
      SNDK_TERM_RDMAP_UNEXP_OPCODE, HDR_DDP),
    F(SNDK_WERR_QN, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_INV_QN, HDR_DDP),
    F(SNDK_WERR_MSN_NO_BUF, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED,
      SNDK_TERM_DDP_U_MSN_NO_BUF, HDR_DDP),
    F(SNDK_WERR_MSN_RANGE, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED,
      SNDK_TERM_DDP_U_MSN_RANGE, HDR_DDP),
    F(SNDK_WERR_MO, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_INV_MO, HDR_DDP),
    F(SNDK_WERR_TOO_LONG, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_TOO_LONG,
      HDR_DDP),
    F(SNDK_WERR_STAG, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_STAG,
      HDR_DDP),
    F(SNDK_WERR_BOUNDS, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_BASE_BOUNDS,
      HDR_DDP),
    F(SNDK_WERR_UNASSOC, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED,
      SNDK_TERM_DDP_T_UNASSOC_STAG, HDR_DDP),
    F(SNDK_WERR_TO_WRAP, SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_TO_WRAP,
      HDR_DDP),
    F(SNDK_WERR_RREQ_IRD, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP,
      SNDK_TERM_RDMAP_CATA_STREAM, HDR_RREQ),
    F(SNDK_WERR_RREQ_STAG, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
      SNDK_TERM_RDMAP_INV_STAG, HDR_RREQ),
    F(SNDK_WERR_RREQ_BOUNDS, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
      SNDK_TERM_RDMAP_BASE_BOUNDS, HDR_RREQ),
    F(SNDK_WERR_RREQ_ACCESS, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
      SNDK_TERM_RDMAP_ACCESS, HDR_RREQ),
    F(SNDK_WERR_RREQ_UNASSOC, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
      SNDK_TERM_RDMAP_UNASSOC_STAG, HDR_RREQ),
    F(SNDK_WERR_RREQ_TO_WRAP, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
      SNDK_TERM_RDMAP_TO_WRAP, HDR_RREQ),
    F(SNDK_WERR_INV_STAG, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP,
      SNDK_TERM_RDMAP_CANT_INV_STAG, HDR_DDP),
    F(SNDK_WERR_INV_STAG_PD, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
      SNDK_TERM_RDMAP_CANT_INV_STAG, HDR_DDP),
    F(SNDK_WERR_LOCAL, SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_LOCAL_CATA, 0x00, HDR_NONE),
    F(SNDK_WERR_MPA_FRAME, SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_BAD_FRAME,
      HDR_NONE),
    F(SNDK_WERR_MPA_IRD, SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_IRD, HDR_NONE),
    F(SNDK_WERR_MPA_RTR, SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_NO_RTR, HDR_NONE),
    F(SNDK_WERR_CONN_LOST, SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_CONN_LOST,
      HDR_NONE),
};
#undef F

const char *sndk_wire_err_name(enum sndk_wire_err err)
{
    if ((unsigned)err >= SNDK_WERR_COUNT || !fault_table[err].name)
        return "SNDK_WERR_?";
    return fault_table[err].name;
}

struct sndk_term_code sndk_wire_err_term(enum sndk_wire_err err, bool tagged)
{
    if ((unsigned)err >= SNDK_WERR_COUNT)
        err = SNDK_WERR_LOCAL;
    const struct fault_entry *e = &fault_table[err];
    struct sndk_term_code c = {e->layer, e->etype, e->code};
    if ((err == SNDK_WERR_DDP_VERSION || err == SNDK_WERR_DDP_RSVD) && tagged) {
        c.etype = SNDK_TERM_DDP_TAGGED;
        c.code = SNDK_TERM_DDP_T_INV_VERSION;
    }
    return c;
}

/* ---------------------------------------------------------------- names */

struct code_name {
    uint8_t layer, etype, code;
    const char *name;
};

static const char *const layer_names[] = {"RDMAP", "DDP", "LLP"};

static const struct code_name etype_names[] = {
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_LOCAL_CATA, 0, "Local Catastrophic Error"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, 0, "Remote Protection Error"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, 0, "Remote Operation Error"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_LOCAL_CATA, 0, "Local Catastrophic Error"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, 0, "Tagged Buffer Error"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, 0, "Untagged Buffer Error"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_RSVD_LLP, 0, "Reserved for the LLP"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, 0, "MPA Error"},
};

static const struct code_name code_names[] = {
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_LOCAL_CATA, 0x00, "local catastrophic"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_INV_STAG, "invalid STag"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_BASE_BOUNDS,
     "base or bounds violation"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_ACCESS,
     "access rights violation"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_UNASSOC_STAG,
     "STag not associated with RDMAP stream"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_TO_WRAP, "TO wrap"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_CANT_INV_STAG,
     "STag cannot be invalidated"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_UNSPECIFIED,
     "unspecified"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_INV_VERSION,
     "invalid RDMAP version"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_UNEXP_OPCODE,
     "unexpected opcode"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_CATA_STREAM,
     "catastrophic error, localized to RDMAP stream"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_CATA_GLOBAL,
     "catastrophic error, global"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_CANT_INV_STAG,
     "STag cannot be invalidated"},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_UNSPECIFIED,
     "unspecified"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_LOCAL_CATA, 0x00, "local catastrophic"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_STAG, "invalid STag"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_BASE_BOUNDS,
     "base or bounds violation"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_UNASSOC_STAG,
     "STag not associated with DDP stream"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_TO_WRAP, "TO wrap"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_VERSION,
     "invalid DDP version"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_INV_QN, "invalid QN"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_MSN_NO_BUF,
     "invalid MSN - no buffer available"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_MSN_RANGE,
     "invalid MSN - MSN range is not valid"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_INV_MO, "invalid MO"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_TOO_LONG,
     "DDP message too long for available buffer"},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_INV_VERSION,
     "invalid DDP version"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_CONN_LOST,
     "TCP connection closed, terminated or lost"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_CRC, "MPA CRC error"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_MARKER_LEN,
     "MPA marker and ULPDU_Length mismatch"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_BAD_FRAME,
     "invalid MPA Request or Reply frame"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_LOCAL_CATA, "local catastrophic"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_IRD, "insufficient IRD resources"},
    {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_NO_RTR, "no matching RTR option"},
};

const char *sndk_term_layer_name(unsigned layer)
{
    return layer < sizeof layer_names / sizeof layer_names[0] ? layer_names[layer] : "unknown";
}

const char *sndk_term_etype_name(unsigned layer, unsigned etype)
{
    for (size_t i = 0; i < sizeof etype_names / sizeof etype_names[0]; i++)
        if (etype_names[i].layer == layer && etype_names[i].etype == etype)
            return etype_names[i].name;
    return "unknown";
}

/* The name RFC 5040 / 5044 give the code, or NULL: not a code they define. */
static const char *term_code_lookup(unsigned layer, unsigned etype, unsigned code)
{
    for (size_t i = 0; i < sizeof code_names / sizeof code_names[0]; i++)
        if (code_names[i].layer == layer && code_names[i].etype == etype &&
            code_names[i].code == code)
            return code_names[i].name;
    return NULL;
}

const char *sndk_term_code_name(unsigned layer, unsigned etype, unsigned code)
{
    const char *n = term_code_lookup(layer, etype, code);
    return n ? n : "unknown";
}

/* ---------------------------------------------------------------- codec */

size_t sndk_term_encode(const struct sndk_term *t, uint8_t *body, size_t cap)
{
    bool m = t->hdrct & SNDK_TERM_HDRCT_M, d = t->hdrct & SNDK_TERM_HDRCT_D,
         r = t->hdrct & SNDK_TERM_HDRCT_R;
    if (d && t->ddp_hdr_len != SNDK_DDP_TAGGED_HDR_LEN &&
        t->ddp_hdr_len != SNDK_DDP_UNTAGGED_HDR_LEN)
        return 0;
    if (r && (!d || !t->rdmap_hdr_present))
        return 0;
    size_t len = 4 + ((m || d) ? 2u : 0u) + (d ? t->ddp_hdr_len : 0u) +
                 (r ? SNDK_RDMAP_READ_REQ_LEN : 0u);
    if (len > cap)
        return 0;
    sndk_put_be32(body, sndk_term_ctrl_make(t->layer, t->etype, t->code, t->hdrct));
    size_t off = 4;
    if (m || d) {
        sndk_put_be16(body + off, m ? t->ddp_seg_len : 0);
        off += 2;
    }
    if (d) {
        memcpy(body + off, t->ddp_hdr, t->ddp_hdr_len);
        off += t->ddp_hdr_len;
    }
    if (r) {
        memcpy(body + off, t->rdmap_hdr, SNDK_RDMAP_READ_REQ_LEN);
        off += SNDK_RDMAP_READ_REQ_LEN;
    }
    return off;
}

int sndk_term_decode(struct sndk_term *t, const uint8_t *body, size_t len)
{
    memset(t, 0, sizeof *t);
    if (len < 4)
        return -EPROTO;
    uint32_t ctrl = sndk_get_be32(body);
    memcpy(t->wire_ctrl, body, sizeof t->wire_ctrl);
    t->layer = (uint8_t)sndk_term_ctrl_layer(ctrl);
    t->etype = (uint8_t)sndk_term_ctrl_etype(ctrl);
    t->code = (uint8_t)sndk_term_ctrl_code(ctrl);
    t->hdrct = ctrl & (SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D | SNDK_TERM_HDRCT_R);
    if ((body[2] & 0x07) != 0 && (body[2] & 0xF8) == 0 && body[3] == 0) {
        /* Linux siw's little-endian bitfield layout (see terminate.h): nibbles swapped, the
         * flags in the low bits of byte 2 */
        t->siw_layout = true;
        t->layer = body[0] & 0x0F;
        t->etype = body[0] >> 4;
        t->hdrct = ((body[2] & 0x01) ? SNDK_TERM_HDRCT_M : 0u) |
                   ((body[2] & 0x02) ? SNDK_TERM_HDRCT_D : 0u) |
                   ((body[2] & 0x04) ? SNDK_TERM_HDRCT_R : 0u);
    } else if (body[2] == 0 && body[3] == 0 && !term_code_lookup(t->layer, t->etype, t->code) &&
               term_code_lookup(body[0] & 0x0F, body[0] >> 4, t->code)) {
        /* No flag to tell the layouts apart, but only siw's reading names a code RFC 5040 /
         * 5044 define: siw's MPA CRC error (LLP / MPA / 0x02) reads as RDMAP / remote
         * operation / 0x02, which is none */
        t->siw_layout = true;
        t->layer = body[0] & 0x0F;
        t->etype = body[0] >> 4;
    }
    size_t off = 4;
    if (len >= off + 2 && (t->hdrct & (SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D))) {
        t->ddp_seg_len = sndk_get_be16(body + off);
        off += 2;
    }
    if ((t->hdrct & SNDK_TERM_HDRCT_D) && len > off) {
        /* the included header's own T bit says how long it is */
        size_t hl = (body[off] & SNDK_DDP_TAGGED) ? SNDK_DDP_TAGGED_HDR_LEN
                                                  : SNDK_DDP_UNTAGGED_HDR_LEN;
        if (len >= off + hl) {
            memcpy(t->ddp_hdr, body + off, hl);
            t->ddp_hdr_len = (uint8_t)hl;
            off += hl;
        }
    }
    if ((t->hdrct & SNDK_TERM_HDRCT_R) && len >= off + SNDK_RDMAP_READ_REQ_LEN &&
        t->ddp_hdr_len) {
        memcpy(t->rdmap_hdr, body + off, SNDK_RDMAP_READ_REQ_LEN);
        t->rdmap_hdr_present = true;
    }
    return 0;
}

void sndk_term_from_fault(struct sndk_term *t, const struct sndk_wire_fault *f)
{
    memset(t, 0, sizeof *t);
    enum sndk_wire_err err = (unsigned)f->err < SNDK_WERR_COUNT ? f->err : SNDK_WERR_LOCAL;
    struct sndk_term_code c = sndk_wire_err_term(err, f->tagged);
    t->layer = c.layer;
    t->etype = c.etype;
    t->code = c.code;
    unsigned policy = fault_table[err].policy;
    if (policy == HDR_NONE ||
        (f->hdr_len != SNDK_DDP_TAGGED_HDR_LEN && f->hdr_len != SNDK_DDP_UNTAGGED_HDR_LEN))
        return;
    t->hdrct = SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D;
    t->ddp_seg_len = f->ulpdu_len > UINT16_MAX ? UINT16_MAX : (uint16_t)f->ulpdu_len;
    t->ddp_hdr_len = f->hdr_len;
    memcpy(t->ddp_hdr, f->hdr, f->hdr_len);
    if ((policy == HDR_RREQ || c.layer == SNDK_TERM_LAYER_RDMAP) && f->have_rreq) {
        t->hdrct |= SNDK_TERM_HDRCT_R;
        t->rdmap_hdr_present = true;
        memcpy(t->rdmap_hdr, f->rreq, SNDK_RDMAP_READ_REQ_LEN);
    }
}

/* Inbound blame, first matching row wins; SNDK_TERM_ANY_CODE matches every code of its etype.
 * Protection errors are the token refused, except base-or-bounds: RDMAP's verbs name reading
 * beyond the remote memory a remote resources error. */
#define SNDK_TERM_ANY_CODE 0x100
static const struct {
    uint8_t layer, etype;
    uint16_t code;
    enum sndk_term_blame blame;
} blame_table[] = {
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_BASE_BOUNDS,
     SNDK_TERM_BLAME_RESOURCES},
    {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_ANY_CODE, SNDK_TERM_BLAME_ACCESS},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_BASE_BOUNDS,
     SNDK_TERM_BLAME_RESOURCES},
    {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_ANY_CODE,
     SNDK_TERM_BLAME_ACCESS},
};

static enum sndk_term_blame term_blame(const struct sndk_term *t)
{
    for (size_t i = 0; i < sizeof blame_table / sizeof blame_table[0]; i++)
        if (blame_table[i].layer == t->layer && blame_table[i].etype == t->etype &&
            (blame_table[i].code == SNDK_TERM_ANY_CODE || blame_table[i].code == t->code))
            return blame_table[i].blame;
    return SNDK_TERM_BLAME_RESOURCES;
}

void sndk_term_target(const struct sndk_term *t, struct sndk_term_target *out)
{
    memset(out, 0, sizeof *out);
    out->blame = term_blame(t);
    struct sndk_ddp_ctrl ctrl = {t->ddp_hdr[0], t->ddp_hdr[1]};
    if (t->ddp_hdr_len == SNDK_DDP_UNTAGGED_HDR_LEN && !sndk_ddp_tagged(&ctrl)) {
        struct sndk_ddp_untagged_hdr h;
        memcpy(&h, t->ddp_hdr, sizeof h);
        uint32_t qn = sndk_get_be32(h.qn);
        if (qn == SNDK_QN_SEND) {
            out->names = SNDK_TERM_NAMES_SEND;
            out->blame = SNDK_TERM_BLAME_RESOURCES;
        } else if (qn == SNDK_QN_READ_REQ) {
            out->names = SNDK_TERM_NAMES_READ;
            if (t->rdmap_hdr_present) {
                struct sndk_rdmap_read_req rr;
                memcpy(&rr, t->rdmap_hdr, sizeof rr);
                out->stag = sndk_get_be32(rr.sink_stag);
            }
        } else {
            return;
        }
        out->msn = sndk_get_be32(h.msn);
    } else if (t->ddp_hdr_len == SNDK_DDP_TAGGED_HDR_LEN && sndk_ddp_tagged(&ctrl) &&
               sndk_rdmap_opcode(&ctrl) == SNDK_OP_WRITE) {
        struct sndk_ddp_tagged_hdr h;
        memcpy(&h, t->ddp_hdr, sizeof h);
        out->names = SNDK_TERM_NAMES_WRITE;
        out->stag = sndk_get_be32(h.stag);
        out->to = sndk_get_be64(h.to);
    }
}
