#!/usr/bin/env bash
# rping.sh NDKRPING — ndkrping against itself on loopback (softndk to softndk): rping's protocol
# both roles, data validated on both sides, the server disconnecting first, a reject with
# private data, large multi-FPDU pings, CRC off, MPA rev 1, and a wrong STag either way.
# Exit 0 pass, 1 fail. Bounded: every run has -W and `timeout`.
set -u
NDKRPING=$1
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
wait_for() { # FILE REGEX SECONDS
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        grep -Eq -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
expect_line() { grep -Eq -- "$2" "$1" || fail "$3: no line matching '$2' in $(basename "$1")"; }

# pair NAME "SERVER-ARGS" "CLIENT-ARGS": run both; statuses in $sst / $cst
pair() {
    local name=$1 sargs=$2 cargs=$3 port
    for _ in 1 2 3; do
        port=$((30000 + RANDOM % 20000))
        SOFTNDK_LOG=info timeout 60 "$NDKRPING" -s -a 127.0.0.1 -p $port -W 50 $sargs \
            >"$work/$name.s.out" 2>"$work/$name.s.err" &
        spid=$!
        pids+=($spid)
        if wait_for "$work/$name.s.out" 'listening' 10; then break; fi
        wait $spid 2>/dev/null
    done
    SOFTNDK_LOG=info timeout 60 "$NDKRPING" -c -a 127.0.0.1 -p $port -W 50 $cargs \
        >"$work/$name.c.out" 2>"$work/$name.c.err"
    cst=$?
    wait $spid
    sst=$?
}

pair basic "-V -v" "-C 10 -S 64 -V -v"
[ $sst = 0 ] && [ $cst = 0 ] || fail "basic: server $sst, client $cst"
expect_line "$work/basic.c.out" '^ndkrping: client: 10 pings, data validated; the client disconnected$' "basic client"
expect_line "$work/basic.s.out" '^ndkrping: server: 10 pings served, data validated; the client disconnected$' "basic server"
[ "$(grep -c '^ping data: rdma-ping-' "$work/basic.c.out")" = 10 ] || fail "basic: not 10 ping lines"
expect_line "$work/basic.c.out" '^ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ\[' "rping's pattern, ping 0"
expect_line "$work/basic.c.out" '^ping data: rdma-ping-9: JKLMNOPQRSTUVWXYZ\[' "rping's pattern, ping 9 starts 9 letters later"
expect_line "$work/basic.s.out" '^server ping data: rdma-ping-9: JKLM' "the server's view of ping 9"
expect_line "$work/basic.c.err" 'connected .*MPA rev 2, CRC on, IRD 1, ORD 1, RTR' "negotiated"

pair server_disconnects "-V -C 3" "-C 10 -V"
[ $sst = 0 ] && [ $cst = 0 ] || fail "server_disconnects: server $sst, client $cst"
expect_line "$work/server_disconnects.s.out" 'server: 3 pings served, data validated; the server disconnected' "server side"
expect_line "$work/server_disconnects.c.out" "client: 3 pings, data validated; the server disconnected" "client side"

pair reject "--reject no-thanks" "-C 1"
[ $sst = 0 ] || fail "reject: server $sst"
[ $cst = 1 ] || fail "reject: client exited $cst, expected 1"
expect_line "$work/reject.s.out" 'server rejected the connection with 9 bytes of private data' "reject server"
expect_line "$work/reject.c.out" '^ndkrping: rejected with 9 bytes of private data: no-thanks$' "reject client"
expect_line "$work/reject.c.err" 'NdkConnect: STATUS_CONNECTION_REFUSED' "reject status"

pair large "-V" "-C 20 -S 65000 -V"
[ $sst = 0 ] && [ $cst = 0 ] || fail "large: server $sst, client $cst"
expect_line "$work/large.c.out" 'client: 20 pings, data validated' "large"

pair crc_off "-V --crc off" "-C 5 -V --crc off"
[ $sst = 0 ] && [ $cst = 0 ] || fail "crc_off: server $sst, client $cst"
expect_line "$work/crc_off.c.err" 'connected .*CRC off' "CRC off negotiated"

pair rev1 "-V" "-C 5 -V --mpa-rev 1"
[ $sst = 0 ] && [ $cst = 0 ] || fail "rev1: server $sst, client $cst"
expect_line "$work/rev1.c.err" 'connected .*MPA rev 1' "MPA rev 1 negotiated"

pair bad_stag_read "--bad-stag -V" "-C 3 -V"
[ $sst = 0 ] || fail "bad_stag_read: server $sst"
[ $cst = 1 ] || fail "bad_stag_read: client exited $cst, expected 1 (the connection ended)"
expect_line "$work/bad_stag_read.s.out" 'the RDMA Read with a bad STag completed with STATUS_ACCESS_VIOLATION' "refused Read"

pair bad_stag_advert "-V" "-C 3 -V --bad-stag"
[ $sst = 1 ] || fail "bad_stag_advert: server exited $sst, expected 1 (its Read refused)"
[ $cst = 0 ] || fail "bad_stag_advert: client $cst"
expect_line "$work/bad_stag_advert.c.out" 'Terminate sent 0x000100 x1' "the client's Terminate (RDMAP / remote protection / invalid STag)"
expect_line "$work/bad_stag_advert.s.err" 'RDMA Read: completion STATUS_ACCESS_VIOLATION' "the server's refused Read"

pair ucmatose "--ucmatose -C 12 -S 300" "--ucmatose -C 12 -S 300"
[ $sst = 0 ] && [ $cst = 0 ] || fail "ucmatose: server $sst, client $cst"
expect_line "$work/ucmatose.s.out" 'ucmatose server: 12 sent, 12 received \(300 bytes each\); ResponderHeld 0' "ucmatose server"
expect_line "$work/ucmatose.c.out" 'ucmatose client: 12 received, 12 sent \(300 bytes each\); the server disconnected' "ucmatose client"

# bad command lines: status 2 with a reason
timeout 10 "$NDKRPING" -c >"$work/usage.out" 2>&1; st=$?
[ $st = 2 ] || fail "ndkrping -c without -a exited $st, expected 2"
timeout 10 "$NDKRPING" -s -S 10 >"$work/usage.out" 2>&1; st=$?
[ $st = 2 ] || fail "ndkrping -S 10 exited $st, expected 2"
echo "PASS"
