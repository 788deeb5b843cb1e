/* Polling that scales (docs/datapath.md, "Who receives"): a CQ fed by more connections than
 * it asks directly keeps a readiness set, and an empty poll drives exactly the connections it
 * reports, in both directions, even when no progress thread runs. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>

#include "datapath.h"
#include "device/adapter_state.h"
#include "device/cq.h"
#include "engine/engine.h"

#define CONNS 6 /* > SNDK_CQ_DIRECT_POLL_MAX: the hub's polls use the readiness set */

/* The connections in the hub CQ's readiness set that report something now. */
static int ready_now(NDK_CQ *cq)
{
    struct epoll_event ev[CONNS + 1];
    return epoll_wait(sndk_cq_from(cq)->ready_fd, ev, CONNS + 1, 0);
}

struct hub {
    NDK_ADAPTER *ah, *ap;
    struct dp_side hub, peer[CONNS];
    NDK_QP *hq[CONNS];
};

/* CONNS connections, the hub's QPs (adapter ah) all on hub.cq, each peer on adapter ap. */
static void hub_open(struct hub *h, const struct dp_opts *o)
{
    h->ah = dp_open_adapter();
    h->ap = dp_open_adapter();
    dp_side_init(&h->hub, h->ah, o);
    for (int i = 0; i < CONNS; i++) {
        dp_side_init(&h->peer[i], h->ap, o);
        dp_side_create_qp(&h->peer[i], o, (void *)(uintptr_t)(0x500 + i));
        CHECK_EQ_U64(h->hub.pd->Dispatch->NdkCreateQp(h->hub.pd, h->hub.cq, h->hub.cq,
                                                      (void *)(uintptr_t)(0x100 + i), 64, 64, 4, 4,
                                                      0, NULL, NULL, &h->hq[i]),
                     STATUS_SUCCESS);
        int fa, fb;
        dp_tcp_pair(&fa, &fb);
        h->hub.qp = h->hq[i];
        dp_attach(&h->hub, fb, true);
        dp_attach(&h->peer[i], fa, true);
    }
    h->hub.qp = NULL;
}

static void hub_close(struct hub *h)
{
    for (int i = 0; i < CONNS; i++) {
        dp_side_close(&h->peer[i]);
        dp_close_qp(h->hq[i]);
    }
    dp_side_close(&h->hub);
    SoftNdkCloseAdapter(h->ah);
    SoftNdkCloseAdapter(h->ap);
}

/* Idle connections are not in the way: the set reports only the one a message arrived on,
 * and the poll receives it with the hub's progress thread held. */
TEST(readiness_set_reports_only_connections_with_bytes)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct hub h;
    hub_open(&h, &o);
    dp_hold_progress(h.ah);
    NDK_RESULT_EX r[4];
    CHECK_EQ_U64(h.hub.cq->Dispatch->NdkGetCqResultsEx(h.hub.cq, r, 4), 0);
    CHECK_EQ_I64(ready_now(h.hub.cq), 0);
    for (int m = 0; m < 10; m++) {
        int i = (m * 5) % CONNS;
        NDK_SGE g = dp_sge(&h.hub, (size_t)(i * 4096 + m * 8), 8);
        CHECK_EQ_U64(h.hq[i]->Dispatch->NdkReceive(h.hq[i], (void *)(uintptr_t)m, &g, 1),
                     STATUS_SUCCESS);
        uint64_t v = (uint64_t)i << 32 | (uint64_t)m;
        memcpy(h.peer[i].buf + m * 8, &v, 8);
        dp_post_send(&h.peer[i], NULL, (size_t)m * 8, 8, NDK_OP_FLAG_SILENT_SUCCESS);
        /* the bytes are in the hub's socket: exactly that connection reports (bounded wait) */
        uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
        int ready = 0;
        while ((ready = ready_now(h.hub.cq)) == 0 && fixture_now_ms() < end)
            ;
        CHECK_EQ_I64(ready, 1);
        dp_expect(h.hub.cq, r, 1, 0);
        dp_check_result(&r[0], STATUS_SUCCESS, 8, (void *)(uintptr_t)(0x100 + i),
                        (void *)(uintptr_t)m, NdkOperationTypeReceive);
        memcpy(&v, h.hub.buf + i * 4096 + m * 8, 8);
        CHECK_EQ_U64(v, (uint64_t)i << 32 | (uint64_t)m);
        CHECK_EQ_I64(ready_now(h.hub.cq), 0); /* read: nothing left to report */
    }
    dp_release_progress();
    hub_close(&h);
}

/* A Send larger than the socket takes blocks; with the progress threads held, only the
 * readiness set's EPOLLOUT lets the polling consumer push the rest and see it complete. */
TEST(readiness_set_sends_what_waits_for_socket_space)
{
    enum { LEN = 8 * 1024 * 1024 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.buf_len = LEN;
    struct hub h;
    hub_open(&h, &o);
    dp_fill(h.hub.buf, LEN, 7);
    dp_post_recv(&h.peer[3], (void *)0x77, 0, LEN);
    dp_hold_progress(h.ah);
    NDK_SGE g = dp_sge(&h.hub, 0, LEN);
    CHECK_EQ_U64(h.hq[3]->Dispatch->NdkSend(h.hq[3], (void *)0x66, &g, 1, 0), STATUS_SUCCESS);
    /* the progress threads are held (the adapters share them): both consumers poll, the
     * peer's polls read its socket, the hub's push the rest when the set says EPOLLOUT */
    NDK_RESULT_EX sent = {0}, recvd = {0};
    unsigned got_sent = 0, got_recvd = 0;
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    while ((!got_sent || !got_recvd) && fixture_now_ms() < end) {
        if (!got_sent)
            got_sent = h.hub.cq->Dispatch->NdkGetCqResultsEx(h.hub.cq, &sent, 1);
        if (!got_recvd)
            got_recvd = h.peer[3].cq->Dispatch->NdkGetCqResultsEx(h.peer[3].cq, &recvd, 1);
    }
    CHECK_EQ_U64(got_sent, 1);
    CHECK_EQ_U64(got_recvd, 1);
    dp_check_result(&sent, STATUS_SUCCESS, LEN, (void *)(uintptr_t)0x103, (void *)0x66,
                    NdkOperationTypeSend);
    dp_check_result(&recvd, STATUS_SUCCESS, LEN, (void *)(uintptr_t)0x503, (void *)0x77,
                    NdkOperationTypeReceive);
    CHECK(memcmp(h.hub.buf, h.peer[3].buf, LEN) == 0);
    dp_release_progress();
    hub_close(&h);
}

/* Receive without crumbs (docs/datapath.md): a direct read ends with a probe of the next FPDU
 * sized for a Send's header, read into the staging buffer. Sends and Writes back to back make
 * every kind of guess: a Send after a Send (the probe is exactly the header), a Write after a
 * Send (the probe holds a tagged header and 4 payload bytes, copied into place after the
 * checks), a Send after a Write. Every byte arrives where it belongs and nothing beyond the
 * Write's region or the receive buffer is touched. */
TEST(probe_guess_wrong_or_right_places_every_byte_and_no_other)
{
    enum { LEN = 200 * 1024, ROUNDS = 6, GUARD = 4096 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    o.buf_len = 2 * LEN + 3 * GUARD;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    /* y's buffer: guard | Write target (LEN) | guard | receive buffer (LEN) | guard */
    uint8_t *wdst = p.y.buf + GUARD, *rdst = p.y.buf + 2 * GUARD + LEN;
    uint32_t ytok = 0;
    NDK_MR *ymr = dp_reg(&p.y, GUARD, LEN,
                         NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &ytok);
    NDK_RESULT_EX r;
    for (unsigned k = 0; k < ROUNDS; k++) {
        memset(p.y.buf, 0xee, o.buf_len);
        dp_fill(p.x.buf, LEN, 2 * k + 1);       /* the Send's source */
        dp_fill(p.x.buf + LEN, LEN, 2 * k + 2); /* the Write's source */
        dp_post_recv(&p.y, (void *)(uintptr_t)k, 2 * GUARD + LEN, LEN);
        NDK_SGE ws = dp_sge(&p.x, LEN, LEN);
        if (k % 2 == 0) {
            dp_post_send(&p.x, NULL, 0, LEN, NDK_OP_FLAG_SILENT_SUCCESS);
            CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, &ws, 1,
                                                    (uint64_t)(uintptr_t)wdst, ytok, 0),
                         STATUS_SUCCESS);
        } else {
            CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)1, &ws, 1,
                                                    (uint64_t)(uintptr_t)wdst, ytok, 0),
                         STATUS_SUCCESS);
            dp_post_send(&p.x, NULL, 0, LEN, NDK_OP_FLAG_SILENT_SUCCESS);
        }
        dp_expect(p.y.cq, &r, 1, 0); /* polling: y's reads are the direct ones */
        dp_check_result(&r, STATUS_SUCCESS, LEN, (void *)0x2002, (void *)(uintptr_t)k,
                        NdkOperationTypeReceive);
        CHECK_MSG(memcmp(rdst, p.x.buf, LEN) == 0, "round %u: the Send's bytes", k);
        dp_expect(p.x.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, LEN, (void *)0x1001, (void *)1, NdkOperationTypeWrite);
        if (k % 2 == 0) {
            /* the Write came after the Send: a Send behind it proves it was placed */
            dp_post_recv(&p.y, (void *)0x99, 2 * GUARD + LEN, 8);
            dp_post_send(&p.x, NULL, 0, 8, NDK_OP_FLAG_SILENT_SUCCESS);
            dp_expect(p.y.cq, &r, 1, 0);
            dp_check_result(&r, STATUS_SUCCESS, 8, (void *)0x2002, (void *)0x99,
                            NdkOperationTypeReceive);
        }
        CHECK_MSG(memcmp(wdst, p.x.buf + LEN, LEN) == 0, "round %u: the Write's bytes", k);
        for (size_t i = 0; i < GUARD; i++) {
            CHECK_MSG(p.y.buf[i] == 0xee && wdst[LEN + i] == 0xee && rdst[LEN + i] == 0xee,
                      "round %u: a byte outside its region changed (guard offset %zu)", k, i);
        }
    }
    dp_close_mr(ymr);
    dp_pair_close(&p);
}
