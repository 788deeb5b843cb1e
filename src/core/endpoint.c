/* Endpoints, the ND port space and shared endpoints (docs/ndk-rules.md#ep). */
#include "core/create.h"
#include "core/endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/errno_status.h"
#include "util/log.h"
#include "util/lock.h"

/* Does the kernel deliver addr locally (a route of type local: RTM_GETROUTE asks the routing
 * tables, the "local" table included), and on which interface? 1 with *oif set, 0 when it
 * routes addr elsewhere, -1 when it cannot be asked (no socket, no answer). */
static int route_is_local(const struct sndk_addr *addr, unsigned *oif)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return -1;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* Built and parsed with memcpy at the netlink offsets: no cast of a byte pointer. */
    bool v4 = addr->sa.sa_family == AF_INET;
    size_t alen = v4 ? sizeof addr->in.sin_addr : sizeof addr->in6.sin6_addr;
    uint8_t req[NLMSG_SPACE(sizeof(struct rtmsg)) + RTA_SPACE(16)];
    memset(req, 0, sizeof req);
    struct nlmsghdr nh = {
        .nlmsg_len = (uint32_t)(NLMSG_SPACE(sizeof(struct rtmsg)) + RTA_LENGTH(alen)),
        .nlmsg_type = RTM_GETROUTE,
        .nlmsg_flags = NLM_F_REQUEST,
        .nlmsg_seq = 1,
    };
    struct rtmsg rt = {.rtm_family = (unsigned char)addr->sa.sa_family,
                       .rtm_dst_len = (unsigned char)(alen * 8)};
    struct rtattr rta = {.rta_len = (unsigned short)RTA_LENGTH(alen), .rta_type = RTA_DST};
    size_t at = NLMSG_SPACE(sizeof rt);
    memcpy(req, &nh, sizeof nh);
    memcpy(req + NLMSG_HDRLEN, &rt, sizeof rt);
    memcpy(req + at, &rta, sizeof rta);
    memcpy(req + at + RTA_LENGTH(0),
           v4 ? (const void *)&addr->in.sin_addr : (const void *)&addr->in6.sin6_addr, alen);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, req, nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        close(fd);
        return -1;
    }
    uint8_t buf[4096];
    ssize_t got = recv(fd, buf, sizeof buf, 0);
    close(fd);
    if (got <= 0)
        return -1;
    size_t n = (size_t)got;
    for (size_t off = 0; off + NLMSG_HDRLEN <= n;) {
        memcpy(&nh, buf + off, sizeof nh);
        if (nh.nlmsg_len < NLMSG_HDRLEN || nh.nlmsg_len > n - off)
            return -1;
        const uint8_t *pay = buf + off + NLMSG_HDRLEN;
        size_t plen = nh.nlmsg_len - NLMSG_HDRLEN;
        if (nh.nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr e;
            if (plen < sizeof e)
                return -1;
            memcpy(&e, pay, sizeof e);
            /* no route at all: not local; anything else: cannot tell */
            return e.error == -ENETUNREACH || e.error == -EHOSTUNREACH ? 0 : -1;
        }
        if (nh.nlmsg_type == RTM_NEWROUTE && plen >= sizeof rt) {
            memcpy(&rt, pay, sizeof rt);
            if (rt.rtm_type != RTN_LOCAL)
                return 0;
            *oif = 0;
            for (size_t a = NLMSG_ALIGN(sizeof rt); a + sizeof rta <= plen;) {
                memcpy(&rta, pay + a, sizeof rta);
                if (rta.rta_len < sizeof rta || rta.rta_len > plen - a)
                    break;
                if (rta.rta_type == RTA_OIF && rta.rta_len >= RTA_LENGTH(sizeof(uint32_t))) {
                    uint32_t v;
                    memcpy(&v, pay + a + RTA_LENGTH(0), sizeof v);
                    *oif = v;
                }
                a += RTA_ALIGN(rta.rta_len);
            }
            return 1;
        }
        off += NLMSG_ALIGN(nh.nlmsg_len);
    }
    return -1;
}

/* An address is the adapter's when it is one of its interface's addresses, or when the host
 * delivers it locally on that interface (Linux delivers all of 127.0.0.0/8 on lo, though lo
 * lists only 127.0.0.1; a "local" route may cover a whole prefix). An adapter on every
 * interface (IfIndex 0) owns every address the host delivers locally. */
bool sndk_adapter_owns_address(const struct sndk_adapter *a, const struct sndk_addr *addr)
{
    if (sndk_addr_is_wildcard(addr))
        return true;
    struct ifaddrs *list;
    if (getifaddrs(&list) != 0)
        return false;
    bool ours = false, theirs = false;
    for (struct ifaddrs *i = list; i && !ours; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != addr->sa.sa_family)
            continue;
        struct sndk_addr cand;
        if (sndk_addr_from(&cand, i->ifa_addr,
                           i->ifa_addr->sa_family == AF_INET
                               ? sizeof(struct sockaddr_in)
                               : sizeof(struct sockaddr_in6)) != STATUS_SUCCESS ||
            !sndk_addr_same_host(&cand, addr))
            continue;
        if (a->if_index == 0 || if_nametoindex(i->ifa_name) == a->if_index)
            ours = true;
        else
            theirs = true;
    }
    freeifaddrs(list);
    if (ours)
        return true;
    if (theirs)
        return false; /* listed on another interface: that one's */
    unsigned oif = 0;
    if (route_is_local(addr, &oif) != 1)
        return false;
    /* A local route's output interface is the one the address is delivered on; the listed
     * addresses of every interface also route via lo, but those were decided above. */
    return a->if_index == 0 || oif == a->if_index;
}

bool sndk_addr_is_local(const struct sndk_addr *addr)
{
    unsigned oif = 0;
    return route_is_local(addr, &oif) == 1;
}

/* ------------------------------------------------------------------------------------------ */
/* The process-wide table: one entry per listener, shared endpoint and active connection, so
 * tens of thousands at scale. Indexed by port (a list per port, both families): whether an
 * address:port is taken looks only at the endpoints of that port, and an entry leaves its list
 * in O(1), so setup and teardown cost the same at 20,000 connections as at one. Only connection
 * setup and teardown touch it, never the data path. */

struct peer {
    struct peer *next;
    struct sndk_addr addr;
};

struct sndk_endpoint {
    struct sndk_endpoint *next, *prev; /* the endpoints of its port */
    enum sndk_ep_kind kind;
    struct sndk_addr addr;
    unsigned refs; /* under table_lock */
    struct peer *peers;
};

static struct sndk_mutex table_lock = SNDK_MUTEX_INITIALIZER(SNDK_LOCK_ENDPOINTS);
/* 64 Ki heads, 512 KiB of zeroed memory of which only the pages of used ports are touched. */
static struct sndk_endpoint *by_port[UINT16_MAX + 1];

/* Would (addr, port) collide with an endpoint we hold? Same port and either the same address
 * or a wildcard on either side (of the same family). Caller holds table_lock. */
static bool taken_locked(const struct sndk_addr *addr)
{
    sndk_assert_held(&table_lock);
    for (struct sndk_endpoint *e = by_port[sndk_addr_port(addr)]; e; e = e->next) {
        if (e->addr.sa.sa_family != addr->sa.sa_family)
            continue;
        if (sndk_addr_same_host(&e->addr, addr) || sndk_addr_is_wildcard(&e->addr) ||
            sndk_addr_is_wildcard(addr))
            return true;
    }
    return false;
}

static NTSTATUS bind_socket(enum sndk_ep_kind kind, const struct sndk_addr *addr, int *out)
{
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sndk_status_from_errno(SNDK_CALL_SOCKET, errno);
    int one = 1;
    /* Listeners restart while old connections sit in TIME_WAIT; shared endpoints need it for
     * several connections from one port; NdkConnect's endpoints need it because the active
     * closer's port waits in TIME_WAIT for a minute, which would exhaust the ephemeral ND range
     * under connection churn. Live endpoints stay exclusive: the table above refuses a second
     * user in this process, and another process's socket without SO_REUSEADDR refuses bind. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (addr->sa.sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, &addr->sa, addr->len) != 0) {
        int err = errno;
        close(fd);
        return sndk_status_from_errno(SNDK_CALL_BIND, err);
    }
    if (kind == SNDK_EP_LISTEN && listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        return sndk_status_from_errno(SNDK_CALL_LISTEN, err);
    }
    *out = fd;
    return STATUS_SUCCESS;
}

NTSTATUS sndk_endpoint_open(struct sndk_adapter *a, enum sndk_ep_kind kind, struct sndk_addr *addr,
                            struct sndk_endpoint **out, int *fd)
{
    if (!sndk_adapter_owns_address(a, addr))
        return STATUS_INVALID_ADDRESS;
    struct sndk_endpoint *ep = calloc(1, sizeof *ep);
    if (!ep)
        return STATUS_INSUFFICIENT_RESOURCES;
    ep->kind = kind;
    ep->refs = 1;
    NTSTATUS st;
    sndk_mutex_lock(&table_lock);
    if (sndk_addr_port(addr) != 0) {
        st = taken_locked(addr) ? STATUS_SHARING_VIOLATION : bind_socket(kind, addr, fd);
    } else {
        /* Draw from the ephemeral ND range, starting at a random point so that concurrent
         * processes rarely race for the same port; skip ports anyone holds. */
        uint32_t lo = a->cfg.port_low, span = (uint32_t)a->cfg.port_high - lo + 1;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint32_t start = (uint32_t)(ts.tv_nsec ^ (long)getpid()) % span;
        st = STATUS_TOO_MANY_ADDRESSES;
        for (uint32_t i = 0; i < span; i++) {
            sndk_addr_set_port(addr, (uint16_t)(lo + (start + i) % span));
            if (taken_locked(addr))
                continue;
            NTSTATUS b = bind_socket(kind, addr, fd);
            if (b == STATUS_SHARING_VIOLATION)
                continue;
            st = b;
            break;
        }
        if (st != STATUS_SUCCESS)
            sndk_addr_set_port(addr, 0);
    }
    if (st == STATUS_SUCCESS) {
        ep->addr = *addr;
        struct sndk_endpoint **head = &by_port[sndk_addr_port(addr)];
        ep->next = *head;
        if (*head)
            (*head)->prev = ep;
        *head = ep;
    }
    sndk_mutex_unlock(&table_lock);
    if (st != STATUS_SUCCESS) {
        free(ep);
        return st;
    }
    *out = ep;
    return STATUS_SUCCESS;
}

NTSTATUS sndk_endpoint_socket(struct sndk_endpoint *ep, int *fd)
{
    return bind_socket(SNDK_EP_SHARED, &ep->addr, fd);
}

void sndk_endpoint_get(struct sndk_endpoint *ep)
{
    sndk_mutex_lock(&table_lock);
    ep->refs++;
    sndk_mutex_unlock(&table_lock);
}

void sndk_endpoint_put(struct sndk_endpoint *ep)
{
    sndk_mutex_lock(&table_lock);
    bool last = --ep->refs == 0;
    if (last) {
        if (ep->prev)
            ep->prev->next = ep->next;
        else
            by_port[sndk_addr_port(&ep->addr)] = ep->next;
        if (ep->next)
            ep->next->prev = ep->prev;
    }
    sndk_mutex_unlock(&table_lock);
    if (last) {
        while (ep->peers) {
            struct peer *n = ep->peers->next;
            free(ep->peers);
            ep->peers = n;
        }
        free(ep);
    }
}

const struct sndk_addr *sndk_endpoint_addr(const struct sndk_endpoint *ep)
{
    return &ep->addr;
}

int sndk_endpoint_add_peer(struct sndk_endpoint *ep, const struct sndk_addr *peer)
{
    struct peer *p = malloc(sizeof *p);
    if (!p)
        return -ENOMEM;
    p->addr = *peer;
    sndk_mutex_lock(&table_lock);
    for (struct peer *q = ep->peers; q; q = q->next)
        if (sndk_addr_equal(&q->addr, peer)) {
            sndk_mutex_unlock(&table_lock);
            free(p);
            return -EEXIST;
        }
    p->next = ep->peers;
    ep->peers = p;
    sndk_mutex_unlock(&table_lock);
    return 0;
}

void sndk_endpoint_del_peer(struct sndk_endpoint *ep, const struct sndk_addr *peer)
{
    struct peer *victim = NULL;
    sndk_mutex_lock(&table_lock);
    for (struct peer **q = &ep->peers; *q; q = &(*q)->next)
        if (sndk_addr_equal(&(*q)->addr, peer)) {
            victim = *q;
            *q = victim->next;
            break;
        }
    sndk_mutex_unlock(&table_lock);
    free(victim);
}

/* ------------------------------------------------------------------------------------------ */
/* NDK_SHARED_ENDPOINT */

static NTSTATUS se_local_address(NDK_SHARED_ENDPOINT *pub, struct sockaddr *pAddress,
                                 ULONG *pAddressLength)
{
    struct sndk_shared_endpoint *se = sndk_shared_endpoint_from(pub);
    if (!se || !pAddressLength)
        return STATUS_INVALID_PARAMETER;
    return sndk_addr_copy_out(sndk_endpoint_addr(se->ep), pAddress, pAddressLength);
}

static const NDK_SHARED_ENDPOINT_DISPATCH se_dispatch = {
    .NdkCloseSharedEndpoint = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkGetLocalAddress = se_local_address,
};

static void se_destroy(struct sndk_obj *o)
{
    struct sndk_shared_endpoint *se = sndk_container_of(o, struct sndk_shared_endpoint, base);
    if (se->fd >= 0)
        close(se->fd);
    if (se->ep)
        sndk_endpoint_put(se->ep);
}

static const struct sndk_obj_ops se_ops = {.type = NdkObjectTypeSharedEndpoint,
                                           .destroy = se_destroy};

NTSTATUS sndk_endpoint_create(NDK_ADAPTER *pNdkAdapter, const struct sockaddr *pAddress,
                              ULONG AddressLength, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint)
{
    (void)CreateCompletion, (void)RequestContext; /* creates complete inline */
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ppNdkSharedEndpoint)
        return STATUS_INVALID_PARAMETER;
    struct sndk_addr addr;
    NTSTATUS st = sndk_addr_from(&addr, pAddress, AddressLength);
    if (st != STATUS_SUCCESS)
        return st;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    struct sndk_shared_endpoint *se = calloc(1, sizeof *se);
    if (!se)
        return STATUS_INSUFFICIENT_RESOURCES;
    se->fd = -1;
    st = sndk_endpoint_open(a, SNDK_EP_SHARED, &addr, &se->ep, &se->fd);
    if (st != STATUS_SUCCESS) {
        free(se);
        return st;
    }
    sndk_obj_init(&se->base, a, &se_ops, &se_dispatch);
    sndk_obj_hold(&se->base, &a->base);
    *ppNdkSharedEndpoint = &se->base.pub.endpoint;
    return STATUS_SUCCESS;
}
