/* Fast registration (LAM pages and plain page-aligned memory, FBO, base VA, rights), memory
 * windows, NdkInvalidate and RDMA_READ_LOCAL_INVALIDATE, through the real requests, with the
 * exact inline and completion statuses. */
#include <stdlib.h>
#include <string.h>

#include "datapath.h"
#include "device/adapter_state.h"
#include "device/mr.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)
#define PG   4096u
#define REMOTE_RW (NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE)
#define FR_RW                                                                                      \
    (NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ)

union lam_buf {
    NDK_LOGICAL_ADDRESS_MAPPING lam;
    uint8_t raw[16 + 8 * 64];
};

static NDK_MR *fr_create(struct dp_side *s, ULONG pages, BOOLEAN remote)
{
    NDK_MR *mr;
    CHECK_EQ_U64(s->pd->Dispatch->NdkCreateMr(s->pd, TRUE, NULL, NULL, &mr), STATUS_SUCCESS);
    CHECK_EQ_U64(mr->Dispatch->NdkInitializeFastRegisterMr(mr, pages, remote, NULL, NULL),
                 STATUS_SUCCESS);
    return mr;
}

static void lam_of(struct dp_side *s, void *va, size_t len, union lam_buf *u, ULONG *fbo)
{
    ULONG sz = sizeof *u;
    MDL mdl;
    MmInitializeMdl(&mdl, va, len);
    CHECK_EQ_U64(s->a->Dispatch->NdkBuildLAM(s->a, &mdl, len, NULL, NULL, &u->lam, &sz, fbo),
                 STATUS_SUCCESS);
}

static void expect_one(struct dp_side *s, void *ctx, NDK_OPERATION_TYPE type, NTSTATUS st,
                       ULONG bytes, void *qpctx)
{
    NDK_RESULT_EX r;
    dp_expect(s->cq, &r, 1, 0);
    dp_check_result(&r, st, bytes, qpctx, ctx, type);
}

TEST(fast_register_from_a_lam_with_fbo_and_base_va)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    NDK_MR *fr = fr_create(&p.y, 8, TRUE);
    uint32_t before = fr->Dispatch->NdkGetRemoteTokenFromMr(fr);
    union lam_buf u;
    ULONG fbo = 0;
    lam_of(&p.y, p.y.buf + 100, 5 * PG, &u, &fbo);
    CHECK_EQ_U64(fbo, 100);
    CHECK_EQ_U64(u.lam.AdapterPageCount, 6);
    uint8_t *base = (uint8_t *)(uintptr_t)(0x7000000000ull + 100); /* peers' view: FBO + n*PAGE */
    CHECK_EQ_U64(p.y.qp->Dispatch->NdkFastRegister(p.y.qp, (void *)1, fr, 6,
                                                   u.lam.AdapterPageArray, fbo, 5 * PG, base,
                                                   FR_RW),
                 STATUS_SUCCESS);
    /* readable when the call returns, fresh, local = remote */
    uint32_t tok = fr->Dispatch->NdkGetRemoteTokenFromMr(fr);
    CHECK(tok != before);
    CHECK_EQ_U64(fr->Dispatch->NdkGetLocalTokenFromMr(fr), tok);
    expect_one(&p.y, (void *)1, NdkOperationTypeFastRegister, STATUS_SUCCESS, 0, YCTX);

    /* a peer writes and reads by base VA; the bytes land FBO into the first page */
    dp_fill(p.x.buf, 5 * PG, 1);
    NDK_SGE g[2] = {dp_sge(&p.x, 0, 7000), dp_sge(&p.x, 7000, 5 * PG - 7000)};
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)2, g, 2, (uint64_t)(uintptr_t)base,
                                            tok, 0),
                 STATUS_SUCCESS);
    NDK_SGE rg = dp_sge(&p.x, 64 * PG, 5 * PG);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)3, &rg, 1, (uint64_t)(uintptr_t)base,
                                           tok, 0),
                 STATUS_SUCCESS);
    expect_one(&p.x, (void *)2, NdkOperationTypeWrite, STATUS_SUCCESS, 5 * PG, XCTX);
    expect_one(&p.x, (void *)3, NdkOperationTypeRead, STATUS_SUCCESS, 5 * PG, XCTX);
    CHECK_MEM(p.y.buf + 100, p.x.buf, 5 * PG);
    CHECK_MEM(p.x.buf + 64 * PG, p.x.buf, 5 * PG);
    /* the local token serves local SGEs of the registered kind too */
    dp_post_recv(&p.x, (void *)4, 128 * PG, 64);
    NDK_SGE sg = {.VirtualAddress = base + 10, .Length = 64, .MemoryRegionToken = tok};
    CHECK_EQ_U64(p.y.qp->Dispatch->NdkSend(p.y.qp, (void *)5, &sg, 1, 0), STATUS_SUCCESS);
    expect_one(&p.x, (void *)4, NdkOperationTypeReceive, STATUS_SUCCESS, 64, XCTX);
    CHECK_MEM(p.x.buf + 128 * PG, p.y.buf + 110, 64);
    expect_one(&p.y, (void *)5, NdkOperationTypeSend, STATUS_SUCCESS, 64, YCTX);

    /* re-register: a fresh key each time; scattered plain page-aligned memory, reversed */
    NDK_LOGICAL_ADDRESS pages[4];
    for (int i = 0; i < 4; i++)
        pages[i].QuadPart = (int64_t)(uintptr_t)(p.y.buf + (size_t)(40 + 2 * (3 - i)) * PG);
    CHECK_EQ_U64(p.y.qp->Dispatch->NdkInvalidate(p.y.qp, (void *)6, &fr->Header, 0),
                 STATUS_SUCCESS);
    expect_one(&p.y, (void *)6, NdkOperationTypeInvalidate, STATUS_SUCCESS, 0, YCTX);
    base = (uint8_t *)(uintptr_t)0x9000000000ull;
    CHECK_EQ_U64(p.y.qp->Dispatch->NdkFastRegister(p.y.qp, (void *)7, fr, 4, pages, 0, 4 * PG,
                                                   base, FR_RW),
                 STATUS_SUCCESS);
    uint32_t tok2 = fr->Dispatch->NdkGetRemoteTokenFromMr(fr);
    CHECK(tok2 != tok);
    expect_one(&p.y, (void *)7, NdkOperationTypeFastRegister, STATUS_SUCCESS, 0, YCTX);
    dp_fill(p.x.buf, 4 * PG, 9);
    NDK_SGE wg = dp_sge(&p.x, 0, 4 * PG - 200);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)8, &wg, 1,
                                            (uint64_t)(uintptr_t)base + 100, tok2, 0),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)9, &rg, 1,
                                           (uint64_t)(uintptr_t)base + 100, tok2, 0),
                 STATUS_SUCCESS);
    expect_one(&p.x, (void *)8, NdkOperationTypeWrite, STATUS_SUCCESS, 4 * PG - 200, XCTX);
    /* the read's sink is 5 pages, the region 4: only what is there */
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 0);
    CHECK_EQ_U64(r.Status, STATUS_REMOTE_RESOURCES); /* 5 pages from base+100: beyond */
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    /* page i of the mapping is host page 40 + 2*(3-i) */
    for (int i = 0; i < 4; i++) {
        size_t lo = i == 0 ? 100 : 0, hi = i == 3 ? PG - 100 : PG;
        CHECK_MEM(p.y.buf + (size_t)(40 + 2 * (3 - i)) * PG + lo, p.x.buf + (size_t)i * PG + lo - 100,
                  hi - lo);
    }
    p.y.a->Dispatch->NdkReleaseLAM(p.y.a, &u.lam);
    dp_close_mr(fr);
    dp_pair_close(&p);
}

TEST(fast_register_inline_statuses)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    NDK_QP *q = p.y.qp;
    NDK_MR *local_only = fr_create(&p.y, 4, FALSE);
    NDK_MR *fr = fr_create(&p.y, 4, TRUE);
    NDK_MR *uninit;
    CHECK_EQ_U64(p.y.pd->Dispatch->NdkCreateMr(p.y.pd, TRUE, NULL, NULL, &uninit), STATUS_SUCCESS);
    CHECK_EQ_U64(uninit->Dispatch->NdkInitializeFastRegisterMr(uninit, 0, TRUE, NULL, NULL),
                 STATUS_IMPLEMENTATION_LIMIT);
    CHECK_EQ_U64(uninit->Dispatch->NdkInitializeFastRegisterMr(uninit, 4097, TRUE, NULL, NULL),
                 STATUS_IMPLEMENTATION_LIMIT);
    NDK_LOGICAL_ADDRESS pg[5];
    for (int i = 0; i < 5; i++)
        pg[i].QuadPart = (int64_t)(uintptr_t)(p.y.buf + (size_t)i * PG);
    void *base = p.y.buf;
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, local_only, 1, pg, 0, PG, base,
                                              NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 STATUS_ACCESS_VIOLATION);
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, local_only, 1, pg, 0, PG, base,
                                              NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_ACCESS_VIOLATION);
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 5, pg, 0, PG, base, 0),
                 STATUS_INVALID_PARAMETER); /* more pages than initialized */
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, pg, PG, 1, base, 0),
                 STATUS_INVALID_PARAMETER); /* FBO past the page */
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, pg, 0, PG + 1, base, 0),
                 STATUS_INVALID_PARAMETER); /* longer than the pages */
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, pg, 8, 16, base, 0),
                 STATUS_INVALID_PARAMETER); /* base VA not FBO + n*PAGE */
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, pg, 0, 0, base, 0),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, pg, 0, 16, NULL, 0),
                 STATUS_INVALID_PARAMETER); /* zero-based */
    NDK_LOGICAL_ADDRESS odd = {.QuadPart = (int64_t)(uintptr_t)(p.y.buf + 8)};
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, &odd, 0, 16, base, 0),
                 STATUS_INVALID_PARAMETER); /* pages are page-aligned */
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, fr, 1, pg, 0, 16, base,
                                              NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, uninit, 1, pg, 0, 16, base, 0),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, NULL, p.y.mr, 1, pg, 0, 16, base, 0),
                 STATUS_INVALID_PARAMETER); /* an NdkRegisterMr MR */
    CHECK_EQ_U64(q->Dispatch->NdkInvalidate(q, NULL, &p.y.mr->Header, 0),
                 STATUS_INVALID_PARAMETER); /* never an NdkRegisterMr MR */
    CHECK_EQ_U64(q->Dispatch->NdkInvalidate(q, NULL, &p.y.cq->Header, 0),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(q->Dispatch->NdkInvalidate(q, NULL, &fr->Header, NDK_OP_FLAG_INLINE),
                 STATUS_INVALID_PARAMETER);
    /* local rights only on a local-only MR: fine; invalidating an MR that was never valid
     * fails (decisions.md #7) and, as any error completion, ends the connection */
    CHECK_EQ_U64(q->Dispatch->NdkFastRegister(q, (void *)1, local_only, 1, pg, 0, PG, base,
                                              NDK_OP_FLAG_ALLOW_LOCAL_WRITE |
                                                  NDK_OP_FLAG_RDMA_READ_SINK),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(q->Dispatch->NdkInvalidate(q, (void *)2, &fr->Header, 0), STATUS_SUCCESS);
    NDK_RESULT_EX r[2];
    dp_expect(p.y.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 0, YCTX, (void *)1, NdkOperationTypeFastRegister);
    dp_check_result(&r[1], STATUS_INVALID_DEVICE_REQUEST, 0, YCTX, (void *)2,
                    NdkOperationTypeInvalidate);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    /* not connected */
    NDK_QP *idle;
    CHECK_EQ_U64(p.y.pd->Dispatch->NdkCreateQp(p.y.pd, p.y.cq, p.y.cq, NULL, 4, 4, 1, 1, 0, NULL,
                                               NULL, &idle),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(idle->Dispatch->NdkFastRegister(idle, NULL, fr, 1, pg, 0, 16, base, 0),
                 STATUS_CONNECTION_INVALID);
    CHECK_EQ_U64(idle->Dispatch->NdkInvalidate(idle, NULL, &fr->Header, 0),
                 STATUS_CONNECTION_INVALID);
    CHECK_EQ_U64(idle->Dispatch->NdkBind(idle, NULL, p.y.mr, NULL, p.y.buf, 16, 0),
                 STATUS_CONNECTION_INVALID);
    NDK_SGE g = dp_sge(&p.y, 0, 8);
    CHECK_EQ_U64(idle->Dispatch->NdkRead(idle, NULL, &g, 1, 1, 1, 0), STATUS_CONNECTION_INVALID);
    CHECK_EQ_U64(idle->Dispatch->NdkWrite(idle, NULL, &g, 1, 1, 1, 0), STATUS_CONNECTION_INVALID);
    dp_close_qp(idle);
    dp_close_mr(local_only);
    dp_close_mr(fr);
    dp_close_mr(uninit);
    dp_pair_close(&p);
}

static VOID on_closed(PVOID ctx)
{
    harness_event_signal(ctx);
}

TEST(memory_window_bind_invalidate_and_mr_close_pending)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    NDK_QP *q = p.y.qp;
    uint32_t rw_tok, ro_tok;
    NDK_MR *rw = dp_reg(&p.y, 0, 16 * PG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, &rw_tok);
    NDK_MR *ro = dp_reg(&p.y, 16 * PG, 16 * PG, 0, &ro_tok); /* no local write */
    NDK_MW *mw;
    CHECK_EQ_U64(p.y.pd->Dispatch->NdkCreateMw(p.y.pd, NULL, NULL, &mw), STATUS_SUCCESS);
    /* inline refusals: nothing queued */
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, NULL, rw, mw, p.y.buf + 16 * PG - 99, 100,
                                      NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 STATUS_ACCESS_VIOLATION); /* one byte past the MR */
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, NULL, rw, mw, p.y.buf - 1, 100,
                                      NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 STATUS_ACCESS_VIOLATION); /* one byte before it */
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, NULL, ro, mw, p.y.buf + 16 * PG, 100,
                                      NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_ACCESS_VIOLATION); /* remote write needs a locally writable MR */
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, NULL, rw, mw, p.y.buf, 100, NDK_OP_FLAG_ALLOW_LOCAL_WRITE),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, NULL, rw, mw, p.y.buf, 0, NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, NULL, rw, NULL, p.y.buf, 8, 0), STATUS_INVALID_PARAMETER);
    NDK_RESULT_EX r;
    CHECK_EQ_U64(dp_poll(p.y.cq, &r, 1, 20), 0);

    /* bind, remote write through the window, a fresh key per bind */
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, (void *)1, rw, mw, p.y.buf + PG, 2 * PG,
                                      NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                          NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_SUCCESS);
    uint32_t t1 = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    expect_one(&p.y, (void *)1, NdkOperationTypeBind, STATUS_SUCCESS, 0, YCTX);
    CHECK_EQ_U64(rw->Dispatch->NdkDeregisterMr(rw, NULL, NULL), STATUS_INVALID_DEVICE_STATE);
    dp_fill(p.x.buf, 2 * PG, 3);
    NDK_SGE g = dp_sge(&p.x, 0, 2 * PG);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)2, &g, 1,
                                            (uint64_t)(uintptr_t)(p.y.buf + PG), t1, 0),
                 STATUS_SUCCESS);
    NDK_SGE rg = dp_sge(&p.x, 8 * PG, 2 * PG);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)3, &rg, 1,
                                           (uint64_t)(uintptr_t)(p.y.buf + PG), t1, 0),
                 STATUS_SUCCESS);
    expect_one(&p.x, (void *)2, NdkOperationTypeWrite, STATUS_SUCCESS, 2 * PG, XCTX);
    expect_one(&p.x, (void *)3, NdkOperationTypeRead, STATUS_SUCCESS, 2 * PG, XCTX);
    CHECK_MEM(p.y.buf + PG, p.x.buf, 2 * PG);
    CHECK_MEM(p.x.buf + 8 * PG, p.x.buf, 2 * PG);
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, (void *)4, rw, mw, p.y.buf, PG,
                                      NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 STATUS_SUCCESS);
    uint32_t t2 = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    CHECK(t2 != t1);
    expect_one(&p.y, (void *)4, NdkOperationTypeBind, STATUS_SUCCESS, 0, YCTX);

    /* closing the MR pends while the window is bound; invalidating the window lets it finish */
    struct harness_event closed;
    harness_event_init(&closed);
    CHECK_EQ_U64(rw->Dispatch->NdkCloseMr(&rw->Header, on_closed, &closed), STATUS_PENDING);
    CHECK(!harness_event_wait(&closed, 1, 50));
    /* still readable through the window meanwhile */
    NDK_SGE sg = dp_sge(&p.x, 12 * PG, 64);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)5, &sg, 1,
                                           (uint64_t)(uintptr_t)p.y.buf, t2, 0),
                 STATUS_SUCCESS);
    expect_one(&p.x, (void *)5, NdkOperationTypeRead, STATUS_SUCCESS, 64, XCTX);
    CHECK_EQ_U64(q->Dispatch->NdkInvalidate(q, (void *)6, &mw->Header, 0), STATUS_SUCCESS);
    expect_one(&p.y, (void *)6, NdkOperationTypeInvalidate, STATUS_SUCCESS, 0, YCTX);
    CHECK(harness_event_wait(&closed, 1, DP_TIMEOUT_MS));
    harness_event_destroy(&closed);
    /* closing a bound window unbinds it and releases its MR */
    NDK_MW *mw2;
    CHECK_EQ_U64(p.y.pd->Dispatch->NdkCreateMw(p.y.pd, NULL, NULL, &mw2), STATUS_SUCCESS);
    CHECK_EQ_U64(q->Dispatch->NdkBind(q, (void *)8, ro, mw2, p.y.buf + 16 * PG, 64,
                                      NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 STATUS_SUCCESS);
    expect_one(&p.y, (void *)8, NdkOperationTypeBind, STATUS_SUCCESS, 0, YCTX);
    dp_close_mw(mw2);
    /* decisions.md #7: invalidating the unbound window again fails (NDSPI's status for an
     * unbound window), reported despite SILENT_SUCCESS; an error completion ends the
     * connection, as any other */
    CHECK_EQ_U64(q->Dispatch->NdkInvalidate(q, (void *)7, &mw->Header, NDK_OP_FLAG_SILENT_SUCCESS),
                 STATUS_SUCCESS);
    expect_one(&p.y, (void *)7, NdkOperationTypeInvalidate, STATUS_INVALID_DEVICE_REQUEST, 0, YCTX);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    dp_close_mw(mw);
    CHECK_EQ_U64(ro->Dispatch->NdkDeregisterMr(ro, NULL, NULL), STATUS_SUCCESS);
    dp_close_mr(ro);
    dp_pair_close(&p);
}

TEST(read_with_local_invalidate_invalidates_the_sink_token)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, 16 * PG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    dp_fill(p.y.buf, 16 * PG, 4);
    NDK_MR *fr = fr_create(&p.x, 2, FALSE);
    NDK_LOGICAL_ADDRESS pg[2] = {{.QuadPart = (int64_t)(uintptr_t)(p.x.buf + 4 * PG)},
                                 {.QuadPart = (int64_t)(uintptr_t)(p.x.buf + 5 * PG)}};
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkFastRegister(p.x.qp, (void *)1, fr, 2, pg, 0, 2 * PG,
                                                   p.x.buf + 4 * PG,
                                                   NDK_OP_FLAG_ALLOW_LOCAL_WRITE),
                 STATUS_SUCCESS);
    uint32_t ftok = fr->Dispatch->NdkGetLocalTokenFromMr(fr);
    NDK_SGE g = {.VirtualAddress = p.x.buf + 4 * PG, .Length = 2 * PG, .MemoryRegionToken = ftok};
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)2, &g, 1, (uint64_t)(uintptr_t)p.y.buf,
                                           ytok, NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE),
                 STATUS_SUCCESS);
    NDK_RESULT_EX r[2];
    dp_expect(p.x.cq, r, 2, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 0, XCTX, (void *)1, NdkOperationTypeFastRegister);
    dp_check_result(&r[1], STATUS_SUCCESS, 2 * PG, XCTX, (void *)2, NdkOperationTypeRead);
    CHECK_MEM(p.x.buf + 4 * PG, p.y.buf, 2 * PG);
    /* [FLAG-7]: honoured when the adapter advertises the flag, silently ignored otherwise */
    NDK_ADAPTER_INFO info;
    ULONG sz = sizeof info;
    CHECK_EQ_U64(p.x.a->Dispatch->NdkQueryAdapterInfo(p.x.a, &info, &sz), STATUS_SUCCESS);
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED);
    bool adv = (info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED) != 0;
    CHECK_EQ_U64(((struct sndk_mr *)fr)->state, adv ? SNDK_MR_FR_INVALID : SNDK_MR_FR_VALID);
    if (adv) {
        /* the first Read invalidated the region: register it again for the second */
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkFastRegister(p.x.qp, (void *)4, fr, 2, pg, 0, 2 * PG,
                                                       p.x.buf + 4 * PG,
                                                       NDK_OP_FLAG_ALLOW_LOCAL_WRITE),
                     STATUS_SUCCESS);
        dp_expect(p.x.cq, r, 1, 0);
        dp_check_result(&r[0], STATUS_SUCCESS, 0, XCTX, (void *)4, NdkOperationTypeFastRegister);
        g.MemoryRegionToken = fr->Dispatch->NdkGetLocalTokenFromMr(fr);
        CHECK(g.MemoryRegionToken != ftok); /* a fresh key */
    }
    /* forced on (a no-op when advertised by default) */
    ((struct sndk_adapter *)p.x.a)->info.AdapterFlags |=
        NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED;
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)3, &g, 1, (uint64_t)(uintptr_t)p.y.buf,
                                           ytok, NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE),
                 STATUS_SUCCESS);
    dp_expect(p.x.cq, r, 1, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 2 * PG, XCTX, (void *)3, NdkOperationTypeRead);
    CHECK_EQ_U64(((struct sndk_mr *)fr)->state, SNDK_MR_FR_INVALID);
    ((struct sndk_adapter *)p.x.a)->info.AdapterFlags = info.AdapterFlags;
    dp_close_mr(fr);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}
