/* Helpers shared by the engine unit tests. */
#ifndef SOFTNDK_TEST_ENGINE_COMMON_H
#define SOFTNDK_TEST_ENGINE_COMMON_H

#include "harness.h"

#include "engine/engine.h"

#include <stdatomic.h>
#include <stddef.h>

/* Through void *: -Wcast-align objects to a char * cast to a stricter type. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define WAIT_MS 5000 /* bound for anything that should happen "soon" */

struct sndk_engine *mk_engine(unsigned threads, unsigned spin_us);

/* Wait (bounded) until *v >= target. */
bool wait_ge(atomic_uint *v, unsigned target, unsigned timeout_ms);

/* Remove s and wait until the engine says no call of its fn is in flight any more. */
void remove_source_wait(struct sndk_source *s);

/* Run an empty work item on `thread` and wait for it: the thread has then finished whatever it
 * was doing when called and gone round its loop at least once. */
void flush_thread(struct sndk_engine *e, unsigned thread);

/* Threads of this process (from /proc/self/status). */
int thread_count(void);
/* thread_count() once it equals want, polled for at most 2 s; else the last count. A thread
 * just joined can still be counted for a moment (the kernel wakes the joiner when it clears
 * the thread's tid, before the task leaves the thread group), and a sanitizer's runtime starts
 * its own helper thread when it sees fit. */
int thread_count_settled(int want);

#endif
