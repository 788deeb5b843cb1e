/* The connection's byte-stream seam (datapath/stream.h): a transport other than TCP plugs in
 * through sndk_link_params.stream_ops and carries every operation unchanged. Here the second
 * transport is an AF_UNIX stream socketpair with a small FPDU size and counted calls: Sends,
 * RDMA Writes and Reads cross it byte-exact in many FPDUs, a Terminate and a graceful
 * shutdown take its paths, and the connection closes it exactly once. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "datapath.h"
#include "datapath/conn.h"
#include "datapath/stream.h"

#define XCTX ((void *)0x1001)
#define YCTX ((void *)0x2002)
#define UNIX_FPDU_MAX 2048u /* small: a 64 KiB message is cut into 32 FPDUs and more */

static atomic_uint writes, reads, shutdowns, closes, aborts;

static ssize_t unix_writev(struct sndk_stream *s, const struct iovec *iov, int n)
{
    atomic_fetch_add(&writes, 1);
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    return w < 0 ? -(errno == EWOULDBLOCK ? EAGAIN : errno) : w;
}

static ssize_t unix_readv(struct sndk_stream *s, const struct iovec *iov, int n)
{
    atomic_fetch_add(&reads, 1);
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    ssize_t got = recvmsg(s->fd, &mh, MSG_DONTWAIT);
    return got < 0 ? -(errno == EWOULDBLOCK ? EAGAIN : errno) : got;
}

static int unix_peek(struct sndk_stream *s)
{
    uint8_t b;
    ssize_t got = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0)
        return 1;
    return got == 0 ? -EPIPE : (errno == EAGAIN ? 0 : -errno);
}

static void unix_shutdown_write(struct sndk_stream *s)
{
    atomic_fetch_add(&shutdowns, 1);
    shutdown(s->fd, SHUT_WR);
}

static int unix_error(struct sndk_stream *s)
{
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
}

static uint32_t unix_fpdu_max(struct sndk_stream *s)
{
    (void)s;
    return UNIX_FPDU_MAX;
}

static void unix_close(struct sndk_stream *s, bool abort)
{
    atomic_fetch_add(&closes, 1);
    if (abort)
        atomic_fetch_add(&aborts, 1);
    close(s->fd);
    s->fd = -1;
}

static const struct sndk_stream_ops unix_ops = {
    .name = "unix-test",
    .writev = unix_writev,
    .readv = unix_readv,
    .peek = unix_peek,
    .shutdown_write = unix_shutdown_write,
    .error = unix_error,
    .fpdu_max = unix_fpdu_max,
    .close = unix_close,
};

static void reset_counts(void)
{
    atomic_store(&writes, 0);
    atomic_store(&reads, 0);
    atomic_store(&shutdowns, 0);
    atomic_store(&closes, 0);
    atomic_store(&aborts, 0);
}

static void attach_unix(struct dp_side *s, int fd)
{
    static const struct sndk_link_events none;
    struct sndk_link_params p = {.fd = fd, .stream_ops = &unix_ops, .crc = true, .mpa_rev = 2,
                                 .ird = 16, .ord = 16};
    s->fd = fd;
    CHECK_EQ_I64(sndk_qp_attach((struct sndk_qp *)s->qp, &p, &none, &s->link), 0);
}

static void open_unix_pair(struct dp_pair *p, struct dp_opts *o)
{
    dp_opts_default(o);
    o->buf_len = 1u << 20;
    memset(p, 0, sizeof *p);
    p->ax = p->ay = dp_open_adapter();
    dp_side_init(&p->x, p->ax, o);
    dp_side_init(&p->y, p->ay, o);
    dp_side_create_qp(&p->x, o, XCTX);
    dp_side_create_qp(&p->y, o, YCTX);
    int sv[2];
    CHECK_EQ_I64(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    reset_counts();
    attach_unix(&p->x, sv[0]);
    attach_unix(&p->y, sv[1]);
}

TEST(a_second_transport_carries_sends_writes_and_reads_in_small_fpdus)
{
    struct dp_opts o;
    struct dp_pair p;
    open_unix_pair(&p, &o);
    const size_t len = 64u * 1024u;
    dp_fill(p.x.buf, len, 7);
    /* Send: one message in at least len / UNIX_FPDU_MAX FPDUs */
    dp_post_recv(&p.y, (void *)0xa1, 0, len);
    dp_post_send(&p.x, (void *)0xb1, 0, len, 0);
    NDK_RESULT_EX r;
    dp_expect(p.x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, len, XCTX, (void *)0xb1, NdkOperationTypeSend);
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, len, YCTX, (void *)0xa1, NdkOperationTypeReceive);
    CHECK_MEM(p.y.buf, p.x.buf, len);
    /* Write into y, then Read it back into another part of x */
    uint32_t ytok = 0;
    NDK_MR *ymr = dp_reg(&p.y, 256u * 1024u, len,
                         NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &ytok);
    dp_fill(p.x.buf + len, len, 9);
    NDK_SGE g = dp_sge(&p.x, len, len);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkWrite(p.x.qp, (void *)0xc1, &g, 1,
                                            (UINT64)(uintptr_t)(p.y.buf + 256u * 1024u), ytok, 0),
                 STATUS_SUCCESS);
    dp_expect(p.x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, len, XCTX, (void *)0xc1, NdkOperationTypeWrite);
    NDK_SGE back = dp_sge(&p.x, 2 * len, len);
    CHECK_EQ_U64(p.x.qp->Dispatch->NdkRead(p.x.qp, (void *)0xd1, &back, 1,
                                           (UINT64)(uintptr_t)(p.y.buf + 256u * 1024u), ytok, 0),
                 STATUS_SUCCESS);
    dp_expect(p.x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, len, XCTX, (void *)0xd1, NdkOperationTypeRead);
    CHECK_MEM(p.x.buf + 2 * len, p.x.buf + len, len);
    CHECK_MEM(p.y.buf + 256u * 1024u, p.x.buf + len, len);
    /* every byte went through the seam, in FPDUs of at most UNIX_FPDU_MAX */
    CHECK(atomic_load(&writes) >= 3);
    CHECK(atomic_load(&reads) >= 3);
    CHECK(((struct sndk_qp *)p.x.qp)->io->txcfg.max_fpdu == UNIX_FPDU_MAX);
    CHECK(((struct sndk_qp *)p.x.qp)->io->rx.fpdus >= len / UNIX_FPDU_MAX);
    CHECK_EQ_U64(atomic_load(&closes), 0);
    dp_close_mr(ymr);
    dp_pair_close(&p);
    /* closed exactly once per side, reset (a close of a live QP is no orderly end) */
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    while (atomic_load(&closes) < 2 && fixture_now_ms() < end)
        usleep(1000);
    CHECK_EQ_U64(atomic_load(&closes), 2);
    CHECK_EQ_U64(atomic_load(&aborts), 2);
}

/* Each side ends its direction once, whichever thread finishes the shutdown (the one that
 * asked, or the progress thread that reads the peer's FIN): 20 rounds to meet both. */
TEST(a_second_transport_ends_gracefully_through_its_shutdown)
{
    for (int round = 0; round < 20; round++) {
        struct dp_opts o;
        struct dp_pair p;
        open_unix_pair(&p, &o);
        sndk_qp_shutdown((struct sndk_qp *)p.x.qp, 5000);
        sndk_qp_shutdown((struct sndk_qp *)p.y.qp, 5000);
        /* both FINs through the seam; each QP then ends with its stream closed, no reset */
        uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
        while (atomic_load(&closes) < 2 && fixture_now_ms() < end)
            usleep(1000);
        CHECK_EQ_U64(atomic_load(&shutdowns), 2);
        CHECK_EQ_U64(atomic_load(&closes), 2);
        CHECK_EQ_U64(atomic_load(&aborts), 0);
        CHECK_EQ_I64(atomic_load(&((struct sndk_qp *)p.x.qp)->state), SNDK_QP_ERROR);
        dp_pair_close(&p);
    }
}
