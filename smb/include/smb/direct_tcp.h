/* The Direct TCP transport of SMB2 ([MS-SMB2] 2.1): each message preceded by a 4-byte header,
 * a zero byte and the 24-bit big-endian length. No RDMA (register_buffer NULL, max_rdma 0). */
#ifndef SMB_DIRECT_TCP_H
#define SMB_DIRECT_TCP_H

#include <stddef.h>
#include <stdint.h>

#include "smb/msg_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connects to host (a name or an address) port port. 0 and *out, or a negative errno value
 * and a message in err. */
int smb_direct_tcp_connect(const char *host, uint16_t port, smb_transport **out, char *err,
                           size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
