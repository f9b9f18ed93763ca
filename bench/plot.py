#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Pictures of godwit migrations, with Debian's python3-matplotlib.

  plot.py timeline CSV [CSV...] -o OUT.svg|OUT.png [--title T]
      A `godwit migrate --timeline` file: what remains and what was sent, the
      link and dirty rates, the expected downtime and the throttle, against
      time; dotted lines where rounds end.
  plot.py bench RESULTS.jsonl -o DIR [--format svg|png]
      The tables of bench/run.sh as bar charts: scenarios (total time and
      downtime), and channels x codec per link (total time).
  plot.py report RESULTS.jsonl TABLES.md TIMELINE_DIR -o DIR [--format svg|png]
      Both, plus one timeline per scenario, and DIR/report.md: the tables
      with the pictures (what `make bench` writes).

The interpreter is Debian's (/usr/bin/python3): matplotlib comes from
python3-matplotlib (scripts/deps.sh bench). Nothing here judges a figure.
Exit status: 0, 1 bad input, 2 bad usage, 77 matplotlib is missing.
"""

import argparse
import csv
import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.stderr.write("plot.py: matplotlib is missing (apt-get install python3-matplotlib)\n")
    sys.exit(77)

MIB = 1 << 20
# Small, diffable SVG: text stays text, no embedded font, no random ids.
matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "godwit",
                            "figure.dpi": 100, "font.size": 9})


def read_timeline(path):
    """Rows of a --timeline CSV: samples and rounds, numbers as floats."""
    samples, rounds = [], []
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            for k in ("time_ms", "remaining_bytes", "transferred_bytes", "rate_bps",
                      "dirty_rate_bps", "expected_downtime_ms", "throttle_pct", "round"):
                r[k] = float(r[k]) if r.get(k) not in (None, "") else None
            (rounds if r["kind"] == "round" else samples).append(r)
    if not samples:
        raise ValueError("%s: no samples" % path)
    return samples, rounds


def plot_timeline(paths, out, title=None):
    fig, (ax_b, ax_r, ax_d) = plt.subplots(3, 1, sharex=True, figsize=(8, 7))
    for path in paths:
        s, rounds = read_timeline(path)
        name = os.path.basename(path) if len(paths) > 1 else ""
        t = [r["time_ms"] / 1000 for r in s]
        ax_b.plot(t, [r["remaining_bytes"] / MIB for r in s], label=(name + " remaining").strip())
        ax_b.plot(t, [r["transferred_bytes"] / MIB for r in s], "--", label=(name + " sent").strip())
        ax_r.plot(t, [r["rate_bps"] / MIB for r in s], label=(name + " link").strip())
        ax_r.plot(t, [r["dirty_rate_bps"] / MIB for r in s], ":", label=(name + " dirtied").strip())
        ax_d.plot(t, [r["expected_downtime_ms"] for r in s], label=(name + " expected downtime").strip())
        thr = [r["throttle_pct"] for r in s]
        if any(thr):
            ax_t = ax_d.twinx()
            ax_t.plot(t, thr, "r-.", label="throttle")
            ax_t.set_ylabel("throttle %")
            ax_t.set_ylim(0, 100)
        for r in rounds:
            for ax in (ax_b, ax_r, ax_d):
                ax.axvline(r["time_ms"] / 1000, color="0.8", linestyle=":", linewidth=0.8)
        phases = [(r["time_ms"] / 1000, r["phase"]) for r in s]
        for (t0, p0), (t1, p1) in zip(phases, phases[1:]):
            if p0 != p1:
                ax_b.annotate(p1, (t1, 0), textcoords="offset points", xytext=(2, 2), fontsize=7)
    ax_b.set_ylabel("MiB")
    ax_r.set_ylabel("MiB/s")
    ax_d.set_ylabel("ms")
    ax_d.set_xlabel("seconds since the migrate command (dotted: rounds end)")
    for ax in (ax_b, ax_r, ax_d):
        ax.legend(loc="upper right", fontsize=7)
        ax.grid(True, alpha=0.3)
    fig.suptitle(title or "migration timeline")
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None} if out.endswith(".svg") else None)
    plt.close(fig)


def read_results(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def label(rec):
    mem = rec.get("memory") or 0
    return rec.get("name") or "%s, %dM %s" % (rec.get("workload"), mem // MIB, rec.get("fill"))


def plot_bench(recs, outdir, fmt):
    """Bar charts of the scenario and matrix groups; the files written."""
    written = []
    basic = [r for r in recs if r.get("group") == "basic" and not r.get("error")]
    if basic:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        x = range(len(basic))
        ax.bar([i - 0.2 for i in x], [r["total-ms"] for r in basic], 0.4, label="total ms")
        ax.bar([i + 0.2 for i in x], [r["downtime-ms"] for r in basic], 0.4, label="downtime ms")
        ax.set_xticks(list(x))
        ax.set_xticklabels([label(r) for r in basic], fontsize=7, rotation=10)
        ax.set_yscale("log")
        ax.legend()
        ax.set_title("scenarios (loopback)")
        fig.tight_layout()
        path = os.path.join(outdir, "scenarios." + fmt)
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    matrix = [r for r in recs if r.get("group") == "matrix" and not r.get("error")]
    for link in sorted({r["link"] for r in matrix}):
        rows = [r for r in matrix if r["link"] == link]
        codecs = sorted({r["codec"] for r in rows})
        chans = sorted({r["channels"] for r in rows})
        fig, ax = plt.subplots(figsize=(8, 3.5))
        w = 0.8 / max(len(chans), 1)
        for j, ch in enumerate(chans):
            vals = []
            for c in codecs:
                m = [r["total-ms"] for r in rows if r["codec"] == c and r["channels"] == ch]
                vals.append(m[0] if m else 0)
            ax.bar([i + (j - (len(chans) - 1) / 2) * w for i in range(len(codecs))], vals, w,
                   label="%d channel%s" % (ch, "s" if ch > 1 else ""))
        ax.set_xticks(range(len(codecs)))
        ax.set_xticklabels(codecs)
        ax.set_ylabel("total ms")
        ip = rows[0].get("iperf-bps")
        ax.set_title("channels x codec over %s%s" % (link, " (iperf3 %.1f Gbit/s)" % (ip / 1e9) if ip else ""))
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(outdir, "matrix-%s.%s" % (link, fmt))
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["timeline", "bench", "report"])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--format", default="svg", choices=["svg", "png"])
    ap.add_argument("--title")
    a = ap.parse_args()
    try:
        if a.what == "timeline":
            plot_timeline(a.inputs, a.out, a.title)
            print(a.out)
            return 0
        os.makedirs(a.out, exist_ok=True)
        recs = read_results(a.inputs[0])
        written = plot_bench(recs, a.out, a.format)
        if a.what == "bench":
            print("\n".join(written))
            return 0
        if len(a.inputs) < 3:
            ap.error("report needs RESULTS.jsonl TABLES.md TIMELINE_DIR")
        tables, tdir = a.inputs[1], a.inputs[2]
        timelines = []
        for r in recs:
            tl = r.get("timeline")
            if tl and os.path.exists(tl) and r.get("group") in ("basic", "converge"):
                out = os.path.join(a.out, "timeline-%s.%s" % (os.path.basename(tl)[:-4], a.format))
                plot_timeline([tl], out, label(r) if r.get("group") == "basic" else
                              "%s %s" % (r.get("name", ""), " ".join(r.get("extra", []))))
                timelines.append((r, out))
        with open(os.path.join(a.out, "report.md"), "w") as f:
            f.write("# godwit benchmark report\n\n")
            f.write(open(tables).read())
            f.write("\n## Pictures\n\n")
            for p in written:
                f.write("![%s](%s)\n\n" % (os.path.basename(p), os.path.basename(p)))
            for r, p in timelines:
                f.write("### Timeline: %s\n\n![timeline](%s)\n\n" % (label(r), os.path.basename(p)))
        print(os.path.join(a.out, "report.md"))
        return 0
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("plot.py: %s\n" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
