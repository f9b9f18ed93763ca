# shellcheck shell=bash
# netns.sh: two network namespaces joined by a shaped veth pair, for
# cross-host tests and benchmarks on one machine. Source it; do not run it.
#
#   . tests/integration/netns.sh
#   netns_available || exit 77          # not root / no CAP_NET_ADMIN: skip
#   trap 'netns_teardown demo' EXIT
#   netns_setup demo 1gbit              # or 10gbit, or "none" for no shaping
#   ip netns exec "$NETNS_DST" iperf3 -s -B "$NETNS_DST_ADDR" ...
#
# netns_setup NAME RATE [SUBNET] creates gw-NAME-src and gw-NAME-dst, joined
# by a veth pair (veth0 on each side) with 10.99.X.1/24 (src) and 10.99.X.2/24
# (dst); X is SUBNET (1..254) or derived from NAME. Loopback is up in both.
# With RATE (tc rate syntax, e.g. 10gbit, 1gbit) each end's egress gets a
# token bucket filter, so both directions are shaped the same.
#
# Invariants: everything lives inside the two namespaces we create; nothing
# touches the host's interfaces, routes or addresses, and the only addresses
# are 10.99.X.1 and 10.99.X.2 inside them. Deleting the namespaces deletes the
# veth pair and the qdiscs with them, so teardown is one step per namespace
# and is safe to call twice or after a half-finished setup.
#
# After netns_setup these are set: NETNS_SRC, NETNS_DST (namespace names),
# NETNS_SRC_ADDR, NETNS_DST_ADDR (IPv4 addresses without prefix).

# Token bucket parameters for RATE, as "burst LATENCY" arguments.
# The bucket must hold at least what arrives in one timer tick (rate / HZ,
# man tc-tbf); with HZ as low as 100 that is 12.5 MB at 10 Gbit/s, and GSO
# hands veth packets of up to 64 KiB, which must fit in the bucket too. A
# larger bucket only allows a longer line-rate burst after an idle period,
# which is negligible next to a multi-second transfer. latency bounds the
# queue (limit = rate * latency + burst).
netns__tbf_args() {
	local rate="$1" bps burst

	case "$rate" in
	*gbit) bps=$(( ${rate%gbit} * 1000000000 )) ;;
	*mbit) bps=$(( ${rate%mbit} * 1000000 )) ;;
	*kbit) bps=$(( ${rate%kbit} * 1000 )) ;;
	*bit) bps=${rate%bit} ;;
	*) echo "netns_setup: rate '$rate': use N[gbit|mbit|kbit|bit]" >&2; return 1 ;;
	esac
	# rate / HZ with HZ = 100, in bytes, at least 128 KiB (two GSO packets).
	burst=$(( bps / 8 / 100 ))
	[ "$burst" -ge 131072 ] || burst=131072
	echo "burst $burst latency 20ms"
}

# netns_available: 0 if we may create network namespaces, 1 otherwise.
netns_available() {
	local probe="gw-probe-$$"

	command -v ip >/dev/null 2>&1 || return 1
	ip netns add "$probe" >/dev/null 2>&1 || return 1
	ip netns delete "$probe" >/dev/null 2>&1
	return 0
}

# Third octet for NAME: stable, in 1..254, so two suites with different names
# rarely collide (pass SUBNET explicitly when running several at once).
netns__subnet() {
	local sum

	sum=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
	echo $(( sum % 254 + 1 ))
}

netns_setup() {
	local name="$1" rate="${2:-none}" x="${3:-}" tbf ns

	if [ -z "$name" ]; then
		echo "netns_setup: usage: netns_setup NAME RATE [SUBNET]" >&2
		return 2
	fi
	[ -n "$x" ] || x=$(netns__subnet "$name")
	case "$x" in
	''|*[!0-9]*) echo "netns_setup: bad subnet '$x'" >&2; return 2 ;;
	esac
	if [ "$x" -lt 1 ] || [ "$x" -gt 254 ]; then
		echo "netns_setup: subnet $x outside 1..254" >&2
		return 2
	fi
	NETNS_SRC="gw-$name-src"
	NETNS_DST="gw-$name-dst"
	NETNS_SRC_ADDR="10.99.$x.1"
	NETNS_DST_ADDR="10.99.$x.2"
	export NETNS_SRC NETNS_DST NETNS_SRC_ADDR NETNS_DST_ADDR

	# Leftovers from a killed run would make "ip netns add" fail.
	netns_teardown "$name"
	ip netns add "$NETNS_SRC" || return 1
	ip netns add "$NETNS_DST" || { netns_teardown "$name"; return 1; }
	# Create both ends directly inside the namespaces: nothing ever
	# appears in the host's namespace.
	if ! ip link add veth0 netns "$NETNS_SRC" type veth peer name veth0 netns "$NETNS_DST"; then
		netns_teardown "$name"
		return 1
	fi
	if ! { ip -n "$NETNS_SRC" link set lo up &&
	       ip -n "$NETNS_DST" link set lo up &&
	       ip -n "$NETNS_SRC" addr add "$NETNS_SRC_ADDR/24" dev veth0 &&
	       ip -n "$NETNS_DST" addr add "$NETNS_DST_ADDR/24" dev veth0 &&
	       ip -n "$NETNS_SRC" link set veth0 up &&
	       ip -n "$NETNS_DST" link set veth0 up; }; then
		netns_teardown "$name"
		return 1
	fi
	if [ "$rate" != none ] && [ -n "$rate" ]; then
		tbf=$(netns__tbf_args "$rate") || { netns_teardown "$name"; return 2; }
		for ns in "$NETNS_SRC" "$NETNS_DST"; do
			# shellcheck disable=SC2086
			if ! ip netns exec "$ns" tc qdisc add dev veth0 root tbf rate "$rate" $tbf; then
				netns_teardown "$name"
				return 1
			fi
		done
	fi
	return 0
}

# netns_teardown NAME: remove both namespaces (and with them the veth pair and
# qdiscs). Processes still running inside keep a namespace alive until they
# exit, so callers stop their servers first.
netns_teardown() {
	local name="$1" ns

	[ -n "$name" ] || return 0
	for ns in "gw-$name-src" "gw-$name-dst"; do
		if ip netns list 2>/dev/null | grep -q "^$ns\( \|$\)"; then
			ip netns delete "$ns" 2>/dev/null || true
		fi
	done
	return 0
}

# netns_iperf NAME SECONDS: measure the link src -> dst with iperf3 and print
# the receiver's rate in bits per second (an integer). Needs iperf3.
netns_iperf() {
	local name="$1" secs="${2:-3}" port=5299 pid out rc=0

	command -v iperf3 >/dev/null 2>&1 || return 1
	ip netns exec "gw-$name-dst" iperf3 -s -1 -B "$NETNS_DST_ADDR" -p "$port" >/dev/null 2>&1 &
	pid=$!
	# Wait until the server listens rather than sleeping a fixed time.
	for _ in $(seq 50); do
		ip netns exec "gw-$name-dst" ss -ltn 2>/dev/null | grep -q ":$port " && break
		sleep 0.1
	done
	out=$(ip netns exec "gw-$name-src" iperf3 -c "$NETNS_DST_ADDR" -p "$port" -t "$secs" -J 2>/dev/null) || rc=1
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ "$rc" = 0 ] || return 1
	printf '%s' "$out" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]))'
}
