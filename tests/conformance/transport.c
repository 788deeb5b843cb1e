/* The same-host transport through the public API (docs/transport-shm.md): with Transport shm a
 * connection between two softndk endpoints of this host is made over the rendezvous socket and
 * carried in shared memory (the connector's log says which), the rest of the connection's
 * behaviour is what the suite checks either way (conformance_shm); pcap capture forces TCP
 * and says so. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <grp.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"

/* A connection from an adapter with options co to a listener of one with options so (NULL:
 * the same adapter); the log it wrote at info level. */
static char *connect_logged(SOFTNDK_OPTIONS *co, SOFTNDK_OPTIONS *so)
{
    co->LogLevel = SoftNdkLogInfo;
    if (so)
        so->LogLevel = SoftNdkLogInfo;
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = fx_open_with(co);
    NDK_ADAPTER *b = so ? fx_open_with(so) : a;
    struct fx_server srv;
    fx_listen(&srv, b);
    struct fx_side cl, sv;
    fx_side_init(&cl, a, 4096, 4, 4);
    fx_side_init(&sv, b, 4096, 4, 4);
    fx_establish(&cl, &sv, &srv);
    fx_side_close(&cl);
    fx_side_close(&sv);
    fx_server_close(&srv);
    if (b != a)
        SoftNdkCloseAdapter(b);
    SoftNdkCloseAdapter(a);
    return fx_capture_end(&cap);
}

static char *connect_pair_logged(SOFTNDK_OPTIONS *o)
{
    return connect_logged(o, NULL);
}

TEST(transport_shm_connects_same_host_peers_through_shared_memory)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    char *log = connect_pair_logged(&o);
    /* "connected <local> <-> <peer> (shm, MPA rev 2, ...)" (a peer's lines are rate-limited) */
    CHECK(fx_count_lines(log, "connected", "(shm, MPA rev", NULL) >= 1);
    CHECK_EQ_U64(fx_count_lines(log, "connected", "(tcp, MPA rev", NULL), 0);
    free(log);
}

/* What crosses a same-host connection is counted as on the wire, whichever way the receive side
 * takes it (a whole FPDU parsed in the ring, or read): what the client's adapter sent, the
 * server's received, in octets and FPDUs, and both are their same-host octets. */
TEST(transport_shm_counts_what_crosses_both_ways)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    struct fx_pair *p = fx_pair_open_with(&o, &o, 65536, 8, 8);
    SOFTNDK_COUNTERS c0, s0, c, s;
    fx_counters(p->ac, &c0);
    fx_counters(p->as, &s0);
    static const size_t sizes[] = {64, 1000, 40000};
    for (unsigned i = 0; i < 3; i++) {
        fx_post_recv(&p->sv, 100 + i, 0, 65536);
        fx_post_send(&p->cl, 200 + i, 0, sizes[i], 0);
        CHECK_EQ_U64(fx_collect(&p->sv, i + 1, 5000), i + 1);
        CHECK_EQ_U64(fx_collect(&p->cl, i + 1, 5000), i + 1);
    }
    fx_counters(p->ac, &c);
    fx_counters(p->as, &s);
    uint64_t out = c.RDMAOutOctets - c0.RDMAOutOctets, in = s.RDMAInOctets - s0.RDMAInOctets;
    /* three Sends, one FPDU each, 24 bytes of header and trailer on each (CRC off or on) */
    CHECK_EQ_U64(out, 64 + 1000 + 40000 + 3 * 24);
    CHECK_EQ_U64(in, out);
    CHECK_EQ_U64(c.RDMAOutFrames - c0.RDMAOutFrames, 3);
    CHECK_EQ_U64(s.RDMAInFrames - s0.RDMAInFrames, 3);
    CHECK_EQ_U64(c.SameHostOutOctets - c0.SameHostOutOctets, out);
    CHECK_EQ_U64(s.SameHostInOctets - s0.SameHostInOctets, in);
    fx_pair_close(p);
}

/* The same-host stream asks for no CRC unless told to (docs/decisions.md); either end asking
 * by name is enough, as on the wire (RFC 5044 section 7.1); TCP keeps its default, on. */
static void check_crc(SOFTNDK_CRC_POLICY client, SOFTNDK_CRC_POLICY server,
                      SOFTNDK_TRANSPORT transport, const char *want, const char *not_want)
{
    unsetenv("SOFTNDK_CRC"); /* a suite variant's policy (its own process: one per test) */
    SOFTNDK_OPTIONS co, so;
    fx_options(&co, "");
    fx_options(&so, "");
    co.Transport = so.Transport = transport;
    co.Crc = client;
    so.Crc = server;
    char *log = connect_logged(&co, &so);
    CHECK(fx_count_lines(log, "connected", want, NULL) >= 1);
    CHECK_EQ_U64(fx_count_lines(log, "connected", not_want, NULL), 0);
    free(log);
}

/* One connection per test: the connector's "connected" line is rate-limited per process. */
#define SHM_CRC_ON  "(shm, MPA rev 2, CRC on,"
#define SHM_CRC_OFF "(shm, MPA rev 2, CRC off,"

TEST(transport_shm_asks_for_no_crc_by_default)
{
    check_crc(SoftNdkCrcDefault, SoftNdkCrcDefault, SoftNdkTransportShm, SHM_CRC_OFF, SHM_CRC_ON);
}

TEST(transport_shm_crc_on_when_the_client_asks)
{
    check_crc(SoftNdkCrcOn, SoftNdkCrcDefault, SoftNdkTransportShm, SHM_CRC_ON, SHM_CRC_OFF);
}

TEST(transport_shm_crc_on_when_the_server_asks)
{
    check_crc(SoftNdkCrcDefault, SoftNdkCrcOn, SoftNdkTransportShm, SHM_CRC_ON, SHM_CRC_OFF);
}

TEST(transport_tcp_asks_for_crc_by_default)
{
    check_crc(SoftNdkCrcDefault, SoftNdkCrcDefault, SoftNdkTransportTcp, "(tcp, MPA rev 2, CRC on,",
              "(tcp, MPA rev 2, CRC off,");
}

TEST(transport_tcp_keeps_same_host_peers_on_tcp)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportTcp;
    char *log = connect_pair_logged(&o);
    CHECK(fx_count_lines(log, "connected", "(tcp, MPA rev", NULL) >= 1);
    CHECK_EQ_U64(fx_count_lines(log, "connected", "(shm, MPA rev", NULL), 0);
    free(log);
}

/* pcap capture needs the TCP wire: shm is turned off, and the log says why. */
TEST(transport_shm_with_pcap_capture_uses_tcp_and_says_why)
{
    char path[] = "/tmp/softndk-transport-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    o.PcapFile = path;
    char *log = connect_pair_logged(&o);
    CHECK(fx_count_lines(log, "connected", "(tcp, MPA rev", NULL) >= 1);
    CHECK(fx_count_lines(log, "same-host transport off: pcap capture needs the TCP wire", NULL) >=
          2);
    free(log);
    unlink(path);
}

/* Fault rules that act on a connection's bytes (drop, crc, terminate, stall, delay) need the
 * TCP wire: shm is turned off on that adapter, and the log says why. One connection per test
 * (the connector's "connected" line is rate-limited per process). */
static void check_byte_fault_rule_uses_tcp(const char *rule)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    o.Faults = rule; /* set not to fire here */
    char *log = connect_pair_logged(&o);
    CHECK(fx_count_lines(log, "connected", "(tcp, MPA rev", NULL) >= 1);
    CHECK(fx_count_lines(log,
                         "same-host transport off: fault rules that act on a connection's "
                         "bytes need the TCP wire",
                         NULL) >= 2);
    free(log);
}

TEST(transport_shm_with_a_drop_rule_uses_tcp_and_says_why)
{
    check_byte_fault_rule_uses_tcp("drop:dir=tx,after_fpdus=1000000");
}

TEST(transport_shm_with_a_stall_rule_uses_tcp_and_says_why)
{
    check_byte_fault_rule_uses_tcp("stall:dir=rx,after_fpdus=1000000,ms=1");
}

/* The other classes act on calls, on the handshake or on a CQ: the connection stays in shared
 * memory, so a consumer tests those faults on the transport it runs on. (The rules are set not
 * to fire here; faults_*_shm fire them.) */
TEST(transport_shm_with_call_handshake_and_cq_fault_rules_stays_shm)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    o.Faults = "fail:call=mw,nth=1000000;mpa_reject:nth=1000000;cq_overrun:cq=1000000";
    char *log = connect_pair_logged(&o);
    CHECK(fx_count_lines(log, "connected", "(shm, MPA rev", NULL) >= 1);
    CHECK_EQ_U64(fx_count_lines(log, "connected", "(tcp, MPA rev", NULL), 0);
    CHECK_EQ_U64(fx_count_lines(log, "same-host transport off", NULL), 0);
    free(log);
}

/* A listener on TCP alone has no same-host name: auto connects over TCP without a word, shm
 * over TCP with a line saying why. */
TEST(transport_auto_falls_back_to_tcp_silently_shm_says_so)
{
    SOFTNDK_OPTIONS co, so;
    fx_options(&co, "");
    fx_options(&so, "");
    co.Transport = SoftNdkTransportAuto;
    so.Transport = SoftNdkTransportTcp;
    char *log = connect_logged(&co, &so);
    CHECK(fx_count_lines(log, "connected", "(tcp, MPA rev", NULL) >= 1);
    CHECK_EQ_U64(fx_count_lines(log, "connected", "(shm, MPA rev", NULL), 0);
    CHECK_EQ_U64(fx_count_lines(log, "transport shm:", NULL), 0);
    free(log);
    fx_options(&co, "");
    fx_options(&so, "");
    co.Transport = SoftNdkTransportShm;
    so.Transport = SoftNdkTransportTcp;
    log = connect_logged(&co, &so); /* connected (fx_establish): its own line is rate-limited */
    CHECK_EQ_U64(fx_count_lines(log, "transport shm:", "has no same-host listener: TCP", NULL), 1);
    free(log);
}

/* A process of our user that reaches the listener's same-host name without being a softndk
 * connector (its socket has no connector name): refused before any handshake, with a log
 * line; the listener serves the next connection as before. */
TEST(transport_shm_listener_refuses_a_socket_that_is_not_a_connector)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    o.LogLevel = SoftNdkLogInfo;
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = fx_open_with(&o);
    struct fx_server srv;
    fx_listen(&srv, a);
    /* the name of docs/transport-shm.md: netns inode, 127.0.0.1, the port, all in hex */
    struct stat ns;
    CHECK_EQ_I64(stat("/proc/self/ns/net", &ns), 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    int n = snprintf(un.sun_path + 1, sizeof un.sun_path - 1, "softndk/%lx/7f000001/%04x",
                     (unsigned long)ns.st_ino, (unsigned)srv.port);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    CHECK_EQ_I64(connect(fd, (struct sockaddr *)&un,
                         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
                 0);
    /* closed by the listener, no byte read or written: end of stream within the bound */
    struct timeval tv = {10, 0};
    CHECK_EQ_I64(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    char b;
    CHECK_EQ_I64(recv(fd, &b, 1, 0), 0);
    close(fd);
    CHECK_EQ_U64(atomic_load(&srv.n), 0); /* no connect event */
    /* and a real connector after it connects */
    struct fx_side cl, sv;
    fx_side_init(&cl, a, 4096, 4, 4);
    fx_side_init(&sv, a, 4096, 4, 4);
    fx_establish(&cl, &sv, &srv);
    fx_side_close(&cl);
    fx_side_close(&sv);
    fx_server_close(&srv);
    SoftNdkCloseAdapter(a);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "refused a same-host connection from pid",
                                "its socket name is not a softndk connector's", NULL),
                 1);
    free(log);
}

/* Only our own user shares memory with us: a client process running as another user (nobody)
 * reaches the listener's name, is refused after SO_PEERCRED with a warn line naming its uid,
 * and its NdkConnect fails as a refused connection; the listener's consumer sees nothing, and
 * a client of our own user is served over shared memory right after. The client is forked
 * before the listener's adapter exists (no thread to inherit) and drops to uid and gid 65534,
 * which needs root: CI runs this suite as root. */
TEST(transport_shm_listener_refuses_another_user)
{
    if (geteuid() != 0)
        SKIP("needs root, to run the client as another user (nobody)");
    int to_child[2], from_child[2];
    CHECK_EQ_I64(pipe(to_child), 0);
    CHECK_EQ_I64(pipe(from_child), 0);
    SOFTNDK_OPTIONS o;
    fx_options(&o, "");
    o.Transport = SoftNdkTransportShm;
    o.LogLevel = SoftNdkLogInfo;
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(to_child[1]);
        close(from_child[0]);
        struct fx_server srv;
        memset(&srv, 0, sizeof srv);
        if (read(to_child[0], &srv.port, sizeof srv.port) != (ssize_t)sizeof srv.port)
            _exit(10);
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(11);
        NDK_ADAPTER *b = fx_open_with(&o);
        struct fx_side cl;
        fx_side_init(&cl, b, 4096, 4, 4);
        fx_connect_refused(&cl, &srv, STATUS_CONNECTION_REFUSED);
        fx_side_close(&cl);
        SoftNdkCloseAdapter(b);
        _exit(0);
    }
    close(to_child[0]);
    close(from_child[1]);
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = fx_open_with(&o);
    struct fx_server srv;
    fx_listen(&srv, a);
    CHECK_EQ_I64(write(to_child[1], &srv.port, sizeof srv.port), (ssize_t)sizeof srv.port);
    int status = 0;
    CHECK_EQ_I64(waitpid(pid, &status, 0), pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the other user's client: status %#x (10: no port, 11: setuid refused, else a "
              "check failed)",
              (unsigned)status);
    CHECK_EQ_U64(atomic_load(&srv.n), 0); /* no connect event */
    struct fx_side cl, sv;
    fx_side_init(&cl, a, 4096, 4, 4);
    fx_side_init(&sv, a, 4096, 4, 4);
    fx_establish(&cl, &sv, &srv);
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    CHECK_EQ_U64(c.SameHostConnections, 2); /* both ends of ours, over shared memory */
    fx_side_close(&cl);
    fx_side_close(&sv);
    fx_server_close(&srv);
    SoftNdkCloseAdapter(a);
    close(to_child[1]);
    close(from_child[0]);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "refused a same-host connection from pid", "uid 65534",
                                "not our user", NULL),
                 1);
    free(log);
}
