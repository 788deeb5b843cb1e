/* ndkrping: the rping protocol of rdma-core's librdmacm examples, on softndk's public NDKPI
 * interface, so that `rping` on a Linux host (siw, an iWARP NIC) and softndk can test each
 * other in both directions (docs/tools.md, docs/interop.md).
 *
 *   ndkrping -s [-vV] [-S size] [-C count] [-a addr] [-p port]
 *   ndkrping -c [-vV] [-S size] [-C count] [-I addr] -a addr [-p port]
 *
 * The protocol, as rping speaks it (described here in our own words): no private data; each
 * side posts one 16-byte receive before it connects or accepts. A control message is 16 bytes:
 * a buffer's address (8 bytes), its STag (4) and its length (4), all big-endian. Per ping the
 * client fills its source buffer with "rdma-ping-N: " and then the letters 'A'..'z' cycling
 * from a start letter that advances by one each ping, the last byte 0, and sends the source's
 * {address, STag, size}; the server RDMA Reads that many bytes into its buffer and sends a
 * 16-byte go-ahead; the client sends its sink's {address, STag, size}; the server RDMA Writes
 * the string it read (its length + 1) there and sends the go-ahead again; the client compares
 * source and sink (-V). The client disconnects after -C pings; the server serves until the
 * client disconnects (or, here, after its own -C pings: when the client advertises the next
 * one, the server disconnects first).
 *
 * Exit status 0: every ping done (and checked with -V); 1: a failure, named on stderr; 2: bad
 * command line. Every wait is bounded by -W seconds (default 30). */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ndk/softndk.h>

#include "tool_sync.h"

#define RPING_PORT     7174
#define RPING_MAX_SIZE (64 * 1024 - 1)
#define RPING_MSG_FMT  "rdma-ping-%d: "
#define RPING_MIN_SIZE 26 /* the longest "rdma-ping-N: " plus the terminating 0 */
#define CTRL_LEN       16
#define FIRST_LETTER   65  /* 'A' */
#define LAST_LETTER    122 /* 'z' */
#define UCMA_PORT      7471
#define UCMA_MAX_COUNT 16
#define UCMA_MAX_SIZE  4096

static struct {
    bool server, client, verbose, validate, debug;
    bool ucmatose; /* ucmatose's exchange instead of rping's */
    const char *addr, *source;
    unsigned port, size, count, timeout;
    int crc;            /* -1: the adapter's default */
    unsigned mpa_rev;   /* 0: the adapter's default */
    const char *reject; /* server: reject the connection with this private data */
    bool bad_stag;      /* the first ping uses a wrong STag (server: its Read; client: its
                           advert), to see the peer's Terminate or ours */
} opt = {.port = RPING_PORT, .size = 64, .timeout = 30, .crc = -1};

static _Noreturn void fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void fail(int code, const char *fmt, ...)
{
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&once);
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ndkrping: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    _exit(code);
}

static _Noreturn void fail_status(const char *call, NTSTATUS st)
{
    fail(1, "%s: %s (0x%08x)", call, SoftNdkStatusName(st), (unsigned)st);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: ndkrping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n"
        "       ndkrping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n"
        "  -s            server (serves one client)\n"
        "  -c            client\n"
        "  -a addr       server: address to listen on (default 0.0.0.0); client: server\n"
        "  -I addr       client: source address (default: 127.0.0.1 for a loopback server,\n"
        "                else the wildcard of the server's family)\n"
        "  -p port       port (default %u)\n"
        "  -S size       ping data size, %u..%u (default 64)\n"
        "  -C count      client: pings (default 10; 0 is not offered: every run is bounded);\n"
        "                server: disconnect first when the client asks for one more (default:\n"
        "                serve until the client disconnects)\n"
        "  -v            print the ping data\n"
        "  -V            validate the ping data (server: the pattern it read)\n"
        "  -d            debug lines\n"
        "  -W seconds    give up after this long (default 30)\n"
        "  --crc on|off  MPA CRC (default: the adapter's, SOFTNDK_CRC)\n"
        "  --mpa-rev 1|2 MPA revision (default: the adapter's, SOFTNDK_MPA_REV)\n"
        "  --reject TEXT server: reject the connection with TEXT as private data\n"
        "  --ucmatose    ucmatose's exchange (rdma-core's cmatose example) instead of\n"
        "                rping's: the server sends -C messages of -S bytes (default 10 x 100),\n"
        "                the client receives them and sends as many back; port 7471\n"
        "  --bad-stag    the first ping uses a wrong STag (server: in its RDMA Read;\n"
        "                client: in its advert); prints how the Read completed (server) or\n"
        "                how the connection ended (client); exit 0 when the Read failed\n",
        RPING_PORT, RPING_MIN_SIZE, RPING_MAX_SIZE);
}

static unsigned number(const char *name, const char *v, unsigned lo, unsigned hi)
{
    char *end;
    if (!v)
        fail(2, "%s wants a value", name);
    unsigned long n = strtoul(v, &end, 0);
    if (*end || v[0] == '-' || n < lo || n > hi)
        fail(2, "%s wants a number in %u..%u, not '%s'", name, lo, hi, v);
    return (unsigned)n;
}

static void parse(int argc, char **argv)
{
    bool count_set = false, size_set = false, port_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-s") == 0)
            opt.server = true;
        else if (strcmp(a, "-c") == 0)
            opt.client = true;
        else if (strcmp(a, "-a") == 0)
            opt.addr = v, i++;
        else if (strcmp(a, "-I") == 0)
            opt.source = v, i++;
        else if (strcmp(a, "-p") == 0)
            opt.port = number(a, v, 1, 65535), i++, port_set = true;
        else if (strcmp(a, "-S") == 0)
            opt.size = number(a, v, 1, RPING_MAX_SIZE), i++, size_set = true;
        else if (strcmp(a, "-C") == 0)
            opt.count = number(a, v, 1, 10000000), i++, count_set = true;
        else if (strcmp(a, "-W") == 0)
            opt.timeout = number(a, v, 1, 86400), i++;
        else if (strcmp(a, "-v") == 0)
            opt.verbose = true;
        else if (strcmp(a, "-V") == 0)
            opt.validate = true;
        else if (strcmp(a, "-d") == 0)
            opt.debug = true;
        else if (strcmp(a, "-vV") == 0 || strcmp(a, "-Vv") == 0)
            opt.verbose = opt.validate = true;
        else if (strcmp(a, "--crc") == 0) {
            if (!v || (strcmp(v, "on") && strcmp(v, "off")))
                fail(2, "--crc wants on or off");
            opt.crc = strcmp(v, "on") == 0, i++;
        } else if (strcmp(a, "--mpa-rev") == 0)
            opt.mpa_rev = number(a, v, 1, 2), i++;
        else if (strcmp(a, "--bad-stag") == 0)
            opt.bad_stag = true;
        else if (strcmp(a, "--ucmatose") == 0)
            opt.ucmatose = true;
        else if (strcmp(a, "--reject") == 0) {
            if (!v)
                fail(2, "--reject wants the private data text");
            opt.reject = v, i++;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "-P") == 0 || strcmp(a, "-q") == 0) {
            fail(2, "%s (rping's persistent server / self-created QP) is not offered", a);
        } else {
            usage(stderr);
            fail(2, "unknown argument '%s'", a);
        }
    }
    if (opt.server == opt.client)
        fail(2, "say -s (server) or -c (client)");
    if (opt.client && !opt.addr)
        fail(2, "-c needs -a SERVER");
    if (opt.client && !count_set)
        opt.count = 10;
    if (opt.ucmatose) {
        if (!count_set)
            opt.count = 10;
        if (!size_set)
            opt.size = 100;
        if (!port_set)
            opt.port = UCMA_PORT;
        if (opt.count > UCMA_MAX_COUNT || opt.size > UCMA_MAX_SIZE)
            fail(2, "--ucmatose: at most %u messages of %u bytes", UCMA_MAX_COUNT, UCMA_MAX_SIZE);
    }
    if (opt.reject && !opt.server)
        fail(2, "--reject is for the server");
    if (!opt.ucmatose && opt.size < RPING_MIN_SIZE)
        fail(2, "-S wants a number in %u..%u, not %u", RPING_MIN_SIZE, RPING_MAX_SIZE, opt.size);
}

static void *watchdog(void *arg)
{
    (void)arg;
    struct timespec ts = {.tv_sec = opt.timeout, .tv_nsec = 0};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
    fail(1, "timeout: not done after %u s", opt.timeout);
}

static void debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void debug(const char *fmt, ...)
{
    if (!opt.debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */
/* completions, events */

static void on_cq(void *ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

/* ------------------------------------------------------------------------------------------ */

struct rping {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *ctrl_mr, *data_mr;
    UINT32 ctrl_tok, data_tok; /* local tokens */
    UINT32 data_rtok;          /* remote token of the data region */
    uint8_t *ctrl;             /* [0,16) receive, [16,32) send */
    uint8_t *data;             /* client: source [0,size) and sink [size,2 size); server: one */
    size_t data_len;
    unsigned sends_out; /* Sends posted, not yet completed */
};

static NDK_MR *reg(struct rping *r, void *buf, size_t len, ULONG flags, UINT32 *tok)
{
    NDK_MR *mr;
    NTSTATUS st = r->pd->Dispatch->NdkCreateMr(r->pd, FALSE, create_never, NULL, &mr);
    if (st != STATUS_SUCCESS)
        fail_status("NdkCreateMr", st);
    MDL mdl;
    MmInitializeMdl(&mdl, buf, len);
    struct waiter w;
    w_init(&w);
    st = w_wait(&w, mr->Dispatch->NdkRegisterMr(mr, &mdl, len, flags, w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkRegisterMr", st);
    *tok = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    return mr;
}

static void setup(struct rping *r)
{
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    if (opt.crc >= 0)
        o.Crc = opt.crc ? SoftNdkCrcOn : SoftNdkCrcOff;
    o.MpaRevision = opt.mpa_rev;
    NDK_VERSION v = {2, 0};
    NTSTATUS st = SoftNdkOpenAdapter(0, v, &o, &r->a);
    if (st != STATUS_SUCCESS)
        fail_status("SoftNdkOpenAdapter", st);
    if ((st = r->a->Dispatch->NdkCreatePd(r->a, create_never, NULL, &r->pd)) != STATUS_SUCCESS)
        fail_status("NdkCreatePd", st);
    if ((st = r->a->Dispatch->NdkCreateCq(r->a, 64, on_cq, NULL, NULL, create_never, NULL,
                                          &r->cq)) != STATUS_SUCCESS)
        fail_status("NdkCreateCq", st);
    if ((st = r->pd->Dispatch->NdkCreateQp(r->pd, r->cq, r->cq, NULL, UCMA_MAX_COUNT, 16, 1, 1, 0,
                                           create_never, NULL, &r->qp)) != STATUS_SUCCESS)
        fail_status("NdkCreateQp", st);
    r->ctrl = calloc(1, 2 * CTRL_LEN);
    r->data_len = opt.ucmatose ? 2 * UCMA_MAX_COUNT * (size_t)opt.size
                  : opt.client ? 2 * (size_t)opt.size
                               : (size_t)RPING_MAX_SIZE + 1;
    r->data = calloc(1, r->data_len);
    if (!r->ctrl || !r->data)
        fail(1, "out of memory");
    r->ctrl_mr = reg(r, r->ctrl, 2 * CTRL_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, &r->ctrl_tok);
    /* the client's buffers are read and written by the server; the server's are only the
     * local sink of its Read and the source of its Write */
    ULONG dflags = opt.client ? NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                    NDK_MR_FLAG_ALLOW_REMOTE_WRITE
                              : NDK_MR_FLAG_ALLOW_LOCAL_WRITE;
    r->data_mr = reg(r, r->data, r->data_len, dflags, &r->data_tok);
    r->data_rtok = opt.client ? r->data_mr->Dispatch->NdkGetRemoteTokenFromMr(r->data_mr) : 0;
}

static void teardown(struct rping *r)
{
    close_obj(r->qp->Dispatch->NdkCloseQp, &r->qp->Header);
    close_obj(r->cq->Dispatch->NdkCloseCq, &r->cq->Header);
    close_obj(r->ctrl_mr->Dispatch->NdkCloseMr, &r->ctrl_mr->Header);
    close_obj(r->data_mr->Dispatch->NdkCloseMr, &r->data_mr->Header);
    close_obj(r->pd->Dispatch->NdkClosePd, &r->pd->Header);
    SoftNdkCloseAdapter(r->a);
    free(r->ctrl);
    free(r->data);
}

static void post_recv(struct rping *r)
{
    NDK_SGE g = {.VirtualAddress = r->ctrl, .Length = CTRL_LEN, .MemoryRegionToken = r->ctrl_tok};
    NTSTATUS st = r->qp->Dispatch->NdkReceive(r->qp, r->ctrl, &g, 1);
    if (st != STATUS_SUCCESS)
        fail_status("NdkReceive", st);
}

/* Send the control message {addr, token, len} (all zero: the server's go-ahead). */
static void send_ctrl(struct rping *r, uint64_t addr, uint32_t token, uint32_t len)
{
    uint8_t *m = r->ctrl + CTRL_LEN;
    uint64_t a = htobe64(addr);
    uint32_t t = htobe32(token), l = htobe32(len);
    memcpy(m, &a, 8);
    memcpy(m + 8, &t, 4);
    memcpy(m + 12, &l, 4);
    NDK_SGE g = {.VirtualAddress = m, .Length = CTRL_LEN, .MemoryRegionToken = r->ctrl_tok};
    NTSTATUS st = r->qp->Dispatch->NdkSend(r->qp, m, &g, 1, 0);
    if (st != STATUS_SUCCESS)
        fail_status("NdkSend", st);
    r->sends_out++;
}

enum wait_result { GOT_IT, PEER_GONE };

/* Poll until a completion of `type` arrives (Send completions on the way are counted). A
 * failed completion fails the run; the peer's disconnect with nothing pending ends the wait
 * with PEER_GONE. */
static enum wait_result wait_for(struct rping *r, NDK_OPERATION_TYPE type, const char *what,
                                 NDK_RESULT_EX *out)
{
    for (;;) {
        NDK_RESULT_EX res;
        if (r->cq->Dispatch->NdkGetCqResultsEx(r->cq, &res, 1) == 1) {
            if (res.Status != STATUS_SUCCESS) {
                if (res.Status == STATUS_CANCELLED && atomic_load(&ev.peer_gone))
                    return PEER_GONE;
                fail(1, "%s: completion %s (0x%08x, provider code 0x%x)%s", what,
                     SoftNdkStatusName(res.Status), (unsigned)res.Status,
                     (unsigned)res.ProviderErrorCode,
                     atomic_load(&ev.peer_gone) ? "; the peer disconnected" : "");
            }
            if (res.Type == NdkOperationTypeSend) {
                r->sends_out--;
                if (type != NdkOperationTypeSend)
                    continue;
            }
            if (res.Type != type)
                fail(1, "%s: a completion of type %d, expected %d", what, (int)res.Type, (int)type);
            if (out)
                *out = res;
            return GOT_IT;
        }
        if (atomic_load(&ev.peer_gone))
            return PEER_GONE;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static void fill_ping(uint8_t *b, unsigned size, int ping, unsigned start)
{
    int cc = snprintf((char *)b, size, RPING_MSG_FMT, ping);
    unsigned c = start;
    for (unsigned i = (unsigned)cc; i < size; i++) {
        b[i] = (uint8_t)c;
        if (++c > LAST_LETTER)
            c = FIRST_LETTER;
    }
    b[size - 1] = 0;
}

static void parse_ip(const char *text, uint16_t port, struct sockaddr_storage *ss, ULONG *len)
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
        fail(2, "'%s' is not an IPv4 or IPv6 address", text);
    }
}

static void disconnect(NDK_CONNECTOR *conn)
{
    struct waiter w;
    w_init(&w);
    NTSTATUS st = w_wait(&w, conn->Dispatch->NdkDisconnect(conn, w_cb, &w));
    if (st != STATUS_SUCCESS && st != STATUS_CONNECTION_INVALID &&
        !(st == STATUS_CONNECTION_RESET && atomic_load(&ev.peer_gone)))
        fail_status("NdkDisconnect", st);
}

/* --bad-stag, server: the Read went to a wrong STag; report how it completed. */
static int bad_read_result(struct rping *r, NDK_CONNECTOR *conn, NDK_LISTENER *lis)
{
    NDK_RESULT_EX res;
    for (;;) {
        if (r->cq->Dispatch->NdkGetCqResultsEx(r->cq, &res, 1) != 1) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (res.Type == NdkOperationTypeRead)
            break;
    }
    printf("ndkrping: server: the RDMA Read with a bad STag completed with %s (0x%08x, "
           "provider code 0x%x)\n",
           SoftNdkStatusName(res.Status), (unsigned)res.Status, (unsigned)res.ProviderErrorCode);
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    close_obj(lis->Dispatch->NdkCloseListener, &lis->Header);
    return res.Status == STATUS_SUCCESS ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* --ucmatose: the exchange of rdma-core's cmatose example (ucmatose), in our words: both sides
 * post -C receives of -S bytes before connecting or accepting; once connected the server sends
 * -C messages, the client receives them all and then sends -C messages back; the server
 * disconnects when it has them. No private data. The server speaks first: against an Initiator
 * that asked for no RTR, RFC 5044 makes it wait for the Initiator's first FPDU (which such a
 * client never sends), so the run ends with the server's Sends held (docs/interop.md). */

static void ucma_post_recvs(struct rping *r)
{
    for (unsigned i = 0; i < opt.count; i++) {
        uint8_t *b = r->data + (size_t)i * opt.size;
        NDK_SGE g = {.VirtualAddress = b, .Length = opt.size, .MemoryRegionToken = r->data_tok};
        NTSTATUS st = r->qp->Dispatch->NdkReceive(r->qp, b, &g, 1);
        if (st != STATUS_SUCCESS)
            fail_status("NdkReceive", st);
    }
}

static void ucma_post_sends(struct rping *r)
{
    uint8_t *src = r->data + (size_t)UCMA_MAX_COUNT * opt.size;
    for (unsigned k = 0; k < opt.size; k++)
        src[k] = (uint8_t)('a' + k % 26);
    for (unsigned i = 0; i < opt.count; i++) {
        NDK_SGE g = {.VirtualAddress = src, .Length = opt.size, .MemoryRegionToken = r->data_tok};
        NTSTATUS st = r->qp->Dispatch->NdkSend(r->qp, src, &g, 1, 0);
        if (st != STATUS_SUCCESS)
            fail_status("NdkSend", st);
        r->sends_out++;
    }
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait until want receives and every Send completed, or until deadline (ms); false then. */
static bool ucma_wait(struct rping *r, unsigned want_recvs, unsigned *got, uint64_t deadline)
{
    while (*got < want_recvs || r->sends_out) {
        NDK_RESULT_EX res;
        if (r->cq->Dispatch->NdkGetCqResultsEx(r->cq, &res, 1) == 1) {
            if (res.Status != STATUS_SUCCESS)
                fail(1, "completion %s (type %d)%s", SoftNdkStatusName(res.Status), (int)res.Type,
                     atomic_load(&ev.peer_gone) ? "; the peer disconnected" : "");
            if (res.Type == NdkOperationTypeSend) {
                r->sends_out--;
            } else if (res.Type == NdkOperationTypeReceive) {
                if (res.BytesTransferred != opt.size)
                    fail(1, "message %u: %u bytes, expected %u", *got, res.BytesTransferred,
                         opt.size);
                (*got)++;
            }
            continue;
        }
        if (mono_ms() > deadline)
            return false;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* A listener on -a (default any) and -p, its connect events to on_connect (tool_sync.c). */
static NDK_LISTENER *listen_here(struct rping *r)
{
    struct sockaddr_storage sa;
    ULONG slen;
    parse_ip(opt.addr ? opt.addr : "0.0.0.0", (uint16_t)opt.port, &sa, &slen);
    NDK_LISTENER *lis;
    NTSTATUS st =
        r->a->Dispatch->NdkCreateListener(r->a, on_connect, NULL, create_never, NULL, &lis);
    if (st != STATUS_SUCCESS)
        fail_status("NdkCreateListener", st);
    struct waiter w;
    w_init(&w);
    if ((st = w_wait(&w, lis->Dispatch->NdkListen(lis, (struct sockaddr *)&sa, slen, w_cb, &w))) !=
        STATUS_SUCCESS)
        fail_status("NdkListen", st);
    return lis;
}

static int ucma_server(struct rping *r)
{
    NDK_LISTENER *lis = listen_here(r);
    NTSTATUS st;
    struct waiter w;
    printf("ndkrping: ucmatose server listening on port %u\n", opt.port);
    uint64_t deadline = mono_ms() + (opt.timeout > 3 ? opt.timeout - 3 : 1) * 1000ull;
    pthread_mutex_lock(&ev.m);
    while (!ev.conn)
        pthread_cond_wait(&ev.c, &ev.m); /* bounded by the watchdog */
    NDK_CONNECTOR *conn = ev.conn;
    pthread_mutex_unlock(&ev.m);
    ucma_post_recvs(r);
    w_init(&w);
    st = w_wait(
        &w, conn->Dispatch->NdkAccept(conn, r->qp, 1, 1, NULL, 0, on_disconnect, NULL, w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkAccept", st);
    /* the exchange takes milliseconds; 10 s after the accept it is over either way (bounded
     * by -W from the start as well) */
    uint64_t after_accept = mono_ms() + 10000u;
    if (after_accept < deadline)
        deadline = after_accept;
    ucma_post_sends(r);
    unsigned got = 0;
    bool done = ucma_wait(r, opt.count, &got, deadline);
    SOFTNDK_COUNTERS c = {.Size = sizeof c};
    SoftNdkQueryCounters(r->a, &c);
    if (!done) {
        printf("ndkrping: ucmatose server: %u of %u Sends completed, %u of %u messages received; "
               "ResponderHeld %llu\n",
               opt.count - r->sends_out, opt.count, got, opt.count,
               (unsigned long long)c.ResponderHeld);
        return 1;
    }
    disconnect(conn);
    printf("ndkrping: ucmatose server: %u sent, %u received (%u bytes each); ResponderHeld %llu\n",
           opt.count, got, opt.size, (unsigned long long)c.ResponderHeld);
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    close_obj(lis->Dispatch->NdkCloseListener, &lis->Header);
    return 0;
}

static int ucma_client(struct rping *r)
{
    struct sockaddr_storage sa, ca;
    ULONG slen, clen;
    parse_ip(opt.addr, (uint16_t)opt.port, &sa, &slen);
    bool loop4 = sa.ss_family == AF_INET &&
                 (ntohl(((struct sockaddr_in *)&sa)->sin_addr.s_addr) >> 24) == 127;
    parse_ip(opt.source                ? opt.source
             : loop4                   ? "127.0.0.1"
             : sa.ss_family == AF_INET ? "0.0.0.0"
                                       : "::",
             0, &ca, &clen);
    NDK_CONNECTOR *conn;
    NTSTATUS st = r->a->Dispatch->NdkCreateConnector(r->a, create_never, NULL, &conn);
    if (st != STATUS_SUCCESS)
        fail_status("NdkCreateConnector", st);
    ucma_post_recvs(r);
    struct waiter w;
    w_init(&w);
    st = w_wait(&w,
                conn->Dispatch->NdkConnect(conn, r->qp, (struct sockaddr *)&ca, clen,
                                           (struct sockaddr *)&sa, slen, 1, 1, NULL, 0, w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkConnect", st);
    w_init(&w);
    st = w_wait(&w, conn->Dispatch->NdkCompleteConnect(conn, on_disconnect, NULL, w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkCompleteConnect", st);
    uint64_t deadline = mono_ms() + (opt.timeout > 3 ? opt.timeout - 3 : 1) * 1000ull;
    unsigned got = 0;
    if (!ucma_wait(r, opt.count, &got, deadline))
        fail(1, "ucmatose client: %u of %u messages received", got, opt.count);
    ucma_post_sends(r);
    if (!ucma_wait(r, opt.count, &got, deadline))
        fail(1, "ucmatose client: %u of %u replies completed", opt.count - r->sends_out, opt.count);
    while (!atomic_load(&ev.peer_gone) && mono_ms() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    bool server_ended = atomic_load(&ev.peer_gone);
    disconnect(conn);
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    printf("ndkrping: ucmatose client: %u received, %u sent (%u bytes each); %s\n", got, opt.count,
           opt.size, server_ended ? "the server disconnected" : "the server did not disconnect");
    return server_ended ? 0 : 1;
}

static int run_server(struct rping *r)
{
    NDK_LISTENER *lis = listen_here(r);
    NTSTATUS st;
    struct waiter w;
    printf("ndkrping: server listening on port %u\n", opt.port);
    fflush(stdout);
    pthread_mutex_lock(&ev.m);
    while (!ev.conn)
        pthread_cond_wait(&ev.c, &ev.m); /* bounded by the watchdog */
    NDK_CONNECTOR *conn = ev.conn;
    pthread_mutex_unlock(&ev.m);
    ULONG ird = 0, ord = 0, pdl = 0;
    conn->Dispatch->NdkGetConnectionData(conn, &ird, &ord, NULL, &pdl);
    debug("connect request: peer IRD %u ORD %u, %u bytes of private data\n", ird, ord, pdl);
    if (opt.reject) {
        st = conn->Dispatch->NdkReject(conn, opt.reject, (ULONG)strlen(opt.reject));
        if (st != STATUS_SUCCESS)
            fail_status("NdkReject", st);
        printf("ndkrping: server rejected the connection with %zu bytes of private data\n",
               strlen(opt.reject));
        close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
        close_obj(lis->Dispatch->NdkCloseListener, &lis->Header);
        return 0;
    }
    post_recv(r);
    w_init(&w);
    st = w_wait(
        &w, conn->Dispatch->NdkAccept(conn, r->qp, 1, 1, NULL, 0, on_disconnect, NULL, w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkAccept", st);
    debug("accepted\n");
    unsigned pings = 0;
    bool we_end = false;
    for (;;) {
        NDK_RESULT_EX res;
        /* the client's source: {address, STag, length} */
        if (wait_for(r, NdkOperationTypeReceive, "receive (read advert)", &res) == PEER_GONE)
            break;
        if (opt.count && pings == opt.count) {
            /* the client finished ping count-1 (it advertises the next one only then): the
             * server disconnects first, without serving this one */
            we_end = true;
            break;
        }
        if (res.BytesTransferred != CTRL_LEN)
            fail(1, "ping %u: a control message of %u bytes, expected %u", pings,
                 res.BytesTransferred, CTRL_LEN);
        uint64_t addr;
        uint32_t tok, len;
        memcpy(&addr, r->ctrl, 8);
        memcpy(&tok, r->ctrl + 8, 4);
        memcpy(&len, r->ctrl + 12, 4);
        addr = be64toh(addr), tok = be32toh(tok), len = be32toh(len);
        debug("read advert: addr %llx stag %x len %u\n", (unsigned long long)addr, tok, len);
        if (len == 0 || len > RPING_MAX_SIZE)
            fail(1, "ping %u: the client advertises %u bytes", pings, len);
        post_recv(r);
        memset(r->data, 0, len + 1u);
        NDK_SGE g = {.VirtualAddress = r->data, .Length = len, .MemoryRegionToken = r->data_tok};
        if (opt.bad_stag)
            tok ^= 0xFFu; /* another key: no region of the peer's has this STag */
        if ((st = r->qp->Dispatch->NdkRead(r->qp, r->data, &g, 1, addr, tok, 0)) != STATUS_SUCCESS)
            fail_status("NdkRead", st);
        if (opt.bad_stag)
            return bad_read_result(r, conn, lis);
        if (wait_for(r, NdkOperationTypeRead, "RDMA Read", &res) == PEER_GONE)
            fail(1, "ping %u: the client left during the RDMA Read", pings);
        if (res.BytesTransferred != len)
            fail(1, "ping %u: the Read brought %u bytes, expected %u", pings, res.BytesTransferred,
                 len);
        if (opt.validate) {
            uint8_t *want = malloc(len);
            if (!want)
                fail(1, "out of memory");
            fill_ping(want, len, (int)pings,
                      FIRST_LETTER + pings % (LAST_LETTER - FIRST_LETTER + 1));
            if (memcmp(want, r->data, len) != 0)
                fail(1, "ping %u: the data read is not rping's pattern", pings);
            free(want);
        }
        if (opt.verbose)
            printf("server ping data: %s\n", (char *)r->data);
        send_ctrl(r, 0, 0, 0); /* go ahead */
        if (wait_for(r, NdkOperationTypeReceive, "receive (write advert)", &res) == PEER_GONE)
            fail(1, "ping %u: the client left before its write advert", pings);
        if (res.BytesTransferred != CTRL_LEN)
            fail(1, "ping %u: a control message of %u bytes", pings, res.BytesTransferred);
        memcpy(&addr, r->ctrl, 8);
        memcpy(&tok, r->ctrl + 8, 4);
        memcpy(&len, r->ctrl + 12, 4);
        addr = be64toh(addr), tok = be32toh(tok), len = be32toh(len);
        post_recv(r);
        uint32_t wlen = (uint32_t)strnlen((char *)r->data, RPING_MAX_SIZE) + 1;
        if (wlen > len)
            fail(1, "ping %u: the client's sink (%u bytes) is smaller than the data (%u)", pings,
                 len, wlen);
        g.Length = wlen;
        if ((st = r->qp->Dispatch->NdkWrite(r->qp, r->data, &g, 1, addr, tok, 0)) != STATUS_SUCCESS)
            fail_status("NdkWrite", st);
        if (wait_for(r, NdkOperationTypeWrite, "RDMA Write", NULL) == PEER_GONE)
            fail(1, "ping %u: the client left during the RDMA Write", pings);
        send_ctrl(r, 0, 0, 0); /* go ahead */
        pings++;
    }
    while (r->sends_out && !atomic_load(&ev.peer_gone))
        wait_for(r, NdkOperationTypeSend, "send", NULL);
    if (we_end) {
        disconnect(conn);
        printf("ndkrping: server: %u pings served%s; the server disconnected\n", pings,
               opt.validate ? ", data validated" : "");
    } else {
        disconnect(conn);
        printf("ndkrping: server: %u pings served%s; the client disconnected\n", pings,
               opt.validate ? ", data validated" : "");
    }
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    close_obj(lis->Dispatch->NdkCloseListener, &lis->Header);
    return pings > 0 ? 0 : 1;
}

/* --bad-stag, client: the server's Read of our source hits a wrong STag: our side refuses it
 * with a Terminate and the connection ends; report how. */
static int bad_advert_result(struct rping *r, NDK_CONNECTOR *conn)
{
    NDK_RESULT_EX res;
    NTSTATUS recv_status = STATUS_PENDING;
    for (;;) {
        if (r->cq->Dispatch->NdkGetCqResultsEx(r->cq, &res, 1) == 1) {
            if (res.Type == NdkOperationTypeReceive) {
                recv_status = res.Status;
                break;
            }
            continue;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    SOFTNDK_COUNTERS c = {.Size = sizeof c};
    SoftNdkQueryCounters(r->a, &c);
    printf("ndkrping: client: after the bad STag the receive completed with %s; Terminates sent: "
           "RDMAP %llu, DDP %llu, MPA %llu\n",
           SoftNdkStatusName(recv_status), (unsigned long long)c.TerminatesSent[0],
           (unsigned long long)c.TerminatesSent[1], (unsigned long long)c.TerminatesSent[2]);
    for (int i = 0; i < SOFTNDK_COUNTERS_TERM_SLOTS && c.TerminateSentCodes[i].Count; i++)
        printf("ndkrping: client: Terminate sent 0x%06x x%llu\n",
               (unsigned)c.TerminateSentCodes[i].Code,
               (unsigned long long)c.TerminateSentCodes[i].Count);
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    return recv_status == STATUS_SUCCESS ? 1 : 0;
}

static int run_client(struct rping *r)
{
    struct sockaddr_storage sa, ca;
    ULONG slen, clen;
    parse_ip(opt.addr, (uint16_t)opt.port, &sa, &slen);
    const char *src = opt.source;
    if (!src) {
        bool loop4 = sa.ss_family == AF_INET &&
                     (ntohl(((struct sockaddr_in *)&sa)->sin_addr.s_addr) >> 24) == 127;
        src = loop4 ? "127.0.0.1" : sa.ss_family == AF_INET ? "0.0.0.0" : "::";
    }
    parse_ip(src, 0, &ca, &clen);
    NDK_CONNECTOR *conn;
    NTSTATUS st = r->a->Dispatch->NdkCreateConnector(r->a, create_never, NULL, &conn);
    if (st != STATUS_SUCCESS)
        fail_status("NdkCreateConnector", st);
    post_recv(r);
    struct waiter w;
    w_init(&w);
    st = w_wait(&w,
                conn->Dispatch->NdkConnect(conn, r->qp, (struct sockaddr *)&ca, clen,
                                           (struct sockaddr *)&sa, slen, 1, 1, NULL, 0, w_cb, &w));
    if (st == STATUS_CONNECTION_REFUSED) {
        uint8_t pd[256];
        ULONG pdl = sizeof pd;
        if (conn->Dispatch->NdkGetConnectionData(conn, NULL, NULL, pd, &pdl) == STATUS_SUCCESS &&
            pdl > 0)
            printf("ndkrping: rejected with %u bytes of private data: %.*s\n", pdl, (int)pdl,
                   (const char *)pd);
        fail_status("NdkConnect", st);
    }
    if (st != STATUS_SUCCESS)
        fail_status("NdkConnect", st);
    w_init(&w);
    st = w_wait(&w, conn->Dispatch->NdkCompleteConnect(conn, on_disconnect, NULL, w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkCompleteConnect", st);
    debug("connected\n");
    uint8_t *source = r->data, *sink = r->data + opt.size;
    unsigned start = FIRST_LETTER, pings = 0;
    bool server_ended = false;
    for (; pings < opt.count; pings++) {
        fill_ping(source, opt.size, (int)pings, start);
        if (++start > LAST_LETTER)
            start = FIRST_LETTER;
        memset(sink, 0, opt.size);
        send_ctrl(r, (uint64_t)(uintptr_t)source, r->data_rtok ^ (opt.bad_stag ? 0xFFu : 0u),
                  opt.size);
        if (opt.bad_stag)
            return bad_advert_result(r, conn);
        NDK_RESULT_EX res;
        if (wait_for(r, NdkOperationTypeReceive, "receive (go-ahead after the read)", &res) ==
            PEER_GONE) {
            server_ended = true;
            break;
        }
        if (res.BytesTransferred != CTRL_LEN)
            fail(1, "ping %u: a go-ahead of %u bytes, expected %u", pings, res.BytesTransferred,
                 CTRL_LEN);
        post_recv(r);
        send_ctrl(r, (uint64_t)(uintptr_t)sink, r->data_rtok, opt.size);
        if (wait_for(r, NdkOperationTypeReceive, "receive (go-ahead after the write)", &res) ==
            PEER_GONE)
            fail(1, "ping %u: the server left before its write completed", pings);
        if (res.BytesTransferred != CTRL_LEN)
            fail(1, "ping %u: a go-ahead of %u bytes", pings, res.BytesTransferred);
        post_recv(r);
        if (opt.validate && memcmp(source, sink, opt.size) != 0)
            fail(1, "ping %u: data mismatch", pings);
        if (opt.verbose)
            printf("ping data: %s\n", (char *)sink);
    }
    while (r->sends_out && !atomic_load(&ev.peer_gone))
        wait_for(r, NdkOperationTypeSend, "send", NULL);
    disconnect(conn);
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    printf("ndkrping: client: %u pings%s; %s\n", pings, opt.validate ? ", data validated" : "",
           server_ended ? "the server disconnected" : "the client disconnected");
    return pings > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);
    struct rping r;
    memset(&r, 0, sizeof r);
    setup(&r);
    int rc = opt.ucmatose ? (opt.server ? ucma_server(&r) : ucma_client(&r))
             : opt.server ? run_server(&r)
                          : run_client(&r);
    teardown(&r);
    return rc;
}
