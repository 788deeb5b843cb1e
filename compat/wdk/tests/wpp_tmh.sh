#!/bin/sh
# softndk-wdk-tmh: a driver with WPP tracing (a begin_wpp config block, #include "drv.tmh",
# WPP_INIT_TRACING / WPP_CLEANUP) builds with the generated .tmh and the consumer flags under
# -Wall -Werror, and its trace calls print with WPP's conversions, filtered by level.
# usage: wpp_tmh.sh TOOL CC "CFLAGS" LIBDIR_WDK LIBDIR_SOFTNDK RUNNER
set -eu
tool=$1 cc=$2 cflags=$3 wdklib=$4 ndklib=$5 runner=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL wdk_wpp_tmh: $*"; exit 1; }
mkdir -p "$work/src"
cat > "$work/src/trace.h" <<'SRC'
#define WPP_CONTROL_GUIDS \
    WPP_DEFINE_CONTROL_GUID(WppTest, (6A1D3C1E,2B44,4C7A,9D0E,5F6A7B8C9D0E), WPP_DEFINE_BIT(TRACE_ALL))
// begin_wpp config
// FUNC TraceEvents(LEVEL, FLAGS, MSG, ...);
// FUNC Trace{FLAGS=TRACE_ALL}(LEVEL, MSG, ...);
// end_wpp
SRC
cat > "$work/src/drv.c" <<'SRC'
#include <ntddk.h>
#include "trace.h"
#include "drv.tmh"

DRIVER_INITIALIZE DriverEntry;
static DRIVER_UNLOAD WppUnload;

static VOID WppUnload(PDRIVER_OBJECT DriverObject)
{
    Trace(TRACE_LEVEL_INFORMATION, "%!FUNC!: unloading");
    WPP_CLEANUP(DriverObject);
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    WPP_INIT_TRACING(DriverObject, RegistryPath);
    TraceEvents(TRACE_LEVEL_ERROR, TRACE_ALL, "%!FUNC! at %!FILE!:%!LINE!: connect failed %!STATUS!, port %u", STATUS_IO_TIMEOUT, 4420u);
    TraceEvents(TRACE_LEVEL_VERBOSE, TRACE_ALL, "verbose detail %d", 7);
    DoTraceMessage(TRACE_ALL, "ready %!bool!", TRUE);
    DriverObject->DriverUnload = WppUnload;
    return STATUS_SUCCESS;
}
SRC
"$tool" "$work/out" "$work/src" > "$work/tool.out" || fail "the tool failed"
grep -q "^tmh: drv.tmh" "$work/tool.out" || { cat "$work/tool.out"; fail "drv.tmh not written"; }
# shellcheck disable=SC2086
$cc $cflags -Wall -Werror -fPIC -shared -g -I"$work/out" "$work/src/drv.c" -o "$work/drv.so" \
  -L"$wdklib" -L"$ndklib" -lsoftndk-wdk -lsoftndk > "$work/cc.out" 2>&1 \
  || { cat "$work/cc.out"; fail "the driver does not build with the .tmh"; }
run() {
  LD_LIBRARY_PATH="$wdklib:$ndklib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$runner" -t 20 -n drv \
    "$work/drv.so" > "$work/run.out" 2>&1 || { cat "$work/run.out"; fail "the run failed"; }
}
run
grep -q "^DriverEntry at drv.c:17: connect failed 0xC00000B5 (STATUS_IO_TIMEOUT), port 4420$" "$work/run.out" \
  || { cat "$work/run.out"; fail "the error trace is not as expected"; }
grep -q "^ready TRUE$" "$work/run.out" || { cat "$work/run.out"; fail "DoTraceMessage missing"; }
grep -q "^WppUnload: unloading$" "$work/run.out" || { cat "$work/run.out"; fail "the unload trace is missing"; }
if grep -q "verbose detail" "$work/run.out"; then fail "a verbose trace printed at the default level"; fi
SOFTNDK_WDK_WPP_LEVEL=5 run
grep -q "^verbose detail 7$" "$work/run.out" || { cat "$work/run.out"; fail "SOFTNDK_WDK_WPP_LEVEL=5 does not print verbose"; }
echo "PASS wdk_wpp_tmh"
