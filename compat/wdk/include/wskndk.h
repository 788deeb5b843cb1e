/*
 * wskndk.h — the NDK extension of WSK: how a kernel consumer opens an NDK adapter
 * (softndk kernel-consumer harness).
 *
 *   WSK_PROVIDER_NDK_DISPATCH ndk;
 *   WskProviderNpi.Dispatch->WskControlClient(WskProviderNpi.Client,
 *       WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL, sizeof ndk, &ndk, &returned, NULL);
 *   ndk.WskOpenNdkAdapter(WskProviderNpi.Client, Version, IfIndex, &Adapter);
 *   ...
 *   ndk.WskCloseNdkAdapter(WskProviderNpi.Client, Adapter);
 *
 * WskOpenNdkAdapter is SoftNdkOpenAdapter(IfIndex, NdkVersion, NULL, ppNdkAdapter): default
 * options, overridden by the SOFTNDK_* environment variables; its statuses (e.g.
 * NDIS_STATUS_BAD_VERSION, STATUS_NOT_FOUND for an unknown IfIndex). WskCloseNdkAdapter is
 * SoftNdkCloseAdapter (blocks until every object of the adapter is closed). Both PASSIVE_LEVEL.
 */
#ifndef SOFTNDK_WDK_WSKNDK_H
#define SOFTNDK_WDK_WSKNDK_H

#include "wsk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef NTSTATUS(WSKAPI *PFN_WSK_NDK_OPEN_ADAPTER)(_In_ PWSK_CLIENT Client,
                                                   _In_ NDK_VERSION NdkVersion,
                                                   _In_ NET_IFINDEX IfIndex,
                                                   _Outptr_ NDK_ADAPTER **ppNdkAdapter);
typedef VOID(WSKAPI *PFN_WSK_NDK_CLOSE_ADAPTER)(_In_ PWSK_CLIENT Client,
                                                _In_ NDK_ADAPTER *pNdkAdapter);

typedef struct _WSK_PROVIDER_NDK_DISPATCH {
    PFN_WSK_NDK_OPEN_ADAPTER WskOpenNdkAdapter;
    PFN_WSK_NDK_CLOSE_ADAPTER WskCloseNdkAdapter;
} WSK_PROVIDER_NDK_DISPATCH, *PWSK_PROVIDER_NDK_DISPATCH;

/* ((ULONG)'NDKD') in Windows' header; spelled as a number here because a multi-character
 * constant draws -Wmultichar from gcc. Same value (MSVC and gcc pack 'NDKD' identically). */
#define WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH ((ULONG)0x4E444B44u)

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_WSKNDK_H */
