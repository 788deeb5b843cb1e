/* The fault matrix: every fault class, R rounds each with its own seed and fault point. A round
 * (a forked process of its own) connects two adapters over 127.0.0.1, streams verified messages
 * (each an RDMA Write of W bytes and a Send of S bytes, posted in DEFER chains), lets the fault
 * fire and checks:
 *   completed  every request accepted completed exactly once (none missing, none twice), with
 *              the status the fault class allows, and the disconnect event fired once;
 *   verified   every byte before the fault point arrived intact (receives and Write targets),
 *              nothing after it was placed, the fault fired exactly as counted (InjectedFaults
 *              and the class's own counters);
 *   leak-free  every object closed, SoftNdkCloseAdapter returned, and the process's open fds
 *              (/proc/self/fd) are back to what they were before the round.
 * One table line per class: `class runs completed verified leak-free` (also written to
 * faults_matrix.txt beside the executable, in the build tree). SOFTNDK_FAULT_ROUNDS=N: N rounds
 * per class;
 * SOFTNDK_FAULT_CLASS=NAME: that class only. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"

#define ROUNDS          10
#define MAXM            16            /* messages per round at most: 2 FPDUs each */
#define BUFLEN          (256u * 1024) /* per side: Send slots at 0, Write slots at WOFF */
#define WOFF            (128u * 1024)
#define RB              1000u /* receive contexts */
#define QB              2000u /* initiator request contexts: request r = QB + r */
#define ROUND_TIMEOUT_S 20

enum { BAD_COMPLETED = 1, BAD_VERIFIED = 2, BAD_LEAK = 4, ROUND_FINISHED = 0x40 };

/* ------------------------------------------------------------------------------------------ */
/* round state */

struct round {
    const char *cls;
    unsigned no;
    uint64_t rng;
    unsigned bad;
    char why[512];
    int fds0;
};

static void miss(struct round *r, unsigned bit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void miss(struct round *r, unsigned bit, const char *fmt, ...)
{
    r->bad |= bit;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fx_note("    %s round %u: %s\n", r->cls, r->no, msg);
}
#define EXPECT(r, bit, cond, ...)                                                                  \
    do {                                                                                           \
        if (!(cond))                                                                               \
            miss((r), (bit), __VA_ARGS__);                                                         \
    } while (0)

static uint32_t rnd(struct round *r, uint32_t n) /* 0 .. n-1 */
{
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    return n ? (uint32_t)(r->rng % n) : 0;
}

/* The stream: M messages; request 2k is Write k (FPDU 2k+1), request 2k+1 is Send k. */
struct stream {
    unsigned m;
    size_t s, w;
    unsigned chunk;  /* requests per DEFER chain */
    unsigned posted; /* requests accepted */
    uint64_t t0;     /* before the first push */
};

static void stream_init(struct round *r, struct stream *st)
{
    st->m = 8 + rnd(r, MAXM - 7);  /* 8..16 messages */
    st->s = 64 + 8 * rnd(r, 250);  /* 64..2056 */
    st->w = 256 + 4 * rnd(r, 960); /* 256..4092 */
    st->chunk = 1 + rnd(r, 8);
    st->posted = 0;
}

static size_t fpdu_len(const struct stream *st, unsigned req)
{
    return req % 2 ? FX_SEND_FPDU(st->s) : FX_WRITE_FPDU(st->w);
}

static size_t stream_bytes(const struct stream *st)
{
    size_t b = 0;
    for (unsigned q = 0; q < 2 * st->m; q++)
        b += fpdu_len(st, q);
    return b;
}

/* Receives on the server, data in the client's slots (zero the server's). */
static void stream_prepare(struct fx_pair *p, struct stream *st)
{
    memset(p->sv.buf, 0, p->sv.len);
    for (unsigned k = 0; k < st->m; k++) {
        fx_post_recv(&p->sv, RB + k, k * st->s, st->s);
        fx_fill(p->cl.buf + k * st->s, st->s, 1000u + k);
        fx_fill(p->cl.buf + WOFF + k * st->w, st->w, 5000u + k);
    }
}

/* Post requests [from, to) in DEFER chains; stop at the first inline refusal (the connection
 * died under us: STATUS_CONNECTION_INVALID). */
static void stream_post(struct round *r, struct fx_pair *p, struct stream *st, unsigned from,
                        unsigned to)
{
    for (unsigned q = from; q < to; q++) {
        bool push = (q + 1) % st->chunk == 0 || q + 1 == to;
        ULONG flags = push ? 0 : NDK_OP_FLAG_DEFER;
        unsigned k = q / 2;
        if (q == 0)
            st->t0 = fixture_now_us();
        NTSTATUS s = q % 2 ? fx_try_send(&p->cl, QB + q, k * st->s, st->s, flags)
                           : fx_try_write(&p->cl, QB + q, WOFF + k * st->w, st->w, &p->sv,
                                          WOFF + k * st->w, flags);
        if (s == STATUS_CONNECTION_INVALID)
            return;
        EXPECT(r, BAD_COMPLETED, s == STATUS_SUCCESS, "request %u refused inline with %s", q,
               SoftNdkStatusName(s));
        if (s != STATUS_SUCCESS)
            return;
        st->posted = q + 1;
    }
}

/* What the fault allows. */
enum mode {
    M_ALL,    /* nothing lost: every request and receive succeeds */
    M_CUT_TX, /* the sender cut after F FPDUs: exactly F requests succeed */
    M_CUT_RX, /* the receiver stopped after F FPDUs: at least F requests succeed */
    M_CRC,    /* FPDU F+1 had a bad CRC: at least F+1 requests succeed, F+1 may be placed */
};

/* Collect everything and check it against fault point F (FPDUs that pass; `partial`: some
 * bytes of FPDU F+1 passed too). Returns the number of receives that succeeded. */
static unsigned stream_check(struct round *r, struct fx_pair *p, struct stream *st, enum mode mode,
                             unsigned f, bool partial)
{
    unsigned got = fx_collect(&p->sv, st->m, FIXTURE_WAIT_MS);
    EXPECT(r, BAD_COMPLETED, got == st->m, "%u of %u receives completed", got, st->m);
    got = fx_collect(&p->cl, st->posted, FIXTURE_WAIT_MS);
    EXPECT(r, BAD_COMPLETED, got == st->posted, "%u of %u requests completed", got, st->posted);
    if (mode == M_ALL)
        EXPECT(r, BAD_COMPLETED, st->posted == 2 * st->m, "only %u of %u requests accepted",
               st->posted, 2 * st->m);

    /* initiator side: posting order, a SUCCESS prefix, then STATUS_CANCELLED */
    unsigned prefix = 0;
    for (unsigned i = 0; i < fx_count(&p->cl, false); i++) {
        const struct fx_result *x = fx_nth(&p->cl, false, i);
        EXPECT(r, BAD_COMPLETED, x->ctx == QB + i, "request %u completed out of order", i);
        if (x->status == STATUS_SUCCESS && prefix == i)
            prefix++;
        else
            EXPECT(r, BAD_COMPLETED, x->status == STATUS_CANCELLED, "request %u completed with %s",
                   i, SoftNdkStatusName(x->status));
    }
    unsigned lo = mode == M_ALL ? 2 * st->m : mode == M_CRC ? f + 1 : f;
    unsigned hi = mode == M_CUT_TX ? f : st->posted;
    if (lo > st->posted)
        lo = st->posted;
    EXPECT(r, BAD_VERIFIED, prefix >= lo && prefix <= hi,
           "%u requests succeeded, expected %u..%u (fault after FPDU %u)", prefix, lo, hi, f);

    /* receive side: receive k succeeds iff Send k (FPDU 2k+2) passed */
    unsigned want_ok = mode == M_ALL ? st->m : f / 2;
    if (want_ok > st->m)
        want_ok = st->m;
    unsigned ok = 0;
    for (unsigned k = 0; k < fx_count(&p->sv, true); k++) {
        const struct fx_result *x = fx_nth(&p->sv, true, k);
        EXPECT(r, BAD_COMPLETED, x->ctx == RB + k, "receive %u completed out of order", k);
        if (k < want_ok) {
            EXPECT(r, BAD_VERIFIED, x->status == STATUS_SUCCESS && x->bytes == st->s,
                   "receive %u: %s, %lu bytes", k, SoftNdkStatusName(x->status),
                   (unsigned long)x->bytes);
            size_t d = harness_memdiff(p->sv.buf + k * st->s, p->cl.buf + k * st->s, st->s);
            EXPECT(r, BAD_VERIFIED, d == (size_t)-1, "receive %u: data differs at byte %zu", k, d);
        } else {
            EXPECT(r, BAD_VERIFIED, x->status == STATUS_CANCELLED,
                   "receive %u (after the fault): %s", k, SoftNdkStatusName(x->status));
        }
        ok += x->status == STATUS_SUCCESS;
    }
    /* Write targets: placed in full up to F; F+1 may be partly placed (bad CRC, cut inside);
     * nothing after that */
    for (unsigned k = 0; k < st->m; k++) {
        unsigned fpdu = 2 * k + 1;
        const uint8_t *dst = p->sv.buf + WOFF + k * st->w, *src = p->cl.buf + WOFF + k * st->w;
        if (mode == M_ALL || fpdu <= f) {
            size_t d = harness_memdiff(dst, src, st->w);
            EXPECT(r, BAD_VERIFIED, d == (size_t)-1, "Write %u (FPDU %u): differs at byte %zu", k,
                   fpdu, d);
        } else if (fpdu == f + 1 && (mode == M_CRC || partial)) {
            continue;
        } else {
            bool zero = true;
            for (size_t b = 0; b < st->w && zero; b++)
                zero = dst[b] == 0;
            EXPECT(r, BAD_VERIFIED, zero, "Write %u (FPDU %u) placed after the fault at FPDU %u", k,
                   fpdu, f + 1);
        }
    }
    return ok;
}

static void expect_disc(struct round *r, struct fx_side *s, const char *who, ULONG reason)
{
    bool came = harness_event_wait(&s->disc_ev, 1, FIXTURE_WAIT_MS);
    EXPECT(r, BAD_COMPLETED, came, "%s: no disconnect event", who);
    if (came)
        EXPECT(r, BAD_VERIFIED, atomic_load(&s->disc_reason) == reason,
               "%s: disconnect reason 0x%08x, expected 0x%08x", who,
               (unsigned)atomic_load(&s->disc_reason), (unsigned)reason);
}

/* ------------------------------------------------------------------------------------------ */
/* opening and closing without CHECK on the outcome the table counts */

static struct fx_pair *pair_open(struct round *r, const char *cf, const char *sf, bool crc)
{
    (void)r;
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, cf);
    fx_options(&os, sf);
    oc.LogLevel = os.LogLevel = SoftNdkLogError; /* hundreds of fault lines otherwise */
    if (!crc)
        oc.Crc = os.Crc = SoftNdkCrcOff;
    return fx_pair_open_with(&oc, &os, BUFLEN, 64, 64);
}

static void pair_close(struct round *r, struct fx_pair *p)
{
    fx_side_close(&p->cl);
    fx_side_close(&p->sv);
    EXPECT(r, BAD_COMPLETED, atomic_load(&p->cl.disc_n) <= 1 && atomic_load(&p->sv.disc_n) <= 1,
           "more than one disconnect event (%u, %u)", atomic_load(&p->cl.disc_n),
           atomic_load(&p->sv.disc_n));
    fx_server_close(&p->srv);
    if (!ndk_try_close_adapter(p->ac, FIXTURE_WAIT_MS) ||
        !ndk_try_close_adapter(p->as, FIXTURE_WAIT_MS))
        miss(r, BAD_LEAK, "SoftNdkCloseAdapter did not return");
    free(p);
}

static void graceful(struct fx_pair *p)
{
    fx_disconnect(&p->cl, &p->sv);
}

static void counters(struct fx_pair *p, SOFTNDK_COUNTERS *c, SOFTNDK_COUNTERS *s)
{
    fx_counters(p->ac, c);
    fx_counters(p->as, s);
}

/* ------------------------------------------------------------------------------------------ */
/* the classes */

/* drop tx (after_fpdus), drop rx (after_fpdus), drop tx (after_bytes) */
static void round_drop(struct round *r, int variant)
{
    struct stream st;
    stream_init(r, &st);
    unsigned f = rnd(r, 2 * st.m);
    bool partial = false;
    char rule[96];
    if (variant == 2) {
        size_t b = rnd(r, (uint32_t)stream_bytes(&st)), end = 0;
        f = 0;
        while (end + fpdu_len(&st, f) <= b)
            end += fpdu_len(&st, f++);
        partial = b > end;
        snprintf(rule, sizeof rule, "drop:dir=tx,after_bytes=%zu", b);
    } else {
        snprintf(rule, sizeof rule, "drop:dir=%s,after_fpdus=%u", variant ? "rx" : "tx", f);
    }
    bool on_client = variant != 1;
    struct fx_pair *p = pair_open(r, on_client ? rule : "", on_client ? "" : rule, true);
    stream_prepare(p, &st);
    stream_post(r, p, &st, 0, 2 * st.m);
    stream_check(r, p, &st, variant == 1 ? M_CUT_RX : M_CUT_TX, f, partial);
    expect_disc(r, &p->cl, "client", FX_REASON_RESET);
    expect_disc(r, &p->sv, "server", FX_REASON_RESET);
    SOFTNDK_COUNTERS c, s;
    counters(p, &c, &s);
    EXPECT(r, BAD_VERIFIED,
           c.InjectedFaults == (on_client ? 1u : 0u) && s.InjectedFaults == (on_client ? 0u : 1u),
           "InjectedFaults %llu/%llu", (unsigned long long)c.InjectedFaults,
           (unsigned long long)s.InjectedFaults);
    pair_close(r, p);
}

static void round_drop_tx(struct round *r)
{
    round_drop(r, 0);
}
static void round_drop_rx(struct round *r)
{
    round_drop(r, 1);
}
static void round_drop_bytes(struct round *r)
{
    round_drop(r, 2);
}

/* crc tx / rx at a fixed point; crc tx with p= and a seed */
static void round_crc(struct round *r, int variant)
{
    struct stream st;
    stream_init(r, &st);
    unsigned f = rnd(r, 2 * st.m);
    char rule[96];
    if (variant == 2)
        snprintf(rule, sizeof rule, "seed=%u;crc:dir=tx,p=15", (unsigned)rnd(r, 1000000));
    else
        snprintf(rule, sizeof rule, "crc:dir=%s,after_fpdus=%u", variant ? "rx" : "tx", f);
    bool on_client = variant != 1;
    struct fx_pair *p = pair_open(r, on_client ? rule : "", on_client ? "" : rule, true);
    stream_prepare(p, &st);
    stream_post(r, p, &st, 0, 2 * st.m);
    SOFTNDK_COUNTERS c, s;
    if (variant == 2) {
        /* the firing point is the generator's: learn it from the receives, then check as for a
         * fixed point (Send k failed: F = 2k+1; Write k+1 failed: F = 2k+2) */
        fx_collect(&p->sv, st.m, FIXTURE_WAIT_MS);
        unsigned k = 0;
        while (k < fx_count(&p->sv, true) && fx_nth(&p->sv, true, k)->status == STATUS_SUCCESS)
            k++;
        if (k == st.m) { /* never fired (possible: p=15 over up to 32 FPDUs) */
            stream_check(r, p, &st, M_ALL, 0, false);
            counters(p, &c, &s);
            EXPECT(r, BAD_VERIFIED, c.InjectedFaults == 0, "InjectedFaults %llu, nothing fired",
                   (unsigned long long)c.InjectedFaults);
            graceful(p);
            pair_close(r, p);
            return;
        }
        /* the bad FPDU is Write k (2k+1) or Send k (2k+2): FPDUs 1..2k passed, 2k+1 may be
         * placed either way */
        f = 2 * k;
    }
    stream_check(r, p, &st, M_CRC, f, false);
    expect_disc(r, &p->sv, "server", FX_REASON_SENT(FX_TERM_MPA_CRC));
    expect_disc(r, &p->cl, "client", FX_REASON_RECVD(FX_TERM_MPA_CRC));
    counters(p, &c, &s);
    EXPECT(r, BAD_VERIFIED,
           c.InjectedFaults == (on_client ? 1u : 0u) && s.InjectedFaults == (on_client ? 0u : 1u),
           "InjectedFaults %llu/%llu", (unsigned long long)c.InjectedFaults,
           (unsigned long long)s.InjectedFaults);
    EXPECT(r, BAD_VERIFIED,
           s.CrcErrors == 1 && s.TerminatesSent[2] == 1 && c.TerminatesReceived[2] == 1,
           "CrcErrors %llu, MPA Terminates sent %llu / received %llu",
           (unsigned long long)s.CrcErrors, (unsigned long long)s.TerminatesSent[2],
           (unsigned long long)c.TerminatesReceived[2]);
    pair_close(r, p);
}

static void round_crc_tx(struct round *r)
{
    round_crc(r, 0);
}
static void round_crc_rx(struct round *r)
{
    round_crc(r, 1);
}
static void round_crc_p(struct round *r)
{
    round_crc(r, 2);
}

static void round_terminate(struct round *r)
{
    static const struct {
        const char *spec;
        unsigned layer;
        ULONG code;
    } kinds[] = {
        {"", 0, FX_TERM(0, 0, 0)},
        {",layer=ddp,etype=2,code=5", 1, FX_TERM(1, 2, 5)},
        {",layer=mpa,etype=0,code=2", 2, FX_TERM(2, 0, 2)},
        {",layer=rdmap,etype=1,code=3", 0, FX_TERM(0, 1, 3)},
    };
    struct stream st;
    stream_init(r, &st);
    unsigned f = rnd(r, 2 * st.m), t = rnd(r, 4);
    char rule[96];
    snprintf(rule, sizeof rule, "terminate:after_fpdus=%u%s", f, kinds[t].spec);
    struct fx_pair *p = pair_open(r, rule, "", true);
    stream_prepare(p, &st);
    stream_post(r, p, &st, 0, 2 * st.m);
    stream_check(r, p, &st, M_CUT_TX, f, false);
    expect_disc(r, &p->cl, "client", FX_REASON_SENT(kinds[t].code));
    expect_disc(r, &p->sv, "server", FX_REASON_RECVD(kinds[t].code));
    SOFTNDK_COUNTERS c, s;
    counters(p, &c, &s);
    EXPECT(r, BAD_VERIFIED, c.InjectedFaults == 1 && s.InjectedFaults == 0,
           "InjectedFaults %llu/%llu", (unsigned long long)c.InjectedFaults,
           (unsigned long long)s.InjectedFaults);
    EXPECT(r, BAD_VERIFIED,
           c.TerminatesSent[kinds[t].layer] == 1 && s.TerminatesReceived[kinds[t].layer] == 1 &&
               fx_term_count(s.TerminateReceivedCodes, kinds[t].code) == 1,
           "Terminate counters: sent %llu, received %llu, code 0x%06x seen %llu times",
           (unsigned long long)c.TerminatesSent[kinds[t].layer],
           (unsigned long long)s.TerminatesReceived[kinds[t].layer], (unsigned)kinds[t].code,
           (unsigned long long)fx_term_count(s.TerminateReceivedCodes, kinds[t].code));
    pair_close(r, p);
}

/* stall tx / rx (after_fpdus or after_bytes) and delay: nothing lost */
static void round_slow(struct round *r, int variant)
{
    struct stream st;
    stream_init(r, &st);
    unsigned ms = 10 + rnd(r, 21), f = rnd(r, 2 * st.m);
    bool on_client = variant == 0 || (variant == 2 && r->no % 2 == 0);
    char rule[96];
    if (variant == 2)
        snprintf(rule, sizeof rule, "delay:dir=%s,ms=1", on_client ? "tx" : "rx");
    else if (r->no % 3 == 2)
        snprintf(rule, sizeof rule, "stall:dir=%s,after_bytes=%u,ms=%u", on_client ? "tx" : "rx",
                 (unsigned)rnd(r, (uint32_t)stream_bytes(&st)), ms);
    else
        snprintf(rule, sizeof rule, "stall:dir=%s,after_fpdus=%u,ms=%u", on_client ? "tx" : "rx", f,
                 ms);
    struct fx_pair *p = pair_open(r, on_client ? rule : "", on_client ? "" : rule, r->no % 2);
    stream_prepare(p, &st);
    stream_post(r, p, &st, 0, 2 * st.m);
    stream_check(r, p, &st, M_ALL, 0, false);
    uint64_t took =
        fx_nth(&p->sv, true, st.m - 1) ? fx_nth(&p->sv, true, st.m - 1)->t_us - st.t0 : 0;
    uint64_t min_us = variant == 2 ? (uint64_t)(2 * st.m - 1) * 1000u : (uint64_t)ms * 1000u - 500u;
    EXPECT(r, BAD_VERIFIED, took >= min_us, "%s: the stream took %llu us, at least %llu expected",
           rule, (unsigned long long)took, (unsigned long long)min_us);
    EXPECT(r, BAD_COMPLETED,
           !harness_event_wait(&p->cl.disc_ev, 1, 0) && !harness_event_wait(&p->sv.disc_ev, 1, 0),
           "a disconnect event without a fault");
    graceful(p);
    SOFTNDK_COUNTERS c, s;
    counters(p, &c, &s);
    uint64_t want = variant == 2 ? 2u * st.m : 1u;
    uint64_t got = on_client ? c.InjectedFaults : s.InjectedFaults;
    uint64_t other = on_client ? s.InjectedFaults : c.InjectedFaults;
    EXPECT(r, BAD_VERIFIED, got == want && other == 0,
           "%s: InjectedFaults %llu (other side %llu), expected %llu", rule,
           (unsigned long long)got, (unsigned long long)other, (unsigned long long)want);
    pair_close(r, p);
}

static void round_stall_tx(struct round *r)
{
    round_slow(r, 0);
}
static void round_stall_rx(struct round *r)
{
    round_slow(r, 1);
}
static void round_delay(struct round *r)
{
    round_slow(r, 2);
}

/* mpa_reject: 3 connection attempts, the nth is refused, the others carry a verified stream */
static void round_mpa_reject(struct round *r)
{
    unsigned nth = 1 + rnd(r, 3);
    char rule[64];
    snprintf(rule, sizeof rule, "mpa_reject:nth=%u", nth);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, "");
    fx_options(&os, rule);
    oc.LogLevel = os.LogLevel = SoftNdkLogError;
    NDK_ADAPTER *ac = fx_open_with(&oc), *as = fx_open_with(&os);
    struct fx_pair *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    p->ac = ac;
    p->as = as;
    fx_listen(&p->srv, as);
    for (unsigned k = 1; k <= 3; k++) {
        fx_side_init(&p->cl, ac, BUFLEN, 64, 64);
        if (k == nth) {
            fx_connect_refused(&p->cl, &p->srv, STATUS_CONNECTION_REFUSED);
            char why[64];
            ULONG len = sizeof why;
            NTSTATUS s =
                p->cl.conn->Dispatch->NdkGetConnectionData(p->cl.conn, NULL, NULL, why, &len);
            EXPECT(r, BAD_VERIFIED,
                   s == STATUS_SUCCESS && len == 23 &&
                       memcmp(why, "softndk: injected fault", 23) == 0,
                   "the reject's private data");
        } else {
            fx_side_init(&p->sv, as, BUFLEN, 64, 64);
            fx_establish(&p->cl, &p->sv, &p->srv);
            struct stream st;
            stream_init(r, &st);
            stream_prepare(p, &st);
            stream_post(r, p, &st, 0, 2 * st.m);
            stream_check(r, p, &st, M_ALL, 0, false);
            graceful(p);
            fx_side_close(&p->sv);
        }
        fx_side_close(&p->cl);
    }
    FX_WAIT_COUNTER(as, MpaRejectsSent, 1); /* bumped after the Reject is on the wire */
    SOFTNDK_COUNTERS c, s;
    counters(p, &c, &s);
    EXPECT(r, BAD_VERIFIED,
           s.InjectedFaults == 1 && s.MpaRejectsSent == 1 && c.MpaRejectsReceived == 1 &&
               c.Connect == 2 && s.Accept == 2,
           "counters: injected %llu, rejects %llu/%llu, connects %llu/%llu",
           (unsigned long long)s.InjectedFaults, (unsigned long long)s.MpaRejectsSent,
           (unsigned long long)c.MpaRejectsReceived, (unsigned long long)c.Connect,
           (unsigned long long)s.Accept);
    fx_server_close(&p->srv);
    if (!ndk_try_close_adapter(ac, FIXTURE_WAIT_MS) || !ndk_try_close_adapter(as, FIXTURE_WAIT_MS))
        miss(r, BAD_LEAK, "SoftNdkCloseAdapter did not return");
    free(p);
}

/* fail: call kind r % 9, the nth of 3 calls refused; then a full connection and stream on the
 * same adapters */
static void round_fail(struct round *r)
{
    enum fx_call kind = (enum fx_call)(r->no % FX_C_COUNT);
    unsigned nth = 1 + rnd(r, 3);
    char rule[64];
    snprintf(rule, sizeof rule, "fail:call=%s,nth=%u", fx_call_names[kind], nth);
    struct fx_pair *p = NULL;
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, rule);
    fx_options(&os, "");
    oc.LogLevel = os.LogLevel = SoftNdkLogError;
    NDK_ADAPTER *ac = fx_open_with(&oc);
    struct fx_calls pa;
    fx_calls_open(&pa, ac, kind);
    for (unsigned k = 1; k <= 3; k++) {
        NTSTATUS s = fx_call(&pa, kind, k);
        NTSTATUS want = k == nth ? STATUS_INSUFFICIENT_RESOURCES : STATUS_SUCCESS;
        EXPECT(r, BAD_VERIFIED, s == want, "%s: call %u returned %s", rule, k,
               SoftNdkStatusName(s));
    }
    fx_calls_close(&pa);
    EXPECT(r, BAD_VERIFIED, fx_injected(ac) == 1, "%s: InjectedFaults %llu", rule,
           (unsigned long long)fx_injected(ac));
    /* the adapter goes on working */
    p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    p->ac = ac;
    p->as = fx_open_with(&os);
    fx_listen(&p->srv, p->as);
    fx_side_init(&p->cl, ac, BUFLEN, 64, 64);
    fx_side_init(&p->sv, p->as, BUFLEN, 64, 64);
    fx_establish(&p->cl, &p->sv, &p->srv);
    struct stream st;
    stream_init(r, &st);
    stream_prepare(p, &st);
    stream_post(r, p, &st, 0, 2 * st.m);
    stream_check(r, p, &st, M_ALL, 0, false);
    graceful(p);
    pair_close(r, p);
}

/* cq_overrun of the server's CQ (its adapter's CQ #1) at receive K+1, one message at a time so
 * that exactly K receives are seen. The overrun kills the CQ and aborts the QP feeding it with a
 * Terminate (RDMAP, local catastrophic; docs/cq.md "Overrun"). */
static void round_cq_overrun(struct round *r)
{
    struct stream st;
    stream_init(r, &st);
    unsigned after = rnd(r, st.m);
    char rule[64];
    snprintf(rule, sizeof rule, "cq_overrun:cq=1,after=%u", after);
    struct fx_pair *p = pair_open(r, "", rule, r->no % 2);
    p->sv.cq->Dispatch->NdkArmCq(p->sv.cq, NDK_CQ_NOTIFY_ERRORS);
    stream_prepare(p, &st);
    for (unsigned k = 0; k <= after; k++) {
        stream_post(r, p, &st, 2 * k, 2 * k + 2);
        if (k < after) {
            unsigned got = fx_collect(&p->sv, k + 1, FIXTURE_WAIT_MS);
            EXPECT(r, BAD_COMPLETED, got == k + 1, "receive %u did not complete", k);
        }
    }
    bool told = harness_event_wait(&p->sv.cq_ev, 1, FIXTURE_WAIT_MS);
    EXPECT(r, BAD_VERIFIED, told && p->sv.cq_status[0] == STATUS_BUFFER_OVERFLOW,
           "no STATUS_BUFFER_OVERFLOW notification at receive %u", after);
    expect_disc(r, &p->sv, "server", FX_REASON_SENT(FX_TERM(0, 0, 0)));
    expect_disc(r, &p->cl, "client", FX_REASON_RECVD(FX_TERM(0, 0, 0)));
    /* every request left before the overrun: all succeeded */
    unsigned got = fx_collect(&p->cl, st.posted, FIXTURE_WAIT_MS);
    EXPECT(r, BAD_COMPLETED, got == 2 * (after + 1) && st.posted == got,
           "%u of %u requests completed", got, 2 * (after + 1));
    for (unsigned i = 0; i < got; i++)
        EXPECT(r, BAD_COMPLETED, fx_nth(&p->cl, false, i)->status == STATUS_SUCCESS,
               "request %u: %s", i, SoftNdkStatusName(fx_nth(&p->cl, false, i)->status));
    /* the dead CQ gives nothing more; what it gave was intact; Write `after` landed */
    EXPECT(r, BAD_VERIFIED, fx_collect(&p->sv, after + 1, 0) == after,
           "%u receives seen on the dead CQ, expected %u", p->sv.nres, after);
    for (unsigned k = 0; k < p->sv.nres && k < after; k++) {
        EXPECT(r, BAD_VERIFIED,
               p->sv.res[k].status == STATUS_SUCCESS && p->sv.res[k].ctx == RB + k &&
                   memcmp(p->sv.buf + k * st.s, p->cl.buf + k * st.s, st.s) == 0,
               "receive %u: %s or its data differs", k, SoftNdkStatusName(p->sv.res[k].status));
    }
    EXPECT(r, BAD_VERIFIED, memcmp(p->sv.buf + WOFF, p->cl.buf + WOFF, (after + 1) * st.w) == 0,
           "a Write before the overrun did not land");
    SOFTNDK_COUNTERS c, s;
    counters(p, &c, &s);
    EXPECT(r, BAD_VERIFIED,
           s.CQError == 1 && s.InjectedFaults == 1 && c.CQError == 0 && c.InjectedFaults == 0 &&
               s.TerminatesSent[0] == 1 && c.TerminatesReceived[0] == 1,
           "CQError %llu/%llu InjectedFaults %llu/%llu RDMAP Terminates %llu/%llu",
           (unsigned long long)c.CQError, (unsigned long long)s.CQError,
           (unsigned long long)c.InjectedFaults, (unsigned long long)s.InjectedFaults,
           (unsigned long long)s.TerminatesSent[0], (unsigned long long)c.TerminatesReceived[0]);
    pair_close(r, p);
}

/* ------------------------------------------------------------------------------------------ */
/* the runner */

struct cls {
    const char *name;
    void (*round)(struct round *r);
};

static const struct cls classes[] = {
    {"drop_tx", round_drop_tx},       {"drop_rx", round_drop_rx},
    {"drop_bytes", round_drop_bytes}, {"crc_tx", round_crc_tx},
    {"crc_rx", round_crc_rx},         {"crc_p_seed", round_crc_p},
    {"terminate", round_terminate},   {"stall_tx", round_stall_tx},
    {"stall_rx", round_stall_rx},     {"delay", round_delay},
    {"mpa_reject", round_mpa_reject}, {"fail", round_fail},
    {"cq_overrun", round_cq_overrun},
};

/* One round in a child process: its exit status is ROUND_FINISHED | the BAD_* bits; anything
 * else (a CHECK of the setup failed, a crash, the timeout) counts as nothing done. */
static int run_round(const struct cls *c, unsigned no)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct round r;
        memset(&r, 0, sizeof r);
        r.cls = c->name;
        r.no = no;
        r.rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(c - classes) << 32) ^ (no * 7919u + 1);
        r.fds0 = harness_open_fds();
        c->round(&r);
        int fds = fx_fds_settle(r.fds0, 2000);
        EXPECT(&r, BAD_LEAK, fds == r.fds0, "%d fds open after the round, %d before", fds, r.fds0);
        fflush(stdout);
        _exit(ROUND_FINISHED | (int)r.bad);
    }
    uint64_t end = fixture_now_us() + ROUND_TIMEOUT_S * 1000000ull;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (fixture_now_us() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fx_note("    %s round %u: timed out after %d s\n", c->name, no, ROUND_TIMEOUT_S);
            return -1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (WIFEXITED(status) && (WEXITSTATUS(status) & ~7) == ROUND_FINISHED)
        return WEXITSTATUS(status) & 7;
    fx_note("    %s round %u: did not finish (%s %d)\n", c->name, no,
            WIFSIGNALED(status) ? "signal" : "exit",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return -1;
}

TEST_T(fault_matrix, 150)
{
    unsigned rounds = ROUNDS;
    const char *env = getenv("SOFTNDK_FAULT_ROUNDS");
    if (env && atoi(env) > 0)
        rounds = (unsigned)atoi(env);
    char table[4096];
    size_t tl = 0;
    tl += (size_t)snprintf(table + tl, sizeof table - tl, "%-12s %5s %10s %9s %10s\n", "class",
                           "runs", "completed", "verified", "leak-free");
    bool all = true;
    uint64_t t0 = fixture_now_us();
    const char *only = getenv("SOFTNDK_FAULT_CLASS"); /* one class (debugging) */
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        if (only && *only && strcmp(only, classes[i].name) != 0)
            continue;
        unsigned done = 0, ver = 0, clean = 0;
        for (unsigned no = 0; no < rounds; no++) {
            int bad = run_round(&classes[i], no);
            if (bad < 0)
                continue;
            done += !(bad & BAD_COMPLETED);
            ver += !(bad & (BAD_VERIFIED | BAD_COMPLETED));
            clean += !(bad & BAD_LEAK);
        }
        all &= done == rounds && ver == rounds && clean == rounds;
        int n = snprintf(table + tl, sizeof table - tl, "%-12s %5u %10u %9u %10u\n",
                         classes[i].name, rounds, done, ver, clean);
        fx_note("%s", table + tl);
        tl += (size_t)n;
    }
    fx_note("\n%s(%u rounds per class, %.1f s)\n", table, rounds,
            (double)(fixture_now_us() - t0) / 1e6);
    /* beside the executable: running it from a source checkout leaves nothing there */
    char path[4096];
    ssize_t pl = readlink("/proc/self/exe", path, sizeof path - 32);
    char *slash = pl > 0 ? memrchr(path, '/', (size_t)pl) : NULL;
    if (slash)
        strcpy(slash + 1, "faults_matrix.txt");
    else
        strcpy(path, "faults_matrix.txt");
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(table, f);
        fclose(f);
    }
    CHECK_MSG(all, "a fault class missed a round (table above)");
}
