#ifndef SOFTNDK_DEVICE_MR_H
#define SOFTNDK_DEVICE_MR_H

#include "device/pd_state.h"

/* Access rights of a region or window, as the data path checks them. */
enum sndk_access {
    SNDK_ACCESS_LOCAL_READ = 1u << 0,
    SNDK_ACCESS_LOCAL_WRITE = 1u << 1,
    SNDK_ACCESS_REMOTE_READ = 1u << 2,
    SNDK_ACCESS_REMOTE_WRITE = 1u << 3,
    SNDK_ACCESS_READ_SINK = 1u << 4,
};

enum sndk_mr_state {
    SNDK_MR_UNREGISTERED, /* NdkRegisterMr kind, nothing registered */
    SNDK_MR_REGISTERED,
    SNDK_MR_FR_UNINITIALIZED, /* fast-register kind before NdkInitializeFastRegisterMr */
    SNDK_MR_FR_INVALID,       /* initialized; no valid registration (never, or invalidated) */
    SNDK_MR_FR_VALID,         /* NdkFastRegister took effect */
    SNDK_MR_STATE_COUNT
};

struct sndk_mr {
    struct sndk_obj base;
    struct sndk_pd *pd;
    bool fast; /* fixed at creation */
    enum sndk_mr_state state;
    uint32_t stag; /* current token (local = remote) */
    uintptr_t va;  /* base of the region as peers and SGEs address it */
    size_t length;
    unsigned access; /* enum sndk_access */
    uint32_t fr_max_pages;
    bool fr_remote;
    /* fast-registered mapping (NdkFastRegister): logical page addresses, the region starts
     * fr_fbo bytes into fr_pages[0] */
    uint64_t *fr_pages;
    uint32_t fr_npages;
    uint32_t fr_fbo;
    atomic_uint windows; /* windows bound to this MR */
};

/* Registration fields (state, va, length, access, the FR mapping; an MW's binding) change only
 * with the adapter's STag table lock held, together with the key, so that the one access check
 * (device/access.c) reads a consistent region while it holds that lock. */

/* Memory window. Bound and invalidated by QP work requests; until then it owns an STag index
 * whose key changes on every bind. */
struct sndk_mw {
    struct sndk_obj base;
    struct sndk_pd *pd;
    uint32_t stag;
    bool bound;
    struct sndk_mr *mr; /* bound: the MR it windows */
    uintptr_t va;
    size_t length;
    unsigned access; /* SNDK_ACCESS_REMOTE_* */
};

static inline struct sndk_mr *sndk_mr_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeMr);
    return o ? sndk_container_of(o, struct sndk_mr, base) : NULL;
}

const char *sndk_mr_state_name(enum sndk_mr_state s);

/* NdkFastRegister's effect, applied when the request is posted (the token is readable when the
 * call returns; a peer learns it only from a later message): checks, then under the STag table
 * lock the page list, FBO, base VA, length, rights, a fresh key and the valid state. `remote`:
 * remote rights are asked for. Returns STATUS_SUCCESS or the inline status. */
NTSTATUS sndk_mr_fast_register(struct sndk_mr *mr, struct sndk_pd *pd, ULONG npages,
                               const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                               uint64_t base, unsigned access, bool remote);

/* NdkBind's effect, applied when posted: the window over [va, va+len) of mr with `access`
 * (SNDK_ACCESS_REMOTE_*), a fresh key; a window bound before is unbound first. The window holds
 * a reference on the MR while bound, so the MR's close stays pending. */
NTSTATUS sndk_mw_bind(struct sndk_mw *mw, struct sndk_mr *mr, struct sndk_pd *pd, uint64_t va,
                      uint64_t len, unsigned access);

/* NdkCreateMr and NdkCreateMw, PD dispatch slots (core/pd.c lists them; mr.c, mw.c). */
NTSTATUS sndk_mr_create(NDK_PD *pNdkPd, BOOLEAN FastRegister,
                        NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                        NDK_MR **ppNdkMr);
NTSTATUS sndk_mw_create(NDK_PD *pNdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_MW **ppNdkMw);

#endif
