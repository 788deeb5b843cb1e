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
