/* SPDX-License-Identifier: MIT */
/*
 * Dirty tracking of plain process memory by userfaultfd asynchronous
 * write-protect (kernel >= 6.7):
 *
 *   start:   one userfaultfd with WP_ASYNC | WP_HUGETLBFS_SHMEM, every block
 *            registered in WP mode; only the runs that hold data are
 *            write-protected (below).
 *   write:   the kernel resolves the WP fault itself (async: no reader
 *            thread) and the PTE loses its uffd-wp bit: "written". A first
 *            write to a hole that was never protected maps a new page
 *            without the bit: "written" too.
 *   collect: PAGEMAP_SCAN, PAGE_IS_WRITTEN | PAGE_IS_PRESENT pages only, with
 *            PM_SCAN_WP_MATCHING: reporting and re-protecting happen in one
 *            walk under the page-table lock, so a racing write is either
 *            reported now or leaves the page written for the next collect.
 *
 * Cost that grows with the memory in use, not the RAM size: for fd-backed
 * blocks (memfd, tmpfs) the kernel keeps uffd-wp markers on every protected
 * PTE, allocating page tables for holes, so protecting and scanning a whole
 * 8 GiB block costs milliseconds even when it is empty. Start and collect
 * therefore protects only the runs allocated in the file (SEEK_DATA, see
 * gw_populated_ranges): a page outside them was never written. Collect
 * scans the whole block: the holes never protected hold no markers, so the
 * walk skips their empty page tables, and a page a write allocated since
 * is mapped without the uffd-wp bit: written. Walking the file's runs again
 * at every collect (SEEK_DATA/SEEK_HOLE visit every cached page) cost
 * 20-37 ms per harvest of a populated 1 GiB memfd, more than the scan
 * itself; collect now costs what the page tables cost (1.3 ms for that
 * 1 GiB, 0.2 ms for an idle 8 GiB guest). PAGE_IS_PRESENT in the category
 * mask matters: with PAGE_IS_WRITTEN alone the kernel takes a fast path
 * that counts an empty PTE as written and installs a marker in it, so a
 * whole-block scan of an idle 8 GiB guest first reported and protected
 * every hole (145 ms), then walked 2 M markers per collect (4.7 ms). Anonymous blocks
 * are covered whole: without WP_UNPOPULATED their holes have no page
 * tables either.
 *
 * Batched: one ioctl per run and per 4096 reported runs, never per page.
 * Writes through another mapping of the same memfd are not seen: the
 * guest (workload) must write through the registered mapping.
 *
 * Threads: the priv state is owned by the thread that calls start/collect/stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mem/compat/uffd.h"
#include "mem/dirty.h"
#include "mem/populated.h"

#define UFFD_WP_FEATURES (UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM)
#define SCAN_VEC_LEN 4096		/* page_region entries per ioctl (96 KiB) */

struct uffd_wp {
	int uffd;			/* -1 when not open */
	int pagemap_fd;			/* /proc/self/pagemap, -1 when not open */
	unsigned nr_registered;		/* blocks 0..n-1 are registered */
	struct page_region *vec;	/* SCAN_VEC_LEN entries */
};

/* A userfaultfd with the async WP features, or -errno (-EOPNOTSUPP: too old). */
static int uffd_open_wp(void)
{
	struct uffdio_api api;
	int fd;

	/* Root may trap kernel faults too; others only get user-mode-only fds. */
	fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && (errno == EPERM || errno == EACCES))
		fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return errno == ENOSYS ? -EOPNOTSUPP : -errno;

	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_WP_FEATURES;
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		close(fd);
		return -EOPNOTSUPP;	/* EINVAL: a requested feature is unknown */
	}
	if ((api.features & UFFD_WP_FEATURES) != UFFD_WP_FEATURES) {
		close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

static int pagemap_scan_works(int pagemap_fd)
{
	struct pm_scan_arg arg;

	/* An empty range: the kernel validates the arguments and walks nothing. */
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.return_mask = PAGE_IS_WRITTEN;
	if (ioctl(pagemap_fd, PAGEMAP_SCAN, &arg) < 0)
		return errno == ENOTTY || errno == EINVAL ? -EOPNOTSUPP : -errno;
	return 0;
}

static int uffd_wp_probe(const struct gw_vm_info *vm)
{
	int fd, pm, ret;

	/* NULL: plain process memory in general (gw_dirty_probe). */
	if (vm && (vm->nr_blocks == 0 || vm->nr_blocks > GW_MAX_RAM_BLOCKS))
		return -EINVAL;
	for (unsigned i = 0; vm && i < vm->nr_blocks; i++)
		if (!vm->blocks[i].host)
			return -EINVAL;
	fd = uffd_open_wp();
	if (fd < 0)
		return fd;
	close(fd);
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return -EOPNOTSUPP;
	ret = pagemap_scan_works(pm);
	close(pm);
	return ret;
}

static void uffd_wp_stop(struct gw_dirty *d)
{
	struct uffd_wp *w = d->priv;

	if (!w)
		return;
	for (unsigned i = 0; i < w->nr_registered; i++) {
		const struct gw_ram_block *b = &d->vm->blocks[i];
		struct uffdio_range r = {
			.start = (uintptr_t)b->host, .len = b->size_bytes,
		};

		/* Clears the WP bits too; ignore errors: nothing to undo. */
		(void)ioctl(w->uffd, UFFDIO_UNREGISTER, &r);
	}
	if (w->uffd >= 0)
		close(w->uffd);
	if (w->pagemap_fd >= 0)
		close(w->pagemap_fd);
	free(w->vec);
	free(w);
	d->priv = NULL;
}

/* One populated run of one block, for start (protect) and collect (scan). */
struct run_ctx {
	struct uffd_wp *w;
	const struct gw_ram_block *b;
	struct gw_bitmap *out;		/* collect */
	ssize_t pages;			/* collect: pages reported */
};

static uint64_t block_page_bytes(const struct gw_ram_block *b)
{
	return b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES;
}

static int protect_run(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct run_ctx *rc = ctx;
	uint64_t ps = block_page_bytes(rc->b);
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)rc->b->host + first * ps, .len = nr_pages * ps },
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};

	return ioctl(rc->w->uffd, UFFDIO_WRITEPROTECT, &wp) < 0 ? -errno : 0;
}

static int uffd_wp_start(struct gw_dirty *d)
{
	struct uffd_wp *w;
	int ret;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->uffd = -1;
	w->pagemap_fd = -1;
	d->priv = w;
	w->vec = calloc(SCAN_VEC_LEN, sizeof(*w->vec));
	w->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ret = !w->vec ? -ENOMEM : w->pagemap_fd < 0 ? -errno : uffd_open_wp();
	if (ret < 0)
		goto fail;
	w->uffd = ret;
	for (unsigned i = 0; i < d->vm->nr_blocks; i++) {
		const struct gw_ram_block *b = &d->vm->blocks[i];
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)b->host, .len = b->size_bytes },
			.mode = UFFDIO_REGISTER_MODE_WP,
		};
		struct run_ctx rc = { w, b, NULL, 0 };

		if (ioctl(w->uffd, UFFDIO_REGISTER, &reg) < 0) {
			ret = -errno;
			goto fail;
		}
		w->nr_registered = i + 1;
		ret = gw_populated_ranges(b, protect_run, &rc);
		if (ret)
			goto fail;
	}
	return 0;

fail:
	uffd_wp_stop(d);
	return ret;
}

/* Report and re-protect the written pages of one run. */
static int scan_run(void *ctx, uint64_t first_page, uint64_t nr_pages)
{
	struct run_ctx *rc = ctx;
	uint64_t ps = block_page_bytes(rc->b), base = (uintptr_t)rc->b->host;
	uint64_t start = base + first_page * ps, end = start + nr_pages * ps;
	struct page_region *vec = rc->w->vec;

	while (start < end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg), .flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
			.start = start, .end = end, .vec = (uintptr_t)vec, .vec_len = SCAN_VEC_LEN,
			.category_mask = PAGE_IS_WRITTEN | PAGE_IS_PRESENT,
			.return_mask = PAGE_IS_WRITTEN,
		};
		int n = ioctl(rc->w->pagemap_fd, PAGEMAP_SCAN, &arg);
		uint64_t next;

		if (n < 0)
			return -errno;
		for (int r = 0; r < n; r++) {
			uint64_t first = (vec[r].start - base) / ps;
			uint64_t last = (vec[r].end - base + ps - 1) / ps;

			if (vec[r].start < start || vec[r].end > end || last <= first)
				return -EIO;	/* kernel answered outside the range */
			gw_bitmap_set_range(rc->out, first, last - first);
			rc->pages += (ssize_t)(last - first);
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
	return 0;
}

static ssize_t uffd_wp_collect(struct gw_dirty *d, struct gw_bitmap *out)
{
	struct uffd_wp *w = d->priv;
	ssize_t total_pages = 0;

	if (!w)
		return -EINVAL;
	for (unsigned i = 0; i < d->vm->nr_blocks; i++) {
		struct run_ctx rc = { w, &d->vm->blocks[i], &out[i], 0 };
		/*
		 * The whole block, present pages only: a hole is never
		 * reported nor protected (no marker is installed in it), so
		 * the walk costs what the page tables hold.
		 */
		int ret = scan_run(&rc, 0, rc.b->size_bytes / block_page_bytes(rc.b));

		if (ret)
			return ret;
		total_pages += rc.pages;
	}
	return total_pages;
}

/*
 * Pages not (present and write-protected): written since re-armed, or
 * unmapped (a page cut from the file reads differently now). A report
 * without WP_MATCHING re-arms nothing; every page of the range lands in a
 * region, holes included, with its categories.
 */
static int uffd_wp_written(struct gw_dirty *d, unsigned block, uint64_t first, uint32_t nr, uint64_t *mask)
{
	struct uffd_wp *w = d->priv;
	const struct gw_ram_block *b;
	struct page_region vec[32];
	uint64_t base, start, end, ps;

	if (!w || block >= d->vm->nr_blocks || nr > 1024)
		return -EINVAL;
	b = &d->vm->blocks[block];
	ps = block_page_bytes(b);
	base = (uintptr_t)b->host + first * ps;
	start = base;
	end = base + (uint64_t)nr * ps;
	memset(mask, 0, (nr + 63) / 64 * sizeof(*mask));
	/* Start with every page suspect; clear the stable ones reported. */
	for (uint32_t i = 0; i < nr; i++)
		mask[i / 64] |= 1ULL << (i % 64);
	while (start < end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg), .start = start, .end = end,
			.vec = (uintptr_t)vec, .vec_len = 32,
			.category_mask = PAGE_IS_PRESENT | PAGE_IS_WRITTEN,
			.category_inverted = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_PRESENT,
		};
		int n = ioctl(w->pagemap_fd, PAGEMAP_SCAN, &arg);
		uint64_t next;

		if (n < 0)
			return -errno;
		for (int r = 0; r < n; r++) {
			if (vec[r].start < start || vec[r].end > end || vec[r].end <= vec[r].start)
				return -EIO;
			for (uint64_t i = (vec[r].start - base) / ps; i < (vec[r].end - base) / ps; i++)
				mask[i / 64] &= ~(1ULL << (i % 64));	/* present, not written */
		}
		if ((uint64_t)n < arg.vec_len)
			break;
		next = vec[n - 1].end > arg.walk_end ? vec[n - 1].end : arg.walk_end;
		if (next <= start)
			return -EIO;
		start = next;
	}
	return 0;
}

const struct gw_dirty_ops gw_dirty_uffd_wp = {
	.name = "uffd-wp",
	.id = GW_DIRTY_UFFD_WP,
	.probe = uffd_wp_probe,
	.start = uffd_wp_start,
	.collect = uffd_wp_collect,
	.clear = NULL,
	.written = uffd_wp_written,
	.stop = uffd_wp_stop,
};
