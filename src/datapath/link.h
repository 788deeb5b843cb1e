/* The contract between the connection layer (connector.c, listener.c: TCP + MPA handshake) and
 * the QP data path (qp.c, datapath/tx.c, datapath/rx.c).
 *
 * The connector runs the MPA exchange on its own socket, reading frames with exact lengths so
 * that no FPDU byte is consumed. Once the connection is established (RTR sent or received when
 * peer-to-peer mode was negotiated) it attaches the socket to the QP; from then on the QP owns
 * the socket's I/O and reports the connection's end through the events below. The connector
 * keeps its own reference on the QP (the QP is its antecedent) until it detaches.
 *
 * Events are called on the socket's progress thread, never with a QP lock held, each at most
 * once per attach, and never after the done item of sndk_qp_detach has been queued. */
#ifndef SOFTNDK_DATAPATH_LINK_H
#define SOFTNDK_DATAPATH_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include <ndk/ndkpi.h>

struct sndk_qp;
struct sndk_conn_rec;
struct sndk_stream_ops;

struct sndk_link_params {
    int fd;                 /* connected TCP socket, O_NONBLOCK; the QP closes it */
    /* The transport behind fd (datapath/stream.h); NULL: fd is a TCP socket. */
    const struct sndk_stream_ops *stream_ops;
    void *stream_priv;      /* its state (stream.h: struct sndk_stream.priv), NULL for TCP */
    unsigned thread;        /* progress thread that serves it */
    bool crc;               /* CRC32c on every FPDU, both directions */
    uint8_t mpa_rev;        /* 1 or 2 (informational) */
    bool active;            /* this end connected (else it accepted): for fault rules' side= */
    uint32_t rx_read_msn;   /* MSN of the first inbound Read Request (0 or 1: 1; 2 after a
                               zero-length Read RTR took MSN 1) */
    uint32_t ird, ord;      /* effective: inbound Read Requests we queue / Reads we may issue */
    bool await_initiator;   /* MPA Responder without an RTR: no FPDU of ours may go before the
                               Initiator's first one has arrived (RFC 5044 section 7.1.2) */
    /* The connection's counters / ndkstat / pcap record (observe/counters.h), or NULL. A QP that
     * keeps it takes a reference (sndk_conn_rec_get) and drops it when it lets go. */
    struct sndk_conn_rec *rec;
};

struct sndk_link_events {
    /* The peer closed its sending side gracefully (TCP FIN after its last FPDU) while we had
     * not started a shutdown: the connector fires the consumer's disconnect event. Outstanding
     * requests are NOT flushed for this ([DISC-3]). */
    void (*peer_closed)(void *ctx);
    /* The connection failed: a Terminate sent or received, a reset, an I/O error, a peer that
     * vanished — or the consumer flushed or closed the connected QP (status STATUS_CANCELLED,
     * reason class SNDK_LINK_REASON_LOCAL). Every outstanding request has been (or is being)
     * completed with an error or STATUS_CANCELLED; the QP is in its final error state.
     * `reason` is softndk's ProviderDisconnectReason, see below. A failure while a shutdown is
     * under way is reported through shutdown_done instead. */
    void (*aborted)(void *ctx, NTSTATUS status, ULONG reason);
    /* A shutdown asked for with sndk_qp_shutdown finished: everything posted before it went
     * out, our FIN was sent and the peer's FIN arrived (or `status` says why not:
     * STATUS_IO_TIMEOUT, STATUS_CONNECTION_RESET, or the status of an abort that came first).
     * The QP has flushed (STATUS_CANCELLED). */
    void (*shutdown_done)(void *ctx, NTSTATUS status);
};

/* ProviderDisconnectReason values (NDK_FN_DISCONNECT_EVENT_CALLBACK_EX): the top byte is the
 * class, the low three bytes a Terminate's layer, type and code where one was exchanged. */
#define SNDK_LINK_REASON_CLASS(r)   ((r)&0xFF000000u)
#define SNDK_LINK_REASON_TERM_SENT  0x01000000u /* we sent a Terminate: 0x01LLTTCC */
#define SNDK_LINK_REASON_TERM_RECV  0x02000000u /* the peer sent one: 0x02LLTTCC */
#define SNDK_LINK_REASON_RESET      0x03000000u /* TCP reset, I/O error, peer vanished */
#define SNDK_LINK_REASON_LOCAL      0x04000000u /* flush or close by the consumer */

/* IDLE -> CONNECTED, before the QP is linked to its CQs (a consumer polling them sees it
 * connected). Returns 0, -EBUSY (QP not idle: already bound), -ECANCELED (its close began),
 * -errno from the engine. */
int sndk_qp_attach(struct sndk_qp *qp, const struct sndk_link_params *p,
                   const struct sndk_link_events *ev, void *ctx);

/* The connection attempt the QP was given to (NdkAccept) failed before it was attached:
 * IDLE -> ERROR, every posted receive completes STATUS_CANCELLED, as after a disconnect
 * (docs/decisions.md). Nothing if the QP is not idle. The caller holds no QP lock. */
void sndk_qp_connect_failed(struct sndk_qp *qp);

/* Graceful disconnect (NdkDisconnect): once every request posted so far has been sent, send
 * FIN; shutdown_done follows when the peer's FIN arrives, within timeout_ms (then
 * STATUS_IO_TIMEOUT and the connection is reset). Any thread, non-blocking. */
void sndk_qp_shutdown(struct sndk_qp *qp, unsigned timeout_ms);
/* Initiator requests posted and not yet retired, and the RequestContext of the oldest (the
 * consumer verifier's DISC-6 check, verify/verify.h). Takes the QP's tx_lock. */
uint32_t sndk_qp_initiator_outstanding(struct sndk_qp *qp, void **oldest_ctx);

/* Abortive disconnect: close the socket (RST, unless a Terminate or FIN was sent), complete
 * everything outstanding with STATUS_CANCELLED. No event follows for it. Any thread,
 * non-blocking. A shutdown of a QP that already failed answers shutdown_done at once with the
 * abort's status. The QP holds its own reference on the connection; `ev` may be NULL. */
void sndk_qp_abort(struct sndk_qp *qp);

/* The connector lets go of the QP (it is closing): abort if still connected, stop calling the
 * events; `done` is queued on the engine once no event callback is running or will run. */
void sndk_qp_detach(struct sndk_qp *qp, struct sndk_work *done);

#endif
