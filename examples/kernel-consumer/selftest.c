/*++

Module Name:

    selftest.c

Abstract:

    Two RDMA sockets on one adapter, connected over loopback: the server side runs in a work
    item, the client side on the calling thread. They exchange Send/Receive messages (a DEFER
    chain ending in a solicited send, INLINE sends, SILENT_SUCCESS echoes) and verify every
    byte, then try RDMA Write and Read against a registered region and a fast-registered one.
    What the provider refuses (NOT_IMPLEMENTED / NOT_SUPPORTED) is skipped with a log line.

--*/

#include "kcsock.h"

#define KC_MSG_DATA 1
#define KC_MSG_ECHO 2
#define KC_MSG_OFFER 3
#define KC_MSG_DONE 4
#define KC_DATA_MESSAGES 16

#define KC_RDMA_REGISTERED 0
#define KC_RDMA_FAST_REGISTER 1

typedef struct _KC_MESSAGE {
    ULONG Magic;
    ULONG Kind;
    ULONG Sequence;
    ULONG PayloadLength;
    ULONG64 Address; // KC_MSG_OFFER: remote address of the region (0 = nothing offered)
    UINT32 Token;    // KC_MSG_OFFER: its remote token
    ULONG Length;    // KC_MSG_OFFER: its length
    UCHAR Payload[1];
} KC_MESSAGE, *PKC_MESSAGE;

#define KC_HEADER_SIZE FIELD_OFFSET(KC_MESSAGE, Payload)

typedef struct _KC_SERVER {
    NDK_ADAPTER *Adapter;
    const NDK_ADAPTER_INFO *Info;
    PRDMA_LISTENER Listener;
    PRDMA_SOCKET Socket;
    KEVENT Done;
    NTSTATUS Status;
} KC_SERVER, *PKC_SERVER;

static const char KcHello[] = "hello from a kernel-style NDK consumer";

static ULONG
KcPayloadLength(_In_ ULONG Sequence)
{
    return 32 + (Sequence * 97) % (KC_SLOT_SIZE - KC_HEADER_SIZE - 32);
}

static UCHAR
KcPattern(_In_ ULONG Seed, _In_ ULONG Index)
{
    return (UCHAR)(Seed * 31 + Index * 7 + (Index >> 8));
}

//
// Build a message in a send slot; returns its length.
//
static ULONG
KcBuildMessage(_In_ PRDMA_SOCKET Socket, _In_ ULONG Slot, _In_ ULONG Kind, _In_ ULONG Sequence)
{
    PKC_MESSAGE m = (PKC_MESSAGE)(Socket->SendLam.Buffer + Slot * KC_SLOT_SIZE);
    ULONG i;

    RtlZeroMemory(m, KC_HEADER_SIZE);
    m->Magic = KC_MSG_TAG;
    m->Kind = Kind;
    m->Sequence = Sequence;
    m->PayloadLength = (Kind == KC_MSG_DATA || Kind == KC_MSG_ECHO) ? KcPayloadLength(Sequence) : 0;
    for (i = 0; i < m->PayloadLength; i++) {
        m->Payload[i] = KcPattern(Sequence + Kind, i);
    }
    return KC_HEADER_SIZE + m->PayloadLength;
}

//
// Check a receive completion against the message expected; repost the receive slot.
//
static NTSTATUS
KcCheckMessage(_In_ PRDMA_SOCKET Socket, _In_ const NDK_RESULT_EX *Result, _In_ ULONG Kind,
               _In_ ULONG Sequence, _Out_opt_ KC_MESSAGE *Copy)
{
    ULONG slot = (ULONG)(ULONG_PTR)Result->RequestContext;
    PKC_MESSAGE m = (PKC_MESSAGE)(Socket->RecvLam.Buffer + slot * KC_SLOT_SIZE);
    NTSTATUS status = STATUS_SUCCESS;
    ULONG i;

    if (Result->Status != STATUS_SUCCESS || Result->Type != NdkOperationTypeReceive ||
        Result->QPContext != Socket) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: %s: receive completion status 0x%08X type %u\n",
              Socket->Name, Result->Status, Result->Type);
        return NT_SUCCESS(Result->Status) ? STATUS_INTERNAL_ERROR : Result->Status;
    }
    if (Result->BytesTransferred < KC_HEADER_SIZE || m->Magic != KC_MSG_TAG || m->Kind != Kind ||
        m->Sequence != Sequence ||
        Result->BytesTransferred != KC_HEADER_SIZE + m->PayloadLength) {
        KcLog(DPFLTR_ERROR_LEVEL,
              "kernel-consumer: %s: message %u: got kind %u seq %u, %u bytes; wanted kind %u\n",
              Socket->Name, Sequence, m->Kind, m->Sequence, Result->BytesTransferred, Kind);
        return STATUS_DATA_ERROR;
    }
    for (i = 0; i < m->PayloadLength; i++) {
        if (m->Payload[i] != KcPattern(Sequence + Kind, i)) {
            KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: %s: message %u differs at byte %u\n",
                  Socket->Name, Sequence, i);
            return STATUS_DATA_ERROR;
        }
    }
    if (Copy != NULL) {
        RtlCopyMemory(Copy, m, KC_HEADER_SIZE);
    }
    status = RdmaSocketPostReceive(Socket, slot);
    return status;
}

static NTSTATUS
KcReceive(_In_ PRDMA_SOCKET Socket, _In_ ULONG Kind, _In_ ULONG Sequence,
          _Out_opt_ KC_MESSAGE *Copy)
{
    NDK_RESULT_EX result;
    NTSTATUS status = RdmaSocketWait(Socket, TRUE, &result, 1);

    if (!NT_SUCCESS(status)) {
        return status;
    }
    return KcCheckMessage(Socket, &result, Kind, Sequence, Copy);
}

//
// Send one control message and wait for its completion.
//
static NTSTATUS
KcSendControl(_In_ PRDMA_SOCKET Socket, _In_ ULONG Kind, _In_ ULONG Sequence, _In_ ULONG64 Address,
              _In_ UINT32 Token, _In_ ULONG Length)
{
    NDK_RESULT_EX result;
    ULONG slot = KC_QUEUE_DEPTH - 1;
    ULONG length = KcBuildMessage(Socket, slot, Kind, Sequence);
    PKC_MESSAGE m = (PKC_MESSAGE)(Socket->SendLam.Buffer + slot * KC_SLOT_SIZE);
    NTSTATUS status;

    m->Address = Address;
    m->Token = Token;
    m->Length = Length;
    status = RdmaSocketSend(Socket, slot, length, 0, NULL);
    if (NT_SUCCESS(status)) {
        status = RdmaSocketWait(Socket, FALSE, &result, 1);
    }
    if (NT_SUCCESS(status) && result.Status != STATUS_SUCCESS) {
        status = result.Status;
    }
    return status;
}

// ---------------------------------------------------------------------------------------------
// Server side (work item, PASSIVE_LEVEL)

//
// Expose a region for the peer to write and read: registered with NdkRegisterMr, or fast-
// registered on the QP. Returns a refusal status when the provider does not do it.
//
static NTSTATUS
KcServerExpose(_In_ PKC_SERVER Server, _In_ ULONG Mode, _In_ PLAM_BUFFER Region, _Out_ NDK_MR **Mr,
               _Out_ UINT32 *Token)
{
    PRDMA_SOCKET s = Server->Socket;
    NDK_SYNC sync;
    NTSTATUS status;
    NDK_RESULT_EX result;
    const ULONG access = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                         NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

    *Mr = NULL;
    *Token = 0;
    NdkSyncInitialize(&sync);
    status = s->Pd->Dispatch->NdkCreateMr(s->Pd, Mode == KC_RDMA_FAST_REGISTER,
                                          NdkSyncCreateComplete, &sync, Mr);
    if (status == STATUS_PENDING) {
        status = NdkSyncWait(&sync, status);
        *Mr = (NDK_MR *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    NdkSyncInitialize(&sync);
    if (Mode == KC_RDMA_REGISTERED) {
        status = (*Mr)->Dispatch->NdkRegisterMr(*Mr, Region->Mdl, Region->Length, access,
                                                NdkSyncRequestComplete, &sync);
        status = NdkSyncWait(&sync, status);
    } else {
        status = (*Mr)->Dispatch->NdkInitializeFastRegisterMr(
            *Mr, Region->Lam->AdapterPageCount, TRUE, NdkSyncRequestComplete, &sync);
        status = NdkSyncWait(&sync, status);
        if (NT_SUCCESS(status)) {
            status = s->Qp->Dispatch->NdkFastRegister(
                s->Qp, NULL, *Mr, Region->Lam->AdapterPageCount, Region->Lam->AdapterPageArray,
                Region->Fbo, Region->Length, Region->Buffer,
                NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ |
                    NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
            if (NT_SUCCESS(status)) {
                status = RdmaSocketWait(s, FALSE, &result, 1);
                if (NT_SUCCESS(status)) {
                    status = result.Status;
                }
            }
        }
    }
    if (NT_SUCCESS(status)) {
        *Token = (*Mr)->Dispatch->NdkGetRemoteTokenFromMr(*Mr);
    }
    return status;
}

static VOID
KcServerUnexpose(_In_ PKC_SERVER Server, _In_ ULONG Mode, _In_ NDK_MR *Mr, _In_ BOOLEAN Exposed)
{
    PRDMA_SOCKET s = Server->Socket;
    NDK_SYNC sync;
    NTSTATUS status;
    NDK_RESULT_EX result;

    if (Exposed && Mode == KC_RDMA_REGISTERED) {
        NdkSyncInitialize(&sync);
        status = Mr->Dispatch->NdkDeregisterMr(Mr, NdkSyncRequestComplete, &sync);
        NT_VERIFY(NT_SUCCESS(NdkSyncWait(&sync, status)));
    } else if (Exposed) {
        //
        // Revoke the fast registration: the token stops working at once.
        //
        status = s->Qp->Dispatch->NdkInvalidate(s->Qp, NULL, &Mr->Header, 0);
        if (NT_SUCCESS(status) && NT_SUCCESS(RdmaSocketWait(s, FALSE, &result, 1))) {
            NT_ASSERT(result.Type == NdkOperationTypeInvalidate);
        }
    }
    NdkCloseObjectSync(&Mr->Header);
}

static NTSTATUS
KcServerRdma(_In_ PKC_SERVER Server, _In_ ULONG Mode)
{
    PRDMA_SOCKET s = Server->Socket;
    const char *what = Mode == KC_RDMA_REGISTERED ? "registered" : "fast-registered";
    LAM_BUFFER region;
    NDK_MR *mr = NULL;
    UINT32 token = 0;
    KC_MESSAGE done;
    NTSTATUS status, exposed;
    ULONG i;

    status = LamBufferCreate(Server->Adapter, KC_RDMA_SIZE, FALSE, &region);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    exposed = KcServerExpose(Server, Mode, &region, &mr, &token);
    if (!NT_SUCCESS(exposed)) {
        KcLog(DPFLTR_WARNING_LEVEL,
              "kernel-consumer: SKIP rdma %s region: the provider refused it with 0x%08X%s\n",
              what, exposed,
              Mode == KC_RDMA_FAST_REGISTER ? " (fast registration)" : "");
        if (!KC_IS_REFUSAL(exposed)) {
            status = exposed;
        }
    }
    //
    // Offer the region (or nothing), then wait for the peer to say it is done with it.
    //
    if (NT_SUCCESS(status)) {
        status = KcSendControl(s, KC_MSG_OFFER, Mode, NT_SUCCESS(exposed) ? (ULONG_PTR)region.Buffer
                                                                          : 0,
                               token, NT_SUCCESS(exposed) ? region.Length : 0);
    }
    if (NT_SUCCESS(status)) {
        status = KcReceive(s, KC_MSG_DONE, Mode, &done);
    }
    if (NT_SUCCESS(status) && done.Length != 0) {
        //
        // The peer wrote its pattern over the whole region.
        //
        for (i = 0; i < region.Length; i++) {
            if (region.Buffer[i] != KcPattern(0x5A + Mode, i)) {
                KcLog(DPFLTR_ERROR_LEVEL,
                      "kernel-consumer: server: %s region differs at byte %u after RDMA Write\n",
                      what, i);
                status = STATUS_DATA_ERROR;
                break;
            }
        }
    }
    if (mr != NULL) {
        KcServerUnexpose(Server, Mode, mr, NT_SUCCESS(exposed));
    }
    LamBufferDestroy(Server->Adapter, &region);
    return status;
}

static NTSTATUS
KcServerRun(_In_ PKC_SERVER Server)
{
    PRDMA_SOCKET s = Server->Socket;
    NDK_RESULT_EX results[KC_DATA_MESSAGES];
    char privateData[256];
    ULONG privateDataLength, i, length;
    NTSTATUS status;

    status = RdmaSocketAccept(s, Server->Listener, privateData, sizeof(privateData),
                              &privateDataLength);
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: server: accept: 0x%08X\n", status);
        return status;
    }
    if (privateDataLength != sizeof(KcHello) ||
        !RtlEqualMemory(privateData, KcHello, sizeof(KcHello))) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: server: wrong private data (%u bytes)\n",
              privateDataLength);
        return STATUS_INVALID_PARAMETER;
    }

    //
    // Receive the client's messages, in order, every byte checked.
    //
    status = RdmaSocketWait(s, TRUE, results, KC_DATA_MESSAGES);
    for (i = 0; NT_SUCCESS(status) && i < KC_DATA_MESSAGES; i++) {
        status = KcCheckMessage(s, &results[i], KC_MSG_DATA, i, NULL);
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: server: %u messages received and verified "
                             "(%d receive CQ notifications)\n",
          KC_DATA_MESSAGES, (int)ReadAcquire(&s->RecvNotifications));

    //
    // Echo them back. Only the last send reports its completion (SILENT_SUCCESS on the
    // others); a failed one would still complete.
    //
    for (i = 0; i < KC_DATA_MESSAGES; i++) {
        length = KcBuildMessage(s, i, KC_MSG_ECHO, i);
        status = RdmaSocketSend(s, i, length,
                                i + 1 < KC_DATA_MESSAGES ? NDK_OP_FLAG_SILENT_SUCCESS : 0,
                                (PVOID)(ULONG_PTR)i);
        if (!NT_SUCCESS(status)) {
            return status;
        }
    }
    status = RdmaSocketWait(s, FALSE, results, 1);
    if (!NT_SUCCESS(status) || results[0].Status != STATUS_SUCCESS ||
        results[0].RequestContext != (PVOID)(ULONG_PTR)(KC_DATA_MESSAGES - 1)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: server: echo completion 0x%08X / 0x%08X\n",
              status, results[0].Status);
        return NT_SUCCESS(status) ? STATUS_INTERNAL_ERROR : status;
    }

    status = KcServerRdma(Server, KC_RDMA_REGISTERED);
    if (NT_SUCCESS(status)) {
        status = KcServerRdma(Server, KC_RDMA_FAST_REGISTER);
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }

    //
    // The client disconnects first; answer its disconnect.
    //
    return RdmaSocketDisconnect(s, TRUE);
}

static VOID
KcServerWorkItem(_In_ PDEVICE_OBJECT DeviceObject, _In_opt_ PVOID Context)
{
    PKC_SERVER server = (PKC_SERVER)Context;

    UNREFERENCED_PARAMETER(DeviceObject);
    PAGED_CODE();
    server->Status = KcServerRun(server);
    KeSetEvent(&server->Done, IO_NO_INCREMENT, FALSE);
}

// ---------------------------------------------------------------------------------------------
// Client side (the caller's thread)

static NTSTATUS
KcClientRdma(_In_ PRDMA_SOCKET Socket, _In_ ULONG Mode, _Out_ PULONG Skipped)
{
    const char *what = Mode == KC_RDMA_REGISTERED ? "registered" : "fast-registered";
    KC_MESSAGE offer;
    LAM_BUFFER source, sink;
    NDK_SGE sgl[4];
    NDK_RESULT_EX result;
    NTSTATUS status;
    ULONG n, i, written = 0;

    *Skipped = 0;
    status = KcReceive(Socket, KC_MSG_OFFER, Mode, &offer);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    if (offer.Length == 0) {
        *Skipped = 1; // the server logged why
        return KcSendControl(Socket, KC_MSG_DONE, Mode, 0, 0, 0);
    }
    RtlZeroMemory(&sink, sizeof(sink));
    status = LamBufferCreate(Socket->Adapter, offer.Length, FALSE, &source);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    status = LamBufferCreate(Socket->Adapter, offer.Length, FALSE, &sink);
    if (!NT_SUCCESS(status)) {
        LamBufferDestroy(Socket->Adapter, &source);
        return status;
    }
    for (i = 0; i < offer.Length; i++) {
        source.Buffer[i] = KcPattern(0x5A + Mode, i);
    }

    //
    // RDMA Write the pattern over the whole remote region.
    //
    n = LamBufferSgl(&source, 0, offer.Length, Socket->PrivilegedToken, sgl, Socket->MaxSge);
    status = Socket->Qp->Dispatch->NdkWrite(Socket->Qp, NULL, sgl, n, offer.Address, offer.Token,
                                            0);
    if (KC_IS_REFUSAL(status)) {
        KcLog(DPFLTR_WARNING_LEVEL,
              "kernel-consumer: SKIP rdma write/read to a %s region: NdkWrite refused with "
              "0x%08X (RDMA Read/Write)\n",
              what, status);
        *Skipped = 1;
        status = STATUS_SUCCESS;
        goto done;
    }
    if (NT_SUCCESS(status)) {
        status = RdmaSocketWait(Socket, FALSE, &result, 1);
    }
    if (NT_SUCCESS(status) && (result.Status != STATUS_SUCCESS ||
                               result.Type != NdkOperationTypeWrite)) {
        status = NT_SUCCESS(result.Status) ? STATUS_INTERNAL_ERROR : result.Status;
    }
    if (!NT_SUCCESS(status)) {
        goto done;
    }
    written = offer.Length;

    //
    // RDMA Read it back into a LAM sink (allowed with the privileged token only when the
    // adapter does not require special sink rights).
    //
    if (!(Socket->Info->AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED)) {
        KcLog(DPFLTR_WARNING_LEVEL, "kernel-consumer: SKIP rdma read: the adapter requires "
                                    "RDMA_READ_SINK regions\n");
        goto done;
    }
    n = LamBufferSgl(&sink, 0, offer.Length, Socket->PrivilegedToken, sgl, Socket->MaxSge);
    status = Socket->Qp->Dispatch->NdkRead(Socket->Qp, NULL, sgl, n, offer.Address, offer.Token,
                                           0);
    if (KC_IS_REFUSAL(status)) {
        KcLog(DPFLTR_WARNING_LEVEL, "kernel-consumer: SKIP rdma read from a %s region: NdkRead "
                                    "refused with 0x%08X\n",
              what, status);
        status = STATUS_SUCCESS;
        goto done;
    }
    if (NT_SUCCESS(status)) {
        status = RdmaSocketWait(Socket, FALSE, &result, 1);
    }
    if (NT_SUCCESS(status) && (result.Status != STATUS_SUCCESS ||
                               result.Type != NdkOperationTypeRead)) {
        status = NT_SUCCESS(result.Status) ? STATUS_INTERNAL_ERROR : result.Status;
    }
    if (NT_SUCCESS(status) && RtlCompareMemory(sink.Buffer, source.Buffer, offer.Length) !=
                                  offer.Length) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: client: RDMA Read returned other bytes\n");
        status = STATUS_DATA_ERROR;
    }
    if (NT_SUCCESS(status)) {
        KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: client: RDMA Write + Read of %u bytes through "
                                 "a %s region verified\n",
              offer.Length, what);
    }

done:
    LamBufferDestroy(Socket->Adapter, &sink);
    LamBufferDestroy(Socket->Adapter, &source);
    if (NT_SUCCESS(status)) {
        status = KcSendControl(Socket, KC_MSG_DONE, Mode, 0, 0, written);
    }
    return status;
}

static NTSTATUS
KcClientRun(_In_ PRDMA_SOCKET Socket, _In_ PRDMA_LISTENER Listener, _Out_ PULONG Skipped)
{
    NDK_RESULT_EX results[KC_DATA_MESSAGES];
    NTSTATUS status;
    ULONG i, length, flags, skipped;

    *Skipped = 0;
    status = RdmaSocketConnect(Socket, &Listener->Address, KcHello, sizeof(KcHello));
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: client: connect: 0x%08X\n", status);
        return status;
    }

    //
    // The first half goes out as one DEFER chain that ends in a solicited send; the second
    // half one by one, INLINE where it fits.
    //
    for (i = 0; i < KC_DATA_MESSAGES; i++) {
        length = KcBuildMessage(Socket, i, KC_MSG_DATA, i);
        if (i < KC_DATA_MESSAGES / 2) {
            flags = i + 1 < KC_DATA_MESSAGES / 2 ? NDK_OP_FLAG_DEFER
                                                 : NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT;
        } else {
            flags = length <= min(Socket->Info->MaxInlineDataSize, 64u) ? NDK_OP_FLAG_INLINE : 0;
        }
        status = RdmaSocketSend(Socket, i, length, flags, (PVOID)(ULONG_PTR)i);
        if (!NT_SUCCESS(status)) {
            KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: client: NdkSend %u: 0x%08X\n", i, status);
            return status;
        }
    }
    status = RdmaSocketWait(Socket, FALSE, results, KC_DATA_MESSAGES);
    for (i = 0; NT_SUCCESS(status) && i < KC_DATA_MESSAGES; i++) {
        if (results[i].Status != STATUS_SUCCESS || results[i].Type != NdkOperationTypeSend ||
            results[i].RequestContext != (PVOID)(ULONG_PTR)i) {
            status = NT_SUCCESS(results[i].Status) ? STATUS_INTERNAL_ERROR : results[i].Status;
        }
    }
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: client: send completions: 0x%08X\n", status);
        return status;
    }

    //
    // The echoes.
    //
    status = RdmaSocketWait(Socket, TRUE, results, KC_DATA_MESSAGES);
    for (i = 0; NT_SUCCESS(status) && i < KC_DATA_MESSAGES; i++) {
        status = KcCheckMessage(Socket, &results[i], KC_MSG_ECHO, i, NULL);
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: client: %u echoes received and verified\n",
          KC_DATA_MESSAGES);

    status = KcClientRdma(Socket, KC_RDMA_REGISTERED, &skipped);
    *Skipped += skipped;
    if (NT_SUCCESS(status)) {
        status = KcClientRdma(Socket, KC_RDMA_FAST_REGISTER, &skipped);
        *Skipped += skipped;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    return RdmaSocketDisconnect(Socket, FALSE);
}

_Use_decl_annotations_
NTSTATUS
KcSelfTest(NDK_ADAPTER *Adapter, const NDK_ADAPTER_INFO *Info, PDEVICE_OBJECT DeviceObject)
{
    NTSTATUS status, serverStatus;
    PRDMA_LISTENER listener = NULL;
    PRDMA_SOCKET client = NULL;
    PKC_SERVER server;
    PIO_WORKITEM workItem = NULL;
    ULONG i, skipped = 0;
    char address[64];
    ULONG addressLength = sizeof(address);

    PAGED_CODE();
    server = (PKC_SERVER)ExAllocatePool2(POOL_FLAG_NON_PAGED, sizeof(*server), KC_SOCKET_TAG);
    if (server == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    server->Adapter = Adapter;
    server->Info = Info;
    KeInitializeEvent(&server->Done, NotificationEvent, FALSE);

    status = RdmaListenerCreate(Adapter, L"127.0.0.1:0", &listener);
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: listen: 0x%08X\n", status);
        goto out;
    }
    server->Listener = listener;
    RtlIpv4AddressToStringExA(&listener->Address.sin_addr, listener->Address.sin_port, address,
                              &addressLength);
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: listening on %s\n", address);

    status = RdmaSocketCreate(Adapter, Info, "server", &server->Socket);
    if (NT_SUCCESS(status)) {
        status = RdmaSocketCreate(Adapter, Info, "client", &client);
    }
    for (i = 0; NT_SUCCESS(status) && i < KC_QUEUE_DEPTH - 1; i++) {
        //
        // Receives may be posted before the connection exists; the last slot of each
        // buffer is kept for control sends.
        //
        status = RdmaSocketPostReceive(server->Socket, i);
        if (NT_SUCCESS(status)) {
            status = RdmaSocketPostReceive(client, i);
        }
    }
    if (!NT_SUCCESS(status)) {
        goto out;
    }
    status = RdmaSocketEnableModeration(server->Socket, 200, 4);
    if (status == STATUS_NOT_SUPPORTED) {
        KcLog(DPFLTR_WARNING_LEVEL, "kernel-consumer: SKIP interrupt moderation: not supported "
                                    "by the adapter\n");
        status = STATUS_SUCCESS;
    } else if (!NT_SUCCESS(status)) {
        goto out;
    }

    workItem = IoAllocateWorkItem(DeviceObject);
    if (workItem == NULL) {
        status = STATUS_INSUFFICIENT_RESOURCES;
        goto out;
    }
    IoQueueWorkItem(workItem, KcServerWorkItem, DelayedWorkQueue, server);

    status = KcClientRun(client, listener, &skipped);
    KeWaitForSingleObject(&server->Done, Executive, KernelMode, FALSE, NULL);
    serverStatus = server->Status;
    if (NT_SUCCESS(status) && !NT_SUCCESS(serverStatus)) {
        status = serverStatus;
    }
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: client 0x%08X, server 0x%08X; %u RDMA part(s) "
                             "skipped; receive CQ notifications: server %d, client %d\n",
          status, serverStatus, skipped, (int)ReadAcquire(&server->Socket->RecvNotifications),
          (int)ReadAcquire(&client->RecvNotifications));

out:
    if (workItem != NULL) {
        IoFreeWorkItem(workItem);
    }
    if (client != NULL) {
        RdmaSocketClose(client);
    }
    if (server->Socket != NULL) {
        RdmaSocketClose(server->Socket);
    }
    if (listener != NULL) {
        RdmaListenerClose(Adapter, listener);
    }
    ExFreePoolWithTag(server, KC_SOCKET_TAG);
    return status;
}
