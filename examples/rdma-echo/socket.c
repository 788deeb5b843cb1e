/*++

Module Name:

    socket.c

Abstract:

    An RDMA socket of the echo driver: PD, CQ, QP and a registered buffer of slots, Sends
    carried by IRPs through the driver's own device, completions reaped from the CQ callback.

--*/

#include "echo.h"

// ---------------------------------------------------------------------------------------------
// Synchronous wrappers around the asynchronous NDK calls

_Use_decl_annotations_ VOID EchoSyncInit(PECHO_SYNC Sync)
{
    KeInitializeEvent(&Sync->Event, NotificationEvent, FALSE);
    Sync->Status = STATUS_PENDING;
    Sync->Object = NULL;
}

_Use_decl_annotations_ NTSTATUS EchoSyncWait(PECHO_SYNC Sync, NTSTATUS Status)
{
    LARGE_INTEGER timeout;

    if (Status != STATUS_PENDING) {
        return Status;
    }
    timeout.QuadPart = -(LONGLONG)ECHO_WAIT_SECONDS * 10 * 1000 * 1000;
    if (KeWaitForSingleObject(&Sync->Event, Executive, KernelMode, FALSE, &timeout) ==
        STATUS_TIMEOUT) {
        return STATUS_IO_TIMEOUT;
    }
    return Sync->Status;
}

_Use_decl_annotations_ VOID EchoCreateDone(PVOID Context, NTSTATUS Status,
                                           NDK_OBJECT_HEADER *Object)
{
    PECHO_SYNC sync = (PECHO_SYNC)Context;

    sync->Status = Status;
    sync->Object = Object;
    KeSetEvent(&sync->Event, IO_NO_INCREMENT, FALSE);
}

_Use_decl_annotations_ VOID EchoRequestDone(PVOID Context, NTSTATUS Status)
{
    PECHO_SYNC sync = (PECHO_SYNC)Context;

    sync->Status = Status;
    KeSetEvent(&sync->Event, IO_NO_INCREMENT, FALSE);
}

_Use_decl_annotations_ VOID EchoCloseDone(PVOID Context)
{
    KeSetEvent(&((PECHO_SYNC)Context)->Event, IO_NO_INCREMENT, FALSE);
}

//
// Every dispatch table's first slot closes; the header says which object.
//
_Use_decl_annotations_ VOID EchoClose(NDK_OBJECT_HEADER *Object)
{
    ECHO_SYNC sync;
    NTSTATUS status;

    EchoSyncInit(&sync);
    status = ((NDK_PD *)Object)->Dispatch->NdkClosePd(Object, EchoCloseDone, &sync);
    if (status == STATUS_PENDING) {
        sync.Status = STATUS_SUCCESS;
        (VOID) EchoSyncWait(&sync, status);
    }
}

// ---------------------------------------------------------------------------------------------
// Completions

static VOID EchoFail(_Inout_ PECHO_SOCKET Socket, _In_ PCSTR What, _In_ NTSTATUS Status)
{
    KIRQL irql;

    ECHO_LOG(DPFLTR_ERROR_LEVEL, "rdma-echo: %s: %s: 0x%08X\n", Socket->Name, What, Status);
    KeAcquireSpinLock(&Socket->Lock, &irql);
    Socket->Failed = TRUE;
    KeReleaseSpinLock(&Socket->Lock, irql);
    KeSetEvent(&Socket->Done, IO_NO_INCREMENT, FALSE);
}

static BOOLEAN EchoCheck(_In_ const UCHAR *Data, _In_ ULONG Index, _In_ ULONG Length)
{
    ULONG i;

    if (Length != EchoLength(Index)) {
        return FALSE;
    }
    for (i = 0; i < Length; i++) {
        if (Data[i] != EchoByte(Index, i)) {
            return FALSE;
        }
    }
    return TRUE;
}

//
// A receive completed: the server echoes it from a send slot, the client checks it.
//
_Requires_lock_not_held_(Socket->Lock) static VOID
    EchoReceived(_Inout_ PECHO_SOCKET Socket, _In_ const NDK_RESULT_EX *Result)
{
    ULONG slot = (ULONG)(ULONG_PTR)Result->RequestContext;
    ULONG index;
    KIRQL irql;
    BOOLEAN all;

    if (!NT_SUCCESS(Result->Status)) {
        EchoFail(Socket, "receive", Result->Status);
        return;
    }
    KeAcquireSpinLock(&Socket->Lock, &irql);
    index = Socket->Received++;
    all = Socket->Received == ECHO_MESSAGES;
    KeReleaseSpinLock(&Socket->Lock, irql);

    //
    // A reliable connection delivers in order: the n-th receive holds message n.
    //
    if (!EchoCheck(Socket->Buffer + slot * ECHO_SLOT_SIZE, index, Result->BytesTransferred)) {
        EchoFail(Socket, "received data differs", STATUS_DATA_ERROR);
        return;
    }
    if (Socket->IsServer) {
        RtlCopyMemory(Socket->Buffer + (ECHO_MESSAGES + slot) * ECHO_SLOT_SIZE,
                      Socket->Buffer + slot * ECHO_SLOT_SIZE, Result->BytesTransferred);
        NTSTATUS status = EchoSendAsync(Socket, ECHO_MESSAGES + slot, Result->BytesTransferred);
        if (!NT_SUCCESS(status)) {
            EchoFail(Socket, "echo", status);
        }
    } else if (all) {
        KeSetEvent(&Socket->Done, IO_NO_INCREMENT, FALSE);
    }
}

static VOID EchoDrainCq(_Inout_ PECHO_SOCKET Socket)
{
    NDK_RESULT_EX results[8];
    ULONG n, i;

    for (;;) {
        n = Socket->Cq->Dispatch->NdkGetCqResultsEx(Socket->Cq, results, RTL_NUMBER_OF(results));
        if (n == 0) {
            //
            // Arm, then look once more: a completion between the last poll and the arm would
            // otherwise wait for the next one.
            //
            Socket->Cq->Dispatch->NdkArmCq(Socket->Cq, NDK_CQ_NOTIFY_ANY);
            n = Socket->Cq->Dispatch->NdkGetCqResultsEx(Socket->Cq, results,
                                                        RTL_NUMBER_OF(results));
            if (n == 0) {
                return;
            }
        }
        for (i = 0; i < n; i++) {
            if (results[i].Type == NdkOperationTypeReceive) {
                EchoReceived(Socket, &results[i]);
            } else {
                //
                // A Send: its request context is the IRP that carried it.
                //
                PIRP irp = (PIRP)results[i].RequestContext;
                irp->IoStatus.Status = results[i].Status;
                irp->IoStatus.Information = results[i].BytesTransferred;
                IoCompleteRequest(irp, IO_NETWORK_INCREMENT);
            }
        }
    }
}

static VOID EchoCqNotify(_In_opt_ PVOID Context, _In_ NTSTATUS CqStatus)
{
    PECHO_SOCKET socket = (PECHO_SOCKET)Context;

    if (!ExAcquireRundownProtection(&socket->CqRundown)) {
        return;
    }
    if (!NT_SUCCESS(CqStatus)) {
        EchoFail(socket, "CQ", CqStatus);
    } else {
        EchoDrainCq(socket);
    }
    ExReleaseRundownProtection(&socket->CqRundown);
}

_Use_decl_annotations_ VOID EchoDisconnectEvent(PVOID Context)
{
    KeSetEvent(&((PECHO_SOCKET)Context)->Disconnected, IO_NETWORK_INCREMENT, FALSE);
}

// ---------------------------------------------------------------------------------------------
// Requests

static NDK_SGE EchoSge(_In_ PECHO_SOCKET Socket, _In_ ULONG Slot, _In_ ULONG Length)
{
    NDK_SGE sge;
    ULONG position = Socket->Fbo + Slot * ECHO_SLOT_SIZE;

    //
    // A slot lies in one adapter page: one SGE from the LAM's page array.
    //
    RtlZeroMemory(&sge, sizeof(sge));
    sge.LogicalAddress.QuadPart =
        Socket->Lam->AdapterPageArray[position / NDK_ADAPTER_PAGE_SIZE].QuadPart +
        position % NDK_ADAPTER_PAGE_SIZE;
    sge.Length = Length;
    sge.MemoryRegionToken = Socket->Token;
    return sge;
}

_Use_decl_annotations_ NTSTATUS EchoPostReceive(PECHO_SOCKET Socket, ULONG Slot)
{
    NDK_SGE sge = EchoSge(Socket, Slot, ECHO_SLOT_SIZE);

    return Socket->Qp->Dispatch->NdkReceive(Socket->Qp, (PVOID)(ULONG_PTR)Slot, &sge, 1);
}

//
// A Send travels as an IRP to the driver's own device; the dispatch routine posts it and the
// CQ callback completes the IRP.
//
_Use_decl_annotations_ NTSTATUS EchoSendAsync(PECHO_SOCKET Socket, ULONG Slot, ULONG Length)
{
    PECHO_SEND_REQUEST request;
    PIRP irp;
    PIO_STACK_LOCATION next;

    request = (PECHO_SEND_REQUEST)ExAllocateFromLookasideListEx(&EchoGlobals.RequestLookaside);
    if (request == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    irp = IoAllocateIrp(EchoGlobals.Device->StackSize, FALSE);
    if (irp == NULL) {
        ExFreeToLookasideListEx(&EchoGlobals.RequestLookaside, request);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    request->Socket = Socket;
    request->Slot = Slot;
    request->Length = Length;

    next = IoGetNextIrpStackLocation(irp);
    next->MajorFunction = IRP_MJ_INTERNAL_DEVICE_CONTROL;
    next->Parameters.DeviceIoControl.IoControlCode = IOCTL_ECHO_SEND;
    next->Parameters.DeviceIoControl.Type3InputBuffer = request;
    IoSetCompletionRoutine(irp, EchoSendCompleted, request, TRUE, TRUE, TRUE);
    InterlockedIncrement(&Socket->OutstandingIrps);
    (VOID) IoCallDriver(EchoGlobals.Device, irp);
    return STATUS_SUCCESS;
}

_Use_decl_annotations_ NTSTATUS EchoDispatchInternal(PDEVICE_OBJECT DeviceObject, PIRP Irp)
{
    PIO_STACK_LOCATION stack = IoGetCurrentIrpStackLocation(Irp);
    PECHO_SEND_REQUEST request;
    NDK_SGE sge;
    NTSTATUS status;

    UNREFERENCED_PARAMETER(DeviceObject);
    if (stack->Parameters.DeviceIoControl.IoControlCode != IOCTL_ECHO_SEND) {
        Irp->IoStatus.Status = STATUS_INVALID_DEVICE_REQUEST;
        IoCompleteRequest(Irp, IO_NO_INCREMENT);
        return STATUS_INVALID_DEVICE_REQUEST;
    }
    request = (PECHO_SEND_REQUEST)stack->Parameters.DeviceIoControl.Type3InputBuffer;
    sge = EchoSge(request->Socket, request->Slot, request->Length);
    IoMarkIrpPending(Irp);
    status = request->Socket->Qp->Dispatch->NdkSend(request->Socket->Qp, Irp, &sge, 1, 0);
    if (!NT_SUCCESS(status)) {
        Irp->IoStatus.Status = status;
        IoCompleteRequest(Irp, IO_NO_INCREMENT);
    }
    return STATUS_PENDING;
}

_Use_decl_annotations_ NTSTATUS EchoSendCompleted(PDEVICE_OBJECT DeviceObject, PIRP Irp,
                                                  PVOID Context)
{
    PECHO_SEND_REQUEST request = (PECHO_SEND_REQUEST)Context;
    PECHO_SOCKET socket = request->Socket;
    NTSTATUS status = Irp->IoStatus.Status;
    KIRQL irql;
    BOOLEAN all = FALSE;

    UNREFERENCED_PARAMETER(DeviceObject);
    if (NT_SUCCESS(status) && Irp->IoStatus.Information != request->Length) {
        status = STATUS_DATA_ERROR;
    }
    ExFreeToLookasideListEx(&EchoGlobals.RequestLookaside, request);
    IoFreeIrp(Irp);
    if (!NT_SUCCESS(status)) {
        EchoFail(socket, "send", status);
    } else if (socket->IsServer) {
        KeAcquireSpinLock(&socket->Lock, &irql);
        all = ++socket->Echoed == ECHO_MESSAGES;
        KeReleaseSpinLock(&socket->Lock, irql);
    }
    InterlockedDecrement(&socket->OutstandingIrps);
    if (all) {
        KeSetEvent(&socket->Done, IO_NO_INCREMENT, FALSE);
    }
    //
    // The IRP was ours (IoAllocateIrp) and is freed: stop completion here.
    //
    return STATUS_MORE_PROCESSING_REQUIRED;
}

// ---------------------------------------------------------------------------------------------
// Socket objects

_Use_decl_annotations_ NTSTATUS EchoSocketOpen(PECHO_SOCKET Socket, NDK_ADAPTER *Adapter,
                                               NDK_ADAPTER *CqAdapter)
{
    ECHO_SYNC sync;
    NTSTATUS status;
    ULONG lamSize = 0;

    PAGED_CODE();
    Socket->Adapter = Adapter;
    Socket->CqAdapter = CqAdapter;
    KeInitializeSpinLock(&Socket->Lock);
    KeInitializeEvent(&Socket->Done, NotificationEvent, FALSE);
    KeInitializeEvent(&Socket->Disconnected, NotificationEvent, FALSE);
    ExInitializeRundownProtection(&Socket->CqRundown);

    EchoSyncInit(&sync);
    status = Adapter->Dispatch->NdkCreatePd(Adapter, EchoCreateDone, &sync, &Socket->Pd);
    if (status == STATUS_PENDING) {
        status = EchoSyncWait(&sync, status);
        Socket->Pd = (NDK_PD *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    Socket->Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(Socket->Pd, &Socket->Token);

    EchoSyncInit(&sync);
    status = CqAdapter->Dispatch->NdkCreateCq(CqAdapter, 2 * ECHO_SLOTS, EchoCqNotify, Socket, NULL,
                                              EchoCreateDone, &sync, &Socket->Cq);
    if (status == STATUS_PENDING) {
        status = EchoSyncWait(&sync, status);
        Socket->Cq = (NDK_CQ *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }

    //
    // The QP is of this socket's instance, its CQ maybe of another: one device.
    //
    EchoSyncInit(&sync);
    status =
        Socket->Pd->Dispatch->NdkCreateQp(Socket->Pd, Socket->Cq, Socket->Cq, Socket, ECHO_SLOTS,
                                          ECHO_SLOTS, 1, 1, 0, EchoCreateDone, &sync, &Socket->Qp);
    if (status == STATUS_PENDING) {
        status = EchoSyncWait(&sync, status);
        Socket->Qp = (NDK_QP *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }

    Socket->Buffer = (PUCHAR)ExAllocatePoolWithTagPriority(NonPagedPoolNx, ECHO_BUFFER_SIZE,
                                                           ECHO_TAG, HighPoolPriority);
    if (Socket->Buffer == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    Socket->Mdl = IoAllocateMdl(Socket->Buffer, ECHO_BUFFER_SIZE, FALSE, FALSE, NULL);
    if (Socket->Mdl == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    MmBuildMdlForNonPagedPool(Socket->Mdl);

    EchoSyncInit(&sync);
    status = Adapter->Dispatch->NdkBuildLAM(Adapter, Socket->Mdl, ECHO_BUFFER_SIZE, EchoRequestDone,
                                            &sync, NULL, &lamSize, &Socket->Fbo);
    if (status != STATUS_BUFFER_TOO_SMALL) {
        return NT_SUCCESS(status) ? STATUS_INTERNAL_ERROR : status;
    }
    Socket->Lam = (NDK_LOGICAL_ADDRESS_MAPPING *)ExAllocatePoolPriorityZero(
        NonPagedPoolNx, lamSize, ECHO_TAG, NormalPoolPriority);
    if (Socket->Lam == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    EchoSyncInit(&sync);
    status = Adapter->Dispatch->NdkBuildLAM(Adapter, Socket->Mdl, ECHO_BUFFER_SIZE, EchoRequestDone,
                                            &sync, Socket->Lam, &lamSize, &Socket->Fbo);
    status = EchoSyncWait(&sync, status);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(Socket->Lam, ECHO_TAG);
        Socket->Lam = NULL;
        return status;
    }
    Socket->Cq->Dispatch->NdkArmCq(Socket->Cq, NDK_CQ_NOTIFY_ANY);
    return STATUS_SUCCESS;
}

_Use_decl_annotations_ VOID EchoSocketClose(PECHO_SOCKET Socket)
{
    LARGE_INTEGER tick;
    ULONG waited;

    PAGED_CODE();
    //
    // Every IRP comes back through the CQ: wait for the last ones before anything closes.
    //
    tick.QuadPart = -10 * 1000; // 1 ms
    for (waited = 0;
         ReadAcquire(&Socket->OutstandingIrps) != 0 && waited < ECHO_WAIT_SECONDS * 1000;
         waited++) {
        KeDelayExecutionThread(KernelMode, FALSE, &tick);
    }
    if (Socket->Connector != NULL) {
        EchoClose(&Socket->Connector->Header);
        Socket->Connector = NULL;
    }
    if (Socket->Qp != NULL) {
        Socket->Qp->Dispatch->NdkFlush(Socket->Qp);
        EchoClose(&Socket->Qp->Header);
        Socket->Qp = NULL;
    }
    if (Socket->Lam != NULL) {
        Socket->Adapter->Dispatch->NdkReleaseLAM(Socket->Adapter, Socket->Lam);
        ExFreePoolWithTag(Socket->Lam, ECHO_TAG);
        Socket->Lam = NULL;
    }
    if (Socket->Mdl != NULL) {
        IoFreeMdl(Socket->Mdl);
        Socket->Mdl = NULL;
    }
    if (Socket->Buffer != NULL) {
        ExFreePoolWithTag(Socket->Buffer, ECHO_TAG);
        Socket->Buffer = NULL;
    }
    if (Socket->Pd != NULL) {
        EchoClose(&Socket->Pd->Header);
        Socket->Pd = NULL;
    }
}

//
// The CQ last, maybe after the socket's adapter instance closed (the CQ is another instance's):
// its callback may run until the rundown completes.
//
_Use_decl_annotations_ VOID EchoSocketCloseCq(PECHO_SOCKET Socket)
{
    PAGED_CODE();
    if (Socket->Cq != NULL) {
        ExWaitForRundownProtectionRelease(&Socket->CqRundown);
        EchoClose(&Socket->Cq->Header);
        Socket->Cq = NULL;
    }
}
