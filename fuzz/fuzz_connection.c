/* libFuzzer target: a whole connection against a REAL listener, through the public interface.
 *
 * Input: u16 (little-endian) length L of the MPA Request part, L bytes sent first as the MPA
 * Request, the rest sent as the stream once the connection is accepted (a valid input has the
 * RTR then FPDUs there). The peer is a raw TCP socket on 127.0.0.1.
 *
 * Per input: connect the raw socket to the listener; send the Request part; if a connect event
 * comes, NdkAcceptEx it onto a fresh QP with receives posted into a registered region; read the
 * Reply; send the stream part; poll the CQ until it is quiet; then close everything (raw socket
 * first, then connector and QP). Checks (abort() = a finding):
 *   - no callback is called twice: connect event (one per raw connection), accept completion,
 *     disconnect event, each receive completion, each close completion;
 *   - every posted receive completes exactly once by the time the QP's close completes, and
 *     the accept completes exactly once by the time the connector's close completes;
 *   - nothing outside the posted receive buffers changes: canaries fill the registered region
 *     around the buffers and a guard area on both sides of it;
 *   - every wait is bounded (a close that never completes aborts: a hang is a finding).
 * ASan/UBSan catch the rest (the provider is built instrumented with this target). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ndk/ndkpi.h>
#include <ndk/softndk.h>

#ifndef FUZZ_CONNECTION_GEN_SEEDS
#define GUARD 4096u
#define REGION 65536u
#define NRECV 6u
#define CANARY 0xa5u
#define SETTLE_MS 20u
#define MAX_WAIT_MS 300u
#define CLOSE_WAIT_MS 5000u
#define CONNECT_WAIT_MS 5000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void finding(const char *what)
{
    fprintf(stderr, "fuzz_connection: %s\n", what);
    abort();
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* receive buffers inside the region: offset and length; everything else is canary */
static const struct {
    uint32_t off, len;
} rbuf[NRECV] = {{64, 0}, {128, 1}, {256, 64}, {1024, 4096}, {8192, 16384}, {32768, 30000}};

static struct {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_MR *mr;
    UINT32 token;
    NDK_LISTENER *listener;
    uint16_t port;
    uint8_t *arena; /* guard | region (registered) | guard */
} G;

/* per input */
static struct {
    atomic_uint accept_calls, disc_events;
    atomic_uint recv_calls[NRECV];
} I;

/* Connect events, with the peer's port: an event can arrive after its input gave up waiting
 * (a slow machine), so each input takes only the connector of its own raw socket and closes
 * (rejects) any other. Two events for the port of the input's raw connection are a finding.
 * (Ports are reused across inputs: the raw sockets close with RST.) */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    NDK_CONNECTOR *c;
    uint16_t port;
} evq[64];
static unsigned evq_n;

static VOID on_connect(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    struct sockaddr_in peer;
    ULONG len = sizeof peer;
    if (c->Dispatch->NdkGetPeerAddress(c, (struct sockaddr *)&peer, &len) != STATUS_SUCCESS ||
        peer.sin_family != AF_INET)
        finding("NdkGetPeerAddress inside the connect event");
    uint16_t port = ntohs(peer.sin_port);
    pthread_mutex_lock(&ev_mu);
    if (evq_n == sizeof evq / sizeof evq[0])
        finding("64 connect events nobody took");
    evq[evq_n].c = c;
    evq[evq_n++].port = port;
    pthread_mutex_unlock(&ev_mu);
}

static void close_wait(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn, const char *what);

/* The connector of this input's raw connection, if its event came; others are closed. */
static NDK_CONNECTOR *take_incoming(uint16_t mine)
{
    NDK_CONNECTOR *found = NULL, *stale[64];
    unsigned nstale = 0;
    pthread_mutex_lock(&ev_mu);
    for (unsigned i = 0; i < evq_n; i++) {
        if (evq[i].port == mine && found)
            finding("a second connect event for one raw connection");
        if (evq[i].port == mine)
            found = evq[i].c;
        else
            stale[nstale++] = evq[i].c;
    }
    evq_n = 0;
    pthread_mutex_unlock(&ev_mu);
    for (unsigned i = 0; i < nstale; i++)
        close_wait(&stale[i]->Header, stale[i]->Dispatch->NdkCloseConnector,
                   "a stale incoming connector (its raw connection already reset)");
    return found;
}

static VOID on_accept(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
    if (atomic_fetch_add(&I.accept_calls, 1) != 0)
        finding("NdkAccept completed twice");
}

static VOID on_disconnect(PVOID ctx, ULONG reason)
{
    (void)ctx, (void)reason;
    if (atomic_fetch_add(&I.disc_events, 1) != 0)
        finding("two disconnect events");
}

static VOID on_closed(PVOID ctx)
{
    if (atomic_fetch_add((atomic_uint *)ctx, 1) != 0)
        finding("a close completion called twice");
}

static VOID never_create(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *h)
{
    (void)ctx, (void)st, (void)h;
    finding("a create completion was called for a call that returned inline");
}

static VOID never_request(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
    finding("a request completion was called for a call that returned inline");
}

static VOID on_cq(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static void close_wait(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn, const char *what)
{
    atomic_uint done = 0;
    NTSTATUS st = fn(h, on_closed, &done);
    if (st == STATUS_SUCCESS)
        return;
    if (st != STATUS_PENDING)
        finding("a close failed");
    uint64_t end = now_ms() + CLOSE_WAIT_MS;
    while (!atomic_load(&done)) {
        if (now_ms() > end) {
            fprintf(stderr, "fuzz_connection: closing %s %p\n", what, (void *)h);
            finding("a close did not complete within 5 s");
        }
        usleep(200);
    }
}

static void drain_cq(void)
{
    NDK_RESULT_EX r[16];
    ULONG n;
    while ((n = G.cq->Dispatch->NdkGetCqResultsEx(G.cq, r, 16)) > 0) {
        for (ULONG i = 0; i < n; i++) {
            uintptr_t k = (uintptr_t)r[i].RequestContext;
            if (r[i].Type != NdkOperationTypeReceive && r[i].Type != NdkOperationTypeReceiveAndInvalidate)
                finding("a completion of a type never posted");
            if (k < 1 || k > NRECV)
                finding("a completion with a request context never posted");
            if (getenv("FUZZ_CONNECTION_VERBOSE"))
                fprintf(stderr, "fuzz_connection: receive %u: %s, %u bytes\n", (unsigned)k,
                        SoftNdkStatusName(r[i].Status), r[i].BytesTransferred);
            if (atomic_fetch_add(&I.recv_calls[k - 1], 1) != 0)
                finding("a receive completed twice");
            if (r[i].Status == STATUS_SUCCESS && r[i].BytesTransferred > rbuf[k - 1].len)
                finding("a receive reports more bytes than its buffer");
        }
    }
}

static void init_once(void)
{
    if (G.a)
        return;
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.ConnectTimeoutMs = 300;    /* an input that stalls the handshake ends soon */
    o.DisconnectTimeoutMs = 300;
    o.Crc = SoftNdkCrcOff; /* CRC only when the peer asks: both kinds of input connect */
    o.LogLevel = getenv("SOFTNDK_LOG") ? SoftNdkLogDefault : SoftNdkLogError;
    NDK_VERSION v = {2, 0};
    if (SoftNdkOpenAdapter(if_nametoindex("lo"), v, &o, &G.a) != STATUS_SUCCESS)
        finding("SoftNdkOpenAdapter");
    if (G.a->Dispatch->NdkCreatePd(G.a, never_create, NULL, &G.pd) != STATUS_SUCCESS ||
        G.a->Dispatch->NdkCreateCq(G.a, 256, on_cq, NULL, NULL, never_create, NULL, &G.cq) !=
            STATUS_SUCCESS ||
        G.pd->Dispatch->NdkCreateMr(G.pd, FALSE, never_create, NULL, &G.mr) != STATUS_SUCCESS)
        finding("setup");
    G.arena = aligned_alloc(4096, GUARD + REGION + GUARD);
    if (!G.arena)
        finding("out of memory");
    memset(G.arena, CANARY, GUARD + REGION + GUARD);
    MDL mdl;
    MmInitializeMdl(&mdl, G.arena + GUARD, REGION);
    /* local write only: no remote access is granted, so no tagged message may land */
    NTSTATUS st = G.mr->Dispatch->NdkRegisterMr(G.mr, &mdl, REGION, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                                never_request, NULL);
    if (st != STATUS_SUCCESS)
        finding("NdkRegisterMr");
    G.token = G.mr->Dispatch->NdkGetLocalTokenFromMr(G.mr);
    if (G.a->Dispatch->NdkCreateListener(G.a, on_connect, NULL, never_create, NULL,
                                         &G.listener) != STATUS_SUCCESS)
        finding("NdkCreateListener");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (G.listener->Dispatch->NdkListen(G.listener, (struct sockaddr *)&sa, sizeof sa,
                                        never_request, NULL) != STATUS_SUCCESS)
        finding("NdkListen");
    ULONG len = sizeof sa;
    if (G.listener->Dispatch->NdkGetLocalAddress(G.listener, (struct sockaddr *)&sa, &len) !=
        STATUS_SUCCESS)
        finding("NdkGetLocalAddress");
    G.port = ntohs(sa.sin_port);
}

static int raw_connect(uint16_t *local_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        finding("socket");
    struct linger lg = {1, 0}; /* RST on close: no TIME_WAIT pile-up over millions of inputs */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(G.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* Non-blocking, then a bounded wait: libFuzzer's timeout timer (SIGALRM) interrupts a
     * blocking connect() that had to wait (EINTR), which is no finding about the provider. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EINPROGRESS && errno != EINTR) {
            fprintf(stderr, "fuzz_connection: connect: %s\n", strerror(errno));
            finding("raw connect to the listener");
        }
        uint64_t end = now_ms() + CONNECT_WAIT_MS;
        struct pollfd pfd = {fd, POLLOUT, 0};
        int n;
        while ((n = poll(&pfd, 1, 10)) <= 0 && now_ms() < end)
            if (n < 0 && errno != EINTR)
                finding("poll on the raw connect");
        int err = 0;
        socklen_t el = sizeof err;
        if (n <= 0)
            finding("raw connect to the listener did not complete within the bound");
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            fprintf(stderr, "fuzz_connection: connect: %s\n", strerror(err));
            finding("raw connect to the listener");
        }
    }
    socklen_t sl = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        finding("getsockname");
    *local_port = ntohs(sa.sin_port);
    return fd;
}

/* Write what the socket takes within the bound; the provider may stop reading or close. */
static void raw_write(int fd, const uint8_t *p, size_t n)
{
    uint64_t end = now_ms() + MAX_WAIT_MS;
    while (n > 0 && now_ms() < end) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w, n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return;
        struct pollfd pfd = {fd, POLLOUT, 0};
        poll(&pfd, 1, 5);
    }
}

/* Read and drop what the provider sent; false once it closed. */
static bool raw_drain(int fd)
{
    uint8_t sink[4096];
    for (;;) {
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r > 0)
            continue;
        return r < 0 && (errno == EAGAIN || errno == EINTR);
    }
}

static void check_canaries(void)
{
    for (size_t i = 0; i < GUARD; i++)
        if (G.arena[i] != CANARY || G.arena[GUARD + REGION + i] != CANARY)
            finding("a byte outside the registered region changed");
    uint32_t at = 0;
    for (unsigned b = 0; b <= NRECV; b++) {
        uint32_t end = b < NRECV ? rbuf[b].off : REGION;
        for (uint32_t i = at; i < end; i++)
            if (G.arena[GUARD + i] != CANARY)
                finding("a byte of the registered region outside every posted receive changed");
        if (b < NRECV)
            at = rbuf[b].off + rbuf[b].len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 65536)
        return 0;
    init_once();
    size_t req_len = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2, size -= 2;
    if (req_len > size)
        req_len = size;
    const uint8_t *stream = data + req_len;
    size_t stream_len = size - req_len;

    memset(&I, 0, sizeof I);
    memset(G.arena + GUARD, CANARY, REGION);

    uint16_t mine;
    int fd = raw_connect(&mine);
    raw_write(fd, data, req_len);

    /* a connect event, or the provider answered (a rejecting Reply) / closed, or the bound */
    uint64_t end = now_ms() + 100;
    bool open = true;
    NDK_CONNECTOR *c = NULL;
    while (!(c = take_incoming(mine)) && open && now_ms() < end) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 2) > 0)
            open = raw_drain(fd);
    }
    if (!c) {
        close(fd); /* an event that comes later is closed by a later input */
        return 0;
    }

    NDK_QP *qp = NULL;
    if (G.pd->Dispatch->NdkCreateQp(G.pd, G.cq, G.cq, NULL, 16, 16, 1, 1, 0, never_create, NULL,
                                    &qp) != STATUS_SUCCESS)
        finding("NdkCreateQp");
    for (unsigned i = 0; i < NRECV; i++) {
        NDK_SGE g = {.VirtualAddress = G.arena + GUARD + rbuf[i].off, .Length = rbuf[i].len,
                     .MemoryRegionToken = G.token};
        if (qp->Dispatch->NdkReceive(qp, (void *)(uintptr_t)(i + 1), &g, 1) != STATUS_SUCCESS)
            finding("NdkReceive on a new QP");
    }
    unsigned posted = NRECV;
    NTSTATUS st = c->Dispatch->NdkAcceptEx(c, qp, 4, 4, "fuzz", 4, on_disconnect, NULL,
                                           on_accept, NULL);
    if (st != STATUS_PENDING) {
        /* refused inline: no completion may follow (checked by the counter staying 0) */
        if (st == STATUS_SUCCESS)
            finding("NdkAccept returned SUCCESS inline");
    }
    bool accept_pending = st == STATUS_PENDING;

    /* the Reply (and anything else) comes back; then the stream part */
    end = now_ms() + 50;
    while (open && now_ms() < end && !(accept_pending && atomic_load(&I.accept_calls))) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 2) > 0)
            open = raw_drain(fd);
        else
            break; /* the Reply arrives at once after the accept, or never */
    }
    if (open)
        raw_write(fd, stream, stream_len);

    /* poll the CQ (which drives receive) until it has been quiet for SETTLE_MS */
    uint64_t quiet_since = now_ms(), hard = now_ms() + MAX_WAIT_MS;
    while (now_ms() < hard && now_ms() - quiet_since < SETTLE_MS) {
        unsigned before = 0, after = 0;
        for (unsigned i = 0; i < NRECV; i++)
            before += atomic_load(&I.recv_calls[i]);
        drain_cq();
        for (unsigned i = 0; i < NRECV; i++)
            after += atomic_load(&I.recv_calls[i]);
        if (after != before)
            quiet_since = now_ms();
        if (open) {
            struct pollfd pfd = {fd, POLLIN, 0};
            if (poll(&pfd, 1, 0) > 0)
                open = raw_drain(fd);
        }
    }

    /* teardown: the peer vanishes (RST), then the consumer closes */
    close(fd);
    if (take_incoming(mine))
        finding("a second connect event for one raw connection");
    close_wait(&c->Header, c->Dispatch->NdkCloseConnector, "the accepted connector");
    if (accept_pending && atomic_load(&I.accept_calls) != 1)
        finding("the connector closed but NdkAccept never completed");
    close_wait(&qp->Header, qp->Dispatch->NdkCloseQp, "the QP");
    drain_cq();
    for (unsigned i = 0; i < posted; i++)
        if (atomic_load(&I.recv_calls[i]) != 1)
            finding("a posted receive did not complete by the QP's close");
    check_canaries();
    if (getenv("FUZZ_CONNECTION_VERBOSE")) {
        unsigned ok = 0;
        for (unsigned i = 0; i < NRECV; i++)
            ok += atomic_load(&I.recv_calls[i]);
        fprintf(stderr, "fuzz_connection: connected, %u receives completed, accept %s\n", ok,
                atomic_load(&I.accept_calls) ? "completed" : "refused inline");
    }
    return 0;
}

#else /* FUZZ_CONNECTION_GEN_SEEDS */
/* The seed corpus, written with the wire encoders (fuzz/corpus/fuzz_connection/):
 *   clang -DFUZZ_CONNECTION_GEN_SEEDS -D_GNU_SOURCE -Isrc -Iinclude fuzz/fuzz_connection.c \
 *         src/iwarp/{crc32c,fpdu,mpa,parser,terminate}.c -o /tmp/gen && /tmp/gen DIR
 * (the provider is not linked: only main below and the wire layer are used). */
#include <sys/uio.h>

#include "iwarp/fpdu.h"
#include "iwarp/mpa.h"

static uint8_t seed[65536];
static size_t seed_len;

static void put(const void *p, size_t n)
{
    if (seed_len + n > sizeof seed)
        abort();
    memcpy(seed + seed_len, p, n);
    seed_len += n;
}

static void request(uint8_t rev, bool crc, bool p2p)
{
    uint8_t buf[SNDK_MPA_FRAME_MAX];
    struct sndk_mpa_params p = {.rev = rev, .crc = crc, .enhanced = rev == 2, .ird = 4,
                                .ord = 4, .p2p = p2p, .rtr = p2p ? SNDK_MPA_RTR_WRITE : 0,
                                .pdata = "seed", .pdata_len = 4};
    int n = sndk_mpa_build(buf, sizeof buf, false, &p);
    if (n < 0)
        abort();
    seed[0] = (uint8_t)n, seed[1] = (uint8_t)(n >> 8);
    seed_len = 2;
    put(buf, (size_t)n);
}

static void fpdu(const struct sndk_seg_hdr *h, const void *pay, size_t len, bool crc)
{
    struct sndk_fpdu f;
    struct iovec out[4], p = {(void *)pay, len};
    int n = sndk_fpdu_build(&f, h, NULL, 0, &p, len ? 1 : 0, crc, out, 4);
    if (n < 0)
        abort();
    for (int i = 0; i < n; i++)
        put(out[i].iov_base, out[i].iov_len);
}

static void rtr(bool crc)
{
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .last = true, .stag = 1, .to = 0};
    fpdu(&h, NULL, 0, crc);
}

/* One Send of len bytes as FPDUs of at most seg bytes of payload. */
static void send_msg(uint32_t msn, size_t len, size_t seg, bool crc)
{
    static uint8_t pay[65536];
    for (size_t i = 0; i < len; i++)
        pay[i] = (uint8_t)(i * 7 + msn);
    size_t off = 0;
    do {
        size_t k = len - off < seg ? len - off : seg;
        struct sndk_seg_hdr h = {.opcode = SNDK_OP_SEND, .last = off + k == len, .qn = 0,
                                 .msn = msn, .mo = (uint32_t)off};
        fpdu(&h, pay + off, k, crc);
        off += k;
    } while (off < len);
}

static void write_seed(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(seed, 1, seed_len, f) != seed_len || fclose(f) != 0)
        abort();
    printf("%s: %zu bytes\n", path, seed_len);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    /* rev 2, CRC, peer-to-peer with a Write RTR, then Sends into the posted receives (posting
     * order: 0, 1, 64, 4096, 16384, 30000 bytes) */
    request(2, true, true);
    rtr(true);
    send_msg(1, 0, 1024, true);
    send_msg(2, 1, 1024, true);
    send_msg(3, 64, 1024, true);
    send_msg(4, 4096, 1400, true);
    write_seed(dir, "p2p_crc_sends");
    request(2, false, true);
    rtr(false);
    send_msg(1, 0, 1024, false);
    send_msg(2, 1, 1024, false);
    send_msg(3, 64, 1024, false);
    send_msg(4, 4000, 4000, false);
    send_msg(5, 16384, 8192, false);
    write_seed(dir, "p2p_nocrc_sends");
    /* a Send longer than its receive (64 bytes into the 1-byte buffer) */
    request(2, true, true);
    rtr(true);
    send_msg(1, 0, 1024, true);
    send_msg(2, 64, 1024, true);
    write_seed(dir, "p2p_overflow");
    /* rev 1: no RTR, Sends right after the Reply */
    request(1, true, false);
    send_msg(1, 0, 1024, true);
    send_msg(2, 1, 1024, true);
    write_seed(dir, "rev1_sends");
    /* only the request */
    request(2, true, true);
    write_seed(dir, "p2p_request_only");
    return 0;
}
#endif
