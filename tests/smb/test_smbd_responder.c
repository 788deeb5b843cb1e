/* The SMB Direct ([MS-SMBD]) Responder's listener paths (smb/include/smb/smbd.h): a negotiate
 * request that offers no version 0x0100 (answered STATUS_NOT_SUPPORTED, then disconnected:
 * 3.1.5.6), a port already taken (-EADDRINUSE), and more connect requests than the listener
 * holds (its backlog pause). The peers here are raw NDK initiators built on the fixture, so the
 * test sees the Responder's bytes as they come, or our own Initiator where only the outcome
 * counts. Every wait is bounded; every object is closed. */
#include <smb/smbd.h>

#include "conn.h"
#include "fixture.h"
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../smb/transport/smbd_wire.h"

static uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
    return le16(p) | le16(p + 2) << 16;
}

/* ---- one smbd_accept on a thread ------------------------------------------------------- */

struct acceptor {
    smbd_listener *l;
    pthread_t th;
    int timeout_ms;
    int rc;
    char err[256];
    smb_transport *t; /* accepted: destroyed by the thread before it returns */
};

static void *accept_main(void *arg)
{
    struct acceptor *a = arg;
    a->rc = smbd_accept(a->l, &a->t, a->timeout_ms, a->err, sizeof a->err);
    if (a->rc == 0)
        a->t->ops->destroy(a->t);
    return NULL;
}

static void accept_start(struct acceptor *a, smbd_listener *l, int timeout_ms)
{
    memset(a, 0, sizeof *a);
    a->l = l;
    a->timeout_ms = timeout_ms;
    CHECK(pthread_create(&a->th, NULL, accept_main, a) == 0);
}

/* ---- (a) a negotiate request without version 0x0100 ------------------------------------ */

static void on_raw_disconnect(void *ctx)
{
    struct fx_side *s = ctx;
    atomic_fetch_add(&s->disc_n, 1);
    harness_event_signal(&s->disc_ev);
}

/* [MS-SMBD] 3.1.5.6: "If ... MinVersion is greater than 0x0100 or MaxVersion is less than
 * 0x0100" the Responder sends a Negotiate Response with Status STATUS_NOT_SUPPORTED and
 * disconnects. The initiator here is plain NDK: it posts one receive, connects, sends the 20
 * request bytes of 2.2.1 and reads the 32 bytes of 2.2.2 that come back. */
static void refused_version(smbd_listener *l, NDK_ADAPTER *ac, uint16_t min_v, uint16_t max_v)
{
    struct acceptor acc;
    accept_start(&acc, l, 10000);
    struct fx_side *cl = calloc(1, sizeof *cl);
    CHECK(cl);
    fx_side_init(cl, ac, 4096, 4, 4);
    fx_post_recv(cl, 1, 0, 1024); /* before connecting: the response must find it */
    CHECK_STATUS(ac->Dispatch->NdkCreateConnector(ac, ndk_create_never, NULL, &cl->conn),
                 STATUS_SUCCESS);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(smbd_listener_port(l));
    struct ndk_req rc, rcc;
    ndk_req_init(&rc);
    CHECK_STATUS(ndk_req_wait(&rc, cl->conn->Dispatch->NdkConnect(
                                       cl->conn, cl->qp, (struct sockaddr *)&src, sizeof src,
                                       (struct sockaddr *)&dst, sizeof dst, 4, 4, NULL, 0,
                                       ndk_req_done, &rc)),
                 STATUS_SUCCESS);
    ndk_req_init(&rcc);
    CHECK_STATUS(ndk_req_wait(&rcc, cl->conn->Dispatch->NdkCompleteConnect(
                                        cl->conn, on_raw_disconnect, cl, ndk_req_done, &rcc)),
                 STATUS_SUCCESS);
    harness_event_destroy(&rc.ev);
    harness_event_destroy(&rcc.ev);
    struct smbd_negotiate_request q = {
        .min_version = min_v,
        .max_version = max_v,
        .credits_requested = 10,
        .preferred_send_size = 1364,
        .max_receive_size = 1364,
        .max_fragmented_size = 1u << 20,
    };
    smbd_encode_negotiate_request(&q, cl->buf + 2048);
    fx_post_send(cl, 2, 2048, SMBD_NEGOTIATE_REQUEST_SIZE, 0);
    CHECK_EQ_U64(fx_collect(cl, 2, FIXTURE_WAIT_MS), 2);
    const struct fx_result *send = fx_nth(cl, false, 0), *recv = fx_nth(cl, true, 0);
    CHECK(send && recv);
    CHECK_STATUS(send->status, STATUS_SUCCESS);
    CHECK_STATUS(recv->status, STATUS_SUCCESS);
    /* 2.2.2: 32 bytes; MinVersion, MaxVersion 0x0100 (what the Responder speaks), Status at
     * byte 12 */
    CHECK_EQ_U64(recv->bytes, SMBD_NEGOTIATE_RESPONSE_SIZE);
    CHECK_EQ_U64(le16(cl->buf + 0), SMBD_VERSION_1);
    CHECK_EQ_U64(le16(cl->buf + 2), SMBD_VERSION_1);
    CHECK_EQ_U64(le32(cl->buf + 12), 0xC00000BBu); /* STATUS_NOT_SUPPORTED */
    /* the codec's Initiator check (3.1.5.7) refuses it, naming the status */
    struct smbd_negotiate_response r;
    const char *why = "";
    CHECK_EQ_I64(smbd_decode_negotiate_response(cl->buf, recv->bytes, 1364, &r, &why), -EPROTO);
    CHECK_EQ_U64(r.status, SMBD_STATUS_NOT_SUPPORTED);
    /* then the Responder ends the connection: our disconnect event, within the bound */
    CHECK_MSG(harness_event_wait(&cl->disc_ev, 1, FIXTURE_WAIT_MS),
              "the Responder did not disconnect after STATUS_NOT_SUPPORTED");
    CHECK_EQ_U64(atomic_load(&cl->disc_n), 1);
    /* answered with ours, as a peer does: the Responder's orderly disconnect waits for it */
    struct ndk_req rd;
    ndk_req_init(&rd);
    CHECK_STATUS(ndk_req_wait(&rd, cl->conn->Dispatch->NdkDisconnect(cl->conn, ndk_req_done, &rd)),
                 STATUS_SUCCESS);
    harness_event_destroy(&rd.ev);
    uint64_t t0 = fixture_now_us();
    pthread_join(acc.th, NULL);
    CHECK_MSG(fixture_now_us() - t0 < 2000000u, "smbd_accept returned %llu ms after the disconnect",
              (unsigned long long)((fixture_now_us() - t0) / 1000u));
    CHECK_EQ_I64(acc.rc, -EPROTONOSUPPORT);
    CHECK_MSG(strstr(acc.err, "offers no version 0x0100") != NULL, "smbd_accept: %s", acc.err);
    fx_side_close(cl);
    free(cl);
}

static void connect_ok(smbd_listener *l, NDK_ADAPTER *ac)
{
    struct acceptor acc;
    accept_start(&acc, l, 10000);
    struct sockaddr_in dst = ndk_loopback4(smbd_listener_port(l));
    smb_transport *t = NULL;
    char err[256] = "";
    int rc = smbd_connect(ac, (struct sockaddr *)&dst, sizeof dst, NULL, &t, err, sizeof err);
    CHECK_MSG(rc == 0, "smbd_connect: %d %s", rc, err);
    t->ops->destroy(t);
    pthread_join(acc.th, NULL);
    CHECK_MSG(acc.rc == 0, "smbd_accept: %d %s", acc.rc, acc.err);
}

TEST_T(smbd_responder_refuses_other_versions, 60)
{
    NDK_ADAPTER *as = fx_open(NULL), *ac = fx_open(NULL);
    smbd_listener *l = NULL;
    struct sockaddr_in any = ndk_loopback4(0);
    char err[256] = "";
    CHECK_EQ_I64(smbd_listen(as, (struct sockaddr *)&any, sizeof any, NULL, &l, err, sizeof err),
                 0);
    refused_version(l, ac, 0x0200, 0x0300); /* only later versions */
    refused_version(l, ac, 0x0001, 0x00FF); /* only earlier ones */
    /* the listener goes on: a good Initiator is served next */
    connect_ok(l, ac);
    smbd_listener_close(l);
    SoftNdkCloseAdapter(as);
    SoftNdkCloseAdapter(ac);
}

/* ---- (b) a port already in use ----------------------------------------------------------- */

/* smbd.h: smbd_listen returns -EADDRINUSE when the address is taken (NdkListen's
 * STATUS_SHARING_VIOLATION, named in err), with nothing left behind. */
static void listen_in_use(NDK_ADAPTER *a, uint16_t port)
{
    struct sockaddr_in addr = ndk_loopback4(port);
    smbd_listener *l = (smbd_listener *)(uintptr_t)1; /* must come back NULL */
    char err[256] = "";
    CHECK_EQ_I64(smbd_listen(a, (struct sockaddr *)&addr, sizeof addr, NULL, &l, err, sizeof err),
                 -EADDRINUSE);
    CHECK(l == NULL);
    CHECK_MSG(strstr(err, "STATUS_SHARING_VIOLATION") != NULL, "smbd_listen: %s", err);
}

TEST_T(smbd_listen_port_in_use, 60)
{
    NDK_ADAPTER *a = fx_open(NULL), *b = fx_open(NULL);
    smbd_listener *l = NULL;
    struct sockaddr_in any = ndk_loopback4(0);
    char err[256] = "";
    CHECK_EQ_I64(smbd_listen(a, (struct sockaddr *)&any, sizeof any, NULL, &l, err, sizeof err), 0);
    uint16_t port = smbd_listener_port(l);
    CHECK(port != 0);
    /* taken by an SMB Direct listener: of the same adapter, and of another one */
    listen_in_use(a, port);
    listen_in_use(b, port);
    /* the listener that holds it still serves */
    connect_ok(l, b);
    smbd_listener_close(l);
    /* once closed, the port is free again */
    struct sockaddr_in again = ndk_loopback4(port);
    CHECK_EQ_I64(smbd_listen(a, (struct sockaddr *)&again, sizeof again, NULL, &l, err, sizeof err),
                 0);
    CHECK_EQ_U64(smbd_listener_port(l), port);
    smbd_listener_close(l);

    /* taken by a plain TCP listener of this process, outside NDK */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in tcp = ndk_loopback4(0);
    CHECK(bind(fd, (struct sockaddr *)&tcp, sizeof tcp) == 0);
    CHECK(listen(fd, 4) == 0);
    socklen_t tl = sizeof tcp;
    CHECK(getsockname(fd, (struct sockaddr *)&tcp, &tl) == 0);
    listen_in_use(a, ntohs(tcp.sin_port));
    close(fd);
    SoftNdkCloseAdapter(a);
    SoftNdkCloseAdapter(b);
}

/* ---- (c) more connect requests than the listener holds ----------------------------------- */

/* smbd.h: up to SMBD_BACKLOG (64) requests wait for smbd_accept, each held (its Initiator's
 * NdkConnect pending); when 64 wait, the listener pauses and refuses further requests (the
 * Initiator: -ECONNREFUSED, STATUS_CONNECTION_REFUSED), queuing none; it resumes once
 * smbd_accept has taken the backlog down to 32. smbd_listener_close refuses what still waits. */
#define BACKLOG  64
#define NCLIENTS (BACKLOG + 3)

struct bclient {
    pthread_t th;
    NDK_ADAPTER *a;
    uint16_t port;
    int rc;
    char err[256];
    atomic_bool finished; /* smbd_connect returned */
    struct harness_event *done, *release;
};

/* Small queues: 67 connections live at once on both sides */
static const smbd_params small = {
    .receive_credit_max = 8,
    .send_credit_target = 8,
    .max_read_write_size = 65536,
    .negotiate_timeout_ms = 30000,
};

static void *bclient_main(void *arg)
{
    struct bclient *c = arg;
    struct sockaddr_in dst = ndk_loopback4(c->port);
    smb_transport *t = NULL;
    c->rc =
        smbd_connect(c->a, (struct sockaddr *)&dst, sizeof dst, &small, &t, c->err, sizeof c->err);
    atomic_store(&c->finished, true);
    harness_event_signal(c->done);
    if (c->rc == 0) {
        /* held until the end, so that both sides disconnect together (an orderly disconnect
         * waits for the peer's) */
        CHECK(harness_event_wait(c->release, 1, 60000));
        t->ops->destroy(t);
    }
    return NULL;
}

static void bclient_start(struct bclient *c, NDK_ADAPTER *a, uint16_t port,
                          struct harness_event *done, struct harness_event *release)
{
    c->a = a;
    c->port = port;
    c->done = done;
    c->release = release;
    CHECK(pthread_create(&c->th, NULL, bclient_main, c) == 0);
}

/* Waits (bounded) until `count` Initiators have returned; on timeout, names those that have
 * not. */
static void wait_done(struct harness_event *done, unsigned count, struct bclient *cl,
                      unsigned started, const char *what)
{
    if (harness_event_wait(done, count, 10000))
        return;
    char list[512] = "";
    size_t n = 0;
    for (unsigned i = 0; i < started && n < sizeof list - 8; i++)
        if (!atomic_load(&cl[i].finished))
            n += (size_t)snprintf(list + n, sizeof list - n, " %u", i);
    CHECK_MSG(false, "%s: %u of %u Initiators returned; still connecting:%s", what,
              harness_event_count(done), count, list);
}

static uint64_t unanswered(NDK_ADAPTER *a)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    return c.IncomingUnanswered;
}

static void backlog_round(ULONG server_threads)
{
    SOFTNDK_OPTIONS os, oc;
    fx_options(&os, NULL);
    os.ProgressThreads = server_threads; /* 2: connect events of several connectors at once */
    fx_options(&oc, NULL);
    /* 67 connections at once: wider than the fixture's 32 ports; and a held request outlives
     * the default 10 s handshake bound on a loaded machine */
    oc.EphemeralPortLow = oc.EphemeralPortHigh = 0;
    oc.ConnectTimeoutMs = 60000;
    NDK_ADAPTER *as = fx_open_with(&os), *ac = fx_open_with(&oc);
    smbd_listener *l = NULL;
    struct sockaddr_in any = ndk_loopback4(0);
    char err[256] = "";
    CHECK_EQ_I64(smbd_listen(as, (struct sockaddr *)&any, sizeof any, &small, &l, err, sizeof err),
                 0);
    uint16_t port = smbd_listener_port(l);
    struct bclient *cl = calloc(NCLIENTS, sizeof *cl);
    smb_transport **acc = calloc(NCLIENTS, sizeof *acc);
    CHECK(cl && acc);
    struct harness_event done, release;
    harness_event_init(&done);
    harness_event_init(&release);
    unsigned naccepted = 0;

    /* 64 requests: all held, none answered yet */
    for (unsigned i = 0; i < BACKLOG; i++)
        bclient_start(&cl[i], ac, port, &done, &release);
    CHECK_EQ_U64(FX_WAIT_COUNTER(as, IncomingUnanswered, BACKLOG), BACKLOG);
    CHECK_EQ_U64(harness_event_count(&done), 0);
    /* the listener is paused: two more are refused at once, and not queued */
    for (unsigned i = BACKLOG; i < BACKLOG + 2; i++)
        bclient_start(&cl[i], ac, port, &done, &release);
    wait_done(&done, 2, cl, BACKLOG + 2, "the requests past the backlog");
    for (unsigned i = BACKLOG; i < BACKLOG + 2; i++) {
        pthread_join(cl[i].th, NULL);
        CHECK_EQ_I64(cl[i].rc, -ECONNREFUSED);
        CHECK_MSG(strstr(cl[i].err, "STATUS_CONNECTION_REFUSED") != NULL, "%s", cl[i].err);
    }
    CHECK_EQ_U64(harness_event_count(&done), 2);
    CHECK_EQ_U64(unanswered(as), BACKLOG);
    /* 32 accepted: each of their Initiators connects */
    for (unsigned i = 0; i < BACKLOG / 2; i++) {
        int rc = smbd_accept(l, &acc[naccepted], 10000, err, sizeof err);
        CHECK_MSG(rc == 0, "smbd_accept %u: %d %s", i, rc, err);
        naccepted++;
    }
    wait_done(&done, 2 + BACKLOG / 2, cl, BACKLOG + 2, "the accepted Initiators");
    /* down to 32 waiting: resumed, so a new request is held again rather than refused */
    bclient_start(&cl[BACKLOG + 2], ac, port, &done, &release);
    CHECK_EQ_U64(FX_WAIT_COUNTER(as, IncomingUnanswered, BACKLOG / 2 + 1), BACKLOG / 2 + 1);
    CHECK_EQ_U64(harness_event_count(&done), 2 + BACKLOG / 2);
    /* 16 more accepted; the listener closed with 17 still waiting: those are refused */
    for (unsigned i = 0; i < 16; i++) {
        int rc = smbd_accept(l, &acc[naccepted], 10000, err, sizeof err);
        CHECK_MSG(rc == 0, "smbd_accept: %d %s", rc, err);
        naccepted++;
    }
    wait_done(&done, 2 + BACKLOG / 2 + 16, cl, NCLIENTS, "the accepted Initiators");
    CHECK_EQ_U64(unanswered(as), 17);
    /* the accepted connections end (both sides together) before the listener closes: its
     * close waits for every connection that came through it (smbd.h) */
    harness_event_signal(&release);
    for (unsigned i = 0; i < naccepted; i++)
        acc[i]->ops->destroy(acc[i]);
    uint64_t t0 = fixture_now_us();
    smbd_listener_close(l);
    CHECK_MSG(fixture_now_us() - t0 < 5000000u, "smbd_listener_close took %llu ms",
              (unsigned long long)((fixture_now_us() - t0) / 1000u));
    wait_done(&done, NCLIENTS, cl, NCLIENTS, "the Initiators held at close");
    CHECK_EQ_U64(unanswered(as), 0);

    unsigned ok = 0, refused = 0;
    for (unsigned i = 0; i < NCLIENTS; i++) {
        if (i != BACKLOG && i != BACKLOG + 1)
            pthread_join(cl[i].th, NULL);
        if (cl[i].rc == 0)
            ok++;
        else if (cl[i].rc == -ECONNREFUSED && strstr(cl[i].err, "STATUS_CONNECTION_REFUSED"))
            refused++;
        else
            CHECK_MSG(false, "Initiator %u: %d %s", i, cl[i].rc, cl[i].err);
    }
    CHECK_EQ_U64(naccepted, BACKLOG / 2 + 16);
    CHECK_EQ_U64(ok, naccepted);
    CHECK_EQ_U64(refused, 2 + 17);
    harness_event_destroy(&done);
    harness_event_destroy(&release);
    free(cl);
    free(acc);
    SoftNdkCloseAdapter(as);
    SoftNdkCloseAdapter(ac);
}

TEST_T(smbd_listener_backlog_pause, 120)
{
    backlog_round(1);
}

TEST_T(smbd_listener_backlog_pause_two_threads, 120)
{
    backlog_round(2);
}

/* A held request whose Initiator gave up (its ConnectTimeoutMs passed) before smbd_accept
 * took it: smbd_accept says so (-ECONNRESET) and the next request is served (smbd.h). */
TEST_T(smbd_accept_of_a_request_given_up, 60)
{
    SOFTNDK_OPTIONS oc;
    fx_options(&oc, NULL);
    oc.ConnectTimeoutMs = 1000; /* ample for loopback to deliver the request */
    NDK_ADAPTER *as = fx_open(NULL), *impatient = fx_open_with(&oc), *ac = fx_open(NULL);
    smbd_listener *l = NULL;
    struct sockaddr_in any = ndk_loopback4(0);
    char err[256] = "";
    CHECK_EQ_I64(smbd_listen(as, (struct sockaddr *)&any, sizeof any, NULL, &l, err, sizeof err),
                 0);
    struct sockaddr_in dst = ndk_loopback4(smbd_listener_port(l));
    smb_transport *t = NULL;
    CHECK_EQ_I64(
        smbd_connect(impatient, (struct sockaddr *)&dst, sizeof dst, NULL, &t, err, sizeof err),
        -ETIMEDOUT);
    CHECK(t == NULL);
    CHECK_MSG(strstr(err, "STATUS_IO_TIMEOUT") != NULL, "smbd_connect: %s", err);
    CHECK_EQ_U64(unanswered(as), 1);
    CHECK_EQ_I64(smbd_accept(l, &t, 5000, err, sizeof err), -ECONNRESET);
    CHECK(t == NULL);
    CHECK_MSG(strstr(err, "NdkAccept: STATUS_CONNECTION_ABORTED") != NULL, "smbd_accept: %s", err);
    CHECK_EQ_U64(unanswered(as), 0);
    connect_ok(l, ac);
    smbd_listener_close(l);
    SoftNdkCloseAdapter(as);
    SoftNdkCloseAdapter(impatient);
    SoftNdkCloseAdapter(ac);
}
