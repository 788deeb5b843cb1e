/* Malformed input: every mutation maps to its exact fault and Terminate layer/etype/code, at every
 * split of the input, and the Terminate built from the fault parses back to the same codes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "iwarp/crc32c.h"
#include "iwarp/fpdu.h"
#include "iwarp/mpa.h"
#include "iwarp/parser.h"
#include "wire_util.h"

struct patch {
    int off; /* -1 ends the list */
    uint8_t val;
};

enum setup_flags {
    S_STRICT = 1,
    S_MAX16 = 2,       /* max_ulpdu 16 */
    S_NO_RBUF = 4,     /* no receive buffer posted */
    S_SHORT_RBUF = 8,  /* receive buffer of 3 bytes */
    S_MSN2 = 16,       /* expect MSN 2 on QN 0 */
    S_EOF = 32,        /* the stream then ends */
    S_KEEP_CRC = 64,   /* do not recompute the CRC after patching */
};

struct bad_case {
    const char *name;
    const char *base;  /* hex of the starting bytes */
    struct patch p[9];
    unsigned flags;
    int msg_done_rc, read_req_rc;
    size_t cut;        /* use only the first `cut` bytes (0 = all) */
    enum sndk_wire_err err;
    uint8_t layer, etype, code;
    bool with_hdr;     /* the Terminate carries M=1 D=1 and the DDP header */
    bool with_rreq;    /* ... and R=1 with the Read Request */
};

#define END {-1, 0}
#define SEND  "001741430000000000000000000000010000000068656c6c6f000000b990b10c"
#define SINV  "0016414411223344000000000000000200000000696e7621d8826d7f"
#define WRITE "002e8140abcd00010000000000001000000102030405060708090a0b0c0d0e0f1011121314151617" \
              "18191a1b1c1d1e1f8c8ce2df"
#define RREQ  "002e4141000000000000000100000001000000000000aa01000000000000200000000014" \
              "0000bb020000000000003000de50e060"
#define RRESP "0022c1420000aa010000000000002000525252525252525252525252525252525252525253db65df"
#define TERM  "00264147000000000000000200000001000000001100c0000000c140dead00010000000000000000" \
              "3aa5d3b1"
/* second Write segment (TO 0x1020, 16 bytes, L=1) with STag / TO to patch */
#define WRITE2 "001e8140abcd00010000000000001020" "202122232425262728292a2b2c2d2e2f" "00000000"

#define L_RDMAP SNDK_TERM_LAYER_RDMAP
#define L_DDP SNDK_TERM_LAYER_DDP
#define L_LLP SNDK_TERM_LAYER_LLP

static const struct bad_case cases[] = {
    {"bad_crc", SEND, {{28, 0xb8}, END}, S_KEEP_CRC, 0, 0, 0, SNDK_WERR_CRC, L_LLP, 0, 0x02,
     false, false},
    {"short_length", SEND, {{1, 0x03}, END}, 0, 0, 0, 0, SNDK_WERR_SEG_LEN, L_DDP, 0, 0x00,
     false, false},
    {"length_below_control", SEND, {{1, 0x01}, END}, 0, 0, 0, 0, SNDK_WERR_SEG_LEN, L_DDP, 0,
     0x00, false, false},
    {"oversized_length", SEND, {END}, S_MAX16, 0, 0, 0, SNDK_WERR_SEG_LEN, L_DDP, 0, 0x00, false,
     false},
    {"bad_ddp_version_untagged", SEND, {{2, 0x42}, END}, 0, 0, 0, 0, SNDK_WERR_DDP_VERSION, L_DDP,
     2, 0x06, false, false},
    {"bad_ddp_version_tagged", WRITE, {{2, 0x80}, END}, 0, 0, 0, 0, SNDK_WERR_DDP_VERSION, L_DDP,
     1, 0x04, false, false},
    {"ddp_reserved_bits_strict", SEND, {{2, 0x45}, END}, S_STRICT, 0, 0, 0, SNDK_WERR_DDP_RSVD,
     L_DDP, 2, 0x06, false, false},
    {"rdmap_reserved_bits_strict", SEND, {{3, 0x53}, END}, S_STRICT, 0, 0, 0,
     SNDK_WERR_RDMAP_RSVD, L_RDMAP, 2, 0x05, false, false},
    {"bad_rdmap_version", SEND, {{3, 0x03}, END}, 0, 0, 0, 0, SNDK_WERR_RDMAP_VERSION, L_RDMAP, 2,
     0x05, false, false},
    {"unknown_opcode", SEND, {{3, 0x48}, END}, 0, 0, 0, 0, SNDK_WERR_OPCODE, L_RDMAP, 2, 0x06,
     false, false},
    {"opcode_against_t_bit", SEND, {{2, 0xc1}, END}, 0, 0, 0, 0, SNDK_WERR_OPCODE, L_RDMAP, 2,
     0x06, false, false},
    {"bad_qn", SEND, {{11, 0x01}, END}, 0, 0, 0, 0, SNDK_WERR_QN, L_DDP, 2, 0x01, true, false},
    {"msn_gap", SEND, {{15, 0x03}, END}, 0, 0, 0, 0, SNDK_WERR_MSN_RANGE, L_DDP, 2, 0x03, true,
     false},
    {"mo_not_zero", SEND, {{19, 0x08}, END}, 0, 0, 0, 0, SNDK_WERR_MO, L_DDP, 2, 0x04, true,
     false},
    {"mo_overflow", SEND, {{16, 0xff}, {17, 0xff}, {18, 0xff}, {19, 0xfe}, END}, 0, 0, 0, 0,
     SNDK_WERR_MO, L_DDP, 2, 0x04, true, false},
    {"to_wrap", WRITE, {{8, 0xff}, {9, 0xff}, {10, 0xff}, {11, 0xff}, {12, 0xff}, {13, 0xff},
                        {14, 0xff}, {15, 0xf0}, END},
     0, 0, 0, 0, SNDK_WERR_TO_WRAP, L_DDP, 1, 0x03, true, false},
    {"unknown_stag", WRITE, {{4, 0x12}, END}, 0, 0, 0, 0, SNDK_WERR_STAG, L_DDP, 1, 0x00, true,
     false},
    {"out_of_bounds", WRITE, {{15, 0x20}, END}, 0, 0, 0, 0, SNDK_WERR_BOUNDS, L_DDP, 1, 0x01, true,
     false},
    {"no_receive_buffer", SEND, {END}, S_NO_RBUF, 0, 0, 0, SNDK_WERR_MSN_NO_BUF, L_DDP, 2, 0x02,
     true, false},
    {"send_too_long", SEND, {END}, S_SHORT_RBUF, 0, 0, 0, SNDK_WERR_TOO_LONG, L_DDP, 2, 0x05, true,
     false},
    {"read_req_bad_length", RREQ, {{1, 0x2a}, END}, 0, 0, 0, 0, SNDK_WERR_SEG_LEN, L_DDP, 0, 0x00,
     false, false},
    {"read_req_not_last", RREQ, {{2, 0x01}, END}, 0, 0, 0, 0, SNDK_WERR_NO_LAST, L_DDP, 0, 0x00,
     false, false},
    {"read_req_over_ird", RREQ, {END}, 0, 0, -SNDK_WERR_RREQ_IRD, 0, SNDK_WERR_RREQ_IRD, L_RDMAP,
     2, 0x07, true, true},
    {"send_inv_bad_stag", SINV, {END}, S_MSN2, -SNDK_WERR_INV_STAG, 0, 0, SNDK_WERR_INV_STAG,
     L_RDMAP, 2, 0x09, true, false},
    {"send_inv_other_pd", SINV, {END}, S_MSN2, -SNDK_WERR_INV_STAG_PD, 0, 0,
     SNDK_WERR_INV_STAG_PD, L_RDMAP, 1, 0x09, true, false},
    {"interleaved_tagged", WRITE RRESP, {END}, 0, 0, 0, 0, SNDK_WERR_OPCODE, L_RDMAP, 2, 0x06,
     true, false},
    {"write_continues_other_stag", WRITE WRITE2, {{52 + 5, 0x02}, END}, 0, 0, 0, 0,
     SNDK_WERR_STAG, L_DDP, 1, 0x00, true, false},
    {"write_continues_at_wrong_to", WRITE WRITE2, {{52 + 15, 0x28}, END}, 0, 0, 0, 0,
     SNDK_WERR_BOUNDS, L_DDP, 1, 0x01, true, false},
    {"terminate_on_qn0", TERM, {{11, 0x00}, END}, 0, 0, 0, 0, SNDK_WERR_QN, L_DDP, 2, 0x01, true,
     false},
    {"truncated_fpdu", SEND, {END}, S_EOF, 0, 0, 10, SNDK_WERR_CONN_LOST, L_LLP, 0, 0x01, false,
     false},
    /* a second MPA Request / Reply where the first FPDU must be: an invalid MPA frame */
    {"second_mpa_request", "4d504120494420526571204672616d6540010000", {END}, 0, 0, 0, 0,
     SNDK_WERR_MPA_FRAME, L_LLP, 0, 0x04, false, false},
    {"second_mpa_reply", "4d504120494420526570204672616d6550020004000400040000", {END}, 0, 0, 0,
     0, SNDK_WERR_MPA_FRAME, L_LLP, 0, 0x04, false, false},
    {"mpa_prefix_not_a_key", "4d5041204a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a", {END}, 0, 0, 0, 0,
     SNDK_WERR_RDMAP_VERSION, L_RDMAP, 2, 0x05, false, false},
};

static uint8_t rmem[2][64], tmem[2][64];

static void setup(struct sndk_rx *rx, struct wu_rec *r, const struct bad_case *c)
{
    wu_rec_init(r);
    memset(rmem, 0, sizeof rmem);
    r->rbuf[0] = rmem[0];
    r->rbuf[1] = rmem[1];
    r->rlen[0] = (c->flags & S_SHORT_RBUF) ? 3 : 64;
    r->rlen[1] = 64;
    r->nrbuf = (c->flags & S_NO_RBUF) ? 0 : 2;
    r->reg[0] = (struct wu_region){0xabcd0001, 0x1000, tmem[0], 48};
    r->reg[1] = (struct wu_region){0xaa01, 0x2000, tmem[1], 20};
    r->nreg = 2;
    r->msg_done_rc = c->msg_done_rc;
    r->read_req_rc = c->read_req_rc;
    struct sndk_rx_config cfg = {.crc = true, .strict = (c->flags & S_STRICT) != 0,
                                 .max_ulpdu = (c->flags & S_MAX16) ? 16 : 0};
    sndk_rx_init(rx, &cfg, &wu_ops, r);
    if (c->flags & S_MSN2)
        rx->msn_expect[SNDK_QN_SEND] = 2;
}

/* Patch, then give every FPDU of the buffer a correct CRC again, so that the fault found is the
 * intended one and not a CRC mismatch. */
static size_t make_input(const struct bad_case *c, uint8_t *buf, size_t cap)
{
    size_t len = wu_unhex(c->base, buf, cap);
    for (int i = 0; c->p[i].off >= 0; i++)
        buf[c->p[i].off] = c->p[i].val;
    if (!(c->flags & S_KEEP_CRC)) {
        size_t off = 0;
        while (off + 2 <= len) {
            uint32_t l = sndk_get_be16(buf + off);
            uint32_t fl = sndk_mpa_fpdu_len(l);
            if (off + fl > len)
                break;
            sndk_put_le32(buf + off + fl - 4, sndk_crc32c(0, buf + off, fl - 4));
            off += fl;
        }
    }
    return c->cut ? c->cut : len;
}

/* Feed in two pieces (split) and return the fault, checking the parser stays failed. staged:
 * each piece as a connection feeds its staging buffer (a whole FPDU in one step). */
static const struct sndk_wire_fault *run(const struct bad_case *c, struct sndk_rx *rx,
                                         struct wu_rec *r, const uint8_t *buf, size_t len,
                                         size_t split, bool bytewise, bool staged)
{
    setup(rx, r, c);
    int (*feed)(struct sndk_rx *, const void *, size_t) = staged ? wu_feed_staged : sndk_rx_feed;
    int rc = 0;
    if (bytewise) {
        for (size_t i = 0; i < len && rc == 0; i++)
            rc = feed(rx, buf + i, 1);
    } else {
        rc = feed(rx, buf, split);
        if (rc == 0)
            rc = feed(rx, buf + split, len - split);
    }
    if (c->flags & S_EOF) {
        CHECK_EQ_I64(rc, 0);
        rc = sndk_rx_eof(rx);
    }
    CHECK_MSG(rc == -EPROTO, "%s: rc %d", c->name, rc);
    CHECK_EQ_I64(sndk_rx_feed(rx, buf, 1), -EPROTO);
    struct iovec iov[2];
    CHECK_EQ_I64(sndk_rx_want(rx, iov, 2), 0);
    const struct sndk_wire_fault *f = sndk_rx_fault(rx);
    CHECK(f != NULL);
    /* the fault callback fired exactly once, as the last event */
    CHECK(r->nev > 0 && r->ev[r->nev - 1].type == WU_EV_FAULT);
    for (int i = 0; i < r->nev - 1; i++)
        CHECK(r->ev[i].type != WU_EV_FAULT);
    return f;
}

static void check_terminate_roundtrip(const struct bad_case *c, const struct sndk_wire_fault *f)
{
    struct sndk_term t;
    sndk_term_from_fault(&t, f);
    CHECK_EQ_U64(t.layer, c->layer);
    CHECK_EQ_U64(t.etype, c->etype);
    CHECK_EQ_U64(t.code, c->code);
    uint32_t want_hdrct = c->with_hdr ? SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D : 0;
    if (c->with_rreq)
        want_hdrct |= SNDK_TERM_HDRCT_R;
    CHECK_MSG(t.hdrct == want_hdrct, "%s: hdrct %x want %x", c->name, t.hdrct, want_hdrct);
    if (c->with_hdr) {
        CHECK_EQ_U64(t.ddp_seg_len, f->ulpdu_len);
        CHECK_EQ_U64(t.ddp_hdr_len, f->tagged ? 14 : 18);
    }
    /* send it and parse it back */
    struct sndk_fpdu fp;
    struct iovec iov[4];
    uint8_t wire[128];
    int n = sndk_fpdu_terminate(&fp, 1, &t, true, iov, 4);
    CHECK(n > 0);
    size_t wl = wu_flatten(iov, n, wire, sizeof wire);
    static struct wu_rec r;
    wu_rec_init(&r);
    struct sndk_rx rx;
    wu_rx_init(&rx, &r, true);
    CHECK_EQ_I64(sndk_rx_feed(&rx, wire, wl), SNDK_RX_TERMINATED);
    CHECK_EQ_I64(r.nev, 1);
    CHECK(r.ev[0].type == WU_EV_TERM);
    CHECK_EQ_U64(r.ev[0].term.layer, c->layer);
    CHECK_EQ_U64(r.ev[0].term.etype, c->etype);
    CHECK_EQ_U64(r.ev[0].term.code, c->code);
    CHECK_EQ_U64(r.ev[0].term.hdrct, want_hdrct);
    CHECK_EQ_U64(r.ev[0].term.rdmap_hdr_present, c->with_rreq);
    if (c->with_hdr)
        CHECK_MEM(r.ev[0].term.ddp_hdr, f->hdr, f->hdr_len);
    CHECK(strcmp(sndk_term_code_name(c->layer, c->etype, c->code), "unknown") != 0);
}

TEST(malformed_fpdu_table)
{
    static struct wu_rec r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bad_case *c = &cases[i];
        uint8_t buf[256];
        size_t len = make_input(c, buf, sizeof buf);
        struct sndk_rx rx;
        const struct sndk_wire_fault *f = run(c, &rx, &r, buf, len, len, false, false);
        CHECK_MSG(f->err == c->err, "%s: fault %s, want %s", c->name, sndk_wire_err_name(f->err),
                  sndk_wire_err_name(c->err));
        struct sndk_term_code tc = sndk_wire_err_term(f->err, f->tagged);
        CHECK_MSG(tc.layer == c->layer && tc.etype == c->etype && tc.code == c->code,
                  "%s: term %u/%u/%02x", c->name, tc.layer, tc.etype, tc.code);
        check_terminate_roundtrip(c, f);
        struct sndk_wire_fault whole = *f;
        /* the same verdict wherever the stream is cut, and byte by byte; and the same when
         * each piece is fed as staged bytes, whole FPDUs in one step */
        static struct wu_rec first;
        first = r;
        unsigned long whole_before = wu_whole_fpdus;
        for (size_t k = 0; k <= len; k++) {
            for (int staged = 0; staged < 2; staged++) {
                f = run(c, &rx, &r, buf, len, k, false, staged);
                CHECK_MSG(f->err == whole.err && f->tagged == whole.tagged &&
                              f->ulpdu_len == whole.ulpdu_len && f->hdr_len == whole.hdr_len &&
                              memcmp(f->hdr, whole.hdr, whole.hdr_len) == 0 &&
                              f->have_rreq == whole.have_rreq &&
                              memcmp(f->rreq, whole.rreq, sizeof f->rreq) == 0,
                          "%s: split at %zu%s gives %s", c->name, k, staged ? " (staged)" : "",
                          sndk_wire_err_name(f->err));
                CHECK_EQ_I64(r.nev, first.nev);
                for (int e = 0; e < r.nev && e < first.nev; e++)
                    CHECK_MSG(wu_ev_equal(&r.ev[e], &first.ev[e]),
                              "%s: split at %zu%s: event %d differs", c->name, k,
                              staged ? " (staged)" : "", e);
            }
        }
        for (int staged = 0; staged < 2; staged++) {
            f = run(c, &rx, &r, buf, len, 0, true, staged);
            CHECK_EQ_U64(f->err, whole.err);
        }
        /* unless the case is cut short of its first FPDU or is an MPA frame (whose key the
         * general way reads), the one-step path saw it */
        if (!c->cut && memcmp(buf, "MPA ", 4) != 0)
            CHECK_MSG(wu_whole_fpdus > whole_before, "%s: no FPDU taken in one step", c->name);
    }
}

TEST(reserved_bits_ignored_by_default)
{
    /* RFC 5040/5041: reserved control bits are not checked on receive */
    static struct wu_rec r;
    const struct bad_case c = {"rsvd", SEND, {{2, 0x45}, {3, 0x73}, END}, 0, 0, 0, 0,
                               SNDK_WERR_NONE, 0, 0, 0, false, false};
    uint8_t buf[64];
    size_t len = make_input(&c, buf, sizeof buf);
    struct sndk_rx rx;
    setup(&rx, &r, &c);
    CHECK_EQ_I64(sndk_rx_feed(&rx, buf, len), 0);
    CHECK_EQ_I64(r.nev, 2);
    CHECK_MEM(rmem[0], "hello", 5);
}

TEST(fault_names_and_table_complete)
{
    for (int e = 1; e < SNDK_WERR_COUNT; e++) {
        CHECK(strncmp(sndk_wire_err_name((enum sndk_wire_err)e), "SNDK_WERR_", 10) == 0);
        struct sndk_term_code tc = sndk_wire_err_term((enum sndk_wire_err)e, false);
        CHECK_MSG(strcmp(sndk_term_code_name(tc.layer, tc.etype, tc.code), "unknown") != 0,
                  "%s has no named code", sndk_wire_err_name((enum sndk_wire_err)e));
        CHECK(strcmp(sndk_term_etype_name(tc.layer, tc.etype), "unknown") != 0);
    }
    CHECK(strcmp(sndk_wire_err_name(SNDK_WERR_COUNT), "SNDK_WERR_?") == 0);
    CHECK(strcmp(sndk_term_layer_name(7), "unknown") == 0);
    CHECK(strcmp(sndk_rdmap_opcode_name(9), "reserved") == 0);
    CHECK(strcmp(sndk_rx_state_name(SNDK_RX_TRAILER), "TRAILER") == 0);
}

/* ---------------------------------------------------------------- MPA handshake */

struct mpa_bad {
    const char *name;
    bool reply;        /* parser expects a Reply */
    const char *hex;   /* frame bytes (or garbage) */
    uint16_t pd_limit;
    bool eof;          /* then the stream ends */
    int status;        /* -SNDK_MPA_E_xxx from the parser */
    size_t fail_at;    /* bytes consumed when the error is reported (0 = all) */
};

static const struct mpa_bad mpa_cases[] = {
    {"truncated_request", false, "4d504120494420526571", 0, true, -SNDK_MPA_E_TRUNCATED, 0},
    {"truncated_pdata", false, "4d504120494420526571204672616d6540010009696e69", 0, true,
     -SNDK_MPA_E_TRUNCATED, 0},
    {"http_instead_of_key", false, "474554202f20485454502f312e310d0a0d0a", 0, false,
     -SNDK_MPA_E_KEY, 1},
    {"reply_key_in_request", false, "4d504120494420526570204672616d6540010000", 0, false,
     -SNDK_MPA_E_KEY, 10},
    {"request_key_in_reply", true, "4d504120494420526571204672616d6540010000", 0, false,
     -SNDK_MPA_E_KEY, 10},
    {"rev_3", false, "4d504120494420526571204672616d6540030000", 0, false, -SNDK_MPA_E_REV, 20},
    {"rev_0", false, "4d504120494420526571204672616d6540000000", 0, false, -SNDK_MPA_E_REV, 20},
    {"reject_bit_in_request", false, "4d504120494420526571204672616d6560010000", 0, false,
     -SNDK_MPA_E_FLAGS, 20},
    {"pdata_over_256", false, "4d504120494420526571204672616d6540010101", 0, false,
     -SNDK_MPA_E_PD_LEN, 20},
    {"pdata_over_rfc_512", false, "4d504120494420526571204672616d6540010201", 512, false,
     -SNDK_MPA_E_PD_LEN, 20},
    {"rev2_word_missing", false, "4d504120494420526571204672616d6550020002abcd", 0, false,
     -SNDK_MPA_E_WORD, 22},
};

TEST(malformed_mpa_table)
{
    for (size_t i = 0; i < sizeof mpa_cases / sizeof mpa_cases[0]; i++) {
        const struct mpa_bad *c = &mpa_cases[i];
        uint8_t buf[64];
        size_t len = wu_unhex(c->hex, buf, sizeof buf);
        /* whole, then cut at every point */
        for (size_t k = 0; k <= len; k++) {
            struct sndk_mpa_rx m;
            sndk_mpa_rx_init(&m, c->reply, c->pd_limit);
            size_t u1 = 0, u2 = 0;
            int rc = sndk_mpa_rx_feed(&m, buf, k, &u1);
            if (rc == 0)
                rc = sndk_mpa_rx_feed(&m, buf + k, len - k, &u2);
            if (c->eof) {
                CHECK_EQ_I64(rc, 0);
                rc = sndk_mpa_rx_eof(&m);
            }
            CHECK_MSG(rc == c->status, "%s cut %zu: %s, want %s", c->name, k,
                      sndk_mpa_status_name(rc), sndk_mpa_status_name(c->status));
            CHECK(sndk_mpa_rx_frame(&m) == NULL);
            struct iovec iov;
            CHECK_EQ_I64(sndk_mpa_rx_want(&m, &iov), 0);
        }
        if (c->fail_at) {
            /* the verdict comes with the offending byte, not later */
            struct sndk_mpa_rx m;
            sndk_mpa_rx_init(&m, c->reply, c->pd_limit);
            CHECK_EQ_I64(sndk_mpa_rx_feed(&m, buf, c->fail_at - 1, NULL), 0);
            sndk_mpa_rx_init(&m, c->reply, c->pd_limit);
            CHECK_MSG(sndk_mpa_rx_feed(&m, buf, c->fail_at, NULL) == c->status,
                      "%s: no verdict after %zu bytes", c->name, c->fail_at);
        }
        enum sndk_wire_err we = sndk_mpa_status_werr(c->status);
        struct sndk_term_code tc = sndk_wire_err_term(we, false);
        CHECK_EQ_U64(tc.layer, SNDK_TERM_LAYER_LLP);
        CHECK_EQ_U64(tc.code, c->status == -SNDK_MPA_E_TRUNCATED ? SNDK_TERM_LLP_CONN_LOST
                                                                 : SNDK_TERM_LLP_BAD_FRAME);
    }
    /* 300 bytes of private data: over siw's limit, within the RFC's when allowed */
    uint8_t big[20 + 300] = {0};
    struct sndk_mpa_rx m;
    memcpy(big, SNDK_MPA_KEY_REQ, 16);
    big[17] = 1;
    sndk_put_be16(big + 18, 300);
    sndk_mpa_rx_init(&m, false, 512);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&m, big, sizeof big, NULL), 1);
    CHECK_EQ_U64(sndk_mpa_rx_frame(&m)->pd_len, 300);
    sndk_mpa_rx_init(&m, false, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&m, big, sizeof big, NULL), -SNDK_MPA_E_PD_LEN);
    /* reserved flag bits are ignored */
    big[16] = 0x4f;
    sndk_put_be16(big + 18, 0);
    sndk_mpa_rx_init(&m, false, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&m, big, 20, NULL), 1);
}

static int reply_check(const struct sndk_mpa_params *req, const struct sndk_mpa_params *rep,
                       struct sndk_mpa_result *res)
{
    uint8_t buf[SNDK_MPA_FRAME_MAX];
    int n = sndk_mpa_build(buf, sizeof buf, true, rep);
    CHECK(n > 0);
    struct sndk_mpa_rx m;
    sndk_mpa_rx_init(&m, true, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&m, buf, (size_t)n, NULL), 1);
    return sndk_mpa_check_reply(req, sndk_mpa_rx_frame(&m), res);
}

TEST(mpa_reply_refusals)
{
    struct sndk_mpa_policy pol = {.rev = 2, .crc = true, .ird = 4, .ord = 4, .p2p = true,
                                  .rtr = SNDK_MPA_RTR_WRITE};
    struct sndk_mpa_params req, rep;
    struct sndk_mpa_result res;
    sndk_mpa_request_params(&pol, NULL, 0, &req);

    rep = (struct sndk_mpa_params){.rev = 2, .enhanced = true, .reject = true, .pdata = "busy",
                                   .pdata_len = 4};
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_REJECTED);
    CHECK_EQ_U64(res.peer_pd_len, 4);
    CHECK_MEM(res.peer_pd, "busy", 4);
    CHECK_EQ_U64(sndk_mpa_status_werr(-SNDK_MPA_E_REJECTED), SNDK_WERR_NONE);

    rep = (struct sndk_mpa_params){.rev = 2, .enhanced = true, .markers = true, .ird = 4,
                                   .ord = 4, .p2p = true, .rtr = SNDK_MPA_RTR_WRITE};
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_MARKERS);

    rep = (struct sndk_mpa_params){.rev = 2, .enhanced = true, .ird = 4, .ord = 4, .p2p = true,
                                   .rtr = SNDK_MPA_RTR_WRITE | SNDK_MPA_RTR_READ};
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_RTR); /* two chosen */
    rep.rtr = SNDK_MPA_RTR_READ;
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_RTR); /* not offered */
    CHECK_EQ_U64(sndk_wire_err_term(sndk_mpa_status_werr(-SNDK_MPA_E_RTR), false).code,
                 SNDK_TERM_LLP_NO_RTR);
    rep.rtr = SNDK_MPA_RTR_WRITE;
    rep.ord = 9; /* the peer wants 9 reads in flight, we hold 4 */
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_IRD);
    CHECK_EQ_U64(sndk_wire_err_term(sndk_mpa_status_werr(-SNDK_MPA_E_IRD), false).code,
                 SNDK_TERM_LLP_IRD);
    rep = (struct sndk_mpa_params){.rev = 2, .ird = 4, .ord = 4};
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_REV_MISMATCH); /* no word */

    struct sndk_mpa_policy p1 = {.rev = 1, .crc = true};
    sndk_mpa_request_params(&p1, NULL, 0, &req);
    rep = (struct sndk_mpa_params){.rev = 2, .enhanced = true, .ird = 1, .ord = 1};
    CHECK_EQ_I64(reply_check(&req, &rep, &res), -SNDK_MPA_E_REV_MISMATCH);
    rep = (struct sndk_mpa_params){.rev = 1, .crc = false};
    CHECK_EQ_I64(reply_check(&req, &rep, &res), 0);
    CHECK(res.crc); /* we asked */

    /* Responder: P2P with no RTR kind it accepts -> reject frame */
    uint8_t buf[SNDK_MPA_FRAME_MAX];
    struct sndk_mpa_params sreq = {.rev = 2, .enhanced = true, .ird = 1, .ord = 1, .p2p = true,
                                   .rtr = SNDK_MPA_RTR_SEND};
    int n = sndk_mpa_build(buf, sizeof buf, false, &sreq);
    struct sndk_mpa_rx m;
    sndk_mpa_rx_init(&m, false, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&m, buf, (size_t)n, NULL), 1);
    struct sndk_mpa_policy rpol = {.rev = 2, .ird = 1, .ord = 1,
                                   .rtr = SNDK_MPA_RTR_WRITE | SNDK_MPA_RTR_READ};
    CHECK_EQ_I64(sndk_mpa_accept(sndk_mpa_rx_frame(&m), &rpol, NULL, 0, &rep, &res),
                 -SNDK_MPA_E_RTR);
    CHECK(rep.reject && rep.rev == 2 && rep.enhanced);
    CHECK(sndk_mpa_build(buf, sizeof buf, true, &rep) > 0);
}

/* ---- messages of different queues interleave (RFC 5041), and the Terminate contract ---- */

static size_t il_send(uint8_t *out, uint32_t mo, bool last, unsigned op, const char *p, size_t n)
{
    struct sndk_seg_hdr h = {.opcode = (uint8_t)op, .last = last, .qn = 0, .msn = 1, .mo = mo};
    struct sndk_fpdu f;
    struct iovec pay = {(void *)(uintptr_t)p, n}, iov[4];
    int k = sndk_fpdu_build(&f, &h, NULL, 0, &pay, 1, true, iov, 4);
    CHECK(k > 0);
    return wu_flatten(iov, k, out, 256);
}

static size_t il_term(uint8_t *out)
{
    struct sndk_term t = {.layer = SNDK_TERM_LAYER_RDMAP, .etype = 2, .code = 0x07};
    struct sndk_fpdu f;
    struct iovec iov[4];
    int k = sndk_fpdu_terminate(&f, 1, &t, true, iov, 4);
    CHECK(k > 0);
    return wu_flatten(iov, k, out, 256);
}

static void il_setup(struct sndk_rx *rx, struct wu_rec *r, uint8_t *rbuf)
{
    wu_rec_init(r);
    r->rbuf[0] = rbuf;
    r->rlen[0] = 64;
    r->nrbuf = 1;
    wu_rx_init(rx, r, true);
}

TEST(terminate_between_two_segments_of_a_send_is_accepted)
{
    static struct wu_rec r;
    static uint8_t rbuf[64];
    uint8_t buf[512];
    size_t n = il_send(buf, 0, false, SNDK_OP_SEND, "abcdefgh", 8);
    n += il_term(buf + n);
    for (size_t split = 0; split <= n; split++) {
        struct sndk_rx rx;
        il_setup(&rx, &r, rbuf);
        int rc1 = sndk_rx_feed(&rx, buf, split);
        int rc2 = split == n ? rc1 : sndk_rx_feed(&rx, buf + split, n - split);
        CHECK_EQ_I64(rc1, split == n ? SNDK_RX_TERMINATED : 0);
        CHECK_EQ_I64(rc2, SNDK_RX_TERMINATED);
        CHECK(sndk_rx_fault(&rx) == NULL);
        CHECK_EQ_U64(rx.state, SNDK_RX_CLOSED);
        CHECK_EQ_I64(r.nev, 2);
        CHECK(r.ev[0].type == WU_EV_SEG);
        CHECK(r.ev[1].type == WU_EV_TERM);
        CHECK_EQ_U64(r.ev[1].term.code, 0x07);
        /* bytes after the Terminate, in a later call */
        CHECK_EQ_I64(sndk_rx_feed(&rx, buf, 1), -EPIPE);
    }
}

TEST(read_request_between_two_segments_of_a_send_is_accepted)
{
    static struct wu_rec r;
    static uint8_t rbuf[64];
    uint8_t buf[512];
    size_t n = il_send(buf, 0, false, SNDK_OP_SEND, "abcdefgh", 8);
    struct sndk_read_req rr = {.sink_stag = 0x100, .size = 8, .src_stag = 0x200, .src_to = 64};
    struct sndk_fpdu f;
    struct iovec iov[4];
    int k = sndk_fpdu_read_req(&f, 1, &rr, true, iov, 4);
    CHECK(k > 0);
    n += wu_flatten(iov, k, buf + n, sizeof buf - n);
    n += il_send(buf + n, 8, true, SNDK_OP_SEND, "ijkl", 4);
    struct sndk_rx rx;
    il_setup(&rx, &r, rbuf);
    CHECK_EQ_I64(sndk_rx_feed(&rx, buf, n), 0);
    CHECK(sndk_rx_fault(&rx) == NULL);
    CHECK_EQ_I64(r.nev, 4); /* Send segment, Read Request, Send segment, Send message */
    CHECK(r.ev[1].type == WU_EV_RREQ);
    CHECK_EQ_U64(r.ev[1].rr.src_to, 64);
    CHECK(r.ev[3].type == WU_EV_MSG);
    CHECK_MEM(rbuf, "abcdefghijkl", 12);
    /* another Send opcode inside the unfinished Send is still refused */
    n = il_send(buf, 0, false, SNDK_OP_SEND, "abcdefgh", 8);
    n += il_send(buf + n, 8, true, SNDK_OP_SEND_SE, "ijkl", 4);
    il_setup(&rx, &r, rbuf);
    CHECK_EQ_I64(sndk_rx_feed(&rx, buf, n), -EPROTO);
    CHECK_EQ_U64(sndk_rx_fault(&rx)->err, SNDK_WERR_OPCODE);
}

TEST(advance_reports_the_terminate_on_the_byte_that_completes_it)
{
    static struct wu_rec r;
    static uint8_t rbuf[64];
    uint8_t buf[256];
    size_t n = il_term(buf);
    struct sndk_rx rx;
    il_setup(&rx, &r, rbuf);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_I64(sndk_rx_feed(&rx, buf + i, 1), i + 1 == n ? SNDK_RX_TERMINATED : 0);
    CHECK_EQ_I64(sndk_rx_advance(&rx, 0), 0);
    CHECK_EQ_I64(sndk_rx_feed(&rx, buf, 1), -EPIPE);
}

/* Linux siw's Terminates on x86 (its control word is a little-endian C bitfield): Layer and
 * EType nibbles swapped, M/D/R in bits 0..2 of byte 2. Recognised when a flag sits in those
 * RFC-reserved bits and the RFC's flag bits are clear; the included headers then decode as in
 * an RFC Terminate. Without flags the layouts are indistinguishable: the RFC's is used. */
TEST(terminate_in_siw_little_endian_layout_is_read_as_siw_meant_it)
{
    uint8_t body[4 + 2 + SNDK_DDP_UNTAGGED_HDR_LEN + SNDK_RDMAP_READ_REQ_LEN];
    memset(body, 0, sizeof body);
    /* RDMAP (0) / Remote Protection (1) / code 0x00, M D R: as siw sends it for a refused Read */
    body[0] = 0x10;
    body[1] = 0x00;
    body[2] = 0x07;
    body[3] = 0x00;
    body[4] = 0x00, body[5] = 28;                   /* DDP Segment Length */
    body[6] = SNDK_DDP_LAST | 1;                    /* untagged header of the Read Request */
    body[7] = 0x41;                                 /* RDMAP v1, Read Request */
    body[4 + 2 + SNDK_DDP_UNTAGGED_HDR_LEN] = 0xAB; /* first byte of the Read Request body */
    struct sndk_term t;
    CHECK_EQ_I64(sndk_term_decode(&t, body, sizeof body), 0);
    CHECK(t.siw_layout);
    CHECK_EQ_U64(t.layer, SNDK_TERM_LAYER_RDMAP);
    CHECK_EQ_U64(t.etype, 1);
    CHECK_EQ_U64(t.code, 0);
    CHECK_EQ_U64(t.hdrct, SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D | SNDK_TERM_HDRCT_R);
    CHECK_EQ_U64(t.ddp_seg_len, 28);
    CHECK_EQ_U64(t.ddp_hdr_len, SNDK_DDP_UNTAGGED_HDR_LEN);
    CHECK(t.rdmap_hdr_present);
    CHECK_EQ_U64(t.rdmap_hdr[0], 0xAB);

    /* the same Terminate in the RFC's layout: same result, not flagged */
    body[0] = 0x01;
    body[2] = 0xE0;
    CHECK_EQ_I64(sndk_term_decode(&t, body, sizeof body), 0);
    CHECK(!t.siw_layout);
    CHECK_EQ_U64(t.layer, SNDK_TERM_LAYER_RDMAP);
    CHECK_EQ_U64(t.etype, 1);
    CHECK_EQ_U64(t.hdrct, SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D | SNDK_TERM_HDRCT_R);
    CHECK(t.rdmap_hdr_present);

    /* only M from siw (bit 0): Layer DDP (1) / EType tagged (1) reads the same either way */
    body[0] = 0x11;
    body[2] = 0x01;
    CHECK_EQ_I64(sndk_term_decode(&t, body, 6), 0);
    CHECK(t.siw_layout);
    CHECK_EQ_U64(t.hdrct, SNDK_TERM_HDRCT_M);
    CHECK_EQ_U64(t.ddp_seg_len, 28);

    /* siw's MPA CRC error, sent without any flag: LLP (2) / MPA (0) / 0x02 in siw's layout is
     * RDMAP / remote operation / 0x02 in the RFC's, a code RFC 5040 does not define: siw's */
    body[0] = 0x02;
    body[1] = 0x02;
    body[2] = 0x00;
    CHECK_EQ_I64(sndk_term_decode(&t, body, 4), 0);
    CHECK(t.siw_layout);
    CHECK_EQ_U64(t.layer, SNDK_TERM_LAYER_LLP);
    CHECK_EQ_U64(t.etype, SNDK_TERM_LLP_MPA);
    CHECK_EQ_U64(t.code, SNDK_TERM_LLP_CRC);
    CHECK_EQ_U64(t.hdrct, 0);
    /* the RFC's CRC error (byte 0 = 0x20) is defined as sent: not siw's */
    body[0] = 0x20;
    CHECK_EQ_I64(sndk_term_decode(&t, body, 4), 0);
    CHECK(!t.siw_layout);
    CHECK_EQ_U64(t.layer, SNDK_TERM_LAYER_LLP);
    CHECK_EQ_U64(t.code, SNDK_TERM_LLP_CRC);
    body[1] = 0x00;

    /* siw without any flag, both readings defined: read in the RFC's layout (nibbles as sent) */
    body[0] = 0x10;
    body[2] = 0x00;
    CHECK_EQ_I64(sndk_term_decode(&t, body, 4), 0);
    CHECK(!t.siw_layout);
    CHECK_EQ_U64(t.layer, 1);
    CHECK_EQ_U64(t.etype, 0);

    /* reserved bits 3..4 set: neither layout; RFC decode, flags ignored as reserved */
    body[0] = 0x01;
    body[2] = 0x09;
    CHECK_EQ_I64(sndk_term_decode(&t, body, 4), 0);
    CHECK(!t.siw_layout);
    CHECK_EQ_U64(t.hdrct, 0);
}
