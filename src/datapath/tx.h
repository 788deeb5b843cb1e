/* TX (tx.c): requests and Read Responses cut into FPDUs and written to the stream. */
#ifndef SOFTNDK_DATAPATH_TX_H
#define SOFTNDK_DATAPATH_TX_H

#include "datapath/conn_state.h"

/* all: qp->tx_lock held */
void sndk_tx_init(struct sndk_conn *io, bool crc, uint32_t max_fpdu, uint32_t ird, uint32_t ord);
/* Retire the requests and Read Responses whose lent bytes the stream has settled since
 * (stream.h, settled). tx_lock held; sndk_tx_push begins with it. */
void sndk_tx_settle(struct sndk_qp *qp);
enum sndk_tx_result sndk_tx_push(struct sndk_qp *qp);
/* A Responder without an RTR: hold every FPDU until the Initiator's first arrives. At attach,
 * after sndk_tx_init, before the connection is published. */
void sndk_tx_gate_await(struct sndk_conn *io);
/* The Initiator's first FPDU arrived: open the gate (sets tx_kick when something waits). */
void sndk_tx_gate_open(struct sndk_qp *qp);
/* Best effort, one non-blocking write; skipped when an FPDU is half written. */
void sndk_tx_terminate(struct sndk_qp *qp, const struct sndk_term *t);
/* Drop the unwritten batch (the connection is closing). */
void sndk_tx_discard(struct sndk_conn *io);
/* RX, a Read Response ended: is the entry at the head of the ORQ a fence? (none: false) */
bool sndk_tx_fence_at_head(const struct sndk_conn *io);
/* RX: the Read or fence at the head of the ORQ got its whole response: pop it and mark the
 * Writes it covers done (WriteCompletion placed); then retire what can be. */
void sndk_tx_orq_pop(struct sndk_qp *qp);

/* "?" past the last gate */
const char *sndk_tx_gate_name(enum sndk_tx_gate g);

#endif
