/* The consumer verifier (docs/verifier.md): the NDKPI rules a consumer must keep that softndk
 * can observe, checked where the provider already sees the mistake and reported once per object
 * and rule: a log line (rule, title, NDKPI reference, object, RequestContext, what happened), a
 * trace event verify.<rule>, a counter per rule (SOFTNDK_COUNTERS.VerifyViolations, ndkstat) and
 * a summary at adapter close. Strict aborts after the report, as a bugcheck would.
 *
 * Cost when off: every check sits behind sndk_verify_on(), one load of an immutable adapter
 * field and a branch predicted not taken; most checks sit on paths that already fail (a refused
 * call, a Terminate), so the branch is not on the fast path at all. */
#ifndef SOFTNDK_CORE_VERIFY_H
#define SOFTNDK_CORE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/adapter.h"

struct sndk_verify_rule_info {
    const char *name;  /* "conn_data_late": the trace event is verify.<name> */
    const char *rules; /* the docs/ndk-rules.md IDs it checks ("CONN-6") */
    const char *title; /* what the consumer did */
    const char *ref;   /* Microsoft's page(s) by title, and section */
};

/* The rule table, by SOFTNDK_VERIFY_RULE. */
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

#endif
