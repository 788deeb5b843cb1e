#include "tool_sync.h"

struct tool_events ev = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false};

void w_init(struct waiter *w)
{
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->c, NULL);
    w->done = false;
    w->st = STATUS_PENDING;
}

void w_cb(void *ctx, NTSTATUS st)
{
    struct waiter *w = ctx;
    pthread_mutex_lock(&w->m);
    w->st = st;
    w->done = true;
    pthread_cond_broadcast(&w->c);
    pthread_mutex_unlock(&w->m);
}

void w_close_cb(void *ctx)
{
    w_cb(ctx, STATUS_SUCCESS);
}

NTSTATUS w_wait(struct waiter *w, NTSTATUS st)
{
    if (st != STATUS_PENDING)
        return st;
    pthread_mutex_lock(&w->m);
    while (!w->done)
        pthread_cond_wait(&w->c, &w->m); /* the watchdog bounds every wait */
    pthread_mutex_unlock(&w->m);
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
