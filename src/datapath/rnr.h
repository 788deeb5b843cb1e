/* Receiver not ready (rnr.c): a Send held until a receive is posted, within a bound. */
#ifndef SOFTNDK_DATAPATH_RNR_H
#define SOFTNDK_DATAPATH_RNR_H

#include "datapath/conn_state.h"

const char *sndk_rnr_phase_name(enum sndk_rnr_phase p);
/* Placement: no receive for a Send: may it wait for one (RnrWaitMs set, not expired)? */
bool sndk_rnr_may_wait(struct sndk_qp *qp);
/* The pass: the parser holds a Send that found no receive: stop reading, arm the bound. */
void sndk_rnr_begin(struct sndk_qp *qp);
/* Waiting: is the receive there now? Then the held Send goes on (true). */
bool sndk_rnr_try_resume(struct sndk_qp *qp, const char *why);
/* Receiver-not-ready: a receive may have been posted (rnr_work) — resume the held Send if its
 * receive is there. True when the connection receives again. */
bool sndk_rnr_resume(struct sndk_qp *qp);
/* The bound expired (rnr_timer) or the socket hung up: waiting => expired, unless the receive
 * came meanwhile (then it resumes). The next pass raises the Send's Terminate. */
void sndk_rnr_expire(struct sndk_qp *qp, const char *why);

/* A receive was posted on qp (its RQ, or the SRQ it shares): if its connection waits for one,
 * resume it on its progress thread (conn.c's rnr_work). Any thread, no QP lock needed (takes
 * none). */
void sndk_rnr_kick(struct sndk_qp *qp);

#endif
