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

/* ------------------------------------------------------------------------------------------ */
/* WSK sockets (connection-oriented and listen sockets on the host's TCP sockets: docs/wdk.md,
 * "WSK sockets"). Every request takes an IRP the client allocated (IoAllocateIrp(1, FALSE) and
 * a completion routine, as on Windows): the request is completed through it, at once or later
 * from a harness thread (DISPATCH_LEVEL), and the call returns the status or STATUS_PENDING. */
typedef enum _WSK_CONTROL_SOCKET_TYPE {
    WskSetOption,
    WskGetOption,
    WskIoctl
} WSK_CONTROL_SOCKET_TYPE;
typedef enum _WSK_INSPECT_ACTION {
    WskInspectReject,
    WskInspectAccept,
    WskInspectPend,
    WskInspectMax
} WSK_INSPECT_ACTION;
typedef struct _WSK_INSPECT_ID {
    ULONG_PTR Key;
    ULONG SerialNumber;
} WSK_INSPECT_ID, *PWSK_INSPECT_ID;
typedef GUID NPIID, *PNPIID;
/* NPI_WSK_INTERFACE_ID {2227E803-8D8B-11D4-ABAD-009027FC2AA3}: a constant per translation unit
 * here (the harness compares the GUID, not its address). */
static const GUID NPI_WSK_INTERFACE_ID __attribute__((unused)) = {
    0x2227E803, 0x8D8B, 0x11D4, {0xAB, 0xAD, 0x00, 0x90, 0x27, 0xFC, 0x2A, 0xA3}};
typedef struct _WSK_EVENT_CALLBACK_CONTROL {
    PNPIID NpiId;
    ULONG EventMask;
} WSK_EVENT_CALLBACK_CONTROL, *PWSK_EVENT_CALLBACK_CONTROL;
#define WSK_SO_BASE            0x4000
#define SO_WSK_SECURITY        (WSK_SO_BASE + 1)
#define SO_WSK_EVENT_CALLBACK  (WSK_SO_BASE + 2)
#define WSK_EVENT_RECEIVE_FROM 0x00000100
#define WSK_EVENT_ACCEPT       0x00000200
#define WSK_EVENT_SEND_BACKLOG 0x00000010
#define WSK_EVENT_RECEIVE      0x00000040
#define WSK_EVENT_DISCONNECT   0x00000080
#define WSK_EVENT_DISABLE      0x80000000
/* request flags: WskDisconnect's, WskReceive's, WskSend's */
#define WSK_FLAG_ABORTIVE          0x00000001
#define WSK_FLAG_WAITALL           0x00000002
#define WSK_FLAG_NODELAY           0x00000002
#define WSK_FLAG_AT_DISPATCH_LEVEL 0x00000008

struct _WSK_CLIENT_CONNECTION_DISPATCH;
typedef NTSTATUS(WSKAPI *PFN_WSK_ACCEPT_EVENT)(
    _In_opt_ PVOID SocketContext, _In_ ULONG Flags, _In_opt_ PSOCKADDR LocalAddress,
    _In_opt_ PSOCKADDR RemoteAddress, _In_opt_ PWSK_SOCKET AcceptSocket,
    _Outptr_result_maybenull_ PVOID *AcceptSocketContext,
    _Outptr_result_maybenull_ const struct _WSK_CLIENT_CONNECTION_DISPATCH **AcceptSocketDispatch);
typedef WSK_INSPECT_ACTION(WSKAPI *PFN_WSK_INSPECT_EVENT)(_In_opt_ PVOID SocketContext,
                                                          _In_ PSOCKADDR LocalAddress,
                                                          _In_ PSOCKADDR RemoteAddress,
                                                          _In_opt_ PWSK_INSPECT_ID InspectID);
typedef NTSTATUS(WSKAPI *PFN_WSK_ABORT_EVENT)(_In_opt_ PVOID SocketContext,
                                              _In_ PWSK_INSPECT_ID InspectID);
typedef NTSTATUS(WSKAPI *PFN_WSK_RECEIVE_EVENT)(_In_opt_ PVOID SocketContext, _In_ ULONG Flags,
                                                _In_opt_ PWSK_DATA_INDICATION DataIndication,
                                                _In_ SIZE_T BytesIndicated,
                                                _Inout_ SIZE_T *BytesAccepted);
typedef NTSTATUS(WSKAPI *PFN_WSK_DISCONNECT_EVENT)(_In_opt_ PVOID SocketContext, _In_ ULONG Flags);
typedef NTSTATUS(WSKAPI *PFN_WSK_SEND_BACKLOG_EVENT)(_In_opt_ PVOID SocketContext,
                                                     _In_ SIZE_T IdealBacklogSize);
typedef struct _WSK_CLIENT_LISTEN_DISPATCH {
    PFN_WSK_ACCEPT_EVENT WskAcceptEvent;
    PFN_WSK_INSPECT_EVENT WskInspectEvent;
    PFN_WSK_ABORT_EVENT WskAbortEvent;
} WSK_CLIENT_LISTEN_DISPATCH, *PWSK_CLIENT_LISTEN_DISPATCH;
typedef struct _WSK_CLIENT_CONNECTION_DISPATCH {
    PFN_WSK_RECEIVE_EVENT WskReceiveEvent;
    PFN_WSK_DISCONNECT_EVENT WskDisconnectEvent;
    PFN_WSK_SEND_BACKLOG_EVENT WskSendBacklogEvent;
} WSK_CLIENT_CONNECTION_DISPATCH, *PWSK_CLIENT_CONNECTION_DISPATCH;

typedef NTSTATUS(WSKAPI *PFN_WSK_CONTROL_SOCKET)(
    _In_ PWSK_SOCKET Socket, _In_ WSK_CONTROL_SOCKET_TYPE RequestType, _In_ ULONG ControlCode,
    _In_ ULONG Level, _In_ SIZE_T InputSize, _In_reads_bytes_opt_(InputSize) PVOID InputBuffer,
    _In_ SIZE_T OutputSize, _Out_writes_bytes_opt_(OutputSize) PVOID OutputBuffer,
    _Out_opt_ SIZE_T *OutputSizeReturned, _Inout_opt_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_CLOSE_SOCKET)(_In_ PWSK_SOCKET Socket, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_BIND)(_In_ PWSK_SOCKET Socket, _In_ PSOCKADDR LocalAddress,
                                       _Reserved_ ULONG Flags, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_ACCEPT)(
    _In_ PWSK_SOCKET ListenSocket, _Reserved_ ULONG Flags, _In_opt_ PVOID AcceptSocketContext,
    _In_opt_ const WSK_CLIENT_CONNECTION_DISPATCH *AcceptSocketDispatch,
    _Out_opt_ PSOCKADDR LocalAddress, _Out_opt_ PSOCKADDR RemoteAddress, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_INSPECT_COMPLETE)(_In_ PWSK_SOCKET ListenSocket,
                                                   _In_ PWSK_INSPECT_ID InspectID,
                                                   _In_ WSK_INSPECT_ACTION Action,
                                                   _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_GET_LOCAL_ADDRESS)(_In_ PWSK_SOCKET Socket,
                                                    _Out_ PSOCKADDR LocalAddress, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_GET_REMOTE_ADDRESS)(_In_ PWSK_SOCKET Socket,
                                                     _Out_ PSOCKADDR RemoteAddress,
                                                     _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_CONNECT)(_In_ PWSK_SOCKET Socket, _In_ PSOCKADDR RemoteAddress,
                                          _Reserved_ ULONG Flags, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_SEND)(_In_ PWSK_SOCKET Socket, _In_ PWSK_BUF Buffer,
                                       _In_ ULONG Flags, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_RECEIVE)(_In_ PWSK_SOCKET Socket, _In_ PWSK_BUF Buffer,
                                          _In_ ULONG Flags, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_DISCONNECT)(_In_ PWSK_SOCKET Socket, _In_opt_ PWSK_BUF Buffer,
                                             _In_ ULONG Flags, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_RELEASE_DATA_INDICATION_LIST)(
    _In_ PWSK_SOCKET Socket, _In_ PWSK_DATA_INDICATION DataIndication);
typedef struct _WSK_PROVIDER_BASIC_DISPATCH {
    PFN_WSK_CONTROL_SOCKET WskControlSocket;
    PFN_WSK_CLOSE_SOCKET WskCloseSocket;
} WSK_PROVIDER_BASIC_DISPATCH, *PWSK_PROVIDER_BASIC_DISPATCH;
/* Windows' wsk.h gives C code the basic routines as an anonymous member (Dispatch->
 * WskCloseSocket) and C++ code a member Basic (Dispatch->Basic.WskCloseSocket): both spellings
 * work here, through an anonymous union. */
#define SOFTNDK_WSK_BASIC_MEMBERS                                                                  \
    union {                                                                                        \
        WSK_PROVIDER_BASIC_DISPATCH Basic;                                                         \
        struct {                                                                                   \
            PFN_WSK_CONTROL_SOCKET WskControlSocket;                                               \
            PFN_WSK_CLOSE_SOCKET WskCloseSocket;                                                   \
        };                                                                                         \
    }
typedef struct _WSK_PROVIDER_LISTEN_DISPATCH {
    SOFTNDK_WSK_BASIC_MEMBERS;
    PFN_WSK_BIND WskBind;
    PFN_WSK_ACCEPT WskAccept;
    PFN_WSK_INSPECT_COMPLETE WskInspectComplete;
    PFN_WSK_GET_LOCAL_ADDRESS WskGetLocalAddress;
} WSK_PROVIDER_LISTEN_DISPATCH, *PWSK_PROVIDER_LISTEN_DISPATCH;
typedef struct _WSK_PROVIDER_CONNECTION_DISPATCH {
    SOFTNDK_WSK_BASIC_MEMBERS;
    PFN_WSK_BIND WskBind;
    PFN_WSK_CONNECT WskConnect;
    PFN_WSK_GET_LOCAL_ADDRESS WskGetLocalAddress;
    PFN_WSK_GET_REMOTE_ADDRESS WskGetRemoteAddress;
    PFN_WSK_SEND WskSend;
    PFN_WSK_RECEIVE WskReceive;
    PFN_WSK_DISCONNECT WskDisconnect;
    PFN_WSK_RELEASE_DATA_INDICATION_LIST WskRelease;
} WSK_PROVIDER_CONNECTION_DISPATCH, *PWSK_PROVIDER_CONNECTION_DISPATCH;
/* Datagram sockets: the types, for drivers that carry a UDP path; WskSocket refuses
 * WSK_FLAG_DATAGRAM_SOCKET with STATUS_NOT_SUPPORTED. */
typedef struct cmsghdr CMSGHDR, *PCMSGHDR;
typedef NTSTATUS(WSKAPI *PFN_WSK_SEND_TO)(_In_ PWSK_SOCKET Socket, _In_ PWSK_BUF Buffer,
                                          _Reserved_ ULONG Flags, _In_opt_ PSOCKADDR RemoteAddress,
                                          _In_ ULONG ControlInfoLength,
                                          _In_opt_ PCMSGHDR ControlInfo, _Inout_ PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_RECEIVE_FROM)(_In_ PWSK_SOCKET Socket, _In_ PWSK_BUF Buffer,
                                               _Reserved_ ULONG Flags,
                                               _Out_opt_ PSOCKADDR RemoteAddress,
                                               _Inout_ PULONG ControlLength,
                                               _Out_opt_ PCMSGHDR ControlInfo,
                                               _Out_opt_ PULONG ControlFlags, _Inout_ PIRP Irp);
typedef struct _WSK_PROVIDER_DATAGRAM_DISPATCH {
    SOFTNDK_WSK_BASIC_MEMBERS;
    PFN_WSK_BIND WskBind;
    PFN_WSK_SEND_TO WskSendTo;
    PFN_WSK_RECEIVE_FROM WskReceiveFrom;
    PFN_WSK_RELEASE_DATA_INDICATION_LIST WskRelease;
    PFN_WSK_GET_LOCAL_ADDRESS WskGetLocalAddress;
} WSK_PROVIDER_DATAGRAM_DISPATCH, *PWSK_PROVIDER_DATAGRAM_DISPATCH;

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
