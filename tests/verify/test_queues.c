/* The verifier's queue rules (docs/verifier.md: post_concurrent [POST-2], srq_concurrent
 * [SRQ-7]): two threads inside posts of one queue at once. The overlap is made certain, not
 * hoped for: the first poster's SGE list lies in a page that a userfaultfd holds missing, so
 * the provider's first read of it blocks that thread inside the post until the test supplies
 * the page, and the test knows it is inside because the kernel tells it about the fault. The
 * second post runs while the first is held. Every wait is bounded; the page is supplied in any
 * case, so a test that fails still ends. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "conn.h"
#include "fixture.h"
#include "harness.h"

enum held_kind { HELD_SEND, HELD_RECEIVE, HELD_SRQ_RECEIVE };

/* One post held inside the provider by a missing page. */
struct held_post {
    enum held_kind kind;
    NDK_QP *qp;
    NDK_SRQ *srq;
    void *ctx;
    NDK_SGE sge; /* what the page holds once supplied */
    int uffd;
    long page_size;
    NDK_SGE *page; /* the SGE list the held post is given */
    pthread_t thread;
    NTSTATUS status;
};

static void *held_post_thread(void *arg)
{
    struct held_post *h = arg;
    switch (h->kind) {
    case HELD_SEND:
        h->status = h->qp->Dispatch->NdkSend(h->qp, h->ctx, h->page, 1, 0);
        break;
    case HELD_RECEIVE:
        h->status = h->qp->Dispatch->NdkReceive(h->qp, h->ctx, h->page, 1);
        break;
    case HELD_SRQ_RECEIVE:
        h->status = h->srq->Dispatch->NdkSrqReceive(h->srq, h->ctx, h->page, 1);
        break;
    }
    return NULL;
}

/* Start the post on its own thread and return once the provider is blocked reading its SGE list
 * (CHECKed; bounded by FIXTURE_WAIT_MS). */
static void held_post_begin(struct held_post *h)
{
    h->page_size = sysconf(_SC_PAGESIZE);
    /* User-mode faults only: the provider reads the SGE list in user mode, and the flag lets an
     * unprivileged process have a userfaultfd where vm.unprivileged_userfaultfd is 0 (Debian's
     * default); older kernels without the flag get the plain call. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
    h->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (h->uffd < 0 && errno == EINVAL)
        h->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    CHECK_MSG(h->uffd >= 0, "userfaultfd: %s", strerror(errno));
    struct uffdio_api api = {.api = UFFD_API};
    CHECK(ioctl(h->uffd, UFFDIO_API, &api) == 0);
    h->page = mmap(NULL, (size_t)h->page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    CHECK(h->page != MAP_FAILED);
    struct uffdio_register reg = {
        .range = {.start = (uintptr_t)h->page, .len = (uint64_t)h->page_size},
        .mode = UFFDIO_REGISTER_MODE_MISSING};
    CHECK(ioctl(h->uffd, UFFDIO_REGISTER, &reg) == 0);
    h->status = STATUS_PENDING;
    CHECK(pthread_create(&h->thread, NULL, held_post_thread, h) == 0);
    struct pollfd pfd = {.fd = h->uffd, .events = POLLIN};
    CHECK_MSG(poll(&pfd, 1, (int)FIXTURE_WAIT_MS) == 1, "the post never read its SGE list");
    struct uffd_msg msg;
    CHECK(read(h->uffd, &msg, sizeof msg) == (ssize_t)sizeof msg);
    CHECK(msg.event == UFFD_EVENT_PAGEFAULT);
    CHECK(msg.arg.pagefault.address - (uintptr_t)h->page < (uint64_t)h->page_size);
}

/* Supply the page (the SGE in it): the held post goes on; wait for it and return its status. */
static NTSTATUS held_post_end(struct held_post *h)
{
    static NDK_SGE src[4096 / sizeof(NDK_SGE)] __attribute__((aligned(4096)));
    CHECK((size_t)h->page_size <= sizeof src);
    memset(src, 0, sizeof src);
    src[0] = h->sge;
    struct uffdio_copy copy = {
        .dst = (uintptr_t)h->page, .src = (uintptr_t)src, .len = (uint64_t)h->page_size};
    CHECK_MSG(ioctl(h->uffd, UFFDIO_COPY, &copy) == 0, "UFFDIO_COPY: %s", strerror(errno));
    pthread_join(h->thread, NULL); /* it has its page: nothing holds it any more */
    close(h->uffd);
    munmap(h->page, (size_t)h->page_size);
    return h->status;
}

/* A second post on another thread (it may wait on a lock the held one has). */
struct other_post {
    enum held_kind kind;
    NDK_QP *qp;
    NDK_SRQ *srq;
    NDK_SGE sge;
    void *ctx;
    pthread_t thread;
    NTSTATUS status;
};

static void *other_post_thread(void *arg)
{
    struct other_post *o = arg;
    switch (o->kind) {
    case HELD_SEND:
        o->status = o->qp->Dispatch->NdkSend(o->qp, o->ctx, &o->sge, 1, 0);
        break;
    case HELD_RECEIVE:
        o->status = o->qp->Dispatch->NdkReceive(o->qp, o->ctx, &o->sge, 1);
        break;
    case HELD_SRQ_RECEIVE:
        o->status = o->srq->Dispatch->NdkSrqReceive(o->srq, o->ctx, &o->sge, 1);
        break;
    }
    return NULL;
}

static void expect_only(NDK_ADAPTER *a, SOFTNDK_VERIFY_RULE rule, uint64_t want)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    for (int i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        CHECK_MSG(c.VerifyViolations[i] == (i == (int)rule ? want : 0),
                  "VerifyViolations[%d] = %llu, want %llu", i,
                  (unsigned long long)c.VerifyViolations[i],
                  (unsigned long long)(i == (int)rule ? want : 0));
}

static uint64_t wait_rule(NDK_ADAPTER *a, SOFTNDK_VERIFY_RULE rule)
{
    return fx_wait_counter(
        a, offsetof(SOFTNDK_COUNTERS, VerifyViolations) + sizeof(ULONG64) * (size_t)rule, 1);
}

static struct fx_pair *pair(SOFTNDK_VERIFY_MODE mode)
{
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, NULL);
    fx_options(&os, NULL);
    oc.Verify = os.Verify = mode;
    return fx_pair_open_with(&oc, &os, 1u << 16, 16, 16);
}

/* Two Sends on one QP's initiator queue at once: post_concurrent, named on the QP with the
 * second poster's RequestContext. The initiator queue has no lock ([POST-3]): two posts that
 * both take a slot would corrupt it, as they would on a hardware queue, so the second Send here
 * is one that is refused by its flags before it touches the queue; the first one then goes
 * out and the connection stays up. */
TEST(two_threads_sending_on_one_qp)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = pair(SoftNdkVerifyWarn);
    fx_post_recv(&p->sv, 0x10, 0, 4096);
    struct held_post h = {
        .kind = HELD_SEND, .qp = p->cl.qp, .ctx = (void *)0x5001, .sge = fx_sge(&p->cl, 0, 256)};
    held_post_begin(&h);
    NDK_SGE g = fx_sge(&p->cl, 4096, 256);
    CHECK_STATUS(p->cl.qp->Dispatch->NdkSend(p->cl.qp, (void *)0x5002, &g, 1, 0x80000000u),
                 STATUS_INVALID_PARAMETER); /* this thread, while the other is inside */
    CHECK_EQ_U64(wait_rule(p->ac, SoftNdkVerifyPostConcurrent), 1);
    CHECK_STATUS(held_post_end(&h), STATUS_SUCCESS);
    fx_expect(&p->cl, 1);
    fx_expect(&p->sv, 1);
    CHECK_EQ_U64(p->cl.res[0].ctx, 0x5001);
    CHECK_STATUS(p->cl.res[0].status, STATUS_SUCCESS);
    expect_only(p->ac, SoftNdkVerifyPostConcurrent, 1);
    expect_only(p->as, SoftNdkVerifyRuleCount, 0);
    char obj[48];
    snprintf(obj, sizeof obj, "QP %p RequestContext %p:", (void *)p->cl.qp, (void *)0x5002);
    fx_disconnect(&p->cl, &p->sv);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [post_concurrent]", obj,
                                "NdkSend on the initiator queue of the QP while another thread "
                                "was inside a call on the same queue",
                                "POST-2", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    CHECK_EQ_U64(fx_count_lines(log, "closes with 1 violation(s): post_concurrent=1", NULL), 1);
    free(log);
}

/* Two Receives on one QP's receive queue at once. The queue has no lock of its own; under the
 * verifier the held one holds the posts' serializing lock, so the second waits inside the
 * provider after it was counted in (and named); both are posted in the end, none lost. */
TEST(two_threads_receiving_on_one_qp)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS opt;
    fx_options(&opt, NULL);
    opt.Verify = SoftNdkVerifyWarn;
    NDK_ADAPTER *ad = fx_open_with(&opt);
    struct fx_side *s = calloc(1, sizeof *s);
    fx_side_init(s, ad, 8192, 4, 4);
    struct held_post h = {
        .kind = HELD_RECEIVE, .qp = s->qp, .ctx = (void *)0x6001, .sge = fx_sge(s, 0, 4096)};
    held_post_begin(&h);
    struct other_post o = {
        .kind = HELD_RECEIVE, .qp = s->qp, .ctx = (void *)0x6002, .sge = fx_sge(s, 4096, 4096)};
    CHECK(pthread_create(&o.thread, NULL, other_post_thread, &o) == 0);
    CHECK_EQ_U64(wait_rule(ad, SoftNdkVerifyPostConcurrent), 1);
    CHECK_STATUS(held_post_end(&h), STATUS_SUCCESS);
    pthread_join(o.thread, NULL); /* the held one released the queue */
    CHECK_STATUS(o.status, STATUS_SUCCESS);
    expect_only(ad, SoftNdkVerifyPostConcurrent, 1);
    /* both were queued, neither lost: a flush completes each once */
    s->qp->Dispatch->NdkFlush(s->qp);
    CHECK_EQ_U64(fx_collect(s, 2, FIXTURE_WAIT_MS), 2);
    CHECK(s->res[0].ctx + s->res[1].ctx == 0x6001 + 0x6002 && s->res[0].ctx != s->res[1].ctx);
    CHECK_STATUS(s->res[0].status, STATUS_CANCELLED);
    CHECK_STATUS(s->res[1].status, STATUS_CANCELLED);
    char obj[48];
    snprintf(obj, sizeof obj, "QP %p RequestContext %p:", (void *)s->qp, (void *)0x6002);
    fx_side_close(s);
    free(s);
    ndk_close_adapter(ad);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [post_concurrent]", obj,
                                "NdkReceive on the receive queue of the QP", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* Two NdkSrqReceive on one SRQ at once: srq_concurrent on the SRQ. */
TEST(two_threads_receiving_on_one_srq)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS opt;
    fx_options(&opt, NULL);
    opt.Verify = SoftNdkVerifyWarn;
    NDK_ADAPTER *ad = fx_open_with(&opt);
    struct fx_side *s = calloc(1, sizeof *s);
    fx_side_init(s, ad, 8192, 4, 4);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(s->pd->Dispatch->NdkCreateSrq(s->pd, 16, 1, 0, NULL, NULL, NULL, ndk_create_never,
                                               NULL, &srq),
                 STATUS_SUCCESS);
    struct held_post h = {
        .kind = HELD_SRQ_RECEIVE, .srq = srq, .ctx = (void *)0x7001, .sge = fx_sge(s, 0, 4096)};
    held_post_begin(&h);
    struct other_post o = {
        .kind = HELD_SRQ_RECEIVE, .srq = srq, .ctx = (void *)0x7002, .sge = fx_sge(s, 4096, 4096)};
    CHECK(pthread_create(&o.thread, NULL, other_post_thread, &o) == 0);
    CHECK_EQ_U64(wait_rule(ad, SoftNdkVerifySrqConcurrent), 1);
    CHECK_STATUS(held_post_end(&h), STATUS_SUCCESS);
    pthread_join(o.thread, NULL);
    CHECK_STATUS(o.status, STATUS_SUCCESS);
    expect_only(ad, SoftNdkVerifySrqConcurrent, 1);
    char obj[48];
    snprintf(obj, sizeof obj, "SRQ %p RequestContext %p:", (void *)srq, (void *)0x7002);
    fixture_close_wait(&srq->Header);
    fx_side_close(s);
    free(s);
    ndk_close_adapter(ad);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [srq_concurrent]", obj,
                                "NdkSrqReceive on the SRQ while another thread", "SRQ-7", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}

/* A clean concurrent consumer under strict (a report would abort): while one thread is held
 * inside a Receive on one QP, another posts a Receive on a second QP of the same adapter, and
 * while a Send is held on a connected QP the same QP's receive queue is posted (different
 * queues of one QP may be called concurrently). No report. */
TEST(posts_on_different_queues_at_once_are_not_named)
{
    SOFTNDK_OPTIONS opt;
    fx_options(&opt, NULL);
    opt.Verify = SoftNdkVerifyStrict;
    NDK_ADAPTER *ad = fx_open_with(&opt);
    struct fx_side *s1 = calloc(1, sizeof *s1), *s2 = calloc(1, sizeof *s2);
    fx_side_init(s1, ad, 8192, 4, 4);
    fx_side_init(s2, ad, 8192, 4, 4);
    struct held_post h = {
        .kind = HELD_RECEIVE, .qp = s1->qp, .ctx = (void *)0x8001, .sge = fx_sge(s1, 0, 4096)};
    held_post_begin(&h);
    fx_post_recv(s2, 0x8002, 0, 4096); /* this thread, while the other is inside */
    CHECK_STATUS(held_post_end(&h), STATUS_SUCCESS);
    expect_only(ad, SoftNdkVerifyRuleCount, 0);
    fx_side_close(s1);
    fx_side_close(s2);
    free(s1);
    free(s2);
    ndk_close_adapter(ad);

    struct fx_pair *p = pair(SoftNdkVerifyStrict);
    fx_post_recv(&p->sv, 0x20, 0, 4096);
    struct held_post hs = {
        .kind = HELD_SEND, .qp = p->cl.qp, .ctx = (void *)0x8003, .sge = fx_sge(&p->cl, 0, 256)};
    held_post_begin(&hs);
    fx_post_recv(&p->cl, 0x8004, 4096, 4096); /* the same QP's receive queue */
    CHECK_STATUS(held_post_end(&hs), STATUS_SUCCESS);
    fx_expect(&p->cl, 1);
    fx_expect(&p->sv, 1);
    expect_only(p->ac, SoftNdkVerifyRuleCount, 0);
    expect_only(p->as, SoftNdkVerifyRuleCount, 0);
    fx_disconnect(&p->cl, &p->sv);
    fx_pair_close(p);
}

/* Two threads posting to two different QPs, many times, under strict: no report. */
struct poster {
    struct fx_side *s;
    unsigned n;
    unsigned unexpected; /* statuses other than success / queue full */
};

static void *poster_thread(void *arg)
{
    struct poster *ps = arg;
    for (unsigned i = 0; i < ps->n; i++) {
        NDK_SGE g = fx_sge(ps->s, 0, 64);
        NTSTATUS st = ps->s->qp->Dispatch->NdkReceive(ps->s->qp, (void *)(uintptr_t)i, &g, 1);
        if (st == STATUS_SUCCESS)
            continue;
        if (st != STATUS_NO_MORE_ENTRIES)
            ps->unexpected++;
        ps->s->qp->Dispatch->NdkFlush(ps->s->qp); /* full: flush and go on */
        NDK_RESULT r[64];
        while (ps->s->cq->Dispatch->NdkGetCqResults(ps->s->cq, r, 64) > 0) {
        }
    }
    return NULL;
}

TEST(two_threads_posting_to_two_qps_are_not_named)
{
    SOFTNDK_OPTIONS opt;
    fx_options(&opt, NULL);
    opt.Verify = SoftNdkVerifyStrict;
    NDK_ADAPTER *ad = fx_open_with(&opt);
    struct fx_side *s1 = calloc(1, sizeof *s1), *s2 = calloc(1, sizeof *s2);
    fx_side_init(s1, ad, 8192, 64, 4);
    fx_side_init(s2, ad, 8192, 64, 4);
    struct poster p1 = {s1, 5000, 0}, p2 = {s2, 5000, 0};
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, poster_thread, &p1) == 0);
    CHECK(pthread_create(&t2, NULL, poster_thread, &p2) == 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_EQ_U64(p1.unexpected + p2.unexpected, 0);
    expect_only(ad, SoftNdkVerifyRuleCount, 0);
    fx_side_close(s1);
    fx_side_close(s2);
    free(s1);
    free(s2);
    ndk_close_adapter(ad);
}

/* [CLOSE-3] for posts: the QP is closed by another thread while a Receive on it is held inside
 * the provider. close_during_post on the QP; the close waits for the post (the verifier holds
 * the QP for the post's duration) and completes after it, and the receive is flushed. The
 * close runs on its own thread: it takes the receive queue's lock, which the held post has. */
struct closer {
    NDK_QP *qp;
    struct harness_event done;
    pthread_t thread;
    NTSTATUS status;
};

static void closer_done(void *ctx)
{
    harness_event_signal(ctx);
}

static void *closer_thread(void *arg)
{
    struct closer *c = arg;
    c->status = ndk_close_any(&c->qp->Header, closer_done, &c->done);
    return NULL;
}

TEST(qp_closed_while_a_post_on_it_runs)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS opt;
    fx_options(&opt, NULL);
    opt.Verify = SoftNdkVerifyWarn;
    NDK_ADAPTER *ad = fx_open_with(&opt);
    struct fx_side *s = calloc(1, sizeof *s);
    fx_side_init(s, ad, 8192, 4, 4);
    struct held_post h = {
        .kind = HELD_RECEIVE, .qp = s->qp, .ctx = (void *)0x9001, .sge = fx_sge(s, 0, 4096)};
    held_post_begin(&h);
    struct closer c = {.qp = s->qp};
    harness_event_init(&c.done);
    CHECK(pthread_create(&c.thread, NULL, closer_thread, &c) == 0);
    CHECK_EQ_U64(wait_rule(ad, SoftNdkVerifyCloseDuringPost), 1);
    CHECK(!harness_event_wait(&c.done, 1, 100)); /* not while the post runs */
    CHECK_STATUS(held_post_end(&h), STATUS_SUCCESS);
    pthread_join(c.thread, NULL);
    /* The close waited in close_begin for the queue's lock: whether the post's reference was
     * gone when the close dropped its own decides inline or pending, both after the post. */
    if (c.status != STATUS_SUCCESS) {
        CHECK_STATUS(c.status, STATUS_PENDING);
        CHECK(harness_event_wait(&c.done, 1, FIXTURE_WAIT_MS));
    }
    CHECK_EQ_U64(fx_collect(s, 1, FIXTURE_WAIT_MS), 1);
    CHECK_EQ_U64(s->res[0].ctx, 0x9001);
    CHECK_STATUS(s->res[0].status, STATUS_CANCELLED);
    expect_only(ad, SoftNdkVerifyCloseDuringPost, 1);
    char obj[48];
    snprintf(obj, sizeof obj, "QP %p:", (void *)s->qp);
    harness_event_destroy(&c.done);
    fixture_close_wait(&s->mr->Header);
    fixture_close_wait(&s->cq->Header);
    fixture_close_wait(&s->pd->Header);
    free(s->buf);
    harness_event_destroy(&s->disc_ev);
    harness_event_destroy(&s->cq_ev);
    free(s);
    ndk_close_adapter(ad);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [close_during_post]", obj,
                                "closed while 1 post(s) on it were running", "CLOSE-3", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 1);
    free(log);
}
