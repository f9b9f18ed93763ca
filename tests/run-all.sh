#!/bin/bash
# Run every test: unit tests (in parallel), then the KVM tests and the
# integration tests (one at a time; KVM tests skip where /dev/kvm is
# missing). With --ci, then also (docs/security.md):
#   asan      the unit and KVM tests, in-process migrations included, built
#             with AddressSanitizer + UndefinedBehaviorSanitizer (BUILD-asan)
#   tsan      the same with ThreadSanitizer (BUILD-tsan), less the
#             single-threaded tests of suite no-tsan
#   fuzz      each libFuzzer harness for FUZZ_SECONDS (default 20) s (BUILD-fuzz, clang)
#   campaign  bench/faults.py: CAMPAIGN_RUNS (default 50) faulted migrations
# Every test, harness and the campaign count once. --only SUITE runs that
# meson suite alone (make test-kvm: --only kvm). Prints one closing line
# "N passed, N failed, N skipped".
# Usage: tests/run-all.sh BUILD_DIR [--only SUITE | --ci] [extra meson test args]
set -u
build=${1:-build}
shift || true
ci=0 only=
if [ "${1:-}" = --ci ]; then
	ci=1
	shift
elif [ "${1:-}" = "--only" ]; then
	only=${2:?--only needs a suite name}
	shift 2
fi
passed=0 failed=0 skipped=0 rc=0
here=$(cd "$(dirname "$0")" && pwd)

# run_meson BUILD [meson test args...]: run, add its counts.
run_meson() {
	local dir=$1 log
	shift
	log=$(mktemp)
	meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$log"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	local ok fail skip tout
	ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	skip=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	tout=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	# A build that fails never reaches the summary: one failure for the stage.
	[ -n "$ok$fail" ] || fail=1
	passed=$((passed + ${ok:-0}))
	failed=$((failed + ${fail:-0} + ${tout:-0}))
	skipped=$((skipped + ${skip:-0}))
	rm -f "$log"
}

run_suite() {
	local suite=$1 procs=$2
	shift 2
	run_meson "$build" --no-rebuild --suite "$suite" --num-processes "$procs" "$@"
}

# stage NAME: a banner with the time, for the CI log.
stage() { echo; echo "=== $1 ($(date +%T))"; }

# sanitizer BUILD KIND SANITIZE [meson test args]: configure (once), build, run the unit and kvm suites.
sanitizer() {
	local dir=$1 kind=$2 sanitize=$3
	shift 3
	stage "$kind: unit and KVM tests, in-process migrations ($dir)"
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" --buildtype=debugoptimized -Db_sanitize="$sanitize" -Db_lundef=false >/dev/null ||
			{ echo "$kind: meson setup failed"; failed=$((failed + 1)); return; }
	fi
	# Only what the unit and kvm suites run (no benchmarks): the builds are slow with sanitizers.
	targets=$(python3 "$here/unit_targets.py" "$dir" "$@" 2>/dev/null)
	# shellcheck disable=SC2086  # a list of targets
	ninja -C "$dir" $targets >/dev/null ||
		{ echo "$kind: build failed"; ninja -C "$dir" $targets | tail -n 20; failed=$((failed + 1)); return; }
	run_meson "$dir" --no-rebuild --suite unit --suite kvm --num-processes 2 --timeout-multiplier 4 "$@"
}

if [ -n "$only" ]; then
	run_suite "$only" 1 "$@"
else
	run_suite unit 2 "$@"
	run_suite kvm 1 "$@"
	run_suite integration 1 "$@"
fi

if [ "$ci" = 1 ]; then
	export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
	# Guest RAM read while guest writers write it is the design (tsan.supp says why).
	export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$here/tsan.supp
	sanitizer "$build-asan" asan address,undefined
	sanitizer "$build-tsan" tsan thread --no-suite no-tsan

	stage "fuzz: each harness ${FUZZ_SECONDS:-20} s ($build-fuzz)"
	if [ ! -f "$build-fuzz/build.ninja" ]; then
		CC=clang meson setup "$build-fuzz" --buildtype=debugoptimized -Dfuzz=true \
			-Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false >/dev/null
	fi
	if ninja -C "$build-fuzz" tests/fuzz/fuzz_msg tests/fuzz/fuzz_pages_in tests/fuzz/fuzz_xbzrle \
		tests/fuzz/fuzz_codec tests/fuzz/fuzz_dest_session tests/fuzz/gen_seeds >/dev/null; then
		flog=$(mktemp)
		"$here/fuzz/run.sh" "$build-fuzz" "${FUZZ_SECONDS:-20}" | tee "$flog"
		passed=$((passed + $(grep -c 'crashes 0$' "$flog")))
		failed=$((failed + $(grep '^fuzz ' "$flog" | grep -vc 'crashes 0$')))
		rm -f "$flog"
	else
		echo "fuzz: build failed (clang and libclang-rt-14-dev needed)"
		failed=$((failed + 1))
	fi

	stage "campaign: ${CAMPAIGN_RUNS:-50} faulted migrations"
	clog=$(mktemp)
	python3 "$here/../bench/faults.py" --godwit "$build/tools/godwit" --runs "${CAMPAIGN_RUNS:-50}" \
		${CAMPAIGN_SEED:+--seed "$CAMPAIGN_SEED"} | tee "$clog"
	if [ "${PIPESTATUS[0]}" = 0 ] && grep -q "lost 0, split-brain 0, unverified 0" "$clog"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
	rm -f "$clog"
fi

echo
echo "${only:+$only: }$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$rc" = 0 ]
