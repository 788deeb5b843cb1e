/* Placement (place.c): the parser's callbacks. */
#ifndef SOFTNDK_DATAPATH_PLACE_H
#define SOFTNDK_DATAPATH_PLACE_H

#include "datapath/conn_state.h"

/* The parser's callbacks (placement, completions, Read Requests, Terminates). */
extern const struct sndk_rx_ops sndk_place_ops;
/* Complete the receive being filled, if any, with st. */
void sndk_rx_cancel_current(struct sndk_qp *qp, NTSTATUS st, ULONG code);

#endif
