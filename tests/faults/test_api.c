/* Fault rules themselves (docs/faults.md "Syntax"): malformed strings refused at open, the
 * environment variable, per-adapter rules; the call faults (`fail` for every call kind,
 * `cq_overrun`) and the handshake fault (`mpa_reject`); the log line and the trace event. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"

/* ------------------------------------------------------------------------------------------ */
/* syntax */

static NTSTATUS open_status(const char *faults)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, faults);
    NDK_ADAPTER *a = NULL;
    NTSTATUS st = fx_try_open(&o, &a);
    if (st == STATUS_SUCCESS) {
        CHECK(a != NULL);
        ndk_close_adapter(a);
    }
    return st;
}

static void expect_refused(const char *faults, const char *culprit)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NTSTATUS st = open_status(faults);
    char *log = fx_capture_end(&cap);
    CHECK_MSG(st == STATUS_INVALID_PARAMETER,
              "Faults \"%s\": %s, expected STATUS_INVALID_PARAMETER", faults,
              SoftNdkStatusName(st));
    /* the log names the rule and what is wrong with it */
    CHECK_MSG(strstr(log, culprit) != NULL, "Faults \"%s\": the log does not name \"%s\": %s",
              faults, culprit, log);
    free(log);
}

static void expect_accepted(const char *faults)
{
    NTSTATUS st = open_status(faults);
    CHECK_MSG(st == STATUS_SUCCESS, "Faults \"%s\": %s, expected STATUS_SUCCESS", faults,
              SoftNdkStatusName(st));
}

TEST(malformed_rules_refuse_the_open)
{
    expect_refused("explode", "explode");                  /* unknown kind */
    expect_refused("drop:foo=1", "foo");                   /* unknown parameter */
    expect_refused("stall:dir=tx,after_fpdus=2", "stall"); /* stall needs ms */
    expect_refused("delay:dir=rx", "delay");               /* delay needs ms */
    expect_refused("drop:after_fpdus=12x", "12x");         /* bad number */
    expect_refused("drop:after_fpdus=", "after_fpdus");    /* no number */
    expect_refused("drop:after_fpdus=-1", "-1");           /* not a count */
    expect_refused("drop:after_bytes=99999999999999999999999", "99999999999999999999999");
    expect_refused("fail", "fail");                       /* call is required */
    expect_refused("fail:call=socket", "socket");         /* unknown call */
    expect_refused("drop:dir=up", "up");                  /* bad dir */
    expect_refused("crc:side=left", "left");              /* bad side */
    expect_refused("crc:p=abc", "abc");                   /* bad fraction */
    expect_refused("terminate:layer=tcp", "tcp");         /* bad layer */
    expect_refused("seed=x;crc:p=1", "seed");             /* bad seed */
    expect_refused("drop:dir=tx;   bogus:ms=1", "bogus"); /* the second rule is bad */
    expect_refused("stall:ms=abc", "abc");
}

TEST(seventeen_rules_refuse_the_open_sixteen_do_not)
{
    char buf[1024] = "";
    for (int i = 0; i < 16; i++)
        strcat(buf, i ? ";fail:call=cq,nth=1000" : "fail:call=cq,nth=1000");
    expect_accepted(buf);
    strcat(buf, ";fail:call=pd,nth=1000");
    expect_refused(buf, "16");
}

TEST(a_seed_is_not_a_rule)
{
    /* 16 rules and a seed */
    char buf[1024] = "seed=3";
    for (int i = 0; i < 16; i++)
        strcat(buf, ";drop:after_fpdus=1000");
    expect_accepted(buf);
}

TEST(well_formed_rules_open)
{
    expect_accepted("");
    expect_accepted("   ");
    /* the example of docs/faults.md */
    expect_accepted(
        "seed=7; drop:dir=tx,after_fpdus=100,conn=2; crc:p=1; fail:call=register,nth=3");
    /* spaces around items and parameters, hexadecimal */
    expect_accepted(" drop : dir = tx , after_fpdus = 0x10 ;  stall : ms = 5 , dir = rx ");
    expect_accepted("seed=0x10;crc:p=0.5,dir=rx,after_fpdus=3,count=2");
    expect_accepted("drop:after_bytes=4096,side=passive,conn=1");
    expect_accepted("stall:after_bytes=0,ms=1,side=any");
    expect_accepted("delay:ms=1");
    expect_accepted("terminate:layer=rdmap,etype=2,code=0xff,after_fpdus=3");
    expect_accepted("terminate:layer=ddp,etype=1,code=0x04");
    expect_accepted("terminate:layer=rdmap");
    expect_accepted("terminate:layer=mpa,etype=0,code=2");
    expect_accepted("mpa_reject");
    expect_accepted("mpa_reject:nth=2,count=0");
    expect_accepted("mpa_reject:p=50");
    expect_accepted("cq_overrun");
    expect_accepted("cq_overrun:cq=2,after=5");
    static const char *calls[] = {"cq",       "pd", "qp",        "srq",     "mr",
                                  "register", "mw", "connector", "listener"};
    for (unsigned i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        char r[64];
        snprintf(r, sizeof r, "fail:call=%s,nth=2,count=0", calls[i]);
        expect_accepted(r);
    }
}

/* Parameters the docs give to other kinds only, and after_bytes outside drop/stall: a rule that
 * cannot mean anything must not be accepted silently ("nothing is silently ignored"). */
TEST(parameters_of_other_kinds_refuse_the_open)
{
    expect_refused("crc:after_bytes=100", "after_bytes");
    expect_refused("terminate:after_bytes=100", "after_bytes");
    expect_refused("mpa_reject:dir=tx", "dir");
    expect_refused("fail:call=cq,ms=5", "ms");
    expect_refused("cq_overrun:call=cq", "call");
    expect_refused("drop:layer=ddp", "layer");
    expect_refused("terminate:dir=rx", "rx"); /* tx only */
}

/* The implementation accepts only Terminates RFC 5040/5041/5044 define (docs/faults.md does not
 * say so; docs/history/faults.md). */
TEST(terminate_codes_outside_the_rfcs_refuse_the_open)
{
    expect_refused("terminate:layer=ddp,etype=1,code=0xff", "terminate");
    expect_refused("terminate:layer=mpa,etype=3,code=0", "terminate");
}

/* ------------------------------------------------------------------------------------------ */
/* the environment variable */

TEST(env_var_used_when_the_option_is_null)
{
    CHECK(setenv("SOFTNDK_FAULTS", "fail:call=pd", 1) == 0);
    NDK_ADAPTER *a = fx_open(NULL);
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK(pd == NULL);
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    fixture_close_wait(&pd->Header);
    CHECK_EQ_U64(fx_injected(a), 1);
    ndk_close_adapter(a);
}

TEST(env_var_used_with_the_v2_options_layout)
{
    CHECK(setenv("SOFTNDK_FAULTS", "fail:call=cq", 1) == 0);
    SOFTNDK_OPTIONS o;
    fx_options(&o, "fail:call=pd"); /* beyond Size: not read */
    o.Size = SOFTNDK_OPTIONS_SIZE_V2;
    NDK_ADAPTER *a = fx_open_with(&o);
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    fixture_close_wait(&pd->Header);
    NDK_CQ *cq = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateCq(a, 4, ndk_request_never, NULL, NULL, ndk_create_never, NULL, &cq),
        STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_U64(fx_injected(a), 1);
    ndk_close_adapter(a);
}

TEST(option_wins_over_env_var_and_empty_means_none)
{
    CHECK(setenv("SOFTNDK_FAULTS", "fail:call=pd", 1) == 0);
    NDK_ADAPTER *a = fx_open("fail:call=cq");
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    fixture_close_wait(&pd->Header);
    NDK_CQ *cq = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateCq(a, 4, ndk_request_never, NULL, NULL, ndk_create_never, NULL, &cq),
        STATUS_INSUFFICIENT_RESOURCES);
    ndk_close_adapter(a);
    a = fx_open("");
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    fixture_close_wait(&pd->Header);
    CHECK_EQ_U64(fx_injected(a), 0);
    ndk_close_adapter(a);
}

TEST(malformed_env_var_refuses_the_open)
{
    CHECK(setenv("SOFTNDK_FAULTS", "drop:after_fpdus=ten", 1) == 0);
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    NDK_ADAPTER *a = NULL;
    NTSTATUS st = fx_try_open(&o, &a);
    char *log = fx_capture_end(&cap);
    CHECK_STATUS(st, STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(log, "SOFTNDK_FAULTS") != NULL, "the log does not name the variable: %s", log);
    free(log);
}

TEST(env_var_drives_connection_faults_of_one_adapter)
{
    /* the client takes the variable, the server an explicit empty string */
    CHECK(setenv("SOFTNDK_FAULTS", "drop:dir=tx,after_fpdus=1", 1) == 0);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, NULL);
    fx_options(&os, "");
    struct fx_pair *p = fx_pair_open_with(&oc, &os, 64 * 1024, 8, 8);
    for (unsigned i = 0; i < 3; i++)
        fx_post_recv(&p->sv, 10 + i, i * 1024u, 1024);
    for (unsigned i = 0; i < 3; i++) {
        fx_fill_slot(&p->cl, i, 1024);
        fx_post_send(&p->cl, 20 + i, i * 1024u, 1024, i == 2 ? 0 : NDK_OP_FLAG_DEFER);
    }
    fx_expect(&p->sv, 3);
    fx_check_receives(&p->sv, &p->cl, 3, 1, 1024, 10);
    fx_expect(&p->cl, 3);
    fx_check_initiator(&p->cl, 3, 1, 1, 20);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    CHECK_EQ_U64(fx_injected(p->as), 0);
    fx_pair_close(p);
}

/* ------------------------------------------------------------------------------------------ */
/* fail: every call kind */

/* Open an adapter with `rule`, make `n` calls of `which`; call k must fail iff fails(k). */
static void fail_case(enum fx_call which, const char *params, unsigned n, unsigned nth,
                      unsigned count)
{
    char rule[128];
    snprintf(rule, sizeof rule, "fail:call=%s%s", fx_call_names[which], params);
    NDK_ADAPTER *a = fx_open(rule);
    struct fx_calls pa;
    fx_calls_open(&pa, a, which);
    unsigned failed = 0;
    for (unsigned k = 1; k <= n; k++) {
        bool must_fail = k >= nth && (count == 0 || k < nth + count);
        NTSTATUS st = fx_call(&pa, which, k);
        CHECK_MSG(st == (must_fail ? STATUS_INSUFFICIENT_RESOURCES : STATUS_SUCCESS),
                  "\"%s\": call %u returned %s, expected %s", rule, k, SoftNdkStatusName(st),
                  must_fail ? "STATUS_INSUFFICIENT_RESOURCES" : "STATUS_SUCCESS");
        failed += must_fail;
    }
    CHECK_EQ_U64(fx_injected(a), failed);
    fx_calls_close(&pa);
    ndk_close_adapter(a);
}

#define FAIL_TESTS(kind)                                                                           \
    TEST(fail_##kind##_nth_2_fails_only_the_second_call)                                           \
    {                                                                                              \
        fail_case(FX_C_##kind, ",nth=2", 5, 2, 1);                                                 \
    }                                                                                              \
    TEST(fail_##kind##_count_0_fails_every_call_from_nth)                                          \
    {                                                                                              \
        fail_case(FX_C_##kind, ",nth=3,count=0", 6, 3, 0);                                         \
    }

FAIL_TESTS(CQ)
FAIL_TESTS(PD)
FAIL_TESTS(QP)
FAIL_TESTS(SRQ)
FAIL_TESTS(MR)
FAIL_TESTS(REGISTER)
FAIL_TESTS(MW)
FAIL_TESTS(CONNECTOR)
FAIL_TESTS(LISTENER)

TEST(fail_defaults_refuse_the_first_call_only)
{
    fail_case(FX_C_PD, "", 3, 1, 1);
}

TEST(fail_count_2_refuses_two_calls)
{
    fail_case(FX_C_CQ, ",nth=2,count=2", 5, 2, 2);
}

TEST(fail_hex_nth)
{
    fail_case(FX_C_MR, ",nth=0x3", 4, 3, 1);
}

/* fail with p= and a seed: which of 40 calls fail, as a bit pattern */
static uint64_t fail_p_pattern(unsigned seed)
{
    char rule[64];
    snprintf(rule, sizeof rule, "seed=%u;fail:call=pd,p=40,count=0", seed);
    NDK_ADAPTER *a = fx_open(rule);
    uint64_t pattern = 0;
    unsigned n = 0;
    for (unsigned k = 0; k < 40; k++) {
        NDK_PD *pd = NULL;
        NTSTATUS st = a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd);
        if (st == STATUS_SUCCESS) {
            fixture_close_wait(&pd->Header);
        } else {
            CHECK_STATUS(st, STATUS_INSUFFICIENT_RESOURCES);
            CHECK(pd == NULL);
            pattern |= 1ull << k;
            n++;
        }
    }
    CHECK_EQ_U64(fx_injected(a), n);
    ndk_close_adapter(a);
    return pattern;
}

TEST(fail_p_with_a_seed_is_deterministic)
{
    uint64_t a = fail_p_pattern(11), b = fail_p_pattern(11), c = fail_p_pattern(12);
    fx_note("  seed 11: 0x%010llx twice, seed 12: 0x%010llx\n", (unsigned long long)a,
            (unsigned long long)c);
    CHECK_EQ_U64(a, b);
    CHECK_MSG(a != 0 && a != (1ull << 40) - 1, "p=40 failed %s of 40 calls", a ? "all" : "none");
    CHECK_MSG(a != c, "seeds 11 and 12 failed the same calls: the seed is not used");
}

TEST(fail_rules_and_counts_are_per_adapter)
{
    NDK_ADAPTER *a = fx_open("fail:call=pd,nth=2"), *b = fx_open("fail:call=pd,nth=2"),
                *c = fx_open("");
    NDK_PD *pd = NULL;
    /* a's first, c's first, b's first succeed; a's second and b's second fail */
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    fixture_close_wait(&pd->Header);
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(c->Dispatch->NdkCreatePd(c, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
        fixture_close_wait(&pd->Header);
    }
    CHECK_STATUS(b->Dispatch->NdkCreatePd(b, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    fixture_close_wait(&pd->Header);
    pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK_STATUS(b->Dispatch->NdkCreatePd(b, ndk_create_never, NULL, &pd),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_U64(fx_injected(a), 1);
    CHECK_EQ_U64(fx_injected(b), 1);
    CHECK_EQ_U64(fx_injected(c), 0);
    ndk_close_adapter(a);
    ndk_close_adapter(b);
    ndk_close_adapter(c);
}

TEST(fail_of_one_call_kind_leaves_the_others)
{
    NDK_ADAPTER *a = fx_open("fail:call=mw,count=0");
    struct fx_calls pa;
    fx_calls_open(&pa, a, FX_C_QP);
    for (enum fx_call k = 0; k < FX_C_COUNT; k++)
        CHECK_STATUS(fx_call(&pa, k, 1),
                     k == FX_C_MW ? STATUS_INSUFFICIENT_RESOURCES : STATUS_SUCCESS);
    CHECK_EQ_U64(fx_injected(a), 1);
    fx_calls_close(&pa);
    ndk_close_adapter(a);
}

TEST(fail_is_logged_at_warn_with_its_rule)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = fx_open("seed=1; drop:after_fpdus=1000; fail:call=pd");
    NDK_PD *pd = NULL;
    NTSTATUS st = a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd);
    char *log = fx_capture_end(&cap);
    CHECK_STATUS(st, STATUS_INSUFFICIENT_RESOURCES);
    /* docs/faults.md shows `softndk[fault] injected drop (rule 2 "...") ...`; the log's own
     * prefix is `softndk TIME warn fault: ` (history/faults.md): check the level, the component and
     * the words */
    const char *line = strstr(log, "injected fail");
    CHECK_MSG(line != NULL, "no fault log line: %s", log);
    CHECK_MSG(strstr(log, "warn") != NULL && strstr(log, "fault") != NULL,
              "the fault log line is not at warn level: %s", log);
    CHECK_MSG(strstr(log, "rule 2 \"fail:call=pd\"") != NULL, "the log line names no rule: %s",
              log);
    free(log);
    ndk_close_adapter(a);
}

TEST(fault_is_traced)
{
    char path[] = "/tmp/softndk-faults-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    SOFTNDK_OPTIONS o;
    fx_options(&o, "fail:call=connector");
    o.TraceFile = path;
    NDK_ADAPTER *a = fx_open_with(&o);
    NDK_CONNECTOR *c = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &c),
                 STATUS_INSUFFICIENT_RESOURCES);
    ndk_close_adapter(a);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "\"ev\":\"fault.injected\"") && strstr(line, "\"kind\"") &&
                strstr(line, "fail") && strstr(line, "\"rule\"");
    fclose(f);
    unlink(path);
    CHECK_MSG(found, "no fault.injected event with kind and rule in the trace");
}

/* ------------------------------------------------------------------------------------------ */
/* cq_overrun */

struct ocq {
    NDK_CQ *cq;
    struct harness_event ev;
    atomic_uint n;
    NTSTATUS st[16];
};

static void ocq_notify(void *ctx, NTSTATUS st)
{
    struct ocq *c = ctx;
    unsigned i = atomic_load(&c->n);
    if (i < 16)
        c->st[i] = st;
    atomic_fetch_add(&c->n, 1);
    harness_event_signal(&c->ev);
}

static void ocq_create(NDK_ADAPTER *a, struct ocq *c)
{
    memset(c, 0, sizeof *c);
    harness_event_init(&c->ev);
    CHECK_STATUS(
        a->Dispatch->NdkCreateCq(a, 64, ocq_notify, c, NULL, ndk_create_never, NULL, &c->cq),
        STATUS_SUCCESS);
}

static void ocq_close(struct ocq *c)
{
    fixture_close_wait(&c->cq->Header);
    harness_event_destroy(&c->ev);
}

/* n receives on a fresh QP feeding cq, flushed: n STATUS_CANCELLED completions on cq. */
static void flush_into(NDK_PD *pd, struct ocq *c, unsigned n)
{
    NDK_QP *qp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQp(pd, c->cq, c->cq, NULL, 16, 4, 1, 1, 0, ndk_create_never,
                                           NULL, &qp),
                 STATUS_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        CHECK_STATUS(qp->Dispatch->NdkReceive(qp, (void *)(uintptr_t)(i + 1), NULL, 0),
                     STATUS_SUCCESS);
    qp->Dispatch->NdkFlush(qp);
    fixture_close_wait(&qp->Header);
}

static unsigned drain(struct ocq *c)
{
    NDK_RESULT_EX r[64];
    unsigned total = 0;
    ULONG got;
    while ((got = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, r, 64)) > 0) {
        for (ULONG i = 0; i < got; i++)
            CHECK_STATUS(r[i].Status, STATUS_CANCELLED);
        total += got;
    }
    return total;
}

TEST(cq_overrun_cq1_after3_overruns_at_the_fourth_completion)
{
    NDK_ADAPTER *a = fx_open("cq_overrun:cq=1,after=3");
    struct ocq c1, c2;
    ocq_create(a, &c1); /* CQ #1 */
    ocq_create(a, &c2); /* CQ #2 */
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    c1.cq->Dispatch->NdkArmCq(c1.cq, NDK_CQ_NOTIFY_ERRORS);
    /* completions 1-3: delivered */
    flush_into(pd, &c1, 3);
    CHECK_EQ_U64(drain(&c1), 3);
    CHECK_MSG(!harness_event_wait(&c1.ev, 1, FIXTURE_QUIET_MS),
              "an error notification before the overrun");
    SOFTNDK_COUNTERS k;
    fx_counters(a, &k);
    CHECK_EQ_U64(k.CQError, 0);
    CHECK_EQ_U64(k.InjectedFaults, 0);
    /* completion 4: the CQ overruns, the armed CQ is told so */
    flush_into(pd, &c1, 1);
    CHECK_MSG(harness_event_wait(&c1.ev, 1, FIXTURE_WAIT_MS), "no notification of the overrun");
    CHECK_STATUS(c1.st[0], STATUS_BUFFER_OVERFLOW);
    CHECK_EQ_U64(drain(&c1), 0);
    /* the CQ is dead: more completions are lost, a later arm is told at once */
    flush_into(pd, &c1, 2);
    CHECK_EQ_U64(drain(&c1), 0);
    c1.cq->Dispatch->NdkArmCq(c1.cq, NDK_CQ_NOTIFY_ANY);
    CHECK_MSG(harness_event_wait(&c1.ev, 2, FIXTURE_WAIT_MS), "a dead CQ's arm was not satisfied");
    CHECK_STATUS(c1.st[1], STATUS_BUFFER_OVERFLOW);
    fx_counters(a, &k);
    CHECK_EQ_U64(k.CQError, 1);
    CHECK_EQ_U64(k.InjectedFaults, 1);
    /* CQ #2 is not affected */
    c2.cq->Dispatch->NdkArmCq(c2.cq, NDK_CQ_NOTIFY_ERRORS);
    flush_into(pd, &c2, 10);
    CHECK_EQ_U64(drain(&c2), 10);
    CHECK(!harness_event_wait(&c2.ev, 1, FIXTURE_QUIET_MS));
    fx_counters(a, &k);
    CHECK_EQ_U64(k.CQError, 1);
    CHECK_EQ_U64(k.InjectedFaults, 1);
    fixture_close_wait(&pd->Header);
    ocq_close(&c1);
    ocq_close(&c2);
    ndk_close_adapter(a);
}

TEST(cq_overrun_cq2_spares_cq1)
{
    NDK_ADAPTER *a = fx_open("cq_overrun:cq=2,after=1");
    struct ocq c1, c2;
    ocq_create(a, &c1);
    ocq_create(a, &c2);
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    flush_into(pd, &c1, 5);
    CHECK_EQ_U64(drain(&c1), 5);
    flush_into(pd, &c2, 2); /* 1 delivered, the 2nd overruns (and takes the 1st with it) */
    CHECK_EQ_U64(drain(&c2), 0);
    /* not armed: the next arm learns of the overrun at once */
    c2.cq->Dispatch->NdkArmCq(c2.cq, NDK_CQ_NOTIFY_SOLICITED);
    CHECK_MSG(harness_event_wait(&c2.ev, 1, FIXTURE_WAIT_MS), "no notification of the overrun");
    CHECK_STATUS(c2.st[0], STATUS_BUFFER_OVERFLOW);
    CHECK(!harness_event_wait(&c1.ev, 1, FIXTURE_QUIET_MS));
    SOFTNDK_COUNTERS k;
    fx_counters(a, &k);
    CHECK_EQ_U64(k.CQError, 1);
    CHECK_EQ_U64(k.InjectedFaults, 1);
    fixture_close_wait(&pd->Header);
    ocq_close(&c1);
    ocq_close(&c2);
    ndk_close_adapter(a);
}

TEST(cq_overrun_default_hits_every_cq_at_its_first_completion)
{
    NDK_ADAPTER *a = fx_open("cq_overrun");
    struct ocq c[3];
    for (int i = 0; i < 3; i++)
        ocq_create(a, &c[i]);
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    for (int i = 0; i < 3; i++) {
        c[i].cq->Dispatch->NdkArmCq(c[i].cq, NDK_CQ_NOTIFY_ANY);
        flush_into(pd, &c[i], 1);
        CHECK_MSG(harness_event_wait(&c[i].ev, 1, FIXTURE_WAIT_MS), "CQ %d: no notification",
                  i + 1);
        CHECK_STATUS(c[i].st[0], STATUS_BUFFER_OVERFLOW);
        CHECK_EQ_U64(drain(&c[i]), 0);
    }
    SOFTNDK_COUNTERS k;
    fx_counters(a, &k);
    CHECK_EQ_U64(k.CQError, 3);
    CHECK_EQ_U64(k.InjectedFaults, 3);
    fixture_close_wait(&pd->Header);
    for (int i = 0; i < 3; i++)
        ocq_close(&c[i]);
    ndk_close_adapter(a);
}

TEST(cq_overrun_point_never_reached_does_not_fire)
{
    NDK_ADAPTER *a = fx_open("cq_overrun:after=20");
    struct ocq c1;
    ocq_create(a, &c1);
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    c1.cq->Dispatch->NdkArmCq(c1.cq, NDK_CQ_NOTIFY_ERRORS);
    flush_into(pd, &c1, 10);
    CHECK_EQ_U64(drain(&c1), 10);
    flush_into(pd, &c1, 10);
    CHECK_EQ_U64(drain(&c1), 10);
    CHECK(!harness_event_wait(&c1.ev, 1, FIXTURE_QUIET_MS));
    SOFTNDK_COUNTERS k;
    fx_counters(a, &k);
    CHECK_EQ_U64(k.CQError, 0);
    CHECK_EQ_U64(k.InjectedFaults, 0);
    fixture_close_wait(&pd->Header);
    ocq_close(&c1);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* mpa_reject */

static const char reject_text[] = "softndk: injected fault";

static void check_reject_data(struct fx_side *cl)
{
    char why[256];
    ULONG len = sizeof why;
    CHECK_STATUS(cl->conn->Dispatch->NdkGetConnectionData(cl->conn, NULL, NULL, why, &len),
                 STATUS_SUCCESS);
    CHECK_MSG(len == sizeof reject_text - 1 && memcmp(why, reject_text, len) == 0,
              "private data of the reject: %lu bytes \"%.*s\", expected \"%s\"", (unsigned long)len,
              (int)len, why, reject_text);
}

/* Connect `n` times (a fresh QP each); connection k must be refused iff refused(k). */
static void reject_case(const char *srule, const char *crule, unsigned n, unsigned nth,
                        unsigned count)
{
    NDK_ADAPTER *ac = fx_open(crule), *as = fx_open(srule);
    struct fx_server srv;
    fx_listen(&srv, as);
    unsigned refused = 0;
    for (unsigned k = 1; k <= n; k++) {
        struct fx_side *cl = calloc(1, sizeof *cl), *sv = calloc(1, sizeof *sv);
        CHECK(cl && sv);
        fx_side_init(cl, ac, 4096, 4, 4);
        bool must = nth && k >= nth && (count == 0 || k < nth + count);
        if (must) {
            fx_connect_refused(cl, &srv, STATUS_CONNECTION_REFUSED);
            check_reject_data(cl);
            refused++;
            /* the refused QP is left as it was: a new connector can use it */
            fixture_close_wait(&cl->conn->Header);
            cl->conn = NULL;
        } else {
            fx_side_init(sv, as, 4096, 4, 4);
            fx_establish(cl, sv, &srv);
            fx_disconnect(cl, sv);
            fx_side_close(sv);
        }
        fx_side_close(cl);
        free(cl);
        free(sv);
    }
    CHECK_MSG(!harness_event_wait(&srv.ev, n - refused + 1, FIXTURE_QUIET_MS),
              "the listener's consumer saw a rejected request");
    /* MpaRejectsSent is bumped after the Reject is on the wire: the client may know first */
    FX_WAIT_COUNTER(as, MpaRejectsSent, refused);
    SOFTNDK_COUNTERS c, s;
    fx_counters(ac, &c);
    fx_counters(as, &s);
    CHECK_EQ_U64(s.InjectedFaults, refused);
    CHECK_EQ_U64(c.InjectedFaults, 0);
    CHECK_EQ_U64(s.MpaRejectsSent, refused);
    CHECK_EQ_U64(c.MpaRejectsReceived, refused);
    CHECK_EQ_U64(c.ConnectFailure, refused);
    CHECK_EQ_U64(s.ConnectFailure, refused); /* "either side" */
    CHECK_EQ_U64(c.Connect, n - refused);
    CHECK_EQ_U64(s.Accept, n - refused);
    fx_server_close(&srv);
    ndk_close_adapter(ac);
    ndk_close_adapter(as);
}

TEST(mpa_reject_refuses_the_first_request_with_its_text)
{
    reject_case("mpa_reject", "", 2, 1, 1);
}

TEST(mpa_reject_nth_2_refuses_only_the_second)
{
    reject_case("mpa_reject:nth=2", "", 3, 2, 1);
}

TEST(mpa_reject_count_0_refuses_every_request_from_nth)
{
    reject_case("mpa_reject:nth=2,count=0", "", 4, 2, 0);
}

TEST(mpa_reject_p100_refuses_every_request)
{
    reject_case("seed=3;mpa_reject:p=100,count=0", "", 2, 1, 0);
}

TEST(mpa_reject_on_the_active_side_never_fires)
{
    reject_case("", "mpa_reject", 2, 0, 0);
}

TEST(mpa_reject_then_same_qp_connects_with_a_new_connector)
{
    NDK_ADAPTER *ac = fx_open(""), *as = fx_open("mpa_reject");
    struct fx_server srv;
    fx_listen(&srv, as);
    struct fx_side *cl = calloc(1, sizeof *cl), *sv = calloc(1, sizeof *sv);
    CHECK(cl && sv);
    fx_side_init(cl, ac, 4096, 4, 4);
    fx_side_init(sv, as, 4096, 4, 4);
    fx_connect_refused(cl, &srv, STATUS_CONNECTION_REFUSED);
    check_reject_data(cl);
    fixture_close_wait(&cl->conn->Header);
    cl->conn = NULL;
    fx_establish(cl, sv, &srv);
    fx_post_recv(sv, 1, 0, 64);
    fx_fill_slot(cl, 0, 64);
    fx_post_send(cl, 2, 0, 64, 0);
    fx_expect(sv, 1);
    fx_check_receives(sv, cl, 1, 1, 64, 1);
    fx_disconnect(cl, sv);
    fx_side_close(cl);
    fx_side_close(sv);
    free(cl);
    free(sv);
    CHECK_EQ_U64(fx_injected(as), 1);
    fx_server_close(&srv);
    ndk_close_adapter(ac);
    ndk_close_adapter(as);
}
