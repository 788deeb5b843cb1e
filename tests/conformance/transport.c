/* The same-host transport through the public API (docs/transport-shm.md): with Transport shm a
 * connection between two softndk endpoints of this host is made over the rendezvous socket and
 * carried in shared memory (the connector's log says which), the rest of the connection's
 * behaviour is what the suite checks either way (conformance_shm); pcap capture forces TCP
 * and says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"

static char *connect_pair_logged(SOFTNDK_OPTIONS *o)
{
    o->LogLevel = SoftNdkLogInfo;
    struct fx_capture cap;
    fx_capture_begin(&cap);
    NDK_ADAPTER *a = fx_open_with(o);
    struct fx_server srv;
    fx_listen(&srv, a);
    struct fx_side cl, sv;
    fx_side_init(&cl, a, 4096, 4, 4);
    fx_side_init(&sv, a, 4096, 4, 4);
    fx_establish(&cl, &sv, &srv);
    fx_side_close(&cl);
    fx_side_close(&sv);
    fx_server_close(&srv);
    SoftNdkCloseAdapter(a);
    return fx_capture_end(&cap);
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
