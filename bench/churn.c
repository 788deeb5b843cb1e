/* churn: connection churn and scale through the public NDKPI interface only
 * (<ndk/ndkpi.h>, <ndk/softndk.h>). Pass/fail on correctness, never on time; the figures are
 * printed. docs/reliability.md.
 *
 *   churn [--only cycles|conns|qps|answer] [--cycles N] [--conns N] [--qps N] [--answer N]
 *         [--addr IP] [--timeout S] [--full]
 *
 *   cycles  N times, one after the other: create QPs, connect/accept, one checked message,
 *           graceful disconnect (the passive side gets the disconnect event exactly once),
 *           close everything. Figure: cycles/s.
 *   conns   N connections open at once on one adapter (both ends in this process, so 2 N
 *           sockets; RLIMIT_NOFILE is raised as far as allowed and the number reached is
 *           reported when it is not enough), one checked message on each, then all
 *           disconnected. Figure: RSS per idle connection (delta / N) beside the design's
 *           64 KiB.
 *   qps     N connections whose QPs all share one CQ per side, 8 checked messages each way.
 *   answer  N connections to one listener (batches of 250), the server's QPs on one CQ polled
 *           by one thread that answers each connection's first message the moment it arrives,
 *           beside a thread that connects and closes at once, again and again. Reports resets
 *           (a refused answer, an error completion, a disconnect event), unanswered requests,
 *           fds and RSS before/after; any reset or unanswered request fails.
 *
 * Every phase checks: every request completes once with STATUS_SUCCESS, every callback at most
 * once, every byte of every message, and afterwards the fd count back to the baseline (a leak
 * fails); RSS before/after is printed. Defaults are small (the ctest 'scale' cases); --full
 * runs 10,000 cycles, 10,000 connections, 1,000 QPs on one CQ and 10,000 answered connections.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ndk/ndkpi.h>
#include <ndk/softndk.h>

#define MSG_LEN 64u
#define PD_MAGIC 0x43484e52u /* "CHNR": private data of every connect */

static unsigned g_timeout_ms = 60000;
static const char *g_addr = "127.0.0.1";
static atomic_int g_failed;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "churn: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#define EXPECT(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond))                                                                           \
            die(__VA_ARGS__);                                                                  \
    } while (0)

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static unsigned count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---------------------------------------------------------------- events */

/* One waitable counter: callbacks increment, the main thread waits for a value. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static void kick(void)
{
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* Wait until pred(arg) holds; fail after the timeout with what. */
static void wait_until(bool (*pred)(void *), void *arg, const char *what)
{
    uint64_t end = now_us() + (uint64_t)g_timeout_ms * 1000u;
    pthread_mutex_lock(&g_mu);
    while (!pred(arg)) {
        if (now_us() > end) {
            pthread_mutex_unlock(&g_mu);
            die("timeout (%u ms) waiting for %s", g_timeout_ms, what);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    }
    pthread_mutex_unlock(&g_mu);
}

/* A request's completion: status and how many times it was called. */
struct req {
    atomic_uint calls;
    _Atomic NTSTATUS status;
};

static VOID req_done(PVOID ctx, NTSTATUS st)
{
    struct req *r = ctx;
    atomic_store(&r->status, st);
    if (atomic_fetch_add(&r->calls, 1) != 0)
        atomic_store(&g_failed, 1); /* a second call: checked by the main thread */
    kick();
}

static void req_reset(struct req *r)
{
    atomic_store(&r->calls, 0);
    atomic_store(&r->status, STATUS_PENDING);
}

/* The result of a call that returned st: pending -> its completion, else st itself. */
static bool req_pending_done(void *arg)
{
    return atomic_load(&((struct req *)arg)->calls) > 0;
}

static NTSTATUS req_result(struct req *r, NTSTATUS st, const char *what)
{
    if (st != STATUS_PENDING)
        return st;
    wait_until(req_pending_done, r, what);
    return atomic_load(&r->status);
}

static VOID close_done(PVOID ctx)
{
    atomic_fetch_add((atomic_uint *)ctx, 1);
    kick();
}

static bool counter_ge_1(void *arg)
{
    return atomic_load((atomic_uint *)arg) >= 1;
}

/* Close any object and wait for its close to finish. */
static void close_obj(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn, const char *what)
{
    atomic_uint done = 0;
    NTSTATUS st = fn(h, close_done, &done);
    EXPECT(st == STATUS_SUCCESS || st == STATUS_PENDING, "close %s: %s", what,
           SoftNdkStatusName(st));
    if (st == STATUS_PENDING)
        wait_until(counter_ge_1, &done, what);
    EXPECT(st == STATUS_PENDING || atomic_load(&done) == 0,
           "close %s returned SUCCESS and also called its completion", what);
}

/* ---------------------------------------------------------------- connections */

struct side {
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    struct req connect, complete, accept, disc;
    atomic_uint disc_events;
};

struct world;

struct conn {
    struct side cl, sv; /* cl first: sndk_container_of_conn */
    unsigned idx;
    struct world *w;
    bool got_answer;              /* answer phase: the client received the answer */
    _Atomic NTSTATUS send_status; /* answer phase: the client's first NdkSend */
};

static struct conn *sndk_container_of_conn(struct side *s)
{
    return (struct conn *)(void *)s; /* only ever called with &conn->cl */
}

struct world {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_MR *mr;
    UINT32 token;
    uint8_t *buf; /* per connection: client send, client recv, server send, server recv */
    NDK_CQ *ccq, *scq;
    ULONG cq_depth;
    NDK_LISTENER *listener;
    struct sockaddr_storage laddr;
    ULONG laddr_len;
    /* incoming connectors from the connect event */
    pthread_mutex_t inq_mu;
    NDK_CONNECTOR **inq;
    unsigned inq_n, inq_cap;
    atomic_uint connect_events;
    struct conn *conns;
    unsigned n;
};

static VOID on_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    struct world *w = ctx;
    pthread_mutex_lock(&w->inq_mu);
    if (w->inq_n < w->inq_cap)
        w->inq[w->inq_n++] = c;
    else
        atomic_store(&g_failed, 2);
    pthread_mutex_unlock(&w->inq_mu);
    atomic_fetch_add(&w->connect_events, 1);
    kick();
}

static VOID on_disconnect(PVOID ctx)
{
    struct side *s = ctx;
    atomic_fetch_add(&s->disc_events, 1);
    kick();
}

static VOID on_cq(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static VOID create_never(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *h)
{
    (void)ctx, (void)st, (void)h;
    atomic_store(&g_failed, 3);
}

static VOID request_never(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static uint8_t *slot(struct world *w, unsigned i, unsigned which)
{
    return w->buf + ((size_t)i * 4u + which) * MSG_LEN;
}

static void fill(uint8_t *p, unsigned i, unsigned k, unsigned dir)
{
    uint32_t x = (i * 2654435761u) ^ (k * 40503u) ^ (dir << 30) ^ 0x9e3779b9u;
    for (unsigned b = 0; b < MSG_LEN; b++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[b] = (uint8_t)x;
    }
}

static void addr_of(const char *ip, uint16_t port, struct sockaddr_storage *ss, ULONG *len)
{
    memset(ss, 0, sizeof *ss);
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        EXPECT(inet_pton(AF_INET6, ip, &a->sin6_addr) == 1, "bad address %s", ip);
        *len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        EXPECT(inet_pton(AF_INET, ip, &a->sin_addr) == 1, "bad address %s", ip);
        *len = sizeof *a;
    }
}

/* World: adapter, PD, one MR over every message slot, listener. CQs are per phase. */
static void world_open(struct world *w, unsigned n)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    pthread_mutex_init(&w->inq_mu, NULL);
    w->inq_cap = n + 16;
    w->inq = calloc(w->inq_cap, sizeof *w->inq);
    w->conns = calloc(n, sizeof *w->conns);
    size_t blen = (size_t)n * 4u * MSG_LEN;
    w->buf = aligned_alloc(4096, (blen + 4095) & ~(size_t)4095);
    EXPECT(w->inq && w->conns && w->buf, "out of memory");
    memset(w->buf, 0, blen);
    NDK_VERSION v = {2, 0};
    NTSTATUS st = SoftNdkOpenAdapter(0, v, NULL, &w->a);
    EXPECT(st == STATUS_SUCCESS, "SoftNdkOpenAdapter: %s", SoftNdkStatusName(st));
    EXPECT(w->a->Dispatch->NdkCreatePd(w->a, create_never, NULL, &w->pd) == STATUS_SUCCESS,
           "NdkCreatePd");
    EXPECT(w->pd->Dispatch->NdkCreateMr(w->pd, FALSE, create_never, NULL, &w->mr) ==
               STATUS_SUCCESS,
           "NdkCreateMr");
    MDL mdl;
    MmInitializeMdl(&mdl, w->buf, blen);
    struct req r;
    req_reset(&r);
    st = w->mr->Dispatch->NdkRegisterMr(w->mr, &mdl, blen, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                         req_done, &r);
    st = req_result(&r, st, "NdkRegisterMr");
    EXPECT(st == STATUS_SUCCESS, "NdkRegisterMr: %s", SoftNdkStatusName(st));
    w->token = w->mr->Dispatch->NdkGetLocalTokenFromMr(w->mr);
    /* two CQs (client side, server side): every QP of a phase shares them */
    w->cq_depth = n * 8u + 64u;
    EXPECT(w->a->Dispatch->NdkCreateCq(w->a, w->cq_depth, on_cq, w, NULL, create_never, NULL,
                                       &w->ccq) == STATUS_SUCCESS,
           "NdkCreateCq");
    EXPECT(w->a->Dispatch->NdkCreateCq(w->a, w->cq_depth, on_cq, w, NULL, create_never, NULL,
                                       &w->scq) == STATUS_SUCCESS,
           "NdkCreateCq");
    EXPECT(w->a->Dispatch->NdkCreateListener(w->a, on_connect_event, w, create_never, NULL,
                                             &w->listener) == STATUS_SUCCESS,
           "NdkCreateListener");
    struct sockaddr_storage ss;
    ULONG len;
    addr_of(g_addr, 0, &ss, &len);
    req_reset(&r);
    st = w->listener->Dispatch->NdkListen(w->listener, (struct sockaddr *)&ss, len, request_never,
                                          NULL);
    EXPECT(st == STATUS_SUCCESS, "NdkListen %s: %s", g_addr, SoftNdkStatusName(st));
    w->laddr_len = sizeof w->laddr;
    st = w->listener->Dispatch->NdkGetLocalAddress(w->listener, (struct sockaddr *)&w->laddr,
                                                   &w->laddr_len);
    EXPECT(st == STATUS_SUCCESS, "NdkGetLocalAddress: %s", SoftNdkStatusName(st));
}

static void world_close(struct world *w)
{
    close_obj(&w->listener->Header, w->listener->Dispatch->NdkCloseListener, "listener");
    close_obj(&w->ccq->Header, w->ccq->Dispatch->NdkCloseCq, "CQ");
    close_obj(&w->scq->Header, w->scq->Dispatch->NdkCloseCq, "CQ");
    close_obj(&w->mr->Header, w->mr->Dispatch->NdkCloseMr, "MR");
    close_obj(&w->pd->Header, w->pd->Dispatch->NdkClosePd, "PD");
    SoftNdkCloseAdapter(w->a);
    free(w->inq);
    free(w->conns);
    free(w->buf);
    pthread_mutex_destroy(&w->inq_mu);
}

static void side_reset(struct side *s)
{
    memset(s, 0, sizeof *s);
    req_reset(&s->connect);
    req_reset(&s->complete);
    req_reset(&s->accept);
    req_reset(&s->disc);
}

static NDK_QP *make_qp(struct world *w, NDK_CQ *cq, void *ctx, ULONG depth)
{
    NDK_QP *qp = NULL;
    NTSTATUS st = w->pd->Dispatch->NdkCreateQp(w->pd, cq, cq, ctx, depth, depth, 1, 1, 0,
                                               create_never, NULL, &qp);
    EXPECT(st == STATUS_SUCCESS, "NdkCreateQp: %s", SoftNdkStatusName(st));
    return qp;
}

/* predicates over a range of connections */
struct range {
    struct world *w;
    unsigned lo, hi;
};

static bool all_connected_or_failed(void *arg)
{
    struct range *r = arg;
    for (unsigned i = r->lo; i < r->hi; i++)
        if (atomic_load(&r->w->conns[i].cl.connect.calls) == 0)
            return false;
    return true;
}

static bool incoming_ready(void *arg)
{
    struct world *w = arg;
    pthread_mutex_lock(&w->inq_mu);
    bool any = w->inq_n > 0;
    pthread_mutex_unlock(&w->inq_mu);
    return any;
}

static bool all_established(void *arg)
{
    struct range *r = arg;
    for (unsigned i = r->lo; i < r->hi; i++) {
        struct conn *c = &r->w->conns[i];
        if (!atomic_load(&c->cl.complete.calls) || !atomic_load(&c->sv.accept.calls))
            return false;
    }
    return true;
}

static bool all_disconnected(void *arg)
{
    struct range *r = arg;
    for (unsigned i = r->lo; i < r->hi; i++) {
        struct conn *c = &r->w->conns[i];
        if (!atomic_load(&c->cl.disc.calls) || !atomic_load(&c->sv.disc.calls))
            return false;
    }
    return true;
}

static bool all_disc_events(void *arg)
{
    struct range *r = arg;
    for (unsigned i = r->lo; i < r->hi; i++)
        if (!atomic_load(&r->w->conns[i].sv.disc_events))
            return false;
    return true;
}

/* Establish connections [lo, hi): connect all, accept as they come, complete. */
static void establish(struct world *w, unsigned lo, unsigned hi, ULONG depth)
{
    for (unsigned i = lo; i < hi; i++) {
        struct conn *c = &w->conns[i];
        side_reset(&c->cl);
        side_reset(&c->sv);
        c->idx = i;
        c->cl.qp = make_qp(w, w->ccq, &c->cl, depth);
        c->sv.qp = make_qp(w, w->scq, &c->sv, depth);
        NTSTATUS st = w->a->Dispatch->NdkCreateConnector(w->a, create_never, NULL, &c->cl.conn);
        EXPECT(st == STATUS_SUCCESS, "NdkCreateConnector: %s", SoftNdkStatusName(st));
        struct sockaddr_storage src;
        ULONG slen;
        addr_of(g_addr, 0, &src, &slen);
        uint32_t pd[2] = {PD_MAGIC, i};
        st = c->cl.conn->Dispatch->NdkConnect(c->cl.conn, c->cl.qp, (struct sockaddr *)&src, slen,
                                              (struct sockaddr *)&w->laddr, w->laddr_len, 0, 0,
                                              pd, sizeof pd, req_done, &c->cl.connect);
        EXPECT(st == STATUS_PENDING, "NdkConnect #%u: %s", i, SoftNdkStatusName(st));
    }
    /* accept every incoming request of this batch */
    unsigned accepted = 0;
    while (accepted < hi - lo) {
        wait_until(incoming_ready, w, "a connect event");
        pthread_mutex_lock(&w->inq_mu);
        NDK_CONNECTOR *in = w->inq[--w->inq_n];
        pthread_mutex_unlock(&w->inq_mu);
        uint32_t pd[2] = {0, 0};
        ULONG pdlen = sizeof pd;
        NTSTATUS st = in->Dispatch->NdkGetConnectionData(in, NULL, NULL, pd, &pdlen);
        EXPECT(st == STATUS_SUCCESS && pdlen == sizeof pd && pd[0] == PD_MAGIC && pd[1] >= lo &&
                   pd[1] < hi,
               "incoming private data: %s, %u bytes", SoftNdkStatusName(st), (unsigned)pdlen);
        struct conn *c = &w->conns[pd[1]];
        EXPECT(c->sv.conn == NULL, "connection #%u announced twice", pd[1]);
        c->sv.conn = in;
        st = in->Dispatch->NdkAccept(in, c->sv.qp, 0, 0, NULL, 0, on_disconnect, &c->sv, req_done,
                                     &c->sv.accept);
        EXPECT(st == STATUS_PENDING || st == STATUS_SUCCESS, "NdkAccept #%u: %s", pd[1],
               SoftNdkStatusName(st));
        if (st == STATUS_SUCCESS)
            req_done(&c->sv.accept, st);
        accepted++;
    }
    struct range r = {w, lo, hi};
    wait_until(all_connected_or_failed, &r, "every NdkConnect completion");
    for (unsigned i = lo; i < hi; i++) {
        struct conn *c = &w->conns[i];
        NTSTATUS st = atomic_load(&c->cl.connect.status);
        EXPECT(st == STATUS_SUCCESS, "NdkConnect #%u completed %s", i, SoftNdkStatusName(st));
        st = c->cl.conn->Dispatch->NdkCompleteConnect(c->cl.conn, on_disconnect, &c->cl, req_done,
                                                      &c->cl.complete);
        EXPECT(st == STATUS_PENDING || st == STATUS_SUCCESS, "NdkCompleteConnect #%u: %s", i,
               SoftNdkStatusName(st));
        if (st == STATUS_SUCCESS)
            req_done(&c->cl.complete, st);
    }
    wait_until(all_established, &r, "every accept and complete-connect");
    for (unsigned i = lo; i < hi; i++) {
        struct conn *c = &w->conns[i];
        EXPECT(atomic_load(&c->cl.complete.status) == STATUS_SUCCESS,
               "NdkCompleteConnect #%u: %s", i,
               SoftNdkStatusName(atomic_load(&c->cl.complete.status)));
        EXPECT(atomic_load(&c->sv.accept.status) == STATUS_SUCCESS, "NdkAccept #%u: %s", i,
               SoftNdkStatusName(atomic_load(&c->sv.accept.status)));
    }
}

/* Collect exactly `want` results from cq; check each (success, the right bytes). */
static void drain(struct world *w, NDK_CQ *cq, unsigned want, unsigned k, const char *what)
{
    NDK_RESULT_EX res[64];
    unsigned got = 0;
    uint64_t end = now_us() + (uint64_t)g_timeout_ms * 1000u;
    while (got < want) {
        ULONG m = cq->Dispatch->NdkGetCqResultsEx(cq, res, want - got < 64 ? want - got : 64);
        for (ULONG j = 0; j < m; j++) {
            NDK_RESULT_EX *x = &res[j];
            EXPECT(x->Status == STATUS_SUCCESS, "%s: completion %s (type %d)", what,
                   SoftNdkStatusName(x->Status), (int)x->Type);
            EXPECT(x->BytesTransferred == MSG_LEN, "%s: %u bytes", what, x->BytesTransferred);
            if (x->Type == NdkOperationTypeReceive) {
                struct side *s = x->QPContext;
                unsigned idx = (unsigned)(uintptr_t)x->RequestContext;
                EXPECT(idx < w->n, "%s: bad request context", what);
                bool at_server = s == &w->conns[idx].sv;
                EXPECT(at_server || s == &w->conns[idx].cl, "%s: QPContext does not match", what);
                uint8_t expect[MSG_LEN];
                fill(expect, idx, k, at_server ? 0 : 1);
                EXPECT(memcmp(slot(w, idx, at_server ? 3 : 1), expect, MSG_LEN) == 0,
                       "%s: connection #%u message %u: wrong bytes", what, idx, k);
            } else {
                EXPECT(x->Type == NdkOperationTypeSend, "%s: type %d", what, (int)x->Type);
            }
        }
        got += m;
        if (m == 0 && now_us() > end)
            die("%s: %u of %u completions after %u ms", what, got, want, g_timeout_ms);
    }
}

/* Message k on each connection [lo, hi): client -> server, then server -> client if both. */
static void traffic(struct world *w, unsigned lo, unsigned hi, unsigned k, bool both)
{
    for (unsigned dir = 0; dir < (both ? 2u : 1u); dir++) {
        for (unsigned i = lo; i < hi; i++) {
            struct conn *c = &w->conns[i];
            struct side *rx = dir == 0 ? &c->sv : &c->cl;
            uint8_t *rbuf = slot(w, i, dir == 0 ? 3 : 1);
            memset(rbuf, 0, MSG_LEN);
            NDK_SGE g = {.VirtualAddress = rbuf, .Length = MSG_LEN, .MemoryRegionToken = w->token};
            NTSTATUS st = rx->qp->Dispatch->NdkReceive(rx->qp, (void *)(uintptr_t)i, &g, 1);
            EXPECT(st == STATUS_SUCCESS, "NdkReceive #%u: %s", i, SoftNdkStatusName(st));
        }
        for (unsigned i = lo; i < hi; i++) {
            struct conn *c = &w->conns[i];
            struct side *tx = dir == 0 ? &c->cl : &c->sv;
            uint8_t *sbuf = slot(w, i, dir == 0 ? 0 : 2);
            fill(sbuf, i, k, dir);
            NDK_SGE g = {.VirtualAddress = sbuf, .Length = MSG_LEN, .MemoryRegionToken = w->token};
            NTSTATUS st = tx->qp->Dispatch->NdkSend(tx->qp, (void *)(uintptr_t)i, &g, 1, 0);
            EXPECT(st == STATUS_SUCCESS, "NdkSend #%u: %s", i, SoftNdkStatusName(st));
        }
        NDK_CQ *scq = dir == 0 ? w->ccq : w->scq, *rcq = dir == 0 ? w->scq : w->ccq;
        /* the receiving CQ first: polling it drives receive progress */
        drain(w, rcq, hi - lo, k, "receive");
        drain(w, scq, hi - lo, k, "send");
    }
}

/* Disconnect [lo, hi) from the client side, then the server side after its event; close. */
static void teardown(struct world *w, unsigned lo, unsigned hi)
{
    for (unsigned i = lo; i < hi; i++) {
        struct conn *c = &w->conns[i];
        NTSTATUS st = c->cl.conn->Dispatch->NdkDisconnect(c->cl.conn, req_done, &c->cl.disc);
        EXPECT(st == STATUS_PENDING || st == STATUS_SUCCESS, "NdkDisconnect #%u: %s", i,
               SoftNdkStatusName(st));
        if (st == STATUS_SUCCESS)
            req_done(&c->cl.disc, st);
    }
    struct range r = {w, lo, hi};
    wait_until(all_disc_events, &r, "every server-side disconnect event");
    for (unsigned i = lo; i < hi; i++) {
        struct conn *c = &w->conns[i];
        NTSTATUS st = c->sv.conn->Dispatch->NdkDisconnect(c->sv.conn, req_done, &c->sv.disc);
        EXPECT(st == STATUS_PENDING || st == STATUS_SUCCESS, "server NdkDisconnect #%u: %s", i,
               SoftNdkStatusName(st));
        if (st == STATUS_SUCCESS)
            req_done(&c->sv.disc, st);
    }
    wait_until(all_disconnected, &r, "every NdkDisconnect completion");
    for (unsigned i = lo; i < hi; i++) {
        struct conn *c = &w->conns[i];
        EXPECT(atomic_load(&c->cl.disc.status) == STATUS_SUCCESS, "NdkDisconnect #%u: %s", i,
               SoftNdkStatusName(atomic_load(&c->cl.disc.status)));
        EXPECT(atomic_load(&c->sv.disc.status) == STATUS_SUCCESS, "server NdkDisconnect #%u: %s",
               i, SoftNdkStatusName(atomic_load(&c->sv.disc.status)));
        EXPECT(atomic_load(&c->sv.disc_events) == 1, "#%u: %u server disconnect events", i,
               atomic_load(&c->sv.disc_events));
        EXPECT(atomic_load(&c->cl.disc_events) == 0,
               "#%u: a disconnect event after the local NdkDisconnect", i);
        close_obj(&c->cl.conn->Header, c->cl.conn->Dispatch->NdkCloseConnector, "connector");
        close_obj(&c->sv.conn->Header, c->sv.conn->Dispatch->NdkCloseConnector, "connector");
        close_obj(&c->cl.qp->Header, c->cl.qp->Dispatch->NdkCloseQp, "QP");
        close_obj(&c->sv.qp->Header, c->sv.qp->Dispatch->NdkCloseQp, "QP");
        /* every request completed exactly once */
        EXPECT(atomic_load(&c->cl.connect.calls) == 1 && atomic_load(&c->cl.complete.calls) == 1 &&
                   atomic_load(&c->sv.accept.calls) == 1 && atomic_load(&c->cl.disc.calls) == 1 &&
                   atomic_load(&c->sv.disc.calls) == 1,
               "#%u: a completion called more than once", i);
    }
    EXPECT(!atomic_load(&g_failed), "a callback was called twice or out of place (code %d)",
           atomic_load(&g_failed));
}

/* ---------------------------------------------------------------- phases */

static unsigned fd_baseline;
static long rss_baseline;

static bool fds_back(void *arg)
{
    return count_fds() <= *(unsigned *)arg;
}

/* After a phase: fds back to the baseline (sockets close asynchronously: bounded wait). */
static void check_fds(const char *phase)
{
    unsigned base = fd_baseline;
    uint64_t end = now_us() + 5000000u;
    while (!fds_back(&base) && now_us() < end)
        usleep(10000);
    unsigned now = count_fds();
    long rss = rss_kib();
    printf("%-7s fds %u (baseline %u), RSS %ld KiB (baseline %ld KiB, %+ld KiB)\n", phase, now,
           base, rss, rss_baseline, rss - rss_baseline);
    EXPECT(now <= base, "%s: %u file descriptors leaked", phase, now - base);
}

static void phase_cycles(unsigned n)
{
    struct world w;
    world_open(&w, 1);
    uint64_t t0 = now_us();
    for (unsigned i = 0; i < n; i++) {
        establish(&w, 0, 1, 4);
        traffic(&w, 0, 1, i, false);
        teardown(&w, 0, 1);
    }
    double s = (double)(now_us() - t0) / 1e6;
    printf("cycles  %u connect/accept/message/disconnect/close cycles in %.2f s: %.0f cycles/s\n",
           n, s, n / s);
    world_close(&w);
    check_fds("cycles");
}

/* How many connections the fd limit allows (2 sockets each, both ends in this process). */
static unsigned fit_fd_limit(unsigned want)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t need = (rlim_t)want * 2u + 256u;
    if (rl.rlim_cur < need) {
        struct rlimit up = {need, rl.rlim_max > need ? rl.rlim_max : need};
        if (setrlimit(RLIMIT_NOFILE, &up) != 0) { /* not allowed above the hard limit */
            up.rlim_cur = rl.rlim_max;
            up.rlim_max = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &up);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    unsigned fit = rl.rlim_cur > 256u + count_fds() ? (unsigned)((rl.rlim_cur - 256u - count_fds()) / 2u) : 0;
    if (fit < want) {
        printf("conns   RLIMIT_NOFILE %llu (hard %llu) allows %u of the %u connections asked\n",
               (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, fit, want);
        return fit;
    }
    return want;
}

static void phase_concurrent(const char *name, unsigned want, unsigned msgs)
{
    unsigned n = fit_fd_limit(want);
    EXPECT(n > 0, "no file descriptors for any connection");
    struct world w;
    world_open(&w, n);
    long rss0 = rss_kib();
    unsigned fds0 = count_fds();
    uint64_t t0 = now_us();
    const unsigned batch = 250;
    for (unsigned lo = 0; lo < n; lo += batch)
        establish(&w, lo, lo + batch < n ? lo + batch : n, msgs > 1 ? 4 : 2);
    double s = (double)(now_us() - t0) / 1e6;
    long rss1 = rss_kib();
    unsigned fds1 = count_fds();
    printf("%-7s %u connections open at once (established in %.2f s, %.0f/s), %u fds\n", name, n,
           s, n / s, fds1 - fds0);
    printf("%-7s RSS +%ld KiB for %u idle connections: %.1f KiB per connection (both ends), "
           "%.1f KiB per endpoint (design: <= 64 KiB)\n",
           name, rss1 - rss0, n, (double)(rss1 - rss0) / n, (double)(rss1 - rss0) / (2.0 * n));
    t0 = now_us();
    for (unsigned k = 0; k < msgs; k++)
        for (unsigned lo = 0; lo < n; lo += batch)
            traffic(&w, lo, lo + batch < n ? lo + batch : n, k, msgs > 1);
    s = (double)(now_us() - t0) / 1e6;
    printf("%-7s %u checked message(s)%s on each of %u connections in %.2f s\n", name, msgs,
           msgs > 1 ? " each way" : "", n, s);
    for (unsigned lo = 0; lo < n; lo += batch)
        teardown(&w, lo, lo + batch < n ? lo + batch : n);
    world_close(&w);
    check_fds(name);
}

/* ---------------------------------------------------------------- answer */

/* The server a user writes first: one CQ for every accepted QP, polled by one thread that
 * answers each connection's first message the moment it arrives (possibly before that
 * connection's NdkAccept completion is delivered). Beside it, a churn thread connects to the
 * same listener and closes at once. Counts what a user would call a reset. */
#define CHURN_MAGIC 0x43485552u /* "CHUR": private data of a churn connect */

struct answer {
    struct world *w;
    atomic_bool stop;
    atomic_uint answered; /* server: answers posted successfully */
    atomic_uint received; /* client: answers received */
    atomic_uint resets;   /* a refused answer, an error completion, a disconnect event */
    _Atomic NTSTATUS first_reset;
    atomic_uint churned; /* churn connects closed */
};

static void reset_seen(struct answer *an, NTSTATUS st, unsigned idx, const char *what)
{
    if (atomic_fetch_add(&an->resets, 1) < 5)
        fprintf(stderr, "answer  #%u: %s: %s\n", idx, what, SoftNdkStatusName(st));
    NTSTATUS none = STATUS_SUCCESS;
    atomic_compare_exchange_strong(&an->first_reset, &none, st);
}

static void *answer_server(void *arg)
{
    struct answer *an = arg;
    struct world *w = an->w;
    NDK_RESULT_EX res[64];
    while (!atomic_load(&an->stop)) {
        ULONG m = w->scq->Dispatch->NdkGetCqResultsEx(w->scq, res, 64);
        for (ULONG j = 0; j < m; j++) {
            NDK_RESULT_EX *x = &res[j];
            unsigned idx = (unsigned)(uintptr_t)x->RequestContext;
            if (x->Status != STATUS_SUCCESS) {
                reset_seen(an, x->Status, idx,
                           x->Type == NdkOperationTypeReceive ? "server receive completion"
                                                              : "server send completion");
                continue;
            }
            if (x->Type != NdkOperationTypeReceive)
                continue;
            struct conn *c = &w->conns[idx];
            uint8_t expect[MSG_LEN];
            fill(expect, idx, 0, 0);
            if (memcmp(slot(w, idx, 3), expect, MSG_LEN) != 0)
                atomic_store(&g_failed, 4);
            fill(slot(w, idx, 2), idx, 0, 1);
            NDK_SGE g = {.VirtualAddress = slot(w, idx, 2),
                         .Length = MSG_LEN,
                         .MemoryRegionToken = w->token};
            NTSTATUS st = c->sv.qp->Dispatch->NdkSend(c->sv.qp, (void *)(uintptr_t)idx, &g, 1, 0);
            if (st == STATUS_SUCCESS)
                atomic_fetch_add(&an->answered, 1);
            else
                reset_seen(an, st, idx, "the answer's NdkSend");
        }
    }
    return NULL;
}

/* Connect to the listener and close at once, again and again, while the others run. */
static void *answer_churn(void *arg)
{
    struct answer *an = arg;
    struct world *w = an->w;
    while (!atomic_load(&an->stop)) {
        NDK_QP *qp = make_qp(w, w->ccq, NULL, 2);
        NDK_CONNECTOR *cn = NULL;
        NTSTATUS st = w->a->Dispatch->NdkCreateConnector(w->a, create_never, NULL, &cn);
        EXPECT(st == STATUS_SUCCESS, "NdkCreateConnector: %s", SoftNdkStatusName(st));
        struct sockaddr_storage src;
        ULONG slen;
        addr_of(g_addr, 0, &src, &slen);
        uint32_t pd[2] = {CHURN_MAGIC, 0};
        static struct req ignored; /* the connect completes (cancelled) or not: not judged */
        st = cn->Dispatch->NdkConnect(cn, qp, (struct sockaddr *)&src, slen,
                                      (struct sockaddr *)&w->laddr, w->laddr_len, 0, 0, pd,
                                      sizeof pd, request_never, &ignored);
        EXPECT(st == STATUS_PENDING, "churn NdkConnect: %s", SoftNdkStatusName(st));
        usleep(200 + (unsigned)(rand() % 800));
        close_obj(&cn->Header, cn->Dispatch->NdkCloseConnector, "churn connector");
        close_obj(&qp->Header, qp->Dispatch->NdkCloseQp, "churn QP");
        atomic_fetch_add(&an->churned, 1);
    }
    return NULL;
}

/* NdkCompleteConnect's completion: the client's first message goes out from here, so it can
 * reach the server before the server's NdkAccept completes. */
static VOID complete_then_send(PVOID ctx, NTSTATUS st)
{
    struct side *s = ctx;
    struct conn *c = sndk_container_of_conn(s);
    if (st == STATUS_SUCCESS) {
        struct world *w = c->w;
        fill(slot(w, c->idx, 0), c->idx, 0, 0);
        NDK_SGE g = {
            .VirtualAddress = slot(w, c->idx, 0), .Length = MSG_LEN, .MemoryRegionToken = w->token};
        NTSTATUS sst = s->qp->Dispatch->NdkSend(s->qp, (void *)(uintptr_t)c->idx, &g, 1, 0);
        if (sst != STATUS_SUCCESS)
            atomic_store(&c->send_status, sst);
    }
    req_done(&s->complete, st);
}

/* Take the connect events that came: churn ones are rejected and closed, real ones accepted
 * (a receive is posted on the QP first). Returns how many real ones were accepted. */
static unsigned answer_accept_some(struct answer *an)
{
    struct world *w = an->w;
    unsigned accepted = 0;
    for (;;) {
        pthread_mutex_lock(&w->inq_mu);
        NDK_CONNECTOR *in = w->inq_n ? w->inq[--w->inq_n] : NULL;
        pthread_mutex_unlock(&w->inq_mu);
        if (!in)
            return accepted;
        uint32_t pd[2] = {0, 0};
        ULONG pdlen = sizeof pd;
        NTSTATUS st = in->Dispatch->NdkGetConnectionData(in, NULL, NULL, pd, &pdlen);
        if (st != STATUS_SUCCESS || pd[0] != PD_MAGIC) {
            /* a churn connect (or one already gone): refuse it; its status is not judged */
            in->Dispatch->NdkReject(in, NULL, 0);
            close_obj(&in->Header, in->Dispatch->NdkCloseConnector, "churn connector");
            continue;
        }
        EXPECT(pd[1] < w->n, "incoming private data: connection #%u", pd[1]);
        struct conn *c = &w->conns[pd[1]];
        EXPECT(c->sv.conn == NULL, "connection #%u announced twice", pd[1]);
        c->sv.conn = in;
        NDK_SGE g = {
            .VirtualAddress = slot(w, pd[1], 3), .Length = MSG_LEN, .MemoryRegionToken = w->token};
        st = c->sv.qp->Dispatch->NdkReceive(c->sv.qp, (void *)(uintptr_t)pd[1], &g, 1);
        EXPECT(st == STATUS_SUCCESS, "server NdkReceive #%u: %s", pd[1], SoftNdkStatusName(st));
        st = in->Dispatch->NdkAccept(in, c->sv.qp, 0, 0, NULL, 0, on_disconnect, &c->sv, req_done,
                                     &c->sv.accept);
        EXPECT(st == STATUS_PENDING || st == STATUS_SUCCESS, "NdkAccept #%u: %s", pd[1],
               SoftNdkStatusName(st));
        if (st == STATUS_SUCCESS)
            req_done(&c->sv.accept, st);
        accepted++;
    }
}

static bool answer_batch_done(void *arg)
{
    struct range *r = arg;
    for (unsigned i = r->lo; i < r->hi; i++) {
        struct conn *c = &r->w->conns[i];
        if (!c->got_answer || !atomic_load(&c->sv.accept.calls))
            return false;
    }
    return true;
}

/* Poll the client CQ: answers received, send completions checked. */
static void answer_poll_clients(struct answer *an)
{
    struct world *w = an->w;
    NDK_RESULT_EX res[64];
    ULONG m;
    while ((m = w->ccq->Dispatch->NdkGetCqResultsEx(w->ccq, res, 64)) > 0) {
        for (ULONG j = 0; j < m; j++) {
            NDK_RESULT_EX *x = &res[j];
            unsigned idx = (unsigned)(uintptr_t)x->RequestContext;
            if (!x->QPContext)
                continue; /* a churn QP's flushed receive */
            if (x->Status != STATUS_SUCCESS) {
                reset_seen(an, x->Status, idx, "client completion");
                continue;
            }
            if (x->Type != NdkOperationTypeReceive)
                continue;
            uint8_t expect[MSG_LEN];
            fill(expect, idx, 0, 1);
            if (memcmp(slot(w, idx, 1), expect, MSG_LEN) != 0)
                atomic_store(&g_failed, 5);
            w->conns[idx].got_answer = true;
            atomic_fetch_add(&an->received, 1);
        }
    }
}

static void phase_answer(unsigned want)
{
    unsigned n = fit_fd_limit(want + 64); /* room for the churn thread's connections */
    n = n > 64 ? n - 64 : n;
    EXPECT(n > 0, "no file descriptors for any connection");
    struct world w;
    world_open(&w, n);
    w.inq_cap = n + 4096; /* churn connects arrive beside the real ones */
    free(w.inq);
    w.inq = calloc(w.inq_cap, sizeof *w.inq);
    EXPECT(w.inq, "out of memory");
    struct answer an = {.w = &w};
    unsigned fds0 = count_fds();
    long rss0 = rss_kib();
    pthread_t srv, churn;
    EXPECT(pthread_create(&srv, NULL, answer_server, &an) == 0, "pthread_create");
    EXPECT(pthread_create(&churn, NULL, answer_churn, &an) == 0, "pthread_create");
    uint64_t t0 = now_us();
    const unsigned batch = 250;
    unsigned unanswered = 0;
    for (unsigned lo = 0; lo < n; lo += batch) {
        unsigned hi = lo + batch < n ? lo + batch : n;
        for (unsigned i = lo; i < hi; i++) {
            struct conn *c = &w.conns[i];
            side_reset(&c->cl);
            side_reset(&c->sv);
            c->idx = i;
            c->w = &w;
            c->got_answer = false;
            atomic_store(&c->send_status, STATUS_SUCCESS);
            c->cl.qp = make_qp(&w, w.ccq, &c->cl, 2);
            c->sv.qp = make_qp(&w, w.scq, &c->sv, 2);
            NDK_SGE g = {
                .VirtualAddress = slot(&w, i, 1), .Length = MSG_LEN, .MemoryRegionToken = w.token};
            NTSTATUS st = c->cl.qp->Dispatch->NdkReceive(c->cl.qp, (void *)(uintptr_t)i, &g, 1);
            EXPECT(st == STATUS_SUCCESS, "client NdkReceive #%u: %s", i, SoftNdkStatusName(st));
            st = w.a->Dispatch->NdkCreateConnector(w.a, create_never, NULL, &c->cl.conn);
            EXPECT(st == STATUS_SUCCESS, "NdkCreateConnector: %s", SoftNdkStatusName(st));
            struct sockaddr_storage src;
            ULONG slen;
            addr_of(g_addr, 0, &src, &slen);
            uint32_t pd[2] = {PD_MAGIC, i};
            st = c->cl.conn->Dispatch->NdkConnect(c->cl.conn, c->cl.qp, (struct sockaddr *)&src,
                                                  slen, (struct sockaddr *)&w.laddr, w.laddr_len, 0,
                                                  0, pd, sizeof pd, req_done, &c->cl.connect);
            EXPECT(st == STATUS_PENDING, "NdkConnect #%u: %s", i, SoftNdkStatusName(st));
        }
        /* accept as the events come; complete each connect as it completes */
        unsigned accepted = 0;
        bool *completed = calloc(hi - lo, sizeof *completed);
        EXPECT(completed, "out of memory");
        uint64_t end = now_us() + (uint64_t)g_timeout_ms * 1000u;
        struct range r = {&w, lo, hi};
        while (!answer_batch_done(&r) && now_us() < end) {
            accepted += answer_accept_some(&an);
            for (unsigned i = lo; i < hi; i++) {
                struct conn *c = &w.conns[i];
                if (completed[i - lo] || !atomic_load(&c->cl.connect.calls))
                    continue;
                completed[i - lo] = true;
                NTSTATUS st = atomic_load(&c->cl.connect.status);
                if (st != STATUS_SUCCESS) {
                    reset_seen(&an, st, i, "NdkConnect completion");
                    continue;
                }
                st = c->cl.conn->Dispatch->NdkCompleteConnect(c->cl.conn, on_disconnect, &c->cl,
                                                              complete_then_send, &c->cl);
                if (st != STATUS_PENDING)
                    complete_then_send(&c->cl, st);
            }
            answer_poll_clients(&an);
            usleep(200);
        }
        free(completed);
        (void)accepted;
        for (unsigned i = lo; i < hi; i++) {
            struct conn *c = &w.conns[i];
            NTSTATUS st = atomic_load(&c->send_status);
            if (st != STATUS_SUCCESS)
                reset_seen(&an, st, i, "the client's NdkSend");
            if (atomic_load(&c->sv.accept.calls) &&
                atomic_load(&c->sv.accept.status) != STATUS_SUCCESS)
                reset_seen(&an, atomic_load(&c->sv.accept.status), i, "NdkAccept completion");
            if (atomic_load(&c->cl.disc_events) || atomic_load(&c->sv.disc_events))
                reset_seen(&an, STATUS_CONNECTION_RESET, i, "disconnect event");
            if (!c->got_answer)
                unanswered++;
        }
        /* close the batch: every connector, then every QP */
        for (unsigned i = lo; i < hi; i++) {
            struct conn *c = &w.conns[i];
            close_obj(&c->cl.conn->Header, c->cl.conn->Dispatch->NdkCloseConnector, "connector");
            if (c->sv.conn)
                close_obj(&c->sv.conn->Header, c->sv.conn->Dispatch->NdkCloseConnector,
                          "connector");
            close_obj(&c->cl.qp->Header, c->cl.qp->Dispatch->NdkCloseQp, "QP");
            close_obj(&c->sv.qp->Header, c->sv.qp->Dispatch->NdkCloseQp, "QP");
        }
        answer_poll_clients(&an); /* the closed QPs' flushed completions */
    }
    atomic_store(&an.stop, true);
    pthread_join(churn, NULL);
    pthread_join(srv, NULL);
    /* connect events of churn connections that came after the last batch */
    uint64_t quiet = now_us() + 300000u;
    while (now_us() < quiet) {
        if (answer_accept_some(&an))
            atomic_store(&g_failed, 6);
        usleep(10000);
    }
    answer_poll_clients(&an);
    {
        NDK_RESULT_EX res[64];
        while (w.scq->Dispatch->NdkGetCqResultsEx(w.scq, res, 64) > 0)
            ;
    }
    double s = (double)(now_us() - t0) / 1e6;
    unsigned fds1 = count_fds();
    long rss1 = rss_kib();
    printf("answer  %u connections, each answered from a polling consumer on its first message, "
           "%u churn connect/close beside them, in %.2f s\n",
           n, atomic_load(&an.churned), s);
    printf("answer  resets %u (first: %s), unanswered %u, answers sent %u received %u\n",
           atomic_load(&an.resets),
           atomic_load(&an.resets) ? SoftNdkStatusName(atomic_load(&an.first_reset)) : "-",
           unanswered, atomic_load(&an.answered), atomic_load(&an.received));
    printf("answer  fds %u before, %u after; RSS %ld KiB before, %ld KiB after\n", fds0, fds1, rss0,
           rss1);
    world_close(&w);
    check_fds("answer");
    EXPECT(!atomic_load(&g_failed), "wrong bytes or a misplaced event (code %d)",
           atomic_load(&g_failed));
    EXPECT(atomic_load(&an.resets) == 0 && unanswered == 0,
           "%u resets, %u unanswered of %u connections", atomic_load(&an.resets), unanswered, n);
}

static void usage(void)
{
    fprintf(stderr, "usage: churn [--only cycles|conns|qps|answer] [--cycles N] [--conns N]\n"
                    "             [--qps N] [--answer N] [--addr IP] [--timeout S] [--full]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    unsigned cycles = 500, conns = 500, qps = 200, answer = 500;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--full")) {
            cycles = 10000, conns = 10000, qps = 1000, answer = 10000;
        } else if (!strcmp(a, "--only") && v) {
            only = v, i++;
        } else if (!strcmp(a, "--cycles") && v) {
            cycles = (unsigned)strtoul(v, NULL, 0), i++;
        } else if (!strcmp(a, "--conns") && v) {
            conns = (unsigned)strtoul(v, NULL, 0), i++;
        } else if (!strcmp(a, "--answer") && v) {
            answer = (unsigned)strtoul(v, NULL, 0), i++;
        } else if (!strcmp(a, "--qps") && v) {
            qps = (unsigned)strtoul(v, NULL, 0), i++;
        } else if (!strcmp(a, "--addr") && v) {
            g_addr = v, i++;
        } else if (!strcmp(a, "--timeout") && v) {
            g_timeout_ms = (unsigned)strtoul(v, NULL, 0) * 1000u, i++;
        } else {
            usage();
        }
    }
    if (only && strcmp(only, "cycles") && strcmp(only, "conns") && strcmp(only, "qps") &&
        strcmp(only, "answer"))
        usage();
    setvbuf(stdout, NULL, _IOLBF, 0);
    fd_baseline = count_fds();
    rss_baseline = rss_kib();
    printf("churn   softndk %s on %s; baseline %u fds, RSS %ld KiB\n", SoftNdkVersionString(),
           g_addr, fd_baseline, rss_baseline);
    if (!only || !strcmp(only, "cycles"))
        phase_cycles(cycles);
    if (!only || !strcmp(only, "conns"))
        phase_concurrent("conns", conns, 1);
    if (!only || !strcmp(only, "qps"))
        phase_concurrent("qps", qps, 8);
    if (!only || !strcmp(only, "answer"))
        phase_answer(answer);
    printf("churn   PASS\n");
    return 0;
}
