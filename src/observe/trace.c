/* Structured trace: see trace.h. */
#include "observe/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/lock.h"

atomic_bool sndk_trace_enabled;

static struct sndk_mutex trace_lock = SNDK_MUTEX_INITIALIZER(SNDK_LOCK_TRACE);
static int trace_fd = -1;
static unsigned trace_users;

int sndk_trace_acquire(const char *path)
{
    sndk_mutex_lock(&trace_lock);
    if (trace_users == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0) {
            int e = errno;
            sndk_mutex_unlock(&trace_lock);
            return -e;
        }
        trace_fd = fd;
        atomic_store_explicit(&sndk_trace_enabled, true, memory_order_release);
    }
    trace_users++;
    sndk_mutex_unlock(&trace_lock);
    return 0;
}

void sndk_trace_release(void)
{
    sndk_mutex_lock(&trace_lock);
    if (trace_users && --trace_users == 0) {
        atomic_store_explicit(&sndk_trace_enabled, false, memory_order_release);
        close(trace_fd);
        trace_fd = -1;
    }
    sndk_mutex_unlock(&trace_lock);
}

void sndk_trace_emit(const char *ev, const char *otype, const void *obj, const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n;
    if (obj)
        n = snprintf(line, sizeof line,
                     "{\"ts\":%lld.%09ld,\"tid\":%ld,\"ev\":\"%s\",\"obj\":\"%s:%p\"",
                     (long long)ts.tv_sec, ts.tv_nsec, (long)syscall(SYS_gettid), ev,
                     otype ? otype : "object", obj);
    else
        n = snprintf(line, sizeof line, "{\"ts\":%lld.%09ld,\"tid\":%ld,\"ev\":\"%s\"",
                     (long long)ts.tv_sec, ts.tv_nsec, (long)syscall(SYS_gettid), ev);
    if (n < 0 || (size_t)n >= sizeof line - 4)
        return;
    if (fmt && *fmt) {
        int base = n;
        line[n++] = ',';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof line - (size_t)n - 3, fmt, ap);
        va_end(ap);
        if (m < 0 || (size_t)(n + m) > sizeof line - 3) /* too long: keep the line valid JSON */
            m = snprintf(line + base, sizeof line - (size_t)base, ",\"truncated\":true") - 1;
        n += m;
    }
    line[n++] = '}';
    line[n++] = '\n';
    /* The lock only keeps the descriptor alive against a concurrent release. */
    sndk_mutex_lock(&trace_lock);
    if (trace_fd >= 0)
        (void)!write(trace_fd, line, (size_t)n);
    sndk_mutex_unlock(&trace_lock);
}
