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
echo "4 passed, 0 failed"
