#!/usr/bin/env python3
"""file_calls.py OBJECTS_LIST - no two source files of the library call each other, directly or
around a circle: reads the object files listed (one per line), takes each one's defined and
undefined global symbols (nm), draws an arrow from a file to the file defining each symbol it
uses, and fails naming every circle (strongly connected set of files) with the symbols on its
arrows. The library's layers read bottom-up: a file calls only files below it."""
import os
import subprocess
import sys


def symbols(path):
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBRV":
            defined.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            used.add(p[1])
    return defined, used


def source_name(obj):
    # CMake names an object after its source: .../saga_objects.dir/engine/exec/net_run.c.o
    tail = obj.split(".dir/", 1)[-1]
    return tail[:-2] if tail.endswith(".o") else tail


def circles(graph):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    with open(sys.argv[1]) as f:
        objs = [l.strip() for l in f if l.strip()]
    if not objs:
        print("file_calls: no object files listed", file=sys.stderr)
        return 1
    defs, uses, owner = {}, {}, {}
    for o in objs:
        if not os.path.exists(o):
            print(f"file_calls: {o} is missing (build the library first)", file=sys.stderr)
            return 1
        name = source_name(o)
        defs[name], uses[name] = symbols(o)
        for s in defs[name]:
            owner.setdefault(s, name)
    graph = {f: {owner[s] for s in uses[f] if s in owner and owner[s] != f} for f in defs}
    found = circles(graph)
    for comp in found:
        print("file_calls: these files call each other: " + ", ".join(comp), file=sys.stderr)
        for a in comp:
            for b in comp:
                if b in graph[a]:
                    syms = sorted(s for s in uses[a] if owner.get(s) == b)
                    print(f"  {a} -> {b}: {', '.join(syms[:4])}", file=sys.stderr)
    print(f"file_calls: {len(defs)} files, {sum(len(g) for g in graph.values())} arrows, "
          f"{len(found)} circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
