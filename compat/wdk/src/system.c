/* The I/O error log (IoAllocateErrorLogEntry / IoWriteErrorLogEntry) and the NUMA and processor
 * number routines (KeGetCurrentNodeNumber, KeQueryNodeActiveAffinity, ...): docs/wdk.md. */
#include "wdk_internal.h"

#include <ndk/softndk.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Error log. An entry is a pool block of the tag 'ELog' (one never written nor freed is a leak
 * the runner names); its size is kept in a header in front of the packet, so that the packet's
 * own offsets and counts are checked against it. */
struct errlog_entry {
    PVOID io_object;
    size_t size;
    IO_ERROR_LOG_PACKET packet; /* EntrySize bytes from here */
};

PVOID IoAllocateErrorLogEntry(PVOID IoObject, UCHAR EntrySize)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoAllocateErrorLogEntry");
    if (!IoObject || EntrySize < offsetof(IO_ERROR_LOG_PACKET, DumpData) ||
        EntrySize > ERROR_LOG_MAXIMUM_SIZE)
        return NULL;
    size_t total = offsetof(struct errlog_entry, packet) + EntrySize;
    if (total < sizeof(struct errlog_entry))
        total = sizeof(struct errlog_entry);
    struct errlog_entry *e =
        wdk_pool_alloc(POOL_FLAG_NON_PAGED, total, WDK_TAG_ERRLOG, __builtin_return_address(0));
    if (!e)
        return NULL;
    memset(e, 0, total);
    e->io_object = IoObject;
    e->size = EntrySize;
    return &e->packet;
}

static struct errlog_entry *errlog_of(PVOID ElEntry)
{
    return (struct errlog_entry *)(void *)((char *)ElEntry - offsetof(struct errlog_entry, packet));
}

VOID IoFreeErrorLogEntry(PVOID ElEntry)
{
    if (ElEntry)
        wdk_pool_free(errlog_of(ElEntry), WDK_TAG_ERRLOG, true, __builtin_return_address(0));
}

static void errlog_name(PVOID io_object, char *out, size_t cap)
{
    const CSHORT type = *(const CSHORT *)io_object;
    const UNICODE_STRING *name = NULL;
    if (type == 4) /* IO_TYPE_DRIVER */
        name = &((const DRIVER_OBJECT *)io_object)->DriverName;
    else if (type == 3) /* IO_TYPE_DEVICE: its driver's name */
        name = ((const DEVICE_OBJECT *)io_object)->DriverObject
                   ? &((const DEVICE_OBJECT *)io_object)->DriverObject->DriverName
                   : NULL;
    size_t k = 0;
    if (name && name->Buffer)
        for (size_t i = 0; i < name->Length / sizeof(WCHAR) && k + 1 < cap; i++)
            out[k++] = name->Buffer[i] < 0x80 ? (char)name->Buffer[i] : '?';
    if (k == 0)
        k = (size_t)snprintf(out, cap, "object %p", io_object);
    out[k < cap ? k : cap - 1] = 0;
}

static void errlog_put(char *line, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void errlog_put(char *line, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

VOID IoWriteErrorLogEntry(PVOID ElEntry)
{
    wdk_require_irql_max(DISPATCH_LEVEL, "IoWriteErrorLogEntry");
    if (!ElEntry)
        KeBugCheckEx(DRIVER_VERIFIER_DETECTED_VIOLATION, 0x2000, 0, 0, 0);
    struct errlog_entry *e = errlog_of(ElEntry);
    const IO_ERROR_LOG_PACKET *p = &e->packet;
    const char *base = (const char *)p;
    char line[2048], who[128];
    size_t len = 0;
    errlog_name(e->io_object, who, sizeof who);
    const char *name = SoftNdkStatusName(p->ErrorCode);
    errlog_put(line, sizeof line, &len,
               "wdkrun: event log: %s: error 0x%08X%s%s%s, unique value 0x%X, final status 0x%08X, "
               "major function %u, retry %u, sequence %u, category %u",
               who, (unsigned)p->ErrorCode, name ? " (" : "", name ? name : "", name ? ")" : "",
               (unsigned)p->UniqueErrorValue, (unsigned)p->FinalStatus, p->MajorFunctionCode,
               p->RetryCount, (unsigned)p->SequenceNumber, p->EventCategory);
    /* insertion strings: NUL-terminated WCHAR strings from StringOffset, all inside the entry */
    if (p->NumberOfStrings > 0) {
        if (p->StringOffset < offsetof(IO_ERROR_LOG_PACKET, DumpData) ||
            p->StringOffset >= e->size || p->StringOffset % sizeof(WCHAR) != 0) {
            errlog_put(line, sizeof line, &len,
                       ", %u string(s) at offset %u: outside the %zu-byte entry",
                       p->NumberOfStrings, p->StringOffset, e->size);
        } else {
            size_t at = p->StringOffset;
            for (unsigned s = 0; s < p->NumberOfStrings; s++) {
                errlog_put(line, sizeof line, &len, s == 0 ? ", strings: \"" : ", \"");
                bool ended = false;
                while (at + sizeof(WCHAR) <= e->size) {
                    WCHAR c;
                    memcpy(&c, base + at, sizeof c);
                    at += sizeof c;
                    if (c == 0) {
                        ended = true;
                        break;
                    }
                    errlog_put(line, sizeof line, &len, "%c",
                               c >= 0x20 && c < 0x7F ? (char)c : '?');
                }
                errlog_put(line, sizeof line, &len,
                           ended ? "\"" : "\" (unterminated: the entry ends)");
                if (!ended)
                    break;
            }
        }
    }
    if (p->DumpDataSize > 0) {
        size_t avail = e->size - offsetof(IO_ERROR_LOG_PACKET, DumpData);
        size_t n = p->DumpDataSize <= avail ? p->DumpDataSize : avail;
        errlog_put(line, sizeof line, &len, ", dump data (%u bytes%s):", p->DumpDataSize,
                   n < p->DumpDataSize ? ", past the entry's end: cut" : "");
        for (size_t i = 0; i + sizeof(ULONG) <= n; i += sizeof(ULONG)) {
            ULONG v;
            memcpy(&v, base + offsetof(IO_ERROR_LOG_PACKET, DumpData) + i, sizeof v);
            errlog_put(line, sizeof line, &len, " 0x%08X", (unsigned)v);
        }
    }
    errlog_put(line, sizeof line, &len, "\n");
    fputs(line, stderr);
    wdk_pool_free(e, WDK_TAG_ERRLOG, true, __builtin_return_address(0));
}

/* ------------------------------------------------------------------------------------------ */
/* NUMA: the nodes of /sys/devices/system/node and their cpulists, read once. */
#define WDK_MAX_NODES 64
static struct {
    pthread_once_t once;
    USHORT nodes;                  /* highest node number + 1 */
    KAFFINITY mask[WDK_MAX_NODES]; /* processors of each node (group 0) */
    ULONG cpus;                    /* processors online */
} numa = {PTHREAD_ONCE_INIT, 0, {0}, 0};

static KAFFINITY parse_cpulist(const char *s)
{
    KAFFINITY m = 0;
    while (*s && *s != '\n') {
        char *end;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (end == s)
            break;
        if (*end == '-')
            b = strtoul(end + 1, &end, 10);
        for (unsigned long c = a; c <= b && c < 64; c++)
            m |= (KAFFINITY)1 << c;
        s = *end == ',' ? end + 1 : end;
    }
    return m;
}

static void numa_init(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    numa.cpus = n > 0 ? (ULONG)(n > 64 ? 64 : n) : 1;
    for (unsigned node = 0; node < WDK_MAX_NODES; node++) {
        char path[96], buf[512];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%u/cpulist", node);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof buf, f)) {
            numa.mask[node] = parse_cpulist(buf);
            numa.nodes = (USHORT)(node + 1);
        }
        fclose(f);
    }
    if (numa.nodes == 0) { /* no NUMA information: one node with every processor */
        numa.nodes = 1;
        numa.mask[0] = numa.cpus >= 64 ? ~(KAFFINITY)0 : (((KAFFINITY)1 << numa.cpus) - 1);
    }
}

static void numa_ready(void)
{
    pthread_once(&numa.once, numa_init);
}

USHORT KeQueryHighestNodeNumber(VOID)
{
    numa_ready();
    return (USHORT)(numa.nodes - 1);
}

USHORT KeGetCurrentNodeNumber(VOID)
{
    numa_ready();
    int cpu = sched_getcpu();
    if (cpu >= 0 && cpu < 64)
        for (USHORT node = 0; node < numa.nodes; node++)
            if (numa.mask[node] & ((KAFFINITY)1 << cpu))
                return node;
    return 0;
}

VOID KeQueryNodeActiveAffinity(USHORT NodeNumber, PGROUP_AFFINITY Affinity, PUSHORT Count)
{
    numa_ready();
    KAFFINITY m = NodeNumber < numa.nodes ? numa.mask[NodeNumber] : 0;
    if (Affinity) {
        memset(Affinity, 0, sizeof *Affinity);
        Affinity->Mask = m;
        Affinity->Group = 0;
    }
    if (Count)
        *Count = (USHORT)__builtin_popcountll(m);
}

NTSTATUS KeQueryNodeActiveAffinity2(USHORT NodeNumber, PGROUP_AFFINITY GroupAffinities,
                                    USHORT GroupAffinitiesCount, PUSHORT GroupAffinitiesRequired)
{
    numa_ready();
    if (NodeNumber >= numa.nodes || !GroupAffinitiesRequired)
        return STATUS_INVALID_PARAMETER;
    *GroupAffinitiesRequired = numa.mask[NodeNumber] ? 1 : 0;
    if (*GroupAffinitiesRequired == 0)
        return STATUS_SUCCESS;
    if (GroupAffinitiesCount < 1 || !GroupAffinities)
        return STATUS_BUFFER_TOO_SMALL;
    KeQueryNodeActiveAffinity(NodeNumber, GroupAffinities, NULL);
    return STATUS_SUCCESS;
}

ULONG KeQueryNodeMaximumProcessorCount(USHORT NodeNumber)
{
    numa_ready();
    return NodeNumber < numa.nodes ? (ULONG)__builtin_popcountll(numa.mask[NodeNumber]) : 0;
}

ULONG KeQueryMaximumProcessorCountEx(USHORT GroupNumber)
{
    return KeQueryActiveProcessorCountEx(GroupNumber);
}

NTSTATUS KeGetProcessorNumberFromIndex(ULONG ProcIndex, PPROCESSOR_NUMBER ProcNumber)
{
    if (!ProcNumber || ProcIndex >= KeQueryActiveProcessorCountEx(ALL_PROCESSOR_GROUPS))
        return STATUS_INVALID_PARAMETER;
    memset(ProcNumber, 0, sizeof *ProcNumber);
    ProcNumber->Group = 0;
    ProcNumber->Number = (UCHAR)ProcIndex;
    return STATUS_SUCCESS;
}

ULONG KeGetProcessorIndexFromNumber(PPROCESSOR_NUMBER ProcNumber)
{
    if (!ProcNumber || ProcNumber->Group != 0 ||
        ProcNumber->Number >= KeQueryActiveProcessorCountEx(ALL_PROCESSOR_GROUPS))
        return INVALID_PROCESSOR_INDEX;
    return ProcNumber->Number;
}
