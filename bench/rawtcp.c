/* rawtcp: the raw-TCP baseline of bench/compare. Both ends in one process on 127.0.0.1, two
 * threads pinned to distinct CPUs (as ndkperf --loopback), TCP_NODELAY, and the same polling
 * discipline as ndkperf: "poll" spins on non-blocking recv/send (ndkperf polling its CQ),
 * "block" sleeps in recv/send (ndkperf -e).
 *
 *   rawtcp pingpong [--size 64] [--iters N] [--blocking]   one-way latency = round trip / 2
 *   rawtcp stream   [--size 65536] [--iters N] [--blocking] one write() per message; bandwidth
 *   rawtcp msgrate  [--size 8] [--iters N] [--blocking]     one write() per message; rate
 *
 * Prints one JSON object on stdout. Loopback only; every loop is bounded by --iters and by
 * --timeout (default 60 s). Exit 0 on success, 1 with a one-line reason otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "two_cpus.h"

enum mode { PINGPONG, STREAM, MSGRATE };

static struct {
    enum mode mode;
    size_t size;
    uint64_t iters;
    bool blocking;
    unsigned timeout;
    bool no_pin;
    size_t recv_chunk; /* stream: bytes per recv() */
} opt = {PINGPONG, 0, 0, false, 60, false, 1u << 20};

static _Noreturn void fail(const char *what)
{
    fprintf(stderr, "rawtcp: %s: %s\n", what, errno ? strerror(errno) : "failed");
    _exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *watchdog(void *arg)
{
    (void)arg;
    struct timespec ts = {.tv_sec = opt.timeout, .tv_nsec = 0};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
    fprintf(stderr, "rawtcp: timeout after %u s\n", opt.timeout);
    _exit(1);
}

/* Receive exactly len bytes, spinning (poll) or sleeping (block). */
static void recv_all(int fd, uint8_t *buf, size_t len)
{
    int flags = opt.blocking ? 0 : MSG_DONTWAIT;
    while (len) {
        ssize_t n = recv(fd, buf, len, flags);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n == 0) {
            errno = 0;
            fail("recv: the peer closed");
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            fail("recv");
        }
    }
}

static void send_all(int fd, const uint8_t *buf, size_t len)
{
    int flags = MSG_NOSIGNAL | (opt.blocking ? 0 : MSG_DONTWAIT);
    while (len) {
        ssize_t n = send(fd, buf, len, flags);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            fail("send");
        }
    }
}

static int cpu_of[2] = {-1, -1};

static void pin(int which)
{
    two_cpus_pin(cpu_of[which]);
}

static int listen_fd;
static uint8_t *sbuf, *cbuf;

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Server: echo (pingpong) or sink (stream/msgrate), then a one-byte ack. */
static void *server(void *arg)
{
    (void)arg;
    pin(0);
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0)
        fail("accept");
    nodelay(fd);
    if (opt.mode == PINGPONG) {
        for (uint64_t i = 0; i < opt.iters; i++) {
            recv_all(fd, sbuf, opt.size);
            send_all(fd, sbuf, opt.size);
        }
    } else {
        uint64_t total = opt.iters * opt.size;
        size_t chunk = opt.recv_chunk;
        while (total) {
            size_t want = total < chunk ? (size_t)total : chunk;
            int flags = opt.blocking ? 0 : MSG_DONTWAIT;
            ssize_t n = recv(fd, sbuf, want, flags);
            if (n > 0)
                total -= (uint64_t)n;
            else if (n == 0) {
                errno = 0;
                fail("recv: the peer closed");
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                fail("recv");
        }
        uint8_t ack = 1;
        send_all(fd, &ack, 1);
    }
    close(fd);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void pick_cpus(void)
{
    if (!opt.no_pin)
        two_cpus_pick(cpu_of);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: rawtcp pingpong|stream|msgrate [--size B] [--iters N] "
                        "[--blocking] [--timeout S] [--no-pin] [--recv-chunk B]\n");
        return 2;
    }
    if (strcmp(argv[1], "pingpong") == 0)
        opt.mode = PINGPONG;
    else if (strcmp(argv[1], "stream") == 0)
        opt.mode = STREAM;
    else if (strcmp(argv[1], "msgrate") == 0)
        opt.mode = MSGRATE;
    else {
        fprintf(stderr, "rawtcp: unknown test '%s'\n", argv[1]);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--size") == 0 && v)
            opt.size = strtoull(v, NULL, 0), i++;
        else if (strcmp(a, "--iters") == 0 && v)
            opt.iters = strtoull(v, NULL, 0), i++;
        else if (strcmp(a, "--timeout") == 0 && v)
            opt.timeout = (unsigned)strtoul(v, NULL, 0), i++;
        else if (strcmp(a, "--blocking") == 0)
            opt.blocking = true;
        else if (strcmp(a, "--no-pin") == 0)
            opt.no_pin = true;
        else if (strcmp(a, "--recv-chunk") == 0 && v)
            opt.recv_chunk = strtoull(v, NULL, 0), i++;
        else {
            fprintf(stderr, "rawtcp: bad argument '%s'\n", a);
            return 2;
        }
    }
    if (!opt.size)
        opt.size = opt.mode == PINGPONG ? 64 : opt.mode == STREAM ? 65536 : 8;
    if (!opt.iters)
        opt.iters = opt.mode == PINGPONG ? 10000 : opt.mode == STREAM ? 5000 : 1000000;
    if (opt.size < 1 || opt.size > (1u << 30) || opt.iters < 1) {
        fprintf(stderr, "rawtcp: --size and --iters must be positive\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    pthread_t wd, st;
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);
    sbuf = malloc(opt.size > (1u << 20) ? opt.size : (1u << 20));
    cbuf = malloc(opt.size);
    if (!sbuf || !cbuf)
        fail("malloc");
    memset(cbuf, 0x5A, opt.size);
    pick_cpus();

    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(listen_fd, 1) != 0 || getsockname(listen_fd, (struct sockaddr *)&sa, &sl) != 0)
        fail("listen on 127.0.0.1");
    pthread_create(&st, NULL, server, NULL);
    pin(1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail("connect to 127.0.0.1");
    nodelay(fd);
    const char *mode = opt.blocking ? "block" : "poll";
    if (opt.mode == PINGPONG) {
        uint64_t *s = calloc(opt.iters, sizeof *s);
        if (!s)
            fail("calloc");
        for (uint64_t i = 0; i < opt.iters; i++) {
            uint64_t t0 = now_ns();
            send_all(fd, cbuf, opt.size);
            recv_all(fd, cbuf, opt.size);
            s[i] = (now_ns() - t0) / 2;
        }
        double sum = 0;
        for (uint64_t i = 0; i < opt.iters; i++)
            sum += (double)s[i];
        qsort(s, opt.iters, sizeof *s, cmp);
        printf("{\"test\": \"pingpong\", \"mode\": \"%s\", \"size\": %zu, \"iters\": %llu, "
               "\"t_min\": %.3f, \"t_typical\": %.3f, \"t_avg\": %.3f, \"t_p99\": %.3f, "
               "\"unit\": \"usec one-way\"}\n",
               mode, opt.size, (unsigned long long)opt.iters, (double)s[0] / 1e3,
               (double)s[opt.iters / 2] / 1e3, sum / (double)opt.iters / 1e3,
               (double)s[(opt.iters * 99) / 100] / 1e3);
        free(s);
    } else {
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < opt.iters; i++)
            send_all(fd, cbuf, opt.size);
        uint8_t ack;
        recv_all(fd, &ack, 1);
        double secs = (double)(now_ns() - t0) / 1e9;
        double bytes = (double)opt.iters * (double)opt.size;
        printf("{\"test\": \"%s\", \"mode\": \"%s\", \"size\": %zu, \"iters\": %llu, "
               "\"MBps\": %.2f, \"Gbps\": %.3f, \"Mpps\": %.6f, \"seconds\": %.4f}\n",
               opt.mode == STREAM ? "stream" : "msgrate", mode, opt.size,
               (unsigned long long)opt.iters, bytes / secs / 1048576.0, bytes * 8 / secs / 1e9,
               (double)opt.iters / secs / 1e6, secs);
    }
    pthread_join(st, NULL);
    close(fd);
    close(listen_fd);
    free(sbuf);
    free(cbuf);
    return 0;
}
