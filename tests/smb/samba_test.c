/* The SMB2 client against a private Samba smbd over Direct TCP on loopback: dialects 3.0.2 and
 * 3.1.1, NTLMv2 (good and bad password), tree connect (good and bad share), put / get of
 * 0 B, 1 B, 65537 B and 8 MiB + 7 compared byte for byte (through the client and in the
 * share's folder), depth 1 and 8, signing required, listing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "rdma_proxy.h"
#include "samba_fixture.h"
#include "smb/direct_tcp.h"
#include "smb/smb2_client.h"

struct conn {
    smb_transport *t;
    smb2_client *c;
};

static int try_connect(struct samba *s, smb2_client_options *o, const char *share, struct conn *k,
                       char *err, size_t errlen)
{
    int rc = smb_direct_tcp_connect("127.0.0.1", s->port, &k->t, err, errlen);
    CHECK_MSG(rc == 0, "Direct TCP connect: %s", err);
    rc = smb2_client_connect(k->t, o, "127.0.0.1", share, &k->c, err, errlen);
    if (rc) {
        k->t->ops->destroy(k->t);
        k->t = NULL;
    }
    return rc;
}

static void opts_init(smb2_client_options *o, uint16_t dialect, unsigned depth)
{
    memset(o, 0, sizeof(*o));
    o->user = SAMBA_USER;
    o->password = SAMBA_PASSWORD;
    o->domain = "";
    o->channel = SMB2_IO_INLINE;
    o->depth = depth;
    o->max_dialect = dialect;
    o->timeout_ms = 20000;
}

static void conn_close(struct conn *k)
{
    smb2_client_disconnect(k->c);
    k->t->ops->destroy(k->t);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

static int memfd_with(const uint8_t *p, size_t n)
{
    int fd = memfd_create("smb-test", 0);
    CHECK(fd >= 0);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, p + off, n - off);
        CHECK(w > 0);
        off += (size_t)w;
    }
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    return fd;
}

static uint8_t *slurp_fd(int fd, size_t *n)
{
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    CHECK(p != NULL);
    CHECK(pread(fd, p, (size_t)st.st_size, 0) == st.st_size);
    *n = (size_t)st.st_size;
    return p;
}

/* put then get each size; checks the bytes through the client and in the share's folder. */
static void put_get_sizes(struct samba *s, struct conn *k, unsigned depth)
{
    static const size_t sizes[] = {0, 1, 65537, 8 * 1024 * 1024 + 7};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *data = malloc(n + 1);
        CHECK(data != NULL);
        fill(data, n, (uint32_t)(n + depth));
        char name[64];
        snprintf(name, sizeof(name), "f_%zu_d%u.bin", n, depth);
        int in = memfd_with(data, n);
        smb2_io_stats st;
        int rc = smb2_put(k->c, in, name, &st);
        CHECK_MSG(rc == 0, "put %zu bytes: %d %s", n, rc, smb2_client_error(k->c));
        CHECK_EQ_U64(st.bytes, n);
        if (n > 0)
            CHECK(st.requests_write >= 1);
        CHECK_EQ_U64(st.rdma_requests, 0);
        CHECK_EQ_U64(st.inline_requests, st.requests_write);
        close(in);
        /* the server's copy */
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", s->share, name);
        int sfd = open(path, O_RDONLY);
        CHECK_MSG(sfd >= 0, "%s: %s", path, strerror(errno));
        size_t sn;
        uint8_t *sdata = slurp_fd(sfd, &sn);
        close(sfd);
        CHECK_EQ_U64(sn, n);
        CHECK_MEM(sdata, data, n);
        free(sdata);
        /* and back, with another remote spelling of the same path */
        int out = memfd_create("smb-get", 0);
        CHECK(out >= 0);
        char rname[80];
        snprintf(rname, sizeof(rname), "\\%s", name);
        rc = smb2_get(k->c, rname, out, &st);
        CHECK_MSG(rc == 0, "get %zu bytes: %d %s", n, rc, smb2_client_error(k->c));
        CHECK_EQ_U64(st.bytes, n);
        size_t gn;
        uint8_t *got = slurp_fd(out, &gn);
        close(out);
        CHECK_EQ_U64(gn, n);
        CHECK_MEM(got, data, n);
        if (n > 65536 && depth > 1)
            CHECK(st.requests_read >= 1);
        free(got);
        free(data);
    }
}

static void put_get_case(uint16_t dialect, unsigned depth, uint32_t io_size, int sign,
                         const char *server_signing)
{
    struct samba s;
    samba_start(&s, server_signing);
    smb2_client_options o;
    opts_init(&o, dialect, depth);
    o.io_size = io_size;
    o.require_signing = sign;
    struct conn k;
    char err[256];
    int rc = try_connect(&s, &o, SAMBA_SHARE, &k, err, sizeof(err));
    CHECK_MSG(rc == 0, "connect: %d %s", rc, err);
    CHECK_EQ_U64(smb2_client_dialect(k.c), dialect);
    put_get_sizes(&s, &k, depth);
    conn_close(&k);
    samba_stop(&s);
}

TEST_T(samba_dialect_302, 60)
{
    put_get_case(0x0302, 1, 0, 0, "default");
}

TEST_T(samba_dialect_311_depth1, 60)
{
    put_get_case(0x0311, 1, 0, 0, "default");
}

/* 64 KiB requests so that the 8 MiB file takes 129 of them, 8 in flight. */
TEST_T(samba_dialect_311_depth8, 60)
{
    put_get_case(0x0311, 8, 65536, 0, "default");
}

TEST_T(samba_302_depth8, 60)
{
    put_get_case(0x0302, 8, 100000, 0, "default");
}

TEST_T(samba_signing_311, 60)
{
    put_get_case(0x0311, 8, 65536, 1, "mandatory");
}

TEST_T(samba_signing_302, 60)
{
    put_get_case(0x0302, 4, 0, 1, "mandatory");
}

/* The server requires signing; the client did not ask: it signs because the server said so. */
TEST_T(samba_server_requires_signing, 60)
{
    put_get_case(0x0311, 2, 0, 0, "mandatory");
}

TEST_T(samba_bad_password, 60)
{
    struct samba s;
    samba_start(&s, "default");
    for (int d = 0; d < 2; d++) {
        smb2_client_options o;
        opts_init(&o, d ? 0x0311 : 0x0302, 1);
        o.password = "not-the-password";
        struct conn k;
        char err[256] = "";
        int rc = try_connect(&s, &o, SAMBA_SHARE, &k, err, sizeof(err));
        CHECK_EQ_I64(rc, -EACCES);
        CHECK_MSG(strcmp(err, "SESSION_SETUP: STATUS_LOGON_FAILURE") == 0, "err: %s", err);
    }
    samba_stop(&s);
}

TEST_T(samba_bad_share, 60)
{
    struct samba s;
    samba_start(&s, "default");
    smb2_client_options o;
    opts_init(&o, 0x0311, 1);
    struct conn k;
    char err[256] = "";
    int rc = try_connect(&s, &o, "no-such-share", &k, err, sizeof(err));
    CHECK_EQ_I64(rc, -ENOENT);
    CHECK_MSG(strcmp(err, "TREE_CONNECT: STATUS_BAD_NETWORK_NAME") == 0, "err: %s", err);
    samba_stop(&s);
}

struct listing {
    int n, saw_a, saw_dir;
    uint64_t a_size;
};

static int list_cb(void *ctx, const char *name, uint64_t size, int is_dir)
{
    struct listing *l = ctx;
    l->n++;
    if (!strcmp(name, "a.txt") && !is_dir) {
        l->saw_a = 1;
        l->a_size = size;
    }
    if (!strcmp(name, "sub") && is_dir)
        l->saw_dir = 1;
    return 0;
}

TEST_T(samba_list_and_missing_file, 60)
{
    struct samba s;
    samba_start(&s, "default");
    char path[512];
    snprintf(path, sizeof(path), "%s/sub", s.share);
    CHECK(mkdir(path, 0777) == 0);
    snprintf(path, sizeof(path), "%s/sub/a.txt", s.share);
    int fd = open(path, O_CREAT | O_WRONLY, 0666);
    CHECK(fd >= 0);
    CHECK(write(fd, "hello", 5) == 5);
    close(fd);
    snprintf(path, sizeof(path), "%s/a.txt", s.share);
    fd = open(path, O_CREAT | O_WRONLY, 0666);
    CHECK(fd >= 0);
    CHECK(write(fd, "0123456789", 10) == 10);
    close(fd);
    smb2_client_options o;
    opts_init(&o, 0x0311, 1);
    struct conn k;
    char err[256] = "";
    CHECK_MSG(try_connect(&s, &o, SAMBA_SHARE, &k, err, sizeof(err)) == 0, "%s", err);
    struct listing l = {0};
    int rc = smb2_list(k.c, "/", list_cb, &l);
    CHECK_MSG(rc == 0, "list: %d %s", rc, smb2_client_error(k.c));
    CHECK_EQ_U64(l.n, 2);
    CHECK(l.saw_a && l.saw_dir);
    CHECK_EQ_U64(l.a_size, 10);
    struct listing l2 = {0};
    rc = smb2_list(k.c, "sub", list_cb, &l2);
    CHECK_MSG(rc == 0, "list sub: %d %s", rc, smb2_client_error(k.c));
    CHECK_EQ_U64(l2.n, 1);
    CHECK_EQ_U64(l2.a_size, 5);
    int out = memfd_create("smb-get", 0);
    rc = smb2_get(k.c, "no/such/file", out, NULL);
    CHECK_EQ_I64(rc, -ENOENT);
    CHECK_MSG(strstr(smb2_client_error(k.c), "CREATE: STATUS_OBJECT_PATH_NOT_FOUND") ||
                  strstr(smb2_client_error(k.c), "CREATE: STATUS_OBJECT_NAME_NOT_FOUND"),
              "err: %s", smb2_client_error(k.c));
    /* the client stays usable after a failed command */
    rc = smb2_get(k.c, "sub/a.txt", out, NULL);
    CHECK_MSG(rc == 0, "get: %s", smb2_client_error(k.c));
    char buf[8];
    CHECK(pread(out, buf, 5, 0) == 5);
    CHECK_MEM(buf, "hello", 5);
    close(out);
    conn_close(&k);
    samba_stop(&s);
}

/* An RDMA channel on Direct TCP (no register_buffer) is refused before anything is sent. */
TEST_T(samba_rdma_channel_on_tcp, 60)
{
    struct samba s;
    samba_start(&s, "default");
    smb2_client_options o;
    opts_init(&o, 0x0311, 1);
    o.channel = SMB2_IO_RDMA;
    struct conn k;
    char err[256] = "";
    int rc = try_connect(&s, &o, SAMBA_SHARE, &k, err, sizeof(err));
    CHECK_EQ_I64(rc, -EINVAL);
    CHECK_MSG(strstr(err, "RDMA channel on the tcp transport"), "err: %s", err);
    samba_stop(&s);
}

/* The RDMA channels end to end, with the RDMA emulated by rdma_proxy above Direct TCP: the
 * requests' channel info is checked by the proxy, transfers below the inline threshold go
 * inline, and release_buffer's answer is counted (by the peer for RDMA_V1_INVALIDATE, locally
 * for RDMA_V1). */
static void rdma_case(enum smb2_channel ch, uint16_t dialect)
{
    struct samba s;
    samba_start(&s, "default");
    smb2_client_options o;
    opts_init(&o, dialect, 4);
    o.channel = ch;
    char err[256];
    smb_transport *tcp;
    CHECK_MSG(smb_direct_tcp_connect("127.0.0.1", s.port, &tcp, err, sizeof(err)) == 0, "%s", err);
    smb_transport *t = rdma_proxy_new(tcp, 1024 * 1024);
    smb2_client *c;
    int rc = smb2_client_connect(t, &o, "127.0.0.1", SAMBA_SHARE, &c, err, sizeof(err));
    CHECK_MSG(rc == 0, "connect: %d %s", rc, err);
    static const size_t sizes[] = {1, 4095, 4096, 65537, 8 * 1024 * 1024 + 7};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *data = malloc(n);
        CHECK(data != NULL);
        fill(data, n, (uint32_t)(n * 3 + ch));
        char name[64];
        snprintf(name, sizeof(name), "rdma_%zu.bin", n);
        struct rdma_proxy_counts before, after;
        rdma_proxy_counts(t, &before);
        int in = memfd_with(data, n);
        smb2_io_stats st;
        rc = smb2_put(c, in, name, &st);
        close(in);
        CHECK_MSG(rc == 0, "put %zu: %d %s", n, rc, smb2_client_error(c));
        CHECK_EQ_U64(st.bytes, n);
        /* 1 MiB requests: the last one may fall below the threshold and go inline */
        uint64_t full = n / (1024 * 1024), tail = n % (1024 * 1024);
        uint64_t want_rdma = full + (tail >= 4096), want_inline = tail && tail < 4096;
        CHECK_EQ_U64(st.rdma_requests, want_rdma);
        CHECK_EQ_U64(st.inline_requests, want_inline);
        CHECK_EQ_U64(st.remote_invalidations + st.local_invalidations, want_rdma);
        CHECK_EQ_U64(st.remote_invalidations, ch == SMB2_IO_RDMA_INVALIDATE ? want_rdma : 0);
        rdma_proxy_counts(t, &after);
        CHECK_EQ_U64(after.rdma_writes - before.rdma_writes, want_rdma);
        CHECK_EQ_U64(after.inline_writes - before.inline_writes, want_inline);
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", s.share, name);
        int sfd = open(path, O_RDONLY);
        CHECK(sfd >= 0);
        size_t sn;
        uint8_t *sdata = slurp_fd(sfd, &sn);
        close(sfd);
        CHECK_EQ_U64(sn, n);
        CHECK_MEM(sdata, data, n);
        free(sdata);
        int out = memfd_create("smb-get", 0);
        rdma_proxy_counts(t, &before);
        rc = smb2_get(c, name, out, &st);
        CHECK_MSG(rc == 0, "get %zu: %d %s", n, rc, smb2_client_error(c));
        CHECK_EQ_U64(st.rdma_requests, want_rdma);
        CHECK_EQ_U64(st.inline_requests, want_inline);
        CHECK_EQ_U64(st.remote_invalidations, ch == SMB2_IO_RDMA_INVALIDATE ? want_rdma : 0);
        CHECK_EQ_U64(st.local_invalidations, ch == SMB2_IO_RDMA ? want_rdma : 0);
        rdma_proxy_counts(t, &after);
        CHECK_EQ_U64(after.rdma_reads - before.rdma_reads, want_rdma);
        CHECK_EQ_U64(after.inline_reads - before.inline_reads, want_inline);
        size_t gn;
        uint8_t *got = slurp_fd(out, &gn);
        close(out);
        CHECK_EQ_U64(gn, n);
        CHECK_MEM(got, data, n);
        free(got);
        free(data);
        CHECK_EQ_U64(rdma_proxy_live(t), 0);
    }
    smb2_client_disconnect(c);
    t->ops->destroy(t);
    samba_stop(&s);
}

TEST_T(samba_rdma_v1_emulated, 60)
{
    rdma_case(SMB2_IO_RDMA, 0x0311);
}

TEST_T(samba_rdma_v1_invalidate_emulated, 60)
{
    rdma_case(SMB2_IO_RDMA_INVALIDATE, 0x0302);
}

/* A transport over Direct TCP that flips the last byte of the first successful READ response:
 * on a signed session the client must refuse it by its signature. */
struct tamper {
    smb_transport base;
    smb_transport *inner;
    int done;
};

static int tamper_send(smb_transport *t, const void *m, size_t n)
{
    struct tamper *x = (struct tamper *)t;
    return x->inner->ops->send(x->inner, m, n);
}

static int tamper_recv(smb_transport *t, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct tamper *x = (struct tamper *)t;
    int rc = x->inner->ops->recv(x->inner, buf, cap, len, timeout_ms);
    uint8_t *b = buf;
    if (!rc && !x->done && *len > 80 && b[12] == 0x08 && b[13] == 0 && b[8] == 0 && b[9] == 0 &&
        b[10] == 0 && b[11] == 0) {
        b[*len - 1] ^= 0x01;
        x->done = 1;
    }
    return rc;
}

static size_t tamper_max_message(smb_transport *t)
{
    struct tamper *x = (struct tamper *)t;
    return x->inner->ops->max_message(x->inner);
}

static size_t tamper_max_rdma(smb_transport *t)
{
    return 0;
}

static void tamper_stats(smb_transport *t, smb_transport_stats *s)
{
    struct tamper *x = (struct tamper *)t;
    x->inner->ops->get_stats(x->inner, s);
}

static const char *tamper_error(smb_transport *t)
{
    struct tamper *x = (struct tamper *)t;
    return x->inner->ops->error(x->inner);
}

static void tamper_destroy(smb_transport *t)
{
    struct tamper *x = (struct tamper *)t;
    x->inner->ops->destroy(x->inner);
}

static const smb_transport_ops tamper_ops = {
    .name = "tamper",
    .send = tamper_send,
    .recv = tamper_recv,
    .max_message = tamper_max_message,
    .max_rdma = tamper_max_rdma,
    .get_stats = tamper_stats,
    .error = tamper_error,
    .destroy = tamper_destroy,
};

TEST_T(samba_signed_response_tampered, 60)
{
    struct samba s;
    samba_start(&s, "mandatory");
    char path[512];
    snprintf(path, sizeof(path), "%s/t.bin", s.share);
    int fd = open(path, O_CREAT | O_WRONLY, 0666);
    CHECK(fd >= 0);
    uint8_t data[5000];
    fill(data, sizeof(data), 5);
    CHECK(write(fd, data, sizeof(data)) == (ssize_t)sizeof(data));
    close(fd);
    smb2_client_options o;
    opts_init(&o, 0x0311, 1);
    char err[256];
    struct tamper x = {.base.ops = &tamper_ops};
    CHECK_MSG(smb_direct_tcp_connect("127.0.0.1", s.port, &x.inner, err, sizeof(err)) == 0, "%s",
              err);
    smb2_client *c;
    int rc = smb2_client_connect(&x.base, &o, "127.0.0.1", SAMBA_SHARE, &c, err, sizeof(err));
    CHECK_MSG(rc == 0, "connect: %s", err);
    int out = memfd_create("smb-get", 0);
    rc = smb2_get(c, "t.bin", out, NULL);
    CHECK_EQ_I64(rc, -EBADMSG);
    CHECK_MSG(strcmp(smb2_client_error(c), "READ: the response's signature is wrong") == 0,
              "err: %s", smb2_client_error(c));
    CHECK(x.done);
    /* the connection is not trusted any more */
    CHECK_EQ_I64(smb2_get(c, "t.bin", out, NULL), -ENOTCONN);
    close(out);
    smb2_client_disconnect(c);
    x.base.ops->destroy(&x.base);
    samba_stop(&s);
}
