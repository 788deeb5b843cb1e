/* The consumer verifier (verify/verify.h, docs/verifier.md). */
#include "verify/verify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/mr.h"
#include "util/log.h"
#include "observe/trace.h"

_Static_assert(SoftNdkVerifyRuleCount <= SOFTNDK_VERIFY_RULE_SLOTS,
               "every rule has a slot in SOFTNDK_COUNTERS.VerifyViolations");
_Static_assert(SoftNdkVerifyRuleCount <= 32, "verify_reported is a 32-bit set");

const struct sndk_verify_rule_info sndk_verify_rules[SoftNdkVerifyRuleCount] = {
    [SoftNdkVerifyConnDataLate] = {"conn_data_late", "CONN-6",
                                   "NdkGetConnectionData after NdkAccept / NdkCompleteConnect",
                                   "\"NDK_FN_GET_CONNECTION_DATA\"; \"NDKPI Listeners, "
                                   "Connectors, and Endpoints\""},
    [SoftNdkVerifyConnectorState] = {"connector_state", "CONN-3, CONN-13, DISC-5",
                                     "connector call in the wrong state",
                                     "\"NDK_FN_CONNECT\", \"NDK_FN_COMPLETE_CONNECT\", "
                                     "\"NDK_FN_ACCEPT\", \"NDK_FN_DISCONNECT\""},
    [SoftNdkVerifyPostNotConnected] = {"post_not_connected", "POST-5",
                                       "initiator request on a QP that was never connected",
                                       "\"NDKPI Work Request Posting Requirements\""},
    [SoftNdkVerifyDisconnectOutstanding] = {"disconnect_outstanding", "DISC-6",
                                            "NdkDisconnect with initiator requests outstanding",
                                            "\"NetworkDirect Disconnect Scheme\", rule 6"},
    [SoftNdkVerifyNoReceivePosted] = {"no_receive_posted", "POST-1 (iWARP: RFC 5041 §7.2)",
                                      "a Send arrived with no receive posted: post receives "
                                      "before NdkAccept/NdkConnect",
                                      "\"NDK_FN_RECEIVE\"; RFC 5041 §7.2 (DDP untagged, "
                                      "no buffer: Terminate code 2)"},
    [SoftNdkVerifyStaleToken] = {"stale_token", "MEM-3, MEM-6",
                                 "remote access with a token that is no longer valid",
                                 "\"NDK_FN_FAST_REGISTER\", \"NDK_FN_REGISTER_MR\", "
                                 "\"NDK_FN_INVALIDATE\" (read the token after each registration)"},
    [SoftNdkVerifyFastRegisterValid] = {"fast_register_valid", "MEM-6, MEM-7",
                                        "NdkFastRegister of an MR that is still valid",
                                        "\"NDK_FN_FAST_REGISTER\", \"NDK_FN_INVALIDATE\""},
    [SoftNdkVerifyCqConcurrent] = {"cq_concurrent", "CQ-3",
                                   "two threads in NdkGetCqResults(Ex)/NdkArmCq of one CQ",
                                   "\"NDKPI Completion Handling Requirements\""},
    [SoftNdkVerifySourceModified] = {"source_modified", "POST-7",
                                     "a Send/Write/Read-Response source changed before its "
                                     "completion",
                                     "\"NDKPI Work Request Posting Requirements\" (the buffers "
                                     "belong to the provider until the request completes)"},
};

void sndk_verify_report(struct sndk_obj *o, SOFTNDK_VERIFY_RULE rule, const void *ctx,
                        const char *fmt, ...)
{
    struct sndk_adapter *a = o->adapter;
    uint32_t bit = 1u << (unsigned)rule;
    if (atomic_fetch_or_explicit(&o->verify_reported, bit, memory_order_relaxed) & bit)
        return; /* once per object and rule */
    atomic_fetch_add_explicit(&a->ctrs.verify[rule], 1, memory_order_relaxed);
    const struct sndk_verify_rule_info *r = &sndk_verify_rules[rule];
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char reqctx[40] = "";
    if (ctx)
        snprintf(reqctx, sizeof reqctx, " RequestContext %p", ctx);
    bool strict = a->cfg.verify == SoftNdkVerifyStrict;
    const char *type = sndk_obj_type_name(o->ops->type);
    /* Written whatever the log level: the verifier was asked for. */
    sndk_log_write(strict ? SNDK_LOG_ERROR : SNDK_LOG_WARN, "verify",
                   "[%s] %s: %s %p%s: %s (NDKPI: %s; docs/ndk-rules.md %s)", r->name, r->title,
                   type, (void *)o, reqctx, what, r->ref, r->rules);
    if (sndk_trace_on()) {
        char ev[48];
        snprintf(ev, sizeof ev, "verify.%s", r->name);
        sndk_trace_emit(ev, type, o, "\"ids\":\"%s\",\"request_context\":\"%p\"", r->rules, ctx);
    }
    if (strict) {
        sndk_log_write(SNDK_LOG_ERROR, "verify",
                       "SOFTNDK_VERIFY=strict: the violation above is fatal (abort)");
        abort();
    }
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

void sndk_verify_summary(struct sndk_adapter *a)
{
    if (!sndk_verify_on(a))
        return;
    char line[600];
    size_t n = 0;
    uint64_t total = 0;
    for (int i = 0; i < SoftNdkVerifyRuleCount; i++) {
        uint64_t c = atomic_load_explicit(&a->ctrs.verify[i], memory_order_relaxed);
        total += c;
        if (c && n < sizeof line) {
            int k = snprintf(line + n, sizeof line - n, " %s=%llu", sndk_verify_rules[i].name,
                             (unsigned long long)c);
            n += k > 0 ? (size_t)k : 0;
        }
    }
    if (total)
        sndk_log_write(SNDK_LOG_WARN, "verify", "adapter %p closes with %llu violation(s):%s",
                       (void *)a, (unsigned long long)total, line);
    else
        sndk_info("verify", "adapter %p closes with no violation", (void *)a);
    SNDK_TRACE("verify.summary", "adapter", a, "\"violations\":%llu", (unsigned long long)total);
}
