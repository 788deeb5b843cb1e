/* The delivery of a consumer notification: a CQ's (docs/cq.md) and an SRQ's (docs/srq.md).
 *
 * One work item calls the consumer's callback on a progress thread, with the owner's lock
 * released around the call. Callbacks of one owner never overlap; a notification that becomes
 * due while the callback runs is delivered after it returns; notifications that become due
 * before the callback starts are delivered as one; once the owner is closing no callback
 * starts. The delivery is a state machine kept under the owner's lock:
 *
 *   idle --raise--> due --work runs--> delivering --callback returned--> idle
 *                                        |    ^
 *                                  raise v    | callback returned
 *                                      due again
 *
 * with due -> idle and due again -> idle (or -> delivering, by a drop) when the owner closes.
 * The state is the delivery's, not the work item's: whether the item is queued is the engine's
 * record. raise takes one reference on the owner when sndk_engine_queue returns true and the
 * work drops it when it has run (engine.h, "References"), so the owner keeps no "scheduled"
 * flag. The work goes where sndk_engine_queue puts it (the raising progress thread itself, or
 * the consumer thread's own progress thread), not to a thread of its own: "delivering" is what
 * keeps a second run, raised meanwhile on another thread, from calling back at the same time.
 */
#ifndef SOFTNDK_DEVICE_NOTIFY_H
#define SOFTNDK_DEVICE_NOTIFY_H

#include "device/object.h"
#include "util/lock.h"

enum sndk_notify_state {
    SNDK_NOTIFY_IDLE,       /* nothing due, no callback running */
    SNDK_NOTIFY_DUE,        /* a callback is due and none runs: the work item calls it */
    SNDK_NOTIFY_DELIVERING, /* the callback runs; nothing more is due */
    SNDK_NOTIFY_DUE_AGAIN,  /* the callback runs and another is due: it follows on return */
    SNDK_NOTIFY_STATE_COUNT
};

struct sndk_notify;
/* Call the consumer's callback, reporting st. On a progress thread, with no lock held. */
typedef void (*sndk_notify_call_fn)(struct sndk_notify *n, NTSTATUS st);

struct sndk_notify {
    struct sndk_obj *owner;
    struct sndk_mutex *lock; /* the owner's; guards state and status */
    sndk_notify_call_fn call;
    enum sndk_notify_state state;
    NTSTATUS status; /* what the next callback reports */
    struct sndk_work work;
};

/* Set up n for owner, whose `lock` guards it; idle. Before the owner can raise. */
void sndk_notify_init(struct sndk_notify *n, struct sndk_obj *owner, struct sndk_mutex *lock,
                      sndk_notify_call_fn call);

/* A notification reporting st is due: delivered by the work item, at once when idle, after the
 * running callback otherwise. A status raised before the callback starts replaces the one due.
 * Caller holds n->lock. Never blocks. */
void sndk_notify_raise(struct sndk_notify *n, NTSTATUS st);

/* The owner is closing: what is due is dropped (no callback starts); a running callback
 * finishes. Caller holds n->lock. A queued work item still runs, finds nothing and drops its
 * reference. */
void sndk_notify_drop(struct sndk_notify *n);

/* The state now; caller holds n->lock. */
enum sndk_notify_state sndk_notify_state(const struct sndk_notify *n);

/* "idle", "due", "delivering", "due-again"; "?" from SNDK_NOTIFY_STATE_COUNT on. */
const char *sndk_notify_state_name(enum sndk_notify_state s);

#endif
