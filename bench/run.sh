#!/bin/bash
# bench/run.sh BUILD_DIR [--quick] [--micro] [--report DIR] [bench.py options]
#
# Scenario benchmark of godwit migrations: idle and dirtying guests, then
# channels x codec over loopback and over 10gbit / 1gbit veth links between
# network namespaces, each link measured with iperf3 in the same run.
# Markdown tables on stdout, progress on stderr, raw JSON lines under
# bench/results/ (gitignored). --quick: small smoke set (< 2 minutes).
# --micro: also run the micro-benchmarks (codec_bench, zero_bench, crc_bench).
# --report DIR: also DIR/tables.md, a --timeline CSV per migration under
# DIR/timelines, and DIR/report.md with the pictures bench/plot.py draws
# (python3-matplotlib; without it the tables alone).
# Everything else is passed to bench/bench.py (see its --help and
# docs/bench.md). Exit status: 0 all migrations completed, 1 some failed,
# 77 nothing to run (no godwit binary or no python3), 2 bad usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
	echo "usage: bench/run.sh BUILD_DIR [--quick] [--micro] [bench.py options]" >&2
	exit 2
fi
build=$1
shift
micro=0
report=
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--micro) micro=1 ;;
	--report) report=${2:?--report needs a directory}; shift ;;
	*) args+=("$1") ;;
	esac
	shift
done
if ! command -v python3 >/dev/null 2>&1; then
	echo "bench: python3 is needed (apt-get install python3)" >&2
	exit 77
fi
if [ ! -x "$build/tools/godwit" ] && [ ! -x "$build/godwit" ]; then
	echo "bench: no godwit binary in $build (build it: ninja -C $build tools/godwit)" >&2
	exit 77
fi
command -v iperf3 >/dev/null 2>&1 ||
	echo "bench: iperf3 missing, link baselines will be empty (scripts/deps.sh bench)" >&2

if [ "$micro" = 1 ]; then
	for b in codec_bench zero_bench crc_bench; do
		if [ -x "$build/bench/$b" ]; then
			echo "## $b"
			echo
			echo '```'
			"$build/bench/$b"
			echo '```'
			echo
		else
			echo "bench: $build/bench/$b not built, skipped" >&2
		fi
	done
fi
if [ -z "$report" ]; then
	exec python3 "$here/bench.py" "$build" "${args[@]}"
fi
mkdir -p "$report/timelines"
out=$report/results
python3 "$here/bench.py" "$build" --out "$out" --timelines "$report/timelines" "${args[@]}" |
	tee "$report/tables.md"
rc=${PIPESTATUS[0]}
results=$(ls -t "$out"/*.jsonl 2>/dev/null | head -n1)
if [ -n "$results" ] && "$here/plot.py" report "$results" "$report/tables.md" "$report/timelines" \
	-o "$report" >/dev/null; then
	echo "bench: report with pictures: $report/report.md" >&2
else
	echo "bench: no pictures (bench/plot.py needs python3-matplotlib): tables in $report/tables.md" >&2
fi
exit "$rc"
