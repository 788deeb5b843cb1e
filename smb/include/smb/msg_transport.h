/* The message transport an SMB2 client runs on: one whole SMB2 message in, one whole message
 * out, and (where the transport has RDMA) registration of the buffers a READ or WRITE names in
 * its channel info. Two implementations: SMB Direct ([MS-SMBD], smb/transport/smbd.c, over the
 * public NDK interface) and Direct TCP ([MS-SMB2] 2.1, smb/transport/direct_tcp.c, for the
 * inline-only comparison with any SMB server).
 *
 * Every function returns 0 or a negative errno value; on failure the transport writes one line
 * into the message buffer that smb_transport_error() returns, naming what went wrong
 * ("peer granted 0 credits", "receive of 1400 bytes exceeds MaxReceiveSize 1364", ...).
 * A transport is used by one thread at a time. */
#ifndef SMB_MSG_TRANSPORT_H
#define SMB_MSG_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* [MS-SMB2] 2.2.3.1 SMB_DIRECT_BUFFER_DESCRIPTOR_V1 (and [MS-SMBD] 2.2.3.1): where the peer
 * may read or write with RDMA. Host byte order here; little-endian on the wire. */
typedef struct smb_buffer_desc {
    uint64_t offset; /* the address the peer names in its RDMA request (tagged offset) */
    uint32_t token;  /* the STag / memory token */
    uint32_t length;
} smb_buffer_desc;

/* A buffer registered for the peer's RDMA access until released. Opaque. */
typedef struct smb_rdma_region smb_rdma_region;

enum smb_rdma_access {
    SMB_RDMA_PEER_WRITES = 1, /* an SMB2 READ: the server writes the data into it */
    SMB_RDMA_PEER_READS = 2,  /* an SMB2 WRITE: the server reads the data from it */
};

/* How a region ended ([MS-SMBD] 3.1.4.2 / [MS-SMB2] 3.2.5.x): the peer invalidated it with a
 * Send with Invalidate naming its token, or this side invalidated it locally. */
enum smb_rdma_release {
    SMB_RDMA_RELEASED_BY_PEER = 1,
    SMB_RDMA_RELEASED_LOCALLY = 2,
};

/* Counters a transport keeps; the tool prints them. */
typedef struct smb_transport_stats {
    uint64_t messages_sent, messages_received;
    uint64_t fragments_sent, fragments_received;
    uint64_t bytes_sent, bytes_received; /* SMB2 bytes (payload of data transfer messages) */
    uint64_t regions_registered;
    uint64_t remote_invalidations; /* regions the peer invalidated (Send with Invalidate) */
    uint64_t local_invalidations;  /* regions this side invalidated itself */
    uint64_t credits_granted_to_peer, credits_granted_by_peer;
    uint64_t keepalives_sent, keepalives_received;
    /* the Responder's own RDMA into and out of the peer's buffers */
    uint64_t rdma_writes, rdma_reads, send_invalidates;
} smb_transport_stats;

typedef struct smb_transport smb_transport;

typedef struct smb_transport_ops {
    const char *name; /* "smbdirect", "tcp" */
    /* Sends one SMB2 message of len bytes (fragmented as the transport needs); may block for
     * send credits. */
    int (*send)(smb_transport *t, const void *msg, size_t len);
    /* Receives one whole SMB2 message into buf (cap bytes); *len its length. Waits at most
     * timeout_ms (-1: no bound): -ETIMEDOUT then, error() naming the wait, and the connection
     * stays. -EMSGSIZE when the message is larger than
     * cap (the message is consumed). -ECONNRESET / -EPIPE when the peer ended the connection. */
    int (*recv)(smb_transport *t, void *buf, size_t cap, size_t *len, int timeout_ms);
    /* RDMA; NULL where the transport has none. Registers [buf, buf+len) for the peer's access
     * and fills up to max_desc descriptors (*ndesc how many). */
    int (*register_buffer)(smb_transport *t, void *buf, size_t len, enum smb_rdma_access access,
                           smb_rdma_region **region, smb_buffer_desc *desc, unsigned max_desc,
                           unsigned *ndesc);
    /* Releases a region after the response that ends its use arrived: if the peer already
     * invalidated it (a Send with Invalidate naming its token), nothing more is needed;
     * otherwise it is invalidated locally. *how says which (may be NULL). */
    int (*release_buffer)(smb_transport *t, smb_rdma_region *region, enum smb_rdma_release *how);
    /* The Responder's RDMA ([MS-SMB2] 3.3.5.12 READ, 3.3.5.13 WRITE over SMB Direct); NULL on
     * an Initiator and where the transport has none. peer_write moves len bytes from src into
     * the peer's buffers the descriptors name, in order (an RDMA Write each); peer_read fills
     * dst from them (RDMA Reads, at most the negotiated read depth in flight). Both return when
     * the data has moved: -EACCES where the peer refused a token or range (the connection is
     * then gone, as the transport's error says), -EINVAL where the descriptors hold fewer than
     * len bytes. */
    int (*peer_write)(smb_transport *t, const smb_buffer_desc *desc, unsigned ndesc,
                      const void *src, size_t len);
    int (*peer_read)(smb_transport *t, const smb_buffer_desc *desc, unsigned ndesc, void *dst,
                     size_t len);
    /* As send(), the message's last fragment a Send with Invalidate of the peer's token
     * ([MS-SMBD] 3.1.4.1, SMB2_CHANNEL_RDMA_V1_INVALIDATE); NULL where there is none. */
    int (*send_invalidate)(smb_transport *t, const void *msg, size_t len, uint32_t token);
    /* The largest message send()/recv() carry, and the largest RDMA region (0: no RDMA). */
    size_t (*max_message)(smb_transport *t);
    size_t (*max_rdma)(smb_transport *t);
    void (*get_stats)(smb_transport *t, smb_transport_stats *out);
    const char *(*error)(smb_transport *t); /* the last failure, one line; "" when none */
    /* Ends the connection (orderly where it can) and frees everything. */
    void (*destroy)(smb_transport *t);
} smb_transport_ops;

struct smb_transport {
    const smb_transport_ops *ops;
};

static inline const char *smb_transport_error(smb_transport *t)
{
    return t->ops->error(t);
}

#ifdef __cplusplus
}
#endif
#endif
