/* Completion queues: creation limits, polling, arming and notification (docs/ndk-rules.md [CQ-4]-
 * [CQ-9]), overrun (decision 9g), resize and interrupt moderation (decision 20), Ex and
 * non-Ex results. Completions come from flushing receives: each is STATUS_CANCELLED, an error
 * completion, so it satisfies ANY and SOLICITED arms but never an ERRORS arm. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objects.h"

struct cq_env {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    struct conf_cq icq; /* initiator CQ of the QPs: must stay empty */
};

static void env_open(struct cq_env *e, const SOFTNDK_OPTIONS *o)
{
    e->a = o ? conf_open_with(o) : conf_open();
    e->pd = conf_pd(e->a);
    conf_cq_create(e->a, &e->icq, 64);
}

static void env_close(struct cq_env *e)
{
    NDK_RESULT r[1];
    CHECK_EQ_U64(e->icq.cq->Dispatch->NdkGetCqResults(e->icq.cq, r, 1), 0);
    CHECK_EQ_U64(atomic_load(&e->icq.n), 0);
    conf_cq_destroy(&e->icq);
    conf_close(&e->pd->Header);
    ndk_close_adapter(e->a);
}

/* n completions, contexts first..first+n-1, into c. */
static void flush_n(struct cq_env *e, struct conf_cq *c, unsigned n, uintptr_t first)
{
    conf_flush_into(e->pd, c, &e->icq, n, first);
}

/* Drain up to max results with the Ex call; check they carry contexts first, first+1, ... */
static unsigned drain_in_order(struct conf_cq *c, unsigned max, uintptr_t first)
{
    NDK_RESULT_EX r[64];
    CHECK(max <= 64);
    ULONG n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, r, max);
    for (ULONG i = 0; i < n; i++) {
        CHECK_STATUS(r[i].Status, STATUS_CANCELLED);
        CHECK_EQ_U64((uintptr_t)r[i].RequestContext, first + i);
    }
    return n;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- creation and polling -------------------------------------------------------------- */

TEST(cq_create_invalid_parameters)
{
    NDK_ADAPTER *a = conf_open();
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    NDK_FN_CREATE_CQ create = a->Dispatch->NdkCreateCq;
    NDK_CQ *cq = NULL;
    CHECK_STATUS(create(a, 0, conf_cq_notify, NULL, NULL, ndk_create_never, NULL, &cq),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(
        create(a, info.MaxCqDepth + 1, conf_cq_notify, NULL, NULL, ndk_create_never, NULL, &cq),
        STATUS_INVALID_PARAMETER);
    CHECK_STATUS(create(a, 0xFFFFFFFFu, conf_cq_notify, NULL, NULL, ndk_create_never, NULL, &cq),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(create(a, 4, NULL, NULL, NULL, ndk_create_never, NULL, &cq),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(create(a, 4, conf_cq_notify, NULL, NULL, ndk_create_never, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK(cq == NULL);
    /* Depth 1 and MaxCqDepth are in range; an affinity is a hint and accepted. */
    GROUP_AFFINITY aff = {.Mask = 1, .Group = 0};
    CHECK_STATUS(create(a, 1, conf_cq_notify, NULL, &aff, ndk_create_never, NULL, &cq),
                 STATUS_SUCCESS);
    conf_close(&cq->Header);
    CHECK_STATUS(
        create(a, info.MaxCqDepth, conf_cq_notify, NULL, NULL, ndk_create_never, NULL, &cq),
        STATUS_SUCCESS);
    conf_close(&cq->Header);
    ndk_close_adapter(a);
}

TEST(cq_empty_results_zero)
{
    NDK_ADAPTER *a = conf_open();
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    NDK_RESULT r[4];
    NDK_RESULT_EX rx[4];
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 4), 0);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, rx, 4), 0);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 0), 0);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, rx, 0), 0);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(cq_results_ex_and_non_ex_fields)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 8);
    NDK_QP *qp = conf_qp(e.pd, c.cq, e.icq.cq, (void *)0xABC0, 4);
    conf_post_recvs(qp, 4, 0x100);
    conf_flush(qp);
    NDK_RESULT_EX rx[8];
    memset(rx, 0x77, sizeof rx);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, rx, 2), 2);
    for (unsigned i = 0; i < 2; i++) {
        CHECK_STATUS(rx[i].Status, STATUS_CANCELLED);
        CHECK_EQ_U64(rx[i].Type, NdkOperationTypeReceive);
        CHECK(rx[i].QPContext == (void *)0xABC0);
        CHECK_EQ_U64((uintptr_t)rx[i].RequestContext, 0x100 + i);
        CHECK_EQ_U64(rx[i].BytesTransferred, 0);
    }
    NDK_RESULT r[8];
    memset(r, 0x77, sizeof r);
    /* A short return means drained: 2 left of the 4. */
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 8), 2);
    for (unsigned i = 0; i < 2; i++) {
        CHECK_STATUS(r[i].Status, STATUS_CANCELLED);
        CHECK(r[i].QPContext == (void *)0xABC0);
        CHECK_EQ_U64((uintptr_t)r[i].RequestContext, 0x102 + i);
        CHECK_EQ_U64(r[i].BytesTransferred, 0);
    }
    /* Results beyond the returned count are not written. */
    CHECK_EQ_U64(*(uint32_t *)&r[2].Status, 0x77777777u);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 8), 0);
    conf_close(&qp->Header);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_fill_to_exact_depth_no_overrun)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 4);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    flush_n(&e, &c, 4, 1);
    CHECK(conf_cq_quiet(&c, 0));
    CHECK_EQ_U64(drain_in_order(&c, 8, 1), 4);
    /* The ERRORS arm is still pending, and the CQ is still usable. */
    flush_n(&e, &c, 4, 5);
    CHECK(conf_cq_quiet(&c, 0));
    CHECK_EQ_U64(drain_in_order(&c, 8, 5), 4);
    conf_cq_destroy(&c);
    env_close(&e);
}

/* ---- arming -------------------------------------------------------------------------------- */

TEST(cq_arm_empty_does_not_fire)
{
    NDK_ADAPTER *a = conf_open();
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_SOLICITED);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    CHECK(conf_cq_quiet(&c, 0));
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(cq_arm_any_fires_once_per_arm)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 3, 1);
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
    CHECK(conf_cq_quiet(&c, 1)); /* at most once per arm */
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 3);
    /* Drained, re-armed: the next completion fires again. */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    CHECK(conf_cq_quiet(&c, 1));
    flush_n(&e, &c, 2, 10);
    CHECK(conf_cq_wait(&c, 2));
    CHECK_STATUS(conf_cq_status(&c, 1), STATUS_SUCCESS);
    CHECK(conf_cq_quiet(&c, 2));
    CHECK_EQ_U64(drain_in_order(&c, 16, 10), 2);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_arm_fires_at_once_for_entries_since_last_callback)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    /* Entries queued before any arm (no callback yet): the arm is satisfied at once. */
    flush_n(&e, &c, 2, 1);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
    /* New entries after that callback, not drained: the next arm must fire at once. */
    flush_n(&e, &c, 2, 3);
    CHECK(conf_cq_quiet(&c, 1)); /* not armed: no callback */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    CHECK(conf_cq_wait(&c, 2));
    CHECK_STATUS(conf_cq_status(&c, 1), STATUS_SUCCESS);
    /* Same for SOLICITED: the new entries are error completions. */
    flush_n(&e, &c, 1, 5);
    CHECK(conf_cq_quiet(&c, 2));
    conf_cq_arm(&c, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(conf_cq_wait(&c, 3));
    CHECK_STATUS(conf_cq_status(&c, 2), STATUS_SUCCESS);
    /* Re-arming with nothing new may or may not fire (rule 6): not asserted. Drain, re-arm
     * ERRORS: nothing queued, nothing fires. */
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 5);
    unsigned seen = atomic_load(&c.n);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    CHECK(conf_cq_quiet(&c, seen));
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_arm_solicited_fires_on_error_completion)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_SOLICITED);
    flush_n(&e, &c, 1, 1); /* STATUS_CANCELLED is an error completion */
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
    CHECK(conf_cq_quiet(&c, 1));
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 1);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_arm_errors_ignores_completions_fires_on_overrun)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 4);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    flush_n(&e, &c, 3, 1);
    CHECK(conf_cq_quiet(&c, 0)); /* error completions are not CQ errors */
    flush_n(&e, &c, 3, 4);       /* the 5th entry overruns depth 4 */
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_BUFFER_OVERFLOW);
    CHECK(conf_cq_quiet(&c, 1));
    NDK_RESULT r[8];
    NDK_RESULT_EX rx[8];
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 8), 0);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, rx, 8), 0);
    conf_cq_destroy(&c);
    env_close(&e);
}

/* [CQ-9]: arming twice before the first is satisfied merges. With flush completions
 * (errors), ANY and SOLICITED both fire; only ERRORS+ERRORS stays an ERRORS arm. */
TEST(cq_arm_merge_table)
{
    struct cq_env e;
    env_open(&e, NULL);
    static const ULONG types[3] = {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ANY,
                                   NDK_CQ_NOTIFY_SOLICITED};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            struct conf_cq c;
            conf_cq_create(e.a, &c, 4);
            conf_cq_arm(&c, types[i]);
            conf_cq_arm(&c, types[j]);
            flush_n(&e, &c, 2, 1);
            bool errors_only = types[i] == NDK_CQ_NOTIFY_ERRORS && types[j] == NDK_CQ_NOTIFY_ERRORS;
            if (errors_only) {
                CHECK_MSG(conf_cq_quiet(&c, 0), "ERRORS+ERRORS fired on a completion");
                /* still armed for CQ errors */
                flush_n(&e, &c, 3, 3);
                CHECK_MSG(conf_cq_wait(&c, 1), "ERRORS+ERRORS did not fire on overrun");
                CHECK_STATUS(conf_cq_status(&c, 0), STATUS_BUFFER_OVERFLOW);
            } else {
                CHECK_MSG(conf_cq_wait(&c, 1), "arm %u then %u did not fire", types[i], types[j]);
                CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
                CHECK_MSG(conf_cq_quiet(&c, 1), "arm %u then %u fired twice", types[i], types[j]);
                CHECK_EQ_U64(drain_in_order(&c, 8, 1), 2);
            }
            conf_cq_destroy(&c);
        }
    env_close(&e);
}

static bool callback_running(void *p)
{
    return atomic_load(&((struct conf_cq *)p)->inside) > 0;
}

TEST(cq_callbacks_never_overlap)
{
    conf_breaks_rules("callback_slow: its notification waits, on purpose");
    /* Two progress threads, so that overlapping callbacks would be possible at all. */
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.ProgressThreads = 2;
    struct cq_env e;
    env_open(&e, &o);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 64);
    c.delay_ms = 30;
    uintptr_t ctx = 1;
    for (int i = 0; i < 6; i++) {
        conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
        flush_n(&e, &c, 1, ctx++);
        /* Next arm + completion while this callback is still running. */
        CHECK(harness_wait_until(callback_running, &c, FIXTURE_WAIT_MS) || atomic_load(&c.n) > 0);
    }
    CHECK(conf_cq_wait(&c, 2)); /* the notification that became due meanwhile is not lost */
    /* Let the last one finish. */
    unsigned n;
    do {
        n = atomic_load(&c.n);
    } while (!conf_cq_quiet(&c, n));
    CHECK_MSG(!atomic_load(&c.overlap), "two notifications of one CQ ran at once");
    for (unsigned i = 0; i < n; i++)
        CHECK_STATUS(conf_cq_status(&c, i), STATUS_SUCCESS);
    CHECK_EQ_U64(drain_in_order(&c, 64, 1), 6);
    conf_cq_destroy(&c);
    env_close(&e);
}

/* ---- overrun (decision 9g) --------------------------------------------------------------- */

TEST(cq_overrun_kills_cq)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 4);
    /* A QP whose receive queue is deeper than the CQ. */
    NDK_QP *qp = conf_qp(e.pd, c.cq, e.icq.cq, NULL, 8);
    conf_post_recvs(qp, 8, 1);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    conf_flush(qp);
    /* The ANY arm was satisfied by the first completion, before the overrun. */
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
    CHECK(conf_cq_quiet(&c, 1));
    /* Dead: nothing to poll, now or later. */
    NDK_RESULT r[8];
    NDK_RESULT_EX rx[8];
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 8), 0);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, rx, 8), 0);
    conf_post_recvs(qp, 2, 20);
    conf_flush(qp);
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, rx, 8), 0);
    /* Arming a dead CQ fires at once with STATUS_BUFFER_OVERFLOW, whatever the type. */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    CHECK(conf_cq_wait(&c, 2));
    CHECK_STATUS(conf_cq_status(&c, 1), STATUS_BUFFER_OVERFLOW);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    CHECK(conf_cq_wait(&c, 3));
    CHECK_STATUS(conf_cq_status(&c, 2), STATUS_BUFFER_OVERFLOW);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(conf_cq_wait(&c, 4));
    CHECK_STATUS(conf_cq_status(&c, 3), STATUS_BUFFER_OVERFLOW);
    CHECK(conf_cq_quiet(&c, 4));
    conf_close(&qp->Header);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_overrun_with_pending_solicited_arm_reports_overflow)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 2);
    flush_n(&e, &c, 2, 1); /* full, unarmed */
    /* The arm fires for the fresh entries ... */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
    /* ... and an ERRORS arm pending at the overrun fires with STATUS_BUFFER_OVERFLOW. */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    flush_n(&e, &c, 1, 3);
    CHECK(conf_cq_wait(&c, 2));
    CHECK_STATUS(conf_cq_status(&c, 1), STATUS_BUFFER_OVERFLOW);
    conf_cq_destroy(&c);
    env_close(&e);
}

/* ---- resize (decision 20) --------------------------------------------------------------- */

TEST(cq_resize_grow_keeps_entries_in_order)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 4);
    flush_n(&e, &c, 3, 1);
    CHECK_EQ_U64(drain_in_order(&c, 1, 1), 1); /* the ring's head moves: entries wrap */
    flush_n(&e, &c, 2, 4);                     /* 2,3,4,5 queued, full */
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 8, ndk_request_never, NULL), STATUS_SUCCESS);
    flush_n(&e, &c, 4, 6); /* fits only in the grown CQ */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    CHECK(conf_cq_quiet(&c, 0)); /* no overrun */
    CHECK_EQ_U64(drain_in_order(&c, 16, 2), 8);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_resize_shrink)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 8);
    flush_n(&e, &c, 5, 1);
    /* Below the queued count: STATUS_BUFFER_OVERFLOW, CQ unchanged (still depth 8). */
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 4, ndk_request_never, NULL),
                 STATUS_BUFFER_OVERFLOW);
    flush_n(&e, &c, 3, 6);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    CHECK(conf_cq_quiet(&c, 0));
    CHECK_EQ_U64(drain_in_order(&c, 2, 1), 2);
    /* Down to exactly the queued count is fine, entries kept. */
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 6, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK_EQ_U64(drain_in_order(&c, 16, 3), 6);
    /* Empty: any depth >= 1. */
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 1, ndk_request_never, NULL), STATUS_SUCCESS);
    flush_n(&e, &c, 1, 20);
    CHECK_EQ_U64(drain_in_order(&c, 16, 20), 1);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_resize_invalid_depth)
{
    NDK_ADAPTER *a = conf_open();
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 0, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, info.MaxCqDepth + 1, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

/* ---- interrupt moderation ([CQ-14]-[CQ-19], decision 20) ------------------------------ */

TEST(cq_moderation_parameter_mix)
{
    NDK_ADAPTER *a = conf_open();
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION mod = c.cq->Dispatch->NdkControlCqInterruptModeration;
    CHECK_STATUS(mod(c.cq, MAXULONG, MAXULONG), STATUS_INVALID_PARAMETER_MIX);
    CHECK_STATUS(mod(c.cq, MAXULONG, 9), STATUS_INVALID_PARAMETER_MIX); /* > depth */
    CHECK_STATUS(mod(c.cq, MAXULONG, 8), STATUS_SUCCESS);
    CHECK_STATUS(mod(c.cq, 100, MAXULONG), STATUS_SUCCESS);
    CHECK_STATUS(mod(c.cq, 100, 9), STATUS_SUCCESS);
    CHECK_STATUS(mod(c.cq, 0, 0), STATUS_SUCCESS);
    CHECK_STATUS(mod(c.cq, 0, MAXULONG), STATUS_SUCCESS);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(cq_moderation_count_governed)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, MAXULONG, 3),
                 STATUS_SUCCESS);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 1, 1);
    CHECK_MSG(conf_cq_quiet(&c, 0), "fired after 1 of 3 completions");
    flush_n(&e, &c, 1, 2);
    CHECK_MSG(conf_cq_quiet(&c, 0), "fired after 2 of 3 completions");
    flush_n(&e, &c, 1, 3);
    CHECK(conf_cq_wait(&c, 1));
    CHECK_STATUS(conf_cq_status(&c, 0), STATUS_SUCCESS);
    CHECK(conf_cq_quiet(&c, 1));
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 3);
    /* Several at once count as several. */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 3, 10);
    CHECK(conf_cq_wait(&c, 2));
    CHECK_EQ_U64(drain_in_order(&c, 16, 10), 3);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_moderation_interval_governed)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    const ULONG interval_us = 60000;
    /* Count MAXULONG, then count above the depth: the interval alone governs. */
    const ULONG counts[2] = {MAXULONG, 17};
    for (int k = 0; k < 2; k++) {
        CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, interval_us, counts[k]),
                     STATUS_SUCCESS);
        conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
        uint64_t t0 = now_us();
        flush_n(&e, &c, 1, 1);
        CHECK(conf_cq_wait(&c, (unsigned)k + 1));
        uint64_t elapsed = now_us() - t0;
        CHECK_MSG(elapsed + 2000 >= interval_us, "callback after %llu us, interval %u us",
                  (unsigned long long)elapsed, interval_us);
        CHECK_STATUS(conf_cq_status(&c, (unsigned)k), STATUS_SUCCESS);
        CHECK_EQ_U64(drain_in_order(&c, 16, 1), 1);
    }
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_moderation_off_values_fire_immediately)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    /* Interval 0: no moderation whatever the count (a count of 5 is never reached here). */
    /* Count 0 or 1: no moderation whatever the interval (10 s exceeds the wait bound). */
    static const ULONG settings[][2] = {{0, 5}, {0, MAXULONG}, {10000000, 0}, {10000000, 1}};
    for (unsigned k = 0; k < 4; k++) {
        CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, settings[k][0],
                                                                     settings[k][1]),
                     STATUS_SUCCESS);
        conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
        flush_n(&e, &c, 1, 1);
        CHECK_MSG(conf_cq_wait(&c, k + 1), "no callback with interval %u count %u",
                  settings[k][0], settings[k][1]);
        CHECK_EQ_U64(drain_in_order(&c, 16, 1), 1);
    }
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_moderation_new_settings_apply_to_held_back_notification)
{
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 16);
    NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION mod = c.cq->Dispatch->NdkControlCqInterruptModeration;
    /* Held back by count 5; switching moderation off releases it. */
    CHECK_STATUS(mod(c.cq, MAXULONG, 5), STATUS_SUCCESS);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 1, 1);
    CHECK(conf_cq_quiet(&c, 0));
    CHECK_STATUS(mod(c.cq, 0, 0), STATUS_SUCCESS);
    CHECK(conf_cq_wait(&c, 1));
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 1);
    /* Held back by count 5 with 2 accumulated; lowering the count to 2 releases it. */
    CHECK_STATUS(mod(c.cq, MAXULONG, 5), STATUS_SUCCESS);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 1, 1);
    flush_n(&e, &c, 1, 2);
    CHECK(conf_cq_quiet(&c, 1));
    CHECK_STATUS(mod(c.cq, MAXULONG, 2), STATUS_SUCCESS);
    CHECK(conf_cq_wait(&c, 2));
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 2);
    /* Held back by count; a short interval now releases it by time. */
    CHECK_STATUS(mod(c.cq, MAXULONG, 5), STATUS_SUCCESS);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 1, 1);
    CHECK(conf_cq_quiet(&c, 2));
    CHECK_STATUS(mod(c.cq, 20000, 5), STATUS_SUCCESS);
    CHECK(conf_cq_wait(&c, 3));
    CHECK_EQ_U64(drain_in_order(&c, 16, 1), 1);
    conf_cq_destroy(&c);
    env_close(&e);
}

TEST(cq_moderation_overrun_reported)
{
    /* A held-back notification that meets an overrun reports STATUS_BUFFER_OVERFLOW. */
    struct cq_env e;
    env_open(&e, NULL);
    struct conf_cq c;
    conf_cq_create(e.a, &c, 4);
    CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, MAXULONG, 4),
                 STATUS_SUCCESS);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    flush_n(&e, &c, 1, 1);
    CHECK(conf_cq_quiet(&c, 0));
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
    flush_n(&e, &c, 5, 2); /* count 4 reached by the 3rd of these, overrun at the 4th */
    CHECK(conf_cq_wait(&c, 1));
    /* The first callback may report the count (SUCCESS) with the overrun folded in; the CQ
     * must in any case end up reporting STATUS_BUFFER_OVERFLOW. */
    if (conf_cq_status(&c, 0) == STATUS_SUCCESS) {
        conf_cq_arm(&c, NDK_CQ_NOTIFY_ERRORS);
        CHECK(conf_cq_wait(&c, 2));
        CHECK_STATUS(conf_cq_status(&c, 1), STATUS_BUFFER_OVERFLOW);
    } else {
        CHECK_STATUS(conf_cq_status(&c, 0), STATUS_BUFFER_OVERFLOW);
    }
    conf_cq_destroy(&c);
    env_close(&e);
}

/* ---- where notifications run (docs/engine.md, "Following the waiter"; decisions.md #16) ---- */

#define PLACE_NOTES 24 /* more than the engine's window of 16 notes, then some */

struct placed_cq {
    struct conf_cq c;      /* first: the fixture's helpers take it */
    int cpu[PLACE_NOTES];  /* sched_getcpu() in each callback */
    int mask[PLACE_NOTES]; /* CPUs in the callback thread's affinity mask */
};

static void placed_notify(void *ctx, NTSTATUS status)
{
    struct placed_cq *p = ctx;
    unsigned i = atomic_load(&p->c.n);
    if (i < PLACE_NOTES) {
        p->cpu[i] = sched_getcpu();
        cpu_set_t set;
        p->mask[i] =
            pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
    }
    conf_cq_notify(&p->c, status);
}

/* The test thread, pinned to `waiter`, arms and waits PLACE_NOTES times; each notification's
 * CPU and affinity are recorded. */
static void notify_from(struct cq_env *e, struct placed_cq *p, GROUP_AFFINITY *aff, int waiter)
{
    memset(p, 0, sizeof *p);
    harness_event_init(&p->c.ev);
    CHECK_STATUS(e->a->Dispatch->NdkCreateCq(e->a, 16, placed_notify, p, aff, ndk_create_never,
                                             NULL, &p->c.cq),
                 STATUS_SUCCESS);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(waiter, &one);
    CHECK(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
    for (unsigned i = 0; i < PLACE_NOTES; i++) {
        conf_cq_arm(&p->c, NDK_CQ_NOTIFY_ANY);
        flush_n(e, &p->c, 1, 100 + i);
        CHECK(conf_cq_wait(&p->c, i + 1));
        CHECK_EQ_U64(drain_in_order(&p->c, 16, 100 + i), 1);
    }
    conf_cq_destroy(&p->c);
}

TEST(cq_notifications_come_to_run_where_the_consumer_waits)
{
    if (harness_cpus() < 2)
        return; /* one CPU: every callback runs on it */
    struct cq_env e;
    env_open(&e, NULL);
    static struct placed_cq p;
    int waiter = harness_cpu_last();
    notify_from(&e, &p, NULL, waiter);
    /* The engine judges 16 notifications at a time: from the 17th on, the thread that calls
     * back runs on the waiter's CPU, and only there. */
    for (unsigned i = 16; i < PLACE_NOTES; i++) {
        CHECK_EQ_I64(p.cpu[i], waiter);
        CHECK_EQ_I64(p.mask[i], 1);
    }
    env_close(&e);
}

TEST(cq_group_affinity_names_where_notifications_run)
{
    if (harness_cpus() < 2)
        return;
    struct cq_env e;
    env_open(&e, NULL);
    static struct placed_cq p;
    int named = harness_cpu_first(), waiter = harness_cpu_last();
    GROUP_AFFINITY aff = {.Mask = (KAFFINITY)1 << named, .Group = 0};
    notify_from(&e, &p, &aff, waiter); /* the consumer waits elsewhere: the CQ's affinity wins */
    for (unsigned i = 16; i < PLACE_NOTES; i++) {
        CHECK_EQ_I64(p.cpu[i], named);
        CHECK_EQ_I64(p.mask[i], 1);
    }
    env_close(&e);
}

TEST(cq_notifications_run_on_any_cpu_with_progress_cpu_any)
{
    setenv("SOFTNDK_PROGRESS_CPU", "any", 1);
    struct cq_env e;
    env_open(&e, NULL);
    static struct placed_cq p;
    unsigned cpus = harness_cpus(); /* before notify_from pins this thread */
    notify_from(&e, &p, NULL, harness_cpu_last());
    for (unsigned i = 0; i < PLACE_NOTES; i++)
        CHECK_EQ_I64(p.mask[i], (int64_t)cpus);
    env_close(&e);
    unsetenv("SOFTNDK_PROGRESS_CPU");
}
