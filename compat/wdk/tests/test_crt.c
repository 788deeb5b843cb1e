/* The kernel C runtime for 16-bit WCHAR, Windows' IN_ADDR / IN6_ADDR, and the __declspec forms
 * (docs/wdk.md, "Wide characters", "Socket addresses", "MSVC words"). */
#include "wdk_test.h"

#include "ws2ipdef.h"

#include <wchar.h> /* the harness's: must not bring glibc's 32-bit functions */

TEST(wdk_crt_wide_strings)
{
    CHECK(sizeof(WCHAR) == 2 && sizeof L"ab"[0] == 2);
    const WCHAR *hello = L"Hello";
    CHECK_EQ_U64(wcslen(hello), 5);
    CHECK_EQ_U64(wcslen(L""), 0);
    CHECK_EQ_U64(wcsnlen(hello, 3), 3);
    WCHAR buf[16];
    CHECK(wcscpy(buf, hello) == buf);
    CHECK(memcmp(buf, L"Hello", 12) == 0);
    CHECK(wcscat(buf, L", x") == buf);
    CHECK_EQ_I64(wcscmp(buf, L"Hello, x"), 0);
    CHECK(wcscmp(L"abc", L"abd") < 0);
    CHECK(wcscmp(L"abd", L"abc") > 0);
    CHECK(wcscmp(L"ab", L"abc") < 0);
    CHECK_EQ_I64(wcsncmp(L"abcX", L"abcY", 3), 0);
    CHECK(wcsncmp(L"abcX", L"abcY", 4) < 0);
    CHECK_EQ_I64(_wcsicmp(L"NDK Adapter", L"ndk adapTER"), 0);
    CHECK(_wcsicmp(L"a", L"B") < 0); /* lowercased first: 'a' < 'b' */
    CHECK_EQ_I64(_wcsnicmp(L"ABCx", L"abcy", 3), 0);
    /* wcsncpy pads with NULs, and writes no NUL when the source is as long as the count */
    for (size_t i = 0; i < 16; i++)
        buf[i] = 0x7777;
    wcsncpy(buf, L"ab", 5);
    CHECK(buf[0] == 'a' && buf[1] == 'b' && buf[2] == 0 && buf[4] == 0 && buf[5] == 0x7777);
    wcsncpy(buf, L"wxyz", 2);
    CHECK(buf[0] == 'w' && buf[1] == 'x' && buf[2] == 0);
    wcsncat(buf, L"123", 2);
    CHECK_EQ_I64(wcscmp(buf, L"wx12"), 0);
    CHECK(wcschr(L"a.b.c", '.') != NULL && *wcschr(L"a.b.c", '.') == '.');
    const WCHAR *path = L"\\Device\\Ndk0";
    CHECK(wcsrchr(path, '\\') == path + 7);
    CHECK(wcsstr(path, L"Ndk") == path + 8);
    CHECK(wcsstr(path, L"Nope") == NULL);
    CHECK(wcschr(L"abc", 'z') == NULL);
    /* a character above 0xFF and a surrogate pair are one WCHAR each, not halves of one */
    const WCHAR mixed[] = {0x00E9, 0x20AC, 0xD83D, 0xDE00, 0};
    CHECK_EQ_U64(wcslen(mixed), 4);
    WCHAR *end;
    CHECK_EQ_I64(wcstol(L"  -42z", &end, 10), -42);
    CHECK(*end == 'z');
    CHECK_EQ_U64(wcstoul(L"0x1F", NULL, 0), 31);
    CHECK_EQ_U64(wcstoul(L"777", NULL, 8), 511);
    CHECK_EQ_I64(wcstol(L"zz", &end, 10), 0);
    CHECK(end[0] == 'z');
}

TEST(wdk_crt_multibyte)
{
    char narrow[8];
    CHECK_EQ_U64(wcstombs(NULL, L"port", 0), 4);
    CHECK_EQ_U64(wcstombs(narrow, L"port", sizeof narrow), 4);
    CHECK(strcmp(narrow, "port") == 0);
    const WCHAR latin[] = {'c', 0xE9, 0};
    CHECK_EQ_U64(wcstombs(narrow, latin, sizeof narrow), 2);
    CHECK((unsigned char)narrow[1] == 0xE9);
    const WCHAR euro[] = {'x', 0x20AC, 0};
    CHECK(wcstombs(narrow, euro, sizeof narrow) == (size_t)-1); /* not in the "C" locale */
    memset(narrow, 'Q', sizeof narrow);
    CHECK_EQ_U64(wcstombs(narrow, L"abcdef", 3), 3); /* Count reached: no NUL */
    CHECK(narrow[3] == 'Q');
    WCHAR wide[8];
    CHECK_EQ_U64(mbstowcs(NULL, "\xE9t\xE9", 0), 3);
    CHECK_EQ_U64(mbstowcs(wide, "\xE9t\xE9", 8), 3);
    CHECK(wide[0] == 0xE9 && wide[1] == 't' && wide[3] == 0);
    WCHAR one;
    CHECK_EQ_I64(mbtowc(&one, "A", 1), 1);
    CHECK(one == 'A');
    CHECK_EQ_I64(wctomb(narrow, 0x263A), -1);
    CHECK_EQ_I64(wctomb(narrow, 'z'), 1);
    CHECK(towupper('q') == 'Q' && towlower('Q') == 'q' && towlower(0xC9) == 0xC9);
}

TEST(wdk_crt_printf)
{
    char n[16];
    /* Windows' conversions: %ld is a 32-bit LONG, %I64x 64-bit, %ws a WCHAR string */
    CHECK_EQ_I64(_snprintf(n, sizeof n, "%ld/%I64x/%ws", (LONG)-5, (ULONG64)0xABCull, L"w"), 8);
    CHECK(strcmp(n, "-5/abc/w") == 0 || (printf("got '%s'\n", n), 0));
    /* MSVC: -1 when it does not fit, Count characters and no NUL */
    memset(n, 'Q', sizeof n);
    CHECK_EQ_I64(_snprintf(n, 4, "%s", "abcdef"), -1);
    CHECK(memcmp(n, "abcdQ", 5) == 0);
    /* fits exactly without the NUL: the count, no NUL */
    memset(n, 'Q', sizeof n);
    CHECK_EQ_I64(_snprintf(n, 3, "%d", 123), 3);
    CHECK(memcmp(n, "123Q", 4) == 0);

    WCHAR w[32];
    /* wide printf: %s is wide, %S / %hs narrow */
    CHECK_EQ_I64(_snwprintf(w, 32, L"%s=%S:%hs %u", L"port", "tcp", "x", 4791u), 15);
    CHECK_EQ_I64(wcscmp(w, L"port=tcp:x 4791"), 0);
    CHECK_EQ_U64(wcslen(w), 15);
    const WCHAR euro[] = {0x20AC, 0};
    CHECK_EQ_I64(_snwprintf(w, 32, L"[%s]", euro), 3);
    CHECK(w[0] == '[' && w[1] == 0x20AC && w[2] == ']' && w[3] == 0);
    for (size_t i = 0; i < 32; i++)
        w[i] = 0x7777;
    CHECK_EQ_I64(_snwprintf(w, 3, L"%s", L"abcdef"), -1);
    CHECK(w[0] == 'a' && w[2] == 'c' && w[3] == 0x7777); /* no NUL, nothing past Count */
    CHECK_EQ_I64(swprintf(w, 3, L"%d", 12345), -1);
    CHECK(w[2] == 0); /* ISO swprintf: always terminated */
    CHECK_EQ_I64(swprintf(w, 32, L"%c%C", L'w', 'n'), 2);
    CHECK_EQ_I64(wcscmp(w, L"wn"), 0);
}

/* Windows' in_addr: S_un.S_addr, S_un_b, S_un_w and s_addr name the same four bytes. */
TEST(wdk_in_addr_windows_layout)
{
    IN_ADDR a;
    a.S_un.S_addr = RtlUlongByteSwap(0xC0A80114u); /* 192.168.1.20 */
    CHECK_EQ_U64(a.S_un.S_un_b.s_b1, 192);
    CHECK_EQ_U64(a.S_un.S_un_b.s_b2, 168);
    CHECK_EQ_U64(a.S_un.S_un_b.s_b3, 1);
    CHECK_EQ_U64(a.S_un.S_un_b.s_b4, 20);
    CHECK_EQ_U64(a.s_addr, a.S_un.S_addr);
    CHECK_EQ_U64(a.s_net, 192);
    CHECK_EQ_U64(a.s_impno, 20);
    CHECK_EQ_U64(a.S_un.S_un_w.s_w1, RtlUshortByteSwap(0xC0A8));
    SOCKADDR_IN sin = {0};
    sin.sin_family = AF_INET;
    sin.sin_port = RtlUshortByteSwap(445);
    USHORT port;
    CHECK_EQ_I64(RtlIpv4StringToAddressExA("10.1.2.3:80", TRUE, &sin.sin_addr, &port),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(sin.sin_addr.S_un.S_un_b.s_b1, 10);
    CHECK_EQ_U64(sin.sin_addr.S_un.S_un_b.s_b4, 3);
    CHECK(IN4_IS_ADDR_LOOPBACK(&(IN_ADDR){.s_addr = IN4ADDR_LOOPBACK}));
    SOCKADDR_IN6 six = {0};
    CHECK_EQ_I64(RtlIpv6StringToAddressExA("[fe80::1%3]:443", &six.sin6_addr, &six.sin6_scope_id,
                                           &six.sin6_port),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(six.sin6_addr.u.Byte[0], 0xfe);
    CHECK_EQ_U64(six.sin6_addr.s6_addr[15], 1);
    CHECK_EQ_U64(six.sin6_addr.s6_words[0], RtlUshortByteSwap(0xfe80));
    CHECK_EQ_U64(six.sin6_scope_struct.Zone, 3);
    CHECK(IN6_IS_ADDR_LINKLOCAL(&six.sin6_addr) && !IN6_IS_ADDR_LOOPBACK(&six.sin6_addr));
    CHECK_EQ_U64(sizeof(SOCKADDR_IN6), 28);
    CHECK_EQ_U64(IPPROTO_TCP, 6);
}

/* The __declspec forms drivers write. */
__declspec(align(64)) static volatile LONG WdkAligned;
__declspec(selectany) const ULONG WdkSelectAny = 7;
__declspec(noinline) static ULONG WdkNoInline(ULONG x)
{
    return x + WdkSelectAny;
}
__declspec(noreturn) static void WdkNoReturn(void)
{
    abort();
}
__declspec(dllexport) ULONG SoftNdkWdkTestExported(void);
__declspec(dllexport) ULONG SoftNdkWdkTestExported(void)
{
    return 1;
}

TEST(wdk_declspec_forms)
{
    CHECK_EQ_U64((uintptr_t)&WdkAligned % 64, 0);
    CHECK_EQ_U64(WdkNoInline(1), 8);
    CHECK_EQ_U64(SoftNdkWdkTestExported(), 1);
    if (WdkAligned == 12345)
        WdkNoReturn();
}
