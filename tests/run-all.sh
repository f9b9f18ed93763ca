#!/bin/bash
# Run every test: unit tests (in parallel), then the KVM tests and the
# integration tests (one at a time; KVM tests skip where /dev/kvm is
# missing). Prints a closing line "N passed, N failed, N skipped".
# Usage: tests/run-all.sh BUILD_DIR [--only SUITE] [extra meson test args]
set -u
build=${1:-build}
shift || true
only=
if [ "${1:-}" = "--only" ]; then
	only=${2:?--only needs a suite name}
	shift 2
fi
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
if [ -n "$only" ]; then
	run_suite "$only" 1 "$@"
else
	run_suite unit 2 "$@"
	run_suite kvm 1 "$@"
	run_suite integration 1 "$@"
fi
echo
echo "${only:+$only: }$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$rc" = 0 ]
