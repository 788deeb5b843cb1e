/* The create slots of the objects whose files are in core/, as the factories' dispatch tables
 * list them: the adapter's (core/adapter.c) and the PD's (core/pd.c). The objects below core/
 * declare theirs in their own headers (device/cq.h, device/mr.h, device/srq.h). */
#ifndef SOFTNDK_CORE_CREATE_H
#define SOFTNDK_CORE_CREATE_H

#include <stddef.h>

#include "device/adapter_state.h"

NTSTATUS sndk_pd_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_PD **ppNdkPd);
NTSTATUS sndk_endpoint_create(NDK_ADAPTER *pNdkAdapter, const struct sockaddr *pAddress,
                              ULONG AddressLength, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint);
NTSTATUS sndk_connector_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                               PVOID RequestContext, NDK_CONNECTOR **ppNdkConnector);
NTSTATUS sndk_listener_create(NDK_ADAPTER *pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                              PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_LISTENER **ppNdkListener);
NTSTATUS sndk_qp_create(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq, PVOID QPContext,
                        ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                        ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                        ULONG InlineDataSize, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_QP **ppNdkQp);
NTSTATUS sndk_qp_create_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                 ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                 NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                 NDK_QP **ppNdkQp);

/* The ndkstat snapshot of an adapter (core/adapter_stat.c), as observe/stat.h serves it:
 * adapter is a struct sndk_adapter *. A malloc'd text, *len its length; NULL when out of
 * memory. */
char *sndk_adapter_snapshot(void *adapter, size_t *len);

#endif
