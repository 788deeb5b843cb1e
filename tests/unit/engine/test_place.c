/* Where a progress thread runs: following the consumer it notifies (engine.h,
 * sndk_engine_note_waiter; docs/engine.md, "Following the waiter"). The notes are made from
 * work items on the thread, as a CQ's notification makes them; what is checked is the place the
 * engine reports, the CPU the next work item runs on and the thread's affinity mask. */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 16 /* FOLLOW_WINDOW: notes judged together */

struct note_item {
    struct sndk_work w;
    struct sndk_engine *e;
    int cpu; /* the waiter's CPU this note names */
    struct harness_event ev;
    int ran_on;     /* sched_getcpu() in the work fn */
    int mask_cpus;  /* CPUs in the thread's affinity mask then */
    int mask_first; /* the lowest of them */
};

static void note_fn(struct sndk_work *w)
{
    struct note_item *n = container_of(w, struct note_item, w);
    if (n->cpu >= 0)
        sndk_engine_note_waiter(n->e, n->cpu);
    n->ran_on = sched_getcpu();
    cpu_set_t set;
    CPU_ZERO(&set);
    n->mask_cpus = -1;
    n->mask_first = -1;
    if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0) {
        n->mask_cpus = CPU_COUNT(&set);
        for (int c = 0; c < CPU_SETSIZE && n->mask_first < 0; c++)
            if (CPU_ISSET(c, &set))
                n->mask_first = c;
    }
    harness_event_signal(&n->ev);
}

/* One note naming cpu (or none, cpu < 0) made on thread 0, waited for; what it saw. */
static struct note_item note(struct sndk_engine *e, int cpu)
{
    struct note_item n = {.e = e, .cpu = cpu};
    harness_event_init(&n.ev);
    sndk_work_init(&n.w, note_fn);
    CHECK(sndk_engine_queue_on(e, 0, &n.w));
    CHECK(harness_event_wait(&n.ev, 1, WAIT_MS));
    harness_event_destroy(&n.ev);
    return n;
}

static void notes(struct sndk_engine *e, int cpu, unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        note(e, cpu);
}

static struct sndk_engine *mk_engine_follow(bool follow)
{
    struct sndk_engine_options opt;
    sndk_engine_options_default(&opt);
    opt.spin_us = 0; /* it sleeps whenever idle: the idle check runs before each sleep */
    opt.follow_waiters = follow;
    struct sndk_engine *e = NULL;
    CHECK_EQ_I64(sndk_engine_create(&opt, &e), 0);
    return e;
}

/* The highest CPU this process may use: not the one the test thread started on, mostly. */
static int last_cpu(void)
{
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            last = c;
    return last;
}

static int first_cpu(void)
{
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return -1;
}

TEST(place_follows_after_a_window_of_notes)
{
    struct sndk_engine *e = mk_engine_follow(true);
    int target = last_cpu();
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    if (test_cpus() < 2) {
        /* one CPU: nowhere else to be; notes change nothing */
        notes(e, target, 2 * WINDOW);
        CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
        sndk_engine_destroy(e);
        return;
    }
    notes(e, target, WINDOW - 1);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1); /* a window not yet complete */
    note(e, target);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), target);
    struct note_item n = note(e, -1);
    CHECK_EQ_I64(n.ran_on, target);
    CHECK_EQ_I64(n.mask_cpus, 1);
    CHECK_EQ_I64(n.mask_first, target);
    /* Notes naming where it is keep it there. */
    notes(e, target, 2 * WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), target);
    sndk_engine_destroy(e);
}

TEST(place_stays_when_waiters_are_on_several_cpus)
{
    if (test_cpus() < 2)
        return; /* nothing to alternate between */
    struct sndk_engine *e = mk_engine_follow(true);
    int a = first_cpu(), b = last_cpu();
    for (unsigned i = 0; i < 4 * WINDOW; i++)
        note(e, i % 2 ? a : b);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    /* One odd note in a window is enough to keep it where it is. */
    notes(e, b, WINDOW - 1);
    note(e, a);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    sndk_engine_destroy(e);
}

TEST(place_never_moves_when_off)
{
    struct sndk_engine *e = mk_engine_follow(false);
    notes(e, last_cpu(), 4 * WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    struct note_item n = note(e, -1);
    CHECK_EQ_I64(n.mask_cpus, (int64_t)test_cpus());
    sndk_engine_destroy(e);
}

TEST(place_ignores_cpus_outside_the_process_affinity)
{
    struct sndk_engine *e = mk_engine_follow(true);
    notes(e, CPU_SETSIZE - 1 > last_cpu() ? CPU_SETSIZE - 1 : last_cpu() + 1, 2 * WINDOW);
    notes(e, CPU_SETSIZE + 5, 2 * WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    sndk_engine_destroy(e);
}

TEST(place_one_thread_follows_a_cpu)
{
    if (test_cpus() < 2)
        return;
    int target = last_cpu();
    struct sndk_engine *e1 = mk_engine_follow(true);
    struct sndk_engine *e2 = mk_engine_follow(true);
    notes(e1, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e1, 0), target);
    /* Two spinners must not share a core: the second stays where it is. */
    notes(e2, target, 2 * WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e2, 0), -1);
    /* The first thread's end gives the CPU back. */
    sndk_engine_destroy(e1);
    notes(e2, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e2, 0), target);
    sndk_engine_destroy(e2);
}

/* ---- a busy thread leaves, and waits longer each time before it follows again */

struct busy_src {
    struct sndk_source s;
    unsigned work_us; /* what each event costs the thread */
    atomic_uint calls;
};

static void busy_fn(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct busy_src *b = container_of(s, struct busy_src, s);
    uint64_t v;
    CHECK(read(s->fd, &v, sizeof v) == sizeof v);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000u + (uint64_t)(t.tv_nsec / 1000) -
               (uint64_t)(t0.tv_nsec / 1000) <
           b->work_us);
    atomic_fetch_add(&b->calls, 1);
}

struct done_ev {
    struct sndk_work w;
    struct harness_event ev;
};

static void done_fn(struct sndk_work *w)
{
    harness_event_signal(&container_of(w, struct done_ev, w)->ev);
}

TEST(place_leaves_a_cpu_when_busy_and_backs_off)
{
    if (test_cpus() < 2)
        return;
    struct sndk_engine *e = mk_engine_follow(true);
    int target = last_cpu();
    notes(e, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), target);

    /* Each note follows an event that kept the thread busy 2 ms: a stream, not a conversation. */
    struct busy_src b = {.work_us = 2000};
    atomic_init(&b.calls, 0);
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK_EQ_I64(sndk_source_add(e, &b.s, fd, EPOLLIN, busy_fn, 0), 0);
    for (unsigned i = 0; i < WINDOW; i++) {
        uint64_t one = 1;
        CHECK(write(fd, &one, sizeof one) == sizeof one);
        CHECK(wait_ge(&b.calls, i + 1, WAIT_MS));
        note(e, target);
    }
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    struct note_item n = note(e, -1);
    CHECK_EQ_I64(n.mask_cpus, (int64_t)test_cpus());

    /* Waiting again at once: it stays (the hold after a leave is 200 ms). */
    notes(e, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    usleep(250 * 1000);
    notes(e, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), target);

    struct done_ev d;
    harness_event_init(&d.ev);
    sndk_work_init(&d.w, done_fn);
    sndk_source_remove(&b.s, &d.w);
    CHECK(harness_event_wait(&d.ev, 1, WAIT_MS));
    harness_event_destroy(&d.ev);
    close(fd);
    sndk_engine_destroy(e);
}

static bool thread_free(void *arg)
{
    return sndk_engine_thread_cpu(arg, 0) == -1;
}

TEST_T(place_any_cpu_again_after_a_second_without_notes, 30)
{
    if (test_cpus() < 2)
        return;
    struct sndk_engine *e = mk_engine_follow(true);
    int target = last_cpu();
    notes(e, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), target);
    usleep(1100 * 1000);
    /* Woken by a work item, it checks before it sleeps again (after the item's signal). */
    note(e, -1);
    CHECK(harness_wait_until(thread_free, e, WAIT_MS));
    struct note_item n = note(e, -1);
    CHECK_EQ_I64(n.mask_cpus, (int64_t)test_cpus());
    sndk_engine_destroy(e);
}
