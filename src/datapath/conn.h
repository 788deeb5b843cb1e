/* The connection as its owners call it (conn.c): the QP's states, and what core/qp.c calls,
 * one call each. The connector's calls (attach, shutdown, abort, detach) are in link.h. */
#ifndef SOFTNDK_DATAPATH_CONN_H
#define SOFTNDK_DATAPATH_CONN_H

#include "datapath/conn_state.h"

/* conn.c: the QP's states (device/qp_state.h), which only the connection moves. Move to `next` if
 * the current state allows it, logging `X => Y (why)`. Caller holds qp->state_lock. */
const char *sndk_qp_state_name(enum sndk_qp_state s);
bool sndk_qp_set_state(struct sndk_qp *qp, enum sndk_qp_state next, const char *why);

/* conn.c: what core/qp.c calls, one call each. */
/* Publish the request filled at sq_tail (tx_lock taken here) and, unless `defer`, push what can
 * go. False when the connection ended meanwhile: nothing was published (the post fails with
 * STATUS_CONNECTION_INVALID). */
bool sndk_conn_publish(struct sndk_qp *qp, bool defer);
/* A post is refused inline ([DEFER-2]): what was accepted with DEFER before it goes first. */
void sndk_conn_push_deferred(struct sndk_qp *qp);
/* NdkFlush or close of a live connection: end it locally (RST, link event when `notify`). */
void sndk_conn_fail_local(struct sndk_qp *qp, bool notify);
/* Complete the receive being filled and every queued one with STATUS_CANCELLED. */
void sndk_conn_flush_receives(struct sndk_qp *qp);
/* With the QP: free the connection's state (NULL: nothing). */
void sndk_conn_free(struct sndk_conn *io);

#endif
