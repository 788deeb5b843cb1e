/* send_paths: which way of handing large messages to the socket moves them fastest and at the
 * least CPU per GB (docs/datapath.md#the-send-choice).
 *
 * One sender writes the FPDU stream softndk puts on the wire — built by the same encoder
 * (sndk_tx_send / sndk_tx_write + sndk_tx_msg_next), 65480-byte FPDUs, batches of up to 64 FPDUs /
 * 512 iovecs as src/datapath/tx.c fills them — to a reader thread that drains the socket over
 * loopback. Variants of the sender:
 *   writev     today's path: sendmsg(MSG_DONTWAIT) of one batch, poll(POLLOUT) when full;
 *   sndbuf-1m  the same with SO_SNDBUF/SO_RCVBUF set to 1 MiB (which turns autotuning off);
 *   sndbuf-4m  the same with 4 MiB (bounded by net.core.wmem_max / rmem_max);
 *   zerocopy   SO_ZEROCOPY + MSG_ZEROCOPY, a ring of batches whose header storage is reused only
 *              when the error queue has reported their completion;
 *   uring      io_uring IORING_OP_SENDMSG, a chain of `--depth` batches linked and MSG_WAITALL
 *              submitted by one io_uring_enter (only when built with liburing).
 * Workloads: 64 KiB Sends, 1 MiB Sends, 1 MiB RDMA Writes. Every round runs every workload and
 * variant once on a fresh connection, the variant order rotated from round to round; the report
 * gives medians of MB/s, of the per-round ratio to writev, and of CPU seconds per GB moved on each
 * end (getrusage RUSAGE_THREAD; on loopback the sender's figure includes the receive softirq it
 * runs). --verify regenerates the stream on the reader and compares every byte (CRC on).
 * --smoke: 2 rounds of 8 MiB, verified; exits non-zero when any variant lost or changed a byte.
 * A benchmark, never a timed test: figures vary between runs; read the ratios. */
#include <errno.h>
#include <time.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef SOFTNDK_HAVE_LIBURING
#include <liburing.h>
#endif

#include "iwarp/fpdu.h"
#include "iwarp/wire.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define BATCH_FPDUS 64   /* SNDK_TX_BATCH */
#define BATCH_IOV   512  /* SNDK_TX_IOV */
#define RING        8    /* zerocopy / io_uring batches in flight at most */
#define POLL_MS     5000 /* every wait is bounded */

enum variant { V_WRITEV, V_SNDBUF_1M, V_SNDBUF_4M, V_ZEROCOPY, V_URING, V_COUNT };
static const char *const variant_name[V_COUNT] = {"writev", "sndbuf-1m", "sndbuf-4m", "zerocopy",
                                                  "uring"};
enum workload { W_SEND64K, W_SEND1M, W_WRITE1M, W_COUNT };
static const char *const workload_name[W_COUNT] = {"64 KiB Send", "1 MiB Send", "1 MiB Write"};
static const size_t workload_msg[W_COUNT] = {65536, 1u << 20, 1u << 20};

static struct {
    int rounds;
    uint64_t bytes; /* payload bytes per measurement */
    bool verify;
    bool crc;
    int depth;
} opt = {.rounds = 7, .bytes = 256ull << 20, .verify = false, .crc = false, .depth = 4};

static uint8_t *payload; /* the consumer's buffer: 1 MiB of a fixed pattern, never modified */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double thread_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

/* ---- the FPDU stream: messages of one workload, cut into batches as tx.c cuts them ---- */

struct stream {
    enum workload w;
    uint64_t left; /* payload bytes of messages not yet started */
    uint32_t msn;
    uint64_t to;
    struct sndk_tx_cfg cfg;
    struct sndk_tx_msg msg;
    struct iovec sgl;
    bool in_msg;
};

struct batch {
    struct sndk_fpdu fp[BATCH_FPDUS];
    struct iovec iov[BATCH_IOV];
    int niov;
    size_t wire; /* bytes of the batch */
    struct msghdr mh;
    uint32_t zc_id; /* zerocopy: notification id of the batch's last sendmsg */
};

static void stream_init(struct stream *s, enum workload w)
{
    memset(s, 0, sizeof *s);
    s->w = w;
    s->left = opt.bytes;
    s->msn = 1;
    s->cfg.max_fpdu = SNDK_FPDU_MAX_DEFAULT;
    s->cfg.crc = opt.crc;
}

/* Fill b with the next FPDUs; returns false when the stream is done. */
static bool stream_fill(struct stream *s, struct batch *b)
{
    int nrec = 0;
    b->niov = 0;
    b->wire = 0;
    while (nrec < BATCH_FPDUS && BATCH_IOV - b->niov >= 3) {
        if (!s->in_msg) {
            if (s->left == 0)
                break;
            size_t len = workload_msg[s->w] < s->left ? workload_msg[s->w] : (size_t)s->left;
            s->left -= len;
            s->sgl.iov_base = payload;
            s->sgl.iov_len = len;
            int rc = s->w == W_WRITE1M
                         ? sndk_tx_write(&s->msg, &s->cfg, 0x1234, s->to, &s->sgl, 1)
                         : sndk_tx_send(&s->msg, &s->cfg, s->msn++, SNDK_OP_SEND, 0, &s->sgl, 1);
            if (rc != 0) {
                fprintf(stderr, "encoder: %d\n", rc);
                exit(2);
            }
            s->to += len;
            s->in_msg = true;
        }
        int n = sndk_tx_msg_next(&s->msg, &b->fp[nrec], b->iov + b->niov, BATCH_IOV - b->niov);
        if (n < 0) {
            fprintf(stderr, "sndk_tx_msg_next: %d\n", n);
            exit(2);
        }
        if (n == 0) {
            s->in_msg = false;
            continue;
        }
        b->wire += b->fp[nrec].wire_len;
        b->niov += n;
        nrec++;
    }
    memset(&b->mh, 0, sizeof b->mh);
    b->mh.msg_iov = b->iov;
    b->mh.msg_iovlen = (size_t)b->niov;
    return b->niov > 0;
}

static uint64_t stream_wire_total(enum workload w)
{
    struct stream s;
    static struct batch b;
    uint64_t total = 0;
    bool crc = opt.crc;
    opt.crc = false; /* the length does not depend on it */
    stream_init(&s, w);
    opt.crc = crc;
    while (stream_fill(&s, &b))
        total += b.wire;
    return total;
}

/* ---- the reader ---- */

struct reader {
    int fd;
    enum workload w;
    uint64_t expect;
    uint64_t got;
    uint64_t mismatch_at; /* UINT64_MAX: none */
    double end;
    double cpu;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    enum { CHUNK = 256 << 10 };
    uint8_t *buf = malloc(CHUNK);
    struct stream s;
    static _Thread_local struct batch eb;
    uint8_t *exp = NULL;
    size_t exp_len = 0, exp_off = 0;
    if (!buf)
        die("malloc");
    if (opt.verify) {
        exp = malloc((size_t)BATCH_FPDUS * SNDK_FPDU_MAX_DEFAULT);
        if (!exp)
            die("malloc");
        stream_init(&s, r->w);
    }
    r->mismatch_at = UINT64_MAX;
    double c0 = thread_cpu_s();
    while (r->got < r->expect) {
        ssize_t n = recv(r->fd, buf, CHUNK, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (opt.verify && r->mismatch_at == UINT64_MAX) {
            size_t off = 0;
            while (off < (size_t)n) {
                if (exp_off == exp_len) {
                    if (!stream_fill(&s, &eb)) {
                        r->mismatch_at = r->got + off; /* bytes beyond the stream */
                        break;
                    }
                    exp_len = sndk_iov_gather(eb.iov, eb.niov, exp,
                                              (size_t)BATCH_FPDUS * SNDK_FPDU_MAX_DEFAULT);
                    exp_off = 0;
                }
                size_t k =
                    (size_t)n - off < exp_len - exp_off ? (size_t)n - off : exp_len - exp_off;
                if (memcmp(buf + off, exp + exp_off, k) != 0) {
                    size_t i = 0;
                    while (buf[off + i] == exp[exp_off + i])
                        i++;
                    r->mismatch_at = r->got + off + i;
                    break;
                }
                off += k;
                exp_off += k;
            }
        }
        r->got += (uint64_t)n;
    }
    r->end = now_s();
    r->cpu = thread_cpu_s() - c0;
    free(buf);
    free(exp);
    return NULL;
}

/* ---- the senders ---- */

static void wait_fd(int fd, short ev)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int rc = poll(&p, 1, POLL_MS);
    if (rc == 0) {
        fprintf(stderr, "send_paths: no progress in %d ms\n", POLL_MS);
        exit(2);
    }
}

/* sendmsg the whole batch, advancing after partial writes (tx.c's sndk_tx_push loop). */
static void push_batch(int fd, struct batch *b, int flags, uint32_t *zc_next)
{
    struct iovec *cur = b->iov;
    int left = b->niov;
    while (left > 0) {
        struct msghdr mh = {.msg_iov = cur, .msg_iovlen = (size_t)left};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT | flags);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == ENOBUFS) {
                wait_fd(fd, POLLOUT);
                continue;
            }
            die("sendmsg");
        }
        if (zc_next)
            b->zc_id = (*zc_next)++; /* one notification id per successful MSG_ZEROCOPY call */
        sndk_iov_advance(&cur, &left, (size_t)w);
    }
}

static void send_writev(int fd, enum workload w)
{
    struct stream s;
    static struct batch b;
    stream_init(&s, w);
    while (stream_fill(&s, &b))
        push_batch(fd, &b, 0, NULL);
}

struct zc_stats {
    uint64_t sends, notes, copied;
};

/* Reap zerocopy notifications; returns the highest completed id + 1 so far. */
static uint32_t zc_reap(int fd, uint32_t done, struct zc_stats *st)
{
    for (;;) {
        char ctl[128];
        struct msghdr mh = {.msg_control = ctl, .msg_controllen = sizeof ctl};
        ssize_t rc = recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
        if (rc < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return done;
            die("recvmsg(MSG_ERRQUEUE)");
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                  (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)))
                continue;
            struct sock_extended_err e;
            memcpy(&e, CMSG_DATA(c), sizeof e);
            if (e.ee_errno != 0 || e.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                continue;
            st->notes++;
            if (e.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
                st->copied += e.ee_data - e.ee_info + 1;
            if (e.ee_data + 1 > done)
                done = e.ee_data + 1; /* ids complete in order on TCP */
        }
    }
}

static struct zc_stats zc_last;

static void send_zerocopy(int fd, enum workload w)
{
    struct stream s;
    static struct batch ring[RING];
    uint32_t next_id = 0, done = 0;
    struct zc_stats st = {0};
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0)
        die("SO_ZEROCOPY");
    stream_init(&s, w);
    for (uint64_t k = 0;; k++) {
        struct batch *b = &ring[k % RING];
        if (k >= RING) /* its headers are still referenced until its notification */
            while (done <= b->zc_id) {
                done = zc_reap(fd, done, &st);
                if (done <= b->zc_id)
                    wait_fd(fd, 0); /* POLLERR: the error queue has something */
            }
        if (!stream_fill(&s, b))
            break;
        push_batch(fd, b, MSG_ZEROCOPY, &next_id);
        done = zc_reap(fd, done, &st);
    }
    while (done < next_id) { /* every buffer back before the stream counts as sent */
        done = zc_reap(fd, done, &st);
        if (done < next_id)
            wait_fd(fd, 0);
    }
    st.sends = next_id;
    zc_last = st;
}

#ifdef SOFTNDK_HAVE_LIBURING
static void send_uring(int fd, enum workload w)
{
    struct io_uring ring;
    static struct batch bs[RING];
    struct stream s;
    int depth = opt.depth < 1 ? 1 : opt.depth > RING ? RING : opt.depth;
    int rc = io_uring_queue_init(RING, &ring, 0);
    if (rc < 0) {
        errno = -rc;
        die("io_uring_queue_init");
    }
    stream_init(&s, w);
    for (bool more = true; more;) {
        /* One chain per io_uring_enter: linked and MSG_WAITALL so the stream keeps its order and
         * no sendmsg ends short; the next chain is submitted when this one has completed. */
        int n = 0;
        struct io_uring_sqe *last = NULL;
        for (; n < depth; n++) {
            if (!stream_fill(&s, &bs[n])) {
                more = false;
                break;
            }
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_sendmsg(sqe, fd, &bs[n].mh, MSG_NOSIGNAL | MSG_WAITALL);
            sqe->user_data = (uint64_t)n;
            sqe->flags |= IOSQE_IO_LINK;
            last = sqe;
        }
        if (n == 0)
            break;
        last->flags &= (uint8_t)~IOSQE_IO_LINK; /* the chain ends with this submission */
        rc = io_uring_submit_and_wait(&ring, (unsigned)n);
        if (rc < 0) {
            errno = -rc;
            die("io_uring_submit_and_wait");
        }
        for (int i = 0; i < n; i++) {
            struct io_uring_cqe *cqe;
            struct __kernel_timespec ts = {.tv_sec = POLL_MS / 1000};
            rc = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
            if (rc < 0) {
                errno = -rc;
                die("io_uring_wait_cqe");
            }
            if (cqe->res < 0 || (size_t)cqe->res != bs[cqe->user_data].wire) {
                fprintf(stderr, "io_uring sendmsg: %d of %zu bytes\n", cqe->res,
                        bs[cqe->user_data].wire);
                exit(2);
            }
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    io_uring_queue_exit(&ring);
}
#endif

/* ---- one measurement ---- */

struct result {
    double mbps, cpu_tx_per_gb, cpu_rx_per_gb;
    double sndbuf_kib, rcvbuf_kib; /* read back after the transfer: what autotuning reached */
    bool ok;
};

static void set_buf(int fd, int opt_name, int bytes)
{
    if (setsockopt(fd, SOL_SOCKET, opt_name, &bytes, sizeof bytes) != 0)
        die("setsockopt(buf)");
}

static struct result measure(enum variant v, enum workload w, uint64_t wire_total)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int buf = v == V_SNDBUF_1M ? 1 << 20 : v == V_SNDBUF_4M ? 4 << 20 : 0;
    if (lfd < 0 || cfd < 0)
        die("socket");
    if (buf) { /* before connect/listen: the window scale is chosen at the handshake */
        set_buf(lfd, SO_RCVBUF, buf);
        set_buf(cfd, SO_SNDBUF, buf);
    }
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) != 0)
        die("listen");
    if (connect(cfd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    int afd = accept(lfd, NULL, NULL);
    if (afd < 0)
        die("accept");
    close(lfd);
    int one = 1;
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(afd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    struct reader r = {.fd = afd, .w = w, .expect = wire_total};
    pthread_t th;
    double t0 = now_s();
    if (pthread_create(&th, NULL, reader_main, &r) != 0)
        die("pthread_create");
    double c0 = thread_cpu_s();
    switch (v) {
    case V_WRITEV:
    case V_SNDBUF_1M:
    case V_SNDBUF_4M:
        send_writev(cfd, w);
        break;
    case V_ZEROCOPY:
        send_zerocopy(cfd, w);
        break;
    case V_URING:
#ifdef SOFTNDK_HAVE_LIBURING
        send_uring(cfd, w);
#endif
        break;
    case V_COUNT:
        break;
    }
    double ctx = thread_cpu_s() - c0;
    pthread_join(th, NULL);
    int sb = 0, rb = 0;
    socklen_t sl = sizeof sb;
    getsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &sb, &sl);
    sl = sizeof rb;
    getsockopt(afd, SOL_SOCKET, SO_RCVBUF, &rb, &sl);
    close(cfd);
    close(afd);
    double gb = (double)wire_total / 1e9;
    struct result res = {.mbps = (double)wire_total / 1e6 / (r.end - t0),
                         .cpu_tx_per_gb = ctx / gb,
                         .cpu_rx_per_gb = r.cpu / gb,
                         .sndbuf_kib = sb / 1024.0,
                         .rcvbuf_kib = rb / 1024.0,
                         .ok = r.got == wire_total && r.mismatch_at == UINT64_MAX};
    if (!res.ok)
        fprintf(stderr, "%s / %s: received %llu of %llu bytes, first wrong byte at %lld\n",
                variant_name[v], workload_name[w], (unsigned long long)r.got,
                (unsigned long long)wire_total,
                r.mismatch_at == UINT64_MAX ? -1LL : (long long)r.mismatch_at);
    return res;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool variant_available(enum variant v)
{
#ifndef SOFTNDK_HAVE_LIBURING
    if (v == V_URING)
        return false;
#endif
    (void)v;
    return true;
}

static void usage(void)
{
    fprintf(stderr, "usage: send_paths [--rounds N] [--mib M] [--depth D] [--crc] [--verify] "
                    "[--smoke]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            opt.rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            opt.bytes = (uint64_t)atoll(argv[++i]) << 20;
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
            opt.depth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--crc"))
            opt.crc = true;
        else if (!strcmp(argv[i], "--verify"))
            opt.verify = opt.crc = true;
        else if (!strcmp(argv[i], "--smoke")) {
            opt.rounds = 2;
            opt.bytes = 8ull << 20;
            opt.verify = opt.crc = true;
        } else
            usage();
    }
    if (opt.rounds < 1 || opt.bytes == 0)
        usage();
    payload = malloc(1u << 20);
    if (!payload)
        die("malloc");
    for (size_t i = 0; i < (1u << 20); i++)
        payload[i] = (uint8_t)(i * 2654435761u >> 13);

    enum { MAXR = 64 };
    if (opt.rounds > MAXR)
        opt.rounds = MAXR;
    static double mbps[W_COUNT][V_COUNT][MAXR], ratio[W_COUNT][V_COUNT][MAXR],
        ctx[W_COUNT][V_COUNT][MAXR], crx[W_COUNT][V_COUNT][MAXR], sbuf[W_COUNT][V_COUNT][MAXR],
        rbuf[W_COUNT][V_COUNT][MAXR];
    uint64_t wire[W_COUNT];
    for (int w = 0; w < W_COUNT; w++)
        wire[w] = stream_wire_total((enum workload)w);
    bool all_ok = true;
    uint64_t zc_sends = 0, zc_notes = 0, zc_copied = 0;
    for (int r = 0; r < opt.rounds; r++) {
        for (int w = 0; w < W_COUNT; w++) {
            for (int k = 0; k < V_COUNT; k++) {
                enum variant v = (enum variant)((k + r) % V_COUNT); /* rotate the order */
                if (!variant_available(v))
                    continue;
                struct result res = measure(v, (enum workload)w, wire[w]);
                all_ok = all_ok && res.ok;
                mbps[w][v][r] = res.mbps;
                ctx[w][v][r] = res.cpu_tx_per_gb;
                crx[w][v][r] = res.cpu_rx_per_gb;
                sbuf[w][v][r] = res.sndbuf_kib;
                rbuf[w][v][r] = res.rcvbuf_kib;
                if (v == V_ZEROCOPY) {
                    zc_sends += zc_last.sends;
                    zc_notes += zc_last.notes;
                    zc_copied += zc_last.copied;
                }
            }
            for (int v = 0; v < V_COUNT; v++)
                ratio[w][v][r] = mbps[w][v][r] / mbps[w][V_WRITEV][r];
        }
        fprintf(stderr, "round %d/%d done\n", r + 1, opt.rounds);
    }
    printf("send_paths: %d rounds, %llu MiB per measurement, CRC %s%s, io_uring depth %d\n",
           opt.rounds, (unsigned long long)(opt.bytes >> 20), opt.crc ? "on" : "off",
           opt.verify ? ", every byte verified" : "", opt.depth);
    printf("| workload | variant | MB/s | × writev | × writev min–max | CPU s/GB sender | "
           "CPU s/GB reader | SO_SNDBUF / SO_RCVBUF after (KiB) |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int w = 0; w < W_COUNT; w++)
        for (int v = 0; v < V_COUNT; v++) {
            if (!variant_available((enum variant)v))
                continue;
            double rmed = median(ratio[w][v], opt.rounds); /* sorts: min and max at the ends */
            printf("| %s | %s | %.0f | %.2f | %.2f–%.2f | %.3f | %.3f | %.0f / %.0f |\n",
                   workload_name[w], variant_name[v], median(mbps[w][v], opt.rounds), rmed,
                   ratio[w][v][0], ratio[w][v][opt.rounds - 1], median(ctx[w][v], opt.rounds),
                   median(crx[w][v], opt.rounds), median(sbuf[w][v], opt.rounds),
                   median(rbuf[w][v], opt.rounds));
        }
    printf("zerocopy: %llu sends, %llu notifications, %llu sends reported copied (not zero-copy)\n",
           (unsigned long long)zc_sends, (unsigned long long)zc_notes,
           (unsigned long long)zc_copied);
#ifndef SOFTNDK_HAVE_LIBURING
    printf("uring: not built (liburing not found)\n");
#endif
    printf("send_paths: %s\n", all_ok ? "every variant moved every byte" : "BYTES LOST OR WRONG");
    free(payload);
    return all_ok ? 0 : 1;
}
