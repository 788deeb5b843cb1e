/* Queue pairs and shared receive queues: creation limits, posting limits (decision 9c),
 * initiator requests on a never-connected QP ([POST-5]), flush and close cancellation
 * (decision 9b), NdkReceive on an SRQ QP (decision 9e), SRQ limits and threshold notification
 * (docs/ndk-rules.md#srq, decisions "SRQ arming"). */
#include <string.h>

#include "objects.h"

struct qp_env {
    NDK_ADAPTER *a;
    NDK_ADAPTER_INFO info;
    NDK_PD *pd;
    struct conf_cq rcq, icq;
};

static void env_open(struct qp_env *e)
{
    e->a = conf_open();
    conf_query(e->a, &e->info);
    e->pd = conf_pd(e->a);
    conf_cq_create(e->a, &e->rcq, 64);
    conf_cq_create(e->a, &e->icq, 64);
}

static void env_close(struct qp_env *e)
{
    conf_cq_destroy(&e->icq);
    conf_cq_destroy(&e->rcq);
    conf_close(&e->pd->Header);
    ndk_close_adapter(e->a);
}

static NDK_SRQ *make_srq(NDK_PD *pd, ULONG depth, ULONG sge, ULONG threshold,
                         NDK_FN_SRQ_NOTIFICATION_CALLBACK cb, void *ctx)
{
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateSrq(pd, depth, sge, threshold, cb, ctx, NULL,
                                            ndk_create_never, NULL, &srq),
                 STATUS_SUCCESS);
    return srq;
}

/* ---- QP creation limits ---------------------------------------------------------------- */

TEST(qp_create_limits)
{
    conf_breaks_rules("handle_invalid: NULL and foreign CQs, on purpose");
    struct qp_env e;
    env_open(&e);
    NDK_PD *pd = e.pd;
    NDK_CQ *r = e.rcq.cq, *i = e.icq.cq;
    const NDK_ADAPTER_INFO *in = &e.info;
    NDK_FN_CREATE_QP c = pd->Dispatch->NdkCreateQp;
    NDK_QP *qp = NULL;
#define BAD(...) CHECK_STATUS(c(__VA_ARGS__, ndk_create_never, NULL, &qp), STATUS_INVALID_PARAMETER)
    BAD(pd, r, i, NULL, 0, 4, 1, 1, 0);                              /* receive depth 0 */
    BAD(pd, r, i, NULL, in->MaxReceiveQueueDepth + 1, 4, 1, 1, 0);   /* receive depth > max */
    BAD(pd, r, i, NULL, 4, 0, 1, 1, 0);                              /* initiator depth 0 */
    BAD(pd, r, i, NULL, 4, in->MaxInitiatorQueueDepth + 1, 1, 1, 0); /* initiator depth > max */
    BAD(pd, r, i, NULL, 4, 4, in->MaxReceiveRequestSge + 1, 1, 0);   /* receive SGEs > max */
    BAD(pd, r, i, NULL, 4, 4, 1, in->MaxInitiatorRequestSge + 1, 0); /* initiator SGEs > max */
    BAD(pd, r, i, NULL, 4, 4, 1, 1, in->MaxInlineDataSize + 1);      /* inline > max */
    BAD(pd, (NDK_CQ *)pd, i, NULL, 4, 4, 1, 1, 0);                   /* receive CQ not a CQ */
    BAD(pd, r, (NDK_CQ *)pd, NULL, 4, 4, 1, 1, 0);                   /* initiator CQ not a CQ */
    BAD(pd, NULL, i, NULL, 4, 4, 1, 1, 0);
    BAD(pd, r, NULL, NULL, 4, 4, 1, 1, 0);
    BAD((NDK_PD *)r, r, i, NULL, 4, 4, 1, 1, 0); /* PD not a PD */
#undef BAD
    CHECK_STATUS(c(pd, r, i, NULL, 4, 4, 1, 1, 0, ndk_create_never, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK(qp == NULL);
    /* At the maxima of SGEs and inline size; zero SGEs; one CQ for both queues. */
    CHECK_STATUS(c(pd, r, i, NULL, 4, 4, in->MaxReceiveRequestSge, in->MaxInitiatorRequestSge,
                   in->MaxInlineDataSize, ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    conf_close(&qp->Header);
    CHECK_STATUS(c(pd, r, r, NULL, 1, 1, 0, 0, 0, ndk_create_never, NULL, &qp), STATUS_SUCCESS);
    conf_close(&qp->Header);
    env_close(&e);
}

TEST(qp_with_srq_create_limits)
{
    conf_breaks_rules("handle_invalid: NULL and foreign handles, on purpose");
    struct qp_env e;
    env_open(&e);
    NDK_PD *pd = e.pd;
    NDK_CQ *r = e.rcq.cq, *i = e.icq.cq;
    const NDK_ADAPTER_INFO *in = &e.info;
    NDK_SRQ *srq = make_srq(pd, 8, 1, 0, NULL, NULL);
    NDK_PD *pd2 = conf_pd(e.a);
    NDK_SRQ *srq2 = make_srq(pd2, 8, 1, 0, NULL, NULL);
    NDK_FN_CREATE_QP_WITH_SRQ c = pd->Dispatch->NdkCreateQpWithSrq;
    NDK_QP *qp = NULL;
#define BAD(...) CHECK_STATUS(c(__VA_ARGS__, ndk_create_never, NULL, &qp), STATUS_INVALID_PARAMETER)
    BAD(pd, r, i, srq, NULL, 0, 1, 0);
    BAD(pd, r, i, srq, NULL, in->MaxInitiatorQueueDepth + 1, 1, 0);
    BAD(pd, r, i, srq, NULL, 4, in->MaxInitiatorRequestSge + 1, 0);
    BAD(pd, r, i, srq, NULL, 4, 1, in->MaxInlineDataSize + 1);
    BAD(pd, r, i, (NDK_SRQ *)r, NULL, 4, 1, 0); /* SRQ not an SRQ */
    BAD(pd, r, i, NULL, NULL, 4, 1, 0);
    BAD(pd, (NDK_CQ *)srq, i, srq, NULL, 4, 1, 0); /* CQ not a CQ */
    BAD(pd, r, i, srq2, NULL, 4, 1, 0);            /* SRQ of another PD */
    BAD((NDK_PD *)srq, r, i, srq, NULL, 4, 1, 0);  /* PD not a PD */
#undef BAD
    CHECK(qp == NULL);
    CHECK_STATUS(c(pd, r, i, srq, NULL, 4, 1, 0, ndk_create_never, NULL, &qp), STATUS_SUCCESS);
    conf_close(&qp->Header);
    CHECK_STATUS(c(pd2, r, i, srq2, NULL, 4, 1, 0, ndk_create_never, NULL, &qp), STATUS_SUCCESS);
    conf_close(&qp->Header);
    conf_close(&srq2->Header);
    conf_close(&pd2->Header);
    conf_close(&srq->Header);
    env_close(&e);
}

TEST(qp_create_on_cq_of_other_adapter)
{
    conf_breaks_rules("handle_invalid: a CQ of another adapter, on purpose");
    struct qp_env e;
    env_open(&e);
    NDK_ADAPTER *b = conf_open_other_device();
    struct conf_cq bcq;
    conf_cq_create(b, &bcq, 8);
    NDK_QP *qp = NULL;
    CHECK_STATUS(e.pd->Dispatch->NdkCreateQp(e.pd, bcq.cq, e.icq.cq, NULL, 4, 4, 1, 1, 0,
                                             ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(e.pd->Dispatch->NdkCreateQp(e.pd, e.rcq.cq, bcq.cq, NULL, 4, 4, 1, 1, 0,
                                             ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    conf_cq_destroy(&bcq);
    ndk_close_adapter(b);
    /* Another instance on the same interface is the same device: its CQs serve. */
    NDK_ADAPTER *c = conf_open();
    struct conf_cq ccq;
    conf_cq_create(c, &ccq, 8);
    CHECK_STATUS(e.pd->Dispatch->NdkCreateQp(e.pd, ccq.cq, e.icq.cq, NULL, 4, 4, 1, 1, 0,
                                             ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    conf_close(&qp->Header);
    conf_cq_destroy(&ccq);
    ndk_close_adapter(c);
    env_close(&e);
}

/* ---- NdkReceive ----------------------------------------------------------------------------- */

TEST(qp_receive_limits)
{
    struct qp_env e;
    env_open(&e);
    NDK_QP *qp = conf_qp(e.pd, e.rcq.cq, e.icq.cq, NULL, 4); /* 2 receive SGEs */
    NDK_FN_RECEIVE rx = qp->Dispatch->NdkReceive;
    static char buf[64];
    NDK_SGE sge[3];
    for (int k = 0; k < 3; k++) {
        sge[k].VirtualAddress = buf + k * 16;
        sge[k].Length = 16;
        sge[k].MemoryRegionToken = 0x1234;
    }
    CHECK_STATUS(rx(qp, (void *)1, sge, 3), STATUS_DATA_OVERRUN);      /* nSge > QP max */
    CHECK_STATUS(rx(qp, (void *)1, NULL, 1), STATUS_INVALID_PARAMETER); /* NULL SGL */
    /* More bytes than MaxTransferLength (0xFFFFFFFF): two SGEs of 4 GiB - 1. */
    NDK_SGE huge[2] = {sge[0], sge[1]};
    huge[0].Length = huge[1].Length = 0xFFFFFFFFu;
    if (e.info.MaxTransferLength == 0xFFFFFFFFu)
        CHECK_STATUS(rx(qp, (void *)1, huge, 2), STATUS_DATA_OVERRUN);
    /* Nothing of the refused posts was queued. */
    conf_flush(qp);
    NDK_RESULT r[8];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResults(e.rcq.cq, r, 8), 0);
    /* Zero SGEs, one SGE, the maximum. */
    CHECK_STATUS(rx(qp, (void *)1, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(rx(qp, (void *)2, sge, 0), STATUS_SUCCESS);
    CHECK_STATUS(rx(qp, (void *)3, sge, 1), STATUS_SUCCESS);
    CHECK_STATUS(rx(qp, (void *)4, sge, 2), STATUS_SUCCESS);
    conf_flush(qp);
    NDK_RESULT_EX x[8];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 8), 4);
    for (unsigned k = 0; k < 4; k++)
        CHECK_EQ_U64((uintptr_t)x[k].RequestContext, k + 1);
    conf_close(&qp->Header);
    env_close(&e);
}

TEST(qp_receive_queue_full)
{
    struct qp_env e;
    env_open(&e);
    NDK_QP *qp = conf_qp(e.pd, e.rcq.cq, e.icq.cq, NULL, 5);
    conf_post_recvs(qp, 5, 1); /* exactly depth posts succeed */
    CHECK_STATUS(qp->Dispatch->NdkReceive(qp, (void *)6, NULL, 0), STATUS_NO_MORE_ENTRIES);
    CHECK_STATUS(qp->Dispatch->NdkReceive(qp, (void *)6, NULL, 0), STATUS_NO_MORE_ENTRIES);
    /* Flushing frees the slots. */
    conf_flush(qp);
    conf_post_recvs(qp, 5, 10);
    CHECK_STATUS(qp->Dispatch->NdkReceive(qp, (void *)6, NULL, 0), STATUS_NO_MORE_ENTRIES);
    conf_flush(qp);
    NDK_RESULT_EX x[16];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 16), 10);
    for (unsigned k = 0; k < 10; k++)
        CHECK_EQ_U64((uintptr_t)x[k].RequestContext, k < 5 ? k + 1 : k + 5);
    conf_close(&qp->Header);
    env_close(&e);
}

/* ---- initiator requests on a never-connected QP ---------------------------------------- */

TEST(qp_initiator_requests_connection_invalid)
{
    conf_breaks_rules("post_not_connected: the statuses of posts on an unconnected QP");
    struct qp_env e;
    env_open(&e);
    NDK_QP *qp = conf_qp(e.pd, e.rcq.cq, e.icq.cq, (void *)0x5150, 4);
    NDK_MR *mr = NULL, *fmr = NULL;
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMr(e.pd, FALSE, ndk_create_never, NULL, &mr),
                 STATUS_SUCCESS);
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMr(e.pd, TRUE, ndk_create_never, NULL, &fmr),
                 STATUS_SUCCESS);
    CHECK_STATUS(fmr->Dispatch->NdkInitializeFastRegisterMr(fmr, 4, TRUE, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    NDK_MW *mw = NULL;
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMw(e.pd, ndk_create_never, NULL, &mw), STATUS_SUCCESS);
    static char buf[8192] __attribute__((aligned(4096)));
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    CHECK_STATUS(mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                             ndk_request_never, NULL),
                 STATUS_SUCCESS);
    UINT32 tok = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    NDK_SGE sge = {.VirtualAddress = buf, .Length = 64, .MemoryRegionToken = tok};
    NDK_LOGICAL_ADDRESS pages[2];
    pages[0].QuadPart = (int64_t)(uintptr_t)buf;
    pages[1].QuadPart = (int64_t)(uintptr_t)buf + 4096;
    void *ctx = (void *)0x001;
    const NDK_QP_DISPATCH *d = qp->Dispatch;
    /* A few rounds, with and without flags, with zero SGEs: always refused inline. */
    for (int round = 0; round < 3; round++) {
        ULONG n = round == 2 ? 0 : 1;
        ULONG f = round == 1 ? NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT : 0;
        CHECK_STATUS(d->NdkSend(qp, ctx, &sge, n, f), STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkSendAndInvalidate(qp, ctx, &sge, n, f, 0x4242),
                     STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkWrite(qp, ctx, &sge, n, 0x10000, 0x4242, 0), STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkRead(qp, ctx, &sge, n, 0x10000, 0x4242, 0), STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkBind(qp, ctx, mr, mw, buf, 4096, NDK_OP_FLAG_ALLOW_REMOTE_READ),
                     STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkFastRegister(qp, ctx, fmr, 2, pages, 0, 8192, buf,
                                        NDK_OP_FLAG_ALLOW_LOCAL_WRITE),
                     STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkInvalidate(qp, ctx, &fmr->Header, 0), STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkInvalidate(qp, ctx, &mw->Header, 0), STATUS_CONNECTION_INVALID);
        CHECK_STATUS(d->NdkSend(qp, ctx, &sge, 1, NDK_OP_FLAG_DEFER), STATUS_CONNECTION_INVALID);
    }
    /* No completion anywhere; the QP stays usable ([POST-5]). */
    conf_cq_arm(&e.icq, NDK_CQ_NOTIFY_ANY);
    conf_cq_arm(&e.rcq, NDK_CQ_NOTIFY_ANY);
    CHECK(conf_cq_quiet(&e.icq, 0));
    CHECK(conf_cq_quiet(&e.rcq, 0));
    NDK_RESULT_EX x[4];
    CHECK_EQ_U64(e.icq.cq->Dispatch->NdkGetCqResultsEx(e.icq.cq, x, 4), 0);
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 4), 0);
    conf_post_recvs(qp, 1, 77);
    conf_flush(qp);
    CHECK(conf_cq_wait(&e.rcq, 1));
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 4), 1);
    CHECK_EQ_U64((uintptr_t)x[0].RequestContext, 77);
    CHECK(conf_cq_quiet(&e.icq, 0));
    conf_close(&qp->Header);
    conf_close(&mw->Header);
    conf_close(&fmr->Header);
    conf_close(&mr->Header);
    env_close(&e);
}

/* ---- flush and close (decision 9b) ------------------------------------------------------ */

TEST(qp_flush_cancels_receives_in_order)
{
    struct qp_env e;
    env_open(&e);
    NDK_QP *qp = conf_qp(e.pd, e.rcq.cq, e.icq.cq, (void *)0xC0FFEE, 16);
    conf_flush(qp); /* nothing posted: nothing completes */
    conf_cq_arm(&e.rcq, NDK_CQ_NOTIFY_ANY);
    conf_cq_arm(&e.icq, NDK_CQ_NOTIFY_ANY);
    CHECK(conf_cq_quiet(&e.rcq, 0));
    conf_post_recvs(qp, 12, 0x1000);
    conf_flush(qp);
    CHECK(conf_cq_wait(&e.rcq, 1));
    conf_flush(qp); /* a second flush has nothing left */
    NDK_RESULT_EX x[32];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 32), 12);
    for (unsigned k = 0; k < 12; k++) {
        CHECK_STATUS(x[k].Status, STATUS_CANCELLED);
        CHECK_EQ_U64(x[k].Type, NdkOperationTypeReceive);
        CHECK(x[k].QPContext == (void *)0xC0FFEE);
        CHECK_EQ_U64((uintptr_t)x[k].RequestContext, 0x1000 + k);
        CHECK_EQ_U64(x[k].BytesTransferred, 0);
    }
    /* none on the initiator CQ */
    CHECK(conf_cq_quiet(&e.icq, 0));
    CHECK_EQ_U64(e.icq.cq->Dispatch->NdkGetCqResultsEx(e.icq.cq, x, 32), 0);
    /* the QP is still usable after a flush */
    conf_post_recvs(qp, 2, 0x2000);
    conf_flush(qp);
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 32), 2);
    CHECK_EQ_U64((uintptr_t)x[1].RequestContext, 0x2001);
    conf_close(&qp->Header);
    env_close(&e);
}

TEST(qp_flush_two_qps_one_cq)
{
    /* Each QP's receives complete in its posting order, tagged with its QPContext. */
    struct qp_env e;
    env_open(&e);
    NDK_QP *q1 = conf_qp(e.pd, e.rcq.cq, e.icq.cq, (void *)0x11, 4);
    NDK_QP *q2 = conf_qp(e.pd, e.rcq.cq, e.icq.cq, (void *)0x22, 4);
    conf_post_recvs(q1, 3, 100);
    conf_post_recvs(q2, 3, 200);
    conf_flush(q2);
    conf_flush(q1);
    NDK_RESULT x[8];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResults(e.rcq.cq, x, 8), 6);
    for (unsigned k = 0; k < 3; k++) {
        CHECK(x[k].QPContext == (void *)0x22);
        CHECK_EQ_U64((uintptr_t)x[k].RequestContext, 200 + k);
        CHECK(x[k + 3].QPContext == (void *)0x11);
        CHECK_EQ_U64((uintptr_t)x[k + 3].RequestContext, 100 + k);
    }
    conf_close(&q1->Header);
    conf_close(&q2->Header);
    env_close(&e);
}

TEST(qp_close_cancels_outstanding_receives)
{
    struct qp_env e;
    env_open(&e);
    NDK_QP *qp = conf_qp(e.pd, e.rcq.cq, e.icq.cq, (void *)0xD00D, 8);
    conf_post_recvs(qp, 6, 0x300);
    conf_cq_arm(&e.rcq, NDK_CQ_NOTIFY_ANY);
    fixture_close_wait(&qp->Header);
    CHECK(conf_cq_wait(&e.rcq, 1));
    CHECK_STATUS(conf_cq_status(&e.rcq, 0), STATUS_SUCCESS);
    NDK_RESULT_EX x[16];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResultsEx(e.rcq.cq, x, 16), 6);
    for (unsigned k = 0; k < 6; k++) {
        CHECK_STATUS(x[k].Status, STATUS_CANCELLED);
        CHECK(x[k].QPContext == (void *)0xD00D);
        CHECK_EQ_U64((uintptr_t)x[k].RequestContext, 0x300 + k);
        CHECK_EQ_U64(x[k].Type, NdkOperationTypeReceive);
    }
    CHECK_EQ_U64(e.icq.cq->Dispatch->NdkGetCqResultsEx(e.icq.cq, x, 16), 0);
    env_close(&e);
}

/* ---- QPs on an SRQ ------------------------------------------------------------------------- */

TEST(qp_receive_on_srq_qp_invalid)
{
    conf_breaks_rules("post_not_connected: posts on an unconnected QP");
    struct qp_env e;
    env_open(&e);
    NDK_SRQ *srq = make_srq(e.pd, 4, 1, 0, NULL, NULL);
    NDK_QP *qp = NULL;
    CHECK_STATUS(e.pd->Dispatch->NdkCreateQpWithSrq(e.pd, e.rcq.cq, e.icq.cq, srq, NULL, 4, 1, 0,
                                                    ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    CHECK_STATUS(qp->Dispatch->NdkReceive(qp, (void *)1, NULL, 0), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(qp->Dispatch->NdkSend(qp, (void *)1, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    /* SRQ receives belong to no QP: neither a flush nor the QP's close completes them. */
    CHECK_STATUS(srq->Dispatch->NdkSrqReceive(srq, (void *)1, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(srq->Dispatch->NdkSrqReceive(srq, (void *)2, NULL, 0), STATUS_SUCCESS);
    conf_flush(qp);
    conf_close(&qp->Header);
    NDK_RESULT r[4];
    CHECK_EQ_U64(e.rcq.cq->Dispatch->NdkGetCqResults(e.rcq.cq, r, 4), 0);
    /* still queued: shrinking below 2 is refused */
    CHECK_STATUS(srq->Dispatch->NdkModifySrq(srq, 1, 0, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    conf_close(&srq->Header); /* receives dropped without completion (decisions) */
    env_close(&e);
}

/* ---- SRQ ----------------------------------------------------------------------------------- */

TEST(srq_create_limits)
{
    struct qp_env e;
    env_open(&e);
    NDK_FN_CREATE_SRQ c = e.pd->Dispatch->NdkCreateSrq;
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(c(e.pd, 0, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(
        c(e.pd, e.info.MaxSrqDepth + 1, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_INVALID_PARAMETER);
    CHECK_STATUS(c(e.pd, 4, e.info.MaxReceiveRequestSge + 1, 0, NULL, NULL, NULL, ndk_create_never,
                   NULL, &srq),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(c((NDK_PD *)e.rcq.cq, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(c(e.pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK(srq == NULL);
    CHECK_STATUS(
        c(e.pd, 4, e.info.MaxReceiveRequestSge, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    conf_close(&srq->Header);
    env_close(&e);
}

TEST(srq_receive_limits)
{
    struct qp_env e;
    env_open(&e);
    NDK_SRQ *srq = make_srq(e.pd, 3, 2, 0, NULL, NULL);
    NDK_FN_SRQ_RECEIVE rx = srq->Dispatch->NdkSrqReceive;
    static char buf[48];
    NDK_SGE sge[3];
    for (int k = 0; k < 3; k++)
        sge[k] = (NDK_SGE){.VirtualAddress = buf + 16 * k, .Length = 16, .MemoryRegionToken = 1};
    CHECK_STATUS(rx(srq, (void *)1, sge, 3), STATUS_DATA_OVERRUN); /* decision 9c */
    CHECK_STATUS(rx(srq, (void *)1, NULL, 1), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(rx(srq, (void *)1, sge, 2), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)2, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)3, sge, 1), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)4, NULL, 0), STATUS_NO_MORE_ENTRIES);
    conf_close(&srq->Header);
    env_close(&e);
}

struct srq_note {
    struct harness_event ev;
    NTSTATUS last;
};

static void srq_notify(void *ctx, NTSTATUS status)
{
    struct srq_note *n = ctx;
    n->last = status;
    harness_event_signal(&n->ev);
}

TEST(srq_threshold_notification)
{
    struct qp_env e;
    env_open(&e);
    struct srq_note note = {.last = -1};
    harness_event_init(&note.ev);
    NDK_SRQ *srq = make_srq(e.pd, 8, 1, 0, srq_notify, &note);
    NDK_FN_MODIFY_SRQ mod = srq->Dispatch->NdkModifySrq;
    for (uintptr_t k = 0; k < 3; k++)
        CHECK_STATUS(srq->Dispatch->NdkSrqReceive(srq, (void *)k, NULL, 0), STATUS_SUCCESS);
    /* Threshold not above the queued count: armed, nothing to report. */
    CHECK_STATUS(mod(srq, 0, 3, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&note.ev, 1, FIXTURE_QUIET_MS));
    /* Above the queued count: notifies once at once ([SRQ-4]). */
    CHECK_STATUS(mod(srq, 0, 5, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(harness_event_wait(&note.ev, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(note.last, STATUS_SUCCESS);
    CHECK(!harness_event_wait(&note.ev, 2, FIXTURE_QUIET_MS));
    /* Threshold 0 keeps the state: disarmed stays disarmed; a depth change alone neither. */
    CHECK_STATUS(mod(srq, 0, 0, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK_STATUS(mod(srq, 16, 0, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&note.ev, 2, FIXTURE_QUIET_MS));
    /* Re-armed above the count: once more. */
    CHECK_STATUS(mod(srq, 0, 4, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(harness_event_wait(&note.ev, 2, FIXTURE_WAIT_MS));
    CHECK_STATUS(note.last, STATUS_SUCCESS);
    CHECK(!harness_event_wait(&note.ev, 3, FIXTURE_QUIET_MS));
    fixture_close_wait(&srq->Header);
    harness_event_destroy(&note.ev);
    env_close(&e);
}

struct srq_rearm {
    NDK_SRQ *srq;
    struct harness_event ev;
    atomic_uint n;
    NTSTATUS modify_status;
};

static void srq_rearm_notify(void *ctx, NTSTATUS status)
{
    struct srq_rearm *r = ctx;
    if (atomic_fetch_add(&r->n, 1) == 0 && status == STATUS_SUCCESS) {
        /* The usual consumer pattern: re-arm from the notification. The queue is still below
         * the threshold, so the re-arm must notify again ([SRQ-4]). */
        r->modify_status = r->srq->Dispatch->NdkModifySrq(r->srq, 0, 5, ndk_request_never, NULL);
    }
    harness_event_signal(&r->ev);
}

TEST(srq_rearm_from_notification_notifies_again)
{
    struct qp_env e;
    env_open(&e);
    struct srq_rearm r = {.modify_status = -1};
    harness_event_init(&r.ev);
    r.srq = make_srq(e.pd, 8, 1, 0, srq_rearm_notify, &r);
    for (uintptr_t k = 0; k < 3; k++)
        CHECK_STATUS(r.srq->Dispatch->NdkSrqReceive(r.srq, (void *)k, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(r.srq->Dispatch->NdkModifySrq(r.srq, 0, 5, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    CHECK(harness_event_wait(&r.ev, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(r.modify_status, STATUS_SUCCESS);
    CHECK_MSG(harness_event_wait(&r.ev, 2, FIXTURE_WAIT_MS),
              "re-arming from inside the SRQ notification (3 queued < threshold 5) was lost");
    CHECK(!harness_event_wait(&r.ev, 3, FIXTURE_QUIET_MS));
    fixture_close_wait(&r.srq->Header);
    harness_event_destroy(&r.ev);
    env_close(&e);
}

TEST(srq_modify_depth)
{
    struct qp_env e;
    env_open(&e);
    NDK_SRQ *srq = make_srq(e.pd, 4, 1, 0, NULL, NULL);
    NDK_FN_MODIFY_SRQ mod = srq->Dispatch->NdkModifySrq;
    NDK_FN_SRQ_RECEIVE rx = srq->Dispatch->NdkSrqReceive;
    for (uintptr_t k = 0; k < 3; k++)
        CHECK_STATUS(rx(srq, (void *)k, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(mod(srq, 2, 0, ndk_request_never, NULL), STATUS_INVALID_PARAMETER); /* < queued */
    CHECK_STATUS(mod(srq, e.info.MaxSrqDepth + 1, 0, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    /* unchanged after the refusals: one more fits, then full at 4 */
    CHECK_STATUS(rx(srq, (void *)3, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)4, NULL, 0), STATUS_NO_MORE_ENTRIES);
    /* grow: room for 2 more */
    CHECK_STATUS(mod(srq, 6, 0, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)4, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)5, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)6, NULL, 0), STATUS_NO_MORE_ENTRIES);
    /* to exactly the queued count: fine, and full */
    CHECK_STATUS(mod(srq, 6, 0, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK_STATUS(rx(srq, (void *)6, NULL, 0), STATUS_NO_MORE_ENTRIES);
    conf_close(&srq->Header);
    env_close(&e);
}
