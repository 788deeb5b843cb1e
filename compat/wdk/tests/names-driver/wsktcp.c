/*++

Module Name:

    wsktcp.c

Abstract:

    The names driver's TCP path over WSK, beside its NDK path: a listen socket whose accept
    event takes the server side of each connection, a connection socket that binds and
    connects to it, messages sent from MDL chains described by WSK_BUFs and echoed back, a
    graceful disconnect seen by the other side as a zero-byte receive, and every socket closed.
    Every request goes through an IRP and a completion routine, as on Windows. Run over IPv4
    and, where the host has it, IPv6 loopback.

--*/

#include "names.h"

#define WSKTCP_MESSAGES 8

typedef struct _WSKTCP_SYNC {
    KEVENT Done;
    PIRP Irp;
} WSKTCP_SYNC, *PWSKTCP_SYNC;

typedef struct _WSKTCP {
    const WSK_PROVIDER_DISPATCH *Provider;
    PWSK_CLIENT Client;
    PWSK_SOCKET Listener;
    PWSK_SOCKET Server;  // from the accept event
    PWSK_SOCKET Client1; // the connection socket
    KEVENT Accepted;
    volatile LONG AcceptEvents;
} WSKTCP, *PWSKTCP;

static IO_COMPLETION_ROUTINE WskTcpComplete;

static NTSTATUS WskTcpComplete(PDEVICE_OBJECT DeviceObject, PIRP Irp, PVOID Context)
{
    PWSKTCP_SYNC sync = (PWSKTCP_SYNC)Context;

    UNREFERENCED_PARAMETER(DeviceObject);
    UNREFERENCED_PARAMETER(Irp);
    KeSetEvent(&sync->Done, IO_NO_INCREMENT, FALSE);
    return STATUS_MORE_PROCESSING_REQUIRED;
}

static VOID WskTcpPrepare(_Inout_ PWSKTCP_SYNC Sync)
{
    IoReuseIrp(Sync->Irp, STATUS_UNSUCCESSFUL);
    KeClearEvent(&Sync->Done);
    IoSetCompletionRoutine(Sync->Irp, WskTcpComplete, Sync, TRUE, TRUE, TRUE);
}

static NTSTATUS WskTcpWait(_Inout_ PWSKTCP_SYNC Sync, NTSTATUS Status, _Out_opt_ PULONG_PTR Info)
{
    if (Status == STATUS_PENDING) {
        KeWaitForSingleObject(&Sync->Done, Executive, KernelMode, FALSE, NULL);
    }
    if (Info != NULL) {
        *Info = Sync->Irp->IoStatus.Information;
    }
    return Sync->Irp->IoStatus.Status;
}

static NTSTATUS WSKAPI
WskTcpAcceptEvent(PVOID SocketContext, ULONG Flags, PSOCKADDR LocalAddress, PSOCKADDR RemoteAddress,
                  PWSK_SOCKET AcceptSocket, PVOID *AcceptSocketContext,
                  const WSK_CLIENT_CONNECTION_DISPATCH **AcceptSocketDispatch)
{
    PWSKTCP tcp = (PWSKTCP)SocketContext;

    UNREFERENCED_PARAMETER(Flags);
    NT_ASSERT(KeGetCurrentIrql() <= DISPATCH_LEVEL);
    if (AcceptSocket == NULL || LocalAddress == NULL || RemoteAddress == NULL ||
        LocalAddress->sa_family != RemoteAddress->sa_family) {
        return STATUS_REQUEST_NOT_ACCEPTED;
    }
    _InterlockedIncrement(&tcp->AcceptEvents);
    *AcceptSocketContext = tcp;
    *AcceptSocketDispatch = NULL;
    tcp->Server = AcceptSocket;
    KeSetEvent(&tcp->Accepted, IO_NO_INCREMENT, FALSE);
    return STATUS_SUCCESS;
}

static const WSK_CLIENT_LISTEN_DISPATCH WskTcpListenDispatch = {WskTcpAcceptEvent, NULL, NULL};

#define CONN(s)   ((const WSK_PROVIDER_CONNECTION_DISPATCH *)(s)->Dispatch)
#define LISTEN(s) ((const WSK_PROVIDER_LISTEN_DISPATCH *)(s)->Dispatch)

static NTSTATUS WskTcpSocket(PWSKTCP Tcp, PWSKTCP_SYNC Sync, ADDRESS_FAMILY Family, ULONG Flags,
                             PVOID Context, const VOID *Dispatch, PWSK_SOCKET *Socket)
{
    ULONG_PTR info = 0;
    NTSTATUS status;

    WskTcpPrepare(Sync);
    status = Tcp->Provider->WskSocket(Tcp->Client, Family, SOCK_STREAM, IPPROTO_TCP, Flags, Context,
                                      Dispatch, NULL, NULL, NULL, Sync->Irp);
    status = WskTcpWait(Sync, status, &info);
    *Socket = NT_SUCCESS(status) ? (PWSK_SOCKET)info : NULL;
    return status;
}

static NTSTATUS WskTcpClose(PWSKTCP_SYNC Sync, _Inout_ PWSK_SOCKET *Socket)
{
    NTSTATUS status = STATUS_SUCCESS;

    if (*Socket != NULL) {
        WskTcpPrepare(Sync);
        status = WskTcpWait(Sync, CONN(*Socket)->WskCloseSocket(*Socket, Sync->Irp), NULL);
        *Socket = NULL;
    }
    return status;
}

//
// Send Length bytes of Data as a WSK_BUF over a chain of two MDLs (split in the middle).
//
static NTSTATUS WskTcpSend(PWSKTCP_SYNC Sync, PWSK_SOCKET Socket, PUCHAR Data, ULONG Length)
{
    ULONG half = Length / 2;
    PMDL first = IoAllocateMdl(Data, half, FALSE, FALSE, NULL);
    PMDL second = IoAllocateMdl(Data + half, Length - half, FALSE, FALSE, NULL);
    WSK_BUF buffer;
    ULONG_PTR sent = 0;
    NTSTATUS status = STATUS_INSUFFICIENT_RESOURCES;

    if (first != NULL && second != NULL) {
        MmBuildMdlForNonPagedPool(first);
        MmBuildMdlForNonPagedPool(second);
        first->Next = second;
        buffer.Mdl = first;
        buffer.Offset = 0;
        buffer.Length = Length;
        WskTcpPrepare(Sync);
        status = WskTcpWait(Sync, CONN(Socket)->WskSend(Socket, &buffer, 0, Sync->Irp), &sent);
        if (NT_SUCCESS(status) && sent != Length) {
            status = STATUS_DATA_ERROR;
        }
    }
    if (second != NULL) {
        IoFreeMdl(second);
    }
    if (first != NULL) {
        IoFreeMdl(first);
    }
    return status;
}

static NTSTATUS WskTcpReceive(PWSKTCP_SYNC Sync, PWSK_SOCKET Socket, PUCHAR Data, ULONG Length,
                              ULONG Flags, _Out_ PULONG Received)
{
    PMDL mdl = IoAllocateMdl(Data, Length, FALSE, FALSE, NULL);
    WSK_BUF buffer;
    ULONG_PTR got = 0;
    NTSTATUS status;

    *Received = 0;
    if (mdl == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    MmBuildMdlForNonPagedPool(mdl);
    buffer.Mdl = mdl;
    buffer.Offset = 0;
    buffer.Length = Length;
    WskTcpPrepare(Sync);
    status = WskTcpWait(Sync, CONN(Socket)->WskReceive(Socket, &buffer, Flags, Sync->Irp), &got);
    IoFreeMdl(mdl);
    *Received = (ULONG)got;
    return status;
}

static NTSTATUS WskTcpRun(PWSKTCP Tcp, PWSKTCP_SYNC Sync, ADDRESS_FAMILY Family)
{
    SOCKADDR_STORAGE bindAddress;
    SOCKADDR_STORAGE listenAddress;
    SOCKADDR_STORAGE peerAddress;
    PUCHAR out = NULL;
    PUCHAR in = NULL;
    ULONG i;
    ULONG j;
    ULONG got;
    NTSTATUS status;
    LARGE_INTEGER timeout;

    RtlZeroMemory(&bindAddress, sizeof(bindAddress));
    if (Family == AF_INET) {
        PSOCKADDR_IN sin = (PSOCKADDR_IN)&bindAddress;
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = IN4ADDR_LOOPBACK;
    } else {
        PSOCKADDR_IN6 sin6 = (PSOCKADDR_IN6)&bindAddress;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_addr.u.Byte[15] = 1;
    }
    KeInitializeEvent(&Tcp->Accepted, SynchronizationEvent, FALSE);

    //
    // The listener: bound (port 0), accept events on.
    //
    status = WskTcpSocket(Tcp, Sync, Family, WSK_FLAG_LISTEN_SOCKET, Tcp, &WskTcpListenDispatch,
                          &Tcp->Listener);
    NAMES_CHECK(NT_SUCCESS(status), status);
    WskTcpPrepare(Sync);
    status = WskTcpWait(
        Sync, LISTEN(Tcp->Listener)->WskBind(Tcp->Listener, (PSOCKADDR)&bindAddress, 0, Sync->Irp),
        NULL);
    NAMES_CHECK(NT_SUCCESS(status), status);
    {
        WSK_EVENT_CALLBACK_CONTROL control;
        control.NpiId = (PNPIID)&NPI_WSK_INTERFACE_ID;
        control.EventMask = WSK_EVENT_ACCEPT;
        status = LISTEN(Tcp->Listener)
                     ->WskControlSocket(Tcp->Listener, WskSetOption, SO_WSK_EVENT_CALLBACK,
                                        SOL_SOCKET, sizeof(control), &control, 0, NULL, NULL, NULL);
        NAMES_CHECK(NT_SUCCESS(status), status);
    }
    RtlZeroMemory(&listenAddress, sizeof(listenAddress));
    WskTcpPrepare(Sync);
    status =
        WskTcpWait(Sync,
                   LISTEN(Tcp->Listener)
                       ->WskGetLocalAddress(Tcp->Listener, (PSOCKADDR)&listenAddress, Sync->Irp),
                   NULL);
    NAMES_CHECK(NT_SUCCESS(status) && ((PSOCKADDR_IN)&listenAddress)->sin_port != 0, status);

    //
    // The client: bind, connect, and the accept event hands the server side over.
    //
    status = WskTcpSocket(Tcp, Sync, Family, WSK_FLAG_CONNECTION_SOCKET, NULL, NULL, &Tcp->Client1);
    NAMES_CHECK(NT_SUCCESS(status), status);
    WskTcpPrepare(Sync);
    status = WskTcpWait(
        Sync, CONN(Tcp->Client1)->WskConnect(Tcp->Client1, (PSOCKADDR)&listenAddress, 0, Sync->Irp),
        NULL);
    NAMES_CHECK(status == STATUS_INVALID_DEVICE_STATE, STATUS_DATA_ERROR); // not bound yet
    WskTcpPrepare(Sync);
    status = WskTcpWait(
        Sync, CONN(Tcp->Client1)->WskBind(Tcp->Client1, (PSOCKADDR)&bindAddress, 0, Sync->Irp),
        NULL);
    NAMES_CHECK(NT_SUCCESS(status), status);
    WskTcpPrepare(Sync);
    status = WskTcpWait(
        Sync, CONN(Tcp->Client1)->WskConnect(Tcp->Client1, (PSOCKADDR)&listenAddress, 0, Sync->Irp),
        NULL);
    NAMES_CHECK(NT_SUCCESS(status), status);
    timeout.QuadPart = -10 * 1000 * 1000 * 10LL; // 10 s
    status = KeWaitForSingleObject(&Tcp->Accepted, Executive, KernelMode, FALSE, &timeout);
    NAMES_CHECK(status == STATUS_SUCCESS && Tcp->Server != NULL, STATUS_IO_TIMEOUT);
    RtlZeroMemory(&peerAddress, sizeof(peerAddress));
    WskTcpPrepare(Sync);
    status = WskTcpWait(
        Sync,
        CONN(Tcp->Server)->WskGetRemoteAddress(Tcp->Server, (PSOCKADDR)&peerAddress, Sync->Irp),
        NULL);
    NAMES_CHECK(NT_SUCCESS(status) && peerAddress.ss_family == Family, status);

    //
    // Messages of growing sizes, client to server (received whole with WSK_FLAG_WAITALL) and
    // echoed back.
    //
    out = ExAllocatePool2(POOL_FLAG_NON_PAGED, 4096, NAMES_TAG);
    in = ExAllocatePool2(POOL_FLAG_NON_PAGED, 4096, NAMES_TAG);
    NAMES_CHECK(out != NULL && in != NULL, STATUS_INSUFFICIENT_RESOURCES);
    for (i = 0; i < WSKTCP_MESSAGES; i++) {
        ULONG length = 16U << (i % 8);
        for (j = 0; j < length; j++) {
            out[j] = (UCHAR)(i * 31 + j);
        }
        status = WskTcpSend(Sync, Tcp->Client1, out, length);
        NAMES_CHECK(NT_SUCCESS(status), status);
        status = WskTcpReceive(Sync, Tcp->Server, in, length, WSK_FLAG_WAITALL, &got);
        NAMES_CHECK(NT_SUCCESS(status) && got == length && RtlEqualMemory(in, out, length),
                    STATUS_DATA_ERROR);
        status = WskTcpSend(Sync, Tcp->Server, in, length);
        NAMES_CHECK(NT_SUCCESS(status), status);
        RtlZeroMemory(in, length);
        status = WskTcpReceive(Sync, Tcp->Client1, in, length, WSK_FLAG_WAITALL, &got);
        NAMES_CHECK(NT_SUCCESS(status) && got == length && RtlEqualMemory(in, out, length),
                    STATUS_DATA_ERROR);
    }

    //
    // Graceful disconnect: the server's receive completes with 0 bytes; then the server's.
    //
    WskTcpPrepare(Sync);
    status =
        WskTcpWait(Sync, CONN(Tcp->Client1)->WskDisconnect(Tcp->Client1, NULL, 0, Sync->Irp), NULL);
    NAMES_CHECK(NT_SUCCESS(status), status);
    status = WskTcpReceive(Sync, Tcp->Server, in, 64, 0, &got);
    NAMES_CHECK(NT_SUCCESS(status) && got == 0, STATUS_DATA_ERROR);
    WskTcpPrepare(Sync);
    status =
        WskTcpWait(Sync, CONN(Tcp->Server)->WskDisconnect(Tcp->Server, NULL, 0, Sync->Irp), NULL);
    NAMES_CHECK(NT_SUCCESS(status), status);
    status = WskTcpReceive(Sync, Tcp->Client1, in, 64, 0, &got);
    NAMES_CHECK(NT_SUCCESS(status) && got == 0, STATUS_DATA_ERROR);
    status = WskTcpSend(Sync, Tcp->Client1, out, 16);
    NAMES_CHECK(status == STATUS_INVALID_DEVICE_STATE, STATUS_DATA_ERROR); // after disconnect

    ExFreePoolWithTag(out, NAMES_TAG);
    ExFreePoolWithTag(in, NAMES_TAG);
    NamesLog("names-driver: WSK TCP over %s: %u messages echoed, %ld accept event(s)\n",
             Family == AF_INET ? "IPv4" : "IPv6", WSKTCP_MESSAGES, Tcp->AcceptEvents);
    return STATUS_SUCCESS;
}

NTSTATUS NamesWskTcp(const WSK_PROVIDER_NPI *Provider, ADDRESS_FAMILY Family)
{
    WSKTCP tcp;
    WSKTCP_SYNC sync;
    NTSTATUS status;
    NTSTATUS closeStatus;

    RtlZeroMemory(&tcp, sizeof(tcp));
    tcp.Provider = Provider->Dispatch;
    tcp.Client = Provider->Client;
    KeInitializeEvent(&sync.Done, NotificationEvent, FALSE);
    sync.Irp = IoAllocateIrp(1, FALSE);
    if (sync.Irp == NULL) {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    status = WskTcpRun(&tcp, &sync, Family);
    closeStatus = WskTcpClose(&sync, &tcp.Server);
    if (NT_SUCCESS(status)) {
        status = closeStatus;
    }
    closeStatus = WskTcpClose(&sync, &tcp.Client1);
    if (NT_SUCCESS(status)) {
        status = closeStatus;
    }
    closeStatus = WskTcpClose(&sync, &tcp.Listener);
    if (NT_SUCCESS(status)) {
        status = closeStatus;
    }
    IoFreeIrp(sync.Irp);
    return status;
}
