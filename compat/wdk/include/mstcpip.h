/* mstcpip.h — softndk kernel-consumer harness. As in the WDK, it brings the IP address text
 * routines (ip2string.h) to code that includes the socket headers. */
#ifndef SOFTNDK_WDK_MSTCPIP_H
#define SOFTNDK_WDK_MSTCPIP_H
#include "ws2def.h"
#include "ip2string.h"
#endif
