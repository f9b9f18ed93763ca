/* SPDX-License-Identifier: MIT */
/*
 * A TLS session's refusals in plain words (see net/tls.h, tls_int.h):
 * which check failed, on which side, what was expected. Called with the
 * session's lock held, from the handshake and from failed reads and
 * writes (tls.c).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include "net/tls_int.h"

static void time_text(const ASN1_TIME *tm, char *buf, size_t len)
{
	struct tm t;

	if (ASN1_TIME_to_tm(tm, &t) != 1 || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &t))
		snprintf(buf, len, "?");
}

/* "CN=x, DNS:a, DNS:b" of a certificate, for messages. */
static void cert_names(X509 *x, char *buf, size_t len)
{
	GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	char cn[GW_TLS_NAME_MAX] = "";
	size_t at;

	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
	at = (size_t)snprintf(buf, len, "CN=%s", cn[0] ? cn : "(none)");
	for (int i = 0; san && i < sk_GENERAL_NAME_num(san) && at < len; i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(san, i);

		if (g->type == GEN_DNS)
			at += (size_t)snprintf(buf + at, len - at, ", DNS:%.*s",
					       ASN1_STRING_length(g->d.dNSName),
					       (const char *)ASN1_STRING_get0_data(g->d.dNSName));
		else if (g->type == GEN_IPADD && ASN1_STRING_length(g->d.iPAddress) == 4) {
			const unsigned char *a = ASN1_STRING_get0_data(g->d.iPAddress);

			at += (size_t)snprintf(buf + at, len - at, ", IP:%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
		}
	}
	GENERAL_NAMES_free(san);
}

/*
 * OpenSSL's verification callback (handshake, lock held): remember the
 * certificate refused and why, for verify_failure() to say so; OpenSSL
 * keeps no peer certificate after a failed verification.
 */
int gw_tls_verify_cb(int ok, X509_STORE_CTX *xs)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct gw_tls *t = ssl ? SSL_get_ex_data(ssl, gw_tls_ex_index()) : NULL;
	X509 *x = X509_STORE_CTX_get0_cert(xs);
	int err = X509_STORE_CTX_get_error(xs);

	if (ok || !t || t->refused_err)
		return ok;
	t->refused_err = err;
	if (x) {
		cert_names(x, t->refused_names, sizeof(t->refused_names));
		time_text(err == X509_V_ERR_CERT_NOT_YET_VALID ? X509_get0_notBefore(x) : X509_get0_notAfter(x),
			  t->refused_when, sizeof(t->refused_when));
	}
	return ok;
}

/* The peer's certificate failed our verification: which check, and what it holds. */
static void verify_failure(struct gw_tls *t)
{
	long vr = t->refused_err ? t->refused_err : SSL_get_verify_result(t->ssl);
	const char *names = t->refused_names[0] ? t->refused_names : "no name", *when = t->refused_when;

	switch (vr) {
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		snprintf(t->err, sizeof(t->err), "the destination's certificate names %.160s, not '%.80s' "
			 "(the URL's host, or --tls-hostname)", names, t->expect);
		return;
	case X509_V_ERR_CERT_HAS_EXPIRED:
		snprintf(t->err, sizeof(t->err), "the %s's certificate (%s) expired on %s", gw_tls_peer_role(t), names, when);
		return;
	case X509_V_ERR_CERT_NOT_YET_VALID:
		snprintf(t->err, sizeof(t->err), "the %s's certificate (%s) is not valid before %s", gw_tls_peer_role(t),
			 names, when);
		return;
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
	case X509_V_ERR_CERT_SIGNATURE_FAILURE:
		snprintf(t->err, sizeof(t->err), "the %s's certificate (%s) is not signed by a CA in our "
			 "ca-cert.pem", gw_tls_peer_role(t), names);
		return;
	case X509_V_ERR_CERT_REVOKED:
		snprintf(t->err, sizeof(t->err), "the %s's certificate (%s) is revoked (ca-crl.pem)", gw_tls_peer_role(t), names);
		return;
	default:
		snprintf(t->err, sizeof(t->err), "the %s's certificate (%s) was refused: %s", gw_tls_peer_role(t), names,
			 X509_verify_cert_error_string(vr));
	}
}

/* A TLS alert from the peer: it refused something of ours. */
int gw_tls_alert_failure(struct gw_tls *t, int alert)
{
	const char *what = alert == SSL_AD_CERTIFICATE_REQUIRED ? "certificate required" :
			   alert == SSL_AD_UNKNOWN_PSK_IDENTITY ? "unknown PSK identity" :
			   SSL_alert_desc_string_long(alert);
	const char *hint = "";

	switch (alert) {
	case SSL_AD_CERTIFICATE_EXPIRED:
		hint = t->ctx->own_cert_note[0] ? t->ctx->own_cert_note : "our certificate has expired";
		break;
	case SSL_AD_UNKNOWN_CA:
		hint = "it does not trust the CA that signed our certificate";
		break;
	case SSL_AD_CERTIFICATE_REQUIRED:
		hint = "it requires a certificate from this side (mutual TLS)";
		break;
	case SSL_AD_BAD_CERTIFICATE:
	case SSL_AD_UNSUPPORTED_CERTIFICATE:
	case SSL_AD_CERTIFICATE_REVOKED:
	case SSL_AD_CERTIFICATE_UNKNOWN:
		hint = t->ctx->own_cert_note[0] ? t->ctx->own_cert_note : "it refused our certificate";
		break;
	case SSL_AD_DECRYPT_ERROR:
	case SSL_AD_HANDSHAKE_FAILURE:
	case SSL_AD_ILLEGAL_PARAMETER:
		hint = t->ctx->psk_mode ? "our pre-shared key or identity does not match its --tls-psk" :
			"no common way to authenticate";
		break;
	case SSL_AD_PROTOCOL_VERSION:
		hint = "it does not speak TLS 1.3";
		break;
	default:
		break;
	}
	snprintf(t->err, sizeof(t->err), "the %s refused the TLS session (alert: %s)%s%s", gw_tls_peer_role(t), what,
		 hint[0] ? ": " : "", hint);
	return alert == SSL_AD_PROTOCOL_VERSION ? -EPROTO : -EACCES;
}

/* SSL_ERROR_SSL: OpenSSL's queue says what. -EACCES (a refusal), -EPROTO. */
static int ssl_failure(struct gw_tls *t)
{
	unsigned long e = ERR_peek_last_error();
	int reason = ERR_GET_REASON(e);
	char buf[160];

	if (reason > SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
		ERR_clear_error();
		return gw_tls_alert_failure(t, reason - SSL_AD_REASON_OFFSET);
	}
	switch (reason) {
	case SSL_R_CERTIFICATE_VERIFY_FAILED:
		verify_failure(t);
		ERR_clear_error();
		return -EACCES;
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
		snprintf(t->err, sizeof(t->err), "the source presented no certificate (mutual TLS: it needs "
			 "client-cert.pem and client-key.pem in its --tls-creds)");
		ERR_clear_error();
		return -EACCES;
	case SSL_R_UNSUPPORTED_PROTOCOL:
		snprintf(t->err, sizeof(t->err), "the %s does not offer TLS 1.3 (the only version accepted)",
			 gw_tls_peer_role(t));
		ERR_clear_error();
		return -EPROTO;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_RECORD_LENGTH_MISMATCH:
	case SSL_R_HTTP_REQUEST:
		if (t->ctx->role == GW_TLS_CLIENT && t->nr_first == 4 && !memcmp(t->first, "GWM1", 4))
			snprintf(t->err, sizeof(t->err), "the destination answered without TLS: it was started "
				 "without --tls-creds or --tls-psk");
		else if (t->ctx->role == GW_TLS_CLIENT)
			snprintf(t->err, sizeof(t->err), "the destination does not speak TLS: its answer is "
				 "neither TLS nor godwit's protocol (an HTTP or other server?); check the URL");
		else
			snprintf(t->err, sizeof(t->err), "the %s does not speak TLS", gw_tls_peer_role(t));
		ERR_clear_error();
		return -EPROTO;
	case SSL_R_UNEXPECTED_MESSAGE:
		/* Our own ClientHello back (record version 3.1, handshake): an echo. */
		if (t->ctx->role != GW_TLS_CLIENT || t->nr_first < 3 || memcmp(t->first, "\x16\x03\x01", 3))
			break;
		snprintf(t->err, sizeof(t->err), "the peer sent back our own TLS hello: it echoes what it "
			 "receives and is not a godwit destination; check the URL");
		ERR_clear_error();
		return -EPROTO;
	default:
		break;
	}
	if (t->psk_id[0] && !t->psk_known)
		snprintf(t->err, sizeof(t->err), "the source's pre-shared key identity '%s' is not in our --tls-psk file",
			 t->psk_id);
	else if (t->ctx->psk_mode && t->ctx->role == GW_TLS_SERVER && !t->psk_id[0])
		snprintf(t->err, sizeof(t->err), "the source offered no pre-shared key (it uses certificates, "
			 "--tls-creds?): this destination takes only --tls-psk");
	else if (t->ctx->psk_mode && (reason == SSL_R_BAD_PSK || reason == SSL_R_NO_SHARED_CIPHER ||
				      reason == SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM ||
				      reason == SSL_R_BINDER_DOES_NOT_VERIFY))
		snprintf(t->err, sizeof(t->err), "the %s's pre-shared key does not match ours", gw_tls_peer_role(t));
	else
		snprintf(t->err, sizeof(t->err), "TLS with the %s failed: %s", gw_tls_peer_role(t),
			 (ERR_error_string_n(e, buf, sizeof(buf)), buf));
	ERR_clear_error();
	return -EACCES;
}

/* After a failed SSL call (lock held): -EAGAIN with @events, or -errno with t->err. */
int gw_tls_op_failure(struct gw_tls *t, int ret, short *events, const char *during)
{
	int err = SSL_get_error(t->ssl, ret), e = errno;

	switch (err) {
	case SSL_ERROR_WANT_READ:
		*events = POLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*events = POLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		snprintf(t->err, sizeof(t->err), "the %s closed the connection%s", gw_tls_peer_role(t), during);
		return -ECONNRESET;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (e == EAGAIN || e == EWOULDBLOCK) {
			*events = POLLIN | POLLOUT;
			return -EAGAIN;
		}
		snprintf(t->err, sizeof(t->err), "the %s closed the connection%s%s%s", gw_tls_peer_role(t), during,
			 e && e != ECONNRESET && e != EPIPE ? ": " : "",
			 e && e != ECONNRESET && e != EPIPE ? strerror(e) : "");
		return -ECONNRESET;
	default:
		return ssl_failure(t);
	}
}
