/* libFuzzer target: the inbound placement path of an attached QP (RDMA Write, Read Request,
 * Read Response, Send with Invalidate) against registered memory surrounded by canaries.
 *
 * Set-up, once: an adapter, a PD, and one arena of pages filled with a canary pattern, in which
 *   - an FR MR (pages 2 and 5, FBO 100, base VA 0x10064 = 0x10000 + FBO, remote read/write),
 *   - an NdkRegisterMr MR over pages 8-9 (remote read/write), with a read-only window over its
 *     first 1000 bytes,
 *   - an FR MR fast-registered then invalidated (its token is stale),
 *   - a receive buffer (page 12) and a Read sink (page 14, 300 bytes)
 * are the only writable ranges. Tokens are deterministic (fresh process), so seeds can name
 * them: FR 0x000001xx, see fuzz/corpus/fuzz_placement.
 *
 * Per input: a fresh QP attached to one end of a socketpair (CRC off, IRD 4, ORD 4), one Read
 * posted (its private sink STag is 0x000001a5 for MSN 1, TO 0) and one receive; the input is
 * written to the other end, which is then shut; the QP runs until the peer's FIN or a fault
 * ends it; its close completes. Then every byte outside the writable ranges must equal the
 * canary (abort() otherwise), and the arena is restored. ASan/UBSan catch the rest. */
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/adapter_state.h"
#include "datapath/link.h"
#include "device/mr.h"
#include "device/qp_state.h"
#include <ndk/ndkpi.h>
#include <ndk/softndk.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PG 4096u
#define NPAGES 16u
#define WAIT_MS 2000u

struct span {
    size_t off, len;
};

static struct {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_MR *local, *fr, *mr, *stale;
    NDK_MW *mw;
    uint32_t ltok;
    uint8_t *arena, *snap;
    struct span w[6];
    int nw;
} G;

static void finding(const char *what)
{
    fprintf(stderr, "fuzz_placement: %s\n", what);
    abort();
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static atomic_int ended, closed;
static void ev_peer_closed(void *c) { (void)c; atomic_store(&ended, 1); }
static void ev_aborted(void *c, NTSTATUS s, ULONG r) { (void)c, (void)s, (void)r; atomic_store(&ended, 1); }
static void ev_shut(void *c, NTSTATUS s) { (void)c, (void)s; atomic_store(&ended, 1); }
static const struct sndk_link_events events = {ev_peer_closed, ev_aborted, ev_shut};
static VOID on_cq(PVOID c, NTSTATUS s) { (void)c, (void)s; }
static VOID on_closed(PVOID c) { (void)c; atomic_store(&closed, 1); }

static void drain(int fd)
{
    uint8_t sink[8192];
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
}

static void poll_all(void)
{
    NDK_RESULT_EX r[16];
    while (G.cq->Dispatch->NdkGetCqResultsEx(G.cq, r, 16) > 0)
        ;
}

static NDK_QP *connect_qp(int *raw)
{
    NDK_QP *qp;
    if (G.pd->Dispatch->NdkCreateQp(G.pd, G.cq, G.cq, NULL, 8, 8, 4, 4, 0, NULL, NULL, &qp) !=
        STATUS_SUCCESS)
        finding("create QP");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        finding("socketpair");
    struct sndk_link_params p = {.fd = sv[0], .crc = false, .mpa_rev = 2, .ird = 4, .ord = 4};
    atomic_store(&ended, 0);
    if (sndk_qp_attach((struct sndk_qp *)qp, &p, &events, NULL) != 0)
        finding("attach");
    *raw = sv[1];
    return qp;
}

static void close_qp(NDK_QP *qp)
{
    atomic_store(&closed, 0);
    NTSTATUS st = qp->Dispatch->NdkCloseQp(&qp->Header, on_closed, NULL);
    uint64_t end = now_ms() + WAIT_MS * 5;
    while (st == STATUS_PENDING && !atomic_load(&closed)) {
        poll_all();
        if (now_ms() > end)
            finding("QP close never completed");
        usleep(100);
    }
    poll_all();
}

static void wait_done(NDK_QP *qp, int raw)
{
    (void)qp;
    uint64_t end = now_ms() + WAIT_MS;
    while (!atomic_load(&ended) && now_ms() < end) {
        poll_all(); /* drives receive progress */
        drain(raw);
        struct pollfd pf = {.fd = raw, .events = POLLIN};
        poll(&pf, 1, 1);
    }
}

static NDK_MR *fr_make(NDK_QP *qp, const uint64_t *pages, ULONG n, ULONG fbo, SIZE_T len,
                       uint64_t base, ULONG flags)
{
    NDK_MR *mr;
    if (G.pd->Dispatch->NdkCreateMr(G.pd, TRUE, NULL, NULL, &mr) ||
        mr->Dispatch->NdkInitializeFastRegisterMr(mr, 4, TRUE, NULL, NULL))
        finding("FR MR");
    NDK_LOGICAL_ADDRESS la[4];
    for (ULONG i = 0; i < n; i++)
        la[i].QuadPart = (int64_t)pages[i];
    if (qp->Dispatch->NdkFastRegister(qp, NULL, mr, n, la, fbo, len, (void *)(uintptr_t)base,
                                      flags | NDK_OP_FLAG_SILENT_SUCCESS))
        finding("fast register");
    return mr;
}

static void setup(void)
{
    NDK_VERSION v = {2, 0};
    if (SoftNdkOpenAdapter(if_nametoindex("lo"), v, NULL, &G.a))
        finding("open adapter");
    if (G.a->Dispatch->NdkCreatePd(G.a, NULL, NULL, &G.pd))
        finding("create PD");
    NTSTATUS st = G.a->Dispatch->NdkCreateCq(G.a, 4096, on_cq, NULL, NULL, NULL, NULL, &G.cq);
    if (st) {
        fprintf(stderr, "NdkCreateCq: 0x%08x\n", (unsigned)st);
        finding("create CQ");
    }
    G.arena = aligned_alloc(PG, NPAGES * PG);
    G.snap = malloc(NPAGES * PG);
    for (size_t i = 0; i < NPAGES * PG; i++)
        G.arena[i] = (uint8_t)(0x5a ^ (i * 131));
    memcpy(G.snap, G.arena, NPAGES * PG);
    MDL mdl;
    /* local MR over everything (receive and sink SGEs), local write only */
    if (G.pd->Dispatch->NdkCreateMr(G.pd, FALSE, NULL, NULL, &G.local))
        finding("MR");
    MmInitializeMdl(&mdl, G.arena, NPAGES * PG);
    if (G.local->Dispatch->NdkRegisterMr(G.local, &mdl, NPAGES * PG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                         NULL, NULL))
        finding("register local");
    G.ltok = G.local->Dispatch->NdkGetLocalTokenFromMr(G.local);
    if (G.pd->Dispatch->NdkCreateMr(G.pd, FALSE, NULL, NULL, &G.mr))
        finding("MR");
    MmInitializeMdl(&mdl, G.arena + 8 * PG, 2 * PG);
    if (G.mr->Dispatch->NdkRegisterMr(G.mr, &mdl, 2 * PG,
                                      NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                          NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                      NULL, NULL))
        finding("register remote");
    /* FR, bind and invalidate need a connected QP */
    int raw;
    NDK_QP *qp = connect_qp(&raw);
    uint64_t p2[2] = {(uintptr_t)(G.arena + 2 * PG), (uintptr_t)(G.arena + 5 * PG)};
    G.fr = fr_make(qp, p2, 2, 100, 2 * PG - 200, 0x10000 + 100,
                   NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    uint64_t p3[1] = {(uintptr_t)(G.arena + 3 * PG)};
    G.stale = fr_make(qp, p3, 1, 0, PG, 0x20000,
                      NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    if (qp->Dispatch->NdkInvalidate(qp, NULL, &G.stale->Header, NDK_OP_FLAG_SILENT_SUCCESS))
        finding("invalidate");
    if (G.pd->Dispatch->NdkCreateMw(G.pd, NULL, NULL, &G.mw) ||
        qp->Dispatch->NdkBind(qp, NULL, G.mr, G.mw, G.arena + 8 * PG, 1000,
                              NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_SILENT_SUCCESS))
        finding("bind");
    close(raw);
    close_qp(qp);
    fprintf(stderr, "fuzz_placement: tokens FR 0x%08x MR 0x%08x MW 0x%08x stale 0x%08x, "
                    "MR at %p\n",
            G.fr->Dispatch->NdkGetRemoteTokenFromMr(G.fr),
            G.mr->Dispatch->NdkGetRemoteTokenFromMr(G.mr),
            G.mw->Dispatch->NdkGetRemoteTokenFromMw(G.mw),
            G.stale->Dispatch->NdkGetRemoteTokenFromMr(G.stale), (void *)(G.arena + 8 * PG));
    /* what a peer (or our own receive / Read) may write */
    G.w[G.nw++] = (struct span){2 * PG + 100, PG - 100};
    G.w[G.nw++] = (struct span){5 * PG, PG - 100};
    G.w[G.nw++] = (struct span){8 * PG, 2 * PG};
    G.w[G.nw++] = (struct span){12 * PG, PG};
    G.w[G.nw++] = (struct span){14 * PG, 300};
}

static bool writable(size_t i)
{
    for (int k = 0; k < G.nw; k++)
        if (i >= G.w[k].off && i - G.w[k].off < G.w[k].len)
            return true;
    return false;
}

/* A Send with Invalidate may have invalidated the FR MR or unbound the window: put them back
 * as they were, keys unchanged, so every input sees the same tokens (harness only). */
static void restore_regions(void)
{
    struct sndk_stag_table *t = ((struct sndk_adapter *)G.a)->stags;
    struct sndk_mr *fr = (struct sndk_mr *)G.fr, *mr = (struct sndk_mr *)G.mr;
    struct sndk_mw *mw = (struct sndk_mw *)G.mw;
    sndk_mutex_lock(&t->lock);
    if (fr->state != SNDK_MR_FR_VALID)
        fr->state = SNDK_MR_FR_VALID;
    if (!mw->bound) {
        sndk_obj_get(&mr->base);
        atomic_fetch_add(&mr->windows, 1);
        mw->mr = mr;
        mw->va = (uintptr_t)(G.arena + 8 * PG);
        mw->length = 1000;
        mw->access = SNDK_ACCESS_REMOTE_READ;
        mw->bound = true;
    }
    sndk_mutex_unlock(&t->lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!G.a)
        setup();
    if (size > 1 << 16)
        return 0;
    int raw;
    NDK_QP *qp = connect_qp(&raw);
    NDK_SGE rs = {.VirtualAddress = G.arena + 12 * PG, .Length = PG, .MemoryRegionToken = G.ltok};
    NDK_SGE ss = {.VirtualAddress = G.arena + 14 * PG, .Length = 300, .MemoryRegionToken = G.ltok};
    if (qp->Dispatch->NdkReceive(qp, NULL, &rs, 1) ||
        qp->Dispatch->NdkRead(qp, NULL, &ss, 1, 0x10064, 0x12345678, 0))
        finding("post");
    size_t off = 0;
    uint64_t end = now_ms() + WAIT_MS;
    while (off < size && !atomic_load(&ended) && now_ms() < end) {
        ssize_t w = send(raw, data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
            break;
        drain(raw);
        poll_all();
    }
    shutdown(raw, SHUT_WR);
    wait_done(qp, raw);
    close_qp(qp);
    close(raw);
    for (size_t i = 0; i < NPAGES * PG; i++)
        if (G.arena[i] != G.snap[i] && !writable(i)) {
            fprintf(stderr, "byte %zu (page %zu + %zu) changed\n", i, i / PG, i % PG);
            finding("memory outside every writable range changed");
        }
    memcpy(G.arena, G.snap, NPAGES * PG);
    restore_regions();
    return 0;
}
