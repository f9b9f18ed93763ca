#!/bin/bash
# Invariant: with every codec and 1, 2 or 4 channels, 1 GiB of --fill mix
# (with a small dirty working set at 2000 pages/s, slower than the slowest
# codec by far, so later rounds resend pages and it still converges on any
# machine) migrates
# completely: status completed, RAM digest verified, guest progress.
# Usage: codecs.sh CODEC CHANNELS
. "$(dirname "$0")/lib.sh"
codec=$1 channels=$2
"$GODWIT" demo --memory 1G --fill mix --workload dirty:ws=32M,pattern=byte,rate=2000 \
	--channels "$channels" --compress "$codec" --to tcp:127.0.0.1:0 --json --keep-logs "$T" \
	>"$T/out.json" || fail "demo exit $?"
[ "$(jget "$T/out.json" "d['status']")" = completed ] || fail "status"
[ "$(jget "$T/out.json" "d['verified']")" = True ] || fail "not verified"
[ "$(jget "$T/out.json" "d['guest-progress']")" = True ] || fail "no guest progress"
[ "$(jget "$T/out.json" "len(d['channel-bytes'])")" = "$channels" ] || fail "channel count"
if [ "$codec" != none ] && [ "$codec" != auto ]; then
	# Fixed codecs must actually compress the text-like half of the data.
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['ram']['compression-ratio'] > 1.3 else 1)" "$T/out.json" ||
		fail "no compression: ratio $(jget "$T/out.json" "d['ram']['compression-ratio']")"
fi
pass "$codec x$channels: $(jget "$T/out.json" "'%.0f ms, ratio %.2f, %d rounds' % (d['total-time'], d['ram']['compression-ratio'], d['rounds'])")"
