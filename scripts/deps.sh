#!/bin/sh
# Install what building and testing softndk needs, from Debian's packages, when something is
# missing. As root it installs; otherwise it prints the command to run and fails.
#   scripts/deps.sh [--ci]   (--ci adds what only CI needs: clang's sanitizer/fuzzer runtimes, tshark)
set -eu
need="cmake ninja-build gcc g++ pkg-config python3"
if [ "${1:-}" = "--ci" ]; then
  need="$need clang libclang-rt-14-dev tshark iproute2 nftables"
fi
missing=""
for p in $need; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "softndk needs:$missing" >&2
  echo "install them with: sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
