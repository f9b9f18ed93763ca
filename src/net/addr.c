/* SPDX-License-Identifier: MIT */
/* HOST:PORT addresses of the IP transports (tcp:, rdma:). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
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

int gw_addr_resolve(const char *addr, bool passive, struct addrinfo **res)
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
		return -ENOENT;	/* the caller says the name does not resolve */
	return ret ? -EINVAL : 0;
}

int gw_addr_check(const char *scheme, const char *addr, bool listen, char *why, size_t why_len)
{
	char host[256], port[16];
	unsigned long p;
	char *end;

	if (split_host_port(addr, host, sizeof(host), port, sizeof(port))) {
		if (addr[0] == '[' || strchr(addr, ':') != strrchr(addr, ':'))
			snprintf(why, why_len, "%s:%s: an IPv6 address goes in brackets, then :PORT, e.g. %s:[::1]:4444",
				 scheme, addr, scheme);
		else
			snprintf(why, why_len, "%s:%s: expected %s:HOST:PORT", scheme, addr, scheme);
		return -EINVAL;
	}
	if (addr[0] != '[' && strchr(host, ':')) {
		snprintf(why, why_len, "%s:%s: an IPv6 address goes in brackets, e.g. %s:[::1]:4444", scheme, addr,
			 scheme);
		return -EINVAL;
	}
	errno = 0;
	p = strtoul(port, &end, 10);
	if (*end || port[0] < '0' || port[0] > '9' || errno || p > 65535 || (!p && !listen)) {
		snprintf(why, why_len, "%s:%s: port '%s' is not a number in %s..65535", scheme, addr, port,
			 listen ? "0" : "1");
		return -EINVAL;
	}
	if (!host[0] && !listen) {
		snprintf(why, why_len, "%s:%s: no host to connect to", scheme, addr);
		return -EINVAL;
	}
	return 0;
}

void gw_addr_host(const char *addr, char *host, size_t host_len)
{
	char port[16];

	if (split_host_port(addr, host, host_len, port, sizeof(port)))
		host[0] = 0;
}

void gw_addr_format(const char *scheme, const struct sockaddr_storage *ss, char *out, size_t out_len)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(out, out_len, "%s:[%s]:%u", scheme, host, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(out, out_len, "%s:%s:%u", scheme, host, ntohs(s4->sin_port));
	}
}

void gw_addr_peer(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) || ss.ss_family == AF_UNIX) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);

		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) && cl == sizeof(cred))
			snprintf(buf, len, "local uid %u pid %d", (unsigned)cred.uid, (int)cred.pid);
		else
			snprintf(buf, len, "local");
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	}
}
