/*++

Module Name:

    kcsock.c

Abstract:

    NDK plumbing of the kernel consumer: synchronous waits on NDK requests, LAM buffers, and
    the RDMA socket (PD, CQs, QP, connector) with its notification callbacks.

--*/

#include "kcsock.h"

#ifdef ALLOC_PRAGMA
#pragma alloc_text(PAGE, NdkSyncWait)
#pragma alloc_text(PAGE, LamBufferCreate)
#pragma alloc_text(PAGE, RdmaSocketCreate)
#pragma alloc_text(PAGE, RdmaSocketClose)
#endif

// ---------------------------------------------------------------------------------------------
// Synchronous NDK requests

_Use_decl_annotations_
VOID
NdkSyncInitialize(PNDK_SYNC Sync)
{
    KeInitializeEvent(&Sync->Event, NotificationEvent, FALSE);
    Sync->Status = STATUS_PENDING;
    Sync->Object = NULL;
}

_Use_decl_annotations_
VOID
NdkSyncRequestComplete(PVOID Context, NTSTATUS Status)
{
    PNDK_SYNC sync = (PNDK_SYNC)Context;
    sync->Status = Status;
    KeSetEvent(&sync->Event, IO_NO_INCREMENT, FALSE);
}

_Use_decl_annotations_
VOID
NdkSyncCreateComplete(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *Object)
{
    PNDK_SYNC sync = (PNDK_SYNC)Context;
    sync->Object = Object;
    sync->Status = Status;
    KeSetEvent(&sync->Event, IO_NO_INCREMENT, FALSE);
}

_Use_decl_annotations_
VOID
NdkSyncCloseComplete(PVOID Context)
{
    PNDK_SYNC sync = (PNDK_SYNC)Context;
    sync->Status = STATUS_SUCCESS;
    KeSetEvent(&sync->Event, IO_NO_INCREMENT, FALSE);
}

//
// Status is what the NDK function returned: STATUS_PENDING means its completion routine will
// deliver the final status, anything else is final.
//
_Use_decl_annotations_
NTSTATUS
NdkSyncWait(PNDK_SYNC Sync, NTSTATUS Status)
{
    PAGED_CODE();
    if (Status != STATUS_PENDING) {
        return Status;
    }
    KeWaitForSingleObject(&Sync->Event, Executive, KernelMode, FALSE, NULL);
    return Sync->Status;
}

//
// Every NDK object is { Header; Dispatch } and its dispatch table starts with its close
// routine; the adapter is the exception (closed through WSK).
//
typedef struct _NDK_ANY_OBJECT {
    NDK_OBJECT_HEADER Header;
    const NDK_FN_CLOSE_OBJECT *Dispatch;
} NDK_ANY_OBJECT;

_Use_decl_annotations_
VOID
NdkCloseObjectSync(NDK_OBJECT_HEADER *Object)
{
    NDK_SYNC sync;
    NTSTATUS status;

    NT_ASSERT(Object->ObjectType != NdkObjectTypeAdapter);
    NdkSyncInitialize(&sync);
    status = ((NDK_ANY_OBJECT *)Object)->Dispatch[0](Object, NdkSyncCloseComplete, &sync);
    status = NdkSyncWait(&sync, status);
    NT_VERIFY(NT_SUCCESS(status));
}

static VOID
NdkCloseIgnore(_In_opt_ PVOID Context)
{
    UNREFERENCED_PARAMETER(Context);
}

// ---------------------------------------------------------------------------------------------
// LAM buffers

_Use_decl_annotations_
NTSTATUS
LamBufferCreate(NDK_ADAPTER *Adapter, ULONG Length, BOOLEAN Paged, PLAM_BUFFER Lam)
{
    NTSTATUS status;
    NDK_SYNC sync;

    PAGED_CODE();
    RtlZeroMemory(Lam, sizeof(*Lam));
    Lam->Length = Length;
    Lam->Paged = Paged;
    Lam->Buffer = (PUCHAR)ExAllocatePool2(Paged ? POOL_FLAG_PAGED : POOL_FLAG_NON_PAGED, Length,
                                          KC_LAM_TAG);
    if (Lam->Buffer == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    Lam->Mdl = IoAllocateMdl(Lam->Buffer, Length, FALSE, FALSE, NULL);
    if (Lam->Mdl == NULL) {
        status = STATUS_INSUFFICIENT_RESOURCES;
        goto fail;
    }
    if (Paged) {
        status = STATUS_SUCCESS;
        __try {
            MmProbeAndLockPages(Lam->Mdl, KernelMode, IoWriteAccess);
            Lam->Locked = TRUE;
        } __except (EXCEPTION_EXECUTE_HANDLER) {
            status = GetExceptionCode();
        }
        if (!NT_SUCCESS(status)) {
            goto fail;
        }
    } else {
        MmBuildMdlForNonPagedPool(Lam->Mdl);
    }

    //
    // First call: how big the mapping is. Second call: build it.
    //
    Lam->LamSize = 0;
    NdkSyncInitialize(&sync);
    status = Adapter->Dispatch->NdkBuildLAM(Adapter, Lam->Mdl, Length, NdkSyncRequestComplete,
                                            &sync, NULL, &Lam->LamSize, &Lam->Fbo);
    if (status != STATUS_BUFFER_TOO_SMALL) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: NdkBuildLAM size query: 0x%08X\n", status);
        status = NT_SUCCESS(status) ? STATUS_INTERNAL_ERROR : status;
        goto fail;
    }
    Lam->Lam = (NDK_LOGICAL_ADDRESS_MAPPING *)ExAllocatePool2(POOL_FLAG_NON_PAGED, Lam->LamSize,
                                                              KC_LAM_TAG);
    if (Lam->Lam == NULL) {
        status = STATUS_INSUFFICIENT_RESOURCES;
        goto fail;
    }
    NdkSyncInitialize(&sync);
    status = Adapter->Dispatch->NdkBuildLAM(Adapter, Lam->Mdl, Length, NdkSyncRequestComplete,
                                            &sync, Lam->Lam, &Lam->LamSize, &Lam->Fbo);
    status = NdkSyncWait(&sync, status);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(Lam->Lam, KC_LAM_TAG);
        Lam->Lam = NULL;
        goto fail;
    }
    return STATUS_SUCCESS;

fail:
    LamBufferDestroy(Adapter, Lam);
    return status;
}

_Use_decl_annotations_
VOID
LamBufferDestroy(NDK_ADAPTER *Adapter, PLAM_BUFFER Lam)
{
    if (Lam->Lam != NULL) {
        Adapter->Dispatch->NdkReleaseLAM(Adapter, Lam->Lam);
        ExFreePoolWithTag(Lam->Lam, KC_LAM_TAG);
        Lam->Lam = NULL;
    }
    if (Lam->Mdl != NULL) {
        if (Lam->Locked) {
            MmUnlockPages(Lam->Mdl);
            Lam->Locked = FALSE;
        }
        IoFreeMdl(Lam->Mdl);
        Lam->Mdl = NULL;
    }
    if (Lam->Buffer != NULL) {
        ExFreePoolWithTag(Lam->Buffer, KC_LAM_TAG);
        Lam->Buffer = NULL;
    }
}

//
// SGEs for [Offset, Offset + Length) of the buffer, by logical address. A new SGE starts
// where the next adapter page is not contiguous with the previous one.
//
_Use_decl_annotations_
ULONG
LamBufferSgl(PLAM_BUFFER Lam, ULONG Offset, ULONG Length, UINT32 Token, NDK_SGE *Sgl,
             ULONG MaxSge)
{
    ULONG count = 0;
    ULONG position = Lam->Fbo + Offset;

    NT_ASSERT(Offset + Length <= Lam->Length);
    while (Length > 0) {
        ULONG page = position / PAGE_SIZE;
        ULONG inPage = min(Length, PAGE_SIZE - position % PAGE_SIZE);
        LONGLONG logical = Lam->Lam->AdapterPageArray[page].QuadPart + position % PAGE_SIZE;

        if (count > 0 &&
            Sgl[count - 1].LogicalAddress.QuadPart + Sgl[count - 1].Length == logical) {
            Sgl[count - 1].Length += inPage;
        } else {
            if (count == MaxSge) {
                return 0;
            }
            Sgl[count].LogicalAddress.QuadPart = logical;
            Sgl[count].Length = inPage;
            Sgl[count].MemoryRegionToken = Token;
            count++;
        }
        position += inPage;
        Length -= inPage;
    }
    return count;
}

// ---------------------------------------------------------------------------------------------
// Callbacks (provider threads, up to DISPATCH_LEVEL: no blocking, no paged code)

static VOID
RdmaSocketRecvCqNotify(_In_opt_ PVOID Context, _In_ NTSTATUS CqStatus)
{
    PRDMA_SOCKET socket = (PRDMA_SOCKET)Context;

    NT_ASSERT(KeGetCurrentIrql() <= DISPATCH_LEVEL);
    if (!ExAcquireRundownProtection(&socket->CallbackRundown)) {
        return;
    }
    if (!NT_SUCCESS(CqStatus)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: %s: receive CQ error 0x%08X\n", socket->Name,
              CqStatus);
    }
    InterlockedIncrement(&socket->RecvNotifications);
    KeSetEvent(&socket->RecvCqEvent, IO_NETWORK_INCREMENT, FALSE);
    ExReleaseRundownProtection(&socket->CallbackRundown);
}

static VOID
RdmaSocketSendCqNotify(_In_opt_ PVOID Context, _In_ NTSTATUS CqStatus)
{
    PRDMA_SOCKET socket = (PRDMA_SOCKET)Context;

    if (!ExAcquireRundownProtection(&socket->CallbackRundown)) {
        return;
    }
    UNREFERENCED_PARAMETER(CqStatus);
    InterlockedIncrement(&socket->SendNotifications);
    KeSetEvent(&socket->SendCqEvent, IO_NETWORK_INCREMENT, FALSE);
    ExReleaseRundownProtection(&socket->CallbackRundown);
}

static VOID
RdmaSocketDisconnectEvent(_In_opt_ PVOID Context)
{
    PRDMA_SOCKET socket = (PRDMA_SOCKET)Context;

    if (!ExAcquireRundownProtection(&socket->CallbackRundown)) {
        return;
    }
    InterlockedExchange(&socket->Disconnected, 1);
    KeSetEvent(&socket->DisconnectEvent, IO_NETWORK_INCREMENT, FALSE);
    ExReleaseRundownProtection(&socket->CallbackRundown);
}

// ---------------------------------------------------------------------------------------------
// Socket

_Use_decl_annotations_
NTSTATUS
RdmaSocketCreate(NDK_ADAPTER *Adapter, const NDK_ADAPTER_INFO *Info, const char *Name,
                 PRDMA_SOCKET *Socket)
{
    NTSTATUS status;
    NDK_SYNC sync;
    PRDMA_SOCKET s;

    PAGED_CODE();
    *Socket = NULL;
    s = (PRDMA_SOCKET)ExAllocatePool2(POOL_FLAG_NON_PAGED, sizeof(*s), KC_SOCKET_TAG);
    if (s == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    s->Name = Name;
    s->Adapter = Adapter;
    s->Info = Info;
    s->MaxSge = min(4u, min(Info->MaxInitiatorRequestSge, Info->MaxReceiveRequestSge));
    ExInitializeRundownProtection(&s->CallbackRundown);
    KeInitializeEvent(&s->RecvCqEvent, SynchronizationEvent, FALSE);
    KeInitializeEvent(&s->SendCqEvent, SynchronizationEvent, FALSE);
    KeInitializeEvent(&s->DisconnectEvent, NotificationEvent, FALSE);

    NdkSyncInitialize(&sync);
    status = Adapter->Dispatch->NdkCreatePd(Adapter, NdkSyncCreateComplete, &sync, &s->Pd);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        s->Pd = (NDK_PD *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        goto fail;
    }
    s->Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(s->Pd, &s->PrivilegedToken);

    NdkSyncInitialize(&sync);
    status = Adapter->Dispatch->NdkCreateCq(Adapter, 2 * KC_QUEUE_DEPTH, RdmaSocketRecvCqNotify,
                                            s, NULL, NdkSyncCreateComplete, &sync, &s->RecvCq);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        s->RecvCq = (NDK_CQ *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        goto fail;
    }
    NdkSyncInitialize(&sync);
    status = Adapter->Dispatch->NdkCreateCq(Adapter, 2 * KC_QUEUE_DEPTH, RdmaSocketSendCqNotify,
                                            s, NULL, NdkSyncCreateComplete, &sync, &s->SendCq);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        s->SendCq = (NDK_CQ *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        goto fail;
    }

    NdkSyncInitialize(&sync);
    status = s->Pd->Dispatch->NdkCreateQp(s->Pd, s->RecvCq, s->SendCq, s, KC_QUEUE_DEPTH,
                                          KC_QUEUE_DEPTH, s->MaxSge, s->MaxSge,
                                          min(Info->MaxInlineDataSize, 64u),
                                          NdkSyncCreateComplete, &sync, &s->Qp);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        s->Qp = (NDK_QP *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        goto fail;
    }

    status = LamBufferCreate(Adapter, KC_BUFFER_SIZE, FALSE, &s->SendLam);
    if (!NT_SUCCESS(status)) {
        goto fail;
    }
    status = LamBufferCreate(Adapter, KC_BUFFER_SIZE, TRUE, &s->RecvLam);
    if (!NT_SUCCESS(status)) {
        goto fail;
    }
    *Socket = s;
    return STATUS_SUCCESS;

fail:
    KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: %s: socket creation failed: 0x%08X\n", Name,
          status);
    RdmaSocketClose(s);
    return status;
}

_Use_decl_annotations_
VOID
RdmaSocketClose(PRDMA_SOCKET Socket)
{
    NDK_RESULT results[8];

    PAGED_CODE();
    if (Socket->Connector != NULL) {
        NdkCloseObjectSync(&Socket->Connector->Header);
        Socket->Connector = NULL;
    }
    if (Socket->Qp != NULL) {
        //
        // Flush first: outstanding receives complete with STATUS_CANCELLED, then the QP
        // closes with nothing left to complete.
        //
        Socket->Qp->Dispatch->NdkFlush(Socket->Qp);
        NdkCloseObjectSync(&Socket->Qp->Header);
        Socket->Qp = NULL;
    }

    //
    // No callback may be running, or start, once the CQs are closed and the socket freed.
    //
    ExWaitForRundownProtectionRelease(&Socket->CallbackRundown);
    if (Socket->RecvCq != NULL) {
        while (Socket->RecvCq->Dispatch->NdkGetCqResults(Socket->RecvCq, results, 8) != 0) {
        }
        NdkCloseObjectSync(&Socket->RecvCq->Header);
    }
    if (Socket->SendCq != NULL) {
        while (Socket->SendCq->Dispatch->NdkGetCqResults(Socket->SendCq, results, 8) != 0) {
        }
        NdkCloseObjectSync(&Socket->SendCq->Header);
    }
    LamBufferDestroy(Socket->Adapter, &Socket->SendLam);
    LamBufferDestroy(Socket->Adapter, &Socket->RecvLam);
    if (Socket->Pd != NULL) {
        NdkCloseObjectSync(&Socket->Pd->Header);
    }
    ExFreePoolWithTag(Socket, KC_SOCKET_TAG);
}

_Use_decl_annotations_
NTSTATUS
RdmaSocketPostReceive(PRDMA_SOCKET Socket, ULONG Slot)
{
    NDK_SGE sgl[4];
    ULONG n = LamBufferSgl(&Socket->RecvLam, Slot * KC_SLOT_SIZE, KC_SLOT_SIZE,
                           Socket->PrivilegedToken, sgl, Socket->MaxSge);

    if (n == 0) {
        return STATUS_DATA_OVERRUN;
    }
    return Socket->Qp->Dispatch->NdkReceive(Socket->Qp, (PVOID)(ULONG_PTR)Slot, sgl, n);
}

_Use_decl_annotations_
NTSTATUS
RdmaSocketSend(PRDMA_SOCKET Socket, ULONG Slot, ULONG Length, ULONG Flags, PVOID Context)
{
    NDK_SGE sgl[4];
    ULONG n = LamBufferSgl(&Socket->SendLam, Slot * KC_SLOT_SIZE, Length, Socket->PrivilegedToken,
                           sgl, Socket->MaxSge);

    if (n == 0) {
        return STATUS_DATA_OVERRUN;
    }
    return Socket->Qp->Dispatch->NdkSend(Socket->Qp, Context, sgl, n, Flags);
}

//
// Collect Count completions from the receive or the initiator CQ. Poll; when the CQ is empty,
// arm it, poll once more (a completion that arrived before the arm does not notify), then
// sleep until the notification callback signals.
//
_Use_decl_annotations_
NTSTATUS
RdmaSocketWait(PRDMA_SOCKET Socket, BOOLEAN Receive, NDK_RESULT_EX *Results, ULONG Count)
{
    NDK_CQ *cq = Receive ? Socket->RecvCq : Socket->SendCq;
    PKEVENT event = Receive ? &Socket->RecvCqEvent : &Socket->SendCqEvent;
    LARGE_INTEGER timeout;
    ULONG got = 0;

    timeout.QuadPart = -(LONGLONG)KC_WAIT_SECONDS * 10 * 1000 * 1000;
    while (got < Count) {
        ULONG n = cq->Dispatch->NdkGetCqResultsEx(cq, Results + got, Count - got);
        if (n != 0) {
            got += n;
            continue;
        }
        cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
        n = cq->Dispatch->NdkGetCqResultsEx(cq, Results + got, Count - got);
        if (n != 0) {
            got += n;
            continue;
        }
        if (KeWaitForSingleObject(event, Executive, KernelMode, FALSE, &timeout) ==
            STATUS_TIMEOUT) {
            KcLog(DPFLTR_ERROR_LEVEL,
                  "kernel-consumer: %s: %u of %u %s completions after %u s\n", Socket->Name, got,
                  Count, Receive ? "receive" : "initiator", KC_WAIT_SECONDS);
            return STATUS_IO_TIMEOUT;
        }
    }
    return STATUS_SUCCESS;
}

_Use_decl_annotations_
NTSTATUS
RdmaSocketEnableModeration(PRDMA_SOCKET Socket, ULONG IntervalUs, ULONG Count)
{
    if (!(Socket->Info->AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED)) {
        return STATUS_NOT_SUPPORTED;
    }
    return Socket->RecvCq->Dispatch->NdkControlCqInterruptModeration(Socket->RecvCq, IntervalUs,
                                                                     Count);
}

_Use_decl_annotations_
NTSTATUS
RdmaSocketConnect(PRDMA_SOCKET Socket, const SOCKADDR_IN *Destination, const VOID *PrivateData,
                  ULONG PrivateDataLength)
{
    NTSTATUS status;
    NDK_SYNC sync;
    SOCKADDR_IN source;

    NdkSyncInitialize(&sync);
    status = Socket->Adapter->Dispatch->NdkCreateConnector(Socket->Adapter, NdkSyncCreateComplete,
                                                           &sync, &Socket->Connector);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        Socket->Connector = (NDK_CONNECTOR *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    RtlZeroMemory(&source, sizeof(source));
    source.sin_family = AF_INET;
    source.sin_addr = Destination->sin_addr; // loopback: same address, any port

    NdkSyncInitialize(&sync);
    status = Socket->Connector->Dispatch->NdkConnect(
        Socket->Connector, Socket->Qp, (const struct sockaddr *)&source, sizeof(source),
        (const struct sockaddr *)Destination, sizeof(*Destination),
        Socket->Info->MaxInboundReadLimit, Socket->Info->MaxOutboundReadLimit, PrivateData,
        PrivateDataLength, NdkSyncRequestComplete, &sync);
    status = NdkSyncWait(&sync, status);
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: %s: NdkConnect: 0x%08X\n", Socket->Name,
              status);
        return status;
    }

    //
    // The peer accepted: finish the three-way handshake.
    //
    NdkSyncInitialize(&sync);
    status = Socket->Connector->Dispatch->NdkCompleteConnect(
        Socket->Connector, RdmaSocketDisconnectEvent, Socket, NdkSyncRequestComplete, &sync);
    return NdkSyncWait(&sync, status);
}

//
// Passive side: take the next connection request the listener queued (waiting for one if
// needed), read its private data, accept it on this socket's QP. Completes once the active
// side completed its handshake, so the active side runs on another thread.
//
_Use_decl_annotations_
NTSTATUS
RdmaSocketAccept(PRDMA_SOCKET Socket, PRDMA_LISTENER Listener, VOID *PrivateData,
                 ULONG PrivateDataCapacity, ULONG *PrivateDataLength)
{
    NTSTATUS status;
    PLIST_ENTRY entry;
    PRDMA_INCOMING incoming;
    LARGE_INTEGER timeout;
    ULONG ird = 0, ord = 0;
    static const char welcome[] = "welcome, kernel consumer";
    NDK_SYNC sync;

    timeout.QuadPart = -(LONGLONG)KC_WAIT_SECONDS * 10 * 1000 * 1000;
    for (;;) {
        entry = ExInterlockedRemoveHeadList(&Listener->Incoming, &Listener->Lock);
        if (entry != NULL) {
            break;
        }
        if (KeWaitForSingleObject(&Listener->IncomingEvent, Executive, KernelMode, FALSE,
                                  &timeout) == STATUS_TIMEOUT) {
            return STATUS_IO_TIMEOUT;
        }
    }
    incoming = CONTAINING_RECORD(entry, RDMA_INCOMING, Link);
    Socket->Connector = incoming->Connector;
    ExFreePoolWithTag(incoming, KC_SOCKET_TAG);

    *PrivateDataLength = PrivateDataCapacity;
    status = Socket->Connector->Dispatch->NdkGetConnectionData(Socket->Connector, &ird, &ord,
                                                               PrivateData, PrivateDataLength);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: %s: connection request, IRD %u ORD %u, %u bytes "
                             "of private data\n",
          Socket->Name, ird, ord, *PrivateDataLength);

    NdkSyncInitialize(&sync);
    status = Socket->Connector->Dispatch->NdkAccept(
        Socket->Connector, Socket->Qp, min(ird, Socket->Info->MaxInboundReadLimit),
        min(ord, Socket->Info->MaxOutboundReadLimit), welcome, sizeof(welcome),
        RdmaSocketDisconnectEvent, Socket, NdkSyncRequestComplete, &sync);
    return NdkSyncWait(&sync, status);
}

_Use_decl_annotations_
NTSTATUS
RdmaSocketDisconnect(PRDMA_SOCKET Socket, BOOLEAN WaitForPeer)
{
    NTSTATUS status;
    NDK_SYNC sync;
    LARGE_INTEGER timeout;

    if (WaitForPeer) {
        timeout.QuadPart = -(LONGLONG)KC_WAIT_SECONDS * 10 * 1000 * 1000;
        if (KeWaitForSingleObject(&Socket->DisconnectEvent, Executive, KernelMode, FALSE,
                                  &timeout) == STATUS_TIMEOUT) {
            KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: %s: no disconnect event from the peer\n",
                  Socket->Name);
            return STATUS_IO_TIMEOUT;
        }
    }
    NdkSyncInitialize(&sync);
    status = Socket->Connector->Dispatch->NdkDisconnect(Socket->Connector, NdkSyncRequestComplete,
                                                        &sync);
    return NdkSyncWait(&sync, status);
}

// ---------------------------------------------------------------------------------------------
// Listener

static VOID
RdmaListenerConnectEvent(_In_opt_ PVOID Context, _In_ NDK_CONNECTOR *Connector)
{
    PRDMA_LISTENER listener = (PRDMA_LISTENER)Context;
    PRDMA_INCOMING incoming;

    //
    // DISPATCH_LEVEL: queue the request for the thread that accepts; never block here.
    //
    if (!ExAcquireRundownProtection(&listener->CallbackRundown)) {
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, NdkCloseIgnore, NULL);
        return;
    }
    incoming = (PRDMA_INCOMING)ExAllocatePool2(POOL_FLAG_NON_PAGED, sizeof(*incoming),
                                               KC_SOCKET_TAG);
    if (incoming == NULL) {
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, NdkCloseIgnore, NULL);
    } else {
        incoming->Connector = Connector;
        ExInterlockedInsertTailList(&listener->Incoming, &incoming->Link, &listener->Lock);
        KeSetEvent(&listener->IncomingEvent, IO_NETWORK_INCREMENT, FALSE);
    }
    ExReleaseRundownProtection(&listener->CallbackRundown);
}

_Use_decl_annotations_
NTSTATUS
RdmaListenerCreate(NDK_ADAPTER *Adapter, PCWSTR Address, PRDMA_LISTENER *Listener)
{
    NTSTATUS status;
    NDK_SYNC sync;
    PRDMA_LISTENER l;
    ULONG length;

    PAGED_CODE();
    *Listener = NULL;
    l = (PRDMA_LISTENER)ExAllocatePool2(POOL_FLAG_NON_PAGED, sizeof(*l), KC_SOCKET_TAG);
    if (l == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    KeInitializeSpinLock(&l->Lock);
    InitializeListHead(&l->Incoming);
    KeInitializeEvent(&l->IncomingEvent, SynchronizationEvent, FALSE);
    ExInitializeRundownProtection(&l->CallbackRundown);

    l->Address.sin_family = AF_INET;
    status = RtlIpv4StringToAddressExW(Address, TRUE, &l->Address.sin_addr, &l->Address.sin_port);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(l, KC_SOCKET_TAG);
        return status;
    }

    NdkSyncInitialize(&sync);
    status = Adapter->Dispatch->NdkCreateListener(Adapter, RdmaListenerConnectEvent, l,
                                                  NdkSyncCreateComplete, &sync, &l->Listener);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        l->Listener = (NDK_LISTENER *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(l, KC_SOCKET_TAG);
        return status;
    }
    NdkSyncInitialize(&sync);
    status = l->Listener->Dispatch->NdkListen(l->Listener, (const struct sockaddr *)&l->Address,
                                              sizeof(l->Address), NdkSyncRequestComplete, &sync);
    status = NdkSyncWait(&sync, status);
    if (NT_SUCCESS(status)) {
        //
        // Port 0 asked for an ephemeral ND port: learn which.
        //
        length = sizeof(l->Address);
        status = l->Listener->Dispatch->NdkGetLocalAddress(
            l->Listener, (struct sockaddr *)&l->Address, &length);
    }
    if (!NT_SUCCESS(status)) {
        RdmaListenerClose(Adapter, l);
        return status;
    }
    *Listener = l;
    return STATUS_SUCCESS;
}

_Use_decl_annotations_
VOID
RdmaListenerClose(NDK_ADAPTER *Adapter, PRDMA_LISTENER Listener)
{
    PLIST_ENTRY entry;

    UNREFERENCED_PARAMETER(Adapter);
    ExWaitForRundownProtectionRelease(&Listener->CallbackRundown);
    if (Listener->Listener != NULL) {
        NdkCloseObjectSync(&Listener->Listener->Header);
    }
    //
    // Requests nobody accepted belong to us: close them.
    //
    while ((entry = ExInterlockedRemoveHeadList(&Listener->Incoming, &Listener->Lock)) != NULL) {
        PRDMA_INCOMING incoming = CONTAINING_RECORD(entry, RDMA_INCOMING, Link);
        NdkCloseObjectSync(&incoming->Connector->Header);
        ExFreePoolWithTag(incoming, KC_SOCKET_TAG);
    }
    ExFreePoolWithTag(Listener, KC_SOCKET_TAG);
}
