/* Memory window (spec/ndkpi.md §2.6, §5.5). Bound and invalidated by QP work requests; until
 * then it owns an STag index whose key changes on every bind. */
#include <stdlib.h>

#include "core/mr.h"

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
    sndk_stag_free(&o->adapter->stags, sndk_container_of(o, struct sndk_mw, base)->stag);
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
    struct sndk_mw *mw = calloc(1, sizeof *mw);
    if (!mw)
        return STATUS_INSUFFICIENT_RESOURCES;
    mw->pd = pd;
    sndk_obj_init(&mw->base, pd->base.adapter, &mw_ops, &mw_dispatch);
    sndk_obj_hold(&mw->base, &pd->base);
    mw->stag = sndk_stag_alloc(&pd->base.adapter->stags, &mw->base);
    if (!mw->stag) {
        sndk_obj_abandon(&mw->base);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    *ppNdkMw = &mw->base.pub.mw;
    return STATUS_SUCCESS;
}
