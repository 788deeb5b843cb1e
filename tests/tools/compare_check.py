#!/usr/bin/env python3
"""Run bench/compare --quick --rounds 1 into a temporary folder and check its JSON: every
bandwidth row of the table has a CPU-per-GB figure for softndk and raw TCP, the blocking
latency rows (the thread woken, and the work in the callback, each pinned and unpinned) are in
the table with softndk's figure, and every point of the plot holds every plotted system (softndk, raw TCP, libfabric
tcp, UCX tcp), each exactly its row's median (None where that system did not run): at 64 B
latency, 64 KiB and 1 MiB bandwidth those are the table's; and the machine's state
(bench/machine_state) before the round and after it, in the JSON and the report.
    compare_check.py BENCH_COMPARE BUILD_DIR"""
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("compare_check: " + msg)
    sys.exit(1)


def main():
    compare, build = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([sys.executable, compare, "--quick", "--rounds", "1", "--no-plot",
                            "--build", build, "--out", out],
                           capture_output=True, text=True, timeout=150)
        print(p.stdout)
        if p.returncode != 0:
            fail("exit %d: %s" % (p.returncode, p.stderr[-400:]))
        if "CPU time per GB moved" not in p.stdout:
            fail("no CPU table in the report")
        with open(os.path.join(out, "latest.json")) as f:
            d = json.load(f)
    m, cpu, sweep = d["metrics"], d["cpu_per_gb"], d["sweep"]
    # the machine's state before the one round and after it, each a crossing time and a copy
    # rate, and the report's line that prints them
    states = d.get("machine_state")
    if not isinstance(states, list) or len(states) != 2:
        fail("machine_state: want one before the round and one after: %r" % (states,))
    for st in states:
        ns = st.get("line_one_way_ns")
        if not isinstance(ns, float) or not 0 < ns < 100000:
            fail("machine_state: %r" % (st,))
        for key in ("copy_GBps", "cross_copy_GBps"):
            if not isinstance(st.get(key), float) or not st[key] > 0:
                fail("machine_state: %s: %r" % (key, st))
    if "machine before each round and after the last" not in p.stdout or \
            "%.0f ns" % states[0]["line_one_way_ns"] not in p.stdout:
        fail("the report does not print the machine's state")
    for row, label in (("lat64_block", "64 B one-way latency, blocking"),
                       ("lat64_block_cb", "64 B one-way latency, blocking, callback"),
                       ("lat64_block_nopin", "64 B one-way latency, blocking, unpinned"),
                       ("lat64_block_cb_nopin", "64 B one-way, blocking, callback, unpinned")):
        if row not in m or not m[row]["in_table"] or m[row]["label"] != label:
            fail("no table row %s (%r)" % (row, label))
        v = m[row]["median"].get("softndk")
        if not isinstance(v, float) or not v > 0:
            fail("%s: no softndk median (%r)" % (row, v))
        if label not in p.stdout:
            fail("the report has no row %r" % label)
    for row in ("bw64k", "bw1m", "bw1m_nocrc", "bw1m_block", "write_bw1m"):
        for system in ("softndk", "rawtcp"):
            v = cpu.get(row, {}).get("median", {}).get(system)
            if not isinstance(v, float) or not v > 0:
                fail("%s: no CPU per GB for %s (%r)" % (row, system, v))
    points = {("bw", 65536): "bw64k", ("bw", 1 << 20): "bw1m", ("lat", 64): "lat64_poll"}
    for (kind, size), row in points.items():
        if len([p for p in sweep[kind] if p["size"] == size]) != 1:
            fail("plot has no single point at %s %d" % (kind, size))
    plotted = ("softndk", "rawtcp", "libfabric_tcp", "ucx_tcp")
    for kind in ("bw", "lat"):
        for pt in sweep[kind]:
            size = pt["size"]
            row = points.get((kind, size), "plot_%s%d" % (kind, size))
            for system in plotted:
                if system not in pt:
                    fail("plot %s %d has no %s entry" % (kind, size, system))
                if pt[system] != m[row]["median"].get(system):
                    fail("plot %s %d %s = %r, row %s = %r" % (
                        kind, size, system, pt[system], row, m[row]["median"].get(system)))
            for system in ("softndk", "rawtcp"):
                if pt[system] is None:
                    fail("plot %s %d: no %s figure" % (kind, size, system))
    sizes = [p["size"] for p in sweep["bw"]]
    if sizes != sorted(sizes) or len(sizes) < 3:
        fail("plot bandwidth sizes %r" % sizes)
    peers = sorted({s for k in ("bw", "lat") for p in sweep[k] for s in plotted[2:]
                    if p[s] is not None})
    print("compare_check: CPU per GB for 5 rows, 4 blocking latency rows, plot points = "
          "row medians (peers plotted: %s): ok" % (", ".join(peers) or "none installed"))


if __name__ == "__main__":
    main()
