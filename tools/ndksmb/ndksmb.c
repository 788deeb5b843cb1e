/* ndksmb: an SMB client over SMB Direct on softndk (or over TCP, for comparison).
 *
 *   ndksmb [options] //HOST/SHARE put LOCAL REMOTE | get REMOTE LOCAL | ls [DIR]
 *   ndksmb serve DIR [options]            (serve.c)
 *
 * It prints what moved, how fast, and what the server did to our memory by RDMA (softndk's
 * counters: RDMA Writes placed for SMB2 READ, RDMA Read Requests served for SMB2 WRITE, tokens
 * ended by the server's Send with Invalidate); --json prints one object instead. Any failure
 * exits 1 with one "ndksmb: error: ..." line naming the step and the cause. docs/smbdirect.md. */
#include "ndksmb.h"

#include <smb/direct_tcp.h>
#include <smb/smb2_client.h>
#include <smb/smbd.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    const char *user, *password, *domain;
    unsigned port;
    const char *transport; /* "smbd" or "tcp" */
    enum smb2_channel channel;
    const char *channel_name;
    uint32_t io_size;
    unsigned depth;
    uint16_t dialect;
    int sign;
    int json;
    unsigned timeout_s;
    uint16_t credits;
    uint32_t max_rw;
} opt = {.user = "",
         .password = "",
         .domain = "",
         .transport = "smbd",
         .channel = SMB2_IO_RDMA_INVALIDATE,
         .channel_name = "rdma-inv",
         .depth = 4,
         .timeout_s = 600};

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ndksmb: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "ndksmb: error: timed out (--timeout)\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    _exit(1);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ndksmb [options] //HOST/SHARE put LOCAL REMOTE | get REMOTE LOCAL | ls [DIR]\n"
            "       ndksmb serve DIR [--port N] [-U USER%%PASS] [--share NAME] (ndksmb serve -h)\n"
            "  -U, --user USER[%%PASS]   user and password (NTLMv2)\n"
            "  -W, --domain DOMAIN\n"
            "  -p, --port N              SMB Direct 5445 (iWARP), TCP 445\n"
            "  -t, --transport smbd|tcp  SMB Direct over softndk (default) or SMB2 over TCP\n"
            "  -c, --channel rdma-inv|rdma|inline\n"
            "                            READ/WRITE data by RDMA with the server's Send with\n"
            "                            Invalidate (default), RDMA with local invalidation, or\n"
            "                            inside the messages; below 4096 bytes always inline\n"
            "  -s, --io-size N           bytes per READ/WRITE (default: the negotiated maximum)\n"
            "  -d, --depth N             READs/WRITEs in flight (default 4)\n"
            "      --dialect 3.0.2|3.1.1 the highest dialect offered (default 3.1.1)\n"
            "      --sign                sign every message even if the server does not ask\n"
            "      --credits N           SMB Direct receive credits (default 255)\n"
            "      --max-rw N            largest RDMA region offered (default 8 MiB)\n"
            "      --json                one JSON object on stdout\n"
            "      --timeout S           give up after S seconds (default 600)\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct listing {
    unsigned n;
    char *json; /* the entries as a JSON array's members, for --json */
    size_t len, cap;
};

static void json_append(struct listing *l, const char *s, size_t n)
{
    if (l->len + n + 1 > l->cap) {
        size_t cap = (l->cap ? l->cap * 2 : 256) + n;
        char *j = realloc(l->json, cap);
        if (!j)
            die("out of memory");
        l->json = j;
        l->cap = cap;
    }
    memcpy(l->json + l->len, s, n);
    l->len += n;
    l->json[l->len] = 0;
}

static int print_entry(void *ctx, const char *name, uint64_t size, int is_dir)
{
    struct listing *l = ctx;
    if (!opt.json) {
        printf("%c %12llu %s\n", is_dir ? 'd' : '-', (unsigned long long)size, name);
        l->n++;
        return 0;
    }
    char head[64];
    int n = snprintf(head, sizeof head, "%s{\"size\":%llu,\"dir\":%s,\"name\":\"", l->n ? "," : "",
                     (unsigned long long)size, is_dir ? "true" : "false");
    json_append(l, head, (size_t)n);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        char e[8];
        if (*p == '"' || *p == '\\')
            n = snprintf(e, sizeof e, "\\%c", *p);
        else if (*p < 0x20)
            n = snprintf(e, sizeof e, "\\u%04x", *p);
        else
            n = snprintf(e, sizeof e, "%c", *p);
        json_append(l, e, (size_t)n);
    }
    json_append(l, "\"}", 2);
    l->n++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return ndksmb_serve(argc - 1, argv + 1);
    enum { O_DIALECT = 256, O_SIGN, O_JSON, O_TIMEOUT, O_CREDITS, O_MAXRW };
    static const struct option lo[] = {{"user", required_argument, 0, 'U'},
                                       {"domain", required_argument, 0, 'W'},
                                       {"port", required_argument, 0, 'p'},
                                       {"transport", required_argument, 0, 't'},
                                       {"channel", required_argument, 0, 'c'},
                                       {"io-size", required_argument, 0, 's'},
                                       {"depth", required_argument, 0, 'd'},
                                       {"dialect", required_argument, 0, O_DIALECT},
                                       {"sign", no_argument, 0, O_SIGN},
                                       {"json", no_argument, 0, O_JSON},
                                       {"timeout", required_argument, 0, O_TIMEOUT},
                                       {"credits", required_argument, 0, O_CREDITS},
                                       {"max-rw", required_argument, 0, O_MAXRW},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "U:W:p:t:c:s:d:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'U':
            ndksmb_split_user(optarg, &opt.user, &opt.password);
            break;
        case 'W':
            opt.domain = optarg;
            break;
        case 'p':
            opt.port = (unsigned)ndksmb_parse_num(optarg, "--port");
            break;
        case 't':
            if (strcmp(optarg, "smbd") != 0 && strcmp(optarg, "tcp") != 0) {
                fprintf(stderr, "ndksmb: --transport: smbd or tcp\n");
                return 2;
            }
            opt.transport = optarg;
            break;
        case 'c':
            if (strcmp(optarg, "rdma-inv") == 0)
                opt.channel = SMB2_IO_RDMA_INVALIDATE;
            else if (strcmp(optarg, "rdma") == 0)
                opt.channel = SMB2_IO_RDMA;
            else if (strcmp(optarg, "inline") == 0)
                opt.channel = SMB2_IO_INLINE;
            else {
                fprintf(stderr, "ndksmb: --channel: rdma-inv, rdma or inline\n");
                return 2;
            }
            opt.channel_name = optarg;
            break;
        case 's':
            opt.io_size = (uint32_t)ndksmb_parse_num(optarg, "--io-size");
            break;
        case 'd':
            opt.depth = (unsigned)ndksmb_parse_num(optarg, "--depth");
            if (opt.depth == 0) {
                fprintf(stderr, "ndksmb: --depth: at least 1\n");
                return 2;
            }
            break;
        case O_DIALECT:
            if (strcmp(optarg, "3.0.2") == 0)
                opt.dialect = 0x0302;
            else if (strcmp(optarg, "3.1.1") == 0)
                opt.dialect = 0x0311;
            else {
                fprintf(stderr, "ndksmb: --dialect: 3.0.2 or 3.1.1\n");
                return 2;
            }
            break;
        case O_SIGN:
            opt.sign = 1;
            break;
        case O_JSON:
            opt.json = 1;
            break;
        case O_TIMEOUT:
            opt.timeout_s = (unsigned)ndksmb_parse_num(optarg, "--timeout");
            break;
        case O_CREDITS:
            opt.credits = (uint16_t)ndksmb_parse_num(optarg, "--credits");
            break;
        case O_MAXRW:
            opt.max_rw = (uint32_t)ndksmb_parse_num(optarg, "--max-rw");
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind < 2) {
        usage(stderr);
        return 2;
    }
    const char *unc = argv[optind], *cmd = argv[optind + 1];
    char **args = argv + optind + 2;
    int nargs = argc - optind - 2;
    if ((strcmp(cmd, "put") == 0 || strcmp(cmd, "get") == 0) ? nargs != 2
        : strcmp(cmd, "ls") == 0                             ? nargs > 1
                                                             : 1) {
        usage(stderr);
        return 2;
    }
    /* //HOST/SHARE (or \\HOST\SHARE) */
    char host[256], share[256];
    const char *p = unc;
    if (!((p[0] == '/' && p[1] == '/') || (p[0] == '\\' && p[1] == '\\'))) {
        fprintf(stderr, "ndksmb: %s: not //HOST/SHARE\n", unc);
        return 2;
    }
    p += 2;
    size_t hl = strcspn(p, "/\\");
    if (hl == 0 || hl >= sizeof host || !p[hl] || !p[hl + 1] ||
        strlen(p + hl + 1) >= sizeof share) {
        fprintf(stderr, "ndksmb: %s: not //HOST/SHARE\n", unc);
        return 2;
    }
    memcpy(host, p, hl);
    host[hl] = 0;
    snprintf(share, sizeof share, "%s", p + hl + 1);
    share[strcspn(share, "/\\")] = 0;
    int tcp = strcmp(opt.transport, "tcp") == 0;
    if (!opt.port)
        opt.port = tcp ? 445 : 5445;
    if (tcp && opt.channel != SMB2_IO_INLINE) {
        opt.channel = SMB2_IO_INLINE; /* TCP has no RDMA: inline is the only channel */
        opt.channel_name = "inline";
    }
    signal(SIGALRM, on_alarm);
    alarm(opt.timeout_s);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%u", opt.port);
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0)
        die("resolve %s: %s", host, gai_strerror(gai));

    char err[512] = "";
    NDK_ADAPTER *adapter = NULL;
    smb_transport *t = NULL;
    SOFTNDK_COUNTERS before = {.Size = sizeof before}, after = {.Size = sizeof after};
    if (tcp) {
        if (smb_direct_tcp_connect(host, (uint16_t)opt.port, &t, err, sizeof err) != 0)
            die("connect %s:%u: %s", host, opt.port, err);
    } else {
        NDK_VERSION v = {2, 0};
        NTSTATUS st = SoftNdkOpenAdapter(0, v, NULL, &adapter);
        if (st != STATUS_SUCCESS)
            die("SoftNdkOpenAdapter: %s", SoftNdkStatusName(st));
        smbd_params sp = {.receive_credit_max = opt.credits, .max_read_write_size = opt.max_rw};
        int rc = smbd_connect(adapter, ai->ai_addr, ai->ai_addrlen, &sp, &t, err, sizeof err);
        if (rc != 0)
            die("SMB Direct connect to %s:%u: %s", host, opt.port, err);
        SoftNdkQueryCounters(adapter, &before);
    }
    freeaddrinfo(ai);

    smb2_client_options co = {.user = opt.user,
                              .password = opt.password,
                              .domain = opt.domain,
                              .channel = opt.channel,
                              .io_size = opt.io_size,
                              .depth = opt.depth,
                              .max_dialect = opt.dialect,
                              .require_signing = opt.sign};
    smb2_client *c = NULL;
    if (smb2_client_connect(t, &co, host, share, &c, err, sizeof err) != 0)
        die("SMB2 session to //%s/%s: %s", host, share, err);

    smb2_io_stats io = {0};
    struct listing l = {0};
    double t0 = now_s();
    int rc = 0;
    const char *what = cmd;
    if (strcmp(cmd, "put") == 0) {
        int fd = open(args[0], O_RDONLY);
        if (fd < 0)
            die("put: open %s: %s", args[0], strerror(errno));
        rc = smb2_put(c, fd, args[1], &io);
        close(fd);
    } else if (strcmp(cmd, "get") == 0) {
        int fd = open(args[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            die("get: open %s: %s", args[1], strerror(errno));
        rc = smb2_get(c, args[0], fd, &io);
        if (close(fd) != 0 && rc == 0)
            die("get: close %s: %s", args[1], strerror(errno));
    } else {
        rc = smb2_list(c, nargs ? args[0] : "", print_entry, &l);
    }
    double secs = now_s() - t0;
    if (rc != 0)
        die("%s: %s", what, smb2_client_error(c));
    uint16_t dialect = smb2_client_dialect(c);
    smb2_client_disconnect(c);
    smb_transport_stats ts;
    t->ops->get_stats(t, &ts);
    if (adapter)
        SoftNdkQueryCounters(adapter, &after);
    t->ops->destroy(t);
    if (adapter)
        SoftNdkCloseAdapter(adapter);
    uint64_t pw = after.InboundWrites - before.InboundWrites;
    uint64_t pr = after.InboundReadRequests - before.InboundReadRequests;
    uint64_t ri = after.RemoteInvalidations - before.RemoteInvalidations;
    double mbps = secs > 0 ? (double)io.bytes / secs / 1e6 : 0;
    char dial[8];
    snprintf(dial, sizeof dial, "%x.%x.%x", dialect >> 8, (dialect >> 4) & 0xf, dialect & 0xf);
    if (opt.json) {
        printf("{\"op\":\"%s\",\"bytes\":%llu,\"seconds\":%.6f,\"mbps\":%.2f,\"transport\":\"%s\","
               "\"channel\":\"%s\",\"dialect\":\"%s\",\"requests\":%llu,\"rdma_requests\":%llu,"
               "\"inline_requests\":%llu,\"peer_rdma_writes\":%llu,\"peer_rdma_reads\":%llu,"
               "\"remote_invalidations\":%llu,\"local_invalidations\":%llu,\"entries\":%u,"
               "\"smbd_messages_sent\":%llu,\"smbd_messages_received\":%llu,\"list\":[%s]}\n",
               cmd, (unsigned long long)io.bytes, secs, mbps, tcp ? "tcp" : "smbdirect",
               opt.channel_name, dial, (unsigned long long)(io.requests_read + io.requests_write),
               (unsigned long long)io.rdma_requests, (unsigned long long)io.inline_requests,
               (unsigned long long)pw, (unsigned long long)pr, (unsigned long long)ri,
               (unsigned long long)ts.local_invalidations, l.n,
               (unsigned long long)ts.messages_sent, (unsigned long long)ts.messages_received,
               l.json ? l.json : "");
    } else if (strcmp(cmd, "ls") != 0) {
        printf("%s %llu bytes in %.3f s, %.1f MB/s (SMB %s over %s, channel %s)\n", cmd,
               (unsigned long long)io.bytes, secs, mbps, dial, tcp ? "TCP" : "SMB Direct",
               opt.channel_name);
        printf("  requests %llu (%llu by RDMA, %llu inline); the server's RDMA Writes %llu, RDMA "
               "Reads %llu; invalidations by the server %llu, local %llu\n",
               (unsigned long long)(io.requests_read + io.requests_write),
               (unsigned long long)io.rdma_requests, (unsigned long long)io.inline_requests,
               (unsigned long long)pw, (unsigned long long)pr, (unsigned long long)ri,
               (unsigned long long)ts.local_invalidations);
    }
    free(l.json);
    return 0;
}
