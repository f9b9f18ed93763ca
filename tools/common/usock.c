/* SPDX-License-Identifier: MIT */
/* UNIX control sockets: listen, accept, unlink our own, connect (see usock.h). */
#include "common/usock.h"

#include <godwit/log.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
	/* Never blocks: a listener that never accepts (backlog full) is in use too. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) ? errno : 0;
	close(fd);
	if (ret == 0 || ret == EAGAIN || ret == EINPROGRESS) {
		snprintf(err, err_len, "%s is in use (something listens there)", path);
		return -EADDRINUSE;
	}
	if (ret != ECONNREFUSED && ret != ENOENT) {
		snprintf(err, err_len, "%s: cannot tell whether it is stale: %s", path, strerror(ret));
		return -ret;
	}
	if (unlink(path) && errno != ENOENT) {
		snprintf(err, err_len, "cannot remove stale %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

int usock_listen(const char *path, struct usock_id *id, char *err, size_t err_len)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, ret;

	memset(id, 0, sizeof(*id));
	if (fill_addr(path, &sa)) {
		snprintf(err, err_len, "socket path too long or empty: '%s'", path ? path : "");
		return -ENAMETOOLONG;
	}
	ret = remove_stale(path, &sa, err, err_len);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return ret;
	}
	/*
	 * The file takes the socket inode's mode at bind (less the umask):
	 * 0600 set before, it is never open to others even for a moment, and
	 * the process-wide umask (other threads create files) is left alone.
	 */
	ret = fchmod(fd, 0600) || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	if (ret) {
		snprintf(err, err_len, "cannot bind %s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	if (lstat(path, &st) == 0) {
		id->dev = st.st_dev;
		id->ino = st.st_ino;
	}
	if (listen(fd, 16)) {
		ret = -errno;
		snprintf(err, err_len, "listen %s: %s", path, strerror(errno));
		unlink(path);
		close(fd);
		return ret;
	}
	return fd;
}

void usock_unlisten(const char *path, const struct usock_id *id)
{
	struct stat st;

	if (path && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == id->dev && st.st_ino == id->ino)
		unlink(path);
}

int usock_accept(int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int usock_peer_check(int fd, char *why, size_t why_len)
{
	struct ucred cred = { .pid = -1, .uid = (uid_t)-1 };
	socklen_t len = sizeof(cred);
	uid_t me = geteuid();

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.uid = (uid_t)-1;	/* unknown: refused */
	else if (cred.uid == me || cred.uid == 0)
		return 0;
	gw_log(GW_LOG_WARN, "cli", "api_refused", "uid=%d pid=%d owner=%d", (int)cred.uid, (int)cred.pid, (int)me);
	snprintf(why, why_len, "permission denied: uid %d does not own this VM (uid %d)", (int)cred.uid, (int)me);
	return -EACCES;
}

int usock_connect(const char *path)
{
	struct sockaddr_un sa;
	int fd, ret;

	ret = fill_addr(path, &sa);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}
