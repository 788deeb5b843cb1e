/* The two CPUs a loopback benchmark pins its two ends to: the first two this process may run
 * on, as ndkperf --loopback's sides are on distinct CPUs. rawtcp (the raw-TCP baseline) and
 * machine_state (the machine's state printed beside it) include this one copy, so that the
 * state is measured between the CPUs the runs use. */
#ifndef SOFTNDK_BENCH_TWO_CPUS_H
#define SOFTNDK_BENCH_TWO_CPUS_H

#include <pthread.h>
#include <sched.h>

/* cpu[0], cpu[1]: the first two CPUs of the process's affinity; both -1 (no pinning) when it has
 * fewer than two or the mask cannot be read. */
static inline void two_cpus_pick(int cpu[2])
{
    cpu[0] = cpu[1] = -1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    int n = 0;
    for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
        if (CPU_ISSET(i, &set))
            cpu[n++] = i;
    if (n < 2)
        cpu[0] = cpu[1] = -1;
}

/* Pin the calling thread to cpu; nothing for -1. */
static inline void two_cpus_pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

#endif
