/* The DriverEntry runner: load order, unload and the leak report. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "wdk_internal.h"

#include <dlfcn.h>
#include <ndk/softndk.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static bool quiet;

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    if (quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("wdkrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("wdkrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* UTF-8 (ASCII in practice) to a pool-free WCHAR string the runner owns. */
static void make_unicode(UNICODE_STRING *us, const char *s)
{
    size_t n = strlen(s);
    WCHAR *w = calloc(n + 1, sizeof(WCHAR));
    if (!w) {
        problem("out of memory");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        w[i] = (WCHAR)(unsigned char)s[i];
    us->Buffer = w;
    us->Length = (USHORT)(n * sizeof(WCHAR));
    us->MaximumLength = (USHORT)((n + 1) * sizeof(WCHAR));
}

static const char *symbol_of(void *addr, char *buf, size_t len)
{
    Dl_info info;
    if (addr && dladdr(addr, &info) && info.dli_sname)
        snprintf(buf, len, "%s+0x%lx", info.dli_sname,
                 (unsigned long)((char *)addr - (char *)info.dli_saddr));
    else if (addr && dladdr(addr, &info) && info.dli_fname)
        snprintf(buf, len, "%s+0x%lx", info.dli_fname,
                 (unsigned long)((char *)addr - (char *)info.dli_fbase));
    else
        snprintf(buf, len, "%p", addr);
    return buf;
}

/* Watchdog: a hung DriverEntry or DriverUnload is reported, not waited for forever. */
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;
static bool wd_done;
static const char *wd_phase = "DriverEntry";
static unsigned wd_seconds;

static void *watchdog(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += wd_seconds;
    pthread_mutex_lock(&wd_lock);
    int rc = 0;
    while (!wd_done && rc == 0)
        rc = pthread_cond_timedwait(&wd_cond, &wd_lock, &ts);
    if (!wd_done) {
        problem("FAIL: %s did not return within %u s", wd_phase, wd_seconds);
        fflush(stderr);
        _exit(1);
    }
    pthread_mutex_unlock(&wd_lock);
    return NULL;
}

/* Drivers that could not be unloaded, or left something behind: still referenced (wd_lock). */
struct kept_driver {
    DRIVER_OBJECT *drv;
    struct kept_driver *next;
};
static struct kept_driver *kept_drivers;

static void set_phase(const char *phase)
{
    pthread_mutex_lock(&wd_lock);
    wd_phase = phase;
    pthread_mutex_unlock(&wd_lock);
}

int SoftNdkWdkRunDriver(PDRIVER_INITIALIZE DriverInit, const SOFTNDK_WDK_RUN *Run)
{
    SOFTNDK_WDK_RUN opts = {sizeof opts, NULL, NULL, 0, FALSE};
    if (Run) {
        if (Run->Size != sizeof opts) {
            problem("SOFTNDK_WDK_RUN.Size %u is not %zu", Run->Size, sizeof opts);
            return 2;
        }
        opts = *Run;
    }
    quiet = opts.Quiet;
    const char *name = opts.DriverName ? opts.DriverName : "driver";
    if (!DriverInit) {
        problem("no DriverEntry");
        return 2;
    }
    SoftNdkWdkEnterDriverThread();
    SoftNdkWdkInstallCrashReport(NULL); /* a bugcheck report on a fatal signal (crash.c) */

    /* The objects the I/O manager would build. */
    DRIVER_OBJECT *drv = calloc(1, sizeof *drv);
    DRIVER_EXTENSION *ext = calloc(1, sizeof *ext);
    if (!drv || !ext) {
        problem("out of memory");
        free(drv);
        free(ext);
        return 1;
    }

    pthread_t wd;
    bool have_wd = false;
    if (opts.TimeoutSeconds) {
        wd_seconds = opts.TimeoutSeconds;
        have_wd = pthread_create(&wd, NULL, watchdog, NULL) == 0;
    }
    char text[512];
    snprintf(text, sizeof text, "\\Driver\\%s", name);
    make_unicode(&drv->DriverName, text);
    if (opts.RegistryPath)
        snprintf(text, sizeof text, "%s", opts.RegistryPath);
    else
        snprintf(text, sizeof text, "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\%s",
                 name);
    UNICODE_STRING registry;
    make_unicode(&registry, text);
    make_unicode(&ext->ServiceKeyName, name);
    drv->Type = 4; /* IO_TYPE_DRIVER */
    drv->Size = (CSHORT)sizeof *drv;
    drv->DriverExtension = ext;
    ext->DriverObject = drv;
    drv->DriverInit = DriverInit;

    ULONG64 since = SoftNdkWdkPoolSequence();
    ULONG adapters_before = SoftNdkWdkQueryOpenAdapters(NULL, 0);
    ULONG regs_before = SoftNdkWdkQueryWskRegistrations();
    ULONG items_before = SoftNdkWdkQueryWorkItems(NULL);

    say("DriverEntry(\\Driver\\%s, %s)", name, text);
    struct wdk_context doing;
    wdk_context_enter(&doing, WDK_CTX_DRIVER_ENTRY, (const void *)DriverInit, drv);
    NTSTATUS st = DriverInit(drv, &registry);
    wdk_context_leave(&doing);
    /* The registry path is the driver's only during DriverEntry (a driver keeps a copy). */
    free(registry.Buffer);
    registry.Buffer = NULL;
    bool ok = NT_SUCCESS(st);
    say("DriverEntry returned %s (0x%08X)", SoftNdkStatusName(st), (unsigned)st);
    if (KeGetCurrentIrql() != PASSIVE_LEVEL) {
        problem("FAIL: DriverEntry returned at IRQL %u", KeGetCurrentIrql());
        ok = false;
    }
    int rc = 0;
    if (ok) {
        if (!drv->DriverUnload) {
            problem("FAIL: the driver set no DriverUnload, so it cannot be unloaded and checked");
            rc = 2;
        } else {
            set_phase("DriverUnload");
            say("DriverUnload");
            wdk_context_enter(&doing, WDK_CTX_DRIVER_UNLOAD, (const void *)drv->DriverUnload,
                              drv);
            drv->DriverUnload(drv);
            wdk_context_leave(&doing);
            if (KeGetCurrentIrql() != PASSIVE_LEVEL) {
                problem("FAIL: DriverUnload returned at IRQL %u", KeGetCurrentIrql());
                ok = false;
            }
        }
    } else {
        problem("FAIL: DriverEntry failed with %s (0x%08X); DriverUnload is not called",
                SoftNdkStatusName(st), (unsigned)st);
    }

    /* What Windows would refuse to unload, or leak. */
    unsigned leaks = 0;
    if (rc == 0) {
        set_phase("the driver's work items");
        if (!SoftNdkWdkWaitForWorkItems(30000)) {
            problem("leak: work items still queued or running 30 s after unload");
            leaks++;
        }
        /* Freed pool still in the quarantine: a write after free bugchecks here, naming the
         * block, its tag and where it was allocated and freed. */
        set_phase("the freed-pool check");
        SoftNdkWdkCheckFreedPool(FALSE);
        ULONG items = SoftNdkWdkQueryWorkItems(NULL) - items_before;
        if (items) {
            problem("leak: %u work item(s) not freed (IoFreeWorkItem)", items);
            leaks++;
        }
        for (PDEVICE_OBJECT d = drv->DeviceObject; d; d = d->NextDevice) {
            char n[128] = "";
            size_t k = 0;
            for (; k < d->SoftNdkName.Length / sizeof(WCHAR) && k < sizeof n - 1; k++)
                n[k] = (char)d->SoftNdkName.Buffer[k];
            n[k] = 0;
            problem("leak: device object %p %s not deleted (IoDeleteDevice)", (void *)d,
                    k ? n : "(unnamed)");
            leaks++;
        }
        NDK_ADAPTER *open[16];
        ULONG nopen = SoftNdkWdkQueryOpenAdapters(open, 16);
        if (nopen > adapters_before) {
            for (ULONG i = 0; i < nopen - adapters_before && i < 16; i++)
                problem("leak: NDK adapter %p still open (WskCloseNdkAdapter)", (void *)open[i]);
            leaks++;
        }
        ULONG regs = SoftNdkWdkQueryWskRegistrations();
        if (regs > regs_before) {
            problem("leak: %u WSK registration(s) not deregistered (WskDeregister)",
                    regs - regs_before);
            leaks++;
        }
        SOFTNDK_WDK_POOL_TAG tags[64];
        ULONG ntags = SoftNdkWdkQueryPool(since, tags, 64);
        for (ULONG i = 0; i < ntags && i < 64; i++) {
            char tag[5], sym[256];
            SoftNdkWdkFormatTag(tags[i].Tag, tag);
            problem("leak: pool tag '%s' (0x%08X): %u allocation(s), %zu bytes; oldest from %s",
                    tag, tags[i].Tag, tags[i].Allocations, (size_t)tags[i].Bytes,
                    symbol_of(tags[i].FirstCaller, sym, sizeof sym));
        }
        if (ntags)
            leaks++;
    }
    if (have_wd) {
        pthread_mutex_lock(&wd_lock);
        wd_done = true;
        pthread_cond_signal(&wd_cond);
        pthread_mutex_unlock(&wd_lock);
        pthread_join(wd, NULL);
    }
    if (rc == 0 && (!ok || leaks))
        rc = 1;
    if (rc == 0)
        say("driver %s loaded, ran and unloaded: no leaks", name);
    else if (leaks)
        problem("FAIL: %u kind(s) of leak after unload", leaks);
    /* The driver object is freed when nothing of the driver can still refer to it: unloaded (or
     * never loaded: DriverEntry failed) and nothing left behind. Otherwise it stays reachable
     * (kept_drivers), as a driver that cannot be unloaded stays in memory on Windows. */
    if (rc != 2 && leaks == 0 && !drv->DeviceObject) {
        free(drv->DriverName.Buffer);
        free(ext->ServiceKeyName.Buffer);
        free(ext);
        free(drv);
    } else {
        struct kept_driver *k = malloc(sizeof *k);
        if (k) {
            pthread_mutex_lock(&wd_lock);
            *k = (struct kept_driver){drv, kept_drivers};
            kept_drivers = k;
            pthread_mutex_unlock(&wd_lock);
        }
    }
    return rc;
}
