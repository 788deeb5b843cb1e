/* The connection's phase machine and its one end record (phase.c). The types and the lock-free
 * readers are the connection's state (conn_state.h). */
#ifndef SOFTNDK_DATAPATH_PHASE_H
#define SOFTNDK_DATAPATH_PHASE_H

#include "datapath/conn_state.h"

const char *sndk_conn_phase_name(enum sndk_conn_phase p);
/* Move the connection to `next` if its phase allows it, holding the locks the table above
 * names. False when refused: quietly once failing or ended (a late shutdown, a second end
 * found), else it is a bug: logged, and an assertion fails. */
bool sndk_conn_phase_set(struct sndk_qp *qp, enum sndk_conn_phase next, const char *why);
const char *sndk_end_finder_name(enum sndk_end_finder b);
/* Record f, found by `by`, as the connection's end unless one is recorded already (the first
 * wins). Returns the end that stands. tx_lock held. */
const struct sndk_fail *sndk_conn_end_record(struct sndk_conn *io, enum sndk_end_finder by,
                                             const struct sndk_fail *f);
const char *sndk_rx_park_name(enum sndk_rx_park p);
/* Move who reads the stream to `next` (conn_state.h draws it), tx_lock held, logging and
 * tracing "X => Y (why)". A move the machine does not allow is a bug: logged, an assertion
 * fails, and false. The caller does what the move means (the CQ's count, the watched events). */
bool sndk_rx_park_set(struct sndk_qp *qp, enum sndk_rx_park next, const char *why);

#endif
