/* SMB2 signing and key derivation ([MS-SMB2] 3.1.4.1, 3.1.4.2, 3.3.5.5.3) and the 3.1.1
 * preauthentication integrity hash ([MS-SMB2] 3.3.5.4, 3.3.5.5), on Debian's nettle. */
#ifndef SMB_SRV_CRYPTO_H
#define SMB_SRV_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* SP800-108 KDF in counter mode, HMAC-SHA256, L = 128 ([MS-SMB2] 3.1.4.2): label and context
 * as given (their terminating NULs included by the caller where the spec has them). */
void srv_kdf(const uint8_t key[16], const void *label, size_t label_len, const void *ctx,
             size_t ctx_len, uint8_t out[16]);

/* The signature of msg[0..len) with its signature field taken as zero: HMAC-SHA256 truncated
 * to 16 bytes for dialects 2.0.2/2.1, AES-128-CMAC for 3.x ([MS-SMB2] 3.1.4.1). */
void srv_sign(uint16_t dialect, const uint8_t key[16], const uint8_t *msg, size_t len,
              uint8_t sig[16]);

/* SMB2 TRANSFORM_HEADER encryption ([MS-SMB2] 2.2.41, 3.1.4.3): cipher 1 AES-128-CCM (11-byte
 * nonce), 2 AES-128-GCM (12-byte nonce). hdr is the 52-byte header with Nonce,
 * OriginalMessageSize, Flags and SessionId filled; its bytes 20..51 are the associated data.
 * srv_encrypt encrypts msg in place and writes the tag into the Signature field; srv_decrypt
 * decrypts in place and returns 0 when the tag verifies, -1 otherwise. */
void srv_encrypt(uint16_t cipher, const uint8_t key[16], uint8_t *hdr, uint8_t *msg, size_t len);
int srv_decrypt(uint16_t cipher, const uint8_t key[16], const uint8_t *hdr, uint8_t *msg,
                size_t len);

/* hash = SHA-512(hash || msg) ([MS-SMB2] 3.3.5.4). */
void srv_preauth_update(uint8_t hash[64], const uint8_t *msg, size_t len);

#endif
