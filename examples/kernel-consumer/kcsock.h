/*++

Module Name:

    kcsock.h

Abstract:

    An "RDMA socket" over NDK, written as a Windows kernel NDK consumer would write it (WSK to
    reach the adapter, LAM buffers with the PD's privileged token, CQ notifications with
    interrupt moderation, rundown protection around callbacks). Built against softndk's
    kernel-consumer harness headers only (docs/wdk.md) and run by softndk-wdkrun.

Environment:

    Kernel mode (or softndk-wdk).

--*/

#pragma once

#include <ntddk.h>
#include <wsk.h>
#include <wskndk.h>
#include <netioapi.h>
#include <ip2string.h>

//
// Pool tags, as poolmon shows them: "Sock", "KLam", "KMsg".
//
#define KC_SOCKET_TAG 'kcoS'
#define KC_LAM_TAG 'maLK'
#define KC_MSG_TAG 'gsMK'

#define KC_SLOT_SIZE 1024           // one message slot in a LAM buffer
#define KC_QUEUE_DEPTH 32           // receive and initiator queue depth
#define KC_BUFFER_SIZE (KC_SLOT_SIZE * KC_QUEUE_DEPTH)
#define KC_RDMA_SIZE (3 * PAGE_SIZE + 512) // spans pages: several adapter pages per transfer
#define KC_WAIT_SECONDS 10

#define KcLog(Level, ...) DbgPrintEx(DPFLTR_IHVNETWORK_ID, (Level), __VA_ARGS__)

//
// An NDK request waited on at PASSIVE_LEVEL. The completion routines run on the provider's
// threads (DISPATCH_LEVEL) and only signal.
//
typedef struct _NDK_SYNC {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER *Object;
} NDK_SYNC, *PNDK_SYNC;

VOID NdkSyncInitialize(_Out_ PNDK_SYNC Sync);
VOID NdkSyncRequestComplete(_In_opt_ PVOID Context, _In_ NTSTATUS Status);
VOID NdkSyncCreateComplete(_In_opt_ PVOID Context, _In_ NTSTATUS Status,
                           _In_ NDK_OBJECT_HEADER *Object);
VOID NdkSyncCloseComplete(_In_opt_ PVOID Context);
NTSTATUS NdkSyncWait(_Inout_ PNDK_SYNC Sync, _In_ NTSTATUS Status);
VOID NdkCloseObjectSync(_In_ NDK_OBJECT_HEADER *Object);

//
// A buffer mapped for the adapter with NdkBuildLAM and addressed with the privileged token.
// Non-paged buffers are described with MmBuildMdlForNonPagedPool, paged ones are locked with
// MmProbeAndLockPages.
//
typedef struct _LAM_BUFFER {
    PUCHAR Buffer;
    ULONG Length;
    BOOLEAN Paged;
    BOOLEAN Locked;
    PMDL Mdl;
    NDK_LOGICAL_ADDRESS_MAPPING *Lam;
    ULONG LamSize;
    ULONG Fbo;
} LAM_BUFFER, *PLAM_BUFFER;

NTSTATUS LamBufferCreate(_In_ NDK_ADAPTER *Adapter, _In_ ULONG Length, _In_ BOOLEAN Paged,
                         _Out_ PLAM_BUFFER Lam);
VOID LamBufferDestroy(_In_ NDK_ADAPTER *Adapter, _Inout_ PLAM_BUFFER Lam);
ULONG LamBufferSgl(_In_ PLAM_BUFFER Lam, _In_ ULONG Offset, _In_ ULONG Length, _In_ UINT32 Token,
                   _Out_writes_to_(MaxSge, return) NDK_SGE *Sgl, _In_ ULONG MaxSge);

//
// The socket: one QP with its PD, CQs, buffers and connector.
//
typedef struct _RDMA_SOCKET {
    const char *Name;
    NDK_ADAPTER *Adapter;
    const NDK_ADAPTER_INFO *Info;
    NDK_PD *Pd;
    NDK_CQ *RecvCq;
    NDK_CQ *SendCq;
    NDK_QP *Qp;
    NDK_CONNECTOR *Connector;
    UINT32 PrivilegedToken;
    ULONG MaxSge;
    LAM_BUFFER SendLam;
    LAM_BUFFER RecvLam;

    //
    // Callbacks (CQ notifications, disconnect) hold rundown protection while they touch the
    // socket; close waits for them before the memory goes away.
    //
    EX_RUNDOWN_REF CallbackRundown;
    KEVENT RecvCqEvent;
    KEVENT SendCqEvent;
    KEVENT DisconnectEvent;
    volatile LONG RecvNotifications;
    volatile LONG SendNotifications;
    volatile LONG Disconnected;
} RDMA_SOCKET, *PRDMA_SOCKET;

typedef struct _RDMA_INCOMING {
    LIST_ENTRY Link;
    NDK_CONNECTOR *Connector;
} RDMA_INCOMING, *PRDMA_INCOMING;

typedef struct _RDMA_LISTENER {
    NDK_LISTENER *Listener;
    KSPIN_LOCK Lock;
    LIST_ENTRY Incoming;
    KEVENT IncomingEvent;
    EX_RUNDOWN_REF CallbackRundown;
    SOCKADDR_IN Address;
} RDMA_LISTENER, *PRDMA_LISTENER;

NTSTATUS RdmaSocketCreate(_In_ NDK_ADAPTER *Adapter, _In_ const NDK_ADAPTER_INFO *Info,
                          _In_ const char *Name, _Outptr_ PRDMA_SOCKET *Socket);
VOID RdmaSocketClose(_In_ PRDMA_SOCKET Socket);
NTSTATUS RdmaSocketPostReceive(_In_ PRDMA_SOCKET Socket, _In_ ULONG Slot);
NTSTATUS RdmaSocketSend(_In_ PRDMA_SOCKET Socket, _In_ ULONG Slot, _In_ ULONG Length,
                        _In_ ULONG Flags, _In_opt_ PVOID Context);
NTSTATUS RdmaSocketWait(_In_ PRDMA_SOCKET Socket, _In_ BOOLEAN Receive,
                        _Out_writes_(Count) NDK_RESULT_EX *Results, _In_ ULONG Count);
NTSTATUS RdmaSocketEnableModeration(_In_ PRDMA_SOCKET Socket, _In_ ULONG IntervalUs,
                                    _In_ ULONG Count);
NTSTATUS RdmaSocketConnect(_In_ PRDMA_SOCKET Socket, _In_ const SOCKADDR_IN *Destination,
                           _In_reads_bytes_(PrivateDataLength) const VOID *PrivateData,
                           _In_ ULONG PrivateDataLength);
NTSTATUS RdmaSocketAccept(_In_ PRDMA_SOCKET Socket, _In_ PRDMA_LISTENER Listener,
                          _Out_writes_bytes_to_(PrivateDataCapacity, *PrivateDataLength)
                              VOID *PrivateData,
                          _In_ ULONG PrivateDataCapacity, _Out_ ULONG *PrivateDataLength);
NTSTATUS RdmaSocketDisconnect(_In_ PRDMA_SOCKET Socket, _In_ BOOLEAN WaitForPeer);

NTSTATUS RdmaListenerCreate(_In_ NDK_ADAPTER *Adapter, _In_ PCWSTR Address,
                            _Outptr_ PRDMA_LISTENER *Listener);
VOID RdmaListenerClose(_In_ NDK_ADAPTER *Adapter, _In_ PRDMA_LISTENER Listener);

//
// Statuses with which a provider refuses a request it does not implement: the self-test
// skips what needs them instead of failing.
//
#define KC_IS_REFUSAL(Status)                                                                      \
    ((Status) == STATUS_NOT_IMPLEMENTED || (Status) == STATUS_NOT_SUPPORTED ||                     \
     (Status) == STATUS_INVALID_DEVICE_REQUEST)

NTSTATUS KcSelfTest(_In_ NDK_ADAPTER *Adapter, _In_ const NDK_ADAPTER_INFO *Info,
                    _In_ PDEVICE_OBJECT DeviceObject);
