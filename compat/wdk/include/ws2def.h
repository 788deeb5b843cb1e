/*
 * ws2def.h / ws2ipdef.h / in6addr.h — socket address types with their Windows names.
 *
 * Driver code sees Windows' IN_ADDR and IN6_ADDR (ws2def.h, inaddr.h, in6addr.h of the Windows
 * SDK): `struct in_addr` is a union `S_un` of `S_un_b.s_b1..s_b4`, `S_un_w.s_w1..s_w2` and
 * `S_addr`, with `s_addr` (and `s_net`, `s_host`, `s_imp`, `s_impno`, `s_lh`) as macros onto
 * it, as Windows defines them; `struct in6_addr` is a union `u` of `Byte[16]` and `Word[8]` with
 * `s6_addr`, `s6_bytes`, `s6_words` as macros. `SOCKADDR_IN` / `SOCKADDR_IN6` have Windows'
 * member names (`sin6_scope_struct` too). Their layout is the same as Linux's `sockaddr_in` /
 * `sockaddr_in6` (checked below), so they pass to softndk's NDK routines as they are. The address
 * families keep their Linux values (docs/decisions.md #15: AF_INET6 is 10, not 23).
 *
 * libsoftndk-wdk's own sources define SOFTNDK_WDK_INTERNAL and get Linux's <netinet/in.h>
 * types under the same names instead: the harness uses the host's socket API, drivers never see
 * it. A driver that includes <netinet/in.h> itself gets an error here (the two `struct in_addr`
 * cannot coexist).
 */
#ifndef SOFTNDK_WDK_WS2DEF_H
#define SOFTNDK_WDK_WS2DEF_H

#include "wdm.h"

#include <sys/socket.h> /* struct sockaddr, sockaddr_storage, AF_*, SOCK_* */

#ifdef __cplusplus
extern "C" {
#endif

typedef USHORT ADDRESS_FAMILY;
typedef struct sockaddr SOCKADDR, *PSOCKADDR, *LPSOCKADDR;
typedef const struct sockaddr *PCSOCKADDR;
typedef struct sockaddr_storage SOCKADDR_STORAGE, *PSOCKADDR_STORAGE, SOCKADDR_STORAGE_LH,
    *PSOCKADDR_STORAGE_LH;

#ifdef SOFTNDK_WDK_INTERNAL
#include <netinet/in.h>
typedef struct in_addr IN_ADDR, *PIN_ADDR, *LPIN_ADDR;
typedef struct in6_addr IN6_ADDR, *PIN6_ADDR, *LPIN6_ADDR;
typedef struct sockaddr_in SOCKADDR_IN, *PSOCKADDR_IN;
typedef struct sockaddr_in6 SOCKADDR_IN6, *PSOCKADDR_IN6, SOCKADDR_IN6_LH, *PSOCKADDR_IN6_LH;
#else
#if defined(_NETINET_IN_H) || defined(_ARPA_INET_H)
#error                                                                                             \
    "softndk-wdk: <netinet/in.h> / <arpa/inet.h> (Linux's in_addr) included in driver code; the harness gives Windows' IN_ADDR / IN6_ADDR (docs/wdk.md, \"Socket addresses\")"
#endif
typedef struct in_addr {
    union {
        struct {
            UCHAR s_b1, s_b2, s_b3, s_b4;
        } S_un_b;
        struct {
            USHORT s_w1, s_w2;
        } S_un_w;
        ULONG S_addr;
    } S_un;
} IN_ADDR, *PIN_ADDR, *LPIN_ADDR;
#define s_addr           S_un.S_addr
#define s_host           S_un.S_un_b.s_b2
#define s_net            S_un.S_un_b.s_b1
#define s_imp            S_un.S_un_w.s_w2
#define s_impno          S_un.S_un_b.s_b4
#define s_lh             S_un.S_un_b.s_b3

typedef struct in6_addr {
    union {
        UCHAR Byte[16];
        USHORT Word[8];
    } u;
} IN6_ADDR, *PIN6_ADDR, *LPIN6_ADDR;
#define in_addr6         in6_addr
#define _S6_un           u
#define _S6_u8           Byte
#define s6_addr          _S6_un._S6_u8
#define s6_bytes         u.Byte
#define s6_words         u.Word

typedef struct {
    union {
        struct {
            ULONG Zone : 28;
            ULONG Level : 4;
        };
        ULONG Value;
    };
} SCOPE_ID, *PSCOPE_ID;

typedef struct sockaddr_in {
    ADDRESS_FAMILY sin_family;
    USHORT sin_port;
    IN_ADDR sin_addr;
    CHAR sin_zero[8];
} SOCKADDR_IN, *PSOCKADDR_IN;

typedef struct sockaddr_in6 {
    ADDRESS_FAMILY sin6_family;
    USHORT sin6_port;
    ULONG sin6_flowinfo;
    IN6_ADDR sin6_addr;
    union {
        ULONG sin6_scope_id;
        SCOPE_ID sin6_scope_struct;
    };
} SOCKADDR_IN6, *PSOCKADDR_IN6, SOCKADDR_IN6_LH, *PSOCKADDR_IN6_LH;

/* Windows' IPPROTO values (the same numbers as Linux's) and INADDR_* host-order constants. */
typedef enum {
    IPPROTO_IP = 0,
    IPPROTO_ICMP = 1,
    IPPROTO_TCP = 6,
    IPPROTO_UDP = 17,
    IPPROTO_IPV6 = 41,
    IPPROTO_ICMPV6 = 58,
    IPPROTO_RAW = 255,
} IPPROTO,
    *PIPPROTO;
#define INADDR_ANY       ((ULONG)0x00000000)
#define INADDR_LOOPBACK  0x7f000001
#define INADDR_BROADCAST ((ULONG)0xffffffff)
#define INADDR_NONE      0xffffffff
#define IN6ADDR_ANY_INIT                                                                           \
    {                                                                                              \
        {                                                                                          \
            {                                                                                      \
                0                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
#define IN6ADDR_LOOPBACK_INIT                                                                      \
    {                                                                                              \
        {                                                                                          \
            {                                                                                      \
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1                                     \
            }                                                                                      \
        }                                                                                          \
    }
#endif /* SOFTNDK_WDK_INTERNAL */

/* Both views have Linux's layout: what a driver builds passes to the host's socket calls. */
_Static_assert(sizeof(IN_ADDR) == 4 && sizeof(IN6_ADDR) == 16, "IN_ADDR / IN6_ADDR size");
_Static_assert(sizeof(SOCKADDR_IN) == 16 && offsetof(SOCKADDR_IN, sin_port) == 2 &&
                   offsetof(SOCKADDR_IN, sin_addr) == 4,
               "SOCKADDR_IN layout");
_Static_assert(sizeof(SOCKADDR_IN6) == 28 && offsetof(SOCKADDR_IN6, sin6_flowinfo) == 4 &&
                   offsetof(SOCKADDR_IN6, sin6_addr) == 8 &&
                   offsetof(SOCKADDR_IN6, sin6_scope_id) == 24,
               "SOCKADDR_IN6 layout");

typedef union _SOCKADDR_INET {
    SOCKADDR_IN Ipv4;
    SOCKADDR_IN6 Ipv6;
    ADDRESS_FAMILY si_family;
} SOCKADDR_INET, *PSOCKADDR_INET;

/* 127.0.0.1 in network byte order, as a ULONG (Windows' IN4ADDR_LOOPBACK). */
#define IN4ADDR_LOOPBACK 0x0100007fu
#define IN4ADDR_ANY 0u

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_WS2DEF_H */
