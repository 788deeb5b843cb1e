/* Counters through the public API (SoftNdkQueryCounters): a scripted exchange between two
 * adapters of this process gives exact frame and byte counts. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "objects.h"

/* 1 once the data path (datapath/tx.c, rx.c) counts its FPDUs; until then only the connection
 * layer's share (handshake, RTR) is checked. */
#ifndef OBS_DATAPATH_HOOKS
#define OBS_DATAPATH_HOOKS 1
#endif

struct req {
    struct harness_event ev;
    NTSTATUS status;
};

static void req_done(void *ctx, NTSTATUS st)
{
    struct req *r = ctx;
    r->status = st;
    harness_event_signal(&r->ev);
}

static NTSTATUS req_wait(struct req *r, NTSTATUS st)
{
    if (st != STATUS_PENDING)
        return st;
    CHECK_MSG(harness_event_wait(&r->ev, 1, FIXTURE_WAIT_MS), "request never completed");
    return r->status;
}

struct server {
    struct harness_event ev;
    NDK_CONNECTOR *incoming;
};

static void on_connect_event(void *ctx, NDK_CONNECTOR *c)
{
    struct server *s = ctx;
    s->incoming = c;
    harness_event_signal(&s->ev);
}

static void counters_of(NDK_ADAPTER *a, SOFTNDK_COUNTERS *c)
{
    memset(c, 0xAB, sizeof *c);
    c->Size = sizeof *c;
    CHECK_STATUS(SoftNdkQueryCounters(a, c), STATUS_SUCCESS);
    CHECK_EQ_U64(c->Size, sizeof *c);
}

struct poll_arg {
    NDK_CQ *cq;
    NDK_RESULT_EX *out;
};

static bool poll_once(void *arg)
{
    struct poll_arg *p = arg;
    return p->cq->Dispatch->NdkGetCqResultsEx(p->cq, p->out, 1) == 1;
}

static bool poll_result(NDK_CQ *cq, NDK_RESULT_EX *out)
{
    struct poll_arg p = {cq, out};
    return harness_wait_until(poll_once, &p, FIXTURE_WAIT_MS);
}

#define SENDS       10u
#define SEND_FPDU   24u /* MPA length 2 + untagged DDP/RDMAP header 18 + CRC 4, no payload */
#define RTR_FPDU    20u /* MPA length 2 + tagged header 14 + CRC 4 */

static const char hello[] = "hello from the active side"; /* 27 bytes with its NUL */
static const char welcome[] = "welcome";                  /* 8 */

TEST(counters_exact_for_a_scripted_exchange)
{
    NDK_ADAPTER *as = conf_open(), *ac = conf_open();
    SOFTNDK_COUNTERS c;
    counters_of(as, &c);
    CHECK_EQ_U64(c.Connect + c.Accept + c.RDMAInOctets + c.RDMAOutOctets + c.InjectedFaults, 0);

    /* the server listens on an ephemeral port */
    struct server srv;
    memset(&srv, 0, sizeof srv);
    harness_event_init(&srv.ev);
    NDK_LISTENER *l;
    CHECK_STATUS(
        as->Dispatch->NdkCreateListener(as, on_connect_event, &srv, ndk_create_never, NULL, &l),
        STATUS_SUCCESS);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_STATUS(
        l->Dispatch->NdkListen(l, (struct sockaddr *)&sa, sizeof sa, ndk_request_never, NULL),
        STATUS_SUCCESS);
    ULONG alen = sizeof sa;
    CHECK_STATUS(l->Dispatch->NdkGetLocalAddress(l, (struct sockaddr *)&sa, &alen), STATUS_SUCCESS);

    NDK_PD *pds = conf_pd(as), *pdc = conf_pd(ac);
    struct conf_cq cqs, cqc;
    conf_cq_create(as, &cqs, 64);
    conf_cq_create(ac, &cqc, 64);
    NDK_QP *qps = conf_qp(pds, cqs.cq, cqs.cq, NULL, 16), *qpc = conf_qp(pdc, cqc.cq, cqc.cq, NULL, 4);
    NDK_CONNECTOR *cc;
    CHECK_STATUS(ac->Dispatch->NdkCreateConnector(ac, ndk_create_never, NULL, &cc), STATUS_SUCCESS);
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct req r, ra, rc;
    harness_event_init(&r.ev);
    harness_event_init(&ra.ev);
    harness_event_init(&rc.ev);
    CHECK_STATUS(cc->Dispatch->NdkConnect(cc, qpc, (struct sockaddr *)&src, sizeof src,
                                          (struct sockaddr *)&sa, sizeof sa, 4, 4, hello,
                                          sizeof hello, req_done, &r),
                 STATUS_PENDING);
    CHECK_MSG(harness_event_wait(&srv.ev, 1, FIXTURE_WAIT_MS), "no connect event");
    CHECK_STATUS(srv.incoming->Dispatch->NdkAccept(srv.incoming, qps, 4, 4, welcome,
                                                   sizeof welcome, NULL, NULL, req_done, &ra),
                 STATUS_PENDING);
    CHECK_STATUS(req_wait(&r, STATUS_PENDING), STATUS_SUCCESS);
    NTSTATUS st = cc->Dispatch->NdkCompleteConnect(cc, NULL, NULL, req_done, &rc);
    CHECK_STATUS(req_wait(&rc, st), STATUS_SUCCESS);
    CHECK_STATUS(req_wait(&ra, STATUS_PENDING), STATUS_SUCCESS);

    /* handshake: Request = 20 + 4 (RFC 6581 word) + 27, Reply = 20 + 4 + 8; the RTR */
    counters_of(ac, &c);
    CHECK_EQ_U64(c.Connect, 1);
    CHECK_EQ_U64(c.Accept, 0);
    CHECK_EQ_U64(c.ActiveConnection, 1);
    CHECK_EQ_U64(c.HandshakeOutOctets, 20 + 4 + sizeof hello);
    CHECK_EQ_U64(c.HandshakeInOctets, 20 + 4 + sizeof welcome);
    CHECK_EQ_U64(c.RDMAOutFrames, 1);
    CHECK_EQ_U64(c.RDMAOutOctets, RTR_FPDU);
    counters_of(as, &c);
    CHECK_EQ_U64(c.Connect, 0);
    CHECK_EQ_U64(c.Accept, 1);
    CHECK_EQ_U64(c.ActiveConnection, 1);
    CHECK_EQ_U64(c.HandshakeInOctets, 20 + 4 + sizeof hello);
    CHECK_EQ_U64(c.HandshakeOutOctets, 20 + 4 + sizeof welcome);
    CHECK_EQ_U64(c.RDMAInFrames, 1);
    CHECK_EQ_U64(c.RDMAInOctets, RTR_FPDU);

    /* SENDS zero-byte Sends, client -> server */
    conf_post_recvs(qps, SENDS, 100);
    NDK_RESULT_EX res;
    for (unsigned i = 0; i < SENDS; i++) {
        CHECK_STATUS(qpc->Dispatch->NdkSend(qpc, (void *)(uintptr_t)(i + 1), NULL, 0, 0),
                     STATUS_SUCCESS);
        CHECK(poll_result(cqc.cq, &res));
        CHECK_STATUS(res.Status, STATUS_SUCCESS);
        CHECK(poll_result(cqs.cq, &res));
        CHECK_STATUS(res.Status, STATUS_SUCCESS);
    }
#if OBS_DATAPATH_HOOKS
    counters_of(ac, &c);
    CHECK_EQ_U64(c.RDMAOutFrames, 1 + SENDS);
    CHECK_EQ_U64(c.RDMAOutOctets, RTR_FPDU + SENDS * SEND_FPDU);
    CHECK_EQ_U64(c.RDMAInFrames, 0);
    CHECK_EQ_U64(c.RDMAInOctets, 0);
    counters_of(as, &c);
    CHECK_EQ_U64(c.RDMAInFrames, 1 + SENDS);
    CHECK_EQ_U64(c.RDMAInOctets, RTR_FPDU + SENDS * SEND_FPDU);
    CHECK_EQ_U64(c.RDMAOutFrames, 0);
    CHECK_EQ_U64(c.CrcErrors + c.TerminatesSent[0] + c.TerminatesSent[1] + c.TerminatesSent[2], 0);
#endif

    /* graceful disconnect: nothing is an error, the gauge goes back to 0 */
    struct req rd, rs;
    harness_event_init(&rd.ev);
    harness_event_init(&rs.ev);
    NTSTATUS s1 = cc->Dispatch->NdkDisconnect(cc, req_done, &rd);
    NTSTATUS s2 = srv.incoming->Dispatch->NdkDisconnect(srv.incoming, req_done, &rs);
    CHECK_STATUS(req_wait(&rd, s1), STATUS_SUCCESS);
    if (s2 != STATUS_CONNECTION_INVALID)
        CHECK_STATUS(req_wait(&rs, s2), STATUS_SUCCESS);
    fixture_close_wait(&cc->Header);
    fixture_close_wait(&srv.incoming->Header);
    counters_of(ac, &c);
    CHECK_EQ_U64(c.ActiveConnection, 0);
    CHECK_EQ_U64(c.ConnectionError, 0);
    CHECK_EQ_U64(c.ConnectFailure, 0);
    /* totals survive the connection's records */
    CHECK_EQ_U64(c.HandshakeOutOctets, 20 + 4 + sizeof hello);
#if OBS_DATAPATH_HOOKS
    CHECK_EQ_U64(c.RDMAOutOctets, RTR_FPDU + SENDS * SEND_FPDU);
#endif
    counters_of(as, &c);
    CHECK_EQ_U64(c.ActiveConnection, 0);

    /* a rejected attempt: ConnectFailure on the active side, a Reject on both */
    NDK_QP *qpc2 = conf_qp(pdc, cqc.cq, cqc.cq, NULL, 4);
    NDK_CONNECTOR *cc2;
    CHECK_STATUS(ac->Dispatch->NdkCreateConnector(ac, ndk_create_never, NULL, &cc2),
                 STATUS_SUCCESS);
    struct req r2;
    harness_event_init(&r2.ev);
    CHECK_STATUS(cc2->Dispatch->NdkConnect(cc2, qpc2, (struct sockaddr *)&src, sizeof src,
                                           (struct sockaddr *)&sa, sizeof sa, 4, 4, NULL, 0,
                                           req_done, &r2),
                 STATUS_PENDING);
    CHECK_MSG(harness_event_wait(&srv.ev, 2, FIXTURE_WAIT_MS), "no second connect event");
    CHECK_STATUS(srv.incoming->Dispatch->NdkReject(srv.incoming, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(req_wait(&r2, STATUS_PENDING), STATUS_CONNECTION_REFUSED);
    fixture_close_wait(&srv.incoming->Header);
    fixture_close_wait(&cc2->Header);
    counters_of(ac, &c);
    CHECK_EQ_U64(c.ConnectFailure, 1);
    CHECK_EQ_U64(c.MpaRejectsReceived, 1);
    CHECK_EQ_U64(c.Connect, 1);
    counters_of(as, &c);
    CHECK_EQ_U64(c.MpaRejectsSent, 1);
    CHECK_EQ_U64(c.Accept, 1);

    /* a Size below the NDK set is refused; an older, shorter layout is filled up to its Size */
    SOFTNDK_COUNTERS small;
    memset(&small, 0xEE, sizeof small);
    small.Size = 8;
    CHECK_STATUS(SoftNdkQueryCounters(as, &small), STATUS_INVALID_PARAMETER);
    small.Size = (ULONG)offsetof(SOFTNDK_COUNTERS, CrcErrors);
    CHECK_STATUS(SoftNdkQueryCounters(as, &small), STATUS_SUCCESS);
    CHECK_EQ_U64(small.Accept, 1);
    CHECK_EQ_U64(small.CrcErrors, 0xEEEEEEEEEEEEEEEEull); /* beyond Size: untouched */
    CHECK_STATUS(SoftNdkQueryCounters(NULL, &small), STATUS_INVALID_PARAMETER);

#if OBS_DATAPATH_HOOKS
    /* flushed receives and a CQ overrun: 3 receives flushed into a CQ of depth 2 */
    SOFTNDK_COUNTERS before;
    counters_of(as, &before);
    struct conf_cq tiny;
    conf_cq_create(as, &tiny, 2);
    conf_flush_into(pds, &tiny, &tiny, 3, 500);
    counters_of(as, &c);
    CHECK_EQ_U64(c.FlushedRequests - before.FlushedRequests, 3);
    CHECK_EQ_U64(c.CQError - before.CQError, 1);
    conf_cq_destroy(&tiny);
#endif

    fixture_close_wait(&qpc2->Header);
    fixture_close_wait(&qpc->Header);
    fixture_close_wait(&qps->Header);
    conf_cq_destroy(&cqc);
    conf_cq_destroy(&cqs);
    fixture_close_wait(&pdc->Header);
    fixture_close_wait(&pds->Header);
    fixture_close_wait(&l->Header);
    ndk_close_adapter(ac);
    ndk_close_adapter(as);
}
