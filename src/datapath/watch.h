/* What the connection's socket is watched for (watch.c). */
#ifndef SOFTNDK_DATAPATH_WATCH_H
#define SOFTNDK_DATAPATH_WATCH_H

#include "datapath/conn_state.h"

/* Set the watched events (epoll and the CQs' readiness sets) from tx_blocked, peer_fin,
 * parking, stalls and the receiver-not-ready wait. tx_lock held. */
void sndk_conn_update_events(struct sndk_conn *io);
/* An injected stall of direction dir for ms: arm its timer (a reference while pending); the
 * direction is stalled while it is pending, and its fn (conn.c) resumes it. One stall at a
 * time per direction. tx_lock held (rx: rx_lock too). */
void sndk_conn_stall(struct sndk_qp *qp, enum sndk_fault_dir dir, uint32_t ms);
/* How often a stream that holds memory it could give back is asked to (stream.h, trim): it
 * gives it back once it wrote nothing for a whole period, so 1-2 periods after a busy stream
 * went quiet. */
#define SNDK_CONN_TRIM_MS 1000u
/* The stream asks to be trimmed (stream.trim_wanted): keep the trim timer pending (a reference
 * while it is). tx_lock held. */
void sndk_conn_trim_later(struct sndk_qp *qp);

#endif
