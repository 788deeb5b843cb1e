/* Listener (spec/ndkpi.md §2.11, §5.8). The object and its close rules; listening on TCP comes
 * with the connection layer, and until then NdkListen answers STATUS_NOT_SUPPORTED. */
#include <stdlib.h>

#include "core/adapter.h"

struct sndk_listener {
    struct sndk_obj base;
    NDK_FN_CONNECT_EVENT_CALLBACK connect_cb;
    void *connect_ctx;
    _Atomic bool paused;
};

static struct sndk_listener *listener_from(const void *pub)
{
    struct sndk_obj *o = sndk_obj_check(pub, NdkObjectTypeListener);
    return o ? sndk_container_of(o, struct sndk_listener, base) : NULL;
}

static NTSTATUS listener_listen(NDK_LISTENER *pNdkListener, const struct sockaddr *pAddress,
                                ULONG AddressLength, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                PVOID RequestContext)
{
    (void)pAddress, (void)AddressLength, (void)RequestCompletion, (void)RequestContext;
    if (!listener_from(pNdkListener))
        return STATUS_INVALID_PARAMETER;
    return STATUS_NOT_SUPPORTED; /* the connection layer is not in this build */
}

static NTSTATUS listener_local_address(NDK_LISTENER *pNdkListener, struct sockaddr *pAddress,
                                       ULONG *pAddressLength)
{
    (void)pAddress;
    if (!listener_from(pNdkListener) || !pAddressLength)
        return STATUS_INVALID_PARAMETER;
    return STATUS_INVALID_DEVICE_STATE; /* not listening: no address yet */
}

static VOID listener_control_events(NDK_LISTENER *pNdkListener, BOOLEAN Pause)
{
    struct sndk_listener *l = listener_from(pNdkListener);
    if (l)
        atomic_store(&l->paused, Pause != 0);
}

static const NDK_LISTENER_DISPATCH listener_dispatch = {
    .NdkCloseListener = sndk_obj_close,
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkListen = listener_listen,
    .NdkGetLocalAddress = listener_local_address,
    .NdkControlConnectEvents = listener_control_events,
};

static const struct sndk_obj_ops listener_ops = {.type = NdkObjectTypeListener};

NTSTATUS sndk_listener_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                              PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_LISTENER **ppNdkListener)
{
    (void)CreateCompletion, (void)RequestContext;
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !ConnectEvent || !ppNdkListener)
        return STATUS_INVALID_PARAMETER;
    if (sndk_obj_closing(&a->base))
        return STATUS_INVALID_DEVICE_STATE;
    struct sndk_listener *l = calloc(1, sizeof *l);
    if (!l)
        return STATUS_INSUFFICIENT_RESOURCES;
    l->connect_cb = ConnectEvent;
    l->connect_ctx = ConnectEventContext;
    atomic_init(&l->paused, false);
    sndk_obj_init(&l->base, a, &listener_ops, &listener_dispatch);
    sndk_obj_hold(&l->base, &a->base);
    *ppNdkListener = &l->base.pub.listener;
    return STATUS_SUCCESS;
}
