/* idle_poll: what idle connections on a polled CQ cost the one connection that is busy, and
 * how fast connections are set up beside a polling consumer. Public interface only
 * (<ndk/ndkpi.h>, <ndk/softndk.h>); a figure, never a pass/fail on time (docs/datapath.md,
 * "polling that scales").
 *
 *   idle_poll [--idle N] [--iters K] [--addr IP] [--timeout S]
 *
 * Two processes (the client forks the server), so each end has one socket per connection and
 * 10,000 connections fit a 20,000 descriptor limit. Each end puts N + 1 connections on one CQ
 * and polls it: while the connections are set up (the client connects in batches of 500 and
 * completes each connect as its completion arrives; the server accepts each connect event), and
 * then while connection 0 ping-pongs K 64 B Sends, the N others idle. Printed: the setup rate
 * (connections per second, at the client, first NdkConnect to last NdkCompleteConnect
 * completion) and the ping-pong's one-way latency (median and mean of round trip / 2).
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
};

static void end_open(struct end *e, unsigned n)
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
    NTSTATUS st = SoftNdkOpenAdapter(0, v, NULL, &e->a);
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
    if ((st = e->a->Dispatch->NdkCreateCq(e->a, 4096, on_cq, e, NULL, create_never, NULL,
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

static void server(unsigned n, int port_fd, int done_fd)
{
    struct end e;
    end_open(&e, n);
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
    while (echoed < g_iters + g_warmup) {
        check_time("server echo");
        unsigned got = poll_once(&e, ctx);
        for (unsigned j = 0; j < got; j++) {
            post_recv(&e, ctx[j]);
            post_send(&e);
        }
        echoed += got;
    }
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
        else if (!strcmp(argv[i], "--timeout") && v)
            g_timeout_s = (unsigned)strtoul(v, NULL, 0), i++;
        else {
            fprintf(stderr, "usage: idle_poll [--idle N] [--iters K] [--addr IPv4] "
                            "[--timeout S]\n");
            return 2;
        }
    }
    unsigned n = g_idle + 1;
    raise_fd_limit(n);
    g_deadline = now_ns() + (uint64_t)g_timeout_s * 1000000000u;
    int port_pipe[2], done_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(done_pipe) != 0)
        return 1;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(done_pipe[1]);
        server(n, port_pipe[1], done_pipe[0]);
    }
    close(done_pipe[0]);
    uint16_t port = 0;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port)
        die("server did not start", STATUS_UNSUCCESSFUL);
    struct end e;
    end_open(&e, n);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = port};
    inet_pton(AF_INET, g_addr, &dst.sin_addr);
    /* setup: batches of BATCH connects, each completed as its connect completes */
    uint64_t t0 = now_ns();
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
    }
    double setup_s = (double)(now_ns() - t0) / 1e9;
    printf("idle_poll softndk %s: %u idle connections on each end's polled CQ\n",
           SoftNdkVersionString(), g_idle);
    printf("idle_poll setup %u connections in %.2f s: %.0f/s\n", n, setup_s, n / setup_s);
    fflush(stdout);
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
    uint64_t sum = 0;
    for (unsigned k = 0; k < g_iters; k++)
        sum += rtt[k];
    qsort(rtt, g_iters, sizeof *rtt, cmp_u64);
    printf("idle_poll 64 B one-way polling: median %.2f us, mean %.2f us (%u round trips)\n",
           rtt[g_iters / 2] / 2000.0, (double)sum / g_iters / 2000.0, g_iters);
    fflush(stdout);
    close(done_pipe[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
