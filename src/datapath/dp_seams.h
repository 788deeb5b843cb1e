/* The named seams of the data path, where tx.c, rx.c and qp.c hand over to what is not the
 * protocol: fault injection (dp_hook_faults.c), packet capture (dp_hook_pcap.c) and the source
 * check (dp_hook_source.c) attach to them as hooks; the connection's own counters and the
 * trace are kept by the seams themselves (they are always on, a store or a flag test each).
 *
 * A seam is an inline function: its always-on part, then one branch on the connection's hook
 * count, predictable and not taken when nothing is attached; the attached hooks run in the
 * order they were attached (sndk_dp_hooks_attach). docs/datapath.md, "Hooks". */
#ifndef SOFTNDK_DATAPATH_DP_SEAMS_H
#define SOFTNDK_DATAPATH_DP_SEAMS_H

#include <stdint.h>
#include <sys/uio.h>

#include "datapath/conn_state.h"

/* What a seam that may act on the stream says. */
enum sndk_seam_verdict {
    SNDK_SEAM_GO_ON, /* nothing happens here */
    SNDK_SEAM_AGAIN, /* TX: a hook acted without stopping the stream: ask again */
    SNDK_SEAM_STOP,  /* stop here for now (a stall; TX: the push returns the result given) */
    SNDK_SEAM_FAIL,  /* RX: the connection ends for the reason in *fail */
};

/* One hook: every member may be NULL (the seam is not of its concern). All run with the
 * locks of the seam's side held (TX: tx_lock; RX: rx_lock). */
struct sndk_dp_hook_ops {
    const char *name;
    /* TX, before the next FPDU is cut. True: the batch stops in front of it and tx_stopped
     * acts once the batch is out. *corrupt: cut it with a wrong CRC. */
    bool (*tx_fpdu_next)(struct sndk_qp *qp, bool *corrupt);
    /* TX: FPDU record `rec` is in the batch as iov[first .. first + n). */
    void (*tx_fpdu_cut)(struct sndk_qp *qp, int rec, int first, int n, bool corrupt);
    /* TX: the batch of niov iovecs is complete (it goes out from now on). */
    void (*tx_batch_built)(struct sndk_qp *qp, int niov);
    /* TX: the FPDU of record r is wholly in TCP. */
    void (*tx_fpdu_out)(struct sndk_qp *qp, const struct sndk_tx_rec *r);
    /* TX: does a hook hold the stream in front of the next FPDU (tx_fpdu_next said so)? */
    bool (*tx_holding)(struct sndk_qp *qp);
    /* TX: a hook stopped the batch and it is out: what the push returns. */
    enum sndk_tx_result (*tx_stopped)(struct sndk_qp *qp);
    /* TX, before a write: *cap = how many bytes may go (left as it is: any). AGAIN, or STOP
     * with the push's result in *res. */
    enum sndk_seam_verdict (*tx_write_cap)(struct sndk_qp *qp, uint64_t *cap,
                                           enum sndk_tx_result *res);
    /* TX: w bytes of iov[0..n) are in TCP; term: a Terminate written on its own. */
    void (*tx_wrote)(struct sndk_qp *qp, const struct iovec *iov, int n, size_t w, bool term);
    /* TX: our FIN went out. */
    void (*tx_fin)(struct sndk_qp *qp);
    /* RX, at an FPDU boundary with the next FPDU's bytes staged: GO_ON, STOP or FAIL. */
    enum sndk_seam_verdict (*rx_fpdu_next)(struct sndk_qp *qp, struct sndk_fail *fail);
    /* RX: an FPDU ended in the staged bytes: true stops feeding the parser there, so that
     * rx_fpdu_next sees the next one first. */
    bool (*rx_fpdu_ended)(struct sndk_qp *qp);
    /* RX, before a read: *cap = how many bytes it may take (left as it is: any). */
    enum sndk_seam_verdict (*rx_read_cap)(struct sndk_qp *qp, struct sndk_fail *fail, size_t *cap);
    /* RX: got bytes were read into iov[0..n). */
    void (*rx_read)(struct sndk_qp *qp, const struct iovec *iov, int n, size_t got);
    /* RX: the peer's FIN was read. */
    void (*rx_fin)(struct sndk_qp *qp);
};

/* The hooks of each concern; attach() says whether it serves this connection. */
struct sndk_dp_hook {
    const struct sndk_dp_hook_ops *ops;
    /* Set up its state for this connection; false: not attached (off, or no memory). */
    bool (*attach)(struct sndk_conn *io, const struct sndk_link_params *p);
    void (*detach)(struct sndk_conn *io); /* free what attach made; may run unattached */
};
extern const struct sndk_dp_hook sndk_dp_hook_faults, sndk_dp_hook_pcap, sndk_dp_hook_source;

/* At sndk_qp_attach, before the connection's first byte: attach every concern that serves it
 * (the options, the adapter's fault rules, capture on). */
void sndk_dp_hooks_attach(struct sndk_conn *io, const struct sndk_link_params *p);
/* At the QP's destroy: every hook frees its state. */
void sndk_dp_hooks_detach(struct sndk_conn *io);

/* The dispatch of the seams below (dp_hooks.c): only called with hooks attached. */
bool sndk_dp_tx_fpdu_next(struct sndk_qp *qp, bool *corrupt);
void sndk_dp_tx_fpdu_cut(struct sndk_qp *qp, int rec, int first, int n, bool corrupt);
void sndk_dp_tx_batch_built(struct sndk_qp *qp, int niov);
void sndk_dp_tx_fpdu_out(struct sndk_qp *qp, const struct sndk_tx_rec *r);
bool sndk_dp_tx_holding(struct sndk_qp *qp);
enum sndk_tx_result sndk_dp_tx_stopped(struct sndk_qp *qp);
enum sndk_seam_verdict sndk_dp_tx_write_cap(struct sndk_qp *qp, uint64_t *cap,
                                            enum sndk_tx_result *res);
void sndk_dp_tx_wrote(struct sndk_qp *qp, const struct iovec *iov, int n, size_t w, bool term);
void sndk_dp_tx_fin(struct sndk_qp *qp);
enum sndk_seam_verdict sndk_dp_rx_fpdu_next(struct sndk_qp *qp, struct sndk_fail *fail);
bool sndk_dp_rx_fpdu_ended(struct sndk_qp *qp);
enum sndk_seam_verdict sndk_dp_rx_read_cap(struct sndk_qp *qp, struct sndk_fail *fail, size_t *cap);
void sndk_dp_rx_read(struct sndk_qp *qp, const struct iovec *iov, int n, size_t got);
void sndk_dp_rx_fin(struct sndk_qp *qp);

#define SNDK_DP_HOOKED(io) __builtin_expect((io)->hooks.n != 0, 0)

/* ---------------------------------------------------------------- TX seams (tx_lock) */

/* Before the next FPDU is cut: true stops the batch in front of it. */
static inline bool sndk_seam_tx_fpdu_next(struct sndk_qp *qp, bool *corrupt)
{
    return SNDK_DP_HOOKED(qp->io) && sndk_dp_tx_fpdu_next(qp, corrupt);
}
/* FPDU record rec was cut into iov[first .. first + n). */
static inline void sndk_seam_tx_fpdu_cut(struct sndk_qp *qp, int rec, int first, int n,
                                         bool corrupt)
{
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_tx_fpdu_cut(qp, rec, first, n, corrupt);
}
/* The batch is complete. */
static inline void sndk_seam_tx_batch_built(struct sndk_qp *qp, int niov)
{
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_tx_batch_built(qp, niov);
}
/* The FPDU of record r is wholly in TCP. */
static inline void sndk_seam_tx_fpdu_out(struct sndk_qp *qp, const struct sndk_tx_rec *r)
{
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_tx_fpdu_out(qp, r);
}
/* n more FPDUs of the batch are in TCP. */
static inline void sndk_seam_tx_fpdus_out(struct sndk_qp *qp, uint64_t n)
{
    if (qp->io->crec)
        sndk_cc_add(qp->io->crec, SNDK_CC_TX_FPDUS, n);
}
/* Does a hook hold the stream in front of the next FPDU? Then no more is cut. */
static inline bool sndk_seam_tx_holding(struct sndk_qp *qp)
{
    return SNDK_DP_HOOKED(qp->io) && sndk_dp_tx_holding(qp);
}
/* A hook stopped the batch (sndk_seam_tx_holding) and it is out: what the push returns. */
static inline enum sndk_tx_result sndk_seam_tx_stopped(struct sndk_qp *qp)
{
    return sndk_dp_tx_stopped(qp);
}
/* Before a write: GO_ON with *cap (UINT64_MAX: any), AGAIN, or STOP with *res. */
static inline enum sndk_seam_verdict sndk_seam_tx_write_cap(struct sndk_qp *qp, uint64_t *cap,
                                                            enum sndk_tx_result *res)
{
    *cap = UINT64_MAX;
    return SNDK_DP_HOOKED(qp->io) ? sndk_dp_tx_write_cap(qp, cap, res) : SNDK_SEAM_GO_ON;
}
/* w bytes of iov[0..n) of the FPDU stream are in TCP. */
static inline void sndk_seam_tx_wrote(struct sndk_qp *qp, const struct iovec *iov, int n, size_t w)
{
    if (qp->io->crec)
        sndk_cc_add(qp->io->crec, SNDK_CC_TX_OCTETS, (uint64_t)w);
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_tx_wrote(qp, iov, n, w, false);
}
/* A Terminate of wire_len bytes, w of them written from iov[0..n) (w > 0). */
static inline void sndk_seam_tx_term_sent(struct sndk_qp *qp, const struct sndk_term *t,
                                          const struct iovec *iov, int n, size_t w, size_t wire_len)
{
    struct sndk_conn *io = qp->io;
    if (io->crec) {
        sndk_cc_add(io->crec, SNDK_CC_TX_OCTETS, (uint64_t)w);
        if (w == wire_len)
            sndk_cc_add(io->crec, SNDK_CC_TX_FPDUS, 1);
    }
    if (SNDK_DP_HOOKED(io))
        sndk_dp_tx_wrote(qp, iov, n, w, true);
    sndk_counters_term(&qp->base.adapter->ctrs, true, t->layer, t->etype, t->code);
    SNDK_TRACE("term.sent", "QP", qp, "\"layer\":%u,\"etype\":%u,\"code\":%u", (unsigned)t->layer,
               (unsigned)t->etype, (unsigned)t->code);
}
/* Our FIN went out. */
static inline void sndk_seam_tx_fin(struct sndk_qp *qp)
{
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_tx_fin(qp);
}

/* ---------------------------------------------------------------- RX seams (rx_lock) */

/* At an FPDU boundary, the next FPDU's bytes staged. */
static inline enum sndk_seam_verdict sndk_seam_rx_fpdu_next(struct sndk_qp *qp,
                                                            struct sndk_fail *fail)
{
    return SNDK_DP_HOOKED(qp->io) ? sndk_dp_rx_fpdu_next(qp, fail) : SNDK_SEAM_GO_ON;
}
/* An FPDU ended in the staged bytes: stop feeding there? */
static inline bool sndk_seam_rx_fpdu_ended(struct sndk_conn *io)
{
    return SNDK_DP_HOOKED(io) && sndk_dp_rx_fpdu_ended(io->qp);
}
/* Before a read: GO_ON with *cap (SIZE_MAX: any), STOP or FAIL. */
static inline enum sndk_seam_verdict sndk_seam_rx_read_cap(struct sndk_qp *qp,
                                                           struct sndk_fail *fail, size_t *cap)
{
    *cap = SIZE_MAX;
    return SNDK_DP_HOOKED(qp->io) ? sndk_dp_rx_read_cap(qp, fail, cap) : SNDK_SEAM_GO_ON;
}
/* got > 0 bytes were read into iov[0..n). */
static inline void sndk_seam_rx_read(struct sndk_qp *qp, const struct iovec *iov, int n, size_t got)
{
    if (qp->io->crec)
        sndk_cc_add(qp->io->crec, SNDK_CC_RX_OCTETS, (uint64_t)got);
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_rx_read(qp, iov, n, got);
}
/* The pass is over: the FPDUs it completed go to the connection's counters. */
static inline void sndk_seam_rx_fpdus(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    if (io->crec && io->rx.fpdus != io->rx_fpdus_seen) {
        sndk_cc_add(io->crec, SNDK_CC_RX_FPDUS, io->rx.fpdus - io->rx_fpdus_seen);
        io->rx_fpdus_seen = io->rx.fpdus;
    }
}
/* The peer's FIN was read. */
static inline void sndk_seam_rx_fin(struct sndk_qp *qp)
{
    if (SNDK_DP_HOOKED(qp->io))
        sndk_dp_rx_fin(qp);
}
/* The peer's Terminate arrived. */
static inline void sndk_seam_rx_term_received(struct sndk_qp *qp, const struct sndk_term *t)
{
    sndk_counters_term(&qp->base.adapter->ctrs, false, t->layer, t->etype, t->code);
    SNDK_TRACE("term.received", "QP", qp, "\"layer\":%u,\"etype\":%u,\"code\":%u",
               (unsigned)t->layer, (unsigned)t->etype, (unsigned)t->code);
}

/* ---------------------------------------------------------------- QP seams (tx_lock) */

/* A request was queued. */
static inline void sndk_seam_sq_posted(struct sndk_conn *io)
{
    if (io->crec)
        sndk_cc_add(io->crec, SNDK_CC_SQ_POSTED, 1);
}
/* The request at the head retired with st. */
static inline void sndk_seam_sq_retired(struct sndk_qp *qp, NTSTATUS st)
{
    if (qp->io && qp->io->crec) {
        sndk_cc_add(qp->io->crec, SNDK_CC_SQ_RETIRED, 1);
        if (st == STATUS_CANCELLED)
            sndk_ctr_inc(&qp->base.adapter->ctrs, SNDK_CTR_FLUSHED);
    }
}

#endif
