#!/bin/bash
# Run every libFuzzer harness of a fuzz build for SECONDS each (JOBS at a
# time, default 1), from the seeds gen_seeds makes and the corpus kept in
# BUILD/fuzz-corpus/; crashes are kept in BUILD/fuzz-artifacts/HARNESS/.
# One summary line per harness: executions, rate, coverage, crashes.
# Exit 0 only when no harness crashed.
# Usage: tests/fuzz/run.sh BUILD SECONDS [HARNESS...]
set -u
build=${1:?usage: run.sh BUILD SECONDS [HARNESS...]}
secs=${2:?usage: run.sh BUILD SECONDS [HARNESS...]}
shift 2
jobs=${FUZZ_JOBS:-1}
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_msg fuzz_pages_in fuzz_xbzrle fuzz_codec fuzz_dest_session fuzz_virtq)
work=$build/fuzz-work
mkdir -p "$work" "$build/fuzz-corpus" "$build/fuzz-artifacts"
rm -rf "$work/seeds"
"$build/tests/fuzz/gen_seeds" "$work/seeds" >/dev/null || { echo "gen_seeds failed"; exit 1; }

# one HARNESS: runs it, writes its summary line to $work/HARNESS.summary
one() {
	local h=$1 bin=$build/tests/fuzz/$1 log=$work/$1.log art=$build/fuzz-artifacts/$1 corpus=$build/fuzz-corpus/$1
	local rc execs rate cov ft crashes units
	mkdir -p "$art" "$corpus"
	if [ ! -x "$bin" ]; then
		echo "fuzz $h: not built (configure with CC=clang -Dfuzz=true)" >"$work/$h.summary"
		return
	fi
	# Harness output (the engine's log) is quiet; libFuzzer's lines are kept in the log.
	"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=30 -rss_limit_mb=3072 \
		-artifact_prefix="$art/" "$corpus" "$work/seeds/$h" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
	units=$(ls "$corpus" | wc -l)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
	crashes=$(find "$art" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) -newer "$work/start" | wc -l)
	[ "$rc" = 0 ] || [ "$crashes" -gt 0 ] || crashes=1
	echo "fuzz $h: ${execs:-0} executions (${rate:-0}/s) in ${secs} s, coverage ${cov:-0} edges, ${ft:-0} features, corpus $units, crashes $crashes" \
		>"$work/$h.summary"
	[ "$crashes" = 0 ] || { echo "--- $h (last lines of $log)"; tail -n 30 "$log"; } >>"$work/$h.summary"
}

touch "$work/start"
running=0
for h in "${harnesses[@]}"; do
	one "$h" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
status=0
for h in "${harnesses[@]}"; do
	cat "$work/$h.summary"
	grep -q "crashes 0$" "$work/$h.summary" || status=1
done
exit $status
