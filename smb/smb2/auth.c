/* NTLMv2, NTLMSSP, SPNEGO, the SMB 3.x KDF, signing and the preauth hash (see auth.h). */
#include "auth.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/arcfour.h>
#include <nettle/cmac.h>
#include <nettle/hmac.h>
#include <nettle/md4.h>
#include <nettle/sha2.h>

#include "util.h"
#include "wire.h"

/* UTF-8 to UTF-16LE bytes, malloc'd; upper: ASCII letters uppercased. NULL on bad input. */
static uint8_t *utf16le(const char *s, int upper, size_t *bytes)
{
    size_t n = strlen(s) + 1;
    uint16_t *u = calloc(n * 2, sizeof(*u));
    uint8_t *out = malloc(n * 4 + 1);
    long units = u && out ? smb2_utf8_to_utf16(s, u, n * 2) : -1;
    if (units < 0) {
        free(u);
        free(out);
        return NULL;
    }
    for (long i = 0; i < units; i++) {
        uint16_t c = u[i];
        if (upper && c < 0x80)
            c = (uint16_t)toupper(c);
        smb2_put16(out + 2 * i, c);
    }
    free(u);
    *bytes = (size_t)units * 2;
    return out;
}

int ntlm_ntowfv2(const char *password, const char *user, const char *domain, uint8_t out[16])
{
    size_t pw_len, user_len, dom_len;
    uint8_t *pw = utf16le(password, 0, &pw_len);
    uint8_t *u = utf16le(user, 1, &user_len);
    uint8_t *d = utf16le(domain ? domain : "", 0, &dom_len);
    int rc = -1;
    if (pw && u && d) {
        uint8_t nt_hash[MD4_DIGEST_SIZE];
        struct md4_ctx md4;
        md4_init(&md4);
        md4_update(&md4, pw_len, pw);
        md4_digest(&md4, sizeof(nt_hash), nt_hash);
        struct hmac_md5_ctx h;
        hmac_md5_set_key(&h, sizeof(nt_hash), nt_hash);
        hmac_md5_update(&h, user_len, u);
        hmac_md5_update(&h, dom_len, d);
        hmac_md5_digest(&h, 16, out);
        rc = 0;
    }
    free(pw);
    free(u);
    free(d);
    return rc;
}

int ntlm_v2_response(const uint8_t response_key[16], const uint8_t server_challenge[8],
                     const uint8_t client_challenge[8], uint64_t time, const uint8_t *target_info,
                     size_t target_info_len, struct ntlm_v2 *out)
{
    memset(out, 0, sizeof(*out));
    /* temp = Responserversion || HiResponserversion || Z(6) || Time || ClientChallenge || Z(4)
     *        || ServerName || Z(4) */
    size_t temp_len = 28 + target_info_len + 4;
    out->nt_resp_len = 16 + temp_len;
    out->nt_resp = calloc(1, out->nt_resp_len);
    if (!out->nt_resp)
        return -ENOMEM;
    uint8_t *temp = out->nt_resp + 16;
    temp[0] = 1;
    temp[1] = 1;
    smb2_put64(temp + 8, time);
    memcpy(temp + 16, client_challenge, 8);
    if (target_info_len)
        memcpy(temp + 28, target_info, target_info_len);
    struct hmac_md5_ctx h;
    hmac_md5_set_key(&h, 16, response_key);
    hmac_md5_update(&h, 8, server_challenge);
    hmac_md5_update(&h, temp_len, temp);
    hmac_md5_digest(&h, 16, out->nt_proof);
    memcpy(out->nt_resp, out->nt_proof, 16);
    /* LMv2: HMAC_MD5(ResponseKeyLM, ServerChallenge || ClientChallenge) || ClientChallenge */
    hmac_md5_set_key(&h, 16, response_key);
    hmac_md5_update(&h, 8, server_challenge);
    hmac_md5_update(&h, 8, client_challenge);
    hmac_md5_digest(&h, 16, out->lm_resp);
    memcpy(out->lm_resp + 16, client_challenge, 8);
    /* SessionBaseKey = HMAC_MD5(ResponseKeyNT, NTProofStr) */
    hmac_md5_set_key(&h, 16, response_key);
    hmac_md5_update(&h, 16, out->nt_proof);
    hmac_md5_digest(&h, 16, out->session_base_key);
    return 0;
}

void ntlm_v2_free(struct ntlm_v2 *v)
{
    explicit_bzero(v->session_base_key, sizeof(v->session_base_key));
    free(v->nt_resp);
    v->nt_resp = NULL;
}

void ntlm_rc4(const uint8_t key[16], const uint8_t in[16], uint8_t out[16])
{
    struct arcfour_ctx rc4;
    arcfour_set_key(&rc4, 16, key);
    arcfour_crypt(&rc4, 16, out, in);
}

static const uint8_t ntlmssp_sig[8] = {'N', 'T', 'L', 'M', 'S', 'S', 'P', 0};

size_t ntlm_negotiate_msg(uint8_t *out, size_t cap, uint32_t flags)
{
    /* [MS-NLMP] 2.2.1.1: no domain, no workstation, no version */
    if (cap < 32)
        return 0;
    memset(out, 0, 32);
    memcpy(out, ntlmssp_sig, 8);
    smb2_put32(out + 8, 1);
    smb2_put32(out + 12, flags);
    smb2_put32(out + 20, 32); /* empty fields point past the fixed part */
    smb2_put32(out + 28, 32);
    return 32;
}

int ntlm_parse_challenge(const uint8_t *msg, size_t len, struct ntlm_challenge *c, char *err,
                         size_t errlen)
{
    /* [MS-NLMP] 2.2.1.2 */
    if (len < 48)
        return smb2_err(err, errlen, "NTLMSSP CHALLENGE of %zu bytes is shorter than 48", len);
    if (memcmp(msg, ntlmssp_sig, 8) != 0 || smb2_get32(msg + 8) != 2)
        return smb2_err(err, errlen, "not an NTLMSSP CHALLENGE message (type %u)",
                        smb2_get32(msg + 8));
    memset(c, 0, sizeof(*c));
    c->flags = smb2_get32(msg + 20);
    memcpy(c->server_challenge, msg + 24, 8);
    uint16_t ti_len = smb2_get16(msg + 40);
    uint32_t ti_off = smb2_get32(msg + 44);
    if (ti_len && (ti_off > len || ti_len > len - ti_off))
        return smb2_err(err, errlen, "NTLMSSP CHALLENGE: TargetInfo [%u, +%u) outside %zu bytes",
                        ti_off, ti_len, len);
    c->target_info = ti_len ? msg + ti_off : NULL;
    c->target_info_len = ti_len;
    /* [MS-NLMP] 2.2.2.1 AV_PAIRs up to MsvAvEOL */
    size_t o = 0;
    int eol = 0;
    while (o + 4 <= ti_len) {
        uint16_t id = smb2_get16(c->target_info + o), n = smb2_get16(c->target_info + o + 2);
        if (n > ti_len - o - 4)
            return smb2_err(err, errlen,
                            "NTLMSSP CHALLENGE: AV pair %u of %u bytes passes "
                            "TargetInfo",
                            id, n);
        if (id == 0) {
            eol = 1;
            break;
        }
        if (id == 7 && n == 8) {
            c->has_timestamp = 1;
            c->timestamp = smb2_get64(c->target_info + o + 4);
        }
        o += 4 + (size_t)n;
    }
    if (ti_len && !eol)
        return smb2_err(err, errlen, "NTLMSSP CHALLENGE: TargetInfo without MsvAvEOL");
    return 0;
}

uint8_t *ntlm_authenticate_msg(uint32_t flags, const uint8_t *lm, size_t lm_len, const uint8_t *nt,
                               size_t nt_len, const char *domain, const char *user,
                               const char *workstation, const uint8_t *enc_session_key,
                               size_t *out_len)
{
    size_t dl, ul, wl;
    uint8_t *d = utf16le(domain ? domain : "", 0, &dl);
    uint8_t *u = utf16le(user, 0, &ul);
    uint8_t *w = utf16le(workstation ? workstation : "", 0, &wl);
    size_t kl = enc_session_key ? 16 : 0;
    const size_t fixed = 64; /* no Version, no MIC */
    size_t total = fixed + lm_len + nt_len + dl + ul + wl + kl;
    uint8_t *m = NULL;
    if (d && u && w && lm_len <= 0xFFFF && nt_len <= 0xFFFF && dl <= 0xFFFF && ul <= 0xFFFF &&
        wl <= 0xFFFF)
        m = calloc(1, total);
    if (m) {
        memcpy(m, ntlmssp_sig, 8);
        smb2_put32(m + 8, 3);
        size_t off = fixed;
        const uint8_t *parts[6] = {lm, nt, d, u, w, enc_session_key};
        size_t lens[6] = {lm_len, nt_len, dl, ul, wl, kl};
        /* field order in the fixed part: Lm, Nt, Domain, User, Workstation, SessionKey */
        for (int i = 0; i < 6; i++) {
            uint8_t *f = m + 12 + 8 * i;
            smb2_put16(f, (uint16_t)lens[i]);
            smb2_put16(f + 2, (uint16_t)lens[i]);
            smb2_put32(f + 4, (uint32_t)off);
            if (lens[i])
                memcpy(m + off, parts[i], lens[i]);
            off += lens[i];
        }
        smb2_put32(m + 60, flags);
        *out_len = total;
    }
    free(d);
    free(u);
    free(w);
    return m;
}

/* --- SPNEGO (DER) --- */

static size_t der_len_size(size_t n)
{
    return n < 0x80 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 4;
}

/* Writes tag and length at p; returns the header size. */
static size_t der_hdr(uint8_t *p, uint8_t tag, size_t n)
{
    p[0] = tag;
    if (n < 0x80) {
        p[1] = (uint8_t)n;
        return 2;
    }
    if (n < 0x100) {
        p[1] = 0x81;
        p[2] = (uint8_t)n;
        return 3;
    }
    if (n < 0x10000) {
        p[1] = 0x82;
        p[2] = (uint8_t)(n >> 8);
        p[3] = (uint8_t)n;
        return 4;
    }
    p[1] = 0x83;
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    return 5;
}

#define DER_TLV(n) (1 + der_len_size(n) + (n))

static const uint8_t oid_spnego[] = {0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02};
static const uint8_t oid_ntlmssp[] = {0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04,
                                      0x01, 0x82, 0x37, 0x02, 0x02, 0x0a};

size_t spnego_init(uint8_t *out, size_t cap, const uint8_t *tok, size_t tok_len)
{
    /* [0] NegTokenInit ::= SEQUENCE { mechTypes [0] SEQUENCE OF OID, mechToken [2] OCTET
     * STRING } inside the GSS-API [APPLICATION 0] framing with the SPNEGO OID (RFC 4178 4.2.1) */
    size_t mechlist = DER_TLV(sizeof(oid_ntlmssp));
    size_t a0 = DER_TLV(mechlist);
    size_t octet = DER_TLV(tok_len);
    size_t a2 = DER_TLV(octet);
    size_t seq = DER_TLV(a0 + a2);
    size_t neg = DER_TLV(seq);
    size_t app_body = sizeof(oid_spnego) + neg;
    size_t total = DER_TLV(app_body);
    if (cap < total + 8)
        return 0;
    uint8_t *p = out;
    p += der_hdr(p, 0x60, app_body);
    memcpy(p, oid_spnego, sizeof(oid_spnego));
    p += sizeof(oid_spnego);
    p += der_hdr(p, 0xa0, seq);
    p += der_hdr(p, 0x30, a0 + a2);
    p += der_hdr(p, 0xa0, mechlist);
    p += der_hdr(p, 0x30, sizeof(oid_ntlmssp));
    memcpy(p, oid_ntlmssp, sizeof(oid_ntlmssp));
    p += sizeof(oid_ntlmssp);
    p += der_hdr(p, 0xa2, octet);
    p += der_hdr(p, 0x04, tok_len);
    memcpy(p, tok, tok_len);
    p += tok_len;
    return (size_t)(p - out);
}

size_t spnego_resp(uint8_t *out, size_t cap, const uint8_t *tok, size_t tok_len)
{
    /* [1] NegTokenResp ::= SEQUENCE { responseToken [2] OCTET STRING } */
    size_t octet = DER_TLV(tok_len);
    size_t a2 = DER_TLV(octet);
    size_t seq = DER_TLV(a2);
    size_t total = DER_TLV(seq);
    if (cap < total)
        return 0;
    uint8_t *p = out;
    p += der_hdr(p, 0xa1, seq);
    p += der_hdr(p, 0x30, a2);
    p += der_hdr(p, 0xa2, octet);
    p += der_hdr(p, 0x04, tok_len);
    memcpy(p, tok, tok_len);
    p += tok_len;
    return (size_t)(p - out);
}

/* One DER TLV at [*p, end): its tag, and its value [*v, *v + *n). Advances *p past it. */
static int der_next(const uint8_t **p, const uint8_t *end, uint8_t *tag, const uint8_t **v,
                    size_t *n)
{
    const uint8_t *q = *p;
    if (end - q < 2)
        return -1;
    *tag = q[0];
    size_t len = q[1];
    q += 2;
    if (len & 0x80) {
        size_t k = len & 0x7f;
        if (k == 0 || k > 3 || (size_t)(end - q) < k)
            return -1;
        len = 0;
        for (size_t i = 0; i < k; i++)
            len = (len << 8) | *q++;
    }
    if ((size_t)(end - q) < len)
        return -1;
    *v = q;
    *n = len;
    *p = q + len;
    return 0;
}

int spnego_parse_resp(const uint8_t *blob, size_t len, const uint8_t **tok, size_t *tok_len,
                      int *neg_state, char *err, size_t errlen)
{
    *tok = NULL;
    *tok_len = 0;
    *neg_state = -1;
    if (!blob || len == 0)
        return smb2_err(err, errlen, "SPNEGO: empty security blob");
    if (len >= 8 && memcmp(blob, ntlmssp_sig, 8) == 0) {
        *tok = blob;
        *tok_len = len;
        return 0;
    }
    const uint8_t *p = blob, *end = blob + len, *v, *sv;
    size_t n, sn;
    uint8_t tag;
    if (der_next(&p, end, &tag, &v, &n) || tag != 0xa1)
        return smb2_err(err, errlen, "SPNEGO: not a NegTokenResp (tag 0x%02x)", len ? blob[0] : 0);
    p = v;
    end = v + n;
    if (der_next(&p, end, &tag, &sv, &sn) || tag != 0x30)
        return smb2_err(err, errlen, "SPNEGO: NegTokenResp without its SEQUENCE");
    p = sv;
    end = sv + sn;
    while (p < end) {
        if (der_next(&p, end, &tag, &v, &n))
            return smb2_err(err, errlen, "SPNEGO: truncated NegTokenResp element");
        const uint8_t *ip = v, *iv;
        size_t in;
        uint8_t itag;
        if (tag == 0xa0) {
            if (der_next(&ip, v + n, &itag, &iv, &in) || itag != 0x0a || in != 1)
                return smb2_err(err, errlen, "SPNEGO: malformed negState");
            *neg_state = iv[0];
        } else if (tag == 0xa2) {
            if (der_next(&ip, v + n, &itag, &iv, &in) || itag != 0x04)
                return smb2_err(err, errlen, "SPNEGO: malformed responseToken");
            *tok = iv;
            *tok_len = in;
        }
    }
    if (*neg_state == 2)
        return smb2_err(err, errlen,
                        "SPNEGO: the server rejected the authentication (negState "
                        "reject)");
    return 0;
}

void smb2_kdf(const uint8_t ki[16], const uint8_t *label, size_t label_len, const uint8_t *ctx,
              size_t ctx_len, uint8_t out[16])
{
    static const uint8_t one[4] = {0, 0, 0, 1}, zero = 0, l128[4] = {0, 0, 0, 128};
    uint8_t full[SHA256_DIGEST_SIZE];
    struct hmac_sha256_ctx h;
    hmac_sha256_set_key(&h, 16, ki);
    hmac_sha256_update(&h, 4, one);
    hmac_sha256_update(&h, label_len, label);
    hmac_sha256_update(&h, 1, &zero);
    hmac_sha256_update(&h, ctx_len, ctx);
    hmac_sha256_update(&h, 4, l128);
    hmac_sha256_digest(&h, sizeof(full), full);
    memcpy(out, full, 16);
}

void smb2_aes_cmac(const uint8_t key[16], const uint8_t *data, size_t len, uint8_t mac[16])
{
    struct cmac_aes128_ctx c;
    cmac_aes128_set_key(&c, key);
    cmac_aes128_update(&c, len, data);
    cmac_aes128_digest(&c, 16, mac);
}

void smb2_sign_cmac(const uint8_t key[16], const uint8_t *msg, size_t len, uint8_t sig[16])
{
    static const uint8_t zero_sig[16];
    struct cmac_aes128_ctx c;
    cmac_aes128_set_key(&c, key);
    cmac_aes128_update(&c, 48, msg);
    cmac_aes128_update(&c, 16, zero_sig);
    cmac_aes128_update(&c, len - 64, msg + 64);
    cmac_aes128_digest(&c, 16, sig);
}

void smb2_sign_message(const uint8_t key[16], uint8_t *msg, size_t len)
{
    smb2_put32(msg + 16, smb2_get32(msg + 16) | SMB2_FLAGS_SIGNED);
    uint8_t sig[16];
    smb2_sign_cmac(key, msg, len, sig);
    memcpy(msg + 48, sig, 16);
}

int smb2_verify_message(const uint8_t key[16], const uint8_t *msg, size_t len)
{
    uint8_t sig[16];
    smb2_sign_cmac(key, msg, len, sig);
    uint8_t diff = 0;
    for (int i = 0; i < 16; i++)
        diff |= (uint8_t)(sig[i] ^ msg[48 + i]);
    return diff == 0;
}

int smb2_verify_message_with_length_prefix(const uint8_t key[16], const uint8_t *msg, size_t len)
{
    static const uint8_t zero_sig[16];
    uint8_t prefix[4] = {0, (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    uint8_t sig[16];
    struct cmac_aes128_ctx c;
    cmac_aes128_set_key(&c, key);
    cmac_aes128_update(&c, 4, prefix);
    cmac_aes128_update(&c, 48, msg);
    cmac_aes128_update(&c, 16, zero_sig);
    cmac_aes128_update(&c, len - 64, msg + 64);
    cmac_aes128_digest(&c, 16, sig);
    uint8_t diff = 0;
    for (int i = 0; i < 16; i++)
        diff |= (uint8_t)(sig[i] ^ msg[48 + i]);
    return diff == 0;
}

void smb2_preauth_update(uint8_t hash[64], const uint8_t *msg, size_t len)
{
    struct sha512_ctx s;
    sha512_init(&s);
    sha512_update(&s, 64, hash);
    sha512_update(&s, len, msg);
    sha512_digest(&s, 64, hash);
}
