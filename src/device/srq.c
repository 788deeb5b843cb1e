/* Shared receive queue (docs/ndk-rules.md#srq). */
#include "device/srq.h"
#include "faults/faults.h"
#include "verify/verify.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

bool sndk_recv_ring_init(struct sndk_recv_ring *r, uint32_t depth, uint32_t max_sge)
{
    r->depth = depth;
    r->max_sge = max_sge;
    atomic_init(&r->posted, 0);
    atomic_init(&r->taken, 0);
    r->stride = sizeof(struct sndk_recv_wqe) + (size_t)max_sge * sizeof(NDK_SGE);
    r->slots = depth ? calloc(depth, r->stride) : NULL;
    return depth == 0 || r->slots != NULL;
}

void sndk_recv_ring_destroy(struct sndk_recv_ring *r)
{
    free(r->slots);
    r->slots = NULL;
}

static struct sndk_recv_wqe *slot_of(const struct sndk_recv_ring *r, uint64_t pos)
{
    /* slots is calloc memory and stride a multiple of the WQE alignment */
    size_t at = (size_t)(pos % r->depth) * r->stride;
    return (struct sndk_recv_wqe *)(void *)(r->slots + at);
}

struct sndk_recv_wqe *sndk_recv_ring_at(const struct sndk_recv_ring *r, uint32_t i)
{
    return slot_of(r, atomic_load_explicit(&r->taken, memory_order_relaxed) + i);
}

uint32_t sndk_recv_ring_count(const struct sndk_recv_ring *r)
{
    /* taken first: a posted read after it is never behind it */
    uint64_t taken = atomic_load_explicit(&r->taken, memory_order_acquire);
    return (uint32_t)(atomic_load_explicit(&r->posted, memory_order_acquire) - taken);
}

NTSTATUS sndk_recv_ring_push(struct sndk_recv_ring *r, void *context, const NDK_SGE *sgl,
                             ULONG nsge, ULONG max_transfer, void (*before_publish)(void *),
                             void *ctx)
{
    if (nsge && !sgl)
        return STATUS_INVALID_PARAMETER;
    if (nsge > r->max_sge)
        return STATUS_DATA_OVERRUN;
    uint64_t bytes = 0;
    for (ULONG i = 0; i < nsge; i++)
        bytes += sgl[i].Length;
    if (bytes > max_transfer)
        return STATUS_DATA_OVERRUN;
    uint64_t posted = atomic_load_explicit(&r->posted, memory_order_relaxed);
    /* acquire: the taker's copy out of the slot we are about to reuse is done */
    if (posted - atomic_load_explicit(&r->taken, memory_order_acquire) == r->depth)
        return STATUS_NO_MORE_ENTRIES;
    struct sndk_recv_wqe *w = slot_of(r, posted);
    w->context = context;
    w->nsge = nsge;
    w->bytes = bytes;
    if (nsge)
        memcpy(w->sge, sgl, nsge * sizeof *sgl);
    if (before_publish)
        before_publish(ctx);
    atomic_store_explicit(&r->posted, posted + 1, memory_order_release);
    return STATUS_SUCCESS;
}

void sndk_recv_ring_drop(struct sndk_recv_ring *r, uint32_t n)
{
    uint64_t taken = atomic_load_explicit(&r->taken, memory_order_relaxed);
    atomic_store_explicit(&r->taken, taken + n, memory_order_release);
}

/* The notification's callback (device/notify.h): a progress thread, no lock held. One that
 * re-arms with NdkModifySrq below the count makes the next one due: it follows this one. */
static void srq_notify_call(struct sndk_notify *n, NTSTATUS st)
{
    struct sndk_srq *srq = sndk_container_of(n, struct sndk_srq, notify);
    SNDK_CALLBACK(&srq->base, SNDK_CB_SRQ_NOTIFICATION, srq->notify_ctx,
                  srq->notify_cb(srq->notify_ctx, st));
}

/* The queued count is below the threshold and the SRQ is armed: notify once, disarm.
 * Caller holds srq->lock. */
static void srq_check_threshold_locked(struct sndk_srq *srq)
{
    sndk_assert_held(&srq->lock);
    if (!srq->armed || !srq->notify_cb || sndk_recv_ring_count(&srq->ring) >= srq->threshold)
        return;
    srq->armed = false;
    sndk_notify_raise(&srq->notify, STATUS_SUCCESS);
}

bool sndk_recv_ring_take(struct sndk_recv_ring *r, struct sndk_recv_wqe *out)
{
    uint64_t taken = atomic_load_explicit(&r->taken, memory_order_relaxed);
    /* acquire: the poster's copy into the slot is visible */
    if (atomic_load_explicit(&r->posted, memory_order_acquire) == taken)
        return false;
    const struct sndk_recv_wqe *w = slot_of(r, taken);
    out->context = w->context;
    out->nsge = w->nsge;
    out->bytes = w->bytes;
    if (w->nsge)
        memcpy(out->sge, w->sge, w->nsge * sizeof w->sge[0]);
    atomic_store_explicit(&r->taken, taken + 1, memory_order_release);
    return true;
}

bool sndk_srq_take(struct sndk_srq *srq, struct sndk_recv_wqe *out)
{
    sndk_mutex_lock(&srq->lock);
    bool got = sndk_recv_ring_take(&srq->ring, out);
    if (got)
        srq_check_threshold_locked(srq);
    sndk_mutex_unlock(&srq->lock);
    return got;
}

/* Receiver not ready: connections whose Send waits for a receive of this SRQ. */
void sndk_srq_rnr_wait(struct sndk_srq *srq, struct sndk_rnr_waiter *w)
{
    sndk_mutex_lock(&srq->lock);
    if (!w->pprev) {
        w->next = srq->rnr_waiters;
        if (w->next)
            w->next->pprev = &w->next;
        w->pprev = &srq->rnr_waiters;
        srq->rnr_waiters = w;
    }
    sndk_mutex_unlock(&srq->lock);
}

void sndk_srq_rnr_done(struct sndk_srq *srq, struct sndk_rnr_waiter *w)
{
    sndk_mutex_lock(&srq->lock);
    if (w->pprev) {
        *w->pprev = w->next;
        if (w->next)
            w->next->pprev = w->pprev;
        w->next = NULL;
        w->pprev = NULL;
    }
    sndk_mutex_unlock(&srq->lock);
}

/* A receive was posted: every waiter may take it (the first pass to run wins; the others
 * wait on). */
static void srq_rnr_kick_locked(struct sndk_srq *srq)
{
    sndk_assert_held(&srq->lock);
    for (struct sndk_rnr_waiter *w = srq->rnr_waiters; w; w = w->next)
        w->kick(w);
}

static NTSTATUS srq_receive(NDK_SRQ *pNdkSrq, PVOID RequestContext, const NDK_SGE *pSgl, ULONG nSge)
{
    struct sndk_srq *srq = sndk_srq_from(pNdkSrq);
    if (!srq)
        return STATUS_INVALID_PARAMETER;
    sndk_mutex_lock(&srq->lock);
    NTSTATUS st = sndk_recv_ring_push(&srq->ring, RequestContext, pSgl, nSge,
                                      srq->base.adapter->info.MaxTransferLength, NULL, NULL);
    /* Queued: a Send may fill it and its completion callback post again before we return
     * (verify.h, struct sndk_verify_call); takes wait for the lock, so the commit may follow
     * the publication here. */
    if (st == STATUS_SUCCESS && sndk_verify_on(srq->base.adapter))
        sndk_verify_call_commit(&srq->verify_callers);
    if (st == STATUS_SUCCESS && srq->rnr_waiters)
        srq_rnr_kick_locked(srq);
    sndk_mutex_unlock(&srq->lock);
    return st;
}

static NTSTATUS srq_modify(NDK_SRQ *pNdkSrq, ULONG SrqDepth, ULONG NotifyThreshold,
                           NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    (void)RequestCompletion; /* completes inline */
    (void)RequestContext;
    struct sndk_srq *srq = sndk_srq_from(pNdkSrq);
    if (!srq || SrqDepth > srq->base.adapter->info.MaxSrqDepth)
        return STATUS_INVALID_PARAMETER;
    struct sndk_recv_ring fresh = {0};
    if (SrqDepth && !sndk_recv_ring_init(&fresh, SrqDepth, srq->ring.max_sge))
        return STATUS_INSUFFICIENT_RESOURCES;
    sndk_mutex_lock(&srq->lock);
    if (SrqDepth) {
        uint32_t queued = sndk_recv_ring_count(&srq->ring);
        if (queued > SrqDepth) {
            sndk_mutex_unlock(&srq->lock);
            sndk_recv_ring_destroy(&fresh);
            return STATUS_INVALID_PARAMETER;
        }
        for (uint32_t i = 0; i < queued; i++)
            memcpy(fresh.slots + (size_t)i * fresh.stride, sndk_recv_ring_at(&srq->ring, i),
                   fresh.stride);
        atomic_store_explicit(&fresh.posted, queued, memory_order_relaxed); /* under lock */
        struct sndk_recv_ring old = srq->ring;
        srq->ring = fresh;
        fresh = old;
    }
    if (NotifyThreshold) {
        srq->threshold = NotifyThreshold;
        srq->armed = true;
        srq_check_threshold_locked(srq); /* [SRQ-4]: already below => notify now */
    }
    sndk_mutex_unlock(&srq->lock);
    sndk_recv_ring_destroy(&fresh);
    return STATUS_SUCCESS;
}

/* [SRQ-7] under the verifier: with it on an SRQ gets srq_dispatch_verified, whose
 * NdkSrqReceive counts itself in around the real one (verify/verify.h); off, nothing is paid. */
static NTSTATUS srq_receive_verified(NDK_SRQ *pNdkSrq, PVOID RequestContext, const NDK_SGE *pSgl,
                                     ULONG nSge)
{
    struct sndk_obj *o = sndk_obj_lookup(pNdkSrq, NdkObjectTypeSrq);
    if (!o)
        return srq_receive(pNdkSrq, RequestContext, pSgl, nSge); /* it reports the handle */
    struct sndk_srq *srq = sndk_container_of(o, struct sndk_srq, base);
    sndk_obj_get(o); /* [CLOSE-3]: a close during the post completes after it */
    struct sndk_verify_call vc;
    sndk_verify_queue_enter(&vc, o, &srq->verify_callers, SoftNdkVerifySrqConcurrent, "SRQ",
                            "NdkSrqReceive", RequestContext);
    NTSTATUS st = srq_receive(pNdkSrq, RequestContext, pSgl, nSge);
    sndk_verify_queue_leave(&vc);
    sndk_obj_put(o);
    return st;
}

static const NDK_SRQ_DISPATCH srq_dispatch_verified = {
    .NdkCloseSrq = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkModifySrq = srq_modify,
    .NdkSrqReceive = srq_receive_verified,
};

static const NDK_SRQ_DISPATCH srq_dispatch = {
    .NdkCloseSrq = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkModifySrq = srq_modify,
    .NdkSrqReceive = srq_receive,
};

static void srq_close_begin(struct sndk_obj *o)
{
    struct sndk_srq *srq = sndk_container_of(o, struct sndk_srq, base);
    if (sndk_verify_on(o->adapter)) /* [CLOSE-3] (verify/verify.h) */
        sndk_verify_close_during_post(o, atomic_load(&srq->verify_callers));
    sndk_mutex_lock(&srq->lock);
    srq->armed = false;
    sndk_notify_drop(&srq->notify);
    sndk_mutex_unlock(&srq->lock);
}

static void srq_destroy(struct sndk_obj *o)
{
    struct sndk_srq *srq = sndk_container_of(o, struct sndk_srq, base);
    /* Receives still queued belong to no QP and have no CQ to complete to: dropped (docs). */
    uint32_t queued = sndk_recv_ring_count(&srq->ring);
    if (queued)
        sndk_debug("srq", "SRQ %p closed with %u receives queued", (void *)srq, queued);
    sndk_recv_ring_destroy(&srq->ring);
    sndk_mutex_destroy(&srq->lock);
}

static const struct sndk_obj_ops srq_ops = {
    .type = NdkObjectTypeSrq, .close_begin = srq_close_begin, .destroy = srq_destroy};

NTSTATUS sndk_srq_create(NDK_PD *pNdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge,
                         ULONG NotifyThreshold, NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification,
                         PVOID SrqNotificationContext, GROUP_AFFINITY *Affinity,
                         NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                         NDK_SRQ **ppNdkSrq)
{
    (void)Affinity;
    (void)CreateCompletion;
    (void)RequestContext;
    struct sndk_pd *pd = sndk_pd_from(pNdkPd);
    if (!pd || !ppNdkSrq)
        return STATUS_INVALID_PARAMETER;
    const NDK_ADAPTER_INFO *info = &pd->base.adapter->info;
    if (SrqDepth == 0 || SrqDepth > info->MaxSrqDepth ||
        MaxReceiveRequestSge > info->MaxReceiveRequestSge)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&pd->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(pd->base.adapter, SNDK_FCALL_SRQ))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_srq *srq = calloc(1, sizeof *srq);
    if (!srq)
        return STATUS_INSUFFICIENT_RESOURCES;
    if (!sndk_recv_ring_init(&srq->ring, SrqDepth, MaxReceiveRequestSge)) {
        free(srq);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    srq->notify_cb = SrqNotification;
    srq->notify_ctx = SrqNotificationContext;
    srq->threshold = NotifyThreshold;
    srq->armed = SrqNotification && NotifyThreshold > 0;
    sndk_mutex_init_ranked(&srq->lock, SNDK_LOCK_SRQ);
    sndk_notify_init(&srq->notify, &srq->base, &srq->lock, srq_notify_call);
    sndk_obj_init(&srq->base, pd->base.adapter, &srq_ops,
                  sndk_verify_on(pd->base.adapter) ? &srq_dispatch_verified : &srq_dispatch);
    sndk_obj_hold(&srq->base, &pd->base);
    *ppNdkSrq = &srq->base.pub.srq;
    return STATUS_SUCCESS;
}
