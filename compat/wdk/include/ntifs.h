/* ntifs.h — softndk kernel-consumer harness: everything is in wdm.h (docs/wdk.md). */
#ifndef SOFTNDK_WDK_NTIFS_H
#define SOFTNDK_WDK_NTIFS_H
#include "wdm.h"
#endif
