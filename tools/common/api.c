/* SPDX-License-Identifier: MIT */
/*
 * Control socket requests, answers and client (protocol: api.h and
 * docs/api.md); the server is api_server.c.
 */
#include "common/api.h"
#include "common/usock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define API_REPLY_MAX (1u << 20)	/* an answer longer than this is malformed */

/* Copy @s into the request's text at *@at; NULL when it is full. */
static const char *keep(struct api_request *req, size_t *at, const char *s, size_t n)
{
	char *d = req->text + *at;

	if (*at + n + 1 > sizeof(req->text))
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	*at += n + 1;
	return d;
}

static int add_arg(struct api_request *req, size_t *at, const char *key, size_t key_len,
		   const char *value, size_t value_len, char *err, size_t err_len)
{
	struct api_arg *a;

	if (req->nr_args == API_ARGS_MAX) {
		snprintf(err, err_len, "too many arguments (at most %d)", API_ARGS_MAX);
		return -EINVAL;
	}
	a = &req->args[req->nr_args];
	a->key = keep(req, at, key, key_len);
	a->value = keep(req, at, value, value_len);
	if (!a->key || !a->value) {
		snprintf(err, err_len, "request too long");
		return -EINVAL;
	}
	req->nr_args++;
	return 0;
}

/* {"command":"migrate","url":"unix:/x","channels":4}: the same request as words. */
static int parse_json_request(const char *line, struct api_request *req, char *err, size_t err_len)
{
	char perr[160], num[64];
	const char *key, *cmd;
	json_t *o, *v;
	size_t at = 0;
	int ret = 0;

	o = js_parse(line, strlen(line), perr, sizeof(perr));
	if (!json_is_object(o)) {
		snprintf(err, err_len, "bad JSON request: %s", o ? "not an object" : perr);
		json_decref(o);
		return -EINVAL;
	}
	cmd = js_str(js_get(o, "command"), NULL);
	if (!cmd || !*cmd) {
		snprintf(err, err_len, "JSON request without a \"command\" string");
		json_decref(o);
		return -EINVAL;
	}
	req->cmd = keep(req, &at, cmd, strlen(cmd));
	json_object_foreach(o, key, v) {
		const char *val = num;

		if (!strcmp(key, "command"))
			continue;
		if (json_is_string(v))
			val = json_string_value(v);
		else if (json_is_integer(v))
			snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else if (json_is_boolean(v))
			snprintf(num, sizeof(num), "%s", json_is_true(v) ? "yes" : "no");
		else {
			snprintf(err, err_len, "member '%s': expected a string, an integer or a boolean", key);
			ret = -EINVAL;
			break;
		}
		ret = add_arg(req, &at, key, strlen(key), val, strlen(val), err, err_len);
		if (ret)
			break;
	}
	json_decref(o);
	return ret;
}

int api_parse_request(const char *line, struct api_request *req, char *err, size_t err_len)
{
	const char *p = line, *w, *eq;
	size_t at = 0, n;

	memset(req, 0, sizeof(*req));
	p += strspn(p, " \t");
	if (*p == '{')
		return parse_json_request(p, req, err, err_len);
	for (;;) {
		p += strspn(p, " \t\r\n");
		if (!*p)
			break;
		w = p;
		n = strcspn(w, " \t\r\n");
		p = w + n;
		if (!req->cmd) {
			req->cmd = keep(req, &at, w, n);
			if (!req->cmd)
				goto too_long;
			continue;
		}
		eq = memchr(w, '=', n);
		if (!eq || eq == w) {
			snprintf(err, err_len, "bad argument '%.*s': expected key=value", (int)n, w);
			return -EINVAL;
		}
		if (add_arg(req, &at, w, (size_t)(eq - w), eq + 1, n - (size_t)(eq - w) - 1, err, err_len))
			return -EINVAL;
	}
	if (!req->cmd) {
		snprintf(err, err_len, "empty request");
		return -EINVAL;
	}
	return 0;
too_long:
	snprintf(err, err_len, "request too long");
	return -EINVAL;
}

const char *api_arg(const struct api_request *req, const char *key)
{
	unsigned i;

	for (i = 0; i < req->nr_args; i++)
		if (!strcmp(req->args[i].key, key))
			return req->args[i].value;
	return NULL;
}

json_t *api_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *o = json_object();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (o && (js_set_bool(o, "ok", false) || js_set_str(o, "error", msg))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *api_ok(void)
{
	json_t *o = json_object();

	if (o && js_set_bool(o, "ok", true)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static void set_timeouts(int fd, int timeout_ms)
{
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_line(int fd, const json_t *v, int flags)
{
	char *text = js_dumps(v);
	size_t len;
	int ret;

	if (!text)
		return -ENOMEM;
	len = strlen(text);
	text[len] = '\n';	/* over the NUL: the line goes in one send */
	if (flags & MSG_DONTWAIT) {
		ssize_t n = send(fd, text, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT);

		/* A partial line would corrupt the stream: the reader is too slow. */
		ret = n == (ssize_t)(len + 1) ? 0 : n < 0 ? -errno : -EAGAIN;
	} else {
		ret = send_all(fd, text, len + 1);
	}
	free(text);
	return ret;
}

int api_send_json(int fd, const json_t *v)
{
	return send_line(fd, v, 0);
}

int api_send_json_nowait(int fd, const json_t *v)
{
	return send_line(fd, v, MSG_DONTWAIT);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The server's whole answer on @fd (until it closes) by @deadline_ms, newline stripped. */
static int recv_reply(int fd, int64_t deadline_ms, char **reply)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int ret = 0;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline_ms - mono_ms();
		ssize_t n;

		if (left <= 0) {
			ret = -ETIMEDOUT;
			goto out;
		}
		n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -ETIMEDOUT;
			goto out;
		}
		if (cap - len < 4096) {
			char *nb;

			if (cap >= API_REPLY_MAX) {
				ret = -EPROTO;
				goto out;
			}
			cap = cap ? cap * 2 : 8192;
			nb = realloc(buf, cap);
			if (!nb) {
				ret = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (!len) {
		ret = -EPROTO;
		goto out;
	}
	buf[len] = '\0';
	*reply = buf;
	return 0;
out:
	free(buf);
	return ret;
}

int api_call(const char *path, const char *line, char **reply, int timeout_ms)
{
	int64_t deadline = mono_ms() + timeout_ms;
	char *req = NULL;
	int fd, ret;

	*reply = NULL;
	if (strchr(line, '\n'))
		return -EINVAL;
	fd = usock_connect(path);
	if (fd < 0)
		return fd;
	set_timeouts(fd, timeout_ms);
	if (asprintf(&req, "%s\n", line) < 0) {
		ret = -ENOMEM;
		goto out;
	}
	ret = send_all(fd, req, strlen(req));
	if (ret == 0)
		ret = recv_reply(fd, deadline, reply);
out:
	free(req);
	close(fd);
	return ret;
}

int api_open_stream(const char *path, const char *line)
{
	char *req = NULL;
	int fd, ret;

	if (strchr(line, '\n'))
		return -EINVAL;
	fd = usock_connect(path);
	if (fd < 0)
		return fd;
	set_timeouts(fd, API_IO_TIMEOUT_MS);
	if (asprintf(&req, "%s\n", line) < 0) {
		close(fd);
		return -ENOMEM;
	}
	ret = send_all(fd, req, strlen(req));
	free(req);
	if (ret) {
		close(fd);
		return ret;
	}
	/* Events may be far apart: no receive timeout on a stream. */
	set_timeouts(fd, 0);
	return fd;
}
