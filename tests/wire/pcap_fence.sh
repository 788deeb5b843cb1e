#!/bin/bash
# The fence Read of WriteCompletion placed (docs/qp.md, "Write completion") on softndk's own
# capture of `ndkperf write_lat --loopback`, decoded by tshark: on each side, after the RTR
# (a zero-length Write), every Write is followed by a Read Request of size 0 (the fence) before
# the next Write; the other side answers each with one Read Response; nothing else but
# ndkperf's end-of-run Sends; CRC good on every FPDU, nothing malformed. And with
# WriteCompletion handed: no Read at all.
# usage: pcap_fence.sh NDKPERF
set -u
NDKPERF="$1"
N=20
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v tshark >/dev/null || { echo "SKIP: tshark not installed (apt-get install tshark)" >&2; exit 77; }
T=$(mktemp -d /tmp/softndk-fence-XXXXXX) || fail mktemp
trap 'rm -rf "$T"' EXIT
TS=(--enable-heuristic iwarp_mpa_tcp --disable-heuristic rpcrdma_iwarp
    --disable-heuristic smb_direct_iwarp -o tcp.try_heuristic_first:TRUE)
for mode in placed handed; do
    SOFTNDK_WRITE_COMPLETION=$mode SOFTNDK_PCAP="$T/$mode.pcap" timeout 60 "$NDKPERF" write_lat \
        --loopback -n $N -s 100 >"$T/$mode.out" 2>&1 || fail "ndkperf ($mode): $(cat "$T/$mode.out")"
    tshark -r "$T/$mode.pcap" -2 "${TS[@]}" -Y 'iwarp_mpa || _ws.malformed' -T fields \
        -E separator=, -E aggregator=';' -e tcp.srcport -e iwarp_mpa.req -e iwarp_mpa.rep \
        -e iwarp_rdma.opcode -e iwarp_rdma.rdmardsz -e _ws.malformed >"$T/$mode.txt" 2>/dev/null ||
        fail "tshark ($mode)"
    bad=$(tshark -r "$T/$mode.pcap" -2 "${TS[@]}" -V 2>/dev/null | grep -c 'Bad CRC32')
    [ "$bad" = 0 ] || fail "$mode: $bad FPDUs with a bad CRC"
done
python3 - "$T/placed.txt" "$T/handed.txt" "$N" <<'PY' || exit $?
import sys
def sides(path):
    rows = [l.rstrip("\n").split(",") for l in open(path) if l.strip()]
    assert not any(r[5] for r in rows), "malformed frames"
    req = [r for r in rows if r[1]]
    assert len(req) == 1, ("one MPA Request", req)
    out = {}
    for r in rows:
        if r[3]:
            sizes = iter(r[4].split(";")) if r[4] else iter(())
            for op in r[3].split(";"):
                op = int(op, 16)
                out.setdefault(r[0], []).append((op, next(sizes) if op == 1 else None))
    return req[0][0], out
n = int(sys.argv[3])
active, s = sides(sys.argv[1])
assert len(s) == 2, ("two sides", s.keys())
passive = next(p for p in s if p != active)
assert s[active][0] == (0, None), ("the RTR first", s[active][:2])
for port, fpdus in s.items():
    body = fpdus[1:] if port == active else fpdus
    ops = [op for op, _ in body]
    assert set(ops) <= {0, 1, 2, 3}, ("Writes, fences, Read Responses, the end-of-run Sends", port, ops)
    writes = [i for i, op in enumerate(ops) if op == 0]
    assert len(writes) >= n, ("the Writes", port, len(writes))
    for i in writes:
        nxt = [op for op in ops[i + 1:] if op != 2]  # the peer's Read Responses interleave
        assert nxt and nxt[0] == 1, ("a fence Read right behind Write", port, i, ops[i:i + 4])
    fences = [sz for op, sz in body if op == 1]
    assert all(sz == "0" for sz in fences), ("fences ask for 0 bytes", port, fences)
    other = passive if port == active else active
    answers = len([op for op, _ in s[other] if op == 2])
    assert answers == len(fences), ("one Read Response per fence", port, len(fences), answers)
_, h = sides(sys.argv[2])
for port, fpdus in h.items():
    assert all(op in (0, 3) for op, _ in fpdus), ("handed: no Read", port, fpdus[:6])
print(f"ok: placed: {len(s[active]) - 1} + {len(s[passive])} FPDUs, a fence behind every Write; "
      "handed: no Read")
PY
