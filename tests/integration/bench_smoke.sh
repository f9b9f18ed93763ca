#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Invariant: bench/run.sh BUILD --quick runs end to end over loopback and
# prints its markdown tables: the scenario table, the loopback channels x
# codec table, the convergence table (the quick convergence configurations
# run once and end by policy, so they complete on any machine) and the data
# path tables (limits, mix RAM x channels, send paths), each with a header,
# a separator and one row per migration (the limits table: one row of
# limits), and every migration row reports a completed, verified migration.
# It also writes one JSON line per migration; bench/ab.py runs its cross
# product of builds and channels, one verified row each; where QEMU is
# installed, bench/vs_qemu.py completes with both tools. No figure (time, rate, ratio)
# is judged, and iperf3 is not needed (its columns stay empty without it).
#
# Loopback only: the shaped links are netns_migrate.sh's, and the bench's
# fixed namespace names would collide with another run on this host.
#
# Usage: GODWIT=BUILD/tools/godwit bench_smoke.sh [BUILD]   (default BUILD: the one holding $GODWIT)
# Skips (77) without python3.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$(dirname "$(dirname "$GODWIT_BIN")")}
command -v python3 >/dev/null 2>&1 || skip "python3 missing"

"$root/bench/run.sh" "$build" --quick --links loopback --out "$T/results" >"$T/out.md" 2>"$T/bench.log"
rc=$?
bad() { echo "--- stdout" >&2; cat "$T/out.md" >&2; fail "$*"; }
[ "$rc" = 77 ] && skip "bench/run.sh skipped"
[ "$rc" = 0 ] || bad "bench/run.sh exited $rc"

# rows TITLE: number of table rows under the heading that starts with TITLE.
rows() {
	awk -v t="$1" '
		index($0, t) == 1 { on = 1; n = -2; next }
		on && /^\|/ { n++; next }
		on && n > -2 && !/^\|/ { exit }
		END { print (n > 0 ? n : 0) }' "$T/out.md"
}
n=$(rows "## Scenarios (quick)")
[ "$n" -ge 3 ] || bad "scenario table has $n rows, want 3"
n=$(rows "## Channels x codec over loopback")
[ "$n" -ge 4 ] || bad "loopback matrix table has $n rows, want 4"
n=$(rows "## Convergence (quick")
[ "$n" -ge 3 ] || bad "convergence table has $n rows, want 3"
grep -q '^| scenario | VM | guest pages/s | link | iperf3 Gbit/s | total ms |' "$T/out.md" || bad "no scenario header"
grep -q '^| link | RAM | ch | codec |' "$T/out.md" || bad "no matrix header"
n=$(rows "## Data path: limits")
[ "$n" -eq 1 ] || bad "limits table has $n rows, want 1"
n=$(rows "## Data path: mix RAM over loopback")
[ "$n" -ge 2 ] || bad "data path loopback table has $n rows, want 2"
n=$(rows "## Data path: send paths")
[ "$n" -ge 2 ] || bad "send path table has $n rows, want 2"
grep -q '^| RAM | ch | dst prealloc | total ms |' "$T/out.md" || bad "no data path header"
headers='^| scenario\|^| link\|^| RAM\|^| send-path\|^| one TCP stream\|^| codec\|^| guest'
if grep '^| ' "$T/out.md" | grep -v "$headers" | grep -v 'Gbit/s (' | grep -vq '| yes[^|]* |$'; then
	bad "a row is not a verified migration"
fi
lines=$(cat "$T"/results/*.jsonl 2>/dev/null | wc -l)
total=$(grep -c '^| ' "$T/out.md")
tables=$(grep -c '^## ' "$T/out.md")
# Every table has one header row; the limits table one row of limits; the rest are migrations.
[ "$lines" -eq $((total - tables - 1)) ] || bad "$lines JSON lines for $((total - tables - 1)) table rows"

# bench/ab.py: one row per configuration (builds x codecs x channels), each verified.
"$root/bench/ab.py" "$build" "$build" --memory 32M --channels 1,2 --runs 1 >"$T/ab.md" 2>"$T/ab.log"
rc=$?
[ "$rc" = 0 ] || { cat "$T/ab.md" "$T/ab.log" >&2; fail "bench/ab.py exited $rc"; }
n=$(grep -c '| 1/1 |$' "$T/ab.md")
[ "$n" -eq 4 ] || { cat "$T/ab.md" >&2; fail "bench/ab.py: $n verified rows, want 4"; }

# bench/vs_qemu.py, where QEMU is installed (scripts/deps.sh bench): both tools complete.
vs=", vs_qemu.py not run (no qemu-system-x86_64)"
if command -v qemu-system-x86_64 >/dev/null 2>&1; then
	"$root/bench/vs_qemu.py" "$build" --memory 32M --channels 1,2 --runs 1 >"$T/vs.md" 2>"$T/vs.log"
	rc=$?
	[ "$rc" = 0 ] || { cat "$T/vs.md" "$T/vs.log" >&2; fail "bench/vs_qemu.py exited $rc"; }
	n=$(grep -c '| 1/1\( verified\)\? |$' "$T/vs.md")
	[ "$n" -eq 4 ] || { cat "$T/vs.md" >&2; fail "bench/vs_qemu.py: $n completed rows, want 4"; }
	vs=", vs_qemu.py 4 rows"
fi
pass "bench smoke: $tables tables, $lines migrations; ab.py 4 configurations$vs"
