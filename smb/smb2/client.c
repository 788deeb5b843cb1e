/* The SMB2 client: connection state, credits and MessageIds, signing, the commands, and the
 * pipelined READ / WRITE engine of put and get ([MS-SMB2] 3.2). docs/smbdirect.md describes
 * what it sends. */
#include "smb/smb2_client.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "util.h"
#include "wire.h"

/* The client's life. BROKEN: the connection can no longer be trusted (a transport failure, a
 * malformed or wrongly signed response, a timeout with requests outstanding); only
 * smb2_client_disconnect() is left, which sends nothing more. */
enum smb2_client_state {
    CS_NEW,
    CS_NEGOTIATING,
    CS_AUTHENTICATING,
    CS_SESSION,
    CS_TREE,
    CS_DISCONNECTING,
    CS_CLOSED,
    CS_BROKEN,
    CS_COUNT
};
static const char *const cs_names[CS_COUNT] = {
    [CS_NEW] = "NEW",
    [CS_NEGOTIATING] = "NEGOTIATING",
    [CS_AUTHENTICATING] = "AUTHENTICATING",
    [CS_SESSION] = "SESSION",
    [CS_TREE] = "TREE",
    [CS_DISCONNECTING] = "DISCONNECTING",
    [CS_CLOSED] = "CLOSED",
    [CS_BROKEN] = "BROKEN",
};
#define CS_BIT(s) (1u << (s))
static const unsigned cs_allowed[CS_COUNT] = {
    [CS_NEW] = CS_BIT(CS_NEGOTIATING) | CS_BIT(CS_BROKEN) | CS_BIT(CS_CLOSED),
    [CS_NEGOTIATING] = CS_BIT(CS_AUTHENTICATING) | CS_BIT(CS_BROKEN),
    [CS_AUTHENTICATING] = CS_BIT(CS_SESSION) | CS_BIT(CS_BROKEN),
    [CS_SESSION] = CS_BIT(CS_TREE) | CS_BIT(CS_DISCONNECTING) | CS_BIT(CS_BROKEN),
    [CS_TREE] = CS_BIT(CS_DISCONNECTING) | CS_BIT(CS_BROKEN),
    [CS_DISCONNECTING] = CS_BIT(CS_CLOSED),
    [CS_CLOSED] = 0,
    [CS_BROKEN] = CS_BIT(CS_CLOSED),
};

#define CREDIT_TARGET 256 /* credits the client tries to hold */
#define MAX_DESC      16  /* buffer descriptors per READ / WRITE */
#define REQ_SMALL     1024
#define RBUF_MIN      (128 * 1024)
#define DIR_OUT_LEN   65536

struct smb2_client {
    smb_transport *t;
    enum smb2_client_state state;
    enum smb2_channel channel;
    uint32_t io_size, inline_threshold;
    unsigned depth;
    int timeout_ms;
    uint16_t dialect, server_security_mode;
    uint32_t server_caps, max_read, max_write, max_transact;
    /* READ responses accepted with ksmbd 6.1's signature (ksmbd_rdma_read_signature) */
    uint64_t prefixed_signatures;
    uint64_t next_message_id;
    uint32_t credits; /* granted and not yet spent */
    uint64_t session_id;
    uint32_t tree_id;
    int signing; /* sign requests and require signed responses */
    uint8_t signing_key[16];
    uint8_t preauth[64]; /* 3.1.1: the connection's, then the session's hash */
    uint8_t *rbuf;
    size_t rcap, rlen;
    char err[256];
};

static void set_state(struct smb2_client *c, enum smb2_client_state to, const char *why)
{
    assert(c->state < CS_COUNT && to < CS_COUNT);
    assert(cs_allowed[c->state] & CS_BIT(to));
    if (smb2_log_enabled())
        smb2_log("client %s => %s (%s)", cs_names[c->state], cs_names[to], why);
    c->state = to;
}

/* The signing key exists from SESSION on (and in DISCONNECTING, for TREE_DISCONNECT and
 * LOGOFF); BROKEN sends and checks nothing more. */
static int key_ready(const struct smb2_client *c)
{
    return c->state == CS_SESSION || c->state == CS_TREE || c->state == CS_DISCONNECTING;
}

static int fail(struct smb2_client *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct smb2_client *c, int rc, const char *fmt, ...)
{
    char msg[sizeof(c->err)]; /* the arguments may include c->err itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    memcpy(c->err, msg, sizeof(msg));
    if (smb2_log_enabled())
        smb2_log("error: %s", c->err);
    return rc;
}

/* A failure after which the connection is not usable. */
static int broken(struct smb2_client *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int broken(struct smb2_client *c, int rc, const char *fmt, ...)
{
    char msg[sizeof(c->err)]; /* the arguments may include c->err itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    memcpy(c->err, msg, sizeof(msg));
    if (c->state != CS_BROKEN && c->state != CS_CLOSED && c->state != CS_DISCONNECTING)
        set_state(c, CS_BROKEN, c->err);
    return rc;
}

static int status_errno(uint32_t st)
{
    switch (st) {
    case 0xC000006D: /* LOGON_FAILURE */
    case 0xC0000022: /* ACCESS_DENIED */
    case 0xC000006A: /* WRONG_PASSWORD */
        return -EACCES;
    case 0xC00000CC: /* BAD_NETWORK_NAME */
    case 0xC0000034: /* OBJECT_NAME_NOT_FOUND */
    case 0xC000003A: /* OBJECT_PATH_NOT_FOUND */
    case 0xC000000F: /* NO_SUCH_FILE */
        return -ENOENT;
    case 0xC00000BA: /* FILE_IS_A_DIRECTORY */
        return -EISDIR;
    case 0xC0000103: /* NOT_A_DIRECTORY */
        return -ENOTDIR;
    case 0xC000007F: /* DISK_FULL */
        return -ENOSPC;
    default:
        return -EIO;
    }
}

/* The server answered a status other than the one expected: "CMD: STATUS_NAME". */
static int status_fail(struct smb2_client *c, uint16_t cmd, uint32_t st)
{
    return fail(c, status_errno(st), "%s: %s", smb2_command_name(cmd), smb2_status_name(st));
}

static int ensure_rbuf(struct smb2_client *c, size_t need)
{
    if (need <= c->rcap)
        return 0;
    uint8_t *n = realloc(c->rbuf, need);
    if (!n)
        return fail(c, -ENOMEM, "out of memory for a %zu-byte receive buffer", need);
    c->rbuf = n;
    c->rcap = need;
    return 0;
}

/* [MS-SMB2] 3.2.4.1.5: CreditCharge of a request with this payload (large MTU only). */
static uint16_t credit_charge(const struct smb2_client *c, size_t payload)
{
    if (!(c->server_caps & SMB2_GLOBAL_CAP_LARGE_MTU) || payload == 0)
        return 1;
    return (uint16_t)((payload - 1) / 65536 + 1);
}

/* Fills the header of msg, spends charge credits and MessageIds, signs when the session does,
 * and sends. *mid is the request's MessageId. */
static int send_request(struct smb2_client *c, uint8_t *msg, size_t len, uint16_t cmd,
                        uint16_t charge, uint64_t *mid)
{
    if (charge > c->credits)
        return broken(c, -EPROTO, "%s: needs %u credits, the server granted %u",
                      smb2_command_name(cmd), charge, c->credits);
    struct smb2_hdr h = {0};
    h.command = cmd;
    h.credit_charge = (c->server_caps & SMB2_GLOBAL_CAP_LARGE_MTU) ? charge : 0;
    h.credits = charge;
    if (c->credits - charge < CREDIT_TARGET)
        h.credits = (uint16_t)(charge + (CREDIT_TARGET - (c->credits - charge)) / 4 + 1);
    h.message_id = c->next_message_id;
    h.tree_id = cmd == SMB2_TREE_CONNECT ? 0 : c->tree_id;
    h.session_id = c->session_id;
    smb2_hdr_encode(msg, &h);
    /* [MS-SMB2] 3.2.4.1.1: sign when the session requires it, and TREE_CONNECT always in the
     * SMB 3.x dialects (the server rejects an unsigned one on an unencrypted session) */
    if (key_ready(c) && (c->signing || cmd == SMB2_TREE_CONNECT) && cmd != SMB2_NEGOTIATE &&
        cmd != SMB2_SESSION_SETUP)
        smb2_sign_message(c->signing_key, msg, len);
    c->next_message_id += charge;
    c->credits -= charge;
    *mid = h.message_id;
    int rc = c->t->ops->send(c->t, msg, len);
    if (rc)
        return broken(c, rc, "%s: send: %s", smb2_command_name(cmd), smb_transport_error(c->t));
    if (smb2_log_enabled())
        smb2_log("-> %s mid %llu charge %u len %zu (credits left %u)", smb2_command_name(cmd),
                 (unsigned long long)*mid, charge, len, c->credits);
    return 0;
}

/* Receives the next final response into c->rbuf (c->rlen): takes the credits of interim
 * STATUS_PENDING responses ([MS-SMB2] 3.2.5.1.5) and waits on, checks the header and the
 * signature ([MS-SMB2] 3.2.5.1.3). */

/* Linux ksmbd 6.1 signs the response to a READ whose data went by RDMA over the message *and*
 * the 4-byte length prefix before it (its signing takes the iovec before the response, which
 * for a READ holds the data, but here holds the prefix). Interop leniency, as narrow as it can
 * be: only a READ response with no data in it (DataLength 0) over a transport with RDMA, only
 * when the ordinary signature failed, and still a full AES-CMAC over every byte of it; counted
 * and said once per connection. */
static int ksmbd_rdma_read_signature(smb2_client *c, const struct smb2_hdr *h, size_t len)
{
    if (h->command != SMB2_READ || !c->t->ops->register_buffer || len < SMB2_HDR_LEN + 16 ||
        smb2_get32(c->rbuf + SMB2_HDR_LEN + 4) != 0)
        return 0;
    if (!smb2_verify_message_with_length_prefix(c->signing_key, c->rbuf, len))
        return 0;
    if (c->prefixed_signatures++ == 0)
        fprintf(stderr, "smb2: the server signed an RDMA READ response over its 4-byte length "
                        "prefix too (Linux ksmbd 6.1); accepted (docs/smbdirect.md)\n");
    return 1;
}

static int recv_response(struct smb2_client *c, struct smb2_hdr *h)
{
    for (;;) {
        size_t len = 0;
        int rc = c->t->ops->recv(c->t, c->rbuf, c->rcap, &len, c->timeout_ms);
        if (rc)
            return broken(c, rc, "receive: %s", smb_transport_error(c->t));
        char why[160];
        rc = smb2_hdr_decode(c->rbuf, len, h, why, sizeof(why));
        if (rc)
            return broken(c, rc, "malformed response: %s", why);
        c->rlen = len;
        if ((uint64_t)c->credits + h->credits > 65535)
            return broken(c, -EPROTO,
                          "%s: the server granted %u credits beyond the 65535 the "
                          "client can hold",
                          smb2_command_name(h->command), h->credits);
        c->credits += h->credits;
        if (smb2_log_enabled())
            smb2_log("<- %s mid %llu %s credits +%u = %u len %zu", smb2_command_name(h->command),
                     (unsigned long long)h->message_id, smb2_status_name(h->status), h->credits,
                     c->credits, len);
        if ((h->flags & SMB2_FLAGS_ASYNC_COMMAND) && h->status == STATUS_PENDING)
            continue; /* interim: the final response follows */
        if (h->message_id >= c->next_message_id)
            return broken(c, -EPROTO, "%s: response to MessageId %llu, never sent",
                          smb2_command_name(h->command), (unsigned long long)h->message_id);
        if (key_ready(c) && h->session_id == c->session_id && c->session_id) {
            if (h->flags & SMB2_FLAGS_SIGNED) {
                if (!smb2_verify_message(c->signing_key, c->rbuf, len) &&
                    !ksmbd_rdma_read_signature(c, h, len))
                    return broken(c, -EBADMSG, "%s: the response's signature is wrong",
                                  smb2_command_name(h->command));
            } else if (c->signing) {
                return broken(c, -EBADMSG, "%s: unsigned response (%s) on a signed session",
                              smb2_command_name(h->command), smb2_status_name(h->status));
            }
        }
        return 0;
    }
}

/* One request, its response (nothing else outstanding). The response is in c->rbuf. */
static int transact(struct smb2_client *c, uint8_t *msg, size_t len, uint16_t cmd, uint16_t charge,
                    struct smb2_hdr *h)
{
    uint64_t mid;
    int rc = send_request(c, msg, len, cmd, charge, &mid);
    if (rc)
        return rc;
    rc = recv_response(c, h);
    if (rc)
        return rc;
    if (h->message_id != mid || h->command != cmd)
        return broken(c, -EPROTO, "%s: response for %s MessageId %llu instead of %llu",
                      smb2_command_name(cmd), smb2_command_name(h->command),
                      (unsigned long long)h->message_id, (unsigned long long)mid);
    return 0;
}

/* Checks the body of an error response (a status other than success). */
static int check_error_body(struct smb2_client *c, const struct smb2_hdr *h)
{
    char why[160];
    if (smb2_parse_error(c->rbuf, c->rlen, why, sizeof(why)))
        return broken(c, -EPROTO, "malformed error response: %s", why);
    return status_fail(c, h->command, h->status);
}

static int malformed(struct smb2_client *c, const char *why)
{
    return broken(c, -EPROTO, "malformed response: %s", why);
}

/* --- NEGOTIATE --- */

static int negotiate(struct smb2_client *c, uint16_t max_dialect, int require_signing)
{
    set_state(c, CS_NEGOTIATING, "connect");
    uint16_t dialects[2] = {0x0302, 0x0311};
    unsigned n = max_dialect >= 0x0311 ? 2 : 1;
    uint8_t guid[16], salt[32], msg[REQ_SMALL];
    if (getrandom(guid, sizeof(guid), 0) != sizeof(guid) ||
        getrandom(salt, sizeof(salt), 0) != sizeof(salt))
        return broken(c, -EIO, "getrandom failed");
    uint16_t sec =
        require_signing ? SMB2_NEGOTIATE_SIGNING_REQUIRED : SMB2_NEGOTIATE_SIGNING_ENABLED;
    size_t len = smb2_build_negotiate(msg, sizeof(msg), dialects, n, sec, SMB2_GLOBAL_CAP_LARGE_MTU,
                                      guid, salt);
    assert(len);
    struct smb2_hdr h;
    /* the header is written by send_request; the hash covers the bytes sent */
    uint64_t mid;
    int rc = send_request(c, msg, len, SMB2_NEGOTIATE, 1, &mid);
    if (rc)
        return rc;
    memset(c->preauth, 0, sizeof(c->preauth));
    smb2_preauth_update(c->preauth, msg, len);
    rc = recv_response(c, &h);
    if (rc)
        return rc;
    if (h.command != SMB2_NEGOTIATE || h.message_id != mid)
        return broken(c, -EPROTO, "NEGOTIATE: answered by %s MessageId %llu",
                      smb2_command_name(h.command), (unsigned long long)h.message_id);
    if (h.status != STATUS_SUCCESS) {
        rc = check_error_body(c, &h);
        return broken(c, rc, "%s", c->err);
    }
    struct smb2_negotiate_rsp r;
    char why[160];
    if (smb2_parse_negotiate(c->rbuf, c->rlen, &r, why, sizeof(why)))
        return malformed(c, why);
    if (r.dialect != 0x0302 && !(r.dialect == 0x0311 && n == 2))
        return broken(c, -EPROTO, "NEGOTIATE: the server chose dialect 0x%04x, not one offered",
                      r.dialect);
    if (r.dialect == 0x0311)
        smb2_preauth_update(c->preauth, c->rbuf, c->rlen);
    c->dialect = r.dialect;
    c->server_security_mode = r.security_mode;
    c->server_caps = r.capabilities;
    c->max_read = r.max_read;
    c->max_write = r.max_write;
    c->max_transact = r.max_transact;
    if (c->max_read < 4096 || c->max_write < 4096)
        return broken(c, -EPROTO, "NEGOTIATE: MaxReadSize %u / MaxWriteSize %u below 4096",
                      c->max_read, c->max_write);
    if (!(c->server_caps & SMB2_GLOBAL_CAP_LARGE_MTU)) {
        /* without multi-credit requests, one request carries at most 64 KiB */
        if (c->max_read > 65536)
            c->max_read = 65536;
        if (c->max_write > 65536)
            c->max_write = 65536;
    }
    c->signing = require_signing || (r.security_mode & SMB2_NEGOTIATE_SIGNING_REQUIRED);
    set_state(c, CS_AUTHENTICATING, "dialect negotiated");
    return 0;
}

/* --- SESSION_SETUP with NTLMv2 --- */

static uint64_t filetime_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec + 11644473600ull) * 10000000ull + (uint64_t)ts.tv_nsec / 100;
}

static int session_step(struct smb2_client *c, const uint8_t *blob, size_t blob_len,
                        struct smb2_hdr *h)
{
    size_t cap = SMB2_HDR_LEN + SMB2_SESSION_SETUP_REQ_FIXED + blob_len;
    uint8_t *msg = malloc(cap);
    if (!msg)
        return fail(c, -ENOMEM, "out of memory");
    uint8_t sec = c->signing ? SMB2_NEGOTIATE_SIGNING_REQUIRED : SMB2_NEGOTIATE_SIGNING_ENABLED;
    size_t len = smb2_build_session_setup(msg, cap, sec, blob, blob_len);
    if (!len) {
        free(msg);
        return broken(c, -EINVAL, "SESSION_SETUP: security blob of %zu bytes too large", blob_len);
    }
    uint64_t mid;
    int rc = send_request(c, msg, len, SMB2_SESSION_SETUP, 1, &mid);
    if (!rc && c->dialect == 0x0311)
        smb2_preauth_update(c->preauth, msg, len);
    free(msg);
    if (rc)
        return rc;
    rc = recv_response(c, h);
    if (rc)
        return rc;
    if (h->command != SMB2_SESSION_SETUP || h->message_id != mid)
        return broken(c, -EPROTO, "SESSION_SETUP: answered by %s MessageId %llu",
                      smb2_command_name(h->command), (unsigned long long)h->message_id);
    return 0;
}

static int session_setup(struct smb2_client *c, const smb2_client_options *o)
{
    char why[160];
    struct smb2_hdr h;
    /* 1: NEGOTIATE_MESSAGE in a NegTokenInit */
    const uint32_t flags =
        NTLMSSP_NEGOTIATE_UNICODE | NTLMSSP_REQUEST_TARGET | NTLMSSP_NEGOTIATE_SIGN |
        NTLMSSP_NEGOTIATE_NTLM | NTLMSSP_NEGOTIATE_ALWAYS_SIGN |
        NTLMSSP_NEGOTIATE_EXTENDED_SESSIONSECURITY | NTLMSSP_NEGOTIATE_TARGET_INFO |
        NTLMSSP_NEGOTIATE_128 | NTLMSSP_NEGOTIATE_KEY_EXCH | NTLMSSP_NEGOTIATE_56;
    uint8_t ntlm_neg[64], blob[256];
    size_t nl = ntlm_negotiate_msg(ntlm_neg, sizeof(ntlm_neg), flags);
    size_t bl = spnego_init(blob, sizeof(blob), ntlm_neg, nl);
    assert(nl && bl);
    int rc = session_step(c, blob, bl, &h);
    if (rc)
        return rc;
    if (h.status != STATUS_MORE_PROCESSING_REQUIRED) {
        if (h.status == STATUS_SUCCESS)
            return broken(c, -EPROTO, "SESSION_SETUP: success without an NTLM challenge");
        rc = check_error_body(c, &h);
        return broken(c, rc, "%s", c->err);
    }
    if (c->dialect == 0x0311)
        smb2_preauth_update(c->preauth, c->rbuf, c->rlen);
    if (h.session_id == 0)
        return broken(c, -EPROTO, "SESSION_SETUP: no SessionId in the challenge response");
    c->session_id = h.session_id;
    struct smb2_session_setup_rsp sr;
    if (smb2_parse_session_setup(c->rbuf, c->rlen, &sr, why, sizeof(why)))
        return malformed(c, why);
    const uint8_t *tok;
    size_t tok_len;
    int neg_state;
    struct ntlm_challenge ch;
    if (spnego_parse_resp(sr.blob, sr.blob_len, &tok, &tok_len, &neg_state, why, sizeof(why)) ||
        !tok || ntlm_parse_challenge(tok, tok_len, &ch, why, sizeof(why)))
        return broken(c, -EPROTO, "SESSION_SETUP: %s", tok ? why : "no NTLMSSP challenge");

    /* 2: AUTHENTICATE_MESSAGE with the NTLMv2 response ([MS-NLMP] 3.1.5.1.2, 3.3.2) */
    uint8_t key[16], cc[8], exported[16], enc_key[16];
    if (ntlm_ntowfv2(o->password, o->user, o->domain, key))
        return broken(c, -EINVAL, "SESSION_SETUP: user, domain or password is not UTF-8");
    if (getrandom(cc, sizeof(cc), 0) != sizeof(cc) ||
        getrandom(exported, sizeof(exported), 0) != sizeof(exported))
        return broken(c, -EIO, "getrandom failed");
    struct ntlm_v2 v;
    rc = ntlm_v2_response(key, ch.server_challenge, cc,
                          ch.has_timestamp ? ch.timestamp : filetime_now(), ch.target_info,
                          ch.target_info_len, &v);
    explicit_bzero(key, sizeof(key));
    if (rc)
        return broken(c, rc, "out of memory");
    uint32_t aflags = flags & ch.flags;
    const uint8_t *enc = NULL;
    if (aflags & NTLMSSP_NEGOTIATE_KEY_EXCH) {
        ntlm_rc4(v.session_base_key, exported, enc_key);
        enc = enc_key;
    } else {
        memcpy(exported, v.session_base_key, 16);
    }
    static const uint8_t z24[24];
    size_t al = 0;
    uint8_t *auth = ntlm_authenticate_msg(aflags, ch.has_timestamp ? z24 : v.lm_resp, 24, v.nt_resp,
                                          v.nt_resp_len, o->domain, o->user, "", enc, &al);
    ntlm_v2_free(&v);
    uint8_t *blob2 = auth ? malloc(al + 32) : NULL;
    size_t bl2 = blob2 ? spnego_resp(blob2, al + 32, auth, al) : 0;
    free(auth);
    if (!bl2) {
        free(blob2);
        return broken(c, -ENOMEM, "SESSION_SETUP: out of memory");
    }
    rc = session_step(c, blob2, bl2, &h);
    free(blob2);
    if (rc)
        return rc;
    if (h.status != STATUS_SUCCESS) {
        rc = check_error_body(c, &h);
        return broken(c, rc, "%s", c->err);
    }
    if (smb2_parse_session_setup(c->rbuf, c->rlen, &sr, why, sizeof(why)))
        return malformed(c, why);
    if (sr.blob_len &&
        spnego_parse_resp(sr.blob, sr.blob_len, &tok, &tok_len, &neg_state, why, sizeof(why)))
        return broken(c, -EACCES, "SESSION_SETUP: %s", why);
    if (sr.session_flags & (SMB2_SESSION_FLAG_IS_GUEST | SMB2_SESSION_FLAG_IS_NULL))
        return broken(c, -EACCES, "SESSION_SETUP: the server made this a %s session",
                      (sr.session_flags & SMB2_SESSION_FLAG_IS_NULL) ? "null" : "guest");
    if (sr.session_flags & SMB2_SESSION_FLAG_ENCRYPT_DATA)
        return broken(c, -EOPNOTSUPP,
                      "SESSION_SETUP: the server requires encryption, which "
                      "this client does not do");

    /* 3: the signing key ([MS-SMB2] 3.2.5.3.1, 3.1.4.2) */
    if (c->dialect == 0x0311) {
        static const uint8_t label[] = "SMBSigningKey";
        smb2_kdf(exported, label, sizeof(label), c->preauth, 64, c->signing_key);
    } else {
        static const uint8_t label[] = "SMB2AESCMAC", ctx[] = "SmbSign";
        smb2_kdf(exported, label, sizeof(label), ctx, sizeof(ctx), c->signing_key);
    }
    explicit_bzero(exported, sizeof(exported));
    /* The final SESSION_SETUP response is signed with the new key ([MS-SMB2] 3.3.5.5.3). */
    if (h.flags & SMB2_FLAGS_SIGNED) {
        if (!smb2_verify_message(c->signing_key, c->rbuf, c->rlen))
            return broken(c, -EBADMSG,
                          "SESSION_SETUP: the final response's signature is wrong "
                          "(wrong password or key derivation)");
    } else if (c->signing || c->dialect == 0x0311) {
        return broken(c, -EBADMSG, "SESSION_SETUP: the final response is not signed");
    }
    set_state(c, CS_SESSION, "NTLMv2 session set up");
    return 0;
}

/* --- TREE_CONNECT --- */

static int tree_connect(struct smb2_client *c, const char *server, const char *share)
{
    size_t n = strlen(server) + strlen(share) + 4;
    char *path = malloc(n);
    uint16_t *u = malloc(n * 2 * sizeof(uint16_t));
    uint8_t *msg = malloc(SMB2_HDR_LEN + SMB2_TREE_CONNECT_REQ_FIXED + n * 4);
    int rc = -ENOMEM;
    if (!path || !u || !msg) {
        rc = fail(c, -ENOMEM, "out of memory");
        goto out;
    }
    snprintf(path, n, "\\\\%s\\%s", server, share);
    long units = smb2_utf8_to_utf16(path, u, n * 2);
    if (units <= 0) {
        rc = fail(c, -EINVAL, "TREE_CONNECT: %s is not UTF-8", path);
        goto out;
    }
    size_t len = smb2_build_tree_connect(msg, SMB2_HDR_LEN + SMB2_TREE_CONNECT_REQ_FIXED + n * 4, u,
                                         (size_t)units);
    struct smb2_hdr h;
    rc = transact(c, msg, len, SMB2_TREE_CONNECT, 1, &h);
    if (rc)
        goto out;
    if (h.status != STATUS_SUCCESS) {
        rc = check_error_body(c, &h);
        goto out;
    }
    uint8_t type;
    char why[160];
    if (smb2_parse_tree_connect(c->rbuf, c->rlen, &type, why, sizeof(why))) {
        rc = malformed(c, why);
        goto out;
    }
    if (type != 0x01) {
        rc = fail(c, -ENOTDIR, "TREE_CONNECT: %s is not a disk share (ShareType %u)", path, type);
        goto out;
    }
    c->tree_id = h.tree_id;
    set_state(c, CS_TREE, "share connected");
    rc = 0;
out:
    free(path);
    free(u);
    free(msg);
    return rc;
}

int smb2_client_connect(smb_transport *t, const smb2_client_options *o, const char *server,
                        const char *share, smb2_client **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!t || !o || !o->user || !o->password || !server || !share) {
        snprintf(err, errlen,
                 "smb2_client_connect: transport, options, user, password, server "
                 "and share are required");
        return -EINVAL;
    }
    uint16_t maxd = o->max_dialect ? o->max_dialect : 0x0311;
    if (maxd != 0x0302 && maxd != 0x0311) {
        snprintf(err, errlen, "max_dialect 0x%04x: only 0x0302 and 0x0311", maxd);
        return -EINVAL;
    }
    if (o->channel != SMB2_IO_INLINE && !t->ops->register_buffer) {
        snprintf(err, errlen, "an RDMA channel on the %s transport, which has no RDMA",
                 t->ops->name);
        return -EINVAL;
    }
    if (o->channel > SMB2_IO_RDMA_INVALIDATE) {
        snprintf(err, errlen, "channel %d is not a channel", (int)o->channel);
        return -EINVAL;
    }
    struct smb2_client *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->t = t;
    c->state = CS_NEW;
    c->channel = o->channel;
    c->io_size = o->io_size;
    c->depth = o->depth ? o->depth : 1;
    c->inline_threshold = o->inline_threshold ? o->inline_threshold : 4096;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->credits = 1;
    int rc = ensure_rbuf(c, RBUF_MIN);
    if (!rc)
        rc = negotiate(c, maxd, o->require_signing);
    if (!rc)
        rc = session_setup(c, o);
    if (!rc)
        rc = tree_connect(c, server, share);
    if (rc) {
        snprintf(err, errlen, "%s", c->err);
        smb2_client_disconnect(c);
        return rc;
    }
    *out = c;
    return 0;
}

uint16_t smb2_client_dialect(const smb2_client *c)
{
    return c->dialect;
}

const char *smb2_client_error(const smb2_client *c)
{
    return c->err;
}

static void simple_command(struct smb2_client *c, uint16_t cmd)
{
    uint8_t msg[SMB2_HDR_LEN + 4];
    size_t len = smb2_build_empty(msg, sizeof(msg));
    struct smb2_hdr h;
    char why[160];
    if (transact(c, msg, len, cmd, 1, &h))
        return;
    if (h.status != STATUS_SUCCESS)
        status_fail(c, cmd, h.status);
    else if (smb2_parse_empty(c->rbuf, c->rlen, cmd, why, sizeof(why)))
        malformed(c, why);
}

void smb2_client_disconnect(smb2_client *c)
{
    if (!c)
        return;
    if (c->state == CS_TREE || c->state == CS_SESSION) {
        enum smb2_client_state was = c->state;
        set_state(c, CS_DISCONNECTING, "disconnect");
        if (was == CS_TREE)
            simple_command(c, SMB2_TREE_DISCONNECT);
        if (c->state == CS_DISCONNECTING)
            simple_command(c, SMB2_LOGOFF);
    }
    if (c->state != CS_CLOSED)
        set_state(c, CS_CLOSED, "freed");
    explicit_bzero(c->signing_key, sizeof(c->signing_key));
    free(c->rbuf);
    free(c);
}

/* --- files --- */

/* A remote path ('/' or '\\' separators, leading ones dropped) in UTF-16 with '\\'. */
static long remote_name(struct smb2_client *c, const char *path, uint16_t **out)
{
    while (*path == '/' || *path == '\\')
        path++;
    size_t n = strlen(path) + 1;
    uint16_t *u = malloc(n * 2 * sizeof(uint16_t));
    if (!u)
        return fail(c, -ENOMEM, "out of memory");
    long units = smb2_utf8_to_utf16(path, u, n * 2);
    if (units < 0) {
        free(u);
        return fail(c, -EINVAL, "remote path %s is not UTF-8", path);
    }
    while (units > 0 && u[units - 1] == '/')
        units--;
    for (long i = 0; i < units; i++)
        if (u[i] == '/')
            u[i] = '\\';
    *out = u;
    return units;
}

static int usable(struct smb2_client *c)
{
    if (c->state != CS_TREE)
        return fail(c, -ENOTCONN, "the client is %s, not connected to a share", cs_names[c->state]);
    return 0;
}

static int create_file(struct smb2_client *c, const char *path, const struct smb2_create_req *tmpl,
                       struct smb2_create_rsp *r)
{
    uint16_t *name = NULL;
    long units = remote_name(c, path, &name);
    if (units < 0)
        return (int)units;
    struct smb2_create_req q = *tmpl;
    q.name = name;
    q.name_units = (size_t)units;
    size_t cap = SMB2_HDR_LEN + SMB2_CREATE_REQ_FIXED + 2 * (size_t)units + 8;
    uint8_t *msg = malloc(cap);
    if (!msg) {
        free(name);
        return fail(c, -ENOMEM, "out of memory");
    }
    size_t len = smb2_build_create(msg, cap, &q);
    free(name);
    if (!len) {
        free(msg);
        return fail(c, -ENAMETOOLONG, "CREATE: remote path %s too long", path);
    }
    struct smb2_hdr h;
    int rc = transact(c, msg, len, SMB2_CREATE, 1, &h);
    free(msg);
    if (rc)
        return rc;
    if (h.status != STATUS_SUCCESS) {
        rc = check_error_body(c, &h);
        return fail(c, rc, "%s (%s)", c->err, path);
    }
    char why[160];
    if (smb2_parse_create(c->rbuf, c->rlen, r, why, sizeof(why)))
        return malformed(c, why);
    return 0;
}

static int close_file(struct smb2_client *c, const uint8_t fid[16])
{
    uint8_t msg[SMB2_HDR_LEN + SMB2_CLOSE_REQ_FIXED];
    size_t len = smb2_build_close(msg, sizeof(msg), fid);
    struct smb2_hdr h;
    int rc = transact(c, msg, len, SMB2_CLOSE, 1, &h);
    if (rc)
        return rc;
    if (h.status != STATUS_SUCCESS)
        return check_error_body(c, &h);
    char why[160];
    if (smb2_parse_close(c->rbuf, c->rlen, why, sizeof(why)))
        return malformed(c, why);
    return 0;
}

/* QUERY_INFO FileStandardInformation ([MS-FSCC] 2.4.41): EndOfFile. */
static int query_size(struct smb2_client *c, const uint8_t fid[16], uint64_t *size)
{
    uint8_t msg[SMB2_HDR_LEN + SMB2_QUERY_INFO_REQ_FIXED + 1];
    size_t len = smb2_build_query_info(msg, sizeof(msg), fid, 0x01 /* SMB2_0_INFO_FILE */,
                                       0x05 /* FileStandardInformation */, 24);
    struct smb2_hdr h;
    int rc = transact(c, msg, len, SMB2_QUERY_INFO, 1, &h);
    if (rc)
        return rc;
    if (h.status != STATUS_SUCCESS)
        return check_error_body(c, &h);
    const uint8_t *buf;
    uint32_t n;
    char why[160];
    if (smb2_parse_output_buffer(c->rbuf, c->rlen, SMB2_QUERY_INFO, &buf, &n, why, sizeof(why)))
        return malformed(c, why);
    if (n < 24)
        return broken(c, -EPROTO, "QUERY_INFO: FileStandardInformation of %u bytes, not 24", n);
    *size = smb2_get64(buf + 8);
    return 0;
}

/* --- the READ / WRITE engine --- */

/* A READ / WRITE buffer's life: FREE, IN_FLIGHT (its request sent), DONE (a READ's data
 * waiting for the earlier ones to reach the fd), FREE again. */
enum io_slot_state { SLOT_FREE, SLOT_IN_FLIGHT, SLOT_DONE, SLOT_COUNT };
static const char *const slot_names[SLOT_COUNT] = {
    [SLOT_FREE] = "FREE",
    [SLOT_IN_FLIGHT] = "IN_FLIGHT",
    [SLOT_DONE] = "DONE",
};
static const unsigned slot_allowed[SLOT_COUNT] = {
    [SLOT_FREE] = 1u << SLOT_IN_FLIGHT,
    [SLOT_IN_FLIGHT] = (1u << SLOT_DONE) | (1u << SLOT_FREE),
    [SLOT_DONE] = 1u << SLOT_FREE,
};

struct io_slot {
    enum io_slot_state state;
    uint64_t mid;
    uint64_t offset;
    uint32_t len;
    int rdma;
    smb_rdma_region *region;
    uint8_t *buf; /* WRITE: the request, data at SMB2_WRITE_DATA_OFFSET; READ: the data */
    uint8_t req[SMB2_HDR_LEN + SMB2_WRITE_REQ_FIXED + MAX_DESC * SMB2_BUFFER_DESC_LEN];
};

struct io_job {
    struct smb2_client *c;
    int is_write;
    int fd;
    uint8_t fid[16];
    uint64_t size;    /* READ: the file's size */
    uint64_t issued;  /* bytes requested so far */
    uint64_t written; /* READ: bytes written to fd, in order */
    int eof;          /* WRITE: fd at EOF */
    uint32_t chunk;
    uint32_t channel; /* SMB2_CHANNEL_* for transfers at or above the threshold */
    struct io_slot *slots;
    unsigned nslots, inflight;
    smb2_io_stats st;
};

static void slot_set(struct io_slot *s, enum io_slot_state to, const char *why)
{
    assert(s->state < SLOT_COUNT && to < SLOT_COUNT);
    assert(slot_allowed[s->state] & (1u << to));
    if (smb2_log_enabled())
        smb2_log("slot at offset %llu: %s => %s (%s)", (unsigned long long)s->offset,
                 slot_names[s->state], slot_names[to], why);
    s->state = to;
}

static uint32_t io_chunk(struct smb2_client *c, int is_write)
{
    uint64_t m = is_write ? c->max_write : c->max_read;
    if (c->channel != SMB2_IO_INLINE) {
        size_t r = c->t->ops->max_rdma(c->t);
        if (r && r < m)
            m = r;
    }
    /* inline transfers (all of them on an inline channel, the small ones otherwise) fit one
     * message with their header */
    size_t mm = c->t->ops->max_message(c->t);
    size_t hdr = SMB2_HDR_LEN + SMB2_WRITE_REQ_FIXED + 16;
    if (c->channel == SMB2_IO_INLINE && mm > hdr && mm - hdr < m)
        m = mm - hdr;
    if (c->io_size && c->io_size < m)
        m = c->io_size;
    if (m > UINT32_MAX)
        m = UINT32_MAX;
    return (uint32_t)m;
}

static ssize_t read_fd(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int write_fd(int fd, const uint8_t *buf, size_t n)
{
    while (n) {
        ssize_t r = write(fd, buf, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += r;
        n -= (size_t)r;
    }
    return 0;
}

static int release_region(struct io_job *j, struct io_slot *s)
{
    struct smb2_client *c = j->c;
    if (!s->region)
        return 0;
    enum smb_rdma_release how = SMB_RDMA_RELEASED_LOCALLY;
    int rc = c->t->ops->release_buffer(c->t, s->region, &how);
    s->region = NULL;
    if (rc)
        return broken(c, rc, "release of a %s buffer: %s", j->is_write ? "WRITE" : "READ",
                      smb_transport_error(c->t));
    if (how == SMB_RDMA_RELEASED_BY_PEER)
        j->st.remote_invalidations++;
    else
        j->st.local_invalidations++;
    return 0;
}

/* Issues the next request in the free slot s; 0 and s IN_FLIGHT, 0 and s still FREE (EOF), or
 * < 0. */
static int io_issue(struct io_job *j, struct io_slot *s)
{
    struct smb2_client *c = j->c;
    uint32_t n;
    if (j->is_write) {
        ssize_t r = read_fd(j->fd, s->buf + SMB2_WRITE_DATA_OFFSET, j->chunk);
        if (r < 0)
            return fail(c, (int)r, "read of the local file: %s", strerror((int)-r));
        if (r == 0) {
            j->eof = 1;
            return 0;
        }
        n = (uint32_t)r;
        if ((uint32_t)r < j->chunk)
            j->eof = 1;
    } else {
        uint64_t left = j->size - j->issued;
        n = left < j->chunk ? (uint32_t)left : j->chunk;
    }
    s->offset = j->issued;
    s->len = n;
    s->rdma = j->channel != SMB2_CHANNEL_NONE && n >= c->inline_threshold;
    smb_buffer_desc desc[MAX_DESC];
    unsigned ndesc = 0;
    if (s->rdma) {
        uint8_t *data = j->is_write ? s->buf + SMB2_WRITE_DATA_OFFSET : s->buf;
        int rc = c->t->ops->register_buffer(
            c->t, data, n, j->is_write ? SMB_RDMA_PEER_READS : SMB_RDMA_PEER_WRITES, &s->region,
            desc, MAX_DESC, &ndesc);
        if (rc)
            return broken(c, rc, "register of a %u-byte buffer: %s", n, smb_transport_error(c->t));
        if (ndesc == 0 || ndesc > MAX_DESC)
            return broken(c, -EPROTO, "register of a %u-byte buffer gave %u descriptors", n, ndesc);
    }
    uint8_t *msg;
    size_t len;
    uint16_t cmd = j->is_write ? SMB2_WRITE : SMB2_READ;
    uint32_t ch = s->rdma ? j->channel : SMB2_CHANNEL_NONE;
    if (j->is_write && !s->rdma) {
        msg = s->buf;
        len = smb2_build_write(msg, SMB2_WRITE_DATA_OFFSET + (size_t)j->chunk, j->fid, s->offset,
                               NULL, n, ch, NULL, 0);
    } else if (j->is_write) {
        msg = s->req;
        len = smb2_build_write(msg, sizeof(s->req), j->fid, s->offset, NULL, n, ch, desc, ndesc);
    } else {
        msg = s->req;
        len = smb2_build_read(msg, sizeof(s->req), j->fid, s->offset, n, ch, desc, ndesc);
    }
    assert(len);
    int rc = send_request(c, msg, len, cmd, credit_charge(c, n), &s->mid);
    if (rc)
        return rc;
    slot_set(s, SLOT_IN_FLIGHT, j->is_write ? "WRITE sent" : "READ sent");
    j->issued += n;
    j->inflight++;
    if (j->is_write)
        j->st.requests_write++;
    else
        j->st.requests_read++;
    if (s->rdma)
        j->st.rdma_requests++;
    else
        j->st.inline_requests++;
    return 0;
}

static int more_to_issue(const struct io_job *j)
{
    return j->is_write ? !j->eof : j->issued < j->size;
}

/* READ: writes the finished slots to the fd in file order. */
static int io_flush(struct io_job *j)
{
    for (;;) {
        struct io_slot *next = NULL;
        for (unsigned i = 0; i < j->nslots; i++)
            if (j->slots[i].state == SLOT_DONE && j->slots[i].offset == j->written)
                next = &j->slots[i];
        if (!next)
            return 0;
        int rc = write_fd(j->fd, next->buf, next->len);
        if (rc)
            return fail(j->c, rc, "write of the local file: %s", strerror(-rc));
        j->written += next->len;
        slot_set(next, SLOT_FREE, "data written to the fd");
    }
}

/* Receives one response and completes its slot. */
static int io_complete(struct io_job *j)
{
    struct smb2_client *c = j->c;
    struct smb2_hdr h;
    int rc = recv_response(c, &h);
    if (rc)
        return rc;
    struct io_slot *s = NULL;
    for (unsigned i = 0; i < j->nslots; i++)
        if (j->slots[i].state == SLOT_IN_FLIGHT && j->slots[i].mid == h.message_id)
            s = &j->slots[i];
    uint16_t cmd = j->is_write ? SMB2_WRITE : SMB2_READ;
    if (!s || h.command != cmd)
        return broken(c, -EPROTO, "%s response MessageId %llu matches no request in flight",
                      smb2_command_name(h.command), (unsigned long long)h.message_id);
    slot_set(s, j->is_write ? SLOT_FREE : SLOT_DONE, smb2_status_name(h.status));
    j->inflight--;
    rc = release_region(j, s);
    if (rc)
        return rc;
    if (h.status != STATUS_SUCCESS) {
        rc = check_error_body(c, &h);
        return fail(c, rc, "%s at offset %llu: %s", smb2_command_name(cmd),
                    (unsigned long long)s->offset, c->err);
    }
    char why[160];
    if (j->is_write) {
        uint32_t count;
        if (smb2_parse_write(c->rbuf, c->rlen, &count, why, sizeof(why)))
            return malformed(c, why);
        if (count != s->len)
            return fail(c, -EIO, "WRITE at offset %llu: %u of %u bytes written",
                        (unsigned long long)s->offset, count, s->len);
        j->st.bytes += s->len;
        return 0;
    }
    struct smb2_read_rsp r;
    if (smb2_parse_read(c->rbuf, c->rlen, &r, why, sizeof(why)))
        return malformed(c, why);
    /* [MS-SMB2] 3.3.5.12: over RDMA the data went to the buffer and DataRemaining says how
     * much; inline it is in the response. */
    uint32_t got = s->rdma ? r.data_remaining : r.data_len;
    if (s->rdma && r.data_len != 0)
        return broken(c, -EPROTO, "READ over RDMA: DataLength %u inline, not 0", r.data_len);
    if (got > s->len)
        return broken(c, -EPROTO, "READ at offset %llu: %u bytes for a %u-byte request",
                      (unsigned long long)s->offset, got, s->len);
    if (got < s->len)
        return fail(c, -EIO, "READ at offset %llu: %u of %u bytes (the file shrank?)",
                    (unsigned long long)s->offset, got, s->len);
    if (!s->rdma)
        memcpy(s->buf, r.data, got);
    j->st.bytes += got;
    return io_flush(j);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int io_run(struct io_job *j)
{
    struct smb2_client *c = j->c;
    j->chunk = io_chunk(c, j->is_write);
    j->channel = c->channel == SMB2_IO_RDMA              ? SMB2_CHANNEL_RDMA_V1
                 : c->channel == SMB2_IO_RDMA_INVALIDATE ? SMB2_CHANNEL_RDMA_V1_INVALIDATE
                                                         : SMB2_CHANNEL_NONE;
    /* [MS-SMB2] 2.2.19: SMB2_CHANNEL_RDMA_V1_INVALIDATE is valid from dialect 3.0.2 on */
    if (j->channel == SMB2_CHANNEL_RDMA_V1_INVALIDATE && c->dialect < 0x0302)
        return fail(c, -EOPNOTSUPP, "RDMA_V1_INVALIDATE needs dialect 3.0.2, not 0x%04x",
                    c->dialect);
    int rc =
        ensure_rbuf(c, (size_t)j->chunk + 4096 > RBUF_MIN ? (size_t)j->chunk + 4096 : RBUF_MIN);
    if (rc)
        return rc;
    j->nslots = c->depth;
    j->slots = calloc(j->nslots, sizeof(*j->slots));
    if (!j->slots)
        return fail(c, -ENOMEM, "out of memory");
    size_t bufsz = (j->is_write ? SMB2_WRITE_DATA_OFFSET : 0) + (size_t)j->chunk + 1;
    for (unsigned i = 0; i < j->nslots; i++) {
        j->slots[i].buf = malloc(bufsz);
        if (!j->slots[i].buf)
            return fail(c, -ENOMEM, "out of memory for %u %zu-byte buffers", j->nslots, bufsz);
    }
    double t0 = now_s();
    while (more_to_issue(j) || j->inflight) {
        while (more_to_issue(j) && j->inflight < j->nslots) {
            uint64_t left = j->is_write ? j->chunk : j->size - j->issued;
            uint16_t charge = credit_charge(c, left < j->chunk ? left : j->chunk);
            if (charge > c->credits)
                break;
            struct io_slot *s = NULL;
            for (unsigned i = 0; i < j->nslots && !s; i++)
                if (j->slots[i].state == SLOT_FREE)
                    s = &j->slots[i];
            if (!s)
                break; /* READ: every buffer waits for an earlier one to reach the fd */
            rc = io_issue(j, s);
            if (rc)
                return rc;
        }
        if (!j->inflight) {
            if (more_to_issue(j))
                return broken(c, -EPROTO,
                              "%s: the server granted %u credits, too few for one "
                              "%u-byte request",
                              j->is_write ? "WRITE" : "READ", c->credits, j->chunk);
            break;
        }
        rc = io_complete(j);
        if (rc)
            return rc;
    }
    j->st.seconds = now_s() - t0;
    return 0;
}

/* Waits out what is still in flight after a failure (so the connection stays in step), releases
 * the regions, frees the buffers. */
static void io_cleanup(struct io_job *j)
{
    struct smb2_client *c = j->c;
    while (j->inflight && c->state == CS_TREE) {
        struct smb2_hdr h;
        if (recv_response(c, &h))
            break;
        for (unsigned i = 0; i < j->nslots; i++)
            if (j->slots[i].state == SLOT_IN_FLIGHT && j->slots[i].mid == h.message_id) {
                slot_set(&j->slots[i], SLOT_FREE, "answered after the transfer failed");
                j->inflight--;
            }
    }
    for (unsigned i = 0; j->slots && i < j->nslots; i++) {
        if (j->slots[i].region) {
            enum smb_rdma_release how;
            c->t->ops->release_buffer(c->t, j->slots[i].region, &how);
        }
        free(j->slots[i].buf);
    }
    free(j->slots);
}

static int io_file(struct smb2_client *c, int is_write, int fd, const char *path, smb2_io_stats *st)
{
    int rc = usable(c);
    if (rc)
        return rc;
    struct io_job j = {.c = c, .is_write = is_write, .fd = fd};
    struct smb2_create_rsp cr;
    struct smb2_create_req q = {
        /* [MS-SMB2] 2.2.13.1.1 access: READ_DATA, READ_ATTRIBUTES, READ_CONTROL, SYNCHRONIZE;
         * for put also WRITE_DATA, APPEND_DATA, READ_EA, WRITE_EA, WRITE_ATTRIBUTES */
        .desired_access = is_write ? 0x0012019Fu : 0x00120089u,
        .file_attributes = is_write ? 0x80u /* NORMAL */ : 0,
        .share_access = 0x1 | 0x2, /* READ | WRITE */
        .disposition = is_write ? 5u /* FILE_OVERWRITE_IF */ : 1u /* FILE_OPEN */,
        .options = 0x40 /* FILE_NON_DIRECTORY_FILE */,
    };
    rc = create_file(c, path, &q, &cr);
    if (rc)
        return rc;
    memcpy(j.fid, cr.file_id, 16);
    if (!is_write)
        rc = query_size(c, j.fid, &j.size);
    if (!rc)
        rc = io_run(&j);
    io_cleanup(&j);
    if (c->state == CS_TREE) {
        char saved[sizeof(c->err)];
        memcpy(saved, c->err, sizeof(saved));
        int crc = close_file(c, j.fid);
        if (rc)
            memcpy(c->err, saved, sizeof(saved)); /* the first failure is the one to report */
        else
            rc = crc;
    }
    if (st)
        *st = j.st;
    return rc;
}

int smb2_put(smb2_client *c, int local_fd, const char *remote_path, smb2_io_stats *st)
{
    return io_file(c, 1, local_fd, remote_path, st);
}

int smb2_get(smb2_client *c, const char *remote_path, int local_fd, smb2_io_stats *st)
{
    return io_file(c, 0, local_fd, remote_path, st);
}

int smb2_list(smb2_client *c, const char *dir, smb2_list_cb cb, void *ctx)
{
    int rc = usable(c);
    if (rc)
        return rc;
    struct smb2_create_rsp cr;
    struct smb2_create_req q = {
        .desired_access = 0x00100081u, /* LIST_DIRECTORY, READ_ATTRIBUTES, SYNCHRONIZE */
        .share_access = 0x7,
        .disposition = 1, /* FILE_OPEN */
        .options = 0x1,   /* FILE_DIRECTORY_FILE */
    };
    rc = create_file(c, dir ? dir : "", &q, &cr);
    if (rc)
        return rc;
    static const uint16_t star[1] = {'*'};
    uint8_t msg[SMB2_HDR_LEN + SMB2_QUERY_DIR_REQ_FIXED + 2];
    uint8_t flags = 0x01; /* SMB2_RESTART_SCANS */
    int stop = 0;
    uint32_t out_len = DIR_OUT_LEN < c->max_transact ? DIR_OUT_LEN : c->max_transact;
    while (!rc && !stop) {
        size_t len = smb2_build_query_directory(
            msg, sizeof(msg), cr.file_id, 0x25, flags, star, 1, out_len);
        flags = 0;
        struct smb2_hdr h;
        rc = transact(c, msg, len, SMB2_QUERY_DIRECTORY, credit_charge(c, out_len), &h);
        if (rc)
            break;
        if (h.status == STATUS_NO_MORE_FILES)
            break;
        if (h.status != STATUS_SUCCESS) {
            rc = check_error_body(c, &h);
            break;
        }
        const uint8_t *buf;
        uint32_t n;
        char why[160];
        if (smb2_parse_output_buffer(c->rbuf, c->rlen, SMB2_QUERY_DIRECTORY, &buf, &n, why,
                                     sizeof(why))) {
            rc = malformed(c, why);
            break;
        }
        if (n == 0)
            break;
        size_t off = 0;
        struct smb2_dir_entry e;
        int more;
        while ((more = smb2_dir_next(buf, n, &off, &e, why, sizeof(why))) == 1) {
            char name[1024];
            if (smb2_utf16le_to_utf8(e.name, e.name_bytes, name, sizeof(name)) < 0) {
                rc = broken(c, -EPROTO,
                            "QUERY_DIRECTORY: a name that is not UTF-16 or longer "
                            "than %zu bytes",
                            sizeof(name));
                break;
            }
            if (!strcmp(name, ".") || !strcmp(name, ".."))
                continue;
            int r = cb(ctx, name, e.end_of_file, (e.attributes & 0x10) != 0);
            if (r) {
                rc = r;
                stop = 1;
                break;
            }
        }
        if (more < 0)
            rc = malformed(c, why);
    }
    if (c->state == CS_TREE) {
        int crc = close_file(c, cr.file_id);
        if (!rc)
            rc = crc;
    }
    return rc;
}
