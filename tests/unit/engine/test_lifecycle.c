/* Engine lifecycle: destroy with pending work, timers and sources; create/destroy churn. */
#include "common.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct chained {
    struct sndk_work w;
    struct sndk_engine *e;
    unsigned depth;
    atomic_uint *runs;
};

static void chained_fn(struct sndk_work *w)
{
    struct chained *c = (struct chained *)w;
    atomic_fetch_add(c->runs, 1);
    if (c->depth-- > 0)
        CHECK(sndk_engine_queue_on(c->e, c->depth % sndk_engine_threads(c->e), w));
}

static atomic_uint timer_fires;
static void never_fn(struct sndk_timer *t)
{
    (void)t;
    atomic_fetch_add(&timer_fires, 1);
}

struct lsrc {
    struct sndk_source s;
    struct sndk_work done;
    atomic_uint *dones;
    atomic_uint calls;
    atomic_int in_fn;
};

static void lsrc_fn(struct sndk_source *s, uint32_t ev)
{
    (void)ev;
    struct lsrc *l = (struct lsrc *)s;
    atomic_fetch_add(&l->in_fn, 1);
    atomic_fetch_add(&l->calls, 1);
    atomic_fetch_sub(&l->in_fn, 1);
}

static void lsrc_done(struct sndk_work *w)
{
    struct lsrc *l = container_of(w, struct lsrc, done);
    close(l->s.fd);
    atomic_fetch_add(l->dones, 1);
}

/* Sanitizer runtimes start helper threads of their own (TSan's background thread) on first
 * use: take the thread baseline after one engine has come and gone. */
static void warm_up(void)
{
    sndk_engine_destroy(mk_engine(1, 0));
}

TEST(destroy_with_pending_work_timers_sources)
{
    warm_up();
    int base_fds = harness_open_fds();
    int base_threads = thread_count();
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        struct sndk_engine *e = mk_engine(threads, SNDK_ENGINE_DEFAULT_SPIN);
        CHECK_EQ_I64(thread_count(), base_threads + (int)threads);
        CHECK(harness_open_fds() > base_fds);

        enum { NW = 500, NS = 8, NT = 10 };
        static atomic_uint runs, dones;
        atomic_store(&runs, 0);
        atomic_store(&dones, 0);
        atomic_store(&timer_fires, 0);
        struct chained *cw = calloc(NW, sizeof *cw);
        CHECK(cw);
        for (unsigned i = 0; i < NW; i++) {
            sndk_work_init(&cw[i].w, chained_fn);
            cw[i].e = e;
            cw[i].depth = 4; /* each runs 5 times in all, the last 4 queued from work */
            cw[i].runs = &runs;
            CHECK(sndk_engine_queue(e, &cw[i].w));
        }
        struct sndk_timer tm[NT];
        for (unsigned i = 0; i < NT; i++) {
            sndk_timer_init(&tm[i], never_fn);
            sndk_timer_arm_on(e, i % threads, &tm[i], 30u * 1000000u);
        }
        /* Sources: always readable; half removed right before destroy (their done items are
         * still queued when destroy starts), half never removed. */
        struct lsrc src[NS];
        int fds[NS];
        for (unsigned i = 0; i < NS; i++) {
            src[i] = (struct lsrc){.dones = &dones};
            sndk_work_init(&src[i].done, lsrc_done);
            fds[i] = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
            CHECK(fds[i] >= 0);
            CHECK_EQ_I64(sndk_source_add(e, &src[i].s, fds[i], EPOLLIN, lsrc_fn, -1), 0);
        }
        for (unsigned i = 0; i < NS / 2; i++)
            sndk_source_remove(&src[i].s, &src[i].done);

        sndk_engine_destroy(e);

        CHECK_EQ_U64(atomic_load(&runs), NW * 5u);
        CHECK_EQ_U64(atomic_load(&dones), NS / 2);
        CHECK_EQ_U64(atomic_load(&timer_fires), 0);
        for (unsigned i = 0; i < NT; i++) {
            CHECK(!sndk_timer_pending(&tm[i])); /* dropped */
            CHECK(!sndk_timer_cancel(&tm[i]));
        }
        for (unsigned i = 0; i < NS; i++)
            CHECK_EQ_I64(atomic_load(&src[i].in_fn), 0);
        /* No callback after destroy returned. */
        unsigned calls[NS];
        for (unsigned i = 0; i < NS; i++)
            calls[i] = atomic_load(&src[i].calls);
        for (unsigned i = NS / 2; i < NS; i++)
            close(fds[i]); /* never removed: still the owner's */
        for (unsigned i = 0; i < NS; i++)
            CHECK_EQ_U64(atomic_load(&src[i].calls), calls[i]);
        free(cw);
        CHECK_EQ_I64(harness_open_fds(), base_fds);
        CHECK_EQ_I64(thread_count_settled(base_threads), base_threads);
    }
}

TEST_T(create_destroy_1000, 120)
{
    warm_up();
    int base_fds = harness_open_fds();
    int base_threads = thread_count();
    CHECK(base_fds > 0 && base_threads > 0);
    static atomic_uint runs;
    for (unsigned i = 0; i < 1000; i++) {
        struct sndk_engine *e = mk_engine(1 + i % 3, i % 2 ? SNDK_ENGINE_DEFAULT_SPIN : 0);
        struct chained c = {.e = e, .depth = i % 4, .runs = &runs};
        sndk_work_init(&c.w, chained_fn);
        CHECK(sndk_engine_queue(e, &c.w));
        sndk_engine_destroy(e);
    }
    unsigned want = 0;
    for (unsigned i = 0; i < 1000; i++)
        want += 1 + i % 4;
    CHECK_EQ_U64(atomic_load(&runs), want);
    CHECK_EQ_I64(harness_open_fds(), base_fds);
    CHECK_EQ_I64(thread_count_settled(base_threads), base_threads);
}
