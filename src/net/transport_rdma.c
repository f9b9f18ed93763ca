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
 * librdmacm and libibverbs are opened with dlopen the first time an rdma:
 * URL is used, not linked: libgodwit's users (and `pkg-config --static
 * --libs godwit`) do not carry rdma-core and its dozens of provider
 * libraries, and a host without them refuses rdma: with the reason.
 *
 * Without an RDMA device (this build machine has none) the transport is
 * refused before anything starts, with the reason (usable), on both sides.
 * rsocket fds are rsocket's own numbers, not kernel fds: only the
 * gw_sock_ops below may touch them. For that reason TLS (OpenSSL reads and
 * writes a kernel fd itself) is refused on rdma: before anything connects,
 * with the reason, on both sides.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <rdma/rsocket.h>
#include "net/transport.h"

/*
 * The calls of librdmacm and libibverbs, resolved once for the process
 * (rdma_lib_load, under rdma_once); read-only afterwards. A library's
 * symbols are the process's, not a session's: one table serves them all.
 */
static struct {
	__typeof__(&ibv_get_device_list) get_device_list;
	__typeof__(&ibv_free_device_list) free_device_list;
	__typeof__(&rsocket) socket;
	__typeof__(&rbind) bind;
	__typeof__(&rlisten) listen;
	__typeof__(&raccept) accept;
	__typeof__(&rconnect) connect;
	__typeof__(&rshutdown) shutdown;
	__typeof__(&rclose) close;
	__typeof__(&rsendmsg) sendmsg;
	__typeof__(&rrecvmsg) recvmsg;
	__typeof__(&rsetsockopt) setsockopt;
	__typeof__(&rgetsockname) getsockname;
	__typeof__(&rpoll) poll;
	__typeof__(&rfcntl) fcntl;
	bool ok;
	char why[256];		/* what is missing, when !ok */
} rl;
static pthread_once_t rdma_once = PTHREAD_ONCE_INIT;

#define RDMA_SYM(h, field, name) \
	(*(void **)&rl.field = dlsym(h, name)) != NULL

static void rdma_lib_load(void)
{
	void *verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	void *cm = verbs ? dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;

	if (!cm) {
		snprintf(rl.why, sizeof(rl.why), "rdma: needs rdma-core's libraries and cannot load them (%s); "
			 "install librdmacm1 and libibverbs1, or use tcp:", dlerror());
		return;
	}
	rl.ok = RDMA_SYM(verbs, get_device_list, "ibv_get_device_list") &&
		RDMA_SYM(verbs, free_device_list, "ibv_free_device_list") &&
		RDMA_SYM(cm, socket, "rsocket") && RDMA_SYM(cm, bind, "rbind") &&
		RDMA_SYM(cm, listen, "rlisten") && RDMA_SYM(cm, accept, "raccept") &&
		RDMA_SYM(cm, connect, "rconnect") && RDMA_SYM(cm, shutdown, "rshutdown") &&
		RDMA_SYM(cm, close, "rclose") && RDMA_SYM(cm, sendmsg, "rsendmsg") &&
		RDMA_SYM(cm, recvmsg, "rrecvmsg") && RDMA_SYM(cm, setsockopt, "rsetsockopt") &&
		RDMA_SYM(cm, getsockname, "rgetsockname") && RDMA_SYM(cm, poll, "rpoll") &&
		RDMA_SYM(cm, fcntl, "rfcntl");
	if (!rl.ok)
		snprintf(rl.why, sizeof(rl.why), "rdma: librdmacm.so.1 or libibverbs.so.1 lacks a call godwit "
			 "uses (%s); install a complete rdma-core, or use tcp:", dlerror());
	/* Loaded for good: the calls above stay valid for the process's life. */
}

/* 0 once the libraries are loaded, else -ENOPKG. */
static int rdma_lib(void)
{
	pthread_once(&rdma_once, rdma_lib_load);
	return rl.ok ? 0 : -ENOPKG;
}

/* An RDMA device must exist for rsocket to do anything. */
static int rdma_t_usable(char *why, size_t why_len)
{
	struct ibv_device **list;
	int n = 0;

	if (rdma_lib()) {
		snprintf(why, why_len, "%s", rl.why);
		return -ENOPKG;
	}
	list = rl.get_device_list(&n);
	if (list)
		rl.free_device_list(list);
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

	rl.close(fd);
	errno = e;
	return -e;
}

static int rdma_t_listen(const char *addr, char *bound, size_t bound_len, struct gw_listen_id *id)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *res, *ai;
	int fd = -1, ret, one = 1;

	ret = rdma_lib();
	if (!ret)
		ret = gw_addr_resolve(addr, true, &res);
	if (ret)
		return ret;
	ret = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = rl.socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		rl.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!rl.bind(fd, ai->ai_addr, ai->ai_addrlen) && !rl.listen(fd, GW_LISTEN_BACKLOG))
			break;
		ret = r_close_keep_errno(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return ret;
	if (rl.getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		gw_addr_format("rdma", &ss, bound, bound_len);
	return fd;
}

static int rdma_t_connect(const char *addr, uint64_t timeout_ms)
{
	struct addrinfo *res, *ai;
	int fd = -1, ret;

	ret = rdma_lib();
	if (!ret)
		ret = gw_addr_resolve(addr, false, &res);
	if (ret)
		return ret;
	ret = -ECONNREFUSED;
	for (ai = res; ai; ai = ai->ai_next) {
		/* rconnect blocks for at most the RDMA CM's own route and connect timeouts. */
		fd = rl.socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		if (!rl.connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		ret = r_close_keep_errno(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	(void)timeout_ms;
	return fd < 0 ? ret : fd;
}

static void rdma_t_unlisten(const char *addr, const struct gw_listen_id *id)
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
	return rl.sendmsg(fd, msg, flags & ~MSG_NOSIGNAL);
}

static ssize_t r_recvmsg(int fd, struct msghdr *msg, int flags)
{
	/* rsocket has no MSG_WAITALL nor close-on-exec cmsgs: io.c loops until its iovec is full. */
	msg->msg_controllen = 0;
	return rl.recvmsg(fd, msg, flags & ~(MSG_WAITALL | MSG_CMSG_CLOEXEC));
}

static int r_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return rl.setsockopt(fd, level, name, val, len);
}

static int r_shutdown(int fd, int how)
{
	return rl.shutdown(fd, how);
}

static int r_close(int fd)
{
	return rl.close(fd);
}

static int r_accept(int listen_fd)
{
	return gw_accept_rest(rl.accept(listen_fd, NULL, NULL));
}

static int r_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	return rl.poll(fds, n, timeout_ms);
}

static int r_set_nonblock(int fd, bool on)
{
	int flags = rl.fcntl(fd, F_GETFL);

	if (flags < 0)
		return -1;
	return rl.fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

static int rdma_t_check(const char *addr, bool listen, char *why, size_t why_len)
{
	return gw_addr_check("rdma", addr, listen, why, why_len);
}

static const struct gw_sock_ops rsocket_ops = {
	.sendmsg = r_sendmsg,
	.recvmsg = r_recvmsg,
	.shutdown = r_shutdown,
	.close = r_close,
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
