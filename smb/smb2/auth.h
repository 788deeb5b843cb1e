/* Authentication and message integrity for the SMB2 client:
 * - NTLMv2 ([MS-NLMP] 3.3.2) and the NTLMSSP NEGOTIATE / CHALLENGE / AUTHENTICATE messages
 *   ([MS-NLMP] 2.2.1), wrapped in SPNEGO ([MS-SPNG], RFC 4178) for SESSION_SETUP;
 * - the SMB 3.x key derivation ([MS-SMB2] 3.1.4.2, SP800-108 counter mode, HMAC-SHA256),
 *   AES-128-CMAC signing ([MS-SMB2] 3.1.4.1) and the 3.1.1 preauth integrity hash (SHA-512,
 *   [MS-SMB2] 3.2.5.2 / 3.2.5.3). */
#ifndef SMB_SMB2_AUTH_H
#define SMB_SMB2_AUTH_H

#include <stddef.h>
#include <stdint.h>

/* [MS-NLMP] 2.2.2.5 NegotiateFlags the client asks for */
#define NTLMSSP_NEGOTIATE_UNICODE                  0x00000001u
#define NTLMSSP_REQUEST_TARGET                     0x00000004u
#define NTLMSSP_NEGOTIATE_SIGN                     0x00000010u
#define NTLMSSP_NEGOTIATE_NTLM                     0x00000200u
#define NTLMSSP_NEGOTIATE_ALWAYS_SIGN              0x00008000u
#define NTLMSSP_NEGOTIATE_EXTENDED_SESSIONSECURITY 0x00080000u
#define NTLMSSP_NEGOTIATE_TARGET_INFO              0x00800000u
#define NTLMSSP_NEGOTIATE_128                      0x20000000u
#define NTLMSSP_NEGOTIATE_KEY_EXCH                 0x40000000u
#define NTLMSSP_NEGOTIATE_56                       0x80000000u

/* [MS-NLMP] 3.3.2 NTOWFv2(Passwd, User, UserDom): HMAC_MD5(MD4(UNICODE(Passwd)),
 * UNICODE(Uppercase(User) || UserDom)). Uppercase covers ASCII letters. -1 on bad UTF-8. */
int ntlm_ntowfv2(const char *password, const char *user, const char *domain, uint8_t out[16]);

/* [MS-NLMP] 3.3.2 ComputeResponse for NTLMv2. target_info: the AV pairs of the CHALLENGE
 * (the spec's ServerName). nt_resp (NTProofStr || temp) is 16 + 28 + target_info_len + 4
 * bytes; lm_resp 24 bytes. */
struct ntlm_v2 {
    uint8_t nt_proof[16];
    uint8_t session_base_key[16];
    uint8_t lm_resp[24];
    uint8_t *nt_resp; /* malloc'd */
    size_t nt_resp_len;
};
int ntlm_v2_response(const uint8_t response_key[16], const uint8_t server_challenge[8],
                     const uint8_t client_challenge[8], uint64_t time, const uint8_t *target_info,
                     size_t target_info_len, struct ntlm_v2 *out);
void ntlm_v2_free(struct ntlm_v2 *v);

/* RC4(key, in) for EncryptedRandomSessionKey ([MS-NLMP] 3.1.5.1.2, KEY_EXCH). */
void ntlm_rc4(const uint8_t key[16], const uint8_t in[16], uint8_t out[16]);

/* NTLMSSP messages. */
size_t ntlm_negotiate_msg(uint8_t *out, size_t cap, uint32_t flags);
struct ntlm_challenge {
    uint32_t flags;
    uint8_t server_challenge[8];
    const uint8_t *target_info;
    size_t target_info_len;
    int has_timestamp; /* MsvAvTimestamp present: LmChallengeResponse is Z(24) */
    uint64_t timestamp;
};
int ntlm_parse_challenge(const uint8_t *msg, size_t len, struct ntlm_challenge *c, char *err,
                         size_t errlen);
/* AUTHENTICATE_MESSAGE ([MS-NLMP] 2.2.1.3) into a malloc'd buffer; NULL on failure. */
uint8_t *ntlm_authenticate_msg(uint32_t flags, const uint8_t *lm, size_t lm_len, const uint8_t *nt,
                               size_t nt_len, const char *domain, const char *user,
                               const char *workstation, const uint8_t *enc_session_key,
                               size_t *out_len);

/* SPNEGO: NegTokenInit naming NTLMSSP with the NEGOTIATE as mechToken; NegTokenResp with the
 * AUTHENTICATE as responseToken. Return the length written, 0 when cap is too small. */
size_t spnego_init(uint8_t *out, size_t cap, const uint8_t *tok, size_t tok_len);
size_t spnego_resp(uint8_t *out, size_t cap, const uint8_t *tok, size_t tok_len);
/* The responseToken of a server's NegTokenResp (or the blob itself when it is bare NTLMSSP);
 * *neg_state the negState (-1 when absent). -EPROTO with a reason when malformed or rejected. */
int spnego_parse_resp(const uint8_t *blob, size_t len, const uint8_t **tok, size_t *tok_len,
                      int *neg_state, char *err, size_t errlen);

/* [MS-SMB2] 3.1.4.2 KDF: HMAC-SHA256 in counter mode (SP800-108 5.1), r 32, L 128:
 * HMAC(Ki, i=1 || Label || 0x00 || Context || L). label_len includes Label's NUL. */
void smb2_kdf(const uint8_t ki[16], const uint8_t *label, size_t label_len, const uint8_t *ctx,
              size_t ctx_len, uint8_t out[16]);
/* AES-128-CMAC (RFC 4493) of [data, data+len) */
void smb2_aes_cmac(const uint8_t key[16], const uint8_t *data, size_t len, uint8_t mac[16]);
/* [MS-SMB2] 3.1.4.1: AES-128-CMAC of the message with its Signature field zeroed. */
void smb2_sign_cmac(const uint8_t key[16], const uint8_t *msg, size_t len, uint8_t sig[16]);
/* Signs msg in place: sets SMB2_FLAGS_SIGNED and writes the Signature. */
void smb2_sign_message(const uint8_t key[16], uint8_t *msg, size_t len);
/* 1 when the Signature of msg is the CMAC of msg with the signing key. */
int smb2_verify_message(const uint8_t key[16], const uint8_t *msg, size_t len);
/* The same signature computed over the message behind its 4-byte Direct TCP length prefix
 * (big-endian): what Linux ksmbd 6.1 signs for an SMB2 READ response whose data went by RDMA
 * (it signs the iovec before the response, which there is the length prefix). */
int smb2_verify_message_with_length_prefix(const uint8_t key[16], const uint8_t *msg, size_t len);
/* [MS-SMB2] 3.2.5.2: H = SHA-512(H || msg) */
void smb2_preauth_update(uint8_t hash[64], const uint8_t *msg, size_t len);

#endif
