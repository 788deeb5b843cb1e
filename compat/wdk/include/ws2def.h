/*
 * ws2def.h / ws2ipdef.h — socket address types with their Windows names, mapped onto the
 * native Linux structs (docs/decisions.md #15: NDK takes native sockaddrs, AF_INET6 = 10).
 * Differences from Windows: IN_ADDR has no S_un union (use s_addr), and AF_INET6 is 10.
 */
#ifndef SOFTNDK_WDK_WS2DEF_H
#define SOFTNDK_WDK_WS2DEF_H

#include "wdm.h"

#include <netinet/in.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef USHORT ADDRESS_FAMILY;
typedef struct sockaddr SOCKADDR, *PSOCKADDR, *LPSOCKADDR;
typedef const struct sockaddr *PCSOCKADDR;
typedef struct sockaddr_storage SOCKADDR_STORAGE, *PSOCKADDR_STORAGE, SOCKADDR_STORAGE_LH;
typedef struct sockaddr_in SOCKADDR_IN, *PSOCKADDR_IN;
typedef struct sockaddr_in6 SOCKADDR_IN6, *PSOCKADDR_IN6, SOCKADDR_IN6_LH, *PSOCKADDR_IN6_LH;
typedef struct in_addr IN_ADDR, *PIN_ADDR;
typedef struct in6_addr IN6_ADDR, *PIN6_ADDR;
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
