#include "harness.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HARNESS_MAX_TESTS 1024
#define HARNESS_SKIP_EXIT 77

struct harness_test {
    const char *name;
    harness_fn fn;
    const char *file;
    unsigned timeout_s;
};

static struct harness_test tests[HARNESS_MAX_TESTS];
static unsigned ntests;
static int result_fd = -1; /* child: where the failure/skip reason goes */
static bool in_process;
static int diverted_capture_fd = -1, diverted_saved_fd = -1;

void harness_register(const char *name, harness_fn fn, const char *file, unsigned timeout_s)
{
    if (ntests == HARNESS_MAX_TESTS) {
        fprintf(stderr, "harness: too many tests\n");
        abort();
    }
    tests[ntests++] = (struct harness_test){name, fn, file, timeout_s};
}

static void report_reason(const char *msg)
{
    if (result_fd >= 0) {
        size_t len = strlen(msg);
        while (len > 0) {
            ssize_t w = write(result_fd, msg, len);
            if (w <= 0)
                break;
            msg += w;
            len -= (size_t)w;
        }
    } else {
        fprintf(stderr, "%s\n", msg);
    }
}

/* Async-signal-safe: pread and write only. */
static void replay_diverted_stderr(void)
{
    int from = diverted_capture_fd, to = diverted_saved_fd;
    if (from < 0 || to < 0)
        return;
    static const char head[] = "--- stderr the test had captured when it ended:\n";
    if (write(to, head, sizeof head - 1) < 0)
        return;
    char buf[4096];
    off_t at = 0;
    ssize_t r;
    while ((r = pread(from, buf, sizeof buf, at)) > 0) {
        for (ssize_t done = 0; done < r;) {
            ssize_t w = write(to, buf + done, (size_t)(r - done));
            if (w <= 0)
                return;
            done += w;
        }
        at += r;
    }
    static const char tail[] = "--- end of captured stderr\n";
    if (write(to, tail, sizeof tail - 1) < 0)
        return;
}

static void on_abort_while_diverted(int sig)
{
    replay_diverted_stderr();
    signal(sig, SIG_DFL);
    raise(sig);
}

void harness_stderr_diverted(int capture_fd, int saved_fd)
{
    diverted_capture_fd = capture_fd;
    diverted_saved_fd = saved_fd;
    signal(SIGABRT, capture_fd >= 0 ? on_abort_while_diverted : SIG_DFL);
}

int harness_run_child(void (*fn)(void *), void *arg, char *out, size_t cap)
{
    int p[2];
    if (cap == 0 || pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        signal(SIGABRT, SIG_DFL);
        result_fd = -1; /* a failed CHECK in the child says why on its stderr, into out */
        fn(arg);
        _exit(0);
    }
    close(p[1]);
    size_t len = 0;
    ssize_t n;
    while (len < cap - 1 && (n = read(p[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(p[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return st;
}

void harness_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    const char *base = strrchr(file, '/');
    int n = snprintf(msg, sizeof msg, "%s:%d: ", base ? base + 1 : file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "  failed: %s\n", msg);
    fflush(stderr);
    replay_diverted_stderr();
    report_reason(msg);
    if (in_process)
        abort();
    _exit(1);
}

void harness_skip(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report_reason(msg);
    _exit(HARNESS_SKIP_EXIT);
}

size_t harness_memdiff(const void *a, const void *b, size_t len)
{
    const unsigned char *pa = a, *pb = b;
    for (size_t i = 0; i < len; i++)
        if (pa[i] != pb[i])
            return i;
    return (size_t)-1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void harness_event_init(struct harness_event *ev)
{
    atomic_init(&ev->count, 0);
}

void harness_event_destroy(struct harness_event *ev)
{
    (void)ev;
}

void harness_event_signal(struct harness_event *ev)
{
    atomic_fetch_add_explicit(&ev->count, 1, memory_order_release);
    syscall(SYS_futex, &ev->count, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

unsigned harness_event_count(struct harness_event *ev)
{
    return atomic_load_explicit(&ev->count, memory_order_acquire);
}

bool harness_event_wait(struct harness_event *ev, unsigned count, unsigned timeout_ms)
{
    struct timespec now, deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    for (;;) {
        unsigned seen = atomic_load_explicit(&ev->count, memory_order_acquire);
        if (seen >= count)
            return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long ns = (long long)(deadline.tv_sec - now.tv_sec) * 1000000000LL +
                       (deadline.tv_nsec - now.tv_nsec);
        if (ns <= 0)
            return false;
        struct timespec left = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
        /* returns at once when the count moved since it was read */
        syscall(SYS_futex, &ev->count, FUTEX_WAIT_PRIVATE, seen, &left, NULL, 0);
    }
}

bool harness_wait_until(bool (*pred)(void *), void *arg, unsigned timeout_ms)
{
    uint64_t end = now_ms() + timeout_ms;
    for (;;) {
        if (pred(arg))
            return true;
        if (now_ms() >= end)
            return pred(arg);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

int harness_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream itself */
}

unsigned harness_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    return (unsigned)CPU_COUNT(&set);
}

/* The lowest (last = false) or the highest CPU of the affinity mask. */
static int mask_cpu(bool last)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int found = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && (found < 0 || last))
            found = c;
    return found;
}

int harness_cpu_first(void)
{
    return mask_cpu(false);
}

int harness_cpu_last(void)
{
    return mask_cpu(true);
}

enum outcome { OUT_PASS, OUT_FAIL, OUT_SKIP };

static enum outcome run_forked(const struct harness_test *t, unsigned timeout_s, char *reason,
                               size_t reason_len)
{
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(reason, reason_len, "pipe: %s", strerror(errno));
        return OUT_FAIL;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(reason, reason_len, "fork: %s", strerror(errno));
        return OUT_FAIL;
    }
    if (pid == 0) {
        close(pfd[0]);
        result_fd = pfd[1];
        t->fn();
        _exit(0);
    }
    close(pfd[1]);
    size_t got = 0;
    reason[0] = '\0';
    uint64_t deadline = now_ms() + (uint64_t)timeout_s * 1000u;
    bool timed_out = false, eof = false;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        uint64_t now = now_ms();
        if (now >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = true;
            break;
        }
        if (eof) {
            /* The child closed its pipe end but runs on; wait for it with a bound. */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd p = {pfd[0], POLLIN, 0};
        int wait = (int)(deadline - now);
        if (wait > 100)
            wait = 100;
        if (poll(&p, 1, wait) > 0) {
            ssize_t r = read(pfd[0], reason + got, reason_len - 1 - got);
            if (r > 0)
                got += (size_t)r;
            else
                eof = true;
            reason[got] = '\0';
        }
    }
    ssize_t r;
    while (got < reason_len - 1 && (r = read(pfd[0], reason + got, reason_len - 1 - got)) > 0)
        got += (size_t)r;
    reason[got] = '\0';
    close(pfd[0]);
    if (timed_out) {
        snprintf(reason, reason_len, "timed out after %u s", timeout_s);
        return OUT_FAIL;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return OUT_PASS;
    if (WIFEXITED(status) && WEXITSTATUS(status) == HARNESS_SKIP_EXIT)
        return OUT_SKIP;
    if (reason[0] == '\0') {
        if (WIFSIGNALED(status))
            snprintf(reason, reason_len, "killed by signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(reason, reason_len, "exit status %d", WEXITSTATUS(status));
    }
    return OUT_FAIL;
}

int harness_main(int argc, char **argv)
{
    const char *only[64];
    unsigned nonly = 0;
    unsigned timeout_s = 30;
    const char *env = getenv("HARNESS_TIMEOUT");
    if (env && atoi(env) > 0)
        timeout_s = (unsigned)atoi(env);
    int opt;
    while ((opt = getopt(argc, argv, "t:lnT:")) != -1) {
        switch (opt) {
        case 't':
            if (nonly < 64)
                only[nonly++] = optarg;
            break;
        case 'l':
            for (unsigned i = 0; i < ntests; i++)
                printf("%s\n", tests[i].name);
            return 0;
        case 'n':
            in_process = true;
            break;
        case 'T':
            timeout_s = (unsigned)atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: %s [-t NAME]... [-l] [-n] [-T SECONDS]\n", argv[0]);
            return 2;
        }
    }
    /* A test that writes to a peer that has gone must see EPIPE, not die. */
    signal(SIGPIPE, SIG_IGN);
    unsigned passed = 0, failed = 0, skipped = 0;
    for (unsigned i = 0; i < ntests; i++) {
        const struct harness_test *t = &tests[i];
        if (nonly) {
            bool want = false;
            for (unsigned j = 0; j < nonly; j++)
                want |= strcmp(only[j], t->name) == 0;
            if (!want)
                continue;
        }
        if (in_process) {
            t->fn();
            printf("PASS %s\n", t->name);
            passed++;
            continue;
        }
        char reason[1024];
        uint64_t start = now_ms();
        unsigned limit = t->timeout_s ? t->timeout_s : timeout_s;
        enum outcome o = run_forked(t, limit, reason, sizeof reason);
        uint64_t took = now_ms() - start;
        switch (o) {
        case OUT_PASS:
            printf("PASS %s (%llu ms)\n", t->name, (unsigned long long)took);
            passed++;
            break;
        case OUT_SKIP:
            printf("SKIP %s: %s\n", t->name, reason);
            skipped++;
            break;
        case OUT_FAIL:
            printf("FAIL %s: %s\n", t->name, reason);
            failed++;
            break;
        }
        fflush(stdout);
    }
    printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
    for (unsigned j = 0; j < nonly; j++) {
        bool known = false;
        for (unsigned i = 0; i < ntests; i++)
            known |= strcmp(only[j], tests[i].name) == 0;
        if (!known) {
            fprintf(stderr, "%s: no test named '%s' (-l lists them)\n", argv[0], only[j]);
            return 2;
        }
    }
    if (failed)
        return 1;
    /* Nothing ran but skips (one test picked by -t, as ctest runs them): tell ctest. */
    return passed == 0 && skipped > 0 ? HARNESS_SKIP_EXIT : 0;
}
