/* SPDX-License-Identifier: MIT */
/*
 * TLS 1.3 on migration connections (OpenSSL 3), in two files:
 *   tls_ctx.c  credentials: QEMU's x509 directory layout or a keys.psk
 *              file, checked and loaded once per migration into a context;
 *   tls.c      one TLS session per socket: the handshake, reads and
 *              writes, the peer's identity, refusals in plain words.
 *
 * The source is the TLS client, the destination the server. Both sides
 * authenticate (mutual TLS): with x509 each presents a certificate signed
 * by the other's CA; the client checks the server's name (--tls-hostname
 * or the URL's host), the server may restrict client names (--tls-authz).
 * With a pre-shared key, knowing the key authenticates.
 *
 * Kernel TLS (SSL_OP_ENABLE_KTLS) is asked for on every context; whether
 * the kernel took the record layer over, per direction, is reported by
 * gw_tls_info().
 *
 * Sockets under a gw_tls are non-blocking: these calls never wait. They
 * return -EAGAIN with the poll events to wait for; the framed connection
 * (net/io.c) waits with its deadlines. One SSL object is not safe for two
 * threads at once, and the control connection is read by one thread while
 * another writes (the first error of a migration is sent from any thread),
 * so every call takes the session's own lock, never held while waiting.
 */
#ifndef GW_NET_TLS_H
#define GW_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GW_TLS_PATH_MAX 512
#define GW_TLS_NAME_MAX 256
#define GW_TLS_PEER_MAX 192

/* What the session's string parameters say (params.h, GW_SPARAM_TLS_*). */
struct gw_tls_config {
	char creds_dir[GW_TLS_PATH_MAX];	/* x509: ca-cert.pem, {server,client}-{cert,key}.pem */
	char psk_file[GW_TLS_PATH_MAX];		/* "name:hexkey" lines (QEMU's keys.psk) */
	char hostname[GW_TLS_NAME_MAX];		/* client: name the server's certificate must carry */
	char authz[GW_TLS_NAME_MAX * 2];	/* server: client names accepted, comma-separated */
};

enum gw_tls_role {
	GW_TLS_CLIENT = 1,	/* the source */
	GW_TLS_SERVER = 2,	/* the destination */
};

/* Credentials loaded into an OpenSSL context; shared by every connection of a migration. */
struct gw_tls_ctx;
/* One TLS session on a connected socket. */
struct gw_tls;

/* Whether @cfg asks for TLS at all. */
bool gw_tls_config_on(const struct gw_tls_config *cfg);
/*
 * Check and load the credentials for @role. NULL with errno (ENOENT,
 * EINVAL, ENOMEM) and a reason naming the file and what is wrong.
 */
struct gw_tls_ctx *gw_tls_ctx_new(enum gw_tls_role role, const struct gw_tls_config *cfg,
				  char *why, size_t why_len);
void gw_tls_ctx_free(struct gw_tls_ctx *ctx);	/* NULL is fine */
/* "x509" or "psk". */
const char *gw_tls_ctx_mode(const struct gw_tls_ctx *ctx);
/*
 * Server: whether the client identity @peer is allowed (--tls-authz; an
 * empty list allows every client the CA or the key authenticated).
 */
bool gw_tls_ctx_authorized(const struct gw_tls_ctx *ctx, const struct gw_tls *t);

/*
 * Start TLS on @fd (made non-blocking; owned by the caller). Client:
 * @host is what the server's certificate must name when no hostname was
 * configured (the URL's host; NULL: none, refused). NULL with errno and a
 * reason.
 */
struct gw_tls *gw_tls_new(struct gw_tls_ctx *ctx, int fd, const char *host, char *why, size_t why_len);
/* Free the session (not the socket). NULL is fine. */
void gw_tls_free(struct gw_tls *t);

/*
 * One step of the handshake. 0 when done; -EAGAIN with *@events
 * (POLLIN / POLLOUT) to wait for; -EACCES (a certificate, name or key was
 * refused, either side), -EPROTO (not TLS, no common protocol),
 * -ECONNRESET (the peer closed) with the reason in plain words
 * (gw_tls_error()).
 */
int gw_tls_handshake(struct gw_tls *t, short *events);
/*
 * Where the handshake is (OpenSSL's state machine, as an int): it changes
 * only when a whole handshake message was taken or sent, never on a byte.
 */
int gw_tls_handshake_stage(struct gw_tls *t);

/*
 * Read or write up to @len bytes: the count (> 0), -EAGAIN with *@events,
 * -ECONNRESET (orderly close or reset), -EACCES (the peer refused us after
 * the handshake, e.g. our certificate: TLS 1.3 says so on the first
 * read), -EPROTO (a TLS error). Reason in gw_tls_error().
 */
ssize_t gw_tls_read(struct gw_tls *t, void *buf, size_t len, short *events);
ssize_t gw_tls_write(struct gw_tls *t, const void *buf, size_t len, short *events);
/*
 * Push records written so far to the socket (writes gather in a buffer
 * after the handshake, unless the kernel does TLS): 0, -EAGAIN with
 * *@events, -ECONNRESET. A frame is flushed once it is written whole.
 */
int gw_tls_flush(struct gw_tls *t, short *events);
/* Whether writes gather until gw_tls_flush (read-only after the handshake). */
bool gw_tls_buffered(struct gw_tls *t);
/*
 * Write all of @iov as full 16 KiB records (the last one shorter), sealed
 * straight from the parts (no staging copy), into the send buffer: the
 * bytes taken (> 0; the caller goes on from there), -EAGAIN with
 * *@events, -ECONNRESET, -EPROTO; -EOPNOTSUPP when OpenSSL keeps the
 * records (gw_tls_own_records() false: use gw_tls_write).
 */
struct iovec;
/*
 * Read into the parts of @iov in order, up to all of them: a record is
 * opened straight across them. As gw_tls_read (0 when @iov is empty);
 * where OpenSSL keeps the records, into the first part with room only.
 */
ssize_t gw_tls_readv(struct gw_tls *t, const struct iovec *iov, int iovcnt, short *events);
ssize_t gw_tls_writev(struct gw_tls *t, const struct iovec *iov, int iovcnt, short *events);
/*
 * Whether godwit's record layer (net/tls_rec.c) carries the records after
 * the handshake, rather than OpenSSL (kTLS, an unknown suite).
 */
bool gw_tls_own_records(struct gw_tls *t);
/* Tests: the write key is updated (KeyUpdate) every @records records. */
void gw_tls_set_rekey_records(struct gw_tls *t, uint64_t records);
/* Decrypted bytes waiting in the session: a read returns them without the socket. */
bool gw_tls_pending(struct gw_tls *t);

/* The last failure in plain words ("" when none). */
const char *gw_tls_error(const struct gw_tls *t);
/* The peer, authenticated: "CN=name" (x509) or "psk:identity". */
const char *gw_tls_peer(const struct gw_tls *t);

struct gw_tls_info {
	const char *mode;		/* "x509", "psk" */
	const char *version;		/* "TLSv1.3" */
	const char *cipher;		/* "TLS_AES_128_GCM_SHA256" */
	bool ktls_tx, ktls_rx;		/* the kernel does the record layer (per direction) */
	const char *records;		/* who does it: "kernel", "godwit" (tls_rec.c), "openssl" */
};
void gw_tls_info(const struct gw_tls *t, struct gw_tls_info *out);

#endif
