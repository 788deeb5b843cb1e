/* Fault injection (docs/faults.md): rules parsed from SOFTNDK_FAULTS / SOFTNDK_OPTIONS.Faults,
 * checked at the call sites, the handshake and the data path. Each fault that fires is counted
 * (InjectedFaults), logged at warn level and traced. Everything here is cold unless a rule
 * exists: an adapter without rules has faults == NULL and a connection without a matching rule
 * has no sndk_fault_conn. */
#ifndef SOFTNDK_FAULTS_FAULTS_H
#define SOFTNDK_FAULTS_FAULTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "observe/counters.h"
#include "util/lock.h"

#define SNDK_FAULT_MAX_RULES 16
#define SNDK_FAULT_TEXT      96

enum sndk_fault_kind {
    SNDK_FAULT_DROP,
    SNDK_FAULT_CRC,
    SNDK_FAULT_TERMINATE,
    SNDK_FAULT_STALL,
    SNDK_FAULT_DELAY,
    SNDK_FAULT_MPA_REJECT,
    SNDK_FAULT_FAIL,
    SNDK_FAULT_CQ_OVERRUN,
    SNDK_FAULT_KIND_COUNT
};

/* The calls a `fail` rule can refuse. */
enum sndk_fault_call {
    SNDK_FCALL_CQ,
    SNDK_FCALL_PD,
    SNDK_FCALL_QP,
    SNDK_FCALL_SRQ,
    SNDK_FCALL_MR,
    SNDK_FCALL_REGISTER,
    SNDK_FCALL_MW,
    SNDK_FCALL_CONNECTOR,
    SNDK_FCALL_LISTENER,
    SNDK_FCALL_COUNT
};

enum sndk_fault_dir { SNDK_FDIR_TX, SNDK_FDIR_RX };
enum sndk_fault_side { SNDK_FSIDE_ANY, SNDK_FSIDE_ACTIVE, SNDK_FSIDE_PASSIVE };

struct sndk_fault_rule {
    enum sndk_fault_kind kind;
    unsigned index; /* 1-based, as in the logs */
    char text[SNDK_FAULT_TEXT];
    enum sndk_fault_dir dir;
    enum sndk_fault_side side;
    uint32_t conn;              /* 0: every connection */
    bool by_bytes;              /* after_bytes given (else after_fpdus) */
    uint64_t after;             /* FPDUs or bytes that pass first; cq_overrun: completions */
    uint32_t count;             /* firings per connection (per adapter for call rules); 0 = any */
    uint32_t p_ppm;             /* probability in millionths; 0 = fixed point */
    uint32_t ms;                /* stall, delay */
    uint8_t layer, etype, code; /* terminate */
    enum sndk_fault_call call;  /* fail */
    uint64_t nth;               /* fail, mpa_reject: first call to refuse (1-based) */
    uint32_t cq;                /* cq_overrun: 0 = every CQ */
    /* adapter-wide state of call / handshake rules */
    atomic_uint_fast64_t fired;
};

/* An adapter's rule set. The rules know no adapter: the adapter hands over where firings are
 * counted (ctrs) and routes its calls here (the sndk_fault_* of device/adapter_state.h). */
struct sndk_faults {
    struct sndk_adapter_ctrs *ctrs; /* InjectedFaults counts here; NULL until the adapter sets it */
    uint64_t seed;
    unsigned n;
    struct sndk_fault_rule rule[SNDK_FAULT_MAX_RULES];
    bool any_conn;          /* some rule acts on connections' bytes (drop ... delay) */
    struct sndk_mutex lock; /* call counters and their generators */
    uint64_t calls[SNDK_FCALL_COUNT];
    uint64_t mpa_requests;
    uint64_t rng[SNDK_FAULT_MAX_RULES];
    atomic_uint conns; /* connections numbered so far */
    atomic_uint cqs;   /* CQs numbered so far */
    atomic_bool crc_off_logged;
};

/* Parse text into a new rule set. NULL text or only spaces: *out = NULL, true. False with the
 * culprit in err when malformed. */
bool sndk_faults_parse(const char *text, struct sndk_faults **out, char *err, size_t errlen);
void sndk_faults_free(struct sndk_faults *f);

/* Every function of f below takes f NULL as "no rules": nothing fires. */

/* Count, log (warn) and trace one firing of a call or handshake rule of f (connection rules do
 * it themselves, naming the connection and its side); obj names the object in the log. */
void sndk_faults_fired(struct sndk_faults *f, const struct sndk_fault_rule *r, const void *obj,
                       const char *what);

/* Call faults: true when this call must fail with STATUS_INSUFFICIENT_RESOURCES (counted and
 * logged already, naming obj: the adapter). */
bool sndk_faults_call(struct sndk_faults *f, enum sndk_fault_call call, const void *obj);
/* A rule's kind and a fail rule's call as the rules spell them ("drop", "cq"); "?" past the
 * last. */
const char *sndk_fault_kind_name(enum sndk_fault_kind k);
const char *sndk_fault_call_name(enum sndk_fault_call c);
/* Handshake: true when this (valid) MPA Request must be rejected. */
bool sndk_faults_mpa_reject(struct sndk_faults *f, const void *obj);
/* A CQ is created: the completion number (produced count) at which it overruns, or
 * UINT64_MAX; *rule the rule to report. */
uint64_t sndk_faults_cq_overrun_at(struct sndk_faults *f, const struct sndk_fault_rule **rule,
                                   unsigned *cq_no);

/* ---- per connection ---- */

enum sndk_fault_action {
    SNDK_FACT_NONE,
    SNDK_FACT_DROP,
    SNDK_FACT_CRC,
    SNDK_FACT_TERMINATE,
    SNDK_FACT_STALL, /* also delay */
};

struct sndk_fault_arm {
    const struct sndk_fault_rule *rule;
    uint32_t fired;
    uint64_t rng;
};

struct sndk_fault_dirstate {
    uint64_t fpdus;     /* FPDUs of this direction passed (tx: built, rx: completed) */
    uint64_t bytes;     /* stream bytes passed */
    uint64_t byte_mark; /* the next after_bytes point not passed yet, UINT64_MAX: none */
    uint64_t stall_at;  /* the FPDU (count passed) that last waited, UINT64_MAX: none */
};

struct sndk_fault_conn {
    struct sndk_faults *faults; /* the rule set the arms point into */
    unsigned conn_no;
    bool active;
    unsigned n;
    struct sndk_fault_arm arm[SNDK_FAULT_MAX_RULES];
    struct sndk_fault_dirstate d[2];
    bool crc; /* CRC negotiated */
};

/* A connection is established: its number, and the rules that apply to it (NULL when none). */
struct sndk_fault_conn *sndk_faults_conn_new(struct sndk_faults *f, bool active, bool crc);
void sndk_fault_conn_free(struct sndk_fault_conn *fc);

/* The FPDU after fc->d[dir].fpdus is about to be built (tx) or has just been started (rx):
 * what must happen to it. *ms: the stall length. Counts, logs and traces a firing (obj: the
 * QP, for the log). Byte rules are not checked here. */
enum sndk_fault_action sndk_fault_fpdu(struct sndk_fault_conn *fc, enum sndk_fault_dir dir,
                                       const void *obj, uint32_t *ms,
                                       const struct sndk_fault_rule **rule);
/* The stream of direction dir reached fc->d[dir].byte_mark: what must happen there. */
enum sndk_fault_action sndk_fault_bytes(struct sndk_fault_conn *fc, enum sndk_fault_dir dir,
                                        const void *obj, uint32_t *ms);

#endif
