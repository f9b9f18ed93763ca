#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Play libvirt-p2p.jsonl (libvirt's QMP sequence of a p2p migration) against
a source and a destination QMP socket, for one case. Each command's reply must
be of the kind QEMU 7.2 gave ("return" or "error" with the same class) and
have, for every member godwit returns that the recorded reply holds, the same
JSON type; each "check" holds; each awaited event arrives. Waits are bounded
by a count of reads or polls (a hang guard), never by how fast anything runs.
Usage: libvirt.py CASE SRC.qmp DST.qmp DST_URI SRC_TLS DST_TLS OUT.jsonl"""
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(path)
        self.f = self.s.makefile('r')
        self.events = []
        json.loads(self.f.readline())   # the greeting

    def read(self):
        line = self.f.readline()
        if not line:
            raise SystemExit('QMP connection closed')
        m = json.loads(line)
        if 'event' in m:
            self.events.append(m)
        return m

    def cmd(self, c):
        self.s.sendall((json.dumps(c) + '\n').encode())
        while True:
            m = self.read()
            if 'event' not in m:
                return m

    def wait(self, name, status):
        seen = 0
        for _ in range(100000):
            while seen < len(self.events):
                e = self.events[seen]
                seen += 1
                if e['event'] == name and e.get('data', {}).get('status') == status:
                    self.events = self.events[seen:]
                    return
                if e['event'] == name and e.get('data', {}).get('status') in ('failed', 'cancelled'):
                    raise SystemExit('awaited %s %s, got %s' % (name, status, e))
            self.read()
        raise SystemExit('no %s %s' % (name, status))


def kind(v):
    if isinstance(v, bool):
        return 'boolean'
    if isinstance(v, (int, float)):
        return 'number'
    return {str: 'string', list: 'array', dict: 'object'}.get(type(v), 'null')


def shape(g, q, path):
    if kind(g) != kind(q):
        return ['%s: godwit %s, QEMU %s' % (path, kind(g), kind(q))]
    errs = []
    if isinstance(g, dict):
        for k in set(g) & set(q):
            errs += shape(g[k], q[k], path + '.' + k)
    elif isinstance(g, list) and g and q:
        errs += shape(g[0], q[0], path + '[]')
    return errs


def main():
    case, src, dst, uri, src_tls, dst_tls, out = sys.argv[1:8]
    subst = {'@DST_URI@': uri, '@SRC_TLS@': src_tls, '@DST_TLS@': dst_tls}
    sides = {'dst': Qmp(dst), 'src': Qmp(src)}
    log = open(out, 'w')
    last = {}
    for n, line in enumerate(open(sys.argv[0].replace('libvirt.py', 'libvirt-p2p.jsonl'))):
        st = json.loads(line)
        if '#' in st or case not in st.get('cases', [case]):
            continue
        q = sides[st['side']]
        where = '#%d %s' % (n + 1, st['side'])
        if 'cmd' in st:
            text = json.dumps(st['cmd'])
            for k, v in subst.items():
                text = text.replace(k, v)
            r = q.cmd(json.loads(text))
            log.write(json.dumps({'n': n + 1, 'side': st['side'], 'cmd': json.loads(text), 'reply': r}) + '\n')
            log.flush()
            want = st['qemu']
            if ('error' in r) != ('error' in want):
                raise SystemExit('%s %s: godwit %s, QEMU 7.2 %s' % (where, text, r, want))
            if 'error' in r and r['error']['class'] != want['error']['class']:
                raise SystemExit('%s: class %s, QEMU 7.2 %s' % (where, r, want))
            if 'return' in r:
                errs = shape(r['return'], want['return'], 'return')
                if errs:
                    raise SystemExit('%s: %s' % (where, errs))
            last[st['side']] = r
        elif 'check' in st:
            r = last[st['side']]
            if not eval(st['check'], {}, {'r': r}):
                raise SystemExit('%s: %s does not hold for %s' % (where, st['check'], r))
        elif 'wait' in st:
            q.wait(st['wait'], st['status'])
            log.write(json.dumps({'n': n + 1, 'side': st['side'], 'event': st['wait'], 'status': st['status']}) + '\n')
        elif 'poll-status' in st:
            for _ in range(600):
                r = q.cmd({'execute': 'query-status'})
                if r['return']['status'] == st['poll-status']:
                    break
                time.sleep(0.1)
            else:
                raise SystemExit('%s: VM status %s, not %s' % (where, r, st['poll-status']))
    for side, q in sides.items():
        log.write(json.dumps({'side': side, 'events': [e['event'] + ':' + str(e.get('data', {}).get('status', '')) for e in q.events]}) + '\n')
    print('%s: sequence played' % case)


main()
