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
 *   collect: PAGEMAP_SCAN, PAGE_IS_WRITTEN pages only, with
 *            PM_SCAN_WP_MATCHING: reporting and re-protecting happen in one
 *            walk under the page-table lock, so a racing write is either
 *            reported now or leaves the page written for the next collect.
 *   collect_last: the guest is paused and tracking ends: the same scan
 *            without PM_SCAN_WP_MATCHING (re-protecting is most of the cost:
 *            measured here for 256 MiB written, 3.0 ms with it, 0.8 ms
 *            without), split in 16 MiB windows over two threads.
 *   written: after a page was sent straight from guest memory, the same
 *            scan without PM_SCAN_WP_MATCHING over that batch's region:
 *            a page not (present and protected) may have changed while sent.
 *
 * Cost that grows with the memory in use, not the RAM size. For fd-backed
 * blocks (memfd, tmpfs) a page-table hole in a registered range reads as
 * "written", and protecting one installs a marker PTE (allocating page
 * tables): an empty 8 GiB block would cost milliseconds per scan, or report
 * all of itself. So each block keeps the ranges known to hold data: start
 * finds them in the file (SEEK_DATA, gw_populated_ranges; runs closer than
 * COALESCE_GAP_PAGES are merged, the short holes between them protected
 * too) and protects them; collect scans them, and asks the file only
 * about the holes between them (SEEK_DATA over an empty range is cheap,
 * SEEK_HOLE through a populated one walks the page cache page by page:
 * 17 ms per GiB here, against about 1 ms for the page-table walk). Data
 * found in a hole (a write allocated it since) is scanned, so protected,
 * and joins the known ranges. A known page whose PTE is gone (swapped or
 * punched) reads as written: sent again, never lost. Anonymous blocks are
 * one range: their holes have no page tables and the walk skips them.
 *
 * Batched: one protect or scan ioctl per known range and per 4096 reported
 * runs, never per page.
 * Writes through another mapping of the same memfd are not seen: the
 * guest (workload) must write through the registered mapping.
 *
 * Threads: the priv state is owned by the thread that calls start/collect/stop;
 * collect_last runs LAST_THREADS-1 helpers of its own, joined before it returns;
 * written runs on channel send threads between two collects and reads only
 * pagemap_fd (set at start) and the VM's block table.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mem/compat/uffd.h"
#include "mem/dirty.h"
#include "mem/populated.h"
#include "util/thread_name.h"

#define UFFD_WP_FEATURES (UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM)
#define SCAN_VEC_LEN 4096		/* page_region entries per ioctl (96 KiB) */
#define COALESCE_GAP_PAGES 512u		/* 2 MiB: one page table's worth of hole */
#define LAST_WINDOW_PAGES 4096u		/* collect_last: 16 MiB per work item, 64-page aligned */
#define LAST_THREADS 2

/* Pages [first, end) of a block known to hold data, in order, disjoint. */
struct known_range {
	uint64_t first, end;
};

struct known {
	struct known_range *r;
	size_t nr, cap;
};

struct uffd_wp {
	int uffd;			/* -1 when not open */
	int pagemap_fd;			/* /proc/self/pagemap, -1 when not open */
	unsigned nr_registered;		/* blocks 0..n-1 are registered */
	struct page_region *vec;	/* SCAN_VEC_LEN entries */
	struct known known[GW_MAX_RAM_BLOCKS];
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
	for (unsigned i = 0; i < GW_MAX_RAM_BLOCKS; i++)
		free(w->known[i].r);
	free(w->vec);
	free(w);
	d->priv = NULL;
}

/* One populated run of one block, for start (protect) and collect (scan). */
struct run_ctx {
	struct uffd_wp *w;
	const struct gw_ram_block *b;
	struct known *known;		/* the block's known ranges */
	struct gw_bitmap *out;		/* collect */
	ssize_t pages;			/* collect: pages reported */
	struct page_region *vec;	/* scan vector (collect_last: one per thread) */
	bool rearm;			/* collect: re-protect what is reported */
};

/* Insert [first, end) at index @at of @k (sorted, disjoint), merging touching neighbours. 0 or -ENOMEM. */
static int known_insert(struct known *k, size_t at, uint64_t first, uint64_t end)
{
	if (at > 0 && k->r[at - 1].end == first) {
		k->r[at - 1].end = end;
		if (at < k->nr && k->r[at].first == end) {
			k->r[at - 1].end = k->r[at].end;
			memmove(&k->r[at], &k->r[at + 1], (k->nr - at - 1) * sizeof(*k->r));
			k->nr--;
		}
		return 0;
	}
	if (at < k->nr && k->r[at].first == end) {
		k->r[at].first = first;
		return 0;
	}
	if (k->nr == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 16;
		struct known_range *r = realloc(k->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		k->r = r;
		k->cap = cap;
	}
	memmove(&k->r[at + 1], &k->r[at], (k->nr - at) * sizeof(*k->r));
	k->r[at] = (struct known_range){ first, end };
	k->nr++;
	return 0;
}

/* Runs merged across short holes, handed to @fn a range at a time. */
struct merge_ctx {
	int (*fn)(void *ctx, uint64_t first, uint64_t nr_pages);
	void *ctx;
	uint64_t first, end;		/* the range gathered so far; end == 0: none */
};

static int merge_run(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct merge_ctx *m = ctx;
	int ret = 0;

	if (m->end && first - m->end <= COALESCE_GAP_PAGES) {
		m->end = first + nr_pages;
		return 0;
	}
	if (m->end)
		ret = m->fn(m->ctx, m->first, m->end - m->first);
	m->first = first;
	m->end = first + nr_pages;
	return ret;
}

/* @fn over the populated runs of @b, runs closer than COALESCE_GAP_PAGES merged. */
static int for_each_range(const struct gw_ram_block *b, int (*fn)(void *, uint64_t, uint64_t),
			  void *ctx)
{
	struct merge_ctx m = { fn, ctx, 0, 0 };
	int ret = gw_populated_ranges(b, merge_run, &m);

	if (!ret && m.end)
		ret = fn(ctx, m.first, m.end - m.first);
	return ret;
}

static uint64_t block_page_bytes(const struct gw_ram_block *b)
{
	return b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES;
}

/*
 * Start: protect a range and make it known (ranges come in order).
 * PAGEMAP_SCAN with PM_SCAN_WP_MATCHING and no vector protects every page
 * of the range and reports none: the page-table walk of UFFDIO_WRITEPROTECT,
 * cheaper (per GiB populated here: 9.4-11 ms against 20-22 ms; neither runs
 * faster on two threads).
 */
static int protect_run(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct run_ctx *rc = ctx;
	uint64_t ps = block_page_bytes(rc->b);
	uint64_t start = (uintptr_t)rc->b->host + first * ps, end = start + nr_pages * ps;

	while (start < end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg),
			.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
			.start = start,
			.end = end,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};

		if (ioctl(rc->w->pagemap_fd, PAGEMAP_SCAN, &arg) < 0)
			return -errno;
		if (arg.walk_end <= start)
			return -EIO;	/* no progress: never loop forever */
		start = arg.walk_end;
	}
	return known_insert(rc->known, rc->known->nr, first, first + nr_pages);
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
		struct run_ctx rc = { w, b, &w->known[i], NULL, 0, NULL, false };

		if (ioctl(w->uffd, UFFDIO_REGISTER, &reg) < 0) {
			ret = -errno;
			goto fail;
		}
		w->nr_registered = i + 1;
		ret = for_each_range(b, protect_run, &rc);
		if (ret)
			goto fail;
	}
	return 0;

fail:
	uffd_wp_stop(d);
	return ret;
}

/* Report and re-protect the written pages of one range. */
static int scan_run(void *ctx, uint64_t first_page, uint64_t nr_pages)
{
	struct run_ctx *rc = ctx;
	uint64_t ps = block_page_bytes(rc->b), base = (uintptr_t)rc->b->host;
	uint64_t start = base + first_page * ps, end = start + nr_pages * ps;
	struct page_region *vec = rc->vec;

	while (start < end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg),
			.flags = rc->rearm ? PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC : 0,
			.start = start, .end = end, .vec = (uintptr_t)vec, .vec_len = SCAN_VEC_LEN,
			.category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN,
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

/* Collect, first step: data that appeared in a hole since (a write allocated it). */
static int add_new_run(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct known *found = ctx;

	return known_insert(found, found->nr, first, first + nr_pages);
}

/*
 * One block: find new data in the holes between the known ranges, make it
 * known, then scan every known range (a new one is reported and protected
 * by its first scan).
 */
static int collect_block(struct run_ctx *rc)
{
	struct known *k = rc->known, found = { 0 };
	uint64_t nr_pages = rc->b->size_bytes / block_page_bytes(rc->b), hole = 0;
	int ret = 0;

	for (size_t i = 0; i <= k->nr && !ret; i++) {
		uint64_t hole_end = i < k->nr ? k->r[i].first : nr_pages;

		if (hole < hole_end)
			ret = gw_populated_ranges_in(rc->b, hole, hole_end, add_new_run, &found);
		if (i < k->nr)
			hole = k->r[i].end;
	}
	for (size_t i = 0, at = 0; i < found.nr && !ret; i++) {
		while (at < k->nr && k->r[at].first < found.r[i].first)
			at++;
		ret = known_insert(k, at, found.r[i].first, found.r[i].end);
	}
	free(found.r);
	for (size_t i = 0; i < k->nr && !ret; i++)
		ret = scan_run(rc, k->r[i].first, k->r[i].end - k->r[i].first);
	return ret;
}

static ssize_t uffd_wp_collect(struct gw_dirty *d, struct gw_bitmap *out)
{
	struct uffd_wp *w = d->priv;
	ssize_t total_pages = 0;

	if (!w)
		return -EINVAL;
	for (unsigned i = 0; i < d->vm->nr_blocks; i++) {
		struct run_ctx rc = { w, &d->vm->blocks[i], &w->known[i], &out[i], 0, w->vec, true };
		int ret = collect_block(&rc);

		if (ret)
			return ret;
		total_pages += rc.pages;
	}
	return total_pages;
}

/*
 * collect_last: every known range of every block, and the data found in
 * the holes between them (written since the last collect), cut at 16 MiB
 * windows (64-page aligned, so that two threads never share a bitmap
 * word), handed out to the threads by an atomic counter. Nothing is
 * re-protected and the known ranges do not change: tracking ends after.
 */
struct last_piece {
	unsigned block;
	uint64_t first, nr;		/* pages */
	uint64_t window;		/* global window index: pieces of one window go together */
};

struct last_job {
	struct gw_dirty *d;
	struct gw_bitmap *out;
	struct last_piece *p;
	size_t nr, cap;
	unsigned cur_block;		/* the block being listed */
	size_t next;			/* atomic: next piece to take */
	ssize_t pages;			/* atomic */
	int err;			/* atomic */
};

/* Pieces are listed in address order, block by block: a window's pieces are adjacent. */
static int add_piece(void *ctx, uint64_t first, uint64_t nr_pages)
{
	struct last_job *j = ctx;
	unsigned bi = j->cur_block;
	uint64_t base = (uint64_t)bi << 40;	/* windows of different blocks never coincide */

	while (nr_pages) {
		uint64_t wend = (first / LAST_WINDOW_PAGES + 1) * LAST_WINDOW_PAGES;
		uint64_t n = wend - first < nr_pages ? wend - first : nr_pages;

		if (j->nr == j->cap) {
			struct last_piece *np = realloc(j->p, (j->cap ? j->cap * 2 : 64) * sizeof(*np));

			if (!np)
				return -ENOMEM;
			j->p = np;
			j->cap = j->cap ? j->cap * 2 : 64;
		}
		j->p[j->nr++] = (struct last_piece){ bi, first, n, (base + first) / LAST_WINDOW_PAGES };
		first += n;
		nr_pages -= n;
	}
	return 0;
}

/* Block @bi's known ranges and, between them, the data found in its holes, in order. */
static int list_block(struct last_job *j, struct uffd_wp *w, unsigned bi)
{
	const struct gw_ram_block *b = &j->d->vm->blocks[bi];
	const struct known *k = &w->known[bi];
	uint64_t nr_pages = b->size_bytes / block_page_bytes(b), hole = 0;
	int ret = 0;

	j->cur_block = bi;
	for (size_t i = 0; i <= k->nr && !ret; i++) {
		uint64_t hole_end = i < k->nr ? k->r[i].first : nr_pages;

		if (hole < hole_end)
			ret = gw_populated_ranges_in(b, hole, hole_end, add_piece, j);
		if (i < k->nr && !ret) {
			ret = add_piece(j, k->r[i].first, k->r[i].end - k->r[i].first);
			hole = k->r[i].end;
		}
	}
	return ret;
}

static void *last_worker(void *arg)
{
	struct last_job *j = arg;
	struct uffd_wp *w = j->d->priv;
	struct page_region *vec = calloc(SCAN_VEC_LEN, sizeof(*vec));

	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		uint64_t window;

		/* A whole window per turn: its pieces follow each other in the list. */
		if (i >= j->nr || !vec || __atomic_load_n(&j->err, __ATOMIC_RELAXED))
			break;
		if (i > 0 && j->p[i - 1].window == j->p[i].window)
			continue;	/* taken with the piece before it */
		window = j->p[i].window;
		for (size_t k = i; k < j->nr && j->p[k].window == window; k++) {
			struct run_ctx rc = { w, &j->d->vm->blocks[j->p[k].block], &w->known[j->p[k].block],
					      &j->out[j->p[k].block], 0, vec, false };
			int ret = scan_run(&rc, j->p[k].first, j->p[k].nr);

			__atomic_fetch_add(&j->pages, rc.pages, __ATOMIC_RELAXED);
			if (ret) {
				int zero = 0;

				__atomic_compare_exchange_n(&j->err, &zero, ret, false, __ATOMIC_RELAXED,
							    __ATOMIC_RELAXED);
			}
		}
	}
	if (!vec)
		__atomic_store_n(&j->err, -ENOMEM, __ATOMIC_RELAXED);
	free(vec);
	return NULL;
}

static ssize_t uffd_wp_collect_last(struct gw_dirty *d, struct gw_bitmap *out)
{
	struct last_job j = { .d = d, .out = out };
	pthread_t helpers[LAST_THREADS - 1];
	unsigned started = 0;
	int ret = 0;

	if (!d->priv)
		return -EINVAL;
	for (unsigned i = 0; !ret && i < d->vm->nr_blocks; i++)
		ret = list_block(&j, d->priv, i);
	for (; !ret && started < LAST_THREADS - 1 && j.nr > 1; started++) {
		if (pthread_create(&helpers[started], NULL, last_worker, &j))
			break;
		gw_thread_name(helpers[started], "gw-wp-last%u", started);
	}
	if (!ret)
		last_worker(&j);
	for (unsigned i = 0; i < started; i++)
		pthread_join(helpers[i], NULL);
	free(j.p);
	if (!ret)
		ret = j.err;
	return ret ? ret : j.pages;
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
	.collect_last = uffd_wp_collect_last,
	.clear = NULL,
	.written = uffd_wp_written,
	.stop = uffd_wp_stop,
};
