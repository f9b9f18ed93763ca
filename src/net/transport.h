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
 * Connections the kernel queues for accept: a flood of strangers that
 * outruns the acceptor for a moment must not fill it, or the real source's
 * SYN is dropped and retried a second later (the kernel caps it at
 * net.core.somaxconn).
 */
#define GW_LISTEN_BACKLOG 1024

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
	int (*accept)(int listen_fd);	/* one connection, close-on-exec (gw_accept_rest) */
	int (*set_nonblock)(int fd, bool on);	/* O_NONBLOCK on or off: 0, or -1 and errno */
	bool kernel;			/* fds are kernel sockets (TCP_INFO, MSG_ZEROCOPY, SCM_RIGHTS) */
};
/* The kernel's socket calls (tcp:, unix:). */
extern const struct gw_sock_ops gw_sock_kernel;
/*
 * @fd as an accept returned it; out of descriptors (EMFILE, ENFILE) after
 * a 100 ms rest, errno kept: the listener stays readable, and an accept
 * loop would otherwise spin until a descriptor is freed.
 */
int gw_accept_rest(int fd);

/*
 * What a listen made on the file system, so that unlisten removes that and
 * never a file put in its place (unix: the socket file's device and inode;
 * all zero: nothing made).
 */
struct gw_listen_id {
	uint64_t dev;
	uint64_t ino;
};

struct gw_transport_ops {
	const char *scheme;		/* "tcp", "unix", "rdma" */
	bool can_pass_fds;		/* SCM_RIGHTS: local migration possible */
	const struct gw_sock_ops *sock;	/* how its fds are driven */
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
	 * the full URL actually bound (port 0 resolved), @id what it made.
	 * Never blocks on what is already at @addr.
	 */
	int (*listen)(const char *addr, char *bound, size_t bound_len, struct gw_listen_id *id);
	/* Connect within @timeout_ms; returns a connected fd or -errno. */
	int (*connect)(const char *addr, uint64_t timeout_ms);
	/* Remove what listen created (@id: the socket file), after close; nothing else. */
	void (*unlisten)(const char *addr, const struct gw_listen_id *id);
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
	struct gw_listen_id lid;	/* set by listen on addr, for unlisten */
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
struct addrinfo;
struct sockaddr_storage;
/*
 * HOST:PORT (HOST may be [v6addr], empty on listen = any) resolved for a
 * stream socket; numeric port. 0 and *@res (freeaddrinfo), -EINVAL
 * (malformed), -ENOENT (name not resolved), -errno.
 */
int gw_addr_resolve(const char *addr, bool passive, struct addrinfo **res);
/* "SCHEME:HOST:PORT" (HOST bracketed for IPv6) of a bound address. */
void gw_addr_format(const char *scheme, const struct sockaddr_storage *ss, char *out, size_t out_len);
/* Who is at the other end of @fd, in words: "HOST:PORT", "[V6]:PORT", "local uid U pid P" (unix:). */
void gw_addr_peer(int fd, char *buf, size_t len);
/* TCP socket options for migration connections (no-op on other sockets). */
void gw_tcp_tune(int fd);
/*
 * HOST:PORT of tcp: and rdma: (@scheme names it in @why) with PORT
 * 1..65535 (0 too when listening), HOST a name, an IPv4 address or an
 * IPv6 address in brackets (empty when listening). 0, or -EINVAL with a
 * reason. Nothing is resolved.
 */
int gw_addr_check(const char *scheme, const char *addr, bool listen, char *why, size_t why_len);
/* The HOST of HOST:PORT ("" when malformed). */
void gw_addr_host(const char *addr, char *host, size_t host_len);

#endif
