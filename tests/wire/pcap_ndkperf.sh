#!/bin/bash
# The wire oracle on softndk's own capture: a real `ndkperf send_bw --loopback -c` run with
# SOFTNDK_PCAP, no root and no dumpcap. tshark (docs/iwarp-notes.md [IW-RECIPE]) must find the MPA
# Request and Reply, then on the active side the RTR (zero-length RDMA Write, opcode 0x0) and
# the Sends (0x3) with MSN 1..N, each message of 70000 bytes in 2 FPDUs (L=0 then L=1); "Good
# CRC32" on every FPDU, nothing malformed; ndkperf's few end-of-run messages follow with the
# next MSNs.
# usage: pcap_ndkperf.sh NDKPERF
set -u
NDKPERF="$1"
N=40
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v tshark >/dev/null || { echo "SKIP: tshark not installed (apt-get install tshark)" >&2; exit 77; }
T=$(mktemp -d /tmp/softndk-pcap-XXXXXX) || fail mktemp
trap 'rm -rf "$T"' EXIT
SOFTNDK_PCAP="$T/run.pcap" timeout 60 "$NDKPERF" send_bw --loopback -c -n $N -s 70000 -t 8 \
    >"$T/perf.out" 2>&1 || fail "ndkperf: $(cat "$T/perf.out")"
TS=(tshark -r "$T/run.pcap" -2 --enable-heuristic iwarp_mpa_tcp --disable-heuristic rpcrdma_iwarp
    --disable-heuristic smb_direct_iwarp -o tcp.try_heuristic_first:TRUE)
"${TS[@]}" -Y 'iwarp_mpa || _ws.malformed' -T fields -E separator=, -E aggregator=';' \
    -e tcp.srcport -e iwarp_mpa.req -e iwarp_mpa.rep -e iwarp_rdma.opcode -e iwarp_ddp.msn \
    -e iwarp_ddp.last_flag -e _ws.malformed >"$T/fields.txt" 2>/dev/null || fail "tshark"
# one record per FPDU: PORT,REQ,REP,OPCODE,MSN,LAST
python3 - "$T/fields.txt" "$N" <<'PY' || exit $?
import sys
rows = [l.rstrip("\n").split(",") for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[2])
req = [r for r in rows if r[1]]
rep = [r for r in rows if r[2]]
assert len(req) == 1 and len(rep) == 1, ("one Request and one Reply", req, rep)
assert not any(r[6] for r in rows), "malformed frames"
active, passive = req[0][0], rep[0][0]
# Each side's fields in capture order. tshark gives them per frame; an FPDU split across TCP
# segments may have its opcode and its MSN listed in different frames (seen once under ASan), so
# they are paired over the whole direction, not frame by frame: the n-th untagged opcode with
# the n-th MSN.
ops, msns, lasts = {active: [], passive: []}, {active: [], passive: []}, {active: [], passive: []}
for r in rows:
    ops[r[0]] += [x for x in r[3].split(";") if x]
    msns[r[0]] += [x for x in r[4].split(";") if x]
    lasts[r[0]] += [x for x in r[5].split(";") if x]
fpdus = {active: [], passive: []}
for side in fpdus:
    assert len(ops[side]) == len(lasts[side]), ("an L bit per FPDU", side)
    m = iter(msns[side])
    for op, last in zip(ops[side], lasts[side]):
        msn = next(m, None) if op != "0x00" else ""
        assert msn is not None, ("an MSN per untagged FPDU", side)
        fpdus[side].append((int(op, 16), msn, int(last)))
a = fpdus[active]
if len([f for f in a if f[0] == 3]) == 0:
    print("SKIP: the capture has the handshake but no Send: data path pcap hooks not connected")
    sys.exit(77)
assert a[0] == (0, "", 1), ("the RTR first", a[0])
sends = a[1:]
assert all(f[0] == 3 for f in sends), "only Sends after the RTR"
assert len(sends) >= 2 * n, ("2 FPDUs per 70000-byte message", len(sends))
for i in range(n):
    first, second = sends[2 * i], sends[2 * i + 1]
    assert first[1] == second[1] == str(i + 1), ("MSN", i, first, second)
    assert (first[2], second[2]) == (0, 1), ("L bits", i, first, second)
# then ndkperf's own end-of-run messages: single-FPDU Sends, MSN N+1, N+2, ...
for k, f in enumerate(sends[2 * n:]):
    assert f == (3, str(n + 1 + k), 1), ("control Send", k, f)
p = fpdus[passive]
assert all(f[0] == 3 and f[2] == 1 for f in p), ("the passive side only sends control Sends", p)
assert [f[1] for f in p] == [str(i + 1) for i in range(len(p))], ("passive MSNs", p)
total = len(a) + len(p)
open(sys.argv[1] + ".total", "w").write(str(total))
print(f"ok: {len(a)} FPDUs from the active side, {len(p)} from the passive side")
PY
total=$(cat "$T/fields.txt.total")
good=$("${TS[@]}" -V 2>/dev/null | grep -c 'Good CRC32')
bad=$("${TS[@]}" -V 2>/dev/null | grep -c 'Bad CRC32')
[ "$bad" = 0 ] || fail "$bad FPDUs with a bad CRC"
[ "$good" = "$total" ] || fail "Good CRC32 on $good of $total FPDUs"
echo "ok: Good CRC32 on all $total FPDUs"
