/* ndisndk.h — the NDK provider structures are in the harness's ndis.h. */
#ifndef SOFTNDK_WDK_NDISNDK_H
#define SOFTNDK_WDK_NDISNDK_H
#include "ndis.h"
#endif
