/* The initiator queue's far end: retiring finished requests, in posting order, into the
 * initiator CQ (docs/datapath.md, "TX: from the posting thread"). Below the TX and RX drivers and the
 * connection, which all mark requests done and retire them here. */
#include "datapath/sq.h"

#include "datapath/dp_seams.h"

void sndk_sq_retire_head(struct sndk_qp *qp, NTSTATUS st, ULONG code)
{
    sndk_assert_held(&qp->tx_lock);
    uint32_t idx = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
    struct sndk_sqe *e = sndk_sq_slot(qp, idx);
    static const NDK_OPERATION_TYPE types[] = {
        [SNDK_SQ_SEND] = NdkOperationTypeSend,
        [SNDK_SQ_WRITE] = NdkOperationTypeWrite,
        [SNDK_SQ_READ] = NdkOperationTypeRead,
        [SNDK_SQ_BIND] = NdkOperationTypeBind,
        [SNDK_SQ_FAST_REGISTER] = NdkOperationTypeFastRegister,
        [SNDK_SQ_INVALIDATE] = NdkOperationTypeInvalidate,
    };
    if (e->target) { /* an Invalidate that never ran */
        sndk_obj_put(e->target);
        e->target = NULL;
    }
    bool report = st != STATUS_SUCCESS || !(e->flags & NDK_OP_FLAG_SILENT_SUCCESS);
    bool data = e->kind == SNDK_SQ_SEND || e->kind == SNDK_SQ_WRITE || e->kind == SNDK_SQ_READ;
    NDK_RESULT_EX r = {
        .Status = st,
        .BytesTransferred = st == STATUS_SUCCESS && data ? (ULONG)e->bytes : 0,
        .QPContext = qp->context,
        .RequestContext = e->context,
        .Type = types[e->kind],
        .ProviderErrorCode = st == STATUS_SUCCESS ? 0 : code,
    };
    sndk_seam_sq_retired(qp, st);
    /* The slot is free before its completion can be seen: a consumer that polls the completion
     * on another thread and posts the next request at once (a queue of depth 1, ndkperf's
     * read_lat) must find room. Release: the poster reads sq_head without the lock. Nothing
     * reads the slot after this; the result was copied out above. */
    atomic_store_explicit(&qp->sq_head, idx + 1, memory_order_release);
    if (report)
        sndk_cq_post(qp->icq, &r, false);
}

void sndk_sq_retire_done(struct sndk_qp *qp)
{
    sndk_assert_held(&qp->tx_lock);
    for (;;) {
        uint32_t idx = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
        if (idx == qp->sq_sent)
            return;
        struct sndk_sqe *e = sndk_sq_slot(qp, idx);
        if (!e->done)
            return;
        sndk_sq_retire_head(qp, e->status, e->code);
    }
}
