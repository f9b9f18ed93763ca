#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Invariant: bench/nfv.py --runs 1 runs the NFV measurement end to end at a
# small size (64 MiB guest, 16 MiB of mix, two NICs, no link shaping) and
# prints one JSON object per run with every field the measurement reports:
# the migration completed and is verified, frames were sent and came back
# before and after it, and the counts are whole numbers that add up (lost +
# received = sent). The guest is the l2fwd workload where this godwit has
# it, else the stand-in (--guest auto). No figure (time, gap, rate) is
# judged. Then the tables: one row per run and one per configuration. Skips
# where the VM has the l2fwd workload but its guest program does not forward
# (a KVM VM whose vm_created line names another guest).
#
# Skips (77) without python3, root, namespaces or /dev/net/tun.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$(dirname "$GODWIT_BIN")")
command -v python3 >/dev/null 2>&1 || skip "python3 missing"

"$root/bench/nfv.py" "$build" --accel "$IT_ACCEL" --guest auto --memory 64M --data 16M --nics 2 \
	--link none --pps 2000 --traffic-seconds 8 --runs 1 --json --out "$T/out" >"$T/out.txt" 2>"$T/nfv.log"
rc=$?
[ "$rc" = 77 ] && skip "bench/nfv.py: $(tail -1 "$T/nfv.log")"
bad() { echo "--- stdout" >&2; cat "$T/out.txt" >&2; echo "--- stderr" >&2; tail -20 "$T/nfv.log" >&2; fail "$*"; }
grep -q "no l2fwd guest in this build" "$T/out.txt" && skip "this build's $IT_ACCEL VM has the l2fwd workload but no such guest"
[ "$rc" = 0 ] || bad "bench/nfv.py exited $rc"
grep '^{' "$T/out.txt" >"$T/runs.jsonl"
[ "$(wc -l <"$T/runs.jsonl")" = 1 ] || bad "$(wc -l <"$T/runs.jsonl") JSON lines, want 1"
python3 - "$T/runs.jsonl" >"$T/check.txt" 2>&1 <<'PY' || bad "$(cat "$T/check.txt")"
import json, sys
d = json.loads(open(sys.argv[1]).readline())
need = ["total-ms", "downtime-ms", "net-gap-ms", "gap-resolution-ms", "lost", "duplicated", "reordered",
        "corrupted", "carried", "forwarded-pps-before", "forwarded-pps-after", "announce-ms", "verified",
        "sent", "received", "guest", "gap-minus-downtime-ms"]
missing = [k for k in need if k not in d]
assert not missing, "missing fields: %s" % missing
assert d["error"] is None, "run failed: %s" % d["error"]
assert d["verified"] is True, "not verified"
for k in ("lost", "duplicated", "reordered", "corrupted", "carried", "sent", "received"):
    assert isinstance(d[k], int) and d[k] >= 0, "%s = %r" % (k, d[k])
assert d["sent"] > 0 and d["received"] > 0, "no frames through the guest"
assert d["lost"] + d["received"] == d["sent"], "lost + received != sent"
# The rate after the migration needs a whole second of traffic after it: a
# host slow enough to eat the run's traffic says so in "note" instead.
after = ("forwarded-pps-after",) if "note" not in d else ()
for k in ("total-ms", "downtime-ms", "gap-resolution-ms", "forwarded-pps-before") + after:
    assert isinstance(d[k], (int, float)) and d[k] > 0, "%s = %r" % (k, d[k])
assert d["guest"] in ("l2fwd", "standin"), d["guest"]
print("guest %s" % d["guest"])
PY
n=$(grep -c '^| [0-9]' "$T/out.txt")
[ "$n" = 1 ] || bad "$n per-run table rows, want 1"
grep -q '^| VM, fill, NICs | runs |' "$T/out.txt" || bad "no summary table"
pass "nfv bench smoke: 1 run, $(cat "$T/check.txt"), fields present"
