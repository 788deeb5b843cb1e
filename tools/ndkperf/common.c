/* What every part of ndkperf uses: failure reporting (die, die_status), the clock, the phase the
 * watchdog names when it fires, futex waits and address text. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ndkperf.h"

const struct opts *g_opts;
const char *g_prog = "ndkperf";

/* ------------------------------------------------------------------------------------------ */
/* Failure and time */

static pthread_mutex_t die_lock = PTHREAD_MUTEX_INITIALIZER;
static char phase[160] = "starting";
static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

_Noreturn void die(int code, const char *fmt, ...)
{
    pthread_mutex_lock(&die_lock); /* never released: the first failure is the one reported */
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", g_prog, line);
    fflush(stderr);
    _exit(code);
}

_Noreturn void die_status(const char *call, NTSTATUS st, const char *hint)
{
    const char *test = g_opts ? test_name(g_opts->test) : g_prog;
    if (st == STATUS_NOT_IMPLEMENTED || st == STATUS_NOT_SUPPORTED) {
        const char *what = hint;
        if (!what) {
            if (strstr(call, "Write"))
                what = "RDMA Write not supported by this provider build";
            else if (strstr(call, "Read"))
                what = "RDMA Read not supported by this provider build";
            else
                what = "not supported by this provider build";
        }
        die(EXIT_UNSUPPORTED, "%s: %s: %s (%s)", test, call, SoftNdkStatusName(st), what);
    }
    if (hint)
        die(EXIT_FAIL, "%s: %s: %s (%s)", test, call, SoftNdkStatusName(st), hint);
    die(EXIT_FAIL, "%s: %s: %s", test, call, SoftNdkStatusName(st));
}

void set_phase(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&phase_lock);
    vsnprintf(phase, sizeof phase, fmt, ap);
    pthread_mutex_unlock(&phase_lock);
    va_end(ap);
    if (g_opts && g_opts->verbose) {
        pthread_mutex_lock(&phase_lock);
        fprintf(stderr, "%s: [%.3f] %s\n", g_prog, (double)now_ns() / 1e9, phase);
        pthread_mutex_unlock(&phase_lock);
    }
}

static uint32_t watchdog_seconds;

static void *watchdog(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += watchdog_seconds;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    char what[160];
    pthread_mutex_lock(&phase_lock);
    snprintf(what, sizeof what, "%s", phase);
    pthread_mutex_unlock(&phase_lock);
    die(EXIT_FAIL, "timeout: no result after %u s (--timeout) while %s", watchdog_seconds, what);
}

void start_watchdog(uint32_t seconds)
{
    watchdog_seconds = seconds;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, watchdog, NULL) != 0)
        die(EXIT_FAIL, "cannot start the watchdog thread");
    pthread_attr_destroy(&a);
}

void futex_wake_all(_Atomic unsigned *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void futex_wait_ms(_Atomic unsigned *word, unsigned value, unsigned ms)
{
    struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    /* returns at once if the word no longer holds value */
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, &left, NULL, 0);
}

/* A notification for the side's waiter: a count and a futex wake, no lock, never a wait. */

const char *sockaddr_text(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        port = ntohs(a->sin_port);
        snprintf(buf, cap, "%s:%u", ip, port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        snprintf(buf, cap, "[%s]:%u", ip, port);
    } else {
        snprintf(buf, cap, "?");
    }
    return buf;
}
