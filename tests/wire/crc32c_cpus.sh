#!/bin/sh
# The CRC32c kernels and their start-up choice on x86-64 CPUs this machine is not: a subset of
# wire_crc32c_fold (vectors, chaining, the choice, SOFTNDK_CRC_KERNEL) run under qemu-user's CPU
# models, each of which must run exactly the kernels it has and skip the others:
#   qemu64    no SSE4.2          -> table only
#   Nehalem   SSE4.2             -> sse42
#   Westmere  + PCLMULQDQ        -> pclmul, hybrid128, sse42
#   Haswell   + AVX2, no VPCLMULQDQ (like many CI machines) -> pclmul, hybrid128, sse42
# (qemu 7.2's TCG has neither VPCLMULQDQ nor AVX-512, so the kernels that need them, avx512,
# vpclmul256 and hybrid256, run only on real CPUs: wire_crc32c_fold itself.) About 3 s per
# model. Exit 77 without qemu-x86_64 (Debian qemu-user).
#   usage: crc32c_cpus.sh WIRE_CRC32C_FOLD_EXE
set -u
exe=$1
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
  echo "SKIP: qemu-x86_64 not installed (Debian package qemu-user)"
  exit 77
fi
tests=""
for k in avx512 vpclmul256 hybrid256 pclmul hybrid128 sse42; do
  tests="$tests -t crc32c_${k}_rfc3720 -t crc32c_${k}_chaining -t crc32c_env_${k}"
done
tests="$tests -t crc32c_table_rfc3720 -t crc32c_env_table -t crc32c_auto_choice"
tests="$tests -t crc32c_env_unknown -t crc32c_env_unsupported -t crc32c_first_use_from_threads"
fail=0
# check CPU KERNEL pass|skip
check() {
  for t in rfc3720 chaining; do
    if ! grep -q "^$(echo "$3" | tr '[:lower:]' '[:upper:]') crc32c_$2_$t\b" "$out"; then
      echo "FAIL: -cpu $1: crc32c_$2_$t should $3:"
      grep "crc32c_$2_$t" "$out"
      fail=1
    fi
  done
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for model in qemu64 Nehalem Westmere Haswell; do
  # shellcheck disable=SC2086 # $tests is a list of arguments
  timeout 120 qemu-x86_64 -cpu "$model" "$exe" $tests 2>&1 | grep -v "^qemu-x86_64: warning" >"$out"
  echo "== -cpu $model: $(tail -n 1 "$out")"
  if grep -q "^FAIL" "$out" || ! grep -q " 0 failed" "$out"; then
    cat "$out"
    fail=1
  fi
  for t in crc32c_table_rfc3720 crc32c_auto_choice crc32c_env_unknown crc32c_env_unsupported \
    crc32c_first_use_from_threads; do
    grep -q "^PASS $t\b" "$out" || { echo "FAIL: -cpu $model: $t did not pass"; fail=1; }
  done
  for k in avx512 vpclmul256 hybrid256; do check "$model" $k skip; done
  case $model in
  qemu64) for k in pclmul hybrid128 sse42; do check "$model" $k skip; done ;;
  Nehalem) check "$model" pclmul skip; check "$model" hybrid128 skip; check "$model" sse42 pass ;;
  *) for k in pclmul hybrid128 sse42; do check "$model" $k pass; done ;;
  esac
done
exit $fail
