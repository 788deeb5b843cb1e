/* A peer can never touch what it was not given. Two parts:
 * - QP to QP: Writes and Reads aimed at invalidated, deregistered, re-registered (stale key),
 *   other-PD, out-of-bounds-by-one, missing-right, privileged and window-outside tokens. Each is
 *   refused with the exact Terminate ([IW-TERM]), the initiator's request completes with the exact
 *   status, the connection aborts, and neither side's memory changes.
 * - raw peer: hand-built Write / Read Request / Read Response frames from the wire encoders,
 *   aimed outside a registered region; a canary over the whole buffer proves nothing changed. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datapath.h"

#define XCTX ((void *)0x1001)
#define KiB  1024u
#define REMOTE_RW (NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE)

enum target {
    T_INVALIDATED_FR,
    T_DEREGISTERED,
    T_STALE_KEY,
    T_OTHER_PD,
    T_PAST_END,
    T_BEFORE_START,
    T_NO_RIGHT,
    T_PRIVILEGED,
    T_WINDOW_OUTSIDE,
    T_WINDOW_ON_INVALIDATED_FR,
};

struct victim {
    NDK_MR *mr[2];
    NDK_MW *mw;
    NDK_PD *pd2;
    uint32_t token;
    uint64_t addr;
};

#define LEN 16u
#define REG_OFF (64 * KiB)
#define REG_LEN (64 * KiB)

/* Build y's side of case t for a Write (write=true) or a Read; token/addr name LEN bytes. */
static void make_target(struct dp_pair *p, enum target t, bool write, struct victim *v)
{
    struct dp_side *y = &p->y;
    memset(v, 0, sizeof *v);
    uint8_t *reg = y->buf + REG_OFF;
    v->addr = (uint64_t)(uintptr_t)reg + 100;
    uint32_t tok;
    switch (t) {
    case T_INVALIDATED_FR: {
        NDK_MR *fr;
        CHECK_EQ_U64(y->pd->Dispatch->NdkCreateMr(y->pd, TRUE, NULL, NULL, &fr), STATUS_SUCCESS);
        CHECK_EQ_U64(fr->Dispatch->NdkInitializeFastRegisterMr(fr, 1, TRUE, NULL, NULL),
                     STATUS_SUCCESS);
        NDK_LOGICAL_ADDRESS pg = {.QuadPart = (int64_t)(uintptr_t)reg};
        CHECK_EQ_U64(y->qp->Dispatch->NdkFastRegister(
                         y->qp, NULL, fr, 1, &pg, 0, 4096, reg,
                         NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ |
                             NDK_OP_FLAG_SILENT_SUCCESS),
                     STATUS_SUCCESS);
        v->token = fr->Dispatch->NdkGetRemoteTokenFromMr(fr);
        CHECK_EQ_U64(y->qp->Dispatch->NdkInvalidate(y->qp, NULL, &fr->Header,
                                                    NDK_OP_FLAG_SILENT_SUCCESS),
                     STATUS_SUCCESS);
        v->mr[0] = fr;
        break;
    }
    case T_DEREGISTERED:
        v->mr[0] = dp_reg(y, REG_OFF, REG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &v->token);
        CHECK_EQ_U64(v->mr[0]->Dispatch->NdkDeregisterMr(v->mr[0], NULL, NULL), STATUS_SUCCESS);
        break;
    case T_STALE_KEY: {
        v->mr[0] = dp_reg(y, REG_OFF, REG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &v->token);
        CHECK_EQ_U64(v->mr[0]->Dispatch->NdkDeregisterMr(v->mr[0], NULL, NULL), STATUS_SUCCESS);
        MDL mdl;
        MmInitializeMdl(&mdl, reg, REG_LEN);
        CHECK_EQ_U64(v->mr[0]->Dispatch->NdkRegisterMr(v->mr[0], &mdl, REG_LEN,
                                                       NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW,
                                                       NULL, NULL),
                     STATUS_SUCCESS);
        CHECK(v->mr[0]->Dispatch->NdkGetRemoteTokenFromMr(v->mr[0]) != v->token);
        break;
    }
    case T_OTHER_PD: {
        CHECK_EQ_U64(y->a->Dispatch->NdkCreatePd(y->a, NULL, NULL, &v->pd2), STATUS_SUCCESS);
        CHECK_EQ_U64(v->pd2->Dispatch->NdkCreateMr(v->pd2, FALSE, NULL, NULL, &v->mr[0]),
                     STATUS_SUCCESS);
        MDL mdl;
        MmInitializeMdl(&mdl, reg, REG_LEN);
        CHECK_EQ_U64(v->mr[0]->Dispatch->NdkRegisterMr(v->mr[0], &mdl, REG_LEN,
                                                       NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW,
                                                       NULL, NULL),
                     STATUS_SUCCESS);
        v->token = v->mr[0]->Dispatch->NdkGetRemoteTokenFromMr(v->mr[0]);
        break;
    }
    case T_PAST_END:
        v->mr[0] = dp_reg(y, REG_OFF, REG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &v->token);
        v->addr = (uint64_t)(uintptr_t)reg + REG_LEN - LEN + 1;
        break;
    case T_BEFORE_START:
        v->mr[0] = dp_reg(y, REG_OFF, REG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &v->token);
        v->addr = (uint64_t)(uintptr_t)reg - 1;
        break;
    case T_NO_RIGHT:
        v->mr[0] = dp_reg(y, REG_OFF, REG_LEN,
                          write ? NDK_MR_FLAG_ALLOW_REMOTE_READ
                                : (NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
                          &v->token);
        break;
    case T_PRIVILEGED:
        y->pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(y->pd, &v->token);
        break;
    case T_WINDOW_OUTSIDE:
        v->mr[0] = dp_reg(y, REG_OFF, REG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &tok);
        CHECK_EQ_U64(y->pd->Dispatch->NdkCreateMw(y->pd, NULL, NULL, &v->mw), STATUS_SUCCESS);
        CHECK_EQ_U64(y->qp->Dispatch->NdkBind(y->qp, NULL, v->mr[0], v->mw, reg, 4096,
                                              NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                                  NDK_OP_FLAG_ALLOW_REMOTE_WRITE |
                                                  NDK_OP_FLAG_SILENT_SUCCESS),
                     STATUS_SUCCESS);
        v->token = v->mw->Dispatch->NdkGetRemoteTokenFromMw(v->mw);
        v->addr = (uint64_t)(uintptr_t)reg + 4096 - LEN + 1; /* one byte past the window */
        break;
    case T_WINDOW_ON_INVALIDATED_FR: {
        /* A window over an FR MR whose base VA is no host address; the MR is then invalidated:
         * the window must not fall back to treating its addresses as host memory. */
        NDK_MR *fr;
        CHECK_EQ_U64(y->pd->Dispatch->NdkCreateMr(y->pd, TRUE, NULL, NULL, &fr), STATUS_SUCCESS);
        CHECK_EQ_U64(fr->Dispatch->NdkInitializeFastRegisterMr(fr, 1, TRUE, NULL, NULL),
                     STATUS_SUCCESS);
        NDK_LOGICAL_ADDRESS pg = {.QuadPart = (int64_t)(uintptr_t)reg};
        void *base = (void *)(uintptr_t)0x1000; /* page 1 of the address space: unmapped */
        CHECK_EQ_U64(y->qp->Dispatch->NdkFastRegister(
                         y->qp, NULL, fr, 1, &pg, 0, 4096, base,
                         NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ |
                             NDK_OP_FLAG_SILENT_SUCCESS),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(y->pd->Dispatch->NdkCreateMw(y->pd, NULL, NULL, &v->mw), STATUS_SUCCESS);
        CHECK_EQ_U64(y->qp->Dispatch->NdkBind(y->qp, NULL, fr, v->mw, base, 4096,
                                              NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                                  NDK_OP_FLAG_ALLOW_REMOTE_WRITE |
                                                  NDK_OP_FLAG_SILENT_SUCCESS),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(y->qp->Dispatch->NdkInvalidate(y->qp, NULL, &fr->Header,
                                                    NDK_OP_FLAG_SILENT_SUCCESS),
                     STATUS_SUCCESS);
        v->token = v->mw->Dispatch->NdkGetRemoteTokenFromMw(v->mw);
        v->addr = (uint64_t)(uintptr_t)base + 64;
        v->mr[0] = fr;
        break;
    }
    }
}

static void drop_target(struct victim *v)
{
    if (v->mw)
        dp_close_mw(v->mw);
    for (int i = 0; i < 2; i++)
        if (v->mr[i])
            dp_close_mr(v->mr[i]);
    if (v->pd2) {
        NTSTATUS st = v->pd2->Dispatch->NdkClosePd(&v->pd2->Header, NULL, NULL);
        CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    }
}

struct refusal {
    enum target t;
    NTSTATUS write_status, read_status;
    ULONG write_term, read_term; /* layer << 16 | etype << 8 | code */
};

static const struct refusal refusals[] = {
    {T_INVALIDATED_FR, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010100, 0x000100},
    {T_DEREGISTERED, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010100, 0x000100},
    {T_STALE_KEY, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010100, 0x000100},
    {T_OTHER_PD, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010102, 0x000103},
    {T_PAST_END, STATUS_REMOTE_RESOURCES, STATUS_REMOTE_RESOURCES, 0x010101, 0x000101},
    {T_BEFORE_START, STATUS_REMOTE_RESOURCES, STATUS_REMOTE_RESOURCES, 0x010101, 0x000101},
    {T_NO_RIGHT, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010100, 0x000102},
    {T_PRIVILEGED, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010100, 0x000100},
    {T_WINDOW_OUTSIDE, STATUS_REMOTE_RESOURCES, STATUS_REMOTE_RESOURCES, 0x010101, 0x000101},
    {T_WINDOW_ON_INVALIDATED_FR, STATUS_ACCESS_VIOLATION, STATUS_ACCESS_VIOLATION, 0x010100,
     0x000100},
};

static void one_refusal(const struct refusal *c, bool write)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 256 * KiB;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t gtok;
    NDK_MR *good = dp_reg(&p.y, 0, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &gtok);
    struct victim v;
    make_target(&p, c->t, write, &v);
    NDK_RESULT_EX r[2];
    CHECK_EQ_U64(dp_poll(p.y.cq, r, 1, 5), 0); /* the set-up requests were silent */
    dp_fill(p.y.buf, p.y.len, 77);
    dp_fill(p.x.buf, p.x.len, 78);
    uint8_t *ysnap = malloc(p.y.len), *xsnap = malloc(p.x.len);
    memcpy(ysnap, p.y.buf, p.y.len);
    memcpy(xsnap, p.x.buf, p.x.len);
    NDK_SGE g = dp_sge(&p.x, 1000, LEN);
    if (write) {
        /* A valid Read first, in the same segment: the refused Write is still outstanding
         * (behind it) when the peer's Terminate names it. */
        NDK_SGE rg = dp_sge(&p.x, 8192, 4096);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)1, &rg, 1,
                                               (uint64_t)(uintptr_t)p.y.buf, gtok,
                                               NDK_OP_FLAG_DEFER),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)2, &g, 1, v.addr, v.token, 0),
                     STATUS_SUCCESS);
        dp_expect(p.x.cq, r, 2, 20);
        dp_check_result(&r[0], STATUS_CANCELLED, 0, XCTX, (void *)1, NdkOperationTypeRead);
        dp_check_result(&r[1], c->write_status, 0, XCTX, (void *)2, NdkOperationTypeWrite);
    } else {
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)3, &g, 1, v.addr, v.token, 0),
                     STATUS_SUCCESS);
        dp_expect(p.x.cq, r, 1, 20);
        dp_check_result(&r[0], c->read_status, 0, XCTX, (void *)3, NdkOperationTypeRead);
    }
    ULONG term = write ? c->write_term : c->read_term;
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_MSG(p.y.link.abort_reason == (0x01000000u | term), "case %d %s: sent 0x%08x",
              (int)c->t, write ? "write" : "read", (unsigned)p.y.link.abort_reason);
    CHECK_EQ_U64(p.x.link.abort_reason, 0x02000000u | term);
    CHECK_EQ_U64(p.x.link.abort_status, STATUS_CONNECTION_ABORTED);
    CHECK_MSG(memcmp(p.y.buf, ysnap, p.y.len) == 0, "case %d: the target's memory changed",
              (int)c->t);
    CHECK_MSG(memcmp(p.x.buf, xsnap, p.x.len) == 0, "case %d: the sink changed", (int)c->t);
    free(ysnap);
    free(xsnap);
    drop_target(&v);
    dp_close_mr(good);
    dp_pair_close(&p);
}

TEST(refused_writes_exact_terminate_status_and_nothing_written)
{
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        one_refusal(&refusals[i], true);
}

TEST(refused_reads_exact_terminate_status_and_nothing_read)
{
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        one_refusal(&refusals[i], false);
}

/* ---------------------------------------------------------------- raw hostile peer */

struct host {
    NDK_ADAPTER *a;
    struct dp_side s;
    NDK_MR *reg;
    uint32_t tok;
    int raw;
    uint8_t *snap;
};

static void host_open(struct host *h)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 256 * KiB;
    h->a = dp_open_adapter();
    dp_side_init(&h->s, h->a, &o);
    dp_side_create_qp(&h->s, &o, (void *)0x3003);
    h->reg = dp_reg(&h->s, REG_OFF, 8 * KiB, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &h->tok);
    dp_fill(h->s.buf, h->s.len, 99); /* canary everywhere, region included */
    h->snap = malloc(h->s.len);
    memcpy(h->snap, h->s.buf, h->s.len);
    int fa, fb;
    dp_tcp_pair(&fa, &fb);
    dp_attach(&h->s, fa, true);
    h->raw = fb;
}

static void host_close(struct host *h)
{
    CHECK_MSG(memcmp(h->s.buf, h->snap, h->s.len) == 0, "memory outside what was given changed");
    free(h->snap);
    dp_close_mr(h->reg);
    dp_side_close(&h->s);
    SoftNdkCloseAdapter(h->a);
    close(h->raw);
}

/* Read the next FPDU from the raw side; it must be a Terminate with this layer/etype/code. */
static void expect_term(struct host *h, ULONG lec)
{
    uint8_t buf[256];
    CHECK(dp_read_exact(h->raw, buf, 2, DP_TIMEOUT_MS));
    size_t ul = sndk_get_be16(buf);
    size_t rest = ((ul + 2 + 3) & ~(size_t)3) + 4 - 2;
    CHECK(ul + 8 <= sizeof buf);
    CHECK(dp_read_exact(h->raw, buf + 2, rest, DP_TIMEOUT_MS));
    CHECK_MSG((buf[3] & 0x0f) == SNDK_OP_TERMINATE, "first FPDU is opcode %u, not a Terminate",
              buf[3] & 0x0f);
    uint32_t ctrl = sndk_get_be32(buf + 2 + 18);
    CHECK_MSG((ctrl >> 16) == ((lec >> 16) << 12 | (lec & 0xfff)),
              "Terminate 0x%08x, expected layer/etype/code 0x%06x", (unsigned)ctrl, (unsigned)lec);
    CHECK(dp_wait_closed(h->raw, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&h->s.link.aborted, 1, DP_TIMEOUT_MS));
}

static size_t tagged(uint8_t *out, unsigned op, bool last, uint32_t stag, uint64_t to,
                     const void *pay, size_t len)
{
    struct sndk_seg_hdr sh = {.opcode = (uint8_t)op, .last = last, .stag = stag, .to = to};
    return dp_build_fpdu(out, &sh, pay, len, true);
}

TEST(hostile_rdma_frames_outside_a_region_change_nothing)
{
    static uint8_t frame[70000], pay[65536];
    memset(pay, 0xEE, sizeof pay);
    struct {
        const char *name;
        uint64_t to_off; /* from the region's start (wraps for "before") */
        uint32_t len;
        int stag;        /* 0 region, 1 unknown, 2 privileged */
        ULONG lec;
    } w[] = {
        {"one byte before", (uint64_t)-1, 2, 0, 0x010101},
        {"one byte past", 8 * KiB - 1, 2, 0, 0x010101},
        {"far past", 1ull << 40, 64, 0, 0x010101},
        {"TO wraps", 0, 32, 3, 0x010103},
        {"unknown STag", 0, 64, 1, 0x010100},
        {"privileged token", 0, 64, 2, 0x010100},
        {"larger than the region", 0, 60000, 0, 0x010101},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        struct host h;
        host_open(&h);
        uint64_t base = (uint64_t)(uintptr_t)(h.s.buf + REG_OFF);
        uint32_t priv = 0;
        h.s.pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(h.s.pd, &priv);
        uint32_t stag = w[i].stag == 1 ? (h.tok ^ 0x00ffff00u) : w[i].stag == 2 ? priv : h.tok;
        uint64_t to = w[i].stag == 3 ? UINT64_MAX - 15 : base + w[i].to_off;
        size_t n = tagged(frame, SNDK_OP_WRITE, true, stag, to, pay, w[i].len);
        dp_write_all(h.raw, frame, n);
        expect_term(&h, w[i].lec);
        host_close(&h);
    }

    /* A two-segment Write: the first segment is inside and lands, the second runs out. */
    {
        struct host h;
        host_open(&h);
        uint64_t base = (uint64_t)(uintptr_t)(h.s.buf + REG_OFF);
        size_t n = tagged(frame, SNDK_OP_WRITE, false, h.tok, base, pay, 4096);
        dp_write_all(h.raw, frame, n);
        n = tagged(frame, SNDK_OP_WRITE, true, h.tok, base + 4096, pay, 4097);
        dp_write_all(h.raw, frame, n);
        expect_term(&h, 0x010101);
        memset(h.snap + REG_OFF, 0xEE, 4096); /* what was given, and only that */
        host_close(&h);
    }

    /* A Read Request for one byte past the region: a Terminate, never a Read Response. */
    {
        struct host h;
        host_open(&h);
        struct sndk_read_req rr = {.sink_stag = 0x1234, .sink_to = 0, .size = 11,
                                   .src_stag = h.tok,
                                   .src_to = (uint64_t)(uintptr_t)(h.s.buf + REG_OFF) + 8 * KiB - 10};
        struct sndk_fpdu f;
        struct iovec iov[3];
        int k = sndk_fpdu_read_req(&f, 1, &rr, true, iov, 3);
        CHECK(k > 0);
        for (int j = 0; j < k; j++)
            dp_write_all(h.raw, iov[j].iov_base, iov[j].iov_len);
        expect_term(&h, 0x000101);
        host_close(&h);
    }

    /* A Read Response nobody asked for. */
    {
        struct host h;
        host_open(&h);
        size_t n = tagged(frame, SNDK_OP_READ_RESP, true, 0xa5u | 1u << 8, 0, pay, 64);
        dp_write_all(h.raw, frame, n);
        expect_term(&h, 0x010100);
        host_close(&h);
    }

    /* And a well-formed Read Request is answered with exactly the region's bytes. */
    {
        struct host h;
        host_open(&h);
        struct sndk_read_req rr = {.sink_stag = 0x1234, .sink_to = 0x5000, .size = 100,
                                   .src_stag = h.tok,
                                   .src_to = (uint64_t)(uintptr_t)(h.s.buf + REG_OFF) + 8 * KiB - 100};
        struct sndk_fpdu f;
        struct iovec iov[3];
        int k = sndk_fpdu_read_req(&f, 1, &rr, true, iov, 3);
        for (int j = 0; j < k; j++)
            dp_write_all(h.raw, iov[j].iov_base, iov[j].iov_len);
        uint8_t got[2 + 14 + 100 + 4];
        CHECK(dp_read_exact(h.raw, got, sizeof got, DP_TIMEOUT_MS));
        CHECK_EQ_U64(got[3] & 0x0f, SNDK_OP_READ_RESP);
        CHECK_EQ_U64(sndk_get_be32(got + 4), 0x1234);
        CHECK_EQ_U64(sndk_get_be64(got + 8), 0x5000);
        CHECK_MEM(got + 16, h.s.buf + REG_OFF + 8 * KiB - 100, 100);
        host_close(&h);
    }
}
