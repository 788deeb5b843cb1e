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

#include "datapath/dp_seams.h"
#include "datapath/tx.h"
#include "datapath/rx.h"
#include "datapath/place.h"
#include "datapath/rnr.h"
#include "datapath/phase.h"
#include "datapath/watch.h"
#include "verify/verify.h"
#include "util/log.h"

/* Payload still due in the current segment at which a direct read pays off. */
#define RX_DIRECT_MIN 2048u

void sndk_rx_io_init(struct sndk_conn *io, bool crc)
{
    struct sndk_rx_config cfg = {.crc = crc};
    sndk_rx_init(&io->rx, &cfg, &sndk_place_ops, io->qp);
    io->stage_len = io->stage_pos = 0;
    io->place.cur_active = false;
    io->place.cur_err_status = 0;
    io->place.cur_err_code = 0;
}

/* ---------------------------------------------------------------- the pass */

/* Hand staged bytes to the parser. */
static int feed_stage(struct sndk_conn *io)
{
    while (io->stage_pos < io->stage_len) {
        const uint8_t *at = io->stage + io->stage_pos;
        size_t left = io->stage_len - io->stage_pos, used = 0;
        int rc = 0;
        /* A whole FPDU staged at a boundary is parsed in one step: the same checks, offers
         * and callbacks, without want/advance's three rounds (40-75 ns of a 64 B message's
         * 580 on one core; docs/datapath.md). The hooks look at each FPDU between rounds, so
         * with them attached every FPDU goes round by round. */
        if (!SNDK_DP_HOOKED(io))
            rc = sndk_rx_take_fpdu(&io->rx, at, left, &used);
        if (used == 0 && rc == 0)
            rc = sndk_rx_feed_round(&io->rx, at, left, &used);
        io->stage_pos += (uint32_t)used;
        if (rc != 0)
            return rc; /* a fault, the peer's Terminate, a held Send */
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
        sndk_rnr_begin(qp);
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
        if (!sndk_rnr_try_resume(qp, "a receive is there"))
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

/* The stream failed under a read (-errno): the connection ends as on a reset. */
static enum sndk_rx_result read_failed(struct sndk_qp *qp, int err, struct sndk_fail *fail)
{
    sndk_debug("rx", "QP %p: receive: errno %d", (void *)qp, -err);
    sndk_fail_reset(fail);
    return SNDK_RXR_FAIL;
}

/* Bytes that lie in memory already (shm's ring, stream.h in_place): a whole FPDU there is
 * parsed where it lies, not copied into the staging buffer first. 1: one was taken, look
 * again; 0: read the usual way; -1: the pass ends with *r (the ring empty to a poll-only
 * reader, a fault, the peer's Terminate, a held Send, a failed stream). */
static int pass_in_place(struct sndk_qp *qp, struct sndk_fail *fail, enum sndk_rx_result *r)
{
    struct sndk_conn *io = qp->io;
    size_t avail, took;
    const void *at = sndk_stream_in_place(&io->stream, &avail);
    if (!at) {
        if (avail != 0)
            return 0;
        io->rx_emptied = true; /* as a read's -EAGAIN */
        *r = SNDK_RXR_OK;
        return -1;
    }
    int rc = sndk_rx_take_fpdu(&io->rx, at, avail, &took);
    if (took) {
        /* counted as a read's bytes are */
        sndk_seam_rx_read(qp, &(struct iovec){(void *)(uintptr_t)at, took}, 1, took);
        int t = sndk_stream_take_in_place(&io->stream, took);
        if (t < 0 && rc >= 0) {
            *r = read_failed(qp, t, fail);
            return -1;
        }
    }
    if (rc != 0) {
        *r = rx_stop(qp, rc, fail);
        return -1;
    }
    return took != 0;
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
        if (!SNDK_DP_HOOKED(io) && !go_direct(&io->rx)) {
            /* the hooks see reads: with them every byte is read */
            enum sndk_rx_result r;
            int in_place = pass_in_place(qp, fail, &r);
            if (in_place < 0)
                return r;
            if (in_place > 0)
                continue;
        }
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
        return read_failed(qp, (int)got, fail);
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
