/*++

Module Name:

    driver.c

Abstract:

    DriverEntry / DriverUnload of the RDMA echo driver and its run: three NDK adapter instances
    on the loopback interface (listener, server socket, client socket), a connection accepted
    from a work item with a connector of the listener's instance and a QP of the server's, and
    ECHO_MESSAGES messages sent by the client, echoed by the server and checked by both.

--*/

#include "echo.h"

ECHO_GLOBALS EchoGlobals;

static const WSK_CLIENT_DISPATCH EchoWskDispatch = {MAKE_WSK_VERSION(1, 0), 0, NULL};
static const char EchoHello[] = "rdma-echo: hello";
static const char EchoWelcome[] = "rdma-echo: welcome";

DRIVER_INITIALIZE DriverEntry;

#ifdef ALLOC_PRAGMA
#pragma alloc_text(INIT, DriverEntry)
#pragma alloc_text(PAGE, EchoUnload)
#endif

// ---------------------------------------------------------------------------------------------
// Listener: a connect event queues a work item, which accepts at PASSIVE_LEVEL.

typedef struct _ECHO_CONNECT_WORK {
    PIO_WORKITEM WorkItem;
    NDK_CONNECTOR *Connector;
} ECHO_CONNECT_WORK, *PECHO_CONNECT_WORK;

static VOID EchoConnectEvent(_In_opt_ PVOID Context, _In_ NDK_CONNECTOR *Connector)
{
    PECHO_CONNECT_WORK work;
    KIRQL irql;
    ULONG n;

    UNREFERENCED_PARAMETER(Context);
    KeAcquireSpinLock(&EchoGlobals.AcceptLock, &irql);
    n = ++EchoGlobals.ConnectEvents;
    KeReleaseSpinLock(&EchoGlobals.AcceptLock, irql);

    work = (PECHO_CONNECT_WORK)ExAllocatePoolWithTagPriority(NonPagedPoolNx, sizeof(*work),
                                                             ECHO_TAG, NormalPoolPriority);
    if (work != NULL) {
        work->WorkItem = IoAllocateWorkItem(EchoGlobals.Device);
    }
    if (n != 1 || work == NULL || work->WorkItem == NULL) {
        //
        // One connection is expected; anything else is turned away.
        //
        if (work != NULL) {
            ExFreePoolWithTag(work, ECHO_TAG);
        }
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, NULL, NULL);
        return;
    }
    work->Connector = Connector;
    IoQueueWorkItem(work->WorkItem, EchoAcceptWorker, DelayedWorkQueue, work);
}

_Use_decl_annotations_ VOID EchoAcceptWorker(PDEVICE_OBJECT DeviceObject, PVOID Context)
{
    PECHO_CONNECT_WORK work = (PECHO_CONNECT_WORK)Context;
    PECHO_SOCKET server = &EchoGlobals.Server;
    ECHO_SYNC sync;
    NTSTATUS status;
    ULONG ird = 0, ord = 0;
    char data[64];
    ULONG length = sizeof(data);

    UNREFERENCED_PARAMETER(DeviceObject);
    PAGED_CODE();

    //
    // The connector is the listener instance's; the QP is the server instance's.
    //
    server->Connector = work->Connector;
    status = server->Connector->Dispatch->NdkGetConnectionData(server->Connector, &ird, &ord, data,
                                                               &length);
    if (NT_SUCCESS(status) &&
        (length != sizeof(EchoHello) || RtlCompareMemory(data, EchoHello, length) != length)) {
        status = STATUS_DATA_ERROR;
    }
    if (NT_SUCCESS(status)) {
        ECHO_LOG(DPFLTR_INFO_LEVEL, "rdma-echo: connect request, IRD %u ORD %u\n", ird, ord);
        EchoSyncInit(&sync);
        status = server->Connector->Dispatch->NdkAccept(
            server->Connector, server->Qp, ird, ord, EchoWelcome, sizeof(EchoWelcome),
            EchoDisconnectEvent, server, EchoRequestDone, &sync);
        status = EchoSyncWait(&sync, status);
    }
    EchoGlobals.AcceptStatus = status;
    KeSetEvent(&EchoGlobals.AcceptDone, IO_NO_INCREMENT, FALSE);
    IoFreeWorkItem(work->WorkItem);
    ExFreePoolWithTag(work, ECHO_TAG);
}

// ---------------------------------------------------------------------------------------------
// The run

static NTSTATUS EchoOpenAdapter(_Outptr_ NDK_ADAPTER **Adapter)
{
    NDK_VERSION version = {2, 0};

    return EchoGlobals.NdkDispatch.WskOpenNdkAdapter(EchoGlobals.WskProvider.Client, version,
                                                     EchoGlobals.IfIndex, Adapter);
}

static NTSTATUS EchoListen(VOID)
{
    ECHO_SYNC sync;
    NTSTATUS status;
    ULONG length;
    NDK_ADAPTER *adapter = EchoGlobals.ListenAdapter;

    //
    // RtlIpv4StringToAddressExW comes with the socket headers (ws2ipdef.h, mstcpip.h), as in
    // the WDK: no ip2string.h here.
    //
    RtlZeroMemory(&EchoGlobals.ListenAddress, sizeof(EchoGlobals.ListenAddress));
    EchoGlobals.ListenAddress.sin_family = AF_INET;
    status = RtlIpv4StringToAddressExW(L"127.0.0.1:0", TRUE, &EchoGlobals.ListenAddress.sin_addr,
                                       &EchoGlobals.ListenAddress.sin_port);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    EchoSyncInit(&sync);
    status = adapter->Dispatch->NdkCreateListener(adapter, EchoConnectEvent, NULL, EchoCreateDone,
                                                  &sync, &EchoGlobals.Listener);
    if (status == STATUS_PENDING) {
        status = EchoSyncWait(&sync, status);
        EchoGlobals.Listener = (NDK_LISTENER *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    EchoSyncInit(&sync);
    status = EchoGlobals.Listener->Dispatch->NdkListen(
        EchoGlobals.Listener, (const struct sockaddr *)&EchoGlobals.ListenAddress,
        sizeof(EchoGlobals.ListenAddress), EchoRequestDone, &sync);
    status = EchoSyncWait(&sync, status);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    length = sizeof(EchoGlobals.ListenAddress);
    return EchoGlobals.Listener->Dispatch->NdkGetLocalAddress(
        EchoGlobals.Listener, (struct sockaddr *)&EchoGlobals.ListenAddress, &length);
}

static NTSTATUS EchoConnect(_Inout_ PECHO_SOCKET Client, _Out_opt_ PULONG Ird)
{
    ECHO_SYNC sync;
    NTSTATUS status;
    SOCKADDR_IN source = EchoGlobals.ListenAddress;
    ULONG ird = 0, ord = 0;
    char data[64];
    ULONG length = sizeof(data);

    source.sin_port = 0;
    EchoSyncInit(&sync);
    status = Client->Adapter->Dispatch->NdkCreateConnector(Client->Adapter, EchoCreateDone, &sync,
                                                           &Client->Connector);
    if (status == STATUS_PENDING) {
        status = EchoSyncWait(&sync, status);
        Client->Connector = (NDK_CONNECTOR *)sync.Object;
    }
    if (!NT_SUCCESS(status)) {
        return status;
    }
    EchoSyncInit(&sync);
    status = Client->Connector->Dispatch->NdkConnect(
        Client->Connector, Client->Qp, (const struct sockaddr *)&source, sizeof(source),
        (const struct sockaddr *)&EchoGlobals.ListenAddress, sizeof(EchoGlobals.ListenAddress), 4,
        4, EchoHello, sizeof(EchoHello), EchoRequestDone, &sync);
    status = EchoSyncWait(&sync, status);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    EchoSyncInit(&sync);
    status = Client->Connector->Dispatch->NdkCompleteConnect(Client->Connector, EchoDisconnectEvent,
                                                             Client, EchoRequestDone, &sync);
    status = EchoSyncWait(&sync, status);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    //
    // After NdkCompleteConnect, as drivers do and hardware answers: the effective limits and
    // the peer's private data.
    //
    status = Client->Connector->Dispatch->NdkGetConnectionData(Client->Connector, &ird, &ord, data,
                                                               &length);
    if (NT_SUCCESS(status) &&
        (length != sizeof(EchoWelcome) || RtlCompareMemory(data, EchoWelcome, length) != length)) {
        status = STATUS_DATA_ERROR;
    }
    if (ARGUMENT_PRESENT(Ird)) {
        *Ird = ird;
    }
    ECHO_LOG(DPFLTR_INFO_LEVEL, "rdma-echo: connected, IRD %u ORD %u\n", ird, ord);
    return status;
}

static NTSTATUS EchoWait(_In_ PKEVENT Event)
{
    LARGE_INTEGER timeout;

    timeout.QuadPart = -(LONGLONG)ECHO_WAIT_SECONDS * 10 * 1000 * 1000;
    return KeWaitForSingleObject(Event, Executive, KernelMode, FALSE, &timeout) == STATUS_TIMEOUT
               ? STATUS_IO_TIMEOUT
               : STATUS_SUCCESS;
}

static NTSTATUS EchoDisconnect(_In_ PECHO_SOCKET Socket)
{
    ECHO_SYNC sync;

    EchoSyncInit(&sync);
    return EchoSyncWait(&sync, Socket->Connector->Dispatch->NdkDisconnect(Socket->Connector,
                                                                          EchoRequestDone, &sync));
}

_Use_decl_annotations_ NTSTATUS EchoRun(VOID)
{
    PECHO_SOCKET server = &EchoGlobals.Server, client = &EchoGlobals.Client;
    NTSTATUS status;
    ULONG i, ird = 0;
    BOOLEAN failed;
    ECHO_SYNC clientDisconnect;

    PAGED_CODE();
    status = EchoOpenAdapter(&EchoGlobals.ListenAdapter);
    if (NT_SUCCESS(status)) {
        status = EchoOpenAdapter(&EchoGlobals.ServerAdapter);
    }
    if (NT_SUCCESS(status)) {
        status = EchoOpenAdapter(&EchoGlobals.ClientAdapter);
    }
    if (!NT_SUCCESS(status)) {
        ECHO_LOG(DPFLTR_ERROR_LEVEL, "rdma-echo: WskOpenNdkAdapter: 0x%08X\n", status);
        return status;
    }

    //
    // The server's CQ is the listener instance's; its PD and QP the server instance's.
    //
    status = EchoSocketOpen(server, EchoGlobals.ServerAdapter, EchoGlobals.ListenAdapter);
    if (NT_SUCCESS(status)) {
        status = EchoSocketOpen(client, EchoGlobals.ClientAdapter, EchoGlobals.ClientAdapter);
    }
    for (i = 0; NT_SUCCESS(status) && i < ECHO_MESSAGES; i++) {
        status = EchoPostReceive(server, i);
        if (NT_SUCCESS(status)) {
            status = EchoPostReceive(client, i);
        }
    }
    if (NT_SUCCESS(status)) {
        status = EchoListen();
    }
    if (NT_SUCCESS(status)) {
        status = EchoConnect(client, &ird);
    }
    if (NT_SUCCESS(status)) {
        status = EchoWait(&EchoGlobals.AcceptDone);
    }
    if (NT_SUCCESS(status)) {
        status = EchoGlobals.AcceptStatus;
    }
    if (!NT_SUCCESS(status)) {
        ECHO_LOG(DPFLTR_ERROR_LEVEL, "rdma-echo: connection: 0x%08X\n", status);
        return status;
    }

    for (i = 0; NT_SUCCESS(status) && i < ECHO_MESSAGES; i++) {
        ULONG length = EchoLength(i), j;
        PUCHAR slot = client->Buffer + (ECHO_MESSAGES + i) * ECHO_SLOT_SIZE;
        for (j = 0; j < length; j++) {
            slot[j] = EchoByte(i, j);
        }
        status = EchoSendAsync(client, ECHO_MESSAGES + i, length);
    }
    if (NT_SUCCESS(status)) {
        status = EchoWait(&client->Done);
    }
    if (NT_SUCCESS(status)) {
        status = EchoWait(&server->Done);
    }
    failed = client->Failed || server->Failed;
    if (NT_SUCCESS(status) && failed) {
        status = STATUS_DATA_ERROR;
    }
    if (!NT_SUCCESS(status)) {
        ECHO_LOG(DPFLTR_ERROR_LEVEL, "rdma-echo: echo: 0x%08X\n", status);
        return status;
    }
    ECHO_LOG(DPFLTR_INFO_LEVEL, "rdma-echo: %u messages echoed and checked (IRD %u)\n",
             ECHO_MESSAGES, ird);

    //
    // Graceful close: the client disconnects, the server answers the disconnect event.
    //
    EchoSyncInit(&clientDisconnect);
    status = client->Connector->Dispatch->NdkDisconnect(client->Connector, EchoRequestDone,
                                                        &clientDisconnect);
    if (NT_SUCCESS(status)) {
        status = EchoWait(&server->Disconnected);
    }
    if (NT_SUCCESS(status)) {
        status = EchoDisconnect(server);
    }
    //
    // The client's disconnect completes once the server's FIN is in.
    //
    if (NT_SUCCESS(status)) {
        status = EchoSyncWait(&clientDisconnect, STATUS_PENDING);
    }
    return status;
}

// ---------------------------------------------------------------------------------------------
// Load and unload

static VOID EchoTeardown(VOID)
{
    PECHO_SOCKET server = &EchoGlobals.Server, client = &EchoGlobals.Client;

    EchoSocketClose(client);
    EchoSocketClose(server);
    if (EchoGlobals.Listener != NULL) {
        EchoClose(&EchoGlobals.Listener->Header);
        EchoGlobals.Listener = NULL;
    }
    //
    // Each instance closes on its own objects: the server's instance goes while its CQ (the
    // listener instance's) is still open.
    //
    if (EchoGlobals.ServerAdapter != NULL) {
        EchoGlobals.NdkDispatch.WskCloseNdkAdapter(EchoGlobals.WskProvider.Client,
                                                   EchoGlobals.ServerAdapter);
        EchoGlobals.ServerAdapter = NULL;
    }
    EchoSocketCloseCq(server);
    EchoSocketCloseCq(client);
    if (EchoGlobals.ClientAdapter != NULL) {
        EchoGlobals.NdkDispatch.WskCloseNdkAdapter(EchoGlobals.WskProvider.Client,
                                                   EchoGlobals.ClientAdapter);
        EchoGlobals.ClientAdapter = NULL;
    }
    if (EchoGlobals.ListenAdapter != NULL) {
        EchoGlobals.NdkDispatch.WskCloseNdkAdapter(EchoGlobals.WskProvider.Client,
                                                   EchoGlobals.ListenAdapter);
        EchoGlobals.ListenAdapter = NULL;
    }
}

static VOID EchoWskStop(VOID)
{
    WskReleaseProviderNPI(&EchoGlobals.WskRegistration);
    WskDeregister(&EchoGlobals.WskRegistration);
}

_Use_decl_annotations_ VOID EchoUnload(PDRIVER_OBJECT DriverObject)
{
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    EchoWskStop();
    ExDeleteLookasideListEx(&EchoGlobals.RequestLookaside);
    IoDeleteDevice(EchoGlobals.Device);
    ECHO_LOG(DPFLTR_INFO_LEVEL, "rdma-echo: unloaded\n");
}

_Use_decl_annotations_ NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject,
                                            PUNICODE_STRING RegistryPath)
{
    NTSTATUS status;
    WSK_CLIENT_NPI npi;
    NET_LUID luid;
    DECLARE_CONST_UNICODE_STRING(deviceName, L"\\Device\\RdmaEcho");

    UNREFERENCED_PARAMETER(RegistryPath);

    //
    // Nothing runs concurrently before the device exists.
    //
    _No_competing_thread_begin_ RtlZeroMemory(&EchoGlobals, sizeof(EchoGlobals));
    KeInitializeSpinLock(&EchoGlobals.AcceptLock);
    KeInitializeEvent(&EchoGlobals.AcceptDone, NotificationEvent, FALSE);
    EchoGlobals.Server.Name = "server";
    EchoGlobals.Server.IsServer = TRUE;
    EchoGlobals.Client.Name = "client";
    _No_competing_thread_end_

        status = IoCreateDeviceSecure(DriverObject, 0, (PUNICODE_STRING)&deviceName,
                                      FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                      &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &EchoGlobals.Device);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    DriverObject->MajorFunction[IRP_MJ_INTERNAL_DEVICE_CONTROL] = EchoDispatchInternal;
    DriverObject->DriverUnload = EchoUnload;
    status = ExInitializeLookasideListEx(&EchoGlobals.RequestLookaside, NULL, NULL, NonPagedPoolNx,
                                         0, sizeof(ECHO_SEND_REQUEST), ECHO_REQUEST_TAG, 0);
    if (!NT_SUCCESS(status)) {
        IoDeleteDevice(EchoGlobals.Device);
        return status;
    }

    npi.ClientContext = NULL;
    npi.Dispatch = &EchoWskDispatch;
    status = WskRegister(&npi, &EchoGlobals.WskRegistration);
    if (!NT_SUCCESS(status)) {
        ExDeleteLookasideListEx(&EchoGlobals.RequestLookaside);
        IoDeleteDevice(EchoGlobals.Device);
        return status;
    }
    status = WskCaptureProviderNPI(&EchoGlobals.WskRegistration, WSK_INFINITE_WAIT,
                                   &EchoGlobals.WskProvider);
    if (!NT_SUCCESS(status)) {
        WskDeregister(&EchoGlobals.WskRegistration);
        ExDeleteLookasideListEx(&EchoGlobals.RequestLookaside);
        IoDeleteDevice(EchoGlobals.Device);
        return status;
    }
    status = EchoGlobals.WskProvider.Dispatch->WskControlClient(
        EchoGlobals.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
        sizeof(EchoGlobals.NdkDispatch), &EchoGlobals.NdkDispatch, NULL, NULL);
    if (NT_SUCCESS(status)) {
        status = ConvertInterfaceAliasToLuid(L"lo", &luid);
    }
    if (NT_SUCCESS(status)) {
        status = ConvertInterfaceLuidToIndex(&luid, &EchoGlobals.IfIndex);
    }
    if (NT_SUCCESS(status)) {
        status = EchoRun();
    }
    //
    // The run is a self-test: everything it opened is closed before DriverEntry returns; a
    // failure is DriverEntry's status.
    //
    EchoTeardown();
    if (!NT_SUCCESS(status)) {
        ECHO_LOG(DPFLTR_ERROR_LEVEL, "rdma-echo: FAILED: 0x%08X\n", status);
        EchoWskStop();
        ExDeleteLookasideListEx(&EchoGlobals.RequestLookaside);
        IoDeleteDevice(EchoGlobals.Device);
        return status;
    }
    return STATUS_SUCCESS;
}
