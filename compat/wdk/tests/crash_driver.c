/* A driver with deliberate bugs, for the bugcheck reports (docs/wdk.md, "Bugcheck reports").
 * SOFTNDK_WDK_TEST_BUG picks one:
 *   null      DriverEntry registers a buffer on a socket that was never published (NULL): a
 *             read of the field at offset 0x18 of a NULL pointer;
 *   uaf       a work item completes a work request after the completion path freed it: it reads
 *             the request's `Next` pointer (the free fill) and follows it;
 *   overrun   DriverEntry writes one element past the end of a pool array;
 *   assert    NT_ASSERT(FALSE) in DriverUnload;
 *   twice     a work request freed twice (a harness bugcheck: BAD_POOL_CALLER);
 *   divide    a division by zero in DriverEntry;
 *   stack     a recursion without end in a work item (the stack guard);
 *   callback  a CQ notification callback (DISPATCH_LEVEL, a softndk progress thread) follows a
 *             NULL pointer;
 *   fail      DriverEntry fails (after deleting its device): the runner frees what it made;
 *   none      a clean load and unload.
 * The lines the reports must name are marked BUG-... for the test to find. */
#include <ntddk.h>
#include <netioapi.h>
#include <wskndk.h>

#include <stdlib.h>
#include <string.h>

#define CRASH_TAG 'hsrC' /* "Crsh" */

typedef struct _CRASH_SOCKET {
    LIST_ENTRY Link;    /* 0x00 */
    ULONG State;        /* 0x10 */
    ULONG Flags;        /* 0x14 */
    PVOID BufferRegion; /* 0x18 */
} CRASH_SOCKET, *PCRASH_SOCKET;

typedef struct _CRASH_WR {
    struct _CRASH_WR *Next;
    ULONG Length;
    UCHAR Payload[296];
} CRASH_WR, *PCRASH_WR;

static PCRASH_SOCKET volatile CrashServerSocket; /* published by a thread that never ran */
static PIO_WORKITEM CrashItem;
static KEVENT CrashDone;
static PDEVICE_OBJECT CrashDevice;

DECLSPEC_NOINLINE static PVOID CrashRegisterBuffer(PCRASH_SOCKET Socket)
{
    return Socket->BufferRegion; /* BUG-NULL */
}

DECLSPEC_NOINLINE static PCRASH_WR CrashAllocateWr(void)
{
    PCRASH_WR wr = ExAllocatePoolZero(NonPagedPoolNx, sizeof(CRASH_WR), CRASH_TAG);
    if (wr)
        wr->Next = wr;
    return wr;
}

DECLSPEC_NOINLINE static void CrashFreeWr(PCRASH_WR Wr)
{
    ExFreePoolWithTag(Wr, CRASH_TAG);
}

DECLSPEC_NOINLINE static ULONG CrashCompleteWr(PCRASH_WR volatile Wr)
{
    CrashFreeWr(Wr);
    return Wr->Next->Length; /* BUG-UAF */
}

static void CrashWorker(PDEVICE_OBJECT Device, PVOID Context)
{
    UNREFERENCED_PARAMETER(Device);
    PCRASH_WR wr = Context;
    ULONG n = CrashCompleteWr(wr);
    DbgPrint("crash-driver: completed %lu bytes\n", n);
    KeSetEvent(&CrashDone, 0, FALSE);
}

DECLSPEC_NOINLINE static void CrashOverrun(void)
{
    ULONG count = 8;
    PULONG64 a = ExAllocatePoolZero(NonPagedPoolNx, count * sizeof(ULONG64), CRASH_TAG);
    if (!a)
        return;
    for (ULONG i = 0; i <= count; i++)
        ((ULONG64 volatile *)a)[i] = i; /* BUG-OVERRUN */
    ExFreePoolWithTag(a, CRASH_TAG);
}

/* ---- "callback": an adapter through WSK, a CQ whose notification callback crashes */

static const WSK_CLIENT_DISPATCH CrashWskDispatch = {MAKE_WSK_VERSION(1, 0), 0, NULL};
static WSK_REGISTRATION CrashWskRegistration;
static WSK_PROVIDER_NPI CrashWskProvider;

typedef struct _CRASH_QUEUE {
    PCRASH_SOCKET Socket; /* never set */
} CRASH_QUEUE;
static CRASH_QUEUE CrashQueue;

static void CrashCqNotify(PVOID Context, NTSTATUS Status)
{
    CRASH_QUEUE *q = Context;
    UNREFERENCED_PARAMETER(Status);
    DbgPrint("crash-driver: notified, state %lu\n", q->Socket->State); /* BUG-CALLBACK */
}

static void CrashCreated(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *Object)
{
    UNREFERENCED_PARAMETER(Context);
    UNREFERENCED_PARAMETER(Status);
    UNREFERENCED_PARAMETER(Object);
}

static NTSTATUS CrashInCallback(void)
{
    WSK_CLIENT_NPI npi = {NULL, &CrashWskDispatch};
    WSK_PROVIDER_NDK_DISPATCH ndk;
    NET_LUID luid;
    NET_IFINDEX index = 0;
    NDK_ADAPTER *adapter = NULL;
    NDK_CQ *cq = NULL;
    NDK_PD *pd = NULL;
    NDK_QP *qp = NULL;
    NTSTATUS status = WskRegister(&npi, &CrashWskRegistration);
    if (NT_SUCCESS(status))
        status = WskCaptureProviderNPI(&CrashWskRegistration, WSK_INFINITE_WAIT, &CrashWskProvider);
    if (NT_SUCCESS(status))
        status = CrashWskProvider.Dispatch->WskControlClient(
            CrashWskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL, sizeof(ndk),
            &ndk, NULL, NULL);
    if (NT_SUCCESS(status))
        status = ConvertInterfaceAliasToLuid(L"lo", &luid);
    if (NT_SUCCESS(status))
        status = ConvertInterfaceLuidToIndex(&luid, &index);
    if (NT_SUCCESS(status)) {
        NDK_VERSION version = {2, 0};
        status = ndk.WskOpenNdkAdapter(CrashWskProvider.Client, version, index, &adapter);
    }
    if (NT_SUCCESS(status))
        status = adapter->Dispatch->NdkCreateCq(adapter, 16, CrashCqNotify, &CrashQueue, NULL,
                                                CrashCreated, NULL, &cq);
    if (NT_SUCCESS(status))
        status = adapter->Dispatch->NdkCreatePd(adapter, CrashCreated, NULL, &pd);
    if (NT_SUCCESS(status))
        status =
            pd->Dispatch->NdkCreateQp(pd, cq, cq, NULL, 4, 4, 1, 1, 0, CrashCreated, NULL, &qp);
    if (!NT_SUCCESS(status))
        return status;
    /* a receive flushed: a completion, and the armed CQ calls back */
    cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
    status = qp->Dispatch->NdkReceive(qp, NULL, NULL, 0);
    if (!NT_SUCCESS(status))
        return status;
    qp->Dispatch->NdkFlush(qp);
    LARGE_INTEGER wait = {.QuadPart = -10 * 1000 * 1000 * 10}; /* the crash ends the run */
    KeDelayExecutionThread(KernelMode, FALSE, &wait);
    return STATUS_UNSUCCESSFUL;
}

static volatile ULONG CrashDepthLimit = 0xFFFFFFFF; /* "a limit": never reached */

DECLSPEC_NOINLINE static ULONG CrashRecurse(ULONG Depth)
{
    volatile UCHAR frame[512];
    frame[0] = (UCHAR)Depth;
    if (Depth == CrashDepthLimit)
        return 0;
    return CrashRecurse(Depth + 1) + frame[0]; /* BUG-STACK */
}

static void CrashStackWorker(PDEVICE_OBJECT Device, PVOID Context)
{
    UNREFERENCED_PARAMETER(Device);
    UNREFERENCED_PARAMETER(Context);
    DbgPrint("crash-driver: %lu\n", CrashRecurse(0));
    KeSetEvent(&CrashDone, 0, FALSE);
}

static DRIVER_UNLOAD CrashUnload;
static void CrashUnload(PDRIVER_OBJECT DriverObject)
{
    UNREFERENCED_PARAMETER(DriverObject);
    const char *bug = getenv("SOFTNDK_WDK_TEST_BUG");
    if (bug && !strcmp(bug, "assert"))
        NT_ASSERT(CrashDevice == NULL); /* BUG-ASSERT */
    if (CrashItem)
        IoFreeWorkItem(CrashItem);
    if (CrashDevice)
        IoDeleteDevice(CrashDevice);
}

DRIVER_INITIALIZE DriverEntry;
NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    UNREFERENCED_PARAMETER(RegistryPath);
    const char *bug = getenv("SOFTNDK_WDK_TEST_BUG");
    bug = bug ? bug : "none";
    DriverObject->DriverUnload = CrashUnload;
    NTSTATUS status =
        IoCreateDevice(DriverObject, 0, NULL, FILE_DEVICE_UNKNOWN, 0, FALSE, &CrashDevice);
    if (!NT_SUCCESS(status))
        return status;
    if (!strcmp(bug, "null")) {
        PVOID region = CrashRegisterBuffer(CrashServerSocket);
        DbgPrint("crash-driver: region %p\n", region);
    } else if (!strcmp(bug, "uaf")) {
        KeInitializeEvent(&CrashDone, NotificationEvent, FALSE);
        CrashItem = IoAllocateWorkItem(CrashDevice);
        PCRASH_WR wr = CrashAllocateWr();
        if (!CrashItem || !wr)
            return STATUS_INSUFFICIENT_RESOURCES;
        IoQueueWorkItem(CrashItem, CrashWorker, DelayedWorkQueue, wr);
        KeWaitForSingleObject(&CrashDone, Executive, KernelMode, FALSE, NULL);
    } else if (!strcmp(bug, "overrun")) {
        CrashOverrun();
    } else if (!strcmp(bug, "twice")) {
        PCRASH_WR wr = CrashAllocateWr();
        if (!wr)
            return STATUS_INSUFFICIENT_RESOURCES;
        CrashFreeWr(wr);
        CrashFreeWr(wr); /* BUG-TWICE */
    } else if (!strcmp(bug, "stack")) {
        KeInitializeEvent(&CrashDone, NotificationEvent, FALSE);
        CrashItem = IoAllocateWorkItem(CrashDevice);
        if (!CrashItem)
            return STATUS_INSUFFICIENT_RESOURCES;
        IoQueueWorkItem(CrashItem, CrashStackWorker, DelayedWorkQueue, NULL);
        KeWaitForSingleObject(&CrashDone, Executive, KernelMode, FALSE, NULL);
    } else if (!strcmp(bug, "callback")) {
        return CrashInCallback();
    } else if (!strcmp(bug, "fail")) {
        IoDeleteDevice(CrashDevice);
        CrashDevice = NULL;
        return STATUS_INSUFFICIENT_RESOURCES;
    } else if (!strcmp(bug, "divide")) {
        volatile ULONG zero = 0;
        DbgPrint("crash-driver: %lu\n", 100 / zero); /* BUG-DIVIDE */
    }
    return STATUS_SUCCESS;
}
