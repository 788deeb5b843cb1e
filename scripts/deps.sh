#!/bin/sh
# Install what building and testing softndk needs, from Debian's packages, when something is
# missing. As root it installs; otherwise it prints the command to run.
#   scripts/deps.sh [--ci] [--bench]
# Three sets:
#   build  what the build needs: without it, this script fails (libunwind-dev and libdw-dev:
#          the WDK harness's bugcheck reports unwind and symbolize with them).
#   test   what some tests need; without it they skip (exit 77) with the reason:
#            tshark    wire_oracle, wire_pcap_ndkperf, test_obs_units (the Wireshark decode)
#            iproute2  every net_* test (network namespaces, veth, tc)
#            nftables  net_loss1, net_loss5, net_rdma_loss5, net_blackhole
#            liburing-dev  bench_send_paths_smoke's io_uring variant (built only with it)
#            libisal-dev   bench/wire_bench's ISA-L crc32_iscsi row (built only with it)
#            qemu-user     wire_crc32c_cpus (the CRC32c kernels on CPU models without AVX-512)
#            samba     test_smb's integration tests (an smbd on loopback)
#            smbclient     smb_server (Samba's client against the SMB2 server)
#          Not root, it names them and goes on (the net_* tests need root anyway).
#   --ci   what only CI needs: clang and its sanitizer/fuzzer runtimes (.ci/run).
#   --bench  the peers bench/compare runs softndk beside, and its plotter: libfabric-bin
#          (fi_pingpong, libfabric tcp), ucx-utils (ucx_perftest, UCX tcp), sockperf, iperf3,
#          gnuplot-nox. Without them bench/compare names each one missing and skips its rows.
# The interop suite (ctest -L interop, cmake -DSOFTNDK_INTEROP=ON) installs its own packages
# (QEMU, a guest kernel, the kernel source; ksmbd-tools only unpacked, since it conflicts with
# samba) when it runs; it is opt-in and not listed here.
set -eu
build="cmake ninja-build gcc g++ pkg-config python3 nettle-dev libunwind-dev libdw-dev"
test="tshark iproute2 nftables liburing-dev libisal-dev qemu-user samba smbclient"
ci=""
bench=""
for arg in "$@"; do
  case "$arg" in
  --ci) ci="clang libclang-rt-14-dev" ;;
  --bench) bench="libfabric-bin ucx-utils sockperf iperf3 gnuplot-nox" ;;
  *)
    echo "usage: scripts/deps.sh [--ci] [--bench]" >&2
    exit 2
    ;;
  esac
done
missing_of() {
  out=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out="$out $p"
  done
  echo "$out"
}
# shellcheck disable=SC2086 # word splitting of the package lists is wanted
missing_build=$(missing_of $build $ci)
# shellcheck disable=SC2086
missing_test=$(missing_of $test $bench)
missing="$missing_build$missing_test"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "softndk needs:$missing" >&2
  echo "install them with: sudo apt-get update && sudo apt-get install -y$missing" >&2
  if [ -n "$missing_build" ]; then
    exit 1
  fi
  echo "(going on: the tests that need$missing_test will skip, saying why)" >&2
  exit 0
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
