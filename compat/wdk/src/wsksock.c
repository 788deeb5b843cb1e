/* WSK sockets on the host's TCP sockets (docs/wdk.md, "WSK sockets"): connection-oriented and
 * listen sockets, IPv4 and IPv6. Each request completes the client's IRP: requests that cannot
 * block (create, bind, addresses, options, close) before they return; connect, accept, send,
 * receive and disconnect from a thread of their own (a harness thread: DISPATCH_LEVEL, as a
 * WSK completion may run), the call returning STATUS_PENDING. A listen socket whose client
 * enabled WSK_EVENT_ACCEPT gets an accept thread that calls WskAcceptEvent for each connection.
 * A socket's phase is a state machine (enum, names, validated transitions logged at debug
 * level 4: SOFTNDK_WDK_DEBUG_LEVEL=4). */
#include "wdk_internal.h"
#include "wsk.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define WDK_TAG_WSK_SOCKET 0x536B7357u         /* "WskS" */
#define SOCK_MAGIC         0x4B434F534B5357ull /* "WSKSOCK" */

enum wsk_state {
    WSK_S_OPEN,         /* created, not bound */
    WSK_S_BOUND,        /* connection socket bound to a local address */
    WSK_S_LISTENING,    /* listen socket bound: accepting */
    WSK_S_CONNECTING,   /* WskConnect under way */
    WSK_S_CONNECTED,    /* connected (or accepted) */
    WSK_S_DISCONNECTED, /* our side shut down (WskDisconnect), or the connect failed */
    WSK_S_CLOSING,      /* WskCloseSocket: no new request */
    WSK_S_COUNT
};
static const char *const wsk_state_names[WSK_S_COUNT] = {
    [WSK_S_OPEN] = "open",           [WSK_S_BOUND] = "bound",
    [WSK_S_LISTENING] = "listening", [WSK_S_CONNECTING] = "connecting",
    [WSK_S_CONNECTED] = "connected", [WSK_S_DISCONNECTED] = "disconnected",
    [WSK_S_CLOSING] = "closing",
};
/* allowed[from] is the set of states reachable from it */
static const unsigned wsk_allowed[WSK_S_COUNT] = {
    [WSK_S_OPEN] = 1u << WSK_S_BOUND | 1u << WSK_S_LISTENING | 1u << WSK_S_CLOSING,
    [WSK_S_BOUND] = 1u << WSK_S_CONNECTING | 1u << WSK_S_CLOSING,
    [WSK_S_LISTENING] = 1u << WSK_S_CLOSING,
    [WSK_S_CONNECTING] = 1u << WSK_S_CONNECTED | 1u << WSK_S_DISCONNECTED | 1u << WSK_S_CLOSING,
    [WSK_S_CONNECTED] = 1u << WSK_S_DISCONNECTED | 1u << WSK_S_CLOSING,
    [WSK_S_DISCONNECTED] = 1u << WSK_S_CLOSING,
    [WSK_S_CLOSING] = 0,
};

struct wsk_sock {
    WSK_SOCKET pub; /* first: the PWSK_SOCKET the client holds */
    uint64_t magic;
    int fd;
    int family;
    bool listen;
    PVOID context;
    const void *client_dispatch;
    /* an accepted socket's: what the listen socket's accept event gave (no connection events
     * are delivered yet, so only kept) */
    const WSK_CLIENT_CONNECTION_DISPATCH *accepted_dispatch;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    enum wsk_state state;
    unsigned pending; /* requests under way on their threads */
    bool accept_events;
    bool accept_thread_running;
    pthread_t accept_thread;
};

static const WSK_PROVIDER_CONNECTION_DISPATCH conn_dispatch;
static const WSK_PROVIDER_LISTEN_DISPATCH listen_dispatch;

static void debug_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void debug_line(const char *fmt, ...)
{
    static int level = -1;
    if (level < 0) {
        const char *e = getenv("SOFTNDK_WDK_DEBUG_LEVEL");
        level = e && *e ? atoi(e) : 3;
    }
    if (level < 4)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "wdk: wsk: %s\n", line);
}

/* Called with s->lock held. */
static bool set_state(struct wsk_sock *s, enum wsk_state to, const char *why)
{
    enum wsk_state from = s->state;
    if (!(wsk_allowed[from] & (1u << to)))
        return false;
    s->state = to;
    debug_line("socket %p: %s => %s (%s)", (void *)s, wsk_state_names[from], wsk_state_names[to],
               why);
    return true;
}

static NTSTATUS status_of_errno(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return STATUS_CONNECTION_REFUSED;
    case ECONNRESET:
        return STATUS_CONNECTION_RESET;
    case ECONNABORTED:
        return STATUS_CONNECTION_ABORTED;
    case EPIPE:
    case ENOTCONN:
        return STATUS_CONNECTION_DISCONNECTED;
    case ENETUNREACH:
        return STATUS_NETWORK_UNREACHABLE;
    case EHOSTUNREACH:
        return STATUS_HOST_UNREACHABLE;
    case ETIMEDOUT:
        return STATUS_IO_TIMEOUT;
    case EADDRINUSE:
        return STATUS_ADDRESS_ALREADY_EXISTS;
    case EADDRNOTAVAIL:
        return STATUS_INVALID_ADDRESS_COMPONENT;
    case EAFNOSUPPORT:
    case EINVAL:
        return STATUS_INVALID_PARAMETER;
    case ENOMEM:
    case ENOBUFS:
        return STATUS_INSUFFICIENT_RESOURCES;
    case EACCES:
    case EPERM:
        return STATUS_ACCESS_DENIED;
    default:
        return STATUS_UNSUCCESSFUL;
    }
}

static struct wsk_sock *sock_of(PWSK_SOCKET Socket, const char *what)
{
    struct wsk_sock *s = (struct wsk_sock *)(void *)Socket;
    if (!s || s->magic != SOCK_MAGIC)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "%s(%p): not a WSK socket (from WskSocket or an accept), or closed", what,
                         (void *)Socket);
    return s;
}

/* The IRP is ours from here: its current location becomes the provider's (the client's
 * completion routine sits in it, set by IoSetCompletionRoutine). */
static void irp_take(PIRP Irp, const char *what)
{
    if (!Irp)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION, "%s: no IRP", what);
    if (Irp->CurrentLocation <= 1)
        wdk_bugcheck_msg(NO_MORE_IRP_STACK_LOCATIONS,
                         "%s(IRP %p): no stack location left for the WSK provider (allocate it "
                         "with IoAllocateIrp(1, FALSE) and do not call IoSetNextIrpStackLocation)",
                         what, (void *)Irp);
    IoSetNextIrpStackLocation(Irp);
}

/* Completes and returns the status (the IRP may be gone once this returns). */
static NTSTATUS irp_done(PIRP Irp, NTSTATUS st, ULONG_PTR info)
{
    Irp->IoStatus.Status = st;
    Irp->IoStatus.Information = info;
    IoCompleteRequest(Irp, IO_NO_INCREMENT);
    return st;
}

static socklen_t sockaddr_len(const SOCKADDR *a)
{
    return a->sa_family == AF_INET    ? sizeof(struct sockaddr_in)
           : a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                      : 0;
}

static struct wsk_sock *sock_new(int fd, int family, bool listen, PVOID context,
                                 const void *client_dispatch, enum wsk_state state)
{
    struct wsk_sock *s = wdk_pool_alloc(POOL_FLAG_NON_PAGED, sizeof *s, WDK_TAG_WSK_SOCKET,
                                        __builtin_return_address(0));
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    s->pub.Dispatch = listen ? (const void *)&listen_dispatch : (const void *)&conn_dispatch;
    s->magic = SOCK_MAGIC;
    s->fd = fd;
    s->family = family;
    s->listen = listen;
    s->context = context;
    s->client_dispatch = client_dispatch;
    s->state = state;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    return s;
}

static void sock_destroy(struct wsk_sock *s)
{
    s->magic = 0;
    close(s->fd);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    wdk_pool_free(s, WDK_TAG_WSK_SOCKET, true, __builtin_return_address(0));
}

/* WskSocket: connection-oriented (WSK_FLAG_CONNECTION_SOCKET) and listen sockets, SOCK_STREAM
 * over IPPROTO_TCP, AF_INET or AF_INET6. The socket is the IRP's Information. */
NTSTATUS wdk_wsk_socket(ADDRESS_FAMILY AddressFamily, USHORT SocketType, ULONG Protocol,
                        ULONG Flags, PVOID SocketContext, const VOID *Dispatch, PIRP Irp)
{
    irp_take(Irp, "WskSocket");
    if ((AddressFamily != AF_INET && AddressFamily != AF_INET6) || SocketType != SOCK_STREAM ||
        (Protocol != IPPROTO_TCP && Protocol != 0))
        return irp_done(Irp, STATUS_INVALID_PARAMETER, 0);
    if (Flags != WSK_FLAG_CONNECTION_SOCKET && Flags != WSK_FLAG_LISTEN_SOCKET)
        return irp_done(Irp, STATUS_NOT_SUPPORTED, 0); /* basic, datagram, stream: not here */
    int fd = socket(AddressFamily, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return irp_done(Irp, status_of_errno(errno), 0);
    int one = 1;
    if (Flags == WSK_FLAG_LISTEN_SOCKET)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct wsk_sock *s = sock_new(fd, AddressFamily, Flags == WSK_FLAG_LISTEN_SOCKET, SocketContext,
                                  Dispatch, WSK_S_OPEN);
    if (!s) {
        close(fd);
        return irp_done(Irp, STATUS_INSUFFICIENT_RESOURCES, 0);
    }
    return irp_done(Irp, STATUS_SUCCESS, (ULONG_PTR)&s->pub);
}

/* ------------------------------------------------------------------------------------------ */
/* Requests on threads. */
enum wsk_op { OP_CONNECT, OP_SOCKET_CONNECT, OP_SEND, OP_RECEIVE, OP_DISCONNECT, OP_ACCEPT };
struct wsk_req {
    enum wsk_op op;
    struct wsk_sock *s;
    PIRP irp;
    WSK_BUF buf;
    bool have_buf;
    ULONG flags;
    struct sockaddr_storage addr;    /* connect: the remote address */
    PSOCKADDR local_out, remote_out; /* accept */
    PVOID accept_context;
    const void *accept_dispatch;
};

/* The WSK_BUF as iovecs: Length bytes from Offset into the MDL chain; false if the chain is
 * shorter than that. Each MDL must be locked or built (MmGetSystemAddressForMdlSafe checks). */
static bool buf_iov(const WSK_BUF *b, struct iovec *iov, int max, int *n)
{
    size_t left = b->Length, skip = b->Offset;
    *n = 0;
    for (PMDL m = b->Mdl; m && left > 0; m = m->Next) {
        size_t count = MmGetMdlByteCount(m);
        if (skip >= count) {
            skip -= count;
            continue;
        }
        if (*n == max)
            return false;
        char *va = MmGetSystemAddressForMdlSafe(m, NormalPagePriority);
        size_t take = count - skip < left ? count - skip : left;
        iov[*n].iov_base = va + skip;
        iov[*n].iov_len = take;
        (*n)++;
        left -= take;
        skip = 0;
    }
    return left == 0;
}

static NTSTATUS do_send(struct wsk_sock *s, const WSK_BUF *b, size_t *done)
{
    struct iovec iov[64];
    int n;
    *done = 0;
    if (!buf_iov(b, iov, 64, &n))
        return STATUS_INVALID_PARAMETER;
    int i = 0;
    while (i < n) {
        struct msghdr mh = {.msg_iov = iov + i, .msg_iovlen = (size_t)(n - i)};
        ssize_t k = sendmsg(s->fd, &mh, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return status_of_errno(errno);
        }
        *done += (size_t)k;
        while (i < n && (size_t)k >= iov[i].iov_len)
            k -= (ssize_t)iov[i++].iov_len;
        if (i < n) {
            iov[i].iov_base = (char *)iov[i].iov_base + k;
            iov[i].iov_len -= (size_t)k;
        }
    }
    return STATUS_SUCCESS;
}

/* Ends r, which holds one of its socket's pending counts: frees it, drops that count and
 * completes its IRP with st and info. */
static void req_end(struct wsk_req *r, NTSTATUS st, ULONG_PTR info)
{
    struct wsk_sock *s = r->s;
    PIRP irp = r->irp;
    free(r);
    /* the socket is not touched after this: its close may go ahead */
    pthread_mutex_lock(&s->lock);
    s->pending--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    irp_done(irp, st, info);
}

static void *req_thread(void *arg)
{
    struct wsk_req *r = arg;
    struct wsk_sock *s = r->s;
    NTSTATUS st = STATUS_SUCCESS;
    ULONG_PTR info = 0;
    switch (r->op) {
    case OP_SOCKET_CONNECT:
    case OP_CONNECT: {
        int rc;
        do
            rc = connect(s->fd, (struct sockaddr *)&r->addr,
                         sockaddr_len((const SOCKADDR *)&r->addr));
        while (rc != 0 && errno == EINTR);
        st = rc == 0 ? STATUS_SUCCESS : status_of_errno(errno);
        pthread_mutex_lock(&s->lock);
        if (s->state == WSK_S_CONNECTING)
            set_state(s, st == STATUS_SUCCESS ? WSK_S_CONNECTED : WSK_S_DISCONNECTED,
                      st == STATUS_SUCCESS ? "connect completed" : "connect failed");
        pthread_mutex_unlock(&s->lock);
        if (r->op == OP_SOCKET_CONNECT) {
            PIRP irp = r->irp;
            free(r);
            if (st != STATUS_SUCCESS) {
                /* WskSocketConnect failed: the client never gets the socket */
                sock_destroy(s);
                irp_done(irp, st, 0);
                return NULL;
            }
            pthread_mutex_lock(&s->lock);
            s->pending--;
            pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->lock);
            irp_done(irp, st, (ULONG_PTR)&s->pub);
            return NULL;
        }
        break;
    }
    case OP_SEND: {
        size_t done;
        st = do_send(s, &r->buf, &done);
        info = done;
        break;
    }
    case OP_RECEIVE: {
        struct iovec iov[64];
        int n;
        if (!buf_iov(&r->buf, iov, 64, &n)) {
            st = STATUS_INVALID_PARAMETER;
            break;
        }
        size_t total = 0, want = r->buf.Length;
        int i = 0;
        /* once (what is there, at least a byte), or until full with WSK_FLAG_WAITALL; 0 bytes
         * is the peer's graceful disconnect */
        while (i < n) {
            struct msghdr mh = {.msg_iov = iov + i, .msg_iovlen = (size_t)(n - i)};
            ssize_t k = recvmsg(s->fd, &mh, 0);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0) {
                st = total ? STATUS_SUCCESS : status_of_errno(errno);
                break;
            }
            total += (size_t)k;
            if (k == 0 || !(r->flags & WSK_FLAG_WAITALL) || total == want)
                break;
            while (i < n && (size_t)k >= iov[i].iov_len)
                k -= (ssize_t)iov[i++].iov_len;
            if (i < n) {
                iov[i].iov_base = (char *)iov[i].iov_base + k;
                iov[i].iov_len -= (size_t)k;
            }
        }
        info = total;
        break;
    }
    case OP_DISCONNECT: {
        if (r->flags & WSK_FLAG_ABORTIVE) {
            struct linger lg = {1, 0}; /* a reset, as an abortive disconnect is */
            setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            shutdown(s->fd, SHUT_RDWR);
        } else {
            size_t done = 0;
            if (r->have_buf)
                st = do_send(s, &r->buf, &done);
            if (st == STATUS_SUCCESS && shutdown(s->fd, SHUT_WR) != 0)
                st = status_of_errno(errno);
            info = done;
        }
        break;
    }
    case OP_ACCEPT: {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd;
        do
            fd = accept4(s->fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0) {
            int e = errno;
            pthread_mutex_lock(&s->lock);
            st = s->state == WSK_S_CLOSING ? STATUS_CANCELLED : status_of_errno(e);
            pthread_mutex_unlock(&s->lock);
            break;
        }
        struct wsk_sock *a =
            sock_new(fd, s->family, false, r->accept_context, r->accept_dispatch, WSK_S_CONNECTED);
        if (!a) {
            close(fd);
            st = STATUS_INSUFFICIENT_RESOURCES;
            break;
        }
        if (r->remote_out)
            memcpy(r->remote_out, &peer,
                   plen <= sizeof(SOCKADDR_IN6) ? plen : sizeof(SOCKADDR_IN6));
        if (r->local_out) {
            struct sockaddr_storage me;
            socklen_t mlen = sizeof me;
            if (getsockname(fd, (struct sockaddr *)&me, &mlen) == 0)
                memcpy(r->local_out, &me,
                       mlen <= sizeof(SOCKADDR_IN6) ? mlen : sizeof(SOCKADDR_IN6));
        }
        info = (ULONG_PTR)&a->pub;
        break;
    }
    }
    req_end(r, st, info);
    return NULL;
}

/* Starts r on a thread of its own; the IRP pends. */
static NTSTATUS req_start(struct wsk_req *r)
{
    struct wsk_sock *s = r->s;
    IoMarkIrpPending(r->irp);
    pthread_mutex_lock(&s->lock);
    s->pending++;
    pthread_mutex_unlock(&s->lock);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &at, req_thread, r);
    pthread_attr_destroy(&at);
    if (rc != 0)
        req_end(r, STATUS_INSUFFICIENT_RESOURCES, 0);
    return STATUS_PENDING;
}

static struct wsk_req *req_new(enum wsk_op op, struct wsk_sock *s, PIRP irp)
{
    struct wsk_req *r = calloc(1, sizeof *r);
    if (r) {
        r->op = op;
        r->s = s;
        r->irp = irp;
    }
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Accept events: a thread per listen socket with WSK_EVENT_ACCEPT enabled. */
static void *accept_thread(void *arg)
{
    struct wsk_sock *s = arg;
    const WSK_CLIENT_LISTEN_DISPATCH *d = s->client_dispatch;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        bool stop = s->state == WSK_S_CLOSING || !s->accept_events;
        pthread_mutex_unlock(&s->lock);
        if (stop)
            break;
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        struct sockaddr_storage peer, me;
        socklen_t plen = sizeof peer, mlen = sizeof me;
        int fd = accept4(s->fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        /* blocking from here, as the other sockets */
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        getsockname(fd, (struct sockaddr *)&me, &mlen);
        struct wsk_sock *a = sock_new(fd, s->family, false, NULL, NULL, WSK_S_CONNECTED);
        if (!a) {
            close(fd);
            continue;
        }
        /* The client owns the socket from the moment its event returns success and may close
         * it at once on another thread: its context and dispatch are written by the event
         * itself, straight into the socket, and the socket is not touched after it. */
        NTSTATUS st = d->WskAcceptEvent(s->context, 0, (PSOCKADDR)&me, (PSOCKADDR)&peer, &a->pub,
                                        &a->context, &a->accepted_dispatch);
        if (st == STATUS_SUCCESS) {
            debug_line("socket %p: accepted %p", (void *)s, (void *)a);
        } else {
            /* STATUS_REQUEST_NOT_ACCEPTED (or anything else): the connection is refused */
            sock_destroy(a);
        }
    }
    return NULL;
}

/* Called with s->lock held. */
static void accept_thread_start(struct wsk_sock *s)
{
    if (s->accept_thread_running || !s->accept_events || s->state != WSK_S_LISTENING)
        return;
    if (pthread_create(&s->accept_thread, NULL, accept_thread, s) == 0)
        s->accept_thread_running = true;
}

/* ------------------------------------------------------------------------------------------ */
/* The provider's socket dispatch. */
static NTSTATUS WSKAPI sock_control(PWSK_SOCKET Socket, WSK_CONTROL_SOCKET_TYPE RequestType,
                                    ULONG ControlCode, ULONG Level, SIZE_T InputSize,
                                    PVOID InputBuffer, SIZE_T OutputSize, PVOID OutputBuffer,
                                    SIZE_T *OutputSizeReturned, PIRP Irp)
{
    struct wsk_sock *s = sock_of(Socket, "WskControlSocket");
    (void)OutputSize, (void)OutputBuffer;
    NTSTATUS st = STATUS_NOT_SUPPORTED;
    if (OutputSizeReturned)
        *OutputSizeReturned = 0;
    if (RequestType == WskSetOption && ControlCode == SO_WSK_EVENT_CALLBACK &&
        (Level == SOL_SOCKET || Level == 0xffff)) {
        const WSK_EVENT_CALLBACK_CONTROL *c = InputBuffer;
        if (InputSize < sizeof *c || !c || !c->NpiId ||
            memcmp(c->NpiId, &NPI_WSK_INTERFACE_ID, sizeof(GUID)) != 0) {
            st = STATUS_INVALID_PARAMETER;
        } else if (!s->listen || (c->EventMask & ~(ULONG)(WSK_EVENT_ACCEPT | WSK_EVENT_DISABLE))) {
            st = STATUS_NOT_SUPPORTED; /* receive / disconnect / backlog events: not here */
        } else if (!s->client_dispatch ||
                   !((const WSK_CLIENT_LISTEN_DISPATCH *)s->client_dispatch)->WskAcceptEvent) {
            st = STATUS_INVALID_DEVICE_STATE; /* no WskAcceptEvent to call */
        } else {
            pthread_mutex_lock(&s->lock);
            s->accept_events = !(c->EventMask & WSK_EVENT_DISABLE);
            accept_thread_start(s);
            pthread_mutex_unlock(&s->lock);
            st = STATUS_SUCCESS;
        }
    } else if (RequestType == WskSetOption && Level == IPPROTO_TCP && ControlCode == TCP_NODELAY &&
               InputSize >= sizeof(ULONG) && InputBuffer) {
        int v = *(const ULONG *)InputBuffer != 0;
        st = setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0
                 ? STATUS_SUCCESS
                 : status_of_errno(errno);
    }
    if (!Irp)
        return st;
    irp_take(Irp, "WskControlSocket");
    return irp_done(Irp, st, 0);
}

static NTSTATUS WSKAPI sock_close(PWSK_SOCKET Socket, PIRP Irp)
{
    struct wsk_sock *s = sock_of(Socket, "WskCloseSocket");
    irp_take(Irp, "WskCloseSocket");
    wdk_require_irql_max(DISPATCH_LEVEL, "WskCloseSocket");
    pthread_mutex_lock(&s->lock);
    set_state(s, WSK_S_CLOSING, "WskCloseSocket");
    pthread_mutex_unlock(&s->lock);
    /* wake what blocks in the socket: pending requests complete with their error */
    shutdown(s->fd, SHUT_RDWR);
    pthread_mutex_lock(&s->lock);
    bool joined = s->accept_thread_running;
    pthread_mutex_unlock(&s->lock);
    if (joined)
        pthread_join(s->accept_thread, NULL);
    pthread_mutex_lock(&s->lock);
    while (s->pending > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    sock_destroy(s);
    return irp_done(Irp, STATUS_SUCCESS, 0);
}

static NTSTATUS WSKAPI sock_bind(PWSK_SOCKET Socket, PSOCKADDR LocalAddress, ULONG Flags, PIRP Irp)
{
    struct wsk_sock *s = sock_of(Socket, "WskBind");
    (void)Flags;
    irp_take(Irp, "WskBind");
    if (!LocalAddress || LocalAddress->sa_family != s->family)
        return irp_done(Irp, STATUS_INVALID_PARAMETER, 0);
    pthread_mutex_lock(&s->lock);
    NTSTATUS st = STATUS_SUCCESS;
    if (s->state != WSK_S_OPEN)
        st = STATUS_INVALID_DEVICE_STATE;
    else if (bind(s->fd, (const struct sockaddr *)LocalAddress, sockaddr_len(LocalAddress)) != 0)
        st = status_of_errno(errno);
    else if (s->listen && listen(s->fd, 128) != 0)
        st = status_of_errno(errno);
    if (st == STATUS_SUCCESS) {
        set_state(s, s->listen ? WSK_S_LISTENING : WSK_S_BOUND, "WskBind");
        if (s->listen)
            accept_thread_start(s);
    }
    pthread_mutex_unlock(&s->lock);
    return irp_done(Irp, st, 0);
}

static NTSTATUS get_address(PWSK_SOCKET Socket, PSOCKADDR Address, PIRP Irp, bool remote,
                            const char *what)
{
    struct wsk_sock *s = sock_of(Socket, what);
    irp_take(Irp, what);
    if (!Address)
        return irp_done(Irp, STATUS_INVALID_PARAMETER, 0);
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    int rc = remote ? getpeername(s->fd, (struct sockaddr *)&a, &len)
                    : getsockname(s->fd, (struct sockaddr *)&a, &len);
    if (rc != 0)
        return irp_done(
            Irp, errno == ENOTCONN ? STATUS_INVALID_DEVICE_STATE : status_of_errno(errno), 0);
    memcpy(Address, &a, len <= sizeof(SOCKADDR_IN6) ? len : sizeof(SOCKADDR_IN6));
    return irp_done(Irp, STATUS_SUCCESS, 0);
}

static NTSTATUS WSKAPI sock_local_address(PWSK_SOCKET Socket, PSOCKADDR LocalAddress, PIRP Irp)
{
    return get_address(Socket, LocalAddress, Irp, false, "WskGetLocalAddress");
}

static NTSTATUS WSKAPI sock_remote_address(PWSK_SOCKET Socket, PSOCKADDR RemoteAddress, PIRP Irp)
{
    return get_address(Socket, RemoteAddress, Irp, true, "WskGetRemoteAddress");
}

static NTSTATUS WSKAPI sock_connect(PWSK_SOCKET Socket, PSOCKADDR RemoteAddress, ULONG Flags,
                                    PIRP Irp)
{
    struct wsk_sock *s = sock_of(Socket, "WskConnect");
    (void)Flags;
    irp_take(Irp, "WskConnect");
    if (!RemoteAddress || RemoteAddress->sa_family != s->family)
        return irp_done(Irp, STATUS_INVALID_PARAMETER, 0);
    pthread_mutex_lock(&s->lock);
    /* Windows: a connection socket is bound before it connects */
    bool ok = s->state == WSK_S_BOUND && set_state(s, WSK_S_CONNECTING, "WskConnect");
    pthread_mutex_unlock(&s->lock);
    if (!ok)
        return irp_done(Irp, STATUS_INVALID_DEVICE_STATE, 0);
    struct wsk_req *r = req_new(OP_CONNECT, s, Irp);
    if (!r)
        return irp_done(Irp, STATUS_INSUFFICIENT_RESOURCES, 0);
    memcpy(&r->addr, RemoteAddress, sockaddr_len(RemoteAddress));
    return req_start(r);
}

static NTSTATUS data_request(enum wsk_op op, PWSK_SOCKET Socket, PWSK_BUF Buffer, ULONG Flags,
                             PIRP Irp, const char *what)
{
    struct wsk_sock *s = sock_of(Socket, what);
    irp_take(Irp, what);
    if (op != OP_DISCONNECT && (!Buffer || !Buffer->Mdl))
        return irp_done(Irp, STATUS_INVALID_PARAMETER, 0);
    pthread_mutex_lock(&s->lock);
    enum wsk_state state = s->state;
    bool ok = state == WSK_S_CONNECTED || (op == OP_RECEIVE && state == WSK_S_DISCONNECTED);
    if (ok && op == OP_DISCONNECT)
        set_state(s, WSK_S_DISCONNECTED,
                  Flags & WSK_FLAG_ABORTIVE ? "abortive WskDisconnect" : "WskDisconnect");
    pthread_mutex_unlock(&s->lock);
    if (!ok)
        return irp_done(Irp, STATUS_INVALID_DEVICE_STATE, 0);
    struct wsk_req *r = req_new(op, s, Irp);
    if (!r)
        return irp_done(Irp, STATUS_INSUFFICIENT_RESOURCES, 0);
    if (Buffer && Buffer->Mdl) {
        r->buf = *Buffer;
        r->have_buf = Buffer->Length > 0;
    }
    r->flags = Flags;
    return req_start(r);
}

static NTSTATUS WSKAPI sock_send(PWSK_SOCKET Socket, PWSK_BUF Buffer, ULONG Flags, PIRP Irp)
{
    return data_request(OP_SEND, Socket, Buffer, Flags, Irp, "WskSend");
}

static NTSTATUS WSKAPI sock_receive(PWSK_SOCKET Socket, PWSK_BUF Buffer, ULONG Flags, PIRP Irp)
{
    return data_request(OP_RECEIVE, Socket, Buffer, Flags, Irp, "WskReceive");
}

static NTSTATUS WSKAPI sock_disconnect(PWSK_SOCKET Socket, PWSK_BUF Buffer, ULONG Flags, PIRP Irp)
{
    return data_request(OP_DISCONNECT, Socket, Buffer, Flags, Irp, "WskDisconnect");
}

static NTSTATUS WSKAPI sock_release(PWSK_SOCKET Socket, PWSK_DATA_INDICATION DataIndication)
{
    sock_of(Socket, "WskRelease");
    (void)DataIndication;
    return STATUS_NOT_SUPPORTED; /* no receive events, so no indication to give back */
}

static NTSTATUS WSKAPI sock_accept(PWSK_SOCKET ListenSocket, ULONG Flags, PVOID AcceptSocketContext,
                                   const WSK_CLIENT_CONNECTION_DISPATCH *AcceptSocketDispatch,
                                   PSOCKADDR LocalAddress, PSOCKADDR RemoteAddress, PIRP Irp)
{
    struct wsk_sock *s = sock_of(ListenSocket, "WskAccept");
    (void)Flags;
    irp_take(Irp, "WskAccept");
    pthread_mutex_lock(&s->lock);
    bool ok = s->state == WSK_S_LISTENING && !s->accept_events;
    pthread_mutex_unlock(&s->lock);
    if (!ok)
        return irp_done(Irp, STATUS_INVALID_DEVICE_STATE, 0);
    struct wsk_req *r = req_new(OP_ACCEPT, s, Irp);
    if (!r)
        return irp_done(Irp, STATUS_INSUFFICIENT_RESOURCES, 0);
    r->accept_context = AcceptSocketContext;
    r->accept_dispatch = AcceptSocketDispatch;
    r->local_out = LocalAddress;
    r->remote_out = RemoteAddress;
    return req_start(r);
}

static NTSTATUS WSKAPI sock_inspect_complete(PWSK_SOCKET ListenSocket, PWSK_INSPECT_ID InspectID,
                                             WSK_INSPECT_ACTION Action, PIRP Irp)
{
    sock_of(ListenSocket, "WskInspectComplete");
    (void)InspectID, (void)Action;
    irp_take(Irp, "WskInspectComplete");
    return irp_done(Irp, STATUS_NOT_SUPPORTED, 0); /* conditional accept is not provided */
}

static const WSK_PROVIDER_CONNECTION_DISPATCH conn_dispatch = {
    .Basic = {sock_control, sock_close},
    .WskBind = sock_bind,
    .WskConnect = sock_connect,
    .WskGetLocalAddress = sock_local_address,
    .WskGetRemoteAddress = sock_remote_address,
    .WskSend = sock_send,
    .WskReceive = sock_receive,
    .WskDisconnect = sock_disconnect,
    .WskRelease = sock_release,
};
static const WSK_PROVIDER_LISTEN_DISPATCH listen_dispatch = {
    .Basic = {sock_control, sock_close},
    .WskBind = sock_bind,
    .WskAccept = sock_accept,
    .WskInspectComplete = sock_inspect_complete,
    .WskGetLocalAddress = sock_local_address,
};

/* WskSocketConnect: a connection socket created, bound to LocalAddress and connected to
 * RemoteAddress in one request; the socket is the IRP's Information. */
NTSTATUS wdk_wsk_socket_connect(USHORT SocketType, ULONG Protocol, PSOCKADDR LocalAddress,
                                PSOCKADDR RemoteAddress, PVOID SocketContext, const VOID *Dispatch,
                                PIRP Irp)
{
    irp_take(Irp, "WskSocketConnect");
    if (!LocalAddress || !RemoteAddress || LocalAddress->sa_family != RemoteAddress->sa_family ||
        sockaddr_len(LocalAddress) == 0 || SocketType != SOCK_STREAM ||
        (Protocol != IPPROTO_TCP && Protocol != 0))
        return irp_done(Irp, STATUS_INVALID_PARAMETER, 0);
    int family = LocalAddress->sa_family;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return irp_done(Irp, status_of_errno(errno), 0);
    if (bind(fd, (const struct sockaddr *)LocalAddress, sockaddr_len(LocalAddress)) != 0) {
        NTSTATUS st = status_of_errno(errno);
        close(fd);
        return irp_done(Irp, st, 0);
    }
    struct wsk_sock *s = sock_new(fd, family, false, SocketContext, Dispatch, WSK_S_BOUND);
    if (!s) {
        close(fd);
        return irp_done(Irp, STATUS_INSUFFICIENT_RESOURCES, 0);
    }
    pthread_mutex_lock(&s->lock);
    set_state(s, WSK_S_CONNECTING, "WskSocketConnect");
    pthread_mutex_unlock(&s->lock);
    struct wsk_req *r = req_new(OP_SOCKET_CONNECT, s, Irp);
    if (!r) {
        sock_destroy(s);
        return irp_done(Irp, STATUS_INSUFFICIENT_RESOURCES, 0);
    }
    memcpy(&r->addr, RemoteAddress, sockaddr_len(RemoteAddress));
    return req_start(r);
}
