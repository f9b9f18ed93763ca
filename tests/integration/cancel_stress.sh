#!/bin/bash
# Invariant: a cancel arriving at any moment (during connect, handshake,
# channel setup, rounds or teardown) ends the migration cancelled or
# failed, never hangs or crashes the source, and leaves its VM running
# with memory its workload explains. 20 cancels at pseudo-random delays.
. "$(dirname "$0")/lib.sh"
seed=${GW_TEST_SEED:-$RANDOM}
RANDOM=$seed
echo "seed $seed (GW_TEST_SEED=$seed replays the delays)"
start_src --memory 64M --fill mix --workload verify --seed 3
for i in $(seq 1 20); do
	rm -f "$T/dst.out"
	start_dst "unix:$T/mig$i.sock"
	"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --channels $(( i % 4 + 1 )) \
		--max-bandwidth 4M --detach >/dev/null 2>"$T/mig.err" || fail "migrate $i: $(cat "$T/mig.err")"
	sleep "0.0$(( RANDOM % 10 ))"
	"$GODWIT" migrate --api "$T/src.sock" --cancel >/dev/null 2>&1	# may be over already
	for _ in $(seq 1 100); do
		src_status
		case "$(jget "$T/src.json" "d.get('status')")" in
		cancelled|failed) break ;;
		completed|unknown) fail "iteration $i: migration not cancelled" ;;
		esac
		sleep 0.05
	done
	case "$(jget "$T/src.json" "d.get('status')")" in
	cancelled|failed) ;;
	*) fail "iteration $i: still $(jget "$T/src.json" "d.get('status')") after 5 s" ;;
	esac
	kill -9 "$DST_PID" 2>/dev/null
	wait "$DST_PID" 2>/dev/null
done
assert_source_alive_and_consistent
pass "20 cancels at random points: source running and consistent"
