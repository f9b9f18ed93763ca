/* SPDX-License-Identifier: MIT */
/* Whole-buffer pread/pwrite (see fdio.h). */
#include <errno.h>
#include <stdbool.h>
#include <unistd.h>
#include "util/fdio.h"

static int rw_all(int fd, uint8_t *buf, size_t len, off_t off, bool write)
{
	while (len) {
		ssize_t n = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

int gw_pread_all(int fd, void *buf, size_t len, off_t off)
{
	return rw_all(fd, buf, len, off, false);
}

int gw_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	return rw_all(fd, (uint8_t *)buf, len, off, true);
}
