/* An SMB2 file server ([MS-SMB2] section 3.3, server role) over the message transport
 * (smb/include/smb/msg_transport.h): Direct TCP (tcp_listen.h) or SMB Direct. One connection
 * per thread; the directory served is confined (no "..", no symlink leading out of it).
 * What it implements, and how each request is answered: docs/smbdirect.md, "Server". */
#ifndef SMB_SMB2_SERVER_H
#define SMB_SMB2_SERVER_H

#include <smb/msg_transport.h>

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smb2_server_config {
    const char *root;                     /* the directory served; every path confined to it */
    const char *share;                    /* share name, e.g. "share" (IPC$ also answered) */
    const char *user, *password, *domain; /* the one account (NTLMv2) */
    uint32_t max_io;     /* MaxRead/MaxWrite/MaxTransactSize offered [8 MiB]; 0: 8 MiB */
    int require_signing; /* SMB2_NEGOTIATE_SIGNING_REQUIRED: unsigned requests refused */
    FILE *log;           /* one line per connection event and per refused request; NULL: stderr */
} smb2_server_config;

typedef struct smb2_server_stats {
    uint64_t commands[32]; /* by SMB2 command code */
    uint64_t rdma_reads, rdma_writes, send_invalidates, inline_reads, inline_writes;
} smb2_server_stats;

/* Serves one connection until the client ends it or fails; returns 0 on an orderly end (the
 * client closed the connection), -1 when the connection failed (the transport's error, or a
 * request [MS-SMB2] says ends the connection; the log says which). The transport stays the
 * caller's to destroy. Thread-safe across connections (one thread per connection; shared
 * stats, which may be NULL, added atomically). */
int smb2_serve_connection(const smb2_server_config *cfg, smb_transport *t,
                          smb2_server_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
