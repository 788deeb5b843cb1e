/* An SMB2 client (dialects 3.0.2 and 3.1.1, NTLMv2 authentication) on the message transport of
 * smb/msg_transport.h: connect (NEGOTIATE, SESSION_SETUP, TREE_CONNECT), put / get a whole file
 * with several READ or WRITE requests in flight, list a directory, disconnect.
 * Protocol: [MS-SMB2]; authentication: [MS-NLMP] (NTLMv2) inside [MS-SPNG] (SPNEGO).
 * A client is used by one thread at a time. docs/smbdirect.md describes what it sends. */
#ifndef SMB_SMB2_CLIENT_H
#define SMB_SMB2_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "smb/msg_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How READ and WRITE carry their data ([MS-SMB2] 2.2.19 / 2.2.21 Channel):
 * SMB2_IO_INLINE            SMB2_CHANNEL_NONE, the data inside the messages;
 * SMB2_IO_RDMA              SMB2_CHANNEL_RDMA_V1, the server reads / writes a registered buffer;
 * SMB2_IO_RDMA_INVALIDATE   SMB2_CHANNEL_RDMA_V1_INVALIDATE (dialect 3.0.2 and later): as
 *                           RDMA_V1, and the server invalidates the buffer with its response.
 * Transfers below inline_threshold go inline whatever the channel. */
enum smb2_channel { SMB2_IO_INLINE, SMB2_IO_RDMA, SMB2_IO_RDMA_INVALIDATE };

typedef struct smb2_client_options {
    const char *user, *password, *domain; /* domain may be NULL/"" */
    enum smb2_channel channel;
    uint32_t io_size;          /* 0: the negotiated maximum */
    unsigned depth;            /* requests in flight, >= 1 */
    uint16_t max_dialect;      /* 0x0302 or 0x0311 (0: 0x0311) */
    uint32_t inline_threshold; /* 0: 4096 */
    int require_signing;       /* sign even if the server does not require it */
    int timeout_ms;            /* per response; 0: 30000 */
} smb2_client_options;

typedef struct smb2_io_stats {
    uint64_t bytes;
    double seconds;
    uint64_t requests_read, requests_write, rdma_requests, inline_requests;
    uint64_t remote_invalidations, local_invalidations; /* from release_buffer's answer */
} smb2_io_stats;

typedef struct smb2_client smb2_client;

/* On failure: negative errno-like value, and smb2_client_error() / err explain (the NTSTATUS
 * name where the server answered one: "TREE_CONNECT: STATUS_BAD_NETWORK_NAME").
 * The transport stays the caller's: smb2_client_disconnect() does not destroy it. */
int smb2_client_connect(smb_transport *t, const smb2_client_options *o, const char *server,
                        const char *share, smb2_client **out, char *err, size_t errlen);
uint16_t smb2_client_dialect(const smb2_client *c);
/* Creates or overwrites remote_path and writes it from local_fd until EOF. st may be NULL. */
int smb2_put(smb2_client *c, int local_fd, const char *remote_path, smb2_io_stats *st);
/* Reads remote_path up to its size (QUERY_INFO) and writes it to local_fd. st may be NULL. */
int smb2_get(smb2_client *c, const char *remote_path, int local_fd, smb2_io_stats *st);
/* Calls cb for each entry of dir ("" or "/" the share's root), "." and ".." left out; a
 * non-zero return of cb stops the listing and is returned. */
typedef int (*smb2_list_cb)(void *ctx, const char *name, uint64_t size, int is_dir);
int smb2_list(smb2_client *c, const char *dir, smb2_list_cb cb, void *ctx);
const char *smb2_client_error(const smb2_client *c);
/* TREE_DISCONNECT + LOGOFF, then frees (not the transport). NULL is a no-op. */
void smb2_client_disconnect(smb2_client *c);
/* "STATUS_LOGON_FAILURE" for 0xC000006D; "STATUS_0x........" for a value not in the table. */
const char *smb2_status_name(uint32_t ntstatus);

#ifdef __cplusplus
}
#endif
#endif
