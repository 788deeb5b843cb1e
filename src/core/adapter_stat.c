/* What ndkstat shows of an adapter (observe/stat.h has the format): the adapter's settings, its
 * counters, its live objects and connections. Written here, where the objects are known; the
 * endpoint in observe/ only serves the text. */
#include "core/create.h"
#include "device/adapter_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/qp_state.h"
#include "observe/stat.h"
#include "util/lock.h"
#include "verify/verify.h"

static void conn_line(const struct sndk_conn_rec *r, void *arg)
{
    struct sndk_stat_text *b = arg;
    int st = atomic_load_explicit(&((struct sndk_conn_rec *)r)->state, memory_order_relaxed);
    struct sndk_conn_rec *w = (struct sndk_conn_rec *)r;
    uint64_t sq = sndk_cc_get(r, SNDK_CC_SQ_POSTED) - sndk_cc_get(r, SNDK_CC_SQ_RETIRED);
    /* The receive queue's count: a look at its two positions (device/srq.h), no lock. */
    char rq[32] = "-";
    struct sndk_qp *qp = atomic_load(&w->qp);
    if (qp && qp->srq)
        snprintf(rq, sizeof rq, "srq");
    else if (qp)
        snprintf(rq, sizeof rq, "%u/%u", sndk_recv_ring_count(&qp->rq), qp->rq.depth);
    sndk_stat_printf(
        b,
        "conn\tid=%llu\trole=%s\tstate=%s\tlocal=%s\tpeer=%s\tird=%u\tord=%u\tcrc=%s\t"
        "mpa_rev=%u\ttransport=%s\tsq=%llu/"
        "%u\trq=%s\tout_octets=%llu\tin_octets=%llu\tout_frames=%llu\t"
        "in_frames=%llu\ths_out=%llu\ths_in=%llu\n",
        (unsigned long long)r->id, r->role == SNDK_ROLE_ACTIVE ? "active" : "passive",
        r->state_names ? r->state_names[st] : "?", r->local_str[0] ? r->local_str : "-",
        r->peer_str[0] ? r->peer_str : "-", atomic_load(&w->ird), atomic_load(&w->ord),
        atomic_load(&w->crc) ? "on" : "off", (unsigned)atomic_load(&w->mpa_rev),
        atomic_load(&w->transport) ? atomic_load(&w->transport) : "-", (unsigned long long)sq,
        atomic_load(&w->sq_depth), rq, (unsigned long long)sndk_cc_get(r, SNDK_CC_TX_OCTETS),
        (unsigned long long)sndk_cc_get(r, SNDK_CC_RX_OCTETS),
        (unsigned long long)sndk_cc_get(r, SNDK_CC_TX_FPDUS),
        (unsigned long long)sndk_cc_get(r, SNDK_CC_RX_FPDUS),
        (unsigned long long)sndk_cc_get(r, SNDK_CC_HS_TX),
        (unsigned long long)sndk_cc_get(r, SNDK_CC_HS_RX));
}

char *sndk_adapter_snapshot(void *adapter, size_t *len)
{
    struct sndk_adapter *a = adapter;
    struct sndk_stat_text b = {0};
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    double up =
        (double)(mono.tv_sec - a->opened.tv_sec) + (double)(mono.tv_nsec - a->opened.tv_nsec) / 1e9;
    sndk_stat_printf(
        &b,
        "softndk\tversion=%s\tpid=%ld\tadapter=%u\tif=%u\tndk=%u.%u\tmpa_rev=%u\tcrc=%s\t"
        "threads=%u\ttime=%lld.%09ld\tuptime=%.6f\n",
        SoftNdkVersionString(), (long)getpid(), a->seq, a->if_index, a->version.Major,
        a->version.Minor, a->cfg.mpa_revision, a->cfg.crc ? "on" : "off", a->cfg.threads,
        (long long)now.tv_sec, now.tv_nsec, up);
    SOFTNDK_COUNTERS c;
    c.Size = sizeof c;
    sndk_counters_read(&a->ctrs, &c);
#define C(f) sndk_stat_printf(&b, "counter\t%s\t%llu\n", #f, (unsigned long long)c.f)
    C(Connect);
    C(Accept);
    C(ConnectFailure);
    C(ConnectionError);
    C(ActiveConnection);
    C(CQError);
    C(RDMAInOctets);
    C(RDMAOutOctets);
    C(RDMAInFrames);
    C(RDMAOutFrames);
    C(CrcErrors);
    C(FlushedRequests);
    C(InjectedFaults);
    C(SourceModified);
    C(ResponderHeld);
    C(RnrWaits);
    C(RnrTimeouts);
    C(FenceReads);
    C(InboundWrites);
    C(InboundReadRequests);
    C(RemoteInvalidations);
    C(SetupsAbandoned);
    C(LogLinesSuppressed);
    C(SameHostConnections);
    C(SameHostInOctets);
    C(SameHostOutOctets);
    C(HandshakeInOctets);
    C(HandshakeOutOctets);
    C(MpaRejectsSent);
    C(MpaRejectsReceived);
    C(HandshakeTimeouts);
    C(HandshakesEvicted);
    C(HandshakesRefused);
    C(HandshakesPending);
    C(IncomingUnanswered);
#undef C
    for (int i = 0; i < SoftNdkVerifyRuleCount; i++)
        sndk_stat_printf(&b, "counter\tVerify.%s\t%llu\n", sndk_verify_rules[i].name,
                         (unsigned long long)c.VerifyViolations[i]);
    static const char *const layers[3] = {"RDMAP", "DDP", "MPA"};
    for (int i = 0; i < 3; i++) {
        sndk_stat_printf(&b, "counter\tTerminatesSent.%s\t%llu\n", layers[i],
                         (unsigned long long)c.TerminatesSent[i]);
        sndk_stat_printf(&b, "counter\tTerminatesReceived.%s\t%llu\n", layers[i],
                         (unsigned long long)c.TerminatesReceived[i]);
    }
    for (int i = 0; i < SOFTNDK_COUNTERS_TERM_SLOTS; i++) {
        if (c.TerminateSentCodes[i].Count)
            sndk_stat_printf(&b, "term\tsent\t0x%06x\t%llu\n", c.TerminateSentCodes[i].Code,
                             (unsigned long long)c.TerminateSentCodes[i].Count);
        if (c.TerminateReceivedCodes[i].Count)
            sndk_stat_printf(&b, "term\treceived\t0x%06x\t%llu\n", c.TerminateReceivedCodes[i].Code,
                             (unsigned long long)c.TerminateReceivedCodes[i].Count);
    }
    unsigned counts[NdkObjectTypeMax];
    sndk_mutex_lock(&a->lock);
    memcpy(counts, a->live_count, sizeof counts);
    sndk_mutex_unlock(&a->lock);
    sndk_stat_printf(&b, "objects");
    for (int t = 1; t < NdkObjectTypeMax; t++)
        if (t != NdkObjectTypeAdapter) {
            char name[32];
            snprintf(name, sizeof name, "%s", sndk_obj_type_name((NDK_OBJECT_TYPE)t));
            for (char *p = name; *p; p++)
                if (*p == ' ')
                    *p = '_';
            sndk_stat_printf(&b, "\t%s=%u", name, counts[t]);
        }
    sndk_stat_printf(&b, "\n");
    sndk_mutex_lock(&a->ctrs.lock);
    for (struct sndk_listen_rec *l = a->ctrs.listens; l; l = l->next)
        sndk_stat_printf(&b, "listener\tid=%p\taddr=%s\n", l->obj, l->addr);
    sndk_mutex_unlock(&a->ctrs.lock);
    sndk_conn_rec_foreach(&a->ctrs, conn_line, &b);
    sndk_stat_printf(&b, "end\n");
    return sndk_stat_text_take(&b, len);
}
