/* SMB2 codec: the header, the request bodies the client sends and bounds-checked parsing of
 * the responses ([MS-SMB2] 2.2). */
#include "wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

static const uint8_t smb2_protocol_id[4] = {0xFE, 'S', 'M', 'B'};

const char *smb2_command_name(uint16_t cmd)
{
    switch (cmd) {
    case SMB2_NEGOTIATE:
        return "NEGOTIATE";
    case SMB2_SESSION_SETUP:
        return "SESSION_SETUP";
    case SMB2_LOGOFF:
        return "LOGOFF";
    case SMB2_TREE_CONNECT:
        return "TREE_CONNECT";
    case SMB2_TREE_DISCONNECT:
        return "TREE_DISCONNECT";
    case SMB2_CREATE:
        return "CREATE";
    case SMB2_CLOSE:
        return "CLOSE";
    case SMB2_READ:
        return "READ";
    case SMB2_WRITE:
        return "WRITE";
    case SMB2_QUERY_DIRECTORY:
        return "QUERY_DIRECTORY";
    case SMB2_QUERY_INFO:
        return "QUERY_INFO";
    default:
        return "SMB2_COMMAND";
    }
}

void smb2_hdr_encode(uint8_t *out, const struct smb2_hdr *h)
{
    memset(out, 0, SMB2_HDR_LEN);
    memcpy(out, smb2_protocol_id, 4);
    smb2_put16(out + 4, SMB2_HDR_LEN);
    smb2_put16(out + 6, h->credit_charge);
    smb2_put32(out + 8, h->status);
    smb2_put16(out + 12, h->command);
    smb2_put16(out + 14, h->credits);
    smb2_put32(out + 16, h->flags);
    smb2_put32(out + 20, h->next_command);
    smb2_put64(out + 24, h->message_id);
    if (h->flags & SMB2_FLAGS_ASYNC_COMMAND) {
        smb2_put64(out + 32, h->async_id);
    } else {
        smb2_put32(out + 32, 0xFEFF); /* Reserved (ProcessId) */
        smb2_put32(out + 36, h->tree_id);
    }
    smb2_put64(out + 40, h->session_id);
}

int smb2_hdr_decode(const uint8_t *msg, size_t len, struct smb2_hdr *h, char *err, size_t errlen)
{
    if (len < SMB2_HDR_LEN)
        return smb2_err(err, errlen, "message of %zu bytes is shorter than the SMB2 header", len);
    if (memcmp(msg, smb2_protocol_id, 4) != 0)
        return smb2_err(err, errlen, "ProtocolId %02x%02x%02x%02x is not 0xFE 'SMB'", msg[0],
                        msg[1], msg[2], msg[3]);
    if (smb2_get16(msg + 4) != SMB2_HDR_LEN)
        return smb2_err(err, errlen, "header StructureSize %u is not 64", smb2_get16(msg + 4));
    memset(h, 0, sizeof(*h));
    h->credit_charge = smb2_get16(msg + 6);
    h->status = smb2_get32(msg + 8);
    h->command = smb2_get16(msg + 12);
    h->credits = smb2_get16(msg + 14);
    h->flags = smb2_get32(msg + 16);
    h->next_command = smb2_get32(msg + 20);
    h->message_id = smb2_get64(msg + 24);
    if (h->flags & SMB2_FLAGS_ASYNC_COMMAND)
        h->async_id = smb2_get64(msg + 32);
    else
        h->tree_id = smb2_get32(msg + 36);
    h->session_id = smb2_get64(msg + 40);
    if (!(h->flags & SMB2_FLAGS_SERVER_TO_REDIR))
        return smb2_err(err, errlen,
                        "%s: a request (SERVER_TO_REDIR clear) where a response "
                        "was due",
                        smb2_command_name(h->command));
    if (h->next_command != 0)
        return smb2_err(err, errlen, "%s: compound response (NextCommand %u) to a single request",
                        smb2_command_name(h->command), h->next_command);
    return 0;
}

/* The body after the header with its StructureSize checked: at least `fixed` bytes present. */
static int body(const uint8_t *msg, size_t len, uint16_t command, uint16_t structure_size,
                size_t fixed, char *err, size_t errlen)
{
    if (len < SMB2_HDR_LEN + fixed)
        return smb2_err(err, errlen, "%s response of %zu bytes is shorter than its %zu-byte body",
                        smb2_command_name(command), len, SMB2_HDR_LEN + fixed);
    uint16_t ss = smb2_get16(msg + SMB2_HDR_LEN);
    if (ss != structure_size)
        return smb2_err(err, errlen, "%s response StructureSize %u is not %u",
                        smb2_command_name(command), ss, structure_size);
    return 0;
}

/* [off, off+n) inside the message, and not inside the header when n > 0. */
static int range(const uint8_t *msg, size_t len, uint16_t command, const char *what, uint64_t off,
                 uint64_t n, size_t min_off, char *err, size_t errlen)
{
    (void)msg;
    if (n == 0)
        return 0;
    if (off < min_off || off > len || n > len - off)
        return smb2_err(err, errlen, "%s response: %s [%llu, +%llu) outside the %zu-byte message",
                        smb2_command_name(command), what, (unsigned long long)off,
                        (unsigned long long)n, len);
    return 0;
}

#define B(msg) ((msg) + SMB2_HDR_LEN)

size_t smb2_build_negotiate(uint8_t *out, size_t cap, const uint16_t *dialects, unsigned n,
                            uint16_t security_mode, uint32_t caps, const uint8_t guid[16],
                            const uint8_t salt[32])
{
    int smb311 = 0;
    for (unsigned i = 0; i < n; i++)
        smb311 |= dialects[i] == 0x0311;
    size_t end = SMB2_HDR_LEN + SMB2_NEGOTIATE_REQ_FIXED + 2u * n;
    size_t ctx_off = (end + 7) & ~(size_t)7;
    /* [MS-SMB2] 2.2.3.1.1 SMB2_PREAUTH_INTEGRITY_CAPABILITIES: 8-byte context header, count,
     * salt length, one algorithm, the salt. */
    size_t total = smb311 ? ctx_off + 8 + 4 + 2 + 32 : end;
    if (cap < total)
        return 0;
    memset(out + SMB2_HDR_LEN, 0, total - SMB2_HDR_LEN);
    uint8_t *b = B(out);
    smb2_put16(b, 36);
    smb2_put16(b + 2, (uint16_t)n);
    smb2_put16(b + 4, security_mode);
    smb2_put32(b + 8, caps);
    memcpy(b + 12, guid, 16);
    if (smb311) {
        smb2_put32(b + 28, (uint32_t)ctx_off);
        smb2_put16(b + 32, 1);
    } /* else ClientStartTime 0 */
    for (unsigned i = 0; i < n; i++)
        smb2_put16(b + 36 + 2 * i, dialects[i]);
    if (smb311) {
        uint8_t *c = out + ctx_off;
        smb2_put16(c, SMB2_PREAUTH_INTEGRITY_CAPABILITIES);
        smb2_put16(c + 2, 4 + 2 + 32);
        smb2_put16(c + 8, 1);
        smb2_put16(c + 10, 32);
        smb2_put16(c + 12, SMB2_PREAUTH_SHA512);
        memcpy(c + 14, salt, 32);
    }
    return total;
}

size_t smb2_build_session_setup(uint8_t *out, size_t cap, uint8_t security_mode,
                                const uint8_t *blob, size_t blob_len)
{
    size_t total = SMB2_HDR_LEN + SMB2_SESSION_SETUP_REQ_FIXED + blob_len;
    if (cap < total || blob_len > 0xFFFF)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, SMB2_SESSION_SETUP_REQ_FIXED);
    smb2_put16(b, 25);
    b[2] = 0; /* Flags: no binding */
    b[3] = security_mode;
    smb2_put32(b + 4, 0); /* Capabilities: no DFS */
    smb2_put16(b + 12, SMB2_HDR_LEN + SMB2_SESSION_SETUP_REQ_FIXED);
    smb2_put16(b + 14, (uint16_t)blob_len);
    memcpy(b + SMB2_SESSION_SETUP_REQ_FIXED, blob, blob_len);
    return total;
}

size_t smb2_build_tree_connect(uint8_t *out, size_t cap, const uint16_t *path, size_t path_units)
{
    size_t total = SMB2_HDR_LEN + SMB2_TREE_CONNECT_REQ_FIXED + 2 * path_units;
    if (cap < total || 2 * path_units > 0xFFFF)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, SMB2_TREE_CONNECT_REQ_FIXED);
    smb2_put16(b, 9);
    smb2_put16(b + 4, SMB2_HDR_LEN + SMB2_TREE_CONNECT_REQ_FIXED);
    smb2_put16(b + 6, (uint16_t)(2 * path_units));
    for (size_t i = 0; i < path_units; i++)
        smb2_put16(b + SMB2_TREE_CONNECT_REQ_FIXED + 2 * i, path[i]);
    return total;
}

size_t smb2_build_create(uint8_t *out, size_t cap, const struct smb2_create_req *r)
{
    /* The Buffer holds at least one byte even for the share's root (an empty name). */
    size_t name_bytes = 2 * r->name_units;
    size_t total = SMB2_HDR_LEN + SMB2_CREATE_REQ_FIXED + (name_bytes ? name_bytes : 8);
    if (cap < total || name_bytes > 0xFFFF)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, total - SMB2_HDR_LEN);
    smb2_put16(b, 57);
    b[3] = 0;             /* RequestedOplockLevel: none */
    smb2_put32(b + 4, 2); /* ImpersonationLevel: Impersonation */
    smb2_put32(b + 24, r->desired_access);
    smb2_put32(b + 28, r->file_attributes);
    smb2_put32(b + 32, r->share_access);
    smb2_put32(b + 36, r->disposition);
    smb2_put32(b + 40, r->options);
    smb2_put16(b + 44, SMB2_HDR_LEN + SMB2_CREATE_REQ_FIXED);
    smb2_put16(b + 46, (uint16_t)name_bytes);
    for (size_t i = 0; i < r->name_units; i++)
        smb2_put16(b + SMB2_CREATE_REQ_FIXED + 2 * i, r->name[i]);
    return total;
}

size_t smb2_build_close(uint8_t *out, size_t cap, const uint8_t file_id[16])
{
    size_t total = SMB2_HDR_LEN + SMB2_CLOSE_REQ_FIXED;
    if (cap < total)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, SMB2_CLOSE_REQ_FIXED);
    smb2_put16(b, 24);
    memcpy(b + 8, file_id, 16);
    return total;
}

static void put_descs(uint8_t *p, const smb_buffer_desc *desc, unsigned ndesc)
{
    for (unsigned i = 0; i < ndesc; i++) {
        smb2_put64(p + SMB2_BUFFER_DESC_LEN * i, desc[i].offset);
        smb2_put32(p + SMB2_BUFFER_DESC_LEN * i + 8, desc[i].token);
        smb2_put32(p + SMB2_BUFFER_DESC_LEN * i + 12, desc[i].length);
    }
}

size_t smb2_build_read(uint8_t *out, size_t cap, const uint8_t file_id[16], uint64_t offset,
                       uint32_t length, uint32_t channel, const smb_buffer_desc *desc,
                       unsigned ndesc)
{
    size_t info = channel != SMB2_CHANNEL_NONE ? (size_t)SMB2_BUFFER_DESC_LEN * ndesc : 0;
    /* The Buffer holds at least one byte ([MS-SMB2] 2.2.19). */
    size_t total = SMB2_HDR_LEN + SMB2_READ_REQ_FIXED + (info ? info : 1);
    if (cap < total || info > 0xFFFF)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, total - SMB2_HDR_LEN);
    smb2_put16(b, 49);
    b[2] = 0x50; /* Padding: where the server puts the data of an inline response */
    smb2_put32(b + 4, length);
    smb2_put64(b + 8, offset);
    memcpy(b + 16, file_id, 16);
    smb2_put32(b + 32, 0); /* MinimumCount */
    smb2_put32(b + 36, channel);
    smb2_put32(b + 40, 0); /* RemainingBytes */
    if (info) {
        smb2_put16(b + 44, SMB2_HDR_LEN + SMB2_READ_REQ_FIXED);
        smb2_put16(b + 46, (uint16_t)info);
        put_descs(b + SMB2_READ_REQ_FIXED, desc, ndesc);
    }
    return total;
}

size_t smb2_build_write(uint8_t *out, size_t cap, const uint8_t file_id[16], uint64_t offset,
                        const void *data, uint32_t data_len, uint32_t channel,
                        const smb_buffer_desc *desc, unsigned ndesc)
{
    int rdma = channel != SMB2_CHANNEL_NONE;
    size_t info = rdma ? (size_t)SMB2_BUFFER_DESC_LEN * ndesc : 0;
    size_t payload = rdma ? info : data_len;
    size_t total = SMB2_HDR_LEN + SMB2_WRITE_REQ_FIXED + (payload ? payload : 1);
    if (cap < total || info > 0xFFFF)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, SMB2_WRITE_REQ_FIXED);
    smb2_put16(b, 49);
    /* With the data read by RDMA there is none in the message: DataOffset and Length 0, as
     * Linux's client sends them; ksmbd refuses any other DataOffset (STATUS_INVALID_PARAMETER) */
    smb2_put16(b + 2, rdma ? 0 : SMB2_WRITE_DATA_OFFSET);
    smb2_put32(b + 4, rdma ? 0 : data_len); /* Length: 0 when the server reads by RDMA */
    smb2_put64(b + 8, offset);
    memcpy(b + 16, file_id, 16);
    smb2_put32(b + 32, channel);
    smb2_put32(b + 36, rdma ? data_len : 0); /* RemainingBytes: what the server will read */
    if (rdma) {
        smb2_put16(b + 40, SMB2_WRITE_DATA_OFFSET);
        smb2_put16(b + 42, (uint16_t)info);
        put_descs(b + SMB2_WRITE_REQ_FIXED, desc, ndesc);
    } else if (data) {
        memmove(b + SMB2_WRITE_REQ_FIXED, data, data_len);
    }
    if (!payload)
        b[SMB2_WRITE_REQ_FIXED] = 0;
    smb2_put32(b + 44, 0); /* Flags */
    return total;
}

size_t smb2_build_query_directory(uint8_t *out, size_t cap, const uint8_t file_id[16],
                                  uint8_t info_class, uint8_t flags, const uint16_t *pattern,
                                  size_t pattern_units, uint32_t out_len)
{
    size_t total = SMB2_HDR_LEN + SMB2_QUERY_DIR_REQ_FIXED + 2 * pattern_units;
    if (cap < total || pattern_units == 0 || 2 * pattern_units > 0xFFFF)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, SMB2_QUERY_DIR_REQ_FIXED);
    smb2_put16(b, 33);
    b[2] = info_class;
    b[3] = flags;
    memcpy(b + 8, file_id, 16);
    smb2_put16(b + 24, SMB2_HDR_LEN + SMB2_QUERY_DIR_REQ_FIXED);
    smb2_put16(b + 26, (uint16_t)(2 * pattern_units));
    smb2_put32(b + 28, out_len);
    for (size_t i = 0; i < pattern_units; i++)
        smb2_put16(b + SMB2_QUERY_DIR_REQ_FIXED + 2 * i, pattern[i]);
    return total;
}

size_t smb2_build_query_info(uint8_t *out, size_t cap, const uint8_t file_id[16], uint8_t info_type,
                             uint8_t info_class, uint32_t out_len)
{
    size_t total = SMB2_HDR_LEN + SMB2_QUERY_INFO_REQ_FIXED + 1;
    if (cap < total)
        return 0;
    uint8_t *b = B(out);
    memset(b, 0, total - SMB2_HDR_LEN);
    smb2_put16(b, 41);
    b[2] = info_type;
    b[3] = info_class;
    smb2_put32(b + 4, out_len);
    memcpy(b + 24, file_id, 16);
    return total;
}

size_t smb2_build_empty(uint8_t *out, size_t cap)
{
    if (cap < SMB2_HDR_LEN + 4)
        return 0;
    smb2_put16(out + SMB2_HDR_LEN, 4);
    smb2_put16(out + SMB2_HDR_LEN + 2, 0);
    return SMB2_HDR_LEN + 4;
}

int smb2_parse_negotiate(const uint8_t *msg, size_t len, struct smb2_negotiate_rsp *r, char *err,
                         size_t errlen)
{
    int rc = body(msg, len, SMB2_NEGOTIATE, 65, 64, err, errlen);
    if (rc)
        return rc;
    const uint8_t *b = B(msg);
    memset(r, 0, sizeof(*r));
    r->security_mode = smb2_get16(b + 2);
    r->dialect = smb2_get16(b + 4);
    uint16_t nctx = smb2_get16(b + 6);
    memcpy(r->server_guid, b + 8, 16);
    r->capabilities = smb2_get32(b + 24);
    r->max_transact = smb2_get32(b + 28);
    r->max_read = smb2_get32(b + 32);
    r->max_write = smb2_get32(b + 36);
    uint16_t sec_off = smb2_get16(b + 56), sec_len = smb2_get16(b + 58);
    uint32_t ctx_off = smb2_get32(b + 60);
    rc = range(msg, len, SMB2_NEGOTIATE, "SecurityBuffer", sec_off, sec_len, SMB2_HDR_LEN + 64, err,
               errlen);
    if (rc)
        return rc;
    r->sec_blob = sec_len ? msg + sec_off : NULL;
    r->sec_len = sec_len;
    if (r->dialect != 0x0311)
        return 0;
    /* [MS-SMB2] 2.2.4.1: the negotiate contexts, each 8-byte aligned. */
    size_t off = ctx_off;
    for (unsigned i = 0; i < nctx; i++) {
        off = (off + 7) & ~(size_t)7;
        rc = range(msg, len, SMB2_NEGOTIATE, "negotiate context header", off, 8, SMB2_HDR_LEN + 64,
                   err, errlen);
        if (rc)
            return rc;
        uint16_t type = smb2_get16(msg + off), dlen = smb2_get16(msg + off + 2);
        rc = range(msg, len, SMB2_NEGOTIATE, "negotiate context data", off + 8, dlen,
                   SMB2_HDR_LEN + 64, err, errlen);
        if (rc)
            return rc;
        const uint8_t *d = msg + off + 8;
        if (type == SMB2_PREAUTH_INTEGRITY_CAPABILITIES) {
            if (dlen < 4)
                return smb2_err(err, errlen,
                                "NEGOTIATE response: PREAUTH_INTEGRITY context of "
                                "%u bytes",
                                dlen);
            uint16_t count = smb2_get16(d), salt_len = smb2_get16(d + 2);
            if (count != 1 || 4u + 2u * count + salt_len > dlen)
                return smb2_err(err, errlen,
                                "NEGOTIATE response: PREAUTH_INTEGRITY context with "
                                "%u algorithms and a %u-byte salt in %u bytes",
                                count, salt_len, dlen);
            r->preauth_sha512 = smb2_get16(d + 4) == SMB2_PREAUTH_SHA512;
        }
        off += 8 + (size_t)dlen;
    }
    if (!r->preauth_sha512)
        return smb2_err(err, errlen,
                        "NEGOTIATE response: dialect 3.1.1 without a SHA-512 "
                        "PREAUTH_INTEGRITY context");
    return 0;
}

int smb2_parse_session_setup(const uint8_t *msg, size_t len, struct smb2_session_setup_rsp *r,
                             char *err, size_t errlen)
{
    int rc = body(msg, len, SMB2_SESSION_SETUP, 9, 8, err, errlen);
    if (rc)
        return rc;
    const uint8_t *b = B(msg);
    r->session_flags = smb2_get16(b + 2);
    uint16_t off = smb2_get16(b + 4), n = smb2_get16(b + 6);
    rc = range(msg, len, SMB2_SESSION_SETUP, "SecurityBuffer", off, n, SMB2_HDR_LEN + 8, err,
               errlen);
    if (rc)
        return rc;
    r->blob = n ? msg + off : NULL;
    r->blob_len = n;
    return 0;
}

int smb2_parse_tree_connect(const uint8_t *msg, size_t len, uint8_t *share_type, char *err,
                            size_t errlen)
{
    int rc = body(msg, len, SMB2_TREE_CONNECT, 16, 16, err, errlen);
    if (rc)
        return rc;
    *share_type = B(msg)[2];
    return 0;
}

int smb2_parse_create(const uint8_t *msg, size_t len, struct smb2_create_rsp *r, char *err,
                      size_t errlen)
{
    int rc = body(msg, len, SMB2_CREATE, 89, 88, err, errlen);
    if (rc)
        return rc;
    const uint8_t *b = B(msg);
    r->end_of_file = smb2_get64(b + 48);
    r->attributes = smb2_get32(b + 56);
    memcpy(r->file_id, b + 64, 16);
    uint32_t coff = smb2_get32(b + 80), clen = smb2_get32(b + 84);
    return range(msg, len, SMB2_CREATE, "CreateContexts", coff, clen, SMB2_HDR_LEN + 88, err,
                 errlen);
}

int smb2_parse_close(const uint8_t *msg, size_t len, char *err, size_t errlen)
{
    return body(msg, len, SMB2_CLOSE, 60, 60, err, errlen);
}

int smb2_parse_read(const uint8_t *msg, size_t len, struct smb2_read_rsp *r, char *err,
                    size_t errlen)
{
    int rc = body(msg, len, SMB2_READ, 17, 16, err, errlen);
    if (rc)
        return rc;
    const uint8_t *b = B(msg);
    uint8_t off = b[2];
    r->data_len = smb2_get32(b + 4);
    r->data_remaining = smb2_get32(b + 8);
    rc = range(msg, len, SMB2_READ, "data", off, r->data_len, SMB2_HDR_LEN + 16, err, errlen);
    if (rc)
        return rc;
    r->data = r->data_len ? msg + off : NULL;
    return 0;
}

int smb2_parse_write(const uint8_t *msg, size_t len, uint32_t *count, char *err, size_t errlen)
{
    int rc = body(msg, len, SMB2_WRITE, 17, 16, err, errlen);
    if (rc)
        return rc;
    *count = smb2_get32(B(msg) + 4);
    return 0;
}

int smb2_parse_output_buffer(const uint8_t *msg, size_t len, uint16_t command, const uint8_t **buf,
                             uint32_t *buf_len, char *err, size_t errlen)
{
    int rc = body(msg, len, command, 9, 8, err, errlen);
    if (rc)
        return rc;
    const uint8_t *b = B(msg);
    uint16_t off = smb2_get16(b + 2);
    uint32_t n = smb2_get32(b + 4);
    rc = range(msg, len, command, "output buffer", off, n, SMB2_HDR_LEN + 8, err, errlen);
    if (rc)
        return rc;
    *buf = n ? msg + off : NULL;
    *buf_len = n;
    return 0;
}

int smb2_parse_empty(const uint8_t *msg, size_t len, uint16_t command, char *err, size_t errlen)
{
    return body(msg, len, command, 4, 4, err, errlen);
}

int smb2_parse_error(const uint8_t *msg, size_t len, char *err, size_t errlen)
{
    int rc = body(msg, len, smb2_get16(msg + 12), 9, 8, err, errlen);
    if (rc)
        return rc;
    uint32_t n = smb2_get32(B(msg) + 4);
    return range(msg, len, smb2_get16(msg + 12), "ErrorData", SMB2_HDR_LEN + 8, n, SMB2_HDR_LEN + 8,
                 err, errlen);
}

int smb2_dir_next(const uint8_t *buf, size_t len, size_t *off, struct smb2_dir_entry *e, char *err,
                  size_t errlen)
{
    if (*off == SIZE_MAX || *off >= len)
        return 0;
    size_t o = *off;
    if (len - o < 104)
        return smb2_err(err, errlen, "QUERY_DIRECTORY: entry at %zu of %zu bytes is truncated", o,
                        len);
    const uint8_t *p = buf + o;
    uint32_t next = smb2_get32(p);
    uint32_t nb = smb2_get32(p + 60);
    if (nb > len - o - 104)
        return smb2_err(err, errlen,
                        "QUERY_DIRECTORY: name of %u bytes at %zu passes the %zu-byte "
                        "buffer",
                        nb, o, len);
    if (next != 0 && (next < 104 + nb || next > len - o))
        return smb2_err(err, errlen, "QUERY_DIRECTORY: NextEntryOffset %u at %zu is out of range",
                        next, o);
    e->end_of_file = smb2_get64(p + 40);
    e->attributes = smb2_get32(p + 56);
    e->name = p + 104;
    e->name_bytes = nb;
    *off = next ? o + next : SIZE_MAX;
    return 1;
}

long smb2_utf8_to_utf16(const char *s, uint16_t *out, size_t cap)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp;
        int more;
        if (*p < 0x80) {
            cp = *p;
            more = 0;
        } else if ((*p & 0xE0) == 0xC0) {
            cp = *p & 0x1F;
            more = 1;
        } else if ((*p & 0xF0) == 0xE0) {
            cp = *p & 0x0F;
            more = 2;
        } else if ((*p & 0xF8) == 0xF0) {
            cp = *p & 0x07;
            more = 3;
        } else {
            return -1;
        }
        p++;
        for (int i = 0; i < more; i++, p++) {
            if ((*p & 0xC0) != 0x80)
                return -1;
            cp = (cp << 6) | (*p & 0x3F);
        }
        if (cp >= 0x10000) {
            if (cp > 0x10FFFF || n + 2 > cap)
                return -1;
            cp -= 0x10000;
            out[n++] = (uint16_t)(0xD800 | (cp >> 10));
            out[n++] = (uint16_t)(0xDC00 | (cp & 0x3FF));
        } else {
            if (n + 1 > cap)
                return -1;
            out[n++] = (uint16_t)cp;
        }
    }
    return (long)n;
}

long smb2_utf16le_to_utf8(const uint8_t *in, size_t bytes, char *out, size_t cap)
{
    size_t n = 0;
    if (bytes % 2)
        return -1;
    for (size_t i = 0; i < bytes; i += 2) {
        uint32_t cp = smb2_get16(in + i);
        if (cp >= 0xD800 && cp < 0xDC00 && i + 2 < bytes) {
            uint32_t lo = smb2_get16(in + i + 2);
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 2;
            }
        }
        uint8_t tmp[4];
        size_t k;
        if (cp < 0x80) {
            tmp[0] = (uint8_t)cp;
            k = 1;
        } else if (cp < 0x800) {
            tmp[0] = (uint8_t)(0xC0 | (cp >> 6));
            tmp[1] = (uint8_t)(0x80 | (cp & 0x3F));
            k = 2;
        } else if (cp < 0x10000) {
            tmp[0] = (uint8_t)(0xE0 | (cp >> 12));
            tmp[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            tmp[2] = (uint8_t)(0x80 | (cp & 0x3F));
            k = 3;
        } else {
            tmp[0] = (uint8_t)(0xF0 | (cp >> 18));
            tmp[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
            tmp[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            tmp[3] = (uint8_t)(0x80 | (cp & 0x3F));
            k = 4;
        }
        if (n + k + 1 > cap)
            return -1;
        memcpy(out + n, tmp, k);
        n += k;
    }
    if (n + 1 > cap)
        return -1;
    out[n] = '\0';
    return (long)n;
}
