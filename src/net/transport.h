/* SPDX-License-Identifier: MIT */
/*
 * Transports: one file each (transport_*.c), one exported const ops each,
 * listed in gw_transports[] (transport.c). A transport only makes stream
 * sockets; framing is io.c's.
 */
#ifndef GW_TRANSPORT_H
#define GW_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_URL_MAX 256

struct gw_transport_ops {
	const char *scheme;		/* "tcp", "unix" */
	bool can_pass_fds;		/* SCM_RIGHTS: local migration possible */
	bool tls_host_in_url;		/* the address names a host TLS can check certificates against */
	/*
	 * Optional: is @addr well-formed, to connect to or (@listen) to listen
	 * on? 0, or -EINVAL with a reason. Nothing is resolved or opened.
	 */
	int (*check)(const char *addr, bool listen, char *why, size_t why_len);
	/* Optional: the host part of @addr into @host ("" when none). */
	void (*host)(const char *addr, char *host, size_t host_len);
	/*
	 * Listen on @addr; returns the listening fd or -errno. @bound gets
	 * the full URL actually bound (port 0 resolved).
	 */
	int (*listen)(const char *addr, char *bound, size_t bound_len);
	/* Connect within @timeout_ms; returns a connected fd or -errno. */
	int (*connect)(const char *addr, uint64_t timeout_ms);
	/* Remove what listen created (the socket file), after close. */
	void (*unlisten)(const char *addr);
};

extern const struct gw_transport_ops *const gw_transports[];

struct gw_url {
	const struct gw_transport_ops *ops;
	char addr[GW_URL_MAX];		/* what follows "scheme:" */
};
/* A URL to connect to: 0, or -EINVAL with a reason in @why. */
int gw_url_parse(const char *url, struct gw_url *out, char *why, size_t why_len);
/* A URL to listen on (tcp: port 0 and an empty host allowed): 0, or -EINVAL with @why. */
int gw_url_parse_listen(const char *url, struct gw_url *out, char *why, size_t why_len);
/* The host of a parsed URL ("" for unix:), what TLS checks the destination's certificate against. */
void gw_url_host(const struct gw_url *u, char *host, size_t host_len);

/*
 * The kernel's delivery-rate estimate of a TCP socket (bytes/s) and whether
 * it was limited by the application (then it is a lower bound). 0, or
 * -errno (not TCP, -EAGAIN: nothing measured yet).
 */
int gw_tcp_delivery_rate(int fd, uint64_t *rate_bps, bool *app_limited);
/* TCP socket options for migration connections (no-op on other sockets). */
void gw_tcp_tune(int fd);

#endif
