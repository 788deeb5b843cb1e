/* ndkperf output: the header block, perftest's tables and units, latency statistics, JSON.
 * Results go to stdout; diagnostics to stderr. */
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ndkperf.h"

#define RULE "---------------------------------------------------------------------------------------\n"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void lat_stats(uint64_t *v, size_t n, struct round_result *r)
{
    if (!n)
        return;
    qsort(v, n, sizeof *v, cmp_u64);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    double avg = sum / (double)n;
    for (size_t i = 0; i < n; i++)
        sq += ((double)v[i] - avg) * ((double)v[i] - avg);
    size_t i99 = (size_t)ceil(0.99 * (double)n), i999 = (size_t)ceil(0.999 * (double)n);
    r->t_min = (double)v[0] / 1e3;
    r->t_max = (double)v[n - 1] / 1e3;
    r->t_typical = (double)v[n / 2] / 1e3;
    r->t_avg = avg / 1e3;
    r->t_stdev = sqrt(sq / (double)n) / 1e3;
    r->t_p99 = (double)v[i99 ? i99 - 1 : 0] / 1e3;
    r->t_p999 = (double)v[i999 ? i999 - 1 : 0] / 1e3;
}

void lat_histogram(FILE *out, const uint64_t *sorted, size_t n)
{
    enum { BUCKETS = 100 }; /* µs; the last one counts everything from 99 µs up */
    size_t i = 0;
    for (unsigned b = 0; b < BUCKETS && i < n; b++) {
        size_t count = 0;
        while (i < n && (b == BUCKETS - 1 || sorted[i] < (uint64_t)(b + 1) * 1000)) {
            count++;
            i++;
        }
        if (count)
            fprintf(out, "hist %3u%s us %zu\n", b, b == BUCKETS - 1 ? "+" : "", count);
    }
}

/* ------------------------------------------------------------------------------------------ */

static void requested(char *buf, size_t cap, const char *var, unsigned opt, const char *def,
                      const char *const *names)
{
    const char *env = getenv(var);
    if (opt)
        snprintf(buf, cap, "%s (asked, option)", names ? names[opt] : (opt == 1 ? "1" : "2"));
    else if (env && *env)
        snprintf(buf, cap, "%s (asked, %s)", env, var);
    else
        snprintf(buf, cap, "%s (asked, default)", def);
}

static void governor(char *buf, size_t cap)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "r");
    if (!f || !fgets(buf, (int)cap, f)) {
        snprintf(buf, cap, "unknown (no cpufreq)");
    } else {
        buf[strcspn(buf, "\n")] = 0;
    }
    if (f)
        fclose(f);
}

static void placement(const struct side *s, const struct side *peer, char *buf, size_t cap)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    char a[48], b[48];
    snprintf(a, sizeof a, s->cpu >= 0 ? "CPU %d" : "unpinned", s->cpu);
    if (peer) {
        snprintf(b, sizeof b, peer->cpu >= 0 ? "CPU %d" : "unpinned", peer->cpu);
        snprintf(buf, cap, "%s %s, %s %s (%ld online); progress threads unpinned", s->role, a,
                 peer->role, b, online);
    } else {
        snprintf(buf, cap, "%s %s (%ld online); progress threads unpinned", s->role, a, online);
    }
}

static const char *onoff(bool v)
{
    return v ? "ON" : "OFF";
}

void note_transport(struct side *s)
{
    SOFTNDK_COUNTERS c = {.Size = sizeof c};
    s->transport = "tcp";
    if (SoftNdkQueryCounters(s->adapter, &c) == STATUS_SUCCESS &&
        c.Size >= offsetof(SOFTNDK_COUNTERS, SameHostConnections) + sizeof c.SameHostConnections &&
        c.SameHostConnections > 0)
        s->transport = "shm";
}

static const char *transport_of(const struct side *s)
{
    return s->transport ? s->transport : "tcp";
}

void print_header(const struct side *s, const struct side *peer)
{
    const struct opts *o = s->o;
    const struct qpctx *q = &s->qps[0];
    char mpa[64], crc[64], cpu[160], gov[64], la[80], ra[80], tmp[64];
    static const char *const crcn[] = {"", "on", "off"};
    requested(mpa, sizeof mpa, "SOFTNDK_MPA_REV", o->mpa_rev, "2", NULL);
    requested(crc, sizeof crc, "SOFTNDK_CRC", (unsigned)o->crc, "on", crcn);
    placement(s, peer, cpu, sizeof cpu);
    governor(gov, sizeof gov);
    printf(RULE);
    printf("                    %s (ndkperf %s)\n", test_title(o->test), NDKPERF_VERSION);
    snprintf(tmp, sizeof tmp, "softndk %s, NDKPI %u.%u", SoftNdkVersionString(),
             s->info.Version.Major, s->info.Version.Minor);
    bool shm = strcmp(transport_of(s), "shm") == 0;
    printf(" %-16s: %-30s %-15s: %s\n", "Provider", tmp, "Transport type",
           s->info.RdmaTechnology != NdkiWarp ? "other"
           : shm                              ? "IW (iWARP/MPA over shared memory)"
                                              : "IW (iWARP/MPA over TCP)");
    snprintf(tmp, sizeof tmp, "%s (ifindex %u)", o->ifname ? o->ifname : "any", s->ifindex);
    printf(" %-16s: %-30s %-15s: RC\n", "Interface", tmp, "Connection type");
    printf(" %-16s: %-30u %-15s: %s\n", "Number of qps", s->nqps, "Bidirectional", onoff(o->bidir));
    printf(" %-16s: %-30u %-15s: %u\n", "TX depth", o->tx_depth, "RX depth",
           test_is_send(o->test) ? q->peer_data_slots : 0);
    snprintf(tmp, sizeof tmp, "%u (max %u)", s->inline_size, s->info.MaxInlineDataSize);
    printf(" %-16s: %-30u %-15s: %s\n", "Post list (DEFER)", o->post_list, "Inline size", tmp);
    printf(" %-16s: %-30s %-15s: %s\n", "Completions",
           o->callback ? "events, work in the callback"
           : o->events ? "events (NdkArmCq)"
                       : "polling",
           "Data check", onoff(o->verify));
    printf(" %-16s: %-30s %-15s: %s\n", "MPA revision", mpa, "CRC", crc);
    snprintf(tmp, sizeof tmp, "%u/%u (effective)", q->ird, q->ord);
    if (o->duration)
        printf(" %-16s: %-30s %-15s: %u s\n", "IRD/ORD", tmp, "Duration", o->duration);
    else
        printf(" %-16s: %-30s %-15s: %u\n", "IRD/ORD", tmp, "Iterations", o->iters);
    printf(" %-16s: %s\n", "CPU placement", cpu);
    printf(" %-16s: %s\n", "CPU governor", gov);
    for (unsigned i = 0; i < s->nqps; i++)
        printf(" QP %-3u local address: %-24s remote address: %s\n", i,
               sockaddr_text(&s->qps[i].local, la, sizeof la),
               sockaddr_text(&s->qps[i].peer, ra, sizeof ra));
    fflush(stdout);
}

void print_table_head(const struct opts *o)
{
    printf(RULE);
    if (test_is_bw(o->test))
        printf(o->report_gbits
                   ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                   : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
    else
        printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
               "    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec] \n");
    fflush(stdout);
}

static double bw_unit(const struct opts *o, double bytes_per_sec)
{
    return o->report_gbits ? bytes_per_sec * 8 / 1e9 : bytes_per_sec / 1048576.0;
}

void print_row(const struct opts *o, const struct round_result *r)
{
    if (r->is_lat)
        printf(" %-7u %-10" PRIu64 "     %-7.2f        %-7.2f      %-7.2f          %-7.2f"
               "        %-7.2f         %-7.2f                %-7.2f\n",
               r->size, r->iters, r->t_min, r->t_max, r->t_typical, r->t_avg, r->t_stdev,
               r->t_p99, r->t_p999);
    else
        printf(" %-7u    %-10" PRIu64 "     %-12.2f       %-12.2f         %-.6f\n", r->size,
               r->iters, bw_unit(o, r->bw_peak), bw_unit(o, r->bw_avg), r->msg_rate / 1e6);
    fflush(stdout);
}

void print_table_tail(const struct opts *o)
{
    (void)o;
    printf(RULE);
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_result(FILE *f, const struct opts *o, const struct round_result *r)
{
    if (r->is_lat)
        fprintf(f,
                "{\"MsgSize\": %u, \"n_iterations\": %" PRIu64 ", \"t_min\": %.3f, \"t_max\": %.3f,"
                " \"t_typical\": %.3f, \"t_avg\": %.3f, \"t_stdev\": %.3f,"
                " \"percentile_99.00\": %.3f, \"percentile_99.90\": %.3f, \"unit\": \"usec\"}",
                r->size, r->iters, r->t_min, r->t_max, r->t_typical, r->t_avg, r->t_stdev, r->t_p99,
                r->t_p999);
    else
        fprintf(f,
                "{\"MsgSize\": %u, \"n_iterations\": %" PRIu64 ", \"BW_peak\": %.3f,"
                " \"BW_average\": %.3f, \"MsgRate\": %.6f, \"BW_unit\": \"%s\","
                " \"MsgRate_unit\": \"Mpps\"}",
                r->size, r->iters, bw_unit(o, r->bw_peak), bw_unit(o, r->bw_avg),
                r->msg_rate / 1e6, o->report_gbits ? "Gb/sec" : "MB/sec");
}

void write_json(const struct side *s, const struct side *peer)
{
    const struct opts *o = s->o;
    FILE *f = stdout;
    if (o->json_file && !(f = fopen(o->json_file, "w")))
        die(EXIT_FAIL, "cannot write %s: %m", o->json_file);
    char mpa[64], crc[64], cpu[160], gov[64], ver[64];
    static const char *const crcn[] = {"", "on", "off"};
    requested(mpa, sizeof mpa, "SOFTNDK_MPA_REV", o->mpa_rev, "2", NULL);
    requested(crc, sizeof crc, "SOFTNDK_CRC", (unsigned)o->crc, "on", crcn);
    placement(s, peer, cpu, sizeof cpu);
    governor(gov, sizeof gov);
    snprintf(ver, sizeof ver, "softndk %s", SoftNdkVersionString());
    fprintf(f, "{\"test_info\": {\"test\": \"%s\", \"tool\": \"ndkperf %s\", \"Device\": \"softndk\","
               " \"provider\": ",
            test_name(o->test), NDKPERF_VERSION);
    json_str(f, ver);
    fprintf(f,
            ", \"NDK_version\": \"%u.%u\", \"Number_of_qps\": %u, \"Transport_type\": \"IW\","
            " \"Connection_type\": \"RC\", \"tx_depth\": %u, \"rx_depth\": %u, \"post_list\": %u,"
            " \"inline_size\": %u, \"events\": %s, \"callback\": %s, \"bidirectional\": %s,"
            " \"check\": %s,"
            " \"loopback\": %s, \"ird\": %u, \"ord\": %u, \"duration\": %u, \"mpa_rev\": ",
            s->info.Version.Major, s->info.Version.Minor, s->nqps, o->tx_depth,
            test_is_send(o->test) ? s->qps[0].peer_data_slots : 0, o->post_list, s->inline_size,
            o->events ? "true" : "false", o->callback ? "true" : "false",
            o->bidir ? "true" : "false", o->verify ? "true" : "false",
            o->loopback ? "true" : "false", s->qps[0].ird, s->qps[0].ord, o->duration);
    json_str(f, mpa);
    fprintf(f, ", \"crc\": ");
    json_str(f, crc);
    fprintf(f, ", \"transport\": ");
    json_str(f, transport_of(s));
    fprintf(f, ", \"cpu_placement\": ");
    json_str(f, cpu);
    fprintf(f, ", \"governor\": ");
    json_str(f, gov);
    fprintf(f, "},\n \"results\": ");
    if (s->nrounds)
        json_result(f, o, &s->rounds[s->nrounds - 1]);
    else
        fprintf(f, "null");
    fprintf(f, ",\n \"all_results\": [");
    for (unsigned i = 0; i < s->nrounds; i++) {
        fprintf(f, i ? ",\n  " : "\n  ");
        json_result(f, o, &s->rounds[i]);
    }
    fprintf(f, "]}\n");
    if (f != stdout && fclose(f) != 0)
        die(EXIT_FAIL, "cannot write %s", o->json_file);
    fflush(stdout);
}
