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

static int split_host_port(const char *addr, char *host, size_t host_len, char *port, size_t port_len)
{
	const char *colon;
	size_t n;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		n = (size_t)(end - addr - 1);
		colon = end + 1;
		addr++;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			return -EINVAL;
		n = (size_t)(colon - addr);
	}
	if (n >= host_len || strlen(colon + 1) >= port_len || !colon[1])
		return -EINVAL;
	memcpy(host, addr, n);
	host[n] = 0;
	strcpy(port, colon + 1);
	return 0;
}

/*
 * HOST:PORT with PORT 1..65535 (0 too when listening: any free port), HOST
 * a name, an IPv4 address or an IPv6 address in brackets (empty when
 * listening: every address). 0, or -EINVAL with a reason.
 */
static int tcp_check(const char *addr, bool listen, char *why, size_t why_len)
{
	char host[256], port[16];
	unsigned long p;
	char *end;

	if (split_host_port(addr, host, sizeof(host), port, sizeof(port))) {
		if (addr[0] == '[' || strchr(addr, ':') != strrchr(addr, ':'))
			snprintf(why, why_len, "tcp:%s: an IPv6 address goes in brackets, then :PORT, e.g. tcp:[::1]:4444",
				 addr);
		else
			snprintf(why, why_len, "tcp:%s: expected tcp:HOST:PORT", addr);
		return -EINVAL;
	}
	if (addr[0] != '[' && strchr(host, ':')) {
		snprintf(why, why_len, "tcp:%s: an IPv6 address goes in brackets, e.g. tcp:[::1]:4444", addr);
		return -EINVAL;
	}
	errno = 0;
	p = strtoul(port, &end, 10);
	if (*end || port[0] < '0' || port[0] > '9' || errno || p > 65535 || (!p && !listen)) {
		snprintf(why, why_len, "tcp:%s: port '%s' is not a number in %s..65535", addr, port, listen ? "0" : "1");
		return -EINVAL;
	}
	if (!host[0] && !listen) {
		snprintf(why, why_len, "tcp:%s: no host to connect to", addr);
		return -EINVAL;
	}
	return 0;
}

static void tcp_host(const char *addr, char *host, size_t host_len)
{
	char port[16];

	if (split_host_port(addr, host, host_len, port, sizeof(port)))
		host[0] = 0;
}

/* getaddrinfo: -ENOENT when the name does not resolve (the caller says so). */
static int resolve(const char *addr, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char host[256], port[16];
	int ret;

	if (split_host_port(addr, host, sizeof(host), port, sizeof(port)))
		return -EINVAL;
	if (passive)
		hints.ai_flags = AI_PASSIVE;
	hints.ai_flags |= AI_NUMERICSERV;
	ret = getaddrinfo(host[0] ? host : NULL, port, &hints, res);
	if (ret == EAI_SYSTEM)
		return -errno;
	if (ret == EAI_NONAME || ret == EAI_NODATA || ret == EAI_FAIL || ret == EAI_AGAIN)
		return -ENOENT;
	return ret ? -EINVAL : 0;
}

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

static int tcp_listen(const char *addr, char *bound, size_t bound_len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res, *ai;
	char host[INET6_ADDRSTRLEN];
	int fd = -1, ret, one = 1;

	ret = resolve(addr, true, &res);
	if (ret)
		return ret;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 64))
			break;
		ret = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return ret ? ret : -EADDRNOTAVAIL;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
			snprintf(bound, bound_len, "tcp:[%s]:%u", host, ntohs(s6->sin6_port));
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
			snprintf(bound, bound_len, "tcp:%s:%u", host, ntohs(s4->sin_port));
		}
	}
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

	ret = resolve(addr, false, &res);
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

static void tcp_unlisten(const char *addr)
{
}

const struct gw_transport_ops gw_transport_tcp = {
	.scheme = "tcp",
	.can_pass_fds = false,
	.tls_host_in_url = true,
	.check = tcp_check,
	.host = tcp_host,
	.listen = tcp_listen,
	.connect = tcp_connect,
	.unlisten = tcp_unlisten,
};
