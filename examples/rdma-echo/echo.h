/*++

Module Name:

    echo.h

Abstract:

    RDMA echo: a Windows kernel NDK consumer written the way production drivers are (an
    NDK_ADAPTER per socket and one for the listener, all on one interface; SAL concurrency
    annotations; pool priorities and a lookaside list; data requests carried by IRPs sent to the
    driver's own device and completed from the CQ; a work item per connect event). Built for
    softndk-wdkrun with nothing but `pkg-config --cflags --libs softndk-wdk`.

--*/

#pragma once

#include <ntddk.h>
#include <wdmsec.h>
#include <wsk.h>
#include <wskndk.h>
#include <ndkpi.h>
#include <netioapi.h>

#define ECHO_TAG          'ohcE'
#define ECHO_REQUEST_TAG  'qRcE'
#define ECHO_MESSAGES     24
#define ECHO_SLOT_SIZE    1024                // a slot never crosses an adapter page
#define ECHO_SLOTS        (2 * ECHO_MESSAGES) // receive slots first, then send slots
#define ECHO_BUFFER_SIZE  (ECHO_SLOTS * ECHO_SLOT_SIZE)
#define ECHO_WAIT_SECONDS 20
#define IOCTL_ECHO_SEND   CTL_CODE(FILE_DEVICE_NETWORK, 0x801, METHOD_NEITHER, FILE_ANY_ACCESS)

//
// MSVC idiom: a constant condition in a macro, its warning silenced where it is written.
//
#define ECHO_LOG(Level, ...)                                                                       \
    __pragma(warning(push)) __pragma(warning(disable : 4127)) do                                   \
    {                                                                                              \
        DbgPrintEx(DPFLTR_IHVNETWORK_ID, (Level), __VA_ARGS__);                                    \
    }                                                                                              \
    while (0)                                                                                      \
    __pragma(warning(pop))

typedef struct _ECHO_SYNC {
    KEVENT Event;
    NTSTATUS Status;
    PVOID Object;
} ECHO_SYNC, *PECHO_SYNC;

typedef struct _ECHO_SOCKET {
    PCSTR Name;
    BOOLEAN IsServer;
    NDK_ADAPTER *Adapter;   // the instance its PD, QP (and connector, when active) come from
    NDK_ADAPTER *CqAdapter; // the instance its CQ comes from (another one on the server)
    NDK_PD *Pd;
    NDK_CQ *Cq;
    NDK_QP *Qp;
    NDK_CONNECTOR *Connector;
    UINT32 Token;
    PUCHAR Buffer;
    PMDL Mdl;
    NDK_LOGICAL_ADDRESS_MAPPING *Lam;
    ULONG Fbo;

    KSPIN_LOCK Lock;
    _Guarded_by_(Lock) ULONG Received;
    _Guarded_by_(Lock) ULONG Echoed;
    _Write_guarded_by_(Lock) BOOLEAN Failed;
    _Interlocked_ volatile LONG OutstandingIrps;

    EX_RUNDOWN_REF CqRundown;
    KEVENT Done;
    KEVENT Disconnected;
} ECHO_SOCKET, *PECHO_SOCKET;

typedef struct _ECHO_SEND_REQUEST {
    PECHO_SOCKET Socket;
    ULONG Slot;
    ULONG Length;
} ECHO_SEND_REQUEST, *PECHO_SEND_REQUEST;

typedef struct _ECHO_GLOBALS {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_PROVIDER_NPI WskProvider;
    WSK_PROVIDER_NDK_DISPATCH NdkDispatch;
    NET_IFINDEX IfIndex;
    LOOKASIDE_LIST_EX RequestLookaside;

    //
    // One adapter instance per role, all on IfIndex: on an RNIC they are one device.
    //
    NDK_ADAPTER *ListenAdapter;
    NDK_ADAPTER *ServerAdapter;
    NDK_ADAPTER *ClientAdapter;
    NDK_LISTENER *Listener;
    SOCKADDR_IN ListenAddress;

    ECHO_SOCKET Server;
    ECHO_SOCKET Client;

    KSPIN_LOCK AcceptLock;
    _Guarded_by_(AcceptLock) ULONG ConnectEvents;
    KEVENT AcceptDone;
    NTSTATUS AcceptStatus;
} ECHO_GLOBALS;

extern ECHO_GLOBALS EchoGlobals;

DRIVER_UNLOAD EchoUnload;
_Dispatch_type_(IRP_MJ_INTERNAL_DEVICE_CONTROL) DRIVER_DISPATCH EchoDispatchInternal;
IO_COMPLETION_ROUTINE EchoSendCompleted;
IO_WORKITEM_ROUTINE EchoAcceptWorker;

_IRQL_requires_(PASSIVE_LEVEL) VOID EchoSyncInit(_Out_ PECHO_SYNC Sync);
_IRQL_requires_(PASSIVE_LEVEL) NTSTATUS EchoSyncWait(_Inout_ PECHO_SYNC Sync, _In_ NTSTATUS Status);
_IRQL_requires_max_(DISPATCH_LEVEL) VOID
    EchoCreateDone(_In_opt_ PVOID Context, _In_ NTSTATUS Status, _In_ NDK_OBJECT_HEADER *Object);
_IRQL_requires_max_(DISPATCH_LEVEL) VOID
    EchoRequestDone(_In_opt_ PVOID Context, _In_ NTSTATUS Status);
_IRQL_requires_max_(DISPATCH_LEVEL) VOID EchoCloseDone(_In_opt_ PVOID Context);
_IRQL_requires_(PASSIVE_LEVEL) VOID EchoClose(_In_ NDK_OBJECT_HEADER *Object);

_IRQL_requires_(PASSIVE_LEVEL) NTSTATUS
    EchoSocketOpen(_Inout_ PECHO_SOCKET Socket, _In_ NDK_ADAPTER *Adapter,
                   _In_ NDK_ADAPTER *CqAdapter);
_IRQL_requires_(PASSIVE_LEVEL) VOID EchoSocketClose(_Inout_ PECHO_SOCKET Socket);
_IRQL_requires_(PASSIVE_LEVEL) VOID EchoSocketCloseCq(_Inout_ PECHO_SOCKET Socket);
_IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS
    EchoPostReceive(_In_ PECHO_SOCKET Socket, _In_ ULONG Slot);
_IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS
    EchoSendAsync(_In_ PECHO_SOCKET Socket, _In_ ULONG Slot, _In_ ULONG Length);
_IRQL_requires_max_(DISPATCH_LEVEL) VOID EchoDisconnectEvent(_In_opt_ PVOID Context);

_IRQL_requires_(PASSIVE_LEVEL) NTSTATUS EchoRun(VOID);

//
// Message i: a length from 1 to ECHO_SLOT_SIZE and bytes that name it.
//
FORCEINLINE ULONG EchoLength(ULONG Index)
{
    return 1 + (Index * 211) % ECHO_SLOT_SIZE;
}

FORCEINLINE UCHAR EchoByte(ULONG Index, ULONG Offset)
{
    return (UCHAR)(Index * 7 + Offset * 13 + 1);
}
