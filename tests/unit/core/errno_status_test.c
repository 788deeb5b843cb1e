/* The errno -> NTSTATUS table: every row, the per-call defaults and the deliberate
 * differences between calls (docs/decisions.md, "One errno, two statuses"). */
#include <errno.h>
#include <string.h>

#include "core/errno_status.h"
#include "harness.h"

TEST(errno_status_bind_and_connect_differ_for_one_errno)
{
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_BIND, EADDRINUSE), STATUS_SHARING_VIOLATION);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_LISTEN, EADDRINUSE), STATUS_SHARING_VIOLATION);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_CONNECT, EADDRINUSE),
                 STATUS_ADDRESS_ALREADY_EXISTS);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_BIND, EADDRNOTAVAIL), STATUS_INVALID_ADDRESS);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_CONNECT, EADDRNOTAVAIL),
                 STATUS_ADDRESS_ALREADY_EXISTS);
}

TEST(errno_status_connect_rows)
{
    static const struct {
        int err;
        NTSTATUS st;
    } want[] = {
        {ECONNREFUSED, STATUS_CONNECTION_REFUSED},
        {ECONNRESET, STATUS_CONNECTION_REFUSED},
        {EPIPE, STATUS_CONNECTION_REFUSED},
        {0, STATUS_CONNECTION_REFUSED},
        {ENETUNREACH, STATUS_NETWORK_UNREACHABLE},
        {ENETDOWN, STATUS_NETWORK_UNREACHABLE},
        {EHOSTUNREACH, STATUS_HOST_UNREACHABLE},
        {EHOSTDOWN, STATUS_HOST_UNREACHABLE},
        {ETIMEDOUT, STATUS_IO_TIMEOUT},
        {ENOMEM, STATUS_INSUFFICIENT_RESOURCES},
        {ENOBUFS, STATUS_INSUFFICIENT_RESOURCES},
        {EACCES, STATUS_UNSUCCESSFUL},
        {EINVAL, STATUS_UNSUCCESSFUL},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_CONNECT, want[i].err), want[i].st);
}

TEST(errno_status_defaults_per_call)
{
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_SOCKET, EMFILE), STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_SOCKET, EADDRINUSE),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_BIND, EACCES), STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_LISTEN, EADDRNOTAVAIL),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_SHARED_PEER, EEXIST),
                 STATUS_ADDRESS_ALREADY_EXISTS);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_SHARED_PEER, ENOMEM),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_QP_ATTACH, EBUSY), STATUS_CONNECTION_ACTIVE);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_QP_ATTACH, ECANCELED), STATUS_CANCELLED);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_QP_ATTACH, ENOMEM),
                 STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_MPA_REPLY, EMSGSIZE), STATUS_INVALID_BUFFER_SIZE);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_MPA_REPLY, EINVAL), STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(sndk_status_from_errno(SNDK_CALL_COUNT, EINVAL), STATUS_INTERNAL_ERROR);
}

TEST(errno_status_call_names)
{
    CHECK(strcmp(sndk_errno_call_name(SNDK_CALL_BIND), "bind") == 0);
    CHECK(strcmp(sndk_errno_call_name(SNDK_CALL_CONNECT), "connect") == 0);
    for (int c = 0; c < SNDK_CALL_COUNT; c++)
        CHECK(sndk_errno_call_name((enum sndk_errno_call)c) != NULL);
    CHECK(strcmp(sndk_errno_call_name(SNDK_CALL_COUNT), "unknown") == 0);
}
