/* RX parser: a state machine with one function per state (HDR, DATA, TRAILER), fed by a pull
 * interface so that payload is read from the socket straight into its target. */
#include "iwarp/parser.h"

#include <errno.h>
#include <string.h>

#include "iwarp/crc32c.h"

static const char *const state_names[SNDK_RX_STATE_COUNT] = {
    [SNDK_RX_HDR] = "HDR",       [SNDK_RX_DATA] = "DATA",   [SNDK_RX_TRAILER] = "TRAILER",
    [SNDK_RX_CLOSED] = "CLOSED", [SNDK_RX_ERROR] = "ERROR", [SNDK_RX_HELD] = "HELD",
};

const char *sndk_rx_state_name(enum sndk_rx_state s)
{
    return (unsigned)s < SNDK_RX_STATE_COUNT ? state_names[s] : "?";
}

/* Bytes of a header read before the segment type is known: the MPA length plus a tagged header.
 * Every valid FPDU is at least 20 bytes (2 + 14 + 0 pad + 4), so this never over-reads. */
#define HDR_PROBE (SNDK_MPA_LEN_SIZE + SNDK_DDP_TAGGED_HDR_LEN)
/* Thresholds inside the probe at which fields are checked, so that the verdict on a stream
 * never depends on how it was cut: the length (2 bytes), the two control bytes (4 bytes). */
#define HDR_AT_LEN  SNDK_MPA_LEN_SIZE
#define HDR_AT_CTRL (SNDK_MPA_LEN_SIZE + 2u)

void sndk_rx_init(struct sndk_rx *rx, const struct sndk_rx_config *cfg,
                  const struct sndk_rx_ops *ops, void *ctx)
{
    memset(rx, 0, sizeof *rx);
    rx->cfg = *cfg;
    if (rx->cfg.max_ulpdu == 0 || rx->cfg.max_ulpdu > SNDK_MPA_ULPDU_MAX)
        rx->cfg.max_ulpdu = SNDK_MPA_ULPDU_MAX;
    rx->ops = ops;
    rx->ctx = ctx;
    rx->state = SNDK_RX_HDR;
    rx->hdr_need = HDR_PROBE;
    for (int q = 0; q < SNDK_QN_COUNT; q++)
        rx->msn_expect[q] = 1; /* RFC 5041: the first message on each queue has MSN 1 */
}

const struct sndk_wire_fault *sndk_rx_fault(const struct sndk_rx *rx)
{
    return rx->state == SNDK_RX_ERROR ? &rx->fault : NULL;
}

/* Record the first fault and stop. with_hdr: the current segment's header is complete and
 * decoded, so the Terminate may carry it. */
static int rx_fail(struct sndk_rx *rx, enum sndk_wire_err err, bool with_hdr)
{
    if (rx->state == SNDK_RX_ERROR)
        return -EPROTO;
    struct sndk_wire_fault *f = &rx->fault;
    memset(f, 0, sizeof *f);
    f->err = (unsigned)err < SNDK_WERR_COUNT && err != SNDK_WERR_NONE ? err : SNDK_WERR_LOCAL;
    /* While a header is still coming in, hdr[] is current; later it may already hold the next
     * FPDU's first bytes, so the decoded segment is the reference. */
    if (with_hdr || rx->state != SNDK_RX_HDR)
        f->tagged = rx->seg.tagged;
    else
        f->tagged = rx->hdr_got > HDR_AT_LEN && (rx->hdr[SNDK_MPA_LEN_SIZE] & SNDK_DDP_TAGGED);
    if (with_hdr) {
        f->ulpdu_len = rx->seg.ulpdu_len;
        f->hdr_len = rx->cur_ddp_len;
        memcpy(f->hdr, rx->cur_ddp, rx->cur_ddp_len);
        if (rx->seg.opcode == SNDK_OP_READ_REQ && !rx->seg.tagged &&
            rx->body_len == SNDK_RDMAP_READ_REQ_LEN) {
            f->have_rreq = true;
            memcpy(f->rreq, rx->hdr + SNDK_MPA_LEN_SIZE + SNDK_DDP_UNTAGGED_HDR_LEN,
                   SNDK_RDMAP_READ_REQ_LEN);
        }
    }
    rx->state = SNDK_RX_ERROR;
    if (rx->ops->fault)
        rx->ops->fault(rx->ctx, f);
    return -EPROTO;
}

/* A callback's return value: 0 or -SNDK_WERR_xxx. */
static int rx_cb_result(struct sndk_rx *rx, int rc)
{
    if (rc == 0)
        return 0;
    int e = -rc;
    return rx_fail(rx, (e > 0 && e < SNDK_WERR_COUNT) ? (enum sndk_wire_err)e : SNDK_WERR_LOCAL,
                   true);
}

/* ---------------------------------------------------------------- HDR */

/* The length field is in: bound it. */
static int hdr_check_len(struct sndk_rx *rx)
{
    uint32_t l = sndk_get_be16(rx->hdr);
    if (l > rx->cfg.max_ulpdu || l < sizeof(struct sndk_ddp_ctrl))
        return rx_fail(rx, SNDK_WERR_SEG_LEN, false);
    return 0;
}

/* "MPA " cannot start an FPDU (its RDMAP control byte ' ' says version 0). At the start of a
 * stream it is a second MPA Request or Reply where the first FPDU must be: hold the header
 * until the 16-byte key is in, so that the fault says what it is (RFC 5044: an invalid MPA
 * frame) rather than "RDMAP version" (docs/wire.md, "The first FPDU after the MPA Reply"). */
static bool mpa_key_start(const struct sndk_rx *rx)
{
    return rx->fpdus == 0 && !rx->ut.active && !rx->tg.active &&
           memcmp(rx->hdr, "MPA ", HDR_AT_CTRL) == 0;
}

/* The key is in: an MPA frame, or the RDMAP version fault the control bytes already showed. */
static int hdr_check_mpa_key(struct sndk_rx *rx)
{
    if (memcmp(rx->hdr, SNDK_MPA_KEY_REQ, SNDK_MPA_KEY_LEN) == 0 ||
        memcmp(rx->hdr, SNDK_MPA_KEY_REP, SNDK_MPA_KEY_LEN) == 0)
        return rx_fail(rx, SNDK_WERR_MPA_FRAME, false);
    return rx_fail(rx, SNDK_WERR_RDMAP_VERSION, false);
}

/* The two control bytes are in: versions, opcode, T bit, and from them the header size. */
static int hdr_check_ctrl(struct sndk_rx *rx)
{
    const struct sndk_ddp_ctrl *c = (const struct sndk_ddp_ctrl *)(rx->hdr + SNDK_MPA_LEN_SIZE);
    uint32_t l = sndk_get_be16(rx->hdr);
    if (mpa_key_start(rx)) {
        rx->hdr_need = SNDK_MPA_KEY_LEN;
        return 0;
    }
    if (sndk_ddp_version(c) != SNDK_DDP_VERSION)
        return rx_fail(rx, SNDK_WERR_DDP_VERSION, false);
    if (rx->cfg.strict && (c->ddp & SNDK_DDP_RSVD))
        return rx_fail(rx, SNDK_WERR_DDP_RSVD, false);
    if (sndk_rdmap_version(c) != SNDK_RDMAP_VERSION)
        return rx_fail(rx, SNDK_WERR_RDMAP_VERSION, false);
    if (rx->cfg.strict && (c->rdmap & SNDK_RDMAP_RSVD))
        return rx_fail(rx, SNDK_WERR_RDMAP_RSVD, false);
    unsigned op = sndk_rdmap_opcode(c);
    if (op >= SNDK_OP_COUNT || sndk_op_is_tagged(op) != sndk_ddp_tagged(c))
        return rx_fail(rx, SNDK_WERR_OPCODE, false);

    uint32_t hl = sndk_ddp_tagged(c) ? SNDK_DDP_TAGGED_HDR_LEN : SNDK_DDP_UNTAGGED_HDR_LEN;
    uint32_t body = 0;
    if (op == SNDK_OP_READ_REQ) {
        if (l != SNDK_READ_REQ_ULPDU_LEN)
            return rx_fail(rx, SNDK_WERR_SEG_LEN, false);
        body = SNDK_RDMAP_READ_REQ_LEN;
    } else if (op == SNDK_OP_TERMINATE) {
        if (l < hl + 4) /* at least the Terminate Control word */
            return rx_fail(rx, SNDK_WERR_SEG_LEN, false);
        body = l - hl < SNDK_TERM_BODY_MAX ? l - hl : SNDK_TERM_BODY_MAX;
    }
    if (l < hl)
        return rx_fail(rx, SNDK_WERR_SEG_LEN, false);
    rx->body_len = body;
    rx->hdr_need = SNDK_MPA_LEN_SIZE + hl + body;
    return 0;
}

/* Ask the placement callback for the next chunk of target memory. */
static int data_next_chunk(struct sndk_rx *rx)
{
    uint32_t rem = rx->seg.len - rx->pay_got;
    rx->place_i = 0;
    rx->place_off = 0;
    rx->place_n = 0;
    if (rx->seg.opcode == SNDK_OP_TERMINATE) {
        /* bytes beyond the decoded Terminate body: informational, dropped */
        rx->place[0] = (struct iovec){rx->discard, rem < sizeof rx->discard ? rem : sizeof rx->discard};
        rx->place_n = 1;
        rx->place_end = rx->pay_got + (uint32_t)rx->place[0].iov_len;
        return 0;
    }
    int n = rx->ops->place(rx->ctx, &rx->seg, rx->pay_got, rx->place, SNDK_RX_PLACE_IOV);
    if (n == SNDK_RX_PLACE_LATER && rx->pay_got == 0 && !rx->seg.tagged &&
        sndk_op_is_send(rx->seg.opcode) && rx->seg.mo == 0)
        return SNDK_RX_HELD_RC;
    if (n < 0)
        return rx_cb_result(rx, n == SNDK_RX_PLACE_LATER ? -SNDK_WERR_LOCAL : n);
    if (n > SNDK_RX_PLACE_IOV)
        return rx_fail(rx, SNDK_WERR_LOCAL, true);
    uint32_t sum = 0;
    int kept = 0;
    for (int i = 0; i < n && sum < rem; i++) {
        size_t len = rx->place[i].iov_len;
        if (len == 0)
            continue;
        if (len > rem - sum) /* never place past the segment, whatever the callback says */
            len = rem - sum;
        rx->place[kept++] = (struct iovec){rx->place[i].iov_base, len};
        sum += (uint32_t)len;
    }
    if (rem > 0 && sum == 0)
        return rx_fail(rx, SNDK_WERR_LOCAL, true);
    rx->place_n = kept;
    rx->place_end = rx->pay_got + sum;
    return 0;
}

/* Whole header in: decode, check against the connection's state, pick the payload target. */
static int hdr_complete(struct sndk_rx *rx)
{
    const uint8_t *d = rx->hdr + SNDK_MPA_LEN_SIZE;
    const struct sndk_ddp_ctrl *c = (const struct sndk_ddp_ctrl *)d;
    struct sndk_rx_seg *s = &rx->seg;
    memset(s, 0, sizeof *s);
    s->ulpdu_len = sndk_get_be16(rx->hdr);
    s->opcode = (uint8_t)sndk_rdmap_opcode(c);
    s->tagged = sndk_ddp_tagged(c);
    s->last = sndk_ddp_last(c);
    rx->cur_ddp_len = (uint8_t)(s->tagged ? SNDK_DDP_TAGGED_HDR_LEN : SNDK_DDP_UNTAGGED_HDR_LEN);
    memcpy(rx->cur_ddp, d, rx->cur_ddp_len);
    s->len = s->ulpdu_len - rx->cur_ddp_len - rx->body_len;
    if (rx->cfg.crc)
        rx->crc = sndk_crc32c(0, rx->hdr, rx->hdr_need);

    if (s->tagged) {
        const struct sndk_ddp_tagged_hdr *t = (const struct sndk_ddp_tagged_hdr *)d;
        s->stag = sndk_get_be32(t->stag);
        s->to = sndk_get_be64(t->to);
        if (rx->tg.active) {
            /* one unfinished tagged message at a time; its segments follow each other */
            if (s->opcode != rx->tg.opcode)
                return rx_fail(rx, SNDK_WERR_OPCODE, true);
            if (s->stag != rx->tg.stag)
                return rx_fail(rx, SNDK_WERR_STAG, true);
            if (s->to != rx->tg.next_to)
                return rx_fail(rx, SNDK_WERR_BOUNDS, true);
        }
        if (s->len && s->to + (s->len - 1) < s->to)
            return rx_fail(rx, SNDK_WERR_TO_WRAP, true);
    } else {
        const struct sndk_ddp_untagged_hdr *u = (const struct sndk_ddp_untagged_hdr *)d;
        s->qn = sndk_get_be32(u->qn);
        s->msn = sndk_get_be32(u->msn);
        s->mo = sndk_get_be32(u->mo);
        if (sndk_op_has_inval(s->opcode))
            s->inval_stag = sndk_get_be32(u->rsvdulp);
        uint32_t want_qn = sndk_op_is_send(s->opcode)       ? SNDK_QN_SEND
                           : s->opcode == SNDK_OP_READ_REQ ? SNDK_QN_READ_REQ
                                                            : SNDK_QN_TERMINATE;
        /* RFC 5041: messages of different queues may interleave. Only Sends (QN 0) span
         * segments, so the unfinished message constrains Sends only; a Read Request (QN 1)
         * or a Terminate (QN 2) between two segments of a Send is accepted. */
        bool cont = rx->ut.active && sndk_op_is_send(s->opcode);
        if (cont && s->opcode != rx->ut.opcode)
            return rx_fail(rx, SNDK_WERR_OPCODE, true);
        if (s->qn != want_qn)
            return rx_fail(rx, SNDK_WERR_QN, true);
        uint32_t msn = cont ? rx->ut.msn : rx->msn_expect[s->qn];
        if (s->msn != msn)
            return rx_fail(rx, SNDK_WERR_MSN_RANGE, true);
        uint32_t mo = cont ? rx->ut.next_mo : 0;
        if (s->mo != mo || (uint64_t)s->mo + s->len > UINT32_MAX)
            return rx_fail(rx, SNDK_WERR_MO, true);
        if (!sndk_op_is_send(s->opcode) && !s->last)
            return rx_fail(rx, SNDK_WERR_NO_LAST, true);
    }

    rx->pay_got = 0;
    rx->place_n = rx->place_i = 0;
    rx->place_end = 0;
    rx->trl_got = 0;
    rx->trl_need = sndk_mpa_pad(s->ulpdu_len) + SNDK_MPA_CRC_SIZE;
    bool call_place = sndk_op_is_send(s->opcode) || (s->tagged && s->len > 0) ||
                      (s->opcode == SNDK_OP_TERMINATE && s->len > 0);
    if (call_place) {
        int rc = data_next_chunk(rx);
        if (rc == SNDK_RX_HELD_RC) {
            rx->state = SNDK_RX_HELD;
            return 0;
        }
        if (rc < 0)
            return rc;
    }
    rx->state = s->len > 0 ? SNDK_RX_DATA : SNDK_RX_TRAILER;
    return 0;
}

int sndk_rx_resume(struct sndk_rx *rx)
{
    if (rx->state != SNDK_RX_HELD)
        return -EINVAL;
    int rc = data_next_chunk(rx);
    if (rc == SNDK_RX_HELD_RC)
        return SNDK_RX_HELD_RC;
    if (rc < 0)
        return -EPROTO; /* rx_fail moved to ERROR */
    rx->state = rx->seg.len > 0 ? SNDK_RX_DATA : SNDK_RX_TRAILER;
    return 0;
}

static int rx_hdr(struct sndk_rx *rx, size_t *n)
{
    while (*n > 0 && rx->state == SNDK_RX_HDR) {
        uint32_t target = rx->hdr_got < HDR_AT_LEN    ? HDR_AT_LEN
                          : rx->hdr_got < HDR_AT_CTRL ? HDR_AT_CTRL
                                                      : rx->hdr_need;
        size_t k = target - rx->hdr_got;
        if (k > *n)
            k = *n;
        rx->hdr_got += (uint32_t)k;
        *n -= k;
        if (rx->hdr_got != target)
            break;
        int rc;
        if (target == HDR_AT_LEN)
            rc = hdr_check_len(rx);
        else if (target == HDR_AT_CTRL)
            rc = hdr_check_ctrl(rx);
        else if (mpa_key_start(rx))
            rc = hdr_check_mpa_key(rx);
        else
            rc = 0;
        if (rc < 0)
            return rc;
        if (rx->hdr_got == rx->hdr_need && target != HDR_AT_LEN)
            return hdr_complete(rx);
    }
    return 0;
}

/* ---------------------------------------------------------------- DATA */

static int rx_data(struct sndk_rx *rx, size_t *n)
{
    while (*n > 0) {
        if (rx->place_i == rx->place_n) {
            /* chunk used up mid-segment: the last offer ended here, so nothing can remain */
            return -EINVAL;
        }
        struct iovec *v = &rx->place[rx->place_i];
        size_t k = v->iov_len - rx->place_off;
        if (k > *n)
            k = *n;
        if (rx->cfg.crc)
            rx->crc = sndk_crc32c(rx->crc, (const uint8_t *)v->iov_base + rx->place_off, k);
        rx->place_off += k;
        rx->pay_got += (uint32_t)k;
        *n -= k;
        if (rx->place_off == v->iov_len) {
            rx->place_i++;
            rx->place_off = 0;
        }
        if (rx->pay_got == rx->seg.len) {
            rx->state = SNDK_RX_TRAILER;
            return 0;
        }
        if (rx->place_i == rx->place_n) {
            int rc = data_next_chunk(rx);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- TRAILER */

static int seg_deliver(struct sndk_rx *rx)
{
    struct sndk_rx_seg *s = &rx->seg;
    const struct sndk_rx_ops *ops = rx->ops;
    int rc = 0;
    switch (s->opcode) {
    case SNDK_OP_WRITE:
    case SNDK_OP_READ_RESP: {
        uint64_t total = (rx->tg.active ? rx->tg.len : 0) + s->len;
        rx->tg.active = !s->last;
        rx->tg.opcode = s->opcode;
        rx->tg.stag = s->stag;
        rx->tg.next_to = s->to + s->len;
        rx->tg.len = total;
        if (ops->seg_done)
            rc = ops->seg_done(rx->ctx, s);
        if (rc == 0 && s->last && ops->msg_done)
            rc = ops->msg_done(rx->ctx, s, total);
        break;
    }
    case SNDK_OP_SEND:
    case SNDK_OP_SEND_INV:
    case SNDK_OP_SEND_SE:
    case SNDK_OP_SEND_SE_INV:
        rx->ut.active = !s->last;
        rx->ut.opcode = s->opcode;
        rx->ut.msn = s->msn;
        rx->ut.next_mo = s->mo + s->len;
        if (s->last)
            rx->msn_expect[SNDK_QN_SEND]++;
        if (ops->seg_done)
            rc = ops->seg_done(rx->ctx, s);
        if (rc == 0 && s->last && ops->msg_done)
            rc = ops->msg_done(rx->ctx, s, (uint64_t)s->mo + s->len);
        break;
    case SNDK_OP_READ_REQ: {
        struct sndk_read_req rr;
        sndk_read_req_get(&rr, (const struct sndk_rdmap_read_req *)(rx->hdr + SNDK_MPA_LEN_SIZE +
                                                                    SNDK_DDP_UNTAGGED_HDR_LEN));
        rx->msn_expect[SNDK_QN_READ_REQ]++;
        rc = ops->read_req ? ops->read_req(rx->ctx, s, &rr) : -SNDK_WERR_OPCODE;
        break;
    }
    case SNDK_OP_TERMINATE: {
        struct sndk_term t;
        sndk_term_decode(&t, rx->hdr + SNDK_MPA_LEN_SIZE + SNDK_DDP_UNTAGGED_HDR_LEN,
                         rx->body_len);
        rx->msn_expect[SNDK_QN_TERMINATE]++;
        rx->state = SNDK_RX_CLOSED;
        if (ops->terminate)
            ops->terminate(rx->ctx, s, &t);
        return 0;
    }
    default:
        return rx_fail(rx, SNDK_WERR_OPCODE, true);
    }
    return rx_cb_result(rx, rc);
}

static int rx_trailer(struct sndk_rx *rx, size_t *n)
{
    size_t k = rx->trl_need - rx->trl_got;
    if (k > *n)
        k = *n;
    rx->trl_got += (uint32_t)k;
    *n -= k;
    if (rx->trl_got < rx->trl_need)
        return 0;
    unsigned pad = rx->trl_need - SNDK_MPA_CRC_SIZE;
    if (rx->cfg.crc) {
        uint32_t c = sndk_crc32c(rx->crc, rx->trailer, pad);
        if (c != sndk_get_le32(rx->trailer + pad) || rx->fpdus + 1 == rx->fault_crc_at)
            return rx_fail(rx, SNDK_WERR_CRC, false);
    }
    rx->fpdus++;
    rx->state = SNDK_RX_HDR;
    rx->hdr_got = 0;
    rx->hdr_need = HDR_PROBE;
    return seg_deliver(rx); /* body_len still describes this segment until the next header */
}

/* ---------------------------------------------------------------- pull interface */

int sndk_rx_want(struct sndk_rx *rx, struct iovec *iov, int max_iov)
{
    int n = 0;
    size_t total = 0;
    rx->wanted = 0;
    if (max_iov <= 0)
        return 0;
    switch (rx->state) {
    case SNDK_RX_HDR: {
        uint32_t upto = rx->hdr_got < HDR_AT_CTRL ? HDR_PROBE : rx->hdr_need;
        iov[n++] = (struct iovec){rx->hdr + rx->hdr_got, upto - rx->hdr_got};
        total = upto - rx->hdr_got;
        rx->wanted = total;
        return n;
    }
    case SNDK_RX_DATA:
        for (int i = rx->place_i; i < rx->place_n && n < max_iov; i++) {
            size_t off = i == rx->place_i ? rx->place_off : 0;
            iov[n++] = (struct iovec){(uint8_t *)rx->place[i].iov_base + off,
                                      rx->place[i].iov_len - off};
            total += rx->place[i].iov_len - off;
        }
        /* the trailer may follow only when this chunk ends the payload */
        if (n == rx->place_n - rx->place_i && rx->place_end == rx->seg.len && n < max_iov) {
            iov[n++] = (struct iovec){rx->trailer, rx->trl_need};
            total += rx->trl_need;
        } else {
            rx->wanted = total;
            return n;
        }
        break;
    case SNDK_RX_TRAILER:
        iov[n++] = (struct iovec){rx->trailer + rx->trl_got, rx->trl_need - rx->trl_got};
        total += rx->trl_need - rx->trl_got;
        break;
    default:
        return 0;
    }
    /* After a complete trailer, the next FPDU's probe: saves a read per FPDU. */
    if (n < max_iov) {
        iov[n++] = (struct iovec){rx->hdr, HDR_PROBE};
        total += HDR_PROBE;
    }
    rx->wanted = total;
    return n;
}

int sndk_rx_advance(struct sndk_rx *rx, size_t n)
{
    if (rx->state == SNDK_RX_ERROR)
        return -EPROTO;
    if (rx->state == SNDK_RX_CLOSED)
        return n ? -EPIPE : 0;
    if (n > rx->wanted)
        return -EINVAL;
    rx->wanted -= n;
    while (n > 0) {
        int rc;
        switch (rx->state) {
        case SNDK_RX_HDR:
            rc = rx_hdr(rx, &n);
            break;
        case SNDK_RX_DATA:
            rc = rx_data(rx, &n);
            break;
        case SNDK_RX_TRAILER:
            rc = rx_trailer(rx, &n);
            break;
        case SNDK_RX_HELD:
            /* a Send's header ends its offer: nothing can follow it in this call */
            return -EINVAL;
        case SNDK_RX_CLOSED:
            /* A Terminate completed within this call: the stream is over, whatever follows
             * it in these bytes is dropped. */
            rx->wanted = 0;
            return SNDK_RX_TERMINATED;
        default:
            return -EPROTO;
        }
        if (rc < 0) {
            rx->wanted = 0;
            return rc;
        }
    }
    if (rx->state == SNDK_RX_CLOSED)
        return SNDK_RX_TERMINATED; /* the last byte completed a Terminate */
    if (rx->state == SNDK_RX_HELD)
        return SNDK_RX_HELD_RC;
    return rx->state == SNDK_RX_ERROR ? -EPROTO : 0;
}

int sndk_rx_feed_round(struct sndk_rx *rx, const void *buf, size_t len, size_t *used)
{
    const uint8_t *p = buf;
    *used = 0;
    struct iovec iov[SNDK_RX_PLACE_IOV + 2];
    int n = sndk_rx_want(rx, iov, (int)(sizeof iov / sizeof iov[0]));
    if (n == 0)
        return rx->state == SNDK_RX_CLOSED ? -EPIPE : -EPROTO;
    size_t copied = 0;
    for (int i = 0; i < n && copied < len; i++) {
        size_t k = iov[i].iov_len < len - copied ? iov[i].iov_len : len - copied;
        memcpy(iov[i].iov_base, p + copied, k);
        copied += k;
    }
    *used = copied;
    return sndk_rx_advance(rx, copied);
}

int sndk_rx_feed(struct sndk_rx *rx, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        size_t used;
        int rc = sndk_rx_feed_round(rx, p, len, &used);
        p += used;
        len -= used;
        if (rc != 0)
            return rc;
    }
    return 0;
}

int sndk_rx_take_fpdu(struct sndk_rx *rx, const void *buf, size_t len, size_t *took)
{
    const uint8_t *p = buf;
    *took = 0;
    if (rx->state != SNDK_RX_HDR || rx->hdr_got != 0 || len < HDR_AT_CTRL)
        return 0;
    /* Every byte of buf is read once, into the header, the trailer or its place, and only
     * those copies are looked at: buf may be shared memory its writer still changes. */
    memcpy(rx->hdr, p, HDR_AT_CTRL);
    size_t whole = sndk_mpa_fpdu_len(sndk_get_be16(rx->hdr));
    if (whole > len)
        return 0; /* a bad length fails the same way in want/advance, once its bytes are in */
    rx->wanted = 0;
    /* the header's checks at the thresholds rx_hdr checks them at: a fault reads hdr_got */
    rx->hdr_got = HDR_AT_LEN;
    int rc = hdr_check_len(rx);
    if (rc < 0)
        return rc;
    rx->hdr_got = HDR_AT_CTRL;
    rc = hdr_check_ctrl(rx);
    if (rc < 0)
        return rc;
    if (mpa_key_start(rx)) {
        /* the key's 16 bytes decide which fault this is: the general way, from the start */
        rx->hdr_got = 0;
        rx->hdr_need = HDR_PROBE;
        return 0;
    }
    /* hdr_check_ctrl bounded the header by the length field, which bounds the FPDU */
    memcpy(rx->hdr + HDR_AT_CTRL, p + HDR_AT_CTRL, rx->hdr_need - HDR_AT_CTRL);
    rx->hdr_got = rx->hdr_need;
    size_t off = rx->hdr_need;
    rc = hdr_complete(rx);
    if (rc < 0)
        return rc;
    if (rx->state == SNDK_RX_HELD) {
        *took = off;
        return SNDK_RX_HELD_RC;
    }
    /* the payload, chunk by chunk into what place() offered (rx_data asks for the next) */
    while (rx->state == SNDK_RX_DATA) {
        const struct iovec *v = &rx->place[rx->place_i];
        size_t k = v->iov_len - rx->place_off;
        memcpy((uint8_t *)v->iov_base + rx->place_off, p + off, k);
        off += k;
        *took = off;
        rc = rx_data(rx, &k);
        if (rc < 0)
            return rc;
    }
    memcpy(rx->trailer, p + off, rx->trl_need);
    size_t trl = rx->trl_need;
    *took = off + trl;
    rc = rx_trailer(rx, &trl);
    if (rc < 0)
        return rc;
    return rx->state == SNDK_RX_CLOSED ? SNDK_RX_TERMINATED : 0;
}

int sndk_rx_eof(struct sndk_rx *rx)
{
    if (rx->state == SNDK_RX_ERROR)
        return -EPROTO;
    if (rx->state == SNDK_RX_CLOSED || (rx->state == SNDK_RX_HDR && rx->hdr_got == 0))
        return 0;
    return rx_fail(rx, SNDK_WERR_CONN_LOST, false);
}
