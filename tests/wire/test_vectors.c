/* Wire vectors: CRC32c (RFC 3720 B.4, both implementations), every [IW-VECTORS] frame built
 * byte-exactly by the encoders and parsed back, at every split point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "iwarp/crc32c.h"
#include "iwarp/fpdu.h"
#include "iwarp/mpa.h"
#include "iwarp/parser.h"
#include "wire_util.h"

/* ---------------------------------------------------------------- CRC32c */

struct crc_vec {
    uint8_t data[48];
    size_t len;
    const char *wire;
};

static void crc_vectors(struct crc_vec *v)
{
    memset(v, 0, 5 * sizeof *v);
    v[0].len = 32;
    v[0].wire = "aa36918a";
    memset(v[1].data, 0xff, 32);
    v[1].len = 32;
    v[1].wire = "43aba862";
    for (int i = 0; i < 32; i++) {
        v[2].data[i] = (uint8_t)i;
        v[3].data[i] = (uint8_t)(31 - i);
    }
    v[2].len = v[3].len = 32;
    v[2].wire = "4e79dd46";
    v[3].wire = "5cdb3f11";
    v[4].len = wu_unhex("01c00000 00000000 00000000 00000000 14000000 00000400"
                        "00000014 00000018 28000000 00000000 02000000 00000000",
                        v[4].data, sizeof v[4].data);
    v[4].wire = "563a96d9";
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_crc_impl(crc_fn fn)
{
    struct crc_vec v[5];
    crc_vectors(v);
    CHECK_EQ_U64(fn(0, "123456789", 9), 0xe3069283u);
    for (int i = 0; i < 5; i++) {
        uint8_t want[4], got[4];
        wu_unhex(v[i].wire, want, 4);
        sndk_put_le32(got, fn(0, v[i].data, v[i].len));
        CHECK_MEM(got, want, 4);
        /* chaining at every split gives the same value */
        for (size_t k = 0; k <= v[i].len; k++)
            CHECK_EQ_U64(fn(fn(0, v[i].data, k), v[i].data + k, v[i].len - k),
                         fn(0, v[i].data, v[i].len));
    }
    CHECK_EQ_U64(fn(0, NULL, 0), 0);
}

TEST(crc32c_rfc3720_sw)
{
    check_crc_impl(sndk_crc32c_sw);
}

TEST(crc32c_rfc3720_hw)
{
    if (!sndk_crc32c_hw_available())
        SKIP("CPU has no SSE4.2");
    check_crc_impl(sndk_crc32c_hw);
}

TEST(crc32c_dispatch_both_paths)
{
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_SW), 0);
    CHECK_EQ_U64(sndk_crc32c_current(), SNDK_CRC32C_SW);
    check_crc_impl(sndk_crc32c);
    if (sndk_crc32c_hw_available()) {
        CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_HW), 0);
        CHECK_EQ_U64(sndk_crc32c_current(), SNDK_CRC32C_HW);
        check_crc_impl(sndk_crc32c);
    } else {
        CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_HW), -ENOTSUP);
    }
    CHECK_EQ_I64(sndk_crc32c_select(SNDK_CRC32C_AUTO), 0);
}

TEST(crc32c_hw_equals_sw_random)
{
    if (!sndk_crc32c_hw_available())
        SKIP("CPU has no SSE4.2");
    size_t cap = 3 * 4096 * 3 + 100;
    uint8_t *buf = malloc(cap);
    CHECK(buf);
    srand(12345);
    for (size_t i = 0; i < cap; i++)
        buf[i] = (uint8_t)rand();
    /* lengths around both interleave block sizes, every alignment */
    static const size_t lens[] = {0, 1, 7, 8, 9, 63, 64, 255, 767, 768, 769, 1000, 2303,
                                  12287, 12288, 12289, 24576 + 768 + 13, 3 * 4096 * 3};
    for (size_t a = 0; a < 8; a++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            if (a + lens[i] > cap)
                continue;
            uint32_t s = sndk_crc32c_sw(0x1234u, buf + a, lens[i]);
            uint32_t h = sndk_crc32c_hw(0x1234u, buf + a, lens[i]);
            CHECK_MSG(s == h, "len %zu align %zu: sw %08x hw %08x", lens[i], a, s, h);
        }
    for (int r = 0; r < 2000; r++) {
        size_t a = (size_t)rand() % 64, l = (size_t)rand() % (cap - 64);
        CHECK_EQ_U64(sndk_crc32c_sw(0, buf + a, l), sndk_crc32c_hw(0, buf + a, l));
    }
    /* the iovec variant equals the flat CRC */
    struct iovec iov[3] = {{buf, 5}, {buf + 5, 0}, {buf + 5, 30000}};
    CHECK_EQ_U64(sndk_crc32c_iov(0, iov, 3), sndk_crc32c(0, buf, 30005));
    free(buf);
}

/* ---------------------------------------------------------------- encoders */

static const struct sndk_tx_cfg crc_on = {.crc = true};

/* Build a one-FPDU message and compare with the vector. */
static void check_single(struct sndk_tx_msg *m, const char *hex)
{
    uint8_t want[128], got[128];
    size_t wl = wu_unhex(hex, want, sizeof want);
    struct sndk_fpdu f;
    struct iovec iov[8];
    int n = sndk_tx_msg_next(m, &f, iov, 8);
    CHECK(n >= 2);
    size_t gl = wu_flatten(iov, n, got, sizeof got);
    CHECK_EQ_U64(gl, wl);
    CHECK_EQ_U64(f.wire_len, wl);
    CHECK_MEM(got, want, wl);
    CHECK_EQ_I64(sndk_tx_msg_next(m, &f, iov, 8), 0);
}

TEST(encode_part_c_sends)
{
    struct sndk_tx_msg m;
    struct iovec p;
    p = WU_IOV("hello");
    CHECK_EQ_I64(sndk_tx_send(&m, &crc_on, 1, SNDK_OP_SEND, 0, &p, 1), 0);
    check_single(&m, wu_fpdu_vectors[0].hex);
    p = WU_IOV("inv!");
    CHECK_EQ_I64(sndk_tx_send(&m, &crc_on, 2, SNDK_OP_SEND_INV, 0x11223344, &p, 1), 0);
    check_single(&m, wu_fpdu_vectors[1].hex);
    p = WU_IOV("se");
    CHECK_EQ_I64(sndk_tx_send(&m, &crc_on, 3, SNDK_OP_SEND_SE, 0xdeadbeef, &p, 1), 0);
    check_single(&m, wu_fpdu_vectors[2].hex); /* the STag is ignored without Invalidate */
    /* gathered from two SGEs */
    struct iovec two[2] = {WU_IOV("se"), WU_IOV("inv")};
    CHECK_EQ_I64(sndk_tx_send(&m, &crc_on, 4, SNDK_OP_SEND_SE_INV, 0x55667788, two, 2), 0);
    check_single(&m, wu_fpdu_vectors[3].hex);
    p = WU_IOV("no crc");
    struct sndk_tx_cfg off = {.crc = false};
    CHECK_EQ_I64(sndk_tx_send(&m, &off, 1, SNDK_OP_SEND, 0, &p, 1), 0);
    check_single(&m, WU_NOCRC_SEND);
    CHECK_EQ_I64(sndk_tx_send(&m, &crc_on, 1, SNDK_OP_WRITE, 0, &p, 1), -EINVAL);
}

TEST(encode_part_c_tagged)
{
    uint8_t data[48];
    for (int i = 0; i < 48; i++)
        data[i] = (uint8_t)i;
    /* a 48-byte Write cut at 32 bytes, as in the captured traffic */
    struct sndk_tx_cfg cfg = {.crc = true, .max_fpdu = 56};
    CHECK_EQ_U64(sndk_fpdu_max_payload(56, SNDK_DDP_TAGGED_HDR_LEN), 32);
    struct sndk_tx_msg m;
    struct iovec p = {data, 48};
    CHECK_EQ_I64(sndk_tx_write(&m, &cfg, 0xabcd0001, 0x1000, &p, 1), 0);
    uint8_t want[128], got[128];
    size_t wl = wu_unhex(wu_fpdu_vectors[4].hex, want, sizeof want);
    struct sndk_fpdu f;
    struct iovec iov[8];
    int n = sndk_tx_msg_next(&m, &f, iov, 8);
    CHECK_EQ_U64(wu_flatten(iov, n, got, sizeof got), wl);
    CHECK_MEM(got, want, wl);
    CHECK(iov[1].iov_base == data); /* payload not copied */
    n = sndk_tx_msg_next(&m, &f, iov, 8);
    CHECK(n == 3);
    CHECK_EQ_U64(f.ulpdu_len, 30);
    CHECK_EQ_U64(f.hdr[2], 0xc1); /* T L DV=1 */
    CHECK_EQ_U64(sndk_get_be64(f.hdr + 8), 0x1020);
    CHECK_EQ_I64(sndk_tx_msg_next(&m, &f, iov, 8), 0);

    memset(data, 'R', 20);
    p = (struct iovec){data, 20};
    CHECK_EQ_I64(sndk_tx_read_resp(&m, &crc_on, 0xaa01, 0x2000, &p, 1), 0);
    check_single(&m, wu_fpdu_vectors[6].hex);
    CHECK_EQ_I64(sndk_tx_write(&m, &crc_on, 1, 0, NULL, 0), 0); /* RTR */
    check_single(&m, wu_fpdu_vectors[7].hex);
    /* a TO that wraps is refused */
    CHECK_EQ_I64(sndk_tx_write(&m, &crc_on, 1, UINT64_MAX - 3, &p, 1), -EINVAL);
}

TEST(encode_part_c_read_req_terminate)
{
    uint8_t want[128], got[128];
    struct sndk_fpdu f;
    struct iovec iov[4];
    struct sndk_read_req rr = {.sink_stag = 0xaa01, .sink_to = 0x2000, .size = 20,
                               .src_stag = 0xbb02, .src_to = 0x3000};
    int n = sndk_fpdu_read_req(&f, 1, &rr, true, iov, 4);
    size_t wl = wu_unhex(wu_fpdu_vectors[5].hex, want, sizeof want);
    CHECK_EQ_U64(wu_flatten(iov, n, got, sizeof got), wl);
    CHECK_MEM(got, want, wl);

    struct sndk_term t = {.layer = SNDK_TERM_LAYER_DDP, .etype = SNDK_TERM_DDP_TAGGED,
                          .code = SNDK_TERM_DDP_T_INV_STAG,
                          .hdrct = SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D, .ddp_seg_len = 0,
                          .ddp_hdr_len = 14};
    wu_unhex("c140dead00010000000000000000", t.ddp_hdr, 14);
    n = sndk_fpdu_terminate(&f, 1, &t, true, iov, 4);
    wl = wu_unhex(wu_fpdu_vectors[8].hex, want, sizeof want);
    CHECK_EQ_U64(wu_flatten(iov, n, got, sizeof got), wl);
    CHECK_MEM(got, want, wl);

    struct sndk_term t2 = {.layer = SNDK_TERM_LAYER_RDMAP, .etype = SNDK_TERM_RDMAP_REMOTE_OP,
                           .code = SNDK_TERM_RDMAP_CANT_INV_STAG};
    n = sndk_fpdu_terminate(&f, 2, &t2, true, iov, 4);
    wl = wu_unhex(wu_fpdu_vectors[9].hex, want, sizeof want);
    CHECK_EQ_U64(wu_flatten(iov, n, got, sizeof got), wl);
    CHECK_MEM(got, want, wl);
    /* D without a header is refused */
    t2.hdrct = SNDK_TERM_HDRCT_D;
    CHECK_EQ_I64(sndk_fpdu_terminate(&f, 2, &t2, true, iov, 4), -EINVAL);
}

/* ---------------------------------------------------------------- MPA vectors */

TEST(mpa_build_part_c)
{
    uint8_t want[64], got[SNDK_MPA_FRAME_MAX];
    struct sndk_mpa_params p = {.rev = 1, .crc = true, .pdata = "ini-pdata", .pdata_len = 9};
    int n = sndk_mpa_build(got, sizeof got, false, &p);
    CHECK_EQ_I64(n, (int64_t)wu_unhex(wu_mpa_vectors[0].hex, want, sizeof want));
    CHECK_MEM(got, want, (size_t)n);

    /* Initiator policy: rev 2, CRC, IRD=ORD=8, P2P with the default Write+Read offer */
    struct sndk_mpa_policy pol = {.rev = 2, .crc = true, .ird = 8, .ord = 8, .p2p = true};
    struct sndk_mpa_params req;
    sndk_mpa_request_params(&pol, "ulp", 3, &req);
    n = sndk_mpa_build(got, sizeof got, false, &req);
    CHECK_EQ_I64(n, (int64_t)wu_unhex(wu_mpa_vectors[1].hex, want, sizeof want));
    CHECK_MEM(got, want, (size_t)n);

    /* Responder answering that Request with its own policy picks Write RTR */
    struct sndk_mpa_rx rx;
    sndk_mpa_rx_init(&rx, false, 0);
    size_t used;
    CHECK_EQ_I64(sndk_mpa_rx_feed(&rx, got, (size_t)n, &used), 1);
    struct sndk_mpa_policy rpol = {.rev = 2, .crc = true, .ird = 8, .ord = 8};
    struct sndk_mpa_params rep;
    struct sndk_mpa_result res;
    CHECK_EQ_I64(sndk_mpa_accept(sndk_mpa_rx_frame(&rx), &rpol, NULL, 0, &rep, &res), 0);
    CHECK_EQ_U64(res.rtr, SNDK_MPA_RTR_WRITE);
    CHECK_EQ_U64(res.peer_pd_len, 3);
    CHECK_MEM(res.peer_pd, "ulp", 3);
    n = sndk_mpa_build(got, sizeof got, true, &rep);
    CHECK_EQ_I64(n, (int64_t)wu_unhex(wu_mpa_vectors[2].hex, want, sizeof want));
    CHECK_MEM(got, want, (size_t)n);

    /* the reject vector: a markers Request, rejected with a reason */
    struct sndk_mpa_params mreq = {.rev = 1, .crc = true, .markers = true};
    n = sndk_mpa_build(got, sizeof got, false, &mreq);
    sndk_mpa_rx_init(&rx, false, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&rx, got, (size_t)n, &used), 1);
    CHECK_EQ_I64(sndk_mpa_accept(sndk_mpa_rx_frame(&rx), &rpol, NULL, 0, &rep, &res),
                 -SNDK_MPA_E_MARKERS);
    sndk_mpa_reject_params(sndk_mpa_rx_frame(&rx), "no markers here", 15, &rep);
    n = sndk_mpa_build(got, sizeof got, true, &rep);
    CHECK_EQ_I64(n, (int64_t)wu_unhex(wu_mpa_vectors[3].hex, want, sizeof want));
    CHECK_MEM(got, want, (size_t)n);
}

static void mpa_parse_expect(const struct sndk_mpa_frame *f, int idx)
{
    switch (idx) {
    case 0:
        CHECK(!f->reply && f->rev == 1 && f->crc && !f->markers && !f->has_word);
        CHECK_EQ_U64(f->ulp_pd_len, 9);
        CHECK_MEM(f->ulp_pd, "ini-pdata", 9);
        break;
    case 1:
        CHECK(!f->reply && f->rev == 2 && f->crc && f->enhanced && f->has_word && f->p2p);
        CHECK_EQ_U64(f->ird, 8);
        CHECK_EQ_U64(f->ord, 8);
        CHECK_EQ_U64(f->rtr, SNDK_MPA_RTR_WRITE | SNDK_MPA_RTR_READ);
        CHECK_EQ_U64(f->pd_len, 7);
        CHECK_EQ_U64(f->ulp_pd_len, 3);
        CHECK_MEM(f->ulp_pd, "ulp", 3);
        break;
    case 2:
        CHECK(f->reply && f->rev == 2 && f->has_word && f->p2p && !f->reject);
        CHECK_EQ_U64(f->rtr, SNDK_MPA_RTR_WRITE);
        CHECK_EQ_U64(f->ulp_pd_len, 0);
        break;
    case 3:
        CHECK(f->reply && f->rev == 1 && f->reject && f->crc);
        CHECK_EQ_U64(f->ulp_pd_len, 15);
        CHECK_MEM(f->ulp_pd, "no markers here", 15);
        break;
    }
}

TEST(mpa_parse_part_c_every_split)
{
    for (int v = 0; v < 4; v++) {
        uint8_t buf[64];
        size_t len = wu_unhex(wu_mpa_vectors[v].hex, buf, sizeof buf);
        bool reply = v >= 2;
        /* trailing bytes after the frame must be left alone */
        uint8_t stream[80];
        memcpy(stream, buf, len);
        memset(stream + len, 0xee, 8);
        for (size_t k = 0; k <= len; k++) {
            struct sndk_mpa_rx rx;
            sndk_mpa_rx_init(&rx, reply, 0);
            size_t u1 = 0, u2 = 0;
            int rc = sndk_mpa_rx_feed(&rx, stream, k, &u1);
            CHECK_EQ_I64(rc, k == len ? 1 : 0);
            CHECK_EQ_U64(u1, k);
            rc = sndk_mpa_rx_feed(&rx, stream + k, len + 8 - k, &u2);
            CHECK_EQ_I64(rc, 1);
            CHECK_EQ_U64(u1 + u2, len);
            mpa_parse_expect(sndk_mpa_rx_frame(&rx), v);
        }
        /* one byte at a time through want/advance */
        struct sndk_mpa_rx rx;
        sndk_mpa_rx_init(&rx, reply, 0);
        for (size_t i = 0; i < len; i++) {
            struct iovec iov;
            CHECK_EQ_I64(sndk_mpa_rx_want(&rx, &iov), 1);
            CHECK_EQ_U64(iov.iov_len, i < 20 ? 20 - i : len - i);
            memcpy(iov.iov_base, buf + i, 1);
            CHECK_EQ_I64(sndk_mpa_rx_advance(&rx, 1), i + 1 == len ? 1 : 0);
        }
        mpa_parse_expect(sndk_mpa_rx_frame(&rx), v);
    }
}

TEST(mpa_negotiation)
{
    struct sndk_mpa_rx rx;
    uint8_t buf[SNDK_MPA_FRAME_MAX];
    size_t used;
    struct sndk_mpa_params req, rep;
    struct sndk_mpa_result ires, rres;

    /* rev 2 both sides, CRC only on the Responder: on for both */
    struct sndk_mpa_policy ipol = {.rev = 2, .crc = false, .ird = 16, .ord = 16, .p2p = true,
                                   .rtr = SNDK_MPA_RTR_READ};
    struct sndk_mpa_policy rpol = {.rev = 2, .crc = true, .ird = 4, .ord = 2};
    sndk_mpa_request_params(&ipol, "abc", 3, &req);
    int n = sndk_mpa_build(buf, sizeof buf, false, &req);
    sndk_mpa_rx_init(&rx, false, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&rx, buf, (size_t)n, &used), 1);
    CHECK_EQ_I64(sndk_mpa_accept(sndk_mpa_rx_frame(&rx), &rpol, "xy", 2, &rep, &rres), 0);
    CHECK(rres.crc && rres.p2p && rres.rtr == SNDK_MPA_RTR_READ);
    CHECK_EQ_U64(rres.ord, 2);
    CHECK_EQ_U64(rres.peer_ird, 16);
    n = sndk_mpa_build(buf, sizeof buf, true, &rep);
    sndk_mpa_rx_init(&rx, true, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&rx, buf, (size_t)n, &used), 1);
    /* the peer's ORD (2) fits our IRD (16); our ORD 16 is lowered to its IRD 4 */
    CHECK_EQ_I64(sndk_mpa_check_reply(&req, sndk_mpa_rx_frame(&rx), &ires), 0);
    CHECK(ires.crc && ires.rev == 2 && ires.enhanced && ires.p2p);
    CHECK_EQ_U64(ires.rtr, SNDK_MPA_RTR_READ);
    CHECK_EQ_U64(ires.ord, 4);
    CHECK_EQ_U64(ires.peer_pd_len, 2);

    /* rev 2 Request, rev 1 Reply: RFC 6581 fallback */
    struct sndk_mpa_params rep1 = {.rev = 1, .crc = false};
    n = sndk_mpa_build(buf, sizeof buf, true, &rep1);
    sndk_mpa_rx_init(&rx, true, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&rx, buf, (size_t)n, &used), 1);
    CHECK_EQ_I64(sndk_mpa_check_reply(&req, sndk_mpa_rx_frame(&rx), &ires), 0);
    CHECK(ires.rev == 1 && !ires.enhanced && !ires.p2p && !ires.crc);

    /* rev 1 Request gets a rev 1 Reply */
    struct sndk_mpa_policy p1 = {.rev = 1, .crc = true};
    sndk_mpa_request_params(&p1, NULL, 0, &req);
    n = sndk_mpa_build(buf, sizeof buf, false, &req);
    sndk_mpa_rx_init(&rx, false, 0);
    CHECK_EQ_I64(sndk_mpa_rx_feed(&rx, buf, (size_t)n, &used), 1);
    CHECK_EQ_I64(sndk_mpa_accept(sndk_mpa_rx_frame(&rx), &rpol, NULL, 0, &rep, &rres), 0);
    CHECK(rep.rev == 1 && !rep.enhanced && rep.crc);

    /* private data limit: 252 ULP bytes with the word, 256 without */
    uint8_t big[300] = {0};
    struct sndk_mpa_params p = {.rev = 2, .enhanced = true, .pdata = big, .pdata_len = 252};
    CHECK_EQ_I64(sndk_mpa_build(buf, sizeof buf, false, &p), 256 + 20);
    p.pdata_len = 253;
    CHECK_EQ_I64(sndk_mpa_build(buf, sizeof buf, false, &p), -EMSGSIZE);
    p = (struct sndk_mpa_params){.rev = 1, .pdata = big, .pdata_len = 256};
    CHECK_EQ_I64(sndk_mpa_build(buf, sizeof buf, false, &p), 256 + 20);
    p.pdata_len = 257;
    CHECK_EQ_I64(sndk_mpa_build(buf, sizeof buf, false, &p), -EMSGSIZE);
}

/* ---------------------------------------------------------------- parser vectors */

static uint8_t rmem[16][64];
static uint8_t tmem[3][64];

static void setup_for(int v, struct sndk_rx *rx, struct wu_rec *r)
{
    wu_rec_init(r);
    memset(rmem, 0, sizeof rmem);
    memset(tmem, 0, sizeof tmem);
    for (int i = 0; i < 16; i++) {
        r->rbuf[i] = rmem[i];
        r->rlen[i] = sizeof rmem[i];
    }
    r->nrbuf = 16;
    r->reg[0] = (struct wu_region){0xabcd0001, 0x1000, tmem[0], 48};
    r->reg[1] = (struct wu_region){0xaa01, 0x2000, tmem[1], 20};
    r->nreg = 2;
    wu_rx_init(rx, r, v != 10);
    if (v >= 1 && v <= 3)
        rx->msn_expect[SNDK_QN_SEND] = (uint32_t)v + 1;
    if (v == 9)
        rx->msn_expect[SNDK_QN_TERMINATE] = 2;
}

static void expect_vector_events(int v, const struct wu_rec *r)
{
    const struct wu_ev *e = r->ev;
    switch (v) {
    case 0:
    case 1:
    case 2:
    case 3: {
        static const char *const pay[] = {"hello", "inv!", "se", "seinv"};
        static const uint8_t ops[] = {SNDK_OP_SEND, SNDK_OP_SEND_INV, SNDK_OP_SEND_SE,
                                      SNDK_OP_SEND_SE_INV};
        static const uint32_t inv[] = {0, 0x11223344, 0, 0x55667788};
        size_t pl = strlen(pay[v]);
        CHECK_EQ_I64(r->nev, 2);
        CHECK(e[0].type == WU_EV_SEG && e[1].type == WU_EV_MSG);
        CHECK_EQ_U64(e[0].seg.opcode, ops[v]);
        CHECK(!e[0].seg.tagged && e[0].seg.last);
        CHECK_EQ_U64(e[0].seg.qn, 0);
        CHECK_EQ_U64(e[0].seg.msn, (uint64_t)v + 1);
        CHECK_EQ_U64(e[0].seg.mo, 0);
        CHECK_EQ_U64(e[0].seg.len, pl);
        CHECK_EQ_U64(e[0].seg.inval_stag, inv[v]);
        CHECK_EQ_U64(e[1].msg_len, pl);
        CHECK_MEM(rmem[v], pay[v], pl);
        break;
    }
    case 4:
        CHECK_EQ_I64(r->nev, 1);
        CHECK(e[0].type == WU_EV_SEG && e[0].seg.tagged && !e[0].seg.last);
        CHECK_EQ_U64(e[0].seg.opcode, SNDK_OP_WRITE);
        CHECK_EQ_U64(e[0].seg.stag, 0xabcd0001);
        CHECK_EQ_U64(e[0].seg.to, 0x1000);
        CHECK_EQ_U64(e[0].seg.len, 32);
        for (int i = 0; i < 32; i++)
            CHECK_EQ_U64(tmem[0][i], i);
        break;
    case 5:
        CHECK_EQ_I64(r->nev, 1);
        CHECK(e[0].type == WU_EV_RREQ);
        CHECK_EQ_U64(e[0].seg.qn, 1);
        CHECK_EQ_U64(e[0].seg.msn, 1);
        CHECK_EQ_U64(e[0].rr.sink_stag, 0xaa01);
        CHECK_EQ_U64(e[0].rr.sink_to, 0x2000);
        CHECK_EQ_U64(e[0].rr.size, 20);
        CHECK_EQ_U64(e[0].rr.src_stag, 0xbb02);
        CHECK_EQ_U64(e[0].rr.src_to, 0x3000);
        break;
    case 6:
        CHECK_EQ_I64(r->nev, 2);
        CHECK(e[0].type == WU_EV_SEG && e[1].type == WU_EV_MSG);
        CHECK_EQ_U64(e[0].seg.opcode, SNDK_OP_READ_RESP);
        CHECK_EQ_U64(e[0].seg.stag, 0xaa01);
        CHECK_EQ_U64(e[1].msg_len, 20);
        for (int i = 0; i < 20; i++)
            CHECK_EQ_U64(tmem[1][i], 'R');
        break;
    case 7:
        CHECK_EQ_I64(r->nev, 2);
        CHECK_EQ_U64(e[0].seg.opcode, SNDK_OP_WRITE);
        CHECK_EQ_U64(e[0].seg.stag, 1);
        CHECK_EQ_U64(e[0].seg.len, 0);
        CHECK_EQ_U64(e[1].msg_len, 0);
        CHECK_EQ_U64(r->place_calls, 0); /* zero-length RTR: no STag check */
        break;
    case 8:
        CHECK_EQ_I64(r->nev, 1);
        CHECK(e[0].type == WU_EV_TERM);
        CHECK_EQ_U64(e[0].term.layer, SNDK_TERM_LAYER_DDP);
        CHECK_EQ_U64(e[0].term.etype, SNDK_TERM_DDP_TAGGED);
        CHECK_EQ_U64(e[0].term.code, SNDK_TERM_DDP_T_INV_STAG);
        CHECK_EQ_U64(e[0].term.hdrct, SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D);
        CHECK_EQ_U64(e[0].term.ddp_hdr_len, 14);
        CHECK_EQ_U64(sndk_get_be32(e[0].term.ddp_hdr + 2), 0xdead0001);
        CHECK_EQ_U64(e[0].seg.msn, 1);
        break;
    case 9:
        CHECK_EQ_I64(r->nev, 1);
        CHECK(e[0].type == WU_EV_TERM);
        CHECK_EQ_U64(e[0].term.layer, SNDK_TERM_LAYER_RDMAP);
        CHECK_EQ_U64(e[0].term.etype, SNDK_TERM_RDMAP_REMOTE_OP);
        CHECK_EQ_U64(e[0].term.code, SNDK_TERM_RDMAP_CANT_INV_STAG);
        CHECK_EQ_U64(e[0].term.hdrct, 0);
        break;
    case 10:
        CHECK_EQ_I64(r->nev, 2);
        CHECK_MEM(rmem[0], "no crc", 6);
        break;
    }
}

/* staged: each piece as the connection feeds its staging buffer (a whole FPDU in one step) */
static void parse_whole(int v, const uint8_t *buf, size_t len, struct wu_rec *r, size_t split,
                        size_t chunk, bool staged)
{
    struct sndk_rx rx;
    setup_for(v, &rx, r);
    r->chunk = chunk;
    r->max_iov = chunk ? 1 : 0;
    int (*feed)(struct sndk_rx *, const void *, size_t) = staged ? wu_feed_staged : sndk_rx_feed;
    /* A stream that ends with a Terminate reports it on the call that completes it. */
    int64_t last = (v == 8 || v == 9) ? SNDK_RX_TERMINATED : 0;
    CHECK_EQ_I64(feed(&rx, buf, split), split == len ? last : 0);
    CHECK_EQ_I64(feed(&rx, buf + split, len - split), split == len ? 0 : last);
    CHECK(sndk_rx_fault(&rx) == NULL);
    CHECK_EQ_I64(sndk_rx_eof(&rx), 0);
    CHECK_EQ_U64(rx.state, (v == 8 || v == 9) ? SNDK_RX_CLOSED : SNDK_RX_HDR);
}

TEST(parse_part_c_every_split)
{
    static struct wu_rec whole, part;
    for (int v = 0; v < 11; v++) {
        uint8_t buf[128];
        size_t len = wu_unhex(wu_fpdu_vectors[v].hex, buf, sizeof buf);
        parse_whole(v, buf, len, &whole, len, 0, false);
        expect_vector_events(v, &whole);
        unsigned long before = wu_whole_fpdus;
        parse_whole(v, buf, len, &part, len, 0, true);
        CHECK_MSG(wu_whole_fpdus > before, "vector %s: no FPDU taken in one step",
                  wu_fpdu_vectors[v].name);
        for (size_t k = 0; k <= len; k++) {
            for (int way = 0; way < 4; way++) {
                size_t chunk = way & 1 ? 3 : 0;
                parse_whole(v, buf, len, &part, k, chunk, way >= 2);
                expect_vector_events(v, &part);
                CHECK_EQ_I64(part.nev, whole.nev);
                for (int i = 0; i < whole.nev; i++)
                    CHECK_MSG(wu_ev_equal(&part.ev[i], &whole.ev[i]),
                              "vector %s split %zu (%s) event %d differs", wu_fpdu_vectors[v].name,
                              k, way >= 2 ? "staged" : "want/advance", i);
            }
        }
        /* one byte at a time, placement one byte per iovec */
        struct sndk_rx rx;
        setup_for(v, &rx, &part);
        part.chunk = 1;
        for (size_t i = 0; i < len; i++)
            CHECK_EQ_I64(sndk_rx_feed(&rx, buf + i, 1),
                         i + 1 == len && (v == 8 || v == 9) ? SNDK_RX_TERMINATED : 0);
        expect_vector_events(v, &part);
    }
}

/* The captured "main" traffic [IW-VECTORS] as one stream from our encoders, parsed in random cuts:
 * Sends with each opcode, a 2-segment Write, a Read Request, a 3-segment Send (MO 0/8/16). */
static size_t build_main_stream(uint8_t *out, size_t cap, uint8_t *wdata)
{
    size_t len = 0;
    struct sndk_tx_msg m;
    struct sndk_fpdu f;
    struct iovec iov[8];
    int n;
#define EMIT()                                                                                     \
    while ((n = sndk_tx_msg_next(&m, &f, iov, 8)) > 0)                                             \
    len += wu_flatten(iov, n, out + len, cap - len)
    struct iovec p = WU_IOV("hello");
    sndk_tx_send(&m, &crc_on, 1, SNDK_OP_SEND, 0, &p, 1);
    EMIT();
    p = WU_IOV("inv!");
    sndk_tx_send(&m, &crc_on, 2, SNDK_OP_SEND_INV, 0x11223344, &p, 1);
    EMIT();
    p = WU_IOV("se");
    sndk_tx_send(&m, &crc_on, 3, SNDK_OP_SEND_SE, 0, &p, 1);
    EMIT();
    p = WU_IOV("seinv");
    sndk_tx_send(&m, &crc_on, 4, SNDK_OP_SEND_SE_INV, 0x55667788, &p, 1);
    EMIT();
    struct sndk_tx_cfg small = {.crc = true, .max_fpdu = 56};
    p = (struct iovec){wdata, 48};
    sndk_tx_write(&m, &small, 0xabcd0001, 0x1000, &p, 1);
    EMIT();
    struct sndk_read_req rr = {0xaa01, 0x2000, 20, 0xbb02, 0x3000};
    n = sndk_fpdu_read_req(&f, 1, &rr, true, iov, 8);
    len += wu_flatten(iov, n, out + len, cap - len);
    struct sndk_tx_cfg tiny = {.crc = true, .max_fpdu = 32};
    p = WU_IOV("0123456789abcdefXYZ");
    sndk_tx_send(&m, &tiny, 5, SNDK_OP_SEND, 0, &p, 1);
    EMIT();
#undef EMIT
    return len;
}

TEST(parse_stream_random_cuts)
{
    uint8_t wdata[48], stream[1024];
    for (int i = 0; i < 48; i++)
        wdata[i] = (uint8_t)(i * 7);
    size_t len = build_main_stream(stream, sizeof stream, wdata);
    static struct wu_rec r;
    srand(7);
    for (int round = 0; round < 300; round++) {
        struct sndk_rx rx;
        setup_for(0, &rx, &r);
        r.reg[0].len = 48;
        r.chunk = (size_t)(rand() % 4);
        /* odd rounds as a connection feeds staged bytes: whole FPDUs in one step */
        bool staged = round & 1;
        size_t off = 0;
        while (off < len) {
            size_t k = 1 + (size_t)rand() % (staged ? 200 : 40);
            if (k > len - off)
                k = len - off;
            CHECK_EQ_I64(staged ? wu_feed_staged(&rx, stream + off, k)
                                : sndk_rx_feed(&rx, stream + off, k),
                         0);
            off += k;
        }
        CHECK_EQ_I64(sndk_rx_eof(&rx), 0);
        CHECK_EQ_U64(rx.fpdus, 4 + 2 + 1 + 3);
        CHECK_MEM(tmem[0], wdata, 48);
        CHECK_MEM(rmem[4], "0123456789abcdefXYZ", 19);
        /* events: 4 x (SEG, MSG), 2 SEG + MSG, RREQ, 3 SEG + MSG */
        CHECK_EQ_I64(r.nev, 8 + 3 + 1 + 4);
        CHECK(r.ev[10].type == WU_EV_MSG && r.ev[10].msg_len == 48);
        CHECK(r.ev[11].type == WU_EV_RREQ);
        CHECK_EQ_U64(r.ev[12].seg.mo, 0);
        CHECK_EQ_U64(r.ev[13].seg.mo, 8);
        CHECK_EQ_U64(r.ev[14].seg.mo, 16);
        CHECK(r.ev[15].type == WU_EV_MSG && r.ev[15].msg_len == 19);
    }
}

/* ---------------------------------------------------------------- segmentation */

TEST(segment_large_message_default_size)
{
    size_t total = 3 * 65456 + 1000;
    uint8_t *src = malloc(total), *dst = calloc(1, total);
    CHECK(src && dst);
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(i * 31 + 7);
    /* scattered SGL of odd sizes */
    struct iovec sgl[5] = {{src, 3}, {src + 3, 70000}, {src + 70003, 5}, {src + 70008, 100000},
                           {src + 170008, total - 170008}};
    struct sndk_tx_cfg cfg = {.crc = true}; /* default max FPDU */
    struct sndk_tx_msg m;
    CHECK_EQ_I64(sndk_tx_write(&m, &cfg, 0x77, 0x100000, sgl, 5), 0);
    static struct wu_rec r;
    wu_rec_init(&r);
    r.reg[0] = (struct wu_region){0x77, 0x100000, dst, total};
    r.nreg = 1;
    struct sndk_rx rx;
    wu_rx_init(&rx, &r, true);
    struct sndk_fpdu f;
    struct iovec iov[4];
    int n, segs = 0;
    uint8_t *wire = malloc(70000);
    while ((n = sndk_tx_msg_next(&m, &f, iov, 4)) > 0) {
        CHECK(f.wire_len <= SNDK_FPDU_MAX_DEFAULT);
        CHECK(f.wire_len <= 65483); /* one loopback MSS */
        CHECK_EQ_U64(f.wire_len % 4, 0);
        size_t l = wu_flatten(iov, n, wire, 70000);
        CHECK_EQ_U64(l, f.wire_len);
        CHECK_EQ_I64(sndk_rx_feed(&rx, wire, l), 0);
        segs++;
    }
    CHECK(segs >= 4);
    CHECK_MEM(dst, src, total);
    CHECK_EQ_U64(r.ev[0].seg.len % 8, 0);
    CHECK(r.ev[r.nev - 1].type == WU_EV_MSG && r.ev[r.nev - 1].msg_len == total);
    for (int i = 0; i + 1 < r.nev; i++)
        CHECK(r.ev[i].seg.last == (i == r.nev - 2));
    CHECK_EQ_U64(sndk_fpdu_max_payload(0, 18), 65456);
    CHECK_EQ_U64(sndk_fpdu_max_payload(0, 14), 65456);
    free(wire);
    free(src);
    free(dst);
}

/* Real socket, real readv into what sndk_rx_want names: payload lands in the receive buffer
 * without a staging copy. A writer thread sends the FPDUs with writev. */
struct writer_arg {
    int fd;
    uint8_t *src;
    size_t total;
    int rc;
};

static void *writer_main(void *p)
{
    struct writer_arg *a = p;
    struct sndk_tx_cfg cfg = {.crc = true, .max_fpdu = 9000};
    struct sndk_tx_msg m;
    struct iovec sgl = {a->src, a->total};
    a->rc = sndk_tx_send(&m, &cfg, 1, SNDK_OP_SEND, 0, &sgl, 1);
    struct sndk_fpdu f;
    struct iovec iov[8];
    int n;
    while (a->rc == 0 && (n = sndk_tx_msg_next(&m, &f, iov, 8)) > 0) {
        struct iovec *v = iov;
        while (n > 0) {
            ssize_t w = writev(a->fd, v, n);
            if (w <= 0) {
                a->rc = -1;
                break;
            }
            sndk_iov_advance(&v, &n, (size_t)w);
        }
    }
    return NULL;
}

TEST(readv_zero_copy_socketpair)
{
    int sv[2];
    CHECK_EQ_I64(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    size_t total = 200000;
    uint8_t *src = malloc(total), *dst = calloc(1, total);
    CHECK(src && dst);
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(i ^ (i >> 8));
    static struct wu_rec r;
    wu_rec_init(&r);
    r.rbuf[0] = dst;
    r.rlen[0] = total;
    r.nrbuf = 1;
    struct sndk_rx rx;
    wu_rx_init(&rx, &r, true);
    struct writer_arg wa = {sv[0], src, total, 0};
    pthread_t th;
    CHECK_EQ_I64(pthread_create(&th, NULL, writer_main, &wa), 0);
    bool saw_direct = false;
    size_t scratch_bytes = 0; /* bytes readv put anywhere but dst */
    while (!(r.nev > 0 && r.ev[r.nev - 1].type == WU_EV_MSG)) {
        struct iovec rv[8];
        int rn = sndk_rx_want(&rx, rv, 8);
        CHECK(rn > 0);
        for (int i = 0; i < rn; i++)
            if ((uint8_t *)rv[i].iov_base >= dst && (uint8_t *)rv[i].iov_base < dst + total)
                saw_direct = true;
        struct pollfd pfd = {sv[1], POLLIN, 0};
        CHECK_MSG(poll(&pfd, 1, 5000) == 1, "no data within 5 s");
        ssize_t got = readv(sv[1], rv, rn);
        CHECK(got > 0);
        size_t left = (size_t)got;
        for (int i = 0; i < rn && left > 0; i++) {
            size_t in = rv[i].iov_len < left ? rv[i].iov_len : left;
            bool direct = (uint8_t *)rv[i].iov_base >= dst && (uint8_t *)rv[i].iov_base < dst + total;
            if (!direct)
                scratch_bytes += in;
            left -= in;
        }
        CHECK_EQ_I64(sndk_rx_advance(&rx, (size_t)got), 0);
    }
    pthread_join(th, NULL);
    CHECK_EQ_I64(wa.rc, 0);
    CHECK(saw_direct);
    CHECK_MEM(dst, src, total);
    CHECK_EQ_U64(r.ev[r.nev - 1].msg_len, total);
    /* payload never went through the parser's scratch: only headers and trailers did (a count of
     * readv calls would depend on how the writer's bytes happened to arrive) */
    CHECK_MSG(scratch_bytes <= rx.fpdus * (SNDK_FPDU_HDR_MAX + SNDK_FPDU_TRAILER_MAX),
              "%zu bytes went through scratch for %llu FPDUs", scratch_bytes,
              (unsigned long long)rx.fpdus);
    close(sv[0]);
    close(sv[1]);
    free(src);
    free(dst);
}
