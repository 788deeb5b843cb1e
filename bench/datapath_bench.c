/* datapath_bench: softndk Send/Receive against raw TCP on loopback, same sizes, same polling
 * discipline, same process (README.md). Not a test: prints a table of medians/means and ratios.
 *
 *   datapath_bench [-t SECONDS_PER_CASE] [-c on|off] [-q] [-o]
 *
 * -q: only the 64 B polling ping-pong and the 1 MiB Send stream (bench/hooks_cost.sh runs two
 * builds in interleaved rounds of these).
 * -o: only softndk's own work per 64 B message, both ends on one thread, over TCP and over the
 * same-host stream (one_core below): the figure to compare two builds of a data path change by;
 * over TCP beside raw TCP's same loop (one_core_raw).
 *
 * Two adapters, one QP each, joined by a TCP connection made here (no connection layer) and
 * attached with sndk_qp_attach; the raw side uses a second TCP connection.
 * - ping-pong 64 B, polling: each side spins on NdkGetCqResultsEx (which drives its receive);
 *   raw: each side spins on recv(MSG_DONTWAIT). One-way latency = round trip / 2 (median).
 * - ping-pong 64 B, blocking: each side arms its CQ (ANY) and sleeps until the notification;
 *   raw: blocking recv().
 * - stream 64 KiB / 1 MiB: one sender, one receiver with receives posted ahead (credits), both
 *   polling; raw: non-blocking send()/recv() of the same sizes, spinning on EAGAIN.
 * - message rate 8 B: Sends one by one, and in DEFER chains of 16; raw: one send() per message.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "datapath/link.h"
#include "datapath/stream.h"
#include "device/qp_state.h"

static double case_seconds = 1.5;
static bool use_crc = true;
static bool quick;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "datapath_bench: %s\n", what);
    exit(1);
}
#define MUST(x)                                                                                    \
    do {                                                                                           \
        if (!(x))                                                                                  \
            die(#x);                                                                               \
    } while (0)

static void tcp_pair(int *a, int *b, bool nonblock)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    MUST(bind(l, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(l, 1) == 0);
    MUST(getsockname(l, (struct sockaddr *)&sin, &sl) == 0);
    *a = socket(AF_INET, SOCK_STREAM, 0);
    MUST(connect(*a, (struct sockaddr *)&sin, sizeof sin) == 0);
    *b = accept(l, NULL, NULL);
    MUST(*b >= 0);
    close(l);
    int one = 1;
    for (int i = 0; i < 2; i++) {
        int fd = i ? *b : *a;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (nonblock)
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
}

/* ---------------------------------------------------------------- softndk side */

#define BUF (2u << 20)
#define DEPTH 256

struct end {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    uint8_t *buf;
    uint32_t token;
    NDK_MR *rmr;      /* the same buffer, remote read/write: RDMA target */
    uint32_t rtoken;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned notified;
};

static VOID on_cq(PVOID ctx, NTSTATUS st)
{
    (void)st;
    struct end *e = ctx;
    pthread_mutex_lock(&e->lock);
    e->notified++;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void end_open(struct end *e, ULONG spin)
{
    memset(e, 0, sizeof *e);
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.SpinMicroseconds = spin;
    NDK_VERSION v = {2, 0};
    MUST(SoftNdkOpenAdapter(if_nametoindex("lo"), v, &o, &e->a) == STATUS_SUCCESS);
    MUST(e->a->Dispatch->NdkCreatePd(e->a, NULL, NULL, &e->pd) == STATUS_SUCCESS);
    MUST(e->a->Dispatch->NdkCreateCq(e->a, 4 * DEPTH, on_cq, e, NULL, NULL, NULL, &e->cq) ==
         STATUS_SUCCESS);
    MUST(e->pd->Dispatch->NdkCreateQp(e->pd, e->cq, e->cq, e, DEPTH, DEPTH, 4, 4, 64, NULL, NULL,
                                      &e->qp) == STATUS_SUCCESS);
    e->buf = aligned_alloc(4096, BUF);
    memset(e->buf, 0x5a, BUF);
    MUST(e->pd->Dispatch->NdkCreateMr(e->pd, FALSE, NULL, NULL, &e->mr) == STATUS_SUCCESS);
    MDL mdl;
    MmInitializeMdl(&mdl, e->buf, BUF);
    MUST(e->mr->Dispatch->NdkRegisterMr(e->mr, &mdl, BUF, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, NULL,
                                        NULL) == STATUS_SUCCESS);
    e->token = e->mr->Dispatch->NdkGetLocalTokenFromMr(e->mr);
    MUST(e->pd->Dispatch->NdkCreateMr(e->pd, FALSE, NULL, NULL, &e->rmr) == STATUS_SUCCESS);
    MUST(e->rmr->Dispatch->NdkRegisterMr(e->rmr, &mdl, BUF,
                                         NDK_MR_FLAG_ALLOW_LOCAL_WRITE |
                                             NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                             NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                         NULL, NULL) == STATUS_SUCCESS);
    e->rtoken = e->rmr->Dispatch->NdkGetRemoteTokenFromMr(e->rmr);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
}

static void end_close(struct end *e)
{
    /* Close order: QP, MR, CQ, PD; pending closes finish before the adapter close returns. */
    e->qp->Dispatch->NdkCloseQp(&e->qp->Header, NULL, NULL);
    e->mr->Dispatch->NdkCloseMr(&e->mr->Header, NULL, NULL);
    e->rmr->Dispatch->NdkCloseMr(&e->rmr->Header, NULL, NULL);
    e->cq->Dispatch->NdkCloseCq(&e->cq->Header, NULL, NULL);
    e->pd->Dispatch->NdkClosePd(&e->pd->Header, NULL, NULL);
    SoftNdkCloseAdapter(e->a);
    free(e->buf);
}

static void connect_ends(struct end *x, struct end *y)
{
    int a, b;
    tcp_pair(&a, &b, true);
    struct sndk_link_params p = {.fd = a, .crc = use_crc, .mpa_rev = 2, .ird = 8, .ord = 8};
    MUST(sndk_qp_attach((struct sndk_qp *)x->qp, &p, NULL, NULL) == 0);
    p.fd = b;
    MUST(sndk_qp_attach((struct sndk_qp *)y->qp, &p, NULL, NULL) == 0);
}

static void post_recv(struct end *e, size_t off, size_t len)
{
    NDK_SGE g = {.VirtualAddress = e->buf + off, .Length = (ULONG)len, .MemoryRegionToken = e->token};
    MUST(e->qp->Dispatch->NdkReceive(e->qp, NULL, &g, 1) == STATUS_SUCCESS);
}

static NTSTATUS post_send(struct end *e, size_t off, size_t len, ULONG flags)
{
    NDK_SGE g = {.VirtualAddress = e->buf + off, .Length = (ULONG)len, .MemoryRegionToken = e->token};
    return e->qp->Dispatch->NdkSend(e->qp, NULL, &g, 1, flags);
}

/* Wait for one receive completion (send completions are silent in these runs). */
static void wait_recv(struct end *e, bool blocking)
{
    NDK_RESULT_EX r;
    for (;;) {
        if (e->cq->Dispatch->NdkGetCqResultsEx(e->cq, &r, 1) == 1) {
            if (r.Status != STATUS_SUCCESS)
                die("error completion");
            if (r.Type == NdkOperationTypeReceive)
                return;
            continue;
        }
        if (!blocking)
            continue;
        pthread_mutex_lock(&e->lock);
        unsigned seen = e->notified;
        pthread_mutex_unlock(&e->lock);
        e->cq->Dispatch->NdkArmCq(e->cq, NDK_CQ_NOTIFY_ANY);
        if (e->cq->Dispatch->NdkGetCqResultsEx(e->cq, &r, 1) == 1) {
            if (r.Type == NdkOperationTypeReceive)
                return;
            continue;
        }
        pthread_mutex_lock(&e->lock);
        while (e->notified == seen)
            pthread_cond_wait(&e->cond, &e->lock);
        pthread_mutex_unlock(&e->lock);
    }
}

/* ---------------------------------------------------------------- ping-pong */

struct pp {
    struct end *e;
    int fd;
    bool blocking, raw, initiator;
    unsigned iters;
    uint64_t *rtt;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void raw_recv_exact(int fd, void *buf, size_t len, bool blocking)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(fd, (uint8_t *)buf + got, len - got, blocking ? 0 : MSG_DONTWAIT);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || (errno != EAGAIN && errno != EINTR))
            die("raw recv");
    }
}

static void raw_send_all(int fd, const void *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, (const uint8_t *)buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            off += (size_t)w;
        else if (errno != EAGAIN && errno != EINTR)
            die("raw send");
    }
}

static void *pp_thread(void *arg)
{
    struct pp *p = arg;
    uint8_t msg[64] = {0};
    for (unsigned i = 0; i < p->iters; i++) {
        uint64_t t0 = now_ns();
        if (p->raw) {
            if (p->initiator) {
                raw_send_all(p->fd, msg, 64);
                raw_recv_exact(p->fd, msg, 64, p->blocking);
            } else {
                raw_recv_exact(p->fd, msg, 64, p->blocking);
                raw_send_all(p->fd, msg, 64);
            }
        } else {
            if (p->initiator) {
                MUST(post_send(p->e, 0, 64, NDK_OP_FLAG_SILENT_SUCCESS) == STATUS_SUCCESS);
                wait_recv(p->e, p->blocking);
            } else {
                wait_recv(p->e, p->blocking);
                MUST(post_send(p->e, 0, 64, NDK_OP_FLAG_SILENT_SUCCESS) == STATUS_SUCCESS);
            }
            post_recv(p->e, 4096, 64); /* replace the receive just used */
        }
        if (p->initiator && p->rtt)
            p->rtt[i] = now_ns() - t0;
    }
    return NULL;
}

/* One-way latency in µs (median round trip / 2). */
static double pingpong(bool raw, bool blocking)
{
    struct end x, y;
    int a = -1, b = -1;
    ULONG spin = blocking ? 0 : SOFTNDK_SPIN_NONE;
    if (raw) {
        tcp_pair(&a, &b, false);
    } else {
        end_open(&x, spin);
        end_open(&y, spin);
        connect_ends(&x, &y);
        for (int i = 0; i < 4; i++) {
            post_recv(&x, 4096, 64);
            post_recv(&y, 4096, 64);
        }
    }
    /* calibrate the iteration count to the time budget */
    unsigned iters = 2000;
    uint64_t *rtt = NULL;
    for (int pass = 0; pass < 2; pass++) {
        free(rtt);
        rtt = calloc(iters, sizeof *rtt);
        struct pp pi = {&x, a, blocking, raw, true, iters, rtt};
        struct pp pr = {&y, b, blocking, raw, false, iters, NULL};
        pthread_t t1, t2;
        uint64_t t0 = now_ns();
        pthread_create(&t2, NULL, pp_thread, &pr);
        pthread_create(&t1, NULL, pp_thread, &pi);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        double el = (double)(now_ns() - t0) / 1e9;
        if (pass == 0) {
            double want = case_seconds / 2 / el * iters;
            iters = want < 1000 ? 1000 : want > 2000000 ? 2000000 : (unsigned)want;
        }
    }
    qsort(rtt, iters, sizeof *rtt, cmp_u64);
    double us = (double)rtt[iters / 2] / 2 / 1000;
    free(rtt);
    if (raw) {
        close(a);
        close(b);
    } else {
        end_close(&x);
        end_close(&y);
    }
    return us;
}

/* ---------------------------------------------------------------- one core */

/* x and y over the same-host stream, as the connector joins a peer of this host: shared rings
 * set up over an AF_UNIX socket pair. Without CRC, as such a connection takes it by default. */
static void connect_ends_shm(struct end *x, struct end *y)
{
    int sv[2];
    MUST(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    void *sx = sndk_stream_shm_new(sv[0], true);
    void *sy = sndk_stream_shm_new(sv[1], false);
    MUST(sx && sy);
    struct sndk_link_params p = {.fd = sndk_stream_shm_fd(sx),
                                 .stream_ops = &sndk_stream_shm_ops,
                                 .stream_priv = sx,
                                 .mpa_rev = 2,
                                 .active = true,
                                 .ird = 8,
                                 .ord = 8};
    MUST(sndk_qp_attach((struct sndk_qp *)x->qp, &p, NULL, NULL) == 0);
    p.fd = sndk_stream_shm_fd(sy);
    p.stream_priv = sy;
    p.active = false;
    MUST(sndk_qp_attach((struct sndk_qp *)y->qp, &p, NULL, NULL) == 0);
}

/* Poll e's CQ until one completion of type t arrives (bounded: a lost one is a bug). */
static void one_core_take(struct end *e, NDK_OPERATION_TYPE t)
{
    NDK_RESULT_EX r;
    uint64_t until = 0; /* read the clock only once a poll came back empty: it costs ~20 ns */
    while (e->cq->Dispatch->NdkGetCqResultsEx(e->cq, &r, 1) == 0)
        if (!until)
            until = now_ns() + 5000000000ull;
        else if (now_ns() > until)
            die("one core: a completion did not come within 5 s");
    if (r.Status != STATUS_SUCCESS || r.Type != t)
        die("one core: an unexpected completion");
}

/* The software cost of a message with no core between its ends (-o): one thread posts a receive
 * at y and a 64 B Send at x, polls y's CQ (whose poll runs y's receive pass) for the receive and
 * x's for the Send's completion, then the same from y to x. No cache line crosses cores and no
 * thread waits for another, so what is left is softndk's own work per message (over TCP with
 * the send and recv calls): a figure that moves by a few ns with the code where the two-thread
 * ping-pong moves by tens with the VM. Per message, the least of five rounds; then the cost of
 * an empty poll, of a CQ whose one connection has nothing. */
static void one_core(bool shm, unsigned n)
{
    struct end x, y;
    end_open(&x, SOFTNDK_SPIN_NONE);
    end_open(&y, SOFTNDK_SPIN_NONE);
    if (shm)
        connect_ends_shm(&x, &y);
    else
        connect_ends(&x, &y);
    double best = 0;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < n; i++) {
            post_recv(&y, 4096, 64);
            MUST(post_send(&x, 0, 64, 0) == STATUS_SUCCESS);
            one_core_take(&y, NdkOperationTypeReceive);
            one_core_take(&x, NdkOperationTypeSend);
            post_recv(&x, 4096, 64);
            MUST(post_send(&y, 0, 64, 0) == STATUS_SUCCESS);
            one_core_take(&x, NdkOperationTypeReceive);
            one_core_take(&y, NdkOperationTypeSend);
        }
        double ns = (double)(now_ns() - t0) / (2.0 * n);
        if (round == 0 || ns < best)
            best = ns;
    }
    NDK_RESULT_EX r;
    double empty = 0;
    for (int round = 0; round < 3; round++) {
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < n; i++)
            MUST(x.cq->Dispatch->NdkGetCqResultsEx(x.cq, &r, 1) == 0);
        double ns = (double)(now_ns() - t0) / n;
        if (round == 0 || ns < empty)
            empty = ns;
    }
    printf("%-34s %11.1f ns %11.1f ns\n", shm ? "one core, same-host stream" : "one core, TCP",
           best, empty);
    end_close(&x);
    end_close(&y);
}

/* Read what x sent to y (bounded, as one_core_take). */
static void one_core_raw_read(int fd, uint8_t *in, size_t cap)
{
    uint64_t until = 0;
    while (recv(fd, in, cap, 0) <= 0)
        if (!until)
            until = now_ns() + 5000000000ull;
        else if (now_ns() > until)
            die("one core, raw TCP: a message did not come within 5 s");
}

/* The same loop with raw TCP (-o, beside one_core over TCP): one thread sends 64 B on x, reads
 * it on y, answers, reads the answer: the system calls one_core's TCP case makes per message
 * (one send, one recv), without softndk. What one_core measures above this is its own work
 * and what that work costs the kernel's (caches, predictors). Then a recv that finds nothing. */
static void one_core_raw(unsigned n)
{
    int x, y;
    tcp_pair(&x, &y, true);
    uint8_t msg[64], in[4096];
    memset(msg, 0x5a, sizeof msg);
    double best = 0;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < n; i++) {
            MUST(send(x, msg, sizeof msg, 0) == (ssize_t)sizeof msg);
            one_core_raw_read(y, in, sizeof in);
            MUST(send(y, msg, sizeof msg, 0) == (ssize_t)sizeof msg);
            one_core_raw_read(x, in, sizeof in);
        }
        double ns = (double)(now_ns() - t0) / (2.0 * n);
        if (round == 0 || ns < best)
            best = ns;
    }
    double empty = 0;
    for (int round = 0; round < 3; round++) {
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < n; i++)
            MUST(recv(x, in, sizeof in, 0) < 0);
        double ns = (double)(now_ns() - t0) / n;
        if (round == 0 || ns < empty)
            empty = ns;
    }
    printf("%-34s %11.1f ns %11.1f ns\n", "one core, raw TCP (same calls)", best, empty);
    close(x);
    close(y);
}

/* ---------------------------------------------------------------- streaming */

struct st {
    struct end *e;
    int fd;
    bool raw;
    size_t size;
    unsigned chain; /* DEFER chain length (1 = none) */
    uint64_t count;
    atomic_uint_fast64_t *credits; /* receives posted by the receiver */
    atomic_bool *stop;
    uint64_t done;
};

static void *st_sender(void *arg)
{
    struct st *s = arg;
    uint64_t sent = 0;
    if (s->raw) {
        uint8_t *buf = malloc(s->size);
        memset(buf, 1, s->size);
        for (sent = 0; sent < s->count; sent++)
            raw_send_all(s->fd, buf, s->size);
        free(buf);
        s->done = sent;
        return NULL;
    }
    while (sent < s->count) {
        uint64_t avail = atomic_load_explicit(s->credits, memory_order_acquire);
        if (sent >= avail)
            continue;
        uint64_t n = avail - sent;
        if (n > s->chain)
            n = s->chain;
        for (uint64_t k = 0; k < n; k++) {
            ULONG f = NDK_OP_FLAG_SILENT_SUCCESS | (k + 1 < n ? NDK_OP_FLAG_DEFER : 0);
            NTSTATUS st;
            while ((st = post_send(s->e, 0, s->size, f)) == STATUS_NO_MORE_ENTRIES)
                ;
            MUST(st == STATUS_SUCCESS);
        }
        sent += n;
    }
    s->done = sent;
    return NULL;
}

static void *st_receiver(void *arg)
{
    struct st *s = arg;
    uint64_t got = 0;
    if (s->raw) {
        size_t chunk = s->size < (1u << 20) ? s->size : (1u << 20);
        uint8_t *buf = malloc(chunk);
        uint64_t total = s->count * s->size, bytes = 0;
        while (bytes < total) {
            ssize_t r = recv(s->fd, buf, chunk, MSG_DONTWAIT); /* polls, as the CQ consumer */
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r <= 0)
                die("raw stream recv");
            bytes += (uint64_t)r;
        }
        free(buf);
        s->done = s->count;
        return NULL;
    }
    unsigned ahead = DEPTH - 8;
    size_t slot = s->size <= 4096 ? 4096 : s->size;
    unsigned slots = (unsigned)(BUF / slot);
    uint64_t posted = 0;
    while (posted < ahead && posted < s->count) {
        post_recv(s->e, (posted % slots) * slot, s->size);
        posted++;
    }
    atomic_store_explicit(s->credits, posted, memory_order_release);
    NDK_RESULT_EX r[64];
    while (got < s->count) {
        unsigned n = s->e->cq->Dispatch->NdkGetCqResultsEx(s->e->cq, r, 64);
        for (unsigned i = 0; i < n; i++)
            if (r[i].Status != STATUS_SUCCESS)
                die("stream: error completion");
        got += n;
        while (posted < s->count && posted - got < ahead) {
            post_recv(s->e, (posted % slots) * slot, s->size);
            posted++;
        }
        atomic_store_explicit(s->credits, posted, memory_order_release);
    }
    s->done = got;
    return NULL;
}

/* Messages per second (and bytes per second in *bps). */
static double stream(bool raw, size_t size, unsigned chain, double *bps)
{
    struct end x, y;
    int a = -1, b = -1;
    if (raw) {
        tcp_pair(&a, &b, false);
    } else {
        end_open(&x, SOFTNDK_SPIN_NONE);
        end_open(&y, SOFTNDK_SPIN_NONE);
        connect_ends(&x, &y);
    }
    uint64_t count = size >= 65536 ? 2000 : 100000;
    double rate = 0;
    for (int pass = 0; pass < 2; pass++) {
        atomic_uint_fast64_t credits = 0;
        atomic_bool stop = false;
        struct st snd = {&x, a, raw, size, chain, count, &credits, &stop, 0};
        struct st rcv = {&y, b, raw, size, chain, count, &credits, &stop, 0};
        if (raw)
            snd.e = rcv.e = NULL;
        pthread_t t1, t2;
        uint64_t t0 = now_ns();
        pthread_create(&t2, NULL, st_receiver, &rcv);
        pthread_create(&t1, NULL, st_sender, &snd);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        double el = (double)(now_ns() - t0) / 1e9;
        rate = (double)count / el;
        if (pass == 0) {
            double want = case_seconds * rate;
            count = want < 100 ? 100 : (uint64_t)want;
        }
    }
    *bps = rate * (double)size;
    if (raw) {
        close(a);
        close(b);
    } else {
        end_close(&x);
        end_close(&y);
    }
    return rate;
}

/* ---------------------------------------------------------------- RDMA */

/* Wait for the next initiator completion of x (polling: it drives progress). */
static void wait_one(struct end *e, NDK_OPERATION_TYPE type)
{
    NDK_RESULT_EX r;
    while (e->cq->Dispatch->NdkGetCqResultsEx(e->cq, &r, 1) == 0)
        ;
    if (r.Status != STATUS_SUCCESS || r.Type != type)
        die("RDMA: unexpected completion");
}

static void rdma_read(struct end *x, struct end *y, size_t len)
{
    NDK_SGE g = {.VirtualAddress = x->buf + BUF / 2, .Length = (ULONG)len,
                 .MemoryRegionToken = x->token};
    MUST(x->qp->Dispatch->NdkRead(x->qp, NULL, &g, 1, (uint64_t)(uintptr_t)y->buf, y->rtoken, 0) ==
         STATUS_SUCCESS);
    wait_one(x, NdkOperationTypeRead);
}

/* RDMA Write stream: silent Writes back to back (the queue full: retry), then a 1-byte Read
 * whose completion means every Write before it has been placed (the responder answers in
 * stream order). Bytes per second. */
static double write_stream(size_t size)
{
    struct end x, y;
    end_open(&x, SOFTNDK_SPIN_NONE);
    end_open(&y, SOFTNDK_SPIN_NONE);
    connect_ends(&x, &y);
    uint64_t count = size >= (1u << 20) ? 200 : 2000;
    double bps = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < count; i++) {
            size_t off = size >= BUF / 2 ? 0 : (i % (BUF / size)) * size;
            NDK_SGE g = {.VirtualAddress = x.buf, .Length = (ULONG)size,
                         .MemoryRegionToken = x.token};
            NTSTATUS st;
            NDK_RESULT_EX r;
            while ((st = x.qp->Dispatch->NdkWrite(x.qp, NULL, &g, 1,
                                                  (uint64_t)(uintptr_t)(y.buf + off), y.rtoken,
                                                  NDK_OP_FLAG_SILENT_SUCCESS)) ==
                   STATUS_NO_MORE_ENTRIES)
                x.cq->Dispatch->NdkGetCqResultsEx(x.cq, &r, 1);
            MUST(st == STATUS_SUCCESS);
        }
        rdma_read(&x, &y, 1);
        double el = (double)(now_ns() - t0) / 1e9;
        bps = (double)count * (double)size / el;
        if (pass == 0) {
            double want = case_seconds * bps / (double)size;
            count = want < 50 ? 50 : (uint64_t)want;
        }
    }
    end_close(&x);
    end_close(&y);
    return bps;
}

struct poller {
    struct end *e;
    atomic_bool stop;
};

/* The responder's consumer polls its CQ, as the ping-pong peer does: that drives its receive
 * side, so Read Requests are answered without a progress-thread wake-up. */
static void *cq_poller(void *arg)
{
    struct poller *p = arg;
    NDK_RESULT_EX r[16];
    while (!atomic_load_explicit(&p->stop, memory_order_relaxed))
        p->e->cq->Dispatch->NdkGetCqResultsEx(p->e->cq, r, 16);
    return NULL;
}

/* 64 B RDMA Read round trip, both consumers polling their CQs; median in µs. */
static double read_latency(void)
{
    struct end x, y;
    end_open(&x, SOFTNDK_SPIN_NONE);
    end_open(&y, SOFTNDK_SPIN_NONE);
    connect_ends(&x, &y);
    struct poller py = {.e = &y};
    atomic_init(&py.stop, false);
    pthread_t tp;
    pthread_create(&tp, NULL, cq_poller, &py);
    unsigned iters = 2000;
    for (unsigned i = 0; i < 200; i++)
        rdma_read(&x, &y, 64);
    uint64_t t_start = now_ns();
    for (unsigned i = 0; i < 200; i++)
        rdma_read(&x, &y, 64);
    double per = (double)(now_ns() - t_start) / 200.0;
    double want = case_seconds * 1e9 / per;
    iters = want < 1000 ? 1000 : want > 200000 ? 200000 : (unsigned)want;
    uint64_t *rtt = malloc(iters * sizeof *rtt);
    for (unsigned i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        rdma_read(&x, &y, 64);
        rtt[i] = now_ns() - t0;
    }
    qsort(rtt, iters, sizeof *rtt, cmp_u64);
    double med = (double)rtt[iters / 2] / 1e3;
    free(rtt);
    atomic_store(&py.stop, true);
    pthread_join(tp, NULL);
    end_close(&x);
    end_close(&y);
    return med;
}

int main(int argc, char **argv)
{
    int opt;
    bool cost = false;
    const char *only = NULL; /* -o: one transport's case alone, for a profiler */
    while ((opt = getopt(argc, argv, "t:c:qoT:")) != -1) {
        if (opt == 'q')
            quick = true;
        else if (opt == 'o')
            cost = true;
        else if (opt == 't')
            case_seconds = atof(optarg);
        else if (opt == 'c')
            use_crc = strcmp(optarg, "off") != 0;
        else if (opt == 'T' && (strcmp(optarg, "tcp") == 0 || strcmp(optarg, "shm") == 0))
            only = optarg;
        else {
            fprintf(stderr, "usage: datapath_bench [-t seconds per case] [-c on|off] [-q] "
                            "[-o [-T tcp|shm]]\n");
            return 2;
        }
    }
    if (cost) {
        /* about case_seconds a transport: a message costs well under 10 us on either */
        unsigned n = (unsigned)(case_seconds * 20000);
        printf("softndk's work per 64 B message on one core (CRC %s over TCP, off same-host; "
               "%u messages a round, the least of 5 rounds)\n\n",
               use_crc ? "on" : "off", 2 * n);
        printf("%-34s %14s %14s\n", "case", "per message", "empty poll");
        if (!only || strcmp(only, "tcp") == 0) {
            one_core(false, n);
            one_core_raw(n);
        }
        if (!only || strcmp(only, "shm") == 0)
            one_core(true, n);
        return 0;
    }
    printf("softndk data path vs raw TCP on loopback (CRC %s, %.1f s per case)\n\n",
           use_crc ? "on" : "off", case_seconds);
    printf("%-34s %14s %14s %8s\n", "case", "softndk", "raw TCP", "ratio");
    double s, r;
    s = pingpong(false, false);
    r = pingpong(true, false);
    printf("%-34s %11.2f us %11.2f us %8.2f\n", "64 B ping-pong one-way, polling", s, r, s / r);
    double sb, rb;
    if (quick) {
        stream(false, 1u << 20, 1, &sb);
        stream(true, 1u << 20, 1, &rb);
        printf("%-34s %10.2f GB/s %9.2f GB/s %8.2f\n", "1 MiB Send stream", sb / 1e9, rb / 1e9,
               sb / rb);
        return 0;
    }
    s = pingpong(false, true);
    r = pingpong(true, true);
    printf("%-34s %11.2f us %11.2f us %8.2f\n", "64 B ping-pong one-way, blocking", s, r, s / r);
    stream(false, 65536, 1, &sb);
    stream(true, 65536, 1, &rb);
    printf("%-34s %10.2f GB/s %9.2f GB/s %8.2f\n", "64 KiB Send stream", sb / 1e9, rb / 1e9,
           sb / rb);
    stream(false, 1u << 20, 1, &sb);
    stream(true, 1u << 20, 1, &rb);
    printf("%-34s %10.2f GB/s %9.2f GB/s %8.2f\n", "1 MiB Send stream", sb / 1e9, rb / 1e9,
           sb / rb);
    double m1 = stream(false, 8, 1, &sb);
    double m16 = stream(false, 8, 16, &sb);
    double mr = stream(true, 8, 1, &rb);
    printf("%-34s %9.2f M/s %10.2f M/s %8.2f\n", "8 B message rate, no DEFER", m1 / 1e6,
           mr / 1e6, m1 / mr);
    printf("%-34s %9.2f M/s %10.2f M/s %8.2f\n", "8 B message rate, DEFER chains of 16",
           m16 / 1e6, mr / 1e6, m16 / mr);
    printf("%-34s %9.2f x\n", "DEFER chains vs no DEFER", m16 / m1);
    /* One-sided: the same run's raw TCP and Send figures are the references. */
    double wb, sendb;
    wb = write_stream(65536);
    stream(false, 65536, 1, &sendb);
    stream(true, 65536, 1, &rb);
    printf("%-34s %10.2f GB/s %9.2f GB/s %8.2f  (Send %.2f GB/s, Write/Send %.2f)\n",
           "64 KiB RDMA Write stream", wb / 1e9, rb / 1e9, wb / rb, sendb / 1e9, wb / sendb);
    wb = write_stream(1u << 20);
    stream(false, 1u << 20, 1, &sendb);
    stream(true, 1u << 20, 1, &rb);
    printf("%-34s %10.2f GB/s %9.2f GB/s %8.2f  (Send %.2f GB/s, Write/Send %.2f)\n",
           "1 MiB RDMA Write stream", wb / 1e9, rb / 1e9, wb / rb, sendb / 1e9, wb / sendb);
    double rl = read_latency();
    s = pingpong(false, false);
    r = pingpong(true, false);
    printf("%-34s %11.2f us %11.2f us %8.2f  (Send ping-pong round trip %.2f us, Read/Send %.2f)\n",
           "64 B RDMA Read round trip, polling", rl, 2 * r, rl / (2 * r), 2 * s, rl / (2 * s));
    return 0;
}
