/* Memory window (docs/ndk-rules.md#mem). Bound and invalidated by QP work requests; until
 * then it owns an STag index whose key changes on every bind. */
#include <stdlib.h>

#include "device/access.h"
#include "faults/faults.h"
#include "device/mr.h"

NTSTATUS sndk_mw_bind(struct sndk_mw *mw, struct sndk_mr *mr, struct sndk_pd *pd, uint64_t va,
                      uint64_t len, unsigned access)
{
    if (mw->pd != pd || mr->pd != pd || len == 0 || len > mw->base.adapter->info.MaxWindowSize)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&mr->base) || sndk_obj_closing(&mw->base))
        return STATUS_INVALID_DEVICE_STATE;
    struct sndk_stag_table *t = mw->base.adapter->stags;
    NTSTATUS st = STATUS_SUCCESS;
    struct sndk_mr *put = NULL;
    sndk_mutex_lock(&t->lock);
    if (mr->state != SNDK_MR_REGISTERED && mr->state != SNDK_MR_FR_VALID)
        st = STATUS_ACCESS_VIOLATION; /* no registered range to window */
    else if (va < mr->va || len > mr->length || va - mr->va > mr->length - len)
        st = STATUS_ACCESS_VIOLATION; /* the window must lie inside the MR */
    else if ((access & SNDK_ACCESS_REMOTE_WRITE) && !(mr->access & SNDK_ACCESS_LOCAL_WRITE))
        st = STATUS_ACCESS_VIOLATION; /* [MEM-8]: remote write needs a locally writable MR */
    if (st == STATUS_SUCCESS) {
        put = sndk_mw_unbind_locked(mw);
        sndk_obj_get(&mr->base); /* the MR's close stays pending while bound */
        atomic_fetch_add_explicit(&mr->windows, 1, memory_order_acq_rel);
        mw->mr = mr;
        mw->va = (uintptr_t)va;
        mw->length = len;
        mw->access = access;
        mw->stag = sndk_stag_rekey_locked(t, mw->stag);
        mw->bound = true;
    }
    sndk_mutex_unlock(&t->lock);
    if (put)
        sndk_obj_put(&put->base);
    return st;
}

static UINT32 mw_token(NDK_MW *pNdkMw)
{
    struct sndk_obj *o = sndk_obj_check(pNdkMw, NdkObjectTypeMw);
    return o ? sndk_container_of(o, struct sndk_mw, base)->stag : 0;
}

static const NDK_MW_DISPATCH mw_dispatch = {
    .NdkCloseMw = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkGetRemoteTokenFromMw = mw_token,
};

static void mw_destroy(struct sndk_obj *o)
{
    struct sndk_mw *mw = sndk_container_of(o, struct sndk_mw, base);
    struct sndk_stag_table *t = o->adapter->stags;
    sndk_mutex_lock(&t->lock);
    struct sndk_mr *put = sndk_mw_unbind_locked(mw); /* closing a bound window unbinds it */
    sndk_mutex_unlock(&t->lock);
    if (put)
        sndk_obj_put(&put->base);
    sndk_stag_free(t, mw->stag);
}

static const struct sndk_obj_ops mw_ops = {.type = NdkObjectTypeMw, .destroy = mw_destroy};

NTSTATUS sndk_mw_create(NDK_PD *pNdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_MW **ppNdkMw)
{
    (void)CreateCompletion;
    (void)RequestContext;
    struct sndk_pd *pd = sndk_pd_from(pNdkPd);
    if (!pd || !ppNdkMw)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&pd->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(pd->base.adapter, SNDK_FCALL_MW))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_mw *mw = calloc(1, sizeof *mw);
    if (!mw)
        return STATUS_INSUFFICIENT_RESOURCES;
    mw->pd = pd;
    sndk_obj_init(&mw->base, pd->base.adapter, &mw_ops, &mw_dispatch);
    sndk_obj_hold(&mw->base, &pd->base);
    mw->stag = sndk_stag_alloc(pd->base.adapter->stags, &mw->base);
    if (!mw->stag) {
        sndk_obj_abandon(&mw->base);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    *ppNdkMw = &mw->base.pub.mw;
    return STATUS_SUCCESS;
}
