/* SPDX-License-Identifier: MIT */
/* "scheme:address" URLs, resolved against the transport table. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "net/transport.h"

int gw_url_parse(const char *url, struct gw_url *out, char *why, size_t why_len)
{
	const char *colon = url ? strchr(url, ':') : NULL;

	memset(out, 0, sizeof(*out));
	if (!colon) {
		snprintf(why, why_len, "URL '%s' is not SCHEME:ADDRESS (tcp:HOST:PORT or unix:PATH)",
			 url ? url : "");
		return -EINVAL;
	}
	for (unsigned i = 0; gw_transports[i]; i++) {
		const char *scheme = gw_transports[i]->scheme;

		if (strlen(scheme) != (size_t)(colon - url) || strncmp(url, scheme, strlen(scheme)))
			continue;
		if (!colon[1] || strlen(colon + 1) >= sizeof(out->addr)) {
			snprintf(why, why_len, "URL '%s': empty or too long address", url);
			return -EINVAL;
		}
		out->ops = gw_transports[i];
		snprintf(out->addr, sizeof(out->addr), "%s", colon + 1);
		return 0;
	}
	snprintf(why, why_len, "URL '%s': unknown transport (tcp:HOST:PORT or unix:PATH)", url);
	return -EINVAL;
}

int gw_accept_timeout(const struct gw_sock_ops *sock, int listen_fd, uint64_t timeout_ms)
{
	struct pollfd pfd = { .fd = listen_fd, .events = POLLIN };
	int ret, fd;

	do {
		ret = sock->poll(&pfd, 1, (int)(timeout_ms > 0x7fffffff ? 0x7fffffff : timeout_ms));
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		return -errno;
	if (ret == 0)
		return -ETIMEDOUT;
	if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
		return -ECANCELED;	/* listening socket shut down */
	fd = sock->accept(listen_fd);
	if (fd < 0)
		return -errno;
	if (sock->kernel)
		gw_tcp_tune(fd);	/* harmless failure on unix sockets */
	return fd;
}

/* ---- the kernel's socket calls ---- */

static int kernel_accept(int listen_fd)
{
	return accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
}

static int kernel_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return setsockopt(fd, level, name, val, len);
}

const struct gw_sock_ops gw_sock_kernel = {
	.sendmsg = sendmsg,
	.recvmsg = recvmsg,
	.shutdown = shutdown,
	.close = close,
	.setsockopt = kernel_setsockopt,
	.poll = poll,
	.accept = kernel_accept,
	.kernel = true,
};
