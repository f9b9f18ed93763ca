/* SPDX-License-Identifier: MIT */
/*
 * The TLS 1.3 record layer of a session after its handshake (see
 * net/tls_int.h), done here rather than by OpenSSL, as the kernel does it
 * with kTLS: OpenSSL negotiates, authenticates and hands over the traffic
 * secrets (its key log callback); the records are sealed and opened here
 * with the same AEAD (RFC 8446 section 5).
 *
 * Why: OpenSSL 3.0 encrypts into its own write buffer, which our send
 * buffer then copies, and decrypts in its read buffer, which SSL_read
 * copies out: one extra copy of every byte on each side, as costly as the
 * cipher itself on the destination (the copy writes a cold 4 MiB frame
 * buffer). Here a record is sealed straight from the frame's parts into
 * the send buffer (gathered across them: no staging copy either), and
 * opened from the read buffer straight into the caller's parts (the frame
 * buffer, or runs of guest RAM: a record scattered across them). A record
 * is written there before its tag is checked, as kTLS does: a record that
 * fails fails the connection, and with it the migration, before anything
 * trusts those bytes.
 *
 * Records: application data (23) carries the stream; an alert (21) ends
 * it (close_notify: closed, any other: refused, in words by net/tls.c); a
 * KeyUpdate (handshake, 22) changes the read key, and the write key is
 * updated before its sequence reaches GW_TLS_REC_REKEY_RECORDS (AES-GCM's
 * limit is 2^24.5 records per key); a NewSessionTicket is ignored (none
 * are sent: tls_ctx.c); anything else fails with -EPROTO.
 *
 * Thread ownership: the write side (w, wbuf) under wlock, the read side
 * (r, rbuf, plain) under rlock: a reader and a writer never wait for each
 * other. Set at creation, read-only after: fd, aead, md, key_bytes.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include "net/tls_int.h"

#define HDR_BYTES 5
#define TAG_BYTES 16
#define NONCE_BYTES 12
#define PLAIN_MAX 16384				/* TLS 1.3: plaintext of one record */
#define CIPHER_MAX (PLAIN_MAX + 256)		/* and its ciphertext, padding and tag included */
#define SEAL_MAX (HDR_BYTES + PLAIN_MAX + 1 + TAG_BYTES)	/* what we write: no padding */
#define WBUF_BYTES (256u << 10)			/* records gathered before a send() */
#define RBUF_BYTES (256u << 10)			/* one read() at most */

#define CT_ALERT 21
#define CT_HANDSHAKE 22
#define CT_DATA 23
#define HS_NEW_SESSION_TICKET 4
#define HS_KEY_UPDATE 24

struct keys {				/* one direction */
	EVP_CIPHER_CTX *cctx;		/* key set; the nonce per record */
	unsigned char secret[EVP_MAX_MD_SIZE];	/* the current traffic secret (for KeyUpdate) */
	unsigned char iv[NONCE_BYTES];
	uint64_t seq;			/* records sealed or opened with this key */
};

struct gw_tls_rec {
	int fd;
	const EVP_CIPHER *aead;
	const EVP_MD *md;
	size_t key_bytes, secret_bytes;

	pthread_mutex_t wlock;		/* the write side: */
	struct keys w;
	int w_err;			/* sticky: sealing failed (-errno); nothing is sealed after it */
	uint64_t rekey_records;		/* a KeyUpdate before this many records with one key */
	bool w_update;			/* the peer asked for a KeyUpdate of ours */
	size_t w_sent, w_used;		/* wbuf[w_sent, w_used) sealed, not sent yet */
	unsigned char *wbuf;		/* WBUF_BYTES + SEAL_MAX */

	pthread_mutex_t rlock;		/* the read side: */
	struct keys r;
	size_t r_start, r_end;		/* rbuf[r_start, r_end): received, not opened */
	size_t p_start, p_end;		/* plain[p_start, p_end): opened, not returned */
	int r_err;			/* sticky: the stream failed (-errno) */
	int r_alert;			/* and the alert that ended it, if one did */
	unsigned char *rbuf;		/* RBUF_BYTES + HDR_BYTES + CIPHER_MAX */
	unsigned char plain[CIPHER_MAX];
};

/* Key and IV from @k->secret, sequence 0. 0 or -EPROTO. */
static int keys_set(const struct gw_tls_rec *r, struct keys *k, bool seal)
{
	unsigned char key[32];
	int ret;

	ret = gw_tls_expand_label(r->md, k->secret, r->secret_bytes, "key", key, r->key_bytes);
	if (!ret)
		ret = gw_tls_expand_label(r->md, k->secret, r->secret_bytes, "iv", k->iv, NONCE_BYTES);
	if (!ret && (!k->cctx && !(k->cctx = EVP_CIPHER_CTX_new())))
		ret = -ENOMEM;
	if (!ret && EVP_CipherInit_ex(k->cctx, r->aead, NULL, key, NULL, seal) != 1)
		ret = -EPROTO;
	OPENSSL_cleanse(key, sizeof(key));
	if (!ret)
		k->seq = 0;	/* only with the new key: a failure leaves the side failed (w_err, r_err) */
	return ret;
}

/* RFC 8446 7.2: the next traffic secret of @k, and its keys. */
static int keys_update(const struct gw_tls_rec *r, struct keys *k, bool seal)
{
	unsigned char next[EVP_MAX_MD_SIZE];
	int ret = gw_tls_expand_label(r->md, k->secret, r->secret_bytes, "traffic upd", next, r->secret_bytes);

	if (!ret) {
		memcpy(k->secret, next, r->secret_bytes);
		ret = keys_set(r, k, seal);
	}
	OPENSSL_cleanse(next, sizeof(next));
	return ret;
}

/* The per-record nonce: the IV with the sequence number XORed into its last 8 bytes. */
static void nonce(const struct keys *k, unsigned char *out)
{
	memcpy(out, k->iv, NONCE_BYTES);
	for (int i = 0; i < 8; i++)
		out[NONCE_BYTES - 1 - i] ^= (unsigned char)(k->seq >> (8 * i));
}

static void keys_free(struct keys *k)
{
	EVP_CIPHER_CTX_free(k->cctx);
	OPENSSL_cleanse(k->secret, sizeof(k->secret));
	OPENSSL_cleanse(k->iv, sizeof(k->iv));
}

struct gw_tls_rec *gw_tls_rec_new(int fd, const SSL *ssl, const unsigned char *write_secret,
				  const unsigned char *read_secret, size_t secret_bytes)
{
	const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
	struct gw_tls_rec *r;
	uint16_t id;

	if (!c || secret_bytes > EVP_MAX_MD_SIZE)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd = fd;
	r->rekey_records = GW_TLS_REC_REKEY_RECORDS;
	id = (uint16_t)SSL_CIPHER_get_id(c);
	r->aead = id == 0x1301 ? EVP_aes_128_gcm() : id == 0x1302 ? EVP_aes_256_gcm() :
		  id == 0x1303 ? EVP_chacha20_poly1305() : NULL;
	r->key_bytes = id == 0x1301 ? 16 : 32;
	r->md = SSL_CIPHER_get_handshake_digest(c);
	r->secret_bytes = secret_bytes;
	pthread_mutex_init(&r->wlock, NULL);
	pthread_mutex_init(&r->rlock, NULL);
	r->wbuf = malloc(WBUF_BYTES + SEAL_MAX);
	r->rbuf = malloc(RBUF_BYTES + HDR_BYTES + CIPHER_MAX);
	if (!r->aead || !r->md || (size_t)EVP_MD_get_size(r->md) != secret_bytes || !r->wbuf || !r->rbuf)
		goto fail;
	memcpy(r->w.secret, write_secret, secret_bytes);
	memcpy(r->r.secret, read_secret, secret_bytes);
	if (keys_set(r, &r->w, true) || keys_set(r, &r->r, false))
		goto fail;
	return r;
fail:
	gw_tls_rec_free(r);
	return NULL;
}

void gw_tls_rec_free(struct gw_tls_rec *r)
{
	if (!r)
		return;
	keys_free(&r->w);
	keys_free(&r->r);
	if (r->rbuf)
		OPENSSL_cleanse(r->rbuf, RBUF_BYTES + HDR_BYTES + CIPHER_MAX);
	OPENSSL_cleanse(r->plain, sizeof(r->plain));
	free(r->wbuf);
	free(r->rbuf);
	pthread_mutex_destroy(&r->wlock);
	pthread_mutex_destroy(&r->rlock);
	free(r);
}

/* ---- writing ---- */

/* Where the plaintext to seal comes from: the caller's parts, consumed in order. */
struct cursor {
	const struct iovec *iov;
	int iovcnt, i;
	size_t off;			/* into iov[i] */
};

/*
 * Seal one record of @n plaintext bytes from @cur (NULL: @p) and inner
 * type @type at the end of wbuf, which has room (SEAL_MAX). wlock held.
 */
static int seal(struct gw_tls_rec *r, struct cursor *cur, const unsigned char *p, size_t n, unsigned char type)
{
	unsigned char *out = r->wbuf + r->w_used, iv[NONCE_BYTES];
	size_t ct = n + 1 + TAG_BYTES, at = HDR_BYTES;
	int outl, ok;

	out[0] = CT_DATA;
	out[1] = 3;
	out[2] = 3;
	out[3] = (unsigned char)(ct >> 8);
	out[4] = (unsigned char)ct;
	nonce(&r->w, iv);
	ok = EVP_EncryptInit_ex(r->w.cctx, NULL, NULL, NULL, iv) == 1 &&
	     EVP_EncryptUpdate(r->w.cctx, NULL, &outl, out, HDR_BYTES) == 1;
	while (ok && n) {
		const unsigned char *src = p;
		size_t len = n;

		if (cur) {
			const struct iovec *v = &cur->iov[cur->i];

			src = (const unsigned char *)v->iov_base + cur->off;
			len = v->iov_len - cur->off < n ? v->iov_len - cur->off : n;
			cur->off += len;
			if (cur->off == v->iov_len) {
				cur->i++;
				cur->off = 0;
			}
		}
		if (len) {	/* an empty part: nothing, and no stale outl added */
			ok = EVP_EncryptUpdate(r->w.cctx, out + at, &outl, src, (int)len) == 1;
			at += ok ? (size_t)outl : 0;
		}
		n -= len;
	}
	ok = ok && EVP_EncryptUpdate(r->w.cctx, out + at, &outl, &type, 1) == 1;
	at += ok ? (size_t)outl : 0;
	ok = ok && EVP_EncryptFinal_ex(r->w.cctx, out + at, &outl) == 1;
	at += ok ? (size_t)outl : 0;
	ok = ok && at == HDR_BYTES + ct - TAG_BYTES &&
	     EVP_CIPHER_CTX_ctrl(r->w.cctx, EVP_CTRL_AEAD_GET_TAG, TAG_BYTES, out + at) == 1;
	if (!ok)
		return -EPROTO;
	r->w_used += HDR_BYTES + ct;
	r->w.seq++;
	return 0;
}

/* Send what is sealed. 0 all sent, -EAGAIN (socket full), -ECONNRESET. wlock held. */
static int drain(struct gw_tls_rec *r)
{
	while (r->w_sent < r->w_used) {
		ssize_t n = send(r->fd, r->wbuf + r->w_sent, r->w_used - r->w_sent, MSG_NOSIGNAL);

		if (n > 0) {
			r->w_sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -EAGAIN;
		return -ECONNRESET;
	}
	r->w_sent = r->w_used = 0;
	return 0;
}

/* Room for one more record in wbuf: 0, -EAGAIN, -ECONNRESET. wlock held. */
static int room(struct gw_tls_rec *r)
{
	int ret;

	if (r->w_used <= WBUF_BYTES)
		return 0;
	ret = drain(r);
	if (ret != -EAGAIN || !r->w_sent)
		return ret;
	/* Part of it went: the rest to the front, and seal on behind it while there is room. */
	memmove(r->wbuf, r->wbuf + r->w_sent, r->w_used - r->w_sent);
	r->w_used -= r->w_sent;
	r->w_sent = 0;
	return r->w_used <= WBUF_BYTES ? 0 : -EAGAIN;
}

/* Before the next data record: a KeyUpdate when the key is worn or the peer asked. wlock held. */
static int rekey_if_due(struct gw_tls_rec *r)
{
	static const unsigned char key_update[] = { HS_KEY_UPDATE, 0, 0, 1, 0 };	/* update_not_requested */
	int ret;

	if (r->w.seq < r->rekey_records && !r->w_update)
		return 0;
	ret = room(r);
	if (!ret)
		ret = seal(r, NULL, key_update, sizeof(key_update), CT_HANDSHAKE);
	if (!ret)
		ret = keys_update(r, &r->w, true);
	if (!ret)
		r->w_update = false;
	return ret;
}

ssize_t gw_tls_rec_writev(struct gw_tls_rec *r, const struct iovec *iov, int iovcnt, short *events)
{
	struct cursor cur = { .iov = iov, .iovcnt = iovcnt };
	size_t left = 0, done = 0;
	int ret = 0;

	for (int i = 0; i < iovcnt; i++)
		left += iov[i].iov_len;
	pthread_mutex_lock(&r->wlock);
	ret = r->w_err;
	while (!ret && left) {
		size_t n = left < PLAIN_MAX ? left : PLAIN_MAX;

		ret = room(r);
		if (!ret)
			ret = rekey_if_due(r);
		if (!ret)
			ret = room(r);
		if (!ret)
			ret = seal(r, &cur, NULL, n, CT_DATA);
		if (ret)
			break;
		left -= n;
		done += n;
	}
	if (ret && ret != -EAGAIN && ret != -ECONNRESET)
		r->w_err = ret;		/* a key or a record we could not make: never a nonce twice */
	pthread_mutex_unlock(&r->wlock);
	if (done)
		return (ssize_t)done;
	if (ret == -EAGAIN)
		*events = POLLOUT;
	return ret;
}

int gw_tls_rec_flush(struct gw_tls_rec *r, short *events)
{
	int ret;

	pthread_mutex_lock(&r->wlock);
	ret = drain(r);
	pthread_mutex_unlock(&r->wlock);
	if (ret == -EAGAIN)
		*events = POLLOUT;
	return ret;
}

void gw_tls_rec_set_rekey(struct gw_tls_rec *r, uint64_t records)
{
	pthread_mutex_lock(&r->wlock);
	r->rekey_records = records;
	pthread_mutex_unlock(&r->wlock);
}

/* ---- reading ---- */

/*
 * A handshake record after the handshake: KeyUpdate changes the read key
 * (and asks for ours when requested); a NewSessionTicket is ignored. rlock held.
 */
static int handshake_record(struct gw_tls_rec *r, const unsigned char *p, size_t n)
{
	while (n) {
		size_t len;

		if (n < 4 || (len = (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3]) > n - 4)
			return -EPROTO;	/* a message split across records: never sent after a handshake */
		if (p[0] == HS_KEY_UPDATE) {
			if (len != 1 || p[4] > 1 || n != 5)
				return -EPROTO;	/* the key changes after this record: nothing may follow */
			if (keys_update(r, &r->r, false))
				return -EPROTO;
			if (p[4]) {
				pthread_mutex_lock(&r->wlock);
				r->w_update = true;
				pthread_mutex_unlock(&r->wlock);
			}
			return 0;
		}
		if (p[0] != HS_NEW_SESSION_TICKET)
			return -EPROTO;
		p += 4 + len;
		n -= 4 + len;
	}
	return 0;
}

/* Where opened bytes go: the caller's parts, filled in order. */
struct out {
	const struct iovec *iov;
	int iovcnt, i;
	size_t off;			/* into iov[i] */
};

/* @n bytes between @buf and @o's position + @skip (into @o when @put), without moving it. */
static void out_copy(const struct out *o, size_t skip, unsigned char *buf, size_t n, bool put)
{
	int i = o->i;
	size_t off = o->off + skip;

	while (n) {
		unsigned char *at;
		size_t k;

		while (off >= o->iov[i].iov_len) {
			off -= o->iov[i].iov_len;
			i++;
		}
		k = o->iov[i].iov_len - off < n ? o->iov[i].iov_len - off : n;
		at = (unsigned char *)o->iov[i].iov_base + off;
		memcpy(put ? at : buf, put ? buf : at, k);
		buf += k;
		n -= k;
		off += k;
	}
}

static void out_advance(struct out *o, size_t n)
{
	while (n) {
		size_t k = o->iov[o->i].iov_len - o->off < n ? o->iov[o->i].iov_len - o->off : n;

		o->off += k;
		n -= k;
		if (o->off == o->iov[o->i].iov_len) {
			o->i++;
			o->off = 0;
		}
	}
	while (o->i < o->iovcnt && !o->iov[o->i].iov_len)
		o->i++;
}

/*
 * Open the record at rbuf[r_start] (whole: @ct ciphertext bytes after the
 * header) into @o (NULL: into plain), which has room for @ct - TAG_BYTES,
 * without moving it. The content's length (inner type and padding
 * stripped) or -errno; *@type its type. rlock held.
 */
static ssize_t open_record(struct gw_tls_rec *r, size_t ct, const struct out *o, unsigned char *type)
{
	unsigned char *rec = r->rbuf + r->r_start, iv[NONCE_BYTES];
	size_t n = ct - TAG_BYTES, at = 0;
	int outl, ok;

	nonce(&r->r, iv);
	ok = EVP_DecryptInit_ex(r->r.cctx, NULL, NULL, NULL, iv) == 1 &&
	     EVP_DecryptUpdate(r->r.cctx, NULL, &outl, rec, HDR_BYTES) == 1;
	if (!o) {
		ok = ok && EVP_DecryptUpdate(r->r.cctx, r->plain, &outl, rec + HDR_BYTES, (int)n) == 1;
		at = ok ? (size_t)outl : 0;
	}
	for (int i = o ? o->i : 0, first = 1; o && ok && at < n; i++, first = 0) {
		size_t off = first ? o->off : 0, k = o->iov[i].iov_len - off < n - at ? o->iov[i].iov_len - off : n - at;

		ok = !k || (EVP_DecryptUpdate(r->r.cctx, (unsigned char *)o->iov[i].iov_base + off, &outl,
					      rec + HDR_BYTES + at, (int)k) == 1 && (size_t)outl == k);
		at += k;
	}
	ok = ok && at == n &&
	     EVP_CIPHER_CTX_ctrl(r->r.cctx, EVP_CTRL_AEAD_SET_TAG, TAG_BYTES, rec + HDR_BYTES + n) == 1 &&
	     EVP_DecryptFinal_ex(r->r.cctx, r->plain, &outl) == 1;	/* AEAD: no output at the end */
	if (!ok)
		return -EBADMSG;
	r->r_start += HDR_BYTES + ct;
	r->r.seq++;
	for (;;) {			/* the inner type, after the content, before any padding */
		if (!n)
			return -EPROTO;
		if (o)
			out_copy(o, n - 1, type, 1, false);
		else
			*type = r->plain[n - 1];
		if (*type)
			break;
		n--;
	}
	if (n - 1 > PLAIN_MAX)		/* RFC 8446 5.4: record_overflow */
		return -EMSGSIZE;
	return (ssize_t)(n - 1);
}

/* The next whole record in rbuf: its ciphertext length, 0 when not all here, or -EPROTO. */
static ssize_t whole_record(const struct gw_tls_rec *r)
{
	const unsigned char *h = r->rbuf + r->r_start;
	size_t have = r->r_end - r->r_start, ct;

	if (have < HDR_BYTES)
		return 0;
	ct = (size_t)h[3] << 8 | h[4];
	if (ct > CIPHER_MAX)
		return -EMSGSIZE;
	if (h[0] != CT_DATA || ct < TAG_BYTES + 1)
		return -EPROTO;
	return have >= HDR_BYTES + ct ? (ssize_t)ct : 0;
}

/* More bytes from the socket: > 0, -EAGAIN, -ECONNRESET (EOF or error). rlock held. */
static int fill(struct gw_tls_rec *r)
{
	ssize_t n;

	if (r->r_start == r->r_end) {
		r->r_start = r->r_end = 0;
	} else if (r->r_start > RBUF_BYTES / 2 || r->r_end == RBUF_BYTES + HDR_BYTES + CIPHER_MAX) {
		memmove(r->rbuf, r->rbuf + r->r_start, r->r_end - r->r_start);	/* one partial record */
		r->r_end -= r->r_start;
		r->r_start = 0;
	}
	do
		n = read(r->fd, r->rbuf + r->r_end, RBUF_BYTES + HDR_BYTES + CIPHER_MAX - r->r_end);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		r->r_end += (size_t)n;
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -EAGAIN;
	return -ECONNRESET;
}

/*
 * The stream failed on our side of the check (@ret: -EBADMSG a tag, -EMSGSIZE
 * a record too long, -EPROTO anything else): the peer is told with a fatal
 * alert (RFC 8446 6.2: bad_record_mac, record_overflow, unexpected_message),
 * best effort, and nothing is sealed after it. The error the stream keeps:
 * -EMSGSIZE counts as -EPROTO. rlock held (then wlock: the only order).
 */
static int fail_read(struct gw_tls_rec *r, int ret)
{
	unsigned char a[2] = { 2, ret == -EBADMSG ? 20 : ret == -EMSGSIZE ? 22 : 10 };

	if (ret != -EBADMSG && ret != -EMSGSIZE && ret != -EPROTO)
		return ret;	/* the peer's alert, a closed connection: nothing to say */
	pthread_mutex_lock(&r->wlock);
	if (!r->w_err && !room(r) && !seal(r, NULL, a, sizeof(a), CT_ALERT))
		(void)drain(r);
	r->w_err = -EPROTO;
	pthread_mutex_unlock(&r->wlock);
	return ret == -EMSGSIZE ? -EPROTO : ret;
}

ssize_t gw_tls_rec_readv(struct gw_tls_rec *r, const struct iovec *iov, int iovcnt, short *events, int *alert)
{
	struct out o = { .iov = iov, .iovcnt = iovcnt };
	size_t len = 0, done = 0;
	ssize_t ret = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	out_advance(&o, 0);
	pthread_mutex_lock(&r->rlock);
	if (r->r_err) {
		ret = r->r_err;
		*alert = r->r_alert;
		goto out;
	}
	while (done < len) {
		unsigned char type;
		bool direct;
		ssize_t ct, n;

		if (r->p_start < r->p_end) {	/* opened before, not all returned */
			n = (ssize_t)(r->p_end - r->p_start < len - done ? r->p_end - r->p_start : len - done);
			out_copy(&o, 0, r->plain + r->p_start, (size_t)n, true);
			out_advance(&o, (size_t)n);
			r->p_start += (size_t)n;
			done += (size_t)n;
			continue;
		}
		ct = whole_record(r);
		if (ct == 0) {
			int f = done ? 0 : fill(r);	/* one read() per call: hand over what we have first */

			if (f > 0)
				continue;
			ret = f;
			break;
		}
		if (ct < 0) {
			ret = ct;
			break;
		}
		/* Straight into the caller's memory when the record fits there. */
		direct = len - done >= (size_t)ct - TAG_BYTES;
		n = open_record(r, (size_t)ct, direct ? &o : NULL, &type);
		if (n < 0) {
			ret = n;
			break;
		}
		if (type == CT_DATA) {
			if (direct) {
				out_advance(&o, (size_t)n);
				done += (size_t)n;
			} else {
				r->p_start = 0;
				r->p_end = (size_t)n;
			}
			continue;
		}
		if (direct)		/* not the stream's: parsed from plain, the caller's bytes rewritten later */
			out_copy(&o, 0, r->plain, (size_t)n, false);
		if (type == CT_ALERT && n == 2) {
			*alert = r->r_alert = r->plain[1];
			ret = r->plain[1] == 0 ? -ECONNRESET : -EREMOTEIO;	/* close_notify, or a refusal */
			break;
		}
		ret = type == CT_HANDSHAKE ? handshake_record(r, r->plain, (size_t)n) : -EPROTO;
		if (ret)
			break;
	}
	if (ret && ret != -EAGAIN)
		ret = r->r_err = fail_read(r, (int)ret);
out:
	pthread_mutex_unlock(&r->rlock);
	if (done)
		return (ssize_t)done;
	if (ret == -EAGAIN)
		*events = POLLIN;
	return ret;
}

int gw_tls_rec_peer_alert(struct gw_tls_rec *r, int *alert)
{
	int ret = 0;

	pthread_mutex_lock(&r->rlock);
	/* Opened data not returned yet comes first: no alert before it is visible. */
	while (!r->r_err && r->p_start == r->p_end) {
		unsigned char type;
		ssize_t ct = whole_record(r), n;

		if (ct == 0 && fill(r) > 0)
			continue;
		if (ct <= 0)
			break;
		n = open_record(r, (size_t)ct, NULL, &type);
		if (n < 0) {
			r->r_err = fail_read(r, (int)n);
		} else if (type == CT_DATA) {
			r->p_start = 0;		/* kept for the reader, not consumed */
			r->p_end = (size_t)n;
		} else if (type == CT_ALERT && n == 2) {
			r->r_alert = r->plain[1];
			r->r_err = r->plain[1] == 0 ? -ECONNRESET : -EREMOTEIO;
		} else {
			int h = type == CT_HANDSHAKE ? handshake_record(r, r->plain, (size_t)n) : -EPROTO;

			if (h)
				r->r_err = fail_read(r, h);
		}
	}
	if (r->r_err == -EREMOTEIO) {
		*alert = r->r_alert;
		ret = -EREMOTEIO;
	}
	pthread_mutex_unlock(&r->rlock);
	return ret;
}

ssize_t gw_tls_rec_read(struct gw_tls_rec *r, void *buf, size_t len, short *events, int *alert)
{
	struct iovec iov = { buf, len };

	return gw_tls_rec_readv(r, &iov, 1, events, alert);
}

bool gw_tls_rec_pending(struct gw_tls_rec *r)
{
	bool ret;

	pthread_mutex_lock(&r->rlock);
	ret = r->p_start < r->p_end || whole_record(r) != 0;
	pthread_mutex_unlock(&r->rlock);
	return ret;
}
