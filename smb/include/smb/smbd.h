/* SMB Direct ([MS-SMBD]) on softndk's NDK interface: an smb_transport (msg_transport.h) whose
 * messages travel as Sends over an iWARP connection, with credits, fragmentation and RDMA
 * buffer registration as [MS-SMBD] 3.1 describes. The consumer opens the NDK adapter and keeps
 * it open while the transport lives.
 *
 * Statuses: smbd_connect returns 0, or a negative errno value with one line in err:
 *   -ECONNREFUSED  no SMB Direct listener at the address (NdkConnect STATUS_CONNECTION_REFUSED)
 *   -ETIMEDOUT     the connection or the negotiation did not complete in time
 *   -EPROTO        the peer's Negotiate Response failed a check of [MS-SMBD] 3.1.5.7
 *   -ECONNRESET    the peer ended the connection during setup
 *   -ENOMEM / -EIO an NDK object could not be created (the NDK status is named) */
#ifndef SMB_SMBD_H
#define SMB_SMBD_H

#include <ndk/softndk.h>
#include <smb/msg_transport.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This side's limits ([MS-SMBD] 3.1.1.1); zero fields take the defaults in brackets. */
typedef struct smbd_params {
    uint16_t receive_credit_max;   /* receives posted [255] */
    uint16_t send_credit_target;   /* credits asked of the peer [255] */
    uint32_t max_send_size;        /* [1364] */
    uint32_t max_receive_size;     /* [1364] */
    uint32_t max_fragmented_size;  /* largest upper-layer message received [1 MiB] */
    uint32_t max_read_write_size;  /* largest RDMA region offered [8 MiB] */
    uint32_t inbound_read_limit;   /* IRD: the peer's RDMA Reads in flight [16] */
    uint32_t keepalive_ms;         /* idle time before a keepalive [120000] */
    uint32_t negotiate_timeout_ms; /* [120000] */
} smbd_params;

int smbd_connect(NDK_ADAPTER *adapter, const struct sockaddr *dst, socklen_t dst_len,
                 const smbd_params *params, smb_transport **out, char *err, size_t errlen);

/* Negotiated values, valid after smbd_connect (0 otherwise). */
typedef struct smbd_negotiated {
    uint32_t max_send_size, max_receive_size, max_fragmented_send, max_fragmented_receive;
    uint32_t max_read_write_size;
    uint16_t send_credit_target, receive_credit_target;
} smbd_negotiated;
void smbd_get_negotiated(smb_transport *t, smbd_negotiated *out);

/* The Responder: a listener on addr (port 0: any; 5445 is SMB Direct's iWARP port) whose
 * connect requests smbd_accept answers one at a time, each with its own transport (used by one
 * thread; several connections may run on several threads). smbd_listen: 0, -EADDRINUSE, or an
 * NDK failure named in err. smbd_accept: 0; -ETIMEDOUT when no request came in timeout_ms (-1:
 * no bound); for a request that failed on its way in (the peer's negotiate request failed
 * 3.1.5.6: -EPROTO, or -EPROTONOSUPPORT after answering STATUS_NOT_SUPPORTED; it vanished:
 * -ECONNRESET) the error names it and the caller simply accepts again.
 * Backlog: up to 64 connect requests wait for smbd_accept, each Initiator's connect pending
 * meanwhile (on softndk bounded by its ConnectTimeoutMs, 10 s by default: a request taken
 * after that fails smbd_accept with -ECONNRESET). With 64 waiting the listener pauses its
 * connect events: further requests are refused, not queued (an smbd_connect Initiator gets
 * -ECONNREFUSED, STATUS_CONNECTION_REFUSED), until smbd_accept has taken the backlog down to
 * 32. */
typedef struct smbd_listener smbd_listener;
int smbd_listen(NDK_ADAPTER *adapter, const struct sockaddr *addr, socklen_t addr_len,
                const smbd_params *params, smbd_listener **out, char *err, size_t errlen);
uint16_t smbd_listener_port(const smbd_listener *l);
int smbd_accept(smbd_listener *l, smb_transport **out, int timeout_ms, char *err, size_t errlen);
/* Stops listening, refuses what is still waiting (STATUS_CONNECTION_REFUSED at the peer),
 * frees. Call it after destroying every transport it accepted: the NDK listener's close
 * completes only once every connection that came through it is closed, and waits for that. */
void smbd_listener_close(smbd_listener *l);

#ifdef __cplusplus
}
#endif
#endif
