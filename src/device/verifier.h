/* The consumer verifier (verify/verify.h) as the objects call it: each call names an object,
 * and the verifier gets the subject built from it (sndk_obj_subject, device/object.h), since it
 * knows no object itself.
 * Whether the verifier is on for an adapter: sndk_verify_on (device/adapter_state.h). */
#ifndef SOFTNDK_DEVICE_VERIFIER_H
#define SOFTNDK_DEVICE_VERIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "device/object.h"
#include "verify/verify.h"

struct sndk_adapter;
struct sndk_mr;

/* Report that the consumer broke `rule` on object o (sndk_verify_report_on: once per object and
 * rule; strict does not return). Call only with sndk_verify_on(o->adapter). */
void sndk_verify_report(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const void *ctx,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The same rule for a token (an MR or MW): called on the side that owns the STag when a peer's
 * remote access (Write, Read Request, Send with Invalidate) was refused as an invalid token.
 * Reports when the token names a slot whose previous key it carries ("from the previous
 * registration") or an MR/MW that is no longer valid (deregistered, invalidated, unbound); a
 * token that was never valid is not the owner's mistake and is not reported. Takes the STag
 * table lock. */
void sndk_verify_remote_token(struct sndk_adapter *a, uint32_t stag);

/* NdkFastRegister of mr (ctx its RequestContext) is about to take effect: report when mr is
 * still valid from the registration before (it must be invalidated first). Takes the STag
 * table lock. */
void sndk_verify_fast_register(struct sndk_mr *mr, const void *ctx);

/* ---- Handles (handle_invalid; use_after_close is sndk_obj_check's) ---------------------------
 * The call `call` of object `caller` was given, as argument `arg`, a handle that is not a live
 * softndk object of the expected type on caller's device (`handle`, already refused by the
 * caller with its status). Reports handle_invalid on caller, saying what the handle is: NULL,
 * an object of another type or device, or no softndk object at all (never created, not yet
 * published by the thread that created it, or freed); a closing object is use_after_close,
 * reported when the call looked it up. */
void sndk_verify_bad_handle(struct sndk_obj *caller, const char *call, const char *arg,
                            const void *handle, NDK_OBJECT_TYPE want);

/* ---- Queues (verify/verify.h): `queue` names the queue ("initiator queue of the QP"). ---- */
void sndk_verify_queue_overlap(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const char *queue,
                               const char *call, const void *ctx);

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
 * not one). The verified posts hold a reference on the object for their duration, so such a
 * close completes when they have returned instead of freeing the object under them. */
void sndk_verify_close_during_post(struct sndk_obj *o, unsigned inside);

#endif
