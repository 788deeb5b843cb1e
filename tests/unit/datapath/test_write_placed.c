/* WriteCompletion placed (docs/qp.md, "Write completion"): an RDMA Write completes when the
 * peer has placed it, learnt from a zero-length RDMA Read cut behind it (RFC 5040 ordering: a
 * Read Response follows the placement of everything before its request). The wire is checked
 * against a raw peer; placement, batching, ORD sharing and errors against a softndk peer. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datapath.h"
#include "iwarp/wire.h"

#define XCTX      ((void *)0x1001)
#define KiB       1024u
#define REMOTE_RW (NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE)

static void placed_pair(struct dp_pair *p, struct dp_opts *o, const char *mode)
{
    setenv("SOFTNDK_WRITE_COMPLETION", mode, 1);
    dp_opts_default(o);
    o->buf_len = 1024 * KiB;
    o->two_adapters = true;
    dp_pair_open(p, o);
}

/* Read one whole FPDU (CRC on) from a raw socket into buf; returns its length. */
static size_t read_fpdu(int fd, uint8_t *buf, size_t cap)
{
    CHECK(dp_read_exact(fd, buf, 2, DP_TIMEOUT_MS));
    size_t ulpdu = sndk_get_be16(buf);
    size_t total = 2 + ulpdu;
    total += (4 - total % 4) % 4;
    total += 4;
    CHECK(total <= cap);
    CHECK(dp_read_exact(fd, buf + 2, total - 2, DP_TIMEOUT_MS));
    return total;
}

TEST(write_placed_the_fence_read_on_the_wire_and_the_write_waits_for_its_response)
{
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side s;
    dp_side_init(&s, a, &o);
    dp_side_create_qp(&s, &o, XCTX);
    int fa, raw;
    dp_tcp_pair(&fa, &raw);
    dp_attach(&s, fa, true);
    NDK_SGE g = dp_sge(&s, 0, 10);
    CHECK_EQ_U64(s.qp->Dispatch->NdkWrite(s.qp, (void *)7, &g, 1, 0x1000, 0x1234, 0),
                 STATUS_SUCCESS);
    uint8_t f[256];
    /* 1: the Write itself (tagged, last, to the peer's STag and TO) */
    read_fpdu(raw, f, sizeof f);
    CHECK_EQ_U64(f[2] & 0xc0, 0xc0); /* DDP T and L */
    CHECK_EQ_U64(f[3] & 0x0f, SNDK_OP_WRITE);
    CHECK_EQ_U64(sndk_get_be32(f + 4), 0x1234);
    CHECK_EQ_U64(sndk_get_be64(f + 8), 0x1000);
    /* 2: right behind it, the fence: a zero-length Read Request, QN 1, MSN 1, MO 0 */
    read_fpdu(raw, f, sizeof f);
    CHECK_EQ_U64(f[2] & 0xc0, 0x40); /* untagged, last */
    CHECK_EQ_U64(f[3] & 0x0f, SNDK_OP_READ_REQ);
    CHECK_EQ_U64(sndk_get_be32(f + 8), 1);  /* QN */
    CHECK_EQ_U64(sndk_get_be32(f + 12), 1); /* MSN */
    CHECK_EQ_U64(sndk_get_be32(f + 16), 0); /* MO */
    struct sndk_read_req rr;
    sndk_read_req_get(&rr, (const struct sndk_rdmap_read_req *)(f + 20));
    CHECK_EQ_U64(rr.size, 0);
    CHECK_EQ_U64(rr.sink_to, 0);
    /* not complete before the response */
    NDK_RESULT_EX r;
    CHECK_EQ_U64(dp_poll(s.cq, &r, 1, 100), 0);
    CHECK_EQ_U64(dp_counters(a).FenceReads, 1);
    /* the zero-length Read Response to its sink STag completes the Write */
    struct sndk_seg_hdr h = {
        .opcode = SNDK_OP_READ_RESP, .last = true, .stag = rr.sink_stag, .to = 0};
    size_t n = dp_build_fpdu(f, &h, NULL, 0, true);
    dp_write_all(raw, f, n);
    dp_expect(s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 10, XCTX, (void *)7, NdkOperationTypeWrite);
    CHECK_EQ_U64(harness_event_count(&s.link.aborted), 0);
    dp_side_close(&s);
    SoftNdkCloseAdapter(a);
    close(raw);
}

TEST(write_placed_a_fence_response_with_bytes_is_a_protocol_error)
{
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side s;
    dp_side_init(&s, a, &o);
    dp_side_create_qp(&s, &o, XCTX);
    int fa, raw;
    dp_tcp_pair(&fa, &raw);
    dp_attach(&s, fa, true);
    NDK_SGE g = dp_sge(&s, 0, 10);
    CHECK_EQ_U64(s.qp->Dispatch->NdkWrite(s.qp, (void *)7, &g, 1, 0x1000, 0x1234, 0),
                 STATUS_SUCCESS);
    uint8_t f[256];
    read_fpdu(raw, f, sizeof f);
    read_fpdu(raw, f, sizeof f);
    struct sndk_read_req rr;
    sndk_read_req_get(&rr, (const struct sndk_rdmap_read_req *)(f + 20));
    uint8_t pay[8] = {0};
    struct sndk_seg_hdr h = {
        .opcode = SNDK_OP_READ_RESP, .last = true, .stag = rr.sink_stag, .to = 0};
    size_t n = dp_build_fpdu(f, &h, pay, sizeof pay, true);
    dp_write_all(raw, f, n);
    CHECK(harness_event_wait(&s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(s.link.abort_reason, 0x01000000u | 0x010101u); /* DDP / tagged / bounds */
    NDK_RESULT_EX r;
    dp_expect(s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, XCTX, (void *)7, NdkOperationTypeWrite);
    dp_side_close(&s);
    SoftNdkCloseAdapter(a);
    close(raw);
}

TEST_T(write_placed_the_target_holds_the_data_at_every_completion, 120)
{
    struct dp_opts o;
    struct dp_pair p;
    setenv("SOFTNDK_PROFILE", "roce", 1); /* the profile's Write completion: placed */
    dp_opts_default(&o);
    o.buf_len = 1024 * KiB;
    o.two_adapters = true;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    srand(17);
    for (int it = 0; it < 300; it++) {
        size_t len = 1 + (size_t)rand() % (it % 10 == 0 ? 512 * KiB : 8 * KiB);
        size_t dst = (size_t)rand() % (p.y.len - len);
        dp_fill(p.x.buf, len, (uint32_t)it);
        NDK_SGE g = dp_sge(&p.x, 0, len);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)(uintptr_t)(it + 1), &g, 1,
                                                (uint64_t)(uintptr_t)(p.y.buf + dst), ytok, 0),
                     STATUS_SUCCESS);
        NDK_RESULT_EX r;
        dp_expect(p.x.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, (ULONG)len, XCTX, (void *)(uintptr_t)(it + 1),
                        NdkOperationTypeWrite);
        /* at the completion, before anything else: the target is already placed */
        CHECK_MSG(memcmp(p.y.buf + dst, p.x.buf, len) == 0,
                  "iteration %d: %zu bytes at %zu not placed at the Write's completion", it, len,
                  dst);
    }
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 300);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(write_placed_one_fence_covers_a_batch_and_completions_stay_in_order)
{
    struct dp_opts o;
    struct dp_pair p;
    placed_pair(&p, &o, "placed");
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    /* five Writes posted deferred, then a Send: one fence, before the Send */
    for (int i = 0; i < 5; i++) {
        NDK_SGE g = dp_sge(&p.x, (size_t)i * 100, 100);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)(uintptr_t)(i + 1), &g, 1,
                                                (uint64_t)(uintptr_t)(p.y.buf + i * 100), ytok,
                                                NDK_OP_FLAG_DEFER),
                     STATUS_SUCCESS);
    }
    dp_post_recv(&p.y, (void *)9, 4096, 100);
    dp_post_send(&p.x, (void *)6, 0, 10, 0);
    NDK_RESULT_EX r[6];
    dp_expect(p.x.cq, r, 6, 20);
    for (int i = 0; i < 5; i++)
        dp_check_result(&r[i], STATUS_SUCCESS, 100, XCTX, (void *)(uintptr_t)(i + 1),
                        NdkOperationTypeWrite);
    dp_check_result(&r[5], STATUS_SUCCESS, 10, XCTX, (void *)6, NdkOperationTypeSend);
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 1);
    dp_expect(p.y.cq, r, 1, 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(write_placed_a_consumer_read_behind_writes_is_their_fence_and_ord_is_shared)
{
    struct dp_opts o;
    struct dp_pair p;
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    dp_opts_default(&o);
    o.buf_len = 64 * KiB;
    o.two_adapters = true;
    o.ord = 1; /* one Read credit for the consumer's Reads and the fences together */
    o.ird_y = 1;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    uint64_t ya = (uint64_t)(uintptr_t)p.y.buf;
    NDK_SGE w1 = dp_sge(&p.x, 0, 64), rd = dp_sge(&p.x, 8192, 64), w2 = dp_sge(&p.x, 128, 64);
    dp_fill(p.x.buf, 256, 5);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, &w1, 1, ya, ytok, NDK_OP_FLAG_DEFER),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)2, &rd, 1, ya, ytok, NDK_OP_FLAG_DEFER),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)3, &w2, 1, ya + 128, ytok, 0),
                 STATUS_SUCCESS);
    NDK_RESULT_EX r[3];
    dp_expect(p.x.cq, r, 3, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 64, XCTX, (void *)1, NdkOperationTypeWrite);
    dp_check_result(&r[1], STATUS_SUCCESS, 64, XCTX, (void *)2, NdkOperationTypeRead);
    dp_check_result(&r[2], STATUS_SUCCESS, 64, XCTX, (void *)3, NdkOperationTypeWrite);
    CHECK(memcmp(p.x.buf + 8192, p.x.buf, 64) == 0); /* the Read saw the first Write */
    /* the Read fenced the first Write; the second Write needed a fence of its own, which
     * waited for the Read's credit (ORD 1) */
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 1);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(write_placed_a_refused_write_completes_with_the_peers_error_not_success)
{
    struct dp_opts o;
    struct dp_pair p;
    placed_pair(&p, &o, "placed");
    NDK_SGE g = dp_sge(&p.x, 0, 16);
    /* no region behind this token at y: Terminate DDP / tagged / invalid STag */
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, &g, 1, 0x10000, 0x00abcd00u, 0),
                 STATUS_SUCCESS);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_ACCESS_VIOLATION, 0, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK_EQ_U64(r.ProviderErrorCode, 0x02000000u | 0x010100u);
    CHECK(harness_event_wait(&p.x.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.abort_reason, 0x02000000u | 0x010100u);
    dp_pair_close(&p);
}

TEST(write_handed_completes_without_a_fence)
{
    struct dp_opts o;
    struct dp_pair p;
    placed_pair(&p, &o, "handed");
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    NDK_SGE g = dp_sge(&p.x, 0, 100);
    CHECK_EQ_U64(
        p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, &g, 1, (uint64_t)(uintptr_t)p.y.buf, ytok, 0),
        STATUS_SUCCESS);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 100, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}

TEST(write_placed_without_ord_falls_back_to_handed)
{
    struct dp_opts o;
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    dp_opts_default(&o);
    o.buf_len = 64 * KiB;
    /* the connection layer gives ORD 0 when the peer offers IRD 0: attach so directly */
    NDK_ADAPTER *ax = dp_open_adapter(), *ay = dp_open_adapter();
    struct dp_side x, y;
    dp_side_init(&x, ax, &o);
    dp_side_init(&y, ay, &o);
    dp_side_create_qp(&x, &o, XCTX);
    dp_side_create_qp(&y, &o, (void *)0x2002);
    int a, b;
    dp_tcp_pair(&a, &b);
    dp_attach_rd(&x, a, o.crc, 16, 0);
    dp_attach_rd(&y, b, o.crc, 0, 16);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&y, 0, y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    NDK_SGE g = dp_sge(&x, 0, 100);
    CHECK_EQ_U64(
        x.qp->Dispatch->NdkWrite(x.qp, (void *)1, &g, 1, (uint64_t)(uintptr_t)y.buf, ytok, 0),
        STATUS_SUCCESS);
    NDK_RESULT_EX r;
    dp_expect(x.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 100, XCTX, (void *)1, NdkOperationTypeWrite);
    CHECK_EQ_U64(dp_counters(ax).FenceReads, 0);
    dp_close_mr(ymr);
    dp_side_close(&x);
    dp_side_close(&y);
    SoftNdkCloseAdapter(ax);
    SoftNdkCloseAdapter(ay);
}

TEST(write_placed_disconnect_sends_the_fence_before_its_fin)
{
    struct dp_opts o;
    struct dp_pair p;
    setenv("SOFTNDK_WRITE_COMPLETION", "placed", 1);
    dp_opts_default(&o);
    o.buf_len = 4096 * KiB;
    o.two_adapters = true;
    o.ord = 1; /* the fence must wait for the Read's credit, the FIN for the fence */
    o.ird_y = 1;
    dp_pair_open(&p, &o);
    uint32_t ytok;
    NDK_MR *ymr = dp_reg(&p.y, 0, p.y.len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | REMOTE_RW, &ytok);
    uint64_t ya = (uint64_t)(uintptr_t)p.y.buf;
    NDK_SGE rd = dp_sge(&p.x, 0, 2048 * KiB), w = dp_sge(&p.x, 2048 * KiB, 100);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)1, &rd, 1, ya, ytok, 0), STATUS_SUCCESS);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)2, &w, 1, ya + 3000 * KiB, ytok, 0),
                 STATUS_SUCCESS);
    sndk_qp_shutdown((struct sndk_qp *)p.x.qp, 5000);
    NDK_RESULT_EX r[2];
    dp_expect(p.x.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 2048 * KiB, XCTX, (void *)1, NdkOperationTypeRead);
    dp_check_result(&r[1], STATUS_SUCCESS, 100, XCTX, (void *)2, NdkOperationTypeWrite);
    /* the peer sees the FIN after the fence (it answered it) and disconnects too */
    CHECK(harness_event_wait(&p.y.link.peer_closed, 1, DP_TIMEOUT_MS));
    sndk_qp_shutdown((struct sndk_qp *)p.y.qp, 5000);
    CHECK(harness_event_wait(&p.x.link.shutdown_done, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.shut_status, STATUS_SUCCESS);
    CHECK_EQ_U64(dp_counters(p.ax).FenceReads, 1);
    dp_close_mr(ymr);
    dp_pair_close(&p);
}
