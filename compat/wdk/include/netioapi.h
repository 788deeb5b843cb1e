/*
 * netioapi.h — interface indexes and LUIDs (softndk kernel-consumer harness).
 * An NDK consumer names the adapter it opens by interface index (WskOpenNdkAdapter). On Linux
 * the index is if_nametoindex's; an interface's alias is its Linux name ("lo", "eth0"). The
 * LUID of index i has NetLuidIndex = i and IfType = IF_TYPE_SOFTWARE_LOOPBACK for "lo",
 * IF_TYPE_ETHERNET_CSMACD otherwise.
 */
#ifndef SOFTNDK_WDK_NETIOAPI_H
#define SOFTNDK_WDK_NETIOAPI_H

#include "ws2def.h"
#include "ws2ipdef.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ULONG NET_IFINDEX, *PNET_IFINDEX;
typedef ULONG IF_INDEX, *PIF_INDEX;
typedef NTSTATUS NETIO_STATUS;
#define NET_IFINDEX_UNSPECIFIED ((NET_IFINDEX)0)
#define IF_TYPE_ETHERNET_CSMACD 6
#define IF_TYPE_SOFTWARE_LOOPBACK 24
#define IF_MAX_STRING_SIZE 256
#define NDIS_IF_MAX_STRING_SIZE IF_MAX_STRING_SIZE

typedef union _NET_LUID_LH {
    ULONG64 Value;
    struct {
        ULONG64 Reserved : 24;
        ULONG64 NetLuidIndex : 24;
        ULONG64 IfType : 16;
    } Info;
} NET_LUID_LH, *PNET_LUID_LH, NET_LUID, *PNET_LUID, IF_LUID, *PIF_LUID;

/* STATUS_SUCCESS, STATUS_INVALID_PARAMETER (NULL argument, non-ASCII alias), STATUS_NOT_FOUND
 * (no such interface), STATUS_BUFFER_TOO_SMALL (alias buffer). */
SOFTNDK_WDK_API NETIO_STATUS ConvertInterfaceAliasToLuid(const WCHAR *InterfaceAlias,
                                                         PNET_LUID InterfaceLuid);
SOFTNDK_WDK_API NETIO_STATUS ConvertInterfaceNameToLuidA(const CHAR *InterfaceName,
                                                         PNET_LUID InterfaceLuid);
SOFTNDK_WDK_API NETIO_STATUS ConvertInterfaceLuidToIndex(const NET_LUID *InterfaceLuid,
                                                         PNET_IFINDEX InterfaceIndex);
SOFTNDK_WDK_API NETIO_STATUS ConvertInterfaceIndexToLuid(NET_IFINDEX InterfaceIndex,
                                                         PNET_LUID InterfaceLuid);
SOFTNDK_WDK_API NETIO_STATUS ConvertInterfaceLuidToAlias(const NET_LUID *InterfaceLuid,
                                                         PWSTR InterfaceAlias, SIZE_T Length);

/* Routes and paths (netioapi.h), answered from the host's routing and neighbour tables over
 * rtnetlink (docs/wdk.md, "Routes"). */
typedef struct _IP_ADDRESS_PREFIX {
    SOCKADDR_INET Prefix;
    UINT8 PrefixLength;
} IP_ADDRESS_PREFIX, *PIP_ADDRESS_PREFIX;
typedef enum _NL_ROUTE_PROTOCOL {
    RouteProtocolOther = 1,
    RouteProtocolLocal = 2,
    RouteProtocolNetMgmt = 3,
    RouteProtocolIcmp = 4,
    RouteProtocolEgp = 5,
    RouteProtocolGgp = 6,
    RouteProtocolHello = 7,
    RouteProtocolRip = 8,
    RouteProtocolIsIs = 9,
    RouteProtocolEsIs = 10,
    RouteProtocolCisco = 11,
    RouteProtocolBbn = 12,
    RouteProtocolOspf = 13,
    RouteProtocolBgp = 14,
    MIB_IPPROTO_NT_AUTOSTATIC = 10002,
    MIB_IPPROTO_NT_STATIC = 10006,
    MIB_IPPROTO_NT_STATIC_NON_DOD = 10007,
} NL_ROUTE_PROTOCOL,
    *PNL_ROUTE_PROTOCOL;
typedef enum _NL_ROUTE_ORIGIN {
    NlroManual,
    NlroWellKnown,
    NlroDHCP,
    NlroRouterAdvertisement,
    Nlro6to4,
} NL_ROUTE_ORIGIN,
    *PNL_ROUTE_ORIGIN;
typedef struct _MIB_IPFORWARD_ROW2 {
    NET_LUID InterfaceLuid;
    NET_IFINDEX InterfaceIndex;
    IP_ADDRESS_PREFIX DestinationPrefix;
    SOCKADDR_INET NextHop;
    UCHAR SitePrefixLength;
    ULONG ValidLifetime;
    ULONG PreferredLifetime;
    ULONG Metric;
    NL_ROUTE_PROTOCOL Protocol;
    BOOLEAN Loopback;
    BOOLEAN AutoconfigureAddress;
    BOOLEAN Publish;
    BOOLEAN Immortal;
    ULONG Age;
    NL_ROUTE_ORIGIN Origin;
} MIB_IPFORWARD_ROW2, *PMIB_IPFORWARD_ROW2;
typedef struct _MIB_IPFORWARD_TABLE2 {
    ULONG NumEntries;
    MIB_IPFORWARD_ROW2 Table[1];
} MIB_IPFORWARD_TABLE2, *PMIB_IPFORWARD_TABLE2;
typedef struct _MIB_IPPATH_ROW {
    SOCKADDR_INET Source;
    SOCKADDR_INET Destination;
    NET_LUID InterfaceLuid;
    NET_IFINDEX InterfaceIndex;
    SOCKADDR_INET CurrentNextHop;
    ULONG PathMtu;
    ULONG RttMean;
    ULONG RttDeviation;
    union {
        ULONG LastReachable;
        ULONG LastUnreachable;
    };
    BOOLEAN IsReachable;
    ULONG64 LinkTransmitSpeed;
    ULONG64 LinkReceiveSpeed;
} MIB_IPPATH_ROW, *PMIB_IPPATH_ROW;
typedef struct _MIB_IPPATH_TABLE {
    ULONG NumEntries;
    MIB_IPPATH_ROW Table[1];
} MIB_IPPATH_TABLE, *PMIB_IPPATH_TABLE;

/* The route the host would use to DestinationAddress (optionally from SourceAddress, out of
 * InterfaceLuid / InterfaceIndex): its interface, the matching prefix, the next hop (unspecified
 * when on-link), the metric; BestSourceAddress the source address it would pick.
 * STATUS_SUCCESS, STATUS_INVALID_PARAMETER (NULL, or families that differ or are not AF_INET /
 * AF_INET6), STATUS_NETWORK_UNREACHABLE / STATUS_HOST_UNREACHABLE (no route), STATUS_NOT_FOUND
 * (an interface that does not exist), STATUS_INTERNAL_ERROR (rtnetlink failed). */
SOFTNDK_WDK_API NETIO_STATUS GetBestRoute2(PNET_LUID InterfaceLuid, NET_IFINDEX InterfaceIndex,
                                           const SOCKADDR_INET *SourceAddress,
                                           const SOCKADDR_INET *DestinationAddress,
                                           ULONG AddressSortOptions, PMIB_IPFORWARD_ROW2 BestRoute,
                                           SOCKADDR_INET *BestSourceAddress);
/* iphlpapi's, as drivers call it: the interface index of the best route to pDestAddr. */
SOFTNDK_WDK_API NETIO_STATUS GetBestInterfaceEx(PSOCKADDR pDestAddr, PULONG pdwBestIfIndex);
/* The routes of the main and local tables (Family AF_INET, AF_INET6 or AF_UNSPEC for both), in
 * one allocation freed with FreeMibTable. */
SOFTNDK_WDK_API NETIO_STATUS GetIpForwardTable2(ADDRESS_FAMILY Family,
                                                PMIB_IPFORWARD_TABLE2 *Table);
/* The paths: the host's neighbour table (each destination on a link and whether it answered). */
SOFTNDK_WDK_API NETIO_STATUS GetIpPathTable(ADDRESS_FAMILY Family, PMIB_IPPATH_TABLE *Table);
SOFTNDK_WDK_API VOID FreeMibTable(PVOID Memory);

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_NETIOAPI_H */
