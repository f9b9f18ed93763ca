/* SPDX-License-Identifier: MIT */
/* tcp:HOST:PORT (HOST may be [v6addr]); port 0 on listen picks a free one. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>
#include "net/transport.h"

/*
 * Both ends: frames are written whole, so no Nagle delay; keepalive probes
 * end a connection whose peer vanished without a FIN (a cut link) within
 * about 10 s instead of never, for receivers that wait without a timeout.
 */
void gw_tcp_tune(int fd)
{
	int one = 1, idle_s = 5, intvl_s = 1, cnt = 5;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl_s, sizeof(intvl_s));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static int tcp_listen(const char *addr, char *bound, size_t bound_len, struct gw_listen_id *id)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res, *ai;
	int fd = -1, ret, one = 1;

	ret = gw_addr_resolve(addr, true, &res);
	if (ret)
		return ret;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, GW_LISTEN_BACKLOG))
			break;
		ret = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return ret ? ret : -EADDRNOTAVAIL;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		gw_addr_format("tcp", &ss, bound, bound_len);
	return fd;
}

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len, uint64_t timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int flags = fcntl(fd, F_GETFL), err = 0;
	socklen_t el = sizeof(err);

	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, sa, len) && errno != EINPROGRESS)
		return -errno;
	if (poll(&pfd, 1, (int)timeout_ms) <= 0)
		return -ETIMEDOUT;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err)
		return -(err ? err : errno);
	fcntl(fd, F_SETFL, flags);
	return 0;
}

static int tcp_connect(const char *addr, uint64_t timeout_ms)
{
	struct addrinfo *res, *ai;
	int fd = -1, ret;

	ret = gw_addr_resolve(addr, false, &res);
	if (ret)
		return ret;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		ret = connect_timeout(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms);
		if (!ret)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return ret ? ret : -ECONNREFUSED;
	gw_tcp_tune(fd);
	return fd;
}

static void tcp_unlisten(const char *addr, const struct gw_listen_id *id)
{
}

static int tcp_check(const char *addr, bool listen, char *why, size_t why_len)
{
	return gw_addr_check("tcp", addr, listen, why, why_len);
}

const struct gw_transport_ops gw_transport_tcp = {
	.scheme = "tcp",
	.sock = &gw_sock_kernel,
	.can_pass_fds = false,
	.tls_host_in_url = true,
	.check = tcp_check,
	.host = gw_addr_host,
	.listen = tcp_listen,
	.connect = tcp_connect,
	.unlisten = tcp_unlisten,
};
