#!/bin/sh
# libsoftndk-wdk's dynamic symbols: the Windows kernel names it implements (Ke*, Kf*, Ex*,
# Io*, Iof*, Mm*, Rtl*, Dbg*, vDbg*, Ps*, Wsk*, Convert*, netioapi's route routines) and the
# harness's own SoftNdkWdk*.
# usage: exports.sh LIBRARY
set -eu
lib=$1
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/ {print $3}' |
  grep -v -E '^(Ke|Kf|Ex|Io|Iof|Mm|Rtl|Dbg|vDbg|Ps|Wsk|Convert|SoftNdkWdk)[A-Z0-9]' |
  grep -v -E '^(GetBestRoute2|GetBestInterfaceEx|GetIpForwardTable2|GetIpPathTable|FreeMibTable)$' |
  grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' || true)
if [ -n "$bad" ]; then
  echo "FAIL wdk_exports: unexpected exported symbols: $bad"
  exit 1
fi
n=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/' | wc -l)
echo "PASS wdk_exports ($n symbols)"
