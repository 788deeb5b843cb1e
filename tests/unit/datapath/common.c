/* Data path test helpers. */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t dp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void dp_fill(uint8_t *p, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

void dp_opts_default(struct dp_opts *o)
{
    *o = (struct dp_opts){.rq_depth = 64, .sq_depth = 64, .rsge = 8, .isge = 8,
                          .inline_size = 256, .cq_depth = 1024, .buf_len = 1 << 20,
                          .crc = true};
}

NDK_ADAPTER *dp_open_adapter(void)
{
    NDK_ADAPTER *a = NULL;
    NDK_VERSION v = {2, 0};
    CHECK_EQ_U64(SoftNdkOpenAdapter(if_nametoindex("lo"), v, NULL, &a), STATUS_SUCCESS);
    return a;
}

static VOID on_cq(PVOID ctx, NTSTATUS st)
{
    struct dp_side *s = ctx;
    s->cq_status = st;
    harness_event_signal(&s->cq_notified);
}

void dp_side_init(struct dp_side *s, NDK_ADAPTER *a, const struct dp_opts *o)
{
    memset(s, 0, sizeof *s);
    s->a = a;
    s->fd = -1;
    harness_event_init(&s->link.peer_closed);
    harness_event_init(&s->link.aborted);
    harness_event_init(&s->link.shutdown_done);
    harness_event_init(&s->cq_notified);
    CHECK_EQ_U64(a->Dispatch->NdkCreatePd(a, NULL, NULL, &s->pd), STATUS_SUCCESS);
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, o->cq_depth, on_cq, s, NULL, NULL, NULL, &s->cq),
                 STATUS_SUCCESS);
    s->len = o->buf_len;
    s->buf = aligned_alloc(4096, (s->len + 4095) & ~(size_t)4095);
    CHECK(s->buf != NULL);
    memset(s->buf, 0, s->len);
    CHECK_EQ_U64(s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, NULL, NULL, &s->mr), STATUS_SUCCESS);
    MDL mdl;
    MmInitializeMdl(&mdl, s->buf, s->len);
    CHECK_EQ_U64(s->mr->Dispatch->NdkRegisterMr(s->mr, &mdl, s->len,
                                                 NDK_MR_FLAG_ALLOW_LOCAL_WRITE, NULL, NULL),
                 STATUS_SUCCESS);
    s->token = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr);
}

void dp_side_create_qp(struct dp_side *s, const struct dp_opts *o, void *qp_context)
{
    if (s->srq)
        CHECK_EQ_U64(s->pd->Dispatch->NdkCreateQpWithSrq(s->pd, s->cq, s->cq, s->srq, qp_context,
                                                          o->sq_depth, o->isge, o->inline_size,
                                                          NULL, NULL, &s->qp),
                     STATUS_SUCCESS);
    else
        CHECK_EQ_U64(s->pd->Dispatch->NdkCreateQp(s->pd, s->cq, s->cq, qp_context, o->rq_depth,
                                                   o->sq_depth, o->rsge, o->isge, o->inline_size,
                                                   NULL, NULL, &s->qp),
                     STATUS_SUCCESS);
}

static VOID on_closed(PVOID ctx)
{
    harness_event_signal(ctx);
}

static void close_obj(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn)
{
    struct harness_event done;
    harness_event_init(&done);
    NTSTATUS st = fn(h, on_closed, &done);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        CHECK_MSG(harness_event_wait(&done, 1, DP_TIMEOUT_MS), "close of a %d did not complete",
                  (int)h->ObjectType);
    harness_event_destroy(&done);
}

void dp_close_mr(NDK_MR *mr)
{
    close_obj(&mr->Header, mr->Dispatch->NdkCloseMr);
}

void dp_close_mw(NDK_MW *mw)
{
    close_obj(&mw->Header, mw->Dispatch->NdkCloseMw);
}

NDK_MR *dp_reg(struct dp_side *s, size_t off, size_t len, ULONG flags, uint32_t *token)
{
    NDK_MR *mr;
    CHECK_EQ_U64(s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, NULL, NULL, &mr), STATUS_SUCCESS);
    MDL mdl;
    MmInitializeMdl(&mdl, s->buf + off, len);
    CHECK_EQ_U64(mr->Dispatch->NdkRegisterMr(mr, &mdl, len, flags, NULL, NULL), STATUS_SUCCESS);
    *token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    return mr;
}

void dp_close_qp(NDK_QP *qp)
{
    close_obj(&qp->Header, qp->Dispatch->NdkCloseQp);
}

void dp_side_close(struct dp_side *s)
{
    if (s->qp)
        close_obj(&s->qp->Header, s->qp->Dispatch->NdkCloseQp);
    if (s->mr)
        close_obj(&s->mr->Header, s->mr->Dispatch->NdkCloseMr);
    if (s->srq)
        close_obj(&s->srq->Header, s->srq->Dispatch->NdkCloseSrq);
    close_obj(&s->cq->Header, s->cq->Dispatch->NdkCloseCq);
    close_obj(&s->pd->Header, s->pd->Dispatch->NdkClosePd);
    free(s->buf);
    s->qp = NULL;
}

static void set_fast(int fd)
{
    int one = 1;
    CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
}

void dp_tcp_pair(int *a, int *b)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(l >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    CHECK(bind(l, (struct sockaddr *)&sin, sizeof sin) == 0);
    CHECK(listen(l, 1) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&sin, &sl) == 0);
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(*a >= 0);
    CHECK(connect(*a, (struct sockaddr *)&sin, sizeof sin) == 0);
    *b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK(*b >= 0);
    close(l);
    set_fast(*a);
    set_fast(*b);
}

static void ev_peer_closed(void *ctx)
{
    struct dp_link *l = ctx;
    harness_event_signal(&l->peer_closed);
}
static void ev_aborted(void *ctx, NTSTATUS st, ULONG reason)
{
    struct dp_link *l = ctx;
    l->abort_status = st;
    l->abort_reason = reason;
    harness_event_signal(&l->aborted);
}
static void ev_shutdown_done(void *ctx, NTSTATUS st)
{
    struct dp_link *l = ctx;
    l->shut_status = st;
    harness_event_signal(&l->shutdown_done);
}

static const struct sndk_link_events dp_events = {ev_peer_closed, ev_aborted, ev_shutdown_done};

void dp_attach(struct dp_side *s, int fd, bool crc)
{
    dp_attach_rd(s, fd, crc, 16, 16);
}

void dp_attach_rd(struct dp_side *s, int fd, bool crc, uint32_t ird, uint32_t ord)
{
    struct sndk_link_params p = {.fd = fd, .thread = 0, .crc = crc, .mpa_rev = 2, .ird = ird,
                                 .ord = ord};
    s->fd = fd;
    CHECK_EQ_I64(sndk_qp_attach((struct sndk_qp *)s->qp, &p, &dp_events, &s->link), 0);
}

void dp_pair_open(struct dp_pair *p, const struct dp_opts *o)
{
    memset(p, 0, sizeof *p);
    p->ax = dp_open_adapter();
    p->ay = o->two_adapters ? dp_open_adapter() : p->ax;
    dp_side_init(&p->x, p->ax, o);
    dp_side_init(&p->y, p->ay, o);
    dp_side_create_qp(&p->x, o, (void *)0x1001);
    dp_side_create_qp(&p->y, o, (void *)0x2002);
    int a, b;
    dp_tcp_pair(&a, &b);
    dp_attach_rd(&p->x, a, o->crc, o->ird ? o->ird : 16, o->ord ? o->ord : 16);
    dp_attach_rd(&p->y, b, o->crc, o->ird_y ? o->ird_y : 16, o->ord_y ? o->ord_y : 16);
}

void dp_pair_close(struct dp_pair *p)
{
    dp_side_close(&p->x);
    dp_side_close(&p->y);
    SoftNdkCloseAdapter(p->ax);
    if (p->ay != p->ax)
        SoftNdkCloseAdapter(p->ay);
}

NDK_SGE dp_sge(struct dp_side *s, size_t off, size_t len)
{
    NDK_SGE g = {.VirtualAddress = s->buf + off, .Length = (ULONG)len,
                 .MemoryRegionToken = s->token};
    return g;
}

void dp_post_recv(struct dp_side *s, void *ctx, size_t off, size_t len)
{
    NDK_SGE g = dp_sge(s, off, len);
    CHECK_EQ_U64(s->qp->Dispatch->NdkReceive(s->qp, ctx, &g, 1), STATUS_SUCCESS);
}

void dp_post_send(struct dp_side *s, void *ctx, size_t off, size_t len, ULONG flags)
{
    NDK_SGE g = dp_sge(s, off, len);
    CHECK_EQ_U64(s->qp->Dispatch->NdkSend(s->qp, ctx, &g, 1, flags), STATUS_SUCCESS);
}

unsigned dp_poll(NDK_CQ *cq, NDK_RESULT_EX *out, unsigned n, unsigned timeout_ms)
{
    unsigned got = 0;
    uint64_t end = dp_now_ms() + timeout_ms;
    while (got < n) {
        got += cq->Dispatch->NdkGetCqResultsEx(cq, out + got, n - got);
        if (got < n && dp_now_ms() > end)
            break;
    }
    return got;
}

void dp_expect(NDK_CQ *cq, NDK_RESULT_EX *out, unsigned n, unsigned settle_ms)
{
    unsigned got = dp_poll(cq, out, n, DP_TIMEOUT_MS);
    CHECK_MSG(got == n, "expected %u completions, got %u", n, got);
    if (settle_ms) {
        NDK_RESULT_EX extra;
        unsigned more = dp_poll(cq, &extra, 1, settle_ms);
        CHECK_MSG(more == 0, "an extra completion: status 0x%08x ctx %p", (unsigned)extra.Status,
                  extra.RequestContext);
    }
}

void dp_check_result(const NDK_RESULT_EX *r, NTSTATUS st, ULONG bytes, void *qpctx, void *ctx,
                     NDK_OPERATION_TYPE type)
{
    CHECK_MSG(r->Status == st, "Status 0x%08x, expected 0x%08x (ctx %p)", (unsigned)r->Status,
              (unsigned)st, r->RequestContext);
    CHECK_MSG(r->BytesTransferred == bytes, "BytesTransferred %u, expected %u (ctx %p)",
              r->BytesTransferred, bytes, r->RequestContext);
    CHECK_MSG(r->QPContext == qpctx, "QPContext %p, expected %p", r->QPContext, qpctx);
    CHECK_MSG(r->RequestContext == ctx, "RequestContext %p, expected %p", r->RequestContext, ctx);
    CHECK_MSG(r->Type == type, "Type %d, expected %d (ctx %p)", (int)r->Type, (int)type,
              r->RequestContext);
}

bool dp_read_exact(int fd, void *buf, size_t len, unsigned timeout_ms)
{
    size_t got = 0;
    uint64_t end = dp_now_ms() + timeout_ms;
    while (got < len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = dp_now_ms();
        if (now > end)
            return false;
        if (poll(&pfd, 1, (int)(end - now)) <= 0)
            return false;
        ssize_t r = recv(fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
        if (r == 0)
            return false;
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return false;
        }
        got += (size_t)r;
    }
    return true;
}

void dp_write_all(int fd, const void *buf, size_t len)
{
    size_t off = 0;
    uint64_t end = dp_now_ms() + DP_TIMEOUT_MS;
    while (off < len) {
        ssize_t w = send(fd, (const uint8_t *)buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            CHECK_MSG(errno == EAGAIN || errno == EINTR, "raw send: errno %d", errno);
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            CHECK(dp_now_ms() < end);
            poll(&pfd, 1, 100);
            continue;
        }
        off += (size_t)w;
    }
}

size_t dp_build_fpdu(uint8_t *out, const struct sndk_seg_hdr *h, const void *pay, size_t len,
                     bool crc)
{
    struct sndk_fpdu f;
    struct iovec iov[4];
    struct iovec p = {(void *)pay, len};
    int n = sndk_fpdu_build(&f, h, NULL, 0, &p, len ? 1 : 0, crc, iov, 4);
    CHECK(n > 0);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    return off;
}

bool dp_wait_closed(int fd, unsigned timeout_ms)
{
    uint64_t end = dp_now_ms() + timeout_ms;
    uint8_t sink[4096];
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = dp_now_ms();
        if (now > end)
            return false;
        if (poll(&pfd, 1, (int)(end - now)) <= 0)
            return false;
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return true;
    }
}
