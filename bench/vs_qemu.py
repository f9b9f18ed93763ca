#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""godwit against QEMU in one run: the same RAM content migrated by both,
interleaved (godwit, QEMU, godwit, QEMU, ...), median [min-max].

Both sides get what a user comparing them would set up:
  content     the prepared file of bench.py (--fill mix by default: 25% zero,
              25% random, 50% text-like pages), mapped by both sources (godwit
              --memory-file FILE --prealloc; QEMU memory-backend-file
              mem-path=FILE,share=on,prealloc=on: a running guest's RAM is mapped)
  destination preallocated unless --dst-memory (godwit --prealloc; QEMU
              memory-backend-memfd prealloc=on, which is -mem-prealloc)
  channels    godwit --channels N; QEMU plain precopy for 1, multifd with
              multifd-channels N otherwise
  limits      the same downtime limit on both (--downtime-limit MS, default
              300: godwit's default; QEMU downtime-limit), no bandwidth cap
              (QEMU's default cap of 32 MiB/s is lifted: max-bandwidth 1 TB/s),
              no compression. With 300 ms QEMU stops the guest as soon as what
              is left fits 300 ms at its measured rate, and sends the rest
              while the guest is stopped; godwit goes on with rounds while the
              expected downtime keeps falling (docs/architecture.md#convergence)
  guest       godwit: the VM of --accel (kvm where /dev/kvm works, as QEMU's,
              else soft), idle workload; QEMU:
              -M pc with SeaBIOS and no boot device (it idles), KVM when
              /dev/kvm works, else TCG
  verified    godwit compares RAM digests after the resume (not inside its
              total time); QEMU has no such check
Figures measure the same span on both: downtime from the source's pause to
the destination's resume (godwit's own figure; for QEMU the source's STOP
event to the destination's RESUME event, QMP timestamps on one host clock,
or QEMU's own figure where that is larger: its clock starts before STOP),
total from the migrate command to that resume (QEMU's total-time plus what
its downtime figure leaves out). QEMU's own query-migrate figures, which end
at the source's completion, before the destination has loaded and started,
are printed beside them.
CPU seconds of each side's process over the migration (godwit's include the
RAM digests of both sides after the resume unless --godwit-extra --no-verify).

  bench/vs_qemu.py build                                  # 1 GiB mix, 1/2/4 channels, 5 runs
  bench/vs_qemu.py build --memory 4G --channels 1,2 --runs 3
  bench/vs_qemu.py build --downtime-limit 20                # both held to 20 ms
Exit 77 when qemu-system-x86_64 is missing (apt-get install qemu-system-x86).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402

QEMU = "qemu-system-x86_64"
NO_CAP_BPS = 1 << 40


def spread(vals, spec):
    v = sorted(x for x in vals if x is not None)
    if not v:
        return "-"
    return (spec + " [" + spec + "-" + spec + "]") % (statistics.median(v), v[0], v[-1])


class Qmp:
    """A QMP client: one command at a time; events are kept (self.events)."""

    def __init__(self, path, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise RuntimeError("QMP socket %s never answered" % path)
                time.sleep(0.05)
        self.sock.settimeout(timeout_s)
        self.f = self.sock.makefile("rw")
        self.events = []
        json.loads(self.f.readline())  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        self.f.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise RuntimeError("QMP: %s: connection closed" % name)
            msg = json.loads(line)
            if "event" in msg:
                self.events.append(msg)
                continue
            if "error" in msg:
                raise RuntimeError("QMP %s: %s" % (name, msg["error"].get("desc")))
            return msg.get("return")

    def event_s(self, name):
        """Host wall-clock time, in seconds, of the first event NAME seen, or None."""
        for e in self.events:
            if e["event"] == name:
                return e["timestamp"]["seconds"] + e["timestamp"]["microseconds"] / 1e6
        return None

    def close(self):
        self.sock.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kvm_usable():
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
        os.close(fd)
        return True
    except OSError:
        return False


def qemu_argv(tmp, side, memory, ramfile, prealloc, accel):
    ram = ("memory-backend-file,id=ram0,size=%d,mem-path=%s,share=on,prealloc=on" % (memory, ramfile)
           if side == "src" else
           "memory-backend-memfd,id=ram0,size=%d,share=on,prealloc=%s" % (memory, "on" if prealloc else "off"))
    argv = [QEMU, "-M", "pc,memory-backend=ram0", "-accel", accel, "-m", "%dM" % (memory // B.MIB),
            "-object", ram, "-nodefaults", "-display", "none", "-vga", "none", "-smp", "1",
            "-qmp", "unix:%s/%s.qmp,server=on,wait=off" % (tmp, side)]
    return argv + (["-incoming", "defer"] if side == "dst" else [])


def qemu_migrate(tmp, memory, ramfile, channels, prealloc, accel, downtime_limit_ms, n):
    """One QEMU migration with fresh processes: a record like bench.py's."""
    rec = {"error": None}
    procs = []
    qs = []
    try:
        for side in ("src", "dst"):
            log = open(os.path.join(tmp, "qemu-%s-%03d.log" % (side, n)), "wb")
            procs.append(subprocess.Popen(qemu_argv(tmp, side, memory, ramfile, prealloc, accel),
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            log.close()
        src, dst = (Qmp(os.path.join(tmp, s + ".qmp"), 120) for s in ("src", "dst"))
        qs = [src, dst]
        port = free_port()
        caps = [{"capability": "multifd", "state": channels > 1}]
        for q in qs:
            q.cmd("migrate-set-capabilities", capabilities=caps)
            if channels > 1:
                q.cmd("migrate-set-parameters", **{"multifd-channels": channels})
        src.cmd("migrate-set-parameters", **{"max-bandwidth": NO_CAP_BPS,
                                            "downtime-limit": downtime_limit_ms})
        dst.cmd("migrate-incoming", uri="tcp:127.0.0.1:%d" % port)
        cpu0 = [B.proc_cpu_s(p.pid) for p in procs]
        src.cmd("migrate", uri="tcp:127.0.0.1:%d" % port)
        deadline = time.monotonic() + 600
        while True:
            st = src.cmd("query-migrate")
            if st.get("status") in ("completed", "failed", "cancelled"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("QEMU migration did not end in 600 s")
            time.sleep(0.01)
        # QEMU 7.2 sets "completed" a moment before it fills in total-time and
        # downtime (migration_calculate_complete): read again until they are there.
        while st.get("status") == "completed" and not st.get("total-time") and time.monotonic() < deadline:
            time.sleep(0.01)
            st = src.cmd("query-migrate")
        # The destination runs once its incoming side is done: wait for it.
        while dst.cmd("query-status").get("status") not in ("running", "postmigrate"):
            if time.monotonic() > deadline:
                raise RuntimeError("QEMU destination never ran")
            time.sleep(0.01)
        cpu1 = [B.proc_cpu_s(p.pid) for p in procs]
        # Downtime as godwit measures it: the source's STOP to the destination's
        # RESUME (event timestamps, one host clock), not query-migrate's figure,
        # which ends before the destination has loaded and started.
        while dst.event_s("RESUME") is None and time.monotonic() < deadline:
            dst.cmd("query-status")
            time.sleep(0.01)
        # The STOP event leaves once the vCPUs are stopped, after QEMU's own
        # downtime clock started: the larger of the two spans, never less.
        stop_s, resume_s = src.event_s("STOP"), dst.event_s("RESUME")
        down = (resume_s - stop_s) * 1000.0 if stop_s and resume_s else None
        if down is not None and st.get("downtime") is not None:
            down = max(down, float(st["downtime"]))
        # godwit's total-time ends at the resume too: extend QEMU's, which ends
        # at the source's completion, by what its downtime figure left out.
        late = max(0.0, down - st["downtime"]) if down is not None and st.get("downtime") is not None else None
        rec.update({"status": st.get("status"),
                    "total-ms": st["total-time"] + late if late is not None and st.get("total-time") else None,
                    "downtime-ms": down, "reported-total-ms": st.get("total-time"),
                    "reported-downtime-ms": st.get("downtime"), "setup-ms": st.get("setup-time"),
                    "ram": st.get("ram") or {},
                    "src-cpu-seconds": cpu1[0] - cpu0[0], "dst-cpu-seconds": cpu1[1] - cpu0[1]})
        if st.get("status") != "completed":
            rec["error"] = "QEMU migration %s: %s" % (st.get("status"), st.get("error-desc"))
        elif down is None or rec["total-ms"] is None:
            rec["error"] = "QEMU: STOP at %s, RESUME at %s, total-time %s, downtime %s; events %s / %s" % (
                stop_s, resume_s, st.get("total-time"), st.get("downtime"),
                [e["event"] for e in src.events], [e["event"] for e in dst.events])
    except (RuntimeError, OSError, ValueError) as e:
        rec["error"] = str(e)
    finally:
        for q in qs:
            try:
                q.cmd("quit")
            except (RuntimeError, OSError, ValueError):
                pass
            q.close()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return rec


def normal_pages(rec):
    """Pages sent whole (query-migrate's ram.normal), godwit's or QEMU's record."""
    ram = rec.get("ram") or (rec.get("stats") or {}).get("ram") or {}
    return ram.get("normal")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="build directory (holds tools/godwit)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--memory", default="1G")
    ap.add_argument("--fill", default="mix")
    ap.add_argument("--channels", default="1,2,4")
    ap.add_argument("--downtime-limit", type=int, default=300, metavar="MS", help="both sides (default 300)")
    ap.add_argument("--godwit-extra", default="", metavar="OPTIONS",
                    help="more godwit migrate options, one string (e.g. --no-verify: godwit's CPU figures "
                         "otherwise include the RAM digests it takes on both sides after the resume)")
    ap.add_argument("--accel", default=None, choices=["soft", "kvm"],
                    help="godwit's VM backend (default: kvm where /dev/kvm works, as QEMU's, else soft)")
    ap.add_argument("--dst-memory", action="store_true",
                    help="destinations not preallocated (godwit --memory, QEMU prealloc=off)")
    args = ap.parse_args()
    if not shutil.which(QEMU):
        sys.stderr.write("vs_qemu: %s is not installed (apt-get install qemu-system-x86)\n" % QEMU)
        return 77
    mem = B.parse_size(args.memory)
    ns = argparse.Namespace(build=args.build, out="/tmp/gw-vs-qemu", quick=False, io_timeout_ms=60000,
                            migrate_timeout_s=600, timelines=None, no_dst_prealloc=False, keep_logs=None)
    b = B.Bench(ns)
    if not b.godwit:
        sys.stderr.write("vs_qemu: no godwit under %s\n" % args.build)
        b.cleanup()
        return 77
    qaccel = "kvm" if kvm_usable() else "tcg"
    args.accel = args.accel or ("kvm" if qaccel == "kvm" else "soft")
    chans = [int(c) for c in args.channels.split(",")]
    link = B.Link("loopback")
    recs = {(who, c): [] for c in chans for who in ("godwit", "qemu")}
    dst_extra = ["--max-memory", str(mem + 64 * B.MIB)] + (["--memory", str(mem)] if args.dst_memory else [])
    n = 0
    link.setup()
    try:
        ramfile = b.ramfile(mem, args.fill)
        for _ in range(args.runs):
            for c in chans:
                r = b.migrate(link, "vs-qemu", mem, args.fill, "idle", c, "none", src_extra=["--prealloc"],
                              extra=["--downtime-limit", str(args.downtime_limit)] + args.godwit_extra.split(),
                              dst_prealloc=not args.dst_memory, dst_extra=dst_extra, accel=args.accel)
                recs[("godwit", c)].append(r)
                n += 1
                q = qemu_migrate(b.tmp, mem, ramfile, c, not args.dst_memory, qaccel, args.downtime_limit, n)
                B.log("vs-qemu QEMU %s ch=%d: %s ms total, %s ms downtime%s" %
                      (B.size_str(mem), c, q.get("total-ms"), q.get("downtime-ms"),
                       (", " + q["error"]) if q["error"] else ""))
                recs[("qemu", c)].append(q)
    finally:
        link.teardown()
        b.cleanup()
    qver = subprocess.run([QEMU, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print("loopback, %s %s, destination %s, downtime limit %d ms, %d interleaved runs each, median [min-max]; "
          "godwit %s VM, %s with %s\n" % (B.size_str(mem), args.fill,
                                           "not preallocated" if args.dst_memory else "preallocated",
                                           args.downtime_limit, args.runs, args.accel, qver, qaccel))
    rows = []
    for c in chans:
        g, q = recs[("godwit", c)], recs[("qemu", c)]
        ratio = [qr["total-ms"] / gr["total-ms"] for gr, qr in zip(g, q)
                 if gr.get("total-ms") and qr.get("total-ms") and not gr.get("error") and not qr["error"]]
        for who, rs in (("godwit", g), ("QEMU", q)):
            ok = sum(1 for r in rs if not r.get("error"))
            rows.append([who, c, spread([r.get("total-ms") for r in rs], "%.0f"),
                         spread([r.get("downtime-ms") for r in rs], "%.1f"),
                         spread([r.get("reported-downtime-ms") for r in rs], "%.0f") if who == "QEMU" else "",
                         spread([r.get("setup-ms") for r in rs], "%.1f"),
                         spread([r.get("src-cpu-seconds") for r in rs], "%.2f"),
                         spread([r.get("dst-cpu-seconds") for r in rs], "%.2f"),
                         spread([normal_pages(r) for r in rs], "%d"),
                         spread(ratio, "%.2f") if who == "godwit" else "",
                         "%d/%d" % (ok, len(rs)) + (" verified" if who == "godwit" and
                                                      all(r.get("verified") for r in rs) else "")])
    errors = ["%s, %d channels, run %d: %s" % (who, c, i + 1, r["error"])
              for (who, c), rs in sorted(recs.items()) for i, r in enumerate(rs) if r.get("error")]
    print(B.table(["", "ch", "total ms (to the resume)", "downtime ms (pause to resume)",
                   "QEMU's own downtime figure ms", "setup ms", "CPU s src", "CPU s dst", "non-zero pages sent",
                   "QEMU total ÷ godwit total (run by run)", "completed"], rows))
    if errors:
        print("\nNot completed:\n" + "\n".join("- " + e for e in errors))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
