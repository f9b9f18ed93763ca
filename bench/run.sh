#!/bin/bash
# bench/run.sh BUILD_DIR [--quick] [--micro] [bench.py options]
#
# Scenario benchmark of godwit migrations: idle and dirtying guests, then
# channels x codec over loopback and over 10gbit / 1gbit veth links between
# network namespaces, each link measured with iperf3 in the same run.
# Markdown tables on stdout, progress on stderr, raw JSON lines under
# bench/results/ (gitignored). --quick: small smoke set (< 2 minutes).
# --micro: also run the micro-benchmarks (codec_bench, zero_bench, crc_bench).
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
args=()
for a in "$@"; do
	case "$a" in
	--micro) micro=1 ;;
	*) args+=("$a") ;;
	esac
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
exec python3 "$here/bench.py" "$build" "${args[@]}"
