/* The byte stream over a TCP socket (stream.h): the transport of the iWARP wire. */
#include "datapath/stream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iwarp/fpdu.h"

/* ThreadSanitizer's sendmsg records the call's reads of the caller's bytes after the system
 * call returns, though the kernel copied them during it: on loopback the peer may by then have
 * received them and answered, and the answer been read from this socket by another of our
 * threads (a polling consumer's own receive pass), whose consumer reuses the bytes (an SMB
 * client refilling the buffer the server just read with an RDMA Read). The sanitizer would
 * report a race that the kernel's ordering rules out. In a TSan build the reads are recorded
 * before the call, so before the interceptor's release on the socket that the answer's read
 * acquires, and the interceptor's own late record is ignored. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SNDK_TSAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(SNDK_TSAN_BUILD)
#define SNDK_TSAN_BUILD 1
#endif
#ifdef SNDK_TSAN_BUILD
void __tsan_read_range(void *addr, unsigned long size);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#endif

/* One buffer goes out through send(). Several (an FPDU's header, payload and trailer, each its
 * own iovec) of at most TCP_GATHER_MAX bytes in all are gathered into one first: sendmsg copies
 * the message header and the iovec array in from the caller and each piece into the socket
 * buffer in turn, which for a few bytes costs more than the gathering copy (docs/datapath.md,
 * "Small messages: one buffer"). Larger batches keep sendmsg: there the copy is the cost. */
#define TCP_GATHER_MAX 2048u

static ssize_t tcp_send(int fd, const struct iovec *iov, int n)
{
    const int flags = MSG_NOSIGNAL | MSG_DONTWAIT;
    if (n == 1)
        return send(fd, iov[0].iov_base, iov[0].iov_len, flags);
    size_t total = 0; /* the lengths first: a large batch copies nothing */
    for (int i = 0; i < n && total <= TCP_GATHER_MAX; i++)
        total += iov[i].iov_len;
    if (total > TCP_GATHER_MAX) {
        struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
        return sendmsg(fd, &mh, flags);
    }
    uint8_t buf[TCP_GATHER_MAX];
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    return send(fd, buf, at, flags);
}

static ssize_t tcp_writev(struct sndk_stream *s, const struct iovec *iov, int n)
{
#ifdef SNDK_TSAN_BUILD
    for (int i = 0; i < n; i++)
        __tsan_read_range(iov[i].iov_base, iov[i].iov_len);
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
    ssize_t w = tcp_send(s->fd, iov, n);
    int err = errno;
#ifdef SNDK_TSAN_BUILD
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
    return w < 0 ? -(err == EWOULDBLOCK ? EAGAIN : err) : w;
}

/* One buffer (a staged read: headers and small messages) is a recv; several (payload straight
 * into a posted buffer, then the trailer and the next header) a readv. The socket is
 * non-blocking (the link's contract). */
static ssize_t tcp_readv(struct sndk_stream *s, const struct iovec *iov, int n)
{
    ssize_t got = n == 1 ? recv(s->fd, iov[0].iov_base, iov[0].iov_len, 0) : readv(s->fd, iov, n);
    return got < 0 ? -(errno == EWOULDBLOCK ? EAGAIN : errno) : got;
}

static int tcp_peek(struct sndk_stream *s)
{
    uint8_t b;
    ssize_t got = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0)
        return 1;
    if (got == 0)
        return -EPIPE; /* the peer's end of stream */
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

static void tcp_shutdown_write(struct sndk_stream *s)
{
    shutdown(s->fd, SHUT_WR);
}

static int tcp_error(struct sndk_stream *s)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return errno;
    return err;
}

/* docs/wire.md: one FPDU per TCP segment. TCP_MAXSEG of a young connection is bounded by half
 * the peer's window seen so far (32 KiB on a fresh loopback socket), so the MSS this end
 * advertises (its MTU) decides whether the link is loopback-sized. */
static uint32_t tcp_fpdu_max(struct sndk_stream *s)
{
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
        ti.tcpi_advmss + 3u >= SNDK_FPDU_MAX_DEFAULT)
        return SNDK_FPDU_MAX_DEFAULT;
    int mss = 0;
    socklen_t len = sizeof mss;
    uint32_t max = SNDK_FPDU_MAX_DEFAULT;
    if (getsockopt(s->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0 &&
        (uint32_t)mss < max) {
        max = (uint32_t)mss & ~3u;
        if (max < 1024)
            max = 1024; /* a tiny MSS (tunnels, odd links): let TCP segment */
    }
    return max;
}

static void tcp_close(struct sndk_stream *s, bool abort)
{
    if (abort) { /* RST: a zero linger makes close reset the connection */
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    close(s->fd);
    s->fd = -1;
}

static const struct sndk_stream_ops tcp_ops = {
    .name = "tcp",
    .writev = tcp_writev,
    .readv = tcp_readv,
    .peek = tcp_peek,
    .shutdown_write = tcp_shutdown_write,
    .error = tcp_error,
    .fpdu_max = tcp_fpdu_max,
    .close = tcp_close,
    .parked_quiet = true, /* recv returns the reset or the FIN */
};

void sndk_stream_tcp_init(struct sndk_stream *s, int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->ops = &tcp_ops;
    s->fd = fd;
    s->priv = NULL;
    s->write_ended = false;
}
