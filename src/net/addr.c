/* SPDX-License-Identifier: MIT */
/* HOST:PORT addresses of the IP transports (tcp:, rdma:). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
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
	if (ret)
		return ret == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	return 0;
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
