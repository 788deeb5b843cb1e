/* Shared helpers of the conformance suite: the suite drives libsoftndk through the public
 * headers only (include/ndk/ headers), exactly as an outside consumer would. */
#ifndef SOFTNDK_CONFORMANCE_COMMON_H
#define SOFTNDK_CONFORMANCE_COMMON_H

#include <ndk/softndk.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "harness.h"
#include "ndk_objects.h"

/* Bound for every wait on something that must happen. */
#define CONF_WAIT_MS 5000u
/* Bound for "must NOT happen" checks (the only place a fixed time window is acceptable). */
#define CONF_QUIET_MS 100u

/* Compare two NTSTATUS values; on mismatch the failure names both. */
#define CHECK_STATUS(a, b)                                                                         \
    do {                                                                                           \
        NTSTATUS conf_a_ = (NTSTATUS)(a), conf_b_ = (NTSTATUS)(b);                                 \
        if (conf_a_ != conf_b_) {                                                                  \
            char conf_na_[48], conf_nb_[48];                                                       \
            conf_status_name(conf_a_, conf_na_, sizeof conf_na_);                                  \
            conf_status_name(conf_b_, conf_nb_, sizeof conf_nb_);                                  \
            harness_fail(__FILE__, __LINE__, "%s == %s: %s (0x%08X) != %s (0x%08X)", #a, #b,       \
                         conf_na_, (unsigned)conf_a_, conf_nb_, (unsigned)conf_b_);                \
        }                                                                                          \
    } while (0)

/* SoftNdkStatusName copied out of its per-thread buffer (two names in one message). */
void conf_status_name(NTSTATUS s, char *buf, size_t len);

static inline NDK_VERSION conf_version(USHORT major, USHORT minor)
{
    NDK_VERSION v = {major, minor};
    return v;
}

/* Options for the suite's adapters: defaults, plus a narrow ephemeral port range of its own per
 * process (tests run in parallel with other suites on one machine). */
void conf_options(SOFTNDK_OPTIONS *o);
/* This test breaks NDKPI consumer rules on purpose (`what`: the verifier's rules and why), to
 * check softndk's answer: its adapters, opened after this call, run with the consumer verifier
 * off (the suite runs under SOFTNDK_VERIFY=strict, which would abort). */
void conf_breaks_rules(const char *what);
bool conf_breaking_rules(void);
/* Open an adapter on "lo" (NDKPI 2.0 asked, so it runs 2.1) with conf_options, or with *o. */
NDK_ADAPTER *conf_open(void);
NDK_ADAPTER *conf_open_with(const SOFTNDK_OPTIONS *o);
/* An adapter of another device: IfIndex 0 (every interface), not lo's. Instances opened on one
 * interface are one device and share objects; instances of two devices do not. */
NDK_ADAPTER *conf_open_other_device(void);
/* NdkQueryAdapterInfo into *info (checks the call succeeded). */
void conf_query(NDK_ADAPTER *a, NDK_ADAPTER_INFO *info);

/* Dispatch-agnostic close: every public object is {Header; Dispatch} and close is slot 0. */
/* Close, expecting STATUS_SUCCESS (no successors open). */
void conf_close(NDK_OBJECT_HEADER *h);
/* Close; if it pends, wait (bounded) for the close completion. */
void conf_close_wait(NDK_OBJECT_HEADER *h);

/* A close completion that signals a harness_event passed as its context. */
void conf_close_signal(void *ctx);
/* Create callback that must never be called (softndk creates never pend). */
/* Connect-event callback that must never be called (nothing connects in this build). */
void conf_connect_never(void *ctx, NDK_CONNECTOR *conn);
/* Request completion that must never be called (for requests that complete inline). */

/* A CQ with a recording notification callback. */
#define CONF_MAX_NOTIFY 256
struct conf_cq {
    NDK_CQ *cq;
    struct harness_event ev; /* signalled once per notification */
    atomic_uint n;           /* notifications so far */
    NTSTATUS status[CONF_MAX_NOTIFY];
    unsigned delay_ms;       /* the callback blocks this long (serialization tests) */
    atomic_int inside;       /* callbacks running now */
    atomic_bool overlap;     /* two ran at once */
    atomic_bool closed;      /* set by the test right after calling close */
    atomic_bool after_close; /* a notification came after close was called */
};
void conf_cq_notify(void *ctx, NTSTATUS status);
/* Create a CQ of depth `depth` recording into *c. */
void conf_cq_create(NDK_ADAPTER *a, struct conf_cq *c, ULONG depth);
void conf_cq_destroy(struct conf_cq *c); /* close (expects SUCCESS) + event cleanup */
void conf_cq_arm(struct conf_cq *c, ULONG type);
/* Wait until at least `count` notifications arrived. */
bool conf_cq_wait(struct conf_cq *c, unsigned count);
/* No further notification beyond `count` within CONF_QUIET_MS. */
bool conf_cq_quiet(struct conf_cq *c, unsigned count);
/* Status of notification i (0-based). */
NTSTATUS conf_cq_status(struct conf_cq *c, unsigned i);

NDK_PD *conf_pd(NDK_ADAPTER *a);
/* QP with its own receive queue: receive depth rdepth, initiator depth 4, 2 SGEs each. */
NDK_QP *conf_qp(NDK_PD *pd, NDK_CQ *rcq, NDK_CQ *icq, void *qpctx, ULONG rdepth);
/* Post n zero-SGE receives with RequestContext = first, first+1, ... */
void conf_post_recvs(NDK_QP *qp, unsigned n, uintptr_t first);
void conf_flush(NDK_QP *qp);
/* A QP with n receives posted and flushed at once: n STATUS_CANCELLED completions on rcq. */
void conf_flush_into(NDK_PD *pd, struct conf_cq *rcq, struct conf_cq *icq, unsigned n,
                     uintptr_t first);

#endif
