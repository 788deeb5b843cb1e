/* SMB Direct ([MS-SMBD]) Initiator on the public NDK interface: see smb/smbd.h.
 *
 * One thread drives a connection: every call (send, recv, register, release) polls the one CQ
 * and handles what completed, so credits, reassembly and remote invalidations are processed
 * even while the upper layer only sends. The CQ's notification callback only bumps a counter
 * and wakes the waiting thread (a callback must not block). The connection's life is the state
 * machine below; every transition is validated and, with SOFTNDK_SMB_LOG set, logged. */
#include <smb/smbd.h>

#include "smbd_wire.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum smbd_state {
    SMBD_CREATED,     /* objects made, receives posted */
    SMBD_CONNECTING,  /* NdkConnect / NdkCompleteConnect under way */
    SMBD_NEGOTIATING, /* Negotiate Request sent, waiting for the Response */
    SMBD_CONNECTED,   /* data transfer */
    SMBD_FAILED,      /* a protocol or connection error: no more messages either way */
    SMBD_CLOSED,      /* disconnected, objects closed */
    SMBD_STATE_COUNT
};

static const char *const state_names[SMBD_STATE_COUNT] = {
    [SMBD_CREATED] = "CREATED",         [SMBD_CONNECTING] = "CONNECTING",
    [SMBD_NEGOTIATING] = "NEGOTIATING", [SMBD_CONNECTED] = "CONNECTED",
    [SMBD_FAILED] = "FAILED",           [SMBD_CLOSED] = "CLOSED",
};

/* allowed[from] is the set of states a connection may move to. */
static const unsigned allowed[SMBD_STATE_COUNT] = {
    [SMBD_CREATED] = 1u << SMBD_CONNECTING | 1u << SMBD_FAILED | 1u << SMBD_CLOSED,
    [SMBD_CONNECTING] = 1u << SMBD_NEGOTIATING | 1u << SMBD_FAILED,
    [SMBD_NEGOTIATING] = 1u << SMBD_CONNECTED | 1u << SMBD_FAILED,
    [SMBD_CONNECTED] = 1u << SMBD_FAILED | 1u << SMBD_CLOSED,
    [SMBD_FAILED] = 1u << SMBD_CLOSED,
    [SMBD_CLOSED] = 0,
};

enum op_kind { OP_RECV = 1, OP_SEND, OP_MR, OP_RDMA };

struct smbd_op {
    enum op_kind kind;
    unsigned index;
};

/* A fast-register MR of the connection's pool and where it is in its cycle. */
enum mr_state {
    MR_FREE,             /* not registered: may be fast-registered for a region */
    MR_REGISTERING,      /* NdkFastRegister posted */
    MR_VALID,            /* the peer may use its token */
    MR_INVALIDATING,     /* NdkInvalidate posted */
    MR_PEER_INVALIDATED, /* a Send with Invalidate named its token */
    MR_BROKEN,           /* an operation on it failed: never reused */
    MR_STATE_COUNT
};

static const char *const mr_state_names[MR_STATE_COUNT] = {
    [MR_FREE] = "FREE",
    [MR_REGISTERING] = "REGISTERING",
    [MR_VALID] = "VALID",
    [MR_INVALIDATING] = "INVALIDATING",
    [MR_PEER_INVALIDATED] = "PEER_INVALIDATED",
    [MR_BROKEN] = "BROKEN",
};

struct mr_slot {
    NDK_MR *mr;
    enum mr_state state;
    UINT32 token;
    NTSTATUS op_status;
    NDK_LOGICAL_ADDRESS_MAPPING *lam;
    struct smbd_op op;
};

#define SMBD_MAX_REGION_PIECES 16
#define SMBD_MR_POOL           64

struct smb_rdma_region {
    unsigned n;
    unsigned slot[SMBD_MAX_REGION_PIECES];
};

struct queued_msg {
    struct queued_msg *next;
    size_t len;
    uint8_t data[];
};

struct waiter {
    _Atomic unsigned done;
    NTSTATUS st;
};

enum smbd_role { SMBD_INITIATOR, SMBD_RESPONDER };

struct smbd_conn {
    smb_transport base;
    enum smbd_role role;
    enum smbd_state state;
    char err[256];
    smbd_params p;
    smbd_negotiated n;
    NDK_ADAPTER *adapter;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_CONNECTOR *conn;
    NDK_MR *recv_mr, *send_mr;
    uint8_t *recv_buf, *send_buf;
    UINT32 recv_tok, send_tok;
    unsigned nrecv, nsend;
    struct smbd_op *recv_ops, *send_ops;
    bool *send_busy;
    unsigned sends_busy;
    ULONG frmr_pages;
    struct mr_slot mrs[SMBD_MR_POOL];
    unsigned nmr;
    /* credits ([MS-SMBD] 3.1.1.1) */
    unsigned send_credits;   /* the peer's grants not yet used */
    unsigned recv_posted;    /* receives posted now */
    unsigned recv_granted;   /* of those, announced to the peer and not yet used by it */
    bool response_requested; /* the peer asked for a prompt message */
    /* reassembly of the message being received */
    uint8_t *reasm;
    size_t reasm_len, reasm_total;
    struct queued_msg *q_head, *q_tail;
    uint64_t last_activity_ms;
    smb_transport_stats st;
    _Atomic unsigned cq_events;
    _Atomic bool peer_gone;
    /* Responder: RDMA of the peer's buffers */
    ULONG ord;            /* our RDMA Reads in flight at most (the peer's IRD) */
    NDK_MR *io_mr;        /* registers the local side of one peer_write/peer_read */
    unsigned rdma_busy;   /* RDMA Writes and Reads posted, not completed */
    NTSTATUS rdma_status; /* the first failure among them */
    struct smbd_op rdma_op;
    bool established;          /* NdkCompleteConnect / NdkAccept succeeded */
    bool negotiate_request_ok; /* Responder: a valid request arrived */
    struct smbd_negotiate_request peer_req;
};

static int ndk_err(NTSTATUS st);

/* SOFTNDK_SMB_LOG, read once: connections on several threads ask at once, so the cache is
 * atomic (each thread may read the environment the first time; they agree). */
static bool smbd_log_on(void)
{
    static _Atomic int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("SOFTNDK_SMB_LOG");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void set_state(struct smbd_conn *c, enum smbd_state to, const char *why)
{
    if (c->state == to)
        return;
    if (!(allowed[c->state] & 1u << to)) {
        fprintf(stderr, "smbd: invalid transition %s => %s (%s)\n", state_names[c->state],
                state_names[to], why);
        abort();
    }
    if (smbd_log_on())
        fprintf(stderr, "smbd: %s => %s (%s)\n", state_names[c->state], state_names[to], why);
    c->state = to;
}

static void mr_set(struct smbd_conn *c, unsigned i, enum mr_state to)
{
    if (smbd_log_on())
        fprintf(stderr, "smbd: mr %u %s => %s\n", i, mr_state_names[c->mrs[i].state],
                mr_state_names[to]);
    c->mrs[i].state = to;
}

/* Records the first failure (later ones are consequences) and moves to FAILED. */
__attribute__((format(printf, 3, 4))) static int fail(struct smbd_conn *c, int err, const char *fmt,
                                                      ...)
{
    if (c->state != SMBD_FAILED && c->state != SMBD_CLOSED) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
        set_state(c, SMBD_FAILED, c->err);
    }
    return err;
}

/* ---- waiting for callbacks ----------------------------------------------------------------- */

static void futex_wake(_Atomic unsigned *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_ms(_Atomic unsigned *w, unsigned seen, unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void w_cb(void *ctx, NTSTATUS st)
{
    struct waiter *w = ctx;
    w->st = st;
    atomic_store_explicit(&w->done, 1, memory_order_release);
    futex_wake(&w->done);
}

static void w_close_cb(void *ctx)
{
    w_cb(ctx, STATUS_SUCCESS);
}

/* The result of a call that may pend: its inline status, or the callback's within ms. */
static NTSTATUS w_wait(struct waiter *w, NTSTATUS st, unsigned ms)
{
    if (st != STATUS_PENDING)
        return st;
    uint64_t end = now_ms() + ms;
    while (!atomic_load_explicit(&w->done, memory_order_acquire)) {
        uint64_t now = now_ms();
        if (now >= end)
            return STATUS_IO_TIMEOUT;
        futex_wait_ms(&w->done, 0, (unsigned)(end - now));
    }
    return w->st;
}

static void create_never(void *ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)st, (void)obj;
}

static void close_obj(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *h)
{
    struct waiter w = {0};
    /* close completes once every callback of the object returned: no bound is right here, and
     * softndk bounds what a close waits for */
    NTSTATUS st = fn(h, w_close_cb, &w);
    if (st == STATUS_PENDING)
        while (!atomic_load_explicit(&w.done, memory_order_acquire))
            futex_wait_ms(&w.done, 0, 1000);
}

static void on_cq(void *ctx, NTSTATUS st)
{
    struct smbd_conn *c = ctx;
    (void)st;
    atomic_fetch_add_explicit(&c->cq_events, 1, memory_order_release);
    futex_wake(&c->cq_events);
}

static void on_disconnect(void *ctx)
{
    struct smbd_conn *c = ctx;
    atomic_store(&c->peer_gone, true);
    atomic_fetch_add_explicit(&c->cq_events, 1, memory_order_release);
    futex_wake(&c->cq_events);
}

/* ---- posting ------------------------------------------------------------------------------- */

static int post_recv(struct smbd_conn *c, unsigned i)
{
    NDK_SGE sge = {.VirtualAddress = c->recv_buf + (size_t)i * c->p.max_receive_size,
                   .Length = c->p.max_receive_size,
                   .MemoryRegionToken = c->recv_tok};
    NTSTATUS st = c->qp->Dispatch->NdkReceive(c->qp, &c->recv_ops[i], &sge, 1);
    if (st != STATUS_SUCCESS)
        return fail(c, -EIO, "NdkReceive: %s", SoftNdkStatusName(st));
    c->recv_posted++;
    return 0;
}

static struct queued_msg *queue_new(size_t len)
{
    struct queued_msg *m = malloc(sizeof *m + (len ? len : 1));
    if (m) {
        m->next = NULL;
        m->len = len;
    }
    return m;
}

static void queue_push(struct smbd_conn *c, struct queued_msg *m)
{
    if (c->q_tail)
        c->q_tail->next = m;
    else
        c->q_head = m;
    c->q_tail = m;
    c->st.messages_received++;
}

/* [MS-SMBD] 3.1.5.8: one Data Transfer message of len bytes arrived in receive i. */
static int handle_data(struct smbd_conn *c, const uint8_t *buf, size_t len)
{
    struct smbd_data_header h;
    const char *why;
    if (smbd_decode_data_header(buf, len, &h, &why) != 0)
        return fail(c, -EPROTO, "%s (%zu bytes)", why, len);
    c->st.fragments_received++;
    if (h.credits_granted) {
        if (c->send_credits + h.credits_granted > 0xFFFFu)
            return fail(c, -EPROTO, "peer granted credits beyond 65535 (%u + %u)", c->send_credits,
                        h.credits_granted);
        c->send_credits += h.credits_granted;
        c->st.credits_granted_by_peer += h.credits_granted;
    }
    c->n.receive_credit_target = h.credits_requested;
    if (h.flags & SMBD_FLAG_RESPONSE_REQUESTED)
        c->response_requested = true;
    if (h.data_length == 0) {
        if (c->reasm_total == 0)
            c->st.keepalives_received += (h.flags & SMBD_FLAG_RESPONSE_REQUESTED) ? 1 : 0;
        return 0;
    }
    const uint8_t *data = buf + h.data_offset;
    if (c->reasm_total == 0) {
        uint64_t total = (uint64_t)h.data_length + h.remaining_data_length;
        if (total > c->n.max_fragmented_receive)
            return fail(c, -EPROTO, "message of %llu bytes exceeds our MaxFragmentedSize %u",
                        (unsigned long long)total, c->n.max_fragmented_receive);
        if (h.remaining_data_length == 0) {
            struct queued_msg *m = queue_new(h.data_length);
            if (!m)
                return fail(c, -ENOMEM, "out of memory for a %u-byte message", h.data_length);
            memcpy(m->data, data, h.data_length);
            queue_push(c, m);
            c->st.bytes_received += h.data_length;
            return 0;
        }
        c->reasm = malloc((size_t)total);
        if (!c->reasm)
            return fail(c, -ENOMEM, "out of memory for a %llu-byte message",
                        (unsigned long long)total);
        c->reasm_total = (size_t)total;
        c->reasm_len = 0;
    } else if ((uint64_t)h.data_length + h.remaining_data_length != c->reasm_total - c->reasm_len) {
        return fail(c, -EPROTO,
                    "fragment of %u bytes with %u remaining does not continue a message with "
                    "%zu bytes to come",
                    h.data_length, h.remaining_data_length, c->reasm_total - c->reasm_len);
    }
    memcpy(c->reasm + c->reasm_len, data, h.data_length);
    c->reasm_len += h.data_length;
    if (h.remaining_data_length == 0) {
        struct queued_msg *m = queue_new(c->reasm_total);
        if (!m)
            return fail(c, -ENOMEM, "out of memory for a %zu-byte message", c->reasm_total);
        memcpy(m->data, c->reasm, c->reasm_total);
        queue_push(c, m);
        c->st.bytes_received += c->reasm_total;
        free(c->reasm);
        c->reasm = NULL;
        c->reasm_total = c->reasm_len = 0;
    }
    return 0;
}

static int handle_negotiate_response(struct smbd_conn *c, const uint8_t *buf, size_t len)
{
    struct smbd_negotiate_response r;
    const char *why;
    if (smbd_decode_negotiate_response(buf, len, c->p.max_receive_size, &r, &why) != 0)
        return fail(c, -EPROTO, "%s", why);
    /* [MS-SMBD] 3.1.5.7: take the smaller of each pair */
    c->n.max_receive_size = c->p.max_receive_size;
    c->n.max_send_size =
        r.max_receive_size < c->p.max_send_size ? r.max_receive_size : c->p.max_send_size;
    if (c->n.max_send_size <= SMBD_DATA_OFFSET)
        return fail(c, -EPROTO, "peer MaxReceiveSize %u leaves no room for data",
                    r.max_receive_size);
    c->n.max_fragmented_send = r.max_fragmented_size;
    c->n.max_fragmented_receive = c->p.max_fragmented_size;
    c->n.max_read_write_size = r.max_read_write_size < c->p.max_read_write_size
                                   ? r.max_read_write_size
                                   : c->p.max_read_write_size;
    c->n.receive_credit_target = r.credits_requested;
    c->n.send_credit_target = c->p.send_credit_target;
    c->send_credits = r.credits_granted;
    c->st.credits_granted_by_peer += r.credits_granted;
    set_state(c, SMBD_CONNECTED, "negotiate response accepted");
    return 0;
}

/* Responder: [MS-SMBD] 3.1.5.6. The answer is sent by the accepting thread; here the request
 * is only checked and kept. */
static int handle_negotiate_request(struct smbd_conn *c, const uint8_t *buf, size_t len)
{
    const char *why;
    int rc = smbd_decode_negotiate_request(buf, len, &c->peer_req, &why);
    if (rc == -EPROTONOSUPPORT) {
        /* 3.1.5.6: answer STATUS_NOT_SUPPORTED, then disconnect */
        struct smbd_negotiate_response r = {.min_version = SMBD_VERSION_1,
                                            .max_version = SMBD_VERSION_1,
                                            .status = SMBD_STATUS_NOT_SUPPORTED};
        smbd_encode_negotiate_response(&r, c->send_buf);
        NDK_SGE sge = {.VirtualAddress = c->send_buf,
                       .Length = SMBD_NEGOTIATE_RESPONSE_SIZE,
                       .MemoryRegionToken = c->send_tok};
        if (c->qp->Dispatch->NdkSend(c->qp, &c->send_ops[0], &sge, 1, 0) == STATUS_SUCCESS) {
            c->send_busy[0] = true;
            c->sends_busy++;
        }
        return fail(c, -EPROTONOSUPPORT, "%s", why);
    }
    if (rc != 0)
        return fail(c, -EPROTO, "%s", why);
    c->negotiate_request_ok = true;
    return 0;
}

static int find_mr_by_token(struct smbd_conn *c, UINT32 token)
{
    for (unsigned i = 0; i < c->nmr; i++)
        if (c->mrs[i].state == MR_VALID && c->mrs[i].token == token)
            return (int)i;
    return -1;
}

static int handle_completion(struct smbd_conn *c, const NDK_RESULT_EX *r)
{
    struct smbd_op *op = r->RequestContext;
    switch (op->kind) {
    case OP_RECV: {
        c->recv_posted--;
        if (r->Status != STATUS_SUCCESS) {
            if (r->Status == STATUS_CANCELLED && atomic_load(&c->peer_gone))
                return fail(c, -ECONNRESET, "peer disconnected");
            return fail(c, r->Status == STATUS_CANCELLED ? -ECONNRESET : -EIO,
                        "receive completed %s (provider code 0x%x)", SoftNdkStatusName(r->Status),
                        (unsigned)r->ProviderErrorCode);
        }
        if (c->state == SMBD_CONNECTED) {
            if (c->recv_granted == 0)
                return fail(c, -EPROTO, "peer sent a message without a credit");
            c->recv_granted--;
        }
        if (r->Type == NdkOperationTypeReceiveAndInvalidate) {
            UINT32 tok = (UINT32)(r->TypeSpecificCompletionOutput & 0xFFFFFFFFu);
            int i = find_mr_by_token(c, tok);
            if (i < 0)
                return fail(c, -EPROTO, "peer invalidated token 0x%08x, which we did not offer",
                            (unsigned)tok);
            mr_set(c, (unsigned)i, MR_PEER_INVALIDATED);
        }
        const uint8_t *buf = c->recv_buf + (size_t)op->index * c->p.max_receive_size;
        size_t len = r->BytesTransferred;
        int rc = c->state != SMBD_NEGOTIATING ? handle_data(c, buf, len)
                 : c->role == SMBD_INITIATOR  ? handle_negotiate_response(c, buf, len)
                                              : handle_negotiate_request(c, buf, len);
        if (rc != 0)
            return rc;
        c->last_activity_ms = now_ms();
        return post_recv(c, op->index);
    }
    case OP_SEND:
        c->send_busy[op->index] = false;
        c->sends_busy--;
        if (r->Status != STATUS_SUCCESS)
            return fail(c, -EIO, "send completed %s (provider code 0x%x)",
                        SoftNdkStatusName(r->Status), (unsigned)r->ProviderErrorCode);
        return 0;
    case OP_RDMA:
        c->rdma_busy--;
        if (r->Status != STATUS_SUCCESS && c->rdma_status == STATUS_SUCCESS)
            c->rdma_status = r->Status;
        return 0;
    case OP_MR: {
        struct mr_slot *m = &c->mrs[op->index];
        m->op_status = r->Status;
        if (r->Status != STATUS_SUCCESS) {
            mr_set(c, op->index, MR_BROKEN);
            return fail(c, -EIO, "%s completed %s",
                        r->Type == NdkOperationTypeFastRegister ? "NdkFastRegister"
                                                                : "NdkInvalidate",
                        SoftNdkStatusName(r->Status));
        }
        if (m->state == MR_REGISTERING)
            mr_set(c, op->index, MR_VALID);
        else if (m->state == MR_INVALIDATING)
            mr_set(c, op->index, MR_FREE);
        return 0;
    }
    }
    return fail(c, -EIO, "completion of an unknown request");
}

/* Handles what completed; waits up to timeout_ms for something when nothing had. 0 when
 * something was handled, -ETIMEDOUT when nothing came, or the failure. */
static int progress(struct smbd_conn *c, int timeout_ms)
{
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        NDK_RESULT_EX res[32];
        ULONG n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, res, 32);
        int rc = 0;
        for (ULONG i = 0; i < n; i++) {
            int r = handle_completion(c, &res[i]);
            if (r != 0 && rc == 0)
                rc = r;
        }
        if (rc != 0)
            return rc;
        if (n > 0)
            return 0;
        if (c->state == SMBD_FAILED)
            return -EPIPE;
        /* the CQ is drained: what the peer sent before its disconnect has been handled */
        if (atomic_load(&c->peer_gone))
            return fail(c, -ECONNRESET, "peer disconnected");
        unsigned seen = atomic_load_explicit(&c->cq_events, memory_order_acquire);
        c->cq->Dispatch->NdkArmCq(c->cq, NDK_CQ_NOTIFY_ANY);
        n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, res, 32);
        for (ULONG i = 0; i < n; i++) {
            int r = handle_completion(c, &res[i]);
            if (r != 0 && rc == 0)
                rc = r;
        }
        if (rc != 0)
            return rc;
        if (n > 0)
            return 0;
        uint64_t now = now_ms();
        if (now >= end)
            return -ETIMEDOUT;
        uint64_t left = end - now;
        futex_wait_ms(&c->cq_events, seen, left > 1000 ? 1000 : (unsigned)left);
    }
}

/* Credits to announce with the next message: receives posted beyond what the peer holds, up
 * to the peer's target ([MS-SMBD] 3.1.5.9). */
static unsigned credits_to_grant(const struct smbd_conn *c)
{
    unsigned spare = c->recv_posted - c->recv_granted;
    unsigned target = c->n.receive_credit_target;
    unsigned room = target > c->recv_granted ? target - c->recv_granted : 0;
    unsigned g = spare < room ? spare : room;
    return g > 0xFFFFu ? 0xFFFFu : g;
}

/* Sends one Data Transfer message with len bytes of data (0: a credit or keepalive message).
 * Waits for a send credit and a free send buffer. */
static int send_fragment(struct smbd_conn *c, const uint8_t *data, uint32_t len, uint32_t remaining,
                         uint16_t flags, UINT32 invalidate)
{
    for (;;) {
        if (c->state != SMBD_CONNECTED)
            return c->state == SMBD_FAILED ? -EPIPE : -ENOTCONN;
        unsigned grant = credits_to_grant(c);
        /* [MS-SMBD] 3.1.5.1: the last credit only for a message that grants credits, so the
         * peer can always answer */
        bool credit_ok = c->send_credits > 1 || (c->send_credits == 1 && grant > 0);
        if (credit_ok && c->sends_busy < c->nsend)
            break;
        int rc = progress(c, (int)c->p.negotiate_timeout_ms);
        if (rc == -ETIMEDOUT)
            return fail(c, -ETIMEDOUT, "no send credit from the peer for %u ms",
                        c->p.negotiate_timeout_ms);
        if (rc != 0)
            return rc;
    }
    unsigned slot = 0;
    while (c->send_busy[slot])
        slot++;
    uint8_t *buf = c->send_buf + (size_t)slot * c->p.max_send_size;
    unsigned grant = credits_to_grant(c);
    /* after this message we hold one credit or none, and the last one may only carry a grant:
     * ask the peer to answer at once so credits come back while we wait (3.1.5.1) */
    if (c->send_credits <= 2)
        flags |= SMBD_FLAG_RESPONSE_REQUESTED;
    struct smbd_data_header h = {
        .credits_requested = c->n.send_credit_target,
        .credits_granted = (uint16_t)grant,
        .flags = flags,
        .remaining_data_length = remaining,
        .data_length = len,
    };
    smbd_encode_data_header(&h, buf);
    if (len)
        memcpy(buf + SMBD_DATA_OFFSET, data, len);
    NDK_SGE sge = {.VirtualAddress = buf,
                   .Length = len ? SMBD_DATA_OFFSET + len : SMBD_DATA_HEADER_MIN,
                   .MemoryRegionToken = c->send_tok};
    NTSTATUS st = invalidate ? c->qp->Dispatch->NdkSendAndInvalidate(c->qp, &c->send_ops[slot],
                                                                     &sge, 1, 0, invalidate)
                             : c->qp->Dispatch->NdkSend(c->qp, &c->send_ops[slot], &sge, 1, 0);
    if (st != STATUS_SUCCESS)
        return fail(c, -EIO, "%s: %s", invalidate ? "NdkSendAndInvalidate" : "NdkSend",
                    SoftNdkStatusName(st));
    c->send_busy[slot] = true;
    c->sends_busy++;
    c->send_credits--;
    c->recv_granted += grant;
    c->st.credits_granted_to_peer += grant;
    c->st.fragments_sent++;
    c->response_requested = false;
    c->last_activity_ms = now_ms();
    return 0;
}

/* After handling completions: answer a RESPONSE_REQUESTED at once, and give credits back
 * before the peer runs out (it holds a quarter of its target or less and we have more
 * receives posted). */
static int maybe_grant(struct smbd_conn *c)
{
    if (c->state != SMBD_CONNECTED || c->send_credits == 0)
        return 0;
    unsigned grant = credits_to_grant(c);
    bool low = grant > 0 && c->recv_granted * 4 <= c->n.receive_credit_target;
    if (!c->response_requested && !low)
        return 0;
    if (c->send_credits == 1 && grant == 0)
        return 0;
    return send_fragment(c, NULL, 0, 0, 0, 0);
}

/* ---- the transport's operations ------------------------------------------------------------ */

static struct smbd_conn *conn_of(smb_transport *t)
{
    return (struct smbd_conn *)t;
}

static int send_message(struct smbd_conn *c, const void *msg, size_t len, UINT32 invalidate)
{
    if (c->state != SMBD_CONNECTED)
        return c->state == SMBD_FAILED ? -EPIPE : -ENOTCONN;
    if (len == 0 || len > c->n.max_fragmented_send) {
        snprintf(c->err, sizeof c->err, "message of %zu bytes: the peer takes 1 to %u", len,
                 c->n.max_fragmented_send);
        return -EMSGSIZE;
    }
    const uint8_t *p = msg;
    size_t per = c->n.max_send_size - SMBD_DATA_OFFSET;
    size_t off = 0;
    while (off < len) {
        size_t chunk = len - off < per ? len - off : per;
        bool last = off + chunk == len;
        int rc = send_fragment(c, p + off, (uint32_t)chunk, (uint32_t)(len - off - chunk), 0,
                               last ? invalidate : 0);
        if (rc != 0)
            return rc;
        off += chunk;
    }
    c->st.messages_sent++;
    c->st.bytes_sent += len;
    return 0;
}

static int smbd_send(smb_transport *t, const void *msg, size_t len)
{
    return send_message(conn_of(t), msg, len, 0);
}

static int smbd_send_invalidate(smb_transport *t, const void *msg, size_t len, uint32_t token)
{
    struct smbd_conn *c = conn_of(t);
    if (token == 0) {
        snprintf(c->err, sizeof c->err, "Send with Invalidate of token 0");
        return -EINVAL;
    }
    int rc = send_message(c, msg, len, token);
    if (rc == 0)
        c->st.send_invalidates++;
    return rc;
}

/* Registers [buf, buf+len) for local access by this connection's RDMA (one at a time). */
static int io_register(struct smbd_conn *c, void *buf, size_t len, UINT32 *tok)
{
    if (!c->io_mr) {
        NTSTATUS st = c->pd->Dispatch->NdkCreateMr(c->pd, FALSE, create_never, NULL, &c->io_mr);
        if (st != STATUS_SUCCESS)
            return fail(c, ndk_err(st), "NdkCreateMr: %s", SoftNdkStatusName(st));
    }
    MDL mdl;
    MmInitializeMdl(&mdl, buf, len);
    struct waiter w = {0};
    NTSTATUS st = w_wait(&w,
                         c->io_mr->Dispatch->NdkRegisterMr(
                             c->io_mr, &mdl, len,
                             NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK, w_cb, &w),
                         10000);
    if (st != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkRegisterMr: %s", SoftNdkStatusName(st));
    *tok = c->io_mr->Dispatch->NdkGetLocalTokenFromMr(c->io_mr);
    return 0;
}

static void io_deregister(struct smbd_conn *c)
{
    struct waiter w = {0};
    (void)w_wait(&w, c->io_mr->Dispatch->NdkDeregisterMr(c->io_mr, w_cb, &w), 10000);
}

/* Waits until at most `most` of our RDMA operations are in flight. */
static int rdma_wait(struct smbd_conn *c, unsigned most)
{
    while (c->rdma_busy > most) {
        int rc = progress(c, 30000);
        if (rc == -ETIMEDOUT)
            return fail(c, -ETIMEDOUT, "RDMA did not complete in 30 s");
        if (rc != 0)
            return rc;
    }
    if (c->rdma_status != STATUS_SUCCESS) {
        NTSTATUS st = c->rdma_status;
        return fail(c,
                    st == STATUS_ACCESS_VIOLATION || st == STATUS_REMOTE_RESOURCES ? -EACCES : -EIO,
                    "the peer refused our RDMA: %s", SoftNdkStatusName(st));
    }
    return 0;
}

/* [MS-SMB2] 3.3.5.12 / 3.3.5.13 over SMB Direct: move len bytes between buf and the peer's
 * buffers the descriptors name, in descriptor order. */
static int peer_rdma(smb_transport *t, const smb_buffer_desc *desc, unsigned ndesc, void *buf,
                     size_t len, bool write)
{
    struct smbd_conn *c = conn_of(t);
    if (c->state != SMBD_CONNECTED)
        return c->state == SMBD_FAILED ? -EPIPE : -ENOTCONN;
    uint64_t have = 0;
    for (unsigned k = 0; k < ndesc; k++)
        have += desc[k].length;
    if (len == 0 || have < len) {
        snprintf(c->err, sizeof c->err, "%zu bytes for descriptors of %llu bytes", len,
                 (unsigned long long)have);
        return -EINVAL;
    }
    if (len > c->n.max_read_write_size) {
        snprintf(c->err, sizeof c->err, "%zu bytes: above MaxReadWriteSize %u", len,
                 c->n.max_read_write_size);
        return -EINVAL;
    }
    UINT32 tok = 0;
    int rc = io_register(c, buf, len, &tok);
    if (rc != 0)
        return rc;
    c->rdma_status = STATUS_SUCCESS;
    size_t off = 0;
    for (unsigned k = 0; k < ndesc && off < len && rc == 0; k++) {
        size_t n = desc[k].length < len - off ? desc[k].length : len - off;
        if (!write && (rc = rdma_wait(c, c->ord - 1)) != 0)
            break;
        NDK_SGE sge = {
            .VirtualAddress = (uint8_t *)buf + off, .Length = (ULONG)n, .MemoryRegionToken = tok};
        NTSTATUS st = write ? c->qp->Dispatch->NdkWrite(c->qp, &c->rdma_op, &sge, 1, desc[k].offset,
                                                        desc[k].token, 0)
                            : c->qp->Dispatch->NdkRead(c->qp, &c->rdma_op, &sge, 1, desc[k].offset,
                                                       desc[k].token, 0);
        if (st != STATUS_SUCCESS) {
            rc = fail(c, -EIO, "%s: %s", write ? "NdkWrite" : "NdkRead", SoftNdkStatusName(st));
            break;
        }
        c->rdma_busy++;
        if (write)
            c->st.rdma_writes++;
        else
            c->st.rdma_reads++;
        off += n;
    }
    int wrc = rdma_wait(c, 0);
    if (rc == 0)
        rc = wrc;
    if (c->state == SMBD_CONNECTED || c->rdma_busy == 0)
        io_deregister(c);
    return rc;
}

static int smbd_peer_write(smb_transport *t, const smb_buffer_desc *desc, unsigned ndesc,
                           const void *src, size_t len)
{
    return peer_rdma(t, desc, ndesc, (void *)src, len, true);
}

static int smbd_peer_read(smb_transport *t, const smb_buffer_desc *desc, unsigned ndesc, void *dst,
                          size_t len)
{
    return peer_rdma(t, desc, ndesc, dst, len, false);
}

static int smbd_recv(smb_transport *t, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct smbd_conn *c = conn_of(t);
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
    bool keepalive_sent = false;
    while (!c->q_head) {
        if (c->state != SMBD_CONNECTED)
            return c->state == SMBD_FAILED ? -EPIPE : -ENOTCONN;
        uint64_t now = now_ms();
        if (now >= end) {
            /* the caller's deadline, not a failure: the connection stays, but the caller that
             * gives up says why (an empty reason read "receive: " in ndksmb's error) */
            snprintf(c->err, sizeof c->err, "no message within %d ms", timeout_ms);
            return -ETIMEDOUT;
        }
        /* [MS-SMBD] 3.1.6.2 idle timer: after keepalive_ms without traffic, ask the peer for a
         * response; after a second period without one, the peer is gone */
        if (now - c->last_activity_ms >= c->p.keepalive_ms) {
            if (keepalive_sent)
                return fail(c, -ETIMEDOUT, "peer silent for %u ms after a keepalive",
                            c->p.keepalive_ms);
            int rc = send_fragment(c, NULL, 0, 0, SMBD_FLAG_RESPONSE_REQUESTED, 0);
            if (rc != 0)
                return rc;
            c->st.keepalives_sent++;
            keepalive_sent = true;
        }
        uint64_t left = end - now;
        if (left > c->p.keepalive_ms)
            left = c->p.keepalive_ms;
        int rc = progress(c, (int)left);
        if (rc != 0 && rc != -ETIMEDOUT)
            return rc;
        if (rc == 0)
            keepalive_sent = false;
        if ((rc = maybe_grant(c)) != 0)
            return rc;
    }
    struct queued_msg *m = c->q_head;
    c->q_head = m->next;
    if (!c->q_head)
        c->q_tail = NULL;
    int rc = 0;
    if (m->len > cap) {
        snprintf(c->err, sizeof c->err, "message of %zu bytes for a %zu-byte buffer", m->len, cap);
        rc = -EMSGSIZE;
    } else {
        memcpy(buf, m->data, m->len);
        *len = m->len;
    }
    free(m);
    if (rc == 0)
        rc = maybe_grant(c);
    return rc;
}

static int mr_slot_get(struct smbd_conn *c, unsigned *out)
{
    for (unsigned i = 0; i < c->nmr; i++)
        if (c->mrs[i].state == MR_FREE) {
            *out = i;
            return 0;
        }
    if (c->nmr == SMBD_MR_POOL)
        return -EBUSY;
    struct mr_slot *m = &c->mrs[c->nmr];
    NTSTATUS st = c->pd->Dispatch->NdkCreateMr(c->pd, TRUE, create_never, NULL, &m->mr);
    if (st != STATUS_SUCCESS) {
        snprintf(c->err, sizeof c->err, "NdkCreateMr: %s", SoftNdkStatusName(st));
        return -ENOMEM;
    }
    struct waiter w = {0};
    st = w_wait(&w,
                m->mr->Dispatch->NdkInitializeFastRegisterMr(m->mr, c->frmr_pages, TRUE, w_cb, &w),
                10000);
    if (st != STATUS_SUCCESS) {
        close_obj(m->mr->Dispatch->NdkCloseMr, &m->mr->Header);
        m->mr = NULL;
        snprintf(c->err, sizeof c->err, "NdkInitializeFastRegisterMr: %s", SoftNdkStatusName(st));
        return -EIO;
    }
    m->state = MR_FREE;
    m->op.kind = OP_MR;
    m->op.index = c->nmr;
    *out = c->nmr++;
    return 0;
}

/* Waits until MR slot i leaves state `from`. */
static int mr_wait(struct smbd_conn *c, unsigned i, enum mr_state from)
{
    while (c->mrs[i].state == from) {
        int rc = progress(c, 10000);
        if (rc == -ETIMEDOUT)
            return fail(c, -ETIMEDOUT, "a memory registration did not complete in 10 s");
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int invalidate_slot(struct smbd_conn *c, unsigned i)
{
    struct mr_slot *m = &c->mrs[i];
    if (m->lam) {
        c->adapter->Dispatch->NdkReleaseLAM(c->adapter, m->lam);
        free(m->lam);
        m->lam = NULL;
    }
    if (m->state == MR_PEER_INVALIDATED) {
        mr_set(c, i, MR_FREE);
        c->st.remote_invalidations++;
        return 1;
    }
    if (m->state != MR_VALID)
        return 0;
    if (c->state != SMBD_CONNECTED) {
        /* the QP is gone or going: the token dies with it; the MR is not reused */
        mr_set(c, i, MR_BROKEN);
        return 0;
    }
    mr_set(c, i, MR_INVALIDATING);
    NTSTATUS st = c->qp->Dispatch->NdkInvalidate(c->qp, &m->op, &m->mr->Header, 0);
    if (st != STATUS_SUCCESS) {
        mr_set(c, i, MR_BROKEN);
        return fail(c, -EIO, "NdkInvalidate: %s", SoftNdkStatusName(st));
    }
    int rc = mr_wait(c, i, MR_INVALIDATING);
    if (rc != 0)
        return rc;
    c->st.local_invalidations++;
    return 0;
}

static int smbd_release_buffer(smb_transport *t, smb_rdma_region *region,
                               enum smb_rdma_release *how)
{
    struct smbd_conn *c = conn_of(t);
    int rc = 0;
    bool first_by_peer = false;
    for (unsigned k = 0; k < region->n; k++) {
        int r = invalidate_slot(c, region->slot[k]);
        if (r == 1 && k == 0)
            first_by_peer = true;
        if (r < 0 && rc == 0)
            rc = r;
    }
    if (how)
        *how = first_by_peer ? SMB_RDMA_RELEASED_BY_PEER : SMB_RDMA_RELEASED_LOCALLY;
    free(region);
    return rc;
}

static int register_piece(struct smbd_conn *c, uint8_t *va, size_t len, ULONG flags,
                          unsigned *slot_out, smb_buffer_desc *d)
{
    unsigned i;
    int rc = mr_slot_get(c, &i);
    if (rc != 0)
        return rc;
    struct mr_slot *m = &c->mrs[i];
    MDL mdl;
    MmInitializeMdl(&mdl, va, len);
    ULONG lam_size = 0, fbo = 0;
    NTSTATUS st =
        c->adapter->Dispatch->NdkBuildLAM(c->adapter, &mdl, len, NULL, NULL, NULL, &lam_size, &fbo);
    if (st != STATUS_BUFFER_TOO_SMALL) {
        snprintf(c->err, sizeof c->err, "NdkBuildLAM (size): %s", SoftNdkStatusName(st));
        return -EIO;
    }
    m->lam = malloc(lam_size);
    if (!m->lam)
        return -ENOMEM;
    struct waiter w = {0};
    st = w_wait(
        &w,
        c->adapter->Dispatch->NdkBuildLAM(c->adapter, &mdl, len, w_cb, &w, m->lam, &lam_size, &fbo),
        10000);
    if (st != STATUS_SUCCESS) {
        free(m->lam);
        m->lam = NULL;
        snprintf(c->err, sizeof c->err, "NdkBuildLAM: %s", SoftNdkStatusName(st));
        return -EIO;
    }
    mr_set(c, i, MR_REGISTERING);
    st = c->qp->Dispatch->NdkFastRegister(c->qp, &m->op, m->mr, m->lam->AdapterPageCount,
                                          m->lam->AdapterPageArray, fbo, len, va, flags);
    if (st != STATUS_SUCCESS) {
        mr_set(c, i, MR_FREE);
        c->adapter->Dispatch->NdkReleaseLAM(c->adapter, m->lam);
        free(m->lam);
        m->lam = NULL;
        return fail(c, -EIO, "NdkFastRegister: %s", SoftNdkStatusName(st));
    }
    if ((rc = mr_wait(c, i, MR_REGISTERING)) != 0)
        return rc;
    m->token = m->mr->Dispatch->NdkGetRemoteTokenFromMr(m->mr);
    d->offset = (uint64_t)(uintptr_t)va;
    d->token = m->token;
    d->length = (uint32_t)len;
    *slot_out = i;
    c->st.regions_registered++;
    return 0;
}

static int smbd_register_buffer(smb_transport *t, void *buf, size_t len,
                                enum smb_rdma_access access, smb_rdma_region **region,
                                smb_buffer_desc *desc, unsigned max_desc, unsigned *ndesc)
{
    struct smbd_conn *c = conn_of(t);
    if (c->state != SMBD_CONNECTED)
        return c->state == SMBD_FAILED ? -EPIPE : -ENOTCONN;
    if (len == 0 || len > c->n.max_read_write_size) {
        snprintf(c->err, sizeof c->err, "RDMA region of %zu bytes: 1 to %u allowed", len,
                 c->n.max_read_write_size);
        return -EINVAL;
    }
    ULONG flags = access == SMB_RDMA_PEER_WRITES ? NDK_OP_FLAG_ALLOW_REMOTE_WRITE
                                                 : NDK_OP_FLAG_ALLOW_REMOTE_READ;
    /* a piece may start anywhere in a page: one page of the MR's capacity is kept for that */
    size_t per = (size_t)(c->frmr_pages - 1) * NDK_ADAPTER_PAGE_SIZE;
    unsigned need = (unsigned)((len + per - 1) / per);
    if (need > max_desc || need > SMBD_MAX_REGION_PIECES) {
        snprintf(c->err, sizeof c->err, "RDMA region of %zu bytes needs %u descriptors", len, need);
        return -E2BIG;
    }
    smb_rdma_region *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    uint8_t *p = buf;
    for (size_t off = 0; off < len; off += per) {
        size_t piece = len - off < per ? len - off : per;
        int rc = register_piece(c, p + off, piece, flags, &r->slot[r->n], &desc[r->n]);
        if (rc != 0) {
            smbd_release_buffer(t, r, NULL);
            return rc;
        }
        r->n++;
    }
    *ndesc = r->n;
    *region = r;
    return 0;
}

static size_t smbd_max_message(smb_transport *t)
{
    struct smbd_conn *c = conn_of(t);
    return c->n.max_fragmented_send < c->n.max_fragmented_receive ? c->n.max_fragmented_send
                                                                  : c->n.max_fragmented_receive;
}

static size_t smbd_max_rdma(smb_transport *t)
{
    return conn_of(t)->n.max_read_write_size;
}

static void smbd_get_stats(smb_transport *t, smb_transport_stats *out)
{
    *out = conn_of(t)->st;
}

static const char *smbd_error(smb_transport *t)
{
    return conn_of(t)->err;
}

void smbd_get_negotiated(smb_transport *t, smbd_negotiated *out)
{
    *out = conn_of(t)->n;
}

/* Requests this side posted to the QP and not yet completed: sends, RDMA, fast registers and
 * invalidations. */
static unsigned posted_requests(const struct smbd_conn *c)
{
    unsigned n = c->sends_busy + c->rdma_busy;
    for (unsigned i = 0; i < c->nmr; i++)
        n += c->mrs[i].state == MR_REGISTERING || c->mrs[i].state == MR_INVALIDATING;
    return n;
}

/* Waits (at most ms) for the completions of every request this side posted, whatever the
 * state: progress() stops at the first failure, and a failed connection still has its sends
 * on the QP. Receives that complete meanwhile are dropped: nobody reads any more. */
static bool drain_posted(struct smbd_conn *c, unsigned ms)
{
    uint64_t end = now_ms() + ms;
    while (posted_requests(c) > 0) {
        unsigned seen = atomic_load_explicit(&c->cq_events, memory_order_acquire);
        NDK_RESULT_EX res[32];
        ULONG n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, res, 32);
        if (n == 0) {
            c->cq->Dispatch->NdkArmCq(c->cq, NDK_CQ_NOTIFY_ANY);
            n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, res, 32);
        }
        for (ULONG i = 0; i < n; i++) {
            const struct smbd_op *op = res[i].RequestContext;
            if (op->kind == OP_RECV)
                c->recv_posted--;
            else
                (void)handle_completion(c, &res[i]); /* failures are the connection's */
        }
        if (n > 0)
            continue;
        uint64_t now = now_ms();
        if (now >= end)
            return false;
        uint64_t left = end - now;
        futex_wait_ms(&c->cq_events, seen, left > 1000 ? 1000 : (unsigned)left);
    }
    return true;
}

/* Orderly disconnect where the connection was established, then every object closed (the
 * QP's close flushes what is still posted). */
static void smbd_destroy(smb_transport *t)
{
    struct smbd_conn *c = conn_of(t);
    struct waiter w = {0}; /* here, not in the block: a disconnect cancelled by the close
                            * below completes into it */
    /* NdkDisconnect ends an established connection only (NDK: not while NdkConnect is
     * pending or after it failed), and gracefully only with no request of ours outstanding
     * (NDKPI's disconnect scheme, rule 6): the sends already posted go out before the FIN.
     * Otherwise the connector's close ends the connection, abortively. */
    if (c->conn && c->established && drain_posted(c, 5000))
        w_wait(&w, c->conn->Dispatch->NdkDisconnect(c->conn, w_cb, &w), 15000);
    if (c->state == SMBD_CONNECTING || c->state == SMBD_NEGOTIATING)
        set_state(c, SMBD_FAILED, "closed during setup");
    set_state(c, SMBD_CLOSED, "closed by the consumer");
    if (c->conn)
        close_obj(c->conn->Dispatch->NdkCloseConnector, &c->conn->Header);
    if (c->qp)
        close_obj(c->qp->Dispatch->NdkCloseQp, &c->qp->Header);
    for (unsigned i = 0; i < c->nmr; i++) {
        if (c->mrs[i].lam) {
            c->adapter->Dispatch->NdkReleaseLAM(c->adapter, c->mrs[i].lam);
            free(c->mrs[i].lam);
        }
        close_obj(c->mrs[i].mr->Dispatch->NdkCloseMr, &c->mrs[i].mr->Header);
    }
    if (c->io_mr)
        close_obj(c->io_mr->Dispatch->NdkCloseMr, &c->io_mr->Header);
    if (c->recv_mr)
        close_obj(c->recv_mr->Dispatch->NdkCloseMr, &c->recv_mr->Header);
    if (c->send_mr)
        close_obj(c->send_mr->Dispatch->NdkCloseMr, &c->send_mr->Header);
    if (c->cq)
        close_obj(c->cq->Dispatch->NdkCloseCq, &c->cq->Header);
    if (c->pd)
        close_obj(c->pd->Dispatch->NdkClosePd, &c->pd->Header);
    while (c->q_head) {
        struct queued_msg *m = c->q_head;
        c->q_head = m->next;
        free(m);
    }
    free(c->reasm);
    free(c->recv_buf);
    free(c->send_buf);
    free(c->recv_ops);
    free(c->send_ops);
    free(c->send_busy);
    free(c);
}

static const smb_transport_ops smbd_ops = {
    .name = "smbdirect",
    .send = smbd_send,
    .recv = smbd_recv,
    .register_buffer = smbd_register_buffer,
    .release_buffer = smbd_release_buffer,
    .max_message = smbd_max_message,
    .max_rdma = smbd_max_rdma,
    .get_stats = smbd_get_stats,
    .error = smbd_error,
    .destroy = smbd_destroy,
};

/* The Responder moves data with its own RDMA into and out of buffers the Initiator offers;
 * it registers none for the peer. */
static const smb_transport_ops smbd_responder_ops = {
    .name = "smbdirect",
    .send = smbd_send,
    .recv = smbd_recv,
    .peer_write = smbd_peer_write,
    .peer_read = smbd_peer_read,
    .send_invalidate = smbd_send_invalidate,
    .max_message = smbd_max_message,
    .max_rdma = smbd_max_rdma,
    .get_stats = smbd_get_stats,
    .error = smbd_error,
    .destroy = smbd_destroy,
};

/* ---- connecting ---------------------------------------------------------------------------- */

static void defaults(smbd_params *p)
{
    if (!p->receive_credit_max)
        p->receive_credit_max = 255;
    if (!p->send_credit_target)
        p->send_credit_target = 255;
    if (!p->max_send_size)
        p->max_send_size = 1364;
    if (!p->max_receive_size)
        p->max_receive_size = 1364;
    if (!p->max_fragmented_size)
        p->max_fragmented_size = 1u << 20;
    if (!p->max_read_write_size)
        p->max_read_write_size = 8u << 20;
    if (!p->inbound_read_limit)
        p->inbound_read_limit = 16;
    if (!p->keepalive_ms)
        p->keepalive_ms = 120000;
    if (!p->negotiate_timeout_ms)
        p->negotiate_timeout_ms = 120000;
}

static int ndk_err(NTSTATUS st)
{
    switch (st) {
    case STATUS_CONNECTION_REFUSED:
        return -ECONNREFUSED;
    case STATUS_IO_TIMEOUT:
        return -ETIMEDOUT;
    case STATUS_CONNECTION_RESET:
    case STATUS_CONNECTION_ABORTED:
        return -ECONNRESET;
    case STATUS_INSUFFICIENT_RESOURCES:
        return -ENOMEM;
    case STATUS_NETWORK_UNREACHABLE:
        return -ENETUNREACH;
    case STATUS_HOST_UNREACHABLE:
        return -EHOSTUNREACH;
    default:
        return -EIO;
    }
}

static int setup_objects(struct smbd_conn *c)
{
    NDK_ADAPTER *a = c->adapter;
    NDK_ADAPTER_INFO info;
    ULONG isz = sizeof info;
    memset(&info, 0, sizeof info);
    NTSTATUS st = a->Dispatch->NdkQueryAdapterInfo(a, &info, &isz);
    if (st != STATUS_SUCCESS)
        return fail(c, -EIO, "NdkQueryAdapterInfo: %s", SoftNdkStatusName(st));
    /* enough pages for the largest region plus a partial first page */
    ULONG pages = c->p.max_read_write_size / NDK_ADAPTER_PAGE_SIZE + 1;
    c->frmr_pages = pages < info.FRMRPageCount ? pages : info.FRMRPageCount;
    if (c->p.inbound_read_limit > info.MaxInboundReadLimit)
        c->p.inbound_read_limit = info.MaxInboundReadLimit;
    c->nrecv = c->p.receive_credit_max;
    c->nsend = 64;
    if ((st = a->Dispatch->NdkCreatePd(a, create_never, NULL, &c->pd)) != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkCreatePd: %s", SoftNdkStatusName(st));
    ULONG depth = c->nrecv + c->nsend + 2 * SMBD_MR_POOL + 8;
    if ((st = a->Dispatch->NdkCreateCq(a, depth, on_cq, c, NULL, create_never, NULL, &c->cq)) !=
        STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkCreateCq: %s", SoftNdkStatusName(st));
    if ((st = c->pd->Dispatch->NdkCreateQp(c->pd, c->cq, c->cq, c, c->nrecv,
                                           c->nsend + 2 * SMBD_MR_POOL + 8, 1, 1, 0, create_never,
                                           NULL, &c->qp)) != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkCreateQp: %s", SoftNdkStatusName(st));
    c->recv_buf = calloc(c->nrecv, c->p.max_receive_size);
    c->send_buf = calloc(c->nsend, c->p.max_send_size);
    c->recv_ops = calloc(c->nrecv, sizeof *c->recv_ops);
    c->send_ops = calloc(c->nsend, sizeof *c->send_ops);
    c->send_busy = calloc(c->nsend, sizeof *c->send_busy);
    if (!c->recv_buf || !c->send_buf || !c->recv_ops || !c->send_ops || !c->send_busy)
        return fail(c, -ENOMEM, "out of memory for the message buffers");
    for (unsigned i = 0; i < c->nrecv; i++)
        c->recv_ops[i] = (struct smbd_op){OP_RECV, i};
    for (unsigned i = 0; i < c->nsend; i++)
        c->send_ops[i] = (struct smbd_op){OP_SEND, i};
    struct {
        NDK_MR **mr;
        uint8_t *buf;
        size_t len;
        UINT32 *tok;
    } regs[2] = {
        {&c->recv_mr, c->recv_buf, (size_t)c->nrecv * c->p.max_receive_size, &c->recv_tok},
        {&c->send_mr, c->send_buf, (size_t)c->nsend * c->p.max_send_size, &c->send_tok},
    };
    for (int k = 0; k < 2; k++) {
        if ((st = c->pd->Dispatch->NdkCreateMr(c->pd, FALSE, create_never, NULL, regs[k].mr)) !=
            STATUS_SUCCESS)
            return fail(c, ndk_err(st), "NdkCreateMr: %s", SoftNdkStatusName(st));
        MDL mdl;
        MmInitializeMdl(&mdl, regs[k].buf, regs[k].len);
        struct waiter w = {0};
        st = w_wait(&w,
                    (*regs[k].mr)
                        ->Dispatch->NdkRegisterMr(*regs[k].mr, &mdl, regs[k].len,
                                                  NDK_MR_FLAG_ALLOW_LOCAL_WRITE, w_cb, &w),
                    10000);
        if (st != STATUS_SUCCESS)
            return fail(c, ndk_err(st), "NdkRegisterMr: %s", SoftNdkStatusName(st));
        *regs[k].tok = (*regs[k].mr)->Dispatch->NdkGetLocalTokenFromMr(*regs[k].mr);
    }
    /* [MS-SMBD] 3.1.5.2: receives are posted before the connection exists, so the peer's
     * Negotiate Response (and, later, every message it has credit for) finds one */
    for (unsigned i = 0; i < c->nrecv; i++) {
        int rc = post_recv(c, i);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int connect_and_negotiate(struct smbd_conn *c, const struct sockaddr *dst, socklen_t dst_len)
{
    NDK_ADAPTER *a = c->adapter;
    NTSTATUS st = a->Dispatch->NdkCreateConnector(a, create_never, NULL, &c->conn);
    if (st != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkCreateConnector: %s", SoftNdkStatusName(st));
    struct sockaddr_storage src;
    memset(&src, 0, sizeof src);
    socklen_t src_len;
    if (dst->sa_family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)&src;
        struct sockaddr_in d; /* copied: dst may be less aligned than a sockaddr_in */
        memcpy(&d, dst, sizeof d);
        s->sin_family = AF_INET;
        /* a loopback peer is reached from the loopback address, as the kernel would choose */
        if ((ntohl(d.sin_addr.s_addr) >> 24) == 127)
            s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        src_len = sizeof *s;
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&src;
        s->sin6_family = AF_INET6;
        struct sockaddr_in6 d;
        memcpy(&d, dst, sizeof d);
        if (IN6_IS_ADDR_LOOPBACK(&d.sin6_addr))
            s->sin6_addr = in6addr_loopback;
        src_len = sizeof *s;
    }
    set_state(c, SMBD_CONNECTING, "NdkConnect");
    /* IRD: the peer RDMA-Reads our buffers for an SMB2 WRITE; we never Read (ORD 0) */
    struct waiter w = {0};
    st = w_wait(&w,
                c->conn->Dispatch->NdkConnect(c->conn, c->qp, (struct sockaddr *)&src, src_len, dst,
                                              dst_len, c->p.inbound_read_limit, 0, NULL, 0, w_cb,
                                              &w),
                60000);
    if (st != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkConnect: %s", SoftNdkStatusName(st));
    struct waiter w2 = {0};
    st = w_wait(&w2, c->conn->Dispatch->NdkCompleteConnect(c->conn, on_disconnect, c, w_cb, &w2),
                60000);
    if (st != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkCompleteConnect: %s", SoftNdkStatusName(st));
    c->established = true;
    /* [MS-SMBD] 3.1.5.2: the Initiator's first message is the Negotiate Request */
    struct smbd_negotiate_request req = {
        .min_version = SMBD_VERSION_1,
        .max_version = SMBD_VERSION_1,
        .credits_requested = c->p.send_credit_target,
        .preferred_send_size = c->p.max_send_size,
        .max_receive_size = c->p.max_receive_size,
        .max_fragmented_size = c->p.max_fragmented_size,
    };
    smbd_encode_negotiate_request(&req, c->send_buf);
    NDK_SGE sge = {.VirtualAddress = c->send_buf,
                   .Length = SMBD_NEGOTIATE_REQUEST_SIZE,
                   .MemoryRegionToken = c->send_tok};
    set_state(c, SMBD_NEGOTIATING, "negotiate request");
    st = c->qp->Dispatch->NdkSend(c->qp, &c->send_ops[0], &sge, 1, 0);
    if (st != STATUS_SUCCESS)
        return fail(c, -EIO, "NdkSend: %s", SoftNdkStatusName(st));
    c->send_busy[0] = true;
    c->sends_busy++;
    uint64_t end = now_ms() + c->p.negotiate_timeout_ms;
    while (c->state == SMBD_NEGOTIATING) {
        uint64_t now = now_ms();
        if (now >= end)
            return fail(c, -ETIMEDOUT, "no negotiate response in %u ms", c->p.negotiate_timeout_ms);
        int rc = progress(c, (int)(end - now));
        if (rc != 0 && rc != -ETIMEDOUT)
            return rc;
    }
    return c->state == SMBD_CONNECTED ? 0 : -EPROTO;
}

int smbd_connect(NDK_ADAPTER *adapter, const struct sockaddr *dst, socklen_t dst_len,
                 const smbd_params *params, smb_transport **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!adapter || !dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)) {
        snprintf(err, errlen, "smbd_connect: an adapter and an IPv4 or IPv6 address are needed");
        return -EINVAL;
    }
    struct smbd_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->base.ops = &smbd_ops;
    c->adapter = adapter;
    if (params)
        c->p = *params;
    defaults(&c->p);
    if (c->p.max_receive_size < SMBD_MIN_RECEIVE_SIZE || c->p.max_send_size <= SMBD_DATA_OFFSET ||
        c->p.max_fragmented_size < SMBD_MIN_FRAGMENTED_SIZE) {
        snprintf(err, errlen, "smbd_connect: sizes below [MS-SMBD]'s minimums");
        free(c);
        return -EINVAL;
    }
    c->state = SMBD_CREATED;
    c->last_activity_ms = now_ms();
    int rc = setup_objects(c);
    if (rc == 0)
        rc = connect_and_negotiate(c, dst, dst_len);
    if (rc != 0) {
        snprintf(err, errlen, "%s", c->err[0] ? c->err : strerror(-rc));
        smbd_destroy(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}

/* ---- the Responder ------------------------------------------------------------------------- */

#define SMBD_BACKLOG 64

struct smbd_listener {
    NDK_ADAPTER *adapter;
    NDK_LISTENER *l;
    smbd_params p;
    pthread_mutex_t m;
    _Atomic unsigned events; /* futex word: bumped per connect event */
    NDK_CONNECTOR *incoming[SMBD_BACKLOG];
    unsigned head, count;
    bool paused;  /* connect events paused: the backlog was full, or closing */
    bool closing; /* smbd_listener_close: nothing more is queued */
    uint16_t port;
};

static void on_connect_event(void *ctx, NDK_CONNECTOR *conn)
{
    struct smbd_listener *l = ctx;
    pthread_mutex_lock(&l->m);
    if (l->count == SMBD_BACKLOG || l->closing) {
        /* The pause came too late for this one: with several progress threads the events of
         * other connectors can be on their way when it is asked (by the full backlog below or
         * by smbd_listener_close). Refused as a paused listener refuses (closing an
         * unanswered connector is NdkReject: the peer sees STATUS_CONNECTION_REFUSED); not
         * waited for, as this is a callback. */
        pthread_mutex_unlock(&l->m);
        conn->Dispatch->NdkCloseConnector(&conn->Header, NULL, NULL);
        return;
    }
    l->incoming[(l->head + l->count++) % SMBD_BACKLOG] = conn;
    /* NDK's flow control: a paused listener refuses new requests (the peer sees
     * STATUS_CONNECTION_REFUSED) until smbd_accept drains the backlog. Asked under the lock,
     * so that a resume by take_incoming cannot overtake it and leave the listener paused with
     * an empty backlog (the call only sets a flag). */
    if (l->count == SMBD_BACKLOG && !l->paused) {
        l->paused = true;
        l->l->Dispatch->NdkControlConnectEvents(l->l, TRUE);
    }
    pthread_mutex_unlock(&l->m);
    atomic_fetch_add_explicit(&l->events, 1, memory_order_release);
    futex_wake(&l->events);
}

int smbd_listen(NDK_ADAPTER *adapter, const struct sockaddr *addr, socklen_t addr_len,
                const smbd_params *params, smbd_listener **out, char *err, size_t errlen)
{
    *out = NULL;
    struct smbd_listener *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    l->adapter = adapter;
    if (params)
        l->p = *params;
    defaults(&l->p);
    pthread_mutex_init(&l->m, NULL);
    NTSTATUS st = adapter->Dispatch->NdkCreateListener(adapter, on_connect_event, l, create_never,
                                                       NULL, &l->l);
    if (st != STATUS_SUCCESS) {
        snprintf(err, errlen, "NdkCreateListener: %s", SoftNdkStatusName(st));
        pthread_mutex_destroy(&l->m);
        free(l);
        return ndk_err(st);
    }
    struct waiter w = {0};
    st = w_wait(&w, l->l->Dispatch->NdkListen(l->l, addr, addr_len, w_cb, &w), 10000);
    if (st != STATUS_SUCCESS) {
        snprintf(err, errlen, "NdkListen: %s", SoftNdkStatusName(st));
        close_obj(l->l->Dispatch->NdkCloseListener, &l->l->Header);
        pthread_mutex_destroy(&l->m);
        free(l);
        return st == STATUS_ADDRESS_ALREADY_EXISTS || st == STATUS_SHARING_VIOLATION ? -EADDRINUSE
                                                                                     : ndk_err(st);
    }
    struct sockaddr_storage got;
    ULONG glen = sizeof got;
    if (l->l->Dispatch->NdkGetLocalAddress(l->l, (struct sockaddr *)&got, &glen) == STATUS_SUCCESS)
        l->port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                 : ((struct sockaddr_in6 *)&got)->sin6_port);
    *out = l;
    return 0;
}

uint16_t smbd_listener_port(const smbd_listener *l)
{
    return l->port;
}

static NDK_CONNECTOR *take_incoming(struct smbd_listener *l)
{
    NDK_CONNECTOR *c = NULL;
    pthread_mutex_lock(&l->m);
    if (l->count) {
        c = l->incoming[l->head];
        l->head = (l->head + 1) % SMBD_BACKLOG;
        l->count--;
        /* resumed at half, not at once: a full backlog is a burst, and its tail should not
         * meet a listener that pauses again at the next request */
        if (l->paused && l->count <= SMBD_BACKLOG / 2) {
            l->paused = false;
            l->l->Dispatch->NdkControlConnectEvents(l->l, FALSE);
        }
    }
    pthread_mutex_unlock(&l->m);
    return c;
}

/* The Responder's side of [MS-SMBD] 3.1.5.6: the response to a valid request. */
static int send_negotiate_response(struct smbd_conn *c)
{
    const struct smbd_negotiate_request *q = &c->peer_req;
    c->n.max_receive_size = q->preferred_send_size < c->p.max_receive_size ? q->preferred_send_size
                                                                           : c->p.max_receive_size;
    c->n.max_send_size =
        q->max_receive_size < c->p.max_send_size ? q->max_receive_size : c->p.max_send_size;
    if (c->n.max_send_size <= SMBD_DATA_OFFSET || c->n.max_receive_size < SMBD_MIN_RECEIVE_SIZE)
        return fail(c, -EPROTO, "the peer's sizes (send %u, receive %u) leave no room for data",
                    q->preferred_send_size, q->max_receive_size);
    c->n.max_fragmented_send = q->max_fragmented_size;
    c->n.max_fragmented_receive = c->p.max_fragmented_size;
    c->n.max_read_write_size = c->p.max_read_write_size;
    c->n.receive_credit_target = q->credits_requested;
    c->n.send_credit_target = c->p.send_credit_target;
    /* the Initiator gives us credits with its first data message */
    c->send_credits = 0;
    unsigned grant = credits_to_grant(c);
    struct smbd_negotiate_response r = {
        .min_version = SMBD_VERSION_1,
        .max_version = SMBD_VERSION_1,
        .negotiated_version = SMBD_VERSION_1,
        .credits_requested = c->p.send_credit_target,
        .credits_granted = (uint16_t)grant,
        .max_read_write_size = c->n.max_read_write_size,
        .preferred_send_size = c->n.max_send_size,
        .max_receive_size = c->n.max_receive_size,
        .max_fragmented_size = c->n.max_fragmented_receive,
    };
    unsigned slot = 0;
    while (c->send_busy[slot])
        slot++;
    uint8_t *buf = c->send_buf + (size_t)slot * c->p.max_send_size;
    smbd_encode_negotiate_response(&r, buf);
    NDK_SGE sge = {.VirtualAddress = buf,
                   .Length = SMBD_NEGOTIATE_RESPONSE_SIZE,
                   .MemoryRegionToken = c->send_tok};
    NTSTATUS st = c->qp->Dispatch->NdkSend(c->qp, &c->send_ops[slot], &sge, 1, 0);
    if (st != STATUS_SUCCESS)
        return fail(c, -EIO, "NdkSend: %s", SoftNdkStatusName(st));
    c->send_busy[slot] = true;
    c->sends_busy++;
    c->recv_granted += grant;
    c->st.credits_granted_to_peer += grant;
    set_state(c, SMBD_CONNECTED, "negotiate response sent");
    return 0;
}

static int accept_one(struct smbd_listener *l, NDK_CONNECTOR *conn, struct smbd_conn *c)
{
    c->conn = conn;
    int rc = setup_objects(c);
    if (rc != 0)
        return rc;
    ULONG peer_ird = 0, peer_ord = 0, pdl = 0;
    NTSTATUS st = conn->Dispatch->NdkGetConnectionData(conn, &peer_ird, &peer_ord, NULL, &pdl);
    if (st != STATUS_SUCCESS && st != STATUS_BUFFER_TOO_SMALL)
        return fail(c, -EIO, "NdkGetConnectionData: %s", SoftNdkStatusName(st));
    /* our RDMA Reads in flight: what the peer takes (its IRD), at most 16 */
    c->ord = peer_ird < 16 ? peer_ird : 16;
    if (c->ord == 0)
        c->ord = 1;
    set_state(c, SMBD_CONNECTING, "NdkAccept");
    struct waiter w = {0};
    st = w_wait(
        &w, conn->Dispatch->NdkAccept(conn, c->qp, 1, c->ord, NULL, 0, on_disconnect, c, w_cb, &w),
        30000);
    if (st != STATUS_SUCCESS)
        return fail(c, ndk_err(st), "NdkAccept: %s", SoftNdkStatusName(st));
    c->established = true;
    set_state(c, SMBD_NEGOTIATING, "waiting for the negotiate request");
    uint64_t end = now_ms() + c->p.negotiate_timeout_ms;
    while (!c->negotiate_request_ok) {
        if (c->state == SMBD_FAILED)
            return -EPROTO;
        uint64_t now = now_ms();
        if (now >= end)
            return fail(c, -ETIMEDOUT, "no negotiate request in %u ms", c->p.negotiate_timeout_ms);
        rc = progress(c, (int)(end - now));
        if (rc != 0 && rc != -ETIMEDOUT)
            return rc;
    }
    return send_negotiate_response(c);
}

int smbd_accept(smbd_listener *l, smb_transport **out, int timeout_ms, char *err, size_t errlen)
{
    *out = NULL;
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
    NDK_CONNECTOR *conn;
    for (;;) {
        unsigned seen = atomic_load_explicit(&l->events, memory_order_acquire);
        if ((conn = take_incoming(l)) != NULL)
            break;
        uint64_t now = now_ms();
        if (now >= end) {
            snprintf(err, errlen, "no connection in %d ms", timeout_ms);
            return -ETIMEDOUT;
        }
        uint64_t left = end - now;
        futex_wait_ms(&l->events, seen, left > 1000 ? 1000 : (unsigned)left);
    }
    struct smbd_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->base.ops = &smbd_responder_ops;
    c->role = SMBD_RESPONDER;
    c->adapter = l->adapter;
    c->p = l->p;
    c->state = SMBD_CREATED;
    c->rdma_op = (struct smbd_op){OP_RDMA, 0};
    c->last_activity_ms = now_ms();
    int rc = accept_one(l, conn, c);
    if (rc != 0) {
        snprintf(err, errlen, "%s", c->err[0] ? c->err : strerror(-rc));
        smbd_destroy(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}

void smbd_listener_close(smbd_listener *l)
{
    /* The waiting connectors go first: the NDK listener's close completes only once every
     * connector that came through it is closed, so closing it with the backlog still held
     * would wait for ever. From here no request is queued: events are paused, and one already
     * on its way is refused by on_connect_event, which sees closing. */
    pthread_mutex_lock(&l->m);
    l->closing = true;
    l->paused = true;
    l->l->Dispatch->NdkControlConnectEvents(l->l, TRUE);
    pthread_mutex_unlock(&l->m);
    while (l->count) {
        NDK_CONNECTOR *conn = l->incoming[l->head];
        l->head = (l->head + 1) % SMBD_BACKLOG;
        l->count--;
        conn->Dispatch->NdkReject(conn, NULL, 0);
        close_obj(conn->Dispatch->NdkCloseConnector, &conn->Header);
    }
    close_obj(l->l->Dispatch->NdkCloseListener, &l->l->Header);
    pthread_mutex_destroy(&l->m);
    free(l);
}
