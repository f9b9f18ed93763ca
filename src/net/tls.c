/* SPDX-License-Identifier: MIT */
/*
 * One TLS session per socket (see net/tls.h): the handshake, reads and
 * writes on a non-blocking socket, the peer's identity. Every refusal is
 * turned into plain words by tls_why.c: which check failed, on which side,
 * what was expected.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include "net/tls_int.h"



static int ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

static void ex_init(void)
{
	ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

int gw_tls_ex_index(void)
{
	pthread_once(&ex_once, ex_init);
	return ex_index;
}


/* Called from the handshake, lock held. */
void gw_tls_note_psk_identity(SSL *ssl, const unsigned char *id, size_t idlen, bool known)
{
	struct gw_tls *t = SSL_get_ex_data(ssl, gw_tls_ex_index());
	size_t n;

	if (!t)
		return;
	n = idlen < sizeof(t->psk_id) - 1 ? idlen : sizeof(t->psk_id) - 1;
	for (size_t i = 0; i < n; i++)
		t->psk_id[i] = id[i] >= 0x20 && id[i] < 0x7f && id[i] != '"' ? (char)id[i] : '?';
	t->psk_id[n] = 0;
	t->psk_known = known;
}

/* Client: remember the first bytes the server sent: a plain godwit answer starts "GWM1". */
static long first_bytes_cb(BIO *b, int oper, const char *argp, size_t len, int argi, long argl,
			   int ret, size_t *processed)
{
	struct gw_tls *t = (struct gw_tls *)BIO_get_callback_arg(b);

	(void)len, (void)argi, (void)argl;
	if (oper == (BIO_CB_READ | BIO_CB_RETURN) && ret > 0 && processed && t) {
		for (size_t i = 0; i < *processed && t->nr_first < sizeof(t->first); i++)
			t->first[t->nr_first++] = (unsigned char)argp[i];
	}
	return ret;
}

/* What the client checks the server's certificate against: a DNS name or an address. */
static int set_expected_name(struct gw_tls *t, const char *host, char *why, size_t why_len)
{
	const char *name = t->ctx->cfg.hostname[0] ? t->ctx->cfg.hostname : host;
	unsigned char addr[16];
	X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);

	if (t->ctx->psk_mode)
		return 0;	/* the key authenticates both ends */
	if (!name || !name[0]) {
		snprintf(why, why_len, "TLS: no name to check the destination's certificate against: "
			 "give --tls-hostname NAME");
		return -EINVAL;
	}
	snprintf(t->expect, sizeof(t->expect), "%s", name);
	if (inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1) {
		if (X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1)
			goto bad;
		return 0;
	}
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set1_host(t->ssl, name) != 1 || SSL_set_tlsext_host_name(t->ssl, name) != 1)
		goto bad;
	return 0;
bad:
	snprintf(why, why_len, "TLS: cannot check the destination's certificate against '%s'", name);
	ERR_clear_error();
	return -EINVAL;
}

struct gw_tls *gw_tls_new(struct gw_tls_ctx *ctx, int fd, const char *host, char *why, size_t why_len)
{
	struct gw_tls *t = calloc(1, sizeof(*t));
	int flags = fcntl(fd, F_GETFL), ret = -ENOMEM;

	if (!t) {
		snprintf(why, why_len, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	t->ctx = ctx;
	t->fd = fd;
	pthread_mutex_init(&t->lock, NULL);
	t->ssl = SSL_new(ctx->ssl_ctx);
	if (!t->ssl || flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) || SSL_set_fd(t->ssl, fd) != 1) {
		snprintf(why, why_len, "TLS: cannot set up a session");
		goto fail;
	}
	SSL_set_ex_data(t->ssl, gw_tls_ex_index(), t);
	if (!ctx->psk_mode)
		SSL_set_verify(t->ssl, SSL_get_verify_mode(t->ssl), gw_tls_verify_cb);
	if (ctx->role == GW_TLS_CLIENT) {
		ret = set_expected_name(t, host, why, why_len);
		if (ret)
			goto fail;
		BIO_set_callback_arg(SSL_get_rbio(t->ssl), (char *)t);
		BIO_set_callback_ex(SSL_get_rbio(t->ssl), first_bytes_cb);
		SSL_set_connect_state(t->ssl);
	} else {
		SSL_set_accept_state(t->ssl);
	}
	return t;
fail:
	ERR_clear_error();
	gw_tls_free(t);
	errno = -ret;
	return NULL;
}

void gw_tls_free(struct gw_tls *t)
{
	if (!t)
		return;
	gw_tls_rec_free(t->rec);
	OPENSSL_cleanse(t->secret_client, sizeof(t->secret_client));
	OPENSSL_cleanse(t->secret_server, sizeof(t->secret_server));
	SSL_free(t->ssl);	/* the socket is the caller's (BIO_NOCLOSE) */
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* ---- the identity of the peer ---- */

static void keep_name(struct gw_tls *t, const char *name, size_t len)
{
	if (t->nr_names < GW_TLS_NAMES_MAX && len && len < GW_TLS_NAME_MAX) {
		memcpy(t->names[t->nr_names], name, len);
		t->names[t->nr_names++][len] = 0;
	}
}

/* Lock held, handshake done: "CN=x" or "psk:id", and the names --tls-authz may match. */
static void record_peer(struct gw_tls *t)
{
	X509 *x = SSL_get0_peer_certificate(t->ssl);
	GENERAL_NAMES *san;
	char cn[GW_TLS_NAME_MAX] = "";

	if (t->ctx->psk_mode) {
		const char *id = t->ctx->role == GW_TLS_CLIENT ? t->ctx->keys[0].identity : t->psk_id;

		snprintf(t->peer, sizeof(t->peer), "psk:%.180s", id);
		keep_name(t, id, strlen(id));
		return;
	}
	if (!x)
		return;
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
	snprintf(t->peer, sizeof(t->peer), "CN=%.180s", cn);
	keep_name(t, cn, strlen(cn));
	san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	for (int i = 0; san && i < sk_GENERAL_NAME_num(san); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(san, i);

		if (g->type == GEN_DNS)
			keep_name(t, (const char *)ASN1_STRING_get0_data(g->d.dNSName),
				  (size_t)ASN1_STRING_length(g->d.dNSName));
	}
	GENERAL_NAMES_free(san);
}

bool gw_tls_ctx_authorized(const struct gw_tls_ctx *ctx, const struct gw_tls *t)
{
	char list[sizeof(ctx->cfg.authz)], *save = NULL;

	if (!ctx->cfg.authz[0])
		return true;
	snprintf(list, sizeof(list), "%s", ctx->cfg.authz);
	for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save))
		for (unsigned i = 0; i < t->nr_names; i++)
			if (!strcasecmp(w, t->names[i]))
				return true;
	return false;
}

/* ---- handshake, reads, writes ---- */

/*
 * Lock held, handshake done. OpenSSL writes every record (16 KiB at most)
 * with its own write(), and write() raises SIGPIPE on a closed connection.
 * Unless the kernel took the records over (kTLS), the records go to our
 * own send buffer instead (net/tls_bio.c): send() with MSG_NOSIGNAL, a few
 * system calls per 512 KiB frame instead of 32, flushed once per frame
 * (gw_tls_flush), and no signal mask to guard each call with.
 */
static void buffer_writes(struct gw_tls *t)
{
	BIO *buf;

	if (BIO_get_ktls_send(SSL_get_wbio(t->ssl)) || !(buf = gw_tls_send_bio_new(t->fd, GW_TLS_WRITE_BUFFER_BYTES)))
		return;
	SSL_set0_wbio(t->ssl, buf);	/* drops the SSL's own reference to the socket BIO as wbio */
	t->buffered = true;
}

static int hexval(int ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
	       ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/*
 * OpenSSL's key log line "LABEL <client random> <secret>", called in the
 * handshake (lock held): the two application traffic secrets are kept
 * for our record layer, cleansed once it has its keys. Nothing is logged.
 */
void gw_tls_keylog(const SSL *ssl, const char *line)
{
	struct gw_tls *t = SSL_get_ex_data(ssl, gw_tls_ex_index());
	bool client = !strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24);
	const char *hex = strrchr(line, ' ');
	unsigned char *out;
	size_t n;

	if (!t || (!client && strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24)) || !hex)
		return;
	hex++;
	n = strlen(hex);
	if (!n || n % 2 || n / 2 > EVP_MAX_MD_SIZE)
		return;
	out = client ? t->secret_client : t->secret_server;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	t->secret_bytes = n / 2;
	if (client)
		t->have_client = true;
	else
		t->have_server = true;
}

/*
 * Lock held, handshake done: the records from now on are ours (tls_rec.c)
 * unless the kernel took them (kTLS) or OpenSSL holds bytes past the
 * handshake (it reads without read-ahead until now, so it should not).
 * Otherwise OpenSSL keeps them, with read-ahead and our send buffer.
 */
static void take_records(struct gw_tls *t)
{
	bool client = t->ctx->role == GW_TLS_CLIENT;

	if (!t->ctx->openssl_records && t->have_client && t->have_server && !SSL_has_pending(t->ssl) &&
	    !BIO_get_ktls_send(SSL_get_wbio(t->ssl)) && !BIO_get_ktls_recv(SSL_get_rbio(t->ssl)))
		t->rec = gw_tls_rec_new(t->fd, t->ssl, client ? t->secret_client : t->secret_server,
					client ? t->secret_server : t->secret_client, t->secret_bytes);
	OPENSSL_cleanse(t->secret_client, sizeof(t->secret_client));
	OPENSSL_cleanse(t->secret_server, sizeof(t->secret_server));
	if (t->rec)
		return;
	SSL_set_read_ahead(t->ssl, 1);
	buffer_writes(t);
}

/*
 * OpenSSL writes to the socket with write(): a peer that closed would raise
 * SIGPIPE, and a library must not kill (or need a handler in) the process
 * that embeds it. SIGPIPE is blocked in the calling thread around every
 * call that may write, and one it raised is consumed before the mask is
 * restored (a SIGPIPE from write() is sent to the writing thread). The
 * write itself then fails with EPIPE, reported as a closed connection.
 * Once writes go through our send BIO (MSG_NOSIGNAL, buffer_writes) there
 * is nothing to guard: the data path makes no signal-mask calls.
 */
struct pipe_guard {
	sigset_t old;
	bool armed;			/* writes may raise SIGPIPE: the mask was changed */
	bool pending_before;		/* one was pending already: not ours to consume */
};

static void pipe_block(const struct gw_tls *t, struct pipe_guard *g)
{
	sigset_t set, pend;

	g->armed = !t->buffered;
	if (!g->armed)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
	g->pending_before = !sigpending(&pend) && sigismember(&pend, SIGPIPE);
}

static void pipe_restore(struct pipe_guard *g)
{
	struct timespec zero = { 0, 0 };
	sigset_t set, pend;

	if (!g->armed)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	if (!g->pending_before && !sigpending(&pend) && sigismember(&pend, SIGPIPE))
		while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

int gw_tls_handshake(struct gw_tls *t, short *events)
{
	int ret;

	struct pipe_guard g;

	pthread_mutex_lock(&t->lock);
	ERR_clear_error();
	pipe_block(t, &g);
	ret = SSL_do_handshake(t->ssl);
	pipe_restore(&g);
	if (ret == 1) {
		t->done = true;
		record_peer(t);
		if (t->ctx->role == GW_TLS_CLIENT)	/* the data path needs no watching */
			BIO_set_callback_ex(SSL_get_rbio(t->ssl), NULL);
		take_records(t);
		ret = 0;
	} else {
		ret = gw_tls_op_failure(t, ret, events, " during the TLS handshake");
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int gw_tls_handshake_stage(struct gw_tls *t)
{
	int stage;

	pthread_mutex_lock(&t->lock);
	stage = (int)SSL_get_state(t->ssl);
	pthread_mutex_unlock(&t->lock);
	return stage;
}

/* Our record layer failed (@ret from gw_tls_rec_*): the reason in words. */
static ssize_t rec_failure(struct gw_tls *t, ssize_t ret, int alert)
{
	pthread_mutex_lock(&t->lock);
	switch (ret) {
	case -ECONNRESET:
		snprintf(t->err, sizeof(t->err), "the %s closed the connection", gw_tls_peer_role(t));
		break;
	case -EREMOTEIO:
		ret = gw_tls_alert_failure(t, alert);
		break;
	case -EBADMSG:
		snprintf(t->err, sizeof(t->err), "a TLS record from the %s failed its authentication "
			 "(changed on the way)", gw_tls_peer_role(t));
		ret = -EPROTO;
		break;
	case -EPROTO:
		snprintf(t->err, sizeof(t->err), "the %s sent a TLS record that is not allowed here", gw_tls_peer_role(t));
		break;
	default:
		snprintf(t->err, sizeof(t->err), "TLS with the %s failed: %s", gw_tls_peer_role(t), strerror((int)-ret));
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

ssize_t gw_tls_readv(struct gw_tls *t, const struct iovec *iov, int iovcnt, short *events)
{
	int alert = 0;
	ssize_t ret;

	if (!t->rec) {		/* OpenSSL's records: into the first part with room */
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len)
				return gw_tls_read(t, iov[i].iov_base, iov[i].iov_len, events);
		return 0;
	}
	ret = gw_tls_rec_readv(t->rec, iov, iovcnt, events, &alert);
	return ret >= 0 || ret == -EAGAIN ? ret : rec_failure(t, ret, alert);
}

ssize_t gw_tls_read(struct gw_tls *t, void *buf, size_t len, short *events)
{
	struct pipe_guard g;
	size_t n = 0;
	ssize_t ret;

	if (t->rec) {
		int alert = 0;

		ret = gw_tls_rec_read(t->rec, buf, len, events, &alert);
		return ret >= 0 || ret == -EAGAIN ? ret : rec_failure(t, ret, alert);
	}
	pthread_mutex_lock(&t->lock);
	ERR_clear_error();
	pipe_block(t, &g);	/* a read may write (alerts, key updates) */
	if (SSL_read_ex(t->ssl, buf, len, &n) == 1)
		ret = (ssize_t)n;
	else
		ret = gw_tls_op_failure(t, 0, events, "");
	pipe_restore(&g);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/*
 * A write failed because the peer closed: it may have said why first (a
 * refusal, TLS 1.3 sends it after the handshake as the peer's first
 * record), and the reason is the alert's. The read side fails with it too.
 */
static ssize_t write_failure(struct gw_tls *t, ssize_t ret)
{
	int alert = 0;

	/* Looks without consuming: a record of data stays for the reader thread. */
	if (ret == -ECONNRESET && gw_tls_rec_peer_alert(t->rec, &alert) == -EREMOTEIO)
		return rec_failure(t, -EREMOTEIO, alert);
	return rec_failure(t, ret, 0);
}

ssize_t gw_tls_writev(struct gw_tls *t, const struct iovec *iov, int iovcnt, short *events)
{
	ssize_t ret;

	if (!t->rec)
		return -EOPNOTSUPP;
	ret = gw_tls_rec_writev(t->rec, iov, iovcnt, events);
	return ret >= 0 || ret == -EAGAIN ? ret : write_failure(t, ret);
}

ssize_t gw_tls_write(struct gw_tls *t, const void *buf, size_t len, short *events)
{
	struct pipe_guard g;
	size_t n = 0;
	ssize_t ret;

	if (t->rec) {
		struct iovec iov = { (void *)buf, len };

		return gw_tls_writev(t, &iov, 1, events);
	}
	pthread_mutex_lock(&t->lock);
	ERR_clear_error();
	pipe_block(t, &g);
	if (SSL_write_ex(t->ssl, buf, len, &n) == 1)
		ret = (ssize_t)n;
	else
		ret = gw_tls_op_failure(t, 0, events, "");
	pipe_restore(&g);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int gw_tls_flush(struct gw_tls *t, short *events)
{
	int ret = 0;

	if (t->rec) {
		ret = gw_tls_rec_flush(t->rec, events);
		return ret == -EAGAIN || !ret ? ret : (int)write_failure(t, ret);
	}
	/* Only our send BIO buffers (MSG_NOSIGNAL): nothing to flush or guard otherwise. */
	if (!t->buffered)
		return 0;
	pthread_mutex_lock(&t->lock);
	if (BIO_flush(SSL_get_wbio(t->ssl)) != 1) {
		if (BIO_should_retry(SSL_get_wbio(t->ssl))) {
			*events = POLLOUT;
			ret = -EAGAIN;
		} else {
			snprintf(t->err, sizeof(t->err), "the %s closed the connection", gw_tls_peer_role(t));
			ret = -ECONNRESET;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

bool gw_tls_buffered(struct gw_tls *t)
{
	return t->buffered || t->rec;
}

bool gw_tls_own_records(struct gw_tls *t)
{
	return t->rec != NULL;
}

void gw_tls_set_rekey_records(struct gw_tls *t, uint64_t records)
{
	if (t->rec)
		gw_tls_rec_set_rekey(t->rec, records);
}

bool gw_tls_pending(struct gw_tls *t)
{
	bool ret;

	if (t->rec)
		return gw_tls_rec_pending(t->rec);
	pthread_mutex_lock(&t->lock);
	/* Read-ahead may hold whole records not yet decrypted: poll() would not see them. */
	ret = SSL_has_pending(t->ssl) != 0;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

const char *gw_tls_error(const struct gw_tls *t)
{
	return t->err;
}

const char *gw_tls_peer(const struct gw_tls *t)
{
	return t->peer;
}

void gw_tls_info(const struct gw_tls *t, struct gw_tls_info *out)
{
	out->mode = gw_tls_ctx_mode(t->ctx);
	out->version = SSL_get_version(t->ssl);
	out->cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(t->ssl));
	out->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(t->ssl)) != 0;
	out->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(t->ssl)) != 0;
	out->records = out->ktls_tx && out->ktls_rx ? "kernel" : t->rec ? "godwit" : "openssl";
}
