/* errno -> NTSTATUS per kind of call (errno_status.h). Rows are searched in order; a call's
 * default answers every errno without a row. The deliberate differences between calls are the
 * point of keying by call (docs/decisions.md, "One errno, two statuses"):
 *  - EADDRINUSE: bind/listen -> STATUS_SHARING_VIOLATION (another endpoint holds the address,
 *    NdkListen's and NdkCreateSharedEndpoint's documented answer); connect ->
 *    STATUS_ADDRESS_ALREADY_EXISTS (no free local address/port pair for the connection).
 *  - EADDRNOTAVAIL: bind -> STATUS_INVALID_ADDRESS (not an address of this host); connect ->
 *    STATUS_ADDRESS_ALREADY_EXISTS (the ephemeral ports toward that peer are used up).
 *  - Default: bind/listen/socket -> STATUS_INSUFFICIENT_RESOURCES (the kernel refused a
 *    resource); connect -> STATUS_UNSUCCESSFUL (no better name for an unexpected error).
 * Our own functions that return -errno (shared endpoint peers, QP attach, the MPA Reply) are
 * translated here too, so every errno a consumer's status comes from is in one table. */
#include "core/errno_status.h"

#include <errno.h>
#include <stddef.h>

struct errno_row {
    enum sndk_errno_call call;
    int err;
    NTSTATUS status;
};

static const struct errno_row rows[] = {
    /* bind(): the address is someone else's, or not this host's */
    {SNDK_CALL_BIND, EADDRINUSE, STATUS_SHARING_VIOLATION},
    {SNDK_CALL_BIND, EADDRNOTAVAIL, STATUS_INVALID_ADDRESS},
    /* listen(): another socket listens on the port (a race with a bind that allowed reuse) */
    {SNDK_CALL_LISTEN, EADDRINUSE, STATUS_SHARING_VIOLATION},
    /* connect() and the active handshake: a peer that refuses, resets or closes before its
     * Reply refused the connection */
    {SNDK_CALL_CONNECT, ECONNREFUSED, STATUS_CONNECTION_REFUSED},
    {SNDK_CALL_CONNECT, ECONNRESET, STATUS_CONNECTION_REFUSED},
    {SNDK_CALL_CONNECT, EPIPE, STATUS_CONNECTION_REFUSED},
    {SNDK_CALL_CONNECT, 0, STATUS_CONNECTION_REFUSED}, /* end of stream */
    {SNDK_CALL_CONNECT, ENETUNREACH, STATUS_NETWORK_UNREACHABLE},
    {SNDK_CALL_CONNECT, ENETDOWN, STATUS_NETWORK_UNREACHABLE},
    {SNDK_CALL_CONNECT, EHOSTUNREACH, STATUS_HOST_UNREACHABLE},
    {SNDK_CALL_CONNECT, EHOSTDOWN, STATUS_HOST_UNREACHABLE},
    {SNDK_CALL_CONNECT, ETIMEDOUT, STATUS_IO_TIMEOUT},
    {SNDK_CALL_CONNECT, EADDRNOTAVAIL, STATUS_ADDRESS_ALREADY_EXISTS},
    {SNDK_CALL_CONNECT, EADDRINUSE, STATUS_ADDRESS_ALREADY_EXISTS},
    {SNDK_CALL_CONNECT, ENOMEM, STATUS_INSUFFICIENT_RESOURCES},
    {SNDK_CALL_CONNECT, ENOBUFS, STATUS_INSUFFICIENT_RESOURCES},
    /* a shared endpoint already has a connector to that remote address:port: the 4-tuple
     * exists */
    {SNDK_CALL_SHARED_PEER, EEXIST, STATUS_ADDRESS_ALREADY_EXISTS},
    /* the QP is another connection's, or closing */
    {SNDK_CALL_QP_ATTACH, EBUSY, STATUS_CONNECTION_ACTIVE},
    {SNDK_CALL_QP_ATTACH, ECANCELED, STATUS_CANCELLED},
    /* NdkAccept's private data does not fit the Reply */
    {SNDK_CALL_MPA_REPLY, EMSGSIZE, STATUS_INVALID_BUFFER_SIZE},
};

static const struct {
    const char *name;
    NTSTATUS fallback;
} calls[SNDK_CALL_COUNT] = {
    [SNDK_CALL_SOCKET] = {"socket", STATUS_INSUFFICIENT_RESOURCES},
    [SNDK_CALL_BIND] = {"bind", STATUS_INSUFFICIENT_RESOURCES},
    [SNDK_CALL_LISTEN] = {"listen", STATUS_INSUFFICIENT_RESOURCES},
    [SNDK_CALL_CONNECT] = {"connect", STATUS_UNSUCCESSFUL},
    [SNDK_CALL_SHARED_PEER] = {"shared endpoint peer", STATUS_INSUFFICIENT_RESOURCES},
    [SNDK_CALL_QP_ATTACH] = {"QP attach", STATUS_INSUFFICIENT_RESOURCES},
    [SNDK_CALL_MPA_REPLY] = {"MPA Reply", STATUS_INVALID_PARAMETER},
};

const char *sndk_errno_call_name(enum sndk_errno_call call)
{
    return (unsigned)call < SNDK_CALL_COUNT ? calls[call].name : "unknown";
}

NTSTATUS sndk_status_from_errno(enum sndk_errno_call call, int err)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].call == call && rows[i].err == err)
            return rows[i].status;
    return (unsigned)call < SNDK_CALL_COUNT ? calls[call].fallback : STATUS_INTERNAL_ERROR;
}
