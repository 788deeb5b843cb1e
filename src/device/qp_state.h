#ifndef SOFTNDK_DEVICE_QP_STATE_H
#define SOFTNDK_DEVICE_QP_STATE_H

#include <sys/uio.h>

#include "device/cq.h"
#include "device/srq.h"
#include "util/lock.h"

/* QP states (datapath.md#states): one enum, a name table, one transition function per source state,
 * every transition logged. The connection drives them (datapath/conn.c: sndk_qp_set_state).
 *   IDLE --attach--> CONNECTED --shutdown--> DISCONNECTING --peer FIN / timeout--> ERROR
 *                    CONNECTED --fault, Terminate, reset, flush, close, abort--> ERROR
 *   DISCONNECTING --fault, close, abort--> ERROR
 * ERROR is final: the connection is gone and every request has completed or will complete
 * with STATUS_CANCELLED (receives posted later complete at once). */
enum sndk_qp_state {
    SNDK_QP_IDLE,          /* created, not connected: initiator requests are refused */
    SNDK_QP_CONNECTED,     /* bound to an established connection */
    SNDK_QP_DISCONNECTING, /* graceful disconnect under way */
    SNDK_QP_ERROR,         /* connection lost, aborted or shut down: final */
    SNDK_QP_STATE_COUNT
};

/* One initiator request: Send, Write, Read, Bind, FastRegister or Invalidate. Its slot stays
 * taken from posting until it has been retired (decisions 9d). Requests retire in posting order:
 * one that is finished (`done`) waits for every earlier one (a Read finishes when its last Read
 * Response has been placed, the others when their last byte is in TCP or, for the local ones,
 * when they reach their place in the queue). */
struct sndk_sqe {
    void *context;
    struct iovec *iov; /* payload / Read sink: the slot's iovec storage, or its inline copy */
    uint64_t bytes;
    uint32_t flags;    /* NDK_OP_FLAG_* */
    uint32_t inv_stag; /* Send with Invalidate */
    uint32_t msn;      /* Send: QN 0 MSN; Read: QN 1 MSN; assigned when the first byte is built */
    NTSTATUS status;   /* STATUS_SUCCESS, or a local error found when posted */
    ULONG code;        /* ProviderErrorCode with that error */
    int niov;
    uint8_t opcode;          /* RDMAP opcode; the wire layer reads it, the object layer sets it */
    uint8_t kind;            /* enum sndk_sq_kind */
    bool done;               /* finished (under tx_lock): retires once every earlier request has */
    uint32_t rstag;          /* Write / Read: remote token; Read: private sink STag in sink_stag */
    uint64_t rto;            /* Write / Read: remote address */
    uint32_t sink_stag;      /* Read */
    uint32_t local_tok;      /* Read with RDMA_READ_LOCAL_INVALIDATE: token of the first SGE */
    struct sndk_obj *target; /* Invalidate: the MR or MW (a reference until executed) */
};

enum sndk_sq_kind {
    SNDK_SQ_SEND,
    SNDK_SQ_WRITE,
    SNDK_SQ_READ,
    SNDK_SQ_BIND,
    SNDK_SQ_FAST_REGISTER,
    SNDK_SQ_INVALIDATE,
};

struct sndk_conn; /* the connection under the QP (src/datapath/conn.h) */

/* Lock order (docs/datapath.md#locking), outermost first:
 *   cq->conn_lock -> state_lock -> rx_lock -> tx_lock -> srq->lock -> cq->lock
 *   -> STag table lock -> engine locks.
 * A consumer-thread CQ poll takes rx_lock only with trylock, so it never waits for a progress
 * thread and never inverts the order. */
struct sndk_qp {
    struct sndk_obj base;
    struct sndk_pd *pd;
    struct sndk_cq *rcq, *icq;
    struct sndk_srq *srq; /* NULL: own receive queue */
    void *context;        /* QPContext */
    uint32_t initiator_depth, initiator_max_sge, inline_size;
    uint32_t recv_max_sge; /* of the RQ or of the SRQ */
    _Atomic int state;     /* enum sndk_qp_state; written under state_lock */

    struct sndk_mutex state_lock; /* transitions; io->ev_*, io->detached */

    /* The consumer verifier's [POST-2] check (verify/verify.h): threads now inside a post on
     * the initiator queue / the receive queue; only counted with the verifier on. */
    atomic_uint verify_sq_callers, verify_rq_callers;
    /* Held across a receive post under the verifier only: posts that break [POST-2] are named
     * and serialized (core/qp.c qp_receive_verified). */
    struct sndk_mutex verify_rq_serial;

    /* Initiator queue. Slots [sq_head, sq_tail) are taken (free-running counters, slot =
     * counter & sq_mask). The poster owns sq_tail and the slot at it; sq_head moves under
     * tx_lock and is read by the poster without it (acquire) to see free slots. The slots are
     * a power of two, at least initiator_depth (which alone bounds what is taken): only then
     * does a slot follow its counter across the counters' wrap at 2^32, which the remainder
     * by a depth that does not divide 2^32 does not (counters 2^32 - 1 and 0 shared a slot). */
    struct sndk_mutex tx_lock;
    struct sndk_sqe *sq;
    struct iovec *sq_iov; /* initiator_max_sge (at least 1) iovecs per slot */
    uint8_t *sq_inline;   /* inline_size bytes per slot */
    uint32_t sq_iov_stride;
    uint32_t sq_mask;         /* slots - 1 */
    uint32_t sq_tail;         /* written under tx_lock by the poster */
    _Atomic uint32_t sq_head; /* written under tx_lock */
    uint32_t sq_sent;         /* under tx_lock: next request to put on the wire */

    /* Receive queue (own, when srq == NULL): posted by the consumer (serialized, no lock),
     * taken by the receive path and flushes under rx_lock (device/srq.h). */
    struct sndk_recv_ring rq;

    struct sndk_mutex rx_lock; /* the receive side of io: parser, current receive */
    struct sndk_conn *io;      /* set once by the first attach, freed with the QP */
};

static inline enum sndk_qp_state sndk_qp_state(const struct sndk_qp *qp)
{
    return (enum sndk_qp_state)atomic_load_explicit(&((struct sndk_qp *)qp)->state,
                                                    memory_order_acquire);
}

#endif
