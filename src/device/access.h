/* The one access check: every path that touches memory by token (local SGEs of sends and
 * receives, inbound RDMA Write, Read Request and Read Response) asks here whether a
 * token grants an access to a range and where that range lives in host memory.
 *
 * A token is an STag (device/stag.h). It names, through the adapter's table:
 * - an MR registered with NdkRegisterMr (local and, per its flags, remote rights);
 * - a fast-registered MR while valid (rights from the NdkFastRegister flags; host memory via its
 *   page list);
 * - a bound MW (remote rights only);
 * - a PD's privileged token: local read/write of LAM logical addresses, which in softndk are
 *   virtual addresses (decisions 6); never remote.
 * The check runs under the STag table lock, so a concurrent (de)registration, which changes the
 * region fields under the same lock, is seen either entirely before or entirely after. */
#ifndef SOFTNDK_DEVICE_ACCESS_H
#define SOFTNDK_DEVICE_ACCESS_H

#include <stdint.h>
#include <sys/uio.h>

#include "device/mr.h"

enum sndk_access_result {
    SNDK_ACC_OK = 0,
    SNDK_ACC_INV_STAG, /* unknown token, stale key, not valid (unregistered, invalidated,
                          unbound), or a kind that cannot serve this access (MW locally,
                          privileged token remotely) */
    SNDK_ACC_UNASSOC,  /* token of another protection domain */
    SNDK_ACC_RIGHTS,   /* the region does not grant the access asked for */
    SNDK_ACC_BOUNDS,   /* the range is not inside the region */
    SNDK_ACC_WRAP,     /* addr + len wraps */
    SNDK_ACC_TOO_MANY, /* the range maps to more host pieces than `max_out` */
    SNDK_ACC_COUNT
};

const char *sndk_access_result_name(enum sndk_access_result r);

/* Check that `token` grants `need` (enum sndk_access bits) on [addr, addr + len) to a QP of pd,
 * and translate the range into host memory: out[0 .. *n_out) (one piece, or one per run of
 * contiguous pages of a fast-registered region). `remote`: the access comes from the peer
 * (MW and remote rights), else from a local SGE. len 0 is always allowed and yields no piece.
 * Any thread; takes the STag table lock. */
enum sndk_access_result sndk_access_check(struct sndk_pd *pd, uint32_t token, uint64_t addr,
                                          uint64_t len, unsigned need, bool remote,
                                          struct iovec *out, int max_out, int *n_out);

/* Remote invalidation (Send with Invalidate, docs/ndk-rules.md [MEM-12], [MEM-13], [IW-SINV]):
 * a valid fast-registered MR becomes invalid, a bound MW unbound. Returns SNDK_ACC_OK,
 * SNDK_ACC_UNASSOC (a token of another PD, whatever it names: checked first) or
 * SNDK_ACC_INV_STAG (unknown or stale token, an NdkRegisterMr region, the privileged token, or
 * a region already invalid / a window already unbound: decisions.md #7). */
enum sndk_access_result sndk_access_invalidate_remote(struct sndk_pd *pd, uint32_t token);

/* Unbind a bound window; caller holds the STag table lock. Returns the MR it windowed, whose
 * reference (taken by the bind) the caller drops with sndk_obj_put after unlocking; NULL when
 * the window was not bound. */
struct sndk_mr *sndk_mw_unbind_locked(struct sndk_mw *mw);

/* NdkInvalidate (executed in queue order) and RDMA_READ_LOCAL_INVALIDATE: a fast-registered MR
 * becomes invalid, a window unbound. Returns false when it already was (decisions.md #7: the
 * NdkInvalidate then completes with STATUS_INVALID_DEVICE_REQUEST). */
bool sndk_access_invalidate_local(struct sndk_obj *o);

#endif
