#!/bin/bash
# Shared helpers for integration tests: start a source and a destination
# `godwit run` as background processes, talk to their API sockets, read JSON.
# Every test sources this, sets GODWIT (the binary) and calls the helpers.
# Children are killed on exit, whatever happens.
set -u
GODWIT=${GODWIT:?GODWIT must point at the godwit binary}
T=$(mktemp -d /tmp/gw-it.XXXXXX)
PIDS=()
# The VM backend: `run` and `demo` get --accel $IT_ACCEL first (a later
# --accel in a test wins). soft by default: most cases use soft-VM-only
# workloads and sizes; the kvm-* tests set IT_ACCEL=kvm and skip (77) where
# /dev/kvm does not work.
IT_ACCEL=${IT_ACCEL:-soft}
# (/dev/kvm is char device 10:232; anything else there, e.g. /dev/null
# bind-mounted over it, is no KVM.)
if [ "$IT_ACCEL" = kvm ] && ! { [ "$(stat -Lc '%t:%T' /dev/kvm 2>/dev/null)" = a:e8 ] &&
				[ -r /dev/kvm ] && [ -w /dev/kvm ]; }; then
	echo "SKIP: no usable /dev/kvm"
	rm -rf "$T"
	exit 77
fi
accel_wrap() {	# accel_wrap BINARY NAME: a script in $T that adds --accel
	printf '#!/bin/bash\ncase "${1:-}" in run|demo) c=$1; shift; exec %q "$c" --accel %q "$@" ;; esac\nexec %q "$@"\n' \
		"$1" "$IT_ACCEL" "$1" >"$T/$2"
	chmod +x "$T/$2"
	echo "$T/$2"
}
GODWIT_BIN=$GODWIT	# the binary itself (its build directory: bench_smoke.sh)
GODWIT=$(accel_wrap "$GODWIT" godwit)
[ -n "${GODWIT_FI:-}" ] && GODWIT_FI=$(accel_wrap "$GODWIT_FI" godwit-fi)
cleanup() {
	# The watchdog first (so it reports nothing), then its sleep.
	if [ -n "${WATCHDOG_PID:-}" ]; then
		local sleeper
		sleeper=$(pgrep -P "$WATCHDOG_PID")
		kill -KILL "$WATCHDOG_PID" $sleeper 2>/dev/null
	fi
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ "${KEEP_LOGS:-0}" = 1 ]; then echo "logs kept in $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
show_logs() { for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 25 "$f" >&2; }; done; }

# Time bound: a hang fails well before meson's timeout, with the last log
# lines of both ends printed. It bounds a hang, never decides a pass: every
# test finishes in a fraction of it (GW_TEST_BOUND_S overrides, seconds).
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
watchdog() {
	local bound=$1 main=$2 me=$BASHPID victims
	sleep "$bound" &
	wait $!
	echo "FAIL: time bound of ${bound} s exceeded (a hang); last log lines:" >&2
	show_logs
	victims=$(descendants "$main" | grep -vx "$me")
	kill -KILL "$main" $victims 2>/dev/null
}
watchdog "${GW_TEST_BOUND_S:-200}" $$ &
WATCHDOG_PID=$!

fail() { echo "FAIL: $*" >&2; show_logs; exit 1; }
pass() { echo "PASS: $*"; exit 0; }
skip() { echo "SKIP: $*"; exit 77; }

# jget FILE EXPR: python expression over the JSON object `d`.
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# start_dst URL [run args...]: sets DST_URL (bound) and DST_PID. DST_FAULT /
# SRC_FAULT arm a fault point in that process (GW_FAULT, test builds only).
start_dst() {
	local url=$1; shift
	# shellcheck disable=SC2086  # DST_WRAP, e.g. "ip netns exec NS", splits on purpose
	GW_FAULT=${DST_FAULT:-} ${DST_WRAP:-} "$GODWIT" run --incoming "$url" --api "$T/dst.sock" "$@" \
		>"$T/dst.out" 2>"$T/dst.log" &
	DST_PID=$!
	PIDS+=("$DST_PID")
	for _ in $(seq 1 200); do
		DST_URL=$(sed -n 's/^incoming //p' "$T/dst.out" | head -n1)
		[ -n "$DST_URL" ] && return 0
		kill -0 "$DST_PID" 2>/dev/null || fail "destination exited early"
		sleep 0.05
	done
	fail "destination did not listen"
}

# start_src [run args...]: sets SRC_PID; returns once the API answers running.
start_src() {
	# shellcheck disable=SC2086
	GW_FAULT=${SRC_FAULT:-} ${SRC_WRAP:-} "$GODWIT" run --api "$T/src.sock" "$@" >"$T/src.out" 2>"$T/src.log" &
	SRC_PID=$!
	PIDS+=("$SRC_PID")
	for _ in $(seq 1 1200); do
		if "$GODWIT" status --api "$T/src.sock" --json >"$T/st.json" 2>/dev/null &&
		   [ "$(jget "$T/st.json" "d.get('vm-status')")" = running ]; then
			return 0
		fi
		kill -0 "$SRC_PID" 2>/dev/null || fail "source exited early"
		sleep 0.1
	done
	fail "source did not start"
}

# src_status: refresh $T/src.json
src_status() { "$GODWIT" status --api "$T/src.sock" --json >"$T/src.json" || fail "status failed"; }

# assert_source_alive_and_consistent: the VM runs on the source, progress
# advances, and (verify workload) every page is what the workload explains.
assert_source_alive_and_consistent() {
	src_status
	[ "$(jget "$T/src.json" "d.get('vm-status')")" = running ] || fail "source VM not running: $(cat "$T/src.json")"
	local p1 p2
	p1=$(jget "$T/src.json" "d.get('guest-progress-count', 0)")
	sleep 0.3
	src_status
	p2=$(jget "$T/src.json" "d.get('guest-progress-count', 0)")
	[ "$p2" -gt "$p1" ] || fail "source VM makes no progress ($p1 -> $p2)"
	"$GODWIT" check --api "$T/src.sock" >"$T/check.out" 2>&1 || fail "source memory check failed: $(cat "$T/check.out")"
}

# wait_dst_exit: the destination exits non-zero after a failed migration.
wait_dst_exit_failed() {
	local rc
	for _ in $(seq 1 100); do
		kill -0 "$DST_PID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$DST_PID"; rc=$?
	[ "$rc" != 0 ] || fail "destination exited 0 after a failed migration"
	# 137: killed by an injected fault (SIGKILL), which logs no mig_failed
	grep -q "mig_failed" "$T/dst.log" || [ "$rc" = 137 ] || fail "destination did not log mig_failed"
	grep -q "vm_resume where=destination" "$T/dst.log" && fail "destination resumed a partial VM"
	return 0
}
