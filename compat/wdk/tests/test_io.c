/* Device objects, work items on the worker pool, MDLs, and the DriverEntry runner. */
#include "wdk_test.h"

static DRIVER_OBJECT test_driver;

static PDEVICE_OBJECT make_device(void)
{
    PDEVICE_OBJECT dev = NULL;
    DECLARE_CONST_UNICODE_STRING(name, L"\\Device\\WdkTest");
    memset(&test_driver, 0, sizeof test_driver);
    CHECK_EQ_I64(IoCreateDevice(&test_driver, 32, (PUNICODE_STRING)&name, FILE_DEVICE_UNKNOWN, 0,
                                FALSE, &dev),
                 STATUS_SUCCESS);
    CHECK(dev && test_driver.DeviceObject == dev && dev->DriverObject == &test_driver);
    CHECK(dev->DeviceExtension != NULL);
    CHECK_EQ_U64(((unsigned char *)dev->DeviceExtension)[31], 0);
    return dev;
}

struct work {
    KEVENT done;
    PIO_WORKITEM item;
    PDEVICE_OBJECT seen;
    KIRQL irql;
    pthread_t thread;
    int runs;
};

static VOID work_routine(PDEVICE_OBJECT DeviceObject, PVOID Context)
{
    struct work *w = Context;
    w->seen = DeviceObject;
    w->irql = KeGetCurrentIrql();
    w->thread = pthread_self();
    PAGED_CODE(); /* work items run at PASSIVE_LEVEL */
    if (++w->runs < 3)
        IoQueueWorkItem(w->item, work_routine, DelayedWorkQueue, w); /* again, from itself */
    else
        KeSetEvent(&w->done, IO_NO_INCREMENT, FALSE);
}

TEST(wdk_work_items_run_at_passive_and_requeue)
{
    PDEVICE_OBJECT dev = make_device();
    struct work w = {.runs = 0};
    KeInitializeEvent(&w.done, NotificationEvent, FALSE);
    w.item = IoAllocateWorkItem(dev);
    CHECK(w.item != NULL);
    IoQueueWorkItem(w.item, work_routine, CriticalWorkQueue, &w);
    CHECK_EQ_I64(KeWaitForSingleObject(&w.done, Executive, KernelMode, FALSE, NULL),
                 STATUS_SUCCESS);
    CHECK(SoftNdkWdkWaitForWorkItems(5000));
    CHECK_EQ_I64(w.runs, 3);
    CHECK(w.seen == dev);
    CHECK_EQ_U64(w.irql, PASSIVE_LEVEL);
    CHECK(!pthread_equal(w.thread, pthread_self()));
    ULONG queued = 99;
    CHECK_EQ_U64(SoftNdkWdkQueryWorkItems(&queued), 1);
    CHECK_EQ_U64(queued, 0);
    IoFreeWorkItem(w.item);
    CHECK_EQ_U64(SoftNdkWdkQueryWorkItems(NULL), 0);
    IoDeleteDevice(dev);
    CHECK(test_driver.DeviceObject == NULL);
}

struct blocker {
    KEVENT started, go;
};

static VOID block_routine(PDEVICE_OBJECT DeviceObject, PVOID Context)
{
    struct blocker *b = Context;
    (void)DeviceObject;
    KeSetEvent(&b->started, 0, FALSE);
    KeWaitForSingleObject(&b->go, Executive, KernelMode, FALSE, NULL);
}

static VOID nothing_routine(PDEVICE_OBJECT DeviceObject, PVOID Context)
{
    (void)DeviceObject;
    (*(int *)Context)++;
}

/* With one worker busy, a second item stays queued: queue it twice, or free it. */
static void queued_misuse(void *arg)
{
    setenv("SOFTNDK_WDK_WORKERS", "1", 1);
    PDEVICE_OBJECT dev = make_device();
    static struct blocker b;
    static int count;
    KeInitializeEvent(&b.started, NotificationEvent, FALSE);
    KeInitializeEvent(&b.go, NotificationEvent, FALSE);
    PIO_WORKITEM first = IoAllocateWorkItem(dev), second = IoAllocateWorkItem(dev);
    IoQueueWorkItem(first, block_routine, DelayedWorkQueue, &b);
    KeWaitForSingleObject(&b.started, Executive, KernelMode, FALSE, NULL);
    IoQueueWorkItem(second, nothing_routine, DelayedWorkQueue, &count);
    if (arg)
        IoQueueWorkItem(second, nothing_routine, DelayedWorkQueue, &count);
    else
        IoFreeWorkItem(second);
}

TEST(wdk_work_item_misuse_bugchecks)
{
    CHECK(wdk_bugchecks(queued_misuse, (void *)1, "already queued"));
    CHECK(wdk_bugchecks(queued_misuse, NULL, "while the item is queued"));
}

TEST(wdk_device_outlives_its_queued_work)
{
    /* IoDeleteDevice with an item still queued: the device stays valid until it ran. */
    setenv("SOFTNDK_WDK_WORKERS", "1", 1);
    PDEVICE_OBJECT dev = make_device();
    struct blocker b;
    struct work w = {.runs = 2};
    KeInitializeEvent(&b.started, NotificationEvent, FALSE);
    KeInitializeEvent(&b.go, NotificationEvent, FALSE);
    KeInitializeEvent(&w.done, NotificationEvent, FALSE);
    PIO_WORKITEM first = IoAllocateWorkItem(dev);
    w.item = IoAllocateWorkItem(dev);
    IoQueueWorkItem(first, block_routine, DelayedWorkQueue, &b);
    KeWaitForSingleObject(&b.started, Executive, KernelMode, FALSE, NULL);
    IoQueueWorkItem(w.item, work_routine, DelayedWorkQueue, &w);
    IoDeleteDevice(dev);
    KeSetEvent(&b.go, 0, FALSE);
    KeWaitForSingleObject(&w.done, Executive, KernelMode, FALSE, NULL);
    CHECK(w.seen == dev);
    CHECK(SoftNdkWdkWaitForWorkItems(5000));
    IoFreeWorkItem(first);
    IoFreeWorkItem(w.item);
}

TEST(wdk_mdl_nonpaged_and_locked)
{
    unsigned char *buf = ExAllocatePool2(POOL_FLAG_NON_PAGED, 3 * PAGE_SIZE, TAG_TEST1);
    PMDL mdl = IoAllocateMdl(buf + 100, 2 * PAGE_SIZE, FALSE, FALSE, NULL);
    CHECK(mdl != NULL);
    CHECK(MmGetMdlVirtualAddress(mdl) == buf + 100);
    CHECK_EQ_U64(MmGetMdlByteCount(mdl), 2 * PAGE_SIZE);
    CHECK_EQ_U64(MmGetMdlByteOffset(mdl), 100);
    CHECK(MmGetMdlBaseVa(mdl) == buf);
    CHECK_EQ_U64(ADDRESS_AND_SIZE_TO_SPAN_PAGES(buf + 100, 2 * PAGE_SIZE), 3);
    MmBuildMdlForNonPagedPool(mdl);
    CHECK(mdl->MdlFlags & MDL_SOURCE_IS_NONPAGED_POOL);
    CHECK(MmGetSystemAddressForMdlSafe(mdl, NormalPagePriority) == buf + 100);
    IoFreeMdl(mdl);

    mdl = IoAllocateMdl(buf, PAGE_SIZE, FALSE, FALSE, NULL);
    MmProbeAndLockPages(mdl, KernelMode, IoWriteAccess);
    CHECK(mdl->MdlFlags & MDL_PAGES_LOCKED);
    CHECK(MmGetSystemAddressForMdlSafe(mdl, NormalPagePriority | MdlMappingNoExecute) == buf);
    CHECK(mdl->MdlFlags & MDL_MAPPED_TO_SYSTEM_VA);
    MmUnlockPages(mdl);
    CHECK(!(mdl->MdlFlags & MDL_PAGES_LOCKED));
    IoFreeMdl(mdl);
    ExFreePoolWithTag(buf, TAG_TEST1);
}

static void mdl_free_locked(void *arg)
{
    (void)arg;
    static char buf[64];
    PMDL mdl = IoAllocateMdl(buf, sizeof buf, FALSE, FALSE, NULL);
    MmProbeAndLockPages(mdl, KernelMode, IoReadAccess);
    IoFreeMdl(mdl);
}

static void mdl_unlocked_address(void *arg)
{
    (void)arg;
    static char buf[64];
    PMDL mdl = IoAllocateMdl(buf, sizeof buf, FALSE, FALSE, NULL);
    MmGetSystemAddressForMdlSafe(mdl, NormalPagePriority);
}

static void mdl_unlock_twice(void *arg)
{
    (void)arg;
    static char buf[64];
    PMDL mdl = IoAllocateMdl(buf, sizeof buf, FALSE, FALSE, NULL);
    MmProbeAndLockPages(mdl, KernelMode, IoReadAccess);
    MmUnlockPages(mdl);
    MmUnlockPages(mdl);
}

/* An MDL built by hand that claims more than an MDL can describe: the probe bugchecks rather
 * than walk its pages (a 32-bit walk past 4 GB - PAGE_SIZE wrapped and never ended). */
static void mdl_oversized_probe(void *arg)
{
    (void)arg;
    static char buf[64];
    MDL mdl;
    MmInitializeMdl(&mdl, buf, 0xfffff800u);
    MmProbeAndLockPages(&mdl, KernelMode, IoReadAccess);
}

TEST(wdk_mdl_size_limit)
{
    static char buf[64];
    /* 4 GB - PAGE_SIZE is the most IoAllocateMdl describes; beyond, it returns NULL */
    PMDL mdl = IoAllocateMdl(buf, 0xffffffffu - PAGE_SIZE + 1u, FALSE, FALSE, NULL);
    CHECK(mdl != NULL);
    IoFreeMdl(mdl);
    CHECK(IoAllocateMdl(buf, 0xffffffffu - PAGE_SIZE + 2u, FALSE, FALSE, NULL) == NULL);
    CHECK(IoAllocateMdl(buf, 0xffffffffu, FALSE, FALSE, NULL) == NULL);
    CHECK(wdk_bugchecks(mdl_oversized_probe, NULL, "more than an MDL describes"));
}

TEST(wdk_mdl_contract_bugchecks)
{
    CHECK(wdk_bugchecks(mdl_free_locked, NULL, "still locked"));
    CHECK(wdk_bugchecks(mdl_unlocked_address, NULL, "neither locked nor non-paged"));
    CHECK(wdk_bugchecks(mdl_unlock_twice, NULL, "not locked"));
}

/* ---- the runner, with drivers defined here ---- */
static PVOID leaked;

static VOID clean_unload(PDRIVER_OBJECT DriverObject)
{
    if (DriverObject->DeviceObject)
        IoDeleteDevice(DriverObject->DeviceObject);
}

static NTSTATUS clean_entry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    PDEVICE_OBJECT dev;
    DECLARE_CONST_UNICODE_STRING(want, L"\\Registry\\Machine\\System\\CurrentControlSet\\Services\\clean");
    DECLARE_CONST_UNICODE_STRING(name, L"\\Driver\\clean");
    if (!RtlEqualUnicodeString(RegistryPath, &want, FALSE) ||
        !RtlEqualUnicodeString(&DriverObject->DriverName, &name, FALSE) ||
        KeGetCurrentIrql() != PASSIVE_LEVEL)
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = IoCreateDevice(DriverObject, 0, NULL, FILE_DEVICE_UNKNOWN, 0, FALSE, &dev);
    DriverObject->DriverUnload = clean_unload;
    return st;
}

static NTSTATUS leaky_entry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    (void)RegistryPath;
    PDEVICE_OBJECT dev;
    leaked = ExAllocatePool2(POOL_FLAG_NON_PAGED, 40, TAG_TEST2);
    IoCreateDevice(DriverObject, 0, NULL, FILE_DEVICE_UNKNOWN, 0, FALSE, &dev);
    DriverObject->DriverUnload = clean_unload;
    DriverObject->DeviceObject = NULL; /* "forget" it: reported as a pool leak ('Devo') */
    return STATUS_SUCCESS;
}

static NTSTATUS failing_entry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    (void)DriverObject, (void)RegistryPath;
    return STATUS_INSUFFICIENT_RESOURCES;
}

static NTSTATUS no_unload_entry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    (void)DriverObject, (void)RegistryPath;
    return STATUS_SUCCESS;
}

static int run(PDRIVER_INITIALIZE entry, const char *name, char *err, size_t cap)
{
    SOFTNDK_WDK_RUN r = {sizeof r, name, NULL, 30, FALSE};
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    int rc = SoftNdkWdkRunDriver(entry, &r);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    ssize_t n = read(p[0], err, cap - 1);
    err[n > 0 ? n : 0] = 0;
    close(p[0]);
    return rc;
}

TEST(wdk_runner_reports_status_and_leaks)
{
    char err[4096];
    CHECK_EQ_I64(run(clean_entry, "clean", err, sizeof err), 0);
    CHECK_MSG(strstr(err, "no leaks"), "%s", err);
    CHECK_EQ_I64(run(leaky_entry, "leaky", err, sizeof err), 1);
    CHECK_MSG(strstr(err, "leak: pool tag 'Tst2' (0x32747354): 1 allocation(s), 40 bytes"),
              "%s", err);
    CHECK_MSG(strstr(err, "leak: pool tag 'Devo'"), "%s", err);
    CHECK_EQ_I64(run(failing_entry, "failing", err, sizeof err), 1);
    CHECK_MSG(strstr(err, "STATUS_INSUFFICIENT_RESOURCES"), "%s", err);
    CHECK_EQ_I64(run(no_unload_entry, "sticky", err, sizeof err), 2);
    CHECK_MSG(strstr(err, "no DriverUnload"), "%s", err);
    ExFreePoolWithTag(leaked, TAG_TEST2);
}

/* ---- IRPs ----------------------------------------------------------------------------------- */
struct irp_seen {
    int calls;
    NTSTATUS status;
    PDEVICE_OBJECT dev;
    BOOLEAN pending;
    NTSTATUS answer;
};

static NTSTATUS irp_done(PDEVICE_OBJECT DeviceObject, PIRP Irp, PVOID Context)
{
    struct irp_seen *s = Context;
    s->calls++;
    s->status = Irp->IoStatus.Status;
    s->dev = DeviceObject;
    s->pending = Irp->PendingReturned;
    return s->answer;
}

static PIRP pending_irp;

static NTSTATUS dispatch_pend(PDEVICE_OBJECT DeviceObject, PIRP Irp)
{
    (void)DeviceObject;
    PIO_STACK_LOCATION sl = IoGetCurrentIrpStackLocation(Irp);
    if (sl->Parameters.DeviceIoControl.IoControlCode != 0x220004)
        return STATUS_INVALID_PARAMETER;
    IoMarkIrpPending(Irp);
    pending_irp = Irp;
    return STATUS_PENDING;
}

TEST(wdk_irp_allocate_call_complete_free)
{
    ULONG64 since = SoftNdkWdkPoolSequence();
    DRIVER_OBJECT drv;
    memset(&drv, 0, sizeof drv);
    drv.MajorFunction[IRP_MJ_INTERNAL_DEVICE_CONTROL] = dispatch_pend;
    PDEVICE_OBJECT dev = NULL;
    CHECK_EQ_I64(IoCreateDevice(&drv, 0, NULL, FILE_DEVICE_UNKNOWN, 0, FALSE, &dev),
                 STATUS_SUCCESS);

    /* A driver's own IRP, sent to a device: the dispatch routine pends it, a later
     * IoCompleteRequest runs the sender's completion routine, which keeps the IRP. */
    PIRP irp = IoAllocateIrp(2, FALSE);
    CHECK(irp != NULL);
    CHECK_EQ_U64(irp->StackCount, 2);
    struct irp_seen seen = {0, 0, NULL, FALSE, STATUS_MORE_PROCESSING_REQUIRED};
    PIO_STACK_LOCATION next = IoGetNextIrpStackLocation(irp);
    next->MajorFunction = IRP_MJ_INTERNAL_DEVICE_CONTROL;
    next->Parameters.DeviceIoControl.IoControlCode = 0x220004;
    IoSetCompletionRoutine(irp, irp_done, &seen, TRUE, TRUE, TRUE);
    CHECK_EQ_I64(IoCallDriver(dev, irp), STATUS_PENDING);
    CHECK(pending_irp == irp);
    CHECK_EQ_U64(seen.calls, 0);
    irp->IoStatus.Status = STATUS_SUCCESS;
    irp->IoStatus.Information = 7;
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    CHECK_EQ_U64(seen.calls, 1);
    CHECK_EQ_I64(seen.status, STATUS_SUCCESS);
    CHECK(seen.pending);
    CHECK(seen.dev == NULL); /* the sender has no location of its own above */
    /* Reused: an error completion, only the routine that asked for errors runs. */
    IoReuseIrp(irp, STATUS_SUCCESS);
    seen.calls = 0;
    seen.answer = STATUS_CONTINUE_COMPLETION;
    IoSetCompletionRoutine(irp, irp_done, &seen, TRUE, FALSE, FALSE);
    IO_STATUS_BLOCK iosb = {{0}, 0};
    KEVENT done;
    KeInitializeEvent(&done, NotificationEvent, FALSE);
    irp->UserIosb = &iosb;
    irp->UserEvent = &done;
    IoSetNextIrpStackLocation(irp); /* as the lower layer that owns it */
    irp->IoStatus.Status = STATUS_CANCELLED;
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    CHECK_EQ_U64(seen.calls, 0);
    CHECK_EQ_I64(iosb.Status, STATUS_CANCELLED);
    CHECK(KeReadStateEvent(&done) != 0);
    IoFreeIrp(irp);

    /* A device whose driver has no routine for the major function completes it at once. */
    irp = IoAllocateIrp(1, FALSE);
    IoGetNextIrpStackLocation(irp)->MajorFunction = IRP_MJ_READ;
    CHECK_EQ_I64(IoCallDriver(dev, irp), STATUS_INVALID_DEVICE_REQUEST);
    CHECK_EQ_I64(irp->IoStatus.Status, STATUS_INVALID_DEVICE_REQUEST);
    /* an MDL can hang off the IRP */
    char buf[64];
    PMDL mdl = IoAllocateMdl(buf, sizeof buf, FALSE, FALSE, irp);
    CHECK(mdl && irp->MdlAddress == mdl);
    IoFreeMdl(mdl);
    IoFreeIrp(irp);
    IoDeleteDevice(dev);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0);
}

static void irp_completed_twice(void *arg)
{
    (void)arg;
    PIRP irp = IoAllocateIrp(1, FALSE);
    IoSetNextIrpStackLocation(irp);
    irp->IoStatus.Status = STATUS_SUCCESS;
    IoCompleteRequest(irp, IO_NO_INCREMENT);
    IoCompleteRequest(irp, IO_NO_INCREMENT);
}

static void irp_freed_twice(void *arg)
{
    (void)arg;
    PIRP irp = IoAllocateIrp(1, FALSE);
    IoFreeIrp(irp);
    IoFreeIrp(irp);
}

TEST(wdk_irp_misuse_bugchecks)
{
    CHECK(wdk_bugchecks(irp_completed_twice, NULL, "MULTIPLE_IRP_COMPLETE_REQUESTS"));
    CHECK(wdk_bugchecks(irp_freed_twice, NULL, NULL));
}
