#!/bin/bash
# Invariant: a recorded plain migration cannot be replayed. A migration is
# recorded through a relay (tests/integration/replay.py: every byte each
# connection of the source sent) and completes; the recording is then sent
# to a fresh destination with no source running: its data connections do
# not answer that destination's challenge and are refused with a reason,
# the destination's VM never runs, and the migration fails on it.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$T/rec"
relay_port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
start_dst tcp:127.0.0.1:0 --exit-after-migrate
python3 "$here/replay.py" record "$relay_port" "${DST_URL##*:}" "$T/rec" &
relay=$!
PIDS+=("$relay")
for _ in $(seq 1 100); do [ -f "$T/rec/ready" ] && break; sleep 0.05; done
start_src --memory 64M --fill mix --workload verify:rate=2000
"$GODWIT" migrate --api "$T/src.sock" --to "tcp:127.0.0.1:$relay_port" --channels 2 --json \
	>"$T/mig.json" 2>"$T/mig.err" || fail "the recorded migration failed: $(cat "$T/mig.err")"
[ "$(jget "$T/mig.json" "d['status']")" = completed ] || fail "recorded migration: $(cat "$T/mig.json")"
wait "$relay"
n=$(ls "$T/rec" | grep -c '^conn-')
[ "$n" = 3 ] || fail "recorded $n connections, not 3 (control and 2 data)"
# The replay, into a fresh destination nobody migrates to.
mv "$T/dst.log" "$T/dst1.log"
start_dst tcp:127.0.0.1:0 --exit-after-migrate --set io-timeout-ms=3000
python3 "$here/replay.py" replay "${DST_URL##*:}" "$T/rec" >"$T/replay.out" 2>&1
wait_dst_exit_failed
grep -q "does not answer this destination's challenge" "$T/dst.log" ||
	fail "no challenge refusal in the destination's log: $(grep -E 'refused|failed' "$T/dst.log" | head -5)"
grep -q "mig_done status=completed" "$T/dst.log" && fail "the replay completed a migration"
pass "replay: a recorded migration (3 connections, $(du -sk "$T/rec" | cut -f1) KiB) refused by a fresh destination: $(grep -m1 -o "reason=\"[^\"]*challenge[^\"]*\"" "$T/dst.log")"
