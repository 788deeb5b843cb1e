/* The per-thread lock-rank bookkeeping behind util/lock.h. */
#include "util/lock.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/clock.h"

static const char *const rank_names[SNDK_LOCK_RANKS] = {
    [SNDK_LOCK_UNRANKED] = "unranked",
    [SNDK_LOCK_DEVICES] = "the device list lock",
    [SNDK_LOCK_LISTENER] = "l->lock",
    [SNDK_LOCK_CONNECTOR] = "c->lock",
    [SNDK_LOCK_ADMISSION] = "l->adm.lock",
    [SNDK_LOCK_ENDPOINTS] = "the endpoint table lock",
    [SNDK_LOCK_QP_VERIFY_POST] = "qp->verify_rq_serial",
    [SNDK_LOCK_CQ_VERIFY_POLL] = "cq->verify_poll_serial",
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

/* Sleep while *word is `val` (or until the absolute CLOCK_MONOTONIC deadline, if any): 0, or
 * the errno (EAGAIN: it was not `val` any more; EINTR; ETIMEDOUT). Process-private words. */
static int futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *deadline)
{
    long rc = deadline ? syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, val, deadline, NULL,
                                 FUTEX_BITSET_MATCH_ANY)
                       : syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
    return rc == 0 ? 0 : errno;
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Take the word of a lock that may have sleepers: 2, so that our unlock wakes the next. */
static void lock_sleeping(struct sndk_mutex *l)
{
    while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
        futex_wait(&l->word, 2, NULL);
}

void sndk_mutex_lock_contended(struct sndk_mutex *l)
{
    if (!sndk_lock_waited.timing) {
        lock_sleeping(l);
        return;
    }
    uint64_t t0 = sndk_clock_ns(CLOCK_MONOTONIC);
    lock_sleeping(l);
    sndk_lock_waited.ns += sndk_clock_ns(CLOCK_MONOTONIC) - t0;
    sndk_lock_waited.waits++;
}

void sndk_mutex_wake(struct sndk_mutex *l)
{
    futex_wake(&l->word, 1);
}

void sndk_cond_broadcast(struct sndk_cond *c)
{
    atomic_fetch_add_explicit(&c->seq, 1, memory_order_release);
    futex_wake(&c->seq, INT_MAX);
}

/* Let l go, sleep on c while its word is seq, take l back as a lock that may have sleepers (a
 * waiter woken with others must not leave them asleep behind a plain unlock). */
static int cond_sleep(struct sndk_cond *c, struct sndk_mutex *l, const struct timespec *deadline)
{
    uint32_t seq = atomic_load_explicit(&c->seq, memory_order_relaxed);
    sndk_mutex_now_released(l);
    sndk_mutex_unlock_raw(l);
    int rc = futex_wait(&c->seq, seq, deadline);
#if SNDK_LOCK_TSAN
    __tsan_mutex_pre_lock(l, 0);
#endif
    lock_sleeping(l);
#if SNDK_LOCK_TSAN
    __tsan_mutex_post_lock(l, 0, 0);
#endif
    sndk_mutex_now_owned(l);
    return rc == ETIMEDOUT ? ETIMEDOUT : 0;
}

void sndk_cond_wait(struct sndk_cond *c, struct sndk_mutex *l)
{
    (void)cond_sleep(c, l, NULL);
}

int sndk_cond_timedwait(struct sndk_cond *c, struct sndk_mutex *l, const struct timespec *deadline)
{
    return cond_sleep(c, l, deadline);
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
