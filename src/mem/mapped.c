/* SPDX-License-Identifier: MIT */
/* Present pages of a range, by PAGEMAP_SCAN (see mapped.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <godwit/vm.h>
#include "mem/compat/uffd.h"
#include "mem/mapped.h"

#define VEC_LEN 64

int gw_pagemap_open(void)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* Call @fn for every present run of [start, end). 0 or -errno. */
static int present_runs(int pm, uint64_t start, uint64_t end,
			void (*fn)(void *ctx, uint64_t first, uint64_t last), void *ctx)
{
	struct page_region vec[VEC_LEN];

	while (start < end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg), .start = start, .end = end,
			.vec = (uintptr_t)vec, .vec_len = VEC_LEN,
			.category_mask = PAGE_IS_PRESENT, .return_mask = PAGE_IS_PRESENT,
		};
		int n = ioctl(pm, PAGEMAP_SCAN, &arg);
		uint64_t next;

		if (n < 0)
			return errno == EINVAL || errno == ENOTTY ? -EOPNOTSUPP : -errno;
		for (int r = 0; r < n; r++) {
			if (vec[r].start < start || vec[r].end > end || vec[r].end <= vec[r].start)
				return -EIO;
			fn(ctx, vec[r].start, vec[r].end);
		}
		if ((uint64_t)n < arg.vec_len)
			break;
		/* Full vector: resume after what was reported (see dirty_uffd_wp.c). */
		next = vec[n - 1].end > arg.walk_end ? vec[n - 1].end : arg.walk_end;
		if (next <= start)
			return -EIO;
		start = next;
	}
	return 0;
}

struct mask_ctx {
	uint64_t base;
	uint64_t *mask;
};

static void mask_run(void *ctx, uint64_t first, uint64_t last)
{
	struct mask_ctx *m = ctx;

	for (uint64_t i = (first - m->base) / GW_PAGE_BYTES; i < (last - m->base) / GW_PAGE_BYTES; i++)
		m->mask[i / 64] |= 1ULL << (i % 64);
}

int gw_mapped_mask(int pagemap_fd, const void *addr, uint32_t nr_pages, uint64_t *mask)
{
	struct mask_ctx m = { (uintptr_t)addr, mask };

	memset(mask, 0, (nr_pages + 63) / 64 * sizeof(*mask));
	if (pagemap_fd < 0)
		return -EOPNOTSUPP;
	return present_runs(pagemap_fd, m.base, m.base + (uint64_t)nr_pages * GW_PAGE_BYTES, mask_run, &m);
}

static void count_run(void *ctx, uint64_t first, uint64_t last)
{
	*(int64_t *)ctx += (int64_t)((last - first) / GW_PAGE_BYTES);
}

int64_t gw_mapped_count(int pagemap_fd, const void *addr, uint64_t nr_pages)
{
	int64_t n = 0;
	int ret;

	if (pagemap_fd < 0)
		return -EOPNOTSUPP;
	ret = present_runs(pagemap_fd, (uintptr_t)addr, (uintptr_t)addr + nr_pages * GW_PAGE_BYTES, count_run, &n);
	return ret ? ret : n;
}
