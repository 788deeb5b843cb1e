/* Direct TCP transport ([MS-SMB2] 2.1): a 4-byte header before each SMB2 message, one zero
 * byte and the 24-bit length in network byte order. */
#include "smb/direct_tcp.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define DTCP_MAX_MESSAGE 0xFFFFFFu /* the 24-bit length field */

struct dtcp {
    smb_transport base;
    int fd;
    smb_transport_stats stats;
    char err[256];
};

static int dtcp_fail(struct dtcp *t, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int dtcp_fail(struct dtcp *t, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof(t->err), fmt, ap);
    va_end(ap);
    return rc;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dtcp_send(smb_transport *base, const void *msg, size_t len)
{
    struct dtcp *t = (struct dtcp *)base;
    if (len == 0 || len > DTCP_MAX_MESSAGE)
        return dtcp_fail(t, -EMSGSIZE, "send of %zu bytes: Direct TCP carries 1..%u", len,
                         DTCP_MAX_MESSAGE);
    uint8_t hdr[4] = {0, (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    struct iovec iov[2] = {{hdr, 4}, {(void *)(uintptr_t)msg, len}};
    size_t left = 4 + len;
    int idx = 0;
    while (left) {
        struct msghdr mh = {.msg_iov = iov + idx, .msg_iovlen = (size_t)(2 - idx)};
        ssize_t n = sendmsg(t->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            return dtcp_fail(t, e == EPIPE || e == ECONNRESET ? -EPIPE : -e, "send: %s",
                             strerror(e));
        }
        left -= (size_t)n;
        while (n > 0) {
            size_t step = (size_t)n < iov[idx].iov_len ? (size_t)n : iov[idx].iov_len;
            iov[idx].iov_base = (uint8_t *)iov[idx].iov_base + step;
            iov[idx].iov_len -= step;
            n -= (ssize_t)step;
            if (iov[idx].iov_len == 0 && idx < 1)
                idx++;
        }
    }
    t->stats.messages_sent++;
    t->stats.fragments_sent++;
    t->stats.bytes_sent += len;
    return 0;
}

/* Reads exactly n bytes into buf (NULL: discard) before the deadline (-1: none). */
static int read_full(struct dtcp *t, uint8_t *buf, size_t n, int64_t deadline)
{
    uint8_t sink[4096];
    while (n) {
        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return dtcp_fail(t, -ETIMEDOUT, "recv: no message within the timeout");
            wait = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        int pr = poll(&p, 1, wait);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return dtcp_fail(t, -errno, "recv: poll: %s", strerror(errno));
        }
        if (pr == 0)
            continue;
        size_t want = buf ? n : (n < sizeof(sink) ? n : sizeof(sink));
        ssize_t r = recv(t->fd, buf ? buf : sink, want, 0);
        if (r == 0)
            return dtcp_fail(t, -ECONNRESET, "recv: the peer closed the connection");
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            int e = errno;
            return dtcp_fail(t, e == ECONNRESET ? -ECONNRESET : -e, "recv: %s", strerror(e));
        }
        if (buf)
            buf += r;
        n -= (size_t)r;
    }
    return 0;
}

static int dtcp_recv(smb_transport *base, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct dtcp *t = (struct dtcp *)base;
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    uint8_t hdr[4];
    int rc = read_full(t, hdr, 4, deadline);
    if (rc)
        return rc;
    if (hdr[0] != 0)
        return dtcp_fail(t, -EPROTO, "recv: Direct TCP header's first byte is 0x%02x, not 0",
                         hdr[0]);
    size_t n = ((size_t)hdr[1] << 16) | ((size_t)hdr[2] << 8) | hdr[3];
    if (n > cap) {
        rc = read_full(t, NULL, n, deadline);
        if (rc)
            return rc;
        return dtcp_fail(t, -EMSGSIZE, "recv: message of %zu bytes exceeds the %zu-byte buffer", n,
                         cap);
    }
    rc = read_full(t, buf, n, deadline);
    if (rc)
        return rc;
    *len = n;
    t->stats.messages_received++;
    t->stats.fragments_received++;
    t->stats.bytes_received += n;
    return 0;
}

static size_t dtcp_max_message(smb_transport *base)
{
    (void)base;
    return DTCP_MAX_MESSAGE;
}

static size_t dtcp_max_rdma(smb_transport *base)
{
    (void)base;
    return 0;
}

static void dtcp_get_stats(smb_transport *base, smb_transport_stats *out)
{
    *out = ((struct dtcp *)base)->stats;
}

static const char *dtcp_error(smb_transport *base)
{
    return ((struct dtcp *)base)->err;
}

static void dtcp_destroy(smb_transport *base)
{
    struct dtcp *t = (struct dtcp *)base;
    if (!t)
        return;
    shutdown(t->fd, SHUT_RDWR);
    close(t->fd);
    free(t);
}

static const smb_transport_ops dtcp_ops = {
    .name = "tcp",
    .send = dtcp_send,
    .recv = dtcp_recv,
    .register_buffer = NULL,
    .release_buffer = NULL,
    .max_message = dtcp_max_message,
    .max_rdma = dtcp_max_rdma,
    .get_stats = dtcp_get_stats,
    .error = dtcp_error,
    .destroy = dtcp_destroy,
};

int smb_direct_tcp_connect(const char *host, uint16_t port, smb_transport **out, char *err,
                           size_t errlen)
{
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, portstr, &hints, &ai);
    if (g != 0) {
        snprintf(err, errlen, "resolve %s: %s", host, gai_strerror(g));
        return -EHOSTUNREACH;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(err, errlen, "connect %s port %u: %s", host, port, strerror(e));
        return -e;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct dtcp *t = calloc(1, sizeof(*t));
    if (!t) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    t->base.ops = &dtcp_ops;
    t->fd = fd;
    *out = &t->base;
    return 0;
}
