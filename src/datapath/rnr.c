/* Receiver not ready (docs/datapath.md): a peer's Send found no receive posted. Instead of
 * ending the connection at once, the parser holds the Send, RX stops reading (TCP pushes back
 * on the sender) and the connection waits up to RnrWaitMs for a receive: posting one (on the
 * QP's own queue, or on the SRQ, whose waiter list wakes us) resumes it; the bound's expiry
 * raises the Terminate the Send would have raised at once. The phase (receiving, waiting,
 * expired) is written holding rx_lock and tx_lock. Called by the placement (place.c: may it
 * wait?), the pass (rx.c: begin, resume) and the connection's timers and work (conn.c). */
#include "device/srq.h"
#include "datapath/rnr.h"
#include "datapath/phase.h"
#include "datapath/watch.h"
#include "verify/verify.h"
#include "util/log.h"

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
bool sndk_rnr_may_wait(struct sndk_qp *qp)
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

void sndk_rnr_kick(struct sndk_qp *qp)
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
void sndk_rnr_begin(struct sndk_qp *qp)
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
    if (qp->srq)
        sndk_srq_rnr_wait(qp->srq, &io->rnr_waiter);
    /* A receive posted between take_receive and the wait (or the SRQ's listing) kicked
     * nobody: look again. The fence pairs with the post's (core/qp.c qp_receive): the post
     * sees WAITING and kicks, or this kick's pass sees the receive. */
    atomic_thread_fence(memory_order_seq_cst);
    sndk_rnr_kick(qp);
    sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_RNR_WAITS);
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_report(&qp->base, SoftNdkVerifyNoReceivePosted, NULL,
                           "the peer's Send (MSN %u) found the %s empty; it waits up to %u ms "
                           "for a receive (RnrWaitMs), then the connection is terminated (DDP "
                           "untagged, code 2)",
                           io->rx.seg.msn, qp->srq ? "SRQ" : "receive queue", ms);
}

/* Waiting: is the receive there now? Then the held Send goes on. rx_lock held. */
bool sndk_rnr_try_resume(struct sndk_qp *qp, const char *why)
{
    struct sndk_conn *io = qp->io;
    if (sndk_rnr_phase(io) != SNDK_RNR_WAITING || io->rx.state != SNDK_RX_HELD)
        return false;
    int rc = sndk_rx_resume(&io->rx);
    if (rc == SNDK_RX_HELD_RC)
        return false;
    /* resumed, or a fault (the receive's memory was bad): the pass acts on the parser's state */
    if (qp->srq)
        sndk_srq_rnr_done(qp->srq, &io->rnr_waiter);
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

bool sndk_rnr_resume(struct sndk_qp *qp)
{
    sndk_assert_held(&qp->rx_lock);
    return sndk_rnr_try_resume(qp, "a receive was posted");
}

void sndk_rnr_expire(struct sndk_qp *qp, const char *why)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->rx_lock);
    if (sndk_rnr_try_resume(qp, "a receive came before the bound"))
        return;
    if (qp->srq)
        sndk_srq_rnr_done(qp->srq, &io->rnr_waiter);
    sndk_mutex_lock(&qp->tx_lock);
    if (!sndk_conn_stopped(io) && sndk_rnr_phase(io) == SNDK_RNR_WAITING)
        rnr_set(qp, SNDK_RNR_EXPIRED, why);
    sndk_mutex_unlock(&qp->tx_lock);
}
