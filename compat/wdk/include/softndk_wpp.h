/* softndk_wpp.h — WPP software tracing for driver code built on the harness (docs/wdk.md, "WPP
 * tracing"). On Windows the WPP preprocessor (tracewpp) writes a NAME.tmh for each source that
 * includes it, defining the trace functions the driver's `begin_wpp config` block declares. Here
 * softndk-wdk-tmh writes those files: each includes this header and defines every declared
 * trace function as a call of SoftNdkWdkWppTrace, which prints the message like DbgPrintEx (one
 * line on stderr, Windows' conversions) with WPP's own: %!FUNC!, %!FILE!, %!LINE! (no argument),
 * %!STATUS! (an NTSTATUS, printed with its name), %!HRESULT!, %!bool! / %!BOOLEAN!. Messages of a
 * level above SOFTNDK_WDK_WPP_LEVEL (environment; default 4, TRACE_LEVEL_INFORMATION) are not
 * printed; flags are accepted and not filtered on. */
#ifndef SOFTNDK_WDK_WPP_H
#define SOFTNDK_WDK_WPP_H

#include "wdm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRACE_LEVEL_NONE        0
#define TRACE_LEVEL_CRITICAL    1
#define TRACE_LEVEL_FATAL       1
#define TRACE_LEVEL_ERROR       2
#define TRACE_LEVEL_WARNING     3
#define TRACE_LEVEL_INFORMATION 4
#define TRACE_LEVEL_VERBOSE     5

#define WPP_INIT_TRACING(DriverObject, RegistryPath) ((void)(DriverObject), (void)(RegistryPath))
#define WPP_CLEANUP(DriverObject)                    ((void)(DriverObject))
#define WPP_SYSTEMCONTROL(PDO)                       ((void)0)
#define WPP_SYSTEMCONTROL2(PDO, offset)              ((void)0)
#define WPP_RECORDER_LEVEL_FLAGS_ARGS(lvl, flags)
#define WPP_RECORDER_LEVEL_FLAGS_FILTER(lvl, flags) 1

SOFTNDK_WDK_API VOID SoftNdkWdkWppTrace(PCSTR File, ULONG Line, PCSTR Function, ULONG Level,
                                        PCSTR Format, ...);

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_WPP_H */
