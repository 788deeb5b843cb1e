/* The consumer verifier as the objects call it (device/verifier.h): the checks that need to know
 * an object (an MR's state, what a handle is), and the subject each report is about. */
#include "device/verifier.h"

#include <stdarg.h>
#include <stdio.h>

#include "device/adapter_state.h"
#include "device/mr.h"

void sndk_verify_report(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const void *ctx,
                        const char *fmt, ...)
{
    struct sndk_verify_subject s = sndk_obj_subject(o);
    va_list ap;
    va_start(ap, fmt);
    sndk_verify_vreport(&s, rule, ctx, fmt, ap);
    va_end(ap);
}

void sndk_verify_remote_token(struct sndk_adapter *a, uint32_t stag)
{
    struct sndk_stag_table *t = a->stags;
    sndk_mutex_lock(&t->lock);
    uint32_t slot = sndk_stag_slot(t, stag);
    if (slot == 0 || slot >= t->used || !t->entries[slot].owner)
        goto out; /* never valid, or its object is gone: nothing to name */
    const struct sndk_stag_entry *e = &t->entries[slot];
    struct sndk_obj *o = e->owner;
    if (!sndk_verify_on(o->adapter))
        goto out;
    uint32_t current = sndk_stag_of_slot(t, slot, e->key);
    const char *why = NULL;
    if (e->key != sndk_stag_key(stag)) {
        bool unregistered =
            o->ops->type == NdkObjectTypeMr &&
            sndk_container_of(o, struct sndk_mr, base)->state == SNDK_MR_UNREGISTERED;
        if (e->last_key == sndk_stag_key(stag))
            why = unregistered ? "is from a registration since deregistered"
                               : "is from the previous registration";
    } else if (o->ops->type == NdkObjectTypeMr) {
        const struct sndk_mr *mr = sndk_container_of(o, struct sndk_mr, base);
        if (mr->state == SNDK_MR_FR_INVALID)
            why = "names a fast-registered MR that was invalidated";
    } else if (o->ops->type == NdkObjectTypeMw) {
        const struct sndk_mw *mw = sndk_container_of(o, struct sndk_mw, base);
        if (!mw->bound)
            why = "names a window that is not bound (invalidated)";
    }
    /* Under the table lock: the owner cannot go away meanwhile; the report takes no softndk
     * lock. */
    if (why)
        sndk_verify_report(o, SoftNdkVerifyStaleToken, NULL,
                           "token 0x%08x %s; current 0x%08x (a peer's remote access used it: "
                           "read the token after each registration)",
                           stag, why, current);
out:
    sndk_mutex_unlock(&t->lock);
}

void sndk_verify_fast_register(struct sndk_mr *mr, const void *ctx)
{
    struct sndk_stag_table *t = mr->base.adapter->stags;
    sndk_mutex_lock(&t->lock);
    if (mr->state == SNDK_MR_FR_VALID)
        sndk_verify_report(&mr->base, SoftNdkVerifyFastRegisterValid, ctx,
                           "token 0x%08x is still valid: NdkInvalidate it (or let a Send with "
                           "Invalidate do it) before registering the MR again",
                           mr->stag);
    sndk_mutex_unlock(&t->lock);
}

void sndk_verify_bad_handle(struct sndk_obj *caller, const char *call, const char *arg,
                            const void *handle, NDK_OBJECT_TYPE want)
{
    const char *want_name = sndk_obj_type_name(want);
    if (!handle) {
        sndk_verify_report(caller, SoftNdkVerifyHandleInvalid, NULL,
                           "%s given %s NULL (not created yet, or read before the thread that "
                           "created it stored it)",
                           call, arg);
        return;
    }
    struct sndk_obj *o = sndk_obj_lookup(handle, NdkObjectTypeUndefined);
    char what[160];
    if (!o)
        snprintf(what, sizeof what,
                 "is no softndk object (never created, not yet published by the thread that "
                 "created it, or already freed)");
    else if (o->ops->type != want)
        snprintf(what, sizeof what, "is a %s, not a %s", sndk_obj_type_name(o->ops->type),
                 want_name);
    else if (o->root->device != caller->root->device)
        snprintf(what, sizeof what, "is a %s of another adapter (%p)", want_name,
                 (void *)o->adapter);
    else
        return; /* live and of the right kind (refused for another reason), or closing: that
                 * is use_after_close, reported on it when the call looked it up */
    sndk_verify_report(caller, SoftNdkVerifyHandleInvalid, NULL, "%s given %s %p, which %s", call,
                       arg, handle, what);
}

void sndk_verify_queue_overlap(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const char *queue,
                               const char *call, const void *ctx)
{
    sndk_verify_report(o, rule, ctx,
                       "%s on the %s while another thread was inside a call on the same queue: "
                       "serialize the calls of each queue",
                       call, queue);
}

void sndk_verify_close_during_post(struct sndk_obj *o, unsigned inside)
{
    if (inside)
        sndk_verify_report(o, SoftNdkVerifyCloseDuringPost, NULL,
                           "closed while %u post(s) on it were running on other threads: let "
                           "every call on an object return before closing it (softndk: the "
                           "close completes when they have)",
                           inside);
}
