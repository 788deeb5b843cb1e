/* softndk test harness: every test runs in its own forked process with a timeout, so state
 * cannot leak between tests and a hang or crash fails one test, not the run. Each binary prints
 * one line per test ("PASS name", "FAIL name: why", "SKIP name: why") and a final
 * "N passed, N failed, N skipped" line; the exit status is 1 when any test failed, 77 when
 * every test that ran skipped (ctest's SKIP_RETURN_CODE), 2 for a -t NAME no test has.
 * tests/CMakeLists.txt registers each test as its own ctest entry, SUITE.NAME (-t NAME).
 *
 *   TEST(name) { CHECK(x == 1); CHECK_EQ_U64(a, b); if (!ok) SKIP("no tshark"); }
 *
 * Options: -t NAME (run one test; repeatable), -l (list), -n (no fork: run in-process, for gdb),
 * -T SECONDS (per-test timeout; env HARNESS_TIMEOUT; default 30). */
#ifndef SOFTNDK_TEST_HARNESS_H
#define SOFTNDK_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>

typedef void (*harness_fn)(void);
void harness_register(const char *name, harness_fn fn, const char *file, unsigned timeout_s);
int harness_main(int argc, char **argv);

_Noreturn void harness_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void harness_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A test that diverts stderr into a file to read its own log (fx_capture) tells the harness:
 * capture_fd holds the text, saved_fd is the real stderr. Should the test fail or abort before
 * it restores stderr, the harness copies the captured text to saved_fd first, so the reason
 * (a strict verifier's report, an assertion) is not lost with the process. (-1, -1): ended. */
void harness_stderr_diverted(int capture_fd, int saved_fd);

/* Run fn(arg) in a child process whose stderr goes into out (at most cap - 1 bytes, then a NUL),
 * for a test of something that must end the process (an abort, a bugcheck). SIGABRT has its
 * default action in the child, which exits 0 if fn returns. Returns the child's wait status
 * once it ended, or -1 when it could not be started. */
int harness_run_child(void (*fn)(void *), void *arg, char *out, size_t cap);

#define HARNESS_CAT2(a, b) a##b
#define HARNESS_CAT(a, b)  HARNESS_CAT2(a, b)

/* TEST(name) with the default timeout; TEST_T(name, seconds) for a longer one. */
#define TEST_T(name, seconds)                                                                      \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void)                                 \
    {                                                                                              \
        harness_register(#name, test_##name, __FILE__, (seconds));                                 \
    }                                                                                              \
    static void test_##name(void)
#define TEST(name) TEST_T(name, 0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            harness_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                                  \
    } while (0)
#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            harness_fail(__FILE__, __LINE__, __VA_ARGS__);                                         \
    } while (0)
#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t harness_a_ = (uint64_t)(a), harness_b_ = (uint64_t)(b);                           \
        if (harness_a_ != harness_b_)                                                              \
            harness_fail(__FILE__, __LINE__, "%s == %s: 0x%llx != 0x%llx", #a, #b,                 \
                         (unsigned long long)harness_a_, (unsigned long long)harness_b_);          \
    } while (0)
#define CHECK_EQ_I64(a, b)                                                                         \
    do {                                                                                           \
        int64_t harness_a_ = (int64_t)(a), harness_b_ = (int64_t)(b);                              \
        if (harness_a_ != harness_b_)                                                              \
            harness_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b,                     \
                         (long long)harness_a_, (long long)harness_b_);                            \
    } while (0)
#define CHECK_MEM(a, b, len)                                                                       \
    do {                                                                                           \
        size_t harness_off_ = harness_memdiff((a), (b), (len));                                    \
        if (harness_off_ != (size_t)-1)                                                            \
            harness_fail(__FILE__, __LINE__, "%s and %s differ at byte %zu of %zu", #a, #b,        \
                         harness_off_, (size_t)(len));                                             \
    } while (0)
#define SKIP(...) harness_skip(__VA_ARGS__)

/* Offset of the first differing byte, or (size_t)-1 when equal. */
size_t harness_memdiff(const void *a, const void *b, size_t len);

/* A one-shot event for callbacks: set from any thread, waited on with a bound. */
/* Signalled from consumer callbacks: a count and a futex wake, no lock, so that a callback
 * never waits for a waiter that holds a lock (NDKPI callbacks must not block; the consumer
 * verifier reports one that does). */
struct harness_event {
    _Atomic unsigned count;
};
void harness_event_init(struct harness_event *ev);
void harness_event_destroy(struct harness_event *ev);
void harness_event_signal(struct harness_event *ev);
/* Wait until the event has been signalled at least `count` times; false on timeout. */
bool harness_event_wait(struct harness_event *ev, unsigned count, unsigned timeout_ms);
unsigned harness_event_count(struct harness_event *ev);

/* Poll `pred(arg)` until it is true or `timeout_ms` passes (for conditions no callback reports).
 * Sleeps 100 µs between polls: a bounded wait, not a sleep standing in for an event. */
bool harness_wait_until(bool (*pred)(void *), void *arg, unsigned timeout_ms);

/* Number of open file descriptors of this process (for leak checks). */
int harness_open_fds(void);
/* The CPUs this process may run on (its affinity mask): how many, and the lowest or the highest
 * of them (-1 when the mask cannot be read). */
unsigned harness_cpus(void);
int harness_cpu_first(void);
int harness_cpu_last(void);

#endif
