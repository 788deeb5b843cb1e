/* Logical address mappings (docs/ndk-rules.md#ext). A user-space provider has no adapter
 * logical addresses; softndk's are the virtual addresses of 4 KiB adapter pages, so a LAM is
 * the page list of a virtually contiguous range and the privileged token addresses memory by
 * those VAs. */
#include <stdlib.h>

#include "device/adapter_state.h"
#include "util/log.h"

#define LAM_HEADER offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray)

NTSTATUS sndk_lam_build(NDK_ADAPTER *pNdkAdapter, MDL *Mdl, SIZE_T Length,
                        NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext,
                        NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM, ULONG *pLAMSize, ULONG *pFBO)
{
    (void)RequestCompletion; /* mappings are built inline */
    (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !Mdl || !pLAMSize || !pFBO || Length == 0)
        return STATUS_INVALID_PARAMETER;
    if (!sndk_mdl_contiguous(Mdl, Length))
        return STATUS_INVALID_PARAMETER;
    uintptr_t va = (uintptr_t)MmGetMdlVirtualAddress(Mdl);
    uintptr_t first = va & ~(uintptr_t)(NDK_ADAPTER_PAGE_SIZE - 1);
    ULONG fbo = (ULONG)(va - first);
    uint64_t pages = ((uint64_t)fbo + Length + NDK_ADAPTER_PAGE_SIZE - 1) / NDK_ADAPTER_PAGE_SIZE;
    uint64_t need = LAM_HEADER + pages * sizeof(NDK_LOGICAL_ADDRESS);
    if (need > 0xFFFFFFFFu)
        return STATUS_INSUFFICIENT_RESOURCES;
    if (!pNdkLAM || *pLAMSize < need) {
        *pLAMSize = (ULONG)need;
        return STATUS_BUFFER_TOO_SMALL;
    }
    pNdkLAM->AdapterContext = a;
    pNdkLAM->AdapterPageCount = (ULONG)pages;
    for (uint64_t i = 0; i < pages; i++)
        pNdkLAM->AdapterPageArray[i].QuadPart = (int64_t)(first + i * NDK_ADAPTER_PAGE_SIZE);
    *pLAMSize = (ULONG)need;
    *pFBO = fbo;
    return STATUS_SUCCESS;
}

void sndk_lam_release(NDK_ADAPTER *pNdkAdapter, NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM)
{
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !pNdkLAM || pNdkLAM->AdapterContext != a) {
        sndk_err("lam", "NdkReleaseLAM(%p): not a mapping of this adapter", (void *)pNdkLAM);
        return;
    }
    /* Nothing is pinned or allocated per mapping; mark it released so a second release or a
     * use after release is recognisable. */
    pNdkLAM->AdapterContext = NULL;
}
