#!/usr/bin/env python3
"""The folders are the layers: each folder of src/ includes only from the folders below it.

ORDER lists the folders of src/ from the bottom up, a strict order: a file of folder x may
include from x itself, from a folder listed before x, and from the public headers (ndk/). Fails
(exit 1, one line per finding) on
  - an `#include "folder/..."` in src/ from a folder above its own
    (`src/x/y.c:LINE: includes from z/, above x/`), unless PENDING excuses it;
  - a folder of src/ that ORDER does not name (a new folder must say where it sits);
  - a PENDING entry whose excuse is no longer used (delete it).
check_layer_cycles.py builds the folder graph from the same includes and fails on a cycle.
docs/architecture.md draws the same order.

Usage: check_layers.py SOURCE_DIR
"""
import os
import re
import sys

# Bottom first, each folder above everything it uses. util: locks, log, addresses. iwarp: the
# wire codec. engine: progress threads (the ndkstat endpoint is served on it, so it sits below
# observe). observe: counters, trace, pcap, ndkstat's endpoint. faults: counts and traces its
# firings (above observe). verify: reports through the log, trace and counters (above observe;
# faults and verify do not use each other, so their order between them is free). config:
# resolves the options and parses the fault rules with them (above faults). device: what the
# connection works on (object base, adapter state, PDs, memory and the access check, CQs, SRQs,
# the QP's queues). datapath: the connection, calling all of the above. core: the objects that
# own connections (QP, connector, listener, shared endpoint) and the factories, the top.
ORDER = [
    "util", "iwarp", "engine", "observe", "faults", "verify", "config", "device", "datapath", "core"
]

# Upward includes that are being removed, by (folder, folder above it): why, and the only files
# excused (those that have them today; a new file gets no excuse). Delete an entry when its move
# is done: the check then enforces the order there too.
PENDING = {}
PENDING_FILES = {}
PUBLIC = "ndk"  # include/ndk/: the public headers, below everything
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([a-z_]+)/[^"]+"', re.M)


def includes(source_dir):
    """Every `#include "folder/..."` of src/: (file relative to src/, line, folder, included
    folder), and the folders of src/ found."""
    src = os.path.join(source_dir, "src")
    folders, found = [], []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        folders.append(folder)
        for name in sorted(os.listdir(path)):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(path, name), encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append((f"{folder}/{name}", line, folder, m.group(1)))
    return folders, found


def excused(rel, folder, dep):
    """Is this include one of the PENDING upward ones?"""
    return (folder, dep) in PENDING and rel in PENDING_FILES.get((folder, dep), set())


def main():
    assert len(set(ORDER)) == len(ORDER), "a folder listed twice in ORDER"
    assert set(PENDING) == set(PENDING_FILES), "every PENDING entry lists its files"
    rank = {folder: i for i, folder in enumerate(ORDER)}
    folders, found = includes(sys.argv[1])
    bad = [f"src/{folder}/: a folder the layer order does not name"
           for folder in folders if folder not in rank]
    used = set()
    for rel, line, folder, dep in found:
        if dep == PUBLIC or dep == folder or folder not in rank:
            continue
        if dep not in rank:
            bad.append(f"src/{rel}:{line}: includes from {dep}/, which is no folder of src/")
        elif rank[dep] > rank[folder]:
            if excused(rel, folder, dep):
                used.add((folder, dep))
                continue
            bad.append(f"src/{rel}:{line}: includes from {dep}/, above {folder}/")
    for key, why in sorted(PENDING.items()):
        if key not in used:
            bad.append(f"PENDING {key[0]}/ -> {key[1]}/ ({why}): no file needs it any more, "
                       f"delete the entry")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
