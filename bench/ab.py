#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A/B comparison in one run: the same migration with several godwit builds
and settings, interleaved (A, B, C, A, B, C, ...) so that background load
hits every configuration alike; median [min-max] per configuration.

Every run is one bench.py migration (fresh processes, prepared RAM content,
verification on): the configurations are the cross product of the builds,
--codecs and --channels.

  bench/ab.py OLD_BUILD build --codecs auto --link 1gbit            # a change, same settings
  bench/ab.py build --codecs none,lz4,zstd,auto --link 1gbit        # codecs, one build
  bench/ab.py OLD build --accel kvm --memory 64G --fill none --dst-memory --runs 5
  bench/ab.py build --channels 2,4 --runs 7                         # 2 against 4 channels
  bench/ab.py build --channels 1,2 --tcp --runs 7                   # each run against TCP, same bytes
  bench/ab.py build --memory 1G,4G,6G --runs 3                      # time per GiB as the RAM grows
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402

LINKS = {"loopback": (None, None), "10gbit": ("10gbit", 201), "1gbit": ("1gbit", 202)}


def spread(vals, spec):
    v = sorted(x for x in vals if x is not None)
    if not v:
        return "-"
    return (spec + " [" + spec + "-" + spec + "]") % (statistics.median(v), v[0], v[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="build directories (each holds tools/godwit)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each configuration (default 3)")
    ap.add_argument("--link", default="loopback", choices=sorted(LINKS))
    ap.add_argument("--memory", default="1G",
                    help="guest RAM, or several sizes separated by commas (interleaved like the rest)")
    ap.add_argument("--fill", default="mix", help="mix, none, zero, random, text or sparse:SIZE")
    ap.add_argument("--codecs", default="none")
    ap.add_argument("--channels", default="1")
    ap.add_argument("--accel", default="soft", choices=["soft", "kvm"])
    ap.add_argument("--workload", default="idle",
                    help="the guest's workload (an idle guest maps the prepared RAM file; others fill their RAM)")
    ap.add_argument("--dst-memory", action="store_true",
                    help="make the destination with the guest's size, not preallocated (QEMU -m); "
                         "default: preallocated (-mem-prealloc)")
    ap.add_argument("--extra", default="", help="more migrate options for every run, one string")
    ap.add_argument("--tcp", action="store_true",
                    help="after each migration, fresh iperf3 processes move its non-zero bytes over as many "
                         "TCP streams as it had channels: a baseline per run")
    ap.add_argument("--keep-logs", default=None, help="directory: each build's logs under its index")
    ap.add_argument("--io-timeout-ms", type=int, default=60000)
    args = ap.parse_args()

    mems = [B.parse_size(m) for m in args.memory.split(",")]
    benches = []
    for i, build in enumerate(args.builds):
        ns = argparse.Namespace(build=build, out="/tmp/gw-ab", quick=False, io_timeout_ms=args.io_timeout_ms,
                                migrate_timeout_s=600, timelines=None, no_dst_prealloc=False,
                                keep_logs=os.path.join(args.keep_logs, str(i)) if args.keep_logs else None)
        b = B.Bench(ns)
        benches.append(b)
        if not b.godwit:
            sys.stderr.write("ab: no godwit under %s\n" % build)
            for made in benches:
                made.cleanup()
            return 77
    rate, subnet = LINKS[args.link]
    link = B.Link(args.link, rate, subnet) if rate else B.Link("loopback")
    cfgs = [(i, codec, int(ch), mem) for i in range(len(benches)) for codec in args.codecs.split(",")
            for ch in args.channels.split(",") for mem in mems]
    recs = {c: [] for c in cfgs}
    link.setup()
    try:
        for _ in range(args.runs):
            for c in cfgs:
                i, codec, ch, mem = c
                dst_extra = ["--max-memory", str(mem + 64 * B.MIB)]
                if args.dst_memory:
                    dst_extra += ["--memory", str(mem)]
                recs[c].append(benches[i].migrate(
                    link, "ab", mem, args.fill, args.workload, ch, codec, extra=args.extra.split(),
                    src_extra=[] if args.fill == "none" else ["--prealloc"],
                    dst_prealloc=not args.dst_memory, dst_extra=dst_extra, accel=args.accel))
                if args.tcp:
                    B.same_bytes_baseline(link, recs[c][-1])
    finally:
        link.teardown()
        for b in benches:
            b.cleanup()	# the prepared RAM files in /dev/shm, the processes, the temporary directory
    print("%s, %s %s, %s, %s VM, %d interleaved runs each, median [min-max]\n" %
          (args.link, ",".join(B.size_str(m) for m in mems), args.fill, args.workload, args.accel, args.runs))
    rows = []
    for c in cfgs:
        i, codec, ch, mem = c
        rs = recs[c]
        ratio = [((r.get("stats") or {}).get("ram") or {}).get("compression-ratio") for r in rs]
        ok = sum(1 for r in rs if r.get("verified") and not r.get("error"))
        final_send = [((r.get("stats") or {}).get("downtime-breakdown") or {}).get("final-send") for r in rs]
        rows.append([args.builds[i], B.size_str(mem), codec, ch, spread([r.get("total-ms") for r in rs], "%.0f"),
                     spread([r.get("total-ms") * B.GIB / mem if r.get("total-ms") else None for r in rs], "%.0f"),
                     spread([r.get("downtime-ms") for r in rs], "%.2f"), spread(final_send, "%.3f"),
                     spread([r.get("setup-ms") for r in rs], "%.1f"), spread(ratio, "%.3f"),
                     spread([r.get("host-steal-ms") for r in rs], "%.0f")] +
                    ([spread([r.get("tcp-same-ms") for r in rs], "%.0f"),
                      spread([r.get("tcp-same-ratio") for r in rs], "%.2f")] if args.tcp else []) +
                    ["%d/%d" % (ok, len(rs))])
    print(B.table(["build", "RAM", "codec", "ch", "total ms", "ms per GiB", "downtime ms", "final send ms", "setup ms",
                   "ratio", "host steal ms"] + (["TCP same bytes ms", "TCP ms ÷ total ms"] if args.tcp else []) +
                  ["verified"], rows))
    return 0 if all(r.get("verified") and not r.get("error") for rs in recs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
