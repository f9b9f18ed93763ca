#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Invariant: the README, the man page godwit(1) and the binary's --help
agree: the README lists the commands `godwit --help` lists; for every
command, the options its --help shows are in the README's synopsis of that
command (demo: its own or those of run and migrate, "[run and migrate
options]") and in godwit(1), and every option the README shows is one the
command takes; every value option of run and migrate says its default in
--help; sizes are K/M/G/T everywhere.
Usage: test_docs.py GODWIT SOURCE_DIR"""
import re
import subprocess
import sys

godwit, src = sys.argv[1], sys.argv[2]
fails = []
OPT = re.compile(r'--[a-z][a-z0-9-]*')


def helptext(*args):
    r = subprocess.run([godwit, *args, '--help'], capture_output=True, text=True)
    if r.returncode != 0:
        fails.append('%s --help exited %d' % (' '.join(args) or 'godwit', r.returncode))
    return r.stdout


top = helptext()
commands = re.findall(r'^  ([a-z]+) ', top.split('Commands:')[1].split('\n\n')[0], re.M)
readme = open(src + '/README.md').read()
block = readme.split('## Commands')[1].split('```')[1]
readme_opts = {}
cmd = None
for line in block.splitlines():
    m = re.match(r'godwit ([a-z]+)', line)
    if m:
        cmd = m.group(1)
        readme_opts.setdefault(cmd, set())
    if cmd:
        readme_opts[cmd] |= set(OPT.findall(line.split('#')[0]))
man = open(src + '/docs/man/godwit.1.scd').read()
man_opts = set(re.findall(r'\*(--[a-z][a-z0-9-]*)\*', man))

if sorted(commands) != sorted(readme_opts):
    fails.append('commands: --help %s, README %s' % (sorted(commands), sorted(readme_opts)))
for c in commands:
    if 'godwit %s' % c not in man:
        fails.append('godwit(1) does not document %s' % c)
    h = set(OPT.findall(helptext(c).split('\nParameters (')[0])) - {'--help'}
    r = readme_opts.get(c, set())
    allowed = r | (readme_opts.get('run', set()) | readme_opts.get('migrate', set()) if c == 'demo' else set())
    for o in sorted(h - allowed):
        fails.append('README: godwit %s lacks %s (in its --help)' % (c, o))
    for o in sorted(r - h):
        fails.append('README: godwit %s shows %s, which its --help does not' % (c, o))
    for o in sorted(h - man_opts):
        fails.append('godwit(1) lacks %s (godwit %s --help has it)' % (o, c))

# Every value option of run and migrate says its default.
NO_DEFAULT = {'--api', '--qmp', '--to', '--cancel', '--incoming', '--resolve', '--set', '--json',
              '--help', '--dirty-limit-start', '--on-timeout'}
for c in ('run', 'migrate'):
    text = helptext(c).split('\nParameters (')[0]
    entries = re.split(r'\n(?=  --)', text)
    for e in entries[1:]:
        o = OPT.match(e.strip()).group(0)
        if o not in NO_DEFAULT and 'default' not in e:
            fails.append('godwit %s --help: %s shows no default' % (c, o))

for name, text in (('README', readme), ('--help', top), ('godwit(1)', man)):
    if 'K/M/G/T' not in text or re.search(r'K/M/G(?!/T)', text):
        fails.append('%s: sizes are not K/M/G/T' % name)

for f in fails:
    print('FAIL:', f)
print('%d commands, %d options in godwit(1): %s' % (len(commands), len(man_opts),
      'agree' if not fails else '%d disagreements' % len(fails)))
sys.exit(1 if fails else 0)
