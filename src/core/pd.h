#ifndef SOFTNDK_CORE_PD_H
#define SOFTNDK_CORE_PD_H

#include "core/adapter.h"

struct sndk_pd {
    struct sndk_obj base;
    uint32_t privileged_stag; /* local read/write of LAM logical addresses; never remote */
};

static inline struct sndk_pd *sndk_pd_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypePd);
    return o ? sndk_container_of(o, struct sndk_pd, base) : NULL;
}

/* PD dispatch slots implemented in the object files. */
NTSTATUS sndk_mr_create(NDK_PD *pNdkPd, BOOLEAN FastRegister,
                        NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                        NDK_MR **ppNdkMr);
NTSTATUS sndk_mw_create(NDK_PD *pNdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_MW **ppNdkMw);
NTSTATUS sndk_srq_create(NDK_PD *pNdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge,
                         ULONG NotifyThreshold, NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification,
                         PVOID SrqNotificationContext, GROUP_AFFINITY *Affinity,
                         NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                         NDK_SRQ **ppNdkSrq);
NTSTATUS sndk_qp_create(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                        PVOID QPContext, ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                        ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                        ULONG InlineDataSize, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_QP **ppNdkQp);
NTSTATUS sndk_qp_create_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                 ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                 NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                 NDK_QP **ppNdkQp);

#endif
