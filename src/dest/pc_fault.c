/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the destination: the fault handler thread (faults become
 * requests on the preempt connection, or are mapped at once when the page
 * is here) and the mapper thread (trusted pages mapped in bulk after
 * resume). See dest/pc_int.h for who owns what.
 */
#include "dest/pc_int.h"

/* ---- the fault handler ---- */

static int vcpu_of(struct gw_pc_dst *pc, int nr_vcpus, pid_t tid)
{
	struct gw_session *s = pc->s;
	int v;

	if (!tid || !s->ops->vcpu_of_thread)
		return -1;
	for (unsigned i = 0; i < pc->nr_tids; i++)
		if (pc->tids[i].tid == tid)
			return pc->tids[i].vcpu;
	v = s->ops->vcpu_of_thread(s->opaque, tid);
	if (v >= nr_vcpus)
		v = -1;
	if (pc->nr_tids < sizeof(pc->tids) / sizeof(pc->tids[0]))
		pc->tids[pc->nr_tids++] = (typeof(pc->tids[0])){ tid, v };
	return v;
}

/*
 * A trusted page about to be mapped: settled once, under its stripe lock;
 * when verifying it enters the digest as it is, before the guest can write
 * it (the mapper and the sweep take the same lock).
 */
static void settle_trusted(struct gw_pc_dst *pc, unsigned block, uint64_t page, struct gw_page_digest *sum)
{
	struct gw_dst_block *db = &pc->s->dst->dblk[block];
	uint8_t buf[PAGE];

	if (gw_bitmap_test_atomic(&pc->settled[block], page))
		return;
	pthread_mutex_lock(pcd_stripe(pc, page));
	if (!gw_bitmap_test_atomic(&pc->settled[block], page)) {
		/* Pages precopy never wrote are still the zero they started as. */
		if (pc->verify && gw_bitmap_test_atomic(&db->written, page) &&
		    !gw_pread_all(db->fd, buf, PAGE, (off_t)(db->fd_offset_bytes + page * PAGE)))
			gw_page_digest_add(sum, block, page, buf);
		gw_bitmap_set_atomic(&pc->settled[block], page);
	}
	pthread_mutex_unlock(pcd_stripe(pc, page));
}

/* Send the gathered requests (req_lock held). */
void pcd_flush_requests(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;

	for (unsigned b = 0; b < s->vm.nr_blocks; b++) {
		struct req_batch *q = &pc->req[b];
		struct gw_msg_pc_req m = { .block = b, .count = q->count, .pages = q->pages };
		int ret;

		if (!q->count)
			continue;
		q->count = 0;
		if (!pc->link_up)
			continue;	/* kept in requested: sent again by the recovery */
		ret = gw_conn_send_msg(&s->preempt, GW_MSG_PC_REQ, &m);
		if (ret) {
			gw_fail(s, GW_PHASE_POSTCOPY, ret, "sending a page request: %s", strerror(-ret));
			return;
		}
		__atomic_fetch_add(&pc->requests, m.count, __ATOMIC_RELAXED);
	}
}

/* One fault: map it at once if its page is right here, else wait and ask (once). */
static void on_fault(struct gw_pc_dst *pc, const struct gw_uffd_fault *f)
{
	struct gw_session *s = pc->s;
	uint64_t t = gw_now_ns();
	/*
	 * Guest faults follow GO (the resume), which set nr_vcpus and `faults`:
	 * the kernel orders them, the acquire says so to the compiler and TSan.
	 */
	int vcpu = vcpu_of(pc, __atomic_load_n(&pc->nr_vcpus, __ATOMIC_ACQUIRE), f->tid);
	struct req_batch *q;
	int ret;

	if (!gw_bitmap_test(&pc->untrusted[f->block], f->page) ||
	    gw_bitmap_test_atomic(&pc->received[f->block], f->page)) {
		if (!gw_bitmap_test(&pc->untrusted[f->block], f->page) && s->dst->dblk[f->block].fd >= 0)
			settle_trusted(pc, f->block, f->page, &pc->handler_sum);
		ret = gw_uffd_post_resolve(pc->uffd, f->block, f->page, f->minor);
		if (ret)
			gw_fail(s, GW_PHASE_POSTCOPY, ret, "mapping page %llu of block %u: %s",
				(unsigned long long)f->page, f->block, strerror(-ret));
		gw_pc_faults_local(&pc->faults, vcpu, t, gw_now_ns());
		return;
	}
	gw_pc_faults_wait(&pc->faults, vcpu, f->block, f->page, t);
	/* Placed meanwhile (its placement did not see this waiter): done now. */
	if (gw_bitmap_test_atomic(&pc->received[f->block], f->page)) {
		gw_pc_faults_placed(&pc->faults, f->block, f->page, 1, gw_now_ns());
		(void)gw_uffd_post_wake(pc->uffd, f->block, f->page);
		return;
	}
	/*
	 * Under req_lock: a recovery sends every requested page again from the
	 * bitmap and empties the gathered requests, so that no page is asked
	 * for twice (a second answer would be refused as never requested).
	 */
	pthread_mutex_lock(&pc->req_lock);
	if (!gw_bitmap_test_and_set_atomic(&pc->requested[f->block], f->page)) {
		q = &pc->req[f->block];
		q->pages[q->count++] = f->page;
		if (q->count == GW_WIRE_MAX_BATCH_PAGES)
			pcd_flush_requests(pc);
	}			/* else asked already: its answer wakes this one too */
	pthread_mutex_unlock(&pc->req_lock);
}

/* Periodic duties: statistics, and a request unanswered past the I/O timeout means a dead link. */
static void tick(struct gw_pc_dst *pc, uint64_t *last_stats_ns)
{
	struct gw_session *s = pc->s;
	uint64_t now = gw_now_ns(), timeout_ns = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS) * 1000000ull;
	uint64_t waited = gw_pc_faults_oldest_ns(&pc->faults, now);
	bool up;

	pthread_mutex_lock(&pc->req_lock);
	up = pc->link_up;
	if (up && waited > now - pc->t_link_up_ns)
		waited = now - pc->t_link_up_ns;	/* waits from before a recovery count from it */
	pthread_mutex_unlock(&pc->req_lock);
	if (up && waited > timeout_ns && !gw_failed(s))
		gw_fail(s, GW_PHASE_POSTCOPY, -ETIMEDOUT, "a page request unanswered for %llu ms",
			(unsigned long long)(waited / 1000000));
	if (now - *last_stats_ns < STATS_MS * 1000000ull)
		return;
	*last_stats_ns = now;
	pcd_publish(pc);
	if (up && !gw_failed(s) && __atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE)) {
		struct gw_msg_pc_stats m;

		pcd_figures(pc, &m);
		if (gw_conn_send_msg(&s->ctl, GW_MSG_PC_STATS, &m))
			gw_fail(s, GW_PHASE_POSTCOPY, -EPIPE, "sending postcopy statistics");
	}
}

/* The fault handler: lives from PC_PREPARE to the end, across recoveries. */
void *pcd_handler_main(void *arg)
{
	struct gw_pc_dst *pc = arg;
	struct gw_session *s = pc->s;
	struct pollfd pfd[2] = { { gw_uffd_post_fd(pc->uffd), POLLIN, 0 }, { pc->stop_fd, POLLIN, 0 } };
	struct gw_uffd_fault *f = malloc(FAULTS_PER_READ * sizeof(*f));
	uint64_t last_stats_ns = 0;

	gw_log_set_side(s->side);
	gw_thread_critical(s, "fault-handler");
	pcd_thread_up(pc);
	while (f && !__atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE)) {
		int n;

		if (poll(pfd, 2, TICK_MS) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		n = gw_uffd_post_read(pc->uffd, f, FAULTS_PER_READ);
		for (int i = 0; i < n; i++)
			on_fault(pc, &f[i]);
		if (n > 0) {
			pthread_mutex_lock(&pc->req_lock);
			pcd_flush_requests(pc);
			pthread_mutex_unlock(&pc->req_lock);
		}
		if (gw_pc_state(s) == GW_PC_ACTIVE)
			tick(pc, &last_stats_ns);
	}
	free(f);
	return NULL;
}

void pcd_stop_handler(struct gw_pc_dst *pc)
{
	uint64_t one = 1;

	if (!pc->handler_started)
		return;
	if (write(pc->stop_fd, &one, sizeof(one)) < 0)
		pthread_cancel(pc->handler);	/* cannot happen with an eventfd */
	pthread_join(pc->handler, NULL);
	pc->handler_started = false;
}

/* ---- the mapper: trusted pages mapped in bulk after resume ---- */

/*
 * Every first touch of a page faults under postcopy, and a fault resolved by
 * the handler costs a round trip through user space (tens of microseconds
 * here). The pages precopy wrote and the source did not re-dirty are right
 * in the page cache: this thread maps them in runs right after resume (one
 * UFFDIO_CONTINUE per run), hashing them first when verifying, so the guest
 * seldom faults on them. Normal priority: it yields to the guest.
 */
static void map_window(struct gw_pc_dst *pc, unsigned b, uint64_t w, uint8_t *buf, struct gw_page_digest *sum)
{
	struct gw_dst_block *db = &pc->s->dst->dblk[b];
	uint64_t first = w * 64, n = db->nr_pages - first < 64 ? db->nr_pages - first : 64, todo;

	pthread_mutex_lock(pcd_stripe(pc, first));
	todo = __atomic_load_n(&db->written.words[w], __ATOMIC_RELAXED) & ~pc->untrusted[b].words[w] &
	       ~__atomic_load_n(&pc->settled[b].words[w], __ATOMIC_RELAXED);
	if (n < 64)
		todo &= (1ull << n) - 1;
	if (todo && pc->verify &&
	    gw_pread_all(db->fd, buf, n * PAGE, (off_t)(db->fd_offset_bytes + first * PAGE)))
		todo = 0;	/* left to the faults */
	for (uint64_t k = 0; k < 64 && (todo >> k);) {	/* k < 64 first: a shift by 64 is undefined */
		uint64_t run;

		if (!(todo >> k & 1)) {
			k++;
			continue;
		}
		for (run = 0; k + run < 64 && (todo >> (k + run) & 1); run++) {
			if (pc->verify)
				gw_page_digest_add(sum, b, first + k + run, buf + (k + run) * PAGE);
			gw_bitmap_set_atomic(&pc->settled[b], first + k + run);
		}
		(void)gw_uffd_post_map_cached(pc->uffd, b, first + k, run);	/* failures: faults map them */
		k += run;
	}
	pthread_mutex_unlock(pcd_stripe(pc, first));
}

void *pcd_mapper_main(void *arg)
{
	struct gw_pc_dst *pc = arg;
	struct gw_session *s = pc->s;
	struct gw_page_digest sum = { 0 };
	uint8_t *buf = malloc(64 * PAGE);
	uint64_t t0 = gw_now_ns(), pages = 0;

	gw_log_set_side(s->side);
	for (unsigned b = 0; buf && b < s->vm.nr_blocks; b++) {
		if (s->dst->dblk[b].fd < 0)
			continue;	/* anonymous: trusted pages stayed mapped */
		for (uint64_t w = 0; w < gw_bitmap_words(&s->dst->dblk[b].written) &&
		     !__atomic_load_n(&pc->mapper_stop, __ATOMIC_ACQUIRE) &&
		     !__atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE); w++) {
			if (!s->dst->dblk[b].written.words[w])
				continue;
			map_window(pc, b, w, buf, &sum);
			pages += (uint64_t)__builtin_popcountll(s->dst->dblk[b].written.words[w] & ~pc->untrusted[b].words[w]);
		}
	}
	free(buf);
	pthread_mutex_lock(&pc->lock);
	gw_page_digest_merge(&pc->sum, &sum);
	pthread_mutex_unlock(&pc->lock);
	gw_log(GW_LOG_INFO, "mem", "postcopy_mapped", "pages=%llu duration_us=%llu", (unsigned long long)pages,
	       (unsigned long long)((gw_now_ns() - t0) / 1000));
	return NULL;
}

void pcd_stop_mapper(struct gw_pc_dst *pc)
{
	if (!pc->mapper_started)
		return;
	__atomic_store_n(&pc->mapper_stop, true, __ATOMIC_RELEASE);
	pthread_join(pc->mapper, NULL);
	pc->mapper_started = false;
}
