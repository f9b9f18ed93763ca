#!/usr/bin/env python3
"""What TLS costs: plain against mutual TLS on loopback, interleaved runs.

Usage: bench/tls.py [--godwit PATH]... [--runs N] [--memory SIZE] [--channels 1,2,4]
                    [--compress none|auto]

Each run does, for every channel count, one plain and one TLS migration
(`godwit demo --tls` makes the certificates) of an idle guest with
`--fill mix` RAM, alternating which goes first. Throughput is wire bytes
over total time (the same bytes both ways: TLS adds its own framing below
godwit's). Prints every migration, then per channel count the median, min
and max of each and the ratio of the medians (TLS / plain). The source's CPU
seconds are printed too (the destination's are not reported by the CLI).

With --godwit given more than once (an old build against a new one), every
run does each binary's migrations in turn, the order rotating per run, and
the table has a row per binary and channel count.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one(args, gw, ch, tls):
    cmd = [gw, "demo", "--memory", args.memory, "--fill", "mix", "--workload", "idle",
           "--channels", str(ch), "--compress", args.compress, "--json"] + (["--tls"] if tls else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    d = json.loads(r.stdout)
    if d.get("status") != "completed":
        raise RuntimeError("%s: %s" % (" ".join(cmd), d.get("error-desc")))
    gbps = d["ram"]["transferred"] * 8 / (d["total-time"] / 1000) / 1e9
    return gbps, d["total-time"], d.get("cpu-user-seconds", 0) + d.get("cpu-system-seconds", 0), \
        d.get("tls", {}).get("ktls-tx", False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--godwit", action="append",
                    help="binary to run (repeat to compare builds; default build/tools/godwit)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--memory", default="1G")
    ap.add_argument("--channels", default="1,2,4")
    ap.add_argument("--compress", default="none")
    args = ap.parse_args()
    gws = args.godwit or [os.path.join(ROOT, "build", "tools", "godwit")]
    chans = [int(c) for c in args.channels.split(",")]
    res = {(g, c, t): [] for g in range(len(gws)) for c in chans for t in (False, True)}
    for g, path in enumerate(gws):
        print("binary %d: %s" % (g, path))
    print("run bin ch  mode   Gbit/s  total-ms  src-cpu-s")
    for i in range(args.runs):
        order = [(g + i) % len(gws) for g in range(len(gws))]
        for c in chans:
            for g in order:
                for t in ((False, True) if i % 2 == 0 else (True, False)):
                    gbps, ms, cpu, ktls = one(args, gws[g], c, t)
                    res[(g, c, t)].append(gbps)
                    print("%3d %3d %2d  %-5s %7.2f %9.1f %10.2f%s" % (i, g, c, "tls" if t else "plain", gbps, ms,
                                                                   cpu, " (kTLS)" if ktls else ""), flush=True)
    print()
    print("bin ch  plain Gbit/s median [min, max]   tls Gbit/s median [min, max]   tls/plain")
    for g in range(len(gws)):
        for c in chans:
            p, t = res[(g, c, False)], res[(g, c, True)]
            print("%3d %2d  %6.2f [%.2f, %.2f]              %6.2f [%.2f, %.2f]             %.2f" % (
                g, c, statistics.median(p), min(p), max(p), statistics.median(t), min(t), max(t),
                statistics.median(t) / statistics.median(p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
