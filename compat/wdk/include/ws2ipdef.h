/* ws2ipdef.h — softndk kernel-consumer harness: see ws2def.h. Like the WDK's socket headers it
 * leads to mstcpip.h, so the IP address text routines (ip2string.h) are reachable from it. */
#ifndef SOFTNDK_WDK_WS2IPDEF_H
#define SOFTNDK_WDK_WS2IPDEF_H
#include "ws2def.h"
#include "mstcpip.h"
#endif
