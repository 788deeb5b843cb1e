#!/usr/bin/env bash
# run.sh CASE NDKINFO NDKPERF NDKPING — one tool test case. Exit 0 pass, 1 fail, 77 skip.
# Every command is bounded (the tools' --timeout / -W, and `timeout` around them).
set -u
case_name=$1 NDKINFO=$2 NDKPERF=$3 NDKPING=$4
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; for f in "$work"/*; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
expect_line() { # FILE REGEX WHAT
    grep -Eq -- "$2" "$1" || fail "$3: no line matching '$2' in $(basename "$1")"
}
# exit status 3 = the provider build does not support something the case needs
skip_if_unsupported() { # STATUS ERRFILE
    if [ "$1" -eq 3 ]; then skip "$(tail -n 1 "$2")"; fi
}
# Wait (bounded) until FILE has a line matching REGEX; print the first match.
wait_for() { # FILE REGEX SECONDS
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        if grep -Eo -- "$2" "$1" 2>/dev/null | head -n 1 | grep .; then return 0; fi
        sleep 0.05
    done
    return 1
}

case $case_name in
ndkperf_perftest)
    # ndkperf --perftest (perftest's -R exchange) against itself: every test, -c (the ndkperf
    # pattern checked on every received message / Read / the written area), both roles' summary
    # (under TSan: polling RDMA-written memory is not a race TSan can see through, see the file)
    export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$(dirname "$0")/../tsan-rdma-poll.supp"
    for t in send_bw write_bw read_bw send_lat write_lat read_lat; do
        case $t in *_bw) size=4096 ;; *) size=8 ;; esac
        timeout 60 "$NDKPERF" $t --perftest --bind 127.0.0.1 -p 0 -n 3000 -s $size -c --timeout 50 -r 256 \
            >"$work/$t.srv" 2>"$work/$t.srv.err" &
        srv=$!
        pids+=($srv)
        port=$(wait_for "$work/$t.srv.err" 'listening on port [0-9]+' 10 | grep -o '[0-9]*$') ||
            fail "$t: the --perftest server did not listen"
        timeout 60 "$NDKPERF" $t --perftest -p "$port" -n 3000 -s $size -c --timeout 50 -r 256 \
            127.0.0.1 >"$work/$t.cli" 2>"$work/$t.cli.err"; st=$?
        skip_if_unsupported $st "$work/$t.cli.err"
        [ $st -eq 0 ] || fail "$t: the --perftest client exited $st: $(tail -n 1 "$work/$t.cli.err")"
        wait $srv; st=$?
        [ $st -eq 0 ] || fail "$t: the --perftest server exited $st: $(tail -n 1 "$work/$t.srv.err")"
        for r in srv cli; do
            expect_line "$work/$t.$r" "^ndkperf: perftest $t (server|client): peer perftest 6.06, [0-9]+ communication messages received" "$t $r"
        done
        case $t in
        write_bw | read_bw) expect_line "$work/$t.srv" "the client reports 3000 iterations of $size bytes" "$t server" ;;
        *) ;;
        esac
        case $t in
        send_bw) expect_line "$work/$t.srv" "3000 iterations of $size bytes, every completion STATUS_SUCCESS; 3000 received messages checked against the ndkperf pattern" "$t server" ;;
        write_bw) expect_line "$work/$t.srv" "the written area checked against the ndkperf pattern" "$t server" ;;
        read_bw | read_lat) expect_line "$work/$t.cli" "3000 received messages checked against the ndkperf pattern" "$t client" ;;
        send_lat) for r in srv cli; do expect_line "$work/$t.$r" "3000 received messages checked against the ndkperf pattern" "$t $r"; done ;;
        write_lat) for r in srv cli; do expect_line "$work/$t.$r" "3000 received messages checked \\(perftest's zeros, the last byte its counter\\)" "$t $r"; done ;;
        esac
        expect_line "$work/$t.cli" "^ +$size +3000 +[0-9]" "$t client result row"
    done
    ;;
ndkperf_remote_regions)
    # Least privilege: ndkperf registers remote access only on what the peer must reach (the landing
    # area of an RDMA test, with the one right the test needs); tokens differ between runs.
    for t in send_bw write_bw read_bw; do
        SOFTNDK_TRACE="$work/$t.trace" timeout 90 "$NDKPERF" --loopback $t -s 4096 -n 50 -c \
            --timeout 60 >"$work/$t.out" 2>"$work/$t.err"; st=$?
        skip_if_unsupported $st "$work/$t.err"
        [ $st -eq 0 ] || fail "ndkperf --loopback $t exited $st: $(tail -n 1 "$work/$t.err")"
        grep '"api.NdkRegisterMr"' "$work/$t.trace" >"$work/$t.regs" || fail "$t: no registration traced"
    done
    # send_bw: local write only, nothing remote
    grep -qv '"flags":"0x1"' "$work/send_bw.regs" && fail "send_bw registered remote access"
    # write_bw: per side one local MR and one remote-write (0x5) MR of exactly 64 slots x 4 KiB
    [ "$(grep -c '"flags":"0x5","' "$work/write_bw.regs")" -eq 2 ] || fail "write_bw: not 2 remote-write MRs"
    grep '"flags":"0x5"' "$work/write_bw.regs" | grep -qv '"len":262144,' && fail "write_bw: remote MR not the landing area"
    grep -Eq '"flags":"0x(2|3|7)"' "$work/write_bw.regs" && fail "write_bw registered remote read"
    # read_bw: remote read (0x2) only on the landing areas
    [ "$(grep -c '"flags":"0x2"' "$work/read_bw.regs")" -eq 2 ] || fail "read_bw: not 2 remote-read MRs"
    grep -Eq '"flags":"0x(5|7)"' "$work/read_bw.regs" && fail "read_bw registered remote write"
    # two runs, two different remote tokens
    a=$(grep -o '"flags":"0x5","token":"0x[0-9a-f]*"' "$work/write_bw.regs" | head -n 1)
    SOFTNDK_TRACE="$work/again.trace" timeout 90 "$NDKPERF" --loopback write_bw -s 4096 -n 50 -c \
        --timeout 60 >"$work/again.out" 2>"$work/again.err" || fail "second write_bw run"
    b=$(grep '"api.NdkRegisterMr"' "$work/again.trace" | grep -o '"flags":"0x5","token":"0x[0-9a-f]*"' | head -n 1)
    [ -n "$a" ] && [ "$a" != "$b" ] || fail "the landing token is the same in two runs ($a)"
    ;;
ndkinfo)
    timeout 30 "$NDKINFO" >"$work/out" 2>"$work/err"; st=$?
    [ $st -eq 0 ] || fail "ndkinfo exited $st"
    expect_line "$work/out" '^ RdmaTechnology +iWARP' "ndkinfo"
    expect_line "$work/out" '^ MaxCallerData +[0-9]+' "ndkinfo"
    timeout 30 "$NDKINFO" --json >"$work/json" 2>>"$work/err"; st=$?
    [ $st -eq 0 ] || fail "ndkinfo --json exited $st"
    expect_line "$work/json" '"RdmaTechnology":"iWARP"' "ndkinfo --json"
    ;;
ndkinfo_profiles)
    # the profile and its resolved values; an explicit SOFTNDK_LIMITS / SOFTNDK_RNR_WAIT_MS wins
    timeout 30 "$NDKINFO" >"$work/out" 2>"$work/err" || fail "ndkinfo exited $?"
    expect_line "$work/out" '^ Profile +iwarp \(' "default profile"
    expect_line "$work/out" '^ RnrWaitMs +0$' "default RnrWaitMs"
    expect_line "$work/out" '^ WriteCompletion +handed$' "default WriteCompletion"
    SOFTNDK_PROFILE=roce timeout 30 "$NDKINFO" >"$work/out" 2>"$work/err" || fail "roce: exit $?"
    expect_line "$work/out" '^ Profile +roce \(' "roce profile"
    expect_line "$work/out" '^ RnrWaitMs +1000$' "roce RnrWaitMs"
    expect_line "$work/out" '^ WriteCompletion +placed$' "roce WriteCompletion"
    SOFTNDK_PROFILE=intel-e810 timeout 30 "$NDKINFO" --json >"$work/json" 2>"$work/err" ||
        fail "intel-e810: exit $?"
    expect_line "$work/json" '"Profile":"intel-e810","RnrWaitMs":0,' "e810 profile"
    expect_line "$work/json" '"MaxInitiatorRequestSge":13,"MaxReceiveRequestSge":13,"MaxReadRequestSge":13,' "e810 SGEs"
    expect_line "$work/json" '"MaxInboundReadLimit":32,"MaxOutboundReadLimit":64,' "e810 IRD/ORD"
    SOFTNDK_PROFILE=chelsio-t6 timeout 30 "$NDKINFO" --json >"$work/json" 2>"$work/err" ||
        fail "chelsio-t6: exit $?"
    expect_line "$work/json" '"FRMRPageCount":128,' "t6 FRMR pages"
    expect_line "$work/json" '"MaxReceiveRequestSge":4,' "t6 receive SGEs"
    SOFTNDK_PROFILE=intel-e810 SOFTNDK_LIMITS=MaxReceiveRequestSge=5 SOFTNDK_RNR_WAIT_MS=250 \
        timeout 30 "$NDKINFO" --json >"$work/json" 2>"$work/err" || fail "override: exit $?"
    expect_line "$work/json" '"Profile":"intel-e810","RnrWaitMs":250,' "explicit RnrWaitMs wins"
    expect_line "$work/json" '"MaxInitiatorRequestSge":13,"MaxReceiveRequestSge":5,' "explicit limit wins"
    SOFTNDK_PROFILE=bogus timeout 30 "$NDKINFO" >"$work/out" 2>"$work/err"; st=$?
    [ $st -eq 1 ] || fail "an unknown profile: exit $st, want 1"
    expect_line "$work/err" "SOFTNDK_PROFILE='bogus': not a profile \\(iwarp, roce, intel-e810, chelsio-t6\\)" "unknown profile named"
    ;;
send_lat)
    timeout 90 "$NDKPERF" --loopback send_lat -n 200 --timeout 60 >"$work/out" 2>"$work/err"; st=$?
    skip_if_unsupported $st "$work/err"
    [ $st -eq 0 ] || fail "ndkperf --loopback send_lat exited $st: $(tail -n 1 "$work/err")"
    expect_line "$work/out" 'Send Latency Test' "header"
    expect_line "$work/out" '^ Provider +: softndk' "header"
    expect_line "$work/out" '^ IRD/ORD +: [0-9]+/[0-9]+ \(effective\)' "header"
    expect_line "$work/out" '^ #bytes #iterations +t_min\[usec\] +t_max\[usec\] +t_typical\[usec\] +t_avg\[usec\] +t_stdev\[usec\] +99% percentile\[usec\] +99\.9% percentile\[usec\]' "latency table head"
    expect_line "$work/out" '^ 2 +200 +[0-9.]+ +[0-9.]+ +[0-9.]+' "latency row"
    ;;
ndkperf_inline_defaults)
    # -I's defaults are perftest's: send_lat 236, write_lat 220, the others 0; within the
    # adapter's MaxInlineDataSize (an explicit -I above it is refused); every message checked.
    inline_of() { # TEST EXPECT [ARGS...]
        t=$1 want=$2
        shift 2
        timeout 60 "$NDKPERF" --loopback $t -s 64 -n 200 -c --timeout 30 "$@" >"$work/$t.out" \
            2>"$work/$t.err"; st=$?
        skip_if_unsupported $st "$work/$t.err"
        [ $st -eq 0 ] || fail "ndkperf --loopback $t $*: exit $st: $(tail -n 1 "$work/$t.err")"
        expect_line "$work/$t.out" "Inline size +: $want \\(max [0-9]+\\)" "$t $* inline $want"
    }
    inline_of send_lat 236
    inline_of write_lat 220
    inline_of send_bw 0
    inline_of read_lat 0
    inline_of send_lat 0 -I 0
    inline_of send_lat 100 -I 100
    SOFTNDK_LIMITS=MaxInlineDataSize=128 inline_of send_lat 128
    SOFTNDK_LIMITS=MaxInlineDataSize=128 timeout 60 "$NDKPERF" --loopback send_lat -I 200 -n 10 \
        --timeout 30 >"$work/out" 2>"$work/err"; st=$?
    [ $st -ne 0 ] || fail "-I above MaxInlineDataSize: exit 0"
    expect_line "$work/err" "send_lat: -I 200 is above the adapter's MaxInlineDataSize 128" "refusal"
    ;;
send_lat_histogram)
    # -e (blocking) with --histogram: the 1 us buckets on stderr hold every sample once.
    timeout 90 "$NDKPERF" --loopback send_lat -s 64 -e -n 300 --histogram --timeout 60 \
        >"$work/out" 2>"$work/err"; st=$?
    skip_if_unsupported $st "$work/err"
    [ $st -eq 0 ] || fail "ndkperf --loopback send_lat -e --histogram exited $st: $(tail -n 1 "$work/err")"
    expect_line "$work/out" '^ 64 +300 +[0-9.]+ +[0-9.]+ +[0-9.]+' "latency row"
    expect_line "$work/err" '^hist +[0-9]+\+? us [1-9][0-9]*$' "histogram lines"
    total=$(awk '/^hist/ {n += $4} END {print n + 0}' "$work/err")
    [ "$total" -eq 300 ] || fail "histogram buckets sum to $total, want 300"
    awk '/^hist/ {b = $2 + 0; if (b <= last) exit 1; last = b}' last=-1 "$work/err" ||
        fail "histogram buckets not in ascending order"
    ;;
lat_callback)
    # --callback: the latency loops run in the CQ notification callback (poll, post, re-arm);
    # every message checked (-c), two sizes (rounds) each, under the verifier where ctest sets it.
    for t in send_lat read_lat; do
        timeout 90 "$NDKPERF" --loopback $t -a --max-size 128 -n 300 -c --callback --timeout 60 \
            --out_json --out_json_file "$work/$t.json" >"$work/$t.out" 2>"$work/$t.err"; st=$?
        skip_if_unsupported $st "$work/$t.err"
        [ $st -eq 0 ] || fail "ndkperf --loopback $t --callback exited $st: $(tail -n 1 "$work/$t.err")"
        expect_line "$work/$t.out" '^ Completions +: events, work in the callback' "$t header"
        expect_line "$work/$t.out" '^ 64 +300 +[0-9.]+ +[0-9.]+ +[0-9.]+' "$t 64 B row"
        expect_line "$work/$t.out" '^ 128 +300 +[0-9.]+ +[0-9.]+ +[0-9.]+' "$t 128 B row"
        expect_line "$work/$t.json" '"events": true, "callback": true,' "$t JSON"
    done
    timeout 30 "$NDKPERF" --loopback send_bw --callback >"$work/out" 2>"$work/err"; st=$?
    [ $st -eq 2 ] || fail "send_bw --callback: exit $st, want 2"
    expect_line "$work/err" '^ndkperf: --callback applies to send_lat and read_lat' "usage error"
    ;;
blocking_stages)
    # bench/blocking_stages chains each message's stages in both blocking modes (not a timing
    # test: it checks that the chain is found and printed). Needs perf with tracepoint access.
    command -v perf >/dev/null || skip "perf not installed (Debian linux-perf)"
    perf record -q -o "$work/probe.data" -e syscalls:sys_enter_futex -- true >/dev/null 2>&1 ||
        skip "perf cannot record tracepoints here (root, or perf_event_paranoid -1)"
    timeout 100 "$(dirname "$0")/../../bench/blocking_stages" "$NDKPERF" --iters 300 --rounds 1 \
        >"$work/out" 2>"$work/err"; st=$?
    [ $st -eq 0 ] || fail "bench/blocking_stages exited $st: $(tail -n 1 "$work/err")"
    expect_line "$work/out" '^wait \(-e\): [1-9][0-9]* messages, 1 rounds' "the -e chain"
    expect_line "$work/out" '^callback \(--callback\): [1-9][0-9]* messages, 1 rounds' "the --callback chain"
    expect_line "$work/out" '^  callback -> consumer runs \(its wake-up\) +[0-9]+\.[0-9]+ us' "the consumer's stage"
    expect_line "$work/out" '^  read -> answer.s sendmsg \(CQ post, callback\) +[0-9]+\.[0-9]+ us' "the callback's stage"
    ;;
send_bw_check)
    timeout 90 "$NDKPERF" --loopback send_bw -s 65536 -n 200 -c --timeout 60 \
        --out_json --out_json_file "$work/result.json" >"$work/out" 2>"$work/err"; st=$?
    skip_if_unsupported $st "$work/err"
    [ $st -eq 0 ] || fail "ndkperf --loopback send_bw -c exited $st: $(tail -n 1 "$work/err")"
    expect_line "$work/out" 'Send BW Test' "header"
    expect_line "$work/out" ' Data check +: ON' "header"
    expect_line "$work/out" '^ #bytes +#iterations +BW peak\[MB/sec\] +BW average\[MB/sec\] +MsgRate\[Mpps\]' "BW table head"
    expect_line "$work/out" '^ 65536 +200 +[0-9.]+ +[0-9.]+ +[0-9.]+' "BW row"
    expect_line "$work/result.json" '"BW_average": [0-9.]+' "JSON"
    ;;
mismatch)
    timeout 60 "$NDKPERF" send_bw -p 0 --bind 127.0.0.1 -s 65536 -n 100 --timeout 30 \
        >"$work/server.out" 2>"$work/server.err" &
    spid=$!; pids+=($spid)
    port=$(wait_for "$work/server.err" 'listening on 127\.0\.0\.1:[0-9]+' 20 | sed 's/.*://')
    if [ -z "$port" ]; then
        wait $spid; st=$?
        skip_if_unsupported $st "$work/server.err"
        fail "the server never listened (exit $st)"
    fi
    timeout 60 "$NDKPERF" send_bw -p "$port" -s 4096 -n 100 --timeout 30 127.0.0.1 \
        >"$work/client.out" 2>"$work/client.err"; cst=$?
    wait $spid; sst=$?
    skip_if_unsupported $cst "$work/client.err"
    [ $cst -eq 1 ] || fail "the client exited $cst, expected 1"
    [ $sst -eq 1 ] || fail "the server exited $sst, expected 1"
    expect_line "$work/server.err" 'options do not agree between server and client: -s 65536 \(server\) vs 4096 \(client\)' "server"
    expect_line "$work/client.err" 'options do not agree between server and client: -s 65536 \(server\) vs 4096 \(client\)' "client"
    ;;
timeout)
    command -v python3 >/dev/null || skip "python3 is needed for a listener that never answers"
    # A TCP listener that never accepts: the kernel completes the TCP handshake, nobody ever
    # answers the MPA request.
    timeout 30 python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True); time.sleep(25)' >"$work/port" 2>&1 &
    pids+=($!)
    port=$(wait_for "$work/port" '^[0-9]+$' 10) || fail "no silent listener"
    start=$(date +%s%N)
    timeout 30 "$NDKPERF" send_lat -p "$port" --timeout 3 127.0.0.1 >"$work/out" 2>"$work/err"; st=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    skip_if_unsupported $st "$work/err"
    [ $st -eq 1 ] || fail "exit $st, expected 1"
    [ $ms -ge 2900 ] && [ $ms -le 8000 ] || fail "took $ms ms for --timeout 3"
    expect_line "$work/err" '^ndkperf: timeout: no result after 3 s \(--timeout\) while client: connecting' "reason"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "more than one line of reason"
    ;;
ndkping)
    timeout 60 "$NDKPING" -S -ServerAddr 127.0.0.1:0 -W 30 >"$work/server.out" 2>"$work/server.err" &
    spid=$!; pids+=($spid)
    port=$(wait_for "$work/server.out" 'Listening on 127\.0\.0\.1:[0-9]+' 20 | sed 's/.*://')
    if [ -z "$port" ]; then
        wait $spid; st=$?
        [ $st -eq 3 ] && skip "$(tail -n 1 "$work/server.err")"
        fail "the server never listened (exit $st)"
    fi
    timeout 60 "$NDKPING" -C -ServerAddr "127.0.0.1:$port" -ClientAddr 127.0.0.1 --count 10 \
        --size 256 -W 30 >"$work/client.out" 2>"$work/client.err"; cst=$?
    wait $spid; sst=$?
    [ $cst -eq 3 ] && skip "$(tail -n 1 "$work/client.err")"
    [ $cst -eq 0 ] || fail "the client exited $cst: $(tail -n 1 "$work/client.err")"
    [ $sst -eq 0 ] || fail "the server exited $sst: $(tail -n 1 "$work/server.err")"
    for side in server client; do
        expect_line "$work/$side.out" '^Adapter: softndk' "$side"
        expect_line "$work/$side.out" '^  IRD [0-9]+, ORD [0-9]+ \(effective\); private data sent 16 bytes, received 16 bytes' "$side"
        expect_line "$work/$side.out" '^NdkPing completes\.$' "$side"
    done
    expect_line "$work/client.out" '^Sent 10 messages of 256 bytes, every echo checked' "client"
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
exit 0
