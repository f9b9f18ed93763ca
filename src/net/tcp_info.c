/* SPDX-License-Identifier: MIT */
/*
 * The kernel's own estimate of how fast a TCP connection delivers data
 * (tcpi_delivery_rate, from ACK timing), for codec auto. Separate file:
 * <linux/tcp.h> has the full struct tcp_info but clashes with
 * <netinet/tcp.h>.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include "net/transport.h"

int gw_tcp_delivery_rate(int fd, uint64_t *rate_bps, bool *app_limited)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return -errno;	/* not TCP (unix: sockets) */
	if (len < offsetof(struct tcp_info, tcpi_delivery_rate) + sizeof(ti.tcpi_delivery_rate))
		return -EOPNOTSUPP;
	*rate_bps = ti.tcpi_delivery_rate;
	*app_limited = ti.tcpi_delivery_rate_app_limited;
	return ti.tcpi_delivery_rate ? 0 : -EAGAIN;
}
