#!/usr/bin/env python3
"""The documented defaults are what the adapter reports.

Runs `ndkinfo --json` with no SOFTNDK_* variable set and compares it with docs/adapter.md:
  - every row of the NDK_ADAPTER_INFO table (field | default value | ...);
  - the AdapterFlags table: the flags marked "yes" are exactly the flags reported, and their
    values add up to the AdapterFlags default;
  - every other place in docs/ that states the default flags ("default flags (0x...)",
    "flags 0x..." in an example run).
Fails (exit 1) with one line per mismatch.

Usage: check_defaults.py SOURCE_DIR NDKINFO
"""
import json
import os
import re
import subprocess
import sys

TECH = {"NdkiWarp": "iWARP", "NdkInfiniBand": "InfiniBand", "NdkRoCE": "RoCE",
        "NdkRoCEv2": "RoCEv2"}


def number(text):
    """The leading number of a table cell: 64, 0xFFFFFFFF, 2^46, 1048576 (2^20)."""
    text = text.strip().strip("`")
    m = re.match(r"(0x[0-9a-fA-F]+|\d+\^\d+|\d+)\b", text)
    if not m:
        return None
    v = m.group(1)
    if v.lower().startswith("0x"):
        return int(v, 16)
    if "^" in v:
        base, exp = v.split("^")
        return int(base) ** int(exp)
    return int(v)


def table_after(lines, heading):
    """Rows (lists of cells) of the first table after the line equal to heading."""
    try:
        i = next(n for n, l in enumerate(lines) if l.strip() == heading)
    except StopIteration:
        return None
    rows, started = [], False
    for line in lines[i + 1:]:
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif started:
            break
    return rows[1:]  # without the header row


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, ndkinfo = sys.argv[1], sys.argv[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTNDK_")}
    run = subprocess.run([ndkinfo, "--json"], env=env, capture_output=True, text=True,
                         timeout=60)
    if run.returncode != 0:
        print(f"ndkinfo --json failed ({run.returncode}): {run.stderr.strip()}")
        return 1
    info = json.loads(run.stdout)
    problems = []
    path = os.path.join(root, "docs", "adapter.md")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")

    fields = table_after(lines, "### NDK_ADAPTER_INFO")
    if not fields:
        problems.append("docs/adapter.md: no NDK_ADAPTER_INFO defaults table")
        fields = []
    documented = set()
    for cells in fields:
        name, value = cells[0].strip("`"), cells[1]
        documented.add(name)
        if name == "Version":
            allowed = re.findall(r"\d+\.\d+", value)
            if info["version"] not in allowed:
                problems.append(f"Version: documented {value}, ndkinfo {info['version']}")
        elif name == "RdmaTechnology":
            sym = re.search(r"`(\w+)`", value)
            if not sym or TECH.get(sym.group(1)) != info["RdmaTechnology"]:
                problems.append(f"RdmaTechnology: documented {value}, ndkinfo "
                                f"{info['RdmaTechnology']}")
        elif name in info and isinstance(info[name], str):
            if value.strip("`") != info[name]:  # a name, such as the Profile
                problems.append(f"{name}: documented {value!r}, ndkinfo {info[name]!r}")
        elif name in info:
            v = number(value)
            if v != info[name]:
                problems.append(f"{name}: documented {value!r} = {v}, ndkinfo {info[name]}")
        else:
            problems.append(f"{name}: documented, but ndkinfo does not print it")
    for name in info:
        if name[0].isupper() and name not in documented:
            problems.append(f"{name}: printed by ndkinfo, missing from docs/adapter.md")

    flag_rows = table_after(lines, "`AdapterFlags`:") or []
    if not flag_rows:
        problems.append("docs/adapter.md: no AdapterFlags table")
    yes, total = set(), 0
    for cells in flag_rows:
        m = re.match(r"`NDK_ADAPTER_FLAG_(\w+)` \((0x[0-9a-fA-F]+)\)", cells[0])
        if not m:
            problems.append(f"AdapterFlags table: unreadable row {cells[0]!r}")
            continue
        if cells[1].strip().lower() == "yes":
            yes.add(m.group(1))
            total |= int(m.group(2), 16)
    if yes != set(info["flags"]):
        problems.append(f"AdapterFlags: documented yes {sorted(yes)}, ndkinfo "
                        f"{sorted(info['flags'])}")
    if total != info["AdapterFlags"]:
        problems.append(f"AdapterFlags: the 'yes' rows add up to {total:#x}, ndkinfo "
                        f"{info['AdapterFlags']:#x}")

    # Other statements of the default flags anywhere in docs/.
    stated = re.compile(r"(default flags \(|flags )(0x[0-9a-fA-F]{5,8})\b")
    for name in sorted(os.listdir(os.path.join(root, "docs"))):
        if not name.endswith(".md"):
            continue
        with open(os.path.join(root, "docs", name), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in stated.finditer(line):
                    if int(m.group(2), 16) != info["AdapterFlags"]:
                        problems.append(f"docs/{name}:{n}: flags {m.group(2)}, ndkinfo "
                                        f"{info['AdapterFlags']:#x}")
    for p in problems:
        print(p)
    print(f"check_defaults: {len(fields)} fields, {len(flag_rows)} flags, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
