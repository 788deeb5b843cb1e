/* The door under a flood (docs/listener.md, "Handshake limits"): a server process whose fd limit
 * is 256 faces more half-open connections than that (TCP connect, then nothing, or the first
 * bytes of an MPA Request); good clients must still be served within a second each, and the
 * counters must say what happened. Then the server's own fds run out: new connections are
 * refused with a reset, the listener does not spin, and once fds are free a good client is
 * served again. Bounded: every wait has a deadline; the server is a child process that exits
 * by itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "objects.h"

#define SERVER_FD_LIMIT 256
#define FLOOD                                                                                      \
    600 /* > SERVER_FD_LIMIT, before the good clients; as many again while they connect            \
         */
#define GOOD             10
#define REFUSE           5
#define SERVED_WITHIN_MS 1000

/* ---- the server (child process): accepts every connect event with a fresh QP ---- */

enum cmd { CMD_EXHAUST = 'x', CMD_RELEASE = 'r', CMD_REPORT = 'q' };

struct srv {
    NDK_ADAPTER *a;
    NDK_LISTENER *l;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    NDK_CONNECTOR *queue[64];
    unsigned head, tail;
};

static void srv_connect_event(void *ctx, NDK_CONNECTOR *conn)
{
    struct srv *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->queue[s->tail++ % 64] = conn;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
}

struct srv_side {
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    atomic_int accepted; /* 0 pending, 1 success, -1 failed */
};

static void srv_accept_done(void *ctx, NTSTATUS st)
{
    struct srv_side *sd = ctx;
    atomic_store(&sd->accepted, st == STATUS_SUCCESS ? 1 : -1);
}

static void srv_cq_notify(void *ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static void srv_create_done(void *ctx, NTSTATUS st, NDK_OBJECT_HEADER *o)
{
    (void)ctx, (void)st, (void)o;
}

static int srv_side_open(struct srv *s, struct srv_side *sd)
{
    NDK_ADAPTER *a = s->a;
    if (a->Dispatch->NdkCreatePd(a, srv_create_done, NULL, &sd->pd) != STATUS_SUCCESS)
        return -1;
    if (a->Dispatch->NdkCreateCq(a, 16, srv_cq_notify, NULL, NULL, srv_create_done, NULL,
                                 &sd->cq) != STATUS_SUCCESS)
        return -1;
    if (sd->pd->Dispatch->NdkCreateQp(sd->pd, sd->cq, sd->cq, sd, 4, 4, 1, 1, 0, srv_create_done,
                                      NULL, &sd->qp) != STATUS_SUCCESS)
        return -1;
    return 0;
}

static void srv_obj_close(NDK_OBJECT_HEADER *h)
{
    struct harness_event ev;
    harness_event_init(&ev);
    if (ndk_close_any(h, fixture_close_signal, &ev) == STATUS_PENDING)
        harness_event_wait(&ev, 1, FIXTURE_WAIT_MS);
    harness_event_destroy(&ev);
}

static int server_main(int to_parent, int from_parent)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = SERVER_FD_LIMIT;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 10;
    struct srv s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cv, NULL);
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.RequestTimeoutMs = 1500; /* the flood's survivors go before phase 2 */
    NDK_VERSION v = {2, 0};
    if (SoftNdkOpenAdapter(0, v, &o, &s.a) != STATUS_SUCCESS)
        return 11;
    if (s.a->Dispatch->NdkCreateListener(s.a, srv_connect_event, &s, srv_create_done, NULL, &s.l) !=
        STATUS_SUCCESS)
        return 12;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    if (s.l->Dispatch->NdkListen(s.l, (struct sockaddr *)&sin, sizeof sin, NULL, NULL) !=
        STATUS_SUCCESS)
        return 13;
    ULONG len = sizeof sin;
    s.l->Dispatch->NdkGetLocalAddress(s.l, (struct sockaddr *)&sin, &len);
    uint16_t port = ntohs(sin.sin_port);
    if (write(to_parent, &port, sizeof port) != sizeof port)
        return 14;

    static struct srv_side sides[GOOD + 2];
    unsigned nsides = 0;
    static int hog[SERVER_FD_LIMIT];
    int nhog = 0;
    fcntl(from_parent, F_SETFL, O_NONBLOCK);
    for (;;) {
        /* a connect event: accept it on a fresh QP */
        pthread_mutex_lock(&s.lock);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (s.head == s.tail)
            pthread_cond_timedwait(&s.cv, &s.lock, &ts);
        NDK_CONNECTOR *conn = s.head != s.tail ? s.queue[s.head++ % 64] : NULL;
        pthread_mutex_unlock(&s.lock);
        if (conn) {
            if (nsides == sizeof sides / sizeof sides[0])
                return 15;
            struct srv_side *sd = &sides[nsides++];
            sd->conn = conn;
            if (srv_side_open(&s, sd) != 0)
                return 16;
            if (conn->Dispatch->NdkAccept(conn, sd->qp, 1, 1, NULL, 0, NULL, NULL, srv_accept_done,
                                          sd) != STATUS_PENDING)
                return 17;
        }
        char c;
        ssize_t n = read(from_parent, &c, 1);
        if (n == 0)
            return 18; /* the parent went away */
        if (n < 0)
            continue;
        if (c == CMD_EXHAUST) {
            /* the consumer's own fds fill the table */
            int fd;
            while (nhog < SERVER_FD_LIMIT && (fd = open("/dev/null", O_RDONLY)) >= 0)
                hog[nhog++] = fd;
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            uint64_t cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000u + ru.ru_utime.tv_usec +
                              (uint64_t)ru.ru_stime.tv_sec * 1000000u + ru.ru_stime.tv_usec;
            if (write(to_parent, &cpu_us, sizeof cpu_us) != sizeof cpu_us)
                return 19;
        } else if (c == CMD_RELEASE) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            uint64_t cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000u + ru.ru_utime.tv_usec +
                              (uint64_t)ru.ru_stime.tv_sec * 1000000u + ru.ru_stime.tv_usec;
            while (nhog > 0)
                close(hog[--nhog]);
            if (write(to_parent, &cpu_us, sizeof cpu_us) != sizeof cpu_us)
                return 20;
        } else if (c == CMD_REPORT) {
            break;
        }
    }
    SOFTNDK_COUNTERS ctr;
    memset(&ctr, 0, sizeof ctr);
    ctr.Size = sizeof ctr;
    if (SoftNdkQueryCounters(s.a, &ctr) != STATUS_SUCCESS)
        return 21;
    int failed_accepts = 0;
    for (unsigned i = 0; i < nsides; i++)
        failed_accepts += atomic_load(&sides[i].accepted) != 1;
    if (write(to_parent, &ctr, sizeof ctr) != sizeof ctr ||
        write(to_parent, &failed_accepts, sizeof failed_accepts) != sizeof failed_accepts)
        return 22;
    for (unsigned i = 0; i < nsides; i++) {
        srv_obj_close(&sides[i].conn->Header);
        srv_obj_close(&sides[i].qp->Header);
        srv_obj_close(&sides[i].cq->Header);
        srv_obj_close(&sides[i].pd->Header);
    }
    srv_obj_close(&s.l->Header);
    SoftNdkCloseAdapter(s.a);
    return 0;
}

/* ---- the parent: flood, good clients, checks ---- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A TCP connection from src_ip to 127.0.0.1:port (blocking connect, then non-blocking). */
static int raw_connect_from(const char *src_ip, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, src_ip, &src.sin_addr);
    CHECK(bind(fd, (struct sockaddr *)&src, sizeof src) == 0);
    struct sockaddr_in dst = ndk_loopback4(port);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    CHECK_MSG(connect(fd, (struct sockaddr *)&dst, sizeof dst) == 0, "connect: %s",
              strerror(errno));
    return fd;
}

/* One good client on adapter a: NdkConnect + NdkCompleteConnect; returns the ms it took. */
static uint64_t good_client(NDK_ADAPTER *a, uint16_t port)
{
    NDK_PD *pd = conf_pd(a);
    struct conf_cq cq;
    conf_cq_create(a, &cq, 16);
    NDK_QP *qp = conf_qp(pd, cq.cq, cq.cq, NULL, 4);
    NDK_CONNECTOR *conn;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &conn), STATUS_SUCCESS);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(port);
    struct ndk_req r;
    ndk_req_init(&r);
    uint64_t t0 = now_ms();
    NTSTATUS st = conn->Dispatch->NdkConnect(conn, qp, (struct sockaddr *)&src, sizeof src,
                                             (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                             ndk_req_done, &r);
    CHECK_STATUS(ndk_req_wait(&r, st), STATUS_SUCCESS);
    struct ndk_req rc;
    ndk_req_init(&rc);
    st = conn->Dispatch->NdkCompleteConnect(conn, NULL, NULL, ndk_req_done, &rc);
    CHECK_STATUS(ndk_req_wait(&rc, st), STATUS_SUCCESS);
    uint64_t took = now_ms() - t0;
    fixture_close_wait(&conn->Header);
    fixture_close_wait(&qp->Header);
    conf_cq_destroy(&cq);
    fixture_close_wait(&pd->Header);
    return took;
}

static void read_exact(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    uint64_t end = now_ms() + 20000;
    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = now_ms();
        CHECK_MSG(now < end, "the server did not answer");
        CHECK(poll(&pfd, 1, (int)(end - now)) >= 0);
        ssize_t n = read(fd, p, len);
        CHECK_MSG(n > 0, "the server exited early");
        p += n;
        len -= (size_t)n;
    }
}

/* Wait (bounded) until the peer reset or closed fd. */
static bool wait_reset(int fd, unsigned timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, (int)timeout_ms) <= 0)
        return false;
    char b;
    return read(fd, &b, 1) <= 0;
}

struct flood_args {
    uint16_t port;
    int *fds;
    int n;
};

/* The flood goes on while the good clients connect. */
static void *flood_thread(void *arg)
{
    struct flood_args *f = arg;
    for (int i = 0; i < f->n; i++) {
        f->fds[i] = raw_connect_from("127.0.0.3", f->port);
        if (i % 2)
            CHECK(send(f->fds[i], "MPA ID Req", 10, MSG_NOSIGNAL) == 10);
    }
    return NULL;
}

TEST_T(flood_larger_than_the_fd_limit_leaves_good_clients_served, 90)
{
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < FLOOD + 200)
        harness_skip("the hard fd limit %llu is too low for the flood",
                     (unsigned long long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);

    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        _exit(server_main(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    uint16_t port = 0;
    read_exact(up[0], &port, sizeof port);

    /* the flood, from another address of lo: nothing, or the first bytes of a Request */
    static int flood[FLOOD];
    uint64_t t0 = now_ms();
    for (int i = 0; i < FLOOD; i++) {
        flood[i] = raw_connect_from("127.0.0.2", port);
        if (i % 2)
            CHECK(send(flood[i], "MPA ID Req", 10, MSG_NOSIGNAL) == 10);
    }
    uint64_t flood_ms = now_ms() - t0;

    /* good clients, one after another, each served within a second */
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.EphemeralPortLow = (USHORT)(30000 + (getpid() % 100) * 64);
    o.EphemeralPortHigh = (USHORT)(o.EphemeralPortLow + 63);
    NDK_ADAPTER *a = conf_open_with(&o);
    static int flood2[FLOOD];
    struct flood_args fa = {port, flood2, FLOOD};
    pthread_t ft;
    CHECK(pthread_create(&ft, NULL, flood_thread, &fa) == 0);
    uint64_t worst = 0;
    for (int i = 0; i < GOOD; i++) {
        uint64_t took = good_client(a, port);
        CHECK_MSG(took < SERVED_WITHIN_MS, "good client %d took %llu ms", i,
                  (unsigned long long)took);
        if (took > worst)
            worst = took;
    }
    CHECK(pthread_join(ft, NULL) == 0);
    /* most of the flood was reset at the door */
    int reset = 0;
    for (int i = 0; i < FLOOD; i++)
        reset += wait_reset(flood[i], 0) + wait_reset(flood2[i], 0);

    /* phase 2: the server's own fds run out; let the flood's survivors time out first (the
     * flood stays open: an end of stream would end them otherwise) */
    struct timespec nap = {2, 0};
    nanosleep(&nap, NULL);
    char c = CMD_EXHAUST;
    CHECK(write(down[1], &c, 1) == 1);
    uint64_t cpu0, cpu1;
    read_exact(up[0], &cpu0, sizeof cpu0);
    int refused[REFUSE];
    int refused_ok = 0;
    for (int i = 0; i < REFUSE; i++) {
        refused[i] = raw_connect_from("127.0.0.1", port);
        refused_ok += wait_reset(refused[i], 2000);
    }
    struct timespec settle = {0, 300 * 1000 * 1000};
    nanosleep(&settle, NULL); /* a spinning listener would burn this */
    c = CMD_RELEASE;
    CHECK(write(down[1], &c, 1) == 1);
    read_exact(up[0], &cpu1, sizeof cpu1);
    for (int i = 0; i < REFUSE; i++)
        close(refused[i]);
    uint64_t after = good_client(a, port);
    CHECK_MSG(after < SERVED_WITHIN_MS, "good client after the fd limit took %llu ms",
              (unsigned long long)after);

    c = CMD_REPORT;
    CHECK(write(down[1], &c, 1) == 1);
    SOFTNDK_COUNTERS ctr;
    int failed_accepts = -1;
    read_exact(up[0], &ctr, sizeof ctr);
    read_exact(up[0], &failed_accepts, sizeof failed_accepts);
    int wst = 0;
    CHECK(waitpid(pid, &wst, 0) == pid);
    CHECK_MSG(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "server exit status 0x%x", wst);
    ndk_close_adapter(a);
    for (int i = 0; i < FLOOD; i++) {
        close(flood[i]);
        close(flood2[i]);
    }
    close(up[0]);
    close(down[1]);

    fprintf(stderr,
            "door flood: %d half-open connections in %llu ms, then %d more during the "
            "good clients, against a server with %d fds; "
            "%d good clients, slowest %llu ms; %d flood connections already reset when the good "
            "clients were done; counters: HandshakesEvicted %llu, HandshakeTimeouts %llu, "
            "HandshakesRefused %llu, Accept %llu, HandshakesPending %llu, IncomingUnanswered "
            "%llu; server CPU while refusing %llu ms; good client after the fd limit %llu ms\n",
            FLOOD, (unsigned long long)flood_ms, FLOOD, SERVER_FD_LIMIT, GOOD,
            (unsigned long long)worst, reset, (unsigned long long)ctr.HandshakesEvicted,
            (unsigned long long)ctr.HandshakeTimeouts, (unsigned long long)ctr.HandshakesRefused,
            (unsigned long long)ctr.Accept, (unsigned long long)ctr.HandshakesPending,
            (unsigned long long)ctr.IncomingUnanswered, (unsigned long long)((cpu1 - cpu0) / 1000u),
            (unsigned long long)after);
    CHECK_EQ_I64(failed_accepts, 0);
    CHECK_EQ_U64(ctr.Accept, GOOD + 1);
    /* every flood connection ended at the door: evicted, or timed out waiting for its Request */
    CHECK_EQ_U64(ctr.HandshakesEvicted + ctr.HandshakeTimeouts, 2 * FLOOD);
    CHECK(ctr.HandshakesEvicted >= 2 * FLOOD - 2 * 2 * (SERVER_FD_LIMIT / 8));
    CHECK_EQ_U64(ctr.HandshakesRefused, REFUSE);
    CHECK_EQ_I64(refused_ok, REFUSE);
    CHECK_EQ_U64(ctr.HandshakesPending, 0);
    CHECK_EQ_U64(ctr.IncomingUnanswered, 0);
    CHECK_MSG(cpu1 - cpu0 < 200000, "the server burnt %llu ms of CPU while out of fds",
              (unsigned long long)((cpu1 - cpu0) / 1000u));
}
