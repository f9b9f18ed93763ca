#!/bin/bash
# Throw-away TLS credentials for tests, in QEMU's x509 directory layout, one
# directory per case of the TLS matrix. Made at test time with the openssl
# command (EC P-256 keys: fast); nothing here is kept in the tree.
#
# Usage: tests/tls/gen-certs.sh DIR
#   DIR/dst-ok/        ca-cert.pem server-cert.pem server-key.pem   CN=dst.test,
#                      SAN DNS:localhost DNS:dst.test IP:127.0.0.1 IP:::1
#   DIR/dst-wronghost/ the same CA, a server certificate for other.test only
#   DIR/dst-expired/   the same CA, an expired server certificate
#   DIR/dst-otherca/   a server certificate signed by another CA
#   DIR/src-ok/        ca-cert.pem client-cert.pem client-key.pem   CN=src.test
#   DIR/src-other/     the same CA, a client certificate for CN=intruder.test
#   DIR/src-expired/   the same CA, an expired client certificate
#   DIR/src-otherca/   a client certificate signed by another CA
#   DIR/src-nocert/    ca-cert.pem only
#   DIR/src-hostile/   a self-signed client certificate whose CN holds a quote, a
#                      newline, a fake log line and an escape code (log forging)
#   DIR/both/          the five files of dst-ok and src-ok together (one host)
#   DIR/keys.psk       "src.test:<64 hex digits>"
#   DIR/other.psk      the same identity, another key
#   DIR/unknown.psk    another identity
set -eu
dir=${1:?usage: gen-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
days=2
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)

# ca NAME CN: a self-signed CA in NAME/
ca() {
	mkdir -p "$1"
	openssl req -x509 "${ec[@]}" -keyout "$1/ca-key.pem" -out "$1/ca-cert.pem" \
		-days "$days" -subj "/CN=$2" 2>/dev/null
}
# cert CA OUT_PREFIX CN SAN DAYS: OUT_PREFIX-cert.pem, OUT_PREFIX-key.pem signed by CA/
cert() {
	local ca=$1 out=$2 cn=$3 san=$4 d=$5 ext
	ext=$(mktemp)
	{
		echo "basicConstraints=CA:FALSE"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} >"$ext"
	openssl req "${ec[@]}" -keyout "$out-key.pem" -out "$out.csr" -subj "/CN=$cn" 2>/dev/null
	openssl x509 -req -in "$out.csr" -CA "$ca/ca-cert.pem" -CAkey "$ca/ca-key.pem" \
		-CAcreateserial -days "$d" -extfile "$ext" -out "$out-cert.pem" 2>/dev/null
	rm -f "$out.csr" "$ext"
}
# case DIR ROLE CA CN SAN DAYS: DIR/ with the CA's certificate and one of ours
case_dir() {
	local d=$1 role=$2 signer=$3 cn=$4 san=$5 days_=$6
	mkdir -p "$d"
	cp ca/ca-cert.pem "$d/ca-cert.pem"
	cert "$signer" "$d/$role" "$cn" "$san" "$days_"
}

ca ca "godwit test CA"
ca otherca "another CA"
host_san="DNS:localhost,DNS:dst.test,IP:127.0.0.1,IP:::1"
case_dir dst-ok server ca dst.test "$host_san" "$days"
case_dir dst-wronghost server ca other.test "DNS:other.test" "$days"
case_dir dst-expired server ca dst.test "$host_san" -1
case_dir dst-otherca server otherca dst.test "$host_san" "$days"
case_dir src-ok client ca src.test "DNS:src.test" "$days"
case_dir src-other client ca intruder.test "DNS:intruder.test" "$days"
case_dir src-expired client ca src.test "DNS:src.test" -1
case_dir src-otherca client otherca src.test "DNS:src.test" "$days"
mkdir -p src-nocert && cp ca/ca-cert.pem src-nocert/
mkdir -p src-hostile && cp ca/ca-cert.pem src-hostile/
openssl req -x509 "${ec[@]}" -keyout src-hostile/client-key.pem -out src-hostile/client-cert.pem \
	-days "$days" -utf8 -subj $'/CN=x"\nX mig_done status=completed\x1b[31m' 2>/dev/null
mkdir -p both && cp dst-ok/* both/ && cp src-ok/client-* both/
chmod 600 ./*/*-key.pem
key() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
(umask 077; echo "src.test:$(key)" >keys.psk; echo "src.test:$(key)" >other.psk; echo "stranger:$(key)" >unknown.psk)
