#ifndef SOFTNDK_CORE_LISTENER_H
#define SOFTNDK_CORE_LISTENER_H

#include <pthread.h>

#include "core/admission.h"
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
    struct sndk_admission adm; /* handshake limits, the fd limit (admission.h) */
};

static inline struct sndk_listener *sndk_listener_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeListener);
    return o ? sndk_container_of(o, struct sndk_listener, base) : NULL;
}

/* Does the listener take a new request now (listening, not paused, not closing)? */
bool sndk_listener_accepting(struct sndk_listener *l);

/* A TCP connection arrived on l: start the passive MPA handshake on it (connector.c). Takes fd. */
/* "listening"; "?" past the last state. */
const char *sndk_listener_state_name(enum sndk_listener_state s);

/* A connector's state as its logs and ndkstat name it ("wait-request"), by value; "?" from the
 * count on. The states are connector.c's own (it checks the count statically). */
#define SNDK_CONN_STATES 12
const char *sndk_conn_state_name(unsigned s);
/* The connector's side machines, by value (connector.c, docs/connector.md "States"): its
 * request ("done-active"), its consumer events ("disconnect-due"), its link to the QP
 * ("attached"); "?" from the count on. */
#define SNDK_CONN_REQ_PHASES   4
#define SNDK_CONN_EVENT_PHASES 5
#define SNDK_CONN_LINK_PHASES  4
const char *sndk_conn_req_name(unsigned s);
const char *sndk_conn_event_name(unsigned s);
const char *sndk_conn_link_name(unsigned s);

void sndk_connector_incoming(struct sndk_listener *l, int fd, const struct sndk_addr *local,
                             const struct sndk_addr *peer);

/* Close fd with a TCP reset: "as if there were no listener" ([EP-6]). */
void sndk_close_with_reset(int fd);

#endif
