#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The NFV measurement: a VM forwarding frames between two hosts is
migrated while bench/gwpktgen sends it numbered, timestamped, checksummed
frames at a fixed rate and counts what comes back; godwit's own figures
beside what the packets saw.

  bench/nfv.py BUILD [--accel kvm|soft] [--memory SIZE] [--fill mix|none] [--data SIZE]
               [--nics 1|2] [--pps N] [--link 10g|none] [--downtime-limit MS] [--runs N] [--json]
               [--guest l2fwd|standin]

--accel, --fill and --nics take several values separated by commas: the
configurations are their cross product, run interleaved (A, B, A, B, ...).
The defaults are the scenario of docs/bench.md (NFV): 8 GiB, 1 GiB of it
mix (--data), two NICs, --downtime-limit 10, the 10 Gbit/s link.

Every run, with fresh processes, on the topology of
tests/integration/nfv_topo.sh (source host, destination host, switch,
generator: four network namespaces, the migration on its own link):
  (first)      the bridges forget the MACs they learned in the last run
  source       [src] godwit run --memory SIZE --memory-file RAM --fill none --workload l2fwd --nic ...
               (RAM: a tmpfs file whose first --data bytes hold --fill content, the rest a hole;
               --prealloc too when --data is the whole RAM: mapped first, as a running guest's)
  warm-up      frames through the guest until some come back: the switch learns its MACs
  destination  [dst] godwit run --incoming tcp:DST:0 --memory SIZE --prealloc --nic ...
               (only now: an open tap would keep frames flooded before the switch learned)
  generator    [gen] gwpktgen --pps N for the whole run; after 1.5 s of traffic
  driver       godwit migrate --downtime-limit MS ... --json
While the migration runs, the logs of both VMMs are followed: the source's
vm_pause stamp (minus pause_us: the pause request) is the mark given to
gwpktgen, which splits the forwarded rate into before and after and picks
the gap the migration caused; the destination's vm_resume and first
announce_round are the resume and the announce.

--guest standin: no guest forwards yet (the VMs run idle, no NIC); bench/
tapecho stands in for the guest on NIC 0's tap, on the source host, and a
second one waits on the destination host's tap, opened and stopped. At the
source's vm_pause the first is stopped (SIGSTOP), at the destination's
vm_resume the second is continued and sends its RARP (--rarp-on-cont). So
the frames follow the VM's switchover, as a guest's would, but frames that
reach the source's tap during the pause are not carried: the stand-in's
"lost" is not godwit's.

Per run (the table and --json): total-ms and downtime-ms (godwit's),
net-gap-ms (the longest gap between two consecutive frames received back
around the migration: gwpktgen's mark gap), gap-resolution-ms (one frame
interval), gap-minus-downtime-ms, gap-start-ms (from the pause request to
the last frame before the gap) and gap-end-ms (from the resume to the first
frame after it), announce-ms (resume to the first announce round; with the
stand-in: to its continue), lost, duplicated, reordered, corrupted,
carried (frames the destination's NICs took over), forwarded-pps-before
and -after, verified (the RAM digests). Nothing here judges a figure.

Needs root (namespaces, taps); exits 77 where the topology cannot be made.
Everything it starts is stopped, and the namespaces and RAM files removed,
on exit, also on error or Ctrl-C.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402

TOPO = os.path.join(B.ROOT, "tests", "integration", "nfv_topo.sh")
PRE_S = 1.5          # traffic before the migrate command
POST_S = 1.5         # traffic after the migration ended, at least


class Topo:
    """nfv_topo.sh's four namespaces; env: its NFV_* variables."""

    def __init__(self, name, link, nics):
        self.name, self.link, self.nics = name, link, nics
        self.env = None

    def available(self):
        return subprocess.run(["bash", "-c", '. "%s" && nfv_available' % TOPO]).returncode == 0

    def setup(self):
        sh = '. "%s" && nfv_setup %s --link %s --nics %d >&2 && env' % (TOPO, self.name, self.link, self.nics)
        r = subprocess.run(["bash", "-c", sh], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("nfv_setup failed: %s" % r.stderr.strip()[-300:])
        self.env = dict(line.split("=", 1) for line in r.stdout.splitlines()
                        if line.startswith("NFV_") and "=" in line)

    def teardown(self):
        subprocess.run(["bash", "-c", '. "%s" && nfv_teardown %s' % (TOPO, self.name)], check=False)

    def ns(self, side, argv):
        return ["ip", "netns", "exec", self.env["NFV_" + side.upper()]] + argv

    def forget_macs(self):
        """Empty what the switch and the hosts' bridges learned: a previous run's announce
        left the guest's MACs on the destination's side, and a guest that only forwards
        never sends first, so the switch would never learn them back."""
        for side in ("sw", "src", "dst"):
            subprocess.run(self.ns(side, ["ip", "link", "set", "dev", self.env["NFV_BR"], "type", "bridge",
                                          "fdb_flush"]), capture_output=True)

    def link_counts(self):
        """(qdisc drops on both ends of the migration link, TCP segments retransmitted by
        both hosts): a drop there costs the migration a retransmission timeout."""
        drops = retrans = 0
        for side in ("src", "dst"):
            r = subprocess.run(self.ns(side, ["tc", "-s", "qdisc", "show", "dev", self.env["NFV_MIG_IF"]]),
                               capture_output=True, text=True)
            drops += sum(int(w[i + 1].rstrip(",")) for w in [r.stdout.split()]
                         for i, x in enumerate(w[:-1]) if x == "dropped")
            r = subprocess.run(self.ns(side, ["cat", "/proc/net/snmp"]), capture_output=True, text=True)
            tcp = [line.split() for line in r.stdout.splitlines() if line.startswith("Tcp:")]
            if len(tcp) == 2 and "RetransSegs" in tcp[0]:
                retrans += int(tcp[1][tcp[0].index("RetransSegs")])
        return drops, retrans

    def nic_args(self, nics):
        taps = self.env["NFV_TAPS"].split()[:nics]
        out = []
        for i, t in enumerate(taps):
            out += ["--nic", "tap=%s,mac=%s" % (t, self.env["NFV_VM_MAC%d" % i])]
        return out


class LogTee(threading.Thread):
    """Copies a VMM's stderr to its log file line by line and keeps the first
    line of each event wanted; on_event(event, stamp, fields) is called from
    this thread as the line arrives (no polling: the stand-in's move follows
    the VM's pause and resume as closely as this host schedules us)."""

    def __init__(self, pipe, path, events, on_event=None):
        super().__init__(daemon=True)
        self.pipe, self.path, self.events, self.on_event = pipe, path, events, on_event
        self.seen, self.carried = {}, 0

    def run(self):
        if self.on_event:
            try:	# best effort (root): the stand-in's move waits for no one's time slice
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            except (OSError, AttributeError):
                pass
        with open(self.path, "ab") as out:
            for raw in iter(self.pipe.readline, b""):
                out.write(raw)
                self.line(raw.decode(errors="replace"))
            out.flush()

    def line(self, line):
        w = line.split()
        if len(w) < 5:
            return
        ev = w[4]
        kv = dict(x.split("=", 1) for x in w[5:] if "=" in x)
        if ev == "loaded" and "carried" in kv:
            self.carried += int(kv["carried"])
        if ev not in self.events or ev in self.seen or (ev == "vm_resume" and kv.get("where") != "destination"):
            return
        try:
            self.seen[ev] = (float(w[0]), kv)
        except ValueError:
            return
        if self.on_event:
            self.on_event(ev, self.seen[ev][0], kv)

    def stamp(self, ev):
        return self.seen[ev][0] if ev in self.seen else None


def rt(argv):
    """ARGV at real-time priority 1 where chrt works (root): the instrument (the
    generator, the stand-in) is not stalled by the digests' CPU after the
    resume; both sleep between frames, so they take little CPU."""
    return ["chrt", "-f", "1"] + argv if shutil.which("chrt") and os.geteuid() == 0 else argv


def wait_line(path, text, proc, timeout_s):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        try:
            with open(path, errors="replace") as f:
                if text in f.read():
                    return True
        except OSError:
            pass
        time.sleep(0.01)
    return False


class Nfv:
    def __init__(self, args):
        self.args = args
        ns = argparse.Namespace(build=args.build, out=args.out, quick=False, io_timeout_ms=60000,
                                migrate_timeout_s=600, timelines=None, no_dst_prealloc=False, keep_logs=None)
        self.b = B.Bench(ns)
        self.gen = os.path.join(args.build, "bench", "gwpktgen")
        self.echo = os.path.join(args.build, "bench", "tapecho")
        self.own = None	# this run's copy of the RAM file (l2fwd), removed after it
        self.topo = Topo("nfv%d" % (os.getpid() % 100000), args.link, max(args.nics))

    def ramfile(self, fill, index):
        """The source's RAM file, or None (--fill none: the VM fills nothing)."""
        if fill == "none":
            return None
        a = self.args
        if a.guest == "standin":	# an idle guest writes only its counter: the file can be shared
            return self.b.sparse_ramfile(a.memory, a.data) if a.data < a.memory else self.b.ramfile(a.memory, fill)
        # A forwarding guest writes its buffers into RAM: each run its own copy, in tmpfs,
        # removed after the run. Only the content is copied, then the file is extended: a
        # copy of the sparse file would write its hole out as zeros.
        base = self.b.ramfile(a.data, fill)
        self.own = base.replace(".ram", "-in-%s-run%03d.ram" % (B.size_str(a.memory), index))
        self.b.ramfiles[("run", index)] = self.own	# removed at exit too, if a run is cut short
        shutil.copyfile(base, self.own)
        os.truncate(self.own, a.memory)
        return self.own

    def vm_argv(self, api, accel, nics, extra):
        a = self.args
        argv = [self.b.godwit, "run", "--api", api, "--accel", accel, "--log-level", "info",
                "--set", "io-timeout-ms=60000"] + extra
        if a.guest == "l2fwd":
            argv += self.topo.nic_args(nics)
        return argv

    def warm_up(self, run_dir):
        """Frames through the forwarding guest until some come back (at most 5 tries of 1 s),
        so that the switch learns its MACs (from the frames it sends) before the destination
        opens its taps. A tap's bridge port forwards only some time after it was opened (up
        to a second when several come up at once: docs/devices.md)."""
        env = self.topo.env
        out = ""
        for _ in range(5):
            r = subprocess.run(self.topo.ns("gen", [
                self.gen, "--iface", env["NFV_GEN_IF"], "--dst-mac", env["NFV_VM_MAC0"], "--pps",
                str(min(self.args.pps, 1000)), "--seconds", "1", "--json"]), capture_output=True, text=True,
                timeout=60)
            out = r.stdout.strip() or r.stderr.strip()
            try:
                if json.loads(r.stdout)["received"] > 0:
                    return
            except (ValueError, KeyError):
                pass
        raise RuntimeError("no frame came back through the guest before the migration: %s" % out[-200:])

    def standins(self, run_dir):
        """The stand-in on the source host (echoing) and the one on the destination (stopped)."""
        env = self.topo.env
        out = []
        for side in ("src", "dst"):
            log = os.path.join(run_dir, "echo-%s.out" % side)
            argv = [self.echo, "--tap", env["NFV_TAP0"], "--mac", env["NFV_VM_MAC0"], "--seconds", "600"]
            # The switch learns the MAC at the source before any traffic, so
            # nothing is flooded to the waiting stand-in (it would echo it late).
            argv = rt(argv + ["--rarp" if side == "src" else "--rarp-on-cont"])	# a poll-mode guest waits for no one
            p = self.b.spawn(self.topo.ns(side, argv), log + ".log", stdout=open(log, "wb"))
            if not wait_line(log, "tapecho ready", p, 10):
                raise RuntimeError("tapecho on %s did not start" % side)
            out.append(p)
        os.kill(out[1].pid, signal.SIGSTOP)
        return out

    def vmm(self, argv, side, path, events, on_event=None, stdout=subprocess.DEVNULL):
        """A VMM in SIDE's namespace, its stderr teed to PATH (LogTee)."""
        p = subprocess.Popen(self.topo.ns(side, argv), stdout=stdout, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        self.b.procs.append(p)
        tee = LogTee(p.stderr, path, events, on_event)
        tee.start()
        return p, tee

    @staticmethod
    def on_pause(mark, standin, stop_at):
        """The source paused: the stand-in stops, the mark is the pause request."""
        def cb(ev, t, kv):
            if ev != "vm_pause":
                return
            if standin:
                os.kill(standin[0].pid, signal.SIGSTOP)
                stop_at.append(time.monotonic())
            with open(mark + ".tmp", "w") as f:
                f.write("%.9f\n" % (t - int(kv.get("pause_us", 0)) / 1e6))
            os.rename(mark + ".tmp", mark)
        return cb

    @staticmethod
    def on_resume(standin, cont_at):
        """The destination resumed: the waiting stand-in goes on and announces."""
        def cb(ev, t, kv):
            if standin and ev == "vm_resume":
                os.kill(standin[1].pid, signal.SIGCONT)
                cont_at.append(time.monotonic())
        return cb

    def run(self, accel, fill, nics, index):
        a, env = self.args, self.topo.env
        run_dir = tempfile.mkdtemp(prefix="n%03d." % index, dir=self.b.tmp)
        src_api, dst_api = os.path.join(run_dir, "src.sock"), os.path.join(run_dir, "dst.sock")
        src_path, dst_path = os.path.join(run_dir, "src.log"), os.path.join(run_dir, "dst.log")
        rec = {"accel": accel, "fill": fill, "nics": nics, "memory": a.memory, "data": a.data if fill != "none" else 0,
               "pps": a.pps, "link": a.link, "guest": a.guest, "downtime-limit-ms": a.downtime_limit, "error": None}
        src = dst = gen = src_log = dst_log = None
        standin, cont_at, stop_at = [], [], []	# filled once the VMs run; their log callbacks read them
        try:
            self.topo.forget_macs()
            ram = self.ramfile(fill, index)
            start, mark = os.path.join(run_dir, "start"), os.path.join(run_dir, "mark")
            extra = ["--memory", str(a.memory), "--workload", "idle" if a.guest == "standin" else "l2fwd"]
            # A source whose RAM is all content maps it first (--prealloc), as a guest that ran has
            # it mapped (a first touch here costs several us a page, not migration work); with
            # --data below --memory it does not: that would populate the part never written.
            extra += ["--memory-file", ram, "--fill", "none"] if ram else ["--fill", "none"]
            if ram and a.data >= a.memory:
                extra.append("--prealloc")
            src, src_log = self.vmm(self.vm_argv(src_api, accel, nics, extra), "src", src_path,
                                    {"vm_pause", "pipeline", "vm_created"}, self.on_pause(mark, standin, stop_at))
            if not self.b.wait_running(src_api, src, 600):
                raise RuntimeError("source VM did not start")
            guest = src_log.seen.get("vm_created", (0, {}))[1].get("guest")
            if a.guest == "l2fwd" and guest not in (None, "l2fwd"):	# the KVM VM names its guest program
                raise RuntimeError("no l2fwd guest in this build's %s VM (it runs guest=%s)" % (accel, guest))
            if a.guest == "standin":
                standin += self.standins(run_dir)
            else:
                self.warm_up(run_dir)
            # The destination opens its taps only now: frames the switch flooded before it had
            # learned the guest's MACs would wait in an open tap and come back late, as duplicates.
            dst, dst_log = self.vmm(self.vm_argv(dst_api, accel, nics, [
                "--incoming", "tcp:%s:0" % env["NFV_DST_ADDR"], "--memory", str(a.memory), "--prealloc"]),
                "dst", dst_path, {"vm_resume", "announce_round"}, self.on_resume(standin, cont_at),
                stdout=subprocess.PIPE)
            url = self.b.read_incoming(dst, 600)
            if not url:
                raise RuntimeError("destination printed no 'incoming URL' line")
            pg_out = os.path.join(run_dir, "pg.json")
            gen = self.b.spawn(self.topo.ns("gen", rt([
                self.gen, "--iface", env["NFV_GEN_IF"], "--dst-mac", env["NFV_VM_MAC0"], "--pps", str(a.pps),
                "--seconds", str(a.traffic_seconds), "--start-file", start, "--mark-file", mark, "--json"])),
                os.path.join(run_dir, "pg.log"), stdout=open(pg_out, "wb"))
            if not wait_line(start, ".", gen, 10):
                raise RuntimeError("gwpktgen did not start")
            t_gen = time.monotonic()
            time.sleep(PRE_S)
            counts0 = self.topo.link_counts()
            r = subprocess.run([self.b.godwit, "migrate", "--api", src_api, "--to", url, "--json",
                                "--downtime-limit", str(a.downtime_limit)] + a.extra.split(),
                               capture_output=True, text=True, timeout=600)
            try:
                st = json.loads(r.stdout)
            except ValueError:
                raise RuntimeError("migrate printed no JSON: %s" % r.stderr.strip()[-300:])
            counts1 = self.topo.link_counts()
            rec["link-drops"], rec["tcp-retrans"] = counts1[0] - counts0[0], counts1[1] - counts0[1]
            if time.monotonic() + POST_S > t_gen + a.traffic_seconds:
                rec["note"] = "traffic ended less than %.1f s after the migration" % POST_S
            gen.wait(timeout=a.traffic_seconds + 30)
            with open(pg_out) as f:
                pg = json.load(f)
            if stop_at and src_log.stamp("vm_pause"):
                rec["standin-stop-ms"] = (stop_at[0] - src_log.stamp("vm_pause")) * 1e3
            self.record(rec, st, pg, src_log, dst_log, cont_at[0] if cont_at else None)
        except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
            rec["error"] = str(e)
        finally:
            for p in standin:
                p.kill()
                p.wait()
                self.b.procs.remove(p)
            if gen is not None:
                self.b.stop(gen, None)
            self.b.stop(src, src_api)
            self.b.stop(dst, dst_api)
            for tee in (src_log, dst_log):
                if tee:
                    tee.join(timeout=5)
            if self.own:
                try:
                    os.unlink(self.own)
                except OSError:
                    pass
                self.own = None
                self.b.ramfiles.pop(("run", index), None)
        if rec["error"] or a.keep_logs:
            rec["logs"] = self.keep(run_dir, index)
        shutil.rmtree(run_dir, ignore_errors=True)
        return rec

    def keep(self, run_dir, index):
        dest = os.path.join(self.args.keep_logs or self.args.out, "%03d" % index)
        os.makedirs(dest, exist_ok=True)
        for n in os.listdir(run_dir):
            if n.endswith((".log", ".json", ".out")):
                shutil.copy(os.path.join(run_dir, n), dest)
        return dest

    def record(self, rec, st, pg, src_log, dst_log, cont_at):
        rec["status"] = st.get("status")
        if st.get("status") != "completed":
            rec["error"] = "%s: %s" % (st.get("status"), st.get("error-desc", ""))
        rec["total-ms"] = st.get("total-time")
        rec["downtime-ms"] = st.get("downtime")
        rec["rounds"] = st.get("rounds")
        rec["mbps"] = (st.get("ram") or {}).get("mbps")	# the engine's transfer rate (Mbit/s)
        rec["verified"] = bool(st.get("status") == "completed" and st.get("verified"))
        for k in ("lost", "duplicated", "reordered", "corrupted", "sent", "received", "gap-resolution-ms",
                  "forwarded-pps-before", "forwarded-pps-after", "achieved-pps", "send-late-max-ms", "send-gap-ms"):
            rec[k] = pg.get(k)
        rec["net-gap-ms"] = pg.get("mark-gap-ms") or None
        # gwpktgen keeps gaps of at least 1 ms and 3 intervals: a shorter one is "under" that
        rec["net-gap-under-ms"] = None if rec["net-gap-ms"] else max(1.0, 3 * pg.get("gap-resolution-ms", 0))
        rec["send-gap-in-gap-ms"] = pg.get("mark-send-gap-ms")
        rec["run-gap-ms"] = pg.get("net-gap-ms")
        rec["carried"] = dst_log.carried
        # The source's reading of its pages (all rounds): where the RAM was not mapped by
        # the source before, first touches, which on this nested host dominate the total.
        pipe = src_log.seen.get("pipeline", (0, {}))[1]
        rec["src-read-ms"] = int(pipe["read_us"]) / 1e3 if "read_us" in pipe else None
        pause = src_log.stamp("vm_pause")
        if pause is not None:
            pause -= int(src_log.seen["vm_pause"][1].get("pause_us", 0)) / 1e6
        resume = dst_log.stamp("vm_resume")
        rec["announce-ms"] = None
        if resume is not None:
            ann = cont_at if cont_at is not None else dst_log.stamp("announce_round")
            rec["announce-ms"] = (ann - resume) * 1e3 if ann is not None else None
        gap = rec["net-gap-ms"]
        rec["gap-minus-downtime-ms"] = gap - rec["downtime-ms"] if gap and rec["downtime-ms"] else None
        rec["gap-start-ms"] = rec["gap-end-ms"] = None
        if gap and pause is not None and resume is not None:
            g0 = pg["mark-gap-start-ns"] / 1e9
            rec["gap-start-ms"] = (g0 - pause) * 1e3
            rec["gap-end-ms"] = (g0 + gap / 1e3 - resume) * 1e3


def gap_cell(r):
    if r.get("net-gap-ms"):
        return "%.2f" % r["net-gap-ms"]
    return "<%.2f" % r["net-gap-under-ms"] if r.get("net-gap-under-ms") else "-"


def cfg_label(c):
    return "%s %s %d NIC" % c


def print_tables(args, cfgs, recs):
    f = B.fmt
    rows = []
    for i, r in enumerate(recs):
        rows.append([i + 1, cfg_label((r["accel"], r["fill"], r["nics"])), f(r.get("total-ms"), "%.0f"),
                     f(r.get("downtime-ms"), "%.2f"), gap_cell(r), f(r.get("send-gap-in-gap-ms"), "%.2f"),
                     f(r.get("gap-minus-downtime-ms"), "%.2f"), f(r.get("gap-start-ms"), "%.2f"),
                     f(r.get("gap-end-ms"), "%.2f"), f(r.get("announce-ms"), "%.2f"),
                     r.get("lost", "-"), r.get("duplicated", "-"), r.get("reordered", "-"), r.get("corrupted", "-"),
                     r.get("carried", "-"), f(r.get("forwarded-pps-before"), "%.0f"),
                     f(r.get("forwarded-pps-after"), "%.0f"),
                     ("FAILED: " + r["error"][:60]) if r.get("error") else ("yes" if r["verified"] else "NO")])
    res = 1e3 / args.pps
    print("%s guest, %s RAM (%s of it filled), %s link, %d pps (gap resolution %.3f ms), downtime limit %d ms%s\n" %
          (args.guest, B.size_str(args.memory), B.size_str(args.data), args.link, args.pps, res,
           args.downtime_limit, "" if args.guest == "l2fwd" else
           "\n(the stand-in, bench/tapecho, echoes on NIC 0's tap; the VMs have no NIC: NICs counts the taps)"))
    print(B.table(["run", "VM, fill, NICs", "total ms", "downtime ms", "net-gap ms", "sender stall in gap ms",
                   "gap - downtime ms",
                   "gap start ms", "gap end ms", "announce ms", "lost", "dup", "reord", "corrupt", "carried",
                   "fwd pps before", "fwd pps after", "verified"], rows))
    print("\nmedian [min-max] over the runs of each configuration\n")
    rows = []
    for c in cfgs:
        rs = [r for r in recs if (r["accel"], r["fill"], r["nics"]) == c]
        ok = [r for r in rs if not r.get("error")]
        cell = {k: B.spread([r.get(k) for r in ok], spec) for k, spec in (
            ("total-ms", "%.0f"), ("rounds", "%d"), ("mbps", "%.0f"), ("downtime-ms", "%.2f"),
            ("net-gap-ms", "%.2f"), ("send-gap-in-gap-ms", "%.2f"), ("gap-minus-downtime-ms", "%.2f"),
            ("announce-ms", "%.2f"), ("lost", "%d"), ("duplicated", "%d"), ("reordered", "%d"),
            ("corrupted", "%d"), ("forwarded-pps-before", "%.0f"), ("forwarded-pps-after", "%.0f"))}
        under = [r["net-gap-under-ms"] for r in ok if r.get("net-gap-under-ms")]
        if under:	# runs whose gap was under gwpktgen's bound: counted, not dropped
            cell["net-gap-ms"] += " (%d under %.2f)" % (len(under), max(under))
        rows.append([cfg_label(c), len(rs)] + list(cell.values()) +
                    ["%d/%d" % (sum(1 for r in ok if r["verified"]), len(rs))])
    print(B.table(["VM, fill, NICs", "runs", "total ms", "rounds", "Mbit/s", "downtime ms", "net-gap ms",
                   "sender stall in gap ms", "gap - downtime ms", "announce ms", "lost", "dup", "reord",
                   "corrupt", "fwd pps before", "fwd pps after",
                   "verified"], rows))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="build directory (tools/godwit, bench/gwpktgen, bench/tapecho)")
    ap.add_argument("--accel", default="kvm", help="kvm, soft, or both: soft,kvm (default kvm)")
    ap.add_argument("--memory", default="8G", help="guest RAM (default 8G)")
    ap.add_argument("--fill", default="mix", help="mix or none, or both: mix,none (default mix)")
    ap.add_argument("--data", default=None,
                    help="how much of the RAM holds --fill content (default 1G, or all of a smaller RAM)")
    ap.add_argument("--nics", default="2", help="1 or 2, or both: 1,2 (default 2)")
    ap.add_argument("--pps", type=int, default=20000, help="frames per second sent (default 20000)")
    ap.add_argument("--link", default="10g", choices=["10g", "none"], help="the migration link (default 10g)")
    ap.add_argument("--downtime-limit", type=int, default=10, help="ms (default 10)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each configuration (default 3)")
    ap.add_argument("--json", action="store_true", help="one JSON object per run on stdout, then the tables")
    ap.add_argument("--guest", default="l2fwd", choices=["l2fwd", "standin", "auto"],
                    help="l2fwd: the guest forwards (--workload l2fwd); standin: bench/tapecho does; "
                         "auto: l2fwd where this godwit has the workload, else standin (default l2fwd)")
    ap.add_argument("--traffic-seconds", type=int, default=20, help="how long gwpktgen sends (default 20)")
    ap.add_argument("--extra", default="", help="more migrate options, one string")
    ap.add_argument("--out", default="/tmp/gw-nfv", help="where the JSON lines go (default /tmp/gw-nfv)")
    ap.add_argument("--keep-logs", default=None, help="directory: every run's logs (a failed run's always kept)")
    args = ap.parse_args()
    args.accel = args.accel.split(",")
    args.fill = args.fill.split(",")
    try:
        args.nics = [int(n) for n in args.nics.split(",")]
        args.memory = B.parse_size(args.memory)
        args.data = B.parse_size(args.data) if args.data else min(B.GIB, args.memory)
    except ValueError:
        ap.error("bad --nics, --memory or --data")
    if any(n not in (1, 2) for n in args.nics) or any(x not in ("kvm", "soft") for x in args.accel) or \
            any(x not in ("mix", "none") for x in args.fill):
        ap.error("--nics 1|2, --accel kvm|soft, --fill mix|none")
    if not 0 < args.data <= args.memory or args.runs < 1 or not 1 <= args.pps <= 2000000 or \
            not 4 <= args.traffic_seconds <= 600 or args.downtime_limit < 1:
        ap.error("--data 1..--memory, --runs >= 1, --pps 1..2000000, --traffic-seconds 4..600, --downtime-limit >= 1")
    return args


def main():
    args = parse_args()
    n = Nfv(args)
    if not n.b.godwit or not os.access(n.gen, os.X_OK) or not os.access(n.echo, os.X_OK):
        sys.stderr.write("nfv: %s lacks tools/godwit, bench/gwpktgen or bench/tapecho\n" % args.build)
        n.b.cleanup()
        return 1
    has_l2fwd = "l2fwd" in subprocess.run([n.b.godwit, "run", "--help"], capture_output=True,
                                           text=True).stdout
    if args.guest == "auto":
        args.guest = "l2fwd" if has_l2fwd else "standin"
    elif args.guest == "l2fwd" and not has_l2fwd:
        sys.stderr.write("nfv: this godwit has no l2fwd workload (godwit run --help): use --guest standin\n")
        n.b.cleanup()
        return 1
    if not n.topo.available():
        sys.stderr.write("nfv: skipped: the namespaces and taps of nfv_topo.sh cannot be made here "
                         "(needs root, ip, /dev/net/tun)\n")
        n.b.cleanup()
        return 77

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    cfgs = [(a, f, k) for a in args.accel for f in args.fill for k in args.nics]
    recs, interrupted = [], False
    try:
        n.topo.setup()
        for _ in range(args.runs):
            for c in cfgs:
                B.log("run %d/%d: %s" % (len(recs) + 1, args.runs * len(cfgs), cfg_label(c)))
                r = n.run(c[0], c[1], c[2], len(recs) + 1)
                recs.append(r)
                n.b.out.write(json.dumps(r, sort_keys=True) + "\n")
                n.b.out.flush()
                if args.json:
                    print(json.dumps(r, sort_keys=True), flush=True)
                B.log("  %s" % (r["error"] or "total %.0f ms, downtime %.2f ms, net-gap %s ms, lost %s" % (
                    r["total-ms"], r["downtime-ms"], B.fmt(r["net-gap-ms"], "%.2f"), r["lost"])))
    except KeyboardInterrupt:
        B.log("interrupted")
        interrupted = True
    finally:
        n.b.cleanup()
        n.topo.teardown()
    print_tables(args, cfgs, recs)
    return 0 if recs and not interrupted and all(not r.get("error") and r["verified"] for r in recs) else 1


if __name__ == "__main__":
    sys.exit(main())
