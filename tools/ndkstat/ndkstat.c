/* ndkstat: counters and live objects of running softndk processes, read from the control
 * endpoint each adapter opens with SOFTNDK_STAT=on (docs/observability.md).
 *
 *   ndkstat [-s SOCKET] [-p PID] [--json | --prometheus] [-i SECONDS [-c COUNT]]
 *
 * Without -s it reads every endpoint of this user (the *.sock files in $XDG_RUNTIME_DIR/softndk
 * and /tmp/softndk-UID), -p PID keeps one process's. With -i it repeats every SECONDS and
 * adds rates (bytes/s, frames/s, as perfmon's "RDMA Activity"). Exit status: 0, 1 (no endpoint,
 * refused, unreadable), 2 (bad command line). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_EP     64
#define MAX_FIELDS 32

enum fmt { FMT_TABLE, FMT_JSON, FMT_PROM };

struct kv {
    char *k, *v;
};

struct rec {
    char *type;
    int n;
    struct kv f[MAX_FIELDS];
    char *pos[4]; /* positional values (counter NAME VALUE, term DIR CODE COUNT) */
    int npos;
};

struct snap {
    char path[256];
    char *text; /* owns the strings below */
    struct rec *r;
    int nr;
    double uptime;
    bool ok;
};

/* Copy src into dst[len] if it fits (paths too long to be sockets are skipped). */
static bool copy_str(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

static const char *get(const struct rec *r, const char *k)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->f[i].k, k) == 0)
            return r->f[i].v;
    return "";
}

static const struct rec *find_type(const struct snap *s, const char *type)
{
    for (int i = 0; i < s->nr; i++)
        if (strcmp(s->r[i].type, type) == 0)
            return &s->r[i];
    return NULL;
}

static bool counter(const struct snap *s, const char *name, unsigned long long *v)
{
    for (int i = 0; i < s->nr; i++)
        if (strcmp(s->r[i].type, "counter") == 0 && s->r[i].npos == 2 &&
            strcmp(s->r[i].pos[0], name) == 0) {
            *v = strtoull(s->r[i].pos[1], NULL, 10);
            return true;
        }
    return false;
}

static void parse(struct snap *s)
{
    int cap = 64;
    s->r = calloc((size_t)cap, sizeof *s->r);
    s->nr = 0;
    char *save = NULL;
    for (char *line = strtok_r(s->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (s->nr == cap) {
            cap *= 2;
            s->r = realloc(s->r, (size_t)cap * sizeof *s->r);
        }
        struct rec *r = &s->r[s->nr];
        memset(r, 0, sizeof *r);
        char *save2 = NULL;
        r->type = strtok_r(line, "\t", &save2);
        if (!r->type)
            continue;
        for (char *t = strtok_r(NULL, "\t", &save2); t; t = strtok_r(NULL, "\t", &save2)) {
            char *eq = strchr(t, '=');
            if (eq && r->n < MAX_FIELDS && strcmp(r->type, "counter") != 0 &&
                strcmp(r->type, "term") != 0) {
                *eq = '\0';
                r->f[r->n++] = (struct kv){t, eq + 1};
            } else if (r->npos < 4) {
                r->pos[r->npos++] = t;
            }
        }
        s->nr++;
        if (strcmp(r->type, "softndk") == 0)
            s->uptime = strtod(get(r, "uptime"), NULL);
    }
}

/* Connect and read until end of stream. */
static bool fetch(struct snap *s, bool verbose)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    socklen_t len;
    if (s->path[0] == '@') {
        size_t n = strlen(s->path);
        if (n > sizeof un.sun_path)
            return false;
        memcpy(un.sun_path + 1, s->path + 1, n - 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        if (!copy_str(un.sun_path, sizeof un.sun_path, s->path))
            return false;
        len = sizeof un;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&un, len) != 0) {
        int e = errno;
        /* a stale socket of a process that exited is not worth a line, unless asked for */
        if (verbose || (e != ECONNREFUSED && e != ENOENT))
            fprintf(stderr, "ndkstat: %s: %s\n", s->path, strerror(e));
        close(fd);
        errno = e;
        return false;
    }
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (got + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t n = read(fd, buf + got, cap - got - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    if (strncmp(buf, "error\t", 6) == 0) {
        char *nl = strchr(buf, '\n');
        if (nl)
            *nl = '\0';
        fprintf(stderr, "ndkstat: %s: %s\n", s->path, buf + 6);
        free(buf);
        return false;
    }
    if (got < 4 || strstr(buf, "\nend\n") == NULL) {
        fprintf(stderr, "ndkstat: %s: incomplete snapshot\n", s->path);
        free(buf);
        return false;
    }
    s->text = buf;
    parse(s);
    s->ok = true;
    return true;
}

static void snap_free(struct snap *s)
{
    free(s->text);
    free(s->r);
    s->text = NULL;
    s->r = NULL;
    s->nr = 0;
    s->ok = false;
}

/* ------------------------------------------------------------------ discovery */

static int discover(const char *pid, char paths[][256], int max)
{
    char dirs[2][200];
    int nd = 0;
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && *x)
        snprintf(dirs[nd++], sizeof dirs[0], "%s/softndk", x);
    snprintf(dirs[nd++], sizeof dirs[0], "/tmp/softndk-%u", (unsigned)geteuid());
    int n = 0;
    for (int d = 0; d < nd; d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)) && n < max) {
            size_t l = strlen(e->d_name);
            if (l < 6 || strcmp(e->d_name + l - 5, ".sock") != 0)
                continue;
            if (pid) {
                size_t pl = strlen(pid);
                if (strncmp(e->d_name, pid, pl) != 0 || e->d_name[pl] != '.')
                    continue;
            }
            char p[512];
            snprintf(p, sizeof p, "%s/%s", dirs[d], e->d_name);
            if (copy_str(paths[n], 256, p))
                n++;
        }
        closedir(dir);
    }
    return n;
}

/* ------------------------------------------------------------------ output */

static const char *const rate_names[4] = {"RDMAInOctets", "RDMAOutOctets", "RDMAInFrames",
                                          "RDMAOutFrames"};

static bool rate(const struct snap *cur, const struct snap *prev, const char *name, double *out)
{
    unsigned long long a, b;
    if (!prev || !prev->ok || !counter(cur, name, &a) || !counter(prev, name, &b))
        return false;
    double dt = cur->uptime - prev->uptime;
    if (dt <= 0)
        return false;
    *out = (double)(a >= b ? a - b : 0) / dt;
    return true;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static bool is_number(const char *v)
{
    if (!*v)
        return false;
    char *end;
    strtod(v, &end);
    return *end == '\0' && strchr(v, '/') == NULL;
}

static void json_rec_fields(const struct rec *r)
{
    for (int i = 0; i < r->n; i++) {
        if (i)
            putchar(',');
        json_str(r->f[i].k);
        putchar(':');
        if (is_number(r->f[i].v) && strcmp(r->f[i].k, "id") != 0)
            fputs(r->f[i].v, stdout);
        else
            json_str(r->f[i].v);
    }
}

static void out_json(struct snap *s, int ns, struct snap *prev)
{
    printf("{\"time\":%lld,\"adapters\":[", (long long)time(NULL));
    bool first = true;
    for (int i = 0; i < ns; i++) {
        if (!s[i].ok)
            continue;
        if (!first)
            putchar(',');
        first = false;
        const struct rec *h = find_type(&s[i], "softndk");
        printf("{\"socket\":");
        json_str(s[i].path);
        if (h) {
            putchar(',');
            json_rec_fields(h);
        }
        printf(",\"counters\":{");
        bool f2 = true;
        for (int j = 0; j < s[i].nr; j++) {
            const struct rec *r = &s[i].r[j];
            if (strcmp(r->type, "counter") || r->npos != 2)
                continue;
            printf("%s", f2 ? "" : ",");
            f2 = false;
            json_str(r->pos[0]);
            printf(":%s", r->pos[1]);
        }
        printf("}");
        if (prev) {
            printf(",\"rates\":{");
            bool f3 = true;
            for (int k = 0; k < 4; k++) {
                double v;
                if (rate(&s[i], &prev[i], rate_names[k], &v)) {
                    printf("%s\"%sPerSec\":%.1f", f3 ? "" : ",", rate_names[k], v);
                    f3 = false;
                }
            }
            printf("}");
        }
        printf(",\"terminates\":[");
        f2 = true;
        for (int j = 0; j < s[i].nr; j++) {
            const struct rec *r = &s[i].r[j];
            if (strcmp(r->type, "term") || r->npos != 3)
                continue;
            printf("%s{\"direction\":\"%s\",\"code\":\"%s\",\"count\":%s}", f2 ? "" : ",",
                   r->pos[0], r->pos[1], r->pos[2]);
            f2 = false;
        }
        printf("],\"objects\":{");
        const struct rec *o = find_type(&s[i], "objects");
        if (o)
            json_rec_fields(o);
        printf("}");
        const char *arrays[2][2] = {{"listener", "listeners"}, {"conn", "connections"}};
        for (int a = 0; a < 2; a++) {
            printf(",\"%s\":[", arrays[a][1]);
            f2 = true;
            for (int j = 0; j < s[i].nr; j++) {
                const struct rec *r = &s[i].r[j];
                if (strcmp(r->type, arrays[a][0]))
                    continue;
                printf("%s{", f2 ? "" : ",");
                f2 = false;
                json_rec_fields(r);
                putchar('}');
            }
            printf("]");
        }
        printf("}");
    }
    printf("]}\n");
}

/* RDMAInOctets -> rdma_in_octets */
static void snake(const char *in, char *out, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; in[i] && n + 2 < len; i++) {
        char ch = in[i];
        if (ch == '.') {
            out[n++] = '_';
            continue;
        }
        bool up = ch >= 'A' && ch <= 'Z';
        bool prev_lower = i > 0 && ((in[i - 1] >= 'a' && in[i - 1] <= 'z'));
        bool next_lower = in[i + 1] >= 'a' && in[i + 1] <= 'z';
        bool prev_up = i > 0 && in[i - 1] >= 'A' && in[i - 1] <= 'Z';
        if (up && n > 0 && out[n - 1] != '_' && (prev_lower || (prev_up && next_lower)))
            out[n++] = '_';
        out[n++] = up ? (char)(ch - 'A' + 'a') : ch;
    }
    out[n] = '\0';
}

static void out_prom(struct snap *s, int ns)
{
    /* HELP/TYPE once per metric: gather names from the first good snapshot */
    int ref = -1;
    for (int i = 0; i < ns && ref < 0; i++)
        if (s[i].ok)
            ref = i;
    if (ref < 0)
        return;
    for (int j = 0; j < s[ref].nr; j++) {
        const struct rec *r = &s[ref].r[j];
        if (strcmp(r->type, "counter") || r->npos != 2)
            continue;
        char name[96];
        snake(r->pos[0], name, sizeof name);
        bool gauge = strcmp(r->pos[0], "ActiveConnection") == 0 ||
                     strcmp(r->pos[0], "HandshakesPending") == 0 ||
                     strcmp(r->pos[0], "IncomingUnanswered") == 0;
        printf("# HELP softndk_%s%s softndk counter %s\n", name, gauge ? "" : "_total", r->pos[0]);
        printf("# TYPE softndk_%s%s %s\n", name, gauge ? "" : "_total", gauge ? "gauge" : "counter");
        for (int i = 0; i < ns; i++) {
            unsigned long long v;
            const struct rec *h = find_type(&s[i], "softndk");
            if (!s[i].ok || !h || !counter(&s[i], r->pos[0], &v))
                continue;
            printf("softndk_%s%s{pid=\"%s\",adapter=\"%s\"} %llu\n", name, gauge ? "" : "_total",
                   get(h, "pid"), get(h, "adapter"), v);
        }
    }
    static const char *const conn_metrics[][2] = {
        {"out_octets", "bytes of FPDUs sent on the connection"},
        {"in_octets", "bytes of FPDUs received on the connection"},
        {"out_frames", "FPDUs sent on the connection"},
        {"in_frames", "FPDUs received on the connection"}};
    for (size_t m = 0; m < sizeof conn_metrics / sizeof conn_metrics[0]; m++) {
        printf("# HELP softndk_connection_%s_total %s\n", conn_metrics[m][0], conn_metrics[m][1]);
        printf("# TYPE softndk_connection_%s_total counter\n", conn_metrics[m][0]);
        for (int i = 0; i < ns; i++) {
            const struct rec *h = find_type(&s[i], "softndk");
            if (!s[i].ok || !h)
                continue;
            for (int j = 0; j < s[i].nr; j++) {
                const struct rec *r = &s[i].r[j];
                if (strcmp(r->type, "conn"))
                    continue;
                printf("softndk_connection_%s_total{pid=\"%s\",adapter=\"%s\",conn=\"%s\","
                       "role=\"%s\",local=\"%s\",peer=\"%s\",state=\"%s\"} %s\n",
                       conn_metrics[m][0], get(h, "pid"), get(h, "adapter"), get(r, "id"),
                       get(r, "role"), get(r, "local"), get(r, "peer"), get(r, "state"),
                       get(r, conn_metrics[m][0]));
            }
        }
    }
}

static void out_table(struct snap *s, int ns, struct snap *prev)
{
    for (int i = 0; i < ns; i++) {
        if (!s[i].ok)
            continue;
        const struct rec *h = find_type(&s[i], "softndk");
        if (h)
            printf("adapter %s  pid %s  if %s  NDK %s  MPA rev %s  CRC %s  threads %s  up %.1fs"
                   "  [%s]\n",
                   get(h, "adapter"), get(h, "pid"), get(h, "if"), get(h, "ndk"),
                   get(h, "mpa_rev"), get(h, "crc"), get(h, "threads"), s[i].uptime, s[i].path);
        printf("  %-28s %20s%s\n", "COUNTER", "VALUE", prev ? "          RATE/s" : "");
        for (int j = 0; j < s[i].nr; j++) {
            const struct rec *r = &s[i].r[j];
            if (strcmp(r->type, "counter") || r->npos != 2)
                continue;
            printf("  %-28s %20s", r->pos[0], r->pos[1]);
            double v;
            if (prev && rate(&s[i], &prev[i], r->pos[0], &v))
                printf(" %15.1f", v);
            putchar('\n');
        }
        for (int j = 0; j < s[i].nr; j++) {
            const struct rec *r = &s[i].r[j];
            if (!strcmp(r->type, "term") && r->npos == 3)
                printf("  Terminate %-8s %-10s %12s\n", r->pos[0], r->pos[1], r->pos[2]);
        }
        const struct rec *o = find_type(&s[i], "objects");
        if (o) {
            printf("  objects:");
            for (int k = 0; k < o->n; k++)
                printf(" %s=%s", o->f[k].k, o->f[k].v);
            putchar('\n');
        }
        for (int j = 0; j < s[i].nr; j++) {
            const struct rec *r = &s[i].r[j];
            if (!strcmp(r->type, "listener"))
                printf("  listener %s on %s\n", get(r, "id"), get(r, "addr"));
        }
        bool hdr = false;
        for (int j = 0; j < s[i].nr; j++) {
            const struct rec *r = &s[i].r[j];
            if (strcmp(r->type, "conn"))
                continue;
            if (!hdr) {
                printf("  %4s %-7s %-13s %-22s %-22s %4s %4s %-11s %-11s %12s %12s %9s %9s %-5s\n",
                       "ID", "ROLE", "STATE", "LOCAL", "PEER", "IRD", "ORD", "SQ", "RQ",
                       "OUT_BYTES", "IN_BYTES", "OUT_FPDU", "IN_FPDU", "XPORT");
                hdr = true;
            }
            printf("  %4s %-7s %-13s %-22s %-22s %4s %4s %-11s %-11s %12s %12s %9s %9s %-5s\n",
                   get(r, "id"), get(r, "role"), get(r, "state"), get(r, "local"), get(r, "peer"),
                   get(r, "ird"), get(r, "ord"), get(r, "sq"), get(r, "rq"), get(r, "out_octets"),
                   get(r, "in_octets"), get(r, "out_frames"), get(r, "in_frames"),
                   get(r, "transport"));
        }
        if (!hdr)
            printf("  (no connections)\n");
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ndkstat [-s SOCKET] [-p PID] [--json | --prometheus] [-i SECONDS [-c COUNT]]\n"
            "  -s, --socket PATH   read this endpoint (a path, or @name for an abstract one)\n"
            "  -p, --pid PID       only the endpoints of process PID\n"
            "  -j, --json          JSON (one document per line with -i)\n"
            "  -P, --prometheus    Prometheus text exposition format\n"
            "  -i, --interval S    repeat every S seconds, with rates (bytes/s, frames/s)\n"
            "  -c, --count N       with -i: stop after N reports\n"
            "Endpoints are opened by adapters run with SOFTNDK_STAT=on (or a path).\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"socket", required_argument, NULL, 's'},
                                       {"pid", required_argument, NULL, 'p'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"prometheus", no_argument, NULL, 'P'},
                                       {"interval", required_argument, NULL, 'i'},
                                       {"count", required_argument, NULL, 'c'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    const char *sock = NULL, *pid = NULL;
    enum fmt fmt = FMT_TABLE;
    double interval = 0;
    long count = -1;
    int ch;
    while ((ch = getopt_long(argc, argv, "s:p:jPi:c:h", lo, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 's':
            sock = optarg;
            break;
        case 'p':
            pid = optarg;
            break;
        case 'j':
            fmt = FMT_JSON;
            break;
        case 'P':
            fmt = FMT_PROM;
            break;
        case 'i':
            interval = strtod(optarg, &end);
            if (*end || interval <= 0) {
                fprintf(stderr, "ndkstat: -i %s: not a positive number of seconds\n", optarg);
                return 2;
            }
            break;
        case 'c':
            count = strtol(optarg, &end, 10);
            if (*end || count <= 0) {
                fprintf(stderr, "ndkstat: -c %s: not a positive count\n", optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (interval == 0)
        count = 1;
    static char paths[MAX_EP][256];
    int np;
    if (sock) {
        if (!copy_str(paths[0], sizeof paths[0], sock)) {
            fprintf(stderr, "ndkstat: -s: path too long\n");
            return 2;
        }
        np = 1;
    } else {
        np = discover(pid, paths, MAX_EP);
        if (np == 0) {
            fprintf(stderr, "ndkstat: no softndk endpoint found%s%s (run the process with "
                            "SOFTNDK_STAT=on)\n",
                    pid ? " for pid " : "", pid ? pid : "");
            return 1;
        }
    }
    static struct snap cur[MAX_EP], prev[MAX_EP];
    bool have_prev = false;
    for (long it = 0; count < 0 || it < count; it++) {
        if (it > 0) {
            struct timespec ts = {(time_t)interval,
                                  (long)((interval - (double)(time_t)interval) * 1e9)};
            nanosleep(&ts, NULL);
        }
        int good = 0;
        for (int i = 0; i < np; i++) {
            copy_str(cur[i].path, sizeof cur[i].path, paths[i]);
            if (fetch(&cur[i], sock != NULL))
                good++; /* a failure is reported by fetch, or is the stale socket of a process
                           that exited (connection refused) */
        }
        if (good == 0) {
            fprintf(stderr, "ndkstat: no endpoint answered\n");
            return 1;
        }
        struct snap *pv = have_prev ? prev : NULL;
        if (fmt == FMT_JSON)
            out_json(cur, np, pv);
        else if (fmt == FMT_PROM)
            out_prom(cur, np);
        else {
            if (it > 0)
                putchar('\n');
            out_table(cur, np, pv);
        }
        fflush(stdout);
        for (int i = 0; i < np; i++) {
            snap_free(&prev[i]);
            prev[i] = cur[i];
            memset(&cur[i], 0, sizeof cur[i]);
        }
        have_prev = true;
    }
    for (int i = 0; i < np; i++)
        snap_free(&prev[i]);
    return 0;
}
