#include "common.h"

#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void conf_status_name(NTSTATUS s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", SoftNdkStatusName(s));
}

static const char *rules_broken; /* conf_breaks_rules: why, NULL for a clean consumer */

void conf_breaks_rules(const char *what)
{
    rules_broken = what;
}

bool conf_breaking_rules(void)
{
    return rules_broken != NULL;
}

void conf_options(SOFTNDK_OPTIONS *o)
{
    SoftNdkInitOptions(o);
    if (rules_broken)
        o->Verify = SoftNdkVerifyOff;
    unsigned slot = (unsigned)getpid() % 1000u;
    o->EphemeralPortLow = (USHORT)(50000u + slot * 8u);
    o->EphemeralPortHigh = (USHORT)(50000u + slot * 8u + 7u);
}

NDK_ADAPTER *conf_open_with(const SOFTNDK_OPTIONS *o)
{
    unsigned lo = if_nametoindex("lo");
    CHECK_MSG(lo != 0, "no loopback interface");
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(lo, conf_version(2, 0), o, &a), STATUS_SUCCESS);
    CHECK(a != NULL);
    return a;
}

NDK_ADAPTER *conf_open_other_device(void)
{
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(2, 0), &o, &a), STATUS_SUCCESS);
    CHECK(a != NULL);
    return a;
}

NDK_ADAPTER *conf_open(void)
{
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    return conf_open_with(&o);
}

void conf_query(NDK_ADAPTER *a, NDK_ADAPTER_INFO *info)
{
    ULONG size = sizeof *info;
    memset(info, 0, sizeof *info);
    CHECK_STATUS(a->Dispatch->NdkQueryAdapterInfo(a, info, &size), STATUS_SUCCESS);
    CHECK_EQ_U64(size, sizeof *info);
}

void conf_close_signal(void *ctx)
{
    harness_event_signal(ctx);
}

static void close_unexpected(void *ctx)
{
    (void)ctx;
    harness_fail(__FILE__, __LINE__, "close completion after close returned STATUS_SUCCESS");
}

void conf_close(NDK_OBJECT_HEADER *h)
{
    CHECK_STATUS(ndk_close_any(h, close_unexpected, NULL), STATUS_SUCCESS);
}

void conf_close_wait(NDK_OBJECT_HEADER *h)
{
    struct harness_event ev;
    harness_event_init(&ev);
    NTSTATUS st = ndk_close_any(h, conf_close_signal, &ev);
    if (st == STATUS_PENDING)
        CHECK_MSG(harness_event_wait(&ev, 1, CONF_WAIT_MS), "close completion never came");
    else
        CHECK_STATUS(st, STATUS_SUCCESS);
    harness_event_destroy(&ev);
}

void conf_connect_never(void *ctx, NDK_CONNECTOR *conn)
{
    (void)ctx, (void)conn;
    harness_fail(__FILE__, __LINE__, "connect event without a listening listener");
}

void conf_cq_notify(void *ctx, NTSTATUS status)
{
    struct conf_cq *c = ctx;
    if (atomic_fetch_add(&c->inside, 1) != 0)
        atomic_store(&c->overlap, true);
    if (atomic_load(&c->closed))
        atomic_store(&c->after_close, true);
    unsigned i = atomic_load(&c->n);
    if (i < CONF_MAX_NOTIFY)
        c->status[i] = status;
    if (c->delay_ms) {
        /* Deliberately block inside the callback: serialization tests need a callback that
         * is still running while more notifications become due. */
        struct timespec ts = {0, (long)c->delay_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_sub(&c->inside, 1);
    atomic_fetch_add(&c->n, 1);
    harness_event_signal(&c->ev);
}

void conf_cq_create(NDK_ADAPTER *a, struct conf_cq *c, ULONG depth)
{
    memset(c, 0, sizeof *c);
    harness_event_init(&c->ev);
    CHECK_STATUS(
        a->Dispatch->NdkCreateCq(a, depth, conf_cq_notify, c, NULL, ndk_create_never, NULL, &c->cq),
        STATUS_SUCCESS);
    CHECK(c->cq != NULL);
}

void conf_cq_destroy(struct conf_cq *c)
{
    atomic_store(&c->closed, true);
    conf_close_wait(&c->cq->Header);
    CHECK_MSG(!atomic_load(&c->after_close), "CQ notification after close was called");
    CHECK_MSG(!atomic_load(&c->overlap), "CQ notifications overlapped");
    harness_event_destroy(&c->ev);
}

void conf_cq_arm(struct conf_cq *c, ULONG type)
{
    c->cq->Dispatch->NdkArmCq(c->cq, type);
}

bool conf_cq_wait(struct conf_cq *c, unsigned count)
{
    return harness_event_wait(&c->ev, count, CONF_WAIT_MS);
}

bool conf_cq_quiet(struct conf_cq *c, unsigned count)
{
    return !harness_event_wait(&c->ev, count + 1, CONF_QUIET_MS);
}

NTSTATUS conf_cq_status(struct conf_cq *c, unsigned i)
{
    CHECK(i < CONF_MAX_NOTIFY && i < atomic_load(&c->n));
    return c->status[i];
}

NDK_PD *conf_pd(NDK_ADAPTER *a)
{
    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    CHECK(pd != NULL);
    return pd;
}

NDK_QP *conf_qp(NDK_PD *pd, NDK_CQ *rcq, NDK_CQ *icq, void *qpctx, ULONG rdepth)
{
    NDK_QP *qp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQp(pd, rcq, icq, qpctx, rdepth, 4, 2, 2, 0,
                                           ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    CHECK(qp != NULL);
    return qp;
}

void conf_post_recvs(NDK_QP *qp, unsigned n, uintptr_t first)
{
    for (unsigned i = 0; i < n; i++)
        CHECK_STATUS(qp->Dispatch->NdkReceive(qp, (void *)(first + i), NULL, 0), STATUS_SUCCESS);
}

void conf_flush(NDK_QP *qp)
{
    qp->Dispatch->NdkFlush(qp);
}

void conf_flush_into(NDK_PD *pd, struct conf_cq *rcq, struct conf_cq *icq, unsigned n,
                     uintptr_t first)
{
    NDK_QP *qp = conf_qp(pd, rcq->cq, icq->cq, (void *)0x9009, n);
    conf_post_recvs(qp, n, first);
    conf_flush(qp);
    conf_close(&qp->Header);
}
