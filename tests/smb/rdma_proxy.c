#include "rdma_proxy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define PROXY_REGIONS 64
#define PROXY_PEND    256

static uint16_t g16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t g32(const uint8_t *p)
{
    return (uint32_t)g16(p) | ((uint32_t)g16(p + 2) << 16);
}
static uint64_t g64(const uint8_t *p)
{
    return (uint64_t)g32(p) | ((uint64_t)g32(p + 4) << 32);
}
static void p16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void p32(uint8_t *p, uint32_t v)
{
    p16(p, (uint16_t)v);
    p16(p + 2, (uint16_t)(v >> 16));
}

struct region {
    int live, invalidated;
    enum smb_rdma_access access;
    unsigned ndesc;
    smb_buffer_desc desc[2];
};

struct pend {
    int used, is_read, invalidate;
    uint64_t mid;
    unsigned ndesc;
    smb_buffer_desc desc[16];
};

struct proxy {
    smb_transport base;
    smb_transport *inner;
    size_t max_rdma;
    uint32_t next_token;
    struct region regions[PROXY_REGIONS];
    struct pend pend[PROXY_PEND];
    uint8_t *scratch;
    size_t scratch_cap;
    struct rdma_proxy_counts counts;
    char err[256];
};

static int perr(struct proxy *p, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(struct proxy *p, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof(p->err), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rdma_proxy: %s\n", p->err);
    return rc;
}

/* The region a descriptor lies in, with the access wanted; NULL when none. */
static struct region *find(struct proxy *p, const smb_buffer_desc *d, enum smb_rdma_access acc)
{
    for (unsigned i = 0; i < PROXY_REGIONS; i++) {
        struct region *r = &p->regions[i];
        if (!r->live || r->invalidated || r->access != acc)
            continue;
        for (unsigned k = 0; k < r->ndesc; k++)
            if (r->desc[k].token == d->token && d->offset >= r->desc[k].offset &&
                d->length <= r->desc[k].length &&
                d->offset - r->desc[k].offset <= r->desc[k].length - d->length)
                return r;
    }
    return NULL;
}

static int parse_descs(struct proxy *p, const uint8_t *msg, size_t len, uint16_t off, uint16_t n,
                       enum smb_rdma_access acc, struct pend *pd, uint64_t *total)
{
    if (n == 0 || n % 16 || n / 16 > 16 || off < 64 + 48 || (size_t)off + n > len)
        return perr(p, -EPROTO, "channel info [%u, +%u) of a %zu-byte request is wrong", off, n,
                    len);
    pd->ndesc = n / 16;
    *total = 0;
    for (unsigned i = 0; i < pd->ndesc; i++) {
        const uint8_t *q = msg + off + 16 * i;
        pd->desc[i].offset = g64(q);
        pd->desc[i].token = g32(q + 8);
        pd->desc[i].length = g32(q + 12);
        if (!find(p, &pd->desc[i], acc))
            return perr(p, -EPROTO,
                        "descriptor %u (token 0x%x, %u bytes) names no live %s "
                        "registration",
                        i, pd->desc[i].token, pd->desc[i].length,
                        acc == SMB_RDMA_PEER_WRITES ? "peer-writes" : "peer-reads");
        *total += pd->desc[i].length;
    }
    return 0;
}

static struct pend *pend_new(struct proxy *p)
{
    for (unsigned i = 0; i < PROXY_PEND; i++)
        if (!p->pend[i].used) {
            memset(&p->pend[i], 0, sizeof(p->pend[i]));
            p->pend[i].used = 1;
            return &p->pend[i];
        }
    return NULL;
}

static int ensure_scratch(struct proxy *p, size_t n)
{
    if (n <= p->scratch_cap)
        return 0;
    uint8_t *s = realloc(p->scratch, n);
    if (!s)
        return -ENOMEM;
    p->scratch = s;
    p->scratch_cap = n;
    return 0;
}

static int proxy_send(smb_transport *base, const void *vmsg, size_t len)
{
    struct proxy *p = (struct proxy *)base;
    const uint8_t *msg = vmsg;
    if (len < 64 + 48)
        return p->inner->ops->send(p->inner, msg, len);
    uint16_t cmd = g16(msg + 12);
    const uint8_t *b = msg + 64;
    if (cmd != 0x0008 && cmd != 0x0009)
        return p->inner->ops->send(p->inner, msg, len);
    int is_read = cmd == 0x0008;
    uint32_t channel = g32(b + (is_read ? 36 : 32));
    if (channel == 0) {
        if (is_read)
            p->counts.inline_reads++;
        else
            p->counts.inline_writes++;
        return p->inner->ops->send(p->inner, msg, len);
    }
    if (channel > 2)
        return perr(p, -EPROTO, "Channel %u", channel);
    if (g32(msg + 16) & 0x8)
        return perr(p, -EPROTO, "a signed %s with an RDMA channel cannot be emulated",
                    is_read ? "READ" : "WRITE");
    struct pend *pd = pend_new(p);
    if (!pd)
        return perr(p, -ENOSPC, "too many requests in flight");
    pd->mid = g64(msg + 24);
    pd->is_read = is_read;
    pd->invalidate = channel == 2;
    uint64_t total;
    int rc;
    if (is_read) {
        rc = parse_descs(p, msg, len, g16(b + 44), g16(b + 46), SMB_RDMA_PEER_WRITES, pd, &total);
        if (!rc && g32(b + 4) != total)
            rc = perr(p, -EPROTO, "READ Length %u, descriptors cover %llu", g32(b + 4),
                      (unsigned long long)total);
        if (!rc && g32(b + 40) != 0)
            rc = perr(p, -EPROTO, "READ RemainingBytes %u, not 0", g32(b + 40));
        if (rc) {
            pd->used = 0;
            return rc;
        }
        /* forward inline: channel NONE, no channel info, one Buffer byte */
        if (ensure_scratch(p, 64 + 49))
            return -ENOMEM;
        memcpy(p->scratch, msg, 64 + 48);
        p32(p->scratch + 64 + 36, 0);
        p16(p->scratch + 64 + 44, 0);
        p16(p->scratch + 64 + 46, 0);
        p->scratch[64 + 48] = 0;
        p->counts.rdma_reads++;
        return p->inner->ops->send(p->inner, p->scratch, 64 + 49);
    }
    rc = parse_descs(p, msg, len, g16(b + 40), g16(b + 42), SMB_RDMA_PEER_READS, pd, &total);
    if (!rc && (g32(b + 4) != 0 || g16(b + 2) != 0))
        rc = perr(p, -EPROTO, "WRITE over RDMA with Length %u and DataOffset %u, not 0", g32(b + 4),
                  g16(b + 2));
    if (!rc && g32(b + 36) != total)
        rc = perr(p, -EPROTO, "WRITE RemainingBytes %u, descriptors cover %llu", g32(b + 36),
                  (unsigned long long)total);
    if (rc) {
        pd->used = 0;
        return rc;
    }
    /* the server's RDMA Read, then the request inline */
    if (ensure_scratch(p, 64 + 48 + total))
        return -ENOMEM;
    memcpy(p->scratch, msg, 64 + 48);
    uint8_t *d = p->scratch + 64 + 48;
    for (unsigned i = 0; i < pd->ndesc; i++) {
        memcpy(d, (const void *)(uintptr_t)pd->desc[i].offset, pd->desc[i].length);
        d += pd->desc[i].length;
    }
    uint8_t *nb = p->scratch + 64;
    p16(nb + 2, 64 + 48);
    p32(nb + 4, (uint32_t)total);
    p32(nb + 32, 0);
    p32(nb + 36, 0);
    p16(nb + 40, 0);
    p16(nb + 42, 0);
    p->counts.rdma_writes++;
    return p->inner->ops->send(p->inner, p->scratch, 64 + 48 + total);
}

static void invalidate(struct proxy *p, const struct pend *pd)
{
    for (unsigned i = 0; i < pd->ndesc; i++) {
        struct region *r =
            find(p, &pd->desc[i], pd->is_read ? SMB_RDMA_PEER_WRITES : SMB_RDMA_PEER_READS);
        if (r && !r->invalidated) {
            r->invalidated = 1;
            p->counts.peer_invalidations++;
        }
    }
}

static int proxy_recv(smb_transport *base, void *vbuf, size_t cap, size_t *len, int timeout_ms)
{
    struct proxy *p = (struct proxy *)base;
    uint8_t *buf = vbuf;
    int rc = p->inner->ops->recv(p->inner, buf, cap, len, timeout_ms);
    if (rc || *len < 64)
        return rc;
    uint16_t cmd = g16(buf + 12);
    uint32_t status = g32(buf + 8);
    uint64_t mid = g64(buf + 24);
    if ((cmd != 0x0008 && cmd != 0x0009) || status == 0x103)
        return 0;
    struct pend *pd = NULL;
    for (unsigned i = 0; i < PROXY_PEND; i++)
        if (p->pend[i].used && p->pend[i].mid == mid)
            pd = &p->pend[i];
    if (!pd)
        return 0;
    pd->used = 0;
    if (status != 0)
        return 0;
    if (pd->is_read) {
        if (*len < 64 + 16)
            return perr(p, -EPROTO, "short READ response");
        uint8_t off = buf[64 + 2];
        uint32_t n = g32(buf + 64 + 4);
        if ((size_t)off + n > *len)
            return perr(p, -EPROTO, "READ response data outside the message");
        /* the server's RDMA Write into the descriptors, in order */
        const uint8_t *s = buf + off;
        uint32_t left = n;
        for (unsigned i = 0; i < pd->ndesc && left; i++) {
            uint32_t k = left < pd->desc[i].length ? left : pd->desc[i].length;
            memcpy((void *)(uintptr_t)pd->desc[i].offset, s, k);
            s += k;
            left -= k;
        }
        /* [MS-SMB2] 3.3.5.12: DataLength 0, DataRemaining the bytes written by RDMA */
        p32(buf + 64 + 4, 0);
        p32(buf + 64 + 8, n);
        *len = 64 + 16;
    }
    if (pd->invalidate)
        invalidate(p, pd);
    return 0;
}

static int proxy_register(smb_transport *base, void *buf, size_t len, enum smb_rdma_access access,
                          smb_rdma_region **region, smb_buffer_desc *desc, unsigned max_desc,
                          unsigned *ndesc)
{
    struct proxy *p = (struct proxy *)base;
    if (len == 0 || len > p->max_rdma)
        return perr(p, -EINVAL, "register of %zu bytes (max %zu)", len, p->max_rdma);
    for (unsigned i = 0; i < PROXY_REGIONS; i++) {
        struct region *r = &p->regions[i];
        if (r->live)
            continue;
        memset(r, 0, sizeof(*r));
        r->live = 1;
        r->access = access;
        /* two descriptors above 64 KiB, as a transport with page lists might give */
        r->ndesc = len > 65536 && max_desc >= 2 ? 2 : 1;
        size_t first = r->ndesc == 2 ? len / 2 : len;
        r->desc[0] = (smb_buffer_desc){(uint64_t)(uintptr_t)buf, ++p->next_token, (uint32_t)first};
        if (r->ndesc == 2)
            r->desc[1] = (smb_buffer_desc){(uint64_t)(uintptr_t)buf + first, ++p->next_token,
                                           (uint32_t)(len - first)};
        memcpy(desc, r->desc, sizeof(smb_buffer_desc) * r->ndesc);
        *ndesc = r->ndesc;
        *region = (smb_rdma_region *)r;
        p->counts.registrations++;
        return 0;
    }
    return perr(p, -ENOSPC, "no free registration");
}

static int proxy_release(smb_transport *base, smb_rdma_region *region, enum smb_rdma_release *how)
{
    struct proxy *p = (struct proxy *)base;
    struct region *r = (struct region *)region;
    if (r < p->regions || r >= p->regions + PROXY_REGIONS || !r->live)
        return perr(p, -EINVAL, "release of a region that is not registered");
    if (how)
        *how = r->invalidated ? SMB_RDMA_RELEASED_BY_PEER : SMB_RDMA_RELEASED_LOCALLY;
    r->live = 0;
    p->counts.releases++;
    return 0;
}

static size_t proxy_max_message(smb_transport *base)
{
    struct proxy *p = (struct proxy *)base;
    return p->inner->ops->max_message(p->inner);
}

static size_t proxy_max_rdma(smb_transport *base)
{
    return ((struct proxy *)base)->max_rdma;
}

static void proxy_stats(smb_transport *base, smb_transport_stats *out)
{
    struct proxy *p = (struct proxy *)base;
    p->inner->ops->get_stats(p->inner, out);
}

static const char *proxy_error(smb_transport *base)
{
    struct proxy *p = (struct proxy *)base;
    return p->err[0] ? p->err : p->inner->ops->error(p->inner);
}

static void proxy_destroy(smb_transport *base)
{
    struct proxy *p = (struct proxy *)base;
    p->inner->ops->destroy(p->inner);
    free(p->scratch);
    free(p);
}

static const smb_transport_ops proxy_ops = {
    .name = "rdma-proxy",
    .send = proxy_send,
    .recv = proxy_recv,
    .register_buffer = proxy_register,
    .release_buffer = proxy_release,
    .max_message = proxy_max_message,
    .max_rdma = proxy_max_rdma,
    .get_stats = proxy_stats,
    .error = proxy_error,
    .destroy = proxy_destroy,
};

smb_transport *rdma_proxy_new(smb_transport *inner, size_t max_rdma)
{
    struct proxy *p = calloc(1, sizeof(*p));
    CHECK(p != NULL);
    p->base.ops = &proxy_ops;
    p->inner = inner;
    p->max_rdma = max_rdma;
    p->next_token = 0x5000;
    return &p->base;
}

void rdma_proxy_counts(smb_transport *t, struct rdma_proxy_counts *out)
{
    *out = ((struct proxy *)t)->counts;
}

unsigned rdma_proxy_live(smb_transport *t)
{
    struct proxy *p = (struct proxy *)t;
    unsigned n = 0;
    for (unsigned i = 0; i < PROXY_REGIONS; i++)
        n += p->regions[i].live != 0;
    return n;
}
