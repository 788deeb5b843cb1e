#include "ndk_objects.h"

#include "harness.h"

NTSTATUS ndk_close_any(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_COMPLETION cb, void *ctx)
{
    switch (h->ObjectType) {
    case NdkObjectTypePd:
        return ((NDK_PD *)h)->Dispatch->NdkClosePd(h, cb, ctx);
    case NdkObjectTypeCq:
        return ((NDK_CQ *)h)->Dispatch->NdkCloseCq(h, cb, ctx);
    case NdkObjectTypeMr:
        return ((NDK_MR *)h)->Dispatch->NdkCloseMr(h, cb, ctx);
    case NdkObjectTypeMw:
        return ((NDK_MW *)h)->Dispatch->NdkCloseMw(h, cb, ctx);
    case NdkObjectTypeSrq:
        return ((NDK_SRQ *)h)->Dispatch->NdkCloseSrq(h, cb, ctx);
    case NdkObjectTypeQp:
        return ((NDK_QP *)h)->Dispatch->NdkCloseQp(h, cb, ctx);
    case NdkObjectTypeConnector:
        return ((NDK_CONNECTOR *)h)->Dispatch->NdkCloseConnector(h, cb, ctx);
    case NdkObjectTypeListener:
        return ((NDK_LISTENER *)h)->Dispatch->NdkCloseListener(h, cb, ctx);
    case NdkObjectTypeSharedEndpoint:
        return ((NDK_SHARED_ENDPOINT *)h)->Dispatch->NdkCloseSharedEndpoint(h, cb, ctx);
    default:
        harness_fail(__FILE__, __LINE__, "close of an object of type %d", (int)h->ObjectType);
    }
}

void ndk_create_never(void *ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)status, (void)obj;
    harness_fail(__FILE__, __LINE__, "create completion called: creates never pend in softndk");
}

void ndk_request_never(void *ctx, NTSTATUS status)
{
    (void)ctx, (void)status;
    harness_fail(__FILE__, __LINE__, "request completion called for an inline request");
}
