/* Connections: listener, connector, shared endpoint, the NDK three-way handshake over TCP + MPA,
 * graceful disconnect and the disconnect event (docs/connector.md, docs/listener.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "counters.h"
#include "objects.h"

/* ------------------------------------------------------------------------------------------ */
/* helpers */

struct server {
    NDK_LISTENER *listener;
    struct harness_event ev;
    NDK_CONNECTOR *incoming[128];
    atomic_uint n;
};

static void on_connect_event(void *ctx, NDK_CONNECTOR *c)
{
    struct server *s = ctx;
    unsigned i = atomic_fetch_add(&s->n, 1);
    s->incoming[i % 128] = c; /* a ring: churn tests go past 128 */
    harness_event_signal(&s->ev);
}

struct disc {
    struct harness_event ev;
    atomic_uint n;
    ULONG reason;
};

static void on_disconnect(void *ctx)
{
    struct disc *d = ctx;
    atomic_fetch_add(&d->n, 1);
    harness_event_signal(&d->ev);
}

static void on_disconnect_ex(void *ctx, ULONG reason)
{
    struct disc *d = ctx;
    d->reason = reason;
    on_disconnect(ctx);
}

static struct sockaddr_storage addr_of(const char *ip, uint16_t port, ULONG *len)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        inet_pton(AF_INET6, ip, &a->sin6_addr);
        *len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        inet_pton(AF_INET, ip, &a->sin_addr);
        *len = sizeof *a;
    }
    return ss;
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
                                          : ((const struct sockaddr_in6 *)ss)->sin6_port);
}

static NDK_LISTENER *listen_on(NDK_ADAPTER *a, struct server *s, const char *ip, uint16_t port,
                               NTSTATUS expect, uint16_t *chosen)
{
    memset(s, 0, sizeof *s);
    harness_event_init(&s->ev);
    CHECK_STATUS(a->Dispatch->NdkCreateListener(a, on_connect_event, s, ndk_create_never, NULL,
                                                &s->listener),
                 STATUS_SUCCESS);
    ULONG len;
    struct sockaddr_storage ss = addr_of(ip, port, &len);
    CHECK_STATUS(s->listener->Dispatch->NdkListen(s->listener, (struct sockaddr *)&ss, len,
                                                  ndk_request_never, NULL),
                 expect);
    if (expect == STATUS_SUCCESS && chosen) {
        struct sockaddr_storage got;
        ULONG glen = sizeof got;
        CHECK_STATUS(s->listener->Dispatch->NdkGetLocalAddress(s->listener, (struct sockaddr *)&got,
                                                               &glen),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(glen, len);
        *chosen = port_of(&got);
    }
    return s->listener;
}

/* One side of a connection: its PD, CQ, QP and connector. */
struct side {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    struct conf_cq cq;
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    struct disc disc;
};

static void side_init(struct side *s, NDK_ADAPTER *a)
{
    memset(s, 0, sizeof *s);
    s->a = a;
    s->pd = conf_pd(a);
    conf_cq_create(a, &s->cq, 64);
    s->qp = conf_qp(s->pd, s->cq.cq, s->cq.cq, s, 8);
    harness_event_init(&s->disc.ev);
}

static void side_close(struct side *s)
{
    if (s->conn)
        fixture_close_wait(&s->conn->Header);
    fixture_close_wait(&s->qp->Header);
    conf_cq_destroy(&s->cq);
    fixture_close_wait(&s->pd->Header);
}

/* A listener on 127.0.0.1 and an ephemeral port (returned), and two sides to connect through
 * it: the opening of most connection tests. */
static uint16_t open_listener_and_sides(NDK_ADAPTER *a, struct server *srv, struct side *cl,
                                        struct side *sv)
{
    uint16_t port;
    listen_on(a, srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    side_init(cl, a);
    side_init(sv, a);
    return port;
}

/* Closes both sides, then the listener. */
static void close_sides_and_listener(struct side *cl, struct side *sv, struct server *srv)
{
    side_close(cl);
    side_close(sv);
    fixture_close_wait(&srv->listener->Header);
}

/* Churn loops skip the one fixed-window check of establish(). */
static bool churning;

/* Full handshake between client c and server-side listener s (already listening on port).
 * Private data both ways; checks every step's status. */
static void establish(struct side *cl, struct side *sv, struct server *srv, const char *ip,
                      uint16_t port)
{
    CHECK_STATUS(cl->a->Dispatch->NdkCreateConnector(cl->a, ndk_create_never, NULL, &cl->conn),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of(ip, 0, &slen), dst = addr_of(ip, port, &dlen);
    static const char hello[] = "hello from the active side";
    struct ndk_req r;
    ndk_req_init(&r);
    unsigned before = atomic_load(&srv->n);
    NTSTATUS st = cl->conn->Dispatch->NdkConnect(cl->conn, cl->qp, (struct sockaddr *)&src, slen,
                                                 (struct sockaddr *)&dst, dlen, 4, 8, hello,
                                                 sizeof hello, ndk_req_done, &r);
    CHECK_STATUS(st, STATUS_PENDING);
    CHECK_MSG(harness_event_wait(&srv->ev, before + 1, FIXTURE_WAIT_MS), "no connect event");
    sv->conn = srv->incoming[before % 128];

    /* passive: what the request said */
    ULONG ird = 0, ord = 0, pdlen = 0;
    CHECK_STATUS(sv->conn->Dispatch->NdkGetConnectionData(sv->conn, &ird, &ord, NULL, &pdlen),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(pdlen, sizeof hello);
    char got[256];
    ULONG small = 4;
    CHECK_STATUS(sv->conn->Dispatch->NdkGetConnectionData(sv->conn, NULL, NULL, got, &small),
                 STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(small, sizeof hello);
    pdlen = sizeof got;
    CHECK_STATUS(sv->conn->Dispatch->NdkGetConnectionData(sv->conn, &ird, &ord, got, &pdlen),
                 STATUS_SUCCESS);
    CHECK_MEM(got, hello, sizeof hello);
    /* the peer's ORD (8) is our IRD view, its IRD (4) our ORD */
    CHECK_EQ_U64(ird, 8);
    CHECK_EQ_U64(ord, 4);
    struct sockaddr_storage peer;
    ULONG plen = sizeof peer;
    CHECK_STATUS(sv->conn->Dispatch->NdkGetPeerAddress(sv->conn, (struct sockaddr *)&peer, &plen),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(plen, slen);

    static const char welcome[] = "welcome";
    struct ndk_req ra;
    ndk_req_init(&ra);
    st = sv->conn->Dispatch->NdkAcceptEx(sv->conn, sv->qp, 16, 2, welcome, sizeof welcome,
                                         on_disconnect_ex, &sv->disc, ndk_req_done, &ra);
    CHECK_STATUS(st, STATUS_PENDING);
    CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_SUCCESS); /* Connect: peer accepted */

    pdlen = sizeof got;
    CHECK_STATUS(cl->conn->Dispatch->NdkGetConnectionData(cl->conn, &ird, &ord, got, &pdlen),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(pdlen, sizeof welcome);
    CHECK_MEM(got, welcome, sizeof welcome);
    /* client asked IRD 4 / ORD 8; server IRD 16 / ORD 2: IRD = min(4, 2), ORD = min(8, 16) */
    CHECK_EQ_U64(ird, 2);
    CHECK_EQ_U64(ord, 8);

    /* Accept completes only after the active side completed (three-way handshake). */
    if (!churning)
        CHECK(!harness_event_wait(&ra.ev, 1, 50));
    struct ndk_req rc;
    ndk_req_init(&rc);
    st = cl->conn->Dispatch->NdkCompleteConnect(cl->conn, on_disconnect, &cl->disc, ndk_req_done,
                                                &rc);
    CHECK_STATUS(ndk_req_wait(&rc, st), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&ra, STATUS_PENDING), STATUS_SUCCESS);

    /* Lenient as hardware: the connection data still answers once connected ([CONN-6]: a
     * consumer must not ask, so only the tests that say they break it). */
    if (conf_breaking_rules()) {
        pdlen = sizeof got;
        CHECK_STATUS(cl->conn->Dispatch->NdkGetConnectionData(cl->conn, &ird, &ord, got, &pdlen),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(pdlen, sizeof welcome);
        CHECK_MEM(got, welcome, sizeof welcome);
        CHECK_EQ_U64(ird, 2);
        CHECK_EQ_U64(ord, 8);
        pdlen = sizeof got;
        CHECK_STATUS(sv->conn->Dispatch->NdkGetConnectionData(sv->conn, &ird, &ord, got, &pdlen),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(pdlen, sizeof hello);
        CHECK_MEM(got, hello, sizeof hello);
        /* the effective values: IRD = min(16, peer ORD 8), ORD = min(2, peer IRD 4) */
        CHECK_EQ_U64(ird, 8);
        CHECK_EQ_U64(ord, 2);
    }
    harness_event_destroy(&r.ev);
    harness_event_destroy(&ra.ev);
    harness_event_destroy(&rc.ev);
}

struct poll_arg {
    NDK_CQ *cq;
    NDK_RESULT_EX *out;
};

static bool poll_once(void *arg)
{
    struct poll_arg *p = arg;
    return p->cq->Dispatch->NdkGetCqResultsEx(p->cq, p->out, 1) == 1;
}

/* Poll a CQ (as a polling consumer does, which also drives progress) for one result, bounded. */
static bool poll_result(NDK_CQ *cq, NDK_RESULT_EX *out)
{
    struct poll_arg p = {cq, out};
    return harness_wait_until(poll_once, &p, FIXTURE_WAIT_MS);
}

/* A shared endpoint on 127.0.0.1 and an ephemeral port, its port in *port when asked. */
static NDK_SHARED_ENDPOINT *loopback_shared_endpoint(NDK_ADAPTER *a, uint16_t *port)
{
    ULONG len;
    struct sockaddr_storage local = addr_of("127.0.0.1", 0, &len);
    NDK_SHARED_ENDPOINT *se;
    CHECK_STATUS(a->Dispatch->NdkCreateSharedEndpoint(a, (struct sockaddr *)&local, len,
                                                      ndk_create_never, NULL, &se),
                 STATUS_SUCCESS);
    if (port) {
        struct sockaddr_storage got;
        ULONG glen = sizeof got;
        CHECK_STATUS(se->Dispatch->NdkGetLocalAddress(se, (struct sockaddr *)&got, &glen),
                     STATUS_SUCCESS);
        *port = port_of(&got);
    }
    return se;
}

/* cl connects to srv on 127.0.0.1:port (IRD 1, ORD 1, no private data), through se when given,
 * else from an ephemeral port; returns the incoming connector once srv has it, the connect
 * pending on r. */
static NDK_CONNECTOR *start_connect(struct side *cl, NDK_SHARED_ENDPOINT *se, struct server *srv,
                                    uint16_t port, struct ndk_req *r)
{
    CHECK_STATUS(cl->a->Dispatch->NdkCreateConnector(cl->a, ndk_create_never, NULL, &cl->conn),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of("127.0.0.1", 0, &slen),
                            dst = addr_of("127.0.0.1", port, &dlen);
    ndk_req_init(r);
    unsigned before = atomic_load(&srv->n);
    NTSTATUS st = se ? cl->conn->Dispatch->NdkConnectWithSharedEndpoint(
                           cl->conn, cl->qp, se, (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                           ndk_req_done, r)
                     : cl->conn->Dispatch->NdkConnect(cl->conn, cl->qp, (struct sockaddr *)&src,
                                                      slen, (struct sockaddr *)&dst, dlen, 1, 1,
                                                      NULL, 0, ndk_req_done, r);
    CHECK_STATUS(st, STATUS_PENDING);
    CHECK(harness_event_wait(&srv->ev, before + 1, FIXTURE_WAIT_MS));
    return srv->incoming[before % 128];
}

/* The handshake's end once the passive side's accept is pending on ra: the connect (r)
 * succeeds, cl completes it, and the accept succeeds. */
static void finish_connect(struct side *cl, struct ndk_req *r, struct ndk_req *ra)
{
    CHECK_STATUS(ndk_req_wait(r, STATUS_PENDING), STATUS_SUCCESS);
    struct ndk_req rc;
    ndk_req_init(&rc);
    NTSTATUS st = cl->conn->Dispatch->NdkCompleteConnect(cl->conn, NULL, NULL, ndk_req_done, &rc);
    CHECK_STATUS(ndk_req_wait(&rc, st), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(ra, STATUS_PENDING), STATUS_SUCCESS);
    harness_event_destroy(&rc.ev);
}

static void full_cycle(const char *ip)
{
    NDK_ADAPTER *as = conf_open(), *ac = conf_open();
    struct server srv;
    uint16_t port = 0;
    listen_on(as, &srv, ip, 0, STATUS_SUCCESS, &port);
    CHECK(port != 0);
    struct side sv, cl;
    side_init(&sv, as);
    side_init(&cl, ac);
    establish(&cl, &sv, &srv, ip, port);

    /* the connected QPs move a message: a zero-byte Send into a posted receive */
    conf_post_recvs(sv.qp, 1, 77);
    CHECK_STATUS(cl.qp->Dispatch->NdkSend(cl.qp, (void *)78, NULL, 0, 0), STATUS_SUCCESS);
    NDK_RESULT_EX res;
    CHECK(poll_result(sv.cq.cq, &res));
    CHECK_STATUS(res.Status, STATUS_SUCCESS);
    CHECK_EQ_U64(res.Type, NdkOperationTypeReceive);
    CHECK(res.RequestContext == (void *)77 && res.QPContext == &sv);
    CHECK_EQ_U64(res.BytesTransferred, 0);
    CHECK(poll_result(cl.cq.cq, &res));
    CHECK_STATUS(res.Status, STATUS_SUCCESS);
    CHECK_EQ_U64(res.Type, NdkOperationTypeSend);
    CHECK(res.RequestContext == (void *)78 && res.QPContext == &cl);

    /* graceful disconnect from the client: the server gets the event once, the client none */
    struct ndk_req rd;
    ndk_req_init(&rd);
    NTSTATUS st = cl.conn->Dispatch->NdkDisconnect(cl.conn, ndk_req_done, &rd);
    CHECK_MSG(harness_event_wait(&sv.disc.ev, 1, FIXTURE_WAIT_MS), "no disconnect event");
    struct ndk_req rs;
    ndk_req_init(&rs);
    NTSTATUS st2 = sv.conn->Dispatch->NdkDisconnect(sv.conn, ndk_req_done, &rs);
    CHECK_STATUS(ndk_req_wait(&rs, st2), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&rd, st), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&cl.disc.ev, 1, FIXTURE_QUIET_MS));
    CHECK_EQ_U64(atomic_load(&sv.disc.n), 1);
    /* a disconnected QP refuses initiator requests */
    CHECK_STATUS(cl.qp->Dispatch->NdkSend(cl.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);

    close_sides_and_listener(&cl, &sv, &srv);
    ndk_close_adapter(ac);
    ndk_close_adapter(as);
}

TEST(connect_accept_disconnect_ipv4)
{
    conf_breaks_rules(
        "conn_data_late: the connection data still answers once connected (decisions.md)");
    full_cycle("127.0.0.1");
}

TEST(connect_accept_disconnect_ipv6)
{
    conf_breaks_rules(
        "conn_data_late: the connection data still answers once connected (decisions.md)");
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        SKIP("no IPv6 loopback on this host");
    full_cycle("::1");
}

/* ------------------------------------------------------------------------------------------ */
/* NdkListen statuses (the NdkListen seed) */

TEST(listen_port_in_use_by_listener_or_process_is_sharing_violation)
{
    NDK_ADAPTER *a = conf_open();
    struct server s1, s2, s3;
    uint16_t port;
    listen_on(a, &s1, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    listen_on(a, &s2, "127.0.0.1", port, STATUS_SHARING_VIOLATION, NULL);
    /* wildcard on the same port collides too */
    listen_on(a, &s3, "0.0.0.0", port, STATUS_SHARING_VIOLATION, NULL);
    fixture_close_wait(&s3.listener->Header);
    fixture_close_wait(&s2.listener->Header);
    fixture_close_wait(&s1.listener->Header);

    /* another process's socket (here: a plain socket of ours, outside softndk) */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 1) == 0);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    struct server s4;
    listen_on(a, &s4, "127.0.0.1", ntohs(sa.sin_port), STATUS_SHARING_VIOLATION, NULL);
    fixture_close_wait(&s4.listener->Header);
    close(fd);
    ndk_close_adapter(a);
}

TEST(listen_address_not_of_adapter_is_invalid_address)
{
    NDK_ADAPTER *a = conf_open();
    struct server s;
    listen_on(a, &s, "192.0.2.1", 0, STATUS_INVALID_ADDRESS, NULL); /* TEST-NET-1 */
    fixture_close_wait(&s.listener->Header);
    ndk_close_adapter(a);
}

TEST(listen_ephemeral_range_exhausted_is_too_many_addresses)
{
    /* find two free adjacent ports and narrow the range to them */
    uint16_t base = 0;
    for (uint16_t p = 61000; p < 64000 && !base; p += 2) {
        int fds[2];
        bool ok = true;
        for (int i = 0; i < 2; i++) {
            fds[i] = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(p + i)),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            ok &= bind(fds[i], (struct sockaddr *)&sa, sizeof sa) == 0;
        }
        close(fds[0]);
        close(fds[1]);
        if (ok)
            base = p;
    }
    CHECK(base != 0);
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.EphemeralPortLow = base;
    o.EphemeralPortHigh = (USHORT)(base + 1);
    NDK_ADAPTER *a = conf_open_with(&o);
    struct server s1, s2, s3;
    uint16_t p1, p2;
    listen_on(a, &s1, "127.0.0.1", 0, STATUS_SUCCESS, &p1);
    listen_on(a, &s2, "127.0.0.1", 0, STATUS_SUCCESS, &p2);
    CHECK(p1 != p2 && p1 >= base && p1 <= base + 1 && p2 >= base && p2 <= base + 1);
    listen_on(a, &s3, "127.0.0.1", 0, STATUS_TOO_MANY_ADDRESSES, NULL);
    fixture_close_wait(&s3.listener->Header);
    fixture_close_wait(&s2.listener->Header);
    fixture_close_wait(&s1.listener->Header);
    ndk_close_adapter(a);
}

TEST(listen_twice_and_address_buffer_protocol)
{
    NDK_ADAPTER *a = conf_open();
    struct server s;
    uint16_t port;
    listen_on(a, &s, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    ULONG len;
    struct sockaddr_storage ss = addr_of("127.0.0.1", 0, &len);
    CHECK_STATUS(s.listener->Dispatch->NdkListen(s.listener, (struct sockaddr *)&ss, len,
                                                 ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE);
    ULONG small = 4;
    CHECK_STATUS(s.listener->Dispatch->NdkGetLocalAddress(s.listener, (struct sockaddr *)&ss, &small),
                 STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(small, sizeof(struct sockaddr_in));
    fixture_close_wait(&s.listener->Header);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Connect failures */

static NTSTATUS connect_to(NDK_ADAPTER *a, NDK_QP *qp, NDK_CONNECTOR **pc, const char *ip,
                           uint16_t port, const void *pd, ULONG pdlen, struct ndk_req *r)
{
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, pc), STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of(ip, 0, &slen), dst = addr_of(ip, port, &dlen);
    ndk_req_init(r);
    NTSTATUS st =
        (*pc)->Dispatch->NdkConnect(*pc, qp, (struct sockaddr *)&src, slen, (struct sockaddr *)&dst,
                                    dlen, 1, 1, pd, pdlen, ndk_req_done, r);
    return ndk_req_wait(r, st);
}

TEST(connect_without_listener_is_refused)
{
    conf_breaks_rules("post_not_connected: posts on the QP of a refused connect");
    NDK_ADAPTER *a = conf_open();
    struct side cl;
    side_init(&cl, a);
    /* a port nobody listens on: bind one, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    struct ndk_req r;
    CHECK_STATUS(connect_to(a, cl.qp, &cl.conn, "127.0.0.1", ntohs(sa.sin_port), NULL, 0, &r),
                 STATUS_CONNECTION_REFUSED);
    /* the QP is left as it was: usable for another connector */
    CHECK_STATUS(cl.qp->Dispatch->NdkSend(cl.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    side_close(&cl);
    ndk_close_adapter(a);
}

TEST(connect_rejected_with_private_data_is_refused)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    struct side cl;
    side_init(&cl, a);
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &cl.conn),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of("127.0.0.1", 0, &slen),
                            dst = addr_of("127.0.0.1", port, &dlen);
    struct ndk_req r;
    ndk_req_init(&r);
    NTSTATUS st = cl.conn->Dispatch->NdkConnect(cl.conn, cl.qp, (struct sockaddr *)&src, slen,
                                                (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                                ndk_req_done, &r);
    CHECK_STATUS(st, STATUS_PENDING);
    CHECK(harness_event_wait(&srv.ev, 1, FIXTURE_WAIT_MS));
    NDK_CONNECTOR *in = srv.incoming[0];
    CHECK_STATUS(in->Dispatch->NdkReject(in, "no", 3), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_CONNECTION_REFUSED);
    /* the peer's reason is readable on the refused connector */
    char why[16];
    ULONG whylen = sizeof why;
    CHECK_STATUS(cl.conn->Dispatch->NdkGetConnectionData(cl.conn, NULL, NULL, why, &whylen),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(whylen, 3);
    CHECK_MEM(why, "no", 3);
    /* a rejected request cannot be accepted any more */
    CHECK_STATUS(in->Dispatch->NdkReject(in, NULL, 0), STATUS_INVALID_DEVICE_STATE);
    fixture_close_wait(&in->Header);
    side_close(&cl);
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(a);
}

TEST(connect_to_paused_listener_is_refused_then_served_after_resume)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    srv.listener->Dispatch->NdkControlConnectEvents(srv.listener, TRUE);
    struct side cl;
    side_init(&cl, a);
    struct ndk_req r;
    CHECK_STATUS(connect_to(a, cl.qp, &cl.conn, "127.0.0.1", port, NULL, 0, &r),
                 STATUS_CONNECTION_REFUSED);
    CHECK_EQ_U64(atomic_load(&srv.n), 0);
    fixture_close_wait(&cl.conn->Header);
    cl.conn = NULL;
    srv.listener->Dispatch->NdkControlConnectEvents(srv.listener, FALSE);
    struct side sv;
    side_init(&sv, a);
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    close_sides_and_listener(&cl, &sv, &srv);
    ndk_close_adapter(a);
}

/* A plain TCP listener on 127.0.0.1, outside softndk: a peer that speaks no MPA (or whatever a
 * test thread makes it say). */
static int raw_listener(uint16_t *port)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 4) == 0);
    socklen_t sl = sizeof sa;
    CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
    *port = ntohs(sa.sin_port);
    return lfd;
}

/* NdkConnect against a raw peer played by `server` (a thread given the listening fd) must
 * complete with `expect`. */
static void connect_to_fake_peer(void *(*server)(void *), NTSTATUS expect)
{
    uint16_t raw_port;
    int lfd = raw_listener(&raw_port);
    pthread_t th;
    pthread_create(&th, NULL, server, &lfd);
    NDK_ADAPTER *a = conf_open();
    struct side cl;
    side_init(&cl, a);
    struct ndk_req r;
    CHECK_STATUS(connect_to(a, cl.qp, &cl.conn, "127.0.0.1", raw_port, NULL, 0, &r), expect);
    side_close(&cl);
    pthread_join(th, NULL);
    ndk_close_adapter(a);
    close(lfd);
}

TEST(connect_timeout_when_peer_never_answers)
{
    /* a plain TCP listener that never speaks MPA */
    uint16_t raw_port;
    int lfd = raw_listener(&raw_port);
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.ConnectTimeoutMs = 200;
    NDK_ADAPTER *a = conf_open_with(&o);
    struct side cl;
    side_init(&cl, a);
    struct ndk_req r;
    CHECK_STATUS(connect_to(a, cl.qp, &cl.conn, "127.0.0.1", raw_port, NULL, 0, &r),
                 STATUS_IO_TIMEOUT);
    side_close(&cl);
    ndk_close_adapter(a);
    close(lfd);
}

static void *garbage_server(void *arg)
{
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
        char buf[512];
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) > 0)
            (void)!read(fd, buf, sizeof buf);
        static const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\nthis is not MPA at all";
        (void)!write(fd, junk, sizeof junk);
        poll(&p, 1, 5000); /* until the client closes */
        close(fd);
    }
    return NULL;
}

TEST(connect_to_garbage_peer_is_aborted)
{
    connect_to_fake_peer(garbage_server, STATUS_CONNECTION_ABORTED);
}

TEST(garbage_client_gets_no_connect_event_and_listener_keeps_serving)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    for (int kind = 0; kind < 3; kind++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
        if (kind == 0) {
            static const char junk[] = "GET / HTTP/1.0\r\n\r\n"; /* not an MPA key */
            (void)!write(fd, junk, sizeof junk);
        } else if (kind == 1) {
            static const char partial[] = "MPA ID Req"; /* truncated, then gone */
            (void)!write(fd, partial, sizeof partial - 1);
        }
        /* kind 2: nothing at all, then gone */
        char b;
        struct pollfd p = {fd, POLLIN, 0};
        if (kind == 0)
            CHECK(poll(&p, 1, FIXTURE_WAIT_MS) == 1 && read(fd, &b, 1) <= 0); /* closed on us */
        close(fd);
    }
    CHECK_EQ_U64(atomic_load(&srv.n), 0);
    /* a well-behaved client is still served */
    struct side cl, sv;
    side_init(&cl, a);
    side_init(&sv, a);
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    close_sides_and_listener(&cl, &sv, &srv);
    ndk_close_adapter(a);
}

TEST(connect_argument_statuses)
{
    conf_breaks_rules("connector_state: the statuses of calls in the wrong state");
    NDK_ADAPTER *a = conf_open();
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    struct side cl;
    side_init(&cl, a);
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &cl.conn),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of("127.0.0.1", 0, &slen),
                            dst = addr_of("127.0.0.1", port, &dlen);
    char big[512] = {0};
    CHECK_STATUS(cl.conn->Dispatch->NdkConnect(cl.conn, cl.qp, (struct sockaddr *)&src, slen,
                                               (struct sockaddr *)&dst, dlen, 1, 1, big,
                                               info.MaxCallerData + 1, ndk_request_never, NULL),
                 STATUS_INVALID_BUFFER_SIZE);
    struct sockaddr_storage other = addr_of("192.0.2.1", 0, &slen);
    CHECK_STATUS(cl.conn->Dispatch->NdkConnect(cl.conn, cl.qp, (struct sockaddr *)&other, slen,
                                               (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                               ndk_request_never, NULL),
                 STATUS_INVALID_ADDRESS);
    /* CompleteConnect before a Connect completed */
    CHECK_STATUS(
        cl.conn->Dispatch->NdkCompleteConnect(cl.conn, NULL, NULL, ndk_request_never, NULL),
        STATUS_CONNECTION_INVALID);
    CHECK_STATUS(cl.conn->Dispatch->NdkDisconnect(cl.conn, ndk_request_never, NULL),
                 STATUS_CONNECTION_INVALID);
    ULONG pdlen = 0;
    CHECK_STATUS(cl.conn->Dispatch->NdkGetConnectionData(cl.conn, NULL, NULL, NULL, &pdlen),
                 STATUS_INVALID_DEVICE_STATE);
    /* a QP already bound to a connection in progress */
    struct ndk_req r;
    ndk_req_init(&r);
    CHECK_STATUS(cl.conn->Dispatch->NdkConnect(cl.conn, cl.qp, (struct sockaddr *)&src, slen,
                                               (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                               ndk_req_done, &r),
                 STATUS_PENDING);
    NDK_CONNECTOR *c2;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &c2), STATUS_SUCCESS);
    src = addr_of("127.0.0.1", 0, &slen);
    CHECK_STATUS(c2->Dispatch->NdkConnect(c2, cl.qp, (struct sockaddr *)&src, slen,
                                          (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                          ndk_request_never, NULL),
                 STATUS_CONNECTION_ACTIVE);
    fixture_close_wait(&c2->Header);
    /* the incoming side: close the request without answering = reject */
    CHECK(harness_event_wait(&srv.ev, 1, FIXTURE_WAIT_MS));
    fixture_close_wait(&srv.incoming[0]->Header);
    CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_CONNECTION_REFUSED);
    side_close(&cl);
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(a);
}

TEST(close_connector_while_connecting_cancels_connect)
{
    /* a peer that accepts TCP but never answers keeps the connect pending */
    uint16_t raw_port;
    int lfd = raw_listener(&raw_port);
    NDK_ADAPTER *a = conf_open();
    struct side cl;
    side_init(&cl, a);
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &cl.conn),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of("127.0.0.1", 0, &slen),
                            dst = addr_of("127.0.0.1", raw_port, &dlen);
    struct ndk_req r;
    ndk_req_init(&r);
    CHECK_STATUS(cl.conn->Dispatch->NdkConnect(cl.conn, cl.qp, (struct sockaddr *)&src, slen,
                                               (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                               ndk_req_done, &r),
                 STATUS_PENDING);
    struct harness_event closed;
    harness_event_init(&closed);
    NTSTATUS st = ndk_close_any(&cl.conn->Header, fixture_close_signal, &closed);
    /* Usually pending (the socket leaves the progress engine on its thread); STATUS_SUCCESS
     * when that thread finished first, which a loaded machine shows (lifecycle.md: both are
     * the close's legal answers). Either way the connect completed, cancelled, first. */
    CHECK_MSG(st == STATUS_PENDING || st == STATUS_SUCCESS, "close: %s", SoftNdkStatusName(st));
    if (st == STATUS_SUCCESS)
        CHECK(harness_event_count(&r.ev) == 1);
    CHECK(harness_event_wait(&r.ev, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(r.status, STATUS_CANCELLED);
    if (st == STATUS_PENDING)
        CHECK(harness_event_wait(&closed, 1, FIXTURE_WAIT_MS));
    else
        CHECK(!harness_event_wait(&closed, 1, FIXTURE_QUIET_MS)); /* no callback after SUCCESS */
    cl.conn = NULL;
    side_close(&cl);
    ndk_close_adapter(a);
    close(lfd);
}

/* ------------------------------------------------------------------------------------------ */
/* Endpoints: the listener's port stays taken while its connectors live ([EP-2]) */

TEST(listener_close_keeps_port_until_connectors_close)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    struct side cl, sv;
    uint16_t port = open_listener_and_sides(a, &srv, &cl, &sv);
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    struct harness_event lclosed;
    harness_event_init(&lclosed);
    CHECK_STATUS(ndk_close_any(&srv.listener->Header, fixture_close_signal, &lclosed),
                 STATUS_PENDING);
    /* refuses new connections at once */
    struct side c2;
    side_init(&c2, a);
    struct ndk_req r;
    CHECK_STATUS(connect_to(a, c2.qp, &c2.conn, "127.0.0.1", port, NULL, 0, &r),
                 STATUS_CONNECTION_REFUSED);
    /* the endpoint is still taken */
    struct server again;
    listen_on(a, &again, "127.0.0.1", port, STATUS_SHARING_VIOLATION, NULL);
    fixture_close_wait(&again.listener->Header);
    CHECK(!harness_event_wait(&lclosed, 1, FIXTURE_QUIET_MS));
    side_close(&sv); /* the accepted connector closes: the listener's close completes */
    CHECK(harness_event_wait(&lclosed, 1, FIXTURE_WAIT_MS));
    struct server fresh;
    listen_on(a, &fresh, "127.0.0.1", port, STATUS_SUCCESS, NULL);
    fixture_close_wait(&fresh.listener->Header);
    side_close(&c2);
    side_close(&cl);
    ndk_close_adapter(a);
}

TEST(shared_endpoint_connects_to_distinct_peers)
{
    NDK_ADAPTER *a = conf_open();
    struct server s1, s2;
    uint16_t p1, p2;
    listen_on(a, &s1, "127.0.0.1", 0, STATUS_SUCCESS, &p1);
    listen_on(a, &s2, "127.0.0.1", 0, STATUS_SUCCESS, &p2);
    uint16_t se_port;
    NDK_SHARED_ENDPOINT *se = loopback_shared_endpoint(a, &se_port);
    CHECK(se_port != 0);

    struct side c1, c2, c3, v1, v2;
    side_init(&c1, a);
    side_init(&c2, a);
    side_init(&c3, a);
    side_init(&v1, a);
    side_init(&v2, a);
    struct side *cl[2] = {&c1, &c2};
    struct side *sv[2] = {&v1, &v2};
    struct server *srv[2] = {&s1, &s2};
    uint16_t ports[2] = {p1, p2};
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &cl[i]->conn),
                     STATUS_SUCCESS);
        ULONG dlen;
        struct sockaddr_storage dst = addr_of("127.0.0.1", ports[i], &dlen);
        struct ndk_req r;
        ndk_req_init(&r);
        CHECK_STATUS(cl[i]->conn->Dispatch->NdkConnectWithSharedEndpoint(
                         cl[i]->conn, cl[i]->qp, se, (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                         ndk_req_done, &r),
                     STATUS_PENDING);
        CHECK(harness_event_wait(&srv[i]->ev, 1, FIXTURE_WAIT_MS));
        sv[i]->conn = srv[i]->incoming[0];
        struct sockaddr_storage peer;
        ULONG plen = sizeof peer;
        CHECK_STATUS(sv[i]->conn->Dispatch->NdkGetPeerAddress(sv[i]->conn, (struct sockaddr *)&peer,
                                                              &plen),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(port_of(&peer), se_port); /* both come from the shared port */
        struct ndk_req ra;
        ndk_req_init(&ra);
        CHECK_STATUS(sv[i]->conn->Dispatch->NdkAccept(sv[i]->conn, sv[i]->qp, 1, 1, NULL, 0, NULL,
                                                      NULL, ndk_req_done, &ra),
                     STATUS_PENDING);
        CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_SUCCESS);
        struct ndk_req rc;
        ndk_req_init(&rc);
        NDK_CONNECTOR *conn = cl[i]->conn;
        NTSTATUS st = conn->Dispatch->NdkCompleteConnect(conn, NULL, NULL, ndk_req_done, &rc);
        CHECK_STATUS(ndk_req_wait(&rc, st), STATUS_SUCCESS);
        CHECK_STATUS(ndk_req_wait(&ra, STATUS_PENDING), STATUS_SUCCESS);
    }
    /* the same peer again over the same endpoint: the 4-tuple exists */
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &c3.conn),
                 STATUS_SUCCESS);
    ULONG dlen;
    struct sockaddr_storage dst = addr_of("127.0.0.1", p1, &dlen);
    CHECK_STATUS(c3.conn->Dispatch->NdkConnectWithSharedEndpoint(
                     c3.conn, c3.qp, se, (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                     ndk_request_never, NULL),
                 STATUS_ADDRESS_ALREADY_EXISTS);
    /* the shared endpoint's close waits for its connectors */
    struct harness_event seclosed;
    harness_event_init(&seclosed);
    CHECK_STATUS(ndk_close_any(&se->Header, fixture_close_signal, &seclosed), STATUS_PENDING);
    side_close(&c3);
    side_close(&c1);
    side_close(&c2);
    CHECK(harness_event_wait(&seclosed, 1, FIXTURE_WAIT_MS));
    side_close(&v1);
    side_close(&v2);
    fixture_close_wait(&s1.listener->Header);
    fixture_close_wait(&s2.listener->Header);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Scale and churn (correctness, not time) */

TEST_T(listener_serves_100_concurrent_clients, 120)
{
    /* each NdkConnect takes its own ND port: a range wider than the suite's default */
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.EphemeralPortLow = (USHORT)(20000 + (getpid() % 50) * 400);
    o.EphemeralPortHigh = (USHORT)(o.EphemeralPortLow + 399);
    NDK_ADAPTER *as = conf_open(), *ac = conf_open_with(&o);
    struct server srv;
    uint16_t port;
    listen_on(as, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    enum { N = 100 };
    static struct side cl[N], sv[N];
    static struct ndk_req rc[N], ra[N], rr[N];
    for (int i = 0; i < N; i++) {
        side_init(&cl[i], ac);
        CHECK_STATUS(ac->Dispatch->NdkCreateConnector(ac, ndk_create_never, NULL, &cl[i].conn),
                     STATUS_SUCCESS);
        ULONG slen, dlen;
        struct sockaddr_storage src = addr_of("127.0.0.1", 0, &slen),
                                dst = addr_of("127.0.0.1", port, &dlen);
        ndk_req_init(&rc[i]);
        CHECK_STATUS(cl[i].conn->Dispatch->NdkConnect(cl[i].conn, cl[i].qp, (struct sockaddr *)&src,
                                                      slen, (struct sockaddr *)&dst, dlen, 1, 1, &i,
                                                      sizeof i, ndk_req_done, &rc[i]),
                     STATUS_PENDING);
    }
    CHECK(harness_event_wait(&srv.ev, N, 30000));
    for (int i = 0; i < N; i++) {
        side_init(&sv[i], as);
        sv[i].conn = srv.incoming[i];
        int who = -1;
        ULONG len = sizeof who;
        CHECK_STATUS(sv[i].conn->Dispatch->NdkGetConnectionData(sv[i].conn, NULL, NULL, &who, &len),
                     STATUS_SUCCESS);
        CHECK(who >= 0 && who < N);
        ndk_req_init(&ra[i]);
        CHECK_STATUS(sv[i].conn->Dispatch->NdkAccept(sv[i].conn, sv[i].qp, 1, 1, NULL, 0, NULL,
                                                     NULL, ndk_req_done, &ra[i]),
                     STATUS_PENDING);
    }
    for (int i = 0; i < N; i++) {
        CHECK_STATUS(ndk_req_wait(&rc[i], STATUS_PENDING), STATUS_SUCCESS);
        ndk_req_init(&rr[i]);
        NTSTATUS st =
            cl[i].conn->Dispatch->NdkCompleteConnect(cl[i].conn, NULL, NULL, ndk_req_done, &rr[i]);
        CHECK_STATUS(ndk_req_wait(&rr[i], st), STATUS_SUCCESS);
    }
    for (int i = 0; i < N; i++)
        CHECK_STATUS(ndk_req_wait(&ra[i], STATUS_PENDING), STATUS_SUCCESS);
    for (int i = 0; i < N; i++) {
        side_close(&cl[i]);
        side_close(&sv[i]);
    }
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(ac);
    ndk_close_adapter(as);
}

TEST_T(connect_accept_disconnect_2000_cycles_no_leak, 240)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    int fds_before = -1;
    churning = true;
    for (int i = 0; i < 2000; i++) {
        struct side cl, sv;
        side_init(&cl, a);
        side_init(&sv, a);
        establish(&cl, &sv, &srv, "127.0.0.1", port);
        struct ndk_req rd, rs;
        ndk_req_init(&rd);
        NTSTATUS st = cl.conn->Dispatch->NdkDisconnect(cl.conn, ndk_req_done, &rd);
        CHECK(harness_event_wait(&sv.disc.ev, 1, FIXTURE_WAIT_MS));
        ndk_req_init(&rs);
        NTSTATUS st2 = sv.conn->Dispatch->NdkDisconnect(sv.conn, ndk_req_done, &rs);
        CHECK_STATUS(ndk_req_wait(&rs, st2), STATUS_SUCCESS);
        CHECK_STATUS(ndk_req_wait(&rd, st), STATUS_SUCCESS);
        side_close(&cl);
        side_close(&sv);
        harness_event_destroy(&rd.ev);
        harness_event_destroy(&rs.ev);
        if (i == 9)
            fds_before = harness_open_fds();
    }
    /* sockets closed by the provider may take a progress-thread turn to go */
    int fds_after = harness_open_fds();
    CHECK_MSG(fds_after <= fds_before, "fd count grew from %d to %d", fds_before, fds_after);
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(a);
}

TEST(flush_of_connected_qp_aborts_without_local_disconnect_event)
{
    conf_breaks_rules("connector_state: NdkDisconnect after the flush, on purpose");
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    struct side cl, sv;
    uint16_t port = open_listener_and_sides(a, &srv, &cl, &sv);
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    conf_post_recvs(cl.qp, 2, 10);
    cl.qp->Dispatch->NdkFlush(cl.qp);
    /* the receives complete cancelled, in order */
    NDK_RESULT_EX res;
    for (uintptr_t i = 0; i < 2; i++) {
        CHECK(poll_result(cl.cq.cq, &res));
        CHECK_STATUS(res.Status, STATUS_CANCELLED);
        CHECK(res.RequestContext == (void *)(10 + i));
    }
    /* the peer learns the connection is gone; we are not told of our own action */
    CHECK_MSG(harness_event_wait(&sv.disc.ev, 1, FIXTURE_WAIT_MS), "peer saw no disconnect");
    CHECK(!harness_event_wait(&cl.disc.ev, 1, FIXTURE_QUIET_MS));
    CHECK_STATUS(cl.qp->Dispatch->NdkSend(cl.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    /* disconnecting a connection that is already down completes at once */
    CHECK_STATUS(cl.conn->Dispatch->NdkDisconnect(cl.conn, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(atomic_load(&sv.disc.n), 1);
    /* a QP that served a connection is never reused: refused inline, nothing sent */
    NDK_CONNECTOR *again;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &again),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of("127.0.0.1", 0, &slen),
                            dst = addr_of("127.0.0.1", port, &dlen);
    unsigned events = atomic_load(&srv.n);
    CHECK_STATUS(again->Dispatch->NdkConnect(again, cl.qp, (struct sockaddr *)&src, slen,
                                             (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                             ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK(!harness_event_wait(&srv.ev, events + 1, FIXTURE_QUIET_MS));
    fixture_close_wait(&again->Header);
    close_sides_and_listener(&cl, &sv, &srv);
    ndk_close_adapter(a);
}

static void *half_reply_server(void *arg)
{
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
        char buf[512];
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) > 0)
            (void)!read(fd, buf, sizeof buf);
        static const char half[] = "MPA ID Rep"; /* a Reply key cut short */
        (void)!write(fd, half, sizeof half - 1);
        close(fd);
    }
    return NULL;
}

TEST(connect_reply_cut_short_is_aborted_not_refused)
{
    connect_to_fake_peer(half_reply_server, STATUS_CONNECTION_ABORTED);
}

/* The active side may send the moment CompleteConnect completes; the Send can then arrive in
 * the same TCP segment as the RTR, and the passive side must leave its bytes to the QP. */
TEST(send_right_after_complete_connect_reaches_the_passive_qp)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    for (int round = 0; round < 50; round++) {
        struct side cl, sv;
        side_init(&cl, a);
        side_init(&sv, a);
        struct ndk_req r, ra, rc;
        sv.conn = start_connect(&cl, NULL, &srv, port, &r);
        conf_post_recvs(sv.qp, 1, 5); /* before Accept: the Send may come with the RTR */
        ndk_req_init(&ra);
        CHECK_STATUS(sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 0, NULL, NULL,
                                                  ndk_req_done, &ra),
                     STATUS_PENDING);
        CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_SUCCESS);
        ndk_req_init(&rc);
        NTSTATUS st = cl.conn->Dispatch->NdkCompleteConnect(cl.conn, NULL, NULL, ndk_req_done, &rc);
        CHECK_STATUS(ndk_req_wait(&rc, st), STATUS_SUCCESS);
        CHECK_STATUS(cl.qp->Dispatch->NdkSend(cl.qp, (void *)6, NULL, 0, 0), STATUS_SUCCESS);
        CHECK_STATUS(ndk_req_wait(&ra, STATUS_PENDING), STATUS_SUCCESS);
        NDK_RESULT_EX res;
        CHECK(poll_result(sv.cq.cq, &res));
        CHECK_STATUS(res.Status, STATUS_SUCCESS);
        CHECK(res.RequestContext == (void *)5);
        CHECK(poll_result(cl.cq.cq, &res));
        CHECK_STATUS(res.Status, STATUS_SUCCESS);
        side_close(&cl);
        side_close(&sv);
        harness_event_destroy(&r.ev);
        harness_event_destroy(&ra.ev);
        harness_event_destroy(&rc.ev);
    }
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(a);
}

/* ---- adapter instances of one interface ---------------------------------------------------- */

/* Post one receive of len bytes at buf, or send len bytes from buf, with the PD's privileged
 * token (a logical address is the virtual address: docs/decisions.md #6). */
static NDK_SGE priv_sge(NDK_PD *pd, void *buf, ULONG len)
{
    UINT32 tok = 0;
    pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd, &tok);
    NDK_SGE sge = {.VirtualAddress = buf, .Length = len, .MemoryRegionToken = tok};
    return sge;
}

TEST(instances_of_one_interface_share_the_device)
{
    /* A driver opens one NDK_ADAPTER per socket and one for its listener, all on one
     * interface; on an RNIC they are handles on one device (docs/adapter.md, "Instances of
     * one interface"). Here: the listener on instance L, the passive QP on instance P with the
     * CQ of instance L, the active connector on instance C with a QP of instance Q. */
    NDK_ADAPTER *il = conf_open(), *ip = conf_open(), *ic = conf_open(), *iq = conf_open();
    struct server srv;
    uint16_t port = 0;
    listen_on(il, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    struct side sv, cl;
    memset(&sv, 0, sizeof sv);
    sv.a = ip;
    sv.pd = conf_pd(ip);
    conf_cq_create(il, &sv.cq, 64); /* the CQ of another instance */
    sv.qp = conf_qp(sv.pd, sv.cq.cq, sv.cq.cq, &sv, 8);
    harness_event_init(&sv.disc.ev);
    side_init(&cl, iq);
    cl.a = ic; /* establish() creates the connector on ic, the QP is iq's */
    establish(&cl, &sv, &srv, "127.0.0.1", port);

    /* data both ways through the shared device */
    static char out[3000], in[3000];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (char)(i * 7 + 1);
    NDK_SGE rs = priv_sge(sv.pd, in, sizeof in), ss = priv_sge(cl.pd, out, sizeof out);
    CHECK_STATUS(sv.qp->Dispatch->NdkReceive(sv.qp, (void *)11, &rs, 1), STATUS_SUCCESS);
    CHECK_STATUS(cl.qp->Dispatch->NdkSend(cl.qp, (void *)12, &ss, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX res;
    CHECK(poll_result(sv.cq.cq, &res));
    CHECK_STATUS(res.Status, STATUS_SUCCESS);
    CHECK(res.RequestContext == (void *)11);
    CHECK_EQ_U64(res.BytesTransferred, sizeof out);
    CHECK_MEM(in, out, sizeof out);
    CHECK(poll_result(cl.cq.cq, &res));
    CHECK_STATUS(res.Status, STATUS_SUCCESS);
    CHECK(res.RequestContext == (void *)12);

    /* Each instance keeps its own accounting: P closes once its own objects are closed,
     * while the CQ it used (L's) is still open. */
    fixture_close_wait(&sv.conn->Header);
    fixture_close_wait(&sv.qp->Header);
    fixture_close_wait(&sv.pd->Header);
    harness_event_destroy(&sv.disc.ev);
    ndk_close_adapter(ip);
    side_close(&cl);
    ndk_close_adapter(ic);
    ndk_close_adapter(iq);
    conf_cq_destroy(&sv.cq);
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(il);
}

TEST(instance_connects_with_shared_endpoint_of_another_instance)
{
    NDK_ADAPTER *ia = conf_open(), *ib = conf_open();
    struct server srv;
    uint16_t port = 0;
    listen_on(ia, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    NDK_SHARED_ENDPOINT *se = loopback_shared_endpoint(ia, NULL);
    struct side cl, sv;
    side_init(&cl, ib);
    side_init(&sv, ib);
    struct ndk_req r, ra;
    sv.conn = start_connect(&cl, se, &srv, port, &r);
    ndk_req_init(&ra);
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_PENDING);
    finish_connect(&cl, &r, &ra);
    side_close(&cl);
    side_close(&sv);
    fixture_close_wait(&se->Header);
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(ib);
    ndk_close_adapter(ia);
    harness_event_destroy(&r.ev);
    harness_event_destroy(&ra.ev);
}

/* A raw Responder's half of the handshake: reads the 24-byte MPA Request (bounded; a short one
 * is answered all the same) and fills rep with a Reply header (RFC 5044 section 7.1, RFC 6581
 * section 9.1): CRC, enhanced, Rev 2, PD_Length pd_length, then IRD 1 and ORD 1 with no
 * peer-to-peer bit. */
static void answer_request(int fd, unsigned char rep[24], uint16_t pd_length)
{
    unsigned char req[24];
    size_t got = 0;
    struct pollfd p = {fd, POLLIN, 0};
    while (got < sizeof req && poll(&p, 1, 5000) > 0) {
        ssize_t n = read(fd, req + got, sizeof req - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    memcpy(rep, "MPA ID Rep Frame", 16);
    rep[16] = 0x40 | 0x10; /* CRC, enhanced (RFC 6581) */
    rep[17] = 2;
    rep[18] = (unsigned char)(pd_length >> 8);
    rep[19] = (unsigned char)(pd_length & 0xff);
    rep[20] = 0x00; /* IRD 1, no peer-to-peer */
    rep[21] = 0x01;
    rep[22] = 0x00; /* ORD 1 */
    rep[23] = 0x01;
}

/* A Responder whose Reply carries 300 bytes of private data after the RFC 6581 word (PD_Length
 * 304: legal in RFC 5044, over the 256 bytes softndk itself sends). */
static void *big_reply_server(void *arg)
{
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
        unsigned char rep[24 + 300];
        answer_request(fd, rep, 304);
        for (int i = 0; i < 300; i++)
            rep[24 + i] = (unsigned char)(i * 3 + 5);
        (void)!write(fd, rep, sizeof rep);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 5000); /* until the client closes */
        close(fd);
    }
    return NULL;
}

TEST(reply_private_data_of_300_bytes_is_readable_in_full)
{
    /* decisions.md #22: up to RFC 5044's 512 bytes are taken, NdkGetConnectionData returns them */
    uint16_t raw_port;
    int lfd = raw_listener(&raw_port);
    pthread_t th;
    pthread_create(&th, NULL, big_reply_server, &lfd);
    NDK_ADAPTER *a = conf_open();
    struct side cl;
    side_init(&cl, a);
    struct ndk_req r;
    CHECK_STATUS(connect_to(a, cl.qp, &cl.conn, "127.0.0.1", raw_port, NULL, 0, &r),
                 STATUS_SUCCESS);
    unsigned char got[512];
    ULONG len = 252; /* MaxCalleeData: what softndk itself would send */
    CHECK_STATUS(cl.conn->Dispatch->NdkGetConnectionData(cl.conn, NULL, NULL, got, &len),
                 STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(len, 300);
    len = sizeof got;
    CHECK_STATUS(cl.conn->Dispatch->NdkGetConnectionData(cl.conn, NULL, NULL, got, &len),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(len, 300);
    for (int i = 0; i < 300; i++)
        CHECK_EQ_U64(got[i], (unsigned char)(i * 3 + 5));
    side_close(&cl);
    pthread_join(th, NULL);
    ndk_close_adapter(a);
    close(lfd);
}

/* An address is the adapter's when the host delivers it locally on its interface: lo lists
 * only 127.0.0.1, yet Linux delivers all of 127.0.0.0/8 there. An address listed on
 * another interface, or one routed away, stays STATUS_INVALID_ADDRESS. */
TEST(adapter_on_lo_owns_every_loopback_address)
{
    NDK_ADAPTER *a = conf_open(); /* on lo */
    struct server s1, s2, bad;
    uint16_t port;
    listen_on(a, &s1, "127.0.0.2", 0, STATUS_SUCCESS, &port);
    listen_on(a, &s2, "127.255.255.254", 0, STATUS_SUCCESS, NULL);
    /* a connection to 127.0.0.2 from 127.0.0.2, and its addresses as they are */
    struct side sv, cl;
    side_init(&sv, a);
    side_init(&cl, a);
    establish(&cl, &sv, &s1, "127.0.0.2", port);
    struct sockaddr_in got;
    ULONG glen = sizeof got;
    CHECK_STATUS(sv.conn->Dispatch->NdkGetLocalAddress(sv.conn, (struct sockaddr *)&got, &glen),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(ntohl(got.sin_addr.s_addr), 0x7f000002u);
    side_close(&cl);
    side_close(&sv);
    /* not delivered locally (TEST-NET-2): refused */
    listen_on(a, &bad, "198.51.100.7", 0, STATUS_INVALID_ADDRESS, NULL);
    fixture_close_wait(&bad.listener->Header);
    /* an address another interface lists is that interface's, though it too is delivered via
     * lo */
    struct ifaddrs *list;
    CHECK(getifaddrs(&list) == 0);
    for (struct ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, "lo") == 0)
            continue;
        char ip[INET_ADDRSTRLEN];
        struct sockaddr_in sin;
        memcpy(&sin, i->ifa_addr, sizeof sin);
        inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip);
        struct server other;
        listen_on(a, &other, ip, 0, STATUS_INVALID_ADDRESS, NULL);
        fixture_close_wait(&other.listener->Header);
        break;
    }
    freeifaddrs(list);
    fixture_close_wait(&s1.listener->Header);
    fixture_close_wait(&s2.listener->Header);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Everything an object holds is released before its close completes (docs/lifecycle.md): a
 * port is free for NdkListen inside the close completion that released it. */

struct relisten {
    NDK_LISTENER *next; /* created beforehand: the completion only calls NdkListen */
    struct sockaddr_storage addr;
    ULONG len;
    NTSTATUS status;
    struct harness_event done;
};

static void relisten_in_close_completion(void *ctx)
{
    struct relisten *r = ctx;
    r->status = r->next->Dispatch->NdkListen(r->next, (struct sockaddr *)&r->addr, r->len,
                                             ndk_request_never, NULL);
    harness_event_signal(&r->done);
}

static void relisten_init(struct relisten *r, NDK_ADAPTER *a, struct server *next, uint16_t port)
{
    memset(next, 0, sizeof *next);
    harness_event_init(&next->ev);
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, on_connect_event, next, ndk_create_never, NULL, &r->next),
        STATUS_SUCCESS);
    next->listener = r->next;
    r->addr = addr_of("127.0.0.1", port, &r->len);
    r->status = STATUS_PENDING;
    harness_event_init(&r->done);
}

/* The close either completes inline (then the port must be free on return) or pends and runs
 * the completion: either way NdkListen on the port, right then, succeeds. */
static void close_then_relisten(NDK_OBJECT_HEADER *h, struct relisten *r)
{
    NTSTATUS st = ndk_close_any(h, relisten_in_close_completion, r);
    CHECK_MSG(st == STATUS_PENDING || st == STATUS_SUCCESS, "close: %s", SoftNdkStatusName(st));
    if (st == STATUS_SUCCESS)
        relisten_in_close_completion(r);
    CHECK(harness_event_wait(&r->done, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(r->status, STATUS_SUCCESS);
}

TEST(listener_port_is_free_inside_its_close_completion)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv, next;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    struct relisten r;
    relisten_init(&r, a, &next, port);
    close_then_relisten(&srv.listener->Header, &r);
    /* and the new listener serves */
    struct side cl, sv;
    side_init(&cl, a);
    side_init(&sv, a);
    establish(&cl, &sv, &next, "127.0.0.1", port);
    side_close(&cl);
    side_close(&sv);
    fixture_close_wait(&next.listener->Header);
    ndk_close_adapter(a);
}

TEST(shared_endpoint_port_is_free_inside_its_close_completion)
{
    NDK_ADAPTER *a = conf_open();
    uint16_t port;
    NDK_SHARED_ENDPOINT *se = loopback_shared_endpoint(a, &port);
    /* taken while it lives */
    struct server busy;
    listen_on(a, &busy, "127.0.0.1", port, STATUS_SHARING_VIOLATION, NULL);
    fixture_close_wait(&busy.listener->Header);
    struct server next;
    struct relisten r;
    relisten_init(&r, a, &next, port);
    close_then_relisten(&se->Header, &r);
    fixture_close_wait(&next.listener->Header);
    ndk_close_adapter(a);
}

/* The shared endpoint's close pends while a connector made over it is open; its port is free
 * inside the completion that runs once that connector is closed. */
TEST(shared_endpoint_port_is_free_inside_its_pending_close_completion)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t lport;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &lport);
    uint16_t port;
    NDK_SHARED_ENDPOINT *se = loopback_shared_endpoint(a, &port);
    /* a connector over it, refused by the server (its incoming connector closed unanswered) */
    struct side cl;
    side_init(&cl, a);
    struct ndk_req r;
    fixture_close_wait(&start_connect(&cl, se, &srv, lport, &r)->Header);
    CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_CONNECTION_REFUSED);
    /* the endpoint's close waits for that connector */
    struct server next;
    struct relisten rl;
    relisten_init(&rl, a, &next, port);
    CHECK_STATUS(ndk_close_any(&se->Header, relisten_in_close_completion, &rl), STATUS_PENDING);
    CHECK(!harness_event_wait(&rl.done, 1, FIXTURE_QUIET_MS));
    fixture_close_wait(&cl.conn->Header);
    cl.conn = NULL;
    CHECK(harness_event_wait(&rl.done, 1, FIXTURE_WAIT_MS));
    CHECK_STATUS(rl.status, STATUS_SUCCESS);
    side_close(&cl);
    fixture_close_wait(&next.listener->Header);
    fixture_close_wait(&srv.listener->Header);
    harness_event_destroy(&r.ev);
    ndk_close_adapter(a);
}

TEST(connector_port_is_free_inside_its_close_completion)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    struct side cl, sv;
    uint16_t port = open_listener_and_sides(a, &srv, &cl, &sv);
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    struct sockaddr_storage mine;
    ULONG mlen = sizeof mine;
    CHECK_STATUS(cl.conn->Dispatch->NdkGetLocalAddress(cl.conn, (struct sockaddr *)&mine, &mlen),
                 STATUS_SUCCESS);
    uint16_t cport = port_of(&mine);
    /* the connector's port must be free in its close completion (the QP it connected still
     * open) */
    struct server next;
    struct relisten r;
    relisten_init(&r, a, &next, cport);
    close_then_relisten(&cl.conn->Header, &r);
    cl.conn = NULL;
    side_close(&cl);
    side_close(&sv);
    fixture_close_wait(&next.listener->Header);
    fixture_close_wait(&srv.listener->Header);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* A failed NdkAccept puts its QP in error: what was posted completes STATUS_CANCELLED, as
 * after a disconnect, and so does what is posted later (docs/connector.md, decisions.md). */

/* s's CQ holds exactly `count` results, s's receives in posting order, each cancelled, the
 * first posted with RequestContext `first`. */
static void check_receives_cancelled(struct side *s, ULONG count, uintptr_t first)
{
    NDK_RESULT_EX res[64];
    ULONG n = s->cq.cq->Dispatch->NdkGetCqResultsEx(s->cq.cq, res, 64);
    CHECK_EQ_U64(n, count);
    for (ULONG i = 0; i < n; i++) {
        CHECK_STATUS(res[i].Status, STATUS_CANCELLED);
        CHECK_EQ_U64(res[i].Type, NdkOperationTypeReceive);
        CHECK(res[i].RequestContext == (void *)(first + i) && res[i].QPContext == s);
    }
}

/* s's QP is in error: a receive posted now (RequestContext ctx) completes at once, cancelled,
 * and an initiator request is refused. */
static void check_qp_in_error(struct side *s, uintptr_t ctx)
{
    conf_post_recvs(s->qp, 1, ctx);
    NDK_RESULT_EX res[4];
    CHECK_EQ_U64(s->cq.cq->Dispatch->NdkGetCqResultsEx(s->cq.cq, res, 4), 1);
    CHECK_STATUS(res[0].Status, STATUS_CANCELLED);
    CHECK(res[0].RequestContext == (void *)ctx);
    CHECK_STATUS(s->qp->Dispatch->NdkSend(s->qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
}

TEST(failed_accept_completes_posted_receives_cancelled)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    struct side cl, sv;
    uint16_t port = open_listener_and_sides(a, &srv, &cl, &sv);
    struct ndk_req r, ra;
    sv.conn = start_connect(&cl, NULL, &srv, port, &r);
    conf_post_recvs(sv.qp, 2, 40);
    ndk_req_init(&ra);
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_PENDING);
    CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_SUCCESS);
    /* the active side leaves instead of NdkCompleteConnect: no RTR comes */
    fixture_close_wait(&cl.conn->Header);
    cl.conn = NULL;
    CHECK_STATUS(ndk_req_wait(&ra, STATUS_PENDING), STATUS_CONNECTION_ABORTED);
    /* both receives are on the CQ by the time the accept completion ran, in posting order */
    check_receives_cancelled(&sv, 2, 40);
    check_qp_in_error(&sv, 50);
    close_sides_and_listener(&cl, &sv, &srv);
    harness_event_destroy(&r.ev);
    harness_event_destroy(&ra.ev);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Inline failures of the calls that take a QP (docs/connector.md, decisions.md 14c): a failed
 * NdkAccept ends its QP (what was posted completes STATUS_CANCELLED before the call returns);
 * a failed NdkConnect, NdkConnectWithSharedEndpoint or NdkCompleteConnect leaves it idle, its
 * receives posted for the next connection it is given to; a call refused for its arguments
 * changes nothing. */

/* A valid MPA Request (RFC 5044 section 7.1, RFC 6581 section 9.1): key, enhanced flag, Rev 2,
 * PD_Length 4, the IRD/ORD word with IRD 1, ORD 1 and no peer-to-peer bit. */
static const unsigned char good_request[24] = {'M',  'P', 'A',  ' ',  'I',  'D',  ' ',  'R',
                                               'e',  'q', ' ',  'F',  'r',  'a',  'm',  'e',
                                               0x10, 2,   0x00, 0x04, 0x00, 0x01, 0x00, 0x01};

/* A raw TCP client of 127.0.0.1:port that sends a valid MPA Request. */
static int raw_requester(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(send(fd, good_request, sizeof good_request, MSG_NOSIGNAL) == sizeof good_request);
    return fd;
}

/* Close with a reset (SO_LINGER 0): the peer gives up abruptly. */
static void reset_close(int fd)
{
    struct linger lg = {1, 0};
    CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    close(fd);
}

/* Wait (bounded) until the adapter saw `n` peers leave during setup. */
static bool wait_abandoned(NDK_ADAPTER *a, ULONG64 n)
{
    return wait_counter(a, offsetof(SOFTNDK_COUNTERS, SetupsAbandoned), n);
}

/* No result on the CQ now. */
static void check_cq_empty(NDK_CQ *cq)
{
    NDK_RESULT_EX res;
    CHECK_EQ_U64(cq->Dispatch->NdkGetCqResultsEx(cq, &res, 1), 0);
}

/* Over an established connection, sv sends one zero-length message: it lands in cl's oldest
 * receive, whose RequestContext is `want`. */
static void check_first_receive_served(struct side *cl, struct side *sv, uintptr_t want)
{
    CHECK_STATUS(sv->qp->Dispatch->NdkSend(sv->qp, (void *)7, NULL, 0, 0), STATUS_SUCCESS);
    NDK_RESULT_EX res;
    CHECK(poll_result(cl->cq.cq, &res));
    CHECK_STATUS(res.Status, STATUS_SUCCESS);
    CHECK_EQ_U64(res.Type, NdkOperationTypeReceive);
    CHECK(res.RequestContext == (void *)want && res.QPContext == cl);
    CHECK(poll_result(sv->cq.cq, &res));
    CHECK_STATUS(res.Status, STATUS_SUCCESS);
    CHECK(res.RequestContext == (void *)7);
}

TEST(accept_after_the_peer_reset_fails_inline_and_cancels_posted_receives)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    struct side sv;
    memset(&sv, 0, sizeof sv);
    sv.a = a;
    sv.pd = conf_pd(a);
    conf_cq_create(a, &sv.cq, 64);
    sv.qp = conf_qp(sv.pd, sv.cq.cq, sv.cq.cq, &sv, 64);
    harness_event_init(&sv.disc.ev);
    /* the peer sends its Request, then resets before the consumer answers */
    int fd = raw_requester(port);
    CHECK(harness_event_wait(&srv.ev, 1, FIXTURE_WAIT_MS));
    sv.conn = srv.incoming[0];
    conf_post_recvs(sv.qp, 64, 100);
    reset_close(fd);
    CHECK(wait_abandoned(a, 1));
    struct ndk_req ra;
    ndk_req_init(&ra);
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_CONNECTION_ABORTED);
    /* every receive is on the CQ when the call returns, in posting order */
    check_receives_cancelled(&sv, 64, 100);
    /* an inline failure has no completion */
    CHECK(!harness_event_wait(&ra.ev, 1, 50));
    check_qp_in_error(&sv, 200);
    /* the connector is closed: nothing to accept or disconnect any more */
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(sv.conn->Dispatch->NdkDisconnect(sv.conn, ndk_req_done, &ra),
                 STATUS_CONNECTION_INVALID);
    SOFTNDK_COUNTERS c = counters_of(a);
    CHECK_EQ_U64(c.SetupsAbandoned, 1);
    CHECK_EQ_U64(c.IncomingUnanswered, 0);
    CHECK_EQ_U64(c.Accept, 0);
    side_close(&sv);
    fixture_close_wait(&srv.listener->Header);
    harness_event_destroy(&ra.ev);
    ndk_close_adapter(a);
}

TEST(accept_refused_arguments_leave_qp_and_connector_as_they_were)
{
    NDK_ADAPTER *a = conf_open();
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    struct server srv;
    struct side cl, sv;
    uint16_t port = open_listener_and_sides(a, &srv, &cl, &sv);
    struct ndk_req r, ra;
    ndk_req_init(&ra);
    conf_post_recvs(cl.qp, 1, 30);
    sv.conn = start_connect(&cl, NULL, &srv, port, &r);
    conf_post_recvs(sv.qp, 2, 40);
    static char big[1024];
    CHECK_STATUS(sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, big, info.MaxCalleeData + 1,
                                              NULL, NULL, ndk_req_done, &ra),
                 STATUS_INVALID_BUFFER_SIZE);
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 4, NULL, NULL, ndk_req_done, &ra),
        STATUS_INVALID_PARAMETER);
    /* the active side's QP, bound to its connector: someone else's */
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, cl.qp, 1, 1, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_CONNECTION_ACTIVE);
    /* nothing was completed on either QP, no completion came */
    check_cq_empty(sv.cq.cq);
    check_cq_empty(cl.cq.cq);
    CHECK(!harness_event_wait(&ra.ev, 1, 50));
    /* the request still awaits its answer: accepted now, the connection works, with the
     * receives posted before on both sides */
    CHECK_STATUS(
        sv.conn->Dispatch->NdkAccept(sv.conn, sv.qp, 1, 1, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_PENDING);
    finish_connect(&cl, &r, &ra);
    check_first_receive_served(&cl, &sv, 30);
    check_first_receive_served(&sv, &cl, 40);
    close_sides_and_listener(&cl, &sv, &srv);
    harness_event_destroy(&r.ev);
    harness_event_destroy(&ra.ev);
    ndk_close_adapter(a);
}

TEST(connect_inline_failure_leaves_qp_idle_with_its_receives)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    struct side cl, sv;
    uint16_t port = open_listener_and_sides(a, &srv, &cl, &sv);
    conf_post_recvs(cl.qp, 2, 60);
    /* the QP is taken, then the source port is found held by the listener */
    NDK_CONNECTOR *failed;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &failed),
                 STATUS_SUCCESS);
    ULONG slen, dlen;
    struct sockaddr_storage src = addr_of("127.0.0.1", port, &slen),
                            dst = addr_of("127.0.0.1", port, &dlen);
    CHECK_STATUS(failed->Dispatch->NdkConnect(failed, cl.qp, (struct sockaddr *)&src, slen,
                                              (struct sockaddr *)&dst, dlen, 1, 1, NULL, 0,
                                              ndk_request_never, NULL),
                 STATUS_SHARING_VIOLATION);
    /* nothing completed; the QP is idle (not in error: a new receive stays posted) */
    check_cq_empty(cl.cq.cq);
    conf_post_recvs(cl.qp, 1, 62);
    check_cq_empty(cl.cq.cq);
    fixture_close_wait(&failed->Header);
    /* given to another connector, it connects, and the receive posted first is served */
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    check_first_receive_served(&cl, &sv, 60);
    close_sides_and_listener(&cl, &sv, &srv);
    ndk_close_adapter(a);
}

TEST(connect_with_shared_endpoint_inline_failure_leaves_qp_idle_with_its_receives)
{
    NDK_ADAPTER *a = conf_open();
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    NDK_SHARED_ENDPOINT *se = loopback_shared_endpoint(a, NULL);
    struct side first, cl, sv;
    side_init(&first, a);
    side_init(&cl, a);
    side_init(&sv, a);
    /* a connector of the endpoint goes to the listener... */
    struct ndk_req r;
    NDK_CONNECTOR *in = start_connect(&first, se, &srv, port, &r);
    /* ...so a second one to the same peer fails inline once it has taken its QP */
    ULONG dlen;
    struct sockaddr_storage dst = addr_of("127.0.0.1", port, &dlen);
    conf_post_recvs(cl.qp, 2, 70);
    NDK_CONNECTOR *failed;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &failed),
                 STATUS_SUCCESS);
    CHECK_STATUS(failed->Dispatch->NdkConnectWithSharedEndpoint(failed, cl.qp, se,
                                                                (struct sockaddr *)&dst, dlen, 1, 1,
                                                                NULL, 0, ndk_request_never, NULL),
                 STATUS_ADDRESS_ALREADY_EXISTS);
    check_cq_empty(cl.cq.cq);
    conf_post_recvs(cl.qp, 1, 72);
    check_cq_empty(cl.cq.cq);
    fixture_close_wait(&failed->Header);
    CHECK_STATUS(in->Dispatch->NdkReject(in, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&r, STATUS_PENDING), STATUS_CONNECTION_REFUSED);
    fixture_close_wait(&in->Header);
    /* the QP serves the next connection, the receive posted first included */
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    check_first_receive_served(&cl, &sv, 70);
    side_close(&first);
    side_close(&cl);
    side_close(&sv);
    fixture_close_wait(&se->Header);
    fixture_close_wait(&srv.listener->Header);
    harness_event_destroy(&r.ev);
    ndk_close_adapter(a);
}

/* A Responder that answers the Request with a valid Reply (no peer-to-peer mode), then resets
 * when the test writes to its pipe. */
struct resetting_peer {
    int lfd;
    int go[2];
};

static void *reply_then_reset_server(void *arg)
{
    struct resetting_peer *p = arg;
    struct pollfd lp = {p->lfd, POLLIN, 0};
    if (poll(&lp, 1, 5000) <= 0)
        return NULL;
    int fd = accept(p->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    unsigned char rep[24];
    answer_request(fd, rep, 4);
    (void)!write(fd, rep, sizeof rep);
    struct pollfd gp = {p->go[0], POLLIN, 0};
    poll(&gp, 1, 5000);
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    return NULL;
}

TEST(complete_connect_after_the_peer_reset_fails_inline_and_leaves_qp_idle)
{
    struct resetting_peer peer;
    uint16_t raw_port;
    peer.lfd = raw_listener(&raw_port);
    CHECK(pipe(peer.go) == 0);
    pthread_t th;
    pthread_create(&th, NULL, reply_then_reset_server, &peer);
    NDK_ADAPTER *a = conf_open();
    struct side cl, sv;
    side_init(&cl, a);
    side_init(&sv, a);
    conf_post_recvs(cl.qp, 2, 80);
    struct ndk_req r, rc;
    CHECK_STATUS(connect_to(a, cl.qp, &cl.conn, "127.0.0.1", raw_port, NULL, 0, &r),
                 STATUS_SUCCESS);
    CHECK(write(peer.go[1], "x", 1) == 1);
    CHECK(wait_abandoned(a, 1));
    ndk_req_init(&rc);
    CHECK_STATUS(cl.conn->Dispatch->NdkCompleteConnect(cl.conn, NULL, NULL, ndk_req_done, &rc),
                 STATUS_CONNECTION_ABORTED);
    CHECK(!harness_event_wait(&rc.ev, 1, 50));
    /* nothing completed; the QP is idle */
    check_cq_empty(cl.cq.cq);
    conf_post_recvs(cl.qp, 1, 82);
    check_cq_empty(cl.cq.cq);
    CHECK_EQ_U64(counters_of(a).SetupsAbandoned, 1);
    fixture_close_wait(&cl.conn->Header);
    cl.conn = NULL;
    /* given to another connector, it connects, and the receive posted first is served */
    struct server srv;
    uint16_t port;
    listen_on(a, &srv, "127.0.0.1", 0, STATUS_SUCCESS, &port);
    establish(&cl, &sv, &srv, "127.0.0.1", port);
    check_first_receive_served(&cl, &sv, 80);
    close_sides_and_listener(&cl, &sv, &srv);
    pthread_join(th, NULL);
    close(peer.lfd);
    close(peer.go[0]);
    close(peer.go[1]);
    harness_event_destroy(&r.ev);
    harness_event_destroy(&rc.ev);
    ndk_close_adapter(a);
}
