/* SPDX-License-Identifier: MIT */
/*
 * The destination's acceptor thread (see admit.h): every connection
 * accepted at once, each opening bounded in time and kept in the pool of
 * what it sent so far, progressing side by side in one poll loop; first
 * frames HELLO and CHAN_HELLO handed over (net/admit.c's queue),
 * everything else refused on its own connection.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <godwit/log.h>
#include "net/admit_int.h"
#include "net/io.h"
#include "net/transport.h"
#include "util/crc32c.h"
#include "wire/msg.h"

#define ACCEPT_BURST 16			/* connections accepted per wake-up */

static void opening_free(struct opening *o)
{
	gw_tls_free(o->tls);
	if (o->fd >= 0)
		o->sock->close(o->fd);
	free(o->payload);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
}

/* Refuse an opening connection: log, ERROR (@code 0: none) on it, close. */
static void opening_refuse(struct gw_admit *a, struct opening *o, const char *event, int code,
			   const char *reason)
{
	admit_log_refusal(a, event, o->peer, reason);
	admit_refuse_fd(o->sock, o->fd, o->tls, code, reason);
	o->tls = NULL;
	o->fd = -1;
	opening_free(o);
}

/* ---- pools ---- */

static const unsigned pool_cap[POOL__COUNT] = {
	[POOL_SILENT] = GW_ADMIT_SILENT, [POOL_HANDSHAKE] = GW_ADMIT_HANDSHAKE, [POOL_FRAME] = GW_ADMIT_FRAME,
};
static const char *const pool_name[POOL__COUNT] = {
	[POOL_SILENT] = "silent", [POOL_HANDSHAKE] = "TLS handshake", [POOL_FRAME] = "first frame",
};

static void advance(struct gw_admit *a, struct opening *o);

/* recv() through the transport's calls (an rsocket is not a kernel fd). */
static ssize_t sock_recv(struct opening *o, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	return o->sock->recvmsg(o->fd, &msg, flags);
}

/* Whether bytes wait on @o that the loop has not read yet. */
static bool has_input(struct opening *o)
{
	uint8_t b;

	return sock_recv(o, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* The opening of @pool that goes first, when @pool is full; else NULL. */
static struct opening *pool_victim(struct gw_admit *a, enum opening_pool pool)
{
	struct opening *victim = NULL;
	unsigned n = 0;

	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++) {
		struct opening *o = &a->op[i];

		if (o->fd < 0 || o->pool != pool)
			continue;
		n++;
		if (!victim || o->progress_ns < victim->progress_ns)
			victim = o;
	}
	return n >= pool_cap[pool] ? victim : NULL;
}

/*
 * Room for one more in @pool. The victim is the opening of that pool whose
 * last step is oldest (in the silent pool: the oldest accepted), and never
 * one with bytes waiting: that one is advanced instead (it leaves the pool,
 * is handed over or refused). It is told why where a godwit peer can read
 * it: plain, or after its TLS handshake.
 */
static void make_room(struct gw_admit *a, enum opening_pool pool)
{
	struct opening *v;
	char why[160];

	while ((v = pool_victim(a, pool))) {
		if (pool == POOL_SILENT && has_input(v)) {
			advance(a, v);
			if (v->fd < 0 || v->pool != POOL_SILENT)
				continue;
		}
		snprintf(why, sizeof(why), "evicted: %u connections already in the %s pool of openings, this "
			 "one the longest without a step", pool_cap[pool], pool_name[pool]);
		opening_refuse(a, v, "conn_evicted", v->phase >= PH_HDR ? -EBUSY : 0, why);
	}
}

/* @o took its first step into @pool (a byte of its frame, its TLS ClientHello). */
static void promote(struct gw_admit *a, struct opening *o, enum opening_pool pool)
{
	if (o->pool == pool)
		return;
	make_room(a, pool);
	o->pool = pool;
	o->progress_ns = gw_now_ns();
}

static struct opening *free_slot(struct gw_admit *a)
{
	make_room(a, POOL_SILENT);
	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++)
		if (a->op[i].fd < 0)
			return &a->op[i];
	return NULL;	/* not reached: every pool below its cap leaves a slot */
}

static void accept_new(struct gw_admit *a)
{
	for (unsigned n = 0; n < ACCEPT_BURST; n++) {
		int fd = a->sock->accept(a->listen_fd);
		struct opening *o;

		if (fd < 0)
			return;	/* EAGAIN (none left), or a transient error */
		if (a->sock->set_nonblock(fd, true) || !(o = free_slot(a))) {
			a->sock->close(fd);
			continue;
		}
		if (a->sock->kernel)
			gw_tcp_tune(fd);
		o->fd = fd;
		o->sock = a->sock;
		o->pool = POOL_SILENT;
		o->t_accept_ns = o->progress_ns = gw_now_ns();
		o->deadline_ns = o->t_accept_ns + a->opening_ms * 1000000ull;
		o->phase = a->tls ? PH_PEEK : PH_HDR;
		o->events = POLLIN;
		if (a->sock->kernel)
			gw_addr_peer(fd, o->peer, sizeof(o->peer));
		else
			snprintf(o->peer, sizeof(o->peer), "%s", "rsocket");
		/* What came with the connection moves it out of the silent pool at once. */
		advance(a, o);
	}
}

/* Read up to @len: the count, -EAGAIN (o->events set), or -errno (closed: -ECONNRESET). */
static ssize_t opening_read(struct opening *o, void *buf, size_t len)
{
	ssize_t n;

	if (o->tls) {
		n = gw_tls_read(o->tls, buf, len, &o->events);
	} else {
		n = sock_recv(o, buf, len, MSG_DONTWAIT);
		if (n == 0)
			n = -ECONNRESET;
		else if (n < 0)
			n = errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
		o->events = POLLIN;
	}
	if (n > 0)
		o->progress_ns = gw_now_ns();
	return n;
}

/*
 * A TLS destination: the first byte says whether a TLS client (a record of
 * type 0x16, handshake) or a plain godwit source ("GWM1") came.
 */
static int phase_peek(struct gw_admit *a, struct opening *o)
{
	uint8_t b;
	ssize_t n = sock_recv(o, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	char why[160];

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
		opening_refuse(a, o, "conn_refused", 0, "closed before saying anything");
		return -1;
	}
	if (n < 0)
		return 0;
	if (b != 0x16) {
		bool godwit = b == 'G';

		opening_refuse(a, o, "conn_refused", godwit ? -EACCES : 0, godwit ?
			       "this destination requires TLS: connect with --tls-creds or --tls-psk" :
			       "not a TLS client");
		return -1;
	}
	o->tls = gw_tls_new(a->tls, o->fd, NULL, why, sizeof(why));
	if (!o->tls) {
		opening_refuse(a, o, "conn_refused", 0, why);
		return -1;
	}
	o->phase = PH_HANDSHAKE;
	promote(a, o, POOL_HANDSHAKE);
	o->tls_stage = gw_tls_handshake_stage(o->tls);
	return 1;
}

static int phase_handshake(struct gw_admit *a, struct opening *o)
{
	int ret = gw_tls_handshake(o->tls, &o->events);
	char why[400], name[GW_LOG_STR_MAX(GW_TLS_PEER_MAX)], esc[GW_LOG_STR_MAX(256)];

	if (ret == -EAGAIN) {
		/* A step is a handshake message taken, not a byte: a drip moves nothing. */
		int stage = gw_tls_handshake_stage(o->tls);

		if (stage != o->tls_stage)
			o->tls_stage = stage, o->progress_ns = gw_now_ns();
		return 0;
	}
	if (ret) {	/* the refusal may name the peer's certificate: its bytes */
		opening_refuse(a, o, "tls_refused", 0, gw_log_str(esc, sizeof(esc), gw_tls_error(o->tls)));
		return -1;
	}
	/* The certificate's CN is the peer's bytes: escaped once, here (o->peer is safe text). */
	snprintf(o->peer + strlen(o->peer), sizeof(o->peer) - strlen(o->peer), " %s",
		 gw_log_str(name, sizeof(name), gw_tls_peer(o->tls)));
	if (!gw_tls_ctx_authorized(a->tls, o->tls)) {
		/* Authenticated but not allowed here: it may be told why, over TLS. */
		snprintf(why, sizeof(why), "the %.200s presented by the source is not allowed by this "
			 "destination's --tls-authz", name);
		opening_refuse(a, o, "tls_refused", -EACCES, why);
		return -1;
	}
	o->phase = PH_HDR;
	promote(a, o, POOL_FRAME);	/* authenticated: only others like it can evict it */
	return 1;
}

static int phase_hdr(struct gw_admit *a, struct opening *o)
{
	ssize_t n = opening_read(o, o->hdr + o->hdr_got, sizeof(o->hdr) - o->hdr_got);
	char why[GW_LOG_STR_MAX(256)];
	int ret;

	if (n == -EAGAIN)
		return 0;
	if (n < 0) {
		opening_refuse(a, o, "conn_refused", 0, o->tls && gw_tls_error(o->tls)[0] ?
			       gw_log_str(why, sizeof(why), gw_tls_error(o->tls)) : "closed before its first frame");
		return -1;
	}
	o->hdr_got += (size_t)n;
	if (!a->tls && o->hdr[0] == 0x16) {	/* a TLS record, not "GWM1" */
		opening_refuse(a, o, "conn_refused", -EACCES,
			       "this destination does not use TLS (no --tls-creds): connect without TLS");
		return -1;
	}
	/* Not a godwit frame from its first bytes on: no need to wait for 24 of them. */
	if (memcmp(o->hdr, "GWM1", o->hdr_got < 4 ? o->hdr_got : 4)) {
		opening_refuse(a, o, "conn_refused", -EPROTO, "not a godwit frame: expected HELLO or CHAN_HELLO");
		return -1;
	}
	promote(a, o, POOL_FRAME);
	if (o->hdr_got < sizeof(o->hdr))
		return 1;
	ret = gw_frame_hdr_decode(o->hdr, &o->h);
	if (ret || o->h.seq != 0) {
		if (ret)
			gw_frame_hdr_why(o->hdr, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "a first frame with sequence number %u, not 0", o->h.seq);
		opening_refuse(a, o, "conn_refused", ret ? ret : -EPROTO, why);
		return -1;
	}
	if (o->h.type != GW_MSG_HELLO && o->h.type != GW_MSG_CHAN_HELLO &&
	    !(a->recovery && o->h.type == GW_MSG_PC_RECOVER)) {
		snprintf(why, sizeof(why), "expected a HELLO or CHAN_HELLO frame, got %s", gw_frame_type_name(o->h.type));
		opening_refuse(a, o, "conn_refused", -EPROTO, why);
		return -1;
	}
	o->payload = malloc(o->h.len ? o->h.len : 1);
	if (!o->payload) {
		opening_refuse(a, o, "conn_refused", -ENOMEM, "out of memory");
		return -1;
	}
	o->phase = PH_BODY;
	return 1;
}

/*
 * a->lock held: whether a data connection (or a recovery's PC_RECOVER)
 * belongs to the migration held, and why not.
 */
static const char *channel_refusal(struct gw_admit *a, const struct opening *o)
{
	union gw_msg m;
	const uint8_t *id;

	if (gw_msg_decode(o->h.type, o->payload, o->h.len, &m, NULL, 0))
		return o->h.type == GW_MSG_PC_RECOVER ? "malformed PC_RECOVER" : "malformed CHAN_HELLO";
	id = o->h.type == GW_MSG_PC_RECOVER ? m.pc_recover.id : m.chan_hello.id;
	if (!a->held || memcmp(id, a->id, sizeof(a->id)))
		return "unknown migration id";
	if (o->h.type == GW_MSG_CHAN_HELLO && memcmp(m.chan_hello.challenge, a->challenge, sizeof(a->challenge)))
		return "the connection does not answer this destination's challenge (a replayed or stale stream)";
	if (strcmp(a->identity, o->tls ? gw_tls_peer(o->tls) : ""))
		return "not the identity of the control connection";
	return NULL;
}

/* The first frame is whole and its CRC right: hand it over, or refuse it. */
static void dispatch(struct gw_admit *a, struct opening *o)
{
	char why[GW_ADMIT_PEER_MAX + 160] = "";
	const char *deny = NULL, *event = "conn_refused";
	int code = 0;

	pthread_mutex_lock(&a->lock);
	if (o->h.type == GW_MSG_HELLO && (a->held || a->closed_why[0])) {
		admit_busy_text(a, why, sizeof(why));
		code = -EBUSY;
		event = "busy_refused";
	} else if (o->h.type != GW_MSG_HELLO && (deny = channel_refusal(a, o))) {
		snprintf(why, sizeof(why), "%s", deny);
		code = -EACCES;
	} else if (a->q_len == GW_ADMIT_QUEUE) {
		snprintf(why, sizeof(why), "busy: too many connections waiting");
		code = -EBUSY;
	} else {
		struct gw_admitted *c = &a->queue[a->q_len++];

		*c = (struct gw_admitted){ .fd = o->fd, .sock = o->sock, .tls = o->tls, .type = o->h.type,
					   .payload = o->payload, .len = o->h.len };
		snprintf(c->peer, sizeof(c->peer), "%s", o->peer);
		snprintf(c->identity, sizeof(c->identity), "%s", o->tls ? gw_tls_peer(o->tls) : "");
		pthread_cond_broadcast(&a->cond);
		o->fd = -1;
		o->tls = NULL;
		o->payload = NULL;
	}
	pthread_mutex_unlock(&a->lock);
	if (code)
		opening_refuse(a, o, event, code, why);
	else
		opening_free(o);
}

static int phase_body(struct gw_admit *a, struct opening *o)
{
	ssize_t n = o->body_got < o->h.len ? opening_read(o, o->payload + o->body_got, o->h.len - o->body_got) : 0;
	uint32_t crc;

	if (n == -EAGAIN)
		return 0;
	if (n < 0) {
		opening_refuse(a, o, "conn_refused", 0, "closed in its first frame");
		return -1;
	}
	o->body_got += (size_t)n;
	if (o->body_got < o->h.len)
		return 1;
	gw_frame_hdr_set_crc(o->hdr, 0);
	crc = gw_crc32c(gw_crc32c(0, o->hdr, sizeof(o->hdr)), o->payload, o->h.len);
	if (crc != o->h.crc) {
		opening_refuse(a, o, "conn_refused", -EBADMSG, "checksum mismatch in the first frame");
		return -1;
	}
	dispatch(a, o);
	return -1;
}

/* Advance one opening as far as it goes without waiting. */
static void advance(struct gw_admit *a, struct opening *o)
{
	int ret = 1;

	while (ret > 0 && o->fd >= 0) {
		switch (o->phase) {
		case PH_PEEK:
			ret = phase_peek(a, o);
			break;
		case PH_HANDSHAKE:
			ret = phase_handshake(a, o);
			break;
		case PH_HDR:
			ret = phase_hdr(a, o);
			break;
		case PH_BODY:
			ret = phase_body(a, o);
			break;
		}
	}
}

static void expire(struct gw_admit *a, uint64_t now)
{
	char why[96];

	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++) {
		struct opening *o = &a->op[i];

		if (o->fd < 0 || now < o->deadline_ns)
			continue;
		snprintf(why, sizeof(why), "no %s within %llu ms", o->phase == PH_HANDSHAKE ? "TLS handshake" :
			 "complete first frame", (unsigned long long)a->opening_ms);
		opening_refuse(a, o, "conn_refused", o->phase >= PH_HDR ? -ETIMEDOUT : 0, why);
	}
}

void *admit_acceptor_main(void *arg)
{
	struct gw_admit *a = arg;
	struct pollfd pfd[2 + GW_ADMIT_MAX_OPENING];
	struct opening *who[2 + GW_ADMIT_MAX_OPENING];

	gw_log_set_side(a->side);
	for (;;) {
		uint64_t now = gw_now_ns(), next = gw_lograte_flush(&a->lograte, now, false);
		unsigned n = 2;
		int r, timeout_ms = -1;

		pfd[0] = (struct pollfd){ .fd = a->listen_fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = a->wake_pipe[0], .events = POLLIN };
		for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++) {
			struct opening *o = &a->op[i];

			if (o->fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = o->fd, .events = o->events ? o->events : POLLIN };
			who[n++] = o;
			if (!next || o->deadline_ns < next)
				next = o->deadline_ns;
		}
		if (next)
			timeout_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		r = a->sock->poll(pfd, n, timeout_ms);	/* rpoll takes kernel fds too (the wake pipe) */
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		for (unsigned i = 2; r > 0 && i < n; i++)
			if (pfd[i].revents && who[i]->fd >= 0)
				advance(a, who[i]);
		if (r > 0 && (pfd[0].revents & POLLIN))
			accept_new(a);
		expire(a, gw_now_ns());
	}
	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++)
		opening_free(&a->op[i]);
	return NULL;
}

