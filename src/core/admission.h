/* The door of a listener (docs/listener.md, "Handshake limits"): what a TCP connection may hold
 * before its MPA Request has arrived. Whatever can reach the port can open connections and send
 * nothing; each holds an fd and a connector. So:
 *
 * - a listener holds `limit` connections waiting for their Request (HandshakeLimit, at most an
 *   eighth of the process's fd limit) and `per_peer` from one peer IP address
 *   (HandshakePerPeerLimit). One more evicts the oldest of the newcomer's peer, else of the
 *   listener, once that one has had its grace (a quarter of RequestTimeoutMs, at most 100 ms);
 *   at twice the limit, at once; one whose Request bytes are already in its socket is passed
 *   over. The newest connection always gets its chance, a flood from some addresses evicts
 *   its own connections, a burst of good clients fits, and a client whose Request is here is
 *   served before a flood can evict it;
 * - the Request must arrive within RequestTimeoutMs (connector.c), shorter than the connect
 *   timeout;
 * - accept() failing with EMFILE / ENFILE never spins and never goes silent: the oldest waiting
 *   connections are evicted and the listen source backs off until their fds are closed; with
 *   none to evict, a reserve fd is given up to accept the connection and reset it; with no
 *   reserve either, the listen source backs off on a timer.
 * Every eviction and refusal is counted (HandshakesEvicted / HandshakesRefused) and logged at
 * most once a second with the number suppressed; HandshakesPending and IncomingUnanswered are
 * gauges of the connectors waiting for their Request / for the consumer's answer.
 *
 * The door knows neither the listener nor the connector: the listener gives it its object and
 * listen source (sndk_admission_init), a connector registers how to evict it with its entry
 * (sndk_admission_enter). The listener includes the connector, both include this; nothing here
 * calls back into either but through those.
 *
 * Locking: adm->lock guards the list and the phase. A connector calls sndk_admission_leave with
 * its own lock held (connector lock -> admission lock); evictions are chosen under adm->lock
 * and carried out after it is dropped, so the order is never reversed. */
#ifndef SOFTNDK_CORE_ADMISSION_H
#define SOFTNDK_CORE_ADMISSION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/endpoint.h"
#include "engine/engine.h"
#include "util/lock.h"

struct sndk_adapter_ctrs;

/* One waiting connection, embedded in its connector. */
struct sndk_adm_entry {
    struct sndk_adm_entry *prev, *next; /* the listener's list, oldest first; under adm->lock */
    struct sndk_obj *obj;               /* the connector (a reference is taken to evict it) */
    /* Evict it: reset its connection and close it (connector.c). Called with a reference on obj
     * held, without any lock. */
    void (*evict)(struct sndk_adm_entry *e);
    int fd;                             /* its socket (open while listed) */
    struct sndk_addr peer;
    uint64_t since_us; /* when it was listed (CLOCK_MONOTONIC) */
    bool listed;       /* under adm->lock */
};

enum sndk_adm_phase {
    SNDK_ADM_IDLE,    /* not listening yet */
    SNDK_ADM_OPEN,    /* the listen source is watched */
    SNDK_ADM_BACKOFF, /* the listen source is paused after EMFILE / ENFILE; a timer resumes */
    SNDK_ADM_STOPPED, /* the listener is closing */
    SNDK_ADM_PHASE_COUNT
};

struct sndk_admission {
    struct sndk_obj *owner;         /* the listener: its adapter's options and counters; the
                                       backoff timer holds a reference on it */
    struct sndk_source *listen_src; /* the listen source, paused during a backoff */
    struct sndk_mutex lock;
    enum sndk_adm_phase phase;
    struct sndk_adm_entry head; /* list sentinel */
    unsigned pending;           /* entries listed */
    unsigned limit, per_peer;   /* effective caps */
    uint64_t grace_us;          /* a new entry is not evicted for a newer one before this */
    int reserve_fd;             /* /dev/null, given up at the fd limit; -1 when not held */
    struct sndk_timer backoff;  /* resumes the listen source; holds a listener reference */
    uint64_t log_at_us;         /* last log line */
    unsigned log_suppressed;
};

/* Set up when the listener starts listening (caps from the adapter's options and the fd
 * limit). */
void sndk_admission_start(struct sndk_admission *adm);
/* The listener closes: no more backoff; the reserve fd is closed. */
void sndk_admission_stop(struct sndk_admission *adm);
/* owner: the listener object; listen_src: its listen source (added before start). */
void sndk_admission_init(struct sndk_admission *adm, struct sndk_obj *owner,
                         struct sndk_source *listen_src);
/* "backoff"; "?" past the last phase. */
const char *sndk_adm_phase_name(enum sndk_adm_phase p);
void sndk_admission_destroy(struct sndk_admission *adm);

/* A connector (obj) starts waiting for its Request: list it, evicting whom the caps say (each
 * through its own entry's evict). */
void sndk_admission_enter(struct sndk_admission *adm, struct sndk_adm_entry *e,
                          struct sndk_obj *obj, void (*evict)(struct sndk_adm_entry *e), int fd,
                          const struct sndk_addr *peer);
/* It stopped waiting (Request in, failed, timed out, closed): unlist it (no-op if not listed). */
void sndk_admission_leave(struct sndk_admission *adm, struct sndk_adm_entry *e);

/* accept() on the listening socket listen_fd failed with err (EMFILE, ENFILE, ENOBUFS,
 * ENOMEM). Returns true when the caller should call accept again now, false when it must
 * return (the source is paused, or nothing more can be done for this readiness). */
bool sndk_admission_fd_exhausted(struct sndk_admission *adm, int listen_fd, int err);

/* A connection accepted is being reset because the fd limit left no way to serve it: count it
 * (HandshakesRefused) and log (rate limited). */
void sndk_admission_refused(struct sndk_admission *adm, const struct sndk_addr *peer,
                            const char *why);

/* Close fd with a TCP reset: "as if there were no listener" ([EP-6]). */
void sndk_close_with_reset(int fd);

#endif
