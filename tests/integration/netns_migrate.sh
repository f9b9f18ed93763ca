#!/bin/bash
# Invariant: across two network namespaces joined by a veth pair shaped to
# RATE (a "cross-host" link), a migration with CHANNELS channels and CODEC
# completes, verified, with guest progress on the destination; the
# destination listens on its own address only. Skips (77) where namespaces
# cannot be made. With a 4th argument "tls" both ends use mutual TLS
# (certificates made now; the source checks the name dst.test). Usage:
# netns_migrate.sh RATE CHANNELS CODEC [tls]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
rate=$1 channels=$2 codec=$3 tls=${4:-}
netns_available || skip "cannot create network namespaces (needs root / CAP_NET_ADMIN)"
name="it$$"
trap 'cleanup; netns_teardown "$name"' EXIT
netns_setup "$name" "$rate" || fail "netns_setup"
DST_WRAP="ip netns exec $NETNS_DST"
SRC_WRAP="ip netns exec $NETNS_SRC"
dst_tls=() mig_tls=()
if [ "$tls" = tls ]; then
	"$(dirname "$0")/../tls/gen-certs.sh" "$T/certs" || skip "cannot make certificates (openssl)"
	dst_tls=(--tls-creds "$T/certs/dst-ok")
	mig_tls=(--tls-creds "$T/certs/src-ok" --tls-hostname dst.test)
fi
start_dst "tcp:$NETNS_DST_ADDR:0" "${dst_tls[@]}"
start_src --memory 256M --fill mix --workload verify:ws=16M,rate=2000
"$GODWIT" migrate --api "$T/src.sock" --to "$DST_URL" --channels "$channels" --compress "$codec" \
	"${mig_tls[@]}" --json >"$T/mig.json" 2>"$T/mig.err" || fail "migrate: $(cat "$T/mig.err")"
if [ "$tls" = tls ]; then
	[ "$(jget "$T/mig.json" "d['tls']['mode']")" = x509 ] || fail "not over TLS: $(jget "$T/mig.json" "d['tls']")"
fi
[ "$(jget "$T/mig.json" "d['status']")" = completed ] || fail "status"
[ "$(jget "$T/mig.json" "d['verified']")" = True ] || fail "not verified"
"$GODWIT" status --api "$T/dst.sock" --json >"$T/d1.json" || fail "dst status"
sleep 0.3
"$GODWIT" status --api "$T/dst.sock" --json >"$T/d2.json" || fail "dst status"
[ "$(jget "$T/d1.json" "d.get('vm-status')")" = running ] || fail "destination VM not running"
p1=$(jget "$T/d1.json" "d.get('guest-progress-count', 0)")
p2=$(jget "$T/d2.json" "d.get('guest-progress-count', 0)")
[ "$p2" -gt "$p1" ] || fail "no guest progress on the destination"
[ "$(jget "$T/d2.json" "d.get('verify-check')")" = ok ] || fail "post-migration check: $(jget "$T/d2.json" "d.get('verify-check')")"
pass "$rate x$channels $codec${tls:+ tls}: $(jget "$T/mig.json" "'%.0f ms, downtime %.3f ms, ratio %.2f' % (d['total-time'], d['downtime'], d['ram']['compression-ratio'])")"
