/* SMB2 wire format ([MS-SMB2] 2.2): little-endian accessors, the constants the client uses, and
 * the codec: request builders and bounds-checked response parsers. Every parser takes the whole
 * message (offsets in SMB2 bodies count from the start of the SMB2 header) and fails with
 * -EPROTO and a one-line reason instead of reading outside it. */
#ifndef SMB_SMB2_WIRE_H
#define SMB_SMB2_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "smb/msg_transport.h"

static inline uint16_t smb2_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t smb2_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t smb2_get64(const uint8_t *p)
{
    return (uint64_t)smb2_get32(p) | ((uint64_t)smb2_get32(p + 4) << 32);
}
static inline void smb2_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void smb2_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void smb2_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#define SMB2_HDR_LEN 64

/* [MS-SMB2] 2.2.1.2 Command */
enum smb2_command {
    SMB2_NEGOTIATE = 0x0000,
    SMB2_SESSION_SETUP = 0x0001,
    SMB2_LOGOFF = 0x0002,
    SMB2_TREE_CONNECT = 0x0003,
    SMB2_TREE_DISCONNECT = 0x0004,
    SMB2_CREATE = 0x0005,
    SMB2_CLOSE = 0x0006,
    SMB2_READ = 0x0008,
    SMB2_WRITE = 0x0009,
    SMB2_QUERY_DIRECTORY = 0x000E,
    SMB2_QUERY_INFO = 0x0010,
};
const char *smb2_command_name(uint16_t cmd);

/* [MS-SMB2] 2.2.1.2 Flags */
#define SMB2_FLAGS_SERVER_TO_REDIR 0x00000001u
#define SMB2_FLAGS_ASYNC_COMMAND   0x00000002u
#define SMB2_FLAGS_RELATED         0x00000004u
#define SMB2_FLAGS_SIGNED          0x00000008u

/* NTSTATUS values the client acts on ([MS-ERREF] 2.3.1) */
#define STATUS_SUCCESS                  0x00000000u
#define STATUS_PENDING                  0x00000103u
#define STATUS_MORE_PROCESSING_REQUIRED 0xC0000016u
#define STATUS_NO_MORE_FILES            0x80000006u
#define STATUS_END_OF_FILE              0xC0000011u
#define STATUS_BUFFER_OVERFLOW          0x80000005u

/* [MS-SMB2] 2.2.3 / 2.2.4 */
#define SMB2_NEGOTIATE_SIGNING_ENABLED      0x0001
#define SMB2_NEGOTIATE_SIGNING_REQUIRED     0x0002
#define SMB2_GLOBAL_CAP_DFS                 0x00000001u
#define SMB2_GLOBAL_CAP_LARGE_MTU           0x00000004u
#define SMB2_PREAUTH_INTEGRITY_CAPABILITIES 0x0001
#define SMB2_PREAUTH_SHA512                 0x0001
/* [MS-SMB2] 2.2.6 SessionFlags */
#define SMB2_SESSION_FLAG_IS_GUEST     0x0001
#define SMB2_SESSION_FLAG_IS_NULL      0x0002
#define SMB2_SESSION_FLAG_ENCRYPT_DATA 0x0004
/* [MS-SMB2] 2.2.19 / 2.2.21 Channel */
#define SMB2_CHANNEL_NONE               0x00000000u
#define SMB2_CHANNEL_RDMA_V1            0x00000001u
#define SMB2_CHANNEL_RDMA_V1_INVALIDATE 0x00000002u
/* [MS-SMB2] 2.2.3.1 SMB_DIRECT_BUFFER_DESCRIPTOR_V1 */
#define SMB2_BUFFER_DESC_LEN 16

/* [MS-SMB2] 2.2.1.2 SMB2 Packet Header - SYNC / ASYNC (host order) */
struct smb2_hdr {
    uint16_t credit_charge;
    uint32_t status; /* a response's Status; 0 in requests (ChannelSequence) */
    uint16_t command;
    uint16_t credits; /* CreditRequest / CreditResponse */
    uint32_t flags;
    uint32_t next_command;
    uint64_t message_id;
    uint64_t async_id; /* ASYNC only */
    uint32_t tree_id;  /* SYNC only */
    uint64_t session_id;
};
void smb2_hdr_encode(uint8_t *out, const struct smb2_hdr *h);
/* Checks ProtocolId, StructureSize 64, the SERVER_TO_REDIR flag and NextCommand 0 (the client
 * sends no compound requests, so a compound response is an error). */
int smb2_hdr_decode(const uint8_t *msg, size_t len, struct smb2_hdr *h, char *err, size_t errlen);

/* Fixed sizes of request bodies (StructureSize minus the variable byte) */
#define SMB2_NEGOTIATE_REQ_FIXED     36
#define SMB2_SESSION_SETUP_REQ_FIXED 24
#define SMB2_TREE_CONNECT_REQ_FIXED  8
#define SMB2_CREATE_REQ_FIXED        56
#define SMB2_CLOSE_REQ_FIXED         24
#define SMB2_READ_REQ_FIXED          48
#define SMB2_WRITE_REQ_FIXED         48
#define SMB2_QUERY_DIR_REQ_FIXED     32
#define SMB2_QUERY_INFO_REQ_FIXED    40

/* Request builders: write the body after a 64-byte header space at out (the caller fills the
 * header) and return the whole message length, or 0 when cap is too small. */
size_t smb2_build_negotiate(uint8_t *out, size_t cap, const uint16_t *dialects, unsigned n,
                            uint16_t security_mode, uint32_t caps, const uint8_t guid[16],
                            const uint8_t salt[32]);
size_t smb2_build_session_setup(uint8_t *out, size_t cap, uint8_t security_mode,
                                const uint8_t *blob, size_t blob_len);
size_t smb2_build_tree_connect(uint8_t *out, size_t cap, const uint16_t *path, size_t path_units);
struct smb2_create_req {
    uint32_t desired_access, file_attributes, share_access, disposition, options;
    const uint16_t *name;
    size_t name_units;
};
size_t smb2_build_create(uint8_t *out, size_t cap, const struct smb2_create_req *r);
size_t smb2_build_close(uint8_t *out, size_t cap, const uint8_t file_id[16]);
/* READ: channel info (ndesc descriptors) when channel is not NONE. */
size_t smb2_build_read(uint8_t *out, size_t cap, const uint8_t file_id[16], uint64_t offset,
                       uint32_t length, uint32_t channel, const smb_buffer_desc *desc,
                       unsigned ndesc);
/* WRITE: inline data (channel NONE: data_len bytes, already at out + 112 when data is NULL),
 * or descriptors for an RDMA channel (DataOffset 0, Length 0, RemainingBytes data_len). */
size_t smb2_build_write(uint8_t *out, size_t cap, const uint8_t file_id[16], uint64_t offset,
                        const void *data, uint32_t data_len, uint32_t channel,
                        const smb_buffer_desc *desc, unsigned ndesc);
#define SMB2_WRITE_DATA_OFFSET (SMB2_HDR_LEN + SMB2_WRITE_REQ_FIXED)
size_t smb2_build_query_directory(uint8_t *out, size_t cap, const uint8_t file_id[16],
                                  uint8_t info_class, uint8_t flags, const uint16_t *pattern,
                                  size_t pattern_units, uint32_t out_len);
size_t smb2_build_query_info(uint8_t *out, size_t cap, const uint8_t file_id[16], uint8_t info_type,
                             uint8_t info_class, uint32_t out_len);
/* LOGOFF and TREE_DISCONNECT: StructureSize 4 */
size_t smb2_build_empty(uint8_t *out, size_t cap);

/* Response parsers. The message includes its header; status is the header's. */
struct smb2_negotiate_rsp {
    uint16_t security_mode, dialect;
    uint32_t capabilities, max_transact, max_read, max_write;
    uint8_t server_guid[16];
    const uint8_t *sec_blob;
    size_t sec_len;
    int preauth_sha512; /* 3.1.1: the PREAUTH_INTEGRITY context named SHA-512 */
};
int smb2_parse_negotiate(const uint8_t *msg, size_t len, struct smb2_negotiate_rsp *r, char *err,
                         size_t errlen);
struct smb2_session_setup_rsp {
    uint16_t session_flags;
    const uint8_t *blob;
    size_t blob_len;
};
int smb2_parse_session_setup(const uint8_t *msg, size_t len, struct smb2_session_setup_rsp *r,
                             char *err, size_t errlen);
int smb2_parse_tree_connect(const uint8_t *msg, size_t len, uint8_t *share_type, char *err,
                            size_t errlen);
struct smb2_create_rsp {
    uint8_t file_id[16];
    uint64_t end_of_file;
    uint32_t attributes;
};
int smb2_parse_create(const uint8_t *msg, size_t len, struct smb2_create_rsp *r, char *err,
                      size_t errlen);
int smb2_parse_close(const uint8_t *msg, size_t len, char *err, size_t errlen);
struct smb2_read_rsp {
    const uint8_t *data;
    uint32_t data_len, data_remaining;
};
int smb2_parse_read(const uint8_t *msg, size_t len, struct smb2_read_rsp *r, char *err,
                    size_t errlen);
int smb2_parse_write(const uint8_t *msg, size_t len, uint32_t *count, char *err, size_t errlen);
/* QUERY_DIRECTORY and QUERY_INFO: the output buffer */
int smb2_parse_output_buffer(const uint8_t *msg, size_t len, uint16_t command, const uint8_t **buf,
                             uint32_t *buf_len, char *err, size_t errlen);
int smb2_parse_empty(const uint8_t *msg, size_t len, uint16_t command, char *err, size_t errlen);
/* An error response ([MS-SMB2] 2.2.2): StructureSize 9. */
int smb2_parse_error(const uint8_t *msg, size_t len, char *err, size_t errlen);

/* FileIdBothDirectoryInformation (0x25, [MS-FSCC] 2.4.17: 104 fixed bytes, then the name)
 * entries, one at a time: *off the entry to read (0 first), advanced to the next; returns 1
 * with an entry, 0 at the end, -EPROTO when malformed. name points into buf (UTF-16LE,
 * name_bytes long). */
struct smb2_dir_entry {
    uint64_t end_of_file;
    uint32_t attributes;
    const uint8_t *name;
    uint32_t name_bytes;
};
int smb2_dir_next(const uint8_t *buf, size_t len, size_t *off, struct smb2_dir_entry *e, char *err,
                  size_t errlen);

/* UTF-8 <-> UTF-16LE (code units in host order). Return the number of units / bytes written,
 * or -1 on invalid input or lack of room. */
long smb2_utf8_to_utf16(const char *s, uint16_t *out, size_t cap);
long smb2_utf16le_to_utf8(const uint8_t *in, size_t bytes, char *out, size_t cap);

#endif
