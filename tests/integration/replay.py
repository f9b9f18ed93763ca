#!/usr/bin/env python3
"""A recording relay and a replayer for the replay test (tests/integration/replay.sh).

record LISTEN_PORT TARGET_PORT DIR: accept connections on 127.0.0.1:LISTEN_PORT
  (at most 8) and relay each to 127.0.0.1:TARGET_PORT, writing what the client
  sent on connection i to DIR/conn-i; writes DIR/ready once listening; ends when
  every relayed connection closed and none came for 5 s (bounded: 120 s).
replay TARGET_PORT DIR: open one connection per recorded DIR/conn-i, in order
  (each after the previous one's first bytes are sent), and send its bytes;
  prints what the destination answered on each (first 200 bytes, hex), ends
  after 30 s at most.
"""
import os
import socket
import sys
import threading
import time


def pump(src, dst, record):
    try:
        while True:
            b = src.recv(1 << 16)
            if not b:
                break
            if record:
                record.write(b)
            dst.sendall(b)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def record(listen_port, target_port, out_dir):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', listen_port))
    ls.listen(16)
    ls.settimeout(5)
    open(os.path.join(out_dir, 'ready'), 'w').close()
    threads, files, t_end = [], [], time.time() + 120
    while len(files) < 8 and time.time() < t_end:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            if files and not any(t.is_alive() for t in threads):
                break
            continue
        u = socket.create_connection(('127.0.0.1', target_port))
        f = open(os.path.join(out_dir, 'conn-%d' % len(files)), 'wb')
        files.append(f)
        for a, b, r in ((c, u, f), (u, c, None)):
            t = threading.Thread(target=pump, args=(a, b, r), daemon=True)
            t.start()
            threads.append(t)
    for t in threads:
        t.join(max(0.1, t_end - time.time()))
    for f in files:
        f.close()


def replay(target_port, in_dir):
    names = sorted((n for n in os.listdir(in_dir) if n.startswith('conn-')), key=lambda n: int(n[5:]))
    answers = {}

    def one(name, sock):
        data = open(os.path.join(in_dir, name), 'rb').read()
        try:
            sock.sendall(data)
        except OSError:
            pass

    def read(name, sock):
        got = b''
        try:
            while len(got) < 200:
                b = sock.recv(200)
                if not b:
                    break
                got += b
        except OSError:
            pass
        answers[name] = got

    threads = []
    for n in names:
        s = socket.create_connection(('127.0.0.1', target_port))
        s.settimeout(30)
        for fn in (one, read):
            t = threading.Thread(target=fn, args=(n, s), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(0.5)		# the order the source opened them in
    for t in threads:
        t.join(30)
    for n in names:
        print(n, answers.get(n, b'').hex())


if __name__ == '__main__':
    if sys.argv[1] == 'record':
        record(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        replay(int(sys.argv[2]), sys.argv[3])
