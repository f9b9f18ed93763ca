#!/usr/bin/env python3
"""Set-up time of a migration, alone and beside strangers parked on the destination.

Usage: bench/parked.py [--godwit PATH] [--runs N] [--memory SIZE] [--tls DIR]
                       [--strangers idle|many]

For each run, interleaved, two migrations with fresh processes on 127.0.0.1:
  alone    nothing else connects to the destination;
  parked   before the migrate command, a stranger connects to the
           destination's port and stays silent for the whole migration
           (--strangers many: 40 idle connections, one dripping a HELLO a
           byte every 0.5 s and one sending garbage).
Prints each run's set-up time (`setup-time`, migrate command to round 0:
connections, handshakes, tracking, round-0 scan) and total time, then per
mode the median, min and max, and the difference of the medians.
With --tls DIR (a directory of tests/tls/gen-certs.sh) both ends use mutual
TLS (DIR/dst-ok, DIR/src-ok). Traffic goes to 127.0.0.1 only.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

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
    ap.add_argument("--strangers", choices=["idle", "many"], default="idle")
    args = ap.parse_args()
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
