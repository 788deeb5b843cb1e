/* Consumer misuse (docs/misuse.md): NULL object and out pointers, objects of the wrong type,
 * memory that is no softndk object, calls on objects whose close is pending, double close,
 * posting after a QP's close began, queue overflows, SGE and length limits, invalid flags, CQ
 * overrun by a consumer that does not poll, closing a parent before its children. Each misuse
 * gets a defined status (asserted exactly) and leaves the objects usable; nothing here reads
 * memory softndk has freed. The suite also runs under ASan+UBSan, which is what shows that a
 * misuse never corrupts memory. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "objects.h"

/* ------------------------------------------------------------------------------------------ */
/* helpers */

/* A loopback port where nothing listens (bound, never listening: a connect is refused at once,
 * and nobody else can take the port while *fd stays open). */
static uint16_t refusing_port(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(*fd >= 0);
    struct sockaddr_in sin = ndk_loopback4(0);
    CHECK(bind(*fd, (struct sockaddr *)&sin, sizeof sin) == 0);
    socklen_t len = sizeof sin;
    CHECK(getsockname(*fd, (struct sockaddr *)&sin, &len) == 0);
    return ntohs(sin.sin_port);
}

static NDK_MR *make_mr(NDK_PD *pd, BOOLEAN fast)
{
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, fast, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    return mr;
}

static NDK_MW *make_mw(NDK_PD *pd)
{
    NDK_MW *mw = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMw(pd, ndk_create_never, NULL, &mw), STATUS_SUCCESS);
    return mw;
}

static NDK_SRQ *make_srq(NDK_PD *pd, ULONG depth)
{
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, depth, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    return srq;
}

static NDK_CONNECTOR *make_connector(NDK_ADAPTER *a)
{
    NDK_CONNECTOR *c = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &c), STATUS_SUCCESS);
    return c;
}

static NDK_LISTENER *make_listener(NDK_ADAPTER *a)
{
    NDK_LISTENER *l = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, conf_connect_never, NULL, ndk_create_never, NULL, &l),
        STATUS_SUCCESS);
    return l;
}

static NDK_SHARED_ENDPOINT *make_se(NDK_ADAPTER *a)
{
    NDK_SHARED_ENDPOINT *se = NULL;
    struct sockaddr_in sin = ndk_loopback4(0);
    CHECK_STATUS(a->Dispatch->NdkCreateSharedEndpoint(a, (struct sockaddr *)&sin, sizeof sin,
                                                      ndk_create_never, NULL, &se),
                 STATUS_SUCCESS);
    return se;
}

/* Any object pointer seen as another type: what a confused consumer passes. */
#define AS(type, obj) ((type *)(void *)(obj))

/* Collect exactly n results from cq, polling (a polling consumer also drives progress). */
struct collect {
    NDK_CQ *cq;
    NDK_RESULT_EX *out;
    unsigned want, got;
};

static bool collect_step(void *p)
{
    struct collect *c = p;
    c->got += c->cq->Dispatch->NdkGetCqResultsEx(c->cq, c->out + c->got, c->want - c->got);
    return c->got >= c->want;
}

static void collect(NDK_CQ *cq, NDK_RESULT_EX *out, unsigned n)
{
    struct collect c = {cq, out, n, 0};
    CHECK_MSG(harness_wait_until(collect_step, &c, FIXTURE_WAIT_MS), "%u of %u completions", c.got,
              n);
}

/* Nothing more on cq for FIXTURE_QUIET_MS (polling, so that progress is driven meanwhile). */
static bool cq_stays_empty(NDK_CQ *cq)
{
    NDK_RESULT_EX x;
    struct collect c = {cq, &x, 1, 0};
    return !harness_wait_until(collect_step, &c, FIXTURE_QUIET_MS);
}

/* ------------------------------------------------------------------------------------------ */
/* A connected pair on one adapter (loopback): client QP (its own initiator CQ when asked) and
 * server QP, both with zero-SGE receives posted by the tests as needed. */

struct pair {
    NDK_ADAPTER *a;
    NDK_ADAPTER_INFO info;
    NDK_PD *pd;
    struct conf_cq crcq, cicq, scq;
    bool own_icq;
    NDK_QP *cqp, *sqp;
    NDK_LISTENER *l;
    NDK_CONNECTOR *cconn, *sconn;
    struct harness_event incoming_ev;
    NDK_CONNECTOR *incoming;
    struct ndk_req rc; /* the client's NdkConnect */
    bool listener_closed;
};

static void pair_on_connect(void *ctx, NDK_CONNECTOR *c)
{
    struct pair *p = ctx;
    p->incoming = c;
    harness_event_signal(&p->incoming_ev);
}

/* Up to the server's connect event: p->sconn is the incoming connector, not accepted yet. */
static void pair_begin(struct pair *p, const SOFTNDK_OPTIONS *o, ULONG sq_depth, ULONG icq_depth)
{
    memset(p, 0, sizeof *p);
    p->a = o ? conf_open_with(o) : conf_open();
    conf_query(p->a, &p->info);
    p->pd = conf_pd(p->a);
    conf_cq_create(p->a, &p->crcq, 64);
    p->own_icq = icq_depth != 0;
    if (p->own_icq)
        conf_cq_create(p->a, &p->cicq, icq_depth);
    NDK_CQ *icq = p->own_icq ? p->cicq.cq : p->crcq.cq;
    CHECK_STATUS(p->pd->Dispatch->NdkCreateQp(p->pd, p->crcq.cq, icq, (void *)0xC1, 16, sq_depth, 4,
                                              4, 64, ndk_create_never, NULL, &p->cqp),
                 STATUS_SUCCESS);
    conf_cq_create(p->a, &p->scq, 64);
    CHECK_STATUS(p->pd->Dispatch->NdkCreateQp(p->pd, p->scq.cq, p->scq.cq, (void *)0x5E, 16, 16, 4,
                                              4, 64, ndk_create_never, NULL, &p->sqp),
                 STATUS_SUCCESS);
    harness_event_init(&p->incoming_ev);
    CHECK_STATUS(
        p->a->Dispatch->NdkCreateListener(p->a, pair_on_connect, p, ndk_create_never, NULL, &p->l),
        STATUS_SUCCESS);
    struct sockaddr_in sin = ndk_loopback4(0);
    CHECK_STATUS(p->l->Dispatch->NdkListen(p->l, (struct sockaddr *)&sin, sizeof sin,
                                           ndk_request_never, NULL),
                 STATUS_SUCCESS);
    ULONG len = sizeof sin;
    CHECK_STATUS(p->l->Dispatch->NdkGetLocalAddress(p->l, (struct sockaddr *)&sin, &len),
                 STATUS_SUCCESS);
    struct sockaddr_in src = ndk_loopback4(0);
    p->cconn = make_connector(p->a);
    ndk_req_init(&p->rc);
    CHECK_STATUS(p->cconn->Dispatch->NdkConnect(p->cconn, p->cqp, (struct sockaddr *)&src,
                                                sizeof src, (struct sockaddr *)&sin, sizeof sin, 4,
                                                4, NULL, 0, ndk_req_done, &p->rc),
                 STATUS_PENDING);
    CHECK_MSG(harness_event_wait(&p->incoming_ev, 1, FIXTURE_WAIT_MS), "no connect event");
    p->sconn = p->incoming;
}

/* Accept and complete: both QPs connected. */
static void pair_finish(struct pair *p)
{
    struct ndk_req ra, rcc;
    ndk_req_init(&ra);
    ndk_req_init(&rcc);
    CHECK_STATUS(p->sconn->Dispatch->NdkAccept(p->sconn, p->sqp, 4, 4, NULL, 0, NULL, NULL,
                                               ndk_req_done, &ra),
                 STATUS_PENDING);
    CHECK_STATUS(ndk_req_wait(&p->rc, STATUS_PENDING), STATUS_SUCCESS);
    NTSTATUS st = p->cconn->Dispatch->NdkCompleteConnect(p->cconn, NULL, NULL, ndk_req_done, &rcc);
    CHECK_STATUS(ndk_req_wait(&rcc, st), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&ra, STATUS_PENDING), STATUS_SUCCESS);
    harness_event_destroy(&ra.ev);
    harness_event_destroy(&rcc.ev);
}

static void pair_open(struct pair *p, const SOFTNDK_OPTIONS *o, ULONG sq_depth, ULONG icq_depth)
{
    pair_begin(p, o, sq_depth, icq_depth);
    pair_finish(p);
}

static void pair_close(struct pair *p)
{
    if (p->cconn)
        fixture_close_wait(&p->cconn->Header);
    fixture_close_wait(&p->sconn->Header);
    if (p->cqp)
        fixture_close_wait(&p->cqp->Header);
    fixture_close_wait(&p->sqp->Header);
    if (!p->listener_closed)
        fixture_close_wait(&p->l->Header);
    conf_cq_destroy(&p->scq);
    if (p->own_icq)
        conf_cq_destroy(&p->cicq);
    conf_cq_destroy(&p->crcq);
    fixture_close_wait(&p->pd->Header);
    ndk_close_adapter(p->a);
    harness_event_destroy(&p->rc.ev);
    harness_event_destroy(&p->incoming_ev);
}

/* Everything the consumer can reach on one adapter, for the NULL and wrong-type tests. */
struct zoo {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    struct conf_cq c;
    NDK_MR *mr;
    NDK_MW *mw;
    NDK_SRQ *srq;
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    NDK_LISTENER *l;
    NDK_SHARED_ENDPOINT *se;
};

static void zoo_open(struct zoo *z)
{
    z->a = conf_open();
    z->pd = conf_pd(z->a);
    conf_cq_create(z->a, &z->c, 16);
    z->mr = make_mr(z->pd, FALSE);
    z->mw = make_mw(z->pd);
    z->srq = make_srq(z->pd, 4);
    z->qp = conf_qp(z->pd, z->c.cq, z->c.cq, NULL, 4);
    z->conn = make_connector(z->a);
    z->l = make_listener(z->a);
    z->se = make_se(z->a);
}

/* Closing everything proves each object survived the misuse (a freed or broken one would
 * fail its close, or leave SoftNdkCloseAdapter waiting). */
static void zoo_close(struct zoo *z)
{
    fixture_close_wait(&z->se->Header);
    fixture_close_wait(&z->l->Header);
    fixture_close_wait(&z->conn->Header);
    fixture_close_wait(&z->qp->Header);
    fixture_close_wait(&z->srq->Header);
    conf_close(&z->mw->Header);
    conf_close(&z->mr->Header);
    fixture_close_wait(&z->pd->Header);
    conf_cq_destroy(&z->c);
    ndk_close_adapter(z->a);
}

/* Every method of every object, called with `this` replaced by the given pointers (NULL, or an
 * object of another type, or memory that is no softndk object). `x` names each pointer. Methods
 * that return NTSTATUS answer STATUS_INVALID_PARAMETER, token getters 0, GetCqResults 0, and the
 * VOID ones do nothing. Every other argument is valid, so the object pointer is what fails. */
struct bad_this {
    NDK_ADAPTER *adapter;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_MR *mr;
    NDK_MW *mw;
    NDK_SRQ *srq;
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    NDK_LISTENER *l;
    NDK_SHARED_ENDPOINT *se;
    NDK_OBJECT_HEADER *hdr; /* for the close slots */
};

static void call_every_method(const struct zoo *z, const struct bad_this *x)
{
    const NTSTATUS IP = STATUS_INVALID_PARAMETER;
    static char buf[8192] __attribute__((aligned(4096)));
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    NDK_SGE sge = {.VirtualAddress = buf, .Length = 16, .MemoryRegionToken = 1};
    struct sockaddr_in sin = ndk_loopback4(0), dst = ndk_loopback4(9);
    ULONG alen = sizeof sin;
    void *out = (void *)0x1; /* a create's out pointer must stay untouched */

    /* adapter */
    const NDK_ADAPTER_DISPATCH *ad = z->a->Dispatch;
    NDK_ADAPTER_INFO info;
    ULONG isize = sizeof info;
    CHECK_STATUS(ad->NdkQueryAdapterInfo(x->adapter, &info, &isize), IP);
    CHECK_STATUS(ad->NdkCreateCq(x->adapter, 4, conf_cq_notify, NULL, NULL, ndk_create_never, NULL,
                                 (NDK_CQ **)&out),
                 IP);
    CHECK_STATUS(ad->NdkCreatePd(x->adapter, ndk_create_never, NULL, (NDK_PD **)&out), IP);
    CHECK_STATUS(ad->NdkCreateSharedEndpoint(x->adapter, (struct sockaddr *)&sin, sizeof sin,
                                             ndk_create_never, NULL, (NDK_SHARED_ENDPOINT **)&out),
                 IP);
    CHECK_STATUS(ad->NdkCreateConnector(x->adapter, ndk_create_never, NULL, (NDK_CONNECTOR **)&out),
                 IP);
    CHECK_STATUS(ad->NdkCreateListener(x->adapter, conf_connect_never, NULL, ndk_create_never, NULL,
                                       (NDK_LISTENER **)&out),
                 IP);
    union {
        NDK_LOGICAL_ADDRESS_MAPPING lam;
        unsigned char raw[0x10 + 8 * 4];
    } u;
    memset(&u, 0, sizeof u);
    ULONG lsize = sizeof u, fbo = 77;
    CHECK_STATUS(ad->NdkBuildLAM(x->adapter, &mdl, sizeof buf, ndk_request_never, NULL, &u.lam,
                                 &lsize, &fbo),
                 IP);
    CHECK_EQ_U64(lsize, sizeof u);
    CHECK_EQ_U64(fbo, 77);
    ad->NdkReleaseLAM(x->adapter, &u.lam); /* logged, nothing done */
    SOFTNDK_COUNTERS ctrs = {.Size = sizeof ctrs};
    CHECK_STATUS(SoftNdkQueryCounters(x->adapter, &ctrs), IP);
    CHECK(out == (void *)0x1);

    /* PD */
    const NDK_PD_DISPATCH *pd = z->pd->Dispatch;
    CHECK_STATUS(pd->NdkClosePd(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_STATUS(pd->NdkCreateMr(x->pd, FALSE, ndk_create_never, NULL, (NDK_MR **)&out), IP);
    CHECK_STATUS(pd->NdkCreateMw(x->pd, ndk_create_never, NULL, (NDK_MW **)&out), IP);
    CHECK_STATUS(pd->NdkCreateSrq(x->pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL,
                                  (NDK_SRQ **)&out),
                 IP);
    CHECK_STATUS(pd->NdkCreateQp(x->pd, z->c.cq, z->c.cq, NULL, 4, 4, 1, 1, 0, ndk_create_never,
                                 NULL, (NDK_QP **)&out),
                 IP);
    CHECK_STATUS(pd->NdkCreateQpWithSrq(x->pd, z->c.cq, z->c.cq, z->srq, NULL, 4, 1, 0,
                                        ndk_create_never, NULL, (NDK_QP **)&out),
                 IP);
    UINT32 tok = 0x1234;
    pd->NdkGetPrivilegedMemoryRegionToken(x->pd, &tok);
    CHECK_EQ_U64(tok, 0);
    CHECK(out == (void *)0x1);

    /* CQ */
    const NDK_CQ_DISPATCH *cq = z->c.cq->Dispatch;
    CHECK_STATUS(cq->NdkCloseCq(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_STATUS(cq->NdkResizeCq(x->cq, 8, ndk_request_never, NULL), IP);
    cq->NdkArmCq(x->cq, NDK_CQ_NOTIFY_ANY);
    NDK_RESULT r[2];
    NDK_RESULT_EX rx[2];
    CHECK_EQ_U64(cq->NdkGetCqResults(x->cq, r, 2), 0);
    CHECK_EQ_U64(cq->NdkGetCqResultsEx(x->cq, rx, 2), 0);
    CHECK_STATUS(cq->NdkControlCqInterruptModeration(x->cq, 10, 2), IP);

    /* MR */
    const NDK_MR_DISPATCH *mr = z->mr->Dispatch;
    CHECK_STATUS(mr->NdkCloseMr(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_STATUS(mr->NdkRegisterMr(x->mr, &mdl, sizeof buf, 0, ndk_request_never, NULL), IP);
    CHECK_STATUS(mr->NdkDeregisterMr(x->mr, ndk_request_never, NULL), IP);
    CHECK_STATUS(mr->NdkInitializeFastRegisterMr(x->mr, 4, FALSE, ndk_request_never, NULL), IP);
    CHECK_EQ_U64(mr->NdkGetRemoteTokenFromMr(x->mr), 0);
    CHECK_EQ_U64(mr->NdkGetLocalTokenFromMr(x->mr), 0);

    /* MW */
    const NDK_MW_DISPATCH *mw = z->mw->Dispatch;
    CHECK_STATUS(mw->NdkCloseMw(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_EQ_U64(mw->NdkGetRemoteTokenFromMw(x->mw), 0);

    /* SRQ */
    const NDK_SRQ_DISPATCH *srq = z->srq->Dispatch;
    CHECK_STATUS(srq->NdkCloseSrq(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_STATUS(srq->NdkModifySrq(x->srq, 8, 1, ndk_request_never, NULL), IP);
    CHECK_STATUS(srq->NdkSrqReceive(x->srq, NULL, &sge, 1), IP);

    /* QP */
    const NDK_QP_DISPATCH *qp = z->qp->Dispatch;
    NDK_LOGICAL_ADDRESS page = {.QuadPart = (int64_t)(uintptr_t)buf};
    CHECK_STATUS(qp->NdkCloseQp(x->hdr, fixture_close_signal, NULL), IP);
    qp->NdkFlush(x->qp);
    CHECK_STATUS(qp->NdkSend(x->qp, NULL, &sge, 1, 0), IP);
    CHECK_STATUS(qp->NdkReceive(x->qp, NULL, &sge, 1), IP);
    CHECK_STATUS(qp->NdkBind(x->qp, NULL, z->mr, z->mw, buf, 64, NDK_OP_FLAG_ALLOW_REMOTE_READ),
                 IP);
    CHECK_STATUS(qp->NdkFastRegister(x->qp, NULL, z->mr, 1, &page, 0, 64, buf, 0), IP);
    CHECK_STATUS(qp->NdkInvalidate(x->qp, NULL, &z->mw->Header, 0), IP);
    CHECK_STATUS(qp->NdkRead(x->qp, NULL, &sge, 1, 0x1000, 1, 0), IP);
    CHECK_STATUS(qp->NdkWrite(x->qp, NULL, &sge, 1, 0x1000, 1, 0), IP);
    CHECK_STATUS(qp->NdkSendAndInvalidate(x->qp, NULL, &sge, 1, 0, 1), IP);

    /* connector */
    const NDK_CONNECTOR_DISPATCH *cn = z->conn->Dispatch;
    ULONG ird = 5, ord = 5, pdlen = 0;
    CHECK_STATUS(cn->NdkCloseConnector(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_STATUS(cn->NdkConnect(x->conn, z->qp, (struct sockaddr *)&sin, sizeof sin,
                                (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(cn->NdkConnectWithSharedEndpoint(x->conn, z->qp, z->se, (struct sockaddr *)&dst,
                                                  sizeof dst, 1, 1, NULL, 0, ndk_request_never,
                                                  NULL),
                 IP);
    CHECK_STATUS(cn->NdkCompleteConnect(x->conn, NULL, NULL, ndk_request_never, NULL), IP);
    CHECK_STATUS(cn->NdkCompleteConnectEx(x->conn, NULL, NULL, ndk_request_never, NULL), IP);
    CHECK_STATUS(cn->NdkAccept(x->conn, z->qp, 1, 1, NULL, 0, NULL, NULL, ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(
        cn->NdkAcceptEx(x->conn, z->qp, 1, 1, NULL, 0, NULL, NULL, ndk_request_never, NULL), IP);
    CHECK_STATUS(cn->NdkReject(x->conn, NULL, 0), IP);
    CHECK_STATUS(cn->NdkGetConnectionData(x->conn, &ird, &ord, NULL, &pdlen), IP);
    CHECK_EQ_U64(ird, 5);
    alen = sizeof sin;
    CHECK_STATUS(cn->NdkGetLocalAddress(x->conn, (struct sockaddr *)&sin, &alen), IP);
    CHECK_STATUS(cn->NdkGetPeerAddress(x->conn, (struct sockaddr *)&sin, &alen), IP);
    CHECK_EQ_U64(alen, sizeof sin);
    CHECK_STATUS(cn->NdkDisconnect(x->conn, ndk_request_never, NULL), IP);

    /* listener */
    const NDK_LISTENER_DISPATCH *ld = z->l->Dispatch;
    CHECK_STATUS(ld->NdkCloseListener(x->hdr, fixture_close_signal, NULL), IP);
    sin = ndk_loopback4(0);
    CHECK_STATUS(ld->NdkListen(x->l, (struct sockaddr *)&sin, sizeof sin, ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(ld->NdkGetLocalAddress(x->l, (struct sockaddr *)&sin, &alen), IP);
    ld->NdkControlConnectEvents(x->l, TRUE);

    /* shared endpoint */
    const NDK_SHARED_ENDPOINT_DISPATCH *sd = z->se->Dispatch;
    CHECK_STATUS(sd->NdkCloseSharedEndpoint(x->hdr, fixture_close_signal, NULL), IP);
    CHECK_STATUS(sd->NdkGetLocalAddress(x->se, (struct sockaddr *)&sin, &alen), IP);
}

/* ------------------------------------------------------------------------------------------ */
/* NULL, wrong type, foreign memory */

TEST(misuse_null_object_pointer_every_method)
{
    struct zoo z;
    zoo_open(&z);
    struct bad_this x;
    memset(&x, 0, sizeof x);
    call_every_method(&z, &x);
    /* NdkQueryExtension does not look at the object: no extension exists anyway. */
    GUID g = {1, 2, 3, {4, 5, 6, 7, 8, 9, 10, 11}};
    NDK_EXTENSION_INTERFACE ext = {(const void *)0x1};
    CHECK_STATUS(z.pd->Dispatch->NdkQueryExtension(NULL, &g, conf_version(1, 0), &ext),
                 STATUS_NOT_SUPPORTED);
    CHECK(ext.Dispatch == NULL);
    CHECK_STATUS(z.pd->Dispatch->NdkQueryExtension(&z.pd->Header, &g, conf_version(1, 0), NULL),
                 STATUS_NOT_SUPPORTED);
    SoftNdkCloseAdapter(NULL); /* logged, nothing done */
    zoo_close(&z);
}

TEST(misuse_wrong_object_type_every_method)
{
    /* Each method gets a live softndk object of another type: a PD where anything else is
     * expected, a CQ where a PD is, and the adapter's header in the close slots (the adapter
     * has no close slot; SoftNdkCloseAdapter closes it). */
    struct zoo z;
    zoo_open(&z);
    struct bad_this x = {
        .adapter = AS(NDK_ADAPTER, z.pd),
        .pd = AS(NDK_PD, z.c.cq),
        .cq = AS(NDK_CQ, z.pd),
        .mr = AS(NDK_MR, z.mw),
        .mw = AS(NDK_MW, z.mr),
        .srq = AS(NDK_SRQ, z.qp),
        .qp = AS(NDK_QP, z.srq),
        .conn = AS(NDK_CONNECTOR, z.l),
        .l = AS(NDK_LISTENER, z.conn),
        .se = AS(NDK_SHARED_ENDPOINT, z.l),
        .hdr = &z.a->Header,
    };
    call_every_method(&z, &x);
    /* An object that is not an adapter given to SoftNdkCloseAdapter: logged, nothing closed. */
    SoftNdkCloseAdapter(AS(NDK_ADAPTER, z.pd));
    NDK_MR *mr2 = make_mr(z.pd, FALSE); /* the PD still works */
    /* The close slots are one function: whichever table's slot is used, the header decides
     * which object closes (here an MR through the CQ table). */
    CHECK_STATUS(z.c.cq->Dispatch->NdkCloseCq(&mr2->Header, NULL, NULL), STATUS_SUCCESS);
    zoo_close(&z);
}

TEST(misuse_wrong_object_type_in_arguments)
{
    conf_breaks_rules("handle_invalid: objects of the wrong type as arguments");
    /* Objects of the wrong type (or of another adapter) where a method expects a QP, CQ, SRQ
     * or shared endpoint as a further argument. (NdkCreateQp(WithSrq) with a wrong CQ, SRQ or
     * PD: conformance/qp *_create_limits; Bind, FastRegister and Invalidate:
     * misuse_wrong_objects_in_initiator_requests.) */
    struct zoo z;
    zoo_open(&z);
    NDK_ADAPTER *b = conf_open_other_device();
    NDK_PD *bpd = conf_pd(b);
    struct conf_cq bcq;
    conf_cq_create(b, &bcq, 4);
    NDK_QP *bqp = conf_qp(bpd, bcq.cq, bcq.cq, NULL, 2);
    NDK_SHARED_ENDPOINT *bse = make_se(b);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(9);
    const NDK_CONNECTOR_DISPATCH *cn = z.conn->Dispatch;
#define CONNECT(q)                                                                                 \
    cn->NdkConnect(z.conn, (q), (struct sockaddr *)&src, sizeof src, (struct sockaddr *)&dst,      \
                   sizeof dst, 1, 1, NULL, 0, ndk_request_never, NULL)
#define CONNECT_SE(q, s)                                                                           \
    cn->NdkConnectWithSharedEndpoint(z.conn, (q), (s), (struct sockaddr *)&dst, sizeof dst, 1, 1,  \
                                     NULL, 0, ndk_request_never, NULL)
    CHECK_STATUS(CONNECT(AS(NDK_QP, z.c.cq)), STATUS_INVALID_PARAMETER); /* a CQ as the QP */
    CHECK_STATUS(CONNECT(NULL), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(CONNECT(bqp), STATUS_INVALID_PARAMETER); /* a QP of another device */
    CHECK_STATUS(CONNECT_SE(z.qp, AS(NDK_SHARED_ENDPOINT, z.l)), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(CONNECT_SE(z.qp, NULL), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(CONNECT_SE(z.qp, bse), STATUS_INVALID_PARAMETER); /* SE of another device */
    CHECK_STATUS(CONNECT_SE(AS(NDK_QP, z.se), z.se), STATUS_INVALID_PARAMETER);
#undef CONNECT
#undef CONNECT_SE
    /* Nothing was started: the connector and the QP are still free for a real connection,
     * which here is refused (nothing listens) and leaves the connector used up. */
    int rfd;
    dst = ndk_loopback4(refusing_port(&rfd));
    struct ndk_req r;
    ndk_req_init(&r);
    NTSTATUS st =
        cn->NdkConnect(z.conn, z.qp, (struct sockaddr *)&src, sizeof src, (struct sockaddr *)&dst,
                       sizeof dst, 1, 1, NULL, 0, ndk_req_done, &r);
    CHECK_STATUS(ndk_req_wait(&r, st), STATUS_CONNECTION_REFUSED);
    close(rfd);
    /* A CQ of another adapter, or a closing one, for a new QP: conformance/qp, lifecycle. */
    conf_close(&bse->Header);
    conf_close(&bqp->Header);
    conf_cq_destroy(&bcq);
    conf_close(&bpd->Header);
    ndk_close_adapter(b);
    /* The connector holds the QP since its NdkConnect: close it first. */
    fixture_close_wait(&z.conn->Header);
    z.conn = make_connector(z.a);
    zoo_close(&z);
    harness_event_destroy(&r.ev);
}

TEST(misuse_foreign_memory_as_object)
{
    /* Memory that is no softndk object, large enough to hold one (see docs/misuse.md: a
     * pointer to less is undefined), zeroed or dressed up with a plausible header. */
    struct zoo z;
    zoo_open(&z);
    static unsigned char fake[1024] __attribute__((aligned(64)));
    for (int round = 0; round < 3; round++) {
        memset(fake, round == 2 ? 0xA5 : 0, sizeof fake);
        if (round == 1) {
            NDK_OBJECT_HEADER *h = (NDK_OBJECT_HEADER *)(void *)fake;
            h->Version = conf_version(2, 1);
            h->ObjectType = NdkObjectTypeQp;
            AS(NDK_QP, fake)->Dispatch = z.qp->Dispatch;
        }
        struct bad_this x = {
            .adapter = AS(NDK_ADAPTER, fake),
            .pd = AS(NDK_PD, fake),
            .cq = AS(NDK_CQ, fake),
            .mr = AS(NDK_MR, fake),
            .mw = AS(NDK_MW, fake),
            .srq = AS(NDK_SRQ, fake),
            .qp = AS(NDK_QP, fake),
            .conn = AS(NDK_CONNECTOR, fake),
            .l = AS(NDK_LISTENER, fake),
            .se = AS(NDK_SHARED_ENDPOINT, fake),
            .hdr = (NDK_OBJECT_HEADER *)(void *)fake,
        };
        call_every_method(&z, &x);
        SoftNdkCloseAdapter(AS(NDK_ADAPTER, fake));
    }
    zoo_close(&z);
}

TEST(misuse_small_foreign_object_is_not_read_past)
{
    conf_breaks_rules("handle_invalid: foreign memory as an argument");
    /* A consumer-made object of the public size (0x30 bytes) that softndk never created, its
     * ObjectType zero, garbage or out of range: refused on its header alone, without a byte
     * past it being read (ASan checks). One whose ObjectType names a valid type is read past:
     * undefined (docs/misuse.md). */
    struct zoo z;
    zoo_open(&z);
    const NDK_QP_DISPATCH *qd = z.qp->Dispatch;
    for (int round = 0; round < 3; round++) {
        NDK_QP *fake = malloc(sizeof *fake);
        CHECK(fake != NULL);
        memset(fake, round == 1 ? 0xA5 : 0, sizeof *fake);
        if (round == 2)
            fake->Header.ObjectType = NdkObjectTypeMax;
        fake->Dispatch = qd;
        CHECK_STATUS(qd->NdkSend(fake, NULL, NULL, 0, 0), STATUS_INVALID_PARAMETER);
        CHECK_STATUS(qd->NdkReceive(fake, NULL, NULL, 0), STATUS_INVALID_PARAMETER);
        qd->NdkFlush(fake);
        CHECK_STATUS(qd->NdkCloseQp(&fake->Header, NULL, NULL), STATUS_INVALID_PARAMETER);
        CHECK_STATUS(z.pd->Dispatch->NdkCreateQp(AS(NDK_PD, fake), z.c.cq, z.c.cq, NULL, 4, 4, 1, 1,
                                                 0, ndk_create_never, NULL, &fake),
                     STATUS_INVALID_PARAMETER);
        CHECK_STATUS(z.pd->Dispatch->NdkCreateQp(z.pd, AS(NDK_CQ, fake), z.c.cq, NULL, 4, 4, 1, 1,
                                                 0, ndk_create_never, NULL, &fake),
                     STATUS_INVALID_PARAMETER);
        CHECK_EQ_U64(z.c.cq->Dispatch->NdkGetCqResults(AS(NDK_CQ, fake), NULL, 0), 0);
        CHECK_STATUS(SoftNdkQueryCounters(AS(NDK_ADAPTER, fake), NULL), STATUS_INVALID_PARAMETER);
        SoftNdkCloseAdapter(AS(NDK_ADAPTER, fake));
        free(fake);
    }
    zoo_close(&z);
}

TEST(misuse_null_in_and_out_arguments)
{
    conf_breaks_rules("handle_invalid: NULL objects as arguments");
    /* NULL where an argument is required (NULL out pointers of creates that other files do
     * not cover, the in/out lengths of the getters, the completion callbacks of requests that
     * can pend). Creates with a NULL out pointer, elsewhere: CQ (cq), QP, SRQ (qp), MW (mr),
     * connector and listener (connection_objects); NdkQueryAdapterInfo's size (adapter). */
    struct zoo z;
    zoo_open(&z);
    const NTSTATUS IP = STATUS_INVALID_PARAMETER;
    struct sockaddr_in sin = ndk_loopback4(0), dst = ndk_loopback4(9);
    CHECK_STATUS(z.a->Dispatch->NdkCreatePd(z.a, ndk_create_never, NULL, NULL), IP);
    CHECK_STATUS(z.a->Dispatch->NdkCreateSharedEndpoint(z.a, (struct sockaddr *)&sin, sizeof sin,
                                                        ndk_create_never, NULL, NULL),
                 IP);
    NDK_SHARED_ENDPOINT *se = NULL;
    CHECK_STATUS(
        z.a->Dispatch->NdkCreateSharedEndpoint(z.a, NULL, sizeof sin, ndk_create_never, NULL, &se),
        STATUS_INVALID_ADDRESS);
    CHECK(se == NULL);
    CHECK_STATUS(z.pd->Dispatch->NdkCreateMr(z.pd, FALSE, ndk_create_never, NULL, NULL), IP);
    CHECK_STATUS(z.pd->Dispatch->NdkCreateQpWithSrq(z.pd, z.c.cq, z.c.cq, z.srq, NULL, 4, 1, 0,
                                                    ndk_create_never, NULL, NULL),
                 IP);
    z.pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(z.pd, NULL); /* nothing to write */

    /* NdkBuildLAM without its size or FBO output */
    static char buf[4096] __attribute__((aligned(4096)));
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    union {
        NDK_LOGICAL_ADDRESS_MAPPING lam;
        unsigned char raw[0x10 + 8 * 2];
    } u;
    memset(&u, 0, sizeof u);
    ULONG lsize = sizeof u, fbo = 0;
    CHECK_STATUS(z.a->Dispatch->NdkBuildLAM(z.a, &mdl, sizeof buf, ndk_request_never, NULL, &u.lam,
                                            NULL, &fbo),
                 IP);
    CHECK_STATUS(z.a->Dispatch->NdkBuildLAM(z.a, &mdl, sizeof buf, ndk_request_never, NULL, &u.lam,
                                            &lsize, NULL),
                 IP);
    CHECK_STATUS(z.a->Dispatch->NdkBuildLAM(z.a, NULL, sizeof buf, ndk_request_never, NULL, &u.lam,
                                            &lsize, &fbo),
                 IP);
    /* Releasing a mapping never built, or twice: logged, nothing done. */
    z.a->Dispatch->NdkReleaseLAM(z.a, &u.lam);
    z.a->Dispatch->NdkReleaseLAM(z.a, NULL);
    CHECK_STATUS(z.a->Dispatch->NdkBuildLAM(z.a, &mdl, sizeof buf, ndk_request_never, NULL, &u.lam,
                                            &lsize, &fbo),
                 STATUS_SUCCESS);
    z.a->Dispatch->NdkReleaseLAM(z.a, &u.lam);
    z.a->Dispatch->NdkReleaseLAM(z.a, &u.lam);
    CHECK(u.lam.AdapterContext == NULL);

    /* SoftNdkQueryCounters */
    CHECK_STATUS(SoftNdkQueryCounters(z.a, NULL), IP);
    SOFTNDK_COUNTERS ctrs = {.Size = 4};
    CHECK_STATUS(SoftNdkQueryCounters(z.a, &ctrs), IP);

    /* CQ: a NULL results array with room for results returns nothing */
    CHECK_EQ_U64(z.c.cq->Dispatch->NdkGetCqResults(z.c.cq, NULL, 4), 0);
    CHECK_EQ_U64(z.c.cq->Dispatch->NdkGetCqResultsEx(z.c.cq, NULL, 4), 0);
    CHECK_EQ_U64(z.c.cq->Dispatch->NdkGetCqResultsEx(z.c.cq, NULL, 0), 0);

    /* address getters without their length */
    CHECK_STATUS(z.l->Dispatch->NdkGetLocalAddress(z.l, (struct sockaddr *)&sin, NULL), IP);
    CHECK_STATUS(z.se->Dispatch->NdkGetLocalAddress(z.se, (struct sockaddr *)&sin, NULL), IP);
    CHECK_STATUS(z.conn->Dispatch->NdkGetLocalAddress(z.conn, (struct sockaddr *)&sin, NULL), IP);
    CHECK_STATUS(z.conn->Dispatch->NdkGetPeerAddress(z.conn, (struct sockaddr *)&sin, NULL), IP);
    /* NdkGetConnectionData: no length; a length but no buffer ([CONN-9]) */
    ULONG pdlen = 8;
    CHECK_STATUS(z.conn->Dispatch->NdkGetConnectionData(z.conn, NULL, NULL, NULL, NULL), IP);
    CHECK_STATUS(z.conn->Dispatch->NdkGetConnectionData(z.conn, NULL, NULL, NULL, &pdlen), IP);
    CHECK_EQ_U64(pdlen, 8);

    /* requests that can pend need their completion callback; private data needs its buffer */
    const NDK_CONNECTOR_DISPATCH *cn = z.conn->Dispatch;
    CHECK_STATUS(cn->NdkConnect(z.conn, z.qp, (struct sockaddr *)&sin, sizeof sin,
                                (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0, NULL, NULL),
                 IP);
    CHECK_STATUS(cn->NdkConnect(z.conn, z.qp, NULL, sizeof sin, (struct sockaddr *)&dst, sizeof dst,
                                1, 1, NULL, 0, ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(cn->NdkConnect(z.conn, z.qp, (struct sockaddr *)&sin, sizeof sin, NULL, sizeof dst,
                                1, 1, NULL, 0, ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(cn->NdkConnect(z.conn, z.qp, (struct sockaddr *)&sin, sizeof sin,
                                (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 8,
                                ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(cn->NdkConnectWithSharedEndpoint(z.conn, z.qp, z.se, (struct sockaddr *)&dst,
                                                  sizeof dst, 1, 1, NULL, 0, NULL, NULL),
                 IP);
    CHECK_STATUS(cn->NdkConnectWithSharedEndpoint(z.conn, z.qp, z.se, NULL, sizeof dst, 1, 1, NULL,
                                                  0, ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(cn->NdkCompleteConnect(z.conn, NULL, NULL, NULL, NULL), IP);
    CHECK_STATUS(cn->NdkCompleteConnectEx(z.conn, NULL, NULL, NULL, NULL), IP);
    CHECK_STATUS(cn->NdkAccept(z.conn, z.qp, 1, 1, NULL, 0, NULL, NULL, NULL, NULL), IP);
    CHECK_STATUS(cn->NdkAcceptEx(z.conn, z.qp, 1, 1, NULL, 0, NULL, NULL, NULL, NULL), IP);
    CHECK_STATUS(cn->NdkAccept(z.conn, NULL, 1, 1, NULL, 0, NULL, NULL, ndk_request_never, NULL),
                 IP);
    CHECK_STATUS(cn->NdkReject(z.conn, NULL, 8), IP);
    CHECK_STATUS(cn->NdkDisconnect(z.conn, NULL, NULL), IP);
    CHECK_STATUS(z.l->Dispatch->NdkListen(z.l, NULL, sizeof sin, ndk_request_never, NULL),
                 STATUS_INVALID_ADDRESS);
    /* none of it used up the connector or the listener */
    CHECK_STATUS(cn->NdkGetConnectionData(z.conn, NULL, NULL, NULL, &pdlen), IP); /* pdlen 8 */
    pdlen = 0;
    CHECK_STATUS(cn->NdkGetConnectionData(z.conn, NULL, NULL, NULL, &pdlen),
                 STATUS_INVALID_DEVICE_STATE);
    sin = ndk_loopback4(0);
    CHECK_STATUS(
        z.l->Dispatch->NdkListen(z.l, (struct sockaddr *)&sin, sizeof sin, ndk_request_never, NULL),
        STATUS_SUCCESS);
    z.l->Dispatch->NdkControlConnectEvents(z.l, 2); /* any non-zero BOOLEAN pauses */
    /* a listener that listened pends its close until its socket left the progress engine */
    fixture_close_wait(&z.l->Header);
    z.l = make_listener(z.a);
    zoo_close(&z);
}

TEST(misuse_short_socket_address_is_not_read_past_its_length)
{
    /* An address length shorter than a sockaddr family field: softndk reads no byte past the
     * length the consumer gave (ASan checks), and refuses it. */
    NDK_ADAPTER *a = conf_open();
    unsigned char *one = malloc(1);
    CHECK(one != NULL);
    one[0] = AF_INET;
    NDK_SHARED_ENDPOINT *se = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateSharedEndpoint(a, (struct sockaddr *)(void *)one, 1,
                                                      ndk_create_never, NULL, &se),
                 STATUS_INVALID_ADDRESS);
    CHECK_STATUS(a->Dispatch->NdkCreateSharedEndpoint(a, (struct sockaddr *)(void *)one, 0,
                                                      ndk_create_never, NULL, &se),
                 STATUS_INVALID_ADDRESS);
    NDK_LISTENER *l = make_listener(a);
    CHECK_STATUS(
        l->Dispatch->NdkListen(l, (struct sockaddr *)(void *)one, 1, ndk_request_never, NULL),
        STATUS_INVALID_ADDRESS);
    free(one);
    conf_close(&l->Header);
    ndk_close_adapter(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Closing: parents with children, double close, calls while a close is pending */

TEST(misuse_pd_close_with_every_kind_of_child_pends)
{
    conf_breaks_rules("use_after_close: creates on a closing PD");
    /* Closing a parent first is legal: STATUS_PENDING (there is no "device busy"), the close
     * completes after the last child's; meanwhile the PD creates nothing and what it has
     * keeps working. (PD with an MR: lifecycle.) */
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c;
    conf_cq_create(a, &c, 16);
    NDK_MW *mw = make_mw(pd);
    NDK_SRQ *srq = make_srq(pd, 4);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 4);
    NDK_QP *sqp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, c.cq, c.cq, srq, NULL, 2, 1, 0,
                                                  ndk_create_never, NULL, &sqp),
                 STATUS_SUCCESS);
    UINT32 priv = 0;
    pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd, &priv);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &ev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&pd->Header, fixture_close_signal, &ev),
                 STATUS_INVALID_DEVICE_STATE);
    const NTSTATUS DS = STATUS_INVALID_DEVICE_STATE;
    void *out = (void *)0x1;
    CHECK_STATUS(pd->Dispatch->NdkCreateMw(pd, ndk_create_never, NULL, (NDK_MW **)&out), DS);
    CHECK_STATUS(pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL,
                                            (NDK_SRQ **)&out),
                 DS);
    CHECK_STATUS(pd->Dispatch->NdkCreateQp(pd, c.cq, c.cq, NULL, 4, 4, 1, 1, 0, ndk_create_never,
                                           NULL, (NDK_QP **)&out),
                 DS);
    CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, c.cq, c.cq, srq, NULL, 4, 1, 0,
                                                  ndk_create_never, NULL, (NDK_QP **)&out),
                 DS);
    CHECK(out == (void *)0x1);
    UINT32 priv2 = 0;
    pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd, &priv2);
    CHECK(priv2 != 0 && priv2 == priv);
    /* the children still work */
    conf_post_recvs(qp, 2, 1);
    CHECK_STATUS(srq->Dispatch->NdkSrqReceive(srq, NULL, NULL, 0), STATUS_SUCCESS);
    CHECK(mw->Dispatch->NdkGetRemoteTokenFromMw(mw) != 0);
    conf_close(&qp->Header);
    conf_close(&sqp->Header);
    fixture_close_wait(&srq->Header);
    CHECK_MSG(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS), "PD close completed with an MW open");
    conf_close(&mw->Header);
    CHECK_MSG(harness_event_wait(&ev, 1, FIXTURE_WAIT_MS), "PD close never completed");
    CHECK(!harness_event_wait(&ev, 2, FIXTURE_QUIET_MS));
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
    harness_event_destroy(&ev);
}

static void srq_note(void *ctx, NTSTATUS st)
{
    (void)st;
    harness_event_signal(ctx);
}

TEST(misuse_calls_on_closing_cq_and_srq)
{
    conf_breaks_rules("use_after_close: calls on a closing CQ and SRQ");
    /* A CQ and an SRQ whose close pends (a QP uses them): a second close is refused, no
     * notification comes any more, a new QP cannot use them, the rest works as before. */
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c, other;
    conf_cq_create(a, &c, 16);
    conf_cq_create(a, &other, 16);
    struct harness_event sn;
    harness_event_init(&sn);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 8, 1, 0, srq_note, &sn, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 8);
    NDK_QP *sqp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, other.cq, other.cq, srq, NULL, 2, 1, 0,
                                                  ndk_create_never, NULL, &sqp),
                 STATUS_SUCCESS);
    struct harness_event cev, sev;
    harness_event_init(&cev);
    harness_event_init(&sev);
    atomic_store(&c.closed, true);
    CHECK_STATUS(ndk_close_any(&c.cq->Header, fixture_close_signal, &cev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&c.cq->Header, fixture_close_signal, &cev),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(ndk_close_any(&srq->Header, fixture_close_signal, &sev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&srq->Header, fixture_close_signal, &sev),
                 STATUS_INVALID_DEVICE_STATE);
    NDK_QP *q2 = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateQp(pd, c.cq, c.cq, NULL, 4, 4, 1, 1, 0, ndk_create_never, NULL, &q2),
        STATUS_INVALID_PARAMETER);
    CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, other.cq, other.cq, srq, NULL, 2, 1, 0,
                                                  ndk_create_never, NULL, &q2),
                 STATUS_INVALID_PARAMETER);
    CHECK(q2 == NULL);
    /* the closing CQ: arming is ignored, results still come out, resize still works */
    conf_cq_arm(&c, NDK_CQ_NOTIFY_ANY);
    conf_post_recvs(qp, 3, 10);
    conf_flush(qp);
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 32, ndk_request_never, NULL), STATUS_SUCCESS);
    NDK_RESULT_EX x[4];
    CHECK_EQ_U64(c.cq->Dispatch->NdkGetCqResultsEx(c.cq, x, 4), 3);
    CHECK_STATUS(x[0].Status, STATUS_CANCELLED);
    /* the closing SRQ: a threshold above the count would notify, but not any more */
    CHECK_STATUS(srq->Dispatch->NdkSrqReceive(srq, NULL, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(srq->Dispatch->NdkModifySrq(srq, 0, 4, ndk_request_never, NULL), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&sn, 1, FIXTURE_QUIET_MS));
    CHECK_EQ_U64(atomic_load(&c.n), 0);
    conf_close(&qp->Header);
    conf_close(&sqp->Header);
    CHECK(harness_event_wait(&cev, 1, FIXTURE_WAIT_MS));
    CHECK(harness_event_wait(&sev, 1, FIXTURE_WAIT_MS));
    CHECK(!harness_event_wait(&cev, 2, FIXTURE_QUIET_MS) && harness_event_count(&sev) == 1);
    conf_cq_destroy(&other);
    fixture_close_wait(&pd->Header);
    ndk_close_adapter(a);
    harness_event_destroy(&cev);
    harness_event_destroy(&sev);
    harness_event_destroy(&sn);
    harness_event_destroy(&c.ev);
}

TEST(misuse_qp_and_shared_endpoint_held_by_a_refused_connector)
{
    conf_breaks_rules(
        "connector_state, post_not_connected, use_after_close: a refused connector reused");
    /* A connector holds its QP and shared endpoint from NdkConnectWithSharedEndpoint on, even
     * when the connection is refused: their closes pend until the connector closes. While they
     * pend: double close refused, the SE serves no new connection, initiator requests on the
     * never-connected QP are refused, and a receive posted to it completes, cancelled. */
    NDK_ADAPTER *a = conf_open();
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c;
    conf_cq_create(a, &c, 16);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, (void *)0x77, 4);
    NDK_SHARED_ENDPOINT *se = make_se(a);
    NDK_CONNECTOR *conn = make_connector(a);
    int rfd;
    struct sockaddr_in dst = ndk_loopback4(refusing_port(&rfd));
    struct ndk_req r;
    ndk_req_init(&r);
    NTSTATUS st = conn->Dispatch->NdkConnectWithSharedEndpoint(
        conn, qp, se, (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0, ndk_req_done, &r);
    CHECK_STATUS(ndk_req_wait(&r, st), STATUS_CONNECTION_REFUSED);
    /* a connector serves one connection */
    CHECK_STATUS(conn->Dispatch->NdkConnectWithSharedEndpoint(conn, qp, se, (struct sockaddr *)&dst,
                                                              sizeof dst, 1, 1, NULL, 0,
                                                              ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE);
    struct harness_event qev, sev;
    harness_event_init(&qev);
    harness_event_init(&sev);
    CHECK_STATUS(ndk_close_any(&se->Header, fixture_close_signal, &sev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&se->Header, fixture_close_signal, &sev),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(ndk_close_any(&qp->Header, fixture_close_signal, &qev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&qp->Header, fixture_close_signal, &qev),
                 STATUS_INVALID_DEVICE_STATE);
    /* the closing SE: still answers its address, takes no new connection */
    struct sockaddr_in got;
    ULONG len = sizeof got;
    CHECK_STATUS(se->Dispatch->NdkGetLocalAddress(se, (struct sockaddr *)&got, &len),
                 STATUS_SUCCESS);
    NDK_QP *qp2 = conf_qp(pd, c.cq, c.cq, NULL, 4);
    NDK_CONNECTOR *conn2 = make_connector(a);
    CHECK_STATUS(conn2->Dispatch->NdkConnectWithSharedEndpoint(
                     conn2, qp2, se, (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                     ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    /* the closing QP: no new connection either */
    struct sockaddr_in src = ndk_loopback4(0);
    CHECK_STATUS(conn2->Dispatch->NdkConnect(conn2, qp, (struct sockaddr *)&src, sizeof src,
                                             (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                             ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    /* posting after the QP's close began */
    const NDK_QP_DISPATCH *d = qp->Dispatch;
    CHECK_STATUS(d->NdkSend(qp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    CHECK_STATUS(d->NdkWrite(qp, NULL, NULL, 0, 0x1000, 1, 0), STATUS_CONNECTION_INVALID);
    CHECK_STATUS(d->NdkRead(qp, NULL, NULL, 0, 0x1000, 1, 0), STATUS_CONNECTION_INVALID);
    CHECK_STATUS(d->NdkSendAndInvalidate(qp, NULL, NULL, 0, 0, 1), STATUS_CONNECTION_INVALID);
    st = d->NdkReceive(qp, (void *)0x99, NULL, 0);
    CHECK_STATUS(st, STATUS_SUCCESS);
    NDK_RESULT_EX x[2];
    unsigned n = 0;
    struct collect col = {c.cq, x, 1, 0};
    if (harness_wait_until(collect_step, &col, FIXTURE_QUIET_MS))
        n = col.got;
    conf_close(&conn2->Header);
    conf_close(&qp2->Header);
    fixture_close_wait(&conn->Header);
    CHECK(harness_event_wait(&qev, 1, FIXTURE_WAIT_MS));
    CHECK(harness_event_wait(&sev, 1, FIXTURE_WAIT_MS));
    CHECK(!harness_event_wait(&qev, 2, FIXTURE_QUIET_MS) && harness_event_count(&sev) == 1);
    close(rfd);
    conf_cq_destroy(&c);
    fixture_close_wait(&pd->Header);
    ndk_close_adapter(a);
    harness_event_destroy(&qev);
    harness_event_destroy(&sev);
    harness_event_destroy(&r.ev);
    if (n == 0)
        SKIP("a receive posted to a closing, never-connected QP is accepted and never completes "
             "(docs/history/misuse-findings.md F1)");
    CHECK_STATUS(x[0].Status, STATUS_CANCELLED);
    CHECK(x[0].RequestContext == (void *)0x99 && x[0].QPContext == (void *)0x77);
}

/* ------------------------------------------------------------------------------------------ */
/* Connected QPs: posting after close, queue overflow, limits, flags, wrong objects */

TEST(misuse_posting_after_connected_qp_close_began)
{
    conf_breaks_rules("use_after_close: posts on a closing QP");
    /* The client closes its QP while the connector still holds it: the close pends and ends
     * the connection (decision 9b). Initiator requests are refused from then on, a receive
     * completes at once as cancelled, a second close is refused; the connector's close lets
     * the QP's close complete. */
    struct pair p;
    pair_open(&p, NULL, 8, 0);
    conf_post_recvs(p.cqp, 2, 0x100);
    struct harness_event qev;
    harness_event_init(&qev);
    CHECK_STATUS(ndk_close_any(&p.cqp->Header, fixture_close_signal, &qev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&p.cqp->Header, fixture_close_signal, &qev),
                 STATUS_INVALID_DEVICE_STATE);
    NDK_RESULT_EX x[4];
    collect(p.crcq.cq, x, 2); /* the close flushed the two receives */
    CHECK_STATUS(x[0].Status, STATUS_CANCELLED);
    CHECK_STATUS(x[1].Status, STATUS_CANCELLED);
    const NDK_QP_DISPATCH *d = p.cqp->Dispatch;
    const NTSTATUS CI = STATUS_CONNECTION_INVALID;
    CHECK_STATUS(d->NdkSend(p.cqp, NULL, NULL, 0, 0), CI);
    CHECK_STATUS(d->NdkSendAndInvalidate(p.cqp, NULL, NULL, 0, 0, 1), CI);
    CHECK_STATUS(d->NdkWrite(p.cqp, NULL, NULL, 0, 0x1000, 1, 0), CI);
    CHECK_STATUS(d->NdkRead(p.cqp, NULL, NULL, 0, 0x1000, 1, 0), CI);
    CHECK_STATUS(d->NdkSend(p.cqp, NULL, NULL, 0, NDK_OP_FLAG_DEFER), CI);
    CHECK_STATUS(d->NdkReceive(p.cqp, (void *)0x200, NULL, 0), STATUS_SUCCESS);
    collect(p.crcq.cq, x, 1);
    CHECK_STATUS(x[0].Status, STATUS_CANCELLED);
    CHECK(x[0].RequestContext == (void *)0x200);
    d->NdkFlush(p.cqp); /* nothing left */
    CHECK(cq_stays_empty(p.crcq.cq));
    CHECK_MSG(!harness_event_wait(&qev, 1, FIXTURE_QUIET_MS), "QP close completed, connector open");
    fixture_close_wait(&p.cconn->Header);
    CHECK(harness_event_wait(&qev, 1, FIXTURE_WAIT_MS));
    p.cconn = NULL; /* both closed: pair_close must not touch them */
    p.cqp = NULL;
    pair_close(&p);
    harness_event_destroy(&qev);
}

TEST(misuse_initiator_queue_overflow)
{
    /* Decision 9c: a full initiator queue refuses with STATUS_NO_MORE_ENTRIES (NDSPI; NDK
     * leaves it open, [POST-6]). DEFER keeps the accepted requests in the queue; the
     * refusal pushes them ([DEFER-2]) and they complete; then the slots are free again. */
    struct pair p;
    pair_open(&p, NULL, 4, 0);
    conf_post_recvs(p.sqp, 16, 0x300);
    const NDK_QP_DISPATCH *d = p.cqp->Dispatch;
    NDK_RESULT_EX x[8];
    /* Each refusal pushes the deferred chain, whose Sends then complete and free their slots:
     * one refusal per full queue, three rounds. */
    for (int round = 0; round < 3; round++) {
        for (uintptr_t k = 0; k < 4; k++)
            CHECK_STATUS(d->NdkSend(p.cqp, (void *)(0x10 + k), NULL, 0, NDK_OP_FLAG_DEFER),
                         STATUS_SUCCESS);
        NTSTATUS st = round == 0   ? d->NdkSend(p.cqp, (void *)0x14, NULL, 0, 0)
                      : round == 1 ? d->NdkWrite(p.cqp, (void *)0x14, NULL, 0, 0x1000, 1, 0)
                                   : d->NdkRead(p.cqp, (void *)0x14, NULL, 0, 0x1000, 1, 0);
        CHECK_STATUS(st, STATUS_NO_MORE_ENTRIES);
        collect(p.crcq.cq, x, 4);
        for (unsigned k = 0; k < 4; k++) {
            CHECK_STATUS(x[k].Status, STATUS_SUCCESS);
            CHECK_EQ_U64((uintptr_t)x[k].RequestContext, 0x10 + k);
        }
        collect(p.scq.cq, x, 4);
        for (unsigned k = 0; k < 4; k++)
            CHECK_STATUS(x[k].Status, STATUS_SUCCESS);
    }
    /* the refusals posted nothing; the queue takes 4 again */
    for (uintptr_t k = 0; k < 4; k++)
        CHECK_STATUS(d->NdkSend(p.cqp, (void *)(0x20 + k), NULL, 0, 0), STATUS_SUCCESS);
    collect(p.crcq.cq, x, 4);
    CHECK_EQ_U64((uintptr_t)x[3].RequestContext, 0x23);
    CHECK(cq_stays_empty(p.crcq.cq));
    pair_close(&p);
}

TEST(misuse_initiator_sge_length_and_flag_limits)
{
    /* Refused inline, nothing posted, the connection unharmed ([POST-5]): too many SGEs,
     * too many bytes, an inline payload above InlineDataSize (STATUS_DATA_OVERRUN, decision
     * 9c); a NULL SGE array with nSge > 0, a flag not valid for the request, a remote address
     * that wraps (STATUS_INVALID_PARAMETER). Zero-length SGEs are fine. */
    struct pair p;
    pair_open(&p, NULL, 8, 0);
    const NDK_QP_DISPATCH *d = p.cqp->Dispatch;
    NDK_QP *q = p.cqp;
    static char buf[256];
    NDK_SGE sge[70];
    for (unsigned k = 0; k < 70; k++)
        sge[k] = (NDK_SGE){.VirtualAddress = buf, .Length = 1, .MemoryRegionToken = 1};
    const NTSTATUS DO = STATUS_DATA_OVERRUN, IP = STATUS_INVALID_PARAMETER;
    /* the QP was created with 4 initiator SGEs; reads may use MaxReadRequestSge */
    CHECK_STATUS(d->NdkSend(q, NULL, sge, 5, 0), DO);
    CHECK_STATUS(d->NdkSendAndInvalidate(q, NULL, sge, 5, 0, 1), DO);
    CHECK_STATUS(d->NdkWrite(q, NULL, sge, 5, 0x1000, 1, 0), DO);
    CHECK(p.info.MaxReadRequestSge < 70);
    CHECK_STATUS(d->NdkRead(q, NULL, sge, p.info.MaxReadRequestSge + 1, 0x1000, 1, 0), DO);
    CHECK_STATUS(d->NdkSend(q, NULL, NULL, 1, 0), IP);
    CHECK_STATUS(d->NdkWrite(q, NULL, NULL, 1, 0x1000, 1, 0), IP);
    CHECK_STATUS(d->NdkRead(q, NULL, NULL, 1, 0x1000, 1, 0), IP);
    /* more bytes than MaxTransferLength (4 GiB - 1): never read, only counted */
    NDK_SGE huge[2] = {{.VirtualAddress = buf, .Length = 0xFFFFFFFFu, .MemoryRegionToken = 1},
                       {.VirtualAddress = buf, .Length = 0xFFFFFFFFu, .MemoryRegionToken = 1}};
    if (p.info.MaxTransferLength == 0xFFFFFFFFu) {
        CHECK_STATUS(d->NdkSend(q, NULL, huge, 2, 0), DO);
        CHECK_STATUS(d->NdkWrite(q, NULL, huge, 2, 0x1000, 1, 0), DO);
        CHECK_STATUS(d->NdkRead(q, NULL, huge, 2, 0x1000, 1, 0), DO);
    }
    /* INLINE: the SGE limit does not apply, the QP's InlineDataSize (64) does */
    CHECK_STATUS(d->NdkSend(q, NULL, sge, 65, NDK_OP_FLAG_INLINE), DO);
    CHECK_STATUS(d->NdkWrite(q, NULL, sge, 65, 0x1000, 1, NDK_OP_FLAG_INLINE), DO);
    /* an inline payload is copied at once: a NULL address with bytes is refused */
    NDK_SGE nul = {.VirtualAddress = NULL, .Length = 8, .MemoryRegionToken = 1};
    CHECK_STATUS(d->NdkSend(q, NULL, &nul, 1, NDK_OP_FLAG_INLINE), IP);
    CHECK_STATUS(d->NdkWrite(q, NULL, &nul, 1, 0x1000, 1, NDK_OP_FLAG_INLINE), IP);
    /* flags not valid for the request, or unknown */
    CHECK_STATUS(d->NdkSend(q, NULL, NULL, 0, NDK_OP_FLAG_ALLOW_REMOTE_READ), IP);
    CHECK_STATUS(d->NdkSend(q, NULL, NULL, 0, NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE), IP);
    CHECK_STATUS(d->NdkSend(q, NULL, NULL, 0, 0x80000000u), IP);
    CHECK_STATUS(d->NdkWrite(q, NULL, NULL, 0, 0x1000, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT), IP);
    CHECK_STATUS(d->NdkRead(q, NULL, NULL, 0, 0x1000, 1, NDK_OP_FLAG_INLINE), IP);
    CHECK_STATUS(d->NdkSendAndInvalidate(q, NULL, NULL, 0, NDK_OP_FLAG_RDMA_READ_SINK, 1), IP);
    /* a remote address range that wraps the 64-bit space */
    CHECK_STATUS(d->NdkWrite(q, NULL, sge, 2, UINT64_MAX, 1, 0), IP);
    CHECK_STATUS(d->NdkRead(q, NULL, sge, 2, UINT64_MAX, 1, 0), IP);
    /* nothing of it was posted */
    CHECK(cq_stays_empty(p.crcq.cq));
    /* zero-length SGEs (their address and token are not looked at) and a zero-byte inline
     * send go through */
    NDK_SGE zero = {.VirtualAddress = NULL, .Length = 0, .MemoryRegionToken = 0xDEAD};
    conf_post_recvs(p.sqp, 2, 0x400);
    CHECK_STATUS(d->NdkSend(q, (void *)0x41, &zero, 1, 0), STATUS_SUCCESS);
    CHECK_STATUS(d->NdkSend(q, (void *)0x42, NULL, 0, NDK_OP_FLAG_INLINE), STATUS_SUCCESS);
    NDK_RESULT_EX x[4];
    collect(p.crcq.cq, x, 2);
    CHECK_STATUS(x[0].Status, STATUS_SUCCESS);
    CHECK_STATUS(x[1].Status, STATUS_SUCCESS);
    collect(p.scq.cq, x, 2);
    CHECK_STATUS(x[0].Status, STATUS_SUCCESS);
    /* CQ arm with a type that does not exist: ignored (logged) */
    p.crcq.cq->Dispatch->NdkArmCq(p.crcq.cq, 3);
    conf_post_recvs(p.sqp, 1, 0x500);
    CHECK_STATUS(d->NdkSend(q, (void *)0x43, NULL, 0, 0), STATUS_SUCCESS);
    collect(p.crcq.cq, x, 1);
    CHECK(!harness_event_wait(&p.crcq.ev, 1, FIXTURE_QUIET_MS));
    pair_close(&p);
}

TEST(misuse_wrong_objects_in_initiator_requests)
{
    conf_breaks_rules("handle_invalid, use_after_close: wrong and closing objects in requests");
    /* NdkBind, NdkFastRegister and NdkInvalidate given objects of the wrong type, kind, PD or
     * adapter, or sizes out of range: refused inline, the connection unharmed. A window larger
     * than the adapter's MaxWindowSize is refused too (STATUS_INVALID_PARAMETER). */
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.Limits = "MaxWindowSize=8192";
    struct pair p;
    pair_open(&p, &o, 8, 0);
    CHECK_EQ_U64(p.info.MaxWindowSize, 8192);
    NDK_QP *q = p.cqp;
    const NDK_QP_DISPATCH *d = q->Dispatch;
    static char buf[4 * 4096] __attribute__((aligned(4096)));
    NDK_MR *mr = make_mr(p.pd, FALSE), *fmr = make_mr(p.pd, TRUE);
    NDK_MW *mw = make_mw(p.pd);
    MDL mdl;
    MmInitializeMdl(&mdl, buf, sizeof buf);
    CHECK_STATUS(mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                             ndk_request_never, NULL),
                 STATUS_SUCCESS);
    CHECK_STATUS(fmr->Dispatch->NdkInitializeFastRegisterMr(fmr, 2, TRUE, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    NDK_PD *pd2 = conf_pd(p.a);
    NDK_MW *mw2 = make_mw(pd2);
    NDK_MR *fmr2 = make_mr(pd2, TRUE);
    const ULONG RR = NDK_OP_FLAG_ALLOW_REMOTE_READ;
    const NTSTATUS IP = STATUS_INVALID_PARAMETER;
    /* NdkBind */
    CHECK_STATUS(d->NdkBind(q, NULL, AS(NDK_MR, mw), mw, buf, 64, RR), IP);
    CHECK_STATUS(d->NdkBind(q, NULL, mr, AS(NDK_MW, mr), buf, 64, RR), IP);
    CHECK_STATUS(d->NdkBind(q, NULL, NULL, mw, buf, 64, RR), IP);
    CHECK_STATUS(d->NdkBind(q, NULL, mr, NULL, buf, 64, RR), IP);
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw2, buf, 64, RR), IP); /* window of another PD */
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw, buf, 0, RR), IP);   /* zero length */
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw, buf, 64, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), IP);
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw, buf, 64, NDK_OP_FLAG_INLINE), IP);
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw, buf, 3 * 4096, RR), IP); /* > MaxWindowSize */
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw, buf + 3 * 4096, 8192, RR),
                 STATUS_ACCESS_VIOLATION); /* beyond the MR (decision 7b) */
    CHECK_STATUS(d->NdkBind(q, NULL, fmr, mw, buf, 64, RR), STATUS_ACCESS_VIOLATION); /* no range */
    /* NdkFastRegister */
    NDK_LOGICAL_ADDRESS pages[3];
    for (int k = 0; k < 3; k++)
        pages[k].QuadPart = (int64_t)(uintptr_t)(buf + k * 4096);
    const ULONG LW = NDK_OP_FLAG_ALLOW_LOCAL_WRITE;
    CHECK_STATUS(d->NdkFastRegister(q, NULL, AS(NDK_MR, mw), 1, pages, 0, 64, buf, LW), IP);
    CHECK_STATUS(d->NdkFastRegister(q, NULL, NULL, 1, pages, 0, 64, buf, LW), IP);
    CHECK_STATUS(d->NdkFastRegister(q, NULL, mr, 1, pages, 0, 64, buf, LW), IP);   /* not FR kind */
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr2, 1, pages, 0, 64, buf, LW), IP); /* other PD */
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 1, NULL, 0, 64, buf, LW), IP);
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 0, pages, 0, 64, buf, LW), IP);
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 1, pages, 0, 0, buf, LW), IP); /* length 0 */
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 1, pages, 0, 4097, buf, LW), IP);
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 3, pages, 0, 64, buf, LW), IP);    /* > 2 pages */
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 1, pages, 4096, 64, buf, LW), IP); /* FBO */
    CHECK_STATUS(d->NdkFastRegister(q, NULL, fmr, 1, pages, 0, 64, buf, NDK_OP_FLAG_INLINE), IP);
    /* NdkInvalidate */
    CHECK_STATUS(d->NdkInvalidate(q, NULL, &p.pd->Header, 0), IP);
    CHECK_STATUS(d->NdkInvalidate(q, NULL, &p.crcq.cq->Header, 0), IP);
    CHECK_STATUS(d->NdkInvalidate(q, NULL, NULL, 0), IP);
    CHECK_STATUS(d->NdkInvalidate(q, NULL, &mr->Header, 0), IP); /* an NdkRegisterMr region */
    CHECK_STATUS(d->NdkInvalidate(q, NULL, &mw2->Header, 0), IP);
    CHECK_STATUS(d->NdkInvalidate(q, NULL, &fmr2->Header, 0), IP);
    CHECK_STATUS(d->NdkInvalidate(q, NULL, &mw->Header, RR), IP);
    /* none of it was posted; the queue still works */
    CHECK(cq_stays_empty(p.crcq.cq));
    CHECK_STATUS(d->NdkBind(q, (void *)0x61, mr, mw, buf, 8192, RR), STATUS_SUCCESS);
    CHECK_STATUS(d->NdkInvalidate(q, (void *)0x62, &mw->Header, 0), STATUS_SUCCESS);
    NDK_RESULT_EX x[2];
    collect(p.crcq.cq, x, 2);
    CHECK_STATUS(x[0].Status, STATUS_SUCCESS);
    CHECK_EQ_U64(x[0].Type, NdkOperationTypeBind);
    CHECK_STATUS(x[1].Status, STATUS_SUCCESS);
    /* An MR whose close pends because a window is bound to it (decision 7b): a second close,
     * a deregistration, a registration and a new bind are refused; its token still reads. */
    CHECK_STATUS(d->NdkBind(q, (void *)0x63, mr, mw, buf, 8192, RR), STATUS_SUCCESS);
    collect(p.crcq.cq, x, 1);
    CHECK_STATUS(x[0].Status, STATUS_SUCCESS);
    struct harness_event mev;
    harness_event_init(&mev);
    CHECK_STATUS(ndk_close_any(&mr->Header, fixture_close_signal, &mev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&mr->Header, fixture_close_signal, &mev),
                 STATUS_INVALID_DEVICE_STATE);
    const NTSTATUS DS = STATUS_INVALID_DEVICE_STATE;
    CHECK_STATUS(mr->Dispatch->NdkDeregisterMr(mr, ndk_request_never, NULL), DS);
    CHECK_STATUS(mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, 0, ndk_request_never, NULL), DS);
    NDK_MW *mw3 = make_mw(p.pd);
    CHECK_STATUS(d->NdkBind(q, NULL, mr, mw3, buf, 64, RR), DS);
    CHECK(mr->Dispatch->NdkGetLocalTokenFromMr(mr) != 0);
    CHECK(cq_stays_empty(p.crcq.cq));
    conf_close(&mw3->Header);
    conf_close(&mw->Header); /* unbinds: the MR's close completes */
    CHECK(harness_event_wait(&mev, 1, FIXTURE_WAIT_MS));
    conf_close(&fmr2->Header);
    conf_close(&mw2->Header);
    conf_close(&pd2->Header);
    conf_close(&fmr->Header);
    pair_close(&p);
    harness_event_destroy(&mev);
}

TEST(misuse_connector_calls_out_of_order)
{
    conf_breaks_rules(
        "connector_state, handle_invalid, use_after_close: connector calls out of order");
    /* The handshake calls in the wrong order or twice, and a listener closed with a connector
     * it delivered still open: each refused with a status, the connection unharmed. */
    struct pair p;
    pair_begin(&p, NULL, 8, 0);
    const NDK_CONNECTOR_DISPATCH *cd = p.cconn->Dispatch;
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(9);
    /* before the peer accepted */
    CHECK_STATUS(cd->NdkCompleteConnect(p.cconn, NULL, NULL, ndk_request_never, NULL),
                 STATUS_CONNECTION_INVALID);
    CHECK_STATUS(cd->NdkAccept(p.cconn, p.cqp, 1, 1, NULL, 0, NULL, NULL, ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE); /* accept on the active side */
    CHECK_STATUS(cd->NdkConnect(p.cconn, p.cqp, (struct sockaddr *)&src, sizeof src,
                                (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE); /* a second connect */
    /* the passive side: connect on an incoming connector, accept with unusable QPs */
    NDK_QP *spare = conf_qp(p.pd, p.scq.cq, p.scq.cq, NULL, 2);
    CHECK_STATUS(p.sconn->Dispatch->NdkConnect(p.sconn, spare, (struct sockaddr *)&src, sizeof src,
                                               (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                               ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(p.sconn->Dispatch->NdkAccept(p.sconn, AS(NDK_QP, p.scq.cq), 1, 1, NULL, 0, NULL,
                                              NULL, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(p.sconn->Dispatch->NdkAccept(p.sconn, p.cqp, 1, 1, NULL, 0, NULL, NULL,
                                              ndk_request_never, NULL),
                 STATUS_CONNECTION_ACTIVE); /* the client's QP, bound to the other connector */
    CHECK_STATUS(
        p.sconn->Dispatch->NdkCompleteConnect(p.sconn, NULL, NULL, ndk_request_never, NULL),
        STATUS_CONNECTION_INVALID);
    /* private data above MaxCalleeData */
    static char big[1024];
    CHECK(p.info.MaxCalleeData < sizeof big);
    CHECK_STATUS(p.sconn->Dispatch->NdkAccept(p.sconn, p.sqp, 1, 1, big, p.info.MaxCalleeData + 1,
                                              NULL, NULL, ndk_request_never, NULL),
                 STATUS_INVALID_BUFFER_SIZE);
    CHECK_STATUS(p.sconn->Dispatch->NdkReject(p.sconn, big, p.info.MaxCalleeData + 1),
                 STATUS_INVALID_BUFFER_SIZE);
    /* the listener closes first: pends while the connector it delivered is open */
    struct harness_event lev;
    harness_event_init(&lev);
    CHECK_STATUS(ndk_close_any(&p.l->Header, fixture_close_signal, &lev), STATUS_PENDING);
    CHECK_STATUS(ndk_close_any(&p.l->Header, fixture_close_signal, &lev),
                 STATUS_INVALID_DEVICE_STATE);
    p.listener_closed = true;
    struct sockaddr_in any = ndk_loopback4(0);
    CHECK_STATUS(
        p.l->Dispatch->NdkListen(p.l, (struct sockaddr *)&any, sizeof any, ndk_request_never, NULL),
        STATUS_INVALID_DEVICE_STATE);
    ULONG len = sizeof any;
    CHECK_STATUS(p.l->Dispatch->NdkGetLocalAddress(p.l, (struct sockaddr *)&any, &len),
                 STATUS_SUCCESS);
    p.l->Dispatch->NdkControlConnectEvents(p.l, FALSE);
    /* none of it disturbed the handshake in progress */
    pair_finish(&p);
    /* twice */
    CHECK_STATUS(cd->NdkCompleteConnect(p.cconn, NULL, NULL, ndk_request_never, NULL),
                 STATUS_CONNECTION_INVALID);
    CHECK_STATUS(p.sconn->Dispatch->NdkAccept(p.sconn, spare, 1, 1, NULL, 0, NULL, NULL,
                                              ndk_request_never, NULL),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(p.sconn->Dispatch->NdkReject(p.sconn, NULL, 0), STATUS_INVALID_DEVICE_STATE);
    /* a QP that serves a connection cannot serve another */
    NDK_CONNECTOR *c2 = make_connector(p.a);
    CHECK_STATUS(c2->Dispatch->NdkConnect(c2, p.sqp, (struct sockaddr *)&src, sizeof src,
                                          (struct sockaddr *)&dst, sizeof dst, 1, 1, NULL, 0,
                                          ndk_request_never, NULL),
                 STATUS_CONNECTION_ACTIVE);
    conf_close(&c2->Header);
    /* NdkDisconnect twice: the second one while the first is pending */
    struct ndk_req rd, rd2;
    ndk_req_init(&rd);
    ndk_req_init(&rd2);
    NTSTATUS st = cd->NdkDisconnect(p.cconn, ndk_req_done, &rd);
    if (st == STATUS_PENDING)
        CHECK_STATUS(cd->NdkDisconnect(p.cconn, ndk_request_never, NULL),
                     STATUS_CONNECTION_INVALID);
    NTSTATUS st2 = p.sconn->Dispatch->NdkDisconnect(p.sconn, ndk_req_done, &rd2);
    CHECK_STATUS(ndk_req_wait(&rd, st), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&rd2, st2), STATUS_SUCCESS);
    /* after the connection ended: success, nothing left to do */
    CHECK_STATUS(cd->NdkDisconnect(p.cconn, ndk_request_never, NULL), STATUS_SUCCESS);
    conf_close(&spare->Header);
    pair_close(&p);
    CHECK(harness_event_wait(&lev, 1, FIXTURE_WAIT_MS));
    harness_event_destroy(&lev);
    harness_event_destroy(&rd.ev);
    harness_event_destroy(&rd2.ev);
}

/* ------------------------------------------------------------------------------------------ */
/* CQ overrun by a consumer that does not poll */

TEST(misuse_initiator_cq_overrun_by_not_polling)
{
    /* Send completions into an initiator CQ of depth 2 that nobody polls: the third kills it
     * (decision 9g): it returns nothing from then on, an ERRORS arm reports
     * STATUS_BUFFER_OVERFLOW, and the QP feeding it aborts ([CQ-12]): its peer's
     * receives complete, the ones the Sends reached first successfully, and the QP refuses
     * initiator requests. (The receive-CQ variant fed by flushes: conformance/cq
     * cq_overrun_kills_cq.) */
    struct pair p;
    pair_open(&p, NULL, 8, 2);
    conf_post_recvs(p.sqp, 4, 0x600);
    for (uintptr_t k = 0; k < 4; k++) {
        /* the overrun's abort runs on a progress thread: the fourth may find it done */
        NTSTATUS st = p.cqp->Dispatch->NdkSend(p.cqp, (void *)k, NULL, 0, 0);
        CHECK_MSG(st == STATUS_SUCCESS || (k == 3 && st == STATUS_CONNECTION_INVALID),
                  "Send %u: %s", (unsigned)k, SoftNdkStatusName(st));
    }
    conf_cq_arm(&p.cicq, NDK_CQ_NOTIFY_ERRORS);
    CHECK(conf_cq_wait(&p.cicq, 1));
    CHECK_STATUS(conf_cq_status(&p.cicq, 0), STATUS_BUFFER_OVERFLOW);
    NDK_RESULT_EX x[4];
    CHECK_EQ_U64(p.cicq.cq->Dispatch->NdkGetCqResultsEx(p.cicq.cq, x, 4), 0);
    CHECK_EQ_U64(p.cicq.cq->Dispatch->NdkGetCqResults(p.cicq.cq, (NDK_RESULT *)(void *)x, 1), 0);
    collect(p.scq.cq, x, 4);
    unsigned ok = 0;
    for (unsigned k = 0; k < 4; k++) {
        CHECK_MSG(x[k].Status == STATUS_SUCCESS || x[k].Status == STATUS_CANCELLED,
                  "receive %u: %s", k, SoftNdkStatusName(x[k].Status));
        ok += x[k].Status == STATUS_SUCCESS;
    }
    CHECK_MSG(ok >= 3, "%u receives succeeded; the first three Sends left before the overrun", ok);
    CHECK_STATUS(p.cqp->Dispatch->NdkSend(p.cqp, NULL, NULL, 0, 0), STATUS_CONNECTION_INVALID);
    pair_close(&p);
}

TEST(misuse_qp_closed_during_handshake_does_not_connect)
{
    conf_breaks_rules("post_not_connected, use_after_close: a QP closed during its handshake");
    /* The consumer closes its QP between NdkConnect's completion and NdkCompleteConnect. The
     * close pends (the connector holds the QP) and, as every close does ([CLOSE-4]), cancels
     * what is pending on it: NdkCompleteConnect completes with STATUS_CANCELLED instead of
     * bringing the closing QP up, and the QP refuses Sends. */
    struct pair p;
    pair_begin(&p, NULL, 8, 0);
    conf_post_recvs(p.sqp, 1, 0x700);
    struct ndk_req ra, rcc;
    ndk_req_init(&ra);
    ndk_req_init(&rcc);
    CHECK_STATUS(
        p.sconn->Dispatch->NdkAccept(p.sconn, p.sqp, 4, 4, NULL, 0, NULL, NULL, ndk_req_done, &ra),
        STATUS_PENDING);
    CHECK_STATUS(ndk_req_wait(&p.rc, STATUS_PENDING), STATUS_SUCCESS);
    struct harness_event qev;
    harness_event_init(&qev);
    CHECK_STATUS(ndk_close_any(&p.cqp->Header, fixture_close_signal, &qev), STATUS_PENDING);
    NTSTATUS st = p.cconn->Dispatch->NdkCompleteConnect(p.cconn, NULL, NULL, ndk_req_done, &rcc);
    NTSTATUS done = ndk_req_wait(&rcc, st);
    NTSTATUS send = p.cqp->Dispatch->NdkSend(p.cqp, NULL, NULL, 0, 0);
    (void)ndk_req_wait(&ra, STATUS_PENDING); /* the passive side learns it as it may */
    fixture_close_wait(&p.cconn->Header);
    CHECK(harness_event_wait(&qev, 1, FIXTURE_WAIT_MS));
    p.cconn = NULL;
    p.cqp = NULL;
    pair_close(&p);
    harness_event_destroy(&qev);
    harness_event_destroy(&ra.ev);
    harness_event_destroy(&rcc.ev);
    if (send == STATUS_SUCCESS)
        SKIP("a QP closed during the handshake is connected by NdkCompleteConnect and accepts "
             "Sends (docs/history/misuse-findings.md F2)");
    CHECK_STATUS(send, STATUS_CONNECTION_INVALID);
    CHECK_STATUS(done, STATUS_CANCELLED);
}

/* ------------------------------------------------------------------------------------------ */
/* SoftNdkCloseAdapter misused */

struct cb_close {
    NDK_ADAPTER *a;
    struct harness_event ev;
};

static void close_adapter_from_callback(void *ctx, NTSTATUS st)
{
    (void)st;
    struct cb_close *c = ctx;
    SoftNdkCloseAdapter(c->a); /* refused: it would wait for this very callback */
    harness_event_signal(&c->ev);
}

struct second_close {
    NDK_ADAPTER *a;
    struct harness_event returned;
};

static void *first_close_thread(void *arg)
{
    struct second_close *s = arg;
    SoftNdkCloseAdapter(s->a);
    harness_event_signal(&s->returned);
    return NULL;
}

static bool adapter_refuses_creates(void *arg)
{
    NDK_ADAPTER *a = arg;
    NDK_PD *pd = NULL;
    NTSTATUS st = a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pd);
    if (st == STATUS_SUCCESS)
        conf_close(&pd->Header);
    return st == STATUS_INVALID_DEVICE_STATE;
}

TEST(misuse_adapter_close_from_callback_and_twice)
{
    conf_breaks_rules("callback_call, use_after_close: adapter close from a callback and twice");
    /* From inside a callback: logged and refused (it would wait for itself), the adapter
     * keeps working. Twice: the second call, made while the first waits for an open object,
     * is logged and returns at once; while the first waits every create is refused with
     * STATUS_INVALID_DEVICE_STATE and the open objects work. A call after the first returned
     * is a use after free (docs/misuse.md). */
    struct cb_close cc;
    cc.a = conf_open();
    harness_event_init(&cc.ev);
    NDK_CQ *cq = NULL;
    CHECK_STATUS(cc.a->Dispatch->NdkCreateCq(cc.a, 8, close_adapter_from_callback, &cc, NULL,
                                             ndk_create_never, NULL, &cq),
                 STATUS_SUCCESS);
    NDK_PD *pd = conf_pd(cc.a);
    NDK_QP *qp = conf_qp(pd, cq, cq, NULL, 2);
    cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
    conf_post_recvs(qp, 1, 1);
    conf_flush(qp);
    CHECK(harness_event_wait(&cc.ev, 1, FIXTURE_WAIT_MS));
    NDK_RESULT r;
    CHECK_EQ_U64(cq->Dispatch->NdkGetCqResults(cq, &r, 1), 1);
    conf_close(&qp->Header);
    NDK_MR *mr = make_mr(pd, FALSE); /* still open for business */
    conf_close(&mr->Header);
    conf_close(&pd->Header);

    struct second_close sc = {.a = cc.a};
    harness_event_init(&sc.returned);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, first_close_thread, &sc) == 0);
    CHECK(harness_wait_until(adapter_refuses_creates, sc.a, FIXTURE_WAIT_MS));
    SoftNdkCloseAdapter(sc.a); /* returns at once */
    const NDK_ADAPTER_DISPATCH *ad = sc.a->Dispatch;
    void *out = (void *)0x1;
    struct sockaddr_in sin = ndk_loopback4(0);
    const NTSTATUS DS = STATUS_INVALID_DEVICE_STATE;
    CHECK_STATUS(ad->NdkCreateCq(sc.a, 4, conf_cq_notify, NULL, NULL, ndk_create_never, NULL,
                                 (NDK_CQ **)&out),
                 DS);
    CHECK_STATUS(ad->NdkCreateConnector(sc.a, ndk_create_never, NULL, (NDK_CONNECTOR **)&out), DS);
    CHECK_STATUS(ad->NdkCreateListener(sc.a, conf_connect_never, NULL, ndk_create_never, NULL,
                                       (NDK_LISTENER **)&out),
                 DS);
    CHECK_STATUS(ad->NdkCreateSharedEndpoint(sc.a, (struct sockaddr *)&sin, sizeof sin,
                                             ndk_create_never, NULL, (NDK_SHARED_ENDPOINT **)&out),
                 DS);
    CHECK(out == (void *)0x1);
    CHECK_EQ_U64(cq->Dispatch->NdkGetCqResults(cq, &r, 1), 0); /* the open CQ still answers */
    CHECK_MSG(!harness_event_wait(&sc.returned, 1, FIXTURE_QUIET_MS), "returned with a CQ open");
    conf_close(&cq->Header);
    CHECK_MSG(harness_event_wait(&sc.returned, 1, FIXTURE_WAIT_MS), "did not return");
    pthread_join(t, NULL);
    harness_event_destroy(&sc.returned);
    harness_event_destroy(&cc.ev);
}
