/*++

Module Name:

    driver.c

Abstract:

    DriverEntry and DriverUnload of the kernel-consumer example: register with WSK, get the
    NDK extension of the WSK provider, open the NDK adapter of the loopback interface, run
    the RDMA socket self-test (selftest.c), and give everything back at unload.

--*/

#include "kcsock.h"

DRIVER_INITIALIZE DriverEntry;
DRIVER_UNLOAD KcDriverUnload;

#ifdef ALLOC_PRAGMA
#pragma alloc_text(INIT, DriverEntry)
#pragma alloc_text(PAGE, KcDriverUnload)
#endif

typedef struct _KC_GLOBALS {
    PDEVICE_OBJECT DeviceObject;
    WSK_REGISTRATION WskRegistration;
    WSK_PROVIDER_NPI WskProvider;
    BOOLEAN WskRegistered;
    BOOLEAN WskCaptured;
    WSK_PROVIDER_NDK_DISPATCH NdkDispatch;
    NDK_ADAPTER *Adapter;
    NDK_ADAPTER_INFO AdapterInfo;
} KC_GLOBALS;

static KC_GLOBALS KcGlobals;

static const WSK_CLIENT_DISPATCH KcWskClientDispatch = {
    MAKE_WSK_VERSION(1, 0), 0, NULL // no client event callbacks
};

static VOID
KcCleanup(VOID)
{
    if (KcGlobals.Adapter != NULL) {
        KcGlobals.NdkDispatch.WskCloseNdkAdapter(KcGlobals.WskProvider.Client, KcGlobals.Adapter);
        KcGlobals.Adapter = NULL;
    }
    if (KcGlobals.WskCaptured) {
        WskReleaseProviderNPI(&KcGlobals.WskRegistration);
        KcGlobals.WskCaptured = FALSE;
    }
    if (KcGlobals.WskRegistered) {
        WskDeregister(&KcGlobals.WskRegistration);
        KcGlobals.WskRegistered = FALSE;
    }
    if (KcGlobals.DeviceObject != NULL) {
        IoDeleteDevice(KcGlobals.DeviceObject);
        KcGlobals.DeviceObject = NULL;
    }
}

//
// Open the NDK adapter of an interface through WSK, as SMB Direct does.
//
static NTSTATUS
KcOpenAdapter(_In_ PCWSTR InterfaceAlias)
{
    NTSTATUS status;
    WSK_CLIENT_NPI clientNpi;
    SIZE_T returned = 0;
    NET_LUID luid;
    NET_IFINDEX ifIndex;
    NDK_VERSION version;
    ULONG size;

    PAGED_CODE();
    clientNpi.ClientContext = NULL;
    clientNpi.Dispatch = &KcWskClientDispatch;
    status = WskRegister(&clientNpi, &KcGlobals.WskRegistration);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcGlobals.WskRegistered = TRUE;
    status = WskCaptureProviderNPI(&KcGlobals.WskRegistration, WSK_INFINITE_WAIT,
                                   &KcGlobals.WskProvider);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcGlobals.WskCaptured = TRUE;

    status = KcGlobals.WskProvider.Dispatch->WskControlClient(
        KcGlobals.WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
        sizeof(KcGlobals.NdkDispatch), &KcGlobals.NdkDispatch, &returned, NULL);
    if (!NT_SUCCESS(status) || returned != sizeof(KcGlobals.NdkDispatch)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: no NDK extension in WSK: 0x%08X\n", status);
        return NT_SUCCESS(status) ? STATUS_NOINTERFACE : status;
    }

    status = ConvertInterfaceAliasToLuid(InterfaceAlias, &luid);
    if (NT_SUCCESS(status)) {
        status = ConvertInterfaceLuidToIndex(&luid, &ifIndex);
    }
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: no interface %ws: 0x%08X\n", InterfaceAlias,
              status);
        return status;
    }

    version.Major = 2;
    version.Minor = 0;
    status = KcGlobals.NdkDispatch.WskOpenNdkAdapter(KcGlobals.WskProvider.Client, version,
                                                     ifIndex, &KcGlobals.Adapter);
    if (!NT_SUCCESS(status)) {
        KcLog(DPFLTR_ERROR_LEVEL, "kernel-consumer: WskOpenNdkAdapter(%u): 0x%08X\n", ifIndex,
              status);
        KcGlobals.Adapter = NULL;
        return status;
    }
    size = sizeof(KcGlobals.AdapterInfo);
    status = KcGlobals.Adapter->Dispatch->NdkQueryAdapterInfo(KcGlobals.Adapter,
                                                              &KcGlobals.AdapterInfo, &size);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcLog(DPFLTR_INFO_LEVEL,
          "kernel-consumer: adapter on %ws (IfIndex %u): NDK %u.%u, technology %u, flags 0x%X, "
          "MaxCqDepth %u, SGE %u/%u, inline %u, IRD/ORD %u/%u\n",
          InterfaceAlias, ifIndex, KcGlobals.AdapterInfo.Version.Major,
          KcGlobals.AdapterInfo.Version.Minor, KcGlobals.AdapterInfo.RdmaTechnology,
          KcGlobals.AdapterInfo.AdapterFlags, KcGlobals.AdapterInfo.MaxCqDepth,
          KcGlobals.AdapterInfo.MaxInitiatorRequestSge, KcGlobals.AdapterInfo.MaxReceiveRequestSge,
          KcGlobals.AdapterInfo.MaxInlineDataSize, KcGlobals.AdapterInfo.MaxInboundReadLimit,
          KcGlobals.AdapterInfo.MaxOutboundReadLimit);
    return STATUS_SUCCESS;
}

_Use_decl_annotations_
VOID
KcDriverUnload(PDRIVER_OBJECT DriverObject)
{
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: unload\n");
    KcCleanup();
}

_Use_decl_annotations_
NTSTATUS
DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    NTSTATUS status;
    DECLARE_CONST_UNICODE_STRING(deviceName, L"\\Device\\KernelConsumer");

    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: DriverEntry %wZ, %wZ\n", &DriverObject->DriverName,
          RegistryPath);
    RtlZeroMemory(&KcGlobals, sizeof(KcGlobals));

    //
    // A device object, for the work items the server side runs in.
    //
    status = IoCreateDevice(DriverObject, 0, (PUNICODE_STRING)&deviceName, FILE_DEVICE_NETWORK,
                            FILE_DEVICE_SECURE_OPEN, FALSE, &KcGlobals.DeviceObject);
    if (!NT_SUCCESS(status)) {
        return status;
    }
    KcGlobals.DeviceObject->Flags &= ~DO_DEVICE_INITIALIZING;

    status = KcOpenAdapter(L"lo");
    if (NT_SUCCESS(status)) {
        status = KcSelfTest(KcGlobals.Adapter, &KcGlobals.AdapterInfo, KcGlobals.DeviceObject);
    }
    if (!NT_SUCCESS(status)) {
        //
        // A failed DriverEntry is not unloaded: give everything back here.
        //
        KcCleanup();
        return status;
    }
    DriverObject->DriverUnload = KcDriverUnload;
    KcLog(DPFLTR_INFO_LEVEL, "kernel-consumer: self-test passed\n");
    return STATUS_SUCCESS;
}
