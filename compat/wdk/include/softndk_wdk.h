/*
 * softndk_wdk.h — the harness's own interface (not Windows'): what the DriverEntry runner and
 * tests use to drive a driver and to find what it leaked. Every name starts with SoftNdkWdk.
 * libsoftndk-wdk exports these plus the Windows names of the other headers (docs/wdk.md).
 */
#ifndef SOFTNDK_WDK_SOFTNDK_WDK_H
#define SOFTNDK_WDK_SOFTNDK_WDK_H

#include "wdm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make the calling thread a driver thread: it runs at PASSIVE_LEVEL (see wdm.h, IRQL model).
 * The thread that loaded the library, the runner and the work-item threads already are. */
SOFTNDK_WDK_API VOID SoftNdkWdkEnterDriverThread(VOID);

/* Pool: live allocations made at or after sequence number Since (0 = all), grouped by tag.
 * Fills up to MaxTags entries (Tags may be NULL with MaxTags 0) and returns how many tags have
 * live allocations. SoftNdkWdkPoolSequence() is the sequence number the next allocation gets. */
typedef struct _SOFTNDK_WDK_POOL_TAG {
    ULONG Tag;           /* as passed; printed in memory byte order, as poolmon shows tags */
    ULONG Allocations;   /* live allocations with this tag */
    SIZE_T Bytes;        /* their requested sizes */
    PVOID FirstCaller;   /* return address of the oldest live allocation's caller */
} SOFTNDK_WDK_POOL_TAG;
SOFTNDK_WDK_API ULONG64 SoftNdkWdkPoolSequence(VOID);
SOFTNDK_WDK_API ULONG SoftNdkWdkQueryPool(ULONG64 Since, SOFTNDK_WDK_POOL_TAG *Tags, ULONG MaxTags);
/* The tag in memory byte order, as poolmon prints it (the tag 'kdnS' prints as "Sndk"):
 * Buffer gets 4 characters and a NUL. */
SOFTNDK_WDK_API VOID SoftNdkWdkFormatTag(ULONG Tag, char Buffer[5]);

/* Freed pool (docs/wdk.md, "Pool"): freed blocks are filled with SOFTNDK_WDK_POOL_FREED_FILL
 * and kept in a FIFO quarantine bounded by SOFTNDK_WDK_POOL_QUARANTINE bytes (default 32 MiB);
 * a block leaving it is checked, and a write after free bugchecks
 * (SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION) naming the tag, the allocating and the freeing
 * caller. SoftNdkWdkCheckFreedPool checks every quarantined block now (and with Release frees
 * them too); it returns how many it checked. SoftNdkWdkQueryFreedPool tells whether Address
 * lies in a quarantined block, and which. */
#define SOFTNDK_WDK_POOL_FREED_FILL 0xFD
typedef struct _SOFTNDK_WDK_FREED_POOL {
    PVOID Block; /* the caller's address of the freed block */
    ULONG Tag;
    SIZE_T Bytes;
    PVOID AllocatedBy; /* return addresses */
    PVOID FreedBy;
} SOFTNDK_WDK_FREED_POOL;
SOFTNDK_WDK_API ULONG SoftNdkWdkCheckFreedPool(BOOLEAN Release);
SOFTNDK_WDK_API BOOLEAN SoftNdkWdkQueryFreedPool(const VOID *Address, SOFTNDK_WDK_FREED_POOL *Info);

/* NDK adapters opened through WskOpenNdkAdapter and not yet closed; fills up to Max. */
SOFTNDK_WDK_API ULONG SoftNdkWdkQueryOpenAdapters(NDK_ADAPTER **Adapters, ULONG Max);
/* WSK registrations not deregistered. */
SOFTNDK_WDK_API ULONG SoftNdkWdkQueryWskRegistrations(VOID);
/* Work items allocated (IoAllocateWorkItem) and not freed; queued or running now. */
SOFTNDK_WDK_API ULONG SoftNdkWdkQueryWorkItems(ULONG *Queued);
/* Wait until no work item is queued or running; FALSE on timeout. */
SOFTNDK_WDK_API BOOLEAN SoftNdkWdkWaitForWorkItems(ULONG TimeoutMs);

/* Run a driver as the Windows loader and unloader would: build a DRIVER_OBJECT and the
 * registry path, call DriverEntry, then (if it succeeded) DriverUnload, wait for its work
 * items, and report to stderr: the status, pool tags still allocated (count, bytes, first
 * caller), NDK adapters still open, device objects not deleted, WSK registrations not
 * deregistered, work items not freed. Returns the process exit code: 0 = DriverEntry
 * succeeded, the driver unloaded and nothing leaked; 1 = DriverEntry failed or something
 * leaked; 2 = usage (no DriverUnload to call). */
typedef struct _SOFTNDK_WDK_RUN {
    ULONG Size;               /* sizeof(SOFTNDK_WDK_RUN) */
    const char *DriverName;   /* "\Driver\<name>" and the default service key; NULL = "driver" */
    const char *RegistryPath; /* NULL = \Registry\Machine\System\CurrentControlSet\Services\<name> */
    ULONG TimeoutSeconds;     /* 0 = none: after this the run is abandoned as hung (exit 1) */
    BOOLEAN Quiet;            /* only problems and the final line */
} SOFTNDK_WDK_RUN;
SOFTNDK_WDK_API int SoftNdkWdkRunDriver(PDRIVER_INITIALIZE DriverInit, const SOFTNDK_WDK_RUN *Run);

/* Bugcheck reports (docs/wdk.md, "Bugcheck reports"): from now on every fatal signal (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGABRT) and every harness bugcheck writes a report to stderr — the
 * Windows bugcheck code and name, the address and access, its classification (NULL page, freed
 * pool block with its allocating and freeing stacks, past the end of a block, stack guard,
 * unmapped), the IRQL, what the thread was doing, a symbolized stack — and, when ReportPath is
 * not NULL, to ReportPath (text) and ReportPath.json. Then the previous handler of the signal
 * runs (a sanitizer's report follows ours) or, if there was none, the process exits with the
 * class's status below. SoftNdkWdkRunDriver installs it (without a file) if not done before. */
#define SOFTNDK_WDK_EXIT_BUGCHECK            3  /* KeBugCheckEx, a harness check */
#define SOFTNDK_WDK_EXIT_ASSERTION           4  /* a failed NT_ASSERT / ASSERT */
#define SOFTNDK_WDK_EXIT_NULL_POINTER        5  /* an access in the NULL page */
#define SOFTNDK_WDK_EXIT_FREED_POOL          6  /* freed pool, or a pointer read from it */
#define SOFTNDK_WDK_EXIT_POOL_OVERRUN        7  /* past the end (or before the start) of a block */
#define SOFTNDK_WDK_EXIT_STACK_OVERFLOW      8
#define SOFTNDK_WDK_EXIT_BAD_ADDRESS         9  /* unmapped, protected or non-canonical */
#define SOFTNDK_WDK_EXIT_ILLEGAL_INSTRUCTION 10
#define SOFTNDK_WDK_EXIT_ARITHMETIC          11 /* division by zero */
#define SOFTNDK_WDK_EXIT_ABORT               12 /* abort() outside a bugcheck */
SOFTNDK_WDK_API VOID SoftNdkWdkInstallCrashReport(PCSTR ReportPath);

/* Special pool (docs/wdk.md, "Special pool"), as Driver Verifier's: each allocation with one of
 * the chosen tags ("Tag1,Tag2", as written in memory order, e.g. "Rdma"; "all": every tag; NULL
 * or "": none) gets its own pages, ending at a no-access guard page, and its pages are no-access
 * while it sits in the quarantine after its free: a read or write past its end or after its free
 * faults at the instruction. Call before the driver allocates. STATUS_INVALID_PARAMETER for a
 * tag that is not four characters. */
SOFTNDK_WDK_API NTSTATUS SoftNdkWdkSetSpecialPool(PCSTR Tags);

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_SOFTNDK_WDK_H */
