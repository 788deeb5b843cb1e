/* Queue pair (docs/qp.md, docs/ndk-rules.md#post): the NDK object. Creation with its limits,
 * the checks of every post, filling a request slot, flush and close. Publishing a request,
 * its trip to the wire and back, the QP's states and the connection under it are the
 * connection's (src/datapath/conn.c; docs/datapath.md explains the whole path).
 *
 * Until a connector attaches a connection, every initiator request is refused inline with
 * STATUS_CONNECTION_INVALID ([POST-5]); receives queue. */
#include "core/create.h"
#include "datapath/rnr.h"
#include "device/qp_state.h"
#include "device/srq.h"
#include "verify/verify.h"

#include <stdlib.h>
#include <string.h>

#include "device/access.h"
#include "datapath/conn.h"
#include "util/log.h"

static struct sndk_qp *qp_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeQp);
    return o ? sndk_container_of(o, struct sndk_qp, base) : NULL;
}

/* ---------------------------------------------------------------- posting */

/* [DEFER-2]: before an initiator request fails inline, everything accepted with DEFER
 * before it goes to the wire. */
static NTSTATUS refuse(struct sndk_qp *qp, NTSTATUS st)
{
    sndk_conn_push_deferred(qp);
    return st;
}

#define SEND_FLAGS                                                                                 \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT |   \
     NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define WRITE_FLAGS                                                                                \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define READ_FLAGS                                                                                 \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE |                                        \
     NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE | NDK_OP_FLAG_DEFER)
#define BIND_FLAGS                                                                                 \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |        \
     NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER)
#define FR_FLAGS                                                                                   \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |        \
     NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_RDMA_READ_SINK | \
     NDK_OP_FLAG_DEFER)
#define INVAL_FLAGS (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER)

/* The NDK call that posts each kind (for the verifier's reports). */
static const char *const sq_kind_calls[] = {
    [SNDK_SQ_SEND] = "NdkSend(AndInvalidate)",
    [SNDK_SQ_WRITE] = "NdkWrite",
    [SNDK_SQ_READ] = "NdkRead",
    [SNDK_SQ_BIND] = "NdkBind",
    [SNDK_SQ_FAST_REGISTER] = "NdkFastRegister",
    [SNDK_SQ_INVALIDATE] = "NdkInvalidate",
};

/* The first checks of every initiator request: connected, known flags, a free slot. On success
 * the slot at sq_tail is set up (still the poster's until published). */
static NTSTATUS sq_begin(struct sndk_qp *qp, void *ctx, ULONG flags, ULONG allowed,
                         enum sndk_sq_kind kind, struct sndk_sqe **pe)
{
    if (sndk_qp_state(qp) != SNDK_QP_CONNECTED) {
        /* After a connection ended the call races the disconnect event: only a QP that was
         * never connected is the consumer's mistake for certain. */
        if (sndk_verify_on(qp->base.adapter) && sndk_qp_state(qp) == SNDK_QP_IDLE)
            sndk_verify_report(&qp->base, SoftNdkVerifyPostNotConnected, ctx,
                               "%s on a QP that was never connected: post initiator requests "
                               "after NdkConnect/NdkAccept completed",
                               sq_kind_calls[kind]);
        return STATUS_CONNECTION_INVALID;
    }
    if (flags & ~allowed)
        return refuse(qp, STATUS_INVALID_PARAMETER);
    uint32_t tail = qp->sq_tail;
    if (tail - atomic_load_explicit(&qp->sq_head, memory_order_acquire) >= qp->initiator_depth)
        return refuse(qp, STATUS_NO_MORE_ENTRIES);
    /* The slot at sq_tail is the poster's until sq_tail moves past it. */
    uint32_t s = tail & qp->sq_mask;
    struct sndk_sqe *e = &qp->sq[s];
    *e = (struct sndk_sqe){.context = ctx, .flags = flags, .status = STATUS_SUCCESS,
                           .kind = (uint8_t)kind,
                           .iov = qp->sq_iov + (size_t)s * qp->sq_iov_stride};
    *pe = e;
    return STATUS_SUCCESS;
}

/* Check the SGE list against the request's limits and resolve it into e->iov (or copy it into
 * the slot's inline storage). `need`: the local right the SGEs must grant. A bad SGE does not
 * refuse the request: it completes, in order, with the access error (decisions 9k). */
static NTSTATUS sq_sges(struct sndk_qp *qp, struct sndk_sqe *e, const NDK_SGE *sgl, ULONG nsge,
                        ULONG max_sge, unsigned need)
{
    if (nsge && !sgl)
        return STATUS_INVALID_PARAMETER;
    bool inl = (e->flags & NDK_OP_FLAG_INLINE) != 0;
    uint64_t bytes = 0;
    for (ULONG i = 0; i < nsge; i++) {
        if (inl && sgl[i].Length && !sgl[i].VirtualAddress)
            return STATUS_INVALID_PARAMETER; /* [FLAG-5]: an inline payload must be readable */
        bytes += sgl[i].Length;
    }
    /* 9c: byte and SGE limits; INLINE lifts the SGE limit and has its own byte limit. */
    if (inl ? bytes > qp->inline_size : nsge > max_sge)
        return STATUS_DATA_OVERRUN;
    if (bytes > qp->base.adapter->info.MaxTransferLength)
        return STATUS_DATA_OVERRUN;
    e->bytes = bytes;
    if (inl) {
        /* [FLAG-5]: the payload is consumed before the call returns; tokens are ignored. */
        uint32_t s = (uint32_t)(e - qp->sq);
        uint8_t *dst = qp->sq_inline + (size_t)s * qp->inline_size;
        for (ULONG i = 0; i < nsge; i++) {
            if (sgl[i].Length)
                memcpy(dst, sgl[i].VirtualAddress, sgl[i].Length);
            dst += sgl[i].Length;
        }
        if (bytes) {
            e->iov[0] = (struct iovec){qp->sq_inline + (size_t)s * qp->inline_size, bytes};
            e->niov = 1;
        }
        return STATUS_SUCCESS;
    }
    int n = 0;
    for (ULONG i = 0; i < nsge; i++) {
        int k = 0;
        enum sndk_access_result r = sndk_access_check(
            qp->pd, sgl[i].MemoryRegionToken, (uint64_t)(uintptr_t)sgl[i].VirtualAddress,
            sgl[i].Length, need, false, e->iov + n, (int)qp->sq_iov_stride - n, &k);
        if (r != SNDK_ACC_OK) {
            /* Accepted, and completed in order with the NDSPI status ([STAT-2]). */
            e->status = r == SNDK_ACC_TOO_MANY ? STATUS_DATA_OVERRUN : STATUS_ACCESS_VIOLATION;
            e->code = (ULONG)r;
            n = 0;
            break;
        }
        n += k;
    }
    e->niov = n;
    return STATUS_SUCCESS;
}

/* Publish the slot at sq_tail and, unless DEFER or the socket is backed up, send. */
static NTSTATUS sq_publish(struct sndk_qp *qp, ULONG flags)
{
    return sndk_conn_publish(qp, (flags & NDK_OP_FLAG_DEFER) != 0) ? STATUS_SUCCESS
                                                                   : STATUS_CONNECTION_INVALID;
}

static NTSTATUS post_send(struct sndk_qp *qp, void *ctx, const NDK_SGE *sgl, ULONG nsge,
                          ULONG flags, bool invalidate, uint32_t inv_stag)
{
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, ctx, flags, SEND_FLAGS, SNDK_SQ_SEND, &e);
    if (st != STATUS_SUCCESS)
        return st;
    st = sq_sges(qp, e, sgl, nsge, qp->initiator_max_sge, SNDK_ACCESS_LOCAL_READ);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    bool se = (flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0;
    e->opcode = (uint8_t)(invalidate ? (se ? SNDK_OP_SEND_SE_INV : SNDK_OP_SEND_INV)
                                     : (se ? SNDK_OP_SEND_SE : SNDK_OP_SEND));
    e->inv_stag = inv_stag;
    return sq_publish(qp, flags);
}

static NTSTATUS qp_send(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    return post_send(qp, RequestContext, pSgl, nSge, Flags, false, 0);
}

static NTSTATUS qp_send_invalidate(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl,
                                   ULONG nSge, ULONG Flags, UINT32 RemoteToken)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    return post_send(qp, RequestContext, pSgl, nSge, Flags, true, RemoteToken);
}

static unsigned op_rights(ULONG flags)
{
    unsigned a = 0;
    if (flags & NDK_OP_FLAG_ALLOW_REMOTE_READ)
        a |= SNDK_ACCESS_REMOTE_READ;
    if ((flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) == NDK_OP_FLAG_ALLOW_REMOTE_WRITE)
        a |= SNDK_ACCESS_REMOTE_WRITE;
    return a;
}

static NTSTATUS qp_bind(NDK_QP *pNdkQp, PVOID RequestContext, NDK_MR *pMr, NDK_MW *pMw,
                        PVOID VirtualAddress, SIZE_T Length, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, BIND_FLAGS, SNDK_SQ_BIND, &e);
    if (st != STATUS_SUCCESS)
        return st;
    struct sndk_mr *mr = sndk_mr_from(pMr);
    struct sndk_obj *mwo = sndk_obj_check(pMw, NdkObjectTypeMw);
    if (!mr || !mwo) {
        if (sndk_verify_on(qp->base.adapter)) {
            if (!mr)
                sndk_verify_bad_handle(&qp->base, "NdkBind", "the MR", pMr, NdkObjectTypeMr);
            if (!mwo)
                sndk_verify_bad_handle(&qp->base, "NdkBind", "the MW", pMw, NdkObjectTypeMw);
        }
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    /* The 0x10 bit of ALLOW_REMOTE_WRITE alone is local write, which a window cannot grant. */
    if ((Flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE) &&
        (Flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) != NDK_OP_FLAG_ALLOW_REMOTE_WRITE)
        return refuse(qp, STATUS_INVALID_PARAMETER);
    /* Takes effect now: the token is readable when the call returns, and a peer can learn it
     * only from a later message. The completion keeps its place in the queue. */
    st = sndk_mw_bind(sndk_container_of(mwo, struct sndk_mw, base), mr, qp->pd,
                      (uint64_t)(uintptr_t)VirtualAddress, Length, op_rights(Flags));
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_fast_register(NDK_QP *pNdkQp, PVOID RequestContext, NDK_MR *pMr,
                                 ULONG AdapterPageCount, const NDK_LOGICAL_ADDRESS *AdapterPageArray,
                                 ULONG FBO, SIZE_T Length, PVOID BaseVirtualAddress, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, FR_FLAGS, SNDK_SQ_FAST_REGISTER, &e);
    if (st != STATUS_SUCCESS)
        return st;
    struct sndk_mr *mr = sndk_mr_from(pMr);
    if (!mr) {
        if (sndk_verify_on(qp->base.adapter))
            sndk_verify_bad_handle(&qp->base, "NdkFastRegister", "the MR", pMr, NdkObjectTypeMr);
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_fast_register(mr, RequestContext);
    unsigned access = SNDK_ACCESS_LOCAL_READ | op_rights(Flags);
    if (Flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE)
        access |= SNDK_ACCESS_LOCAL_WRITE;
    if (Flags & NDK_OP_FLAG_RDMA_READ_SINK)
        access |= SNDK_ACCESS_READ_SINK;
    bool remote = (access & (SNDK_ACCESS_REMOTE_READ | SNDK_ACCESS_REMOTE_WRITE)) != 0;
    st = sndk_mr_fast_register(mr, qp->pd, AdapterPageCount, AdapterPageArray, FBO, Length,
                               (uint64_t)(uintptr_t)BaseVirtualAddress, access, remote);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_invalidate(NDK_QP *pNdkQp, PVOID RequestContext, NDK_OBJECT_HEADER *pNdkMrOrMw,
                              ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, INVAL_FLAGS, SNDK_SQ_INVALIDATE, &e);
    if (st != STATUS_SUCCESS)
        return st;
    struct sndk_obj *o = sndk_obj_check(pNdkMrOrMw, NdkObjectTypeUndefined);
    if (!o || !sndk_adapter_same_device(o->adapter, qp->base.adapter))
        return refuse(qp, STATUS_INVALID_PARAMETER);
    if (o->ops->type == NdkObjectTypeMr) {
        struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
        if (!mr->fast || mr->pd != qp->pd)
            return refuse(qp, STATUS_INVALID_PARAMETER); /* never an NdkRegisterMr region */
    } else if (o->ops->type == NdkObjectTypeMw) {
        if (sndk_container_of(o, struct sndk_mw, base)->pd != qp->pd)
            return refuse(qp, STATUS_INVALID_PARAMETER);
    } else {
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    /* Runs in queue order (tx.c fill_batch): after every earlier request has been handed to
     * the wire, and after the earlier Reads with READ_FENCE. */
    sndk_obj_get(o);
    e->target = o;
    st = sq_publish(qp, Flags);
    if (st != STATUS_SUCCESS) {
        e->target = NULL;
        sndk_obj_put(o);
    }
    return st;
}

static NTSTATUS qp_read(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                        UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, READ_FLAGS, SNDK_SQ_READ, &e);
    if (st != STATUS_SUCCESS)
        return st;
    if (qp->io->ord == 0)
        return refuse(qp, STATUS_INVALID_DEVICE_REQUEST); /* ORD 0: no Reads on this connection */
    /* The sink is named by a private STag per Read ([IW-SINK]): the SGEs need local write only. */
    st = sq_sges(qp, e, pSgl, nSge, qp->base.adapter->info.MaxReadRequestSge,
                 SNDK_ACCESS_LOCAL_WRITE);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    if (RemoteAddress + e->bytes < RemoteAddress)
        return refuse(qp, STATUS_INVALID_PARAMETER);
    e->opcode = SNDK_OP_READ_REQ;
    e->rstag = RemoteToken;
    e->rto = RemoteAddress;
    /* [FLAG-7]: honoured when the adapter advertises it, silently ignored otherwise. */
    if ((Flags & NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE) && nSge > 0 &&
        (qp->base.adapter->info.AdapterFlags &
         NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED))
        e->local_tok = pSgl[0].MemoryRegionToken;
    return sq_publish(qp, Flags);
}

static NTSTATUS qp_write(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
                         UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    struct sndk_sqe *e;
    NTSTATUS st = sq_begin(qp, RequestContext, Flags, WRITE_FLAGS, SNDK_SQ_WRITE, &e);
    if (st != STATUS_SUCCESS)
        return st;
    st = sq_sges(qp, e, pSgl, nSge, qp->initiator_max_sge, SNDK_ACCESS_LOCAL_READ);
    if (st != STATUS_SUCCESS)
        return refuse(qp, st);
    if (RemoteAddress + e->bytes < RemoteAddress)
        return refuse(qp, STATUS_INVALID_PARAMETER); /* the wire TO would wrap */
    e->opcode = SNDK_OP_WRITE;
    e->rstag = RemoteToken;
    e->rto = RemoteAddress;
    return sq_publish(qp, Flags);
}

static void commit_rq_post(void *ctx)
{
    struct sndk_qp *qp = ctx;
    sndk_verify_call_commit(&qp->verify_rq_callers);
}

static NTSTATUS qp_receive(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp || qp->srq)
        return STATUS_INVALID_PARAMETER; /* 9e: a QP on an SRQ takes receives from the SRQ */
    /* No lock: the consumer serializes posts on one receive queue (NDKPI, "the provider should
     * not take redundant locks in these paths"), the receive side takes under rx_lock, and the
     * ring publishes between the two (device/srq.h). Once published, a Send may fill it and
     * its completion callback post again before we return: the verifier's commit comes first
     * (verify.h, struct sndk_verify_call). */
    NTSTATUS st = sndk_recv_ring_push(&qp->rq, RequestContext, pSgl, nSge,
                                      qp->base.adapter->info.MaxTransferLength,
                                      sndk_verify_on(qp->base.adapter) ? commit_rq_post : NULL, qp);
    if (st != STATUS_SUCCESS)
        return st;
    /* A QP in its final state, or whose close began, will never fill it: it completes at
     * once, as flushed (the close flushed the earlier ones; docs/misuse.md). The fence pairs
     * with the flush's (datapath/conn.c): either the flush saw this receive, or we see the
     * state that made it flush, and flush again. */
    atomic_thread_fence(memory_order_seq_cst);
    if (sndk_qp_state(qp) == SNDK_QP_ERROR || sndk_obj_closing(&qp->base))
        sndk_conn_flush_receives(qp);
    else
        sndk_rnr_kick(qp); /* a Send waiting for it (receiver not ready) goes on */
    return st;
}

static VOID qp_flush(NDK_QP *pNdkQp)
{
    struct sndk_qp *qp = qp_from(pNdkQp);
    if (!qp)
        return;
    enum sndk_qp_state st = sndk_qp_state(qp);
    if (st == SNDK_QP_CONNECTED || st == SNDK_QP_DISCONNECTING) {
        /* Flushing a live connection puts the QP in its error state (the verbs model): what is
         * queued can no longer match the peer's stream. */
        sndk_conn_fail_local(qp, true);
        return;
    }
    sndk_conn_flush_receives(qp);
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

/* ---------------------------------------------------------------- [POST-2] under the verifier */

/* With the verifier on a QP gets this dispatch table instead of qp_dispatch: each post counts
 * itself in on its queue around the real entry, and one that finds another thread inside the
 * same queue reports it (verify/verify.h). Off, the consumer calls the real entries and pays
 * nothing. The handle is only looked up here; the real entry checks and reports it. */
static struct sndk_qp *verify_queue_enter(struct sndk_verify_call *c, NDK_QP *pub, bool initiator,
                                          const char *call, const void *ctx)
{
    struct sndk_obj *o = sndk_obj_lookup(pub, NdkObjectTypeQp);
    if (!o)
        return NULL;
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    sndk_obj_get(o); /* [CLOSE-3]: a close during the post completes after it */
    sndk_verify_queue_enter(
        c, o, initiator ? &qp->verify_sq_callers : &qp->verify_rq_callers,
        SoftNdkVerifyPostConcurrent,
        initiator ? "initiator queue of the QP" : "receive queue of the QP", call, ctx);
    return qp;
}

static void verify_queue_leave(struct sndk_verify_call *c, struct sndk_qp *qp)
{
    if (!qp)
        return;
    sndk_verify_queue_leave(c);
    sndk_obj_put(&qp->base);
}

/* From qp_close_begin: posts still running on the QP (verify/verify.h). */
static void verify_close_begin(struct sndk_qp *qp)
{
    if (sndk_verify_on(qp->base.adapter))
        sndk_verify_close_during_post(&qp->base, atomic_load(&qp->verify_sq_callers) +
                                                     atomic_load(&qp->verify_rq_callers));
}

/* The wrapper of entry `fn`, posting on the initiator queue or not, with its NDK arguments. */
#define VERIFIED_POST(fn, initiator, call, params, args)                                           \
    static NTSTATUS fn##_verified params                                                           \
    {                                                                                              \
        struct sndk_verify_call vc_;                                                               \
        struct sndk_qp *qp_ = verify_queue_enter(&vc_, pNdkQp, (initiator), (call), RequestContext); \
        NTSTATUS st_ = fn args;                                                                    \
        verify_queue_leave(&vc_, qp_);                                                             \
        return st_;                                                                                \
    }

VERIFIED_POST(qp_send, true, "NdkSend",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge, ULONG Flags),
              (pNdkQp, RequestContext, pSgl, nSge, Flags))
VERIFIED_POST(qp_send_invalidate, true, "NdkSendAndInvalidate",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge, ULONG Flags,
               UINT32 RemoteToken),
              (pNdkQp, RequestContext, pSgl, nSge, Flags, RemoteToken))
VERIFIED_POST(qp_bind, true, "NdkBind",
              (NDK_QP * pNdkQp, PVOID RequestContext, NDK_MR *pMr, NDK_MW *pMw,
               PVOID VirtualAddress, SIZE_T Length, ULONG Flags),
              (pNdkQp, RequestContext, pMr, pMw, VirtualAddress, Length, Flags))
VERIFIED_POST(qp_fast_register, true, "NdkFastRegister",
              (NDK_QP * pNdkQp, PVOID RequestContext, NDK_MR *pMr, ULONG AdapterPageCount,
               const NDK_LOGICAL_ADDRESS *AdapterPageArray, ULONG FBO, SIZE_T Length,
               PVOID BaseVirtualAddress, ULONG Flags),
              (pNdkQp, RequestContext, pMr, AdapterPageCount, AdapterPageArray, FBO, Length,
               BaseVirtualAddress, Flags))
VERIFIED_POST(qp_invalidate, true, "NdkInvalidate",
              (NDK_QP * pNdkQp, PVOID RequestContext, NDK_OBJECT_HEADER *pNdkMrOrMw, ULONG Flags),
              (pNdkQp, RequestContext, pNdkMrOrMw, Flags))
VERIFIED_POST(qp_read, true, "NdkRead",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
               UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags),
              (pNdkQp, RequestContext, pSgl, nSge, RemoteAddress, RemoteToken, Flags))
VERIFIED_POST(qp_write, true, "NdkWrite",
              (NDK_QP * pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge,
               UINT64 RemoteAddress, UINT32 RemoteToken, ULONG Flags),
              (pNdkQp, RequestContext, pSgl, nSge, RemoteAddress, RemoteToken, Flags))
/* The receive queue takes no lock of its own (device/srq.h): two posts the consumer did not
 * serialize would race on its `posted` position and one receive would be lost. Under the
 * verifier they are named ([POST-2], at the count-in above) and serialized too, so that the
 * run goes on as the consumer meant it, as Driver Verifier reports a fault without making it
 * worse. Off, the consumer's serialization is the only one, as with a hardware provider. */
static NTSTATUS qp_receive_verified(NDK_QP *pNdkQp, PVOID RequestContext, const NDK_SGE *pSgl,
                                    ULONG nSge)
{
    struct sndk_verify_call vc;
    struct sndk_qp *qp = verify_queue_enter(&vc, pNdkQp, false, "NdkReceive", RequestContext);
    if (qp)
        sndk_mutex_lock(&qp->verify_rq_serial);
    NTSTATUS st = qp_receive(pNdkQp, RequestContext, pSgl, nSge);
    if (qp)
        sndk_mutex_unlock(&qp->verify_rq_serial);
    verify_queue_leave(&vc, qp);
    return st;
}

static const NDK_QP_DISPATCH qp_dispatch_verified = {
    .NdkCloseQp = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkFlush = qp_flush,
    .NdkSend = qp_send_verified,
    .NdkReceive = qp_receive_verified,
    .NdkBind = qp_bind_verified,
    .NdkFastRegister = qp_fast_register_verified,
    .NdkInvalidate = qp_invalidate_verified,
    .NdkRead = qp_read_verified,
    .NdkWrite = qp_write_verified,
    .NdkSendAndInvalidate = qp_send_invalidate_verified,
};

static void qp_close_begin(struct sndk_obj *o)
{
    /* [CLOSE-4]: a close starts cancelling what is pending; the connection goes with it. */
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    verify_close_begin(qp);
    sndk_mutex_lock(&qp->state_lock); /* orders against sndk_qp_attach going live */
    enum sndk_qp_state st = sndk_qp_state(qp);
    sndk_mutex_unlock(&qp->state_lock);
    if (st == SNDK_QP_CONNECTED || st == SNDK_QP_DISCONNECTING)
        sndk_conn_fail_local(qp, true);
    else
        sndk_conn_flush_receives(qp);
}

static void qp_destroy(struct sndk_obj *o)
{
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    sndk_conn_free(qp->io);
    free(qp->sq);
    free(qp->sq_iov);
    free(qp->sq_inline);
    sndk_recv_ring_destroy(&qp->rq);
    sndk_mutex_destroy(&qp->rx_lock);
    sndk_mutex_destroy(&qp->verify_rq_serial);
    sndk_mutex_destroy(&qp->tx_lock);
    sndk_mutex_destroy(&qp->state_lock);
}

static const struct sndk_obj_ops qp_ops = {
    .type = NdkObjectTypeQp, .close_begin = qp_close_begin, .destroy = qp_destroy};

/* What NdkCreateQp and NdkCreateQpWithSrq ask for (no SRQ: with_srq false, the receive queue
 * fields used; with one: they are ignored). */
struct qp_create_args {
    NDK_PD *pd;
    NDK_CQ *receive_cq, *initiator_cq;
    NDK_SRQ *srq;
    bool with_srq;
    PVOID context;
    ULONG receive_depth, initiator_depth;
    ULONG receive_max_sge, initiator_max_sge;
    ULONG inline_size;
};

static NTSTATUS qp_create_common(const struct qp_create_args *q, NDK_QP **ppNdkQp)
{
    struct sndk_pd *pd = sndk_pd_from(q->pd);
    struct sndk_cq *rcq = sndk_cq_from(q->receive_cq);
    struct sndk_cq *icq = sndk_cq_from(q->initiator_cq);
    struct sndk_srq *srq = q->with_srq ? sndk_srq_from(q->srq) : NULL;
    if (pd && sndk_verify_on(pd->base.adapter)) {
        const char *call = q->with_srq ? "NdkCreateQpWithSrq" : "NdkCreateQp";
        if (!rcq || !sndk_obj_usable(&rcq->base, pd->base.adapter))
            sndk_verify_bad_handle(&pd->base, call, "the receive CQ", q->receive_cq, NdkObjectTypeCq);
        if (!icq || !sndk_obj_usable(&icq->base, pd->base.adapter))
            sndk_verify_bad_handle(&pd->base, call, "the initiator CQ", q->initiator_cq,
                                   NdkObjectTypeCq);
        if (q->with_srq && (!srq || !sndk_obj_usable(&srq->base, pd->base.adapter)))
            sndk_verify_bad_handle(&pd->base, call, "the SRQ", q->srq, NdkObjectTypeSrq);
    }
    if (!pd || !rcq || !icq || !ppNdkQp || (q->with_srq && !srq))
        return STATUS_INVALID_PARAMETER;
    struct sndk_adapter *a = pd->base.adapter;
    /* Antecedents must be of this adapter (and the SRQ of this PD) and open. */
    if (!sndk_obj_usable(&rcq->base, a) || !sndk_obj_usable(&icq->base, a) ||
        (srq && (!sndk_obj_usable(&srq->base, a) || srq->base.holds[0] != &pd->base)))
        return STATUS_INVALID_PARAMETER;
    const NDK_ADAPTER_INFO *info = &a->info;
    if (q->initiator_depth == 0 || q->initiator_depth > info->MaxInitiatorQueueDepth ||
        q->initiator_max_sge > info->MaxInitiatorRequestSge ||
        q->inline_size > info->MaxInlineDataSize)
        return STATUS_INVALID_PARAMETER;
    if (!q->with_srq && (q->receive_depth == 0 || q->receive_depth > info->MaxReceiveQueueDepth ||
                         q->receive_max_sge > info->MaxReceiveRequestSge))
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&pd->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(a, SNDK_FCALL_QP))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_qp *qp = calloc(1, sizeof *qp);
    if (!qp)
        return STATUS_INSUFFICIENT_RESOURCES;
    /* Reads may use up to MaxReadRequestSge SGEs (it overrides the initiator limit, [POST-6]). */
    qp->sq_iov_stride = q->initiator_max_sge > info->MaxReadRequestSge ? q->initiator_max_sge
                                                                       : info->MaxReadRequestSge;
    if (qp->sq_iov_stride == 0)
        qp->sq_iov_stride = 1;
    /* a power of two of slots, at least the depth (qp_state.h: the counters' wrap) */
    size_t slots = 1;
    while (slots < q->initiator_depth)
        slots <<= 1;
    qp->sq_mask = (uint32_t)(slots - 1);
    qp->sq = calloc(slots, sizeof *qp->sq);
    qp->sq_iov = calloc(slots * qp->sq_iov_stride, sizeof *qp->sq_iov);
    qp->sq_inline = q->inline_size ? malloc(slots * q->inline_size) : NULL;
    if (!qp->sq || !qp->sq_iov || (q->inline_size && !qp->sq_inline) ||
        !sndk_recv_ring_init(&qp->rq, q->with_srq ? 0 : q->receive_depth,
                             q->with_srq ? 0 : q->receive_max_sge)) {
        free(qp->sq);
        free(qp->sq_iov);
        free(qp->sq_inline);
        free(qp);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    qp->pd = pd;
    qp->rcq = rcq;
    qp->icq = icq;
    qp->srq = srq;
    qp->context = q->context;
    qp->initiator_depth = q->initiator_depth;
    qp->initiator_max_sge = q->initiator_max_sge;
    qp->inline_size = q->inline_size;
    qp->recv_max_sge = srq ? srq->ring.max_sge : q->receive_max_sge;
    atomic_init(&qp->state, SNDK_QP_IDLE);
    atomic_init(&qp->sq_head, 0);
    sndk_mutex_init_ranked(&qp->state_lock, SNDK_LOCK_QP_STATE);
    sndk_mutex_init_ranked(&qp->tx_lock, SNDK_LOCK_QP_TX);
    sndk_mutex_init_ranked(&qp->rx_lock, SNDK_LOCK_QP_RX);
    sndk_mutex_init_ranked(&qp->verify_rq_serial, SNDK_LOCK_QP_VERIFY_POST);
    sndk_obj_init(&qp->base, a, &qp_ops, sndk_verify_on(a) ? &qp_dispatch_verified : &qp_dispatch);
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
    struct qp_create_args q = {.pd = pNdkPd,
                               .receive_cq = pReceiveCq,
                               .initiator_cq = pInitiatorCq,
                               .context = QPContext,
                               .receive_depth = ReceiveQueueDepth,
                               .initiator_depth = InitiatorQueueDepth,
                               .receive_max_sge = MaxReceiveRequestSge,
                               .initiator_max_sge = MaxInitiatorRequestSge,
                               .inline_size = InlineDataSize};
    return qp_create_common(&q, ppNdkQp);
}

NTSTATUS sndk_qp_create_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                 ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                 NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                 NDK_QP **ppNdkQp)
{
    (void)CreateCompletion;
    (void)RequestContext;
    struct qp_create_args q = {.pd = pNdkPd,
                               .receive_cq = pReceiveCq,
                               .initiator_cq = pInitiatorCq,
                               .srq = pSrq,
                               .with_srq = true,
                               .context = QPContext,
                               .initiator_depth = InitiatorQueueDepth,
                               .initiator_max_sge = MaxInitiatorRequestSge,
                               .inline_size = InlineDataSize};
    return qp_create_common(&q, ppNdkQp);
}
