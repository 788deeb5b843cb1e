/* Memory region (docs/ndk-rules.md#mem): NdkRegisterMr kind and fast-register kind. The VA
 * range is an index for peers and SGEs; the region's memory is the consumer's, kept valid by it
 * while registered (its "locked pages"). */
#include "device/mr.h"
#include "faults/faults.h"

#include <stdlib.h>

#include "device/access.h"
#include "util/log.h"
#include "observe/trace.h"

static const char *const mr_state_names[SNDK_MR_STATE_COUNT] = {
    [SNDK_MR_UNREGISTERED] = "unregistered",
    [SNDK_MR_REGISTERED] = "registered",
    [SNDK_MR_FR_UNINITIALIZED] = "fr-uninitialized",
    [SNDK_MR_FR_INVALID] = "fr-invalid",
    [SNDK_MR_FR_VALID] = "fr-valid",
};

const char *sndk_mr_state_name(enum sndk_mr_state s)
{
    return (unsigned)s < SNDK_MR_STATE_COUNT ? mr_state_names[s] : "?";
}

static void mr_set_state(struct sndk_mr *mr, enum sndk_mr_state next)
{
    sndk_debug("mr", "MR %p: %s => %s", (void *)mr, sndk_mr_state_name(mr->state),
               sndk_mr_state_name(next));
    mr->state = next;
}

bool sndk_mdl_contiguous(const MDL *mdl, SIZE_T len)
{
    SIZE_T covered = 0;
    uintptr_t expect = (uintptr_t)MmGetMdlVirtualAddress(mdl);
    for (const MDL *m = mdl; m && covered < len; m = m->Next) {
        uintptr_t va = (uintptr_t)MmGetMdlVirtualAddress(m);
        if (va != expect)
            return false;
        covered += MmGetMdlByteCount(m);
        if (expect + MmGetMdlByteCount(m) < expect)
            return false; /* wraps the address space */
        expect += MmGetMdlByteCount(m);
    }
    return covered >= len;
}

static NTSTATUS mr_register(NDK_MR *pNdkMr, MDL *Mdl, SIZE_T Length, ULONG Flags,
                            NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    (void)RequestCompletion; /* registration completes inline */
    (void)RequestContext;
    struct sndk_mr *mr = sndk_mr_from(pNdkMr);
    if (!mr || !Mdl || mr->fast)
        return STATUS_INVALID_PARAMETER;
    if (mr->state != SNDK_MR_UNREGISTERED)
        return STATUS_INVALID_DEVICE_STATE;
    const ULONG known = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                        NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_RDMA_READ_SINK;
    /* Remote write is 0x5: its 0x4 bit alone (without local write) is not a valid right. */
    if ((Flags & ~known) || ((Flags & 0x4) && !(Flags & NDK_MR_FLAG_ALLOW_LOCAL_WRITE)))
        return STATUS_INVALID_PARAMETER;
    if (Length == 0 || Length > mr->base.adapter->info.MaxRegistrationSize)
        return STATUS_INVALID_PARAMETER;
    if (!sndk_mdl_contiguous(Mdl, Length))
        return STATUS_INVALID_PARAMETER;
    uintptr_t va = (uintptr_t)MmGetMdlVirtualAddress(Mdl);
    if (va == 0 || va + Length < va)
        return STATUS_INVALID_PARAMETER; /* zero-based VAs are not supported ([MEM-2]) */
    if (sndk_fault_call(mr->base.adapter, SNDK_FCALL_REGISTER))
        return STATUS_INSUFFICIENT_RESOURCES;
    unsigned access = SNDK_ACCESS_LOCAL_READ;
    if (Flags & NDK_MR_FLAG_ALLOW_LOCAL_WRITE)
        access |= SNDK_ACCESS_LOCAL_WRITE;
    if (Flags & NDK_MR_FLAG_ALLOW_REMOTE_READ)
        access |= SNDK_ACCESS_REMOTE_READ;
    if ((Flags & NDK_MR_FLAG_ALLOW_REMOTE_WRITE) == NDK_MR_FLAG_ALLOW_REMOTE_WRITE)
        access |= SNDK_ACCESS_REMOTE_WRITE;
    if (Flags & NDK_MR_FLAG_RDMA_READ_SINK)
        access |= SNDK_ACCESS_READ_SINK;
    /* A fresh key on every registration: tokens handed out before are stale now. The fields
     * change under the table lock so that the data path's access check sees them whole. */
    struct sndk_stag_table *t = mr->base.adapter->stags;
    sndk_mutex_lock(&t->lock);
    mr->va = va;
    mr->length = Length;
    mr->access = access;
    mr->stag = sndk_stag_rekey_locked(t, mr->stag);
    mr_set_state(mr, SNDK_MR_REGISTERED);
    uint32_t stag = mr->stag;
    sndk_mutex_unlock(&t->lock);
    /* What a peer may reach, and through which token: the trace shows every exposure. */
    SNDK_TRACE("api.NdkRegisterMr", "MR", mr,
               "\"len\":%llu,\"flags\":\"0x%x\",\"token\":\"0x%08x\"", (unsigned long long)Length,
               (unsigned)Flags, stag);
    return STATUS_SUCCESS;
}

static NTSTATUS mr_deregister(NDK_MR *pNdkMr, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                              PVOID RequestContext)
{
    (void)RequestCompletion;
    (void)RequestContext;
    struct sndk_mr *mr = sndk_mr_from(pNdkMr);
    if (!mr || mr->fast)
        return STATUS_INVALID_PARAMETER;
    if (mr->state != SNDK_MR_REGISTERED ||
        atomic_load_explicit(&mr->windows, memory_order_acquire) != 0)
        return STATUS_INVALID_DEVICE_STATE;
    struct sndk_stag_table *t = mr->base.adapter->stags;
    sndk_mutex_lock(&t->lock);
    mr->stag = sndk_stag_rekey_locked(t, mr->stag);
    mr->access = 0;
    mr_set_state(mr, SNDK_MR_UNREGISTERED);
    sndk_mutex_unlock(&t->lock);
    return STATUS_SUCCESS;
}

static NTSTATUS mr_initialize_fast_register(NDK_MR *pNdkMr, ULONG AdapterPageCount,
                                            BOOLEAN RemoteAccess,
                                            NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                            PVOID RequestContext)
{
    (void)RequestCompletion;
    (void)RequestContext;
    struct sndk_mr *mr = sndk_mr_from(pNdkMr);
    if (!mr || !mr->fast)
        return STATUS_INVALID_PARAMETER;
    if (mr->state != SNDK_MR_FR_UNINITIALIZED)
        return STATUS_INVALID_DEVICE_STATE;
    if (AdapterPageCount == 0 || AdapterPageCount > mr->base.adapter->info.FRMRPageCount)
        return STATUS_IMPLEMENTATION_LIMIT;
    uint64_t *pages = calloc(AdapterPageCount, sizeof *pages);
    if (!pages)
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_stag_table *t = mr->base.adapter->stags;
    sndk_mutex_lock(&t->lock);
    mr->fr_pages = pages;
    mr->fr_max_pages = AdapterPageCount;
    mr->fr_remote = RemoteAccess != 0;
    mr_set_state(mr, SNDK_MR_FR_INVALID);
    sndk_mutex_unlock(&t->lock);
    return STATUS_SUCCESS;
}

NTSTATUS sndk_mr_fast_register(struct sndk_mr *mr, struct sndk_pd *pd, ULONG npages,
                               const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                               uint64_t base, unsigned access, bool remote)
{
    if (!mr->fast || mr->pd != pd || (npages && !pages))
        return STATUS_INVALID_PARAMETER;
    if (npages == 0 || fbo >= NDK_ADAPTER_PAGE_SIZE || len == 0 ||
        len > (uint64_t)npages * NDK_ADAPTER_PAGE_SIZE - fbo)
        return STATUS_INVALID_PARAMETER;
    /* BaseVirtualAddress = FBO + n * PAGE_SIZE; zero-based addresses are not supported. */
    if (base == 0 || base % NDK_ADAPTER_PAGE_SIZE != fbo || base + len < base)
        return STATUS_INVALID_PARAMETER;
    for (ULONG i = 0; i < npages; i++) {
        uint64_t la = (uint64_t)pages[i].QuadPart;
        if (la == 0 || la % NDK_ADAPTER_PAGE_SIZE != 0)
            return STATUS_INVALID_PARAMETER; /* logical pages are page-aligned */
    }
    struct sndk_stag_table *t = mr->base.adapter->stags;
    NTSTATUS st = STATUS_SUCCESS;
    sndk_mutex_lock(&t->lock);
    if (mr->state == SNDK_MR_FR_UNINITIALIZED)
        st = STATUS_INVALID_DEVICE_STATE;
    else if (npages > mr->fr_max_pages)
        st = STATUS_INVALID_PARAMETER;
    else if (remote && !mr->fr_remote)
        st = STATUS_ACCESS_VIOLATION; /* [MEM-6] */
    else if (atomic_load_explicit(&mr->windows, memory_order_acquire) != 0)
        st = STATUS_INVALID_DEVICE_STATE; /* windows are bound to the current mapping */
    if (st == STATUS_SUCCESS) {
        for (ULONG i = 0; i < npages; i++)
            mr->fr_pages[i] = (uint64_t)pages[i].QuadPart;
        mr->fr_npages = npages;
        mr->fr_fbo = fbo;
        mr->va = (uintptr_t)base;
        mr->length = len;
        mr->access = access;
        mr->stag = sndk_stag_rekey_locked(t, mr->stag);
        mr_set_state(mr, SNDK_MR_FR_VALID);
    }
    sndk_mutex_unlock(&t->lock);
    return st;
}

static UINT32 mr_token(NDK_MR *pNdkMr)
{
    struct sndk_mr *mr = sndk_mr_from(pNdkMr);
    return mr ? mr->stag : 0;
}

static const NDK_MR_DISPATCH mr_dispatch = {
    .NdkCloseMr = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkRegisterMr = mr_register,
    .NdkDeregisterMr = mr_deregister,
    .NdkInitializeFastRegisterMr = mr_initialize_fast_register,
    .NdkGetRemoteTokenFromMr = mr_token,
    .NdkGetLocalTokenFromMr = mr_token,
};

static void mr_destroy(struct sndk_obj *o)
{
    struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
    /* Closing a registered MR implies deregistration: the STag dies with it. */
    sndk_stag_free(o->adapter->stags, mr->stag);
    free(mr->fr_pages);
}

static const struct sndk_obj_ops mr_ops = {.type = NdkObjectTypeMr, .destroy = mr_destroy};

NTSTATUS sndk_mr_create(NDK_PD *pNdkPd, BOOLEAN FastRegister,
                        NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                        NDK_MR **ppNdkMr)
{
    (void)CreateCompletion;
    (void)RequestContext;
    struct sndk_pd *pd = sndk_pd_from(pNdkPd);
    if (!pd || !ppNdkMr)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&pd->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(pd->base.adapter, SNDK_FCALL_MR))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_mr *mr = calloc(1, sizeof *mr);
    if (!mr)
        return STATUS_INSUFFICIENT_RESOURCES;
    mr->pd = pd;
    mr->fast = FastRegister != 0;
    mr->state = mr->fast ? SNDK_MR_FR_UNINITIALIZED : SNDK_MR_UNREGISTERED;
    atomic_init(&mr->windows, 0);
    sndk_obj_init(&mr->base, pd->base.adapter, &mr_ops, &mr_dispatch);
    sndk_obj_hold(&mr->base, &pd->base);
    mr->stag = sndk_stag_alloc(pd->base.adapter->stags, &mr->base);
    if (!mr->stag) {
        sndk_obj_abandon(&mr->base);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    *ppNdkMr = &mr->base.pub.mr;
    return STATUS_SUCCESS;
}
