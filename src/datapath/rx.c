/* RX: the socket's bytes become placed payload and receive completions (
 * docs/datapath.md). Runs under qp->rx_lock, on the progress thread (EPOLLIN) or on a consumer
 * thread polling a CQ (try-lock).
 *
 * Reading. The parser (iwarp/parser.h) says where the next bytes go. Two ways to fetch them:
 * - direct: readv() straight into what the parser offers — the posted receive buffer for
 *   payload, plus the trailer and the next header probe. Used when a large stretch of payload
 *   is due, so bulk data is never copied;
 * - staged: one recv() of up to SNDK_RX_STAGE bytes into a per-connection buffer, then fed to
 *   the parser (which copies payload into place). Used for headers and small payload, so a
 *   stream of small messages costs one system call per batch instead of two or three per
 *   FPDU (length probe, rest of the header, payload + trailer).
 * After the parser has read a header with a large ULPDU_Length, reads go direct again, so at
 * most SNDK_RX_STAGE bytes of a large message pass through the staging buffer.
 * The CRC is computed by the parser over the bytes where they landed. */
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/access.h"
#include "core/srq.h"
#include "datapath/dp_seams.h"
#include "datapath/phase.h"
#include "datapath/watch.h"
#include "verify/verify.h"
#include "util/log.h"

/* Payload still due in the current segment at which a direct read pays off. */
#define RX_DIRECT_MIN 2048u

/* ---------------------------------------------------------------- receiver not ready */

static const char *const rnr_phase_names[SNDK_RNR_COUNT] = {
    [SNDK_RNR_RECEIVING] = "receiving",
    [SNDK_RNR_WAITING] = "rnr-waiting",
    [SNDK_RNR_EXPIRED] = "rnr-expired",
};

const char *sndk_rnr_phase_name(enum sndk_rnr_phase p)
{
    return (unsigned)p < SNDK_RNR_COUNT ? rnr_phase_names[p] : "?";
}

/* The only writer of io->rnr_phase: rx_lock and tx_lock held. Legal moves: receiving =>
 * waiting, waiting => receiving, waiting => expired. */
static void rnr_set(struct sndk_qp *qp, enum sndk_rnr_phase to, const char *why)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    sndk_assert_held(&qp->tx_lock);
    enum sndk_rnr_phase from = sndk_rnr_phase(io);
    bool ok = (from == SNDK_RNR_RECEIVING && to == SNDK_RNR_WAITING) ||
              (from == SNDK_RNR_WAITING && (to == SNDK_RNR_RECEIVING || to == SNDK_RNR_EXPIRED));
    if (!ok) {
        sndk_err("rx", "QP %p: illegal receiver-not-ready move %s => %s (%s)", (void *)qp,
                 sndk_rnr_phase_name(from), sndk_rnr_phase_name(to), why);
        assert(ok);
        return;
    }
    sndk_debug("rx", "QP %p: %s => %s (%s)", (void *)qp, sndk_rnr_phase_name(from),
               sndk_rnr_phase_name(to), why);
    atomic_store_explicit(&io->rnr_phase, (uint8_t)to, memory_order_relaxed);
    SNDK_TRACE("rx.rnr", "qp", qp, "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\"",
               sndk_rnr_phase_name(from), sndk_rnr_phase_name(to), why);
}

/* May a Send without a receive wait for one (or, waiting, go on waiting)? RnrWaitMs set, and
 * the wait has not expired. */
static bool rnr_may_wait(struct sndk_qp *qp)
{
    return qp->base.adapter->cfg.rnr_wait_ms != 0 && sndk_rnr_phase(qp->io) != SNDK_RNR_EXPIRED;
}

/* Arm the receiver-not-ready bound (a reference while pending). tx_lock held. */
static void rnr_arm(struct sndk_qp *qp, unsigned ms)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (sndk_timer_pending(&io->rnr_timer))
        return; /* one bound per wait: a second arm would move it */
    if (sndk_timer_arm_on(io->engine, io->thread, &io->rnr_timer, (uint64_t)ms * 1000u))
        sndk_obj_get(&qp->base); /* the pending timer's (engine.h, "References") */
}

void sndk_rx_rnr_kick(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (!io || sndk_rnr_phase(io) != SNDK_RNR_WAITING)
        return;
    /* The reference first: this thread may hold none but the poster's, and the work may run
     * and drop its reference before a get after the queueing. Queued already: give it back. */
    sndk_obj_get(&qp->base);
    if (!sndk_engine_queue_on(io->engine, io->thread, &io->rnr_work))
        sndk_obj_put(&qp->base);
}

/* The parser holds a Send that found no receive: stop reading (EPOLLIN off, so TCP pushes
 * back on the sender), arm the bound, count and name it. rx_lock held. */
static void rnr_begin(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    unsigned ms = qp->base.adapter->cfg.rnr_wait_ms;
    sndk_mutex_lock(&qp->tx_lock);
    if (!sndk_conn_stopped(io)) {
        rnr_set(qp, SNDK_RNR_WAITING, "a Send found no receive posted");
        sndk_conn_update_events(io);
        rnr_arm(qp, ms);
    }
    sndk_mutex_unlock(&qp->tx_lock);
    if (qp->srq) {
        sndk_srq_rnr_wait(qp->srq, io);
        /* a receive posted between take_receive and the listing kicked nobody: look again */
        sndk_rx_rnr_kick(qp);
    }
    sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_RNR_WAITS);
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_report(&qp->base, SoftNdkVerifyNoReceivePosted, NULL,
                           "the peer's Send (MSN %u) found the %s empty; it waits up to %u ms "
                           "for a receive (RnrWaitMs), then the connection is terminated (DDP "
                           "untagged, code 2)",
                           io->rx.seg.msn, qp->srq ? "SRQ" : "receive queue", ms);
}

/* Waiting: is the receive there now? Then the held Send goes on. rx_lock held. */
static bool rnr_try_resume(struct sndk_qp *qp, const char *why)
{
    struct sndk_conn *io = qp->io;
    if (sndk_rnr_phase(io) != SNDK_RNR_WAITING || io->rx.state != SNDK_RX_HELD)
        return false;
    int rc = sndk_rx_resume(&io->rx);
    if (rc == SNDK_RX_HELD_RC)
        return false;
    /* resumed, or a fault (the receive's memory was bad): the pass acts on the parser's state */
    if (qp->srq)
        sndk_srq_rnr_done(qp->srq, io);
    sndk_mutex_lock(&qp->tx_lock);
    if (!sndk_conn_stopped(io)) {
        rnr_set(qp, SNDK_RNR_RECEIVING, why);
        sndk_conn_update_events(io);
        if (sndk_timer_cancel(&io->rnr_timer)) { /* its pending period's reference is ours */
            sndk_mutex_unlock(&qp->tx_lock);
            sndk_obj_put(&qp->base);
            return true;
        }
    }
    sndk_mutex_unlock(&qp->tx_lock);
    return true;
}

bool sndk_rx_rnr_resume(struct sndk_qp *qp)
{
    sndk_assert_held(&qp->rx_lock);
    return rnr_try_resume(qp, "a receive was posted");
}

void sndk_rx_rnr_expire(struct sndk_qp *qp, const char *why)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    if (rnr_try_resume(qp, "a receive came before the bound"))
        return;
    if (qp->srq)
        sndk_srq_rnr_done(qp->srq, io);
    sndk_mutex_lock(&qp->tx_lock);
    if (!sndk_conn_stopped(io) && sndk_rnr_phase(io) == SNDK_RNR_WAITING)
        rnr_set(qp, SNDK_RNR_EXPIRED, why);
    sndk_mutex_unlock(&qp->tx_lock);
}

/* ---------------------------------------------------------------- receives */

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
        sndk_mutex_lock(&qp->rq_lock);
        got = sndk_recv_ring_take(&qp->rq, w);
        sndk_mutex_unlock(&qp->rq_lock);
    }
    if (!got && rnr_may_wait(qp))
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
        enum sndk_access_result r =
            sndk_access_check(qp->pd, s->MemoryRegionToken, (uint64_t)(uintptr_t)s->VirtualAddress,
                              s->Length, SNDK_ACCESS_LOCAL_WRITE, false, io->place.cur_iov + n,
                              io->place.cur_cap - n, &k);
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
        return &qp->sq[io->place.rd_req % qp->initiator_depth];
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
    return &qp->sq[idx % qp->initiator_depth];
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
    struct sndk_sqe *e = &qp->sq[io->place.rd_req % qp->initiator_depth];
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
            io->place.cur_err_code = a == SNDK_ACC_UNASSOC ? SNDK_WERR_INV_STAG_PD : SNDK_WERR_INV_STAG;
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
    io->tx_kick = true;
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

static const struct sndk_rx_ops rx_ops = {
    .place = rx_place,
    .msg_done = rx_msg_done,
    .read_req = rx_read_req,
    .terminate = rx_terminate,
};

void sndk_rx_io_init(struct sndk_conn *io, bool crc)
{
    struct sndk_rx_config cfg = {.crc = crc};
    sndk_rx_init(&io->rx, &cfg, &rx_ops, io->qp);
    io->stage_len = io->stage_pos = 0;
    io->place.cur_active = false;
    io->place.cur_err_status = 0;
    io->place.cur_err_code = 0;
}

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

/* ---------------------------------------------------------------- the pass */

/* Hand staged bytes to the parser. */
static int feed_stage(struct sndk_conn *io)
{
    while (io->stage_pos < io->stage_len) {
        struct iovec iov[SNDK_RX_PLACE_IOV + 2];
        int n = sndk_rx_want(&io->rx, iov, (int)(sizeof iov / sizeof iov[0]));
        if (n == 0)
            return io->rx.state == SNDK_RX_CLOSED ? -EPIPE : -EPROTO;
        size_t copied = 0;
        for (int i = 0; i < n && io->stage_pos < io->stage_len; i++) {
            size_t k = io->stage_len - io->stage_pos;
            if (k > iov[i].iov_len)
                k = iov[i].iov_len;
            memcpy(iov[i].iov_base, io->stage + io->stage_pos, k);
            io->stage_pos += (uint32_t)k;
            copied += k;
        }
        int rc = sndk_rx_advance(&io->rx, copied);
        if (rc != 0)
            return rc; /* a fault, or SNDK_RX_TERMINATED */
        if (sndk_seam_rx_fpdu_ended(io))
            return 0; /* an FPDU ended: the hooks look at the next one first */
    }
    return 0;
}

/* The parser ends a direct offer that completes an FPDU with a probe of the next header, sized
 * for the shortest header (tagged) so that it never takes payload bytes into the header
 * buffer; a Send's header is 4 bytes longer, and those 4 bytes cost a read of their own per
 * FPDU before its payload can be read straight into place (the crumbs of docs/datapath.md).
 * Read the probe into the staging buffer instead, sized for the longest header: the parser
 * takes the staged bytes as usual (header checks, placement, faults), and when the next FPDU
 * has a shorter header the few payload bytes read with it are copied into the region the
 * parser offers for them, after its checks. Returns the probe's index, or -1. */
#define RX_PROBE_LEN (SNDK_MPA_LEN_SIZE + SNDK_DDP_UNTAGGED_HDR_LEN)
static int probe_into_stage(struct sndk_conn *io, struct iovec *iov, int n)
{
    if (n < 2 || iov[n - 1].iov_base != io->rx.hdr || io->rx.state == SNDK_RX_HDR)
        return -1;
    iov[n - 1] = (struct iovec){io->stage, RX_PROBE_LEN};
    return n - 1;
}

/* After a direct read: the bytes that went into the probe become the staged bytes. Returns
 * how many bytes the parser's own offer took. */
static size_t probe_staged(struct sndk_conn *io, const struct iovec *iov, int probe, size_t got)
{
    if (probe < 0)
        return got;
    size_t offered = sndk_iov_len(iov, probe);
    if (got <= offered)
        return got;
    io->stage_len = (uint32_t)(got - offered);
    io->stage_pos = 0;
    return offered;
}

/* Read straight into the parser's offer rather than through the staging buffer? */
static bool go_direct(const struct sndk_rx *rx)
{
    if (rx->state == SNDK_RX_DATA)
        return rx->seg.len - rx->pay_got >= RX_DIRECT_MIN;
    if (rx->state == SNDK_RX_HDR && rx->hdr_got >= SNDK_MPA_LEN_SIZE)
        return sndk_get_be16(rx->hdr) >= SNDK_RX_STAGE; /* a big FPDU: finish its header only */
    return false;
}

/* Did a send consume the socket's reset error, so that this end of stream is the reset and not
 * the peer's FIN? That send ran under tx_lock and marked sock_failed before releasing it; the
 * error was consumed before this read, so passing through tx_lock makes the mark visible. A
 * bare load could run between the send's failure and its mark (the fault matrix's drop_rx saw
 * a graceful disconnect under TSan now and then). rx_lock held, so tx_lock comes after it in
 * the lock order. */
static bool send_saw_reset(struct sndk_qp *qp)
{
    sndk_mutex_lock(&qp->tx_lock);
    bool failed = atomic_load_explicit(&qp->io->sock_failed, memory_order_acquire);
    sndk_mutex_unlock(&qp->tx_lock);
    return failed;
}

static enum sndk_rx_result protocol_end(struct sndk_qp *qp, int rc, struct sndk_fail *fail)
{
    struct sndk_conn *io = qp->io;
    const struct sndk_fail *found = sndk_conn_end_found(io);
    if (found) { /* the peer's Terminate, or an end found before it */
        *fail = *found;
        return SNDK_RXR_FAIL;
    }
    const struct sndk_wire_fault *f = sndk_rx_fault(&io->rx);
    memset(fail, 0, sizeof *fail);
    fail->notify = true;
    fail->rx_status = io->place.cur_err_status;
    fail->rx_code = io->place.cur_err_code;
    if (!f) {
        sndk_err("rx", "QP %p: internal: parser stopped (%d) without a fault", (void *)qp, rc);
        fail->link_status = STATUS_INTERNAL_ERROR;
        fail->reason = SNDK_REASON_RESET;
        fail->rst = true;
        return SNDK_RXR_FAIL;
    }
    if (f->err == SNDK_WERR_CONN_LOST) {
        /* The peer vanished mid-FPDU: nobody is left to read a Terminate. */
        fail->link_status = STATUS_CONNECTION_RESET;
        fail->reason = SNDK_REASON_RESET;
        fail->rst = true;
        return SNDK_RXR_FAIL;
    }
    if (f->err == SNDK_WERR_CRC)
        sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_CRC_ERRORS);
    sndk_term_from_fault(&fail->term, f);
    fail->send_term = true;
    fail->link_status = STATUS_CONNECTION_ABORTED;
    fail->reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT, fail->term.layer, fail->term.etype,
                                    fail->term.code);
    if (!fail->rx_code)
        fail->rx_code = f->err;
    sndk_debug("rx", "QP %p: protocol fault %s", (void *)qp, sndk_wire_err_name(f->err));
    return SNDK_RXR_FAIL;
}

/* The parser stopped with rc: a held Send (receiver not ready) waits; anything else ends. */
static enum sndk_rx_result rx_stop(struct sndk_qp *qp, int rc, struct sndk_fail *fail)
{
    if (rc == SNDK_RX_HELD_RC) {
        rnr_begin(qp);
        return SNDK_RXR_OK;
    }
    return protocol_end(qp, rc, fail);
}

/* A held Send at the start of a pass: go on if its receive came; else read nothing (the
 * socket's bytes stay in TCP); once the wait expired, its Terminate. */
static bool rx_held(struct sndk_qp *qp, struct sndk_fail *fail, enum sndk_rx_result *r)
{
    struct sndk_conn *io = qp->io;
    if (io->rx.state != SNDK_RX_HELD)
        return false;
    if (sndk_rnr_phase(io) == SNDK_RNR_WAITING) {
        if (!rnr_try_resume(qp, "a receive is there"))
            return (*r = SNDK_RXR_OK), true;
        if (io->rx.state == SNDK_RX_ERROR)
            return (*r = protocol_end(qp, -EPROTO, fail)), true;
        return false;
    }
    int rc = sndk_rx_resume(&io->rx); /* expired: take_receive refuses */
    if (rc == 0)
        return false;
    *r = rc == SNDK_RX_HELD_RC ? SNDK_RXR_OK : protocol_end(qp, rc, fail);
    return true;
}

static enum sndk_rx_result rx_pass(struct sndk_qp *qp, struct sndk_fail *fail);

static int clamp_iov(struct iovec *iov, int n, size_t cap)
{
    int k = 0;
    for (; k < n && cap > 0; k++) {
        if (iov[k].iov_len > cap)
            iov[k].iov_len = cap;
        cap -= iov[k].iov_len;
    }
    return k;
}

uint32_t sndk_rx_due_after_pass(const struct sndk_conn *io)
{
    return io->rx_emptied && io->rx.state == SNDK_RX_DATA ? io->rx.seg.len - io->rx.pay_got : 0;
}

bool sndk_rx_emptied_between_fpdus(const struct sndk_conn *io, uint64_t fpdus_before)
{
    return io->rx_emptied && io->rx.fpdus != fpdus_before && io->rx.state == SNDK_RX_HDR &&
           io->stage_pos == io->stage_len;
}

/* The pass, then the FPDUs it completed into the connection's counters. */
enum sndk_rx_result sndk_rx_pass(struct sndk_qp *qp, struct sndk_fail *fail)
{
    struct sndk_conn *io = qp->io;
    const struct sndk_fail *found = sndk_conn_end_found(io);
    if (found) {
        /* An end is recorded, and rx_lock is released before it is acted on: whoever gets
         * the lock in between learns that end (nothing after it is read or counted again). */
        *fail = *found;
        return SNDK_RXR_FAIL;
    }
    io->rx_emptied = false;
    uint64_t fpdus_before = io->rx.fpdus;
    enum sndk_rx_result r;
    if (!rx_held(qp, fail, &r))
        r = rx_pass(qp, fail);
    if (fpdus_before == 0 && io->rx.fpdus != 0) {
        /* the peer's first FPDU: a Responder without an RTR may send from now on */
        sndk_mutex_lock(&qp->tx_lock);
        sndk_tx_gate_open(qp);
        sndk_mutex_unlock(&qp->tx_lock);
    }
    if (r == SNDK_RXR_FAIL) {
        /* first wins: a pass that found its end after another was recorded reports that one */
        sndk_mutex_lock(&qp->tx_lock);
        *fail = *sndk_conn_end_record(io, SNDK_END_RX, fail);
        sndk_mutex_unlock(&qp->tx_lock);
    }
    sndk_seam_rx_fpdus(qp);
    return r;
}

static enum sndk_rx_result rx_pass(struct sndk_qp *qp, struct sndk_fail *fail)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    int rc;
    /* A read shorter than asked emptied the socket: the pass ends when its bytes are placed,
     * without another read that would only say EAGAIN — on the critical path of every
     * message a polling consumer waits for. Epoll (level-triggered) or the next poll comes
     * back for bytes that arrive later. */
    bool drained = false;
    /* Bounded, so one busy connection cannot hold a progress thread forever. */
    for (int budget = 64; budget > 0; budget--) {
        enum sndk_seam_verdict v;
        if (io->stage_pos < io->stage_len) {
            /* An FPDU starts in staged bytes whenever one ends (go_direct is false at a
             * boundary), so the rules see every next FPDU here, once its bytes are in. */
            v = sndk_seam_rx_fpdu_next(qp, fail);
            if (v != SNDK_SEAM_GO_ON)
                return v == SNDK_SEAM_FAIL ? SNDK_RXR_FAIL : SNDK_RXR_OK;
            rc = feed_stage(io);
            if (rc != 0) /* a fault, the peer's Terminate, a held Send */
                return rx_stop(qp, rc, fail);
            continue;
        }
        if (drained) {
            io->rx_emptied = true;
            return SNDK_RXR_OK;
        }
        ssize_t got;
        size_t cap;
        v = sndk_seam_rx_read_cap(qp, fail, &cap);
        if (v != SNDK_SEAM_GO_ON)
            return v == SNDK_SEAM_FAIL ? SNDK_RXR_FAIL : SNDK_RXR_OK;
        if (cap == 0)
            return SNDK_RXR_OK; /* at a byte mark, nothing beyond it arrived yet */
        if (go_direct(&io->rx)) {
            struct iovec iov[SNDK_RX_PLACE_IOV + 2];
            int n = sndk_rx_want(&io->rx, iov, (int)(sizeof iov / sizeof iov[0]));
            if (n == 0)
                return protocol_end(qp, -EPROTO, fail);
            int probe = probe_into_stage(io, iov, n);
            if (cap != SIZE_MAX)
                n = clamp_iov(iov, n, cap);
            if (probe >= n)
                probe = -1;
            got = sndk_stream_readv(&io->stream, iov, n);
            if (got > 0)
                drained = (size_t)got < sndk_iov_len(iov, n);
            if (got > 0) {
                sndk_seam_rx_read(qp, iov, n, (size_t)got);
                rc = sndk_rx_advance(&io->rx, probe_staged(io, iov, probe, (size_t)got));
                if (rc != 0)
                    return rx_stop(qp, rc, fail);
                continue;
            }
        } else {
            struct iovec stage = {io->stage, cap < sizeof io->stage ? cap : sizeof io->stage};
            got = sndk_stream_readv(&io->stream, &stage, 1);
            if (got > 0) {
                sndk_seam_rx_read(qp, &(struct iovec){io->stage, (size_t)got}, 1, (size_t)got);
                io->stage_len = (uint32_t)got;
                io->stage_pos = 0;
                drained = (size_t)got < (cap < sizeof io->stage ? cap : sizeof io->stage);
                continue;
            }
        }
        if (got == 0 && send_saw_reset(qp)) {
            /* not the peer's FIN: a send saw the reset and consumed the socket's error */
            sndk_fail_reset(fail);
            return SNDK_RXR_FAIL;
        }
        if (got == 0) {
            sndk_seam_rx_fin(qp);
            rc = sndk_rx_eof(&io->rx);
            if (rc < 0)
                return protocol_end(qp, rc, fail);
            return SNDK_RXR_PEER_FIN;
        }
        if (got == -EINTR)
            continue;
        if (got == -EAGAIN) {
            io->rx_emptied = true;
            return SNDK_RXR_OK;
        }
        sndk_debug("rx", "QP %p: receive: errno %d", (void *)qp, (int)-got);
        sndk_fail_reset(fail);
        return SNDK_RXR_FAIL;
    }
    /* Budget spent: staged bytes are not in the socket any more, so nothing would report them
     * (a Read Request in them would wait forever). Hand them to the parser now. */
    while (io->stage_pos < io->stage_len) {
        enum sndk_seam_verdict v = sndk_seam_rx_fpdu_next(qp, fail);
        if (v != SNDK_SEAM_GO_ON) /* a stall: its timer runs a pass for the staged bytes */
            return v == SNDK_SEAM_FAIL ? SNDK_RXR_FAIL : SNDK_RXR_OK;
        rc = feed_stage(io);
        if (rc != 0)
            return rx_stop(qp, rc, fail);
    }
    return SNDK_RXR_OK;
}
