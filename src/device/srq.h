#ifndef SOFTNDK_DEVICE_SRQ_H
#define SOFTNDK_DEVICE_SRQ_H

#include <pthread.h>

#include "device/notify.h"
#include "device/pd_state.h"
#include "util/lock.h"

/* A posted receive: its context and a copy of its SGEs (the consumer's array is only read
 * during the call). Used by QP receive queues and SRQs alike. */
struct sndk_recv_wqe {
    void *context;
    uint32_t nsge;
    uint64_t bytes;
    NDK_SGE sge[]; /* stride: the queue's max SGE count */
};

/* A FIFO of receive WQEs with a fixed SGE stride: the receives at positions [taken, posted)
 * of a sequence that never wraps (64 bits), position p in slot p % depth. One thread posts
 * (moves `posted`) and one takes (moves `taken`), each publishing with a release store and
 * reading the other's position with an acquire load, so that a ring whose poster and taker
 * are each serialized needs no lock between them: a QP's own receive queue, whose posts the
 * consumer serializes (NDKPI) and whose takes the receive side's rx_lock does. An SRQ, taken
 * from by many connections, keeps both under its lock. */
struct sndk_recv_ring {
    unsigned char *slots;
    uint32_t depth, max_sge;
    size_t stride;
    _Atomic uint64_t posted; /* receives ever posted: written by the poster only */
    _Atomic uint64_t taken;  /* receives ever taken: written by the taker only */
};

bool sndk_recv_ring_init(struct sndk_recv_ring *r, uint32_t depth, uint32_t max_sge);
void sndk_recv_ring_destroy(struct sndk_recv_ring *r);
/* The i-th queued receive from the oldest (the taker's side, or under a lock that holds off
 * both sides). */
struct sndk_recv_wqe *sndk_recv_ring_at(const struct sndk_recv_ring *r, uint32_t i);
/* Receives queued: exact on either side of a serialized ring, a look from anywhere else. */
uint32_t sndk_recv_ring_count(const struct sndk_recv_ring *r);
/* Validate and copy a posted receive, then publish it to the taker: STATUS_SUCCESS,
 * STATUS_INVALID_PARAMETER (NULL SGE array with nSge > 0), STATUS_DATA_OVERRUN (nSge above
 * max_sge, or more than max_transfer bytes), STATUS_NO_MORE_ENTRIES (full). Until publish,
 * the taker cannot see it: `before_publish`, when not NULL, runs with ctx between the copy and
 * the publication (the verifier's commit of the post). The poster's side. */
NTSTATUS sndk_recv_ring_push(struct sndk_recv_ring *r, void *context, const NDK_SGE *sgl,
                             ULONG nsge, ULONG max_transfer, void (*before_publish)(void *),
                             void *ctx);
/* Forget the first n queued receives (a flush that completed them). The taker's side. */
void sndk_recv_ring_drop(struct sndk_recv_ring *r, uint32_t n);

/* A connection waiting for a receive of an SRQ (receiver not ready, docs/datapath.md). The
 * connection embeds one and says how to wake it: the SRQ knows no connection, only this. */
struct sndk_rnr_waiter {
    /* On the SRQ's list while pprev is set (under srq->lock): membership is the link itself. */
    struct sndk_rnr_waiter *next, **pprev;
    /* A receive was posted: called under srq->lock, so it takes no lock, only queues work. */
    void (*kick)(struct sndk_rnr_waiter *w);
};

struct sndk_srq {
    struct sndk_obj base;
    NDK_FN_SRQ_NOTIFICATION_CALLBACK notify_cb;
    void *notify_ctx;
    struct sndk_mutex lock; /* guards ring and the notification state */
    struct sndk_recv_ring ring;
    uint32_t threshold;
    /* The consumer's arm ([SRQ-3]): set by a threshold > 0 (NdkModifySrq, or the create's
     * when there is a callback), cleared when the count falls below it and by close. */
    bool armed;
    struct sndk_notify notify;           /* its delivery (device/notify.h) */
    struct sndk_rnr_waiter *rnr_waiters; /* connections waiting for a receive; under lock */
    /* The consumer verifier's [SRQ-7] check (verify/verify.h): threads now inside
     * NdkSrqReceive; only counted with the verifier on. */
    atomic_uint verify_callers;
};

/* Take the oldest queued receive (posting order, whichever QP asks) into *out (room for the
 * SRQ's max SGE count); fires the threshold notification when the count falls below it.
 * false when the SRQ is empty. Any thread; takes srq->lock. */
bool sndk_srq_take(struct sndk_srq *srq, struct sndk_recv_wqe *out);

/* w waits for a receive of srq (listed once however often asked) / no longer does (also when
 * not listed). Posting on the SRQ calls the kick of every waiter. Any thread; takes srq->lock. */
void sndk_srq_rnr_wait(struct sndk_srq *srq, struct sndk_rnr_waiter *w);
void sndk_srq_rnr_done(struct sndk_srq *srq, struct sndk_rnr_waiter *w);

/* Take the oldest receive of a ring into *out; false when it is empty. The taker's side. */
bool sndk_recv_ring_take(struct sndk_recv_ring *r, struct sndk_recv_wqe *out);

static inline struct sndk_srq *sndk_srq_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeSrq);
    return o ? sndk_container_of(o, struct sndk_srq, base) : NULL;
}

/* NdkCreateSrq, a PD dispatch slot (core/pd.c lists it). */
NTSTATUS sndk_srq_create(NDK_PD *pNdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge,
                         ULONG NotifyThreshold, NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification,
                         PVOID SrqNotificationContext, GROUP_AFFINITY *Affinity,
                         NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                         NDK_SRQ **ppNdkSrq);

#endif
