/* wchar.h — softndk kernel-consumer harness. On the harness's include path this is the header a
 * driver's `#include <wchar.h>` finds: the kernel C runtime's wide-character routines for 16-bit
 * WCHAR, declared in wdm.h (docs/wdk.md, "Wide characters"), instead of glibc's, whose 32-bit
 * wchar_t would be wrong under -fshort-wchar. libsoftndk-wdk's own sources get glibc's. */
#ifdef SOFTNDK_WDK_INTERNAL
#include_next <wchar.h>
#else
#ifndef SOFTNDK_WDK_WCHAR_H
#define SOFTNDK_WDK_WCHAR_H
#include "wdm.h"
#endif
#endif
