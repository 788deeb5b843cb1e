/* The verifier's callback rule (verify/verify.h, callback_slow) on its own: what a callback did
 * inside the verified calls it made (a poll, a post) is softndk's time, not the callback's. */
#include <stdatomic.h>
#include <time.h>

#include "harness.h"
#include "verify/verify.h"

struct subject_rig {
    _Atomic uint64_t violations[SOFTNDK_VERIFY_RULE_SLOTS];
    _Atomic uint32_t reported;
    struct sndk_verify_policy policy;
    struct sndk_verify_subject subject;
};

static void rig_init(struct subject_rig *r)
{
    for (unsigned i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        atomic_init(&r->violations[i], 0);
    atomic_init(&r->reported, 0);
    r->policy = (struct sndk_verify_policy){
        .mode = SoftNdkVerifyWarn, .callback_ms = 5, .violations = r->violations};
    r->subject = (struct sndk_verify_subject){
        .policy = &r->policy, .obj = r, .type = "CQ", .reported = &r->reported};
}

/* Burn `ms` of this thread's CPU time (not wall time: a loaded machine does not shorten it). */
static void spin_cpu_ms(unsigned ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ms * 1000000L);
}

/* A verified CQ notification (threshold 5 ms) that spends `in_call_ms` of CPU inside a verified
 * call it makes, then `own_ms` in its own code: how many callback_slow reports it got. */
static uint64_t slow_reports(unsigned in_call_ms, unsigned own_ms)
{
    struct subject_rig r;
    rig_init(&r);
    atomic_uint callers = 0;
    struct sndk_callback_scope s;
    sndk_callback_enter_verified(&s, &r.subject, SNDK_CB_CQ_NOTIFICATION, NULL);
    struct sndk_verify_call c;
    CHECK_EQ_U64(sndk_verify_call_enter(&c, &callers), 0);
    spin_cpu_ms(in_call_ms);
    sndk_verify_call_leave(&c);
    spin_cpu_ms(own_ms);
    sndk_callback_leave_verified(&s);
    CHECK_EQ_U64(atomic_load(&callers), 0);
    return atomic_load(&r.violations[SoftNdkVerifyCallbackSlow]);
}

/* 20 ms of CPU inside a verified call of a callback (a Send that copied and checksummed its
 * payload inline) against a 5 ms threshold: not the callback's. */
TEST(verify_callback_time_inside_a_verified_call_is_softndk_s)
{
    CHECK_EQ_U64(slow_reports(20, 0), 0);
}

/* The same 20 ms in the callback's own code is reported, also when it made a verified call
 * too: only the call's time is taken out. */
TEST(verify_callback_own_time_beside_a_verified_call_is_named)
{
    CHECK_EQ_U64(slow_reports(2, 20), 1);
}
