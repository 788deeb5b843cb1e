/* The one access check (device/access.h). */
#include "device/access.h"

#include "util/log.h"

static const char *const result_names[SNDK_ACC_COUNT] = {
    [SNDK_ACC_OK] = "ok",
    [SNDK_ACC_INV_STAG] = "invalid token",
    [SNDK_ACC_UNASSOC] = "other PD",
    [SNDK_ACC_RIGHTS] = "access rights",
    [SNDK_ACC_BOUNDS] = "bounds",
    [SNDK_ACC_WRAP] = "wrap",
    [SNDK_ACC_TOO_MANY] = "too many pieces",
};

const char *sndk_access_result_name(enum sndk_access_result r)
{
    return (unsigned)r < SNDK_ACC_COUNT ? result_names[r] : "?";
}

/* Owner of a live token with a current key; caller holds t->lock. */
static struct sndk_obj *lookup_locked(struct sndk_stag_table *t, uint32_t token)
{
    sndk_assert_held(&t->lock);
    return sndk_stag_lookup_locked(t, token);
}

/* [addr, addr+len) inside [base, base+size)? Written so that no sum can overflow. */
static bool in_bounds(uint64_t addr, uint64_t len, uint64_t base, uint64_t size)
{
    return addr >= base && len <= size && addr - base <= size - len;
}

/* Host pieces of [off, off+len) of a fast-registered region: page runs, merged when the
 * logical (= virtual) addresses of consecutive pages are contiguous. */
static enum sndk_access_result fr_translate(const struct sndk_mr *mr, uint64_t off, uint64_t len,
                                            struct iovec *out, int max_out, int *n_out)
{
    int n = 0;
    uint64_t abs = (uint64_t)mr->fr_fbo + off;
    while (len > 0) {
        uint64_t page = abs / NDK_ADAPTER_PAGE_SIZE, in = abs % NDK_ADAPTER_PAGE_SIZE;
        if (page >= mr->fr_npages)
            return SNDK_ACC_BOUNDS;
        uint64_t take = NDK_ADAPTER_PAGE_SIZE - in;
        if (take > len)
            take = len;
        uintptr_t host = (uintptr_t)(mr->fr_pages[page] + in);
        if (n > 0 && (uintptr_t)out[n - 1].iov_base + out[n - 1].iov_len == host) {
            out[n - 1].iov_len += take;
        } else {
            if (n == max_out)
                return SNDK_ACC_TOO_MANY;
            out[n++] = (struct iovec){(void *)host, take};
        }
        abs += take;
        len -= take;
    }
    *n_out = n;
    return SNDK_ACC_OK;
}

enum sndk_access_result sndk_access_check(struct sndk_pd *pd, uint32_t token, uint64_t addr,
                                          uint64_t len, unsigned need, bool remote,
                                          struct iovec *out, int max_out, int *n_out)
{
    *n_out = 0;
    if (len == 0)
        return SNDK_ACC_OK;
    if (addr + len < addr)
        return SNDK_ACC_WRAP;
    struct sndk_stag_table *t = pd->base.adapter->stags;
    enum sndk_access_result r = SNDK_ACC_OK;
    sndk_mutex_lock(&t->lock);
    struct sndk_obj *o = lookup_locked(t, token);
    if (!o) {
        r = SNDK_ACC_INV_STAG;
        goto out;
    }
    switch (o->ops->type) {
    case NdkObjectTypePd:
        /* Privileged token: LAM logical addresses are VAs; local read/write only. */
        if (remote)
            r = SNDK_ACC_INV_STAG;
        else if (o != &pd->base)
            r = SNDK_ACC_UNASSOC;
        else if (need & ~(unsigned)(SNDK_ACCESS_LOCAL_READ | SNDK_ACCESS_LOCAL_WRITE))
            r = SNDK_ACC_RIGHTS;
        else if (max_out < 1)
            r = SNDK_ACC_TOO_MANY;
        else {
            out[0] = (struct iovec){(void *)(uintptr_t)addr, len};
            *n_out = 1;
        }
        break;
    case NdkObjectTypeMr: {
        const struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
        if (mr->state != SNDK_MR_REGISTERED && mr->state != SNDK_MR_FR_VALID)
            r = SNDK_ACC_INV_STAG;
        else if (mr->pd != pd)
            r = SNDK_ACC_UNASSOC;
        else if ((mr->access & need) != need)
            r = SNDK_ACC_RIGHTS;
        else if (!in_bounds(addr, len, mr->va, mr->length))
            r = SNDK_ACC_BOUNDS;
        else if (mr->state == SNDK_MR_FR_VALID)
            r = fr_translate(mr, addr - mr->va, len, out, max_out, n_out);
        else if (max_out < 1)
            r = SNDK_ACC_TOO_MANY;
        else {
            /* NdkRegisterMr regions address memory by its own VAs. */
            out[0] = (struct iovec){(void *)(uintptr_t)addr, len};
            *n_out = 1;
        }
        break;
    }
    case NdkObjectTypeMw: {
        const struct sndk_mw *mw = sndk_container_of(o, struct sndk_mw, base);
        if (!remote || !mw->bound)
            r = SNDK_ACC_INV_STAG; /* a window grants remote access only */
        else if (mw->pd != pd)
            r = SNDK_ACC_UNASSOC;
        else if ((mw->access & need) != need)
            r = SNDK_ACC_RIGHTS;
        else if (!in_bounds(addr, len, mw->va, mw->length))
            r = SNDK_ACC_BOUNDS;
        else if (mw->mr->state != (mw->mr->fast ? SNDK_MR_FR_VALID : SNDK_MR_REGISTERED))
            r = SNDK_ACC_INV_STAG; /* the MR under the window was invalidated */
        else {
            const struct sndk_mr *mr = mw->mr;
            if (mr->state == SNDK_MR_FR_VALID)
                r = fr_translate(mr, addr - mr->va, len, out, max_out, n_out);
            else if (max_out < 1)
                r = SNDK_ACC_TOO_MANY;
            else {
                out[0] = (struct iovec){(void *)(uintptr_t)addr, len};
                *n_out = 1;
            }
        }
        break;
    }
    default:
        r = SNDK_ACC_INV_STAG;
        break;
    }
out:
    sndk_mutex_unlock(&t->lock);
    if (r != SNDK_ACC_OK)
        sndk_debug("access", "token 0x%08x [0x%llx +%llu] need 0x%x %s: %s", token,
                   (unsigned long long)addr, (unsigned long long)len, need,
                   remote ? "remote" : "local", sndk_access_result_name(r));
    return r;
}

enum sndk_access_result sndk_access_invalidate_remote(struct sndk_pd *pd, uint32_t token)
{
    struct sndk_stag_table *t = pd->base.adapter->stags;
    enum sndk_access_result r = SNDK_ACC_OK;
    struct sndk_mr *put = NULL;
    sndk_mutex_lock(&t->lock);
    struct sndk_obj *o = lookup_locked(t, token);
    /* The PD first: a token of another PD is a protection error whatever it names
     * (docs/wire.md: RDMAP / remote protection / 0x09), then what it names. */
    if (!o) {
        r = SNDK_ACC_INV_STAG;
    } else if (o->ops->type == NdkObjectTypeMr) {
        struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
        if (mr->pd != pd)
            r = SNDK_ACC_UNASSOC;
        else if (!mr->fast)
            r = SNDK_ACC_INV_STAG; /* NdkRegisterMr regions are never invalidated remotely */
        else if (mr->state != SNDK_MR_FR_VALID)
            r = SNDK_ACC_INV_STAG; /* already invalid (decisions.md #7) */
        else
            mr->state = SNDK_MR_FR_INVALID;
    } else if (o->ops->type == NdkObjectTypeMw) {
        struct sndk_mw *mw = sndk_container_of(o, struct sndk_mw, base);
        if (mw->pd != pd)
            r = SNDK_ACC_UNASSOC;
        else if (!mw->bound)
            r = SNDK_ACC_INV_STAG; /* already unbound (decisions.md #7) */
        else
            put = sndk_mw_unbind_locked(mw);
    } else {
        /* the privileged token: never remote; another PD's is still another PD's */
        r = o == &pd->base ? SNDK_ACC_INV_STAG : SNDK_ACC_UNASSOC;
    }
    sndk_mutex_unlock(&t->lock);
    if (put)
        sndk_obj_put(&put->base);
    sndk_debug("access", "remote invalidate of token 0x%08x: %s", token,
               sndk_access_result_name(r));
    return r;
}

struct sndk_mr *sndk_mw_unbind_locked(struct sndk_mw *mw)
{
    sndk_assert_held(&mw->base.adapter->stags->lock);
    if (!mw->bound)
        return NULL;
    struct sndk_mr *mr = mw->mr;
    mw->bound = false;
    mw->mr = NULL;
    mw->access = 0;
    atomic_fetch_sub_explicit(&mr->windows, 1, memory_order_acq_rel);
    return mr;
}

bool sndk_access_invalidate_local(struct sndk_obj *o)
{
    struct sndk_stag_table *t = o->adapter->stags;
    struct sndk_mr *put = NULL;
    bool was_valid = false;
    sndk_mutex_lock(&t->lock);
    if (o->ops->type == NdkObjectTypeMr) {
        struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
        was_valid = mr->state == SNDK_MR_FR_VALID;
        if (was_valid)
            mr->state = SNDK_MR_FR_INVALID;
    } else if (o->ops->type == NdkObjectTypeMw) {
        put = sndk_mw_unbind_locked(sndk_container_of(o, struct sndk_mw, base));
        was_valid = put != NULL;
    }
    sndk_mutex_unlock(&t->lock);
    if (put)
        sndk_obj_put(&put->base);
    return was_valid;
}
