#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Invariant: bench/run.sh BUILD --quick runs end to end and prints its
# markdown tables: the scenario table and at least the loopback channels x
# codec table, each with a header, a separator and one row per migration,
# and every row reports a completed, verified migration. It also writes one
# JSON line per migration. No figure (time, rate, ratio) is judged.
#
# Usage: bench_smoke.sh BUILD_DIR   (default: $MESON_BUILD_ROOT)
# Skips (77) without python3, the godwit binary or iperf3.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-${MESON_BUILD_ROOT:-}}
if [ -z "$build" ]; then
	echo "usage: bench_smoke.sh BUILD_DIR" >&2
	exit 2
fi
for cmd in python3 iperf3; do
	command -v "$cmd" >/dev/null 2>&1 || { echo "SKIP: $cmd missing"; exit 77; }
done
if [ ! -x "$build/tools/godwit" ]; then
	echo "SKIP: $build/tools/godwit not built"
	exit 77
fi
D=$(mktemp -d /tmp/gw-bench-smoke.XXXXXX)
trap 'rm -rf "$D"' EXIT

"$root/bench/run.sh" "$build" --quick --out "$D/results" >"$D/out.md" 2>"$D/err.log"
rc=$?
fail() {
	echo "FAIL: $*"
	echo "--- stdout"; cat "$D/out.md"
	echo "--- stderr (tail)"; tail -20 "$D/err.log"
	exit 1
}
[ "$rc" = 77 ] && { echo "SKIP: bench/run.sh skipped"; exit 77; }
[ "$rc" = 0 ] || fail "bench/run.sh exited $rc"

# rows TITLE: number of table rows under the heading that starts with TITLE.
rows() {
	awk -v t="$1" '
		index($0, t) == 1 { on = 1; n = -2; next }
		on && /^\|/ { n++; next }
		on && n > -2 && !/^\|/ { exit }
		END { print (n > 0 ? n : 0) }' "$D/out.md"
}
n=$(rows "## Scenarios (quick)")
[ "$n" -ge 3 ] || fail "scenario table has $n rows, want 3"
n=$(rows "## Channels x codec over loopback")
[ "$n" -ge 4 ] || fail "loopback matrix table has $n rows, want 4"
grep -q '^| scenario | link | iperf3 Gbit/s | total ms |' "$D/out.md" || fail "no scenario header"
grep -q '^| link | RAM | ch | codec |' "$D/out.md" || fail "no matrix header"
if grep '^| ' "$D/out.md" | grep -v '^| scenario\|^| link' | grep -vq '| yes[^|]* |$'; then
	fail "a row is not a verified migration"
fi
lines=$(cat "$D"/results/*.jsonl 2>/dev/null | wc -l)
total=$(grep -c '^| ' "$D/out.md")
tables=$(grep -c '^## ' "$D/out.md")
# Every table has one header row; the rest are migrations.
[ "$lines" -eq $((total - tables)) ] || fail "$lines JSON lines for $((total - tables)) table rows"
echo "bench smoke: $tables tables, $lines migrations"
