/* The consumer verifier (docs/verifier.md): the NDKPI rules a consumer must keep that softndk
 * can observe, checked where the provider already sees the mistake and reported once per object
 * and rule: a log line (rule, title, NDKPI reference, object, RequestContext, what happened), a
 * trace event verify.<rule>, a counter per rule (SOFTNDK_COUNTERS.VerifyViolations, ndkstat) and
 * a summary at adapter close. Strict aborts after the report, as a bugcheck would.
 *
 * Cost when off: every check sits behind sndk_verify_on(), one load of an immutable adapter
 * field and a branch predicted not taken; most checks sit on paths that already fail (a refused
 * call, a Terminate), so the branch is not on the fast path at all.
 *
 * The verifier knows no NDK object: a report is about a subject (struct sndk_verify_subject)
 * that the object layer describes, and the objects call it through device/verifier.h, which
 * builds the subject from an object. */
#ifndef SOFTNDK_VERIFY_VERIFY_H
#define SOFTNDK_VERIFY_VERIFY_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ndk/softndk.h>

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
 * (device/verifier.h). The log line, trace event, counter, ndkstat line and summary follow from
 * the table. */
extern const struct sndk_verify_rule_info sndk_verify_rules[SoftNdkVerifyRuleCount];

/* What an adapter asks of the verifier, and where it counts the violations: set at its open,
 * shared by all its objects, unchanged after. */
struct sndk_verify_policy {
    SOFTNDK_VERIFY_MODE mode;     /* Off, Warn or Strict */
    unsigned callback_ms;         /* SOFTNDK_VERIFY_CALLBACK_MS: a longer callback is reported */
    _Atomic uint64_t *violations; /* [SOFTNDK_VERIFY_RULE_SLOTS], by rule (the counters') */
};

/* What a report is about: an object as the object layer describes it. */
struct sndk_verify_subject {
    const struct sndk_verify_policy *policy; /* its adapter's; NULL: the verifier is off */
    const void *obj;                         /* named by its address */
    const char *type;                        /* its NDK type as the reports name it ("QP") */
    _Atomic uint32_t *reported; /* bit r: rule r was reported for it (once per object and rule) */
};

/* Report that the consumer broke `rule` on subject s (ctx: the RequestContext concerned, NULL
 * for none), `fmt` saying what happened. Once per subject and rule: later calls for the same
 * pair do nothing. Call only with the verifier on (s->policy->mode not Off). Strict: does not
 * return. Any thread, no lock needed; must not be called with a lock the log or trace could
 * wait on (neither takes softndk locks). */
void sndk_verify_report_on(const struct sndk_verify_subject *s, SOFTNDK_VERIFY_RULE rule,
                           const void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with the arguments in a va_list. */
void sndk_verify_vreport(const struct sndk_verify_subject *s, SOFTNDK_VERIFY_RULE rule,
                         const void *ctx, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* At adapter close: the rules violated under policy p and their counts (log, trace); adapter
 * names it. Nothing when the verifier is off. */
void sndk_verify_summary(const struct sndk_verify_policy *p, const void *adapter);

/* ---- Consumer callbacks (callback_slow, callback_call) -------------------------------------
 * Every place softndk calls a consumer callback goes through SNDK_CALLBACK, which (verifier on)
 * marks the thread as "inside callback `kind` of object o" for the call's duration and, when
 * the callback returns, reports it if it took longer than SOFTNDK_VERIFY_CALLBACK_MS (default
 * 5 ms) and it was the callback's doing: it was on the CPU that long, or it waited (a
 * voluntary context switch: a sleep, a contended lock, a blocking system call) and its time
 * less the time its thread was runnable without a CPU still passes the threshold. A callback
 * that was only preempted, or whose virtual CPU the host took away, is not reported. Nor is
 * what softndk did inside the calls the callback made: the time blocked on softndk's own locks
 * (a progress thread preempted while holding the CQ's lock), with their context switches, and
 * the time inside the verified calls (the CQ's poll and arm, every post on a QP or SRQ: where
 * a poll runs a receive pass, or a Send copies and checksums its payload inline, which a
 * hardware provider hands to the NIC). Off, it costs one predicted branch; on, a clock read
 * and a getrusage per callback, and two clock reads per verified call made inside one
 * (verify.c). */
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
    struct sndk_verify_subject subject; /* policy NULL: verifier off, nothing to do at the end */
    const void *ctx; /* the callback's context argument (the RequestContext for requests) */
    enum sndk_callback_kind kind;
    uint64_t start_ns;
    uint64_t start_cpu_ns; /* the thread's CPU time at the start */
    long start_waits;      /* its voluntary context switches */
    uint64_t start_lock_ns;    /* its time blocked on softndk's own locks (util/lock.h) */
    uint64_t start_lock_waits; /* and how many such waits */
    uint64_t softndk_ns;   /* time inside the verified calls it made (a poll, a post), less their
                              lock waits: softndk's work, not the callback's */
    bool closed_inside;    /* the callback itself started its subject's close */
    struct sndk_callback_scope *outer;
};

/* A callback of subject *subj starts on this thread (verifier on; the objects reach this through
 * SNDK_CALLBACK, device/verifier.h) / has returned (call only while the subject's object is still
 * allocated: a close completion's before the object is freed). */
void sndk_callback_enter_verified(struct sndk_callback_scope *s,
                                  const struct sndk_verify_subject *subj,
                                  enum sndk_callback_kind kind, const void *ctx);
void sndk_callback_leave_verified(struct sndk_callback_scope *s);

/* ---- use_after_close inside the object's own callback ---------------------------------------
 * [CLOSE-2] names a call on an object whose close has started. One such call is the consumer's
 * right: from a callback of that very object (a CQ notification polling its CQ, a connector's
 * request completion reading its connection data) while another thread closes it. The close
 * cannot complete before the callback returns [CLOSE-5], so the call touches a live object, and
 * whether the callback runs before or after the other thread's close started is the provider's
 * timing, not the consumer's order (a notification whose delivery began as the close started
 * still runs; the close cancels a pending request, whose completion follows). Two calls stay
 * named: those a callback makes after it started its object's close itself [LIFE-3] (then the
 * consumer touched what it had closed), and those from the object's close completion (its close
 * was done). */

/* This thread starts the close of the subject object obj (verifier on). */
void sndk_verify_close_started(const void *obj);
/* Is this thread inside a callback of obj, other than its close completion, that has not started
 * obj's close itself? */
bool sndk_verify_inside_own_callback(const void *obj);

/* A provider function that NDKPI does not allow from a callback (`call`: its NDK name; `why`:
 * the reason, e.g. "runs at PASSIVE_LEVEL and blocks") is being entered: when this thread is
 * inside a verified callback, report callback_call on the callback's object with its context.
 * Returns true when it reported (the caller then behaves as without the verifier). */
bool sndk_verify_not_from_callback(const char *call, const char *why);

/* ---- Queues (post_concurrent, srq_concurrent, close_during_post)
 * ------------------------------------------ [POST-2], [SRQ-7]: the consumer serializes its calls
 * on each queue (a QP's initiator queue, its receive queue, an SRQ). Checked like [CQ-3]: an atomic
 * count of the threads inside a call on the queue; a call that finds another inside reports it
 * (sndk_verify_queue_enter, device/verifier.h). Only with the verifier on: then a QP or SRQ gets a
 * second dispatch table whose posting entries wrap the real ones in enter/leave (qp.c, srq.c), so
 * with the verifier off a post runs exactly as before, not even a branch (decisions.md). */

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
    /* made inside a verified callback: its time goes to that callback's softndk_ns */
    struct sndk_callback_scope *in_callback;
    uint64_t start_ns, start_lock_ns;
};

/* Count this thread in on `callers` (c on the caller's stack until sndk_verify_call_leave);
 * returns the count found (0: nobody else inside). */
unsigned sndk_verify_call_enter(struct sndk_verify_call *c, atomic_uint *callers);
/* The call of this thread counted on `callers` commits (no-op when this thread is in no such
 * call, or it committed already). Call only with sndk_verify_on(). */
void sndk_verify_call_commit(atomic_uint *callers);
/* The call returns: out of the count unless it committed. */
void sndk_verify_call_leave(struct sndk_verify_call *c);

#endif
