/* pcap writer: see pcap.h. */
#include "observe/pcap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "util/lock.h"

#define MPA_KEY_LEN 16
#define MPA_HDR_LEN 20
#define MPA_PD_MAX  512
#define TCP_SYN     0x02
#define TCP_FIN     0x01
#define TCP_PSH     0x08
#define TCP_ACK     0x10

struct dir {
    uint32_t seq; /* next sequence number of this direction */
    bool fin;
    bool hs_done;     /* the first MPA frame went out as a segment of its own */
    uint32_t hs_need; /* bytes of that frame (MPA_HDR_LEN until the header is known) */
    uint32_t hs_got;
    uint8_t hs[MPA_HDR_LEN + MPA_PD_MAX];
};

struct sndk_pcap_conn {
    struct sndk_pcap *p;
    struct sndk_pcap_conn *next, *prev;
    uint64_t id;
    bool mirror;
    bool v6;
    struct sockaddr_storage local, peer;
    struct dir d[2]; /* [1] out (local -> peer), [0] in */
};

struct sndk_pcap {
    struct sndk_pcap *next;
    char *path;
    unsigned users;
    struct sndk_mutex lock;
    FILE *f;
    struct sndk_pcap_conn *conns;
};

static struct sndk_mutex writers_lock = SNDK_MUTEX_INITIALIZER(SNDK_LOCK_PCAP_LIST);
static struct sndk_pcap *writers;

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

struct sndk_pcap *sndk_pcap_acquire(const char *path)
{
    sndk_mutex_lock(&writers_lock);
    for (struct sndk_pcap *p = writers; p; p = p->next) {
        if (strcmp(p->path, path) == 0) {
            p->users++;
            sndk_mutex_unlock(&writers_lock);
            return p;
        }
    }
    struct sndk_pcap *p = calloc(1, sizeof *p);
    if (!p || !(p->path = strdup(path))) {
        free(p);
        sndk_mutex_unlock(&writers_lock);
        errno = ENOMEM;
        return NULL;
    }
    p->f = fopen(path, "wbe");
    if (!p->f) {
        int e = errno;
        free(p->path);
        free(p);
        sndk_mutex_unlock(&writers_lock);
        errno = e;
        return NULL;
    }
    /* Fully buffered so that one record becomes one write(); every hook flushes before it
     * returns, so a process that dies or exits without closing (a failed connection, a
     * timeout's kill) leaves every byte recorded so far in the file. */
    setvbuf(p->f, NULL, _IOFBF, 1 << 20);
    /* classic pcap, microseconds, native byte order (readers detect it from the magic) */
    struct {
        uint32_t magic;
        uint16_t major, minor;
        int32_t zone;
        uint32_t sigfigs, snaplen, linktype;
    } hdr = {0xa1b2c3d4u, 2, 4, 0, 0, 262144, 1 /* Ethernet */};
    fwrite(&hdr, sizeof hdr, 1, p->f);
    fflush(p->f);
    sndk_mutex_init_ranked(&p->lock, SNDK_LOCK_PCAP);
    p->users = 1;
    p->next = writers;
    writers = p;
    sndk_mutex_unlock(&writers_lock);
    return p;
}

void sndk_pcap_release(struct sndk_pcap *p)
{
    if (!p)
        return;
    sndk_mutex_lock(&writers_lock);
    if (--p->users > 0) {
        sndk_mutex_unlock(&writers_lock);
        return;
    }
    for (struct sndk_pcap **pp = &writers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    sndk_mutex_unlock(&writers_lock);
    fclose(p->f);
    sndk_mutex_destroy(&p->lock);
    free(p->path);
    free(p);
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

static uint16_t port_of(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)a)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)(const void *)a)->sin6_port);
}

static uint16_t ip_csum(const uint8_t *p, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)~s;
}

/* One segment of c in direction `out`: flags, payload gathered from iov (skip bytes first). */
static void segment(struct sndk_pcap_conn *c, bool out, uint8_t flags, const struct iovec *iov,
                    int iovcnt, size_t skip, size_t len)
{
    struct sndk_pcap *p = c->p;
    struct dir *me = &c->d[out], *other = &c->d[!out];
    const struct sockaddr_storage *src = out ? &c->local : &c->peer;
    const struct sockaddr_storage *dst = out ? &c->peer : &c->local;
    uint8_t h[14 + 40 + 20];
    size_t hl = 0;
    memset(h, 0, sizeof h);
    /* Ethernet: locally administered MACs, 02:00:00:00:00:01 (local) / :02 (peer) */
    h[0] = 0x02, h[5] = out ? 2 : 1;
    h[6] = 0x02, h[11] = out ? 1 : 2;
    put16(h + 12, c->v6 ? 0x86DD : 0x0800);
    hl = 14;
    if (!c->v6) {
        uint8_t *ip = h + hl;
        ip[0] = 0x45;
        put16(ip + 2, (uint16_t)(20 + 20 + len));
        put16(ip + 6, 0x4000); /* DF */
        ip[8] = 64;
        ip[9] = IPPROTO_TCP;
        memcpy(ip + 12, &((const struct sockaddr_in *)(const void *)src)->sin_addr, 4);
        memcpy(ip + 16, &((const struct sockaddr_in *)(const void *)dst)->sin_addr, 4);
        put16(ip + 10, ip_csum(ip, 20));
        hl += 20;
    } else {
        uint8_t *ip = h + hl;
        ip[0] = 0x60;
        put16(ip + 4, (uint16_t)(20 + len));
        ip[6] = IPPROTO_TCP;
        ip[7] = 64;
        memcpy(ip + 8, &((const struct sockaddr_in6 *)(const void *)src)->sin6_addr, 16);
        memcpy(ip + 24, &((const struct sockaddr_in6 *)(const void *)dst)->sin6_addr, 16);
        hl += 40;
    }
    uint8_t *tcp = h + hl;
    put16(tcp, port_of(src));
    put16(tcp + 2, port_of(dst));
    put32(tcp + 4, me->seq);
    put32(tcp + 8, (flags & TCP_ACK) ? other->seq : 0);
    tcp[12] = 5 << 4;
    tcp[13] = flags;
    put16(tcp + 14, 65535);
    hl += 20;

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct {
        uint32_t sec, usec, caplen, len;
    } rec = {(uint32_t)tv.tv_sec, (uint32_t)tv.tv_usec, (uint32_t)(hl + len), (uint32_t)(hl + len)};
    fwrite(&rec, sizeof rec, 1, p->f);
    fwrite(h, hl, 1, p->f);
    size_t left = len;
    for (int i = 0; i < iovcnt && left > 0; i++) {
        size_t n = iov[i].iov_len;
        if (skip >= n) {
            skip -= n;
            continue;
        }
        const uint8_t *b = (const uint8_t *)iov[i].iov_base + skip;
        n -= skip;
        skip = 0;
        if (n > left)
            n = left;
        fwrite(b, n, 1, p->f);
        left -= n;
    }
    me->seq += (uint32_t)len + ((flags & (TCP_SYN | TCP_FIN)) ? 1u : 0u);
}

static void data(struct sndk_pcap_conn *c, bool out, const struct iovec *iov, int iovcnt,
                 size_t skip, size_t bytes)
{
    while (bytes > 0) {
        size_t n = bytes > SNDK_PCAP_MSS ? SNDK_PCAP_MSS : bytes;
        segment(c, out, TCP_PSH | TCP_ACK, iov, iovcnt, skip, n);
        skip += n;
        bytes -= n;
    }
}

struct sndk_pcap_conn *sndk_pcap_conn_new(struct sndk_pcap *p, uint64_t id,
                                          const struct sockaddr *local, const struct sockaddr *peer,
                                          bool active)
{
    if (!p || !local || !peer || local->sa_family != peer->sa_family ||
        (local->sa_family != AF_INET && local->sa_family != AF_INET6))
        return NULL;
    struct sndk_pcap_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    size_t alen =
        local->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    memcpy(&c->local, local, alen);
    memcpy(&c->peer, peer, alen);
    c->v6 = local->sa_family == AF_INET6;
    c->p = p;
    c->id = id;
    for (int i = 0; i < 2; i++) {
        c->d[i].hs_need = MPA_HDR_LEN;
        /* distinct, reproducible initial sequence numbers */
        c->d[i].seq = (uint32_t)(0x10000000u * (unsigned)(i + 1) + (uint32_t)id * 0x1000u);
    }
    sndk_mutex_lock(&p->lock);
    for (struct sndk_pcap_conn *o = p->conns; o; o = o->next)
        if (!o->mirror && same_addr(&o->local, &c->peer) && same_addr(&o->peer, &c->local))
            c->mirror = true;
    c->next = p->conns;
    if (p->conns)
        p->conns->prev = c;
    p->conns = c;
    if (!c->mirror) {
        /* the three-way handshake, from the side that connected */
        bool a = active;
        segment(c, a, TCP_SYN, NULL, 0, 0, 0);
        segment(c, !a, TCP_SYN | TCP_ACK, NULL, 0, 0, 0);
        segment(c, a, TCP_ACK, NULL, 0, 0, 0);
        fflush(p->f);
    }
    sndk_mutex_unlock(&p->lock);
    return c;
}

void sndk_pcap_record(struct sndk_pcap_conn *c, bool out, const struct iovec *iov, int iovcnt,
                      size_t bytes)
{
    if (c->mirror)
        return;
    struct sndk_pcap *p = c->p;
    sndk_mutex_lock(&p->lock);
    struct dir *d = &c->d[out];
    size_t skip = 0;
    /* The first MPA frame of the direction goes out alone (see pcap.h). */
    while (!d->hs_done && skip < bytes) {
        size_t want = d->hs_need - d->hs_got;
        size_t n = bytes - skip < want ? bytes - skip : want;
        /* gather n bytes at offset skip */
        size_t off = skip, k = 0;
        for (int i = 0; i < iovcnt && k < n; i++) {
            size_t len = iov[i].iov_len;
            if (off >= len) {
                off -= len;
                continue;
            }
            size_t m = len - off < n - k ? len - off : n - k;
            memcpy(d->hs + d->hs_got + k, (const uint8_t *)iov[i].iov_base + off, m);
            k += m;
            off = 0;
        }
        d->hs_got += (uint32_t)n;
        skip += n;
        if (d->hs_got == MPA_HDR_LEN && d->hs_need == MPA_HDR_LEN) {
            uint32_t pd = (uint32_t)d->hs[18] << 8 | d->hs[19];
            bool is_mpa = memcmp(d->hs, "MPA ID Req Frame", MPA_KEY_LEN) == 0 ||
                          memcmp(d->hs, "MPA ID Rep Frame", MPA_KEY_LEN) == 0;
            d->hs_need = MPA_HDR_LEN + (is_mpa && pd <= MPA_PD_MAX ? pd : 0);
        }
        if (d->hs_got == d->hs_need) {
            struct iovec v = {d->hs, d->hs_got};
            data(c, out, &v, 1, 0, d->hs_got);
            d->hs_done = true;
        }
    }
    if (skip < bytes)
        data(c, out, iov, iovcnt, skip, bytes - skip);
    fflush(p->f);
    sndk_mutex_unlock(&p->lock);
}

static void fin_locked(struct sndk_pcap_conn *c, bool out)
{
    sndk_assert_held(&c->p->lock);
    struct dir *d = &c->d[out];
    if (d->fin || c->mirror)
        return;
    if (!d->hs_done && d->hs_got) { /* a frame cut short: still show its bytes */
        struct iovec v = {d->hs, d->hs_got};
        data(c, out, &v, 1, 0, d->hs_got);
        d->hs_done = true;
    }
    d->fin = true;
    segment(c, out, TCP_FIN | TCP_ACK, NULL, 0, 0, 0);
}

void sndk_pcap_fin(struct sndk_pcap_conn *c, bool out)
{
    if (!c)
        return;
    sndk_mutex_lock(&c->p->lock);
    fin_locked(c, out);
    fflush(c->p->f);
    sndk_mutex_unlock(&c->p->lock);
}

void sndk_pcap_conn_close(struct sndk_pcap_conn *c)
{
    if (!c)
        return;
    struct sndk_pcap *p = c->p;
    sndk_mutex_lock(&p->lock);
    fin_locked(c, true);
    fin_locked(c, false);
    if (c->prev)
        c->prev->next = c->next;
    else
        p->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    fflush(p->f);
    sndk_mutex_unlock(&p->lock);
    free(c);
}
