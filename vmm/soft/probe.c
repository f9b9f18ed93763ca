/* SPDX-License-Identifier: MIT */
/*
 * Whether the soft backend is usable here. Its RAM is plain shared memory,
 * which the engine tracks with userfaultfd asynchronous write-protect and
 * harvests with PAGEMAP_SCAN (Linux >= 6.7); without them a soft VM could
 * run but never migrate.
 *
 * The engine has no public probe of its dirty-tracking backends yet, so
 * this asks the kernel the same two questions itself. The uapi values
 * below are the kernel's ABI; Debian 12's 6.1 headers lack them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "soft/soft_internal.h"

#define WP_FEATURES ((1ull << 12) | (1ull << 13) | (1ull << 15))	/* WP_HUGETLBFS_SHMEM,
									   WP_UNPOPULATED, WP_ASYNC */
#define USER_MODE_ONLY 1			/* UFFD_USER_MODE_ONLY */

/* struct pm_scan_arg of <linux/fs.h> (6.7): twelve u64, an empty range is a no-op. */
struct scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define SCAN_IOCTL _IOWR('f', 16, struct scan_arg)	/* PAGEMAP_SCAN */
#define SCAN_WRITTEN (1ull << 1)			/* PAGE_IS_WRITTEN */

static int probe_uffd_wp(char *why, size_t why_len)
{
	struct uffdio_api api = { .api = UFFD_API, .features = WP_FEATURES };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int ret = 0;

	if (fd < 0 && (errno == EPERM || errno == EACCES))
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | USER_MODE_ONLY);
	if (fd < 0) {
		ret = -errno;
		snprintf(why, why_len, "userfaultfd: %s", strerror(errno));
		return ret;
	}
	if (ioctl(fd, UFFDIO_API, &api) < 0 || (api.features & WP_FEATURES) != WP_FEATURES) {
		snprintf(why, why_len, "userfaultfd lacks asynchronous write-protect "
			 "(WP_ASYNC, Linux >= 6.7)");
		ret = -EOPNOTSUPP;
	}
	close(fd);
	return ret;
}

static int probe_pagemap_scan(char *why, size_t why_len)
{
	struct scan_arg arg = { .size = sizeof(arg), .return_mask = SCAN_WRITTEN };
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0) {
		ret = -errno;
		snprintf(why, why_len, "/proc/self/pagemap: %s", strerror(errno));
		return ret;
	}
	if (ioctl(fd, SCAN_IOCTL, &arg) < 0) {
		ret = errno == ENOTTY || errno == EINVAL ? -EOPNOTSUPP : -errno;
		snprintf(why, why_len, "no PAGEMAP_SCAN (Linux >= 6.7): %s", strerror(errno));
	}
	close(fd);
	return ret;
}

int soft_probe(char *why, size_t why_len)
{
	int ret = probe_uffd_wp(why, why_len);

	if (ret == 0)
		ret = probe_pagemap_scan(why, why_len);
	if (ret == 0)
		snprintf(why, why_len, "userfaultfd WP_ASYNC and PAGEMAP_SCAN present");
	return ret;
}
