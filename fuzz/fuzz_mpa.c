/* libFuzzer target: the MPA Request/Reply parser and the negotiation that follows it.
 *
 * Input: byte 0 = mode (bit 0: expect a Reply; bit 1: RFC limit of 512 bytes of private data),
 * byte 1 = cut size, then the bytes the peer sends. When a frame parses, it is negotiated against
 * a fixed local policy, and every frame we would answer with must build and parse back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/mpa.h"

static void roundtrip(const struct sndk_mpa_params *p, bool reply)
{
    uint8_t buf[SNDK_MPA_FRAME_MAX];
    int n = sndk_mpa_build(buf, sizeof buf, reply, p);
    if (n < 0)
        return;
    struct sndk_mpa_rx m;
    sndk_mpa_rx_init(&m, reply, 0);
    size_t used = 0;
    if (sndk_mpa_rx_feed(&m, buf, (size_t)n, &used) != 1 || used != (size_t)n)
        abort(); /* what we build, we must parse */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool reply = data[0] & 1;
    uint16_t limit = (data[0] & 2) ? 512 : 0;
    size_t step = data[1] ? data[1] : size;
    data += 2;
    size -= 2;

    struct sndk_mpa_rx m;
    sndk_mpa_rx_init(&m, reply, limit);
    int rc = 0;
    size_t total = 0;
    for (size_t off = 0; off < size && rc == 0; off += step) {
        size_t used = 0, k = size - off < step ? size - off : step;
        rc = sndk_mpa_rx_feed(&m, data + off, k, &used);
        total += used;
        if (used > k)
            abort();
    }
    if (rc == 0)
        rc = sndk_mpa_rx_eof(&m);
    (void)sndk_mpa_status_name(rc);
    (void)sndk_mpa_status_werr(rc);
    const struct sndk_mpa_frame *f = sndk_mpa_rx_frame(&m);
    if (rc != 1) {
        if (f)
            abort();
        return 0;
    }
    if (!f || total != 20u + f->pd_len || f->ulp_pd_len > f->pd_len)
        abort();

    struct sndk_mpa_policy pol = {.rev = 2, .crc = true, .ird = 8, .ord = 8, .p2p = true};
    struct sndk_mpa_params req, rep;
    struct sndk_mpa_result res;
    if (!reply) {
        int a = sndk_mpa_accept(f, &pol, "pd", 2, &rep, &res);
        if (a == 0 || a == -SNDK_MPA_E_MARKERS || a == -SNDK_MPA_E_RTR)
            roundtrip(&rep, true);
    } else {
        sndk_mpa_request_params(&pol, NULL, 0, &req);
        roundtrip(&req, false);
        (void)sndk_mpa_check_reply(&req, f, &res);
        pol.rev = 1;
        sndk_mpa_request_params(&pol, NULL, 0, &req);
        (void)sndk_mpa_check_reply(&req, f, &res);
    }
    return 0;
}
