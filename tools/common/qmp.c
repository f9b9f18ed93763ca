/* SPDX-License-Identifier: MIT */
/*
 * The QMP transport (see qmp.h): greeting, framing of a JSON stream into
 * messages, QEMU's checks of a message (in QEMU's words, so that clients
 * written against QEMU see the same errors), dispatch, and events.
 *
 * The server thread polls the listening socket, its clients and a stop
 * pipe. Messages are parsed by libjansson once qmp_frame() found where one
 * ends; a client's input buffer is bounded (QMP_INPUT_MAX). A client must
 * negotiate within QMP_NEGOTIATE_MS, and with every slot in use a new
 * client evicts the idlest, so silent or hung clients never lock QMP out.
 * Out of descriptors (EMFILE, ENFILE), the listener rests instead of
 * spinning.
 */
#include "common/qmp.h"
#include "common/usock.h"

#include <godwit/log.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define QMP_SEND_TIMEOUT_MS 5000	/* an answer a client does not take in this time drops it */
#define QMP_ACCEPT_REST_MS 100		/* out of descriptors: the listener rests this long */

struct qmp_client {
	int fd;				/* -1: free slot */
	bool negotiated;		/* lock: qmp_capabilities done, events go out */
	bool backlogged;		/* server thread: its answers pile up unread: not read until writable */
	size_t len;			/* server thread: bytes in @in */
	int64_t accepted_ms;		/* server thread: CLOCK_MONOTONIC */
	uint64_t active_seq;		/* server thread: order of its accept or last input (eviction) */
	char in[QMP_INPUT_MAX + 1];	/* server thread */
};

struct qmp_server {
	/* Set at start, read-only afterwards. */
	const struct qmp_command *cmds;
	void *opaque;
	json_t *greeting;		/* {"QMP": ...} */
	char *path;
	struct usock_id id;
	int listen_fd;
	int stop_pipe[2];
	pthread_t thread;
	int64_t accept_rest_ms;		/* server thread: EMFILE/ENFILE, listener not polled until then */
	uint64_t seq;			/* server thread: counts accepts and inputs */

	pthread_mutex_t lock;		/* guards every client's fd and negotiated, and writes */
	struct qmp_client clients[QMP_CLIENTS_MAX];
};

void qmp_error_set(struct qmp_error *e, const char *cls, const char *fmt, ...)
{
	va_list ap;

	e->cls = cls;
	va_start(ap, fmt);
	vsnprintf(e->desc, sizeof(e->desc), fmt, ap);
	va_end(ap);
}

long qmp_frame(const char *buf, size_t len)
{
	size_t i = 0;
	int depth = 0;
	bool in_str = false, esc = false;

	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
		i++;
	if (i == len)
		return 0;
	if (buf[i] != '{' && buf[i] != '[')
		return -1;
	for (; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[')
			depth++;
		else if ((c == '}' || c == ']') && --depth == 0)
			return (long)(i + 1);
	}
	return 0;
}

/* Caller holds srv->lock. Write @v and a newline to @c; false when @c must go. */
static bool send_locked(struct qmp_client *c, const json_t *v, bool wait)
{
	char *text = js_dumps(v);
	size_t len, off = 0;

	if (!text)
		return true;	/* out of memory: lose this message, keep the client */
	len = strlen(text);
	text[len] = '\n';
	while (off < len + 1) {
		ssize_t n = send(c->fd, text + off, len + 1 - off,
				 MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(text);
			return false;	/* gone, or not reading (a partial message ends the stream) */
		}
		off += (size_t)n;
	}
	free(text);
	return true;
}

static void drop_locked(struct qmp_client *c)
{
	close(c->fd);
	c->fd = -1;
	c->negotiated = false;
	c->len = 0;
}

static void send_answer(struct qmp_server *srv, struct qmp_client *c, json_t *v)
{
	pthread_mutex_lock(&srv->lock);
	if (c->fd >= 0 && !send_locked(c, v, true))
		drop_locked(c);
	pthread_mutex_unlock(&srv->lock);
	json_decref(v);
}

static json_t *error_answer(const char *cls, const char *desc, json_t *id)
{
	json_t *o = json_pack("{s:{s:s,s:s}}", "error", "class", cls, "desc", desc);

	if (o && id)
		json_object_set(o, "id", id);
	return o;
}

static void timestamp(json_t *o)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	json_object_set_new(o, "timestamp", json_pack("{s:I,s:I}", "seconds", (json_int_t)tv.tv_sec,
						       "microseconds", (json_int_t)tv.tv_usec));
}

void qmp_server_event(struct qmp_server *srv, const char *name, json_t *data)
{
	json_t *o = json_pack("{s:s}", "event", name);

	if (!srv || !o) {
		json_decref(o);
		return;
	}
	if (data)
		json_object_set(o, "data", data);
	timestamp(o);
	pthread_mutex_lock(&srv->lock);
	for (unsigned i = 0; i < QMP_CLIENTS_MAX; i++) {
		struct qmp_client *c = &srv->clients[i];

		if (c->fd >= 0 && c->negotiated && !send_locked(c, o, false))
			drop_locked(c);
	}
	pthread_mutex_unlock(&srv->lock);
	json_decref(o);
}

static const struct qmp_command *find(const struct qmp_server *srv, const char *name)
{
	for (const struct qmp_command *k = srv->cmds; k->name; k++)
		if (!strcmp(k->name, name))
			return k;
	return NULL;
}

/* Every argument of @args is one @k takes: NULL, or the error answer. */
static json_t *check_args(const struct qmp_command *k, json_t *args, json_t *id)
{
	const char *key;
	json_t *v;
	char desc[160];

	if (k->args && k->args[0] && !strcmp(k->args[0], "*"))
		return NULL;	/* the command checks its own */
	json_object_foreach(args, key, v) {
		const char *const *a;

		for (a = k->args; a && *a && strcmp(*a, key); a++)
			;
		if (!a || !*a) {
			snprintf(desc, sizeof(desc), "Parameter '%s' is unexpected", key);
			return error_answer("GenericError", desc, id);
		}
	}
	return NULL;
}

/* One message from @c: QEMU's checks, then the command. The answer, or NULL (none). */
static json_t *dispatch(struct qmp_server *srv, struct qmp_client *c, json_t *msg)
{
	const struct qmp_command *k;
	struct qmp_error e = { "GenericError", "" };
	json_t *id, *args, *ret, *answer;
	const char *key, *name;
	bool negotiated;
	json_t *v;
	char desc[200];

	if (!json_is_object(msg))
		return error_answer("GenericError", "QMP input must be a JSON object", NULL);
	id = json_object_get(msg, "id");
	json_object_foreach(msg, key, v) {
		if (strcmp(key, "execute") && strcmp(key, "arguments") && strcmp(key, "id")) {
			snprintf(desc, sizeof(desc), "QMP input member '%s' is unexpected", key);
			return error_answer("GenericError", desc, id);
		}
	}
	v = json_object_get(msg, "execute");
	if (!v)
		return error_answer("GenericError", "QMP input lacks member 'execute'", id);
	if (!json_is_string(v))
		return error_answer("GenericError", "QMP input member 'execute' must be a string", id);
	name = json_string_value(v);
	args = json_object_get(msg, "arguments");
	if (args && !json_is_object(args))
		return error_answer("GenericError", "QMP input member 'arguments' must be an object", id);
	pthread_mutex_lock(&srv->lock);
	negotiated = c->negotiated;
	pthread_mutex_unlock(&srv->lock);
	if (!strcmp(name, "qmp_capabilities") && negotiated)
		return error_answer("CommandNotFound",
				    "Capabilities negotiation is already complete, command ignored", id);
	if (strcmp(name, "qmp_capabilities") && !negotiated)
		return error_answer("CommandNotFound",
				    "Expecting capabilities negotiation with 'qmp_capabilities'", id);
	k = find(srv, name);
	if (!k) {
		snprintf(desc, sizeof(desc), "The command %s has not been found", name);
		return error_answer("CommandNotFound", desc, id);
	}
	args = args ? json_incref(args) : json_object();
	answer = check_args(k, args, id);
	if (answer) {
		json_decref(args);
		return answer;
	}
	ret = k->fn(srv->opaque, args, &e);
	json_decref(args);
	if (!ret)
		return error_answer(e.cls, e.desc, id);
	if (!strcmp(name, "qmp_capabilities")) {
		pthread_mutex_lock(&srv->lock);
		c->negotiated = true;
		pthread_mutex_unlock(&srv->lock);
	}
	answer = json_object();
	if (answer)
		json_object_set_new(answer, "return", ret);
	else
		json_decref(ret);
	if (answer && id)
		json_object_set(answer, "id", id);
	return answer;
}

/* Everything complete in @c's buffer. False when @c was dropped. */
static bool serve_input(struct qmp_server *srv, struct qmp_client *c)
{
	char perr[200], desc[260];

	for (;;) {
		long n = qmp_frame(c->in, c->len);
		struct pollfd out = { .fd = c->fd, .events = POLLOUT };
		json_t *msg, *answer;

		if (n == 0)
			break;
		/*
		 * A client that does not read its answers is not read either
		 * until it does: the server never waits on one client's full
		 * socket while the others (cancel, quit) wait on the server.
		 */
		if (poll(&out, 1, 0) != 1 || !(out.revents & POLLOUT)) {
			c->backlogged = true;
			return true;
		}
		if (n < 0) {
			/* Not JSON text: answer once, skip the line. */
			char *nl = memchr(c->in, '\n', c->len);

			if (!nl && c->len < QMP_INPUT_MAX)
				break;
			n = nl ? nl - c->in + 1 : (long)c->len;
			send_answer(srv, c, error_answer("GenericError", "JSON parse error, invalid token", NULL));
		} else {
			msg = js_parse(c->in, (size_t)n, perr, sizeof(perr));
			if (!msg) {
				snprintf(desc, sizeof(desc), "JSON parse error, %s", perr);
				answer = error_answer("GenericError", desc, NULL);
			} else {
				answer = dispatch(srv, c, msg);
			}
			json_decref(msg);
			if (answer)
				send_answer(srv, c, answer);
		}
		memmove(c->in, c->in + n, c->len - (size_t)n);
		c->len -= (size_t)n;
		if (c->fd < 0)
			return false;
	}
	if (c->len >= QMP_INPUT_MAX) {
		send_answer(srv, c, error_answer("GenericError", "JSON parse error, input too long", NULL));
		pthread_mutex_lock(&srv->lock);
		if (c->fd >= 0)
			drop_locked(c);
		pthread_mutex_unlock(&srv->lock);
		return false;
	}
	return true;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send @why in QMP's words to a client on its way out, without waiting. */
static void refuse_fd(int fd, const char *why)
{
	struct qmp_client tmp = { .fd = fd };
	json_t *e = error_answer("GenericError", why, NULL);

	if (e)
		send_locked(&tmp, e, false);
	json_decref(e);
}

/*
 * Caller holds srv->lock. A free slot, or, all in use, the idlest client
 * (one that never negotiated first, then the longest without input) told
 * why and dropped: silent or hung clients never keep cancel and quit out.
 */
static struct qmp_client *slot_locked(struct qmp_server *srv)
{
	struct qmp_client *victim = NULL;

	for (unsigned i = 0; i < QMP_CLIENTS_MAX; i++) {
		struct qmp_client *c = &srv->clients[i];

		if (c->fd < 0)
			return c;
		if (!victim || (!c->negotiated && victim->negotiated) ||
		    (c->negotiated == victim->negotiated && c->active_seq < victim->active_seq))
			victim = c;
	}
	gw_log(GW_LOG_WARN, "cli", "qmp_evicted", "clients=%d negotiated=%s age_ms=%lld", QMP_CLIENTS_MAX,
	       victim->negotiated ? "yes" : "no", (long long)(now_ms() - victim->accepted_ms));
	refuse_fd(victim->fd, "evicted: every QMP slot in use and this client the idlest");
	drop_locked(victim);
	return victim;
}

static void accept_client(struct qmp_server *srv)
{
	int fd = usock_accept(srv->listen_fd);
	struct timeval tv = { QMP_SEND_TIMEOUT_MS / 1000, 0 };
	struct qmp_client *c;
	char why[160];

	if (fd == -EMFILE || fd == -ENFILE)
		srv->accept_rest_ms = now_ms() + QMP_ACCEPT_REST_MS;	/* rest rather than spin */
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (usock_peer_check(fd, why, sizeof(why))) {
		refuse_fd(fd, why);	/* another user: refused before the greeting */
		close(fd);
		return;
	}
	pthread_mutex_lock(&srv->lock);
	c = slot_locked(srv);
	c->fd = fd;
	c->len = 0;
	c->negotiated = false;
	c->backlogged = false;
	c->accepted_ms = now_ms();
	c->active_seq = ++srv->seq;
	if (!send_locked(c, srv->greeting, true))
		drop_locked(c);
	pthread_mutex_unlock(&srv->lock);
}

/* Clients that did not negotiate within QMP_NEGOTIATE_MS go. The next such deadline, or -1. */
static int expire(struct qmp_server *srv)
{
	int64_t now = now_ms(), next = srv->accept_rest_ms > now ? srv->accept_rest_ms : INT64_MAX;

	pthread_mutex_lock(&srv->lock);
	for (unsigned i = 0; i < QMP_CLIENTS_MAX; i++) {
		struct qmp_client *c = &srv->clients[i];

		if (c->fd < 0 || c->negotiated)
			continue;
		if (now >= c->accepted_ms + QMP_NEGOTIATE_MS) {
			refuse_fd(c->fd, "no qmp_capabilities in time");
			drop_locked(c);
		} else if (c->accepted_ms + QMP_NEGOTIATE_MS < next) {
			next = c->accepted_ms + QMP_NEGOTIATE_MS;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	return next == INT64_MAX ? -1 : (int)(next - now);
}

static void read_client(struct qmp_server *srv, struct qmp_client *c)
{
	ssize_t n = recv(c->fd, c->in + c->len, QMP_INPUT_MAX - c->len, MSG_DONTWAIT);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		pthread_mutex_lock(&srv->lock);
		drop_locked(c);
		pthread_mutex_unlock(&srv->lock);
		return;
	}
	c->len += (size_t)n;
	c->active_seq = ++srv->seq;
	serve_input(srv, c);
}

static void *server_thread(void *arg)
{
	struct qmp_server *srv = arg;

	for (;;) {
		struct pollfd pfd[QMP_CLIENTS_MAX + 2];
		struct qmp_client *who[QMP_CLIENTS_MAX + 2] = { NULL };
		int timeout_ms = expire(srv);
		nfds_t n = 2;

		pfd[0] = (struct pollfd){ .fd = srv->stop_pipe[0], .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = srv->listen_fd,
					  .events = now_ms() < srv->accept_rest_ms ? 0 : POLLIN };
		pthread_mutex_lock(&srv->lock);
		for (unsigned i = 0; i < QMP_CLIENTS_MAX; i++) {
			if (srv->clients[i].fd >= 0) {
				pfd[n] = (struct pollfd){ .fd = srv->clients[i].fd,
							  .events = srv->clients[i].backlogged ? POLLOUT : POLLIN };
				who[n++] = &srv->clients[i];
			}
		}
		pthread_mutex_unlock(&srv->lock);
		if (poll(pfd, n, timeout_ms) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		if (pfd[1].revents & POLLIN)
			accept_client(srv);
		for (nfds_t i = 2; i < n; i++) {
			if (!pfd[i].revents || who[i]->fd != pfd[i].fd)
				continue;
			if (who[i]->backlogged && (pfd[i].revents & POLLOUT)) {
				who[i]->backlogged = false;
				serve_input(srv, who[i]);
			} else {
				read_client(srv, who[i]);
			}
		}
	}
	return NULL;
}

struct qmp_server *qmp_server_start(const char *path, const struct qmp_command *cmds,
				    void *opaque, json_t *greeting, char *err, size_t err_len)
{
	struct qmp_server *srv = calloc(1, sizeof(*srv));
	int ret;

	if (!srv) {
		snprintf(err, err_len, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	srv->cmds = cmds;
	srv->opaque = opaque;
	srv->listen_fd = -1;
	srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
	for (unsigned i = 0; i < QMP_CLIENTS_MAX; i++)
		srv->clients[i].fd = -1;
	pthread_mutex_init(&srv->lock, NULL);
	srv->greeting = json_pack("{s:O}", "QMP", greeting);
	srv->path = path ? strdup(path) : NULL;
	if (!srv->greeting || !srv->path) {
		ret = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	ret = usock_listen(path, &srv->id, err, err_len);
	if (ret < 0)
		goto fail;
	srv->listen_fd = ret;
	if (pipe2(srv->stop_pipe, O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, err_len, "pipe: %s", strerror(errno));
		goto fail;
	}
	ret = -pthread_create(&srv->thread, NULL, server_thread, srv);
	if (ret) {
		snprintf(err, err_len, "cannot start the QMP thread: %s", strerror(-ret));
		goto fail;
	}
	(void)pthread_setname_np(srv->thread, "gw-qmp");
	return srv;
fail:
	if (srv->listen_fd >= 0) {
		usock_unlisten(path, &srv->id);
		close(srv->listen_fd);
	}
	if (srv->stop_pipe[0] >= 0) {
		close(srv->stop_pipe[0]);
		close(srv->stop_pipe[1]);
	}
	json_decref(srv->greeting);
	free(srv->path);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	errno = -ret;
	return NULL;
}

void qmp_server_stop(struct qmp_server *srv)
{
	if (!srv)
		return;
	while (write(srv->stop_pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(srv->thread, NULL);
	pthread_mutex_lock(&srv->lock);
	for (unsigned i = 0; i < QMP_CLIENTS_MAX; i++)
		if (srv->clients[i].fd >= 0)
			drop_locked(&srv->clients[i]);
	pthread_mutex_unlock(&srv->lock);
	usock_unlisten(srv->path, &srv->id);
	close(srv->listen_fd);
	close(srv->stop_pipe[0]);
	close(srv->stop_pipe[1]);
	json_decref(srv->greeting);
	free(srv->path);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}
