/* wire_bench: CRC32c throughput (AVX-512 carry-less multiply folding, SSE4.2 crc32 and table
 * kernels, GB/s) and the RX parser's cost per FPDU (ns/FPDU) for 64-byte and 64 KiB FPDUs, CRC
 * on and off. Cache-hot, one core, in memory:
 * sndk_rx_feed's copy stands in for the readv that would fill the same iovecs from a socket.
 *   usage: wire_bench [seconds-per-measurement, default 0.3] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iwarp/crc32c.h"
#include "iwarp/fpdu.h"
#include "iwarp/parser.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double budget = 0.3;
static volatile uint32_t sink;

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void bench_crc(const char *name, crc_fn fn, const uint8_t *buf, size_t len)
{
    uint64_t iters = 0;
    uint32_t c = 0;
    double t0 = now_s(), t;
    do {
        for (int i = 0; i < 64; i++)
            c = fn(c, buf, len);
        iters += 64;
        t = now_s();
    } while (t - t0 < budget);
    sink = c;
    printf("  crc32c %-5s %8zu B  %7.2f GB/s\n", name, len,
           (double)iters * (double)len / (t - t0) / 1e9);
}

/* Receive-side memory for the parser: one region for Writes, one buffer for Sends. */
static uint8_t *region;
static size_t region_len;

static int place(void *ctx, const struct sndk_rx_seg *s, uint32_t off, struct iovec *iov, int max)
{
    if (s->tagged) {
        if (s->to > region_len || s->len > region_len - s->to)
            return -SNDK_WERR_BOUNDS;
        iov[0] = (struct iovec){region + s->to + off, s->len - off};
    } else {
        if ((uint64_t)s->mo + s->len > region_len)
            return -SNDK_WERR_TOO_LONG;
        iov[0] = (struct iovec){region + s->mo + off, s->len - off};
    }
    return 1;
}

static const struct sndk_rx_ops ops = {.place = place};

/* A stream of `count` FPDUs: Sends (MSN 1..count) or Writes, each with `pay` payload bytes. */
static size_t build_stream(uint8_t *out, size_t cap, bool send, uint32_t pay, int count, bool crc)
{
    size_t len = 0;
    struct sndk_tx_cfg cfg = {.crc = crc};
    for (int i = 0; i < count; i++) {
        struct sndk_tx_msg m;
        struct iovec p = {region, pay};
        if (send)
            sndk_tx_send(&m, &cfg, (uint32_t)i + 1, SNDK_OP_SEND, 0, &p, 1);
        else
            sndk_tx_write(&m, &cfg, 0x100, 0, &p, 1);
        struct sndk_fpdu f;
        struct iovec iov[4];
        int n;
        while ((n = sndk_tx_msg_next(&m, &f, iov, 4)) > 0)
            len += sndk_iov_gather(iov, n, out + len, cap - len);
    }
    return len;
}

static void bench_parser(const char *label, bool send, uint32_t pay, bool crc)
{
    int count = pay <= 64 ? 4096 : 16;
    size_t cap = (size_t)count * (pay + 64);
    uint8_t *stream = malloc(cap);
    size_t len = build_stream(stream, cap, send, pay, count, crc);
    struct sndk_rx_config cfg = {.crc = crc};
    uint64_t fpdus = 0;
    double t0 = now_s(), t;
    do {
        struct sndk_rx rx;
        sndk_rx_init(&rx, &cfg, &ops, NULL);
        if (sndk_rx_feed(&rx, stream, len) != 0) {
            fprintf(stderr, "parse failed\n");
            exit(1);
        }
        fpdus += rx.fpdus;
        t = now_s();
    } while (t - t0 < budget);
    double ns = (t - t0) * 1e9 / (double)fpdus;
    printf("  parse %-22s crc %-3s %9.1f ns/FPDU  %7.2f GB/s payload\n", label, crc ? "on" : "off",
           ns, (double)pay / ns);
    free(stream);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        budget = atof(argv[1]);
    region_len = 1 << 20;
    region = malloc(region_len);
    for (size_t i = 0; i < region_len; i++)
        region[i] = (uint8_t)(i * 131);

    const int clmul = sndk_crc32c_clmul_available(), hw = sndk_crc32c_hw_available();
    printf("CRC32c (cache-hot)%s\n", clmul ? ""
                                     : hw  ? " - no AVX-512 VPCLMULQDQ on this CPU"
                                           : " - no SSE4.2 on this CPU");
    static const size_t sizes[] = {64, 4096, 65456, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (clmul)
            bench_crc("clmul", sndk_crc32c_clmul, region, sizes[i]);
        if (hw)
            bench_crc("hw", sndk_crc32c_hw, region, sizes[i]);
        bench_crc("sw", sndk_crc32c_sw, region, sizes[i]);
    }
    printf("RX parser (sndk_rx_feed; includes the copy a readv would do)\n");
    for (int crc = 1; crc >= 0; crc--) {
        bench_parser("Send 64 B payload", true, 64, crc);
        bench_parser("Write 65456 B payload", false, 65456, crc);
    }
    printf("(64 KiB FPDU = %u bytes on the wire at the default max FPDU)\n",
           sndk_mpa_fpdu_len(65456 + 14));
    free(region);
    return 0;
}
