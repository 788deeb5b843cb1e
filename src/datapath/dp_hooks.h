/* The hook table of a connection's data path: what is attached at the named seams of
 * dp_seams.h. Only the table's shape lives here, so that conn.h can hold one per connection
 * without seeing the seams. docs/datapath.md, "Hooks". */
#ifndef SOFTNDK_DATAPATH_DP_HOOKS_H
#define SOFTNDK_DATAPATH_DP_HOOKS_H

struct sndk_dp_hook_ops;

/* Fault injection, packet capture and the source check: at most one each. */
#define SNDK_DP_HOOKS_MAX 4

struct sndk_dp_hooks {
    unsigned n; /* attached; 0: every seam is one branch not taken */
    const struct sndk_dp_hook_ops *ops[SNDK_DP_HOOKS_MAX];
};

#endif
