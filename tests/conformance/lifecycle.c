/* Object lifetime (docs/lifecycle.md): close pending while successors live, close
 * completion as the last callback, closing from inside a close completion, double close,
 * blocking adapter close, Dispatch interposition (decision 17), and create/close cycles without
 * leaks. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "objects.h"

static NDK_MR *make_mr(NDK_PD *pd)
{
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    return mr;
}

TEST(lifecycle_close_without_successors_success_no_callback)
{
    NDK_ADAPTER *a = conf_open();
    struct harness_event ev;
    harness_event_init(&ev);
    NDK_PD *pd = conf_pd(a);
    NDK_MR *mr = make_mr(pd);
    struct conf_cq c;
    conf_cq_create(a, &c, 4);
    CHECK_STATUS(ndk_close_any(&mr->Header, fixture_close_signal, &ev), STATUS_SUCCESS);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &ev), STATUS_SUCCESS);
    CHECK_STATUS(ndk_close_any(&c.cq->Header, fixture_close_signal, &ev), STATUS_SUCCESS);
    CHECK_MSG(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS),
              "close completion after close returned STATUS_SUCCESS");
    harness_event_destroy(&c.ev);
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
}

TEST(lifecycle_pd_close_pends_until_mr_closed)
{
    conf_breaks_rules("use_after_close: a create on a closing PD, on purpose");
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    NDK_MR *mr = make_mr(pd);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &ev), STATUS_PENDING);
    CHECK_MSG(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS), "PD close completed with an MR open");
    /* A closing PD takes no new children. */
    NDK_MR *mr2 = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr2),
                 STATUS_INVALID_DEVICE_STATE);
    /* The MR, still open, works. */
    static char buf[4096];
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    CHECK_STATUS(mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, 0, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(harness_event_count(&ev), 0);
    conf_close(&mr->Header);
    CHECK_MSG(harness_event_wait(&ev, 1, FIXTURE_WAIT_MS), "PD close never completed");
    CHECK(!harness_event_wait(&ev, 2, FIXTURE_QUIET_MS));
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
}

TEST(lifecycle_cq_close_pends_while_qp_uses_it)
{
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq rcq, icq;
    conf_cq_create(a, &rcq, 8);
    conf_cq_create(a, &icq, 8);
    NDK_QP *qp = conf_qp(pd, rcq.cq, icq.cq, NULL, 4);
    struct harness_event rev, iev;
    harness_event_init(&rev);
    harness_event_init(&iev);
    atomic_store(&rcq.closed, true);
    atomic_store(&icq.closed, true);
    CHECK_STATUS(ndk_close_any(&rcq.cq->Header, fixture_close_signal, &rev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&icq.cq->Header, fixture_close_signal, &iev), STATUS_PENDING);
    CHECK(!harness_event_wait(&rev, 1, FIXTURE_QUIET_MS));
    CHECK_EQ_U64(harness_event_count(&iev), 0);
    /* The QP still works on its closing CQs. */
    conf_post_recvs(qp, 2, 1);
    conf_close(&qp->Header);
    CHECK(harness_event_wait(&rev, 1, FIXTURE_WAIT_MS));
    CHECK(harness_event_wait(&iev, 1, FIXTURE_WAIT_MS));
    CHECK(!atomic_load(&rcq.after_close) && !atomic_load(&icq.after_close));
    conf_close(&pd->Header);
    ndk_close_adapter(a);
    harness_event_destroy(&rev);
    harness_event_destroy(&iev);
    harness_event_destroy(&rcq.ev);
    harness_event_destroy(&icq.ev);
}

TEST(lifecycle_srq_close_pends_while_qp_uses_it)
{
    conf_breaks_rules("use_after_close: calls on a closing SRQ, on purpose");
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    NDK_QP *qp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, c.cq, c.cq, srq, NULL, 2, 1, 0,
                                                  ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&srq->Header, fixture_close_signal, &ev), STATUS_PENDING);
    CHECK(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS));
    /* A closing SRQ takes no new QPs. */
    NDK_QP *qp2 = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateQpWithSrq(pd, c.cq, c.cq, srq, NULL, 2, 1, 0,
                                                   ndk_create_never, NULL, &qp2);
    CHECK_MSG(st != STATUS_SUCCESS, "QP created on a closing SRQ");
    conf_close(&qp->Header);
    CHECK(harness_event_wait(&ev, 1, FIXTURE_WAIT_MS));
    /* The SRQ releases the PD only after its close completion returned: may pend briefly. */
    fixture_close_wait(&pd->Header);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
}

TEST(lifecycle_double_close_of_pending_object)
{
    conf_breaks_rules("use_after_close: a second close, on purpose");
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    NDK_MR *mr = make_mr(pd);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &ev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &ev),
                 STATUS_INVALID_DEVICE_STATE);
    conf_close(&mr->Header);
    CHECK(harness_event_wait(&ev, 1, FIXTURE_WAIT_MS));
    CHECK_MSG(!harness_event_wait(&ev, 2, FIXTURE_QUIET_MS), "two close completions");
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
}

/* ---- no notification after close ----------------------------------------------------- */

TEST(lifecycle_no_cq_notification_after_close)
{
    /* Arm, close (pending: a QP uses the CQ), then the QP's close flushes its receives into
     * the closing CQ: no notification may follow the close call. */
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c;
    conf_cq_create(a, &c, 16);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 8);
    conf_post_recvs(qp, 5, 1);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    struct harness_event ev;
    harness_event_init(&ev);
    atomic_store(&c.closed, true);
    CHECK_STATUS(ndk_close_any(&c.cq->Header, fixture_close_signal, &ev), STATUS_PENDING);
    conf_close(&qp->Header);
    CHECK(harness_event_wait(&ev, 1, FIXTURE_WAIT_MS));
    CHECK_MSG(!harness_event_wait(&c.ev, 1, FIXTURE_QUIET_MS), "CQ notified after close");
    CHECK_EQ_U64(atomic_load(&c.n), 0);
    conf_close(&pd->Header);
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
    harness_event_destroy(&c.ev);
}

struct running_close {
    struct conf_cq *c;
    struct harness_event ev;
    unsigned n_at_close; /* notifications finished when the close completion ran */
    int inside_at_close;
};

static void running_close_cb(void *p)
{
    struct running_close *rc = p;
    rc->n_at_close = atomic_load(&rc->c->n);
    rc->inside_at_close = atomic_load(&rc->c->inside);
    harness_event_signal(&rc->ev);
}

static bool cb_running(void *p)
{
    return atomic_load(&((struct conf_cq *)p)->inside) > 0;
}

TEST(lifecycle_cq_close_waits_for_running_notification)
{
    conf_breaks_rules("callback_slow: its notification waits, on purpose");
    /* [CLOSE-5] (b), [CQ-11]: close stays pending while the callback runs. */
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c, icq;
    conf_cq_create(a, &c, 16);
    conf_cq_create(a, &icq, 4);
    c.delay_ms = 150;
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    conf_flush_into(pd, &c, &icq, 1, 1);
    CHECK(harness_wait_until(cb_running, &c, FIXTURE_WAIT_MS));
    struct running_close rc = {.c = &c};
    harness_event_init(&rc.ev);
    NTSTATUS st = ndk_close_any(&c.cq->Header, running_close_cb, &rc);
    /* the close itself must not block on the running callback */
    CHECK_STATUS(st, STATUS_PENDING);
    CHECK(harness_event_wait(&rc.ev, 1, FIXTURE_WAIT_MS));
    CHECK_EQ_U64(rc.n_at_close, 1);
    CHECK_EQ_U64(rc.inside_at_close, 0);
    conf_cq_destroy(&icq);
    conf_close(&pd->Header);
    ndk_close_adapter(a);
    harness_event_destroy(&rc.ev);
    harness_event_destroy(&c.ev);
}

TEST(lifecycle_cq_close_cancels_held_back_notification)
{
    /* A notification held back by moderation (1 s) is dropped by close, and the close does
     * not wait for the moderation interval. */
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c, icq;
    conf_cq_create(a, &c, 16);
    conf_cq_create(a, &icq, 4);
    CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, 1000000, MAXULONG),
                 STATUS_SUCCESS);
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    conf_flush_into(pd, &c, &icq, 1, 1);
    CHECK(conf_cq_quiet(&c, 0));
    struct harness_event ev;
    harness_event_init(&ev);
    atomic_store(&c.closed, true);
    NTSTATUS st = ndk_close_any(&c.cq->Header, fixture_close_signal, &ev);
    if (st == STATUS_PENDING)
        CHECK_MSG(harness_event_wait(&ev, 1, 500), "close waited for the moderation timer");
    else
        CHECK_STATUS(st, STATUS_SUCCESS);
    CHECK(!harness_event_wait(&c.ev, 1, FIXTURE_QUIET_MS));
    conf_cq_destroy(&icq);
    conf_close(&pd->Header);
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
    harness_event_destroy(&c.ev);
}

/* ---- closing from inside a close completion ------------------------------------------- */

struct nested {
    NDK_PD *pd;
    NTSTATUS pd_status;
    struct harness_event srq_closed, pd_closed;
};

static void nested_pd_closed(void *p)
{
    struct nested *n = p;
    harness_event_signal(&n->pd_closed);
}

static void nested_srq_closed(void *p)
{
    struct nested *n = p;
    /* Close the SRQ's parent from inside the SRQ's close completion. */
    n->pd_status = ndk_close_any(&n->pd->Header, nested_pd_closed, n);
    harness_event_signal(&n->srq_closed);
}

TEST(lifecycle_close_parent_from_close_completion)
{
    NDK_ADAPTER *a = conf_open();
    struct nested n = {.pd = conf_pd(a), .pd_status = -1};
    harness_event_init(&n.srq_closed);
    harness_event_init(&n.pd_closed);
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        n.pd->Dispatch->NdkCreateSrq(n.pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    NDK_QP *qp = NULL;
    CHECK_STATUS(n.pd->Dispatch->NdkCreateQpWithSrq(n.pd, c.cq, c.cq, srq, NULL, 2, 1, 0,
                                                    ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    CHECK_STATUS(ndk_close_any(&srq->Header, nested_srq_closed, &n), STATUS_PENDING);
    conf_close(&qp->Header);
    CHECK(harness_event_wait(&n.srq_closed, 1, FIXTURE_WAIT_MS));
    if (n.pd_status == STATUS_PENDING)
        CHECK_MSG(harness_event_wait(&n.pd_closed, 1, FIXTURE_WAIT_MS), "PD close never completed");
    else
        CHECK_STATUS(n.pd_status, STATUS_SUCCESS);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
    harness_event_destroy(&n.srq_closed);
    harness_event_destroy(&n.pd_closed);
}

/* ---- SoftNdkCloseAdapter blocks until the last object is closed ----------------------- */

struct closer {
    NDK_ADAPTER *a;
    struct harness_event returned;
    atomic_bool cq_close_done; /* CQ close completion had run when the adapter close returned */
    atomic_bool cq_done_at_return;
};

static void *closer_thread(void *p)
{
    struct closer *cl = p;
    SoftNdkCloseAdapter(cl->a);
    atomic_store(&cl->cq_done_at_return, atomic_load(&cl->cq_close_done));
    harness_event_signal(&cl->returned);
    return NULL;
}

static bool adapter_closing(void *p)
{
    NDK_ADAPTER *a = p;
    NDK_PD *pd = NULL;
    NTSTATUS st = a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd);
    if (st == STATUS_SUCCESS) {
        conf_close(&pd->Header);
        return false;
    }
    CHECK_STATUS(st, STATUS_INVALID_DEVICE_STATE);
    return true;
}

static void closer_cq_closed(void *p)
{
    struct closer *cl = p;
    atomic_store(&cl->cq_close_done, true);
}

static void closer_cq_closed_slowly(void *p)
{
    /* Deliberately slow close completion: the adapter close must wait for it to return. */
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    closer_cq_closed(p);
}

TEST(lifecycle_close_adapter_blocks_until_last_object_closed)
{
    conf_breaks_rules("use_after_close: creates on a closing adapter, on purpose");
    struct closer cl = {.a = conf_open()};
    harness_event_init(&cl.returned);
    NDK_PD *pd = conf_pd(cl.a);
    struct conf_cq c;
    conf_cq_create(cl.a, &c, 8);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 2);
    CHECK_STATUS(ndk_close_any(&c.cq->Header, closer_cq_closed, &cl), STATUS_PENDING);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, closer_thread, &cl) == 0);
    /* The adapter close has begun once new creates are refused. */
    CHECK(harness_wait_until(adapter_closing, cl.a, FIXTURE_WAIT_MS));
    CHECK_MSG(!harness_event_wait(&cl.returned, 1, FIXTURE_QUIET_MS),
              "returned with 3 objects open");
    conf_close(&qp->Header); /* the CQ's close completes now */
    CHECK_MSG(!harness_event_wait(&cl.returned, 1, FIXTURE_QUIET_MS), "returned with the PD open");
    CHECK(atomic_load(&cl.cq_close_done));
    conf_close(&pd->Header); /* the last object */
    CHECK_MSG(harness_event_wait(&cl.returned, 1, FIXTURE_WAIT_MS), "did not return");
    CHECK(atomic_load(&cl.cq_done_at_return));
    pthread_join(t, NULL);
    harness_event_destroy(&cl.returned);
    harness_event_destroy(&c.ev);
}

TEST(lifecycle_close_adapter_waits_for_close_completion_callback)
{
    conf_breaks_rules("callback_slow, use_after_close: a close completion that waits, on purpose");
    /* The adapter close returns only once every callback returned: here the CQ's close
     * completion, which blocks briefly on a progress thread. */
    struct closer cl = {.a = conf_open()};
    harness_event_init(&cl.returned);
    NDK_PD *pd = conf_pd(cl.a);
    struct conf_cq c;
    conf_cq_create(cl.a, &c, 8);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 2);
    CHECK_STATUS(ndk_close_any(&c.cq->Header, closer_cq_closed_slowly, &cl), STATUS_PENDING);
    struct harness_event pdev;
    harness_event_init(&pdev);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &pdev), STATUS_PENDING);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, closer_thread, &cl) == 0);
    CHECK(harness_wait_until(adapter_closing, cl.a, FIXTURE_WAIT_MS));
    conf_close(&qp->Header);
    CHECK(harness_event_wait(&cl.returned, 1, FIXTURE_WAIT_MS));
    CHECK(atomic_load(&cl.cq_done_at_return));
    CHECK_EQ_U64(harness_event_count(&pdev), 1);
    pthread_join(t, NULL);
    harness_event_destroy(&pdev);
    harness_event_destroy(&cl.returned);
    harness_event_destroy(&c.ev);
}

TEST(lifecycle_last_close_races_adapter_close)
{
    conf_breaks_rules("use_after_close: creates on a closing adapter, on purpose");
    /* The consumer's last close (thread A) makes the final close completion due while
     * SoftNdkCloseAdapter waits on thread B. B may return, and the engine be freed, only once
     * A's close call no longer touches the provider. A spinning progress thread picks the work
     * up without being woken: the window where A still wakes the thread after queueing. */
    for (int round = 0; round < 20; round++) {
        SOFTNDK_OPTIONS o;
        conf_options(&o);
        o.SpinMicroseconds = 1000000;
        struct closer cl = {.a = conf_open_with(&o)};
        harness_event_init(&cl.returned);
        NDK_PD *pd = conf_pd(cl.a);
        struct conf_cq c;
        conf_cq_create(cl.a, &c, 8);
        NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 2);
        CHECK_STATUS(ndk_close_any(&c.cq->Header, closer_cq_closed, &cl), STATUS_PENDING);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, closer_thread, &cl) == 0);
        CHECK(harness_wait_until(adapter_closing, cl.a, FIXTURE_WAIT_MS));
        struct harness_event pdev;
        harness_event_init(&pdev);
        /* pending: the QP holds it ... */
        CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &pdev), STATUS_PENDING);
        conf_close(&qp->Header); /* ... until this last close, from this thread */
        CHECK(harness_event_wait(&cl.returned, 1, FIXTURE_WAIT_MS));
        CHECK_EQ_U64(harness_event_count(&pdev), 1);
        pthread_join(t, NULL);
        harness_event_destroy(&pdev);
        harness_event_destroy(&cl.returned);
        harness_event_destroy(&c.ev);
    }
}

/* ---- Dispatch interposition (decision 17) ----------------------------------------------- */

static struct {
    const NDK_ADAPTER_DISPATCH *adapter;
    const NDK_PD_DISPATCH *pd;
    const NDK_CQ_DISPATCH *cq;
    const NDK_QP_DISPATCH *qp;
    const NDK_MR_DISPATCH *mr;
} orig;
static atomic_uint calls;

#define WRAP(table, slot, ret, params, args)                                                       \
    static ret wrap_##table##_##slot params                                                        \
    {                                                                                              \
        atomic_fetch_add(&calls, 1);                                                               \
        return orig.table->slot args;                                                              \
    }
WRAP(adapter, NdkCreateCq, NTSTATUS,
     (NDK_ADAPTER * a, ULONG d, NDK_FN_CQ_NOTIFICATION_CALLBACK cb, PVOID ctx, GROUP_AFFINITY *af,
      NDK_FN_CREATE_COMPLETION cc, PVOID rc, NDK_CQ **pp),
     (a, d, cb, ctx, af, cc, rc, pp))
WRAP(adapter, NdkCreatePd, NTSTATUS,
     (NDK_ADAPTER * a, NDK_FN_CREATE_COMPLETION cc, PVOID rc, NDK_PD **pp), (a, cc, rc, pp))
WRAP(pd, NdkClosePd, NTSTATUS, (NDK_OBJECT_HEADER * h, NDK_FN_CLOSE_COMPLETION cb, PVOID ctx),
     (h, cb, ctx))
WRAP(pd, NdkCreateMr, NTSTATUS,
     (NDK_PD * pd, BOOLEAN f, NDK_FN_CREATE_COMPLETION cc, PVOID rc, NDK_MR **pp),
     (pd, f, cc, rc, pp))
WRAP(pd, NdkCreateQp, NTSTATUS,
     (NDK_PD * pd, NDK_CQ *r, NDK_CQ *i, PVOID qc, ULONG rd, ULONG id, ULONG rs, ULONG is,
      ULONG inl, NDK_FN_CREATE_COMPLETION cc, PVOID rc, NDK_QP **pp),
     (pd, r, i, qc, rd, id, rs, is, inl, cc, rc, pp))
WRAP(cq, NdkCloseCq, NTSTATUS, (NDK_OBJECT_HEADER * h, NDK_FN_CLOSE_COMPLETION cb, PVOID ctx),
     (h, cb, ctx))
WRAP(cq, NdkArmCq, VOID, (NDK_CQ * cq, ULONG t), (cq, t))
WRAP(cq, NdkGetCqResults, ULONG, (NDK_CQ * cq, NDK_RESULT *r, ULONG n), (cq, r, n))
WRAP(qp, NdkCloseQp, NTSTATUS, (NDK_OBJECT_HEADER * h, NDK_FN_CLOSE_COMPLETION cb, PVOID ctx),
     (h, cb, ctx))
WRAP(qp, NdkReceive, NTSTATUS, (NDK_QP * qp, PVOID rc, const NDK_SGE *s, ULONG n),
     (qp, rc, s, n))
WRAP(qp, NdkFlush, VOID, (NDK_QP * qp), (qp))
WRAP(mr, NdkCloseMr, NTSTATUS, (NDK_OBJECT_HEADER * h, NDK_FN_CLOSE_COMPLETION cb, PVOID ctx),
     (h, cb, ctx))
WRAP(mr, NdkRegisterMr, NTSTATUS,
     (NDK_MR * mr, MDL *m, SIZE_T l, ULONG f, NDK_FN_REQUEST_COMPLETION rc, PVOID ctx),
     (mr, m, l, f, rc, ctx))
#undef WRAP

TEST(lifecycle_dispatch_interposition)
{
    NDK_ADAPTER *a = conf_open();
    static NDK_ADAPTER_DISPATCH ad;
    static NDK_PD_DISPATCH pdd;
    static NDK_CQ_DISPATCH cqd;
    static NDK_QP_DISPATCH qpd;
    static NDK_MR_DISPATCH mrd;
    orig.adapter = a->Dispatch;
    ad = *a->Dispatch;
    ad.NdkCreateCq = wrap_adapter_NdkCreateCq;
    ad.NdkCreatePd = wrap_adapter_NdkCreatePd;
    a->Dispatch = &ad;
    unsigned expect = 0;

    NDK_PD *pd = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd), STATUS_SUCCESS);
    expect++;
    orig.pd = pd->Dispatch;
    pdd = *pd->Dispatch;
    pdd.NdkClosePd = wrap_pd_NdkClosePd;
    pdd.NdkCreateMr = wrap_pd_NdkCreateMr;
    pdd.NdkCreateQp = wrap_pd_NdkCreateQp;
    pd->Dispatch = &pdd;

    struct conf_cq c;
    memset(&c, 0, sizeof c);
    harness_event_init(&c.ev);
    CHECK_STATUS(
        a->Dispatch->NdkCreateCq(a, 8, conf_cq_notify, &c, NULL, ndk_create_never, NULL, &c.cq),
        STATUS_SUCCESS);
    expect++;
    orig.cq = c.cq->Dispatch;
    cqd = *c.cq->Dispatch;
    cqd.NdkCloseCq = wrap_cq_NdkCloseCq;
    cqd.NdkArmCq = wrap_cq_NdkArmCq;
    cqd.NdkGetCqResults = wrap_cq_NdkGetCqResults;
    c.cq->Dispatch = &cqd;

    NDK_QP *qp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQp(pd, c.cq, c.cq, (void *)0x77, 4, 4, 1, 1, 0,
                                           ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    expect++;
    orig.qp = qp->Dispatch;
    qpd = *qp->Dispatch;
    qpd.NdkCloseQp = wrap_qp_NdkCloseQp;
    qpd.NdkReceive = wrap_qp_NdkReceive;
    qpd.NdkFlush = wrap_qp_NdkFlush;
    qp->Dispatch = &qpd;

    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    expect++;
    orig.mr = mr->Dispatch;
    mrd = *mr->Dispatch;
    mrd.NdkCloseMr = wrap_mr_NdkCloseMr;
    mrd.NdkRegisterMr = wrap_mr_NdkRegisterMr;
    mr->Dispatch = &mrd;

    static char buf[4096];
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    CHECK_STATUS(mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, 1, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    expect++;
    CHECK(mr->Dispatch->NdkGetLocalTokenFromMr(mr) != 0);

    conf_post_recvs(qp, 3, 1);
    expect += 3;
    c.cq->Dispatch->NdkArmCq(c.cq, NDK_CQ_NOTIFY_ANY);
    expect++;
    qp->Dispatch->NdkFlush(qp);
    expect++;
    CHECK(conf_cq_wait(&c, 1));
    NDK_RESULT r[8];
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 8), 3);
    expect++;
    CHECK(r[0].QPContext == (void *)0x77);
    conf_post_recvs(qp, 2, 10);
    expect += 2;
    /* Close flushes: the provider must not go through our Dispatch to do so. */
    conf_close(&qp->Header);
    expect++;
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 8), 2);
    expect++;
    conf_close(&mr->Header);
    expect++;
    conf_close(&pd->Header);
    expect++;
    conf_cq_destroy(&c);
    expect++;
    /* Exactly our own calls went through the interposed tables: the provider read none. */
    CHECK_EQ_U64(atomic_load(&calls), expect);
    ndk_close_adapter(a);
}

/* ---- create/close cycles: no leaks ----------------------------------------------------- */

TEST_T(lifecycle_create_close_cycles_no_fd_leak, 60)
{
    int base = harness_open_fds();
    CHECK(base > 0);
    for (int k = 0; k < 25; k++) {
        NDK_ADAPTER *a = conf_open();
        ndk_close_adapter(a);
    }
    CHECK_EQ_I64(harness_open_fds(), base);

    NDK_ADAPTER *a = conf_open();
    int with_adapter = harness_open_fds();
    static char buf[8192] __attribute__((aligned(4096)));
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    for (int k = 0; k < 1000; k++) {
        NDK_PD *pd = conf_pd(a);
        struct conf_cq c;
        conf_cq_create(a, &c, 4);
        NDK_MR *mr = make_mr(pd);
        CHECK_STATUS(mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, 5, ndk_request_never, NULL),
                     STATUS_SUCCESS);
        NDK_MR *fmr = NULL;
        CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, TRUE, ndk_create_never, NULL, &fmr),
                     STATUS_SUCCESS);
        CHECK_STATUS(
            fmr->Dispatch->NdkInitializeFastRegisterMr(fmr, 2, TRUE, ndk_request_never, NULL),
            STATUS_SUCCESS);
        NDK_MW *mw = NULL;
        CHECK_STATUS(pd->Dispatch->NdkCreateMw(pd, ndk_create_never, NULL, &mw), STATUS_SUCCESS);
        NDK_SRQ *srq = NULL;
        CHECK_STATUS(
            pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
            STATUS_SUCCESS);
        NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 2);
        conf_post_recvs(qp, 1, 1);
        NDK_QP *sqp = NULL;
        CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, c.cq, c.cq, srq, NULL, 2, 1, 0,
                                                      ndk_create_never, NULL, &sqp),
                     STATUS_SUCCESS);
        NDK_CONNECTOR *conn = NULL;
        CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &conn),
                     STATUS_SUCCESS);
        NDK_LISTENER *l = NULL;
        CHECK_STATUS(
            a->Dispatch->NdkCreateListener(a, conf_connect_never, NULL, ndk_create_never, NULL, &l),
            STATUS_SUCCESS);
        conf_close(&l->Header);
        conf_close(&conn->Header);
        conf_close(&sqp->Header);
        conf_close(&qp->Header);
        conf_close(&srq->Header);
        conf_close(&mw->Header);
        conf_close(&fmr->Header);
        conf_close(&mr->Header);
        conf_close(&pd->Header);
        NDK_RESULT r[2];
        CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResults(c.cq, r, 2), 1);
        conf_cq_destroy(&c);
    }
    CHECK_EQ_I64(harness_open_fds(), with_adapter);
    ndk_close_adapter(a);
    CHECK_EQ_I64(harness_open_fds(), base);
}
