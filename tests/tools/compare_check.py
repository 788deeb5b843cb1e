#!/usr/bin/env python3
"""Run bench/compare --quick --rounds 1 into a temporary folder and check its JSON: every
bandwidth row of the table has a CPU-per-GB figure for softndk and raw TCP, and the plot's
points at 64 B latency, 64 KiB and 1 MiB bandwidth are exactly the table's medians.
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
    for row in ("bw64k", "bw1m", "bw1m_nocrc", "bw1m_block", "write_bw1m"):
        for system in ("softndk", "rawtcp"):
            v = cpu.get(row, {}).get("median", {}).get(system)
            if not isinstance(v, float) or not v > 0:
                fail("%s: no CPU per GB for %s (%r)" % (row, system, v))
    points = {("bw", 65536): "bw64k", ("bw", 1 << 20): "bw1m", ("lat", 64): "lat64_poll"}
    for (kind, size), row in points.items():
        pt = [p for p in sweep[kind] if p["size"] == size]
        if len(pt) != 1:
            fail("plot has %d points at %s %d" % (len(pt), kind, size))
        for system in ("softndk", "rawtcp"):
            if pt[0][system] != m[row]["median"][system]:
                fail("plot %s %d %s = %r, table %s = %r" % (kind, size, system, pt[0][system],
                                                            row, m[row]["median"][system]))
    sizes = [p["size"] for p in sweep["bw"]]
    if sizes != sorted(sizes) or len(sizes) < 3:
        fail("plot bandwidth sizes %r" % sizes)
    print("compare_check: CPU per GB for 5 rows, plot points = table medians: ok")


if __name__ == "__main__":
    main()
