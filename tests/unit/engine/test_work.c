/* Deferred work: ordering, re-entrancy, duplicate queueing, concurrency, quiesce. */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- FIFO on one thread, and per-thread FIFO on several */

#define N_FIFO 2000

struct rec_item {
    struct sndk_work w;
    unsigned id;
    unsigned thread;
};

static atomic_uint rec_next;
static atomic_uint rec_done; /* bumped after the records are written: the test waits on it */
static unsigned rec_order[N_FIFO];
static int rec_thread[N_FIFO];
static struct sndk_engine *rec_engine;

static void rec_fn(struct sndk_work *w)
{
    struct rec_item *it = (struct rec_item *)w;
    unsigned pos = atomic_fetch_add(&rec_next, 1);
    if (pos < N_FIFO) {
        rec_order[pos] = it->id;
        rec_thread[it->id] = sndk_engine_current_thread(rec_engine);
    }
    atomic_fetch_add(&rec_done, 1);
}

TEST(work_fifo_one_thread)
{
    struct sndk_engine *e = rec_engine = mk_engine(1, 0);
    static struct rec_item items[N_FIFO];
    for (unsigned i = 0; i < N_FIFO; i++) {
        sndk_work_init(&items[i].w, rec_fn);
        items[i].id = i;
        CHECK(sndk_engine_queue(e, &items[i].w));
    }
    CHECK(wait_ge(&rec_done, N_FIFO, WAIT_MS));
    for (unsigned i = 0; i < N_FIFO; i++) {
        CHECK_EQ_U64(rec_order[i], i);
        CHECK_EQ_I64(rec_thread[i], 0);
    }
    sndk_engine_destroy(e);
}

TEST(work_fifo_per_thread)
{
    enum { T = 4 };
    struct sndk_engine *e = rec_engine = mk_engine(T, SNDK_ENGINE_DEFAULT_SPIN);
    CHECK_EQ_U64(sndk_engine_threads(e), T);
    static struct rec_item items[N_FIFO];
    for (unsigned i = 0; i < N_FIFO; i++) {
        sndk_work_init(&items[i].w, rec_fn);
        items[i].id = i;
        items[i].thread = i % T;
        CHECK(sndk_engine_queue_on(e, i % T, &items[i].w));
    }
    CHECK(wait_ge(&rec_done, N_FIFO, WAIT_MS));
    /* Each item ran on its thread, and the items of one thread ran in queue order. */
    unsigned last[T];
    memset(last, 0xff, sizeof last);
    for (unsigned pos = 0; pos < N_FIFO; pos++) {
        unsigned id = rec_order[pos];
        unsigned t = items[id].thread;
        CHECK_EQ_I64(rec_thread[id], (int)t);
        CHECK(last[t] == ~0u || last[t] < id);
        last[t] = id;
    }
    sndk_engine_destroy(e);
}

/* ---- queue from inside work: a chain, and an item that re-queues itself */

struct chain {
    struct sndk_work w;
    struct sndk_engine *e;
    unsigned left;
    atomic_uint runs;
    struct harness_event done;
};

static void chain_fn(struct sndk_work *w)
{
    struct chain *c = (struct chain *)w;
    CHECK(sndk_engine_on_progress_thread(c->e));
    atomic_fetch_add(&c->runs, 1);
    if (c->left-- > 0) {
        CHECK(sndk_engine_queue(c->e, w)); /* un-queued before fn: queueing again works */
        CHECK(!sndk_engine_queue(c->e, w));
    } else {
        harness_event_signal(&c->done);
    }
}

struct fan {
    struct sndk_work w;
    struct sndk_engine *e;
    unsigned depth;
};
static atomic_uint fan_runs;

static void fan_fn(struct sndk_work *w)
{
    struct fan *f = (struct fan *)w;
    atomic_fetch_add(&fan_runs, 1);
    if (f->depth > 0) {
        for (int i = 0; i < 2; i++) {
            struct fan *c = malloc(sizeof *c);
            CHECK(c);
            sndk_work_init(&c->w, fan_fn);
            c->e = f->e;
            c->depth = f->depth - 1;
            CHECK(sndk_engine_queue_on(f->e, (unsigned)i % sndk_engine_threads(f->e), &c->w));
        }
    }
    free(f); /* the engine does not touch w after fn */
}

TEST(work_queue_from_work)
{
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        struct sndk_engine *e = mk_engine(threads, SNDK_ENGINE_DEFAULT_SPIN);
        struct chain c = {.e = e, .left = 1000};
        atomic_init(&c.runs, 0);
        harness_event_init(&c.done);
        sndk_work_init(&c.w, chain_fn);
        CHECK(!sndk_engine_on_progress_thread(e));
        CHECK_EQ_I64(sndk_engine_current_thread(e), -1);
        CHECK(sndk_engine_queue(e, &c.w));
        CHECK(harness_event_wait(&c.done, 1, WAIT_MS));
        CHECK_EQ_U64(atomic_load(&c.runs), 1001);

        /* Fan-out: a binary tree of depth 8 queued from inside work, freed by its fns. */
        atomic_store(&fan_runs, 0);
        struct fan *root = malloc(sizeof *root);
        CHECK(root);
        sndk_work_init(&root->w, fan_fn);
        root->e = e;
        root->depth = 8;
        CHECK(sndk_engine_queue(e, &root->w));
        sndk_engine_quiesce(e); /* covers the transitive children */
        CHECK_EQ_U64(atomic_load(&fan_runs), (1u << 9) - 1);
        sndk_engine_destroy(e);
        harness_event_destroy(&c.done);
    }
}

/* ---- queue returns false while queued */

struct blocker {
    struct sndk_work w;
    struct harness_event entered, release;
};

static void blocker_fn(struct sndk_work *w)
{
    struct blocker *b = (struct blocker *)w;
    harness_event_signal(&b->entered);
    CHECK(harness_event_wait(&b->release, 1, WAIT_MS));
}

static atomic_uint count_runs;
static void count_fn(struct sndk_work *w)
{
    (void)w;
    atomic_fetch_add(&count_runs, 1);
}

TEST(work_queue_false_when_queued)
{
    struct sndk_engine *e = mk_engine(2, 0);
    struct blocker b;
    harness_event_init(&b.entered);
    harness_event_init(&b.release);
    sndk_work_init(&b.w, blocker_fn);
    CHECK(sndk_engine_queue_on(e, 0, &b.w));
    CHECK(harness_event_wait(&b.entered, 1, WAIT_MS));

    /* Thread 0 is held: w stays queued there. */
    struct sndk_work w;
    sndk_work_init(&w, count_fn);
    CHECK(sndk_engine_queue_on(e, 0, &w));
    CHECK(!sndk_engine_queue_on(e, 0, &w));
    CHECK(!sndk_engine_queue_on(e, 1, &w)); /* queued anywhere counts */
    CHECK(!sndk_engine_queue(e, &w));
    harness_event_signal(&b.release);
    CHECK(wait_ge(&count_runs, 1, WAIT_MS));
    sndk_engine_quiesce(e);
    CHECK_EQ_U64(atomic_load(&count_runs), 1);
    CHECK(sndk_engine_queue(e, &w)); /* it ran: queueable again */
    sndk_engine_quiesce(e);
    CHECK_EQ_U64(atomic_load(&count_runs), 2);
    sndk_engine_destroy(e);
    harness_event_destroy(&b.entered);
    harness_event_destroy(&b.release);
}

/* ---- many producers at once */

#define PRODUCERS 6
#define PER_PRODUCER 5000

struct prod_item {
    struct sndk_work w;
    unsigned producer, seq;
};

static atomic_uint prod_seen[PRODUCERS]; /* next expected seq of each producer */
static atomic_uint prod_order_errors;
static atomic_uint prod_runs;

static void prod_fn(struct sndk_work *w)
{
    struct prod_item *it = (struct prod_item *)w;
    /* Unpinned items of one producer all go to its home thread: they run in order. */
    if (atomic_fetch_add(&prod_seen[it->producer], 1) != it->seq)
        atomic_fetch_add(&prod_order_errors, 1);
    atomic_fetch_add(&prod_runs, 1);
}

struct producer {
    struct sndk_engine *e;
    unsigned id;
    struct prod_item *items;
};

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    for (unsigned i = 0; i < PER_PRODUCER; i++) {
        sndk_work_init(&p->items[i].w, prod_fn);
        p->items[i].producer = p->id;
        p->items[i].seq = i;
        if (!sndk_engine_queue(p->e, &p->items[i].w))
            atomic_fetch_add(&prod_order_errors, 1000000);
    }
    return NULL;
}

TEST_T(work_queue_many_threads, 60)
{
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        struct sndk_engine *e = mk_engine(threads, SNDK_ENGINE_DEFAULT_SPIN);
        atomic_store(&prod_runs, 0);
        for (unsigned i = 0; i < PRODUCERS; i++)
            atomic_store(&prod_seen[i], 0);
        pthread_t tid[PRODUCERS];
        struct producer p[PRODUCERS];
        for (unsigned i = 0; i < PRODUCERS; i++) {
            p[i] = (struct producer){e, i, calloc(PER_PRODUCER, sizeof(struct prod_item))};
            CHECK(p[i].items);
            CHECK_EQ_I64(pthread_create(&tid[i], NULL, producer_main, &p[i]), 0);
        }
        for (unsigned i = 0; i < PRODUCERS; i++)
            pthread_join(tid[i], NULL);
        sndk_engine_quiesce(e);
        CHECK_EQ_U64(atomic_load(&prod_runs), PRODUCERS * PER_PRODUCER);
        CHECK_EQ_U64(atomic_load(&prod_order_errors), 0);
        sndk_engine_destroy(e);
        for (unsigned i = 0; i < PRODUCERS; i++)
            free(p[i].items);
    }
}

/* ---- quiesce */

struct slow_item {
    struct sndk_work w;
    struct sndk_engine *e;
    unsigned children;
};
static atomic_uint slow_runs;

static void slow_fn(struct sndk_work *w)
{
    struct slow_item *s = (struct slow_item *)w;
    /* A little work so that quiesce really has to wait. */
    for (volatile unsigned i = 0; i < 20000; i++)
        ;
    if (s->children > 0) {
        s->children--;
        CHECK(sndk_engine_queue_on(s->e, (s->children + 1) % sndk_engine_threads(s->e), w));
        return;
    }
    atomic_fetch_add(&slow_runs, 1);
}

struct quiescer {
    struct sndk_engine *e;
};

static void *quiescer_main(void *arg)
{
    struct quiescer *q = arg;
    sndk_engine_quiesce(q->e);
    return NULL;
}

TEST(work_quiesce)
{
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    sndk_engine_quiesce(e); /* idle: returns at once */
    enum { N = 64 };
    static struct slow_item items[N];
    for (int round = 0; round < 5; round++) {
        atomic_store(&slow_runs, 0);
        for (unsigned i = 0; i < N; i++) {
            sndk_work_init(&items[i].w, slow_fn);
            items[i].e = e;
            items[i].children = 3; /* re-queued 3 times, alternating threads */
            CHECK(sndk_engine_queue(e, &items[i].w));
        }
        if (round % 2) {
            /* Several quiescers at once all return with the work done. */
            pthread_t q[3];
            struct quiescer qa = {e};
            for (int i = 0; i < 3; i++)
                CHECK_EQ_I64(pthread_create(&q[i], NULL, quiescer_main, &qa), 0);
            for (int i = 0; i < 3; i++)
                pthread_join(q[i], NULL);
        } else {
            sndk_engine_quiesce(e);
        }
        CHECK_EQ_U64(atomic_load(&slow_runs), N);
    }
    sndk_engine_destroy(e);
}

/* Quiesce does not wait for work queued after it started by other threads. */
static atomic_bool flood_stop;
struct flood {
    struct sndk_engine *e;
    struct sndk_work w[4];
};

static void *flood_main(void *arg)
{
    struct flood *f = arg;
    for (int i = 0; i < 4; i++)
        sndk_work_init(&f->w[i], count_fn);
    while (!atomic_load(&flood_stop))
        for (int i = 0; i < 4; i++)
            sndk_engine_queue(f->e, &f->w[i]);
    return NULL;
}

TEST(work_quiesce_not_starved)
{
    struct sndk_engine *e = mk_engine(1, 0);
    struct flood f = {.e = e};
    pthread_t tid;
    atomic_store(&flood_stop, false);
    CHECK_EQ_I64(pthread_create(&tid, NULL, flood_main, &f), 0);
    for (int i = 0; i < 50; i++)
        sndk_engine_quiesce(e);
    atomic_store(&flood_stop, true);
    pthread_join(tid, NULL);
    sndk_engine_destroy(e);
}

/* ---- thread identity, names and signal mask */

struct probe {
    struct sndk_work w;
    struct sndk_engine *e;
    int thread;
    char name[32];
    bool sigint_blocked, sigterm_blocked;
    struct harness_event ev;
};

static void probe_fn(struct sndk_work *w)
{
    struct probe *p = (struct probe *)w;
    p->thread = sndk_engine_current_thread(p->e);
    pthread_getname_np(pthread_self(), p->name, sizeof p->name);
    sigset_t set;
    pthread_sigmask(SIG_SETMASK, NULL, &set);
    p->sigint_blocked = sigismember(&set, SIGINT) == 1;
    p->sigterm_blocked = sigismember(&set, SIGTERM) == 1;
    harness_event_signal(&p->ev);
}

static void probe(struct sndk_engine *e, unsigned thread, struct probe *p)
{
    memset(p, 0, sizeof *p);
    p->e = e;
    harness_event_init(&p->ev);
    sndk_work_init(&p->w, probe_fn);
    CHECK(sndk_engine_queue_on(e, thread, &p->w));
    CHECK(harness_event_wait(&p->ev, 1, WAIT_MS));
    harness_event_destroy(&p->ev);
}

TEST(engine_threads_named_and_masked)
{
    sigset_t before, after;
    pthread_sigmask(SIG_SETMASK, NULL, &before);
    struct sndk_engine *e = mk_engine(3, 0);
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    CHECK_EQ_I64(sigismember(&before, SIGINT), sigismember(&after, SIGINT));
    CHECK_EQ_I64(sigismember(&after, SIGUSR1), 0);
    struct probe p;
    for (unsigned i = 0; i < 3; i++) {
        probe(e, i, &p);
        CHECK_EQ_I64(p.thread, (int)i);
        char want[16];
        snprintf(want, sizeof want, "sndk-prog-%u", i);
        CHECK_MSG(strcmp(p.name, want) == 0, "name %s", p.name);
        CHECK(p.sigint_blocked && p.sigterm_blocked);
    }
    sndk_engine_destroy(e);

    /* A long prefix is cut, the index kept. */
    struct sndk_engine_options opt;
    sndk_engine_options_default(&opt);
    opt.threads = 12;
    opt.spin_us = 0;
    opt.name = "averyveryverylongname";
    CHECK_EQ_I64(sndk_engine_create(&opt, &e), 0);
    probe(e, 11, &p);
    CHECK_MSG(strcmp(p.name, "averyveryver-11") == 0, "name %s", p.name);
    probe(e, 3, &p);
    CHECK_MSG(strcmp(p.name, "averyveryvery-3") == 0, "name %s", p.name);
    sndk_engine_destroy(e);
}

TEST(engine_spin_policy)
{
    unsigned cpus = harness_cpus();
    struct sndk_engine *e = mk_engine(1, 50);
    CHECK_EQ_U64(sndk_engine_spin_us(e), cpus > 1 ? 50 : 0);
    sndk_engine_destroy(e);
    e = mk_engine(cpus + 1, 50); /* more spinners than cores: never spin */
    CHECK_EQ_U64(sndk_engine_spin_us(e), 0);
    sndk_engine_destroy(e);
    e = mk_engine(1, 0);
    CHECK_EQ_U64(sndk_engine_spin_us(e), 0);
    sndk_engine_destroy(e);

    struct sndk_engine_options opt;
    sndk_engine_options_default(&opt);
    CHECK_EQ_U64(opt.threads, 1);
    CHECK_EQ_U64(opt.spin_us, SNDK_ENGINE_DEFAULT_SPIN);
    opt.threads = SNDK_ENGINE_MAX_THREADS + 1;
    CHECK_EQ_I64(sndk_engine_create(&opt, &e), -EINVAL);
    CHECK(e == NULL);
    CHECK_EQ_I64(sndk_engine_create(NULL, &e), 0); /* defaults */
    CHECK_EQ_U64(sndk_engine_threads(e), 1);
    sndk_engine_destroy(e);
}
