#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Invariant: what godwit says when a migration cannot start is what happened,
# in the user's terms, and what to do; sizes as the options take them, option
# names as the user types them; the source keeps running its VM. Through the
# binary, one source, against:
#  - an echo server: "not a godwit destination", it echoes; no "expected
#    HELLO_ACK, got HELLO";
#  - an HTTP-like server that answers at once: "not a godwit frame";
#  - a server that accepts and stays silent (io-timeout-ms=500): it did not
#    answer within 500 ms (io-timeout-ms), not a godwit destination;
#  - the echo and HTTP-like servers again with --tls-creds (skipped without
#    openssl): our own TLS hello came back (an echo), or no TLS at all; no
#    OpenSSL error code;
#  - a destination made with --memory 16M, the source 32M: "--memory 16M",
#    "--memory 32M", no byte counts;
#  - a destination with --max-memory 16M: "32M", "16M", max-memory-bytes
#    and --max-memory named;
#  - a KVM destination (skipped without /dev/kvm) for a soft source:
#    "--accel soft", "migrate from a KVM source".
# Usage: test_cli_words.sh PATH-TO-godwit [--list SOURCE_DIR]
#   --list: print every error text the CLI and the engine can print (the
#   format strings of cli_error/cli_usage_error/gw_fail/snprintf(why...)),
#   one a line with its file, for review; exit 0.
# Waits are bounded; no duration is asserted.
set -u
G=${1:?usage: test_cli_words.sh PATH-TO-godwit [--list SOURCE_DIR]}
if [ "${2:-}" = --list ]; then
	src=${3:?--list needs SOURCE_DIR}
	cd "$src" && grep -rnoE '(cli_error|cli_usage_error|gw_fail|kvm_why|refuse)\([^"]*"[^"]*"|snprintf\((why|reason|err), [a-z_]+, "[^"]*"' \
		tools src vmm --include=*.c | sed -E 's/:[0-9]+:/: /'
	exit 0
fi
D=$(mktemp -d /tmp/gw-words.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A fake peer on 127.0.0.1: echo, http (answers at once) or silent. Prints its port to $D/$1.port.
fake_peer() {
	python3 - "$1" "$D/$1.port" <<'EOF' &
import socket, sys, threading
kind, portfile = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(portfile + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(portfile + ".tmp", portfile)
def serve(c):
    if kind == "http":
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    while True:
        d = c.recv(65536)
        if not d:
            break
        if kind == "echo":
            c.sendall(d)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
	PIDS+=($!)
	for _ in $(seq 100); do [ -s "$D/$1.port" ] && return 0; sleep 0.05; done
	fail "fake $1 server did not start"
}

# A destination: godwit run --incoming tcp:127.0.0.1:0 ARGS; sets DST_URL.
start_dst() {
	local name=$1; shift
	"$G" run --incoming tcp:127.0.0.1:0 --log-level warn "$@" >"$D/$name.out" 2>"$D/$name.err" &
	PIDS+=($!)
	for _ in $(seq 100); do
		DST_URL=$(sed -n 's/^incoming //p' "$D/$name.out" 2>/dev/null)
		[ -n "$DST_URL" ] && return 0
		sleep 0.1
	done
	fail "destination $name did not start: $(tail -3 "$D/$name.err")"
}

# migrate NAME URL [ARGS]: the source's migration fails; its error line in $D/NAME.error.
migrate_fails() {
	local name=$1 url=$2; shift 2
	"$G" migrate --api "$D/src.sock" --to "$url" --progress never "$@" >"$D/$name.mig" 2>&1 &&
		fail "$name: the migration completed"
	sed -n 's/^error: *//p' "$D/$name.mig" >"$D/$name.error"
	[ -s "$D/$name.error" ] || fail "$name: no error line: $(cat "$D/$name.mig")"
	grep -q '^source vm: *running' "$D/$name.mig" || fail "$name: the source's VM: $(cat "$D/$name.mig")"
	echo "$name: $(cat "$D/$name.error")"
}
says() { grep -qF -- "$2" "$D/$1.error" || fail "$1: does not say '$2': $(cat "$D/$1.error")"; }
never() { grep -qF -- "$2" "$D/$1.error" && fail "$1: says '$2': $(cat "$D/$1.error")"; return 0; }

"$G" run --accel soft --memory 32M --api "$D/src.sock" --log-level warn >"$D/src.out" 2>"$D/src.err" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$D/src.sock" ] && break; sleep 0.1; done
[ -S "$D/src.sock" ] || fail "source did not start: $(cat "$D/src.err")"

fake_peer echo
migrate_fails echo "tcp:127.0.0.1:$(cat "$D/echo.port")"
says echo "is not a godwit destination"
says echo "it echoes what it receives"
says echo "check the URL"
never echo "expected HELLO_ACK, got HELLO"

fake_peer http
migrate_fails http "tcp:127.0.0.1:$(cat "$D/http.port")"
says http "is not a godwit destination"
says http "not a godwit frame"
never http "malformed frame"

fake_peer silent
migrate_fails silent "tcp:127.0.0.1:$(cat "$D/silent.port")" --set io-timeout-ms=500
says silent "did not answer within 500 ms (io-timeout-ms)"
says silent "not a godwit destination"
never silent "peer silent"

if command -v openssl >/dev/null && "$G" tls-certs "$D/tls" >/dev/null 2>&1; then
	migrate_fails tls-echo "tcp:127.0.0.1:$(cat "$D/echo.port")" --tls-creds "$D/tls"
	says tls-echo "sent back our own TLS hello: it echoes what it receives"
	says tls-echo "not a godwit destination"
	never tls-echo "SSL routines"
	migrate_fails tls-http "tcp:127.0.0.1:$(cat "$D/http.port")" --tls-creds "$D/tls"
	says tls-http "does not speak TLS: its answer is neither TLS nor godwit's protocol"
else
	echo "tls: skipped (no openssl command)"
fi

start_dst small --accel soft --memory 16M
migrate_fails memory "$DST_URL"
says memory "the destination says:"
says memory "made with --memory 16M"
says memory "start it with --memory 32M"
never memory "33554432"
never memory "HELLO"

start_dst capped --accel soft --max-memory 16M
migrate_fails capped "$DST_URL"
says capped "the source's RAM is 32M"
says capped "accepts: 16M (max-memory-bytes; godwit run: --max-memory"
never capped "HELLO"

if [ -r /dev/kvm ] && [ -w /dev/kvm ] && "$G" run --help | grep -q kvm; then
	start_dst kvm --accel kvm
	migrate_fails kvm "$DST_URL"
	says kvm "the source is not a KVM VM"
	says kvm "start the destination with --accel soft, or migrate from a KVM source"
	never kvm "needs 2 RAM blocks"
else
	echo "kvm: skipped (no usable /dev/kvm)"
fi
echo "PASS: every refusal says what happened and what to do; the source runs on"
