#include "fcommon.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void fx_status_name(NTSTATUS s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", SoftNdkStatusName(s));
}

void fx_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

uint64_t fx_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void fx_fill(uint8_t *p, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 0x9e3779b9u;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)(x | 1); /* never 0: an untouched (zeroed) byte is told apart */
    }
}

/* ------------------------------------------------------------------------------------------ */
/* stderr capture (the log) */

void fx_capture_begin(struct fx_capture *c)
{
    fflush(stderr);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    c->f = f;
    c->saved = dup(2);
    CHECK(c->saved >= 0);
    CHECK(dup2(fileno(f), 2) == 2);
}

char *fx_capture_end(struct fx_capture *c)
{
    FILE *f = c->f;
    fflush(stderr);
    CHECK(dup2(c->saved, 2) == 2);
    close(c->saved);
    long n = lseek(fileno(f), 0, SEEK_END);
    if (n < 0)
        n = 0;
    char *buf = calloc(1, (size_t)n + 1);
    CHECK(buf != NULL);
    size_t got = (size_t)pread(fileno(f), buf, (size_t)n, 0);
    buf[got < (size_t)n ? got : (size_t)n] = '\0';
    fclose(f);
    fputs(buf, stderr);
    return buf;
}

unsigned fx_count_lines(const char *text, ...)
{
    unsigned n = 0;
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char *copy = strndup(line, len);
        CHECK(copy != NULL);
        bool all = true;
        va_list ap;
        va_start(ap, text);
        for (const char *w; (w = va_arg(ap, const char *)) != NULL;)
            all = all && strstr(copy, w) != NULL;
        va_end(ap);
        n += all;
        free(copy);
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* adapters */

void fx_options(SOFTNDK_OPTIONS *o, const char *faults)
{
    SoftNdkInitOptions(o);
    /* a port range of this process (suites run in parallel on one machine): 32 ports out of
     * 42000-49999, apart from the conformance suite's 50000-57999. Wider than the conformance
     * suite's 8: a port-0 NdkConnect that draws a port whose 4-tuple the kernel still holds
     * fails with STATUS_ADDRESS_ALREADY_EXISTS (docs/connector.md), and the matrix connects
     * often. */
    unsigned slot = (unsigned)getpid() % 250u;
    o->EphemeralPortLow = (USHORT)(42000u + slot * 32u);
    o->EphemeralPortHigh = (USHORT)(42000u + slot * 32u + 31u);
    o->Crc = SoftNdkCrcOn;
    o->Faults = faults;
}

NTSTATUS fx_try_open(const SOFTNDK_OPTIONS *o, NDK_ADAPTER **out)
{
    unsigned lo = if_nametoindex("lo");
    CHECK_MSG(lo != 0, "no loopback interface");
    NDK_VERSION v = {2, 0};
    *out = NULL;
    return SoftNdkOpenAdapter(lo, v, o, out);
}

NDK_ADAPTER *fx_open_with(const SOFTNDK_OPTIONS *o)
{
    NDK_ADAPTER *a = NULL;
    NTSTATUS st = fx_try_open(o, &a);
    CHECK_MSG(st == STATUS_SUCCESS, "SoftNdkOpenAdapter(Faults \"%s\") = %s",
              o->Faults ? o->Faults : "(null)", SoftNdkStatusName(st));
    CHECK(a != NULL);
    return a;
}

NDK_ADAPTER *fx_open(const char *faults)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, faults);
    return fx_open_with(&o);
}

void fx_counters(NDK_ADAPTER *a, SOFTNDK_COUNTERS *c)
{
    memset(c, 0, sizeof *c);
    c->Size = sizeof *c;
    CHECK_STATUS(SoftNdkQueryCounters(a, c), STATUS_SUCCESS);
    CHECK_EQ_U64(c->Size, sizeof *c);
}

uint64_t fx_injected(NDK_ADAPTER *a)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    return c.InjectedFaults;
}

struct ctr_arg {
    NDK_ADAPTER *a;
    size_t field;
    uint64_t want, got;
};

static bool ctr_reached(void *p)
{
    struct ctr_arg *c = p;
    SOFTNDK_COUNTERS k;
    memset(&k, 0, sizeof k);
    k.Size = sizeof k;
    if (SoftNdkQueryCounters(c->a, &k) != STATUS_SUCCESS)
        return false;
    memcpy(&c->got, (const char *)&k + c->field, sizeof c->got);
    return c->got >= c->want;
}

uint64_t fx_wait_counter(NDK_ADAPTER *a, size_t field, uint64_t want)
{
    struct ctr_arg c = {a, field, want, 0};
    harness_wait_until(ctr_reached, &c, FX_WAIT_MS);
    return c.got;
}

uint64_t fx_term_count(const SOFTNDK_TERM_COUNT *slots, ULONG code)
{
    for (unsigned i = 0; i < SOFTNDK_COUNTERS_TERM_SLOTS; i++)
        if (slots[i].Count && slots[i].Code == code)
            return slots[i].Count;
    return 0;
}

unsigned fx_term_slots(const SOFTNDK_TERM_COUNT *slots)
{
    unsigned n = 0;
    for (unsigned i = 0; i < SOFTNDK_COUNTERS_TERM_SLOTS; i++)
        n += slots[i].Count != 0;
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* objects */

static void close_signal(void *ctx)
{
    harness_event_signal(ctx);
}

void fx_close_wait(NDK_OBJECT_HEADER *h)
{
    struct harness_event ev;
    harness_event_init(&ev);
    NTSTATUS st = ndk_close_any(h, close_signal, &ev);
    if (st == STATUS_PENDING)
        CHECK_MSG(harness_event_wait(&ev, 1, FX_WAIT_MS), "close completion of a %d never came",
                  (int)h->ObjectType);
    else
        CHECK_STATUS(st, STATUS_SUCCESS);
    harness_event_destroy(&ev);
}

/* ------------------------------------------------------------------------------------------ */
/* listener */

static void on_connect_event(void *ctx, NDK_CONNECTOR *c)
{
    struct fx_server *s = ctx;
    unsigned i = atomic_fetch_add(&s->n, 1);
    if (i < FX_MAX_INCOMING)
        s->incoming[i] = c;
    harness_event_signal(&s->ev);
}

void fx_listen(struct fx_server *s, NDK_ADAPTER *a)
{
    memset(s, 0, sizeof *s);
    s->a = a;
    harness_event_init(&s->ev);
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, on_connect_event, s, ndk_create_never, NULL, &s->l),
        STATUS_SUCCESS);
    struct sockaddr_in sa = ndk_loopback4(0);
    CHECK_STATUS(
        s->l->Dispatch->NdkListen(s->l, (struct sockaddr *)&sa, sizeof sa, ndk_request_never, NULL),
        STATUS_SUCCESS);
    struct sockaddr_in got;
    ULONG glen = sizeof got;
    CHECK_STATUS(s->l->Dispatch->NdkGetLocalAddress(s->l, (struct sockaddr *)&got, &glen),
                 STATUS_SUCCESS);
    s->port = ntohs(got.sin_port);
    CHECK(s->port != 0);
}

void fx_server_close(struct fx_server *s)
{
    fx_close_wait(&s->l->Header);
    harness_event_destroy(&s->ev);
}

/* ------------------------------------------------------------------------------------------ */
/* sides */

static void on_cq(void *ctx, NTSTATUS st)
{
    struct fx_side *s = ctx;
    unsigned i = atomic_load(&s->cq_n);
    if (i < FX_MAX_NOTIFY)
        s->cq_status[i] = st;
    atomic_fetch_add(&s->cq_n, 1);
    harness_event_signal(&s->cq_ev);
}

static void on_disconnect(void *ctx, ULONG reason)
{
    struct fx_side *s = ctx;
    atomic_store(&s->disc_reason, reason);
    atomic_fetch_add(&s->disc_n, 1);
    harness_event_signal(&s->disc_ev);
}

void fx_side_init(struct fx_side *s, NDK_ADAPTER *a, size_t buflen, ULONG rq, ULONG sq)
{
    memset(s, 0, sizeof *s);
    s->a = a;
    harness_event_init(&s->disc_ev);
    harness_event_init(&s->cq_ev);
    CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &s->pd), STATUS_SUCCESS);
    CHECK_STATUS(a->Dispatch->NdkCreateCq(a, 4096, on_cq, s, NULL, ndk_create_never, NULL, &s->cq),
                 STATUS_SUCCESS);
    CHECK_STATUS(s->pd->Dispatch->NdkCreateQp(s->pd, s->cq, s->cq, s, rq, sq, 4, 4, 0,
                                              ndk_create_never, NULL, &s->qp),
                 STATUS_SUCCESS);
    s->len = buflen;
    s->buf = aligned_alloc(4096, (buflen + 4095) & ~(size_t)4095);
    CHECK(s->buf != NULL);
    memset(s->buf, 0, buflen);
    CHECK_STATUS(s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, ndk_create_never, NULL, &s->mr),
                 STATUS_SUCCESS);
    MDL mdl;
    MmInitializeMdl(&mdl, s->buf, buflen);
    CHECK_STATUS(s->mr->Dispatch->NdkRegisterMr(s->mr, &mdl, buflen,
                                                NDK_MR_FLAG_ALLOW_LOCAL_WRITE |
                                                    NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                                ndk_request_never, NULL),
                 STATUS_SUCCESS);
    s->ltoken = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr);
    s->rtoken = s->mr->Dispatch->NdkGetRemoteTokenFromMr(s->mr);
}

void fx_side_close(struct fx_side *s)
{
    if (s->conn)
        fx_close_wait(&s->conn->Header);
    s->conn = NULL;
    fx_close_wait(&s->qp->Header);
    fx_close_wait(&s->mr->Header);
    fx_close_wait(&s->cq->Header);
    fx_close_wait(&s->pd->Header);
    free(s->buf);
    s->buf = NULL;
    harness_event_destroy(&s->disc_ev);
    harness_event_destroy(&s->cq_ev);
}

void fx_establish(struct fx_side *cl, struct fx_side *sv, struct fx_server *srv)
{
    CHECK_STATUS(cl->a->Dispatch->NdkCreateConnector(cl->a, ndk_create_never, NULL, &cl->conn),
                 STATUS_SUCCESS);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(srv->port);
    struct ndk_req rc, ra, rcc;
    ndk_req_init(&rc);
    unsigned before = atomic_load(&srv->n);
    CHECK_STATUS(cl->conn->Dispatch->NdkConnect(cl->conn, cl->qp, (struct sockaddr *)&src,
                                                sizeof src, (struct sockaddr *)&dst, sizeof dst, 4,
                                                4, NULL, 0, ndk_req_done, &rc),
                 STATUS_PENDING);
    CHECK_MSG(harness_event_wait(&srv->ev, before + 1, FX_WAIT_MS), "no connect event");
    CHECK(before < FX_MAX_INCOMING);
    sv->conn = srv->incoming[before];
    ndk_req_init(&ra);
    CHECK_STATUS(sv->conn->Dispatch->NdkAcceptEx(sv->conn, sv->qp, 4, 4, NULL, 0, on_disconnect, sv,
                                                 ndk_req_done, &ra),
                 STATUS_PENDING);
    CHECK_STATUS(ndk_req_wait(&rc, STATUS_PENDING), STATUS_SUCCESS);
    ndk_req_init(&rcc);
    NTSTATUS st =
        cl->conn->Dispatch->NdkCompleteConnectEx(cl->conn, on_disconnect, cl, ndk_req_done, &rcc);
    CHECK_STATUS(ndk_req_wait(&rcc, st), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&ra, STATUS_PENDING), STATUS_SUCCESS);
    harness_event_destroy(&rc.ev);
    harness_event_destroy(&ra.ev);
    harness_event_destroy(&rcc.ev);
}

void fx_connect_refused(struct fx_side *cl, struct fx_server *srv, NTSTATUS expect)
{
    CHECK_STATUS(cl->a->Dispatch->NdkCreateConnector(cl->a, ndk_create_never, NULL, &cl->conn),
                 STATUS_SUCCESS);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(srv->port);
    struct ndk_req rc;
    ndk_req_init(&rc);
    unsigned before = atomic_load(&srv->n);
    NTSTATUS st = cl->conn->Dispatch->NdkConnect(cl->conn, cl->qp, (struct sockaddr *)&src,
                                                 sizeof src, (struct sockaddr *)&dst, sizeof dst, 4,
                                                 4, NULL, 0, ndk_req_done, &rc);
    CHECK_STATUS(st, STATUS_PENDING);
    CHECK_STATUS(ndk_req_wait(&rc, st), expect);
    CHECK_MSG(atomic_load(&srv->n) == before, "the listener's consumer saw the refused request");
    harness_event_destroy(&rc.ev);
}

NDK_SGE fx_sge(struct fx_side *s, size_t off, size_t len)
{
    CHECK(off + len <= s->len);
    NDK_SGE g;
    memset(&g, 0, sizeof g);
    g.VirtualAddress = s->buf + off;
    g.Length = (ULONG)len;
    g.MemoryRegionToken = s->ltoken;
    return g;
}

void fx_post_recv(struct fx_side *s, uintptr_t ctx, size_t off, size_t len)
{
    NDK_SGE g = fx_sge(s, off, len);
    CHECK_STATUS(s->qp->Dispatch->NdkReceive(s->qp, (void *)ctx, &g, 1), STATUS_SUCCESS);
}

NTSTATUS fx_try_send(struct fx_side *s, uintptr_t ctx, size_t off, size_t len, ULONG flags)
{
    NDK_SGE g = fx_sge(s, off, len);
    return s->qp->Dispatch->NdkSend(s->qp, (void *)ctx, &g, 1, flags);
}

void fx_post_send(struct fx_side *s, uintptr_t ctx, size_t off, size_t len, ULONG flags)
{
    CHECK_STATUS(fx_try_send(s, ctx, off, len, flags), STATUS_SUCCESS);
}

NTSTATUS fx_try_write(struct fx_side *s, uintptr_t ctx, size_t off, size_t len,
                      struct fx_side *peer, size_t peer_off, ULONG flags)
{
    NDK_SGE g = fx_sge(s, off, len);
    CHECK(peer_off + len <= peer->len);
    return s->qp->Dispatch->NdkWrite(
        s->qp, (void *)ctx, &g, 1, (UINT64)(uintptr_t)(peer->buf + peer_off), peer->rtoken, flags);
}

void fx_post_write(struct fx_side *s, uintptr_t ctx, size_t off, size_t len, struct fx_side *peer,
                   size_t peer_off, ULONG flags)
{
    CHECK_STATUS(fx_try_write(s, ctx, off, len, peer, peer_off, flags), STATUS_SUCCESS);
}

unsigned fx_collect(struct fx_side *s, unsigned n, unsigned timeout_ms)
{
    uint64_t end = fx_now_us() + (uint64_t)timeout_ms * 1000u;
    for (;;) {
        NDK_RESULT_EX r[32];
        ULONG got = s->cq->Dispatch->NdkGetCqResultsEx(s->cq, r, 32);
        uint64_t now = fx_now_us();
        for (ULONG i = 0; i < got; i++) {
            CHECK_MSG(s->nres < FX_MAX_RESULTS, "more than %u completions", FX_MAX_RESULTS);
            CHECK_MSG(r[i].QPContext == s, "a completion of another QP");
            s->res[s->nres++] = (struct fx_result){
                r[i].Type, r[i].Status, (uintptr_t)r[i].RequestContext, r[i].BytesTransferred, now};
        }
        if (s->nres >= n || now >= end)
            return s->nres;
        if (!got) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

void fx_expect(struct fx_side *s, unsigned n)
{
    unsigned got = fx_collect(s, n, FX_WAIT_MS);
    CHECK_MSG(got >= n, "only %u of %u completions came", got, n);
    got = fx_collect(s, n + 1, FX_QUIET_MS);
    CHECK_MSG(got == n, "%u completions came, %u expected", got, n);
}

static bool is_receive(NDK_OPERATION_TYPE t)
{
    return t == NdkOperationTypeReceive || t == NdkOperationTypeReceiveAndInvalidate;
}

const struct fx_result *fx_nth(const struct fx_side *s, bool receives, unsigned i)
{
    for (unsigned k = 0; k < s->nres; k++)
        if (is_receive(s->res[k].type) == receives && i-- == 0)
            return &s->res[k];
    return NULL;
}

unsigned fx_count(const struct fx_side *s, bool receives)
{
    unsigned n = 0;
    for (unsigned k = 0; k < s->nres; k++)
        n += is_receive(s->res[k].type) == receives;
    return n;
}

void fx_expect_disconnect(struct fx_side *s, ULONG reason)
{
    CHECK_MSG(harness_event_wait(&s->disc_ev, 1, FX_WAIT_MS), "no disconnect event");
    CHECK_MSG(!harness_event_wait(&s->disc_ev, 2, FX_QUIET_MS), "a second disconnect event");
    CHECK_EQ_U64(atomic_load(&s->disc_n), 1);
    CHECK_MSG(atomic_load(&s->disc_reason) == reason, "disconnect reason 0x%08x, expected 0x%08x",
              (unsigned)atomic_load(&s->disc_reason), (unsigned)reason);
}

void fx_expect_no_disconnect(struct fx_side *s)
{
    CHECK_MSG(!harness_event_wait(&s->disc_ev, 1, FX_QUIET_MS),
              "unexpected disconnect event (reason 0x%08x)",
              (unsigned)atomic_load(&s->disc_reason));
}

void fx_disconnect(struct fx_side *cl, struct fx_side *sv)
{
    struct ndk_req rd, rs;
    ndk_req_init(&rd);
    NTSTATUS st = cl->conn->Dispatch->NdkDisconnect(cl->conn, ndk_req_done, &rd);
    CHECK_MSG(harness_event_wait(&sv->disc_ev, 1, FX_WAIT_MS), "no disconnect event at the peer");
    CHECK_MSG(atomic_load(&sv->disc_reason) == 0, "graceful disconnect with reason 0x%08x",
              (unsigned)atomic_load(&sv->disc_reason));
    ndk_req_init(&rs);
    NTSTATUS st2 = sv->conn->Dispatch->NdkDisconnect(sv->conn, ndk_req_done, &rs);
    CHECK_STATUS(ndk_req_wait(&rs, st2), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&rd, st), STATUS_SUCCESS);
    CHECK_EQ_U64(atomic_load(&sv->disc_n), 1);
    CHECK_EQ_U64(atomic_load(&cl->disc_n), 0);
    harness_event_destroy(&rd.ev);
    harness_event_destroy(&rs.ev);
}

int fx_fds_settle(int want, unsigned timeout_ms)
{
    uint64_t end = fx_now_us() + (uint64_t)timeout_ms * 1000u;
    for (;;) {
        int n = harness_open_fds();
        if (n <= want || fx_now_us() >= end)
            return n;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* pairs */

struct fx_pair *fx_pair_open_with(const SOFTNDK_OPTIONS *oc, const SOFTNDK_OPTIONS *os,
                                  size_t buflen, ULONG rq, ULONG sq)
{
    struct fx_pair *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    p->ac = fx_open_with(oc);
    p->as = fx_open_with(os);
    fx_listen(&p->srv, p->as);
    fx_side_init(&p->cl, p->ac, buflen, rq, sq);
    fx_side_init(&p->sv, p->as, buflen, rq, sq);
    fx_establish(&p->cl, &p->sv, &p->srv);
    return p;
}

struct fx_pair *fx_pair_open(const char *cfaults, const char *sfaults)
{
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, cfaults);
    fx_options(&os, sfaults);
    return fx_pair_open_with(&oc, &os, 1u << 20, 64, 64);
}

void fx_pair_close(struct fx_pair *p)
{
    fx_side_close(&p->cl);
    fx_side_close(&p->sv);
    fx_server_close(&p->srv);
    ndk_close_adapter(p->ac);
    ndk_close_adapter(p->as);
    free(p);
}

void fx_fill_slot(struct fx_side *s, unsigned i, size_t size)
{
    CHECK((i + 1) * size <= s->len);
    fx_fill(s->buf + (size_t)i * size, size, 1000u + i);
}

void fx_check_receives(const struct fx_side *s, const struct fx_side *peer, unsigned total,
                       unsigned ok, size_t size, uintptr_t base)
{
    fx_check_receives_at(s, peer, 0, total, ok, size, base);
}

void fx_check_receives_at(const struct fx_side *s, const struct fx_side *peer, size_t off,
                          unsigned total, unsigned ok, size_t size, uintptr_t base)
{
    CHECK(off + (size_t)total * size <= s->len && off + (size_t)total * size <= peer->len);
    CHECK_MSG(fx_count(s, true) == total, "%u receive completions, expected %u", fx_count(s, true),
              total);
    for (unsigned i = 0; i < total; i++) {
        const struct fx_result *r = fx_nth(s, true, i);
        CHECK_MSG(r->ctx == base + i, "receive %u: context %lu, expected %lu (order)", i,
                  (unsigned long)r->ctx, (unsigned long)(base + i));
        NTSTATUS want = i < ok ? STATUS_SUCCESS : STATUS_CANCELLED;
        CHECK_MSG(r->status == want, "receive %u of %u (%u expected to succeed): %s", i, total, ok,
                  SoftNdkStatusName(r->status));
        if (i < ok) {
            CHECK_EQ_U64(r->bytes, size);
            size_t d = harness_memdiff(s->buf + off + (size_t)i * size,
                                       peer->buf + off + (size_t)i * size, size);
            CHECK_MSG(d == (size_t)-1, "receive %u: data differs at byte %zu", i, d);
        }
    }
}

unsigned fx_check_initiator(const struct fx_side *s, unsigned total, unsigned ok_min,
                            unsigned ok_max, uintptr_t base)
{
    CHECK_MSG(fx_count(s, false) == total, "%u initiator completions, expected %u",
              fx_count(s, false), total);
    unsigned prefix = 0;
    for (unsigned i = 0; i < total; i++) {
        const struct fx_result *r = fx_nth(s, false, i);
        CHECK_MSG(r->ctx == base + i, "request %u: context %lu, expected %lu (order)", i,
                  (unsigned long)r->ctx, (unsigned long)(base + i));
        if (r->status == STATUS_SUCCESS && prefix == i)
            prefix++;
        else
            CHECK_MSG(r->status == STATUS_CANCELLED,
                      "request %u: %s (after %u successes; expected STATUS_CANCELLED)", i,
                      SoftNdkStatusName(r->status), prefix);
    }
    CHECK_MSG(prefix >= ok_min && prefix <= ok_max,
              "%u requests succeeded before the rest were cancelled, expected %u..%u", prefix,
              ok_min, ok_max);
    return prefix;
}

/* ------------------------------------------------------------------------------------------ */
/* calls */

const char *const fx_call_names[FX_C_COUNT] = {"cq",       "pd", "qp",        "srq",     "mr",
                                               "register", "mw", "connector", "listener"};

static void cq_notify_ignore(void *ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static void reg_completion(void *ctx, NTSTATUS st)
{
    (void)st;
    struct fx_calls *pa = ctx;
    harness_event_signal(&pa->reg_done);
}

/* The parents a call needs, made before the first counted call (their own kinds are counted
 * separately and are not refused by a rule on `which`). */
void fx_calls_open(struct fx_calls *pa, NDK_ADAPTER *a, enum fx_call which)
{
    memset(pa, 0, sizeof *pa);
    pa->a = a;
    harness_event_init(&pa->reg_done);
    if (which == FX_C_QP || which == FX_C_SRQ || which == FX_C_MR || which == FX_C_REGISTER ||
        which == FX_C_MW)
        CHECK_STATUS(a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &pa->pd), STATUS_SUCCESS);
    if (which == FX_C_QP) {
        CHECK_STATUS(a->Dispatch->NdkCreateCq(a, 64, cq_notify_ignore, NULL, NULL, ndk_create_never,
                                              NULL, &pa->cq),
                     STATUS_SUCCESS);
        CHECK_STATUS(pa->pd->Dispatch->NdkCreateSrq(pa->pd, 16, 1, 0, NULL, NULL, NULL,
                                                    ndk_create_never, NULL, &pa->srq),
                     STATUS_SUCCESS);
    }
}

void fx_calls_close(struct fx_calls *pa)
{
    if (pa->srq)
        fx_close_wait(&pa->srq->Header);
    if (pa->cq)
        fx_close_wait(&pa->cq->Header);
    if (pa->pd)
        fx_close_wait(&pa->pd->Header);
    harness_event_destroy(&pa->reg_done);
}

static void connect_event_never(void *ctx, NDK_CONNECTOR *c)
{
    (void)ctx, (void)c;
    harness_fail(__FILE__, __LINE__, "connect event on a listener that never listened");
}

/* Make call number `k` (1-based) of kind `which`; close what it created. Returns its status. */
NTSTATUS fx_call(struct fx_calls *pa, enum fx_call which, unsigned k)
{
    NDK_ADAPTER *a = pa->a;
    NTSTATUS st;
    NDK_OBJECT_HEADER *made = NULL;
    switch (which) {
    case FX_C_CQ: {
        NDK_CQ *o = NULL;
        st = a->Dispatch->NdkCreateCq(a, 16, cq_notify_ignore, NULL, NULL, ndk_create_never, NULL,
                                      &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_PD: {
        NDK_PD *o = NULL;
        st = a->Dispatch->NdkCreatePd(a, ndk_create_never, NULL, &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_QP: {
        /* NdkCreateQp and NdkCreateQpWithSrq share the count: alternate them */
        NDK_QP *o = NULL;
        if (k % 2)
            st = pa->pd->Dispatch->NdkCreateQp(pa->pd, pa->cq, pa->cq, NULL, 4, 4, 1, 1, 0,
                                               ndk_create_never, NULL, &o);
        else
            st = pa->pd->Dispatch->NdkCreateQpWithSrq(pa->pd, pa->cq, pa->cq, pa->srq, NULL, 4, 1,
                                                      0, ndk_create_never, NULL, &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_SRQ: {
        NDK_SRQ *o = NULL;
        st = pa->pd->Dispatch->NdkCreateSrq(pa->pd, 16, 1, 0, NULL, NULL, NULL, ndk_create_never,
                                            NULL, &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_MR: {
        NDK_MR *o = NULL;
        st = pa->pd->Dispatch->NdkCreateMr(pa->pd, FALSE, ndk_create_never, NULL, &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_REGISTER: {
        NDK_MR *mr = NULL;
        CHECK_STATUS(pa->pd->Dispatch->NdkCreateMr(pa->pd, FALSE, ndk_create_never, NULL, &mr),
                     STATUS_SUCCESS);
        MDL mdl;
        MmInitializeMdl(&mdl, pa->buf, sizeof pa->buf);
        unsigned before = harness_event_count(&pa->reg_done);
        st = mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof pa->buf, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                         reg_completion, pa);
        if (st == STATUS_PENDING) {
            CHECK_MSG(harness_event_wait(&pa->reg_done, before + 1, FX_WAIT_MS),
                      "NdkRegisterMr pended and never completed");
            st = STATUS_SUCCESS;
        } else {
            /* inline (success or the injected failure): the completion is not called */
            CHECK_MSG(!harness_event_wait(&pa->reg_done, before + 1, FX_QUIET_MS),
                      "NdkRegisterMr returned %s inline and called its completion",
                      SoftNdkStatusName(st));
        }
        if (st == STATUS_SUCCESS)
            CHECK(mr->Dispatch->NdkGetLocalTokenFromMr(mr) != 0);
        fx_close_wait(&mr->Header);
        return st;
    }
    case FX_C_MW: {
        NDK_MW *o = NULL;
        st = pa->pd->Dispatch->NdkCreateMw(pa->pd, ndk_create_never, NULL, &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_CONNECTOR: {
        NDK_CONNECTOR *o = NULL;
        st = a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &o);
        made = o ? &o->Header : NULL;
        break;
    }
    case FX_C_LISTENER: {
        NDK_LISTENER *o = NULL;
        st = a->Dispatch->NdkCreateListener(a, connect_event_never, NULL, ndk_create_never, NULL,
                                            &o);
        made = o ? &o->Header : NULL;
        break;
    }
    default:
        harness_fail(__FILE__, __LINE__, "call %d", (int)which);
    }
    if (st == STATUS_SUCCESS)
        CHECK_MSG(made != NULL, "%s call %u succeeded without an object", fx_call_names[which], k);
    else
        CHECK_MSG(made == NULL, "%s call %u failed (%s) but returned an object",
                  fx_call_names[which], k, SoftNdkStatusName(st));
    if (made)
        fx_close_wait(made);
    return st;
}
