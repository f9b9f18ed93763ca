#!/bin/bash
# Run every test: unit tests (in parallel), then integration tests (one at a
# time). Prints a closing line "N passed, N failed, N skipped".
# Usage: tests/run-all.sh BUILD_DIR [extra meson test args]
set -u
build=${1:-build}
shift || true
passed=0 failed=0 skipped=0 rc=0
run_suite() {
	local suite=$1 procs=$2 log
	shift 2
	log=$(mktemp)
	meson test -C "$build" --no-rebuild --print-errorlogs --suite "$suite" --num-processes "$procs" "$@" 2>&1 | tee "$log"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	local ok fail skip tout
	ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	skip=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	tout=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	passed=$((passed + ${ok:-0}))
	failed=$((failed + ${fail:-0} + ${tout:-0}))
	skipped=$((skipped + ${skip:-0}))
	rm -f "$log"
}
run_suite unit 2 "$@"
run_suite integration 1 "$@"
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$rc" = 0 ]
