#ifndef SOFTNDK_CORE_QP_H
#define SOFTNDK_CORE_QP_H

#include "core/cq.h"
#include "core/srq.h"

/* QP states (style.md §8): one enum, a name table, logged transitions. */
enum sndk_qp_state {
    SNDK_QP_IDLE,          /* created, not connected: initiator requests are refused */
    SNDK_QP_CONNECTED,     /* bound to an established connection */
    SNDK_QP_DISCONNECTING, /* graceful disconnect under way */
    SNDK_QP_ERROR,         /* connection lost or aborted: final */
    SNDK_QP_STATE_COUNT
};

struct sndk_qp {
    struct sndk_obj base;
    struct sndk_pd *pd;
    struct sndk_cq *rcq, *icq;
    struct sndk_srq *srq; /* NULL: own receive queue */
    void *context;        /* QPContext */
    uint32_t initiator_depth, initiator_max_sge, inline_size;
    _Atomic int state;    /* enum sndk_qp_state */

    pthread_mutex_t rq_lock; /* receive queue: posting vs flush vs the data path */
    struct sndk_recv_ring rq;
};

const char *sndk_qp_state_name(enum sndk_qp_state s);

#endif
