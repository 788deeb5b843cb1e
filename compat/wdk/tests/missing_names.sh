#!/bin/sh
# A driver that uses a name the harness lacks learns every such name in one build, and the
# runner names every undefined symbol of a module built without the link check (docs/wdk.md,
# "Missing names"). Builds tiny bad modules with the consumer flags of softndk-wdk.pc /
# softndk::wdk and expects each step to fail naming all of the missing names.
# usage: missing_names.sh CC "CFLAGS" LIBDIR_WDK LIBDIR_SOFTNDK RUNNER
set -eu
cc=$1 cflags=$2 wdklib=$3 ndklib=$4 runner=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL $*"; exit 1; }
passed=0

# 1. Unknown routines and macros are compile errors, every one of them in one compile.
cat > "$work/bad_compile.c" <<'SRC'
#include <ntddk.h>
#include <wsk.h>
NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    UNREFERENCED_PARAMETER(RegistryPath);
    if (!SOFTNDK_TEST_NO_SUCH_MACRO(DriverObject))
        return STATUS_UNSUCCESSFUL;
    KeFrobnicateSoftNdkTest(DriverObject, 1);
    return STATUS_SUCCESS;
}
SRC
# shellcheck disable=SC2086
if $cc $cflags -fPIC -c "$work/bad_compile.c" -o "$work/bad_compile.o" \
     > "$work/out1" 2>&1; then
  fail "wdk_missing_names_compile: a module using unknown names compiled"
fi
grep -q "SOFTNDK_TEST_NO_SUCH_MACRO" "$work/out1" || { cat "$work/out1"; fail "wdk_missing_names_compile: macro not named"; }
grep -q "KeFrobnicateSoftNdkTest" "$work/out1" || { cat "$work/out1"; fail "wdk_missing_names_compile: routine not named"; }
echo "PASS wdk_missing_names_compile"; passed=$((passed + 1))

# 2. Declared but nowhere defined (a routine and a data object): the link names both.
cat > "$work/bad_link.c" <<'SRC'
#include <ntddk.h>
NTSTATUS KeMissingRoutineSoftNdkTest(PVOID Context);
extern ULONG KeMissingDataSoftNdkTest;
NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    UNREFERENCED_PARAMETER(RegistryPath);
    if (KeMissingDataSoftNdkTest)
        return KeMissingRoutineSoftNdkTest(DriverObject);
    return STATUS_UNSUCCESSFUL;
}
SRC
# shellcheck disable=SC2086
if $cc $cflags -fPIC -shared "$work/bad_link.c" -o "$work/bad_link.so" \
     -L"$wdklib" -L"$ndklib" -lsoftndk-wdk -lsoftndk -Wl,--no-undefined > "$work/out2" 2>&1; then
  fail "wdk_missing_names_link: a module with undefined symbols linked"
fi
for n in KeMissingRoutineSoftNdkTest KeMissingDataSoftNdkTest; do
  grep -q "$n" "$work/out2" || { cat "$work/out2"; fail "wdk_missing_names_link: $n not named"; }
done
echo "PASS wdk_missing_names_link"; passed=$((passed + 1))

# 3. Built without the link check, the runner refuses to load it and names both.
# shellcheck disable=SC2086
$cc $cflags -fPIC -shared "$work/bad_link.c" -o "$work/bad_link.so" \
  -L"$wdklib" -L"$ndklib" -lsoftndk-wdk -lsoftndk > "$work/out3" 2>&1 \
  || { cat "$work/out3"; fail "wdk_missing_names_runner: the module does not build without --no-undefined"; }
set +e
LD_LIBRARY_PATH="$wdklib:$ndklib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$runner" -t 10 "$work/bad_link.so" > "$work/out4" 2> "$work/err4"
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$work/out4" "$work/err4"; fail "wdk_missing_names_runner: exit $rc, not 2"; }
for n in KeMissingRoutineSoftNdkTest KeMissingDataSoftNdkTest; do
  grep -q "undefined symbol: $n" "$work/err4" || { cat "$work/err4"; fail "wdk_missing_names_runner: $n not listed"; }
done
grep -q "2 undefined symbol(s)" "$work/err4" || { cat "$work/err4"; fail "wdk_missing_names_runner: no count"; }
grep -q "^FAIL bad_link" "$work/out4" || { cat "$work/out4"; fail "wdk_missing_names_runner: no FAIL line"; }
echo "PASS wdk_missing_names_runner"; passed=$((passed + 1))
echo "$passed passed, 0 failed"
