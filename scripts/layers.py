#!/usr/bin/env python3
"""Check that the engine's folders form layers: no include or call circle
across folders inside src/.

Usage: scripts/layers.py BUILD_DIR [--graph]

Calls are read from the objects meson built (compile_commands.json maps each
object to its source file; `nm` gives the symbols each defines and uses),
includes from the sources' #include "..." lines. A file's folder is its path
below src/ ("." for src/ itself). Prints the folder graph with --graph, every
circle found, and exits 1 if there is one.

It also holds the engine's sizes to the house limits: no file in src/ over
MAX_FILE_LINES lines, no function over MAX_FUNCTION_LINES (a function is a
line "{" at column 0 after its signature, to the next "}" at column 0).
"""
import json
import os
import re
import subprocess
import sys


def folder_of(path, src):
    rel = os.path.relpath(path, src)
    d = os.path.dirname(rel)
    return d.split(os.sep)[0] if d else "."


def objects(build, src):
    """(object path, source path) for every engine object under src/."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        cmds = json.load(f)
    seen = {}
    for c in cmds:
        file = os.path.normpath(os.path.join(c["directory"], c["file"]))
        if not file.startswith(src + os.sep) or "-DGW_FAULT_INJECTION=1" in c["command"]:
            continue
        out = os.path.normpath(os.path.join(c["directory"], c["output"]))
        # One object per source: the release engine's, not libgodwit's copies.
        seen.setdefault(file, out)
    return [(o, s) for s, o in seen.items()]


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True).stdout
    used = {l.split()[-1] for l in out.splitlines() if l.strip()}
    return defined, used


def include_edges(src):
    inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    edges = set()
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            with open(path, errors="replace") as f:
                for line in f:
                    m = inc_re.match(line)
                    if not m:
                        continue
                    for base in (root, src):
                        target = os.path.normpath(os.path.join(base, m.group(1)))
                        if os.path.exists(target) and target.startswith(src + os.sep):
                            edges.add((path, target))
                            break
    return edges


MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 80


def over_limits(src):
    """Texts for every file and function of src/ over the limits."""
    out = []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            with open(path, errors="replace") as f:
                lines = f.read().split("\n")
            rel = os.path.relpath(path, src)
            if len(lines) - 1 > MAX_FILE_LINES:
                out.append("%s: %d lines (at most %d)" % (rel, len(lines) - 1, MAX_FILE_LINES))
            start = None
            for i, line in enumerate(lines):
                if line == "{" and i > 0:
                    start = i
                elif line.startswith("}") and start is not None:
                    n = i - start + 1
                    if n > MAX_FUNCTION_LINES:
                        out.append("%s:%d: %s: %d lines (at most %d)" % (
                            rel, start, lines[start - 1].strip()[:60], n, MAX_FUNCTION_LINES))
                    start = None
    return out


def circles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.normpath(os.path.join(here, "..", "src"))
    objs = objects(build, src)
    if not objs:
        sys.exit("layers: no engine objects in %s (build it first)" % build)
    owner, uses = {}, {}
    for obj, file in objs:
        defined, used = symbols(obj)
        for sym in defined:
            owner[sym] = file
        uses[file] = used
    why = {}  # (folder a, folder b) -> one example
    for file, used in uses.items():
        for sym in used:
            if sym in owner and owner[sym] != file:
                a, b = folder_of(file, src), folder_of(owner[sym], src)
                if a != b:
                    why.setdefault((a, b), "%s calls %s (%s)" % (
                        os.path.relpath(file, src), sym, os.path.relpath(owner[sym], src)))
    for a_path, b_path in include_edges(src):
        a, b = folder_of(a_path, src), folder_of(b_path, src)
        if a != b:
            why.setdefault((a, b), "%s includes %s" % (
                os.path.relpath(a_path, src), os.path.relpath(b_path, src)))
    graph = {}
    for a, b in why:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    if "--graph" in sys.argv:
        for a in sorted(graph):
            print("%-10s -> %s" % (a, " ".join(sorted(graph[a])) or "-"))
    found = circles(graph)
    for comp in found:
        print("layers: circle across folders: %s" % " <-> ".join(comp))
        for a, b in sorted(why):
            if a in comp and b in comp:
                print("  %s -> %s: %s" % (a, b, why[(a, b)]))
    big = over_limits(src)
    for text in big:
        print("layers: over the limit: %s" % text)
    if found or big:
        return 1
    print("layers: %d folders, %d files, no circle, none over %d lines a file or %d a function" % (
        len(graph), len(uses), MAX_FILE_LINES, MAX_FUNCTION_LINES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
