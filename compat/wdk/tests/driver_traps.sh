#!/bin/sh
# The build-level traps of the harness a new driver used to meet (docs/wdk.md, "Building a
# driver against it"): with only the consumer flags of softndk-wdk.pc / softndk::wdk and -Werror,
# a miniport-style DriverEntry(PVOID, PVOID) compiles (the headers declare none), MSVC's
# anonymous struct members and __declspec forms compile, Windows' IN_ADDR members compile; and
# glibc's 32-bit wide-character header, Linux's <netinet/in.h>, and an unknown __declspec form
# are build errors that say so.
# usage: driver_traps.sh CC "CFLAGS"
set -eu
cc=$1 cflags=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL wdk_driver_traps: $*"; exit 1; }
build() { # name: compiles $work/$1.c, output in $work/$1.out
  # shellcheck disable=SC2086
  $cc $cflags -Werror -Wall -Wextra -Wno-multichar -Wno-unknown-pragmas -c "$work/$1.c" \
    -o "$work/$1.o" > "$work/$1.out" 2>&1
}

cat > "$work/good.c" <<'SRC'
#include <ntddk.h>
#include <wsk.h>
#include <wchar.h>
typedef struct _NVME_HDR { UCHAR Opcode; UCHAR Flags; } NVME_HDR;
typedef struct _NVME_CMD { NVME_HDR; ULONG Nsid; } NVME_CMD; /* MSVC anonymous member */
__declspec(align(16)) static NVME_CMD Cmd;
__declspec(selectany) ULONG MpTraceLevel = 3;
__declspec(dllexport) __declspec(noinline) ULONG MpOpcode(VOID);
__declspec(dllexport) __declspec(noinline) ULONG MpOpcode(VOID) { return Cmd.Opcode + MpTraceLevel; }
__declspec(noreturn) VOID MpFatal(VOID);
ULONG DriverEntry(PVOID Argument1, PVOID Argument2); /* StorPort's */
ULONG DriverEntry(PVOID Argument1, PVOID Argument2)
{
    IN_ADDR a;
    SOCKADDR_IN sin;
    UNREFERENCED_PARAMETER(Argument1);
    UNREFERENCED_PARAMETER(Argument2);
    a.S_un.S_addr = 0;
    a.S_un.S_un_b.s_b1 = 10;
    sin.sin_addr.s_addr = a.s_addr;
    return (ULONG)wcslen(L"nvme") + sin.sin_addr.S_un.S_un_w.s_w1 + Cmd.Nsid;
}
SRC
build good || { cat "$work/good.out"; fail "the driver with the traps did not compile"; }
echo "PASS wdk_driver_traps_compile"

printf '#include <wchar.h>\n' > "$work/glibc_wchar.c"
cat >> "$work/glibc_wchar.c" <<'SRC'
#include <ntddk.h>
ULONG Len(PCWSTR s);
ULONG Len(PCWSTR s) { return (ULONG)wcslen(s); }
SRC
# glibc's wchar.h is only reachable when the harness's is not on the path first: put the system
# directory before it, as a driver that got glibc's would
sed -i 's/^#include <wchar.h>$/#include "\/usr\/include\/wchar.h"/' "$work/glibc_wchar.c"
if build glibc_wchar; then fail "glibc's <wchar.h> in driver code compiled"; fi
grep -q "glibc's <wchar.h>" "$work/glibc_wchar.out" || { cat "$work/glibc_wchar.out"; fail "no clear error for glibc's <wchar.h>"; }
echo "PASS wdk_driver_traps_glibc_wchar"

printf '#include <netinet/in.h>\n#include <wsk.h>\n' > "$work/netinet.c"
if build netinet; then fail "<netinet/in.h> in driver code compiled"; fi
grep -q "Windows' IN_ADDR" "$work/netinet.out" || { cat "$work/netinet.out"; fail "no clear error for <netinet/in.h>"; }
echo "PASS wdk_driver_traps_netinet"

printf '#include <ntddk.h>\n__declspec(naked) VOID Bad(VOID);\n' > "$work/declspec.c"
if build declspec; then fail "an unknown __declspec form compiled"; fi
# clang names SOFTNDK_DECLSPEC_naked; gcc reports a syntax error at the declaration's line
grep -q -e "SOFTNDK_DECLSPEC_naked" -e "declspec.c:2:" "$work/declspec.out" || { cat "$work/declspec.out"; fail "the unknown __declspec form is not reported at its line"; }
echo "PASS wdk_driver_traps_declspec"
echo "PASS wdk_driver_traps"
