/* The common NDK object: public NDK_xxx first, then the lifetime machinery every object shares.
 *
 * Lifetime (docs/lifecycle.md):
 * - refs starts at 1, the "open" reference, dropped by close.
 * - A successor holds a reference on each antecedent (parent, CQs, SRQ, MR of a bound window)
 *   from its creation until its own close completion has RETURNED, so an antecedent's close
 *   never completes while a successor is open or its close callback runs.
 * - Anything that will call a consumer callback for the object (a queued CQ notification, a
 *   pending request) holds a reference until that callback has returned.
 * - Close drops the open reference. If that was the last one, the object is finished inline
 *   and close returns STATUS_SUCCESS; otherwise STATUS_PENDING, and whoever drops the last
 *   reference queues the close work on a progress thread, which calls the close completion
 *   (the last callback ever made for the object), then frees it, then drops its holds.
 *
 * Private state is reached from the public pointer (never through ->Dispatch, which a
 * consumer may overwrite). */
#ifndef SOFTNDK_DEVICE_OBJECT_H
#define SOFTNDK_DEVICE_OBJECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"
#include "util/container.h"
#include "verify/verify.h"
#include <ndk/softndk.h>

struct sndk_adapter;
struct sndk_obj;

#define SNDK_OBJ_MAGIC     0x4b444e53u /* "SNDK" */
#define SNDK_OBJ_MAX_HOLDS 4

enum sndk_obj_state {
    SNDK_OBJ_OPEN = 0,
    SNDK_OBJ_CLOSING = 1, /* close called; finishing when the last reference goes */
};

/* Where the live objects of a tree are kept. The root of the tree (the adapter) registers one
 * for the objects created under it, after its own init, so it is not on its own list and the
 * base object needs to know no object type (docs/lifecycle.md). */
struct sndk_obj_tracker {
    void (*track)(struct sndk_obj_tracker *t, struct sndk_obj *o);
    void (*untrack)(struct sndk_obj_tracker *t, struct sndk_obj *o);
};

/* What the objects of a tree share, kept by its root (the adapter, which fills it in before its
 * own init) and read through o->root. The base object reads this, never the adapter: adapter.c
 * builds on object.c, object.c needs no adapter type. */
struct sndk_obj_root {
    NDK_VERSION version;              /* what every object's header carries */
    struct sndk_engine *engine;       /* runs the close work */
    const void *device;               /* trees on one device share objects (sndk_obj_usable) */
    struct sndk_obj_tracker *tracker; /* NULL until the root's own init is done */
    struct sndk_verify_policy verify; /* the verifier's settings for the tree */
};

struct sndk_obj_ops {
    NDK_OBJECT_TYPE type;
    /* Called by close before the open reference is dropped: cancel what is pending (flush a
     * QP, stop a listener accepting). May be NULL. */
    void (*close_begin)(struct sndk_obj *o);
    /* Release type-specific resources. Holds are still valid; the object is freed after. */
    void (*destroy)(struct sndk_obj *o);
    /* An object closed through an entry point of its own, which waits in place for the last
     * reference (the adapter: SoftNdkCloseAdapter): called when that reference goes, instead
     * of queueing the close work; sndk_obj_close refuses such an object. NULL for the others. */
    void (*last_ref)(struct sndk_obj *o);
};

struct sndk_obj {
    union {
        NDK_OBJECT_HEADER Header;
        NDK_ADAPTER adapter;
        NDK_PD pd;
        NDK_CQ cq;
        NDK_QP qp;
        NDK_SRQ srq;
        NDK_MR mr;
        NDK_MW mw;
        NDK_CONNECTOR connector;
        NDK_LISTENER listener;
        NDK_SHARED_ENDPOINT endpoint;
    } pub;
    uint32_t magic;
    const struct sndk_obj_ops *ops;
    struct sndk_adapter *adapter; /* lives at least as long as the object (held transitively) */
    struct sndk_obj_root *root;   /* the adapter's: what the tree shares */
    atomic_uint refs;
    atomic_int state; /* enum sndk_obj_state */
    NDK_FN_CLOSE_COMPLETION close_cb;
    void *close_ctx;
    struct sndk_obj *holds[SNDK_OBJ_MAX_HOLDS];
    unsigned nholds;
    struct sndk_work close_work;
    struct sndk_obj_tracker *tracker;       /* the tree's, NULL for its root */
    struct sndk_obj *live_next, *live_prev; /* the tracker's live-object list, under its lock */
    /* QP: the connector it is bound to (NULL: free). Claimed with a compare-and-swap so that
     * one QP never serves two connections (STATUS_CONNECTION_ACTIVE). */
    _Atomic(void *) bound_to;
    /* The consumer verifier (verify/verify.h): bit r set once rule r was reported for this object
     * (each object is reported once per rule). */
    _Atomic uint32_t verify_reported;
};

_Static_assert(offsetof(struct sndk_obj, pub) == 0, "public object first");

/* The adapter's own object. It is the adapter's first member (adapter.h asserts it), so a
 * pointer to the adapter points to it (C11 6.7.2.1): the base object reaches the tree's root
 * through it without knowing the adapter type. */
static inline const struct sndk_obj *sndk_adapter_obj(const struct sndk_adapter *a)
{
    return (const struct sndk_obj *)(const void *)a;
}

/* Set up a new object of adapter a: header (negotiated version, type, zeroed reserved block),
 * dispatch table, one open reference, on the tracker the adapter registered. Does not hold
 * anything yet. */
void sndk_obj_init(struct sndk_obj *o, struct sndk_adapter *a, const struct sndk_obj_ops *ops,
                   const void *dispatch);
/* The same for the root of a tree, the adapter a whose first member o is: its objects share
 * *root (filled in by the caller), and the root is on no tracker. */
void sndk_obj_init_root(struct sndk_obj *o, struct sndk_adapter *a, struct sndk_obj_root *root,
                        const struct sndk_obj_ops *ops, const void *dispatch);

/* Take a reference on antecedent `ante` for the lifetime of o (released after o's close). */
void sndk_obj_hold(struct sndk_obj *o, struct sndk_obj *ante);

/* Undo sndk_obj_init (+ holds) for an object that was never handed to the consumer. */
void sndk_obj_abandon(struct sndk_obj *o);

static inline void sndk_obj_get(struct sndk_obj *o)
{
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}
/* Drop a reference; the last one (after close) finishes the object on a progress thread. */
void sndk_obj_put(struct sndk_obj *o);

static inline bool sndk_obj_closing(const struct sndk_obj *o)
{
    return atomic_load_explicit(&o->state, memory_order_acquire) != SNDK_OBJ_OPEN;
}

/* The close slot of every dispatch table but the adapter's. */
NTSTATUS sndk_obj_close(NDK_OBJECT_HEADER *hdr, NDK_FN_CLOSE_COMPLETION cb, void *ctx);

/* The NdkQueryExtension slot: softndk defines no extension interface. */
NTSTATUS sndk_obj_query_extension(NDK_OBJECT_HEADER *hdr, GUID *id, NDK_VERSION version,
                                  NDK_EXTENSION_INTERFACE *ext);

/* The private object behind a public pointer when it is a live softndk object of `type`
 * (NdkObjectTypeUndefined: any type), else NULL. A best-effort guard against a consumer passing
 * the wrong kind of object or memory that is no softndk object: the header's ObjectType is
 * checked first (no byte past the public object is read unless it names a valid type), then the
 * private magic. A freed pointer, or foreign memory of less than a softndk object whose header
 * names a valid type, is undefined behaviour as on Windows (docs/misuse.md). */
struct sndk_obj *sndk_obj_check(const void *pub, NDK_OBJECT_TYPE type);
/* The same without the verifier's use_after_close report (it only looks). */
struct sndk_obj *sndk_obj_lookup(const void *pub, NDK_OBJECT_TYPE type);

/* Claim / release a QP for a connector. */
static inline bool sndk_obj_bind(struct sndk_obj *o, void *owner)
{
    void *expected = NULL;
    return atomic_compare_exchange_strong(&o->bound_to, &expected, owner);
}
static inline void sndk_obj_unbind(struct sndk_obj *o, void *owner)
{
    void *expected = owner;
    atomic_compare_exchange_strong(&o->bound_to, &expected, NULL);
}

/* Does o belong to the device of adapter a (any instance opened on its interface) and is it
 * still open? */
static inline bool sndk_obj_usable(const struct sndk_obj *o, const struct sndk_adapter *a)
{
    return o && a && o->root->device == sndk_adapter_obj(a)->root->device && !sndk_obj_closing(o);
}

const char *sndk_obj_type_name(NDK_OBJECT_TYPE type);

/* ---- The verifier's view of an object (verify/verify.h knows no object type) ---------------- */

/* Object o as the verifier's reports name it: its type, its address, its adapter's settings. */
static inline struct sndk_verify_subject sndk_obj_subject(struct sndk_obj *o)
{
    return (struct sndk_verify_subject){.policy = &o->root->verify,
                                        .obj = o,
                                        .type = sndk_obj_type_name(o->ops->type),
                                        .reported = &o->verify_reported};
}

/* Is the verifier on for o's adapter? The same answer as sndk_verify_on(o->adapter). */
static inline bool sndk_obj_verified(const struct sndk_obj *o)
{
    return __builtin_expect(o->root->verify.mode != SoftNdkVerifyOff, 0);
}

/* Consumer callbacks (verify/verify.h: callback_slow, callback_call). */
static inline void sndk_callback_enter(struct sndk_callback_scope *s, struct sndk_obj *o,
                                       enum sndk_callback_kind kind, const void *ctx)
{
    s->subject.policy = NULL;
    if (sndk_obj_verified(o)) {
        struct sndk_verify_subject subj = sndk_obj_subject(o);
        sndk_callback_enter_verified(s, &subj, kind, ctx);
    }
}

/* Call only while o is still allocated (a close completion: before the object is freed). */
static inline void sndk_callback_leave(struct sndk_callback_scope *s)
{
    if (s->subject.policy)
        sndk_callback_leave_verified(s);
}

/* Invoke a consumer callback of object o: SNDK_CALLBACK(&cq->base, SNDK_CB_CQ_NOTIFICATION,
 * cq->notify_ctx, cq->notify_cb(cq->notify_ctx, st)). */
#define SNDK_CALLBACK(o, kind, ctx, call)                                                          \
    do {                                                                                           \
        struct sndk_callback_scope sndk_cb_scope_;                                                 \
        sndk_callback_enter(&sndk_cb_scope_, (o), (kind), (ctx));                                  \
        call;                                                                                      \
        sndk_callback_leave(&sndk_cb_scope_);                                                      \
    } while (0)

#endif
