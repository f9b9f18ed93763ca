#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Invariant: through the godwit binary and its API socket (unix: URLs only,
# no network, small VMs):
#  - demo completes, verifies and sees the guest progress on the destination,
#    and its --json is one object with the documented members;
#  - a destination that dies mid-migration leaves the source running its VM
#    (migrate exits 1, vm-status running, the workload still checks ok) and
#    the destination process does not exit 0;
#  - cancel leaves the source running; a setup parameter is refused while a
#    migration runs, a live one is applied (a throttled migration completes
#    after its bandwidth cap is lifted);
#  - after completion the source is postmigrate and refuses to migrate again;
#  - a destination dying after "go" leaves the source paused in status
#    unknown, and it refuses to migrate again;
#  - --exit-after-migrate makes the source exit 0 after a completed migration;
#  - bad command lines exit 2;
#  - converge-policy's default is cancel, so that converge-timeout-ms set by
#    its name stops a migration as --converge-timeout does.
# Waits are bounded; no duration is asserted.
set -u
G=${1:?usage: test_cli_e2e.sh PATH-TO-godwit PATH-TO-godwit-fi}
GFI=${2:?usage: test_cli_e2e.sh PATH-TO-godwit PATH-TO-godwit-fi}	# fault injection (GW_FAULT)
D=$(mktemp -d /tmp/gw-cli-e2e.XXXXXX)
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$D"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	for f in "$D"/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done
	exit 1
}

# Wait (at most ~60 s) until godwit status --json on $1 matches the ERE $2.
wait_status() {
	local i
	for i in $(seq 300); do
		"$G" status --api "$1" --json 2>/dev/null | grep -Eq "$2" && return 0
		sleep 0.2
	done
	return 1
}

# Start a destination listening on unix:$D/$1.mig with API $D/$1.sock
# ($DST_BIN instead of godwit when set).
start_dst() {
	local name=$1; shift
	"${DST_BIN:-$G}" run --incoming "unix:$D/$name.mig" --api "$D/$name.sock" "$@" \
		>"$D/$name.out" 2>"$D/$name.err" &
	PIDS+=($!)
	DST_PID=$!
	local i
	for i in $(seq 100); do
		grep -q '^incoming unix:' "$D/$name.out" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "$name: no 'incoming' line"
}

# 1. demo, JSON report.
"$G" demo --memory 32M --fill mix --workload verify:rate=5000 --to "unix:$D/demo.mig" --json --keep-logs "$D/logs" \
	>"$D/demo.json" 2>"$D/demo.err" || fail "demo exited $?"
for m in '"status":"completed"' '"verified":true' '"guest-progress":true' \
	 '"source-vm-status":"postmigrate"' '"destination-vm-status":"running"' '"downtime":' \
	 '"ram":\{'; do
	grep -Eq "$m" "$D/demo.json" || fail "demo --json lacks $m: $(cat "$D/demo.json")"
done
[ "$(wc -l <"$D/demo.json")" -eq 1 ] || fail "demo --json is not one line"
[ -s "$D/logs/src.log" ] && [ -s "$D/logs/dst.log" ] || fail "demo --keep-logs wrote no logs"
echo "ok 1 demo"

# The source used by the next steps.
"$G" run --memory 32M --fill mix --workload verify:rate=5000 --api "$D/src.sock" 2>"$D/src.err" &
PIDS+=($!)
wait_status "$D/src.sock" '"vm-status":"running"' || fail "source did not start"

# 2. The destination dies in round 0: the source keeps its VM.
GW_FAULT=dst-round0:65536 DST_BIN=$GFI start_dst dst1
"$G" migrate --api "$D/src.sock" --to "unix:$D/dst1.mig" >"$D/m1.out" 2>&1 &&
	fail "migrate to a dying destination exited 0"
wait "$DST_PID"
rc=$?
[ $rc -ne 0 ] || fail "dying destination exited 0"
"$G" status --api "$D/src.sock" --json | grep -q '"vm-status":"running"' ||
	fail "source VM not running after a failed migration"
"$G" check --api "$D/src.sock" >/dev/null || fail "source workload check after failure"
echo "ok 2 destination fault: source keeps running (dst rc $rc)"

# 3. Cancel, and a setup parameter refused while running.
start_dst dst2
"$G" migrate --api "$D/src.sock" --to "unix:$D/dst2.mig" --max-bandwidth 256K --detach \
	>/dev/null || fail "migrate --detach"
wait_status "$D/src.sock" '"status":"(setup|active)"' || fail "migration did not start"
"$G" migrate --api "$D/src.sock" --set compress=zstd 2>/dev/null &&
	fail "setup parameter accepted while migrating"
"$G" migrate --api "$D/src.sock" --cancel >/dev/null || fail "cancel refused"
wait_status "$D/src.sock" '"status":"cancelled"' || fail "not cancelled"
"$G" status --api "$D/src.sock" --json | grep -q '"vm-status":"running"' ||
	fail "source VM not running after cancel"
wait "$DST_PID" && fail "destination of a cancelled migration exited 0"
echo "ok 3 cancel"

# 4. A live parameter lifts a bandwidth cap; then the source is postmigrate.
start_dst dst3
"$G" migrate --api "$D/src.sock" --to "unix:$D/dst3.mig" --max-bandwidth 256K --detach \
	>/dev/null || fail "migrate --detach"
wait_status "$D/src.sock" '"status":"(setup|active)"' || fail "migration did not start"
"$G" migrate --api "$D/src.sock" --max-bandwidth 0 >/dev/null || fail "live set refused"
wait_status "$D/src.sock" '"status":"(completed|failed|cancelled|unknown)"' ||
	fail "throttled migration did not end after lifting the cap"
"$G" status --api "$D/src.sock" --json | grep -q '"status":"completed"' || fail "not completed"
wait_status "$D/src.sock" '"vm-status":"postmigrate"' || fail "source not postmigrate"
wait_status "$D/dst3.sock" '"vm-status":"running"' || fail "destination not running"
"$G" check --api "$D/dst3.sock" >/dev/null || fail "destination workload check"
"$G" migrate --api "$D/src.sock" --to "unix:$D/dst3.mig" 2>/dev/null &&
	fail "a postmigrate source migrated again"
"$G" quit --api "$D/dst3.sock" || fail "quit"
wait "$DST_PID" || fail "completed destination exited $? after quit"
echo "ok 4 live set, postmigrate"

# 5. --exit-after-migrate.
"$G" run --memory 16M --fill text --api "$D/src2.sock" --exit-after-migrate 2>"$D/src2.err" &
SRC2=$!
PIDS+=($SRC2)
wait_status "$D/src2.sock" '"vm-status":"running"' || fail "source 2 did not start"
start_dst dst4
"$G" migrate --api "$D/src2.sock" --to "unix:$D/dst4.mig" --detach >/dev/null || fail "migrate 5"
wait "$SRC2" || fail "source with --exit-after-migrate exited $?"
echo "ok 5 exit-after-migrate"

# 6. The destination dies after go: outcome unknown, the source stays paused
#    and refuses another migration (two copies must never run).
"$G" run --memory 16M --fill mix --api "$D/src3.sock" 2>"$D/src3.err" &
PIDS+=($!)
wait_status "$D/src3.sock" '"vm-status":"running"' || fail "source 3 did not start"
GW_FAULT=dst-after-go DST_BIN=$GFI start_dst dst5
"$G" migrate --api "$D/src3.sock" --to "unix:$D/dst5.mig" >/dev/null 2>&1 &&
	fail "migration with a destination dying after go exited 0"
wait "$DST_PID" && fail "destination dying after go exited 0"
"$G" status --api "$D/src3.sock" --json | grep -q '"status":"unknown"' || fail "status not unknown"
"$G" status --api "$D/src3.sock" --json | grep -q '"vm-status":"paused"' || fail "source not paused"
start_dst dst6
"$G" migrate --api "$D/src3.sock" --to "unix:$D/dst6.mig" >/dev/null 2>&1 &&
	fail "a source in the unknown state migrated again"
"$G" quit --api "$D/dst6.sock"
echo "ok 6 unknown outcome: source stays paused"

# 7. Usage errors.
for args in "run --nope" "run --memory 12Q" "migrate --api $D/x" "status" "demo --vcpus 0" \
	    "migrate --api $D/x --compress brotli --to unix:/x" "run --workload l2fwd" \
	    "run --workload echo --memory 16M" "demo --workload l2fwd"; do
	# shellcheck disable=SC2086
	"$G" $args >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "'godwit $args' exited $rc, want 2"
done
echo "ok 7 usage errors"

# 8. One parameter, one behaviour: the timeout's policy defaults to cancel.
"$G" params --json | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["converge-policy"]["default"] != 1)' ||
	fail "converge-policy's default is not cancel"
"$G" params | grep -Eq '^  converge-policy +live +[a-z|-]+ +cancel ' || fail "godwit params does not show cancel"
echo "ok 8 converge-policy default"
echo "8 passed, 0 failed"
