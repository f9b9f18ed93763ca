#!/usr/bin/env python3
"""The ninja targets the unit and kvm suites of a meson build need (sanitizer builds
build only these: no benchmarks). Usage: unit_targets.py BUILD [--no-suite NAME]"""
import json
import os
import subprocess
import sys

build = os.path.abspath(sys.argv[1])
skip = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--no-suite" else None
tests = json.loads(subprocess.run(["meson", "introspect", build, "--tests"], capture_output=True,
                                  text=True, check=True).stdout)
files = {}
for t in json.loads(subprocess.run(["meson", "introspect", build, "--targets"], capture_output=True,
                                   text=True, check=True).stdout):
    files[t["id"]] = t["filename"]
out = set()
for t in tests:
    if not ({"godwit:unit", "godwit:kvm"} & set(t["suite"])) or (skip and "godwit:" + skip in t["suite"]):
        continue
    for word in t["cmd"]:
        if isinstance(word, str) and os.path.normpath(word).startswith(build + "/"):
            out.add(os.path.relpath(os.path.normpath(word), build))
    for d in t["depends"]:
        for f in files.get(d, []):
            out.add(os.path.relpath(f, build))
print(" ".join(sorted(out)))
