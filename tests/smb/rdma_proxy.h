/* A test transport that emulates the RDMA side of SMB Direct above Direct TCP, so that the
 * client's RDMA channel can be checked end to end against a server that has none: it hands
 * out registrations (two descriptors for buffers above 64 KiB), checks every READ / WRITE
 * with an RDMA channel ([MS-SMB2] 2.2.19 / 2.2.21: the descriptors name live registrations
 * with the right access and cover Length / RemainingBytes; WRITE's Length and DataOffset are
 * 0), performs the transfer itself (the peer's RDMA Read or Write) and forwards the request
 * inline; for RDMA_V1_INVALIDATE it invalidates the registration as the server's Send with
 * Invalidate would. Signed READ / WRITE requests are not rewritten (it would break their
 * signature): such a request is an error. */
#ifndef SOFTNDK_TESTS_RDMA_PROXY_H
#define SOFTNDK_TESTS_RDMA_PROXY_H

#include <stdint.h>

#include "smb/msg_transport.h"

struct rdma_proxy_counts {
    uint64_t rdma_reads, rdma_writes, inline_reads, inline_writes;
    uint64_t peer_invalidations, registrations, releases;
};

/* Wraps inner (owned: destroyed with the proxy). max_rdma: the largest registration. */
smb_transport *rdma_proxy_new(smb_transport *inner, size_t max_rdma);
void rdma_proxy_counts(smb_transport *t, struct rdma_proxy_counts *out);
/* Regions still registered (0 after a clean transfer). */
unsigned rdma_proxy_live(smb_transport *t);

#endif
