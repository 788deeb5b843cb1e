/* ndkperf connection set-up: one side's objects
 * (adapter, PD, MR over one region, a CQ and a QP per connection), listen / accept / connect
 * with the option block in the MPA private data, and the bounded teardown. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ndkperf.h"

static bool printable(const char *p, ULONG n)
{
    for (ULONG i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e)
            return false;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Waiting for one request completion */

struct waiter {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
    NTSTATUS st;
};

static void waiter_init(struct waiter *w)
{
    pthread_mutex_init(&w->m, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->c, &ca);
    pthread_condattr_destroy(&ca);
    w->done = false;
    w->st = STATUS_PENDING;
}

static void waiter_destroy(struct waiter *w)
{
    pthread_mutex_destroy(&w->m);
    pthread_cond_destroy(&w->c);
}

static void waiter_cb(void *ctx, NTSTATUS st)
{
    struct waiter *w = ctx;
    pthread_mutex_lock(&w->m);
    w->st = st;
    w->done = true;
    pthread_cond_broadcast(&w->c);
    pthread_mutex_unlock(&w->m);
}

static void close_cb(void *ctx)
{
    waiter_cb(ctx, STATUS_SUCCESS);
}

static void deadline_in(struct timespec *ts, uint32_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* st: what the call returned. STATUS_PENDING: wait for the callback (up to ms; the watchdog
 * bounds the run anyway); STATUS_TIMEOUT when it did not come. */
static NTSTATUS waiter_wait(struct waiter *w, NTSTATUS st, uint32_t ms)
{
    if (st != STATUS_PENDING)
        return st;
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&w->m);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->c, &w->m, &ts);
    NTSTATUS r = w->done ? w->st : STATUS_TIMEOUT;
    pthread_mutex_unlock(&w->m);
    return r;
}

static void close_obj(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *h, const char *what)
{
    struct waiter w;
    waiter_init(&w);
    set_phase("closing the %s", what);
    NTSTATUS st = fn(h, close_cb, &w);
    if (st != STATUS_SUCCESS && st != STATUS_PENDING)
        die_status(what, st, "close failed");
    /* A pending close completes once its successors are closed; the watchdog bounds it. */
    while (waiter_wait(&w, st, 1000) == STATUS_TIMEOUT)
        ;
    waiter_destroy(&w);
}

/* ------------------------------------------------------------------------------------------ */
/* Callbacks */

static void event_signal(struct side *s)
{
    atomic_fetch_add_explicit(&s->ev_count, 1, memory_order_release);
    futex_wake_all(&s->ev_count);
}

static void on_cq(void *ctx, NTSTATUS st)
{
    struct side *s = ctx;
    if (st != STATUS_SUCCESS) {
        atomic_store(&s->ev_status, st);
        futex_wake_all(&s->cb_mode); /* a --callback thread looks at ev_status */
    } else if (s->on_notify && s->on_notify(s)) {
        return; /* --callback: the work was done here, nobody waits for this one */
    }
    event_signal(s);
}

static void on_connect_event(void *ctx, NDK_CONNECTOR *c)
{
    struct side *s = ctx;
    pthread_mutex_lock(&s->conn_lock);
    if (s->n_incoming < sizeof s->incoming / sizeof s->incoming[0])
        s->incoming[s->n_incoming++] = c;
    else
        c->Dispatch->NdkCloseConnector(&c->Header, NULL, NULL), (void)0;
    pthread_cond_broadcast(&s->conn_cond);
    pthread_mutex_unlock(&s->conn_lock);
}

static void on_disconnect(void *ctx)
{
    struct qpctx *q = ctx;
    atomic_store(&q->peer_gone, true);
    event_signal(q->side);
}

static void create_never(void *ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)st, (void)obj;
    die(EXIT_FAIL, "internal: a create pended although it returned inline");
}

/* ------------------------------------------------------------------------------------------ */
/* Set-up */

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

void side_init(struct side *s, const struct opts *o, bool is_server)
{
    memset(s, 0, sizeof *s);
    s->o = o;
    s->is_server = is_server;
    s->role = is_server ? "server" : "client";
    s->cpu = -1;
    pthread_mutex_init(&s->conn_lock, NULL);
    cond_init_mono(&s->conn_cond);
}

void side_pin(struct side *s, int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0)
        die(EXIT_FAIL, "cannot pin the %s to CPU %d: %s", s->role, cpu, strerror(rc));
    s->cpu = cpu;
}

#define AREA_CAP (128u << 20) /* memory of one kind of buffer per QP, with -c */
#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}
static uint32_t max_u32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

/* Queue and buffer sizes: a function of the agreed options only, so both sides compute the same
 * numbers for themselves and for their peer (the sender's credits are the receiver's slots). */
static void plan_qp(const struct side *s, struct qpctx *q)
{
    const struct opts *o = s->o;
    uint32_t max = s->max_size;
    uint32_t fit = max_u32(4, AREA_CAP / max);
    bool send = test_is_send(o->test);
    bool recv_role = s->is_server || o->bidir;
    uint32_t r = 0;
    if (send) {
        r = o->rx_depth;
        if (o->verify)
            r = min_u32(r, fit);
        if (o->test == T_SEND_LAT)
            r = max_u32(r, 1);
    }
    q->peer_data_slots = r;
    q->credit_batch = max_u32(1, r / 4);
    uint32_t ctrl = (r ? r / q->credit_batch : 0) + 6;
    q->rx_data_slots = (send && recv_role) || o->test == T_SEND_LAT ? r : 0;
    q->rx_ctrl_slots = ctrl;
    q->rq_depth = q->rx_data_slots + q->rx_ctrl_slots;
    q->ctrl_out_max = ctrl + 2;
    q->sq_depth = o->tx_depth + q->ctrl_out_max;
    q->tx_slots = o->verify ? min_u32(o->tx_depth, fit) : 1;
    q->tx_slots = max_u32(q->tx_slots, 1);
    q->rx_shared = !o->verify || !send;
    q->rx_slot_len = send ? max_u32(max, 64) : 64;
    bool rdma = !send;
    q->land_slots = rdma ? (o->verify ? min_u32(64, fit) : 1) : 0;
    if (o->test == T_WRITE_LAT)
        q->land_slots = 1;
}

static size_t qp_bytes(const struct qpctx *q, uint32_t max, bool read_test)
{
    size_t tx = ALIGN_UP((size_t)q->tx_slots * max_u32(max, 64), 4096);
    size_t rx = ALIGN_UP((size_t)(q->rx_shared ? 1 : q->rq_depth) * q->rx_slot_len, 4096);
    size_t sink = read_test ? ALIGN_UP((size_t)q->tx_slots * max, 4096) : 0;
    size_t land = ALIGN_UP((size_t)q->land_slots * max, 4096);
    return tx + rx + sink + land;
}

static void carve(struct qpctx *q, uint8_t *base, uint32_t max, bool read_test)
{
    size_t tx = ALIGN_UP((size_t)q->tx_slots * max_u32(max, 64), 4096);
    size_t rx = ALIGN_UP((size_t)(q->rx_shared ? 1 : q->rq_depth) * q->rx_slot_len, 4096);
    size_t sink = read_test ? ALIGN_UP((size_t)q->tx_slots * max, 4096) : 0;
    q->tx = base;
    q->rx = base + tx;
    q->sink = read_test ? base + tx + rx : NULL;
    q->land = q->land_slots ? base + tx + rx + sink : NULL;
}

/* The landing area of an RDMA test is the only memory the peer may touch: remote read for the
 * Read tests (the peer reads it), remote write (with the local write it needs) for the Write
 * tests; one MR per QP, over just that area. */
static void register_land(struct side *s, struct qpctx *q, bool read_test)
{
    if (!q->land)
        return;
    NTSTATUS st = s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, create_never, NULL, &q->land_mr);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateMr", st, NULL);
    size_t len = (size_t)q->land_slots * s->max_size;
    MDL mdl;
    MmInitializeMdl(&mdl, q->land, len);
    ULONG flags = read_test ? NDK_MR_FLAG_ALLOW_REMOTE_READ
                            : NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    struct waiter w;
    waiter_init(&w);
    st = q->land_mr->Dispatch->NdkRegisterMr(q->land_mr, &mdl, len, flags, waiter_cb, &w);
    st = waiter_wait(&w, st, 10000);
    waiter_destroy(&w);
    if (st != STATUS_SUCCESS)
        die_status("NdkRegisterMr (landing area)", st, NULL);
    q->land_token = q->land_mr->Dispatch->NdkGetRemoteTokenFromMr(q->land_mr);
}

void side_open(struct side *s)
{
    const struct opts *o = s->o;
    set_phase("%s: opening the adapter", s->role);
    if (o->ifname) {
        s->ifindex = if_nametoindex(o->ifname);
        if (!s->ifindex)
            die(EXIT_FAIL, "no network interface named '%s' (-d)", o->ifname);
    } else if (o->loopback && !o->one_device && !o->bind_addr && s->is_server) {
        /* Two hosts have a device each: adapters of one interface are one device (one set of
         * progress threads, docs/adapter.md), so the server side opens on lo (it listens on
         * 127.0.0.1) and the client on every address, which is another interface. */
        s->ifindex = if_nametoindex("lo");
    }
    SOFTNDK_OPTIONS so;
    SoftNdkInitOptions(&so);
    so.MpaRevision = o->mpa_rev;
    so.Crc = o->crc == 1 ? SoftNdkCrcOn : o->crc == 2 ? SoftNdkCrcOff : SoftNdkCrcDefault;
    NDK_VERSION v = {2, 0};
    NTSTATUS st = SoftNdkOpenAdapter(s->ifindex, v, &so, &s->adapter);
    if (st != STATUS_SUCCESS)
        die_status("SoftNdkOpenAdapter", st, NULL);
    ULONG len = sizeof s->info;
    st = s->adapter->Dispatch->NdkQueryAdapterInfo(s->adapter, &s->info, &len);
    if (st != STATUS_SUCCESS)
        die_status("NdkQueryAdapterInfo", st, NULL);

    s->max_size = o->size;
    if (s->max_size > s->info.MaxTransferLength)
        die(EXIT_FAIL, "%s: -s %u is above the adapter's MaxTransferLength %u", test_name(o->test),
            s->max_size, s->info.MaxTransferLength);
    if (o->inline_size == NDKPERF_INLINE_DEFAULT) {
        /* As perftest's latency tests (ib_send_lat 236 bytes, ib_write_lat 220, the bandwidth
         * and Read tests none), within what the adapter takes; and as libfabric's pingpong
         * injects small messages. docs/tools.md. */
        uint32_t want = o->test == T_SEND_LAT ? 236u : o->test == T_WRITE_LAT ? 220u : 0u;
        s->inline_size = want < s->info.MaxInlineDataSize ? want : s->info.MaxInlineDataSize;
    } else {
        s->inline_size = o->inline_size;
        if (s->inline_size > s->info.MaxInlineDataSize)
            die(EXIT_FAIL, "%s: -I %u is above the adapter's MaxInlineDataSize %u",
                test_name(o->test), s->inline_size, s->info.MaxInlineDataSize);
    }

    st = s->adapter->Dispatch->NdkCreatePd(s->adapter, create_never, NULL, &s->pd);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreatePd", st, NULL);

    s->nqps = o->num_qps;
    s->qps = calloc(s->nqps, sizeof *s->qps);
    if (!s->qps)
        die(EXIT_FAIL, "out of memory");
    bool read_test = o->test == T_READ_BW || o->test == T_READ_LAT;
    size_t total = 0;
    for (unsigned i = 0; i < s->nqps; i++) {
        struct qpctx *q = &s->qps[i];
        q->side = s;
        q->index = i;
        plan_qp(s, q);
        if (q->rq_depth > s->info.MaxReceiveQueueDepth || q->sq_depth > s->info.MaxInitiatorQueueDepth)
            die(EXIT_FAIL, "%s: queue depths %u/%u above the adapter's %u/%u (-r/-t)",
                test_name(o->test), q->rq_depth, q->sq_depth, s->info.MaxReceiveQueueDepth,
                s->info.MaxInitiatorQueueDepth);
        total += qp_bytes(q, s->max_size, read_test);
    }
    s->region_len = total;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        die(EXIT_FAIL, "cannot map %zu bytes of buffers: %s", total, strerror(errno));
    s->region = mem;
    memset(s->region, 0xA5, total); /* fault every page in before measuring */
    size_t off = 0;
    for (unsigned i = 0; i < s->nqps; i++) {
        struct qpctx *q = &s->qps[i];
        carve(q, s->region + off, s->max_size, read_test);
        off += qp_bytes(q, s->max_size, read_test);
        if (q->land) {
            memset(q->land, 0, (size_t)q->land_slots * s->max_size);
            if (read_test)
                for (uint32_t j = 0; j < q->land_slots; j++)
                    pattern_fill(q->land + (size_t)j * s->max_size, s->max_size, j, i);
        }
    }

    st = s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, create_never, NULL, &s->mr);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateMr", st, NULL);
    MDL mdl;
    MmInitializeMdl(&mdl, s->region, total);
    struct waiter w;
    waiter_init(&w);
    /* The whole region for local SGEs only; the peer reaches nothing of it but the landing
     * areas, registered again below with just the right the test needs. */
    st = s->mr->Dispatch->NdkRegisterMr(s->mr, &mdl, total, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                        waiter_cb, &w);
    st = waiter_wait(&w, st, 10000);
    waiter_destroy(&w);
    if (st != STATUS_SUCCESS)
        die_status("NdkRegisterMr", st, NULL);
    s->token = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr);
    for (unsigned i = 0; i < s->nqps; i++)
        register_land(s, &s->qps[i], read_test);

    for (unsigned i = 0; i < s->nqps; i++) {
        struct qpctx *q = &s->qps[i];
        ULONG cqd = q->rq_depth + q->sq_depth + 16;
        st = s->adapter->Dispatch->NdkCreateCq(s->adapter, cqd, on_cq, s, NULL, create_never, NULL,
                                               &q->cq);
        if (st != STATUS_SUCCESS)
            die_status("NdkCreateCq", st, NULL);
        ULONG rsge = 1, isge = 1;
        st = s->pd->Dispatch->NdkCreateQp(s->pd, q->cq, q->cq, q, q->rq_depth, q->sq_depth, rsge,
                                          isge, s->inline_size, create_never, NULL, &q->qp);
        if (st != STATUS_SUCCESS)
            die_status("NdkCreateQp", st, NULL);
        for (uint32_t k = 0; k < q->rq_depth; k++)
            post_recv(q, k);
    }
}

void post_recv(struct qpctx *q, uint32_t slot)
{
    NDK_SGE sge;
    sge.VirtualAddress = q->rx + (q->rx_shared ? 0 : (size_t)slot * q->rx_slot_len);
    sge.Length = (ULONG)q->rx_slot_len;
    sge.MemoryRegionToken = q->side->token;
    NTSTATUS st = q->qp->Dispatch->NdkReceive(q->qp, (PVOID)(uintptr_t)slot, &sge, 1);
    if (st != STATUS_SUCCESS)
        die_status("NdkReceive", st, NULL);
}

NDK_RESULT_EX *next_completion(struct qpctx *q)
{
    if (q->held_i < q->held_n)
        return &q->held[q->held_i++];
    q->held_i = q->held_n = 0;
    return next_cq_completion(q);
}

NDK_RESULT_EX *next_cq_completion(struct qpctx *q)
{
    if (q->res_i < q->res_n)
        return &q->res[q->res_i++];
    q->res_i = 0;
    q->res_n = q->cq->Dispatch->NdkGetCqResultsEx(q->cq, q->res, RESULT_BATCH);
    if (!q->res_n)
        return NULL;
    if (test_is_bw(q->side->o->test))
        q->polled_ns = now_ns();
    return &q->res[q->res_i++];
}

bool completions_drained(const struct qpctx *q)
{
    return q->held_i >= q->held_n && q->res_i >= q->res_n && q->res_n < RESULT_BATCH;
}

void hold_completion(struct qpctx *q, const NDK_RESULT_EX *r)
{
    if (q->held_n == q->held_cap) {
        unsigned cap = q->held_cap ? q->held_cap * 2 : 16;
        NDK_RESULT_EX *n = realloc(q->held, cap * sizeof *n);
        if (!n)
            die(EXIT_FAIL, "out of memory");
        q->held = n;
        q->held_cap = cap;
    }
    q->held[q->held_n++] = *r;
}

unsigned side_arm(struct side *s)
{
    unsigned seen = atomic_load_explicit(&s->ev_count, memory_order_acquire);
    for (unsigned i = 0; i < s->nqps; i++)
        s->qps[i].cq->Dispatch->NdkArmCq(s->qps[i].cq, NDK_CQ_NOTIFY_ANY);
    return seen;
}

void side_wait_event(struct side *s, unsigned seen)
{
    struct timespec ts;
    deadline_in(&ts, 1000);
    bool timed_out = false;
    while (atomic_load_explicit(&s->ev_count, memory_order_acquire) == seen) {
        struct timespec now, left;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long ns = (long long)(ts.tv_sec - now.tv_sec) * 1000000000LL + (ts.tv_nsec - now.tv_nsec);
        if (ns <= 0) {
            timed_out = true;
            break;
        }
        left.tv_sec = (time_t)(ns / 1000000000LL);
        left.tv_nsec = (long)(ns % 1000000000LL);
        /* returns at once if the count moved since it was read */
        syscall(SYS_futex, &s->ev_count, FUTEX_WAIT_PRIVATE, seen, &left, NULL, 0);
    }
    NTSTATUS st = atomic_load(&s->ev_status);
    if (timed_out)
        s->ev_timeouts++;
    if (st != STATUS_SUCCESS)
        die_status("CQ notification", st, "the CQ overran or failed");
}

/* ------------------------------------------------------------------------------------------ */
/* Addresses */

static socklen_t resolve(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0 || !res)
        die(EXIT_FAIL, "cannot resolve '%s': %s", host, gai_strerror(rc));
    memset(ss, 0, sizeof *ss);
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    socklen_t len = res->ai_addrlen;
    freeaddrinfo(res);
    return len;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/* The local address the kernel would use to reach dst (a UDP connect sends nothing). */
static socklen_t source_for(const struct sockaddr_storage *dst, socklen_t dlen,
                            struct sockaddr_storage *src)
{
    int fd = socket(dst->ss_family, SOCK_DGRAM, 0);
    socklen_t len = sizeof *src;
    if (fd < 0 || connect(fd, (const struct sockaddr *)dst, dlen) != 0 ||
        getsockname(fd, (struct sockaddr *)src, &len) != 0)
        die(EXIT_FAIL, "no route to the server: %s", strerror(errno));
    close(fd);
    set_port(src, 0);
    return len;
}

static void fill_addresses(struct qpctx *q)
{
    ULONG len = sizeof q->local;
    q->conn->Dispatch->NdkGetLocalAddress(q->conn, (struct sockaddr *)&q->local, &len);
    len = sizeof q->peer;
    q->conn->Dispatch->NdkGetPeerAddress(q->conn, (struct sockaddr *)&q->peer, &len);
}

static ULONG read_limit(const struct side *s)
{
    ULONG v = s->o->outs;
    if (v > s->info.MaxInboundReadLimit)
        v = s->info.MaxInboundReadLimit;
    if (v > s->info.MaxOutboundReadLimit)
        v = s->info.MaxOutboundReadLimit;
    return v;
}

static size_t my_wire(const struct side *s, const struct qpctx *q, uint8_t flags, uint8_t *buf,
                      size_t cap)
{
    struct wire_opts w;
    wire_from_opts(s->o, &w);
    w.qp_index = (uint16_t)q->index;
    w.flags |= flags;
    if (q->land) {
        w.land_addr = (uint64_t)(uintptr_t)q->land;
        w.land_len = (uint64_t)q->land_slots * s->max_size;
        w.land_token = q->land_token;
    }
    return wire_encode(&w, buf, cap);
}

static void take_peer(struct qpctx *q, const struct wire_opts *w)
{
    q->peer_opts = *w;
    q->remote_land = w->land_addr;
    q->remote_land_len = w->land_len;
    q->remote_token = w->land_token;
}

/* ------------------------------------------------------------------------------------------ */
/* Server */

void side_listen(struct side *s)
{
    const struct opts *o = s->o;
    NTSTATUS st = s->adapter->Dispatch->NdkCreateListener(s->adapter, on_connect_event, s,
                                                          create_never, NULL, &s->listener);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateListener", st, NULL);
    struct sockaddr_storage ss;
    socklen_t len;
    const char *bind_addr = o->bind_addr ? o->bind_addr : o->loopback ? "127.0.0.1" : "0.0.0.0";
    len = resolve(bind_addr, o->port, &ss);
    set_phase("server: listening on %s port %u", bind_addr, o->port);
    struct waiter w;
    waiter_init(&w);
    st = s->listener->Dispatch->NdkListen(s->listener, (struct sockaddr *)&ss, len, waiter_cb, &w);
    st = waiter_wait(&w, st, 10000);
    waiter_destroy(&w);
    if (st != STATUS_SUCCESS) {
        char a[80];
        char hint[128];
        snprintf(hint, sizeof hint, "cannot listen on %s%s", sockaddr_text(&ss, a, sizeof a),
                 st == STATUS_SHARING_VIOLATION ? ": the port is in use (-p)" : "");
        die_status("NdkListen", st, st == STATUS_NOT_SUPPORTED || st == STATUS_NOT_IMPLEMENTED
                                        ? "connections not supported by this provider build"
                                        : hint);
    }
    struct sockaddr_storage got;
    ULONG glen = sizeof got;
    st = s->listener->Dispatch->NdkGetLocalAddress(s->listener, (struct sockaddr *)&got, &glen);
    if (st != STATUS_SUCCESS)
        die_status("NdkGetLocalAddress (listener)", st, NULL);
    s->listen_port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                    : ((struct sockaddr_in6 *)&got)->sin6_port);
    if (!o->loopback) {
        char a[80];
        fprintf(stderr, "ndkperf: %s server listening on %s\n", test_name(o->test),
                sockaddr_text(&got, a, sizeof a));
        fflush(stderr);
    }
}

static NDK_CONNECTOR *next_incoming(struct side *s)
{
    pthread_mutex_lock(&s->conn_lock);
    while (s->n_incoming == 0)
        pthread_cond_wait(&s->conn_cond, &s->conn_lock); /* the watchdog bounds this */
    NDK_CONNECTOR *c = s->incoming[0];
    s->n_incoming--;
    memmove(s->incoming, s->incoming + 1, s->n_incoming * sizeof s->incoming[0]);
    pthread_mutex_unlock(&s->conn_lock);
    return c;
}

void side_accept(struct side *s)
{
    const struct opts *o = s->o;
    unsigned accepted = 0;
    bool *taken = calloc(s->nqps, sizeof *taken);
    while (accepted < s->nqps) {
        set_phase("server: waiting for connection %u of %u on port %u", accepted + 1, s->nqps,
                  s->listen_port);
        NDK_CONNECTOR *c = next_incoming(s);
        set_phase("server: answering a connection request");
        uint8_t pd[256];
        ULONG pdlen = sizeof pd, ird = 0, ord = 0;
        NTSTATUS st = c->Dispatch->NdkGetConnectionData(c, &ird, &ord, pd, &pdlen);
        if (st != STATUS_SUCCESS)
            die_status("NdkGetConnectionData", st, NULL);
        struct wire_opts theirs;
        const char *why = NULL;
        if (wire_decode(pd, pdlen, &theirs, &why) != 0 || theirs.qp_index >= s->nqps ||
            taken[theirs.qp_index]) {
            if (!why)
                why = "the client's QP index is out of range or repeated";
            static const char msg[] = "not an ndkperf client of this test";
            c->Dispatch->NdkReject(c, msg, sizeof msg);
            close_obj(c->Dispatch->NdkCloseConnector, &c->Header, "connector");
            fprintf(stderr, "ndkperf: rejected a connection: %s\n", why);
            continue;
        }
        struct wire_opts mine;
        wire_from_opts(o, &mine);
        char diff[400];
        bool agree = wire_agree(&mine, &theirs, diff, sizeof diff);
        struct qpctx *q = &s->qps[theirs.qp_index];
        q->conn = c;
        take_peer(q, &theirs);
        ULONG lim = read_limit(s);
        q->ird = ird < lim ? ird : lim;
        q->ord = ord < lim ? ord : lim;
        uint8_t out[WIRE_LEN];
        size_t outlen = my_wire(s, q, agree ? 0 : WF_MISMATCH, out, sizeof out);
        struct waiter w;
        waiter_init(&w);
        st = c->Dispatch->NdkAccept(c, q->qp, lim, lim, out, (ULONG)outlen, on_disconnect, q,
                                    waiter_cb, &w);
        st = waiter_wait(&w, st, 15000);
        waiter_destroy(&w);
        if (!agree)
            die(EXIT_FAIL, "options do not agree between server and client: %s", diff);
        if (st != STATUS_SUCCESS)
            die_status("NdkAccept", st, NULL);
        fill_addresses(q);
        taken[theirs.qp_index] = true;
        accepted++;
    }
    free(taken);
}

/* ------------------------------------------------------------------------------------------ */
/* Client */

void side_connect(struct side *s, const char *host, uint16_t port)
{
    const struct opts *o = s->o;
    struct sockaddr_storage dst, src;
    socklen_t dlen = resolve(host, port, &dst), slen;
    if (o->bind_addr)
        slen = resolve(o->bind_addr, 0, &src);
    else
        slen = source_for(&dst, dlen, &src);
    char da[80];
    sockaddr_text(&dst, da, sizeof da);
    for (unsigned i = 0; i < s->nqps; i++) {
        struct qpctx *q = &s->qps[i];
        set_phase("client: connecting QP %u to %s", i, da);
        NTSTATUS st = s->adapter->Dispatch->NdkCreateConnector(s->adapter, create_never, NULL,
                                                               &q->conn);
        if (st != STATUS_SUCCESS)
            die_status("NdkCreateConnector", st, NULL);
        uint8_t out[WIRE_LEN];
        size_t outlen = my_wire(s, q, 0, out, sizeof out);
        ULONG lim = read_limit(s);
        struct waiter w;
        waiter_init(&w);
        st = q->conn->Dispatch->NdkConnect(q->conn, q->qp, (struct sockaddr *)&src, slen,
                                           (struct sockaddr *)&dst, dlen, lim, lim, out,
                                           (ULONG)outlen, waiter_cb, &w);
        st = waiter_wait(&w, st, 30000);
        waiter_destroy(&w);
        if (st != STATUS_SUCCESS) {
            char hint[240];
            char why[64];
            ULONG whylen = sizeof why - 1, wird = 0, word = 0;
            /* A peer that refused in the MPA exchange may have said why (a reject's private
             * data, e.g. "softndk: injected fault"); show it when it is text. */
            bool said = st == STATUS_CONNECTION_REFUSED &&
                        q->conn->Dispatch->NdkGetConnectionData(q->conn, &wird, &word, why,
                                                                &whylen) == STATUS_SUCCESS &&
                        whylen > 0 && printable(why, whylen);
            if (said) {
                why[whylen] = '\0';
                snprintf(hint, sizeof hint, "%s refused: \"%s\"", da, why);
            } else if (st == STATUS_CONNECTION_REFUSED)
                snprintf(hint, sizeof hint,
                         "nobody accepts at %s: start 'ndkperf %s' there first", da,
                         test_name(o->test));
            else if (st == STATUS_IO_TIMEOUT || st == STATUS_TIMEOUT)
                snprintf(hint, sizeof hint, "no answer from %s", da);
            else if (st == STATUS_NOT_SUPPORTED || st == STATUS_NOT_IMPLEMENTED)
                snprintf(hint, sizeof hint, "connections not supported by this provider build");
            else
                snprintf(hint, sizeof hint, "connecting to %s", da);
            die_status("NdkConnect", st, hint);
        }
        uint8_t pd[256];
        ULONG pdlen = sizeof pd, ird = 0, ord = 0;
        st = q->conn->Dispatch->NdkGetConnectionData(q->conn, &ird, &ord, pd, &pdlen);
        if (st != STATUS_SUCCESS)
            die_status("NdkGetConnectionData", st, NULL);
        struct wire_opts theirs, mine;
        const char *why = NULL;
        if (wire_decode(pd, pdlen, &theirs, &why) != 0) {
            q->conn->Dispatch->NdkReject(q->conn, NULL, 0);
            die(EXIT_FAIL, "%s: %s", da, why);
        }
        wire_from_opts(o, &mine);
        char diff[400];
        if (!wire_agree(&theirs, &mine, diff, sizeof diff) || (theirs.flags & WF_MISMATCH)) {
            q->conn->Dispatch->NdkReject(q->conn, NULL, 0);
            die(EXIT_FAIL, "options do not agree between server and client: %s",
                diff[0] ? diff : "the server says so");
        }
        take_peer(q, &theirs);
        q->ird = ird;
        q->ord = ord;
        waiter_init(&w);
        st = q->conn->Dispatch->NdkCompleteConnect(q->conn, on_disconnect, q, waiter_cb, &w);
        st = waiter_wait(&w, st, 15000);
        waiter_destroy(&w);
        if (st != STATUS_SUCCESS)
            die_status("NdkCompleteConnect", st, NULL);
        fill_addresses(q);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Teardown */

void side_close(struct side *s)
{
    for (unsigned i = 0; i < s->nqps; i++) {
        struct qpctx *q = &s->qps[i];
        if (!q->conn)
            continue;
        if (s->is_server) {
            /* The client disconnects first; wait (bounded) for its disconnect to arrive. */
            set_phase("server: waiting for the client to disconnect QP %u", i);
            uint64_t until = now_ns() + 5000000000ull;
            while (!atomic_load(&q->peer_gone) && now_ns() < until) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
        }
        set_phase("%s: disconnecting QP %u", s->role, i);
        struct waiter w;
        waiter_init(&w);
        NTSTATUS st = q->conn->Dispatch->NdkDisconnect(q->conn, waiter_cb, &w);
        st = waiter_wait(&w, st, 15000);
        waiter_destroy(&w);
        if (st != STATUS_SUCCESS && st != STATUS_CONNECTION_INVALID && s->o->verbose)
            fprintf(stderr, "ndkperf: %s: NdkDisconnect: %s\n", s->role, SoftNdkStatusName(st));
        close_obj(q->conn->Dispatch->NdkCloseConnector, &q->conn->Header, "connector");
        q->conn = NULL;
    }
    for (unsigned i = 0; i < s->nqps; i++) {
        struct qpctx *q = &s->qps[i];
        if (q->qp)
            close_obj(q->qp->Dispatch->NdkCloseQp, &q->qp->Header, "QP");
        if (q->cq)
            close_obj(q->cq->Dispatch->NdkCloseCq, &q->cq->Header, "CQ");
        if (q->land_mr)
            close_obj(q->land_mr->Dispatch->NdkCloseMr, &q->land_mr->Header, "MR");
        q->land_mr = NULL;
        free(q->held);
        q->held = NULL;
        q->qp = NULL;
        q->cq = NULL;
    }
    if (s->mr)
        close_obj(s->mr->Dispatch->NdkCloseMr, &s->mr->Header, "MR");
    if (s->pd)
        close_obj(s->pd->Dispatch->NdkClosePd, &s->pd->Header, "PD");
    if (s->listener)
        close_obj(s->listener->Dispatch->NdkCloseListener, &s->listener->Header, "listener");
    s->mr = NULL;
    s->pd = NULL;
    s->listener = NULL;
    if (s->adapter) {
        set_phase("%s: closing the adapter", s->role);
        SoftNdkCloseAdapter(s->adapter);
        s->adapter = NULL;
    }
    if (s->region)
        munmap(s->region, s->region_len);
    s->region = NULL;
}
