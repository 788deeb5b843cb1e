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
#include "core/verify.h"
#include "iwarp/qp_io.h"
#include "util/log.h"

/* Payload still due in the current segment at which a direct read pays off. */
#define RX_DIRECT_MIN 2048u

/* ---------------------------------------------------------------- receives */

/* The first segment of a Send: take the next posted receive (own queue or SRQ, posting order)
 * and find its memory. */
static int take_receive(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    struct sndk_recv_wqe *w = io->cur;
    bool got;
    if (qp->srq) {
        got = sndk_srq_take(qp->srq, w);
    } else {
        sndk_mutex_lock(&qp->rq_lock);
        got = sndk_recv_ring_take(&qp->rq, w);
        sndk_mutex_unlock(&qp->rq_lock);
    }
    if (!got) {
        /* iWARP has no receiver-not-ready retry: the Send is lost and the stream ends. The
         * mistake is this side's (receives posted too late, or not replenished). */
        if (sndk_verify_on(qp->base.adapter))
            sndk_verify_report(&qp->base, SoftNdkVerifyNoReceivePosted, NULL,
                               "the peer's Send found the %s empty; the connection is "
                               "terminated (DDP untagged, code 2)",
                               qp->srq ? "SRQ" : "receive queue");
        return -SNDK_WERR_MSN_NO_BUF;
    }
    io->cur_active = true;
    io->cur_i = 0;
    io->cur_off = 0;
    int n = 0;
    for (uint32_t i = 0; i < w->nsge; i++) {
        const NDK_SGE *s = &w->sge[i];
        int k = 0;
        enum sndk_access_result r =
            sndk_access_check(qp->pd, s->MemoryRegionToken, (uint64_t)(uintptr_t)s->VirtualAddress,
                              s->Length, SNDK_ACCESS_LOCAL_WRITE, false, io->cur_iov + n,
                              io->cur_cap - n, &k);
        if (r != SNDK_ACC_OK) {
            /* NDSPI: a receive whose SGE names invalid memory completes with an access
             * violation; the Send cannot be placed, so the stream is over. */
            io->rx_fail.rx_status = STATUS_ACCESS_VIOLATION;
            io->rx_fail.rx_code = (ULONG)r;
            return -SNDK_WERR_LOCAL;
        }
        n += k;
    }
    io->cur_niov = n;
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
    struct sndk_qp_io *io = qp->io;
    if (io->rd_active)
        return &qp->sq[io->rd_req % qp->initiator_depth];
    sndk_mutex_lock(&qp->tx_lock);
    bool any = io->orq_count > 0;
    uint32_t idx = any ? io->orq[io->orq_head] : 0;
    sndk_mutex_unlock(&qp->tx_lock);
    if (!any)
        return NULL;
    io->rd_active = true;
    io->rd_req = idx;
    io->rd_got = 0;
    io->rd_i = 0;
    io->rd_off = 0;
    return &qp->sq[idx % qp->initiator_depth];
}

/* Read Response: into the sink SGEs of the Read its private sink STag names, at the offset its
 * TO gives; anything else is refused (DDP / tagged / invalid STag or bounds). */
static int place_read_resp(struct sndk_qp *qp, const struct sndk_rx_seg *seg, uint32_t off,
                           struct iovec *iov, int max_iov)
{
    struct sndk_qp_io *io = qp->io;
    if (off == 0) {
        struct sndk_sqe *e = read_head(qp);
        if (!e || seg->stag != e->sink_stag)
            return -SNDK_WERR_STAG;
        if (seg->to != io->rd_got || seg->len > e->bytes - io->rd_got)
            return -SNDK_WERR_BOUNDS;
    }
    struct sndk_sqe *e = &qp->sq[io->rd_req % qp->initiator_depth];
    uint32_t want = seg->len - off;
    int n = 0;
    while (n < max_iov && want > 0 && io->rd_i < e->niov) {
        const struct iovec *p = &e->iov[io->rd_i];
        size_t take = p->iov_len - io->rd_off;
        if (take > want)
            take = want;
        iov[n++] = (struct iovec){(uint8_t *)p->iov_base + io->rd_off, take};
        io->rd_off += take;
        io->rd_got += take;
        want -= (uint32_t)take;
        if (io->rd_off == p->iov_len) {
            io->rd_i++;
            io->rd_off = 0;
        }
    }
    return n;
}

/* The last Read Response segment was placed: the Read is done (it retires in order). */
static int read_resp_done(struct sndk_qp *qp, const struct sndk_rx_seg *seg, uint64_t msg_len)
{
    struct sndk_qp_io *io = qp->io;
    struct sndk_sqe *e = read_head(qp); /* a zero-length response placed nothing before */
    if (!e || seg->stag != e->sink_stag)
        return -SNDK_WERR_STAG;
    if (msg_len != e->bytes)
        return -SNDK_WERR_BOUNDS; /* a response shorter than the Read */
    io->rd_active = false;
    if (e->local_tok)
        sndk_access_invalidate_remote(qp->pd, e->local_tok); /* RDMA_READ_LOCAL_INVALIDATE */
    sndk_mutex_lock(&qp->tx_lock);
    io->orq_head = (io->orq_head + 1) % SNDK_RD_MAX;
    io->orq_count--;
    e->done = true;
    sndk_qp_retire_done(qp);
    if (qp->sq_sent != qp->sq_tail)
        io->tx_kick = true; /* a Read or a fenced request may go now */
    sndk_mutex_unlock(&qp->tx_lock);
    return 0;
}

static int rx_place(void *ctx, const struct sndk_rx_seg *seg, uint32_t off, struct iovec *iov,
                    int max_iov)
{
    struct sndk_qp *qp = ctx;
    struct sndk_qp_io *io = qp->io;
    if (seg->tagged)
        return seg->opcode == SNDK_OP_WRITE ? place_write(qp, seg, off, iov, max_iov)
                                            : place_read_resp(qp, seg, off, iov, max_iov);
    if (off == 0) {
        if (seg->mo == 0) {
            int rc = take_receive(qp);
            if (rc < 0)
                return rc;
        }
        if ((uint64_t)seg->mo + seg->len > io->cur->bytes) {
            io->rx_fail.rx_status = STATUS_BUFFER_OVERFLOW;
            io->rx_fail.rx_code = SNDK_WERR_TOO_LONG;
            return -SNDK_WERR_TOO_LONG;
        }
    }
    /* The parser asks for chunks in order, each starting where the previous offer ended. */
    uint32_t want = seg->len - off;
    int n = 0;
    while (n < max_iov && want > 0 && io->cur_i < io->cur_niov) {
        const struct iovec *p = &io->cur_iov[io->cur_i];
        size_t take = p->iov_len - io->cur_off;
        if (take > want)
            take = want;
        iov[n++] = (struct iovec){(uint8_t *)p->iov_base + io->cur_off, take};
        io->cur_off += take;
        want -= (uint32_t)take;
        if (io->cur_off == p->iov_len) {
            io->cur_i++;
            io->cur_off = 0;
        }
    }
    return n;
}

static int rx_msg_done(void *ctx, const struct sndk_rx_seg *seg, uint64_t msg_len)
{
    struct sndk_qp *qp = ctx;
    struct sndk_qp_io *io = qp->io;
    if (seg->opcode == SNDK_OP_READ_RESP)
        return read_resp_done(qp, seg, msg_len);
    if (seg->tagged || !io->cur_active)
        return 0; /* an RDMA Write completes nothing at the target */
    NDK_RESULT_EX r = {
        .Status = STATUS_SUCCESS,
        .BytesTransferred = (ULONG)msg_len,
        .QPContext = qp->context,
        .RequestContext = io->cur->context,
        .Type = NdkOperationTypeReceive,
    };
    if (sndk_op_has_inval(seg->opcode)) {
        /* [MEM-12]: the token is invalid before the consumer can see the completion. */
        enum sndk_access_result a = sndk_access_invalidate_remote(qp->pd, seg->inval_stag);
        if (a != SNDK_ACC_OK) {
            note_refused(a, qp, seg->inval_stag);
            io->rx_fail.rx_status = STATUS_ACCESS_VIOLATION;
            io->rx_fail.rx_code = a == SNDK_ACC_UNASSOC ? SNDK_WERR_INV_STAG_PD : SNDK_WERR_INV_STAG;
            return a == SNDK_ACC_UNASSOC ? -SNDK_WERR_INV_STAG_PD : -SNDK_WERR_INV_STAG;
        }
        r.Type = NdkOperationTypeReceiveAndInvalidate;
        r.TypeSpecificCompletionOutput = seg->inval_stag;
    }
    io->cur_active = false;
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
    struct sndk_qp_io *io = qp->io;
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
    return 0;
}

static void rx_terminate(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_term *t)
{
    (void)seg;
    struct sndk_qp *qp = ctx;
    struct sndk_qp_io *io = qp->io;
    struct sndk_fail *f = &io->rx_fail;
    sndk_counters_term(&qp->base.adapter->ctrs, false, t->layer, t->etype, t->code);
    SNDK_TRACE("term.received", "QP", qp, "\"layer\":%u,\"etype\":%u,\"code\":%u",
               (unsigned)t->layer, (unsigned)t->etype, (unsigned)t->code);
    f->link_status = STATUS_CONNECTION_ABORTED;
    f->reason = SNDK_REASON_TERM(SNDK_REASON_TERM_RECV, t->layer, t->etype, t->code);
    f->notify = true;
    f->rst = true;
    /* A Terminate that carries the header of one of our Sends, Reads or Writes names the
     * request the peer refused; if still outstanding it completes with: a Send
     * STATUS_REMOTE_RESOURCES; a Read or Write STATUS_ACCESS_VIOLATION for a protection error
     * other than bounds (invalid token, rights, PD, TO wrap), else STATUS_REMOTE_RESOURCES
     * (bounds: [RDMA-2] "read beyond the remote memory"; IRD overflow and other remote errors). */
    bool tagged_prot = t->layer == SNDK_TERM_LAYER_DDP && t->etype == 1 && t->code != 0x01;
    bool rdmap_prot = t->layer == SNDK_TERM_LAYER_RDMAP && t->etype == 1 && t->code != 0x01;
    f->named_status = tagged_prot || rdmap_prot ? STATUS_ACCESS_VIOLATION : STATUS_REMOTE_RESOURCES;
    if (t->ddp_hdr_len == SNDK_DDP_UNTAGGED_HDR_LEN && !(t->ddp_hdr[0] & SNDK_DDP_TAGGED)) {
        uint32_t qn = sndk_get_be32(t->ddp_hdr + 6);
        if (qn == SNDK_QN_SEND || qn == SNDK_QN_READ_REQ) {
            f->named = true;
            f->named_kind = qn == SNDK_QN_SEND ? SNDK_SQ_SEND : SNDK_SQ_READ;
            f->named_msn = sndk_get_be32(t->ddp_hdr + 10);
            /* A refused Read is named more surely by the sink STag of its included Read
             * Request (Linux siw puts the read size where the MSN belongs) */
            if (qn == SNDK_QN_READ_REQ && t->rdmap_hdr_present)
                f->named_stag = sndk_get_be32(t->rdmap_hdr);
            if (qn == SNDK_QN_SEND)
                f->named_status = STATUS_REMOTE_RESOURCES;
        }
    } else if (t->ddp_hdr_len == SNDK_DDP_TAGGED_HDR_LEN && (t->ddp_hdr[0] & SNDK_DDP_TAGGED) &&
               (t->ddp_hdr[1] & 0x0f) == SNDK_OP_WRITE) {
        f->named = true;
        f->named_kind = SNDK_SQ_WRITE;
        f->named_stag = sndk_get_be32(t->ddp_hdr + 2);
        f->named_to = sndk_get_be64(t->ddp_hdr + 6);
    }
    io->rx_failed = true;
    sndk_debug("rx", "QP %p: Terminate received: %s / %s / %s%s", (void *)qp,
               sndk_term_layer_name(t->layer), sndk_term_etype_name(t->layer, t->etype),
               sndk_term_code_name(t->layer, t->etype, t->code),
               t->siw_layout ? " (in Linux siw's little-endian layout)" : "");
}

static const struct sndk_rx_ops rx_ops = {
    .place = rx_place,
    .msg_done = rx_msg_done,
    .read_req = rx_read_req,
    .terminate = rx_terminate,
};

void sndk_rx_io_init(struct sndk_qp_io *io, bool crc)
{
    struct sndk_rx_config cfg = {.crc = crc};
    sndk_rx_init(&io->rx, &cfg, &rx_ops, io->qp);
    io->stage_len = io->stage_pos = 0;
    io->cur_active = false;
    io->rx_failed = false;
    memset(&io->rx_fail, 0, sizeof io->rx_fail);
}

void sndk_rx_cancel_current(struct sndk_qp *qp, NTSTATUS st, ULONG code)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    if (!io || !io->cur_active)
        return;
    io->cur_active = false;
    NDK_RESULT_EX r = {
        .Status = st,
        .QPContext = qp->context,
        .RequestContext = io->cur->context,
        .Type = NdkOperationTypeReceive,
        .ProviderErrorCode = code,
    };
    sndk_cq_post(qp->rcq, &r, false);
    if (st == STATUS_CANCELLED)
        sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_FLUSHED);
}

/* ---------------------------------------------------------------- the pass */

/* Hand staged bytes to the parser. */
static int feed_stage(struct sndk_qp_io *io)
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
        if (io->fc && io->rx.fpdus != io->rx_fault_checked)
            return 0; /* an FPDU ended: the fault rules look at the next one first */
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
static int probe_into_stage(struct sndk_qp_io *io, struct iovec *iov, int n)
{
    if (n < 2 || iov[n - 1].iov_base != io->rx.hdr || io->rx.state == SNDK_RX_HDR)
        return -1;
    iov[n - 1] = (struct iovec){io->stage, RX_PROBE_LEN};
    return n - 1;
}

/* After a direct read: the bytes that went into the probe become the staged bytes. Returns
 * how many bytes the parser's own offer took. */
static size_t probe_staged(struct sndk_qp_io *io, const struct iovec *iov, int probe, size_t got)
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

/* The connection is gone under us (reset, I/O error, injected drop): no Terminate, RST. */
static void reset_end(struct sndk_fail *fail)
{
    memset(fail, 0, sizeof *fail);
    fail->link_status = STATUS_CONNECTION_RESET;
    fail->reason = SNDK_REASON_RESET;
    fail->notify = true;
    fail->rst = true;
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
    struct sndk_qp_io *io = qp->io;
    if (io->rx_failed) { /* the peer's Terminate */
        *fail = io->rx_fail;
        return SNDK_RXR_FAIL;
    }
    const struct sndk_wire_fault *f = sndk_rx_fault(&io->rx);
    memset(fail, 0, sizeof *fail);
    fail->notify = true;
    fail->rx_status = io->rx_fail.rx_status;
    fail->rx_code = io->rx_fail.rx_code;
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

static enum sndk_rx_result rx_pass(struct sndk_qp *qp, struct sndk_fail *fail);

enum fault_verdict { FAULT_GO_ON, FAULT_STOP, FAULT_FAIL };

/* An injected fault acts on the receive stream here. */
static enum fault_verdict fault_act(struct sndk_qp *qp, enum sndk_fault_action a, uint32_t ms,
                                    struct sndk_fail *fail)
{
    struct sndk_qp_io *io = qp->io;
    switch (a) {
    case SNDK_FACT_CRC:
        io->rx.fault_crc_at = io->rx.fpdus + 1;
        return FAULT_GO_ON;
    case SNDK_FACT_STALL:
        sndk_mutex_lock(&qp->tx_lock);
        if (!sndk_conn_stopped(io)) {
            io->rx_stalled = true;
            sndk_tx_update_events(io);
            sndk_qp_stall_timer(qp, SNDK_FDIR_RX, ms);
        }
        sndk_mutex_unlock(&qp->tx_lock);
        return FAULT_STOP;
    case SNDK_FACT_DROP:
    case SNDK_FACT_TERMINATE: /* not offered for rx; treated as a drop */
        reset_end(fail);
        return FAULT_FAIL;
    default:
        return FAULT_GO_ON;
    }
}

/* At an FPDU boundary: do the fault rules act on the next FPDU? */
static enum fault_verdict fault_fpdu_point(struct sndk_qp *qp, struct sndk_fail *fail)
{
    struct sndk_qp_io *io = qp->io;
    if (!io->fc || io->rx.fpdus == io->rx_fault_checked)
        return FAULT_GO_ON;
    io->rx_fault_checked = io->rx.fpdus;
    io->fc->d[SNDK_FDIR_RX].fpdus = io->rx.fpdus;
    uint32_t ms = 0;
    enum sndk_fault_action a = sndk_fault_fpdu(io->fc, SNDK_FDIR_RX, qp, &ms, NULL);
    return fault_act(qp, a, ms, fail);
}

/* How many bytes the next read may take (an after_bytes rule stops the stream at its byte);
 * 0 with *v set when a rule acts right here. */
static size_t fault_read_cap(struct sndk_qp *qp, struct sndk_fail *fail, enum fault_verdict *v)
{
    struct sndk_qp_io *io = qp->io;
    *v = FAULT_GO_ON;
    if (!io->fc)
        return SIZE_MAX;
    struct sndk_fault_dirstate *d = &io->fc->d[SNDK_FDIR_RX];
    while (d->byte_mark != UINT64_MAX && d->byte_mark == d->bytes) {
        uint8_t b;
        if (recv(io->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
            (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0; /* acts when the byte after the mark arrives (or the end shows) */
        uint32_t ms = 0;
        enum sndk_fault_action a = sndk_fault_bytes(io->fc, SNDK_FDIR_RX, qp, &ms);
        *v = fault_act(qp, a, ms, fail);
        if (*v != FAULT_GO_ON)
            return 0;
    }
    if (d->byte_mark == UINT64_MAX)
        return SIZE_MAX;
    return (size_t)(d->byte_mark - d->bytes);
}

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

uint32_t sndk_rx_due_after_pass(const struct sndk_qp_io *io)
{
    return io->rx_dry_mid_payload ? io->rx.seg.len - io->rx.pay_got : 0;
}

/* The pass, then the FPDUs it completed into the connection's counters. */
enum sndk_rx_result sndk_rx_pass(struct sndk_qp *qp, struct sndk_fail *fail)
{
    struct sndk_qp_io *io = qp->io;
    if (io->rx_ended) {
        /* rx_lock is released before sndk_qp_fail marks the QP dead: whoever gets it in
         * between learns the same end (nothing after it is read or counted again). */
        *fail = io->rx_end;
        return SNDK_RXR_FAIL;
    }
    io->rx_dry_mid_payload = false;
    uint64_t fpdus_before = io->rx.fpdus;
    enum sndk_rx_result r = rx_pass(qp, fail);
    if (fpdus_before == 0 && io->rx.fpdus != 0) {
        /* the peer's first FPDU: a Responder without an RTR may send from now on */
        sndk_mutex_lock(&qp->tx_lock);
        sndk_tx_gate_open(qp);
        sndk_mutex_unlock(&qp->tx_lock);
    }
    if (r == SNDK_RXR_FAIL) {
        io->rx_ended = true;
        io->rx_end = *fail;
    }
    if (io->crec && io->rx.fpdus != io->rx_fpdus_seen) {
        sndk_cc_add(io->crec, SNDK_CC_RX_FPDUS, io->rx.fpdus - io->rx_fpdus_seen);
        io->rx_fpdus_seen = io->rx.fpdus;
    }
    return r;
}

static enum sndk_rx_result rx_pass(struct sndk_qp *qp, struct sndk_fail *fail)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    int rc;
    /* A read shorter than asked emptied the socket: the pass ends when its bytes are placed,
     * without another read that would only say EAGAIN — on the critical path of every
     * message a polling consumer waits for. Epoll (level-triggered) or the next poll comes
     * back for bytes that arrive later. */
    bool drained = false;
    /* Bounded, so one busy connection cannot hold a progress thread forever. */
    for (int budget = 64; budget > 0; budget--) {
        enum fault_verdict v;
        if (io->stage_pos < io->stage_len) {
            /* An FPDU starts in staged bytes whenever one ends (go_direct is false at a
             * boundary), so the rules see every next FPDU here, once its bytes are in. */
            v = fault_fpdu_point(qp, fail);
            if (v != FAULT_GO_ON)
                return v == FAULT_FAIL ? SNDK_RXR_FAIL : SNDK_RXR_OK;
            rc = feed_stage(io);
            if (rc != 0) /* a fault, or the peer's Terminate (SNDK_RX_TERMINATED) */
                return protocol_end(qp, rc, fail);
            continue;
        }
        if (drained) {
            io->rx_dry_mid_payload = io->rx.state == SNDK_RX_DATA;
            return SNDK_RXR_OK;
        }
        ssize_t got;
        size_t cap = fault_read_cap(qp, fail, &v);
        if (v != FAULT_GO_ON)
            return v == FAULT_FAIL ? SNDK_RXR_FAIL : SNDK_RXR_OK;
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
            got = readv(io->fd, iov, n);
            if (got > 0)
                drained = (size_t)got < sndk_iov_len(iov, n);
            if (got > 0 && io->crec) {
                sndk_cc_add(io->crec, SNDK_CC_RX_OCTETS, (uint64_t)got);
                sndk_pcap_iov(io->crec->pcap, false, iov, n, (size_t)got);
            }
            if (got > 0 && io->fc)
                io->fc->d[SNDK_FDIR_RX].bytes += (uint64_t)got;
            if (got > 0) {
                rc = sndk_rx_advance(&io->rx, probe_staged(io, iov, probe, (size_t)got));
                if (rc != 0)
                    return protocol_end(qp, rc, fail);
                continue;
            }
        } else {
            got = recv(io->fd, io->stage, cap < sizeof io->stage ? cap : sizeof io->stage,
                       MSG_DONTWAIT);
            if (got > 0 && io->crec) {
                sndk_cc_add(io->crec, SNDK_CC_RX_OCTETS, (uint64_t)got);
                sndk_pcap_buf(io->crec->pcap, false, io->stage, (size_t)got);
            }
            if (got > 0 && io->fc)
                io->fc->d[SNDK_FDIR_RX].bytes += (uint64_t)got;
            if (got > 0) {
                io->stage_len = (uint32_t)got;
                io->stage_pos = 0;
                drained = (size_t)got < (cap < sizeof io->stage ? cap : sizeof io->stage);
                continue;
            }
        }
        if (got == 0 && send_saw_reset(qp)) {
            /* not the peer's FIN: a send saw the reset and consumed the socket's error */
            reset_end(fail);
            return SNDK_RXR_FAIL;
        }
        if (got == 0) {
            if (io->crec)
                sndk_pcap_fin(io->crec->pcap, false);
            rc = sndk_rx_eof(&io->rx);
            if (rc < 0)
                return protocol_end(qp, rc, fail);
            return SNDK_RXR_PEER_FIN;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            io->rx_dry_mid_payload = io->rx.state == SNDK_RX_DATA;
            return SNDK_RXR_OK;
        }
        sndk_debug("rx", "QP %p: receive: errno %d", (void *)qp, errno);
        reset_end(fail);
        return SNDK_RXR_FAIL;
    }
    /* Budget spent: staged bytes are not in the socket any more, so nothing would report them
     * (a Read Request in them would wait forever). Hand them to the parser now. */
    while (io->stage_pos < io->stage_len) {
        enum fault_verdict v = fault_fpdu_point(qp, fail);
        if (v != FAULT_GO_ON) /* a stall: its timer runs a pass for the staged bytes */
            return v == FAULT_FAIL ? SNDK_RXR_FAIL : SNDK_RXR_OK;
        rc = feed_stage(io);
        if (rc != 0)
            return protocol_end(qp, rc, fail);
    }
    return SNDK_RXR_OK;
}
