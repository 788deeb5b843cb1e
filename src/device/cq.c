/* Completion queue (docs/ndk-rules.md#cq). */
#include "device/cq.h"
#include "faults/faults.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "verify/verify.h"
#include "util/log.h"

/* [CQ-9]: a second arm before the first is satisfied merges (row: first, column: second),
 * indexed by NDK_CQ_NOTIFY_* (ERRORS 0, ANY 1, SOLICITED 2). */
static const int arm_merge[3][3] = {
    /* 1st ERRORS    */ {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_SOLICITED},
    /* 1st ANY       */ {NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ANY},
    /* 1st SOLICITED */ {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_SOLICITED},
};

/* The CQ's depth: its ring's (cq->lock held, or the consumer's own look). */
static uint32_t cq_depth(const struct sndk_cq *cq)
{
    return atomic_load_explicit(&cq->ring, memory_order_relaxed)->depth;
}

static bool moderation_on(const struct sndk_cq *cq)
{
    /* [CQ-15], [CQ-16]: Interval 0 or Count 0/1 means no moderation. */
    return cq->mod_interval != 0 && cq->mod_count > 1;
}

static bool count_governs(const struct sndk_cq *cq)
{
    return cq->mod_count != MAXULONG && cq->mod_count <= cq_depth(cq);
}

static bool interval_governs(const struct sndk_cq *cq)
{
    return cq->mod_interval != MAXULONG;
}

static void unpark_conns(struct sndk_cq *cq);
static void mod_timer_fn(struct sndk_timer *t);
static void park_timer_fn(struct sndk_timer *t);

/* Drop a reference that cannot be the last: the caller holds one of its own (the QP feeding
 * the CQ, the consumer in a call on it, or the open reference before close completes), so it
 * may hold cq->lock. */
static void put_not_last(struct sndk_cq *cq, unsigned n)
{
    unsigned was = atomic_fetch_sub_explicit(&cq->base.refs, n, memory_order_acq_rel);
    assert(was > n);
    (void)was;
}

/* Make the callback due; the notification delivers it. Caller holds cq->lock. */
static void fire_locked(struct sndk_cq *cq, NTSTATUS status)
{
    sndk_assert_held(&cq->lock);
    cq->armed = SNDK_CQ_UNARMED;
    cq->moderating = false;
    cq->notify_seq = atomic_load_explicit(&cq->produced, memory_order_relaxed); /* ours */
    /* A held-back callback goes now: its timer's pending period ends here (its reference is
     * ours) or in the fn already running, which drops it. */
    bool timer_ref = sndk_timer_cancel(&cq->mod_timer);
    sndk_notify_raise(&cq->notify, status);
    if (timer_ref)
        put_not_last(cq, 1);
}

/* An arm's condition occurred. Caller holds cq->lock. */
static void satisfy_locked(struct sndk_cq *cq)
{
    sndk_assert_held(&cq->lock);
    cq->armed = SNDK_CQ_UNARMED;
    if (!moderation_on(cq)) {
        fire_locked(cq, STATUS_SUCCESS);
        return;
    }
    cq->moderating = true;
    cq->mod_accum = 1;
    if (count_governs(cq) && cq->mod_accum >= cq->mod_count) {
        fire_locked(cq, STATUS_SUCCESS);
        return;
    }
    /* not moderating until now, so the timer is not pending: a new period, a new reference */
    assert(!sndk_timer_pending(&cq->mod_timer));
    if (interval_governs(cq) &&
        sndk_timer_arm(cq->base.adapter->engine, &cq->mod_timer, cq->mod_interval))
        sndk_obj_get(&cq->base); /* the pending timer's (engine.h, "References") */
}

/* [CQ-12]: the QPs feeding a dead CQ are unusable; the connected ones abort (their peers
 * get a Terminate) so that neither end waits for completions that can never come. */
static void overrun_work_fn(struct sndk_work *w)
{
    struct sndk_cq *cq = sndk_container_of(w, struct sndk_cq, overrun_work);
    sndk_mutex_lock(&cq->conn_lock);
    for (struct sndk_cq_conn *c = cq->conns.next; c != &cq->conns; c = c->next)
        c->ops->cq_dead(c); /* as a polling pass may: the node stays linked until its owner
                               unlinks it */
    sndk_mutex_unlock(&cq->conn_lock);
    sndk_obj_put(&cq->base);
}

/* The CPU the consumer waiting for this CQ's notifications runs on: where it last armed the
 * CQ, unless it named CPUs at create (GROUP_AFFINITY, processor group g's CPU b being Linux's
 * CPU 64 g + b: docs/decisions.md) that do not include it; then the first of those. -1: none
 * known (it only ever armed from a callback). */
static int notify_cpu(const struct sndk_cq *cq)
{
    int w = atomic_load_explicit(&cq->waiter_cpu, memory_order_relaxed);
    if (!cq->aff_mask)
        return w;
    int base = (int)cq->aff_group * 64;
    if (w >= base && w < base + 64 && ((cq->aff_mask >> (w - base)) & 1u))
        return w;
    return base + __builtin_ctzll(cq->aff_mask);
}

/* The notification's callback (device/notify.h): a progress thread, no lock held. */
static void cq_notify_call(struct sndk_notify *n, NTSTATUS st)
{
    struct sndk_cq *cq = sndk_container_of(n, struct sndk_cq, notify);
    SNDK_CALLBACK(&cq->base, SNDK_CB_CQ_NOTIFICATION, cq->notify_ctx,
                  cq->notify_cb(cq->notify_ctx, st));
    /* Where the consumer waiting for this runs: the thread follows it there, so that the
     * wake-up below is a local one (docs/engine.md, "Following the waiter"). */
    sndk_engine_note_waiter(cq->base.adapter->engine, notify_cpu(cq));
    /* The callback has most likely woken a thread: the consumer it hands the completion to, or,
     * when it did the work itself and posted, the peer's progress thread (on loopback the send
     * wakes it). The scheduler may have put that thread on this CPU, where the progress thread
     * would now spin for its whole window before it ran: give the CPU up once (a system call
     * that returns at once when nobody waits for it). docs/datapath.md, "The blocking path". */
    sched_yield();
}

/* The interval of a held-back callback passed. A fn that lost a race with the count (the
 * callback went and the cancel found the fn already running) finds nothing held back, or the
 * hold of a later arm, which it delivers at once. */
static void mod_timer_fn(struct sndk_timer *t)
{
    struct sndk_cq *cq = sndk_container_of(t, struct sndk_cq, mod_timer);
    sndk_mutex_lock(&cq->lock);
    if (cq->moderating && !sndk_obj_closing(&cq->base))
        fire_locked(cq, STATUS_SUCCESS);
    sndk_mutex_unlock(&cq->lock);
    sndk_obj_put(&cq->base); /* its pending period's */
}

bool sndk_cq_post(struct sndk_cq *cq, const NDK_RESULT_EX *result, bool solicited)
{
    sndk_mutex_lock(&cq->lock);
    if (cq->dead != STATUS_SUCCESS) {
        sndk_mutex_unlock(&cq->lock);
        return false;
    }
    /* produced is ours under the lock; taken is the consumer's (acquire: its copy out of the
     * slot we may reuse is done) */
    uint64_t seq = atomic_load_explicit(&cq->produced, memory_order_relaxed);
    uint64_t queued = seq - atomic_load_explicit(&cq->taken, memory_order_acquire);
    struct sndk_cq_ring *ring = atomic_load_explicit(&cq->ring, memory_order_relaxed);
    if (queued == ring->depth || seq == cq->fault_overrun_at) {
        /* [CQ-12]: an overrun kills the CQ (a dead CQ hands out nothing more); the callback
         * says so whatever the arm. */
        bool injected = queued != ring->depth;
        if (injected) {
            char what[64];
            snprintf(what, sizeof what, "CQ #%u overruns at completion %llu", cq->fault_no,
                     (unsigned long long)seq + 1);
            sndk_fault_fired(cq->base.adapter, cq->fault_rule, cq, what);
        }
        atomic_store_explicit(&cq->dead, STATUS_BUFFER_OVERFLOW, memory_order_release);
        sndk_ctr_inc(&cq->base.adapter->ctrs, SNDK_CTR_CQ_ERROR);
        sndk_warn("cq", "CQ %p %s: dead, its QPs abort", (void *)cq,
                  injected ? "overran (injected)" : "overran its depth");
        sndk_obj_get(&cq->base);
        sndk_engine_queue(cq->base.adapter->engine, &cq->overrun_work);
        if (cq->armed != SNDK_CQ_UNARMED || cq->moderating)
            fire_locked(cq, STATUS_BUFFER_OVERFLOW);
        sndk_mutex_unlock(&cq->lock);
        return false;
    }
    ring->e[seq % ring->depth].result = *result;
    atomic_store_explicit(&cq->produced, seq + 1, memory_order_release); /* to the consumer */
    bool sol = solicited || result->Status != STATUS_SUCCESS;
    if (sol)
        cq->last_solicited = seq + 1;
    if (cq->moderating) {
        cq->mod_accum++;
        if (count_governs(cq) && cq->mod_accum >= cq->mod_count)
            fire_locked(cq, STATUS_SUCCESS);
    } else if (cq->armed == NDK_CQ_NOTIFY_ANY || (cq->armed == NDK_CQ_NOTIFY_SOLICITED && sol)) {
        satisfy_locked(cq);
    }
    sndk_mutex_unlock(&cq->lock);
    return true;
}

/* [CQ-3] under the verifier: the consumer serializes poll, poll-Ex and arm of one CQ. A call
 * that finds another inside reports it; the counter costs two atomics per call, paid only with
 * the verifier on (callers branch here once). */
static void verify_enter(struct sndk_verify_call *c, struct sndk_cq *cq, const char *call)
{
    if (sndk_verify_call_enter(c, &cq->verify_callers) != 0)
        sndk_verify_report(&cq->base, SoftNdkVerifyCqConcurrent, NULL,
                           "%s while another thread was inside NdkGetCqResults(Ex)/NdkArmCq of "
                           "this CQ: serialize them",
                           call);
}
static void verify_leave(struct sndk_verify_call *c)
{
    sndk_verify_call_leave(c);
}

/* The arm is recorded (cq->lock held): from here on a notification it makes due may run, and
 * its callback poll, before NdkArmCq returns; the arm is out of the CQ-3 count before the lock
 * that orders the callback after it is released (verify.h, struct sndk_verify_call). */
static void arm_unlock(struct sndk_cq *cq)
{
    if (sndk_verify_on(cq->base.adapter))
        sndk_verify_call_commit(&cq->verify_callers);
    sndk_mutex_unlock(&cq->lock);
}

static void arm(struct sndk_cq *cq, ULONG Type);

static VOID cq_arm(NDK_CQ *pNdkCq, ULONG Type)
{
    struct sndk_cq *cq = sndk_cq_from(pNdkCq);
    if (!cq || Type > NDK_CQ_NOTIFY_SOLICITED) {
        sndk_err("cq", "NdkArmCq(%p, %u): invalid", (void *)pNdkCq, Type);
        return;
    }
    if (sndk_verify_on(cq->base.adapter)) {
        struct sndk_verify_call vc;
        verify_enter(&vc, cq, "NdkArmCq");
        arm(cq, Type);
        verify_leave(&vc);
        return;
    }
    arm(cq, Type);
}

static void arm(struct sndk_cq *cq, ULONG Type)
{
    /* The waiter's CPU (rseq's: no system call). An arm from a callback re-arms for the same
     * progress thread: it says nothing about a consumer's thread. */
    struct sndk_engine *e = cq->base.adapter->engine;
    int cpu = sndk_engine_on_progress_thread(e) ? -1 : sched_getcpu();
    if (cpu >= 0 && atomic_load_explicit(&cq->waiter_cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&cq->waiter_cpu, cpu, memory_order_relaxed);
    sndk_mutex_lock(&cq->lock);
    if (sndk_obj_closing(&cq->base)) {
        arm_unlock(cq);
        return;
    }
    if (cq->dead != STATUS_SUCCESS) {
        /* CQ errors satisfy an arm of any type. */
        fire_locked(cq, cq->dead);
        arm_unlock(cq);
        return;
    }
    cq->armed = cq->armed == SNDK_CQ_UNARMED ? (int)Type : arm_merge[cq->armed][Type];
    /* the consumer's own position: its arm and its polls are serialized ([CQ-3]) */
    uint64_t oldest = atomic_load_explicit(&cq->taken, memory_order_relaxed);
    uint64_t produced = atomic_load_explicit(&cq->produced, memory_order_relaxed);
    if (!cq->moderating && produced > oldest) {
        /* [CQ-6]: entries that arrived after the last callback satisfy the arm now. */
        bool fresh = produced > cq->notify_seq;
        bool fresh_solicited = cq->last_solicited > cq->notify_seq && cq->last_solicited > oldest;
        if ((cq->armed == NDK_CQ_NOTIFY_ANY && fresh) ||
            (cq->armed == NDK_CQ_NOTIFY_SOLICITED && fresh_solicited))
            satisfy_locked(cq);
    }
    arm_unlock(cq);
    unpark_conns(cq);
}

/* Rings a resize replaced: free them. Called at the start of a take, when no take can still be
 * reading one (the consumer serializes its polls, and this one has not looked at the ring). */
static void free_retired(struct sndk_cq *cq)
{
    if (!atomic_load_explicit(&cq->retired, memory_order_relaxed))
        return;
    struct sndk_cq_ring *r = atomic_exchange_explicit(&cq->retired, NULL, memory_order_acquire);
    while (r) {
        struct sndk_cq_ring *next = r->next_retired;
        free(r);
        r = next;
    }
}

/* Copy out up to n entries and move `taken`. No lock: NDKPI makes the consumer serialize its
 * polls and arms of one CQ ([CQ-3], which the verifier checks), so this is the one reader, and
 * producers only ever write beyond `produced`, into slots the consumer has released. */
static ULONG take(struct sndk_cq *cq, ULONG n, NDK_RESULT_EX *out_ex, NDK_RESULT *out)
{
    free_retired(cq);
    if (atomic_load_explicit(&cq->dead, memory_order_acquire) != STATUS_SUCCESS)
        return 0;
    uint64_t taken = atomic_load_explicit(&cq->taken, memory_order_relaxed);
    /* produced first, then the ring: a ring a resize put in place was in place before any
     * entry written into it was published, so every entry below `produced` is in the ring
     * read after it (an old ring holds those written before the resize, and stays until the
     * next take). */
    uint64_t produced = atomic_load_explicit(&cq->produced, memory_order_acquire);
    const struct sndk_cq_ring *ring = atomic_load_explicit(&cq->ring, memory_order_acquire);
    if (n > produced - taken)
        n = (ULONG)(produced - taken);
    uint32_t slot = (uint32_t)(taken % ring->depth);
    for (ULONG i = 0; i < n; i++) {
        const NDK_RESULT_EX *r = &ring->e[slot].result;
        if (out_ex) {
            out_ex[i] = *r;
        } else {
            out[i].Status = r->Status;
            out[i].BytesTransferred = r->BytesTransferred;
            out[i].QPContext = r->QPContext;
            out[i].RequestContext = r->RequestContext;
        }
        if (++slot == ring->depth)
            slot = 0;
    }
    /* release: our copies are done before a producer may reuse the slots */
    atomic_store_explicit(&cq->taken, taken + n, memory_order_release);
    return n;
}

static const char *const poll_mode_names[SNDK_CQ_POLL_MODES] = {
    [SNDK_CQ_POLL_EACH] = "each",
    [SNDK_CQ_POLL_SET_NEW] = "set-new",
    [SNDK_CQ_POLL_SET] = "set",
};

/* each => set-new (more connections than asked directly) => set (the first poll walked them
 * all); set or set-new => each (few again). Under conn_lock. */
static void set_poll_mode(struct sndk_cq *cq, enum sndk_cq_poll_mode to, const char *why)
{
    sndk_assert_held(&cq->conn_lock);
    int from = atomic_load_explicit(&cq->poll_mode, memory_order_relaxed);
    if (from == (int)to)
        return;
    assert((from == SNDK_CQ_POLL_EACH && to == SNDK_CQ_POLL_SET_NEW) ||
           (from == SNDK_CQ_POLL_SET_NEW && to == SNDK_CQ_POLL_SET) || to == SNDK_CQ_POLL_EACH);
    atomic_store_explicit(&cq->poll_mode, (int)to, memory_order_release);
    sndk_debug("cq", "CQ %p: polls %s => %s (%s)", (void *)cq, poll_mode_names[from],
               poll_mode_names[to], why);
}

/* The mode for the connections linked now. Under conn_lock. */
static void update_poll_mode(struct sndk_cq *cq)
{
    bool by_set = cq->nconns > SNDK_CQ_DIRECT_POLL_MAX && cq->ready_on && cq->ready_fd >= 0;
    int now = atomic_load_explicit(&cq->poll_mode, memory_order_relaxed);
    if (!by_set)
        set_poll_mode(cq, SNDK_CQ_POLL_EACH, "few connections");
    else if (now == SNDK_CQ_POLL_EACH)
        set_poll_mode(cq, SNDK_CQ_POLL_SET_NEW, "more connections than polled one by one");
}

bool sndk_cq_polls_by_readiness(const struct sndk_cq *cq)
{
    return atomic_load_explicit(&((struct sndk_cq *)cq)->poll_mode, memory_order_acquire) !=
           SNDK_CQ_POLL_EACH;
}

/* The readiness set's registration of node: ADD, MOD or DEL by what it has and wants. Caller
 * holds ready_mu. */
static void ready_set_update(struct sndk_cq *cq, struct sndk_cq_conn *node, uint32_t events)
{
    if (cq->ready_fd < 0 || node->watched == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = node};
    int op = events == 0 ? EPOLL_CTL_DEL : node->watched == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl(cq->ready_fd, op, node->fd, &ev) != 0 && errno != ENOENT)
        sndk_warn("cq", "CQ %p: readiness set op %d fd %d: errno %d", (void *)cq, op, node->fd,
                  errno);
    node->watched = events;
}

void sndk_cq_conn_add(struct sndk_cq *cq, struct sndk_cq_conn *node,
                      const struct sndk_cq_conn_ops *ops, void *owner, int fd, uint32_t events)
{
    node->ops = ops;
    node->owner = owner;
    node->fd = fd;
    sndk_mutex_lock(&cq->conn_lock);
    sndk_mutex_lock(&cq->ready_mu);
    node->wanted = events;
    node->watched = 0;
    if (cq->ready_on)
        ready_set_update(cq, node, events);
    node->next = cq->conns.next;
    node->prev = &cq->conns;
    cq->conns.next->prev = node;
    cq->conns.next = node;
    node->linked = true;
    cq->nconns++;
    if (!cq->ready_on && cq->nconns > SNDK_CQ_DIRECT_POLL_MAX) {
        /* from now on empty polls ask the set: fill it with what each connection wants */
        cq->ready_on = true;
        for (struct sndk_cq_conn *c = cq->conns.next; c != &cq->conns; c = c->next)
            ready_set_update(cq, c, c->wanted);
    }
    sndk_mutex_unlock(&cq->ready_mu);
    update_poll_mode(cq);
    sndk_mutex_unlock(&cq->conn_lock);
}

void sndk_cq_conn_remove(struct sndk_cq *cq, struct sndk_cq_conn *node)
{
    sndk_mutex_lock(&cq->conn_lock);
    sndk_mutex_lock(&cq->ready_mu);
    if (node->linked) {
        ready_set_update(cq, node, 0);
        node->prev->next = node->next;
        node->next->prev = node->prev;
        node->linked = false;
        cq->nconns--;
    }
    sndk_mutex_unlock(&cq->ready_mu);
    update_poll_mode(cq);
    sndk_mutex_unlock(&cq->conn_lock);
}

void sndk_cq_conn_watch(struct sndk_cq *cq, struct sndk_cq_conn *node, uint32_t events)
{
    /* Not under conn_lock: the owner calls this under its own lock (a QP's tx_lock), which
     * ranks after conn_lock; ready_mu is innermost. A watch before the link is dropped (the
     * owner watches again once sndk_cq_conn_add returned). epoll_ctl is safe beside a
     * concurrent epoll_wait. */
    sndk_mutex_lock(&cq->ready_mu);
    if (node->linked) {
        node->wanted = events;
        if (cq->ready_on)
            ready_set_update(cq, node, events);
    }
    sndk_mutex_unlock(&cq->ready_mu);
}

uint64_t sndk_cq_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u; /* never 0 */
}

bool sndk_cq_polling(const struct sndk_cq *cq)
{
    uint64_t stamp = atomic_load_explicit(&cq->poll_stamp, memory_order_relaxed);
    return stamp != 0 && sndk_cq_now_ms() - stamp <= SNDK_CQ_POLLING_MS;
}

bool sndk_cq_polled_steadily(const struct sndk_cq *cq)
{
    return atomic_load_explicit(&cq->empty_polls, memory_order_relaxed) >= SNDK_CQ_STEADY_POLLS &&
           sndk_cq_polling(cq);
}

void sndk_cq_parked(struct sndk_cq *cq, int delta)
{
    if (delta < 0) {
        atomic_fetch_sub_explicit(&cq->parked, 1, memory_order_relaxed);
        return;
    }
    sndk_mutex_lock(&cq->lock);
    /* counted under the lock: whoever reads the count and the check's pending state under it
     * (the check itself, a test) never sees a park without its check */
    atomic_fetch_add_explicit(&cq->parked, 1, memory_order_relaxed);
    /* a pending check is left where it is; one running now looks at the count after this */
    if (!sndk_timer_pending(&cq->park_timer) && !sndk_obj_closing(&cq->base) &&
        sndk_timer_arm(cq->base.adapter->engine, &cq->park_timer, SNDK_CQ_PARK_CHECK_US))
        sndk_obj_get(&cq->base); /* the pending timer's (engine.h, "References") */
    sndk_mutex_unlock(&cq->lock);
}

/* The park check, one per CQ however many of its connections are parked: a consumer that
 * stopped polling without arming (it polls no more, or only armed) gets them all unparked;
 * while it polls, the check comes again as long as any is parked. Its cost does not grow with
 * the connections: it walks them only when the consumer stopped, once. */
static void park_timer_fn(struct sndk_timer *t)
{
    struct sndk_cq *cq = sndk_container_of(t, struct sndk_cq, park_timer);
    if (!sndk_cq_polling(cq))
        unpark_conns(cq);
    sndk_mutex_lock(&cq->lock);
    /* A park since this fn started may have armed a new period already (the timer was no
     * longer pending): then this arm only moves it, and that period has its own reference. */
    bool again =
        atomic_load_explicit(&cq->parked, memory_order_relaxed) > 0 && !sndk_obj_closing(&cq->base);
    bool took_over =
        again && sndk_timer_arm(cq->base.adapter->engine, &cq->park_timer, SNDK_CQ_PARK_CHECK_US);
    sndk_mutex_unlock(&cq->lock);
    if (!took_over)
        sndk_obj_put(&cq->base); /* its pending period's; a new period took it over otherwise */
}

/* The consumer armed the CQ: it stops polling, so the progress threads receive again. Only
 * parked connections have anything to undo; a park that races with this arm looks at the
 * stamp again after counting itself (qp.c park_rx), so skipping the walk at 0 loses none. */
static void unpark_conns(struct sndk_cq *cq)
{
    atomic_store_explicit(&cq->empty_polls, 0, memory_order_relaxed);
    atomic_store_explicit(&cq->poll_stamp, 0, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&cq->parked, memory_order_seq_cst) == 0)
        return;
    sndk_mutex_lock(&cq->conn_lock);
    for (struct sndk_cq_conn *c = cq->conns.next; c != &cq->conns; c = c->next)
        c->ops->stop_polling(c);
    sndk_mutex_unlock(&cq->conn_lock);
}

/* Few connections: ask each (one read each; nothing between the poll and the data). */
static bool poll_each(struct sndk_cq *cq)
{
    bool progress = false;
    for (struct sndk_cq_conn *c = cq->conns.next; c != &cq->conns; c = c->next)
        progress |= c->ops->progress(c, EPOLLIN | EPOLLOUT);
    return progress;
}

/* Many connections: one look at the readiness set with a zero timeout, then only the
 * connections it reports. Level-triggered, so what a pass leaves is reported again; epoll
 * hands out a full ready list round-robin, so a batch never starves the rest. */
#define READY_BATCH 64
static bool poll_ready(struct sndk_cq *cq)
{
    struct epoll_event evs[READY_BATCH];
    int n = epoll_wait(cq->ready_fd, evs, READY_BATCH, 0);
    bool progress = false;
    for (int i = 0; i < n; i++) {
        struct sndk_cq_conn *c = evs[i].data.ptr; /* linked: removal takes conn_lock */
        progress |= c->ops->progress(c, evs[i].events);
    }
    return progress;
}

/* The CQ was empty: send what waits for socket space and receive on the connections feeding it
 * (docs/datapath.md), so that a consumer that polls never waits for a progress thread to wake up.
 * Returns true when bytes moved. */
static bool poll_conns(struct sndk_cq *cq, bool armed)
{
    bool progress;
    /* A poll of an armed CQ is the last look before the consumer blocks (arm, poll once more,
     * wait): it must not mark the CQ as polled, or the progress threads would park its
     * connections while nobody polls, and the next message would wait for the park timer. */
    if (!armed) {
        /* The clock every 16th poll, and at the first since an arm: even a vDSO call was a
         * sixteenth of an empty poll. A consumer that polls less often than 16 times in
         * SNDK_CQ_POLLING_MS is not one to leave the receiving to. */
        uint32_t k = atomic_load_explicit(&cq->empty_polls, memory_order_relaxed) + 1u;
        atomic_store_explicit(&cq->empty_polls, k, memory_order_relaxed);
        uint64_t stamp = atomic_load_explicit(&cq->poll_stamp, memory_order_relaxed);
        if ((k & 15u) == 0 || stamp == 0) {
            uint64_t now = sndk_cq_now_ms();
            if (stamp != now)
                atomic_store_explicit(&cq->poll_stamp, now, memory_order_relaxed);
        }
    }
    sndk_mutex_lock(&cq->conn_lock);
    switch (atomic_load_explicit(&cq->poll_mode, memory_order_relaxed)) {
    case SNDK_CQ_POLL_SET_NEW:
        progress = poll_each(cq);
        set_poll_mode(cq, SNDK_CQ_POLL_SET, "every connection ran a pass");
        break;
    case SNDK_CQ_POLL_SET:
        progress = poll_ready(cq);
        break;
    default:
        progress = poll_each(cq);
        break;
    }
    sndk_mutex_unlock(&cq->conn_lock);
    return progress;
}

static ULONG get_results(struct sndk_cq *cq, ULONG nResults, NDK_RESULT_EX *out_ex, NDK_RESULT *out)
{
    /* A polling consumer mostly finds its CQ empty: that look takes no lock (cq.h), nor does
     * a take, so a poll loop costs the connections' passes and little else. An entry posted
     * right after the look is the next poll's. */
    ULONG n = 0;
    if (nResults == 0)
        return 0;
    if (atomic_load_explicit(&cq->produced, memory_order_relaxed) !=
        atomic_load_explicit(&cq->taken, memory_order_relaxed)) {
        n = take(cq, nResults, out_ex, out);
        if (n)
            return n;
    }
    if (atomic_load_explicit(&cq->dead, memory_order_relaxed) != STATUS_SUCCESS)
        return 0;
    bool armed = atomic_load_explicit(&cq->armed, memory_order_relaxed) != SNDK_CQ_UNARMED;
    if (poll_conns(cq, armed))
        n = take(cq, nResults, out_ex, out);
    return n;
}

/* A poll takes without the CQ's lock (take): two polls the consumer did not serialize would
 * hand out a completion twice. Under the verifier they are named ([CQ-3], verify_enter) and
 * serialized too, so that the run goes on as the consumer meant it; off, the consumer's
 * serialization is the only one, as with a hardware provider. */
static ULONG get_results_verified(struct sndk_cq *cq, ULONG nResults, NDK_RESULT_EX *out_ex,
                                  NDK_RESULT *out, const char *call)
{
    struct sndk_verify_call vc;
    verify_enter(&vc, cq, call);
    sndk_mutex_lock(&cq->verify_poll_serial);
    ULONG n = get_results(cq, nResults, out_ex, out);
    sndk_mutex_unlock(&cq->verify_poll_serial);
    verify_leave(&vc);
    return n;
}

static ULONG cq_get_results(NDK_CQ *pNdkCq, NDK_RESULT Results[], ULONG nResults)
{
    struct sndk_cq *cq = sndk_cq_from(pNdkCq);
    if (!cq || (!Results && nResults))
        return 0;
    if (sndk_verify_on(cq->base.adapter))
        return get_results_verified(cq, nResults, NULL, Results, "NdkGetCqResults");
    return get_results(cq, nResults, NULL, Results);
}

static ULONG cq_get_results_ex(NDK_CQ *pNdkCq, NDK_RESULT_EX Results[], ULONG nResults)
{
    struct sndk_cq *cq = sndk_cq_from(pNdkCq);
    if (!cq || (!Results && nResults))
        return 0;
    if (sndk_verify_on(cq->base.adapter))
        return get_results_verified(cq, nResults, Results, NULL, "NdkGetCqResultsEx");
    return get_results(cq, nResults, Results, NULL);
}

static struct sndk_cq_ring *ring_alloc(uint32_t depth)
{
    struct sndk_cq_ring *r = malloc(sizeof *r + (size_t)depth * sizeof r->e[0]);
    if (r) {
        r->next_retired = NULL;
        r->depth = depth;
    }
    return r;
}

static NTSTATUS cq_resize(NDK_CQ *pNdkCq, ULONG CqDepth,
                          NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    (void)RequestCompletion; /* resizes complete inline */
    (void)RequestContext;
    struct sndk_cq *cq = sndk_cq_from(pNdkCq);
    if (!cq)
        return STATUS_INVALID_PARAMETER;
    const NDK_ADAPTER_INFO *info = &cq->base.adapter->info;
    if (!(info->AdapterFlags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED))
        return STATUS_NOT_SUPPORTED;
    if (CqDepth == 0 || CqDepth > info->MaxCqDepth)
        return STATUS_INVALID_PARAMETER;
    struct sndk_cq_ring *ring = ring_alloc(CqDepth);
    if (!ring)
        return STATUS_INSUFFICIENT_RESOURCES;
    sndk_mutex_lock(&cq->lock);
    /* The consumer may be taking meanwhile (a resize is not among the calls NDKPI makes it
     * serialize with its polls): it only moves `taken` up, so what we copy is a superset of
     * what is still queued when the new ring goes in place, at the same positions. */
    uint64_t produced = atomic_load_explicit(&cq->produced, memory_order_relaxed);
    uint64_t taken = atomic_load_explicit(&cq->taken, memory_order_acquire);
    if (produced - taken > CqDepth) {
        sndk_mutex_unlock(&cq->lock);
        free(ring);
        return STATUS_BUFFER_OVERFLOW;
    }
    struct sndk_cq_ring *old = atomic_load_explicit(&cq->ring, memory_order_relaxed);
    for (uint64_t p = taken; p < produced; p++)
        ring->e[p % CqDepth] = old->e[p % old->depth];
    atomic_store_explicit(&cq->ring, ring, memory_order_release);
    /* A take may be reading the old ring now: the next one frees it (free_retired). */
    old->next_retired = atomic_load_explicit(&cq->retired, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&cq->retired, &old->next_retired, old,
                                                  memory_order_release, memory_order_relaxed))
        ;
    sndk_mutex_unlock(&cq->lock);
    return STATUS_SUCCESS;
}

static NTSTATUS cq_control_moderation(NDK_CQ *pNdkCq, ULONG ModerationInterval,
                                      ULONG ModerationCount)
{
    struct sndk_cq *cq = sndk_cq_from(pNdkCq);
    if (!cq)
        return STATUS_INVALID_PARAMETER;
    if (!(cq->base.adapter->info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED))
        return STATUS_NOT_SUPPORTED;
    sndk_mutex_lock(&cq->lock);
    /* [CQ-17]: neither limit would ever release a held-back notification. */
    if (ModerationInterval == MAXULONG &&
        (ModerationCount == MAXULONG || ModerationCount > cq_depth(cq))) {
        sndk_mutex_unlock(&cq->lock);
        return STATUS_INVALID_PARAMETER_MIX;
    }
    cq->mod_interval = ModerationInterval;
    cq->mod_count = ModerationCount;
    /* The latest settings win at once: a held-back notification is re-judged by them. */
    if (cq->moderating) {
        if (!moderation_on(cq) || (count_governs(cq) && cq->mod_accum >= cq->mod_count))
            fire_locked(cq, STATUS_SUCCESS);
        else if (interval_governs(cq) &&
                 sndk_timer_arm(cq->base.adapter->engine, &cq->mod_timer, cq->mod_interval))
            sndk_obj_get(&cq->base); /* a new pending period (engine.h, "References") */
    }
    sndk_mutex_unlock(&cq->lock);
    return STATUS_SUCCESS;
}

static void cq_close_begin(struct sndk_obj *o)
{
    struct sndk_cq *cq = sndk_container_of(o, struct sndk_cq, base);
    sndk_mutex_lock(&cq->lock);
    cq->armed = SNDK_CQ_UNARMED;
    cq->moderating = false;
    sndk_notify_drop(&cq->notify);
    /* Each timer cancelled before it fired ends its pending period: its reference is ours. A
     * fn running now sees the close: the moderation timer delivers nothing, the park check
     * does not come again; each drops its own. */
    unsigned refs =
        (unsigned)sndk_timer_cancel(&cq->mod_timer) + (unsigned)sndk_timer_cancel(&cq->park_timer);
    if (refs)
        put_not_last(cq, refs); /* the open reference remains */
    sndk_mutex_unlock(&cq->lock);
}

static void cq_destroy(struct sndk_obj *o)
{
    struct sndk_cq *cq = sndk_container_of(o, struct sndk_cq, base);
    free_retired(cq);
    free(atomic_load_explicit(&cq->ring, memory_order_relaxed));
    if (cq->ready_fd >= 0)
        close(cq->ready_fd);
    sndk_mutex_destroy(&cq->ready_mu);
    sndk_mutex_destroy(&cq->lock);
    sndk_mutex_destroy(&cq->conn_lock);
    sndk_mutex_destroy(&cq->verify_poll_serial);
}

static const NDK_CQ_DISPATCH cq_dispatch = {
    .NdkCloseCq = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkResizeCq = cq_resize,
    .NdkArmCq = cq_arm,
    .NdkGetCqResults = cq_get_results,
    .NdkControlCqInterruptModeration = cq_control_moderation,
    .NdkGetCqResultsEx = cq_get_results_ex,
};

static const struct sndk_obj_ops cq_ops = {
    .type = NdkObjectTypeCq, .close_begin = cq_close_begin, .destroy = cq_destroy};

NTSTATUS sndk_cq_create(NDK_ADAPTER *pNdkAdapter, ULONG CqDepth,
                        NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification, PVOID CqNotificationContext,
                        GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_CQ **ppNdkCq)
{
    (void)CreateCompletion;
    (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ppNdkCq || !CqNotification)
        return STATUS_INVALID_PARAMETER;
    if (CqDepth == 0 || CqDepth > a->info.MaxCqDepth)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(a, SNDK_FCALL_CQ))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_cq *cq = calloc(1, sizeof *cq);
    if (!cq)
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_cq_ring *ring = ring_alloc(CqDepth);
    if (!ring) {
        free(cq);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    atomic_init(&cq->ring, ring);
    atomic_init(&cq->retired, NULL);
    atomic_init(&cq->produced, 0);
    atomic_init(&cq->taken, 0);
    cq->fault_overrun_at = sndk_fault_cq_overrun_at(a, &cq->fault_rule, &cq->fault_no);
    cq->armed = SNDK_CQ_UNARMED;
    cq->dead = STATUS_SUCCESS;
    cq->notify_cb = CqNotification;
    cq->notify_ctx = CqNotificationContext;
    atomic_init(&cq->waiter_cpu, -1);
    if (Affinity && Affinity->Mask) {
        /* where the notifications are to run (decisions.md #16): a hint, as on Windows */
        cq->aff_mask = (uint64_t)Affinity->Mask;
        cq->aff_group = Affinity->Group;
    }
    sndk_mutex_init_ranked(&cq->lock, SNDK_LOCK_CQ);
    sndk_mutex_init_ranked(&cq->conn_lock, SNDK_LOCK_CQ_CONN);
    sndk_mutex_init_ranked(&cq->verify_poll_serial, SNDK_LOCK_CQ_VERIFY_POLL);
    cq->conns.next = cq->conns.prev = &cq->conns;
    sndk_mutex_init_ranked(&cq->ready_mu, SNDK_LOCK_CQ_READY);
    cq->ready_fd = epoll_create1(EPOLL_CLOEXEC);
    if (cq->ready_fd < 0)
        sndk_warn("cq", "CQ %p: no readiness set (errno %d): empty polls ask every connection",
                  (void *)cq, errno);
    sndk_notify_init(&cq->notify, &cq->base, &cq->lock, cq_notify_call);
    sndk_work_init(&cq->overrun_work, overrun_work_fn);
    sndk_timer_init(&cq->mod_timer, mod_timer_fn);
    sndk_timer_init_upkeep(&cq->park_timer, park_timer_fn);
    sndk_obj_init(&cq->base, a, &cq_ops, &cq_dispatch);
    atomic_init(&cq->verify_callers, 0);
    atomic_init(&cq->parked, 0);
    atomic_init(&cq->poll_mode, SNDK_CQ_POLL_EACH);
    sndk_obj_hold(&cq->base, &a->base);
    *ppNdkCq = &cq->base.pub.cq;
    return STATUS_SUCCESS;
}
