/* ndkperf --perftest: perftest's own exchange (`ib_*_bw -R`, `ib_*_lat -R`, the 4.5 series, which
 * calls itself 6.06), so that perftest on a Linux host (siw, an iWARP NIC) and ndkperf run
 * against each other in both directions (docs/tools.md#ndkperf---perftest, docs/interop.md).
 *
 * The exchange, as perftest speaks it with -R (described in our own words):
 *   - two connections to the same port: first a "communication" connection (no private data,
 *     IRD/ORD 0) that replaces perftest's TCP socket, then the data connection(s) of the test;
 *   - on the communication connection every exchange is a pair: the client Sends its message,
 *     the server receives it and Sends its own. Each side keeps one 56-byte receive posted, so
 *     there is never more than one message in flight per direction;
 *   - the pairs, in order: the version (16 bytes, a string; perftest refuses a peer below
 *     "5.70"), the cycle buffer and the cache line size (4 bytes each, big-endian, both sides
 *     take the larger), the MTU (2 bytes, a decimal string of the verbs MTU enum), one
 *     "destination" pair; then the client opens the data connection (retrying while the server
 *     is not yet listening again); another destination pair; then the test's own pairs (below);
 *   - a destination is 56 bytes: lid, out_reads, qpn, psn, rkey (4 bytes each, big-endian),
 *     4 bytes of padding, vaddr (8, big-endian), a 16-byte GID, srqn and gid_index (4 each).
 *     The peer RDMA Writes / Reads at {vaddr, rkey} of the last one received;
 *   - BW tests report in five 8-byte pairs (size, iterations, peak and average bandwidth, message
 *     rate; integers big-endian, doubles byte-swapped) after one more destination pair;
 *   - the server of write_lat writes first; send_lat's client sends first; in the read and the
 *     BW tests only the client acts.
 * ndkperf's side of it is a script per test (the steps below) walked by one thread. */
#include <arpa/inet.h>
#include <endian.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ndkperf.h"

#define PT_VERSION        "6.06" /* what Debian 12's perftest 4.5-0.17 sends */
#define PT_VERSION_LEN    16
#define PT_DEST_LEN       56
#define PT_SLOT           64 /* one communication message buffer */
#define PT_COMM_RECVS     4
#define PT_CYCLE_BUFFER   4096
#define PT_CACHE_LINE     64
#define PT_MTU_ENUM       "5" /* IBV_MTU_4096: the peer keeps its own (it takes the smaller) */
#define PT_CONNECT_TRIES  100
#define PT_MAX_RECV_DEPTH 1024

/* One step of the exchange: the pairs on the communication connection and the local actions
 * between them. */
enum pt_step {
    PT_VERSION_PAIR,
    PT_CYCLE_BUFFER_PAIR,
    PT_CACHE_LINE_PAIR,
    PT_MTU_PAIR,
    PT_DEST_PAIR,
    PT_DATA_CONNECT,  /* local: the data connection */
    PT_POST_RECEIVES, /* local: the Send tests' receives, before the last pair */
    PT_RUN,           /* local: the measured loop (nothing on the passive side) */
    PT_REPORT_SIZE,
    PT_REPORT_ITERS,
    PT_REPORT_BW_PEAK,
    PT_REPORT_BW_AVG,
    PT_REPORT_MSG_RATE,
    PT_DONE,
    PT_STEP_COUNT
};
static const char *const step_names[PT_STEP_COUNT] = {
    "version",         "cycle-buffer", "cache-line",     "mtu",
    "destination",     "data-connect", "post-receives",  "run",
    "report-size",     "report-iters", "report-bw-peak", "report-bw-avg",
    "report-msg-rate", "done"};

#define COMMON                                                                                     \
    PT_VERSION_PAIR, PT_CYCLE_BUFFER_PAIR, PT_CACHE_LINE_PAIR, PT_MTU_PAIR, PT_DEST_PAIR,          \
        PT_DATA_CONNECT, PT_DEST_PAIR
#define REPORTS                                                                                    \
    PT_REPORT_SIZE, PT_REPORT_ITERS, PT_REPORT_BW_PEAK, PT_REPORT_BW_AVG, PT_REPORT_MSG_RATE
/* The scripts, per test, for one QP (perftest's order; both roles walk the same one). */
static const enum pt_step script_rdma_bw[] = {COMMON,       PT_DEST_PAIR, PT_DEST_PAIR,
                                              PT_DEST_PAIR, PT_RUN,       PT_DEST_PAIR,
                                              REPORTS,      PT_DEST_PAIR, PT_DONE};
static const enum pt_step script_send[] = {COMMON,       PT_DEST_PAIR,     PT_DEST_PAIR,
                                           PT_DEST_PAIR, PT_POST_RECEIVES, PT_DEST_PAIR,
                                           PT_RUN,       PT_DEST_PAIR,     PT_DONE};
static const enum pt_step script_write_lat[] = {
    COMMON, PT_DEST_PAIR, PT_DEST_PAIR, PT_DEST_PAIR, PT_DEST_PAIR, PT_RUN, PT_DONE};
static const enum pt_step script_read_lat[] = {
    COMMON, PT_DEST_PAIR, PT_DEST_PAIR, PT_DEST_PAIR, PT_DEST_PAIR, PT_RUN, PT_DEST_PAIR, PT_DONE};

struct pt_dest {
    uint32_t out_reads, qpn, rkey;
    uint64_t vaddr;
};

struct pt_conn {
    NDK_CONNECTOR *conn;
    atomic_bool peer_gone;
};

struct pt {
    const struct opts *o;
    bool server;
    const char *role;
    NDK_ADAPTER *a;
    NDK_PD *pd;
    /* the communication connection */
    NDK_CQ *comm_cq;
    NDK_QP *comm_qp;
    NDK_MR *comm_mr;
    UINT32 comm_tok;
    uint8_t *comm_buf; /* PT_COMM_RECVS receive slots, then one send slot */
    struct pt_conn comm;
    /* the data connection */
    NDK_CQ *cq;
    NDK_QP *qp;
    struct pt_conn data;
    uint32_t rq_depth, sq_depth, ird_ord;
    uint8_t *land; /* what the peer Writes / Reads: land_len bytes */
    size_t land_len;
    NDK_MR *land_mr;
    UINT32 land_tok, land_rtok;
    uint8_t *local; /* source, first Read, credit word (8 bytes), then the sink slots */
    size_t local_len;
    uint32_t rx_slots, read_slots; /* sink slots of the receives (-c: one per receive) / Reads */
    uint64_t reads_posted;
    NDK_MR *local_mr;
    UINT32 local_tok;
    /* the server's incoming connectors, in arrival order */
    NDK_LISTENER *listener;
    pthread_mutex_t m;
    pthread_cond_t c;
    NDK_CONNECTOR *incoming[4];
    unsigned n_incoming, n_taken;
    /* the exchange */
    enum pt_step step;
    unsigned messages; /* communication messages received */
    char peer_version[PT_VERSION_LEN + 1];
    uint32_t peer_cycle_buffer, peer_cache_line;
    struct pt_dest peer;
    double peer_report[5];
    uint64_t peer_report_int[2];
    /* results */
    struct round_result res;
    uint64_t checked; /* messages whose bytes were checked */
    uint32_t recvs_posted;
    /* a message that arrived while comm_send waited for its own completion */
    uint8_t stash[PT_SLOT];
    uint32_t stash_len;
    bool stashed;
    /* send_bw server: receives met while waiting for a credit Write's completion */
    NDK_RESULT_EX *held; /* rq_depth entries */
    unsigned held_n;
};

/* ------------------------------------------------------------------------------------------ */
/* waits */

struct pt_waiter {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
    NTSTATUS st;
};
static void pw_init(struct pt_waiter *w)
{
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->c, NULL);
    w->done = false;
    w->st = STATUS_PENDING;
}
static void pw_cb(void *ctx, NTSTATUS st)
{
    struct pt_waiter *w = ctx;
    pthread_mutex_lock(&w->m);
    w->st = st;
    w->done = true;
    pthread_cond_broadcast(&w->c);
    pthread_mutex_unlock(&w->m);
}
static void pw_close_cb(void *ctx)
{
    pw_cb(ctx, STATUS_SUCCESS);
}
static NTSTATUS pw_wait(struct pt_waiter *w, NTSTATUS st)
{
    if (st != STATUS_PENDING)
        return st;
    pthread_mutex_lock(&w->m);
    while (!w->done)
        pthread_cond_wait(&w->c, &w->m); /* bounded by the watchdog (--timeout) */
    pthread_mutex_unlock(&w->m);
    return w->st;
}
static void pt_close(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *h)
{
    struct pt_waiter w;
    pw_init(&w);
    pw_wait(&w, fn(h, pw_close_cb, &w));
}
static void created(void *ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)st, (void)obj; /* softndk's creates complete inline */
}
static void on_cq(void *ctx, NTSTATUS st)
{
    (void)ctx, (void)st; /* polled */
}
static void on_disconnect(void *ctx)
{
    struct pt_conn *pc = ctx;
    atomic_store(&pc->peer_gone, true);
}
static void on_connect(void *ctx, NDK_CONNECTOR *c)
{
    struct pt *p = ctx;
    pthread_mutex_lock(&p->m);
    if (p->n_incoming < sizeof p->incoming / sizeof p->incoming[0])
        p->incoming[p->n_incoming++] = c;
    else
        c->Dispatch->NdkReject(c, NULL, 0);
    pthread_cond_broadcast(&p->c);
    pthread_mutex_unlock(&p->m);
}
static void nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void vlog(struct pt *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vlog(struct pt *p, const char *fmt, ...)
{
    if (!p->o->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ndkperf: perftest %s: ", p->role);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------------------------------------------ */
/* objects */

static NDK_MR *reg(struct pt *p, void *buf, size_t len, ULONG flags, UINT32 *tok, UINT32 *rtok)
{
    NDK_MR *mr;
    NTSTATUS st = p->pd->Dispatch->NdkCreateMr(p->pd, FALSE, created, NULL, &mr);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateMr", st, NULL);
    MDL mdl;
    MmInitializeMdl(&mdl, buf, len);
    struct pt_waiter w;
    pw_init(&w);
    if ((st = pw_wait(&w, mr->Dispatch->NdkRegisterMr(mr, &mdl, len, flags, pw_cb, &w))) !=
        STATUS_SUCCESS)
        die_status("NdkRegisterMr", st, NULL);
    *tok = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    if (rtok)
        *rtok = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    return mr;
}

static void make_data_qp(struct pt *p)
{
    NTSTATUS st = p->pd->Dispatch->NdkCreateQp(p->pd, p->cq, p->cq, NULL, p->rq_depth, p->sq_depth,
                                               1, 1, 0, created, NULL, &p->qp);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateQp (data)", st, NULL);
}

/* Discard what a closed QP left in cq (its flushed requests). */
static void drain(NDK_CQ *cq)
{
    NDK_RESULT_EX r;
    while (cq->Dispatch->NdkGetCqResultsEx(cq, &r, 1) == 1)
        ;
}

/* The communication QP with its receives posted (they are posted before connecting). */
static void make_comm_qp(struct pt *p)
{
    NTSTATUS st = p->pd->Dispatch->NdkCreateQp(p->pd, p->comm_cq, p->comm_cq, NULL, PT_COMM_RECVS,
                                               4, 1, 1, 0, created, NULL, &p->comm_qp);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateQp (communication)", st, NULL);
    for (unsigned i = 0; i < PT_COMM_RECVS; i++) {
        uint8_t *slot = p->comm_buf + i * PT_SLOT;
        NDK_SGE g = {.VirtualAddress = slot, .Length = PT_SLOT, .MemoryRegionToken = p->comm_tok};
        if ((st = p->comm_qp->Dispatch->NdkReceive(p->comm_qp, slot, &g, 1)) != STATUS_SUCCESS)
            die_status("NdkReceive (communication)", st, NULL);
    }
}

/* The pattern of -c: what an ndkperf peer sends, writes or offers to read. */
static uint8_t pattern_byte(size_t i)
{
    return (uint8_t)(i * 31u + 7u);
}

static void pt_open(struct pt *p)
{
    const struct opts *o = p->o;
    SOFTNDK_OPTIONS so;
    SoftNdkInitOptions(&so);
    so.MpaRevision = o->mpa_rev;
    so.Crc = o->crc == 1 ? SoftNdkCrcOn : o->crc == 2 ? SoftNdkCrcOff : SoftNdkCrcDefault;
    NDK_VERSION v = {2, 0};
    NTSTATUS st = SoftNdkOpenAdapter(0, v, &so, &p->a);
    if (st != STATUS_SUCCESS)
        die_status("SoftNdkOpenAdapter", st, NULL);
    if ((st = p->a->Dispatch->NdkCreatePd(p->a, created, NULL, &p->pd)) != STATUS_SUCCESS)
        die_status("NdkCreatePd", st, NULL);
    /* the communication QP: small, its own CQ */
    if ((st = p->a->Dispatch->NdkCreateCq(p->a, 4 * PT_COMM_RECVS, on_cq, NULL, NULL, created, NULL,
                                          &p->comm_cq)) != STATUS_SUCCESS)
        die_status("NdkCreateCq (communication)", st, NULL);
    p->comm_buf = calloc(PT_COMM_RECVS + 1, PT_SLOT);
    /* the data QP */
    uint32_t size = o->size;
    bool send = test_is_send(o->test);
    /* as perftest: -r receives posted (capped at -n); send_bw's client keeps within it */
    uint32_t rx = o->rx_depth < 2                   ? 2
                  : o->rx_depth > PT_MAX_RECV_DEPTH ? PT_MAX_RECV_DEPTH
                                                    : o->rx_depth;
    p->rq_depth = send ? (o->iters < rx ? o->iters : rx) : 1;
    if (send && p->rq_depth < 2)
        p->rq_depth = 2;
    p->sq_depth = o->tx_depth < 1 ? 1 : o->tx_depth;
    if (p->sq_depth > o->iters)
        p->sq_depth = o->iters;
    p->ird_ord = (o->test == T_READ_BW || o->test == T_READ_LAT) ? o->outs : 1;
    if ((st = p->a->Dispatch->NdkCreateCq(p->a, p->rq_depth + p->sq_depth + 8, on_cq, NULL, NULL,
                                          created, NULL, &p->cq)) != STATUS_SUCCESS)
        die_status("NdkCreateCq (data)", st, NULL);
    make_data_qp(p);
    p->held = calloc(p->rq_depth, sizeof *p->held);
    p->land_len = 2 * (size_t)(size > PT_CYCLE_BUFFER ? size : PT_CYCLE_BUFFER);
    p->land = calloc(1, p->land_len);
    /* a slot per receive or Read in flight whose bytes are read here: the next message must
     * not land where this one is being checked */
    bool read = o->test == T_READ_BW || o->test == T_READ_LAT;
    p->rx_slots = send && o->verify ? p->rq_depth : 1;
    p->read_slots = !read                      ? 1
                    : o->test == T_READ_LAT    ? 1
                    : p->sq_depth < p->ird_ord ? p->sq_depth
                                               : p->ird_ord;
    uint32_t slots = p->rx_slots > p->read_slots ? p->rx_slots : p->read_slots;
    p->local_len = 2 * (size_t)size + 8 + (size_t)slots * size;
    p->local = calloc(1, p->local_len);
    if (!p->comm_buf || !p->land || !p->local || !p->held)
        die(EXIT_FAIL, "out of memory");
    /* what an ndkperf peer checks with -c; write_lat's buffers stay zero (the peer polls the
     * last byte and perftest sends zeros before it) */
    if (o->test != T_WRITE_LAT) {
        for (size_t i = 0; i < p->land_len; i++)
            p->land[i] = pattern_byte(i);
        for (size_t i = 0; i < size; i++)
            p->local[i] = pattern_byte(i);
    }
    if (o->test == T_WRITE_BW || test_is_send(o->test))
        memset(p->land, 0, p->land_len); /* the peer's writes fill it (send_bw: the credit) */
    p->comm_mr = reg(p, p->comm_buf, (PT_COMM_RECVS + 1) * PT_SLOT, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                     &p->comm_tok, NULL);
    /* the one right the test needs on the only memory the peer reaches: Reads read it, Writes
     * (and send_bw's credit) write it, send_lat needs none */
    ULONG rights = o->test == T_READ_BW || o->test == T_READ_LAT ? NDK_MR_FLAG_ALLOW_REMOTE_READ
                   : o->test == T_SEND_LAT                       ? NDK_MR_FLAG_ALLOW_LOCAL_WRITE
                                                                 : NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    p->land_mr = reg(p, p->land, p->land_len, rights, &p->land_tok, &p->land_rtok);
    p->local_mr =
        reg(p, p->local, p->local_len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, &p->local_tok, NULL);
    make_comm_qp(p);
}

static void disconnect_quietly(struct pt_conn *pc)
{
    if (!pc->conn)
        return;
    struct pt_waiter w;
    pw_init(&w);
    /* the peer may have gone first (perftest's server destroys its ids without a disconnect) */
    (void)pw_wait(&w, pc->conn->Dispatch->NdkDisconnect(pc->conn, pw_cb, &w));
    pt_close(pc->conn->Dispatch->NdkCloseConnector, &pc->conn->Header);
    pc->conn = NULL;
}

static void pt_teardown(struct pt *p)
{
    disconnect_quietly(&p->data);
    disconnect_quietly(&p->comm);
    if (p->listener)
        pt_close(p->listener->Dispatch->NdkCloseListener, &p->listener->Header);
    pt_close(p->qp->Dispatch->NdkCloseQp, &p->qp->Header);
    pt_close(p->comm_qp->Dispatch->NdkCloseQp, &p->comm_qp->Header);
    pt_close(p->cq->Dispatch->NdkCloseCq, &p->cq->Header);
    pt_close(p->comm_cq->Dispatch->NdkCloseCq, &p->comm_cq->Header);
    pt_close(p->comm_mr->Dispatch->NdkCloseMr, &p->comm_mr->Header);
    pt_close(p->land_mr->Dispatch->NdkCloseMr, &p->land_mr->Header);
    pt_close(p->local_mr->Dispatch->NdkCloseMr, &p->local_mr->Header);
    pt_close(p->pd->Dispatch->NdkClosePd, &p->pd->Header);
    SoftNdkCloseAdapter(p->a);
    free(p->comm_buf);
    free(p->land);
    free(p->local);
    free(p->held);
}

/* ------------------------------------------------------------------------------------------ */
/* connections */

static void parse_addr(const char *text, uint16_t port, struct sockaddr_storage *ss, ULONG *len)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        *len = sizeof *a4;
    } else if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        *len = sizeof *a6;
    } else {
        die(EXIT_USAGE, "--perftest: '%s' is not an IPv4 or IPv6 address", text);
    }
}

static void pt_listen(struct pt *p)
{
    struct sockaddr_storage sa;
    ULONG len;
    parse_addr(p->o->bind_addr ? p->o->bind_addr : "0.0.0.0", p->o->port, &sa, &len);
    NTSTATUS st =
        p->a->Dispatch->NdkCreateListener(p->a, on_connect, p, created, NULL, &p->listener);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateListener", st, NULL);
    struct pt_waiter w;
    pw_init(&w);
    if ((st = pw_wait(&w, p->listener->Dispatch->NdkListen(p->listener, (struct sockaddr *)&sa, len,
                                                           pw_cb, &w))) != STATUS_SUCCESS)
        die_status("NdkListen", st, NULL);
    struct sockaddr_storage here;
    ULONG hlen = sizeof here;
    unsigned port = p->o->port;
    if (p->listener->Dispatch->NdkGetLocalAddress(p->listener, (struct sockaddr *)&here, &hlen) ==
        STATUS_SUCCESS)
        port = ntohs(((struct sockaddr_in *)&here)->sin_port); /* the same place in both families */
    fprintf(stderr, "ndkperf: perftest %s: listening on port %u\n", test_name(p->o->test), port);
}

/* Server: the next incoming connector, accepted on qp. */
static void pt_accept(struct pt *p, struct pt_conn *pc, NDK_QP *qp, ULONG ird_ord, const char *what)
{
    set_phase("perftest server: waiting for the %s connection", what);
    pthread_mutex_lock(&p->m);
    while (p->n_taken == p->n_incoming)
        pthread_cond_wait(&p->c, &p->m); /* bounded by the watchdog */
    pc->conn = p->incoming[p->n_taken++];
    pthread_mutex_unlock(&p->m);
    struct pt_waiter w;
    pw_init(&w);
    NTSTATUS st = pw_wait(&w, pc->conn->Dispatch->NdkAccept(pc->conn, qp, ird_ord, ird_ord, NULL, 0,
                                                            on_disconnect, pc, pw_cb, &w));
    if (st != STATUS_SUCCESS)
        die_status(strcmp(what, "data") == 0 ? "NdkAccept (data)" : "NdkAccept (communication)", st,
                   NULL);
    vlog(p, "%s connection accepted", what);
}

/* Client: connect qp; false when the attempt failed (the server may not listen yet). */
static bool pt_try_connect(struct pt *p, struct pt_conn *pc, NDK_QP *qp, ULONG ird_ord,
                           NTSTATUS *why)
{
    struct sockaddr_storage sa, ca;
    ULONG slen, clen;
    parse_addr(p->o->server, p->o->port, &sa, &slen);
    const char *src = p->o->bind_addr;
    if (!src)
        src = sa.ss_family == AF_INET6                                             ? "::"
              : (ntohl(((struct sockaddr_in *)&sa)->sin_addr.s_addr) >> 24) == 127 ? "127.0.0.1"
                                                                                   : "0.0.0.0";
    parse_addr(src, 0, &ca, &clen);
    NTSTATUS st = p->a->Dispatch->NdkCreateConnector(p->a, created, NULL, &pc->conn);
    if (st != STATUS_SUCCESS)
        die_status("NdkCreateConnector", st, NULL);
    struct pt_waiter w;
    pw_init(&w);
    st = pw_wait(&w, pc->conn->Dispatch->NdkConnect(pc->conn, qp, (struct sockaddr *)&ca, clen,
                                                    (struct sockaddr *)&sa, slen, ird_ord, ird_ord,
                                                    NULL, 0, pw_cb, &w));
    if (st == STATUS_SUCCESS) {
        pw_init(&w);
        st = pw_wait(
            &w, pc->conn->Dispatch->NdkCompleteConnect(pc->conn, on_disconnect, pc, pw_cb, &w));
    }
    if (st != STATUS_SUCCESS) {
        *why = st;
        pt_close(pc->conn->Dispatch->NdkCloseConnector, &pc->conn->Header);
        pc->conn = NULL;
        return false;
    }
    return true;
}

static void pt_connect_data(struct pt *p)
{
    set_phase("perftest client: connecting the data connection");
    NTSTATUS why = STATUS_SUCCESS;
    for (unsigned i = 0; i < PT_CONNECT_TRIES; i++) {
        if (pt_try_connect(p, &p->data, p->qp, p->ird_ord, &why)) {
            vlog(p, "data connection made (attempt %u)", i + 1);
            return;
        }
        vlog(p, "data connection attempt %u: %s; retrying", i + 1, SoftNdkStatusName(why));
        /* a failed connect leaves the QP unusable: a new one for the next attempt */
        pt_close(p->qp->Dispatch->NdkCloseQp, &p->qp->Header);
        drain(p->cq);
        make_data_qp(p);
        nap_us(100000);
    }
    die_status("NdkConnect (data)", why, "the perftest server did not accept the data connection");
}

/* ------------------------------------------------------------------------------------------ */
/* the communication connection */

static uint8_t *send_slot(struct pt *p)
{
    return p->comm_buf + PT_COMM_RECVS * PT_SLOT;
}

/* A received communication message: copied out, its slot posted again. */
static void take_receive(struct pt *p, const NDK_RESULT_EX *r, uint8_t *out, uint32_t cap,
                         uint32_t *len)
{
    uint8_t *slot = r->RequestContext;
    uint32_t n = r->BytesTransferred;
    memset(out, 0, cap);
    memcpy(out, slot, n < cap ? n : cap);
    NDK_SGE g = {.VirtualAddress = slot, .Length = PT_SLOT, .MemoryRegionToken = p->comm_tok};
    NTSTATUS st = p->comm_qp->Dispatch->NdkReceive(p->comm_qp, slot, &g, 1);
    if (st != STATUS_SUCCESS)
        die_status("NdkReceive (communication)", st, NULL);
    p->messages++;
    *len = n;
}

static void comm_send(struct pt *p, const void *msg, uint32_t len)
{
    uint8_t *slot = send_slot(p);
    memcpy(slot, msg, len);
    NDK_SGE g = {.VirtualAddress = slot, .Length = len, .MemoryRegionToken = p->comm_tok};
    NTSTATUS st = p->comm_qp->Dispatch->NdkSend(p->comm_qp, slot, &g, 1, 0);
    if (st != STATUS_SUCCESS)
        die_status("NdkSend (communication)", st, NULL);
    for (;;) { /* one send at a time: the slot is reused */
        /* The flag before the look: a peer's disconnect is reported after the completions of
         * what it sent before, so a look that comes after the flag and finds nothing means the
         * peer left with nothing more for us. */
        bool gone = atomic_load(&p->comm.peer_gone);
        NDK_RESULT_EX r;
        if (p->comm_cq->Dispatch->NdkGetCqResultsEx(p->comm_cq, &r, 1) == 1) {
            if (r.Type == NdkOperationTypeReceive && r.Status == STATUS_SUCCESS && !p->stashed) {
                /* the peer's answer overtook our Send's completion: keep it for comm_recv */
                take_receive(p, &r, p->stash, sizeof p->stash, &p->stash_len);
                p->stashed = true;
                continue;
            }
            if (r.Type != NdkOperationTypeSend)
                die(EXIT_FAIL,
                    "perftest %s: step %s: a completion of type %d on the "
                    "communication connection while sending",
                    p->role, step_names[p->step], (int)r.Type);
            if (r.Status != STATUS_SUCCESS)
                die(EXIT_FAIL, "perftest %s: step %s: the Send completed %s", p->role,
                    step_names[p->step], SoftNdkStatusName(r.Status));
            return;
        }
        if (gone)
            die(EXIT_FAIL, "perftest %s: step %s: the peer closed the communication connection",
                p->role, step_names[p->step]);
        nap_us(20);
    }
}

/* The peer's next message, copied to out (up to cap bytes); returns its length. */
static uint32_t comm_recv(struct pt *p, uint8_t *out, uint32_t cap)
{
    if (p->stashed) {
        p->stashed = false;
        memcpy(out, p->stash, cap < sizeof p->stash ? cap : sizeof p->stash);
        return p->stash_len;
    }
    for (;;) {
        bool gone = atomic_load(&p->comm.peer_gone); /* before the look: comm_send */
        NDK_RESULT_EX r;
        if (p->comm_cq->Dispatch->NdkGetCqResultsEx(p->comm_cq, &r, 1) == 1) {
            if (r.Status != STATUS_SUCCESS)
                die(EXIT_FAIL, "perftest %s: step %s: a communication completion %s", p->role,
                    step_names[p->step], SoftNdkStatusName(r.Status));
            if (r.Type != NdkOperationTypeReceive)
                die(EXIT_FAIL, "perftest %s: step %s: an unexpected completion of type %d", p->role,
                    step_names[p->step], (int)r.Type);
            uint32_t n;
            take_receive(p, &r, out, cap, &n);
            return n;
        }
        if (gone)
            die(EXIT_FAIL, "perftest %s: step %s: the peer closed the communication connection",
                p->role, step_names[p->step]);
        nap_us(20);
    }
}

static void put_be32(uint8_t *b, uint32_t v)
{
    v = htobe32(v);
    memcpy(b, &v, 4);
}
static void put_be64(uint8_t *b, uint64_t v)
{
    v = htobe64(v);
    memcpy(b, &v, 8);
}
static uint32_t get_be32(const uint8_t *b)
{
    uint32_t v;
    memcpy(&v, b, 4);
    return be32toh(v);
}
static uint64_t get_be64(const uint8_t *b)
{
    uint64_t v;
    memcpy(&v, b, 8);
    return be64toh(v);
}
static void put_double(uint8_t *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    put_be64(b, v);
}
static double get_double(const uint8_t *b)
{
    uint64_t v = get_be64(b);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

#define MIB (1024.0 * 1024.0)

/* My message of an exchange step; returns its length. */
static uint32_t my_message(struct pt *p, enum pt_step s, uint8_t *b)
{
    memset(b, 0, PT_SLOT);
    switch (s) {
    case PT_VERSION_PAIR:
        memcpy(b, PT_VERSION, sizeof PT_VERSION);
        return PT_VERSION_LEN;
    case PT_CYCLE_BUFFER_PAIR:
        put_be32(b, PT_CYCLE_BUFFER);
        return 4;
    case PT_CACHE_LINE_PAIR:
        put_be32(b, PT_CACHE_LINE);
        return 4;
    case PT_MTU_PAIR:
        memcpy(b, PT_MTU_ENUM, sizeof PT_MTU_ENUM);
        return 2;
    case PT_DEST_PAIR:
        put_be32(b + 4, p->ird_ord);                    /* out_reads */
        put_be32(b + 16, p->land_rtok);                 /* rkey */
        put_be64(b + 24, (uint64_t)(uintptr_t)p->land); /* vaddr */
        return PT_DEST_LEN;
    case PT_REPORT_SIZE:
        put_be64(b, p->o->size);
        return 8;
    case PT_REPORT_ITERS:
        put_be64(b, p->res.iters);
        return 8;
    case PT_REPORT_BW_PEAK:
        put_double(b, p->res.bw_peak / MIB);
        return 8;
    case PT_REPORT_BW_AVG:
        put_double(b, p->res.bw_avg / MIB);
        return 8;
    case PT_REPORT_MSG_RATE:
        put_double(b, p->res.msg_rate / 1e6);
        return 8;
    default:
        die(EXIT_FAIL, "perftest: step %s has no message", step_names[s]);
    }
}

static void take_message(struct pt *p, enum pt_step s, const uint8_t *b, uint32_t n)
{
    switch (s) {
    case PT_VERSION_PAIR:
        memcpy(p->peer_version, b, PT_VERSION_LEN);
        p->peer_version[PT_VERSION_LEN] = 0;
        if (atof(p->peer_version) < 5.70)
            die(EXIT_FAIL,
                "perftest %s: the peer says version '%s' (%u bytes); perftest's "
                "-R exchange as spoken here needs 5.70 or later",
                p->role, p->peer_version, n);
        break;
    case PT_CYCLE_BUFFER_PAIR:
        p->peer_cycle_buffer = get_be32(b);
        break;
    case PT_CACHE_LINE_PAIR:
        p->peer_cache_line = get_be32(b);
        break;
    case PT_MTU_PAIR:
        break;
    case PT_DEST_PAIR:
        if (n != PT_DEST_LEN)
            die(EXIT_FAIL, "perftest %s: a destination of %u bytes, expected %u", p->role, n,
                PT_DEST_LEN);
        p->peer.out_reads = get_be32(b + 4);
        p->peer.qpn = get_be32(b + 8);
        p->peer.rkey = get_be32(b + 16);
        p->peer.vaddr = get_be64(b + 24);
        break;
    case PT_REPORT_SIZE:
    case PT_REPORT_ITERS:
        p->peer_report_int[s - PT_REPORT_SIZE] = get_be64(b);
        break;
    case PT_REPORT_BW_PEAK:
    case PT_REPORT_BW_AVG:
    case PT_REPORT_MSG_RATE:
        p->peer_report[s - PT_REPORT_SIZE] = get_double(b);
        break;
    default:
        break;
    }
}

/* One pair: the client sends first, the server answers. */
static void exchange(struct pt *p, enum pt_step s)
{
    uint8_t mine[PT_SLOT], theirs[PT_SLOT];
    uint32_t n;
    if (p->server) {
        n = comm_recv(p, theirs, sizeof theirs);
        take_message(p, s, theirs, n);
        comm_send(p, mine, my_message(p, s, mine));
    } else {
        comm_send(p, mine, my_message(p, s, mine));
        n = comm_recv(p, theirs, sizeof theirs);
        take_message(p, s, theirs, n);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* the measured loops */

static NDK_RESULT_EX data_completion(struct pt *p, const char *what)
{
    for (;;) {
        bool gone = atomic_load(&p->data.peer_gone); /* before the look: comm_send */
        NDK_RESULT_EX r;
        if (p->cq->Dispatch->NdkGetCqResultsEx(p->cq, &r, 1) == 1) {
            if (r.Status != STATUS_SUCCESS)
                die(EXIT_FAIL, "perftest %s %s: %s completed %s (provider code 0x%x)%s",
                    test_name(p->o->test), p->role, what, SoftNdkStatusName(r.Status),
                    (unsigned)r.ProviderErrorCode,
                    atomic_load(&p->data.peer_gone) ? "; the peer disconnected" : "");
            return r;
        }
        if (gone)
            die(EXIT_FAIL, "perftest %s %s: the peer disconnected the data connection during %s",
                test_name(p->o->test), p->role, what);
    }
}

static uint8_t *sink_slot(struct pt *p, uint32_t slot)
{
    return p->local + 2 * (size_t)p->o->size + 8 + (size_t)slot * p->o->size;
}

/* A receive into sink slot `slot` (its request context: slot + 1). */
static void post_data_recv(struct pt *p, uint32_t slot)
{
    uint32_t size = p->o->size;
    NDK_SGE g = {
        .VirtualAddress = sink_slot(p, slot), .Length = size, .MemoryRegionToken = p->local_tok};
    NTSTATUS st = p->qp->Dispatch->NdkReceive(p->qp, (void *)(uintptr_t)(slot + 1), &g, 1);
    if (st != STATUS_SUCCESS)
        die_status("NdkReceive (data)", st, NULL);
    p->recvs_posted++;
}

static void hold_receive(struct pt *p, const NDK_RESULT_EX *r)
{
    if (r->Type != NdkOperationTypeReceive || p->held_n == p->rq_depth)
        die(EXIT_FAIL, "perftest send_bw server: a completion of type %d during a credit Write",
            (int)r->Type);
    /* kept in reverse order; only counts and lengths matter, every receive has one buffer */
    p->held[p->held_n++] = *r;
}

static uint32_t slot_of(const NDK_RESULT_EX *r)
{
    return (uint32_t)((uintptr_t)r->RequestContext - 1);
}

static void check_pattern(struct pt *p, const uint8_t *b, uint32_t len, uint64_t iter,
                          const char *what)
{
    for (uint32_t i = 0; i < len; i++)
        if (b[i] != pattern_byte(i))
            die(EXIT_FAIL, "perftest %s %s: %s %" PRIu64 ": byte %u is 0x%02x, expected 0x%02x",
                test_name(p->o->test), p->role, what, iter, i, b[i], pattern_byte(i));
    p->checked++;
}

/* Post one request of the test (the client's Write / Read / Send of size bytes). */
static void post_one(struct pt *p)
{
    uint32_t size = p->o->size;
    NTSTATUS st;
    if (p->o->test == T_READ_BW || p->o->test == T_READ_LAT) {
        /* Reads complete in order: the k-th completion is slot k % read_slots */
        NDK_SGE g = {.VirtualAddress = sink_slot(p, (uint32_t)(p->reads_posted++ % p->read_slots)),
                     .Length = size,
                     .MemoryRegionToken = p->local_tok};
        st = p->qp->Dispatch->NdkRead(p->qp, NULL, &g, 1, p->peer.vaddr, p->peer.rkey, 0);
        if (st != STATUS_SUCCESS)
            die_status("NdkRead", st, NULL);
    } else {
        NDK_SGE g = {.VirtualAddress = p->local, .Length = size, .MemoryRegionToken = p->local_tok};
        if (test_is_send(p->o->test))
            st = p->qp->Dispatch->NdkSend(p->qp, NULL, &g, 1, 0);
        else
            st = p->qp->Dispatch->NdkWrite(p->qp, NULL, &g, 1, p->peer.vaddr, p->peer.rkey, 0);
        if (st != STATUS_SUCCESS)
            die_status(test_is_send(p->o->test) ? "NdkSend" : "NdkWrite", st, NULL);
    }
}

/* A Read's bytes: with -c the ndkperf pattern; otherwise the same as the first Read brought
 * (the peer's buffer does not change during the test). */
static void check_read(struct pt *p, uint64_t i)
{
    uint32_t size = p->o->size;
    uint8_t *sink = sink_slot(p, (uint32_t)(i % p->read_slots)), *first = p->local + size;
    if (p->o->verify) {
        check_pattern(p, sink, size, i, "Read");
        return;
    }
    if (i == 0)
        memcpy(first, sink, size);
    else if (memcmp(first, sink, size) != 0)
        die(EXIT_FAIL, "perftest %s client: Read %" PRIu64 " brought other bytes than the first",
            test_name(p->o->test), i);
    p->checked++;
}

static void finish_bw(struct pt *p, uint64_t n, uint64_t t0, uint64_t t1)
{
    double secs = (double)(t1 - t0) / 1e9;
    if (secs <= 0)
        secs = 1e-9;
    p->res.size = p->o->size;
    p->res.iters = n;
    p->res.bw_avg = (double)n * p->o->size / secs;
    p->res.bw_peak = p->res.bw_avg; /* --perftest measures the average only */
    p->res.msg_rate = (double)n / secs;
}

static uint32_t credit_of(struct pt *p)
{
    return __atomic_load_n((const uint32_t *)(const void *)p->land, __ATOMIC_ACQUIRE);
}

/* send_bw server: RDMA Write the count of messages received into the client's credit word. */
static void write_credit(struct pt *p, uint32_t count)
{
    uint8_t *word = p->local + 2 * (size_t)p->o->size;
    memcpy(word, &count, 4); /* perftest's host order: both ends x86 in practice */
    NDK_SGE g = {.VirtualAddress = word, .Length = 4, .MemoryRegionToken = p->local_tok};
    NTSTATUS st = p->qp->Dispatch->NdkWrite(p->qp, NULL, &g, 1, p->peer.vaddr, p->peer.rkey, 0);
    if (st != STATUS_SUCCESS)
        die_status("NdkWrite (credit)", st, NULL);
    for (;;) { /* one at a time: the word is reused */
        NDK_RESULT_EX r = data_completion(p, "a credit Write");
        if (r.Type == NdkOperationTypeWrite)
            return;
        hold_receive(p, &r);
    }
}

static void run_bw_client(struct pt *p)
{
    const uint64_t iters = p->o->iters;
    bool read = p->o->test == T_READ_BW;
    uint32_t window = p->sq_depth;
    if (read && window > p->ird_ord)
        window = p->ird_ord;
    uint64_t posted = 0, done = 0, t0 = now_ns();
    const char *what = read                       ? "an RDMA Read"
                       : test_is_send(p->o->test) ? "a Send"
                                                  : "an RDMA Write";
    /* send_bw over iWARP (no RNR retry): perftest's client sends only while fewer than its
     * receive depth are unacknowledged by the credit (the server's count of receives, 4 bytes
     * RDMA-Written into the client's destination) */
    bool credits = p->o->test == T_SEND_BW;
    uint64_t peer_rx = p->o->rx_depth < iters ? p->o->rx_depth : iters;
    while (done < iters) {
        while (posted < iters && posted - done < window &&
               (!credits || posted + 1 - credit_of(p) < peer_rx)) {
            post_one(p);
            posted++;
        }
        if (credits && posted == done) {
            /* the credit may have landed between the look above and the flag */
            if (atomic_load(&p->data.peer_gone) && posted + 1 - credit_of(p) >= peer_rx)
                die(EXIT_FAIL, "perftest send_bw client: the peer left while we waited for credit");
            continue; /* waiting for the server's credit */
        }
        NDK_RESULT_EX r = data_completion(p, what);
        if (r.BytesTransferred != p->o->size && r.Type != NdkOperationTypeWrite &&
            r.Type != NdkOperationTypeSend)
            die(EXIT_FAIL, "perftest read_bw client: a Read of %u bytes, expected %u",
                r.BytesTransferred, p->o->size);
        if (read)
            check_read(p, done);
        done++;
    }
    finish_bw(p, done, t0, now_ns());
}

static void run_send_bw_server(struct pt *p)
{
    const uint64_t iters = p->o->iters;
    uint64_t got = 0, t0 = 0;
    uint32_t every = p->rq_depth / 3 < 8 ? (p->rq_depth / 3 ? p->rq_depth / 3 : 1) : 8;
    while (got < iters) {
        NDK_RESULT_EX r;
        if (p->held_n)
            r = p->held[--p->held_n];
        else
            r = data_completion(p, "a receive");
        if (r.Type != NdkOperationTypeReceive)
            die(EXIT_FAIL, "perftest send_bw server: a completion of type %d", (int)r.Type);
        if (got == 0)
            t0 = now_ns();
        if (r.BytesTransferred != p->o->size)
            die(EXIT_FAIL, "perftest send_bw server: message %" PRIu64 " has %u bytes, expected %u",
                got, r.BytesTransferred, p->o->size);
        if (p->o->verify)
            check_pattern(p, sink_slot(p, slot_of(&r)), p->o->size, got, "message");
        else
            p->checked++; /* its length */
        got++;
        if (p->recvs_posted < iters)
            post_data_recv(p, slot_of(&r));
        if (got % every == 0 && got < iters)
            write_credit(p, (uint32_t)got);
    }
    finish_bw(p, got, t0, now_ns());
}

static void lat_result(struct pt *p, uint64_t *samples, size_t n)
{
    p->res.size = p->o->size;
    p->res.iters = p->o->iters;
    p->res.is_lat = true;
    if (n)
        lat_stats(samples, n, &p->res);
}

/* send_lat: one completion of the ping-pong, counted (a receive may come before the completion
 * of the Send it answers). */
static void lat_reap(struct pt *p, uint64_t *recvs, uint64_t *sends)
{
    NDK_RESULT_EX r = data_completion(p, "a ping-pong message");
    if (r.Type == NdkOperationTypeSend) {
        ++*sends;
        return;
    }
    if (r.BytesTransferred != p->o->size)
        die(EXIT_FAIL, "perftest send_lat %s: message %" PRIu64 " has %u bytes, expected %u",
            p->role, *recvs, r.BytesTransferred, p->o->size);
    if (p->o->verify)
        check_pattern(p, sink_slot(p, slot_of(&r)), p->o->size, *recvs, "message");
    else
        p->checked++;
    ++*recvs;
    if (p->recvs_posted < p->o->iters)
        post_data_recv(p, slot_of(&r));
}

static void run_send_lat(struct pt *p)
{
    const uint64_t iters = p->o->iters;
    uint64_t *rtt = calloc(iters, sizeof *rtt);
    if (!rtt)
        die(EXIT_FAIL, "out of memory");
    uint64_t recvs = 0, sends = 0;
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        if (!p->server) /* the client sends first, the server answers each message */
            post_one(p);
        while (recvs <= i)
            lat_reap(p, &recvs, &sends);
        if (p->server)
            post_one(p);
        rtt[i] = (now_ns() - t0) / 2; /* one way, as perftest reports it */
    }
    while (sends < iters)
        lat_reap(p, &recvs, &sends);
    lat_result(p, rtt, p->server ? 0 : iters);
    free(rtt);
}

static uint8_t poll_byte(const uint8_t *b)
{
    return __atomic_load_n(b, __ATOMIC_ACQUIRE);
}

/* Did the peer leave without writing `want` into *b? Its disconnect is reported after the
 * Writes it made before are placed, so the byte is looked at once more after the flag: a Write
 * that landed between the caller's look and the flag is not a departure. */
static bool peer_left_before(struct pt *p, const uint8_t *b, uint8_t want)
{
    return atomic_load(&p->data.peer_gone) && poll_byte(b) != want;
}

static void run_write_lat(struct pt *p)
{
    const uint64_t iters = p->o->iters;
    const uint32_t size = p->o->size;
    uint64_t *t = calloc(iters, sizeof *t);
    if (!t)
        die(EXIT_FAIL, "out of memory");
    uint8_t *last_in = p->land + size - 1, *last_out = p->local + size - 1;
    for (uint64_t k = 1; k <= iters; k++) {
        /* the server writes first: before its k-th Write it waits for the client's (k-1)-th,
         * the client for the server's k-th */
        uint64_t want = p->server ? k - 1 : k;
        if (want > 0) {
            while (poll_byte(last_in) != (uint8_t)want)
                if (peer_left_before(p, last_in, (uint8_t)want))
                    die(EXIT_FAIL, "perftest write_lat %s: the peer left before Write %" PRIu64,
                        p->role, k);
            for (uint32_t i = 0; i + 1 < size; i++) /* perftest's source stays zero */
                if (p->land[i] != 0)
                    die(EXIT_FAIL,
                        "perftest write_lat %s: Write %" PRIu64 " byte %u is 0x%02x, "
                        "expected 0",
                        p->role, k, i, p->land[i]);
            p->checked++;
        }
        t[k - 1] = now_ns();
        *last_out = (uint8_t)k;
        post_one(p);
        (void)data_completion(p, "an RDMA Write");
    }
    /* the server's last Write is answered by the client's: wait for it too */
    if (p->server) {
        while (poll_byte(last_in) != (uint8_t)iters)
            if (peer_left_before(p, last_in, (uint8_t)iters))
                die(EXIT_FAIL, "perftest write_lat server: the peer left before its last Write");
        p->checked++;
    }
    for (uint64_t k = 0; k + 1 < iters; k++)
        t[k] = (t[k + 1] - t[k]) / 2;
    lat_result(p, t, iters > 1 ? iters - 1 : 0);
    free(t);
}

static void run_read_lat_client(struct pt *p)
{
    const uint64_t iters = p->o->iters;
    uint64_t *rtt = calloc(iters, sizeof *rtt);
    if (!rtt)
        die(EXIT_FAIL, "out of memory");
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        post_one(p);
        NDK_RESULT_EX r = data_completion(p, "an RDMA Read");
        rtt[i] = now_ns() - t0;
        if (r.BytesTransferred != p->o->size)
            die(EXIT_FAIL, "perftest read_lat client: a Read of %u bytes, expected %u",
                r.BytesTransferred, p->o->size);
        check_read(p, i);
    }
    lat_result(p, rtt, iters);
    free(rtt);
}

static void run(struct pt *p)
{
    set_phase("perftest %s %s: the measured loop", test_name(p->o->test), p->role);
    switch (p->o->test) {
    case T_SEND_BW:
        if (p->server)
            run_send_bw_server(p);
        else
            run_bw_client(p);
        break;
    case T_WRITE_BW:
    case T_READ_BW:
        if (!p->server)
            run_bw_client(p);
        break;
    case T_SEND_LAT:
        run_send_lat(p);
        break;
    case T_WRITE_LAT:
        run_write_lat(p);
        break;
    case T_READ_LAT:
        if (!p->server)
            run_read_lat_client(p);
        break;
    default:
        break;
    }
}

/* write_bw server with -c: the client's Writes, finished before its next message on the other
 * connection, may still be landing: wait (up to 2 s) for the pattern. */
static void check_written(struct pt *p)
{
    uint32_t size = p->o->size;
    uint64_t end = now_ns() + 2000000000ull;
    for (;;) {
        uint32_t i = 0;
        while (i < size && poll_byte(p->land + i) == pattern_byte(i))
            i++;
        if (i == size) {
            p->checked++;
            return;
        }
        if (now_ns() > end)
            die(EXIT_FAIL,
                "perftest write_bw server: byte %u of the written area is 0x%02x, "
                "expected 0x%02x",
                i, p->land[i], pattern_byte(i));
        nap_us(1000);
    }
}

/* ------------------------------------------------------------------------------------------ */

static void walk(struct pt *p, const enum pt_step *script)
{
    for (unsigned i = 0;; i++) {
        enum pt_step s = script[i];
        vlog(p, "step %s => %s", step_names[p->step], step_names[s]);
        p->step = s;
        switch (s) {
        case PT_DATA_CONNECT:
            if (p->server)
                pt_accept(p, &p->data, p->qp, p->ird_ord, "data");
            else
                pt_connect_data(p);
            break;
        case PT_POST_RECEIVES:
            for (uint32_t k = 0; k < p->rq_depth && p->recvs_posted < p->o->iters; k++)
                post_data_recv(p, k % p->rx_slots);
            break;
        case PT_RUN:
            run(p);
            break;
        case PT_DONE:
            return;
        default:
            set_phase("perftest %s: exchange step %s", p->role, step_names[s]);
            exchange(p, s);
            break;
        }
    }
}

static const enum pt_step *script_of(enum test_kind t)
{
    switch (t) {
    case T_WRITE_BW:
    case T_READ_BW:
        return script_rdma_bw;
    case T_SEND_BW:
    case T_SEND_LAT:
        return script_send;
    case T_WRITE_LAT:
        return script_write_lat;
    default:
        return script_read_lat;
    }
}

static const char *check_what(enum test_kind t)
{
    switch (t) {
    case T_READ_BW:
    case T_READ_LAT:
        return " (each Read the same bytes as the first)";
    case T_WRITE_LAT:
        return " (perftest's zeros, the last byte its counter)";
    default:
        return " (their length)";
    }
}

int perftest_main(const struct opts *o)
{
    static struct pt p;
    memset(&p, 0, sizeof p);
    p.o = o;
    p.server = o->server == NULL;
    p.role = p.server ? "server" : "client";
    p.step = PT_VERSION_PAIR;
    pthread_mutex_init(&p.m, NULL);
    pthread_cond_init(&p.c, NULL);
    pt_open(&p);
    if (p.server) {
        pt_listen(&p);
        pt_accept(&p, &p.comm, p.comm_qp, 1, "communication");
    } else {
        NTSTATUS why = STATUS_SUCCESS;
        set_phase("perftest client: connecting the communication connection");
        /* a server started just now may not listen yet: retry for a while, as perftest does */
        unsigned i = 0;
        while (!pt_try_connect(&p, &p.comm, p.comm_qp, 1, &why)) {
            if (++i == PT_CONNECT_TRIES)
                die_status("NdkConnect (communication)", why, "is a perftest server listening?");
            vlog(&p, "communication connection attempt %u: %s; retrying", i,
                 SoftNdkStatusName(why));
            pt_close(p.comm_qp->Dispatch->NdkCloseQp, &p.comm_qp->Header);
            drain(p.comm_cq); /* the old QP's receives, flushed */
            make_comm_qp(&p);
            nap_us(100000);
        }
    }
    walk(&p, script_of(o->test));
    if (p.server && o->verify && o->test == T_WRITE_BW)
        check_written(&p);

    bool active = !p.server || test_is_send(o->test) || o->test == T_WRITE_LAT;
    printf("ndkperf: perftest %s %s: peer perftest %s, %u communication messages received\n",
           test_name(o->test), p.role, p.peer_version, p.messages);
    if (active) {
        print_table_head(o);
        print_row(o, &p.res);
        print_table_tail(o);
        printf("ndkperf: perftest %s %s: %" PRIu64 " iterations of %u bytes, every completion "
               "STATUS_SUCCESS; %" PRIu64 " received messages checked%s\n",
               test_name(o->test), p.role, (uint64_t)o->iters, o->size, p.checked,
               p.checked == 0                        ? ""
               : o->verify && o->test != T_WRITE_LAT ? " against the ndkperf pattern"
                                                     : check_what(o->test));
    } else {
        printf("ndkperf: perftest %s server: passive (the client's %s)\n", test_name(o->test),
               o->test == T_READ_LAT || o->test == T_READ_BW ? "Reads" : "Writes");
        if (p.checked)
            printf("ndkperf: perftest %s server: the written area checked against the ndkperf "
                   "pattern\n",
                   test_name(o->test));
    }
    if (test_is_bw(o->test) && !test_is_send(o->test) && p.server)
        printf("ndkperf: perftest %s server: the client reports %" PRIu64 " iterations of %" PRIu64
               " bytes, %.2f MB/sec, %.6f Mpps\n",
               test_name(o->test), p.peer_report_int[1], p.peer_report_int[0], p.peer_report[3],
               p.peer_report[4]);
    fflush(stdout);
    /* perftest's client disconnects the data connection and waits for it; its server destroys
     * its ids: the server here gives the client up to 5 s to disconnect first */
    if (p.server) {
        uint64_t end = now_ns() + 5000000000ull;
        while (!atomic_load(&p.data.peer_gone) && now_ns() < end)
            nap_us(1000);
    }
    pt_teardown(&p);
    return EXIT_OK;
}
