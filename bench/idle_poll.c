/* idle_poll: what idle connections on a polled CQ cost the one connection that is busy, and
 * how fast connections are set up beside a polling consumer. Public interface only
 * (<ndk/ndkpi.h>, <ndk/softndk.h>); a figure, never a pass/fail on time (docs/datapath.md,
 * "polling that scales").
 *
 *   idle_poll [--idle N] [--iters K] [--idle-secs S] [--touch] [--arm] [--addr IP]
 *             [--timeout S]
 *
 * Two processes (the client forks the server), so each end has one socket per connection and
 * 10,000 connections fit a 20,000 descriptor limit. Each end puts N + 1 connections on one CQ
 * and polls it: while the connections are set up (the client connects in batches of 500 and
 * completes each connect as its completion arrives; the server accepts each connect event), and
 * then while connection 0 ping-pongs K 64 B Sends, the N others idle. Printed: the setup rate
 * (connections per second, at the client, first NdkConnect to last NdkCompleteConnect
 * completion, and per thousand connections) and the ping-pong's one-way latency (median and
 * mean of round trip / 2). Then, with --idle-secs S (default 3; 0 skips it), nothing is sent
 * for S seconds while each end's consumer polls its CQ every 200 µs: printed, each process's
 * CPU as a percentage of one core, split into the polling thread (the consumer) and the rest
 * (the provider's progress threads). --touch first sends one zero-length message each way on
 * every idle connection, so that they idle after traffic, as a consumer's connections do;
 * --arm makes the idle phase's consumer arm its CQ after each empty poll (poll, arm, sleep).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ndk/ndkpi.h>
#include <ndk/softndk.h>

#define MSG_LEN      64u
#define BATCH        500u
#define SERVER_RECVS 4u
#define PD_MAGIC     0x49444c45u /* "IDLE" */

static unsigned g_idle = 0, g_iters = 20000, g_warmup = 1000;
static unsigned g_timeout_s = 120;
static unsigned g_idle_secs = 3;
static bool g_touch;
static bool g_arm; /* the idle phase arms the CQ after each empty poll (--arm) */
static const char *g_addr = "127.0.0.1";

static void die(const char *what, NTSTATUS st)
{
    fprintf(stderr, "idle_poll[%d]: FAIL: %s: %s\n", (int)getpid(), what, SoftNdkStatusName(st));
    _exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t g_deadline;
static void check_time(const char *what)
{
    if (now_ns() > g_deadline)
        die(what, STATUS_IO_TIMEOUT);
}

struct req {
    atomic_uint calls;
    _Atomic NTSTATUS status;
};

static VOID req_done(PVOID ctx, NTSTATUS st)
{
    struct req *r = ctx;
    atomic_store(&r->status, st);
    atomic_fetch_add(&r->calls, 1);
}

static VOID create_never(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *h)
{
    (void)ctx, (void)st, (void)h;
}
static VOID on_cq(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}
static VOID on_disconnect(PVOID ctx)
{
    (void)ctx;
}

/* One end: adapter, PD, one MR over the message buffers, one CQ. */
struct end {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_MR *mr;
    NDK_CQ *cq;
    UINT32 token;
    uint8_t buf[(SERVER_RECVS + 2) * MSG_LEN];
    unsigned n; /* connections */
    NDK_QP **qp;
    NDK_CONNECTOR **conn;
    struct req *r1, *r2; /* client: connect, complete; server: accept */
    bool server;
    unsigned touched; /* zero-length messages received on the idle connections */
};

static void end_open(struct end *e, unsigned n, bool server)
{
    memset(e, 0, sizeof *e);
    e->n = n;
    e->qp = calloc(n, sizeof *e->qp);
    e->conn = calloc(n, sizeof *e->conn);
    e->r1 = calloc(n, sizeof *e->r1);
    e->r2 = calloc(n, sizeof *e->r2);
    if (!e->qp || !e->conn || !e->r1 || !e->r2)
        die("calloc", STATUS_NO_MEMORY);
    NDK_VERSION v = {2, 0};
    /* The server's door takes a whole batch from the one client address: the default
     * per-peer limit (64) would evict connections of a batch before their Request is read
     * (docs/listener.md, "Handshake limits"). */
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.HandshakeLimit = 2 * BATCH;
    o.HandshakePerPeerLimit = 2 * BATCH;
    NTSTATUS st = SoftNdkOpenAdapter(0, v, server ? &o : NULL, &e->a);
    if (st != STATUS_SUCCESS)
        die("SoftNdkOpenAdapter", st);
    if ((st = e->a->Dispatch->NdkCreatePd(e->a, create_never, NULL, &e->pd)) != STATUS_SUCCESS)
        die("NdkCreatePd", st);
    if ((st = e->pd->Dispatch->NdkCreateMr(e->pd, FALSE, create_never, NULL, &e->mr)) !=
        STATUS_SUCCESS)
        die("NdkCreateMr", st);
    MDL mdl;
    MmInitializeMdl(&mdl, e->buf, sizeof e->buf);
    struct req r = {0};
    st = e->mr->Dispatch->NdkRegisterMr(e->mr, &mdl, sizeof e->buf, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                        req_done, &r);
    while (st == STATUS_PENDING && !atomic_load(&r.calls))
        check_time("NdkRegisterMr");
    if (st == STATUS_PENDING)
        st = atomic_load(&r.status);
    if (st != STATUS_SUCCESS)
        die("NdkRegisterMr", st);
    e->token = e->mr->Dispatch->NdkGetLocalTokenFromMr(e->mr);
    /* --touch: each idle connection's receive and Send completions may wait together */
    ULONG depth = g_touch && 2 * n + 64 > 4096 ? 2 * n + 64 : 4096;
    if ((st = e->a->Dispatch->NdkCreateCq(e->a, depth, on_cq, e, NULL, create_never, NULL,
                                          &e->cq)) != STATUS_SUCCESS)
        die("NdkCreateCq", st);
}

static NDK_QP *make_qp(struct end *e, unsigned i)
{
    ULONG depth = i == 0 ? 16 : 2;
    NDK_QP *qp = NULL;
    NTSTATUS st = e->pd->Dispatch->NdkCreateQp(e->pd, e->cq, e->cq, (void *)(uintptr_t)i, depth,
                                               depth, 1, 1, 0, create_never, NULL, &qp);
    if (st != STATUS_SUCCESS)
        die("NdkCreateQp", st);
    /* an idle connection takes one zero-length message each way once set up (--touch) */
    if (i != 0 && (st = qp->Dispatch->NdkReceive(qp, NULL, NULL, 0)) != STATUS_SUCCESS)
        die("NdkReceive (idle)", st);
    return qp;
}

static void post_recv(struct end *e, unsigned k)
{
    NDK_SGE g = {.VirtualAddress = e->buf + (k + 1) * MSG_LEN,
                 .Length = MSG_LEN,
                 .MemoryRegionToken = e->token};
    NTSTATUS st = e->qp[0]->Dispatch->NdkReceive(e->qp[0], (void *)(uintptr_t)k, &g, 1);
    if (st != STATUS_SUCCESS)
        die("NdkReceive", st);
}

static void post_send(struct end *e)
{
    NDK_SGE g = {.VirtualAddress = e->buf, .Length = MSG_LEN, .MemoryRegionToken = e->token};
    NTSTATUS st = e->qp[0]->Dispatch->NdkSend(e->qp[0], NULL, &g, 1, 0);
    if (st != STATUS_SUCCESS)
        die("NdkSend", st);
}

/* Poll once; returns the receives it found (checking every completion). */
static unsigned poll_once(struct end *e, unsigned *recv_ctx)
{
    NDK_RESULT_EX res[16];
    ULONG m = e->cq->Dispatch->NdkGetCqResultsEx(e->cq, res, 16);
    unsigned got = 0;
    for (ULONG j = 0; j < m; j++) {
        if (res[j].Status != STATUS_SUCCESS)
            die("completion", res[j].Status);
        unsigned qi = (unsigned)(uintptr_t)res[j].QPContext;
        if (res[j].Type == NdkOperationTypeReceive && qi != 0) {
            /* an idle connection's one message: the server answers it */
            e->touched++;
            if (e->server) {
                NTSTATUS st = e->qp[qi]->Dispatch->NdkSend(e->qp[qi], NULL, NULL, 0, 0);
                if (st != STATUS_SUCCESS)
                    die("NdkSend (idle)", st);
            }
            continue;
        }
        if (res[j].Type == NdkOperationTypeReceive) {
            if (res[j].BytesTransferred != MSG_LEN)
                die("receive length", STATUS_DATA_OVERRUN);
            if (recv_ctx)
                recv_ctx[got] = (unsigned)(uintptr_t)res[j].RequestContext;
            got++;
        }
    }
    return got;
}

static uint64_t cpu_ns(clockid_t which)
{
    struct timespec ts;
    clock_gettime(which, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What one end burnt while idle: the polling thread and the whole process, in ns. */
struct idle_cpu {
    uint64_t wall, consumer, process;
};

/* Poll the CQ every 200 µs for g_idle_secs, nothing sent; any completion is an error. */
static struct idle_cpu idle_phase(struct end *e)
{
    struct idle_cpu r = {0, 0, 0};
    if (g_idle_secs == 0)
        return r;
    uint64_t w0 = now_ns(), t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID),
             p0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t end = w0 + (uint64_t)g_idle_secs * 1000000000u;
    struct timespec nap = {0, 200 * 1000};
    while (now_ns() < end) {
        if (poll_once(e, NULL) != 0)
            die("a completion while idle", STATUS_UNSUCCESSFUL);
        if (g_arm)
            e->cq->Dispatch->NdkArmCq(e->cq, NDK_CQ_NOTIFY_ANY);
        nanosleep(&nap, NULL);
    }
    r.wall = now_ns() - w0;
    r.consumer = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    r.process = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - p0;
    if (r.process < r.consumer) /* the two clocks tick apart */
        r.process = r.consumer;
    return r;
}

static void print_idle(const char *who, const struct idle_cpu *c)
{
    if (!c->wall)
        return;
    printf("idle_poll idle %s %u connections, %.1f s: process %.1f %% of a core (consumer "
           "polling thread %.1f %%, provider threads %.1f %%)\n",
           who, g_idle + 1, c->wall / 1e9, 100.0 * c->process / c->wall,
           100.0 * c->consumer / c->wall, 100.0 * (c->process - c->consumer) / c->wall);
}

/* Teardown: close every connector (an abortive disconnect, the endpoint released), then every
 * QP, draining the CQ meanwhile (flushed receives); returns the seconds the connectors took. */
static atomic_uint g_closed;
static VOID on_closed(PVOID ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_closed, 1);
}

static void drain(struct end *e)
{
    NDK_RESULT_EX res[64];
    while (e->cq->Dispatch->NdkGetCqResultsEx(e->cq, res, 64) > 0)
        ;
}

static void close_all(struct end *e, NDK_OBJECT_HEADER *(*obj)(struct end *, unsigned),
                      const char *what)
{
    atomic_store(&g_closed, 0);
    unsigned sync = 0;
    for (unsigned i = 0; i < e->n; i++) {
        NDK_OBJECT_HEADER *h = obj(e, i);
        NTSTATUS st = h->ObjectType == NdkObjectTypeConnector
                          ? ((NDK_CONNECTOR *)h)->Dispatch->NdkCloseConnector(h, on_closed, NULL)
                          : ((NDK_QP *)h)->Dispatch->NdkCloseQp(h, on_closed, NULL);
        if (st == STATUS_SUCCESS)
            sync++;
        else if (st != STATUS_PENDING)
            die(what, st);
        if (i % 64 == 0)
            drain(e);
    }
    while (atomic_load(&g_closed) + sync < e->n) {
        check_time(what);
        drain(e);
    }
}

static NDK_OBJECT_HEADER *conn_of(struct end *e, unsigned i)
{
    return &e->conn[i]->Header;
}
static NDK_OBJECT_HEADER *qp_of(struct end *e, unsigned i)
{
    return &e->qp[i]->Header;
}

/* ---------------------------------------------------------------- server */

static pthread_mutex_t g_inq_mu = PTHREAD_MUTEX_INITIALIZER;
static NDK_CONNECTOR **g_inq;
static unsigned g_inq_n;

static VOID on_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    pthread_mutex_lock(&g_inq_mu);
    g_inq[g_inq_n++] = c;
    pthread_mutex_unlock(&g_inq_mu);
}

static void server(unsigned n, int port_fd, int done_fd, int cpu_fd)
{
    struct end e;
    end_open(&e, n, true);
    e.server = true;
    g_inq = calloc(n + 16, sizeof *g_inq);
    NDK_LISTENER *l;
    NTSTATUS st =
        e.a->Dispatch->NdkCreateListener(e.a, on_connect_event, &e, create_never, NULL, &l);
    if (st != STATUS_SUCCESS)
        die("NdkCreateListener", st);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, g_addr, &sa.sin_addr);
    if ((st = l->Dispatch->NdkListen(l, (struct sockaddr *)&sa, sizeof sa, NULL, NULL)) !=
        STATUS_SUCCESS)
        die("NdkListen", st);
    ULONG len = sizeof sa;
    if ((st = l->Dispatch->NdkGetLocalAddress(l, (struct sockaddr *)&sa, &len)) != STATUS_SUCCESS)
        die("NdkGetLocalAddress", st);
    if (write(port_fd, &sa.sin_port, sizeof sa.sin_port) != sizeof sa.sin_port)
        die("write port", STATUS_UNSUCCESSFUL);
    /* accept everything, polling the CQ meanwhile (the consumer this bench is about) */
    unsigned accepted = 0;
    while (accepted < n) {
        check_time("server accepts");
        pthread_mutex_lock(&g_inq_mu);
        NDK_CONNECTOR *in = g_inq_n ? g_inq[--g_inq_n] : NULL;
        pthread_mutex_unlock(&g_inq_mu);
        if (!in) {
            poll_once(&e, NULL);
            continue;
        }
        uint32_t pd[2] = {0, 0};
        ULONG pdlen = sizeof pd;
        st = in->Dispatch->NdkGetConnectionData(in, NULL, NULL, pd, &pdlen);
        if (st != STATUS_SUCCESS || pd[0] != PD_MAGIC || pd[1] >= n || e.qp[pd[1]])
            die("incoming private data", st);
        unsigned i = pd[1];
        e.conn[i] = in;
        e.qp[i] = make_qp(&e, i);
        if (i == 0)
            for (unsigned k = 0; k < SERVER_RECVS; k++)
                post_recv(&e, k);
        st = in->Dispatch->NdkAccept(in, e.qp[i], 0, 0, NULL, 0, on_disconnect, NULL, req_done,
                                     &e.r1[i]);
        if (st != STATUS_PENDING && st != STATUS_SUCCESS)
            die("NdkAccept", st);
        accepted++;
    }
    /* echo every message of connection 0 */
    unsigned echoed = 0, ctx[16];
    struct timespec nap = {0, 200 * 1000};
    while (echoed < g_iters + g_warmup) {
        check_time("server echo");
        unsigned got = poll_once(&e, ctx);
        /* the idle connections' messages come to a consumer that polls every 200 µs, as the
         * idle phase's does: the progress threads see them first */
        if (got == 0 && echoed == 0 && g_touch && e.touched < n - 1)
            nanosleep(&nap, NULL);
        for (unsigned j = 0; j < got; j++) {
            post_recv(&e, ctx[j]);
            post_send(&e);
        }
        echoed += got;
    }
    struct idle_cpu ic = idle_phase(&e);
    if (write(cpu_fd, &ic, sizeof ic) != sizeof ic)
        die("write idle CPU", STATUS_UNSUCCESSFUL);
    char c;
    while (read(done_fd, &c, 1) < 0 && errno == EINTR)
        ;
    _exit(0); /* a bench: the process ends with its 10,000 connections */
}

/* ---------------------------------------------------------------- client */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void raise_fd_limit(unsigned n)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t need = (rlim_t)n + 512u;
    if (rl.rlim_cur < need) {
        rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < need) {
        fprintf(stderr, "idle_poll: RLIMIT_NOFILE %llu is too small for %u connections\n",
                (unsigned long long)rl.rlim_cur, n);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--idle") && v)
            g_idle = (unsigned)strtoul(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--iters") && v)
            g_iters = (unsigned)strtoul(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--addr") && v)
            g_addr = v, i++;
        else if (!strcmp(argv[i], "--touch"))
            g_touch = true;
        else if (!strcmp(argv[i], "--arm"))
            g_arm = true;
        else if (!strcmp(argv[i], "--idle-secs") && v)
            g_idle_secs = (unsigned)strtoul(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--timeout") && v)
            g_timeout_s = (unsigned)strtoul(v, NULL, 0), i++;
        else {
            fprintf(stderr, "usage: idle_poll [--idle N] [--iters K] [--idle-secs S] [--touch] "
                            "[--arm] [--addr IPv4] [--timeout S]\n");
            return 2;
        }
    }
    unsigned n = g_idle + 1;
    raise_fd_limit(n);
    g_deadline = now_ns() + (uint64_t)g_timeout_s * 1000000000u;
    int port_pipe[2], done_pipe[2], cpu_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(done_pipe) != 0 || pipe(cpu_pipe) != 0)
        return 1;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(done_pipe[1]);
        server(n, port_pipe[1], done_pipe[0], cpu_pipe[1]);
    }
    close(done_pipe[0]);
    uint16_t port = 0;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port)
        die("server did not start", STATUS_UNSUCCESSFUL);
    struct end e;
    end_open(&e, n, false);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = port};
    inet_pton(AF_INET, g_addr, &dst.sin_addr);
    /* setup: batches of BATCH connects, each completed as its connect completes; the rate of
     * every thousand is kept */
    struct mark {
        unsigned at;
        double rate;
    } marks[64];
    size_t n_marks = 0;
    uint64_t t0 = now_ns(), t_mark = t0;
    for (unsigned lo = 0; lo < n; lo += BATCH) {
        unsigned hi = lo + BATCH < n ? lo + BATCH : n;
        for (unsigned i = lo; i < hi; i++) {
            e.qp[i] = make_qp(&e, i);
            NTSTATUS st = e.a->Dispatch->NdkCreateConnector(e.a, create_never, NULL, &e.conn[i]);
            if (st != STATUS_SUCCESS)
                die("NdkCreateConnector", st);
            struct sockaddr_in src = {.sin_family = AF_INET};
            inet_pton(AF_INET, g_addr, &src.sin_addr);
            uint32_t pd[2] = {PD_MAGIC, i};
            st = e.conn[i]->Dispatch->NdkConnect(e.conn[i], e.qp[i], (struct sockaddr *)&src,
                                                 sizeof src, (struct sockaddr *)&dst, sizeof dst, 0,
                                                 0, pd, sizeof pd, req_done, &e.r1[i]);
            if (st != STATUS_PENDING)
                die("NdkConnect", st);
        }
        unsigned completed = 0, established = 0;
        bool *asked = calloc(hi - lo, sizeof *asked);
        while (established < hi - lo) {
            check_time("client setup");
            poll_once(&e, NULL);
            for (unsigned i = lo; i < hi && completed < hi - lo; i++) {
                if (asked[i - lo] || !atomic_load(&e.r1[i].calls))
                    continue;
                NTSTATUS st = atomic_load(&e.r1[i].status);
                if (st != STATUS_SUCCESS)
                    die("NdkConnect completion", st);
                asked[i - lo] = true;
                completed++;
                st = e.conn[i]->Dispatch->NdkCompleteConnect(e.conn[i], on_disconnect, NULL,
                                                             req_done, &e.r2[i]);
                if (st == STATUS_SUCCESS)
                    req_done(&e.r2[i], st);
                else if (st != STATUS_PENDING)
                    die("NdkCompleteConnect", st);
            }
            established = 0;
            for (unsigned i = lo; i < hi; i++)
                established += atomic_load(&e.r2[i].calls) != 0;
        }
        free(asked);
        if (hi % 1000u == 0 || hi == n) {
            uint64_t t = now_ns();
            unsigned since = hi % 1000u ? hi % 1000u : 1000u;
            if (n_marks < sizeof marks / sizeof marks[0])
                marks[n_marks++] = (struct mark){hi, since / ((double)(t - t_mark) / 1e9)};
            t_mark = t;
        }
    }
    double setup_s = (double)(now_ns() - t0) / 1e9;
    printf("idle_poll softndk %s: %u idle connections on each end's polled CQ\n",
           SoftNdkVersionString(), g_idle);
    printf("idle_poll setup %u connections in %.2f s: %.0f/s\n", n, setup_s, n / setup_s);
    for (size_t k = 0; k < n_marks; k++)
        printf("idle_poll setup rate at %u connections: %.0f/s (the last %u)\n", marks[k].at,
               marks[k].rate, marks[k].at % 1000u ? marks[k].at % 1000u : 1000u);
    fflush(stdout);
    /* --touch: one zero-length message each way on every idle connection (its QPs have had
     * traffic, as a consumer's connections usually have) */
    if (g_touch) {
        for (unsigned i = 1; i < n; i++) {
            NTSTATUS st = e.qp[i]->Dispatch->NdkSend(e.qp[i], NULL, NULL, 0, 0);
            if (st != STATUS_SUCCESS)
                die("NdkSend (idle)", st);
            if (i % 64 == 0)
                poll_once(&e, NULL);
        }
        struct timespec nap = {0, 200 * 1000};
        while (e.touched < n - 1) {
            check_time("client touch");
            poll_once(&e, NULL);
            nanosleep(&nap, NULL);
        }
        printf("idle_poll touched %u idle connections (one message each way)\n", n - 1);
    }
    /* ping-pong on connection 0 */
    uint64_t *rtt = calloc(g_iters, sizeof *rtt);
    for (unsigned k = 0; k < g_iters + g_warmup; k++) {
        uint64_t a = now_ns();
        post_recv(&e, 0);
        post_send(&e);
        while (poll_once(&e, NULL) == 0)
            check_time("client ping-pong");
        if (k >= g_warmup)
            rtt[k - g_warmup] = now_ns() - a;
    }
    struct idle_cpu mine = idle_phase(&e), theirs;
    if (read(cpu_pipe[0], &theirs, sizeof theirs) != sizeof theirs)
        die("read the server's idle CPU", STATUS_UNSUCCESSFUL);
    uint64_t sum = 0;
    for (unsigned k = 0; k < g_iters; k++)
        sum += rtt[k];
    qsort(rtt, g_iters, sizeof *rtt, cmp_u64);
    printf("idle_poll 64 B one-way polling: median %.2f us, mean %.2f us (%u round trips)\n",
           rtt[g_iters / 2] / 2000.0, (double)sum / g_iters / 2000.0, g_iters);
    print_idle("client", &mine);
    print_idle("server", &theirs);
    fflush(stdout);
    /* teardown at the client: as fast as setup, whatever the count */
    uint64_t c0 = now_ns();
    close_all(&e, conn_of, "close the connectors");
    uint64_t c1 = now_ns();
    close_all(&e, qp_of, "close the QPs");
    uint64_t c2 = now_ns();
    printf("idle_poll teardown %u connections: connectors closed in %.2f s (%.0f/s), QPs in "
           "%.2f s (%.0f/s)\n",
           n, (c1 - c0) / 1e9, n / ((c1 - c0) / 1e9), (c2 - c1) / 1e9, n / ((c2 - c1) / 1e9));
    fflush(stdout);
    close(done_pipe[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
