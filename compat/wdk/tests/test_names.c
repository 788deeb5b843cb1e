/* The name families a second driver needed (docs/wdk.md): old-style SAL, NTSTATUS codes,
 * WSK_BUF, the _Interlocked* intrinsics, the I/O error log, NUMA and processor numbers, Rtl
 * string conversions and GUIDs. */
#include "wdk_test.h"

#include "wsk.h"
#include "netioapi.h"

#include <fcntl.h>
#include <pthread.h>

/* Old-style SAL and the SAL 2 words of the second driver: they compile away. */
static __checkReturn __success(return == 0) int SalCopy(__out_ecount_part(Cap, *Len) WCHAR *Dest,
                                                        __in SIZE_T Cap, __out SIZE_T *Len,
                                                        __in __nullterminated const WCHAR *Src,
                                                        __notnull __maybenull PVOID Unused)
{
    UNREFERENCED_PARAMETER(Unused);
    SIZE_T n = wcslen(Src);
    if (n >= Cap)
        return 1;
    wcscpy(Dest, Src);
    *Len = n;
    return 0;
}

static _Must_inspect_result_ NTSTATUS SalAlloc(_Outref_result_nullonfailure_ PVOID *Out,
                                               _In_range_(1, 64) ULONG Size)
{
    *Out = Size <= 64 ? ExAllocatePool2(POOL_FLAG_NON_PAGED, Size, 0x536C6154u) : NULL;
    return *Out ? STATUS_SUCCESS : STATUS_INSUFFICIENT_RESOURCES;
}

typedef struct _SAL_MSG {
    _Field_range_(0, 16) ULONG Count;
    _Field_size_(Count) ULONG Items[16];
} SAL_MSG;

TEST(wdk_sal_old_style)
{
    WCHAR out[8];
    SIZE_T len = 0;
    CHECK_EQ_I64(SalCopy(out, 8, &len, L"ndk", NULL), 0);
    CHECK_EQ_U64(len, 3);
    CHECK_EQ_I64(SalCopy(out, 3, &len, L"ndk", NULL), 1);
    PVOID p = (PVOID)1;
    CHECK_EQ_I64(SalAlloc(&p, 65), STATUS_INSUFFICIENT_RESOURCES);
    CHECK(p == NULL);
    CHECK_EQ_I64(SalAlloc(&p, 8), STATUS_SUCCESS);
    ExFreePoolWithTag(p, 0x536C6154u);
    SAL_MSG m = {.Count = 1, .Items = {7}};
    CHECK_EQ_U64(m.Items[m.Count - 1], 7);
}

TEST(wdk_ntstatus_family)
{
    static const NTSTATUS errors[] = {STATUS_ALREADY_REGISTERED,
                                      STATUS_INVALID_OWNER,
                                      STATUS_INVALID_PRIMARY_GROUP,
                                      STATUS_INVALID_SID,
                                      STATUS_INVALID_ACL,
                                      STATUS_INVALID_SECURITY_DESCR,
                                      STATUS_DEVICE_DOES_NOT_EXIST,
                                      STATUS_DEVICE_NOT_CONNECTED,
                                      STATUS_IO_DEVICE_ERROR,
                                      STATUS_DEVICE_PROTOCOL_ERROR,
                                      STATUS_ADAPTER_HARDWARE_ERROR,
                                      STATUS_INVALID_USER_BUFFER,
                                      STATUS_REMOTE_NOT_LISTENING,
                                      STATUS_BAD_NETWORK_PATH,
                                      STATUS_INVALID_PARAMETER_12,
                                      STATUS_CONNECTION_COUNT_LIMIT,
                                      STATUS_HOPLIMIT_EXCEEDED,
                                      STATUS_DRIVER_INTERNAL_ERROR};
    for (size_t i = 0; i < RTL_NUMBER_OF(errors); i++) {
        CHECK(NT_ERROR(errors[i]) && !NT_SUCCESS(errors[i]));
        for (size_t j = 0; j < i; j++)
            CHECK(errors[i] != errors[j]);
    }
    CHECK_EQ_U64((ULONG)STATUS_ALREADY_REGISTERED, 0xC0000718u);
    CHECK_EQ_U64((ULONG)STATUS_INVALID_OWNER, 0xC000005Au);
    CHECK_EQ_U64((ULONG)STATUS_INVALID_PARAMETER_5, (ULONG)STATUS_INVALID_PARAMETER_4 + 1);
    CHECK(NT_WARNING(STATUS_ALREADY_DISCONNECTED) && NT_WARNING(STATUS_NO_MORE_FILES));
    CHECK(NT_INFORMATION(STATUS_OBJECT_NAME_EXISTS) && NT_SUCCESS(STATUS_OBJECT_NAME_EXISTS));
    CHECK(NT_SUCCESS(STATUS_WAIT_3) && STATUS_WAIT_3 == STATUS_WAIT_0 + 3);
}

TEST(wdk_wsk_buf)
{
    UCHAR data[64];
    PMDL mdl = IoAllocateMdl(data, sizeof data, FALSE, FALSE, NULL);
    CHECK(mdl != NULL);
    MmBuildMdlForNonPagedPool(mdl);
    WSK_BUF b = {mdl, 8, 16};
    PWSK_BUF pb = &b;
    CHECK(MmGetMdlVirtualAddress(pb->Mdl) == data);
    CHECK_EQ_U64(pb->Offset + pb->Length, 24);
    WSK_BUF_LIST l = {NULL, b};
    CHECK(l.Buffer.Mdl == mdl && l.Next == NULL);
    IoFreeMdl(mdl);
}

/* The intrinsics are atomic: two threads hammer each form, nothing is lost. */
#define WDK_ROUNDS 200000
static struct {
    volatile LONG l;
    volatile SHORT s;
    volatile LONG64 q;
    volatile LONG bits;
    volatile LONG cas;
    volatile CHAR c;
} Shared;

static void *hammer(void *arg)
{
    LONG me = (LONG)(uintptr_t)arg;
    for (int i = 0; i < WDK_ROUNDS; i++) {
        _InterlockedIncrement(&Shared.l);
        _InterlockedIncrement16(&Shared.s);
        _InterlockedExchangeAdd64(&Shared.q, 2);
        _InterlockedXor(&Shared.bits, 1L << me);
        _InterlockedExchangeAdd8(&Shared.c, 1);
        LONG old;
        do
            old = ReadAcquire(&Shared.cas);
        while (_InterlockedCompareExchange(&Shared.cas, old + 1, old) != old);
    }
    return NULL;
}

TEST(wdk_interlocked_intrinsics)
{
    memset((void *)&Shared, 0, sizeof Shared);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, hammer, (void *)i) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_I64(Shared.l, 2 * WDK_ROUNDS);
    CHECK_EQ_I64(Shared.s, (SHORT)(2 * WDK_ROUNDS)); /* wraps as a 16-bit counter does */
    CHECK_EQ_I64(Shared.q, 4LL * WDK_ROUNDS);
    CHECK_EQ_I64(Shared.bits, 0); /* each bit flipped an even number of times */
    CHECK_EQ_I64(Shared.cas, 2 * WDK_ROUNDS);
    CHECK_EQ_I64(Shared.c, (CHAR)(2 * WDK_ROUNDS));
    /* return values: Increment/Decrement the new value, the others the old one */
    volatile LONG v = 5;
    CHECK_EQ_I64(_InterlockedIncrement(&v), 6);
    CHECK_EQ_I64(_InterlockedDecrement(&v), 5);
    CHECK_EQ_I64(_InterlockedExchange(&v, 9), 5);
    CHECK_EQ_I64(_InterlockedCompareExchange(&v, 1, 8), 9); /* no match: unchanged */
    CHECK_EQ_I64(v, 9);
    CHECK_EQ_I64(_InterlockedAnd(&v, 1), 9);
    CHECK_EQ_I64(_InterlockedOr(&v, 6), 1);
    CHECK_EQ_I64(v, 7);
    volatile SHORT s = 0x10;
    CHECK_EQ_I64(_InterlockedCompareExchange16(&s, 0x20, 0x10), 0x10);
    CHECK_EQ_I64(_InterlockedExchange16(&s, 3), 0x20);
    CHECK_EQ_I64(_InterlockedDecrement16(&s), 2);
    volatile LONG64 q = 1;
    CHECK_EQ_I64(_InterlockedOr64(&q, 0x100000000LL), 1);
    CHECK_EQ_I64(_InterlockedAnd64(&q, 0x100000000LL), 0x100000001LL);
    CHECK_EQ_I64(_InterlockedIncrement64(&q), 0x100000001LL);
    PVOID volatile ptr = NULL;
    CHECK(_InterlockedCompareExchangePointer(&ptr, (PVOID)&q, NULL) == NULL);
    CHECK(_InterlockedExchangePointer(&ptr, NULL) == (PVOID)&q);
}

/* Runs fn with stderr sent to a file; returns what it wrote (static buffer). */
static const char *stderr_of(void (*fn)(void *), void *arg)
{
    static char buf[4096];
    char path[] = "/tmp/wdk_errlog_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return "";
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static void write_entry(void *entry)
{
    IoWriteErrorLogEntry(entry);
}

TEST(wdk_error_log)
{
    DRIVER_OBJECT drv;
    memset(&drv, 0, sizeof drv);
    drv.Type = 4;
    RtlInitUnicodeString(&drv.DriverName, L"\\Driver\\nvmeof");
    ULONG64 since = SoftNdkWdkPoolSequence();
    CHECK(IoAllocateErrorLogEntry(&drv, ERROR_LOG_MAXIMUM_SIZE + 1) == NULL);
    CHECK(IoAllocateErrorLogEntry(&drv, 8) == NULL); /* smaller than the packet */
    CHECK(IoAllocateErrorLogEntry(NULL, 64) == NULL);
    UCHAR size = (UCHAR)(sizeof(IO_ERROR_LOG_PACKET) + 4 + sizeof L"nqn.target");
    PIO_ERROR_LOG_PACKET e = IoAllocateErrorLogEntry(&drv, size);
    CHECK(e != NULL);
    CHECK_EQ_U64(e->ErrorCode, 0); /* zeroed */
    e->ErrorCode = STATUS_IO_TIMEOUT;
    e->UniqueErrorValue = 0x42;
    e->FinalStatus = STATUS_CONNECTION_RESET;
    e->MajorFunctionCode = IRP_MJ_INTERNAL_DEVICE_CONTROL;
    e->DumpDataSize = 8;
    e->DumpData[0] = 0xDEADBEEF;
    e->DumpData[1] = 7;
    e->NumberOfStrings = 1;
    e->StringOffset = (USHORT)(sizeof(IO_ERROR_LOG_PACKET) + 4);
    memcpy((PUCHAR)e + e->StringOffset, L"nqn.target", sizeof L"nqn.target");
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 1); /* live until written */
    const char *line = stderr_of(write_entry, e);
    CHECK(strstr(line, "wdkrun: event log: \\Driver\\nvmeof: error 0xC00000B5") != NULL ||
          (printf("line: %s\n", line), false));
    CHECK(strstr(line, "unique value 0x42") && strstr(line, "final status 0xC000020D"));
    CHECK(strstr(line, "strings: \"nqn.target\"") != NULL);
    CHECK(strstr(line, "dump data (8 bytes): 0xDEADBEEF 0x00000007") != NULL);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0); /* written entries are freed */

    /* a packet whose strings and dump data claim more than the entry: reported, not read */
    e = IoAllocateErrorLogEntry(&drv, sizeof(IO_ERROR_LOG_PACKET));
    CHECK(e != NULL);
    e->NumberOfStrings = 3;
    e->StringOffset = 200;
    e->DumpDataSize = 4000;
    line = stderr_of(write_entry, e);
    CHECK(strstr(line, "3 string(s) at offset 200: outside the") != NULL ||
          (printf("line: %s\n", line), false));
    CHECK(strstr(line, "past the entry's end: cut") != NULL);
    e = IoAllocateErrorLogEntry(&drv, sizeof(IO_ERROR_LOG_PACKET) + 4);
    e->NumberOfStrings = 1;
    e->StringOffset = sizeof(IO_ERROR_LOG_PACKET);
    memcpy((PUCHAR)e + e->StringOffset, L"ab", 4); /* fills the entry: no NUL before its end */
    line = stderr_of(write_entry, e);
    CHECK(strstr(line, "(unterminated: the entry ends)") != NULL ||
          (printf("line: %s\n", line), false));
    e = IoAllocateErrorLogEntry(&drv, 64);
    IoFreeErrorLogEntry(e);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0);
}

TEST(wdk_numa_affinity)
{
    USHORT highest = KeQueryHighestNodeNumber();
    ULONG cpus = KeQueryActiveProcessorCountEx(ALL_PROCESSOR_GROUPS);
    ULONG total = 0;
    KAFFINITY all = 0;
    for (USHORT node = 0; node <= highest; node++) {
        GROUP_AFFINITY ga;
        USHORT count = 0xFFFF;
        KeQueryNodeActiveAffinity(node, &ga, &count);
        CHECK_EQ_U64(ga.Group, 0);
        CHECK_EQ_U64(count, (ULONG)__builtin_popcountll(ga.Mask));
        CHECK_EQ_U64(KeQueryNodeMaximumProcessorCount(node), count);
        CHECK((all & ga.Mask) == 0); /* nodes do not share processors */
        all |= ga.Mask;
        total += count;
    }
    CHECK_EQ_U64(total, cpus);
    USHORT here = KeGetCurrentNodeNumber();
    CHECK(here <= highest);
    GROUP_AFFINITY ga;
    USHORT required = 0;
    CHECK_EQ_I64(KeQueryNodeActiveAffinity2(here, &ga, 1, &required), STATUS_SUCCESS);
    CHECK_EQ_U64(required, 1);
    CHECK_EQ_I64(KeQueryNodeActiveAffinity2(here, NULL, 0, &required), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_I64(KeQueryNodeActiveAffinity2((USHORT)(highest + 1), &ga, 1, &required),
                 STATUS_INVALID_PARAMETER);
    USHORT none = 7;
    KeQueryNodeActiveAffinity((USHORT)(highest + 1), &ga, &none);
    CHECK(ga.Mask == 0 && none == 0);
    PROCESSOR_NUMBER pn;
    CHECK_EQ_I64(KeGetProcessorNumberFromIndex(cpus - 1, &pn), STATUS_SUCCESS);
    CHECK(pn.Group == 0 && pn.Number == cpus - 1);
    CHECK_EQ_U64(KeGetProcessorIndexFromNumber(&pn), cpus - 1);
    CHECK_EQ_I64(KeGetProcessorNumberFromIndex(cpus, &pn), STATUS_INVALID_PARAMETER);
    pn.Group = 1;
    CHECK_EQ_U64(KeGetProcessorIndexFromNumber(&pn), INVALID_PROCESSOR_INDEX);
}

TEST(wdk_rtl_string_conversions)
{
    ULONG64 since = SoftNdkWdkPoolSequence();
    ANSI_STRING a;
    RtlInitAnsiString(&a, "nvme\xE9");
    UNICODE_STRING u;
    CHECK_EQ_I64(RtlAnsiStringToUnicodeString(&u, &a, TRUE), STATUS_SUCCESS);
    CHECK_EQ_U64(u.Length, 10);
    CHECK(u.Buffer[0] == 'n' && u.Buffer[4] == 0xE9 && u.Buffer[5] == 0);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 1);
    ANSI_STRING back;
    CHECK_EQ_I64(RtlUnicodeStringToAnsiString(&back, &u, TRUE), STATUS_SUCCESS);
    CHECK(back.Length == 5 && memcmp(back.Buffer, "nvme\xE9", 6) == 0);
    RtlFreeAnsiString(&back);
    RtlFreeUnicodeString(&u);
    CHECK(u.Buffer == NULL && u.Length == 0);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0);
    WCHAR small[2];
    UNICODE_STRING s = {0, sizeof small, small};
    CHECK_EQ_I64(RtlAnsiStringToUnicodeString(&s, &a, FALSE), STATUS_BUFFER_OVERFLOW);

    ULONG v = 0;
    DECLARE_CONST_UNICODE_STRING(dec, L"  4420");
    CHECK_EQ_I64(RtlUnicodeStringToInteger(&dec, 0, &v), STATUS_SUCCESS);
    CHECK_EQ_U64(v, 4420);
    DECLARE_CONST_UNICODE_STRING(hex, L"0x1F0z");
    CHECK_EQ_I64(RtlUnicodeStringToInteger(&hex, 0, &v), STATUS_SUCCESS);
    CHECK_EQ_U64(v, 0x1F0);
    DECLARE_CONST_UNICODE_STRING(bin, L"-0b101");
    CHECK_EQ_I64(RtlUnicodeStringToInteger(&bin, 0, &v), STATUS_SUCCESS);
    CHECK_EQ_U64(v, (ULONG)-5);
    DECLARE_CONST_UNICODE_STRING(ff, L"ff");
    CHECK_EQ_I64(RtlUnicodeStringToInteger(&ff, 16, &v), STATUS_SUCCESS);
    CHECK_EQ_U64(v, 255);
    DECLARE_CONST_UNICODE_STRING(bad, L"port");
    CHECK_EQ_I64(RtlUnicodeStringToInteger(&bad, 10, &v), STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(RtlUnicodeStringToInteger(&dec, 7, &v), STATUS_INVALID_PARAMETER);
    WCHAR num[12];
    UNICODE_STRING n = {0, sizeof num, num};
    CHECK_EQ_I64(RtlIntegerToUnicodeString(0x12B, 16, &n), STATUS_SUCCESS);
    CHECK(n.Length == 6 && num[0] == '1' && num[1] == '2' && num[2] == 'B' && num[3] == 0);

    static const GUID g = {
        0x6B29FC40, 0xCA47, 0x1067, {0xB3, 0x1D, 0x00, 0xDD, 0x01, 0x06, 0x62, 0xDA}};
    UNICODE_STRING gs;
    CHECK_EQ_I64(RtlStringFromGUID(&g, &gs), STATUS_SUCCESS);
    CHECK_EQ_U64(gs.Length, 76);
    CHECK_EQ_I64(wcscmp(gs.Buffer, L"{6B29FC40-CA47-1067-B31D-00DD010662DA}"), 0);
    GUID parsed;
    CHECK_EQ_I64(RtlGUIDFromString(&gs, &parsed), STATUS_SUCCESS);
    CHECK(memcmp(&parsed, &g, sizeof g) == 0);
    RtlFreeUnicodeString(&gs);
    DECLARE_CONST_UNICODE_STRING(lower, L"{6b29fc40-ca47-1067-b31d-00dd010662da}");
    CHECK_EQ_I64(RtlGUIDFromString(&lower, &parsed), STATUS_SUCCESS);
    CHECK(memcmp(&parsed, &g, sizeof g) == 0);
    DECLARE_CONST_UNICODE_STRING(nobrace, L"6b29fc40-ca47-1067-b31d-00dd010662da");
    CHECK_EQ_I64(RtlGUIDFromString(&nobrace, &parsed), STATUS_INVALID_PARAMETER);
    DECLARE_CONST_UNICODE_STRING(badhex, L"{6b29fc40-ca47-1067-b31d-00dd010662dg}");
    CHECK_EQ_I64(RtlGUIDFromString(&badhex, &parsed), STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0);
}

/* Route lookups answer from the host's tables over rtnetlink: loopback here. */
TEST(wdk_routes_loopback)
{
    NET_IFINDEX lo = 0;
    NET_LUID luid;
    CHECK_EQ_I64(ConvertInterfaceAliasToLuid(L"lo", &luid), STATUS_SUCCESS);
    CHECK_EQ_I64(ConvertInterfaceLuidToIndex(&luid, &lo), STATUS_SUCCESS);
    SOCKADDR_INET dst, src;
    memset(&dst, 0, sizeof dst);
    dst.Ipv4.sin_family = AF_INET;
    dst.Ipv4.sin_addr.s_addr = IN4ADDR_LOOPBACK;
    MIB_IPFORWARD_ROW2 row;
    CHECK_EQ_I64(GetBestRoute2(NULL, 0, NULL, &dst, 0, &row, &src), STATUS_SUCCESS);
    CHECK_EQ_U64(row.InterfaceIndex, lo);
    CHECK_EQ_U64(row.InterfaceLuid.Value, luid.Value);
    CHECK(row.Loopback);
    CHECK_EQ_U64(src.si_family, AF_INET);
    CHECK_EQ_U64(src.Ipv4.sin_addr.S_un.S_un_b.s_b1, 127);
    CHECK(row.DestinationPrefix.PrefixLength >= 8 && row.DestinationPrefix.PrefixLength <= 32);
    CHECK_EQ_U64(row.DestinationPrefix.Prefix.Ipv4.sin_addr.S_un.S_un_b.s_b1, 127);
    CHECK_EQ_U64(row.NextHop.Ipv4.sin_addr.s_addr, 0); /* on-link */
    /* another loopback address, through the interface's LUID */
    dst.Ipv4.sin_addr.s_addr = RtlUlongByteSwap(0x7F000102u); /* 127.0.1.2 */
    CHECK_EQ_I64(GetBestRoute2(&luid, 0, NULL, &dst, 0, &row, &src), STATUS_SUCCESS);
    CHECK_EQ_U64(row.InterfaceIndex, lo);
    ULONG ifindex = 0;
    CHECK_EQ_I64(GetBestInterfaceEx((PSOCKADDR)&dst.Ipv4, &ifindex), STATUS_SUCCESS);
    CHECK_EQ_U64(ifindex, lo);
    /* IPv6 ::1, where the host has IPv6 on lo */
    FILE *f = fopen("/proc/sys/net/ipv6/conf/lo/disable_ipv6", "r");
    int off = 1;
    if (f) {
        if (fscanf(f, "%d", &off) != 1)
            off = 1;
        fclose(f);
    }
    if (!off) {
        SOCKADDR_INET six;
        memset(&six, 0, sizeof six);
        six.Ipv6.sin6_family = AF_INET6;
        six.Ipv6.sin6_addr.u.Byte[15] = 1;
        CHECK_EQ_I64(GetBestRoute2(NULL, 0, NULL, &six, 0, &row, &src), STATUS_SUCCESS);
        CHECK_EQ_U64(row.InterfaceIndex, lo);
        CHECK(IN6_IS_ADDR_LOOPBACK(&src.Ipv6.sin6_addr));
    }
    /* bad arguments */
    CHECK_EQ_I64(GetBestRoute2(NULL, 0, NULL, NULL, 0, &row, &src), STATUS_INVALID_PARAMETER);
    SOCKADDR_INET wrong = dst;
    wrong.si_family = 99;
    CHECK_EQ_I64(GetBestRoute2(NULL, 0, NULL, &wrong, 0, &row, &src), STATUS_INVALID_PARAMETER);
    SOCKADDR_INET six_src;
    memset(&six_src, 0, sizeof six_src);
    six_src.si_family = AF_INET6;
    CHECK_EQ_I64(GetBestRoute2(NULL, 0, &six_src, &dst, 0, &row, &src), STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(GetBestRoute2(NULL, 0x7FFFFFF0u, NULL, &dst, 0, &row, &src), STATUS_NOT_FOUND);

    /* the route table holds lo's local route; the path table answers (it may be empty) */
    ULONG64 since = SoftNdkWdkPoolSequence();
    PMIB_IPFORWARD_TABLE2 routes = NULL;
    CHECK_EQ_I64(GetIpForwardTable2(AF_INET, &routes), STATUS_SUCCESS);
    bool found = false;
    for (ULONG i = 0; i < routes->NumEntries; i++)
        found |= routes->Table[i].InterfaceIndex == lo && routes->Table[i].Loopback &&
                 routes->Table[i].DestinationPrefix.Prefix.Ipv4.sin_addr.S_un.S_un_b.s_b1 == 127;
    CHECK(found);
    FreeMibTable(routes);
    PMIB_IPPATH_TABLE paths = NULL;
    CHECK_EQ_I64(GetIpPathTable(AF_UNSPEC, &paths), STATUS_SUCCESS);
    for (ULONG i = 0; i < paths->NumEntries; i++)
        CHECK(paths->Table[i].Destination.si_family == AF_INET ||
              paths->Table[i].Destination.si_family == AF_INET6);
    FreeMibTable(paths);
    CHECK_EQ_I64(GetIpPathTable(77, &paths), STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0);
}

/* guiddef.h: DEFINE_GUID after initguid.h defines, IsEqualGUID compares. */
#include <initguid.h>
DEFINE_GUID(WdkTestGuid, 0x6B29FC40, 0xCA47, 0x1067, 0xB3, 0x1D, 0x00, 0xDD, 0x01, 0x06, 0x62,
            0xDA);

TEST(wdk_guiddef)
{
    GUID g;
    DECLARE_CONST_UNICODE_STRING(text, L"{6B29FC40-CA47-1067-B31D-00DD010662DA}");
    CHECK_EQ_I64(RtlGUIDFromString(&text, &g), STATUS_SUCCESS);
    CHECK(IsEqualGUID(&g, &WdkTestGuid));
    g.Data4[7] ^= 1;
    CHECK(!IsEqualGUID(&g, &WdkTestGuid));
}
