/* MPA Request/Reply codec and RFC 6581 negotiation. */
#include "iwarp/mpa.h"

#include <errno.h>
#include <string.h>

#define RR_HDR_LEN ((uint32_t)sizeof(struct sndk_mpa_rr_hdr))
#define WORD_LEN   ((uint32_t)sizeof(struct sndk_mpa_v2_word))

static const char *const status_names[SNDK_MPA_E_COUNT] = {
    [SNDK_MPA_OK] = "SNDK_MPA_OK",
    [SNDK_MPA_E_KEY] = "SNDK_MPA_E_KEY",
    [SNDK_MPA_E_REV] = "SNDK_MPA_E_REV",
    [SNDK_MPA_E_FLAGS] = "SNDK_MPA_E_FLAGS",
    [SNDK_MPA_E_PD_LEN] = "SNDK_MPA_E_PD_LEN",
    [SNDK_MPA_E_WORD] = "SNDK_MPA_E_WORD",
    [SNDK_MPA_E_TRUNCATED] = "SNDK_MPA_E_TRUNCATED",
    [SNDK_MPA_E_REJECTED] = "SNDK_MPA_E_REJECTED",
    [SNDK_MPA_E_MARKERS] = "SNDK_MPA_E_MARKERS",
    [SNDK_MPA_E_REV_MISMATCH] = "SNDK_MPA_E_REV_MISMATCH",
    [SNDK_MPA_E_IRD] = "SNDK_MPA_E_IRD",
    [SNDK_MPA_E_RTR] = "SNDK_MPA_E_RTR",
};

const char *sndk_mpa_status_name(int status)
{
    if (status < 0)
        status = -status;
    return status < SNDK_MPA_E_COUNT ? status_names[status] : "SNDK_MPA_E_?";
}

enum sndk_wire_err sndk_mpa_status_werr(int status)
{
    if (status < 0)
        status = -status;
    switch (status) {
    case SNDK_MPA_OK:
    case SNDK_MPA_E_REJECTED:
        return SNDK_WERR_NONE;
    case SNDK_MPA_E_TRUNCATED:
        return SNDK_WERR_CONN_LOST;
    case SNDK_MPA_E_IRD:
        return SNDK_WERR_MPA_IRD;
    case SNDK_MPA_E_RTR:
        return SNDK_WERR_MPA_RTR;
    default:
        return SNDK_WERR_MPA_FRAME;
    }
}

static const char *const rx_state_names[SNDK_MPA_RX_STATE_COUNT] = {
    [SNDK_MPA_RX_HDR] = "HDR",
    [SNDK_MPA_RX_PDATA] = "PDATA",
    [SNDK_MPA_RX_DONE] = "DONE",
    [SNDK_MPA_RX_ERROR] = "ERROR",
};

const char *sndk_mpa_rx_state_name(enum sndk_mpa_rx_state s)
{
    return (unsigned)s < SNDK_MPA_RX_STATE_COUNT ? rx_state_names[s] : "?";
}

/* ---------------------------------------------------------------- build */

int sndk_mpa_build(uint8_t *buf, size_t cap, bool reply, const struct sndk_mpa_params *p)
{
    if (p->rev != SNDK_MPA_REV1 && p->rev != SNDK_MPA_REV2)
        return -EINVAL;
    if (!reply && p->reject)
        return -EINVAL;
    bool word = p->rev == SNDK_MPA_REV2 && p->enhanced;
    if (!word && (p->p2p || p->rtr || p->enhanced))
        return -EINVAL;
    if (p->ird > SNDK_MPA_V2_IRDORD_MAX || p->ord > SNDK_MPA_V2_IRDORD_MAX ||
        (p->rtr & ~SNDK_MPA_RTR_ALL))
        return -EINVAL;
    uint32_t pd = (word ? WORD_LEN : 0) + p->pdata_len;
    if (pd > SNDK_MPA_PD_MAX)
        return -EMSGSIZE;
    if (p->pdata_len && !p->pdata)
        return -EINVAL;
    if (cap < RR_HDR_LEN + pd)
        return -ENOSPC;

    struct sndk_mpa_rr_hdr *h = (struct sndk_mpa_rr_hdr *)buf;
    memcpy(h->key, reply ? SNDK_MPA_KEY_REP : SNDK_MPA_KEY_REQ, SNDK_MPA_KEY_LEN);
    h->flags = (uint8_t)((p->markers ? SNDK_MPA_FLAG_MARKERS : 0u) |
                         (p->crc ? SNDK_MPA_FLAG_CRC : 0u) |
                         (p->reject ? SNDK_MPA_FLAG_REJECT : 0u) |
                         (word ? SNDK_MPA_FLAG_ENHANCED : 0u));
    h->rev = p->rev;
    sndk_put_be16(h->pd_len, (uint16_t)pd);
    uint8_t *d = buf + RR_HDR_LEN;
    if (word) {
        struct sndk_mpa_v2_word *w = (struct sndk_mpa_v2_word *)d;
        uint16_t ird = p->ird, ord = p->ord;
        if (p->p2p)
            ird |= SNDK_MPA_V2_P2P;
        if (p->rtr & SNDK_MPA_RTR_SEND)
            ird |= SNDK_MPA_V2_RTR_SEND;
        if (p->rtr & SNDK_MPA_RTR_WRITE)
            ord |= SNDK_MPA_V2_RTR_WRITE;
        if (p->rtr & SNDK_MPA_RTR_READ)
            ord |= SNDK_MPA_V2_RTR_READ;
        sndk_put_be16(w->ird, ird);
        sndk_put_be16(w->ord, ord);
        d += WORD_LEN;
    }
    if (p->pdata_len)
        memcpy(d, p->pdata, p->pdata_len);
    return (int)(RR_HDR_LEN + pd);
}

/* ---------------------------------------------------------------- incremental parse */

void sndk_mpa_rx_init(struct sndk_mpa_rx *m, bool expect_reply, uint16_t pd_limit)
{
    memset(m, 0, sizeof *m);
    m->reply = expect_reply;
    m->pd_limit = pd_limit == 0 ? SNDK_MPA_PD_MAX
                                : (pd_limit > SNDK_MPA_PD_MAX_RFC ? SNDK_MPA_PD_MAX_RFC : pd_limit);
    m->state = SNDK_MPA_RX_HDR;
    m->need = RR_HDR_LEN;
}

static int rx_fail(struct sndk_mpa_rx *m, enum sndk_mpa_status st)
{
    m->state = SNDK_MPA_RX_ERROR;
    m->status = -(int)st;
    return m->status;
}

/* The fixed 20 bytes are in. Reserved flag bits are ignored (RFC 5044; siw used one of them
 * experimentally). */
static int rx_hdr_done(struct sndk_mpa_rx *m)
{
    const struct sndk_mpa_rr_hdr *h = (const struct sndk_mpa_rr_hdr *)m->buf;
    if (h->rev != SNDK_MPA_REV1 && h->rev != SNDK_MPA_REV2)
        return rx_fail(m, SNDK_MPA_E_REV);
    if (!m->reply && (h->flags & SNDK_MPA_FLAG_REJECT))
        return rx_fail(m, SNDK_MPA_E_FLAGS);
    uint16_t pd = sndk_mpa_rr_pd_len(h);
    if (pd > m->pd_limit)
        return rx_fail(m, SNDK_MPA_E_PD_LEN);
    m->need = RR_HDR_LEN + pd;
    m->state = SNDK_MPA_RX_PDATA;
    return 0;
}

static int rx_frame_done(struct sndk_mpa_rx *m)
{
    const struct sndk_mpa_rr_hdr *h = (const struct sndk_mpa_rr_hdr *)m->buf;
    struct sndk_mpa_frame *f = &m->frame;
    memset(f, 0, sizeof *f);
    f->reply = m->reply;
    f->flags = h->flags;
    f->rev = h->rev;
    f->markers = h->flags & SNDK_MPA_FLAG_MARKERS;
    f->crc = h->flags & SNDK_MPA_FLAG_CRC;
    f->reject = h->flags & SNDK_MPA_FLAG_REJECT;
    f->enhanced = h->flags & SNDK_MPA_FLAG_ENHANCED;
    f->pd_len = sndk_mpa_rr_pd_len(h);
    f->pd = m->buf + RR_HDR_LEN;
    f->ulp_pd = f->pd;
    f->ulp_pd_len = f->pd_len;
    if (f->rev == SNDK_MPA_REV2 && f->enhanced) {
        if (f->pd_len < WORD_LEN)
            return rx_fail(m, SNDK_MPA_E_WORD);
        const struct sndk_mpa_v2_word *w = (const struct sndk_mpa_v2_word *)f->pd;
        uint16_t ird = sndk_get_be16(w->ird), ord = sndk_get_be16(w->ord);
        f->has_word = true;
        f->ird = ird & SNDK_MPA_V2_IRDORD_MAX;
        f->ord = ord & SNDK_MPA_V2_IRDORD_MAX;
        f->p2p = ird & SNDK_MPA_V2_P2P;
        f->rtr = (uint8_t)(((ird & SNDK_MPA_V2_RTR_SEND) ? SNDK_MPA_RTR_SEND : 0) |
                           ((ord & SNDK_MPA_V2_RTR_WRITE) ? SNDK_MPA_RTR_WRITE : 0) |
                           ((ord & SNDK_MPA_V2_RTR_READ) ? SNDK_MPA_RTR_READ : 0));
        f->ulp_pd = f->pd + WORD_LEN;
        f->ulp_pd_len = (uint16_t)(f->pd_len - WORD_LEN);
    }
    m->state = SNDK_MPA_RX_DONE;
    return 1;
}

int sndk_mpa_rx_want(struct sndk_mpa_rx *m, struct iovec *iov)
{
    if (m->state != SNDK_MPA_RX_HDR && m->state != SNDK_MPA_RX_PDATA)
        return 0;
    iov->iov_base = m->buf + m->got;
    iov->iov_len = m->need - m->got;
    return 1;
}

int sndk_mpa_rx_advance(struct sndk_mpa_rx *m, size_t n)
{
    if (m->state == SNDK_MPA_RX_ERROR)
        return m->status;
    if (m->state == SNDK_MPA_RX_DONE)
        return n ? -EINVAL : 1;
    if (n > m->need - m->got)
        return -EINVAL;
    uint32_t from = m->got;
    m->got += (uint32_t)n;
    if (m->state == SNDK_MPA_RX_HDR) {
        /* Judge the key byte by byte, so garbage fails at once instead of waiting for 20 bytes
         * that may never come. */
        const char *key = m->reply ? SNDK_MPA_KEY_REP : SNDK_MPA_KEY_REQ;
        for (uint32_t i = from; i < m->got && i < SNDK_MPA_KEY_LEN; i++)
            if (m->buf[i] != (uint8_t)key[i])
                return rx_fail(m, SNDK_MPA_E_KEY);
        if (m->got < RR_HDR_LEN)
            return 0;
        int rc = rx_hdr_done(m);
        if (rc < 0)
            return rc;
    }
    if (m->got < m->need)
        return 0;
    return rx_frame_done(m);
}

int sndk_mpa_rx_feed(struct sndk_mpa_rx *m, const void *buf, size_t len, size_t *consumed)
{
    const uint8_t *p = buf;
    size_t used = 0;
    int rc = m->state == SNDK_MPA_RX_DONE ? 1 : m->state == SNDK_MPA_RX_ERROR ? m->status : 0;
    while (rc == 0 && used < len) {
        struct iovec iov;
        if (!sndk_mpa_rx_want(m, &iov))
            break;
        size_t k = iov.iov_len < len - used ? iov.iov_len : len - used;
        memcpy(iov.iov_base, p + used, k);
        used += k;
        rc = sndk_mpa_rx_advance(m, k);
    }
    if (consumed)
        *consumed = used;
    return rc;
}

int sndk_mpa_rx_eof(struct sndk_mpa_rx *m)
{
    if (m->state == SNDK_MPA_RX_DONE)
        return 1;
    if (m->state == SNDK_MPA_RX_ERROR)
        return m->status;
    if (m->got == 0)
        return 0;
    return rx_fail(m, SNDK_MPA_E_TRUNCATED);
}

const struct sndk_mpa_frame *sndk_mpa_rx_frame(const struct sndk_mpa_rx *m)
{
    return m->state == SNDK_MPA_RX_DONE ? &m->frame : NULL;
}

/* ---------------------------------------------------------------- negotiation */

static uint16_t min16(uint16_t a, uint16_t b)
{
    return a < b ? a : b;
}

void sndk_mpa_request_params(const struct sndk_mpa_policy *pol, const void *pd, uint16_t pd_len,
                             struct sndk_mpa_params *req)
{
    memset(req, 0, sizeof *req);
    req->rev = pol->rev == SNDK_MPA_REV1 ? SNDK_MPA_REV1 : SNDK_MPA_REV2;
    req->crc = pol->crc;
    req->pdata = pd;
    req->pdata_len = pd_len;
    if (req->rev == SNDK_MPA_REV2) {
        req->enhanced = true;
        req->ird = min16(pol->ird, SNDK_MPA_V2_IRDORD_MAX);
        req->ord = min16(pol->ord, SNDK_MPA_V2_IRDORD_MAX);
        if (pol->p2p) {
            req->p2p = true;
            req->rtr = pol->rtr ? (uint8_t)(pol->rtr & SNDK_MPA_RTR_ALL)
                                : (uint8_t)(SNDK_MPA_RTR_WRITE | SNDK_MPA_RTR_READ);
        }
    }
}

void sndk_mpa_reject_params(const struct sndk_mpa_frame *req, const void *pd, uint16_t pd_len,
                            struct sndk_mpa_params *reply)
{
    memset(reply, 0, sizeof *reply);
    reply->rev = req->rev;
    reply->crc = req->crc;
    reply->reject = true;
    /* a Rev 2 enhanced peer expects the word even in a reject */
    reply->enhanced = req->has_word;
    reply->pdata = pd;
    reply->pdata_len = pd_len;
}

int sndk_mpa_accept(const struct sndk_mpa_frame *req, const struct sndk_mpa_policy *pol,
                    const void *pd, uint16_t pd_len, struct sndk_mpa_params *reply,
                    struct sndk_mpa_result *res)
{
    memset(res, 0, sizeof *res);
    if (req->markers) {
        static const char why[] = "markers not supported";
        sndk_mpa_reject_params(req, why, sizeof why - 1, reply);
        return -SNDK_MPA_E_MARKERS;
    }
    memset(reply, 0, sizeof *reply);
    /* answer in the Request's revision: a Rev 1 Request gets a Rev 1 Reply (siw does the same) */
    reply->rev = req->rev;
    reply->crc = req->crc || pol->crc;
    reply->pdata = pd;
    reply->pdata_len = pd_len;
    res->rev = req->rev;
    res->crc = reply->crc;
    res->peer_pd = req->ulp_pd;
    res->peer_pd_len = req->ulp_pd_len;
    res->ird = pol->ird;
    res->ord = pol->ord;
    if (req->has_word) {
        reply->enhanced = true;
        res->enhanced = true;
        res->peer_ird = req->ird;
        res->peer_ord = req->ord;
        /* our ORD may not exceed the peer's IRD: lower it (the Responder may lower) */
        res->ird = min16(pol->ird, SNDK_MPA_V2_IRDORD_MAX);
        res->ord = min16(min16(pol->ord, SNDK_MPA_V2_IRDORD_MAX), req->ird);
        reply->ird = res->ird;
        reply->ord = res->ord;
        if (req->p2p) {
            uint8_t ok = req->rtr & (pol->rtr ? pol->rtr : SNDK_MPA_RTR_ALL);
            uint8_t pick = (ok & SNDK_MPA_RTR_WRITE)  ? SNDK_MPA_RTR_WRITE
                           : (ok & SNDK_MPA_RTR_READ) ? SNDK_MPA_RTR_READ
                           : (ok & SNDK_MPA_RTR_SEND) ? SNDK_MPA_RTR_SEND
                                                       : SNDK_MPA_RTR_NONE;
            if (pick == SNDK_MPA_RTR_NONE) {
                static const char why[] = "no matching RTR option";
                sndk_mpa_reject_params(req, why, sizeof why - 1, reply);
                memset(res, 0, sizeof *res);
                return -SNDK_MPA_E_RTR;
            }
            reply->p2p = true;
            reply->rtr = pick;
            res->p2p = true;
            res->rtr = pick;
        }
    }
    if ((reply->enhanced ? WORD_LEN : 0) + pd_len > SNDK_MPA_PD_MAX)
        return -EMSGSIZE;
    return 0;
}

int sndk_mpa_check_reply(const struct sndk_mpa_params *req, const struct sndk_mpa_frame *rep,
                         struct sndk_mpa_result *res)
{
    memset(res, 0, sizeof *res);
    res->peer_pd = rep->ulp_pd;
    res->peer_pd_len = rep->ulp_pd_len;
    if (rep->reject)
        return -SNDK_MPA_E_REJECTED;
    if (rep->markers)
        return -SNDK_MPA_E_MARKERS;
    if (rep->rev > req->rev)
        return -SNDK_MPA_E_REV_MISMATCH;
    bool req_word = req->rev == SNDK_MPA_REV2 && req->enhanced;
    if (rep->rev == SNDK_MPA_REV2 && req_word != rep->has_word)
        return -SNDK_MPA_E_REV_MISMATCH; /* siw drops a Rev 2 Reply without the word, too */
    res->rev = rep->rev;
    res->crc = req->crc || rep->crc;
    res->ird = req->ird;
    res->ord = req->ord;
    if (!rep->has_word) {
        /* Rev 1 (or fallback to it): no IRD/ORD exchange, no RTR; limits stay out of band */
        res->ird = req_word ? req->ird : 0;
        res->ord = req_word ? req->ord : 0;
        return 0;
    }
    res->enhanced = true;
    res->peer_ird = rep->ird;
    res->peer_ord = rep->ord;
    /* the peer will send up to its ORD Read Requests: they must fit our IRD */
    if (rep->ord > req->ird)
        return -SNDK_MPA_E_IRD;
    /* ours must fit the peer's IRD: adjust down, as siw's relaxed policy does */
    res->ord = min16(req->ord, rep->ird);
    if (req->p2p) {
        if (rep->p2p) {
            unsigned r = rep->rtr;
            if (r == 0 || (r & (r - 1)) || !(r & req->rtr))
                return -SNDK_MPA_E_RTR; /* must choose exactly one of ours */
            res->p2p = true;
            res->rtr = (uint8_t)r;
            if (r == SNDK_MPA_RTR_READ && res->ord == 0)
                return -SNDK_MPA_E_IRD; /* a Read RTR needs ORD >= 1 */
        }
    } else if (rep->p2p) {
        return -SNDK_MPA_E_RTR; /* an RTR we never offered */
    }
    return 0;
}
