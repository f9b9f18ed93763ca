/* SPDX-License-Identifier: MIT */
/* Shared by net/tls_ctx.c and net/tls.c only: the context and the PSK table. */
#ifndef GW_NET_TLS_INT_H
#define GW_NET_TLS_INT_H

#include <openssl/ssl.h>
#include "net/tls.h"

#define GW_TLS_PSK_MAX_KEYS 64
#define GW_TLS_PSK_MAX_KEY_BYTES 64

struct gw_tls_psk {
	char identity[GW_TLS_NAME_MAX];
	unsigned char key[GW_TLS_PSK_MAX_KEY_BYTES];
	size_t key_len;
};

/* Set at creation, read-only after: shared by the threads of a migration. */
struct gw_tls_ctx {
	SSL_CTX *ssl_ctx;
	enum gw_tls_role role;
	bool psk_mode;
	struct gw_tls_config cfg;
	/* PSK: the client presents keys[0]; the server accepts any of them. */
	struct gw_tls_psk keys[GW_TLS_PSK_MAX_KEYS];
	unsigned nr_keys;
	char own_cert_note[160];	/* our own certificate expired or not yet valid: said with a refusal */
	bool openssl_records;		/* tests: OpenSSL keeps the records (talk to tls_rec.c from the other end) */
};

/*
 * tls_bio.c: a write-only BIO for a session after its handshake: records
 * gather in @buffer_bytes and leave with send(MSG_NOSIGNAL) when it fills
 * or at BIO_flush. NULL on failure.
 */
BIO *gw_tls_send_bio_new(int fd, size_t buffer_bytes);
/*
 * tls_rec.c: the TLS 1.3 record layer after the handshake, in place of
 * OpenSSL's (which copies every byte once more on each side): records
 * sealed from the caller's parts into a send buffer, opened straight into
 * the caller's memory. @write_secret and @read_secret are this side's
 * application traffic secrets (@secret_bytes: the suite's hash size).
 * NULL when the suite is not one of ours or out of memory.
 */
#include <sys/uio.h>
#define GW_TLS_REC_REKEY_RECORDS (1ull << 24)	/* records per write key (AES-GCM allows 2^24.5) */
struct gw_tls_rec;
struct gw_tls_rec *gw_tls_rec_new(int fd, const SSL *ssl, const unsigned char *write_secret,
				  const unsigned char *read_secret, size_t secret_bytes);
void gw_tls_rec_free(struct gw_tls_rec *r);	/* NULL is fine */
/*
 * Seal all of @iov as records of 16 KiB (the last one shorter) into the
 * send buffer, sending when it fills: the bytes taken (> 0), -EAGAIN with
 * *@events, -ECONNRESET, -EPROTO. Any thread, one at a time per session.
 */
ssize_t gw_tls_rec_writev(struct gw_tls_rec *r, const struct iovec *iov, int iovcnt, short *events);
/* Send what is sealed: 0, -EAGAIN with *@events, -ECONNRESET. */
int gw_tls_rec_flush(struct gw_tls_rec *r, short *events);
/*
 * Up to @len bytes of the stream: the count (> 0), -EAGAIN with *@events,
 * -ECONNRESET (closed, or close_notify), -EREMOTEIO (the peer's alert
 * *@alert), -EBADMSG (a record failed its tag), -EPROTO. Failures are sticky.
 */
ssize_t gw_tls_rec_read(struct gw_tls_rec *r, void *buf, size_t len, short *events, int *alert);
/*
 * After a failed write: the alert the peer sent before it closed, without
 * consuming the stream (a data record found first is kept for the reader).
 * -EREMOTEIO with *@alert, or 0 when none is visible.
 */
int gw_tls_rec_peer_alert(struct gw_tls_rec *r, int *alert);
/* The same into the parts of @iov in order (a record opened across them). */
ssize_t gw_tls_rec_readv(struct gw_tls_rec *r, const struct iovec *iov, int iovcnt, short *events, int *alert);
/* Opened bytes not returned yet, or a whole record received: a read needs no socket. */
bool gw_tls_rec_pending(struct gw_tls_rec *r);
/* Tests: a KeyUpdate every @records records. */
void gw_tls_rec_set_rekey(struct gw_tls_rec *r, uint64_t records);
/* tls_hkdf.c: RFC 8446 7.1, HKDF-Expand-Label(@secret, @label, "", @len) into @out. 0 or -EPROTO. */
int gw_tls_expand_label(const EVP_MD *md, const unsigned char *secret, size_t secret_len, const char *label,
			unsigned char *out, size_t len);
/* tls.c: OpenSSL's key log callback; keeps the application traffic secrets for gw_tls_rec_new. */
void gw_tls_keylog(const SSL *ssl, const char *line);
/* The ex_data index of struct gw_tls in its SSL (for the callbacks). */
int gw_tls_ex_index(void);
/* PSK callbacks (tls_ctx.c), installed on SSL objects of a PSK context. */
int gw_tls_psk_use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
			   SSL_SESSION **sess);
int gw_tls_psk_find_session(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess);
/* tls.c: the PSK identity a client presented, known or not (the peer's name, or the refusal's reason). */
void gw_tls_note_psk_identity(SSL *ssl, const unsigned char *id, size_t idlen, bool known);

/*
 * One TLS session (tls.c; its refusals in words: tls_why.c). Threads: the
 * session's lock guards every SSL call and the fields after it.
 */
#define GW_TLS_NAMES_MAX 8			/* names kept from a certificate for --tls-authz */
#define GW_TLS_WRITE_BUFFER_BYTES (256 << 10)	/* records gathered before a write() */

struct gw_tls {
	/* Set at creation, read-only after. */
	struct gw_tls_ctx *ctx;
	int fd;
	char expect[GW_TLS_NAME_MAX];	/* client: the name the server's certificate must carry */

	pthread_mutex_t lock;		/* every SSL call and the fields below */
	SSL *ssl;
	bool done;			/* handshake complete */
	bool buffered;			/* records gather in our send BIO until gw_tls_flush: no SIGPIPE */
	/* Handshake (keylog callback, lock held): the application traffic secrets. */
	unsigned char secret_client[EVP_MAX_MD_SIZE], secret_server[EVP_MAX_MD_SIZE];
	size_t secret_bytes;
	bool have_client, have_server;
	/*
	 * Set by the handshake, read-only after: our record layer (tls_rec.c,
	 * its own locks), NULL when OpenSSL keeps the records (kTLS, or a
	 * suite tls_rec.c does not know).
	 */
	struct gw_tls_rec *rec;
	char err[400];			/* the last failure, in words */
	char peer[GW_TLS_PEER_MAX];	/* authenticated identity, after the handshake */
	char names[GW_TLS_NAMES_MAX][GW_TLS_NAME_MAX];	/* the peer certificate's CN and DNS names */
	unsigned nr_names;
	char refused_names[256];	/* the certificate our verification refused: its names */
	char refused_when[40];		/* and its notAfter / notBefore, for the dates checks */
	int refused_err;		/* X509_V_ERR_* of that refusal, 0 none */
	unsigned char first[4];		/* client: the first bytes the server sent */
	size_t nr_first;
	char psk_id[64];		/* server: the PSK identity the client presented */
	bool psk_known;			/* server: and it is in the keys file */
};

/* "source" or "destination": the other end, for messages. */
static inline const char *gw_tls_peer_role(const struct gw_tls *t)
{
	return t->ctx->role == GW_TLS_SERVER ? "source" : "destination";
}

/* tls_why.c, lock held. OpenSSL's verification callback: keeps the certificate refused and why. */
int gw_tls_verify_cb(int ok, X509_STORE_CTX *xs);
/* A TLS alert from the peer (it refused something of ours): t->err in words; -EACCES or -EPROTO. */
int gw_tls_alert_failure(struct gw_tls *t, int alert);
/* After a failed SSL call: -EAGAIN with *@events, or -errno with t->err in words (@during: where). */
int gw_tls_op_failure(struct gw_tls *t, int ret, short *events, const char *during);

#endif
