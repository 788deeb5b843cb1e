/* The CQ rig of the verifier suites (test_verify.c, test_reentry.c): on one adapter a PD, a CQ
 * whose notification the suite gives, a QP on that CQ and an MR over the suite's buffer, so that
 * a receive posted and then flushed fires the notification with no peer. One copy for the
 * suites' rigs, which differ only in what their notification does. */
#ifndef SOFTNDK_TESTS_VERIFY_RIG_H
#define SOFTNDK_TESTS_VERIFY_RIG_H

#include <stdint.h>

#include "fixture.h"

/* Creates them on a: the CQ 64 deep, calling notify(ctx); the QP 8 receives and 8 initiator
 * requests deep; the MR registered over buf[0, len) for local write. */
static inline void rig_objects_open(NDK_ADAPTER *a, NDK_FN_CQ_NOTIFICATION_CALLBACK notify,
                                    void *ctx, uint8_t *buf, ULONG len, NDK_PD **pd, NDK_CQ **cq,
                                    NDK_QP **qp, NDK_MR **mr)
{
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, pd), STATUS_SUCCESS);
    CHECK_STATUS(a->Dispatch->NdkCreateCq(a, 64, notify, ctx, NULL, ndk_create_never, NULL, cq),
                 STATUS_SUCCESS);
    CHECK_STATUS((*pd)->Dispatch->NdkCreateQp(*pd, *cq, *cq, NULL, 8, 8, 1, 1, 0, ndk_create_never,
                                              NULL, qp),
                 STATUS_SUCCESS);
    CHECK_STATUS((*pd)->Dispatch->NdkCreateMr(*pd, FALSE, ndk_create_never, NULL, mr),
                 STATUS_SUCCESS);
    MDL mdl;
    MmInitializeMdl(&mdl, buf, len);
    CHECK_STATUS((*mr)->Dispatch->NdkRegisterMr(*mr, &mdl, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                                ndk_request_never, NULL),
                 STATUS_SUCCESS);
}

/* The first 64 bytes of buf, through mr: what the rigs post their receives on. */
static inline NDK_SGE rig_sge(uint8_t *buf, NDK_MR *mr)
{
    NDK_SGE sge = {.LogicalAddress.QuadPart = (int64_t)(uintptr_t)buf,
                   .Length = 64,
                   .MemoryRegionToken = mr->Dispatch->NdkGetLocalTokenFromMr(mr)};
    return sge;
}

#endif /* SOFTNDK_TESTS_VERIFY_RIG_H */
