#include "util/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static _Atomic int log_level = SNDK_LOG_WARN;

void sndk_log_set_level(enum sndk_log_level level)
{
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum sndk_log_level sndk_log_get_level(void)
{
    return (enum sndk_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

bool sndk_log_enabled(enum sndk_log_level level)
{
    return (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

void sndk_log_write(enum sndk_log_level level, const char *subsystem, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int n = snprintf(line, sizeof line, "softndk %ld.%06ld %s %s: ", (long)ts.tv_sec,
                     ts.tv_nsec / 1000, names[level], subsystem);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fprintf per line so that lines from several threads do not interleave. */
    fprintf(stderr, "%s\n", line);
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void sndk_log_limited(struct sndk_log_limit *lim, _Atomic uint64_t *suppressed_ctr,
                      enum sndk_log_level level, const char *subsystem, const char *fmt, ...)
{
    uint64_t now = mono_us();
    uint64_t next = atomic_load_explicit(&lim->next_us, memory_order_relaxed);
    /* One writer per window: the thread whose exchange moves the window on. */
    if (now < next ||
        !atomic_compare_exchange_strong_explicit(&lim->next_us, &next, now + SNDK_LOG_PEER_EVERY_US,
                                                 memory_order_relaxed, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&lim->suppressed, 1, memory_order_relaxed);
        if (suppressed_ctr)
            atomic_fetch_add_explicit(suppressed_ctr, 1, memory_order_relaxed);
        return;
    }
    uint64_t left_out = atomic_exchange_explicit(&lim->suppressed, 0, memory_order_relaxed);
    char msg[896];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (left_out)
        sndk_log_write(level, subsystem, "%s (%llu similar lines suppressed)", msg,
                       (unsigned long long)left_out);
    else
        sndk_log_write(level, subsystem, "%s", msg);
}
