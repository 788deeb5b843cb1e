/* Connector (spec/ndkpi.md §2.10, §5.6–§5.7). The object and its close rules; the MPA
 * handshake on TCP comes with the connection layer. Until then a connector never connects:
 * the establishing calls answer STATUS_NOT_SUPPORTED and the calls that need an established
 * or connecting connection answer as for a connector that has none. */
#include <stdlib.h>

#include "core/adapter.h"

struct sndk_connector {
    struct sndk_obj base;
};

static bool connector_ok(const void *pub)
{
    return sndk_obj_check(pub, NdkObjectTypeConnector) != NULL;
}

static NTSTATUS connector_connect(NDK_CONNECTOR *c, NDK_QP *qp, const struct sockaddr *src,
                                  ULONG srclen, const struct sockaddr *dst, ULONG dstlen, ULONG ird,
                                  ULONG ord, const void *pd, ULONG pdlen,
                                  NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    (void)qp, (void)src, (void)srclen, (void)dst, (void)dstlen, (void)ird, (void)ord, (void)pd;
    (void)pdlen, (void)cb, (void)ctx;
    return connector_ok(c) ? STATUS_NOT_SUPPORTED : STATUS_INVALID_PARAMETER;
}

static NTSTATUS connector_connect_se(NDK_CONNECTOR *c, NDK_QP *qp, NDK_SHARED_ENDPOINT *se,
                                     const struct sockaddr *dst, ULONG dstlen, ULONG ird, ULONG ord,
                                     const void *pd, ULONG pdlen, NDK_FN_REQUEST_COMPLETION cb,
                                     PVOID ctx)
{
    (void)qp, (void)se, (void)dst, (void)dstlen, (void)ird, (void)ord, (void)pd, (void)pdlen;
    (void)cb, (void)ctx;
    return connector_ok(c) ? STATUS_NOT_SUPPORTED : STATUS_INVALID_PARAMETER;
}

static NTSTATUS connector_complete(NDK_CONNECTOR *c, NDK_FN_DISCONNECT_EVENT_CALLBACK ev,
                                   PVOID evctx, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    (void)ev, (void)evctx, (void)cb, (void)ctx;
    return connector_ok(c) ? STATUS_CONNECTION_INVALID : STATUS_INVALID_PARAMETER;
}

static NTSTATUS connector_complete_ex(NDK_CONNECTOR *c, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev,
                                      PVOID evctx, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    (void)ev, (void)evctx, (void)cb, (void)ctx;
    return connector_ok(c) ? STATUS_CONNECTION_INVALID : STATUS_INVALID_PARAMETER;
}

/* Accept, reject and the getters need a connector delivered by a connect event or a Connect
 * that completed; this build produces neither. */
static NTSTATUS connector_accept(NDK_CONNECTOR *c, NDK_QP *qp, ULONG ird, ULONG ord,
                                 const void *pd, ULONG pdlen, NDK_FN_DISCONNECT_EVENT_CALLBACK ev,
                                 PVOID evctx, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    (void)qp, (void)ird, (void)ord, (void)pd, (void)pdlen, (void)ev, (void)evctx, (void)cb;
    (void)ctx;
    return connector_ok(c) ? STATUS_INVALID_DEVICE_STATE : STATUS_INVALID_PARAMETER;
}

static NTSTATUS connector_accept_ex(NDK_CONNECTOR *c, NDK_QP *qp, ULONG ird, ULONG ord,
                                    const void *pd, ULONG pdlen,
                                    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX ev, PVOID evctx,
                                    NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    (void)qp, (void)ird, (void)ord, (void)pd, (void)pdlen, (void)ev, (void)evctx, (void)cb;
    (void)ctx;
    return connector_ok(c) ? STATUS_INVALID_DEVICE_STATE : STATUS_INVALID_PARAMETER;
}

static NTSTATUS connector_reject(NDK_CONNECTOR *c, const void *pd, ULONG pdlen)
{
    (void)pd, (void)pdlen;
    return connector_ok(c) ? STATUS_INVALID_DEVICE_STATE : STATUS_INVALID_PARAMETER;
}

static NTSTATUS connector_data(NDK_CONNECTOR *c, ULONG *ird, ULONG *ord, PVOID pd, ULONG *pdlen)
{
    (void)ird, (void)ord, (void)pd;
    if (!connector_ok(c) || !pdlen)
        return STATUS_INVALID_PARAMETER;
    return STATUS_INVALID_DEVICE_STATE;
}

static NTSTATUS connector_address(NDK_CONNECTOR *c, struct sockaddr *addr, ULONG *len)
{
    (void)addr;
    if (!connector_ok(c) || !len)
        return STATUS_INVALID_PARAMETER;
    return STATUS_INVALID_DEVICE_STATE;
}

static NTSTATUS connector_disconnect(NDK_CONNECTOR *c, NDK_FN_REQUEST_COMPLETION cb, PVOID ctx)
{
    (void)cb, (void)ctx;
    return connector_ok(c) ? STATUS_CONNECTION_INVALID : STATUS_INVALID_PARAMETER;
}

static const NDK_CONNECTOR_DISPATCH connector_dispatch = {
    .NdkCloseConnector = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkConnect = connector_connect,
    .NdkConnectWithSharedEndpoint = connector_connect_se,
    .NdkCompleteConnect = connector_complete,
    .NdkAccept = connector_accept,
    .NdkReject = connector_reject,
    .NdkGetConnectionData = connector_data,
    .NdkGetLocalAddress = connector_address,
    .NdkGetPeerAddress = connector_address,
    .NdkDisconnect = connector_disconnect,
    .NdkCompleteConnectEx = connector_complete_ex,
    .NdkAcceptEx = connector_accept_ex,
};

static const struct sndk_obj_ops connector_ops = {.type = NdkObjectTypeConnector};

NTSTATUS sndk_connector_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                               PVOID RequestContext, NDK_CONNECTOR **ppNdkConnector)
{
    (void)CreateCompletion, (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ppNdkConnector)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    struct sndk_connector *c = calloc(1, sizeof *c);
    if (!c)
        return STATUS_INSUFFICIENT_RESOURCES;
    sndk_obj_init(&c->base, a, &connector_ops, &connector_dispatch);
    sndk_obj_hold(&c->base, &a->base);
    *ppNdkConnector = &c->base.pub.connector;
    return STATUS_SUCCESS;
}
