/* SMB2 signing and keys ([MS-SMB2] 3.1.4.1, 3.1.4.2), on nettle. */
#include "srv_crypto.h"
#include "srv_wire.h"

#include <nettle/ccm.h>
#include <nettle/cmac.h>
#include <nettle/gcm.h>
#include <nettle/hmac.h>
#include <nettle/sha2.h>

void srv_kdf(const uint8_t key[16], const void *label, size_t label_len, const void *ctx,
             size_t ctx_len, uint8_t out[16])
{
    static const uint8_t counter[4] = {0, 0, 0, 1};
    static const uint8_t zero = 0;
    static const uint8_t bits[4] = {0, 0, 0, 128};
    struct hmac_sha256_ctx h;
    uint8_t full[SHA256_DIGEST_SIZE];
    hmac_sha256_set_key(&h, 16, key);
    hmac_sha256_update(&h, sizeof counter, counter);
    hmac_sha256_update(&h, label_len, label);
    hmac_sha256_update(&h, 1, &zero);
    hmac_sha256_update(&h, ctx_len, ctx);
    hmac_sha256_update(&h, sizeof bits, bits);
    hmac_sha256_digest(&h, sizeof full, full);
    memcpy(out, full, 16);
}

void srv_sign(uint16_t dialect, const uint8_t key[16], const uint8_t *msg, size_t len,
              uint8_t sig[16])
{
    static const uint8_t zero_sig[16];
    if (dialect < 0x0300) {
        struct hmac_sha256_ctx h;
        uint8_t full[SHA256_DIGEST_SIZE];
        hmac_sha256_set_key(&h, 16, key);
        hmac_sha256_update(&h, SMB2_HDR_SIGNATURE, msg);
        hmac_sha256_update(&h, 16, zero_sig);
        hmac_sha256_update(&h, len - SMB2_HDR_LEN, msg + SMB2_HDR_LEN);
        hmac_sha256_digest(&h, sizeof full, full);
        memcpy(sig, full, 16);
        return;
    }
    struct cmac_aes128_ctx c;
    cmac_aes128_set_key(&c, key);
    cmac_aes128_update(&c, SMB2_HDR_SIGNATURE, msg);
    cmac_aes128_update(&c, 16, zero_sig);
    cmac_aes128_update(&c, len - SMB2_HDR_LEN, msg + SMB2_HDR_LEN);
    cmac_aes128_digest(&c, 16, sig);
}

void srv_preauth_update(uint8_t hash[64], const uint8_t *msg, size_t len)
{
    struct sha512_ctx s;
    sha512_init(&s);
    sha512_update(&s, 64, hash);
    sha512_update(&s, len, msg);
    sha512_digest(&s, 64, hash);
}

/* Runs the cipher over msg (in place) and leaves the tag in tag. */
static void transform(uint16_t cipher, const uint8_t key[16], const uint8_t *hdr, uint8_t *msg,
                      size_t len, int encrypt, uint8_t tag[16])
{
    if (cipher == 2) {
        struct gcm_aes128_ctx g;
        gcm_aes128_set_key(&g, key);
        gcm_aes128_set_iv(&g, 12, hdr + 20);
        gcm_aes128_update(&g, 32, hdr + 20);
        if (encrypt)
            gcm_aes128_encrypt(&g, len, msg, msg);
        else
            gcm_aes128_decrypt(&g, len, msg, msg);
        gcm_aes128_digest(&g, 16, tag);
        return;
    }
    struct ccm_aes128_ctx m;
    ccm_aes128_set_key(&m, key);
    ccm_aes128_set_nonce(&m, 11, hdr + 20, 32, len, 16);
    ccm_aes128_update(&m, 32, hdr + 20);
    if (encrypt)
        ccm_aes128_encrypt(&m, len, msg, msg);
    else
        ccm_aes128_decrypt(&m, len, msg, msg);
    ccm_aes128_digest(&m, 16, tag);
}

void srv_encrypt(uint16_t cipher, const uint8_t key[16], uint8_t *hdr, uint8_t *msg, size_t len)
{
    uint8_t tag[16];
    transform(cipher, key, hdr, msg, len, 1, tag);
    memcpy(hdr + 4, tag, 16);
}

int srv_decrypt(uint16_t cipher, const uint8_t key[16], const uint8_t *hdr, uint8_t *msg,
                size_t len)
{
    uint8_t tag[16], diff = 0;
    transform(cipher, key, hdr, msg, len, 0, tag);
    for (unsigned i = 0; i < 16; i++)
        diff |= (uint8_t)(tag[i] ^ hdr[4 + i]);
    return diff ? -1 : 0;
}
