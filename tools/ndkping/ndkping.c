/* ndkping: connectivity and Send/Receive check in the style of Windows' NDKPing, on softndk's
 * public NDKPI interface.
 *
 *   ndkping -S -ServerAddr IP:PORT [options]                 server: answers one client
 *   ndkping -C -ServerAddr IP:PORT -ClientAddr IP [options]  client
 *
 * The client sends --count messages of --size bytes, each with a per-message pattern; the server
 * checks each one and sends it back; the client checks the echo. Both print the adapter, the
 * negotiated connection (IRD/ORD, private data sizes, addresses) and "NdkPing completes." on
 * success; otherwise a one-line reason on stderr and exit status 1 (3: the provider build does
 * not support connections or Send/Receive yet, 2: bad command line). */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <ndk/softndk.h>

#include "tool_sync.h"

#define PING_MAGIC "NDKPING1"
#define MAX_SIZE (1u << 24)
#define PD_LEN 16 /* magic, count, size */

static struct {
    bool server, client;
    const char *server_addr, *client_addr;
    unsigned count, size, timeout, ifindex;
    bool verbose;
} opt = {.count = 10, .size = 64, .timeout = 30};

static _Noreturn void fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void fail(int code, const char *fmt, ...)
{
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&once);
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ndkping: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    _exit(code);
}

static _Noreturn void fail_status(const char *call, NTSTATUS st, const char *hint)
{
    if (st == STATUS_NOT_SUPPORTED || st == STATUS_NOT_IMPLEMENTED)
        fail(3, "%s: %s (not supported by this provider build)", call, SoftNdkStatusName(st));
    fail(1, "%s: %s%s%s%s", call, SoftNdkStatusName(st), hint ? " (" : "", hint ? hint : "",
         hint ? ")" : "");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ndkping -S -ServerAddr IP:PORT [options]\n"
            "       ndkping -C -ServerAddr IP:PORT -ClientAddr IP [options]\n"
            "  -S, -s, --server          wait for one client and echo its messages\n"
            "  -C, -c, --client          connect, send, check the echo\n"
            "  -ServerAddr, --server-addr IP:PORT   ([IPv6]:PORT for IPv6)\n"
            "  -ClientAddr, --client-addr IP        the client's local address\n"
            "  -ServerIf/-ClientIf, -d IFINDEX|NAME the adapter's interface (default: every address)\n"
            "  --count N                 messages (client; default 10)\n"
            "  --size BYTES              message size (client; default 64)\n"
            "  -W, --timeout S           give up after S seconds (default 30)\n"
            "  -V, --verbose             print each message\n");
}

static void *watchdog(void *arg)
{
    (void)arg;
    struct timespec ts = {.tv_sec = opt.timeout, .tv_nsec = 0};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
    fail(1, "timeout: no result after %u s", opt.timeout);
}

/* ------------------------------------------------------------------------------------------ */


static void on_cq(void *ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

/* ------------------------------------------------------------------------------------------ */

static void parse_addr(const char *text, struct sockaddr_storage *ss, ULONG *len, bool want_port)
{
    char host[128];
    unsigned port = 0;
    memset(ss, 0, sizeof *ss);
    const char *colon = strrchr(text, ':');
    if (text[0] == '[') {
        const char *end = strchr(text, ']');
        if (!end || (size_t)(end - text - 1) >= sizeof host)
            fail(2, "bad address '%s'", text);
        memcpy(host, text + 1, (size_t)(end - text - 1));
        host[end - text - 1] = 0;
        colon = end[1] == ':' ? end + 1 : NULL;
    } else if (colon && strchr(text, ':') == colon) {
        if ((size_t)(colon - text) >= sizeof host)
            fail(2, "bad address '%s'", text);
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = 0;
    } else {
        snprintf(host, sizeof host, "%s", text);
        colon = NULL;
    }
    if (colon) {
        char *end;
        unsigned long p = strtoul(colon + 1, &end, 10);
        if (*end || p > 65535)
            fail(2, "bad port in '%s'", text);
        port = (unsigned)p;
    } else if (want_port) {
        fail(2, "-ServerAddr wants IP:PORT, not '%s'", text);
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
    } else {
        fail(2, "'%s' is not an IPv4 or IPv6 address", host);
    }
}

static const char *addr_text(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        snprintf(buf, cap, "%s:%u", ip, ntohs(a->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        snprintf(buf, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        snprintf(buf, cap, "?");
    }
    return buf;
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

static bool is(const char *a, const char *n1, const char *n2)
{
    return strcasecmp(a, n1) == 0 || (n2 && strcmp(a, n2) == 0);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-S") == 0 || strcmp(a, "-s") == 0 || strcmp(a, "--server") == 0)
            opt.server = true;
        else if (strcmp(a, "-C") == 0 || strcmp(a, "-c") == 0 || strcmp(a, "--client") == 0)
            opt.client = true;
        else if (is(a, "-ServerAddr", "--server-addr"))
            opt.server_addr = v, i++;
        else if (is(a, "-ClientAddr", "--client-addr"))
            opt.client_addr = v, i++;
        else if (is(a, "-ServerIf", "-d") || is(a, "-ClientIf", "--ib-dev")) {
            if (!v)
                fail(2, "%s wants an interface", a);
            opt.ifindex = (v[0] >= '0' && v[0] <= '9') ? number(a, v, 0, 1u << 30)
                                                       : if_nametoindex(v);
            if (!opt.ifindex && !(v[0] >= '0' && v[0] <= '9'))
                fail(2, "no network interface named '%s'", v);
            i++;
        } else if (is(a, "-count", "--count") || strcmp(a, "-n") == 0)
            opt.count = number(a, v, 1, 1000000), i++;
        else if (is(a, "-size", "--size"))
            opt.size = number(a, v, 1, MAX_SIZE), i++;
        else if (is(a, "-W", "--timeout"))
            opt.timeout = number(a, v, 1, 86400), i++;
        else if (is(a, "-TestType", NULL)) {
            if (!v || strcasecmp(v, "rping") != 0)
                fail(2, "-TestType: only rping (Send/Receive connectivity) is offered");
            i++;
        } else if (is(a, "-V", "--verbose"))
            opt.verbose = true;
        else if (is(a, "-h", "--help") || strcmp(a, "-?") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            fail(2, "unknown argument '%s'", a);
        }
    }
    if (opt.server == opt.client)
        fail(2, "say -S (server) or -C (client)");
    if (!opt.server_addr)
        fail(2, "-ServerAddr IP:PORT is required");
    if (opt.client && !opt.client_addr)
        fail(2, "-C needs -ClientAddr IP");
}

/* ------------------------------------------------------------------------------------------ */

static void fill(uint8_t *b, unsigned len, unsigned i)
{
    for (unsigned k = 0; k < len; k++)
        b[k] = (uint8_t)(i * 131u + k * 7u + (k >> 8));
}

static long check(const uint8_t *b, unsigned len, unsigned i)
{
    for (unsigned k = 0; k < len; k++)
        if (b[k] != (uint8_t)(i * 131u + k * 7u + (k >> 8)))
            return (long)k;
    return -1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct ctx {
    NDK_CQ *cq;
    NDK_QP *qp;
    UINT32 token;
    uint8_t *tx, *rx;
};

/* Wait for one completion on the CQ (polling; the watchdog bounds it). */
static NDK_RESULT_EX wait_one(struct ctx *c, const char *what)
{
    NDK_RESULT_EX r;
    for (;;) {
        if (c->cq->Dispatch->NdkGetCqResultsEx(c->cq, &r, 1) == 1)
            break;
        if (atomic_load(&ev.peer_gone))
            fail(1, "%s: the peer disconnected", what);
    }
    if (r.Status != STATUS_SUCCESS)
        fail_status(what, r.Status, atomic_load(&ev.peer_gone) ? "the peer disconnected" : NULL);
    return r;
}

static void post_recv(struct ctx *c, unsigned size)
{
    NDK_SGE sge = {.VirtualAddress = c->rx, .Length = size, .MemoryRegionToken = c->token};
    NTSTATUS st = c->qp->Dispatch->NdkReceive(c->qp, c->rx, &sge, 1);
    if (st != STATUS_SUCCESS)
        fail_status("NdkReceive", st, NULL);
}

static void send_msg(struct ctx *c, const uint8_t *buf, unsigned size)
{
    NDK_SGE sge = {.VirtualAddress = (PVOID)buf, .Length = size, .MemoryRegionToken = c->token};
    NTSTATUS st = c->qp->Dispatch->NdkSend(c->qp, (PVOID)buf, &sge, 1, 0);
    if (st != STATUS_SUCCESS)
        fail_status("NdkSend", st, NULL);
}

static void print_adapter(NDK_ADAPTER *a)
{
    NDK_ADAPTER_INFO info;
    ULONG len = sizeof info;
    NTSTATUS st = a->Dispatch->NdkQueryAdapterInfo(a, &info, &len);
    if (st != STATUS_SUCCESS)
        fail_status("NdkQueryAdapterInfo", st, NULL);
    printf("Adapter: softndk %s, NDKPI %u.%u, %s, ifindex %u\n", SoftNdkVersionString(),
           info.Version.Major, info.Version.Minor,
           info.RdmaTechnology == NdkiWarp ? "iWARP" : "other", opt.ifindex);
    printf("  MaxInboundReadLimit %u, MaxOutboundReadLimit %u, MaxCallerData %u, "
           "MaxCalleeData %u,\n  MaxInlineDataSize %u, MaxTransferLength %u, AdapterFlags 0x%x\n",
           info.MaxInboundReadLimit, info.MaxOutboundReadLimit, info.MaxCallerData,
           info.MaxCalleeData, info.MaxInlineDataSize, info.MaxTransferLength, info.AdapterFlags);
}

static void print_connection(NDK_CONNECTOR *c, ULONG ird, ULONG ord, ULONG sent, ULONG got)
{
    struct sockaddr_storage l, p;
    ULONG ll = sizeof l, pl = sizeof p;
    char ls[80] = "?", ps[80] = "?";
    if (c->Dispatch->NdkGetLocalAddress(c, (struct sockaddr *)&l, &ll) == STATUS_SUCCESS)
        addr_text(&l, ls, sizeof ls);
    if (c->Dispatch->NdkGetPeerAddress(c, (struct sockaddr *)&p, &pl) == STATUS_SUCCESS)
        addr_text(&p, ps, sizeof ps);
    printf("Connection: local %s, peer %s\n", ls, ps);
    printf("  IRD %u, ORD %u (effective); private data sent %u bytes, received %u bytes\n", ird,
           ord, sent, got);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);

    printf("NdkPing (softndk %s): %s, Send/Receive check\n", SoftNdkVersionString(),
           opt.server ? "server" : "client");
    NDK_ADAPTER *a;
    NDK_VERSION v = {2, 0};
    NTSTATUS st = SoftNdkOpenAdapter(opt.ifindex, v, NULL, &a);
    if (st != STATUS_SUCCESS)
        fail_status("SoftNdkOpenAdapter", st, NULL);
    print_adapter(a);

    struct ctx c;
    NDK_PD *pd;
    NDK_MR *mr;
    if ((st = a->Dispatch->NdkCreatePd(a, create_never, NULL, &pd)) != STATUS_SUCCESS)
        fail_status("NdkCreatePd", st, NULL);
    if ((st = a->Dispatch->NdkCreateCq(a, 64, on_cq, NULL, NULL, create_never, NULL, &c.cq)) !=
        STATUS_SUCCESS)
        fail_status("NdkCreateCq", st, NULL);
    if ((st = pd->Dispatch->NdkCreateQp(pd, c.cq, c.cq, NULL, 4, 4, 1, 1, 0, create_never, NULL,
                                        &c.qp)) != STATUS_SUCCESS)
        fail_status("NdkCreateQp", st, NULL);
    size_t region = 2 * (size_t)MAX_SIZE;
    uint8_t *mem = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        fail(1, "cannot map buffers: %s", strerror(errno));
    c.tx = mem;
    c.rx = mem + MAX_SIZE;
    if ((st = pd->Dispatch->NdkCreateMr(pd, FALSE, create_never, NULL, &mr)) != STATUS_SUCCESS)
        fail_status("NdkCreateMr", st, NULL);
    MDL mdl;
    MmInitializeMdl(&mdl, mem, region);
    struct waiter w;
    w_init(&w);
    st = w_wait(&w, mr->Dispatch->NdkRegisterMr(mr, &mdl, region, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                                w_cb, &w));
    if (st != STATUS_SUCCESS)
        fail_status("NdkRegisterMr", st, NULL);
    c.token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);

    struct sockaddr_storage saddr, caddr;
    ULONG slen, clen;
    parse_addr(opt.server_addr, &saddr, &slen, true);
    char stext[80];
    addr_text(&saddr, stext, sizeof stext);
    NDK_CONNECTOR *conn = NULL;
    NDK_LISTENER *lis = NULL;
    unsigned count = opt.count, size = opt.size;
    uint8_t pdata[PD_LEN] = {0};
    memcpy(pdata, PING_MAGIC, 8);
    ULONG ird = 0, ord = 0, pd_got = sizeof pdata;
    uint8_t theirs[256];
    ULONG tlen = sizeof theirs;

    if (opt.server) {
        if ((st = a->Dispatch->NdkCreateListener(a, on_connect, NULL, create_never, NULL, &lis)) !=
            STATUS_SUCCESS)
            fail_status("NdkCreateListener", st, NULL);
        w_init(&w);
        st = w_wait(&w, lis->Dispatch->NdkListen(lis, (struct sockaddr *)&saddr, slen, w_cb, &w));
        if (st != STATUS_SUCCESS)
            fail_status("NdkListen", st, stext);
        struct sockaddr_storage bound;
        ULONG blen = sizeof bound;
        if (lis->Dispatch->NdkGetLocalAddress(lis, (struct sockaddr *)&bound, &blen) ==
            STATUS_SUCCESS)
            addr_text(&bound, stext, sizeof stext); /* port 0 became a real port */
        printf("Listening on %s\n", stext);
        fflush(stdout);
        pthread_mutex_lock(&ev.m);
        while (!ev.conn)
            pthread_cond_wait(&ev.c, &ev.m);
        conn = ev.conn;
        pthread_mutex_unlock(&ev.m);
        st = conn->Dispatch->NdkGetConnectionData(conn, &ird, &ord, theirs, &tlen);
        if (st != STATUS_SUCCESS)
            fail_status("NdkGetConnectionData", st, NULL);
        if (tlen < 16 || memcmp(theirs, PING_MAGIC, 8) != 0) {
            conn->Dispatch->NdkReject(conn, NULL, 0);
            fail(1, "the client is not ndkping (no NDKPING1 private data)");
        }
        memcpy(&count, theirs + 8, 4);
        memcpy(&size, theirs + 12, 4);
        if (!count || !size || size > MAX_SIZE || count > 1000000) {
            conn->Dispatch->NdkReject(conn, NULL, 0);
            fail(1, "the client asks for %u messages of %u bytes: out of range", count, size);
        }
        memcpy(pdata + 8, &count, 4);
        memcpy(pdata + 12, &size, 4);
        post_recv(&c, size);
        ULONG lim = 1;
        w_init(&w);
        st = w_wait(&w, conn->Dispatch->NdkAccept(conn, c.qp, lim, lim, pdata, PD_LEN, on_disconnect,
                                                  NULL, w_cb, &w));
        if (st != STATUS_SUCCESS)
            fail_status("NdkAccept", st, NULL);
        pd_got = tlen;
        print_connection(conn, ird < lim ? ird : lim, ord < lim ? ord : lim, PD_LEN, pd_got);
        printf("Echoing %u messages of %u bytes\n", count, size);
        fflush(stdout);
        /* The echo's Send completion and the client's next message share one CQ and may come
         * in either order; the TX buffer is reused only once its Send completed. */
        bool send_pending = false;
        for (unsigned i = 0; i < count; i++) {
            NDK_RESULT_EX r = wait_one(&c, "receive");
            if (r.Type == NdkOperationTypeSend && send_pending) {
                send_pending = false;
                r = wait_one(&c, "receive");
            }
            if (r.Type != NdkOperationTypeReceive)
                fail(1, "unexpected completion type %d", (int)r.Type);
            if (send_pending) {
                NDK_RESULT_EX s = wait_one(&c, "send");
                if (s.Type != NdkOperationTypeSend)
                    fail(1, "unexpected completion type %d", (int)s.Type);
                send_pending = false;
            }
            if (r.BytesTransferred != size)
                fail(1, "message %u: %u bytes, expected %u", i, r.BytesTransferred, size);
            long bad = check(c.rx, size, i);
            if (bad >= 0)
                fail(1, "message %u: byte %ld is wrong (data check)", i, bad);
            memcpy(c.tx, c.rx, size);
            if (i + 1 < count)
                post_recv(&c, size);
            send_msg(&c, c.tx, size);
            send_pending = true;
            if (opt.verbose)
                printf("  message %u: %u bytes received, checked, echoed\n", i, size);
        }
        if (send_pending && wait_one(&c, "send").Type != NdkOperationTypeSend)
            fail(1, "the last echo did not complete as a Send");
        /* the client disconnects first */
        uint64_t until = now_ns() + 5000000000ull;
        while (!atomic_load(&ev.peer_gone) && now_ns() < until) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        printf("Received and echoed %u messages of %u bytes, every byte checked\n", count, size);
    } else {
        parse_addr(opt.client_addr, &caddr, &clen, false);
        if ((st = a->Dispatch->NdkCreateConnector(a, create_never, NULL, &conn)) != STATUS_SUCCESS)
            fail_status("NdkCreateConnector", st, NULL);
        memcpy(pdata + 8, &count, 4);
        memcpy(pdata + 12, &size, 4);
        post_recv(&c, size);
        ULONG lim = 1;
        printf("Connecting to %s\n", stext);
        fflush(stdout);
        w_init(&w);
        st = w_wait(&w, conn->Dispatch->NdkConnect(conn, c.qp, (struct sockaddr *)&caddr, clen,
                                                   (struct sockaddr *)&saddr, slen, lim, lim, pdata,
                                                   PD_LEN, w_cb, &w));
        if (st != STATUS_SUCCESS)
            fail_status("NdkConnect", st,
                        st == STATUS_CONNECTION_REFUSED ? "is 'ndkping -S' running there?" : stext);
        st = conn->Dispatch->NdkGetConnectionData(conn, &ird, &ord, theirs, &tlen);
        if (st != STATUS_SUCCESS)
            fail_status("NdkGetConnectionData", st, NULL);
        if (tlen < 16 || memcmp(theirs, PING_MAGIC, 8) != 0) {
            conn->Dispatch->NdkReject(conn, NULL, 0);
            fail(1, "the server is not ndkping (no NDKPING1 private data)");
        }
        w_init(&w);
        st = w_wait(&w, conn->Dispatch->NdkCompleteConnect(conn, on_disconnect, NULL, w_cb, &w));
        if (st != STATUS_SUCCESS)
            fail_status("NdkCompleteConnect", st, NULL);
        print_connection(conn, ird, ord, PD_LEN, tlen);
        uint64_t tmin = UINT64_MAX, tmax = 0, tsum = 0;
        for (unsigned i = 0; i < count; i++) {
            fill(c.tx, size, i);
            uint64_t t0 = now_ns();
            send_msg(&c, c.tx, size);
            unsigned seen_recv = 0, seen_send = 0;
            while (!seen_recv || !seen_send) {
                NDK_RESULT_EX r = wait_one(&c, "ping");
                if (r.Type == NdkOperationTypeReceive)
                    seen_recv = 1;
                else
                    seen_send = 1;
                if (r.Type == NdkOperationTypeReceive) {
                    if (r.BytesTransferred != size)
                        fail(1, "echo %u: %u bytes, expected %u", i, r.BytesTransferred, size);
                    long bad = check(c.rx, size, i);
                    if (bad >= 0)
                        fail(1, "echo %u: byte %ld is wrong (data check)", i, bad);
                    if (i + 1 < count)
                        post_recv(&c, size);
                }
            }
            uint64_t t = now_ns() - t0;
            tmin = t < tmin ? t : tmin;
            tmax = t > tmax ? t : tmax;
            tsum += t;
            if (opt.verbose)
                printf("  message %u: %u bytes, echo checked, round trip %.1f us\n", i, size,
                       (double)t / 1e3);
        }
        printf("Sent %u messages of %u bytes, every echo checked; round trip min/avg/max "
               "%.1f/%.1f/%.1f us\n",
               count, size, (double)tmin / 1e3, (double)tsum / count / 1e3, (double)tmax / 1e3);
    }
    w_init(&w);
    st = w_wait(&w, conn->Dispatch->NdkDisconnect(conn, w_cb, &w));
    if (st != STATUS_SUCCESS && st != STATUS_CONNECTION_INVALID)
        fail_status("NdkDisconnect", st, NULL);
    close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    close_obj(c.qp->Dispatch->NdkCloseQp, &c.qp->Header);
    close_obj(c.cq->Dispatch->NdkCloseCq, &c.cq->Header);
    close_obj(mr->Dispatch->NdkCloseMr, &mr->Header);
    close_obj(pd->Dispatch->NdkClosePd, &pd->Header);
    if (lis)
        close_obj(lis->Dispatch->NdkCloseListener, &lis->Header);
    SoftNdkCloseAdapter(a);
    munmap(mem, region);
    printf("NdkPing completes.\n");
    return 0;
}
