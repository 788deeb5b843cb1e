/* The client against a scripted in-process server (a transport whose send() answers at once):
 * responses out of order, interim STATUS_PENDING, the credit window checked on every request,
 * and a hostile server (unknown MessageId, READ data longer than asked, truncated response,
 * no credits, a flood of credits, silence): each a clear error, never a crash or a hang. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "smb/smb2_client.h"
#include "wire.h"

enum fault {
    F_NONE,
    F_REORDER,       /* READ responses held and released in reverse */
    F_PENDING,       /* an interim STATUS_PENDING before every READ / WRITE response */
    F_UNKNOWN_MID,   /* a READ response for a MessageId never sent */
    F_READ_TOO_LONG, /* READ data one byte longer than asked */
    F_TRUNCATED,     /* READ response cut inside its body */
    F_NO_CREDITS,    /* READ responses grant nothing */
    F_CREDIT_FLOOD,  /* a READ response grants 65535 */
    F_SILENT,        /* READ never answered */
};

#define MAX_Q 1024

struct msg {
    uint8_t *p;
    size_t len;
};

struct fake {
    smb_transport base;
    enum fault fault;
    struct msg q[MAX_Q];
    unsigned qn;
    struct msg held[64];
    unsigned nheld, hold_n;
    uint8_t *file;
    size_t file_size;
    uint8_t *written;
    size_t written_size;
    uint64_t window_end; /* MessageIds below it are granted */
    unsigned inflight, max_inflight, reads;
    int violations;
    char violation[200];
};

static void push(struct fake *f, const uint8_t *p, size_t len)
{
    CHECK(f->qn < MAX_Q);
    f->q[f->qn].p = malloc(len);
    CHECK(f->q[f->qn].p != NULL);
    memcpy(f->q[f->qn].p, p, len);
    f->q[f->qn].len = len;
    f->qn++;
}

static size_t rsp_hdr(uint8_t *out, const struct smb2_hdr *req, uint32_t status, uint16_t grant,
                      uint64_t session)
{
    struct smb2_hdr h = {.command = req->command,
                         .status = status,
                         .credits = grant,
                         .flags = SMB2_FLAGS_SERVER_TO_REDIR,
                         .message_id = req->message_id,
                         .tree_id = 5,
                         .session_id = session};
    smb2_hdr_encode(out, &h);
    return SMB2_HDR_LEN;
}

static uint8_t out[2 * 1024 * 1024];

static void violation(struct fake *f, const char *what, unsigned long long a, unsigned long long b)
{
    if (!f->violations++)
        snprintf(f->violation, sizeof(f->violation), "%s (%llu, %llu)", what, a, b);
}

static int fake_send(smb_transport *t, const void *vmsg, size_t len)
{
    struct fake *f = (struct fake *)t;
    const uint8_t *m = vmsg;
    CHECK(len >= SMB2_HDR_LEN);
    struct smb2_hdr r;
    memset(&r, 0, sizeof(r));
    r.credit_charge = smb2_get16(m + 6);
    r.command = smb2_get16(m + 12);
    r.credits = smb2_get16(m + 14);
    r.message_id = smb2_get64(m + 24);
    uint64_t session = smb2_get64(m + 40);
    uint16_t charge = r.credit_charge ? r.credit_charge : 1;
    /* [MS-SMB2] 3.3.5.2.3: the request's MessageIds must lie in the granted window */
    if (r.message_id + charge > f->window_end)
        violation(f, "request beyond the credits granted", r.message_id + charge, f->window_end);
    uint16_t grant = r.credits ? r.credits : 1;
    if (f->fault == F_NO_CREDITS)
        grant = 1; /* the client holds one credit until the READs, which grant none */
    const uint8_t *b = m + SMB2_HDR_LEN;
    size_t n = 0;
    uint32_t status = 0;
    switch (r.command) {
    case SMB2_NEGOTIATE:
        n = rsp_hdr(out, &r, 0, 1, 0);
        memset(out + n, 0, 64);
        smb2_put16(out + n, 65);
        smb2_put16(out + n + 2, SMB2_NEGOTIATE_SIGNING_ENABLED);
        smb2_put16(out + n + 4, 0x0302);
        smb2_put32(out + n + 24, SMB2_GLOBAL_CAP_LARGE_MTU);
        smb2_put32(out + n + 28, 65536);
        smb2_put32(out + n + 32, 65536);
        smb2_put32(out + n + 36, 65536);
        n += 64;
        grant = 1;
        break;
    case SMB2_SESSION_SETUP: {
        if (session == 0) {
            /* a bare NTLMSSP CHALLENGE with an empty target info (only MsvAvEOL) */
            n = rsp_hdr(out, &r, STATUS_MORE_PROCESSING_REQUIRED, 1, 0x77);
            uint8_t *c = out + n + 8;
            memset(c, 0, 60);
            memcpy(c, "NTLMSSP", 8);
            smb2_put32(c + 8, 2);
            smb2_put32(c + 20, 0xE2898215u);
            memset(c + 24, 0x42, 8);
            smb2_put16(c + 40, 4);
            smb2_put16(c + 42, 4);
            smb2_put32(c + 44, 56);
            memset(out + n, 0, 8);
            smb2_put16(out + n, 9);
            smb2_put16(out + n + 4, SMB2_HDR_LEN + 8);
            smb2_put16(out + n + 6, 60);
            n += 8 + 60;
            grant = 1;
        } else {
            n = rsp_hdr(out, &r, 0, grant, session);
            memset(out + n, 0, 8);
            smb2_put16(out + n, 9);
            n += 8;
        }
        break;
    }
    case SMB2_TREE_CONNECT:
        n = rsp_hdr(out, &r, 0, grant, session);
        memset(out + n, 0, 16);
        smb2_put16(out + n, 16);
        out[n + 2] = 1;
        n += 16;
        break;
    case SMB2_CREATE:
        n = rsp_hdr(out, &r, 0, grant, session);
        memset(out + n, 0, 88);
        smb2_put16(out + n, 89);
        memset(out + n + 64, 0xAB, 16);
        n += 88;
        break;
    case SMB2_QUERY_INFO:
        n = rsp_hdr(out, &r, 0, grant, session);
        memset(out + n, 0, 8 + 24);
        smb2_put16(out + n, 9);
        smb2_put16(out + n + 2, SMB2_HDR_LEN + 8);
        smb2_put32(out + n + 4, 24);
        smb2_put64(out + n + 8 + 8, f->file_size);
        n += 8 + 24;
        break;
    case SMB2_CLOSE:
        n = rsp_hdr(out, &r, 0, grant, session);
        memset(out + n, 0, 60);
        smb2_put16(out + n, 60);
        n += 60;
        break;
    case SMB2_LOGOFF:
    case SMB2_TREE_DISCONNECT:
        n = rsp_hdr(out, &r, 0, grant, session);
        smb2_put16(out + n, 4);
        smb2_put16(out + n + 2, 0);
        n += 4;
        break;
    case SMB2_READ: {
        uint32_t want = smb2_get32(b + 4);
        uint64_t off = smb2_get64(b + 8);
        if (smb2_get32(b + 36) != SMB2_CHANNEL_NONE)
            violation(f, "READ with a channel on a transport without RDMA", 0, 0);
        if (charge != (want ? (want - 1) / 65536 + 1 : 1))
            violation(f, "READ CreditCharge", charge, want);
        f->reads++;
        if (++f->inflight > f->max_inflight)
            f->max_inflight = f->inflight;
        if (f->fault == F_SILENT)
            return 0;
        uint32_t k = off >= f->file_size         ? 0
                     : f->file_size - off < want ? (uint32_t)(f->file_size - off)
                                                 : want;
        if (f->fault == F_NO_CREDITS)
            grant = 0;
        if (f->fault == F_CREDIT_FLOOD)
            grant = 65535;
        if (f->fault == F_UNKNOWN_MID)
            r.message_id = 999999;
        if (f->fault == F_PENDING) {
            struct smb2_hdr ih = {.command = SMB2_READ,
                                  .status = STATUS_PENDING,
                                  .credits = 0,
                                  .flags = SMB2_FLAGS_SERVER_TO_REDIR | SMB2_FLAGS_ASYNC_COMMAND,
                                  .message_id = r.message_id,
                                  .async_id = 7,
                                  .session_id = session};
            uint8_t im[SMB2_HDR_LEN + 9] = {0};
            smb2_hdr_encode(im, &ih);
            smb2_put16(im + SMB2_HDR_LEN, 9);
            push(f, im, sizeof(im));
        }
        n = rsp_hdr(out, &r, 0, grant, session);
        memset(out + n, 0, 16);
        smb2_put16(out + n, 17);
        out[n + 2] = SMB2_HDR_LEN + 16;
        uint32_t dl = f->fault == F_READ_TOO_LONG ? k + 1 : k;
        smb2_put32(out + n + 4, dl);
        n += 16;
        memcpy(out + n, f->file + off, k);
        if (dl > k)
            out[n + k] = 0;
        n += dl;
        if (f->fault == F_TRUNCATED)
            n = SMB2_HDR_LEN + 10;
        if (f->fault == F_REORDER) {
            CHECK(f->nheld < 64);
            f->held[f->nheld].p = malloc(n);
            memcpy(f->held[f->nheld].p, out, n);
            f->held[f->nheld].len = n;
            f->nheld++;
            if (f->window_end < r.message_id + charge + grant)
                f->window_end += grant;
            return 0;
        }
        break;
    }
    case SMB2_WRITE: {
        uint32_t dl = smb2_get32(b + 4);
        uint64_t off = smb2_get64(b + 8);
        uint16_t doff = smb2_get16(b + 2);
        CHECK(doff + (size_t)dl <= len);
        if (charge != (dl ? (dl - 1) / 65536 + 1 : 1))
            violation(f, "WRITE CreditCharge", charge, dl);
        if (off + dl > f->written_size) {
            f->written = realloc(f->written, off + dl);
            CHECK(f->written != NULL);
            f->written_size = off + dl;
        }
        memcpy(f->written + off, m + doff, dl);
        if (f->fault == F_PENDING) {
            struct smb2_hdr ih = {.command = SMB2_WRITE,
                                  .status = STATUS_PENDING,
                                  .credits = 1,
                                  .flags = SMB2_FLAGS_SERVER_TO_REDIR | SMB2_FLAGS_ASYNC_COMMAND,
                                  .message_id = r.message_id,
                                  .async_id = 8,
                                  .session_id = session};
            uint8_t im[SMB2_HDR_LEN + 9] = {0};
            smb2_hdr_encode(im, &ih);
            smb2_put16(im + SMB2_HDR_LEN, 9);
            push(f, im, sizeof(im));
            f->window_end += 1;
        }
        n = rsp_hdr(out, &r, status, grant, session);
        memset(out + n, 0, 16);
        smb2_put16(out + n, 17);
        smb2_put32(out + n + 4, dl);
        n += 16;
        break;
    }
    default:
        CHECK_MSG(0, "unexpected command %u", r.command);
    }
    f->window_end += smb2_get16(out + 14);
    push(f, out, n);
    return 0;
}

static int fake_recv(smb_transport *t, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct fake *f = (struct fake *)t;
    if (f->qn == 0 && f->nheld) {
        /* release the held READ responses, last first */
        while (f->nheld) {
            f->nheld--;
            push(f, f->held[f->nheld].p, f->held[f->nheld].len);
            free(f->held[f->nheld].p);
        }
    }
    if (f->qn == 0) {
        usleep((useconds_t)timeout_ms * 1000);
        return -ETIMEDOUT;
    }
    struct msg m = f->q[0];
    memmove(f->q, f->q + 1, (f->qn - 1) * sizeof(f->q[0]));
    f->qn--;
    if (smb2_get16(m.p + 12) == SMB2_READ && smb2_get32(m.p + 8) != STATUS_PENDING)
        f->inflight--;
    if (m.len > cap) {
        free(m.p);
        return -EMSGSIZE;
    }
    memcpy(buf, m.p, m.len);
    *len = m.len;
    free(m.p);
    return 0;
}

static size_t fake_max_message(smb_transport *t)
{
    return 1 << 20;
}
static size_t fake_max_rdma(smb_transport *t)
{
    return 0;
}
static void fake_stats(smb_transport *t, smb_transport_stats *s)
{
    memset(s, 0, sizeof(*s));
}
static const char *fake_error(smb_transport *t)
{
    return "fake transport: no message within the timeout";
}
static void fake_destroy(smb_transport *t)
{
    struct fake *f = (struct fake *)t;
    for (unsigned i = 0; i < f->qn; i++)
        free(f->q[i].p);
    for (unsigned i = 0; i < f->nheld; i++)
        free(f->held[i].p);
    free(f->written);
    free(f->file);
    free(f);
}

static const smb_transport_ops fake_ops = {
    .name = "fake",
    .send = fake_send,
    .recv = fake_recv,
    .max_message = fake_max_message,
    .max_rdma = fake_max_rdma,
    .get_stats = fake_stats,
    .error = fake_error,
    .destroy = fake_destroy,
};

static struct fake *fake_new(enum fault fault, size_t file_size)
{
    struct fake *f = calloc(1, sizeof(*f));
    CHECK(f != NULL);
    f->base.ops = &fake_ops;
    f->fault = fault;
    f->window_end = 1; /* the client starts with one credit: MessageId 0 */
    f->file_size = file_size;
    f->file = malloc(file_size + 1);
    CHECK(f->file != NULL);
    for (size_t i = 0; i < file_size; i++)
        f->file[i] = (uint8_t)(i * 31 + (i >> 8));
    return f;
}

static smb2_client *fake_connect(struct fake *f, unsigned depth)
{
    smb2_client_options o = {.user = "u", .password = "p", .depth = depth, .timeout_ms = 300};
    smb2_client *c = NULL;
    char err[256] = "";
    int rc = smb2_client_connect(&f->base, &o, "fake", "share", &c, err, sizeof(err));
    CHECK_MSG(rc == 0, "connect to the fake server: %d %s", rc, err);
    CHECK_EQ_U64(smb2_client_dialect(c), 0x0302);
    return c;
}

/* get of 1 MiB + 5 in 64 KiB READs; returns the client's status, checks the bytes on success */
static int fake_get(enum fault fault, unsigned depth, smb2_client **cp, struct fake **fp)
{
    const size_t size = 1024 * 1024 + 5;
    struct fake *f = fake_new(fault, size);
    smb2_client *c = fake_connect(f, depth);
    int fd = memfd_create("fake-get", 0);
    CHECK(fd >= 0);
    smb2_io_stats st;
    int rc = smb2_get(c, "dir/file", fd, &st);
    if (rc == 0) {
        CHECK_EQ_U64(st.bytes, size);
        CHECK_EQ_U64(st.requests_read, 17);
        uint8_t *got = malloc(size);
        CHECK(got != NULL);
        CHECK(pread(fd, got, size, 0) == (ssize_t)size);
        CHECK_MEM(got, f->file, size);
        free(got);
    }
    close(fd);
    CHECK_MSG(f->violations == 0, "the client broke the protocol: %s", f->violation);
    *cp = c;
    *fp = f;
    return rc;
}

static void finish(smb2_client *c, struct fake *f)
{
    smb2_client_disconnect(c);
    fake_destroy(&f->base);
}

TEST(fake_in_order_depth8)
{
    smb2_client *c;
    struct fake *f;
    CHECK_EQ_I64(fake_get(F_NONE, 8, &c, &f), 0);
    finish(c, f);
}

TEST(fake_reverse_order_depth8)
{
    smb2_client *c;
    struct fake *f;
    int rc = fake_get(F_REORDER, 8, &c, &f);
    CHECK_MSG(rc == 0, "get: %s", smb2_client_error(c));
    CHECK_EQ_U64(f->max_inflight, 8);
    finish(c, f);
}

TEST(fake_interim_pending)
{
    smb2_client *c;
    struct fake *f;
    int rc = fake_get(F_PENDING, 4, &c, &f);
    CHECK_MSG(rc == 0, "get: %s", smb2_client_error(c));
    /* and a put through interim responses */
    size_t n = 200000;
    uint8_t *data = malloc(n);
    CHECK(data != NULL);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i ^ (i >> 9));
    int fd = memfd_create("fake-put", 0);
    CHECK(write(fd, data, n) == (ssize_t)n);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    smb2_io_stats st;
    rc = smb2_put(c, fd, "out", &st);
    CHECK_MSG(rc == 0, "put: %s", smb2_client_error(c));
    CHECK_EQ_U64(st.requests_write, 4);
    CHECK_EQ_U64(f->written_size, n);
    CHECK_MEM(f->written, data, n);
    CHECK_MSG(f->violations == 0, "%s", f->violation);
    close(fd);
    free(data);
    finish(c, f);
}

static void hostile(enum fault fault, int want_rc, const char *needle)
{
    smb2_client *c;
    struct fake *f;
    int rc = fake_get(fault, 4, &c, &f);
    CHECK_EQ_I64(rc, want_rc);
    CHECK_MSG(strstr(smb2_client_error(c), needle) != NULL, "error \"%s\" lacks \"%s\"",
              smb2_client_error(c), needle);
    /* the connection is broken: a further command fails at once, disconnect sends nothing */
    int fd = memfd_create("x", 0);
    CHECK_EQ_I64(smb2_get(c, "again", fd, NULL), -ENOTCONN);
    close(fd);
    finish(c, f);
}

TEST(fake_unknown_message_id)
{
    hostile(F_UNKNOWN_MID, -EPROTO, "never sent");
}

TEST(fake_read_longer_than_asked)
{
    hostile(F_READ_TOO_LONG, -EPROTO, "bytes for a");
}

TEST(fake_truncated_read_response)
{
    hostile(F_TRUNCATED, -EPROTO, "READ response of 74 bytes is shorter");
}

TEST(fake_no_credits)
{
    hostile(F_NO_CREDITS, -EPROTO, "too few for one");
}

TEST(fake_credit_flood)
{
    hostile(F_CREDIT_FLOOD, -EPROTO, "beyond the 65535");
}

TEST(fake_silent_server)
{
    hostile(F_SILENT, -ETIMEDOUT, "no message within the timeout");
}

/* Options the client refuses before it sends anything. */
TEST(fake_bad_options)
{
    struct fake *f = fake_new(F_NONE, 1);
    smb2_client *c = NULL;
    char err[256] = "";
    smb2_client_options o = {.user = "u", .password = "p", .depth = 1, .max_dialect = 0x0300};
    CHECK_EQ_I64(smb2_client_connect(&f->base, &o, "s", "x", &c, err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "max_dialect 0x0300") != NULL, "err: %s", err);
    o.max_dialect = 0;
    o.channel = SMB2_IO_RDMA_INVALIDATE;
    CHECK_EQ_I64(smb2_client_connect(&f->base, &o, "s", "x", &c, err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "RDMA channel on the fake transport") != NULL, "err: %s", err);
    o.channel = SMB2_IO_INLINE;
    o.password = NULL;
    CHECK_EQ_I64(smb2_client_connect(&f->base, &o, "s", "x", &c, err, sizeof(err)), -EINVAL);
    CHECK(c == NULL);
    CHECK_EQ_U64(f->qn, 0); /* nothing was sent */
    CHECK_EQ_U64(f->window_end, 1);
    fake_destroy(&f->base);
}
