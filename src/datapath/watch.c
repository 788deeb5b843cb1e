/* What a connection's socket is watched for, by its progress thread's epoll and by the CQs it
 * feeds (a polling consumer's readiness sets, device/cq.h), from the facts of the moment: TX
 * blocked, the peer's FIN, parking, an injected stall, a Send held for a receive. Below the TX
 * and RX drivers and the hooks, which change those facts and call down here. */
#include "datapath/watch.h"

#include <errno.h>
#include <sys/epoll.h>

#include "util/log.h"

/* The events that tell a blocked sender there is room: EPOLLOUT, and for a stream whose fd
 * cannot report it (shared memory: an epoll set) what it reports instead — watched even when
 * the receive side is not, or the sender would wait for a receive that never comes. */
static uint32_t room_events(const struct sndk_conn *io)
{
    /* blocked, or waiting for the stream to settle lent bytes (tx.c), which it says as room */
    if ((!io->tx_blocked && io->uns_n == 0) || sndk_conn_stalled(io, SNDK_FDIR_TX))
        return 0;
    return (uint32_t)EPOLLOUT | io->stream.ops->room_events;
}

/* What an empty poll of either CQ should act on: receiving while the receive side may read
 * (parked or not: parking hands the receiving to the polling consumer), sending while the
 * socket is full. A connection that can do neither leaves the CQs' readiness sets. A Send held
 * for a receive (receiver not ready) leaves the peer's bytes in the socket on purpose: watched,
 * it would be reported by every empty poll, each a pass that can do nothing; the post that
 * brings the receive resumes it (rnr_work), and the resume watches again. */
static void watch_cqs(struct sndk_conn *io)
{
    struct sndk_qp *qp = io->qp;
    sndk_assert_held(&qp->tx_lock);
    bool rx_off = io->peer_fin || sndk_conn_stalled(io, SNDK_FDIR_RX) || sndk_rnr_phase(io) == SNDK_RNR_WAITING;
    uint32_t ev = (rx_off ? 0u : (uint32_t)EPOLLIN) | room_events(io);
    sndk_cq_conn_watch(qp->rcq, &io->rconn, ev);
    if (qp->icq != qp->rcq)
        sndk_cq_conn_watch(qp->icq, &io->iconn, ev);
}

void sndk_conn_update_events(struct sndk_conn *io)
{
    if (sndk_conn_ended(io))
        return;
    bool rx_held = io->peer_fin || sndk_conn_stalled(io, SNDK_FDIR_RX) ||
                   sndk_rnr_phase(io) == SNDK_RNR_WAITING; /* receiver not ready: backpressure */
    bool parked = io->rx_park == SNDK_RX_PARKED;
    bool rx_off = rx_held || parked;
    uint32_t room = room_events(io);
    uint32_t ev = (rx_off ? 0u : (uint32_t)EPOLLIN) | room;
    /* Watched again: a stream that let a polling consumer's reads skip readiness (shm) must
     * report the bytes already there, and ask for the next ones, before the thread sleeps. */
    if (!atomic_exchange_explicit(&io->rx_watched, !rx_off, memory_order_relaxed) && !rx_off)
        sndk_stream_arm(&io->stream);
    /* Parked, and nothing else to watch: the consumer's reads are the only ones, and on a
     * stream whose reads see every end by themselves the socket leaves the thread's epoll
     * rather than stay in it watched for nothing (engine.h, sndk_source_quiet). Held for
     * another reason (a stall, a receiver not ready), nobody reads: the thread keeps watching
     * for a hang-up. */
    bool quiet = parked && !rx_held && room == 0 && io->stream.ops->parked_quiet;
    int rc = quiet ? sndk_source_quiet(&io->src) : sndk_source_modify(&io->src, ev);
    if (rc < 0 && rc != -ENOENT)
        sndk_warn("tx", "QP %p: epoll %s: %d", (void *)io->qp, quiet ? "quiet" : "modify", rc);
    watch_cqs(io);
}

void sndk_conn_stall(struct sndk_qp *qp, enum sndk_fault_dir dir, uint32_t ms)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    struct sndk_timer *t = dir == SNDK_FDIR_TX ? &io->tx_stall_timer : &io->rx_stall_timer;
    if (sndk_timer_pending(t))
        return; /* one stall at a time per direction */
    if (sndk_timer_arm_on(io->engine, io->thread, t, (uint64_t)ms * 1000u))
        sndk_obj_get(&qp->base); /* the pending timer's (engine.h, "References") */
}

void sndk_conn_trim_later(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (!sndk_timer_pending(&io->trim_timer) && !sndk_conn_stopped(io) &&
        sndk_timer_arm_on(io->engine, io->thread, &io->trim_timer,
                          (uint64_t)SNDK_CONN_TRIM_MS * 1000u))
        sndk_obj_get(&qp->base); /* the pending timer's (engine.h, "References") */
}
