/* Counters (docs/observability.md): the NDK performance counter set plus iWARP ones, per
 * adapter and per connection, read through SoftNdkQueryCounters and the ndkstat endpoint.
 *
 * Cost model
 * - Adapter events (connect, accept, failures, Terminates, ...) are rare: relaxed fetch_add on
 *   the adapter's block.
 * - Byte / FPDU counts are per connection (struct sndk_conn_rec) and have ONE writer per
 *   direction: TX under the QP's tx_lock, RX under its rx_lock (or the connector's lock during
 *   the handshake). They are updated with a relaxed load + relaxed store (plain movs on x86-64,
 *   no lock prefix), and read by anyone with relaxed loads: race-free for TSan, no lock on the
 *   hot path. The adapter sums them on read (live records + what retired records left behind).
 *
 * A connection record lives in the adapter's registry from the moment a connector has a socket
 * until both its users (the connector, and the QP once attached) have let go: then its counts
 * are folded into the adapter's retired totals under the registry lock, so totals never go
 * backwards. */
#ifndef SOFTNDK_OBSERVE_COUNTERS_H
#define SOFTNDK_OBSERVE_COUNTERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/socket.h>

#include <ndk/softndk.h>

#include "util/lock.h"

struct sndk_pcap;
struct sndk_pcap_conn;

/* Adapter-wide event counters (index into sndk_adapter_ctrs.v). */
enum sndk_ctr {
    SNDK_CTR_CONNECT,           /* outbound connections established (NdkConnect side) */
    SNDK_CTR_ACCEPT,            /* inbound connections established (NdkAccept side) */
    SNDK_CTR_CONNECT_FAILURE,   /* connection attempts that failed or were rejected */
    SNDK_CTR_CONNECTION_ERROR,  /* established connections that ended in error */
    SNDK_CTR_CQ_ERROR,          /* CQ overruns */
    SNDK_CTR_CRC_ERRORS,        /* FPDUs received with a bad CRC32c */
    SNDK_CTR_FLUSHED,           /* requests completed with STATUS_CANCELLED by a flush */
    SNDK_CTR_INJECTED,          /* faults injected (docs/faults.md) */
    SNDK_CTR_MPA_REJECT_SENT,   /* MPA Replies with the Reject bit we sent */
    SNDK_CTR_MPA_REJECT_RECV,   /* ... we received */
    SNDK_CTR_HANDSHAKE_TIMEOUT, /* handshakes that timed out */
    SNDK_CTR_SOURCE_MODIFIED,   /* FPDUs whose source changed before completion (SourceCheck) */
    SNDK_CTR_HANDSHAKE_EVICTED, /* half-open connections reset to make room (admission.c) */
    SNDK_CTR_HANDSHAKE_REFUSED, /* connections reset at once at the fd limit (admission.c) */
    SNDK_CTR_RESPONDER_HELD,    /* Responder connections (no RTR) that held FPDUs until the
                                   Initiator's first arrived */
    SNDK_CTR_RNR_WAITS,         /* Sends that found no receive and waited (RnrWaitMs) */
    SNDK_CTR_RNR_TIMEOUTS,      /* ... whose wait expired: the connection was terminated */
    SNDK_CTR_FENCE_READS,       /* zero-length Reads behind Writes (WriteCompletion placed) */
    SNDK_CTR_INBOUND_WRITES,    /* RDMA Write messages the peers placed in our memory */
    SNDK_CTR_INBOUND_READS,     /* RDMA Read Requests of the peers accepted for a response */
    SNDK_CTR_REMOTE_INVAL,      /* tokens invalidated by a peer's Send with Invalidate */
    SNDK_CTR_SETUP_ABANDONED,   /* peers gone while their connection waited for the consumer */
    SNDK_CTR_LOG_SUPPRESSED,    /* log lines on a peer's path left out by their rate limit */
    SNDK_CTR_SAME_HOST,         /* connections established over shared memory */
    SNDK_CTR_COUNT
};

#define SNDK_TERM_LAYERS 3  /* RDMAP, DDP, MPA (LLP) */
#define SNDK_TERM_SLOTS  16 /* distinct (layer, etype, code) kept per direction */

struct sndk_term_slot {
    uint32_t code; /* 0x00LLTTCC */
    uint64_t count;
};

struct sndk_listen_rec {
    struct sndk_listen_rec *next;
    const void *obj; /* the listener, for display only */
    char addr[64];
};

struct sndk_adapter_ctrs {
    _Atomic uint64_t v[SNDK_CTR_COUNT];
    _Atomic int64_t active;     /* ActiveConnection: a gauge */
    _Atomic int64_t hs_pending; /* HandshakesPending: a gauge (admission.c) */
    _Atomic int64_t incoming;   /* IncomingUnanswered: a gauge (admission.c) */
    _Atomic uint64_t term_sent[SNDK_TERM_LAYERS], term_recv[SNDK_TERM_LAYERS];
    _Atomic uint64_t verify[SOFTNDK_VERIFY_RULE_SLOTS]; /* violations by rule (verify/verify.h) */

    struct sndk_mutex lock;          /* the registry, retired totals and Terminate slots */
    struct sndk_conn_rec *recs;      /* live connection records */
    struct sndk_listen_rec *listens; /* listening endpoints */
    uint64_t next_id;
    uint64_t retired[8]; /* folded sndk_conn_rec byte/frame counts, see below */
    uint64_t retired_same_host[2]; /* ... RX and TX octets of those over shared memory */
    struct sndk_term_slot term_sent_slot[SNDK_TERM_SLOTS], term_recv_slot[SNDK_TERM_SLOTS];
};

/* Per-connection counts. tx_*: the TX owner writes (tx_lock, or the connector before the QP
 * has the socket); rx_*: the RX owner; sq_*: under the QP's tx_lock. */
enum sndk_conn_ctr {
    SNDK_CC_TX_OCTETS, /* bytes of FPDUs written (RDMAOutOctets) */
    SNDK_CC_TX_FPDUS,  /* FPDUs written completely (RDMAOutFrames) */
    SNDK_CC_RX_OCTETS, /* bytes of FPDUs read (RDMAInOctets) */
    SNDK_CC_RX_FPDUS,  /* FPDUs received completely (RDMAInFrames) */
    SNDK_CC_HS_TX,     /* MPA Request/Reply bytes written */
    SNDK_CC_HS_RX,     /* MPA Request/Reply bytes read */
    SNDK_CC_FOLDED,    /* (count of the above: these are folded into the adapter on retire) */
    SNDK_CC_SQ_POSTED = SNDK_CC_FOLDED, /* initiator requests accepted onto the wire queue */
    SNDK_CC_SQ_RETIRED, /* ... retired (sent and completed, or cancelled); both under tx_lock.
                           The receive queue's use is read from the QP (stat.c). */
    SNDK_CC_COUNT
};

enum sndk_conn_role { SNDK_ROLE_ACTIVE, SNDK_ROLE_PASSIVE };

struct sndk_conn_rec {
    _Atomic uint64_t c[SNDK_CC_COUNT];
    _Atomic int state; /* an index into state_names */
    const char *const *state_names;
    _Atomic uint32_t ird, ord;
    _Atomic uint32_t sq_depth; /* 0 until a QP is attached */
    _Atomic bool crc;
    _Atomic uint8_t mpa_rev;
    _Atomic(const char *) transport; /* the stream's name ("tcp", "shm") once attached, else NULL */
    _Atomic bool same_host;          /* that stream is shared memory (SameHost* counters) */
    uint64_t id; /* per adapter, from 1 */
    enum sndk_conn_role role;
    struct sockaddr_storage local, peer;
    char local_str[64], peer_str[64];
    _Atomic(struct sndk_qp *) qp;   /* set once attached; valid while the record is listed (the
                                       connector holds the QP, the QP puts the record first
                                       thing in its destroy); ndkstat reads its receive queue */
    struct sndk_pcap_conn *pcap;    /* NULL when pcap capture is off */
    struct sndk_adapter_ctrs *ctrs; /* the adapter's: the registry the record is listed in */
    struct sndk_pcap *capture;      /* the adapter's pcap file, NULL when off */
    atomic_uint refs;
    struct sndk_conn_rec *next, *prev; /* registry, under the adapter's counter lock */
};

/* --------------------------------------------------------------- hot path helpers */

/* One writer: no read-modify-write instruction needed. */
static inline void sndk_cc_add(struct sndk_conn_rec *r, enum sndk_conn_ctr i, uint64_t n)
{
    uint64_t v = atomic_load_explicit(&r->c[i], memory_order_relaxed);
    atomic_store_explicit(&r->c[i], v + n, memory_order_relaxed);
}
static inline void sndk_cc_set(struct sndk_conn_rec *r, enum sndk_conn_ctr i, uint64_t v)
{
    atomic_store_explicit(&r->c[i], v, memory_order_relaxed);
}
static inline uint64_t sndk_cc_get(const struct sndk_conn_rec *r, enum sndk_conn_ctr i)
{
    return atomic_load_explicit(&((struct sndk_conn_rec *)r)->c[i], memory_order_relaxed);
}

/* Where a peer's rate-limited log lines count the ones left out (util/log.h). */
static inline _Atomic uint64_t *sndk_ctr_log_suppressed(struct sndk_adapter_ctrs *a)
{
    return &a->v[SNDK_CTR_LOG_SUPPRESSED];
}

static inline void sndk_ctr_inc(struct sndk_adapter_ctrs *a, enum sndk_ctr i)
{
    atomic_fetch_add_explicit(&a->v[i], 1, memory_order_relaxed);
}

/* --------------------------------------------------------------- adapter */

void sndk_counters_init(struct sndk_adapter_ctrs *a);
void sndk_counters_destroy(struct sndk_adapter_ctrs *a);

/* ActiveConnection gauge. */
void sndk_counters_active(struct sndk_adapter_ctrs *a, int delta);

/* A Terminate went out / came in (layer 0 RDMAP, 1 DDP, 2 MPA). */
void sndk_counters_term(struct sndk_adapter_ctrs *a, bool sent, unsigned layer, unsigned etype,
                        unsigned code);

/* Fill a SOFTNDK_COUNTERS (Size already validated by the caller, >= the v1 size): every
 * field the caller's Size covers. */
void sndk_counters_read(struct sndk_adapter_ctrs *a, SOFTNDK_COUNTERS *out);

/* --------------------------------------------------------------- connection records */

/* A new record (one reference, the caller's) in the registry of ac, captured into `capture`
 * (NULL: no capture) once its local address is known. NULL when out of memory: every user of a
 * record accepts NULL and then counts nothing. The adapter passes its own counters and capture
 * (sndk_conn_rec_new, device/adapter_state.h): the counters know no adapter. */
struct sndk_conn_rec *sndk_conn_rec_open(struct sndk_adapter_ctrs *ac, struct sndk_pcap *capture,
                                         enum sndk_conn_role role, const struct sockaddr *local,
                                         const struct sockaddr *peer,
                                         const char *const *state_names);
/* The active side learns its local address when connect() completes: update it, and start the
 * capture of the connection (the handshake has not begun yet). Called by the record's owner. */
void sndk_conn_rec_set_local(struct sndk_conn_rec *r, const struct sockaddr *local);
void sndk_conn_rec_get(struct sndk_conn_rec *r);
/* The last reference folds its counts into the adapter and unlinks it. */
void sndk_conn_rec_put(struct sndk_conn_rec *r);

/* A listener started listening on addr ("1.2.3.4:5"), or (addr NULL) stopped. */
void sndk_counters_listener(struct sndk_adapter_ctrs *a, const void *obj, const char *addr);

/* Visit every live record under the registry lock (fn must not block or take QP locks). */
void sndk_conn_rec_foreach(struct sndk_adapter_ctrs *a,
                           void (*fn)(const struct sndk_conn_rec *r, void *arg), void *arg);

#endif
