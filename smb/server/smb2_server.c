/* The SMB2 server ([MS-SMB2] 3.3): one connection, one thread, over an smb_transport.
 *
 * A received message is one request or a compound chain ([MS-SMB2] 3.3.5.2.7); each request is
 * checked (header, StructureSize, every offset and length against the message) before its
 * handler runs, and answered in one response message of the same shape. The connection, its
 * sessions and its opens are state machines whose transitions are logged "X => Y (why)". */
#include <smb/smb2_server.h>

#include "srv_auth.h"
#include "srv_crypto.h"
#include "srv_fs.h"
#include "srv_ids.h"
#include "srv_utf16.h"
#include "srv_wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define MAX_SESSIONS   8
#define MAX_TREES      16
#define MAX_OPENS      256         /* per connection */
#define MAX_DIRENTS    100000u     /* names one directory enumeration holds */
#define DIR_NAMES_MAX  (4u << 20)  /* bytes of names one enumeration holds */
#define CONN_NAMES_MAX (32u << 20) /* bytes of names all enumerations of a connection hold */
#define MAX_CREDITS    8192u       /* credits the client may hold */
#define DEFAULT_IO     (8u << 20)

#define NEGOTIATE_SIGNING_ENABLED  0x0001u
#define NEGOTIATE_SIGNING_REQUIRED 0x0002u
#define GLOBAL_CAP_LARGE_MTU       0x00000004u
#define GLOBAL_CAP_ENCRYPTION      0x00000040u
#define TRANSFORM_LEN              52u

#define CHANNEL_NONE               0u
#define CHANNEL_RDMA_V1            1u
#define CHANNEL_RDMA_V1_INVALIDATE 2u

#define FSCTL_VALIDATE_NEGOTIATE_INFO      0x00140204u
#define FSCTL_QUERY_NETWORK_INTERFACE_INFO 0x001401FCu

/* [MS-FSCC] 2.4 / [MS-SMB2] 2.2.13 */
#define FILE_DIRECTORY_FILE     0x00000001u
#define FILE_NON_DIRECTORY_FILE 0x00000040u
#define FILE_DELETE_ON_CLOSE    0x00001000u
#define ACCESS_READ_DATA        0x00000001u
#define ACCESS_WRITE_DATA       0x00000002u
#define ACCESS_APPEND_DATA      0x00000004u
#define ACCESS_EXECUTE          0x00000020u
#define ACCESS_DELETE           0x00010000u
#define ACCESS_MAXIMUM_ALLOWED  0x02000000u
#define ACCESS_GENERIC_ALL      0x10000000u
#define ACCESS_GENERIC_EXECUTE  0x20000000u
#define ACCESS_GENERIC_WRITE    0x40000000u
#define ACCESS_GENERIC_READ     0x80000000u
#define ACCESS_ALL              0x001F01FFu

/* UPGRADED: an SMB1 negotiate was answered with dialect 0x02FF; an SMB2 NEGOTIATE follows
 * ([MS-SMB2] 3.3.5.3.1). */
enum conn_state { CONN_NEW, CONN_UPGRADED, CONN_NEGOTIATED, CONN_ENDED, CONN_STATE_COUNT };
static const char *const conn_state_names[CONN_STATE_COUNT] = {[CONN_NEW] = "NEW",
                                                               [CONN_UPGRADED] = "UPGRADED",
                                                               [CONN_NEGOTIATED] = "NEGOTIATED",
                                                               [CONN_ENDED] = "ENDED"};

enum sess_state { SESS_FREE, SESS_IN_PROGRESS, SESS_VALID, SESS_STATE_COUNT };
static const char *const sess_state_names[SESS_STATE_COUNT] = {
    [SESS_FREE] = "FREE", [SESS_IN_PROGRESS] = "IN_PROGRESS", [SESS_VALID] = "VALID"};

enum open_state { OPEN_FREE, OPEN_OPEN, OPEN_STATE_COUNT };
static const char *const open_state_names[OPEN_STATE_COUNT] = {
    [OPEN_FREE] = "FREE", [OPEN_OPEN] = "OPEN"};

struct session {
    enum sess_state state;
    uint64_t id;
    struct srv_auth auth;
    uint8_t preauth[64];
    uint8_t signing_key[16];
    int signing_required;
    uint8_t enc_key[16], dec_key[16]; /* server to client, client to server */
    uint64_t encrypted_msgs;          /* received in a TRANSFORM_HEADER */
};

struct tree {
    uint32_t id; /* 0: free */
    uint64_t session_id;
    int ipc;
};

#define MAX_LOCKS 64 /* per open */

struct lock_range {
    uint64_t off, len;
    int excl;
};

struct open {
    enum open_state state;
    uint64_t id; /* persistent and volatile FileId both */
    uint64_t session_id;
    uint32_t tree_id;
    int fd;
    int is_dir;
    int delete_on_close;
    uint32_t access;
    char path[SRV_PATH_MAX];
    /* directory enumeration ([MS-SMB2] 3.3.5.18) */
    char *names; /* NUL-separated */
    size_t names_cap;
    size_t nnames; /* 0: not started */
    size_t cursor;
    char pattern[256];
    /* byte-range locks this open holds ([MS-SMB2] 3.3.5.14), also held as OFD locks */
    struct lock_range *locks;
    unsigned nlocks;
};

struct conn {
    const smb2_server_config *cfg;
    smb_transport *t;
    smb2_server_stats *stats;
    FILE *log;
    unsigned id;
    int root;
    enum conn_state state;
    uint16_t dialect;
    uint8_t server_guid[16];
    uint8_t client_guid[16];
    uint16_t client_secmode;
    uint32_t client_caps;
    uint16_t client_dialects[16];
    unsigned nclient_dialects;
    uint8_t preauth[64];
    uint16_t cipher; /* 0, 1 AES-128-CCM or 2 AES-128-GCM ([MS-SMB2] 2.2.3.1.2) */
    int encrypt_ctx; /* the client sent SMB2_ENCRYPTION_CAPABILITIES: answer it */
    uint32_t max_io;
    uint32_t credits; /* granted to the client and not yet used */
    uint32_t next_session; /* the low half of the last SessionId handed out (srv_ids.h) */
    uint32_t next_tree;    /* the last TreeId handed out (srv_ids.h) */
    uint64_t next_file;
    struct session sessions[MAX_SESSIONS];
    struct tree trees[MAX_TREES];
    struct open opens[MAX_OPENS];
    uint8_t *in, *out, *io;
    size_t cap;
    size_t names_bytes; /* held by directory enumerations (CONN_NAMES_MAX) */
    /* the message being answered came encrypted: so goes the answer, with these */
    int encrypted;
    uint64_t enc_session;
    uint8_t enc_key[16];
    uint8_t *out_base; /* out - TRANSFORM_LEN: room for the transform header */
    /* the response's Send with Invalidate ([MS-SMB2] 3.3.5.12/13, RDMA_V1_INVALIDATE) */
    int invalidate;
    uint32_t invalidate_token;
};

/* One request of a message and its response. */
struct req {
    const uint8_t *hdr; /* the request's header */
    const uint8_t *body;
    size_t len; /* of this request, header included */
    uint16_t command;
    uint32_t flags;
    uint64_t session_id;
    uint32_t tree_id;
    struct session *sess;
    struct tree *tree;
    uint8_t *rhdr; /* the response's header */
    uint8_t *rbody;
    size_t rcap; /* room for the response body */
    size_t rlen; /* response body length */
    int no_response;
    int fatal;        /* end the connection after this */
    uint64_t file_id; /* the FileId this request used or created (for related requests) */
};

static atomic_uint conn_ids;

static void logf_(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct conn *c, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(c->log, "smb2 conn %u: %s\n", c->id, line);
    fflush(c->log);
}

static void conn_set(struct conn *c, enum conn_state to, const char *why)
{
    static const unsigned allowed[CONN_STATE_COUNT] = {
        [CONN_NEW] = 1u << CONN_UPGRADED | 1u << CONN_NEGOTIATED | 1u << CONN_ENDED,
        [CONN_UPGRADED] = 1u << CONN_NEGOTIATED | 1u << CONN_ENDED,
        [CONN_NEGOTIATED] = 1u << CONN_ENDED,
        [CONN_ENDED] = 0,
    };
    if (!(allowed[c->state] & 1u << to)) {
        logf_(c, "invalid transition %s => %s (%s)", conn_state_names[c->state],
              conn_state_names[to], why);
        abort();
    }
    logf_(c, "%s => %s (%s)", conn_state_names[c->state], conn_state_names[to], why);
    c->state = to;
}

static void sess_set(struct conn *c, struct session *s, enum sess_state to, const char *why)
{
    static const unsigned allowed[SESS_STATE_COUNT] = {
        [SESS_FREE] = 1u << SESS_IN_PROGRESS,
        [SESS_IN_PROGRESS] = 1u << SESS_VALID | 1u << SESS_FREE,
        [SESS_VALID] = 1u << SESS_FREE,
    };
    if (!(allowed[s->state] & 1u << to)) {
        logf_(c, "session 0x%llx: invalid transition %s => %s (%s)", (unsigned long long)s->id,
              sess_state_names[s->state], sess_state_names[to], why);
        abort();
    }
    logf_(c, "session 0x%llx: %s => %s (%s)", (unsigned long long)s->id, sess_state_names[s->state],
          sess_state_names[to], why);
    s->state = to;
}

static void open_set(struct conn *c, struct open *o, enum open_state to, const char *why)
{
    if (o->state == to) {
        logf_(c, "file 0x%llx: invalid transition %s => %s (%s)", (unsigned long long)o->id,
              open_state_names[o->state], open_state_names[to], why);
        abort();
    }
    o->state = to;
}

static void stat_add(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* ---- buffers: every offset and length a request names is checked here ---- */

/* [off, off+n) lies in the request, past its header (n == 0 is always fine). */
static int in_req(const struct req *r, uint64_t off, uint64_t n)
{
    if (n == 0)
        return 1;
    return off >= SMB2_HDR_LEN && off <= r->len && n <= r->len - off;
}

/* ---- the open table ---- */

static struct open *open_find(struct conn *c, const struct req *r, uint64_t id)
{
    for (unsigned i = 0; i < MAX_OPENS; i++) {
        struct open *o = &c->opens[i];
        if (o->state == OPEN_OPEN && o->id == id && o->session_id == r->session_id &&
            o->tree_id == r->tree_id)
            return o;
    }
    return NULL;
}

/* Closes an open: delete-on-close carried out ([MS-SMB2] 3.3.5.10, [MS-FSA] 2.1.5.4). */
static uint32_t open_close(struct conn *c, struct open *o, const char *why)
{
    uint32_t st = STATUS_SUCCESS;
    if (o->delete_on_close) {
        const char *base;
        int pfd = srv_open_parent(c->root, o->path, &base);
        if (pfd < 0) {
            st = srv_errno_status(-pfd, 1);
        } else {
            if (unlinkat(pfd, base, o->is_dir ? AT_REMOVEDIR : 0))
                st = srv_errno_status(errno, 0);
            close(pfd);
        }
        logf_(c, "delete on close of \"%s\": 0x%08x", o->path, st);
    }
    close(o->fd); /* releases its OFD locks */
    free(o->locks);
    o->locks = NULL;
    o->nlocks = 0;
    free(o->names);
    c->names_bytes -= o->names_cap;
    o->names = NULL;
    o->names_cap = 0;
    o->nnames = 0;
    open_set(c, o, OPEN_FREE, why);
    return st;
}

static void close_opens(struct conn *c, uint64_t session_id, uint32_t tree_id, const char *why)
{
    for (unsigned i = 0; i < MAX_OPENS; i++) {
        struct open *o = &c->opens[i];
        if (o->state == OPEN_OPEN && (session_id == 0 || o->session_id == session_id) &&
            (tree_id == 0 || o->tree_id == tree_id))
            (void)open_close(c, o, why);
    }
}

/* ---- NEGOTIATE ([MS-SMB2] 2.2.3, 2.2.4, 3.3.5.4) ---- */

static const uint16_t dialects_served[] = {0x0311, 0x0302, 0x0300, 0x0210, 0x0202};

static uint64_t now_filetime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return srv_filetime(&ts);
}

static uint32_t negotiate_response(struct conn *c, struct req *r, uint16_t best,
                                   int have_signing_ctx);

/* The Capabilities of the NEGOTIATE response (and of FSCTL_VALIDATE_NEGOTIATE_INFO's). */
static uint32_t server_caps(const struct conn *c, uint16_t dialect)
{
    uint32_t caps = dialect >= 0x0210 ? GLOBAL_CAP_LARGE_MTU : 0;
    if ((dialect == 0x0300 || dialect == 0x0302) && c->cipher)
        caps |= GLOBAL_CAP_ENCRYPTION;
    return caps;
}

static uint32_t do_negotiate(struct conn *c, struct req *r)
{
    const uint8_t *b = r->body;
    if (c->state != CONN_NEW && c->state != CONN_UPGRADED) {
        /* [MS-SMB2] 3.3.5.4: a second NEGOTIATE ends the connection, unanswered */
        logf_(c, "second NEGOTIATE: ending");
        r->fatal = 1;
        r->no_response = 1;
        return STATUS_INVALID_PARAMETER;
    }
    unsigned n = rd16(b + 2);
    if (n == 0 || !in_req(r, SMB2_HDR_LEN + 36, (uint64_t)n * 2))
        return STATUS_INVALID_PARAMETER;
    uint16_t best = 0;
    c->nclient_dialects = 0;
    for (unsigned i = 0; i < n; i++) {
        uint16_t d = rd16(b + 36 + 2 * i);
        if (c->nclient_dialects < 16)
            c->client_dialects[c->nclient_dialects++] = d;
        for (unsigned k = 0; k < sizeof dialects_served / sizeof dialects_served[0]; k++)
            if (d == dialects_served[k] && d > best)
                best = d;
    }
    if (!best) {
        logf_(c, "NEGOTIATE refused: no common dialect among %u", n);
        return STATUS_NOT_SUPPORTED;
    }
    c->client_secmode = rd16(b + 4);
    c->client_caps = rd32(b + 8);
    memcpy(c->client_guid, b + 12, 16);

    int have_signing_ctx = 0;
    if (best == 0x0311) {
        /* negotiate contexts ([MS-SMB2] 2.2.3.1): the preauth integrity one is required */
        uint32_t off = rd32(b + 28);
        unsigned cnt = rd16(b + 32);
        int preauth_ok = 0;
        size_t pos = off;
        for (unsigned i = 0; i < cnt; i++) {
            pos = (pos + 7) & ~(size_t)7;
            if (!in_req(r, pos, 8))
                return STATUS_INVALID_PARAMETER;
            uint16_t type = rd16(r->hdr + pos);
            uint16_t dl = rd16(r->hdr + pos + 2);
            if (!in_req(r, pos + 8, dl))
                return STATUS_INVALID_PARAMETER;
            const uint8_t *d = r->hdr + pos + 8;
            if (type == 1) { /* SMB2_PREAUTH_INTEGRITY_CAPABILITIES */
                if (dl < 4)
                    return STATUS_INVALID_PARAMETER;
                unsigned hc = rd16(d);
                if (hc == 0 || 4u + 2u * hc > dl)
                    return STATUS_INVALID_PARAMETER;
                for (unsigned k = 0; k < hc; k++)
                    if (rd16(d + 4 + 2 * k) == 1) /* SHA-512 */
                        preauth_ok = 1;
                if (!preauth_ok)
                    return 0xC05D0000u; /* STATUS_SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP */
            } else if (type == 2) {     /* SMB2_ENCRYPTION_CAPABILITIES: GCM, else CCM */
                if (dl < 2)
                    return STATUS_INVALID_PARAMETER;
                unsigned cc = rd16(d);
                if (2u + 2u * cc > dl)
                    return STATUS_INVALID_PARAMETER;
                c->encrypt_ctx = 1;
                for (unsigned k = 0; k < cc; k++) {
                    uint16_t ci = rd16(d + 2 + 2 * k);
                    if ((ci == 1 || ci == 2) && ci > c->cipher)
                        c->cipher = ci;
                }
            } else if (type == 8) { /* SMB2_SIGNING_CAPABILITIES */
                if (dl < 2)
                    return STATUS_INVALID_PARAMETER;
                unsigned sc = rd16(d);
                if (2u + 2u * sc > dl)
                    return STATUS_INVALID_PARAMETER;
                for (unsigned k = 0; k < sc; k++)
                    if (rd16(d + 2 + 2 * k) == 1) /* AES-CMAC */
                        have_signing_ctx = 1;
            }
            pos += 8u + dl;
        }
        if (!preauth_ok) {
            logf_(c, "NEGOTIATE 3.1.1 refused: no SMB2_PREAUTH_INTEGRITY_CAPABILITIES");
            return STATUS_INVALID_PARAMETER;
        }
    }
    /* 3.0 and 3.0.2: SMB2_GLOBAL_CAP_ENCRYPTION means AES-128-CCM */
    if (best == 0x0300 || best == 0x0302)
        c->cipher = (c->client_caps & GLOBAL_CAP_ENCRYPTION) ? 1 : 0;
    return negotiate_response(c, r, best, have_signing_ctx);
}

/* The NEGOTIATE response body for dialect ([MS-SMB2] 2.2.4), 0x02FF included. */
static uint32_t negotiate_response(struct conn *c, struct req *r, uint16_t best,
                                   int have_signing_ctx)
{
    uint8_t *o = r->rbody;
    c->dialect = best;
    memset(o, 0, 64);
    wr16(o, 65);
    wr16(o + 2,
         NEGOTIATE_SIGNING_ENABLED | (c->cfg->require_signing ? NEGOTIATE_SIGNING_REQUIRED : 0));
    wr16(o + 4, best);
    memcpy(o + 8, c->server_guid, 16);
    wr32(o + 24, server_caps(c, best));
    wr32(o + 28, c->max_io);
    wr32(o + 32, c->max_io);
    wr32(o + 36, c->max_io);
    wr64(o + 40, now_filetime());
    size_t hint = srv_spnego_hint(o + 64, r->rcap - 64);
    wr16(o + 56, SMB2_HDR_LEN + 64);
    wr16(o + 58, (uint16_t)hint);
    size_t end = 64 + hint;
    if (best == 0x0311) {
        size_t ctx = (end + 7) & ~(size_t)7;
        memset(o + end, 0, ctx - end);
        wr32(o + 60, (uint32_t)(SMB2_HDR_LEN + ctx));
        uint8_t *p = o + ctx;
        memset(p, 0, 8 + 38);
        wr16(p, 1);
        wr16(p + 2, 38);
        wr16(p + 8, 1);   /* HashAlgorithmCount */
        wr16(p + 10, 32); /* SaltLength */
        wr16(p + 12, 1);  /* SHA-512 */
        if (getrandom(p + 14, 32, 0) != 32)
            return STATUS_INSUFFICIENT_RESOURCES;
        end = ctx + 8 + 38;
        unsigned nctx = 1;
        if (c->encrypt_ctx) { /* the cipher chosen, 0 for none in common */
            size_t a = (end + 7) & ~(size_t)7;
            memset(o + end, 0, a - end + 12);
            p = o + a;
            wr16(p, 2);
            wr16(p + 2, 4);
            wr16(p + 8, 1);
            wr16(p + 10, c->cipher);
            end = a + 12;
            nctx++;
        }
        if (have_signing_ctx) {
            size_t a = (end + 7) & ~(size_t)7;
            memset(o + end, 0, a - end + 12);
            p = o + a;
            wr16(p, 8);
            wr16(p + 2, 4);
            wr16(p + 8, 1);
            wr16(p + 10, 1); /* AES-CMAC */
            end = a + 12;
            nctx++;
        }
        wr16(o + 6, (uint16_t)nctx);
    }
    r->rlen = end;
    char why[64];
    snprintf(why, sizeof why, "dialect 0x%04x chosen", best);
    conn_set(c, best == 0x02FF ? CONN_UPGRADED : CONN_NEGOTIATED, why);
    return STATUS_SUCCESS;
}

/* An SMB1 NEGOTIATE ([MS-CIFS] 2.2.4.52.1) offering SMB2 ([MS-SMB2] 3.3.5.3.1): "SMB 2.???"
 * is answered with an SMB2 NEGOTIATE response of dialect 0x02FF (an SMB2 NEGOTIATE follows),
 * else "SMB 2.002" with dialect 2.0.2. Anything else: -1, the connection ends. */
static int smb1_negotiate(struct conn *c, const uint8_t *in, size_t len)
{
    /* header (32), WordCount (1) = 0, ByteCount (2), then 0x02 "dialect" NUL ... */
    if (c->state != CONN_NEW || len < 35 || in[4] != 0x72 || in[32] != 0)
        return -1;
    size_t bc = rd16(in + 33), pos = 35;
    if (bc > len - 35)
        return -1;
    int wildcard = 0, smb202 = 0;
    while (pos < 35 + bc) {
        if (in[pos] != 0x02)
            return -1;
        const uint8_t *sdial = in + pos + 1;
        const uint8_t *nul = memchr(sdial, 0, 35 + bc - (pos + 1));
        if (!nul)
            return -1;
        size_t sl = (size_t)(nul - sdial);
        if (sl == 9 && !memcmp(sdial, "SMB 2.???", 9))
            wildcard = 1;
        if (sl == 9 && !memcmp(sdial, "SMB 2.002", 9))
            smb202 = 1;
        pos += sl + 2;
    }
    if (!wildcard && !smb202)
        return -1;
    logf_(c, "SMB1 NEGOTIATE offers SMB2: answering with dialect 0x%04x",
          wildcard ? 0x02FF : 0x0202);
    struct req r;
    memset(&r, 0, sizeof r);
    r.rhdr = c->out;
    r.rbody = c->out + SMB2_HDR_LEN;
    r.rcap = c->cap - SMB2_HDR_LEN;
    uint8_t *h = c->out;
    memset(h, 0, SMB2_HDR_LEN);
    h[0] = 0xFE;
    h[1] = 'S';
    h[2] = 'M';
    h[3] = 'B';
    wr16(h + 4, 64);
    wr16(h + SMB2_HDR_CREDIT, 1);
    wr32(h + SMB2_HDR_FLAGS, SMB2_FLAGS_SERVER_TO_REDIR);
    if (negotiate_response(c, &r, wildcard ? 0x02FF : 0x0202, 0))
        return -1;
    if (c->stats)
        stat_add(&c->stats->commands[SMB2_NEGOTIATE], 1);
    if (c->t->ops->send(c->t, c->out, SMB2_HDR_LEN + r.rlen)) {
        logf_(c, "send failed: %s", smb_transport_error(c->t));
        return -1;
    }
    return 0;
}

/* ---- SESSION_SETUP ([MS-SMB2] 2.2.5, 2.2.6, 3.3.5.5) ---- */

static bool session_low_in_use(const void *ctx, uint32_t low)
{
    const struct conn *c = ctx;
    for (unsigned i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state != SESS_FREE && (uint32_t)c->sessions[i].id == low)
            return true;
    return false;
}

static bool tree_id_in_use(const void *ctx, uint32_t id)
{
    const struct conn *c = ctx;
    for (unsigned i = 0; i < MAX_TREES; i++)
        if (c->trees[i].id == id)
            return true;
    return false;
}

static struct session *session_find(struct conn *c, uint64_t id)
{
    for (unsigned i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state != SESS_FREE && c->sessions[i].id == id)
            return &c->sessions[i];
    return NULL;
}

static void session_end(struct conn *c, struct session *s, const char *why)
{
    close_opens(c, s->id, 0, why);
    for (unsigned i = 0; i < MAX_TREES; i++)
        if (c->trees[i].id && c->trees[i].session_id == s->id)
            c->trees[i].id = 0;
    char line[160];
    if (s->encrypted_msgs)
        snprintf(line, sizeof line, "%s; %llu messages came encrypted", why,
                 (unsigned long long)s->encrypted_msgs);
    else
        snprintf(line, sizeof line, "%s", why);
    sess_set(c, s, SESS_FREE, line);
}

static uint32_t do_session_setup(struct conn *c, struct req *r)
{
    const uint8_t *b = r->body;
    uint16_t off = rd16(b + 12), len = rd16(b + 14);
    if (!in_req(r, off, len))
        return STATUS_INVALID_PARAMETER;
    struct session *s = NULL;
    if (r->session_id == 0) {
        for (unsigned i = 0; i < MAX_SESSIONS && !s; i++)
            if (c->sessions[i].state == SESS_FREE)
                s = &c->sessions[i];
        if (!s) {
            logf_(c, "SESSION_SETUP refused: %u sessions already", MAX_SESSIONS);
            return STATUS_INSUFFICIENT_RESOURCES;
        }
        memset(s, 0, sizeof *s);
        /* the connection in the high half, so that no two connections' sessions share an id */
        s->id = (uint64_t)c->id << 32 | srv_next_id(&c->next_session, session_low_in_use, c);
        s->auth.log = c->log;
        memcpy(s->preauth, c->preauth, 64);
        sess_set(c, s, SESS_IN_PROGRESS, "first SESSION_SETUP");
    } else {
        s = session_find(c, r->session_id);
        if (!s)
            return STATUS_USER_SESSION_DELETED;
        if (s->state == SESS_VALID) {
            logf_(c, "SESSION_SETUP refused: re-authentication is not supported");
            return STATUS_REQUEST_NOT_ACCEPTED;
        }
    }
    r->sess = s;
    r->session_id = s->id;
    if (c->dialect == 0x0311)
        srv_preauth_update(s->preauth, r->hdr, r->len);
    uint8_t *o = r->rbody;
    size_t tok_len = 0;
    uint32_t st = srv_auth_step(&s->auth, c->cfg->user, c->cfg->password, c->cfg->domain,
                                r->hdr + off, len, o + 8, r->rcap - 8, &tok_len);
    memset(o, 0, 8);
    wr16(o, 9);
    wr16(o + 4, tok_len ? SMB2_HDR_LEN + 8 : 0);
    wr16(o + 6, (uint16_t)tok_len);
    r->rlen = 8 + (tok_len ? tok_len : 1);
    if (!tok_len)
        o[8] = 0;
    if (st == STATUS_MORE_PROCESSING_REQUIRED)
        return st;
    if (st != STATUS_SUCCESS) {
        logf_(c, "SESSION_SETUP of %s refused: 0x%08x", s->auth.user[0] ? s->auth.user : "?", st);
        session_end(c, s, "authentication failed");
        r->sess = NULL;
        return st;
    }
    /* [MS-SMB2] 3.3.5.5.3: the signing key */
    if (c->dialect == 0x0311)
        srv_kdf(s->auth.session_key, "SMBSigningKey", 14, s->preauth, 64, s->signing_key);
    else if (c->dialect >= 0x0300)
        srv_kdf(s->auth.session_key, "SMB2AESCMAC", 12, "SmbSign", 8, s->signing_key);
    else
        memcpy(s->signing_key, s->auth.session_key, 16);
    /* [MS-SMB2] 3.3.5.5.3: the encryption keys, where a cipher was negotiated */
    if (c->cipher && c->dialect == 0x0311) {
        srv_kdf(s->auth.session_key, "SMBS2CCipherKey", 16, s->preauth, 64, s->enc_key);
        srv_kdf(s->auth.session_key, "SMBC2SCipherKey", 16, s->preauth, 64, s->dec_key);
    } else if (c->cipher) {
        srv_kdf(s->auth.session_key, "SMB2AESCCM", 11, "ServerOut", 10, s->enc_key);
        srv_kdf(s->auth.session_key, "SMB2AESCCM", 11, "ServerIn ", 10, s->dec_key);
    }
    s->signing_required = c->cfg->require_signing || (b[3] & NEGOTIATE_SIGNING_REQUIRED) ||
                          (c->client_secmode & NEGOTIATE_SIGNING_REQUIRED);
    char why[320];
    static const char *const ciphers[3] = {"none", "AES-128-CCM", "AES-128-GCM"};
    snprintf(why, sizeof why, "%s authenticated, signing %s, cipher %s", s->auth.user,
             s->signing_required ? "required" : "on signed requests", ciphers[c->cipher]);
    sess_set(c, s, SESS_VALID, why);
    return STATUS_SUCCESS;
}

static uint32_t do_logoff(struct conn *c, struct req *r)
{
    session_end(c, r->sess, "LOGOFF");
    r->sess = NULL;
    wr16(r->rbody, 4);
    wr16(r->rbody + 2, 0);
    r->rlen = 4;
    return STATUS_SUCCESS;
}

/* ---- TREE_CONNECT / TREE_DISCONNECT ([MS-SMB2] 3.3.5.7, 3.3.5.8) ---- */

static uint32_t do_tree_connect(struct conn *c, struct req *r)
{
    uint16_t off = rd16(r->body + 4), len = rd16(r->body + 6);
    if (!in_req(r, off, len))
        return STATUS_INVALID_PARAMETER;
    char path[512];
    if (srv_utf16_to_utf8(r->hdr + off, len, path, sizeof path))
        return STATUS_INVALID_PARAMETER;
    const char *name = strrchr(path, '\\');
    name = name ? name + 1 : path;
    int ipc = strcasecmp(name, "IPC$") == 0;
    if (!ipc && strcasecmp(name, c->cfg->share) != 0) {
        logf_(c, "TREE_CONNECT to \"%s\" refused: no such share", path);
        return STATUS_BAD_NETWORK_NAME;
    }
    struct tree *t = NULL;
    for (unsigned i = 0; i < MAX_TREES && !t; i++)
        if (!c->trees[i].id)
            t = &c->trees[i];
    if (!t) {
        logf_(c, "TREE_CONNECT refused: %u trees already", MAX_TREES);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    t->id = srv_next_id(&c->next_tree, tree_id_in_use, c);
    t->session_id = r->session_id;
    t->ipc = ipc;
    r->tree_id = t->id;
    logf_(c, "tree 0x%x: \"%s\" connected", t->id, path);
    uint8_t *o = r->rbody;
    memset(o, 0, 16);
    wr16(o, 16);
    o[2] = ipc ? 2 : 1; /* SMB2_SHARE_TYPE_PIPE / DISK */
    wr32(o + 12, ACCESS_ALL);
    r->rlen = 16;
    return STATUS_SUCCESS;
}

static uint32_t do_tree_disconnect(struct conn *c, struct req *r)
{
    close_opens(c, r->session_id, r->tree->id, "TREE_DISCONNECT");
    logf_(c, "tree 0x%x: disconnected", r->tree->id);
    r->tree->id = 0;
    r->tree = NULL;
    wr16(r->rbody, 4);
    wr16(r->rbody + 2, 0);
    r->rlen = 4;
    return STATUS_SUCCESS;
}

/* ---- CREATE ([MS-SMB2] 2.2.13, 2.2.14, 3.3.5.9) ---- */

/* CreationTime is the birth time where the file system keeps one, else 0: never a time that
 * moves (clients such as Linux cifs take a changed creation time for a different file). */
static void put_times(uint8_t *p, const struct srv_stat *s)
{
    wr64(p, s->birth.tv_sec || s->birth.tv_nsec ? srv_filetime(&s->birth) : 0);
    wr64(p + 8, srv_filetime(&s->st.st_atim));
    wr64(p + 16, srv_filetime(&s->st.st_mtim));
    wr64(p + 24, srv_filetime(&s->st.st_ctim));
}

static uint64_t alloc_size(const struct srv_stat *s)
{
    return (uint64_t)s->st.st_blocks * 512u;
}

static int wants_write(uint32_t access)
{
    return (access & (ACCESS_WRITE_DATA | ACCESS_APPEND_DATA | ACCESS_GENERIC_WRITE |
                      ACCESS_GENERIC_ALL | ACCESS_MAXIMUM_ALLOWED)) != 0;
}

static int dir_is_empty(int fd)
{
    int d = dup(fd);
    if (d < 0)
        return -1;
    DIR *dir = fdopendir(d);
    if (!dir) {
        close(d);
        return -1;
    }
    rewinddir(dir);
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            empty = 0;
            break;
        }
    closedir(dir);
    return empty;
}

/* The chain of SMB2_CREATE_CONTEXTs ([MS-SMB2] 2.2.13.2) is well formed: each 8-byte
 * aligned Next inside the buffer, each name (at least 4 bytes) and data inside its context.
 * They are then ignored: no lease, durable handle or maximal-access answer is given. */
static int create_contexts_valid(const uint8_t *p, size_t len)
{
    size_t pos = 0;
    while (len) {
        if (len - pos < 16)
            return 0;
        const uint8_t *x = p + pos;
        size_t next = rd32(x), noff = rd16(x + 4), nlen = rd16(x + 6);
        size_t doff = rd16(x + 10), dlen = rd32(x + 12);
        size_t here = next ? next : len - pos;
        if (next && (next % 8 || next > len - pos))
            return 0;
        if (nlen < 4 || noff < 16 || noff > here || nlen > here - noff)
            return 0;
        if (dlen && (doff < 16 || doff > here || dlen > here - doff))
            return 0;
        if (!next)
            return 1;
        pos += next;
    }
    return 1;
}

static uint32_t do_create(struct conn *c, struct req *r)
{
    const uint8_t *b = r->body;
    uint32_t access = rd32(b + 24), disp = rd32(b + 36), opts = rd32(b + 40);
    uint16_t noff = rd16(b + 44), nlen = rd16(b + 46);
    uint32_t coff = rd32(b + 48), clen = rd32(b + 52);
    if (!in_req(r, noff, nlen) || !in_req(r, coff, clen) || disp > 5 ||
        (opts & FILE_DIRECTORY_FILE && opts & FILE_NON_DIRECTORY_FILE) ||
        !create_contexts_valid(r->hdr + coff, clen))
        return STATUS_INVALID_PARAMETER;
    if (r->tree->ipc) {
        logf_(c, "CREATE on IPC$ refused: named pipes are not served");
        return STATUS_NOT_SUPPORTED;
    }
    if ((opts & FILE_DELETE_ON_CLOSE) && !(access & (ACCESS_DELETE | ACCESS_GENERIC_ALL)))
        return STATUS_ACCESS_DENIED;
    struct open *o = NULL;
    for (unsigned i = 0; i < MAX_OPENS && !o; i++)
        if (c->opens[i].state == OPEN_FREE)
            o = &c->opens[i];
    if (!o) {
        logf_(c, "CREATE refused: %u files open on this connection", MAX_OPENS);
        return STATUS_TOO_MANY_OPENED_FILES;
    }
    char rel[SRV_PATH_MAX];
    uint32_t st = srv_path_from_wire(r->hdr + noff, nlen, 0, rel, sizeof rel);
    if (st != STATUS_SUCCESS) {
        logf_(c, "CREATE refused: name rejected 0x%08x", st);
        return st;
    }
    /* does it exist, and what is it? */
    struct srv_stat sb;
    int exists = 0;
    int probe = srv_open_beneath(c->root, rel, O_PATH, 0);
    if (probe >= 0) {
        exists = srv_fstat(probe, &sb) == 0;
        close(probe);
    } else if (probe != -ENOENT) {
        st = srv_errno_status(-probe, 1);
        logf_(c, "CREATE \"%s\" refused: %s", rel, strerror(-probe));
        return st;
    }
    uint32_t action;
    int fd;
    int is_dir;
    if (exists) {
        is_dir = S_ISDIR(sb.st.st_mode);
        if (disp == 2)
            return STATUS_OBJECT_NAME_COLLISION;
        if (!is_dir && !S_ISREG(sb.st.st_mode)) {
            logf_(c, "CREATE \"%s\" refused: neither a file nor a directory", rel);
            return STATUS_ACCESS_DENIED;
        }
        if ((opts & FILE_DIRECTORY_FILE) && !is_dir)
            return STATUS_NOT_A_DIRECTORY;
        if ((opts & FILE_NON_DIRECTORY_FILE) && is_dir)
            return STATUS_FILE_IS_A_DIRECTORY;
        int trunc = disp == 0 || disp == 4 || disp == 5;
        if (is_dir && trunc)
            return STATUS_INVALID_PARAMETER;
        if (is_dir && (opts & FILE_DELETE_ON_CLOSE) && !*rel)
            return STATUS_ACCESS_DENIED;
        int flags = O_NONBLOCK | (is_dir ? O_RDONLY | O_DIRECTORY : 0);
        if (!is_dir)
            flags |= (wants_write(access) || trunc ? O_RDWR : O_RDONLY) | (trunc ? O_TRUNC : 0);
        fd = srv_open_beneath(c->root, rel, flags, 0);
        if (fd == -EACCES && !is_dir && (access & ACCESS_MAXIMUM_ALLOWED) && !trunc)
            fd = srv_open_beneath(c->root, rel, (flags & ~O_RDWR) | O_RDONLY, 0);
        action = disp == 0 ? 0 : trunc ? 3 : 1; /* SUPERSEDED, OVERWRITTEN, OPENED */
    } else {
        if (disp == 1 || disp == 4) {
            const char *base;
            int pfd = srv_open_parent(c->root, rel, &base);
            if (pfd < 0)
                return srv_errno_status(-pfd, 1);
            close(pfd);
            return STATUS_OBJECT_NAME_NOT_FOUND;
        }
        is_dir = (opts & FILE_DIRECTORY_FILE) != 0;
        if (is_dir) {
            const char *base;
            int pfd = srv_open_parent(c->root, rel, &base);
            if (pfd < 0)
                return srv_errno_status(-pfd, 1);
            int rc = mkdirat(pfd, base, 0777);
            int err = errno;
            close(pfd);
            if (rc)
                return srv_errno_status(err, 0);
            fd = srv_open_beneath(c->root, rel, O_RDONLY | O_DIRECTORY, 0);
        } else {
            fd = srv_open_beneath(c->root, rel, O_RDWR | O_CREAT | O_EXCL, 0666);
        }
        action = 2; /* CREATED */
    }
    if (fd < 0) {
        st = srv_errno_status(-fd, 0);
        logf_(c, "CREATE \"%s\" refused: %s", rel, strerror(-fd));
        return st;
    }
    if (srv_fstat(fd, &sb)) {
        close(fd);
        return STATUS_ACCESS_DENIED;
    }
    if (is_dir && (opts & FILE_DELETE_ON_CLOSE) && dir_is_empty(fd) != 1) {
        close(fd);
        return STATUS_DIRECTORY_NOT_EMPTY;
    }
    memset(o, 0, sizeof *o);
    o->id = ++c->next_file;
    o->session_id = r->session_id;
    o->tree_id = r->tree->id;
    o->fd = fd;
    o->is_dir = is_dir;
    o->delete_on_close = (opts & FILE_DELETE_ON_CLOSE) != 0;
    o->access = access;
    snprintf(o->path, sizeof o->path, "%s", rel);
    open_set(c, o, OPEN_OPEN, "CREATE");
    r->file_id = o->id;

    uint8_t *p = r->rbody;
    memset(p, 0, 89);
    wr16(p, 89);
    wr32(p + 4, action);
    put_times(p + 8, &sb);
    wr64(p + 40, alloc_size(&sb));
    wr64(p + 48, is_dir ? 0 : (uint64_t)sb.st.st_size);
    wr32(p + 56, srv_attributes(&sb.st));
    wr64(p + 64, o->id);
    wr64(p + 72, o->id);
    r->rlen = 89; /* create contexts are not answered: the request's are ignored */
    return STATUS_SUCCESS;
}

/* The open a request names by FileId at body+at ([MS-SMB2] 3.3.5.2.7.2: 0xFF..FF in a
 * related request means the previous request's FileId). */
static struct open *req_open(struct conn *c, struct req *r, size_t at, uint64_t prev)
{
    uint64_t pid = rd64(r->body + at), vid = rd64(r->body + at + 8);
    if ((r->flags & SMB2_FLAGS_RELATED_OPERATIONS) && pid == UINT64_MAX && vid == UINT64_MAX)
        vid = prev;
    r->file_id = vid;
    return open_find(c, r, vid);
}

static uint32_t do_close(struct conn *c, struct req *r, uint64_t prev)
{
    struct open *o = req_open(c, r, 8, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    uint16_t flags = rd16(r->body + 2);
    uint8_t *p = r->rbody;
    memset(p, 0, 60);
    wr16(p, 60);
    struct srv_stat sb;
    if ((flags & 1) && srv_fstat(o->fd, &sb) == 0) { /* SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB */
        wr16(p + 2, 1);
        put_times(p + 8, &sb);
        wr64(p + 40, alloc_size(&sb));
        wr64(p + 48, o->is_dir ? 0 : (uint64_t)sb.st.st_size);
        wr32(p + 56, srv_attributes(&sb.st));
    }
    r->rlen = 60;
    return open_close(c, o, "CLOSE");
}

static uint32_t do_flush(struct conn *c, struct req *r, uint64_t prev)
{
    struct open *o = req_open(c, r, 8, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (!o->is_dir && fsync(o->fd))
        return srv_errno_status(errno, 0);
    wr16(r->rbody, 4);
    wr16(r->rbody + 2, 0);
    r->rlen = 4;
    return STATUS_SUCCESS;
}

/* ---- READ / WRITE ([MS-SMB2] 2.2.19-2.2.22, 3.3.5.12, 3.3.5.13) ---- */

/* [MS-SMB2] 3.3.5.12 / 3.3.5.13: with Channel SMB2_CHANNEL_RDMA_V1_INVALIDATE the server
 * invalidates the client's buffer with its response. Once the client names a buffer the
 * response ends its use, whatever the response says: a client of RDMA_V1_INVALIDATE (Linux
 * cifs at 3.0.2 and later) relies on the server's Send with Invalidate and does not invalidate
 * the token itself, so an error response that left it valid would have the client re-register
 * a live token and lose its connection. So this runs before anything about the request is
 * checked (session, signature, tree, open, access, the rest of the channel info), and notes
 * the first descriptor's token for every response to the request, error or not.
 * Only a token that is readable counts: the channel info must hold at least one whole
 * SMB_DIRECT_BUFFER_DESCRIPTOR_V1 (2.2.3.1) inside the request and past its fixed 48 bytes.
 * Channel info that does not (too short, out of the request, over the fixed part) names no
 * buffer we could invalidate: that response goes by plain Send and the client invalidates
 * its region itself. Neither before dialect 3.0.2 nor on a transport without Send with
 * Invalidate: there the channel is refused and the client keeps the duty. One token per
 * message: in a compound, the first READ or WRITE that names one. */
static void note_invalidate(struct conn *c, const struct req *r)
{
    if ((r->command != SMB2_READ && r->command != SMB2_WRITE) || c->invalidate ||
        c->dialect < 0x0302 || !c->t->ops->send_invalidate || !in_req(r, SMB2_HDR_LEN, 48))
        return;
    int rd = r->command == SMB2_READ;
    /* READ (2.2.19): Channel at 36, ReadChannelInfoOffset/Length at 44/46; WRITE (2.2.21):
     * Channel at 32, WriteChannelInfoOffset/Length at 40/42 */
    uint32_t channel = rd32(r->body + (rd ? 36 : 32));
    uint16_t off = rd16(r->body + (rd ? 44 : 40)), len = rd16(r->body + (rd ? 46 : 42));
    if (channel != CHANNEL_RDMA_V1_INVALIDATE || len < 16 || off < SMB2_HDR_LEN + 48 ||
        !in_req(r, off, 16))
        return;
    c->invalidate = 1;
    c->invalidate_token = rd32(r->hdr + off + 8); /* the descriptor's Token */
}

/* The RDMA descriptors of a READ or WRITE: checks the channel against the transport and
 * dialect. STATUS_SUCCESS with *nd 0 for CHANNEL_NONE. */
static uint32_t channel_descs(struct conn *c, struct req *r, uint32_t channel, uint16_t off,
                              uint16_t len, smb_buffer_desc *d, unsigned *nd)
{
    *nd = 0;
    if (channel == CHANNEL_NONE)
        return STATUS_SUCCESS;
    if ((channel != CHANNEL_RDMA_V1 && channel != CHANNEL_RDMA_V1_INVALIDATE) ||
        !c->t->ops->peer_write || !c->t->ops->peer_read || c->dialect < 0x0300 ||
        (channel == CHANNEL_RDMA_V1_INVALIDATE &&
         (c->dialect < 0x0302 || !c->t->ops->send_invalidate))) {
        logf_(c, "%s refused: channel %u on a %s transport, dialect 0x%04x",
              r->command == SMB2_READ ? "READ" : "WRITE", channel, c->t->ops->name, c->dialect);
        return STATUS_INVALID_PARAMETER;
    }
    /* the descriptors follow the fixed part of the request (48 bytes for READ and WRITE) */
    if (len == 0 || len % 16 || len / 16 > 16 || off < SMB2_HDR_LEN + 48 || !in_req(r, off, len))
        return STATUS_INVALID_PARAMETER;
    for (unsigned i = 0; i < len / 16u; i++) {
        const uint8_t *p = r->hdr + off + 16 * i;
        d[i].offset = rd64(p);
        d[i].token = rd32(p + 8);
        d[i].length = rd32(p + 12);
    }
    *nd = len / 16u;
    return STATUS_SUCCESS;
}

static uint32_t rdma_status(struct conn *c, struct req *r, int rc)
{
    if (rc == -EINVAL)
        return STATUS_INVALID_PARAMETER; /* the descriptors hold fewer bytes than asked */
    logf_(c, "RDMA %s failed: %s; ending the connection",
          r->command == SMB2_READ ? "Write" : "Read", smb_transport_error(c->t));
    r->fatal = 1;
    r->no_response = 1; /* the transport has ended the connection: nothing to answer on */
    return STATUS_ACCESS_DENIED;
}

/* [MS-SMB2] 3.3.5.2.5: from 2.1 on, a request moving more than 64 KiB must be charged a
 * credit per 64 KiB (CreditCharge 0 counts as 1). */
static int charge_ok(const struct conn *c, const struct req *r, uint64_t payload)
{
    if (c->dialect < 0x0210)
        return 1;
    uint32_t charge = rd16(r->hdr + SMB2_HDR_CREDIT_CHARGE);
    uint64_t need = payload ? (payload - 1) / 65536 + 1 : 1;
    return (charge ? charge : 1) >= need;
}

static uint32_t do_read(struct conn *c, struct req *r, uint64_t prev)
{
    const uint8_t *b = r->body;
    uint32_t len = rd32(b + 4), channel = rd32(b + 36), minimum = rd32(b + 32);
    uint64_t off = rd64(b + 8);
    struct open *o = req_open(c, r, 16, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (o->is_dir)
        return STATUS_INVALID_DEVICE_REQUEST;
    /* [MS-SMB2] 3.3.5.12: the open must grant FILE_READ_DATA (or execute, as for paging) */
    if (!(o->access & (ACCESS_READ_DATA | ACCESS_EXECUTE | ACCESS_GENERIC_READ |
                       ACCESS_GENERIC_EXECUTE | ACCESS_GENERIC_ALL | ACCESS_MAXIMUM_ALLOWED)))
        return STATUS_ACCESS_DENIED;
    smb_buffer_desc d[16];
    unsigned nd;
    uint32_t st = channel_descs(c, r, channel, rd16(b + 44), rd16(b + 46), d, &nd);
    if (st)
        return st;
    if (!charge_ok(c, r, len)) {
        logf_(c, "READ of %u bytes refused: CreditCharge %u", len,
              rd16(r->hdr + SMB2_HDR_CREDIT_CHARGE));
        return STATUS_INVALID_PARAMETER;
    }
    if (len > c->max_io || off > INT64_MAX || (!nd && len > r->rcap - 16)) {
        logf_(c, "READ of %u bytes refused: MaxReadSize %u", len, c->max_io);
        return STATUS_INVALID_PARAMETER;
    }
    uint8_t *dst = nd ? c->io : r->rbody + 16;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(o->fd, dst + got, len - got, (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return srv_errno_status(errno, 0);
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == 0 && len > 0)
        return STATUS_END_OF_FILE;
    if (got < minimum)
        return STATUS_END_OF_FILE;
    uint8_t *p = r->rbody;
    memset(p, 0, 16);
    wr16(p, 17);
    if (nd) {
        int rc = c->t->ops->peer_write(c->t, d, nd, dst, got);
        if (rc)
            return rdma_status(c, r, rc);
        if (c->stats)
            stat_add(&c->stats->rdma_writes, 1);
        /* [MS-SMB2] 3.3.5.12: over RDMA DataLength is 0, DataRemaining the bytes written */
        p[2] = SMB2_HDR_LEN + 16;
        wr32(p + 8, (uint32_t)got);
        /* the message ends where the (empty) data would start, as ksmbd and Windows send it:
         * Linux cifs takes any byte past DataOffset as inline data and, its buffer being the
         * RDMA one, copies it nowhere (a kernel oops in smbd_recv_buf) */
        r->rlen = 16;
    } else {
        if (c->stats)
            stat_add(&c->stats->inline_reads, 1);
        p[2] = SMB2_HDR_LEN + 16;
        wr32(p + 4, (uint32_t)got);
        r->rlen = got ? 16 + got : 17;
        if (!got)
            p[16] = 0;
    }
    return STATUS_SUCCESS;
}

static uint32_t do_write(struct conn *c, struct req *r, uint64_t prev)
{
    const uint8_t *b = r->body;
    uint16_t doff = rd16(b + 2);
    uint32_t len = rd32(b + 4), channel = rd32(b + 32), remaining = rd32(b + 36);
    uint64_t off = rd64(b + 8);
    struct open *o = req_open(c, r, 16, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (o->is_dir)
        return STATUS_INVALID_DEVICE_REQUEST;
    /* [MS-SMB2] 3.3.5.13: the open must grant FILE_WRITE_DATA or FILE_APPEND_DATA */
    if (!wants_write(o->access))
        return STATUS_ACCESS_DENIED;
    smb_buffer_desc d[16];
    unsigned nd;
    uint32_t st = channel_descs(c, r, channel, rd16(b + 40), rd16(b + 42), d, &nd);
    if (st)
        return st;
    if (!charge_ok(c, r, nd ? remaining : len)) {
        logf_(c, "WRITE of %u bytes refused: CreditCharge %u", nd ? remaining : len,
              rd16(r->hdr + SMB2_HDR_CREDIT_CHARGE));
        return STATUS_INVALID_PARAMETER;
    }
    const uint8_t *src;
    if (nd) {
        /* [MS-SMB2] 3.3.5.13: over RDMA the length is RemainingBytes, Length is 0 */
        if (len != 0 || remaining > c->max_io)
            return STATUS_INVALID_PARAMETER;
        len = remaining;
        int rc = c->t->ops->peer_read(c->t, d, nd, c->io, len);
        if (rc)
            return rdma_status(c, r, rc);
        if (c->stats)
            stat_add(&c->stats->rdma_reads, 1);
        src = c->io;
    } else {
        if (len > c->max_io || !in_req(r, doff, len))
            return STATUS_INVALID_PARAMETER;
        src = r->hdr + doff;
        if (c->stats)
            stat_add(&c->stats->inline_writes, 1);
    }
    if (off > INT64_MAX - (uint64_t)len)
        return STATUS_INVALID_PARAMETER;
    if ((fcntl(o->fd, F_GETFL) & O_ACCMODE) != O_RDWR)
        return STATUS_ACCESS_DENIED;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(o->fd, src + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return srv_errno_status(errno, 0);
        }
        done += (size_t)n;
    }
    uint8_t *p = r->rbody;
    memset(p, 0, 17);
    wr16(p, 17);
    wr32(p + 4, (uint32_t)done);
    r->rlen = 17;
    return STATUS_SUCCESS;
}

/* ---- QUERY_DIRECTORY ([MS-SMB2] 2.2.33, 3.3.5.18; entries [MS-FSCC] 2.4) ---- */

/* Reads the directory's names once per scan, within DIR_NAMES_MAX for the open and
 * CONN_NAMES_MAX for the connection (-ENOMEM past that). */
static int load_dir(struct conn *c, struct open *o)
{
    c->names_bytes -= o->names_cap;
    free(o->names);
    o->names = NULL;
    o->names_cap = 0;
    o->nnames = 0;
    int d = dup(o->fd);
    if (d < 0)
        return -errno;
    DIR *dir = fdopendir(d);
    if (!dir) {
        int err = errno;
        close(d);
        return -err;
    }
    rewinddir(dir);
    size_t cap = 4096, used = 0, n = 0;
    char *names = c->names_bytes + cap <= CONN_NAMES_MAX ? malloc(cap) : NULL;
    struct dirent *e;
    while (names && (e = readdir(dir))) {
        size_t l = strlen(e->d_name) + 1;
        if (n == MAX_DIRENTS || used + l > DIR_NAMES_MAX) {
            logf_(c, "listing of \"%s\" cut at %zu names", o->path, n);
            break;
        }
        if (used + l > cap) {
            char *nn = c->names_bytes + cap * 2 <= CONN_NAMES_MAX ? realloc(names, cap * 2) : NULL;
            if (!nn) {
                free(names);
                names = NULL;
                break;
            }
            names = nn;
            cap *= 2;
        }
        memcpy(names + used, e->d_name, l);
        used += l;
        n++;
    }
    closedir(dir);
    if (!names) {
        logf_(c, "listing of \"%s\" refused: the connection holds %zu bytes of names", o->path,
              c->names_bytes);
        return -ENOMEM;
    }
    o->names = names;
    o->names_cap = cap;
    c->names_bytes += cap;
    o->nnames = n;
    o->cursor = 0;
    return 0;
}

static const char *dir_name_at(const struct open *o, size_t i, size_t *pos)
{
    (void)i;
    const char *s = o->names + *pos;
    *pos += strlen(s) + 1;
    return s;
}

/* The stat of entry name of directory o, without leaving the root: "." and ".." are the
 * directory itself (the root's parent is not the client's to see); a symlink is followed
 * only where it stays beneath the root (otherwise the entry is left out: -1). */
static int entry_stat(struct conn *c, const struct open *o, const char *name, struct srv_stat *sb)
{
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return srv_fstat(o->fd, sb);
    char rel[SRV_PATH_MAX * 2];
    snprintf(rel, sizeof rel, "%s%s%s", o->path, *o->path ? "/" : "", name);
    int fd = srv_open_beneath(c->root, rel, O_PATH, 0);
    if (fd < 0)
        return -1;
    int rc = srv_fstat(fd, sb);
    close(fd);
    return rc;
}

/* The fixed part of an entry of FileInformationClass cls ([MS-FSCC] 2.4), before its name; 0
 * for a class this server does not list in. */
static size_t dir_entry_fixed(uint8_t cls)
{
    static const struct {
        uint8_t cls, fixed;
    } layouts[] = {
        {1, 64},   /* FileDirectoryInformation */
        {2, 68},   /* FileFullDirectoryInformation */
        {3, 94},   /* FileBothDirectoryInformation */
        {12, 12},  /* FileNamesInformation */
        {37, 104}, /* FileIdBothDirectoryInformation */
        {38, 80},  /* FileIdFullDirectoryInformation */
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].cls == cls)
            return layouts[i].fixed;
    return 0;
}

/* One entry of class cls at p (cap bytes); its length (8-aligned is the caller's), 0 when it
 * does not fit. */
static size_t dir_entry(uint8_t cls, uint8_t *p, size_t cap, const char *name,
                        const struct srv_stat *sb)
{
    uint8_t uname[1024];
    size_t nl = srv_utf8_to_utf16(name, uname, sizeof uname, 0);
    if (nl == (size_t)-1)
        return 0;
    size_t fixed = dir_entry_fixed(cls);
    if (fixed == 0)
        return 0;
    if (fixed + nl > cap)
        return 0;
    memset(p, 0, fixed);
    if (cls == 12) {
        wr32(p + 8, (uint32_t)nl);
    } else {
        put_times(p + 8, sb);
        wr64(p + 40, S_ISDIR(sb->st.st_mode) ? 0 : (uint64_t)sb->st.st_size);
        wr64(p + 48, alloc_size(sb));
        wr32(p + 56, srv_attributes(&sb->st));
        wr32(p + 60, (uint32_t)nl);
        if (cls == 37)
            wr64(p + 96, (uint64_t)sb->st.st_ino);
        if (cls == 38)
            wr64(p + 72, (uint64_t)sb->st.st_ino);
    }
    memcpy(p + fixed, uname, nl);
    return fixed + nl;
}

static uint32_t do_query_directory(struct conn *c, struct req *r, uint64_t prev)
{
    const uint8_t *b = r->body;
    uint8_t cls = b[2], flags = b[3];
    uint16_t noff = rd16(b + 24), nlen = rd16(b + 26);
    uint32_t outlen = rd32(b + 28);
    struct open *o = req_open(c, r, 8, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (!in_req(r, noff, nlen))
        return STATUS_INVALID_PARAMETER;
    if (!o->is_dir)
        return STATUS_INVALID_PARAMETER;
    if (dir_entry_fixed(cls) == 0)
        return STATUS_INVALID_INFO_CLASS;
    char pattern[256];
    if (nlen == 0)
        strcpy(pattern, "*");
    else if (srv_utf16_to_utf8(r->hdr + noff, nlen, pattern, sizeof pattern))
        return STATUS_OBJECT_NAME_INVALID;
    int first = 0;
    if (o->nnames == 0 || (flags & 0x11) /* RESTART_SCANS, REOPEN */ ||
        strcmp(pattern, o->pattern)) {
        int rc = load_dir(c, o);
        if (rc)
            return srv_errno_status(-rc, 0);
        snprintf(o->pattern, sizeof o->pattern, "%s", pattern);
        first = 1;
    }
    size_t cap = outlen < r->rcap - 8 ? outlen : r->rcap - 8;
    uint8_t *out = r->rbody + 8;
    size_t used = 0, last = 0;
    unsigned count = 0;
    size_t pos = 0;
    for (size_t i = 0; i < o->cursor; i++)
        (void)dir_name_at(o, i, &pos);
    while (o->cursor < o->nnames) {
        size_t save = pos;
        const char *name = dir_name_at(o, o->cursor, &pos);
        struct srv_stat sb;
        uint8_t probe[1024];
        /* a name that is not UTF-8 cannot be sent as UTF-16: left out like one not matching */
        if (srv_utf8_to_utf16(name, probe, sizeof probe, 0) == (size_t)-1 ||
            !srv_name_match(pattern, name) || entry_stat(c, o, name, &sb)) {
            o->cursor++;
            continue;
        }
        size_t at = (used + 7) & ~(size_t)7;
        size_t n = at <= cap ? dir_entry(cls, out + at, cap - at, name, &sb) : 0;
        if (n == 0) {
            pos = save;
            break;
        }
        memset(out + used, 0, at - used);
        if (count)
            wr32(out + last, (uint32_t)(at - last));
        last = at;
        used = at + n;
        count++;
        o->cursor++;
        if (flags & 0x02) /* RETURN_SINGLE_ENTRY */
            break;
    }
    if (count == 0) {
        if (o->cursor < o->nnames)
            return STATUS_INFO_LENGTH_MISMATCH; /* the next entry does not fit */
        return first ? STATUS_NO_SUCH_FILE : STATUS_NO_MORE_FILES;
    }
    uint8_t *p = r->rbody;
    wr16(p, 9);
    wr16(p + 2, SMB2_HDR_LEN + 8);
    wr32(p + 4, (uint32_t)used);
    r->rlen = 8 + used;
    return STATUS_SUCCESS;
}

/* ---- QUERY_INFO ([MS-SMB2] 2.2.37, 3.3.5.20; [MS-FSCC] 2.4, 2.5) ---- */

static size_t wire_name(const struct open *o, uint8_t *p, size_t cap)
{
    char name[SRV_PATH_MAX + 2];
    snprintf(name, sizeof name, "\\%s", o->path);
    for (char *s = name; *s; s++)
        if (*s == '/')
            *s = '\\';
    size_t n = srv_utf8_to_utf16(name, p, cap, 0);
    return n == (size_t)-1 ? 0 : n;
}

/* Fills the information of class cls into p; its length, *fixed the part that must fit
 * (0 for an unknown class). */
static uint32_t file_info(struct conn *c, struct open *o, uint8_t cls, uint8_t *p, size_t cap,
                          size_t *len, size_t *fixed)
{
    struct srv_stat sb;
    if (srv_fstat(o->fd, &sb))
        return srv_errno_status(errno, 0);
    uint64_t eof = o->is_dir ? 0 : (uint64_t)sb.st.st_size;
    (void)c;
    if (cap < 128)
        return STATUS_BUFFER_TOO_SMALL;
    memset(p, 0, 128);
    switch (cls) {
    case 4: /* FileBasicInformation */
        put_times(p, &sb);
        wr32(p + 32, srv_attributes(&sb.st));
        *len = *fixed = 40;
        break;
    case 5: /* FileStandardInformation */
        wr64(p, alloc_size(&sb));
        wr64(p + 8, eof);
        wr32(p + 16, (uint32_t)sb.st.st_nlink);
        p[20] = (uint8_t)o->delete_on_close;
        p[21] = (uint8_t)o->is_dir;
        *len = *fixed = 24;
        break;
    case 6: /* FileInternalInformation */
        wr64(p, (uint64_t)sb.st.st_ino);
        *len = *fixed = 8;
        break;
    case 7:  /* FileEaInformation: no EAs */
    case 16: /* FileModeInformation */
    case 17: /* FileAlignmentInformation: byte alignment */
        *len = *fixed = 4;
        break;
    case 8: /* FileAccessInformation */
        wr32(p, o->access);
        *len = *fixed = 4;
        break;
    case 14: /* FilePositionInformation */
        *len = *fixed = 8;
        break;
    case 18: { /* FileAllInformation */
        put_times(p, &sb);
        wr32(p + 32, srv_attributes(&sb.st));
        wr64(p + 40, alloc_size(&sb));
        wr64(p + 48, eof);
        wr32(p + 56, (uint32_t)sb.st.st_nlink);
        p[60] = (uint8_t)o->delete_on_close;
        p[61] = (uint8_t)o->is_dir;
        wr64(p + 64, (uint64_t)sb.st.st_ino);
        wr32(p + 76, o->access);
        size_t n = wire_name(o, p + 100, cap - 100);
        wr32(p + 96, (uint32_t)n);
        *len = 100 + n;
        *fixed = 100;
        break;
    }
    case 15:                /* FileFullEaInformation: extended attributes are not served */
        return 0xC0000052u; /* STATUS_NO_EAS_ON_FILE */
    case 21:                /* FileAlternateNameInformation: the file system keeps no 8.3 names */
        return STATUS_NOT_SUPPORTED;
    case 22: { /* FileStreamInformation: the one unnamed data stream of a file */
        if (o->is_dir) {
            *len = *fixed = 0;
            break;
        }
        size_t n = srv_utf8_to_utf16("::$DATA", p + 24, cap - 24, 0);
        wr32(p + 4, (uint32_t)n);
        wr64(p + 8, eof);
        wr64(p + 16, alloc_size(&sb));
        *len = 24 + n;
        *fixed = 24;
        break;
    }
    case 34: /* FileNetworkOpenInformation */
        put_times(p, &sb);
        wr64(p + 32, alloc_size(&sb));
        wr64(p + 40, eof);
        wr32(p + 48, srv_attributes(&sb.st));
        *len = *fixed = 56;
        break;
    case 35: /* FileAttributeTagInformation */
        wr32(p, srv_attributes(&sb.st));
        *len = *fixed = 8;
        break;
    default:
        return STATUS_INVALID_INFO_CLASS;
    }
    return STATUS_SUCCESS;
}

static uint32_t fs_info(struct conn *c, struct open *o, uint8_t cls, uint8_t *p, size_t cap,
                        size_t *len, size_t *fixed)
{
    struct statvfs v;
    if (fstatvfs(o->fd, &v))
        return srv_errno_status(errno, 0);
    if (cap < 128)
        return STATUS_BUFFER_TOO_SMALL;
    memset(p, 0, 128);
    uint32_t bsize = v.f_frsize ? (uint32_t)v.f_frsize : 4096u;
    (void)c;
    switch (cls) {
    case 1: { /* FileFsVolumeInformation */
        wr32(p + 8, (uint32_t)v.f_fsid);
        size_t n = srv_utf8_to_utf16("softndk", p + 18, cap - 18, 0);
        wr32(p + 12, (uint32_t)n);
        *len = 18 + n;
        *fixed = 18;
        break;
    }
    case 3: /* FileFsSizeInformation */
        wr64(p, v.f_blocks);
        wr64(p + 8, v.f_bavail);
        wr32(p + 16, bsize / 512u);
        wr32(p + 20, 512);
        *len = *fixed = 24;
        break;
    case 4:         /* FileFsDeviceInformation */
        wr32(p, 7); /* FILE_DEVICE_DISK */
        *len = *fixed = 8;
        break;
    case 5: { /* FileFsAttributeInformation: case sensitive and preserving, Unicode */
        wr32(p, 0x1u | 0x2u | 0x4u);
        wr32(p + 4, 255);
        size_t n = srv_utf8_to_utf16("NTFS", p + 12, cap - 12, 0);
        wr32(p + 8, (uint32_t)n);
        *len = 12 + n;
        *fixed = 12;
        break;
    }
    case 7: /* FileFsFullSizeInformation */
        wr64(p, v.f_blocks);
        wr64(p + 8, v.f_bavail);
        wr64(p + 16, v.f_bfree);
        wr32(p + 24, bsize / 512u);
        wr32(p + 28, 512);
        *len = *fixed = 32;
        break;
    case 11: /* FileFsSectorSizeInformation */
        wr32(p, 512);
        wr32(p + 4, 512);
        wr32(p + 8, 512);
        wr32(p + 12, 512);
        wr32(p + 16, 0x3); /* ALIGNED_DEVICE | PARTITION_ALIGNED_ON_DEVICE */
        *len = *fixed = 28;
        break;
    default: /* FileFsObjectIdInformation (8) and the rest */
        return STATUS_NOT_SUPPORTED;
    }
    return STATUS_SUCCESS;
}

/* A minimal self-relative security descriptor ([MS-DTYP] 2.4.6): the owner and group are the
 * file's uid and gid as Unix SIDs (S-1-22-1-uid, S-1-22-2-gid, as Samba maps them), the DACL
 * one ACE allowing Everyone (S-1-1-0) full access: the one account the server serves acts
 * with the server's own rights. No SACL. AdditionalInformation picks the parts. */
static size_t put_sid(uint8_t *p, uint8_t authority, const uint32_t *sub, unsigned n)
{
    p[0] = 1;
    p[1] = (uint8_t)n;
    memset(p + 2, 0, 6);
    p[7] = authority;
    for (unsigned i = 0; i < n; i++)
        wr32(p + 8 + 4 * i, sub[i]);
    return 8 + 4u * n;
}

static uint32_t security_info(struct open *o, uint32_t what, uint8_t *p, size_t *len)
{
    struct srv_stat sb;
    if (srv_fstat(o->fd, &sb))
        return srv_errno_status(errno, 0);
    memset(p, 0, 20);
    p[0] = 1;
    uint16_t control = 0x8000; /* SE_SELF_RELATIVE */
    size_t at = 20;
    if (what & 1) { /* OWNER_SECURITY_INFORMATION */
        uint32_t sub[2] = {1, (uint32_t)sb.st.st_uid};
        wr32(p + 4, (uint32_t)at);
        at += put_sid(p + at, 22, sub, 2);
    }
    if (what & 2) { /* GROUP_SECURITY_INFORMATION */
        uint32_t sub[2] = {2, (uint32_t)sb.st.st_gid};
        wr32(p + 8, (uint32_t)at);
        at += put_sid(p + at, 22, sub, 2);
    }
    if (what & 4) {        /* DACL_SECURITY_INFORMATION */
        control |= 0x0004; /* SE_DACL_PRESENT */
        wr32(p + 16, (uint32_t)at);
        uint8_t *acl = p + at;
        acl[0] = 2; /* ACL_REVISION */
        acl[1] = 0;
        wr16(acl + 2, 8 + 20);
        wr16(acl + 4, 1);
        wr16(acl + 6, 0);
        uint8_t *ace = acl + 8;
        ace[0] = 0; /* ACCESS_ALLOWED_ACE_TYPE */
        ace[1] = 0;
        wr16(ace + 2, 20);
        wr32(ace + 4, ACCESS_ALL);
        uint32_t world = 0;
        put_sid(ace + 8, 1, &world, 1);
        at += 28;
    }
    wr16(p + 2, control);
    *len = at;
    return STATUS_SUCCESS;
}

static uint32_t do_query_info(struct conn *c, struct req *r, uint64_t prev)
{
    const uint8_t *b = r->body;
    uint8_t type = b[2], cls = b[3];
    uint32_t outlen = rd32(b + 4);
    struct open *o = req_open(c, r, 24, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (!in_req(r, rd16(b + 8), rd32(b + 12)))
        return STATUS_INVALID_PARAMETER;
    uint8_t buf[4096];
    size_t len = 0, fixed = 0;
    uint32_t st;
    if (type == 1)
        st = file_info(c, o, cls, buf, sizeof buf, &len, &fixed);
    else if (type == 2)
        st = fs_info(c, o, cls, buf, sizeof buf, &len, &fixed);
    else if (type == 3)
        st = security_info(o, rd32(b + 16), buf, &len);
    else
        st = STATUS_NOT_SUPPORTED; /* quotas */
    if (type == 3 && st == STATUS_SUCCESS && outlen < len) {
        /* [MS-SMB2] 3.3.5.20.3: STATUS_BUFFER_TOO_SMALL, the size needed in ErrorData */
        uint8_t *e = r->rbody;
        memset(e, 0, 12);
        wr16(e, 9);
        wr32(e + 4, 4);
        wr32(e + 8, (uint32_t)len);
        r->rlen = 12;
        return STATUS_BUFFER_TOO_SMALL;
    }
    if (st) {
        logf_(c, "QUERY_INFO type %u class %u refused: 0x%08x", type, cls, st);
        return st;
    }
    if (outlen < fixed)
        return STATUS_INFO_LENGTH_MISMATCH;
    size_t n = len < outlen ? len : outlen;
    if (n > r->rcap - 8)
        n = r->rcap - 8;
    uint8_t *p = r->rbody;
    wr16(p, 9);
    wr16(p + 2, SMB2_HDR_LEN + 8);
    wr32(p + 4, (uint32_t)n);
    memcpy(p + 8, buf, n);
    r->rlen = n ? 8 + n : 9;
    if (!n)
        p[8] = 0;
    return n < len ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;
}

/* ---- SET_INFO ([MS-SMB2] 2.2.39, 3.3.5.21; [MS-FSCC] 2.4) ---- */

static uint32_t set_rename(struct conn *c, struct open *o, const uint8_t *p, size_t len)
{
    if (len < 20)
        return STATUS_INFO_LENGTH_MISMATCH;
    uint32_t nl = rd32(p + 16);
    if (nl > len - 20)
        return STATUS_INVALID_PARAMETER;
    if (rd64(p + 8) != 0) /* RootDirectory: must be 0 over SMB2 */
        return STATUS_INVALID_PARAMETER;
    char to[SRV_PATH_MAX];
    uint32_t st = srv_path_from_wire(p + 20, nl, 1, to, sizeof to);
    if (st)
        return st;
    if (!*o->path || !*to)
        return STATUS_ACCESS_DENIED;
    const char *ob, *nb;
    int ofd = srv_open_parent(c->root, o->path, &ob);
    if (ofd < 0)
        return srv_errno_status(-ofd, 1);
    int nfd = srv_open_parent(c->root, to, &nb);
    if (nfd < 0) {
        close(ofd);
        return srv_errno_status(-nfd, 1);
    }
    int rc = renameat2(ofd, ob, nfd, nb, p[0] ? 0 : RENAME_NOREPLACE);
    int err = errno;
    close(ofd);
    close(nfd);
    if (rc) {
        logf_(c, "rename \"%s\" -> \"%s\" refused: %s", o->path, to, strerror(err));
        return srv_errno_status(err, 0);
    }
    logf_(c, "renamed \"%s\" -> \"%s\"", o->path, to);
    /* this connection's opens of it, and of anything under it, follow the new name (their
     * delete on close must not strike whatever takes the old one) */
    char from[SRV_PATH_MAX];
    snprintf(from, sizeof from, "%s", o->path);
    size_t fl = strlen(from);
    for (unsigned i = 0; i < MAX_OPENS; i++) {
        struct open *x = &c->opens[i];
        if (x->state != OPEN_OPEN || strncmp(x->path, from, fl) ||
            (x->path[fl] != 0 && x->path[fl] != '/'))
            continue;
        char moved[SRV_PATH_MAX * 2];
        snprintf(moved, sizeof moved, "%s%s", to, x->path + fl);
        if (strlen(moved) < sizeof x->path)
            memcpy(x->path, moved, strlen(moved) + 1);
    }
    return STATUS_SUCCESS;
}

static uint32_t set_file_info(struct conn *c, struct open *o, uint8_t cls, const uint8_t *p,
                              size_t len)
{
    switch (cls) {
    case 4: { /* FileBasicInformation: times (0 and -1: leave alone); attributes ignored */
        if (len < 36)
            return STATUS_INFO_LENGTH_MISMATCH;
        struct timespec ts[2];
        uint64_t at = rd64(p + 8), wt = rd64(p + 16);
        ts[0] = srv_timespec(at);
        ts[1] = srv_timespec(wt);
        if (at == 0 || at == UINT64_MAX)
            ts[0].tv_nsec = UTIME_OMIT;
        if (wt == 0 || wt == UINT64_MAX)
            ts[1].tv_nsec = UTIME_OMIT;
        if (futimens(o->fd, ts))
            return srv_errno_status(errno, 0);
        return STATUS_SUCCESS;
    }
    case 10: /* FileRenameInformation: needs DELETE access ([MS-FSA] 2.1.5.15.11) */
        if (!(o->access & (ACCESS_DELETE | ACCESS_GENERIC_ALL | ACCESS_MAXIMUM_ALLOWED)))
            return STATUS_ACCESS_DENIED;
        return set_rename(c, o, p, len);
    case 13: /* FileDispositionInformation: needs DELETE access */
        if (len < 1)
            return STATUS_INFO_LENGTH_MISMATCH;
        if (p[0] && !(o->access & (ACCESS_DELETE | ACCESS_GENERIC_ALL | ACCESS_MAXIMUM_ALLOWED)))
            return STATUS_ACCESS_DENIED;
        if (p[0] && !*o->path)
            return STATUS_CANNOT_DELETE;
        if (p[0] && o->is_dir && dir_is_empty(o->fd) != 1)
            return STATUS_DIRECTORY_NOT_EMPTY;
        o->delete_on_close = p[0] != 0;
        return STATUS_SUCCESS;
    case 14: /* FilePositionInformation: kept by the client; accepted */
        return len < 8 ? STATUS_INFO_LENGTH_MISMATCH : STATUS_SUCCESS;
    case 19:   /* FileAllocationInformation: shrinking below EOF truncates */
    case 20: { /* FileEndOfFileInformation */
        if (len < 8)
            return STATUS_INFO_LENGTH_MISMATCH;
        if (o->is_dir)
            return STATUS_INVALID_PARAMETER;
        uint64_t v = rd64(p);
        struct srv_stat sb;
        if (v > INT64_MAX || srv_fstat(o->fd, &sb))
            return STATUS_INVALID_PARAMETER;
        if (cls == 19 && v >= (uint64_t)sb.st.st_size)
            return STATUS_SUCCESS;
        if (ftruncate(o->fd, (off_t)v))
            return errno == EBADF || errno == EINVAL ? STATUS_ACCESS_DENIED
                                                     : srv_errno_status(errno, 0);
        return STATUS_SUCCESS;
    }
    default:
        return STATUS_INVALID_INFO_CLASS;
    }
}

static uint32_t do_set_info(struct conn *c, struct req *r, uint64_t prev)
{
    const uint8_t *b = r->body;
    uint8_t type = b[2], cls = b[3];
    uint32_t len = rd32(b + 4);
    uint16_t off = rd16(b + 8);
    struct open *o = req_open(c, r, 16, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (!in_req(r, off, len))
        return STATUS_INVALID_PARAMETER;
    uint32_t st = type == 1 ? set_file_info(c, o, cls, r->hdr + off, len) : STATUS_NOT_SUPPORTED;
    if (st)
        logf_(c, "SET_INFO type %u class %u on \"%s\": 0x%08x", type, cls, o->path, st);
    if (st)
        return st;
    wr16(r->rbody, 2);
    r->rlen = 2;
    return STATUS_SUCCESS;
}

/* ---- LOCK ([MS-SMB2] 2.2.26, 3.3.5.14) ----
 * Each range is an open file description lock (F_OFD_SETLK), so opens conflict with each
 * other as SMB2 opens do, on this server and with local processes holding fcntl record
 * locks (OFD or classic POSIX). The open's own list gives the Windows rules the kernel lacks: a
 * lock is not re-entrant (an exclusive range conflicts with the same open's overlapping ranges), an
 * unlock must name a held range exactly, zero-length ranges conflict with nothing. A request
 * that would wait is refused at once: no request is ever pending. */

#define LOCKFLAG_SHARED           0x01u
#define LOCKFLAG_EXCLUSIVE        0x02u
#define LOCKFLAG_UNLOCK           0x04u
#define LOCKFLAG_FAIL_IMMEDIATELY 0x10u
#define STATUS_LOCK_NOT_GRANTED   0xC0000055u
#define STATUS_RANGE_NOT_LOCKED   0xC000007Eu
#define STATUS_INVALID_LOCK_RANGE 0xC00001A1u

static int ranges_overlap(uint64_t a, uint64_t al, uint64_t b, uint64_t bl)
{
    return al && bl && a < b + bl && b < a + al;
}

static int ofd_lock(int fd, short type, uint64_t off, uint64_t len)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)off;
    fl.l_len = (off_t)len;
    return fcntl(fd, F_OFD_SETLK, &fl);
}

static void lock_remove(struct conn *c, struct open *o, unsigned i)
{
    struct lock_range l = o->locks[i];
    o->locks[i] = o->locks[--o->nlocks];
    if (!l.len)
        return;
    (void)ofd_lock(o->fd, F_UNLCK, l.off, l.len);
    /* the kernel merged overlapping ranges of this open: put back what the others hold */
    for (unsigned k = 0; k < o->nlocks; k++) {
        struct lock_range *m = &o->locks[k];
        if (ranges_overlap(m->off, m->len, l.off, l.len) &&
            ofd_lock(o->fd, m->excl ? F_WRLCK : F_RDLCK, m->off, m->len))
            logf_(c, "lock [%llu, +%llu) of \"%s\" lost: %s", (unsigned long long)m->off,
                  (unsigned long long)m->len, o->path, strerror(errno));
    }
}

static uint32_t lock_add(struct open *o, uint64_t off, uint64_t len, int excl)
{
    if (o->nlocks == MAX_LOCKS)
        return STATUS_INSUFFICIENT_RESOURCES;
    for (unsigned k = 0; k < o->nlocks; k++)
        if (ranges_overlap(o->locks[k].off, o->locks[k].len, off, len) &&
            (excl || o->locks[k].excl))
            return STATUS_LOCK_NOT_GRANTED;
    if (len && ofd_lock(o->fd, excl ? F_WRLCK : F_RDLCK, off, len))
        return errno == EAGAIN || errno == EACCES ? STATUS_LOCK_NOT_GRANTED
                                                  : srv_errno_status(errno, 0);
    if (!o->locks) {
        o->locks = calloc(MAX_LOCKS, sizeof *o->locks);
        if (!o->locks) {
            if (len)
                (void)ofd_lock(o->fd, F_UNLCK, off, len);
            return STATUS_INSUFFICIENT_RESOURCES;
        }
    }
    o->locks[o->nlocks].off = off;
    o->locks[o->nlocks].len = len;
    o->locks[o->nlocks].excl = excl;
    o->nlocks++;
    return STATUS_SUCCESS;
}

static uint32_t do_lock(struct conn *c, struct req *r, uint64_t prev)
{
    const uint8_t *b = r->body;
    unsigned n = rd16(b + 2);
    struct open *o = req_open(c, r, 8, prev);
    if (!o)
        return STATUS_FILE_CLOSED;
    if (n == 0 || !in_req(r, SMB2_HDR_LEN + 24, 24ull * n))
        return STATUS_INVALID_PARAMETER;
    const uint8_t *e = b + 24;
    int unlock = (rd32(e + 16) & LOCKFLAG_UNLOCK) != 0;
    /* the whole request is checked before anything is locked */
    for (unsigned i = 0; i < n; i++) {
        uint64_t off = rd64(e + 24 * i), len = rd64(e + 24 * i + 8);
        uint32_t f = rd32(e + 24 * i + 16);
        if (unlock ? f != LOCKFLAG_UNLOCK
                   : ((f & ~LOCKFLAG_FAIL_IMMEDIATELY) != LOCKFLAG_SHARED &&
                      (f & ~LOCKFLAG_FAIL_IMMEDIATELY) != LOCKFLAG_EXCLUSIVE) ||
                         (n > 1 && !(f & LOCKFLAG_FAIL_IMMEDIATELY)))
            return STATUS_INVALID_PARAMETER;
        /* POSIX offsets are signed: ranges past 2^63 cannot be held */
        if (off > INT64_MAX || len > (uint64_t)INT64_MAX - off)
            return STATUS_INVALID_LOCK_RANGE;
    }
    uint32_t st = STATUS_SUCCESS;
    unsigned done = 0;
    for (; done < n && st == STATUS_SUCCESS; done++) {
        uint64_t off = rd64(e + 24 * done), len = rd64(e + 24 * done + 8);
        uint32_t f = rd32(e + 24 * done + 16);
        if (unlock) {
            unsigned k = 0;
            while (k < o->nlocks && !(o->locks[k].off == off && o->locks[k].len == len))
                k++;
            if (k == o->nlocks)
                st = STATUS_RANGE_NOT_LOCKED;
            else
                lock_remove(c, o, k);
        } else {
            st = lock_add(o, off, len, (f & LOCKFLAG_EXCLUSIVE) != 0);
        }
    }
    if (st && !unlock) {
        /* [MS-SMB2] 3.3.5.14.2: a failed element undoes the ones this request took */
        for (unsigned i = 0; i + 1 < done; i++) {
            uint64_t off = rd64(e + 24 * i), len = rd64(e + 24 * i + 8);
            for (unsigned k = o->nlocks; k-- > 0;)
                if (o->locks[k].off == off && o->locks[k].len == len) {
                    lock_remove(c, o, k);
                    break;
                }
        }
        logf_(c, "LOCK of \"%s\" refused: 0x%08x", o->path, st);
        return st;
    }
    if (st)
        return st;
    wr16(r->rbody, 4);
    wr16(r->rbody + 2, 0);
    r->rlen = 4;
    return STATUS_SUCCESS;
}

/* ---- IOCTL ([MS-SMB2] 2.2.31, 3.3.5.15) ---- */

static uint32_t do_ioctl(struct conn *c, struct req *r)
{
    const uint8_t *b = r->body;
    uint32_t code = rd32(b + 4), ioff = rd32(b + 24), ilen = rd32(b + 28);
    uint32_t maxout = rd32(b + 44);
    if (!in_req(r, ioff, ilen))
        return STATUS_INVALID_PARAMETER;
    /* FSCTL_QUERY_NETWORK_INTERFACE_INFO included: without SMB2_GLOBAL_CAP_MULTI_CHANNEL the
     * server may refuse it with STATUS_NOT_SUPPORTED ([MS-SMB2] 3.3.5.15.11) */
    if (code != FSCTL_VALIDATE_NEGOTIATE_INFO) {
        logf_(c, "IOCTL 0x%08x refused: not supported", code);
        return STATUS_NOT_SUPPORTED;
    }
    /* [MS-SMB2] 3.3.5.15.12: a mismatch with what NEGOTIATE saw ends the connection */
    const uint8_t *in = r->hdr + ioff;
    if (ilen < 24 || maxout < 24 || c->dialect == 0x0311) {
        logf_(c, "FSCTL_VALIDATE_NEGOTIATE_INFO under 0x%04x, %u bytes in, %u out: ending",
              c->dialect, ilen, maxout);
        r->fatal = 1;
        r->no_response = 1; /* the transport connection is terminated, unanswered */
        return STATUS_INVALID_PARAMETER;
    }
    unsigned nd = rd16(in + 22);
    int ok = rd32(in) == c->client_caps && !memcmp(in + 4, c->client_guid, 16) &&
             rd16(in + 20) == c->client_secmode && nd == c->nclient_dialects &&
             ilen >= 24u + 2u * nd;
    for (unsigned i = 0; ok && i < nd; i++)
        ok = rd16(in + 24 + 2 * i) == c->client_dialects[i];
    if (!ok) {
        logf_(c, "FSCTL_VALIDATE_NEGOTIATE_INFO does not match the NEGOTIATE: ending");
        r->fatal = 1;
        r->no_response = 1;
        return STATUS_ACCESS_DENIED;
    }
    uint8_t *p = r->rbody;
    memset(p, 0, 48 + 24);
    wr16(p, 49);
    wr32(p + 4, code);
    memcpy(p + 8, b + 8, 16);
    wr32(p + 24, SMB2_HDR_LEN + 48);
    wr32(p + 32, SMB2_HDR_LEN + 48);
    wr32(p + 36, 24);
    uint8_t *out = p + 48;
    wr32(out, server_caps(c, c->dialect));
    memcpy(out + 4, c->server_guid, 16);
    wr16(out + 20,
         NEGOTIATE_SIGNING_ENABLED | (c->cfg->require_signing ? NEGOTIATE_SIGNING_REQUIRED : 0));
    wr16(out + 22, c->dialect);
    r->rlen = 48 + 24;
    return STATUS_SUCCESS;
}

/* ---- the dispatcher ([MS-SMB2] 3.3.5.2) ---- */

/* StructureSize of each request ([MS-SMB2] 2.2.3 - 2.2.39) */
static const uint16_t request_size[] = {
    [SMB2_NEGOTIATE] = 36,
    [SMB2_SESSION_SETUP] = 25,
    [SMB2_LOGOFF] = 4,
    [SMB2_TREE_CONNECT] = 9,
    [SMB2_TREE_DISCONNECT] = 4,
    [SMB2_CREATE] = 57,
    [SMB2_CLOSE] = 24,
    [SMB2_FLUSH] = 24,
    [SMB2_READ] = 49,
    [SMB2_WRITE] = 49,
    [SMB2_LOCK] = 48,
    [SMB2_IOCTL] = 57,
    [SMB2_CANCEL] = 4,
    [SMB2_ECHO] = 4,
    [SMB2_QUERY_DIRECTORY] = 33,
    [SMB2_CHANGE_NOTIFY] = 32,
    [SMB2_QUERY_INFO] = 41,
    [SMB2_SET_INFO] = 33,
    [SMB2_OPLOCK_BREAK] = 24,
};

static const char *const command_names[] = {
    "NEGOTIATE",     "SESSION_SETUP", "LOGOFF",   "TREE_CONNECT", "TREE_DISCONNECT",
    "CREATE",        "CLOSE",         "FLUSH",    "READ",         "WRITE",
    "LOCK",          "IOCTL",         "CANCEL",   "ECHO",         "QUERY_DIRECTORY",
    "CHANGE_NOTIFY", "QUERY_INFO",    "SET_INFO", "OPLOCK_BREAK",
};

static int needs_tree(uint16_t cmd)
{
    return cmd >= SMB2_TREE_DISCONNECT && cmd != SMB2_CANCEL && cmd != SMB2_ECHO;
}

static uint32_t dispatch(struct conn *c, struct req *r, uint64_t prev_file)
{
    uint16_t cmd = r->command;
    if (cmd >= sizeof request_size / sizeof request_size[0]) {
        logf_(c, "command 0x%04x refused: unknown", cmd);
        return STATUS_NOT_SUPPORTED;
    }
    uint16_t ss = request_size[cmd];
    if (rd16(r->body) != ss || r->len < SMB2_HDR_LEN + (ss & ~1u)) {
        logf_(c, "%s refused: StructureSize %u, length %zu", command_names[cmd], rd16(r->body),
              r->len);
        return STATUS_INVALID_PARAMETER;
    }
    if (c->state != CONN_NEGOTIATED && cmd != SMB2_NEGOTIATE) {
        logf_(c, "%s before NEGOTIATE: ending the connection", command_names[cmd]);
        r->fatal = 1;
        return STATUS_INVALID_PARAMETER;
    }
    if (cmd == SMB2_NEGOTIATE)
        return do_negotiate(c, r);
    if (cmd == SMB2_SESSION_SETUP)
        return do_session_setup(c, r);
    if (cmd == SMB2_ECHO) {
        wr16(r->rbody, 4);
        wr16(r->rbody + 2, 0);
        r->rlen = 4;
        return STATUS_SUCCESS;
    }
    if (!r->sess || r->sess->state != SESS_VALID)
        return STATUS_USER_SESSION_DELETED;
    if (needs_tree(cmd)) {
        for (unsigned i = 0; i < MAX_TREES && !r->tree; i++)
            if (c->trees[i].id && c->trees[i].id == r->tree_id &&
                c->trees[i].session_id == r->session_id)
                r->tree = &c->trees[i];
        if (!r->tree)
            return STATUS_NETWORK_NAME_DELETED;
    }
    switch (cmd) {
    case SMB2_LOGOFF:
        return do_logoff(c, r);
    case SMB2_TREE_CONNECT:
        return do_tree_connect(c, r);
    case SMB2_TREE_DISCONNECT:
        return do_tree_disconnect(c, r);
    case SMB2_CREATE:
        return do_create(c, r);
    case SMB2_CLOSE:
        return do_close(c, r, prev_file);
    case SMB2_FLUSH:
        return do_flush(c, r, prev_file);
    case SMB2_READ:
        return do_read(c, r, prev_file);
    case SMB2_WRITE:
        return do_write(c, r, prev_file);
    case SMB2_IOCTL:
        return do_ioctl(c, r);
    case SMB2_QUERY_DIRECTORY:
        return do_query_directory(c, r, prev_file);
    case SMB2_QUERY_INFO:
        return do_query_info(c, r, prev_file);
    case SMB2_SET_INFO:
        return do_set_info(c, r, prev_file);
    case SMB2_LOCK:
        return do_lock(c, r, prev_file);
    default: /* CHANGE_NOTIFY, OPLOCK_BREAK (no oplocks or leases are granted) */
        logf_(c, "%s refused: not supported", command_names[cmd]);
        return STATUS_NOT_SUPPORTED;
    }
}

#define MAX_CHAIN 64

struct out_rec {
    size_t off, len;
    int sign;
    uint8_t key[16];
    struct session *preauth; /* a SESSION_SETUP response that joins the 3.1.1 hash */
};

static int is_error(uint32_t st)
{
    return (st & 0xC0000000u) == 0xC0000000u;
}

/* Handles one received message (a request or a compound chain); -1 ends the connection. */
static int handle_message(struct conn *c, size_t len)
{
    const uint8_t *in = c->in;
    static const uint8_t smb1[4] = {0xFF, 'S', 'M', 'B'}, smb2[4] = {0xFE, 'S', 'M', 'B'};
    if (len >= 4 && !memcmp(in, smb1, 4)) {
        if (smb1_negotiate(c, in, len) == 0)
            return 0;
        logf_(c, "SMB1 request refused: only a NEGOTIATE offering SMB2 is answered; ending");
        return -1;
    }
    struct out_rec recs[MAX_CHAIN];
    unsigned nrec = 0;
    size_t off = 0, oend = 0;
    uint64_t prev_file = UINT64_MAX, prev_sess = 0;
    uint32_t prev_tree = 0, prev_status = STATUS_SUCCESS;
    int fatal = 0;
    c->invalidate = 0;
    for (;;) {
        /* [MS-SMB2] 3.3.5.2: a message that is not an SMB2 request ends the connection */
        if (len - off < SMB2_HDR_LEN || memcmp(in + off, smb2, 4) || rd16(in + off + 4) != 64 ||
            (rd32(in + off + SMB2_HDR_FLAGS) & SMB2_FLAGS_SERVER_TO_REDIR)) {
            logf_(c, "malformed SMB2 header at byte %zu of %zu: ending", off, len);
            return -1;
        }
        uint32_t next = rd32(in + off + SMB2_HDR_NEXT);
        if (next && (next % 8 || next < SMB2_HDR_LEN || next > len - off)) {
            logf_(c, "NextCommand %u at byte %zu of %zu is out of range: ending", next, off, len);
            return -1;
        }
        if (nrec == MAX_CHAIN) {
            logf_(c, "compound of more than %u requests: ending", MAX_CHAIN);
            return -1;
        }
        struct req r;
        memset(&r, 0, sizeof r);
        r.hdr = in + off;
        r.body = r.hdr + SMB2_HDR_LEN;
        r.len = next ? next : len - off;
        r.command = rd16(r.hdr + SMB2_HDR_COMMAND);
        r.flags = rd32(r.hdr + SMB2_HDR_FLAGS);
        r.session_id = rd64(r.hdr + SMB2_HDR_SESSION_ID);
        r.tree_id = rd32(r.hdr + 36);
        int related = off && (r.flags & SMB2_FLAGS_RELATED_OPERATIONS);
        if (related) {
            r.session_id = prev_sess;
            r.tree_id = prev_tree;
        }
        if (c->stats && r.command < 32)
            stat_add(&c->stats->commands[r.command], 1);
        size_t ro = (oend + 7) & ~(size_t)7;
        if (ro + SMB2_HDR_LEN + 64 > c->cap) {
            logf_(c, "compound response exceeds %zu bytes: ending", c->cap);
            return -1;
        }
        memset(c->out + oend, 0, ro - oend);
        r.rhdr = c->out + ro;
        r.rbody = r.rhdr + SMB2_HDR_LEN;
        r.rcap = c->cap - ro - SMB2_HDR_LEN;
        r.sess = r.session_id ? session_find(c, r.session_id) : NULL;

        struct out_rec *rec = &recs[nrec];
        memset(rec, 0, sizeof *rec);
        note_invalidate(c, &r);
        uint32_t st;
        if (r.command == SMB2_CANCEL) {
            r.no_response = 1; /* [MS-SMB2] 3.3.5.16: no response; nothing is ever pending */
            st = STATUS_SUCCESS;
        } else if (related && is_error(prev_status)) {
            st = prev_status; /* [MS-SMB2] 3.3.5.2.7.2 */
        } else {
            int sig_ok = 1;
            if (r.sess && r.sess->state == SESS_VALID && r.command != SMB2_SESSION_SETUP &&
                !c->encrypted) { /* an encrypted message is authenticated by its tag */
                if (r.flags & SMB2_FLAGS_SIGNED) {
                    uint8_t sig[16];
                    srv_sign(c->dialect, r.sess->signing_key, r.hdr, r.len, sig);
                    if (memcmp(sig, r.hdr + SMB2_HDR_SIGNATURE, 16)) {
                        logf_(c, "%s refused: bad signature",
                              r.command < 19 ? command_names[r.command] : "request");
                        sig_ok = 0;
                    }
                } else if (r.sess->signing_required && r.command != SMB2_ECHO) {
                    logf_(c, "%s refused: unsigned on a session that requires signing",
                          r.command < 19 ? command_names[r.command] : "request");
                    sig_ok = 0;
                }
                if (sig_ok && ((r.flags & SMB2_FLAGS_SIGNED) || r.sess->signing_required)) {
                    rec->sign = 1;
                    memcpy(rec->key, r.sess->signing_key, 16);
                }
            }
            st = sig_ok ? dispatch(c, &r, prev_file) : STATUS_ACCESS_DENIED;
        }
        if (r.command == SMB2_SESSION_SETUP && r.sess) {
            if (st == STATUS_SUCCESS && (c->dialect >= 0x0300 || r.sess->signing_required)) {
                rec->sign = 1; /* [MS-SMB2] 3.3.5.5.3: the final response is signed */
                memcpy(rec->key, r.sess->signing_key, 16);
            } else if (st == STATUS_MORE_PROCESSING_REQUIRED && c->dialect == 0x0311) {
                rec->preauth = r.sess;
            }
        }
        if (r.fatal)
            fatal = 1;
        if (r.file_id)
            prev_file = r.file_id;
        prev_sess = r.session_id;
        prev_tree = r.tree_id;
        prev_status = st;
        if (!r.no_response) {
            if (st != STATUS_SUCCESS && st != STATUS_MORE_PROCESSING_REQUIRED &&
                !(st == STATUS_BUFFER_OVERFLOW && r.rlen) &&
                !(st == STATUS_BUFFER_TOO_SMALL && r.rlen == 12)) {
                memset(r.rbody, 0, 9); /* [MS-SMB2] 2.2.2 ERROR response */
                wr16(r.rbody, 9);
                r.rlen = 9;
            }
            uint8_t *h = r.rhdr;
            memcpy(h, r.hdr, SMB2_HDR_LEN);
            wr32(h + SMB2_HDR_STATUS, st);
            /* credits ([MS-SMB2] 3.3.1.2): what the client asks, within MAX_CREDITS */
            uint32_t charge = rd16(r.hdr + SMB2_HDR_CREDIT_CHARGE);
            charge = charge ? charge : 1;
            c->credits = c->credits > charge ? c->credits - charge : 0;
            uint32_t grant = rd16(r.hdr + SMB2_HDR_CREDIT);
            if (grant == 0)
                grant = 1;
            if (c->credits + grant > MAX_CREDITS)
                grant = MAX_CREDITS - c->credits;
            if (c->credits + grant == 0)
                grant = 1;
            c->credits += grant;
            wr16(h + SMB2_HDR_CREDIT, (uint16_t)grant);
            wr32(h + SMB2_HDR_FLAGS, SMB2_FLAGS_SERVER_TO_REDIR |
                                         (r.flags & SMB2_FLAGS_RELATED_OPERATIONS) |
                                         (rec->sign && !c->encrypted ? SMB2_FLAGS_SIGNED : 0));
            wr32(h + SMB2_HDR_NEXT, 0);
            wr32(h + 36, r.tree_id);
            wr64(h + SMB2_HDR_SESSION_ID, r.session_id);
            memset(h + SMB2_HDR_SIGNATURE, 0, 16);
            if (nrec)
                wr32(c->out + recs[nrec - 1].off + SMB2_HDR_NEXT,
                     (uint32_t)(ro - recs[nrec - 1].off));
            if (nrec)
                recs[nrec - 1].len = ro - recs[nrec - 1].off;
            rec->off = ro;
            rec->len = SMB2_HDR_LEN + r.rlen;
            oend = ro + rec->len;
            nrec++;
        }
        if (st != STATUS_SUCCESS && st != STATUS_MORE_PROCESSING_REQUIRED)
            logf_(c, "%s: 0x%08x", r.command < 19 ? command_names[r.command] : "request", st);
        if (fatal || !next)
            break;
        off += next;
    }
    for (unsigned i = 0; i < nrec; i++) {
        uint8_t *h = c->out + recs[i].off;
        if (recs[i].sign && !c->encrypted)
            srv_sign(c->dialect, recs[i].key, h, recs[i].len, h + SMB2_HDR_SIGNATURE);
        if (recs[i].preauth)
            srv_preauth_update(recs[i].preauth->preauth, h, recs[i].len);
        if (rd16(h + SMB2_HDR_COMMAND) == SMB2_NEGOTIATE && c->dialect == 0x0311 && nrec == 1) {
            memset(c->preauth, 0, 64);
            srv_preauth_update(c->preauth, in, len);
            srv_preauth_update(c->preauth, h, recs[i].len);
        }
    }
    if (nrec) {
        int rc;
        uint8_t *msg = c->out;
        size_t mlen = oend;
        if (c->encrypted) { /* [MS-SMB2] 3.3.4.1.4: the response in a TRANSFORM_HEADER */
            msg = c->out - TRANSFORM_LEN;
            memset(msg, 0, TRANSFORM_LEN);
            msg[0] = 0xFD;
            msg[1] = 'S';
            msg[2] = 'M';
            msg[3] = 'B';
            if (getrandom(msg + 20, c->cipher == 2 ? 12 : 11, 0) < 0)
                return -1;
            wr32(msg + 36, (uint32_t)oend);
            wr16(msg + 42, 1);
            wr64(msg + 44, c->enc_session);
            srv_encrypt(c->cipher, c->enc_key, msg, c->out, oend);
            mlen = oend + TRANSFORM_LEN;
        }
        if (c->invalidate) {
            rc = c->t->ops->send_invalidate(c->t, msg, mlen, c->invalidate_token);
            if (c->stats && rc == 0)
                stat_add(&c->stats->send_invalidates, 1);
        } else {
            rc = c->t->ops->send(c->t, msg, mlen);
        }
        if (rc) {
            logf_(c, "send of %zu bytes failed: %s", oend, smb_transport_error(c->t));
            return -1;
        }
    }
    return fatal ? -1 : 0;
}

/* A message in a TRANSFORM_HEADER ([MS-SMB2] 3.3.5.2.1): decrypted in place and moved to
 * the start of the buffer; the answer will go back encrypted. A header that does not parse, an
 * unknown session or a tag that does not verify ends the connection. */
static int unwrap(struct conn *c, size_t *len)
{
    static const uint8_t tf[4] = {0xFD, 'S', 'M', 'B'};
    c->encrypted = 0;
    if (*len < 4 || memcmp(c->in, tf, 4))
        return 0;
    const uint8_t *h = c->in;
    if (*len < TRANSFORM_LEN + SMB2_HDR_LEN || rd32(h + 36) != *len - TRANSFORM_LEN ||
        rd16(h + 42) != 1 || !c->cipher) {
        logf_(c, "malformed or unexpected TRANSFORM_HEADER: ending");
        return -1;
    }
    struct session *s = session_find(c, rd64(h + 44));
    if (!s || s->state != SESS_VALID) {
        logf_(c, "encrypted message for an unknown session: ending");
        return -1;
    }
    size_t n = *len - TRANSFORM_LEN;
    if (srv_decrypt(c->cipher, s->dec_key, h, c->in + TRANSFORM_LEN, n)) {
        logf_(c, "encrypted message does not verify: ending");
        return -1;
    }
    memmove(c->in, c->in + TRANSFORM_LEN, n);
    *len = n;
    s->encrypted_msgs++;
    c->encrypted = 1;
    c->enc_session = s->id;
    memcpy(c->enc_key, s->enc_key, 16);
    return 0;
}

int smb2_serve_connection(const smb2_server_config *cfg, smb_transport *t, smb2_server_stats *stats)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->cfg = cfg;
    c->t = t;
    c->stats = stats;
    c->log = cfg->log ? cfg->log : stderr;
    c->id = atomic_fetch_add(&conn_ids, 1) + 1;
    c->state = CONN_NEW;
    c->credits = 1;
    c->max_io = cfg->max_io ? cfg->max_io : DEFAULT_IO;
    if (c->max_io < 65536)
        c->max_io = 65536;
    if (c->max_io > (16u << 20) - 65536)
        c->max_io = (16u << 20) - 65536;
    c->cap = (size_t)c->max_io + 65536;
    size_t tmax = t->ops->max_message(t);
    if (tmax && tmax < c->cap)
        c->cap = tmax;
    int result = -1;
    c->root = open(cfg->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    c->in = malloc(c->cap);
    c->out_base = malloc(c->cap + 64);
    c->out = c->out_base ? c->out_base + 64 : NULL;
    /* the RDMA staging buffer, only where the transport can move data by RDMA */
    int rdma = t->ops->peer_write && t->ops->peer_read;
    c->io = rdma ? malloc(c->max_io) : NULL;
    if (c->root < 0 || !c->in || !c->out || (rdma && !c->io) ||
        getrandom(c->server_guid, 16, 0) != 16 || !cfg->share || !cfg->user || !cfg->password) {
        logf_(c, "cannot serve \"%s\": %s", cfg->root ? cfg->root : "(null)",
              c->root < 0 ? strerror(errno) : "no memory or incomplete configuration");
        goto out;
    }
    logf_(c, "connection over %s: share \"%s\" is \"%s\"", t->ops->name, cfg->share, cfg->root);
    for (;;) {
        size_t len = 0;
        int rc = t->ops->recv(t, c->in, c->cap, &len, -1);
        if (rc == -ECONNRESET || rc == -EPIPE) {
            result = 0;
            conn_set(c, CONN_ENDED, "the client closed the connection");
            break;
        }
        if (rc) {
            logf_(c, "receive failed: %s", smb_transport_error(t));
            conn_set(c, CONN_ENDED, "receive failed");
            break;
        }
        if (unwrap(c, &len) || handle_message(c, len)) {
            conn_set(c, CONN_ENDED, "request ends the connection");
            break;
        }
    }
out:
    for (unsigned i = 0; i < MAX_SESSIONS; i++)
        if (c->sessions[i].state != SESS_FREE)
            session_end(c, &c->sessions[i], "connection ended");
    close_opens(c, 0, 0, "connection ended");
    if (c->root >= 0)
        close(c->root);
    free(c->in);
    free(c->out_base);
    free(c->io);
    free(c);
    return result;
}
