/* The hook table of a connection and the dispatch of its seams (dp_seams.h): each seam asks
 * the attached hooks in the order they were attached. Only reached with hooks attached. */
#include "datapath/dp_seams.h"

#include <stddef.h>

/* Attach order: the faults first (they decide whether an FPDU goes at all), capture after them
 * (it records what went), the source check last. */
static const struct sndk_dp_hook *const concerns[] = {
    &sndk_dp_hook_faults,
    &sndk_dp_hook_pcap,
    &sndk_dp_hook_source,
};
_Static_assert(sizeof concerns / sizeof concerns[0] <= SNDK_DP_HOOKS_MAX,
               "a slot per concern in struct sndk_dp_hooks");

void sndk_dp_hooks_attach(struct sndk_conn *io, const struct sndk_link_params *p)
{
    io->hooks.n = 0;
    for (size_t i = 0; i < sizeof concerns / sizeof concerns[0]; i++)
        if (concerns[i]->attach(io, p))
            io->hooks.ops[io->hooks.n++] = concerns[i]->ops;
}

void sndk_dp_hooks_detach(struct sndk_conn *io)
{
    for (size_t i = 0; i < sizeof concerns / sizeof concerns[0]; i++)
        concerns[i]->detach(io);
    io->hooks.n = 0;
}

bool sndk_dp_tx_fpdu_next(struct sndk_qp *qp, bool *corrupt)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_fpdu_next && op->tx_fpdu_next(qp, corrupt))
            return true;
    }
    return false;
}

void sndk_dp_tx_fpdu_cut(struct sndk_qp *qp, int rec, int first, int n, bool corrupt)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_fpdu_cut)
            op->tx_fpdu_cut(qp, rec, first, n, corrupt);
    }
}

void sndk_dp_tx_batch_built(struct sndk_qp *qp, int niov)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_batch_built)
            op->tx_batch_built(qp, niov);
    }
}

void sndk_dp_tx_fpdu_out(struct sndk_qp *qp, const struct sndk_tx_rec *r)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_fpdu_out)
            op->tx_fpdu_out(qp, r);
    }
}

bool sndk_dp_tx_holding(struct sndk_qp *qp)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_holding && op->tx_holding(qp))
            return true;
    }
    return false;
}

enum sndk_tx_result sndk_dp_tx_stopped(struct sndk_qp *qp)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_stopped)
            return op->tx_stopped(qp);
    }
    return SNDK_TX_DRAINED; /* nothing stops a batch without a hook that can */
}

enum sndk_seam_verdict sndk_dp_tx_write_cap(struct sndk_qp *qp, uint64_t *cap,
                                            enum sndk_tx_result *res)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_write_cap) {
            enum sndk_seam_verdict v = op->tx_write_cap(qp, cap, res);
            if (v != SNDK_SEAM_GO_ON)
                return v;
        }
    }
    return SNDK_SEAM_GO_ON;
}

void sndk_dp_tx_wrote(struct sndk_qp *qp, const struct iovec *iov, int n, size_t w, bool term)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_wrote)
            op->tx_wrote(qp, iov, n, w, term);
    }
}

void sndk_dp_tx_fin(struct sndk_qp *qp)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->tx_fin)
            op->tx_fin(qp);
    }
}

enum sndk_seam_verdict sndk_dp_rx_fpdu_next(struct sndk_qp *qp, struct sndk_fail *fail)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->rx_fpdu_next) {
            enum sndk_seam_verdict v = op->rx_fpdu_next(qp, fail);
            if (v != SNDK_SEAM_GO_ON)
                return v;
        }
    }
    return SNDK_SEAM_GO_ON;
}

bool sndk_dp_rx_fpdu_ended(struct sndk_qp *qp)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->rx_fpdu_ended && op->rx_fpdu_ended(qp))
            return true;
    }
    return false;
}

enum sndk_seam_verdict sndk_dp_rx_read_cap(struct sndk_qp *qp, struct sndk_fail *fail, size_t *cap)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->rx_read_cap) {
            enum sndk_seam_verdict v = op->rx_read_cap(qp, fail, cap);
            if (v != SNDK_SEAM_GO_ON)
                return v;
        }
    }
    return SNDK_SEAM_GO_ON;
}

void sndk_dp_rx_read(struct sndk_qp *qp, const struct iovec *iov, int n, size_t got)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->rx_read)
            op->rx_read(qp, iov, n, got);
    }
}

void sndk_dp_rx_fin(struct sndk_qp *qp)
{
    for (unsigned i = 0; i < qp->io->hooks.n; i++) {
        const struct sndk_dp_hook_ops *op = qp->io->hooks.ops[i];
        if (op->rx_fin)
            op->rx_fin(qp);
    }
}
