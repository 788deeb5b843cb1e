/* libFuzzer target: the SMB2 client (smb/) against a server whose responses are the input.
 *
 * Input: one control byte (dialect 3.0.2 or 3.1.1, depth 1..8, whether to list), then
 * records, each a 2-byte little-endian length, a flags byte and the message. The transport
 * answers the client's n-th receive with the n-th record; unless the record's flag bit 0 is
 * set it first patches the header to fit the request just sent (ProtocolId, StructureSize,
 * Command, MessageId, SERVER_TO_REDIR, NextCommand 0), so that the fuzzer reaches the body
 * parsers and the client's state machine past NEGOTIATE. No more records: a timeout. The
 * client connects, gets a file, lists a directory and disconnects; any of it may fail, none of
 * it may crash, read outside a message or hang. The parsers also see the whole input raw. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "smb/smb2_client.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
    smb_transport base;
    const uint8_t *p, *end;
    uint16_t last_cmd;
    uint64_t last_mid;
};

static int fz_send(smb_transport *t, const void *msg, size_t len)
{
    struct fz *f = (struct fz *)t;
    if (len >= SMB2_HDR_LEN) {
        f->last_cmd = smb2_get16((const uint8_t *)msg + 12);
        f->last_mid = smb2_get64((const uint8_t *)msg + 24);
    }
    return 0;
}

static int fz_recv(smb_transport *t, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct fz *f = (struct fz *)t;
    if (f->end - f->p < 3)
        return -ETIMEDOUT;
    size_t n = smb2_get16(f->p);
    uint8_t flags = f->p[2];
    f->p += 3;
    if ((size_t)(f->end - f->p) < n)
        n = (size_t)(f->end - f->p);
    const uint8_t *m = f->p;
    f->p += n;
    if (n > cap)
        return -EMSGSIZE;
    memcpy(buf, m, n);
    uint8_t *b = buf;
    if (!(flags & 1) && n >= SMB2_HDR_LEN) {
        b[0] = 0xFE;
        b[1] = 'S';
        b[2] = 'M';
        b[3] = 'B';
        smb2_put16(b + 4, SMB2_HDR_LEN);
        smb2_put16(b + 12, f->last_cmd);
        smb2_put32(b + 16, smb2_get32(b + 16) | SMB2_FLAGS_SERVER_TO_REDIR);
        smb2_put32(b + 20, 0);
        if (!(flags & 2))
            smb2_put64(b + 24, f->last_mid);
    }
    *len = n;
    return 0;
}

static size_t fz_max_message(smb_transport *t)
{
    return 1 << 20;
}
static size_t fz_max_rdma(smb_transport *t)
{
    return 0;
}
static void fz_stats(smb_transport *t, smb_transport_stats *s)
{
    memset(s, 0, sizeof(*s));
}
static const char *fz_error(smb_transport *t)
{
    return "fuzz transport: out of input";
}
static void fz_destroy(smb_transport *t) {}

static const smb_transport_ops fz_ops = {
    .name = "fuzz",
    .send = fz_send,
    .recv = fz_recv,
    .max_message = fz_max_message,
    .max_rdma = fz_max_rdma,
    .get_stats = fz_stats,
    .error = fz_error,
    .destroy = fz_destroy,
};

static int list_cb(void *ctx, const char *name, uint64_t size, int is_dir)
{
    (*(unsigned *)ctx) += (unsigned)strlen(name) + (unsigned)(size & 1) + (unsigned)is_dir;
    return 0;
}

static void parsers(const uint8_t *d, size_t n)
{
    char err[160];
    struct smb2_hdr h;
    (void)smb2_hdr_decode(d, n, &h, err, sizeof(err));
    struct smb2_negotiate_rsp nr;
    (void)smb2_parse_negotiate(d, n, &nr, err, sizeof(err));
    struct smb2_session_setup_rsp sr;
    (void)smb2_parse_session_setup(d, n, &sr, err, sizeof(err));
    uint8_t type;
    (void)smb2_parse_tree_connect(d, n, &type, err, sizeof(err));
    struct smb2_create_rsp cr;
    (void)smb2_parse_create(d, n, &cr, err, sizeof(err));
    (void)smb2_parse_close(d, n, err, sizeof(err));
    struct smb2_read_rsp rr;
    (void)smb2_parse_read(d, n, &rr, err, sizeof(err));
    uint32_t count;
    (void)smb2_parse_write(d, n, &count, err, sizeof(err));
    const uint8_t *ob;
    uint32_t ol;
    (void)smb2_parse_output_buffer(d, n, SMB2_QUERY_DIRECTORY, &ob, &ol, err, sizeof(err));
    (void)smb2_parse_empty(d, n, SMB2_LOGOFF, err, sizeof(err));
    if (n >= SMB2_HDR_LEN)
        (void)smb2_parse_error(d, n, err, sizeof(err));
    size_t off = 0;
    struct smb2_dir_entry e;
    char name[512];
    while (smb2_dir_next(d, n, &off, &e, err, sizeof(err)) == 1)
        (void)smb2_utf16le_to_utf8(e.name, e.name_bytes, name, sizeof(name));
    struct ntlm_challenge ch;
    (void)ntlm_parse_challenge(d, n, &ch, err, sizeof(err));
    const uint8_t *tok;
    size_t tl;
    int st;
    (void)spnego_parse_resp(d, n, &tok, &tl, &st, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parsers(data, size);
    if (size < 1)
        return 0;
    struct fz f = {.base.ops = &fz_ops, .p = data + 1, .end = data + size};
    smb2_client_options o = {.user = "user",
                             .password = "password",
                             .domain = "",
                             .depth = 1u + (data[0] & 7u),
                             .max_dialect = (data[0] & 8) ? 0x0311 : 0x0302,
                             .timeout_ms = 1};
    smb2_client *c = NULL;
    char err[256];
    if (smb2_client_connect(&f.base, &o, "server", "share", &c, err, sizeof(err)) != 0)
        return 0;
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        (void)smb2_get(c, "dir/file", fd, NULL);
        close(fd);
    }
    if (data[0] & 16) {
        unsigned sum = 0;
        (void)smb2_list(c, "dir", list_cb, &sum);
    }
    smb2_client_disconnect(c);
    return 0;
}
