/* The connection under a QP (docs/datapath.md, "The connection"): its phases and the QP's
 * states they drive, attach, shutdown and the one end (conn_end), the TX and RX drivers on
 * the progress thread and on polling consumers, parking, the timers (receiver not ready,
 * shutdown bound, injected stalls) and the retirement of finished requests into the CQs.
 * core/qp.c keeps the NDK object (create, close, validation, filling a request slot) and calls
 * down here to publish, flush and end; tx.c and rx.c turn requests into FPDUs and FPDUs into
 * placements. */
#include "datapath/conn.h"
#include "datapath/tx.h"
#include "datapath/rx.h"
#include "datapath/place.h"
#include "datapath/rnr.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/srq.h"
#include "datapath/dp_seams.h"
#include "datapath/link.h"
#include "datapath/phase.h"
#include "datapath/watch.h"
#include "datapath/sq.h"
#include "util/clock.h"
#include "util/log.h"
#include "verify/verify.h"

static const char *const qp_state_names[SNDK_QP_STATE_COUNT] = {
    [SNDK_QP_IDLE] = "idle",
    [SNDK_QP_CONNECTED] = "connected",
    [SNDK_QP_DISCONNECTING] = "disconnecting",
    [SNDK_QP_ERROR] = "error",
};

const char *sndk_qp_state_name(enum sndk_qp_state s)
{
    return (unsigned)s < SNDK_QP_STATE_COUNT ? qp_state_names[s] : "?";
}

/* ---------------------------------------------------------------- state machine */

/* One function per source state: may the QP go to `next` from here? */
static bool from_idle(enum sndk_qp_state next)
{
    return next == SNDK_QP_CONNECTED /* attach */
           || next == SNDK_QP_ERROR; /* the connection attempt failed before attach */
}
static bool from_connected(enum sndk_qp_state next)
{
    return next == SNDK_QP_DISCONNECTING || next == SNDK_QP_ERROR;
}
static bool from_disconnecting(enum sndk_qp_state next)
{
    return next == SNDK_QP_ERROR;
}
static bool from_error(enum sndk_qp_state next)
{
    (void)next;
    return false; /* final */
}

static bool (*const transitions[SNDK_QP_STATE_COUNT])(enum sndk_qp_state) = {
    [SNDK_QP_IDLE] = from_idle,
    [SNDK_QP_CONNECTED] = from_connected,
    [SNDK_QP_DISCONNECTING] = from_disconnecting,
    [SNDK_QP_ERROR] = from_error,
};

/* Move to `next` if the current state allows it. Caller holds state_lock. */
bool sndk_qp_set_state(struct sndk_qp *qp, enum sndk_qp_state next, const char *why)
{
    sndk_assert_held(&qp->state_lock);
    enum sndk_qp_state cur = sndk_qp_state(qp);
    if (!transitions[cur](next))
        return false;
    sndk_debug("qp", "QP %p: %s => %s (%s)", (void *)qp, sndk_qp_state_name(cur),
               sndk_qp_state_name(next), why);
    SNDK_TRACE("qp.state", "QP", qp, "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\"",
               sndk_qp_state_name(cur), sndk_qp_state_name(next), why);
    atomic_store_explicit(&qp->state, next, memory_order_release);
    return true;
}

/* ---------------------------------------------------------------- completions */

/* Does the peer's Terminate (*f) name request e? `cut`: e went on the wire, so its MSN is its
 * own. A request not cut yet holds 0, which is also a real MSN: the untagged header's MSN counts
 * modulo 2^32 (RFC 5041, the DDP header), so a connection's 2^32nd Send goes out with MSN 0. */
static bool named_by(const struct sndk_fail *f, const struct sndk_sqe *e, bool cut)
{
    if (!f->named || e->kind != f->named_kind || !cut)
        return false;
    switch (e->kind) {
    case SNDK_SQ_READ:
        if (f->named_stag != 0) /* the included Read Request's sink STag (rx.c) */
            return e->sink_stag == f->named_stag;
        return e->msn == f->named_msn;
    case SNDK_SQ_SEND:
        return e->msn == f->named_msn;
    case SNDK_SQ_WRITE:
        return e->rstag == f->named_stag && f->named_to >= e->rto &&
               f->named_to - e->rto <= e->bytes;
    default:
        return false;
    }
}

/* Complete every queued receive of the own queue with STATUS_CANCELLED, in posting order.
 * rx_lock held: the flush is the ring's taker here, as the receive side is elsewhere, so
 * flushed and received completions keep the order. */
static void flush_queued_receives(struct sndk_qp *qp)
{
    sndk_assert_held(&qp->rx_lock);
    if (qp->srq)
        return; /* SRQ receives belong to no QP until one takes them */
    /* Pairs with the post's fence (core/qp.c qp_receive): the state or close that made this
     * flush is stored before we look at what is queued, so a receive posted after the look
     * sees it and flushes itself. */
    atomic_thread_fence(memory_order_seq_cst);
    uint32_t n = sndk_recv_ring_count(&qp->rq);
    for (uint32_t i = 0; i < n; i++) {
        struct sndk_recv_wqe *w = sndk_recv_ring_at(&qp->rq, i);
        NDK_RESULT_EX r = {
            .Status = STATUS_CANCELLED,
            .QPContext = qp->context,
            .RequestContext = w->context,
            .Type = NdkOperationTypeReceive,
        };
        sndk_cq_post(qp->rcq, &r, false);
    }
    sndk_recv_ring_drop(&qp->rq, n);
    if (n)
        atomic_fetch_add_explicit(&qp->base.adapter->ctrs.v[SNDK_CTR_FLUSHED], n,
                                  memory_order_relaxed);
    if (n)
        sndk_debug("qp", "QP %p: flushed %u receive(s)", (void *)qp, n);
}

/* The receive being filled completes before the queued ones: it was posted first. */
static void flush_all_receives(struct sndk_qp *qp, NTSTATUS cur_status, ULONG cur_code)
{
    sndk_mutex_lock(&qp->rx_lock);
    if (qp->io)
        sndk_rx_cancel_current(qp, cur_status, cur_code);
    flush_queued_receives(qp);
    sndk_mutex_unlock(&qp->rx_lock);
}

/* ---------------------------------------------------------------- link events */

static void ev_queue_locked(struct sndk_qp *qp, unsigned what)
{
    sndk_assert_held(&qp->state_lock);
    struct sndk_conn *io = qp->io;
    if (io->detached)
        return;
    io->ev_pending |= what;
    /* queued now: the QP outlives the work (engine.h, "References") */
    if (sndk_engine_queue_on(io->engine, io->thread, &io->ev_work))
        sndk_obj_get(&qp->base);
}

static void ev_work_fn(struct sndk_work *w)
{
    struct sndk_conn *io = sndk_container_of(w, struct sndk_conn, ev_work);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->state_lock);
    unsigned pending = io->ev_pending;
    io->ev_pending = 0;
    bool detached = io->detached;
    NTSTATUS abort_st = io->ev_abort_status, shut_st = io->ev_shut_status;
    ULONG reason = io->ev_abort_reason;
    sndk_mutex_unlock(&qp->state_lock);
    /* Detach queues its done item on this thread after setting `detached`, so once it is
     * queued no callback starts here. */
    if (!detached) {
        if ((pending & SNDK_EV_PEER_CLOSED) && io->ev.peer_closed)
            io->ev.peer_closed(io->ev_ctx);
        if ((pending & SNDK_EV_ABORTED) && io->ev.aborted)
            io->ev.aborted(io->ev_ctx, abort_st, reason);
        if ((pending & SNDK_EV_SHUTDOWN_DONE) && io->ev.shutdown_done)
            io->ev.shutdown_done(io->ev_ctx, shut_st);
    }
    sndk_obj_put(&qp->base);
}

static void detach_work_fn(struct sndk_work *w)
{
    struct sndk_conn *io = sndk_container_of(w, struct sndk_conn, detach_work);
    if (io->detach_done)
        sndk_engine_queue(io->engine, io->detach_done);
}

/* The source is out of epoll and no call of its fn is in flight: the socket is ours to close. */
static void src_done_fn(struct sndk_work *w)
{
    struct sndk_conn *io = sndk_container_of(w, struct sndk_conn, src_done);
    struct sndk_qp *qp = io->qp;
    const struct sndk_fail *end = sndk_conn_end_found(io); /* recorded before the removal */
    bool rst = end && end->rst;
    sndk_mutex_lock(&qp->tx_lock);
    if (io->rx_park == SNDK_RX_PARKED) /* ended parked: nothing will unpark it */
        sndk_cq_parked(qp->rcq, -1);
    sndk_rx_park_set(qp, SNDK_RX_PARK_CLOSED, "the stream closes");
    sndk_mutex_unlock(&qp->tx_lock);
    /* out of the CQs' readiness sets before the descriptor can be reused */
    sndk_cq_conn_remove(qp->rcq, &io->rconn);
    if (qp->icq != qp->rcq)
        sndk_cq_conn_remove(qp->icq, &io->iconn);
    sndk_stream_close(&io->stream, rst);
    sndk_debug("qp", "QP %p: %s stream closed%s", (void *)qp, io->stream.ops->name,
               rst ? " (reset)" : "");
    sndk_obj_put(&qp->base); /* the connection's reference */
}

/* ---------------------------------------------------------------- the end */

/* Act on the connection's end: the first one recorded, f (found by `by`) when none was. Once
 * (the QP's move to ERROR decides who acts; later calls only return). Takes every QP lock in
 * turn: the caller holds none. Completes every outstanding request. */
static void conn_end(struct sndk_qp *qp, enum sndk_end_finder by, const struct sndk_fail *f)
{
    struct sndk_conn *io = qp->io;
    if (!io)
        return;
    sndk_mutex_lock(&qp->tx_lock);
    struct sndk_fail end = *sndk_conn_end_record(io, by, f);
    sndk_mutex_unlock(&qp->tx_lock);
    f = &end;
    sndk_mutex_lock(&qp->state_lock);
    enum sndk_qp_state was = sndk_qp_state(qp);
    if (!sndk_qp_set_state(qp, SNDK_QP_ERROR, f->graceful ? "shutdown finished" : "failed")) {
        sndk_mutex_unlock(&qp->state_lock);
        return;
    }
    /* The connection is visible (CONNECTED, on its CQs) a moment before attach adds its socket
     * source. Decided in the same section as ERROR: while the phase is still attaching (attach
     * moves it to live under state_lock), attach sees ERROR once the source is added, and
     * removes it itself. */
    bool remove_src = sndk_conn_phase(io) != SNDK_PHASE_ATTACHING;
    sndk_mutex_unlock(&qp->state_lock);

    sndk_mutex_lock(&qp->rx_lock);
    sndk_mutex_lock(&qp->tx_lock);
    /* Our direction may have ended already (the shutdown's FIN went after the last request):
     * then nothing more can be written, and it ends once (the stream keeps that record: the
     * phase may have moved on to failing since). */
    if (f->send_term && !io->stream.write_ended)
        sndk_tx_terminate(qp, &f->term);
    /* FIN right behind the Terminate / the last FPDU */
    if ((f->send_term || f->graceful) && sndk_stream_shutdown_write(&io->stream))
        sndk_seam_tx_fin(qp);
    /* from here only src_done touches the socket */
    sndk_conn_phase_set(qp, SNDK_PHASE_ENDED, f->graceful ? "shutdown finished" : "failed");
    /* The requests before this counter were cut, in part at least, so they have their MSNs
     * (sq_sent passes a message once it is wholly cut; the one being cut has its MSN already).
     * Cut is not written: a peer can name only what it received, so a request cut but never
     * written is never named. */
    uint32_t cut_end = qp->sq_sent;
    if (io->cut.msg_active && io->cut.msg_ends == SNDK_REC_REQ) {
        assert(io->cut.msg_req == qp->sq_sent);
        cut_end++;
    }
    sndk_tx_discard(io);
    /* each timer cancelled before it fired ends its pending period: its reference is ours */
    unsigned stall_refs = (unsigned)sndk_timer_cancel(&io->tx_stall_timer) +
                          (unsigned)sndk_timer_cancel(&io->rx_stall_timer) +
                          /* the receiver-not-ready bound: a wait ends with the connection */
                          (unsigned)sndk_timer_cancel(&io->rnr_timer) +
                          (unsigned)sndk_timer_cancel(&io->trim_timer);
    /* Every outstanding initiator request completes, in order: its own local error, the
     * peer's refusal when a Terminate named it, else STATUS_CANCELLED. */
    while (atomic_load_explicit(&qp->sq_head, memory_order_relaxed) != qp->sq_tail) {
        uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
        struct sndk_sqe *e = sndk_sq_slot(qp, head);
        NTSTATUS st = STATUS_CANCELLED;
        ULONG code = 0;
        /* [head, cut_end) was cut; once head passes cut_end nothing left was */
        bool cut = cut_end - head - 1u < qp->sq_tail - head;
        if (e->status == STATUS_SUCCESS && named_by(f, e, cut)) {
            /* The peer refused it (a Write may have left in full and wait behind a Read). */
            st = f->named_status;
            code = f->reason;
        } else if (e->status != STATUS_SUCCESS || e->done) {
            st = e->status; /* its own local error, or finished behind an unfinished one */
            code = e->code;
        }
        sndk_sq_retire_head(qp, st, code);
    }
    qp->sq_sent = qp->sq_tail;
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_rx_cancel_current(qp, f->rx_status ? f->rx_status : STATUS_CANCELLED, f->rx_code);
    flush_queued_receives(qp);
    if (qp->srq)
        sndk_srq_rnr_done(qp->srq, &io->rnr_waiter); /* off the SRQ's waiters, if it was waiting */
    sndk_mutex_unlock(&qp->rx_lock);

    sndk_mutex_lock(&qp->state_lock);
    bool drop_timer_ref = sndk_timer_cancel(&io->shut_timer);
    if (was == SNDK_QP_DISCONNECTING || f->graceful) {
        /* sndk_qp_shutdown is waiting: it learns the end, whatever it was. */
        io->ev_shut_status = f->graceful ? f->shut_status : f->link_status;
        ev_queue_locked(qp, SNDK_EV_SHUTDOWN_DONE);
    } else if (f->notify) {
        io->ev_abort_status = f->link_status;
        io->ev_abort_reason = f->reason;
        ev_queue_locked(qp, SNDK_EV_ABORTED);
    }
    sndk_mutex_unlock(&qp->state_lock);
    if (remove_src)
        sndk_source_remove(&io->src, &io->src_done);
    if (drop_timer_ref)
        sndk_obj_put(&qp->base);
    while (stall_refs-- > 0)
        sndk_obj_put(&qp->base);
    sndk_debug("qp", "QP %p: connection ended: 0x%08x reason 0x%08x", (void *)qp,
               (unsigned)f->link_status, (unsigned)f->reason);
}

static void qp_cq_overrun(struct sndk_qp *qp)
{
    struct sndk_fail f = {.link_status = STATUS_CONNECTION_ABORTED,
                          .reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT,
                                                     SNDK_TERM_LAYER_RDMAP,
                                                     SNDK_TERM_RDMAP_LOCAL_CATA, 0),
                          .notify = true, .send_term = true};
    f.term.layer = SNDK_TERM_LAYER_RDMAP;
    f.term.etype = SNDK_TERM_RDMAP_LOCAL_CATA;
    conn_end(qp, SNDK_END_LOCAL, &f);
}

/* The end of a connection found by its data path (a receive pass, a TX result, the end of a
 * shutdown) is acted on by the connection's progress thread, its one owner: found there, at
 * once; found on a consumer thread (polling a CQ, posting, disconnecting), handed over. The
 * move to failing stops the data path in the same rx_lock + tx_lock section, so nothing more
 * goes out or comes in between the finding and the ending; the end is recorded in the same
 * section, and a second end found meanwhile is dropped (the first one wins: the record keeps
 * it, and every later finder acts on it). A connection still attaching
 * has no progress-thread source yet: it ends at once. */
static void end_work_fn(struct sndk_work *w)
{
    struct sndk_conn *io = sndk_container_of(w, struct sndk_conn, end_work);
    struct sndk_qp *qp = io->qp;
    const struct sndk_fail *end = sndk_conn_end_found(io); /* recorded before the queueing */
    conn_end(qp, (enum sndk_end_finder)atomic_load(&io->end.by), end);
    sndk_obj_put(&qp->base); /* end_connection's */
}

static void end_connection(struct sndk_qp *qp, enum sndk_end_finder by, const struct sndk_fail *f)
{
    struct sndk_conn *io = qp->io;
    if (sndk_engine_current_thread(io->engine) == (int)io->thread ||
        sndk_conn_phase(io) == SNDK_PHASE_ATTACHING) {
        conn_end(qp, by, f);
        return;
    }
    sndk_mutex_lock(&qp->rx_lock);
    sndk_mutex_lock(&qp->tx_lock);
    sndk_conn_end_record(io, by, f);
    bool handed = sndk_conn_phase_set(qp, SNDK_PHASE_FAILING, "found on a consumer thread");
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_mutex_unlock(&qp->rx_lock);
    /* Queued only with the one move to failing; the QP outlives the work (its reference is
     * taken first: the work may run at once and drop it). */
    if (handed) {
        sndk_obj_get(&qp->base);
        if (!sndk_engine_queue_on(io->engine, io->thread, &io->end_work))
            sndk_obj_put(&qp->base);
    }
}

void sndk_conn_fail_local(struct sndk_qp *qp, bool notify)
{
    struct sndk_fail f = {.link_status = STATUS_CANCELLED, .reason = SNDK_REASON_LOCAL,
                          .notify = notify, .rst = true};
    conn_end(qp, SNDK_END_LOCAL, &f);
}

static void finish_shutdown(struct sndk_qp *qp, NTSTATUS st)
{
    struct sndk_fail f = {.link_status = st, .graceful = true, .shut_status = st,
                          .rst = st != STATUS_SUCCESS};
    end_connection(qp, SNDK_END_SHUTDOWN, &f);
}

/* ---------------------------------------------------------------- progress */

/* The socket failed under TX. The peer may have said why first: read what is there. */
static void tx_io_failed(struct sndk_qp *qp)
{
    struct sndk_fail f = {.link_status = STATUS_CONNECTION_RESET, .reason = SNDK_REASON_RESET,
                          .notify = true, .rst = true};
    sndk_mutex_lock(&qp->rx_lock);
    if (!qp->io->peer_fin && !sndk_conn_stopped(qp->io)) {
        struct sndk_fail rf;
        if (sndk_rx_pass(qp, &rf) == SNDK_RXR_FAIL)
            f = rf; /* the peer's Terminate, a fault found, or the reset: the pass recorded it,
                       or found an end recorded before (the first stands) */
    }
    sndk_mutex_unlock(&qp->rx_lock);
    end_connection(qp, SNDK_END_TX, &f);
}

/* After a TX attempt outside tx_lock: act on failures, finish a shutdown whose FIN went. */
static void after_tx(struct sndk_qp *qp, enum sndk_tx_result res)
{
    const struct sndk_fail *found = sndk_conn_end_found(qp->io);
    if (res == SNDK_TX_LOCAL_ERR && found) {
        /* An end is recorded (a Read Request's source revoked before its response went out,
         * an injected fault, or the other direction's end): act on it. */
        end_connection(qp, SNDK_END_TX, found);
    } else if (res == SNDK_TX_LOCAL_ERR) {
        /* A request failed its local checks (siw: Terminate, local catastrophic). */
        struct sndk_fail f = {.link_status = STATUS_CONNECTION_ABORTED,
                              .reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT, 0, 0, 0),
                              .notify = true, .send_term = true};
        f.term.layer = SNDK_TERM_LAYER_RDMAP;
        f.term.etype = SNDK_TERM_RDMAP_LOCAL_CATA;
        end_connection(qp, SNDK_END_TX, &f);
    } else if (res == SNDK_TX_IO_ERR) {
        if (sndk_qp_state(qp) != SNDK_QP_ERROR)
            tx_io_failed(qp);
    } else if (res == SNDK_TX_DRAINED && sndk_qp_state(qp) == SNDK_QP_DISCONNECTING) {
        sndk_mutex_lock(&qp->tx_lock);
        bool done = sndk_conn_phase(qp->io) == SNDK_PHASE_FIN_SENT && qp->io->peer_fin;
        sndk_mutex_unlock(&qp->tx_lock);
        if (done)
            finish_shutdown(qp, STATUS_SUCCESS);
    }
}

/* The peer's FIN was read (peer_fin set): tell the connector, or finish our shutdown if our
 * FIN was out already (fin_sent: read in the section that set peer_fin). */
static void on_peer_fin(struct sndk_qp *qp, bool fin_sent)
{
    sndk_mutex_lock(&qp->state_lock);
    enum sndk_qp_state st = sndk_qp_state(qp);
    if (st == SNDK_QP_CONNECTED)
        ev_queue_locked(qp, SNDK_EV_PEER_CLOSED); /* [DISC-3]: nothing is flushed for it */
    sndk_mutex_unlock(&qp->state_lock);
    sndk_debug("qp", "QP %p: peer FIN", (void *)qp);
    if (st == SNDK_QP_DISCONNECTING && fin_sent)
        finish_shutdown(qp, STATUS_SUCCESS);
}

/* The receive side made TX work possible: a Read finished (ORD, fence), a Read Request
 * arrived. Send what can go now, unless the socket is backed up (EPOLLOUT continues then). */
static void kick_tx(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    enum sndk_tx_result res = SNDK_TX_DRAINED;
    /* Set by this thread's pass when it is (every setter is a receive pass, which calls this
     * after): nothing set, no lock — one lock pair less in every empty poll. */
    if (!atomic_load_explicit(&io->tx_kick, memory_order_relaxed))
        return;
    sndk_mutex_lock(&qp->tx_lock);
    if (atomic_load_explicit(&io->tx_kick, memory_order_relaxed)) {
        atomic_store_explicit(&io->tx_kick, false, memory_order_relaxed);
        if (!sndk_conn_stopped(io) && !io->tx_blocked)
            res = sndk_tx_push(qp);
    }
    sndk_mutex_unlock(&qp->tx_lock);
    if (res != SNDK_TX_DRAINED && res != SNDK_TX_BLOCKED)
        after_tx(qp, res);
}

/* The back-off's assumptions (docs/datapath.md, "Tuning constants", with what they were
 * measured on): */
#define SNDK_RX_BACKOFF_MIN_DUE      2048u  /* less due: read at once (the direct-read minimum) */
#define SNDK_RX_BACKOFF_FAST_NS_KIB  128u   /* the fastest arrival assumed: 8 bytes/ns, a
                                               loopback's best */
#define SNDK_RX_BACKOFF_SLOW_NS_KIB  1024u  /* the slowest it learns: 1 byte/ns */
#define SNDK_RX_BACKOFF_MAX_NS       64000u /* never longer: a 64 KiB FPDU at the slowest rate */

/* A polling consumer whose pass ran the socket dry in the middle of a large payload comes
 * back when most of the rest can have arrived, not at its next poll: otherwise it reads the
 * payload in crumbs, a system call and a TCP window update each, and on a loopback or a
 * busy core those crumbs cost the sender as much as the receiver. The wait is what the due
 * bytes take at the rate the connection learnt (rx_backoff_ns_per_kib: from 8 bytes/ns, at
 * best, to 1 byte/ns), at most SNDK_RX_BACKOFF_MAX_NS. A poll that comes back to nothing new
 * (a read that says EAGAIN) halves the rate assumed; one that finds the payload's end, or
 * more than it waited for, raises it by an eighth: on a busy machine the sender is slower than
 * its link, and a fixed rate made four reads in five of a 1 MiB stream say EAGAIN. */
static void set_poll_backoff(struct sndk_conn *io, uint32_t due)
{
    uint64_t after = 0;
    if (due >= SNDK_RX_BACKOFF_MIN_DUE) {
        uint64_t wait = (uint64_t)(due / 1024u) * io->rx_backoff_ns_per_kib;
        after = sndk_clock_ns(CLOCK_MONOTONIC) +
                (wait < SNDK_RX_BACKOFF_MAX_NS ? wait : SNDK_RX_BACKOFF_MAX_NS);
    }
    if (after || atomic_load_explicit(&io->rx_poll_after_ns, memory_order_relaxed))
        atomic_store_explicit(&io->rx_poll_after_ns, after, memory_order_relaxed);
}

/* A consumer that polls its CQ until it is empty — NDK's usual loop, and ndkperf's — polls again
 * at once after each message it took. That poll's read can only say EAGAIN when the pass before
 * emptied the socket between two FPDUs: the peer's next message is a one-way trip away at the
 * least (3.5 µs on a loopback: docs/datapath.md, "Tuning constants"). It was a system call on the path between a message and the
 * consumer's answer to it, 0.43 µs of the 64 B one-way latency (docs/datapath.md, "Empty polls
 * right after a message"). So for SNDK_RX_QUIET_NS after such a pass polls do not read; bytes
 * that arrive meanwhile are read by the first poll after it, with whatever follows them. The
 * progress thread is not affected: it reads when epoll reports. rx_lock held. */
static void set_poll_quiet(struct sndk_conn *io, uint64_t fpdus_before)
{
    uint64_t until = sndk_rx_emptied_between_fpdus(io, fpdus_before)
                         ? sndk_clock_ns(CLOCK_MONOTONIC) + SNDK_RX_QUIET_NS
                         : 0;
    if (until || atomic_load_explicit(&io->rx_quiet_until_ns, memory_order_relaxed))
        atomic_store_explicit(&io->rx_quiet_until_ns, until, memory_order_relaxed);
}

/* A polled pass that followed a back-off: learn from what it found (rx_lock held). */
static void learn_poll_backoff(struct sndk_conn *io, uint64_t fpdus_before, uint32_t pay_before)
{
    uint32_t r = io->rx_backoff_ns_per_kib;
    bool same_fpdu = io->rx.fpdus == fpdus_before;
    if (same_fpdu && io->rx.pay_got == pay_before)
        r = r * 2u < SNDK_RX_BACKOFF_SLOW_NS_KIB ? r * 2u : SNDK_RX_BACKOFF_SLOW_NS_KIB;
    else if (!same_fpdu || sndk_rx_due_after_pass(io) == 0)
        r = r - r / 8u > SNDK_RX_BACKOFF_FAST_NS_KIB ? r - r / 8u : SNDK_RX_BACKOFF_FAST_NS_KIB;
    io->rx_backoff_ns_per_kib = r;
}

/* One receive pass unless someone else is receiving on this QP right now: the progress thread
 * and polling consumers both try-lock, so neither ever waits for the other (a level-triggered
 * EPOLLIN comes back if bytes are left). */
static bool rx_run(struct sndk_qp *qp, uint32_t events, bool polled)
{
    struct sndk_conn *io = qp->io;
    if (!io || !sndk_mutex_trylock(&qp->rx_lock))
        return false;
    if (sndk_conn_stopped(io) || sndk_conn_stalled(io, SNDK_FDIR_RX)) {
        sndk_mutex_unlock(&qp->rx_lock);
        return false;
    }
    if (io->peer_fin) {
        sndk_mutex_unlock(&qp->rx_lock);
        if (events & (EPOLLERR | EPOLLHUP)) {
            /* After the peer's FIN only an error or the end of our own side is left. */
            int err = sndk_stream_error(&io->stream);
            if (err || sndk_qp_state(qp) != SNDK_QP_DISCONNECTING) {
                struct sndk_fail f = {.link_status = STATUS_CONNECTION_RESET,
                                      .reason = SNDK_REASON_RESET, .notify = true, .rst = true};
                end_connection(qp, SNDK_END_RX, &f);
            }
        }
        return false;
    }
    struct sndk_fail f;
    /* A consumer's poll that nobody's sleep depends on (stream.h, poll_only): the progress
     * thread does not watch, and no readiness set drives the connection. */
    io->stream.poll_only = polled && !atomic_load_explicit(&io->rx_watched, memory_order_relaxed) &&
                           !sndk_cq_polls_by_readiness(qp->rcq) &&
                           !sndk_cq_polls_by_readiness(qp->icq);
    bool backed_off =
        polled && atomic_load_explicit(&io->rx_poll_after_ns, memory_order_relaxed) != 0;
    uint64_t fpdus_before = io->rx.fpdus;
    uint32_t pay_before = io->rx.pay_got;
    enum sndk_rx_result res = sndk_rx_pass(qp, &f);
    if (backed_off && res == SNDK_RXR_OK)
        learn_poll_backoff(io, fpdus_before, pay_before);
    bool fin_sent = false;
    if (res == SNDK_RXR_PEER_FIN) {
        /* rx_lock + tx_lock: the receive side stops passes, TX stops watching EPOLLIN */
        sndk_mutex_lock(&qp->tx_lock);
        io->peer_fin = true;
        sndk_conn_update_events(io);
        fin_sent = sndk_conn_phase(io) == SNDK_PHASE_FIN_SENT;
        sndk_mutex_unlock(&qp->tx_lock);
    }
    /* Both hold polls back to spare them reads that cost a system call each; a stream whose
     * empty polls cost none (shm) is read at every poll. */
    if (polled && !(io->stream.poll_only && io->stream.ops->cheap_empty_polls)) {
        set_poll_backoff(io, sndk_rx_due_after_pass(io));
        set_poll_quiet(io, fpdus_before);
    } else if (polled) {
        set_poll_backoff(io, 0); /* clears what an earlier pass set */
        atomic_store_explicit(&io->rx_quiet_until_ns, 0, memory_order_relaxed);
    }
    sndk_mutex_unlock(&qp->rx_lock);
    if (res != SNDK_RXR_FAIL)
        kick_tx(qp);
    if (res == SNDK_RXR_FAIL)
        end_connection(qp, SNDK_END_RX, &f);
    else if (res == SNDK_RXR_PEER_FIN)
        on_peer_fin(qp, fin_sent);
    return true;
}

static void park_rx(struct sndk_qp *qp, const char *why);

static bool qp_poll_rx(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    /* A stream that tells, lock-free, that a pass would find nothing spares the try-lock and
     * the pass (stream.h, idle): a polling consumer's empty loop then costs next to nothing.
     * Not while a Send waits for a receive: posting one resumes it through a pass. */
    if (io && io->stream.ops->idle && sndk_rnr_phase(io) == SNDK_RNR_RECEIVING &&
        io->stream.ops->idle(&io->stream))
        return false;
    if (io) {
        uint64_t after = atomic_load_explicit(&io->rx_poll_after_ns, memory_order_relaxed);
        uint64_t quiet = atomic_load_explicit(&io->rx_quiet_until_ns, memory_order_relaxed);
        if ((after || quiet) && sndk_clock_ns(CLOCK_MONOTONIC) < (after > quiet ? after : quiet))
            return false;
    }
    bool ran = rx_run(qp, 0, true);
    /* The consumer receives itself: the progress thread need not watch (Parking, below). Its
     * own EPOLLIN parks too, but a consumer that polls fast reads the peer's bytes (on the
     * same-host stream, its wake byte) before the progress thread's epoll reports them, and
     * then nothing parked: every message cost the peer a wake byte and a system call. Only a
     * consumer that polls steadily: one draining its CQ before it arms would be unparked at
     * once (cq.h). */
    if (ran && atomic_load_explicit(&io->rx_watched, memory_order_relaxed) &&
        sndk_cq_polled_steadily(qp->rcq))
        park_rx(qp, "the consumer's poll received");
    return ran;
}

/* A polling consumer also sends what waits for socket space: with the consumers busy-polling
 * on every core, the progress thread that EPOLLOUT would wake may not run for a while, and the
 * stream stalls behind it. Try-lock, like the receive pass: a concurrent sender is already at
 * it. */
static bool qp_poll_tx(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    /* Nothing waits for room or for settling: the usual case, seen without the lock. A sender
     * that blocks right after this look is the next poll's (or its EPOLLOUT's). */
    if (!io || (!atomic_load_explicit(&io->tx_blocked, memory_order_relaxed) &&
                atomic_load_explicit(&io->uns_n, memory_order_relaxed) == 0))
        return false;
    if (!sndk_mutex_trylock(&qp->tx_lock))
        return false;
    bool blocked = (io->tx_blocked || io->uns_n > 0) && !sndk_conn_stopped(io);
    enum sndk_tx_result res = blocked ? sndk_tx_push(qp) : SNDK_TX_DRAINED;
    sndk_mutex_unlock(&qp->tx_lock);
    if (!blocked)
        return false;
    after_tx(qp, res);
    return res != SNDK_TX_BLOCKED;
}

/* Parking (docs/datapath.md): while a consumer polls the receive CQ it receives itself, so the
 * progress thread stops watching EPOLLIN. Otherwise every arriving message would wake it, and
 * the wake-up costs the sender and competes with the consumer for the CPU. Arming the CQ
 * unparks; the CQ's one park check unparks too once the consumer stopped polling without
 * arming (cq.c park_timer_fn: no timer per connection). */
static void qp_unpark_rx(struct sndk_qp *qp, const char *why);

static void park_rx(struct sndk_qp *qp, const char *why)
{
    struct sndk_conn *io = qp->io;
    sndk_mutex_lock(&qp->tx_lock);
    bool now = !sndk_conn_stopped(io) && io->rx_park == SNDK_RX_WATCHED;
    if (now) {
        sndk_rx_park_set(qp, SNDK_RX_PARKED, why);
        sndk_cq_parked(qp->rcq, +1);
        sndk_conn_update_events(io);
    }
    sndk_mutex_unlock(&qp->tx_lock);
    if (!now)
        return;
    /* counted before the look at the stamp: an arm clears the stamp before it reads the
     * count (cq.c unpark_conns), so one of the two sees the other */
    atomic_thread_fence(memory_order_seq_cst);
    /* The consumer may have armed between our look at the CQ and the park: its unpark ran
     * before the park and found nothing to do. It cleared the stamp before taking tx_lock, so
     * this second look sees that. */
    if (!sndk_cq_polling(qp->rcq))
        qp_unpark_rx(qp, "the CQ was armed during the park");
}

static void qp_unpark_rx(struct sndk_qp *qp, const char *why)
{
    struct sndk_conn *io = qp->io;
    if (!io)
        return;
    sndk_mutex_lock(&qp->tx_lock);
    if (io->rx_park == SNDK_RX_PARKED) {
        sndk_rx_park_set(qp, SNDK_RX_WATCHED, why);
        sndk_cq_parked(qp->rcq, -1);
        sndk_conn_update_events(io); /* level-triggered: bytes already there report at once */
    }
    sndk_mutex_unlock(&qp->tx_lock);
}

/* ------------------------------------------------- what the QP's CQs drive (cq.h) */

/* An empty poll of a CQ this QP feeds found its socket ready: send what waits for space,
 * receive what arrived (docs/datapath.md, "polling that scales"). */
static bool cq_conn_progress(struct sndk_cq_conn *c, uint32_t events)
{
    struct sndk_qp *qp = c->owner;
    bool moved = false;
    if (events & EPOLLOUT)
        moved |= qp_poll_tx(qp);
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        moved |= qp_poll_rx(qp);
    return moved;
}

static void cq_conn_stop_polling(struct sndk_cq_conn *c)
{
    qp_unpark_rx(c->owner, "the consumer armed the CQ, or stopped polling it");
}

static void cq_conn_dead(struct sndk_cq_conn *c)
{
    qp_cq_overrun(c->owner);
}

static const struct sndk_cq_conn_ops cq_conn_ops = {
    .progress = cq_conn_progress,
    .stop_polling = cq_conn_stop_polling,
    .cq_dead = cq_conn_dead,
};

static void src_fn(struct sndk_source *s, uint32_t events)
{
    struct sndk_conn *io = sndk_container_of(s, struct sndk_conn, src);
    struct sndk_qp *qp = io->qp;
    if (events & (EPOLLOUT | io->stream.ops->room_events)) {
        sndk_mutex_lock(&qp->tx_lock);
        enum sndk_tx_result res = sndk_conn_stopped(io) ? SNDK_TX_DRAINED : sndk_tx_push(qp);
        sndk_mutex_unlock(&qp->tx_lock);
        after_tx(qp, res);
    }
    if ((events & (EPOLLERR | EPOLLHUP)) && sndk_rnr_phase(io) == SNDK_RNR_WAITING) {
        /* not watched but always reported: the peer is gone, no receive can help the held
         * Send any more (and a level-triggered hang-up would come back at once) */
        sndk_mutex_lock(&qp->rx_lock);
        if (!sndk_conn_stopped(io))
            sndk_rnr_expire(qp, "the socket hung up");
        sndk_mutex_unlock(&qp->rx_lock);
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        rx_run(qp, events, false);
        if ((events & EPOLLIN) && sndk_cq_polling(qp->rcq))
            park_rx(qp, "the progress thread found the receive CQ polled");
    }
}

/* Injected stalls (docs/faults.md) end here. */
static void tx_stall_timer_fn(struct sndk_timer *t)
{
    struct sndk_conn *io = sndk_container_of(t, struct sndk_conn, tx_stall_timer);
    struct sndk_qp *qp = io->qp;
    enum sndk_tx_result res = SNDK_TX_DRAINED;
    sndk_mutex_lock(&qp->tx_lock);
    if (!sndk_conn_stopped(io)) {
        res = sndk_tx_push(qp); /* tx_blocked is still set: the push clears it when drained */
    }
    sndk_mutex_unlock(&qp->tx_lock);
    after_tx(qp, res);
    sndk_obj_put(&qp->base);
}

/* The stream held memory it could give back (stream.h, trim): ask it, and again a period
 * later while it is not quiet (armed as after a write, with a reference of its own). */
static void trim_timer_fn(struct sndk_timer *t)
{
    struct sndk_conn *io = sndk_container_of(t, struct sndk_conn, trim_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->tx_lock);
    if (!sndk_conn_stopped(io) && io->stream.trim_wanted && sndk_stream_trim(&io->stream))
        sndk_conn_trim_later(qp);
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_obj_put(&qp->base); /* this pending period's */
}

static void rx_stall_timer_fn(struct sndk_timer *t)
{
    struct sndk_conn *io = sndk_container_of(t, struct sndk_conn, rx_stall_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->rx_lock);
    sndk_mutex_lock(&qp->tx_lock);
    bool live = !sndk_conn_stopped(io);
    if (live)
        sndk_conn_update_events(io); /* no longer pending: EPOLLIN watched again */
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_mutex_unlock(&qp->rx_lock);
    /* Bytes may wait in the staging buffer, which no EPOLLIN reports: receive now. */
    if (live)
        rx_run(qp, 0, false);
    sndk_obj_put(&qp->base);
}

/* Receiver not ready (docs/datapath.md): the bound of a held Send. */
static void rnr_timer_fn(struct sndk_timer *t)
{
    struct sndk_conn *io = sndk_container_of(t, struct sndk_conn, rnr_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->rx_lock); /* the phase is stable under it: no tx_lock needed */
    bool live = !sndk_conn_stopped(io);
    if (live)
        sndk_rnr_expire(qp, "the receiver-not-ready bound expired");
    sndk_mutex_unlock(&qp->rx_lock);
    /* the pass ends it with the Send's Terminate (or goes on: the receive came) */
    if (live)
        rx_run(qp, 0, false);
    sndk_obj_put(&qp->base);
}

/* A receive was posted while the connection waited: resume on the progress thread. rx_lock is
 * taken, not tried: a try-lock could lose the wake-up to a pass that looked just before. */
static void rnr_work_fn(struct sndk_work *w)
{
    struct sndk_conn *io = sndk_container_of(w, struct sndk_conn, rnr_work);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->rx_lock);
    bool resumed = !sndk_conn_stopped(io) && sndk_rnr_resume(qp);
    sndk_mutex_unlock(&qp->rx_lock);
    if (resumed)
        rx_run(qp, 0, false); /* the rest of the staging buffer: no EPOLLIN reports it */
    sndk_obj_put(&qp->base);
}

/* The SRQ's wake-up for a connection waiting on it (device/srq.h): under the SRQ's lock. */
static void rnr_waiter_kick(struct sndk_rnr_waiter *w)
{
    sndk_rnr_kick(sndk_container_of(w, struct sndk_conn, rnr_waiter)->qp);
}

static void shut_timer_fn(struct sndk_timer *t)
{
    struct sndk_conn *io = sndk_container_of(t, struct sndk_conn, shut_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->state_lock);
    bool waiting = sndk_qp_state(qp) == SNDK_QP_DISCONNECTING;
    sndk_mutex_unlock(&qp->state_lock);
    if (waiting)
        finish_shutdown(qp, STATUS_IO_TIMEOUT);
    sndk_obj_put(&qp->base); /* its pending period's */
}

/* ---------------------------------------------------------------- link.h */

static struct sndk_conn *io_create(struct sndk_qp *qp)
{
    struct sndk_conn *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->place.cur = calloc(1, sizeof *io->place.cur + (size_t)qp->recv_max_sge * sizeof(NDK_SGE));
    io->place.cur_cap = (int)qp->recv_max_sge + 16; /* fast-registered pieces may split an SGE */
    io->place.cur_iov = calloc((size_t)io->place.cur_cap, sizeof *io->place.cur_iov);
    if (!io->place.cur || !io->place.cur_iov) {
        free(io->place.cur);
        free(io->place.cur_iov);
        free(io);
        return NULL;
    }
    io->qp = qp;
    atomic_init(&io->phase, SNDK_PHASE_ATTACHING);
    io->rx_backoff_ns_per_kib = SNDK_RX_BACKOFF_FAST_NS_KIB;
    return io;
}

int sndk_qp_attach(struct sndk_qp *qp, const struct sndk_link_params *p,
                   const struct sndk_link_events *ev, void *ctx)
{
    sndk_mutex_lock(&qp->state_lock);
    if (sndk_qp_state(qp) != SNDK_QP_IDLE || qp->io) {
        sndk_mutex_unlock(&qp->state_lock);
        return -EBUSY;
    }
    if (sndk_obj_closing(&qp->base)) {
        /* Closed during the handshake: the close cancels the connection ([CLOSE-4]) rather
         * than a closing QP going live (docs/misuse.md). */
        sndk_mutex_unlock(&qp->state_lock);
        return -ECANCELED;
    }
    struct sndk_conn *io = io_create(qp);
    if (!io) {
        sndk_mutex_unlock(&qp->state_lock);
        return -ENOMEM;
    }
    io->engine = qp->base.adapter->engine;
    if (p->stream_ops)
        io->stream =
            (struct sndk_stream){.ops = p->stream_ops, .fd = p->fd, .priv = p->stream_priv};
    else
        sndk_stream_tcp_init(&io->stream, p->fd);
    io->thread = p->thread < sndk_engine_threads(io->engine) ? p->thread : 0;
    if (ev)
        io->ev = *ev;
    io->ev_ctx = ctx;
    sndk_work_init(&io->src_done, src_done_fn);
    sndk_work_init(&io->ev_work, ev_work_fn);
    sndk_work_init(&io->detach_work, detach_work_fn);
    sndk_work_init(&io->end_work, end_work_fn);
    sndk_timer_init(&io->shut_timer, shut_timer_fn);
    sndk_timer_init(&io->tx_stall_timer, tx_stall_timer_fn);
    sndk_timer_init(&io->rx_stall_timer, rx_stall_timer_fn);
    sndk_timer_init(&io->rnr_timer, rnr_timer_fn);
    sndk_timer_init_upkeep(&io->trim_timer, trim_timer_fn);
    sndk_work_init(&io->rnr_work, rnr_work_fn);
    io->rnr_waiter.kick = rnr_waiter_kick;
    io->crec = p->rec;
    sndk_conn_rec_get(io->crec);
    sndk_tx_init(io, p->crc, sndk_stream_fpdu_max(&io->stream), p->ird, p->ord);
    if (io->stream.ops->settled) {
        /* a stream that can borrow memory: room to wait for each request and response. Without
         * it (no memory) nothing is lent, and everything is copied as before. */
        io->uns_cap = qp->initiator_depth + SNDK_RD_MAX;
        io->unsettled = calloc(io->uns_cap, sizeof *io->unsettled);
    }
    if (p->await_initiator)
        sndk_tx_gate_await(io);
    sndk_rx_io_init(io, p->crc);
    if (p->rx_read_msn > 1)
        io->rx.msn_expect[SNDK_QN_READ_REQ] = p->rx_read_msn;
    sndk_dp_hooks_attach(io, p); /* before the connection's first byte */
    qp->io = io; /* published to the other threads by the locks they take before using it */
    /* Connected before anything a consumer can observe: once the QP is on its CQs, a polling
     * consumer receives on it and may answer at once, and that NdkSend must find the QP
     * connected. In the same section as the closing check: qp_close_begin reads the state
     * under state_lock, so either it sees CONNECTED (and ends the connection) or the check
     * above saw the close. */
    sndk_qp_set_state(qp, SNDK_QP_CONNECTED, "attached");
    sndk_mutex_unlock(&qp->state_lock);

    /* Linked before the socket is watched; src_done unlinks them, and it runs only after the
     * source is removed, which needs it added first. */
    sndk_cq_conn_add(qp->rcq, &io->rconn, &cq_conn_ops, qp, p->fd, EPOLLIN);
    if (qp->icq != qp->rcq)
        sndk_cq_conn_add(qp->icq, &io->iconn, &cq_conn_ops, qp, p->fd, EPOLLIN);
    sndk_obj_get(&qp->base); /* the connection's reference, dropped by src_done */

    int rc = sndk_source_add(io->engine, &io->src, p->fd, EPOLLIN, src_fn, (int)io->thread);
    if (rc < 0) {
        /* Nothing ever watched the socket: end the connection without an event (the
         * connector reports the failed attach), then undo what src_done would. The socket
         * stays the caller's. */
        sndk_err("qp", "QP %p: attach: epoll: %d", (void *)qp, rc);
        sndk_mutex_lock(&qp->state_lock);
        io->detached = true;
        sndk_mutex_unlock(&qp->state_lock);
        sndk_conn_fail_local(qp, false);
        sndk_cq_conn_remove(qp->rcq, &io->rconn);
        if (qp->icq != qp->rcq)
            sndk_cq_conn_remove(qp->icq, &io->iconn);
        sndk_obj_put(&qp->base);
        return rc;
    }
    /* A failure before this point (a close, a CQ poll, a post on another thread) did not
     * remove the source (see conn_end): do it now. One after it sees the phase live. */
    sndk_mutex_lock(&qp->state_lock);
    bool failed = sndk_qp_state(qp) == SNDK_QP_ERROR;
    if (!failed)
        sndk_conn_phase_set(qp, SNDK_PHASE_LIVE, "socket watched");
    sndk_mutex_unlock(&qp->state_lock);
    if (failed) {
        sndk_source_remove(&io->src, &io->src_done);
        return 0;
    }
    /* A post in the window may have found the socket full and asked for EPOLLOUT before the
     * source existed: watch what the state says now. */
    sndk_mutex_lock(&qp->tx_lock);
    sndk_conn_update_events(io);
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_debug("qp", "QP %p: attached %s stream fd %d on thread %u, CRC %s, FPDU <= %u",
               (void *)qp, io->stream.ops->name, p->fd, io->thread, p->crc ? "on" : "off", io->txcfg.max_fpdu);
    return 0;
}

void sndk_qp_shutdown(struct sndk_qp *qp, unsigned timeout_ms)
{
    struct sndk_conn *io = qp->io;
    if (!io)
        return;
    sndk_mutex_lock(&qp->state_lock);
    if (sndk_qp_state(qp) == SNDK_QP_ERROR) {
        /* Already over (an abort reported it): still answer the one who waits. */
        io->ev_shut_status = io->ev_abort_status ? io->ev_abort_status : STATUS_CONNECTION_RESET;
        ev_queue_locked(qp, SNDK_EV_SHUTDOWN_DONE);
        sndk_mutex_unlock(&qp->state_lock);
        return;
    }
    if (!sndk_qp_set_state(qp, SNDK_QP_DISCONNECTING, "shutdown")) {
        sndk_mutex_unlock(&qp->state_lock);
        return;
    }
    if (sndk_timer_arm_on(io->engine, io->thread, &io->shut_timer, (uint64_t)timeout_ms * 1000u))
        sndk_obj_get(&qp->base); /* the pending timer's (engine.h, "References") */
    sndk_mutex_unlock(&qp->state_lock);

    sndk_mutex_lock(&qp->tx_lock);
    bool shutting = sndk_conn_phase_set(qp, SNDK_PHASE_SHUTTING_DOWN, "NdkDisconnect");
    enum sndk_tx_result res = !shutting        ? SNDK_TX_IO_ERR /* ended meanwhile */
                              : io->tx_blocked ? SNDK_TX_BLOCKED
                                               : sndk_tx_push(qp);
    sndk_mutex_unlock(&qp->tx_lock);
    after_tx(qp, res);
}

uint32_t sndk_qp_initiator_outstanding(struct sndk_qp *qp, void **oldest_ctx)
{
    sndk_mutex_lock(&qp->tx_lock);
    uint32_t head = atomic_load_explicit(&qp->sq_head, memory_order_acquire);
    uint32_t n = qp->sq_tail - head;
    *oldest_ctx = n ? sndk_sq_slot(qp, head)->context : NULL;
    sndk_mutex_unlock(&qp->tx_lock);
    return n;
}

void sndk_qp_connect_failed(struct sndk_qp *qp)
{
    sndk_mutex_lock(&qp->state_lock);
    bool failed = !qp->io && sndk_qp_state(qp) == SNDK_QP_IDLE &&
                  sndk_qp_set_state(qp, SNDK_QP_ERROR, "connection attempt failed");
    sndk_mutex_unlock(&qp->state_lock);
    /* A receive posted meanwhile sees ERROR after queueing and flushes itself. */
    if (failed)
        flush_all_receives(qp, STATUS_CANCELLED, 0);
}

void sndk_qp_abort(struct sndk_qp *qp)
{
    sndk_conn_fail_local(qp, false);
}

void sndk_qp_detach(struct sndk_qp *qp, struct sndk_work *done)
{
    struct sndk_conn *io = qp->io;
    if (!io) {
        if (done)
            sndk_engine_queue(qp->base.adapter->engine, done);
        return;
    }
    sndk_mutex_lock(&qp->state_lock);
    io->detached = true;
    io->detach_done = done;
    sndk_mutex_unlock(&qp->state_lock);
    sndk_conn_fail_local(qp, false);
    /* Behind any event work already queued on the connection's thread. */
    sndk_engine_queue_on(io->engine, io->thread, &io->detach_work);
}

/* ---------------------------------------------------------------- what core/qp.c calls */

void sndk_conn_push_deferred(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (sndk_qp_state(qp) != SNDK_QP_CONNECTED || !io)
        return;
    sndk_mutex_lock(&qp->tx_lock);
    enum sndk_tx_result res = SNDK_TX_DRAINED;
    if (!sndk_conn_stopped(io) && !io->tx_blocked && qp->sq_sent != qp->sq_tail)
        res = sndk_tx_push(qp);
    sndk_mutex_unlock(&qp->tx_lock);
    after_tx(qp, res);
}

bool sndk_conn_publish(struct sndk_qp *qp, bool defer)
{
    sndk_mutex_lock(&qp->tx_lock);
    struct sndk_conn *io = qp->io;
    if (sndk_conn_ended(io)) {
        /* The connection ended since the state check; nothing was published. */
        sndk_mutex_unlock(&qp->tx_lock);
        return false;
    }
    qp->sq_tail++;
    /* Published: the push below may complete it, and its completion callback may post on
     * this queue before we return (verify.h, struct sndk_verify_call). */
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_call_commit(&qp->verify_sq_callers);
    sndk_seam_sq_posted(io);
    enum sndk_tx_result res = SNDK_TX_DRAINED;
    /* DEFER: the chain waits for the request that ends it. A blocked socket: the progress
     * thread sends everything queued when it drains. READ_FENCE and ORD hold the queue in
     * fill_batch (tx.c) until the earlier Reads have their data. */
    if (!defer && !io->tx_blocked)
        res = sndk_tx_push(qp);
    sndk_mutex_unlock(&qp->tx_lock);
    if (res != SNDK_TX_DRAINED && res != SNDK_TX_BLOCKED)
        after_tx(qp, res);
    return true;
}

void sndk_conn_flush_receives(struct sndk_qp *qp)
{
    flush_all_receives(qp, STATUS_CANCELLED, 0);
}

void sndk_conn_free(struct sndk_conn *io)
{
    if (!io)
        return;
    sndk_conn_rec_put(io->crec); /* first: ndkstat may look at this QP until then */
    free(io->place.cur);
    free(io->place.cur_iov);
    free(io->cut.resp_iov);
    free(io->unsettled);
    sndk_dp_hooks_detach(io);
    free(io);
}
