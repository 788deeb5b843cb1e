#!/bin/sh
# Bugcheck reports (docs/wdk.md, "Bugcheck reports"): a driver with deliberate bugs
# (crash_driver.c) run by softndk-wdkrun; each run must end with the class's exit status and a
# report naming the bugcheck, the class, what the thread was doing and the driver's line of the
# bug (marked BUG-... in the source), on stderr and in --report FILE / FILE.json.
# Under a sanitizer (SANITIZE = address or thread) whose handler was there first, the harness's
# report comes first and the sanitizer's follows, with its exit status: then any non-zero status
# is accepted for a signal and the sanitizer's report must follow ours.
# usage: crash_reports.sh WDKRUN DRIVER.so DRIVER_SOURCE [SANITIZE [COMPILER_ID]]
set -u
run=$1 drv=$2 src=$3 sanitize=${4:-} compiler=${5:-GNU}
# The report is written in the handler of a fatal signal with libdw, which allocates: not
# async-signal-safe, and TSan says so; the process is ending, and that is the price of names.
[ "$sanitize" = thread ] && export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}report_signal_unsafe=0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL $case: $*"; sed 's/^/  | /' "$work/err"; fails=$((fails + 1)); }
line_of() { grep -n "$1" "$src" | head -n 1 | cut -d: -f1; }

# case bug special exit_status bugcheck class doing pattern...
check() {
  case=$1 bug=$2 special=$3 want=$4
  shift 4
  if [ "$special" = "-" ]; then sp=""; else sp="--special-pool=$special"; fi
  # shellcheck disable=SC2086
  SOFTNDK_WDK_TEST_BUG=$bug timeout 60 "$run" -t 30 --report "$work/$case.txt" $sp "$drv" \
    > "$work/out" 2> "$work/err"
  rc=$?
  class_status=$want
  if [ -n "$sanitize" ] && [ "$rc" -ne "$want" ] && [ "$rc" -ne 0 ] &&
     grep -q "Sanitizer" "$work/err"; then
    # the sanitizer's handler ran after ours: its report must come after the harness's
    ours=$(grep -n "softndk-wdk bugcheck report" "$work/err" | head -n 1 | cut -d: -f1)
    theirs=$(grep -n "Sanitizer" "$work/err" | head -n 1 | cut -d: -f1)
    [ -n "$ours" ] && [ "$ours" -lt "$theirs" ] || { fail "the sanitizer's report came first"; return; }
    want=$rc
  fi
  [ "$rc" -eq "$want" ] || { fail "exit status $rc, want $want"; return; }
  for p in "$@"; do
    grep -qF -- "$p" "$work/err" || { fail "no \"$p\" on stderr"; return; }
    grep -qF -- "$p" "$work/$case.txt" || { fail "no \"$p\" in the report file"; return; }
  done
  grep -q "\"exit_status\":$class_status," "$work/$case.txt.json" ||
    { fail "JSON report: no exit_status $class_status"; return; }
  if command -v python3 > /dev/null 2>&1; then
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/$case.txt.json" \
      || { fail "the JSON report does not parse"; return; }
  fi
  echo "ok $case (exit $rc)"
}

check null null - 5 "*** SYSTEM_THREAD_EXCEPTION_NOT_HANDLED" "CLASS:   null_pointer" \
  "NULL pointer read of a field at offset 0x18" "DOING:   DriverEntry" \
  "CrashRegisterBuffer+" "crash_driver.c:$(line_of BUG-NULL)" "IRQL:    0 (PASSIVE_LEVEL)"
# Without special pool the freed block reads as the fill: the pointer loaded from it faults.
# The block itself is named when a register still holds its address: so in this build (gcc,
# -O1), not a promise in general (a sanitizer's build keeps it elsewhere).
if [ -z "$sanitize" ] && [ "$compiler" = GNU ]; then
  set -- "tag 'Crsh', 312 bytes" "allocated by CrashAllocateWr" "freed by CrashFreeWr"
else
  set --
fi
check uaf uaf - 6 "*** DRIVER_VERIFIER_DETECTED_VIOLATION" "CLASS:   freed_pool" \
  "is the freed-pool fill" "DOING:   a work item: CrashWorker" \
  "crash_driver.c:$(line_of BUG-UAF)" "$@"
# With it, the read of the freed block itself faults, at the line that does it.
check uaf_special uaf Crsh 6 "*** DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL" \
  "CLASS:   freed_pool" "read of freed pool" "(special pool)" \
  "crash_driver.c:$(line_of BUG-UAF)" "allocated by CrashAllocateWr" "freed by CrashFreeWr" \
  "<- CrashCompleteWr"
check overrun_special overrun all 7 "*** DRIVER_PAGE_FAULT_BEYOND_END_OF_ALLOCATION" \
  "CLASS:   pool_overrun" "write 1 byte(s) past the end of a pool block" \
  "crash_driver.c:$(line_of BUG-OVERRUN)" "64 bytes (special pool)" "allocated by CrashOverrun"
# In an NDK callback: DISPATCH_LEVEL on a softndk progress thread, so 0xD1.
check callback callback - 5 "*** DRIVER_IRQL_NOT_LESS_OR_EQUAL" "CLASS:   null_pointer" \
  "IRQL:    2 (DISPATCH_LEVEL)" \
  "DOING:   an NDK CQ notification callback (NDK_FN_CQ_NOTIFICATION_CALLBACK): CrashCqNotify" \
  "crash_driver.c:$(line_of BUG-CALLBACK)" "cq_notify_call+"
check stack stack - 8 "*** UNEXPECTED_KERNEL_MODE_TRAP" "CLASS:   stack_overflow" \
  "in the guard page below this thread's stack" "DOING:   a work item: CrashStackWorker" \
  "crash_driver.c:$(line_of BUG-STACK)"
check twice twice - 3 "*** BAD_POOL_CALLER" "CLASS:   bugcheck" "freed twice" \
  "DOING:   DriverEntry" "#0  CrashFreeWr+" "crash_driver.c:$(line_of BUG-TWICE)" \
  "freed by CrashFreeWr" "allocated by CrashAllocateWr"
check twice_special twice Crsh 3 "*** BAD_POOL_CALLER" "CLASS:   bugcheck" \
  "special pool block" "freed twice" "crash_driver.c:$(line_of BUG-TWICE)" "(special pool)"
check assert assert - 4 "*** KERNEL_SECURITY_CHECK_FAILURE" "CLASS:   assertion" \
  "assertion failed at" "crash_driver.c:$(line_of BUG-ASSERT)" "DOING:   DriverUnload: CrashUnload"
check divide divide - 11 "*** KMODE_EXCEPTION_NOT_HANDLED" "CLASS:   arithmetic" \
  "integer division by zero" "crash_driver.c:$(line_of BUG-DIVIDE)"
# A DriverEntry that fails: exit 1, no report, and (under ASan) nothing of the runner's leaks.
SOFTNDK_WDK_TEST_BUG=fail timeout 60 "$run" -t 30 "$drv" > "$work/out" 2> "$work/err"
rc=$?
case=entry_fails
if [ $rc -ne 1 ] || grep -q "STOP:\|LeakSanitizer" "$work/err"; then fail "exit $rc"; else echo "ok $case"; fi
# A clean run under special pool: no report, exit 0.
SOFTNDK_WDK_TEST_BUG=none timeout 60 "$run" -t 30 --special-pool=all "$drv" > "$work/out" 2> "$work/err"
rc=$?
case=clean_special
if [ $rc -ne 0 ] || grep -q "STOP:" "$work/err"; then fail "exit $rc"; else echo "ok $case"; fi
[ $fails -eq 0 ] || { echo "FAIL wdk_crash_reports: $fails case(s)"; exit 1; }
echo "PASS wdk_crash_reports"
