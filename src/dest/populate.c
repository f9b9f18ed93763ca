/* SPDX-License-Identifier: MIT */
/*
 * Pre-population on the destination: the source announces the populated
 * ranges of its RAM (EXTENTS, before round 0); a thread allocates them
 * ahead of the stream and off the critical path, because a write into a
 * never-touched page costs a fault each (expensive on virtualised hosts).
 * fd-backed RAM (written with pwrite) is allocated with fallocate, anonymous
 * RAM faulted in with MADV_POPULATE_WRITE, in 4 MiB steps (a few ms each
 * here) so that a failed migration, or a postcopy switch, stops it soon.
 * Best effort: a failed step skips the rest of its range, and what is not
 * populated the stream allocates itself.
 *
 * Never far ahead of the stream: what it populated stays within
 * AHEAD_PAGES of the pages received that take memory (normal and XBZRLE;
 * a zero page takes none), so EXTENTS over all of RAM and no pages commit
 * 64 MiB, not the RAM announced.
 *
 * A postcopy switch stops it (dst_populate_stop, at PC_PREPARE): the pause
 * and the resumed guest's vCPUs need every core. Lowering its priority
 * instead is worse: a step holds the memfd's inode lock, which the page
 * receivers need, and a starved holder made a fault wait 1.5 s (measured).
 * Before this, a 64 MiB step kept a source vCPU with its pause kick
 * pending off the CPU for 2.5 ms, inside the downtime (perf sched).
 *
 * Threads: the job is built by the migration thread, then owned by the
 * populate thread, which frees it. populate_stop: atomic, set by the
 * migration thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include "dest/dest.h"
#include "util/thread_name.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define STEP_PAGES ((4u << 20) / GW_PAGE_BYTES)
#define AHEAD_PAGES ((64u << 20) / GW_PAGE_BYTES)	/* populated ahead of the pages received, at most */

struct populate_job {
	struct gw_session *s;
	size_t nr;			/* bounded by dst_extents_add */
	struct { unsigned block; uint64_t first, count; } *ext;
};

static void job_free(struct populate_job *job)
{
	if (job)
		free(job->ext);
	free(job);
}

/*
 * Allocate @count pages from @first of block @bi: 0 or -1 (stop this
 * range). fd-backed RAM, which the stream writes with pwrite, is also
 * write-protected for the verification snapshot now rather than in the pause.
 */
static int populate_step(struct gw_session *s, unsigned bi, uint64_t first, uint64_t count)
{
	const struct gw_dst_block *db = &s->dst->dblk[bi];

	if (db->map_write)
		return 0;	/* mapped already (preallocated): nothing to allocate, protected after each write */
	if (db->fd < 0)
		return madvise(db->host + first * GW_PAGE_BYTES, count * GW_PAGE_BYTES,
			       MADV_POPULATE_WRITE) ? -1 : 0;
	if (fallocate(db->fd, 0, (off_t)(db->fd_offset_bytes + first * GW_PAGE_BYTES),
		      (off_t)(count * GW_PAGE_BYTES)))
		return -1;
	if (s->snap)
		(void)gw_snapshot_protect(s->snap, bi, first, count);	/* best effort: arming catches up */
	return 0;
}

static bool stopped(struct gw_session *s)
{
	return gw_failed(s) || __atomic_load_n(&s->dst->populate_stop, __ATOMIC_RELAXED);
}

/*
 * Wait (1 ms naps) until @pages populated in all stay within AHEAD_PAGES
 * of the pages received that take memory. false: stopped meanwhile.
 */
static bool within_budget(struct gw_session *s, uint64_t pages)
{
	static const struct timespec nap = { .tv_nsec = 1000000 };

	while (!stopped(s)) {
		uint64_t got = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
			       __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);

		if (pages <= got + AHEAD_PAGES)
			return true;
		nanosleep(&nap, NULL);
	}
	return false;
}

static void *populate_main(void *arg)
{
	struct populate_job *job = arg;
	struct gw_session *s = job->s;
	uint64_t t0 = gw_now_ns(), pages = 0;

	gw_log_set_side(s->side);
	/* A postcopy switch needs every page unmapped: done now, off its path. */
	if (s->dst->hello_flags & GW_HELLO_POSTCOPY)
		pcd_unmap_ahead(s);
	for (size_t i = 0; i < job->nr && !stopped(s); i++) {
		uint64_t done = 0;

		while (done < job->ext[i].count && !stopped(s)) {
			uint64_t n = job->ext[i].count - done < STEP_PAGES ? job->ext[i].count - done : STEP_PAGES;

			if (!s->dst->dblk[job->ext[i].block].map_write && !within_budget(s, pages + done + n))
				break;
			if (populate_step(s, job->ext[i].block, job->ext[i].first + done, n))
				break;
			done += n;
		}
		pages += done;
	}
	gw_log(GW_LOG_INFO, "mem", "prepopulate_done", "pages=%llu duration_us=%llu stopped=%d",
	       (unsigned long long)pages, (unsigned long long)((gw_now_ns() - t0) / 1000),
	       __atomic_load_n(&s->dst->populate_stop, __ATOMIC_RELAXED));
	job_free(job);
	return NULL;
}

int dst_extents_add(struct gw_session *s, const struct gw_msg_extents *m)
{
	struct populate_job *job = s->dst->pop_job;
	const struct gw_dst_block *db;
	void *ext;

	/* Never more than one range per page pair (the caller takes them before round 0 only). */
	if (m->block >= s->vm.nr_blocks)
		return -EPROTO;
	db = &s->dst->dblk[m->block];
	if (job && job->nr + (uint64_t)m->count > db->nr_pages / 2 + GW_WIRE_MAX_EXTENTS)
		return -EPROTO;
	if (!job) {
		job = calloc(1, sizeof(*job));
		if (!job)
			return -ENOMEM;
		job->s = s;
		s->dst->pop_job = job;
	}
	ext = realloc(job->ext, (job->nr + (size_t)m->count) * sizeof(*job->ext));
	if (!ext)
		return -ENOMEM;
	job->ext = ext;
	for (uint32_t i = 0; i < m->count; i++) {
		struct gw_extent e = gw_msg_extents_get(m, i);

		if (e.first_page >= db->nr_pages || e.nr_pages > db->nr_pages - e.first_page)
			return -ERANGE;
		job->ext[job->nr].block = m->block;
		job->ext[job->nr].first = e.first_page;
		job->ext[job->nr].count = e.nr_pages;
		job->nr++;
	}
	return 0;
}

void dst_populate_start(struct gw_session *s)
{
	struct populate_job *job = s->dst->pop_job;

	s->dst->pop_job = NULL;
	if (!job)
		return;
	if ((s->dst->hello_flags & GW_HELLO_LOCAL) ||
	    pthread_create(&s->dst->populate_thread, NULL, populate_main, job)) {
		job_free(job);
		return;
	}
	gw_thread_name(s->dst->populate_thread, "gw-populate");
	s->dst->populate_running = true;
}

void dst_populate_stop(struct gw_session *s)
{
	__atomic_store_n(&s->dst->populate_stop, true, __ATOMIC_RELAXED);
}

void dst_populate_end(struct gw_session *s)
{
	job_free(s->dst->pop_job);
	s->dst->pop_job = NULL;
	dst_populate_stop(s);	/* the stream is over: a step waiting for its pages would wait for ever */
	if (s->dst->populate_running)
		pthread_join(s->dst->populate_thread, NULL);
	s->dst->populate_running = false;
	s->dst->populate_stop = false;
}
