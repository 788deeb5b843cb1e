/* Micro-benchmark (not a test): cross-thread queue->run latency of the progress engine.
 *
 *   engine_bench [iterations]      (default 10000)
 *
 * The main thread stamps the time, queues a work item to progress thread 0 and waits (busy,
 * bounded) for the item to record when it ran, then idles for a gap before the next one. With
 * a gap shorter than the spin window the item finds the thread spinning; with spin 0, or a gap
 * longer than the window, the thread has blocked in epoll and the item pays the eventfd
 * wake-up. Prints the median and the 99th percentile. */
#include "engine/engine.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct probe {
    struct sndk_work w;
    _Atomic uint64_t ran_at;
};

static void probe_fn(struct sndk_work *w)
{
    struct probe *p = (struct probe *)w;
    atomic_store_explicit(&p->ran_at, now_ns(), memory_order_release);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int run(const char *label, unsigned spin_us, unsigned gap_us, unsigned iters)
{
    struct sndk_engine_options opt;
    sndk_engine_options_default(&opt);
    opt.spin_us = spin_us;
    struct sndk_engine *e;
    if (sndk_engine_create(&opt, &e) != 0) {
        fprintf(stderr, "engine_create failed\n");
        return 1;
    }
    uint64_t *lat = calloc(iters, sizeof *lat);
    if (!lat)
        return 1;
    struct probe p;
    sndk_work_init(&p.w, probe_fn);
    for (unsigned i = 0; i < iters; i++) {
        if (gap_us) {
            uint64_t until = now_ns() + (uint64_t)gap_us * 1000u;
            while (now_ns() < until)
                ;
        }
        atomic_store(&p.ran_at, 0);
        uint64_t t0 = now_ns();
        sndk_engine_queue_on(e, 0, &p.w);
        uint64_t ran, deadline = t0 + 1000000000u; /* 1 s bound per item */
        while ((ran = atomic_load_explicit(&p.ran_at, memory_order_acquire)) == 0) {
            if (now_ns() > deadline) {
                fprintf(stderr, "%s: item %u did not run within 1 s\n", label, i);
                return 1;
            }
        }
        lat[i] = ran - t0;
    }
    unsigned effective = sndk_engine_spin_us(e);
    sndk_engine_destroy(e);
    qsort(lat, iters, sizeof *lat, cmp_u64);
    printf("%-38s spin=%3u us (effective %3u)  median %7.2f us  p99 %7.2f us\n", label, spin_us,
           effective, lat[iters / 2] / 1000.0,
           lat[iters * 99 / 100] / 1000.0);
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned iters = argc > 1 ? (unsigned)atoi(argv[1]) : 10000;
    if (iters == 0)
        iters = 1;
    int rc = 0;
    /* A 20 µs gap lets a non-spinning thread block (as it would between the messages of a
     * conversation) while a spinning one is still inside its 50 µs window. Back to back, the
     * next item would arrive before even a non-spinning thread got round to blocking. */
    rc |= run("20 us gap, spinning", SNDK_ENGINE_DEFAULT_SPIN, 20, iters);
    rc |= run("20 us gap, no spin", 0, 20, iters);
    rc |= run("200 us gap, spinning (window expired)", SNDK_ENGINE_DEFAULT_SPIN, 200, iters);
    rc |= run("200 us gap, no spin", 0, 200, iters);
    return rc;
}
