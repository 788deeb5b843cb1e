#include "wire_util.h"

#include <string.h>

#include "iwarp/fpdu.h"

size_t wu_unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;
    for (const char *p = hex; *p; p++) {
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            v = *p - 'A' + 10;
        else
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            if (n < cap)
                out[n] = (uint8_t)(hi << 4 | v);
            n++;
            hi = -1;
        }
    }
    return n;
}

const struct wu_vector wu_mpa_vectors[4] = {
    {"req_rev1", "4d504120494420526571204672616d6540010009696e692d7064617461"},
    {"req_rev2", "4d504120494420526571204672616d65500200078008c008756c70"},
    {"rep_rev2", "4d504120494420526570204672616d655002000480088008"},
    {"rep_reject", "4d504120494420526570204672616d656001000f6e6f206d61726b6572732068657265"},
};

const struct wu_vector wu_fpdu_vectors[11] = {
    {"send", "001741430000000000000000000000010000000068656c6c6f000000b990b10c"},
    {"send_inv", "0016414411223344000000000000000200000000696e7621d8826d7f"},
    {"send_se", "001441450000000000000000000000030000000073650000392d928a"},
    {"send_se_inv", "00174146556677880000000000000004000000007365696e760000002a4514ae"},
    {"write_l0", "002e8140abcd00010000000000001000000102030405060708090a0b0c0d0e0f10111213141516"
                 "1718191a1b1c1d1e1f8c8ce2df"},
    {"read_req", "002e4141000000000000000100000001000000000000aa0100000000000020000000001400"
                 "00bb020000000000003000de50e060"},
    {"read_resp", "0022c1420000aa010000000000002000525252525252525252525252525252525252525253db"
                  "65df"},
    {"rtr_write", "000ec140000000010000000000000000ebd34c5f"},
    {"term_ddp", "00264147000000000000000200000001000000001100c0000000c140dead00010000000000000000"
                 "3aa5d3b1"},
    {"term_rdmap", "001641470000000000000002000000020000000002090000ea21b726"},
    {"send_nocrc", WU_NOCRC_SEND},
};

static struct wu_ev *ev_add(struct wu_rec *r, enum wu_ev_type t)
{
    if (r->nev >= WU_MAX_EV)
        return NULL;
    struct wu_ev *e = &r->ev[r->nev++];
    memset(e, 0, sizeof *e);
    e->type = t;
    return e;
}

static int cb_place(void *ctx, const struct sndk_rx_seg *seg, uint32_t off, struct iovec *iov,
                    int max_iov)
{
    struct wu_rec *r = ctx;
    r->place_calls++;
    uint8_t *dst;
    if (seg->tagged) {
        const struct wu_region *g = NULL;
        for (int i = 0; i < r->nreg; i++)
            if (r->reg[i].stag == seg->stag)
                g = &r->reg[i];
        if (!g)
            return -SNDK_WERR_STAG;
        if (seg->to < g->to || seg->to - g->to > g->len || seg->len > g->len - (seg->to - g->to))
            return -SNDK_WERR_BOUNDS;
        dst = g->buf + (seg->to - g->to);
    } else {
        if (seg->msn == 0 || seg->msn > (uint32_t)r->nrbuf)
            return -SNDK_WERR_MSN_NO_BUF;
        size_t cap = r->rlen[seg->msn - 1];
        if ((uint64_t)seg->mo + seg->len > cap)
            return -SNDK_WERR_TOO_LONG;
        dst = r->rbuf[seg->msn - 1] + seg->mo;
    }
    if (r->max_iov && max_iov > r->max_iov)
        max_iov = r->max_iov;
    int n = 0;
    uint32_t pos = off;
    while (pos < seg->len && n < max_iov) {
        size_t k = seg->len - pos;
        if (r->chunk && k > r->chunk)
            k = r->chunk;
        iov[n++] = (struct iovec){dst + pos, k};
        pos += (uint32_t)k;
    }
    return n;
}

static int cb_seg_done(void *ctx, const struct sndk_rx_seg *seg)
{
    struct wu_ev *e = ev_add(ctx, WU_EV_SEG);
    if (e)
        e->seg = *seg;
    return 0;
}

static int cb_msg_done(void *ctx, const struct sndk_rx_seg *seg, uint64_t len)
{
    struct wu_rec *r = ctx;
    struct wu_ev *e = ev_add(r, WU_EV_MSG);
    if (e) {
        e->seg = *seg;
        e->msg_len = len;
    }
    return r->msg_done_rc;
}

static int cb_read_req(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_read_req *rr)
{
    struct wu_rec *r = ctx;
    struct wu_ev *e = ev_add(r, WU_EV_RREQ);
    if (e) {
        e->seg = *seg;
        e->rr = *rr;
    }
    return r->read_req_rc;
}

static void cb_terminate(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_term *t)
{
    struct wu_ev *e = ev_add(ctx, WU_EV_TERM);
    if (e) {
        e->seg = *seg;
        e->term = *t;
    }
}

static void cb_fault(void *ctx, const struct sndk_wire_fault *f)
{
    struct wu_ev *e = ev_add(ctx, WU_EV_FAULT);
    if (e)
        e->fault = f->err;
}

const struct sndk_rx_ops wu_ops = {
    .place = cb_place,
    .seg_done = cb_seg_done,
    .msg_done = cb_msg_done,
    .read_req = cb_read_req,
    .terminate = cb_terminate,
    .fault = cb_fault,
};

void wu_rec_init(struct wu_rec *r)
{
    memset(r, 0, sizeof *r);
}

void wu_rx_init(struct sndk_rx *rx, struct wu_rec *r, bool crc)
{
    struct sndk_rx_config cfg = {.crc = crc};
    sndk_rx_init(rx, &cfg, &wu_ops, r);
}

static bool seg_equal(const struct sndk_rx_seg *a, const struct sndk_rx_seg *b)
{
    return a->opcode == b->opcode && a->tagged == b->tagged && a->last == b->last &&
           a->ulpdu_len == b->ulpdu_len && a->len == b->len && a->stag == b->stag &&
           a->to == b->to && a->qn == b->qn && a->msn == b->msn && a->mo == b->mo &&
           a->inval_stag == b->inval_stag;
}

bool wu_ev_equal(const struct wu_ev *a, const struct wu_ev *b)
{
    if (a->type != b->type || !seg_equal(&a->seg, &b->seg) || a->msg_len != b->msg_len ||
        a->fault != b->fault)
        return false;
    if (a->type == WU_EV_RREQ)
        return a->rr.sink_stag == b->rr.sink_stag && a->rr.sink_to == b->rr.sink_to &&
               a->rr.size == b->rr.size && a->rr.src_stag == b->rr.src_stag &&
               a->rr.src_to == b->rr.src_to;
    if (a->type == WU_EV_TERM)
        return a->term.layer == b->term.layer && a->term.etype == b->term.etype &&
               a->term.code == b->term.code && a->term.hdrct == b->term.hdrct &&
               a->term.ddp_seg_len == b->term.ddp_seg_len &&
               a->term.ddp_hdr_len == b->term.ddp_hdr_len &&
               memcmp(a->term.ddp_hdr, b->term.ddp_hdr, a->term.ddp_hdr_len) == 0 &&
               a->term.rdmap_hdr_present == b->term.rdmap_hdr_present;
    return true;
}

unsigned long wu_whole_fpdus;

int wu_feed_staged(struct sndk_rx *rx, const void *bytes, size_t len)
{
    const uint8_t *buf = bytes;
    while (len > 0) {
        size_t took;
        int rc = sndk_rx_take_fpdu(rx, buf, len, &took);
        buf += took;
        len -= took;
        wu_whole_fpdus += took != 0 || rc != 0;
        if (rc != 0)
            return rc;
        if (took)
            continue;
        /* one round of want/advance, as the connection's feed does between whole FPDUs */
        size_t used;
        rc = sndk_rx_feed_round(rx, buf, len, &used);
        buf += used;
        len -= used;
        if (rc != 0)
            return rc;
    }
    return 0;
}

size_t wu_flatten(const struct iovec *iov, int n, uint8_t *buf, size_t cap)
{
    return sndk_iov_gather(iov, n, buf, cap);
}
