/* Counted strings, IP address text, interface indexes. */
#include "wdk_internal.h"
#include "ip2string.h"
#include "netioapi.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* UNICODE_STRING / ANSI_STRING */
VOID RtlInitUnicodeString(PUNICODE_STRING DestinationString, PCWSTR SourceString)
{
    size_t n = 0;
    if (SourceString)
        while (SourceString[n])
            n++;
    if (n * sizeof(WCHAR) > 0xFFFC)
        n = 0xFFFC / sizeof(WCHAR); /* UNICODE_STRING_MAX_BYTES less the terminator */
    DestinationString->Length = (USHORT)(n * sizeof(WCHAR));
    DestinationString->MaximumLength = SourceString ? (USHORT)((n + 1) * sizeof(WCHAR)) : 0;
    DestinationString->Buffer = (PWCH)SourceString;
}

VOID RtlInitAnsiString(PANSI_STRING DestinationString, PCSTR SourceString)
{
    size_t n = SourceString ? strlen(SourceString) : 0;
    if (n > 0xFFFE)
        n = 0xFFFE;
    DestinationString->Length = (USHORT)n;
    DestinationString->MaximumLength = SourceString ? (USHORT)(n + 1) : 0;
    DestinationString->Buffer = (PCHAR)SourceString;
}

static WCHAR upcase(WCHAR c)
{
    return c >= 'a' && c <= 'z' ? (WCHAR)(c - 'a' + 'A') : c;
}

LONG RtlCompareUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                             BOOLEAN CaseInSensitive)
{
    size_t n1 = String1->Length / sizeof(WCHAR), n2 = String2->Length / sizeof(WCHAR);
    for (size_t i = 0; i < n1 && i < n2; i++) {
        WCHAR a = String1->Buffer[i], b = String2->Buffer[i];
        if (CaseInSensitive) {
            a = upcase(a);
            b = upcase(b);
        }
        if (a != b)
            return (LONG)a - (LONG)b;
    }
    return (LONG)n1 - (LONG)n2;
}

BOOLEAN RtlEqualUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                              BOOLEAN CaseInSensitive)
{
    return String1->Length == String2->Length &&
           RtlCompareUnicodeString(String1, String2, CaseInSensitive) == 0;
}

VOID RtlCopyUnicodeString(PUNICODE_STRING DestinationString, PCUNICODE_STRING SourceString)
{
    if (!SourceString) {
        DestinationString->Length = 0;
        return;
    }
    USHORT n = SourceString->Length < DestinationString->MaximumLength
                   ? SourceString->Length
                   : DestinationString->MaximumLength;
    memmove(DestinationString->Buffer, SourceString->Buffer, n);
    DestinationString->Length = n;
    if (n + sizeof(WCHAR) <= DestinationString->MaximumLength)
        DestinationString->Buffer[n / sizeof(WCHAR)] = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* IP address text. The W forms narrow to ASCII (anything else cannot be part of an address,
 * so it becomes a character that stops the parse) and map the terminator back. */
#define NARROW_MAX 128

static size_t narrow(PCWSTR w, char *out)
{
    size_t i = 0;
    for (; w[i] && i < NARROW_MAX - 1; i++)
        out[i] = w[i] < 0x80 ? (char)w[i] : '\x7f';
    out[i] = 0;
    return i;
}

/* One IPv4 part: decimal, or octal/hex when !strict. Returns false on syntax error. */
static bool ipv4_part(const char **ps, bool strict, uint64_t *value)
{
    const char *s = *ps;
    int base = 10;
    if (!strict && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        if (!isxdigit((unsigned char)*s))
            return false;
    } else if (s[0] == '0' && s[1] >= '0' && s[1] <= '9') {
        if (strict)
            return false; /* ambiguous: octal in the loose syntax */
        base = 8;
    }
    if (base == 10 && !(*s >= '0' && *s <= '9'))
        return false;
    uint64_t v = 0;
    for (;; s++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = *s - 'a' + 10;
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = *s - 'A' + 10;
        else
            break;
        if (d >= base)
            return false;
        v = v * (uint64_t)base + (uint64_t)d;
        if (v > 0xFFFFFFFFull)
            return false;
    }
    *ps = s;
    *value = v;
    return true;
}

static NTSTATUS ipv4_parse(const char *s, bool strict, const char **term, struct in_addr *addr)
{
    uint64_t part[4];
    int n = 0;
    const char *p = s;
    for (;;) {
        if (!ipv4_part(&p, strict, &part[n]))
            goto bad;
        n++;
        if (*p != '.' || n == 4)
            break;
        p++;
    }
    if (strict && n != 4)
        goto bad;
    /* The last part fills the bytes the earlier ones left (inet_aton's a, a.b, a.b.c). */
    uint64_t v = 0;
    for (int i = 0; i < n - 1; i++) {
        if (part[i] > 0xFF)
            goto bad;
        v |= part[i] << (24 - 8 * i);
    }
    if (part[n - 1] > (0xFFFFFFFFull >> (8 * (n - 1))))
        goto bad;
    v |= part[n - 1];
    addr->s_addr = htonl((uint32_t)v);
    *term = p;
    return STATUS_SUCCESS;
bad:
    *term = p;
    return STATUS_INVALID_PARAMETER;
}

static bool parse_port(const char *p, USHORT *port)
{
    if (!*p)
        return false;
    unsigned long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (unsigned long)(*p - '0');
        if (v > 65535)
            return false;
    }
    *port = htons((USHORT)v);
    return true;
}

NTSTATUS RtlIpv4StringToAddressA(PCSTR S, BOOLEAN Strict, PCSTR *Terminator, struct in_addr *Addr)
{
    if (!S || !Terminator || !Addr)
        return STATUS_INVALID_PARAMETER;
    return ipv4_parse(S, Strict, Terminator, Addr);
}

NTSTATUS RtlIpv4StringToAddressW(PCWSTR S, BOOLEAN Strict, PCWSTR *Terminator, struct in_addr *Addr)
{
    if (!S || !Terminator || !Addr)
        return STATUS_INVALID_PARAMETER;
    char a[NARROW_MAX];
    narrow(S, a);
    const char *t;
    NTSTATUS st = ipv4_parse(a, Strict, &t, Addr);
    *Terminator = S + (t - a);
    return st;
}

NTSTATUS RtlIpv4StringToAddressExA(PCSTR AddressString, BOOLEAN Strict, struct in_addr *Address,
                                   PUSHORT Port)
{
    if (!AddressString || !Address || !Port)
        return STATUS_INVALID_PARAMETER;
    const char *t;
    struct in_addr a;
    if (ipv4_parse(AddressString, Strict, &t, &a) != STATUS_SUCCESS)
        return STATUS_INVALID_PARAMETER;
    USHORT port = 0;
    if (*t == ':') {
        if (!parse_port(t + 1, &port))
            return STATUS_INVALID_PARAMETER;
    } else if (*t) {
        return STATUS_INVALID_PARAMETER;
    }
    *Address = a;
    *Port = port;
    return STATUS_SUCCESS;
}

NTSTATUS RtlIpv4StringToAddressExW(PCWSTR AddressString, BOOLEAN Strict, struct in_addr *Address,
                                   PUSHORT Port)
{
    if (!AddressString)
        return STATUS_INVALID_PARAMETER;
    char a[NARROW_MAX];
    if (narrow(AddressString, a) == NARROW_MAX - 1)
        return STATUS_INVALID_PARAMETER;
    return RtlIpv4StringToAddressExA(a, Strict, Address, Port);
}

static bool ipv6_char(char c)
{
    return isxdigit((unsigned char)c) || c == ':' || c == '.';
}

static NTSTATUS ipv6_parse(const char *s, const char **term, struct in6_addr *addr)
{
    char buf[64];
    size_t n = 0;
    while (ipv6_char(s[n]) && n < sizeof buf - 1) {
        buf[n] = s[n];
        n++;
    }
    buf[n] = 0;
    *term = s + n;
    return n && inet_pton(AF_INET6, buf, addr) == 1 ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

NTSTATUS RtlIpv6StringToAddressA(PCSTR S, PCSTR *Terminator, struct in6_addr *Addr)
{
    if (!S || !Terminator || !Addr)
        return STATUS_INVALID_PARAMETER;
    return ipv6_parse(S, Terminator, Addr);
}

NTSTATUS RtlIpv6StringToAddressW(PCWSTR S, PCWSTR *Terminator, struct in6_addr *Addr)
{
    if (!S || !Terminator || !Addr)
        return STATUS_INVALID_PARAMETER;
    char a[NARROW_MAX];
    narrow(S, a);
    const char *t;
    NTSTATUS st = ipv6_parse(a, &t, Addr);
    *Terminator = S + (t - a);
    return st;
}

NTSTATUS RtlIpv6StringToAddressExA(PCSTR AddressString, struct in6_addr *Address, PULONG ScopeId,
                                   PUSHORT Port)
{
    if (!AddressString || !Address || !ScopeId || !Port)
        return STATUS_INVALID_PARAMETER;
    const char *p = AddressString;
    bool bracket = *p == '[';
    if (bracket)
        p++;
    struct in6_addr a;
    if (ipv6_parse(p, &p, &a) != STATUS_SUCCESS)
        return STATUS_INVALID_PARAMETER;
    unsigned long scope = 0;
    if (*p == '%') {
        p++;
        if (*p < '0' || *p > '9')
            return STATUS_INVALID_PARAMETER; /* numeric scope ids only, as on Windows */
        for (; *p >= '0' && *p <= '9'; p++) {
            scope = scope * 10 + (unsigned long)(*p - '0');
            if (scope > 0xFFFFFFFFul)
                return STATUS_INVALID_PARAMETER;
        }
    }
    USHORT port = 0;
    if (bracket) {
        if (*p++ != ']')
            return STATUS_INVALID_PARAMETER;
        if (*p == ':') {
            if (!parse_port(p + 1, &port))
                return STATUS_INVALID_PARAMETER;
        } else if (*p) {
            return STATUS_INVALID_PARAMETER;
        }
    } else if (*p) {
        return STATUS_INVALID_PARAMETER;
    }
    *Address = a;
    *ScopeId = (ULONG)scope;
    *Port = port;
    return STATUS_SUCCESS;
}

NTSTATUS RtlIpv6StringToAddressExW(PCWSTR AddressString, struct in6_addr *Address, PULONG ScopeId,
                                   PUSHORT Port)
{
    if (!AddressString)
        return STATUS_INVALID_PARAMETER;
    char a[NARROW_MAX];
    if (narrow(AddressString, a) == NARROW_MAX - 1)
        return STATUS_INVALID_PARAMETER;
    return RtlIpv6StringToAddressExA(a, Address, ScopeId, Port);
}

static PWSTR widen(const char *a, PWSTR w)
{
    size_t i = 0;
    for (; a[i]; i++)
        w[i] = (WCHAR)(unsigned char)a[i];
    w[i] = 0;
    return w + i;
}

PSTR RtlIpv4AddressToStringA(const struct in_addr *Addr, PSTR S)
{
    inet_ntop(AF_INET, Addr, S, 16);
    return S + strlen(S);
}

PWSTR RtlIpv4AddressToStringW(const struct in_addr *Addr, PWSTR S)
{
    char a[16];
    inet_ntop(AF_INET, Addr, a, sizeof a);
    return widen(a, S);
}

PSTR RtlIpv6AddressToStringA(const struct in6_addr *Addr, PSTR S)
{
    inet_ntop(AF_INET6, Addr, S, 46);
    return S + strlen(S);
}

PWSTR RtlIpv6AddressToStringW(const struct in6_addr *Addr, PWSTR S)
{
    char a[46];
    inet_ntop(AF_INET6, Addr, a, sizeof a);
    return widen(a, S);
}

static NTSTATUS put_string(const char *text, PSTR out, PULONG len)
{
    ULONG need = (ULONG)strlen(text) + 1;
    if (!out || *len < need) {
        *len = need;
        return STATUS_INVALID_PARAMETER;
    }
    memcpy(out, text, need);
    *len = need;
    return STATUS_SUCCESS;
}

NTSTATUS RtlIpv4AddressToStringExA(const struct in_addr *Address, USHORT Port, PSTR AddressString,
                                   PULONG AddressStringLength)
{
    if (!Address || !AddressStringLength)
        return STATUS_INVALID_PARAMETER;
    char a[16], text[24];
    inet_ntop(AF_INET, Address, a, sizeof a);
    if (Port)
        snprintf(text, sizeof text, "%s:%u", a, ntohs(Port));
    else
        snprintf(text, sizeof text, "%s", a);
    return put_string(text, AddressString, AddressStringLength);
}

NTSTATUS RtlIpv6AddressToStringExA(const struct in6_addr *Address, ULONG ScopeId, USHORT Port,
                                   PSTR AddressString, PULONG AddressStringLength)
{
    if (!Address || !AddressStringLength)
        return STATUS_INVALID_PARAMETER;
    char a[46], scope[16] = "", text[72];
    inet_ntop(AF_INET6, Address, a, sizeof a);
    if (ScopeId)
        snprintf(scope, sizeof scope, "%%%u", ScopeId);
    if (Port)
        snprintf(text, sizeof text, "[%s%s]:%u", a, scope, ntohs(Port));
    else
        snprintf(text, sizeof text, "%s%s", a, scope);
    return put_string(text, AddressString, AddressStringLength);
}

/* ------------------------------------------------------------------------------------------ */
/* Interface indexes and LUIDs */
static void luid_of(NET_IFINDEX index, const char *name, PNET_LUID luid)
{
    luid->Value = 0;
    luid->Info.NetLuidIndex = index;
    luid->Info.IfType = strcmp(name, "lo") == 0 ? IF_TYPE_SOFTWARE_LOOPBACK
                                                : IF_TYPE_ETHERNET_CSMACD;
}

NETIO_STATUS ConvertInterfaceNameToLuidA(const CHAR *InterfaceName, PNET_LUID InterfaceLuid)
{
    if (!InterfaceName || !InterfaceLuid)
        return STATUS_INVALID_PARAMETER;
    unsigned idx = if_nametoindex(InterfaceName);
    if (!idx)
        return STATUS_NOT_FOUND;
    luid_of(idx, InterfaceName, InterfaceLuid);
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceAliasToLuid(const WCHAR *InterfaceAlias, PNET_LUID InterfaceLuid)
{
    if (!InterfaceAlias || !InterfaceLuid)
        return STATUS_INVALID_PARAMETER;
    char name[IF_NAMESIZE + 1];
    size_t i = 0;
    for (; InterfaceAlias[i]; i++) {
        if (i >= IF_NAMESIZE || InterfaceAlias[i] >= 0x80)
            return STATUS_INVALID_PARAMETER;
        name[i] = (char)InterfaceAlias[i];
    }
    name[i] = 0;
    return ConvertInterfaceNameToLuidA(name, InterfaceLuid);
}

NETIO_STATUS ConvertInterfaceLuidToIndex(const NET_LUID *InterfaceLuid, PNET_IFINDEX InterfaceIndex)
{
    if (!InterfaceLuid || !InterfaceIndex)
        return STATUS_INVALID_PARAMETER;
    char name[IF_NAMESIZE];
    NET_IFINDEX idx = (NET_IFINDEX)InterfaceLuid->Info.NetLuidIndex;
    if (!if_indextoname(idx, name))
        return STATUS_NOT_FOUND;
    *InterfaceIndex = idx;
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceIndexToLuid(NET_IFINDEX InterfaceIndex, PNET_LUID InterfaceLuid)
{
    if (!InterfaceLuid)
        return STATUS_INVALID_PARAMETER;
    char name[IF_NAMESIZE];
    if (!if_indextoname(InterfaceIndex, name))
        return STATUS_NOT_FOUND;
    luid_of(InterfaceIndex, name, InterfaceLuid);
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceLuidToAlias(const NET_LUID *InterfaceLuid, PWSTR InterfaceAlias,
                                         SIZE_T Length)
{
    if (!InterfaceLuid || !InterfaceAlias)
        return STATUS_INVALID_PARAMETER;
    char name[IF_NAMESIZE];
    if (!if_indextoname((unsigned)InterfaceLuid->Info.NetLuidIndex, name))
        return STATUS_NOT_FOUND;
    if (strlen(name) + 1 > Length)
        return STATUS_BUFFER_TOO_SMALL;
    widen(name, InterfaceAlias);
    return STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Counted-string conversions, integers and GUIDs (wdm.h). The ANSI side is the "C" code page:
 * bytes 0 to 0xFF are WCHARs 0 to 0xFF; a WCHAR above 0xFF becomes '?', Windows' default
 * character. Allocated buffers are pool of the tag 'RtlS'. */
static PVOID rtl_string_alloc(size_t bytes, void *caller)
{
    return wdk_pool_alloc(POOL_FLAG_PAGED, bytes, WDK_TAG_RTL_STRING, caller);
}

NTSTATUS RtlAnsiStringToUnicodeString(PUNICODE_STRING DestinationString,
                                      const ANSI_STRING *SourceString,
                                      BOOLEAN AllocateDestinationString)
{
    if (!DestinationString || !SourceString)
        return STATUS_INVALID_PARAMETER;
    size_t bytes = (size_t)SourceString->Length * sizeof(WCHAR);
    if (bytes + sizeof(WCHAR) > 0xFFFE)
        return STATUS_INVALID_PARAMETER_2;
    if (AllocateDestinationString) {
        DestinationString->Buffer =
            rtl_string_alloc(bytes + sizeof(WCHAR), __builtin_return_address(0));
        if (!DestinationString->Buffer)
            return STATUS_NO_MEMORY;
        DestinationString->MaximumLength = (USHORT)(bytes + sizeof(WCHAR));
    } else if (DestinationString->MaximumLength < bytes || !DestinationString->Buffer) {
        return STATUS_BUFFER_OVERFLOW;
    }
    for (USHORT i = 0; i < SourceString->Length; i++)
        DestinationString->Buffer[i] = (unsigned char)SourceString->Buffer[i];
    DestinationString->Length = (USHORT)bytes;
    if (DestinationString->MaximumLength >= bytes + sizeof(WCHAR))
        DestinationString->Buffer[SourceString->Length] = 0;
    return STATUS_SUCCESS;
}

NTSTATUS RtlUnicodeStringToAnsiString(PANSI_STRING DestinationString,
                                      const UNICODE_STRING *SourceString,
                                      BOOLEAN AllocateDestinationString)
{
    if (!DestinationString || !SourceString)
        return STATUS_INVALID_PARAMETER;
    size_t n = SourceString->Length / sizeof(WCHAR);
    if (AllocateDestinationString) {
        DestinationString->Buffer = rtl_string_alloc(n + 1, __builtin_return_address(0));
        if (!DestinationString->Buffer)
            return STATUS_NO_MEMORY;
        DestinationString->MaximumLength = (USHORT)(n + 1);
    } else if (DestinationString->MaximumLength < n || !DestinationString->Buffer) {
        return STATUS_BUFFER_OVERFLOW;
    }
    for (size_t i = 0; i < n; i++) {
        WCHAR c = SourceString->Buffer[i];
        DestinationString->Buffer[i] = c <= 0xFF ? (char)c : '?';
    }
    DestinationString->Length = (USHORT)n;
    if (DestinationString->MaximumLength > n)
        DestinationString->Buffer[n] = 0;
    return STATUS_SUCCESS;
}

VOID RtlFreeUnicodeString(PUNICODE_STRING UnicodeString)
{
    if (UnicodeString && UnicodeString->Buffer) {
        wdk_pool_free(UnicodeString->Buffer, WDK_TAG_RTL_STRING, true, __builtin_return_address(0));
        UnicodeString->Buffer = NULL;
        UnicodeString->Length = UnicodeString->MaximumLength = 0;
    }
}

VOID RtlFreeAnsiString(PANSI_STRING AnsiString)
{
    if (AnsiString && AnsiString->Buffer) {
        wdk_pool_free(AnsiString->Buffer, WDK_TAG_RTL_STRING, true, __builtin_return_address(0));
        AnsiString->Buffer = NULL;
        AnsiString->Length = AnsiString->MaximumLength = 0;
    }
}

/* Windows' grammar: spaces, a sign, then with Base 0 a 0x / 0o / 0b prefix (hex, octal,
 * binary) or decimal; digits stop at the first non-digit; no digit at all is
 * STATUS_INVALID_PARAMETER, as a Base other than 0, 2, 8, 10, 16. */
NTSTATUS RtlUnicodeStringToInteger(const UNICODE_STRING *String, ULONG Base, PULONG Value)
{
    if (!String || !Value || (Base != 0 && Base != 2 && Base != 8 && Base != 10 && Base != 16))
        return STATUS_INVALID_PARAMETER;
    size_t n = String->Length / sizeof(WCHAR), i = 0;
    const WCHAR *s = String->Buffer;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (Base == 0) {
        Base = 10;
        if (i + 1 < n && s[i] == '0') {
            WCHAR p = s[i + 1];
            if (p == 'x' || p == 'X')
                Base = 16;
            else if (p == 'o' || p == 'O')
                Base = 8;
            else if (p == 'b' || p == 'B')
                Base = 2;
            if (Base != 10)
                i += 2;
        }
    }
    ULONG v = 0;
    size_t digits = 0;
    for (; i < n; i++, digits++) {
        WCHAR c = s[i];
        ULONG d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10u;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10u;
        else
            break;
        if (d >= Base)
            break;
        v = v * Base + d; /* wraps modulo 2^32, as Windows' */
    }
    if (digits == 0)
        return STATUS_INVALID_PARAMETER;
    *Value = neg ? 0u - v : v;
    return STATUS_SUCCESS;
}

NTSTATUS RtlIntegerToUnicodeString(ULONG Value, ULONG Base, PUNICODE_STRING String)
{
    if (Base == 0)
        Base = 10;
    if (!String || (Base != 2 && Base != 8 && Base != 10 && Base != 16))
        return STATUS_INVALID_PARAMETER;
    char tmp[40];
    size_t k = sizeof tmp;
    do {
        unsigned d = Value % Base;
        tmp[--k] = (char)(d < 10 ? '0' + d : 'A' + d - 10);
        Value /= Base;
    } while (Value);
    size_t len = sizeof tmp - k;
    if (!String->Buffer || String->MaximumLength < len * sizeof(WCHAR))
        return STATUS_BUFFER_OVERFLOW;
    for (size_t i = 0; i < len; i++)
        String->Buffer[i] = (unsigned char)tmp[k + i];
    String->Length = (USHORT)(len * sizeof(WCHAR));
    if (String->MaximumLength >= (len + 1) * sizeof(WCHAR))
        String->Buffer[len] = 0;
    return STATUS_SUCCESS;
}

/* "{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}", upper case, 38 characters, as Windows writes it. */
NTSTATUS RtlStringFromGUID(const GUID *Guid, PUNICODE_STRING GuidString)
{
    if (!Guid || !GuidString)
        return STATUS_INVALID_PARAMETER;
    char text[40];
    snprintf(text, sizeof text, "{%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X}",
             (unsigned)Guid->Data1, Guid->Data2, Guid->Data3, Guid->Data4[0], Guid->Data4[1],
             Guid->Data4[2], Guid->Data4[3], Guid->Data4[4], Guid->Data4[5], Guid->Data4[6],
             Guid->Data4[7]);
    GuidString->Buffer = rtl_string_alloc(39 * sizeof(WCHAR), __builtin_return_address(0));
    if (!GuidString->Buffer)
        return STATUS_NO_MEMORY;
    for (size_t i = 0; i <= 38; i++)
        GuidString->Buffer[i] = (unsigned char)text[i];
    GuidString->Length = 38 * sizeof(WCHAR);
    GuidString->MaximumLength = 39 * sizeof(WCHAR);
    return STATUS_SUCCESS;
}

static int hex_digit(WCHAR c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The braced form only, either case; anything else is STATUS_INVALID_PARAMETER. */
NTSTATUS RtlGUIDFromString(const UNICODE_STRING *GuidString, GUID *Guid)
{
    static const char shape[] = "{________-____-____-____-____________}";
    if (!GuidString || !Guid || !GuidString->Buffer || GuidString->Length != 38 * sizeof(WCHAR))
        return STATUS_INVALID_PARAMETER;
    const WCHAR *s = GuidString->Buffer;
    uint8_t b[16];
    size_t nb = 0;
    for (size_t i = 0; i < 38; i++) {
        if (shape[i] != '_') {
            if (s[i] != (WCHAR)shape[i])
                return STATUS_INVALID_PARAMETER;
            continue;
        }
        int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);
        if (hi < 0 || lo < 0)
            return STATUS_INVALID_PARAMETER;
        b[nb++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    Guid->Data1 = (ULONG)b[0] << 24 | (ULONG)b[1] << 16 | (ULONG)b[2] << 8 | b[3];
    Guid->Data2 = (USHORT)(b[4] << 8 | b[5]);
    Guid->Data3 = (USHORT)(b[6] << 8 | b[7]);
    memcpy(Guid->Data4, b + 8, 8);
    return STATUS_SUCCESS;
}
