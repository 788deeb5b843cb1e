/* Direct TCP ([MS-SMB2] 2.1), server side: a listener whose accepted connections are
 * smb_transports (msg_transport.h) carrying SMB2 messages behind the 4-byte length prefix. No
 * RDMA: the transports' register_buffer, peer_write, peer_read and send_invalidate are NULL.
 * Every function returns 0 or a negative errno value. */
#ifndef SMB_TCP_LISTEN_H
#define SMB_TCP_LISTEN_H

#include <smb/msg_transport.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smb_tcp_listener smb_tcp_listener;

/* Listens on addr (an IPv4 or IPv6 literal; NULL: 127.0.0.1) and port (0: any free port). On
 * failure, err (errlen bytes) says why. */
int smb_tcp_listen(const char *addr, uint16_t port, smb_tcp_listener **out, char *err,
                   size_t errlen);
/* Waits at most timeout_ms (-1: no bound) for a connection: -ETIMEDOUT then. The transport's
 * destroy() closes the connection. */
int smb_tcp_accept(smb_tcp_listener *l, smb_transport **t, int timeout_ms);
uint16_t smb_tcp_listener_port(const smb_tcp_listener *l);
void smb_tcp_listener_close(smb_tcp_listener *l);

/* A transport over an already connected stream socket (which it then owns): for tests and for
 * callers that accept by other means. */
int smb_tcp_transport_from_fd(int fd, smb_transport **t);

#ifdef __cplusplus
}
#endif
#endif
