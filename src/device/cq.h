/* Completion queue: a ring of NDK_RESULT_EX filled by the QPs feeding it, drained by the
 * consumer, with one-shot arming (docs/ndk-rules.md#cq), serialized notification callbacks on a
 * progress thread, overrun detection, resize and software interrupt moderation. */
#ifndef SOFTNDK_DEVICE_CQ_H
#define SOFTNDK_DEVICE_CQ_H

#include <pthread.h>

#include "device/adapter_state.h"
#include "device/notify.h"
#include "util/lock.h"

#define SNDK_CQ_UNARMED (-1)

struct sndk_cqe {
    NDK_RESULT_EX result;
};

/* A CQ's entries: position p of the CQ's sequence in e[p % depth]. A resize puts a new one in
 * place and retires the old, which a take may still be reading (cq.c take): the next take
 * frees it, since takes are serialized. */
struct sndk_cq_ring {
    struct sndk_cq_ring *next_retired;
    uint32_t depth;
    struct sndk_cqe e[];
};

struct sndk_cq_conn;

/* What a CQ asks of a connection feeding it. The connection registers these with the CQ
 * (sndk_cq_conn_add), so the CQ drives progress without knowing what a QP is. Each is called
 * holding conn_lock (the outermost lock) and no other. */
struct sndk_cq_conn_ops {
    /* The CQ was polled empty and the connection's socket reported `events` (EPOLLIN,
     * EPOLLOUT, EPOLLERR, EPOLLHUP) in the CQ's readiness set: move what can move without
     * waiting. Returns true when bytes moved. */
    bool (*progress)(struct sndk_cq_conn *c, uint32_t events);
    /* The consumer armed the CQ: it stops polling, the connection receives on its own again. */
    void (*stop_polling)(struct sndk_cq_conn *c);
    /* The CQ overran ([CQ-12]): the connection must end. */
    void (*cq_dead)(struct sndk_cq_conn *c);
};

/* A connection feeding this CQ: what a polling consumer drives (docs/datapath.md, "polling
 * that scales"). The socket is in the CQ's readiness set (an epoll set of its own) with the
 * events the connection asks for (sndk_cq_conn_watch), so an empty poll costs what the ready
 * connections cost, not what every connection does. */
struct sndk_cq_conn {
    struct sndk_cq_conn *next, *prev;
    const struct sndk_cq_conn_ops *ops;
    void *owner; /* the connection, for ops */
    int fd;
    /* under the CQ's ready_mu: */
    uint32_t wanted;  /* the events the owner last asked for */
    uint32_t watched; /* events registered in the readiness set, 0 = not in it */
    bool linked;      /* written holding conn_lock and ready_mu: either may read it */
};

struct sndk_cq {
    struct sndk_obj base;
    NDK_FN_CQ_NOTIFICATION_CALLBACK notify_cb;
    void *notify_ctx;

    /* The consumer verifier's [CQ-3] check (verify/verify.h): threads now inside
     * NdkGetCqResults(Ex)/NdkArmCq of this CQ; only counted with the verifier on. */
    atomic_uint verify_callers;
    /* Held across a poll under the verifier only: polls that break [CQ-3] are named and
     * serialized (cq.c get_results_verified). */
    struct sndk_mutex verify_poll_serial;

    struct sndk_mutex lock; /* guards everything below but `taken`; taken before engine locks */
    /* The queued entries are those at positions [taken, produced) of a sequence that never
     * wraps (64 bits). Producers (the data path, flushes; any thread) write an entry and move
     * `produced` under the lock; the consumer, whose polls NDKPI serializes ([CQ-3]), takes
     * without it and moves `taken`: each publishes with a release store and reads the other's
     * position with an acquire load (docs/datapath.md, "Locking"). The ring, and with it the
     * depth (the ring's), changes only in a resize, under the lock. */
    _Atomic(struct sndk_cq_ring *) ring;
    _Atomic(struct sndk_cq_ring *) retired; /* rings replaced by a resize, to free */
    _Atomic uint64_t produced; /* entries ever queued: the next entry's sequence number */
    _Atomic uint64_t taken;    /* entries ever taken: written by the consumer only */
    uint64_t notify_seq;       /* `produced` when the last notification fired */
    uint64_t last_solicited;   /* sequence + 1 of the newest solicited/error entry, 0 = none */
    /* armed and dead are written under the lock and read by an empty poll without it (cq.c
     * get_results): a look, not a decision; what lands after it is the next poll's */
    _Atomic int armed;         /* SNDK_CQ_UNARMED or NDK_CQ_NOTIFY_* */
    _Atomic NTSTATUS dead;     /* STATUS_SUCCESS, or why the CQ is dead (overrun) */
    uint64_t fault_overrun_at; /* injected overrun (docs/faults.md): at this `produced`, else
                                  UINT64_MAX */
    const struct sndk_fault_rule *fault_rule;
    unsigned fault_no;             /* the CQ's number among the adapter's, for the log */
    struct sndk_work overrun_work; /* after an overrun: the QPs feeding the CQ abort; holds a
                                      reference */

    /* notification delivery (device/notify.h): callbacks for this CQ never overlap */
    struct sndk_notify notify;

    /* interrupt moderation: an arm that is satisfied waits up to mod_interval µs or until
     * mod_count completions accumulated */
    ULONG mod_interval;
    ULONG mod_count;
    bool moderating; /* an arm is satisfied, its callback held back */
    uint32_t mod_accum;
    /* Pending only while moderating (armed and cancelled under lock); each pending period
     * holds a reference (engine.h, "References"). */
    struct sndk_timer mod_timer;

    /* Connected QPs feeding the CQ. conn_lock is outermost (qp.h lock order): a poll holds it
     * across the receive passes, which take QP locks only with trylock or further in. */
    struct sndk_mutex conn_lock;
    struct sndk_cq_conn conns; /* list head */
    uint32_t nconns;           /* linked connections, under conn_lock */
    /* The readiness set is filled only once the CQ has had more than SNDK_CQ_DIRECT_POLL_MAX
     * connections (ready_on, under conn_lock and ready_mu): before, each socket would wake
     * one more epoll set at every segment for nothing. ready_mu (ranked after every QP and
     * CQ lock, util/lock.h) orders the registrations of one node between its owner and the CQ. */
    struct sndk_mutex ready_mu;
    bool ready_on;
    /* How an empty poll finds the connections to drive (enum sndk_cq_poll_mode; written under
     * conn_lock, read by the connections' polled passes without it). */
    _Atomic int poll_mode;
    int ready_fd; /* the readiness set: an epoll set of the linked sockets (-1: none, every
                     poll walks the list) */
    /* When a consumer last polled this CQ empty (coarse ms; 0 = armed since): while it polls,
     * progress threads leave the receiving to it (docs/datapath.md, "parking"). */
    _Atomic uint64_t poll_stamp;
    /* empty polls since the last arm: the clock for the stamp is read every 16th, and a
     * consumer's own pass parks only after SNDK_CQ_STEADY_POLLS (sndk_cq_polled_steadily) */
    _Atomic uint32_t empty_polls;
    /* Where the consumer that waits for this CQ's notifications runs: the CPU of the last
     * NdkArmCq from a thread that is not a progress thread (-1: none yet), and the CPUs the
     * consumer named at create (GROUP_AFFINITY: aff_mask 0 = none). The progress thread that
     * delivers a notification follows it there (engine.h, sndk_engine_note_waiter). */
    atomic_int waiter_cpu;
    uint64_t aff_mask;
    unsigned aff_group;
    /* Connections whose progress thread left the receiving to this CQ's poller (parked):
     * an arm walks the connections only when there are any. */
    atomic_uint parked;
    /* While any is parked, one check every SNDK_CQ_PARK_CHECK_US for all of them: a consumer
     * that stopped polling without arming gets its connections back to the progress threads
     * (docs/datapath.md, "parking"). Armed and cancelled under lock; each pending period holds
     * a reference (engine.h, "References"). */
    struct sndk_timer park_timer;
};

/* Entries queued: exact for the consumer, a look from anywhere else. */
static inline uint64_t sndk_cq_queued(const struct sndk_cq *cq)
{
    uint64_t taken = atomic_load_explicit(&cq->taken, memory_order_acquire);
    return atomic_load_explicit(&cq->produced, memory_order_acquire) - taken;
}

/* Coarse monotonic milliseconds, cheap enough for every empty poll. */
uint64_t sndk_cq_now_ms(void);
/* Is a consumer polling cq right now (it polled empty within the last SNDK_CQ_POLLING_MS)? */
#define SNDK_CQ_POLLING_MS 10u /* CLOCK_MONOTONIC_COARSE ticks are ~4 ms */
bool sndk_cq_polling(const struct sndk_cq *cq);
/* Polling, and polled empty SNDK_CQ_STEADY_POLLS times since the last arm: a consumer that
 * polls as its way of waiting (it passes the count within its first messages: a 64 B
 * ping-pong polls empty 4 times a message over TCP, 21 over shm), not one draining its CQ
 * before it arms again (NDK's blocking idiom: a poll or two each time). Only such a
 * consumer's own receive pass parks its connection: parking before an arm would cost the
 * idiom an unpark, two epoll_ctl calls, per message. */
#define SNDK_CQ_STEADY_POLLS 64u
bool sndk_cq_polled_steadily(const struct sndk_cq *cq);

static inline struct sndk_cq *sndk_cq_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeCq);
    return o ? sndk_container_of(o, struct sndk_cq, base) : NULL;
}

/* Queue one completion (the data path and flushes call this; any thread). `solicited` marks a
 * receive of a solicited send; error completions satisfy a SOLICITED arm by themselves.
 * Returns false when the CQ is dead: it overran now or before (the completion is lost, as
 * NDKPI specifies, and the notification reports STATUS_BUFFER_OVERFLOW). */
bool sndk_cq_post(struct sndk_cq *cq, const NDK_RESULT_EX *result, bool solicited);

/* Up to this many connections an empty poll asks each of them directly (one read each, no
 * readiness-set system call on the way to the data: the one-connection latency); above, it
 * asks the readiness set with a zero timeout and drives only the ready ones. */
#define SNDK_CQ_DIRECT_POLL_MAX 2u

/* The poll's modes: each connection (few of them), the readiness set (many), and between
 * them one poll that still asks each, so that every connection runs a pass knowing that from
 * now on only its readiness gets it driven (a stream that skips readiness for polls, shm,
 * asks for it again in that pass). */
enum sndk_cq_poll_mode {
    SNDK_CQ_POLL_EACH,
    SNDK_CQ_POLL_SET_NEW,
    SNDK_CQ_POLL_SET,
    SNDK_CQ_POLL_MODES
};
/* Does a poll of cq drive a connection only when its fd is ready (the readiness set)? Then a
 * polled pass must leave the fd able to report the peer's next bytes. Any thread. */
bool sndk_cq_polls_by_readiness(const struct sndk_cq *cq);

/* Link a connection whose socket is fd, watching `events` (sndk_cq_conn_watch), or unlink it
 * (before its socket is closed). Any thread; takes conn_lock. */
void sndk_cq_conn_add(struct sndk_cq *cq, struct sndk_cq_conn *node,
                      const struct sndk_cq_conn_ops *ops, void *owner, int fd, uint32_t events);
void sndk_cq_conn_remove(struct sndk_cq *cq, struct sndk_cq_conn *node);
/* The events a linked connection now wants an empty poll to act on (EPOLLIN while it can
 * receive, EPOLLOUT while it waits for socket space; 0 leaves the set). Any thread; takes only
 * the CQ's innermost ready_mu, so the owner may hold its own locks. */
void sndk_cq_conn_watch(struct sndk_cq *cq, struct sndk_cq_conn *node, uint32_t events);
/* A connection feeding cq parked (+1) or unparked (-1) its receive side; a park arms the CQ's
 * one park check if it is not pending. Any thread; takes cq->lock on a park. */
#define SNDK_CQ_PARK_CHECK_US 5000u
void sndk_cq_parked(struct sndk_cq *cq, int delta);

/* NdkCreateCq, the adapter's dispatch slot (core/adapter.c lists it). */
NTSTATUS sndk_cq_create(NDK_ADAPTER *pNdkAdapter, ULONG CqDepth,
                        NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification, PVOID CqNotificationContext,
                        GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_CQ **ppNdkCq);

#endif
