/*++

Module Name:

    names_driver.c

Abstract:

    A small NDK consumer written as Windows driver code to exercise what a second real driver
    needed from the harness: the build-level traps (no DriverEntry from the headers, MSVC
    anonymous members, __declspec forms, Windows' IN_ADDR members, the 16-bit wide-character
    runtime) and the name families (old-style SAL, NTSTATUS codes, WSK_BUF, the _Interlocked*
    intrinsics, the I/O error log, route lookups, NUMA, Rtl string helpers). It finds the
    interface of 127.0.0.1 with GetBestRoute2 and opens an NDK adapter on it through WSK, as an
    NDK consumer does, and runs a TCP path beside it over WSK sockets: it serves and calls
    itself on loopback (wsktcp.c). Built with the documented flags only (pkg-config softndk-wdk /
    softndk::wdk, -Wno-multichar -Wno-unknown-pragmas) and -Wall -Werror.

--*/

#include "names.h"

#define NAMES_WORKERS 4
#define NAMES_ROUNDS  1000

//
// MSVC anonymous members of a tagged type (-fms-extensions).
//
typedef struct _NAMES_HEADER {
    UCHAR Opcode;
    UCHAR Flags;
    USHORT CommandId;
} NAMES_HEADER;

typedef struct _NAMES_COMMAND {
    NAMES_HEADER;
    ULONG NamespaceId;
    WSK_BUF Data;
} NAMES_COMMAND, *PNAMES_COMMAND;

typedef struct _NAMES_GLOBALS {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_PROVIDER_NPI WskProvider;
    WSK_PROVIDER_NDK_DISPATCH NdkDispatch;
    __declspec(align(64)) volatile LONG Counter;
    volatile LONG64 Bytes;
    volatile SHORT Workers;
    KEVENT WorkersDone;
    PIO_WORKITEM Items[NAMES_WORKERS];
} NAMES_GLOBALS;

static NAMES_GLOBALS Globals;

//
// {7D4C1B2E-9A31-4F6B-8E0D-5C2A91F3B604}: a selectany GUID, as drivers define their own.
//
__declspec(selectany) const GUID NamesProviderGuid = {
    0x7D4C1B2E, 0x9A31, 0x4F6B, {0x8E, 0x0D, 0x5C, 0x2A, 0x91, 0xF3, 0xB6, 0x04}};

DRIVER_INITIALIZE DriverEntry;
static DRIVER_UNLOAD NamesUnload;
static IO_WORKITEM_ROUTINE NamesWorker;

__declspec(noinline) static __checkReturn NTSTATUS
    NamesFormat(__out_ecount(Count) PWCHAR Buffer, __in SIZE_T Count,
                __in __nullterminated PCWSTR Name, __in ULONG Value)
{
    int n = _snwprintf(Buffer, Count, L"%s-%u", Name, Value);

    return (n < 0 || (SIZE_T)n >= Count) ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;
}

static VOID NamesWorker(PDEVICE_OBJECT DeviceObject, PVOID Context)
{
    ULONG i;

    UNREFERENCED_PARAMETER(DeviceObject);
    UNREFERENCED_PARAMETER(Context);
    for (i = 0; i < NAMES_ROUNDS; i++) {
        _InterlockedIncrement(&Globals.Counter);
        _InterlockedExchangeAdd64(&Globals.Bytes, 512);
    }
    if (_InterlockedDecrement16(&Globals.Workers) == 0) {
        KeSetEvent(&Globals.WorkersDone, IO_NO_INCREMENT, FALSE);
    }
}

static NTSTATUS NamesCheckStrings(VOID)
{
    WCHAR name[32];
    CHAR narrow[32];
    UNICODE_STRING guidText;
    UNICODE_STRING number;
    ANSI_STRING ansi;
    GUID parsed;
    ULONG value;
    NTSTATUS status;

    status = NamesFormat(name, RTL_NUMBER_OF(name), L"nvme", 4420);
    NAMES_CHECK(NT_SUCCESS(status) && wcslen(name) == 9 && wcscmp(name, L"nvme-4420") == 0,
                STATUS_DATA_ERROR);
    NAMES_CHECK(NamesFormat(name, 4, L"nvme", 4420) == STATUS_BUFFER_OVERFLOW, STATUS_DATA_ERROR);
    NAMES_CHECK(_wcsicmp(L"NQN.Subsystem", L"nqn.subsystem") == 0, STATUS_DATA_ERROR);
    NAMES_CHECK(wcstombs(narrow, L"nqn.2014-08", sizeof(narrow)) == 11 &&
                    strcmp(narrow, "nqn.2014-08") == 0,
                STATUS_DATA_ERROR);
    NAMES_CHECK(_snprintf(narrow, sizeof(narrow), "%ws:%lu", L"port", (ULONG)4420) == 9,
                STATUS_DATA_ERROR);

    status = RtlStringFromGUID(&NamesProviderGuid, &guidText);
    NAMES_CHECK(NT_SUCCESS(status), status);
    NamesLog("names-driver: provider %wZ\n", &guidText);
    status = RtlGUIDFromString(&guidText, &parsed);
    RtlFreeUnicodeString(&guidText);
    NAMES_CHECK(NT_SUCCESS(status) && RtlEqualMemory(&parsed, &NamesProviderGuid, sizeof(GUID)),
                STATUS_DATA_ERROR);

    RtlInitAnsiString(&ansi, "4420");
    status = RtlAnsiStringToUnicodeString(&number, &ansi, TRUE);
    NAMES_CHECK(NT_SUCCESS(status), status);
    status = RtlUnicodeStringToInteger(&number, 10, &value);
    RtlFreeUnicodeString(&number);
    NAMES_CHECK(NT_SUCCESS(status) && value == 4420, STATUS_DATA_ERROR);
    return STATUS_SUCCESS;
}

static NTSTATUS NamesFindInterface(_Out_ PNET_IFINDEX IfIndex)
{
    SOCKADDR_INET destination;
    SOCKADDR_INET source;
    MIB_IPFORWARD_ROW2 route;
    SOCKADDR_IN peer;
    USHORT port;
    NTSTATUS status;
    CHAR text[32];
    ULONG length = sizeof(text);

    RtlZeroMemory(&peer, sizeof(peer));
    peer.sin_family = AF_INET;
    status = RtlIpv4StringToAddressExW(L"127.0.0.1:4420", TRUE, &peer.sin_addr, &port);
    NAMES_CHECK(NT_SUCCESS(status), status);
    peer.sin_port = port;
    NAMES_CHECK(peer.sin_addr.S_un.S_un_b.s_b1 == 127 && peer.sin_addr.S_un.S_un_b.s_b4 == 1,
                STATUS_DATA_ERROR);
    NAMES_CHECK(peer.sin_addr.s_addr == peer.sin_addr.S_un.S_addr, STATUS_DATA_ERROR);

    RtlZeroMemory(&destination, sizeof(destination));
    destination.Ipv4 = peer;
    status = GetBestRoute2(NULL, 0, NULL, &destination, 0, &route, &source);
    NAMES_CHECK(NT_SUCCESS(status), status);
    status = RtlIpv4AddressToStringExA(&source.Ipv4.sin_addr, 0, text, &length);
    NAMES_CHECK(NT_SUCCESS(status), status);
    NamesLog("names-driver: route to 127.0.0.1 via IfIndex %lu, /%u, source %s\n",
             route.InterfaceIndex, route.DestinationPrefix.PrefixLength, text);
    *IfIndex = route.InterfaceIndex;
    return STATUS_SUCCESS;
}

static NTSTATUS NamesOpenAdapter(NET_IFINDEX IfIndex)
{
    NDK_VERSION version = {2, 0};
    NDK_ADAPTER *adapter = NULL;
    NTSTATUS status;

    status = Globals.NdkDispatch.WskOpenNdkAdapter(Globals.WskProvider.Client, version, IfIndex,
                                                   &adapter);
    NAMES_CHECK(NT_SUCCESS(status), status);
    Globals.NdkDispatch.WskCloseNdkAdapter(Globals.WskProvider.Client, adapter);
    return STATUS_SUCCESS;
}

static NTSTATUS NamesRun(VOID)
{
    GROUP_AFFINITY affinity;
    USHORT count = 0;
    USHORT node = KeGetCurrentNodeNumber();
    PROCESSOR_NUMBER processor;
    NET_IFINDEX ifIndex = 0;
    PIO_ERROR_LOG_PACKET entry;
    NAMES_COMMAND command;
    UCHAR data[64];
    PMDL mdl;
    ULONG i;
    NTSTATUS status;

    KeQueryNodeActiveAffinity(node, &affinity, &count);
    NAMES_CHECK(count > 0 && affinity.Mask != 0, STATUS_INVALID_DEVICE_STATE);
    status = KeGetProcessorNumberFromIndex(0, &processor);
    NAMES_CHECK(NT_SUCCESS(status) && KeGetProcessorIndexFromNumber(&processor) == 0,
                STATUS_INVALID_DEVICE_STATE);
    NamesLog("names-driver: node %u has %u processor(s)\n", node, count);

    status = NamesCheckStrings();
    if (!NT_SUCCESS(status)) {
        return status;
    }

    //
    // A command whose data is a WSK_BUF over an MDL, with the header as an anonymous member.
    //
    mdl = IoAllocateMdl(data, sizeof(data), FALSE, FALSE, NULL);
    NAMES_CHECK(mdl != NULL, STATUS_INSUFFICIENT_RESOURCES);
    MmBuildMdlForNonPagedPool(mdl);
    RtlZeroMemory(&command, sizeof(command));
    command.Opcode = 0x02;
    command.CommandId = 7;
    command.Data.Mdl = mdl;
    command.Data.Offset = 16;
    command.Data.Length = 32;
    NAMES_CHECK((PUCHAR)MmGetMdlVirtualAddress(command.Data.Mdl) + command.Data.Offset == data + 16,
                STATUS_DATA_ERROR);
    IoFreeMdl(mdl);

    //
    // Work items count with the intrinsics.
    //
    Globals.Workers = NAMES_WORKERS;
    KeInitializeEvent(&Globals.WorkersDone, NotificationEvent, FALSE);
    for (i = 0; i < NAMES_WORKERS; i++) {
        Globals.Items[i] = IoAllocateWorkItem(Globals.Device);
        NAMES_CHECK(Globals.Items[i] != NULL, STATUS_INSUFFICIENT_RESOURCES);
    }
    for (i = 0; i < NAMES_WORKERS; i++) {
        IoQueueWorkItem(Globals.Items[i], NamesWorker, DelayedWorkQueue, NULL);
    }
    KeWaitForSingleObject(&Globals.WorkersDone, Executive, KernelMode, FALSE, NULL);
    NAMES_CHECK(Globals.Counter == NAMES_WORKERS * NAMES_ROUNDS, STATUS_DATA_ERROR);
    NAMES_CHECK(Globals.Bytes == 512LL * NAMES_WORKERS * NAMES_ROUNDS, STATUS_DATA_ERROR);

    status = NamesFindInterface(&ifIndex);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    status = NamesOpenAdapter(ifIndex);
    if (!NT_SUCCESS(status)) {
        return status;
    }

    //
    // The TCP path beside the NDK one: IPv4, and IPv6 where the host routes ::1.
    //
    status = NamesWskTcp(&Globals.WskProvider, AF_INET);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    {
        SOCKADDR_INET six;
        SOCKADDR_INET source;
        MIB_IPFORWARD_ROW2 route;

        RtlZeroMemory(&six, sizeof(six));
        six.Ipv6.sin6_family = AF_INET6;
        six.Ipv6.sin6_addr.u.Byte[15] = 1;
        if (NT_SUCCESS(GetBestRoute2(NULL, 0, NULL, &six, 0, &route, &source))) {
            status = NamesWskTcp(&Globals.WskProvider, AF_INET6);
            if (!NT_SUCCESS(status)) {
                return status;
            }
        } else {
            NamesLog("names-driver: no route to ::1, WSK TCP over IPv6 skipped\n");
        }
    }

    //
    // A line in the event log, as a driver reports a controller that did not answer.
    //
    entry = IoAllocateErrorLogEntry(Globals.Device, sizeof(IO_ERROR_LOG_PACKET) + sizeof(ULONG));
    NAMES_CHECK(entry != NULL, STATUS_INSUFFICIENT_RESOURCES);
    entry->ErrorCode = STATUS_IO_TIMEOUT;
    entry->FinalStatus = STATUS_DEVICE_PROTOCOL_ERROR;
    entry->UniqueErrorValue = 0x4E56;
    entry->DumpDataSize = sizeof(ULONG);
    entry->DumpData[0] = Globals.Counter;
    IoWriteErrorLogEntry(entry);
    return STATUS_SUCCESS;
}

static VOID NamesCleanup(VOID)
{
    ULONG i;

    for (i = 0; i < NAMES_WORKERS; i++) {
        if (Globals.Items[i] != NULL) {
            IoFreeWorkItem(Globals.Items[i]);
            Globals.Items[i] = NULL;
        }
    }
    if (Globals.WskProvider.Client != NULL) {
        WskReleaseProviderNPI(&Globals.WskRegistration);
        Globals.WskProvider.Client = NULL;
    }
    WskDeregister(&Globals.WskRegistration);
    if (Globals.Device != NULL) {
        IoDeleteDevice(Globals.Device);
        Globals.Device = NULL;
    }
}

static VOID NamesUnload(PDRIVER_OBJECT DriverObject)
{
    UNREFERENCED_PARAMETER(DriverObject);
    NamesCleanup();
    NamesLog("names-driver: unloaded\n");
}

static const WSK_CLIENT_DISPATCH NamesWskDispatch = {MAKE_WSK_VERSION(1, 0), 0, NULL};

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    WSK_CLIENT_NPI npi;
    NTSTATUS status;
    DECLARE_CONST_UNICODE_STRING(deviceName, L"\\Device\\NamesDriver");

    UNREFERENCED_PARAMETER(RegistryPath);
    RtlZeroMemory(&Globals, sizeof(Globals));
    status = IoCreateDeviceSecure(DriverObject, 0, (PUNICODE_STRING)&deviceName,
                                  FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN, FALSE,
                                  &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &Globals.Device);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    npi.ClientContext = NULL;
    npi.Dispatch = &NamesWskDispatch;
    status = WskRegister(&npi, &Globals.WskRegistration);
    if (!NT_SUCCESS(status)) {
        IoDeleteDevice(Globals.Device);
        return status;
    }
    status =
        WskCaptureProviderNPI(&Globals.WskRegistration, WSK_INFINITE_WAIT, &Globals.WskProvider);
    if (NT_SUCCESS(status)) {
        status = Globals.WskProvider.Dispatch->WskControlClient(
            Globals.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
            sizeof(Globals.NdkDispatch), &Globals.NdkDispatch, NULL, NULL);
    }
    if (NT_SUCCESS(status)) {
        status = NamesRun();
    }
    if (!NT_SUCCESS(status)) {
        NamesLog("names-driver: failed with 0x%08X\n", status);
        NamesCleanup();
        return status;
    }
    DriverObject->DriverUnload = NamesUnload;
    NamesLog("names-driver: all checks passed\n");
    return STATUS_SUCCESS;
}
