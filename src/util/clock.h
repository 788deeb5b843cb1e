/* A clock read as one number: nanoseconds of clock `id` (CLOCK_MONOTONIC for durations, a
 * thread's CPU clock for its CPU time). For code that subtracts two readings; clock_gettime
 * cannot fail for the clocks softndk uses. */
#ifndef SOFTNDK_UTIL_CLOCK_H
#define SOFTNDK_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sndk_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
