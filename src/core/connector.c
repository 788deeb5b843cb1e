/* Connector (docs/ndk-rules.md#conn, #disc): NDK's three-way connection setup mapped onto TCP
 * and MPA (docs/iwarp-notes.md [IW-MPA-FRAME], [IW-MAP]):
 *
 *   active                                      passive
 *   NdkConnect: TCP connect, MPA Request  --->  listener accepts; Request read: connect event
 *                                         <---  NdkAccept: MPA Reply (peer-to-peer, Write RTR)
 *   NdkConnect completes (peer accepted)
 *   NdkCompleteConnect: zero-length Write --->  RTR read: QP attached, NdkAccept completes
 *   (the RTR), QP attached, completes
 *
 * A peer that does not ask for peer-to-peer mode (Linux siw by default) sends no RTR: the passive
 * side then attaches right after its Reply. Every frame is read with exact lengths, so the QP
 * gets the socket without a byte of its stream consumed. Graceful disconnect is a TCP FIN after
 * the last FPDU (the QP data path runs it, link.h); errors are Terminate + close.
 *
 * Locking: c->lock guards the state and everything the handshake touches; consumer callbacks
 * and QP (link) calls are made without it. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "core/create.h"
#include "core/errno_status.h"
#include "datapath/link.h"
#include "faults/faults.h"
#include "core/connector.h"
#include "device/qp_state.h"
#include "core/rendezvous.h"
#include "datapath/stream.h"
#include "verify/verify.h"
#include "iwarp/fpdu.h"
#include "iwarp/mpa.h"
#include "iwarp/parser.h"
#include "util/log.h"
#include "observe/pcap.h"
#include "observe/trace.h"

enum sndk_conn_state {
    SNDK_CONN_IDLE,          /* created; nothing started */
    SNDK_CONN_CONNECTING,    /* active: TCP connect under way */
    SNDK_CONN_REQ_SENT,      /* active: MPA Request out, reading the Reply */
    SNDK_CONN_REPLIED,       /* active: peer accepted, NdkConnect completed; awaiting consumer */
    SNDK_CONN_WAIT_REQUEST,  /* passive: TCP accepted, reading the MPA Request */
    SNDK_CONN_INCOMING,      /* passive: connect event delivered; awaiting Accept / Reject */
    SNDK_CONN_ABANDONED,     /* replied or incoming, and the peer left before the consumer's
                                answer: that answer fails (STATUS_CONNECTION_ABORTED) */
    SNDK_CONN_ACCEPTING,     /* passive: Reply out, waiting for the RTR */
    SNDK_CONN_ESTABLISHING,  /* handing the socket to the QP */
    SNDK_CONN_CONNECTED,     /* QP attached */
    SNDK_CONN_DISCONNECTING, /* NdkDisconnect under way */
    SNDK_CONN_CLOSED,        /* disconnected, failed, rejected or closing: final */
    SNDK_CONN_STATE_COUNT
};

static const char *const conn_state_names[SNDK_CONN_STATE_COUNT] = {
    [SNDK_CONN_IDLE] = "idle",
    [SNDK_CONN_CONNECTING] = "connecting",
    [SNDK_CONN_REQ_SENT] = "request-sent",
    [SNDK_CONN_REPLIED] = "replied",
    [SNDK_CONN_WAIT_REQUEST] = "wait-request",
    [SNDK_CONN_INCOMING] = "incoming",
    [SNDK_CONN_ABANDONED] = "abandoned",
    [SNDK_CONN_ACCEPTING] = "accepting",
    [SNDK_CONN_ESTABLISHING] = "establishing",
    [SNDK_CONN_CONNECTED] = "connected",
    [SNDK_CONN_DISCONNECTING] = "disconnecting",
    [SNDK_CONN_CLOSED] = "closed",
};
_Static_assert(SNDK_CONN_STATE_COUNT == SNDK_CONN_STATES, "connector.h's count of states");

const char *sndk_conn_state_name(unsigned s)
{
    return s < SNDK_CONN_STATE_COUNT ? conn_state_names[s] : "?";
}

/* Beside the connection's state, three small machines of their own (docs/connector.md,
 * "States"), each moved by a validated, logged transition under c->lock (side_move_locked). */

/* The one request a connector has outstanding (NdkConnect, NdkCompleteConnect, NdkAccept,
 * NdkDisconnect) and its completion: started, completed (the completion is queued to the
 * delivery work with its own callback and status), delivered. A consumer may start the next
 * request before the delivery ran (it saw the connection up on its CQ): done-active. */
enum sndk_conn_req {
    SNDK_REQ_NONE,        /* nothing outstanding, no completion queued */
    SNDK_REQ_ACTIVE,      /* a request outstanding */
    SNDK_REQ_DONE,        /* its completion queued for delivery */
    SNDK_REQ_DONE_ACTIVE, /* a completion queued, and the next request already outstanding */
    SNDK_REQ_COUNT
};
static const char *const conn_req_names[SNDK_REQ_COUNT] = {
    [SNDK_REQ_NONE] = "none",
    [SNDK_REQ_ACTIVE] = "active",
    [SNDK_REQ_DONE] = "done",
    [SNDK_REQ_DONE_ACTIVE] = "done-active",
};
#define BIT(x) (1u << (x))
static const unsigned conn_req_moves[SNDK_REQ_COUNT] = {
    [SNDK_REQ_NONE] = BIT(SNDK_REQ_ACTIVE),
    [SNDK_REQ_ACTIVE] = BIT(SNDK_REQ_DONE),
    [SNDK_REQ_DONE] = BIT(SNDK_REQ_NONE) | BIT(SNDK_REQ_DONE_ACTIVE),
    [SNDK_REQ_DONE_ACTIVE] = BIT(SNDK_REQ_ACTIVE) | BIT(SNDK_REQ_DONE),
};
_Static_assert(SNDK_REQ_COUNT == SNDK_CONN_REQ_PHASES, "connector.h's count of request phases");

/* The consumer's events: a passive connector's connect event, then at most one disconnect event
 * (docs/connector.md, "The disconnect event"). */
enum sndk_conn_event {
    SNDK_EV_NONE,        /* nothing queued; a disconnect event may still come */
    SNDK_EV_CONNECT_DUE, /* the connect event is queued (passive, incoming) */
    SNDK_EV_DISC_DUE,    /* the disconnect event is queued */
    SNDK_EV_DISC_FIRED,  /* the disconnect event was delivered, or came with no callback */
    SNDK_EV_SILENT,      /* NdkDisconnect or close came first: no disconnect event; final */
    SNDK_EV_COUNT
};
static const char *const conn_event_names[SNDK_EV_COUNT] = {
    [SNDK_EV_NONE] = "none",
    [SNDK_EV_CONNECT_DUE] = "connect-due",
    [SNDK_EV_DISC_DUE] = "disconnect-due",
    [SNDK_EV_DISC_FIRED] = "disconnect-fired",
    [SNDK_EV_SILENT] = "silent",
};
static const unsigned conn_event_moves[SNDK_EV_COUNT] = {
    [SNDK_EV_NONE] = BIT(SNDK_EV_CONNECT_DUE) | BIT(SNDK_EV_DISC_DUE) | BIT(SNDK_EV_DISC_FIRED) |
                     BIT(SNDK_EV_SILENT),
    [SNDK_EV_CONNECT_DUE] = BIT(SNDK_EV_NONE) | BIT(SNDK_EV_SILENT),
    [SNDK_EV_DISC_DUE] = BIT(SNDK_EV_DISC_FIRED) | BIT(SNDK_EV_SILENT),
    [SNDK_EV_DISC_FIRED] = BIT(SNDK_EV_SILENT),
    [SNDK_EV_SILENT] = 0,
};
_Static_assert(SNDK_EV_COUNT == SNDK_CONN_EVENT_PHASES, "connector.h's count of event phases");

/* The connector's hold on its QP's connection (link.h). */
enum sndk_conn_link {
    SNDK_LINK_NONE,     /* not attached: no QP, or one bound for the handshake */
    SNDK_LINK_ATTACHED, /* attach under way or done: link events may come; holds a reference
                           (detach_done_fn drops it) */
    SNDK_LINK_FAIL_DUE, /* NdkAccept failed before attach: deliver_fn puts the QP in error
                           (sndk_qp_connect_failed) before the completion */
    SNDK_LINK_FAILED,   /* ... and it did; final */
    SNDK_LINK_COUNT
};
static const char *const conn_link_names[SNDK_LINK_COUNT] = {
    [SNDK_LINK_NONE] = "none",
    [SNDK_LINK_ATTACHED] = "attached",
    [SNDK_LINK_FAIL_DUE] = "fail-due",
    [SNDK_LINK_FAILED] = "failed",
};
static const unsigned conn_link_moves[SNDK_LINK_COUNT] = {
    [SNDK_LINK_NONE] = BIT(SNDK_LINK_ATTACHED) | BIT(SNDK_LINK_FAIL_DUE),
    [SNDK_LINK_ATTACHED] = BIT(SNDK_LINK_NONE), /* the attach failed */
    [SNDK_LINK_FAIL_DUE] = BIT(SNDK_LINK_FAILED),
    [SNDK_LINK_FAILED] = 0,
};
_Static_assert(SNDK_LINK_COUNT == SNDK_CONN_LINK_PHASES, "connector.h's count of link phases");

const char *sndk_conn_req_name(unsigned s)
{
    return s < SNDK_REQ_COUNT ? conn_req_names[s] : "?";
}

const char *sndk_conn_event_name(unsigned s)
{
    return s < SNDK_EV_COUNT ? conn_event_names[s] : "?";
}

const char *sndk_conn_link_name(unsigned s)
{
    return s < SNDK_LINK_COUNT ? conn_link_names[s] : "?";
}

/* The RTR this provider sends and accepts: a zero-length RDMA Write (STag 1, TO 0, as siw). Its
 * FPDU has a fixed size (MPA length, tagged DDP header, no pad, CRC field), which is what lets
 * the passive side read exactly it and not one byte of the Send that may follow at once. */
#define RTR_STAG 1u
#define RTR_FPDU_LEN (SNDK_MPA_LEN_SIZE + SNDK_DDP_TAGGED_HDR_LEN + SNDK_MPA_CRC_SIZE)
/* A zero-length RDMA Read Request as RTR (Linux cxgb4's default, p2p_type=1): 46-byte ULPDU,
 * no pad, CRC field. */
#define RTR_READ_FPDU_LEN (SNDK_MPA_LEN_SIZE + SNDK_READ_REQ_ULPDU_LEN + SNDK_MPA_CRC_SIZE)
/* How many other ports NdkConnect draws when the kernel refuses a drawn port's 4-tuple. */
#define CONNECT_PORT_TRIES 16u
_Static_assert((SNDK_MPA_LEN_SIZE + SNDK_DDP_TAGGED_HDR_LEN) % 4 == 0, "an RTR FPDU has no pad");
/* The first FPDU after the Reply is read in pieces of at most this many bytes, never past its
 * own end. */
#define RTR_CHUNK 64
_Static_assert(RTR_CHUNK >= RTR_READ_FPDU_LEN, "chunk size");

/* Under c->lock, all of it. A pending timer, a queued work item and a watched source each hold
 * a reference on c; the engine's own state records which (engine.h, "References";
 * sndk_source_watched), so no flag here repeats it. */
struct sndk_connector {
    struct sndk_obj base;
    struct sndk_mutex lock;
    enum sndk_conn_state state;
    enum sndk_conn_req request;
    enum sndk_conn_event ev;
    enum sndk_conn_link link;
    bool active;
    bool peer_rejected; /* the peer's MPA Reply said R=1; its private data is kept */

    /* the handshake socket (until the QP takes it): TCP, or AF_UNIX when the peer was met on
     * this host (core/rendezvous.h) */
    int fd;
    int tcp_hold; /* active, same host: the bound TCP socket that keeps our port ours */
    unsigned thread;           /* the socket's progress thread, once watched: deliveries run
                                  there, one at a time */
    struct sndk_source src;    /* holds a reference while watched (until src_done runs) */
    struct sndk_work src_done; /* source out of epoll: establish or close */
    struct sndk_timer timer;   /* handshake timeout; holds a reference while pending */
    uint8_t tx[SNDK_MPA_FRAME_MAX];
    size_t tx_len, tx_off;
    struct sndk_mpa_rx mpa;    /* the peer's Request or Reply */
    struct sndk_rx rtr_rx;     /* validates the first FPDU after the Reply (passive, RTR) */
    uint8_t rtr_buf[RTR_CHUNK]; /* bytes of it received and not yet given to rtr_rx */
    size_t rtr_held;
    size_t rtr_got;      /* bytes of the first FPDU received */
    size_t rtr_fpdu_len; /* its length, once its MPA length field is in (0 before) */
    bool rtr_seen;
    uint8_t rtr_kind;          /* SNDK_MPA_RTR_WRITE or _READ: what the handshake chose */
    struct sndk_read_req rtr_rr; /* a Read RTR: answered with a zero-length Read Response */

    /* what the handshake settled */
    struct sndk_mpa_params req; /* active: the Request we sent */
    struct sndk_mpa_result res;
    uint8_t peer_pd[SNDK_MPA_PD_MAX_RFC];
    uint16_t peer_pd_len;
    bool crc, p2p;
    uint8_t rev;
    uint32_t ird, ord;
    uint32_t want_ird, want_ord;

    struct sndk_addr local, peer;
    bool have_addresses;
    struct sndk_endpoint *ep;
    bool se_peer; /* peer registered on a shared endpoint */
    const struct sndk_conn_origin *origin; /* passive: its listener's (connector.h) */
    struct sndk_adm_entry adm; /* passive, while waiting for the Request (admission.h) */
    struct sndk_qp *qp;
    struct sndk_conn_rec *rec; /* counters, ndkstat, pcap (NULL when out of memory) */

    /* the one outstanding request (c->request), and deliveries to the consumer */
    NDK_FN_REQUEST_COMPLETION req_cb; /* the outstanding request's */
    void *req_ctx;
    NDK_FN_REQUEST_COMPLETION done_cb; /* the completion queued (req done or done-active) */
    void *done_ctx;
    NTSTATUS done_status;
    ULONG disc_reason;
    NDK_FN_DISCONNECT_EVENT_CALLBACK disc_cb;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX disc_cb_ex;
    void *disc_ctx;
    struct sndk_work deliver; /* holds a reference while queued */
    struct sndk_work detach_done;
};

static struct sndk_connector *connector_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeConnector);
    return o ? sndk_container_of(o, struct sndk_connector, base) : NULL;
}

static struct sndk_engine *engine_of(struct sndk_connector *c)
{
    return c->base.adapter->engine;
}

static struct sndk_adapter_ctrs *ctrs_of(struct sndk_connector *c)
{
    return &c->base.adapter->ctrs;
}

/* Every line below that a peer can make us write (a handshake it breaks off, a bad frame, a
 * connection it aborts) goes through the per-site limit of util/log.h. */
#define peer_log(c) sndk_ctr_log_suppressed(ctrs_of(c))

static bool state_is_up(enum sndk_conn_state s)
{
    return s == SNDK_CONN_CONNECTED || s == SNDK_CONN_DISCONNECTING;
}

/* A passive connector delivered to the consumer and not answered yet (the peer may have left
 * meanwhile): what IncomingUnanswered counts. */
static bool awaits_answer(const struct sndk_connector *c, enum sndk_conn_state s)
{
    return s == SNDK_CONN_INCOMING || (s == SNDK_CONN_ABANDONED && !c->active);
}

/* The listener's door counts what waits for a Request and what waits for the consumer
 * (admission.h); c->lock held. */
static void door_transition(struct sndk_connector *c, enum sndk_conn_state next)
{
    sndk_assert_held(&c->lock);
    if (c->state == next)
        return;
    if (c->state == SNDK_CONN_WAIT_REQUEST && c->origin)
        sndk_admission_leave(c->origin->adm, &c->adm);
    bool was = awaits_answer(c, c->state), now = awaits_answer(c, next);
    if (now && !was)
        atomic_fetch_add_explicit(&ctrs_of(c)->incoming, 1, memory_order_relaxed);
    else if (was && !now)
        atomic_fetch_sub_explicit(&ctrs_of(c)->incoming, 1, memory_order_relaxed);
}

/* One function per source state: may the connector go to `next` from here? Modelled on the
 * QP's machine (qp.c). CLOSED is final; every state may fail or be closed into it. */
static bool conn_from_idle(enum sndk_conn_state next)
{
    return next == SNDK_CONN_CONNECTING      /* NdkConnect */
           || next == SNDK_CONN_WAIT_REQUEST /* a listener's new connector */
           || next == SNDK_CONN_CLOSED;
}
static bool conn_from_connecting(enum sndk_conn_state next)
{
    return next == SNDK_CONN_REQ_SENT || next == SNDK_CONN_CLOSED;
}
static bool conn_from_req_sent(enum sndk_conn_state next)
{
    return next == SNDK_CONN_REPLIED || next == SNDK_CONN_CLOSED;
}
static bool conn_from_replied(enum sndk_conn_state next)
{
    return next == SNDK_CONN_ESTABLISHING /* NdkCompleteConnect */
           || next == SNDK_CONN_ABANDONED /* the peer left */ || next == SNDK_CONN_CLOSED;
}
static bool conn_from_wait_request(enum sndk_conn_state next)
{
    return next == SNDK_CONN_INCOMING || next == SNDK_CONN_CLOSED;
}
static bool conn_from_incoming(enum sndk_conn_state next)
{
    return next == SNDK_CONN_ACCEPTING /* NdkAccept */
           || next == SNDK_CONN_ABANDONED /* the peer left */ || next == SNDK_CONN_CLOSED;
}
static bool conn_from_abandoned(enum sndk_conn_state next)
{
    return next == SNDK_CONN_CLOSED; /* the consumer's answer, or close */
}
static bool conn_from_accepting(enum sndk_conn_state next)
{
    return next == SNDK_CONN_ESTABLISHING /* RTR read, or Reply out */ || next == SNDK_CONN_CLOSED;
}
static bool conn_from_establishing(enum sndk_conn_state next)
{
    return next == SNDK_CONN_CONNECTED || next == SNDK_CONN_CLOSED;
}
static bool conn_from_connected(enum sndk_conn_state next)
{
    return next == SNDK_CONN_DISCONNECTING || next == SNDK_CONN_CLOSED;
}
static bool conn_from_disconnecting(enum sndk_conn_state next)
{
    return next == SNDK_CONN_CLOSED;
}
static bool conn_from_closed(enum sndk_conn_state next)
{
    (void)next;
    return false;
}

static bool (*const conn_transitions[SNDK_CONN_STATE_COUNT])(enum sndk_conn_state) = {
    [SNDK_CONN_IDLE] = conn_from_idle,
    [SNDK_CONN_CONNECTING] = conn_from_connecting,
    [SNDK_CONN_REQ_SENT] = conn_from_req_sent,
    [SNDK_CONN_REPLIED] = conn_from_replied,
    [SNDK_CONN_WAIT_REQUEST] = conn_from_wait_request,
    [SNDK_CONN_INCOMING] = conn_from_incoming,
    [SNDK_CONN_ABANDONED] = conn_from_abandoned,
    [SNDK_CONN_ACCEPTING] = conn_from_accepting,
    [SNDK_CONN_ESTABLISHING] = conn_from_establishing,
    [SNDK_CONN_CONNECTED] = conn_from_connected,
    [SNDK_CONN_DISCONNECTING] = conn_from_disconnecting,
    [SNDK_CONN_CLOSED] = conn_from_closed,
};

/* Move to `next` if the current state allows it; c->lock held. CLOSED -> CLOSED (a failure or
 * close that finds the connector closed already) is refused quietly; any other refused move is
 * a bug in the caller: logged, and an assertion fails. */
static bool set_state_why(struct sndk_connector *c, enum sndk_conn_state next, const char *why)
{
    sndk_assert_held(&c->lock);
    enum sndk_conn_state cur = c->state;
    if (!conn_transitions[cur](next)) {
        if (cur != SNDK_CONN_CLOSED || next != SNDK_CONN_CLOSED) {
            sndk_err("connector", "%p: refused %s => %s (%s)", (void *)c, conn_state_names[cur],
                     conn_state_names[next], why);
            assert(!"illegal connector transition");
        }
        return false;
    }
    sndk_debug("connector", "%p: %s => %s (%s)", (void *)c, conn_state_names[cur],
               conn_state_names[next], why);
    SNDK_TRACE("connector.state", "connector", c,
               "\"from\":\"%s\",\"to\":\"%s\",\"why\":\"%s\",\"conn\":%llu", conn_state_names[cur],
               conn_state_names[next], why, (unsigned long long)(c->rec ? c->rec->id : 0));
    door_transition(c, next);
    bool was_up = state_is_up(cur), up = state_is_up(next);
    if (!was_up && up) {
        sndk_ctr_inc(ctrs_of(c), c->active ? SNDK_CTR_CONNECT : SNDK_CTR_ACCEPT);
        sndk_counters_active(ctrs_of(c), 1);
    } else if (was_up && !up) {
        sndk_counters_active(ctrs_of(c), -1);
    }
    c->state = next;
    if (c->rec)
        atomic_store_explicit(&c->rec->state, (int)next, memory_order_relaxed);
    return true;
}
/* The common case: the reason is the function that decided it. */
#define set_state(c, next) set_state_why((c), (next), __func__)

/* A move of one of the side machines (req, ev, link): legal when moves[from] has the bit of
 * `to`; logged. A refused move is a bug in the caller: logged, and an assertion fails. */
static bool side_move_locked(struct sndk_connector *c, const char *what, const char *const names[],
                             const unsigned moves[], unsigned from, unsigned to, const char *why)
{
    sndk_assert_held(&c->lock);
    if (!(moves[from] & BIT(to))) {
        sndk_err("connector", "%p: refused %s %s => %s (%s)", (void *)c, what, names[from],
                 names[to], why);
        assert(!"illegal connector transition");
        return false;
    }
    sndk_debug("connector", "%p: %s %s => %s (%s)", (void *)c, what, names[from], names[to], why);
    return true;
}

static void set_req_why(struct sndk_connector *c, enum sndk_conn_req to, const char *why)
{
    if (side_move_locked(c, "request", conn_req_names, conn_req_moves, c->request, to, why))
        c->request = to;
}

static void set_ev_why(struct sndk_connector *c, enum sndk_conn_event to, const char *why)
{
    if (side_move_locked(c, "events", conn_event_names, conn_event_moves, c->ev, to, why))
        c->ev = to;
}

static void set_link_why(struct sndk_connector *c, enum sndk_conn_link to, const char *why)
{
    if (side_move_locked(c, "link", conn_link_names, conn_link_moves, c->link, to, why))
        c->link = to;
}
#define set_req(c, to)  set_req_why((c), (to), __func__)
#define set_ev(c, to)   set_ev_why((c), (to), __func__)
#define set_link(c, to) set_link_why((c), (to), __func__)

/* A request outstanding (what NdkConnect, NdkCompleteConnect, NdkAccept and NdkDisconnect wait
 * for to start, and close cancels). */
static bool req_outstanding(const struct sndk_connector *c)
{
    return c->request == SNDK_REQ_ACTIVE || c->request == SNDK_REQ_DONE_ACTIVE;
}

/* NdkDisconnect or close: no disconnect event from now on (one already queued is delivered). */
static void silence_events_locked(struct sndk_connector *c, const char *why)
{
    sndk_assert_held(&c->lock);
    if (c->ev == SNDK_EV_NONE)
        set_ev_why(c, SNDK_EV_SILENT, why);
}

/* Handshake bytes (MPA Request / Reply) written or read on the connector's socket. */
static void hs_bytes(struct sndk_connector *c, bool out, const void *buf, size_t n)
{
    if (!c->rec || n == 0)
        return;
    sndk_cc_add(c->rec, out ? SNDK_CC_HS_TX : SNDK_CC_HS_RX, n);
    sndk_pcap_buf(c->rec->pcap, out, buf, n);
}

/* ------------------------------------------------------------------------------------------ */
/* Deliveries: request completion, connect event, disconnect event — one work item, so they
 * never overlap, and always outside c->lock. */

/* Queue the delivery work, pinned to the connector's thread so that two runs never overlap (a
 * run that queues it again is followed by the next, on the same thread). Queued means one
 * reference, dropped by deliver_fn: the engine says whether this call queued it. */
static void schedule_locked(struct sndk_connector *c)
{
    sndk_assert_held(&c->lock);
    if (sndk_engine_queue_on(engine_of(c), c->thread, &c->deliver))
        sndk_obj_get(&c->base); /* deliver_fn takes c->lock before it drops it */
}

/* The one request a connector has outstanding at a time; complete_locked queues its
 * completion. */
static void start_request_locked(struct sndk_connector *c, NDK_FN_REQUEST_COMPLETION cb,
                                 void *ctx)
{
    sndk_assert_held(&c->lock);
    set_req(c, c->request == SNDK_REQ_DONE ? SNDK_REQ_DONE_ACTIVE : SNDK_REQ_ACTIVE);
    c->req_cb = cb;
    c->req_ctx = ctx;
}

/* The callback CompleteConnect(Ex) or Accept(Ex) registered (one of the two kinds). */
static void set_disconnect_event_locked(struct sndk_connector *c,
                                        NDK_FN_DISCONNECT_EVENT_CALLBACK ev,
                                        NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev_ex, void *ctx)
{
    sndk_assert_held(&c->lock);
    c->disc_cb = ev;
    c->disc_cb_ex = ev_ex;
    c->disc_ctx = ctx;
}

static void complete_locked(struct sndk_connector *c, NTSTATUS st)
{
    sndk_assert_held(&c->lock);
    if (!req_outstanding(c))
        return;
    if (c->request == SNDK_REQ_DONE_ACTIVE)
        sndk_warn("connector",
                  "%p: a request completed before the last completion was "
                  "delivered: that one is lost",
                  (void *)c);
    set_req(c, SNDK_REQ_DONE);
    c->done_cb = c->req_cb;
    c->done_ctx = c->req_ctx;
    c->done_status = st;
    c->req_cb = NULL;
    schedule_locked(c);
}

static void disconnect_event_locked(struct sndk_connector *c, ULONG reason)
{
    sndk_assert_held(&c->lock);
    if (c->ev != SNDK_EV_NONE || sndk_obj_closing(&c->base))
        return;
    if (!c->disc_cb && !c->disc_cb_ex) {
        set_ev(c, SNDK_EV_DISC_FIRED); /* nobody to tell: it never fires again either */
        return;
    }
    set_ev(c, SNDK_EV_DISC_DUE);
    c->disc_reason = reason;
    schedule_locked(c);
}

static void reject_incoming(struct sndk_connector *c);
static void send_reject_locked(struct sndk_connector *c, const void *pd, uint16_t pdlen);

static void deliver_fn(struct sndk_work *w)
{
    struct sndk_connector *c = sndk_container_of(w, struct sndk_connector, deliver);
    sndk_mutex_lock(&c->lock);
    for (;;) {
        if (c->link == SNDK_LINK_FAIL_DUE) {
            /* Before the NdkAccept completion: the flushed receives are on the CQ by then. */
            set_link_why(c, SNDK_LINK_FAILED, "the failed NdkAccept's QP in error");
            struct sndk_qp *qp = c->qp; /* held by c (sndk_obj_hold) */
            sndk_mutex_unlock(&c->lock);
            sndk_qp_connect_failed(qp);
            sndk_mutex_lock(&c->lock);
            continue;
        }
        if (c->request == SNDK_REQ_DONE || c->request == SNDK_REQ_DONE_ACTIVE) {
            NDK_FN_REQUEST_COMPLETION cb = c->done_cb;
            void *ctx = c->done_ctx;
            NTSTATUS st = c->done_status;
            set_req_why(c, c->request == SNDK_REQ_DONE ? SNDK_REQ_NONE : SNDK_REQ_ACTIVE,
                        "completion delivered");
            c->done_cb = NULL;
            sndk_mutex_unlock(&c->lock);
            if (cb)
                SNDK_CALLBACK(&c->base, SNDK_CB_REQUEST_COMPLETION, ctx, cb(ctx, st));
            sndk_mutex_lock(&c->lock);
            continue;
        }
        if (c->ev == SNDK_EV_CONNECT_DUE) {
            set_ev_why(c, SNDK_EV_NONE, "connect event delivered");
            const struct sndk_conn_origin *o = c->origin;
            sndk_mutex_unlock(&c->lock);
            /* Delivered, the consumer owns the connector (it must close it). */
            if (!o->connect_event(o->owner, &c->base))
                reject_incoming(c);
            sndk_mutex_lock(&c->lock);
            continue;
        }
        if (c->ev == SNDK_EV_DISC_DUE) {
            set_ev_why(c, SNDK_EV_DISC_FIRED, "disconnect event delivered");
            NDK_FN_DISCONNECT_EVENT_CALLBACK cb = c->disc_cb;
            NDK_FN_DISCONNECT_EVENT_CALLBACK_EX cb_ex = c->disc_cb_ex;
            void *ctx = c->disc_ctx;
            ULONG reason = c->disc_reason;
            bool closing = sndk_obj_closing(&c->base);
            sndk_mutex_unlock(&c->lock);
            if (!closing && (cb_ex || cb))
                SNDK_CALLBACK(&c->base, SNDK_CB_DISCONNECT_EVENT, ctx,
                              cb_ex ? cb_ex(ctx, reason) : cb(ctx));
            sndk_mutex_lock(&c->lock);
            continue;
        }
        break;
    }
    sndk_mutex_unlock(&c->lock);
    sndk_obj_put(&c->base); /* the queued work's */
}

/* ------------------------------------------------------------------------------------------ */
/* Handshake socket plumbing */

/* The active side's socket errors, connect() and MPA Request/Reply I/O alike. */
static NTSTATUS status_from_errno(int err)
{
    return sndk_status_from_errno(SNDK_CALL_CONNECT, err);
}

/* The timer's reference: taken by an arm that found it not pending, dropped by on_timeout or
 * by a cancel that found it pending (engine.h, "References"). */
static void timer_stop_locked(struct sndk_connector *c)
{
    sndk_assert_held(&c->lock);
    if (sndk_timer_cancel(&c->timer)) /* the open reference or a request keeps c alive: */
        atomic_fetch_sub_explicit(&c->base.refs, 1, memory_order_acq_rel); /* never the last */
}

static void timer_start_locked(struct sndk_connector *c)
{
    sndk_assert_held(&c->lock);
    /* An incoming connection has a shorter time to deliver its Request (admission.h). */
    const struct sndk_config *cfg = &c->base.adapter->cfg;
    unsigned ms =
        c->state == SNDK_CONN_WAIT_REQUEST ? cfg->request_timeout_ms : cfg->connect_timeout_ms;
    if (sndk_timer_arm(engine_of(c), &c->timer, (uint64_t)ms * 1000u))
        sndk_obj_get(&c->base); /* on_timeout takes c->lock before it drops it */
}

/* Take the socket out of epoll; src_done then closes it, or hands it to the QP when the
 * state is ESTABLISHING. */
static void io_stop_locked(struct sndk_connector *c)
{
    sndk_assert_held(&c->lock);
    if (sndk_source_watched(&c->src)) {
        sndk_source_remove(&c->src, &c->src_done);
    } else if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* The handshake failed or was abandoned: close everything, complete the request. */
static void fail_locked(struct sndk_connector *c, NTSTATUS st, const char *why)
{
    sndk_assert_held(&c->lock);
    char buf[64];
    sndk_info_peer(peer_log(c), "connector", "%p (%s, peer %s): %s: %s", (void *)c,
                   conn_state_names[c->state],
                   c->have_addresses ? sndk_addr_str(&c->peer, buf, sizeof buf) : "?", why,
                   SoftNdkStatusName(st));
    SNDK_TRACE("connector.failed", "connector", c, "\"state\":\"%s\",\"why\":\"%s\",\"status\":\"%s\"",
               conn_state_names[c->state], why, SoftNdkStatusName(st));
    if (!state_is_up(c->state) && c->state != SNDK_CONN_CLOSED)
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECT_FAILURE);
    timer_stop_locked(c);
    set_state_why(c, SNDK_CONN_CLOSED, why);
    io_stop_locked(c);
    if (c->qp && c->link != SNDK_LINK_ATTACHED) {
        sndk_obj_unbind(&c->qp->base, c);
        if (!c->active && req_outstanding(c))         /* a failed NdkAccept: its QP is done */
            set_link_why(c, SNDK_LINK_FAIL_DUE, why); /* (docs/connector.md) */
    }
    complete_locked(c, st);
}

/* Write what is left of c->tx. 1 = all out, 0 = would block, -errno. */
static int flush_tx(struct sndk_connector *c)
{
    while (c->tx_off < c->tx_len) {
        ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off, MSG_NOSIGNAL);
        if (n > 0) {
            hs_bytes(c, true, c->tx + c->tx_off, (size_t)n);
            c->tx_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return n < 0 ? -errno : -EPIPE;
    }
    return 1;
}

/* Read the MPA frame in exact pieces. 1 = complete, 0 = need more, -1 = failed (c->mpa.status
 * or the socket error in *err). */
static int read_mpa(struct sndk_connector *c, int *err)
{
    for (;;) {
        struct iovec iov;
        if (sndk_mpa_rx_want(&c->mpa, &iov) <= 0)
            return c->mpa.state == SNDK_MPA_RX_DONE ? 1 : -1;
        ssize_t n = recv(c->fd, iov.iov_base, iov.iov_len, 0);
        if (n == 0) {
            *err = 0;
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            *err = errno;
            return -1;
        }
        hs_bytes(c, false, iov.iov_base, (size_t)n);
        int rc = sndk_mpa_rx_advance(&c->mpa, (size_t)n);
        if (rc == 1)
            return 1;
        if (rc < 0) {
            *err = EPROTO;
            return -1;
        }
    }
}

/* Tell the peer why the connection ends with a Terminate built from the fault, before the
 * close (best effort: one small frame on a socket nothing else was written to since the MPA
 * frame). The first Terminate of a stream carries MSN 1. */
static void send_fault_terminate(struct sndk_connector *c, const struct sndk_wire_fault *fault,
                                 bool crc)
{
    if (fault->err == SNDK_WERR_NONE || c->fd < 0)
        return;
    struct sndk_term t;
    sndk_term_from_fault(&t, fault);
    struct sndk_fpdu f;
    struct iovec iov[4];
    int n = sndk_fpdu_terminate(&f, 1, &t, crc, iov, 4);
    if (n <= 0)
        return;
    uint8_t buf[128];
    size_t len = sndk_iov_gather(iov, n, buf, sizeof buf);
    ssize_t w = send(c->fd, buf, len, MSG_NOSIGNAL);
    if (w > 0) {
        sndk_counters_term(ctrs_of(c), true, t.layer, t.etype, t.code);
        if (c->rec) {
            sndk_cc_add(c->rec, SNDK_CC_TX_OCTETS, (uint64_t)w);
            sndk_cc_add(c->rec, SNDK_CC_TX_FPDUS, (size_t)w == len ? 1 : 0);
            sndk_pcap_buf(c->rec->pcap, true, buf, (size_t)w);
        }
        SNDK_TRACE("term.sent", "connector", c, "\"layer\":%u,\"etype\":%u,\"code\":%u",
                   (unsigned)t.layer, (unsigned)t.etype, (unsigned)t.code);
    }
    /* FIN after the Terminate; what the peer sent beyond the bytes we read is dropped first,
     * so that the close does not turn into a reset that could discard the Terminate. */
    shutdown(c->fd, SHUT_WR);
    uint8_t sink[256];
    for (int i = 0; i < 64 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
}

/* RFC 6581: an Initiator that cannot accept a Reply says why with an LLP Terminate before it
 * closes. */
static void send_llp_terminate(struct sndk_connector *c, enum sndk_wire_err werr)
{
    struct sndk_wire_fault fault = {.err = werr};
    send_fault_terminate(c, &fault, c->req.crc);
}

/* Whether this connection asks for CRC. Over the same-host transport only when asked for by
 * name (Crc, SOFTNDK_CRC): its bytes cross no wire, so the CRC would guard against nothing a
 * local peer could not forge anyway, and it cost a sixth of the CPU of a 1 MiB stream
 * (docs/decisions.md). A peer that asks still gets it: the MPA rule is "either end". */
static bool asks_crc(const struct sndk_connector *c, const struct sndk_config *cfg)
{
    if (!cfg->crc || cfg->crc_explicit)
        return cfg->crc;
    return c->fd < 0 || !sndk_rdv_is_unix(c->fd);
}

static struct sndk_mpa_policy policy_of(struct sndk_connector *c)
{
    const struct sndk_config *cfg = &c->base.adapter->cfg;
    struct sndk_mpa_policy p = {
        .rev = (uint8_t)cfg->mpa_revision,
        .crc = asks_crc(c, cfg),
        .ird = (uint16_t)c->want_ird,
        .ord = (uint16_t)c->want_ord,
        .p2p = true,
        /* As Initiator we send a zero-length Write (what siw and cxgb4 pick when offered); as
         * Responder we also take a zero-length Read, which cxgb4 offers alone by default. */
        .rtr = c->active ? SNDK_MPA_RTR_WRITE : (uint8_t)(SNDK_MPA_RTR_WRITE | SNDK_MPA_RTR_READ),
    };
    return p;
}

static void keep_result(struct sndk_connector *c, const struct sndk_mpa_result *res)
{
    c->res = *res;
    c->rev = res->rev;
    c->crc = res->crc;
    c->p2p = res->p2p && res->rtr != SNDK_MPA_RTR_NONE;
    c->rtr_kind = res->rtr;
    /* [CONN-7]: effective IRD = min(own IRD, peer's ORD), ORD = min(own ORD, peer's IRD).
     * Without RFC 6581's word nothing is known of the peer's limits: keep ours (NDSPI). */
    c->ird = c->want_ird;
    c->ord = c->want_ord;
    if (res->enhanced) {
        if (res->peer_ord < c->ird)
            c->ird = res->peer_ord;
        if (res->peer_ird < c->ord)
            c->ord = res->peer_ird;
    }
    c->peer_pd_len = res->peer_pd_len;
    if (res->peer_pd_len)
        memcpy(c->peer_pd, res->peer_pd, res->peer_pd_len);
}

/* ------------------------------------------------------------------------------------------ */
/* Link events from the QP data path (link.h) */

static void link_peer_closed(void *ctx)
{
    struct sndk_connector *c = ctx;
    sndk_mutex_lock(&c->lock);
    SNDK_TRACE("connector.peer_closed", "connector", c, NULL);
    disconnect_event_locked(c, 0);
    sndk_mutex_unlock(&c->lock);
}

static void link_aborted(void *ctx, NTSTATUS status, ULONG reason)
{
    struct sndk_connector *c = ctx;
    sndk_mutex_lock(&c->lock);
    sndk_info_peer(peer_log(c), "connector", "%p: connection aborted: %s (reason %u)", (void *)c,
                   SoftNdkStatusName(status), reason);
    SNDK_TRACE("connector.aborted", "connector", c, "\"status\":\"%s\",\"reason\":\"0x%08x\"",
               SoftNdkStatusName(status), reason);
    if (SNDK_LINK_REASON_CLASS(reason) != SNDK_LINK_REASON_LOCAL && c->state != SNDK_CONN_CLOSED)
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECTION_ERROR);
    if (c->state == SNDK_CONN_DISCONNECTING)
        complete_locked(c, status);
    if (c->state != SNDK_CONN_CLOSED)
        set_state(c, SNDK_CONN_CLOSED);
    /* The consumer's own flush or QP close is not a disconnect it needs telling about ([CB-4]). */
    if (SNDK_LINK_REASON_CLASS(reason) != SNDK_LINK_REASON_LOCAL)
        disconnect_event_locked(c, reason);
    sndk_mutex_unlock(&c->lock);
}

static void link_shutdown_done(void *ctx, NTSTATUS status)
{
    struct sndk_connector *c = ctx;
    sndk_mutex_lock(&c->lock);
    if (c->state == SNDK_CONN_DISCONNECTING)
        set_state(c, SNDK_CONN_CLOSED);
    complete_locked(c, status);
    sndk_mutex_unlock(&c->lock);
}

static const struct sndk_link_events link_events = {
    .peer_closed = link_peer_closed,
    .aborted = link_aborted,
    .shutdown_done = link_shutdown_done,
};

static void detach_done_fn(struct sndk_work *w)
{
    struct sndk_connector *c = sndk_container_of(w, struct sndk_connector, detach_done);
    sndk_obj_unbind(&c->qp->base, c);
    sndk_obj_put(&c->base); /* the link's reference */
}

/* ------------------------------------------------------------------------------------------ */
/* Establishing: the socket is out of epoll; send the RTR (active, peer-to-peer) and give the
 * socket to the QP. Runs on the socket's progress thread. */

/* One zero-length FPDU of the RTR exchange (the Write RTR, or the answer to a Read RTR) on the
 * handshake socket, counted as the connection's. Nothing else was written on the socket since
 * the MPA frame: 20-odd bytes fit. */
static bool send_empty_fpdu(struct sndk_connector *c, const struct sndk_seg_hdr *h)
{
    struct sndk_fpdu f;
    struct iovec iov[4];
    int n = sndk_fpdu_build(&f, h, NULL, 0, NULL, 0, c->crc, iov, 4);
    if (n < 0)
        return false;
    uint8_t buf[64];
    size_t len = sndk_iov_gather(iov, n, buf, sizeof buf);
    ssize_t w = send(c->fd, buf, len, MSG_NOSIGNAL);
    if (w == (ssize_t)len && c->rec) {
        sndk_cc_add(c->rec, SNDK_CC_TX_OCTETS, len);
        sndk_cc_add(c->rec, SNDK_CC_TX_FPDUS, 1);
        sndk_pcap_buf(c->rec->pcap, true, buf, len);
    }
    return w == (ssize_t)len;
}

static bool send_rtr(struct sndk_connector *c)
{
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_WRITE, .last = true, .stag = RTR_STAG, .to = 0};
    if (!send_empty_fpdu(c, &h))
        return false;
    SNDK_TRACE("mpa.rtr_sent", "connector", c, "\"kind\":\"write\"");
    return true;
}

/* A peer that vanishes without FIN or RST (link cut, black hole, power loss) must still end the
 * connection within a bound: keep-alive probes an idle connection, TCP_USER_TIMEOUT bounds how
 * long sent data may stay unacknowledged (and, on Linux, how long keep-alive probes go
 * unanswered). The socket then fails with ETIMEDOUT, the QP aborts, every request completes
 * and the disconnect event fires. */
static void set_peer_timeout(int fd, unsigned timeout_ms)
{
    int on = 1;
    int idle = (int)(timeout_ms / 3000u), intvl = (int)(timeout_ms / 9000u), cnt = 3;
    unsigned user = timeout_ms;
    if (idle < 1)
        idle = 1;
    if (intvl < 1)
        intvl = 1;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user);
}

static void establish(struct sndk_connector *c)
{
    sndk_assert_held(&c->lock); /* on entry and exit */
    if (c->active && c->p2p && !send_rtr(c)) {
        fail_locked(c, STATUS_CONNECTION_ABORTED, "cannot send the RTR");
        return;
    }
    /* A peer of this host (rendezvous.h): the byte stream is shared memory, set up over the
     * AF_UNIX socket the handshake used; it then owns that socket. */
    void *shm = NULL;
    if (sndk_rdv_is_unix(c->fd)) {
        shm = sndk_stream_shm_new(c->fd, c->active);
        if (!shm) {
            fail_locked(c, STATUS_INSUFFICIENT_RESOURCES, "cannot set up the shared rings");
            return;
        }
    } else {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        set_peer_timeout(c->fd, c->base.adapter->cfg.peer_timeout_ms);
    }
    struct sndk_link_params p = {
        .fd = shm ? sndk_stream_shm_fd(shm) : c->fd,
        .stream_ops = shm ? &sndk_stream_shm_ops : NULL,
        .stream_priv = shm,
        .thread = sndk_source_thread(&c->src),
        .crc = c->crc,
        .mpa_rev = c->rev,
        .active = c->active,
        .rx_read_msn = c->p2p && !c->active && c->rtr_kind == SNDK_MPA_RTR_READ ? 2u : 1u,
        .await_initiator = !c->active && !c->p2p,
        .ird = c->ird,
        .ord = c->ord,
        .rec = c->rec,
    };
    if (c->rec) {
        atomic_store(&c->rec->ird, c->ird);
        atomic_store(&c->rec->ord, c->ord);
        atomic_store(&c->rec->crc, c->crc);
        atomic_store(&c->rec->mpa_rev, c->rev);
        atomic_store(&c->rec->sq_depth, c->qp->initiator_depth);
        atomic_store(&c->rec->qp, c->qp);
        atomic_store(&c->rec->transport, shm ? sndk_stream_shm_ops.name : "tcp");
        if (shm) {
            atomic_store(&c->rec->same_host, true);
            sndk_ctr_inc(ctrs_of(c), SNDK_CTR_SAME_HOST);
        }
    }
    set_link(c, SNDK_LINK_ATTACHED);
    sndk_obj_get(&c->base); /* the link's reference, dropped in detach_done_fn */
    sndk_mutex_unlock(&c->lock);
    int rc = sndk_qp_attach(c->qp, &p, &link_events, c);
    sndk_mutex_lock(&c->lock);
    if (rc != 0) {
        if (shm) { /* never attached: the rings and the socket are still ours to close */
            sndk_stream_shm_free(shm);
            c->fd = -1;
        }
        set_link_why(c, SNDK_LINK_NONE, "QP attach failed");
        atomic_fetch_sub_explicit(&c->base.refs, 1, memory_order_acq_rel);
        fail_locked(c, sndk_status_from_errno(SNDK_CALL_QP_ATTACH, -rc), "QP attach failed");
        return;
    }
    c->fd = -1; /* the QP's now */
    if (c->state == SNDK_CONN_ESTABLISHING) {
        set_state(c, SNDK_CONN_CONNECTED);
        char a[64], b[64];
        sndk_info_peer(peer_log(c), "connector",
                       "%p connected %s <-> %s (%s, MPA rev %u, CRC %s, IRD %u, ORD %u%s)",
                       (void *)c, sndk_addr_str(&c->local, a, sizeof a),
                       sndk_addr_str(&c->peer, b, sizeof b), shm ? "shm" : "tcp", c->rev,
                       c->crc ? "on" : "off", c->ird, c->ord, c->p2p ? ", RTR" : "");
        complete_locked(c, STATUS_SUCCESS);
    } else {
        /* closed while establishing: the close path could not detach yet */
        sndk_mutex_unlock(&c->lock);
        sndk_qp_detach(c->qp, &c->detach_done);
        sndk_mutex_lock(&c->lock);
    }
}

static void src_done_fn(struct sndk_work *w)
{
    struct sndk_connector *c = sndk_container_of(w, struct sndk_connector, src_done);
    sndk_mutex_lock(&c->lock);
    if (c->state == SNDK_CONN_ESTABLISHING && c->fd >= 0) {
        establish(c);
    } else if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    sndk_mutex_unlock(&c->lock);
    sndk_obj_put(&c->base); /* the source's reference */
}

static void begin_establish_locked(struct sndk_connector *c)
{
    sndk_assert_held(&c->lock);
    timer_stop_locked(c);
    set_state(c, SNDK_CONN_ESTABLISHING);
    sndk_source_remove(&c->src, &c->src_done);
}

/* ------------------------------------------------------------------------------------------ */
/* Socket events, one function per state that waits on the socket */

static void io_connecting(struct sndk_connector *c, uint32_t ev)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == 0 && !(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        return;
    if (err != 0) {
        fail_locked(c, status_from_errno(err), strerror(err));
        return;
    }
    if (c->tcp_hold < 0) { /* TCP: the address the kernel chose (same host: rendezvous.c's) */
        socklen_t llen = sizeof c->local.in6;
        getsockname(c->fd, &c->local.sa, &llen);
        c->local.len = llen;
    }
    sndk_conn_rec_set_local(c->rec, &c->local.sa);
    set_state(c, SNDK_CONN_REQ_SENT);
    SNDK_TRACE("mpa.request_sent", "connector", c, "\"bytes\":%zu", c->tx_len);
    int rc = flush_tx(c);
    if (rc < 0) {
        fail_locked(c, status_from_errno(-rc), "sending the MPA Request");
        return;
    }
    sndk_source_modify(&c->src, rc == 1 ? EPOLLIN : EPOLLIN | EPOLLOUT);
}

static void io_req_sent(struct sndk_connector *c, uint32_t ev)
{
    if (c->tx_off < c->tx_len) {
        int rc = flush_tx(c);
        if (rc < 0) {
            fail_locked(c, status_from_errno(-rc), "sending the MPA Request");
            return;
        }
        if (rc == 1)
            sndk_source_modify(&c->src, EPOLLIN);
    }
    if (!(ev & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        return;
    int err = 0;
    int rc = read_mpa(c, &err);
    if (rc == 0)
        return;
    if (rc < 0) {
        if (c->mpa.state == SNDK_MPA_RX_ERROR) {
            sndk_warn_peer(peer_log(c), "connector", "bad MPA Reply: %s",
                           sndk_mpa_status_name(c->mpa.status));
            send_llp_terminate(c, sndk_mpa_status_werr(c->mpa.status));
            fail_locked(c, STATUS_CONNECTION_ABORTED, "bad MPA Reply");
        } else if (c->mpa.got > 0) {
            /* The peer answered and broke off inside its Reply: not a refusal. */
            fail_locked(c, STATUS_CONNECTION_ABORTED, "MPA Reply cut short");
        } else {
            fail_locked(c, status_from_errno(err), "reading the MPA Reply");
        }
        return;
    }
    struct sndk_mpa_result res;
    int st = sndk_mpa_check_reply(&c->req, sndk_mpa_rx_frame(&c->mpa), &res);
    SNDK_TRACE("mpa.reply_received", "connector", c, "\"check\":%d", st);
    if (st == -SNDK_MPA_E_REJECTED) {
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_MPA_REJECT_RECV);
        keep_result(c, &res); /* the peer's reason, readable with NdkGetConnectionData */
        c->peer_rejected = true;
        fail_locked(c, STATUS_CONNECTION_REFUSED, "rejected by the peer");
        return;
    }
    if (st != 0) {
        sndk_warn_peer(peer_log(c), "connector", "MPA Reply refused: %s", sndk_mpa_status_name(st));
        send_llp_terminate(c, sndk_mpa_status_werr(st));
        fail_locked(c, STATUS_CONNECTION_ABORTED, "MPA Reply refused");
        return;
    }
    keep_result(c, &res);
    timer_stop_locked(c);
    set_state(c, SNDK_CONN_REPLIED);
    /* Until the consumer completes or rejects, only watch for the peer going away; bytes it
     * may send (a peer without RTR) wait in the socket for the QP. */
    sndk_source_modify(&c->src, EPOLLRDHUP | EPOLLONESHOT);
    complete_locked(c, STATUS_SUCCESS);
}

static void io_wait_request(struct sndk_connector *c, uint32_t ev)
{
    (void)ev;
    int err = 0;
    int rc = read_mpa(c, &err);
    if (rc == 0)
        return;
    if (rc < 0) {
        if (c->mpa.state == SNDK_MPA_RX_ERROR) {
            sndk_warn_peer(peer_log(c), "connector", "bad MPA Request: %s",
                           sndk_mpa_status_name(c->mpa.status));
            sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECT_FAILURE);
        }
        SNDK_TRACE("connector.failed", "connector", c, "\"state\":\"%s\",\"why\":\"%s\"",
                   conn_state_names[c->state], "no valid MPA Request");
        timer_stop_locked(c);
        set_state(c, SNDK_CONN_CLOSED);
        io_stop_locked(c);
        /* never delivered: nobody else will close it */
        sndk_mutex_unlock(&c->lock);
        sndk_obj_close(&c->base.pub.Header, NULL, NULL);
        sndk_mutex_lock(&c->lock);
        return;
    }
    /* Refuse at once what we could never accept (markers, no RTR kind we speak). */
    struct sndk_mpa_policy pol = policy_of(c);
    struct sndk_mpa_params reply;
    struct sndk_mpa_result res;
    int st = sndk_mpa_accept(sndk_mpa_rx_frame(&c->mpa), &pol, NULL, 0, &reply, &res);
    if (st != 0) {
        sndk_warn_peer(peer_log(c), "connector", "MPA Request refused: %s",
                       sndk_mpa_status_name(st));
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECT_FAILURE);
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_MPA_REJECT_SENT);
        int len = sndk_mpa_build(c->tx, sizeof c->tx, true, &reply);
        if (len > 0) {
            ssize_t w = send(c->fd, c->tx, (size_t)len, MSG_NOSIGNAL);
            if (w > 0)
                hs_bytes(c, true, c->tx, (size_t)w);
        }
        timer_stop_locked(c);
        set_state(c, SNDK_CONN_CLOSED);
        io_stop_locked(c);
        sndk_mutex_unlock(&c->lock);
        sndk_obj_close(&c->base.pub.Header, NULL, NULL);
        sndk_mutex_lock(&c->lock);
        return;
    }
    if (sndk_fault_mpa_reject(c->base.adapter, c)) {
        static const char why[] = "softndk: injected fault";
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECT_FAILURE);
        timer_stop_locked(c);
        send_reject_locked(c, why, sizeof why - 1); /* closes the connection */
        sndk_mutex_unlock(&c->lock);
        sndk_obj_close(&c->base.pub.Header, NULL, NULL);
        sndk_mutex_lock(&c->lock);
        return;
    }
    const struct sndk_mpa_frame *req = sndk_mpa_rx_frame(&c->mpa);
    c->peer_pd_len = req->ulp_pd_len;
    if (req->ulp_pd_len)
        memcpy(c->peer_pd, req->ulp_pd, req->ulp_pd_len);
    /* What the active side asked for, as our view until Accept settles it. */
    c->ird = req->has_word ? req->ord : 0;
    c->ord = req->has_word ? req->ird : 0;
    SNDK_TRACE("mpa.request_received", "connector", c,
               "\"rev\":%u,\"pd_len\":%u,\"peer\":\"%s\"", (unsigned)req->rev,
               (unsigned)req->ulp_pd_len, c->rec ? c->rec->peer_str : "");
    timer_stop_locked(c);
    set_state(c, SNDK_CONN_INCOMING);
    sndk_source_modify(&c->src, EPOLLRDHUP | EPOLLONESHOT);
    set_ev(c, SNDK_EV_CONNECT_DUE);
    schedule_locked(c);
}

static void io_watch_abandon(struct sndk_connector *c, uint32_t ev)
{
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        sndk_info_peer(peer_log(c), "connector", "%p: peer gave up during connection setup",
                       (void *)c);
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_SETUP_ABANDONED);
        set_state_why(c, SNDK_CONN_ABANDONED, "the peer left before the consumer's answer");
    }
}

/* The first FPDU after the Reply must be the negotiated RTR: a zero-length RDMA Write (L=1), or
 * a zero-length RDMA Read Request. Anything else is answered as the QP would answer it one FPDU
 * later, where that applies (docs/wire.md, "The first FPDU"): a Send or any other message that
 * is not the RTR is an unexpected opcode; payload for a tagged buffer names an STag that cannot
 * be valid (no region is reachable before the QP has the connection); a Read RTR that asks for
 * bytes names an invalid source STag. */
static int rtr_place(void *ctx, const struct sndk_rx_seg *seg, uint32_t off, struct iovec *iov,
                     int max_iov)
{
    (void)ctx, (void)off, (void)iov, (void)max_iov;
    return seg->tagged ? -SNDK_WERR_STAG : -SNDK_WERR_OPCODE;
}

static int rtr_seg_done(void *ctx, const struct sndk_rx_seg *seg)
{
    (void)ctx;
    return seg->last ? 0 : -SNDK_WERR_OPCODE; /* the RTR is one whole message */
}

static int rtr_msg_done(void *ctx, const struct sndk_rx_seg *seg, uint64_t len)
{
    struct sndk_connector *c = ctx;
    if (c->rtr_kind != SNDK_MPA_RTR_WRITE || seg->opcode != SNDK_OP_WRITE || len != 0)
        return -SNDK_WERR_OPCODE;
    c->rtr_seen = true;
    return 0;
}

static int rtr_read_req(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_read_req *rr)
{
    (void)seg;
    struct sndk_connector *c = ctx;
    if (c->rtr_kind != SNDK_MPA_RTR_READ)
        return -SNDK_WERR_OPCODE;
    if (rr->size != 0)
        return -SNDK_WERR_RREQ_STAG;
    /* Zero-length: nothing is read, so its STags are not looked at (siw does the same). */
    c->rtr_rr = *rr;
    c->rtr_seen = true;
    return 0;
}

static void rtr_terminate(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_term *t)
{
    (void)seg;
    struct sndk_connector *c = ctx;
    sndk_counters_term(ctrs_of(c), false, t->layer, t->etype, t->code);
}

static const struct sndk_rx_ops rtr_ops = {.place = rtr_place,
                                           .seg_done = rtr_seg_done,
                                           .msg_done = rtr_msg_done,
                                           .read_req = rtr_read_req,
                                           .terminate = rtr_terminate};

/* A Read RTR is answered before the QP takes over: a zero-length Read Response to its sink. */
static bool answer_read_rtr(struct sndk_connector *c)
{
    struct sndk_seg_hdr h = {.opcode = SNDK_OP_READ_RESP, .last = true,
                             .stag = c->rtr_rr.sink_stag, .to = c->rtr_rr.sink_to};
    return send_empty_fpdu(c, &h);
}

enum rtr_read { RTR_OK, RTR_MORE, RTR_FAULT, RTR_PEER_TERMINATED, RTR_LOST };

/* Give the held bytes of the first FPDU to its parser. */
static enum rtr_read rtr_feed_held(struct sndk_connector *c, struct sndk_wire_fault *fault)
{
    int rc = c->rtr_held ? sndk_rx_feed(&c->rtr_rx, c->rtr_buf, c->rtr_held) : 0;
    c->rtr_held = 0;
    if (rc < 0) {
        const struct sndk_wire_fault *f = sndk_rx_fault(&c->rtr_rx);
        *fault = f ? *f : (struct sndk_wire_fault){.err = SNDK_WERR_LOCAL};
        return RTR_FAULT;
    }
    return rc == SNDK_RX_TERMINATED ? RTR_PEER_TERMINATED : RTR_MORE;
}

/* Read the first FPDU after the Reply with exact lengths: its MPA length field first, then never
 * more than what is left of it, so not one byte of the QP's next FPDU is consumed (the parser's
 * own offer may reach into it). Every byte goes through a parser, so a bad CRC, a header fault,
 * a second MPA Request or Reply (the parser knows its key) or a message that is not the RTR is
 * a fault with its Terminate codes (rtr_ops). */
static enum rtr_read read_first_fpdu(struct sndk_connector *c, struct sndk_wire_fault *fault)
{
    for (;;) {
        size_t want;
        if (c->rtr_got < SNDK_MPA_LEN_SIZE) {
            want = SNDK_MPA_LEN_SIZE - c->rtr_got;
            /* Once the whole length field has arrived, take it with the rest of the FPDU in one
             * read: a capture (SOFTNDK_PCAP) then holds the FPDU as one record, where a record
             * of the 2-byte length alone defeats tshark's heuristic that finds MPA FPDUs. */
            uint8_t len[SNDK_MPA_LEN_SIZE];
            if (c->rtr_got == 0 && recv(c->fd, len, sizeof len, MSG_PEEK) == (ssize_t)sizeof len) {
                c->rtr_fpdu_len = sndk_mpa_fpdu_len(sndk_get_be16(len));
                want = c->rtr_fpdu_len;
                if (want > sizeof c->rtr_buf - c->rtr_held)
                    want = sizeof c->rtr_buf - c->rtr_held;
            }
        } else {
            if (c->rtr_fpdu_len == 0)
                c->rtr_fpdu_len = sndk_mpa_fpdu_len(sndk_get_be16(c->rtr_buf));
            want = c->rtr_fpdu_len - c->rtr_got;
            if (want > sizeof c->rtr_buf - c->rtr_held)
                want = sizeof c->rtr_buf - c->rtr_held;
        }
        if (want == 0)
            break; /* whole FPDU in */
        ssize_t got = recv(c->fd, c->rtr_buf + c->rtr_held, want, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return RTR_MORE;
        if (got <= 0)
            return RTR_LOST;
        if (c->rec) {
            sndk_cc_add(c->rec, SNDK_CC_RX_OCTETS, (uint64_t)got);
            sndk_pcap_buf(c->rec->pcap, false, c->rtr_buf + c->rtr_held, (size_t)got);
        }
        c->rtr_held += (size_t)got;
        c->rtr_got += (size_t)got;
        if (c->rtr_got < SNDK_MPA_LEN_SIZE)
            continue; /* the length field stays in rtr_buf[0..1] until it is whole */
        enum rtr_read r = rtr_feed_held(c, fault);
        if (r != RTR_MORE)
            return r;
        if (c->rtr_got == c->rtr_fpdu_len)
            break;
    }
    if (c->rtr_seen)
        return RTR_OK;
    /* A whole FPDU that ended no message the parser reported: cannot happen with the callbacks
     * above, but never let it pass as an RTR. */
    *fault = (struct sndk_wire_fault){.err = SNDK_WERR_LOCAL};
    return RTR_FAULT;
}

static void io_accepting(struct sndk_connector *c, uint32_t ev)
{
    (void)ev;
    if (c->tx_off < c->tx_len) {
        int rc = flush_tx(c);
        if (rc < 0) {
            fail_locked(c, STATUS_CONNECTION_ABORTED, "sending the MPA Reply");
            return;
        }
        if (rc == 0)
            return;
        if (!c->p2p) {
            begin_establish_locked(c);
            return;
        }
        sndk_source_modify(&c->src, EPOLLIN);
    }
    struct sndk_wire_fault fault = {.err = SNDK_WERR_NONE};
    int rc = read_first_fpdu(c, &fault);
    if (rc == RTR_MORE)
        return;
    if (rc == RTR_FAULT) {
        sndk_warn_peer(peer_log(c), "connector",
                       "%p: first FPDU after the Reply is not the RTR: %s", (void *)c,
                       sndk_wire_err_name(fault.err));
        send_fault_terminate(c, &fault, c->crc);
        fail_locked(c, STATUS_CONNECTION_ABORTED, "first FPDU is not the RTR");
        return;
    }
    if (rc != RTR_OK) {
        fail_locked(c, STATUS_CONNECTION_ABORTED,
                    rc == RTR_PEER_TERMINATED ? "peer sent a Terminate instead of its RTR"
                                              : "peer left before its RTR");
        return;
    }
    bool rd = c->rtr_kind == SNDK_MPA_RTR_READ;
    if (c->rec)
        sndk_cc_add(c->rec, SNDK_CC_RX_FPDUS, 1);
    SNDK_TRACE("mpa.rtr_received", "connector", c, "\"kind\":\"%s\"", rd ? "read" : "write");
    if (rd && !answer_read_rtr(c)) {
        fail_locked(c, STATUS_CONNECTION_ABORTED, "cannot answer the Read RTR");
        return;
    }
    begin_establish_locked(c);
}

static void on_io(struct sndk_source *s, uint32_t ev)
{
    struct sndk_connector *c = sndk_container_of(s, struct sndk_connector, src);
    sndk_mutex_lock(&c->lock);
    if (sndk_source_watched(s)) { /* else a call in flight after the remove */
        switch (c->state) {
        case SNDK_CONN_CONNECTING:
            io_connecting(c, ev);
            break;
        case SNDK_CONN_REQ_SENT:
            io_req_sent(c, ev);
            break;
        case SNDK_CONN_WAIT_REQUEST:
            io_wait_request(c, ev);
            break;
        case SNDK_CONN_REPLIED:
        case SNDK_CONN_INCOMING:
            io_watch_abandon(c, ev);
            break;
        case SNDK_CONN_ACCEPTING:
            io_accepting(c, ev);
            break;
        default:
            break;
        }
    }
    sndk_mutex_unlock(&c->lock);
}

static void on_timeout(struct sndk_timer *t)
{
    struct sndk_connector *c = sndk_container_of(t, struct sndk_connector, timer);
    sndk_mutex_lock(&c->lock);
    bool incoming_never_delivered = c->state == SNDK_CONN_WAIT_REQUEST;
    if (c->state == SNDK_CONN_CONNECTING || c->state == SNDK_CONN_REQ_SENT ||
        c->state == SNDK_CONN_ACCEPTING || c->state == SNDK_CONN_WAIT_REQUEST) {
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_HANDSHAKE_TIMEOUT);
        if (c->state == SNDK_CONN_WAIT_REQUEST)
            sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECT_FAILURE); /* fail_locked counts others */
    }
    switch (c->state) {
    case SNDK_CONN_CONNECTING:
    case SNDK_CONN_REQ_SENT:
    case SNDK_CONN_ACCEPTING:
        fail_locked(c, STATUS_IO_TIMEOUT, "handshake timed out");
        break;
    case SNDK_CONN_WAIT_REQUEST: {
        /* Said at warn: the client only sees its connection refused, so the listener's log is
         * where an operator learns why (a slow or lossy path, or a client that never speaks). */
        char buf[64];
        sndk_warn_peer(peer_log(c), "listener",
                       "connection from %s closed: no MPA Request within %u ms "
                       "(RequestTimeoutMs, SOFTNDK_REQUEST_TIMEOUT_MS)",
                       c->have_addresses ? sndk_addr_str(&c->peer, buf, sizeof buf) : "?",
                       c->base.adapter->cfg.request_timeout_ms);
        set_state_why(c, SNDK_CONN_CLOSED, "no MPA Request in time");
        io_stop_locked(c);
        break;
    }
    default:
        break;
    }
    sndk_mutex_unlock(&c->lock);
    if (incoming_never_delivered)
        sndk_obj_close(&c->base.pub.Header, NULL, NULL);
    sndk_obj_put(&c->base); /* the pending timer's */
}

static NTSTATUS io_start_locked(struct sndk_connector *c, uint32_t events)
{
    sndk_assert_held(&c->lock);
    sndk_obj_get(&c->base); /* the source's reference, dropped in src_done_fn */
    int rc = sndk_source_add(engine_of(c), &c->src, c->fd, events, on_io, -1);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&c->base.refs, 1, memory_order_acq_rel);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    c->thread = sndk_source_thread(&c->src);
    return STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Consumer calls */

static NTSTATUS claim_qp(struct sndk_connector *c, NDK_QP *pub, struct sndk_qp **out)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeQp);
    if (!o || !sndk_obj_usable(o, c->base.adapter)) {
        if (sndk_verify_on(c->base.adapter))
            sndk_verify_bad_handle(&c->base, "NdkConnect/NdkAccept", "the QP", pub,
                                   NdkObjectTypeQp);
        return STATUS_INVALID_PARAMETER;
    }
    struct sndk_qp *qp = sndk_container_of(o, struct sndk_qp, base);
    /* [DISC-5]: a QP that served a connection is never reused; refuse it before any packet
     * goes out rather than after the peer accepted. */
    int st = atomic_load_explicit(&qp->state, memory_order_acquire);
    if (st != SNDK_QP_IDLE) {
        if (sndk_verify_on(c->base.adapter))
            sndk_verify_report(&qp->base, SoftNdkVerifyConnectorState, NULL,
                               "a QP that %s given to NdkConnect/NdkAccept: a QP serves one "
                               "connection, never another (DISC-5)",
                               st == SNDK_QP_ERROR ? "served a connection" : "is connected");
        return st == SNDK_QP_ERROR ? STATUS_INVALID_DEVICE_STATE : STATUS_CONNECTION_ACTIVE;
    }
    if (!sndk_obj_bind(o, c))
        return STATUS_CONNECTION_ACTIVE;
    *out = qp;
    return STATUS_SUCCESS;
}

static uint32_t cap_limit(ULONG asked, ULONG adapter_max)
{
    uint32_t v = asked < adapter_max ? asked : adapter_max;
    return v > SNDK_MPA_V2_IRDORD_MAX ? SNDK_MPA_V2_IRDORD_MAX : v;
}

/* What NdkConnect and NdkConnectWithSharedEndpoint ask for (src/srclen without a shared
 * endpoint, se with one). */
struct connect_args {
    NDK_QP *qp;
    const struct sockaddr *src;
    ULONG srclen;
    struct sndk_shared_endpoint *se;
    const struct sockaddr *dst;
    ULONG dstlen;
    ULONG ird, ord;
    const void *pd;
    ULONG pdlen;
    NDK_FN_REQUEST_COMPLETION cb;
    PVOID ctx;
};

static void drop_tcp_hold(struct sndk_connector *c)
{
    if (c->tcp_hold >= 0) {
        close(c->tcp_hold);
        c->tcp_hold = -1;
    }
}

/* The adapter's transport asks for a same-host peer first (rendezvous.h): try the peer's name.
 * True with *fd the connected AF_UNIX socket (the TCP one, bound to our reserved port, kept in
 * tcp_hold so that the port stays ours) and *local the address the peer is told. False: TCP,
 * *fd untouched. c->lock held. */
static bool try_same_host(struct sndk_connector *c, struct sndk_addr *local,
                          const struct sndk_addr *peer, int *fd)
{
    const char *why;
    SOFTNDK_TRANSPORT t = sndk_rdv_transport(c->base.adapter, &why);
    if (t == SoftNdkTransportTcp) {
        if (why)
            sndk_info("connector", "%p: same-host transport off: %s", (void *)c, why);
        return false;
    }
    struct sndk_addr me = *local;
    int ufd = sndk_rdv_connect(&me, peer);
    if (ufd < 0) {
        /* auto: TCP without a word when the peer is remote or has no same-host name */
        if (t == SoftNdkTransportShm) {
            char pb[64];
            sndk_info("connector", "%p: transport shm: %s %s: TCP", (void *)c,
                      sndk_addr_str(peer, pb, sizeof pb),
                      ufd == -EHOSTUNREACH                     ? "is not on this host"
                      : ufd == -ECONNREFUSED || ufd == -ENOENT ? "has no same-host listener"
                                                               : strerror(-ufd));
        }
        return false;
    }
    c->tcp_hold = *fd;
    *fd = ufd;
    *local = me;
    return true;
}

static NTSTATUS start_connect(struct sndk_connector *c, const struct connect_args *r)
{
    const NDK_ADAPTER_INFO *info = &c->base.adapter->info;
    if (r->pdlen > info->MaxCallerData)
        return STATUS_INVALID_BUFFER_SIZE;
    if (r->pdlen && !r->pd)
        return STATUS_INVALID_PARAMETER;
    struct sndk_addr peer, local;
    if (sndk_addr_from(&peer, r->dst, r->dstlen) != STATUS_SUCCESS || sndk_addr_port(&peer) == 0 ||
        sndk_addr_is_wildcard(&peer))
        return STATUS_INVALID_PARAMETER;
    if (r->se) {
        local = *sndk_endpoint_addr(r->se->ep);
    } else {
        NTSTATUS st = sndk_addr_from(&local, r->src, r->srclen);
        if (st != STATUS_SUCCESS)
            return st;
    }
    if (local.sa.sa_family != peer.sa.sa_family)
        return STATUS_INVALID_PARAMETER;

    sndk_mutex_lock(&c->lock);
    if (c->state != SNDK_CONN_IDLE || c->active || c->origin) {
        enum sndk_conn_state was = c->state;
        sndk_mutex_unlock(&c->lock);
        if (sndk_verify_on(c->base.adapter))
            sndk_verify_report(&c->base, SoftNdkVerifyConnectorState, r->ctx,
                               "NdkConnect on a connector in state %s: a connector serves one "
                               "connection, a failed one included (CONN-3)",
                               conn_state_names[was]);
        return STATUS_INVALID_DEVICE_STATE; /* a connector is used for one connection */
    }
    struct sndk_qp *qp;
    NTSTATUS st = claim_qp(c, r->qp, &qp);
    if (st != STATUS_SUCCESS) {
        sndk_mutex_unlock(&c->lock);
        return st;
    }
    int fd = -1;
    uint16_t want_port = 0;
    if (r->se) {
        int added = sndk_endpoint_add_peer(r->se->ep, &peer);
        if (added != 0) {
            st = sndk_status_from_errno(SNDK_CALL_SHARED_PEER, -added);
        } else {
            c->se_peer = true;
            st = sndk_endpoint_socket(r->se->ep, &fd);
            if (st == STATUS_SUCCESS) {
                sndk_endpoint_get(r->se->ep);
                c->ep = r->se->ep;
            } else {
                sndk_endpoint_del_peer(r->se->ep, &peer);
                c->se_peer = false;
            }
        }
    } else {
        want_port = sndk_addr_port(&local);
        st = sndk_endpoint_open(c->base.adapter, SNDK_EP_CONNECT, &local, &c->ep, &fd);
    }
    if (st != STATUS_SUCCESS) {
        sndk_obj_unbind(&qp->base, c);
        sndk_mutex_unlock(&c->lock);
        return st;
    }
    bool same_host = try_same_host(c, &local, &peer, &fd);
    c->qp = qp;
    c->fd = fd;
    c->active = true;
    c->local = local;
    c->peer = peer;
    c->have_addresses = true;
    if (sndk_trace_on()) {
        char pb[64];
        sndk_trace_emit("api.NdkConnect", "connector", c,
                        "\"qp\":\"%p\",\"peer\":\"%s\",\"ird\":%u,\"ord\":%u,\"pd_len\":%u",
                        (void *)qp, sndk_addr_str(&peer, pb, sizeof pb), r->ird, r->ord, r->pdlen);
    }
    c->want_ird = cap_limit(r->ird, info->MaxInboundReadLimit);
    c->want_ord = cap_limit(r->ord, info->MaxOutboundReadLimit);
    struct sndk_mpa_policy pol = policy_of(c);
    sndk_mpa_request_params(&pol, r->pd, (uint16_t)r->pdlen, &c->req);
    int len = sndk_mpa_build(c->tx, sizeof c->tx, false, &c->req);
    if (len < 0) {
        sndk_obj_unbind(&qp->base, c);
        sndk_mutex_unlock(&c->lock);
        return STATUS_INVALID_BUFFER_SIZE;
    }
    c->tx_len = (size_t)len;
    c->tx_off = 0;
    sndk_mpa_rx_init(&c->mpa, true, SNDK_MPA_PD_MAX_RFC); /* RFC 5044: up to 512 */
    sndk_obj_hold(&c->base, &qp->base);
    if (r->se)
        sndk_obj_hold(&c->base, &r->se->base);

    int rc = same_host ? 0 : connect(fd, &peer.sa, peer.len);
    /* A port drawn for us (source port 0) whose 4-tuple to this peer still waits in TIME_WAIT
     * (the kernel says EADDRNOTAVAIL): draw another rather than fail a churning consumer. */
    for (unsigned tries = 0; rc != 0 && errno == EADDRNOTAVAIL && !r->se && want_port == 0 &&
                             tries < CONNECT_PORT_TRIES;
         tries++) {
        struct sndk_endpoint *old_ep = c->ep;
        int old_fd = fd;
        sndk_addr_set_port(&local, 0);
        if (sndk_endpoint_open(c->base.adapter, SNDK_EP_CONNECT, &local, &c->ep, &fd) !=
            STATUS_SUCCESS) {
            c->ep = old_ep;
            fd = old_fd;
            errno = EADDRNOTAVAIL;
            break;
        }
        close(old_fd);
        sndk_endpoint_put(old_ep);
        c->fd = fd;
        c->local = local;
        rc = connect(fd, &peer.sa, peer.len);
    }
    if (rc != 0 && errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        c->fd = -1;
        drop_tcp_hold(c);
        sndk_obj_unbind(&qp->base, c);
        set_state(c, SNDK_CONN_CLOSED);
        sndk_mutex_unlock(&c->lock);
        return status_from_errno(err);
    }
    if (!c->rec)
        c->rec = sndk_conn_rec_new(c->base.adapter, SNDK_ROLE_ACTIVE, &c->local.sa, &peer.sa,
                                   conn_state_names);
    st = io_start_locked(c, EPOLLOUT);
    if (st != STATUS_SUCCESS) {
        close(fd);
        c->fd = -1;
        drop_tcp_hold(c);
        sndk_obj_unbind(&qp->base, c);
        set_state(c, SNDK_CONN_CLOSED);
        sndk_mutex_unlock(&c->lock);
        return st;
    }
    start_request_locked(c, r->cb, r->ctx);
    set_state(c, SNDK_CONN_CONNECTING);
    timer_start_locked(c);
    sndk_mutex_unlock(&c->lock);
    return STATUS_PENDING;
}

/* A QP argument at all (NULL is refused); the verifier names a NULL one (handle_invalid). */
static bool qp_given(struct sndk_connector *c, NDK_QP *qp, const char *call)
{
    if (!qp && sndk_verify_on(c->base.adapter))
        sndk_verify_bad_handle(&c->base, call, "the QP", NULL, NdkObjectTypeQp);
    return qp != NULL;
}

static NTSTATUS connector_connect(NDK_CONNECTOR *pub, NDK_QP *qp, const struct sockaddr *src,
                                  ULONG srclen, const struct sockaddr *dst, ULONG dstlen, ULONG ird,
                                  ULONG ord, const void *pd, ULONG pdlen,
                                  NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !qp_given(c, qp, "NdkConnect") || !src || !dst || !cb)
        return STATUS_INVALID_PARAMETER;
    struct connect_args r = {.qp = qp,
                             .src = src,
                             .srclen = srclen,
                             .dst = dst,
                             .dstlen = dstlen,
                             .ird = ird,
                             .ord = ord,
                             .pd = pd,
                             .pdlen = pdlen,
                             .cb = cb,
                             .ctx = ctx};
    return start_connect(c, &r);
}

static NTSTATUS connector_connect_se(NDK_CONNECTOR *pub, NDK_QP *qp, NDK_SHARED_ENDPOINT *sepub,
                                     const struct sockaddr *dst, ULONG dstlen, ULONG ird, ULONG ord,
                                     const void *pd, ULONG pdlen, NDK_FN_REQUEST_COMPLETION cb,
                                     PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    struct sndk_shared_endpoint *se = sndk_shared_endpoint_from(sepub);
    if (c && (!se || !sndk_obj_usable(&se->base, c->base.adapter)) &&
        sndk_verify_on(c->base.adapter))
        sndk_verify_bad_handle(&c->base, "NdkConnectWithSharedEndpoint", "the shared endpoint",
                               sepub, NdkObjectTypeSharedEndpoint);
    if (!c || !qp_given(c, qp, "NdkConnectWithSharedEndpoint") || !se || !dst || !cb ||
        !sndk_obj_usable(&se->base, c->base.adapter))
        return STATUS_INVALID_PARAMETER;
    struct connect_args r = {.qp = qp,
                             .se = se,
                             .dst = dst,
                             .dstlen = dstlen,
                             .ird = ird,
                             .ord = ord,
                             .pd = pd,
                             .pdlen = pdlen,
                             .cb = cb,
                             .ctx = ctx};
    return start_connect(c, &r);
}

static NTSTATUS complete_connect(struct sndk_connector *c, NDK_FN_DISCONNECT_EVENT_CALLBACK ev,
                                 NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev_ex, PVOID evctx,
                                 NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    sndk_mutex_lock(&c->lock);
    bool abandoned = c->state == SNDK_CONN_ABANDONED && c->active;
    if ((c->state != SNDK_CONN_REPLIED && !abandoned) || req_outstanding(c)) {
        enum sndk_conn_state was = c->state;
        bool busy = req_outstanding(c);
        sndk_mutex_unlock(&c->lock);
        /* CLOSED may be the peer's doing (it gave up meanwhile): not the consumer's mistake */
        if (was != SNDK_CONN_CLOSED && sndk_verify_on(c->base.adapter))
            sndk_verify_report(&c->base, SoftNdkVerifyConnectorState, ctx,
                               "NdkCompleteConnect in state %s%s: it follows a successful "
                               "NdkConnect, once (CONN-13)",
                               conn_state_names[was], busy ? " with a request pending" : "");
        return STATUS_CONNECTION_INVALID;
    }
    if (abandoned) {
        set_state(c, SNDK_CONN_CLOSED);
        io_stop_locked(c);
        sndk_obj_unbind(&c->qp->base, c);
        sndk_mutex_unlock(&c->lock);
        return STATUS_CONNECTION_ABORTED;
    }
    set_disconnect_event_locked(c, ev, ev_ex, evctx);
    start_request_locked(c, cb, ctx);
    SNDK_TRACE("api.NdkCompleteConnect", "connector", c, NULL);
    begin_establish_locked(c);
    sndk_mutex_unlock(&c->lock);
    return STATUS_PENDING;
}

static NTSTATUS connector_complete(NDK_CONNECTOR *pub, NDK_FN_DISCONNECT_EVENT_CALLBACK ev,
                                   PVOID evctx, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !cb)
        return STATUS_INVALID_PARAMETER;
    return complete_connect(c, ev, NULL, evctx, cb, ctx);
}

static NTSTATUS connector_complete_ex(NDK_CONNECTOR *pub, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev,
                                      PVOID evctx, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !cb)
        return STATUS_INVALID_PARAMETER;
    return complete_connect(c, NULL, ev, evctx, cb, ctx);
}

/* What NdkAccept and NdkAcceptEx ask for (ev or ev_ex, the other NULL). */
struct accept_args {
    NDK_QP *qp;
    ULONG ird, ord;
    const void *pd;
    ULONG pdlen;
    NDK_FN_DISCONNECT_EVENT_CALLBACK ev;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev_ex;
    PVOID evctx;
    NDK_FN_REQUEST_COMPLETION cb;
    PVOID ctx;
};

static NTSTATUS accept_common(struct sndk_connector *c, const struct accept_args *r)
{
    const NDK_ADAPTER_INFO *info = &c->base.adapter->info;
    if (r->pdlen > info->MaxCalleeData)
        return STATUS_INVALID_BUFFER_SIZE;
    if (r->pdlen && !r->pd)
        return STATUS_INVALID_PARAMETER;
    sndk_mutex_lock(&c->lock);
    bool abandoned = c->state == SNDK_CONN_ABANDONED && !c->active;
    if ((c->state != SNDK_CONN_INCOMING && !abandoned) || req_outstanding(c)) {
        enum sndk_conn_state was = c->state;
        sndk_mutex_unlock(&c->lock);
        if (was != SNDK_CONN_CLOSED && sndk_verify_on(c->base.adapter))
            sndk_verify_report(&c->base, SoftNdkVerifyConnectorState, r->ctx,
                               "NdkAccept in state %s: only a connector delivered by a connect "
                               "event is accepted, once (CONN-4)",
                               conn_state_names[was]);
        return STATUS_INVALID_DEVICE_STATE;
    }
    /* A QP that is not this call's to take is refused before anything changes: the connector
     * stays incoming, the QP as it was (it may serve another connection). */
    struct sndk_qp *qp;
    NTSTATUS st = claim_qp(c, r->qp, &qp);
    if (st != STATUS_SUCCESS) {
        sndk_mutex_unlock(&c->lock);
        return st;
    }
    if (abandoned) {
        /* The peer left before this call: the accept fails inline, and its QP ends as after a
         * failed completion (decisions.md 14c): error, what was posted STATUS_CANCELLED on the
         * CQ before the call returns. The QP stays bound to c until then, so that no other
         * connector takes it meanwhile. */
        set_state_why(c, SNDK_CONN_CLOSED, "NdkAccept after the peer left");
        io_stop_locked(c);
        sndk_mutex_unlock(&c->lock);
        sndk_qp_connect_failed(qp);
        sndk_obj_unbind(&qp->base, c);
        return STATUS_CONNECTION_ABORTED;
    }
    c->want_ird = cap_limit(r->ird, info->MaxInboundReadLimit);
    c->want_ord = cap_limit(r->ord, info->MaxOutboundReadLimit);
    struct sndk_mpa_policy pol = policy_of(c);
    struct sndk_mpa_params reply;
    struct sndk_mpa_result res;
    int rc =
        sndk_mpa_accept(sndk_mpa_rx_frame(&c->mpa), &pol, r->pd, (uint16_t)r->pdlen, &reply, &res);
    int len = rc == 0 ? sndk_mpa_build(c->tx, sizeof c->tx, true, &reply) : -1;
    if (len < 0) {
        sndk_obj_unbind(&qp->base, c);
        sndk_mutex_unlock(&c->lock);
        return sndk_status_from_errno(SNDK_CALL_MPA_REPLY, rc < 0 ? -rc : -len);
    }
    c->qp = qp;
    sndk_obj_hold(&c->base, &qp->base);
    /* The peer's private data must survive the Reply: copy what Accept's result points at. */
    uint16_t keep_len = c->peer_pd_len;
    uint8_t keep[SNDK_MPA_PD_MAX_RFC];
    memcpy(keep, c->peer_pd, keep_len);
    keep_result(c, &res);
    memcpy(c->peer_pd, keep, keep_len);
    c->peer_pd_len = keep_len;
    c->tx_len = (size_t)len;
    c->tx_off = 0;
    set_disconnect_event_locked(c, r->ev, r->ev_ex, r->evctx);
    start_request_locked(c, r->cb, r->ctx);
    struct sndk_rx_config rcfg = {.crc = c->crc};
    sndk_rx_init(&c->rtr_rx, &rcfg, &rtr_ops, c);
    SNDK_TRACE("api.NdkAccept", "connector", c,
               "\"qp\":\"%p\",\"ird\":%u,\"ord\":%u,\"pd_len\":%u,\"rtr\":%s", (void *)qp, r->ird,
               r->ord, r->pdlen, c->p2p ? "true" : "false");
    set_state(c, SNDK_CONN_ACCEPTING);
    timer_start_locked(c);
    /* The socket's events run the rest (Reply out, RTR in) on its progress thread. */
    sndk_source_modify(&c->src, EPOLLOUT | EPOLLIN);
    sndk_mutex_unlock(&c->lock);
    return STATUS_PENDING;
}

static NTSTATUS connector_accept(NDK_CONNECTOR *pub, NDK_QP *qp, ULONG ird, ULONG ord,
                                 const void *pd, ULONG pdlen, NDK_FN_DISCONNECT_EVENT_CALLBACK ev,
                                 PVOID evctx, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !qp_given(c, qp, "NdkAccept") || !cb)
        return STATUS_INVALID_PARAMETER;
    struct accept_args r = {.qp = qp,
                            .ird = ird,
                            .ord = ord,
                            .pd = pd,
                            .pdlen = pdlen,
                            .ev = ev,
                            .evctx = evctx,
                            .cb = cb,
                            .ctx = ctx};
    return accept_common(c, &r);
}

static NTSTATUS connector_accept_ex(NDK_CONNECTOR *pub, NDK_QP *qp, ULONG ird, ULONG ord,
                                    const void *pd, ULONG pdlen,
                                    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev, PVOID evctx,
                                    NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !qp_given(c, qp, "NdkAcceptEx") || !cb)
        return STATUS_INVALID_PARAMETER;
    struct accept_args r = {.qp = qp,
                            .ird = ird,
                            .ord = ord,
                            .pd = pd,
                            .pdlen = pdlen,
                            .ev_ex = ev,
                            .evctx = evctx,
                            .cb = cb,
                            .ctx = ctx};
    return accept_common(c, &r);
}

/* Send the reject Reply (best effort: a small frame on an idle socket) and close. */
static void send_reject_locked(struct sndk_connector *c, const void *pd, uint16_t pdlen)
{
    sndk_assert_held(&c->lock);
    struct sndk_mpa_params reply;
    sndk_mpa_reject_params(sndk_mpa_rx_frame(&c->mpa), pd, pdlen, &reply);
    int len = sndk_mpa_build(c->tx, sizeof c->tx, true, &reply);
    if (len > 0 && c->fd >= 0) {
        ssize_t w = send(c->fd, c->tx, (size_t)len, MSG_NOSIGNAL);
        if (w > 0)
            hs_bytes(c, true, c->tx, (size_t)w);
    }
    sndk_ctr_inc(ctrs_of(c), SNDK_CTR_MPA_REJECT_SENT);
    SNDK_TRACE("mpa.reject_sent", "connector", c, "\"pd_len\":%u", (unsigned)pdlen);
    set_state(c, SNDK_CONN_CLOSED);
    io_stop_locked(c);
}

static void reject_incoming(struct sndk_connector *c)
{
    sndk_mutex_lock(&c->lock);
    if (awaits_answer(c, c->state))
        send_reject_locked(c, NULL, 0);
    sndk_mutex_unlock(&c->lock);
    sndk_obj_close(&c->base.pub.Header, NULL, NULL);
}

static NTSTATUS connector_reject(NDK_CONNECTOR *pub, const void *pd, ULONG pdlen)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || (pdlen && !pd))
        return STATUS_INVALID_PARAMETER;
    sndk_mutex_lock(&c->lock);
    NTSTATUS st = STATUS_SUCCESS;
    bool abandoned = c->state == SNDK_CONN_ABANDONED;
    bool replied = c->state == SNDK_CONN_REPLIED || (abandoned && c->active);
    if (awaits_answer(c, c->state) && pdlen > c->base.adapter->info.MaxCalleeData) {
        st = STATUS_INVALID_BUFFER_SIZE; /* only the passive side's Reject carries data */
    } else if (awaits_answer(c, c->state)) {
        if (abandoned) {
            set_state(c, SNDK_CONN_CLOSED);
            io_stop_locked(c);
            st = STATUS_CONNECTION_ABORTED;
        } else {
            send_reject_locked(c, pd, (uint16_t)pdlen);
        }
    } else if (replied && !req_outstanding(c)) {
        /* The active side refuses what the peer accepted: MPA has no frame for this, so the
         * connection is closed and the peer's Accept fails. */
        set_state(c, SNDK_CONN_CLOSED);
        io_stop_locked(c);
        sndk_obj_unbind(&c->qp->base, c);
        st = abandoned ? STATUS_CONNECTION_ABORTED : STATUS_SUCCESS;
    } else {
        st = STATUS_INVALID_DEVICE_STATE;
    }
    sndk_mutex_unlock(&c->lock);
    return st;
}

static NTSTATUS connector_data(NDK_CONNECTOR *pub, ULONG *pIrd, ULONG *pOrd, PVOID pPrivateData,
                               ULONG *pPrivateDataLength)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !pPrivateDataLength)
        return STATUS_INVALID_PARAMETER;
    if (!pPrivateData && *pPrivateDataLength > 0)
        return STATUS_INVALID_PARAMETER; /* [CONN-9] */
    sndk_mutex_lock(&c->lock);
    /* NDKPI says consumers call this between the connect completion / connect event and
     * NdkCompleteConnect / NdkAccept; hardware providers keep answering after (the effective
     * IRD/ORD and the peer's private data stay meaningful) and drivers rely on it, so answer
     * until the connection has ended (docs/decisions.md, "Lenient where hardware is"). */
    bool answers = false, late = false;
    switch (c->state) {
    case SNDK_CONN_REPLIED:
    case SNDK_CONN_INCOMING:
    case SNDK_CONN_ABANDONED:
        answers = true;
        break;
    case SNDK_CONN_ACCEPTING:
    case SNDK_CONN_ESTABLISHING:
    case SNDK_CONN_CONNECTED:
    case SNDK_CONN_DISCONNECTING:
        answers = late = true; /* lenient, but [CONN-6] is the consumer's rule */
        break;
    default:
        answers = c->peer_rejected;
        break;
    }
    if (!answers) {
        sndk_mutex_unlock(&c->lock);
        return STATUS_INVALID_DEVICE_STATE;
    }
    if (pIrd)
        *pIrd = c->ird;
    if (pOrd)
        *pOrd = c->ord;
    /* RDS: the peer's private data as it came in the MPA frame (MPA carries its length). */
    ULONG rds = c->peer_pd_len;
    NTSTATUS st = STATUS_SUCCESS;
    if (pPrivateData) {
        ULONG n = *pPrivateDataLength < rds ? *pPrivateDataLength : rds;
        memcpy(pPrivateData, c->peer_pd, n);
        if (*pPrivateDataLength < rds)
            st = STATUS_BUFFER_TOO_SMALL;
    }
    *pPrivateDataLength = rds;
    enum sndk_conn_state was = c->state;
    bool passive = c->origin != NULL;
    sndk_mutex_unlock(&c->lock);
    if (late && sndk_verify_on(c->base.adapter))
        sndk_verify_report(&c->base, SoftNdkVerifyConnDataLate, NULL,
                           "NdkGetConnectionData in state %s, after the %s: read IRD/ORD and "
                           "the private data before it (softndk still answers)",
                           conn_state_names[was], passive ? "NdkAccept" : "NdkCompleteConnect");
    return st;
}

static NTSTATUS get_address(NDK_CONNECTOR *pub, struct sockaddr *addr, ULONG *len, bool peer)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !len)
        return STATUS_INVALID_PARAMETER;
    sndk_mutex_lock(&c->lock);
    NTSTATUS st = c->have_addresses ? sndk_addr_copy_out(peer ? &c->peer : &c->local, addr, len)
                                    : STATUS_INVALID_DEVICE_STATE;
    sndk_mutex_unlock(&c->lock);
    return st;
}

static NTSTATUS connector_local_address(NDK_CONNECTOR *pub, struct sockaddr *addr, ULONG *len)
{
    return get_address(pub, addr, len, false);
}

static NTSTATUS connector_peer_address(NDK_CONNECTOR *pub, struct sockaddr *addr, ULONG *len)
{
    return get_address(pub, addr, len, true);
}

static NTSTATUS connector_disconnect(NDK_CONNECTOR *pub, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    struct sndk_connector *c = connector_from(pub);
    if (!c || !cb)
        return STATUS_INVALID_PARAMETER;
    sndk_mutex_lock(&c->lock);
    if (c->state == SNDK_CONN_CLOSED && c->link == SNDK_LINK_ATTACHED) {
        /* Already down (the peer aborted): nothing left to do gracefully. */
        silence_events_locked(c, "NdkDisconnect");
        sndk_mutex_unlock(&c->lock);
        return STATUS_SUCCESS;
    }
    if (c->state != SNDK_CONN_CONNECTED || req_outstanding(c)) {
        enum sndk_conn_state was = c->state;
        sndk_mutex_unlock(&c->lock);
        if (was != SNDK_CONN_CLOSED && sndk_verify_on(c->base.adapter))
            sndk_verify_report(&c->base, SoftNdkVerifyConnectorState, ctx,
                               "NdkDisconnect in state %s: it ends an established connection, "
                               "once",
                               conn_state_names[was]);
        return STATUS_CONNECTION_INVALID;
    }
    silence_events_locked(c, "NdkDisconnect");
    start_request_locked(c, cb, ctx);
    SNDK_TRACE("api.NdkDisconnect", "connector", c, NULL);
    set_state(c, SNDK_CONN_DISCONNECTING);
    struct sndk_qp *qp = c->qp;
    unsigned timeout = c->base.adapter->cfg.disconnect_timeout_ms;
    sndk_mutex_unlock(&c->lock);
    if (sndk_verify_on(c->base.adapter)) {
        void *oldest = NULL;
        uint32_t n = sndk_qp_initiator_outstanding(qp, &oldest);
        if (n)
            sndk_verify_report(&c->base, SoftNdkVerifyDisconnectOutstanding, oldest,
                               "NdkDisconnect with %u initiator request(s) of QP %p not "
                               "completed (the RequestContext is the oldest's): a graceful "
                               "disconnect is not promised; wait for their completions",
                               n, (void *)qp);
    }
    sndk_qp_shutdown(qp, timeout);
    return STATUS_PENDING;
}

static const NDK_CONNECTOR_DISPATCH connector_dispatch = {
    .NdkCloseConnector = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkConnect = connector_connect,
    .NdkConnectWithSharedEndpoint = connector_connect_se,
    .NdkCompleteConnect = connector_complete,
    .NdkAccept = connector_accept,
    .NdkReject = connector_reject,
    .NdkGetConnectionData = connector_data,
    .NdkGetLocalAddress = connector_local_address,
    .NdkGetPeerAddress = connector_peer_address,
    .NdkDisconnect = connector_disconnect,
    .NdkCompleteConnectEx = connector_complete_ex,
    .NdkAcceptEx = connector_accept_ex,
};

/* Close: a pending request completes with STATUS_CANCELLED, an incoming request not accepted is
 * rejected, an established connection is aborted ([DISC-7]); the close completes once
 * the QP let go of the connection. */
static void connector_close_begin(struct sndk_obj *o)
{
    struct sndk_connector *c = sndk_container_of(o, struct sndk_connector, base);
    sndk_mutex_lock(&c->lock);
    if (c->ev != SNDK_EV_SILENT) /* a queued connect or disconnect event is dropped too */
        set_ev_why(c, SNDK_EV_SILENT, "close");
    timer_stop_locked(c);
    if (c->state == SNDK_CONN_INCOMING)
        send_reject_locked(c, NULL, 0);
    /* While ESTABLISHING, establish() owns the detach: it runs sndk_qp_attach with c->lock
     * dropped (link already attached) and detaches once it sees CLOSED. Detaching here too ran
     * detach_done twice: two puts of the link's one reference. */
    bool detach = c->link == SNDK_LINK_ATTACHED && c->state != SNDK_CONN_ESTABLISHING;
    if (c->state != SNDK_CONN_CLOSED && c->state != SNDK_CONN_ESTABLISHING) {
        io_stop_locked(c);
        set_state(c, SNDK_CONN_CLOSED);
    } else if (c->state == SNDK_CONN_ESTABLISHING) {
        set_state(c, SNDK_CONN_CLOSED); /* src_done sees it and closes the socket */
    }
    if (c->qp && c->link != SNDK_LINK_ATTACHED) {
        sndk_obj_unbind(&c->qp->base, c);
        if (!c->active && req_outstanding(c))             /* the NdkAccept it cancels failed: */
            set_link_why(c, SNDK_LINK_FAIL_DUE, "close"); /* as in fail_locked */
    }
    complete_locked(c, STATUS_CANCELLED);
    sndk_mutex_unlock(&c->lock);
    if (detach)
        sndk_qp_detach(c->qp, &c->detach_done);
}

static void connector_destroy(struct sndk_obj *o)
{
    struct sndk_connector *c = sndk_container_of(o, struct sndk_connector, base);
    if (c->fd >= 0)
        close(c->fd);
    drop_tcp_hold(c);
    if (c->ep) {
        if (c->se_peer)
            sndk_endpoint_del_peer(c->ep, &c->peer);
        sndk_endpoint_put(c->ep);
    }
    sndk_conn_rec_put(c->rec);
    sndk_mutex_destroy(&c->lock);
}

static const struct sndk_obj_ops connector_ops = {.type = NdkObjectTypeConnector,
                                                  .close_begin = connector_close_begin,
                                                  .destroy = connector_destroy};

static struct sndk_connector *connector_new(struct sndk_adapter *a)
{
    struct sndk_connector *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = -1;
    c->tcp_hold = -1;
    c->state = SNDK_CONN_IDLE;
    sndk_mutex_init_ranked(&c->lock, SNDK_LOCK_CONNECTOR);
    sndk_work_init(&c->deliver, deliver_fn);
    sndk_work_init(&c->src_done, src_done_fn);
    sndk_work_init(&c->detach_done, detach_done_fn);
    sndk_timer_init(&c->timer, on_timeout);
    sndk_obj_init(&c->base, a, &connector_ops, &connector_dispatch);
    sndk_obj_hold(&c->base, &a->base);
    return c;
}

NTSTATUS sndk_connector_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                               PVOID RequestContext, NDK_CONNECTOR **ppNdkConnector)
{
    (void)CreateCompletion, (void)RequestContext; /* creates complete inline */
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ppNdkConnector)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    if (sndk_fault_call(a, SNDK_FCALL_CONNECTOR))
        return STATUS_INSUFFICIENT_RESOURCES;
    struct sndk_connector *c = connector_new(a);
    if (!c)
        return STATUS_INSUFFICIENT_RESOURCES;
    *ppNdkConnector = &c->base.pub.connector;
    return STATUS_SUCCESS;
}

/* The door evicts c while it still waits for its Request (admission.h): reset the connection and
 * close c. Called with a reference held, without any lock. */
static void connector_evict(struct sndk_adm_entry *e)
{
    struct sndk_connector *c = sndk_container_of(e, struct sndk_connector, adm);
    sndk_mutex_lock(&c->lock);
    bool evicted = c->state == SNDK_CONN_WAIT_REQUEST;
    if (evicted) {
        SNDK_TRACE("connector.failed", "connector", c, "\"state\":\"%s\",\"why\":\"%s\"",
                   conn_state_names[c->state], "evicted at the door");
        sndk_ctr_inc(ctrs_of(c), SNDK_CTR_CONNECT_FAILURE);
        timer_stop_locked(c);
        if (c->fd >= 0) {
            /* refused as if nobody listened: a reset, not a FIN the peer might wait behind */
            struct linger lg = {1, 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        set_state(c, SNDK_CONN_CLOSED);
        io_stop_locked(c);
    }
    sndk_mutex_unlock(&c->lock);
    if (evicted) /* never delivered: nobody else will close it */
        sndk_obj_close(&c->base.pub.Header, NULL, NULL);
}

void sndk_connector_incoming(const struct sndk_conn_origin *origin, int fd,
                             const struct sndk_addr *local, const struct sndk_addr *peer)
{
    struct sndk_connector *c = connector_new(origin->owner->adapter);
    if (!c) {
        sndk_close_with_reset(fd);
        return;
    }
    sndk_obj_hold(&c->base, origin->owner);
    /* Listed before its socket is watched, and outside c->lock: making room may evict (lock)
     * an older connector. Leaving WAIT_REQUEST unlists it (door_transition). */
    sndk_admission_enter(origin->adm, &c->adm, &c->base, connector_evict, fd, peer);
    if (origin->ep) {
        sndk_endpoint_get(origin->ep);
        c->ep = origin->ep;
    }
    sndk_mutex_lock(&c->lock);
    c->origin = origin;
    c->fd = fd;
    c->local = *local;
    c->peer = *peer;
    c->have_addresses = true;
    c->rec = sndk_conn_rec_new(c->base.adapter, SNDK_ROLE_PASSIVE, &local->sa, &peer->sa,
                               conn_state_names);
    SNDK_TRACE("connector.incoming", "connector", c, "\"listener\":\"%p\",\"peer\":\"%s\"",
               (void *)origin->owner, c->rec ? c->rec->peer_str : "");
    sndk_mpa_rx_init(&c->mpa, false, SNDK_MPA_PD_MAX_RFC); /* RFC 5044: up to 512 */
    set_state(c, SNDK_CONN_WAIT_REQUEST);
    NTSTATUS st = io_start_locked(c, EPOLLIN);
    if (st == STATUS_SUCCESS)
        timer_start_locked(c);
    else
        set_state(c, SNDK_CONN_CLOSED);
    sndk_mutex_unlock(&c->lock);
    if (st != STATUS_SUCCESS)
        sndk_obj_close(&c->base.pub.Header, NULL, NULL);
}
