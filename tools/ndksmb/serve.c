/* ndksmb serve: an SMB3 file server over SMB Direct on softndk (or over TCP): the SMB2 server
 * of smb/server on the Responder of smb/transport/smbd.c, one thread per connection.
 *
 *   ndksmb serve DIR [--port 5445] [-U user%pass] [--share NAME] [--address A]
 *                    [--transport smbd|tcp] [--connections N] [--sign] [--ready-file F]
 *
 * It runs until SIGINT/SIGTERM, or until N connections were served (--connections), then
 * prints what it served: connections, SMB2 commands by name, the RDMA it did. */
#include "ndksmb.h"

#include <smb/smb2_server.h>
#include <smb/smbd.h>
#include <smb/tcp_listen.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_bool stop;

static void on_stop(int sig)
{
    (void)sig;
    atomic_store(&stop, true);
}

struct conn_thread {
    pthread_t th;
    smb_transport *t;
    const smb2_server_config *cfg;
    smb2_server_stats *stats;
    atomic_bool done;
    int rc;
    struct conn_thread *next;
};

static void *serve_one(void *arg)
{
    struct conn_thread *ct = arg;
    ct->rc = smb2_serve_connection(ct->cfg, ct->t, ct->stats);
    ct->t->ops->destroy(ct->t);
    atomic_store(&ct->done, true);
    return NULL;
}

/* Joins the threads whose connection ended (all of them with `all`); counts failures. */
static void reap(struct conn_thread **list, bool all, unsigned *failed)
{
    for (struct conn_thread **p = list; *p;) {
        struct conn_thread *ct = *p;
        if (!all && !atomic_load(&ct->done)) {
            p = &ct->next;
            continue;
        }
        pthread_join(ct->th, NULL);
        if (ct->rc != 0)
            (*failed)++;
        *p = ct->next;
        free(ct);
    }
}

static const char *const command_names[] = {
    "NEGOTIATE",     "SESSION_SETUP", "LOGOFF",   "TREE_CONNECT", "TREE_DISCONNECT",
    "CREATE",        "CLOSE",         "FLUSH",    "READ",         "WRITE",
    "LOCK",          "IOCTL",         "CANCEL",   "ECHO",         "QUERY_DIRECTORY",
    "CHANGE_NOTIFY", "QUERY_INFO",    "SET_INFO", "OPLOCK_BREAK"};

static void usage(FILE *f)
{
    fprintf(f, "usage: ndksmb serve DIR [--port N] [-U USER%%PASS] [--share NAME] [--address A]\n"
               "                        [--transport smbd|tcp] [--connections N] [--sign]\n"
               "                        [--ready-file FILE] [--json]\n");
}

int ndksmb_serve(int argc, char **argv)
{
    static const struct option lo[] = {{"port", required_argument, 0, 'p'},
                                       {"user", required_argument, 0, 'U'},
                                       {"share", required_argument, 0, 'S'},
                                       {"address", required_argument, 0, 'a'},
                                       {"transport", required_argument, 0, 't'},
                                       {"connections", required_argument, 0, 'n'},
                                       {"sign", no_argument, 0, 'g'},
                                       {"ready-file", required_argument, 0, 'r'},
                                       {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int port = -1; /* not given: the transport's own port; 0: any free one */
    unsigned max_conns = 0;
    const char *user = "", *password = "", *share = "share", *address = NULL, *transport = "smbd",
               *ready_file = NULL;
    int sign = 0, json = 0, ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "p:U:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'p': {
            unsigned long p = ndksmb_parse_num(optarg, "serve --port");
            if (p > 65535) {
                fprintf(stderr, "ndksmb serve: --port: 0 to 65535\n");
                return 2;
            }
            port = (int)p;
            break;
        }
        case 'U':
            ndksmb_split_user(optarg, &user, &password);
            break;
        case 'S':
            share = optarg;
            break;
        case 'a':
            address = optarg;
            break;
        case 't':
            if (strcmp(optarg, "smbd") != 0 && strcmp(optarg, "tcp") != 0) {
                fprintf(stderr, "ndksmb serve: --transport: smbd or tcp\n");
                return 2;
            }
            transport = optarg;
            break;
        case 'n':
            max_conns = (unsigned)ndksmb_parse_num(optarg, "serve --connections");
            break;
        case 'g':
            sign = 1;
            break;
        case 'r':
            ready_file = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 1) {
        usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "ndksmb: error: serve: %s is not a directory\n", dir);
        return 1;
    }
    int tcp = strcmp(transport, "tcp") == 0;
    if (port < 0)
        port = tcp ? 445 : 5445;
    if (!address)
        address = "0.0.0.0";
    smb2_server_config cfg = {.root = dir,
                              .share = share,
                              .user = user,
                              .password = password,
                              .domain = "",
                              .require_signing = sign};
    smb2_server_stats stats;
    memset(&stats, 0, sizeof stats);

    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[512] = "";
    NDK_ADAPTER *adapter = NULL;
    smbd_listener *sl = NULL;
    smb_tcp_listener *tl = NULL;
    uint16_t bound;
    if (tcp) {
        if (smb_tcp_listen(address, (uint16_t)port, &tl, err, sizeof err) != 0) {
            fprintf(stderr, "ndksmb: error: serve: listen on %s:%d: %s\n", address, port, err);
            return 1;
        }
        bound = smb_tcp_listener_port(tl);
    } else {
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof ss);
        socklen_t slen;
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, address, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            slen = sizeof *s4;
        } else if (inet_pton(AF_INET6, address, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            slen = sizeof *s6;
        } else {
            fprintf(stderr, "ndksmb serve: --address: not an IPv4 or IPv6 address: %s\n", address);
            return 2;
        }
        NDK_VERSION v = {2, 0};
        NTSTATUS st = SoftNdkOpenAdapter(0, v, NULL, &adapter);
        if (st != STATUS_SUCCESS) {
            fprintf(stderr, "ndksmb: error: serve: SoftNdkOpenAdapter: %s\n",
                    SoftNdkStatusName(st));
            return 1;
        }
        if (smbd_listen(adapter, (struct sockaddr *)&ss, slen, NULL, &sl, err, sizeof err) != 0) {
            fprintf(stderr, "ndksmb: error: serve: SMB Direct listen on %s:%d: %s\n", address, port,
                    err);
            SoftNdkCloseAdapter(adapter);
            return 1;
        }
        bound = smbd_listener_port(sl);
    }
    fprintf(stderr, "ndksmb: serving %s as //%s/%s over %s on %s:%u\n", dir, address, share,
            tcp ? "TCP" : "SMB Direct", address, bound);
    if (ready_file) {
        FILE *f = fopen(ready_file, "w");
        if (f) {
            fprintf(f, "%u\n", bound);
            fclose(f);
        }
    }

    struct conn_thread *threads = NULL;
    unsigned served = 0, failed = 0, refused = 0;
    while (!atomic_load(&stop) && (!max_conns || served < max_conns)) {
        smb_transport *t = NULL;
        int rc = tcp ? smb_tcp_accept(tl, &t, 500) : smbd_accept(sl, &t, 500, err, sizeof err);
        reap(&threads, false, &failed);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc != 0) {
            /* a connection that failed on its way in: named, and the next one is served */
            fprintf(stderr, "ndksmb: serve: a connection failed to start: %s\n",
                    tcp ? strerror(-rc) : err);
            refused++;
            continue;
        }
        struct conn_thread *ct = calloc(1, sizeof *ct);
        if (!ct) {
            t->ops->destroy(t);
            refused++;
            continue;
        }
        ct->t = t;
        ct->cfg = &cfg;
        ct->stats = &stats;
        if (pthread_create(&ct->th, NULL, serve_one, ct) != 0) {
            t->ops->destroy(t);
            free(ct);
            refused++;
            continue;
        }
        ct->next = threads;
        threads = ct;
        served++;
    }
    reap(&threads, true, &failed);
    if (sl)
        smbd_listener_close(sl);
    if (tl)
        smb_tcp_listener_close(tl);
    if (adapter)
        SoftNdkCloseAdapter(adapter);
    if (json) {
        printf("{\"connections\":%u,\"failed\":%u,\"refused\":%u,\"rdma_reads\":%llu,"
               "\"rdma_writes\":%llu,\"send_invalidates\":%llu,\"inline_reads\":%llu,"
               "\"inline_writes\":%llu,\"commands\":{",
               served, failed, refused, (unsigned long long)stats.rdma_reads,
               (unsigned long long)stats.rdma_writes, (unsigned long long)stats.send_invalidates,
               (unsigned long long)stats.inline_reads, (unsigned long long)stats.inline_writes);
        bool first = true;
        for (size_t i = 0; i < sizeof command_names / sizeof command_names[0]; i++)
            if (stats.commands[i]) {
                printf("%s\"%s\":%llu", first ? "" : ",", command_names[i],
                       (unsigned long long)stats.commands[i]);
                first = false;
            }
        printf("}}\n");
    } else {
        printf("served %u connections (%u ended in failure, %u failed to start); RDMA Reads %llu, "
               "Writes %llu, Sends with Invalidate %llu; inline reads %llu, writes %llu\n",
               served, failed, refused, (unsigned long long)stats.rdma_reads,
               (unsigned long long)stats.rdma_writes, (unsigned long long)stats.send_invalidates,
               (unsigned long long)stats.inline_reads, (unsigned long long)stats.inline_writes);
        for (size_t i = 0; i < sizeof command_names / sizeof command_names[0]; i++)
            if (stats.commands[i])
                printf("  %-16s %llu\n", command_names[i], (unsigned long long)stats.commands[i]);
    }
    return 0;
}
