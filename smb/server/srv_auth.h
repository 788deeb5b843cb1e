/* The server side of SESSION_SETUP authentication: SPNEGO ([RFC 4178], [MS-SPNG]) carrying
 * NTLMSSP ([MS-NLMP]), or raw NTLMSSP, verifying an NTLMv2 response ([MS-NLMP] 3.3.2) against
 * one configured account. The exchange is a state machine: INITIAL => CHALLENGED (a CHALLENGE
 * sent) => DONE (verified, session key known) or FAILED. */
#ifndef SMB_SRV_AUTH_H
#define SMB_SRV_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum srv_auth_state {
    SRV_AUTH_INITIAL,
    SRV_AUTH_CHALLENGED,
    SRV_AUTH_DONE,
    SRV_AUTH_FAILED,
    SRV_AUTH_STATE_COUNT
};

struct srv_auth {
    enum srv_auth_state state;
    int spnego; /* the client wraps its tokens in SPNEGO: answer the same way */
    uint32_t flags;
    uint8_t challenge[8];
    uint8_t session_key[16]; /* ExportedSessionKey once DONE */
    char user[260];          /* who authenticated (or tried): "DOMAIN\user" */
    FILE *log;
};

/* The SPNEGO NegTokenInit2 a NEGOTIATE response carries ([MS-SPNG] 3.2.5.2): NTLMSSP the only
 * mechanism. Its length (fits in 64 bytes). */
size_t srv_spnego_hint(uint8_t *out, size_t cap);

/* One step: in is the SESSION_SETUP security buffer. Writes the reply token into out and
 * returns STATUS_MORE_PROCESSING_REQUIRED (a challenge sent), STATUS_SUCCESS (verified),
 * STATUS_LOGON_FAILURE (wrong user or password) or STATUS_INVALID_PARAMETER (a token that does
 * not parse). */
uint32_t srv_auth_step(struct srv_auth *a, const char *user, const char *password,
                       const char *domain, const uint8_t *in, size_t in_len, uint8_t *out,
                       size_t cap, size_t *out_len);

/* NTOWFv2 ([MS-NLMP] 3.3.2): HMAC-MD5(MD4(UTF-16LE(password)), UTF-16LE(UPPER(user) domain)).
 * 0, or -1 when a string does not encode. */
int srv_ntowfv2(const char *user, const char *password, const char *domain, uint8_t out[16]);

#endif
