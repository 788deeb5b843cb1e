/* The door of a listener: handshake caps, eviction, the fd limit (admission.h). */
#include "core/admission.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/adapter_state.h"
#include "util/log.h"
#include "observe/trace.h"

/* After EMFILE with waiting connections evicted: their fds close on their progress threads
 * within microseconds; resume accepting a little later. With nothing to evict and no reserve:
 * the consumer's own fds fill the table, so wait longer. */
#define BACKOFF_EVICTED_US 2000u
#define BACKOFF_NO_FD_US   100000u
/* At most one log line per second about the door, with what it left out. */
#define LOG_EVERY_US 1000000u
/* Longest grace of a new connection against eviction by a newer one. */
#define GRACE_MAX_US 100000u
/* Entries looked at for one whose Request is not arriving, before the oldest is taken. */
#define VICTIM_SCAN 16

static const char *const adm_phase_names[SNDK_ADM_PHASE_COUNT] = {
    [SNDK_ADM_IDLE] = "idle",
    [SNDK_ADM_OPEN] = "open",
    [SNDK_ADM_BACKOFF] = "backoff",
    [SNDK_ADM_STOPPED] = "stopped",
};

const char *sndk_adm_phase_name(enum sndk_adm_phase p)
{
    return (unsigned)p < SNDK_ADM_PHASE_COUNT ? adm_phase_names[p] : "?";
}

static struct sndk_adapter_ctrs *ctrs_of(struct sndk_admission *adm)
{
    return &adm->owner->adapter->ctrs;
}

void sndk_close_with_reset(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool phase_ok(enum sndk_adm_phase from, enum sndk_adm_phase to)
{
    switch (to) {
    case SNDK_ADM_OPEN:
        return from == SNDK_ADM_IDLE || from == SNDK_ADM_BACKOFF;
    case SNDK_ADM_BACKOFF:
        return from == SNDK_ADM_OPEN;
    case SNDK_ADM_STOPPED:
        return from != SNDK_ADM_STOPPED;
    default:
        return false;
    }
}

/* adm->lock held */
static void set_phase(struct sndk_admission *adm, enum sndk_adm_phase next, const char *why)
{
    if (!phase_ok(adm->phase, next)) {
        sndk_err("listener", "%p door: %s => %s refused (%s)", (void *)adm->owner,
                 adm_phase_names[adm->phase], adm_phase_names[next], why);
        assert(!"invalid door phase transition");
        return;
    }
    sndk_debug("listener", "%p door: %s => %s (%s)", (void *)adm->owner,
               adm_phase_names[adm->phase], adm_phase_names[next], why);
    adm->phase = next;
}

/* One line a second at most; adm->lock held. */
static void door_log(struct sndk_admission *adm, const char *fmt, const char *what,
                     const struct sndk_addr *peer)
{
    uint64_t now = now_us();
    if (adm->log_at_us && now - adm->log_at_us < LOG_EVERY_US) {
        adm->log_suppressed++;
        atomic_fetch_add_explicit(sndk_ctr_log_suppressed(ctrs_of(adm)), 1, memory_order_relaxed);
        return;
    }
    char buf[64];
    sndk_warn("listener",
              "%p: %s %s%s (waiting %u, limit %u, per peer %u; %u similar lines "
              "suppressed)",
              (void *)adm->owner, what, peer ? sndk_addr_str(peer, buf, sizeof buf) : "", fmt,
              adm->pending, adm->limit, adm->per_peer, adm->log_suppressed);
    adm->log_at_us = now;
    adm->log_suppressed = 0;
}

/* adm->lock held */
static void unlink_locked(struct sndk_admission *adm, struct sndk_adm_entry *e)
{
    sndk_assert_held(&adm->lock);
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = NULL;
    e->listed = false;
    adm->pending--;
    atomic_fetch_sub_explicit(&ctrs_of(adm)->hs_pending, 1, memory_order_relaxed);
}

/* Take the oldest entry (of peer when given) off the list with a reference; adm->lock held. */
/* Bytes of its Request already in the socket, not read yet: it is about to be served. The fd
 * stays open while the entry is listed (the connector unlists before it closes). */
static bool request_arriving(const struct sndk_adm_entry *e)
{
    int n = 0;
    return e->fd >= 0 && ioctl(e->fd, FIONREAD, &n) == 0 && n > 0;
}

/* The oldest entry (of peer when given) that had min_age_us, preferring one with nothing
 * waiting to be read among the first few; unlinked and returned with a reference.
 * adm->lock held. */
static struct sndk_adm_entry *pick_victim_locked(struct sndk_admission *adm,
                                                 const struct sndk_addr *peer, uint64_t min_age_us)
{
    sndk_assert_held(&adm->lock);
    uint64_t now = now_us();
    struct sndk_adm_entry *first = NULL, *pick = NULL;
    int looked = 0;
    for (struct sndk_adm_entry *e = adm->head.next; e != &adm->head; e = e->next) {
        if (peer && !sndk_addr_same_host(&e->peer, peer))
            continue;
        if (now - e->since_us < min_age_us)
            break; /* this one is still in its grace: so is every later one */
        if (!first)
            first = e;
        if (!request_arriving(e)) {
            pick = e;
            break;
        }
        if (++looked == VICTIM_SCAN)
            break;
    }
    if (!pick)
        pick = first;
    if (pick) {
        sndk_obj_get(pick->obj); /* the entry is the obj's: this keeps it until evict returns */
        unlink_locked(adm, pick);
    }
    return pick;
}

static void evict(struct sndk_admission *adm, struct sndk_adm_entry *victim)
{
    struct sndk_obj *obj = victim->obj;
    sndk_ctr_inc(ctrs_of(adm), SNDK_CTR_HANDSHAKE_EVICTED);
    SNDK_TRACE("listener.evict", "listener", adm->owner, "\"connector\":\"%p\"", (void *)obj);
    victim->evict(victim);
    sndk_obj_put(obj);
}

void sndk_admission_init(struct sndk_admission *adm, struct sndk_obj *owner,
                         struct sndk_source *listen_src)
{
    memset(adm, 0, sizeof *adm);
    adm->owner = owner;
    adm->listen_src = listen_src;
    sndk_mutex_init_ranked(&adm->lock, SNDK_LOCK_ADMISSION);
    adm->phase = SNDK_ADM_IDLE;
    adm->head.next = adm->head.prev = &adm->head;
    adm->reserve_fd = -1;
}

void sndk_admission_destroy(struct sndk_admission *adm)
{
    assert(adm->pending == 0);
    if (adm->reserve_fd >= 0)
        close(adm->reserve_fd);
    sndk_mutex_destroy(&adm->lock);
}

static void on_backoff(struct sndk_timer *t);

void sndk_admission_start(struct sndk_admission *adm)
{
    const struct sndk_config *cfg = &adm->owner->adapter->cfg;
    unsigned limit = cfg->handshake_limit;
    struct rlimit rl;
    /* Never let half-open connections take more than a quarter of the fds (twice the limit,
     * see sndk_admission_enter): the consumer's own connections, regions and files need the
     * rest. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t eighth = rl.rlim_cur / 8 < 4 ? 4 : rl.rlim_cur / 8;
        if (eighth < limit)
            limit = (unsigned)eighth;
    }
    /* A connection that just arrived is not evicted for a newer one before its Request had
     * time to come: a burst of good clients all fit, a flood ages past it at once. */
    adm->grace_us = (uint64_t)cfg->request_timeout_ms * 1000u / 4;
    if (adm->grace_us > GRACE_MAX_US)
        adm->grace_us = GRACE_MAX_US;
    sndk_mutex_lock(&adm->lock);
    adm->limit = limit;
    adm->per_peer = cfg->handshake_per_peer < limit ? cfg->handshake_per_peer : limit;
    adm->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    sndk_timer_init(&adm->backoff, on_backoff);
    set_phase(adm, SNDK_ADM_OPEN, "listening");
    sndk_mutex_unlock(&adm->lock);
    sndk_info("listener",
              "%p door: %u connections waiting for their MPA Request (%u from one peer), "
              "%u ms each, %llu ms grace",
              (void *)adm->owner, limit, adm->per_peer, cfg->request_timeout_ms,
              (unsigned long long)(adm->grace_us / 1000u));
}

void sndk_admission_stop(struct sndk_admission *adm)
{
    sndk_mutex_lock(&adm->lock);
    bool put = false;
    if (sndk_timer_cancel(&adm->backoff))
        put = true; /* the pending timer's reference (engine.h, "References") */
    if (adm->phase != SNDK_ADM_STOPPED && adm->phase != SNDK_ADM_IDLE)
        set_phase(adm, SNDK_ADM_STOPPED, "listener closing");
    if (adm->reserve_fd >= 0) {
        close(adm->reserve_fd);
        adm->reserve_fd = -1;
    }
    sndk_mutex_unlock(&adm->lock);
    if (put)
        sndk_obj_put(adm->owner);
}

void sndk_admission_enter(struct sndk_admission *adm, struct sndk_adm_entry *e,
                          struct sndk_obj *obj, void (*evict_fn)(struct sndk_adm_entry *e), int fd,
                          const struct sndk_addr *peer)
{
    struct sndk_adm_entry *victim = NULL;
    sndk_mutex_lock(&adm->lock);
    unsigned same = 0;
    for (struct sndk_adm_entry *x = adm->head.next; x != &adm->head; x = x->next)
        same += sndk_addr_same_host(&x->peer, peer);
    /* Over a limit, the oldest goes once it has had its grace; twice over, at once. */
    if (adm->per_peer && same >= adm->per_peer) {
        victim = pick_victim_locked(adm, peer, same >= 2 * adm->per_peer ? 0 : adm->grace_us);
        if (victim)
            door_log(adm, ": evicted its oldest waiting connection (per-peer limit)", "peer", peer);
    }
    if (!victim && adm->limit && adm->pending >= adm->limit) {
        /* the newcomer's own peer pays first: a flood evicts itself, not a good client */
        uint64_t age = adm->pending >= 2 * adm->limit ? 0 : adm->grace_us;
        if (same)
            victim = pick_victim_locked(adm, peer, age);
        if (!victim)
            victim = pick_victim_locked(adm, NULL, age);
        if (victim)
            door_log(adm, ": evicted the oldest waiting connection (listener limit)",
                     "connection from", peer);
    }
    e->obj = obj;
    e->evict = evict_fn;
    e->fd = fd;
    e->since_us = now_us();
    e->peer = *peer;
    e->prev = adm->head.prev;
    e->next = &adm->head;
    adm->head.prev->next = e;
    adm->head.prev = e;
    e->listed = true;
    adm->pending++;
    atomic_fetch_add_explicit(&ctrs_of(adm)->hs_pending, 1, memory_order_relaxed);
    sndk_mutex_unlock(&adm->lock);
    if (victim)
        evict(adm, victim);
}

void sndk_admission_leave(struct sndk_admission *adm, struct sndk_adm_entry *e)
{
    sndk_mutex_lock(&adm->lock);
    if (e->listed)
        unlink_locked(adm, e);
    sndk_mutex_unlock(&adm->lock);
}

static void on_backoff(struct sndk_timer *t)
{
    struct sndk_admission *adm = sndk_container_of(t, struct sndk_admission, backoff);
    struct sndk_obj *owner = adm->owner;
    sndk_mutex_lock(&adm->lock);
    if (adm->phase == SNDK_ADM_BACKOFF) {
        set_phase(adm, SNDK_ADM_OPEN, "backoff over");
        if (adm->reserve_fd < 0)
            adm->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        sndk_source_modify(adm->listen_src, EPOLLIN);
    }
    sndk_mutex_unlock(&adm->lock);
    sndk_obj_put(owner); /* the pending timer's reference */
}

/* Pause the listen source for delay_us; adm->lock held. */
static void backoff_locked(struct sndk_admission *adm, uint64_t delay_us, const char *why)
{
    sndk_assert_held(&adm->lock);
    if (adm->phase != SNDK_ADM_OPEN)
        return;
    set_phase(adm, SNDK_ADM_BACKOFF, why);
    sndk_source_modify(adm->listen_src, 0);
    if (sndk_timer_arm(adm->owner->adapter->engine, &adm->backoff, delay_us))
        sndk_obj_get(adm->owner); /* on_backoff takes adm->lock before it drops it */
}

bool sndk_admission_fd_exhausted(struct sndk_admission *adm, int listen_fd, int err)
{
    struct sndk_adm_entry *victims[16];
    int nv = 0;
    bool again = false;
    sndk_mutex_lock(&adm->lock);
    if (adm->phase != SNDK_ADM_OPEN) {
        sndk_mutex_unlock(&adm->lock);
        return false;
    }
    if (adm->pending > 0) {
        /* Our own waiting connections hold fds: evict the oldest eighth (at least one) and
         * resume once their fds are closed. */
        int want = (int)(adm->pending / 8 ? adm->pending / 8 : 1);
        if (want > (int)(sizeof victims / sizeof victims[0]))
            want = (int)(sizeof victims / sizeof victims[0]);
        while (nv < want && (victims[nv] = pick_victim_locked(adm, NULL, 0)) != NULL)
            nv++;
        door_log(adm, ": evicted the oldest waiting connections", strerror(err), NULL);
        backoff_locked(adm, BACKOFF_EVICTED_US, "fd limit: evicting");
    } else if (adm->reserve_fd >= 0) {
        /* Nothing of ours to free: give up the reserve for one accept, refuse that connection
         * with a reset (as if nobody listened), take the reserve back. */
        close(adm->reserve_fd);
        adm->reserve_fd = -1;
        struct sndk_addr peer;
        memset(&peer, 0, sizeof peer);
        socklen_t plen = sizeof peer.in6;
        int fd = accept4(listen_fd, &peer.sa, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            peer.len = plen;
            sndk_close_with_reset(fd);
            sndk_ctr_inc(ctrs_of(adm), SNDK_CTR_HANDSHAKE_REFUSED);
            door_log(adm, " refused: no fd left", "connection from", &peer);
            again = true;
        }
        adm->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (adm->reserve_fd < 0) {
            door_log(adm, ": no reserve fd, pausing the listener", strerror(err), NULL);
            backoff_locked(adm, BACKOFF_NO_FD_US, "fd limit: no reserve");
            again = false;
        }
    } else {
        door_log(adm, ": no reserve fd, pausing the listener", strerror(err), NULL);
        backoff_locked(adm, BACKOFF_NO_FD_US, "fd limit: no reserve");
    }
    sndk_mutex_unlock(&adm->lock);
    for (int i = 0; i < nv; i++)
        evict(adm, victims[i]);
    return again;
}

void sndk_admission_refused(struct sndk_admission *adm, const struct sndk_addr *peer,
                            const char *why)
{
    sndk_ctr_inc(ctrs_of(adm), SNDK_CTR_HANDSHAKE_REFUSED);
    sndk_mutex_lock(&adm->lock);
    char what[96];
    snprintf(what, sizeof what, " refused: %s", why);
    door_log(adm, what, "connection from", peer);
    sndk_mutex_unlock(&adm->lock);
}
