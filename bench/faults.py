#!/usr/bin/env python3
"""godwit fault campaign: migrations with one fault each, and an invariant.

Usage: bench/faults.py [--godwit PATH] --runs N [--seed S] [--channels 1,2]
                       [--memory SIZE] [--io-timeout-ms MS] [--keep DIR] [--verbose]
       bench/faults.py [--godwit PATH] --replay RUN_SEED        (one run again)

Each run migrates a small soft VM (verify workload at a fixed, low write rate)
from one `godwit run` process to another over 127.0.0.1, through a relay of
ours that forwards every connection and can see the protocol's frames. At a
point drawn from the run's seed, one fault strikes:

  kill-src, kill-dst     SIGKILL of the source or the destination process
  stop-src, stop-dst     SIGSTOP for 1.5-3 x io-timeout-ms, then SIGCONT
  cut-close              the link breaks: every relayed connection reset
  cut-stall              the link goes silent: nothing forwarded any more
  corrupt                one bit of the source's stream flipped

The point is a byte count of the source's stream (0 .. a bit more than a whole
migration, so some faults never strike) or a frame of the control
connection (after HELLO_ACK, a ROUND, STATE, COMPLETE, READY, GO, RESUMED,
VERIFY, VERIFIED has passed the relay).

The invariant, checked after each run once both sides settled: exactly one
copy of the VM runs (the source's or the destination's), or the source says
`unknown` and the destination's answer settles it (then resolved through the
API); never two, never none unless the fault killed the process that held the
VM at that moment ("killed-with-vm": a VM dies with its process). A completed
migration must be verified (RAM digests equal, the guest's own check on the
destination ok); a VM that runs on the source after a failure must pass its
own check.

Every run prints its seed; `--replay SEED` runs that one again (the fault and
its point are the same; the machine's timing is its own). The last line sums
up: runs N, completed N, failed-source-running N, unknown N, lost N,
split-brain N, unverified N. Exit status 0 when lost, split-brain and
unverified are all 0.

Traffic goes to 127.0.0.1 only; every process started here is stopped here.
"""

import argparse
import json
import os
import random
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KINDS = ["kill-src", "kill-dst", "stop-src", "stop-dst", "cut-close", "cut-stall", "corrupt"]
# Control frames a fault may follow: (direction, wire type, name). src->dst is "s".
FRAMES = [("d", 2, "HELLO_ACK"), ("s", 6, "ROUND"), ("s", 9, "STATE"), ("s", 10, "COMPLETE"),
          ("d", 11, "READY"), ("s", 12, "GO"), ("d", 13, "RESUMED"), ("s", 16, "VERIFY"),
          ("d", 17, "VERIFIED")]
TERMINAL = ("completed", "failed", "cancelled", "unknown")


class Relay:
    """Forward every connection to the destination; watch frames; strike on cue."""

    def __init__(self, dst_port, trigger, on_fire):
        self.dst_port = dst_port
        self.trigger = trigger          # ("bytes", n) or ("frame", dir, type, nth)
        self.on_fire = on_fire          # called once, from the relay thread
        self.fired = False
        self.stalled = False
        self.corrupt_next = False
        self.src_bytes = 0
        self.frame_seen = {}
        self.sel = selectors.DefaultSelector()
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.sel.register(self.lsock, selectors.EVENT_READ, None)
        self.pairs = []
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def fire(self):
        if not self.fired:
            self.fired = True
            self.on_fire(self)

    def parse(self, conn, direction, data):
        """Frame boundaries of one direction of one connection (headers are 24 bytes)."""
        st = conn["parse"][direction]
        i = 0
        while i < len(data):
            if st["left"] > 0:
                take = min(st["left"], len(data) - i)
                st["left"] -= take
                i += take
                if st["left"] == 0:
                    self.frame_done(conn, direction, st["type"])
                continue
            need = 24 - len(st["hdr"])
            st["hdr"] += data[i:i + need]
            i += min(need, len(data) - i)
            if len(st["hdr"]) == 24:
                magic, _ver, typ, _flags, length = struct.unpack("<IHHII", st["hdr"][:16])
                st["hdr"] = b""
                if magic != 0x314D5747:
                    st["left"] = 1 << 62          # not godwit any more: stop parsing
                    return
                st["type"] = typ
                st["left"] = length
                if length == 0:
                    self.frame_done(conn, direction, typ)

    def frame_done(self, conn, direction, typ):
        if not conn["control"]:
            return
        key = (direction, typ)
        self.frame_seen[key] = self.frame_seen.get(key, 0) + 1
        t = self.trigger
        if t[0] == "frame" and not self.fired and t[1] == direction and t[2] == typ and \
                self.frame_seen[key] >= t[3]:
            self.fire()

    def forward(self, conn, src, dst, direction):
        try:
            data = src.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.close_pair(conn)
            return
        if self.stalled:
            return
        if direction == "s":
            if self.corrupt_next and len(data) > 40:
                i = len(data) // 2
                data = data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:]
                self.corrupt_next = False
            self.src_bytes += len(data)
            if self.trigger[0] == "bytes" and not self.fired and self.src_bytes >= self.trigger[1]:
                self.fire()
        if not conn["seen_first"] and direction == "s":
            conn["seen_first"] = True
            conn["control"] = len(data) >= 8 and struct.unpack("<H", data[6:8])[0] == 1  # HELLO
        self.parse(conn, direction, data)
        if self.stalled:
            return
        try:
            dst.sendall(data)
        except OSError:
            self.close_pair(conn)

    def close_pair(self, conn, reset=False):
        for s in (conn["a"], conn["b"]):
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError):
                pass
            if reset:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        if conn in self.pairs:
            self.pairs.remove(conn)

    def cut(self):
        for conn in list(self.pairs):
            self.close_pair(conn, reset=True)

    def loop(self):
        while not self.stop:
            for key, _ in self.sel.select(timeout=0.05):
                if key.data is None:
                    try:
                        a, _ = self.lsock.accept()
                        b = socket.create_connection(("127.0.0.1", self.dst_port))
                    except OSError:
                        continue
                    conn = {"a": a, "b": b, "seen_first": False, "control": False,
                            "parse": {"s": {"hdr": b"", "left": 0, "type": 0},
                                      "d": {"hdr": b"", "left": 0, "type": 0}}}
                    self.pairs.append(conn)
                    self.sel.register(a, selectors.EVENT_READ, (conn, "s"))
                    self.sel.register(b, selectors.EVENT_READ, (conn, "d"))
                    continue
                conn, direction = key.data
                if conn not in self.pairs:
                    continue
                if direction == "s":
                    self.forward(conn, conn["a"], conn["b"], "s")
                else:
                    self.forward(conn, conn["b"], conn["a"], "d")
            if self.stalled:
                # A silent link: nothing moves; the sockets stay open.
                time.sleep(0.01)

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        for conn in list(self.pairs):
            self.close_pair(conn)
        self.lsock.close()


class Run:
    """One migration with one fault."""

    def __init__(self, args, run_seed, workdir):
        self.args = args
        self.seed = run_seed
        rng = random.Random(run_seed)
        self.kind = rng.choice(KINDS)
        self.channels = rng.choice(args.channels)
        if rng.random() < 0.5:
            self.trigger = ("bytes", rng.randrange(0, int(args.memory_bytes * 1.1)))
        else:
            d, typ, name = rng.choice(FRAMES)
            nth = rng.choice([1, 2]) if name == "ROUND" else 1
            self.trigger = ("frame", d, typ, nth, name)
        self.stop_s = args.io_timeout_ms / 1000.0 * rng.uniform(1.5, 3.0)
        self.dir = workdir
        self.procs = {}
        self.fault_at = None

    def describe(self):
        t = self.trigger
        where = ("after %d bytes" % t[1]) if t[0] == "bytes" else \
                ("after %s%s" % (t[4], "" if t[3] == 1 else " #%d" % t[3]))
        return "%s %s, %d channel%s" % (self.kind, where, self.channels, "s" if self.channels > 1 else "")

    def godwit(self, *argv, timeout=20):
        return subprocess.run([self.args.godwit] + list(argv), capture_output=True, text=True,
                              timeout=timeout)

    def status(self, side):
        try:
            r = self.godwit("status", "--api", os.path.join(self.dir, side + ".sock"), "--json", timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def alive(self, side):
        p = self.procs.get(side)
        return p is not None and p.poll() is None

    def start(self):
        io = "io-timeout-ms=%d" % self.args.io_timeout_ms
        dst_log = open(os.path.join(self.dir, "dst.log"), "w")
        self.procs["dst"] = subprocess.Popen(
            [self.args.godwit, "run", "--incoming", "tcp:127.0.0.1:0", "--api",
             os.path.join(self.dir, "dst.sock"), "--memory", str(self.args.memory_bytes), "--set", io],
            stdout=subprocess.PIPE, stderr=dst_log, text=True)
        line = self.procs["dst"].stdout.readline()
        if not line.startswith("incoming "):
            raise RuntimeError("destination did not listen: %r" % line)
        self.dst_port = int(line.strip().rsplit(":", 1)[1])
        src_log = open(os.path.join(self.dir, "src.log"), "w")
        self.procs["src"] = subprocess.Popen(
            [self.args.godwit, "run", "--api", os.path.join(self.dir, "src.sock"),
             "--memory", str(self.args.memory_bytes), "--fill", "mix",
             "--workload", "verify:rate=%d" % self.args.rate, "--set", io, "--seed", str(self.seed % 1000)],
            stdout=src_log, stderr=src_log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = self.status("src")
            if st and st.get("vm-status") == "running":
                return
            time.sleep(0.05)
        raise RuntimeError("source did not start")

    def strike(self, relay):
        self.fault_at = time.monotonic()
        k = self.kind
        if k in ("kill-src", "kill-dst"):
            self.procs[k[5:]].send_signal(signal.SIGKILL)
        elif k in ("stop-src", "stop-dst"):
            p = self.procs[k[5:]]
            p.send_signal(signal.SIGSTOP)
            threading.Timer(self.stop_s, lambda: p.poll() is None and p.send_signal(signal.SIGCONT)).start()
        elif k == "cut-close":
            relay.cut()
        elif k == "cut-stall":
            relay.stalled = True
        elif k == "corrupt":
            relay.corrupt_next = True

    def settle(self):
        """Wait (bounded) until the source's outcome is known and the destination is done."""
        bound = time.monotonic() + 60 + self.stop_s
        src_st = None
        while time.monotonic() < bound:
            if not self.alive("src"):
                break
            src_st = self.status("src")
            if src_st and src_st.get("status") in TERMINAL and \
                    not (src_st.get("status") == "completed" and src_st.get("verify") == "pending"):
                break
            time.sleep(0.1)
        # The destination: exits after a failure, runs the VM after a success.
        while time.monotonic() < bound:
            if not self.alive("dst"):
                break
            st = self.status("dst")
            if st and st.get("vm-status") == "running" and st.get("verify-check", "n/a") != "n/a":
                break
            # Still waiting for a source that gave up before it got in: nothing will come.
            if st and st.get("vm-status") == "incoming" and (not self.alive("src") or
                                                             (src_st and src_st.get("status") in TERMINAL)):
                break
            if st and st.get("status") in ("failed",):
                time.sleep(0.2)
                continue
            time.sleep(0.1)
        return src_st

    def judge(self, src_st):
        out = {"seed": self.seed, "fault": self.describe(), "fired": self.fault_at is not None}
        src_status = src_st.get("status") if src_st else ("killed" if not self.alive("src") else "?")
        out["source"] = src_status
        if src_status == "unknown":
            # Ask the destination, then settle it as an operator would.
            dst = self.status("dst") if self.alive("dst") else None
            runs = "destination" if dst and dst.get("vm-status") == "running" else "source"
            self.godwit("migrate", "--api", os.path.join(self.dir, "src.sock"), "--resolve", runs)
            out["resolved"] = runs
        src = self.status("src") if self.alive("src") else None
        dst = self.status("dst") if self.alive("dst") else None
        src_runs = bool(src and src.get("vm-status") == "running")
        dst_runs = bool(dst and dst.get("vm-status") == "running")
        out["copies"] = int(src_runs) + int(dst_runs)
        if src_runs and dst_runs:
            out["verdict"] = "split-brain"
        elif not src_runs and not dst_runs:
            killed = self.fault_at is not None and self.kind.startswith("kill")
            # The VM died with its process: the source before GO, the destination after it resumed.
            held = (self.kind == "kill-src") or (self.kind == "kill-dst" and src_status == "completed")
            out["verdict"] = "killed-with-vm" if killed and held else "lost"
        elif src_status == "unknown":
            out["verdict"] = "unknown"
        elif dst_runs:
            # The guest's own check reads every page; the digests are compared too unless the
            # fault struck after the handover (then their exchange could not finish: "unknown").
            check = dst.get("verify-check")
            digest = src_st.get("verify") if src_st else "n/a (source killed)"
            good = check == "ok" and digest != "mismatch"
            out["verdict"] = "completed" if good else "unverified"
            out["check"] = "digest %s, guest check %s" % (digest, check)
        else:
            r = self.godwit("check", "--api", os.path.join(self.dir, "src.sock"))
            out["verdict"] = "failed-source-running" if r.returncode == 0 else "unverified"
            out["check"] = "source check %s" % ("ok" if r.returncode == 0 else r.stdout.strip())
        if src_st and src_st.get("error-desc"):
            out["reason"] = src_st["error-desc"][:160]
        return out

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                except OSError:
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout:
                p.stdout.close()

    def go(self):
        relay = None
        try:
            self.start()
            relay = Relay(self.dst_port, self.trigger[:4] if self.trigger[0] == "frame" else self.trigger,
                          self.strike)
            r = self.godwit("migrate", "--api", os.path.join(self.dir, "src.sock"), "--to",
                            "tcp:127.0.0.1:%d" % relay.port, "--channels", str(self.channels), "--detach")
            if r.returncode:
                raise RuntimeError("migrate refused: %s" % r.stderr.strip())
            src_st = self.settle()
            return self.judge(src_st)
        finally:
            if relay:
                relay.close()
            self.stop()


def run_seed(campaign_seed, i):
    return campaign_seed * 100000 + i


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--godwit", default=os.path.join(ROOT, "build", "tools", "godwit"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--replay", type=int, default=None, help="run one run again from its seed")
    ap.add_argument("--channels", default="1,2")
    ap.add_argument("--memory", default="64M")
    ap.add_argument("--rate", type=int, default=2000, help="guest writes, pages/s (bounded: converges)")
    ap.add_argument("--io-timeout-ms", type=int, default=1000)
    ap.add_argument("--keep", default=None, help="keep each run's logs under this directory")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    args.channels = [int(c) for c in args.channels.split(",")]
    args.memory_bytes = parse_size(args.memory)
    if not os.access(args.godwit, os.X_OK):
        sys.exit("faults.py: no godwit binary at %s (build first, or --godwit)" % args.godwit)
    if args.replay is not None:
        seeds = [args.replay]
    else:
        if args.seed is None:
            args.seed = random.SystemRandom().randrange(1, 100000)
        seeds = [run_seed(args.seed, i) for i in range(args.runs)]
        print("campaign seed %d: %d runs (bench/faults.py --replay SEED repeats one)" % (args.seed, len(seeds)),
              flush=True)
    counts = {k: 0 for k in ["completed", "failed-source-running", "unknown", "lost", "split-brain",
                             "unverified", "killed-with-vm"]}
    not_fired = 0
    for n, seed in enumerate(seeds):
        wd = tempfile.mkdtemp(prefix="gw-fault.")
        run = Run(args, seed, wd)
        t0 = time.monotonic()
        try:
            res = run.go()
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            res = {"seed": seed, "fault": run.describe(), "verdict": "lost", "fired": False,
                   "reason": "harness: %s" % e}
        counts[res["verdict"]] += 1
        not_fired += not res.get("fired")
        print("run %d seed %d: %s -> %s%s%s (%.1f s)" % (
            n, seed, res["fault"], res["verdict"], "" if res.get("fired") else " [fault never struck]",
            (": " + res["reason"]) if res.get("reason") and (args.verbose or res["verdict"] in
                                                           ("lost", "split-brain", "unverified")) else "",
            time.monotonic() - t0), flush=True)
        if args.keep:
            dest = os.path.join(args.keep, "run-%d" % seed)
            shutil.copytree(wd, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(wd, ignore_errors=True)
    print("killed-with-vm %d (the fault killed the process that held the VM), fault never struck %d" %
          (counts["killed-with-vm"], not_fired))
    print("runs %d, completed %d, failed-source-running %d, unknown %d, lost %d, split-brain %d, unverified %d" % (
        len(seeds), counts["completed"], counts["failed-source-running"], counts["unknown"], counts["lost"],
        counts["split-brain"], counts["unverified"]), flush=True)
    return 0 if counts["lost"] == 0 and counts["split-brain"] == 0 and counts["unverified"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
