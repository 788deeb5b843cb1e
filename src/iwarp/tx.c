/* TX: initiator requests become FPDUs on the socket (design §3, docs/datapath.md).
 *
 * The posting thread transmits itself while the socket takes bytes: requests from sq_sent to
 * sq_tail are cut into FPDUs around the consumer's memory (no payload copy) and as many as fit
 * a batch (SNDK_TX_BATCH FPDUs, SNDK_TX_IOV iovecs) go out with one sendmsg — so a DEFER chain
 * ends in one system call. When the socket would block, the rest of the batch stays here,
 * EPOLLOUT is armed and the progress thread continues; postings meanwhile only queue. A request
 * retires (and completes) when its last byte has been handed to TCP: iWARP acknowledges no
 * untagged message, as in siw and iWARP hardware. Everything here runs under qp->tx_lock. */
#include <errno.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "iwarp/qp_io.h"
#include "util/log.h"

void sndk_tx_init(struct sndk_qp_io *io, bool crc, uint32_t max_fpdu)
{
    io->txcfg = (struct sndk_tx_cfg){.max_fpdu = max_fpdu, .crc = crc};
    io->msn_send = 1;
    io->msn_term = 1;
    io->nrec = io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = 0;
    io->msg_active = false;
}

void sndk_tx_update_events(struct sndk_qp_io *io)
{
    if (io->dead)
        return;
    uint32_t ev = (io->rx_stopped || io->rx_parked ? 0u : (uint32_t)EPOLLIN) |
                  (io->tx_blocked ? (uint32_t)EPOLLOUT : 0u);
    int rc = sndk_source_modify(&io->src, ev);
    if (rc < 0 && rc != -ENOENT)
        sndk_warn("tx", "QP %p: epoll modify: %d", (void *)io->qp, rc);
}

static struct sndk_sqe *slot(struct sndk_qp *qp, uint32_t idx)
{
    return &qp->sq[idx % qp->initiator_depth];
}

/* Gather the next batch of FPDUs. Stops before a request that failed its local checks: the
 * ones before it must be out (and retired) first so that completions stay in order. */
static void fill_batch(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    int nrec = 0, niov = 0;
    while (nrec < SNDK_TX_BATCH) {
        if (!io->msg_active) {
            if (qp->sq_sent == qp->sq_tail)
                break;
            struct sndk_sqe *e = slot(qp, qp->sq_sent);
            if (e->status != STATUS_SUCCESS)
                break;
            e->msn = io->msn_send++;
            /* Arguments were checked when posted; the builder cannot refuse them. */
            if (sndk_tx_send(&io->msg, &io->txcfg, e->msn, e->opcode, e->inv_stag, e->iov,
                             e->niov) < 0) {
                sndk_err("tx", "QP %p: internal: Send of %llu bytes refused by the encoder",
                         (void *)qp, (unsigned long long)e->bytes);
                e->status = STATUS_INTERNAL_ERROR;
                io->msn_send--;
                break;
            }
            io->msg_active = true;
        }
        int room = SNDK_TX_IOV - niov;
        if (room < 3)
            break;
        if (room > SNDK_TX_SEG_IOV)
            room = SNDK_TX_SEG_IOV;
        int n = sndk_tx_msg_next(&io->msg, &io->fp[nrec], io->iov + niov, room);
        if (n <= 0) { /* cannot happen with room >= 3 and an unfinished message */
            sndk_err("tx", "QP %p: internal: FPDU build failed (%d)", (void *)qp, n);
            break;
        }
        io->rec[nrec] = (struct sndk_tx_rec){io->fp[nrec].wire_len, io->msg.finished};
        nrec++;
        niov += n;
        if (io->msg.finished) {
            io->msg_active = false;
            qp->sq_sent++;
        }
    }
    io->nrec = nrec;
    io->rec_i = 0;
    io->rec_done = 0;
    io->iov_cur = io->iov;
    io->iov_left = niov;
}

/* n more bytes of the batch went out: retire the requests whose last FPDU is complete. */
static void consumed(struct sndk_qp *qp, size_t n)
{
    struct sndk_qp_io *io = qp->io;
    sndk_iov_advance(&io->iov_cur, &io->iov_left, n);
    while (n > 0 && io->rec_i < io->nrec) {
        struct sndk_tx_rec *r = &io->rec[io->rec_i];
        size_t left = r->wire_len - io->rec_done;
        if (n < left) {
            io->rec_done += (uint32_t)n;
            return;
        }
        n -= left;
        io->rec_done = 0;
        io->rec_i++;
        if (r->ends_msg)
            sndk_qp_retire_head(qp, STATUS_SUCCESS, 0);
    }
}

enum sndk_tx_result sndk_tx_push(struct sndk_qp *qp)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (io->dead)
        return SNDK_TX_IO_ERR;
    for (;;) {
        if (io->iov_left == 0) {
            fill_batch(qp);
            if (io->iov_left == 0)
                break;
        }
        struct msghdr mh = {.msg_iov = io->iov_cur,
                            .msg_iovlen = (size_t)(io->iov_left < IOV_MAX ? io->iov_left : IOV_MAX)};
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
            return SNDK_TX_IO_ERR;
        }
        consumed(qp, (size_t)w);
    }
    if (io->tx_blocked) {
        io->tx_blocked = false;
        sndk_tx_update_events(io);
    }
    if (qp->sq_sent != qp->sq_tail && slot(qp, qp->sq_sent)->status != STATUS_SUCCESS)
        return SNDK_TX_LOCAL_ERR;
    if (io->shut_req && !io->fin_sent) {
        /* sndk_qp_shutdown: everything posted before it is out; now our FIN. */
        shutdown(io->fd, SHUT_WR);
        io->fin_sent = true;
        sndk_debug("tx", "QP %p: FIN sent", (void *)qp);
    }
    return SNDK_TX_DRAINED;
}

void sndk_tx_terminate(struct sndk_qp *qp, const struct sndk_term *t)
{
    struct sndk_qp_io *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    if (io->dead)
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
