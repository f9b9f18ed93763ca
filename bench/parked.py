#!/usr/bin/env python3
"""Set-up time of a migration, alone and beside strangers parked on the destination.

Usage: bench/parked.py [--godwit PATH] [--runs N] [--memory SIZE] [--tls DIR]
                       [--strangers idle|many]

For each run, interleaved, two migrations with fresh processes on 127.0.0.1:
  alone    nothing else connects to the destination;
  parked   before the migrate command, a stranger connects to the
           destination's port and stays silent for the whole migration
           (--strangers many: 40 idle connections, one dripping a HELLO a
           byte every 0.5 s and one sending garbage; parked-churn and
           reconnect: the attacks of --attack below, with their defaults).
Prints each run's set-up time (`setup-time`, migrate command to round 0:
connections, handshakes, tracking, round-0 scan) and total time, then per
mode the median, min and max, and the difference of the medians.
With --tls DIR (a directory of tests/tls/gen-certs.sh) both ends use mutual
TLS (DIR/dst-ok, DIR/src-ok). Traffic goes to 127.0.0.1 only.

--attack KIND --port PORT --seconds S runs one of the admission attacks
alone against 127.0.0.1:PORT for at most S seconds (tests/integration/
admission.sh runs them beside real migrations), then prints what it saw
(`attack KIND: connections N, evicted-errors parked N, churn N`: the
ERRORs naming an eviction that its connections read):
  parked-churn  PARKED (default 40) connections each send a HELLO header
                announcing 3652 bytes and 3600 of them, and reconnect when
                closed; meanwhile silent connections arrive at RATE a
                second (default 800), at most 256 of them open.
  reconnect     IDLE (default 200) silent connections that reconnect when
                closed (at most 2000 reconnects a second).
--ready FILE is created once the first wave is connected.
"""

import argparse
import json
import os
import re
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strangers(port, kind, stop):
    socks = []
    n = 1 if kind == "idle" else 40
    for _ in range(n):
        socks.append(socket.create_connection(("127.0.0.1", port)))
    if kind == "many":
        g = socket.create_connection(("127.0.0.1", port))
        g.sendall(b"GET / HTTP/1.1\r\n\r\n")
        socks.append(g)
        d = socket.create_connection(("127.0.0.1", port))
        socks.append(d)

        def drip():
            for b in b"GWM1" + bytes(20):
                if stop.is_set():
                    return
                try:
                    d.send(bytes([b]))
                except OSError:
                    return
                time.sleep(0.5)
        threading.Thread(target=drip, daemon=True).start()
    return socks


def wire_version():
    """GW_WIRE_VERSION, read from the tree (src/wire/wire.h)."""
    with open(os.path.join(ROOT, "src", "wire", "wire.h")) as f:
        return int(re.search(r"#define GW_WIRE_VERSION\s+(\d+)", f.read()).group(1))


def hello_head(length):
    """A frame header that decodes: "GWM1", this tree's version, HELLO, @length bytes announced."""
    return struct.pack("<IHHIIII", 0x314d5747, wire_version(), 1, 0, length, 0, 0)


class Attack:
    """One attacker loop on 127.0.0.1:port; bounded in connections, rate and time."""

    def __init__(self, port, kind, parked, idle, rate):
        self.port, self.kind, self.rate = port, kind, rate
        self.sel = selectors.DefaultSelector()
        self.want = parked if kind == "parked-churn" else idle
        self.churn = deque()
        self.conns = 0
        self.evicted = {"hold": 0, "churn": 0}     # ERRORs naming the eviction, by kind of connection
        self.budget, self.budget_t = 0.0, time.monotonic()
        self.stop = threading.Event()

    def open(self, payload):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=1)
            if payload:
                s.sendall(payload)
        except OSError:
            return None
        s.setblocking(False)
        self.conns += 1
        return s

    def holder(self):
        payload = hello_head(3652) + bytes(3600) if self.kind == "parked-churn" else b""
        s = self.open(payload)
        if s:
            self.sel.register(s, selectors.EVENT_READ, "hold")
        return s is not None

    def closed(self, s, tag):
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if data:
            if b"evicted" in data:
                self.evicted[tag] += 1
            return
        self.sel.unregister(s)
        s.close()
        if tag == "hold":
            self.reconnect()

    def refill(self):
        now = time.monotonic()
        self.budget = min(2000.0, self.budget + (now - self.budget_t) * 2000.0)
        self.budget_t = now

    def reconnect(self):
        self.refill()
        if self.budget >= 1:
            self.budget -= 1
            self.holder()
        else:
            self.pending += 1

    def run(self, seconds, ready):
        self.pending = 0
        end = time.monotonic() + seconds
        for _ in range(self.want):
            self.holder()
        if ready:
            open(ready, "w").close()
        next_churn = time.monotonic()
        try:
            self.loop(end, next_churn)
        finally:
            print("attack %s: connections %d, evicted-errors %s %d, churn %d" %
                  (self.kind, self.conns, "parked" if self.kind == "parked-churn" else "idle",
                   self.evicted["hold"], self.evicted["churn"]), flush=True)

    def loop(self, end, next_churn):
        while time.monotonic() < end and not self.stop.is_set():
            timeout = 0.01
            if self.kind == "parked-churn":
                now = time.monotonic()
                while next_churn <= now:
                    s = self.open(b"")
                    if s:
                        self.churn.append(s)
                        self.sel.register(s, selectors.EVENT_READ, "churn")
                    if len(self.churn) > 256:
                        old = self.churn.popleft()
                        if old.fileno() >= 0:
                            self.sel.unregister(old)
                            old.close()
                    next_churn += 1.0 / self.rate
                timeout = max(0.0, next_churn - time.monotonic())
            for key, _ in self.sel.select(timeout):
                self.closed(key.fileobj, key.data)
            self.refill()
            while self.pending and self.budget >= 1:
                self.pending -= 1
                self.reconnect()


def one(args, mode):
    d = tempfile.mkdtemp(prefix="gw-parked.")
    procs = []
    stop = threading.Event()
    held = []
    try:
        dst_cmd = [args.godwit, "run", "--incoming", "tcp:127.0.0.1:0", "--api", d + "/dst.sock",
                   "--memory", args.memory, "--prealloc"]
        mig_tls = []
        if args.tls:
            dst_cmd += ["--tls-creds", args.tls + "/dst-ok"]
            mig_tls = ["--tls-creds", args.tls + "/src-ok"]
        dst = subprocess.Popen(dst_cmd, stdout=subprocess.PIPE, stderr=open(d + "/dst.log", "w"), text=True)
        procs.append(dst)
        line = dst.stdout.readline()
        url = line.split()[1]
        port = int(url.rsplit(":", 1)[1])
        src = subprocess.Popen([args.godwit, "run", "--api", d + "/src.sock", "--memory", args.memory,
                                "--fill", "mix", "--workload", "idle"],
                               stdout=subprocess.DEVNULL, stderr=open(d + "/src.log", "w"))
        procs.append(src)
        for _ in range(600):
            r = subprocess.run([args.godwit, "status", "--api", d + "/src.sock", "--json"],
                               capture_output=True, text=True)
            if r.returncode == 0 and json.loads(r.stdout).get("vm-status") == "running":
                break
            time.sleep(0.1)
        if mode == "parked":
            if args.strangers in ("parked-churn", "reconnect"):
                attack = Attack(port, args.strangers, 40, 200, 800)
                threading.Thread(target=attack.run, args=(600, d + "/ready"), daemon=True).start()
                held = [attack]
                while not os.path.exists(d + "/ready"):
                    time.sleep(0.01)
            else:
                held = strangers(port, args.strangers, stop)
            time.sleep(0.2)     # they are in before the source
        r = subprocess.run([args.godwit, "migrate", "--api", d + "/src.sock", "--to", url, "--json"] + mig_tls,
                           capture_output=True, text=True)
        st = json.loads(r.stdout)
        if st.get("status") != "completed":
            raise RuntimeError("%s: %s" % (mode, st.get("error-desc")))
        return st["setup-time"], st["total-time"]
    finally:
        stop.set()
        for s in held:
            if isinstance(s, Attack):
                s.stop.set()
            else:
                s.close()
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["rm", "-rf", d])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--godwit", default=os.path.join(ROOT, "build", "tools", "godwit"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--memory", default="256M")
    ap.add_argument("--tls", default=None)
    ap.add_argument("--strangers", choices=["idle", "many", "parked-churn", "reconnect"], default="idle")
    ap.add_argument("--attack", choices=["parked-churn", "reconnect"], default=None)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--parked", type=int, default=40)
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--rate", type=float, default=800)
    ap.add_argument("--ready", default=None)
    args = ap.parse_args()
    if args.attack:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        Attack(args.port, args.attack, args.parked, args.idle, args.rate).run(args.seconds, args.ready)
        return 0
    res = {"alone": [], "parked": []}
    print("run  mode    setup-ms  total-ms")
    for i in range(args.runs):
        for mode in (("alone", "parked") if i % 2 == 0 else ("parked", "alone")):
            setup, total = one(args, mode)
            res[mode].append(setup)
            print("%3d  %-6s %9.1f %9.1f" % (i, mode, setup, total), flush=True)
    for mode in ("alone", "parked"):
        v = res[mode]
        print("%-6s setup-ms median %.1f, min %.1f, max %.1f (%d runs)" %
              (mode, statistics.median(v), min(v), max(v), len(v)))
    diff = statistics.median(res["parked"]) - statistics.median(res["alone"])
    print("parked - alone, medians: %+.1f ms (%s strangers%s)" % (diff, args.strangers,
                                                              ", TLS" if args.tls else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
