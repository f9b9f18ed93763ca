/* SPDX-License-Identifier: MIT */
/*
 * TLS credentials (see net/tls.h): QEMU's x509 directory layout
 *   ca-cert.pem                   the CA(s) that sign the peer's certificate
 *   ca-crl.pem                    optional: revoked certificates
 *   server-cert.pem, server-key.pem   the destination's
 *   client-cert.pem, client-key.pem   the source's
 * or a pre-shared key file, QEMU's keys.psk: lines "identity:hexkey".
 * Everything is checked here, before a connection is made, and every
 * refusal names the file and what is wrong with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <godwit/log.h>
#include "net/tls_int.h"

/* AES-GCM first: the CPU has AES instructions; ChaCha20 for those without. */
#define GW_TLS_CIPHERSUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
/* Several records per read(): fewer system calls on the data channels. */
#define GW_TLS_READ_BUFFER_BYTES (256u << 10)

bool gw_tls_config_on(const struct gw_tls_config *cfg)
{
	return cfg && (cfg->creds_dir[0] || cfg->psk_file[0]);
}

const char *gw_tls_ctx_mode(const struct gw_tls_ctx *ctx)
{
	return ctx->psk_mode ? "psk" : "x509";
}

/* OpenSSL's first queued error as text, the queue emptied. */
static const char *ossl_err(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (!e)
		snprintf(buf, len, "unknown error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

/* DIR/NAME, which must be a readable file. 0, or -errno with @why. */
static int creds_file(const char *dir, const char *name, char *path, size_t path_len,
		      char *why, size_t why_len)
{
	struct stat st;

	if ((size_t)snprintf(path, path_len, "%s/%s", dir, name) >= path_len) {
		snprintf(why, why_len, "--tls-creds %s: path too long", dir);
		return -ENAMETOOLONG;
	}
	if (stat(path, &st)) {
		int e = errno;

		snprintf(why, why_len, "--tls-creds %s: %s: %s", dir, name, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "--tls-creds %s: %s is not a file", dir, name);
		return -EINVAL;
	}
	return 0;
}

/* Our own certificate outside its validity: the peer will refuse it; say so with the refusal. */
static void own_cert_dates(struct gw_tls_ctx *c, const char *name)
{
	X509 *x = SSL_CTX_get0_certificate(c->ssl_ctx);

	if (!x)
		return;
	if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
		snprintf(c->own_cert_note, sizeof(c->own_cert_note), "our %s has expired", name);
	else if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0)
		snprintf(c->own_cert_note, sizeof(c->own_cert_note), "our %s is not valid yet", name);
	if (c->own_cert_note[0])
		gw_log(GW_LOG_WARN, "mig", "tls_cert_dates", "file=%s problem=\"%s\"", name, c->own_cert_note);
}

static int load_crl(struct gw_tls_ctx *c, const char *dir, char *why, size_t why_len)
{
	char path[GW_TLS_PATH_MAX + 32], err[160];
	X509_STORE *store = SSL_CTX_get_cert_store(c->ssl_ctx);
	struct stat st;

	snprintf(path, sizeof(path), "%s/ca-crl.pem", dir);
	if (stat(path, &st))
		return 0;	/* optional */
	if (X509_STORE_load_file(store, path) != 1) {
		snprintf(why, why_len, "--tls-creds %s: ca-crl.pem: %s", dir, ossl_err(err, sizeof(err)));
		return -EINVAL;
	}
	X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
	return 0;
}

/* The x509 directory for @c->role. 0 or -errno with @why. */
static int load_x509(struct gw_tls_ctx *c, char *why, size_t why_len)
{
	const char *dir = c->cfg.creds_dir;
	const char *cert = c->role == GW_TLS_SERVER ? "server-cert.pem" : "client-cert.pem";
	const char *key = c->role == GW_TLS_SERVER ? "server-key.pem" : "client-key.pem";
	char path[GW_TLS_PATH_MAX + 32], err[160];
	int ret;

	ret = creds_file(dir, "ca-cert.pem", path, sizeof(path), why, why_len);
	if (ret)
		return ret;
	if (SSL_CTX_load_verify_locations(c->ssl_ctx, path, NULL) != 1) {
		snprintf(why, why_len, "--tls-creds %s: ca-cert.pem: %s", dir, ossl_err(err, sizeof(err)));
		return -EINVAL;
	}
	ret = creds_file(dir, cert, path, sizeof(path), why, why_len);
	if (ret == -ENOENT && c->role == GW_TLS_CLIENT) {
		/* Mutual TLS: the destination will refuse us, and say so; so do we. */
		gw_log(GW_LOG_WARN, "mig", "tls_no_client_cert", "dir=%s hint=\"the destination requires "
		       "client-cert.pem and client-key.pem (mutual TLS)\"", dir);
		snprintf(c->own_cert_note, sizeof(c->own_cert_note), "we have no client-cert.pem in %.100s", dir);
		SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_PEER, NULL);
		return load_crl(c, dir, why, why_len);
	}
	if (ret)
		return ret;
	if (SSL_CTX_use_certificate_chain_file(c->ssl_ctx, path) != 1) {
		snprintf(why, why_len, "--tls-creds %s: %s: %s", dir, cert, ossl_err(err, sizeof(err)));
		return -EINVAL;
	}
	ret = creds_file(dir, key, path, sizeof(path), why, why_len);
	if (ret)
		return ret;
	if (SSL_CTX_use_PrivateKey_file(c->ssl_ctx, path, SSL_FILETYPE_PEM) != 1) {
		snprintf(why, why_len, "--tls-creds %s: %s: %s", dir, key, ossl_err(err, sizeof(err)));
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(c->ssl_ctx) != 1) {
		snprintf(why, why_len, "--tls-creds %s: %s does not belong to %s", dir, key, cert);
		ERR_clear_error();
		return -EINVAL;
	}
	own_cert_dates(c, cert);
	ret = load_crl(c, dir, why, why_len);
	if (ret)
		return ret;
	/* Both ends present a certificate; the server refuses a client without one. */
	SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_PEER |
			   (c->role == GW_TLS_SERVER ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
	return 0;
}

static int hexval(int ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
	       ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* "identity:hexkey" into @k. 0, or -EINVAL with @why (which line, what is wrong). */
static int psk_line(const char *file, unsigned lineno, char *line, struct gw_tls_psk *k,
		    char *why, size_t why_len)
{
	char *colon = strchr(line, ':'), *hex;
	size_t n;

	if (!colon || colon == line || (size_t)(colon - line) >= sizeof(k->identity)) {
		snprintf(why, why_len, "--tls-psk %s: line %u is not IDENTITY:HEXKEY", file, lineno);
		return -EINVAL;
	}
	*colon = 0;
	memcpy(k->identity, line, (size_t)(colon - line) + 1);
	hex = colon + 1;
	n = strlen(hex);
	if (n < 32 || n % 2 || n / 2 > sizeof(k->key)) {
		snprintf(why, why_len, "--tls-psk %s: line %u: the key must be 16 to %zu bytes in hex (got %zu digits)",
			 file, lineno, sizeof(k->key), n);
		return -EINVAL;
	}
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			snprintf(why, why_len, "--tls-psk %s: line %u: the key is not hexadecimal", file, lineno);
			return -EINVAL;
		}
		k->key[i] = (unsigned char)(hi << 4 | lo);
	}
	k->key_len = n / 2;
	return 0;
}

/* The keys file. 0 or -errno with @why. */
static int load_psk(struct gw_tls_ctx *c, char *why, size_t why_len)
{
	const char *file = c->cfg.psk_file;
	FILE *f = fopen(file, "re");
	char line[GW_TLS_NAME_MAX + 2 * GW_TLS_PSK_MAX_KEY_BYTES + 8];
	unsigned lineno = 0;
	struct stat st;
	int ret = 0;

	if (!f) {
		int e = errno;

		snprintf(why, why_len, "--tls-psk %s: %s", file, strerror(e));
		return -e;
	}
	if (!fstat(fileno(f), &st) && (st.st_mode & 077))
		gw_log(GW_LOG_WARN, "mig", "tls_psk_mode", "file=%s mode=%03o hint=\"other users can read the keys\"",
		       file, (unsigned)(st.st_mode & 0777));
	while (!ret && fgets(line, sizeof(line), f)) {
		lineno++;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		if (c->nr_keys == GW_TLS_PSK_MAX_KEYS) {
			snprintf(why, why_len, "--tls-psk %s: more than %d keys", file, GW_TLS_PSK_MAX_KEYS);
			ret = -EINVAL;
			break;
		}
		ret = psk_line(file, lineno, line, &c->keys[c->nr_keys], why, why_len);
		if (!ret)
			c->nr_keys++;
	}
	fclose(f);
	if (!ret && !c->nr_keys) {
		snprintf(why, why_len, "--tls-psk %s: no key in the file", file);
		ret = -EINVAL;
	}
	return ret;
}

/* A TLS 1.3 session standing for key @k: what OpenSSL takes as an external PSK. */
static SSL_SESSION *psk_session(SSL *ssl, const struct gw_tls_psk *k)
{
	static const unsigned char aes128gcmsha256[] = { 0x13, 0x01 };
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcmsha256);
	SSL_SESSION *sess = SSL_SESSION_new();

	if (!sess || !cipher || !SSL_SESSION_set1_master_key(sess, k->key, k->key_len) ||
	    !SSL_SESSION_set_cipher(sess, cipher) || !SSL_SESSION_set_protocol_version(sess, TLS1_3_VERSION)) {
		SSL_SESSION_free(sess);
		return NULL;
	}
	return sess;
}

int gw_tls_psk_use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
			   SSL_SESSION **sess)
{
	const struct gw_tls_ctx *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	SSL_SESSION *s = psk_session(ssl, &c->keys[0]);

	*sess = NULL;
	if (!s)
		return 0;
	if (md && SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s)) != md) {
		SSL_SESSION_free(s);	/* not usable with this hash: go on without it */
		return 1;
	}
	*sess = s;
	*id = (const unsigned char *)c->keys[0].identity;
	*idlen = strlen(c->keys[0].identity);
	return 1;
}

int gw_tls_psk_find_session(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	const struct gw_tls_ctx *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

	*sess = NULL;
	for (unsigned i = 0; i < c->nr_keys; i++) {
		if (strlen(c->keys[i].identity) == idlen && !memcmp(c->keys[i].identity, id, idlen)) {
			gw_tls_note_psk_identity(ssl, id, idlen, true);
			*sess = psk_session(ssl, &c->keys[i]);
			return *sess ? 1 : 0;
		}
	}
	gw_tls_note_psk_identity(ssl, id, idlen, false);
	return 1;	/* no such identity: the handshake fails without a key */
}

static int ctx_setup(struct gw_tls_ctx *c, char *why, size_t why_len)
{
	SSL_CTX *sc = SSL_CTX_new(c->role == GW_TLS_SERVER ? TLS_server_method() : TLS_client_method());
	char err[160];

	if (!sc) {
		snprintf(why, why_len, "TLS: %s", ossl_err(err, sizeof(err)));
		return -ENOMEM;
	}
	c->ssl_ctx = sc;
	SSL_CTX_set_app_data(sc, c);
	if (!SSL_CTX_set_min_proto_version(sc, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(sc, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(sc, GW_TLS_CIPHERSUITES)) {
		snprintf(why, why_len, "TLS 1.3 not available: %s", ossl_err(err, sizeof(err)));
		return -EOPNOTSUPP;
	}
	/* An EOF without close_notify is a closed connection, as on a plain socket. */
	SSL_CTX_set_options(sc, SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(sc, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
			 SSL_MODE_AUTO_RETRY);
	/*
	 * No read-ahead in the handshake: the records after it are ours
	 * (tls_rec.c), and none may sit in OpenSSL's buffer. A session left to
	 * OpenSSL turns it on then (tls.c).
	 */
	SSL_CTX_set_default_read_buffer_len(sc, GW_TLS_READ_BUFFER_BYTES);
	SSL_CTX_set_keylog_callback(sc, gw_tls_keylog);
	/* One migration, no resumption: no tickets to send or keep. */
	SSL_CTX_set_session_cache_mode(sc, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(sc, 0);
	if (c->psk_mode) {
		SSL_CTX_set_verify(sc, SSL_VERIFY_NONE, NULL);
		if (c->role == GW_TLS_SERVER)
			SSL_CTX_set_psk_find_session_callback(sc, gw_tls_psk_find_session);
		else
			SSL_CTX_set_psk_use_session_callback(sc, gw_tls_psk_use_session);
		return 0;
	}
	return load_x509(c, why, why_len);
}

struct gw_tls_ctx *gw_tls_ctx_new(enum gw_tls_role role, const struct gw_tls_config *cfg,
				  char *why, size_t why_len)
{
	struct gw_tls_ctx *c;
	int ret;

	if (!gw_tls_config_on(cfg) || (cfg->creds_dir[0] && cfg->psk_file[0])) {
		snprintf(why, why_len, "TLS needs either --tls-creds DIR or --tls-psk FILE, not %s",
			 gw_tls_config_on(cfg) ? "both" : "neither");
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(why, why_len, "out of memory");
		return NULL;
	}
	c->role = role;
	c->cfg = *cfg;
	c->psk_mode = cfg->psk_file[0] != 0;
	ret = c->psk_mode ? load_psk(c, why, why_len) : 0;
	if (!ret)
		ret = ctx_setup(c, why, why_len);
	if (ret) {
		gw_tls_ctx_free(c);
		errno = -ret;
		return NULL;
	}
	return c;
}

void gw_tls_ctx_free(struct gw_tls_ctx *c)
{
	if (!c)
		return;
	SSL_CTX_free(c->ssl_ctx);
	OPENSSL_cleanse(c->keys, sizeof(c->keys));
	free(c);
}
