/* Memory regions, windows, tokens, privileged token and LAMs (docs/ndk-rules.md#mem, #ext;
 * decisions 5, 6, 7, 9f and "Access rights on NdkRegisterMr"). */
#include <stdlib.h>
#include <string.h>

#include "objects.h"

#define PAGE 4096u

struct mr_env {
    NDK_ADAPTER *a;
    NDK_ADAPTER_INFO info;
    NDK_PD *pd;
    unsigned char *buf; /* 8 pages, page-aligned */
};

static void env_open(struct mr_env *e)
{
    e->a = conf_open();
    conf_query(e->a, &e->info);
    e->pd = conf_pd(e->a);
    CHECK(posix_memalign((void **)&e->buf, PAGE, 8 * PAGE) == 0);
    memset(e->buf, 0, 8 * PAGE);
}

static void env_close(struct mr_env *e)
{
    conf_close(&e->pd->Header);
    ndk_close_adapter(e->a);
    free(e->buf);
}

static NDK_MR *make_mr(NDK_PD *pd, BOOLEAN fast)
{
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, fast, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    CHECK(mr != NULL);
    return mr;
}

static NTSTATUS reg(NDK_MR *mr, MDL *mdl, SIZE_T len, ULONG flags)
{
    return mr->Dispatch->NdkRegisterMr(mr, mdl, len, flags, ndk_request_never, NULL);
}

static NTSTATUS dereg(NDK_MR *mr)
{
    return mr->Dispatch->NdkDeregisterMr(mr, ndk_request_never, NULL);
}

static UINT32 ltok(NDK_MR *mr)
{
    return mr->Dispatch->NdkGetLocalTokenFromMr(mr);
}

static UINT32 rtok(NDK_MR *mr)
{
    return mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
}

TEST(mr_create_both_kinds)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    NDK_MR *fmr = make_mr(e.pd, TRUE);
    CHECK(mr != fmr);
    NDK_MR *x = NULL;
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMr(e.pd, FALSE, ndk_create_never, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMr((NDK_PD *)mr, FALSE, ndk_create_never, NULL, &x),
                 STATUS_INVALID_PARAMETER);
    CHECK(x == NULL);
    conf_close(&fmr->Header);
    conf_close(&mr->Header);
    env_close(&e);
}

TEST(mr_register_every_flag_combination)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    static const ULONG flags[] = {
        NDK_MR_FLAG_ALLOW_LOCAL_READ,
        NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
        NDK_MR_FLAG_ALLOW_REMOTE_READ,
        NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
        NDK_MR_FLAG_RDMA_READ_SINK,
        NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
        NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
        NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
            NDK_MR_FLAG_RDMA_READ_SINK,
        NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK,
    };
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf + 100, 3 * PAGE);
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        CHECK_STATUS(reg(mr, &mdl, 3 * PAGE, flags[k]), STATUS_SUCCESS);
        UINT32 l = ltok(mr), r = rtok(mr);
        CHECK_MSG(l != 0, "flags 0x%x: local token 0", flags[k]);
        CHECK_EQ_U64(l, r);
        CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    }
    conf_close(&mr->Header);
    env_close(&e);
}

TEST(mr_register_bad_flags)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf, PAGE);
    CHECK_STATUS(reg(mr, &mdl, PAGE, 0x4), STATUS_INVALID_PARAMETER); /* remote write w/o local */
    CHECK_STATUS(reg(mr, &mdl, PAGE, 0x6), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(reg(mr, &mdl, PAGE, 0x10), STATUS_INVALID_PARAMETER); /* unknown bit */
    CHECK_STATUS(reg(mr, &mdl, PAGE, 0x80000001u), STATUS_INVALID_PARAMETER);
    /* the refusals left it unregistered */
    CHECK_STATUS(dereg(mr), STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(reg(mr, &mdl, PAGE, 0x1), STATUS_SUCCESS);
    conf_close(&mr->Header); /* closing a registered MR deregisters it */
    env_close(&e);
}

TEST(mr_register_state_rules)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf, 2 * PAGE);
    CHECK_STATUS(dereg(mr), STATUS_INVALID_DEVICE_STATE); /* never registered */
    CHECK_STATUS(reg(mr, &mdl, 2 * PAGE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    UINT32 t1 = ltok(mr);
    CHECK_STATUS(reg(mr, &mdl, 2 * PAGE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE),
                 STATUS_INVALID_DEVICE_STATE); /* registered twice */
    CHECK_EQ_U64(ltok(mr), t1);                 /* unchanged by the refusal */
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_INVALID_DEVICE_STATE); /* deregistered twice */
    /* Decision 9f: re-registration allowed, with a fresh token. */
    CHECK_STATUS(reg(mr, &mdl, 2 * PAGE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    UINT32 t2 = ltok(mr);
    CHECK(t2 != 0);
    CHECK_MSG(t2 != t1, "re-registration reused token 0x%x", t1);
    CHECK_EQ_U64(rtok(mr), t2);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    conf_close(&mr->Header);
    env_close(&e);
}

TEST(mr_reregister_tokens_distinct)
{
    /* Decision 9f: every registration draws a random key, never the one it replaces, so the
     * token of the registration before never matches the current one; the keys do not count
     * up, and the index stays. */
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf, PAGE);
    UINT32 seen[127];
    unsigned counting = 0;
    for (unsigned k = 0; k < 127; k++) {
        CHECK_STATUS(reg(mr, &mdl, PAGE, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        seen[k] = rtok(mr);
        CHECK_EQ_U64(ltok(mr), seen[k]);
        if (k > 0) {
            CHECK_MSG(seen[k] != seen[k - 1], "registration %u reused the token before it", k);
            CHECK_EQ_U64(seen[k] >> 8, seen[0] >> 8);
            counting += (uint8_t)seen[k] == (uint8_t)(seen[k - 1] + 1) ||
                        (uint8_t)seen[k] == (uint8_t)(seen[k - 1] + 2);
        }
        CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    }
    CHECK_MSG(counting < 20, "%u of 126 keys follow the one before by 1 or 2", counting);
    conf_close(&mr->Header);
    env_close(&e);
}

/* Unpredictable tokens: two adapters (as two runs) hand out different tokens for the same registrations,
 * and tokens of one adapter are not consecutive. */
TEST(mr_tokens_differ_between_adapters_and_are_not_sequential)
{
    enum { N = 16 };
    struct mr_env e1, e2;
    env_open(&e1);
    env_open(&e2);
    NDK_MR *m1[N], *m2[N];
    UINT32 t1[N], t2[N];
    MDL mdl1, mdl2;
    MmInitializeMdl(&mdl1, e1.buf, PAGE);
    MmInitializeMdl(&mdl2, e2.buf, PAGE);
    unsigned same = 0, step = 0;
    for (int i = 0; i < N; i++) {
        m1[i] = make_mr(e1.pd, FALSE);
        m2[i] = make_mr(e2.pd, FALSE);
        CHECK_STATUS(reg(m1[i], &mdl1, PAGE, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        CHECK_STATUS(reg(m2[i], &mdl2, PAGE, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        t1[i] = rtok(m1[i]);
        t2[i] = rtok(m2[i]);
        same += t1[i] == t2[i];
        if (i > 0)
            step += (t1[i] >> 8) == (t1[i - 1] >> 8) + 1;
    }
    CHECK_MSG(same < 2, "%u of %d tokens agree between two adapters", same, N);
    CHECK_MSG(step < 4, "%u of %d token indices follow the one before", step, N - 1);
    for (int i = 0; i < N; i++) {
        CHECK_STATUS(dereg(m1[i]), STATUS_SUCCESS);
        CHECK_STATUS(dereg(m2[i]), STATUS_SUCCESS);
        conf_close(&m1[i]->Header);
        conf_close(&m2[i]->Header);
    }
    env_close(&e1);
    env_close(&e2);
}

TEST(mr_kind_is_fixed)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    NDK_MR *fmr = make_mr(e.pd, TRUE);
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf, PAGE);
    CHECK_STATUS(reg(fmr, &mdl, PAGE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 4, FALSE, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    conf_close(&fmr->Header);
    conf_close(&mr->Header);
    env_close(&e);
}

TEST(mr_register_length_and_mdl_rules)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    MDL m1, m2;
    /* Length 0; Length beyond a single MDL; NULL MDL. */
    MmInitializeMdl(&m1, e.buf + 10, PAGE);
    CHECK_STATUS(reg(mr, &m1, 0, 0), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(reg(mr, &m1, PAGE + 1, 0), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(reg(mr, NULL, PAGE, 0), STATUS_INVALID_PARAMETER);
    /* Non-contiguous chain: second MDL starts a page after the first one ends. */
    MmInitializeMdl(&m1, e.buf + 10, PAGE);
    MmInitializeMdl(&m2, e.buf + 10 + 2 * PAGE, PAGE);
    m1.Next = &m2;
    CHECK_STATUS(reg(mr, &m1, 2 * PAGE, 0), STATUS_INVALID_PARAMETER);
    /* ... but fine when Length stays inside the first MDL (decision 5: contiguous for Length). */
    CHECK_STATUS(reg(mr, &m1, PAGE, 0), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    /* Contiguous chain of two MDLs, unaligned boundary between them. */
    MmInitializeMdl(&m1, e.buf + 10, PAGE + 300);
    MmInitializeMdl(&m2, e.buf + 10 + PAGE + 300, 2 * PAGE);
    m1.Next = &m2;
    CHECK_STATUS(reg(mr, &m1, 3 * PAGE + 300, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    CHECK(ltok(mr) != 0);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    /* Shorter than the chain is fine; longer is not. */
    CHECK_STATUS(reg(mr, &m1, PAGE + 500, 0), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    CHECK_STATUS(reg(mr, &m1, 3 * PAGE + 301, 0), STATUS_INVALID_PARAMETER);
    conf_close(&mr->Header);
    env_close(&e);
}

TEST(mr_fast_register_initialize)
{
    struct mr_env e;
    env_open(&e);
    NDK_MR *fmr = make_mr(e.pd, TRUE);
    NDK_FN_INITIALIZE_FAST_REGISTER_MR init = fmr->Dispatch->NdkInitializeFastRegisterMr;
    CHECK_STATUS(init(fmr, 0, TRUE, ndk_request_never, NULL), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_STATUS(init(fmr, e.info.FRMRPageCount + 1, TRUE, ndk_request_never, NULL),
                 STATUS_IMPLEMENTATION_LIMIT);
    CHECK_STATUS(init(fmr, e.info.FRMRPageCount, TRUE, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(ltok(fmr) != 0);
    CHECK_EQ_U64(ltok(fmr), rtok(fmr));
    CHECK_STATUS(init(fmr, 4, TRUE, ndk_request_never, NULL), STATUS_INVALID_DEVICE_STATE);
    NDK_MR *f2 = make_mr(e.pd, TRUE);
    CHECK_STATUS(init(f2, 1, FALSE, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(ltok(f2) != ltok(fmr));
    conf_close(&f2->Header);
    conf_close(&fmr->Header);
    env_close(&e);
}

TEST(mw_tokens)
{
    struct mr_env e;
    env_open(&e);
    NDK_MW *w1 = NULL, *w2 = NULL;
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMw(e.pd, ndk_create_never, NULL, &w1), STATUS_SUCCESS);
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMw(e.pd, ndk_create_never, NULL, &w2), STATUS_SUCCESS);
    CHECK_STATUS(e.pd->Dispatch->NdkCreateMw(e.pd, ndk_create_never, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    UINT32 t1 = w1->Dispatch->NdkGetRemoteTokenFromMw(w1);
    UINT32 t2 = w2->Dispatch->NdkGetRemoteTokenFromMw(w2);
    CHECK(t1 != 0 && t2 != 0);
    CHECK(t1 != t2);
    NDK_MR *mr = make_mr(e.pd, FALSE);
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf, PAGE);
    CHECK_STATUS(reg(mr, &mdl, PAGE, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    CHECK(rtok(mr) != t1 && rtok(mr) != t2);
    conf_close(&mr->Header);
    conf_close(&w2->Header);
    conf_close(&w1->Header);
    env_close(&e);
}

TEST(pd_privileged_token)
{
    struct mr_env e;
    env_open(&e);
    NDK_PD *pd2 = conf_pd(e.a);
    UINT32 p1 = 0, p1b = 0, p2 = 0;
    e.pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(e.pd, &p1);
    e.pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(e.pd, &p1b);
    pd2->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd2, &p2);
    CHECK(p1 != 0 && p2 != 0);
    CHECK_EQ_U64(p1, p1b); /* stable per PD */
    CHECK(p1 != p2);       /* one per PD (decision 6) */
    NDK_MR *mr = make_mr(e.pd, FALSE);
    MDL mdl;
    MmInitializeMdl(&mdl, e.buf, PAGE);
    CHECK_STATUS(reg(mr, &mdl, PAGE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    NDK_MR *fmr = make_mr(e.pd, TRUE);
    CHECK_STATUS(fmr->Dispatch->NdkInitializeFastRegisterMr(fmr, 2, FALSE, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    CHECK(ltok(mr) != p1 && ltok(mr) != p2);
    CHECK(ltok(fmr) != p1 && ltok(fmr) != p2);
    UINT32 p1c = 0;
    e.pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(e.pd, &p1c);
    CHECK_EQ_U64(p1, p1c);
    conf_close(&fmr->Header);
    conf_close(&mr->Header);
    conf_close(&pd2->Header);
    env_close(&e);
}

/* ---- LAM (decision 6) ----------------------------------------------------------------- */

/* Entry k of a LAM's page array, which has AdapterPageCount entries though declared [1]. */
static int64_t lam_page(const NDK_LOGICAL_ADDRESS_MAPPING *lam, unsigned k)
{
    const unsigned char *base =
        (const unsigned char *)lam + offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray);
    NDK_LOGICAL_ADDRESS a;
    memcpy(&a, base + (size_t)k * sizeof a, sizeof a);
    return a.QuadPart;
}

TEST(lam_build_and_release)
{
    struct mr_env e;
    env_open(&e);
    NDK_FN_BUILD_LAM build = e.a->Dispatch->NdkBuildLAM;
    /* 2 pages + 200 bytes starting 300 bytes into a page: 300 + 8392 bytes = 3 pages. */
    unsigned char *start = e.buf + PAGE + 300;
    SIZE_T len = 2 * PAGE + 200;
    MDL mdl;
    MmInitializeMdl(&mdl, start, len);
    ULONG size = 0, fbo = 0xFFFF;
    CHECK_STATUS(build(e.a, &mdl, len, ndk_request_never, NULL, NULL, &size, &fbo),
                 STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(size, 0x10 + 8 * 3);
    union {
        NDK_LOGICAL_ADDRESS_MAPPING lam;
        unsigned char raw[0x10 + 8 * 8];
    } u;
    memset(&u, 0xEE, sizeof u);
    size = 0x10 + 8 * 3 - 1;
    CHECK_STATUS(build(e.a, &mdl, len, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(size, 0x28);
    size = 0x28;
    CHECK_STATUS(build(e.a, &mdl, len, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(size, 0x28);
    CHECK_EQ_U64(fbo, 300);
    CHECK_EQ_U64(u.lam.AdapterPageCount, 3);
    for (unsigned k = 0; k < 3; k++) {
        uint64_t page = (uint64_t)lam_page(&u.lam, k);
        CHECK_EQ_U64(page, (uintptr_t)(e.buf + PAGE + k * PAGE));
        CHECK_EQ_U64(page % PAGE, 0);
    }
    CHECK(u.lam.AdapterContext != NULL);
    e.a->Dispatch->NdkReleaseLAM(e.a, &u.lam);
    CHECK(u.lam.AdapterContext == NULL); /* decision 6 */
    env_close(&e);
}

TEST(lam_edge_cases)
{
    struct mr_env e;
    env_open(&e);
    NDK_FN_BUILD_LAM build = e.a->Dispatch->NdkBuildLAM;
    union {
        NDK_LOGICAL_ADDRESS_MAPPING lam;
        unsigned char raw[0x10 + 8 * 8];
    } u;
    ULONG size, fbo;
    MDL m1, m2;
    /* Page-aligned single page: 1 page, FBO 0. */
    MmInitializeMdl(&m1, e.buf, PAGE);
    size = sizeof u;
    CHECK_STATUS(build(e.a, &m1, PAGE, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(size, 0x18);
    CHECK_EQ_U64(fbo, 0);
    CHECK_EQ_U64(u.lam.AdapterPageCount, 1);
    CHECK_EQ_U64((uint64_t)lam_page(&u.lam, 0), (uintptr_t)e.buf);
    e.a->Dispatch->NdkReleaseLAM(e.a, &u.lam);
    /* Two bytes straddling a page boundary: 2 pages. */
    MmInitializeMdl(&m1, e.buf + PAGE - 1, 2);
    size = sizeof u;
    CHECK_STATUS(build(e.a, &m1, 2, ndk_request_never, NULL, &u.lam, &size, &fbo), STATUS_SUCCESS);
    CHECK_EQ_U64(u.lam.AdapterPageCount, 2);
    CHECK_EQ_U64(fbo, PAGE - 1);
    e.a->Dispatch->NdkReleaseLAM(e.a, &u.lam);
    /* Length 0, beyond the chain, non-contiguous chain: STATUS_INVALID_PARAMETER. */
    MmInitializeMdl(&m1, e.buf, PAGE);
    size = sizeof u;
    CHECK_STATUS(build(e.a, &m1, 0, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(build(e.a, &m1, PAGE + 1, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_INVALID_PARAMETER);
    MmInitializeMdl(&m2, e.buf + 3 * PAGE, PAGE);
    m1.Next = &m2;
    CHECK_STATUS(build(e.a, &m1, 2 * PAGE, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_INVALID_PARAMETER);
    /* A contiguous 2-MDL chain maps as one range. */
    MmInitializeMdl(&m1, e.buf + 100, PAGE);
    MmInitializeMdl(&m2, e.buf + 100 + PAGE, PAGE);
    m1.Next = &m2;
    size = sizeof u;
    CHECK_STATUS(build(e.a, &m1, 2 * PAGE, ndk_request_never, NULL, &u.lam, &size, &fbo),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(u.lam.AdapterPageCount, 3);
    CHECK_EQ_U64(fbo, 100);
    e.a->Dispatch->NdkReleaseLAM(e.a, &u.lam);
    env_close(&e);
}
