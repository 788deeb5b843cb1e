/* wire_bench: CRC32c throughput of every kernel this CPU can run (AVX-512, 256-bit VPCLMULQDQ and
 * 128-bit PCLMULQDQ folding, SSE4.2 crc32, table) and, when built with Debian's libisal-dev, of
 * ISA-L's crc32_iscsi, in GB/s at 64 B, 1 KiB, 4 KiB, 64 KiB and 1 MiB; which kernel the
 * start-up choice took and why; and the RX parser's cost per FPDU (ns/FPDU) for 64-byte and
 * 64 KiB FPDUs, CRC on and off, through want/advance and in one step per whole FPDU (as a
 * connection parses its staging buffer). Cache-hot, one core, in memory: sndk_rx_feed's copy
 * stands in for the readv that would fill the same iovecs from a socket.
 *   usage: wire_bench [seconds-per-measurement, default 0.2] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SOFTNDK_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include "iwarp/crc32c.h"
#include "iwarp/fpdu.h"
#include "iwarp/parser.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double budget = 0.2;
static volatile uint32_t sink;

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static double bench_crc(crc_fn fn, const uint8_t *buf, size_t len)
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
    return (double)iters * (double)len / (t - t0) / 1e9;
}

#ifdef SOFTNDK_HAVE_ISAL
/* ISA-L's crc32_iscsi keeps the raw register (no inversion in or out) and takes an int length. */
static uint32_t isal_crc32c(uint32_t crc, const void *buf, size_t len)
{
    return ~crc32_iscsi((unsigned char *)(uintptr_t)buf, (int)len, ~crc);
}
#endif

/* The CPU model as /proc/cpuinfo names it. */
static void cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ' || *v == '\t')
                    v++;
                snprintf(out, cap, "%.*s", (int)strcspn(v, "\n"), v);
            }
            break;
        }
    fclose(f);
}

static void bench_crc_all(const uint8_t *buf)
{
    /* 1448: one FPDU's payload at a 1500-byte MTU; the hybrids need whole blocks */
    static const size_t sizes[] = {64, 1024, 1448, 4096, 65536, 1 << 20};
    enum { NSIZES = sizeof sizes / sizeof sizes[0] };
    struct {
        const char *name;
        crc_fn fn;
    } k[SNDK_CRC32C_IMPL_COUNT + 1];
    int nk = 0;
    static const enum sndk_crc32c_impl impls[] = {
        SNDK_CRC32C_CLMUL,    SNDK_CRC32C_HYBRID256, SNDK_CRC32C_CLMUL256, SNDK_CRC32C_HYBRID128,
        SNDK_CRC32C_CLMUL128, SNDK_CRC32C_HW,        SNDK_CRC32C_SW};
    char missing[128] = "";
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
        crc_fn fn = sndk_crc32c_kernel(impls[i]);
        if (fn) {
            k[nk].name = sndk_crc32c_impl_name(impls[i]);
            k[nk++].fn = fn;
        } else {
            size_t u = strlen(missing);
            snprintf(missing + u, sizeof missing - u, "%s%s", u ? ", " : "",
                     sndk_crc32c_impl_name(impls[i]));
        }
    }
#ifdef SOFTNDK_HAVE_ISAL
    k[nk].name = "isa-l";
    k[nk++].fn = isal_crc32c;
    const char *isal = "ISA-L crc32_iscsi (libisal) beside them";
#else
    const char *isal = "ISA-L: not built in (install Debian's libisal-dev and reconfigure)";
#endif
    /* every kernel must agree with the table before its figure means anything */
    for (int i = 0; i < nk; i++)
        for (size_t len = 0; len < 5000; len += 61)
            if (k[i].fn(0x5a5a5a5au, buf + 3, len) != sndk_crc32c_sw(0x5a5a5a5au, buf + 3, len)) {
                fprintf(stderr, "wire_bench: %s disagrees with the table at %zu bytes\n", k[i].name,
                        len);
                exit(1);
            }
    char cpu[160];
    cpu_model(cpu, sizeof cpu);
    printf("CRC32c, cache-hot, one core, GB/s on %s; %s\n", cpu, isal);
    if (missing[0])
        printf("  not on this CPU: %s\n", missing);
    printf("  start-up choice: %s (%s)\n", sndk_crc32c_impl_name(sndk_crc32c_current()),
           sndk_crc32c_reason());
    printf("  %-11s", "kernel");
    static const char *const labels[NSIZES] = {"64 B",  "1 KiB",  "1448 B",
                                               "4 KiB", "64 KiB", "1 MiB"};
    for (int s = 0; s < NSIZES; s++)
        printf(" %8s", labels[s]);
    printf("\n");
    for (int i = 0; i < nk; i++) {
        printf("  %-11s", k[i].name);
        for (int s = 0; s < NSIZES; s++)
            printf(" %8.2f", bench_crc(k[i].fn, buf, sizes[s]));
        printf("\n");
        fflush(stdout);
    }
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

/* The stream as a connection parses staged bytes: each whole FPDU in one step. */
static int take_all(struct sndk_rx *rx, const uint8_t *p, size_t len)
{
    while (len > 0) {
        size_t took;
        int rc = sndk_rx_take_fpdu(rx, p, len, &took);
        if (rc != 0 || took == 0)
            return rc != 0 ? rc : -1;
        p += took;
        len -= took;
    }
    return 0;
}

static void bench_parser(const char *label, bool send, uint32_t pay, bool crc, bool one_step)
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
        if ((one_step ? take_all(&rx, stream, len) : sndk_rx_feed(&rx, stream, len)) != 0) {
            fprintf(stderr, "parse failed\n");
            exit(1);
        }
        fpdus += rx.fpdus;
        t = now_s();
    } while (t - t0 < budget);
    double ns = (t - t0) * 1e9 / (double)fpdus;
    printf("  parse %-22s crc %-3s %-13s %9.1f ns/FPDU  %7.2f GB/s payload\n", label,
           crc ? "on" : "off", one_step ? "one step" : "want/advance", ns, (double)pay / ns);
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

    bench_crc_all(region);
    printf("RX parser (want/advance: sndk_rx_feed, its copy standing in for a readv; one step:\n"
           "sndk_rx_take_fpdu over whole FPDUs, as staged bytes are parsed)\n");
    for (int crc = 1; crc >= 0; crc--)
        for (int one_step = 0; one_step < 2; one_step++) {
            bench_parser("Send 64 B payload", true, 64, crc, one_step);
            bench_parser("Write 65456 B payload", false, 65456, crc, one_step);
        }
    printf("(64 KiB FPDU = %u bytes on the wire at the default max FPDU)\n",
           sndk_mpa_fpdu_len(65456 + 14));
    free(region);
    return 0;
}
