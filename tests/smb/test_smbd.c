/* SMB Direct ([MS-SMBD]) Initiator against a scripted fake server on loopback: the fake
 * server is plain NDK (a listener, a QP, Sends it writes byte by byte), so each test decides
 * exactly what the peer says. Good peers: negotiation, fragmentation both ways, credits, the
 * peer's RDMA Write and Read of registered buffers with remote and local invalidation. Hostile
 * peers: every check of [MS-SMBD] 3.1.5.7 and 3.1.5.8 fails the connection with a named error
 * and a clean disconnect, never a crash or a hang. */
#include <smb/smbd.h>

#include "conn.h"
#include "fixture.h"
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../smb/transport/smbd_wire.h"

/* The fake server's buffer: receive slots, then send slots, then an RDMA area. */
#define SLOT      2048u
#define NRECV     64u
#define SEND_AREA (NRECV * SLOT)
#define NSEND     64u
#define RDMA_AREA (SEND_AREA + NSEND * SLOT)
#define RDMA_LEN  (1u << 20)
#define SV_BUF    (RDMA_AREA + RDMA_LEN)

enum script {
    S_ECHO,           /* negotiate, then echo every message back, fragmented */
    S_RDMA,           /* "W"/"R" requests: RDMA Write or Read of the client's descriptors */
    S_SILENT,         /* never answers the negotiate request */
    S_BAD_NEGOTIATE,  /* answers with bad_negotiate[] */
    S_BAD_DATA,       /* negotiates, then sends bad_data[] as one message */
    S_NO_CREDIT,      /* negotiates, then sends before the client granted a credit */
    S_BAD_INVALIDATE, /* a Send with Invalidate of a token the client never offered */
    S_HANGUP,         /* negotiates, then disconnects */
};

struct fake {
    enum script script;
    NDK_ADAPTER *as, *ac;
    struct fx_server srv;
    struct fx_side sv;
    pthread_t th;
    uint8_t bad[64];
    size_t bad_len;
    unsigned send_credits;   /* granted by the client */
    unsigned client_credits; /* granted to the client, not yet used by it */
    unsigned next_send;
    unsigned recvs_posted;
    atomic_bool client_gone;
    uint8_t msg[1u << 20]; /* reassembly */
    size_t msg_len, msg_total;
};

static void sv_post_recv(struct fake *f, unsigned i)
{
    fx_post_recv(&f->sv, i, (size_t)i * SLOT, SLOT);
    f->recvs_posted++;
}

/* Polls the server's CQ until a receive completes (initiator completions must succeed). The
 * receive's slot index and length; false on a receive failure or after timeout_ms. */
static bool sv_next_recv(struct fake *f, unsigned *slot, size_t *len, unsigned timeout_ms)
{
    uint64_t end = fixture_now_us() + (uint64_t)timeout_ms * 1000u;
    while (fixture_now_us() < end) {
        NDK_RESULT_EX r;
        if (f->sv.cq->Dispatch->NdkGetCqResultsEx(f->sv.cq, &r, 1) == 0) {
            if (atomic_load(&f->client_gone)) {
                /* as a server does: answer the client's disconnect with ours */
                struct ndk_req rd;
                ndk_req_init(&rd);
                NTSTATUS st = f->sv.conn->Dispatch->NdkDisconnect(f->sv.conn, ndk_req_done, &rd);
                (void)ndk_req_wait(&rd, st);
                harness_event_destroy(&rd.ev);
                return false;
            }
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (r.Type == NdkOperationTypeReceive) {
            f->recvs_posted--;
            if (f->client_credits)
                f->client_credits--;
            if (r.Status != STATUS_SUCCESS)
                return false;
            *slot = (unsigned)(uintptr_t)r.RequestContext;
            *len = r.BytesTransferred;
            return true;
        }
        CHECK_MSG(r.Status == STATUS_SUCCESS, "fake server: initiator request %d completed %s",
                  (int)r.Type, SoftNdkStatusName(r.Status));
    }
    return false;
}

static void sv_send_raw(struct fake *f, const void *bytes, size_t len, UINT32 invalidate)
{
    size_t off = SEND_AREA + (size_t)(f->next_send++ % NSEND) * SLOT;
    CHECK(len <= SLOT);
    memcpy(f->sv.buf + off, bytes, len);
    NDK_SGE sge = fx_sge(&f->sv, off, len);
    NTSTATUS st = invalidate ? f->sv.qp->Dispatch->NdkSendAndInvalidate(f->sv.qp, (void *)1, &sge,
                                                                        1, 0, invalidate)
                             : f->sv.qp->Dispatch->NdkSend(f->sv.qp, (void *)1, &sge, 1, 0);
    CHECK_STATUS(st, STATUS_SUCCESS);
}

/* One data transfer message: header + data, granting the receives the server has posted. */
static void sv_send_data(struct fake *f, const uint8_t *data, uint32_t len, uint32_t remaining,
                         UINT32 invalidate)
{
    CHECK_MSG(f->send_credits > 0, "fake server: no credit from the client");
    f->send_credits--;
    uint8_t m[SLOT];
    unsigned grant = f->recvs_posted - f->client_credits; /* honest: receives really posted */
    f->client_credits += grant;
    struct smbd_data_header h = {.credits_requested = 255,
                                 .credits_granted = (uint16_t)grant,
                                 .remaining_data_length = remaining,
                                 .data_length = len};
    smbd_encode_data_header(&h, m);
    if (len)
        memcpy(m + SMBD_DATA_OFFSET, data, len);
    sv_send_raw(f, m, len ? SMBD_DATA_OFFSET + len : SMBD_DATA_HEADER_MIN, invalidate);
}

/* Sends msg (len bytes) fragmented to the client's 1364-byte receives; the last fragment may
 * carry a remote invalidation. */
static void sv_send_message(struct fake *f, const uint8_t *msg, size_t len, UINT32 invalidate)
{
    size_t per = 1364 - SMBD_DATA_OFFSET, off = 0;
    while (off < len) {
        size_t n = len - off < per ? len - off : per;
        while (f->send_credits == 0) { /* wait for a grant in a client message */
            unsigned slot;
            size_t rl;
            CHECK_MSG(sv_next_recv(f, &slot, &rl, FIXTURE_WAIT_MS), "fake server: no credit came");
            struct smbd_data_header h;
            const char *why;
            CHECK(smbd_decode_data_header(f->sv.buf + (size_t)slot * SLOT, rl, &h, &why) == 0);
            CHECK_EQ_U64(h.data_length, 0); /* only credit messages while we send */
            f->send_credits += h.credits_granted;
            sv_post_recv(f, slot);
        }
        bool last = off + n == len;
        sv_send_data(f, msg + off, (uint32_t)n, (uint32_t)(len - off - n), last ? invalidate : 0);
        off += n;
    }
}

/* Receives one whole upper-layer message into f->msg (false if the client went away). */
static bool sv_recv_message(struct fake *f)
{
    f->msg_len = f->msg_total = 0;
    for (;;) {
        unsigned slot;
        size_t rl;
        if (!sv_next_recv(f, &slot, &rl, 20000))
            return false;
        const uint8_t *b = f->sv.buf + (size_t)slot * SLOT;
        struct smbd_data_header h;
        const char *why;
        CHECK_MSG(smbd_decode_data_header(b, rl, &h, &why) == 0, "client sent: %s", why);
        CHECK(h.credits_requested > 0);
        f->send_credits += h.credits_granted;
        if (h.data_length) {
            if (f->msg_total == 0)
                f->msg_total = (size_t)h.data_length + h.remaining_data_length;
            CHECK(f->msg_len + h.data_length + h.remaining_data_length == f->msg_total);
            CHECK(f->msg_total <= sizeof f->msg);
            memcpy(f->msg + f->msg_len, b + h.data_offset, h.data_length);
            f->msg_len += h.data_length;
        }
        sv_post_recv(f, slot);
        if (h.flags & SMBD_FLAG_RESPONSE_REQUESTED) /* [MS-SMBD] 3.1.5.8: answer at once */
            sv_send_data(f, NULL, 0, 0, 0);
        if (h.data_length && h.remaining_data_length == 0)
            return true;
    }
}

static void sv_negotiate(struct fake *f, uint16_t grant)
{
    unsigned slot;
    size_t rl;
    CHECK_MSG(sv_next_recv(f, &slot, &rl, FIXTURE_WAIT_MS), "no negotiate request");
    struct smbd_negotiate_request rq;
    const char *why;
    CHECK_EQ_I64(smbd_decode_negotiate_request(f->sv.buf + (size_t)slot * SLOT, rl, &rq, &why), 0);
    CHECK_EQ_U64(rl, SMBD_NEGOTIATE_REQUEST_SIZE);
    CHECK_EQ_U64(rq.max_receive_size, 1364);
    sv_post_recv(f, slot);
    if (f->script == S_SILENT)
        return;
    if (f->script == S_BAD_NEGOTIATE) {
        sv_send_raw(f, f->bad, f->bad_len, 0);
        return;
    }
    struct smbd_negotiate_response r = {.min_version = 0x100,
                                        .max_version = 0x100,
                                        .negotiated_version = 0x100,
                                        .credits_requested = 255,
                                        .credits_granted = grant,
                                        .max_read_write_size = 1u << 20,
                                        .preferred_send_size = 1364,
                                        .max_receive_size = SLOT,
                                        .max_fragmented_size = 1u << 20};
    uint8_t b[SMBD_NEGOTIATE_RESPONSE_SIZE];
    smbd_encode_negotiate_response(&r, b);
    f->client_credits = grant;
    sv_send_raw(f, b, sizeof b, 0);
}

static void on_sv_disconnect(void *ctx, ULONG reason)
{
    struct fake *f = ctx;
    (void)reason;
    atomic_store(&f->client_gone, true);
}

static void *server_main(void *arg)
{
    struct fake *f = arg;
    CHECK_MSG(harness_event_wait(&f->srv.ev, 1, FIXTURE_WAIT_MS), "no connect event");
    f->sv.conn = f->srv.incoming[0];
    for (unsigned i = 0; i < NRECV; i++)
        sv_post_recv(f, i);
    struct ndk_req ra;
    ndk_req_init(&ra);
    CHECK_STATUS(ndk_req_wait(&ra, f->sv.conn->Dispatch->NdkAcceptEx(f->sv.conn, f->sv.qp, 16, 16,
                                                                     NULL, 0, on_sv_disconnect, f,
                                                                     ndk_req_done, &ra)),
                 STATUS_SUCCESS);
    harness_event_destroy(&ra.ev);
    sv_negotiate(f, 8);
    switch (f->script) {
    case S_ECHO:
        while (sv_recv_message(f))
            sv_send_message(f, f->msg, f->msg_len, 0);
        break;
    case S_RDMA:
        while (sv_recv_message(f)) {
            /* "W" or "R", then descriptors; answer "ok" (with invalidation of the first token
             * when the request says 'I') once the RDMA completed */
            CHECK(f->msg_len >= 2 + 16 && (f->msg_len - 2) % 16 == 0);
            uint8_t op = f->msg[0], inv = f->msg[1];
            size_t nd = (f->msg_len - 2) / 16, done = 0;
            UINT32 first_token = 0;
            for (size_t k = 0; k < nd; k++) {
                const uint8_t *d = f->msg + 2 + 16 * k;
                uint64_t off = 0;
                UINT32 tok = 0, len = 0;
                for (int b = 0; b < 8; b++)
                    off |= (uint64_t)d[b] << (8 * b);
                for (int b = 0; b < 4; b++) {
                    tok |= (UINT32)d[8 + b] << (8 * b);
                    len |= (UINT32)d[12 + b] << (8 * b);
                }
                if (k == 0)
                    first_token = tok;
                CHECK(done + len <= RDMA_LEN);
                NDK_SGE sge = fx_sge(&f->sv, RDMA_AREA + done, len);
                if (op == 'W') {
                    fx_fill(f->sv.buf + RDMA_AREA + done, len, (uint32_t)(77 + k));
                    CHECK_STATUS(
                        f->sv.qp->Dispatch->NdkWrite(f->sv.qp, (void *)2, &sge, 1, off, tok, 0),
                        STATUS_SUCCESS);
                } else {
                    CHECK_STATUS(
                        f->sv.qp->Dispatch->NdkRead(f->sv.qp, (void *)2, &sge, 1, off, tok, 0),
                        STATUS_SUCCESS);
                }
                done += len;
            }
            /* RDMA Reads must land before we look: poll for their completions */
            unsigned want = (unsigned)nd, got = 0;
            uint64_t end = fixture_now_us() + FIXTURE_WAIT_MS * 1000ull;
            while (got < want && fixture_now_us() < end) {
                NDK_RESULT_EX r;
                if (f->sv.cq->Dispatch->NdkGetCqResultsEx(f->sv.cq, &r, 1) == 0)
                    continue;
                CHECK_MSG(r.Status == STATUS_SUCCESS, "fake server RDMA: %s",
                          SoftNdkStatusName(r.Status));
                if ((uintptr_t)r.RequestContext == 2)
                    got++;
            }
            CHECK_EQ_U64(got, want);
            uint8_t reply[8] = {'o', 'k', 0};
            if (op == 'R') {
                uint8_t *expect = malloc(done);
                CHECK(expect);
                size_t at = 0;
                for (size_t k = 0; k < nd; k++) {
                    const uint8_t *d = f->msg + 2 + 16 * k;
                    UINT32 len = (UINT32)d[12] | (UINT32)d[13] << 8 | (UINT32)d[14] << 16 |
                                 (UINT32)d[15] << 24;
                    fx_fill(expect + at, len, (uint32_t)(500 + k));
                    at += len;
                }
                if (memcmp(expect, f->sv.buf + RDMA_AREA, done) != 0)
                    reply[0] = 'n', reply[1] = 'o';
                free(expect);
            }
            sv_send_message(f, reply, 2, inv == 'I' ? first_token : 0);
        }
        break;
    case S_BAD_DATA:
        CHECK(sv_recv_message(f)); /* the client's first message grants us credits */
        sv_send_raw(f, f->bad, f->bad_len, 0);
        (void)sv_recv_message(f); /* until the client disconnects */
        break;
    case S_NO_CREDIT: {
        uint8_t m[SMBD_DATA_OFFSET + 4];
        struct smbd_data_header h = {.credits_requested = 255, .data_length = 4};
        smbd_encode_data_header(&h, m);
        memcpy(m + SMBD_DATA_OFFSET, "oops", 4);
        sv_send_raw(f, m, sizeof m, 0);
        (void)sv_recv_message(f);
        break;
    }
    case S_BAD_INVALIDATE:
        CHECK(sv_recv_message(f));
        sv_send_message(f, (const uint8_t *)"ok", 2, 0x12345678u);
        (void)sv_recv_message(f);
        break;
    case S_HANGUP: {
        CHECK(sv_recv_message(f));
        struct ndk_req rd;
        ndk_req_init(&rd);
        NTSTATUS st = f->sv.conn->Dispatch->NdkDisconnect(f->sv.conn, ndk_req_done, &rd);
        (void)ndk_req_wait(&rd, st);
        harness_event_destroy(&rd.ev);
        break;
    }
    case S_SILENT:
    case S_BAD_NEGOTIATE:
        (void)sv_recv_message(f); /* until the client gives up */
        break;
    }
    return NULL;
}

static struct fake *fake_start(enum script s)
{
    struct fake *f = calloc(1, sizeof *f);
    CHECK(f);
    f->script = s;
    f->as = fx_open(NULL);
    f->ac = fx_open(NULL);
    fx_listen(&f->srv, f->as);
    fx_side_init(&f->sv, f->as, SV_BUF, NRECV, 2 * NSEND);
    return f;
}

static void fake_run(struct fake *f)
{
    CHECK(pthread_create(&f->th, NULL, server_main, f) == 0);
}

static int client_connect(struct fake *f, const smbd_params *p, smb_transport **t, char *err,
                          size_t errlen)
{
    struct sockaddr_in dst = ndk_loopback4(f->srv.port);
    return smbd_connect(f->ac, (struct sockaddr *)&dst, sizeof dst, p, t, err, errlen);
}

static void fake_stop(struct fake *f)
{
    pthread_join(f->th, NULL);
    fx_side_close(&f->sv);
    fx_server_close(&f->srv);
    SoftNdkCloseAdapter(f->as);
    SoftNdkCloseAdapter(f->ac);
    free(f);
}

static smb_transport *connect_ok(struct fake *f)
{
    smb_transport *t = NULL;
    char err[256] = "";
    int rc = client_connect(f, NULL, &t, err, sizeof err);
    CHECK_MSG(rc == 0, "smbd_connect: %d %s", rc, err);
    return t;
}

/* ---- good peers -------------------------------------------------------------------------- */

TEST(smbd_negotiate_and_echo_fragmented)
{
    struct fake *f = fake_start(S_ECHO);
    fake_run(f);
    smb_transport *t = connect_ok(f);
    smbd_negotiated n;
    smbd_get_negotiated(t, &n);
    CHECK_EQ_U64(n.max_send_size, 1364); /* min(ours 1364, the peer's MaxReceiveSize 2048) */
    CHECK_EQ_U64(n.max_receive_size, 1364);
    CHECK_EQ_U64(n.max_fragmented_send, 1u << 20);
    CHECK_EQ_U64(n.max_read_write_size, 1u << 20);
    CHECK_EQ_U64(t->ops->max_rdma(t), 1u << 20);
    /* sizes around one fragment (1340 bytes of data) and many fragments */
    static const size_t sizes[] = {1, 1339, 1340, 1341, 2680, 2681, 65536, 300001};
    uint8_t *out = malloc(300001), *in = malloc(300001);
    CHECK(out && in);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        fx_fill(out, sizes[k], (uint32_t)k);
        CHECK_EQ_I64(t->ops->send(t, out, sizes[k]), 0);
        size_t got = 0;
        memset(in, 0, sizes[k]);
        CHECK_EQ_I64(t->ops->recv(t, in, 300001, &got, 10000), 0);
        CHECK_EQ_U64(got, sizes[k]);
        CHECK_MEM(in, out, sizes[k]);
    }
    smb_transport_stats st;
    t->ops->get_stats(t, &st);
    CHECK_EQ_U64(st.messages_sent, 8);
    CHECK_EQ_U64(st.messages_received, 8);
    /* 1 + 1 + 1 + 2 + 2 + 3 + 49 + 224 fragments each way */
    CHECK(st.fragments_sent >= 283);
    CHECK(st.credits_granted_to_peer >= st.fragments_received);
    /* a message larger than the peer's MaxFragmentedSize is refused before anything is sent */
    CHECK_EQ_I64(t->ops->send(t, out, (1u << 20) + 1), -EMSGSIZE);
    /* too small a buffer: the message is consumed and named */
    CHECK_EQ_I64(t->ops->send(t, out, 5000), 0);
    size_t got = 0;
    CHECK_EQ_I64(t->ops->recv(t, in, 100, &got, 10000), -EMSGSIZE);
    CHECK(strstr(smb_transport_error(t), "5000 bytes") != NULL);
    /* nothing more comes: the caller's deadline passes, and the reason says so */
    CHECK_EQ_I64(t->ops->recv(t, in, 100, &got, 50), -ETIMEDOUT);
    CHECK(strstr(smb_transport_error(t), "no message within 50 ms") != NULL);
    t->ops->destroy(t);
    free(out);
    free(in);
    fake_stop(f);
}

static void rdma_round(smb_transport *t, size_t len, enum smb_rdma_access acc, bool inv,
                       enum smb_rdma_release expect)
{
    uint8_t *buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096 + 4096);
    CHECK(buf);
    uint8_t *p = buf + 100; /* not page aligned: the first page is partial */
    smb_buffer_desc d[16];
    unsigned nd = 0;
    smb_rdma_region *r = NULL;
    memset(p, 0, len);
    if (acc == SMB_RDMA_PEER_READS) {
        /* filled per descriptor as the server expects; one piece here */
        fx_fill(p, len, 500);
    }
    CHECK_EQ_I64(t->ops->register_buffer(t, p, len, acc, &r, d, 16, &nd), 0);
    CHECK_EQ_U64(nd, 1);
    CHECK_EQ_U64(d[0].offset, (uintptr_t)p);
    CHECK_EQ_U64(d[0].length, len);
    uint8_t req[2 + 16];
    req[0] = acc == SMB_RDMA_PEER_WRITES ? 'W' : 'R';
    req[1] = inv ? 'I' : '-';
    for (int b = 0; b < 8; b++)
        req[2 + b] = (uint8_t)(d[0].offset >> (8 * b));
    for (int b = 0; b < 4; b++) {
        req[10 + b] = (uint8_t)(d[0].token >> (8 * b));
        req[14 + b] = (uint8_t)(d[0].length >> (8 * b));
    }
    CHECK_EQ_I64(t->ops->send(t, req, sizeof req), 0);
    uint8_t reply[16];
    size_t got = 0;
    CHECK_EQ_I64(t->ops->recv(t, reply, sizeof reply, &got, 10000), 0);
    CHECK_EQ_U64(got, 2);
    CHECK_MSG(reply[0] == 'o' && reply[1] == 'k', "server read other bytes than we registered");
    enum smb_rdma_release how = 0;
    CHECK_EQ_I64(t->ops->release_buffer(t, r, &how), 0);
    CHECK_EQ_I64(how, expect);
    if (acc == SMB_RDMA_PEER_WRITES) {
        uint8_t *want = malloc(len);
        CHECK(want);
        fx_fill(want, len, 77);
        CHECK_MEM(p, want, len);
        free(want);
    }
    free(buf);
}

TEST_T(smbd_peer_rdma_write_and_read_with_invalidation, 60)
{
    struct fake *f = fake_start(S_RDMA);
    fake_run(f);
    smb_transport *t = connect_ok(f);
    rdma_round(t, 4096, SMB_RDMA_PEER_WRITES, true, SMB_RDMA_RELEASED_BY_PEER);
    rdma_round(t, 65536 + 7, SMB_RDMA_PEER_WRITES, false, SMB_RDMA_RELEASED_LOCALLY);
    rdma_round(t, 300000, SMB_RDMA_PEER_READS, true, SMB_RDMA_RELEASED_BY_PEER);
    rdma_round(t, 1u << 20, SMB_RDMA_PEER_READS, false, SMB_RDMA_RELEASED_LOCALLY);
    /* the MR pool is reused: many rounds, no growth past one MR in flight */
    for (int i = 0; i < 40; i++)
        rdma_round(t, 8192, SMB_RDMA_PEER_WRITES, i % 2,
                   i % 2 ? SMB_RDMA_RELEASED_BY_PEER : SMB_RDMA_RELEASED_LOCALLY);
    smb_transport_stats st;
    t->ops->get_stats(t, &st);
    CHECK_EQ_U64(st.regions_registered, 44);
    CHECK_EQ_U64(st.remote_invalidations, 22);
    CHECK_EQ_U64(st.local_invalidations, 22);
    /* softndk's own counters of what the peer did to our memory agree */
    SOFTNDK_COUNTERS ctr;
    fx_counters(f->ac, &ctr);
    CHECK_EQ_U64(ctr.InboundWrites, 42);      /* 2 + 40 rounds with 'W' */
    CHECK_EQ_U64(ctr.InboundReadRequests, 2); /* the 'R' rounds, one descriptor each */
    CHECK_EQ_U64(ctr.RemoteInvalidations, 22);
    /* a region larger than the negotiated MaxReadWriteSize is refused */
    static uint8_t big[8];
    smb_rdma_region *r;
    smb_buffer_desc d[4];
    unsigned nd;
    CHECK_EQ_I64(
        t->ops->register_buffer(t, big, (1u << 20) + 1, SMB_RDMA_PEER_WRITES, &r, d, 4, &nd),
        -EINVAL);
    t->ops->destroy(t);
    fake_stop(f);
}

/* ---- hostile peers ----------------------------------------------------------------------- */

static void expect_connect_fails(enum script s, const uint8_t *bad, size_t bad_len,
                                 const smbd_params *p, int want, const char *words)
{
    struct fake *f = fake_start(s);
    memcpy(f->bad, bad, bad_len);
    f->bad_len = bad_len;
    fake_run(f);
    smb_transport *t = NULL;
    char err[256] = "";
    int rc = client_connect(f, p, &t, err, sizeof err);
    CHECK_EQ_I64(rc, want);
    CHECK(t == NULL);
    CHECK_MSG(strstr(err, words) != NULL, "error \"%s\" does not say \"%s\"", err, words);
    fx_note("refused as expected: %s\n", err);
    fake_stop(f);
}

static void good_response(uint8_t *b, struct smbd_negotiate_response *r)
{
    *r = (struct smbd_negotiate_response){.min_version = 0x100,
                                          .max_version = 0x100,
                                          .negotiated_version = 0x100,
                                          .credits_requested = 255,
                                          .credits_granted = 8,
                                          .max_read_write_size = 1u << 20,
                                          .preferred_send_size = 1364,
                                          .max_receive_size = 1364,
                                          .max_fragmented_size = 1u << 20};
    smbd_encode_negotiate_response(r, b);
}

TEST_T(smbd_hostile_negotiate_responses, 120)
{
    uint8_t b[SMBD_NEGOTIATE_RESPONSE_SIZE];
    struct smbd_negotiate_response r;
    good_response(b, &r);
    expect_connect_fails(S_BAD_NEGOTIATE, b, 31, NULL, -EPROTO, "shorter than 32");
    r.credits_granted = 0;
    smbd_encode_negotiate_response(&r, b);
    expect_connect_fails(S_BAD_NEGOTIATE, b, sizeof b, NULL, -EPROTO, "granted 0 credits");
    good_response(b, &r);
    r.negotiated_version = 0x200;
    smbd_encode_negotiate_response(&r, b);
    expect_connect_fails(S_BAD_NEGOTIATE, b, sizeof b, NULL, -EPROTO, "version other than");
    good_response(b, &r);
    r.preferred_send_size = 1365;
    smbd_encode_negotiate_response(&r, b);
    expect_connect_fails(S_BAD_NEGOTIATE, b, sizeof b, NULL, -EPROTO, "PreferredSendSize");
    good_response(b, &r);
    r.max_fragmented_size = 131071;
    smbd_encode_negotiate_response(&r, b);
    expect_connect_fails(S_BAD_NEGOTIATE, b, sizeof b, NULL, -EPROTO, "MaxFragmentedSize");
    good_response(b, &r);
    r.status = SMBD_STATUS_NOT_SUPPORTED;
    smbd_encode_negotiate_response(&r, b);
    expect_connect_fails(S_BAD_NEGOTIATE, b, sizeof b, NULL, -EPROTO, "STATUS_NOT_SUPPORTED");
    smbd_params p = {.negotiate_timeout_ms = 500};
    expect_connect_fails(S_SILENT, b, 0, &p, -ETIMEDOUT, "no negotiate response");
}

static void expect_data_fails(const struct smbd_data_header *h, size_t len, const char *words)
{
    struct fake *f = fake_start(S_BAD_DATA);
    smbd_encode_data_header(h, f->bad);
    /* a header's own DataOffset, as the hostile peer wrote it */
    f->bad[12] = (uint8_t)h->data_offset;
    f->bad[13] = (uint8_t)(h->data_offset >> 8);
    f->bad_len = len;
    fake_run(f);
    smb_transport *t = connect_ok(f);
    uint8_t hello[4] = "hi!";
    CHECK_EQ_I64(t->ops->send(t, hello, 4), 0); /* grants the server its credits */
    uint8_t in[64];
    size_t got = 0;
    CHECK_EQ_I64(t->ops->recv(t, in, sizeof in, &got, 10000), -EPROTO);
    CHECK_MSG(strstr(smb_transport_error(t), words) != NULL, "error \"%s\" does not say \"%s\"",
              smb_transport_error(t), words);
    fx_note("failed as expected: %s\n", smb_transport_error(t));
    /* a failed connection refuses everything after, with the same error kept */
    CHECK_EQ_I64(t->ops->send(t, hello, 4), -EPIPE);
    t->ops->destroy(t);
    fake_stop(f);
}

TEST_T(smbd_hostile_data_messages, 120)
{
    struct smbd_data_header h = {.credits_requested = 0, .data_length = 4};
    expect_data_fails(&h, 28, "requests 0 credits");
    h = (struct smbd_data_header){.credits_requested = 1, .data_length = 4, .data_offset = 20};
    expect_data_fails(&h, 28, "8-aligned");
    h = (struct smbd_data_header){.credits_requested = 1, .data_length = 40, .data_offset = 24};
    expect_data_fails(&h, 28, "beyond the message");
    h = (struct smbd_data_header){.credits_requested = 1,
                                  .data_length = 4,
                                  .data_offset = 24,
                                  .remaining_data_length = 1u << 20};
    expect_data_fails(&h, 28, "exceeds our MaxFragmentedSize");
    h = (struct smbd_data_header){.credits_requested = 1, .remaining_data_length = 5};
    expect_data_fails(&h, 20, "no data announces remaining");
    h = (struct smbd_data_header){.credits_requested = 1, .credits_granted = 0xFFFF};
    expect_data_fails(&h, 20, "beyond 65535");
    h = (struct smbd_data_header){.credits_requested = 1};
    expect_data_fails(&h, 19, "shorter than 20");
}

TEST(smbd_hostile_send_without_credit)
{
    struct fake *f = fake_start(S_NO_CREDIT);
    fake_run(f);
    /* the message may come with the negotiate response (connect fails) or just after it */
    smb_transport *t = NULL;
    char err[256] = "";
    int rc = client_connect(f, NULL, &t, err, sizeof err);
    if (rc == 0) {
        uint8_t in[64];
        size_t got = 0;
        rc = t->ops->recv(t, in, sizeof in, &got, 10000);
        snprintf(err, sizeof err, "%s", smb_transport_error(t));
        t->ops->destroy(t);
    }
    CHECK_EQ_I64(rc, -EPROTO);
    CHECK_MSG(strstr(err, "without a credit") != NULL, "error: %s", err);
    fake_stop(f);
}

TEST(smbd_hostile_invalidate_of_unknown_token)
{
    struct fake *f = fake_start(S_BAD_INVALIDATE);
    fake_run(f);
    smb_transport *t = connect_ok(f);
    CHECK_EQ_I64(t->ops->send(t, "hi", 2), 0);
    uint8_t in[64];
    size_t got = 0;
    int rc = t->ops->recv(t, in, sizeof in, &got, 10000);
    /* softndk refuses a Send with Invalidate of a token that is not a live fast-register
     * token of the QP's PD before it is delivered (a Terminate, the receive fails) */
    CHECK_EQ_I64(rc, -EIO);
    CHECK_MSG(strstr(smb_transport_error(t), "STATUS_ACCESS_VIOLATION") != NULL, "error: %s",
              smb_transport_error(t));
    fx_note("failed as expected: %s\n", smb_transport_error(t));
    t->ops->destroy(t);
    fake_stop(f);
}

TEST(smbd_peer_hangs_up)
{
    struct fake *f = fake_start(S_HANGUP);
    fake_run(f);
    smb_transport *t = connect_ok(f);
    CHECK_EQ_I64(t->ops->send(t, "bye", 3), 0);
    uint8_t in[64];
    size_t got = 0;
    CHECK_EQ_I64(t->ops->recv(t, in, sizeof in, &got, 10000), -ECONNRESET);
    CHECK(strstr(smb_transport_error(t), "disconnect") != NULL);
    t->ops->destroy(t);
    fake_stop(f);
}

TEST(smbd_no_listener)
{
    NDK_ADAPTER *a = fx_open(NULL);
    struct sockaddr_in dst = ndk_loopback4(1); /* nothing listens on port 1 of loopback */
    smb_transport *t = NULL;
    char err[256] = "";
    CHECK_EQ_I64(smbd_connect(a, (struct sockaddr *)&dst, sizeof dst, NULL, &t, err, sizeof err),
                 -ECONNREFUSED);
    CHECK(strstr(err, "STATUS_CONNECTION_REFUSED") != NULL);
    SoftNdkCloseAdapter(a);
}

/* ---- our own Responder ------------------------------------------------------------------- */

struct responder {
    smbd_listener *l;
    pthread_t th;
    int accept_rc;
    smb_transport_stats st;
};

/* Serves one connection: "E..." echoes, "W"/"R" + flag + descriptors moves data by RDMA (the
 * same requests as the fake server's), until the client disconnects. */
static void *responder_main(void *arg)
{
    struct responder *r = arg;
    smb_transport *t = NULL;
    char err[256] = "";
    r->accept_rc = smbd_accept(r->l, &t, 10000, err, sizeof err);
    if (r->accept_rc != 0) {
        fx_note("smbd_accept: %s\n", err);
        return NULL;
    }
    static uint8_t msg[1u << 20], data[1u << 20];
    size_t len;
    while (t->ops->recv(t, msg, sizeof msg, &len, 20000) == 0) {
        if (msg[0] == 'E') {
            CHECK_EQ_I64(t->ops->send(t, msg, len), 0);
            continue;
        }
        CHECK(len >= 2 + 16 && (len - 2) % 16 == 0);
        unsigned nd = (unsigned)((len - 2) / 16);
        smb_buffer_desc d[16];
        size_t total = 0;
        for (unsigned k = 0; k < nd; k++) {
            const uint8_t *p = msg + 2 + 16 * k;
            d[k].offset = 0;
            d[k].token = 0;
            d[k].length = 0;
            for (int b = 0; b < 8; b++)
                d[k].offset |= (uint64_t)p[b] << (8 * b);
            for (int b = 0; b < 4; b++) {
                d[k].token |= (uint32_t)p[8 + b] << (8 * b);
                d[k].length |= (uint32_t)p[12 + b] << (8 * b);
            }
            total += d[k].length;
        }
        uint8_t reply[2] = {'o', 'k'};
        if (msg[0] == 'W') {
            fx_fill(data, total, 77);
            CHECK_EQ_I64(t->ops->peer_write(t, d, nd, data, total), 0);
        } else {
            memset(data, 0, total);
            CHECK_EQ_I64(t->ops->peer_read(t, d, nd, data, total), 0);
            uint8_t *want = malloc(total);
            CHECK(want);
            fx_fill(want, total, 500);
            if (memcmp(want, data, total) != 0)
                reply[0] = 'n', reply[1] = 'o';
            free(want);
        }
        if (msg[1] == 'I')
            CHECK_EQ_I64(t->ops->send_invalidate(t, reply, 2, d[0].token), 0);
        else
            CHECK_EQ_I64(t->ops->send(t, reply, 2), 0);
    }
    t->ops->get_stats(t, &r->st);
    t->ops->destroy(t);
    return NULL;
}

TEST_T(smbd_initiator_against_our_responder, 60)
{
    NDK_ADAPTER *as = fx_open(NULL), *ac = fx_open(NULL);
    struct responder r = {0};
    struct sockaddr_in any = ndk_loopback4(0);
    char err[256] = "";
    CHECK_EQ_I64(smbd_listen(as, (struct sockaddr *)&any, sizeof any, NULL, &r.l, err, sizeof err),
                 0);
    CHECK(smbd_listener_port(r.l) != 0);
    CHECK(pthread_create(&r.th, NULL, responder_main, &r) == 0);
    struct sockaddr_in dst = ndk_loopback4(smbd_listener_port(r.l));
    smb_transport *t = NULL;
    CHECK_EQ_I64(smbd_connect(ac, (struct sockaddr *)&dst, sizeof dst, NULL, &t, err, sizeof err),
                 0);
    smbd_negotiated n;
    smbd_get_negotiated(t, &n);
    CHECK_EQ_U64(n.max_send_size, 1364);
    CHECK_EQ_U64(n.max_read_write_size, 8u << 20);
    CHECK_EQ_U64(n.max_fragmented_send, 1u << 20);
    /* echo: many fragments both ways, the credits flowing in both directions */
    static uint8_t out[500000], in[500000];
    for (unsigned k = 0; k < 6; k++) {
        size_t len = k == 0 ? 1 : k * 97531;
        fx_fill(out, len, k);
        out[0] = 'E';
        CHECK_EQ_I64(t->ops->send(t, out, len), 0);
        size_t got = 0;
        CHECK_EQ_I64(t->ops->recv(t, in, sizeof in, &got, 10000), 0);
        CHECK_EQ_U64(got, len);
        CHECK_MEM(in, out, len);
    }
    rdma_round(t, 4096, SMB_RDMA_PEER_WRITES, true, SMB_RDMA_RELEASED_BY_PEER);
    rdma_round(t, 1u << 20, SMB_RDMA_PEER_WRITES, false, SMB_RDMA_RELEASED_LOCALLY);
    rdma_round(t, 777777, SMB_RDMA_PEER_READS, true, SMB_RDMA_RELEASED_BY_PEER);
    rdma_round(t, 5000, SMB_RDMA_PEER_READS, false, SMB_RDMA_RELEASED_LOCALLY);
    t->ops->destroy(t);
    pthread_join(r.th, NULL);
    CHECK_EQ_I64(r.accept_rc, 0);
    CHECK_EQ_U64(r.st.rdma_writes, 2);
    CHECK_EQ_U64(r.st.rdma_reads, 2);
    CHECK_EQ_U64(r.st.send_invalidates, 2);
    CHECK_EQ_U64(r.st.messages_received, 10);
    SOFTNDK_COUNTERS c;
    fx_counters(ac, &c);
    CHECK_EQ_U64(c.InboundWrites, 2);
    CHECK_EQ_U64(c.InboundReadRequests, 2);
    CHECK_EQ_U64(c.RemoteInvalidations, 2);
    smbd_listener_close(r.l);
    SoftNdkCloseAdapter(as);
    SoftNdkCloseAdapter(ac);
}
