/* The consumer verifier (verify/verify.h, docs/verifier.md). */
#include "verify/verify.h"

#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/lock.h"
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
    [SoftNdkVerifyCallbackSlow] = {"callback_slow", "ASYNC-3",
                                   "a callback that waited or ran too long",
                                   "\"Implementing NDKPI Callback Functions\"; each callback's "
                                   "reference page (_IRQL_requires_max_(DISPATCH_LEVEL): it "
                                   "must not wait)"},
    [SoftNdkVerifyCallbackCall] = {"callback_call", "CLOSE-9, ASYNC-1",
                                   "a provider call NDKPI does not allow from a callback",
                                   "\"NDK_FN_QUERY_ADAPTER_INFO\" (PASSIVE_LEVEL); \"NDKPI "
                                   "Object Lifetime Requirements\" (adapter close is never "
                                   "called from a callback)"},
    [SoftNdkVerifyHandleInvalid] = {"handle_invalid", "OBJ-6, LIFE-1",
                                    "a handle that is not a live object of this adapter",
                                    "\"NDKPI Object Lifetime Requirements\"; "
                                    "\"NDK_FN_CREATE_COMPLETION\" (an object is usable once "
                                    "its create completed)"},
    [SoftNdkVerifyUseAfterClose] = {"use_after_close", "CLOSE-2",
                                    "a call on an object after its close started",
                                    "\"NDK_FN_CLOSE_OBJECT\"; \"NDKPI Object Lifetime "
                                    "Requirements\" (the consumer does not touch an object "
                                    "after closing it)"},
    [SoftNdkVerifyPostConcurrent] = {"post_concurrent", "POST-2",
                                     "two threads posting on one queue of a QP at once",
                                     "\"NDKPI Work Request Posting Requirements\" (the consumer "
                                     "serializes the calls of each queue)"},
    [SoftNdkVerifySrqConcurrent] = {"srq_concurrent", "SRQ-7, POST-2",
                                    "two threads in NdkSrqReceive of one SRQ at once",
                                    "\"NDK_FN_SRQ_RECEIVE\"; \"NDKPI Work Request Posting "
                                    "Requirements\""},
    [SoftNdkVerifyCloseDuringPost] = {"close_during_post", "CLOSE-3",
                                      "a QP or SRQ closed while a post on it was running",
                                      "\"NDK_FN_CLOSE_OBJECT\"; \"NDKPI Object Lifetime "
                                      "Requirements\" (no close while a call on the object "
                                      "runs)"},
};

void sndk_verify_vreport(const struct sndk_verify_subject *s, SOFTNDK_VERIFY_RULE rule,
                         const void *ctx, const char *fmt, va_list ap)
{
    uint32_t bit = 1u << (unsigned)rule;
    if (atomic_fetch_or_explicit(s->reported, bit, memory_order_relaxed) & bit)
        return; /* once per object and rule */
    atomic_fetch_add_explicit(&s->policy->violations[rule], 1, memory_order_relaxed);
    const struct sndk_verify_rule_info *r = &sndk_verify_rules[rule];
    char what[400];
    vsnprintf(what, sizeof what, fmt, ap);
    char reqctx[40] = "";
    if (ctx)
        snprintf(reqctx, sizeof reqctx, " RequestContext %p", ctx);
    bool strict = s->policy->mode == SoftNdkVerifyStrict;
    const char *type = s->type;
    /* Written whatever the log level: the verifier was asked for. */
    sndk_log_write(strict ? SNDK_LOG_ERROR : SNDK_LOG_WARN, "verify",
                   "[%s] %s: %s %p%s: %s (NDKPI: %s; docs/ndk-rules.md %s)", r->name, r->title,
                   type, s->obj, reqctx, what, r->ref, r->rules);
    if (sndk_trace_on()) {
        char ev[48];
        snprintf(ev, sizeof ev, "verify.%s", r->name);
        sndk_trace_emit(ev, type, s->obj, "\"ids\":\"%s\",\"request_context\":\"%p\"", r->rules,
                        ctx);
    }
    if (strict) {
        sndk_log_write(SNDK_LOG_ERROR, "verify",
                       "SOFTNDK_VERIFY=strict: the violation above is fatal (abort)");
        abort();
    }
}

void sndk_verify_report_on(const struct sndk_verify_subject *s, SOFTNDK_VERIFY_RULE rule,
                           const void *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sndk_verify_vreport(s, rule, ctx, fmt, ap);
    va_end(ap);
}

void sndk_verify_summary(const struct sndk_verify_policy *p, const void *adapter)
{
    if (p->mode == SoftNdkVerifyOff)
        return;
    char line[600];
    size_t n = 0;
    uint64_t total = 0;
    for (int i = 0; i < SoftNdkVerifyRuleCount; i++) {
        uint64_t c = atomic_load_explicit(&p->violations[i], memory_order_relaxed);
        total += c;
        if (c && n < sizeof line) {
            int k = snprintf(line + n, sizeof line - n, " %s=%llu", sndk_verify_rules[i].name,
                             (unsigned long long)c);
            n += k > 0 ? (size_t)k : 0;
        }
    }
    if (total)
        sndk_log_write(SNDK_LOG_WARN, "verify", "adapter %p closes with %llu violation(s):%s",
                       adapter, (unsigned long long)total, line);
    else
        sndk_info("verify", "adapter %p closes with no violation", adapter);
    SNDK_TRACE("verify.summary", "adapter", adapter, "\"violations\":%llu",
               (unsigned long long)total);
}

/* ---- Callbacks ------------------------------------------------------------------------------ */

/* The callback this thread is running (innermost), NULL outside any verified callback. */
static SNDK_TLS struct sndk_callback_scope *tls_callback;

static const char *const callback_names[SNDK_CB_KIND_COUNT] = {
    [SNDK_CB_CQ_NOTIFICATION] = "CQ notification (NDK_FN_CQ_NOTIFICATION_CALLBACK)",
    [SNDK_CB_SRQ_NOTIFICATION] = "SRQ notification (NDK_FN_SRQ_NOTIFICATION_CALLBACK)",
    [SNDK_CB_CONNECT_EVENT] = "connect event (NDK_FN_CONNECT_EVENT_CALLBACK)",
    [SNDK_CB_DISCONNECT_EVENT] = "disconnect event (NDK_FN_DISCONNECT_EVENT_CALLBACK(_EX))",
    [SNDK_CB_REQUEST_COMPLETION] = "request completion (NDK_FN_REQUEST_COMPLETION)",
    [SNDK_CB_CLOSE_COMPLETION] = "close completion (NDK_FN_CLOSE_COMPLETION)",
};

const char *sndk_verify_callback_name(enum sndk_callback_kind k)
{
    return (unsigned)k < SNDK_CB_KIND_COUNT ? callback_names[k] : "?";
}

/* Time this thread spent runnable but waiting for a CPU (ns), from the scheduler's statistics
 * (/proc/thread-self/schedstat, second field): what a loaded machine adds to a callback's
 * duration. The file stays open per thread (closed at thread exit). false where the kernel
 * does not keep them. */
static pthread_key_t sched_key;
static bool sched_key_ok;
static pthread_once_t sched_once = PTHREAD_ONCE_INIT;
static _Thread_local int tls_sched_fd = -2; /* -2: not tried, -1: not available */

static void sched_fd_close(void *p)
{
    close((int)(intptr_t)p - 1);
}

static void sched_key_create(void)
{
    sched_key_ok = pthread_key_create(&sched_key, sched_fd_close) == 0;
}

static bool run_delay_ns(uint64_t *out)
{
    if (tls_sched_fd == -2) {
        tls_sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        pthread_once(&sched_once, sched_key_create);
        if (tls_sched_fd >= 0 &&
            (!sched_key_ok ||
             pthread_setspecific(sched_key, (void *)(intptr_t)(tls_sched_fd + 1)) != 0)) {
            close(tls_sched_fd);
            tls_sched_fd = -1;
        }
    }
    if (tls_sched_fd < 0)
        return false;
    char buf[96];
    ssize_t n = pread(tls_sched_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    unsigned long long on_cpu, waiting;
    if (sscanf(buf, "%llu %llu", &on_cpu, &waiting) != 2)
        return false;
    *out = waiting;
    return true;
}

/* The thread's CPU time and voluntary context switches (it gave up the CPU: it waited), by one
 * getrusage. */
static void thread_usage(uint64_t *cpu_ns, long *waits)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) {
        *cpu_ns = 0;
        *waits = 0;
        return;
    }
    *cpu_ns = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
              ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
    *waits = ru.ru_nvcsw;
}

/* The run delay is read from a per-thread sample renewed at a callback's start once it is older
 * than SNDK_SAMPLE_NS (reading it costs a pread); measured from a sample up to that old, it may
 * include delay from before the callback, which only makes the callback's own time a lower
 * bound. */
#define SNDK_SAMPLE_NS 1000000u
struct delay_sample {
    uint64_t at_ns, run_delay_ns;
    bool have;
};
static _Thread_local struct delay_sample tls_delay;

void sndk_callback_enter_verified(struct sndk_callback_scope *s,
                                  const struct sndk_verify_subject *subj,
                                  enum sndk_callback_kind kind, const void *ctx)
{
    s->subject = *subj;
    s->ctx = ctx;
    s->kind = kind;
    s->closed_inside = false;
    s->outer = tls_callback;
    sndk_lock_waited.timing++;
    s->softndk_ns = 0;
    s->start_lock_ns = sndk_lock_waited.ns;
    s->start_lock_waits = sndk_lock_waited.waits;
    thread_usage(&s->start_cpu_ns, &s->start_waits);
    s->start_ns = sndk_clock_ns(CLOCK_MONOTONIC);
    if (s->start_ns - tls_delay.at_ns > SNDK_SAMPLE_NS) {
        tls_delay.at_ns = s->start_ns;
        tls_delay.have = run_delay_ns(&tls_delay.run_delay_ns);
    }
    tls_callback = s;
}

void sndk_callback_leave_verified(struct sndk_callback_scope *s)
{
    uint64_t end = sndk_clock_ns(CLOCK_MONOTONIC);
    uint64_t wall = end - s->start_ns;
    tls_callback = s->outer;
    sndk_lock_waited.timing--;
    unsigned limit_ms = s->subject.policy->callback_ms;
    uint64_t limit = (uint64_t)limit_ms * 1000000u;
    if (wall <= limit)
        return; /* the common case */
    /* Long by the clock: the callback's doing, or the machine's? It is the callback's when it
     * was on the CPU that long, or when it waited (gave up the CPU of its own accord: a sleep,
     * a contended lock, a blocking system call) and its time less the time its thread was
     * runnable without a CPU still passes the threshold. A callback that was only preempted,
     * or whose virtual CPU the host took away, made no voluntary switch: not reported. Waits
     * for softndk's own locks are softndk's: their switches and their time are taken out (a
     * lock wait may put the thread to sleep more than once, or not at all: the time taken out
     * is what makes the difference either way). */
    uint64_t cpu;
    long waits;
    thread_usage(&cpu, &waits);
    cpu -= s->start_cpu_ns;
    waits -= s->start_waits;
    uint64_t lock_waits = sndk_lock_waited.waits - s->start_lock_waits;
    waits = (uint64_t)waits > lock_waits ? waits - (long)lock_waits : 0;
    uint64_t own = wall, rd;
    if (tls_delay.have && tls_delay.at_ns <= s->start_ns && run_delay_ns(&rd)) {
        uint64_t delayed = rd - tls_delay.run_delay_ns;
        own = delayed < wall ? wall - delayed : 0;
    }
    /* softndk's part: its lock waits anywhere in the callback, and the rest of the verified
     * calls' time (their own lock waits are in the first). Its CPU time is at most its wall
     * time, so the callback's own CPU is at least what is left. */
    uint64_t softndk = (sndk_lock_waited.ns - s->start_lock_ns) + s->softndk_ns;
    own = softndk < own ? own - softndk : 0;
    cpu = softndk < cpu ? cpu - softndk : 0;
    char how[160];
    int n;
    if (cpu > limit)
        n = snprintf(how, sizeof how, "it ran %.1f ms on the CPU", (double)cpu / 1e6);
    else if (waits > 0 && own > limit)
        n = snprintf(how, sizeof how, "it waited (%ld voluntary context switch(es))", waits);
    else
        return;
    if (softndk >= 100000u && n > 0 && (size_t)n < sizeof how)
        snprintf(how + n, sizeof how - (size_t)n, " (not counting %.1f ms inside softndk's calls)",
                 (double)softndk / 1e6);
    sndk_verify_report_on(
        &s->subject, SoftNdkVerifyCallbackSlow, s->ctx,
        "the %s took %.1f ms (threshold %u ms, SOFTNDK_VERIFY_CALLBACK_MS) and %s: "
        "callbacks run at DISPATCH_LEVEL on Windows and must not block; hand long "
        "work to a thread of your own",
        callback_names[s->kind], (double)wall / 1e6, limit_ms, how);
}

bool sndk_verify_not_from_callback(const char *call, const char *why)
{
    struct sndk_callback_scope *s = tls_callback;
    if (!s)
        return false;
    sndk_verify_report_on(&s->subject, SoftNdkVerifyCallbackCall, s->ctx,
                          "%s called from the %s of this %s: %s", call, callback_names[s->kind],
                          s->subject.type, why);
    return true;
}

void sndk_verify_close_started(const void *obj)
{
    for (struct sndk_callback_scope *s = tls_callback; s; s = s->outer)
        if (s->subject.obj == obj)
            s->closed_inside = true;
}

bool sndk_verify_inside_own_callback(const void *obj)
{
    for (const struct sndk_callback_scope *s = tls_callback; s; s = s->outer)
        if (s->subject.obj == obj && s->kind != SNDK_CB_CLOSE_COMPLETION && !s->closed_inside)
            return true;
    return false;
}

/* The verified calls of this thread, innermost first (verify.h, struct sndk_verify_call). */
static _Thread_local struct sndk_verify_call *tls_call;

unsigned sndk_verify_call_enter(struct sndk_verify_call *c, atomic_uint *callers)
{
    c->callers = callers;
    c->committed = false;
    c->outer = tls_call;
    c->in_callback = tls_callback;
    if (c->in_callback) {
        c->start_ns = sndk_clock_ns(CLOCK_MONOTONIC);
        c->start_lock_ns = sndk_lock_waited.ns;
    }
    tls_call = c;
    return atomic_fetch_add_explicit(callers, 1, memory_order_acq_rel);
}

void sndk_verify_call_commit(atomic_uint *callers)
{
    for (struct sndk_verify_call *c = tls_call; c; c = c->outer) {
        if (c->callers != callers)
            continue;
        if (!c->committed) {
            c->committed = true;
            atomic_fetch_sub_explicit(callers, 1, memory_order_acq_rel);
        }
        return;
    }
}

void sndk_verify_call_leave(struct sndk_verify_call *c)
{
    assert(tls_call == c);
    tls_call = c->outer;
    if (!c->committed)
        atomic_fetch_sub_explicit(c->callers, 1, memory_order_acq_rel);
    if (c->in_callback) {
        uint64_t took = sndk_clock_ns(CLOCK_MONOTONIC) - c->start_ns;
        uint64_t locked = sndk_lock_waited.ns - c->start_lock_ns;
        c->in_callback->softndk_ns += took > locked ? took - locked : 0;
    }
}
