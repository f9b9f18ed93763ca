/* SPDX-License-Identifier: MIT */
/*
 * rdma:HOST:PORT: stream sockets over RDMA through librdmacm's rsocket API
 * (rsocket, rbind, rlisten, raccept, rconnect, rsendmsg, rrecvmsg, rpoll,
 * ...), called directly: no LD_PRELOAD of librspreload. HOST is an IP
 * address of an RDMA-capable interface (InfiniBand IPoIB, RoCE, iWARP, or
 * a Soft-RoCE device: `rdma link add rxe0 type rxe netdev eth0`), the same
 * HOST:PORT syntax as tcp:. Framing, CRCs and everything above are the
 * same as over TCP (io.c drives these sockets through gw_sock_ops); what
 * rsockets do not have is unused: TCP_INFO (compress=auto measures the
 * link by the time sends wait), MSG_ZEROCOPY, SCM_RIGHTS.
 *
 * Without an RDMA device (this build machine has none) the transport is
 * refused before anything starts, with the reason (usable), on both sides.
 * rsocket fds are rsocket's own numbers, not kernel fds: only the
 * gw_sock_ops below may touch them. For that reason TLS (OpenSSL reads and
 * writes a kernel fd itself) is refused on rdma: before anything connects,
 * with the reason, on both sides.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <rdma/rsocket.h>
#include "net/transport.h"

/* An RDMA device must exist for rsocket to do anything. */
static int rdma_t_usable(char *why, size_t why_len)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (list)
		ibv_free_device_list(list);
	if (list && n > 0)
		return 0;
	snprintf(why, why_len, "rdma: needs an RDMA device and none was found (ibv_get_device_list: %s); "
		 "use an InfiniBand, RoCE or iWARP NIC, or Soft-RoCE (rdma link add rxe0 type rxe netdev IF), "
		 "or tcp:", list ? "0 devices" : strerror(errno));
	return -ENODEV;
}

static int r_close_keep_errno(int fd)
{
	int e = errno;

	rclose(fd);
	errno = e;
	return -e;
}

static int rdma_t_listen(const char *addr, char *bound, size_t bound_len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res, *ai;
	int fd = -1, ret, one = 1;

	ret = gw_addr_resolve(addr, true, &res);
	if (ret)
		return ret;
	ret = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = rsocket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!rbind(fd, ai->ai_addr, ai->ai_addrlen) && !rlisten(fd, GW_LISTEN_BACKLOG))
			break;
		ret = r_close_keep_errno(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return ret;
	if (rgetsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		gw_addr_format("rdma", &ss, bound, bound_len);
	return fd;
}

static int rdma_t_connect(const char *addr, uint64_t timeout_ms)
{
	struct addrinfo *res, *ai;
	int fd = -1, ret;

	ret = gw_addr_resolve(addr, false, &res);
	if (ret)
		return ret;
	ret = -ECONNREFUSED;
	for (ai = res; ai; ai = ai->ai_next) {
		/* rconnect blocks for at most the RDMA CM's own route and connect timeouts. */
		fd = rsocket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		if (!rconnect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		ret = r_close_keep_errno(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	(void)timeout_ms;
	return fd < 0 ? ret : fd;
}

static void rdma_t_unlisten(const char *addr)
{
}

/* ---- the calls on rsockets ---- */

static ssize_t r_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	/* No signals from rsockets; ancillary data is not supported. */
	if (msg->msg_controllen) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return rsendmsg(fd, msg, flags & ~MSG_NOSIGNAL);
}

static ssize_t r_recvmsg(int fd, struct msghdr *msg, int flags)
{
	/* rsocket has no MSG_WAITALL nor close-on-exec cmsgs: io.c loops until its iovec is full. */
	msg->msg_controllen = 0;
	return rrecvmsg(fd, msg, flags & ~(MSG_WAITALL | MSG_CMSG_CLOEXEC));
}

static int r_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return rsetsockopt(fd, level, name, val, len);
}

static int r_accept(int listen_fd)
{
	return raccept(listen_fd, NULL, NULL);
}

static int r_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	return rpoll(fds, n, timeout_ms);
}

static int r_set_nonblock(int fd, bool on)
{
	int flags = rfcntl(fd, F_GETFL);

	if (flags < 0)
		return -1;
	return rfcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

static int rdma_t_check(const char *addr, bool listen, char *why, size_t why_len)
{
	return gw_addr_check("rdma", addr, listen, why, why_len);
}

static const struct gw_sock_ops rsocket_ops = {
	.sendmsg = r_sendmsg,
	.recvmsg = r_recvmsg,
	.shutdown = rshutdown,
	.close = rclose,
	.setsockopt = r_setsockopt,
	.poll = r_poll,
	.accept = r_accept,
	.set_nonblock = r_set_nonblock,
	.kernel = false,
};

const struct gw_transport_ops gw_transport_rdma = {
	.scheme = "rdma",
	.can_pass_fds = false,
	.sock = &rsocket_ops,
	.tls_host_in_url = false,	/* TLS is refused on rsockets (OpenSSL drives kernel fds) */
	.check = rdma_t_check,
	.host = gw_addr_host,
	.listen = rdma_t_listen,
	.connect = rdma_t_connect,
	.unlisten = rdma_t_unlisten,
	.usable = rdma_t_usable,
};
