/* ndkperf test loops.
 *
 * Bandwidth (send_bw, write_bw, read_bw): every QP keeps up to -t data requests outstanding,
 * posted in DEFER chains of -l; send_bw adds credit flow control (iWARP has no RNR retry: a Send
 * that finds no receive kills the connection), the receiver returning one CREDIT per
 * credit_batch reposted receives. The sender ends its data with END; a SYNC barrier closes every
 * round (one round per size), so rounds of -a never mix.
 *
 * Latency: send_lat ping-pongs Sends (half the round trip), write_lat ping-pongs RDMA Writes
 * that each side sees land by watching the last byte of its buffer (half the round trip),
 * read_lat times one RDMA Read at a time (the whole round trip), as perftest does.
 *
 * Polling (default) spins on NdkGetCqResultsEx, which also drives the provider's receive path;
 * -e arms the CQs with NdkArmCq(ANY), polls once more, then blocks on the notification;
 * --callback (send_lat, read_lat) runs the latency loop in the notification callback itself
 * (below), the rest of the round (END, SYNC) as -e. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndkperf.h"

enum { CTX_DATA = 1, CTX_CTRL = 2 };
enum { C_CREDIT = 0, C_END = 1, C_SYNC = 2 };
static const char *const ctrl_names[3] = {"CREDIT", "END", "SYNC"};

static inline PVOID mkctx(unsigned kind, uint32_t v)
{
    return (PVOID)(uintptr_t)(((uint64_t)kind << 32) | v);
}
static inline unsigned ctx_kind(PVOID c)
{
    return (unsigned)((uintptr_t)c >> 32);
}
static inline uint32_t ctx_val(PVOID c)
{
    return (uint32_t)(uintptr_t)c;
}

static _Noreturn void check_failed(const struct qpctx *q, const char *what, uint64_t iter,
                                   const uint8_t *buf, size_t off)
{
    die(EXIT_FAIL,
        "%s: data check failed (-c): QP %u %s %" PRIu64 ", byte %zu is 0x%02x, expected 0x%02x",
        test_name(q->side->o->test), q->index, what, iter, off, buf[off],
        pattern_expected(off, iter, q->index));
}

/* ------------------------------------------------------------------------------------------ */
/* One QP's state for one round */

struct flow {
    struct qpctx *q;
    struct side *s;
    uint32_t size;
    uint32_t len[3];  /* lengths of the control messages */
    bool send_role;   /* posts data this round */
    bool recv_role;   /* waits for the peer's END */
    uint64_t target;  /* data requests to post (UINT64_MAX: until the -D deadline) */
    uint64_t posted, completed;
    uint32_t outstanding, window;
    int64_t credits;  /* send_bw */
    bool credit_flow;
    bool sending_done, end_posted, end_done;
    uint64_t received; /* data messages (Send tests) */
    uint32_t since_credit;
    bool peer_end, sync_posted, peer_sync, finished;
    uint32_t ctrl_out;
    uint64_t t_first, t_last; /* first post / receive, last completion / receive */
};

/* A window closes after at least 1 ms and 256 MiB: a send completes once its bytes are in
 * TCP, and the send and receive buffers of one Linux connection hold up to ~36 MiB (tcp_wmem
 * and tcp_rmem maxima), so a shorter window reports how fast they fill up, not the link. A
 * run too short for one window reports its average. */
#define PEAK_WINDOW_NS    1000000u
#define PEAK_WINDOW_BYTES (256u << 20)

static void meter_event(struct peak_meter *m, uint64_t now)
{
    m->n++;
    if (now - m->t0 < PEAK_WINDOW_NS || m->n * m->size < PEAK_WINDOW_BYTES)
        return;
    {
        double bw = (double)m->n * m->size * 1e9 / (double)(now - m->t0);
        if (bw > m->peak)
            m->peak = bw;
    }
    m->n = 0;
    m->t0 = now;
}

static void ctrl_lens(uint32_t size, uint32_t out[3])
{
    uint32_t v = 0;
    for (int i = 0; i < 3; i++) {
        while (v == size)
            v++;
        out[i] = v++;
    }
}

static uint32_t max_size_of(const struct flow *f)
{
    return f->s->max_size;
}

static void post_ctrl(struct flow *f, unsigned type)
{
    struct qpctx *q = f->q;
    if (f->ctrl_out >= q->ctrl_out_max)
        die(EXIT_FAIL, "internal: %u control messages outstanding on QP %u", f->ctrl_out,
            q->index);
    NDK_SGE sge = {.VirtualAddress = q->tx, .Length = f->len[type],
                   .MemoryRegionToken = f->s->token};
    NTSTATUS st = q->qp->Dispatch->NdkSend(q->qp, mkctx(CTX_CTRL, type), &sge,
                                           f->len[type] ? 1 : 0, 0);
    if (st != STATUS_SUCCESS) {
        char call[48];
        snprintf(call, sizeof call, "NdkSend (%s)", ctrl_names[type]);
        die_status(call, st, atomic_load(&q->peer_gone) ? "the peer disconnected" : NULL);
    }
    f->ctrl_out++;
}

/* Post data request number i of the round; Flags as given (DEFER inside a chain). */
static void post_data(struct flow *f, uint64_t i, ULONG flags)
{
    struct qpctx *q = f->q;
    struct side *s = f->s;
    const struct opts *o = s->o;
    uint32_t max = max_size_of(f);
    size_t stride = max > 64 ? max : 64;
    NDK_SGE sge;
    sge.Length = f->size;
    sge.MemoryRegionToken = s->token;
    NTSTATUS st;
    const char *call;
    if (o->test == T_READ_BW || o->test == T_READ_LAT) {
        uint8_t *sink = q->sink + (size_t)(i % q->tx_slots) * max;
        uint64_t remote = q->remote_land + (i % q->land_slots) * (uint64_t)max;
        sge.VirtualAddress = sink;
        call = "NdkRead";
        st = q->qp->Dispatch->NdkRead(q->qp, mkctx(CTX_DATA, 0), &sge, 1, remote, q->remote_token,
                                      flags);
    } else {
        uint8_t *buf = q->tx + (size_t)(i % q->tx_slots) * stride;
        if (o->verify)
            pattern_fill(buf, f->size, i, q->index);
        sge.VirtualAddress = buf;
        if (s->inline_size && f->size <= s->inline_size)
            flags |= NDK_OP_FLAG_INLINE;
        if (o->test == T_SEND_BW || o->test == T_SEND_LAT) {
            call = "NdkSend";
            st = q->qp->Dispatch->NdkSend(q->qp, mkctx(CTX_DATA, 0), &sge, 1, flags);
        } else {
            uint64_t remote = q->remote_land + (i % q->land_slots) * (uint64_t)max;
            call = "NdkWrite";
            st = q->qp->Dispatch->NdkWrite(q->qp, mkctx(CTX_DATA, 0), &sge, 1, remote,
                                           q->remote_token, flags);
        }
    }
    if (st != STATUS_SUCCESS)
        die_status(call, st, atomic_load(&q->peer_gone) ? "the peer disconnected" : NULL);
    f->outstanding++;
    f->posted++;
}

static void check_write_land(struct flow *f);

/* Handle one completion. */
static void handle(struct flow *f, const NDK_RESULT_EX *r)
{
    struct qpctx *q = f->q;
    struct side *s = f->s;
    const struct opts *o = s->o;
    if (r->Type == NdkOperationTypeReceive || r->Type == NdkOperationTypeReceiveAndInvalidate) {
        if (r->Status != STATUS_SUCCESS) {
            if (r->Status == STATUS_CANCELLED || atomic_load(&q->peer_gone))
                die(EXIT_FAIL, "%s: QP %u: the peer disconnected during the test (%s)",
                    test_name(o->test), q->index, SoftNdkStatusName(r->Status));
            die_status("receive completion", r->Status, NULL);
        }
        uint32_t slot = (uint32_t)(uintptr_t)r->RequestContext;
        uint32_t len = r->BytesTransferred;
        if (test_is_send(o->test) && len == f->size) {
            if (o->verify) {
                const uint8_t *buf = q->rx + (q->rx_shared ? 0 : (size_t)slot * q->rx_slot_len);
                size_t bad = pattern_check(buf, len, f->received, q->index);
                if (bad != (size_t)-1)
                    check_failed(q, "message", f->received, buf, bad);
            }
            if (test_is_bw(o->test)) {
                /* only the bandwidth tests time completions, by their poll's time (conn.c,
                 * next_cq_completion): a clock read on a latency loop's path is time it
                 * measures (27 ns each on one VM) */
                uint64_t now = q->polled_ns;
                if (!f->received)
                    f->t_first = f->t_first ? f->t_first : now;
                f->t_last = now;
                meter_event(&s->meter, now);
            }
            f->received++;
            post_recv(q, slot);
            if (f->credit_flow && ++f->since_credit == q->credit_batch) {
                f->since_credit = 0;
                post_ctrl(f, C_CREDIT);
            }
            return;
        }
        post_recv(q, slot);
        if (len == f->len[C_CREDIT] && f->credit_flow)
            f->credits += q->credit_batch;
        else if (len == f->len[C_END]) {
            f->peer_end = true;
            if (o->verify && o->test == T_WRITE_BW)
                check_write_land(f);
        } else if (len == f->len[C_SYNC])
            f->peer_sync = true;
        else
            die(EXIT_FAIL, "%s: QP %u: unexpected message of %u bytes (the peer runs other options?)",
                test_name(o->test), q->index, len);
        return;
    }
    /* initiator completion */
    if (r->Status != STATUS_SUCCESS) {
        const char *op = r->Type == NdkOperationTypeWrite  ? "RDMA Write completion"
                         : r->Type == NdkOperationTypeRead ? "RDMA Read completion"
                                                           : "Send completion";
        die_status(op, r->Status, atomic_load(&q->peer_gone) ? "the peer disconnected" : NULL);
    }
    if (ctx_kind(r->RequestContext) == CTX_CTRL) {
        f->ctrl_out--;
        if (ctx_val(r->RequestContext) == C_END)
            f->end_done = true;
        return;
    }
    if (ctx_kind(r->RequestContext) != CTX_DATA)
        die(EXIT_FAIL, "internal: completion with an unknown context %p", r->RequestContext);
    if ((o->test == T_READ_BW || o->test == T_READ_LAT) && o->verify) {
        uint64_t i = f->completed;
        const uint8_t *sink = q->sink + (size_t)(i % q->tx_slots) * max_size_of(f);
        size_t bad = pattern_check(sink, f->size, i % q->land_slots, q->index);
        if (bad != (size_t)-1)
            check_failed(q, "read of remote slot", i % q->land_slots, sink, bad);
    }
    f->outstanding--;
    f->completed++;
    if (test_is_bw(o->test)) {
        uint64_t now = q->polled_ns;
        f->t_last = now;
        meter_event(&s->meter, now);
    }
}

/* Handle the completions available now, up to what one poll of the CQ brings once the earlier
 * ones are handed out; returns how many. */
static unsigned progress(struct flow *f)
{
    unsigned n = 0;
    NDK_RESULT_EX *r;
    unsigned budget = RESULT_BATCH;
    for (;;) {
        bool closing = f->sync_posted && f->peer_sync;
        if (f->finished || !budget--)
            break;
        r = closing ? next_cq_completion(f->q) : next_completion(f->q);
        if (!r)
            break;
        NDK_RESULT_EX copy = *r;
        if (closing && (copy.Type == NdkOperationTypeReceive ||
                                              copy.Type == NdkOperationTypeReceiveAndInvalidate)) {
            /* Both SYNCs seen: every later receive belongs to the next round (the peer began
             * it); only our own outstanding sends still end this one. */
            hold_completion(f->q, &copy);
            continue;
        }
        handle(f, &copy);
        n++;
        /* as perftest: what one poll brought is acted on before the CQ is polled again (an
         * empty poll between a message and its answer is time the latency loops measure) */
        if (completions_drained(f->q))
            break;
    }
    return n;
}

static bool has_completion(struct qpctx *q)
{
    if (q->held_i < q->held_n)
        return true;
    if (next_cq_completion(q)) {
        q->res_i--;
        return true;
    }
    return false;
}

/* Nothing to do: spin (polling) or arm, look once more, and block (-e). */
static void idle(struct side *s, struct flow *fl, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (!fl[k].finished && atomic_load(&fl[k].q->peer_gone) && !fl[k].peer_sync) {
            /* The disconnect event may overtake our look at the CQ: what the peer sent
             * before its FIN is there first. */
            if (has_completion(fl[k].q))
                return;
            die(EXIT_FAIL, "%s: QP %u: the peer disconnected during the test",
                test_name(s->o->test), fl[k].q->index);
        }
    if (!s->o->events)
        return;
    unsigned seen = side_arm(s);
    for (unsigned k = 0; k < n; k++)
        if (!fl[k].finished && has_completion(fl[k].q))
            return;
    side_wait_event(s, seen);
}

static _Atomic uint64_t g_deadline; /* -D: when senders stop posting (both threads read it) */

/* Post as many data requests as window, credits and target allow, in chains of -l. */
static bool post_more(struct flow *f)
{
    const struct opts *o = f->s->o;
    if (o->duration && f->target == UINT64_MAX && now_ns() >= g_deadline)
        f->target = f->posted;
    bool any = false;
    for (;;) {
        uint64_t remaining = f->target - f->posted;
        uint64_t room = f->window - f->outstanding;
        if (f->credit_flow && (uint64_t)f->credits < room)
            room = f->credits > 0 ? (uint64_t)f->credits : 0;
        uint64_t want = o->post_list < remaining ? o->post_list : remaining;
        if (!want || room < want)
            break;
        if (!f->t_first)
            f->t_first = now_ns();
        for (uint64_t k = 0; k < want; k++)
            post_data(f, f->posted, k + 1 < want ? NDK_OP_FLAG_DEFER : 0);
        if (f->credit_flow)
            f->credits -= (int64_t)want;
        any = true;
    }
    return any;
}

static void check_write_land(struct flow *f)
{
    /* The target of write_bw -c: every landing slot holds the last message written to it. */
    struct qpctx *q = f->q;
    uint64_t n = f->s->o->iters;
    for (uint32_t j = 0; j < q->land_slots && j < n; j++) {
        uint64_t last = (n - 1 - j) / q->land_slots * q->land_slots + j;
        const uint8_t *buf = q->land + (size_t)j * f->s->max_size;
        size_t bad = pattern_check(buf, f->size, last, q->index);
        if (bad != (size_t)-1)
            check_failed(q, "write", last, buf, bad);
    }
}

static void step(struct flow *f)
{
    if (f->finished)
        return;
    if (f->send_role && !f->sending_done && f->target != UINT64_MAX && f->completed == f->target &&
        f->outstanding == 0)
        f->sending_done = true;
    if (f->send_role && f->sending_done && !f->end_posted) {
        post_ctrl(f, C_END);
        f->end_posted = true;
    }
    bool mine = !f->send_role || f->end_done;
    bool theirs = !f->recv_role || f->peer_end;
    if (mine && theirs && !f->sync_posted) {
        if (f->s->o->test == T_WRITE_LAT && f->q->land)
            memset(f->q->land, 0, (size_t)f->q->land_slots * f->s->max_size);
        post_ctrl(f, C_SYNC);
        f->sync_posted = true;
    }
    if (f->sync_posted && f->peer_sync && f->ctrl_out == 0 && f->outstanding == 0)
        f->finished = true;
}

/* Run until every flow has finished the round (posting data where it has any left). */
static void drive(struct side *s, struct flow *fl, unsigned n)
{
    unsigned finished = 0;
    while (finished < n) {
        bool any = false;
        finished = 0;
        for (unsigned k = 0; k < n; k++) {
            struct flow *f = &fl[k];
            if (!f->finished) {
                if (f->send_role && !f->sending_done)
                    any |= post_more(f);
                any |= progress(f) > 0;
                step(f);
            }
            finished += f->finished;
        }
        if (!any && finished < n)
            idle(s, fl, n);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Latency loops (one QP) */

static inline uint8_t marker(uint64_t i)
{
    return (uint8_t)(i % 255 + 1);
}

static void wait_until(struct side *s, struct flow *f, const uint64_t *counter, uint64_t value)
{
    while (*counter < value)
        if (!progress(f))
            idle(s, f, 1);
}

/* The client reads the clock once per round trip, as perftest does: the read that ends
 * message i's round trip (its reply received, its own Send complete) begins message i+1's. */
static void send_lat(struct side *s, struct flow *f, uint64_t *samples, uint64_t n)
{
    if (!s->is_server) {
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < n; i++) {
            post_data(f, i, 0);
            wait_until(s, f, &f->received, i + 1);
            while (f->outstanding)
                if (!progress(f))
                    idle(s, f, 1);
            uint64_t t1 = now_ns();
            samples[i] = (t1 - t0) / 2;
            t0 = t1;
        }
    } else {
        for (uint64_t i = 0; i < n; i++) {
            wait_until(s, f, &f->received, i + 1);
            while (f->outstanding)
                if (!progress(f))
                    idle(s, f, 1);
            post_data(f, i, 0);
        }
    }
    f->target = f->posted;
}

/* Has the peer's Write put `want` into *last? Dies if the peer left without it: its
 * disconnect is reported after the Writes it made before are placed, so the byte is looked at
 * once more after the flag (a Write that landed between the look and the flag is no departure). */
static bool write_landed(struct flow *f, const uint8_t *last, uint8_t want)
{
    if (__atomic_load_n(last, __ATOMIC_ACQUIRE) == want)
        return true;
    progress(f);
    if (!atomic_load(&f->q->peer_gone))
        return false;
    if (__atomic_load_n(last, __ATOMIC_ACQUIRE) == want)
        return true;
    die(EXIT_FAIL, "write_lat: the peer disconnected during the test");
}

static void write_lat(struct side *s, struct flow *f, uint64_t *samples, uint64_t n)
{
    struct qpctx *q = f->q;
    const bool verify = s->o->verify;
    uint8_t *last = q->land + f->size - 1;
    uint32_t max = s->max_size;
    size_t stride = max > 64 ? max : 64;
    uint64_t t0 = s->is_server ? 0 : now_ns(); /* one clock read per round trip (send_lat) */
    for (uint64_t i = 0; i < n; i++) {
        /* the server answers message i; the client sends it first */
        if (s->is_server) {
            while (!write_landed(f, last, marker(i)))
                ;
            if (verify) {
                size_t bad = pattern_check(q->land, f->size - 1, i, q->index);
                if (bad != (size_t)-1)
                    check_failed(q, "write", i, q->land, bad);
            }
        }
        while (f->outstanding)
            progress(f);
        uint8_t *buf = q->tx + (size_t)(i % q->tx_slots) * stride;
        if (verify)
            pattern_fill(buf, f->size - 1, i, q->index);
        buf[f->size - 1] = marker(i);
        /* post_data fills the pattern over the whole message with -c; write it here instead */
        NDK_SGE sge = {.VirtualAddress = buf, .Length = f->size, .MemoryRegionToken = s->token};
        ULONG flags = s->inline_size && f->size <= s->inline_size ? NDK_OP_FLAG_INLINE : 0;
        NTSTATUS st = q->qp->Dispatch->NdkWrite(q->qp, mkctx(CTX_DATA, 0), &sge, 1,
                                                q->remote_land, q->remote_token, flags);
        if (st != STATUS_SUCCESS)
            die_status("NdkWrite", st, NULL);
        f->outstanding++;
        f->posted++;
        if (!s->is_server) {
            while (!write_landed(f, last, marker(i)))
                ;
            uint64_t t1 = now_ns();
            samples[i] = (t1 - t0) / 2;
            if (verify) {
                size_t bad = pattern_check(q->land, f->size - 1, i, q->index);
                if (bad != (size_t)-1)
                    check_failed(q, "write", i, q->land, bad);
                t1 = now_ns(); /* the check is not the next message's time */
            }
            t0 = t1;
        }
    }
    while (f->outstanding)
        progress(f);
    f->target = f->posted;
}

static void read_lat(struct side *s, struct flow *f, uint64_t *samples, uint64_t n)
{
    if (s->is_server)
        return; /* the target only answers (inside the provider) */
    uint64_t t0 = now_ns(); /* one clock read per Read (send_lat) */
    for (uint64_t i = 0; i < n; i++) {
        post_data(f, i, 0);
        wait_until(s, f, &f->completed, i + 1);
        uint64_t t1 = now_ns();
        samples[i] = t1 - t0;
        t0 = t1;
    }
    f->target = f->posted;
}

/* ------------------------------------------------------------------------------------------ */
/* --callback: the latency loop in the CQ notification callback, as a kernel consumer runs it in
 * its DPC: the callback polls the CQ until it is empty, acts on what it took (the client times
 * the reply and posts the next message or Read, the server answers), and re-arms; a completion
 * written between its last empty poll and the arm fires the arm ([CQ-7]). The thread hands the
 * loop over and waits for its end; it never wakes per message. */

struct cb_lat {
    struct flow *f;
    uint64_t *samples;
    uint64_t n, i; /* message (Read) i is in flight, or awaited (server) */
    uint64_t t0;
    bool timed; /* client: message i has its sample */
};

/* One pass: drain, act, then arm, or end the loop. Only one caller at a time (cb_busy). */
static void cb_step(struct side *s)
{
    struct cb_lat *c = s->cb;
    struct flow *f = c->f;
    const enum test_kind t = s->o->test;
    for (;;) {
        bool took = progress(f) > 0;
        if (t == T_READ_LAT) {
            if (f->completed == c->i + 1) {
                c->samples[c->i] = now_ns() - c->t0;
                if (++c->i == c->n)
                    break;
                c->t0 = now_ns();
                post_data(f, c->i, 0);
            }
        } else if (!s->is_server) {
            if (!c->timed && f->received == c->i + 1) {
                c->samples[c->i] = (now_ns() - c->t0) / 2;
                c->timed = true;
            }
            if (c->timed && f->outstanding == 0) {
                if (++c->i == c->n)
                    break;
                c->timed = false;
                c->t0 = now_ns();
                post_data(f, c->i, 0);
            }
        } else if (c->i < c->n && f->received == c->i + 1 && f->outstanding == 0) {
            post_data(f, c->i, 0);
            c->i++;
        } else if (c->i == c->n && f->outstanding == 0) {
            break;
        }
        if (!took) {
            struct qpctx *q = f->q;
            q->cq->Dispatch->NdkArmCq(q->cq, NDK_CQ_NOTIFY_ANY);
            return;
        }
    }
    /* the end: the last thing this loop touches, then the thread owns the flow again */
    atomic_store(&s->cb_mode, CB_DONE);
    futex_wake_all(&s->cb_mode);
}

/* Run steps while one is due and nobody else runs them: a caller that finds the loop busy
 * leaves it pending for the one inside, who runs another step (a callback never waits). */
static void cb_run(struct side *s)
{
    atomic_store(&s->cb_pending, true);
    while (atomic_load(&s->cb_pending) && !atomic_exchange(&s->cb_busy, true)) {
        atomic_store(&s->cb_pending, false);
        if (atomic_load(&s->cb_mode) == CB_RUNNING)
            cb_step(s);
        atomic_store(&s->cb_busy, false);
    }
}

bool callback_loop(struct side *s)
{
    if (atomic_load(&s->cb_mode) != CB_RUNNING)
        return false;
    cb_run(s);
    return true;
}

static void callback_lat(struct side *s, struct flow *f, uint64_t *samples, uint64_t n)
{
    struct qpctx *q = f->q;
    struct cb_lat c = {.f = f, .samples = samples, .n = n};
    if (s->o->test == T_READ_LAT && s->is_server)
        return; /* the target only answers (inside the provider) */
    if (!s->is_server) {
        c.t0 = now_ns();
        post_data(f, 0, 0);
    }
    s->cb = &c;
    atomic_store(&s->cb_mode, CB_RUNNING);
    /* the first step here: it takes what is queued already (or held from the last round),
     * then arms; from then on the callbacks run the loop */
    cb_run(s);
    while (atomic_load(&s->cb_mode) == CB_RUNNING) {
        futex_wait_ms(&s->cb_mode, CB_RUNNING, 1000);
        NTSTATUS st = atomic_load(&s->ev_status);
        if (st != STATUS_SUCCESS)
            die_status("CQ notification", st, "the CQ overran or failed");
        if (atomic_load(&s->cb_mode) == CB_RUNNING && atomic_load(&q->peer_gone))
            die(EXIT_FAIL, "%s: QP %u: the peer disconnected during the test",
                test_name(s->o->test), q->index);
    }
    /* the step that ended the loop may still be leaving cb_run (it touches only the flags) */
    while (atomic_load(&s->cb_busy))
        sched_yield();
    s->cb = NULL;
    f->target = f->posted;
}

/* ------------------------------------------------------------------------------------------ */

static void flow_init(struct flow *f, struct side *s, struct qpctx *q, uint32_t size)
{
    const struct opts *o = s->o;
    memset(f, 0, sizeof *f);
    f->q = q;
    f->s = s;
    f->size = size;
    ctrl_lens(size, f->len);
    bool bw = test_is_bw(o->test);
    f->send_role = bw ? (!s->is_server || o->bidir) : !s->is_server;
    f->recv_role = bw ? (s->is_server || o->bidir) : s->is_server;
    f->target = o->duration ? UINT64_MAX : o->iters;
    f->window = o->tx_depth;
    if (o->verify && f->window > q->tx_slots)
        f->window = q->tx_slots;
    if (o->test == T_READ_BW && f->window > q->ord && q->ord)
        f->window = q->ord;
    f->credit_flow = o->test == T_SEND_BW;
    /* the peer posted the same number of data receives we would (role-independent plan) */
    f->credits = f->credit_flow ? (int64_t)(q->rx_data_slots ? q->rx_data_slots
                                                             : q->peer_data_slots)
                                : 0;
    if (!f->send_role)
        f->target = 0;
}

unsigned run_sizes(const struct opts *o, uint32_t *sizes, unsigned cap)
{
    unsigned n = 0;
    if (!o->all) {
        sizes[n++] = o->size;
        return n;
    }
    for (uint32_t v = 2; v <= o->all_max && n < cap; v *= 2)
        sizes[n++] = v;
    return n;
}

void run_test(struct side *s)
{
    const struct opts *o = s->o;
    uint32_t sizes[40];
    unsigned nsizes = run_sizes(o, sizes, 40);
    s->rounds = calloc(nsizes, sizeof *s->rounds);
    struct flow *fl = calloc(s->nqps, sizeof *fl);
    uint64_t *samples = test_is_bw(o->test) ? NULL : calloc(o->iters, sizeof *samples);
    if (!s->rounds || !fl || (!test_is_bw(o->test) && !samples))
        die(EXIT_FAIL, "out of memory");
    for (unsigned r = 0; r < nsizes; r++) {
        uint32_t size = sizes[r];
        if (o->test == T_WRITE_LAT && size < 1)
            size = 1;
        set_phase("%s: %s, size %u", s->role, test_name(o->test), size);
        for (unsigned k = 0; k < s->nqps; k++)
            flow_init(&fl[k], s, &s->qps[k], size);
        struct peak_meter *m = &s->meter;
        memset(m, 0, sizeof *m);
        m->size = size;
        m->t0 = now_ns();
        if (o->duration)
            g_deadline = now_ns() + (uint64_t)o->duration * 1000000000ull;
        struct round_result *res = &s->rounds[r];
        res->size = size;
        uint64_t t_start = now_ns();
        if (test_is_bw(o->test)) {
            drive(s, fl, s->nqps);
        } else {
            struct flow *f = &fl[0];
            if (o->callback)
                callback_lat(s, f, samples, o->iters);
            else if (o->test == T_SEND_LAT)
                send_lat(s, f, samples, o->iters);
            else if (o->test == T_WRITE_LAT)
                write_lat(s, f, samples, o->iters);
            else
                read_lat(s, f, samples, o->iters);
            if (f->send_role)
                f->sending_done = f->outstanding == 0;
            drive(s, f, 1);
        }
        uint64_t t_end = now_ns();
        /* results */
        if (test_is_bw(o->test)) {
            uint64_t first = UINT64_MAX, last = 0, msgs = 0;
            for (unsigned k = 0; k < s->nqps; k++) {
                struct flow *f = &fl[k];
                uint64_t own = f->send_role ? f->completed : 0;
                uint64_t in = f->received;
                if (o->bidir && o->test != T_SEND_BW)
                    in = own; /* an RDMA target sees no completions: count the peer's as ours */
                if (o->test == T_SEND_BW && f->recv_role && !o->duration && f->received != o->iters)
                    die(EXIT_FAIL, "send_bw: QP %u received %" PRIu64 " of %u messages", k,
                        f->received, o->iters);
                msgs += own + in;
                if (f->t_first && f->t_first < first)
                    first = f->t_first;
                if (f->t_last > last)
                    last = f->t_last;
            }
            if (first == UINT64_MAX || last <= first) {
                first = t_start;
                last = t_end;
            }
            double secs = (double)(last - first) / 1e9;
            res->iters = msgs;
            res->bw_avg = msgs && secs > 0 ? (double)msgs * size / secs : 0;
            res->msg_rate = secs > 0 ? (double)msgs / secs : 0;
            res->bw_peak = m->peak > res->bw_avg ? m->peak : res->bw_avg;
            if (!s->is_server || o->bidir || o->test == T_SEND_BW)
                res->iters = msgs;
            if (!msgs)
                res->iters = 0;
        } else {
            res->is_lat = true;
            res->iters = o->iters;
            if (!s->is_server) {
                lat_stats(samples, o->iters, res);
                if (o->histogram)
                    lat_histogram(stderr, samples, o->iters);
            }
        }
        s->nrounds = r + 1;
        bool has_rows = test_is_bw(o->test) ? res->iters > 0 : !s->is_server;
        if (s->print_rows && has_rows)
            print_row(o, res);
    }
    free(samples);
    free(fl);
}
