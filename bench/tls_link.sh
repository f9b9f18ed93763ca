#!/bin/bash
# Whether `auto` compression still chooses right through TLS: the same
# migration, plain and with mutual TLS, with --compress none and auto, over
# a shaped veth link between two network namespaces (both ends on this
# host). Runs are interleaved (plain and TLS alternate which goes first) and
# each prints its total time, the codecs auto used and the wire ratio; the
# summary gives the median [min, max] of each and auto's speed-up over none
# for plain and for TLS. Needs root (namespaces), openssl.
#
# Usage: bench/tls_link.sh [--rate 1gbit] [--runs 3] [--memory 1G] [--channels 2]
#                          [--godwit PATH]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GODWIT=$ROOT/build/tools/godwit
rate=1gbit runs=3 memory=1G channels=2
while [ $# -gt 0 ]; do
	case $1 in
	--rate) rate=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--memory) memory=$2; shift 2 ;;
	--channels) channels=$2; shift 2 ;;
	--godwit) GODWIT=$2; shift 2 ;;
	*) echo "usage: $0 [--rate R] [--runs N] [--memory SIZE] [--channels N] [--godwit PATH]" >&2; exit 2 ;;
	esac
done
. "$ROOT/tests/integration/netns.sh"
netns_available || { echo "tls_link: cannot create network namespaces (root needed)" >&2; exit 1; }
T=$(mktemp -d /tmp/gw-tlslink.XXXXXX)
name="tl$$"
cleanup() {
	kill $(jobs -p) 2>/dev/null
	wait 2>/dev/null
	netns_teardown "$name"
	rm -rf "$T"
}
trap cleanup EXIT
netns_setup "$name" "$rate" || exit 1
"$ROOT/tests/tls/gen-certs.sh" "$T/certs" >/dev/null 2>&1 || { echo "tls_link: cannot make certificates" >&2; exit 1; }

# one MODE CODEC: a migration with fresh processes; appends "MODE CODEC ms ratio codecs" to $T/res
one() {
	local mode=$1 codec=$2 d url i dpid spid ok=0 dtls=() mtls=()
	d=$(mktemp -d "$T/m.XXXX")
	if [ "$mode" = tls ]; then
		dtls=(--tls-creds "$T/certs/dst-ok")
		mtls=(--tls-creds "$T/certs/src-ok" --tls-hostname dst.test)
	fi
	ip netns exec "$NETNS_DST" "$GODWIT" run --incoming "tcp:$NETNS_DST_ADDR:0" --api "$d/dst.sock" \
		--accel soft --memory "$memory" --log-level warn "${dtls[@]}" >"$d/dst.out" 2>"$d/dst.log" &
	dpid=$!
	ip netns exec "$NETNS_SRC" "$GODWIT" run --api "$d/src.sock" --accel soft --memory "$memory" \
		--fill mix --workload idle --log-level warn >"$d/src.out" 2>"$d/src.log" &
	spid=$!
	for i in $(seq 600); do
		url=$(sed -n 's/^incoming //p' "$d/dst.out" | head -n1)
		[ -n "$url" ] && "$GODWIT" status --api "$d/src.sock" --json 2>/dev/null | grep -q '"running"' && break
		sleep 0.1
	done
	"$GODWIT" migrate --api "$d/src.sock" --to "$url" --channels "$channels" --compress "$codec" \
		--no-verify "${mtls[@]}" --json >"$d/mig.json" 2>"$d/mig.err"
	python3 - "$d/mig.json" "$mode" "$codec" >>"$T/res" <<'EOF' || ok=1
import json, sys
d = json.load(open(sys.argv[1]))
if d.get("status") != "completed":
    sys.exit("migration failed: %s" % d.get("error-desc"))
used = {}
for ch in d.get("channel-codecs", []):
    for k, v in ch.items():
        used[k] = used.get(k, 0) + v
tot = sum(used.values()) or 1
codecs = ",".join("%s:%.0f%%" % (k, 100.0 * v / tot) for k, v in sorted(used.items(), key=lambda x: -x[1]))
print(sys.argv[2], sys.argv[3], "%.1f" % d["total-time"], "%.2f" % d["ram"]["compression-ratio"], codecs)
EOF
	[ $ok = 0 ] && tail -n1 "$T/res"
	kill "$dpid" "$spid" 2>/dev/null
	wait "$dpid" "$spid" 2>/dev/null
	return $ok
}

echo "mode  codec  total-ms  ratio  codecs (share of the raw page bytes)"
for r in $(seq 1 "$runs"); do
	if [ $((r % 2)) = 1 ]; then order="plain tls"; else order="tls plain"; fi
	for m in $order; do
		for c in none auto; do
			one "$m" "$c" || exit 1
		done
	done
done
echo
python3 - "$T/res" "$rate" "$memory" "$channels" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("%s link, %s of mix, %s channels" % (sys.argv[2], sys.argv[3], sys.argv[4]))
med = {}
for m in ("plain", "tls"):
    for c in ("none", "auto"):
        v = [float(r[2]) for r in rows if r[0] == m and r[1] == c]
        med[(m, c)] = statistics.median(v)
        print("%-5s %-4s median %.0f ms [%.0f, %.0f]" % (m, c, med[(m, c)], min(v), max(v)))
for m in ("plain", "tls"):
    print("%-5s auto is %.2fx faster than none" % (m, med[(m, "none")] / med[(m, "auto")]))
EOF
