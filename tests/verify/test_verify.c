/* The consumer verifier against the mistakes of a real consumer driver (docs/verifier.md): a small
 * consumer commits each one and gets exactly the report expected, the rule's counter at 1 and
 * no other rule, and the log line with the rule, the NDKPI reference, the object and the
 * RequestContext; a clean consumer gets none under strict. One process per test (ctest), the
 * counters and the thread marks being the adapter's and the thread's. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "fixture.h"
#include "harness.h"
#include "rig.h"

static struct fx_pair *pair(SOFTNDK_VERIFY_MODE mode)
{
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, NULL);
    fx_options(&os, NULL);
    oc.Verify = os.Verify = mode;
    return fx_pair_open_with(&oc, &os, 1u << 16, 16, 16);
}

static NDK_ADAPTER *open_one(SOFTNDK_VERIFY_MODE mode)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    o.Verify = mode;
    return fx_open_with(&o);
}

/* The adapter's verifier counters: `rule` at want (SoftNdkVerifyRuleCount: none), all others 0. */
static void expect_only(NDK_ADAPTER *a, SOFTNDK_VERIFY_RULE rule, uint64_t want)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    for (int i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        CHECK_MSG(c.VerifyViolations[i] == (i == (int)rule ? want : 0),
                  "VerifyViolations[%d] = %llu, want %llu", i,
                  (unsigned long long)c.VerifyViolations[i],
                  (unsigned long long)(i == (int)rule ? want : 0));
}

static uint64_t wait_rule(NDK_ADAPTER *a, SOFTNDK_VERIFY_RULE rule)
{
    return fx_wait_counter(
        a, offsetof(SOFTNDK_COUNTERS, VerifyViolations) + sizeof(ULONG64) * (size_t)rule, 1);
}

static void signal_closed(void *ctx)
{
    harness_event_signal(ctx);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- a CQ of our own with a notification callback: a receive posted on an idle QP, then
 * NdkFlush, completes it (cancelled) and fires the armed notification. No peer needed. */

struct cb_rig {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    uint8_t buf[4096];
    void (*body)(struct cb_rig *r); /* what the callback does */
    struct harness_event done;      /* signalled as the callback returns */
    unsigned calls;                 /* callbacks so far (they never overlap) */
    NTSTATUS status;                /* what the body saw */
    bool cq_close_started;          /* with signal_closed on cq_closed */
    struct harness_event cq_closed;
    struct harness_event entered; /* the callback has begun (bodies that wait signal it) */
    struct harness_event go_on;   /* the test lets a waiting body go on */
};

static void rig_notify(void *ctx, NTSTATUS st)
{
    (void)st;
    struct cb_rig *r = ctx;
    r->calls++;
    if (r->body)
        r->body(r);
    harness_event_signal(&r->done);
}

static void rig_open(struct cb_rig *r, SOFTNDK_VERIFY_MODE mode, void (*body)(struct cb_rig *))
{
    memset(r, 0, sizeof *r);
    harness_event_init(&r->done);
    harness_event_init(&r->cq_closed);
    harness_event_init(&r->entered);
    harness_event_init(&r->go_on);
    r->body = body;
    r->a = open_one(mode);
    rig_objects_open(r->a, rig_notify, r, r->buf, sizeof r->buf, &r->pd, &r->cq, &r->qp, &r->mr);
}

/* Arm, post one receive, flush: one notification; wait for it to return. */
static void rig_fire(struct cb_rig *r)
{
    r->cq->Dispatch->NdkArmCq(r->cq, NDK_CQ_NOTIFY_ANY);
    NDK_SGE sge = rig_sge(r->buf, r->mr);
    CHECK_STATUS(r->qp->Dispatch->NdkReceive(r->qp, (void *)0x4242, &sge, 1), STATUS_SUCCESS);
    r->qp->Dispatch->NdkFlush(r->qp);
    CHECK(harness_event_wait(&r->done, 1, FIXTURE_WAIT_MS));
}

static void rig_close(struct cb_rig *r)
{
    fixture_close_wait(&r->qp->Header);
    fixture_close_wait(&r->mr->Header);
    if (!r->cq_close_started)
        fixture_close_wait(&r->cq->Header);
    else
        CHECK(harness_event_wait(&r->cq_closed, 1, FIXTURE_WAIT_MS));
    fixture_close_wait(&r->pd->Header);
    ndk_close_adapter(r->a);
    harness_event_destroy(&r->done);
    harness_event_destroy(&r->cq_closed);
    harness_event_destroy(&r->entered);
    harness_event_destroy(&r->go_on);
}

static void drain(struct cb_rig *r)
{
    NDK_RESULT res[4];
    while (r->cq->Dispatch->NdkGetCqResults(r->cq, res, 4) > 0)
        ;
}

/* ------------------------------------------------------------------------------------------ */
/* Failure 1 (docs/verifier.md, "What a provider cannot see"): NdkGetConnectionData after NdkCompleteConnect. */

TEST(issue1_connection_data_after_complete_connect)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = pair(SoftNdkVerifyWarn);
    ULONG ird = 0, ord = 0, len = 0;
    CHECK_STATUS(p->cl.conn->Dispatch->NdkGetConnectionData(p->cl.conn, &ird, &ord, NULL, &len),
                 STATUS_SUCCESS); /* softndk still answers */
    expect_only(p->ac, SoftNdkVerifyConnDataLate, 1);
    expect_only(p->as, SoftNdkVerifyRuleCount, 0);
    char obj[48];
    snprintf(obj, sizeof obj, "connector %p:", (void *)p->cl.conn);
    fx_disconnect(&p->cl, &p->sv);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "warn verify: [conn_data_late]", obj,
                                "NdkGetConnectionData in state connected, after the "
                                "NdkCompleteConnect",
                                "\"NDK_FN_GET_CONNECTION_DATA\"", "CONN-6", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(log, "closes with 1 violation(s): conn_data_late=1", NULL), 1);
    free(log);
}

/* Failure 2: receives posted after NdkAccept; the peer's first Send finds none. Named on the
 * late side (the server), not on the sender. */
TEST(issue2_receives_posted_after_accept)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = pair(SoftNdkVerifyWarn);
    fx_post_send(&p->cl, 0x2222, 0, 256, 0); /* the peer sends at once */
    CHECK_EQ_U64(wait_rule(p->as, SoftNdkVerifyNoReceivePosted), 1);
    fx_post_recv(&p->sv, 0x2223, 0, 4096);                    /* too late */
    CHECK(harness_event_wait(&p->cl.disc_ev, 1, FIXTURE_WAIT_MS)); /* iWARP: a Terminate */
    expect_only(p->as, SoftNdkVerifyNoReceivePosted, 1);
    expect_only(p->ac, SoftNdkVerifyRuleCount, 0);
    char obj[48];
    snprintf(obj, sizeof obj, "QP %p:", (void *)p->sv.qp);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [no_receive_posted]", obj,
                                "a Send arrived with no receive posted: post receives before "
                                "NdkAccept/NdkConnect",
                                "code 2", "RFC 5041", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* Failure 3: a thread uses an object another thread has not published yet. The creator stores
 * the QP into the shared place only after the user has read it: the user passes NULL to
 * NdkConnect. softndk sees a handle that is no live QP and names it on the connector. */
struct publish {
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *_Atomic qp; /* the shared place */
    struct harness_event read;
};

static void *creator(void *arg)
{
    struct publish *pub = arg;
    CHECK(harness_event_wait(&pub->read, 1, FIXTURE_WAIT_MS)); /* loses the race */
    NDK_QP *qp = NULL;
    CHECK_STATUS(pub->pd->Dispatch->NdkCreateQp(pub->pd, pub->cq, pub->cq, NULL, 4, 4, 1, 1, 0,
                                                ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    atomic_store(&pub->qp, qp);
    return NULL;
}

TEST(issue3_object_used_before_another_thread_published_it)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = open_one(SoftNdkVerifyWarn);
    struct fx_server srv;
    fx_listen(&srv, a);
    struct publish pub = {0};
    harness_event_init(&pub.read);
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pub.pd), STATUS_SUCCESS);
    CHECK_STATUS(a->Dispatch->NdkCreateCq(a, 16, ndk_request_never, NULL, NULL, ndk_create_never,
                                          NULL, &pub.cq),
                 STATUS_SUCCESS);
    NDK_CONNECTOR *c = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &c), STATUS_SUCCESS);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, creator, &pub) == 0);
    NDK_QP *qp = atomic_load(&pub.qp); /* not published yet: NULL */
    harness_event_signal(&pub.read);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(srv.port);
    CHECK_STATUS(c->Dispatch->NdkConnect(c, qp, (struct sockaddr *)&src, sizeof src,
                                         (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                         ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    pthread_join(t, NULL);
    expect_only(a, SoftNdkVerifyHandleInvalid, 1);
    fixture_close_wait(&c->Header);
    fixture_close_wait(&atomic_load(&pub.qp)->Header);
    fixture_close_wait(&pub.cq->Header);
    fixture_close_wait(&pub.pd->Header);
    fx_server_close(&srv);
    ndk_close_adapter(a);
    harness_event_destroy(&pub.read);
    char *log = fx_capture_end(&cap);
    char obj[48];
    snprintf(obj, sizeof obj, "connector %p:", (void *)c);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [handle_invalid]", obj,
                                "NdkConnect given the QP NULL",
                                "read before the thread that created it stored it",
                                "\"NDKPI Object Lifetime Requirements\"", "OBJ-6", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* The same race seen from the other end: the user kept the pointer of an object another thread
 * has started closing (a stale publication). The call is named while the object still exists. */
TEST(issue3_object_used_after_another_thread_closed_it)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = open_one(SoftNdkVerifyWarn);
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    struct harness_event closed;
    harness_event_init(&closed);
    /* the PD's close pends while its MR is open: the memory is there, the object closing */
    CHECK_STATUS(ndk_close_any(&pd->Header, signal_closed, &closed), STATUS_PENDING);
    NDK_MR *mr2 = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr2),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr2),
                 STATUS_INVALID_DEVICE_STATE); /* once per object and rule */
    expect_only(a, SoftNdkVerifyUseAfterClose, 1);
    fixture_close_wait(&mr->Header);
    CHECK(harness_event_wait(&closed, 1, FIXTURE_WAIT_MS));
    ndk_close_adapter(a);
    harness_event_destroy(&closed);
    char *log = fx_capture_end(&cap);
    char obj[48];
    snprintf(obj, sizeof obj, "PD %p:", (void *)pd);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [use_after_close]", obj, "after its close started",
                                "\"NDK_FN_CLOSE_OBJECT\"", "CLOSE-2", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* A strict report aborts the process; when a test had stderr captured to read its log, the
 * harness copies the captured text out first, so the report that killed the test is in the
 * test's output (it once was not, and a CI failure said only "killed by signal 6"). */
static void use_after_close_inside_a_capture(void *arg)
{
    (void)arg;
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = open_one(SoftNdkVerifyStrict);
    NDK_PD *pd = NULL;
    NDK_MR *mr = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    CHECK_STATUS(ndk_close_any(&pd->Header, NULL, NULL), STATUS_PENDING);
    (void)pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr); /* aborts */
}

TEST(strict_report_inside_a_capture_reaches_stderr)
{
    char out[8192];
    int status = harness_run_child(use_after_close_inside_a_capture, NULL, out, sizeof out);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK_EQ_U64(fx_count_lines(out, "stderr the test had captured when it ended", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(out, "verify: [use_after_close]", "CLOSE-2", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(out, "SOFTNDK_VERIFY=strict", "fatal (abort)", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(out, "end of captured stderr", NULL), 1);
}

/* The same for a failed CHECK inside a capture: the captured text, then the failure. */
static void check_fails_inside_a_capture(void *arg)
{
    (void)arg;
    struct fx_capture cap;
    fx_capture_begin(&cap);
    fprintf(stderr, "what the test had logged\n");
    CHECK_EQ_U64(1, 2);
}

TEST(failed_check_inside_a_capture_reaches_stderr)
{
    char out[8192];
    int status = harness_run_child(check_fails_inside_a_capture, NULL, out, sizeof out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECK_EQ_U64(fx_count_lines(out, "stderr the test had captured when it ended", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(out, "what the test had logged", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(out, "failed:", "1 == 2", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(out, "end of captured stderr", NULL), 1);
}

/* The close completion is the object's last callback: a call on the object from it is named
 * (the exception for an object's own callbacks ends there). */
struct reuse_in_close {
    NDK_PD *pd;
    NTSTATUS status;
    struct harness_event closed;
};

static void create_from_close_completion(void *ctx)
{
    struct reuse_in_close *c = ctx;
    NDK_MR *mr = NULL;
    c->status = c->pd->Dispatch->NdkCreateMr(c->pd, FALSE, ndk_create_never, NULL, &mr);
    harness_event_signal(&c->closed);
}

TEST(close_completion_that_uses_its_object_is_named)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = open_one(SoftNdkVerifyWarn);
    struct reuse_in_close c = {.status = STATUS_SUCCESS};
    harness_event_init(&c.closed);
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &c.pd), STATUS_SUCCESS);
    NDK_MR *mr = NULL;
    CHECK_STATUS(c.pd->Dispatch->NdkCreateMr(c.pd, FALSE, ndk_create_never, NULL, &mr),
                 STATUS_SUCCESS);
    CHECK_STATUS(ndk_close_any(&c.pd->Header, create_from_close_completion, &c), STATUS_PENDING);
    fixture_close_wait(&mr->Header); /* the PD's close completes now */
    CHECK(harness_event_wait(&c.closed, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(c.status, STATUS_INVALID_DEVICE_STATE);
    expect_only(a, SoftNdkVerifyUseAfterClose, 1);
    ndk_close_adapter(a);
    harness_event_destroy(&c.closed);
    char *log = fx_capture_end(&cap);
    char obj[48];
    snprintf(obj, sizeof obj, "PD %p:", (void *)c.pd);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [use_after_close]", obj, "CLOSE-2", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* Failure 4: the remote token of a fast-register MR read before NdkFastRegister and used after:
 * named on the side that owns the token, with the current one. */
static uint8_t frbuf[16384] __attribute__((aligned(4096)));

TEST(issue4_stale_fast_register_token)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = pair(SoftNdkVerifyWarn);
    NDK_MR *m = NULL;
    CHECK_STATUS(p->sv.pd->Dispatch->NdkCreateMr(p->sv.pd, TRUE, ndk_create_never, NULL, &m),
                 STATUS_SUCCESS);
    CHECK_STATUS(m->Dispatch->NdkInitializeFastRegisterMr(m, 4, TRUE, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    UINT32 before = m->Dispatch->NdkGetRemoteTokenFromMr(m); /* the mistake: too early */
    NDK_LOGICAL_ADDRESS pages[4];
    for (int i = 0; i < 4; i++)
        pages[i].QuadPart = (int64_t)(uintptr_t)(frbuf + 4096 * i);
    CHECK_STATUS(p->sv.qp->Dispatch->NdkFastRegister(p->sv.qp, (void *)0x4444, m, 4, pages, 0,
                                                     sizeof frbuf, frbuf,
                                                     NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_SUCCESS);
    UINT32 after = m->Dispatch->NdkGetRemoteTokenFromMr(m);
    CHECK(before != after);
    fx_expect(&p->sv, 1);
    NDK_SGE sge = fx_sge(&p->cl, 0, 64);
    CHECK_STATUS(p->cl.qp->Dispatch->NdkWrite(p->cl.qp, (void *)0x4445, &sge, 1,
                                              (UINT64)(uintptr_t)frbuf, before, 0),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(wait_rule(p->as, SoftNdkVerifyStaleToken), 1);
    CHECK(harness_event_wait(&p->cl.disc_ev, 1, FIXTURE_WAIT_MS));
    expect_only(p->as, SoftNdkVerifyStaleToken, 1);
    expect_only(p->ac, SoftNdkVerifyRuleCount, 0);
    fixture_close_wait(&m->Header);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    char want[96], obj[48];
    snprintf(want, sizeof want, "token 0x%08x is from the previous registration; current 0x%08x",
             (unsigned)before, (unsigned)after);
    snprintf(obj, sizeof obj, "MR %p:", (void *)m);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [stale_token]", obj, want, "MEM-3", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* Failure 6, as far as a provider sees it: the completion path tears down what its work request
 * lived in (here: it closes the CQ, as a driver freeing its request pool would) and then goes on
 * using it. The memory of the consumer's own request is invisible to softndk; the call on the
 * object it closed is named. */
static void close_then_poll(struct cb_rig *r)
{
    CHECK_STATUS(ndk_close_any(&r->cq->Header, signal_closed, &r->cq_closed),
                 STATUS_PENDING); /* pends: its own callback runs */
    r->cq_close_started = true;
    NDK_RESULT res;
    (void)r->cq->Dispatch->NdkGetCqResults(r->cq, &res, 1); /* the mistake */
}

TEST(issue6_completion_path_uses_what_it_closed)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyWarn, close_then_poll);
    rig_fire(r);
    expect_only(r->a, SoftNdkVerifyUseAfterClose, 1);
    void *cq = r->cq;
    rig_close(r);
    free(r);
    char *log = fx_capture_end(&cap);
    char obj[48];
    snprintf(obj, sizeof obj, "CQ %p:", cq);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [use_after_close]", obj, "CLOSE-2", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* ------------------------------------------------------------------------------------------ */
/* Callbacks */

static void sleep_20ms(struct cb_rig *r)
{
    drain(r);
    sleep_ms(20);
}

TEST(callback_that_sleeps_is_named)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyWarn, sleep_20ms);
    rig_fire(r);
    CHECK_EQ_U64(wait_rule(r->a, SoftNdkVerifyCallbackSlow), 1);
    expect_only(r->a, SoftNdkVerifyCallbackSlow, 1);
    void *cq = r->cq;
    rig_close(r);
    char *log = fx_capture_end(&cap);
    char obj[80];
    snprintf(obj, sizeof obj, "CQ %p RequestContext %p:", cq, (void *)r);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [callback_slow]", obj,
                                "the CQ notification (NDK_FN_CQ_NOTIFICATION_CALLBACK) took",
                                "(threshold 5 ms, SOFTNDK_VERIFY_CALLBACK_MS) and it waited",
                                "must not block", "ASYNC-3", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(r);
    free(log);
}

static void spin_20ms(struct cb_rig *r)
{
    drain(r);
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
}

TEST(callback_that_computes_too_long_is_named)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyWarn, spin_20ms);
    rig_fire(r);
    CHECK_EQ_U64(wait_rule(r->a, SoftNdkVerifyCallbackSlow), 1);
    expect_only(r->a, SoftNdkVerifyCallbackSlow, 1);
    rig_close(r);
    free(r);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [callback_slow]", "ms on the CPU", NULL), 1);
    free(log);
}

TEST(callback_threshold_is_configurable)
{
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "200", 1) == 0); /* this process only */
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyStrict, sleep_20ms);
    rig_fire(r);
    expect_only(r->a, SoftNdkVerifyRuleCount, 0);
    rig_close(r);
    free(r);
    /* and a malformed value is refused at open */
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "0", 1) == 0);
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(fx_try_open(&o, &a), STATUS_INVALID_PARAMETER);
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "5ms", 1) == 0);
    CHECK_STATUS(fx_try_open(&o, &a), STATUS_INVALID_PARAMETER);
    unsetenv("SOFTNDK_VERIFY_CALLBACK_MS");
}

static void query_inside(struct cb_rig *r)
{
    drain(r);
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    r->status = r->a->Dispatch->NdkQueryAdapterInfo(r->a, &info, &size);
}

TEST(query_adapter_info_from_a_callback_is_named)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyWarn, query_inside);
    rig_fire(r);
    CHECK_STATUS(r->status, STATUS_SUCCESS); /* still answered */
    expect_only(r->a, SoftNdkVerifyCallbackCall, 1);
    void *cq = r->cq;
    rig_close(r);
    char *log = fx_capture_end(&cap);
    char obj[80];
    snprintf(obj, sizeof obj, "CQ %p RequestContext %p:", cq, (void *)r);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [callback_call]", obj,
                                "NdkQueryAdapterInfo called from the CQ notification "
                                "(NDK_FN_CQ_NOTIFICATION_CALLBACK) of this CQ",
                                "PASSIVE_LEVEL", "\"NDK_FN_QUERY_ADAPTER_INFO\"", "CLOSE-9", NULL),
                 1);
    free(r);
    free(log);
}

/* Calls NDKPI does allow in a callback are not reported: polling, re-arming, posting,
 * closing the object whose callback it is. The same query outside a callback is fine. */
static void allowed_inside(struct cb_rig *r)
{
    drain(r);
    if (r->calls > 1)
        return; /* the receive posted below is flushed at once: one more notification */
    r->cq->Dispatch->NdkArmCq(r->cq, NDK_CQ_NOTIFY_ANY);
    NDK_SGE sge = rig_sge(r->buf, r->mr);
    r->status = r->qp->Dispatch->NdkReceive(r->qp, (void *)0x4343, &sge, 1);
}

TEST(calls_allowed_in_a_callback_are_not_named)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyStrict, allowed_inside);
    rig_fire(r);
    CHECK_STATUS(r->status, STATUS_SUCCESS);
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    CHECK_STATUS(r->a->Dispatch->NdkQueryAdapterInfo(r->a, &info, &size), STATUS_SUCCESS);
    expect_only(r->a, SoftNdkVerifyRuleCount, 0);
    rig_close(r);
    free(r);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 0);
    free(log);
}

/* The callback is running when another thread starts its CQ's close: the close waits for it
 * (CLOSE-5), so polling and re-arming the CQ from it is the consumer's right, not a use after
 * close (the race that once aborted the test above under load, made certain here). */
static void poll_across_a_close(struct cb_rig *r)
{
    drain(r);
    harness_event_signal(&r->entered);
    CHECK(harness_event_wait(&r->go_on, 1, FIXTURE_WAIT_MS));
    NDK_RESULT res;
    r->status = (NTSTATUS)r->cq->Dispatch->NdkGetCqResults(r->cq, &res, 1);
    r->cq->Dispatch->NdkArmCq(r->cq, NDK_CQ_NOTIFY_ANY);
}

TEST(own_callback_may_use_its_object_while_another_thread_closes_it)
{
    /* this process only: the body waits for the test thread on purpose */
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "60000", 1) == 0);
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyStrict, poll_across_a_close);
    r->status = (NTSTATUS)-1;
    r->cq->Dispatch->NdkArmCq(r->cq, NDK_CQ_NOTIFY_ANY);
    NDK_SGE sge = rig_sge(r->buf, r->mr);
    CHECK_STATUS(r->qp->Dispatch->NdkReceive(r->qp, (void *)0x4242, &sge, 1), STATUS_SUCCESS);
    r->qp->Dispatch->NdkFlush(r->qp);
    CHECK(harness_event_wait(&r->entered, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(ndk_close_any(&r->cq->Header, signal_closed, &r->cq_closed), STATUS_PENDING);
    r->cq_close_started = true;
    harness_event_signal(&r->go_on);
    CHECK(harness_event_wait(&r->done, 1, FIXTURE_WAIT_MS));
    CHECK_EQ_U64(r->status, 0); /* drained before the close: nothing left */
    expect_only(r->a, SoftNdkVerifyRuleCount, 0);
    rig_close(r);
    free(r);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 0);
    free(log);
}

/* ------------------------------------------------------------------------------------------ */
/* A clean consumer under strict: receives first, Sends, a Write, notifications with a short
 * callback, a graceful disconnect: no report, and the summary says so. */

TEST(clean_consumer_gets_no_report)
{
    /* This process only: a loaded machine can stall a lock-free callback past 5 ms inside the
     * kernel (docs/verifier.md, "The suites under strict"); a clean consumer must not abort. */
    CHECK(setenv("SOFTNDK_VERIFY_CALLBACK_MS", "1000", 1) == 0);
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, NULL);
    fx_options(&os, NULL);
    oc.Verify = os.Verify = SoftNdkVerifyStrict;
    oc.LogLevel = os.LogLevel = SoftNdkLogInfo;
    struct fx_pair *p = fx_pair_open_with(&oc, &os, 1u << 16, 16, 16);
    for (unsigned i = 0; i < 4; i++)
        fx_post_recv(&p->sv, 100 + i, 4096u * i, 4096);
    p->sv.cq->Dispatch->NdkArmCq(p->sv.cq, NDK_CQ_NOTIFY_ANY);
    for (unsigned i = 0; i < 4; i++)
        fx_post_send(&p->cl, 200 + i, 4096u * i, 512, 0);
    fx_post_write(&p->cl, 300, 0, 1024, &p->sv, 32768, 0);
    fx_expect(&p->cl, 5);
    fx_expect(&p->sv, 4);
    CHECK(harness_event_wait(&p->sv.cq_ev, 1, FIXTURE_WAIT_MS));
    fx_disconnect(&p->cl, &p->sv);
    expect_only(p->ac, SoftNdkVerifyRuleCount, 0);
    expect_only(p->as, SoftNdkVerifyRuleCount, 0);
    fx_pair_close(p);
    struct cb_rig *r = calloc(1, sizeof *r);
    rig_open(r, SoftNdkVerifyStrict, drain);
    rig_fire(r);
    expect_only(r->a, SoftNdkVerifyRuleCount, 0);
    rig_close(r);
    free(r);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 0);
    CHECK_EQ_U64(fx_count_lines(log, "violation(s)", NULL), 0);
    /* the log level is the process's: the third adapter's summary shows too */
    CHECK_EQ_U64(fx_count_lines(log, "verify: adapter", "closes with no violation", NULL), 3);
    free(log);
}

/* ------------------------------------------------------------------------------------------ */
/* Every report reaches the trace as verify.<rule> with its RequestContext, and the summary at
 * close names the rule (here one of the callback rules; every rule goes through the same
 * sndk_verify_report, the ndkstat lines are the counters' by the same table). */

TEST(report_reaches_trace_counter_and_summary)
{
    char path[] = "/tmp/softndk-verify-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct cb_rig *r = calloc(1, sizeof *r);
    memset(r, 0, sizeof *r);
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    o.Verify = SoftNdkVerifyWarn;
    o.TraceFile = path;
    /* rig_open with these options: the adapter first, the rest as rig_open does */
    harness_event_init(&r->done);
    harness_event_init(&r->cq_closed);
    r->body = query_inside;
    r->a = fx_open_with(&o);
    rig_objects_open(r->a, rig_notify, r, r->buf, sizeof r->buf, &r->pd, &r->cq, &r->qp, &r->mr);
    rig_fire(r);
    SOFTNDK_COUNTERS c;
    fx_counters(r->a, &c);
    CHECK_EQ_U64(c.VerifyViolations[SoftNdkVerifyCallbackCall], 1);
    char ctx[32];
    snprintf(ctx, sizeof ctx, "\"request_context\":\"%p\"", (void *)r);
    rig_close(r);
    free(r);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "closes with 1 violation(s): callback_call=1", NULL), 1);
    free(log);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[2048];
    unsigned events = 0, summaries = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"ev\":\"verify.callback_call\"") && strstr(line, ctx) &&
            strstr(line, "\"ids\":\"CLOSE-9, ASYNC-1\""))
            events++;
        if (strstr(line, "\"ev\":\"verify.summary\"") && strstr(line, "\"violations\":1"))
            summaries++;
    }
    fclose(f);
    unlink(path);
    CHECK_EQ_U64(events, 1);
    CHECK_EQ_U64(summaries, 1);
}
