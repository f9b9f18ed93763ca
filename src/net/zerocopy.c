/* SPDX-License-Identifier: MIT */
/* MSG_ZEROCOPY completions (see zerocopy.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/errqueue.h>
#include "net/zerocopy.h"

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif

int gw_zc_enable(int fd)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)))
		return errno == ENOPROTOOPT || errno == EINVAL ? -EOPNOTSUPP : -errno;
	return 0;
}

void gw_zc_complete(struct gw_zc *z, uint32_t lo, uint32_t hi, bool copied)
{
	for (uint32_t id = lo; id - lo <= hi - lo; id++) {
		uint32_t d = id - z->done;

		if (d >= 65 || (int32_t)d < 0)
			continue;	/* outside the window: already counted, or never sent */
		z->completed++;
		z->copied += copied;
		if (d) {
			if (z->ahead >> (d - 1) & 1) {
				z->completed--;	/* reported twice */
				z->copied -= copied;
			}
			z->ahead |= 1ULL << (d - 1);
		} else {
			/* Bit i is id done + 1 + i: move past every id complete already. */
			z->done++;
			while (z->ahead & 1) {
				z->ahead >>= 1;
				z->done++;
			}
			z->ahead >>= 1;
		}
		if (id == hi)
			break;
	}
}

/* One message of the error queue: 1 parsed, 0 empty, -errno. */
static int reap_one(struct gw_zc *z, int fd)
{
	char control[128];
	struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };
	struct cmsghdr *cm;

	if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		struct sock_extended_err ee;

		if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
		      (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
			continue;
		memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
		if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
			return ee.ee_errno ? -(int)ee.ee_errno : -EIO;
		gw_zc_complete(z, ee.ee_info, ee.ee_data, ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED);
	}
	return 1;
}

int gw_zc_reap(struct gw_zc *z, int fd, int timeout_ms)
{
	int ret, got = 0;

	while ((ret = reap_one(z, fd)) > 0)
		got = 1;
	if (ret < 0)
		return ret;
	if (got || !timeout_ms)
		return 0;
	{
		/* The error queue raises POLLERR. */
		struct pollfd pfd = { .fd = fd, .events = 0 };

		do {
			ret = poll(&pfd, 1, timeout_ms);
		} while (ret < 0 && errno == EINTR);
		if (ret < 0)
			return -errno;
		if (!ret)
			return -ETIMEDOUT;
	}
	while ((ret = reap_one(z, fd)) > 0)
		;
	return ret < 0 ? ret : 0;
}
