/* ntstatus.h — softndk kernel-consumer harness: its names are in wdm.h (docs/wdk.md). */
#ifndef SOFTNDK_WDK_NTSTATUS_H
#define SOFTNDK_WDK_NTSTATUS_H
#include "wdm.h"
#endif
