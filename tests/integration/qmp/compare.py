#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compare the replies of one recorded QMP session played against godwit and
against QEMU: for every command both have (ids not starting "godwit-only"),
both answered "return" or both "error"; errors have the same class; every
member godwit returns, QEMU returns too, with the same JSON type, down the
tree (godwit may return fewer members: it has fewer parameters and
capabilities). Usage: compare.py GODWIT.jsonl QEMU.jsonl"""
import json
import sys

# Members QEMU 7.2 (Debian 12) does not have yet; newer QEMUs do.
NEWER_THAN_QEMU_7_2 = {'return.vcpu-dirty-limit'}


def kind(v):
    if isinstance(v, bool):
        return 'boolean'
    if isinstance(v, (int, float)):
        return 'number'
    if isinstance(v, str):
        return 'string'
    if v is None:
        return 'null'
    return 'array' if isinstance(v, list) else 'object'


def shape(g, q, path):
    if kind(g) != kind(q):
        return ['%s: godwit %s, QEMU %s' % (path, kind(g), kind(q))]
    errs = []
    if isinstance(g, dict):
        for k, v in g.items():
            if k not in q:
                if path + '.' + k not in NEWER_THAN_QEMU_7_2:
                    errs.append('%s.%s: QEMU has no such member' % (path, k))
                continue
            errs += shape(v, q[k], path + '.' + k)
    elif isinstance(g, list) and g and q:
        errs += shape(g[0], q[0], path + '[]')
    return errs


def replies(name):
    out = {}
    for line in open(name):
        r = json.loads(line)
        out[r['n']] = r
    return out


g, q = replies(sys.argv[1]), replies(sys.argv[2])
errs = []
compared = 0
for n in sorted(g):
    cmd = g[n]['cmd']
    if str(g[n]['reply'].get('id', '')).startswith('godwit-only') or n not in q:
        continue
    gr, qr = g[n]['reply'], q[n]['reply']
    top_g = 'error' if 'error' in gr else 'return'
    top_q = 'error' if 'error' in qr else 'return'
    where = '#%d %s' % (n, cmd.strip())
    compared += 1
    if top_g != top_q:
        errs.append('%s: godwit %s, QEMU %s (%s)' % (where, top_g, top_q, json.dumps(qr)[:200]))
        continue
    if gr.get('id') != qr.get('id'):
        errs.append('%s: id godwit %r, QEMU %r' % (where, gr.get('id'), qr.get('id')))
    if top_g == 'error':
        if gr['error']['class'] != qr['error']['class']:
            errs.append('%s: class godwit %s, QEMU %s' % (where, gr['error']['class'], qr['error']['class']))
        continue
    errs += ['%s: %s' % (where, e) for e in shape(gr['return'], qr['return'], 'return')]
print('%d replies compared' % compared)
for e in errs:
    print('MISMATCH', e)
sys.exit(1 if errs or compared < 10 else 0)
