/* Structured trace (docs/observability.md): an optional JSON-lines event log of API calls,
 * state transitions and protocol events, with timestamps and object ids. One log per process
 * (SOFTNDK_TRACE=FILE / SOFTNDK_OPTIONS.TraceFile: the first adapter that names one opens it,
 * the last one using it closes it). Each event is one line written with one write() on an
 * O_APPEND descriptor, so lines from different threads never interleave.
 *
 * Cost when off: SNDK_TRACE tests one global flag (a relaxed load, predicted not taken); the
 * arguments are not evaluated.
 *
 * Line format: {"ts":<CLOCK_REALTIME seconds, ns precision>,"tid":<kernel tid>,"ev":"<name>",
 *               "obj":"<type>:<address>"<, fields given by the caller>}
 */
#ifndef SOFTNDK_OBSERVE_TRACE_H
#define SOFTNDK_OBSERVE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>

extern atomic_bool sndk_trace_enabled;

static inline bool sndk_trace_on(void)
{
    return __builtin_expect(atomic_load_explicit(&sndk_trace_enabled, memory_order_relaxed), 0);
}

/* Start using the trace file at path (opened for append on first use). Returns 0 or -errno.
 * Every successful call is matched by one sndk_trace_release. */
int sndk_trace_acquire(const char *path);
void sndk_trace_release(void);

/* Emit one event: `ev` the event name, `otype`/`obj` the object ("connector", pointer; obj
 * NULL: no object), `fmt` printf-style JSON members to append (without leading comma; NULL
 * for none). Strings put in by the caller must not need JSON escaping (names, addresses). */
void sndk_trace_emit(const char *ev, const char *otype, const void *obj, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define SNDK_TRACE(ev, otype, obj, ...)                                                            \
    do {                                                                                           \
        if (sndk_trace_on())                                                                       \
            sndk_trace_emit(ev, otype, obj, __VA_ARGS__);                                          \
    } while (0)

#endif
