# shellcheck shell=bash
# nfv_topo.sh: two hosts and a wire for the NFV tests and benchmark (issue
# 24, item 7): a source host, a destination host, a switch and a traffic
# generator, each a network namespace. Source it; do not run it.
#
#   . tests/integration/nfv_topo.sh
#   nfv_available || exit 77           # not root, no ip, no /dev/net/tun: skip
#   trap 'nfv_teardown demo' EXIT
#   nfv_setup demo --link 10gbit       # or --link none (default); --nics 1|2
#   ip netns exec "$NFV_SRC" godwit run --nic tap=$NFV_TAP0,mac=$NFV_VM_MAC0 ...
#   ip netns exec "$NFV_GEN" gwpktgen --iface "$NFV_GEN_IF" --dst-mac "$NFV_VM_MAC0" ...
#
#                 gw-NAME-gen
#                 eth0 (NFV_GEN_MAC, 10.96.X.100/24)
#                   |
#                 to-gen
#   gw-NAME-sw    [ br0 ]            the switch: a Linux bridge, no STP,
#                 to-src   to-dst    learning from source MACs (a RARP moves a MAC)
#                   |         |
#                 uplink0   uplink0
#   gw-NAME-src   [ br0 ]   [ br0 ]  gw-NAME-dst    each host bridges its
#                 gwtap0    gwtap0                  uplink and its VM's taps
#                 (gwtap1)  (gwtap1)                (two NICs: --nics 2)
#                 mig0 ==================== mig0    the migration link, a
#                 10.98.X.1/24    10.98.X.2/24      separate veth pair (tbf
#                                                   with --link RATE)
#
# The taps are persistent (`ip tuntap add mode tap`), owned by root, made
# in the host's namespace: the VMM, run there with `ip netns exec`, opens
# them by name (TUNSETIFF, IFF_TAP|IFF_NO_PI, a vnet header if it wants
# one). A tap has no carrier until someone opens it, and the bridge does
# not forward to it before. The data wire carries no host addresses; only
# the generator has one (for a guest that wants to ARP).
#
# Invariants: everything lives inside the four namespaces we create;
# nothing touches the host's interfaces, routes or addresses. IPv6 is off
# inside them so the wire carries only what the tests send. Deleting the
# namespaces deletes every veth, bridge, tap and qdisc with them, so
# teardown is idempotent and safe after a half-finished setup; it first
# ends the processes still running inside those namespaces (the tests'
# own: the VMMs, the generator), which would otherwise keep them alive.
#
# After nfv_setup these are exported:
#   NFV_SRC NFV_DST NFV_SW NFV_GEN   namespace names (gw-NAME-{src,dst,sw,gen})
#   NFV_BR                           the bridge's name in sw, src and dst (br0)
#   NFV_SW_PORT_SRC/_DST/_GEN        the switch's ports (to-src, to-dst, to-gen)
#   NFV_UPLINK                       each host's port to the switch (uplink0)
#   NFV_TAP0 NFV_TAP1 NFV_TAPS       tap names in src and dst (gwtap0 gwtap1;
#                                    NFV_TAP1 empty with --nics 1)
#   NFV_VM_MAC0 NFV_VM_MAC1          MACs to give the guest's NICs
#   NFV_GEN_IF NFV_GEN_MAC NFV_GEN_ADDR  the generator's interface, MAC, IPv4
#   NFV_MIG_IF NFV_SRC_ADDR NFV_DST_ADDR  the migration link and its addresses
#   NFV_LINK                         the migration link's rate, or none
. "$(dirname "${BASH_SOURCE[0]}")/netns.sh"

NFV_BR=br0
NFV_UPLINK=uplink0
NFV_SW_PORT_SRC=to-src
NFV_SW_PORT_DST=to-dst
NFV_SW_PORT_GEN=to-gen
NFV_GEN_IF=eth0
NFV_MIG_IF=mig0

# nfv_available: 0 if we can build the topology here (root, ip, a tun
# device, namespaces with a bridge and a tap), 1 otherwise.
nfv_available() {
	local probe="gw-nfvprobe-$$" ok=0

	[ "$(id -u)" = 0 ] || return 1
	command -v ip >/dev/null 2>&1 || return 1
	[ -c /dev/net/tun ] || return 1
	ip netns add "$probe" >/dev/null 2>&1 || return 1
	ip -n "$probe" link add br0 type bridge >/dev/null 2>&1 || ok=1
	ip -n "$probe" tuntap add mode tap name gwtap0 >/dev/null 2>&1 || ok=1
	ip netns delete "$probe" >/dev/null 2>&1
	return $ok
}

# The namespace's sysctls, before any interface: no IPv6 chatter.
nfv__quiet() {
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
		net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
	ip -n "$1" link set lo up
}

nfv__bridge() {	# nfv__bridge NS: a bridge without STP, up at once
	ip -n "$1" link add "$NFV_BR" type bridge stp_state 0 forward_delay 0 mcast_snooping 0 &&
		ip -n "$1" link set "$NFV_BR" up
}

# nfv_setup NAME [--link RATE|none] [--nics 1|2] [--subnet X]
nfv_setup() {
	local name="${1:-}" link=none nics=2 x="" tbf ns side port t
	shift || true
	while [ $# -gt 0 ]; do
		case "$1" in
		--link) link="${2:-}"; shift 2 ;;
		--nics) nics="${2:-}"; shift 2 ;;
		--subnet) x="${2:-}"; shift 2 ;;
		*) echo "nfv_setup: unknown option '$1'" >&2; return 2 ;;
		esac
	done
	if [ -z "$name" ]; then
		echo "nfv_setup: usage: nfv_setup NAME [--link RATE|none] [--nics 1|2] [--subnet X]" >&2
		return 2
	fi
	case "$nics" in 1|2) ;; *) echo "nfv_setup: --nics 1 or 2" >&2; return 2 ;; esac
	case "$link" in 10g) link=10gbit ;; 1g) link=1gbit ;; esac
	[ -n "$x" ] || x=$(netns__subnet "$name")
	case "$x" in ''|*[!0-9]*) echo "nfv_setup: bad subnet '$x'" >&2; return 2 ;; esac
	if [ "$x" -lt 1 ] || [ "$x" -gt 254 ]; then
		echo "nfv_setup: subnet $x outside 1..254" >&2
		return 2
	fi
	if [ "$link" != none ]; then
		tbf=$(netns__tbf_args "$link") || return 2
	fi

	NFV_SRC="gw-$name-src" NFV_DST="gw-$name-dst" NFV_SW="gw-$name-sw" NFV_GEN="gw-$name-gen"
	NFV_TAP0=gwtap0 NFV_TAP1="" NFV_TAPS=gwtap0
	[ "$nics" = 2 ] && NFV_TAP1=gwtap1 NFV_TAPS="gwtap0 gwtap1"
	NFV_VM_MAC0=52:54:00:67:77:00 NFV_VM_MAC1=52:54:00:67:77:01
	NFV_GEN_MAC=02:67:77:00:00:01 NFV_GEN_ADDR="10.96.$x.100"
	NFV_SRC_ADDR="10.98.$x.1" NFV_DST_ADDR="10.98.$x.2"
	NFV_LINK=$link
	export NFV_SRC NFV_DST NFV_SW NFV_GEN NFV_BR NFV_UPLINK NFV_SW_PORT_SRC NFV_SW_PORT_DST \
		NFV_SW_PORT_GEN NFV_TAP0 NFV_TAP1 NFV_TAPS NFV_VM_MAC0 NFV_VM_MAC1 NFV_GEN_IF \
		NFV_GEN_MAC NFV_GEN_ADDR NFV_MIG_IF NFV_SRC_ADDR NFV_DST_ADDR NFV_LINK

	# Leftovers from a killed run would make "ip netns add" fail.
	nfv_teardown "$name"
	for ns in "$NFV_SW" "$NFV_GEN" "$NFV_SRC" "$NFV_DST"; do
		ip netns add "$ns" || { nfv_teardown "$name"; return 1; }
		nfv__quiet "$ns" || { nfv_teardown "$name"; return 1; }
	done
	# Every veth is created with both ends inside our namespaces: nothing
	# ever appears in the host's namespace.
	if ! { nfv__bridge "$NFV_SW" &&
	       ip link add "$NFV_SW_PORT_GEN" netns "$NFV_SW" type veth peer name "$NFV_GEN_IF" netns "$NFV_GEN" &&
	       ip -n "$NFV_GEN" link set "$NFV_GEN_IF" address "$NFV_GEN_MAC" &&
	       ip -n "$NFV_GEN" addr add "$NFV_GEN_ADDR/24" dev "$NFV_GEN_IF" &&
	       ip -n "$NFV_GEN" link set "$NFV_GEN_IF" up &&
	       ip -n "$NFV_SW" link set "$NFV_SW_PORT_GEN" master "$NFV_BR" up; }; then
		nfv_teardown "$name"
		return 1
	fi
	for side in src dst; do
		if [ $side = src ]; then ns=$NFV_SRC port=$NFV_SW_PORT_SRC; else ns=$NFV_DST port=$NFV_SW_PORT_DST; fi
		if ! { nfv__bridge "$ns" &&
		       ip link add "$port" netns "$NFV_SW" type veth peer name "$NFV_UPLINK" netns "$ns" &&
		       ip -n "$NFV_SW" link set "$port" master "$NFV_BR" up &&
		       ip -n "$ns" link set "$NFV_UPLINK" master "$NFV_BR" up; }; then
			nfv_teardown "$name"
			return 1
		fi
		for t in $NFV_TAPS; do
			if ! { ip -n "$ns" tuntap add mode tap name "$t" &&
			       ip -n "$ns" link set "$t" master "$NFV_BR" up; }; then
				nfv_teardown "$name"
				return 1
			fi
		done
	done
	if ! { ip link add "$NFV_MIG_IF" netns "$NFV_SRC" type veth peer name "$NFV_MIG_IF" netns "$NFV_DST" &&
	       ip -n "$NFV_SRC" addr add "$NFV_SRC_ADDR/24" dev "$NFV_MIG_IF" &&
	       ip -n "$NFV_DST" addr add "$NFV_DST_ADDR/24" dev "$NFV_MIG_IF" &&
	       ip -n "$NFV_SRC" link set "$NFV_MIG_IF" up &&
	       ip -n "$NFV_DST" link set "$NFV_MIG_IF" up; }; then
		nfv_teardown "$name"
		return 1
	fi
	if [ "$link" != none ]; then
		for ns in "$NFV_SRC" "$NFV_DST"; do
			# shellcheck disable=SC2086
			if ! ip -n "$ns" link set "$NFV_MIG_IF" up ||
			   ! ip netns exec "$ns" tc qdisc add dev "$NFV_MIG_IF" root tbf rate "$link" $tbf; then
				nfv_teardown "$name"
				return 1
			fi
		done
	fi
	return 0
}

# nfv_teardown NAME: end what still runs in the four namespaces (only our
# own processes can be in them), then delete them. Idempotent.
nfv_teardown() {
	local name="${1:-}" ns pids left

	[ -n "$name" ] || return 0
	for ns in "gw-$name-src" "gw-$name-dst" "gw-$name-sw" "gw-$name-gen"; do
		ip netns list 2>/dev/null | grep -q "^$ns\( \|$\)" || continue
		pids=$(ip netns pids "$ns" 2>/dev/null)
		if [ -n "$pids" ]; then
			# shellcheck disable=SC2086
			kill -TERM $pids 2>/dev/null
			for _ in $(seq 20); do	# at most 2 s, then KILL
				left=$(ip netns pids "$ns" 2>/dev/null)
				[ -z "$left" ] && break
				sleep 0.1
			done
			# shellcheck disable=SC2086
			[ -n "$left" ] && kill -KILL $left 2>/dev/null
		fi
		ip netns delete "$ns" 2>/dev/null || true
	done
	return 0
}

# nfv_fdb_port NAME MAC: the switch port on which the switch has learned
# MAC (empty if none): where the switch will send the guest's frames.
nfv_fdb_port() {
	local mac
	mac=$(printf '%s' "$2" | tr 'A-F' 'a-f')
	ip netns exec "gw-$1-sw" bridge fdb show br "$NFV_BR" 2>/dev/null |
		awk -v m="$mac" '$1 == m && $2 == "dev" { print $3; exit }'
}
