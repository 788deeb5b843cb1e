/* Errors between two softndk QPs: receive too small, no receive posted, a bad local SGE, an
 * unconnected QP. */
#include <string.h>

#include "datapath.h"
#include "datapath/conn_state.h"
#include "device/access.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)

/* ProviderDisconnectReason: who sent the Terminate, layer/etype/code. */
#define SENT(l, t, c) (0x01000000u | (l) << 16 | (t) << 8 | (c))
#define RECV(l, t, c) (0x02000000u | (l) << 16 | (t) << 8 | (c))

TEST(receive_too_small_overflows_terminates_and_aborts_both_sides)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_post_recv(&p.y, (void *)1, 0, 100);
    dp_post_recv(&p.y, (void *)2, 100, 100);
    dp_post_recv(&p.x, (void *)3, 0, 100);
    dp_post_send(&p.x, (void *)4, 0, 200, 0);
    NDK_RESULT_EX r[2];
    dp_expect(p.y.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_BUFFER_OVERFLOW, 0, YCTX, (void *)1, NdkOperationTypeReceive);
    CHECK_EQ_U64(r[0].ProviderErrorCode, SNDK_WERR_TOO_LONG);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, YCTX, (void *)2, NdkOperationTypeReceive);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_status, STATUS_CONNECTION_ABORTED);
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(1u, 2u, 5u)); /* DDP / untagged / too long */
    CHECK_EQ_U64(p.x.link.abort_reason, RECV(1u, 2u, 5u));
    /* A 200-byte Send is in TCP before the peer can refuse it: iWARP has no per-Send
     * acknowledgement, so it completed (docs/decisions.md); what was still queued is flushed. */
    dp_expect(p.x.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 200, XCTX, (void *)4, NdkOperationTypeSend);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, XCTX, (void *)3, NdkOperationTypeReceive);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 1);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 1);
    dp_pair_close(&p);
}

/* A 32 MiB Send the peer refuses (its receive is 4 KiB) while the Send is still in flight: the
 * Terminate names it by its MSN. first_msn: the MSN the Send goes out with (both ends moved
 * there before it): 1, as on a new connection, or 0, which the 2^32nd Send of a connection
 * takes, since MSNs count modulo 2^32; a request not yet on the wire also holds 0, and only the
 * one that was must be named. */
static void refused_send_in_flight(uint32_t first_msn)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 32u << 20; /* far more than the socket buffers hold */
    o.two_adapters = true;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_qp *xq = (struct sndk_qp *)p.x.qp, *yq = (struct sndk_qp *)p.y.qp;
    sndk_mutex_lock(&xq->tx_lock);
    xq->io->msn_send = first_msn;
    sndk_mutex_unlock(&xq->tx_lock);
    sndk_mutex_lock(&yq->rx_lock);
    yq->io->rx.msn_expect[SNDK_QN_SEND] = first_msn;
    sndk_mutex_unlock(&yq->rx_lock);
    dp_post_recv(&p.y, (void *)1, 0, 4096);
    dp_post_send(&p.x, (void *)2, 0, o.buf_len, NDK_OP_FLAG_DEFER);
    dp_post_send(&p.x, (void *)3, 0, 8, NDK_OP_FLAG_DEFER);
    dp_post_send(&p.x, (void *)4, 0, 0, 0);
    NDK_RESULT_EX r[3];
    dp_expect(p.y.cq, r, 1, 0);
    dp_check_result(&r[0], STATUS_BUFFER_OVERFLOW, 0, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_expect(p.x.cq, r, 3, 20);
    dp_check_result(&r[0], STATUS_REMOTE_RESOURCES, 0, XCTX, (void *)2, NdkOperationTypeSend);
    CHECK_EQ_U64(r[0].ProviderErrorCode, RECV(1u, 2u, 5u));
    dp_check_result(&r[1], STATUS_CANCELLED, 0, XCTX, (void *)3, NdkOperationTypeSend);
    dp_check_result(&r[2], STATUS_CANCELLED, 0, XCTX, (void *)4, NdkOperationTypeSend);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.abort_reason, RECV(1u, 2u, 5u));
    dp_pair_close(&p);
}

TEST_T(refused_send_still_in_flight_completes_with_remote_error, 60)
{
    refused_send_in_flight(1);
}

TEST_T(refused_send_with_msn_0_after_the_wrap_is_named_too, 60)
{
    refused_send_in_flight(0);
}

TEST(send_without_receive_terminates_and_aborts)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_post_recv(&p.x, (void *)3, 0, 100);
    dp_post_send(&p.x, (void *)4, 0, 10, NDK_OP_FLAG_SILENT_SUCCESS);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, SENT(1u, 2u, 2u)); /* DDP / untagged / no buffer */
    CHECK_EQ_U64(p.x.link.abort_reason, RECV(1u, 2u, 2u));
    CHECK_EQ_U64(p.x.link.abort_status, STATUS_CONNECTION_ABORTED);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)3, NdkOperationTypeReceive);
    dp_expect(p.y.cq, &r, 0, 20);
    dp_pair_close(&p);
}

TEST(bad_local_sge_completes_with_access_violation_then_the_qp_fails)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_post_recv(&p.y, (void *)1, 0, 100);
    dp_post_recv(&p.y, (void *)2, 0, 100);
    dp_post_send(&p.x, (void *)10, 0, 10, NDK_OP_FLAG_DEFER);
    NDK_SGE bad[4] = {
        {.VirtualAddress = p.x.buf, .Length = 8, .MemoryRegionToken = p.x.token ^ 1}, /* key */
        {.VirtualAddress = p.x.buf + p.x.len - 4, .Length = 8,
         .MemoryRegionToken = p.x.token},                                             /* bounds */
        {.VirtualAddress = (void *)(uintptr_t)-4, .Length = 8, .MemoryRegionToken = p.x.token},
        {.VirtualAddress = p.x.buf, .Length = 8, .MemoryRegionToken = p.y.token}, /* other PD */
    };
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)11, &bad[0], 1, NDK_OP_FLAG_DEFER),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)12, &bad[1], 1, NDK_OP_FLAG_DEFER),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)13, &bad[2], 1, NDK_OP_FLAG_DEFER),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)14, &bad[3], 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX r[5];
    dp_expect(p.x.cq, r, 5, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 10, XCTX, (void *)10, NdkOperationTypeSend);
    dp_check_result(&r[1], STATUS_ACCESS_VIOLATION, 0, XCTX, (void *)11, NdkOperationTypeSend);
    CHECK_EQ_U64(r[1].ProviderErrorCode, SNDK_ACC_INV_STAG);
    /* after the first error completion, the rest are flushed, in order — except that each keeps
     * the error found when it was posted */
    dp_check_result(&r[2], STATUS_ACCESS_VIOLATION, 0, XCTX, (void *)12, NdkOperationTypeSend);
    CHECK_EQ_U64(r[2].ProviderErrorCode, SNDK_ACC_BOUNDS);
    dp_check_result(&r[3], STATUS_ACCESS_VIOLATION, 0, XCTX, (void *)13, NdkOperationTypeSend);
    CHECK_EQ_U64(r[3].ProviderErrorCode, SNDK_ACC_WRAP);
    dp_check_result(&r[4], STATUS_ACCESS_VIOLATION, 0, XCTX, (void *)14, NdkOperationTypeSend);
    CHECK_EQ_U64(r[4].ProviderErrorCode, SNDK_ACC_UNASSOC);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.abort_reason, SENT(0u, 0u, 0u)); /* RDMAP local catastrophic */
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, RECV(0u, 0u, 0u));
    dp_expect(p.y.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 10, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, YCTX, (void *)2, NdkOperationTypeReceive);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    dp_pair_close(&p);
}

TEST(unconnected_qp_refuses_initiator_requests_and_keeps_receives)
{
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side s;
    dp_side_init(&s, a, &o);
    dp_side_create_qp(&s, &o, XCTX);
    NDK_SGE g = dp_sge(&s, 0, 8);
    CHECK_EQ_U64(s.qp->Dispatch->NdkSend(s.qp, NULL, &g, 1, 0), STATUS_CONNECTION_INVALID);
    CHECK_EQ_U64(s.qp->Dispatch->NdkSendAndInvalidate(s.qp, NULL, &g, 1, 0, 1),
                 STATUS_CONNECTION_INVALID);
    CHECK_EQ_U64(s.qp->Dispatch->NdkSend(s.qp, NULL, &g, 1, NDK_OP_FLAG_DEFER),
                 STATUS_CONNECTION_INVALID);
    dp_post_recv(&s, (void *)1, 0, 8);
    sndk_qp_shutdown((struct sndk_qp *)s.qp, 100); /* not attached: nothing happens */
    NDK_RESULT_EX r;
    dp_expect(s.cq, &r, 0, 20);
    s.qp->Dispatch->NdkFlush(s.qp);
    dp_expect(s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)1, NdkOperationTypeReceive);
    dp_side_close(&s);
    SoftNdkCloseAdapter(a);
}
