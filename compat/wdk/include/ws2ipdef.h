/* ws2ipdef.h — softndk kernel-consumer harness: see ws2def.h. */
#ifndef SOFTNDK_WDK_WS2IPDEF_H
#define SOFTNDK_WDK_WS2IPDEF_H
#include "ws2def.h"
#endif
