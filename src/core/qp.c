/* Queue pair (spec/ndkpi.md §2.8, §5.1): creation with its limits, the receive queue, flush,
 * close. A QP reaches SNDK_QP_CONNECTED only through a connector; until then every initiator
 * request is refused inline with STATUS_CONNECTION_INVALID (§5.1 rule 5). */
#include "core/qp.h"

#include <stdlib.h>

#include "util/log.h"

static const char *const qp_state_names[SNDK_QP_STATE_COUNT] = {
    [SNDK_QP_IDLE] = "idle",
    [SNDK_QP_CONNECTED] = "connected",
    [SNDK_QP_DISCONNECTING] = "disconnecting",
    [SNDK_QP_ERROR] = "error",
};

const char *sndk_qp_state_name(enum sndk_qp_state s)
{
    return (unsigned)s < SNDK_QP_STATE_COUNT ? qp_state_names[s] : "?";
}

static struct sndk_qp *qp_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeQp);
    return o ? sndk_container_of(o, struct sndk_qp, base) : NULL;
}

/* Initiator requests need a connection (§5.1 rule 5). Nothing moves a QP out of
 * SNDK_QP_IDLE until connectors establish connections, so every initiator request on a QP of
 * this build is refused inline: no completion, the QP stays usable. */
static NTSTATUS initiator_gate(NDK_QP *pNdkQp)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    return STATUS_CONNECTION_INVALID;
}

static NTSTATUS qp_send(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        ULONG Flags)
{
    (void)RequestContext, (void)pSgl, (void)nSge, (void)Flags;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_send_invalidate(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl,
                                   ULONG nSge, ULONG Flags, UINT32 RemoteToken)
{
    (void)RequestContext, (void)pSgl, (void)nSge, (void)Flags, (void)RemoteToken;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_bind(NDK_QP *pNdkQp, PVOID RequestContext, NDK_MR *pMr, NDK_MW *pMw,
                        PVOID VirtualAddress, SIZE_T Length, ULONG Flags)
{
    (void)RequestContext, (void)pMr, (void)pMw, (void)VirtualAddress, (void)Length, (void)Flags;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_fast_register(NDK_QP *pNdkQp, PVOID RequestContext, NDK_MR *pMr,
                                 ULONG AdapterPageCount, const NDK_LOGICAL_ADDRESS *AdapterPageArray,
                                 ULONG FBO, SIZE_T Length, PVOID BaseVirtualAddress, ULONG Flags)
{
    (void)RequestContext, (void)pMr, (void)AdapterPageCount, (void)AdapterPageArray, (void)FBO;
    (void)Length, (void)BaseVirtualAddress, (void)Flags;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_invalidate(NDK_QP *pNdkQp, PVOID RequestContext, NDK_OBJECT_HEADER *pNdkMrOrMw,
                              ULONG Flags)
{
    (void)RequestContext, (void)pNdkMrOrMw, (void)Flags;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_read(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags)
{
    (void)RequestContext, (void)pSgl, (void)nSge, (void)RemoteAddress, (void)RemoteToken;
    (void)Flags;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_write(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                         UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags)
{
    (void)RequestContext, (void)pSgl, (void)nSge, (void)RemoteAddress, (void)RemoteToken;
    (void)Flags;
    return initiator_gate(pNdkQp);
}

static NTSTATUS qp_receive(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp || qp->srq)
        return STATUS_INVALID_PARAMETER; /* a QP on an SRQ takes receives from the SRQ */
    pthread_mutex_lock(&qp->rq_lock);
    NTSTATUS st = sndk_recv_ring_push(&qp->rq, RequestContext, pSgl, nSge,
                                      qp->base.adapter->info.MaxTransferLength);
    pthread_mutex_unlock(&qp->rq_lock);
    return st;
}

/* Complete every queued receive with STATUS_CANCELLED, in posting order. The CQ post happens
 * under rq_lock so that flushed and received completions keep the queue's order. */
static void flush_receives(struct sndk_qp *qp)
{
    pthread_mutex_lock(&qp->rq_lock);
    uint32_t n = qp->rq.count;
    for (uint32_t i = 0; i < n; i++) {
        struct sndk_recv_wqe *w = sndk_recv_ring_at(&qp->rq, i);
        NDK_RESULT_EX r = {
            .Status = STATUS_CANCELLED,
            .BytesTransferred = 0,
            .QPContext = qp->context,
            .RequestContext = w->context,
            .Type = NdkOperationTypeReceive,
        };
        sndk_cq_post(qp->rcq, &r, false);
    }
    qp->rq.head = (qp->rq.head + n) % (qp->rq.depth ? qp->rq.depth : 1);
    qp->rq.count = 0;
    pthread_mutex_unlock(&qp->rq_lock);
    if (n)
        sndk_debug("qp", "QP %p: flushed %u receive(s)", (void *)qp, n);
}

static VOID qp_flush(NDK_QP *pNdkQp)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return;
    if (!qp->srq)
        flush_receives(qp);
}

static const NDK_QP_DISPATCH qp_dispatch = {
    .NdkCloseQp = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkFlush = qp_flush,
    .NdkSend = qp_send,
    .NdkReceive = qp_receive,
    .NdkBind = qp_bind,
    .NdkFastRegister = qp_fast_register,
    .NdkInvalidate = qp_invalidate,
    .NdkRead = qp_read,
    .NdkWrite = qp_write,
    .NdkSendAndInvalidate = qp_send_invalidate,
};

static void qp_close_begin(struct sndk_obj *o)
{
    /* §1.6: a close starts cancelling what is pending. */
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    if (!qp->srq)
        flush_receives(qp);
}

static void qp_destroy(struct sndk_obj *o)
{
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    sndk_recv_ring_destroy(&qp->rq);
    pthread_mutex_destroy(&qp->rq_lock);
}

static const struct sndk_obj_ops qp_ops = {
    .type = NdkObjectTypeQp, .close_begin = qp_close_begin, .destroy = qp_destroy};

static NTSTATUS qp_create_common(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 NDK_SRQ *pSrq, bool with_srq, PVOID QPContext,
                                 ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                                 ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                                 ULONG InlineDataSize, NDK_QP **ppNdkQp)
{
    struct sndk_pd *pd = sndk_pd_from(pNdkPd);
    struct sndk_cq *rcq = sndk_cq_from(pReceiveCq);
    struct sndk_cq *icq = sndk_cq_from(pInitiatorCq);
    struct sndk_srq *srq = with_srq ? sndk_srq_from(pSrq) : NULL;
    if (!pd || !rcq || !icq || !ppNdkQp || (with_srq && !srq))
        return STATUS_INVALID_PARAMETER;
    struct sndk_adapter *a = pd->base.adapter;
    /* Antecedents must be of this adapter (and the SRQ of this PD) and open. */
    if (!sndk_obj_usable(&rcq->base, a) || !sndk_obj_usable(&icq->base, a) ||
        (srq && (!sndk_obj_usable(&srq->base, a) || srq->base.holds[0] != &pd->base)))
        return STATUS_INVALID_PARAMETER;
    const NDK_ADAPTER_INFO *info = &a->info;
    if (InitiatorQueueDepth == 0 || InitiatorQueueDepth > info->MaxInitiatorQueueDepth ||
        MaxInitiatorRequestSge > info->MaxInitiatorRequestSge ||
        InlineDataSize > info->MaxInlineDataSize)
        return STATUS_INVALID_PARAMETER;
    if (!with_srq && (ReceiveQueueDepth == 0 || ReceiveQueueDepth > info->MaxReceiveQueueDepth ||
                      MaxReceiveRequestSge > info->MaxReceiveRequestSge))
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&pd->base))
        return STATUS_INVALID_DEVICE_STATE;
    struct sndk_qp *qp = calloc(1, sizeof *qp);
    if (!qp)
        return STATUS_INSUFFICIENT_RESOURCES;
    if (!sndk_recv_ring_init(&qp->rq, with_srq ? 0 : ReceiveQueueDepth,
                             with_srq ? 0 : MaxReceiveRequestSge)) {
        free(qp);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    qp->pd = pd;
    qp->rcq = rcq;
    qp->icq = icq;
    qp->srq = srq;
    qp->context = QPContext;
    qp->initiator_depth = InitiatorQueueDepth;
    qp->initiator_max_sge = MaxInitiatorRequestSge;
    qp->inline_size = InlineDataSize;
    atomic_init(&qp->state, SNDK_QP_IDLE);
    pthread_mutex_init(&qp->rq_lock, NULL);
    sndk_obj_init(&qp->base, a, &qp_ops, &qp_dispatch);
    sndk_obj_hold(&qp->base, &pd->base);
    sndk_obj_hold(&qp->base, &rcq->base);
    if (icq != rcq)
        sndk_obj_hold(&qp->base, &icq->base);
    if (srq)
        sndk_obj_hold(&qp->base, &srq->base);
    *ppNdkQp = &qp->base.pub.qp;
    return STATUS_SUCCESS;
}

NTSTATUS sndk_qp_create(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                        PVOID QPContext, ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                        ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                        ULONG InlineDataSize, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_QP **ppNdkQp)
{
    (void)CreateCompletion; /* creates complete inline */
    (void)RequestContext;
    return qp_create_common(pNdkPd, pReceiveCq, pInitiatorCq, NULL, false, QPContext,
                            ReceiveQueueDepth, InitiatorQueueDepth, MaxReceiveRequestSge,
                            MaxInitiatorRequestSge, InlineDataSize, ppNdkQp);
}

NTSTATUS sndk_qp_create_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                 ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                 NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                 NDK_QP **ppNdkQp)
{
    (void)CreateCompletion;
    (void)RequestContext;
    return qp_create_common(pNdkPd, pReceiveCq, pInitiatorCq, pSrq, true, QPContext, 0,
                            InitiatorQueueDepth, 0, MaxInitiatorRequestSge, InlineDataSize,
                            ppNdkQp);
}
