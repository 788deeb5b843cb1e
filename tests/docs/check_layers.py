#!/usr/bin/env python3
"""The folders are the layers: each folder of src/ includes only from the folders below it.

Fails (exit 1, one line per finding) on an `#include "folder/..."` in src/ that the table
LAYERS does not allow, and on a folder of src/ that the table does not name (a new folder must
say where it sits). docs/architecture.md draws the same table.

Usage: check_layers.py SOURCE_DIR
"""
import os
import re
import sys

# folder -> folders its files may include from (besides itself). observe/ knows no object:
# the counters are given addresses, the ndkstat endpoint serves the adapter's snapshot.
LAYERS = {
    "util": set(),
    "iwarp": {"util"},
    "engine": {"util"},
    "observe": {"util", "engine"},
    "config": {"util", "faults"},
    "faults": {"util", "iwarp", "observe"},
    "verify": {"util", "observe"},
    "datapath": {"util", "iwarp", "engine", "observe", "faults", "verify", "config", "core"},
    "core": {"util", "iwarp", "engine", "observe", "faults", "verify", "config", "datapath"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main():
    src = os.path.join(sys.argv[1], "src")
    bad = []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        if folder not in LAYERS:
            bad.append(f"src/{folder}/: a folder the layer table does not name")
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith((".c", ".h")):
                continue
            rel = f"{folder}/{name}"
            allowed = {folder} | LAYERS[folder]
            with open(os.path.join(path, name), encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                dep = m.group(1)
                if dep not in allowed and dep != "ndk":
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append(f"src/{rel}:{line}: includes from {dep}/, not allowed for {folder}/")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
