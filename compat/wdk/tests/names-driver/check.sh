#!/bin/sh
# check.sh RUNNER DRIVER: run the names driver under the runner and require each line it must
# print (fixed strings, in any order) and none that say it failed. A shell check rather than
# ctest's PASS_REGULAR_EXPRESSION: one regex spanning lines needs "(.|\n)*", which CMake's
# backtracking matcher takes minutes over on a long output (a sanitizer's).
out=$("$1" -t 60 -n names_driver "$2" 2>&1)
rc=$?
printf '%s\n' "$out"
fail=0
for want in "WSK TCP over IPv4: 8 messages echoed, 1 accept event" \
    "error 0xC00000B5 (STATUS_IO_TIMEOUT)" \
    "names-driver: all checks passed" \
    "PASS names_driver"; do
    printf '%s\n' "$out" | grep -qF "$want" || { echo "check.sh: missing: $want"; fail=1; }
done
printf '%s\n' "$out" | grep -qE 'leak:|STOP:' && { echo "check.sh: a leak or a bugcheck"; fail=1; }
[ $rc = 0 ] || { echo "check.sh: the runner exited $rc"; fail=1; }
exit $fail
