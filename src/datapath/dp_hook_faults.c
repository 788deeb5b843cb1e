/* Fault injection (docs/faults.md) as a data path hook: the connection's rules (fc) look at
 * every FPDU before it is cut (TX) or parsed (RX) and at every byte count, and act there:
 * corrupt a CRC, stall a direction, drop the connection, send a Terminate. Attached when the
 * adapter has rules for this connection. */
#include "datapath/dp_seams.h"
#include "datapath/phase.h"
#include "datapath/watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The hook's state for one connection: its rules, and the fault a rule decided on the TX side
 * that acts once the batch in front of it is out. */
struct sndk_fault_hook {
    struct sndk_fault_conn *fc;      /* the connection's rules and counts (faults/faults.h) */
    enum sndk_fault_action tx_fault; /* before the next FPDU (fill_batch stops in front of it) */
    uint32_t tx_fault_ms;
    const struct sndk_fault_rule *tx_fault_rule;
    uint64_t rx_fault_checked;       /* rx.fpdus when the rules were last asked */
};

/* ---------------------------------------------------------------- TX */

/* The FPDU about to be cut: does a rule act on it? True: the batch stops in front of it and
 * io->fault_hook->tx_fault says what happens once the batch is out. *corrupt: cut it with a wrong CRC. */
static bool tx_fpdu_next(struct sndk_qp *qp, bool *corrupt)
{
    struct sndk_conn *io = qp->io;
    uint32_t ms = 0;
    const struct sndk_fault_rule *r = NULL;
    enum sndk_fault_action a = sndk_fault_fpdu(io->fault_hook->fc, SNDK_FDIR_TX, io->qp, &ms, &r);
    if (a == SNDK_FACT_CRC)
        *corrupt = true;
    if (a == SNDK_FACT_NONE || a == SNDK_FACT_CRC)
        return false;
    io->fault_hook->tx_fault = a;
    io->fault_hook->tx_fault_ms = ms;
    io->fault_hook->tx_fault_rule = r;
    return true;
}

/* A rule stopped the batch in front of an FPDU: nothing more is cut until it acts. */
static bool tx_holding(struct sndk_qp *qp)
{
    return qp->io->fault_hook->tx_fault != SNDK_FACT_NONE;
}

/* One more FPDU is in the batch (for the rules' counts). */
static void tx_fpdu_cut(struct sndk_qp *qp, int rec, int first, int n, bool corrupt)
{
    (void)first;
    (void)n;
    struct sndk_conn *io = qp->io;
    io->fault_hook->fc->d[SNDK_FDIR_TX].fpdus++;
    if (corrupt) /* the CRC is the trailer's last 4 bytes, sent from here */
        io->fp[rec].trailer[io->fp[rec].trailer_len - 1] ^= 0xffu;
}

/* An injected fault acts where the stream stands now (everything before it is out). */
static enum sndk_tx_result tx_act(struct sndk_qp *qp, enum sndk_fault_action a, uint32_t ms,
                                  const struct sndk_fault_rule *r)
{
    struct sndk_conn *io = qp->io;
    io->fault_hook->tx_fault = SNDK_FACT_NONE;
    if (a == SNDK_FACT_STALL) {
        sndk_conn_stall(qp, SNDK_FDIR_TX, ms); /* stalled while it is pending */
        io->tx_blocked = true; /* postings queue meanwhile */
        sndk_conn_update_events(io);
        return SNDK_TX_BLOCKED;
    }
    struct sndk_fail end = {0}, *f = &end;
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
    sndk_conn_end_record(io, SNDK_END_TX, f);
    return SNDK_TX_LOCAL_ERR;
}

static enum sndk_tx_result tx_stopped(struct sndk_qp *qp)
{
    struct sndk_conn *io = qp->io;
    return tx_act(qp, io->fault_hook->tx_fault, io->fault_hook->tx_fault_ms, io->fault_hook->tx_fault_rule);
}

/* An after_bytes rule: the stream stops exactly at its byte. */
static enum sndk_seam_verdict tx_write_cap(struct sndk_qp *qp, uint64_t *cap,
                                           enum sndk_tx_result *res)
{
    struct sndk_conn *io = qp->io;
    struct sndk_fault_dirstate *d = &io->fault_hook->fc->d[SNDK_FDIR_TX];
    if (d->byte_mark == UINT64_MAX)
        return SNDK_SEAM_GO_ON;
    if (d->byte_mark == d->bytes) {
        uint32_t ms = 0;
        enum sndk_fault_action a = sndk_fault_bytes(io->fault_hook->fc, SNDK_FDIR_TX, qp, &ms);
        if (a == SNDK_FACT_NONE)
            return SNDK_SEAM_AGAIN;
        *res = tx_act(qp, a, ms, NULL);
        return SNDK_SEAM_STOP;
    }
    *cap = d->byte_mark - d->bytes;
    return SNDK_SEAM_GO_ON;
}

static void tx_wrote(struct sndk_qp *qp, const struct iovec *iov, int n, size_t w, bool term)
{
    (void)iov;
    (void)n;
    if (!term) /* a Terminate is no byte of the stream the rules count */
        qp->io->fault_hook->fc->d[SNDK_FDIR_TX].bytes += (uint64_t)w;
}

/* ---------------------------------------------------------------- RX */

/* An injected fault acts on the receive stream here. */
static enum sndk_seam_verdict rx_act(struct sndk_qp *qp, enum sndk_fault_action a, uint32_t ms,
                                     struct sndk_fail *fail)
{
    struct sndk_conn *io = qp->io;
    switch (a) {
    case SNDK_FACT_CRC:
        io->rx.fault_crc_at = io->rx.fpdus + 1;
        return SNDK_SEAM_GO_ON;
    case SNDK_FACT_STALL:
        sndk_mutex_lock(&qp->tx_lock);
        if (!sndk_conn_stopped(io)) {
            sndk_conn_stall(qp, SNDK_FDIR_RX, ms); /* stalled while it is pending */
            sndk_conn_update_events(io);
        }
        sndk_mutex_unlock(&qp->tx_lock);
        return SNDK_SEAM_STOP;
    case SNDK_FACT_DROP:
    case SNDK_FACT_TERMINATE: /* not offered for rx; treated as a drop */
        sndk_fail_reset(fail);
        return SNDK_SEAM_FAIL;
    default:
        return SNDK_SEAM_GO_ON;
    }
}

/* At an FPDU boundary: do the rules act on the next FPDU? */
static enum sndk_seam_verdict rx_fpdu_next(struct sndk_qp *qp, struct sndk_fail *fail)
{
    struct sndk_conn *io = qp->io;
    if (io->rx.fpdus == io->fault_hook->rx_fault_checked)
        return SNDK_SEAM_GO_ON;
    io->fault_hook->rx_fault_checked = io->rx.fpdus;
    io->fault_hook->fc->d[SNDK_FDIR_RX].fpdus = io->rx.fpdus;
    uint32_t ms = 0;
    enum sndk_fault_action a = sndk_fault_fpdu(io->fault_hook->fc, SNDK_FDIR_RX, qp, &ms, NULL);
    return rx_act(qp, a, ms, fail);
}

/* An FPDU ended in the staged bytes: the rules look at the next one first. */
static bool rx_fpdu_ended(struct sndk_qp *qp)
{
    return qp->io->rx.fpdus != qp->io->fault_hook->rx_fault_checked;
}

/* How many bytes the next read may take (an after_bytes rule stops the stream at its byte);
 * 0 when nothing beyond the mark arrived yet, or a rule acted right here. */
static enum sndk_seam_verdict rx_read_cap(struct sndk_qp *qp, struct sndk_fail *fail, size_t *cap)
{
    struct sndk_conn *io = qp->io;
    struct sndk_fault_dirstate *d = &io->fault_hook->fc->d[SNDK_FDIR_RX];
    while (d->byte_mark != UINT64_MAX && d->byte_mark == d->bytes) {
        if (sndk_stream_peek(&io->stream) == 0) {
            *cap = 0; /* acts when the byte after the mark arrives (or the end shows) */
            return SNDK_SEAM_GO_ON;
        }
        uint32_t ms = 0;
        enum sndk_fault_action a = sndk_fault_bytes(io->fault_hook->fc, SNDK_FDIR_RX, qp, &ms);
        enum sndk_seam_verdict v = rx_act(qp, a, ms, fail);
        if (v != SNDK_SEAM_GO_ON)
            return v;
    }
    if (d->byte_mark != UINT64_MAX)
        *cap = (size_t)(d->byte_mark - d->bytes);
    return SNDK_SEAM_GO_ON;
}

static void rx_read(struct sndk_qp *qp, const struct iovec *iov, int n, size_t got)
{
    (void)iov;
    (void)n;
    qp->io->fault_hook->fc->d[SNDK_FDIR_RX].bytes += (uint64_t)got;
}

static const struct sndk_dp_hook_ops ops = {
    .name = "faults",
    .tx_fpdu_next = tx_fpdu_next,
    .tx_fpdu_cut = tx_fpdu_cut,
    .tx_holding = tx_holding,
    .tx_stopped = tx_stopped,
    .tx_write_cap = tx_write_cap,
    .tx_wrote = tx_wrote,
    .rx_fpdu_next = rx_fpdu_next,
    .rx_fpdu_ended = rx_fpdu_ended,
    .rx_read_cap = rx_read_cap,
    .rx_read = rx_read,
};

static bool attach(struct sndk_conn *io, const struct sndk_link_params *p)
{
    struct sndk_fault_conn *fc = sndk_fault_conn_new(io->qp->base.adapter, p->active, p->crc);
    if (!fc)
        return false;
    io->fault_hook = calloc(1, sizeof *io->fault_hook);
    if (!io->fault_hook) {
        sndk_fault_conn_free(fc);
        return false;
    }
    io->fault_hook->fc = fc;
    io->fault_hook->rx_fault_checked = UINT64_MAX;
    return true;
}

static void detach(struct sndk_conn *io)
{
    if (!io->fault_hook)
        return;
    sndk_fault_conn_free(io->fault_hook->fc);
    free(io->fault_hook);
    io->fault_hook = NULL;
}

const struct sndk_dp_hook sndk_dp_hook_faults = {.ops = &ops, .attach = attach, .detach = detach};
