/* Queue pair (docs/qp.md, docs/ndk-rules.md#post): creation with its limits, posting, the
 * state machine, the link to a connection (core/link.h), flush and close. The bytes are made
 * and taken in src/datapath/tx.c and rx.c; docs/datapath.md explains the whole path.
 *
 * Until a connector attaches a connection, every initiator request is refused inline with
 * STATUS_CONNECTION_INVALID ([POST-5]); receives queue. */
#include "core/qp.h"
#include "core/srq.h"
#include "verify/verify.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/access.h"
#include "core/link.h"
#include "datapath/dp_seams.h"
#include "util/log.h"

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

static struct sndk_qp *qp_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeQp);
    return o ? sndk_container_of(o, struct sndk_qp, base) : NULL;
}

static enum sndk_qp_state qp_state(const struct sndk_qp *qp)
{
    return (enum sndk_qp_state)atomic_load_explicit(&qp->state, memory_order_acquire);
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
static bool qp_set_state(struct sndk_qp *qp, enum sndk_qp_state next, const char *why)
{
    sndk_assert_held(&qp->state_lock);
    enum sndk_qp_state cur = qp_state(qp);
    if (!transitions[cur](next))
        return false;
    sndk_debug("qp", "QP %p: %s => %s (%s)", (void *)qp, sndk_qp_state_name(cur),
               sndk_qp_state_name(next), why);
    SNDK_TRACE("qp.state", "QP", qp, "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\"",
               sndk_qp_state_name(cur), sndk_qp_state_name(next), why);
    atomic_store_explicit(&qp->state, next, memory_order_release);
    return true;
}

/* ---------------------------------------------------------------- connection phase */

static const char *const conn_phase_names[SNDK_PHASE_COUNT] = {
    [SNDK_PHASE_ATTACHING] = "attaching",
    [SNDK_PHASE_LIVE] = "live",
    [SNDK_PHASE_SHUTTING_DOWN] = "shutting-down",
    [SNDK_PHASE_FIN_SENT] = "fin-sent",
    [SNDK_PHASE_FAILING] = "failing",
    [SNDK_PHASE_ENDED] = "ended",
};

const char *sndk_conn_phase_name(enum sndk_conn_phase p)
{
    return (unsigned)p < SNDK_PHASE_COUNT ? conn_phase_names[p] : "?";
}

/* One function per source phase (qp_io.h draws the machine). */
static bool phase_from_attaching(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_LIVE || next == SNDK_PHASE_ENDED;
}
static bool phase_from_live(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_SHUTTING_DOWN || next == SNDK_PHASE_FAILING ||
           next == SNDK_PHASE_ENDED;
}
static bool phase_from_shutting_down(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_FIN_SENT || next == SNDK_PHASE_FAILING || next == SNDK_PHASE_ENDED;
}
static bool phase_from_fin_sent(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_FAILING || next == SNDK_PHASE_ENDED;
}
static bool phase_from_failing(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_ENDED;
}
static bool phase_from_ended(enum sndk_conn_phase next)
{
    (void)next;
    return false; /* final */
}

static bool (*const phase_transitions[SNDK_PHASE_COUNT])(enum sndk_conn_phase) = {
    [SNDK_PHASE_ATTACHING] = phase_from_attaching,
    [SNDK_PHASE_LIVE] = phase_from_live,
    [SNDK_PHASE_SHUTTING_DOWN] = phase_from_shutting_down,
    [SNDK_PHASE_FIN_SENT] = phase_from_fin_sent,
    [SNDK_PHASE_FAILING] = phase_from_failing,
    [SNDK_PHASE_ENDED] = phase_from_ended,
};

bool sndk_conn_phase_set(struct sndk_qp *qp, enum sndk_conn_phase next, const char *why)
{
    struct sndk_qp_io *io = qp->io;
    /* the locks the readers of each phase hold (qp_io.h) */
    if (next == SNDK_PHASE_LIVE)
        sndk_assert_held(&qp->state_lock);
    else if (next == SNDK_PHASE_ENDED || next == SNDK_PHASE_FAILING)
        assert(sndk_mutex_held(&qp->rx_lock) && sndk_mutex_held(&qp->tx_lock));
    else
        sndk_assert_held(&qp->tx_lock);
    int cur = atomic_load_explicit(&io->phase, memory_order_relaxed);
    do {
        if (!phase_transitions[cur](next)) {
            if (cur < SNDK_PHASE_FAILING) {
                sndk_err("qp", "QP %p: connection: refused %s => %s (%s)", (void *)qp,
                         sndk_conn_phase_name((enum sndk_conn_phase)cur),
                         sndk_conn_phase_name(next), why);
                assert(!"illegal connection phase transition");
            }
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&io->phase, &cur, (int)next,
                                                    memory_order_acq_rel, memory_order_relaxed));
    sndk_debug("qp", "QP %p: connection %s => %s (%s)", (void *)qp,
               sndk_conn_phase_name((enum sndk_conn_phase)cur), sndk_conn_phase_name(next), why);
    SNDK_TRACE("qp.conn_phase", "QP", qp, "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\"",
               sndk_conn_phase_name((enum sndk_conn_phase)cur), sndk_conn_phase_name(next), why);
    return true;
}

/* ---------------------------------------------------------------- completions */

static struct sndk_sqe *sq_slot(struct sndk_qp *qp, uint32_t idx)
{
    return &qp->sq[idx % qp->initiator_depth];
}

void sndk_qp_retire_head(struct sndk_qp *qp, NTSTATUS st, ULONG code)
{
    sndk_assert_held(&qp->tx_lock);
    uint32_t idx = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
    struct sndk_sqe *e = sq_slot(qp, idx);
    static const NDK_OPERATION_TYPE types[] = {
        [SNDK_SQ_SEND] = NdkOperationTypeSend,
        [SNDK_SQ_WRITE] = NdkOperationTypeWrite,
        [SNDK_SQ_READ] = NdkOperationTypeRead,
        [SNDK_SQ_BIND] = NdkOperationTypeBind,
        [SNDK_SQ_FAST_REGISTER] = NdkOperationTypeFastRegister,
        [SNDK_SQ_INVALIDATE] = NdkOperationTypeInvalidate,
    };
    if (e->target) { /* an Invalidate that never ran */
        sndk_obj_put(e->target);
        e->target = NULL;
    }
    bool report = st != STATUS_SUCCESS || !(e->flags & NDK_OP_FLAG_SILENT_SUCCESS);
    bool data = e->kind == SNDK_SQ_SEND || e->kind == SNDK_SQ_WRITE || e->kind == SNDK_SQ_READ;
    NDK_RESULT_EX r = {
        .Status = st,
        .BytesTransferred = st == STATUS_SUCCESS && data ? (ULONG)e->bytes : 0,
        .QPContext = qp->context,
        .RequestContext = e->context,
        .Type = types[e->kind],
        .ProviderErrorCode = st == STATUS_SUCCESS ? 0 : code,
    };
    sndk_seam_sq_retired(qp, st);
    /* The slot is free before its completion can be seen: a consumer that polls the completion
     * on another thread and posts the next request at once (a queue of depth 1, ndkperf's
     * read_lat) must find room. Release: the poster reads sq_head without the lock. Nothing
     * reads the slot after this; the result was copied out above. */
    atomic_store_explicit(&qp->sq_head, idx + 1, memory_order_release);
    if (report)
        sndk_cq_post(qp->icq, &r, false);
}

void sndk_qp_retire_done(struct sndk_qp *qp)
{
    sndk_assert_held(&qp->tx_lock);
    for (;;) {
        uint32_t idx = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
        if (idx == qp->sq_sent)
            return;
        struct sndk_sqe *e = sq_slot(qp, idx);
        if (!e->done)
            return;
        sndk_qp_retire_head(qp, e->status, e->code);
    }
}

/* Does the peer's Terminate (*f) name request e? */
static bool named_by(const struct sndk_fail *f, const struct sndk_sqe *e)
{
    if (!f->named || e->kind != f->named_kind)
        return false;
    switch (e->kind) {
    case SNDK_SQ_READ:
        if (f->named_stag != 0) /* the included Read Request's sink STag (rx.c) */
            return e->sink_stag == f->named_stag;
        return e->msn != 0 && e->msn == f->named_msn;
    case SNDK_SQ_SEND:
        return e->msn != 0 && e->msn == f->named_msn;
    case SNDK_SQ_WRITE:
        return e->rstag == f->named_stag && f->named_to >= e->rto &&
               f->named_to - e->rto <= e->bytes;
    default:
        return false;
    }
}

/* Complete every queued receive of the own queue with STATUS_CANCELLED, in posting order. The
 * CQ post happens under rq_lock so that flushed and received completions keep the order. */
static void flush_queued_receives(struct sndk_qp *qp)
{
    if (qp->srq)
        return; /* SRQ receives belong to no QP until one takes them */
    sndk_mutex_lock(&qp->rq_lock);
    uint32_t n = qp->rq.count;
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
    qp->rq.head = (qp->rq.head + n) % (qp->rq.depth ? qp->rq.depth : 1);
    qp->rq.count = 0;
    sndk_mutex_unlock(&qp->rq_lock);
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
    struct sndk_qp_io *io = qp->io;
    if (io->detached)
        return;
    io->ev_pending |= what;
    if (!io->ev_queued) {
        io->ev_queued = true;
        sndk_obj_get(&qp->base); /* the QP outlives the queued work */
        sndk_engine_queue_on(io->engine, io->thread, &io->ev_work);
    }
}

static void ev_work_fn(struct sndk_work *w)
{
    struct sndk_qp_io *io = sndk_container_of(w, struct sndk_qp_io, ev_work);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->state_lock);
    unsigned pending = io->ev_pending;
    io->ev_pending = 0;
    io->ev_queued = false;
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
    struct sndk_qp_io *io = sndk_container_of(w, struct sndk_qp_io, detach_work);
    if (io->detach_done)
        sndk_engine_queue(io->engine, io->detach_done);
}

/* The source is out of epoll and no call of its fn is in flight: the socket is ours to close. */
static void src_done_fn(struct sndk_work *w)
{
    struct sndk_qp_io *io = sndk_container_of(w, struct sndk_qp_io, src_done);
    struct sndk_qp *qp = io->qp;
    if (io->close_rst) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(io->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    sndk_mutex_lock(&qp->tx_lock);
    if (io->rx_parked) { /* ended parked: nothing will unpark it */
        io->rx_parked = false;
        sndk_cq_parked(qp->rcq, -1);
    }
    sndk_mutex_unlock(&qp->tx_lock);
    /* out of the CQs' readiness sets before the descriptor can be reused */
    sndk_cq_conn_remove(qp->rcq, &io->rconn);
    if (qp->icq != qp->rcq)
        sndk_cq_conn_remove(qp->icq, &io->iconn);
    close(io->fd);
    sndk_debug("qp", "QP %p: socket closed%s", (void *)qp, io->close_rst ? " (RST)" : "");
    sndk_obj_put(&qp->base); /* the connection's reference */
}

/* ---------------------------------------------------------------- failure */

void sndk_qp_fail(struct sndk_qp *qp, const struct sndk_fail *f)
{
    struct sndk_qp_io *io = qp->io;
    sndk_mutex_lock(&qp->state_lock);
    enum sndk_qp_state was = qp_state(qp);
    if (!io || !qp_set_state(qp, SNDK_QP_ERROR, f->graceful ? "shutdown finished" : "failed")) {
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
    if (f->send_term)
        sndk_tx_terminate(qp, &f->term);
    if (f->send_term || f->graceful) {
        shutdown(io->fd, SHUT_WR); /* FIN right behind the Terminate / the last FPDU */
        sndk_seam_tx_fin(qp);
    }
    /* from here only src_done touches the socket */
    sndk_conn_phase_set(qp, SNDK_PHASE_ENDED, f->graceful ? "shutdown finished" : "failed");
    io->close_rst = f->rst;
    sndk_tx_discard(io);
    unsigned stall_refs = 0;
    if (io->tx_stall_ref && sndk_timer_cancel(&io->tx_stall_timer)) {
        io->tx_stall_ref = false;
        stall_refs++;
    }
    if (io->rx_stall_ref && sndk_timer_cancel(&io->rx_stall_timer)) {
        io->rx_stall_ref = false;
        stall_refs++;
    }
    if (io->rnr_timer_ref && sndk_timer_cancel(&io->rnr_timer)) {
        io->rnr_timer_ref = false;
        stall_refs++; /* the receiver-not-ready bound: a wait ends with the connection */
    }
    /* Every outstanding initiator request completes, in order: its own local error, the
     * peer's refusal when a Terminate named it, else STATUS_CANCELLED. */
    while (atomic_load_explicit(&qp->sq_head, memory_order_relaxed) != qp->sq_tail) {
        struct sndk_sqe *e = sq_slot(qp, atomic_load_explicit(&qp->sq_head, memory_order_relaxed));
        NTSTATUS st = STATUS_CANCELLED;
        ULONG code = 0;
        if (e->status == STATUS_SUCCESS && named_by(f, e)) {
            /* The peer refused it (a Write may have left in full and wait behind a Read). */
            st = f->named_status;
            code = f->reason;
        } else if (e->status != STATUS_SUCCESS || e->done) {
            st = e->status; /* its own local error, or finished behind an unfinished one */
            code = e->code;
        }
        sndk_qp_retire_head(qp, st, code);
    }
    qp->sq_sent = qp->sq_tail;
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_rx_cancel_current(qp, f->rx_status ? f->rx_status : STATUS_CANCELLED, f->rx_code);
    flush_queued_receives(qp);
    if (qp->srq)
        sndk_srq_rnr_done(qp->srq, io); /* off the SRQ's waiters, if it was waiting */
    sndk_mutex_unlock(&qp->rx_lock);

    bool drop_timer_ref = false;
    sndk_mutex_lock(&qp->state_lock);
    if (io->shut_timer_ref && sndk_timer_cancel(&io->shut_timer)) {
        io->shut_timer_ref = false;
        drop_timer_ref = true;
    }
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
    if (!qp->io)
        return;
    struct sndk_fail f = {.link_status = STATUS_CONNECTION_ABORTED,
                          .reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT,
                                                     SNDK_TERM_LAYER_RDMAP,
                                                     SNDK_TERM_RDMAP_LOCAL_CATA, 0),
                          .notify = true, .send_term = true};
    f.term.layer = SNDK_TERM_LAYER_RDMAP;
    f.term.etype = SNDK_TERM_RDMAP_LOCAL_CATA;
    sndk_qp_fail(qp, &f);
}

/* The end of a connection found by its data path (a receive pass, a TX result, the end of a
 * shutdown) is acted on by the connection's progress thread, its one owner: found there, at
 * once; found on a consumer thread (polling a CQ, posting, disconnecting), handed over. The
 * move to failing stops the data path in the same rx_lock + tx_lock section, so nothing more
 * goes out or comes in between the finding and the ending; a second end found meanwhile is
 * dropped (the first one wins, as a second sndk_qp_fail would). A connection still attaching
 * has no progress-thread source yet: it ends at once. */
static void end_work_fn(struct sndk_work *w)
{
    struct sndk_qp_io *io = sndk_container_of(w, struct sndk_qp_io, end_work);
    struct sndk_qp *qp = io->qp;
    sndk_qp_fail(qp, &io->end_due);
    sndk_obj_put(&qp->base); /* end_connection's */
}

static void end_connection(struct sndk_qp *qp, const struct sndk_fail *f)
{
    struct sndk_qp_io *io = qp->io;
    if (sndk_engine_current_thread(io->engine) == (int)io->thread ||
        sndk_conn_phase(io) == SNDK_PHASE_ATTACHING) {
        sndk_qp_fail(qp, f);
        return;
    }
    sndk_mutex_lock(&qp->rx_lock);
    sndk_mutex_lock(&qp->tx_lock);
    bool handed = sndk_conn_phase_set(qp, SNDK_PHASE_FAILING, "found on a consumer thread");
    if (handed)
        io->end_due = *f;
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_mutex_unlock(&qp->rx_lock);
    if (handed) {
        sndk_obj_get(&qp->base); /* the QP outlives the queued work */
        sndk_engine_queue_on(io->engine, io->thread, &io->end_work);
    }
}

static void fail_local(struct sndk_qp *qp, bool notify)
{
    struct sndk_fail f = {.link_status = STATUS_CANCELLED, .reason = SNDK_REASON_LOCAL,
                          .notify = notify, .rst = true};
    sndk_qp_fail(qp, &f);
}

static void finish_shutdown(struct sndk_qp *qp, NTSTATUS st)
{
    struct sndk_fail f = {.link_status = st, .graceful = true, .shut_status = st,
                          .rst = st != STATUS_SUCCESS};
    end_connection(qp, &f);
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
            f = rf; /* the peer's Terminate, a fault found, or the reset (the same end any
                       concurrent pass reports) */
    }
    sndk_mutex_unlock(&qp->rx_lock);
    end_connection(qp, &f);
}

/* After a TX attempt outside tx_lock: act on failures, finish a shutdown whose FIN went. */
static void after_tx(struct sndk_qp *qp, enum sndk_tx_result res)
{
    if (res == SNDK_TX_LOCAL_ERR && qp->io->tx_failed) {
        /* A Read Request's source was revoked before its response went out. */
        sndk_mutex_lock(&qp->tx_lock);
        struct sndk_fail f = qp->io->tx_fail;
        sndk_mutex_unlock(&qp->tx_lock);
        end_connection(qp, &f);
    } else if (res == SNDK_TX_LOCAL_ERR) {
        /* A request failed its local checks (siw: Terminate, local catastrophic). */
        struct sndk_fail f = {.link_status = STATUS_CONNECTION_ABORTED,
                              .reason = SNDK_REASON_TERM(SNDK_REASON_TERM_SENT, 0, 0, 0),
                              .notify = true, .send_term = true};
        f.term.layer = SNDK_TERM_LAYER_RDMAP;
        f.term.etype = SNDK_TERM_RDMAP_LOCAL_CATA;
        end_connection(qp, &f);
    } else if (res == SNDK_TX_IO_ERR) {
        if (qp_state(qp) != SNDK_QP_ERROR)
            tx_io_failed(qp);
    } else if (res == SNDK_TX_DRAINED && qp_state(qp) == SNDK_QP_DISCONNECTING) {
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
    enum sndk_qp_state st = qp_state(qp);
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
    struct sndk_qp_io *io = qp->io;
    enum sndk_tx_result res = SNDK_TX_DRAINED;
    sndk_mutex_lock(&qp->tx_lock);
    if (io->tx_kick) {
        io->tx_kick = false;
        if (!sndk_conn_stopped(io) && !io->tx_blocked)
            res = sndk_tx_push(qp);
    }
    sndk_mutex_unlock(&qp->tx_lock);
    if (res != SNDK_TX_DRAINED && res != SNDK_TX_BLOCKED)
        after_tx(qp, res);
}

#define SNDK_RX_BACKOFF_MIN_DUE      2048u /* less: read at once (the direct-read minimum) */
#define SNDK_RX_BACKOFF_FAST_NS_KIB  128u   /* 8 bytes/ns: this machine's loopback at its best */
#define SNDK_RX_BACKOFF_SLOW_NS_KIB  1024u  /* 1 byte/ns: the slowest rate it learns */
#define SNDK_RX_BACKOFF_MAX_NS       64000u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A polling consumer whose pass ran the socket dry in the middle of a large payload comes
 * back when most of the rest can have arrived, not at its next poll: otherwise it reads the
 * payload in crumbs, a system call and a TCP window update each, and on a loopback or a
 * busy core those crumbs cost the sender as much as the receiver. The wait is what the due
 * bytes take at the rate the connection learnt (rx_backoff_ns_per_kib: from 8 bytes/ns, at
 * best, to 1 byte/ns), at most SNDK_RX_BACKOFF_MAX_NS. A poll that comes back to nothing new
 * (a read that says EAGAIN) halves the rate assumed; one that finds the payload's end, or
 * more than it waited for, raises it by an eighth: on a busy machine the sender is slower than
 * its link, and a fixed rate made four reads in five of a 1 MiB stream say EAGAIN. */
static void set_poll_backoff(struct sndk_qp_io *io, uint32_t due)
{
    uint64_t after = 0;
    if (due >= SNDK_RX_BACKOFF_MIN_DUE) {
        uint64_t wait = (uint64_t)(due / 1024u) * io->rx_backoff_ns_per_kib;
        after = now_ns() + (wait < SNDK_RX_BACKOFF_MAX_NS ? wait : SNDK_RX_BACKOFF_MAX_NS);
    }
    if (after || atomic_load_explicit(&io->rx_poll_after_ns, memory_order_relaxed))
        atomic_store_explicit(&io->rx_poll_after_ns, after, memory_order_relaxed);
}

/* A consumer that polls its CQ until it is empty — NDK's usual loop, and ndkperf's — polls again
 * at once after each message it took. That poll's read can only say EAGAIN when the pass before
 * emptied the socket between two FPDUs: the peer's next message is a one-way trip away at the
 * least (3.5 µs on loopback here). It was a system call on the path between a message and the
 * consumer's answer to it, 0.43 µs of the 64 B one-way latency (docs/datapath.md, "Empty polls
 * right after a message"). So for SNDK_RX_QUIET_NS after such a pass polls do not read; bytes
 * that arrive meanwhile are read by the first poll after it, with whatever follows them. The
 * progress thread is not affected: it reads when epoll reports. rx_lock held. */
static void set_poll_quiet(struct sndk_qp_io *io, uint64_t fpdus_before)
{
    uint64_t until =
        sndk_rx_emptied_between_fpdus(io, fpdus_before) ? now_ns() + SNDK_RX_QUIET_NS : 0;
    if (until || atomic_load_explicit(&io->rx_quiet_until_ns, memory_order_relaxed))
        atomic_store_explicit(&io->rx_quiet_until_ns, until, memory_order_relaxed);
}

/* A polled pass that followed a back-off: learn from what it found (rx_lock held). */
static void learn_poll_backoff(struct sndk_qp_io *io, uint64_t fpdus_before, uint32_t pay_before)
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
    struct sndk_qp_io *io = qp->io;
    if (!io || !sndk_mutex_trylock(&qp->rx_lock))
        return false;
    if (sndk_conn_stopped(io) || io->rx_stalled) {
        sndk_mutex_unlock(&qp->rx_lock);
        return false;
    }
    if (io->peer_fin) {
        sndk_mutex_unlock(&qp->rx_lock);
        if (events & (EPOLLERR | EPOLLHUP)) {
            /* After the peer's FIN only an error or the end of our own side is left. */
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err || qp_state(qp) != SNDK_QP_DISCONNECTING) {
                struct sndk_fail f = {.link_status = STATUS_CONNECTION_RESET,
                                      .reason = SNDK_REASON_RESET, .notify = true, .rst = true};
                end_connection(qp, &f);
            }
        }
        return false;
    }
    struct sndk_fail f;
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
        sndk_tx_update_events(io);
        fin_sent = sndk_conn_phase(io) == SNDK_PHASE_FIN_SENT;
        sndk_mutex_unlock(&qp->tx_lock);
    }
    if (polled) {
        set_poll_backoff(io, sndk_rx_due_after_pass(io));
        set_poll_quiet(io, fpdus_before);
    }
    sndk_mutex_unlock(&qp->rx_lock);
    if (res != SNDK_RXR_FAIL)
        kick_tx(qp);
    if (res == SNDK_RXR_FAIL)
        end_connection(qp, &f);
    else if (res == SNDK_RXR_PEER_FIN)
        on_peer_fin(qp, fin_sent);
    return true;
}

static bool qp_poll_rx(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    if (io) {
        uint64_t after = atomic_load_explicit(&io->rx_poll_after_ns, memory_order_relaxed);
        uint64_t quiet = atomic_load_explicit(&io->rx_quiet_until_ns, memory_order_relaxed);
        if ((after || quiet) && now_ns() < (after > quiet ? after : quiet))
            return false;
    }
    return rx_run(qp, 0, true);
}

/* A polling consumer also sends what waits for socket space: with the consumers busy-polling
 * on every core, the progress thread that EPOLLOUT would wake may not run for a while, and the
 * stream stalls behind it. Try-lock, like the receive pass: a concurrent sender is already at
 * it. */
static bool qp_poll_tx(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    if (!io || !sndk_mutex_trylock(&qp->tx_lock))
        return false;
    bool blocked = io->tx_blocked && !sndk_conn_stopped(io);
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
static void qp_unpark_rx(struct sndk_qp *qp);

static void park_rx(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    sndk_mutex_lock(&qp->tx_lock);
    bool was = io->rx_parked;
    bool now = !sndk_conn_stopped(io) && !was;
    if (now) {
        io->rx_parked = true;
        sndk_cq_parked(qp->rcq, +1);
        sndk_tx_update_events(io);
    }
    sndk_mutex_unlock(&qp->tx_lock);
    if (!now)
        return;
    /* counted before the look at the stamp: an arm clears the stamp before it reads the
     * count (cq.c unpark_conns), so one of the two sees the other */
    atomic_thread_fence(memory_order_seq_cst);
    /* The consumer may have armed between our look at the CQ and the park: its unpark ran
     * before rx_parked was set and found nothing to do. It cleared the stamp before taking
     * tx_lock, so this second look sees that. */
    if (!sndk_cq_polling(qp->rcq))
        qp_unpark_rx(qp);
}

static void qp_unpark_rx(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    if (!io)
        return;
    sndk_mutex_lock(&qp->tx_lock);
    if (io->rx_parked) {
        io->rx_parked = false;
        sndk_cq_parked(qp->rcq, -1);
        sndk_tx_update_events(io); /* level-triggered: bytes already there report at once */
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
    qp_unpark_rx(c->owner);
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

/* What an empty poll of either CQ should act on: receiving while the receive side may read
 * (parked or not: parking hands the receiving to the polling consumer), sending while the
 * socket is full. A connection that can do neither leaves the CQs' readiness sets. A Send held
 * for a receive (receiver not ready) leaves the peer's bytes in the socket on purpose: watched,
 * it would be reported by every empty poll, each a pass that can do nothing; the post that
 * brings the receive resumes it (rnr_work), and the resume watches again. */
void sndk_qp_watch_cqs(struct sndk_qp_io *io)
{
    struct sndk_qp *qp = io->qp;
    sndk_assert_held(&qp->tx_lock);
    bool rx_off = io->peer_fin || io->rx_stalled || sndk_rnr_phase(io) == SNDK_RNR_WAITING;
    uint32_t ev = (rx_off ? 0u : (uint32_t)EPOLLIN) |
                  (io->tx_blocked && !io->tx_stalled ? (uint32_t)EPOLLOUT : 0u);
    sndk_cq_conn_watch(qp->rcq, &io->rconn, ev);
    if (qp->icq != qp->rcq)
        sndk_cq_conn_watch(qp->icq, &io->iconn, ev);
}

static void src_fn(struct sndk_source *s, uint32_t events)
{
    struct sndk_qp_io *io = sndk_container_of(s, struct sndk_qp_io, src);
    struct sndk_qp *qp = io->qp;
    if (events & EPOLLOUT) {
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
            sndk_rx_rnr_expire(qp, "the socket hung up");
        sndk_mutex_unlock(&qp->rx_lock);
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        rx_run(qp, events, false);
        if ((events & EPOLLIN) && sndk_cq_polling(qp->rcq))
            park_rx(qp);
    }
}

/* Injected stalls (docs/faults.md) end here. */
static void tx_stall_timer_fn(struct sndk_timer *t)
{
    struct sndk_qp_io *io = sndk_container_of(t, struct sndk_qp_io, tx_stall_timer);
    struct sndk_qp *qp = io->qp;
    enum sndk_tx_result res = SNDK_TX_DRAINED;
    sndk_mutex_lock(&qp->tx_lock);
    io->tx_stall_ref = false;
    if (!sndk_conn_stopped(io)) {
        io->tx_stalled = false;
        res = sndk_tx_push(qp); /* tx_blocked is still set: the push clears it when drained */
    }
    sndk_mutex_unlock(&qp->tx_lock);
    after_tx(qp, res);
    sndk_obj_put(&qp->base);
}

static void rx_stall_timer_fn(struct sndk_timer *t)
{
    struct sndk_qp_io *io = sndk_container_of(t, struct sndk_qp_io, rx_stall_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->rx_lock);
    sndk_mutex_lock(&qp->tx_lock);
    io->rx_stall_ref = false;
    bool live = !sndk_conn_stopped(io);
    if (live) {
        io->rx_stalled = false;
        sndk_tx_update_events(io);
    }
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
    struct sndk_qp_io *io = sndk_container_of(t, struct sndk_qp_io, rnr_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->rx_lock);
    sndk_mutex_lock(&qp->tx_lock);
    io->rnr_timer_ref = false;
    bool live = !sndk_conn_stopped(io);
    sndk_mutex_unlock(&qp->tx_lock);
    if (live)
        sndk_rx_rnr_expire(qp, "the receiver-not-ready bound expired");
    sndk_mutex_unlock(&qp->rx_lock);
    /* the pass ends it with the Send's Terminate (or goes on: the receive came) */
    if (live)
        rx_run(qp, 0, false);
    sndk_obj_put(&qp->base);
}

void sndk_qp_rnr_timer(struct sndk_qp *qp, unsigned ms)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (io->rnr_timer_ref)
        return;
    io->rnr_timer_ref = true;
    sndk_obj_get(&qp->base);
    sndk_timer_arm_on(io->engine, io->thread, &io->rnr_timer, (uint64_t)ms * 1000u);
}

/* A receive was posted while the connection waited: resume on the progress thread. rx_lock is
 * taken, not tried: a try-lock could lose the wake-up to a pass that looked just before. */
static void rnr_work_fn(struct sndk_work *w)
{
    struct sndk_qp_io *io = sndk_container_of(w, struct sndk_qp_io, rnr_work);
    struct sndk_qp *qp = io->qp;
    atomic_store_explicit(&io->rnr_work_queued, false, memory_order_release);
    sndk_mutex_lock(&qp->rx_lock);
    bool resumed = !sndk_conn_stopped(io) && sndk_rx_rnr_resume(qp);
    sndk_mutex_unlock(&qp->rx_lock);
    if (resumed)
        rx_run(qp, 0, false); /* the rest of the staging buffer: no EPOLLIN reports it */
    sndk_obj_put(&qp->base);
}

void sndk_qp_rnr_kick(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    if (!io || sndk_rnr_phase(io) != SNDK_RNR_WAITING ||
        atomic_exchange_explicit(&io->rnr_work_queued, true, memory_order_acq_rel))
        return;
    sndk_obj_get(&qp->base);
    if (!sndk_engine_queue_on(io->engine, io->thread, &io->rnr_work)) {
        atomic_store_explicit(&io->rnr_work_queued, false, memory_order_release);
        sndk_obj_put(&qp->base);
    }
}

void sndk_qp_stall_timer(struct sndk_qp *qp, enum sndk_fault_dir dir, uint32_t ms)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    bool *ref = dir == SNDK_FDIR_TX ? &io->tx_stall_ref : &io->rx_stall_ref;
    struct sndk_timer *t = dir == SNDK_FDIR_TX ? &io->tx_stall_timer : &io->rx_stall_timer;
    if (*ref)
        return;
    *ref = true;
    sndk_obj_get(&qp->base);
    sndk_timer_arm_on(io->engine, io->thread, t, (uint64_t)ms * 1000u);
}

static void shut_timer_fn(struct sndk_timer *t)
{
    struct sndk_qp_io *io = sndk_container_of(t, struct sndk_qp_io, shut_timer);
    struct sndk_qp *qp = io->qp;
    sndk_mutex_lock(&qp->state_lock);
    bool had_ref = io->shut_timer_ref;
    io->shut_timer_ref = false;
    bool waiting = qp_state(qp) == SNDK_QP_DISCONNECTING;
    sndk_mutex_unlock(&qp->state_lock);
    if (waiting)
        finish_shutdown(qp, STATUS_IO_TIMEOUT);
    if (had_ref)
        sndk_obj_put(&qp->base);
}

/* ---------------------------------------------------------------- link.h */

static uint32_t fpdu_size_for(int fd)
{
    /* docs/wire.md: one FPDU per TCP segment. TCP_MAXSEG of a young connection is bounded by
     * half the peer's window seen so far (32 KiB on a fresh loopback socket), so the MSS this
     * end advertises (its MTU) decides whether the link is loopback-sized. */
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
        ti.tcpi_advmss + 3u >= SNDK_FPDU_MAX_DEFAULT)
        return SNDK_FPDU_MAX_DEFAULT;
    int mss = 0;
    socklen_t len = sizeof mss;
    uint32_t max = SNDK_FPDU_MAX_DEFAULT;
    if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0 &&
        (uint32_t)mss < max) {
        max = (uint32_t)mss & ~3u;
        if (max < 1024)
            max = 1024; /* a tiny MSS (tunnels, odd links): let TCP segment */
    }
    return max;
}

static struct sndk_qp_io *io_create(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->cur = calloc(1, sizeof *io->cur + (size_t)qp->recv_max_sge * sizeof(NDK_SGE));
    io->cur_cap = (int)qp->recv_max_sge + 16; /* fast-registered pieces may split an SGE */
    io->cur_iov = calloc((size_t)io->cur_cap, sizeof *io->cur_iov);
    if (!io->cur || !io->cur_iov) {
        free(io->cur);
        free(io->cur_iov);
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
    if (qp_state(qp) != SNDK_QP_IDLE || qp->io) {
        sndk_mutex_unlock(&qp->state_lock);
        return -EBUSY;
    }
    if (sndk_obj_closing(&qp->base)) {
        /* Closed during the handshake: the close cancels the connection ([CLOSE-4]) rather
         * than a closing QP going live (docs/misuse.md). */
        sndk_mutex_unlock(&qp->state_lock);
        return -ECANCELED;
    }
    struct sndk_qp_io *io = io_create(qp);
    if (!io) {
        sndk_mutex_unlock(&qp->state_lock);
        return -ENOMEM;
    }
    io->engine = qp->base.adapter->engine;
    io->fd = p->fd;
    io->thread = p->thread < sndk_engine_threads(io->engine) ? p->thread : 0;
    io->crc = p->crc;
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
    sndk_work_init(&io->rnr_work, rnr_work_fn);
    io->crec = p->rec;
    sndk_conn_rec_get(io->crec);
    int one = 1;
    setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sndk_tx_init(io, p->crc, fpdu_size_for(p->fd), p->ird, p->ord);
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
    qp_set_state(qp, SNDK_QP_CONNECTED, "attached");
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
        fail_local(qp, false);
        sndk_cq_conn_remove(qp->rcq, &io->rconn);
        if (qp->icq != qp->rcq)
            sndk_cq_conn_remove(qp->icq, &io->iconn);
        sndk_obj_put(&qp->base);
        return rc;
    }
    /* A failure before this point (a close, a CQ poll, a post on another thread) did not
     * remove the source (see sndk_qp_fail): do it now. One after it sees the phase live. */
    sndk_mutex_lock(&qp->state_lock);
    bool failed = qp_state(qp) == SNDK_QP_ERROR;
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
    sndk_tx_update_events(io);
    sndk_mutex_unlock(&qp->tx_lock);
    sndk_debug("qp", "QP %p: attached fd %d on thread %u, CRC %s, FPDU <= %u", (void *)qp, p->fd,
               io->thread, p->crc ? "on" : "off", io->txcfg.max_fpdu);
    return 0;
}

void sndk_qp_shutdown(struct sndk_qp *qp, unsigned timeout_ms)
{
    struct sndk_qp_io *io = qp->io;
    if (!io)
        return;
    sndk_mutex_lock(&qp->state_lock);
    if (qp_state(qp) == SNDK_QP_ERROR) {
        /* Already over (an abort reported it): still answer the one who waits. */
        io->ev_shut_status = io->ev_abort_status ? io->ev_abort_status : STATUS_CONNECTION_RESET;
        ev_queue_locked(qp, SNDK_EV_SHUTDOWN_DONE);
        sndk_mutex_unlock(&qp->state_lock);
        return;
    }
    if (!qp_set_state(qp, SNDK_QP_DISCONNECTING, "shutdown")) {
        sndk_mutex_unlock(&qp->state_lock);
        return;
    }
    io->shut_timer_ref = true;
    sndk_obj_get(&qp->base);
    sndk_timer_arm_on(io->engine, io->thread, &io->shut_timer, (uint64_t)timeout_ms * 1000u);
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
    *oldest_ctx = n ? sq_slot(qp, head)->context : NULL;
    sndk_mutex_unlock(&qp->tx_lock);
    return n;
}

void sndk_qp_connect_failed(struct sndk_qp *qp)
{
    sndk_mutex_lock(&qp->state_lock);
    bool failed = !qp->io && qp_state(qp) == SNDK_QP_IDLE &&
                  qp_set_state(qp, SNDK_QP_ERROR, "connection attempt failed");
    sndk_mutex_unlock(&qp->state_lock);
    /* A receive posted meanwhile sees ERROR after queueing and flushes itself. */
    if (failed)
        flush_all_receives(qp, STATUS_CANCELLED, 0);
}

void sndk_qp_abort(struct sndk_qp *qp)
{
    fail_local(qp, false);
}

void sndk_qp_detach(struct sndk_qp *qp, struct sndk_work *done)
{
    struct sndk_qp_io *io = qp->io;
    if (!io) {
        if (done)
            sndk_engine_queue(qp->base.adapter->engine, done);
        return;
    }
    sndk_mutex_lock(&qp->state_lock);
    io->detached = true;
    io->detach_done = done;
    sndk_mutex_unlock(&qp->state_lock);
    fail_local(qp, false);
    /* Behind any event work already queued on the connection's thread. */
    sndk_engine_queue_on(io->engine, io->thread, &io->detach_work);
}

/* ---------------------------------------------------------------- posting */

/* [DEFER-2]: before an initiator request fails inline, everything accepted with DEFER
 * before it goes to the wire. */
static NTSTATUS refuse(struct sndk_qp *qp, NTSTATUS st)
{
    if (qp_state(qp) == SNDK_QP_CONNECTED && qp->io) {
        sndk_mutex_lock(&qp->tx_lock);
        enum sndk_tx_result res = SNDK_TX_DRAINED;
        if (!sndk_conn_stopped(qp->io) && !qp->io->tx_blocked && qp->sq_sent != qp->sq_tail)
            res = sndk_tx_push(qp);
        sndk_mutex_unlock(&qp->tx_lock);
        after_tx(qp, res);
    }
    return st;
}

#define SEND_FLAGS                                                                                 \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT |   \
     NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define WRITE_FLAGS                                                                                \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define READ_FLAGS                                                                                 \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE |                                        \
     NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE | NDK_OP_FLAG_DEFER)
#define BIND_FLAGS                                                                                 \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |        \
     NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER)
#define FR_FLAGS                                                                                   \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |        \
     NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_RDMA_READ_SINK | \
     NDK_OP_FLAG_DEFER)
#define INVAL_FLAGS (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER)

/* The NDK call that posts each kind (for the verifier's reports). */
static const char *const sq_kind_calls[] = {
    [SNDK_SQ_SEND] = "NdkSend(AndInvalidate)",
    [SNDK_SQ_WRITE] = "NdkWrite",
    [SNDK_SQ_READ] = "NdkRead",
    [SNDK_SQ_BIND] = "NdkBind",
    [SNDK_SQ_FAST_REGISTER] = "NdkFastRegister",
    [SNDK_SQ_INVALIDATE] = "NdkInvalidate",
};

/* The first checks of every initiator request: connected, known flags, a free slot. On success
 * the slot at sq_tail is set up (still the poster's until published). */
static NTSTATUS sq_begin(struct sndk_qp *qp, void *ctx, ULONG flags, ULONG allowed,
                         enum sndk_sq_kind kind, struct sndk_sqe **pe)
{
    if (qp_state(qp) != SNDK_QP_CONNECTED) {
        /* After a connection ended the call races the disconnect event: only a QP that was
         * never connected is the consumer's mistake for certain. */
        if (sndk_verify_on(qp->base.adapter) && qp_state(qp) == SNDK_QP_IDLE)
            sndk_verify_report(&qp->base, SoftNdkVerifyPostNotConnected, ctx,
                               "%s on a QP that was never connected: post initiator requests "
                               "after NdkConnect/NdkAccept completed",
                               sq_kind_calls[kind]);
        return STATUS_CONNECTION_INVALID;
    }
    if (flags & ~allowed)
        return refuse(qp, STATUS_INVALID_PARAMETER);
    uint32_t tail = qp->sq_tail;
    if (tail - atomic_load_explicit(&qp->sq_head, memory_order_acquire) >= qp->initiator_depth)
        return refuse(qp, STATUS_NO_MORE_ENTRIES);
    /* The slot at sq_tail is the poster's until sq_tail moves past it. */
    uint32_t s = tail % qp->initiator_depth;
    struct sndk_sqe *e = &qp->sq[s];
    *e = (struct sndk_sqe){.context = ctx, .flags = flags, .status = STATUS_SUCCESS,
                           .kind = (uint8_t)kind,
                           .iov = qp->sq_iov + (size_t)s * qp->sq_iov_stride};
    *pe = e;
    return STATUS_SUCCESS;
}

/* Check the SGE list against the request's limits and resolve it into e->iov (or copy it into
 * the slot's inline storage). `need`: the local right the SGEs must grant. A bad SGE does not
 * refuse the request: it completes, in order, with the access error (decisions 9k). */
static NTSTATUS sq_sges(struct sndk_qp *qp, struct sndk_sqe *e, const NDK_SGE *sgl, ULONG nsge,
                        ULONG max_sge, unsigned need)
{
    if (nsge && !sgl)
        return STATUS_INVALID_PARAMETER;
    bool inl = (e->flags & NDK_OP_FLAG_INLINE) != 0;
    uint64_t bytes = 0;
    for (ULONG i = 0; i < nsge; i++) {
        if (inl && sgl[i].Length && !sgl[i].VirtualAddress)
            return STATUS_INVALID_PARAMETER; /* [FLAG-5]: an inline payload must be readable */
        bytes += sgl[i].Length;
    }
    /* 9c: byte and SGE limits; INLINE lifts the SGE limit and has its own byte limit. */
    if (inl ? bytes > qp->inline_size : nsge > max_sge)
        return STATUS_DATA_OVERRUN;
    if (bytes > qp->base.adapter->info.MaxTransferLength)
        return STATUS_DATA_OVERRUN;
    e->bytes = bytes;
    if (inl) {
        /* [FLAG-5]: the payload is consumed before the call returns; tokens are ignored. */
        uint32_t s = (uint32_t)(e - qp->sq);
        uint8_t *dst = qp->sq_inline + (size_t)s * qp->inline_size;
        for (ULONG i = 0; i < nsge; i++) {
            if (sgl[i].Length)
                memcpy(dst, sgl[i].VirtualAddress, sgl[i].Length);
            dst += sgl[i].Length;
        }
        if (bytes) {
            e->iov[0] = (struct iovec){qp->sq_inline + (size_t)s * qp->inline_size, bytes};
            e->niov = 1;
        }
        return STATUS_SUCCESS;
    }
    int n = 0;
    for (ULONG i = 0; i < nsge; i++) {
        int k = 0;
        enum sndk_access_result r = sndk_access_check(
            qp->pd, sgl[i].MemoryRegionToken, (uint64_t)(uintptr_t)sgl[i].VirtualAddress,
            sgl[i].Length, need, false, e->iov + n, (int)qp->sq_iov_stride - n, &k);
        if (r != SNDK_ACC_OK) {
            /* Accepted, and completed in order with the NDSPI status ([STAT-2]). */
            e->status = r == SNDK_ACC_TOO_MANY ? STATUS_DATA_OVERRUN : STATUS_ACCESS_VIOLATION;
            e->code = (ULONG)r;
            n = 0;
            break;
        }
        n += k;
    }
    e->niov = n;
    return STATUS_SUCCESS;
}

/* Publish the slot at sq_tail and, unless DEFER or the socket is backed up, send. */
static NTSTATUS sq_publish(struct sndk_qp *qp, ULONG flags)
{
    sndk_mutex_lock(&qp->tx_lock);
    struct sndk_qp_io *io = qp->io;
    if (sndk_conn_ended(io)) {
        /* The connection ended since the state check; nothing was published. */
        sndk_mutex_unlock(&qp->tx_lock);
        return STATUS_CONNECTION_INVALID;
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
    if (!(flags & NDK_OP_FLAG_DEFER) && !io->tx_blocked)
        res = sndk_tx_push(qp);
    sndk_mutex_unlock(&qp->tx_lock);
    if (res != SNDK_TX_DRAINED && res != SNDK_TX_BLOCKED)
        after_tx(qp, res);
    return STATUS_SUCCESS;
}

static NTSTATUS post_send(struct sndk_qp *qp, void *ctx, const NDK_SGE *sgl, ULONG nsge,
                          ULONG flags, bool invalidate, uint32_t inv_stag)
{
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, ctx, flags, SEND_FLAGS, SNDK_SQ_SEND, &e);
    if (st != STATUS_SUCCESS)
        return st;
    st = sq_sges(qp, e, sgl, nsge, qp->initiator_max_sge, SNDK_ACCESS_LOCAL_READ);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    bool se = (flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0;
    e->opcode = (uint8_t)(invalidate ? (se ? SNDK_OP_SEND_SE_INV : SNDK_OP_SEND_INV)
                                     : (se ? SNDK_OP_SEND_SE : SNDK_OP_SEND));
    e->inv_stag = inv_stag;
    return sq_publish(qp, flags);
}

static NTSTATUS qp_send(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    return post_send(qp, RequestContext, pSgl, nSge, Flags, false, 0);
}

static NTSTATUS qp_send_invalidate(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl,
                                   ULONG nSge, ULONG Flags, UINT32 RemoteToken)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    return post_send(qp, RequestContext, pSgl, nSge, Flags, true, RemoteToken);
}

static unsigned op_rights(ULONG flags)
{
    unsigned a = 0;
    if (flags & NDK_OP_FLAG_ALLOW_REMOTE_READ)
        a |= SNDK_ACCESS_REMOTE_READ;
    if ((flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) == NDK_OP_FLAG_ALLOW_REMOTE_WRITE)
        a |= SNDK_ACCESS_REMOTE_WRITE;
    return a;
}

static NTSTATUS qp_bind(NDK_QP *pNdkQp, PVOID RequestContext, NDK_MR *pMr, NDK_MW *pMw,
                        PVOID VirtualAddress, SIZE_T Length, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, BIND_FLAGS, SNDK_SQ_BIND, &e);
    if (st != STATUS_SUCCESS)
        return st;
    struct sndk_mr *mr = sndk_mr_from(pMr);
    struct sndk_obj *mwo = sndk_obj_check(pMw, NdkObjectTypeMw);
    if (!mr || !mwo) {
        if (sndk_verify_on(qp->base.adapter)) {
            if (!mr)
                sndk_verify_bad_handle(&qp->base, "NdkBind", "the MR", pMr, NdkObjectTypeMr);
            if (!mwo)
                sndk_verify_bad_handle(&qp->base, "NdkBind", "the MW", pMw, NdkObjectTypeMw);
        }
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    /* The 0x10 bit of ALLOW_REMOTE_WRITE alone is local write, which a window cannot grant. */
    if ((Flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE) &&
        (Flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) != NDK_OP_FLAG_ALLOW_REMOTE_WRITE)
        return refuse(qp, STATUS_INVALID_PARAMETER);
    /* Takes effect now: the token is readable when the call returns, and a peer can learn it
     * only from a later message. The completion keeps its place in the queue. */
    st = sndk_mw_bind(sndk_container_of(mwo, struct sndk_mw, base), mr, qp->pd,
                      (uint64_t)(uintptr_t)VirtualAddress, Length, op_rights(Flags));
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_fast_register(NDK_QP *pNdkQp, PVOID RequestContext, NDK_MR *pMr,
                                 ULONG AdapterPageCount, const NDK_LOGICAL_ADDRESS *AdapterPageArray,
                                 ULONG FBO, SIZE_T Length, PVOID BaseVirtualAddress, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, FR_FLAGS, SNDK_SQ_FAST_REGISTER, &e);
    if (st != STATUS_SUCCESS)
        return st;
    struct sndk_mr *mr = sndk_mr_from(pMr);
    if (!mr) {
        if (sndk_verify_on(qp->base.adapter))
            sndk_verify_bad_handle(&qp->base, "NdkFastRegister", "the MR", pMr, NdkObjectTypeMr);
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_fast_register(mr, RequestContext);
    unsigned access = SNDK_ACCESS_LOCAL_READ | op_rights(Flags);
    if (Flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE)
        access |= SNDK_ACCESS_LOCAL_WRITE;
    if (Flags & NDK_OP_FLAG_RDMA_READ_SINK)
        access |= SNDK_ACCESS_READ_SINK;
    bool remote = (access & (SNDK_ACCESS_REMOTE_READ | SNDK_ACCESS_REMOTE_WRITE)) != 0;
    st = sndk_mr_fast_register(mr, qp->pd, AdapterPageCount, AdapterPageArray, FBO, Length,
                               (uint64_t)(uintptr_t)BaseVirtualAddress, access, remote);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_invalidate(NDK_QP *pNdkQp, PVOID RequestContext, NDK_OBJECT_HEADER *pNdkMrOrMw,
                              ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, INVAL_FLAGS, SNDK_SQ_INVALIDATE, &e);
    if (st != STATUS_SUCCESS)
        return st;
    struct sndk_obj *o = sndk_obj_check(pNdkMrOrMw, NdkObjectTypeUndefined);
    if (!o || !sndk_adapter_same_device(o->adapter, qp->base.adapter))
        return refuse(qp, STATUS_INVALID_PARAMETER);
    if (o->ops->type == NdkObjectTypeMr) {
        struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
        if (!mr->fast || mr->pd != qp->pd)
            return refuse(qp, STATUS_INVALID_PARAMETER); /* never an NdkRegisterMr region */
    } else if (o->ops->type == NdkObjectTypeMw) {
        if (sndk_container_of(o, struct sndk_mw, base)->pd != qp->pd)
            return refuse(qp, STATUS_INVALID_PARAMETER);
    } else {
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    /* Runs in queue order (tx.c fill_batch): after every earlier request has been handed to
     * the wire, and after the earlier Reads with READ_FENCE. */
    sndk_obj_get(o);
    e->target = o;
    st = sq_publish(qp, Flags);
    if (st != STATUS_SUCCESS) {
        e->target = NULL;
        sndk_obj_put(o);
    }
    return st;
}

static NTSTATUS qp_read(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, READ_FLAGS, SNDK_SQ_READ, &e);
    if (st != STATUS_SUCCESS)
        return st;
    if (qp->io->ord == 0)
        return refuse(qp, STATUS_INVALID_DEVICE_REQUEST); /* ORD 0: no Reads on this connection */
    /* The sink is named by a private STag per Read ([IW-SINK]): the SGEs need local write only. */
    st = sq_sges(qp, e, pSgl, nSge, qp->base.adapter->info.MaxReadRequestSge,
                 SNDK_ACCESS_LOCAL_WRITE);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    if (RemoteAddress + e->bytes < RemoteAddress)
        return refuse(qp, STATUS_INVALID_PARAMETER);
    e->opcode = SNDK_OP_READ_REQ;
    e->rstag = RemoteToken;
    e->rto = RemoteAddress;
    /* [FLAG-7]: honoured when the adapter advertises it, silently ignored otherwise. */
    if ((Flags & NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE) && nSge > 0 &&
        (qp->base.adapter->info.AdapterFlags &
         NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED))
        e->local_tok = pSgl[0].MemoryRegionToken;
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_write(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                         UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, WRITE_FLAGS, SNDK_SQ_WRITE, &e);
    if (st != STATUS_SUCCESS)
        return st;
    st = sq_sges(qp, e, pSgl, nSge, qp->initiator_max_sge, SNDK_ACCESS_LOCAL_READ);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    if (RemoteAddress + e->bytes < RemoteAddress)
        return refuse(qp, STATUS_INVALID_PARAMETER); /* the wire TO would wrap */
    e->opcode = SNDK_OP_WRITE;
    e->rstag = RemoteToken;
    e->rto = RemoteAddress;
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_receive(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp || qp->srq)
        return STATUS_INVALID_PARAMETER; /* 9e: a QP on an SRQ takes receives from the SRQ */
    sndk_mutex_lock(&qp->rq_lock);
    NTSTATUS st = sndk_recv_ring_push(&qp->rq, RequestContext, pSgl, nSge,
                                      qp->base.adapter->info.MaxTransferLength);
    /* Queued: a Send may fill it and its completion callback post again before we return
     * (verify.h, struct sndk_verify_call). */
    if (st == STATUS_SUCCESS && sndk_verify_on(qp->base.adapter))
        sndk_verify_call_commit(&qp->verify_rq_callers);
    sndk_mutex_unlock(&qp->rq_lock);
    /* A QP in its final state, or whose close began, will never fill it: it completes at
     * once, as flushed (the close flushed the earlier ones; docs/misuse.md). */
    if (st == STATUS_SUCCESS && (qp_state(qp) == SNDK_QP_ERROR || sndk_obj_closing(&qp->base)))
        flush_all_receives(qp, STATUS_CANCELLED, 0);
    else if (st == STATUS_SUCCESS)
        sndk_qp_rnr_kick(qp); /* a Send waiting for it (receiver not ready) goes on */
    return st;
}

static VOID qp_flush(NDK_QP *pNdkQp)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return;
    enum sndk_qp_state st = qp_state(qp);
    if (st == SNDK_QP_CONNECTED || st == SNDK_QP_DISCONNECTING) {
        /* Flushing a live connection puts the QP in its error state (the verbs model): what is
         * queued can no longer match the peer's stream. */
        fail_local(qp, true);
        return;
    }
    flush_all_receives(qp, STATUS_CANCELLED, 0);
}

static const NDK_QP_DISPATCH qp_dispatch = {
    .NdkCloseQp = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkFlush = qp_flush,
    .NdkSend = qp_send,
    .NdkReceive = qp_receive,
    .NdkBind = qp_bind,
    .NdkFastRegister = qp_fast_register,
    .NdkInvalidate = qp_invalidate,
    .NdkRead = qp_read,
    .NdkWrite = qp_write,
    .NdkSendAndInvalidate = qp_send_invalidate,
};

/* ---------------------------------------------------------------- [POST-2] under the verifier */

/* With the verifier on a QP gets this dispatch table instead of qp_dispatch: each post counts
 * itself in on its queue around the real entry, and one that finds another thread inside the
 * same queue reports it (verify/verify.h). Off, the consumer calls the real entries and pays
 * nothing. The handle is only looked up here; the real entry checks and reports it. */
static struct sndk_qp *verify_queue_enter(struct sndk_verify_call *c, NDK_QP *pub, bool initiator,
                                          const char *call, const void *ctx)
{
    struct sndk_obj *o = sndk_obj_lookup(pub, NdkObjectTypeQp);
    if (!o)
        return NULL;
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    sndk_obj_get(o); /* [CLOSE-3]: a close during the post completes after it */
    sndk_verify_queue_enter(
        c, o, initiator ? &qp->verify_sq_callers : &qp->verify_rq_callers,
        SoftNdkVerifyPostConcurrent,
        initiator ? "initiator queue of the QP" : "receive queue of the QP", call, ctx);
    return qp;
}

static void verify_queue_leave(struct sndk_verify_call *c, struct sndk_qp *qp)
{
    if (!qp)
        return;
    sndk_verify_queue_leave(c);
    sndk_obj_put(&qp->base);
}

/* From qp_close_begin: posts still running on the QP (verify/verify.h). */
static void verify_close_begin(struct sndk_qp *qp)
{
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_close_during_post(&qp->base, atomic_load(&qp->verify_sq_callers) +
                                                     atomic_load(&qp->verify_rq_callers));
}

/* The wrapper of entry `fn`, posting on the initiator queue or not, with its NDK arguments. */
#define VERIFIED_POST(fn, initiator, call, params, args)                                           \
    static NTSTATUS fn##_verified params                                                           \
    {                                                                                              \
        struct sndk_verify_call vc_;                                                               \
        struct sndk_qp *qp_ = verify_queue_enter(&vc_, pNdkQp, (initiator), (call), RequestContext); \
        NTSTATUS st_ = fn args;                                                                    \
        verify_queue_leave(&vc_, qp_);                                                             \
        return st_;                                                                                \
    }

VERIFIED_POST(qp_send, true, "NdkSend",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge, ULONG Flags),
              (pNdkQp, RequestContext, pSgl, nSge, Flags))
VERIFIED_POST(qp_send_invalidate, true, "NdkSendAndInvalidate",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge, ULONG Flags,
               UINT32 RemoteToken),
              (pNdkQp, RequestContext, pSgl, nSge, Flags, RemoteToken))
VERIFIED_POST(qp_bind, true, "NdkBind",
              (NDK_QP * pNdkQp, PVOID RequestContext, NDK_MR *pMr, NDK_MW *pMw,
               PVOID VirtualAddress, SIZE_T Length, ULONG Flags),
              (pNdkQp, RequestContext, pMr, pMw, VirtualAddress, Length, Flags))
VERIFIED_POST(qp_fast_register, true, "NdkFastRegister",
              (NDK_QP * pNdkQp, PVOID RequestContext, NDK_MR *pMr, ULONG AdapterPageCount,
               const NDK_LOGICAL_ADDRESS *AdapterPageArray, ULONG FBO, SIZE_T Length,
               PVOID BaseVirtualAddress, ULONG Flags),
              (pNdkQp, RequestContext, pMr, AdapterPageCount, AdapterPageArray, FBO, Length,
               BaseVirtualAddress, Flags))
VERIFIED_POST(qp_invalidate, true, "NdkInvalidate",
              (NDK_QP * pNdkQp, PVOID RequestContext, NDK_OBJECT_HEADER *pNdkMrOrMw, ULONG Flags),
              (pNdkQp, RequestContext, pNdkMrOrMw, Flags))
VERIFIED_POST(qp_read, true, "NdkRead",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
               UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags),
              (pNdkQp, RequestContext, pSgl, nSge, RemoteAddress, RemoteToken, Flags))
VERIFIED_POST(qp_write, true, "NdkWrite",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
               UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags),
              (pNdkQp, RequestContext, pSgl, nSge, RemoteAddress, RemoteToken, Flags))
VERIFIED_POST(qp_receive, false, "NdkReceive",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge),
              (pNdkQp, RequestContext, pSgl, nSge))

static const NDK_QP_DISPATCH qp_dispatch_verified = {
    .NdkCloseQp = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkFlush = qp_flush,
    .NdkSend = qp_send_verified,
    .NdkReceive = qp_receive_verified,
    .NdkBind = qp_bind_verified,
    .NdkFastRegister = qp_fast_register_verified,
    .NdkInvalidate = qp_invalidate_verified,
    .NdkRead = qp_read_verified,
    .NdkWrite = qp_write_verified,
    .NdkSendAndInvalidate = qp_send_invalidate_verified,
};

static void qp_close_begin(struct sndk_obj *o)
{
    /* [CLOSE-4]: a close starts cancelling what is pending; the connection goes with it. */
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    verify_close_begin(qp);
    sndk_mutex_lock(&qp->state_lock); /* orders against sndk_qp_attach going live */
    enum sndk_qp_state st = qp_state(qp);
    sndk_mutex_unlock(&qp->state_lock);
    if (st == SNDK_QP_CONNECTED || st == SNDK_QP_DISCONNECTING)
        fail_local(qp, true);
    else
        flush_all_receives(qp, STATUS_CANCELLED, 0);
}

static void qp_destroy(struct sndk_obj *o)
{
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    if (qp->io) {
        sndk_conn_rec_put(qp->io->crec); /* first: ndkstat may look at this QP until then */
        free(qp->io->cur);
        free(qp->io->cur_iov);
        free(qp->io->resp_iov);
        sndk_dp_hooks_detach(qp->io);
        free(qp->io);
    }
    free(qp->sq);
    free(qp->sq_iov);
    free(qp->sq_inline);
    sndk_recv_ring_destroy(&qp->rq);
    sndk_mutex_destroy(&qp->rq_lock);
    sndk_mutex_destroy(&qp->rx_lock);
    sndk_mutex_destroy(&qp->tx_lock);
    sndk_mutex_destroy(&qp->state_lock);
}

static const struct sndk_obj_ops qp_ops = {
    .type = NdkObjectTypeQp, .close_begin = qp_close_begin, .destroy = qp_destroy};

/* What NdkCreateQp and NdkCreateQpWithSrq ask for (no SRQ: with_srq false, the receive queue
 * fields used; with one: they are ignored). */
struct qp_create_args {
    NDK_PD *pd;
    NDK_CQ *receive_cq, *initiator_cq;
    NDK_SRQ *srq;
    bool with_srq;
    PVOID context;
    ULONG receive_depth, initiator_depth;
    ULONG receive_max_sge, initiator_max_sge;
    ULONG inline_size;
};

static NTSTATUS qp_create_common(const struct qp_create_args *q, NDK_QP **ppNdkQp)
{
    struct sndk_pd *pd = sndk_pd_from(q->pd);
    struct sndk_cq *rcq = sndk_cq_from(q->receive_cq);
    struct sndk_cq *icq = sndk_cq_from(q->initiator_cq);
    struct sndk_srq *srq = q->with_srq ? sndk_srq_from(q->srq) : NULL;
    if (pd && sndk_verify_on(pd->base.adapter)) {
        const char *call = q->with_srq ? "NdkCreateQpWithSrq" : "NdkCreateQp";
        if (!rcq || !sndk_obj_usable(&rcq->base, pd->base.adapter))
            sndk_verify_bad_handle(&pd->base, call, "the receive CQ", q->receive_cq, NdkObjectTypeCq);
        if (!icq || !sndk_obj_usable(&icq->base, pd->base.adapter))
            sndk_verify_bad_handle(&pd->base, call, "the initiator CQ", q->initiator_cq,
                                   NdkObjectTypeCq);
        if (q->with_srq && (!srq || !sndk_obj_usable(&srq->base, pd->base.adapter)))
            sndk_verify_bad_handle(&pd->base, call, "the SRQ", q->srq, NdkObjectTypeSrq);
    }
    if (!pd || !rcq || !icq || !ppNdkQp || (q->with_srq && !srq))
        return STATUS_INVALID_PARAMETER;
    struct sndk_adapter *a = pd->base.adapter;
    /* Antecedents must be of this adapter (and the SRQ of this PD) and open. */
    if (!sndk_obj_usable(&rcq->base, a) || !sndk_obj_usable(&icq->base, a) ||
        (srq && (!sndk_obj_usable(&srq->base, a) || srq->base.holds[0] != &pd->base)))
        return STATUS_INVALID_PARAMETER;
    const NDK_ADAPTER_INFO *info = &a->info;
    if (q->initiator_depth == 0 || q->initiator_depth > info->MaxInitiatorQueueDepth ||
        q->initiator_max_sge > info->MaxInitiatorRequestSge ||
        q->inline_size > info->MaxInlineDataSize)
        return STATUS_INVALID_PARAMETER;
    if (!q->with_srq && (q->receive_depth == 0 || q->receive_depth > info->MaxReceiveQueueDepth ||
                         q->receive_max_sge > info->MaxReceiveRequestSge))
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&pd->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(a, SNDK_FCALL_QP))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_qp *qp = calloc(1, sizeof *qp);
    if (!qp)
        return STATUS_INSUFFICIENT_RESOURCES;
    /* Reads may use up to MaxReadRequestSge SGEs (it overrides the initiator limit, [POST-6]). */
    qp->sq_iov_stride = q->initiator_max_sge > info->MaxReadRequestSge ? q->initiator_max_sge
                                                                       : info->MaxReadRequestSge;
    if (qp->sq_iov_stride == 0)
        qp->sq_iov_stride = 1;
    qp->sq = calloc(q->initiator_depth, sizeof *qp->sq);
    qp->sq_iov = calloc((size_t)q->initiator_depth * qp->sq_iov_stride, sizeof *qp->sq_iov);
    qp->sq_inline = q->inline_size ? malloc((size_t)q->initiator_depth * q->inline_size) : NULL;
    if (!qp->sq || !qp->sq_iov || (q->inline_size && !qp->sq_inline) ||
        !sndk_recv_ring_init(&qp->rq, q->with_srq ? 0 : q->receive_depth,
                             q->with_srq ? 0 : q->receive_max_sge)) {
        free(qp->sq);
        free(qp->sq_iov);
        free(qp->sq_inline);
        free(qp);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    qp->pd = pd;
    qp->rcq = rcq;
    qp->icq = icq;
    qp->srq = srq;
    qp->context = q->context;
    qp->initiator_depth = q->initiator_depth;
    qp->initiator_max_sge = q->initiator_max_sge;
    qp->inline_size = q->inline_size;
    qp->recv_max_sge = srq ? srq->ring.max_sge : q->receive_max_sge;
    atomic_init(&qp->state, SNDK_QP_IDLE);
    atomic_init(&qp->sq_head, 0);
    sndk_mutex_init_ranked(&qp->state_lock, SNDK_LOCK_QP_STATE);
    sndk_mutex_init_ranked(&qp->tx_lock, SNDK_LOCK_QP_TX);
    sndk_mutex_init_ranked(&qp->rx_lock, SNDK_LOCK_QP_RX);
    sndk_mutex_init_ranked(&qp->rq_lock, SNDK_LOCK_QP_RQ);
    sndk_obj_init(&qp->base, a, &qp_ops, sndk_verify_on(a) ? &qp_dispatch_verified : &qp_dispatch);
    sndk_obj_hold(&qp->base, &pd->base);
    sndk_obj_hold(&qp->base, &rcq->base);
    if (icq != rcq)
        sndk_obj_hold(&qp->base, &icq->base);
    if (srq)
        sndk_obj_hold(&qp->base, &srq->base);
    *ppNdkQp = &qp->base.pub.qp;
    return STATUS_SUCCESS;
}

NTSTATUS sndk_qp_create(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                        PVOID QPContext, ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                        ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                        ULONG InlineDataSize, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_QP **ppNdkQp)
{
    (void)CreateCompletion; /* creates complete inline */
    (void)RequestContext;
    struct qp_create_args q = {.pd = pNdkPd,
                               .receive_cq = pReceiveCq,
                               .initiator_cq = pInitiatorCq,
                               .context = QPContext,
                               .receive_depth = ReceiveQueueDepth,
                               .initiator_depth = InitiatorQueueDepth,
                               .receive_max_sge = MaxReceiveRequestSge,
                               .initiator_max_sge = MaxInitiatorRequestSge,
                               .inline_size = InlineDataSize};
    return qp_create_common(&q, ppNdkQp);
}

NTSTATUS sndk_qp_create_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                 ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                 NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                 NDK_QP **ppNdkQp)
{
    (void)CreateCompletion;
    (void)RequestContext;
    struct qp_create_args q = {.pd = pNdkPd,
                               .receive_cq = pReceiveCq,
                               .initiator_cq = pInitiatorCq,
                               .srq = pSrq,
                               .with_srq = true,
                               .context = QPContext,
                               .initiator_depth = InitiatorQueueDepth,
                               .initiator_max_sge = MaxInitiatorRequestSge,
                               .inline_size = InlineDataSize};
    return qp_create_common(&q, ppNdkQp);
}
