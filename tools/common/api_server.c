/* SPDX-License-Identifier: MIT */
/*
 * The control socket's server (protocol: api.h and docs/api.md).
 *
 * One thread polls the listening socket, a stop pipe and every client in
 * service, so api_server_stop() never waits on a blocked accept() and no
 * client holds up another: a request is read as it comes, in any number
 * of pieces, and its whole life (complete line read, answer taken) is
 * bounded by API_REQUEST_MS from its accept. The handler runs on this
 * thread, one request at a time: every command is short (the migration
 * runs in the engine's threads), and serialising them keeps it simple.
 *
 * With every slot in use a new client evicts the one that has sent least,
 * then the oldest: a client that sends its line with its connect (godwit
 * status, cancel, quit) is served at its accept, so parked or dripping
 * clients never keep it out. Out of descriptors (EMFILE, ENFILE), the
 * listener rests API_ACCEPT_REST_MS instead of spinning.
 */
#include "common/api.h"
#include "common/usock.h"

#include <godwit/log.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define API_CLIENTS_MAX 16		/* requests in service at once */
#define API_ACCEPT_BURST 16		/* connections accepted per wake-up */
#define API_ACCEPT_REST_MS 100		/* out of descriptors: the listener rests this long */

enum conn_phase {
	CONN_FREE,
	CONN_READ,			/* reading the request line */
	CONN_WRITE,			/* writing the answer */
	CONN_DRAIN,			/* answer sent, reading until the client closes */
};

/* One client in service. Server thread only. */
struct api_conn {
	int fd;				/* -1 when CONN_FREE */
	enum conn_phase phase;
	int64_t accepted_ms;		/* CLOCK_MONOTONIC */
	uint64_t seq;			/* order of accept (eviction: the oldest of the laziest) */
	int64_t deadline_ms;		/* accepted_ms + API_REQUEST_MS: then dropped */
	size_t len;			/* request bytes in line[] */
	bool drain;			/* after the answer: read until closed (overlong request) */
	char *out;			/* the answer line, malloc'ed (CONN_WRITE) */
	size_t out_len, out_off;	/* its length and how much went */
	char line[API_LINE_MAX + 1];
};

struct api_server {
	int listen_fd;			/* set at start, closed at stop */
	int stop_pipe[2];		/* [1] written by api_server_stop */
	pthread_t thread;
	api_handler_fn fn;		/* called on the server thread only */
	void *opaque;
	char *path;
	struct usock_id id;		/* our socket file, so stop never unlinks a successor's */
	int64_t accept_rest_ms;		/* server thread: listener not polled until then */
	uint64_t accepts;		/* server thread: counts them (api_conn.seq) */
	struct api_conn conns[API_CLIENTS_MAX];	/* server thread */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_free(struct api_conn *c, bool close_fd)
{
	if (close_fd && c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->out = NULL;
	c->fd = -1;
	c->phase = CONN_FREE;
}

/* As much of the answer as the socket takes now; then done, or drain. */
static void conn_flush(struct api_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;		/* POLLOUT, until the deadline */
		if (n < 0) {
			conn_free(c, true);
			return;
		}
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	if (!c->drain) {
		conn_free(c, true);
		return;
	}
	/*
	 * Closing with unread input would reset the connection and the
	 * client could lose the answer: read until it closes (or the deadline).
	 */
	shutdown(c->fd, SHUT_WR);
	c->phase = CONN_DRAIN;
}

/* Send @reply (consumed; NULL: out of memory, the client is dropped) without waiting. */
static void conn_answer(struct api_conn *c, json_t *reply)
{
	char *text = reply ? js_dumps(reply) : NULL;

	json_decref(reply);
	if (!text) {
		conn_free(c, true);
		return;
	}
	c->out_len = strlen(text);
	text[c->out_len++] = '\n';	/* over the NUL: one line */
	c->out = text;
	c->out_off = 0;
	c->phase = CONN_WRITE;
	conn_flush(c);
}

/* A whole line (or the client's end, or a full buffer) is in: answer it. */
static void conn_serve(struct api_server *srv, struct api_conn *c, bool too_long)
{
	char err[256], *nl = memchr(c->line, '\n', c->len);
	size_t line_len = nl ? (size_t)(nl - c->line) : c->len;
	bool has_nul = memchr(c->line, '\0', line_len) != NULL;
	struct api_request *req;
	json_t *reply;

	c->line[line_len] = '\0';
	c->drain = too_long;
	req = malloc(sizeof(*req));
	if (!req)
		reply = NULL;
	else if (too_long)
		reply = api_error("request longer than %d bytes", API_LINE_MAX);
	else if (has_nul)
		reply = api_error("NUL byte in request");
	else if (api_parse_request(c->line, req, err, sizeof(err)))
		reply = api_error("%s", err);
	else {
		/* The handler's own writes (a stream's first line) are bounded too. */
		struct timeval tv = { .tv_sec = API_IO_TIMEOUT_MS / 1000 };

		setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		reply = srv->fn(srv->opaque, req, c->fd);
		if (!reply) {
			free(req);
			conn_free(c, false);	/* kept: the fd is the handler's */
			return;
		}
	}
	free(req);
	conn_answer(c, reply);
}

/* What the client sent so far; served once a line is complete. */
static void conn_read(struct api_server *srv, struct api_conn *c)
{
	for (;;) {
		char *buf = c->phase == CONN_DRAIN ? c->line : c->line + c->len;
		size_t room = c->phase == CONN_DRAIN ? sizeof(c->line) : API_LINE_MAX - c->len;
		ssize_t n;

		if (c->phase == CONN_READ && !room) {
			conn_serve(srv, c, true);
			return;
		}
		n = recv(c->fd, buf, room, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 || (n == 0 && (c->phase == CONN_DRAIN || c->len == 0))) {
			conn_free(c, true);	/* gone: nobody to answer */
			return;
		}
		if (c->phase == CONN_DRAIN)
			continue;
		if (n == 0 || memchr(c->line + c->len, '\n', (size_t)n)) {
			c->len += (size_t)n;
			conn_serve(srv, c, false);	/* a client may close its side instead of '\n' */
			return;
		}
		c->len += (size_t)n;
	}
}

/* A free slot, or the one that sent least (then the oldest), dropped. */
static struct api_conn *conn_slot(struct api_server *srv)
{
	struct api_conn *victim = NULL;

	for (unsigned i = 0; i < API_CLIENTS_MAX; i++) {
		struct api_conn *c = &srv->conns[i];

		if (c->phase == CONN_FREE)
			return c;
		if (!victim || c->len < victim->len ||
		    (c->len == victim->len && c->seq < victim->seq))
			victim = c;
	}
	gw_log(GW_LOG_WARN, "cli", "api_evicted", "clients=%d sent_bytes=%zu age_ms=%lld", API_CLIENTS_MAX,
	       victim->len, (long long)(now_ms() - victim->accepted_ms));
	conn_free(victim, true);
	return victim;
}

static void accept_clients(struct api_server *srv)
{
	for (unsigned n = 0; n < API_ACCEPT_BURST; n++) {
		int fd = usock_accept(srv->listen_fd);
		struct api_conn *c;
		char why[160];

		if (fd == -EMFILE || fd == -ENFILE) {
			srv->accept_rest_ms = now_ms() + API_ACCEPT_REST_MS;
			return;
		}
		if (fd < 0)
			return;	/* EAGAIN (none left), ECONNABORTED */
		c = conn_slot(srv);
		c->fd = fd;
		c->len = 0;
		c->drain = false;
		c->accepted_ms = now_ms();
		c->seq = ++srv->accepts;
		c->deadline_ms = c->accepted_ms + API_REQUEST_MS;
		c->phase = CONN_READ;
		if (usock_peer_check(fd, why, sizeof(why))) {
			c->drain = true;
			conn_answer(c, api_error("%s", why));	/* another user: refused in the API's words */
			continue;
		}
		conn_read(srv, c);	/* the line usually came with the connect */
	}
}

static void expire(struct api_server *srv, int64_t now)
{
	for (unsigned i = 0; i < API_CLIENTS_MAX; i++) {
		struct api_conn *c = &srv->conns[i];

		if (c->phase == CONN_FREE || now < c->deadline_ms)
			continue;
		if (c->phase == CONN_READ) {
			c->drain = false;
			conn_answer(c, api_error("no complete request within %d ms", API_REQUEST_MS));
		}
		if (c->phase != CONN_FREE)
			conn_free(c, true);
	}
}

/* Poll timeout: the next deadline or the end of a rest, -1 when none. */
static int next_timeout_ms(const struct api_server *srv, int64_t now)
{
	int64_t next = srv->accept_rest_ms > now ? srv->accept_rest_ms : INT64_MAX;

	for (unsigned i = 0; i < API_CLIENTS_MAX; i++)
		if (srv->conns[i].phase != CONN_FREE && srv->conns[i].deadline_ms < next)
			next = srv->conns[i].deadline_ms;
	return next == INT64_MAX ? -1 : next > now ? (int)(next - now) : 0;
}

static void *server_thread(void *arg)
{
	struct api_server *srv = arg;

	for (;;) {
		struct pollfd pfd[2 + API_CLIENTS_MAX];
		struct api_conn *who[2 + API_CLIENTS_MAX];
		int64_t now = now_ms();
		nfds_t n = 2;

		pfd[0] = (struct pollfd){ .fd = srv->stop_pipe[0], .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = srv->listen_fd, .events = now < srv->accept_rest_ms ? 0 : POLLIN };
		for (unsigned i = 0; i < API_CLIENTS_MAX; i++) {
			struct api_conn *c = &srv->conns[i];

			if (c->phase == CONN_FREE)
				continue;
			pfd[n] = (struct pollfd){ .fd = c->fd, .events = c->phase == CONN_WRITE ? POLLOUT : POLLIN };
			who[n++] = c;
		}
		if (poll(pfd, n, next_timeout_ms(srv, now)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		for (nfds_t i = 2; i < n; i++) {
			if (!pfd[i].revents || who[i]->fd != pfd[i].fd)
				continue;
			if (who[i]->phase == CONN_WRITE)
				conn_flush(who[i]);
			else
				conn_read(srv, who[i]);
		}
		if (pfd[1].revents & POLLIN)
			accept_clients(srv);
		expire(srv, now_ms());
	}
	return NULL;
}

struct api_server *api_server_start(const char *path, api_handler_fn fn, void *opaque,
				    char *err, size_t err_len)
{
	struct api_server *srv = calloc(1, sizeof(*srv));
	int ret;

	if (!srv) {
		snprintf(err, err_len, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	srv->listen_fd = -1;
	srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
	for (unsigned i = 0; i < API_CLIENTS_MAX; i++)
		srv->conns[i].fd = -1;
	srv->fn = fn;
	srv->opaque = opaque;
	srv->path = path ? strdup(path) : NULL;
	if (!srv->path) {
		ret = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	ret = usock_listen(path, &srv->id, err, err_len);
	if (ret < 0)
		goto fail;
	srv->listen_fd = ret;
	/* Accepts in a burst never block the loop. */
	if (fcntl(srv->listen_fd, F_SETFL, O_NONBLOCK) || pipe2(srv->stop_pipe, O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, err_len, "pipe: %s", strerror(errno));
		goto fail_unlink;
	}
	ret = -pthread_create(&srv->thread, NULL, server_thread, srv);
	if (ret) {
		snprintf(err, err_len, "cannot start the API thread: %s", strerror(-ret));
		goto fail_unlink;
	}
	(void)pthread_setname_np(srv->thread, "gw-api");
	return srv;

fail_unlink:
	usock_unlisten(path, &srv->id);
fail:
	if (srv->stop_pipe[0] >= 0) {
		close(srv->stop_pipe[0]);
		close(srv->stop_pipe[1]);
	}
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	free(srv->path);
	free(srv);
	errno = -ret;
	return NULL;
}

void api_server_stop(struct api_server *srv)
{
	if (!srv)
		return;
	while (write(srv->stop_pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(srv->thread, NULL);
	for (unsigned i = 0; i < API_CLIENTS_MAX; i++)
		if (srv->conns[i].phase != CONN_FREE)
			conn_free(&srv->conns[i], true);
	usock_unlisten(srv->path, &srv->id);
	close(srv->listen_fd);
	close(srv->stop_pipe[0]);
	close(srv->stop_pipe[1]);
	free(srv->path);
	free(srv);
}
