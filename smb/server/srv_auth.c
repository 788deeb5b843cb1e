/* SESSION_SETUP authentication, server side: SPNEGO ([RFC 4178], [MS-SPNG]) around NTLMSSP
 * ([MS-NLMP] 2.2.1 messages, 3.2.5.1.2 / 3.3.2 NTLMv2 verification, 3.4.5.1 key exchange). */
#include "srv_auth.h"
#include "srv_utf16.h"
#include "srv_wire.h"

#include <ctype.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/random.h>

#include <nettle/arcfour.h>
#include <nettle/hmac.h>
#include <nettle/md4.h>

static const char *const auth_state_names[SRV_AUTH_STATE_COUNT] = {
    [SRV_AUTH_INITIAL] = "INITIAL",
    [SRV_AUTH_CHALLENGED] = "CHALLENGED",
    [SRV_AUTH_DONE] = "DONE",
    [SRV_AUTH_FAILED] = "FAILED",
};

static void auth_set(struct srv_auth *a, enum srv_auth_state to, const char *why)
{
    static const unsigned allowed[SRV_AUTH_STATE_COUNT] = {
        [SRV_AUTH_INITIAL] = 1u << SRV_AUTH_CHALLENGED | 1u << SRV_AUTH_FAILED,
        [SRV_AUTH_CHALLENGED] = 1u << SRV_AUTH_DONE | 1u << SRV_AUTH_FAILED,
        [SRV_AUTH_DONE] = 0,
        [SRV_AUTH_FAILED] = 0,
    };
    if (!(allowed[a->state] & 1u << to)) {
        fprintf(a->log ? a->log : stderr, "smb2 auth: invalid transition %s => %s (%s)\n",
                auth_state_names[a->state], auth_state_names[to], why);
        abort();
    }
    fprintf(a->log ? a->log : stderr, "smb2 auth: %s => %s (%s)\n", auth_state_names[a->state],
            auth_state_names[to], why);
    a->state = to;
}

/* ---- DER, only as much as SPNEGO needs ---- */

static const uint8_t oid_spnego[] = {0x2b, 0x06, 0x01, 0x05, 0x05, 0x02};
static const uint8_t oid_ntlmssp[] = {0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a};
static const uint8_t ntlmssp_sig[8] = {'N', 'T', 'L', 'M', 'S', 'S', 'P', 0};

struct der {
    const uint8_t *p;
    size_t len, pos;
};

static int der_next(struct der *d, uint8_t *tag, struct der *val)
{
    if (d->len - d->pos < 2)
        return -1;
    *tag = d->p[d->pos++];
    size_t n = d->p[d->pos++];
    if (n & 0x80) {
        unsigned k = n & 0x7f;
        if (k == 0 || k > 3 || d->len - d->pos < k)
            return -1;
        n = 0;
        while (k--)
            n = n << 8 | d->p[d->pos++];
    }
    if (n > d->len - d->pos)
        return -1;
    val->p = d->p + d->pos;
    val->len = n;
    val->pos = 0;
    d->pos += n;
    return 0;
}

static size_t der_hdr_len(size_t n)
{
    return n < 0x80 ? 2 : n < 0x100 ? 3 : 4;
}

static uint8_t *der_hdr(uint8_t *o, uint8_t tag, size_t n)
{
    *o++ = tag;
    if (n < 0x80) {
        *o++ = (uint8_t)n;
    } else if (n < 0x100) {
        *o++ = 0x81;
        *o++ = (uint8_t)n;
    } else {
        *o++ = 0x82;
        *o++ = (uint8_t)(n >> 8);
        *o++ = (uint8_t)n;
    }
    return o;
}

size_t srv_spnego_hint(uint8_t *out, size_t cap)
{
    /* 60 { OID spnego, a0 { 30 { a0 { 30 { OID ntlmssp } } } } } */
    size_t mech = 2 + sizeof oid_ntlmssp;
    size_t types = 2 + mech, a0 = 2 + types, seq = 2 + a0, ctx = 2 + seq;
    size_t app = 2 + sizeof oid_spnego + ctx;
    if (cap < 2 + app)
        return 0;
    uint8_t *o = out;
    o = der_hdr(o, 0x60, app);
    o = der_hdr(o, 0x06, sizeof oid_spnego);
    memcpy(o, oid_spnego, sizeof oid_spnego);
    o += sizeof oid_spnego;
    o = der_hdr(o, 0xa0, seq);
    o = der_hdr(o, 0x30, a0);
    o = der_hdr(o, 0xa0, types);
    o = der_hdr(o, 0x30, mech);
    o = der_hdr(o, 0x06, sizeof oid_ntlmssp);
    memcpy(o, oid_ntlmssp, sizeof oid_ntlmssp);
    o += sizeof oid_ntlmssp;
    return (size_t)(o - out);
}

/* Finds the NTLMSSP token in a NegTokenInit (0x60) or NegTokenResp (0xa1); *tok NULL when the
 * token is absent or not NTLMSSP. -1 when the DER does not parse. */
static int spnego_unwrap(const uint8_t *in, size_t len, const uint8_t **tok, size_t *tok_len)
{
    struct der top = {in, len, 0}, body, seq, item;
    uint8_t tag;
    *tok = NULL;
    *tok_len = 0;
    if (der_next(&top, &tag, &body))
        return -1;
    if (tag == 0x60) {
        struct der oid, ctx;
        if (der_next(&body, &tag, &oid) || tag != 0x06 || oid.len != sizeof oid_spnego ||
            memcmp(oid.p, oid_spnego, sizeof oid_spnego))
            return -1;
        if (der_next(&body, &tag, &ctx) || tag != 0xa0)
            return -1;
        body = ctx;
    } else if (tag != 0xa1) {
        return -1;
    }
    if (der_next(&body, &tag, &seq) || tag != 0x30)
        return -1;
    while (seq.pos < seq.len) {
        if (der_next(&seq, &tag, &item))
            return -1;
        if (tag == 0xa2) {
            struct der os;
            if (der_next(&item, &tag, &os) || tag != 0x04)
                return -1;
            if (os.len >= 8 && !memcmp(os.p, ntlmssp_sig, 8)) {
                *tok = os.p;
                *tok_len = os.len;
            }
        }
    }
    return 0;
}

/* NegTokenResp ([RFC 4178] 4.2.2): negState, supportedMech NTLMSSP (first reply), token. */
static size_t spnego_wrap(uint8_t *out, size_t cap, unsigned neg_state, int with_mech,
                          const uint8_t *tok, size_t tok_len)
{
    size_t state = 5, mech = with_mech ? 2 + 2 + sizeof oid_ntlmssp : 0;
    size_t os = tok_len ? der_hdr_len(tok_len) + tok_len : 0;
    size_t resp = os ? der_hdr_len(os) + os : 0;
    size_t seq = state + mech + resp;
    size_t a1 = der_hdr_len(seq) + seq;
    if (der_hdr_len(a1) + a1 > cap)
        return 0;
    uint8_t *o = out;
    o = der_hdr(o, 0xa1, a1);
    o = der_hdr(o, 0x30, seq);
    o = der_hdr(o, 0xa0, 3);
    o = der_hdr(o, 0x0a, 1);
    *o++ = (uint8_t)neg_state;
    if (with_mech) {
        o = der_hdr(o, 0xa1, 2 + sizeof oid_ntlmssp);
        o = der_hdr(o, 0x06, sizeof oid_ntlmssp);
        memcpy(o, oid_ntlmssp, sizeof oid_ntlmssp);
        o += sizeof oid_ntlmssp;
    }
    if (tok_len) {
        o = der_hdr(o, 0xa2, os);
        o = der_hdr(o, 0x04, tok_len);
        memcpy(o, tok, tok_len);
        o += tok_len;
    }
    return (size_t)(o - out);
}

/* ---- NTLMSSP ---- */

#define NTLMSSP_NEGOTIATE_UNICODE     0x00000001u
#define NTLMSSP_REQUEST_TARGET        0x00000004u
#define NTLMSSP_NEGOTIATE_SIGN        0x00000010u
#define NTLMSSP_NEGOTIATE_SEAL        0x00000020u
#define NTLMSSP_NEGOTIATE_NTLM        0x00000200u
#define NTLMSSP_NEGOTIATE_ALWAYS_SIGN 0x00008000u
#define NTLMSSP_TARGET_TYPE_SERVER    0x00020000u
#define NTLMSSP_NEGOTIATE_EXTENDED    0x00080000u
#define NTLMSSP_NEGOTIATE_TARGET_INFO 0x00800000u
#define NTLMSSP_NEGOTIATE_VERSION     0x02000000u
#define NTLMSSP_NEGOTIATE_128         0x20000000u
#define NTLMSSP_NEGOTIATE_KEY_EXCH    0x40000000u
#define NTLMSSP_NEGOTIATE_56          0x80000000u

#define SERVER_NAME "SOFTNDK"

int srv_ntowfv2(const char *user, const char *password, const char *domain, uint8_t out[16])
{
    uint8_t buf[1024];
    size_t n = srv_utf8_to_utf16(password, buf, sizeof buf, 0);
    if (n == (size_t)-1)
        return -1;
    uint8_t nt_hash[MD4_DIGEST_SIZE];
    struct md4_ctx md4;
    md4_init(&md4);
    md4_update(&md4, n, buf);
    md4_digest(&md4, sizeof nt_hash, nt_hash);
    size_t u = srv_utf8_to_utf16(user, buf, sizeof buf, 1);
    if (u == (size_t)-1)
        return -1;
    size_t d = srv_utf8_to_utf16(domain, buf + u, sizeof buf - u, 0);
    if (d == (size_t)-1)
        return -1;
    struct hmac_md5_ctx h;
    hmac_md5_set_key(&h, sizeof nt_hash, nt_hash);
    hmac_md5_update(&h, u + d, buf);
    hmac_md5_digest(&h, 16, out);
    return 0;
}

static uint8_t *put_av(uint8_t *o, uint16_t id, const char *s)
{
    wr16(o, id);
    size_t n = srv_utf8_to_utf16(s, o + 4, 64, 0);
    if (n == (size_t)-1)
        n = 0; /* a name too long for the target info is left empty */
    wr16(o + 2, (uint16_t)n);
    return o + 4 + n;
}

/* CHALLENGE_MESSAGE ([MS-NLMP] 2.2.1.2). No MsvAvTimestamp: the client then sends no MIC and
 * SPNEGO needs no mechListMIC (documented in docs/smbdirect.md). */
static size_t ntlm_challenge(struct srv_auth *a, const char *domain, uint8_t *out, size_t cap)
{
    if (cap < 512)
        return 0;
    memset(out, 0, 56);
    memcpy(out, ntlmssp_sig, 8);
    wr32(out + 8, 2);
    uint8_t *o = out + 56;
    size_t tn = srv_utf8_to_utf16(domain, o, 64, 1);
    if (tn == (size_t)-1)
        return 0;
    wr16(out + 12, (uint16_t)tn);
    wr16(out + 14, (uint16_t)tn);
    wr32(out + 16, 56);
    o += tn;
    uint8_t *ti = o;
    o = put_av(o, 2, domain);
    o = put_av(o, 1, SERVER_NAME);
    o = put_av(o, 4, domain);
    o = put_av(o, 3, SERVER_NAME);
    wr32(o, 0); /* MsvAvEOL */
    o += 4;
    size_t til = (size_t)(o - ti);
    wr16(out + 40, (uint16_t)til);
    wr16(out + 42, (uint16_t)til);
    wr32(out + 44, (uint32_t)(ti - out));
    wr32(out + 20, a->flags);
    memcpy(out + 24, a->challenge, 8);
    /* Version: 6.1 build 7600, NTLMSSP_REVISION_W2K3 ([MS-NLMP] 2.2.2.10) */
    out[48] = 6;
    out[49] = 1;
    wr16(out + 50, 7600);
    out[55] = 0x0f;
    return (size_t)(o - out);
}

/* A field of an NTLMSSP message ([MS-NLMP] 2.2.1.3: Len, MaxLen, BufferOffset), bounds
 * checked against the message. */
static int ntlm_field(const uint8_t *m, size_t len, size_t at, const uint8_t **p, size_t *n)
{
    if (at + 8 > len)
        return -1;
    size_t l = rd16(m + at), off = rd32(m + at + 4);
    if (off > len || l > len - off)
        return -1;
    *p = m + off;
    *n = l;
    return 0;
}

static void upper_ascii(char *s)
{
    for (; *s; s++)
        *s = (char)toupper((unsigned char)*s);
}

/* Verifies an AUTHENTICATE_MESSAGE ([MS-NLMP] 2.2.1.3, 3.3.2). */
static uint32_t ntlm_authenticate(struct srv_auth *a, const char *user, const char *password,
                                  const char *domain, const uint8_t *m, size_t len)
{
    const uint8_t *nt, *dom, *usr, *ekey;
    size_t nt_len, dom_len, usr_len, ekey_len;
    if (len < 64 || rd32(m + 8) != 3 || ntlm_field(m, len, 20, &nt, &nt_len) ||
        ntlm_field(m, len, 28, &dom, &dom_len) || ntlm_field(m, len, 36, &usr, &usr_len) ||
        ntlm_field(m, len, 52, &ekey, &ekey_len))
        return STATUS_INVALID_PARAMETER;
    char cuser[128], cdom[128];
    if (srv_utf16_to_utf8(usr, usr_len, cuser, sizeof cuser) ||
        srv_utf16_to_utf8(dom, dom_len, cdom, sizeof cdom))
        return STATUS_INVALID_PARAMETER;
    snprintf(a->user, sizeof a->user, "%s\\%s", cdom, cuser);
    /* NTLMv2 only: NTProofStr (16) and a blob of at least 28 bytes ([MS-NLMP] 2.2.2.7) */
    if (nt_len < 16 + 28 || usr_len == 0 || strcasecmp(cuser, user) != 0)
        return STATUS_LOGON_FAILURE;
    char uuser[128];
    snprintf(uuser, sizeof uuser, "%s", cuser);
    upper_ascii(uuser);
    const char *domains[3] = {cdom, domain ? domain : "", ""};
    for (unsigned i = 0; i < 3; i++) {
        uint8_t owf[16], proof[16];
        if (srv_ntowfv2(uuser, password, domains[i], owf))
            return STATUS_LOGON_FAILURE;
        struct hmac_md5_ctx h;
        hmac_md5_set_key(&h, 16, owf);
        hmac_md5_update(&h, 8, a->challenge);
        hmac_md5_update(&h, nt_len - 16, nt + 16);
        hmac_md5_digest(&h, 16, proof);
        uint8_t diff = 0;
        for (unsigned k = 0; k < 16; k++)
            diff |= (uint8_t)(proof[k] ^ nt[k]);
        if (diff)
            continue;
        uint8_t base[16];
        hmac_md5_set_key(&h, 16, owf);
        hmac_md5_update(&h, 16, proof);
        hmac_md5_digest(&h, 16, base);
        if ((a->flags & NTLMSSP_NEGOTIATE_KEY_EXCH) && ekey_len == 16) {
            struct arcfour_ctx rc4;
            arcfour_set_key(&rc4, 16, base);
            arcfour_crypt(&rc4, 16, a->session_key, ekey);
        } else {
            memcpy(a->session_key, base, 16);
        }
        return STATUS_SUCCESS;
    }
    return STATUS_LOGON_FAILURE;
}

uint32_t srv_auth_step(struct srv_auth *a, const char *user, const char *password,
                       const char *domain, const uint8_t *in, size_t in_len, uint8_t *out,
                       size_t cap, size_t *out_len)
{
    const uint8_t *tok = in;
    size_t tok_len = in_len;
    int spnego = !(in_len >= 8 && !memcmp(in, ntlmssp_sig, 8));
    *out_len = 0;
    if (a->state == SRV_AUTH_DONE || a->state == SRV_AUTH_FAILED)
        return STATUS_INVALID_PARAMETER;
    if (spnego && spnego_unwrap(in, in_len, &tok, &tok_len)) {
        auth_set(a, SRV_AUTH_FAILED, "security buffer is neither SPNEGO nor NTLMSSP");
        return STATUS_INVALID_PARAMETER;
    }
    if (a->state == SRV_AUTH_INITIAL) {
        a->spnego = spnego;
        if (!tok) {
            /* SPNEGO without an NTLMSSP optimistic token: name NTLMSSP and wait for it */
            *out_len = spnego_wrap(out, cap, 1, 1, NULL, 0);
            return *out_len ? STATUS_MORE_PROCESSING_REQUIRED : STATUS_INVALID_PARAMETER;
        }
        if (tok_len < 16 || rd32(tok + 8) != 1) {
            auth_set(a, SRV_AUTH_FAILED, "first NTLMSSP token is not a NEGOTIATE_MESSAGE");
            return STATUS_INVALID_PARAMETER;
        }
        uint32_t cf = rd32(tok + 12);
        if (!(cf & NTLMSSP_NEGOTIATE_UNICODE)) {
            auth_set(a, SRV_AUTH_FAILED, "client does not negotiate Unicode");
            return STATUS_LOGON_FAILURE;
        }
        a->flags =
            NTLMSSP_NEGOTIATE_UNICODE | NTLMSSP_REQUEST_TARGET | NTLMSSP_NEGOTIATE_NTLM |
            NTLMSSP_TARGET_TYPE_SERVER | NTLMSSP_NEGOTIATE_TARGET_INFO |
            (cf & (NTLMSSP_NEGOTIATE_SIGN | NTLMSSP_NEGOTIATE_SEAL | NTLMSSP_NEGOTIATE_ALWAYS_SIGN |
                   NTLMSSP_NEGOTIATE_EXTENDED | NTLMSSP_NEGOTIATE_VERSION | NTLMSSP_NEGOTIATE_128 |
                   NTLMSSP_NEGOTIATE_KEY_EXCH | NTLMSSP_NEGOTIATE_56));
        if (getrandom(a->challenge, sizeof a->challenge, 0) != (ssize_t)sizeof a->challenge)
            return STATUS_INSUFFICIENT_RESOURCES;
        uint8_t chal[512];
        size_t n = ntlm_challenge(a, domain && *domain ? domain : "WORKGROUP", chal, sizeof chal);
        if (n == 0)
            return STATUS_INVALID_PARAMETER;
        if (spnego) {
            *out_len = spnego_wrap(out, cap, 1, 1, chal, n);
        } else if (n <= cap) {
            memcpy(out, chal, n);
            *out_len = n;
        }
        if (*out_len == 0)
            return STATUS_INVALID_PARAMETER;
        auth_set(a, SRV_AUTH_CHALLENGED, "NTLMSSP CHALLENGE sent");
        return STATUS_MORE_PROCESSING_REQUIRED;
    }
    /* CHALLENGED: the AUTHENTICATE_MESSAGE */
    if (!tok) {
        auth_set(a, SRV_AUTH_FAILED, "no NTLMSSP AUTHENTICATE token");
        return STATUS_INVALID_PARAMETER;
    }
    uint32_t st = ntlm_authenticate(a, user, password, domain, tok, tok_len);
    if (st != STATUS_SUCCESS) {
        auth_set(a, SRV_AUTH_FAILED,
                 st == STATUS_LOGON_FAILURE ? "NTLMv2 response does not verify"
                                            : "malformed AUTHENTICATE_MESSAGE");
        if (spnego && st == STATUS_LOGON_FAILURE)
            *out_len = spnego_wrap(out, cap, 2, 0, NULL, 0);
        return st;
    }
    if (spnego)
        *out_len = spnego_wrap(out, cap, 0, 0, NULL, 0);
    auth_set(a, SRV_AUTH_DONE, "NTLMv2 response verified");
    return STATUS_SUCCESS;
}
