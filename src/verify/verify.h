/* The consumer verifier (docs/verifier.md): the NDKPI rules a consumer must keep that softndk
 * can observe, checked where the provider already sees the mistake and reported once per object
 * and rule: a log line (rule, title, NDKPI reference, object, RequestContext, what happened), a
 * trace event verify.<rule>, a counter per rule (SOFTNDK_COUNTERS.VerifyViolations, ndkstat) and
 * a summary at adapter close. Strict aborts after the report, as a bugcheck would.
 *
 * Cost when off: every check sits behind sndk_verify_on(), one load of an immutable adapter
 * field and a branch predicted not taken; most checks sit on paths that already fail (a refused
 * call, a Terminate), so the branch is not on the fast path at all. */
#ifndef SOFTNDK_VERIFY_VERIFY_H
#define SOFTNDK_VERIFY_VERIFY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/adapter.h"

struct sndk_verify_rule_info {
    const char *name;  /* "conn_data_late": the trace event is verify.<name> */
    const char *rules; /* the docs/ndk-rules.md IDs it checks ("CONN-6") */
    const char *title; /* what the consumer did */
    const char *ref;   /* Microsoft's page(s) by title, and section */
};

/* The rule table, by SOFTNDK_VERIFY_RULE. A new rule is three lines: a SoftNdkVerify... value
 * before SoftNdkVerifyRuleCount (include/ndk/softndk.h, at most SOFTNDK_VERIFY_RULE_SLOTS), its
 * row here (name, rule IDs, title, Microsoft's page), and at the place that sees the mistake
 *     if (sndk_verify_on(o->adapter))
 *         sndk_verify_report(o, SoftNdkVerifyNewRule, request_context, "what happened", ...);
 * The log line, trace event, counter, ndkstat line and summary follow from the table. */
extern const struct sndk_verify_rule_info sndk_verify_rules[SoftNdkVerifyRuleCount];

static inline bool sndk_verify_on(const struct sndk_adapter *a)
{
    return __builtin_expect(a->cfg.verify != SoftNdkVerifyOff, 0);
}

/* Report that the consumer broke `rule` on object o (ctx: the RequestContext concerned, NULL
 * for none), `fmt` saying what happened. Once per object and rule: later calls for the same pair
 * do nothing. Call only with sndk_verify_on(o->adapter). Strict: does not return. Any thread, no
 * lock needed; must not be called with a lock the log or trace could wait on (neither takes
 * softndk locks). */
void sndk_verify_report(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const void *ctx,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The same rule for a token (an MR or MW): called on the side that owns the STag when a peer's
 * remote access (Write, Read Request, Send with Invalidate) was refused as an invalid token.
 * Reports when the token names a slot whose previous key it carries ("from the previous
 * registration") or an MR/MW that is no longer valid (deregistered, invalidated, unbound); a
 * token that was never valid is not the owner's mistake and is not reported. */
void sndk_verify_remote_token(struct sndk_adapter *a, uint32_t stag);

/* NdkFastRegister of mr (ctx its RequestContext) is about to take effect: report when mr is
 * still valid from the registration before (it must be invalidated first). Takes the STag
 * table lock. */
struct sndk_mr;
void sndk_verify_fast_register(struct sndk_mr *mr, const void *ctx);

/* At adapter close: the rules violated and their counts (log, trace). */
void sndk_verify_summary(struct sndk_adapter *a);

/* ---- Consumer callbacks (callback_slow, callback_call) -------------------------------------
 * Every place softndk calls a consumer callback goes through SNDK_CALLBACK, which (verifier on)
 * marks the thread as "inside callback `kind` of object o" for the call's duration and, when
 * the callback returns, reports it if it took longer than SOFTNDK_VERIFY_CALLBACK_MS (default
 * 5 ms) and it was the callback's doing: it was on the CPU that long, or it waited (a
 * voluntary context switch: a sleep, a contended lock, a blocking system call) and its time
 * less the time its thread was runnable without a CPU still passes the threshold. A callback
 * that was only preempted, or whose virtual CPU the host took away, is not reported. Off, it
 * costs one predicted branch; on, a clock read and a getrusage per callback (verify.c). */
enum sndk_callback_kind {
    SNDK_CB_CQ_NOTIFICATION,
    SNDK_CB_SRQ_NOTIFICATION,
    SNDK_CB_CONNECT_EVENT,
    SNDK_CB_DISCONNECT_EVENT,
    SNDK_CB_REQUEST_COMPLETION,
    SNDK_CB_CLOSE_COMPLETION,
    SNDK_CB_KIND_COUNT,
};

/* The kind as the verifier's reports name it, with its NDK type; "?" past the last. */
const char *sndk_verify_callback_name(enum sndk_callback_kind k);

struct sndk_callback_scope {
    struct sndk_obj *obj; /* NULL: verifier off, nothing to do at the end */
    const void *ctx;      /* the callback's context argument (the RequestContext for requests) */
    enum sndk_callback_kind kind;
    uint64_t start_ns;
    uint64_t start_cpu_ns; /* the thread's CPU time at the start */
    long start_waits;      /* its voluntary context switches */
    struct sndk_callback_scope *outer;
};

void sndk_callback_enter_verified(struct sndk_callback_scope *s, struct sndk_obj *o,
                                  enum sndk_callback_kind kind, const void *ctx);
void sndk_callback_leave_verified(struct sndk_callback_scope *s);

static inline void sndk_callback_enter(struct sndk_callback_scope *s, struct sndk_obj *o,
                                       enum sndk_callback_kind kind, const void *ctx)
{
    s->obj = NULL;
    if (sndk_verify_on(o->adapter))
        sndk_callback_enter_verified(s, o, kind, ctx);
}

/* Call only while o is still allocated (a close completion: before the object is freed). */
static inline void sndk_callback_leave(struct sndk_callback_scope *s)
{
    if (s->obj)
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

/* A provider function that NDKPI does not allow from a callback (`call`: its NDK name; `why`:
 * the reason, e.g. "runs at PASSIVE_LEVEL and blocks") is being entered: when this thread is
 * inside a verified callback, report callback_call on the callback's object with its context.
 * Returns true when it reported (the caller then behaves as without the verifier). */
bool sndk_verify_not_from_callback(const char *call, const char *why);

/* ---- Handles (handle_invalid, use_after_close) ---------------------------------------------
 * The call `call` of object `caller` was given, as argument `arg`, a handle that is not a live
 * softndk object of the expected type on caller's device (`handle`, already refused by the
 * caller with its status). Reports handle_invalid on caller, saying what the handle is: NULL,
 * an object of another type or device, a closing object, or no softndk object at all (never
 * created, not yet published by the thread that created it, or freed). */
void sndk_verify_bad_handle(struct sndk_obj *caller, const char *call, const char *arg,
                            const void *handle, NDK_OBJECT_TYPE want);

/* o is reached by a consumer call after its close started (called by sndk_obj_check). */
void sndk_verify_use_after_close(struct sndk_obj *o);

/* ---- Queues (post_concurrent, srq_concurrent, close_during_post)
 * ------------------------------------------ [POST-2], [SRQ-7]: the consumer serializes its calls
 * on each queue (a QP's initiator queue, its receive queue, an SRQ). Checked like [CQ-3]: an atomic
 * count of the threads inside a call on the queue; a call that finds another inside reports it.
 * Only with the verifier on: then a QP or SRQ gets a second dispatch table whose posting entries
 * wrap the real ones in enter/leave (qp.c, srq.c), so with the verifier off a post runs exactly as
 * before, not even a branch (decisions.md). `queue` names the queue ("initiator queue of the QP").
 */
void sndk_verify_queue_overlap(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const char *queue,
                               const char *call, const void *ctx);

/* A verified call in progress on this thread (on the caller's stack): the count it is in.
 *
 * A call is counted from its entry until it **commits**: the point where its effect is published
 * under the object's lock (the arm recorded, the request in its queue). From then on nothing the
 * call still does is the consumer's to serialize, and a callback the call itself makes due (a
 * completion the inline send produced, a notification the arm fires at once because a
 * completion was already queued) can run on a progress thread before the caller has returned.
 * Such a callback polling the CQ or posting on the queue is the ordinary NDK pattern, not an
 * overlap: the commit drops the count before the lock that orders the callback after it is
 * released, so the callback never finds the call still counted. A call that returns without
 * committing (refused, or with nothing to publish) leaves the count at its return. */
struct sndk_verify_call {
    atomic_uint *callers;
    bool committed;
    struct sndk_verify_call *outer;
};

/* Count this thread in on `callers` (c on the caller's stack until sndk_verify_call_leave);
 * returns the count found (0: nobody else inside). */
unsigned sndk_verify_call_enter(struct sndk_verify_call *c, atomic_uint *callers);
/* The call of this thread counted on `callers` commits (no-op when this thread is in no such
 * call, or it committed already). Call only with sndk_verify_on(). */
void sndk_verify_call_commit(atomic_uint *callers);
/* The call returns: out of the count unless it committed. */
void sndk_verify_call_leave(struct sndk_verify_call *c);

static inline void sndk_verify_queue_enter(struct sndk_verify_call *c, struct sndk_obj *o,
                                           atomic_uint *callers, SOFTNDK_VERIFY_RULE rule,
                                           const char *queue, const char *call, const void *ctx)
{
    if (sndk_verify_call_enter(c, callers) != 0)
        sndk_verify_queue_overlap(o, rule, queue, call, ctx);
}

static inline void sndk_verify_queue_leave(struct sndk_verify_call *c)
{
    sndk_verify_call_leave(c);
}

/* [CLOSE-3], for the posts only (close_during_post): the close of o (a QP or SRQ, from its
 * close_begin) found `inside` posts on it still running and not yet committed (the sum of its
 * queue counts: a close from the completion callback of a post that has not returned yet is
 * not one). The
 * verified posts hold a reference on the object for their duration, so such a close completes
 * when they have returned instead of freeing the object under them. */
void sndk_verify_close_during_post(struct sndk_obj *o, unsigned inside);

#endif
