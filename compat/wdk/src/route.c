/* netioapi's route and path routines answered from the host over rtnetlink (NETLINK_ROUTE):
 * GetBestRoute2 is `ip route get` (RTM_GETROUTE for one destination, plus RTM_F_FIB_MATCH for
 * the matching prefix), GetIpForwardTable2 a dump of the routes, GetIpPathTable a dump of the
 * neighbours (docs/wdk.md, "Routes"). Only the kernel of this network namespace is asked. The
 * replies are parsed with bounds checks on every length (RTA_OK / NLMSG_OK). */
#include "wdk_internal.h"
#include "netioapi.h"

#include <errno.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WDK_TAG_MIB 0x5462694Du /* "MibT" */
#ifndef RTM_F_FIB_MATCH
#define RTM_F_FIB_MATCH 0x2000
#endif

/* NLMSG_NEXT / RTA_NEXT / RTM_RTA without their char-to-struct casts (clang's -Wcast-align):
 * netlink messages and attributes are 4-byte aligned by construction (NLMSG_ALIGN, RTA_ALIGN). */
static struct nlmsghdr *msg_next(struct nlmsghdr *m, size_t *len)
{
    size_t step = NLMSG_ALIGN(m->nlmsg_len);
    *len = step <= *len ? *len - step : 0;
    return (struct nlmsghdr *)(void *)((char *)m + step);
}

static const struct rtattr *attr_first(const void *payload, size_t header)
{
    return (const struct rtattr *)(const void *)((const char *)payload + NLMSG_ALIGN(header));
}

static const struct rtattr *attr_next(const struct rtattr *a, size_t *len)
{
    size_t step = RTA_ALIGN(a->rta_len);
    *len = step <= *len ? *len - step : 0;
    return (const struct rtattr *)(const void *)((const char *)a + step);
}

struct nl_conn {
    int fd;
    uint32_t seq;
};

static NTSTATUS nl_open(struct nl_conn *c)
{
    c->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (c->fd < 0)
        return STATUS_INTERNAL_ERROR;
    struct timeval tv = {2, 0}; /* the kernel answers at once; bound the wait anyway */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (bind(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(c->fd);
        return STATUS_INTERNAL_ERROR;
    }
    c->seq = (uint32_t)time(NULL);
    return STATUS_SUCCESS;
}

/* Sends req and calls fn for each reply message until NLMSG_DONE (dump) or the one answer.
 * Returns 0, or the kernel's errno (positive) from an NLMSG_ERROR, or -1 on a transport error. */
static int nl_talk(struct nl_conn *c, struct nlmsghdr *req,
                   int (*fn)(const struct nlmsghdr *m, void *ctx), void *ctx)
{
    req->nlmsg_seq = ++c->seq;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(c->fd, req, req->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        return -1;
    bool dump = (req->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
    static _Thread_local char buf[32768] __attribute__((aligned(8)));
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n <= 0)
            return -1;
        size_t len = (size_t)n;
        for (struct nlmsghdr *m = (struct nlmsghdr *)(void *)buf; NLMSG_OK(m, len);
             m = msg_next(m, &len)) {
            if (m->nlmsg_seq != c->seq)
                continue;
            if (m->nlmsg_type == NLMSG_DONE)
                return 0;
            if (m->nlmsg_type == NLMSG_ERROR) {
                if (m->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                    return -1;
                const struct nlmsgerr *e = NLMSG_DATA(m);
                return e->error < 0 ? -e->error : 0;
            }
            int rc = fn(m, ctx);
            if (rc != 0)
                return rc;
            if (!dump)
                return 0;
        }
    }
}

static void nl_add_attr(struct nlmsghdr *h, size_t cap, unsigned short type, const void *data,
                        size_t len)
{
    size_t at = NLMSG_ALIGN(h->nlmsg_len);
    NT_ASSERT(at + RTA_SPACE(len) <= cap);
    struct rtattr *a = (struct rtattr *)(void *)((char *)h + at);
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    h->nlmsg_len = (uint32_t)(at + RTA_SPACE(len));
}

static size_t addr_len(int family)
{
    return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

static const void *inet_bytes(const SOCKADDR_INET *a)
{
    return a->si_family == AF_INET ? (const void *)&a->Ipv4.sin_addr
                                   : (const void *)&a->Ipv6.sin6_addr;
}

static void set_inet(SOCKADDR_INET *a, int family, const void *bytes)
{
    memset(a, 0, sizeof *a);
    a->si_family = (ADDRESS_FAMILY)family;
    if (family == AF_INET && bytes)
        memcpy(&a->Ipv4.sin_addr, bytes, 4);
    else if (family == AF_INET6 && bytes)
        memcpy(&a->Ipv6.sin6_addr, bytes, 16);
}

/* A route message into a row. Returns false for a message that is not a usable route. */
static bool route_row(const struct nlmsghdr *m, MIB_IPFORWARD_ROW2 *row)
{
    if (m->nlmsg_type != RTM_NEWROUTE || m->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
        return false;
    const struct rtmsg *rt = NLMSG_DATA(m);
    size_t alen = addr_len(rt->rtm_family);
    if (alen == 0)
        return false;
    memset(row, 0, sizeof *row);
    set_inet(&row->DestinationPrefix.Prefix, rt->rtm_family, NULL);
    set_inet(&row->NextHop, rt->rtm_family, NULL);
    row->DestinationPrefix.PrefixLength = rt->rtm_dst_len;
    row->Loopback = rt->rtm_type == RTN_LOCAL;
    row->Protocol = rt->rtm_protocol == RTPROT_KERNEL ? RouteProtocolLocal : RouteProtocolNetMgmt;
    row->Origin = rt->rtm_protocol == RTPROT_DHCP     ? NlroDHCP
                  : rt->rtm_protocol == RTPROT_RA     ? NlroRouterAdvertisement
                  : rt->rtm_protocol == RTPROT_KERNEL ? NlroWellKnown
                                                      : NlroManual;
    row->ValidLifetime = row->PreferredLifetime = 0xffffffffu;
    row->Immortal = TRUE;
    size_t len = RTM_PAYLOAD(m);
    for (const struct rtattr *a = attr_first(rt, sizeof *rt); RTA_OK(a, len);
         a = attr_next(a, &len)) {
        size_t plen = RTA_PAYLOAD(a);
        switch (a->rta_type) {
        case RTA_DST:
            if (plen == alen)
                set_inet(&row->DestinationPrefix.Prefix, rt->rtm_family, RTA_DATA(a));
            break;
        case RTA_GATEWAY:
            if (plen == alen)
                set_inet(&row->NextHop, rt->rtm_family, RTA_DATA(a));
            break;
        case RTA_OIF:
            if (plen == sizeof(uint32_t))
                memcpy(&row->InterfaceIndex, RTA_DATA(a), sizeof(uint32_t));
            break;
        case RTA_PRIORITY:
            if (plen == sizeof(uint32_t))
                memcpy(&row->Metric, RTA_DATA(a), sizeof(uint32_t));
            break;
        default:
            break;
        }
    }
    if (row->InterfaceIndex)
        ConvertInterfaceIndexToLuid(row->InterfaceIndex, &row->InterfaceLuid);
    return true;
}

struct best_ctx {
    MIB_IPFORWARD_ROW2 row;
    SOCKADDR_INET src;
    bool have;
};

static int best_cb(const struct nlmsghdr *m, void *ctx)
{
    struct best_ctx *b = ctx;
    if (!route_row(m, &b->row))
        return 0;
    b->have = true;
    const struct rtmsg *rt = NLMSG_DATA(m);
    size_t len = RTM_PAYLOAD(m);
    set_inet(&b->src, rt->rtm_family, NULL);
    for (const struct rtattr *a = attr_first(rt, sizeof *rt); RTA_OK(a, len);
         a = attr_next(a, &len))
        if (a->rta_type == RTA_PREFSRC && RTA_PAYLOAD(a) == addr_len(rt->rtm_family))
            set_inet(&b->src, rt->rtm_family, RTA_DATA(a));
    return 0;
}

static NTSTATUS route_get(struct nl_conn *c, const SOCKADDR_INET *dst, const SOCKADDR_INET *src,
                          NET_IFINDEX oif, unsigned flags, struct best_ctx *out)
{
    struct {
        struct nlmsghdr h;
        struct rtmsg r;
        char attrs[128];
    } req;
    memset(&req, 0, sizeof req);
    int family = dst->si_family;
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    req.h.nlmsg_type = RTM_GETROUTE;
    req.h.nlmsg_flags = NLM_F_REQUEST;
    req.r.rtm_family = (unsigned char)family;
    req.r.rtm_dst_len = (unsigned char)(addr_len(family) * 8);
    req.r.rtm_flags = flags;
    nl_add_attr(&req.h, sizeof req, RTA_DST, inet_bytes(dst), addr_len(family));
    if (src && !(family == AF_INET ? src->Ipv4.sin_addr.s_addr == 0
                                   : IN6_IS_ADDR_UNSPECIFIED(&src->Ipv6.sin6_addr))) {
        nl_add_attr(&req.h, sizeof req, RTA_SRC, inet_bytes(src), addr_len(family));
        req.r.rtm_src_len = req.r.rtm_dst_len;
    }
    if (oif) {
        uint32_t o = oif;
        nl_add_attr(&req.h, sizeof req, RTA_OIF, &o, sizeof o);
    }
    memset(out, 0, sizeof *out);
    int rc = nl_talk(c, &req.h, best_cb, out);
    if (rc == ENETUNREACH)
        return STATUS_NETWORK_UNREACHABLE;
    if (rc == EHOSTUNREACH)
        return STATUS_HOST_UNREACHABLE;
    if (rc == ENODEV)
        return STATUS_NOT_FOUND;
    if (rc != 0 || !out->have)
        return rc > 0 ? STATUS_NETWORK_UNREACHABLE : STATUS_INTERNAL_ERROR;
    return STATUS_SUCCESS;
}

static bool valid_inet(const SOCKADDR_INET *a)
{
    return a && (a->si_family == AF_INET || a->si_family == AF_INET6);
}

NETIO_STATUS GetBestRoute2(PNET_LUID InterfaceLuid, NET_IFINDEX InterfaceIndex,
                           const SOCKADDR_INET *SourceAddress,
                           const SOCKADDR_INET *DestinationAddress, ULONG AddressSortOptions,
                           PMIB_IPFORWARD_ROW2 BestRoute, SOCKADDR_INET *BestSourceAddress)
{
    (void)AddressSortOptions;
    wdk_require_irql_max(PASSIVE_LEVEL, "GetBestRoute2");
    if (!valid_inet(DestinationAddress) || !BestRoute || !BestSourceAddress ||
        (SourceAddress && SourceAddress->si_family != 0 &&
         SourceAddress->si_family != DestinationAddress->si_family))
        return STATUS_INVALID_PARAMETER;
    NET_IFINDEX oif = InterfaceIndex;
    if (!oif && InterfaceLuid && InterfaceLuid->Value) {
        NTSTATUS st = ConvertInterfaceLuidToIndex(InterfaceLuid, &oif);
        if (st != STATUS_SUCCESS)
            return st;
    }
    const SOCKADDR_INET *src =
        SourceAddress && SourceAddress->si_family != 0 ? SourceAddress : NULL;
    struct nl_conn c;
    NTSTATUS st = nl_open(&c);
    if (st != STATUS_SUCCESS)
        return st;
    struct best_ctx best, fib;
    st = route_get(&c, DestinationAddress, src, oif, 0, &best);
    if (st == STATUS_SUCCESS) {
        /* the prefix that matched: the FIB entry (kernels before 4.13 answer with the host
         * route, a /32 or /128 of the destination, which is what the first answer already has) */
        if (route_get(&c, DestinationAddress, src, oif, RTM_F_FIB_MATCH, &fib) == STATUS_SUCCESS) {
            best.row.DestinationPrefix = fib.row.DestinationPrefix;
            best.row.Protocol = fib.row.Protocol;
            best.row.Origin = fib.row.Origin;
            best.row.Metric = fib.row.Metric;
        }
        *BestRoute = best.row;
        *BestSourceAddress = best.src;
    }
    close(c.fd);
    return st;
}

NETIO_STATUS GetBestInterfaceEx(PSOCKADDR pDestAddr, PULONG pdwBestIfIndex)
{
    if (!pDestAddr || !pdwBestIfIndex ||
        (pDestAddr->sa_family != AF_INET && pDestAddr->sa_family != AF_INET6))
        return STATUS_INVALID_PARAMETER;
    SOCKADDR_INET dst;
    memset(&dst, 0, sizeof dst);
    memcpy(&dst, pDestAddr,
           pDestAddr->sa_family == AF_INET ? sizeof(SOCKADDR_IN) : sizeof(SOCKADDR_IN6));
    MIB_IPFORWARD_ROW2 row;
    SOCKADDR_INET src;
    NTSTATUS st = GetBestRoute2(NULL, 0, NULL, &dst, 0, &row, &src);
    if (st == STATUS_SUCCESS)
        *pdwBestIfIndex = row.InterfaceIndex;
    return st;
}

/* Tables: rows gathered in a growing array, then copied into one pool block (header + rows). */
struct rows {
    void *v;
    size_t n, cap, size;
    bool failed;
};

static void *rows_add(struct rows *r)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        void *v = realloc(r->v, cap * r->size);
        if (!v) {
            r->failed = true;
            return NULL;
        }
        r->v = v;
        r->cap = cap;
    }
    void *row = (char *)r->v + r->n++ * r->size;
    memset(row, 0, r->size);
    return row;
}

static int table_route_cb(const struct nlmsghdr *m, void *ctx)
{
    struct rows *r = ctx;
    MIB_IPFORWARD_ROW2 row;
    const struct rtmsg *rt = NLMSG_DATA(m);
    if (!route_row(m, &row) || (rt->rtm_table != RT_TABLE_MAIN && rt->rtm_table != RT_TABLE_LOCAL))
        return 0;
    MIB_IPFORWARD_ROW2 *slot = rows_add(r);
    if (slot)
        *slot = row;
    return 0;
}

static int table_neigh_cb(const struct nlmsghdr *m, void *ctx)
{
    struct rows *r = ctx;
    if (m->nlmsg_type != RTM_NEWNEIGH || m->nlmsg_len < NLMSG_LENGTH(sizeof(struct ndmsg)))
        return 0;
    const struct ndmsg *nd = NLMSG_DATA(m);
    size_t alen = addr_len(nd->ndm_family);
    if (alen == 0 || (nd->ndm_state & (NUD_NOARP | NUD_PERMANENT)))
        return 0;
    MIB_IPPATH_ROW *p = rows_add(r);
    if (!p)
        return 0;
    set_inet(&p->Source, nd->ndm_family, NULL);
    set_inet(&p->Destination, nd->ndm_family, NULL);
    set_inet(&p->CurrentNextHop, nd->ndm_family, NULL);
    p->InterfaceIndex = (NET_IFINDEX)nd->ndm_ifindex;
    ConvertInterfaceIndexToLuid(p->InterfaceIndex, &p->InterfaceLuid);
    p->IsReachable = (nd->ndm_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE)) != 0;
    size_t len = m->nlmsg_len - NLMSG_LENGTH(sizeof(struct ndmsg));
    for (const struct rtattr *a = attr_first(nd, sizeof *nd); RTA_OK(a, len);
         a = attr_next(a, &len))
        if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == alen) {
            set_inet(&p->Destination, nd->ndm_family, RTA_DATA(a));
            p->CurrentNextHop = p->Destination; /* a neighbour is its own next hop */
        }
    return 0;
}

static NTSTATUS dump(int type, ADDRESS_FAMILY family, size_t hdr, size_t row, void **table,
                     int (*cb)(const struct nlmsghdr *, void *), void *caller)
{
    if (!table || (family != AF_UNSPEC && family != AF_INET && family != AF_INET6))
        return STATUS_INVALID_PARAMETER;
    wdk_require_irql_max(PASSIVE_LEVEL, "GetIpForwardTable2 / GetIpPathTable");
    struct nl_conn c;
    NTSTATUS st = nl_open(&c);
    if (st != STATUS_SUCCESS)
        return st;
    struct {
        struct nlmsghdr h;
        union {
            struct rtmsg r;
            struct ndmsg n;
        } u;
    } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_type = (unsigned short)type;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    if (type == RTM_GETROUTE) {
        req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
        req.u.r.rtm_family = (unsigned char)family;
    } else {
        req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
        req.u.n.ndm_family = (unsigned char)family;
    }
    struct rows r = {NULL, 0, 0, row, false};
    int rc = nl_talk(&c, &req.h, cb, &r);
    close(c.fd);
    if (rc != 0 || r.failed) {
        free(r.v);
        return rc != 0 ? STATUS_INTERNAL_ERROR : STATUS_NO_MEMORY;
    }
    /* header (NumEntries, padded to the row's alignment) then the rows */
    size_t bytes = hdr + (r.n ? r.n : 1) * row;
    char *t = wdk_pool_alloc(POOL_FLAG_NON_PAGED, bytes, WDK_TAG_MIB, caller);
    if (!t) {
        free(r.v);
        return STATUS_NO_MEMORY;
    }
    memset(t, 0, bytes);
    ULONG entries = (ULONG)r.n;
    memcpy(t, &entries, sizeof entries);
    if (r.n)
        memcpy(t + hdr, r.v, r.n * row);
    free(r.v);
    *table = t;
    return STATUS_SUCCESS;
}

NETIO_STATUS GetIpForwardTable2(ADDRESS_FAMILY Family, PMIB_IPFORWARD_TABLE2 *Table)
{
    return dump(RTM_GETROUTE, Family, offsetof(MIB_IPFORWARD_TABLE2, Table),
                sizeof(MIB_IPFORWARD_ROW2), (void **)Table, table_route_cb,
                __builtin_return_address(0));
}

NETIO_STATUS GetIpPathTable(ADDRESS_FAMILY Family, PMIB_IPPATH_TABLE *Table)
{
    return dump(RTM_GETNEIGH, Family, offsetof(MIB_IPPATH_TABLE, Table), sizeof(MIB_IPPATH_ROW),
                (void **)Table, table_neigh_cb, __builtin_return_address(0));
}

VOID FreeMibTable(PVOID Memory)
{
    if (Memory)
        wdk_pool_free(Memory, WDK_TAG_MIB, true, __builtin_return_address(0));
}
