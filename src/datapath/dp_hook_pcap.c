/* Packet capture (SOFTNDK_PCAP, docs/observability.md) as a data path hook: every byte the
 * connection writes or reads, and each direction's FIN, into its capture. Attached when the
 * connection's record has a capture. */
#include "datapath/dp_seams.h"

static struct sndk_pcap_conn *capture(struct sndk_qp *qp)
{
    return qp->io->crec->pcap;
}

static void tx_wrote(struct sndk_qp *qp, const struct iovec *iov, int n, size_t w, bool term)
{
    (void)term;
    sndk_pcap_iov(capture(qp), true, iov, n, w);
}

static void tx_fin(struct sndk_qp *qp)
{
    sndk_pcap_fin(capture(qp), true);
}

static void rx_read(struct sndk_qp *qp, const struct iovec *iov, int n, size_t got)
{
    sndk_pcap_iov(capture(qp), false, iov, n, got);
}

static void rx_fin(struct sndk_qp *qp)
{
    sndk_pcap_fin(capture(qp), false);
}

static const struct sndk_dp_hook_ops ops = {
    .name = "pcap",
    .tx_wrote = tx_wrote,
    .tx_fin = tx_fin,
    .rx_read = rx_read,
    .rx_fin = rx_fin,
};

static bool attach(struct sndk_conn *io, const struct sndk_link_params *p)
{
    (void)p;
    return io->crec && io->crec->pcap;
}

static void detach(struct sndk_conn *io)
{
    (void)io; /* the capture belongs to the connection's record */
}

const struct sndk_dp_hook sndk_dp_hook_pcap = {.ops = &ops, .attach = attach, .detach = detach};
