#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Invariant: the README, the man page godwit(1) and the binary's --help
agree: the README lists the commands `godwit --help` lists; for every
command, the options its --help shows are in the README's synopsis of that
command (demo: its own or those of run and migrate, "[run and migrate
options]") and in godwit(1), and every option the README shows is one the
command takes; every value option of run and migrate says its default in
--help; sizes are K/M/G/T everywhere. godwit(1) describes each option once
per command and no line of it starts with a dot (roff would eat it: "..."
renders as ".."). Every PARAM=NAME the docs give for a parameter with named
values (send-path=zerocopy|copy, recv-path=file, ...) is one `godwit params`
lists, and the binary takes it. Every URL scheme --help names is in
godwit(1)'s URLS and the README's URLs.
Usage: test_docs.py GODWIT SOURCE_DIR"""
import glob
import json
import os
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
commands = re.findall(r'^  ([a-z][a-z-]*) ', top.split('Commands:')[1].split('\n\n')[0], re.M)
readme = open(src + '/README.md').read()
block = readme.split('## Commands')[1].split('```')[1]
readme_opts = {}
cmd = None
for line in block.splitlines():
    m = re.match(r'godwit ([a-z][a-z-]*)', line)
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

# godwit(1): one entry per option and command, no line roff takes for a request.
for sec in re.split(r'^## ', man, flags=re.M)[1:]:
    seen = set()
    for o in re.findall(r'^\*(--[a-z][a-z0-9-]*)\*', sec, re.M):
        if o in seen:
            fails.append('godwit(1): %s is described twice under %s' % (o, sec.split('\n')[0]))
        seen.add(o)
for n, line in enumerate(man.splitlines(), 1):
    if line.strip().startswith(('.', "'")):
        fails.append('godwit(1) line %d starts with %r (roff reads it as a request)' % (n, line.strip()[:1]))

# URLs: every transport --help names is in godwit(1)'s URLS and the README's URLs.
schemes = re.findall(r'\b([a-z]+):[A-Z]', top.split('URLs:')[1].split('\n')[0]) if 'URLs:' in top else []
if len(schemes) < 3:
    fails.append('godwit --help names %s as URLs' % schemes)
man_urls = man.split('# URLS')[1].split('\n# ')[0] if '# URLS' in man else ''
readme_urls = readme.split('\nURLs: ')[1].split('\n\n')[0] if '\nURLs: ' in readme else ''
for sc in schemes:
    if '*%s:*' % sc not in man_urls:
        fails.append('godwit(1) URLS lacks %s:' % sc)
    if '`%s:' % sc not in readme_urls:
        fails.append("the README's URLs lack %s:" % sc)

# Value names: what `godwit params --json` lists is what the docs may write.
table = json.loads(subprocess.run([godwit, 'params', '--json'], capture_output=True,
                                  text=True).stdout)
named = {k: v['values'].split('|') for k, v in table.items() if 'values' in v}
for k in ('send-path', 'recv-path', 'compress', 'dirty-backend', 'converge-policy'):
    if k not in named:
        fails.append('godwit params: %s shows no value names' % k)
docs = [('README', readme), ('godwit(1)', man)]
docs += [(os.path.basename(f), open(f).read()) for f in sorted(glob.glob(src + '/docs/*.md'))]
checked = 0
for name, text in docs:
    for m in re.finditer(r'`([a-z][a-z-]*)=([A-Za-z0-9|-]+)', text):
        if m.group(1) not in named:
            continue
        for v in m.group(2).split('|'):
            checked += 1
            if not v.isdigit() and v.lower() not in named[m.group(1)]:
                fails.append('%s: %s=%s is not a value godwit params lists (%s)' %
                             (name, m.group(1), v, '|'.join(named[m.group(1)])))
for k, vals in sorted(named.items()):
    for v in vals:
        r = subprocess.run([godwit, 'run', '--set', '%s=%s' % (k, v), '--help'],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fails.append('godwit run --set %s=%s is refused: %s' % (k, v, r.stderr.strip()))

for f in fails:
    print('FAIL:', f)
print('%d commands, %d options in godwit(1), %d value names in the docs: %s' % (
      len(commands), len(man_opts), checked,
      'agree' if not fails else '%d disagreements' % len(fails)))
sys.exit(1 if fails else 0)
