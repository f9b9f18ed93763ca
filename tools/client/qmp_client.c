/* SPDX-License-Identifier: MIT */
/* A synchronous QMP client (see qmp_client.h). */
#include "client/qmp_client.h"
#include "common/qmp.h"
#include "common/usock.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct qmpc {
	int fd;
	json_t *greeting;
	size_t len;
	char in[QMP_INPUT_MAX + 1];
	unsigned next_id;
};

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next message from the server, by @deadline. 0 and *@msg, or -errno. */
static int next_message(struct qmpc *q, long long deadline, json_t **msg)
{
	char perr[160];

	for (;;) {
		long n = qmp_frame(q->in, q->len);
		struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
		long long left;
		ssize_t r;

		if (n < 0)
			return -EPROTO;
		if (n > 0) {
			*msg = js_parse(q->in, (size_t)n, perr, sizeof(perr));
			memmove(q->in, q->in + n, q->len - (size_t)n);
			q->len -= (size_t)n;
			return *msg ? 0 : -EPROTO;
		}
		if (q->len >= QMP_INPUT_MAX)
			return -EPROTO;
		left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ETIMEDOUT;
		r = recv(q->fd, q->in + q->len, QMP_INPUT_MAX - q->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
		q->len += (size_t)r;
	}
}

int qmpc_execute(struct qmpc *q, const char *cmd, json_t *args, json_t **ret,
		 char *err, size_t err_len)
{
	long long deadline = mono_ms() + QMPC_TIMEOUT_MS;
	char id[32];
	json_t *req;
	char *text;
	size_t len, off = 0;
	int r;

	if (ret)
		*ret = NULL;
	snprintf(id, sizeof(id), "godwit-%u", ++q->next_id);
	req = json_pack("{s:s,s:s}", "execute", cmd, "id", id);
	if (req && args)
		json_object_set(req, "arguments", args);
	json_decref(args);
	text = req ? js_dumps(req) : NULL;
	json_decref(req);
	if (!text) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	len = strlen(text);
	text[len++] = '\n';
	while (off < len) {
		ssize_t n = send(q->fd, text + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			free(text);
			snprintf(err, err_len, "QMP %s: %s", cmd, strerror(-r));
			return r;
		}
		off += (size_t)n;
	}
	free(text);
	for (;;) {
		json_t *msg = NULL, *e;

		r = next_message(q, deadline, &msg);
		if (r) {
			snprintf(err, err_len, "QMP %s: %s", cmd, r == -EPROTO ? "malformed answer" : strerror(-r));
			return r;
		}
		if (json_object_get(msg, "event") || strcmp(js_str(js_get(msg, "id"), ""), id)) {
			json_decref(msg);	/* an event, or another client's id: not ours */
			continue;
		}
		e = json_object_get(msg, "error");
		if (e) {
			snprintf(err, err_len, "%s: %s", js_str(js_get(e, "class"), "Error"),
				 js_str(js_get(e, "desc"), "?"));
			json_decref(msg);
			return -EINVAL;
		}
		if (ret) {
			*ret = json_object_get(msg, "return");
			json_incref(*ret);
		}
		json_decref(msg);
		return 0;
	}
}

struct qmpc *qmpc_open(const char *path, char *err, size_t err_len)
{
	struct qmpc *q = calloc(1, sizeof(*q));
	json_t *msg = NULL;
	int r;

	if (!q) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	q->fd = usock_connect(path);
	if (q->fd < 0) {
		snprintf(err, err_len, "cannot reach the QMP socket at %s: %s", path, strerror(-q->fd));
		free(q);
		return NULL;
	}
	r = next_message(q, mono_ms() + QMPC_TIMEOUT_MS, &msg);
	if (r || !json_is_object(json_object_get(msg, "QMP"))) {
		snprintf(err, err_len, "%s: no QMP greeting (%s)", path, r ? strerror(-r) : "something else answered");
		json_decref(msg);
		qmpc_close(q);
		return NULL;
	}
	q->greeting = json_incref(json_object_get(msg, "QMP"));
	json_decref(msg);
	if (qmpc_execute(q, "qmp_capabilities", NULL, NULL, err, err_len)) {
		qmpc_close(q);
		return NULL;
	}
	return q;
}

void qmpc_close(struct qmpc *q)
{
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	json_decref(q->greeting);
	free(q);
}

const json_t *qmpc_greeting(const struct qmpc *q)
{
	return q->greeting;
}
