#!/bin/bash
# Run every test: unit tests (in parallel), then the KVM tests and the
# integration tests (one at a time; KVM tests skip where /dev/kvm is
# missing). With --ci, then also (docs/security.md; their builds are made
# in the background while the KVM and integration tests run):
#   asan      the unit and KVM tests, in-process migrations included, built
#             with AddressSanitizer + UndefinedBehaviorSanitizer (BUILD-asan)
#   tsan      the same with ThreadSanitizer (BUILD-tsan), less the
#             single-threaded tests of suite no-tsan
#   fuzz      each libFuzzer harness for FUZZ_SECONDS (default 20) s (BUILD-fuzz, clang)
#   campaign  bench/faults.py: CAMPAIGN_RUNS (default 50) faulted migrations
# Every test, harness and the campaign count once. --only SUITE runs that
# meson suite alone (make test-kvm: --only kvm). Lists what did not pass
# ("not passed: ..." lines: failed, timed out, skipped), then one closing line
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
notable=()	# "BUILD: FAIL|SKIP|... suite / test": listed above the closing line
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
	# The names, for the closing list: "  12/300 godwit:unit / name   FAIL ..."
	local line
	while IFS= read -r line; do
		notable+=("$dir: $line")
	done < <(sed -n 's/^ *[0-9]*\/[0-9]* *\(.*[^ ]\) *\(FAIL\|TIMEOUT\|ERROR\|SKIP\|UNEXPECTEDPASS\) .*/\2 \1/p' "$log" | sort -u)
	rm -f "$log"
}

run_suite() {
	local suite=$1 procs=$2
	shift 2
	run_meson "$build" --no-rebuild --suite "$suite" --num-processes "$procs" "$@"
}

# stage NAME: a banner with the time, for the CI log.
stage() { echo; echo "=== $1 ($(date +%T))"; }

# The three CI builds (ASan+UBSan, TSan, fuzz) are made in the background,
# niced, while the KVM and integration suites run one test at a time (mostly
# waiting on sockets and guests), then tested after them: CI stays well
# under 30 minutes on two cores.
# configure_build DIR KIND SANITIZE [CC]: meson setup once.
configure_build() {
	local dir=$1 kind=$2 sanitize=$3 cc=${4:-}
	[ -f "$dir/build.ninja" ] && return 0
	if [ "$kind" = fuzz ]; then
		CC=$cc meson setup "$dir" --buildtype=debugoptimized -Dfuzz=true \
			-Db_sanitize="$sanitize" -Db_lundef=false -Dwerror=false >/dev/null
	else
		meson setup "$dir" --buildtype=debugoptimized -Db_sanitize="$sanitize" -Db_lundef=false >/dev/null
	fi
}
# build_targets DIR KIND [meson test args]: what that stage needs, log in DIR.log.
build_targets() {
	local dir=$1 kind=$2 targets
	shift 2
	if [ "$kind" = fuzz ]; then
		targets="tests/fuzz/fuzz_msg tests/fuzz/fuzz_pages_in tests/fuzz/fuzz_xbzrle tests/fuzz/fuzz_codec
			 tests/fuzz/fuzz_dest_session tests/fuzz/fuzz_virtq tests/fuzz/gen_seeds"
	else
		# Only what the unit and kvm suites run (no benchmarks): the builds are slow with sanitizers.
		targets=$(python3 "$here/unit_targets.py" "$dir" "$@" 2>/dev/null)
	fi
	# shellcheck disable=SC2086  # a list of targets
	nice -n 10 ninja -C "$dir" $targets
}
# start_build DIR KIND SANITIZE CC [meson test args]: configure and build in the background.
declare -A build_pid
start_build() {
	local dir=$1 kind=$2 sanitize=$3 cc=$4
	shift 4
	{ configure_build "$dir" "$kind" "$sanitize" "$cc" && build_targets "$dir" "$kind" "$@"; } \
		>"$dir.log" 2>&1 &
	build_pid[$kind]=$!
}
# built KIND DIR: wait for its build; 0 when it succeeded (else its log's tail, one failure).
built() {
	local kind=$1 dir=$2
	if wait "${build_pid[$kind]}"; then
		return 0
	fi
	echo "$kind: build failed ($dir.log):"
	tail -n 20 "$dir.log"
	failed=$((failed + 1))
	notable+=("FAIL $kind: build failed ($dir.log)")
	return 1
}

# sanitizer BUILD KIND [meson test args]: the unit and kvm suites of a built sanitizer build.
sanitizer() {
	local dir=$1 kind=$2
	shift 2
	stage "$kind: unit and KVM tests, in-process migrations ($dir)"
	built "$kind" "$dir" || return
	run_meson "$dir" --no-rebuild --suite unit --suite kvm --num-processes 2 --timeout-multiplier 4 "$@"
}

if [ -n "$only" ]; then
	run_suite "$only" 1 "$@"
else
	run_suite unit 2 "$@"
	if [ "$ci" = 1 ]; then
		stage "building the sanitizer and fuzz builds in the background"
		start_build "$build-asan" asan address,undefined ""
		start_build "$build-tsan" tsan thread "" --no-suite no-tsan
		start_build "$build-fuzz" fuzz address,undefined clang
	fi
	run_suite kvm 1 "$@"
	run_suite integration 1 "$@"
fi

if [ "$ci" = 1 ]; then
	export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
	# Guest RAM read while guest writers write it is the design (tsan.supp says why).
	export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$here/tsan.supp
	sanitizer "$build-asan" asan
	sanitizer "$build-tsan" tsan --no-suite no-tsan

	stage "fuzz: each harness ${FUZZ_SECONDS:-20} s, two at a time ($build-fuzz)"
	if built fuzz "$build-fuzz"; then
		flog=$(mktemp)
		FUZZ_JOBS=${FUZZ_JOBS:-2} "$here/fuzz/run.sh" "$build-fuzz" "${FUZZ_SECONDS:-20}" | tee "$flog"
		passed=$((passed + $(grep -c 'crashes 0$' "$flog")))
		failed=$((failed + $(grep '^fuzz ' "$flog" | grep -vc 'crashes 0$')))
		while IFS= read -r line; do notable+=("FAIL $line"); done < <(grep '^fuzz ' "$flog" | grep -v 'crashes 0$')
		rm -f "$flog"
	else
		echo "fuzz: clang and libclang-rt-14-dev are needed"
	fi

	stage "campaign: ${CAMPAIGN_RUNS:-50} faulted migrations"
	clog=$(mktemp)
	python3 "$here/../bench/faults.py" --godwit "$build/tools/godwit" --runs "${CAMPAIGN_RUNS:-50}" \
		${CAMPAIGN_SEED:+--seed "$CAMPAIGN_SEED"} | tee "$clog"
	if [ "${PIPESTATUS[0]}" = 0 ] && grep -q "lost 0, split-brain 0, unverified 0" "$clog"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		notable+=("FAIL campaign: $(tail -n1 "$clog")")
	fi
	rm -f "$clog"
fi

echo
# What did not pass, by name, just above the closing line (a CI log's tail shows both).
[ ${#notable[@]} -gt 0 ] && printf 'not passed: %s\n' "${notable[@]}"
echo "${only:+$only: }$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$rc" = 0 ]
