/* The three SMB Direct messages of [MS-SMBD] 2.2, encoded and decoded with every check the
 * receiver must make (3.1.5.6, 3.1.5.7, 3.1.5.8). Knows no connection and no NDK object: bytes
 * in, a struct or a reason out (the fuzz target drives it alone). All fields little-endian. */
#ifndef SMB_TRANSPORT_SMBD_WIRE_H
#define SMB_TRANSPORT_SMBD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SMBD_VERSION_1               0x0100u
#define SMBD_NEGOTIATE_REQUEST_SIZE  20u
#define SMBD_NEGOTIATE_RESPONSE_SIZE 32u
#define SMBD_DATA_HEADER_MIN         20u /* through DataLength: a message with no data may stop here */
#define SMBD_DATA_OFFSET             24u /* where data starts: the 20-byte header plus Padding, 8-aligned */
#define SMBD_FLAG_RESPONSE_REQUESTED 0x0001u
/* [MS-SMBD] 3.1.1.1: the smallest values a peer may negotiate. */
#define SMBD_MIN_RECEIVE_SIZE     128u
#define SMBD_MIN_FRAGMENTED_SIZE  131072u
#define SMBD_STATUS_NOT_SUPPORTED 0xC00000BBu

/* 2.2.1 SMBDirect Negotiate Request */
struct smbd_negotiate_request {
    uint16_t min_version, max_version;
    uint16_t credits_requested;
    uint32_t preferred_send_size, max_receive_size, max_fragmented_size;
};

/* 2.2.2 SMBDirect Negotiate Response */
struct smbd_negotiate_response {
    uint16_t min_version, max_version, negotiated_version;
    uint16_t credits_requested, credits_granted;
    uint32_t status;
    uint32_t max_read_write_size, preferred_send_size, max_receive_size, max_fragmented_size;
};

/* 2.2.3 SMBDirect Data Transfer Message (header; data_length bytes at data_offset follow) */
struct smbd_data_header {
    uint16_t credits_requested, credits_granted, flags;
    uint32_t remaining_data_length, data_offset, data_length;
};

void smbd_encode_negotiate_request(const struct smbd_negotiate_request *r,
                                   uint8_t out[SMBD_NEGOTIATE_REQUEST_SIZE]);
void smbd_encode_negotiate_response(const struct smbd_negotiate_response *r,
                                    uint8_t out[SMBD_NEGOTIATE_RESPONSE_SIZE]);
/* Writes the 24-byte header (Padding 0); data_offset is SMBD_DATA_OFFSET when data_length > 0,
 * else 0. */
void smbd_encode_data_header(const struct smbd_data_header *h, uint8_t out[SMBD_DATA_OFFSET]);

/* Decoders: 0, or -EPROTO with one line in why (static text; the caller adds numbers it
 * knows). The checks are the receiver's of the section named. */
/* 3.1.5.6 (responder): size, versions overlapping 0x0100, CreditsRequested > 0, MaxReceiveSize
 * >= 128, MaxFragmentedSize >= 131072. A request whose versions do not include 0x0100 decodes
 * with -EPROTONOSUPPORT (the responder answers STATUS_NOT_SUPPORTED). */
int smbd_decode_negotiate_request(const uint8_t *buf, size_t len, struct smbd_negotiate_request *r,
                                  const char **why);
/* 3.1.5.7 (initiator): size, NegotiatedVersion 0x0100, Status 0, CreditsGranted > 0,
 * CreditsRequested > 0, MaxReceiveSize >= 128, MaxFragmentedSize >= 131072, and
 * PreferredSendSize <= our MaxReceiveSize (own_max_receive). */
int smbd_decode_negotiate_response(const uint8_t *buf, size_t len, uint32_t own_max_receive,
                                   struct smbd_negotiate_response *r, const char **why);
/* 3.1.5.8: size >= 20, CreditsRequested > 0, DataOffset 8-aligned and past the header when
 * DataLength > 0, DataOffset + DataLength <= len. Reassembly limits are the connection's. */
int smbd_decode_data_header(const uint8_t *buf, size_t len, struct smbd_data_header *h,
                            const char **why);

#endif
