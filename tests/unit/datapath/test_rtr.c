/* The Read RTR of RFC 6581 peer-to-peer mode (Linux cxgb4's default, p2p_type=1) with softndk
 * as Responder: a raw Initiator offers only the zero-length RDMA Read; softndk's listener
 * accepts, answers the RTR with a zero-length Read Response, and the QP then takes the peer's
 * first Send (MSN 1 on queue 0) and its first real Read Request, which carries MSN 2 on queue 1
 * because the RTR took MSN 1. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "iwarp/mpa.h"

#define QPCTX ((void *)0x7007)

struct rtr_server {
    NDK_ADAPTER *a;
    struct dp_side s;
    NDK_LISTENER *l;
    NDK_CONNECTOR *conn;
    struct harness_event accepted, incoming;
    _Atomic NTSTATUS accept_status;
};

static void on_accept_done(void *ctx, NTSTATUS st)
{
    struct rtr_server *sv = ctx;
    atomic_store(&sv->accept_status, st);
    harness_event_signal(&sv->accepted);
}

static void on_disconnect(void *ctx)
{
    (void)ctx;
}

static void on_connect_event(void *ctx, NDK_CONNECTOR *c)
{
    struct rtr_server *sv = ctx;
    sv->conn = c;
    harness_event_signal(&sv->incoming);
}

static uint16_t listen_any(struct rtr_server *sv)
{
    NDK_ADAPTER *a = sv->a;
    CHECK_EQ_U64(a->Dispatch->NdkCreateListener(a, on_connect_event, sv, NULL, NULL, &sv->l),
                 STATUS_SUCCESS);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ_U64(sv->l->Dispatch->NdkListen(sv->l, (struct sockaddr *)&sin, sizeof sin, NULL,
                                            NULL),
                 STATUS_SUCCESS);
    ULONG len = sizeof sin;
    CHECK_EQ_U64(sv->l->Dispatch->NdkGetLocalAddress(sv->l, (struct sockaddr *)&sin,
                                                             &len),
                 STATUS_SUCCESS);
    return ntohs(sin.sin_port);
}

static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* An Initiator that offers the RTR kinds rtr, with CRC (SNDK_MPA_RTR_NONE: no peer-to-peer). */
static void send_request(int fd, uint8_t rtr)
{
    struct sndk_mpa_params p = {.rev = 2, .crc = true, .enhanced = true, .ird = 4, .ord = 4,
                                .p2p = rtr != SNDK_MPA_RTR_NONE, .rtr = rtr};
    uint8_t buf[SNDK_MPA_FRAME_MAX];
    int n = sndk_mpa_build(buf, sizeof buf, false, &p);
    CHECK(n > 0);
    dp_write_all(fd, buf, (size_t)n);
}

/* Read the Reply frame (20-byte header + private data). */
static void read_reply(int fd, struct sndk_mpa_rx *m)
{
    sndk_mpa_rx_init(m, true, SNDK_MPA_PD_MAX_RFC);
    while (m->state != SNDK_MPA_RX_DONE && m->state != SNDK_MPA_RX_ERROR) {
        struct iovec iov;
        CHECK(sndk_mpa_rx_want(m, &iov) > 0);
        CHECK(dp_read_exact(fd, iov.iov_base, iov.iov_len, DP_TIMEOUT_MS));
        sndk_mpa_rx_advance(m, iov.iov_len);
    }
    CHECK(m->state == SNDK_MPA_RX_DONE);
}

static size_t read_req_fpdu(uint8_t *out, uint32_t msn, uint32_t sink_stag, uint64_t sink_to,
                            uint32_t size, uint32_t src_stag, uint64_t src_to)
{
    struct sndk_fpdu f;
    struct iovec iov[3];
    struct sndk_read_req rr = {.sink_stag = sink_stag, .sink_to = sink_to, .size = size,
                               .src_stag = src_stag, .src_to = src_to};
    int n = sndk_fpdu_read_req(&f, msn, &rr, true, iov, 3);
    CHECK(n > 0);
    return sndk_iov_gather(iov, n, out, 128);
}

/* The zero-length Read Response the Responder owes for a Read Request to (stag, to). */
static void expect_empty_read_resp(int fd, uint32_t stag, uint64_t to)
{
    uint8_t want[64], got[64];
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_READ_RESP, .last = true, .stag = stag, .to = to};
    size_t n = dp_build_fpdu(want, &h, NULL, 0, true);
    CHECK_EQ_U64(n, 20);
    CHECK(dp_read_exact(fd, got, n, DP_TIMEOUT_MS));
    CHECK(memcmp(got, want, n) == 0);
}

static void server_open(struct rtr_server *sv)
{
    memset(sv, 0, sizeof *sv);
    harness_event_init(&sv->accepted);
    harness_event_init(&sv->incoming);
    struct dp_opts o;
    dp_opts_default(&o);
    sv->a = dp_open_adapter();
    dp_side_init(&sv->s, sv->a, &o);
    dp_side_create_qp(&sv->s, &o, QPCTX);
}

static void accept_incoming(struct rtr_server *sv)
{
    CHECK(harness_event_wait(&sv->incoming, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(sv->conn->Dispatch->NdkAccept(sv->conn, sv->s.qp, 4, 4, NULL, 0, on_disconnect,
                                               sv, on_accept_done, sv),
                 STATUS_PENDING);
}

static void on_closed(void *ctx)
{
    harness_event_signal(ctx);
}

/* Close, waiting (bounded) when the close pends. */
static void close_wait(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn)
{
    struct harness_event ev;
    harness_event_init(&ev);
    NTSTATUS st = fn(h, on_closed, &ev);
    if (st == STATUS_PENDING)
        CHECK(harness_event_wait(&ev, 1, DP_TIMEOUT_MS));
    else
        CHECK_EQ_U64(st, STATUS_SUCCESS);
    harness_event_destroy(&ev);
}

static void server_close(struct rtr_server *sv)
{
    if (sv->conn)
        close_wait(&sv->conn->Header, sv->conn->Dispatch->NdkCloseConnector);
    dp_close_qp(sv->s.qp);
    sv->s.qp = NULL;
    close_wait(&sv->l->Header, sv->l->Dispatch->NdkCloseListener);
    dp_side_close(&sv->s);
    SoftNdkCloseAdapter(sv->a);
    harness_event_destroy(&sv->accepted);
    harness_event_destroy(&sv->incoming);
}

TEST(rtr_read_from_a_cxgb4_style_initiator_is_answered_and_the_read_msn_continues_at_2)
{
    struct rtr_server sv;
    server_open(&sv);
    int fd = raw_connect(listen_any(&sv));
    send_request(fd, SNDK_MPA_RTR_READ);
    accept_incoming(&sv);
    struct sndk_mpa_rx m;
    read_reply(fd, &m);
    const struct sndk_mpa_frame *f = sndk_mpa_rx_frame(&m);
    CHECK(!f->reject && f->p2p && f->crc);
    CHECK_EQ_U64(f->rtr, SNDK_MPA_RTR_READ); /* the one kind offered */
    /* the RTR: a zero-length Read, MSN 1, to a sink of the Initiator's choosing */
    uint8_t b[128];
    size_t n = read_req_fpdu(b, 1, 0x11223344u, 0x5566u, 0, 0, 0);
    dp_write_all(fd, b, n);
    expect_empty_read_resp(fd, 0x11223344u, 0x5566u);
    CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_SUCCESS);

    /* the QP's first Send is MSN 1 on queue 0 */
    dp_post_recv(&sv.s, (void *)0x51, 0, 64);
    static const char hello[] = "after the read rtr";
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_SEND, .last = true, .qn = 0, .msn = 1, .mo = 0};
    n = dp_build_fpdu(b, &h, hello, sizeof hello, true);
    dp_write_all(fd, b, n);
    NDK_RESULT_EX r;
    dp_expect(sv.s.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, sizeof hello, QPCTX, (void *)0x51,
                    NdkOperationTypeReceive);
    CHECK(memcmp(sv.s.buf, hello, sizeof hello) == 0);

    /* a real Read Request carries MSN 2 on queue 1: served, not refused as out of order */
    NDK_MR *mr = NULL;
    uint32_t token = 0;
    memcpy(sv.s.buf + 256, "readable", 8);
    mr = dp_reg(&sv.s, 256, 8, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
                &token);
    n = read_req_fpdu(b, 2, 0x99u, 0, 8, token, (uint64_t)(uintptr_t)(sv.s.buf + 256));
    dp_write_all(fd, b, n);
    struct sndk_seg_hdr rh = {.opcode = SNDK_OP_READ_RESP, .last = true, .stag = 0x99u, .to = 0};
    uint8_t want[64], got[64];
    size_t wn = dp_build_fpdu(want, &rh, "readable", 8, true);
    CHECK(dp_read_exact(fd, got, wn, DP_TIMEOUT_MS));
    CHECK(memcmp(got, want, wn) == 0);

    close(fd);
    dp_close_mr(mr);
    server_close(&sv);
}

TEST(rtr_read_chosen_but_a_write_arrives_aborts_the_accept)
{
    struct rtr_server sv;
    server_open(&sv);
    int fd = raw_connect(listen_any(&sv));
    send_request(fd, SNDK_MPA_RTR_READ);
    accept_incoming(&sv);
    struct sndk_mpa_rx m;
    read_reply(fd, &m);
    CHECK_EQ_U64(sndk_mpa_rx_frame(&m)->rtr, SNDK_MPA_RTR_READ);
    uint8_t b[64];
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .last = true, .stag = 1, .to = 0};
    size_t n = dp_build_fpdu(b, &h, NULL, 0, true);
    dp_write_all(fd, b, n);
    CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_CONNECTION_ABORTED);
    CHECK(dp_wait_closed(fd, DP_TIMEOUT_MS));
    close(fd);
    server_close(&sv);
}

TEST(rtr_both_offered_the_responder_picks_write)
{
    struct rtr_server sv;
    server_open(&sv);
    int fd = raw_connect(listen_any(&sv));
    send_request(fd, SNDK_MPA_RTR_WRITE | SNDK_MPA_RTR_READ);
    accept_incoming(&sv);
    struct sndk_mpa_rx m;
    read_reply(fd, &m);
    CHECK_EQ_U64(sndk_mpa_rx_frame(&m)->rtr, SNDK_MPA_RTR_WRITE); /* as siw */
    uint8_t b[64];
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .last = true, .stag = 1, .to = 0};
    size_t n = dp_build_fpdu(b, &h, NULL, 0, true);
    dp_write_all(fd, b, n);
    CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_SUCCESS);
    close(fd);
    server_close(&sv);
}

/* RFC 5044 section 7.1.2: without an RTR the MPA Responder must not send an FPDU before it has
 * received the Initiator's first one (Linux siw fails the connection otherwise). softndk's
 * Responder posts a Send as soon as its Accept completes: nothing reaches the wire — the
 * request waits, counted in ResponderHeld — until the raw Initiator's first FPDU arrives; then
 * the Send goes out as MSN 1 and completes. */
TEST(rtr_none_the_responder_holds_its_first_fpdu_until_the_initiators)
{
    struct rtr_server sv;
    server_open(&sv);
    int fd = raw_connect(listen_any(&sv));
    send_request(fd, SNDK_MPA_RTR_NONE); /* Rev 2, enhanced, no peer-to-peer: as stock siw */
    dp_post_recv(&sv.s, (void *)0x52, 0, 64);
    accept_incoming(&sv);
    struct sndk_mpa_rx m;
    read_reply(fd, &m);
    const struct sndk_mpa_frame *f = sndk_mpa_rx_frame(&m);
    CHECK(!f->reject && !f->p2p && f->crc);
    CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_SUCCESS);

    static const char early[] = "the responder's first send";
    memcpy(sv.s.buf + 128, early, sizeof early);
    dp_post_send(&sv.s, (void *)0x53, 128, sizeof early, 0);
    uint8_t got[128];
    CHECK_MSG(!dp_read_exact(fd, got, 1, 300), "the Responder sent before the Initiator");
    NDK_RESULT_EX r[2];
    CHECK_EQ_U64(dp_poll(sv.s.cq, r, 1, 100), 0); /* the Send is held, not complete */
    SOFTNDK_COUNTERS c = {.Size = sizeof c};
    CHECK_EQ_U64(SoftNdkQueryCounters(sv.a, &c), STATUS_SUCCESS);
    CHECK_EQ_U64(c.ResponderHeld, 1);

    /* the Initiator's first FPDU opens the gate */
    static const char first[] = "the initiator's first";
    uint8_t b[128];
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_SEND, .last = true, .qn = 0, .msn = 1, .mo = 0};
    size_t n = dp_build_fpdu(b, &h, first, sizeof first, true);
    dp_write_all(fd, b, n);
    uint8_t want[128];
    size_t wn = dp_build_fpdu(want, &h, early, sizeof early, true); /* MSN 1 of ours */
    CHECK(dp_read_exact(fd, got, wn, DP_TIMEOUT_MS));
    CHECK(memcmp(got, want, wn) == 0);
    dp_expect(sv.s.cq, r, 2, 0);
    const NDK_RESULT_EX *rv = r[0].Type == NdkOperationTypeReceive ? &r[0] : &r[1];
    const NDK_RESULT_EX *sd = rv == &r[0] ? &r[1] : &r[0];
    dp_check_result(rv, STATUS_SUCCESS, sizeof first, QPCTX, (void *)0x52, NdkOperationTypeReceive);
    dp_check_result(sd, STATUS_SUCCESS, sizeof early, QPCTX, (void *)0x53, NdkOperationTypeSend);
    CHECK(memcmp(sv.s.buf, first, sizeof first) == 0);
    CHECK_EQ_U64(SoftNdkQueryCounters(sv.a, &c), STATUS_SUCCESS);
    CHECK_EQ_U64(c.ResponderHeld, 1);
    close(fd);
    server_close(&sv);
}

/* With an RTR the Initiator's RTR is its first FPDU: nothing is held, nothing counted. */
TEST(rtr_write_the_responder_sends_at_once_and_holds_nothing)
{
    struct rtr_server sv;
    server_open(&sv);
    int fd = raw_connect(listen_any(&sv));
    send_request(fd, SNDK_MPA_RTR_WRITE);
    accept_incoming(&sv);
    struct sndk_mpa_rx m;
    read_reply(fd, &m);
    uint8_t b[128];
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .last = true, .stag = 1, .to = 0};
    size_t n = dp_build_fpdu(b, &h, NULL, 0, true);
    dp_write_all(fd, b, n);
    CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_SUCCESS);
    static const char now[] = "at once";
    memcpy(sv.s.buf + 128, now, sizeof now);
    dp_post_send(&sv.s, (void *)0x54, 128, sizeof now, 0);
    struct sndk_seg_hdr sh = {.opcode = SNDK_OP_SEND, .last = true, .qn = 0, .msn = 1, .mo = 0};
    uint8_t want[128], got[128];
    size_t wn = dp_build_fpdu(want, &sh, now, sizeof now, true);
    CHECK(dp_read_exact(fd, got, wn, DP_TIMEOUT_MS));
    CHECK(memcmp(got, want, wn) == 0);
    NDK_RESULT_EX r;
    dp_expect(sv.s.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, sizeof now, QPCTX, (void *)0x54, NdkOperationTypeSend);
    SOFTNDK_COUNTERS c = {.Size = sizeof c};
    CHECK_EQ_U64(SoftNdkQueryCounters(sv.a, &c), STATUS_SUCCESS);
    CHECK_EQ_U64(c.ResponderHeld, 0);
    close(fd);
    server_close(&sv);
}
