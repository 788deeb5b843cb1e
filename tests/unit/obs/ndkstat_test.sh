#!/bin/bash
# ndkstat against a running ndkperf --loopback (two adapters, one connection):
#   ndkstat   table, --json (parsed), --prometheus (format checked), -i rates; consistent numbers
#   peercred  another user is refused: by the socket file's permissions (filesystem socket)
#             and by SO_PEERCRED (abstract socket) - run as nobody when we are root, else skip
# usage: ndkstat_test.sh CASE NDKPERF NDKSTAT
set -u
case_="$1"; NDKPERF="$2"; NDKSTAT="$3"
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

T=$(mktemp -d /tmp/softndk-ndkstat-XXXXXX) || fail "mktemp"
PERF_PID=
cleanup() { [ -n "$PERF_PID" ] && kill "$PERF_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

# Start ndkperf; wait until both adapters' endpoints answer with a connected connection.
# (-n, not -D: a run we stop ourselves; the report is not what is tested here)
start_perf() { # env...
    env "$@" "$NDKPERF" send_bw --loopback -s 4096 -n 1000000000 --timeout 60 \
        >"$T/perf.out" 2>"$T/perf.err" &
    PERF_PID=$!
}

wait_connected() { # COUNT ndkstat args...
    local want="$1"; shift
    for _ in $(seq 1 100); do
        if "$NDKSTAT" "$@" --json >"$T/probe.json" 2>/dev/null &&
           [ "$(grep -o '"state":"connected"' "$T/probe.json" | wc -l)" -ge "$want" ]; then
            return 0
        fi
        sleep 0.1
    done
    cat "$T/perf.err" >&2
    fail "ndkperf's endpoints never showed $want connected connection(s)"
}

case "$case_" in
ndkstat)
    export XDG_RUNTIME_DIR="$T/run"; mkdir -m 700 "$XDG_RUNTIME_DIR"
    start_perf SOFTNDK_STAT=on
    wait_connected 2 -p "$PERF_PID"
    ls -la "$XDG_RUNTIME_DIR/softndk" >&2
    # socket files: 0600 in a 0700 directory
    [ "$(stat -c %a "$XDG_RUNTIME_DIR/softndk")" = 700 ] || fail "directory mode"
    for s in "$XDG_RUNTIME_DIR"/softndk/*.sock; do
        [ "$(stat -c %a "$s")" = 600 ] || fail "socket $s mode $(stat -c %a "$s")"
    done
    [ "$(ls "$XDG_RUNTIME_DIR"/softndk/"$PERF_PID".*.sock | wc -l)" = 2 ] || fail "two endpoints expected"

    # table
    "$NDKSTAT" -p "$PERF_PID" >"$T/table.txt" || fail "ndkstat table"
    cat "$T/table.txt"
    [ "$(grep -c '^adapter ' "$T/table.txt")" = 2 ] || fail "two adapters in the table"
    grep -qE '^  Connect +1$' "$T/table.txt" || fail "Connect 1"
    grep -qE '^  Accept +1$' "$T/table.txt" || fail "Accept 1"
    grep -qE '^  HandshakesPending +0$' "$T/table.txt" || fail "HandshakesPending 0"
    grep -qE '^  IncomingUnanswered +0$' "$T/table.txt" || fail "IncomingUnanswered 0"
    grep -qE '^  HandshakesRefused +0$' "$T/table.txt" || fail "HandshakesRefused 0"
    grep -qE ' active +connected ' "$T/table.txt" || fail "active connection row"
    grep -qE ' passive +connected ' "$T/table.txt" || fail "passive connection row"
    grep -qE ' active +connected .* tcp *$' "$T/table.txt" || fail "transport column (XPORT, last)"
    grep -q 'listener 0x' "$T/table.txt" || fail "listener row"
    grep -qE 'listener 0x[0-9a-f]+ on 127\.0\.0\.1:[0-9]+$' "$T/table.txt" || fail "listener address"

    # JSON: valid, consistent with itself (the two ends see the same connection)
    "$NDKSTAT" -p "$PERF_PID" --json >"$T/s.json" || fail "ndkstat --json"
    if command -v python3 >/dev/null; then
        python3 - "$T/s.json" <<'EOF' || fail "JSON content"
import json, sys
doc = json.load(open(sys.argv[1]))
ads = doc["adapters"]
assert len(ads) == 2, ads
by_role = {}
for a in ads:
    c = a["counters"]
    for k in ("Connect", "Accept", "ActiveConnection", "RDMAInOctets", "RDMAOutOctets",
              "RDMAInFrames", "RDMAOutFrames", "CQError", "ConnectFailure", "ConnectionError"):
        assert isinstance(c[k], int), k
    assert c["ActiveConnection"] == 1
    assert len(a["connections"]) == 1, a["connections"]
    conn = a["connections"][0]
    by_role[conn["role"]] = (a, conn)
    assert conn["state"] == "connected"
    assert conn["ird"] >= 1 and conn["ord"] >= 1
    assert a["objects"]["QP"] >= 1
act, pas = by_role["active"], by_role["passive"]
assert act[0]["counters"]["Connect"] == 1 and pas[0]["counters"]["Accept"] == 1
assert act[1]["local"] == pas[1]["peer"] and act[1]["peer"] == pas[1]["local"]
assert act[1]["hs_out"] == pas[1]["hs_in"] > 20 and act[1]["hs_in"] == pas[1]["hs_out"] > 20
assert len(pas[0]["listeners"]) == 1
print("json ok")
EOF
    else
        grep -q '"adapters":\[' "$T/s.json" || fail "JSON shape"
    fi

    # Prometheus text format: every sample line is NAME{labels} VALUE, every metric has TYPE
    "$NDKSTAT" -p "$PERF_PID" --prometheus >"$T/s.prom" || fail "ndkstat --prometheus"
    head -12 "$T/s.prom"
    bad=$(grep -vE '^(# (HELP|TYPE) softndk_[a-z_]+ .+|softndk_[a-z_]+\{([a-z_]+="[^"]*",?)+\} [0-9]+)$' "$T/s.prom" | head -3)
    [ -z "$bad" ] || fail "not Prometheus text: $bad"
    [ "$(grep -c '^softndk_connect_total{' "$T/s.prom")" = 2 ] || fail "softndk_connect_total per adapter"
    grep -q '^# TYPE softndk_active_connection gauge$' "$T/s.prom" || fail "gauge type"
    # the door's gauges (docs/listener.md, "Handshake limits")
    grep -q '^# TYPE softndk_handshakes_pending gauge$' "$T/s.prom" || fail "HandshakesPending gauge"
    grep -q '^# TYPE softndk_incoming_unanswered gauge$' "$T/s.prom" || fail "IncomingUnanswered gauge"
    grep -q '^# TYPE softndk_handshakes_evicted_total counter$' "$T/s.prom" || fail "HandshakesEvicted"
    grep -qE '^softndk_connection_out_octets_total\{.*role="active".*\} [0-9]+$' "$T/s.prom" || fail "per-connection metric"

    # -i: repeated reports with rates
    "$NDKSTAT" -p "$PERF_PID" -i 0.3 -c 2 >"$T/rate.txt" || fail "ndkstat -i"
    grep -q 'RATE/s' "$T/rate.txt" || fail "rates column"
    "$NDKSTAT" -p "$PERF_PID" -i 0.3 -c 2 --json >"$T/rate.json" || fail "ndkstat -i --json"
    [ "$(wc -l <"$T/rate.json")" = 2 ] || fail "one JSON document per report"
    grep -q '"RDMAOutOctetsPerSec":' "$T/rate.json" || fail "rates in JSON"

    # bad command lines, and nothing to read
    "$NDKSTAT" -i 0 >/dev/null 2>&1; [ $? = 2 ] || fail "-i 0 must be a usage error"
    "$NDKSTAT" -p 999999999 >/dev/null 2>&1; [ $? = 1 ] || fail "unknown pid must exit 1"
    kill -0 "$PERF_PID" || fail "ndkperf died: $(cat "$T/perf.err")"
    kill "$PERF_PID"; wait "$PERF_PID" 2>/dev/null; PERF_PID=
    # a run that ends by itself removes its endpoints
    rm -f "$XDG_RUNTIME_DIR"/softndk/*.sock
    SOFTNDK_STAT=on "$NDKPERF" send_bw --loopback -s 64 -n 100 --timeout 30 >"$T/short.out" 2>&1 ||
        fail "short ndkperf run: $(cat "$T/short.out")"
    [ -z "$(ls "$XDG_RUNTIME_DIR"/softndk/ 2>/dev/null)" ] || fail "socket files left behind"
    echo ok
    ;;
peercred)
    [ "$(id -u)" = 0 ] || skip "needs root to run the client as another user (nobody)"
    command -v setpriv >/dev/null || skip "setpriv not installed"
    NOBODY=$(id -u nobody 2>/dev/null) || skip "no user nobody"
    chmod 755 "$T"
    ABS="@softndk-peercred-$$"
    start_perf SOFTNDK_STAT="$ABS" XDG_RUNTIME_DIR="$T/run"
    wait_connected 1 -s "$ABS"
    # same user: served
    "$NDKSTAT" -s "$ABS" >/dev/null || fail "same user refused"
    # another user on the abstract socket (no file permissions): SO_PEERCRED refuses
    out=$(setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --clear-groups "$NDKSTAT" -s "$ABS" 2>&1)
    rc=$?
    echo "nobody (abstract): rc=$rc: $out"
    [ $rc = 1 ] || fail "nobody was served on the abstract socket"
    echo "$out" | grep -q 'permission denied' || fail "no 'permission denied' from the endpoint"
    # another user on a filesystem socket: the 0600 file refuses before the process is asked
    mkdir -m 755 "$T/fs"
    kill "$PERF_PID"; wait "$PERF_PID" 2>/dev/null; PERF_PID=
    start_perf SOFTNDK_STAT="$T/fs/s.sock"
    wait_connected 1 -s "$T/fs/s.sock"
    out=$(setpriv --reuid="$NOBODY" --regid="$(id -g nobody)" --clear-groups "$NDKSTAT" -s "$T/fs/s.sock" 2>&1)
    rc=$?
    echo "nobody (file): rc=$rc: $out"
    [ $rc = 1 ] || fail "nobody was served on the 0600 socket"
    "$NDKSTAT" -s "$T/fs/s.sock" >/dev/null || fail "same user refused on the file socket"
    echo ok
    ;;
*) fail "unknown case $case_" ;;
esac
