/* The connection's phase machine and its end record: the state every part of the connection
 * (conn.c, tx.c, rx.c, the hooks) reads and moves, below all of them (docs/datapath.md, "The
 * connection under the QP"). */
#include "datapath/phase.h"

#include "util/log.h"


static const char *const conn_phase_names[SNDK_PHASE_COUNT] = {
    [SNDK_PHASE_ATTACHING] = "attaching",
    [SNDK_PHASE_LIVE] = "live",
    [SNDK_PHASE_SHUTTING_DOWN] = "shutting-down",
    [SNDK_PHASE_FIN_SENT] = "fin-sent",
    [SNDK_PHASE_FAILING] = "failing",
    [SNDK_PHASE_ENDED] = "ended",
};

const char *sndk_conn_phase_name(enum sndk_conn_phase p)
{
    return (unsigned)p < SNDK_PHASE_COUNT ? conn_phase_names[p] : "?";
}

/* One function per source phase (conn.h draws the machine). */
static bool phase_from_attaching(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_LIVE || next == SNDK_PHASE_ENDED;
}
static bool phase_from_live(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_SHUTTING_DOWN || next == SNDK_PHASE_FAILING ||
           next == SNDK_PHASE_ENDED;
}
static bool phase_from_shutting_down(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_FIN_SENT || next == SNDK_PHASE_FAILING || next == SNDK_PHASE_ENDED;
}
static bool phase_from_fin_sent(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_FAILING || next == SNDK_PHASE_ENDED;
}
static bool phase_from_failing(enum sndk_conn_phase next)
{
    return next == SNDK_PHASE_ENDED;
}
static bool phase_from_ended(enum sndk_conn_phase next)
{
    (void)next;
    return false; /* final */
}

static bool (*const phase_transitions[SNDK_PHASE_COUNT])(enum sndk_conn_phase) = {
    [SNDK_PHASE_ATTACHING] = phase_from_attaching,
    [SNDK_PHASE_LIVE] = phase_from_live,
    [SNDK_PHASE_SHUTTING_DOWN] = phase_from_shutting_down,
    [SNDK_PHASE_FIN_SENT] = phase_from_fin_sent,
    [SNDK_PHASE_FAILING] = phase_from_failing,
    [SNDK_PHASE_ENDED] = phase_from_ended,
};

bool sndk_conn_phase_set(struct sndk_qp *qp, enum sndk_conn_phase next, const char *why)
{
    struct sndk_conn *io = qp->io;
    /* the locks the readers of each phase hold (conn.h) */
    if (next == SNDK_PHASE_LIVE)
        sndk_assert_held(&qp->state_lock);
    else if (next == SNDK_PHASE_ENDED || next == SNDK_PHASE_FAILING)
        assert(sndk_mutex_held(&qp->rx_lock) && sndk_mutex_held(&qp->tx_lock));
    else
        sndk_assert_held(&qp->tx_lock);
    int cur = atomic_load_explicit(&io->phase, memory_order_relaxed);
    do {
        if (!phase_transitions[cur](next)) {
            if (cur < SNDK_PHASE_FAILING) {
                sndk_err("qp", "QP %p: connection: refused %s => %s (%s)", (void *)qp,
                         sndk_conn_phase_name((enum sndk_conn_phase)cur),
                         sndk_conn_phase_name(next), why);
                assert(!"illegal connection phase transition");
            }
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&io->phase, &cur, (int)next,
                                                    memory_order_acq_rel, memory_order_relaxed));
    sndk_debug("qp", "QP %p: connection %s => %s (%s)", (void *)qp,
               sndk_conn_phase_name((enum sndk_conn_phase)cur), sndk_conn_phase_name(next), why);
    SNDK_TRACE("qp.conn_phase", "QP", qp, "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\"",
               sndk_conn_phase_name((enum sndk_conn_phase)cur), sndk_conn_phase_name(next), why);
    return true;
}

/* ---------------------------------------------------------------- parking */

static const char *const rx_park_names[SNDK_RX_PARK_COUNT] = {
    [SNDK_RX_WATCHED] = "watched",
    [SNDK_RX_PARKED] = "parked",
    [SNDK_RX_PARK_CLOSED] = "closed",
};

const char *sndk_rx_park_name(enum sndk_rx_park p)
{
    return (unsigned)p < SNDK_RX_PARK_COUNT ? rx_park_names[p] : "?";
}

static bool rx_park_allowed(enum sndk_rx_park from, enum sndk_rx_park to)
{
    switch (from) {
    case SNDK_RX_WATCHED:
        return to == SNDK_RX_PARKED || to == SNDK_RX_PARK_CLOSED;
    case SNDK_RX_PARKED:
        return to == SNDK_RX_WATCHED || to == SNDK_RX_PARK_CLOSED;
    default:
        return false; /* closed is final */
    }
}

bool sndk_rx_park_set(struct sndk_qp *qp, enum sndk_rx_park next, const char *why)
{
    struct sndk_conn *io = qp->io;
    sndk_assert_held(&qp->tx_lock);
    enum sndk_rx_park cur = (enum sndk_rx_park)io->rx_park;
    if (!rx_park_allowed(cur, next)) {
        sndk_err("qp", "QP %p: receiving: refused %s => %s (%s)", (void *)qp,
                 sndk_rx_park_name(cur), sndk_rx_park_name(next), why);
        assert(!"illegal parking transition");
        return false;
    }
    io->rx_park = (uint8_t)next;
    sndk_debug("qp", "QP %p: receiving %s => %s (%s)", (void *)qp, sndk_rx_park_name(cur),
               sndk_rx_park_name(next), why);
    SNDK_TRACE("qp.rx_park", "QP", qp, "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\"",
               sndk_rx_park_name(cur), sndk_rx_park_name(next), why);
    return true;
}

/* ---------------------------------------------------------------- the end record */

static const char *const end_finder_names[SNDK_END_FINDER_COUNT] = {
    [SNDK_END_NONE] = "none",
    [SNDK_END_RX] = "receive side",
    [SNDK_END_TX] = "send side",
    [SNDK_END_LOCAL] = "local",
    [SNDK_END_SHUTDOWN] = "shutdown",
};

const char *sndk_end_finder_name(enum sndk_end_finder b)
{
    return (unsigned)b < SNDK_END_FINDER_COUNT ? end_finder_names[b] : "?";
}

const struct sndk_fail *sndk_conn_end_record(struct sndk_conn *io, enum sndk_end_finder by,
                                             const struct sndk_fail *f)
{
    sndk_assert_held(&io->qp->tx_lock);
    assert(by != SNDK_END_NONE && by < SNDK_END_FINDER_COUNT);
    if (atomic_load_explicit(&io->end.by, memory_order_relaxed) == SNDK_END_NONE) {
        io->end.why = *f;
        atomic_store_explicit(&io->end.by, (uint8_t)by, memory_order_release);
        sndk_debug("qp", "QP %p: connection end found by the %s: 0x%08x reason 0x%08x%s",
                   (void *)io->qp, sndk_end_finder_name(by), (unsigned)f->link_status,
                   (unsigned)f->reason, f->graceful ? " (graceful)" : "");
    }
    return &io->end.why;
}
