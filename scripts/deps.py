#!/usr/bin/env python3
"""deps.py — circular dependencies between the .c files of a source folder.

Needs: a build (the object files of harp_lib, `make all`) and binutils' nm;
run from the repository root.
Gives: the file graph (A -> B when A uses a global symbol B defines), its
strongly connected components of more than one file and every elementary
cycle in them, each edge with the symbols it carries.

    scripts/deps.py                       # src/backend, build/
    scripts/deps.py --dir src --build build-asan
    scripts/deps.py --edges               # the whole graph too

Exit status 1 when there is a cycle, so a check can be repeated in CI.
"""
import argparse
import os
import subprocess
import sys
from collections import defaultdict

OBJ_ROOT = "CMakeFiles/harp_lib.dir"


def objects(build, folder):
    """{source path: object path} for the library's objects under folder."""
    root = os.path.join(build, OBJ_ROOT)
    out = {}
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in files:
            if f.endswith(".c.o"):
                obj = os.path.join(dirpath, f)
                src = os.path.relpath(obj, root)[: -len(".o")]
                if os.path.exists(src):  # not a stale object of a file moved away
                    out[src] = obj
    return out


def symbols(obj):
    """(defined globals, undefined) of one object file."""
    text = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRCVWG":  # global text, data, bss, rodata, common, weak
            defined.add(name)
    return defined, undefined


def graph(objs):
    """{a: {b: [symbols a uses from b]}}."""
    defs, uses = {}, {}
    for src, obj in objs.items():
        defs[src], uses[src] = symbols(obj)
    owner = {}
    for src, names in defs.items():
        for n in names:
            owner.setdefault(n, src)
    g = defaultdict(lambda: defaultdict(list))
    for src, names in uses.items():
        for n in sorted(names):
            b = owner.get(n)
            if b and b != src:
                g[src][b].append(n)
    return g


def sccs(g, nodes):
    """Tarjan's strongly connected components, each sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, {}):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycles(g, comp, limit=200):
    """Elementary cycles inside one component (each once, from its least
    file), at most `limit`."""
    found, members = [], set(comp)
    order = {v: i for i, v in enumerate(comp)}
    for start in comp:
        path = [start]

        def walk(v):
            for w in sorted(g.get(v, {})):
                if w not in members or order[w] < order[start]:
                    continue
                if w == start:
                    found.append(list(path))
                    if len(found) >= limit:
                        return True
                elif w not in path:
                    path.append(w)
                    if walk(w):
                        return True
                    path.pop()
            return False

        if walk(start):
            break
    return found


def short(path, folder):
    return os.path.relpath(path, folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--dir", default="src/backend")
    ap.add_argument("--edges", action="store_true", help="print every edge of the graph")
    a = ap.parse_args()
    objs = objects(a.build, a.dir)
    if not objs:
        sys.exit(f"deps.py: no objects of {a.dir} under {a.build}/{OBJ_ROOT} (run make all)")
    g = graph(objs)
    nodes = set(objs)
    if a.edges:
        for x in sorted(g):
            for y in sorted(g[x]):
                print(f"{short(x, a.dir)} -> {short(y, a.dir)}: {', '.join(g[x][y])}")
        print()
    comps = [c for c in sccs(g, nodes) if len(c) > 1]
    total = 0
    for c in comps:
        cyc = cycles(g, c)
        total += len(cyc)
        print(f"component of {len(c)} files: {' '.join(short(v, a.dir) for v in c)}")
        for cy in cyc:
            ring = cy + [cy[0]]
            print("  cycle: " + " -> ".join(short(v, a.dir) for v in ring))
            for x, y in zip(ring, ring[1:]):
                syms = g[x][y]
                more = f" (+{len(syms) - 4})" if len(syms) > 4 else ""
                print(f"    {short(x, a.dir)} -> {short(y, a.dir)}: {', '.join(syms[:4])}{more}")
    print(f"{len(objs)} files in {a.dir}: {len(comps)} circular components, {total} elementary cycles")
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())
