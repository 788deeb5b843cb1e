/* Send / receive on connected QPs: completions, integrity, ordering, sharing, concurrency. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "datapath.h"
#include "device/adapter_state.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)

TEST(send_receive_completions_are_exact)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_fill(p.x.buf, 64, 1);
    dp_post_recv(&p.y, (void *)0xa1, 4096, 100);
    dp_post_send(&p.x, (void *)0xb1, 0, 64, 0);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 64, XCTX, (void *)0xb1, NdkOperationTypeSend);
    CHECK_EQ_U64(r.ProviderErrorCode, 0);
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 64, YCTX, (void *)0xa1, NdkOperationTypeReceive);
    CHECK_EQ_U64(r.TypeSpecificCompletionOutput, 0);
    CHECK_MEM(p.y.buf + 4096, p.x.buf, 64);
    /* and back, with the non-Ex call */
    dp_post_recv(&p.x, (void *)0xa2, 8192, 64);
    dp_post_send(&p.y, (void *)0xb2, 4096, 64, 0);
    NDK_RESULT rr;
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    unsigned got = 0;
    while (got < 1 && fixture_now_ms() < end)
        got += p.x.cq->Dispatch->NdkGetCqResults(p.x.cq, &rr, 1);
    CHECK_EQ_U64(got, 1);
    CHECK(rr.RequestContext == (void *)0xa2);
    CHECK_EQ_U64(rr.Status, STATUS_SUCCESS);
    CHECK_EQ_U64(rr.BytesTransferred, 64);
    CHECK(rr.QPContext == XCTX);
    CHECK_MEM(p.x.buf + 8192, p.x.buf, 64);
    dp_expect(p.y.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_SUCCESS, 64, YCTX, (void *)0xb2, NdkOperationTypeSend);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    dp_pair_close(&p);
}

TEST(zero_byte_send_consumes_a_receive)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    CHECK_EQ_U64(p.y.qp->Dispatch->NdkReceive(p.y.qp, (void *)1, NULL, 0), STATUS_SUCCESS);
    dp_post_recv(&p.y, (void *)2, 0, 16);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)3, NULL, 0, 0), STATUS_SUCCESS);
    NDK_SGE g = {.VirtualAddress = p.x.buf, .Length = 0, .MemoryRegionToken = 0xdead};
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)4, &g, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX r[2];
    dp_expect(p.y.cq, r, 2, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 0, YCTX, (void *)1, NdkOperationTypeReceive);
    dp_check_result(&r[1], STATUS_SUCCESS, 0, YCTX, (void *)2, NdkOperationTypeReceive);
    dp_expect(p.x.cq, r, 2, 0);
    dp_check_result(&r[0], STATUS_SUCCESS, 0, XCTX, (void *)3, NdkOperationTypeSend);
    dp_check_result(&r[1], STATUS_SUCCESS, 0, XCTX, (void *)4, NdkOperationTypeSend);
    dp_pair_close(&p);
}

/* Cut [0, size) into k pieces laid out in buf with gaps between them. */
static unsigned split(struct dp_side *s, size_t size, unsigned k, NDK_SGE *sge, unsigned *seed)
{
    size_t off = 0, at = 0;
    unsigned n = 0;
    for (unsigned i = 0; i < k; i++) {
        size_t left = size - off;
        size_t len = i + 1 == k ? left : (left ? (size_t)rand_r(seed) % (left + 1) : 0);
        sge[n++] = dp_sge(s, at, len);
        off += len;
        at += len + 8 + (size_t)(rand_r(seed) % 56);
    }
    return n;
}

static void integrity(bool crc, uint32_t seed0)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = crc;
    o.buf_len = (16u << 20) + 8192;
    o.two_adapters = true;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    static const size_t fixed[] = {0,     1,      2,       3,         7,         64,
                                   1000,  4095,   4096,    4097,      65461,     65462,
                                   65480, 65536,  100000,  1u << 20,  (1u << 20) + 13,
                                   16u << 20};
    unsigned seed = seed0;
    unsigned nfixed = sizeof fixed / sizeof fixed[0];
    for (unsigned m = 0; m < nfixed + 24; m++) {
        size_t size = m < nfixed ? fixed[m] : (size_t)1 << (rand_r(&seed) % 22);
        if (m >= nfixed)
            size += (size_t)rand_r(&seed) % (size + 1);
        if (size > (16u << 20))
            size = 16u << 20;
        NDK_SGE ss[8], rs[8];
        unsigned ns = split(&p.x, size, 1 + (unsigned)rand_r(&seed) % 8, ss, &seed);
        unsigned nr = split(&p.y, size, 1 + (unsigned)rand_r(&seed) % 8, rs, &seed);
        rs[nr - 1].Length += (ULONG)(rand_r(&seed) % 50); /* receive may be larger */
        dp_fill(p.x.buf, o.buf_len, seed + m);
        memset(p.y.buf, 0xee, o.buf_len);
        CHECK_EQ_U64(p.y.qp->Dispatch->NdkReceive(p.y.qp, (void *)(uintptr_t)m, rs, nr),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, (void *)(uintptr_t)m, ss, ns, 0),
                     STATUS_SUCCESS);
        NDK_RESULT_EX r;
        dp_expect(p.y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, (ULONG)size, YCTX, (void *)(uintptr_t)m,
                        NdkOperationTypeReceive);
        dp_expect(p.x.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, (ULONG)size, XCTX, (void *)(uintptr_t)m,
                        NdkOperationTypeSend);
        /* every byte, piece by piece */
        size_t si = 0, soff = 0;
        for (unsigned i = 0; i < nr; i++) {
            const uint8_t *dst = rs[i].VirtualAddress;
            for (size_t b = 0; b < rs[i].Length; b++) {
                while (si < ns && soff == ss[si].Length) {
                    si++;
                    soff = 0;
                }
                if (si == ns) {
                    CHECK_MSG(dst[b] == 0xee, "message %u (%zu bytes): byte beyond it written", m,
                              size);
                    continue;
                }
                const uint8_t *src = ss[si].VirtualAddress;
                CHECK_MSG(dst[b] == src[soff], "message %u (%zu bytes): SGE %u byte %zu differs",
                          m, size, i, b);
                soff++;
            }
        }
    }
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    dp_pair_close(&p);
}

TEST_T(integrity_random_sizes_and_splits_crc_on, 120)
{
    integrity(true, 7);
}

TEST_T(integrity_random_sizes_and_splits_crc_off, 120)
{
    integrity(false, 11);
}

TEST(ordering_in_posting_order_many_in_flight)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.cq_depth = 256;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    uint32_t seq = 0;
    for (unsigned round = 0; round < 60; round++) {
        uint32_t first = seq;
        for (unsigned i = 0; i < 32; i++)
            dp_post_recv(&p.y, (void *)(uintptr_t)(first + i), 4096 + i * 16, 16);
        for (unsigned i = 0; i < 32; i++, seq++) {
            memcpy(p.x.buf + i * 16, &seq, sizeof seq);
            dp_post_send(&p.x, (void *)(uintptr_t)seq, i * 16, sizeof seq,
                         i % 4 ? NDK_OP_FLAG_DEFER : 0);
        }
        dp_post_recv(&p.y, (void *)(uintptr_t)0xffff, 0, 0);
        dp_post_send(&p.x, (void *)(uintptr_t)0xffff, 0, 0, NDK_OP_FLAG_SILENT_SUCCESS);
        seq++;
        NDK_RESULT_EX r[33];
        dp_expect(p.x.cq, r, 32, 0);
        for (unsigned i = 0; i < 32; i++)
            dp_check_result(&r[i], STATUS_SUCCESS, 4, XCTX, (void *)(uintptr_t)(first + i),
                            NdkOperationTypeSend);
        dp_expect(p.y.cq, r, 33, 0);
        for (unsigned i = 0; i < 32; i++) {
            dp_check_result(&r[i], STATUS_SUCCESS, 4, YCTX, (void *)(uintptr_t)(first + i),
                            NdkOperationTypeReceive);
            uint32_t got;
            memcpy(&got, p.y.buf + 4096 + i * 16, 4);
            CHECK_EQ_U64(got, first + i);
        }
        dp_check_result(&r[32], STATUS_SUCCESS, 0, YCTX, (void *)(uintptr_t)0xffff,
                        NdkOperationTypeReceive);
    }
    dp_pair_close(&p);
}

/* Move an idle QP's initiator queue counters to `start` (every request completed and taken). */
static void sq_counters_at(struct sndk_qp *qp, uint32_t start)
{
    sndk_mutex_lock(&qp->tx_lock);
    CHECK_EQ_U64(qp->sq_tail, atomic_load(&qp->sq_head));
    CHECK_EQ_U64(qp->sq_sent, qp->sq_tail);
    qp->sq_tail = qp->sq_sent = start;
    atomic_store(&qp->sq_head, start);
    sndk_mutex_unlock(&qp->tx_lock);
}

/* The initiator queue's counters run free and wrap at 2^32: a slot must follow its counter
 * across the wrap whatever the depth (a depth that does not divide 2^32 once mapped counters
 * 2^32 - 1 and 0 to the same slot, so the request posted after the wrap overwrote one in
 * flight). Before each batch the idle QP's counters are moved to just before the wrap, so that
 * the batch straddles it: a full queue of Sends, then one of RDMA Reads (whose requests the
 * outbound read queue names by counter), twice. */
static void wrap_at(uint32_t depth)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.sq_depth = depth;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_qp *qp = (struct sndk_qp *)p.x.qp;
    uint32_t start = UINT32_MAX - depth / 2u;
    uint32_t rtoken;
    NDK_MR *rmr = dp_reg(&p.y, 1u << 19, 1u << 16, NDK_MR_FLAG_ALLOW_REMOTE_READ, &rtoken);
    dp_fill(p.y.buf + (1u << 19), 1u << 16, depth);
    for (unsigned round = 0; round < 2; round++) {
        for (uint32_t i = 0; i < depth; i++)
            dp_post_recv(&p.y, (void *)(uintptr_t)(0x100 + i), 4096 + i * 16, 16);
        sq_counters_at(qp, start);
        for (uint32_t i = 0; i < depth; i++) {
            uint32_t v = round * 1000 + i;
            memcpy(p.x.buf + i * 16, &v, sizeof v);
            dp_post_send(&p.x, (void *)(uintptr_t)(0x200 + i), i * 16, sizeof v,
                         i + 1 < depth ? NDK_OP_FLAG_DEFER : 0);
        }
        NDK_RESULT_EX r[64];
        dp_expect(p.x.cq, r, depth, 0);
        for (uint32_t i = 0; i < depth; i++)
            dp_check_result(&r[i], STATUS_SUCCESS, 4, XCTX, (void *)(uintptr_t)(0x200 + i),
                            NdkOperationTypeSend);
        dp_expect(p.y.cq, r, depth, 0);
        for (uint32_t i = 0; i < depth; i++) {
            dp_check_result(&r[i], STATUS_SUCCESS, 4, YCTX, (void *)(uintptr_t)(0x100 + i),
                            NdkOperationTypeReceive);
            uint32_t got;
            memcpy(&got, p.y.buf + 4096 + i * 16, sizeof got);
            CHECK_EQ_U64(got, round * 1000 + i);
        }
        CHECK_EQ_U64(qp->sq_tail, (uint32_t)(start + depth)); /* past the wrap */
        memset(p.x.buf + 65536, 0, (size_t)depth * 512);
        sq_counters_at(qp, start);
        for (uint32_t i = 0; i < depth; i++) {
            NDK_SGE g = dp_sge(&p.x, 65536 + (size_t)i * 512, 512);
            CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)(uintptr_t)(0x300 + i), &g, 1,
                                                   (uint64_t)(uintptr_t)p.y.buf + (1u << 19) +
                                                       (uint64_t)i * 512,
                                                   rtoken, 0),
                         STATUS_SUCCESS);
        }
        dp_expect(p.x.cq, r, depth, 0);
        for (uint32_t i = 0; i < depth; i++)
            dp_check_result(&r[i], STATUS_SUCCESS, 512, XCTX, (void *)(uintptr_t)(0x300 + i),
                            NdkOperationTypeRead);
        CHECK_MEM(p.x.buf + 65536, p.y.buf + (1u << 19), (size_t)depth * 512);
    }
    CHECK_EQ_U64(qp->sq_tail, (uint32_t)(start + depth));
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    dp_close_mr(rmr);
    dp_pair_close(&p);
}

TEST(initiator_queue_counters_wrap_whatever_the_depth)
{
    static const uint32_t depths[] = {3, 5, 7, 12, 16, 33, 64};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++)
        wrap_at(depths[i]);
}

/* Three connections whose receiving QPs share one CQ (and one PD). */
TEST(several_qps_on_one_cq)
{
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side hub, peer[3];
    dp_side_init(&hub, a, &o);
    NDK_QP *hq[3];
    for (int i = 0; i < 3; i++) {
        dp_side_init(&peer[i], a, &o);
        dp_side_create_qp(&peer[i], &o, (void *)(uintptr_t)(0x500 + i));
        CHECK_EQ_U64(hub.pd->Dispatch->NdkCreateQp(hub.pd, hub.cq, hub.cq,
                                                    (void *)(uintptr_t)(0x100 + i), 64, 64, 4, 4,
                                                    0, NULL, NULL, &hq[i]),
                     STATUS_SUCCESS);
        int fa, fb;
        dp_tcp_pair(&fa, &fb);
        hub.qp = hq[i];
        dp_attach(&hub, fb, true);
        dp_attach(&peer[i], fa, true);
    }
    for (int m = 0; m < 20; m++)
        for (int i = 0; i < 3; i++) {
            NDK_SGE g = dp_sge(&hub, (size_t)(i * 4096 + m * 8), 8);
            CHECK_EQ_U64(hq[i]->Dispatch->NdkReceive(hq[i], (void *)(uintptr_t)(i * 100 + m), &g,
                                                      1),
                         STATUS_SUCCESS);
        }
    for (int m = 0; m < 20; m++)
        for (int i = 0; i < 3; i++) {
            uint64_t v = (uint64_t)i << 32 | (uint64_t)m;
            memcpy(peer[i].buf + m * 8, &v, 8);
            dp_post_send(&peer[i], NULL, (size_t)m * 8, 8, NDK_OP_FLAG_SILENT_SUCCESS);
        }
    NDK_RESULT_EX r[60];
    dp_expect(hub.cq, r, 60, 20);
    int next[3] = {0, 0, 0};
    for (int k = 0; k < 60; k++) {
        int i = (int)((uintptr_t)r[k].QPContext - 0x100);
        CHECK(i >= 0 && i < 3);
        dp_check_result(&r[k], STATUS_SUCCESS, 8, r[k].QPContext,
                        (void *)(uintptr_t)(i * 100 + next[i]), NdkOperationTypeReceive);
        uint64_t v;
        memcpy(&v, hub.buf + i * 4096 + next[i] * 8, 8);
        CHECK_EQ_U64(v, (uint64_t)i << 32 | (uint64_t)next[i]);
        next[i]++;
    }
    for (int i = 0; i < 3; i++) {
        dp_expect(peer[i].cq, r, 0, 20); /* silent successes: nothing */
        dp_side_close(&peer[i]);
        dp_close_qp(hq[i]);
    }
    hub.qp = NULL;
    dp_side_close(&hub);
    SoftNdkCloseAdapter(a);
}

static struct harness_event srq_note;
static VOID on_srq(PVOID ctx, NTSTATUS st)
{
    (void)ctx;
    CHECK_EQ_U64(st, STATUS_SUCCESS);
    harness_event_signal(&srq_note);
}

TEST(srq_shared_by_qps_in_posting_order_with_threshold)
{
    harness_event_init(&srq_note);
    struct dp_opts o;
    dp_opts_default(&o);
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side hub, peer[2];
    dp_side_init(&hub, a, &o);
    CHECK_EQ_U64(hub.pd->Dispatch->NdkCreateSrq(hub.pd, 16, 2, 3, on_srq, NULL, NULL, NULL, NULL,
                                                 &hub.srq),
                 STATUS_SUCCESS);
    NDK_QP *hq[2];
    for (int i = 0; i < 2; i++) {
        dp_side_init(&peer[i], a, &o);
        dp_side_create_qp(&peer[i], &o, NULL);
        hub.qp = NULL;
        dp_side_create_qp(&hub, &o, (void *)(uintptr_t)(0x100 + i));
        hq[i] = hub.qp;
        NDK_SGE g = dp_sge(&hub, 0, 8);
        CHECK_EQ_U64(hq[i]->Dispatch->NdkReceive(hq[i], NULL, &g, 1), STATUS_INVALID_PARAMETER);
        int fa, fb;
        dp_tcp_pair(&fa, &fb);
        dp_attach(&hub, fb, true);
        dp_attach(&peer[i], fa, true);
    }
    for (int k = 0; k < 8; k++) {
        NDK_SGE g = dp_sge(&hub, (size_t)k * 64, 64);
        CHECK_EQ_U64(hub.srq->Dispatch->NdkSrqReceive(hub.srq, (void *)(uintptr_t)(k + 1), &g, 1),
                     STATUS_SUCCESS);
    }
    /* Alternate senders; the k-th message takes the k-th receive, whichever QP it came on. */
    static const int who[8] = {0, 1, 1, 0, 1, 0, 0, 1};
    for (int k = 0; k < 8; k++) {
        peer[who[k]].buf[0] = (uint8_t)k;
        dp_post_send(&peer[who[k]], NULL, 0, 1 + (size_t)k, 0);
        NDK_RESULT_EX r;
        dp_expect(hub.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, 1 + (ULONG)k, (void *)(uintptr_t)(0x100 + who[k]),
                        (void *)(uintptr_t)(k + 1), NdkOperationTypeReceive);
        CHECK_EQ_U64(hub.buf[k * 64], k);
        /* threshold 3: fires once when the count falls to 2 (after the 6th message) */
        if (k < 5)
            CHECK_EQ_U64(harness_event_count(&srq_note), 0);
    }
    CHECK(harness_event_wait(&srq_note, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(harness_event_count(&srq_note), 1);
    for (int i = 0; i < 2; i++)
        dp_side_close(&peer[i]);
    for (int i = 0; i < 2; i++)
        dp_close_qp(hq[i]);
    hub.qp = NULL;
    dp_side_close(&hub);
    SoftNdkCloseAdapter(a);
}

/* NdkReceive and NdkSend on one QP from two threads at once ([POST-2]). */
struct conc {
    struct dp_pair *p;
    unsigned n;
    atomic_uint y_recv_posted, x_recv_posted;
};

static void *y_receiver(void *arg)
{
    struct conc *c = arg;
    for (unsigned i = 0; i < c->n; i++) {
        NDK_SGE g = dp_sge(&c->p->y, 8192 + (i % 64) * 16, 16);
        NTSTATUS st;
        while ((st = c->p->y.qp->Dispatch->NdkReceive(c->p->y.qp, (void *)(uintptr_t)i, &g, 1)) ==
               STATUS_NO_MORE_ENTRIES)
            ;
        CHECK_EQ_U64(st, STATUS_SUCCESS);
        atomic_fetch_add(&c->y_recv_posted, 1);
    }
    return NULL;
}

static void *y_sender(void *arg)
{
    struct conc *c = arg;
    for (unsigned i = 0; i < c->n; i++) {
        while (atomic_load(&c->x_recv_posted) <= i)
            ;
        NDK_SGE g = dp_sge(&c->p->y, 0, 8);
        NTSTATUS st;
        while ((st = c->p->y.qp->Dispatch->NdkSend(c->p->y.qp, NULL, &g, 1,
                                                    NDK_OP_FLAG_SILENT_SUCCESS)) ==
               STATUS_NO_MORE_ENTRIES)
            ;
        CHECK_EQ_U64(st, STATUS_SUCCESS);
    }
    return NULL;
}

TEST(receive_posting_concurrent_with_send_posting)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.cq_depth = 8192;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct conc c = {.p = &p, .n = 1500};
    pthread_t tr, ts;
    pthread_create(&tr, NULL, y_receiver, &c);
    pthread_create(&ts, NULL, y_sender, &c);
    unsigned xs = 0, xr_posted = 0, xr_done = 0, yr_done = 0;
    uint64_t end = fixture_now_ms() + 30000;
    while ((xr_done < c.n || yr_done < c.n) && fixture_now_ms() < end) {
        while (xr_posted < c.n && xr_posted - xr_done < 32) {
            dp_post_recv(&p.x, NULL, 4096 + (xr_posted % 64) * 8, 8);
            xr_posted++;
            atomic_store(&c.x_recv_posted, xr_posted);
        }
        if (xs < c.n && xs < atomic_load(&c.y_recv_posted) && xs - yr_done < 32) {
            NDK_SGE g = dp_sge(&p.x, 0, 4);
            if (p.x.qp->Dispatch->NdkSend(p.x.qp, NULL, &g, 1, NDK_OP_FLAG_SILENT_SUCCESS) ==
                STATUS_SUCCESS)
                xs++;
        }
        NDK_RESULT_EX r[16];
        unsigned n = p.x.cq->Dispatch->NdkGetCqResultsEx(p.x.cq, r, 16);
        for (unsigned i = 0; i < n; i++) {
            CHECK_EQ_U64(r[i].Status, STATUS_SUCCESS);
            CHECK_EQ_U64(r[i].Type, NdkOperationTypeReceive);
            xr_done++;
        }
        n = p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, r, 16);
        for (unsigned i = 0; i < n; i++) {
            dp_check_result(&r[i], STATUS_SUCCESS, 4, YCTX, (void *)(uintptr_t)yr_done,
                            NdkOperationTypeReceive);
            yr_done++;
        }
    }
    pthread_join(tr, NULL);
    pthread_join(ts, NULL);
    CHECK_EQ_U64(xr_done, c.n);
    CHECK_EQ_U64(yr_done, c.n);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    dp_pair_close(&p);
}

/* A consumer that polls its CQ gets its receive even when the progress thread is stuck. */
static pthread_mutex_t blk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t blk_cond = PTHREAD_COND_INITIALIZER;
static bool blk_release, blk_running;
static void blocker_fn(struct sndk_work *w)
{
    (void)w;
    pthread_mutex_lock(&blk_lock);
    blk_running = true;
    pthread_cond_broadcast(&blk_cond);
    while (!blk_release)
        pthread_cond_wait(&blk_cond, &blk_lock);
    pthread_mutex_unlock(&blk_lock);
}

TEST(cq_poll_drives_receive_progress)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.two_adapters = true;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_work blk;
    sndk_work_init(&blk, blocker_fn);
    struct sndk_engine *e = ((struct sndk_adapter *)p.ay)->engine;
    sndk_engine_queue_on(e, 0, &blk);
    pthread_mutex_lock(&blk_lock);
    while (!blk_running)
        pthread_cond_wait(&blk_cond, &blk_lock);
    pthread_mutex_unlock(&blk_lock);
    for (int i = 0; i < 10; i++) {
        dp_post_recv(&p.y, (void *)(uintptr_t)i, (size_t)i * 64, 64);
        dp_post_send(&p.x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS);
        NDK_RESULT_EX r;
        dp_expect(p.y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, 40, YCTX, (void *)(uintptr_t)i,
                        NdkOperationTypeReceive);
    }
    pthread_mutex_lock(&blk_lock);
    blk_release = true;
    pthread_cond_broadcast(&blk_cond);
    pthread_mutex_unlock(&blk_lock);
    dp_pair_close(&p);
}

TEST(graceful_shutdown_both_sides)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    dp_post_recv(&p.y, (void *)1, 0, 64);
    dp_post_recv(&p.y, (void *)2, 64, 64);
    dp_post_send(&p.x, (void *)3, 0, 10, 0);
    sndk_qp_shutdown((struct sndk_qp *)p.x.qp, 5000);
    CHECK(harness_event_wait(&p.y.link.peer_closed, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkSend(p.x.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    NDK_RESULT_EX r[2];
    dp_expect(p.y.cq, r, 1, 0); /* the Send before the FIN arrived; nothing flushed yet */
    dp_check_result(&r[0], STATUS_SUCCESS, 10, YCTX, (void *)1, NdkOperationTypeReceive);
    sndk_qp_shutdown((struct sndk_qp *)p.y.qp, 5000);
    CHECK(harness_event_wait(&p.x.link.shutdown_done, 1, DP_TIMEOUT_MS));
    CHECK(harness_event_wait(&p.y.link.shutdown_done, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(p.x.link.shut_status, STATUS_SUCCESS);
    CHECK_EQ_U64(p.y.link.shut_status, STATUS_SUCCESS);
    dp_expect(p.y.cq, r, 1, 20);
    dp_check_result(&r[0], STATUS_CANCELLED, 0, YCTX, (void *)2, NdkOperationTypeReceive);
    dp_expect(p.x.cq, r, 1, 20);
    dp_check_result(&r[0], STATUS_SUCCESS, 10, XCTX, (void *)3, NdkOperationTypeSend);
    CHECK_EQ_U64(harness_event_count(&p.x.link.aborted), 0);
    CHECK_EQ_U64(harness_event_count(&p.y.link.aborted), 0);
    CHECK_EQ_U64(harness_event_count(&p.x.link.peer_closed), 0);
    dp_pair_close(&p);
}
