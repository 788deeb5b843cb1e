#!/usr/bin/env python3
"""The layers hold for calls too, not only for includes: no object file of the library refers to
a function or variable defined in a folder above its own.

check_layers.py reads `#include` lines; a header of a lower folder may still declare a function
that a higher folder defines (a dispatch table listing a create function of an object above it,
say), and then the arrow runs back up through the linker. This check reads the compiled objects
instead: for every object file, the symbols it leaves undefined (`nm -P`, type U) that another
object of the library defines, and the folders of both. Fails (exit 1) on each reference from a
folder to one above it in check_layers.ORDER:
  src/device/pd.c refers to sndk_qp_create, defined in src/core/qp.c (above device/)
It also fails on a cycle between files, in any folder: file a refers to file b and b, through
any chain, back to a (`cycle: src/datapath/rx.c -> src/datapath/conn.c -> src/datapath/rx.c`).
A call then never returns into a file it has left, except through a function pointer.
Calls through function pointers a higher layer hands down at run time (the seams: hooks, the
SRQ's receiver-not-ready waiter, the CQ's connection ops) are not references and pass, as they
should: that is how a lower layer calls up.

Usage: check_layer_calls.py OBJECT_FILE...   (the library's objects: $<TARGET_OBJECTS:...>)
"""
import re
import subprocess
import sys

from check_layer_cycles import cycles
from check_layers import ORDER

# build/src/CMakeFiles/softndk_core.dir/./core/qp.c.o, build/src/util/CMakeFiles/softndk_util.dir/log.c.o
FOLDER = re.compile(r"/src/(?:CMakeFiles/softndk_core\.dir/(?:\./)?)?([a-z_]+)/"
                    r"(?:CMakeFiles/[^/]+/(?:\./)?)?([A-Za-z0-9_]+\.c)\.o$")


def symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() and kind not in "N":  # global: text, data, bss, read-only, weak
            defined.add(name)
    return defined, undefined


def main():
    objs = [o for o in sys.argv[1:] if o.endswith(".o")]
    if not objs:
        print("check_layer_calls: no object files given", file=sys.stderr)
        return 2
    rank = {folder: i for i, folder in enumerate(ORDER)}
    where, unresolved = {}, {}
    for obj in objs:
        m = FOLDER.search(obj)
        if not m:
            print(f"check_layer_calls: cannot tell the folder of {obj}", file=sys.stderr)
            return 2
        folder, name = m.group(1), m.group(2)
        if folder not in rank:
            print(f"check_layer_calls: {folder}/ is not in check_layers.ORDER", file=sys.stderr)
            return 1
        defined, undefined = symbols(obj)
        src = f"src/{folder}/{name}"
        for sym in defined:
            where[sym] = (folder, src)
        unresolved[src] = (folder, undefined)
    bad = []
    for src, (folder, undefined) in sorted(unresolved.items()):
        for sym in sorted(undefined):
            if sym not in where:
                continue  # libc, pthread, a library outside softndk
            dfolder, dsrc = where[sym]
            if rank[dfolder] > rank[folder]:
                bad.append(f"{src} refers to {sym}, defined in {dsrc} (above {folder}/)")
    edges = {}
    for src, (folder, undefined) in unresolved.items():
        edges[src] = sorted({where[s][1] for s in undefined if s in where and where[s][1] != src})
    for _, path in cycles(edges):
        bad.append("cycle: " + " -> ".join(path))
    for line in bad:
        print(line)
    if not bad:
        print(f"check_layer_calls: {len(objs)} objects, {sum(map(len, edges.values()))} "
              "references between files, none up a layer, no cycle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
