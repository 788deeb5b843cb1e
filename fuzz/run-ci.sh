#!/bin/sh
# Build the libFuzzer targets with clang in their own build directory and run each for SECONDS
# (default 60). Exits non-zero when a target crashes, leaks, times out or fails to build.
#   fuzz/run-ci.sh [SECONDS]        env: SOFTNDK_FUZZ_BUILD (build dir), CC (default clang)
set -eu
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SOFTNDK_FUZZ_BUILD:-$root/build-fuzz}
cc=${CC:-clang}
targets="fuzz_rx_parser fuzz_mpa"
targets="$targets fuzz_connection" # a live listener driven by a raw TCP peer
targets="$targets fuzz_placement"  # an attached QP's RDMA placement against canaries
targets="$targets fuzz_smb"        # the SMB Direct message decoders
targets="$targets fuzz_smb2_client" # the SMB2 client against responses from the input
targets="$targets fuzz_shm_ring"    # the same-host stream's reader against raw ring bytes

gen=Ninja
command -v ninja >/dev/null 2>&1 || gen="Unix Makefiles"
cmake -S "$root" -B "$build" -G "$gen" -DCMAKE_C_COMPILER="$cc" -DSOFTNDK_FUZZ=ON \
      -DSOFTNDK_WERROR=ON -DBUILD_TESTING=OFF -DSOFTNDK_BUILD_TOOLS=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" --target $targets

# One target's bounded run; its report goes to $build/fuzz-work/T/report, 0 or 1 to .../status.
fuzz_one() {
    t=$1
    work="$build/fuzz-work/$t"
    mkdir -p "$work/corpus"
    # New inputs go to the work corpus; the committed seeds are read only.
    if ! "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$work/" \
            "$work/corpus" "$root/fuzz/corpus/$t" >"$work/log" 2>&1; then
        { echo "!! $t failed; artifacts in $work/, last lines of its log:"; tail -n 40 "$work/log"; } \
            >"$work/report"
        echo 1 >"$work/status"
    else
        grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)" "$work/log" \
            >"$work/report" || true
        echo 0 >"$work/status"
    fi
}

# The targets run in as many lanes as the machine has CPUs (at most 2: each target is one busy
# thread, fuzz_connection's listener a second one at times), every target still for SECONDS;
# the reports are printed in the targets' order once all lanes are done.
lanes=$(nproc 2>/dev/null || echo 1)
[ "$lanes" -gt 2 ] && lanes=2
for t in $targets; do rm -f "$build/fuzz-work/$t/status" "$build/fuzz-work/$t/report"; done
lane_pids=""
lane=0
while [ $lane -lt "$lanes" ]; do
    (
        i=0
        for t in $targets; do
            [ $((i % lanes)) = $lane ] && fuzz_one "$t"
            i=$((i + 1))
        done
    ) &
    lane_pids="$lane_pids $!"
    lane=$((lane + 1))
done
# shellcheck disable=SC2086
wait $lane_pids || true
status=0
for t in $targets; do
    echo "== $t for ${secs}s"
    cat "$build/fuzz-work/$t/report" 2>/dev/null
    [ "$(cat "$build/fuzz-work/$t/status" 2>/dev/null)" = 0 ] || status=1
done

# Regression (finding F3, docs/history/f3-findings.md): the QP attach held up where it used to race with
# the consumer's thread; each must end cleanly (no engine error, no sanitizer report, no hang).
cmake --build "$build" --target fuzz_connection_stall
for var in FUZZ_STALL_ADD_MS FUZZ_STALL_ATTACH_MS; do
    log="$build/fuzz-work/stall-$var.log"
    if ! env "$var=300" timeout 120 "$build/fuzz/fuzz_connection_stall" \
            "$root/fuzz/corpus/fuzz_connection/rev1_sends" >"$log" 2>&1 ||
            grep -q "error" "$log"; then
        echo "!! fuzz_connection_stall with $var=300 failed:"
        tail -n 40 "$log"
        status=1
    else
        echo "== fuzz_connection_stall $var=300: clean"
    fi
done
exit $status
