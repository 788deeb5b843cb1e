#include "tool_sync.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

struct tool_events ev = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false};

void w_init(struct waiter *w)
{
    atomic_init(&w->done, 0);
    w->st = STATUS_PENDING;
}

void w_cb(void *ctx, NTSTATUS st)
{
    struct waiter *w = ctx;
    w->st = st; /* published by the release store below */
    atomic_store_explicit(&w->done, 1, memory_order_release);
    syscall(SYS_futex, &w->done, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void w_close_cb(void *ctx)
{
    w_cb(ctx, STATUS_SUCCESS);
}

NTSTATUS w_wait(struct waiter *w, NTSTATUS st)
{
    if (st != STATUS_PENDING)
        return st;
    while (!atomic_load_explicit(&w->done, memory_order_acquire))
        syscall(SYS_futex, &w->done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0); /* the watchdog
                                                                              * bounds it */
    return w->st;
}

void close_obj(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *h)
{
    struct waiter w;
    w_init(&w);
    w_wait(&w, fn(h, w_close_cb, &w));
}

void create_never(void *ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)st, (void)obj;
}

void on_connect(void *ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    pthread_mutex_lock(&ev.m);
    if (!ev.conn)
        ev.conn = c;
    else
        c->Dispatch->NdkReject(c, NULL, 0); /* one client at a time, as rping without -P */
    pthread_cond_broadcast(&ev.c);
    pthread_mutex_unlock(&ev.m);
}

void on_disconnect(void *ctx)
{
    (void)ctx;
    atomic_store(&ev.peer_gone, true);
}
