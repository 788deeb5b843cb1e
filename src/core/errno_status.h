/* errno -> NTSTATUS, per kind of call: the one place a socket error becomes the status a
 * consumer sees. One errno can mean different things to different calls (EADDRINUSE from
 * bind is another user of the address, from connect an exhausted local port range), so the
 * table is keyed by the call; docs/decisions.md states the differences. */
#ifndef SOFTNDK_CORE_ERRNO_STATUS_H
#define SOFTNDK_CORE_ERRNO_STATUS_H

#include <ndk/ndkpi.h>

enum sndk_errno_call {
    SNDK_CALL_SOCKET,      /* socket(): creating the endpoint's socket */
    SNDK_CALL_BIND,        /* bind() of a listener's, connector's or shared endpoint's address */
    SNDK_CALL_LISTEN,      /* listen() of a listener's endpoint */
    SNDK_CALL_CONNECT,     /* connect() and the active side's MPA Request/Reply I/O (0: the
                              peer closed before its Reply) */
    SNDK_CALL_SHARED_PEER, /* sndk_endpoint_add_peer(): a shared endpoint's remote address */
    SNDK_CALL_QP_ATTACH,   /* sndk_qp_attach(): handing the connected socket to the QP */
    SNDK_CALL_MPA_REPLY,   /* sndk_mpa_accept()/sndk_mpa_build() of NdkAccept's MPA Reply */
    SNDK_CALL_COUNT
};

/* "connect", "bind", …; "unknown" for values outside the enum. Never NULL. */
const char *sndk_errno_call_name(enum sndk_errno_call call);

/* The status for err from call: the table's row, else the call's default. */
NTSTATUS sndk_status_from_errno(enum sndk_errno_call call, int err);

#endif
