/* Device objects, work items on the worker pool, and MDLs. */
#include "wdk_internal.h"
#include "wdmsec.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Device objects. A device stays allocated while queued work items reference it, as on
 * Windows, so IoDeleteDevice in DriverUnload is safe with work still queued. */
#define DEVICE_DELETE_PENDING 0x80000000u
#define IO_TYPE_DEVICE 3

struct wdk_device {
    DEVICE_OBJECT dev; /* first: the public object */
    volatile ULONG refs_and_flags;
};

static void device_free(struct wdk_device *d)
{
    if (d->dev.SoftNdkName.Buffer)
        wdk_pool_free(d->dev.SoftNdkName.Buffer, WDK_TAG_DEVICE, true, NULL);
    if (d->dev.DeviceExtension)
        wdk_pool_free(d->dev.DeviceExtension, WDK_TAG_DEVICE, true, NULL);
    wdk_pool_free(d, WDK_TAG_DEVICE, true, NULL);
}

NTSTATUS IoCreateDevice(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                        PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                        ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                        PDEVICE_OBJECT *DeviceObject)
{
    wdk_require_irql_max(PASSIVE_LEVEL, "IoCreateDevice");
    if (!DriverObject || !DeviceObject)
        return STATUS_INVALID_PARAMETER;
    void *caller = __builtin_return_address(0);
    struct wdk_device *d = wdk_pool_alloc(POOL_FLAG_NON_PAGED, sizeof *d, WDK_TAG_DEVICE, caller);
    if (!d)
        return STATUS_INSUFFICIENT_RESOURCES;
    PDEVICE_OBJECT dev = &d->dev;
    if (DeviceExtensionSize) {
        dev->DeviceExtension =
            wdk_pool_alloc(POOL_FLAG_NON_PAGED, DeviceExtensionSize, WDK_TAG_DEVICE, caller);
        if (!dev->DeviceExtension) {
            device_free(d);
            return STATUS_INSUFFICIENT_RESOURCES;
        }
    }
    if (DeviceName && DeviceName->Length) {
        dev->SoftNdkName.Buffer = wdk_pool_alloc(POOL_FLAG_NON_PAGED, DeviceName->Length,
                                                 WDK_TAG_DEVICE, caller);
        if (!dev->SoftNdkName.Buffer) {
            device_free(d);
            return STATUS_INSUFFICIENT_RESOURCES;
        }
        memcpy(dev->SoftNdkName.Buffer, DeviceName->Buffer, DeviceName->Length);
        dev->SoftNdkName.Length = dev->SoftNdkName.MaximumLength = DeviceName->Length;
    }
    dev->Type = IO_TYPE_DEVICE;
    dev->Size = (USHORT)sizeof(DEVICE_OBJECT);
    dev->DriverObject = DriverObject;
    dev->DeviceType = DeviceType;
    dev->Characteristics = DeviceCharacteristics;
    dev->Flags = DO_DEVICE_INITIALIZING | (Exclusive ? DO_EXCLUSIVE : 0);
    dev->StackSize = 1;
    dev->ReferenceCount = 0;
    /* Newest first, as Windows links them. */
    dev->NextDevice = DriverObject->DeviceObject;
    DriverObject->DeviceObject = dev;
    *DeviceObject = dev;
    return STATUS_SUCCESS;
}

VOID IoDeleteDevice(PDEVICE_OBJECT DeviceObject)
{
    wdk_require_irql_max(PASSIVE_LEVEL, "IoDeleteDevice");
    struct wdk_device *d = (struct wdk_device *)DeviceObject;
    PDRIVER_OBJECT drv = DeviceObject->DriverObject;
    PDEVICE_OBJECT *pp = &drv->DeviceObject;
    while (*pp && *pp != DeviceObject)
        pp = &(*pp)->NextDevice;
    if (!*pp)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "IoDeleteDevice(%p): not a device of this driver (deleted twice?)",
                         (void *)DeviceObject);
    *pp = DeviceObject->NextDevice;
    ULONG v = __atomic_or_fetch(&d->refs_and_flags, DEVICE_DELETE_PENDING, __ATOMIC_ACQ_REL);
    if (v == DEVICE_DELETE_PENDING)
        device_free(d);
}

/* Work items may also belong to a driver object (IoInitializeWorkItem(DriverObject, ...)):
 * only device objects are counted. */

void wdk_device_reference(PDEVICE_OBJECT dev)
{
    if (dev->Type != IO_TYPE_DEVICE)
        return;
    struct wdk_device *d = (struct wdk_device *)dev;
    __atomic_add_fetch(&d->refs_and_flags, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&dev->ReferenceCount, 1, __ATOMIC_RELAXED);
}

void wdk_device_dereference(PDEVICE_OBJECT dev)
{
    if (dev->Type != IO_TYPE_DEVICE)
        return;
    struct wdk_device *d = (struct wdk_device *)dev;
    __atomic_sub_fetch(&dev->ReferenceCount, 1, __ATOMIC_RELAXED);
    if (__atomic_sub_fetch(&d->refs_and_flags, 1, __ATOMIC_ACQ_REL) == DEVICE_DELETE_PENDING)
        device_free(d);
}

/* ------------------------------------------------------------------------------------------ */
/* Work items and the worker pool */
#define WORKITEM_MAGIC 0x4B524F574B444E53ull

struct _IO_WORKITEM {
    uint64_t magic;
    LIST_ENTRY link;
    PVOID io_object;
    PIO_WORKITEM_ROUTINE routine;
    PIO_WORKITEM_ROUTINE_EX routine_ex;
    PVOID context;
    bool queued;    /* under pool_lock */
    bool allocated; /* IoAllocateWorkItem (vs IoInitializeWorkItem on driver storage) */
};

static pthread_mutex_t wq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wq_cond = PTHREAD_COND_INITIALIZER;  /* work arrived */
static pthread_cond_t wq_idle = PTHREAD_COND_INITIALIZER;  /* pending dropped to 0 (monotonic) */
static LIST_ENTRY wq_head = {&wq_head, &wq_head};
static unsigned wq_threads, wq_pending; /* pending = queued + running */
static ULONG wq_allocated;
static pthread_once_t wq_once = PTHREAD_ONCE_INIT;

static void wq_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&wq_idle);
    pthread_cond_init(&wq_idle, &ca);
    pthread_condattr_destroy(&ca);
}

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "wdk-worker");
    SoftNdkWdkEnterDriverThread();
    wdk_crash_thread_start();
    pthread_mutex_lock(&wq_lock);
    for (;;) {
        while (IsListEmpty(&wq_head))
            pthread_cond_wait(&wq_cond, &wq_lock);
        struct _IO_WORKITEM *w = CONTAINING_RECORD(RemoveHeadList(&wq_head), struct _IO_WORKITEM,
                                                   link);
        /* Dequeued before it runs: the routine may queue the item again, or free it. */
        w->queued = false;
        PVOID obj = w->io_object, ctx = w->context;
        PIO_WORKITEM_ROUTINE r = w->routine;
        PIO_WORKITEM_ROUTINE_EX rx = w->routine_ex;
        pthread_mutex_unlock(&wq_lock);
        struct wdk_context doing;
        wdk_context_enter(&doing, WDK_CTX_WORK_ITEM, rx ? (const void *)rx : (const void *)r, w);
        if (rx)
            rx(obj, ctx, w);
        else
            r((PDEVICE_OBJECT)obj, ctx);
        wdk_context_leave(&doing);
        KIRQL irql = KeGetCurrentIrql();
        if (irql != PASSIVE_LEVEL)
            wdk_bugcheck_msg(WORKER_THREAD_RETURNED_AT_BAD_IRQL,
                             "work item routine %p returned at IRQL %u",
                             rx ? (void *)rx : (void *)r, irql);
        wdk_device_dereference((PDEVICE_OBJECT)obj);
        pthread_mutex_lock(&wq_lock);
        if (--wq_pending == 0)
            pthread_cond_broadcast(&wq_idle);
    }
    return NULL;
}

static unsigned worker_count(void)
{
    const char *e = getenv("SOFTNDK_WDK_WORKERS");
    int n = e && *e ? atoi(e) : 4;
    return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

static void queue_item(PIO_WORKITEM w, PIO_WORKITEM_ROUTINE r, PIO_WORKITEM_ROUTINE_EX rx,
                       PVOID ctx)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoQueueWorkItem");
    if (!w || w->magic != WORKITEM_MAGIC)
        wdk_bugcheck_msg(INVALID_WORK_QUEUE_ITEM, "IoQueueWorkItem(%p): not a work item",
                         (void *)w);
    pthread_once(&wq_once, wq_init);
    pthread_mutex_lock(&wq_lock);
    if (w->queued) {
        pthread_mutex_unlock(&wq_lock);
        wdk_bugcheck_msg(INVALID_WORK_QUEUE_ITEM, "IoQueueWorkItem(%p): already queued",
                         (void *)w);
    }
    w->queued = true;
    w->routine = r;
    w->routine_ex = rx;
    w->context = ctx;
    wdk_device_reference((PDEVICE_OBJECT)w->io_object);
    InsertTailList(&wq_head, &w->link);
    wq_pending++;
    /* Threads start on demand (never in a library constructor: the host may fork). */
    if (wq_threads < worker_count() && wq_threads < wq_pending) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, worker_main, NULL) == 0)
            wq_threads++;
        pthread_attr_destroy(&a);
        if (wq_threads == 0) {
            pthread_mutex_unlock(&wq_lock);
            wdk_bugcheck_msg(INVALID_WORK_QUEUE_ITEM, "no worker thread could be started");
        }
    }
    pthread_cond_signal(&wq_cond);
    pthread_mutex_unlock(&wq_lock);
}

static void init_item(PVOID IoObject, struct _IO_WORKITEM *w, bool allocated)
{
    memset(w, 0, sizeof *w);
    w->magic = WORKITEM_MAGIC;
    w->io_object = IoObject;
    w->allocated = allocated;
    pthread_mutex_lock(&wq_lock);
    wq_allocated++;
    pthread_mutex_unlock(&wq_lock);
}

static void uninit_item(struct _IO_WORKITEM *w, const char *what)
{
    pthread_mutex_lock(&wq_lock);
    bool queued = w->queued;
    if (!queued)
        wq_allocated--;
    pthread_mutex_unlock(&wq_lock);
    if (queued)
        wdk_bugcheck_msg(INVALID_WORK_QUEUE_ITEM, "%s(%p) while the item is queued", what,
                         (void *)w);
    w->magic = 0;
}

PIO_WORKITEM IoAllocateWorkItem(PDEVICE_OBJECT DeviceObject)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoAllocateWorkItem");
    if (!DeviceObject)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "IoAllocateWorkItem(NULL): a work item needs a device object");
    struct _IO_WORKITEM *w = wdk_pool_alloc(POOL_FLAG_NON_PAGED, sizeof *w, WDK_TAG_WORKITEM,
                                            __builtin_return_address(0));
    if (w)
        init_item(DeviceObject, w, true);
    return w;
}

VOID IoFreeWorkItem(PIO_WORKITEM IoWorkItem)
{
    if (!IoWorkItem || IoWorkItem->magic != WORKITEM_MAGIC || !IoWorkItem->allocated)
        wdk_bugcheck_msg(INVALID_WORK_QUEUE_ITEM,
                         "IoFreeWorkItem(%p): not from IoAllocateWorkItem", (void *)IoWorkItem);
    uninit_item(IoWorkItem, "IoFreeWorkItem");
    wdk_pool_free(IoWorkItem, WDK_TAG_WORKITEM, true, __builtin_return_address(0));
}

VOID IoQueueWorkItem(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE WorkerRoutine,
                     WORK_QUEUE_TYPE QueueType, PVOID Context)
{
    (void)QueueType; /* one pool serves every queue type */
    queue_item(IoWorkItem, WorkerRoutine, NULL, Context);
}

VOID IoQueueWorkItemEx(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE_EX WorkerRoutine,
                       WORK_QUEUE_TYPE QueueType, PVOID Context)
{
    (void)QueueType;
    queue_item(IoWorkItem, NULL, WorkerRoutine, Context);
}

ULONG IoSizeofWorkItem(VOID)
{
    return (ULONG)sizeof(struct _IO_WORKITEM);
}

VOID IoInitializeWorkItem(PVOID IoObject, PIO_WORKITEM IoWorkItem)
{
    init_item(IoObject, IoWorkItem, false);
}

VOID IoUninitializeWorkItem(PIO_WORKITEM IoWorkItem)
{
    if (!IoWorkItem || IoWorkItem->magic != WORKITEM_MAGIC || IoWorkItem->allocated)
        wdk_bugcheck_msg(INVALID_WORK_QUEUE_ITEM,
                         "IoUninitializeWorkItem(%p): not from IoInitializeWorkItem",
                         (void *)IoWorkItem);
    uninit_item(IoWorkItem, "IoUninitializeWorkItem");
}

ULONG SoftNdkWdkQueryWorkItems(ULONG *Queued)
{
    pthread_mutex_lock(&wq_lock);
    ULONG n = wq_allocated;
    if (Queued)
        *Queued = wq_pending;
    pthread_mutex_unlock(&wq_lock);
    return n;
}

BOOLEAN SoftNdkWdkWaitForWorkItems(ULONG TimeoutMs)
{
    pthread_once(&wq_once, wq_init);
    struct timespec deadline;
    wdk_now(&deadline);
    deadline.tv_sec += TimeoutMs / 1000;
    deadline.tv_nsec += (long)(TimeoutMs % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&wq_lock);
    int rc = 0;
    while (wq_pending && rc == 0)
        rc = pthread_cond_timedwait(&wq_idle, &wq_lock, &deadline);
    BOOLEAN idle = wq_pending == 0;
    pthread_mutex_unlock(&wq_lock);
    return idle;
}

/* ------------------------------------------------------------------------------------------ */
/* MDLs */
/* The most bytes one MDL describes on Windows 7 and later (IoAllocateMdl's page). */
#define WDK_MDL_MAX_BYTES (0xffffffffu - PAGE_SIZE + 1u)

PMDL IoAllocateMdl(PVOID VirtualAddress, ULONG Length, BOOLEAN SecondaryBuffer,
                   BOOLEAN ChargeQuota, PIRP Irp)
{
    (void)SecondaryBuffer, (void)ChargeQuota;
    wdk_require_irql_max(DISPATCH_LEVEL, "IoAllocateMdl");
    if (Length > WDK_MDL_MAX_BYTES)
        return NULL; /* IoAllocateMdl's page: "the maximum buffer size ... is (4 GB - PAGE_SIZE)" */
    PMDL mdl = wdk_pool_alloc(POOL_FLAG_NON_PAGED, sizeof(MDL), WDK_TAG_MDL,
                              __builtin_return_address(0));
    if (!mdl)
        return NULL;
    MmInitializeMdl(mdl, VirtualAddress, Length);
    mdl->MdlFlags = MDL_ALLOCATED_FIXED_SIZE;
    if (Irp) {
        if (!SecondaryBuffer || !Irp->MdlAddress) {
            Irp->MdlAddress = mdl;
        } else {
            PMDL tail = Irp->MdlAddress;
            while (tail->Next)
                tail = tail->Next;
            tail->Next = mdl;
        }
    }
    return mdl;
}

VOID IoFreeMdl(PMDL Mdl)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoFreeMdl");
    if (Mdl->MdlFlags & MDL_PAGES_LOCKED)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "IoFreeMdl(%p) with its pages still locked (MmUnlockPages first)",
                         (void *)Mdl);
    wdk_pool_free(Mdl, WDK_TAG_MDL, true, __builtin_return_address(0));
}

VOID MmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "MmBuildMdlForNonPagedPool");
    if (MemoryDescriptorList->MdlFlags & MDL_PAGES_LOCKED)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "MmBuildMdlForNonPagedPool(%p) on an MDL with locked pages",
                         (void *)MemoryDescriptorList);
    MemoryDescriptorList->MdlFlags |= MDL_SOURCE_IS_NONPAGED_POOL;
    MemoryDescriptorList->MappedSystemVa = MmGetMdlVirtualAddress(MemoryDescriptorList);
}

VOID MmProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode,
                         LOCK_OPERATION Operation)
{
    (void)AccessMode;
    PMDL m = MemoryDescriptorList;
    wdk_require_irql_max(DISPATCH_LEVEL, "MmProbeAndLockPages");
    if (m->MdlFlags & (MDL_PAGES_LOCKED | MDL_SOURCE_IS_NONPAGED_POOL))
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "MmProbeAndLockPages(%p) on an MDL that is %s", (void *)m,
                         m->MdlFlags & MDL_PAGES_LOCKED ? "already locked"
                                                        : "built for non-paged pool");
    /* An MDL built by hand (MmInitializeMdl) can claim more than IoAllocateMdl would describe;
     * the probe's page walk below is also what would wrap there. */
    if (m->ByteCount > WDK_MDL_MAX_BYTES)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "MmProbeAndLockPages(%p): %lu bytes, more than an MDL describes "
                         "(4 GB - PAGE_SIZE)",
                         (void *)m, (unsigned long)m->ByteCount);
    /* The probe: touch every page, so that a bad buffer faults here, where Windows would
     * raise STATUS_ACCESS_VIOLATION (there is no SEH to catch it: the process crashes). */
    const volatile char *va = (const volatile char *)MmGetMdlVirtualAddress(m);
    for (uint64_t off = 0; off < m->ByteCount;) {
        (void)va[off];
        off += PAGE_SIZE - (ULONG)(((uintptr_t)va + off) & (PAGE_SIZE - 1));
    }
    if (m->ByteCount)
        (void)va[m->ByteCount - 1];
    m->MdlFlags |= MDL_PAGES_LOCKED;
    if (Operation != IoReadAccess)
        m->MdlFlags |= MDL_WRITE_OPERATION;
}

VOID MmUnlockPages(PMDL MemoryDescriptorList)
{
    PMDL m = MemoryDescriptorList;
    wdk_require_irql_max(DISPATCH_LEVEL, "MmUnlockPages");
    if (!(m->MdlFlags & MDL_PAGES_LOCKED))
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "MmUnlockPages(%p) on an MDL whose pages are not locked", (void *)m);
    m->MdlFlags &= (int16_t) ~(MDL_PAGES_LOCKED | MDL_MAPPED_TO_SYSTEM_VA | MDL_WRITE_OPERATION);
    m->MappedSystemVa = NULL;
}

PVOID MmGetSystemAddressForMdlSafe(PMDL Mdl, ULONG Priority)
{
    (void)Priority;
    if (Mdl->MdlFlags & (MDL_MAPPED_TO_SYSTEM_VA | MDL_SOURCE_IS_NONPAGED_POOL))
        return Mdl->MappedSystemVa;
    if (!(Mdl->MdlFlags & MDL_PAGES_LOCKED))
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "MmGetSystemAddressForMdlSafe(%p): pages neither locked nor non-paged",
                         (void *)Mdl);
    Mdl->MappedSystemVa = MmGetMdlVirtualAddress(Mdl);
    Mdl->MdlFlags |= MDL_MAPPED_TO_SYSTEM_VA;
    return Mdl->MappedSystemVa;
}

/* wdmsec.h: no security model, so the SDDL string and class GUID are accepted as they are. */
NTSTATUS IoCreateDeviceSecure(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                              PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                              ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                              PCUNICODE_STRING DefaultSDDLString, LPCGUID DeviceClassGuid,
                              PDEVICE_OBJECT *DeviceObject)
{
    (void)DeviceClassGuid;
    if (!DefaultSDDLString)
        return STATUS_INVALID_PARAMETER;
    return IoCreateDevice(DriverObject, DeviceExtensionSize, DeviceName, DeviceType,
                          DeviceCharacteristics, Exclusive, DeviceObject);
}

/* ------------------------------------------------------------------------------------------ */
/* IRPs (wdm.h): allocated, completed through their stack's completion routines, freed. */
enum irp_state { IRP_ALLOCATED = 0x49525031u, IRP_COMPLETING, IRP_COMPLETED, IRP_FREED };

USHORT IoSizeOfIrp(CCHAR StackSize)
{
    size_t n = StackSize > 0 ? (size_t)StackSize : 1;
    return (USHORT)(offsetof(IRP, SoftNdkStack) + n * sizeof(IO_STACK_LOCATION));
}

VOID IoInitializeIrp(PIRP Irp, USHORT PacketSize, CCHAR StackSize)
{
    memset(Irp, 0, PacketSize);
    Irp->Type = 6; /* IO_TYPE_IRP */
    Irp->Size = PacketSize;
    Irp->StackCount = StackSize;
    Irp->CurrentLocation = (CHAR)(StackSize + 1);
    InitializeListHead(&Irp->ThreadListEntry);
    /* One past the last location: the first driver's is IoGetNextIrpStackLocation. */
    Irp->Tail.Overlay.CurrentStackLocation = &Irp->SoftNdkStack[StackSize];
    Irp->SoftNdkState = IRP_ALLOCATED;
}

PIRP IoAllocateIrp(CCHAR StackSize, BOOLEAN ChargeQuota)
{
    (void)ChargeQuota;
    wdk_require_irql_max(DISPATCH_LEVEL, "IoAllocateIrp");
    if (StackSize < 1)
        wdk_bugcheck_msg(NO_MORE_IRP_STACK_LOCATIONS, "IoAllocateIrp(%d): no stack location",
                         StackSize);
    USHORT size = IoSizeOfIrp(StackSize);
    PIRP irp = wdk_pool_alloc(POOL_FLAG_NON_PAGED, size, WDK_TAG_IRP, __builtin_return_address(0));
    if (!irp)
        return NULL;
    IoInitializeIrp(irp, size, StackSize);
    return irp;
}

static void irp_check(PIRP Irp, const char *what)
{
    if (!Irp || (Irp->SoftNdkState != IRP_ALLOCATED && Irp->SoftNdkState != IRP_COMPLETING &&
                 Irp->SoftNdkState != IRP_COMPLETED))
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "%s(%p): not an IRP from IoAllocateIrp (or already freed)", what,
                         (void *)Irp);
}

VOID IoFreeIrp(PIRP Irp)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoFreeIrp");
    irp_check(Irp, "IoFreeIrp");
    if (Irp->SoftNdkState == IRP_COMPLETING)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "IoFreeIrp(%p) while it is being completed (return "
                         "STATUS_MORE_PROCESSING_REQUIRED from the completion routine and free "
                         "it after)",
                         (void *)Irp);
    Irp->SoftNdkState = IRP_FREED;
    wdk_pool_free(Irp, WDK_TAG_IRP, true, __builtin_return_address(0));
}

VOID IoReuseIrp(PIRP Irp, NTSTATUS Iostatus)
{
    irp_check(Irp, "IoReuseIrp");
    if (Irp->SoftNdkState == IRP_COMPLETING)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "IoReuseIrp(%p) while it is being completed", (void *)Irp);
    USHORT size = Irp->Size;
    CCHAR stack = Irp->StackCount;
    IoInitializeIrp(Irp, size, stack);
    Irp->IoStatus.Status = Iostatus;
}

VOID IofCompleteRequest(PIRP Irp, CCHAR PriorityBoost)
{
    (void)PriorityBoost;
    wdk_require_irql_max(DISPATCH_LEVEL, "IoCompleteRequest");
    irp_check(Irp, "IoCompleteRequest");
    if (Irp->SoftNdkState != IRP_ALLOCATED)
        wdk_bugcheck_msg(MULTIPLE_IRP_COMPLETE_REQUESTS, "IRP %p completed twice", (void *)Irp);
    if (Irp->IoStatus.Status == STATUS_PENDING)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "IoCompleteRequest(%p) with IoStatus.Status STATUS_PENDING", (void *)Irp);
    if (Irp->CurrentLocation > Irp->StackCount + 1)
        wdk_bugcheck_msg(NO_MORE_IRP_STACK_LOCATIONS, "IRP %p: completed past its stack",
                         (void *)Irp);
    Irp->SoftNdkState = IRP_COMPLETING;
    /* From the current location up; a driver's completion routine is in the location of the
     * driver below it (IoSetCompletionRoutine sets the next one). */
    while (Irp->CurrentLocation <= Irp->StackCount) {
        PIO_STACK_LOCATION sl = IoGetCurrentIrpStackLocation(Irp);
        Irp->PendingReturned = (sl->Control & SL_PENDING_RETURNED) != 0;
        UCHAR control = sl->Control;
        PIO_COMPLETION_ROUTINE routine = sl->CompletionRoutine;
        PVOID context = sl->Context;
        IoSkipCurrentIrpStackLocation(Irp);
        NTSTATUS st = Irp->IoStatus.Status;
        bool invoke = routine && ((NT_SUCCESS(st) && (control & SL_INVOKE_ON_SUCCESS)) ||
                                  (!NT_SUCCESS(st) && (control & SL_INVOKE_ON_ERROR)) ||
                                  (Irp->Cancel && (control & SL_INVOKE_ON_CANCEL)));
        if (!invoke)
            continue;
        PDEVICE_OBJECT dev = Irp->CurrentLocation <= Irp->StackCount
                                 ? IoGetCurrentIrpStackLocation(Irp)->DeviceObject
                                 : NULL;
        /* The routine owns the IRP while it runs: it may free, reuse or complete it again
         * (and then must return STATUS_MORE_PROCESSING_REQUIRED, after which the IRP is not
         * touched here). Pool blocks stay readable in the quarantine, so a free without that
         * status is still recognised below. */
        Irp->SoftNdkState = IRP_ALLOCATED;
        struct wdk_context doing;
        wdk_context_enter(&doing, WDK_CTX_IRP_COMPLETION, (const void *)routine, Irp);
        NTSTATUS rst = routine(dev, Irp, context);
        wdk_context_leave(&doing);
        if (rst == STATUS_MORE_PROCESSING_REQUIRED)
            return;
        if (Irp->SoftNdkState != IRP_ALLOCATED)
            wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                             "IRP %p: completion routine %p freed or completed it and returned "
                             "a status other than STATUS_MORE_PROCESSING_REQUIRED",
                             (void *)Irp, (void *)(uintptr_t)routine);
        Irp->SoftNdkState = IRP_COMPLETING;
    }
    Irp->SoftNdkState = IRP_COMPLETED;
    if (Irp->UserIosb)
        *Irp->UserIosb = Irp->IoStatus;
    if (Irp->UserEvent)
        KeSetEvent(Irp->UserEvent, IO_NO_INCREMENT, FALSE);
}

NTSTATUS IofCallDriver(PDEVICE_OBJECT DeviceObject, PIRP Irp)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoCallDriver");
    irp_check(Irp, "IoCallDriver");
    if (Irp->CurrentLocation <= 1)
        wdk_bugcheck_msg(NO_MORE_IRP_STACK_LOCATIONS,
                         "IoCallDriver(%p, %p): no stack location "
                         "left",
                         (void *)DeviceObject, (void *)Irp);
    IoSetNextIrpStackLocation(Irp);
    PIO_STACK_LOCATION sl = IoGetCurrentIrpStackLocation(Irp);
    sl->DeviceObject = DeviceObject;
    PDRIVER_DISPATCH fn =
        DeviceObject && DeviceObject->DriverObject && sl->MajorFunction <= IRP_MJ_MAXIMUM_FUNCTION
            ? DeviceObject->DriverObject->MajorFunction[sl->MajorFunction]
            : NULL;
    if (!fn) {
        Irp->IoStatus.Status = STATUS_INVALID_DEVICE_REQUEST;
        Irp->IoStatus.Information = 0;
        IofCompleteRequest(Irp, IO_NO_INCREMENT);
        return STATUS_INVALID_DEVICE_REQUEST;
    }
    struct wdk_context doing;
    wdk_context_enter(&doing, WDK_CTX_IRP_DISPATCH, (const void *)fn, Irp);
    NTSTATUS st = fn(DeviceObject, Irp);
    wdk_context_leave(&doing);
    return st;
}

static KSPIN_LOCK cancel_lock;

VOID IoAcquireCancelSpinLock(PKIRQL Irql)
{
    KeAcquireSpinLock(&cancel_lock, Irql);
}

VOID IoReleaseCancelSpinLock(KIRQL Irql)
{
    KeReleaseSpinLock(&cancel_lock, Irql);
}

BOOLEAN IoCancelIrp(PIRP Irp)
{
    irp_check(Irp, "IoCancelIrp");
    KIRQL irql;
    IoAcquireCancelSpinLock(&irql);
    Irp->Cancel = TRUE;
    PDRIVER_CANCEL routine = IoSetCancelRoutine(Irp, NULL);
    if (!routine) {
        IoReleaseCancelSpinLock(irql);
        return FALSE;
    }
    Irp->CancelIrql = irql;
    PDEVICE_OBJECT dev = Irp->CurrentLocation <= Irp->StackCount
                             ? IoGetCurrentIrpStackLocation(Irp)->DeviceObject
                             : NULL;
    routine(dev, Irp); /* releases the cancel spin lock */
    return TRUE;
}
