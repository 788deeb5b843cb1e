/* FPDU encoders. */
#include "iwarp/fpdu.h"

#include <errno.h>
#include <string.h>

#include "iwarp/crc32c.h"

static const uint8_t zero_pad[4];

static uint32_t hdr_len_of(unsigned opcode)
{
    return sndk_op_is_tagged(opcode) ? SNDK_DDP_TAGGED_HDR_LEN : SNDK_DDP_UNTAGGED_HDR_LEN;
}

int sndk_fpdu_build(struct sndk_fpdu *f, const struct sndk_seg_hdr *h, const void *body,
                    size_t body_len, const struct iovec *pay, int npay, bool crc,
                    struct iovec *out, int max_out)
{
    if (h->opcode >= SNDK_OP_COUNT || npay < 0)
        return -EINVAL;
    bool tagged = sndk_op_is_tagged(h->opcode);
    uint32_t hl = hdr_len_of(h->opcode);
    if (body_len > SNDK_FPDU_HDR_MAX - SNDK_MPA_LEN_SIZE - hl)
        return -EINVAL;
    size_t pay_len = sndk_iov_len(pay, npay);
    if (hl + body_len + pay_len > SNDK_MPA_ULPDU_MAX)
        return -EMSGSIZE;

    int need = 2;
    for (int i = 0; i < npay; i++)
        need += pay[i].iov_len != 0;
    if (need > max_out)
        return -ENOSPC;

    uint32_t ulpdu = (uint32_t)(hl + body_len + pay_len);
    sndk_put_be16(f->hdr, (uint16_t)ulpdu);
    uint8_t *d = f->hdr + SNDK_MPA_LEN_SIZE;
    if (tagged) {
        struct sndk_ddp_tagged_hdr *t = (struct sndk_ddp_tagged_hdr *)d;
        sndk_ddp_ctrl_set(&t->ctrl, true, h->last, h->opcode);
        sndk_put_be32(t->stag, h->stag);
        sndk_put_be64(t->to, h->to);
    } else {
        struct sndk_ddp_untagged_hdr *u = (struct sndk_ddp_untagged_hdr *)d;
        sndk_ddp_ctrl_set(&u->ctrl, false, h->last, h->opcode);
        sndk_put_be32(u->rsvdulp, sndk_op_has_inval(h->opcode) ? h->stag : 0);
        sndk_put_be32(u->qn, h->qn);
        sndk_put_be32(u->msn, h->msn);
        sndk_put_be32(u->mo, h->mo);
    }
    if (body_len)
        memcpy(d + hl, body, body_len);
    f->hdr_len = (uint8_t)(SNDK_MPA_LEN_SIZE + hl + body_len);
    f->ulpdu_len = ulpdu;
    f->payload_len = (uint32_t)pay_len;

    unsigned pad = sndk_mpa_pad(ulpdu);
    memset(f->trailer, 0, pad);
    uint32_t c = 0;
    if (crc) {
        c = sndk_crc32c(0, f->hdr, f->hdr_len);
        c = sndk_crc32c_iov(c, pay, npay);
        c = sndk_crc32c(c, zero_pad, pad);
    }
    sndk_put_le32(f->trailer + pad, c);
    f->trailer_len = (uint8_t)(pad + SNDK_MPA_CRC_SIZE);
    f->wire_len = sndk_mpa_fpdu_len(ulpdu);

    int n = 0;
    out[n++] = (struct iovec){f->hdr, f->hdr_len};
    for (int i = 0; i < npay; i++)
        if (pay[i].iov_len)
            out[n++] = pay[i];
    out[n++] = (struct iovec){f->trailer, f->trailer_len};
    return n;
}

int sndk_fpdu_read_req(struct sndk_fpdu *f, uint32_t msn, const struct sndk_read_req *rr, bool crc,
                       struct iovec *out, int max_out)
{
    struct sndk_rdmap_read_req w;
    sndk_read_req_put(&w, rr);
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_READ_REQ, .last = true, .qn = SNDK_QN_READ_REQ,
                             .msn = msn};
    return sndk_fpdu_build(f, &h, &w, sizeof w, NULL, 0, crc, out, max_out);
}

int sndk_fpdu_terminate(struct sndk_fpdu *f, uint32_t msn, const struct sndk_term *t, bool crc,
                        struct iovec *out, int max_out)
{
    uint8_t body[SNDK_TERM_BODY_MAX];
    size_t len = sndk_term_encode(t, body, sizeof body);
    if (len == 0)
        return -EINVAL;
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_TERMINATE, .last = true, .qn = SNDK_QN_TERMINATE,
                             .msn = msn};
    return sndk_fpdu_build(f, &h, body, len, NULL, 0, crc, out, max_out);
}

/* ---------------------------------------------------------------- segmentation */

uint32_t sndk_fpdu_max_payload(uint32_t max_fpdu, uint32_t hdr_len)
{
    if (max_fpdu == 0)
        max_fpdu = SNDK_FPDU_MAX_DEFAULT;
    if (max_fpdu > SNDK_FPDU_MAX_MAX)
        max_fpdu = SNDK_FPDU_MAX_MAX;
    uint32_t room = max_fpdu - SNDK_MPA_LEN_SIZE - SNDK_MPA_CRC_SIZE - hdr_len;
    if (room > SNDK_MPA_ULPDU_MAX - hdr_len)
        room = SNDK_MPA_ULPDU_MAX - hdr_len;
    return room & ~7u;
}

static int msg_init(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg,
                    const struct sndk_seg_hdr *h, const struct iovec *sgl, int nsge)
{
    uint32_t max_fpdu = cfg->max_fpdu ? cfg->max_fpdu : SNDK_FPDU_MAX_DEFAULT;
    if (max_fpdu < SNDK_FPDU_MAX_MIN || max_fpdu > SNDK_FPDU_MAX_MAX || nsge < 0 ||
        (nsge > 0 && !sgl))
        return -EINVAL;
    memset(m, 0, sizeof *m);
    m->h = *h;
    m->sgl = sgl;
    m->nsge = nsge;
    m->total = sndk_iov_len(sgl, nsge);
    m->crc = cfg->crc;
    m->max_payload = sndk_fpdu_max_payload(max_fpdu, hdr_len_of(h->opcode));
    if (sndk_op_is_tagged(h->opcode)) {
        if (m->total && h->to + (m->total - 1) < h->to) /* TO wrap (RFC 5041: not allowed) */
            return -EINVAL;
    } else if (m->total > UINT32_MAX) { /* MO is 32 bits */
        return -EINVAL;
    }
    return 0;
}

int sndk_tx_send(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg, uint32_t msn,
                 unsigned opcode, uint32_t inv_stag, const struct iovec *sgl, int nsge)
{
    if (!sndk_op_is_send(opcode))
        return -EINVAL;
    struct sndk_seg_hdr h = {.opcode = (uint8_t)opcode, .qn = SNDK_QN_SEND, .msn = msn,
                             .stag = sndk_op_has_inval(opcode) ? inv_stag : 0};
    return msg_init(m, cfg, &h, sgl, nsge);
}

int sndk_tx_write(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg, uint32_t stag,
                  uint64_t to, const struct iovec *sgl, int nsge)
{
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .stag = stag, .to = to};
    return msg_init(m, cfg, &h, sgl, nsge);
}

int sndk_tx_read_resp(struct sndk_tx_msg *m, const struct sndk_tx_cfg *cfg, uint32_t sink_stag,
                      uint64_t sink_to, const struct iovec *sgl, int nsge)
{
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_READ_RESP, .stag = sink_stag, .to = sink_to};
    return msg_init(m, cfg, &h, sgl, nsge);
}

int sndk_tx_msg_next(struct sndk_tx_msg *m, struct sndk_fpdu *f, struct iovec *out, int max_out)
{
    if (m->finished)
        return 0;
    if (max_out < 3)
        return -ENOSPC;

    /* Payload iovecs of this segment go straight into out[1..], then the header/trailer are
     * wrapped around them by sndk_fpdu_build (which copies the array entries, not the data). */
    struct iovec pay[64];
    int maxp = (int)(sizeof pay / sizeof pay[0]);
    if (maxp > max_out - 2)
        maxp = max_out - 2;
    int np = 0;
    uint32_t seg = 0;
    while (seg < m->max_payload && m->sge < m->nsge && np < maxp) {
        const struct iovec *s = &m->sgl[m->sge];
        size_t avail = s->iov_len - m->sge_off;
        if (avail == 0) {
            m->sge++;
            m->sge_off = 0;
            continue;
        }
        size_t take = m->max_payload - seg;
        if (take > avail)
            take = avail;
        pay[np++] = (struct iovec){(uint8_t *)s->iov_base + m->sge_off, take};
        seg += (uint32_t)take;
        m->sge_off += take;
        if (m->sge_off == s->iov_len) {
            m->sge++;
            m->sge_off = 0;
        }
    }
    struct sndk_seg_hdr h = m->h;
    h.last = m->done + seg == m->total;
    int n = sndk_fpdu_build(f, &h, NULL, 0, pay, np, m->crc, out, max_out);
    if (n < 0)
        return n;
    m->done += seg;
    if (sndk_op_is_tagged(h.opcode))
        m->h.to += seg;
    else
        m->h.mo += seg;
    m->finished = h.last;
    return n;
}

/* ---------------------------------------------------------------- iovec helpers */

size_t sndk_iov_len(const struct iovec *iov, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    return len;
}

size_t sndk_iov_gather(const struct iovec *iov, int n, void *buf, size_t cap)
{
    size_t off = 0;
    for (int i = 0; i < n && off < cap; i++) {
        size_t k = iov[i].iov_len < cap - off ? iov[i].iov_len : cap - off;
        if (k)
            memcpy((uint8_t *)buf + off, iov[i].iov_base, k);
        off += k;
    }
    return off;
}

void sndk_iov_advance(struct iovec **iov, int *n, size_t bytes)
{
    while (*n > 0 && bytes >= (*iov)->iov_len) {
        bytes -= (*iov)->iov_len;
        (*iov)++;
        (*n)--;
    }
    if (*n > 0 && bytes) {
        (*iov)->iov_base = (uint8_t *)(*iov)->iov_base + bytes;
        (*iov)->iov_len -= bytes;
    }
}
