/* Counters: adapter event counters, connection records, aggregation (counters.h). */
#include "observe/counters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/pcap.h"
#include "util/addr.h"

void sndk_counters_init(struct sndk_adapter_ctrs *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < SNDK_CTR_COUNT; i++)
        atomic_init(&a->v[i], 0);
    atomic_init(&a->active, 0);
    atomic_init(&a->hs_pending, 0);
    atomic_init(&a->incoming, 0);
    for (int i = 0; i < SNDK_TERM_LAYERS; i++) {
        atomic_init(&a->term_sent[i], 0);
        atomic_init(&a->term_recv[i], 0);
    }
    for (int i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        atomic_init(&a->verify[i], 0);
    sndk_mutex_init_ranked(&a->lock, SNDK_LOCK_COUNTERS);
    a->next_id = 1;
}

void sndk_counters_destroy(struct sndk_adapter_ctrs *a)
{
    while (a->listens) {
        struct sndk_listen_rec *l = a->listens;
        a->listens = l->next;
        free(l);
    }
    sndk_mutex_destroy(&a->lock);
}

void sndk_counters_listener(struct sndk_adapter_ctrs *a, const void *obj, const char *addr)
{
    struct sndk_listen_rec *n = NULL;
    if (addr) {
        n = calloc(1, sizeof *n);
        if (!n)
            return;
        n->obj = obj;
        snprintf(n->addr, sizeof n->addr, "%s", addr);
    }
    sndk_mutex_lock(&a->lock);
    if (n) {
        n->next = a->listens;
        a->listens = n;
    } else {
        for (struct sndk_listen_rec **pp = &a->listens; *pp; pp = &(*pp)->next)
            if ((*pp)->obj == obj) {
                struct sndk_listen_rec *dead = *pp;
                *pp = dead->next;
                free(dead);
                break;
            }
    }
    sndk_mutex_unlock(&a->lock);
}

void sndk_counters_active(struct sndk_adapter_ctrs *a, int delta)
{
    atomic_fetch_add_explicit(&a->active, delta, memory_order_relaxed);
}

static void term_slot(struct sndk_term_slot *slots, uint32_t code)
{
    for (int i = 0; i < SNDK_TERM_SLOTS; i++) {
        if (slots[i].count && slots[i].code == code) {
            slots[i].count++;
            return;
        }
        if (!slots[i].count) {
            slots[i].code = code;
            slots[i].count = 1;
            return;
        }
    }
}

void sndk_counters_term(struct sndk_adapter_ctrs *a, bool sent, unsigned layer, unsigned etype,
                        unsigned code)
{
    if (layer < SNDK_TERM_LAYERS)
        atomic_fetch_add_explicit(sent ? &a->term_sent[layer] : &a->term_recv[layer], 1,
                                  memory_order_relaxed);
    uint32_t c = (layer & 0xFu) << 16 | (etype & 0xFu) << 8 | (code & 0xFFu);
    sndk_mutex_lock(&a->lock);
    term_slot(sent ? a->term_sent_slot : a->term_recv_slot, c);
    sndk_mutex_unlock(&a->lock);
}

static uint64_t ld(_Atomic uint64_t *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}

void sndk_counters_read(struct sndk_adapter_ctrs *a, SOFTNDK_COUNTERS *out)
{
    ULONG size = out->Size;
    SOFTNDK_COUNTERS c;
    memset(&c, 0, sizeof c);
    uint64_t sum[SNDK_CC_FOLDED];
    sndk_mutex_lock(&a->lock);
    for (int i = 0; i < SNDK_CC_FOLDED; i++)
        sum[i] = a->retired[i];
    uint64_t same_rx = a->retired_same_host[0], same_tx = a->retired_same_host[1];
    for (struct sndk_conn_rec *r = a->recs; r; r = r->next) {
        for (int i = 0; i < SNDK_CC_FOLDED; i++)
            sum[i] += sndk_cc_get(r, (enum sndk_conn_ctr)i);
        if (atomic_load_explicit(&r->same_host, memory_order_relaxed)) {
            same_rx += sndk_cc_get(r, SNDK_CC_RX_OCTETS);
            same_tx += sndk_cc_get(r, SNDK_CC_TX_OCTETS);
        }
    }
    for (int i = 0; i < SNDK_TERM_SLOTS; i++) {
        c.TerminateSentCodes[i].Code = a->term_sent_slot[i].code;
        c.TerminateSentCodes[i].Count = a->term_sent_slot[i].count;
        c.TerminateReceivedCodes[i].Code = a->term_recv_slot[i].code;
        c.TerminateReceivedCodes[i].Count = a->term_recv_slot[i].count;
    }
    sndk_mutex_unlock(&a->lock);
    c.Connect = ld(&a->v[SNDK_CTR_CONNECT]);
    c.Accept = ld(&a->v[SNDK_CTR_ACCEPT]);
    c.ConnectFailure = ld(&a->v[SNDK_CTR_CONNECT_FAILURE]);
    c.ConnectionError = ld(&a->v[SNDK_CTR_CONNECTION_ERROR]);
    int64_t act = atomic_load_explicit(&a->active, memory_order_relaxed);
    c.ActiveConnection = act > 0 ? (ULONG64)act : 0;
    c.CQError = ld(&a->v[SNDK_CTR_CQ_ERROR]);
    c.RDMAInOctets = sum[SNDK_CC_RX_OCTETS];
    c.RDMAOutOctets = sum[SNDK_CC_TX_OCTETS];
    c.RDMAInFrames = sum[SNDK_CC_RX_FPDUS];
    c.RDMAOutFrames = sum[SNDK_CC_TX_FPDUS];
    c.CrcErrors = ld(&a->v[SNDK_CTR_CRC_ERRORS]);
    for (int i = 0; i < SNDK_TERM_LAYERS; i++) {
        c.TerminatesSent[i] = ld(&a->term_sent[i]);
        c.TerminatesReceived[i] = ld(&a->term_recv[i]);
    }
    c.FlushedRequests = ld(&a->v[SNDK_CTR_FLUSHED]);
    c.InjectedFaults = ld(&a->v[SNDK_CTR_INJECTED]);
    c.HandshakeInOctets = sum[SNDK_CC_HS_RX];
    c.HandshakeOutOctets = sum[SNDK_CC_HS_TX];
    c.MpaRejectsSent = ld(&a->v[SNDK_CTR_MPA_REJECT_SENT]);
    c.MpaRejectsReceived = ld(&a->v[SNDK_CTR_MPA_REJECT_RECV]);
    c.HandshakeTimeouts = ld(&a->v[SNDK_CTR_HANDSHAKE_TIMEOUT]);
    c.SourceModified = ld(&a->v[SNDK_CTR_SOURCE_MODIFIED]);
    c.HandshakesEvicted = ld(&a->v[SNDK_CTR_HANDSHAKE_EVICTED]);
    c.HandshakesRefused = ld(&a->v[SNDK_CTR_HANDSHAKE_REFUSED]);
    int64_t pend = atomic_load_explicit(&a->hs_pending, memory_order_relaxed);
    int64_t inc = atomic_load_explicit(&a->incoming, memory_order_relaxed);
    c.HandshakesPending = pend > 0 ? (ULONG64)pend : 0;
    c.IncomingUnanswered = inc > 0 ? (ULONG64)inc : 0;
    c.ResponderHeld = ld(&a->v[SNDK_CTR_RESPONDER_HELD]);
    c.RnrWaits = ld(&a->v[SNDK_CTR_RNR_WAITS]);
    c.RnrTimeouts = ld(&a->v[SNDK_CTR_RNR_TIMEOUTS]);
    c.FenceReads = ld(&a->v[SNDK_CTR_FENCE_READS]);
    c.InboundWrites = ld(&a->v[SNDK_CTR_INBOUND_WRITES]);
    c.InboundReadRequests = ld(&a->v[SNDK_CTR_INBOUND_READS]);
    c.RemoteInvalidations = ld(&a->v[SNDK_CTR_REMOTE_INVAL]);
    c.SetupsAbandoned = ld(&a->v[SNDK_CTR_SETUP_ABANDONED]);
    c.LogLinesSuppressed = ld(&a->v[SNDK_CTR_LOG_SUPPRESSED]);
    c.SameHostConnections = ld(&a->v[SNDK_CTR_SAME_HOST]);
    c.SameHostInOctets = same_rx;
    c.SameHostOutOctets = same_tx;
    for (int i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        c.VerifyViolations[i] = ld(&a->verify[i]);
    if (size > sizeof c)
        size = sizeof c;
    c.Size = size;
    memcpy(out, &c, size);
}

struct sndk_conn_rec *sndk_conn_rec_open(struct sndk_adapter_ctrs *ac, struct sndk_pcap *capture,
                                         enum sndk_conn_role role, const struct sockaddr *local,
                                         const struct sockaddr *peer,
                                         const char *const *state_names)
{
    struct sndk_conn_rec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    for (int i = 0; i < SNDK_CC_COUNT; i++)
        atomic_init(&r->c[i], 0);
    atomic_init(&r->state, 0);
    atomic_init(&r->ird, 0);
    atomic_init(&r->ord, 0);
    atomic_init(&r->sq_depth, 0);
    atomic_init(&r->crc, false);
    atomic_init(&r->mpa_rev, 0);
    atomic_init(&r->transport, NULL);
    atomic_init(&r->same_host, false);
    atomic_init(&r->refs, 1);
    atomic_init(&r->qp, NULL);
    r->state_names = state_names;
    r->role = role;
    r->ctrs = ac;
    r->capture = capture;
    struct sndk_addr tmp;
    if (local && sndk_addr_from(&tmp, local,
                                local->sa_family == AF_INET6
                                    ? sizeof(struct sockaddr_in6)
                                    : sizeof(struct sockaddr_in)) == STATUS_SUCCESS) {
        memcpy(&r->local, &tmp.in6, tmp.len);
        sndk_addr_str(&tmp, r->local_str, sizeof r->local_str);
    }
    if (peer && sndk_addr_from(&tmp, peer,
                               peer->sa_family == AF_INET6
                                   ? sizeof(struct sockaddr_in6)
                                   : sizeof(struct sockaddr_in)) == STATUS_SUCCESS) {
        memcpy(&r->peer, &tmp.in6, tmp.len);
        sndk_addr_str(&tmp, r->peer_str, sizeof r->peer_str);
    }
    sndk_mutex_lock(&ac->lock);
    r->id = ac->next_id++;
    r->next = ac->recs;
    r->prev = NULL;
    if (ac->recs)
        ac->recs->prev = r;
    ac->recs = r;
    sndk_mutex_unlock(&ac->lock);
    if (local && !sndk_addr_is_wildcard((const struct sndk_addr *)(const void *)&r->local))
        r->pcap = sndk_pcap_conn_new(capture, r->id, (const struct sockaddr *)&r->local,
                                     (const struct sockaddr *)&r->peer, role == SNDK_ROLE_ACTIVE);
    return r;
}

void sndk_conn_rec_set_local(struct sndk_conn_rec *r, const struct sockaddr *local)
{
    if (!r || !local)
        return;
    struct sndk_addr tmp;
    if (sndk_addr_from(&tmp, local,
                       local->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in)) != STATUS_SUCCESS)
        return;
    struct sndk_adapter_ctrs *ac = r->ctrs;
    sndk_mutex_lock(&ac->lock);
    memcpy(&r->local, &tmp.in6, tmp.len);
    sndk_addr_str(&tmp, r->local_str, sizeof r->local_str);
    sndk_mutex_unlock(&ac->lock);
    if (!r->pcap)
        r->pcap =
            sndk_pcap_conn_new(r->capture, r->id, (const struct sockaddr *)&r->local,
                               (const struct sockaddr *)&r->peer, r->role == SNDK_ROLE_ACTIVE);
}

void sndk_conn_rec_get(struct sndk_conn_rec *r)
{
    if (r)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void sndk_conn_rec_put(struct sndk_conn_rec *r)
{
    if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    sndk_pcap_conn_close(r->pcap);
    struct sndk_adapter_ctrs *ac = r->ctrs;
    sndk_mutex_lock(&ac->lock);
    for (int i = 0; i < SNDK_CC_FOLDED; i++)
        ac->retired[i] += sndk_cc_get(r, (enum sndk_conn_ctr)i);
    if (atomic_load_explicit(&r->same_host, memory_order_relaxed)) {
        ac->retired_same_host[0] += sndk_cc_get(r, SNDK_CC_RX_OCTETS);
        ac->retired_same_host[1] += sndk_cc_get(r, SNDK_CC_TX_OCTETS);
    }
    if (r->prev)
        r->prev->next = r->next;
    else
        ac->recs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    sndk_mutex_unlock(&ac->lock);
    free(r);
}

void sndk_conn_rec_foreach(struct sndk_adapter_ctrs *a,
                           void (*fn)(const struct sndk_conn_rec *r, void *arg), void *arg)
{
    sndk_mutex_lock(&a->lock);
    for (struct sndk_conn_rec *r = a->recs; r; r = r->next)
        fn(r, arg);
    sndk_mutex_unlock(&a->lock);
}
