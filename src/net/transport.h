/* SPDX-License-Identifier: MIT */
/*
 * Transports: one file each (transport_*.c), one exported const ops each,
 * listed in gw_transports[] (transport.c). A transport makes stream
 * sockets and says how to drive them (struct gw_sock_ops: the kernel's
 * calls, or a user-space stack such as rsocket's); framing is io.c's.
 */
#ifndef GW_TRANSPORT_H
#define GW_TRANSPORT_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define GW_URL_MAX 256

/*
 * The calls on one transport's sockets, as their POSIX namesakes (-1 and
 * errno on failure). The fds they take are the transport's own (an rsocket
 * is not a kernel fd): nothing else may touch them.
 */
struct gw_sock_ops {
	ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
	ssize_t (*recvmsg)(int fd, struct msghdr *msg, int flags);
	int (*shutdown)(int fd, int how);
	int (*close)(int fd);
	int (*setsockopt)(int fd, int level, int name, const void *val, socklen_t len);
	int (*poll)(struct pollfd *fds, nfds_t n, int timeout_ms);
	int (*accept)(int listen_fd);	/* one connection, close-on-exec */
	bool kernel;			/* fds are kernel sockets (TCP_INFO, MSG_ZEROCOPY, SCM_RIGHTS) */
};
/* The kernel's socket calls (tcp:, unix:). */
extern const struct gw_sock_ops gw_sock_kernel;

struct gw_transport_ops {
	const char *scheme;		/* "tcp", "unix", "rdma" */
	bool can_pass_fds;		/* SCM_RIGHTS: local migration possible */
	const struct gw_sock_ops *sock;	/* how its fds are driven */
	/*
	 * Listen on @addr; returns the listening fd or -errno. @bound gets
	 * the full URL actually bound (port 0 resolved).
	 */
	int (*listen)(const char *addr, char *bound, size_t bound_len);
	/* Connect within @timeout_ms; returns a connected fd or -errno. */
	int (*connect)(const char *addr, uint64_t timeout_ms);
	/* Remove what listen created (the socket file), after close. */
	void (*unlisten)(const char *addr);
	/*
	 * Optional: whether this transport can work on this machine at all.
	 * 0, or -errno with a reason in @why (rdma: without an RDMA device).
	 */
	int (*usable)(char *why, size_t why_len);
};

extern const struct gw_transport_ops *const gw_transports[];

struct gw_url {
	const struct gw_transport_ops *ops;
	char addr[GW_URL_MAX];		/* what follows "scheme:" */
};
/* 0, or -EINVAL with a reason in @why. */
int gw_url_parse(const char *url, struct gw_url *out, char *why, size_t why_len);

/*
 * The kernel's delivery-rate estimate of a TCP socket (bytes/s) and whether
 * it was limited by the application (then it is a lower bound). 0, or
 * -errno (not TCP, -EAGAIN: nothing measured yet).
 */
int gw_tcp_delivery_rate(int fd, uint64_t *rate_bps, bool *app_limited);
struct addrinfo;
struct sockaddr_storage;
/*
 * HOST:PORT (HOST may be [v6addr], empty on listen = any) resolved for a
 * stream socket; numeric port. 0 and *@res (freeaddrinfo), -EINVAL
 * (malformed), -EHOSTUNREACH (name not resolved), -errno.
 */
int gw_addr_resolve(const char *addr, bool passive, struct addrinfo **res);
/* "SCHEME:HOST:PORT" (HOST bracketed for IPv6) of a bound address. */
void gw_addr_format(const char *scheme, const struct sockaddr_storage *ss, char *out, size_t out_len);
/* TCP socket options for migration connections (no-op on other sockets). */
void gw_tcp_tune(int fd);
/* Accept with a deadline (a kernel TCP socket is tuned): fd or -ETIMEDOUT / -errno. */
int gw_accept_timeout(const struct gw_sock_ops *sock, int listen_fd, uint64_t timeout_ms);

#endif
