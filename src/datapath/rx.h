/* RX's pass (rx.c): read the stream, drive the parser. */
#ifndef SOFTNDK_DATAPATH_RX_H
#define SOFTNDK_DATAPATH_RX_H

#include "datapath/conn_state.h"

/* all: qp->rx_lock held */
void sndk_rx_io_init(struct sndk_conn *io, bool crc);
/* Read what the socket has (bounded), place it, complete receives. */
enum sndk_rx_result sndk_rx_pass(struct sndk_qp *qp, struct sndk_fail *fail);
/* Payload bytes of the current segment still due when the last pass ended because the socket
 * ran dry in the middle of it; 0 otherwise. */
uint32_t sndk_rx_due_after_pass(const struct sndk_conn *io);
/* The last pass took n_before..fpdus FPDUs, at least one, and emptied the socket at an FPDU
 * boundary (not inside a payload, not waiting for a receive). */
bool sndk_rx_emptied_between_fpdus(const struct sndk_conn *io, uint64_t fpdus_before);

#endif
