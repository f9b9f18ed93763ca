/* SPDX-License-Identifier: MIT */
/* unix:PATH: stream sockets on the file system; can pass RAM fds. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "net/transport.h"

static int make_addr(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path))
		return -ENAMETOOLONG;
	strcpy(sun->sun_path, path);
	return 0;
}

static int unix_listen(const char *path, char *bound, size_t bound_len)
{
	struct sockaddr_un sun;
	int fd, ret;

	ret = make_addr(path, &sun);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);	/* a stale socket of an earlier run */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) || listen(fd, 64)) {
		ret = -errno;
		close(fd);
		return ret;
	}
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

static void unix_unlisten(const char *path)
{
	unlink(path);
}

const struct gw_transport_ops gw_transport_unix = {
	.scheme = "unix",
	.sock = &gw_sock_kernel,
	.can_pass_fds = true,
	.listen = unix_listen,
	.connect = unix_connect,
	.unlisten = unix_unlisten,
};
