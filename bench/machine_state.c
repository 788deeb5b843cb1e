/* machine_state: how fast this machine is right now, in the figures that move softndk's
 * same-host and small-message rows when nothing in softndk changed. bench/compare runs it before
 * every round and prints what it saw beside the table.
 *
 *   line_one_way_ns  a cache line written by one thread and awaited by another, pinned to the
 *                    two CPUs rawtcp and ndkperf --loopback pin to (the first two allowed):
 *                    half the round trip. Every one-way message between the two ends pays it
 *                    at least once. On the project's 2-vCPU VMs it alternates, minutes at a
 *                    time, between 30-60 ns and 230 ns or more.
 *   copy_GBps        memcpy of 8 MiB into another 8 MiB on one CPU (past a core's L2, as
 *                    a 1 MiB stream's buffers and rings are), the best of 5.
 *   cross_copy_GBps  the same memcpy of 8 MiB the other CPU has just written: what a
 *                    same-host transfer's one copy costs, the bytes coming from the other
 *                    end's caches. In slow minutes (a 230 ns crossing) it fell to 15-16
 *                    GB/s against 25-26 while copy_GBps stayed: the two vCPUs no longer
 *                    share a cache, and a same-host 1 MiB stream slows down with it.
 *
 *   machine_state [--round-trips N] [--timeout S]
 *
 * Prints one JSON object on stdout. Bounded: the ping-pong gives up after --timeout seconds
 * (default 10) and says so. Exit 0 on success, 1 with a one-line reason otherwise. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "two_cpus.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cpu_of[2] = {-1, -1};

static void pin(int which)
{
    two_cpus_pin(cpu_of[which]);
}

/* The line both threads write: alone on its 64 bytes, so that only the turns move it. Odd
 * values are the initiator's, even ones the answerer's; UINT64_MAX tells the answerer to stop
 * waiting (the initiator gave up). */
static struct {
    _Alignas(64) _Atomic uint64_t turn;
    char pad[64 - sizeof(uint64_t)];
} line;

static uint64_t round_trips = 200000;
static unsigned timeout_s = 10;

enum { COPY_BYTES = 8u << 20, COPY_ROUNDS = 5 };

static void *answerer(void *arg)
{
    (void)arg;
    pin(1);
    for (uint64_t i = 0; i < round_trips; i++) {
        uint64_t v;
        while ((v = atomic_load_explicit(&line.turn, memory_order_acquire)) != 2 * i + 1)
            if (v == UINT64_MAX)
                return NULL;
        atomic_store_explicit(&line.turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* One-way ns, or a negative value when the answerer did not keep up within the timeout. */
static double line_one_way_ns(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, answerer, NULL) != 0)
        return -1;
    pin(0);
    uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000u;
    uint64_t t0 = now_ns();
    bool late = false;
    for (uint64_t i = 0; i < round_trips && !late; i++) {
        atomic_store_explicit(&line.turn, 2 * i + 1, memory_order_release);
        for (unsigned spins = 1;
             atomic_load_explicit(&line.turn, memory_order_acquire) != 2 * i + 2; spins++)
            if ((spins & 0xffffu) == 0 && now_ns() > deadline) {
                late = true;
                atomic_store_explicit(&line.turn, UINT64_MAX, memory_order_release);
                break;
            }
    }
    uint64_t t1 = now_ns();
    pthread_join(t, NULL);
    return late ? -1 : (double)(t1 - t0) / (2.0 * (double)round_trips);
}

/* Copy src to dst and say how fast, in GB/s; negative when the copy came out wrong. */
static double timed_copy(unsigned char *dst, const unsigned char *src, unsigned char expect)
{
    uint64_t t0 = now_ns();
    memcpy(dst, src, COPY_BYTES);
    uint64_t dt = now_ns() - t0;
    /* read the copy back: it is the result, and a memcpy whose result is read stays */
    if (dst[0] != expect || dst[COPY_BYTES / 2] != expect || dst[COPY_BYTES - 1] != expect)
        return -1;
    return (double)COPY_BYTES / (double)(dt ? dt : 1);
}

static double copy_gbps(void)
{
    unsigned char *a = malloc(COPY_BYTES), *b = malloc(COPY_BYTES);
    double best = -1;
    if (a && b) {
        memset(a, 0x5a, COPY_BYTES);
        memset(b, 0xa5, COPY_BYTES); /* both touched: no page fault is timed */
        best = 0;
        for (int r = 0; r < COPY_ROUNDS && best >= 0; r++) {
            double gbps = timed_copy(b, a, 0x5a);
            best = gbps < 0 ? -1 : gbps > best ? gbps : best;
            memset(b, 0xa5, COPY_BYTES);
        }
    }
    free(a);
    free(b);
    return best;
}

/* The other CPU writes the source before each copy: round r's bytes are r + 1. */
static struct {
    _Alignas(64) _Atomic unsigned written; /* rounds the writer has finished */
    _Atomic unsigned copied;               /* rounds the copier has finished */
    unsigned char *src;
} cross;

static void *cross_writer(void *arg)
{
    (void)arg;
    pin(1);
    uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000u;
    for (unsigned r = 0; r < COPY_ROUNDS; r++) {
        while (atomic_load_explicit(&cross.copied, memory_order_acquire) != r)
            if (now_ns() > deadline)
                return NULL;
        memset(cross.src, (int)(r + 1), COPY_BYTES);
        atomic_store_explicit(&cross.written, r + 1, memory_order_release);
    }
    return NULL;
}

static double cross_copy_gbps(void)
{
    unsigned char *dst = malloc(COPY_BYTES);
    cross.src = malloc(COPY_BYTES);
    double best = -1;
    pthread_t t;
    if (dst && cross.src && pthread_create(&t, NULL, cross_writer, NULL) == 0) {
        pin(0);
        memset(dst, 0xa5, COPY_BYTES);
        uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000u;
        best = 0;
        for (unsigned r = 0; r < COPY_ROUNDS && best >= 0; r++) {
            while (atomic_load_explicit(&cross.written, memory_order_acquire) != r + 1)
                if (now_ns() > deadline) {
                    best = -1;
                    break;
                }
            if (best < 0)
                break;
            double gbps = timed_copy(dst, cross.src, (unsigned char)(r + 1));
            best = gbps < 0 ? -1 : gbps > best ? gbps : best;
            atomic_store_explicit(&cross.copied, r + 1, memory_order_release);
        }
        atomic_store_explicit(&cross.copied, COPY_ROUNDS, memory_order_release);
        pthread_join(t, NULL);
    }
    free(dst);
    free(cross.src);
    return best;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--round-trips") == 0 && i + 1 < argc) {
            round_trips = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            timeout_s = (unsigned)strtoul(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: machine_state [--round-trips N] [--timeout S]\n");
            return 1;
        }
    }
    if (round_trips == 0 || timeout_s == 0) {
        fprintf(stderr, "machine_state: --round-trips and --timeout must be above 0\n");
        return 1;
    }
    two_cpus_pick(cpu_of);
    if (cpu_of[0] < 0) {
        fprintf(stderr, "machine_state: fewer than two CPUs to run on: no line to pass\n");
        return 1;
    }
    double line_ns = line_one_way_ns();
    if (line_ns < 0) {
        fprintf(stderr, "machine_state: the answering thread did not keep up within %u s\n",
                timeout_s);
        return 1;
    }
    double gbps = copy_gbps(), cross_gbps = cross_copy_gbps();
    if (gbps < 0 || cross_gbps < 0) {
        fprintf(stderr,
                "machine_state: a copy's buffers could not be had, it came out wrong, "
                "or the writing thread did not keep up within %u s\n",
                timeout_s);
        return 1;
    }
    printf("{\"cpus\": [%d, %d], \"round_trips\": %llu, \"line_one_way_ns\": %.1f, "
           "\"copy_GBps\": %.2f, \"cross_copy_GBps\": %.2f}\n",
           cpu_of[0], cpu_of[1], (unsigned long long)round_trips, line_ns, gbps, cross_gbps);
    return 0;
}
