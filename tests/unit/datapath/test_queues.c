/* A QP's receive queue and a CQ's consumer side take no lock (device/srq.h, device/cq.h): the
 * consumer's posts, the receive side's takes, a flush from another thread and the completions
 * they make meet only through published positions. These run them against each other, many
 * times, and count: every receive completes once, in posting order, none is left queued. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "datapath.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)

/* The consumer's side of a race: posts receives 1..n on one QP, never more than `ahead` beyond
 * what the poller has collected (so the CQ cannot overrun), retrying a full queue. */
struct poster {
    struct dp_side *s;
    unsigned n, ahead;
    atomic_uint collected; /* by the polling thread */
    atomic_bool done;
    NTSTATUS bad; /* a post that failed otherwise than "full" */
};

static void *post_receives(void *arg)
{
    struct poster *p = arg;
    NDK_SGE g = dp_sge(p->s, 0, 8);
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    for (unsigned i = 1; i <= p->n && fixture_now_ms() < end;) {
        if (i - 1 - atomic_load(&p->collected) >= p->ahead) {
            sched_yield();
            continue;
        }
        NTSTATUS st = p->s->qp->Dispatch->NdkReceive(p->s->qp, (void *)(uintptr_t)i, &g, 1);
        if (st == STATUS_NO_MORE_ENTRIES) {
            sched_yield();
            continue;
        }
        if (st != STATUS_SUCCESS) {
            p->bad = st;
            break;
        }
        i++;
    }
    atomic_store(&p->done, true);
    return NULL;
}

/* Poll cq until receives 1..n each completed once, in order, with `want` status; bounded. */
static void collect_in_order(NDK_CQ *cq, struct poster *p, NTSTATUS want)
{
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    unsigned next = 1;
    while (next <= p->n && fixture_now_ms() < end) {
        NDK_RESULT_EX r[32];
        ULONG got = cq->Dispatch->NdkGetCqResultsEx(cq, r, 32);
        for (ULONG i = 0; i < got; i++) {
            CHECK_EQ_U64(r[i].Type, NdkOperationTypeReceive);
            CHECK_EQ_U64(r[i].Status, want);
            CHECK_MSG((uintptr_t)r[i].RequestContext == next,
                      "receive %u completed where %u was next", (unsigned)(uintptr_t)r[i].RequestContext,
                      next);
            next++;
        }
        atomic_store(&p->collected, next - 1);
    }
    CHECK_MSG(next == p->n + 1, "%u of %u receives completed", next - 1, p->n);
}

/* Flushes qp over and over until the poster is done, then once more. */
struct flusher {
    NDK_QP *qp;
    struct poster *p;
    unsigned flushes;
};

static void *flush_until_posted(void *arg)
{
    struct flusher *f = arg;
    while (!atomic_load(&f->p->done)) {
        f->qp->Dispatch->NdkFlush(f->qp);
        f->flushes++;
        sched_yield();
    }
    f->qp->Dispatch->NdkFlush(f->qp);
    return NULL;
}

/* An unconnected QP flushed over and over by one thread while another posts: each receive is
 * completed (cancelled) once by whichever flush comes after its post, in posting order; the
 * flushes are the queue's taker, the test thread the CQ's one consumer. */
TEST(receives_posted_while_flushed_complete_once_in_posting_order)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.rq_depth = 16;
    o.cq_depth = 256;
    NDK_ADAPTER *a = dp_open_adapter();
    struct dp_side s;
    dp_side_init(&s, a, &o);
    dp_side_create_qp(&s, &o, XCTX);
    struct poster p = {.s = &s, .n = 20000, .ahead = 128};
    struct flusher f = {.qp = s.qp, .p = &p};
    pthread_t tp, tf;
    CHECK(pthread_create(&tp, NULL, post_receives, &p) == 0);
    CHECK(pthread_create(&tf, NULL, flush_until_posted, &f) == 0);
    collect_in_order(s.cq, &p, STATUS_CANCELLED);
    pthread_join(tp, NULL);
    pthread_join(tf, NULL);
    CHECK_EQ_U64(p.bad, STATUS_SUCCESS);
    CHECK(f.flushes > 0);
    NDK_RESULT_EX r;
    dp_expect(s.cq, &r, 0, 20); /* nothing twice */
    dp_side_close(&s);
    SoftNdkCloseAdapter(a);
}

/* A connected QP flushed (it fails: the error state) while its consumer keeps posting: the
 * receives posted before the flush and those posted after it, as the state changes under the
 * post, all complete (cancelled), none stays queued in a QP that will never fill it. */
TEST(receives_posted_as_the_qp_fails_all_complete)
{
    for (unsigned round = 0; round < 20; round++) {
        struct dp_opts o;
        dp_opts_default(&o);
        o.rq_depth = 32;
        struct dp_pair pr;
        dp_pair_open(&pr, &o);
        struct poster p = {.s = &pr.y, .n = 400, .ahead = 64};
        pthread_t tp;
        CHECK(pthread_create(&tp, NULL, post_receives, &p) == 0);
        /* let a few posts land first (more each round), then fail the QP under the poster */
        struct sndk_qp *qy = (struct sndk_qp *)pr.y.qp;
        uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
        while (sndk_recv_ring_count(&qy->rq) < 1 + round % 16 && !atomic_load(&p.done) &&
               fixture_now_ms() < end)
            sched_yield();
        pr.y.qp->Dispatch->NdkFlush(pr.y.qp);
        collect_in_order(pr.y.cq, &p, STATUS_CANCELLED);
        pthread_join(tp, NULL);
        CHECK_EQ_U64(p.bad, STATUS_SUCCESS);
        dp_pair_close(&pr);
    }
}
