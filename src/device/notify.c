/* The delivery of a consumer notification (notify.h). */
#include "device/notify.h"
#include "device/adapter_state.h"

#include <assert.h>

#include "util/log.h"

static const char *const notify_state_names[SNDK_NOTIFY_STATE_COUNT] = {
    [SNDK_NOTIFY_IDLE] = "idle",
    [SNDK_NOTIFY_DUE] = "due",
    [SNDK_NOTIFY_DELIVERING] = "delivering",
    [SNDK_NOTIFY_DUE_AGAIN] = "due-again",
};

const char *sndk_notify_state_name(enum sndk_notify_state s)
{
    return (unsigned)s < SNDK_NOTIFY_STATE_COUNT ? notify_state_names[s] : "?";
}

/* The legal moves (notify.h): idle -> due (raise); due -> delivering (the work runs) or idle
 * (closing); delivering -> due again (raise) or idle (returned); due again -> delivering
 * (returned, or a drop) or idle (returned while closing). */
static bool may_move(enum sndk_notify_state cur, enum sndk_notify_state next)
{
    switch (cur) {
    case SNDK_NOTIFY_IDLE:
        return next == SNDK_NOTIFY_DUE;
    case SNDK_NOTIFY_DUE:
        return next == SNDK_NOTIFY_DELIVERING || next == SNDK_NOTIFY_IDLE;
    case SNDK_NOTIFY_DELIVERING:
        return next == SNDK_NOTIFY_DUE_AGAIN || next == SNDK_NOTIFY_IDLE;
    case SNDK_NOTIFY_DUE_AGAIN:
        return next == SNDK_NOTIFY_DELIVERING || next == SNDK_NOTIFY_IDLE;
    default:
        return false;
    }
}

/* n->lock held. A refused move is a bug here: logged, and an assertion fails. */
static void set_state(struct sndk_notify *n, enum sndk_notify_state next, const char *why)
{
    sndk_assert_held(n->lock);
    const char *type = sndk_obj_type_name(n->owner->ops->type);
    if (!may_move(n->state, next)) {
        sndk_err("notify", "%s %p: refused %s => %s (%s)", type, (void *)n->owner,
                 sndk_notify_state_name(n->state), sndk_notify_state_name(next), why);
        assert(!"illegal notification transition");
        return;
    }
    sndk_debug("notify", "%s %p: %s => %s (%s)", type, (void *)n->owner,
               sndk_notify_state_name(n->state), sndk_notify_state_name(next), why);
    n->state = next;
}

/* The work item starts: true when it is to call the callback now. */
static bool begin(struct sndk_notify *n)
{
    if (n->state != SNDK_NOTIFY_DUE)
        return false; /* idle: a close dropped what was due; delivering: that run delivers */
    if (sndk_obj_closing(n->owner)) {
        set_state(n, SNDK_NOTIFY_IDLE, "dropped, closing");
        return false;
    }
    set_state(n, SNDK_NOTIFY_DELIVERING, "calling back");
    return true;
}

/* The callback returned: true when it is to be called again. */
static bool returned(struct sndk_notify *n)
{
    if (n->state == SNDK_NOTIFY_DUE_AGAIN && !sndk_obj_closing(n->owner)) {
        set_state(n, SNDK_NOTIFY_DELIVERING, "calling back again");
        return true;
    }
    set_state(n, SNDK_NOTIFY_IDLE,
              n->state == SNDK_NOTIFY_DUE_AGAIN ? "returned, the next dropped: closing"
                                                : "returned");
    return false;
}

static void notify_work_fn(struct sndk_work *w)
{
    struct sndk_notify *n = sndk_container_of(w, struct sndk_notify, work);
    struct sndk_obj *owner = n->owner;
    sndk_mutex_lock(n->lock);
    for (bool call = begin(n); call; call = returned(n)) {
        NTSTATUS st = n->status;
        sndk_mutex_unlock(n->lock);
        n->call(n, st);
        sndk_mutex_lock(n->lock);
    }
    sndk_mutex_unlock(n->lock);
    sndk_obj_put(owner); /* the queued item's (engine.h, "References") */
}

void sndk_notify_init(struct sndk_notify *n, struct sndk_obj *owner, struct sndk_mutex *lock,
                      sndk_notify_call_fn call)
{
    n->owner = owner;
    n->lock = lock;
    n->call = call;
    n->state = SNDK_NOTIFY_IDLE;
    n->status = STATUS_SUCCESS;
    sndk_work_init(&n->work, notify_work_fn);
}

void sndk_notify_raise(struct sndk_notify *n, NTSTATUS st)
{
    sndk_assert_held(n->lock);
    n->status = st;
    switch (n->state) {
    case SNDK_NOTIFY_IDLE:
        set_state(n, SNDK_NOTIFY_DUE, "raised");
        /* The work takes n->lock before anything else, so taking the reference after the
         * queue, still under the lock, cannot race with its drop. false: the item is still
         * queued from a due that a drop took back; that run delivers this one. */
        if (sndk_engine_queue(n->owner->adapter->engine, &n->work))
            sndk_obj_get(n->owner);
        break;
    case SNDK_NOTIFY_DELIVERING:
        set_state(n, SNDK_NOTIFY_DUE_AGAIN, "raised during the callback");
        break;
    default:
        break; /* due, or due again: one callback delivers both */
    }
}

void sndk_notify_drop(struct sndk_notify *n)
{
    sndk_assert_held(n->lock);
    if (n->state == SNDK_NOTIFY_DUE)
        set_state(n, SNDK_NOTIFY_IDLE, "dropped, closing");
    else if (n->state == SNDK_NOTIFY_DUE_AGAIN)
        set_state(n, SNDK_NOTIFY_DELIVERING, "the next dropped, closing");
}

enum sndk_notify_state sndk_notify_state(const struct sndk_notify *n)
{
    sndk_assert_held(n->lock);
    return n->state;
}
