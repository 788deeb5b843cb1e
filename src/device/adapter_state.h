/* The adapter: one NDK_ADAPTER instance, root of an object tree, owner of the resolved
 * configuration. The instances opened on one interface share a device (the progress engine and
 * the STag table), so that their objects work together as on one RNIC (docs/adapter.md). */
#ifndef SOFTNDK_DEVICE_ADAPTER_STATE_H
#define SOFTNDK_DEVICE_ADAPTER_STATE_H

#include <pthread.h>

#include <time.h>

#include "observe/counters.h"
#include "device/object.h"
#include "device/verifier.h"
#include "config/options.h"
#include "device/stag.h"
#include "faults/faults.h"
#include "util/lock.h"

struct sndk_adapter {
    struct sndk_obj base;      /* NDK_ADAPTER first */
    struct sndk_obj_root root; /* what the objects of this adapter share (object.h) */
    NDK_VERSION version;       /* what the adapter runs at */
    ULONG if_index;
    struct sndk_config cfg;
    NDK_ADAPTER_INFO info;         /* advertised and enforced limits */
    struct sndk_device *dev;       /* shared by every instance on if_index */
    struct sndk_engine *engine;    /* the device's */
    struct sndk_stag_table *stags; /* the device's */

    /* live objects, for diagnostics and the wait in SoftNdkCloseAdapter */
    struct sndk_mutex lock; /* guards live, live_count, released */
    struct sndk_cond released_cond;
    struct sndk_obj_tracker objects; /* keeps live: the objects created under this adapter */
    struct sndk_obj *live;
    unsigned live_count[NdkObjectTypeMax];
    bool released; /* refs reached zero */

    /* observability (docs/observability.md) */
    unsigned seq;           /* adapters opened by this process so far, from 0 */
    struct timespec opened; /* CLOCK_MONOTONIC */
    struct sndk_adapter_ctrs ctrs;
    struct sndk_pcap *pcap;     /* NULL: no capture */
    bool trace;                 /* holds a reference on the trace log */
    struct sndk_stat *stat;     /* the ndkstat endpoint, NULL when off */
    struct sndk_faults *faults; /* fault injection rules (docs/faults.md), NULL = none */
};

_Static_assert(offsetof(struct sndk_adapter, base) == 0,
               "the adapter's object first: sndk_adapter_obj (object.h)");

/* Do two adapter instances share a device? Inline, so that the object files asking it (qp.c)
 * need nothing of adapter.c, which builds on them. */
static inline bool sndk_adapter_same_device(const struct sndk_adapter *x,
                                            const struct sndk_adapter *y)
{
    return x && y && x->dev == y->dev;
}

/* Is the consumer verifier on for adapter a (verify/verify.h, device/verifier.h)? */
static inline bool sndk_verify_on(const struct sndk_adapter *a)
{
    return __builtin_expect(a->cfg.verify != SoftNdkVerifyOff, 0);
}

static inline struct sndk_adapter *sndk_adapter_from(NDK_ADAPTER *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeAdapter);
    return o ? sndk_container_of(o, struct sndk_adapter, base) : NULL;
}

/* A connection record of adapter a (observe/counters.h: sndk_conn_rec_open): counted in a's
 * counters, captured into a's pcap file. */
static inline struct sndk_conn_rec *
sndk_conn_rec_new(struct sndk_adapter *a, enum sndk_conn_role role, const struct sockaddr *local,
                  const struct sockaddr *peer, const char *const *state_names)
{
    return sndk_conn_rec_open(&a->ctrs, a->pcap, role, local, peer, state_names);
}

/* Fault injection as the objects ask for it: the adapter's rules (faults/faults.h, NULL: none),
 * by the adapter. Same results as the sndk_faults_* they call. */
static inline bool sndk_fault_call(struct sndk_adapter *a, enum sndk_fault_call call)
{
    return sndk_faults_call(a->faults, call, a);
}
static inline bool sndk_fault_mpa_reject(struct sndk_adapter *a, const void *obj)
{
    return sndk_faults_mpa_reject(a->faults, obj);
}
static inline uint64_t sndk_fault_cq_overrun_at(struct sndk_adapter *a,
                                                const struct sndk_fault_rule **rule,
                                                unsigned *cq_no)
{
    return sndk_faults_cq_overrun_at(a->faults, rule, cq_no);
}
static inline void sndk_fault_fired(struct sndk_adapter *a, const struct sndk_fault_rule *r,
                                    const void *obj, const char *what)
{
    sndk_faults_fired(a->faults, r, obj, what);
}
static inline struct sndk_fault_conn *sndk_fault_conn_new(struct sndk_adapter *a, bool active,
                                                          bool crc)
{
    return sndk_faults_conn_new(a->faults, active, crc);
}

/* The LAM slots of the adapter's dispatch table (device/lam.c). */
NTSTATUS sndk_lam_build(NDK_ADAPTER *pNdkAdapter, MDL *Mdl, SIZE_T Length,
                        NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext,
                        NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM, ULONG *pLAMSize, ULONG *pFBO);
void sndk_lam_release(NDK_ADAPTER *pNdkAdapter, NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM);

/* Is [va, va+len) described virtually contiguously by the MDL chain? Shared by MR and LAM. */
bool sndk_mdl_contiguous(const MDL *mdl, SIZE_T len);

#endif
