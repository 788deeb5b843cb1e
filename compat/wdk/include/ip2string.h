/*
 * ip2string.h — IP address text conversions (softndk kernel-consumer harness).
 * Addresses are the native Linux in_addr / in6_addr (docs/decisions.md #15); *Port comes back
 * in network byte order (0 when the string has none), *ScopeId in host order (0 when none).
 * Returns STATUS_SUCCESS or STATUS_INVALID_PARAMETER. The W forms take WCHAR (16-bit) strings.
 * Without UNICODE defined the unsuffixed names are the A forms, as in Windows' header.
 *
 * Strict (IPv4): exactly four dotted decimal parts, each 0-255, no leading zeros (a leading
 * zero is octal in the non-strict syntax, so it is refused as ambiguous). Non-strict: one to
 * four parts in decimal, octal (leading 0) or hex (0x), the last filling the remaining bytes
 * (as inet_aton). Ex forms: "a.b.c.d[:port]", "addr[%scope]" or "[addr[%scope]][:port]"; the
 * whole string must be consumed. Non-Ex forms stop at the first character that cannot continue
 * the address and return it in *Terminator.
 */
#ifndef SOFTNDK_WDK_IP2STRING_H
#define SOFTNDK_WDK_IP2STRING_H

#include "ws2def.h"

#ifdef __cplusplus
extern "C" {
#endif

SOFTNDK_WDK_API NTSTATUS RtlIpv4StringToAddressA(PCSTR S, BOOLEAN Strict, PCSTR *Terminator,
                                                 struct in_addr *Addr);
SOFTNDK_WDK_API NTSTATUS RtlIpv4StringToAddressW(PCWSTR S, BOOLEAN Strict, PCWSTR *Terminator,
                                                 struct in_addr *Addr);
SOFTNDK_WDK_API NTSTATUS RtlIpv4StringToAddressExA(PCSTR AddressString, BOOLEAN Strict,
                                                   struct in_addr *Address, PUSHORT Port);
SOFTNDK_WDK_API NTSTATUS RtlIpv4StringToAddressExW(PCWSTR AddressString, BOOLEAN Strict,
                                                   struct in_addr *Address, PUSHORT Port);
SOFTNDK_WDK_API NTSTATUS RtlIpv6StringToAddressA(PCSTR S, PCSTR *Terminator,
                                                 struct in6_addr *Addr);
SOFTNDK_WDK_API NTSTATUS RtlIpv6StringToAddressW(PCWSTR S, PCWSTR *Terminator,
                                                 struct in6_addr *Addr);
SOFTNDK_WDK_API NTSTATUS RtlIpv6StringToAddressExA(PCSTR AddressString, struct in6_addr *Address,
                                                   PULONG ScopeId, PUSHORT Port);
SOFTNDK_WDK_API NTSTATUS RtlIpv6StringToAddressExW(PCWSTR AddressString, struct in6_addr *Address,
                                                   PULONG ScopeId, PUSHORT Port);

/* S needs 16 characters (IPv4) / 46 (IPv6); returns a pointer to its terminating NUL. */
SOFTNDK_WDK_API PSTR RtlIpv4AddressToStringA(const struct in_addr *Addr, PSTR S);
SOFTNDK_WDK_API PWSTR RtlIpv4AddressToStringW(const struct in_addr *Addr, PWSTR S);
SOFTNDK_WDK_API PSTR RtlIpv6AddressToStringA(const struct in6_addr *Addr, PSTR S);
SOFTNDK_WDK_API PWSTR RtlIpv6AddressToStringW(const struct in6_addr *Addr, PWSTR S);
/* Port in network byte order (0 = none). *AddressStringLength: in = capacity in characters,
 * out = characters written including the NUL, or needed (STATUS_INVALID_PARAMETER). */
SOFTNDK_WDK_API NTSTATUS RtlIpv4AddressToStringExA(const struct in_addr *Address, USHORT Port,
                                                   PSTR AddressString, PULONG AddressStringLength);
SOFTNDK_WDK_API NTSTATUS RtlIpv6AddressToStringExA(const struct in6_addr *Address, ULONG ScopeId,
                                                   USHORT Port, PSTR AddressString,
                                                   PULONG AddressStringLength);

#ifdef UNICODE
#define RtlIpv4StringToAddress RtlIpv4StringToAddressW
#define RtlIpv4StringToAddressEx RtlIpv4StringToAddressExW
#define RtlIpv6StringToAddress RtlIpv6StringToAddressW
#define RtlIpv6StringToAddressEx RtlIpv6StringToAddressExW
#define RtlIpv4AddressToString RtlIpv4AddressToStringW
#define RtlIpv6AddressToString RtlIpv6AddressToStringW
#else
#define RtlIpv4StringToAddress RtlIpv4StringToAddressA
#define RtlIpv4StringToAddressEx RtlIpv4StringToAddressExA
#define RtlIpv6StringToAddress RtlIpv6StringToAddressA
#define RtlIpv6StringToAddressEx RtlIpv6StringToAddressExA
#define RtlIpv4AddressToString RtlIpv4AddressToStringA
#define RtlIpv6AddressToString RtlIpv6AddressToStringA
#endif

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_IP2STRING_H */
