/* Unit tests of the SMB2 client's pieces: NTLMv2 against [MS-NLMP] 4.2.4, the SMB 3.x KDF,
 * AES-128-CMAC (RFC 4493) and the preauth hash, the READ / WRITE channel encoding, and the
 * codec's rejection of malformed responses and NTLMSSP / SPNEGO tokens. */
#include <errno.h>
#include <nettle/cmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "harness.h"
#include "smb/smb2_client.h"
#include "wire.h"

static void unhex(const char *h, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        CHECK(sscanf(h + 2 * i, "%2x", &v) == 1);
        out[i] = (uint8_t)v;
    }
}

/* [MS-NLMP] 4.2.1 / 4.2.4: the inputs the spec states */
static const uint8_t server_challenge[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
static const uint8_t client_challenge[8] = {0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa};
/* AV pairs: MsvAvNbDomainName "Domain", MsvAvNbComputerName "Server", MsvAvEOL */
static const uint8_t av_pairs[] = {
    0x02, 0x00, 0x0c, 0x00, 'D', 0, 'o', 0, 'm', 0, 'a', 0, 'i', 0, 'n',  0,    0x01, 0x00,
    0x0c, 0x00, 'S',  0,    'e', 0, 'r', 0, 'v', 0, 'e', 0, 'r', 0, 0x00, 0x00, 0x00, 0x00};

TEST(ntlmv2_spec_vectors)
{
    uint8_t key[16], want[16];
    CHECK(ntlm_ntowfv2("Password", "User", "Domain", key) == 0);
    unhex("0c868a403bfd7a93a3001ef22ef02e3f", want, 16); /* 4.2.4.1.1 NTOWFv2 */
    CHECK_MEM(key, want, 16);
    /* Uppercase(User) only: the same key from a lowercase user name */
    uint8_t key2[16];
    CHECK(ntlm_ntowfv2("Password", "user", "Domain", key2) == 0);
    CHECK_MEM(key2, want, 16);
    struct ntlm_v2 v;
    CHECK(ntlm_v2_response(key, server_challenge, client_challenge, 0, av_pairs, sizeof(av_pairs),
                           &v) == 0);
    unhex("68cd0ab851e51c96aabc927bebef6a1c", want, 16); /* 4.2.4.2.2 NTProofStr */
    CHECK_MEM(v.nt_proof, want, 16);
    CHECK_MEM(v.nt_resp, want, 16);
    unhex("8de40ccadbc14a82f15cb0ad0de95ca3", want, 16); /* 4.2.4.1.2 SessionBaseKey */
    CHECK_MEM(v.session_base_key, want, 16);
    uint8_t lm[24];
    unhex("86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa", lm, 24); /* 4.2.4.2.1 LMv2 */
    CHECK_MEM(v.lm_resp, lm, 24);
    /* temp: 0x01 0x01 Z(6) Time Client Z(4) AV pairs Z(4) */
    CHECK_EQ_U64(v.nt_resp_len, 16 + 28 + sizeof(av_pairs) + 4);
    CHECK_EQ_U64(v.nt_resp[16], 1);
    CHECK_EQ_U64(v.nt_resp[17], 1);
    CHECK_MEM(v.nt_resp + 16 + 16, client_challenge, 8);
    CHECK_MEM(v.nt_resp + 16 + 28, av_pairs, sizeof(av_pairs));
    /* 4.2.4.2.3 EncryptedSessionKey: RC4(KeyExchangeKey, RandomSessionKey 0x55 x 16) */
    uint8_t random_key[16], enc[16];
    memset(random_key, 0x55, 16);
    ntlm_rc4(v.session_base_key, random_key, enc);
    unhex("c5dad2544fc9799094ce1ce90bc9d03e", want, 16);
    CHECK_MEM(enc, want, 16);
    ntlm_v2_free(&v);
}

TEST(kdf_cmac_preauth)
{
    /* [MS-SMB2] 3.1.4.2 with Ki the SessionBaseKey above; the expected keys were computed
     * from the formula with Python's hmac/hashlib, an implementation independent of nettle */
    uint8_t ki[16], out[16], want[16];
    unhex("8de40ccadbc14a82f15cb0ad0de95ca3", ki, 16);
    static const uint8_t l30[] = "SMB2AESCMAC", c30[] = "SmbSign", l311[] = "SMBSigningKey";
    smb2_kdf(ki, l30, sizeof(l30), c30, sizeof(c30), out);
    unhex("da4ac0beee007ec22a4890178c927c14", want, 16);
    CHECK_MEM(out, want, 16);
    uint8_t ctx[64];
    for (int i = 0; i < 64; i++)
        ctx[i] = (uint8_t)i;
    smb2_kdf(ki, l311, sizeof(l311), ctx, 64, out);
    unhex("159f246396fbf52b097a6d9363088f08", want, 16);
    CHECK_MEM(out, want, 16);
    /* RFC 4493 4: AES-128-CMAC, Examples 1 to 4 (0, 16, 40 and 64 bytes) */
    uint8_t key[16], msg[64], mac[16];
    unhex("2b7e151628aed2a6abf7158809cf4f3c", key, 16);
    unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
          "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
          msg, 64);
    static const struct {
        size_t len;
        const char *mac;
    } rfc4493[] = {{0, "bb1d6929e95937287fa37d129b756746"},
                   {16, "070a16b46b4d4144f79bdd9dd04a287c"},
                   {40, "dfa66747de9ae63030ca32611497c827"},
                   {64, "51f0bebf7e3b9d92fc49741779363cfe"}};
    for (size_t i = 0; i < 4; i++) {
        smb2_aes_cmac(key, msg, rfc4493[i].len, mac);
        unhex(rfc4493[i].mac, want, 16);
        CHECK_MEM(mac, want, 16);
    }
    /* [MS-SMB2] 3.1.4.1: the signature is the CMAC of the message with its Signature field
     * zeroed, whatever the field held */
    uint8_t m[100], z[100], sig[16];
    for (int i = 0; i < 100; i++)
        m[i] = (uint8_t)(i * 7 + 3);
    memcpy(z, m, sizeof(z));
    memset(z + 48, 0, 16);
    smb2_sign_cmac(key, m, sizeof(m), sig);
    smb2_aes_cmac(key, z, sizeof(z), mac);
    CHECK_MEM(sig, mac, 16);
    smb2_sign_message(key, m, sizeof(m));
    CHECK(smb2_get32(m + 16) & SMB2_FLAGS_SIGNED);
    CHECK(smb2_verify_message(key, m, sizeof(m)));
    m[70] ^= 1;
    CHECK(!smb2_verify_message(key, m, sizeof(m)));
    /* [MS-SMB2] 3.2.5.2: H = SHA-512(H || msg) from 64 zero bytes (Python's hashlib) */
    uint8_t h[64] = {0}, wanth[64];
    smb2_preauth_update(h, (const uint8_t *)"abc", 3);
    smb2_preauth_update(h, (const uint8_t *)"defg", 4);
    unhex("35511ce0b2ef9e80a52160d6ce8cb95bae063598ec813d66326726784a30ffaa"
          "017247fe20a6b0ec78b4faf004e5ab4ac6b2ffc5095a6276689ed0eb0186939f",
          wanth, 64);
    CHECK_MEM(h, wanth, 64);
}

/* [MS-SMB2] 2.2.19 / 2.2.21 with 2.2.3.1 descriptors */
TEST(rdma_channel_encoding)
{
    uint8_t fid[16], msg[256];
    for (int i = 0; i < 16; i++)
        fid[i] = (uint8_t)(0xF0 + i);
    smb_buffer_desc d[2] = {{0x1122334455667788ull, 0xA1B2C3D4u, 0x10000},
                            {0x0102030405060708ull, 0x0badf00du, 0x2345}};
    size_t len = smb2_build_read(msg, sizeof(msg), fid, 0x123456789ull, 0x12345,
                                 SMB2_CHANNEL_RDMA_V1_INVALIDATE, d, 2);
    CHECK_EQ_U64(len, 64 + 48 + 32);
    const uint8_t *b = msg + 64;
    CHECK_EQ_U64(smb2_get16(b), 49);
    CHECK_EQ_U64(smb2_get32(b + 4), 0x12345);        /* Length */
    CHECK_EQ_U64(smb2_get64(b + 8), 0x123456789ull); /* Offset */
    CHECK_MEM(b + 16, fid, 16);                      /* FileId */
    CHECK_EQ_U64(smb2_get32(b + 36), 2);             /* Channel: RDMA_V1_INVALIDATE */
    CHECK_EQ_U64(smb2_get32(b + 40), 0);             /* RemainingBytes */
    CHECK_EQ_U64(smb2_get16(b + 44), 112);           /* ReadChannelInfoOffset */
    CHECK_EQ_U64(smb2_get16(b + 46), 32);            /* ReadChannelInfoLength */
    static const uint8_t want_desc[32] = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
                                          0xD4, 0xC3, 0xB2, 0xA1, 0x00, 0x00, 0x01, 0x00,
                                          0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
                                          0x0d, 0xf0, 0xad, 0x0b, 0x45, 0x23, 0x00, 0x00};
    CHECK_MEM(msg + 112, want_desc, 32);
    /* inline READ: no channel info, one Buffer byte */
    len = smb2_build_read(msg, sizeof(msg), fid, 0, 4096, SMB2_CHANNEL_NONE, NULL, 0);
    CHECK_EQ_U64(len, 64 + 49);
    CHECK_EQ_U64(smb2_get32(b + 36), 0);
    CHECK_EQ_U64(smb2_get16(b + 44), 0);
    CHECK_EQ_U64(smb2_get16(b + 46), 0);
    /* WRITE over RDMA: Length 0, RemainingBytes the data length, channel info at 112 */
    len = smb2_build_write(msg, sizeof(msg), fid, 4096, NULL, 0x10000, SMB2_CHANNEL_RDMA_V1, d, 1);
    CHECK_EQ_U64(len, 64 + 48 + 16);
    CHECK_EQ_U64(smb2_get16(b), 49);
    CHECK_EQ_U64(smb2_get16(b + 2), 0); /* DataOffset: no data in the message (as ksmbd requires) */
    CHECK_EQ_U64(smb2_get32(b + 4), 0);        /* Length */
    CHECK_EQ_U64(smb2_get64(b + 8), 4096);     /* Offset */
    CHECK_EQ_U64(smb2_get32(b + 32), 1);       /* Channel: RDMA_V1 */
    CHECK_EQ_U64(smb2_get32(b + 36), 0x10000); /* RemainingBytes */
    CHECK_EQ_U64(smb2_get16(b + 40), 112);     /* WriteChannelInfoOffset */
    CHECK_EQ_U64(smb2_get16(b + 42), 16);      /* WriteChannelInfoLength */
    CHECK_MEM(msg + 112, want_desc, 16);
    /* inline WRITE: the data at DataOffset, Length its size */
    len = smb2_build_write(msg, sizeof(msg), fid, 0, "hello", 5, SMB2_CHANNEL_NONE, NULL, 0);
    CHECK_EQ_U64(len, 64 + 48 + 5);
    CHECK_EQ_U64(smb2_get16(b + 2), 112);
    CHECK_EQ_U64(smb2_get32(b + 4), 5);
    CHECK_EQ_U64(smb2_get32(b + 32), 0);
    CHECK_EQ_U64(smb2_get32(b + 36), 0);
    CHECK_EQ_U64(smb2_get16(b + 42), 0);
    CHECK_MEM(msg + 112, "hello", 5);
    /* too small a buffer: 0, nothing written beyond cap */
    CHECK_EQ_U64(smb2_build_read(msg, 100, fid, 0, 1, SMB2_CHANNEL_RDMA_V1, d, 2), 0);
}

/* --- malformed responses --- */

static uint8_t rsp[4096];

static size_t rsp_init(uint16_t cmd, uint32_t status, uint16_t structure_size, size_t body_len)
{
    memset(rsp, 0, sizeof(rsp));
    struct smb2_hdr h = {
        .command = cmd, .status = status, .flags = SMB2_FLAGS_SERVER_TO_REDIR, .credits = 1};
    smb2_hdr_encode(rsp, &h);
    smb2_put16(rsp + 64, structure_size);
    return 64 + body_len;
}

#define EXPECT_BAD(call, needle)                                                                   \
    do {                                                                                           \
        char err_[200] = "";                                                                       \
        int rc_ = (call);                                                                          \
        CHECK_MSG(rc_ == -EPROTO, "%s returned %d, not -EPROTO", #call, rc_);                      \
        CHECK_MSG(strstr(err_, (needle)) != NULL, "%s: \"%s\" lacks \"%s\"", #call, err_,          \
                  (needle));                                                                       \
    } while (0)
#define ERR err_, sizeof(err_)

TEST(malformed_header)
{
    struct smb2_hdr h;
    size_t len = rsp_init(SMB2_READ, 0, 17, 16);
    char ok[200];
    CHECK(smb2_hdr_decode(rsp, len, &h, ok, sizeof(ok)) == 0);
    EXPECT_BAD(smb2_hdr_decode(rsp, 63, &h, ERR), "shorter than the SMB2 header");
    EXPECT_BAD(smb2_hdr_decode(rsp, 0, &h, ERR), "shorter than the SMB2 header");
    rsp[0] = 0xFF;
    EXPECT_BAD(smb2_hdr_decode(rsp, len, &h, ERR), "ProtocolId");
    rsp_init(SMB2_READ, 0, 17, 16);
    smb2_put16(rsp + 4, 65);
    EXPECT_BAD(smb2_hdr_decode(rsp, len, &h, ERR), "header StructureSize 65");
    rsp_init(SMB2_READ, 0, 17, 16);
    smb2_put32(rsp + 16, 0);
    EXPECT_BAD(smb2_hdr_decode(rsp, len, &h, ERR), "SERVER_TO_REDIR");
    rsp_init(SMB2_READ, 0, 17, 16);
    smb2_put32(rsp + 20, 128);
    EXPECT_BAD(smb2_hdr_decode(rsp, len, &h, ERR), "compound");
}

TEST(malformed_negotiate)
{
    struct smb2_negotiate_rsp r;
    char ok[200];
    /* a valid 3.0.2 response with a 4-byte security buffer */
    size_t len = rsp_init(SMB2_NEGOTIATE, 0, 65, 64 + 4);
    smb2_put16(rsp + 64 + 4, 0x0302);
    smb2_put32(rsp + 64 + 32, 65536);
    smb2_put16(rsp + 64 + 56, 128);
    smb2_put16(rsp + 64 + 58, 4);
    CHECK(smb2_parse_negotiate(rsp, len, &r, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(r.dialect, 0x0302);
    CHECK_EQ_U64(r.sec_len, 4);
    EXPECT_BAD(smb2_parse_negotiate(rsp, 64 + 63, &r, ERR), "shorter than its");
    smb2_put16(rsp + 64, 64);
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "StructureSize 64 is not 65");
    smb2_put16(rsp + 64, 65);
    smb2_put16(rsp + 64 + 58, 5); /* past the end */
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "SecurityBuffer");
    smb2_put16(rsp + 64 + 58, 4);
    smb2_put16(rsp + 64 + 56, 0xFFFF);
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "SecurityBuffer");
    smb2_put16(rsp + 64 + 56, 8); /* inside the header */
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "SecurityBuffer");
    /* 3.1.1: contexts */
    smb2_put16(rsp + 64 + 56, 128);
    smb2_put16(rsp + 64 + 4, 0x0311);
    smb2_put16(rsp + 64 + 6, 1);    /* one context */
    smb2_put32(rsp + 64 + 60, 136); /* at 136: past the end */
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "negotiate context header");
    len = 136 + 8 + 38;
    smb2_put16(rsp + 136, 1);
    smb2_put16(rsp + 138, 38);
    smb2_put16(rsp + 144, 1);
    smb2_put16(rsp + 146, 32);
    smb2_put16(rsp + 148, 1);
    CHECK(smb2_parse_negotiate(rsp, len, &r, ok, sizeof(ok)) == 0);
    CHECK(r.preauth_sha512);
    EXPECT_BAD(smb2_parse_negotiate(rsp, len - 1, &r, ERR), "negotiate context data");
    smb2_put16(rsp + 146, 33); /* salt longer than the context */
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "PREAUTH_INTEGRITY");
    smb2_put16(rsp + 146, 32);
    smb2_put16(rsp + 148, 2); /* not SHA-512 */
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "without a SHA-512");
    smb2_put16(rsp + 64 + 6, 0); /* no context at all */
    EXPECT_BAD(smb2_parse_negotiate(rsp, len, &r, ERR), "without a SHA-512");
}

TEST(malformed_bodies)
{
    char ok[200];
    struct smb2_session_setup_rsp ss;
    size_t len = rsp_init(SMB2_SESSION_SETUP, 0, 9, 8 + 10);
    smb2_put16(rsp + 64 + 4, 72);
    smb2_put16(rsp + 64 + 6, 10);
    CHECK(smb2_parse_session_setup(rsp, len, &ss, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(ss.blob_len, 10);
    smb2_put16(rsp + 64 + 6, 11);
    EXPECT_BAD(smb2_parse_session_setup(rsp, len, &ss, ERR), "SecurityBuffer");
    smb2_put16(rsp + 64, 8);
    EXPECT_BAD(smb2_parse_session_setup(rsp, len, &ss, ERR), "StructureSize 8 is not 9");
    EXPECT_BAD(smb2_parse_session_setup(rsp, 70, &ss, ERR), "shorter");

    uint8_t type;
    len = rsp_init(SMB2_TREE_CONNECT, 0, 16, 16);
    CHECK(smb2_parse_tree_connect(rsp, len, &type, ok, sizeof(ok)) == 0);
    EXPECT_BAD(smb2_parse_tree_connect(rsp, len - 1, &type, ERR), "shorter");
    smb2_put16(rsp + 64, 17);
    EXPECT_BAD(smb2_parse_tree_connect(rsp, len, &type, ERR), "StructureSize 17 is not 16");

    struct smb2_create_rsp cr;
    len = rsp_init(SMB2_CREATE, 0, 89, 88);
    smb2_put64(rsp + 64 + 48, 12345);
    CHECK(smb2_parse_create(rsp, len, &cr, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(cr.end_of_file, 12345);
    smb2_put32(rsp + 64 + 80, 152);
    smb2_put32(rsp + 64 + 84, 1);
    EXPECT_BAD(smb2_parse_create(rsp, len, &cr, ERR), "CreateContexts");
    smb2_put32(rsp + 64 + 80, 0xFFFFFFF0u);
    smb2_put32(rsp + 64 + 84, 0x20);
    EXPECT_BAD(smb2_parse_create(rsp, len, &cr, ERR), "CreateContexts");
    EXPECT_BAD(smb2_parse_create(rsp, 64 + 87, &cr, ERR), "shorter");

    len = rsp_init(SMB2_CLOSE, 0, 60, 60);
    CHECK(smb2_parse_close(rsp, len, ok, sizeof(ok)) == 0);
    EXPECT_BAD(smb2_parse_close(rsp, len - 1, ERR), "shorter");
    smb2_put16(rsp + 64, 4);
    EXPECT_BAD(smb2_parse_close(rsp, len, ERR), "StructureSize 4 is not 60");

    struct smb2_read_rsp rr;
    len = rsp_init(SMB2_READ, 0, 17, 16 + 100);
    rsp[64 + 2] = 80;
    smb2_put32(rsp + 64 + 4, 100);
    CHECK(smb2_parse_read(rsp, len, &rr, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(rr.data_len, 100);
    CHECK(rr.data == rsp + 80);
    EXPECT_BAD(smb2_parse_read(rsp, len - 1, &rr, ERR), "data");
    smb2_put32(rsp + 64 + 4, 0xFFFFFFFFu);
    EXPECT_BAD(smb2_parse_read(rsp, len, &rr, ERR), "data");
    smb2_put32(rsp + 64 + 4, 100);
    rsp[64 + 2] = 10; /* data inside the header */
    EXPECT_BAD(smb2_parse_read(rsp, len, &rr, ERR), "data");
    smb2_put16(rsp + 64, 16);
    EXPECT_BAD(smb2_parse_read(rsp, len, &rr, ERR), "StructureSize 16 is not 17");

    uint32_t count;
    len = rsp_init(SMB2_WRITE, 0, 17, 16);
    smb2_put32(rsp + 64 + 4, 7);
    CHECK(smb2_parse_write(rsp, len, &count, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(count, 7);
    EXPECT_BAD(smb2_parse_write(rsp, len - 1, &count, ERR), "shorter");
    smb2_put16(rsp + 64, 49);
    EXPECT_BAD(smb2_parse_write(rsp, len, &count, ERR), "StructureSize 49 is not 17");

    const uint8_t *buf;
    uint32_t n;
    len = rsp_init(SMB2_QUERY_INFO, 0, 9, 8 + 24);
    smb2_put16(rsp + 64 + 2, 72);
    smb2_put32(rsp + 64 + 4, 24);
    CHECK(smb2_parse_output_buffer(rsp, len, SMB2_QUERY_INFO, &buf, &n, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(n, 24);
    smb2_put32(rsp + 64 + 4, 25);
    EXPECT_BAD(smb2_parse_output_buffer(rsp, len, SMB2_QUERY_INFO, &buf, &n, ERR), "output buffer");
    smb2_put32(rsp + 64 + 4, 0x80000000u);
    EXPECT_BAD(smb2_parse_output_buffer(rsp, len, SMB2_QUERY_INFO, &buf, &n, ERR), "output buffer");

    len = rsp_init(SMB2_LOGOFF, 0, 4, 4);
    CHECK(smb2_parse_empty(rsp, len, SMB2_LOGOFF, ok, sizeof(ok)) == 0);
    EXPECT_BAD(smb2_parse_empty(rsp, len - 1, SMB2_LOGOFF, ERR), "shorter");
    smb2_put16(rsp + 64, 5);
    EXPECT_BAD(smb2_parse_empty(rsp, len, SMB2_LOGOFF, ERR), "StructureSize 5 is not 4");

    len = rsp_init(SMB2_CREATE, 0xC0000034u, 9, 9);
    CHECK(smb2_parse_error(rsp, len, ok, sizeof(ok)) == 0);
    smb2_put32(rsp + 64 + 4, 2); /* ByteCount past the end */
    EXPECT_BAD(smb2_parse_error(rsp, len, ERR), "ErrorData");
    smb2_put16(rsp + 64, 2);
    EXPECT_BAD(smb2_parse_error(rsp, len, ERR), "StructureSize 2 is not 9");
}

/* FileIdBothDirectoryInformation ([MS-FSCC] 2.4.17): 104 fixed bytes, then the name */
TEST(malformed_directory_entries)
{
    uint8_t buf[512] = {0};
    char ok[200];
    /* two entries: "a" (2 bytes) at 0, then "bc" at 112 */
    smb2_put32(buf, 112);
    smb2_put64(buf + 40, 5);
    smb2_put32(buf + 56, 0x10);
    smb2_put32(buf + 60, 2);
    buf[104] = 'a';
    smb2_put64(buf + 112 + 40, 7);
    smb2_put32(buf + 112 + 60, 4);
    buf[112 + 104] = 'b';
    buf[112 + 106] = 'c';
    size_t len = 112 + 108, off = 0;
    struct smb2_dir_entry e;
    CHECK_EQ_I64(smb2_dir_next(buf, len, &off, &e, ok, sizeof(ok)), 1);
    CHECK_EQ_U64(e.end_of_file, 5);
    CHECK_EQ_U64(e.attributes, 0x10);
    CHECK_EQ_U64(e.name_bytes, 2);
    CHECK(e.name == buf + 104);
    CHECK_EQ_I64(smb2_dir_next(buf, len, &off, &e, ok, sizeof(ok)), 1);
    CHECK_EQ_U64(e.end_of_file, 7);
    CHECK_EQ_U64(e.name_bytes, 4);
    CHECK(e.name == buf + 112 + 104);
    CHECK_EQ_I64(smb2_dir_next(buf, len, &off, &e, ok, sizeof(ok)), 0);
    off = 0;
    EXPECT_BAD(smb2_dir_next(buf, 103, &off, &e, ERR), "truncated");
    smb2_put32(buf + 60, 200); /* name past the buffer */
    off = 0;
    EXPECT_BAD(smb2_dir_next(buf, len, &off, &e, ERR), "name of 200 bytes");
    smb2_put32(buf + 60, 2);
    smb2_put32(buf, 500); /* next entry past the buffer */
    off = 0;
    EXPECT_BAD(smb2_dir_next(buf, len, &off, &e, ERR), "NextEntryOffset");
    smb2_put32(buf, 64); /* next entry inside this one */
    off = 0;
    EXPECT_BAD(smb2_dir_next(buf, len, &off, &e, ERR), "NextEntryOffset");
    /* the second entry cut inside its fixed part */
    smb2_put32(buf, 112);
    off = 0;
    CHECK_EQ_I64(smb2_dir_next(buf, 112 + 100, &off, &e, ok, sizeof(ok)), 1);
    EXPECT_BAD(smb2_dir_next(buf, 112 + 100, &off, &e, ERR), "truncated");
}

TEST(malformed_ntlm_and_spnego)
{
    uint8_t m[128] = {0};
    char ok[200];
    struct ntlm_challenge c;
    memcpy(m, "NTLMSSP", 8);
    smb2_put32(m + 8, 2);
    smb2_put32(m + 20, 0x00888205);
    memcpy(m + 24, server_challenge, 8);
    smb2_put16(m + 40, sizeof(av_pairs));
    smb2_put16(m + 42, sizeof(av_pairs));
    smb2_put32(m + 44, 56);
    memcpy(m + 56, av_pairs, sizeof(av_pairs));
    size_t len = 56 + sizeof(av_pairs);
    CHECK(ntlm_parse_challenge(m, len, &c, ok, sizeof(ok)) == 0);
    CHECK_MEM(c.server_challenge, server_challenge, 8);
    CHECK_EQ_U64(c.target_info_len, sizeof(av_pairs));
    CHECK(!c.has_timestamp);
    EXPECT_BAD(ntlm_parse_challenge(m, 47, &c, ERR), "shorter than 48");
    EXPECT_BAD(ntlm_parse_challenge(m, len - 1, &c, ERR), "TargetInfo");
    smb2_put32(m + 44, 0xFFFFFFF0u);
    EXPECT_BAD(ntlm_parse_challenge(m, len, &c, ERR), "TargetInfo");
    smb2_put32(m + 44, 56);
    smb2_put16(m + 56 + 2, 0x40); /* AV pair longer than TargetInfo */
    EXPECT_BAD(ntlm_parse_challenge(m, len, &c, ERR), "passes TargetInfo");
    smb2_put16(m + 56 + 2, 0x0c);
    smb2_put16(m + 40, sizeof(av_pairs) - 4); /* EOL cut off */
    EXPECT_BAD(ntlm_parse_challenge(m, len, &c, ERR), "MsvAvEOL");
    smb2_put32(m + 8, 3);
    EXPECT_BAD(ntlm_parse_challenge(m, len, &c, ERR), "not an NTLMSSP CHALLENGE");

    /* SPNEGO: our own NegTokenResp parses back; damaged ones do not */
    uint8_t blob[256];
    size_t bl = spnego_resp(blob, sizeof(blob), (const uint8_t *)"NTLMSSP\0xyz", 11);
    CHECK(bl > 11);
    const uint8_t *tok;
    size_t tl;
    int st;
    CHECK(spnego_parse_resp(blob, bl, &tok, &tl, &st, ok, sizeof(ok)) == 0);
    CHECK_EQ_U64(tl, 11);
    CHECK_MEM(tok, "NTLMSSP\0xyz", 11);
    for (size_t cut = 0; cut < bl; cut++) {
        char err_[200] = "";
        int rc = spnego_parse_resp(blob, cut, &tok, &tl, &st, ERR);
        CHECK_MSG(rc == -EPROTO || (rc == 0 && tok == NULL),
                  "a NegTokenResp cut at %zu of %zu: rc %d", cut, bl, rc);
    }
    EXPECT_BAD(spnego_parse_resp(NULL, 0, &tok, &tl, &st, ERR), "empty security blob");
    static const uint8_t reject[] = {0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x02};
    EXPECT_BAD(spnego_parse_resp(reject, sizeof(reject), &tok, &tl, &st, ERR), "reject");
    static const uint8_t huge_len[] = {0xa1, 0x84, 0xff, 0xff, 0xff, 0xff, 0x30};
    EXPECT_BAD(spnego_parse_resp(huge_len, sizeof(huge_len), &tok, &tl, &st, ERR), "NegTokenResp");
}

TEST(status_names)
{
    CHECK(strcmp(smb2_status_name(0xC000006D), "STATUS_LOGON_FAILURE") == 0);
    CHECK(strcmp(smb2_status_name(0xC00000CC), "STATUS_BAD_NETWORK_NAME") == 0);
    CHECK(strcmp(smb2_status_name(0x12345678), "STATUS_0x12345678") == 0);
}

TEST(utf8_utf16)
{
    uint16_t u[16];
    CHECK_EQ_I64(smb2_utf8_to_utf16("a\xc3\xa9\xf0\x9f\x98\x80", u, 16), 4);
    CHECK_EQ_U64(u[1], 0xe9);
    CHECK_EQ_U64(u[2], 0xD83D);
    CHECK_EQ_U64(u[3], 0xDE00);
    CHECK_EQ_I64(smb2_utf8_to_utf16("\xff", u, 16), -1);
    CHECK_EQ_I64(smb2_utf8_to_utf16("abc", u, 2), -1);
    CHECK_EQ_I64(smb2_utf8_to_utf16("a\xc3\xa9\xf0\x9f\x98\x80", u, 16), 4);
    uint8_t le[8];
    for (int i = 0; i < 4; i++)
        smb2_put16(le + 2 * i, u[i]);
    char s[16];
    CHECK_EQ_I64(smb2_utf16le_to_utf8(le, 8, s, sizeof(s)), 7);
    CHECK(strcmp(s, "a\xc3\xa9\xf0\x9f\x98\x80") == 0);
    CHECK_EQ_I64(smb2_utf16le_to_utf8(le, 7, s, sizeof(s)), -1);
    CHECK_EQ_I64(smb2_utf16le_to_utf8(le, 8, s, 5), -1);
}

/* Linux ksmbd 6.1 signs an RDMA READ response over its 4-byte length prefix too: the variant
 * is a full AES-CMAC of every byte, told apart from the plain signature, and changes to the
 * message still break it. */
TEST(signature_over_length_prefix)
{
    uint8_t key[16], msg[80], buf[84];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)(0x40 + i);
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    memset(msg + 48, 0, 16);
    buf[0] = 0, buf[1] = 0, buf[2] = 0, buf[3] = sizeof msg; /* big-endian 80 */
    memcpy(buf + 4, msg, sizeof msg);
    struct cmac_aes128_ctx c;
    cmac_aes128_set_key(&c, key);
    cmac_aes128_update(&c, sizeof buf, buf);
    cmac_aes128_digest(&c, 16, msg + 48);
    CHECK_EQ_I64(smb2_verify_message_with_length_prefix(key, msg, sizeof msg), 1);
    CHECK_EQ_I64(smb2_verify_message(key, msg, sizeof msg), 0);
    msg[70] ^= 1;
    CHECK_EQ_I64(smb2_verify_message_with_length_prefix(key, msg, sizeof msg), 0);
    msg[70] ^= 1;
    key[0] ^= 1;
    CHECK_EQ_I64(smb2_verify_message_with_length_prefix(key, msg, sizeof msg), 0);
}
