/* Protection domain: parent of MRs, MWs, SRQs and QPs; owner of the privileged token. */
#include "core/create.h"
#include "device/pd_state.h"
#include "device/mr.h"
#include "device/srq.h"
#include "faults/faults.h"

#include <stdlib.h>

#include "util/log.h"

static VOID get_privileged_token(NDK_PD *pNdkPd, UINT32 *pToken)
{
    struct sndk_pd *pd = sndk_pd_from(pNdkPd);
    if (pToken)
        *pToken = pd ? pd->privileged_stag : 0;
}

static const NDK_PD_DISPATCH pd_dispatch = {
    .NdkClosePd = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkCreateMr = sndk_mr_create,
    .NdkCreateMw = sndk_mw_create,
    .NdkCreateSrq = sndk_srq_create,
    .NdkCreateQp = sndk_qp_create,
    .NdkCreateQpWithSrq = sndk_qp_create_with_srq,
    .NdkGetPrivilegedMemoryRegionToken = get_privileged_token,
};

static void pd_destroy(struct sndk_obj *o)
{
    struct sndk_pd *pd = sndk_container_of(o, struct sndk_pd, base);
    sndk_stag_free(o->adapter->stags, pd->privileged_stag);
}

static const struct sndk_obj_ops pd_ops = {.type = NdkObjectTypePd, .destroy = pd_destroy};

NTSTATUS sndk_pd_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_PD **ppNdkPd)
{
    (void)CreateCompletion; /* creates complete inline */
    (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ppNdkPd)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(a, SNDK_FCALL_PD))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_pd *pd = calloc(1, sizeof *pd);
    if (!pd)
        return STATUS_INSUFFICIENT_RESOURCES;
    sndk_obj_init(&pd->base, a, &pd_ops, &pd_dispatch);
    sndk_obj_hold(&pd->base, &a->base);
    pd->privileged_stag = sndk_stag_alloc(a->stags, &pd->base);
    if (!pd->privileged_stag) {
        sndk_obj_abandon(&pd->base);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    *ppNdkPd = &pd->base.pub.pd;
    return STATUS_SUCCESS;
}
