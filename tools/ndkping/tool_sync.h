/* What ndkping and ndkrping share: a bounded-by-watchdog wait for one NDK completion, closing
 * an object and waiting for it, and the connect and disconnect events of a one-client server
 * (a second client is rejected, as rping without -P does). Each tool is its own process, so
 * the event state is one global, `ev`. */
#ifndef SOFTNDK_TOOLS_NDKPING_TOOL_SYNC_H
#define SOFTNDK_TOOLS_NDKPING_TOOL_SYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <ndk/softndk.h>

/* One request's completion: w_cb (or w_close_cb) is the callback, w_wait waits for it. The
 * callback takes no lock (a flag and a futex wake): a callback must not wait, not even for a
 * waiter preempted while holding a mutex (the consumer verifier's callback_slow). */
struct waiter {
    _Atomic unsigned done;
    NTSTATUS st;
};

void w_init(struct waiter *w);
void w_cb(void *ctx, NTSTATUS st);
void w_close_cb(void *ctx);
/* st as the call returned it: STATUS_PENDING waits for the callback's status (the tool's
 * watchdog bounds every wait), any other status is the result. */
NTSTATUS w_wait(struct waiter *w, NTSTATUS st);

/* Close h with fn and wait for its close completion. */
void close_obj(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *h);
/* The create-completion callback of a create that never pends (softndk's creates complete
 * inline). */
void create_never(void *ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj);

/* The server's first incoming connector (signalled on ev.c) and whether the peer disconnected. */
struct tool_events {
    pthread_mutex_t m;
    pthread_cond_t c;
    NDK_CONNECTOR *conn;
    atomic_bool peer_gone;
};
extern struct tool_events ev;

/* Listener connect event: the first connector is kept in ev.conn, later ones are rejected. */
void on_connect(void *ctx, NDK_CONNECTOR *c);
/* Disconnect event: sets ev.peer_gone. */
void on_disconnect(void *ctx);

#endif
