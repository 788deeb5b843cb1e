/* Listener (docs/ndk-rules.md#ep): a listening TCP socket on an endpoint; each accepted
 * connection becomes an incoming connector once its MPA Request arrived (connector.c). */
#include "core/create.h"
#include "core/listener.h"
#include "core/rendezvous.h"
#include "faults/faults.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/log.h"
#include "observe/trace.h"
#include "verify/verify.h"

static const char *const listener_state_names[SNDK_LISTENER_STATE_COUNT] = {
    [SNDK_LISTENER_IDLE] = "idle",
    [SNDK_LISTENER_LISTENING] = "listening",
    [SNDK_LISTENER_CLOSED] = "closed",
};

const char *sndk_listener_state_name(enum sndk_listener_state s)
{
    return (unsigned)s < SNDK_LISTENER_STATE_COUNT ? listener_state_names[s] : "?";
}

/* The legal moves: idle -> listening (NdkListen), idle or listening -> closed (close). */
static bool may_move(enum sndk_listener_state cur, enum sndk_listener_state next)
{
    switch (cur) {
    case SNDK_LISTENER_IDLE:
        return next == SNDK_LISTENER_LISTENING || next == SNDK_LISTENER_CLOSED;
    case SNDK_LISTENER_LISTENING:
        return next == SNDK_LISTENER_CLOSED;
    default:
        return false; /* closed is final */
    }
}

/* l->lock held. A refused move is a bug in the caller: logged, and an assertion fails. */
static bool set_state(struct sndk_listener *l, enum sndk_listener_state next)
{
    const char *why = next == SNDK_LISTENER_LISTENING ? "NdkListen" : "close";
    if (!may_move(l->state, next)) {
        sndk_err("listener", "%p: refused %s => %s (%s)", (void *)l, listener_state_names[l->state],
                 listener_state_names[next], why);
        assert(!"illegal listener transition");
        return false;
    }
    sndk_debug("listener", "%p: %s => %s (%s)", (void *)l, listener_state_names[l->state],
               listener_state_names[next], why);
    l->state = next;
    return true;
}

bool sndk_listener_accepting(struct sndk_listener *l)
{
    sndk_mutex_lock(&l->lock);
    bool ok = l->state == SNDK_LISTENER_LISTENING && !atomic_load(&l->paused);
    sndk_mutex_unlock(&l->lock);
    return ok;
}

/* The connect event of a connector this listener created (its origin's connect_event). */
static bool deliver_connect_event(struct sndk_obj *owner, struct sndk_obj *conn)
{
    struct sndk_listener *l = sndk_container_of(owner, struct sndk_listener, base);
    if (!sndk_listener_accepting(l))
        return false;
    /* From here the consumer owns the connector (it must close it). */
    SNDK_CALLBACK(&l->base, SNDK_CB_CONNECT_EVENT, l->connect_ctx,
                  l->connect_cb(l->connect_ctx, &conn->pub.connector));
    return true;
}

#define ACCEPT_BATCH 8

/* An accepted connection, TCP or same-host: becomes an incoming connector unless the
 * listener takes no request now or the address is not the adapter's. */
static void take_connection(struct sndk_listener *l, int fd, const struct sndk_addr *local,
                            const struct sndk_addr *peer)
{
    if (!sndk_listener_accepting(l)) {
        sndk_close_with_reset(fd);
        return;
    }
    /* A wildcard listener of an adapter bound to one interface serves only its addresses
     * (an adapter on every interface owns every local address; a listener on one address
     * gets only that one). */
    if (l->base.adapter->if_index != 0 && sndk_addr_is_wildcard(sndk_endpoint_addr(l->ep))) {
        errno = 0;
        if (!sndk_adapter_owns_address(l->base.adapter, local)) {
            if (errno == EMFILE || errno == ENFILE) /* it could not even ask: the fd limit */
                sndk_admission_refused(&l->adm, peer, "no fd to check its address");
            sndk_close_with_reset(fd);
            return;
        }
    }
    sndk_connector_incoming(&l->origin, fd, local, peer);
}

static void on_listen_ready(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct sndk_listener *l = sndk_container_of(s, struct sndk_listener, src);
    /* A small batch per readiness: the fds of connections evicted at the door are closed by
     * work items of this same thread, and the Requests of connections already accepted are
     * read by it, both between batches; a flood then cannot evict a good client whose Request
     * is already here (admission.h). */
    for (int batch = 0; batch < ACCEPT_BATCH; batch++) {
        struct sndk_addr peer;
        memset(&peer, 0, sizeof peer);
        socklen_t plen = sizeof peer.in6;
        int fd = accept4(l->fd, &peer.sa, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (sndk_admission_fd_exhausted(&l->adm, l->fd, errno))
                    continue;
                return;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                sndk_warn_peer(sndk_ctr_log_suppressed(&l->base.adapter->ctrs), "listener",
                               "accept: %s", strerror(errno));
            return;
        }
        peer.len = plen;
        struct sndk_addr local;
        memset(&local, 0, sizeof local);
        socklen_t llen = sizeof local.in6;
        getsockname(fd, &local.sa, &llen);
        local.len = llen;
        take_connection(l, fd, &local, &peer);
    }
}

/* The same-host door (core/rendezvous.h): a connection on the rendezvous socket is one more
 * incoming connection, with the addresses its connector's name gave. */
static void on_rdv_ready(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct sndk_listener *l = sndk_container_of(s, struct sndk_listener, usrc);
    for (int batch = 0; batch < ACCEPT_BATCH; batch++) {
        struct sndk_addr local, peer;
        int fd = sndk_rdv_accept(l->ufd, sndk_endpoint_addr(l->ep), &local, &peer);
        if (fd == -EPERM || fd == -EPROTO || fd == -EINTR || fd == -ECONNABORTED)
            continue; /* refused (and logged) or gone: the next one */
        if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
            if (sndk_admission_fd_exhausted(&l->adm, l->ufd, -fd))
                continue;
            return;
        }
        if (fd < 0) {
            if (fd != -EAGAIN)
                sndk_warn_peer(sndk_ctr_log_suppressed(&l->base.adapter->ctrs), "listener",
                               "accept (same host): %s", strerror(-fd));
            return;
        }
        take_connection(l, fd, &local, &peer);
    }
}

static void on_listen_removed(struct sndk_work *w)
{
    struct sndk_listener *l = sndk_container_of(w, struct sndk_listener, src_done);
    close(l->fd);
    l->fd = -1;
    sndk_obj_put(&l->base);
}

static void on_rdv_removed(struct sndk_work *w)
{
    struct sndk_listener *l = sndk_container_of(w, struct sndk_listener, usrc_done);
    close(l->ufd);
    l->ufd = -1;
    sndk_obj_put(&l->base);
}

/* With the TCP socket listening: the same-host name too, when the adapter's transport asks
 * for it. A failure here leaves the listener on TCP alone (connectors then fall back). */
static void listen_same_host(struct sndk_listener *l)
{
    const char *why;
    if (sndk_rdv_transport(l->base.adapter, &why) == SoftNdkTransportTcp) {
        if (why)
            sndk_info("listener", "%p: same-host transport off: %s", (void *)l, why);
        return;
    }
    int fd = sndk_rdv_listen(sndk_endpoint_addr(l->ep));
    if (fd < 0) {
        sndk_warn("listener", "%p: no same-host name (%s): TCP only", (void *)l, strerror(-fd));
        return;
    }
    l->ufd = fd;
    sndk_obj_get(&l->base); /* for the source, until on_rdv_removed */
    if (sndk_source_add(l->base.adapter->engine, &l->usrc, fd, EPOLLIN, on_rdv_ready, -1) != 0) {
        sndk_obj_put(&l->base);
        close(fd);
        l->ufd = -1;
        sndk_warn("listener", "%p: no same-host name (epoll): TCP only", (void *)l);
    }
}

static NTSTATUS listener_listen(NDK_LISTENER *pNdkListener, const struct sockaddr *pAddress,
                                ULONG AddressLength, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext; /* listening starts inline */
    struct sndk_listener *l = sndk_listener_from(pNdkListener);
    if (!l)
        return STATUS_INVALID_PARAMETER;
    struct sndk_addr addr;
    NTSTATUS st = sndk_addr_from(&addr, pAddress, AddressLength);
    if (st != STATUS_SUCCESS)
        return st;
    sndk_mutex_lock(&l->lock);
    if (l->state != SNDK_LISTENER_IDLE) {
        sndk_mutex_unlock(&l->lock);
        return STATUS_INVALID_DEVICE_STATE;
    }
    int fd;
    st = sndk_endpoint_open(l->base.adapter, SNDK_EP_LISTEN, &addr, &l->ep, &fd);
    if (st == STATUS_SUCCESS) {
        l->fd = fd;
        l->origin.ep = l->ep;   /* published to the source's thread by the add */
        sndk_obj_get(&l->base); /* for the source, until on_listen_removed */
        int rc = sndk_source_add(l->base.adapter->engine, &l->src, fd, EPOLLIN, on_listen_ready, -1);
        if (rc != 0) {
            sndk_obj_put(&l->base);
            close(fd);
            l->fd = -1;
            sndk_endpoint_put(l->ep);
            l->ep = NULL;
            l->origin.ep = NULL;
            st = STATUS_INSUFFICIENT_RESOURCES;
        } else {
            set_state(l, SNDK_LISTENER_LISTENING);
            listen_same_host(l);
            sndk_admission_start(&l->adm);
            char buf[64];
            sndk_addr_str(sndk_endpoint_addr(l->ep), buf, sizeof buf);
            sndk_info("listener", "%p listening on %s", (void *)l, buf);
            sndk_counters_listener(&l->base.adapter->ctrs, l, buf);
            SNDK_TRACE("api.NdkListen", "listener", l, "\"addr\":\"%s\"", buf);
        }
    }
    sndk_mutex_unlock(&l->lock);
    return st;
}

static NTSTATUS listener_local_address(NDK_LISTENER *pNdkListener, struct sockaddr *pAddress,
                                       ULONG *pAddressLength)
{
    struct sndk_listener *l = sndk_listener_from(pNdkListener);
    if (!l || !pAddressLength)
        return STATUS_INVALID_PARAMETER;
    sndk_mutex_lock(&l->lock);
    NTSTATUS st = l->ep ? sndk_addr_copy_out(sndk_endpoint_addr(l->ep), pAddress, pAddressLength)
                        : STATUS_INVALID_DEVICE_STATE;
    sndk_mutex_unlock(&l->lock);
    return st;
}

static VOID listener_control_events(NDK_LISTENER *pNdkListener, BOOLEAN Pause)
{
    struct sndk_listener *l = sndk_listener_from(pNdkListener);
    if (!l) {
        sndk_err("listener", "NdkControlConnectEvents(%p): not a listener", (void *)pNdkListener);
        return;
    }
    atomic_store(&l->paused, Pause != 0);
}

static const NDK_LISTENER_DISPATCH listener_dispatch = {
    .NdkCloseListener = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkListen = listener_listen,
    .NdkGetLocalAddress = listener_local_address,
    .NdkControlConnectEvents = listener_control_events,
};

/* [CLOSE-7]: the listener refuses new requests as soon as close is called, although its close
 * completes only once the connectors it delivered are closed. */
static void listener_close_begin(struct sndk_obj *o)
{
    struct sndk_listener *l = sndk_container_of(o, struct sndk_listener, base);
    sndk_mutex_lock(&l->lock);
    bool was_listening = l->state == SNDK_LISTENER_LISTENING;
    set_state(l, SNDK_LISTENER_CLOSED);
    sndk_mutex_unlock(&l->lock);
    sndk_admission_stop(&l->adm);
    if (was_listening) {
        sndk_counters_listener(&l->base.adapter->ctrs, l, NULL);
        sndk_source_remove(&l->src, &l->src_done);
        if (l->ufd >= 0)
            sndk_source_remove(&l->usrc, &l->usrc_done);
    }
}

static void listener_destroy(struct sndk_obj *o)
{
    struct sndk_listener *l = sndk_container_of(o, struct sndk_listener, base);
    if (l->ep)
        sndk_endpoint_put(l->ep);
    sndk_admission_destroy(&l->adm);
    sndk_mutex_destroy(&l->lock);
}

static const struct sndk_obj_ops listener_ops = {
    .type = NdkObjectTypeListener, .close_begin = listener_close_begin, .destroy = listener_destroy};

NTSTATUS sndk_listener_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                              PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_LISTENER **ppNdkListener)
{
    (void)CreateCompletion, (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ConnectEvent || !ppNdkListener)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(a, SNDK_FCALL_LISTENER))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_listener *l = calloc(1, sizeof *l);
    if (!l)
        return STATUS_INSUFFICIENT_RESOURCES;
    l->connect_cb = ConnectEvent;
    l->connect_ctx = ConnectEventContext;
    l->fd = -1;
    l->ufd = -1;
    atomic_init(&l->paused, false);
    sndk_mutex_init_ranked(&l->lock, SNDK_LOCK_LISTENER);
    sndk_admission_init(&l->adm, &l->base, &l->src);
    l->origin = (struct sndk_conn_origin){
        .owner = &l->base, .adm = &l->adm, .connect_event = deliver_connect_event};
    sndk_work_init(&l->src_done, on_listen_removed);
    sndk_work_init(&l->usrc_done, on_rdv_removed);
    sndk_obj_init(&l->base, a, &listener_ops, &listener_dispatch);
    sndk_obj_hold(&l->base, &a->base);
    *ppNdkListener = &l->base.pub.listener;
    return STATUS_SUCCESS;
}
