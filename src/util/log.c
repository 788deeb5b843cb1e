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
