/*
 * wsk.h — Winsock Kernel, as far as an NDK consumer needs it (softndk kernel-consumer
 * harness): registration (WskRegister / WskCaptureProviderNPI / WskReleaseProviderNPI /
 * WskDeregister) and the provider dispatch whose WskControlClient hands out the NDK extension
 * (wskndk.h). Sockets are not provided: WskSocket, WskSocketConnect, WskGetAddressInfo and
 * WskGetNameInfo return STATUS_NOT_IMPLEMENTED. There are no IRPs: a control call with an Irp
 * returns STATUS_NOT_SUPPORTED.
 */
#ifndef SOFTNDK_WDK_WSK_H
#define SOFTNDK_WDK_WSK_H

#include "wdm.h"
#include "ws2def.h"
#include "ws2ipdef.h" /* and through it mstcpip.h, ip2string.h, as in the WDK */
#include "netioapi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WSKAPI NTAPI

typedef struct _WSK_CLIENT WSK_CLIENT, *PWSK_CLIENT;
typedef struct _WSK_SOCKET {
    const VOID *Dispatch;
} WSK_SOCKET, *PWSK_SOCKET;
typedef struct addrinfoexW ADDRINFOEXW, *PADDRINFOEXW;

/* A buffer of a WSK request: Length bytes from Offset into the MDL chain Mdl (wsk.h). */
typedef struct _WSK_BUF {
    PMDL Mdl;
    ULONG Offset;
    SIZE_T Length;
} WSK_BUF, *PWSK_BUF;
typedef struct _WSK_BUF_LIST {
    struct _WSK_BUF_LIST *Next;
    WSK_BUF Buffer;
} WSK_BUF_LIST, *PWSK_BUF_LIST;
typedef struct _WSK_DATA_INDICATION {
    struct _WSK_DATA_INDICATION *Next;
    WSK_BUF Buffer;
} WSK_DATA_INDICATION, *PWSK_DATA_INDICATION;

#define MAKE_WSK_VERSION(Mj, Mn) ((USHORT)((Mj) << 8) | (USHORT)((Mn) & 0xff))
#define WSK_MAJOR_VERSION(V) ((UCHAR)((V) >> 8))
#define WSK_MINOR_VERSION(V) ((UCHAR)(V))
#define WSK_NO_WAIT 0
#define WSK_INFINITE_WAIT 0xffffffff

/* Client control codes (WskControlClient). */
#define WSK_TRANSPORT_LIST_QUERY 2
#define WSK_TRANSPORT_LIST_CHANGE 3
#define WSK_CACHE_SD 4
#define WSK_RELEASE_SD 5
#define WSK_TDI_DEVICENAME_MAPPING 6
#define WSK_SET_STATIC_EVENT_CALLBACKS 7
#define WSK_TDI_BEHAVIOR 8

#define WSK_FLAG_BASIC_SOCKET 0x00000000
#define WSK_FLAG_LISTEN_SOCKET 0x00000001
#define WSK_FLAG_CONNECTION_SOCKET 0x00000002
#define WSK_FLAG_DATAGRAM_SOCKET 0x00000004
#define WSK_FLAG_STREAM_SOCKET 0x00000008

typedef NTSTATUS(WSKAPI *PFN_WSK_CLIENT_EVENT)(_In_opt_ PVOID ClientContext, _In_ ULONG EventType,
                                               _In_reads_bytes_opt_(InformationLength)
                                                   PVOID Information,
                                               _In_ SIZE_T InformationLength);

typedef struct _WSK_CLIENT_DISPATCH {
    USHORT Version; /* MAKE_WSK_VERSION(1, 0): the harness speaks major version 1 */
    USHORT Reserved;
    PFN_WSK_CLIENT_EVENT WskClientEvent;
} WSK_CLIENT_DISPATCH, *PWSK_CLIENT_DISPATCH;

typedef struct _WSK_CLIENT_NPI {
    PVOID ClientContext;
    const WSK_CLIENT_DISPATCH *Dispatch;
} WSK_CLIENT_NPI, *PWSK_CLIENT_NPI;

/* Storage for a registration, owned by the client (usually a global). */
typedef struct _WSK_REGISTRATION {
    ULONGLONG ReservedRegistrationState;
    PVOID ReservedRegistrationContext;
    KSPIN_LOCK ReservedRegistrationLock;
} WSK_REGISTRATION, *PWSK_REGISTRATION;

typedef NTSTATUS(WSKAPI *PFN_WSK_SOCKET)(
    _In_ PWSK_CLIENT Client, _In_ ADDRESS_FAMILY AddressFamily, _In_ USHORT SocketType,
    _In_ ULONG Protocol, _In_ ULONG Flags, _In_opt_ PVOID SocketContext,
    _In_opt_ const VOID *Dispatch, _In_opt_ PEPROCESS OwningProcess,
    _In_opt_ PETHREAD OwningThread, _In_opt_ PSECURITY_DESCRIPTOR SecurityDescriptor,
    _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_SOCKET_CONNECT)(
    _In_ PWSK_CLIENT Client, _In_ USHORT SocketType, _In_ ULONG Protocol,
    _In_ PSOCKADDR LocalAddress, _In_ PSOCKADDR RemoteAddress, _Reserved_ ULONG Flags,
    _In_opt_ PVOID SocketContext, _In_opt_ const VOID *Dispatch,
    _In_opt_ PEPROCESS OwningProcess, _In_opt_ PETHREAD OwningThread,
    _In_opt_ PSECURITY_DESCRIPTOR SecurityDescriptor, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_CONTROL_CLIENT)(
    _In_ PWSK_CLIENT Client, _In_ ULONG ControlCode, _In_ SIZE_T InputSize,
    _In_reads_bytes_opt_(InputSize) PVOID InputBuffer, _In_ SIZE_T OutputSize,
    _Out_writes_bytes_opt_(OutputSize) PVOID OutputBuffer, _Out_opt_ SIZE_T *OutputSizeReturned,
    _Inout_opt_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_GET_ADDRESS_INFO)(
    _In_ PWSK_CLIENT Client, _In_opt_ PUNICODE_STRING NodeName,
    _In_opt_ PUNICODE_STRING ServiceName, _In_opt_ ULONG NameSpace, _In_opt_ GUID *Provider,
    _In_opt_ PADDRINFOEXW Hints, _Outptr_ PADDRINFOEXW *Result, _In_opt_ PEPROCESS OwningProcess,
    _In_opt_ PETHREAD OwningThread, _Inout_ PIRP Irp);
typedef VOID(WSKAPI *PFN_WSK_FREE_ADDRESS_INFO)(_In_ PWSK_CLIENT Client,
                                                _In_ PADDRINFOEXW AddrInfo);
typedef NTSTATUS(WSKAPI *PFN_WSK_GET_NAME_INFO)(
    _In_ PWSK_CLIENT Client, _In_ PSOCKADDR SockAddr, _In_ ULONG SockAddrLength,
    _Out_opt_ PUNICODE_STRING NodeName, _Out_opt_ PUNICODE_STRING ServiceName, _In_ ULONG Flags,
    _In_opt_ PEPROCESS OwningProcess, _In_opt_ PETHREAD OwningThread, _Inout_ PIRP Irp);

typedef struct _WSK_PROVIDER_DISPATCH {
    USHORT Version;
    USHORT Reserved;
    PFN_WSK_SOCKET WskSocket;
    PFN_WSK_SOCKET_CONNECT WskSocketConnect;
    PFN_WSK_CONTROL_CLIENT WskControlClient;
    PFN_WSK_GET_ADDRESS_INFO WskGetAddressInfo;
    PFN_WSK_FREE_ADDRESS_INFO WskFreeAddressInfo;
    PFN_WSK_GET_NAME_INFO WskGetNameInfo;
} WSK_PROVIDER_DISPATCH, *PWSK_PROVIDER_DISPATCH;

typedef struct _WSK_PROVIDER_NPI {
    PWSK_CLIENT Client;
    const WSK_PROVIDER_DISPATCH *Dispatch;
} WSK_PROVIDER_NPI, *PWSK_PROVIDER_NPI;

/* STATUS_SUCCESS, STATUS_INVALID_PARAMETER (NULL argument or dispatch),
 * STATUS_NOINTERFACE (client major version other than 1), STATUS_INSUFFICIENT_RESOURCES. */
SOFTNDK_WDK_API NTSTATUS WskRegister(_In_ PWSK_CLIENT_NPI WskClientNpi,
                                     _Out_ PWSK_REGISTRATION WskRegistration);
/* STATUS_SUCCESS (the provider is always ready), STATUS_DEVICE_NOT_READY (WskDeregister has
 * been called), STATUS_INVALID_PARAMETER. A WaitTimeout other than WSK_NO_WAIT requires
 * PASSIVE_LEVEL. Every successful capture needs one WskReleaseProviderNPI. */
SOFTNDK_WDK_API NTSTATUS WskCaptureProviderNPI(_In_ PWSK_REGISTRATION WskRegistration,
                                               _In_ ULONG WaitTimeout,
                                               _Out_ PWSK_PROVIDER_NPI WskProviderNpi);
SOFTNDK_WDK_API VOID WskReleaseProviderNPI(_In_ PWSK_REGISTRATION WskRegistration);
/* Blocks (PASSIVE_LEVEL) until every captured provider NPI has been released. NDK adapters
 * still open then are reported (and by the runner as leaks). */
SOFTNDK_WDK_API VOID WskDeregister(_In_ PWSK_REGISTRATION WskRegistration);

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_WSK_H */
