#!/bin/bash
# nfv_standin.sh BUILD [RUNS] [RATES...]: the measurement's own limits on
# this machine, before any VM: gwpktgen in the generator's namespace sends
# through the switch and the source host's bridge to bench/tapecho (the
# guest's stand-in) on gwtap0 and back, RUNS times (default 3) at each rate
# (default 10000 20000 50000 100000 200000 400000 pps, 2 s each). One JSON
# line per run (gwpktgen's object plus "run"), then a table: per rate the
# achieved and forwarded rates and the loss, min..max over the runs. A rate
# is "sustained" when every run achieved 99% of it and lost under 0.1%.
# With NFV_GUEST=soft or kvm the frames go through a guest instead: `godwit
# run --accel NFV_GUEST --workload l2fwd --nic tap=gwtap0` (the guest's own
# driver, common/vnet_drv.c) in the source's namespace, and the table is
# that guest's forwarding rate.
# Needs root (namespaces); nice -n 10 is the caller's business.
set -u
build=${1:?usage: nfv_standin.sh BUILD [RUNS] [RATES...]}
runs=${2:-3}
shift 2 2>/dev/null || shift $#
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(10000 20000 50000 100000 200000 400000)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../tests/integration/nfv_topo.sh"
gen="$build/bench/gwpktgen" echo_bin="$build/bench/tapecho"
{ [ -x "$gen" ] && [ -x "$echo_bin" ]; } || { echo "nfv_standin: build $build has no gwpktgen/tapecho" >&2; exit 1; }
nfv_available || { echo "nfv_standin: cannot build the topology here (root, ip, /dev/net/tun)" >&2; exit 77; }
name="bs$$"
out=$(mktemp -d /tmp/gw-nfvsb.XXXXXX)
trap 'nfv_teardown "$name"; rm -rf "$out"' EXIT
nfv_setup "$name" --nics 1 || exit 1
if [ -n "${NFV_GUEST:-}" ]; then
	ip netns exec "$NFV_SRC" "$build/tools/godwit" run --accel "$NFV_GUEST" --memory 64M \
		--workload l2fwd --nic "tap=$NFV_TAP0,mac=$NFV_VM_MAC0" --api "$out/vm.sock" \
		>"$out/echo.out" 2>"$out/echo.log" &
	ready='guest_nics_ready\|vm_ready'
	log="$out/echo.log"
else
	ip netns exec "$NFV_SRC" "$echo_bin" --tap "$NFV_TAP0" --mac "$NFV_VM_MAC0" --seconds 900 \
		>"$out/echo.out" 2>"$out/echo.log" &
	ready='^tapecho ready'
	log="$out/echo.out"
fi
for _ in $(seq 100); do grep -q "$ready" "$log" 2>/dev/null && break; sleep 0.1; done
grep -q "$ready" "$log" || { echo "nfv_standin: the guest: $(cat "$out/echo.log")" >&2; exit 1; }
sleep 1	# the guest's NIC set up
for pps in "${rates[@]}"; do
	for run in $(seq "$runs"); do
		ip netns exec "$NFV_GEN" "$gen" --iface "$NFV_GEN_IF" --dst-mac "$NFV_VM_MAC0" --pps "$pps" \
			--seconds 2 --json >"$out/r.json" 2>"$out/r.log" || { cat "$out/r.log" >&2; exit 1; }
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["run"]=int(sys.argv[2]); print(json.dumps(d))' \
			"$out/r.json" "$run" | tee -a "$out/all.jsonl"
	done
done
python3 - "$out/all.jsonl" <<'EOF'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows.setdefault(d["pps"], []).append(d)
def span(v, fmt):
    return (fmt % min(v)) + ".." + (fmt % max(v))
print("%9s %21s %21s %17s %15s %s" % ("pps", "achieved", "forwarded", "lost %", "rtt p99 us", "sustained"))
for pps, rs in sorted(rows.items()):
    ach = [r["achieved-pps"] for r in rs]
    fwd = [r["forwarded-pps-before"] or 0 for r in rs]
    lost = [100.0 * r["lost"] / max(r["sent"], 1) for r in rs]
    p99 = [r["rtt-p99-us"] for r in rs]
    ok = all(r["achieved-pps"] >= 0.99 * pps and r["lost"] < 0.001 * r["sent"] for r in rs)
    print("%9d %21s %21s %17s %15s %s" % (pps, span(ach, "%.0f"), span(fwd, "%.0f"), span(lost, "%.2f"),
                                          span(p99, "%.0f"), "yes" if ok else "no"))
EOF
