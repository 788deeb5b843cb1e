/* The per-thread lock-rank bookkeeping behind util/lock.h. */
#include "util/lock.h"

#include <stdio.h>

#include "util/clock.h"

static const char *const rank_names[SNDK_LOCK_RANKS] = {
    [SNDK_LOCK_UNRANKED] = "unranked",
    [SNDK_LOCK_DEVICES] = "the device list lock",
    [SNDK_LOCK_LISTENER] = "l->lock",
    [SNDK_LOCK_CONNECTOR] = "c->lock",
    [SNDK_LOCK_ADMISSION] = "l->adm.lock",
    [SNDK_LOCK_ENDPOINTS] = "the endpoint table lock",
    [SNDK_LOCK_CQ_CONN] = "cq->conn_lock",
    [SNDK_LOCK_QP_STATE] = "qp->state_lock",
    [SNDK_LOCK_QP_RX] = "qp->rx_lock",
    [SNDK_LOCK_QP_TX] = "qp->tx_lock",
    [SNDK_LOCK_SRQ] = "srq->lock",
    [SNDK_LOCK_CQ] = "cq->lock",
    [SNDK_LOCK_STAG] = "the STag table lock",
    [SNDK_LOCK_CQ_READY] = "cq->ready_mu",
    [SNDK_LOCK_ADAPTER] = "a->lock",
    [SNDK_LOCK_FAULTS] = "the fault rules' lock",
    [SNDK_LOCK_STAT] = "the ndkstat lock",
    [SNDK_LOCK_COUNTERS] = "the counter registry lock",
    [SNDK_LOCK_PCAP_LIST] = "the capture file list lock",
    [SNDK_LOCK_PCAP] = "a capture file's lock",
    [SNDK_LOCK_TRACE] = "the trace log lock",
    [SNDK_LOCK_SHM_MAPS] = "the shared-memory ring map lock",
    [SNDK_LOCK_ENGINE_QUIESCE] = "e->quiesce_lock",
    [SNDK_LOCK_ENGINE_THREAD] = "t->lock",
    [SNDK_LOCK_ENGINE_DRAIN] = "e->drain_lock",
};

const char *sndk_lock_rank_name(enum sndk_lock_rank r)
{
    return (unsigned)r < SNDK_LOCK_RANKS ? rank_names[r] : "?";
}

SNDK_TLS struct sndk_lock_waited sndk_lock_waited;

void sndk_mutex_lock_contended(struct sndk_mutex *l)
{
    if (!sndk_lock_waited.timing) {
        pthread_mutex_lock(&l->m);
        return;
    }
    uint64_t t0 = sndk_clock_ns(CLOCK_MONOTONIC);
    pthread_mutex_lock(&l->m);
    sndk_lock_waited.ns += sndk_clock_ns(CLOCK_MONOTONIC) - t0;
    sndk_lock_waited.waits++;
}

#if SNDK_LOCK_TRACK

SNDK_TLS uint64_t sndk_lock_held_mask;
SNDK_TLS unsigned sndk_lock_extra_total;
SNDK_TLS unsigned char sndk_lock_extra[SNDK_LOCK_RANKS];
SNDK_TLS char sndk_lock_me;

_Noreturn void sndk_lock_order_violation(unsigned r, unsigned held)
{
    /* stderr directly: the logger may itself be what is misbehaving */
    fprintf(stderr, "softndk: lock order violation: taking %s while holding %s\n",
            sndk_lock_rank_name((enum sndk_lock_rank)r),
            sndk_lock_rank_name((enum sndk_lock_rank)held));
    abort();
}
#endif
