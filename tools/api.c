/* SPDX-License-Identifier: MIT */
/*
 * Control socket server and client (protocol: api.h and docs/api.md).
 *
 * The server thread polls the listening socket and a stop pipe, so
 * api_server_stop() never waits on a blocked accept(). Requests are served
 * one at a time: every command is short (the migration itself runs in the
 * engine's threads), and serialising them keeps the handler simple.
 */
#include "api.h"
#include "json.h"
#include <godwit/log.h>

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

struct api_server {
	int listen_fd;			/* set at start, closed at stop */
	int stop_pipe[2];		/* [1] written by api_server_stop */
	pthread_t thread;
	api_handler_fn fn;		/* called on the server thread only */
	void *opaque;
	char *path;
	dev_t dev;			/* identity of our socket file, so stop */
	ino_t ino;			/* never unlinks a successor's */
};


int api_parse_request(char *line, struct api_request *req, char *err, size_t err_len)
{
	char *save = NULL, *w;

	memset(req, 0, sizeof(*req));
	line[strcspn(line, "\r\n")] = '\0';
	req->cmd = strtok_r(line, " \t", &save);
	if (!req->cmd) {
		snprintf(err, err_len, "empty request");
		return -EINVAL;
	}
	while ((w = strtok_r(NULL, " \t", &save))) {
		char *eq = strchr(w, '=');

		if (!eq || eq == w) {
			snprintf(err, err_len, "bad argument '%s': expected key=value", w);
			return -EINVAL;
		}
		if (req->nr_args == API_ARGS_MAX) {
			snprintf(err, err_len, "too many arguments (at most %d)", API_ARGS_MAX);
			return -EINVAL;
		}
		*eq = '\0';
		req->args[req->nr_args].key = w;
		req->args[req->nr_args].value = eq + 1;
		req->nr_args++;
	}
	return 0;
}

const char *api_arg(const struct api_request *req, const char *key)
{
	unsigned i;

	for (i = 0; i < req->nr_args; i++)
		if (!strcmp(req->args[i].key, key))
			return req->args[i].value;
	return NULL;
}

void api_reply_error(FILE *out, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fputs("{\"ok\":false,\"error\":", out);
	json_write_string(out, msg);
	fputc('}', out);
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

static void serve_one(struct api_server *srv, int fd)
{
	char line[API_LINE_MAX + 1];
	size_t len = 0;
	char *reply = NULL, err[256];
	size_t reply_len = 0;
	struct api_request req;
	bool too_long = false;
	FILE *out;

	set_timeouts(fd, API_IO_TIMEOUT_MS);
	for (;;) {
		ssize_t n;

		if (len == API_LINE_MAX) {
			too_long = true;
			break;
		}
		n = recv(fd, line + len, API_LINE_MAX - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;		/* timed out or reset: nobody to answer */
		if (n == 0)
			break;		/* a client may close its side instead of '\n' */
		len += (size_t)n;
		if (memchr(line, '\n', len))
			break;
	}
	line[len] = '\0';
	if (len == 0)
		return;
	out = open_memstream(&reply, &reply_len);
	if (!out)
		return;
	if (too_long)
		api_reply_error(out, "request longer than %d bytes", API_LINE_MAX);
	else if (api_parse_request(line, &req, err, sizeof(err)))
		api_reply_error(out, "%s", err);
	else
		srv->fn(srv->opaque, &req, out);
	fputc('\n', out);
	if (fclose(out) == 0)
		send_all(fd, reply, reply_len);
	free(reply);
	if (too_long) {
		/*
		 * Closing with unread input would reset the connection and
		 * the client would lose the answer: drain until it closes
		 * (bounded by the receive timeout).
		 */
		shutdown(fd, SHUT_WR);
		while (recv(fd, line, sizeof(line), 0) > 0)
			;
	}
}

/*
 * Only this user (or root) may drive the VM. The socket file is 0600 and
 * that alone keeps others out; the kernel's word on who connected
 * (SO_PEERCRED) is checked too, in case the file's mode or directory was
 * changed. 0, or -EACCES with the reply sent.
 */
static int check_peer(int fd)
{
	struct ucred cred = { .pid = -1, .uid = (uid_t)-1 };
	socklen_t len = sizeof(cred);
	char reply[160];
	uid_t me = geteuid();

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.uid = (uid_t)-1;	/* unknown: refused */
	else if (cred.uid == me || cred.uid == 0)
		return 0;
	gw_log(GW_LOG_WARN, "cli", "api_refused", "uid=%d pid=%d owner=%d", (int)cred.uid, (int)cred.pid, (int)me);
	snprintf(reply, sizeof(reply), "{\"ok\":false,\"error\":\"permission denied: uid %d does not own "
		 "this VM (uid %d)\"}\n", (int)cred.uid, (int)me);
	set_timeouts(fd, API_IO_TIMEOUT_MS);
	send_all(fd, reply, strlen(reply));
	return -EACCES;
}

static void *server_thread(void *arg)
{
	struct api_server *srv = arg;
	struct pollfd pfd[2] = {
		{ .fd = srv->listen_fd, .events = POLLIN },
		{ .fd = srv->stop_pipe[0], .events = POLLIN },
	};

	for (;;) {
		int fd;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;	/* EAGAIN, ECONNABORTED, EMFILE: try again */
		if (!check_peer(fd))
			serve_one(srv, fd);
		close(fd);
	}
	return NULL;
}

static int fill_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (!path || !*path || strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* A socket file at @path that nobody serves is stale: remove it. */
static int remove_stale(const char *path, const struct sockaddr_un *sa, char *err, size_t err_len)
{
	struct stat st;
	int fd, ret;

	if (lstat(path, &st)) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, err_len, "%s exists and is not a socket", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (ret == 0) {
		snprintf(err, err_len, "%s is in use by a running godwit", path);
		return -EADDRINUSE;
	}
	if (unlink(path) && errno != ENOENT) {
		snprintf(err, err_len, "cannot remove stale %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

struct api_server *api_server_start(const char *path, api_handler_fn fn, void *opaque,
				    char *err, size_t err_len)
{
	struct api_server *srv;
	struct sockaddr_un sa;
	struct stat st;
	int ret;

	ret = fill_addr(path, &sa);
	if (ret) {
		snprintf(err, err_len, "API socket path too long or empty: '%s'", path ? path : "");
		errno = -ret;
		return NULL;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	srv->listen_fd = -1;
	srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
	srv->fn = fn;
	srv->opaque = opaque;
	srv->path = strdup(path);
	if (!srv->path) {
		ret = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	ret = remove_stale(path, &sa, err, err_len);
	if (ret)
		goto fail;
	srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (srv->listen_fd < 0) {
		ret = -errno;
		snprintf(err, err_len, "socket: %s", strerror(errno));
		goto fail;
	}
	/*
	 * The socket is created 0600: only our user may drive the VM. The file
	 * takes the socket inode's mode at bind (less the umask), so it is
	 * never open to others, and the process-wide umask is left alone.
	 */
	ret = fchmod(srv->listen_fd, 0600) || bind(srv->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ?
	      -errno : 0;
	if (ret) {
		snprintf(err, err_len, "cannot bind %s: %s", path, strerror(-ret));
		goto fail;
	}
	if (stat(path, &st) == 0) {
		srv->dev = st.st_dev;
		srv->ino = st.st_ino;
	}
	if (listen(srv->listen_fd, 16) || pipe2(srv->stop_pipe, O_CLOEXEC)) {
		ret = -errno;
		snprintf(err, err_len, "listen %s: %s", path, strerror(errno));
		goto fail_unlink;
	}
	ret = -pthread_create(&srv->thread, NULL, server_thread, srv);
	if (ret) {
		snprintf(err, err_len, "cannot start the API thread: %s", strerror(-ret));
		goto fail_unlink;
	}
	return srv;

fail_unlink:
	unlink(path);
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
	struct stat st;

	if (!srv)
		return;
	while (write(srv->stop_pipe[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(srv->thread, NULL);
	if (stat(srv->path, &st) == 0 && st.st_dev == srv->dev && st.st_ino == srv->ino)
		unlink(srv->path);
	close(srv->listen_fd);
	close(srv->stop_pipe[0]);
	close(srv->stop_pipe[1]);
	free(srv->path);
	free(srv);
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
	struct sockaddr_un sa;
	int64_t deadline = mono_ms() + timeout_ms;
	char *req = NULL;
	int fd, ret;

	*reply = NULL;
	ret = fill_addr(path, &sa);
	if (ret)
		return ret;
	if (strchr(line, '\n'))
		return -EINVAL;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = -errno;
		goto out;
	}
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
