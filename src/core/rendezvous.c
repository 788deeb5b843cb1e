/* Same-host rendezvous (rendezvous.h, docs/transport-shm.md).
 *
 * Names live in the abstract AF_UNIX namespace, which belongs to the network namespace: a
 * process in another netns cannot reach them, and nothing is left behind in the file system
 * when a process dies. The network-namespace inode is in the name as well, so that a name
 * seen through a shared mount or a copied log can never be mistaken for one of another netns.
 *
 *   listener:  "softndk/<netns>/<addr>/<port>"
 *   connector: "softndk-c/<netns>/<addr>/<port>/<dialed addr>/<pid>-<seq>"
 *
 * Addresses are the raw bytes in hex (8 digits for IPv4, 32 for IPv6) and ports 4 hex digits,
 * so that the longest connector name (IPv6 twice) fits the 107 bytes of sun_path. The
 * connector's name is how the accepting side learns its peer's address and port (accept()
 * returns it), without a byte on the stream before the MPA Request. */
#include "core/rendezvous.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/endpoint.h"
#include "util/log.h"

SOFTNDK_TRANSPORT sndk_rdv_transport(const struct sndk_adapter *a, const char **why)
{
    *why = NULL;
    SOFTNDK_TRANSPORT t = (SOFTNDK_TRANSPORT)a->cfg.transport;
    if (t == SoftNdkTransportTcp || t == SoftNdkTransportDefault)
        return SoftNdkTransportTcp;
    /* Capture and the fault classes that act on a connection's bytes (drop, crc, terminate,
     * stall, delay) work on the TCP wire (docs/observability.md, docs/faults.md): a shared
     * ring has none to capture or cut. The other classes act on calls (fail), on the MPA
     * handshake (mpa_reject, which runs unchanged over the rendezvous socket) or on a CQ
     * (cq_overrun): the same-host transport keeps them, so a consumer tests those faults on
     * the transport it runs on. */
    if (a->cfg.pcap_path[0]) {
        *why = "pcap capture needs the TCP wire";
        return SoftNdkTransportTcp;
    }
    if (a->faults && a->faults->any_conn) {
        *why = "fault rules that act on a connection's bytes need the TCP wire";
        return SoftNdkTransportTcp;
    }
    return t;
}

static unsigned long netns_id(void)
{
    struct stat st;
    return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0ul;
}

/* The address bytes in hex (no port). */
static void addr_hex(const struct sndk_addr *a, char *out, size_t len)
{
    const uint8_t *p;
    size_t n;
    if (a->sa.sa_family == AF_INET) {
        p = (const uint8_t *)&a->in.sin_addr;
        n = 4;
    } else {
        p = (const uint8_t *)&a->in6.sin6_addr;
        n = 16;
    }
    size_t at = 0;
    for (size_t i = 0; i < n && at + 3 <= len; i++)
        at += (size_t)snprintf(out + at, len - at, "%02x", p[i]);
    out[at < len ? at : len - 1] = '\0';
}

/* sun_path with a leading NUL (abstract) and the name after it; the length to bind/connect. */
static socklen_t abstract_name(struct sockaddr_un *un, const char *name)
{
    memset(un, 0, sizeof *un);
    un->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof un->sun_path - 1)
        n = sizeof un->sun_path - 1;
    memcpy(un->sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void listen_name(const struct sndk_addr *a, char *name, size_t len)
{
    char hex[40];
    addr_hex(a, hex, sizeof hex);
    snprintf(name, len, "softndk/%lx/%s/%04x", netns_id(), hex, (unsigned)sndk_addr_port(a));
}

int sndk_rdv_listen(const struct sndk_addr *addr)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    char name[108];
    listen_name(addr, name, sizeof name);
    struct sockaddr_un un;
    socklen_t ul = abstract_name(&un, name);
    if (bind(fd, (struct sockaddr *)&un, ul) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    sndk_debug("rendezvous", "listening on @%s", name);
    return fd;
}

static int try_name(int fd, const struct sndk_addr *target)
{
    char name[108];
    listen_name(target, name, sizeof name);
    struct sockaddr_un un;
    socklen_t ul = abstract_name(&un, name);
    if (connect(fd, (struct sockaddr *)&un, ul) == 0)
        return 0;
    return -errno;
}

int sndk_rdv_connect(struct sndk_addr *local, const struct sndk_addr *dst)
{
    /* Only a destination this host delivers to itself: a wildcard listener's name would
     * otherwise catch a connection meant for another host on the same port. */
    if (!sndk_addr_is_local(dst))
        return -EHOSTUNREACH;
    if (sndk_addr_is_wildcard(local)) {
        uint16_t port = sndk_addr_port(local);
        *local = *dst;
        sndk_addr_set_port(local, port);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    static atomic_uint seq;
    char lhex[40], dhex[40], name[108];
    addr_hex(local, lhex, sizeof lhex);
    addr_hex(dst, dhex, sizeof dhex);
    snprintf(name, sizeof name, "softndk-c/%lx/%s/%04x/%s/%x-%x", netns_id(), lhex,
             (unsigned)sndk_addr_port(local), dhex, (unsigned)getpid(), atomic_fetch_add(&seq, 1u));
    struct sockaddr_un un;
    socklen_t ul = abstract_name(&un, name);
    if (bind(fd, (struct sockaddr *)&un, ul) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    int rc = try_name(fd, dst);
    if (rc == -ECONNREFUSED || rc == -ENOENT) {
        struct sndk_addr any;
        memset(&any, 0, sizeof any);
        any.sa.sa_family = dst->sa.sa_family;
        any.len = dst->len;
        sndk_addr_set_port(&any, sndk_addr_port(dst));
        rc = try_name(fd, &any);
    }
    if (rc != 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Exactly n hex digits at *p (advanced past them) into out[n / 2] bytes. */
static bool take_hex(const char **p, const char *end, uint8_t *out, size_t n)
{
    if ((size_t)(end - *p) < n)
        return false;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_val((*p)[i]), lo = hex_val((*p)[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    *p += n;
    return true;
}

static bool take_char(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return false;
    (*p)++;
    return true;
}

static bool take_addr(const char **p, const char *end, int family, struct sndk_addr *a)
{
    memset(a, 0, sizeof *a);
    a->sa.sa_family = (sa_family_t)family;
    if (family == AF_INET) {
        a->len = sizeof a->in;
        return take_hex(p, end, (uint8_t *)&a->in.sin_addr, 8);
    }
    a->len = sizeof a->in6;
    return take_hex(p, end, (uint8_t *)&a->in6.sin6_addr, 32);
}

/* The connector's name, strictly: anything else is a peer we do not speak with. */
static bool parse_peer_name(const struct sockaddr_un *un, socklen_t ul, int family,
                            struct sndk_addr *peer, struct sndk_addr *dialed)
{
    size_t off = offsetof(struct sockaddr_un, sun_path);
    if (ul <= off + 1 || un->sun_path[0] != '\0')
        return false;
    const char *p = un->sun_path + 1, *end = un->sun_path + (ul - off);
    char prefix[40];
    snprintf(prefix, sizeof prefix, "softndk-c/%lx/", netns_id());
    size_t pl = strlen(prefix);
    if ((size_t)(end - p) < pl || memcmp(p, prefix, pl) != 0)
        return false;
    p += pl;
    uint8_t port[2];
    if (!take_addr(&p, end, family, peer) || !take_char(&p, end, '/') ||
        !take_hex(&p, end, port, 4) || !take_char(&p, end, '/') ||
        !take_addr(&p, end, family, dialed) || !take_char(&p, end, '/'))
        return false;
    sndk_addr_set_port(peer, (uint16_t)(port[0] << 8 | port[1]));
    return true;
}

int sndk_rdv_accept(int lfd, const struct sndk_addr *listen_addr, struct sndk_addr *local,
                    struct sndk_addr *peer)
{
    struct sockaddr_un un;
    socklen_t ul = sizeof un;
    int fd = accept4(lfd, (struct sockaddr *)&un, &ul, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return -(errno == EWOULDBLOCK ? EAGAIN : errno);
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != geteuid()) {
        /* The rings are mapped by both processes: only our own user may share memory with
         * us (docs/transport-shm.md, "Who may map what"). */
        sndk_warn("rendezvous",
                  "refused a same-host connection from pid %ld uid %ld: not our "
                  "user (%ld)",
                  (long)cred.pid, (long)cred.uid, (long)geteuid());
        close(fd);
        return -EPERM;
    }
    struct sndk_addr dialed;
    if (!parse_peer_name(&un, ul, listen_addr->sa.sa_family, peer, &dialed)) {
        sndk_warn("rendezvous",
                  "refused a same-host connection from pid %ld: its socket "
                  "name is not a softndk connector's",
                  (long)cred.pid);
        close(fd);
        return -EPROTO;
    }
    *local = sndk_addr_is_wildcard(listen_addr) ? dialed : *listen_addr;
    sndk_addr_set_port(local, sndk_addr_port(listen_addr));
    return fd;
}

bool sndk_rdv_is_unix(int fd)
{
    int dom = 0;
    socklen_t len = sizeof dom;
    return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) == 0 && dom == AF_UNIX;
}
