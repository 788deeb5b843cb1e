#!/usr/bin/env python3
"""No cycle between the folders of src/: the folder graph, built from the includes themselves
(folder x -> folder z when a file of x includes from z/), is acyclic.

The order check (check_layers.py) reads the includes against a table; this one needs no table,
so a cycle is caught even if the table were loosened. Fails (exit 1) with a cycle for each set of
folders that reach each other, each edge named by the files that make it:
  cycle: observe/ -> core/ -> observe/
    observe/ -> core/: src/observe/stat.c:18
    core/ -> observe/: src/core/adapter.c:15
The upward includes check_layers.py's PENDING excuses are left out of the graph (each is named
there with its reason), and so are the public headers (ndk/).

Usage: check_layer_cycles.py SOURCE_DIR
"""
import sys

from check_layers import PUBLIC, excused, includes


def cycles(edges):
    """The strongly connected components of more than one folder (Tarjan): for each, its
    folders and one cycle through its first."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [(comp, path_through(edges, comp)) for comp in comps]


def path_through(edges, comp):
    """A closed path from comp[0] back to itself inside comp (a shortest one, by BFS)."""
    start, inside = comp[0], set(comp)
    prev, queue = {}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, ())):
            if w not in inside:
                continue
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [comp[0]]


def main():
    _, found = includes(sys.argv[1])
    edges, where = {}, {}
    for rel, line, folder, dep in found:
        if dep == PUBLIC or dep == folder or excused(rel, folder, dep):
            continue
        edges.setdefault(folder, set()).add(dep)
        where.setdefault((folder, dep), []).append(f"src/{rel}:{line}")
    found_cycles = cycles(edges)
    for comp, cycle in found_cycles:
        print("cycle: " + " -> ".join(f"{f}/" for f in cycle))
        if len(comp) > len(cycle) - 1:
            print("  (folders that all reach each other: " + ", ".join(f"{f}/" for f in comp) + ")")
        for a, b in zip(cycle, cycle[1:]):
            sites = where[(a, b)]
            more = f" (and {len(sites) - 3} more)" if len(sites) > 3 else ""
            print(f"  {a}/ -> {b}/: " + ", ".join(sites[:3]) + more)
    return 1 if found_cycles else 0


if __name__ == "__main__":
    sys.exit(main())
