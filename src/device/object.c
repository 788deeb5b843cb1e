#include "device/object.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "observe/trace.h"

static const char *const type_names[NdkObjectTypeMax] = {
    [NdkObjectTypeUndefined] = "undefined",
    [NdkObjectTypeAdapter] = "adapter",
    [NdkObjectTypeQp] = "QP",
    [NdkObjectTypeCq] = "CQ",
    [NdkObjectTypeMr] = "MR",
    [NdkObjectTypeMw] = "MW",
    [NdkObjectTypePd] = "PD",
    [NdkObjectTypeSharedEndpoint] = "shared endpoint",
    [NdkObjectTypeConnector] = "connector",
    [NdkObjectTypeListener] = "listener",
    [NdkObjectTypeSrq] = "SRQ",
};

const char *sndk_obj_type_name(NDK_OBJECT_TYPE type)
{
    if ((unsigned)type < NdkObjectTypeMax)
        return type_names[type];
    return "invalid";
}

static void close_work_fn(struct sndk_work *w);

/* The common part of sndk_obj_init and sndk_obj_init_root. */
static void init(struct sndk_obj *o, struct sndk_adapter *a, struct sndk_obj_root *root,
                 const struct sndk_obj_ops *ops, const void *dispatch)
{
    memset(&o->pub, 0, sizeof o->pub);
    o->pub.Header.Version = root->version;
    o->pub.Header.ObjectType = ops->type;
    /* Every public object is {Header; Dispatch}: store through the adapter view. */
    o->pub.adapter.Dispatch = (const NDK_ADAPTER_DISPATCH *)dispatch;
    o->magic = SNDK_OBJ_MAGIC;
    o->ops = ops;
    o->adapter = a;
    o->root = root;
    atomic_init(&o->refs, 1);
    atomic_init(&o->state, SNDK_OBJ_OPEN);
    o->close_cb = NULL;
    o->close_ctx = NULL;
    o->nholds = 0;
    sndk_work_init(&o->close_work, close_work_fn);
    o->live_next = o->live_prev = NULL;
    atomic_init(&o->bound_to, NULL);
    atomic_init(&o->verify_reported, 0);
    o->tracker = root->tracker;
}

void sndk_obj_init(struct sndk_obj *o, struct sndk_adapter *a, const struct sndk_obj_ops *ops,
                   const void *dispatch)
{
    init(o, a, sndk_adapter_obj(a)->root, ops, dispatch);
    if (o->tracker) {
        o->tracker->track(o->tracker, o);
        SNDK_TRACE("object.create", sndk_obj_type_name(ops->type), o, "\"adapter\":\"%p\"",
                   (void *)a);
    }
}

void sndk_obj_init_root(struct sndk_obj *o, struct sndk_adapter *a, struct sndk_obj_root *root,
                        const struct sndk_obj_ops *ops, const void *dispatch)
{
    assert(sndk_adapter_obj(a) == o);
    root->tracker = NULL; /* the root is not on its own list */
    init(o, a, root, ops, dispatch);
}

void sndk_obj_hold(struct sndk_obj *o, struct sndk_obj *ante)
{
    if (o->nholds >= SNDK_OBJ_MAX_HOLDS) {
        sndk_err("object", "internal: too many antecedents on a %s",
                 sndk_obj_type_name(o->ops->type));
        abort();
    }
    sndk_obj_get(ante);
    o->holds[o->nholds++] = ante;
}

/* Release everything o holds of its own (sockets, ports, buffers: ops->destroy). Runs before
 * the close completion, so that a port is free for NdkListen / NdkConnect inside the
 * completion that released it (docs/lifecycle.md). */
static void release(struct sndk_obj *o)
{
    if (o->ops->destroy)
        o->ops->destroy(o);
}

/* Free o and then drop its antecedents: they may finish their own close only now. */
static void free_obj(struct sndk_obj *o)
{
    struct sndk_obj *holds[SNDK_OBJ_MAX_HOLDS];
    unsigned nholds = o->nholds;
    memcpy(holds, o->holds, sizeof holds);
    if (o->tracker)
        o->tracker->untrack(o->tracker, o);
    o->magic = 0;
    free(o);
    for (unsigned i = nholds; i-- > 0;)
        sndk_obj_put(holds[i]);
}

static void finish(struct sndk_obj *o)
{
    release(o);
    free_obj(o);
}

void sndk_obj_abandon(struct sndk_obj *o)
{
    finish(o);
}

static void close_work_fn(struct sndk_work *w)
{
    struct sndk_obj *o = sndk_container_of(w, struct sndk_obj, close_work);
    sndk_debug("object", "%s %p: close complete", sndk_obj_type_name(o->ops->type), (void *)o);
    SNDK_TRACE("object.close_complete", sndk_obj_type_name(o->ops->type), o, NULL);
    release(o);
    if (o->close_cb) /* o is freed only after: the scope may still report on it */
        SNDK_CALLBACK(o, SNDK_CB_CLOSE_COMPLETION, o->close_ctx, o->close_cb(o->close_ctx));
    free_obj(o);
}

void sndk_obj_put(struct sndk_obj *o)
{
    if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* Only close drops the open reference, so the object is closing: its close returned
     * STATUS_PENDING and the completion is ours to deliver, outside the caller's context. */
    if (o->ops->last_ref) {
        o->ops->last_ref(o);
        return;
    }
    sndk_engine_queue(o->root->engine, &o->close_work);
}

NTSTATUS sndk_obj_close(NDK_OBJECT_HEADER *hdr, NDK_FN_CLOSE_COMPLETION cb, void *ctx)
{
    struct sndk_obj *o = sndk_obj_check(hdr, NdkObjectTypeUndefined);
    if (!o || o->ops->last_ref) {
        sndk_err("object", "close of %p: not a softndk object", (void *)hdr);
        return STATUS_INVALID_PARAMETER;
    }
    int expected = SNDK_OBJ_OPEN;
    if (!atomic_compare_exchange_strong(&o->state, &expected, SNDK_OBJ_CLOSING)) {
        sndk_err("object", "%s %p closed twice", sndk_obj_type_name(o->ops->type), (void *)o);
        return STATUS_INVALID_DEVICE_STATE;
    }
    o->close_cb = cb;
    o->close_ctx = ctx;
    if (sndk_obj_verified(o))
        sndk_verify_close_started(o);
    SNDK_TRACE("api.close", sndk_obj_type_name(o->ops->type), o, "\"callback\":%s",
               cb ? "true" : "false");
    if (o->ops->close_begin)
        o->ops->close_begin(o);
    /* Once our reference is gone another thread may free o: nothing of it is read after. */
    const char *type = sndk_obj_type_name(o->ops->type);
    if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1) {
        finish(o);
        return STATUS_SUCCESS;
    }
    sndk_debug("object", "%s %p: close pending", type, (void *)o);
    return STATUS_PENDING;
}

NTSTATUS sndk_obj_query_extension(NDK_OBJECT_HEADER *hdr, GUID *id, NDK_VERSION version,
                                  NDK_EXTENSION_INTERFACE *ext)
{
    (void)hdr;
    (void)id;
    (void)version;
    if (ext)
        ext->Dispatch = NULL;
    return STATUS_NOT_SUPPORTED;
}

struct sndk_obj *sndk_obj_check(const void *pub, NDK_OBJECT_TYPE type)
{
    struct sndk_obj *o = sndk_obj_lookup(pub, type);
    /* [CLOSE-2]: every consumer call finds its objects here, so this is where a call on a
     * closing object is seen (the memory is still there until the close completes). Not from
     * the object's own callback while another thread closes it (verify.h). */
    if (o && sndk_obj_verified(o) && sndk_obj_closing(o) && !sndk_verify_inside_own_callback(o)) {
        struct sndk_verify_subject s = sndk_obj_subject(o);
        sndk_verify_report_on(&s, SoftNdkVerifyUseAfterClose, NULL,
                              "a call reached this %s after its close started: the consumer "
                              "must not touch an object after starting its close (a stale "
                              "pointer kept by another thread?)",
                              s.type);
    }
    return o;
}

struct sndk_obj *sndk_obj_lookup(const void *pub, NDK_OBJECT_TYPE type)
{
    if (!pub)
        return NULL;
    struct sndk_obj *o = (struct sndk_obj *)pub;
    /* The public header first: memory that is not even shaped like an NDK object (NULL-filled,
     * garbage) is refused without reading past the 0x30 bytes of a public object. Then the
     * private magic, which alone decides (docs/misuse.md). */
    NDK_OBJECT_TYPE t = o->pub.Header.ObjectType;
    if ((unsigned)t - 1u >= (unsigned)NdkObjectTypeMax - 1u)
        return NULL;
    if (type != NdkObjectTypeUndefined && t != type)
        return NULL;
    if (o->magic != SNDK_OBJ_MAGIC || o->ops->type != t)
        return NULL;
    return o;
}
