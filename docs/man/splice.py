#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Build-time helper: put a C file into an scdoc page where a line reads
@INCLUDE name@, as a literal block (backslashes doubled for scdoc), so that
the example in the man page is exactly the file the installed-tree test
builds. Usage: splice.py TEMPLATE.scd FILE... > OUT.scd"""
import os
import sys

files = {os.path.basename(p): p for p in sys.argv[2:]}
out = []
with open(sys.argv[1]) as t:
    for line in t:
        s = line.strip()
        if s.startswith('@INCLUDE ') and s.endswith('@'):
            name = s[len('@INCLUDE '):-1]
            with open(files[name]) as f:
                body = f.read().replace('\\', '\\\\')
            out.append('```\n' + body + ('' if body.endswith('\n') else '\n') + '```\n')
        else:
            out.append(line)
sys.stdout.write(''.join(out))
