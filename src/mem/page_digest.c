/* SPDX-License-Identifier: MIT */
/* The postcopy RAM digest: a sum of per-page hashes (see page_digest.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "mem/page_digest.h"
#include "mem/populated.h"
#include "mem/zero.h"
#include "util/fdio.h"
#include "util/thread_name.h"

#define PAGE GW_PAGE_BYTES
#define WINDOW_PAGES 64u		/* one pread of 256 KiB */
#define MAX_THREADS 8

void gw_page_digest_add(struct gw_page_digest *d, unsigned block, uint64_t page, const void *data)
{
	XXH128_hash_t h;

	if (gw_is_zero(data, PAGE))
		return;
	h = XXH3_128bits_withSeed(data, PAGE, (uint64_t)block << 40 | page);
	d->lo += h.low64;
	d->hi += h.high64 + (d->lo < h.low64);
}

void gw_page_digest_merge(struct gw_page_digest *d, const struct gw_page_digest *o)
{
	d->lo += o->lo;
	d->hi += o->hi + (d->lo < o->lo);
}

struct ram_job {
	const struct gw_vm_info *vm;
	const struct gw_bitmap *as_zero;	/* NULL or one per block */
	struct gw_bitmap data[GW_MAX_RAM_BLOCKS];	/* pages that may hold data */
	uint64_t win_base[GW_MAX_RAM_BLOCKS + 1];	/* first global window of block i */
	atomic_uint_fast64_t next;	/* next global window */
	atomic_int err;
};

struct ram_worker {
	struct ram_job *job;
	struct gw_page_digest sum;
	pthread_t thread;
};

static bool counted(const struct ram_job *job, unsigned bi, uint64_t p)
{
	return gw_bitmap_test(&job->data[bi], p) &&
	       !(job->as_zero && gw_bitmap_test(&job->as_zero[bi], p));
}

/* Window @w of block @bi into @sum. 0 or -errno. */
static int hash_window(struct ram_job *job, unsigned bi, uint64_t w, uint8_t *buf,
		       struct gw_page_digest *sum)
{
	const struct gw_ram_block *b = &job->vm->blocks[bi];
	uint64_t first = w * WINDOW_PAGES, nr_pages = b->size_bytes / PAGE;
	uint64_t n = nr_pages - first < WINDOW_PAGES ? nr_pages - first : WINDOW_PAGES;
	const uint8_t *src = (const uint8_t *)b->host + first * PAGE;

	if (!gw_bitmap_any_in_range(&job->data[bi], first, n))
		return 0;
	if (b->fd >= 0) {
		int ret = gw_pread_all(b->fd, buf, n * PAGE, (off_t)(b->fd_offset_bytes + first * PAGE));

		if (ret)
			return ret;
		src = buf;
	}
	for (uint64_t i = 0; i < n; i++)
		if (counted(job, bi, first + i))
			gw_page_digest_add(sum, bi, first + i, src + i * PAGE);
	return 0;
}

static void *ram_worker_main(void *arg)
{
	struct ram_worker *wk = arg;
	struct ram_job *job = wk->job;
	uint64_t total = job->win_base[job->vm->nr_blocks];
	uint8_t *buf = malloc(WINDOW_PAGES * PAGE);
	unsigned bi = 0;

	if (!buf) {
		atomic_store(&job->err, -ENOMEM);
		return NULL;
	}
	for (;;) {
		uint64_t w = atomic_fetch_add(&job->next, 1);
		int ret;

		if (w >= total || atomic_load(&job->err))
			break;
		while (w >= job->win_base[bi + 1])
			bi++;
		ret = hash_window(job, bi, w - job->win_base[bi], buf, &wk->sum);
		if (ret) {
			int zero = 0;

			atomic_compare_exchange_strong(&job->err, &zero, ret);
		}
	}
	free(buf);
	return NULL;
}

int gw_page_digest_ram(const struct gw_vm_info *vm, unsigned nr_threads,
		       const struct gw_bitmap *as_zero, struct gw_page_digest *out)
{
	struct ram_job *job = calloc(1, sizeof(*job));
	struct ram_worker wk[MAX_THREADS];
	unsigned started = 1;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	memset(wk, 0, sizeof(wk));
	if (!job)
		return -ENOMEM;
	job->vm = vm;
	job->as_zero = as_zero;
	for (unsigned i = 0; !ret && i < vm->nr_blocks; i++) {
		const char *method;
		uint64_t pages = vm->blocks[i].size_bytes / PAGE;

		ret = gw_bitmap_init(&job->data[i], pages);
		if (!ret && gw_populated_scan(&vm->blocks[i], &job->data[i], &method) < 0)
			gw_bitmap_set_all(&job->data[i]);	/* no scan here: read everything */
		job->win_base[i + 1] = job->win_base[i] + (pages + WINDOW_PAGES - 1) / WINDOW_PAGES;
	}
	if (nr_threads < 1)
		nr_threads = 1;
	if (nr_threads > MAX_THREADS)
		nr_threads = MAX_THREADS;
	for (unsigned i = 0; i < nr_threads; i++)
		wk[i].job = job;
	for (; !ret && started < nr_threads; started++) {
		if (pthread_create(&wk[started].thread, NULL, ram_worker_main, &wk[started]))
			break;
		gw_thread_name(wk[started].thread, "gw-pdigest%u", started);
	}
	if (!ret)
		ram_worker_main(&wk[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(wk[i].thread, NULL);
	for (unsigned i = 0; i < nr_threads; i++)
		gw_page_digest_merge(out, &wk[i].sum);
	if (!ret)
		ret = atomic_load(&job->err);
	for (unsigned i = 0; i < vm->nr_blocks; i++)
		gw_bitmap_free(&job->data[i]);
	free(job);
	return ret;
}
