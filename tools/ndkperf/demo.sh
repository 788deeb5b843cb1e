#!/usr/bin/env bash
# tools/ndkperf/demo.sh [BUILD_DIR] — the provider doing real work in well under a minute:
# ndkperf --loopback over a short sweep of sizes for Send, RDMA Write and RDMA Read, printing
# perftest's tables. A test the provider build refuses (ndkperf exit 3) is skipped with a
# one-line note. Exit 0 when every test ran or was skipped that way, 1 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-}
ndkperf=${NDKPERF:-}
if [ -z "$ndkperf" ]; then
    for b in ${build:+"$build"} "$root/build" "$root"/build*; do
        if [ -x "$b/tools/ndkperf/ndkperf" ]; then ndkperf="$b/tools/ndkperf/ndkperf"; break; fi
    done
fi
if [ -z "$ndkperf" ] || [ ! -x "$ndkperf" ]; then
    echo "demo: no ndkperf found; build first (cmake -S . -B build -G Ninja && cmake --build build)" >&2
    exit 1
fi

status=0
run() { # TITLE ARGS...
    local title=$1; shift
    echo
    echo "== $title: ndkperf --loopback $*"
    local err
    err=$(mktemp)
    "$ndkperf" --loopback "$@" --timeout 20 2>"$err"
    local st=$?
    if [ $st -eq 3 ]; then
        echo "skipped: $(tail -n 1 "$err")"
    elif [ $st -ne 0 ]; then
        echo "FAILED (exit $st): $(tail -n 1 "$err")"
        status=1
    fi
    rm -f "$err"
}

run "Send bandwidth"     send_bw  -a --max-size 1048576 -n 500
run "Send latency"       send_lat -a --max-size 65536 -n 500
run "RDMA Write bandwidth" write_bw -a --max-size 1048576 -n 500
run "RDMA Write latency" write_lat -a --max-size 65536 -n 500
run "RDMA Read bandwidth" read_bw -a --max-size 1048576 -n 500
run "RDMA Read latency"  read_lat -a --max-size 65536 -n 500
exit $status
