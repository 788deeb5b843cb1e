/* The Read RTR of RFC 6581 peer-to-peer mode (Linux cxgb4's default, p2p_type=1) with softndk
 * as Responder: a raw Initiator offers only the zero-length RDMA Read; softndk's listener
 * accepts, answers the RTR with a zero-length Read Response, and the QP then takes the peer's
 * first Send (MSN 1 on queue 0) and its first real Read Request, which carries MSN 2 on queue 1
 * because the RTR took MSN 1. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "datapath.h"
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
    struct sndk_mpa_params p = {.rev = 2,
                                .crc = true,
                                .enhanced = true,
                                .ird = 4,
                                .ord = 4,
                                .p2p = rtr != SNDK_MPA_RTR_NONE,
                                .rtr = rtr};
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
    if (sv->l) /* an Initiator test has none */
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

/* ---- The first FPDU after the Reply, when it is not the RTR: each fault gets its Terminate
 * (docs/wire.md, "The first FPDU"), byte for byte, then the connection closes and NdkAccept
 * fails with STATUS_CONNECTION_ABORTED. */

#include "iwarp/crc32c.h"

/* The Terminate softndk must send: MSN 1 on QN 2, control word ctrl, then (M, D) the DDP
 * Segment Length and the offending DDP header, then (R) the Read Request body. */
static size_t first_term_bytes(uint8_t *out, uint32_t ctrl, const uint8_t *ddp_hdr, size_t hdr_len,
                               uint16_t seg_len, const uint8_t *rreq)
{
    uint32_t ulpdu = 18 + 4 + (hdr_len ? 2 + (uint32_t)hdr_len : 0) + (rreq ? 28 : 0);
    size_t n = 0;
    out[n++] = (uint8_t)(ulpdu >> 8);
    out[n++] = (uint8_t)ulpdu;
    static const uint8_t hdr[18] = {0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0};
    memcpy(out + n, hdr, 18);
    n += 18;
    sndk_put_be32(out + n, ctrl);
    n += 4;
    if (hdr_len) {
        sndk_put_be16(out + n, seg_len);
        n += 2;
        memcpy(out + n, ddp_hdr, hdr_len);
        n += hdr_len;
    }
    if (rreq) {
        memcpy(out + n, rreq, 28);
        n += 28;
    }
    while (n % 4)
        out[n++] = 0;
    sndk_put_le32(out + n, sndk_crc32c(0, out, n));
    return n + 4;
}

enum first_kind {
    FK_BAD_CRC,
    FK_ZERO_CRC,
    FK_SEND,
    FK_WRITE_WITH_DATA,
    FK_SECOND_REQUEST,
    FK_WRITE_NOT_LAST,
    FK_LYING_PD_LENGTH,
    FK_READ_WITH_SIZE,
    FK_READ_WHEN_WRITE,
    FK_WRITE_WHEN_READ,
};

struct first_case {
    const char *name;
    enum first_kind kind;
    uint8_t rtr_offered;
    uint32_t ctrl;  /* layer, etype, code, Hdrct of the Terminate */
    size_t hdr_len; /* bytes of the offending DDP header it carries (after the MPA length) */
    bool rreq;      /* ... and the Read Request body */
};

static const struct first_case first_cases[] = {
    {"bad_crc", FK_BAD_CRC, SNDK_MPA_RTR_WRITE, 0x20020000u, 0, false},
    {"zero_crc", FK_ZERO_CRC, SNDK_MPA_RTR_WRITE, 0x20020000u, 0, false},
    {"send_instead_of_rtr", FK_SEND, SNDK_MPA_RTR_WRITE, 0x0206C000u, 18, false},
    {"rtr_with_payload", FK_WRITE_WITH_DATA, SNDK_MPA_RTR_WRITE, 0x1100C000u, 14, false},
    {"second_mpa_request", FK_SECOND_REQUEST, SNDK_MPA_RTR_WRITE, 0x20040000u, 0, false},
    {"rtr_not_last", FK_WRITE_NOT_LAST, SNDK_MPA_RTR_WRITE, 0x0206C000u, 14, false},
    {"lying_pd_length", FK_LYING_PD_LENGTH, SNDK_MPA_RTR_WRITE, 0x12060000u, 0, false},
    {"read_rtr_with_size", FK_READ_WITH_SIZE, SNDK_MPA_RTR_READ, 0x0100E000u, 18, true},
    {"read_when_write_chosen", FK_READ_WHEN_WRITE, SNDK_MPA_RTR_WRITE, 0x0206E000u, 18, true},
    {"write_when_read_chosen", FK_WRITE_WHEN_READ, SNDK_MPA_RTR_READ, 0x0206C000u, 14, false},
};

/* The bad first FPDU of case c into out; returns its length. */
static size_t first_bytes(const struct first_case *c, uint8_t *out)
{
    struct sndk_seg_hdr wr = {.opcode = SNDK_OP_WRITE, .last = true, .stag = 1, .to = 0};
    size_t n = 0;
    switch (c->kind) {
    case FK_BAD_CRC:
        n = dp_build_fpdu(out, &wr, NULL, 0, true);
        out[n - 1] ^= 0x5a;
        break;
    case FK_ZERO_CRC:
        n = dp_build_fpdu(out, &wr, NULL, 0, true);
        memset(out + n - 4, 0, 4); /* a peer that ignored the CRC rule */
        break;
    case FK_SEND: {
        struct sndk_seg_hdr h = {.opcode = SNDK_OP_SEND, .last = true, .qn = 0, .msn = 1};
        n = dp_build_fpdu(out, &h, "hi", 2, true);
        break;
    }
    case FK_WRITE_WITH_DATA:
        n = dp_build_fpdu(out, &wr, "12345678", 8, true);
        break;
    case FK_SECOND_REQUEST: {
        struct sndk_mpa_params p = {.rev = 2,
                                    .crc = true,
                                    .enhanced = true,
                                    .ird = 4,
                                    .ord = 4,
                                    .p2p = true,
                                    .rtr = SNDK_MPA_RTR_WRITE};
        int k = sndk_mpa_build(out, SNDK_MPA_FRAME_MAX, false, &p);
        CHECK(k > 0);
        n = (size_t)k;
        break;
    }
    case FK_WRITE_NOT_LAST:
        wr.last = false;
        n = dp_build_fpdu(out, &wr, NULL, 0, true);
        break;
    case FK_LYING_PD_LENGTH:
        /* private data the Request's PD_Length did not count, then the right RTR */
        memcpy(out, "extra-pd", 8);
        n = 8 + dp_build_fpdu(out + 8, &wr, NULL, 0, true);
        break;
    case FK_READ_WITH_SIZE:
        n = read_req_fpdu(out, 1, 0x11u, 0, 8, 0x22u, 0);
        break;
    case FK_READ_WHEN_WRITE:
        n = read_req_fpdu(out, 1, 0x11u, 0, 0, 0, 0);
        break;
    case FK_WRITE_WHEN_READ:
        n = dp_build_fpdu(out, &wr, NULL, 0, true);
        break;
    }
    return n;
}

TEST(rtr_first_fpdu_faults_get_their_terminate)
{
    for (size_t i = 0; i < sizeof first_cases / sizeof first_cases[0]; i++) {
        const struct first_case *c = &first_cases[i];
        /* one case alone, e.g. for a capture (SOFTNDK_PCAP) to decode with tshark */
        const char *only = getenv("SOFTNDK_TEST_FIRST_FPDU");
        if (only && strcmp(only, c->name) != 0)
            continue;
        struct rtr_server sv;
        server_open(&sv);
        int fd = raw_connect(listen_any(&sv));
        send_request(fd, c->rtr_offered);
        accept_incoming(&sv);
        struct sndk_mpa_rx m;
        read_reply(fd, &m);
        uint8_t b[SNDK_MPA_FRAME_MAX + 64];
        size_t n = first_bytes(c, b);
        dp_write_all(fd, b, n);
        /* the DDP header starts after the MPA length (and after the stray bytes) */
        const uint8_t *hdr = b + (c->kind == FK_LYING_PD_LENGTH ? 10 : 2);
        uint8_t want[128], got[128];
        size_t wn = first_term_bytes(want, c->ctrl, hdr, c->hdr_len, (uint16_t)sndk_get_be16(b),
                                     c->rreq ? hdr + 18 : NULL);
        CHECK_MSG(dp_read_exact(fd, got, wn, DP_TIMEOUT_MS), "%s: no Terminate", c->name);
        CHECK_MSG(memcmp(got, want, wn) == 0, "%s: Terminate %08x, want %08x", c->name,
                  sndk_get_be32(got + 20), c->ctrl);
        CHECK_MSG(dp_wait_closed(fd, DP_TIMEOUT_MS), "%s: not closed", c->name);
        CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
        CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_CONNECTION_ABORTED);
        close(fd);
        server_close(&sv);
    }
}

/* ---- Private data of 257-512 bytes (RFC 5044's limit; docs/decisions.md #22) ---- */

/* A Request (rev 2, CRC, the RFC 6581 word with the Write RTR) whose private data after the
 * word is n bytes (its PD_Length n + 4). */
static size_t big_request(uint8_t *out, size_t n)
{
    memcpy(out, SNDK_MPA_KEY_REQ, 16);
    out[16] = SNDK_MPA_FLAG_CRC | SNDK_MPA_FLAG_ENHANCED;
    out[17] = 2;
    sndk_put_be16(out + 18, (uint16_t)(n + 4));
    sndk_put_be16(out + 20, (uint16_t)(SNDK_MPA_V2_P2P | 4));
    sndk_put_be16(out + 22, (uint16_t)(SNDK_MPA_V2_RTR_WRITE | 4));
    for (size_t i = 0; i < n; i++)
        out[24 + i] = (uint8_t)(i * 7 + 1);
    return 24 + n;
}

TEST(private_data_up_to_512_bytes_is_accepted_and_readable)
{
    static const size_t sizes[] = {253, 300, 508};
    for (size_t k = 0; k < 3; k++) {
        size_t n = sizes[k];
        struct rtr_server sv;
        server_open(&sv);
        int fd = raw_connect(listen_any(&sv));
        uint8_t req[24 + 512];
        size_t len = big_request(req, n);
        dp_write_all(fd, req, len);
        CHECK_MSG(harness_event_wait(&sv.incoming, 1, DP_TIMEOUT_MS), "%zu bytes: no event", n);
        uint8_t got[512];
        ULONG glen = 16;
        CHECK_EQ_U64(sv.conn->Dispatch->NdkGetConnectionData(sv.conn, NULL, NULL, got, &glen),
                     STATUS_BUFFER_TOO_SMALL);
        CHECK_EQ_U64(glen, n);
        glen = sizeof got;
        CHECK_EQ_U64(sv.conn->Dispatch->NdkGetConnectionData(sv.conn, NULL, NULL, got, &glen),
                     STATUS_SUCCESS);
        CHECK_EQ_U64(glen, n);
        CHECK_MEM(got, req + 24, n);
        CHECK_EQ_U64(sv.conn->Dispatch->NdkAccept(sv.conn, sv.s.qp, 4, 4, NULL, 0, on_disconnect,
                                                  &sv, on_accept_done, &sv),
                     STATUS_PENDING);
        struct sndk_mpa_rx m;
        read_reply(fd, &m);
        CHECK(!sndk_mpa_rx_frame(&m)->reject);
        uint8_t b[64];
        struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .last = true, .stag = 1, .to = 0};
        size_t bn = dp_build_fpdu(b, &h, NULL, 0, true);
        dp_write_all(fd, b, bn);
        CHECK(harness_event_wait(&sv.accepted, 1, DP_TIMEOUT_MS));
        CHECK_EQ_U64(atomic_load(&sv.accept_status), STATUS_SUCCESS);
        close(fd);
        server_close(&sv);
    }
    /* 509 bytes after the word: PD_Length 513, over the RFC: reset, no connect event */
    struct rtr_server sv;
    server_open(&sv);
    int fd = raw_connect(listen_any(&sv));
    uint8_t req[24 + 509];
    size_t len = big_request(req, 509);
    dp_write_all(fd, req, len);
    CHECK(dp_wait_closed(fd, DP_TIMEOUT_MS));
    CHECK(!harness_event_wait(&sv.incoming, 1, 100));
    close(fd);
    server_close(&sv);
}

/* ---- The first FPDU the Initiator receives after the Reply: softndk connects to a raw
 * Responder, sends its RTR, and its QP answers the Responder's bad first FPDU with the same
 * Terminates (the QP's parser reads it; docs/wire.md, "The first FPDU after the MPA Reply"). */

struct active_case {
    const char *name;
    int kind; /* 0 bad CRC, 1 zero CRC, 2 second MPA Reply, 3 Send on QN 1, 4 Send, no buffer */
    uint32_t ctrl;
    size_t hdr_len;
};

static void on_req(void *ctx, NTSTATUS st)
{
    struct rtr_server *sv = ctx;
    atomic_store(&sv->accept_status, st);
    harness_event_signal(&sv->accepted);
}

TEST(initiator_first_fpdu_faults_get_their_terminate)
{
    static const struct active_case cases[] = {
        {"bad_crc", 0, 0x20020000u, 0},
        {"zero_crc", 1, 0x20020000u, 0},
        {"second_mpa_reply", 2, 0x20040000u, 0},
        {"send_on_qn_1", 3, 0x1201C000u, 18},
        {"send_without_receive", 4, 0x1202C000u, 18},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct active_case *c = &cases[i];
        struct rtr_server cl; /* the softndk side, here the Initiator */
        server_open(&cl);
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(bind(lfd, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(lfd, 1) == 0);
        socklen_t sl = sizeof sin;
        CHECK(getsockname(lfd, (struct sockaddr *)&sin, &sl) == 0);
        CHECK_EQ_U64(cl.a->Dispatch->NdkCreateConnector(cl.a, NULL, NULL, &cl.conn),
                     STATUS_SUCCESS);
        struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK_EQ_U64(cl.conn->Dispatch->NdkConnect(cl.conn, cl.s.qp, (struct sockaddr *)&src,
                                                   sizeof src, (struct sockaddr *)&sin, sizeof sin,
                                                   4, 4, NULL, 0, on_req, &cl),
                     STATUS_PENDING);
        int fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0);
        /* the Request, then a Reply that picks the Write RTR */
        struct sndk_mpa_rx m;
        sndk_mpa_rx_init(&m, false, 0);
        while (m.state != SNDK_MPA_RX_DONE && m.state != SNDK_MPA_RX_ERROR) {
            struct iovec iov;
            CHECK(sndk_mpa_rx_want(&m, &iov) > 0);
            CHECK(dp_read_exact(fd, iov.iov_base, iov.iov_len, DP_TIMEOUT_MS));
            sndk_mpa_rx_advance(&m, iov.iov_len);
        }
        CHECK(m.state == SNDK_MPA_RX_DONE);
        struct sndk_mpa_params rep = {.rev = 2,
                                      .crc = true,
                                      .enhanced = true,
                                      .ird = 4,
                                      .ord = 4,
                                      .p2p = true,
                                      .rtr = SNDK_MPA_RTR_WRITE};
        uint8_t b[SNDK_MPA_FRAME_MAX + 64];
        int n = sndk_mpa_build(b, sizeof b, true, &rep);
        CHECK(n > 0);
        dp_write_all(fd, b, (size_t)n);
        CHECK(harness_event_wait(&cl.accepted, 1, DP_TIMEOUT_MS));
        CHECK_EQ_U64(atomic_load(&cl.accept_status), STATUS_SUCCESS);
        NTSTATUS st =
            cl.conn->Dispatch->NdkCompleteConnect(cl.conn, on_disconnect, &cl, on_req, &cl);
        CHECK(st == STATUS_PENDING || st == STATUS_SUCCESS);
        if (st == STATUS_PENDING)
            CHECK(harness_event_wait(&cl.accepted, 2, DP_TIMEOUT_MS));
        uint8_t rtr[20];
        CHECK(dp_read_exact(fd, rtr, sizeof rtr, DP_TIMEOUT_MS)); /* the zero-length Write */
        CHECK_EQ_U64(rtr[3] & 0x0f, SNDK_OP_WRITE);
        if (c->kind != 4) /* a receive is posted: only the fault under test remains */
            dp_post_recv(&cl.s, (void *)0x71, 0, 64);
        /* the bad first FPDU */
        struct sndk_seg_hdr h = {.opcode = SNDK_OP_SEND, .last = true, .qn = 0, .msn = 1};
        size_t bn = 0;
        if (c->kind == 2) {
            n = sndk_mpa_build(b, sizeof b, true, &rep);
            bn = (size_t)n;
        } else {
            if (c->kind == 3)
                h.qn = 1;
            bn = dp_build_fpdu(b, &h, "first", 5, true);
            if (c->kind == 0)
                b[bn - 2] ^= 0x40;
            if (c->kind == 1)
                memset(b + bn - 4, 0, 4);
        }
        dp_write_all(fd, b, bn);
        uint8_t want[128], got[128];
        size_t wn =
            first_term_bytes(want, c->ctrl, b + 2, c->hdr_len, (uint16_t)sndk_get_be16(b), NULL);
        CHECK_MSG(dp_read_exact(fd, got, wn, DP_TIMEOUT_MS), "%s: no Terminate", c->name);
        CHECK_MSG(memcmp(got, want, wn) == 0, "%s: Terminate %08x, want %08x", c->name,
                  sndk_get_be32(got + 20), c->ctrl);
        CHECK_MSG(dp_wait_closed(fd, DP_TIMEOUT_MS), "%s: not closed", c->name);
        close(fd);
        close(lfd);
        server_close(&cl);
    }
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
