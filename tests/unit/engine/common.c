#include "common.h"

#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct sndk_engine *mk_engine(unsigned threads, unsigned spin_us)
{
    struct sndk_engine_options opt;
    sndk_engine_options_default(&opt);
    opt.threads = threads;
    opt.spin_us = spin_us;
    struct sndk_engine *e = NULL;
    int rc = sndk_engine_create(&opt, &e);
    CHECK_EQ_I64(rc, 0);
    CHECK(e != NULL);
    return e;
}

struct ge_arg {
    atomic_uint *v;
    unsigned target;
};

static bool ge_pred(void *arg)
{
    struct ge_arg *a = arg;
    return atomic_load(a->v) >= a->target;
}

bool wait_ge(atomic_uint *v, unsigned target, unsigned timeout_ms)
{
    struct ge_arg a = {v, target};
    return harness_wait_until(ge_pred, &a, timeout_ms);
}

struct flush_item {
    struct sndk_work w;
    struct harness_event ev;
};

static void flush_fn(struct sndk_work *w)
{
    struct flush_item *f = (struct flush_item *)w;
    harness_event_signal(&f->ev);
}

void remove_source_wait(struct sndk_source *s)
{
    struct flush_item f;
    harness_event_init(&f.ev);
    sndk_work_init(&f.w, flush_fn);
    sndk_source_remove(s, &f.w);
    CHECK(harness_event_wait(&f.ev, 1, WAIT_MS));
    harness_event_destroy(&f.ev);
}

void flush_thread(struct sndk_engine *e, unsigned thread)
{
    struct flush_item f;
    harness_event_init(&f.ev);
    sndk_work_init(&f.w, flush_fn);
    CHECK(sndk_engine_queue_on(e, thread, &f.w));
    CHECK(harness_event_wait(&f.ev, 1, WAIT_MS));
    /* The signal is the fn's last touch of f, but the engine reads nothing of w after fn. */
    harness_event_destroy(&f.ev);
}

int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    fclose(f);
    return n;
}

int thread_count_settled(int want)
{
    int n = thread_count();
    for (int i = 0; i < 200 && n != want; i++) {
        usleep(10000);
        n = thread_count();
    }
    return n;
}
