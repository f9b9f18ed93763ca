/* SPDX-License-Identifier: MIT */
/*
 * The destination's acceptor (see admit.h): every connection accepted at
 * once, each opening bounded in time and in number, progressing side by
 * side in one poll loop; first frames HELLO and CHAN_HELLO handed over,
 * everything else refused on its own connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <godwit/log.h>
#include "net/admit.h"
#include "net/io.h"
#include "net/transport.h"
#include "util/crc32c.h"
#include "util/lograte.h"
#include "util/thread_name.h"
#include "wire/frame.h"
#include "wire/msg.h"

#define ACCEPT_BURST 16			/* connections accepted per wake-up */
#define REFUSE_SEND_MS 100		/* an ERROR to a stranger: never wait longer */

enum opening_phase {
	PH_PEEK,			/* TLS destination: plain godwit, or a TLS ClientHello? */
	PH_HANDSHAKE,			/* TLS handshake */
	PH_HDR,				/* the first frame's header */
	PH_BODY,			/* its payload */
};

/* A connection in its opening. Acceptor thread only. */
struct opening {
	int fd;				/* -1: free slot; a socket of the admission's sock ops */
	const struct gw_sock_ops *sock;	/* how fd is driven (the transport's) */
	struct gw_tls *tls;
	enum opening_phase phase;
	short events;			/* what it waits for */
	uint64_t t_accept_ns, deadline_ns;
	uint64_t got_bytes;		/* received so far (eviction: the laziest goes first) */
	uint8_t hdr[GW_WIRE_HDR_BYTES];
	size_t hdr_got;
	struct gw_frame_hdr h;
	uint8_t *payload;
	size_t body_got;
	char peer[GW_ADMIT_PEER_MAX];
};

struct gw_admit {
	/* Set at start, read-only after. */
	int listen_fd;
	const struct gw_sock_ops *sock;	/* the transport's calls (rsockets are not kernel fds) */
	struct gw_tls_ctx *tls;
	uint64_t opening_ms;
	bool recovery;			/* PC_RECOVER accepted as a first frame */
	char side[4];
	int wake_pipe[2];		/* [1] written to stop the acceptor */
	pthread_t thread;

	/* Acceptor thread only. */
	struct opening op[GW_ADMIT_MAX_OPENING];

	/* Every line a peer can cause, from any thread (its own lock). */
	struct gw_lograte lograte;

	pthread_mutex_t lock;		/* guards the fields below */
	pthread_cond_t cond;		/* CLOCK_MONOTONIC: queue changed or woken */
	struct gw_admitted queue[GW_ADMIT_QUEUE];
	unsigned q_len;
	bool woken;			/* gw_admit_take returns -ECANCELED */
	bool held;			/* a HELLO was accepted: id and identity valid */
	uint8_t id[GW_WIRE_ID_BYTES];
	uint8_t challenge[GW_WIRE_ID_BYTES];	/* what its data connections echo */
	char identity[GW_TLS_PEER_MAX];
	char holder[GW_ADMIT_PEER_MAX + 64];	/* "" free; else who holds the destination */
	uint64_t held_since_ns;
	char closed_why[128];		/* "" running; else why every HELLO is refused */
	uint64_t refused;
};

/* ---- refusals ---- */

void gw_admitted_release(struct gw_admitted *c)
{
	gw_tls_free(c->tls);
	c->tls = NULL;
	if (c->fd >= 0)
		c->sock->close(c->fd);
	c->fd = -1;
	free(c->payload);
	c->payload = NULL;
}

/* ERROR on a connection nobody else uses, without waiting long; then close. */
static void refuse_fd(const struct gw_sock_ops *sock, int fd, struct gw_tls *tls, uint32_t send_seq, int code,
		      const char *reason)
{
	struct gw_conn tmp;

	gw_conn_init(&tmp, -1);
	gw_conn_adopt(&tmp, fd, sock, tls, 0);	/* its stream: plain (made blocking again) or TLS */
	tmp.send_seq = send_seq;
	gw_conn_set_send_timeout(&tmp, REFUSE_SEND_MS);
	gw_conn_send_error(&tmp, code, reason);
	gw_conn_close(&tmp);	/* closes fd, frees tls */
	pthread_mutex_destroy(&tmp.fd_lock);
	pthread_mutex_destroy(&tmp.send_lock);
}

void gw_admitted_refuse(struct gw_admitted *c, int code, const char *reason)
{
	if (c->fd >= 0)
		refuse_fd(c->sock, c->fd, c->tls, 0, code, reason);
	c->fd = -1;
	c->tls = NULL;
	gw_admitted_release(c);
}

bool gw_admit_log_allow(struct gw_admit *a, const char *event)
{
	return gw_lograte_allow(&a->lograte, event, gw_now_ns());
}

/* A refusal's line, rate-limited. @peer, @reason: our words, a peer's bytes only through gw_log_str. */
static void log_refusal(struct gw_admit *a, const char *event, const char *peer, const char *reason)
{
	pthread_mutex_lock(&a->lock);
	a->refused++;
	pthread_mutex_unlock(&a->lock);
	if (gw_admit_log_allow(a, event))
		gw_log(GW_LOG_WARN, "mig", event, "peer=\"%s\" reason=\"%s\"", peer, reason);
}

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
	log_refusal(a, event, o->peer, reason);
	if (code)
		refuse_fd(o->sock, o->fd, o->tls, 0, code, reason);
	else
		gw_tls_free(o->tls), o->sock->close(o->fd);
	o->tls = NULL;
	o->fd = -1;
	opening_free(o);
}

/* ---- the queue, shared with the migration thread ---- */

int gw_admit_take(struct gw_admit *a, uint16_t type, uint64_t deadline_ns, struct gw_admitted *out)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000ull),
			       .tv_nsec = (long)(deadline_ns % 1000000000ull) };
	int ret = -ETIMEDOUT;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		for (unsigned i = 0; i < a->q_len; i++) {
			if (a->queue[i].type != type)
				continue;
			*out = a->queue[i];
			memmove(&a->queue[i], &a->queue[i + 1], (a->q_len - i - 1) * sizeof(a->queue[0]));
			a->q_len--;
			pthread_mutex_unlock(&a->lock);
			return 0;
		}
		if (a->woken) {
			ret = -ECANCELED;
			break;
		}
		if (!deadline_ns)
			pthread_cond_wait(&a->cond, &a->lock);
		else if (pthread_cond_timedwait(&a->cond, &a->lock, &ts) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void gw_admit_wake(struct gw_admit *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->woken = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

/* a->lock held: the ERROR text for a HELLO while this destination is not free. */
static void busy_text(struct gw_admit *a, char *buf, size_t len)
{
	if (a->closed_why[0])
		snprintf(buf, len, "this destination takes no more migrations: %s", a->closed_why);
	else
		snprintf(buf, len, "busy: this destination is receiving a migration from %s, for %.1f s",
			 a->holder, (gw_now_ns() - a->held_since_ns) / 1e9);
}

void gw_admit_hold(struct gw_admit *a, const uint8_t id[GW_WIRE_ID_BYTES],
		   const uint8_t challenge[GW_WIRE_ID_BYTES], const char *identity, const char *holder)
{
	struct gw_admitted busy[GW_ADMIT_QUEUE];
	unsigned nr_busy = 0, kept = 0;
	char why[GW_ADMIT_PEER_MAX + 160];

	pthread_mutex_lock(&a->lock);
	memcpy(a->id, id, sizeof(a->id));
	memcpy(a->challenge, challenge, sizeof(a->challenge));
	snprintf(a->identity, sizeof(a->identity), "%s", identity);
	snprintf(a->holder, sizeof(a->holder), "%s", holder);
	a->held_since_ns = gw_now_ns();
	a->held = true;
	/* HELLOs that queued meanwhile: busy now. */
	for (unsigned i = 0; i < a->q_len; i++) {
		if (a->queue[i].type == GW_MSG_HELLO)
			busy[nr_busy++] = a->queue[i];
		else
			a->queue[kept++] = a->queue[i];
	}
	a->q_len = kept;
	a->refused += nr_busy;
	busy_text(a, why, sizeof(why));
	pthread_mutex_unlock(&a->lock);
	for (unsigned i = 0; i < nr_busy; i++) {
		if (gw_admit_log_allow(a, "busy_refused"))
			gw_log(GW_LOG_WARN, "mig", "busy_refused", "peer=\"%s\" holder=\"%s\"", busy[i].peer, holder);
		gw_admitted_refuse(&busy[i], -EBUSY, why);
	}
}

void gw_admit_close(struct gw_admit *a, const char *why)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	snprintf(a->closed_why, sizeof(a->closed_why), "%s", why);
	pthread_mutex_unlock(&a->lock);
}

uint64_t gw_admit_refused(struct gw_admit *a)
{
	uint64_t n;

	pthread_mutex_lock(&a->lock);
	n = a->refused;
	pthread_mutex_unlock(&a->lock);
	return n;
}

/* ---- openings: the acceptor thread ---- */

/* Room for one more: evict the opening that sent least, then the oldest. */
static struct opening *free_slot(struct gw_admit *a)
{
	struct opening *victim = NULL;
	char why[96];

	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++) {
		struct opening *o = &a->op[i];

		if (o->fd < 0)
			return o;
		if (!victim || o->got_bytes < victim->got_bytes ||
		    (o->got_bytes == victim->got_bytes && o->t_accept_ns < victim->t_accept_ns))
			victim = o;
	}
	snprintf(why, sizeof(why), "evicted: %d connections already opening", GW_ADMIT_MAX_OPENING);
	opening_refuse(a, victim, "conn_evicted", 0, why);
	return victim;
}

static void accept_new(struct gw_admit *a)
{
	for (unsigned n = 0; n < ACCEPT_BURST; n++) {
		int fd = a->sock->accept(a->listen_fd);
		struct opening *o;

		if (fd < 0)
			return;	/* EAGAIN (none left), or a transient error */
		if (a->sock->set_nonblock(fd, true)) {
			a->sock->close(fd);
			continue;
		}
		if (a->sock->kernel)
			gw_tcp_tune(fd);
		o = free_slot(a);
		o->fd = fd;
		o->sock = a->sock;
		o->t_accept_ns = gw_now_ns();
		o->deadline_ns = o->t_accept_ns + a->opening_ms * 1000000ull;
		o->phase = a->tls ? PH_PEEK : PH_HDR;
		o->events = POLLIN;
		if (a->sock->kernel)
			gw_addr_peer(fd, o->peer, sizeof(o->peer));
		else
			snprintf(o->peer, sizeof(o->peer), "%s", "rsocket");
	}
}

/* Read up to @len: the count, -EAGAIN (o->events set), or -errno (closed: -ECONNRESET). */
/* recv() through the transport's calls (an rsocket is not a kernel fd). */
static ssize_t sock_recv(struct opening *o, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	return o->sock->recvmsg(o->fd, &msg, flags);
}

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
		o->got_bytes += (uint64_t)n;
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
	return 1;
}

static int phase_handshake(struct gw_admit *a, struct opening *o)
{
	int ret = gw_tls_handshake(o->tls, &o->events);
	char why[400], name[GW_LOG_STR_MAX(GW_TLS_PEER_MAX)], esc[GW_LOG_STR_MAX(256)];

	if (ret == -EAGAIN)
		return 0;
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
		busy_text(a, why, sizeof(why));
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

static void *acceptor_main(void *arg)
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

struct gw_admit *gw_admit_start(const struct gw_admit_config *cfg)
{
	struct gw_admit *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;
	int ret;

	if (!a)
		return NULL;
	a->listen_fd = cfg->listen_fd;
	a->sock = cfg->sock ? cfg->sock : &gw_sock_kernel;
	a->tls = cfg->tls;
	a->opening_ms = cfg->opening_ms;
	a->recovery = cfg->recovery;
	snprintf(a->side, sizeof(a->side), "%s", cfg->side ? cfg->side : "dst");
	for (unsigned i = 0; i < GW_ADMIT_MAX_OPENING; i++) {
		a->op[i].fd = -1;
		a->op[i].sock = a->sock;
	}
	pthread_mutex_init(&a->lock, NULL);
	gw_lograte_init(&a->lograte);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pipe2(a->wake_pipe, O_CLOEXEC | O_NONBLOCK)) {
		ret = -errno;
		goto fail;
	}
	/* Accepts never block the loop: the listening socket is non-blocking. */
	a->sock->set_nonblock(a->listen_fd, true);
	ret = -pthread_create(&a->thread, NULL, acceptor_main, a);
	if (!ret) {
		gw_thread_name(a->thread, "gw-accept");
		return a;
	}
	close(a->wake_pipe[0]);
	close(a->wake_pipe[1]);
fail:
	gw_lograte_destroy(&a->lograte);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a);
	errno = -ret;
	return NULL;
}

void gw_admit_stop(struct gw_admit *a)
{
	if (!a)
		return;
	gw_admit_wake(a);
	while (write(a->wake_pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(a->thread, NULL);
	for (unsigned i = 0; i < a->q_len; i++)
		gw_admitted_release(&a->queue[i]);
	close(a->wake_pipe[0]);
	close(a->wake_pipe[1]);
	gw_lograte_destroy(&a->lograte);	/* the last counts of lines not written */
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a);
}
