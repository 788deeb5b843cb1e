/* Direct TCP ([MS-SMB2] 2.1), server side: each SMB2 message behind a 4-byte header, a zero
 * byte and a 24-bit big-endian length. */
#include <smb/tcp_listen.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TCP_MAX_MESSAGE 0xFFFFFFu /* the 24-bit length */

struct smb_tcp_listener {
    int fd;
    uint16_t port;
};

struct tcp_conn {
    smb_transport base; /* first: the ops find the rest from it */
    int fd;
    smb_transport_stats stats;
    char err[160];
};

static struct tcp_conn *conn_of(smb_transport *t)
{
    return (struct tcp_conn *)(void *)t;
}

static int fail(struct tcp_conn *c, int rc, const char *what)
{
    snprintf(c->err, sizeof c->err, "%s: %s", what, strerror(-rc));
    return rc;
}

static int tcp_send(smb_transport *t, const void *msg, size_t len)
{
    struct tcp_conn *c = conn_of(t);
    if (len > TCP_MAX_MESSAGE)
        return fail(c, -EMSGSIZE, "message larger than 16 MiB");
    uint8_t hdr[4] = {0, (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    struct iovec iov[2] = {{hdr, 4}, {(void *)(uintptr_t)msg, len}};
    size_t total = 4 + len, done = 0;
    while (done < total) {
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        struct iovec v[2];
        unsigned n = 0;
        size_t skip = done;
        for (unsigned i = 0; i < 2; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            v[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
            v[n].iov_len = iov[i].iov_len - skip;
            skip = 0;
            n++;
        }
        mh.msg_iov = v;
        mh.msg_iovlen = n;
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return fail(c, errno == ECONNRESET ? -ECONNRESET : -EPIPE, "send");
        }
        done += (size_t)w;
    }
    c->stats.messages_sent++;
    c->stats.bytes_sent += len;
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads exactly len bytes (into buf, or discarded when buf is NULL) by deadline (-1: none). */
static int read_full(struct tcp_conn *c, uint8_t *buf, size_t len, int64_t deadline, int first)
{
    uint8_t sink[4096];
    size_t done = 0;
    while (done < len) {
        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return fail(c, -ETIMEDOUT, "receive");
            wait = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p = {c->fd, POLLIN, 0};
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return fail(c, -errno, "poll");
        if (pr == 0)
            continue;
        size_t want = len - done;
        uint8_t *dst = buf ? buf + done : sink;
        if (!buf && want > sizeof sink)
            want = sizeof sink;
        ssize_t r = recv(c->fd, dst, want, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail(c, errno == ECONNRESET ? -ECONNRESET : -errno, "receive");
        if (r == 0) {
            snprintf(c->err, sizeof c->err, "peer closed the connection%s",
                     first && done == 0 ? "" : " inside a message");
            return -ECONNRESET;
        }
        done += (size_t)r;
    }
    return 0;
}

static int tcp_recv(smb_transport *t, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct tcp_conn *c = conn_of(t);
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    uint8_t hdr[4];
    int rc = read_full(c, hdr, 4, deadline, 1);
    if (rc)
        return rc;
    if (hdr[0] != 0) {
        snprintf(c->err, sizeof c->err, "Direct TCP header byte 0x%02x is not zero", hdr[0]);
        return -EPROTO;
    }
    size_t n = (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (n > cap) {
        rc = read_full(c, NULL, n, deadline, 0);
        if (rc)
            return rc;
        snprintf(c->err, sizeof c->err, "message of %zu bytes exceeds the %zu-byte buffer", n, cap);
        return -EMSGSIZE;
    }
    rc = read_full(c, buf, n, deadline, 0);
    if (rc)
        return rc;
    *len = n;
    c->stats.messages_received++;
    c->stats.bytes_received += n;
    return 0;
}

static size_t tcp_max_message(smb_transport *t)
{
    (void)t;
    return TCP_MAX_MESSAGE;
}

static size_t tcp_max_rdma(smb_transport *t)
{
    (void)t;
    return 0;
}

static void tcp_get_stats(smb_transport *t, smb_transport_stats *out)
{
    *out = conn_of(t)->stats;
}

static const char *tcp_error(smb_transport *t)
{
    return conn_of(t)->err;
}

static void tcp_destroy(smb_transport *t)
{
    struct tcp_conn *c = conn_of(t);
    shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    free(c);
}

static const smb_transport_ops tcp_ops = {
    .name = "tcp",
    .send = tcp_send,
    .recv = tcp_recv,
    .max_message = tcp_max_message,
    .max_rdma = tcp_max_rdma,
    .get_stats = tcp_get_stats,
    .error = tcp_error,
    .destroy = tcp_destroy,
};

int smb_tcp_transport_from_fd(int fd, smb_transport **t)
{
    struct tcp_conn *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->base.ops = &tcp_ops;
    c->fd = fd;
    *t = &c->base;
    return 0;
}

int smb_tcp_listen(const char *addr, uint16_t port, smb_tcp_listener **out, char *err,
                   size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&ss;
    const char *host = addr ? addr : "127.0.0.1";
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
        sl = sizeof *a6;
    } else {
        snprintf(err, errlen, "\"%s\" is not an IPv4 or IPv6 address", host);
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "socket: %s", strerror(e));
        return -e;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 16)) {
        int e = errno;
        snprintf(err, errlen, "bind/listen on %s port %u: %s", host, port, strerror(e));
        close(fd);
        return -e;
    }
    if (getsockname(fd, (struct sockaddr *)&ss, &sl)) {
        int e = errno;
        close(fd);
        snprintf(err, errlen, "getsockname: %s", strerror(e));
        return -e;
    }
    smb_tcp_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    l->fd = fd;
    l->port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    *out = l;
    return 0;
}

int smb_tcp_accept(smb_tcp_listener *l, smb_transport **t, int timeout_ms)
{
    struct pollfd p = {l->fd, POLLIN, 0};
    int pr;
    do {
        pr = poll(&p, 1, timeout_ms);
    } while (pr < 0 && errno == EINTR);
    if (pr < 0)
        return -errno;
    if (pr == 0)
        return -ETIMEDOUT;
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = smb_tcp_transport_from_fd(fd, t);
    if (rc)
        close(fd);
    return rc;
}

uint16_t smb_tcp_listener_port(const smb_tcp_listener *l)
{
    return l->port;
}

void smb_tcp_listener_close(smb_tcp_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}
