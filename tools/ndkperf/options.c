/* ndkperf options: the command line (perftest's flags where they apply) and the option block
 * both sides exchange at connect, with the agreement check. */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndkperf.h"

static const char *const names[T_COUNT] = {"send_bw",  "send_lat", "write_bw",
                                           "write_lat", "read_bw",  "read_lat"};
static const char *const titles[T_COUNT] = {"Send BW Test",  "Send Latency Test",
                                            "RDMA_Write BW Test", "RDMA_Write Latency Test",
                                            "RDMA_Read BW Test",  "RDMA_Read Latency Test"};

const char *test_name(enum test_kind t)
{
    return (unsigned)t < T_COUNT ? names[t] : "?";
}

const char *test_title(enum test_kind t)
{
    return (unsigned)t < T_COUNT ? titles[t] : "?";
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ndkperf TEST [options]            server: waits for a client\n"
            "       ndkperf TEST [options] HOST       client: connects to HOST\n"
            "       ndkperf TEST --loopback [options] both ends in this process\n"
            "TEST: send_bw send_lat write_bw write_lat read_bw read_lat\n"
            "Both sides must be given the same options; they are checked at connect.\n"
            "  -s, --size BYTES        message size (BW default 65536, latency 2)\n"
            "  -a, --all               sizes 2 .. 2^23 (see --max-size)\n"
            "      --max-size BYTES    largest size with -a (default 8388608)\n"
            "  -n, --iters N           iterations per size (BW 5000, latency 1000)\n"
            "  -D, --duration S        BW tests: run S seconds instead of -n\n"
            "  -q, --qp N              QPs (connections), BW tests (default 1)\n"
            "  -t, --tx-depth N        outstanding requests (BW 128, latency 1)\n"
            "  -r, --rx-depth N        receives posted, Send tests (BW 512, latency 2)\n"
            "  -I, --inline_size N     send/write up to N bytes inline (default: send_lat 236,\n"
            "                          write_lat 220, as perftest; others 0)\n"
            "  -l, --post_list N       post N requests per DEFER chain (default 1)\n"
            "  -o, --outs N            outstanding reads asked (ORD/IRD, default 16)\n"
            "  -e, --events            block on CQ notifications (NdkArmCq) instead of polling:\n"
            "                          the thread waits, the notification callback wakes it\n"
            "      --callback          send_lat, read_lat: block as -e, but do the work in the\n"
            "                          notification callback (poll, post the next message,\n"
            "                          re-arm), as a kernel consumer does in its DPC; the\n"
            "                          thread only waits for the end of the loop\n"
            "  -b, --bidirectional     BW tests: both sides send\n"
            "  -c, --check             fill every message with a per-iteration pattern and\n"
            "                          check every received byte\n"
            "  -p, --port PORT         ND (TCP) port (default 18515; 0 = any, printed)\n"
            "  -d, --ib-dev IFNAME     network interface of the adapter (default: every address)\n"
            "      --bind ADDR         server: listen address; client: source address\n"
            "      --loopback          run server and client here, on 127.0.0.1\n"
            "      --timeout S         give up after S seconds, exit 1 (default 60)\n"
            "      --cpu N             pin this side to CPU N\n"
            "      --no-pin            --loopback: do not pin the two sides to distinct CPUs\n"
            "      --one-device        --loopback: both sides on one device (one set of\n"
            "                          progress threads); default: two, as two hosts\n"
            "      --mpa-rev 1|2       MPA revision to ask for (default: provider's)\n"
            "      --crc on|off        MPA CRC policy (default: provider's)\n"
            "      --report_gbits      bandwidth in Gb/sec instead of MB/sec\n"
            "      --histogram         latency tests: samples per 1 us bucket on stderr\n"
            "      --out_json          also write the results as JSON\n"
            "      --out_json_file F   where (default: stdout)\n"
            "      --perftest          speak perftest's -R exchange (ib_*_bw -R, ib_*_lat -R):\n"
            "                          run against perftest, or another ndkperf --perftest;\n"
            "                          one QP, one size; -c only between two ndkperf\n"
            "  -v, --verbose           more diagnostics on stderr\n"
            "  -V, --version           print the version\n"
            "Exit status: 0 success, 1 failure (one-line reason on stderr), 2 usage,\n"
            "3 the provider build does not support an operation the test needs.\n");
}

static _Noreturn void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ndkperf: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (ndkperf --help)\n");
    va_end(ap);
    exit(EXIT_USAGE);
}

static uint32_t num(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    /* K/M/G suffixes, as perftest accepts sizes */
    if (end != s && (*end == 'K' || *end == 'k')) {
        v <<= 10;
        end++;
    } else if (end != s && (*end == 'M' || *end == 'm')) {
        v <<= 20;
        end++;
    }
    if (end == s || *end || s[0] == '-' || v < lo || v > hi)
        bad("%s wants a number in %" PRIu64 "..%" PRIu64 ", not '%s'", opt, lo, hi, s);
    return (uint32_t)v;
}

void parse_options(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->num_qps = 1;
    o->post_list = 1;
    o->outs = 16;
    o->inline_size = NDKPERF_INLINE_DEFAULT;
    o->port = NDKPERF_DEFAULT_PORT;
    o->timeout = 60;
    o->cpu = -1;
    o->all_max = 1u << 23;
    bool set_port = false;
    enum {
        O_REPORT_GBITS = 256,
        O_HISTOGRAM,
        O_JSON,
        O_JSON_FILE,
        O_BIND,
        O_LOOPBACK,
        O_TIMEOUT,
        O_CPU,
        O_NO_PIN,
        O_ONE_DEVICE,
        O_MPA,
        O_CRC,
        O_MAX_SIZE,
        O_PERFTEST,
        O_CALLBACK,
    };
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},
        {"all", no_argument, NULL, 'a'},
        {"iters", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'D'},
        {"qp", required_argument, NULL, 'q'},
        {"tx-depth", required_argument, NULL, 't'},
        {"rx-depth", required_argument, NULL, 'r'},
        {"inline_size", required_argument, NULL, 'I'},
        {"post_list", required_argument, NULL, 'l'},
        {"outs", required_argument, NULL, 'o'},
        {"events", no_argument, NULL, 'e'},
        {"bidirectional", no_argument, NULL, 'b'},
        {"check", no_argument, NULL, 'c'},
        {"port", required_argument, NULL, 'p'},
        {"ib-dev", required_argument, NULL, 'd'},
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {"report_gbits", no_argument, NULL, O_REPORT_GBITS},
        {"histogram", no_argument, NULL, O_HISTOGRAM},
        {"out_json", no_argument, NULL, O_JSON},
        {"out_json_file", required_argument, NULL, O_JSON_FILE},
        {"bind", required_argument, NULL, O_BIND},
        {"loopback", no_argument, NULL, O_LOOPBACK},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"cpu", required_argument, NULL, O_CPU},
        {"no-pin", no_argument, NULL, O_NO_PIN},
        {"one-device", no_argument, NULL, O_ONE_DEVICE},
        {"mpa-rev", required_argument, NULL, O_MPA},
        {"crc", required_argument, NULL, O_CRC},
        {"max-size", required_argument, NULL, O_MAX_SIZE},
        {"perftest", no_argument, NULL, O_PERFTEST},
        {"callback", no_argument, NULL, O_CALLBACK},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "s:an:D:q:t:r:I:l:o:ebcp:d:vVh", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o->size = num("-s", optarg, 1, 1u << 30);
            o->set_size = true;
            break;
        case 'a':
            o->all = true;
            break;
        case 'n':
            o->iters = num("-n", optarg, 1, UINT32_MAX);
            o->set_iters = true;
            break;
        case 'D':
            o->duration = num("-D", optarg, 1, 86400);
            break;
        case 'q':
            o->num_qps = num("-q", optarg, 1, 64);
            break;
        case 't':
            o->tx_depth = num("-t", optarg, 1, 16384);
            o->set_tx = true;
            break;
        case 'r':
            o->rx_depth = num("-r", optarg, 1, 16384);
            o->set_rx = true;
            break;
        case 'I':
            o->inline_size = num("-I", optarg, 0, 1u << 20);
            break;
        case 'l':
            o->post_list = num("-l", optarg, 1, 4096);
            break;
        case 'o':
            o->outs = num("-o", optarg, 1, 4096);
            break;
        case 'e':
            o->events = true;
            break;
        case 'b':
            o->bidir = true;
            break;
        case 'c':
            o->verify = true;
            break;
        case 'p':
            o->port = (uint16_t)num("-p", optarg, 0, 65535);
            set_port = true;
            break;
        case 'd':
            o->ifname = optarg;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'V':
            printf("ndkperf %s (softndk %s)\n", NDKPERF_VERSION, SoftNdkVersionString());
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        case O_REPORT_GBITS:
            o->report_gbits = true;
            break;
        case O_HISTOGRAM:
            o->histogram = true;
            break;
        case O_JSON:
            o->json = true;
            break;
        case O_JSON_FILE:
            o->json_file = optarg;
            o->json = true;
            break;
        case O_BIND:
            o->bind_addr = optarg;
            break;
        case O_LOOPBACK:
            o->loopback = true;
            break;
        case O_TIMEOUT:
            o->timeout = num("--timeout", optarg, 1, 86400);
            break;
        case O_CPU:
            o->cpu = (int)num("--cpu", optarg, 0, 4095);
            break;
        case O_ONE_DEVICE:
            o->one_device = true;
            break;
        case O_NO_PIN:
            o->no_pin = true;
            break;
        case O_MPA:
            o->mpa_rev = num("--mpa-rev", optarg, 1, 2);
            break;
        case O_CRC:
            if (strcmp(optarg, "on") == 0)
                o->crc = 1;
            else if (strcmp(optarg, "off") == 0)
                o->crc = 2;
            else
                bad("--crc wants on or off, not '%s'", optarg);
            break;
        case O_MAX_SIZE:
            o->all_max = num("--max-size", optarg, 2, 1u << 30);
            break;
        case O_PERFTEST:
            o->perftest = true;
            break;
        case O_CALLBACK:
            o->callback = true;
            o->events = true;
            break;
        default:
            usage(stderr);
            exit(EXIT_USAGE);
        }
    }
    int npos = argc - optind;
    if (npos < 1)
        bad("which test? one of send_bw send_lat write_bw write_lat read_bw read_lat");
    const char *t = argv[optind];
    o->test = T_COUNT;
    for (int i = 0; i < T_COUNT; i++)
        if (strcmp(t, names[i]) == 0)
            o->test = (enum test_kind)i;
    if (o->test == T_COUNT)
        bad("unknown test '%s'", t);
    if (npos > 2)
        bad("too many arguments after '%s'", t);
    if (npos == 2)
        o->server = argv[optind + 1];
    if (o->loopback && o->server)
        bad("--loopback takes no HOST");
    if (o->one_device && !o->loopback)
        bad("--one-device goes with --loopback");
    if (o->loopback && !set_port)
        o->port = 0;
    if (!o->loopback && !o->server && o->cpu < 0)
        o->cpu = -1;

    bool bw = test_is_bw(o->test);
    if (!o->set_size)
        o->size = bw ? 65536 : 2;
    if (!o->set_iters)
        o->iters = bw ? 5000 : 1000;
    if (!o->set_tx)
        o->tx_depth = bw ? 128 : 1;
    if (!o->set_rx)
        o->rx_depth = bw ? 512 : 2;
    if (o->all) {
        o->size = o->all_max;
        if (o->all_max & (o->all_max - 1))
            bad("--max-size must be a power of two");
    }
    if (o->duration && !bw)
        bad("-D applies to the BW tests; use -n for %s", t);
    if (o->num_qps > 1 && !bw)
        bad("-q applies to the BW tests");
    if (o->bidir && !bw)
        bad("-b applies to the BW tests");
    if (o->post_list > 1 && !bw)
        bad("-l applies to the BW tests");
    if (o->post_list > o->tx_depth)
        bad("-l %u is above the TX depth -t %u", o->post_list, o->tx_depth);
    if (o->callback && o->test != T_SEND_LAT && o->test != T_READ_LAT)
        bad("--callback applies to send_lat and read_lat");
    if (o->events && o->test == T_WRITE_LAT)
        bad("-e does not apply to write_lat: an RDMA Write makes no completion at its target");
    if (o->verify && o->duration && (o->test == T_WRITE_BW))
        bad("-c with -D is not possible for write_bw (the target must know the count)");
    if (o->duration && o->all)
        bad("-D and -a together are not supported");
    if (o->perftest) {
        if (o->loopback)
            bad("--perftest runs as a server or a client, not --loopback");
        if (o->all || o->duration || o->num_qps > 1 || o->bidir || o->events || o->post_list > 1 ||
            o->json)
            bad("--perftest supports -s, -n, -t, -o, -c, -p, --bind, --timeout, --crc, --mpa-rev, "
                "-v (not -a, -D, -q, -b, -e, -l, --out_json)");
        if (o->test == T_WRITE_LAT && o->size < 1)
            bad("write_lat needs -s 1 or more");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The option block: 96 bytes, little-endian. */

static void put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

void wire_from_opts(const struct opts *o, struct wire_opts *w)
{
    memset(w, 0, sizeof *w);
    w->magic = WIRE_MAGIC;
    w->version = WIRE_VERSION;
    w->length = WIRE_LEN;
    w->test = (uint8_t)o->test;
    w->flags = (uint8_t)((o->all ? WF_ALL : 0) | (o->bidir ? WF_BIDIR : 0) |
                         (o->verify ? WF_VERIFY : 0) | (o->events ? WF_EVENTS : 0));
    w->size = o->all ? 0 : o->size;
    w->iters = o->duration ? 0 : o->iters;
    w->duration = o->duration;
    w->num_qps = o->num_qps;
    w->tx_depth = o->tx_depth;
    w->rx_depth = o->rx_depth;
    w->post_list = o->post_list;
    w->inline_size = o->inline_size == NDKPERF_INLINE_DEFAULT ? 0 : o->inline_size;
    w->all_max = o->all ? o->all_max : 0;
    snprintf(w->tool_version, sizeof w->tool_version, "%s", NDKPERF_VERSION);
}

size_t wire_encode(const struct wire_opts *w, uint8_t *b, size_t cap)
{
    if (cap < WIRE_LEN)
        return 0;
    memset(b, 0, WIRE_LEN);
    put32(b + 0, w->magic);
    put16(b + 4, w->version);
    put16(b + 6, WIRE_LEN);
    b[8] = w->test;
    b[9] = w->flags;
    put16(b + 10, w->qp_index);
    put32(b + 12, w->size);
    put32(b + 16, w->iters);
    put32(b + 20, w->duration);
    put32(b + 24, w->num_qps);
    put32(b + 28, w->tx_depth);
    put32(b + 32, w->rx_depth);
    put32(b + 36, w->post_list);
    put32(b + 40, w->inline_size);
    put32(b + 44, w->all_max);
    put64(b + 48, w->land_addr);
    put64(b + 56, w->land_len);
    put32(b + 64, w->land_token);
    /* 68..79 reserved */
    memcpy(b + 80, w->tool_version, 16);
    return WIRE_LEN;
}

int wire_decode(const uint8_t *b, size_t len, struct wire_opts *w, const char **why)
{
    memset(w, 0, sizeof *w);
    if (len < 8 || get32(b) != WIRE_MAGIC) {
        *why = "the peer is not ndkperf (no ndkperf option block in its private data)";
        return -1;
    }
    w->magic = WIRE_MAGIC;
    w->version = get16(b + 4);
    w->length = get16(b + 6);
    if (w->version != WIRE_VERSION) {
        static char msg[96];
        snprintf(msg, sizeof msg, "the peer speaks ndkperf option block version %u, we speak %u",
                 w->version, WIRE_VERSION);
        *why = msg;
        return -1;
    }
    if (len < WIRE_LEN || w->length < WIRE_LEN) {
        *why = "the peer's option block is truncated";
        return -1;
    }
    w->test = b[8];
    w->flags = b[9];
    w->qp_index = get16(b + 10);
    w->size = get32(b + 12);
    w->iters = get32(b + 16);
    w->duration = get32(b + 20);
    w->num_qps = get32(b + 24);
    w->tx_depth = get32(b + 28);
    w->rx_depth = get32(b + 32);
    w->post_list = get32(b + 36);
    w->inline_size = get32(b + 40);
    w->all_max = get32(b + 44);
    w->land_addr = get64(b + 48);
    w->land_len = get64(b + 56);
    w->land_token = get32(b + 64);
    memcpy(w->tool_version, b + 80, 16);
    w->tool_version[15] = 0;
    return 0;
}

static void add(char *msg, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *msg, size_t cap, size_t *used, const char *fmt, ...)
{
    if (*used >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n;
}

static const char *onoff(unsigned v)
{
    return v ? "on" : "off";
}

bool wire_agree(const struct wire_opts *s, const struct wire_opts *c, char *msg, size_t cap)
{
    size_t used = 0;
    msg[0] = 0;
#define SEP (used ? ", " : "")
    if (s->test != c->test)
        add(msg, cap, &used, "%stest %s (server) vs %s (client)", SEP,
            test_name((enum test_kind)s->test), test_name((enum test_kind)c->test));
    if ((s->flags ^ c->flags) & WF_ALL)
        add(msg, cap, &used, "%s-a %s (server) vs %s (client)", SEP, onoff(s->flags & WF_ALL),
            onoff(c->flags & WF_ALL));
    else if (s->size != c->size)
        add(msg, cap, &used, "%s-s %u (server) vs %u (client)", SEP, s->size, c->size);
    if (s->all_max != c->all_max && (s->flags & c->flags & WF_ALL))
        add(msg, cap, &used, "%s--max-size %u (server) vs %u (client)", SEP, s->all_max,
            c->all_max);
    if (s->duration != c->duration)
        add(msg, cap, &used, "%s-D %u (server) vs %u (client)", SEP, s->duration, c->duration);
    else if (s->iters != c->iters)
        add(msg, cap, &used, "%s-n %u (server) vs %u (client)", SEP, s->iters, c->iters);
    if (s->num_qps != c->num_qps)
        add(msg, cap, &used, "%s-q %u (server) vs %u (client)", SEP, s->num_qps, c->num_qps);
    if (s->tx_depth != c->tx_depth)
        add(msg, cap, &used, "%s-t %u (server) vs %u (client)", SEP, s->tx_depth, c->tx_depth);
    if (s->rx_depth != c->rx_depth)
        add(msg, cap, &used, "%s-r %u (server) vs %u (client)", SEP, s->rx_depth, c->rx_depth);
    if ((s->flags ^ c->flags) & WF_BIDIR)
        add(msg, cap, &used, "%s-b %s (server) vs %s (client)", SEP, onoff(s->flags & WF_BIDIR),
            onoff(c->flags & WF_BIDIR));
    if ((s->flags ^ c->flags) & WF_VERIFY)
        add(msg, cap, &used, "%s-c %s (server) vs %s (client)", SEP, onoff(s->flags & WF_VERIFY),
            onoff(c->flags & WF_VERIFY));
#undef SEP
    return used == 0;
}
