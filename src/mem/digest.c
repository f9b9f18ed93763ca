/* SPDX-License-Identifier: MIT */
/*
 * Canonical whole-RAM digest (see digest.h for the form). Byte layout of
 * what is hashed, all integers little-endian u64:
 *
 *   chunk digest  = XXH3-128(chunk bytes, holes as zeros)    256 KiB chunks,
 *                   the last chunk of a block may be shorter
 *   group digest  = XXH3-128 over, for each non-zero chunk of the group in
 *                   order: block index, chunk index (in the block), lo, hi
 *   result        = XXH3-128 over "godwit-ram-digest-v1", nr_blocks, then per
 *                   block: name (32 bytes, NUL padded), size_bytes, and for
 *                   each non-empty group: group index (in the block), lo, hi
 *
 * A chunk is zero when every populated page in it is zero; never-populated
 * pages (and pages the caller says hold no data, or are to be taken as
 * zeros) count as zeros. So a populated all-zero block and a hole give
 * the same result, and so do 1 and N threads (each group is hashed alone
 * and the groups are combined in order).
 *
 * Threads: workers share only the job (read-only) and take groups from an
 * atomic counter; each writes its own slots of results[].
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <godwit/buf.h>
#include "mem/bitmap.h"
#include "mem/digest.h"
#include "util/fdio.h"
#include "mem/populated.h"
#include "mem/zero.h"
#include "util/thread_name.h"

#define CHUNK_BYTES GW_DIGEST_CHUNK_BYTES
#define GROUP_BYTES (64u << 20)
#define CHUNKS_PER_GROUP (GROUP_BYTES / CHUNK_BYTES)
#define ZERO_BUF_BYTES (64u << 10)
#define MAX_THREADS 64

static const uint8_t zero_buf[ZERO_BUF_BYTES];

struct group_result {
	bool nonempty;			/* some chunk of the group is not zero */
	XXH128_hash_t hash;
};

struct digest_job {
	const struct gw_vm_info *vm;			/* set at creation */
	struct gw_bitmap populated[GW_MAX_RAM_BLOCKS];	/* set at creation */
	uint64_t group_base[GW_MAX_RAM_BLOCKS + 1];	/* first global group of block i */
	struct group_result *results;			/* slot g written by one worker */
	atomic_uint_fast64_t next_group;		/* work counter */
	atomic_int err;					/* first error, 0 when none */
	const struct gw_digest_hooks *hooks;		/* NULL: RAM does not change */
};

static uint64_t page_size_of(const struct gw_ram_block *b)
{
	return b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES;
}

/* Whether the page containing byte offset @off of block @bi may hold data. */
static bool byte_populated(const struct digest_job *job, unsigned bi, uint64_t off)
{
	return gw_bitmap_test(&job->populated[bi], off / page_size_of(&job->vm->blocks[bi]));
}

/*
 * Walk [off, off+len) of block @bi as alternating runs of populated and
 * hole bytes; calls fn(run_off, run_len, populated). Returns false as soon
 * as fn does.
 */
typedef bool (*run_fn)(void *ctx, const uint8_t *p, uint64_t len, bool populated);

static bool walk_runs(const struct digest_job *job, unsigned bi, uint64_t off, uint64_t len,
		      run_fn fn, void *ctx)
{
	const struct gw_ram_block *b = &job->vm->blocks[bi];
	uint64_t ps = page_size_of(b);
	uint64_t end = off + len;

	while (off < end) {
		bool pop = byte_populated(job, bi, off);
		uint64_t run_end = off;

		while (run_end < end && byte_populated(job, bi, run_end) == pop)
			run_end = (run_end / ps + 1) * ps;
		if (run_end > end)
			run_end = end;
		if (!fn(ctx, (const uint8_t *)b->host + off, run_end - off, pop))
			return false;
		off = run_end;
	}
	return true;
}

static bool run_is_zero(void *ctx, const uint8_t *p, uint64_t len, bool populated)
{
	(void)ctx;
	return !populated || gw_is_zero(p, len);
}

static bool run_hash(void *ctx, const uint8_t *p, uint64_t len, bool populated)
{
	XXH3_state_t *st = ctx;

	if (populated) {
		XXH3_128bits_update(st, p, len);
		return true;
	}
	/* Holes are fed from zero_buf, never read through the mapping. */
	while (len) {
		uint64_t n = len < ZERO_BUF_BYTES ? len : ZERO_BUF_BYTES;

		XXH3_128bits_update(st, zero_buf, n);
		len -= n;
	}
	return true;
}

/*
 * fd-backed chunk: read it with pread (holes read as zeros without being
 * allocated). Kernel-side reads avoid first-touch faults on the mapping,
 * which dominate on virtualised hosts. Returns false when the chunk is zero.
 * Same bytes as the mapping, so the same canonical digest.
 */
static bool chunk_read_fd(const struct digest_job *job, unsigned bi, uint64_t off,
			  uint64_t len, uint8_t *buf, int *err)
{
	const struct gw_ram_block *b = &job->vm->blocks[bi];
	uint64_t ps = page_size_of(b);

	if (!gw_bitmap_any_in_range(&job->populated[bi], off / ps, (len + ps - 1) / ps))
		return false;	/* no populated page in the chunk */
	*err = gw_pread_all(b->fd, buf, len, (off_t)(b->fd_offset_bytes + off));
	if (*err)
		return false;
	/* Pages outside the population count as zeros, whatever the file holds. */
	for (uint64_t p = 0; p * ps < len; p++)
		if (!gw_bitmap_test(&job->populated[bi], off / ps + p))
			memset(buf + p * ps, 0, (size_t)(len - p * ps < ps ? len - p * ps : ps));
	return !gw_is_zero(buf, len);
}

/*
 * The contribution of chunk @c of block @bi: zero (nothing), or its
 * XXH3-128. @buf holds CHUNK_BYTES. 0 or -errno.
 */
static int hash_chunk(const struct digest_job *job, unsigned bi, uint64_t c, XXH3_state_t *cst,
		      uint8_t *buf, struct gw_chunk_hash *res)
{
	const struct gw_ram_block *b = &job->vm->blocks[bi];
	uint64_t off = c * CHUNK_BYTES;
	uint64_t len = b->size_bytes - off < CHUNK_BYTES ? b->size_bytes - off : CHUNK_BYTES;
	XXH128_hash_t h;
	int err = 0;

	res->nonzero = false;
	if (b->fd >= 0) {
		if (!chunk_read_fd(job, bi, off, len, buf, &err))
			return err;
		h = XXH3_128bits(buf, len);
	} else {
		if (walk_runs(job, bi, off, len, run_is_zero, NULL))
			return 0;
		XXH3_128bits_reset(cst);
		walk_runs(job, bi, off, len, run_hash, cst);
		h = XXH3_128bits_digest(cst);
	}
	res->nonzero = true;
	res->lo = h.low64;
	res->hi = h.high64;
	return 0;
}

/* A chunk's result, through the hooks when RAM may change meanwhile. */
static int chunk_result(const struct digest_job *job, unsigned bi, uint64_t c, XXH3_state_t *cst,
			uint8_t *buf, struct gw_chunk_hash *res)
{
	const struct gw_digest_hooks *hk = job->hooks;
	int err;

	if (!hk)
		return hash_chunk(job, bi, c, cst, buf, res);
	if (hk->chunk_begin(hk->ctx, bi, c, res))
		return 0;	/* hashed already, before its first write */
	err = hash_chunk(job, bi, c, cst, buf, res);
	hk->chunk_end(hk->ctx, bi, c, err ? NULL : res);
	return err;
}

static void hash_group(struct digest_job *job, unsigned bi, uint64_t group,
		       XXH3_state_t *gst, XXH3_state_t *cst, struct group_result *res,
		       uint8_t *buf)
{
	const struct gw_ram_block *b = &job->vm->blocks[bi];

	res->nonempty = false;
	XXH3_128bits_reset(gst);
	for (uint64_t c = group * CHUNKS_PER_GROUP;
	     c < (group + 1) * CHUNKS_PER_GROUP && c * CHUNK_BYTES < b->size_bytes; c++) {
		struct gw_chunk_hash ch;
		uint8_t rec[32];
		int err = chunk_result(job, bi, c, cst, buf, &ch);

		if (err) {
			int zero = 0;

			atomic_compare_exchange_strong(&job->err, &zero, err);
			return;
		}
		if (!ch.nonzero)
			continue;
		gw_le64_put(rec, bi);
		gw_le64_put(rec + 8, c);
		gw_le64_put(rec + 16, ch.lo);
		gw_le64_put(rec + 24, ch.hi);
		XXH3_128bits_update(gst, rec, sizeof(rec));
		res->nonempty = true;
	}
	if (res->nonempty)
		res->hash = XXH3_128bits_digest(gst);
}

static void *digest_worker(void *arg)
{
	struct digest_job *job = arg;
	uint64_t nr_groups = job->group_base[job->vm->nr_blocks];
	XXH3_state_t *gst = XXH3_createState();
	XXH3_state_t *cst = XXH3_createState();
	uint8_t *buf = malloc(CHUNK_BYTES);
	unsigned bi = 0;

	if (!gst || !cst || !buf) {
		int zero = 0;

		atomic_compare_exchange_strong(&job->err, &zero, -ENOMEM);
		goto out;
	}
	for (;;) {
		uint64_t g = atomic_fetch_add(&job->next_group, 1);

		if (g >= nr_groups || atomic_load(&job->err))
			break;
		/* Groups are handed out in increasing order: bi only moves forward. */
		while (g >= job->group_base[bi + 1])
			bi++;
		hash_group(job, bi, g - job->group_base[bi], gst, cst, &job->results[g], buf);
	}
out:
	free(buf);
	XXH3_freeState(gst);
	XXH3_freeState(cst);
	return NULL;
}

static int digest_combine(const struct digest_job *job, struct gw_digest *out)
{
	static const char tag[] = "godwit-ram-digest-v1";
	XXH3_state_t *st = XXH3_createState();
	uint8_t rec[40];
	XXH128_hash_t h;

	if (!st)
		return -ENOMEM;
	XXH3_128bits_reset(st);
	XXH3_128bits_update(st, tag, sizeof(tag) - 1);
	gw_le64_put(rec, job->vm->nr_blocks);
	XXH3_128bits_update(st, rec, 8);
	for (unsigned bi = 0; bi < job->vm->nr_blocks; bi++) {
		const struct gw_ram_block *b = &job->vm->blocks[bi];

		memset(rec, 0, sizeof(rec));
		memcpy(rec, b->name, strnlen(b->name, GW_RAM_NAME_MAX - 1));
		gw_le64_put(rec + GW_RAM_NAME_MAX, b->size_bytes);
		XXH3_128bits_update(st, rec, GW_RAM_NAME_MAX + 8);
		for (uint64_t g = job->group_base[bi]; g < job->group_base[bi + 1]; g++) {
			if (!job->results[g].nonempty)
				continue;
			gw_le64_put(rec, g - job->group_base[bi]);
			gw_le64_put(rec + 8, job->results[g].hash.low64);
			gw_le64_put(rec + 16, job->results[g].hash.high64);
			XXH3_128bits_update(st, rec, 24);
		}
	}
	h = XXH3_128bits_digest(st);
	XXH3_freeState(st);
	out->lo = h.low64;
	out->hi = h.high64;
	return 0;
}

int gw_ram_digest(const struct gw_vm_info *vm, unsigned nr_threads, struct gw_digest *out)
{
	return gw_ram_digest_masked(vm, nr_threads, NULL, out);
}

int gw_ram_digest_masked(const struct gw_vm_info *vm, unsigned nr_threads,
			 const struct gw_bitmap *may_hold_data, struct gw_digest *out)
{
	return gw_ram_digest_hooked(vm, nr_threads, may_hold_data, NULL, out);
}

/*
 * The job's population bitmaps: @may_hold_data copied, or scanned; then
 * without the pages of @as_zero (NULL: none). 0 or -errno.
 */
static int job_populated(struct digest_job *job, const struct gw_bitmap *may_hold_data,
			 const struct gw_bitmap *as_zero)
{
	const struct gw_vm_info *vm = job->vm;

	for (unsigned bi = 0; bi < vm->nr_blocks; bi++) {
		const struct gw_ram_block *b = &vm->blocks[bi];
		uint64_t ps = page_size_of(b);
		ssize_t npop;

		if (!b->host || b->size_bytes % ps)
			return -EINVAL;
		job->group_base[bi + 1] = job->group_base[bi] +
			(b->size_bytes + GROUP_BYTES - 1) / GROUP_BYTES;
		if (gw_bitmap_init(&job->populated[bi], b->size_bytes / ps) < 0)
			return -ENOMEM;
		if ((may_hold_data && may_hold_data[bi].nr_bits != job->populated[bi].nr_bits) ||
		    (as_zero && as_zero[bi].nr_bits != job->populated[bi].nr_bits))
			return -EINVAL;
		if (may_hold_data) {
			gw_bitmap_or(&job->populated[bi], &may_hold_data[bi]);
		} else {
			npop = gw_populated_scan(b, &job->populated[bi], NULL);
			if (npop < 0)
				return (int)npop;
		}
		if (as_zero)
			gw_bitmap_andnot(&job->populated[bi], &as_zero[bi]);
	}
	return 0;
}

static int digest_run(const struct gw_vm_info *vm, unsigned nr_threads,
		      const struct gw_bitmap *may_hold_data, const struct gw_bitmap *as_zero,
		      const struct gw_digest_hooks *hooks, struct gw_digest *out)
{
	pthread_t threads[MAX_THREADS];
	unsigned nr_started = 0;
	struct digest_job *job;
	uint64_t nr_groups;
	int ret;

	if (!vm || !out || nr_threads < 1 || vm->nr_blocks > GW_MAX_RAM_BLOCKS)
		return -EINVAL;
	job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	job->vm = vm;
	job->hooks = hooks;
	ret = job_populated(job, may_hold_data, as_zero);
	if (ret)
		goto out;
	nr_groups = job->group_base[vm->nr_blocks];
	job->results = calloc(nr_groups ? nr_groups : 1, sizeof(*job->results));
	if (!job->results) {
		ret = -ENOMEM;
		goto out;
	}

	if (nr_threads > MAX_THREADS)
		nr_threads = MAX_THREADS;
	if (nr_threads > nr_groups)
		nr_threads = nr_groups ? (unsigned)nr_groups : 1;
	/* The calling thread is worker 0; a failed create just means fewer helpers. */
	for (unsigned i = 1; i < nr_threads; i++) {
		if (pthread_create(&threads[nr_started], NULL, digest_worker, job) != 0)
			break;
		gw_thread_name(threads[nr_started], "gw-digest%u", i);
		nr_started++;
	}
	digest_worker(job);
	for (unsigned i = 0; i < nr_started; i++)
		pthread_join(threads[i], NULL);

	ret = atomic_load(&job->err);
	if (ret == 0)
		ret = digest_combine(job, out);
out:
	for (unsigned bi = 0; bi < vm->nr_blocks; bi++)
		gw_bitmap_free(&job->populated[bi]);
	free(job->results);
	free(job);
	return ret;
}

int gw_ram_digest_hooked(const struct gw_vm_info *vm, unsigned nr_threads,
			 const struct gw_bitmap *may_hold_data, const struct gw_digest_hooks *hooks,
			 struct gw_digest *out)
{
	return digest_run(vm, nr_threads, may_hold_data, NULL, hooks, out);
}

int gw_ram_digest_except(const struct gw_vm_info *vm, unsigned nr_threads,
			 const struct gw_bitmap *as_zero, struct gw_digest *out)
{
	return digest_run(vm, nr_threads, NULL, as_zero, NULL, out);
}

int gw_digest_chunk(const struct gw_vm_info *vm, const struct gw_bitmap *may_hold_data,
		    unsigned bi, uint64_t chunk, uint8_t *buf, struct gw_chunk_hash *res)
{
	struct digest_job *job = calloc(1, sizeof(*job));
	XXH3_state_t *cst = XXH3_createState();
	int ret = job && cst ? 0 : -ENOMEM;

	if (!ret) {
		const struct gw_ram_block *b = &vm->blocks[bi];

		/* The bitmap is only read: borrow it instead of a copy. */
		job->vm = vm;
		job->populated[bi] = may_hold_data[bi];
		ret = chunk * CHUNK_BYTES < b->size_bytes ? hash_chunk(job, bi, chunk, cst, buf, res) : -EINVAL;
	}
	XXH3_freeState(cst);
	free(job);
	return ret;
}
