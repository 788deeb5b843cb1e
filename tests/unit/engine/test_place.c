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
    int cpu; /* the waiter's CPU this note names; < 0: no note, only look */
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
    n->mask_cpus = n->mask_first = -1;
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

/* Thread 0 follows cpu: the engine says so, and its next work item runs there, alone. */
static void check_on_cpu(struct sndk_engine *e, int cpu)
{
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), cpu);
    struct note_item n = note(e, -1);
    CHECK_EQ_I64(n.ran_on, cpu);
    CHECK_EQ_I64(n.mask_cpus, 1);
    CHECK_EQ_I64(n.mask_first, cpu);
}

/* Thread 0 is on any CPU: the engine says so, and its mask is the process's whole one. */
static void check_on_any_cpu(struct sndk_engine *e)
{
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    CHECK_EQ_I64(note(e, -1).mask_cpus, (int64_t)harness_cpus());
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

/* An engine whose thread follows cpu after a window of notes naming it. */
static struct sndk_engine *engine_following(int cpu)
{
    struct sndk_engine *e = mk_engine_follow(true);
    notes(e, cpu, WINDOW);
    check_on_cpu(e, cpu);
    return e;
}

TEST(place_follows_after_a_window_of_notes)
{
    struct sndk_engine *e = mk_engine_follow(true);
    int target = harness_cpu_last();
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    if (harness_cpus() < 2) {
        /* one CPU: nowhere else to be; notes change nothing */
        notes(e, target, 2 * WINDOW);
        CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
        sndk_engine_destroy(e);
        return;
    }
    notes(e, target, WINDOW - 1);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1); /* a window not yet complete */
    note(e, target);
    check_on_cpu(e, target);
    /* Notes naming where it is keep it there. */
    notes(e, target, 2 * WINDOW);
    check_on_cpu(e, target);
    sndk_engine_destroy(e);
}

TEST(place_stays_when_waiters_are_on_several_cpus)
{
    if (harness_cpus() < 2)
        return; /* nothing to alternate between */
    struct sndk_engine *e = mk_engine_follow(true);
    int a = harness_cpu_first(), b = harness_cpu_last();
    for (unsigned i = 0; i < 4 * WINDOW; i++)
        note(e, i % 2 ? a : b);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    /* One odd note in a window is enough to keep it where it is. */
    notes(e, b, WINDOW - 1);
    note(e, a);
    check_on_any_cpu(e);
    sndk_engine_destroy(e);
}

TEST(place_never_moves_when_off)
{
    struct sndk_engine *e = mk_engine_follow(false);
    notes(e, harness_cpu_last(), 4 * WINDOW);
    check_on_any_cpu(e);
    sndk_engine_destroy(e);
}

TEST(place_ignores_cpus_outside_the_process_affinity)
{
    struct sndk_engine *e = mk_engine_follow(true);
    notes(e, harness_cpu_last() + 1, 2 * WINDOW); /* above every CPU the process may use */
    notes(e, CPU_SETSIZE + 5, 2 * WINDOW);        /* beyond any CPU set */
    check_on_any_cpu(e);
    sndk_engine_destroy(e);
}

TEST(place_one_thread_follows_a_cpu)
{
    if (harness_cpus() < 2)
        return;
    int target = harness_cpu_last();
    struct sndk_engine *e1 = engine_following(target);
    struct sndk_engine *e2 = mk_engine_follow(true);
    /* Two spinners must not share a core: the second stays where it is. */
    notes(e2, target, 2 * WINDOW);
    check_on_any_cpu(e2);
    /* The first thread's end gives the CPU back. */
    sndk_engine_destroy(e1);
    notes(e2, target, WINDOW);
    check_on_cpu(e2, target);
    sndk_engine_destroy(e2);
}

/* ---- a busy thread leaves, and waits longer each time before it follows again */

struct busy_src {
    struct sndk_source s;
    unsigned work_us; /* what each event costs the thread */
    atomic_uint calls;
};

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void busy_fn(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct busy_src *b = container_of(s, struct busy_src, s);
    uint64_t v;
    CHECK(read(s->fd, &v, sizeof v) == sizeof v);
    for (uint64_t t0 = mono_us(); mono_us() - t0 < b->work_us;)
        ; /* the stream's work */
    atomic_fetch_add(&b->calls, 1);
}

TEST(place_leaves_a_cpu_when_busy_and_backs_off)
{
    if (harness_cpus() < 2)
        return;
    int target = harness_cpu_last();
    struct sndk_engine *e = engine_following(target);

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
    check_on_any_cpu(e);

    /* Waiting again at once: it stays (the hold after a leave is 200 ms); once the hold has
     * passed (time must pass: nothing to wait on), it follows again. */
    notes(e, target, WINDOW);
    CHECK_EQ_I64(sndk_engine_thread_cpu(e, 0), -1);
    usleep(250 * 1000);
    notes(e, target, WINDOW);
    check_on_cpu(e, target);

    remove_source_wait(&b.s);
    close(fd);
    sndk_engine_destroy(e);
}

static bool thread_free(void *arg)
{
    return sndk_engine_thread_cpu(arg, 0) == -1;
}

TEST_T(place_any_cpu_again_after_a_second_without_notes, 30)
{
    if (harness_cpus() < 2)
        return;
    struct sndk_engine *e = engine_following(harness_cpu_last());
    usleep(1100 * 1000); /* the second without notes itself: time must pass */
    /* Woken by a work item, it checks before it sleeps again (after the item's signal). */
    note(e, -1);
    CHECK(harness_wait_until(thread_free, e, WAIT_MS));
    check_on_any_cpu(e);
    sndk_engine_destroy(e);
}
