/* The connection's state: struct sndk_conn and the types its parts share. Every file of the
 * connection reads it; each part declares its own functions in its own header (conn.h, phase.h,
 * tx.h, rx.h, place.h, rnr.h, watch.h, sq.h). docs/datapath.md explains the design. */
#ifndef SOFTNDK_DATAPATH_CONN_STATE_H
#define SOFTNDK_DATAPATH_CONN_STATE_H

#include "device/access.h"
#include "datapath/link.h"
#include "datapath/stream.h"
#include "device/qp_state.h"
#include "datapath/dp_hooks.h"
#include "engine/engine.h"
#include "iwarp/fpdu.h"
#include "iwarp/parser.h"
#include "observe/counters.h"
#include "faults/faults.h"
#include "observe/pcap.h"
#include "observe/trace.h"

#include <string.h>

#define SNDK_TX_BATCH   64   /* FPDUs gathered into one writev */
#define SNDK_TX_IOV     512  /* iovecs of one writev (<= IOV_MAX) */
#define SNDK_TX_SEG_IOV 34   /* iovecs one FPDU may use: header, 32 payload pieces, trailer */
#define SNDK_RX_STAGE   4096 /* receive staging for headers and small messages, see rx.c */

/* Why a connection ends: built where an end is found, kept in the connection's one end record
 * (struct sndk_conn_end) and acted on by conn.c's conn_end(). */
struct sndk_fail {
    NTSTATUS link_status; /* the link's aborted event */
    ULONG reason;         /* its ProviderDisconnectReason, see SNDK_REASON_* */
    NTSTATUS rx_status;   /* for the receive being placed (0: STATUS_CANCELLED) */
    ULONG rx_code;        /* its ProviderErrorCode */
    bool send_term;       /* send `term` before closing */
    struct sndk_term term;
    bool named;         /* a received Terminate names one of our requests: */
    uint8_t named_kind; /* SNDK_SQ_SEND / _READ: by MSN; SNDK_SQ_WRITE: by STag and TO */
    uint32_t named_msn;
    uint32_t named_stag;
    uint64_t named_to;
    NTSTATUS named_status; /* what that request completes with */
    bool notify;           /* fire the link's aborted event */
    bool rst;              /* close with RST (no Terminate was sent) */
    bool graceful;         /* the end of sndk_qp_shutdown: shutdown_done, no aborted event */
    NTSTATUS shut_status;
};

/* ProviderDisconnectReason of an aborted connection: who sent the Terminate, and its
 * layer/etype/code; or a local cause. */
#define SNDK_REASON_TERM_SENT          0x01000000u
#define SNDK_REASON_TERM_RECV          0x02000000u
#define SNDK_REASON_TERM(dir, l, t, c) ((dir) | (ULONG)(l) << 16 | (ULONG)(t) << 8 | (ULONG)(c))
#define SNDK_REASON_RESET              0x03000000u /* TCP reset, I/O error, peer vanished */
#define SNDK_REASON_LOCAL              0x04000000u /* flush, close, abort by the consumer */

/* The connection is gone under us (a reset, an I/O error, an injected drop): no Terminate, an
 * RST, the link's event STATUS_CONNECTION_RESET. */
static inline void sndk_fail_reset(struct sndk_fail *fail)
{
    memset(fail, 0, sizeof *fail);
    fail->link_status = STATUS_CONNECTION_RESET;
    fail->reason = SNDK_REASON_RESET;
    fail->notify = true;
    fail->rst = true;
}

/* Who found the end the record holds. */
enum sndk_end_finder {
    SNDK_END_NONE,     /* nothing has ended the connection */
    SNDK_END_RX,       /* the receive side: the peer's Terminate, a fault in its stream, a reset */
    SNDK_END_TX,       /* the send side: a request failing its checks, a Read's source revoked,
                          an injected fault, a reset on send */
    SNDK_END_LOCAL,    /* the consumer or the connector: flush, close, abort, detach, overrun */
    SNDK_END_SHUTDOWN, /* NdkDisconnect's end: both FINs, or its bound expired */
    SNDK_END_FINDER_COUNT
};

/* The one record of why a connection ended. The first end found wins: every later one (the
 * other direction's, a close racing a Terminate, a second pass) is dropped, and everyone who
 * acts on the end acts on this one. Written once, holding tx_lock (sndk_conn_end_record);
 * `by` is stored last with release, so a reader that loads it set (acquire) reads `why`
 * without a lock: it never changes again. */
struct sndk_conn_end {
    _Atomic uint8_t by; /* enum sndk_end_finder */
    struct sndk_fail why;
};

#define SNDK_RD_MAX 128 /* IRD / ORD ceiling (adapter MaxInbound/OutboundReadLimit) */

enum sndk_rec_end {
    SNDK_REC_NONE, /* nothing finishes with this FPDU (or a Read Request: it waits) */
    SNDK_REC_REQ,  /* the last FPDU of SQ request `req`: it is done when this is out */
    SNDK_REC_RESP, /* the last FPDU of the Read Response at the head of the IRQ */
};

struct sndk_tx_rec {
    uint32_t wire_len;
    uint8_t ends; /* enum sndk_rec_end */
    bool resp;    /* part of a Read Response (else of the request req) */
    uint32_t req; /* its SQ counter (SNDK_REC_REQ: the request it ends) */
    /* source check (io->src_iov set): the payload iovecs in src_iov and their CRC32c when
     * the FPDU was built */
    uint16_t pay_first, pay_n;
    uint32_t pay_sum;
};

/* An inbound Read Request waiting for (or in) its response. */
struct sndk_irq_entry {
    struct sndk_read_req rr;
    uint32_t msn;
};

/* Access-check result -> the wire fault a tagged placement (Write / Read Response) raises. */
static inline int sndk_acc_tagged_werr(enum sndk_access_result r)
{
    switch (r) {
    case SNDK_ACC_UNASSOC:
        return -SNDK_WERR_UNASSOC;
    case SNDK_ACC_BOUNDS:
        return -SNDK_WERR_BOUNDS;
    case SNDK_ACC_WRAP:
        return -SNDK_WERR_TO_WRAP;
    case SNDK_ACC_TOO_MANY:
        return -SNDK_WERR_LOCAL;
    default:
        return -SNDK_WERR_STAG; /* invalid STag; missing right (DDP has no access code) */
    }
}
/* ... and a Read Request's source. */
static inline int sndk_acc_rreq_werr(enum sndk_access_result r)
{
    switch (r) {
    case SNDK_ACC_UNASSOC:
        return -SNDK_WERR_RREQ_UNASSOC;
    case SNDK_ACC_BOUNDS:
        return -SNDK_WERR_RREQ_BOUNDS;
    case SNDK_ACC_WRAP:
        return -SNDK_WERR_RREQ_TO_WRAP;
    case SNDK_ACC_RIGHTS:
        return -SNDK_WERR_RREQ_ACCESS;
    case SNDK_ACC_TOO_MANY:
        return -SNDK_WERR_LOCAL;
    default:
        return -SNDK_WERR_RREQ_STAG;
    }
}

/* The TX gate. An MPA Responder that negotiated no RTR must not send an FPDU before it has
 * received the Initiator's first one (RFC 5044 section 7.1.2; Linux siw fails the connection
 * otherwise): its gate starts AWAITING and opens when RX completes the first FPDU. Every other
 * connection starts OPEN. AWAITING => HOLDING when something was ready to go while awaiting
 * (counted in ResponderHeld and traced once). */
enum sndk_tx_gate {
    SNDK_TXG_OPEN,
    SNDK_TXG_AWAITING, /* nothing of ours is ready yet */
    SNDK_TXG_HOLDING,  /* requests (or a FIN) wait for the Initiator's first FPDU */
    SNDK_TXG_COUNT
};

enum sndk_tx_result {
    SNDK_TX_DRAINED,   /* everything posted is in TCP */
    SNDK_TX_BLOCKED,   /* the socket is full: EPOLLOUT armed, the progress thread continues */
    SNDK_TX_LOCAL_ERR, /* the next request failed its local checks: the QP must fail */
    SNDK_TX_IO_ERR,    /* the socket failed */
};

enum sndk_rx_result {
    SNDK_RXR_OK,
    SNDK_RXR_PEER_FIN, /* orderly end of the peer's stream, at an FPDU boundary */
    SNDK_RXR_FAIL,     /* *fail says why */
};

/* The life of the connection under a QP, from its attach to its end. The QP's own state
 * (device/qp_state.h: idle, connected, disconnecting, error) is what the consumer sees; this is
 * what the socket is doing. Written only through sndk_conn_phase_set(), which refuses illegal moves
 * and logs `X => Y (why)`; each move is made holding the lock its readers hold (listed), so a
 * reader holding that lock sees the phase stable:
 *
 *   attaching --attach: socket watched (state_lock)--> live
 *   live --NdkDisconnect (tx_lock)--> shutting-down --last request out, FIN (tx_lock)--> fin-sent
 *   live | shutting-down | fin-sent --an end found on a consumer thread (rx_lock + tx_lock)-->
 *       failing --conn_end on the progress thread--> ended
 *   attaching | live | shutting-down | fin-sent | failing --conn_end (rx_lock + tx_lock)-->
 *       ended
 *
 * The Responder rule (no RTR negotiated: TX held until the peer's first FPDU) is no phase of its
 * own: the TX gate (sndk_tx_gate_*, tx.c) holds the send direction within live.
 * The peer's FIN is the receive direction's own fact (peer_fin): it arrives in any phase
 * before ended and does not change what we may send. */
enum sndk_conn_phase {
    SNDK_PHASE_ATTACHING,     /* QP connected and on its CQs; the socket not watched yet: a
                                 failure now leaves the source's removal to attach */
    SNDK_PHASE_LIVE,          /* the socket is watched by its progress thread */
    SNDK_PHASE_SHUTTING_DOWN, /* NdkDisconnect: our FIN goes after the last posted request */
    SNDK_PHASE_FIN_SENT,      /* half-closed: our stream ended, the peer's FIN ends the rest */
    SNDK_PHASE_FAILING,       /* a consumer thread (polling, posting) found the end and handed
                                 it to the progress thread (end_work): nothing more is sent or
                                 received; requests posted meanwhile are cancelled with it */
    SNDK_PHASE_ENDED,         /* decided by conn_end: the socket is src_done's alone */
    SNDK_PHASE_COUNT
};

/* Receiver-not-ready (docs/datapath.md, "Receiver not ready"): with RnrWaitMs set, a Send
 * that finds no receive posted holds the stream instead of ending it, as RoCE/IB RNR retry
 * does. Written only by rnr_set() in rx.c, holding rx_lock and tx_lock (tx reads it for the
 * watched events, rx for the pass):
 *
 *   receiving --a Send found no receive--> waiting  (EPOLLIN off: TCP backpressure; the
 *                                                   bound's timer armed; RnrWaits counted)
 *   waiting --a receive was posted (QP or SRQ)--> receiving
 *   waiting --the bound expired (or the socket hung up)--> expired --> the Send's Terminate
 *                                                   (DDP untagged, no buffer; RnrTimeouts)
 * expired is final: the connection ends with it. */
enum sndk_rnr_phase { SNDK_RNR_RECEIVING, SNDK_RNR_WAITING, SNDK_RNR_EXPIRED, SNDK_RNR_COUNT };

/* Who reads the connection's stream (docs/datapath.md, "Parking"). Moved only by
 * sndk_rx_park_set() (phase.c), under tx_lock, which watch.c reads it under:
 *
 *   watched --a consumer polls the receive CQ steadily--> parked  (EPOLLIN off; the CQ counts
 *                                                                  its parked connections)
 *   parked --the consumer armed the CQ, or stopped polling--> watched  (EPOLLIN on, the stream
 *                                                                       armed)
 *   watched | parked --the stream closed--> closed  (final: nothing to watch or unpark)
 *
 * Watched is the progress thread's turn, not a promise that EPOLLIN is on: the peer's FIN, an
 * injected stall or a Send waiting for a receive turn it off as well (watch.c). */
enum sndk_rx_park { SNDK_RX_WATCHED, SNDK_RX_PARKED, SNDK_RX_PARK_CLOSED, SNDK_RX_PARK_COUNT };

/* What an outbound Read of the ORQ is (docs/qp.md, "Write completion"): a consumer's Read, or
 * the zero-length Read sent behind Writes under WriteCompletion placed. Either one, answered,
 * tells that every Write cut before it is placed at the peer (RFC 5040: a Read Response
 * follows the placement of everything before its request). */
enum sndk_orq_kind { SNDK_ORQ_READ, SNDK_ORQ_FENCE };

/* When a Write completes on a connection (docs/qp.md, "Write completion"): when TCP has its
 * last byte, or once a Read cut after it is answered (WriteCompletion placed, with ORD > 0). */
enum sndk_write_done { SNDK_WRITE_DONE_IN_TCP, SNDK_WRITE_DONE_PLACED };

/* Writes cut since the last Read or fence at which a fence goes anyway, so that a long stream
 * of Writes is not left without completions until it ends. */
#define SNDK_FENCE_BATCH 16

#define SNDK_EV_PEER_CLOSED   1u
#define SNDK_EV_ABORTED       2u
#define SNDK_EV_SHUTDOWN_DONE 4u

/* TX's cursor (tx.c, under tx_lock): the message being cut into FPDUs. */
struct sndk_tx_cut {
    struct sndk_tx_msg msg; /* the request or response being cut */
    bool msg_active;        /* ... is: msg holds one */
    uint32_t msg_req;       /* what msg is: SQ counter, or a response */
    uint8_t msg_ends;       /* enum sndk_rec_end */
    struct iovec *resp_iov; /* the source of the response being cut */
    int resp_cap;
};

/* RX's placement cursors (rx.c, under rx_lock): the untagged message being placed into a
 * receive, and the Read Response being placed into a Read's sink. Both may be open at once:
 * the peer's Sends and its Read Responses interleave at FPDU boundaries. */
struct sndk_rx_place {
    NTSTATUS cur_err_status;   /* the receive being placed failed its local checks: */
    ULONG cur_err_code;        /* its status and ProviderErrorCode (0: none) */
    bool cur_active;           /* a receive is being filled */
    struct sndk_recv_wqe *cur; /* copy of that receive (room for recv_max_sge SGEs) */
    struct iovec *cur_iov;     /* its SGEs in host memory */
    int cur_niov, cur_cap;
    int cur_i; /* placement cursor: piece and offset in it */
    size_t cur_off;
    bool rd_active; /* a Read Response is being placed into SQ request rd_req */
    uint32_t rd_req;
    uint64_t rd_got;
    int rd_i; /* placement cursor in its sink iovecs */
    size_t rd_off;
};

struct sndk_conn {
    struct sndk_qp *qp;
    struct sndk_conn_rec *crec; /* counters / pcap of the connection (NULL: none); a reference */
    uint64_t rx_fpdus_seen;     /* rx.fpdus already added to crec (under rx_lock) */
    struct sndk_engine *engine;
    struct sndk_stream stream; /* the transport (stream.h): a TCP socket today */
    unsigned thread;
    struct sndk_link_events ev;
    void *ev_ctx;
    struct sndk_source src;
    struct sndk_work src_done;    /* source removed: close the socket, drop the reference */
    struct sndk_work ev_work;     /* delivers ev_pending on `thread`; holds a reference */
    struct sndk_work detach_work; /* on `thread`, after any event work: queue detach_done */
    struct sndk_work end_work;    /* on `thread`: act on `end` (handed over with the move to
                                     failing); holds a reference */
    struct sndk_conn_end end;     /* why it ended: the first end found */
    struct sndk_work *detach_done;
    struct sndk_timer shut_timer; /* sndk_qp_shutdown's bound; holds a reference while pending */
    struct sndk_cq_conn rconn, iconn;
    struct sndk_dp_hooks hooks; /* attached at the seams of dp_seams.h (set before publication) */
    struct sndk_fault_hook *fault_hook; /* fault injection's state (dp_hook_faults.c), or NULL */
    /* Each timer and work item holds a reference on the QP while pending or queued: the
     * engine's own pending state is the record of it (engine.h, "References"). */
    /* injected stalls: a direction is stalled while its timer is pending (sndk_conn_stalled);
     * a TX stall sets tx_blocked too, so posts queue meanwhile */
    struct sndk_timer tx_stall_timer, rx_stall_timer;
    struct sndk_timer rnr_timer; /* the receiver-not-ready bound */
    /* pending while the stream holds memory it could give back once quiet (stream.h
     * trim_wanted): watch.c arms it, conn.c's fn asks the stream */
    struct sndk_timer trim_timer;
    struct sndk_work rnr_work;   /* a receive was posted while waiting: resume on `thread` */
    _Atomic int phase;           /* enum sndk_conn_phase: sndk_conn_phase_set() only */
    /* A polling consumer's next receive pass: not before this (CLOCK_MONOTONIC ns; 0: now).
     * Set when a pass ended in the middle of a large payload, so the rest is read in one
     * piece rather than in crumbs (docs/datapath.md, "Who receives"). */
    _Atomic uint64_t rx_poll_after_ns;
    /* ... nor before this one (0: none): a polled pass emptied the socket between two FPDUs,
     * so the polls of the next SNDK_RX_QUIET_NS do not read (conn.c set_poll_quiet) */
    _Atomic uint64_t rx_quiet_until_ns;
#define SNDK_RX_QUIET_NS 1000u /* no read for this long after a message emptied the socket */
    /* under rx_lock: the arrival rate the back-off assumes, as ns per KiB due (conn.c), learnt
     * from polls that came back too early (nothing new) or in time */
    uint32_t rx_backoff_ns_per_kib;

    /* under qp->state_lock */
    unsigned ev_pending; /* SNDK_EV_* */
    bool detached;
    NTSTATUS ev_abort_status, ev_shut_status;
    ULONG ev_abort_reason;

    /* under qp->rx_lock and qp->tx_lock (written holding both, read holding either) */
    bool peer_fin; /* the peer's FIN was read: no more passes, EPOLLIN off */

    /* under qp->tx_lock */
    _Atomic bool tx_blocked;           /* EPOLLOUT armed (a polling consumer looks without
                                          the lock: conn.c qp_poll_tx) */
    uint8_t rx_park;                   /* enum sndk_rx_park (phase.c sndk_rx_park_set) */
    _Atomic bool rx_watched;           /* the progress thread watches EPOLLIN (written under
                                          tx_lock by update_events; read by passes under rx_lock) */
    _Atomic uint8_t rnr_phase;         /* enum sndk_rnr_phase: written holding rx_lock and tx_lock
                                          (rnr_set); a relaxed load elsewhere is a hint only */
    struct sndk_rnr_waiter rnr_waiter; /* on the SRQ's waiter list (its lock) */
    _Atomic bool sock_failed;          /* a send failed hard (reset): the socket's error is
                                          consumed, so a later read of 0 is not the peer's FIN */
    uint8_t tx_gate;                   /* enum sndk_tx_gate */
    uint32_t msn_send;                 /* next Send MSN (QN 0), first = 1 */
    uint32_t msn_term;                 /* next Terminate MSN (QN 2), first = 1 */
    uint32_t msn_read;                 /* next Read Request MSN (QN 1), first = 1 */
    uint32_t ord, ird;                 /* effective, from the link (<= SNDK_RD_MAX) */
    uint32_t orq[SNDK_RD_MAX];         /* SQ counters of the Reads on the wire, oldest first */
    uint32_t orq_head, orq_count;
    uint8_t orq_kind[SNDK_RD_MAX];        /* enum sndk_orq_kind, by ORQ slot */
    uint32_t orq_covers[SNDK_RD_MAX];     /* its response places the Writes before this SQ
                                             counter */
    uint32_t orq_fence_stag[SNDK_RD_MAX]; /* a fence's private sink STag */
    uint8_t write_done;       /* enum sndk_write_done: when a Write of this connection is done */
    uint32_t writes_unfenced; /* Writes cut since the last Read or fence was cut */
    struct sndk_irq_entry irq[SNDK_RD_MAX]; /* inbound Read Requests, oldest first */
    uint32_t irq_head, irq_count;
    uint32_t irq_built; /* of those, responses completely cut into the batch */
    _Atomic bool tx_kick;       /* RX made TX work possible (a Read ended, a request came) */
    /* (written under tx_lock; kick_tx looks without it first) */
    struct sndk_tx_cfg txcfg;
    struct sndk_tx_cut cut; /* the message being cut into FPDUs (tx.c's) */
    int nrec, rec_i;        /* FPDUs of the current writev batch, first unfinished */
    uint32_t rec_done;      /* bytes of rec[rec_i] already written */
    struct iovec *iov_cur;  /* unwritten part of iov[] */
    int iov_left;
    struct sndk_tx_rec rec[SNDK_TX_BATCH];
    struct sndk_fpdu fp[SNDK_TX_BATCH];
    struct iovec iov[SNDK_TX_IOV];
    /* iov[i] may be lent to the stream (stream.h, writev_lent): a tagged payload (an RDMA
     * Write's or a Read Response's), whose memory stays as it is until the stream settles it */
    uint8_t iov_lend[SNDK_TX_IOV];
    /* Requests and Read Responses whose last byte went out in lent memory the stream has not
     * settled yet (ends, req), retired in order once it has; FIFO of uns_cap (the initiator
     * queue's depth plus the largest IRD), under tx_lock */
    struct sndk_tx_unsettled {
        uint64_t end; /* stream position after the record's last byte */
        uint8_t ends; /* enum sndk_rec_end */
        uint32_t req;
    } * unsettled;
    uint32_t uns_cap, uns_head;
    _Atomic uint32_t uns_n; /* also looked at without the lock by a polling consumer */
    /* SourceCheck on: the batch's iovecs as built (sendmsg progress edits iov in place), so
     * each FPDU's source can be checksummed again once it is sent; NULL when off */
    struct iovec *src_iov;

    /* under qp->rx_lock */
    struct sndk_rx rx;
    bool rx_emptied;            /* the last pass ended on a read shorter than asked (or
                                   EAGAIN): it emptied the socket, inside a payload when the
                                   parser is in DATA (sndk_rx_due_after_pass) */
    struct sndk_rx_place place; /* where the messages in flight are placed (rx.c's) */
    uint8_t stage[SNDK_RX_STAGE];
    uint32_t stage_len, stage_pos;
};

/* Is direction dir stalled by an injected fault? (tx_lock held, or rx_lock for SNDK_FDIR_RX:
 * the stall's arm and its end are made holding them) */
static inline bool sndk_conn_stalled(const struct sndk_conn *io, enum sndk_fault_dir dir)
{
    return sndk_timer_pending(dir == SNDK_FDIR_TX ? &io->tx_stall_timer : &io->rx_stall_timer);
}

/* The phase (phase.c moves it) and the end record, as every part of the connection reads them. */
static inline enum sndk_conn_phase sndk_conn_phase(const struct sndk_conn *io)
{
    return (enum sndk_conn_phase)atomic_load_explicit(&((struct sndk_conn *)io)->phase,
                                                      memory_order_acquire);
}
/* The end was acted on: the socket is no longer ours to use. Stable under rx_lock or tx_lock. */
static inline bool sndk_conn_ended(const struct sndk_conn *io)
{
    return sndk_conn_phase(io) == SNDK_PHASE_ENDED;
}
/* Failing or ended: nothing more is sent or received. Stable under rx_lock or tx_lock. */
static inline bool sndk_conn_stopped(const struct sndk_conn *io)
{
    return sndk_conn_phase(io) >= SNDK_PHASE_FAILING;
}
/* The end recorded, or NULL while none is. Any thread, no lock. */
static inline const struct sndk_fail *sndk_conn_end_found(const struct sndk_conn *io)
{
    return atomic_load_explicit(&((struct sndk_conn *)io)->end.by, memory_order_acquire) !=
                   SNDK_END_NONE
               ? &io->end.why
               : NULL;
}

/* The receiver-not-ready phase (rnr.c moves it); a relaxed load: a hint unless rx_lock or
 * tx_lock is held. */
static inline enum sndk_rnr_phase sndk_rnr_phase(const struct sndk_conn *io)
{
    return (enum sndk_rnr_phase)atomic_load_explicit(&((struct sndk_conn *)io)->rnr_phase,
                                                     memory_order_relaxed);
}

#endif
