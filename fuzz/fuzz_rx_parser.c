/* libFuzzer target: the FPDU receive parser.
 *
 * Input: byte 0 = mode bits, byte 1 = how the stream is cut and how placement is chunked, then the
 * TCP byte stream. With MODE_RECRC the harness first gives every FPDU a correct CRC, so that the
 * fuzzer reaches the checks behind the CRC; MODE_NOCRC runs with CRC not negotiated.
 * Invariants: no memory error (all targets are exact-size heap blocks), placement only inside
 * them, a failed parser stays failed and offers no more iovecs. And the stream fed a second
 * time, each piece as a connection feeds its staging buffer (a whole FPDU at a boundary in one
 * step, sndk_rx_take_fpdu), ends the same: the same return, state, fault, counts and the same
 * bytes in every target. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/crc32c.h"
#include "iwarp/parser.h"

#define MODE_NOCRC  0x01
#define MODE_STRICT 0x02
#define MODE_RECRC  0x04
#define MODE_SMALL  0x08 /* max ULPDU 1000 */
#define MODE_NOBUF  0x10 /* no receive buffer */
#define MODE_FAILCB 0x20 /* completion callbacks refuse */
#define MODE_LATER  0x40 /* a Send's first place() says "later" (receiver not ready) a few
                            times; the harness resumes the held parser, without feeding */

#define REG_LEN 4096
#define RBUF_LEN 2048

struct fctx {
    uint8_t *reg[2];
    uint8_t *rbuf[4];
    size_t chunk;
    unsigned mode;
    unsigned later; /* MODE_LATER: "later" answers left */
};

static int f_place(void *c, const struct sndk_rx_seg *s, uint32_t off, struct iovec *iov, int max)
{
    struct fctx *x = c;
    uint8_t *base;
    if (s->tagged) {
        /* STag 1 and 2 name regions at TO 0 */
        if (s->stag != 1 && s->stag != 2)
            return -SNDK_WERR_STAG;
        if (s->to > REG_LEN || s->len > REG_LEN - s->to)
            return -SNDK_WERR_BOUNDS;
        base = x->reg[s->stag - 1] + s->to;
    } else {
        if ((x->mode & MODE_LATER) && off == 0 && s->mo == 0 && x->later > 0) {
            x->later--;
            return SNDK_RX_PLACE_LATER;
        }
        if ((x->mode & MODE_NOBUF) || s->msn == 0 || s->msn > 4)
            return -SNDK_WERR_MSN_NO_BUF;
        if ((uint64_t)s->mo + s->len > RBUF_LEN)
            return -SNDK_WERR_TOO_LONG;
        base = x->rbuf[s->msn - 1] + s->mo;
    }
    int n = 0;
    uint32_t pos = off;
    while (pos < s->len && n < max) {
        size_t k = s->len - pos;
        if (x->chunk && k > x->chunk)
            k = x->chunk;
        iov[n++] = (struct iovec){base + pos, k};
        pos += (uint32_t)k;
    }
    return n;
}

static int f_msg_done(void *c, const struct sndk_rx_seg *s, uint64_t len)
{
    const struct fctx *x = c;
    if (s->inval_stag == 0xdead && (x->mode & MODE_FAILCB))
        return -SNDK_WERR_INV_STAG;
    return 0;
}

static int f_read_req(void *c, const struct sndk_rx_seg *s, const struct sndk_read_req *rr)
{
    const struct fctx *x = c;
    return (x->mode & MODE_FAILCB) && rr->size > 1000 ? -SNDK_WERR_RREQ_IRD : 0;
}

static void f_terminate(void *c, const struct sndk_rx_seg *s, const struct sndk_term *t)
{
    (void)sndk_term_code_name(t->layer, t->etype, t->code);
    /* the inbound table reads the peer's bytes too: what it names stays inside them */
    struct sndk_term_target named;
    sndk_term_target(t, &named);
    if (named.names == SNDK_TERM_NAMES_NONE && (named.msn || named.stag || named.to))
        abort();
}

/* The stream in pieces of at most step bytes through want/advance, resuming a held Send (no
 * byte may be offered while it is held). Returns what sndk_rx_feed would. staged: whole FPDUs
 * at a boundary of a piece go in one step. */
static int feed_held(struct sndk_rx *rx, struct fctx *x, const uint8_t *p, size_t len, size_t step,
                     bool staged)
{
    size_t piece = 0; /* bytes of the current piece not fed yet */
    while (len > 0) {
        if (piece == 0)
            piece = step < len ? step : len;
        if (rx->state == SNDK_RX_HELD) {
            struct iovec none[2];
            if (sndk_rx_want(rx, none, 2) != 0)
                abort(); /* a held parser takes no byte */
            unsigned later = x->later;
            int rc = sndk_rx_resume(rx);
            if (rc < 0)
                return rc;
            if (rc == SNDK_RX_HELD_RC && later == 0)
                abort(); /* place() gave a buffer or an error: it cannot still be held */
            continue;
        }
        if (staged) {
            size_t took;
            int rc = sndk_rx_take_fpdu(rx, p, piece, &took);
            p += took;
            len -= took;
            piece -= took;
            if (rc == SNDK_RX_HELD_RC)
                continue;
            if (rc != 0)
                return rc;
            if (took)
                continue;
        }
        size_t used;
        int rc = sndk_rx_feed_round(rx, p, piece, &used);
        p += used;
        len -= used;
        piece -= used;
        if (rc == SNDK_RX_HELD_RC)
            continue;
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const struct sndk_rx_ops f_ops = {
    .place = f_place, .msg_done = f_msg_done, .read_req = f_read_req, .terminate = f_terminate,
};

/* Give every FPDU in the buffer its correct CRC. */
static void recrc(uint8_t *b, size_t len)
{
    size_t off = 0;
    while (off + 2 <= len) {
        uint32_t l = sndk_get_be16(b + off);
        uint32_t fl = sndk_mpa_fpdu_len(l);
        if (fl > len - off)
            break;
        sndk_put_le32(b + off + fl - 4, sndk_crc32c(0, b + off, fl - 4));
        off += fl;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One parser over the stream, targets zeroed; the caller frees them (fctx_free). */
static int run_stream(struct sndk_rx *rx, struct fctx *x, unsigned mode, unsigned cut,
                      const uint8_t *stream, size_t size, bool staged)
{
    *x = (struct fctx){.chunk = cut >> 4, .mode = mode, .later = 3};
    for (int i = 0; i < 2; i++)
        x->reg[i] = calloc(1, REG_LEN);
    for (int i = 0; i < 4; i++)
        x->rbuf[i] = calloc(1, RBUF_LEN);
    struct sndk_rx_config cfg = {.crc = !(mode & MODE_NOCRC),
                                 .strict = (mode & MODE_STRICT) != 0,
                                 .max_ulpdu = (mode & MODE_SMALL) ? 1000 : 0};
    sndk_rx_init(rx, &cfg, &f_ops, x);

    size_t step = (cut & 0x0f) ? (cut & 0x0f) : size;
    int rc = 0;
    if ((mode & MODE_LATER) || staged)
        rc = feed_held(rx, x, stream, size, step, staged);
    else
        for (size_t off = 0; off < size && rc == 0; off += step)
            rc = sndk_rx_feed(rx, stream + off, size - off < step ? size - off : step);
    if (rc == 0)
        rc = sndk_rx_eof(rx);
    return rc;
}

static void fctx_free(struct fctx *x)
{
    for (int i = 0; i < 2; i++)
        free(x->reg[i]);
    for (int i = 0; i < 4; i++)
        free(x->rbuf[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned mode = data[0], cut = data[1];
    data += 2;
    size -= 2;
    uint8_t *stream = malloc(size ? size : 1);
    if (!stream)
        return 0;
    memcpy(stream, data, size);
    if (mode & MODE_RECRC)
        recrc(stream, size);

    struct fctx x, xs;
    struct sndk_rx rx, rxs;
    int rc = run_stream(&rx, &x, mode, cut, stream, size, false);
    int rcs = run_stream(&rxs, &xs, mode, cut, stream, size, true);
    if (rc == -EPROTO) {
        struct iovec iov[4];
        if (sndk_rx_want(&rx, iov, 4) != 0 || !sndk_rx_fault(&rx))
            abort();
        struct sndk_term t;
        sndk_term_from_fault(&t, sndk_rx_fault(&rx));
        uint8_t body[SNDK_TERM_BODY_MAX];
        if (sndk_term_encode(&t, body, sizeof body) == 0)
            abort();
    }
    /* the one-step path ends as want/advance did */
    if (rcs != rc || rxs.state != rx.state || rxs.fpdus != rx.fpdus ||
        memcmp(rxs.msn_expect, rx.msn_expect, sizeof rx.msn_expect) != 0 ||
        memcmp(&rxs.fault, &rx.fault, sizeof rx.fault) != 0)
        abort();
    for (int i = 0; i < 2; i++)
        if (memcmp(xs.reg[i], x.reg[i], REG_LEN) != 0)
            abort();
    for (int i = 0; i < 4; i++)
        if (memcmp(xs.rbuf[i], x.rbuf[i], RBUF_LEN) != 0)
            abort();
    fctx_free(&x);
    fctx_free(&xs);
    free(stream);
    return 0;
}
