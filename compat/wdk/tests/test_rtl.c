/* Counted strings, IP address text (docs/decisions.md #15: native sockaddr fields), interface
 * names, and DbgPrint's Windows conversions. */
#include "wdk_test.h"

#include "ntintsafe.h"
#include "ntstrsafe.h"
#include "ip2string.h"
#include "netioapi.h"
#include "ws2ipdef.h"

#include <net/if.h>

TEST(wdk_unicode_strings)
{
    UNICODE_STRING a, b;
    DECLARE_CONST_UNICODE_STRING(c, L"Hello");
    RtlInitUnicodeString(&a, L"hello");
    CHECK_EQ_U64(a.Length, 10);
    CHECK_EQ_U64(a.MaximumLength, 12);
    CHECK_EQ_U64(c.Length, 10);
    CHECK_EQ_U64(c.MaximumLength, 12);
    CHECK(!RtlEqualUnicodeString(&a, &c, FALSE));
    CHECK(RtlEqualUnicodeString(&a, &c, TRUE));
    CHECK(RtlCompareUnicodeString(&a, &c, FALSE) > 0);
    RtlInitUnicodeString(&b, NULL);
    CHECK_EQ_U64(b.Length, 0);
    CHECK(b.Buffer == NULL);

    WCHAR buf[4];
    UNICODE_STRING d = {0, sizeof buf, buf};
    RtlCopyUnicodeString(&d, &a); /* truncated to the destination */
    CHECK_EQ_U64(d.Length, 8);
    CHECK(buf[0] == 'h' && buf[3] == 'l');
    ANSI_STRING s;
    RtlInitAnsiString(&s, "abc");
    CHECK_EQ_U64(s.Length, 3);
    CHECK_EQ_U64(s.MaximumLength, 4);
}

static bool v4(const char *text, BOOLEAN strict, const char *want, unsigned port)
{
    struct in_addr a;
    USHORT p = 0xFFFF;
    NTSTATUS st = RtlIpv4StringToAddressExA(text, strict, &a, &p);
    if (!want)
        return st == STATUS_INVALID_PARAMETER;
    char got[16];
    RtlIpv4AddressToStringA(&a, got);
    return st == STATUS_SUCCESS && strcmp(got, want) == 0 && p == RtlUshortByteSwap((uint16_t)port);
}

TEST(wdk_ipv4_string_to_address)
{
    CHECK(v4("127.0.0.1", TRUE, "127.0.0.1", 0));
    CHECK(v4("192.168.1.20:4791", TRUE, "192.168.1.20", 4791));
    CHECK(v4("10.0.0.1:65535", TRUE, "10.0.0.1", 65535));
    CHECK(v4("10.0.0.1:65536", TRUE, NULL, 0));
    CHECK(v4("10.0.0.1:", TRUE, NULL, 0));
    CHECK(v4("256.0.0.1", TRUE, NULL, 0));
    CHECK(v4("1.2.3", TRUE, NULL, 0));
    CHECK(v4("01.2.3.4", TRUE, NULL, 0));  /* strict: no octal */
    CHECK(v4("1.2.3.4 ", TRUE, NULL, 0));  /* Ex: the whole string */
    CHECK(v4("1.2.3", FALSE, "1.2.0.3", 0)); /* loose: the last part fills */
    CHECK(v4("0x7f.1", FALSE, "127.0.0.1", 0));
    CHECK(v4("010.0.0.1", FALSE, "8.0.0.1", 0));
    CHECK(v4("3232235777", FALSE, "192.168.1.1", 0));
    CHECK(v4("", TRUE, NULL, 0));

    /* the wide form, and the non-Ex terminator */
    struct in_addr a;
    USHORT port;
    CHECK_EQ_I64(RtlIpv4StringToAddressExW(L"127.0.0.1:80", TRUE, &a, &port), STATUS_SUCCESS);
    CHECK_EQ_U64(a.s_addr, RtlUlongByteSwap(INADDR_LOOPBACK));
    CHECK_EQ_U64(port, RtlUshortByteSwap(80));
    PCSTR term;
    CHECK_EQ_I64(RtlIpv4StringToAddressA("1.2.3.4/24", TRUE, &term, &a), STATUS_SUCCESS);
    CHECK(*term == '/');
    PCWSTR wterm;
    CHECK_EQ_I64(RtlIpv4StringToAddressW(L"1.2.3.4,x", TRUE, &wterm, &a), STATUS_SUCCESS);
    CHECK(*wterm == ',');

    char out[32];
    ULONG len = sizeof out;
    CHECK_EQ_I64(RtlIpv4AddressToStringExA(&a, RtlUshortByteSwap(443), out, &len), STATUS_SUCCESS);
    CHECK(strcmp(out, "1.2.3.4:443") == 0);
    CHECK_EQ_U64(len, 12);
    len = 4;
    CHECK_EQ_I64(RtlIpv4AddressToStringExA(&a, 0, out, &len), STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(len, 8);
    CHECK(RtlIpv4AddressToStringA(&a, out) == out + 7);
    WCHAR w[16];
    CHECK(RtlIpv4AddressToStringW(&a, w) == w + 7);
    CHECK(w[0] == '1' && w[6] == '4');
}

TEST(wdk_ipv6_string_to_address)
{
    struct in6_addr a;
    ULONG scope;
    USHORT port;
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("::1", &a, &scope, &port), STATUS_SUCCESS);
    CHECK(IN6_IS_ADDR_LOOPBACK(&a));
    CHECK_EQ_U64(scope, 0);
    CHECK_EQ_U64(port, 0);
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("[fe80::1%3]:443", &a, &scope, &port),
                 STATUS_SUCCESS);
    CHECK(IN6_IS_ADDR_LINKLOCAL(&a));
    CHECK_EQ_U64(scope, 3);
    CHECK_EQ_U64(port, RtlUshortByteSwap(443));
    CHECK_EQ_I64(RtlIpv6StringToAddressExW(L"[::ffff:1.2.3.4]", &a, &scope, &port),
                 STATUS_SUCCESS);
    CHECK(IN6_IS_ADDR_V4MAPPED(&a));
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("[::1", &a, &scope, &port), STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("::1]:80", &a, &scope, &port),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("fe80::1%eth0", &a, &scope, &port),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("1:2:3:4:5:6:7:8:9", &a, &scope, &port),
                 STATUS_INVALID_PARAMETER);
    PCSTR term;
    CHECK_EQ_I64(RtlIpv6StringToAddressA("2001:db8::5/64", &term, &a), STATUS_SUCCESS);
    CHECK(*term == '/');
    char out[64];
    ULONG len = sizeof out;
    CHECK_EQ_I64(RtlIpv6AddressToStringExA(&a, 2, RtlUshortByteSwap(80), out, &len),
                 STATUS_SUCCESS);
    CHECK(strcmp(out, "[2001:db8::5%2]:80") == 0);
}

TEST(wdk_interface_alias_luid_index)
{
    NET_LUID luid;
    NET_IFINDEX idx = 0;
    CHECK_EQ_I64(ConvertInterfaceAliasToLuid(L"lo", &luid), STATUS_SUCCESS);
    CHECK_EQ_U64(luid.Info.IfType, IF_TYPE_SOFTWARE_LOOPBACK);
    CHECK_EQ_I64(ConvertInterfaceLuidToIndex(&luid, &idx), STATUS_SUCCESS);
    CHECK_EQ_U64(idx, if_nametoindex("lo"));
    NET_LUID back;
    CHECK_EQ_I64(ConvertInterfaceIndexToLuid(idx, &back), STATUS_SUCCESS);
    CHECK_EQ_U64(back.Value, luid.Value);
    WCHAR alias[IF_MAX_STRING_SIZE];
    CHECK_EQ_I64(ConvertInterfaceLuidToAlias(&luid, alias, IF_MAX_STRING_SIZE), STATUS_SUCCESS);
    CHECK(alias[0] == 'l' && alias[1] == 'o' && alias[2] == 0);
    CHECK_EQ_I64(ConvertInterfaceLuidToAlias(&luid, alias, 2), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_I64(ConvertInterfaceAliasToLuid(L"no-such-if0", &luid), STATUS_NOT_FOUND);
}

/* DbgPrint writes to stderr: capture it in a pipe. */
static void capture(void (*fn)(void), char *out, size_t cap)
{
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    ssize_t n = read(p[0], out, cap - 1);
    out[n > 0 ? n : 0] = 0;
    close(p[0]);
}

static void print_windows(void)
{
    UNICODE_STRING us;
    ANSI_STRING as;
    RtlInitUnicodeString(&us, L"Unicode");
    RtlInitAnsiString(&as, "Ansi");
    LONG neg = -5;
    ULONG big = 0xFFFFFFFFu;
    DbgPrint("[%wZ|%ws|%S|%Z|%s|%c|%C]", &us, L"wide", L"wS", &as, "narrow", 'x', (int)L'y');
    DbgPrint("[%ld|%lu|%lx|%I64x|%I64d|%Ix|%08X|%-3d|%%|%p]", neg, big, big,
             (ULONG64)0x123456789ABCull, (LONG64)-7, (ULONG_PTR)0xABC, 0xBEEFu, 4, (void *)0);
    DbgPrint("[%wZ|%ws]", (PUNICODE_STRING)NULL, (PCWSTR)NULL);
    DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_ERROR_LEVEL, "[ex %u]", 1u);
}

TEST(wdk_dbgprint_windows_conversions)
{
    char out[1024];
    capture(print_windows, out, sizeof out);
    const char *want = "[Unicode|wide|wS|Ansi|narrow|x|y]"
                       "[-5|4294967295|ffffffff|123456789abc|-7|abc|0000BEEF|4  |%|(nil)]"
                       "[(null)|(null)][ex 1]";
    CHECK_MSG(strcmp(out, want) == 0, "got %s", out);
}

static void print_levels(void)
{
    DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_ERROR_LEVEL, "e");
    DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_WARNING_LEVEL, "w");
    DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_INFO_LEVEL, "i");
}

TEST(wdk_dbgprintex_level_filter)
{
    /* read once per process: set before the first DbgPrintEx of this (forked) test */
    setenv("SOFTNDK_WDK_DEBUG_LEVEL", "1", 1);
    char out[64];
    capture(print_levels, out, sizeof out);
    CHECK_MSG(strcmp(out, "ew") == 0, "got %s", out);
}

/* ---- ntstrsafe.h / ntintsafe.h ------------------------------------------------------------- */
TEST(wdk_ntstrsafe_bounded_and_windows_conversions)
{
    char buf[16];
    CHECK_EQ_I64(
        RtlStringCbPrintfA(buf, sizeof buf, "%lu-%I64x-%s", 0xFFFFFFFFul, 0x1ull << 40, "ab"),
        STATUS_BUFFER_OVERFLOW); /* 4294967295-10000000000-ab does not fit */
    CHECK(strcmp(buf, "4294967295-1000") == 0);
    CHECK_EQ_I64(RtlStringCchPrintfA(buf, sizeof buf, "%ld|%ws", (LONG)-5, L"wide"),
                 STATUS_SUCCESS);
    CHECK(strcmp(buf, "-5|wide") == 0);
    CHECK_EQ_I64(RtlStringCbPrintfA(buf, 0, "x"), STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(RtlStringCbCopyA(buf, sizeof buf, "0123456789abcdefXYZ"), STATUS_BUFFER_OVERFLOW);
    CHECK(strcmp(buf, "0123456789abcde") == 0);
    CHECK_EQ_I64(RtlStringCbCopyA(buf, sizeof buf, "abc"), STATUS_SUCCESS);
    CHECK_EQ_I64(RtlStringCbCatA(buf, sizeof buf, "def"), STATUS_SUCCESS);
    CHECK(strcmp(buf, "abcdef") == 0);
    CHECK_EQ_I64(RtlStringCchCopyNA(buf, sizeof buf, "xyz123", 3), STATUS_SUCCESS);
    CHECK(strcmp(buf, "xyz") == 0);
    size_t n = 0;
    CHECK_EQ_I64(RtlStringCbLengthA(buf, sizeof buf, &n), STATUS_SUCCESS);
    CHECK_EQ_U64(n, 3);
    CHECK_EQ_I64(RtlStringCchLengthA("abcd", 4, &n),
                 STATUS_INVALID_PARAMETER); /* no NUL within 4 */
    WCHAR w[4];
    CHECK_EQ_I64(RtlStringCchCopyW(w, RTL_NUMBER_OF(w), L"lo"), STATUS_SUCCESS);
    CHECK_EQ_I64(RtlStringCchCatW(w, RTL_NUMBER_OF(w), L"op"), STATUS_BUFFER_OVERFLOW);
    CHECK(w[0] == 'l' && w[1] == 'o' && w[2] == 'o' && w[3] == 0);
    CHECK_EQ_I64(RtlStringCbLengthW(w, sizeof w, &n), STATUS_SUCCESS);
    CHECK_EQ_U64(n, 3 * sizeof(WCHAR));
}

TEST(wdk_ntintsafe_overflow_is_an_error_with_the_error_value)
{
    ULONG u;
    SIZE_T z;
    USHORT s;
    CHECK_EQ_I64(RtlULongAdd(0xFFFFFFF0ul, 0x10, &u), STATUS_INTEGER_OVERFLOW);
    CHECK_EQ_U64(u, ULONG_ERROR);
    CHECK_EQ_I64(RtlULongAdd(1, 2, &u), STATUS_SUCCESS);
    CHECK_EQ_U64(u, 3);
    CHECK_EQ_I64(RtlSizeTMult((SIZE_T)1 << 40, (SIZE_T)1 << 30, &z), STATUS_INTEGER_OVERFLOW);
    CHECK_EQ_I64(RtlSizeTMult(4096, 3, &z), STATUS_SUCCESS);
    CHECK_EQ_U64(z, 12288);
    CHECK_EQ_I64(RtlULongSub(1, 2, &u), STATUS_INTEGER_OVERFLOW);
    CHECK_EQ_I64(RtlULongLongToULong(0x100000000ull, &u), STATUS_INTEGER_OVERFLOW);
    CHECK_EQ_I64(RtlSizeTToUShort(65535, &s), STATUS_SUCCESS);
    CHECK_EQ_U64(s, 65535);
}

TEST(wdk_small_macros_real_drivers_use)
{
    ExInitializeDriverRuntime(DrvRtPoolNxOptIn);
    CHECK_EQ_U64(UInt32x32To64(0xFFFFFFFFu, 2), 0x1FFFFFFFEull);
    CHECK_EQ_I64(Int32x32To64(-3, 0x40000000), -0xC0000000ll);
    WCHAR b[8];
    UNICODE_STRING u;
    RtlInitEmptyUnicodeString(&u, b, sizeof b);
    CHECK(u.Length == 0 && u.MaximumLength == sizeof b && u.Buffer == b);
    volatile LONG n = 1;
    CHECK_EQ_I64(InterlockedIncrementNoFence(&n), 2);
    CHECK_EQ_I64(InterlockedDecrementRelease(&n), 1);
    CHECK(ARGUMENT_PRESENT(&n) && !ARGUMENT_PRESENT(NULL));
    LARGE_INTEGER t1, t2;
    KeQueryTickCount(&t1);
    KeQueryTickCount(&t2);
    CHECK(t2.QuadPart >= t1.QuadPart && t1.QuadPart > 0);
}
