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

#include "core/adapter.h"
#include "core/verify.h"
#include "iwarp/crc32c.h"
#include "iwarp/qp_io.h"
#include "util/log.h"
#include "util/trace.h"

void sndk_tx_init(struct sndk_qp_io *io, bool crc, uint32_t max_fpdu, uint32_t ird, uint32_t ord)
{
    io->txcfg = (struct sndk_tx_cfg){.max_fpdu = max_fpdu, .crc = crc};
    io->msn_send = 1;
    io->msn_term = 1;
    io->msn_read = 1;
    io->ird = ird < SNDK_RD_MAX ? ird : SNDK_RD_MAX;
    io->ord = ord < SNDK_RD_MAX ? ord : SNDK_RD_MAX;
    io->nrec = io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = 0;
    io->msg_active = false;
}

void sndk_tx_update_events(struct sndk_qp_io *io)
{
    if (sndk_conn_ended(io))
        return;
    uint32_t ev = (io->peer_fin || io->rx_parked || io->rx_stalled ? 0u : (uint32_t)EPOLLIN) |
                  (io->tx_blocked && !io->tx_stalled ? (uint32_t)EPOLLOUT : 0u);
    int rc = sndk_source_modify(&io->src, ev);
    if (rc < 0 && rc != -ENOENT)
        sndk_warn("tx", "QP %p: epoll modify: %d", (void *)io->qp, rc);
    sndk_qp_watch_cqs(io);
}

static struct sndk_sqe *slot(struct sndk_qp *qp, uint32_t idx)
{
    return &qp->sq[idx % qp->initiator_depth];
}

static const char *const tx_gate_names[SNDK_TXG_COUNT] = {
    [SNDK_TXG_OPEN] = "open",
    [SNDK_TXG_AWAITING] = "awaiting-initiator",
    [SNDK_TXG_HOLDING] = "holding",
};

static void set_gate(struct sndk_qp *qp, enum sndk_tx_gate to, const char *why)
{
    struct sndk_qp_io *io = qp->io;
    enum sndk_tx_gate from = (enum sndk_tx_gate)io->tx_gate;
    /* OPEN is final; AWAITING -> HOLDING -> OPEN, or AWAITING -> OPEN */
    assert(from != SNDK_TXG_OPEN && to != from && to != SNDK_TXG_AWAITING);
    sndk_debug("tx", "QP %p: gate %s => %s (%s)", (void *)qp, tx_gate_names[from],
               tx_gate_names[to], why);
    io->tx_gate = (uint8_t)to;
}

void sndk_tx_gate_await(struct sndk_qp_io *io)
{
    io->tx_gate = SNDK_TXG_AWAITING;
    sndk_debug("tx", "QP %p: gate open => %s (MPA Responder without an RTR)", (void *)io->qp,
               tx_gate_names[SNDK_TXG_AWAITING]);
}

void sndk_tx_gate_open(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (io->tx_gate == SNDK_TXG_OPEN)
        return;
    bool held = io->tx_gate == SNDK_TXG_HOLDING;
    set_gate(qp, SNDK_TXG_OPEN, "the Initiator's first FPDU arrived");
    if (held) {
        SNDK_TRACE("tx.gate_opened", "qp", qp, "\"held\":true");
        io->tx_kick = true;
    }
}

/* A push while the gate is not open and a request is ready: nothing goes; the first time,
 * count and trace that it waits. (With nothing ready the push goes on: a FIN is no FPDU.) */
static void gate_hold(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
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
    struct sndk_qp_io *io = qp->io;
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
    struct sndk_fail *f = &io->tx_fail;
    memset(f, 0, sizeof *f);
    sndk_term_from_fault(&f->term, &wf);
    f->send_term = true;
    f->notify = true;
    f->link_status = STATUS_CONNECTION_ABORTED;
    f->reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT, f->term.layer, f->term.etype, f->term.code);
    io->tx_failed = true;
}

/* Start cutting the response to the oldest inbound Read Request not yet cut. The source is
 * checked (again) and translated now, so a region revoked since the request arrived is never
 * read. Returns false when the connection must end (io->tx_fail). */
static bool start_response(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    const struct sndk_irq_entry *q = &io->irq[(io->irq_head + io->irq_built) % SNDK_RD_MAX];
    uint64_t need = (uint64_t)q->rr.size / NDK_ADAPTER_PAGE_SIZE + 2;
    if (need > (uint64_t)io->resp_cap) {
        struct iovec *n = realloc(io->resp_iov, (size_t)need * sizeof *n);
        if (!n) {
            response_refused(qp, q, SNDK_ACC_TOO_MANY);
            return false;
        }
        io->resp_iov = n;
        io->resp_cap = (int)need;
    }
    int n = 0;
    enum sndk_access_result r =
        sndk_access_check(qp->pd, q->rr.src_stag, q->rr.src_to, q->rr.size,
                          SNDK_ACCESS_REMOTE_READ, true, io->resp_iov, io->resp_cap, &n);
    if (r != SNDK_ACC_OK) {
        response_refused(qp, q, r);
        return false;
    }
    if (sndk_tx_read_resp(&io->msg, &io->txcfg, q->rr.sink_stag, q->rr.sink_to, io->resp_iov,
                          n) < 0) {
        response_refused(qp, q, SNDK_ACC_WRAP); /* checked on arrival; cannot happen */
        return false;
    }
    io->msg_active = true;
    io->msg_ends = SNDK_REC_RESP;
    return true;
}

/* The FPDU about to be cut: does a fault rule (docs/faults.md) act on it? True: the batch
 * stops in front of it and io->tx_fault says what happens once the batch is out. *corrupt:
 * cut it with a wrong CRC. */
static bool fault_point(struct sndk_qp_io *io, bool *corrupt)
{
    uint32_t ms = 0;
    const struct sndk_fault_rule *r = NULL;
    enum sndk_fault_action a = sndk_fault_fpdu(io->fc, SNDK_FDIR_TX, io->qp, &ms, &r);
    if (a == SNDK_FACT_CRC)
        *corrupt = true;
    if (a == SNDK_FACT_NONE || a == SNDK_FACT_CRC)
        return false;
    io->tx_fault = a;
    io->tx_fault_ms = ms;
    io->tx_fault_rule = r;
    return true;
}

/* One more FPDU is in the batch (for the fault rules' counts). */
static void cut_one(struct sndk_qp_io *io, int rec, bool corrupt)
{
    if (!io->fc)
        return;
    io->fc->d[SNDK_FDIR_TX].fpdus++;
    if (corrupt) /* the CRC is the trailer's last 4 bytes, sent from here */
        io->fp[rec].trailer[io->fp[rec].trailer_len - 1] ^= 0xffu;
}

/* Source check (SOFTNDK_OPTIONS.SourceCheck): the FPDU's payload is out[1 .. n-2] (header
 * first, pad + CRC last); checksum it as it is now. */
static void source_note(struct sndk_qp_io *io, struct sndk_tx_rec *r, int first, int n)
{
    r->pay_first = (uint16_t)(first + 1);
    r->pay_n = (uint16_t)(n - 2);
    r->pay_sum = sndk_crc32c_iov(0, io->iov + r->pay_first, r->pay_n);
}

/* The FPDU is in TCP: its source must still be what was checksummed when it was built. A
 * difference is the consumer's bug (NDK: a source belongs to the provider until the request
 * completes), which CRC makes the peer see as a CRC error and CRC off hides entirely. */
static void source_check(struct sndk_qp *qp, const struct sndk_tx_rec *r)
{
    struct sndk_qp_io *io = qp->io;
    if (sndk_crc32c_iov(0, io->src_iov + r->pay_first, r->pay_n) == r->pay_sum)
        return;
    sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_SOURCE_MODIFIED);
    size_t len = sndk_iov_len(io->src_iov + r->pay_first, r->pay_n);
    if (r->resp) {
        sndk_err("tx",
                 "QP %p: the source of an RDMA Read Response changed while it was sent "
                 "(%zu bytes): the local memory the peer reads was modified",
                 (void *)qp, len);
        SNDK_TRACE("tx.source_modified", "qp", qp, "\"what\":\"read_response\",\"bytes\":%zu", len);
        if (sndk_verify_on(qp->base.adapter))
            sndk_verify_report(&qp->base, SoftNdkVerifySourceModified, NULL,
                               "the memory a peer's RDMA Read reads (%zu bytes) changed while "
                               "the response was sent",
                               len);
    } else {
        void *ctx = slot(qp, r->req)->context;
        sndk_err("tx",
                 "QP %p: the source of request %p changed between its posting and its "
                 "completion (an FPDU of %zu bytes went out different from what was posted)",
                 (void *)qp, ctx, len);
        SNDK_TRACE("tx.source_modified", "qp", qp, "\"request_context\":\"%p\",\"bytes\":%zu", ctx,
                   len);
        if (sndk_verify_on(qp->base.adapter))
            sndk_verify_report(&qp->base, SoftNdkVerifySourceModified, ctx,
                               "an FPDU of %zu bytes went out different from what was posted "
                               "(SourceCheck)",
                               len);
    }
}

/* Gather the next batch of FPDUs: Read Responses first (they answer the peer), then the
 * initiator queue in order. Stops before a request that failed its local checks (the ones
 * before it must be out and retired first so that completions stay in order), before a Read
 * when ORD Reads are outstanding, and before a READ_FENCE request while any Read is. */
static void fill_batch(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    int nrec = 0, niov = 0;
    bool corrupt = false;
    while (nrec < SNDK_TX_BATCH && !io->tx_failed && io->tx_fault == SNDK_FACT_NONE) {
        int room = SNDK_TX_IOV - niov;
        if (room < 3)
            break;
        if (room > SNDK_TX_SEG_IOV)
            room = SNDK_TX_SEG_IOV;
        if (!io->msg_active && io->irq_built < io->irq_count) {
            if (!start_response(qp))
                break;
        } else if (!io->msg_active) {
            if (qp->sq_sent == qp->sq_tail)
                break;
            struct sndk_sqe *e = slot(qp, qp->sq_sent);
            if (e->status != STATUS_SUCCESS)
                break;
            if ((e->flags & NDK_OP_FLAG_READ_FENCE) && io->orq_count > 0)
                break; /* [IW-ORDER]: not started before every earlier Read has its data */
            int rc = 0;
            switch (e->kind) {
            case SNDK_SQ_SEND:
                e->msn = io->msn_send++;
                rc = sndk_tx_send(&io->msg, &io->txcfg, e->msn, e->opcode, e->inv_stag, e->iov,
                                  e->niov);
                if (rc < 0)
                    io->msn_send--;
                break;
            case SNDK_SQ_WRITE:
                rc = sndk_tx_write(&io->msg, &io->txcfg, e->rstag, e->rto, e->iov, e->niov);
                break;
            case SNDK_SQ_READ: {
                if (io->orq_count >= io->ord)
                    goto stall; /* ORD Reads outstanding: the queue waits ([IW-ORDER]) */
                if (io->fc && fault_point(io, &corrupt))
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
                io->orq[(io->orq_head + io->orq_count) % SNDK_RD_MAX] = qp->sq_sent;
                io->orq_count++;
                io->rec[nrec] =
                    (struct sndk_tx_rec){.wire_len = io->fp[nrec].wire_len, .ends = SNDK_REC_NONE};
                cut_one(io, nrec, corrupt);
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
            io->msg_active = true;
            io->msg_ends = SNDK_REC_REQ;
            io->msg_req = qp->sq_sent;
        }
        if (io->fc && fault_point(io, &corrupt))
            break;
        int n = sndk_tx_msg_next(&io->msg, &io->fp[nrec], io->iov + niov, room);
        if (n <= 0) { /* cannot happen with room >= 3 and an unfinished message */
            sndk_err("tx", "QP %p: internal: FPDU build failed (%d)", (void *)qp, n);
            break;
        }
        bool fin = io->msg.finished;
        io->rec[nrec] = (struct sndk_tx_rec){.wire_len = io->fp[nrec].wire_len,
                                             .ends = fin ? io->msg_ends : (uint8_t)SNDK_REC_NONE,
                                             .resp = io->msg_ends == SNDK_REC_RESP,
                                             .req = io->msg_req};
        if (io->src_iov && io->fp[nrec].payload_len)
            source_note(io, &io->rec[nrec], niov, n);
        cut_one(io, nrec, corrupt);
        corrupt = false;
        nrec++;
        niov += n;
        if (fin) {
            io->msg_active = false;
            if (io->msg_ends == SNDK_REC_RESP)
                io->irq_built++;
            else
                qp->sq_sent++;
        }
    }
stall:
    if (io->src_iov)
        memcpy(io->src_iov, io->iov, (size_t)niov * sizeof *io->iov);
    io->nrec = nrec;
    io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = niov;
    sndk_qp_retire_done(qp); /* local requests at the head */
}

/* n more bytes of the batch went out: what ends with a complete FPDU is done. */
static void consumed(struct sndk_qp *qp, size_t n)
{
    struct sndk_qp_io *io = qp->io;
    sndk_iov_advance(&io->iov_cur, &io->iov_left, n);
    bool retire = false;
    uint64_t fpdus = 0;
    while (n > 0 && io->rec_i < io->nrec) {
        struct sndk_tx_rec *r = &io->rec[io->rec_i];
        size_t left = r->wire_len - io->rec_done;
        if (n < left) {
            io->rec_done += (uint32_t)n;
            break;
        }
        n -= left;
        io->rec_done = 0;
        io->rec_i++;
        fpdus++;
        if (io->src_iov && r->pay_n)
            source_check(qp, r);
        if (r->ends == SNDK_REC_REQ) {
            slot(qp, r->req)->done = true;
            retire = true;
        } else if (r->ends == SNDK_REC_RESP) {
            io->irq_head = (io->irq_head + 1) % SNDK_RD_MAX;
            io->irq_count--;
            io->irq_built--;
        }
    }
    if (io->crec)
        sndk_cc_add(io->crec, SNDK_CC_TX_FPDUS, fpdus);
    if (retire)
        sndk_qp_retire_done(qp);
}

/* An injected fault acts where the stream stands now (everything before it is out). */
static enum sndk_tx_result fault_act(struct sndk_qp *qp, enum sndk_fault_action a, uint32_t ms,
                                     const struct sndk_fault_rule *r)
{
    struct sndk_qp_io *io = qp->io;
    io->tx_fault = SNDK_FACT_NONE;
    if (a == SNDK_FACT_STALL) {
        io->tx_stalled = true;
        io->tx_blocked = true; /* postings queue meanwhile */
        sndk_tx_update_events(io);
        sndk_qp_stall_timer(qp, SNDK_FDIR_TX, ms);
        return SNDK_TX_BLOCKED;
    }
    struct sndk_fail *f = &io->tx_fail;
    memset(f, 0, sizeof *f);
    f->notify = true;
    if (a == SNDK_FACT_TERMINATE && r) {
        f->send_term = true;
        f->term.layer = r->layer;
        f->term.etype = r->etype;
        f->term.code = r->code;
        f->link_status = STATUS_CONNECTION_ABORTED;
        f->reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT, r->layer, r->etype, r->code);
    } else { /* drop: as if the network reset the connection */
        f->link_status = STATUS_CONNECTION_RESET;
        f->reason = SNDK_REASON_RESET;
        f->rst = true;
    }
    io->tx_failed = true;
    return SNDK_TX_LOCAL_ERR;
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
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (sndk_conn_ended(io))
        return SNDK_TX_IO_ERR;
    if (sndk_conn_stopped(io))
        return SNDK_TX_BLOCKED; /* failing: the progress thread ends it; nothing more goes out */
    if (io->tx_stalled)
        return SNDK_TX_BLOCKED;
    if (io->tx_gate != SNDK_TXG_OPEN && (qp->sq_sent != qp->sq_tail || io->irq_count != 0)) {
        gate_hold(qp);
        return SNDK_TX_DRAINED; /* RX opens the gate and kicks TX */
    }
    for (;;) {
        if (io->iov_left == 0) {
            fill_batch(qp);
            if (io->iov_left == 0) {
                if (io->tx_fault != SNDK_FACT_NONE)
                    return fault_act(qp, io->tx_fault, io->tx_fault_ms, io->tx_fault_rule);
                break;
            }
        }
        struct msghdr mh = {.msg_iov = io->iov_cur,
                            .msg_iovlen = (size_t)(io->iov_left < IOV_MAX ? io->iov_left : IOV_MAX)};
        struct iovec clamped[SNDK_TX_IOV];
        if (io->fc && io->fc->d[SNDK_FDIR_TX].byte_mark != UINT64_MAX) {
            /* an after_bytes rule: the stream stops exactly at its byte */
            struct sndk_fault_dirstate *d = &io->fc->d[SNDK_FDIR_TX];
            if (d->byte_mark == d->bytes) {
                uint32_t ms = 0;
                enum sndk_fault_action a = sndk_fault_bytes(io->fc, SNDK_FDIR_TX, qp, &ms);
                if (a != SNDK_FACT_NONE)
                    return fault_act(qp, a, ms, NULL);
                continue;
            }
            mh.msg_iovlen = (size_t)clamp_iov(mh.msg_iov, (int)mh.msg_iovlen,
                                              d->byte_mark - d->bytes, clamped);
            mh.msg_iov = clamped;
        }
        ssize_t w = sendmsg(io->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!io->tx_blocked) {
                    io->tx_blocked = true;
                    sndk_tx_update_events(io);
                }
                return SNDK_TX_BLOCKED;
            }
            sndk_debug("tx", "QP %p: sendmsg: errno %d", (void *)qp, errno);
            atomic_store_explicit(&io->sock_failed, true, memory_order_release);
            return SNDK_TX_IO_ERR;
        }
        if (io->crec) {
            sndk_cc_add(io->crec, SNDK_CC_TX_OCTETS, (uint64_t)w);
            sndk_pcap_iov(io->crec->pcap, true, mh.msg_iov, (int)mh.msg_iovlen, (size_t)w);
        }
        if (io->fc)
            io->fc->d[SNDK_FDIR_TX].bytes += (uint64_t)w;
        consumed(qp, (size_t)w);
    }
    if (io->tx_blocked) {
        io->tx_blocked = false;
        sndk_tx_update_events(io);
    }
    if (io->tx_failed ||
        (qp->sq_sent != qp->sq_tail && slot(qp, qp->sq_sent)->status != STATUS_SUCCESS))
        return SNDK_TX_LOCAL_ERR;
    if (sndk_conn_phase(io) == SNDK_PHASE_SHUTTING_DOWN && qp->sq_sent == qp->sq_tail &&
        io->irq_count == 0) {
        /* sndk_qp_shutdown: everything posted before it is out; now our FIN. */
        shutdown(io->fd, SHUT_WR);
        sndk_conn_phase_set(qp, SNDK_PHASE_FIN_SENT, "last request out");
        if (io->crec)
            sndk_pcap_fin(io->crec->pcap, true);
        sndk_debug("tx", "QP %p: FIN sent", (void *)qp);
    }
    return SNDK_TX_DRAINED;
}

void sndk_tx_terminate(struct sndk_qp *qp, const struct sndk_term *t)
{
    struct sndk_qp_io *io = qp->io;
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
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(io->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0 && io->crec) {
        sndk_cc_add(io->crec, SNDK_CC_TX_OCTETS, (uint64_t)w);
        if ((size_t)w == f.wire_len)
            sndk_cc_add(io->crec, SNDK_CC_TX_FPDUS, 1);
        sndk_pcap_iov(io->crec->pcap, true, iov, n, (size_t)w);
    }
    if (w > 0) {
        sndk_counters_term(&qp->base.adapter->ctrs, true, t->layer, t->etype, t->code);
        SNDK_TRACE("term.sent", "QP", qp, "\"layer\":%u,\"etype\":%u,\"code\":%u",
                   (unsigned)t->layer, (unsigned)t->etype, (unsigned)t->code);
    }
    sndk_debug("tx", "QP %p: Terminate %s/%s/%s sent (%zd of %u bytes)", (void *)qp,
               sndk_term_layer_name(t->layer), sndk_term_etype_name(t->layer, t->etype),
               sndk_term_code_name(t->layer, t->etype, t->code), w, f.wire_len);
}

void sndk_tx_discard(struct sndk_qp_io *io)
{
    io->nrec = io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = 0;
    io->msg_active = false;
}
