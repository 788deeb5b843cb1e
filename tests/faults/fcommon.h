/* Shared helpers of the fault-injection suite (docs/faults.md). Like the conformance suite it
 * drives libsoftndk through the public headers only (include/ndk/), as an outside consumer:
 * two adapters per test (client and server, each with its own SOFTNDK_OPTIONS.Faults), a
 * listener, connectors and QPs over 127.0.0.1, and exact checks of what the faults did. */
#ifndef SOFTNDK_FAULTS_FCOMMON_H
#define SOFTNDK_FAULTS_FCOMMON_H

#include <ndk/softndk.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "ndk_objects.h"

/* Bound for every wait on something that must happen. */
#define FX_WAIT_MS 5000u
/* Bound for "must NOT happen" checks (the only place a fixed window is acceptable). */
#define FX_QUIET_MS 100u

/* ProviderDisconnectReason classes (docs/connector.md) */
#define FX_REASON_RESET    0x03000000u
#define FX_REASON_SENT(c)  (0x01000000u | (c))
#define FX_REASON_RECVD(c) (0x02000000u | (c))
/* SOFTNDK_TERM_COUNT.Code: 0x00LLTTCC */
#define FX_TERM(l, t, c) ((ULONG)(((l) << 16) | ((t) << 8) | (c)))
#define FX_TERM_MPA_CRC  FX_TERM(2, 0, 2)

/* An FPDU of a Send of n payload bytes: MPA length (2) + untagged header (18) + payload, padded
 * to 4, + CRC (4, present also without CRC: zero then). */
#define FX_SEND_FPDU(n) ((((size_t)2 + 18 + (n)) + 3) / 4 * 4 + 4)
/* ... of an RDMA Write: tagged header (14). */
#define FX_WRITE_FPDU(n) ((((size_t)2 + 14 + (n)) + 3) / 4 * 4 + 4)

#define CHECK_STATUS(a, b)                                                                         \
    do {                                                                                           \
        NTSTATUS fx_a_ = (NTSTATUS)(a), fx_b_ = (NTSTATUS)(b);                                     \
        if (fx_a_ != fx_b_) {                                                                      \
            char fx_na_[48], fx_nb_[48];                                                           \
            fx_status_name(fx_a_, fx_na_, sizeof fx_na_);                                          \
            fx_status_name(fx_b_, fx_nb_, sizeof fx_nb_);                                          \
            harness_fail(__FILE__, __LINE__, "%s == %s: %s (0x%08X) != %s (0x%08X)", #a, #b,       \
                         fx_na_, (unsigned)fx_a_, fx_nb_, (unsigned)fx_b_);                        \
        }                                                                                          \
    } while (0)

void fx_status_name(NTSTATUS s, char *buf, size_t len);
/* printf to stdout, flushed (a forked test ends with _exit, which would drop the buffer). */
void fx_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t fx_now_us(void);
void fx_fill(uint8_t *p, size_t len, uint32_t seed);

/* ---- stderr capture (the log) */

struct fx_capture {
    int saved;
    void *f; /* FILE * */
};
void fx_capture_begin(struct fx_capture *c);
/* Restore stderr; the captured text (malloc'd, NUL-terminated; echoed to stderr). */
char *fx_capture_end(struct fx_capture *c);
/* Lines of text that contain every one of the strings (NULL-terminated list). */
unsigned fx_count_lines(const char *text, ...) __attribute__((sentinel));

/* ---- adapters */

/* Defaults plus: a narrow ephemeral port range of this process, CRC on, log level `log` (0 =
 * default), Faults = faults (NULL: from SOFTNDK_FAULTS). */
void fx_options(SOFTNDK_OPTIONS *o, const char *faults);
NTSTATUS fx_try_open(const SOFTNDK_OPTIONS *o, NDK_ADAPTER **out);
NDK_ADAPTER *fx_open_with(const SOFTNDK_OPTIONS *o);
NDK_ADAPTER *fx_open(const char *faults);
void fx_counters(NDK_ADAPTER *a, SOFTNDK_COUNTERS *c);
uint64_t fx_injected(NDK_ADAPTER *a);
/* Wait (bounded) until the counter at byte offset `field` of SOFTNDK_COUNTERS reaches `want`
 * (a counter bumped after the wire write lags what the peer has seen); its value then. */
uint64_t fx_wait_counter(NDK_ADAPTER *a, size_t field, uint64_t want);
#define FX_WAIT_COUNTER(a, name, want)                                                             \
    fx_wait_counter((a), offsetof(SOFTNDK_COUNTERS, name), (want))
/* Count of `code` in a TerminateSentCodes / TerminateReceivedCodes table (0: not there). */
uint64_t fx_term_count(const SOFTNDK_TERM_COUNT *slots, ULONG code);
/* Number of used slots of such a table. */
unsigned fx_term_slots(const SOFTNDK_TERM_COUNT *slots);

/* ---- objects */

/* Close; if it pends, wait (bounded) for the close completion. */
void fx_close_wait(NDK_OBJECT_HEADER *h);

/* ---- a listener */

#define FX_MAX_INCOMING 32
struct fx_server {
    NDK_ADAPTER *a;
    NDK_LISTENER *l;
    struct harness_event ev;
    NDK_CONNECTOR *incoming[FX_MAX_INCOMING];
    atomic_uint n;
    uint16_t port;
};
void fx_listen(struct fx_server *s, NDK_ADAPTER *a);
void fx_server_close(struct fx_server *s);

/* ---- one end of a connection: PD, one CQ for both queues, QP, MR over a buffer */

#define FX_MAX_RESULTS 1024
#define FX_MAX_NOTIFY  64
struct fx_result {
    NDK_OPERATION_TYPE type;
    NTSTATUS status;
    uintptr_t ctx;
    ULONG bytes;
    uint64_t t_us; /* when this test collected it */
};

struct fx_side {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    NDK_CONNECTOR *conn;
    uint8_t *buf;
    size_t len;
    UINT32 ltoken, rtoken;
    /* disconnect event */
    struct harness_event disc_ev;
    atomic_uint disc_n;
    _Atomic ULONG disc_reason;
    /* CQ notifications */
    struct harness_event cq_ev;
    atomic_uint cq_n;
    NTSTATUS cq_status[FX_MAX_NOTIFY];
    /* completions collected so far */
    struct fx_result res[FX_MAX_RESULTS];
    unsigned nres;
};

/* PD, CQ (depth 4096), QP (receive depth rq, initiator depth sq, 4 SGEs each, inline 0), MR
 * (local + remote write) over a zeroed buffer of buflen bytes. */
void fx_side_init(struct fx_side *s, NDK_ADAPTER *a, size_t buflen, ULONG rq, ULONG sq);
/* Close connector (if any), QP, MR, CQ, PD; free the buffer. */
void fx_side_close(struct fx_side *s);

/* Client cl connects to the server listening in srv; srv's next incoming connector is accepted
 * by sv. Every step must succeed. */
void fx_establish(struct fx_side *cl, struct fx_side *sv, struct fx_server *srv);
/* NdkConnect from cl to srv that must end with `expect` without the listener's consumer seeing
 * a connect event (an injected MPA Reject). */
void fx_connect_refused(struct fx_side *cl, struct fx_server *srv, NTSTATUS expect);

/* Posting (CHECK the inline status unless noted). */
NDK_SGE fx_sge(struct fx_side *s, size_t off, size_t len);
void fx_post_recv(struct fx_side *s, uintptr_t ctx, size_t off, size_t len);
void fx_post_send(struct fx_side *s, uintptr_t ctx, size_t off, size_t len, ULONG flags);
void fx_post_write(struct fx_side *s, uintptr_t ctx, size_t off, size_t len, struct fx_side *peer,
                   size_t peer_off, ULONG flags);
/* The same, returning the inline status instead of checking it. */
NTSTATUS fx_try_send(struct fx_side *s, uintptr_t ctx, size_t off, size_t len, ULONG flags);
NTSTATUS fx_try_write(struct fx_side *s, uintptr_t ctx, size_t off, size_t len,
                      struct fx_side *peer, size_t peer_off, ULONG flags);

/* Poll the side's CQ (polling drives receive progress) until at least n results were
 * collected in s->res, or timeout_ms passed. Returns s->nres. */
unsigned fx_collect(struct fx_side *s, unsigned n, unsigned timeout_ms);
/* Collect exactly n and check that no more arrive within FX_QUIET_MS. */
void fx_expect(struct fx_side *s, unsigned n);
/* The i-th result of type `type` (receive or initiator kinds), in collection order, or NULL. */
const struct fx_result *fx_nth(const struct fx_side *s, bool receives, unsigned i);
unsigned fx_count(const struct fx_side *s, bool receives);

/* Wait (bounded) for the disconnect event and check that it fired exactly once, with reason. */
void fx_expect_disconnect(struct fx_side *s, ULONG reason);
/* No disconnect event within FX_QUIET_MS. */
void fx_expect_no_disconnect(struct fx_side *s);

/* Graceful end: cl disconnects, sv gets the event and disconnects too; both complete. */
void fx_disconnect(struct fx_side *cl, struct fx_side *sv);

/* ---- two adapters, a listener and one connection between them */

struct fx_pair {
    NDK_ADAPTER *ac, *as; /* client (active) and server (passive) adapters */
    struct fx_server srv;
    struct fx_side cl, sv;
};
/* Open both adapters from *oc / *os, listen on the server, create both sides (buflen each, queue
 * depths rq/sq) and connect. Heap-allocated (the sides are large). */
struct fx_pair *fx_pair_open_with(const SOFTNDK_OPTIONS *oc, const SOFTNDK_OPTIONS *os,
                                  size_t buflen, ULONG rq, ULONG sq);
/* The same with fx_options(cfaults) / fx_options(sfaults). */
struct fx_pair *fx_pair_open(const char *cfaults, const char *sfaults);
/* Close sides, listener and adapters (bounded) and free. */
void fx_pair_close(struct fx_pair *p);

/* Message i of a stream: its bytes are fx_fill(seed 1000 + i). */
void fx_fill_slot(struct fx_side *s, unsigned i, size_t size);
/* Receives: s->res holds (at least) `total` receive completions with contexts base, base+1, ...;
 * the first `ok` are STATUS_SUCCESS with `size` bytes equal to message i of the peer's slot i;
 * the rest are STATUS_CANCELLED. */
void fx_check_receives(const struct fx_side *s, const struct fx_side *peer, unsigned total,
                       unsigned ok, size_t size, uintptr_t base);
/* The same for slots in the region at byte `off` of both buffers. A stream in the other direction
 * takes a region of its own: a buffer belongs to the provider from its post until its completion
 * is collected, so the slots of a stream still in flight cannot be refilled or received into. */
void fx_check_receives_at(const struct fx_side *s, const struct fx_side *peer, size_t off,
                          unsigned total, unsigned ok, size_t size, uintptr_t base);
/* Initiator requests: `total` completions with contexts base, base+1, ...: a prefix of
 * STATUS_SUCCESS of length in [ok_min, ok_max], the rest STATUS_CANCELLED. Returns the prefix. */
unsigned fx_check_initiator(const struct fx_side *s, unsigned total, unsigned ok_min,
                            unsigned ok_max, uintptr_t base);

/* ---- one call of each kind a `fail` rule can refuse */

enum fx_call {
    FX_C_CQ,
    FX_C_PD,
    FX_C_QP,
    FX_C_SRQ,
    FX_C_MR,
    FX_C_REGISTER,
    FX_C_MW,
    FX_C_CONNECTOR,
    FX_C_LISTENER,
    FX_C_COUNT
};
extern const char *const fx_call_names[FX_C_COUNT]; /* as in "fail:call=..." */

struct fx_calls {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_SRQ *srq;
    uint8_t buf[8192];
    struct harness_event reg_done;
};
/* The parents a call of kind `which` needs (PD; CQ and SRQ for QPs), made before the first
 * counted call (their own kinds are counted separately). */
void fx_calls_open(struct fx_calls *pa, NDK_ADAPTER *a, enum fx_call which);
void fx_calls_close(struct fx_calls *pa);
/* Make call number k (1-based, for the log) of kind `which` and close what it created; its
 * status. A failed call must create nothing; a failed or inline NdkRegisterMr must not call
 * its completion. */
NTSTATUS fx_call(struct fx_calls *pa, enum fx_call which, unsigned k);

/* Number of open fds, waiting (bounded) until it is <= want. */
int fx_fds_settle(int want, unsigned timeout_ms);

#endif
