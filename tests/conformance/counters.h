/* The adapter's counters for the conformance tests that read them or wait on them: one copy
 * for every suite file (connect.c, peer_log.c) instead of one each. */
#ifndef SOFTNDK_TESTS_CONFORMANCE_COUNTERS_H
#define SOFTNDK_TESTS_CONFORMANCE_COUNTERS_H

#include <stddef.h>
#include <string.h>

#include "objects.h"

/* The adapter's counters, the query checked to succeed. */
static inline SOFTNDK_COUNTERS counters_of(NDK_ADAPTER *a)
{
    SOFTNDK_COUNTERS c;
    memset(&c, 0, sizeof c);
    c.Size = sizeof c;
    CHECK_STATUS(SoftNdkQueryCounters(a, &c), STATUS_SUCCESS);
    return c;
}

struct counter_wait {
    NDK_ADAPTER *a;
    size_t offset; /* of a ULONG64 counter in SOFTNDK_COUNTERS */
    ULONG64 want;
};

static inline bool counter_reached(void *arg)
{
    const struct counter_wait *w = arg;
    SOFTNDK_COUNTERS c = counters_of(w->a);
    ULONG64 v;
    memcpy(&v, (const char *)&c + w->offset, sizeof v);
    return v >= w->want;
}

/* Wait (bounded, FIXTURE_WAIT_MS) until the counter at `offset`, offsetof(SOFTNDK_COUNTERS,
 * Name) of a ULONG64 one, reaches `want`; false if it did not. The offset lets one wait serve
 * every counter. */
static inline bool wait_counter(NDK_ADAPTER *a, size_t offset, ULONG64 want)
{
    struct counter_wait w = {a, offset, want};
    return harness_wait_until(counter_reached, &w, FIXTURE_WAIT_MS);
}

#endif /* SOFTNDK_TESTS_CONFORMANCE_COUNTERS_H */
