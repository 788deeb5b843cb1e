/* [MS-SMBD] 2.2 messages: see smbd_wire.h. */
#include "smbd_wire.h"

#include <errno.h>

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void smbd_encode_negotiate_request(const struct smbd_negotiate_request *r,
                                   uint8_t out[SMBD_NEGOTIATE_REQUEST_SIZE])
{
    put16(out + 0, r->min_version);
    put16(out + 2, r->max_version);
    put16(out + 4, 0); /* Reserved */
    put16(out + 6, r->credits_requested);
    put32(out + 8, r->preferred_send_size);
    put32(out + 12, r->max_receive_size);
    put32(out + 16, r->max_fragmented_size);
}

void smbd_encode_negotiate_response(const struct smbd_negotiate_response *r,
                                    uint8_t out[SMBD_NEGOTIATE_RESPONSE_SIZE])
{
    put16(out + 0, r->min_version);
    put16(out + 2, r->max_version);
    put16(out + 4, r->negotiated_version);
    put16(out + 6, 0); /* Reserved */
    put16(out + 8, r->credits_requested);
    put16(out + 10, r->credits_granted);
    put32(out + 12, r->status);
    put32(out + 16, r->max_read_write_size);
    put32(out + 20, r->preferred_send_size);
    put32(out + 24, r->max_receive_size);
    put32(out + 28, r->max_fragmented_size);
}

void smbd_encode_data_header(const struct smbd_data_header *h, uint8_t out[SMBD_DATA_OFFSET])
{
    put16(out + 0, h->credits_requested);
    put16(out + 2, h->credits_granted);
    put16(out + 4, h->flags);
    put16(out + 6, 0); /* Reserved */
    put32(out + 8, h->remaining_data_length);
    put32(out + 12, h->data_length ? SMBD_DATA_OFFSET : 0);
    put32(out + 16, h->data_length);
    put32(out + 20, 0); /* Padding */
}

int smbd_decode_negotiate_request(const uint8_t *buf, size_t len, struct smbd_negotiate_request *r,
                                  const char **why)
{
    if (len < SMBD_NEGOTIATE_REQUEST_SIZE) {
        *why = "negotiate request shorter than 20 bytes";
        return -EPROTO;
    }
    r->min_version = get16(buf + 0);
    r->max_version = get16(buf + 2);
    r->credits_requested = get16(buf + 6);
    r->preferred_send_size = get32(buf + 8);
    r->max_receive_size = get32(buf + 12);
    r->max_fragmented_size = get32(buf + 16);
    if (r->min_version > SMBD_VERSION_1 || r->max_version < SMBD_VERSION_1) {
        *why = "negotiate request offers no version 0x0100";
        return -EPROTONOSUPPORT;
    }
    if (r->credits_requested == 0) {
        *why = "negotiate request asks for 0 credits";
        return -EPROTO;
    }
    if (r->max_receive_size < SMBD_MIN_RECEIVE_SIZE) {
        *why = "negotiate request MaxReceiveSize below 128";
        return -EPROTO;
    }
    if (r->max_fragmented_size < SMBD_MIN_FRAGMENTED_SIZE) {
        *why = "negotiate request MaxFragmentedSize below 131072";
        return -EPROTO;
    }
    *why = "";
    return 0;
}

int smbd_decode_negotiate_response(const uint8_t *buf, size_t len, uint32_t own_max_receive,
                                   struct smbd_negotiate_response *r, const char **why)
{
    if (len < SMBD_NEGOTIATE_RESPONSE_SIZE) {
        *why = "negotiate response shorter than 32 bytes";
        return -EPROTO;
    }
    r->min_version = get16(buf + 0);
    r->max_version = get16(buf + 2);
    r->negotiated_version = get16(buf + 4);
    r->credits_requested = get16(buf + 8);
    r->credits_granted = get16(buf + 10);
    r->status = get32(buf + 12);
    r->max_read_write_size = get32(buf + 16);
    r->preferred_send_size = get32(buf + 20);
    r->max_receive_size = get32(buf + 24);
    r->max_fragmented_size = get32(buf + 28);
    if (r->status != 0) {
        *why = r->status == SMBD_STATUS_NOT_SUPPORTED
                   ? "peer answered the negotiation STATUS_NOT_SUPPORTED"
                   : "peer answered the negotiation with a failure status";
        return -EPROTO;
    }
    if (r->negotiated_version != SMBD_VERSION_1) {
        *why = "negotiate response names a version other than 0x0100";
        return -EPROTO;
    }
    if (r->credits_granted == 0) {
        *why = "peer granted 0 credits";
        return -EPROTO;
    }
    if (r->credits_requested == 0) {
        *why = "peer requested 0 credits";
        return -EPROTO;
    }
    if (r->max_receive_size < SMBD_MIN_RECEIVE_SIZE) {
        *why = "negotiate response MaxReceiveSize below 128";
        return -EPROTO;
    }
    if (r->max_fragmented_size < SMBD_MIN_FRAGMENTED_SIZE) {
        *why = "negotiate response MaxFragmentedSize below 131072";
        return -EPROTO;
    }
    if (r->preferred_send_size > own_max_receive) {
        *why = "negotiate response PreferredSendSize above our MaxReceiveSize";
        return -EPROTO;
    }
    *why = "";
    return 0;
}

int smbd_decode_data_header(const uint8_t *buf, size_t len, struct smbd_data_header *h,
                            const char **why)
{
    if (len < SMBD_DATA_HEADER_MIN) {
        *why = "data transfer message shorter than 20 bytes";
        return -EPROTO;
    }
    h->credits_requested = get16(buf + 0);
    h->credits_granted = get16(buf + 2);
    h->flags = get16(buf + 4);
    h->remaining_data_length = get32(buf + 8);
    h->data_offset = get32(buf + 12);
    h->data_length = get32(buf + 16);
    if (h->credits_requested == 0) {
        *why = "data transfer message requests 0 credits";
        return -EPROTO;
    }
    if (h->data_length == 0) {
        if (h->remaining_data_length != 0) {
            *why = "data transfer message with no data announces remaining data";
            return -EPROTO;
        }
        *why = "";
        return 0;
    }
    if (h->data_offset % 8 != 0 || h->data_offset < SMBD_DATA_HEADER_MIN) {
        *why = "data transfer DataOffset not 8-aligned past the header";
        return -EPROTO;
    }
    if ((uint64_t)h->data_offset + h->data_length > len) {
        *why = "data transfer DataOffset + DataLength beyond the message";
        return -EPROTO;
    }
    *why = "";
    return 0;
}
