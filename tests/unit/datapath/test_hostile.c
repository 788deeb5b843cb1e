/* A hostile peer: hand-built FPDUs written into the raw socket of the other end. Each fault
 * must be answered with the exact Terminate of [IW-TERM], then the connection is
 * aborted and every request completes. */
#include <string.h>
#include <unistd.h>

#include "datapath.h"
#include "iwarp/crc32c.h"

#define QPCTX ((void *)0x3003)

struct host {
    NDK_ADAPTER *a;
    struct dp_side s;
    int raw;
};

static void host_open(struct host *h, bool crc)
{
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = crc;
    h->a = dp_open_adapter();
    dp_side_init(&h->s, h->a, &o);
    dp_side_create_qp(&h->s, &o, QPCTX);
    int fa, fb;
    dp_tcp_pair(&fa, &fb);
    dp_attach(&h->s, fa, crc);
    h->raw = fb;
}

static void host_close(struct host *h)
{
    dp_side_close(&h->s);
    SoftNdkCloseAdapter(h->a);
    close(h->raw);
}

static size_t send_fpdu(uint8_t *out, uint32_t msn, uint32_t mo, bool last, const void *pay,
                        size_t len)
{
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_SEND, .last = last, .qn = 0, .msn = msn, .mo = mo};
    return dp_build_fpdu(out, &h, pay, len, true);
}

/* The Terminate we must get: written out byte by byte (CRC computed). */
static size_t term_bytes(uint8_t *out, uint32_t ctrl, const uint8_t *ddp_hdr, size_t hdr_len,
                         uint16_t seg_len)
{
    uint32_t ulpdu = 18 + 4 + (hdr_len ? 2 + (uint32_t)hdr_len : 0);
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
    while (n % 4)
        out[n++] = 0;
    sndk_put_le32(out + n, sndk_crc32c(0, out, n));
    return n + 4;
}

static void expect_terminate(struct host *h, uint32_t ctrl, const uint8_t *ddp_hdr,
                             size_t hdr_len, uint16_t seg_len)
{
    uint8_t want[128], got[128];
    size_t n = term_bytes(want, ctrl, ddp_hdr, hdr_len, seg_len);
    CHECK_MSG(dp_read_exact(h->raw, got, n, DP_TIMEOUT_MS), "no Terminate (%zu bytes)", n);
    CHECK_MEM(got, want, n);
    CHECK(dp_wait_closed(h->raw, DP_TIMEOUT_MS)); /* then the connection is gone */
    CHECK(harness_event_wait(&h->s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(h->s.link.abort_status, STATUS_CONNECTION_ABORTED);
    CHECK_EQ_U64(h->s.link.abort_reason, 0x01000000u | (ctrl >> 28) << 16 |
                                             ((ctrl >> 24) & 0xf) << 8 | ((ctrl >> 16) & 0xff));
}

TEST(hostile_bad_crc)
{
    struct host h;
    host_open(&h, true);
    dp_post_recv(&h.s, (void *)1, 0, 64);
    dp_post_recv(&h.s, (void *)2, 64, 64);
    uint8_t f[128];
    size_t n = send_fpdu(f, 1, 0, true, "hello", 5);
    f[n - 1] ^= 0x55;
    dp_write_all(h.raw, f, n);
    expect_terminate(&h, 0x20020000u, NULL, 0, 0); /* LLP / MPA / CRC, no header */
    NDK_RESULT_EX r[2];
    dp_expect(h.s.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_CANCELLED, 0, QPCTX, (void *)1, NdkOperationTypeReceive);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, QPCTX, (void *)2, NdkOperationTypeReceive);
    host_close(&h);
}

TEST(hostile_crc_off_ignores_the_crc_field)
{
    struct host h;
    host_open(&h, false);
    dp_post_recv(&h.s, (void *)1, 0, 64);
    uint8_t f[128];
    size_t n = send_fpdu(f, 1, 0, true, "hello", 5);
    f[n - 1] ^= 0x55;
    dp_write_all(h.raw, f, n);
    NDK_RESULT_EX r;
    dp_expect(h.s.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 5, QPCTX, (void *)1, NdkOperationTypeReceive);
    CHECK_MEM(h.s.buf, "hello", 5);
    host_close(&h);
}

TEST(hostile_send_without_receive)
{
    struct host h;
    host_open(&h, true);
    uint8_t f[128];
    send_fpdu(f, 1, 0, true, "hello", 5);
    size_t n = send_fpdu(f, 1, 0, true, "hello", 5);
    dp_write_all(h.raw, f, n);
    expect_terminate(&h, 0x1202C000u, f + 2, 18, 23); /* DDP / untagged / no buffer, M D */
    host_close(&h);
}

TEST(hostile_send_longer_than_the_receive)
{
    struct host h;
    host_open(&h, true);
    dp_post_recv(&h.s, (void *)1, 0, 8);
    uint8_t f[128];
    size_t n = send_fpdu(f, 1, 0, true, "0123456789abcdef", 16);
    dp_write_all(h.raw, f, n);
    expect_terminate(&h, 0x1205C000u, f + 2, 18, 34); /* DDP / untagged / too long */
    NDK_RESULT_EX r;
    dp_expect(h.s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_BUFFER_OVERFLOW, 0, QPCTX, (void *)1, NdkOperationTypeReceive);
    host_close(&h);
}

TEST(hostile_wrong_msn)
{
    struct host h;
    host_open(&h, true);
    dp_post_recv(&h.s, (void *)1, 0, 8);
    uint8_t f[128];
    size_t n = send_fpdu(f, 7, 0, true, "abcd", 4);
    dp_write_all(h.raw, f, n);
    expect_terminate(&h, 0x1203C000u, f + 2, 18, 22); /* DDP / untagged / MSN range */
    NDK_RESULT_EX r;
    dp_expect(h.s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_CANCELLED, 0, QPCTX, (void *)1, NdkOperationTypeReceive);
    host_close(&h);
}

TEST(hostile_reserved_opcode)
{
    struct host h;
    host_open(&h, true);
    uint8_t f[64] = {0};
    sndk_put_be16(f, 18);
    f[2] = 0x41;
    f[3] = 0x48; /* RV 1, opcode 8 */
    sndk_put_be32(f + 14, 1);
    size_t n = sndk_mpa_fpdu_len(18);
    sndk_put_le32(f + n - 4, sndk_crc32c(0, f, n - 4));
    dp_write_all(h.raw, f, n);
    expect_terminate(&h, 0x02060000u, NULL, 0, 0); /* RDMAP / remote op / unexpected opcode */
    host_close(&h);
}

TEST(hostile_invalidate_of_an_unknown_token)
{
    struct host h;
    host_open(&h, true);
    dp_post_recv(&h.s, (void *)1, 0, 8);
    uint8_t f[128];
    struct sndk_seg_hdr sh = {.opcode = SNDK_OP_SEND_INV, .last = true, .stag = 0x00abcd01,
                              .qn = 0, .msn = 1};
    size_t n = dp_build_fpdu(f, &sh, "xy", 2, true);
    dp_write_all(h.raw, f, n);
    expect_terminate(&h, 0x0209C000u, f + 2, 18, 20); /* RDMAP / remote op / can't invalidate */
    NDK_RESULT_EX r;
    dp_expect(h.s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_ACCESS_VIOLATION, 0, QPCTX, (void *)1, NdkOperationTypeReceive);
    host_close(&h);
}

TEST(hostile_terminate_from_the_peer_aborts)
{
    struct host h;
    host_open(&h, true);
    dp_post_recv(&h.s, (void *)1, 0, 8);
    dp_post_send(&h.s, (void *)2, 0, 8, 0);
    uint8_t sent[64];
    CHECK(dp_read_exact(h.raw, sent, sndk_mpa_fpdu_len(26), DP_TIMEOUT_MS));
    struct sndk_term t = {.layer = 1, .etype = 2, .code = 5,
                          .hdrct = SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D, .ddp_seg_len = 26,
                          .ddp_hdr_len = 18};
    memcpy(t.ddp_hdr, sent + 2, 18);
    struct sndk_fpdu tf;
    struct iovec iov[3];
    int k = sndk_fpdu_terminate(&tf, 1, &t, true, iov, 3);
    CHECK(k > 0);
    for (int i = 0; i < k; i++)
        dp_write_all(h.raw, iov[i].iov_base, iov[i].iov_len);
    CHECK(harness_event_wait(&h.s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(h.s.link.abort_status, STATUS_CONNECTION_ABORTED);
    CHECK_EQ_U64(h.s.link.abort_reason, 0x02010205u);
    CHECK(dp_wait_closed(h.raw, DP_TIMEOUT_MS)); /* closed, and no Terminate answers one */
    NDK_RESULT_EX r[2];
    dp_expect(h.s.cq, r, 2, 20);
    /* the Send had left in full: it completed before the peer's verdict */
    dp_check_result(&r[0], STATUS_SUCCESS, 8, QPCTX, (void *)2, NdkOperationTypeSend);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, QPCTX, (void *)1, NdkOperationTypeReceive);
    host_close(&h);
}

TEST(hostile_peer_vanishes_mid_message)
{
    struct host h;
    host_open(&h, true);
    dp_post_recv(&h.s, (void *)1, 0, 64);
    dp_post_recv(&h.s, (void *)2, 64, 64);
    uint8_t f[128], pay[40];
    memset(pay, 7, sizeof pay);
    size_t n = send_fpdu(f, 1, 0, true, pay, sizeof pay);
    dp_write_all(h.raw, f, n - 20);
    close(h.raw);
    h.raw = -1;
    CHECK(harness_event_wait(&h.s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(h.s.link.abort_status, STATUS_CONNECTION_RESET);
    NDK_RESULT_EX r[2];
    dp_expect(h.s.cq, r, 2, 20);
    dp_check_result(&r[0], STATUS_CANCELLED, 0, QPCTX, (void *)1, NdkOperationTypeReceive);
    dp_check_result(&r[1], STATUS_CANCELLED, 0, QPCTX, (void *)2, NdkOperationTypeReceive);
    CHECK_EQ_U64(harness_event_count(&h.s.link.aborted), 1);
    CHECK_EQ_U64(h.s.qp->Dispatch->NdkSend(h.s.qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    dp_side_close(&h.s);
    SoftNdkCloseAdapter(h.a);
}

/* Linux siw refuses a Read with a Terminate in its little-endian control-word layout, and puts
 * the read size where the included Read Request's MSN belongs. The Read is still named — by
 * the sink STag in the included Read Request — and completes STATUS_ACCESS_VIOLATION (RDMAP
 * remote protection, invalid STag), not STATUS_CANCELLED. */
TEST(hostile_siw_terminate_for_a_read_names_it_by_its_sink_stag)
{
    struct host h;
    host_open(&h, false);
    NDK_SGE g = dp_sge(&h.s, 0, 64);
    CHECK_EQ_U64(h.s.qp->Dispatch->NdkRead(h.s.qp, (void *)7, &g, 1, 0x10000, 0x4242, 0),
                 STATUS_SUCCESS);
    uint8_t rr[128];
    size_t rl = sndk_mpa_fpdu_len(SNDK_DDP_UNTAGGED_HDR_LEN + SNDK_RDMAP_READ_REQ_LEN);
    CHECK(dp_read_exact(h.raw, rr, rl, DP_TIMEOUT_MS));
    struct sndk_term t = {.layer = SNDK_TERM_LAYER_RDMAP,
                          .etype = 1,
                          .code = 0,
                          .hdrct = SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D | SNDK_TERM_HDRCT_R,
                          .ddp_seg_len = 28,
                          .ddp_hdr_len = SNDK_DDP_UNTAGGED_HDR_LEN,
                          .rdmap_hdr_present = true};
    memcpy(t.ddp_hdr, rr + 2, SNDK_DDP_UNTAGGED_HDR_LEN);
    sndk_put_be32(t.ddp_hdr + 10, 64); /* siw: the read size in the MSN field */
    memcpy(t.rdmap_hdr, rr + 2 + SNDK_DDP_UNTAGGED_HDR_LEN, SNDK_RDMAP_READ_REQ_LEN);
    struct sndk_fpdu tf;
    struct iovec iov[3];
    int k = sndk_fpdu_terminate(&tf, 1, &t, false, iov, 3);
    CHECK(k > 0);
    uint8_t term[128];
    size_t tl = 0;
    for (int i = 0; i < k; i++) {
        memcpy(term + tl, iov[i].iov_base, iov[i].iov_len);
        tl += iov[i].iov_len;
    }
    /* siw's layout: Layer/EType nibbles swapped, M/D/R in bits 0..2 of the third byte */
    uint8_t *body = term + 2 + SNDK_DDP_UNTAGGED_HDR_LEN;
    CHECK_EQ_U64(body[0], 0x01);
    CHECK_EQ_U64(body[2], 0xE0);
    body[0] = 0x10;
    body[2] = 0x07;
    dp_write_all(h.raw, term, tl);
    CHECK(harness_event_wait(&h.s.link.aborted, 1, DP_TIMEOUT_MS));
    CHECK_EQ_U64(h.s.link.abort_reason, 0x02000100u); /* received: RDMAP / 1 / 0x00 */
    NDK_RESULT_EX r;
    dp_expect(h.s.cq, &r, 1, 20);
    dp_check_result(&r, STATUS_ACCESS_VIOLATION, 0, QPCTX, (void *)7, NdkOperationTypeRead);
    host_close(&h);
}
