"""The data path scenarios, for bench.py --groups datapath.

Every figure sits beside the limits measured in the same run: iperf3 with
one and two TCP streams over the same link, and limits_bench (memcpy,
pread, cold read + CRC32C, hot CRC32C, zero detection per core). Runs of
one table are interleaved (configuration A, B, C, A, B, C, ...) so that a
stretch of background load hits all of them, and reported as median
[min-max]. The source maps its RAM (--prealloc on the prepared file: a
running guest's memory is mapped), the destination is preallocated unless
the row says no. Verification is on (the default): the digests are taken
after resume and cost no downtime.

Tables:
  limits     iperf3 1 and 2 streams, limits_bench (classify's user work with and
             without its prefetch among them)
  loopback   mix RAM x channels x destination preallocated or not
  paths      send paths (copy, live, pread, zero-copy) on one channel
  links      the 10gbit and 1gbit veth links, codecs
  work       cost with the work, not the RAM size
Per run: total ms, non-zero GB/s (normal pages x 4 KiB / total time) and its
ratio to one TCP stream, CPU seconds per GiB of guest RAM moved on each
side, per-stage ns per page on each side (all channels summed). Over
loopback each migration is followed by its own baseline: fresh iperf3
processes moving the same non-zero bytes over as many TCP streams as the
migration had channels ("TCP same bytes"), and the ratio of the two times
is taken run by run (TCP ms / migration ms: 1.0 = as fast as TCP alone).
"""

import json
import os
import subprocess

GIB = 1 << 30
MIB = 1 << 20


def plan(args, netns_ok):
    q = args.quick
    sizes = [256 * MIB] if q else [1 * GIB, 4 * GIB]
    if args.memory:
        sizes = [int(x[:-1]) * {"M": MIB, "G": GIB}[x[-1].upper()] for x in args.memory.split(",")]
    reps = args.repeat or (1 if q else 3)
    chans = [1, 2] if q else [1, 2, 4]
    loop = [dict(memory=m, channels=c, prealloc=p) for m in sizes for c in chans
            for p in ([True] if q else [True, False])]
    paths = [("copy", 1), ("live", 3)] if q else [("copy", 1), ("live", 3), ("pread", 4), ("zerocopy", 2)]
    links = []
    if netns_ok and not q:
        links = [("10gbit", 4 * GIB, 2, ["none", "auto"]),
                 ("1gbit", 1 * GIB, 2, ["none", "lz4", "zstd", "auto"])]
    work = [] if q else [("64G never touched", 64 * GIB, "none"),
                         ("16G, 256M touched", 16 * GIB, "sparse:256M")]
    return dict(reps=reps, loop=loop, paths=paths, path_memory=sizes[0], links=links, work=work,
                accels=len(args.accel.split(",")))


def count(dp):
    r = dp["reps"]
    return r * (len(dp["loop"]) + len(dp["paths"]) + sum(len(l[3]) for l in dp["links"]) +
                len(dp["work"]) * dp["accels"])


def limits(build):
    exe = os.path.join(build, "bench", "limits_bench")
    try:
        r = subprocess.run([exe, "3"], capture_output=True, text=True, timeout=120)
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return {}


def per_gib(cpu, rec):
    ram = ((rec.get("stats") or {}).get("ram") or {})
    moved = (ram.get("normal", 0) + ram.get("duplicate", 0)) * 4096
    return cpu / (moved / GIB) if cpu is not None and moved else None


def figures(rec, tcp1):
    st = rec.get("stats") or {}
    ds = rec.get("dst-stats") or {}
    ram = st.get("ram") or {}
    secs = (st.get("total-time") or 0) / 1000.0
    nz = ram.get("normal", 0) * 4096 / secs if secs else None
    return dict(total=rec.get("total-ms"), nz=nz, nz_tcp=nz * 8 / tcp1 if nz and tcp1 else None,
                same=rec.get("tcp-same-ms"), same_ratio=rec.get("tcp-same-ratio"),
                cpu_src=per_gib(rec.get("src-cpu-seconds"), rec),
                cpu_dst=per_gib(rec.get("dst-cpu-seconds"), rec),
                src_st=st.get("stage-ns-per-page") or {}, dst_st=ds.get("stage-ns-per-page") or {},
                ok=bool(rec.get("verified")), downtime=rec.get("downtime-ms"), steal=rec.get("host-steal-ms"))


def stages(recs_f, key, names, h):
    return " / ".join(h.spread([f[key].get(n) for f in recs_f], "%.0f") for n in names)


def row(h, label, recs, tcp1):
    fs = [figures(r, tcp1) for r in recs]
    ok = sum(f["ok"] for f in fs)
    return label + [
        h.spread([f["total"] for f in fs], "%.0f"),
        h.spread([f["downtime"] for f in fs], "%.1f"),
        h.spread([f["nz"] / 1e9 if f["nz"] else None for f in fs], "%.2f"),
        h.spread([f["nz_tcp"] for f in fs], "%.2f"),
        h.spread([f["same"] for f in fs], "%.0f"),
        h.spread([f["same_ratio"] for f in fs], "%.2f"),
        h.spread([f["cpu_src"] for f in fs], "%.2f"),
        h.spread([f["cpu_dst"] for f in fs], "%.2f"),
        stages(fs, "src_st", ["read", "classify", "compress", "send", "settle"], h),
        stages(fs, "dst_st", ["recv", "check", "decompress", "apply"], h),
        h.spread([f["steal"] for f in fs], "%.0f"),
        ("yes (%d/%d)" if ok == len(fs) else "NO (%d/%d verified)") % (ok, len(fs))]


COLS = ["total ms", "downtime ms", "non-zero GB/s", "÷ 1 TCP stream", "TCP same bytes ms",
        "TCP same bytes ms ÷ total ms", "CPU s/GiB src",
        "CPU s/GiB dst", "src ns/page read/classify/compress/send/settle",
        "dst ns/page recv/check/decompress/apply", "host steal ms", "verified"]


def interleave(b, link, configs, reps, mk):
    """Run each config REPS times, interleaved; returns {config index: [records]}."""
    out = {i: [] for i in range(len(configs))}
    for _ in range(reps):
        for i, c in enumerate(configs):
            out[i].append(mk(c))
    return out


def run(b, links, dp, args, h):
    lo = links["loopback"]
    lo.setup()
    parts = []
    tcp1 = h.iperf(lo, args.iperf_seconds, 1)
    tcp2 = h.iperf(lo, args.iperf_seconds, 2)
    lim = limits(args.build)
    h.log("datapath limits: tcp1 %s tcp2 %s Gbit/s, %s" % (h.gbit(tcp1), h.gbit(tcp2), lim))
    parts.append("## Data path: limits measured in this run (loopback)\n")
    parts.append(h.table(["one TCP stream", "two TCP streams", "memcpy", "pread (memfd)",
                          "cold read + CRC32C", "CRC32C (hot)", "zero detection",
                          "classify, no prefetch", "classify, prefetch"],
                         [["%s Gbit/s (%s GB/s)" % (h.gbit(tcp1), h.fmt(tcp1 / 8e9 if tcp1 else None, "%.2f")),
                           "%s Gbit/s" % h.gbit(tcp2)] +
                          ["%s GB/s" % h.fmt(lim.get(k), "%.2f") for k in
                           ("memcpy-gbps", "pread-gbps", "read-crc-gbps", "crc-hot-gbps", "zero-gbps",
                            "classify-gbps", "classify-prefetch-gbps")]]))
    parts.append("")

    def mig(c, extra_src=(), extra=(), codec="none", link=lo, fill="mix", mapped=True, extra_dst=()):
        # mapped: the source maps its prepared RAM first, as a guest that ran has it mapped
        rec = b.migrate(link, "datapath", c["memory"], fill, "idle", c.get("channels", 1), codec,
                        extra=list(extra), src_extra=(["--prealloc"] if mapped else []) + list(extra_src),
                        dst_prealloc=c.get("prealloc", True), iperf_bps=tcp1, dst_extra=list(extra_dst))
        if link is lo:
            h.same_bytes_baseline(lo, rec)
        return rec

    res = interleave(b, lo, dp["loop"], dp["reps"], mig)
    rows = [row(h, [h.size_str(c["memory"]), c["channels"], "yes" if c["prealloc"] else "no"], res[i], tcp1)
            for i, c in enumerate(dp["loop"])]
    parts.append("## Data path: mix RAM over loopback (%d interleaved runs each, median [min-max])\n" %
                 dp["reps"])
    parts.append(h.table(["RAM", "ch", "dst prealloc"] + COLS, rows))
    parts.append("")

    cfg = [dict(memory=dp["path_memory"], channels=1, prealloc=True, path=p) for p in dp["paths"]]
    res = interleave(b, lo, cfg, dp["reps"],
                     lambda c: mig(c, extra_src=["--set", "send-path=%d" % c["path"][1]]))
    rows = [row(h, [c["path"][0]], res[i], tcp1) for i, c in enumerate(cfg)]
    parts.append("## Data path: send paths, %s mix, 1 channel, loopback (%d interleaved runs)\n" %
                 (h.size_str(dp["path_memory"]), dp["reps"]))
    parts.append(h.table(["send-path"] + COLS, rows))
    parts.append("")

    for lname, mem, ch, codecs in dp["links"]:
        link = links[lname]
        b.links.append(link)
        link.setup()
        l1 = h.iperf(link, args.iperf_seconds, 1)
        l2 = h.iperf(link, args.iperf_seconds, 2)
        cfg = [dict(memory=mem, channels=ch, prealloc=True, codec=c) for c in codecs]
        res = interleave(b, link, cfg, dp["reps"], lambda c: mig(c, codec=c["codec"], link=link))
        rows = []
        for i, c in enumerate(cfg):
            ratio = [(r.get("stats") or {}).get("ram", {}).get("compression-ratio") for r in res[i]]
            rows.append(row(h, [c["codec"], h.spread(ratio, "%.2f")], res[i], l1))
        link.teardown()
        parts.append("## Data path: %s link (tbf), %s mix, %d channels; iperf3 1 stream %s, 2 streams "
                     "%s Gbit/s\n" % (lname, h.size_str(mem), ch, h.gbit(l1), h.gbit(l2)))
        parts.append(h.table(["codec", "ratio"] + COLS, rows))
        parts.append("")

    if dp["work"]:
        accels = args.accel.split(",")
        cfg = [dict(name=name, memory=mem, fill=fill, accel=accel)
               for name, mem, fill in dp["work"] for accel in accels]

        def work(c):
            # The destination is made with the guest's size, not preallocated (QEMU's -m
            # without -mem-prealloc): its memslots exist before the migration, as QEMU's do
            # (a 64 GiB KVM memslot costs 35-105 ms to create on this host). Its size is
            # capped at this host's RAM by default (admission, --max-memory): a 64 GiB guest that never
            # touched its RAM needs the cap raised (with room for a KVM VM's small block).
            return b.migrate(lo, "datapath", c["memory"], c["fill"], "idle", 1, "none",
                             dst_prealloc=False, accel=c["accel"],
                             dst_extra=["--memory", str(c["memory"]),
                                        "--max-memory", str(c["memory"] + 64 * MIB)])

        res = interleave(b, lo, cfg, dp["reps"], work)
        rows = []
        for i, c in enumerate(cfg):
            rams = [(r.get("stats") or {}).get("ram") or {} for r in res[i]]
            rows.append([c["name"], c["accel"], h.spread([r.get("total-ms") for r in res[i]]),
                         h.spread([r.get("downtime-ms") for r in res[i]]),
                         h.spread([r.get("setup-ms") for r in res[i]]),
                         h.spread([r.get("normal") for r in rams], "%d"),
                         h.spread([r.get("skipped") for r in rams], "%d"),
                         "yes (%d/%d)" % (len(res[i]), len(res[i]))
                         if all(r.get("verified") and not r.get("error") for r in res[i])
                         else "NO: " + "; ".join(h.verified_cell(r) for r in res[i])])
        parts.append("## Data path: cost with the work, not the RAM size (%d interleaved runs each; "
                     "destination made with the guest's size, not preallocated)\n" % dp["reps"])
        parts.append(h.table(["guest", "VM", "total ms", "downtime ms", "setup ms", "pages sent",
                              "pages skipped", "verified"], rows))
        parts.append("")
    return "\n".join(parts)
