#!/usr/bin/env bash
# tool_loopback.sh NDKSMB — ndksmb against ndksmb serve on loopback, over SMB Direct on softndk:
# put and get of every edge size with each channel and dialect, signed, several clients at
# once, a client killed mid-transfer, a wrong password and share, and the server's own account
# of what it served. Every byte compared (sha256 of what was put, of what came back and of the
# file in the served folder); the server must end cleanly. Bounded: every step has a timeout.
set -u
N=${1:?usage: tool_loopback.sh NDKSMB}
work=$(mktemp -d /tmp/softndk-smb-loop.XXXXXX)
srv_pid=""
cleanup() {
    [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
    wait 2>/dev/null
    [ -n "${SOFTNDK_SMB_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fails=0 passes=0
pass() { passes=$((passes + 1)); echo "PASS $*"; }
fail() { fails=$((fails + 1)); echo "FAIL $*"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

mkdir -p "$work/share" "$work/client"
timeout 300 "$N" serve "$work/share" --address 127.0.0.1 --port 0 -U smbtest%loop-pass \
    --ready-file "$work/port" --json >"$work/serve.out" 2>"$work/serve.err" &
srv_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "FAIL the server did not start: $(tail -n 3 "$work/serve.err")"; exit 1; }
port=$(cat "$work/port")
c() { timeout 60 "$N" -U smbtest%loop-pass --port "$port" --json "$@"; }
jget() { sed -n 's/.*"'"$2"'":\("[^"]*"\|[0-9.]*\).*/\1/p' "$1" | tr -d '"'; }

xfer() { # NAME SIZE ARGS...: put, get, compare; RDMA counters where RDMA must have been used
    local name=$1 size=$2
    shift 2
    local d="$work/client/$name" ch=rdma-inv
    mkdir -p "$d"
    for a in "$@"; do case $a in rdma | inline | rdma-inv) ch=$a ;; esac; done
    head -c "$size" /dev/urandom >"$d/in"
    if ! c "$@" //127.0.0.1/share put "$d/in" "$name.bin" >"$d/put.json" 2>"$d/put.err"; then
        fail "$name: put: $(grep 'error' "$d/put.err" | tail -n 1)"
        return
    fi
    if ! c "$@" //127.0.0.1/share get "$name.bin" "$d/out" >"$d/get.json" 2>"$d/get.err"; then
        fail "$name: get: $(grep 'error' "$d/get.err" | tail -n 1)"
        return
    fi
    local want got srv
    want=$(sha "$d/in") got=$(sha "$d/out") srv=$(sha "$work/share/$name.bin")
    [ "$want" = "$got" ] && [ "$want" = "$srv" ] || { fail "$name: sha256 differ (put $want, got $got, served file $srv)"; return; }
    local pr pw ri li
    pr=$(jget "$d/put.json" peer_rdma_reads) pw=$(jget "$d/get.json" peer_rdma_writes)
    ri=$(jget "$d/get.json" remote_invalidations) li=$(jget "$d/get.json" local_invalidations)
    if [ "$size" -ge 4096 ] && [ "$ch" != inline ]; then
        [ "${pr:-0}" -ge 1 ] && [ "${pw:-0}" -ge 1 ] || { fail "$name: no RDMA (server reads $pr, writes $pw)"; return; }
        if [ "$ch" = rdma-inv ]; then
            [ "${ri:-0}" -ge 1 ] && [ "${li:-0}" = 0 ] || { fail "$name: invalidations remote $ri local $li over rdma-inv"; return; }
        else
            [ "${ri:-0}" = 0 ] && [ "${li:-0}" -ge 1 ] || { fail "$name: invalidations remote $ri local $li over rdma"; return; }
        fi
    else
        [ "${pr:-0}" = 0 ] && [ "${pw:-0}" = 0 ] || { fail "$name: RDMA where none was due (reads $pr, writes $pw)"; return; }
    fi
    pass "$name: $size B, dialect $(jget "$d/get.json" dialect), server RDMA reads $pr writes $pw, invalidations remote $ri local $li"
}

for size in 0 1 1340 1341 4095 4096 1048577 8388615; do
    xfer "rdma-inv-$size" "$size" --channel rdma-inv
done
for size in 1 4096 1048577; do
    xfer "rdma-$size" "$size" --channel rdma
    xfer "inline-$size" "$size" --channel inline
done
xfer dialect-302 1048577 --dialect 3.0.2
xfer signed-311 1048577 --sign
xfer signed-302-rdma 1048577 --sign --dialect 3.0.2 --channel rdma
xfer depth-16-64k 3000001 --depth 16 --io-size 65536
xfer credits-8 1048577 --credits 8 --io-size 131072

# four clients at once
for i in 1 2 3 4; do
    head -c 2000003 /dev/urandom >"$work/client/par$i"
    c //127.0.0.1/share put "$work/client/par$i" "par$i.bin" >/dev/null 2>"$work/client/par$i.err" &
done
wait_ok=1
for j in $(jobs -p); do [ "$j" = "$srv_pid" ] || wait "$j" || wait_ok=0; done
ok=$wait_ok
for i in 1 2 3 4; do [ "$(sha "$work/client/par$i")" = "$(sha "$work/share/par$i.bin")" ] || ok=0; done
[ $ok = 1 ] && pass "parallel: 4 clients at once, every file equal" || fail "parallel: $(cat "$work"/client/par*.err | grep error | head -n 2)"

# a client killed mid-transfer: the server goes on
head -c 67108864 /dev/urandom >"$work/client/big"
# ndksmb itself in the background (not through a function or timeout: kill -9 must reach it)
# (4 KiB requests one at a time, so it lasts: 64 KiB ones took the whole 64 MiB in 0.12 s once
# blocking round trips got faster, and the put could end between two looks below; killed once
# 4 MiB of it reached the server)
"$N" -U smbtest%loop-pass --port "$port" --io-size 4096 --depth 1 //127.0.0.1/share \
    put "$work/client/big" big.bin >/dev/null 2>"$work/client/big.err" &
kp=$!
for _ in $(seq 1000); do
    [ "$(stat -c %s "$work/share/big.bin" 2>/dev/null || echo 0)" -ge 4194304 ] && break
    kill -0 $kp 2>/dev/null || break
    sleep 0.01
done
kill -9 $kp 2>/dev/null
wait $kp 2>/dev/null
rc=$?
[ $rc = 137 ] && pass "a client killed mid-transfer (SIGKILL)" ||
    fail "the 64 MiB put ended before the kill (exit $rc, $(stat -c %s "$work/share/big.bin" 2>/dev/null || echo 0) bytes served): $(grep -v '^ *$' "$work/client/big.err" | grep -m 2 -E 'error|WARNING|SUMMARY')"
xfer after-kill 1048577

# refusals name their status
if c //127.0.0.1/share ls >/dev/null 2>"$work/ok.err"; then pass "ls"; else fail "ls: $(tail -n 1 "$work/ok.err")"; fi
timeout 30 "$N" -U smbtest%wrong --port "$port" //127.0.0.1/share ls >/dev/null 2>"$work/bad.err"
grep -q 'STATUS_LOGON_FAILURE' "$work/bad.err" && pass "wrong password: STATUS_LOGON_FAILURE" || fail "wrong password: $(tail -n 1 "$work/bad.err")"
timeout 30 "$N" -U smbtest%loop-pass --port "$port" //127.0.0.1/nosuch ls >/dev/null 2>"$work/bad2.err"
grep -q 'STATUS_BAD_NETWORK_NAME' "$work/bad2.err" && pass "wrong share: STATUS_BAD_NETWORK_NAME" || fail "wrong share: $(tail -n 1 "$work/bad2.err")"
timeout 30 "$N" -U smbtest%loop-pass --port "$port" //127.0.0.1/share get ../../etc/passwd "$work/x" >/dev/null 2>"$work/bad3.err"
[ ! -s "$work/x" ] && grep -q 'error' "$work/bad3.err" && pass "path escape refused: $(grep -o 'STATUS_[A-Z_]*' "$work/bad3.err" | tail -n 1)" || fail "path escape: $(tail -n 1 "$work/bad3.err")"
# the server's numeric options: a word is refused, never taken as 0 (any port, no limit)
for bad in "--port abc" "--port 70000" "--connections 3x"; do
    # shellcheck disable=SC2086 # the option and its value are two words
    timeout 10 "$N" serve "$work/share" $bad >"$work/badopt.out" 2>"$work/badopt.err"
    st=$?
    [ $st = 2 ] && grep -qE 'not a number|0 to 65535' "$work/badopt.err" && pass "serve $bad refused (exit 2)" ||
        fail "serve $bad: exit $st: $(tail -n 1 "$work/badopt.err")"
done

# the server ends cleanly and says what it served
kill -TERM "$srv_pid"
if wait "$srv_pid"; then
    srv_pid=""
    reads=$(sed -n 's/.*"rdma_reads":\([0-9]*\).*/\1/p' "$work/serve.out")
    sinv=$(sed -n 's/.*"send_invalidates":\([0-9]*\).*/\1/p' "$work/serve.out")
    [ "${reads:-0}" -ge 1 ] && [ "${sinv:-0}" -ge 1 ] && pass "server: $(cat "$work/serve.out")" || fail "server counted no RDMA: $(cat "$work/serve.out")"
else
    srv_pid=""
    fail "server exited non-zero: $(grep -vE "^smb2 (conn|auth)" "$work/serve.err" | tail -n 5)"
fi
grep -iE 'AddressSanitizer|runtime error|ThreadSanitizer' "$work/serve.err" && fail "sanitizer report in the server"
echo "$passes passed, $fails failed"
[ $fails = 0 ]
