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

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_NETIOAPI_H */
