/* TX: initiator requests become FPDUs on the socket (docs/datapath.md).
 *
 * The posting thread transmits itself while the socket takes bytes: requests from sq_sent to
 * sq_tail are cut into FPDUs around the consumer's memory (no payload copy) and as many as fit
 * a batch (SNDK_TX_BATCH FPDUs, SNDK_TX_IOV iovecs) go out with one sendmsg — so a DEFER chain
 * ends in one system call. When the socket would block, the rest of the batch stays here,
 * EPOLLOUT is armed and the progress thread continues; postings meanwhile only queue. A request
 * retires (and completes) when its last byte has been handed to TCP: iWARP acknowledges no
 * untagged message, as in siw and iWARP hardware. Everything here runs under qp->tx_lock. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "device/adapter_state.h"
#include "datapath/tx.h"
#include "datapath/dp_seams.h"
#include "datapath/phase.h"
#include "datapath/watch.h"
#include "datapath/sq.h"
#include "iwarp/crc32c.h"
#include "verify/verify.h"
#include "util/log.h"
#include "observe/trace.h"

/* ---------------------------------------------------------------- placed Write completion */


/* WriteCompletion placed (docs/qp.md, "Write completion"): a Write is done when a Read cut
 * after it is answered. Without ORD (the peer takes no Read) there is no such Read: Writes
 * complete when handed to TCP, and the log says so once. */
static void fence_init(struct sndk_conn *io)
{
    io->writes_unfenced = 0;
    bool placed = io->qp->base.adapter->cfg.write_completion == SoftNdkWriteCompletionPlaced;
    io->write_done = placed && io->ord > 0 ? SNDK_WRITE_DONE_PLACED : SNDK_WRITE_DONE_IN_TCP;
    if (placed && io->ord == 0) {
        /* per connection, and the peer's IRD decides it */
        sndk_warn_peer(sndk_ctr_log_suppressed(&io->qp->base.adapter->ctrs), "tx",
                       "QP %p: WriteCompletion placed needs an RDMA Read credit (ORD 0 on this "
                       "connection): its Writes complete when handed to TCP",
                       (void *)io->qp);
    }
}

/* A Read (consumer's or fence) was just queued at ORQ slot i: it covers every Write cut so
 * far. */
static void orq_note(struct sndk_qp *qp, uint32_t i, enum sndk_orq_kind kind, uint32_t stag)
{
    struct sndk_conn *io = qp->io;
    io->orq_kind[i] = (uint8_t)kind;
    io->orq_covers[i] = qp->sq_sent;
    io->orq_fence_stag[i] = stag;
    io->writes_unfenced = 0;
}

/* Before the next request (or at the end of the queue): is a fence due? When Writes are
 * unfenced and what comes is not another Write (nor a Read, which covers them itself), or
 * SNDK_FENCE_BATCH Writes went without one. */
static bool fence_due(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (io->write_done != SNDK_WRITE_DONE_PLACED || io->writes_unfenced == 0)
        return false;
    if (qp->sq_sent == qp->sq_tail || io->writes_unfenced >= SNDK_FENCE_BATCH)
        return true;
    uint8_t next = sndk_sq_slot(qp, qp->sq_sent)->kind;
    return next != SNDK_SQ_WRITE && next != SNDK_SQ_READ;
}

/* Cut the fence: a zero-length Read Request (QN 1, the next Read MSN) with a private sink STag,
 * which takes an ORD credit as any Read. Returns its iovec count, 0 when the ORD is used up
 * (the batch stops; a response frees a credit and kicks TX), < 0 when it cannot be built. */
static int cut_fence(struct sndk_qp *qp, int rec, struct iovec *iov, int room)
{
    struct sndk_conn *io = qp->io;
    if (io->orq_count >= io->ord)
        return 0;
    uint32_t msn = io->msn_read++;
    struct sndk_read_req rr = {
        .sink_stag = (msn << 8) | 0x5au, .sink_to = 0, .size = 0, .src_stag = 0, .src_to = 0};
    int n = sndk_fpdu_read_req(&io->fp[rec], msn, &rr, io->txcfg.crc, iov, room);
    if (n <= 0) {
        io->msn_read--;
        return -1;
    }
    uint32_t i = (io->orq_head + io->orq_count) % SNDK_RD_MAX;
    io->orq[i] = qp->sq_sent; /* no request of its own */
    io->orq_count++;
    orq_note(qp, i, SNDK_ORQ_FENCE, rr.sink_stag);
    io->rec[rec] = (struct sndk_tx_rec){.wire_len = io->fp[rec].wire_len, .ends = SNDK_REC_NONE};
    sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_FENCE_READS);
    SNDK_TRACE("tx.fence_read", "qp", qp, "\"msn\":%u,\"covers\":%u", msn, qp->sq_sent);
    return n;
}

bool sndk_tx_fence_at_head(const struct sndk_conn *io)
{
    return io->orq_count > 0 && io->orq_kind[io->orq_head] == SNDK_ORQ_FENCE;
}

void sndk_tx_orq_pop(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    uint32_t covers = io->orq_covers[io->orq_head];
    io->orq_head = (io->orq_head + 1) % SNDK_RD_MAX;
    io->orq_count--;
    if (io->write_done == SNDK_WRITE_DONE_PLACED) {
        /* requests before sq_head are retired (their slots may be reused): start there */
        for (uint32_t c = atomic_load_explicit(&qp->sq_head, memory_order_relaxed); c != covers;
             c++) {
            struct sndk_sqe *e = sndk_sq_slot(qp, c);
            if (e->kind == SNDK_SQ_WRITE)
                e->done = true; /* placed at the peer */
        }
    }
    sndk_sq_retire_done(qp);
    if (qp->sq_sent != qp->sq_tail || io->writes_unfenced)
        atomic_store_explicit(&io->tx_kick, true, memory_order_relaxed); /* a Read, a fence or a fenced request may go now */
}

void sndk_tx_init(struct sndk_conn *io, bool crc, uint32_t max_fpdu, uint32_t ird, uint32_t ord)
{
    io->txcfg = (struct sndk_tx_cfg){.max_fpdu = max_fpdu, .crc = crc};
    io->msn_send = 1;
    io->msn_term = 1;
    io->msn_read = 1;
    io->ird = ird < SNDK_RD_MAX ? ird : SNDK_RD_MAX;
    io->ord = ord < SNDK_RD_MAX ? ord : SNDK_RD_MAX;
    fence_init(io);
    io->nrec = io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = 0;
    io->cut.msg_active = false;
}

static const char *const tx_gate_names[SNDK_TXG_COUNT] = {
    [SNDK_TXG_OPEN] = "open",
    [SNDK_TXG_AWAITING] = "awaiting-initiator",
    [SNDK_TXG_HOLDING] = "holding",
};

const char *sndk_tx_gate_name(enum sndk_tx_gate g)
{
    return (unsigned)g < SNDK_TXG_COUNT ? tx_gate_names[g] : "?";
}

static void set_gate(struct sndk_qp *qp, enum sndk_tx_gate to, const char *why)
{
    struct sndk_conn *io = qp->io;
    enum sndk_tx_gate from = (enum sndk_tx_gate)io->tx_gate;
    /* OPEN is final; AWAITING -> HOLDING -> OPEN, or AWAITING -> OPEN */
    assert(from != SNDK_TXG_OPEN && to != from && to != SNDK_TXG_AWAITING);
    sndk_debug("tx", "QP %p: gate %s => %s (%s)", (void *)qp, tx_gate_names[from],
               tx_gate_names[to], why);
    io->tx_gate = (uint8_t)to;
}

void sndk_tx_gate_await(struct sndk_conn *io)
{
    io->tx_gate = SNDK_TXG_AWAITING;
    sndk_debug("tx", "QP %p: gate open => %s (MPA Responder without an RTR)", (void *)io->qp,
               tx_gate_names[SNDK_TXG_AWAITING]);
}

void sndk_tx_gate_open(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (io->tx_gate == SNDK_TXG_OPEN)
        return;
    bool held = io->tx_gate == SNDK_TXG_HOLDING;
    set_gate(qp, SNDK_TXG_OPEN, "the Initiator's first FPDU arrived");
    if (held) {
        SNDK_TRACE("tx.gate_opened", "qp", qp, "\"held\":true");
        atomic_store_explicit(&io->tx_kick, true, memory_order_relaxed);
    }
}

/* A push while the gate is not open and a request is ready: nothing goes; the first time,
 * count and trace that it waits. (With nothing ready the push goes on: a FIN is no FPDU.) */
static void gate_hold(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (io->tx_gate != SNDK_TXG_AWAITING)
        return;
    set_gate(qp, SNDK_TXG_HOLDING, "a request is ready before the Initiator's first FPDU");
    sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_RESPONDER_HELD);
    SNDK_TRACE("tx.gate_held", "qp", qp, "\"pending\":%u", qp->sq_tail - qp->sq_sent);
}

/* A Read Request's source failed its access check when its response was about to be cut (the
 * region was invalidated or deregistered since the request arrived): the connection ends with
 * the Terminate the request would have got on arrival (RDMAP / remote protection, with the
 * request's headers). */
static void response_refused(struct sndk_qp *qp, const struct sndk_irq_entry *q,
                             enum sndk_access_result r)
{
    struct sndk_conn *io = qp->io;
    struct sndk_fpdu tmp;
    struct iovec iov[3];
    struct sndk_wire_fault wf = {.err = (enum sndk_wire_err)-sndk_acc_rreq_werr(r),
                                 .tagged = false,
                                 .hdr_len = SNDK_DDP_UNTAGGED_HDR_LEN,
                                 .have_rreq = true,
                                 .ulpdu_len = SNDK_READ_REQ_ULPDU_LEN};
    if (sndk_fpdu_read_req(&tmp, q->msn, &q->rr, false, iov, 3) > 0) {
        memcpy(wf.hdr, tmp.hdr + SNDK_MPA_LEN_SIZE, SNDK_DDP_UNTAGGED_HDR_LEN);
        memcpy(wf.rreq, tmp.hdr + SNDK_MPA_LEN_SIZE + SNDK_DDP_UNTAGGED_HDR_LEN,
               SNDK_RDMAP_READ_REQ_LEN);
    }
    struct sndk_fail end = {0}, *f = &end;
    sndk_term_from_fault(&f->term, &wf);
    f->send_term = true;
    f->notify = true;
    f->link_status = STATUS_CONNECTION_ABORTED;
    f->reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT, f->term.layer, f->term.etype, f->term.code);
    sndk_conn_end_record(io, SNDK_END_TX, f);
}

/* Start cutting the response to the oldest inbound Read Request not yet cut. The source is
 * checked (again) and translated now, so a region revoked since the request arrived is never
 * read. Returns false when the connection must end (its end is recorded). */
static bool start_response(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    const struct sndk_irq_entry *q = &io->irq[(io->irq_head + io->irq_built) % SNDK_RD_MAX];
    uint64_t need = (uint64_t)q->rr.size / NDK_ADAPTER_PAGE_SIZE + 2;
    if (need > (uint64_t)io->cut.resp_cap) {
        struct iovec *n = realloc(io->cut.resp_iov, (size_t)need * sizeof *n);
        if (!n) {
            response_refused(qp, q, SNDK_ACC_TOO_MANY);
            return false;
        }
        io->cut.resp_iov = n;
        io->cut.resp_cap = (int)need;
    }
    int n = 0;
    enum sndk_access_result r =
        sndk_access_check(qp->pd, q->rr.src_stag, q->rr.src_to, q->rr.size,
                          SNDK_ACCESS_REMOTE_READ, true, io->cut.resp_iov, io->cut.resp_cap, &n);
    if (r != SNDK_ACC_OK) {
        response_refused(qp, q, r);
        return false;
    }
    if (sndk_tx_read_resp(&io->cut.msg, &io->txcfg, q->rr.sink_stag, q->rr.sink_to, io->cut.resp_iov,
                          n) < 0) {
        response_refused(qp, q, SNDK_ACC_WRAP); /* checked on arrival; cannot happen */
        return false;
    }
    io->cut.msg_active = true;
    io->cut.msg_ends = SNDK_REC_RESP;
    return true;
}

/* Gather the next batch of FPDUs: Read Responses first (they answer the peer), then the
 * initiator queue in order. Stops before a request that failed its local checks (the ones
 * before it must be out and retired first so that completions stay in order), before a Read
 * when ORD Reads are outstanding, and before a READ_FENCE request while any Read is. */
static void fill_batch(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    int nrec = 0, niov = 0;
    bool corrupt = false;
    while (nrec < SNDK_TX_BATCH && !sndk_conn_end_found(io) && !sndk_seam_tx_holding(qp)) {
        int room = SNDK_TX_IOV - niov;
        if (room < 3)
            break;
        if (room > SNDK_TX_SEG_IOV)
            room = SNDK_TX_SEG_IOV;
        if (!io->cut.msg_active && io->irq_built < io->irq_count) {
            if (!start_response(qp))
                break;
        } else if (!io->cut.msg_active) {
            if (fence_due(qp)) {
                if (io->orq_count >= io->ord)
                    goto stall; /* no ORD credit: Writes wait for their fence */
                if (sndk_seam_tx_fpdu_next(qp, &corrupt))
                    goto stall; /* the fault rules see the fence as any FPDU */
                int n = cut_fence(qp, nrec, io->iov + niov, room);
                if (n <= 0)
                    goto stall; /* cannot be built: cannot happen with room >= 3 */
                memset(io->iov_lend + niov, 0, (size_t)n);
                sndk_seam_tx_fpdu_cut(qp, nrec, niov, n, corrupt);
                corrupt = false;
                nrec++;
                niov += n;
                continue;
            }
            if (qp->sq_sent == qp->sq_tail)
                break;
            struct sndk_sqe *e = sndk_sq_slot(qp, qp->sq_sent);
            if (e->status != STATUS_SUCCESS)
                break;
            if ((e->flags & NDK_OP_FLAG_READ_FENCE) && io->orq_count > 0)
                break; /* [IW-ORDER]: not started before every earlier Read has its data */
            int rc = 0;
            switch (e->kind) {
            case SNDK_SQ_SEND:
                e->msn = io->msn_send++;
                rc = sndk_tx_send(&io->cut.msg, &io->txcfg, e->msn, e->opcode, e->inv_stag, e->iov,
                                  e->niov);
                if (rc < 0)
                    io->msn_send--;
                break;
            case SNDK_SQ_WRITE:
                rc = sndk_tx_write(&io->cut.msg, &io->txcfg, e->rstag, e->rto, e->iov, e->niov);
                break;
            case SNDK_SQ_READ: {
                if (io->orq_count >= io->ord)
                    goto stall; /* ORD Reads outstanding: the queue waits ([IW-ORDER]) */
                if (sndk_seam_tx_fpdu_next(qp, &corrupt))
                    goto stall;
                e->msn = io->msn_read++;
                /* Private sink STag: names this Read for the responses; never in the table. */
                e->sink_stag = (e->msn << 8) | 0xa5u;
                struct sndk_read_req rr = {.sink_stag = e->sink_stag, .sink_to = 0,
                                           .size = (uint32_t)e->bytes, .src_stag = e->rstag,
                                           .src_to = e->rto};
                int n = sndk_fpdu_read_req(&io->fp[nrec], e->msn, &rr, io->txcfg.crc,
                                           io->iov + niov, room);
                if (n <= 0) {
                    io->msn_read--;
                    rc = -1;
                    break;
                }
                memset(io->iov_lend + niov, 0, (size_t)n);
                io->orq[(io->orq_head + io->orq_count) % SNDK_RD_MAX] = qp->sq_sent;
                orq_note(qp, (io->orq_head + io->orq_count) % SNDK_RD_MAX, SNDK_ORQ_READ, 0);
                io->orq_count++;
                io->rec[nrec] =
                    (struct sndk_tx_rec){.wire_len = io->fp[nrec].wire_len, .ends = SNDK_REC_NONE};
                sndk_seam_tx_fpdu_cut(qp, nrec, niov, n, corrupt);
                corrupt = false;
                nrec++;
                niov += n;
                qp->sq_sent++;
                continue;
            }
            default: /* Bind, FastRegister: took effect when posted; Invalidate: now */
                if (e->kind == SNDK_SQ_INVALIDATE) {
                    bool was_valid = sndk_access_invalidate_local(e->target);
                    sndk_obj_put(e->target);
                    e->target = NULL;
                    if (!was_valid) {
                        /* already invalid / unbound: an error completion, as any other
                         * (decisions.md #7); the loop stops at it */
                        e->status = STATUS_INVALID_DEVICE_REQUEST;
                        continue;
                    }
                }
                e->done = true;
                qp->sq_sent++;
                continue;
            }
            if (rc < 0) {
                sndk_err("tx", "QP %p: internal: request of %llu bytes refused by the encoder",
                         (void *)qp, (unsigned long long)e->bytes);
                e->status = STATUS_INTERNAL_ERROR;
                break;
            }
            io->cut.msg_active = true;
            io->cut.msg_ends = SNDK_REC_REQ;
            io->cut.msg_req = qp->sq_sent;
        }
        if (sndk_seam_tx_fpdu_next(qp, &corrupt))
            break;
        int n = sndk_tx_msg_next(&io->cut.msg, &io->fp[nrec], io->iov + niov, room);
        if (n <= 0) { /* cannot happen with room >= 3 and an unfinished message */
            sndk_err("tx", "QP %p: internal: FPDU build failed (%d)", (void *)qp, n);
            break;
        }
        /* A tagged payload (an RDMA Write's, a Read Response's) is placed where its STag says
         * the moment it arrives, so the peer takes it at once: its memory may be lent to the
         * stream. A Send's waits for a receive, and lending it would hold its completion for
         * as long (stream.h, writev_lent). */
        bool tagged = io->cut.msg_ends == SNDK_REC_RESP ||
                      sndk_sq_slot(qp, io->cut.msg_req)->kind == SNDK_SQ_WRITE;
        memset(io->iov_lend + niov, tagged && io->unsettled, (size_t)n);
        bool fin = io->cut.msg.finished;
        io->rec[nrec] = (struct sndk_tx_rec){.wire_len = io->fp[nrec].wire_len,
                                             .ends = fin ? io->cut.msg_ends : (uint8_t)SNDK_REC_NONE,
                                             .resp = io->cut.msg_ends == SNDK_REC_RESP,
                                             .req = io->cut.msg_req};
        if (fin && io->write_done == SNDK_WRITE_DONE_PLACED && io->cut.msg_ends == SNDK_REC_REQ &&
            sndk_sq_slot(qp, io->cut.msg_req)->kind == SNDK_SQ_WRITE) {
            io->rec[nrec].ends = SNDK_REC_NONE; /* done when placed: a Read behind it says */
            io->writes_unfenced++;
        }
        sndk_seam_tx_fpdu_cut(qp, nrec, niov, n, corrupt);
        corrupt = false;
        nrec++;
        niov += n;
        if (fin) {
            io->cut.msg_active = false;
            if (io->cut.msg_ends == SNDK_REC_RESP)
                io->irq_built++;
            else
                qp->sq_sent++;
        }
    }
stall:
    sndk_seam_tx_batch_built(qp, niov);
    io->nrec = nrec;
    io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = niov;
    sndk_sq_retire_done(qp); /* local requests at the head */
}

/* A request's or a Read Response's last byte is out and settled: it is done. */
static bool record_done(struct sndk_qp *qp, uint8_t ends, uint32_t req)
{
    struct sndk_conn *io = qp->io;
    if (ends == SNDK_REC_REQ) {
        sndk_sq_slot(qp, req)->done = true;
        return true;
    }
    if (ends == SNDK_REC_RESP) {
        io->irq_head = (io->irq_head + 1) % SNDK_RD_MAX;
        io->irq_count--;
        io->irq_built--;
    }
    return false;
}

/* How far the stream has settled what it was lent. The reader is asked to say when it passes
 * the rest only when there is a rest and nobody polls the initiator CQ: that look reads a clock,
 * which every Send paid for before, lent bytes or not (a sixtieth of a message's work). */
static uint64_t settled_now(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    uint64_t settled = sndk_stream_settled(&io->stream, false);
    if (settled < io->stream.written && !sndk_cq_polling(qp->icq))
        settled = sndk_stream_settled(&io->stream, true);
    return settled;
}

void sndk_tx_settle(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (io->uns_n == 0)
        return;
    uint64_t settled = settled_now(qp);
    bool retire = false;
    while (io->uns_n > 0) {
        const struct sndk_tx_unsettled *u = &io->unsettled[io->uns_head];
        if (u->end > settled)
            break;
        retire |= record_done(qp, u->ends, u->req);
        io->uns_head = (io->uns_head + 1) % io->uns_cap;
        io->uns_n--;
    }
    if (retire)
        sndk_sq_retire_done(qp);
    if (io->uns_n == 0)
        sndk_conn_update_events(io); /* the room events were watched for the settling */
}

/* n more bytes of the batch went out: what ends with a complete FPDU is done — once the
 * stream has settled it, when its bytes were lent (in order behind anything unsettled). */
static void consumed(struct sndk_qp *qp, size_t n)
{
    struct sndk_conn *io = qp->io;
    sndk_iov_advance(&io->iov_cur, &io->iov_left, n);
    bool retire = false;
    uint64_t fpdus = 0;
    uint64_t pos = io->stream.written - n; /* where these n bytes began */
    uint64_t settled = io->unsettled ? settled_now(qp) : UINT64_MAX;
    uint32_t uns_before = io->uns_n;
    while (n > 0 && io->rec_i < io->nrec) {
        struct sndk_tx_rec *r = &io->rec[io->rec_i];
        size_t left = r->wire_len - io->rec_done;
        if (n < left) {
            io->rec_done += (uint32_t)n;
            break;
        }
        n -= left;
        pos += left;
        io->rec_done = 0;
        io->rec_i++;
        fpdus++;
        sndk_seam_tx_fpdu_out(qp, r);
        if (r->ends != SNDK_REC_REQ && r->ends != SNDK_REC_RESP)
            continue;
        if (io->uns_n == 0 && pos <= settled) {
            retire |= record_done(qp, r->ends, r->req);
            continue;
        }
        /* Its room is there: one entry per request cut and per IRD slot (uns_cap). */
        assert(io->uns_n < io->uns_cap);
        io->unsettled[(io->uns_head + io->uns_n) % io->uns_cap] =
            (struct sndk_tx_unsettled){.end = pos, .ends = r->ends, .req = r->req};
        io->uns_n++;
    }
    sndk_seam_tx_fpdus_out(qp, fpdus);
    if (retire)
        sndk_sq_retire_done(qp);
    if (uns_before == 0 && io->uns_n > 0)
        sndk_conn_update_events(io); /* the settling arrives as room events: watch them */
}

/* Copy the first `cap` bytes of iov[0..n) into out (at most SNDK_TX_IOV pieces). */
static int clamp_iov(const struct iovec *iov, int n, uint64_t cap, struct iovec *out)
{
    int k = 0;
    for (int i = 0; i < n && cap > 0; i++, k++) {
        out[k] = iov[i];
        if (out[k].iov_len > cap)
            out[k].iov_len = (size_t)cap;
        cap -= out[k].iov_len;
    }
    return k;
}

enum sndk_tx_result sndk_tx_push(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (sndk_conn_ended(io))
        return SNDK_TX_IO_ERR;
    if (sndk_conn_stopped(io))
        return SNDK_TX_BLOCKED; /* failing: the progress thread ends it; nothing more goes out */
    if (sndk_conn_stalled(io, SNDK_FDIR_TX))
        return SNDK_TX_BLOCKED;
    if (io->tx_gate != SNDK_TXG_OPEN && (qp->sq_sent != qp->sq_tail || io->irq_count != 0)) {
        gate_hold(qp);
        return SNDK_TX_DRAINED; /* RX opens the gate and kicks TX */
    }
    sndk_tx_settle(qp);
    for (;;) {
        if (io->iov_left == 0) {
            fill_batch(qp);
            if (io->iov_left == 0) {
                if (sndk_seam_tx_holding(qp))
                    return sndk_seam_tx_stopped(qp);
                break;
            }
        }
        struct msghdr mh = {.msg_iov = io->iov_cur,
                            .msg_iovlen = (size_t)(io->iov_left < IOV_MAX ? io->iov_left : IOV_MAX)};
        struct iovec clamped[SNDK_TX_IOV];
        uint64_t cap;
        enum sndk_tx_result stop = SNDK_TX_DRAINED;
        enum sndk_seam_verdict v = sndk_seam_tx_write_cap(qp, &cap, &stop);
        if (v != SNDK_SEAM_GO_ON) {
            if (v == SNDK_SEAM_STOP)
                return stop;
            continue;
        }
        const uint8_t *lend = io->unsettled ? io->iov_lend + (io->iov_cur - io->iov) : NULL;
        if (cap != UINT64_MAX) {
            mh.msg_iovlen = (size_t)clamp_iov(mh.msg_iov, (int)mh.msg_iovlen, cap, clamped);
            mh.msg_iov = clamped;
            lend = NULL; /* a fault's copy of the iovecs: nothing lent */
        }
        ssize_t w = sndk_stream_writev_lent(&io->stream, mh.msg_iov, (int)mh.msg_iovlen, lend);
        if (w < 0) {
            if (w == -EINTR)
                continue;
            if (w == -EAGAIN) {
                if (!io->tx_blocked) {
                    io->tx_blocked = true;
                    sndk_conn_update_events(io);
                }
                return SNDK_TX_BLOCKED;
            }
            sndk_debug("tx", "QP %p: send: errno %d", (void *)qp, (int)-w);
            atomic_store_explicit(&io->sock_failed, true, memory_order_release);
            return SNDK_TX_IO_ERR;
        }
        sndk_seam_tx_wrote(qp, mh.msg_iov, (int)mh.msg_iovlen, (size_t)w);
        consumed(qp, (size_t)w);
        if (io->stream.trim_wanted)
            sndk_conn_trim_later(qp);
    }
    if (io->tx_blocked) {
        io->tx_blocked = false;
        sndk_conn_update_events(io);
    }
    if (sndk_conn_end_found(io) ||
        (qp->sq_sent != qp->sq_tail && sndk_sq_slot(qp, qp->sq_sent)->status != STATUS_SUCCESS))
        return SNDK_TX_LOCAL_ERR;
    if (sndk_conn_phase(io) == SNDK_PHASE_SHUTTING_DOWN && qp->sq_sent == qp->sq_tail &&
        io->irq_count == 0 && io->writes_unfenced == 0 /* a fence goes before the FIN */ &&
        io->uns_n == 0 /* and every lent byte was taken: the requests complete, not flush */) {
        /* sndk_qp_shutdown: everything posted before it is out; now our FIN. */
        sndk_stream_shutdown_write(&io->stream);
        sndk_conn_phase_set(qp, SNDK_PHASE_FIN_SENT, "last request out");
        sndk_seam_tx_fin(qp);
        sndk_debug("tx", "QP %p: FIN sent", (void *)qp);
    }
    return SNDK_TX_DRAINED;
}

void sndk_tx_terminate(struct sndk_qp *qp, const struct sndk_term *t)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (sndk_conn_ended(io))
        return;
    if (io->rec_done != 0) {
        /* A Terminate must not land inside a half-written FPDU (siw skips it likewise). */
        sndk_debug("tx", "QP %p: Terminate skipped: an FPDU is half written", (void *)qp);
        return;
    }
    struct sndk_fpdu f;
    struct iovec iov[3];
    int n = sndk_fpdu_terminate(&f, io->msn_term++, t, io->txcfg.crc, iov, 3);
    if (n < 0)
        return;
    ssize_t w = sndk_stream_writev(&io->stream, iov, n);
    if (w > 0)
        sndk_seam_tx_term_sent(qp, t, iov, n, (size_t)w, f.wire_len);
    sndk_debug("tx", "QP %p: Terminate %s/%s/%s sent (%zd of %u bytes)", (void *)qp,
               sndk_term_layer_name(t->layer), sndk_term_etype_name(t->layer, t->etype),
               sndk_term_code_name(t->layer, t->etype, t->code), w, f.wire_len);
}

void sndk_tx_discard(struct sndk_conn *io)
{
    io->uns_head = 0; /* their requests are flushed with the rest */
    io->uns_n = 0;
    io->nrec = io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = 0;
    io->cut.msg_active = false;
}
