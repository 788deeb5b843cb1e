/* Placement (docs/datapath.md): what the parser finds becomes placed payload and completions.
 * The parser (iwarp/parser.h) calls these through its ops table, under qp->rx_lock:
 * - place: the first segment of a Send takes the next posted receive (own queue or SRQ) and
 *   checks its memory; a Write or Read Response segment is checked against its token (the one
 *   access check); each says where the payload goes, which the parser fills in place;
 * - msg_done: a Send's last segment completes its receive into the receive CQ; a Read
 *   Response's last segment hands the Read back to TX (sndk_tx_orq_pop), which retires it;
 * - read_req: a peer's Read Request is checked and queued for TX (the IRQ);
 * - terminate: the peer's Terminate ends the connection (the end record).
 * The pass that reads the socket and drives the parser is rx.c; it is not called from here. */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "device/access.h"
#include "datapath/tx.h"
#include "datapath/place.h"
#include "datapath/rnr.h"
#include "datapath/sq.h"
#include "device/srq.h"
#include "datapath/dp_seams.h"
#include "datapath/phase.h"
#include "datapath/watch.h"
#include "verify/verify.h"
#include "util/log.h"

/* The first segment of a Send: take the next posted receive (own queue or SRQ, posting order)
 * and find its memory. */
static int take_receive(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    struct sndk_recv_wqe *w = io->place.cur;
    bool got = false;
    if (sndk_rnr_phase(io) == SNDK_RNR_EXPIRED) {
        /* the bound is over: this Send ends the connection, as without a wait */
    } else if (qp->srq) {
        got = sndk_srq_take(qp->srq, w);
    } else {
        sndk_assert_held(&qp->rx_lock); /* the ring's one taker (device/srq.h) */
        got = sndk_recv_ring_take(&qp->rq, w);
    }
    if (!got && sndk_rnr_may_wait(qp))
        return SNDK_RX_PLACE_LATER; /* rnr_begin holds the stream (see the pass) */
    if (!got) {
        /* iWARP has no receiver-not-ready retry: the Send is lost and the stream ends. The
         * mistake is this side's (receives posted too late, or not replenished). */
        if (sndk_rnr_phase(io) == SNDK_RNR_EXPIRED)
            sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_RNR_TIMEOUTS);
        if (sndk_verify_on(qp->base.adapter) && sndk_rnr_phase(io) != SNDK_RNR_EXPIRED)
            sndk_verify_report(&qp->base, SoftNdkVerifyNoReceivePosted, NULL,
                               "the peer's Send found the %s empty; the connection is "
                               "terminated (DDP untagged, code 2)",
                               qp->srq ? "SRQ" : "receive queue");
        return -SNDK_WERR_MSN_NO_BUF;
    }
    io->place.cur_active = true;
    io->place.cur_i = 0;
    io->place.cur_off = 0;
    int n = 0;
    for (uint32_t i = 0; i < w->nsge; i++) {
        const NDK_SGE *s = &w->sge[i];
        int k = 0;
        enum sndk_access_result r = sndk_access_check(
            qp->pd, s->MemoryRegionToken, (uint64_t)(uintptr_t)s->VirtualAddress, s->Length,
            SNDK_ACCESS_LOCAL_WRITE, false, io->place.cur_iov + n, io->place.cur_cap - n, &k);
        if (r != SNDK_ACC_OK) {
            /* NDSPI: a receive whose SGE names invalid memory completes with an access
             * violation; the Send cannot be placed, so the stream is over. */
            io->place.cur_err_status = STATUS_ACCESS_VIOLATION;
            io->place.cur_err_code = (ULONG)r;
            return -SNDK_WERR_LOCAL;
        }
        n += k;
    }
    io->place.cur_niov = n;
    return 0;
}

/* ---------------------------------------------------------------- tagged placement */

/* Payload up to this many bytes spans at most 7 pages, so it maps to at most 8 host pieces
 * (one place() offer) even in a fast-registered region whose pages are scattered. */
#define RX_FR_CHUNK (6u * NDK_ADAPTER_PAGE_SIZE)

/* A peer's remote access was refused as an invalid token: the verifier may tell the owner of
 * the token (this side) that it handed out one that is no longer valid. Error path only (the
 * connection is terminated): the check takes the STag table lock, whatever the verifier's mode. */
static enum sndk_access_result note_refused(enum sndk_access_result r, struct sndk_qp *qp,
                                            uint32_t stag)
{
    if (r == SNDK_ACC_INV_STAG)
        sndk_verify_remote_token(qp->base.adapter, stag);
    return r;
}

/* RDMA Write: the one access check for [TO, TO+len) (remote write), then straight into the
 * region. Every chunk is checked again, so a region invalidated mid-message is not written. */
static int place_write(struct sndk_qp *qp, const struct sndk_rx_seg *seg, uint32_t off,
                       struct iovec *iov, int max_iov)
{
    int n = 0;
    enum sndk_access_result r;
    if (off == 0) {
        r = sndk_access_check(qp->pd, seg->stag, seg->to, seg->len, SNDK_ACCESS_REMOTE_WRITE, true,
                              iov, max_iov, &n);
        if (r == SNDK_ACC_OK)
            return n;
        if (r != SNDK_ACC_TOO_MANY)
            return sndk_acc_tagged_werr(note_refused(r, qp, seg->stag));
    }
    uint64_t to = seg->to + off, rem = seg->len - off;
    r = sndk_access_check(qp->pd, seg->stag, to, rem, SNDK_ACCESS_REMOTE_WRITE, true, iov, max_iov,
                          &n);
    if (r == SNDK_ACC_TOO_MANY)
        r = sndk_access_check(qp->pd, seg->stag, to, rem < RX_FR_CHUNK ? rem : RX_FR_CHUNK,
                              SNDK_ACCESS_REMOTE_WRITE, true, iov, max_iov, &n);
    return r == SNDK_ACC_OK ? n : sndk_acc_tagged_werr(note_refused(r, qp, seg->stag));
}

/* The Read the next Read Response belongs to: the oldest on the wire (responses come in
 * request order, [IW-ORDER]). Its slot's fields do not change while it is outstanding. */
static struct sndk_sqe *read_head(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (io->place.rd_active)
        return sndk_sq_slot(qp, io->place.rd_req);
    sndk_mutex_lock(&qp->tx_lock);
    bool any = io->orq_count > 0;
    uint32_t idx = any ? io->orq[io->orq_head] : 0;
    sndk_mutex_unlock(&qp->tx_lock);
    if (!any)
        return NULL;
    io->place.rd_active = true;
    io->place.rd_req = idx;
    io->place.rd_got = 0;
    io->place.rd_i = 0;
    io->place.rd_off = 0;
    return sndk_sq_slot(qp, idx);
}

/* Is the oldest outbound Read a fence (WriteCompletion placed)? Not while a consumer Read's
 * response is being placed. */
static bool fence_head(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (io->place.rd_active)
        return false;
    sndk_mutex_lock(&qp->tx_lock);
    bool fence = sndk_tx_fence_at_head(io);
    sndk_mutex_unlock(&qp->tx_lock);
    return fence;
}

/* The fence's (zero-length) response: the Writes before it are placed at the peer. */
static int fence_resp_done(struct sndk_qp *qp, const struct sndk_rx_seg *seg, uint64_t msg_len)
{
    struct sndk_conn *io = qp->io;
    sndk_mutex_lock(&qp->tx_lock);
    bool ours = seg->stag == io->orq_fence_stag[io->orq_head];
    if (ours && msg_len == 0)
        sndk_tx_orq_pop(qp);
    sndk_mutex_unlock(&qp->tx_lock);
    if (!ours)
        return -SNDK_WERR_STAG;
    return msg_len == 0 ? 0 : -SNDK_WERR_BOUNDS;
}

/* Read Response: into the sink SGEs of the Read its private sink STag names, at the offset its
 * TO gives; anything else is refused (DDP / tagged / invalid STag or bounds). */
static int place_read_resp(struct sndk_qp *qp, const struct sndk_rx_seg *seg, uint32_t off,
                           struct iovec *iov, int max_iov)
{
    struct sndk_conn *io = qp->io;
    if (off == 0 && fence_head(qp))
        return -SNDK_WERR_BOUNDS; /* a fence Read asked for no byte */
    if (off == 0) {
        struct sndk_sqe *e = read_head(qp);
        if (!e || seg->stag != e->sink_stag)
            return -SNDK_WERR_STAG;
        if (seg->to != io->place.rd_got || seg->len > e->bytes - io->place.rd_got)
            return -SNDK_WERR_BOUNDS;
    }
    struct sndk_sqe *e = sndk_sq_slot(qp, io->place.rd_req);
    uint32_t want = seg->len - off;
    int n = 0;
    while (n < max_iov && want > 0 && io->place.rd_i < e->niov) {
        const struct iovec *p = &e->iov[io->place.rd_i];
        size_t take = p->iov_len - io->place.rd_off;
        if (take > want)
            take = want;
        iov[n++] = (struct iovec){(uint8_t *)p->iov_base + io->place.rd_off, take};
        io->place.rd_off += take;
        io->place.rd_got += take;
        want -= (uint32_t)take;
        if (io->place.rd_off == p->iov_len) {
            io->place.rd_i++;
            io->place.rd_off = 0;
        }
    }
    return n;
}

/* The last Read Response segment was placed: the Read is done (it retires in order). */
static int read_resp_done(struct sndk_qp *qp, const struct sndk_rx_seg *seg, uint64_t msg_len)
{
    struct sndk_conn *io = qp->io;
    if (fence_head(qp))
        return fence_resp_done(qp, seg, msg_len);
    struct sndk_sqe *e = read_head(qp); /* a zero-length response placed nothing before */
    if (!e || seg->stag != e->sink_stag)
        return -SNDK_WERR_STAG;
    if (msg_len != e->bytes)
        return -SNDK_WERR_BOUNDS; /* a response shorter than the Read */
    io->place.rd_active = false;
    if (e->local_tok)
        sndk_access_invalidate_remote(qp->pd, e->local_tok); /* RDMA_READ_LOCAL_INVALIDATE */
    sndk_mutex_lock(&qp->tx_lock);
    e->done = true;
    sndk_tx_orq_pop(qp); /* also the Writes before it (WriteCompletion placed) */
    sndk_mutex_unlock(&qp->tx_lock);
    return 0;
}

static int rx_place(void *ctx, const struct sndk_rx_seg *seg, uint32_t off, struct iovec *iov,
                    int max_iov)
{
    struct sndk_qp *qp = ctx;
    struct sndk_conn *io = qp->io;
    if (seg->tagged)
        return seg->opcode == SNDK_OP_WRITE ? place_write(qp, seg, off, iov, max_iov)
                                            : place_read_resp(qp, seg, off, iov, max_iov);
    if (off == 0) {
        if (seg->mo == 0) {
            int rc = take_receive(qp);
            if (rc < 0)
                return rc;
        }
        if ((uint64_t)seg->mo + seg->len > io->place.cur->bytes) {
            io->place.cur_err_status = STATUS_BUFFER_OVERFLOW;
            io->place.cur_err_code = SNDK_WERR_TOO_LONG;
            return -SNDK_WERR_TOO_LONG;
        }
    }
    /* The parser asks for chunks in order, each starting where the previous offer ended. */
    uint32_t want = seg->len - off;
    int n = 0;
    while (n < max_iov && want > 0 && io->place.cur_i < io->place.cur_niov) {
        const struct iovec *p = &io->place.cur_iov[io->place.cur_i];
        size_t take = p->iov_len - io->place.cur_off;
        if (take > want)
            take = want;
        iov[n++] = (struct iovec){(uint8_t *)p->iov_base + io->place.cur_off, take};
        io->place.cur_off += take;
        want -= (uint32_t)take;
        if (io->place.cur_off == p->iov_len) {
            io->place.cur_i++;
            io->place.cur_off = 0;
        }
    }
    return n;
}

static int rx_msg_done(void *ctx, const struct sndk_rx_seg *seg, uint64_t msg_len)
{
    struct sndk_qp *qp = ctx;
    struct sndk_conn *io = qp->io;
    if (seg->opcode == SNDK_OP_READ_RESP)
        return read_resp_done(qp, seg, msg_len);
    if (seg->tagged) {
        /* an RDMA Write completes nothing at the target; it is counted */
        sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_INBOUND_WRITES);
        return 0;
    }
    if (!io->place.cur_active)
        return 0;
    NDK_RESULT_EX r = {
        .Status = STATUS_SUCCESS,
        .BytesTransferred = (ULONG)msg_len,
        .QPContext = qp->context,
        .RequestContext = io->place.cur->context,
        .Type = NdkOperationTypeReceive,
    };
    if (sndk_op_has_inval(seg->opcode)) {
        /* [MEM-12]: the token is invalid before the consumer can see the completion. */
        enum sndk_access_result a = sndk_access_invalidate_remote(qp->pd, seg->inval_stag);
        if (a != SNDK_ACC_OK) {
            note_refused(a, qp, seg->inval_stag);
            io->place.cur_err_status = STATUS_ACCESS_VIOLATION;
            io->place.cur_err_code =
                a == SNDK_ACC_UNASSOC ? SNDK_WERR_INV_STAG_PD : SNDK_WERR_INV_STAG;
            return a == SNDK_ACC_UNASSOC ? -SNDK_WERR_INV_STAG_PD : -SNDK_WERR_INV_STAG;
        }
        r.Type = NdkOperationTypeReceiveAndInvalidate;
        r.TypeSpecificCompletionOutput = seg->inval_stag;
        sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_REMOTE_INVAL);
    }
    io->place.cur_active = false;
    /* What a consumer can observe must find the QP connected: a consumer that answers this
     * message at once posts on it (sndk_qp_attach connects before linking the CQs). */
    assert(atomic_load_explicit(&qp->state, memory_order_acquire) != SNDK_QP_IDLE);
    sndk_cq_post(qp->rcq, &r, sndk_op_has_se(seg->opcode));
    return 0;
}

/* A Read Request: at most IRD queued (beyond: RDMAP / remote op / 0x07), its source checked
 * now (remote read; failures are RDMAP / remote protection with the request's headers), then
 * queued for TX, which checks the source again when it cuts the response. */
static int rx_read_req(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_read_req *rr)
{
    struct sndk_qp *qp = ctx;
    struct sndk_conn *io = qp->io;
    sndk_mutex_lock(&qp->tx_lock);
    /* A response whose lent bytes the peer took before it asked again is done: the peer
     * counts it so, and so must its IRD here (tx.c, sndk_tx_settle). */
    sndk_tx_settle(qp);
    bool full = io->irq_count >= io->ird;
    sndk_mutex_unlock(&qp->tx_lock);
    if (full)
        return -SNDK_WERR_RREQ_IRD;
    struct iovec scratch[4];
    int n = 0;
    enum sndk_access_result r = sndk_access_check(qp->pd, rr->src_stag, rr->src_to, rr->size,
                                                  SNDK_ACCESS_REMOTE_READ, true, scratch, 4, &n);
    if (r != SNDK_ACC_OK && r != SNDK_ACC_TOO_MANY)
        return sndk_acc_rreq_werr(note_refused(r, qp, rr->src_stag));
    if (rr->size && rr->sink_to + (rr->size - 1) < rr->sink_to)
        return -SNDK_WERR_RREQ_TO_WRAP; /* the response's TO would wrap */
    sndk_mutex_lock(&qp->tx_lock);
    io->irq[(io->irq_head + io->irq_count) % SNDK_RD_MAX] =
        (struct sndk_irq_entry){.rr = *rr, .msn = seg->msn};
    io->irq_count++;
    atomic_store_explicit(&io->tx_kick, true, memory_order_relaxed);
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_INBOUND_READS);
    return 0;
}

/* A received Terminate's verdict in NDK terms: the request kind it names and the status that
 * request completes with (a token refused: an access violation; anything else the peer could
 * not take: remote resources). */
static const uint8_t term_names_sq_kind[] = {
    [SNDK_TERM_NAMES_NONE] = 0,
    [SNDK_TERM_NAMES_SEND] = SNDK_SQ_SEND,
    [SNDK_TERM_NAMES_READ] = SNDK_SQ_READ,
    [SNDK_TERM_NAMES_WRITE] = SNDK_SQ_WRITE,
};
static const NTSTATUS term_blame_status[] = {
    [SNDK_TERM_BLAME_RESOURCES] = STATUS_REMOTE_RESOURCES,
    [SNDK_TERM_BLAME_ACCESS] = STATUS_ACCESS_VIOLATION,
};

static void rx_terminate(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_term *t)
{
    (void)seg;
    struct sndk_qp *qp = ctx;
    struct sndk_conn *io = qp->io;
    struct sndk_fail end = {0}, *f = &end;
    sndk_seam_rx_term_received(qp, t);
    f->link_status = STATUS_CONNECTION_ABORTED;
    f->reason = SNDK_REASON_TERM(SNDK_REASON_TERM_RECV, t->layer, t->etype, t->code);
    f->notify = true;
    f->rst = true;
    /* A Terminate that carries the header of one of our requests names the request the peer
     * refused; if still outstanding it completes with its blame's status (sndk_term_target). */
    struct sndk_term_target named;
    sndk_term_target(t, &named);
    f->named = named.names != SNDK_TERM_NAMES_NONE;
    f->named_kind = term_names_sq_kind[named.names];
    f->named_msn = named.msn;
    f->named_stag = named.stag;
    f->named_to = named.to;
    f->named_status = term_blame_status[named.blame];
    /* the peer's word ends the connection unless an end was found first (rx_lock held: tx_lock
     * comes after it) */
    sndk_mutex_lock(&qp->tx_lock);
    sndk_conn_end_record(io, SNDK_END_RX, f);
    sndk_mutex_unlock(&qp->tx_lock);
    /* Once per connection, at info: what the peer said and the bytes it said it with (a
     * layout guessed wrong stays readable). */
    sndk_info_peer(sndk_ctr_log_suppressed(&qp->base.adapter->ctrs), "rx",
                   "QP %p: Terminate received: %s / %s / %s (control %02x %02x %02x %02x, read "
                   "in %s layout)",
                   (void *)qp, sndk_term_layer_name(t->layer),
                   sndk_term_etype_name(t->layer, t->etype),
                   sndk_term_code_name(t->layer, t->etype, t->code), t->wire_ctrl[0],
                   t->wire_ctrl[1], t->wire_ctrl[2], t->wire_ctrl[3],
                   t->siw_layout ? "Linux siw's little-endian" : "RFC 5040's");
}

const struct sndk_rx_ops sndk_place_ops = {
    .place = rx_place,
    .msg_done = rx_msg_done,
    .read_req = rx_read_req,
    .terminate = rx_terminate,
};

void sndk_rx_cancel_current(struct sndk_qp *qp, NTSTATUS st, ULONG code)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    if (!io || !io->place.cur_active)
        return;
    io->place.cur_active = false;
    NDK_RESULT_EX r = {
        .Status = st,
        .QPContext = qp->context,
        .RequestContext = io->place.cur->context,
        .Type = NdkOperationTypeReceive,
        .ProviderErrorCode = code,
    };
    sndk_cq_post(qp->rcq, &r, false);
    if (st == STATUS_CANCELLED)
        sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_FLUSHED);
}
