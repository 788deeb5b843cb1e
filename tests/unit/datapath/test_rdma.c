/* RDMA Write and Read between two attached QPs: data integrity at random offsets, sizes
 * (0 B to 16 MiB) and SGE splits, zero-length requests, ORD stall, IRD overflow, read fence. */
#include <stdlib.h>
#include <string.h>

#include "datapath.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)
#define MiB  (1024u * 1024u)

#define REMOTE_RW (NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE)

/* Cut [off, off+len) of s->buf into up to max SGEs at random points. */
static ULONG split_sges(struct dp_side *s, size_t off, size_t len, NDK_SGE *g, ULONG max)
{
    ULONG n = len ? 1 + (ULONG)rand() % max : 0;
    if (n > len)
        n = (ULONG)len;
    size_t done = 0;
    for (ULONG i = 0; i < n; i++) {
        size_t left = len - done;
        size_t take = i + 1 == n ? left : 1 + (size_t)rand() % (left - (n - 1 - i));
        g[i] = dp_sge(s, off + done, take);
        done += take;
    }
    return n;
}

static void pair_big(struct dp_pair *p, struct dp_opts *o, size_t buf)
{
    dp_opts_default(o);
    o->buf_len = buf;
    dp_pair_open(p, o);
}

TEST_T(rdma_write_then_read_back_random_sizes_offsets_and_splits, 120)
{
    struct dp_opts o;
    struct dp_pair p;
    pair_big(&p, &o, 40 * MiB);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    dp_fill(p.x.buf, 20 * MiB, 11);
    dp_fill(p.y.buf, p.y.len, 12);
    uint8_t *shadow = malloc(p.y.len); /* what y's memory must hold */
    CHECK(shadow != NULL);
    memcpy(shadow, p.y.buf, p.y.len);
    srand(2026);
    static const size_t fixed[] = {0, 1, 7, 4096, 65480, 65481, 1 * MiB, 16 * MiB};
    for (int it = 0; it < 24; it++) {
        size_t len = it < 8 ? fixed[it] : (size_t)rand() % (it % 3 == 0 ? 2 * MiB : 70000);
        size_t src = (size_t)rand() % (20 * MiB - len + 1);
        size_t dst = 1 + (size_t)rand() % (p.y.len - len - 1);
        size_t back = 20 * MiB + (size_t)rand() % (20 * MiB - len + 1);
        NDK_SGE g[8];
        ULONG n = split_sges(&p.x, src, len, g, 8);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, g, n,
                                                (uint64_t)(uintptr_t)(p.y.buf + dst), ytok, 0),
                     STATUS_SUCCESS);
        memcpy(shadow + dst, p.x.buf + src, len);
        n = split_sges(&p.x, back, len, g, 8);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)2, g, n,
                                               (uint64_t)(uintptr_t)(p.y.buf + dst), ytok, 0),
                     STATUS_SUCCESS);
        NDK_RESULT_EX r[2];
        dp_expect(p.x.cq, r, 2, 0);
        dp_check_result(&r[0], STATUS_SUCCESS, (ULONG)len, XCTX, (void *)1, NdkOperationTypeWrite);
        dp_check_result(&r[1], STATUS_SUCCESS, (ULONG)len, XCTX, (void *)2, NdkOperationTypeRead);
        CHECK_MSG(memcmp(p.x.buf + back, p.x.buf + src, len) == 0, "read back differs (len %zu)",
                  len);
        /* the whole target, canaries around the written range included */
        CHECK_MSG(memcmp(p.y.buf, shadow, p.y.len) == 0, "target memory differs (len %zu)", len);
    }
    NDK_RESULT_EX extra;
    CHECK_EQ_U64(dp_poll(p.y.cq, &extra, 1, 20), 0); /* no completion at the target */
    free(shadow);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(rdma_zero_length_read_and_write)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    NDK_SGE g = dp_sge(&p.x, 0, 0);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, NULL, 0,
                                            (uint64_t)(uintptr_t)p.y.buf, ytok, 0),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)2, NULL, 0,
                                           (uint64_t)(uintptr_t)p.y.buf, ytok, 0),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)3, &g, 1,
                                            (uint64_t)(uintptr_t)p.y.buf + 4096, ytok, 0),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)4, &g, 1,
                                           (uint64_t)(uintptr_t)p.y.buf + 4096, ytok, 0),
                 STATUS_SUCCESS);
    NDK_RESULT_EX r[4];
    dp_expect(p.x.cq, r, 4, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 0, XCTX, (void *)1, NdkOperationTypeWrite);
    dp_check_result(&r[1], STATUS_SUCCESS, 0, XCTX, (void *)2, NdkOperationTypeRead);
    dp_check_result(&r[2], STATUS_SUCCESS, 0, XCTX, (void *)3, NdkOperationTypeWrite);
    dp_check_result(&r[3], STATUS_SUCCESS, 0, XCTX, (void *)4, NdkOperationTypeRead);
    /* the connection is still fine */
    dp_post_recv(&p.y, (void *)5, 0, 8);
    dp_post_send(&p.x, (void *)6, 0, 8, 0);
    dp_expect(p.y.cq, r, 1, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 8, YCTX, (void *)5, NdkOperationTypeReceive);
    dp_expect(p.x.cq, r, 1, 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(rdma_write_inline_and_silent)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, 65536, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    uint8_t stack[100];
    dp_fill(stack, sizeof stack, 3);
    NDK_SGE g = {.VirtualAddress = stack, .Length = sizeof stack, .MemoryRegionToken = 0};
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, &g, 1,
                                            (uint64_t)(uintptr_t)p.y.buf + 100, ytok,
                                            NDK_OP_FLAG_INLINE | NDK_OP_FLAG_SILENT_SUCCESS),
                 STATUS_SUCCESS);
    uint8_t copy[100];
    memcpy(copy, stack, sizeof stack);
    memset(stack, 0, sizeof stack); /* consumed when the call returned */
    g.Length = o.inline_size + 1;
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, NULL, &g, 1, (uint64_t)(uintptr_t)p.y.buf,
                                            ytok, NDK_OP_FLAG_INLINE),
                 STATUS_DATA_OVERRUN);
    NDK_SGE rg = dp_sge(&p.x, 4096, 100);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)2, &rg, 1,
                                           (uint64_t)(uintptr_t)p.y.buf + 100, ytok, 0),
                 STATUS_SUCCESS);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20); /* the silent Write reports nothing */
    dp_check_result(&r, STATUS_SUCCESS, 100, XCTX, (void *)2, NdkOperationTypeRead);
    CHECK_MEM(p.x.buf + 4096, copy, 100);
    CHECK_MEM(p.y.buf + 100, copy, 100);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(rdma_read_stalls_at_ord_and_never_exceeds_the_peer_ird)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 8 * MiB;
    o.ord = 2;
    o.ird_y = 2; /* one Read more than 2 outstanding would be Terminated by y */
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    dp_fill(p.y.buf, p.y.len, 5);
    for (int i = 0; i < 8; i++) {
        NDK_SGE g = dp_sge(&p.x, (size_t)i * 512 * 1024, 512 * 1024);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)(uintptr_t)(i + 1), &g, 1,
                                               (uint64_t)(uintptr_t)p.y.buf + (size_t)i * 1000,
                                               ytok, i < 7 ? NDK_OP_FLAG_DEFER : 0),
                     STATUS_SUCCESS);
    }
    /* a Send behind them waits its turn too (completions in posting order) */
    dp_post_recv(&p.y, (void *)100, 0, 8);
    dp_post_send(&p.x, (void *)9, 0, 8, 0);
    NDK_RESULT_EX r[9];
    dp_expect(p.x.cq, r, 9, 20);
    for (int i = 0; i < 8; i++) {
        dp_check_result(&r[i], STATUS_SUCCESS, 512 * 1024, XCTX, (void *)(uintptr_t)(i + 1),
                        NdkOperationTypeRead);
        CHECK_MEM(p.x.buf + (size_t)i * 512 * 1024, p.y.buf + (size_t)i * 1000, 512 * 1024);
    }
    dp_check_result(&r[8], STATUS_SUCCESS, 8, XCTX, (void *)9, NdkOperationTypeSend);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(rdma_read_beyond_ird_is_terminated)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 8 * MiB;
    o.ord = 4;   /* x believes it may have 4 outstanding ... */
    o.ird_y = 2; /* ... y queues 2 */
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    for (int i = 0; i < 4; i++) {
        NDK_SGE g = dp_sge(&p.x, (size_t)i * MiB, MiB);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)(uintptr_t)(i + 1), &g, 1,
                                               (uint64_t)(uintptr_t)p.y.buf, ytok,
                                               i < 3 ? NDK_OP_FLAG_DEFER : 0),
                     STATUS_SUCCESS);
    }
    NDK_RESULT_EX r[4];
    dp_expect(p.x.cq, r, 4, 20);
    dp_check_result(&r[0], STATUS_CANCELLED, 0, XCTX, (void *)1, NdkOperationTypeRead);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, XCTX, (void *)2, NdkOperationTypeRead);
    dp_check_result(&r[2], STATUS_REMOTE_RESOURCES, 0, XCTX, (void *)3, NdkOperationTypeRead);
    dp_check_result(&r[3], STATUS_CANCELLED, 0, XCTX, (void *)4, NdkOperationTypeRead);
    CHECK(harness_event_wait(&p.y.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.y.link.abort_reason, 0x01000207u); /* sent: RDMAP / remote op / 0x07 */
    CHECK_EQ_U64(p.x.link.abort_reason, 0x02000207u);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST_T(rdma_read_fence_holds_a_write_until_the_read_has_its_data, 60)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = 8 * MiB;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    const size_t len = 1 * MiB;
    uint8_t *old = malloc(len);
    for (int round = 0; round < 3; round++) {
        /* fresh memory each round: nothing of an earlier round's transfers is touched */
        uint8_t *ysrc = p.y.buf + (size_t)round * 2 * MiB;
        size_t xw = (size_t)round * 2 * MiB, xr = xw + MiB;
        dp_fill(ysrc, len, 40 + (uint32_t)round);      /* old */
        dp_fill(p.x.buf + xw, len, 50 + (uint32_t)round); /* new */
        memcpy(old, ysrc, len);
        NDK_SGE rg = dp_sge(&p.x, xr, len);
        NDK_SGE wg = dp_sge(&p.x, xw, len);
        /* Read and Write leave together; without the fence y would place the Write before it
         * cuts the Read Response. */
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)1, &rg, 1,
                                               (uint64_t)(uintptr_t)ysrc, ytok, NDK_OP_FLAG_DEFER),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)2, &wg, 1,
                                                (uint64_t)(uintptr_t)ysrc, ytok,
                                                NDK_OP_FLAG_READ_FENCE),
                     STATUS_SUCCESS);
        NDK_RESULT_EX r[2];
        dp_expect(p.x.cq, r, 2, 0);
        dp_check_result(&r[0], STATUS_SUCCESS, (ULONG)len, XCTX, (void *)1, NdkOperationTypeRead);
        dp_check_result(&r[1], STATUS_SUCCESS, (ULONG)len, XCTX, (void *)2, NdkOperationTypeWrite);
        CHECK_MSG(memcmp(p.x.buf + xr, old, len) == 0, "the Read saw the fenced Write");
        /* and the Write did land: read it back */
        NDK_SGE bg = dp_sge(&p.x, 7 * MiB, len);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)3, &bg, 1,
                                               (uint64_t)(uintptr_t)ysrc, ytok, 0),
                     STATUS_SUCCESS);
        dp_expect(p.x.cq, r, 1, 0);
        CHECK_MEM(p.x.buf + 7 * MiB, p.x.buf + xw, len);
    }
    free(old);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(rdma_read_with_ord_zero_is_refused_inline)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    memset(&p, 0, sizeof p);
    p.ax = p.ay = dp_open_adapter();
    dp_side_init(&p.x, p.ax, &o);
    dp_side_init(&p.y, p.ay, &o);
    dp_side_create_qp(&p.x, &o, XCTX);
    dp_side_create_qp(&p.y, &o, YCTX);
    int a, b;
    dp_tcp_pair(&a, &b);
    dp_attach_rd(&p.x, a, true, 0, 0); /* a connection negotiated with ORD 0 */
    dp_attach_rd(&p.y, b, true, 0, 0);
    NDK_SGE g = dp_sge(&p.x, 0, 8);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, NULL, &g, 1, 1, 1, 0),
                 STATUS_INVALID_DEVICE_REQUEST);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, NULL, &g, 1, 1, 1, NDK_OP_FLAG_INLINE),
                 STATUS_INVALID_PARAMETER);
    /* the QP stays usable */
    dp_post_recv(&p.y, (void *)1, 0, 8);
    dp_post_send(&p.x, (void *)2, 0, 8, 0);
    NDK_RESULT_EX r;
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 8, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_pair_close(&p);
}
