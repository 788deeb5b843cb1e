#ifndef SOFTNDK_CORE_LISTENER_H
#define SOFTNDK_CORE_LISTENER_H

#include <pthread.h>

#include "core/admission.h"
#include "core/connector.h"
#include "core/endpoint.h"
#include "util/lock.h"

enum sndk_listener_state {
    SNDK_LISTENER_IDLE,      /* created, NdkListen not called */
    SNDK_LISTENER_LISTENING, /* accepting TCP connections */
    SNDK_LISTENER_CLOSED,    /* close called: new requests are refused at once */
    SNDK_LISTENER_STATE_COUNT
};

struct sndk_listener {
    struct sndk_obj base;
    NDK_FN_CONNECT_EVENT_CALLBACK connect_cb;
    void *connect_ctx;
    struct sndk_mutex lock; /* guards state, fd, ep */
    enum sndk_listener_state state;
    _Atomic bool paused;
    int fd;
    struct sndk_endpoint *ep;
    struct sndk_source src;
    struct sndk_work src_done; /* listening socket out of epoll: close it, drop the ref */
    /* The same-host rendezvous socket (core/rendezvous.h), -1 when the adapter's transport is
     * tcp or it could not listen; its source and removal as for fd. */
    int ufd;
    struct sndk_source usrc;
    struct sndk_work usrc_done;
    struct sndk_admission adm; /* handshake limits, the fd limit (admission.h) */
    struct sndk_conn_origin origin; /* what its connectors know of it (connector.h); ep set
                                       under lock by NdkListen */
};

static inline struct sndk_listener *sndk_listener_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeListener);
    return o ? sndk_container_of(o, struct sndk_listener, base) : NULL;
}

/* Does the listener take a new request now (listening, not paused, not closing)? */
bool sndk_listener_accepting(struct sndk_listener *l);

/* "listening"; "?" past the last state. */
const char *sndk_listener_state_name(enum sndk_listener_state s);

#endif
