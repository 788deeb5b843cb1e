/* libFuzzer: the SMB Direct decoders ([MS-SMBD] 2.2), which read every byte an SMB Direct peer
 * sends before anything else does. Each input is decoded as each message kind; a decoded data
 * message must describe bytes inside the input. */
#include "../smb/transport/smbd_wire.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why;
    struct smbd_negotiate_request q;
    if (smbd_decode_negotiate_request(data, size, &q, &why) == 0) {
        assert(q.credits_requested > 0 && q.max_receive_size >= SMBD_MIN_RECEIVE_SIZE);
        uint8_t again[SMBD_NEGOTIATE_REQUEST_SIZE];
        smbd_encode_negotiate_request(&q, again);
    }
    struct smbd_negotiate_response r;
    if (smbd_decode_negotiate_response(data, size, 1364, &r, &why) == 0)
        assert(r.credits_granted > 0 && r.preferred_send_size <= 1364);
    struct smbd_data_header h;
    if (smbd_decode_data_header(data, size, &h, &why) == 0 && h.data_length) {
        assert((uint64_t)h.data_offset + h.data_length <= size);
        volatile uint8_t sum = 0;
        for (uint32_t i = 0; i < h.data_length; i++)
            sum ^= data[h.data_offset + i];
        (void)sum;
    }
    return 0;
}
