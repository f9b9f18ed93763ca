#!/bin/bash
# nfv_move.sh BUILD [RUNS] [PPS]: what the wire alone costs a moving NIC,
# before any VM. gwpktgen sends PPS (default 20000) for 3 s to the stand-in
# (bench/tapecho) on the source host's gwtap0; after 1 s the stand-in is
# stopped (SIGSTOP: the pause), a new one opens the other host's gwtap0 and
# sends a RARP (the destination's resume and announce), then the old one is
# killed. The next run moves it back. One JSON line per run: gwpktgen's
# object plus "run", "from", "to" and "switch-ms" (SIGSTOP to the new
# stand-in's "ready", measured by this script: process start, the wait for
# the tap's bridge port, the RARP); then a table, min..max over the runs.
# mark-gap-ms is the move's gap (the mark is written just after the
# SIGSTOP); net-gap-ms, the run's longest, may be a stall of the generator
# itself (send-gap-ms says). switch-ms over-counts: it includes this
# script's polling for "ready".
# Needs root (namespaces); nice -n 10 is the caller's business.
set -u
build=${1:?usage: nfv_move.sh BUILD [RUNS] [PPS]}
runs=${2:-3}
pps=${3:-20000}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../tests/integration/nfv_topo.sh"
gen="$build/bench/gwpktgen" echo_bin="$build/bench/tapecho"
{ [ -x "$gen" ] && [ -x "$echo_bin" ]; } || { echo "nfv_move: build $build has no gwpktgen/tapecho" >&2; exit 1; }
nfv_available || { echo "nfv_move: cannot build the topology here (root, ip, /dev/net/tun)" >&2; exit 77; }
name="bm$$"
out=$(mktemp -d /tmp/gw-nfvmv.XXXXXX)
trap 'nfv_teardown "$name"; rm -rf "$out"' EXIT
nfv_setup "$name" --nics 1 || exit 1

# start_echo NS LABEL [--rarp]: prints the stand-in's pid once it is ready.
start_echo() {
	local ns=$1 label=$2; shift 2
	ip netns exec "$ns" "$echo_bin" --tap "$NFV_TAP0" --mac "$NFV_VM_MAC0" --seconds 600 "$@" \
		>"$out/$label.out" 2>"$out/$label.log" &
	local pid=$!
	for _ in $(seq 500); do	# at most 5 s
		grep -q '^tapecho ready' "$out/$label.out" 2>/dev/null && { echo "$pid"; return 0; }
		sleep 0.01
	done
	echo "nfv_move: tapecho $label: $(cat "$out/$label.log")" >&2
	return 1
}

here_ns=$NFV_SRC there_ns=$NFV_DST
cur=$(start_echo "$here_ns" echo0 --rarp) || exit 1
for run in $(seq "$runs"); do
	rm -f "$out/start" "$out/mark"
	ip netns exec "$NFV_GEN" "$gen" --iface "$NFV_GEN_IF" --dst-mac "$NFV_VM_MAC0" --pps "$pps" --seconds 3 \
		--start-file "$out/start" --mark-file "$out/mark" --json >"$out/r.json" 2>"$out/r.log" &
	gpid=$!
	for _ in $(seq 500); do [ -s "$out/start" ] && break; sleep 0.01; done
	sleep 1.2	# a whole second of rate before the move
	t_stop=$(date +%s%N)
	kill -STOP "$cur"
	: >"$out/mark"
	new=$(start_echo "$there_ns" "echo$run" --rarp) || { kill -KILL "$cur"; exit 1; }
	t_ready=$(date +%s%N)
	kill -KILL "$cur" 2>/dev/null
	wait "$cur" 2>/dev/null
	wait "$gpid" || { cat "$out/r.log" >&2; exit 1; }
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.update(run=int(sys.argv[2]), **{"from": sys.argv[3], "to": sys.argv[4], "switch-ms": int(sys.argv[5]) / 1e6}); print(json.dumps(d))' \
		"$out/r.json" "$run" "$here_ns" "$there_ns" "$((t_ready - t_stop))" | tee -a "$out/all.jsonl"
	cur=$new
	tmp=$here_ns here_ns=$there_ns there_ns=$tmp
done
kill -TERM "$cur" 2>/dev/null
python3 - "$out/all.jsonl" <<'EOF'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
def span(k, fmt="%.2f"):
    v = [r[k] for r in rs if r.get(k) is not None]
    return (fmt % min(v)) + ".." + (fmt % max(v)) + ("" if len(v) == len(rs) else " (%d of %d runs)" % (len(v), len(rs)))
print("runs %d at %d pps (gap resolution %.3f ms)" % (len(rs), rs[0]["pps"], rs[0]["gap-resolution-ms"]))
for k, f in [("mark-gap-ms", "%.2f"), ("net-gap-ms", "%.2f"), ("switch-ms", "%.2f"), ("send-gap-ms", "%.2f"), ("lost", "%d"), ("duplicated", "%d"),
             ("reordered", "%d"), ("corrupted", "%d"), ("send-late-max-ms", "%.2f"),
             ("forwarded-pps-before", "%.0f"), ("forwarded-pps-after", "%.0f")]:
    print("  %-22s %s" % (k, span(k, f)))
EOF
