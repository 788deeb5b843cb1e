/* The source check (SOFTNDK_OPTIONS.SourceCheck, docs/datapath.md) as a data path hook: each
 * FPDU's payload is checksummed when it is cut and again once it is in TCP; a difference is the
 * consumer's bug (NDK: a source belongs to the provider until its request completes), which CRC
 * makes the peer see as a CRC error and CRC off hides entirely. Attached when the option is
 * on and its copy of the batch's iovecs could be allocated. */
#include "datapath/dp_seams.h"

#include <stdlib.h>
#include <string.h>

#include "datapath/sq.h"
#include "device/adapter_state.h"
#include "verify/verify.h"
#include "iwarp/crc32c.h"
#include "util/log.h"

/* The FPDU's payload is iov[first + 1 .. first + n - 1) (header first, pad + CRC last):
 * checksum it as it is now. */
static void tx_fpdu_cut(struct sndk_qp *qp, int rec, int first, int n, bool corrupt)
{
    (void)corrupt;
    struct sndk_conn *io = qp->io;
    if (!io->fp[rec].payload_len)
        return;
    struct sndk_tx_rec *r = &io->rec[rec];
    r->pay_first = (uint16_t)(first + 1);
    r->pay_n = (uint16_t)(n - 2);
    r->pay_sum = sndk_crc32c_iov(0, io->iov + r->pay_first, r->pay_n);
}

/* sendmsg progress edits iov in place: keep the batch's iovecs as built. */
static void tx_batch_built(struct sndk_qp *qp, int niov)
{
    struct sndk_conn *io = qp->io;
    memcpy(io->src_iov, io->iov, (size_t)niov * sizeof *io->iov);
}

/* The FPDU is in TCP: its source must still be what was checksummed when it was cut. */
static void tx_fpdu_out(struct sndk_qp *qp, const struct sndk_tx_rec *r)
{
    struct sndk_conn *io = qp->io;
    if (!r->pay_n || sndk_crc32c_iov(0, io->src_iov + r->pay_first, r->pay_n) == r->pay_sum)
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
        void *ctx = sndk_sq_slot(qp, r->req)->context;
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

static const struct sndk_dp_hook_ops ops = {
    .name = "source check",
    .tx_fpdu_cut = tx_fpdu_cut,
    .tx_batch_built = tx_batch_built,
    .tx_fpdu_out = tx_fpdu_out,
};

static bool attach(struct sndk_conn *io, const struct sndk_link_params *p)
{
    (void)p;
    struct sndk_qp *qp = io->qp;
    if (!qp->base.adapter->cfg.source_check)
        return false;
    io->src_iov = calloc(SNDK_TX_IOV, sizeof *io->src_iov);
    if (!io->src_iov)
        sndk_warn_peer(sndk_ctr_log_suppressed(&qp->base.adapter->ctrs), "qp",
                       "QP %p: no memory for the source check: this connection is not checked",
                       (void *)qp);
    return io->src_iov != NULL;
}

static void detach(struct sndk_conn *io)
{
    free(io->src_iov);
    io->src_iov = NULL;
}

const struct sndk_dp_hook sndk_dp_hook_source = {.ops = &ops, .attach = attach, .detach = detach};
