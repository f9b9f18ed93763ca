/* SPDX-License-Identifier: MIT */
/*
 * Which pages of a RAM block may hold data (see populated.h).
 *
 *   fd >= 0:   SEEK_DATA / SEEK_HOLE on the backing file; shmem (memfd),
 *              tmpfs, hugetlbfs and most disk file systems answer at page
 *              granularity. Offsets are relative to fd_offset_bytes.
 *   anonymous: PAGEMAP_SCAN (kernel >= 6.7) for PRESENT | SWAPPED runs;
 *              older kernels: /proc/self/pagemap read in 64 KiB batches.
 *   otherwise: every page.
 *
 * The answer may be a superset (a page read once maps the zero page and
 * counts as present) but never misses a page that holds data, as long as
 * nothing writes the block meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mem/compat/uffd.h"
#include "mem/populated.h"

#define SCAN_VEC_LEN 1024
#define PAGEMAP_BATCH_ENTRIES 8192	/* 64 KiB of pagemap per read */
#define PM_PRESENT (1ULL << 63)
#define PM_SWAPPED (1ULL << 62)
#define PAGEMAP_PAGE_BYTES 4096u	/* /proc/self/pagemap and PAGEMAP_SCAN: x86 base pages */

static uint64_t block_page_size(const struct gw_ram_block *b)
{
	return b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES;
}

/*
 * Every block of the file allocated (a filled or preallocated guest): it
 * is one run. SEEK_HOLE would walk a populated shmem file page by page,
 * 15-17 ms per GiB here, and set-up asks twice (dirty tracking's known
 * ranges, round 0's scan). A file system that counts metadata blocks in
 * st_blocks may pass with a hole left: a superset, which is allowed.
 */
static bool file_has_no_holes(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size;
}

int gw_populated_ranges(const struct gw_ram_block *b, gw_range_fn fn, void *ctx)
{
	return gw_populated_ranges_in(b, 0, b->size_bytes / block_page_size(b), fn, ctx);
}

int gw_populated_ranges_in(const struct gw_ram_block *b, uint64_t first_page, uint64_t end_page,
			   gw_range_fn fn, void *ctx)
{
	uint64_t ps = block_page_size(b);
	off_t base = (off_t)b->fd_offset_bytes;
	off_t end = base + (off_t)(end_page * ps);
	off_t pos = base + (off_t)(first_page * ps);

	if (first_page >= end_page || end_page > b->size_bytes / ps)
		return first_page == end_page ? 0 : -EINVAL;
	if (b->fd < 0 || file_has_no_holes(b->fd))
		return fn(ctx, first_page, end_page - first_page);
	while (pos < end) {
		off_t data = lseek(b->fd, pos, SEEK_DATA);
		off_t hole;
		uint64_t first, last;
		int ret;

		if (data < 0) {
			if (errno == ENXIO)	/* no data after pos */
				break;
			return -errno;
		}
		if (data >= end)
			break;
		hole = lseek(b->fd, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole > end)
			hole = end;
		if (hole <= data)
			return -EIO;
		first = (uint64_t)(data - base) / ps;
		last = ((uint64_t)(hole - base) + ps - 1) / ps;
		ret = fn(ctx, first, last - first);
		if (ret)
			return ret;
		pos = hole;
	}
	return 0;
}

struct seek_scan {
	struct gw_bitmap *out;
	ssize_t pages;
};

static int seek_scan_range(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct seek_scan *sc = ctx;

	gw_bitmap_set_range(sc->out, first, nr_pages);
	sc->pages += (ssize_t)nr_pages;
	return 0;
}

static ssize_t scan_seek_data(const struct gw_ram_block *b, struct gw_bitmap *out)
{
	struct seek_scan sc = { out, 0 };
	int ret = gw_populated_ranges(b, seek_scan_range, &sc);

	return ret ? ret : sc.pages;
}

static ssize_t scan_pagemap_ioctl(const struct gw_ram_block *b, struct gw_bitmap *out, int pm)
{
	struct page_region vec[SCAN_VEC_LEN];
	uint64_t ps = block_page_size(b);
	uint64_t base = (uintptr_t)b->host;
	uint64_t end = base + b->size_bytes;
	uint64_t start = base;
	ssize_t pages = 0;

	while (start < end) {
		struct pm_scan_arg arg;
		uint64_t next;
		int n;

		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = start;
		arg.end = end;
		arg.vec = (uintptr_t)vec;
		arg.vec_len = SCAN_VEC_LEN;
		arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		n = ioctl(pm, PAGEMAP_SCAN, &arg);
		if (n < 0)
			return -errno;
		for (int r = 0; r < n; r++) {
			uint64_t first, last;

			if (vec[r].start < base || vec[r].end > end || vec[r].end <= vec[r].start)
				return -EIO;
			first = (vec[r].start - base) / ps;
			last = (vec[r].end - base + ps - 1) / ps;
			gw_bitmap_set_range(out, first, last - first);
			pages += last - first;
		}
		/*
		 * The walk stops early only when the vector is full (no
		 * max_pages). Kernel 6.18 may leave walk_end behind regions it
		 * did report when its internal bounce buffer filled, so resume
		 * after the furthest of walk_end and the last region.
		 */
		if ((uint64_t)n < arg.vec_len)
			break;
		next = vec[n - 1].end > arg.walk_end ? vec[n - 1].end : arg.walk_end;
		if (next <= start)
			return -EIO;	/* no progress: never loop forever */
		start = next;
	}
	/* Adjacent runs may share a huge page: then count what the bitmap says. */
	return ps == PAGEMAP_PAGE_BYTES ? pages : (ssize_t)gw_bitmap_weight(out);
}

/* Pre-6.7 kernels: read the 8-byte pagemap entries (4 KiB granularity). */
static ssize_t scan_pagemap_read(const struct gw_ram_block *b, struct gw_bitmap *out, int pm)
{
	uint64_t *ent = malloc(PAGEMAP_BATCH_ENTRIES * sizeof(*ent));
	uint64_t ps = block_page_size(b);
	uint64_t nr_small = b->size_bytes / PAGEMAP_PAGE_BYTES;
	uint64_t first_small = (uintptr_t)b->host / PAGEMAP_PAGE_BYTES;
	ssize_t pages = 0;
	uint64_t last_set = UINT64_MAX;

	if (!ent)
		return -ENOMEM;
	for (uint64_t i = 0; i < nr_small; i += PAGEMAP_BATCH_ENTRIES) {
		uint64_t n = nr_small - i < PAGEMAP_BATCH_ENTRIES ? nr_small - i : PAGEMAP_BATCH_ENTRIES;
		ssize_t got = pread(pm, ent, n * sizeof(*ent), (off_t)((first_small + i) * sizeof(*ent)));

		if (got != (ssize_t)(n * sizeof(*ent))) {
			free(ent);
			return got < 0 ? -errno : -EIO;
		}
		for (uint64_t j = 0; j < n; j++) {
			uint64_t page;

			if (!(ent[j] & (PM_PRESENT | PM_SWAPPED)))
				continue;
			page = (i + j) * PAGEMAP_PAGE_BYTES / ps;
			if (page != last_set) {
				gw_bitmap_set(out, page);
				last_set = page;
				pages++;
			}
		}
	}
	free(ent);
	return pages;
}

static ssize_t scan_anonymous(const struct gw_ram_block *b, struct gw_bitmap *out,
			      const char **method)
{
	ssize_t ret;
	int pm;

	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return -errno;
	ret = scan_pagemap_ioctl(b, out, pm);
	if (ret >= 0) {
		*method = "pagemap-scan";
	} else if (ret == -ENOTTY || ret == -EINVAL) {
		gw_bitmap_zero(out);
		ret = scan_pagemap_read(b, out, pm);
		*method = "pagemap";
	}
	close(pm);
	return ret;
}

ssize_t gw_populated_scan(const struct gw_ram_block *b, struct gw_bitmap *out,
			  const char **method)
{
	uint64_t nr_pages;
	const char *dummy;
	ssize_t ret;

	if (!method)
		method = &dummy;
	if (!b || !out || !out->words)
		return -EINVAL;
	nr_pages = b->size_bytes / block_page_size(b);
	if (out->nr_bits < nr_pages)
		return -EINVAL;

	/* The answer is exactly the set bits: start from a clear bitmap. */
	gw_bitmap_zero(out);
	if (b->fd >= 0) {
		ret = scan_seek_data(b, out);
		if (ret >= 0) {
			*method = "seek-data";
			return ret;
		}
		/*
		 * A file that cannot tell. Its page cache may hold pages this
		 * mapping never mapped, so the page tables cannot tell either.
		 */
		gw_bitmap_zero(out);
	} else if (b->host) {
		ret = scan_anonymous(b, out, method);
		if (ret >= 0)
			return ret;
		gw_bitmap_zero(out);
	}
	/* Nothing can tell: every page may hold data. */
	gw_bitmap_set_range(out, 0, nr_pages);
	*method = "all";
	return (ssize_t)nr_pages;
}
