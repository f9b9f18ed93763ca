/* SPDX-License-Identifier: MIT */
/*
 * unix:PATH: stream sockets on the file system; can pass RAM fds. The
 * socket file is created mode 0600 (only this user may connect: the file
 * permission is the access check), listening never replaces anything
 * but a stale socket, and unlisten removes only the socket file it made.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "net/transport.h"

static int unix_check(const char *path, bool listen, char *why, size_t why_len)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;

	if (!path[0] || strlen(path) > max) {
		snprintf(why, why_len, "unix:%s: a socket path is 1..%zu bytes", path, max);
		return -EINVAL;
	}
	return 0;
}

static int make_addr(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path))
		return -ENAMETOOLONG;
	strcpy(sun->sun_path, path);
	return 0;
}

/*
 * Whatever is at @path may go only if it is a socket nobody listens on (a
 * stale one of an earlier run). The probe never blocks: a listener that
 * never accepts (its backlog full) is as much in use as one that does.
 * 0, -EEXIST (not a socket), -EADDRINUSE (someone listens), -errno.
 */
static int remove_stale(const char *path, const struct sockaddr_un *sun)
{
	struct stat st;
	int fd, ret;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) ? errno : 0;
	close(fd);
	if (ret == 0 || ret == EAGAIN || ret == EINPROGRESS)
		return -EADDRINUSE;
	if (ret != ECONNREFUSED && ret != ENOENT)
		return -ret;	/* EACCES...: not ours to judge stale */
	return unlink(path) && errno != ENOENT ? -errno : 0;
}

static int unix_listen(const char *path, char *bound, size_t bound_len, struct gw_listen_id *id)
{
	struct sockaddr_un sun;
	struct stat st;
	int fd, ret;

	ret = make_addr(path, &sun);
	if (!ret)
		ret = remove_stale(path, &sun);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/*
	 * The file takes the socket inode's mode (less the umask) at bind:
	 * 0600 from its first instant, without touching the process-wide umask.
	 */
	if (fchmod(fd, 0600) || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) || lstat(path, &st) ||
	    listen(fd, GW_LISTEN_BACKLOG)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	snprintf(bound, bound_len, "unix:%s", path);
	return fd;
}

static int unix_connect(const char *path, uint64_t timeout_ms)
{
	struct sockaddr_un sun;
	int fd, ret;

	ret = make_addr(path, &sun);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Local connects do not block on the network: no timeout needed. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/* Only our socket file: a file that replaced it since is someone else's. */
static void unix_unlisten(const char *path, const struct gw_listen_id *id)
{
	struct stat st;

	if (id->ino && !lstat(path, &st) && S_ISSOCK(st.st_mode) && st.st_dev == id->dev && st.st_ino == id->ino)
		unlink(path);
}

const struct gw_transport_ops gw_transport_unix = {
	.scheme = "unix",
	.sock = &gw_sock_kernel,
	.can_pass_fds = true,
	.check = unix_check,
	.listen = unix_listen,
	.connect = unix_connect,
	.unlisten = unix_unlisten,
};
