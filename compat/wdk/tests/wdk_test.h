/* Shared helpers of the harness's own tests (tests/harness/harness.h underneath). */
#ifndef SOFTNDK_WDK_TEST_H
#define SOFTNDK_WDK_TEST_H

#include "harness.h"
#include "softndk_wdk.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run fn in a child process and require that it bugchecks (aborts) with `expect` in its
 * stderr. A bugcheck is the harness's way to fail like Windows; it must not take the test
 * process with it. */
static inline bool wdk_bugchecks(void (*fn)(void *), void *arg, const char *expect)
{
    char buf[8192];
    int st = harness_run_child(fn, arg, buf, sizeof buf);
    if (st < 0)
        return false;
    /* expect NULL: any abnormal end (a sanitizer may find the misuse first and exit(1)) */
    bool died = WIFSIGNALED(st) ? WTERMSIG(st) == SIGABRT || !expect
                                : !expect && WIFEXITED(st) && WEXITSTATUS(st) != 0;
    if (!died) {
        fprintf(stderr, "child did not bugcheck (status 0x%x); stderr:\n%s\n", st, buf);
        return false;
    }
    if (expect && !strstr(buf, expect)) {
        fprintf(stderr, "bugcheck without \"%s\":\n%s\n", expect, buf);
        return false;
    }
    return true;
}

static inline uint64_t wdk_test_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run fn on a new thread (not a driver thread: it reports DISPATCH_LEVEL) and join it. */
static inline void wdk_on_thread(void *(*fn)(void *), void *arg, pthread_t *t)
{
    CHECK(pthread_create(t, NULL, fn, arg) == 0);
}

/* Tags as numbers: the tests build with -Wmultichar on (the drivers' 'abcd' draws it). */
#define TAG_TEST1 0x31747354u /* "Tst1" */
#define TAG_TEST2 0x32747354u /* "Tst2" */

#endif
