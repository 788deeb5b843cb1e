#!/bin/sh
# Packaging test: install softndk into a scratch prefix, then build an outside consumer against
# the installed headers and library with pkg-config and with CMake's find_package, run both,
# check that the library exports only SoftNdk* symbols and that each public header compiles on
# its own as C11 and C++ with -Wpedantic.
# usage: run.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
cc=${CC:-cc}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL install: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
libdir=$prefix/lib
[ -d "$libdir" ] || libdir=$(dirname "$(find "$prefix" -name libsoftndk.so | head -1)")
for f in include/ndk/ndkpi.h include/ndk/ndkinfo.h include/ndk/softndk.h; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
[ -f "$libdir/libsoftndk.so" ] && [ -f "$libdir/libsoftndk.a" ] || fail "libraries not installed"
[ -f "$libdir/pkgconfig/softndk.pc" ] || fail "softndk.pc not installed"
[ -f "$libdir/cmake/softndk/softndkConfig.cmake" ] || fail "CMake package not installed"
# Only what the installed layout holds: the NDK headers and the kernel-consumer harness.
extra=$(find "$prefix/include" -type f | grep -v -E '/ndk/(ndkpi|ndkinfo|softndk)\.h$|/ndk/wdk/[A-Za-z0-9_]+\.h$' || true)
[ -z "$extra" ] || fail "unexpected installed headers: $extra"

# 1. exported symbols
bad=$(nm -D --defined-only "$libdir/libsoftndk.so" | awk '$2 ~ /[TDBRVW]/ {print $3}' | grep -v '^SoftNdk' || true)
[ -z "$bad" ] || fail "exported symbols without the SoftNdk prefix: $bad"
echo "PASS install_exports_only_softndk_symbols"

# 2. headers on their own, C11 and C++
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
for h in ndkpi.h ndkinfo.h softndk.h; do
  printf '#include <ndk/%s>\n' "$h" > "$work/h.c"
  $cc -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" -c "$work/h.c" -o "$work/h.o" || fail "$h alone as C11"
  if command -v c++ >/dev/null 2>&1; then
    cp "$work/h.c" "$work/h.cpp"
    c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" -c "$work/h.cpp" -o "$work/h.o" || fail "$h alone as C++"
  fi
done
echo "PASS install_headers_self_contained"

# 3. pkg-config consumer, shared and static
export PKG_CONFIG_PATH=$libdir/pkgconfig
$cc -std=c11 -Wall -Wextra -Werror "$src/tests/install/consumer.c" -o "$work/consumer-pc" \
  $(pkg-config --cflags --libs softndk) || fail "pkg-config consumer does not build"
LD_LIBRARY_PATH=$libdir "$work/consumer-pc" || fail "pkg-config consumer failed"
$cc -std=c11 "$src/tests/install/consumer.c" -o "$work/consumer-static" \
  $(pkg-config --cflags softndk) "$libdir/libsoftndk.a" -lpthread || fail "static consumer does not build"
"$work/consumer-static" || fail "static consumer failed"
echo "PASS install_pkg_config_consumer"

# 4. CMake consumer
cmake -S "$src/tests/install/cmake-consumer" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null \
  || fail "find_package(softndk) consumer does not configure"
cmake --build "$work/cm" >/dev/null || fail "CMake consumer does not build"
LD_LIBRARY_PATH=$libdir "$work/cm/consumer" || fail "CMake consumer failed"
echo "PASS install_cmake_consumer"

# 5. Installed tools run from any prefix: move the installed tree to an odd place (a space, no
# loader path pointing at it) and run them with no LD_LIBRARY_PATH ($ORIGIN/../lib RPATH).
odd="$work/odd prefix/x"
mkdir -p "$(dirname "$odd")"
mv "$prefix" "$odd"
mkdir -p "$prefix" # the trap still removes it
oddlib=$odd/${libdir#"$prefix"/}
for t in ndkinfo ndkperf ndkstat ndkping softndk-wdkrun; do
  [ -x "$odd/bin/$t" ] || continue
  env -u LD_LIBRARY_PATH "$odd/bin/$t" --help > "$work/tool.out" 2>&1 || \
    env -u LD_LIBRARY_PATH "$odd/bin/$t" -h > "$work/tool.out" 2>&1 || true
  if grep -q "error while loading shared libraries" "$work/tool.out"; then
    cat "$work/tool.out"; fail "$t does not run from $odd"
  fi
done
[ -x "$odd/bin/softndk-wdkrun" ] || fail "softndk-wdkrun not installed"
env -u LD_LIBRARY_PATH "$odd/bin/ndkinfo" > "$work/ndkinfo.out" 2>&1 || { cat "$work/ndkinfo.out"; fail "installed ndkinfo does not run from an odd prefix"; }
echo "PASS install_tools_run_from_any_prefix"

# 6. The kernel-consumer harness as installed: linked_main.c, the case-alias helper, and a
# driver built with only pkg-config --cflags --libs softndk-wdk, run by the installed runner.
# (pkg-config output is shell words: no space in this prefix.)
mv "$odd" "$work/elsewhere"
odd=$work/elsewhere
oddlib=$odd/${libdir#"$prefix"/}
export PKG_CONFIG_PATH=$oddlib/pkgconfig
lm=$(pkg-config --variable=linked_main softndk-wdk)
[ -f "$lm" ] || fail "linked_main.c not installed ($lm)"
[ -x "$odd/bin/softndk-wdk-case-aliases" ] || fail "softndk-wdk-case-aliases not installed"
pkg-config --cflags softndk-wdk | grep -q -- "-Werror=implicit-function-declaration" \
  || fail "softndk-wdk.pc: implicit declarations are not errors"
pkg-config --libs softndk-wdk | grep -q -- "-Wl,--no-undefined" || fail "softndk-wdk.pc: no undefined-symbol check"
# Every harness header compiles on its own with only the .pc flags (the WDK layout: <ndkpi.h>
# beside <wdm.h>).
for h in "$odd"/include/ndk/wdk/*.h; do
  printf '#include <%s>\n' "$(basename "$h")" > "$work/wh.c"
  # shellcheck disable=SC2046
  $cc -std=c11 -c "$work/wh.c" -o "$work/wh.o" $(pkg-config --cflags softndk-wdk) \
    || fail "$(basename "$h") does not compile on its own with pkg-config softndk-wdk"
done
if [ -d "$src/examples/rdma-echo" ]; then
  # shellcheck disable=SC2046
  $cc -shared -fPIC "$src"/examples/rdma-echo/*.c -o "$work/rdma_echo.so" \
    $(pkg-config --cflags --libs softndk-wdk) -Wno-multichar -Wno-unknown-pragmas \
    || fail "the rdma-echo example does not build with pkg-config softndk-wdk"
  SOFTNDK_EPHEMERAL_PORTS=46400-46499 env -u LD_LIBRARY_PATH "$odd/bin/softndk-wdkrun" -t 120 \
    "$work/rdma_echo.so" > "$work/run.out" 2>&1 || { cat "$work/run.out"; fail "rdma-echo does not run"; }
  grep -q "leak:\|STOP:" "$work/run.out" && { cat "$work/run.out"; fail "rdma-echo leaked or bugchecked"; }
  # shellcheck disable=SC2046
  $cc "$src"/examples/rdma-echo/*.c "$lm" -o "$work/rdma_echo_linked" \
    $(pkg-config --cflags --libs softndk-wdk) -Wno-multichar -Wno-unknown-pragmas \
    -Wl,-rpath,"$oddlib" || fail "rdma-echo does not link with linked_main.c"
fi
mv "$odd" "$work/back" && rmdir "$prefix" && mv "$work/back" "$prefix"
echo "PASS install_wdk_harness"
echo "6 passed, 0 failed"
