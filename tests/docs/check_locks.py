#!/usr/bin/env python3
"""The locking claims stay checked: what util/lock.h can enforce only if the code uses it.

Fails (exit 1, one line per finding) on
  - a *_locked function in src/ whose first statement is not sndk_assert_held() (the name says
    "caller holds the lock": the assertion is what makes that a check, not a comment);
  - a plain pthread mutex in src/ outside the wrapper (util/lock.h and util/lock.c): no owner,
    so no assertion; no rank, so no order check;
  - a lock of src/ created without a rank (sndk_mutex_init, SNDK_LOCK_UNRANKED);
  - a difference between enum sndk_lock_rank and the rank table of docs/architecture.md
    (#lock-order), which must list the same ranks in the same order.

Usage: check_locks.py SOURCE_DIR
"""
import os
import re
import sys

LOCKED_DEF = re.compile(r"^[A-Za-z][^;{}]*\b([a-z0-9_]+_locked)\([^;]*$")
PLAIN = re.compile(
    r"\bpthread_mutex_t\b|\bPTHREAD_MUTEX_INITIALIZER\b|\bpthread_mutex_(lock|unlock|trylock|init)\(")
UNRANKED = re.compile(r"\bsndk_mutex_init\(|SNDK_LOCK_UNRANKED\)")


def main(root):
    bad = []
    src = os.path.join(root, "src")
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel in (os.path.join("src", "util", "lock.h"), os.path.join("src", "util", "lock.c")):
                continue  # the wrapper itself (lock.c: its contended path, timed on request)
            lines = open(path, encoding="utf-8").read().split("\n")
            for i, line in enumerate(lines):
                if PLAIN.search(line):
                    bad.append(f"{rel}:{i + 1}: a plain pthread mutex (use struct sndk_mutex)")
                if UNRANKED.search(line):
                    bad.append(f"{rel}:{i + 1}: a lock without a rank (enum sndk_lock_rank)")
                m = LOCKED_DEF.match(line)
                if not m:
                    continue
                j = i
                while j < len(lines) and lines[j] != "{":
                    j += 1
                first = lines[j + 1].strip() if j + 1 < len(lines) else ""
                if not first.startswith("sndk_assert_held("):
                    bad.append(f"{rel}:{i + 1}: {m.group(1)} does not start with sndk_assert_held")

    header = open(os.path.join(src, "util", "lock.h"), encoding="utf-8").read()
    body = re.search(r"enum sndk_lock_rank \{(.*?)\};", header, re.S)
    ranks = re.findall(r"^\s*(SNDK_LOCK_[A-Z_]+)", body.group(1), re.M) if body else []
    ranks = [r for r in ranks if r not in ("SNDK_LOCK_UNRANKED", "SNDK_LOCK_RANKS")]
    doc = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    section = doc.split("## Lock order", 1)[-1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(SNDK_LOCK_[A-Z_]+)` \|", section, re.M)
    if not ranks:
        bad.append("src/util/lock.h: enum sndk_lock_rank not found")
    if ranks != documented:
        bad.append("docs/architecture.md#lock-order: the rank table is not enum sndk_lock_rank "
                   f"(code: {' '.join(ranks)}; docs: {' '.join(documented)})")

    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
