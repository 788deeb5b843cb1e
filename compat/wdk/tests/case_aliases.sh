#!/bin/sh
# softndk-wdk-case-aliases: a driver written for a case-insensitive file system (#include
# "lam.h" for Lam.h, "../Common/Defs.h" for common/defs.h) builds once the alias directory is
# on the include path, the helper says what it aliased, and the aliases are forwarding headers
# through which clang (when installed) gives no -Wnonportable-include-path.
# usage: case_aliases.sh SCRIPT CC "CFLAGS"
set -eu
script=$1 cc=$2 cflags=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL wdk_case_aliases: $*"; exit 1; }
mkdir -p "$work/drv/src" "$work/drv/common"
printf '#define LAM_PAGES 4\n' > "$work/drv/src/Lam.h"
printf '#define DEFS_OK 1\n' > "$work/drv/common/defs.h"
printf '#define SUB_OK 1\n' > "$work/drv/common/Sub.h"
cat > "$work/drv/src/driver.c" <<'SRC'
#include <ntddk.h>
#include <Wdmsec.h>
#include "lam.h"
#include "Common/Defs.h"
#include "common\sub.h"
int softndk_case_alias_test(void) { return LAM_PAGES + DEFS_OK + SUB_OK; }
SRC
# shellcheck disable=SC2086
if $cc $cflags -c "$work/drv/src/driver.c" -o "$work/d.o" 2> "$work/err0"; then
  fail "the mis-cased includes compiled without aliases (the test proves nothing)"
fi
"$script" "$work/alias" "$work/drv/src" "$work/drv" > "$work/out" || fail "the helper failed"
grep -q "alias: lam.h -> " "$work/out" || { cat "$work/out"; fail "lam.h not aliased"; }
grep -q "alias: Common/Defs.h -> " "$work/out" || { cat "$work/out"; fail "Common/Defs.h not aliased"; }
grep -q 'alias: common.sub.h -> ' "$work/out" || { cat "$work/out"; fail "common\\sub.h not aliased"; }
# shellcheck disable=SC2086
$cc $cflags -I"$work/alias" -c "$work/drv/src/driver.c" -o "$work/d.o" 2> "$work/err1" \
  || { cat "$work/out" "$work/err1"; fail "does not compile with the alias directory"; }
# forwarding headers, not links: clang warns about a mis-cased name reached through a link
for a in "$work/alias/lam.h" "$work/alias/Common/Defs.h"; do
  [ -f "$a" ] && [ ! -L "$a" ] || fail "$a is not a forwarding header"
done
if command -v clang > /dev/null 2>&1; then
  # shellcheck disable=SC2086
  clang $cflags -Werror -Wnonportable-include-path -I"$work/alias" -c "$work/drv/src/driver.c" \
    -o "$work/d2.o" 2> "$work/err2" || { cat "$work/err2"; fail "clang warns through the aliases"; }
fi
echo "PASS wdk_case_aliases"
