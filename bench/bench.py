#!/usr/bin/env python3
"""godwit scenario benchmark: migrations over loopback and shaped veth links.

Usage: bench/bench.py BUILD_DIR [--quick] [--groups basic,matrix,converge,postcopy]
       [--accel soft|kvm|soft,kvm]
       [--links loopback,10gbit,1gbit] [--channels 1,2,4] [--codecs none,zstd,...]
       [--memory SIZE] [--out DIR] [--io-timeout-ms N] [--iperf-seconds N]
(bench/run.sh is the usual entry point; docs/bench.md explains every column.)

For every scenario group and link this measures the link with iperf3 in the
same run, then runs each migration with fresh processes:
  destination: [ip netns exec DST] godwit run --incoming tcp:ADDR:0 --api D/dst.sock
  source:      [ip netns exec SRC] godwit run --api D/src.sock --memory ... --workload ...
  driver:      godwit migrate --api D/src.sock --to URL --json ...
The migrate command talks to the source only over its unix API socket, which
is reachable from any network namespace. The destination's CPU time is read
from /proc/PID/stat just before the migration starts and just after it ends
(the CLI reports only the source's). Markdown tables go to stdout, progress to
stderr, one JSON object per migration to OUT/<stamp>.jsonl.

Invariants: every process and namespace started here is stopped here, also on
error or Ctrl-C; traffic only ever goes to 127.0.0.1 or to the two addresses
inside our own namespaces. Nothing here judges a figure: the tables report.
"""

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import datapath

PAGE_BYTES = 4096
GIB = 1 << 30
MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NETNS_LIB = os.path.join(ROOT, "tests", "integration", "netns.sh")
CODECS = ["none", "zstd", "lz4", "zlib", "isal", "auto"]
CLK_TCK = os.sysconf("SC_CLK_TCK")

T0 = time.monotonic()


def log(msg):
    t = time.monotonic() - T0
    sys.stderr.write("[bench %3d:%02d] %s\n" % (t // 60, t % 60, msg))
    sys.stderr.flush()


def size_str(n):
    if n % GIB == 0:
        return "%dG" % (n // GIB)
    return "%dM" % (n // MIB)


def parse_size(s):
    mult = {"K": 1 << 10, "M": MIB, "G": GIB}.get(s[-1:].upper())
    return int(s[:-1]) * mult if mult else int(s)


# ---- links ----------------------------------------------------------------

class Link:
    """Where the two ends run: loopback (host namespace) or a veth pair.

    name: label in tables; rate: tc rate or None; ns_src/ns_dst: namespace
    names or None; dst_addr: the address the destination listens on.
    """

    def __init__(self, name, rate=None, subnet=None):
        self.name = name
        self.rate = rate
        self.subnet = subnet
        self.ns_src = self.ns_dst = None
        self.dst_addr = "127.0.0.1"
        self.up = False

    @property
    def netns(self):
        return self.rate is not None

    def tag(self):
        return "bench" + self.name

    def setup(self):
        if not self.netns:
            self.up = True
            return
        sh = '. "%s" && netns_setup %s %s %d' % (NETNS_LIB, self.tag(), self.rate, self.subnet)
        subprocess.run(["bash", "-c", sh], check=True)
        self.ns_src = "gw-%s-src" % self.tag()
        self.ns_dst = "gw-%s-dst" % self.tag()
        self.dst_addr = "10.99.%d.2" % self.subnet
        self.up = True

    def teardown(self):
        if self.netns and self.up:
            sh = '. "%s" && netns_teardown %s' % (NETNS_LIB, self.tag())
            subprocess.run(["bash", "-c", sh], check=False)
        self.up = False

    def wrap(self, argv, side):
        ns = self.ns_src if side == "src" else self.ns_dst
        if ns:
            return ["ip", "netns", "exec", ns] + argv
        return argv


def iperf(link, seconds, streams=1):
    """Receiver-side rate src -> dst in bits per second, or None (twice tried)."""
    if not shutil.which("iperf3"):
        return None
    res = iperf_once(link, ["-t", str(seconds)], streams, seconds + 30)
    res = res or iperf_once(link, ["-t", str(seconds)], streams, seconds + 30)
    return res[0] if res else None


def tcp_same_bytes(link, nbytes, streams=1):
    """Milliseconds that fresh iperf3 processes take to move NBYTES over
    STREAMS TCP streams of LINK, receiver side, or None.

    The baseline for a migration of the same non-zero bytes, run right after
    it: a 3-second iperf3 rate hides the start of a transfer (slow start, the
    socket buffers' first allocations) that a 0.3-second migration pays, and
    the rate of this host's loopback moves by a third from minute to minute.
    """
    if not shutil.which("iperf3") or not nbytes:
        return None
    res = iperf_once(link, ["-n", str(int(nbytes))], streams, 120)
    return res[1] * 1000.0 if res else None


def same_bytes_baseline(link, rec):
    """After migration REC: its non-zero bytes over as many TCP streams as it
    had channels (rec["tcp-same-ms"]), and the ratio of the two times
    (rec["tcp-same-ratio"]: TCP ms / migration ms, 1.0 = as fast as TCP)."""
    st = rec.get("stats") or {}
    streams = rec.get("channels") or 1
    ms = tcp_same_bytes(link, (st.get("ram") or {}).get("normal", 0) * PAGE_BYTES, streams)
    total = st.get("total-time")
    rec["tcp-same-ms"] = ms
    rec["tcp-same-ratio"] = ms / total if ms and total else None


def iperf_once(link, length, streams, timeout_s):
    """(bits per second, seconds) at the receiver for one iperf3 run of
    LENGTH (["-t", S] or ["-n", BYTES]), or None."""
    port = 5299
    srv = subprocess.Popen(link.wrap(["iperf3", "-s", "-1", "-B", link.dst_addr, "-p", str(port)],
                                     "dst"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        err = ""
        # The server needs a moment to listen; retry the client a few times
        # rather than sleeping a fixed time. iperf3 -J may exit 0 on a
        # refused connection, with {"error": ...} as its output.
        res = None
        for _ in range(30):
            r = subprocess.run(link.wrap(["iperf3", "-c", link.dst_addr, "-p", str(port),
                                          "-P", str(streams), "-J"] + length, "src"),
                               capture_output=True, text=True, timeout=timeout_s)
            try:
                res = json.loads(r.stdout)
            except ValueError:
                res = {"error": (r.stderr.strip() or r.stdout.strip())[-200:]}
            if r.returncode == 0 and "error" not in res:
                break
            err = res.get("error", "exit %d" % r.returncode)
            res = None
            time.sleep(0.2)
        if res is None:
            log("iperf3 on %s failed: %s" % (link.name, err))
            return None
        rx = res["end"]["sum_received"]
        return float(rx["bits_per_second"]), float(rx["seconds"])
    except (subprocess.TimeoutExpired, ValueError, KeyError) as e:
        log("iperf3 on %s: no rate (%s: %s)" % (link.name, type(e).__name__, e))
        return None
    finally:
        if srv.poll() is None:
            srv.terminate()
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


# ---- one migration --------------------------------------------------------

def proc_cpu_s(pid):
    """utime + stime of PID in seconds (10 ms resolution), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def host_steal_s():
    """CPU time the hypervisor gave to others while this machine's CPUs wanted
    it (/proc/stat steal, all CPUs, 10 ms resolution), or None."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8]) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


class Bench:
    def __init__(self, args):
        self.args = args
        self.godwit = None
        for cand in ("tools/godwit", "godwit"):
            p = os.path.join(args.build, cand)
            if os.access(p, os.X_OK):
                self.godwit = os.path.abspath(p)
                break
        self.tmp = tempfile.mkdtemp(prefix="gw-bench.")
        self.procs = []
        self.links = []
        self.ramfiles = {}
        self.records = []
        os.makedirs(args.out, exist_ok=True)
        self.out_path = os.path.join(args.out, time.strftime("%Y%m%d-%H%M%S") +
                                     ("-quick" if args.quick else "") + ".jsonl")
        self.out = open(self.out_path, "a")
        self.nrun = 0
        self.ntotal = 0

    # -- process plumbing --

    def spawn(self, argv, log_path, stdout=subprocess.DEVNULL):
        lf = open(log_path, "ab")
        p = subprocess.Popen(argv, stdout=stdout, stderr=lf, stdin=subprocess.DEVNULL)
        lf.close()
        self.procs.append(p)
        return p

    def stop(self, p, api):
        if p is None:
            return
        if p.poll() is None and api and os.path.exists(api):
            subprocess.run([self.godwit, "quit", "--api", api], capture_output=True, timeout=30)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def gw_json(self, *argv, timeout=60):
        r = subprocess.run([self.godwit] + list(argv) + ["--json"], capture_output=True,
                           text=True, timeout=timeout)
        try:
            return r.returncode, json.loads(r.stdout)
        except ValueError:
            return r.returncode, None

    def wait_running(self, api, proc, timeout_s):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if proc.poll() is not None:
                return False
            if os.path.exists(api):
                rc, st = self.gw_json("status", "--api", api)
                if st and st.get("vm-status") == "running":
                    return True
            time.sleep(0.1)
        return False

    def read_incoming(self, proc, timeout_s):
        end = time.monotonic() + timeout_s
        buf = b""
        fd = proc.stdout.fileno()
        while time.monotonic() < end and b"\n" not in buf:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
        line = buf.split(b"\n", 1)[0].decode(errors="replace").split()
        if len(line) == 2 and line[0] == "incoming":
            return line[1]
        return None

    def sparse_ramfile(self, memory, touched):
        """A tmpfs file of MEMORY bytes whose first TOUCHED bytes hold mix content, the
        rest a hole never written (a big guest that used a little of its RAM)."""
        key = ("sparse", memory, touched)
        if key in self.ramfiles:
            return self.ramfiles[key]
        path = self.ramfile(touched, "mix")
        sparse = path.replace(".ram", "-in-%s.ram" % size_str(memory))
        self.ramfiles[key] = sparse	# before it exists: an interrupted copy is removed too
        shutil.copyfile(path, sparse)
        os.truncate(sparse, memory)
        return sparse

    def ramfile(self, memory, fill):
        """A tmpfs file holding RAM already filled with FILL.

        Filling 4 GiB with mix content costs ~30 s of CPU here; doing it once
        per size and mapping the file in every source (--memory-file, --fill
        none keeps what is there) keeps that cost out of the run's time budget.
        The idle workload writes only its progress counter into it."""
        key = (memory, fill)
        if key in self.ramfiles:
            return self.ramfiles[key]
        d = "/dev/shm" if os.path.isdir("/dev/shm") else self.tmp
        path = os.path.join(d, "gw-bench-%d-%s-%s.ram" % (os.getpid(), size_str(memory), fill))
        api = os.path.join(self.tmp, "fill.sock")
        log("preparing %s of %s RAM content in %s" % (size_str(memory), fill, path))
        self.ramfiles[key] = path	# before it exists: an interrupted fill is removed too
        p = self.spawn([self.godwit, "run", "--api", api, "--memory", str(memory),
                        "--memory-file", path, "--fill", fill, "--workload", "idle",
                        "--log-level", "warn"], os.path.join(self.tmp, "fill.log"))
        ok = self.wait_running(api, p, 600)
        self.stop(p, api)
        if not ok:
            raise RuntimeError("could not prepare %s (see %s/fill.log)" % (path, self.tmp))
        return path

    def progress_rate(self, api, seconds):
        """The guest's pages per second over SECONDS, from two status reads."""
        _, a = self.gw_json("status", "--api", api)
        t0 = time.monotonic()
        time.sleep(seconds)
        _, b = self.gw_json("status", "--api", api)
        t1 = time.monotonic()
        if not a or not b:
            return None
        return (b.get("guest-progress-count", 0) - a.get("guest-progress-count", 0)) / (t1 - t0)

    def wait_progress(self, api, proc, pages, timeout_s):
        """Until the guest wrote more than PAGES pages (a balloon that filled its RAM)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and proc.poll() is None:
            rc, st = self.gw_json("status", "--api", api)
            if st and st.get("guest-progress-count", 0) > pages:
                return True
            time.sleep(0.5)
        return False

    def migrate(self, link, group, memory, fill, workload, channels=1, codec="none",
                extra=(), iperf_bps=None, use_ramfile=True, src_extra=(), dst_prealloc=None,
                wait_pages=0, give_up_ok=False, dst_extra=(), progress=False, accel="soft"):
        """One migration with fresh processes; returns the record (dict).

        src_extra / dst_extra: more `run` options for the source (--vcpus ...)
        and the destination; dst_prealloc: None follows --no-dst-prealloc, else
        True/False; wait_pages: migrate once the guest wrote more pages than
        this; give_up_ok: "did not converge" is an outcome (rec["outcome"]),
        not an error; accel: the VM backend of both sides (soft, kvm);
        progress: measure the guest's progress rate before the
        migration (source, over one second) and during postcopy (from the
        destination's postcopy_ram log lines)."""
        self.nrun += 1
        label = "%s %s %s fill=%s %s ch=%d %s" % (group, link.name, size_str(memory), fill,
                                                  workload, channels, codec)
        run_dir = tempfile.mkdtemp(prefix="m%03d." % self.nrun, dir=self.tmp)
        src_api = os.path.join(run_dir, "src.sock")
        dst_api = os.path.join(run_dir, "dst.sock")
        common = ["--log-level", "info" if self.args.keep_logs else "warn",
                  "--set", "io-timeout-ms=%d" % self.args.io_timeout_ms, "--accel", accel]
        rec = {"group": group, "link": link.name, "link-rate": link.rate,
               "memory": memory, "fill": fill, "workload": workload,
               "channels": channels, "codec": codec, "extra": list(extra),
               "src-extra": list(src_extra), "accel": accel,
               "iperf-bps": iperf_bps, "error": None}
        src = dst = None
        t_start = time.monotonic()
        try:
            src_argv = [self.godwit, "run", "--api", src_api, "--memory", str(memory),
                        "--workload", workload] + common + list(src_extra)
            # Only an idle guest may share the prepared file: a dirtying one
            # would change the content later runs start from.
            if use_ramfile and workload == "idle" and fill.startswith("sparse:"):
                src_argv += ["--memory-file", self.sparse_ramfile(memory, parse_size(fill[7:])),
                             "--fill", "none"]
            elif use_ramfile and workload == "idle" and fill not in ("none", "zero"):
                src_argv += ["--memory-file", self.ramfile(memory, fill), "--fill", "none"]
            else:
                src_argv += ["--fill", fill]
            # The destination exists before the migrate command, with the
            # guest's size and its RAM preallocated (QEMU -mem-prealloc): on
            # this virtualised host first touches of memory cost ~3 s/GiB and
            # are not migration work. --no-dst-prealloc measures without.
            dst_argv = [self.godwit, "run", "--incoming", "tcp:%s:0" % link.dst_addr,
                        "--api", dst_api] + common + list(dst_extra)
            if progress:
                dst_argv += ["--log-level", "info"]	# postcopy_ram lines, stamped
            if dst_prealloc is None:
                dst_prealloc = not self.args.no_dst_prealloc
            if dst_prealloc:
                dst_argv += ["--memory", str(memory), "--prealloc"]
            dst = self.spawn(link.wrap(dst_argv, "dst"),
                             os.path.join(run_dir, "dst.log"), stdout=subprocess.PIPE)
            src = self.spawn(link.wrap(src_argv, "src"), os.path.join(run_dir, "src.log"))
            url = self.read_incoming(dst, 600)
            if not url:
                raise RuntimeError("destination printed no 'incoming URL' line")
            if not self.wait_running(src_api, src, 600):
                raise RuntimeError("source VM did not start")
            if wait_pages and not self.wait_progress(src_api, src, wait_pages, 900):
                raise RuntimeError("guest did not write %d pages" % wait_pages)
            if progress:
                rec["pre-progress-pps"] = self.progress_rate(src_api, 1.0)
            mig = [self.godwit, "migrate", "--api", src_api, "--to", url, "--json",
                   "--channels", str(channels), "--compress", codec] + list(extra)
            if self.args.timelines:
                os.makedirs(self.args.timelines, exist_ok=True)
                rec["timeline"] = os.path.join(self.args.timelines, "%03d-%s-%s.csv" % (
                    self.nrun, group, link.name))
                mig += ["--timeline", rec["timeline"]]
            dcpu0, steal0 = proc_cpu_s(dst.pid), host_steal_s()
            t0 = time.monotonic()
            r = subprocess.run(mig, capture_output=True, text=True,
                               timeout=self.args.migrate_timeout_s)
            wall = time.monotonic() - t0
            dcpu1, steal1 = proc_cpu_s(dst.pid), host_steal_s()
            rec["host-steal-ms"] = (steal1 - steal0) * 1000.0 if steal0 is not None and steal1 is not None \
                else None
            try:
                st = json.loads(r.stdout)
            except ValueError:
                raise RuntimeError("migrate printed no JSON (exit %d): %s" %
                                   (r.returncode, r.stderr.strip()[-300:]))
            rec["stats"] = st
            rec["migrate-wall-s"] = wall
            rec["dst-cpu-seconds"] = (dcpu1 - dcpu0) if dcpu0 is not None and dcpu1 is not None \
                else None
            completed = st.get("status") == "completed"
            progress_wanted = progress
            check = "n/a"
            progress = None
            if completed and progress_wanted:
                # The paused source's count is the guest's at the pause: where
                # the destination's postcopy progress starts (its own count at
                # the switch may be a copy precopy sent earlier, under KVM).
                _, s0 = self.gw_json("status", "--api", src_api)
                rec["src-progress-at-pause"] = (s0 or {}).get("guest-progress-count")
            if completed:
                if self.wait_running(dst_api, dst, 30):
                    _, s1 = self.gw_json("status", "--api", dst_api)
                    time.sleep(0.3)
                    _, s2 = self.gw_json("status", "--api", dst_api)
                    if s1 and s2:
                        progress = s2.get("guest-progress-count", 0) > \
                            s1.get("guest-progress-count", 0)
                    rec["dst-stats"] = s2 or s1
                    crc, c = self.gw_json("check", "--api", dst_api, timeout=300)
                    check = {0: "ok", 1: "mismatch", 2: "n/a"}.get(crc, "error")
                else:
                    check = "dst-not-running"
            if progress:
                rec["postcopy-progress-pps"] = postcopy_progress(os.path.join(run_dir, "dst.log"),
                                                                 rec.get("src-progress-at-pause"))
            digest = st.get("verified", False)
            rec["check"] = check
            rec["guest-progress"] = progress
            # As godwit demo: verified when at least one check ran and none failed.
            rec["verified"] = bool(completed and digest and check in ("ok", "n/a"))
            if not completed and give_up_ok and "did not converge" in st.get("error-desc", ""):
                rec["outcome"] = "did not converge: " + st.get("converge-hint", "")[:80]
            elif not completed:
                rec["error"] = "%s: %s" % (st.get("status"), st.get("error-desc", ""))
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            rec["error"] = str(e)
        finally:
            self.stop(src, src_api)
            self.stop(dst, dst_api)
        derive(rec)
        rec["run-s"] = time.monotonic() - t_start
        if rec["error"]:
            for side in ("src", "dst"):
                try:
                    with open(os.path.join(run_dir, side + ".log"), errors="replace") as f:
                        tail = f.read().strip().splitlines()[-3:]
                    rec[side + "-log-tail"] = tail
                except OSError:
                    pass
        if self.args.keep_logs:
            dest = os.path.join(self.args.keep_logs, "%03d" % self.nrun)
            os.makedirs(dest, exist_ok=True)
            for side in ("src", "dst"):
                if os.path.exists(os.path.join(run_dir, side + ".log")):
                    shutil.copy(os.path.join(run_dir, side + ".log"), dest)
            rec["logs"] = dest
        self.out.write(json.dumps(rec, sort_keys=True) + "\n")
        self.out.flush()
        self.records.append(rec)
        shutil.rmtree(run_dir, ignore_errors=True)
        if rec["error"]:
            log("[%d/%d] %s: FAILED: %s" % (self.nrun, self.ntotal, label, rec["error"]))
        else:
            log("[%d/%d] %s: %.0f ms total, %.1f ms downtime, %s (%.1f s)" %
                (self.nrun, self.ntotal, label, rec["total-ms"], rec["downtime-ms"],
                 "verified" if rec["verified"] else "NOT verified", rec["run-s"]))
        return rec

    def cleanup(self):
        for p in list(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        for link in self.links:
            link.teardown()
        for path in self.ramfiles.values():
            try:
                os.unlink(path)
            except OSError:
                pass
        self.ramfiles = {}
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.out.close()


def postcopy_progress(dst_log, start_count=None):
    """Pages per second the destination guest wrote between the postcopy
    switch (postcopy_ram complete=0) and the last page (complete=1), from the
    CLOCK_MONOTONIC stamps of the two VM log lines (soft or kvm). The count
    at the switch is START_COUNT when known (the paused source's), else the
    one the complete=0 line logged."""
    pts = []
    try:
        with open(dst_log, errors="replace") as f:
            for line in f:
                if " postcopy_ram " in line:
                    fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                    pts.append((float(line.split()[0]), int(fields.get("progress", 0))))
    except OSError:
        return None
    if len(pts) < 2 or pts[1][0] <= pts[0][0]:
        return None
    c0 = pts[0][1] if start_count is None else start_count
    return (pts[1][1] - c0) / (pts[1][0] - pts[0][0])


def derive(rec):
    """Figures of merit from the raw statistics (see docs/bench.md)."""
    st = rec.get("stats") or {}
    ram = st.get("ram") or {}
    total_ms = st.get("total-time") or 0.0
    secs = total_ms / 1000.0
    moved = (ram.get("normal", 0) + ram.get("duplicate", 0)) * PAGE_BYTES
    wire = ram.get("transferred", 0)
    rec["total-ms"] = total_ms
    rec["downtime-ms"] = st.get("downtime", 0.0)
    rec["setup-ms"] = st.get("setup-time", 0.0)
    rec["moved-bytes"] = moved
    rec["wire-bytes"] = wire
    rec["ram-bps"] = moved * 8 / secs if secs > 0 else None     # bits/s of guest pages
    rec["wire-bps"] = wire * 8 / secs if secs > 0 else None     # bits/s on the wire
    rec["span-bps"] = ram.get("total", 0) * 8 / secs if secs > 0 else None
    raw = ram.get("payload-raw-bytes", 0)
    pw = ram.get("payload-wire-bytes", 0)
    rec["compression-ratio"] = raw / pw if pw else ram.get("compression-ratio")
    ip = rec.get("iperf-bps")
    rec["ram-vs-iperf"] = rec["ram-bps"] / ip if ip and rec["ram-bps"] else None
    rec["wire-vs-iperf"] = rec["wire-bps"] / ip if ip and rec["wire-bps"] else None
    u, s = st.get("cpu-user-seconds"), st.get("cpu-system-seconds")
    rec["src-cpu-seconds"] = (u or 0.0) + (s or 0.0) if u is not None else None


# ---- tables ---------------------------------------------------------------

def fmt(v, spec="%.1f", none="-"):
    return none if v is None else spec % v


def gbit(bps):
    return fmt(bps / 1e9 if bps is not None else None, "%.2f")


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if i else "---" for i in range(len(headers))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def verified_cell(rec):
    if rec.get("error"):
        return "FAILED: " + rec["error"][:60]
    return ("yes" if rec["verified"] else "NO") + ("" if rec.get("check") in (None, "n/a")
                                                   else " (check %s)" % rec["check"])


def table_basic(recs):
    headers = ["scenario", "VM", "guest pages/s", "link", "iperf3 Gbit/s", "total ms", "downtime ms", "setup ms",
               "transferred B", "mbps", "pages/s", "rounds", "span Gbit/s", "RAM Gbit/s",
               "wire Gbit/s", "wire/iperf3", "CPU s src", "CPU s dst", "verified"]
    rows = []
    for r in recs:
        st = r.get("stats") or {}
        ram = st.get("ram") or {}
        rows.append([r["name"], r.get("accel", "soft"), fmt(r.get("pre-progress-pps"), "%.0f"),
                     r["link"], gbit(r["iperf-bps"]), fmt(r["total-ms"]),
                     fmt(r["downtime-ms"]), fmt(r["setup-ms"]), ram.get("transferred", "-"),
                     fmt(ram.get("mbps"), "%.0f"), ram.get("pages-per-second", "-"),
                     st.get("rounds", "-"), gbit(r["span-bps"]), gbit(r["ram-bps"]), gbit(r["wire-bps"]),
                     fmt(r["wire-vs-iperf"], "%.2f"), fmt(r["src-cpu-seconds"], "%.2f"),
                     fmt(r["dst-cpu-seconds"], "%.2f"), verified_cell(r)])
    return table(headers, rows)


def table_matrix(recs):
    headers = ["link", "RAM", "ch", "codec", "total ms", "downtime ms", "RAM Gbit/s",
               "wire Gbit/s", "wire B", "ratio", "CPU s src", "CPU s dst", "iperf3 Gbit/s",
               "RAM/iperf3", "wire/iperf3", "verified"]
    rows = []
    for r in recs:
        rows.append([r["link"], size_str(r["memory"]), r["channels"], r["codec"],
                     fmt(r["total-ms"], "%.0f"), fmt(r["downtime-ms"]), gbit(r["ram-bps"]),
                     gbit(r["wire-bps"]), r["wire-bytes"], fmt(r["compression-ratio"], "%.2f"),
                     fmt(r["src-cpu-seconds"], "%.2f"), fmt(r["dst-cpu-seconds"], "%.2f"),
                     gbit(r["iperf-bps"]), fmt(r["ram-vs-iperf"], "%.2f"),
                     fmt(r["wire-vs-iperf"], "%.2f"), verified_cell(r)])
    return table(headers, rows)


def spread(vals, spec="%.1f"):
    """median [min-max] of the values that exist."""
    v = sorted(x for x in vals if x is not None)
    if not v:
        return "-"
    med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    if len(v) == 1:
        return spec % med
    return (spec + " [" + spec + "-" + spec + "]") % (med, v[0], v[-1])


BREAKDOWN = [("pause", "pause"), ("final-harvest", "harvest"), ("final-send", "send"),
             ("state-save", "save"), ("state-send", "state"), ("dst-load", "load"),
             ("handover", "handover")]


def table_converge(groups):
    """One row per scenario and configuration, over its repeated runs."""
    headers = ["scenario", "config", "completed", "total ms", "downtime ms",
               "breakdown ms (median run)", "rounds", "transferred MiB", "max throttle %",
               "dirty limit", "verified"]
    rows = []
    for sc, recs in groups:
        done = [r for r in recs if (r.get("stats") or {}).get("status") == "completed"]
        dts = sorted(done, key=lambda r: r["downtime-ms"])
        mid = dts[len(dts) // 2] if dts else None
        bd = (mid or {}).get("stats", {}).get("downtime-breakdown", {}) if mid else {}
        rounds = [(r.get("stats") or {}).get("rounds") for r in recs]
        thr = [max([x.get("cpu-throttle-percentage", 0) for x in
                    (r.get("stats") or {}).get("round-table", [])] or [0]) for r in recs]
        dl = [(r.get("stats") or {}).get("dirty-limit-rate", 0) for r in recs]
        moved = [(r.get("stats") or {}).get("ram", {}).get("transferred", 0) / (1 << 20) for r in recs]
        if len(done) == len(recs) and all(r["verified"] for r in recs):
            ver = "yes"
        elif not done:
            ver = recs[0].get("outcome") or verified_cell(recs[0])
        else:
            ver = "%d of %d verified" % (sum(r["verified"] for r in recs), len(recs))
        rows.append([sc["name"], sc["config"], "%d/%d" % (len(done), len(recs)),
                     spread([r["total-ms"] for r in done], "%.0f"),
                     spread([r["downtime-ms"] for r in done]),
                     ", ".join("%s %.1f" % (short, bd.get(k, 0)) for k, short in BREAKDOWN) if bd else "-",
                     spread(rounds, "%d"), spread(moved, "%.0f"), spread(thr, "%d"),
                     "on" if any(dl) else "-", ver])
    return table(headers, rows)


def table_postcopy(groups):
    """The postcopy group's figures, one row per scenario and configuration, median [min-max] over runs."""
    headers = ["scenario", "VM", "config", "completed", "total ms", "downtime ms",
               "breakdown ms (median run)", "postcopy ms", "pages after switch",
               "requested", "pushed", "dup", "fault p50 us", "fault p99 us", "fault max us",
               "blocktime ms (all vCPUs)", "vCPU blocktime ms (sum)", "progress pre, pages/s",
               "progress in postcopy", "ratio", "verified"]
    rows = []
    for sc, recs in groups:
        done = [r for r in recs if (r.get("stats") or {}).get("status") == "completed"]
        pcs = [r for r in done if (r.get("stats") or {}).get("postcopy")]
        dts = sorted(done, key=lambda r: r["downtime-ms"])
        mid = dts[len(dts) // 2] if dts else None
        bd = (mid or {}).get("stats", {}).get("downtime-breakdown", {}) if mid else {}

        def pc(r, k, sub=None):
            v = (r.get("stats") or {}).get("postcopy", {}).get(k)
            return v.get(sub) if sub and isinstance(v, dict) else v

        ratio = [r["postcopy-progress-pps"] / r["pre-progress-pps"] for r in pcs
                 if r.get("postcopy-progress-pps") is not None and r.get("pre-progress-pps")]
        rows.append([sc["name"], sc.get("accel", "soft"), sc["config"],
                     "%d/%d (%d postcopy)" % (len(done), len(recs), len(pcs)),
                     spread([r["total-ms"] for r in done], "%.0f"),
                     spread([r["downtime-ms"] for r in done], "%.2f"),
                     ", ".join("%s %.2f" % (short, bd.get(k, 0)) for k, short in BREAKDOWN) if bd else "-",
                     spread([pc(r, "postcopy-time") for r in pcs], "%.0f"),
                     spread([pc(r, "pages") for r in pcs], "%d"),
                     spread([pc(r, "requests") for r in pcs], "%d"),
                     spread([pc(r, "pushed") for r in pcs], "%d"),
                     spread([pc(r, "duplicates") for r in pcs], "%d"),
                     spread([pc(r, "fault-latency-us", "p50") for r in pcs], "%.0f"),
                     spread([pc(r, "fault-latency-us", "p99") for r in pcs], "%.0f"),
                     spread([pc(r, "fault-latency-us", "max") for r in pcs], "%.0f"),
                     spread([(r.get("stats") or {}).get("postcopy-blocktime") for r in pcs], "%.1f"),
                     spread([pc(r, "vcpu-blocktime-total") for r in pcs], "%.1f"),
                     spread([r.get("pre-progress-pps") for r in recs], "%.0f"),
                     spread([r.get("postcopy-progress-pps") for r in pcs], "%.0f"),
                     spread(ratio, "%.2f"),
                     "yes" if done and len(done) == len(recs) and all(r["verified"] for r in recs) else
                     "%d of %d verified" % (sum(r["verified"] for r in recs), len(recs))])
    return table(headers, rows)


# ---- scenarios ------------------------------------------------------------

# The convergence group's scenarios: name, memory, fill, workload, source
# options, migrate options per configuration, and the pages the guest must
# have written before the migration starts (its working set is populated,
# the balloon has filled its RAM). The dirtying ones give up after 20 s
# (--converge-timeout ... cancel): a run that cannot converge ends and says so.
GIVE_UP = ["--converge-timeout", "20000", "--on-timeout", "cancel"]


def converge_plan(args):
    q = args.quick
    if q:
        return [
            dict(name="256M touched then freed", memory=256 * MIB, fill="none",
                 workload="balloon:keep=32M,rate=5000", src=["--vcpus", "1"],
                 wait=65536 + 1024, configs=[("hints", []), ("no hints", ["--set", "free-page-hints=0"])]),
            dict(name="64M hot set at 80 MB/s, 10 ms limit", memory=256 * MIB, fill="none",
                 workload="dirty:ws=64M,rate=20000", src=[], wait=16384,
                 # force, not cancel: the smoke test wants every row completed on any machine
                 configs=[("auto-converge", ["--downtime-limit", "10", "--auto-converge",
                                             "--converge-timeout", "20000", "--on-timeout", "force"])]),
        ]
    hot = ["--downtime-limit", "10"] + GIVE_UP
    return [
        dict(name="idle 8G never touched", memory=8 * GIB, fill="none", workload="idle", src=[],
             wait=0, configs=[("defaults", [])]),
        dict(name="8G touched once, 7G freed", memory=8 * GIB, fill="none",
             workload="balloon:keep=1G,rate=5000", src=["--vcpus", "1"], wait=2097152 + 4096,
             configs=[("hints", []), ("no hints", ["--set", "free-page-hints=0"])]),
        dict(name="4 vCPU x 256M byte/page, 8G guest", memory=8 * GIB, fill="none",
             workload="dirty:ws=1G", src=["--vcpus", "4"], wait=262144,
             configs=[("defaults", GIVE_UP), ("auto-converge", ["--auto-converge"] + GIVE_UP),
                      ("dirty limit 16M", ["--dirty-limit", "16M"] + GIVE_UP)]),
        dict(name="256M hot set, 10 ms limit", memory=1 * GIB, fill="none",
             workload="dirty:ws=256M", src=[], wait=65536,
             configs=[("defaults", hot), ("auto-converge", hot + ["--auto-converge"]),
                      ("dirty limit 64M", hot + ["--dirty-limit", "64M"])]),
    ]


# The postcopy group: the convergence group's hot set rewritten at full speed (one
# byte per page), 1 and 4 vCPUs, and the four-vCPU 8 GiB guest, each switched
# to postcopy after 2 precopy rounds (a 1 ms downtime limit keeps precopy
# from finishing by itself), with normal scheduling, with rt-priority 10
# on both ends, and with rt plus postcopy-background-nice 10 (the background
# stream yields the CPUs to the guest). --accel kvm runs them with KVM guests.
# The destination's RAM is not preallocated (the pages arrive into fresh
# memory, as with --no-dst-prealloc).
PC_AFTER = ["--postcopy-after", "2", "--downtime-limit", "1"]
PC_RT = ["--set", "rt-priority=10"]
PC_NICE = ["--set", "postcopy-background-nice=10"]


def postcopy_plan(args):
    cfgs = [("after 2 rounds", PC_AFTER, []), ("after 2 rounds, rt", PC_AFTER + PC_RT, PC_RT),
            ("after 2 rounds, rt, background nice 10", PC_AFTER + PC_RT + PC_NICE, PC_RT + PC_NICE)]
    if args.quick:
        return [dict(name="64M hot set, 1 vCPU", memory=256 * MIB, workload="dirty:ws=64M", src=[],
                     wait=16384, configs=cfgs[:1])]
    return [
        dict(name="256M hot set, 1 vCPU", memory=1 * GIB, workload="dirty:ws=256M", src=[],
             wait=65536, configs=cfgs),
        dict(name="256M hot set, 4 vCPUs", memory=1 * GIB, workload="dirty:ws=256M",
             src=["--vcpus", "4"], wait=65536, configs=cfgs),
        dict(name="4 vCPU x 256M byte/page, 8G guest", memory=8 * GIB, workload="dirty:ws=1G",
             src=["--vcpus", "4"], wait=262144, configs=cfgs),
    ]


def run_postcopy(b, lo, scenarios, repeat, accels):
    """Each configuration on each VM backend REPEAT times, interleaved."""
    lo.setup()
    groups = [(dict(name=sc["name"], config=name, accel=accel), sc, extra, dst)
              for sc in scenarios for accel in accels for name, extra, dst in sc["configs"]]
    recs = {id(g[0]): [] for g in groups}
    for _ in range(repeat):
        for key, sc, extra, dst in groups:
            # The destination is made with the source's --vcpus (QEMU's -smp on both).
            rec = b.migrate(lo, "postcopy", sc["memory"], "none", sc["workload"], channels=2,
                            extra=extra, src_extra=sc["src"], dst_extra=list(dst) + sc["src"],
                            dst_prealloc=False,
                            wait_pages=sc["wait"], use_ramfile=False, progress=True,
                            accel=key["accel"])
            rec["name"], rec["config"] = key["name"], key["config"]
            recs[id(key)].append(rec)
    return [(key, recs[id(key)]) for key, _, _, _ in groups]


def plan(args, netns_ok):
    """(basic, matrix): lists of scenario dicts, and the links they need."""
    q = args.quick
    basic = []
    if q:
        basic = [
            dict(name="idle 256M untouched", memory=256 * MIB, fill="none", workload="idle"),
            dict(name="idle 256M mix", memory=256 * MIB, fill="mix", workload="idle"),
            dict(name="dirty 256M ws=64M", memory=256 * MIB, fill="mix",
                 workload="dirty:ws=64M,pattern=page",
                 extra=["--converge-timeout", "10000", "--on-timeout", "force"]),
        ]
    else:
        basic = [
            dict(name="idle 8G untouched", memory=8 * GIB, fill="none", workload="idle"),
            dict(name="idle 4G mix", memory=4 * GIB, fill="mix", workload="idle"),
            dict(name="dirty 1G ws=256M", memory=1 * GIB, fill="mix",
                 workload="dirty:ws=256M,pattern=page",
                 extra=["--converge-timeout", "20000", "--on-timeout", "force"]),
        ]
    if q:
        links = [("loopback", 256 * MIB, [1, 2], ["none", "zstd"])]
        if netns_ok:
            links.append(("1gbit", 256 * MIB, [2], ["none", "lz4"]))
    else:
        # 1 GiB per migration on every link: 54 migrations of 4 GiB take
        # about an hour on this 2-core machine (zlib alone ~40 s each), far
        # over the run's ~20 minute budget. --memory 4G runs it at 4 GiB.
        links = [("loopback", 1 * GIB, [1, 2, 4], CODECS)]
        if netns_ok:
            links += [("10gbit", 1 * GIB, [1, 2, 4], CODECS),
                      ("1gbit", 1 * GIB, [1, 2, 4], CODECS)]
    if args.links:
        want = args.links.split(",")
        links = [l for l in links if l[0] in want]
    matrix = []
    for name, mem, chans, codecs in links:
        if args.memory:
            mem = parse_size(args.memory)
        for ch in chans:
            if args.channels and str(ch) not in args.channels.split(","):
                continue
            for c in codecs:
                if args.codecs and c not in args.codecs.split(","):
                    continue
                matrix.append(dict(link=name, memory=mem, channels=ch, codec=c))
    return basic, matrix


def run_converge(b, lo, conv, repeat):
    """Each configuration REPEAT times, interleaved (runs of one configuration
    do not share one stretch of background load). Not converging is an
    outcome here, not an error."""
    lo.setup()
    groups = [(dict(name=sc["name"], config=name), sc, extra) for sc in conv
              for name, extra in sc["configs"]]
    recs = {id(g[0]): [] for g in groups}
    for _ in range(repeat):
        for key, sc, extra in groups:
            # The destination is made with the source's --vcpus (QEMU's -smp on both).
            rec = b.migrate(lo, "converge", sc["memory"], sc["fill"], sc["workload"],
                            extra=extra, src_extra=sc["src"], dst_extra=sc["src"], dst_prealloc=False,
                            wait_pages=sc["wait"], use_ramfile=False, give_up_ok=True)
            rec["name"], rec["config"] = key["name"], key["config"]
            recs[id(key)].append(rec)
    return [(key, recs[id(key)]) for key, _, _ in groups]


def pick_scenarios(scenarios, args):
    """The scenarios and configurations of --scenarios / --configs (name substrings)."""
    want_sc = [w for w in args.scenarios.split(",") if w]
    want_cfg = [w for w in args.configs.split(";") if w]
    out = []
    for sc in scenarios:
        if want_sc and not any(w in sc["name"] for w in want_sc):
            continue
        cfgs = [c for c in sc["configs"] if not want_cfg or any(w == c[0] for w in want_cfg)]
        if cfgs:
            out.append(dict(sc, configs=cfgs))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true", help="reduced set (256M, few combos)")
    ap.add_argument("--groups", default="basic,matrix,converge,postcopy,datapath",
                    help="basic,matrix,converge,postcopy,datapath")
    ap.add_argument("--repeat", type=int, default=0,
                    help="runs of each convergence configuration (default 3, 1 with --quick)")
    ap.add_argument("--links", default="", help="matrix links: loopback,10gbit,1gbit")
    ap.add_argument("--channels", default="", help="matrix channel counts, e.g. 1,4")
    ap.add_argument("--codecs", default="", help="matrix codecs, e.g. none,zstd")
    ap.add_argument("--memory", default="", help="matrix RAM size for every link, e.g. 1G")
    ap.add_argument("--scenarios", default="",
                    help="converge and postcopy groups: only scenarios whose name holds one of "
                         "these comma-separated words, e.g. '8G guest'")
    ap.add_argument("--configs", default="",
                    help="converge and postcopy groups: only these configurations, by their full "
                         "name, separated by ';', e.g. 'after 2 rounds, rt;defaults'")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--iperf-seconds", type=int, default=3)
    ap.add_argument("--io-timeout-ms", type=int, default=60000,
                    help="godwit io-timeout-ms for both ends (default 60000)")
    ap.add_argument("--migrate-timeout-s", type=int, default=300)
    ap.add_argument("--accel", default="soft",
                    help="VM backend(s) of the basic and postcopy groups: soft, kvm or "
                         "soft,kvm (other groups: soft)")
    ap.add_argument("--no-dst-prealloc", action="store_true",
                    help="destinations allocate RAM as pages arrive (default: preallocated)")
    ap.add_argument("--keep-logs", default="",
                    help="directory: every migration's src.log and dst.log are kept there, "
                         "under its number (with --log-level info on both ends)")
    ap.add_argument("--timelines", default="",
                    help="directory: every migration records a --timeline CSV there (plot.py)")
    args = ap.parse_args()
    groups = args.groups.split(",")

    b = Bench(args)
    if not b.godwit:
        sys.stderr.write("bench: no godwit binary under %s\n" % args.build)
        return 77
    netns_ok = subprocess.run(["bash", "-c", '. "%s" && netns_available' % NETNS_LIB]).returncode == 0
    if not netns_ok:
        log("network namespaces unavailable (need root / CAP_NET_ADMIN): loopback only")
    if not shutil.which("iperf3"):
        log("iperf3 missing: the iperf3 columns stay empty (apt-get install iperf3)")
    basic, matrix = plan(args, netns_ok)
    if "basic" not in groups:
        basic = []
    if "matrix" not in groups:
        matrix = []
    conv = pick_scenarios(converge_plan(args), args) if "converge" in groups else []
    pcs = pick_scenarios(postcopy_plan(args), args) if "postcopy" in groups else []
    dp = datapath.plan(args, netns_ok) if "datapath" in groups else None
    repeat = args.repeat or (1 if args.quick else 3)
    naccel = len(args.accel.split(","))
    b.ntotal = len(basic) * naccel + len(matrix) + repeat * sum(len(sc["configs"]) for sc in conv) + \
        repeat * naccel * sum(len(sc["configs"]) for sc in pcs) + \
        (datapath.count(dp) if dp else 0)
    log("%d migrations planned; raw results: %s" % (b.ntotal, b.out_path))

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)

    links = {"loopback": Link("loopback"),
             "10gbit": Link("10gbit", "10gbit", 201),
             "1gbit": Link("1gbit", "1gbit", 202)}
    rc = 0
    try:
        basic_recs = []
        if basic:
            lo = links["loopback"]
            lo.setup()
            for sc in basic:
                # The link is measured right before each scenario (same run,
                # same background load as near as we can).
                bps = iperf(lo, args.iperf_seconds)
                for accel in args.accel.split(","):
                    # the guest's own rate, measured over 1 s before the
                    # migration: what a KVM guest (emulated here) reaches
                    rec = b.migrate(lo, "basic", sc["memory"], sc["fill"], sc["workload"],
                                    extra=sc.get("extra", ()), iperf_bps=bps, accel=accel,
                                    progress=sc["workload"] != "idle")
                    rec["name"] = sc["name"]
                    basic_recs.append(rec)
            print("## Scenarios (%s)\n" % ("quick" if args.quick else "full"))
            print(table_basic(basic_recs))
            print()
            sys.stdout.flush()
        matrix_recs = []
        by_link = {}
        for m in matrix:
            by_link.setdefault(m["link"], []).append(m)
        for lname, ms in by_link.items():
            link = links[lname]
            b.links.append(link)
            link.setup()
            bps = iperf(link, args.iperf_seconds)
            log("iperf3 %s: %s Gbit/s" % (lname, gbit(bps)))
            recs = []
            for m in ms:
                recs.append(b.migrate(link, "matrix", m["memory"], "mix", "idle",
                                      m["channels"], m["codec"], iperf_bps=bps))
            link.teardown()
            matrix_recs += recs
            print("## Channels x codec over %s (%s of mix RAM, idle guest)\n" %
                  (lname, size_str(ms[0]["memory"])))
            print(table_matrix(recs))
            print()
            sys.stdout.flush()
        if dp:
            print(datapath.run(b, links, dp, args, sys.modules[__name__]))
            sys.stdout.flush()
        if conv:
            conv_groups = run_converge(b, links["loopback"], conv, repeat)
            print("## Convergence (%s, loopback, %d run%s each: median [min-max])\n" %
                  ("quick" if args.quick else "full", repeat, "s" if repeat > 1 else ""))
            print(table_converge(conv_groups))
            print()
            sys.stdout.flush()
        if pcs:
            pc_groups = run_postcopy(b, links["loopback"], pcs, repeat, args.accel.split(","))
            print("## Postcopy (%s, loopback, 2 channels, %d run%s each: median [min-max])\n" %
                  ("quick" if args.quick else "full", repeat, "s" if repeat > 1 else ""))
            print(table_postcopy(pc_groups))
            print()
            sys.stdout.flush()
        if any(r["error"] for r in b.records):
            rc = 1
    except KeyboardInterrupt:
        log("interrupted")
        rc = 130
    finally:
        b.cleanup()
    log("done in %.0f s; raw results: %s" % (time.monotonic() - T0, b.out_path))
    return rc


if __name__ == "__main__":
    sys.exit(main())
