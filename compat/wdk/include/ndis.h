/*
 * ndis.h — the NDIS names an NDK consumer or provider sees (softndk kernel-consumer harness):
 * NDIS_STATUS, NDIS_HANDLE, NDIS spin locks and memory macros, and the NDK provider-side
 * structures of ndisndk.h (OPEN_NDK_ADAPTER_HANDLER...) for completeness. Miniports, OIDs,
 * NET_BUFFERs are not provided.
 */
#ifndef SOFTNDK_WDK_NDIS_H
#define SOFTNDK_WDK_NDIS_H

#include "wdm.h"
#include "ws2ipdef.h"
#include "netioapi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef NTSTATUS NDIS_STATUS, *PNDIS_STATUS;
typedef PVOID NDIS_HANDLE, *PNDIS_HANDLE;
typedef ULONG NDIS_NIC_SWITCH_ID;
typedef ULONG NDIS_NIC_SWITCH_VPORT_ID;

#define NDIS_STATUS_PENDING ((NDIS_STATUS)STATUS_PENDING)
#define NDIS_STATUS_FAILURE ((NDIS_STATUS)STATUS_UNSUCCESSFUL)
#define NDIS_STATUS_NOT_SUPPORTED ((NDIS_STATUS)STATUS_NOT_SUPPORTED)
#define NDIS_STATUS_INVALID_PARAMETER ((NDIS_STATUS)STATUS_INVALID_PARAMETER)
#define NDIS_STATUS_BUFFER_TOO_SHORT ((NDIS_STATUS)STATUS_BUFFER_TOO_SMALL)

typedef struct _NDIS_OBJECT_HEADER {
    UCHAR Type;
    UCHAR Revision;
    USHORT Size;
} NDIS_OBJECT_HEADER, *PNDIS_OBJECT_HEADER;

/* ndisndk.h: what a miniport registers to provide NDK (softndk is such a provider). */
typedef struct _NDIS_OPEN_NDK_ADAPTER_PARAMETERS {
    NDK_VERSION Version;
    NDIS_NIC_SWITCH_ID SwitchId;
    NDIS_NIC_SWITCH_VPORT_ID VPortId;
} NDIS_OPEN_NDK_ADAPTER_PARAMETERS, *PNDIS_OPEN_NDK_ADAPTER_PARAMETERS;
typedef NDIS_STATUS (*OPEN_NDK_ADAPTER_HANDLER)(_In_ NDIS_HANDLE MiniportAdapterContext,
                                                _In_ PNDIS_OPEN_NDK_ADAPTER_PARAMETERS Parameters,
                                                _Outptr_ NDK_ADAPTER **ppNdkAdapter);
typedef VOID (*CLOSE_NDK_ADAPTER_HANDLER)(_In_ NDIS_HANDLE MiniportAdapterContext,
                                          _In_ NDK_ADAPTER *pNdkAdapter);
typedef struct _NDIS_NDK_PROVIDER_CHARACTERISTICS {
    NDIS_OBJECT_HEADER Header;
    ULONG Flags;
    OPEN_NDK_ADAPTER_HANDLER OpenNDKAdapterHandler;
    CLOSE_NDK_ADAPTER_HANDLER CloseNDKAdapterHandler;
} NDIS_NDK_PROVIDER_CHARACTERISTICS, *PNDIS_NDK_PROVIDER_CHARACTERISTICS;

/* NDIS spin locks: a KSPIN_LOCK and the IRQL it saved. */
typedef struct _NDIS_SPIN_LOCK {
    KSPIN_LOCK SpinLock;
    KIRQL OldIrql;
} NDIS_SPIN_LOCK, *PNDIS_SPIN_LOCK;
#define NdisAllocateSpinLock(_L) KeInitializeSpinLock(&(_L)->SpinLock)
#define NdisFreeSpinLock(_L) ((VOID)(_L))
#define NdisAcquireSpinLock(_L) KeAcquireSpinLock(&(_L)->SpinLock, &(_L)->OldIrql)
#define NdisReleaseSpinLock(_L) KeReleaseSpinLock(&(_L)->SpinLock, (_L)->OldIrql)
#define NdisDprAcquireSpinLock(_L) KeAcquireSpinLockAtDpcLevel(&(_L)->SpinLock)
#define NdisDprReleaseSpinLock(_L) KeReleaseSpinLockFromDpcLevel(&(_L)->SpinLock)

#define NdisZeroMemory(Destination, Length) RtlZeroMemory(Destination, Length)
#define NdisMoveMemory(Destination, Source, Length) RtlCopyMemory(Destination, Source, Length)
#define NdisEqualMemory(Source1, Source2, Length) RtlEqualMemory(Source1, Source2, Length)
#define NdisFillMemory(Destination, Length, Fill) RtlFillMemory(Destination, Length, Fill)
#define NdisInterlockedIncrement(Addend) InterlockedIncrement(Addend)
#define NdisInterlockedDecrement(Addend) InterlockedDecrement(Addend)
#define NdisInitializeListHead(_ListHead) InitializeListHead(_ListHead)

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_NDIS_H */
