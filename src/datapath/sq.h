/* The initiator queue's slots and their retirement into the CQ (sq.c). */
#ifndef SOFTNDK_DATAPATH_SQ_H
#define SOFTNDK_DATAPATH_SQ_H

#include "device/qp_state.h"

/* The slot of SQ counter idx. */
static inline struct sndk_sqe *sndk_sq_slot(struct sndk_qp *qp, uint32_t idx)
{
    return &qp->sq[idx & qp->sq_mask];
}
/* Retire the request at sq_head with st (no CQE for a silent success). tx_lock held. */
void sndk_sq_retire_head(struct sndk_qp *qp, NTSTATUS st, ULONG code);
/* Retire, in order, the finished requests at the head of the queue. tx_lock held. */
void sndk_sq_retire_done(struct sndk_qp *qp);

#endif
