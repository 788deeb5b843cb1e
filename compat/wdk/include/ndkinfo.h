/* ndkinfo.h — where the WDK has it, beside wdm.h (softndk kernel-consumer harness). */
#ifndef SOFTNDK_WDK_NDKINFO_FORWARD_H
#define SOFTNDK_WDK_NDKINFO_FORWARD_H
#include "wdm.h"
#endif
