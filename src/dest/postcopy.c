/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the destination (see dest/postcopy.h, docs/protocol.md#postcopy).
 *
 *   PC_PREPARE  every data channel ended (CHAN_END: every precopy page is
 *               applied); guest RAM goes under userfaultfd (mem/uffd_post.h:
 *               nothing of it stays mapped, so every first touch faults);
 *               the preempt connection is admitted; the fault handler and
 *               one receiver per connection start; PC_PREPARED.
 *   PC_DIRTY    the pages not to trust ("untrusted"), then COMPLETE and GO
 *               as in precopy; the VM resumes with them missing.
 *   postcopy    the fault handler reads faults: a page that is right here
 *               (trusted, or placed already) is mapped at once; any other
 *               becomes a request on the preempt connection (once per page)
 *               and its thread waits in the kernel, without spinning. The
 *               receivers place pages as they come, each page once: a
 *               claim bit is taken before the page is written, so a late
 *               copy (pushed and requested, say) is dropped and never
 *               overwrites what the guest wrote since. When the last
 *               untrusted page is placed: PC_DONE; then PC_END.
 *   recovery    a broken connection leaves the guest running (threads that
 *               fault wait; requests are kept), status postcopy-paused,
 *               until gw_postcopy_recover listens: the source presents the
 *               migration id (PC_RECOVER), gets the map of pages still
 *               missing (PC_NEEDED, PC_RECOVERED), reopens the data and
 *               preempt connections; outstanding requests are sent again.
 *
 * Hostile input: a page on the preempt connection that was not requested
 * (or answered twice), a pushed page outside the untrusted set (or pushed
 * twice), an XBZRLE entry, a page outside RAM: refused with a reason
 * (ERROR to the source), and the migration fails: after the switch that
 * loses the VM, as QEMU would, but nothing is written that should not be.
 *
 * Threads (struct gw_pc_dst belongs to the migration thread unless said):
 * the bitmaps untrusted (set before resume, then read-only), claimed,
 * received, requested, pushed and settled are per-page atomic bits; the
 * counters are atomic; req_lock orders request sending against a recovery;
 * lock guards the digest sum; the fault account has its own lock.
 */
#include "dest/pc_int.h"
#include "util/thread_name.h"

/* ---- small helpers ---- */

int pcd_probe(char *why, size_t why_len)
{
	return gw_uffd_post_probe(why, why_len);
}

/* The statistics this side shows (s->lock taken here). */
void pcd_publish(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;
	struct gw_msg_pc_stats f;
	uint64_t now = gw_now_ns();
	struct gw_stats *st = &s->stats;

	memset(&f, 0, sizeof(f));
	gw_pc_faults_figures(&pc->faults, now, &f);
	pthread_mutex_lock(&s->lock);
	st->postcopy = true;
	st->postcopy_pages = pc->pages;
	st->postcopy_remaining_pages = __atomic_load_n(&pc->remaining, __ATOMIC_RELAXED);
	st->postcopy_requests = __atomic_load_n(&pc->requests, __ATOMIC_RELAXED);
	st->postcopy_placed_requested = __atomic_load_n(&pc->placed_requested, __ATOMIC_RELAXED);
	st->postcopy_placed_pushed = __atomic_load_n(&pc->placed_pushed, __ATOMIC_RELAXED);
	st->postcopy_dup_pages = __atomic_load_n(&pc->dups, __ATOMIC_RELAXED);
	st->postcopy_faults = f.faults;
	st->postcopy_local_faults = f.local_faults;
	st->postcopy_blocktime_ns = f.blocktime_ns;
	st->postcopy_vcpu_blocktime_total_ns = f.vcpu_blocktime_total_ns;
	st->postcopy_nr_vcpus = f.nr_vcpus;
	memcpy(s->stats_vcpu_blocktime_ns, f.vcpu_blocktime_ns, sizeof(s->stats_vcpu_blocktime_ns));
	st->postcopy_latency_p50_ns = f.latency_p50_ns;
	st->postcopy_latency_p99_ns = f.latency_p99_ns;
	st->postcopy_latency_max_ns = f.latency_max_ns;
	st->postcopy_latency_samples = f.latency_samples;
	st->postcopy_recoveries = pc->recoveries;
	st->postcopy_paused_ns = pc->paused_ns + (pc->t_paused_ns ? now - pc->t_paused_ns : 0);
	if (pc->t_resumed_ns)
		st->postcopy_time_ns = (pc->t_done_ns ? pc->t_done_ns : now) - pc->t_resumed_ns;
	pthread_mutex_unlock(&s->lock);
}

/* The figures of PC_STATS and PC_DONE. */
void pcd_figures(struct gw_pc_dst *pc, struct gw_msg_pc_stats *m)
{
	memset(m, 0, sizeof(*m));
	gw_pc_faults_figures(&pc->faults, gw_now_ns(), m);
	m->remaining_pages = __atomic_load_n(&pc->remaining, __ATOMIC_RELAXED);
	m->requests = __atomic_load_n(&pc->requests, __ATOMIC_RELAXED);
	m->placed_requested = __atomic_load_n(&pc->placed_requested, __ATOMIC_RELAXED);
	m->placed_pushed = __atomic_load_n(&pc->placed_pushed, __ATOMIC_RELAXED);
	m->dup_pages = __atomic_load_n(&pc->dups, __ATOMIC_RELAXED);
	pthread_mutex_lock(&pc->s->lock);
	m->paused_ns = pc->paused_ns;
	pthread_mutex_unlock(&pc->s->lock);
}

/* Every page is here: tell the source (again after a recovery if it did not get through). */
void pcd_send_done(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;
	struct gw_msg_pc_stats m;

	if (__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE) || __atomic_load_n(&pc->done_sent, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&s->lock);
	if (!pc->t_done_ns) {
		pc->t_done_ns = gw_now_ns();
		gw_log(GW_LOG_INFO, "mig", "postcopy_complete", "postcopy_ms=%.3f pages=%llu",
		       (pc->t_done_ns - pc->t_resumed_ns) / 1e6, (unsigned long long)pc->pages);
	}
	pthread_mutex_unlock(&s->lock);
	pcd_figures(pc, &m);
	if (gw_conn_send_msg(&s->ctl, GW_MSG_PC_DONE, &m) == 0)
		__atomic_store_n(&pc->done_sent, true, __ATOMIC_RELEASE);
	pcd_publish(pc);
}


/* ---- PC_PREPARE .. resume ---- */

static int pc_alloc(struct gw_session *s)
{
	struct gw_pc_dst *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return -ENOMEM;
	pc->s = s;
	pc->stop_fd = -1;
	s->dst->pcd = pc;
	pthread_mutex_init(&pc->lock, NULL);
	pthread_mutex_init(&pc->req_lock, NULL);
	/* The fault handler waits for the mapper holding one. */
	for (unsigned i = 0; i < NR_STRIPES; i++)
		gw_mutex_init_pi(&pc->stripes[i]);
	gw_pc_faults_init(&pc->faults, 0);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		uint64_t n = s->dst->dblk[i].nr_pages;

		/* Touched now (VM running at the source), not in the pause or on a fault's path. */
		if (gw_bitmap_init_prefaulted(&pc->untrusted[i], n) ||
		    gw_bitmap_init_prefaulted(&pc->claimed[i], n) ||
		    gw_bitmap_init_prefaulted(&pc->received[i], n) ||
		    gw_bitmap_init_prefaulted(&pc->requested[i], n) ||
		    gw_bitmap_init_prefaulted(&pc->pushed[i], n) ||
		    gw_bitmap_init_prefaulted(&pc->settled[i], n))
			return -ENOMEM;
	}
	if (gw_pages_in_init(&pc->preempt_in))
		return -ENOMEM;
	pc->preempt_in_ready = true;
	pc->stop_fd = eventfd(0, EFD_CLOEXEC);
	return pc->stop_fd < 0 ? -errno : 0;
}

/*
 * The switch needs every page of fd-backed RAM unmapped (so that every
 * first touch faults) and unmapping a mapped GiB costs about 0.1 s here:
 * when postcopy is allowed the populate thread does it during precopy, in
 * 64 MiB steps, so that PC_PREPARE finds nothing left to unmap. Precopy
 * writes with pwrite and never maps pages again.
 */
#define UNMAP_STEP_BYTES (64ull << 20)
void pcd_unmap_ahead(struct gw_session *s)
{
	uint64_t t0 = gw_now_ns();

	for (unsigned i = 0; i < s->vm.nr_blocks && !gw_failed(s); i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];

		/* Stops at the switch: PC_PREPARE unmaps what is left (a late step costs a minor fault). */
		for (uint64_t off = 0; b->fd >= 0 && off < b->size_bytes && !gw_failed(s) &&
		     gw_pc_state(s) == GW_PC_NONE; off += UNMAP_STEP_BYTES)
			(void)madvise((uint8_t *)b->host + off,
				      b->size_bytes - off < UNMAP_STEP_BYTES ? b->size_bytes - off : UNMAP_STEP_BYTES,
				      MADV_DONTNEED);
	}
	gw_log(GW_LOG_INFO, "mem", "postcopy_unmapped_ahead", "duration_us=%llu",
	       (unsigned long long)((gw_now_ns() - t0) / 1000));
}

/* Every data channel ended with CHAN_END: every precopy page is applied. */
static int channels_ended(struct gw_session *s)
{
	int ret;

	gw_channels_join(s);
	ret = gw_failed(s);
	for (unsigned i = 0; !ret && i < s->nr_channels; i++)
		if (!s->chans[i].rx.end_seen)
			return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "PC_PREPARE but channel %u ended without CHAN_END", i);
	return ret;
}

int pcd_prepare(struct gw_session *s)
{
	uint64_t t0 = gw_now_ns(), t_joined, t_registered;
	struct gw_msg_pc_prepared done;
	char why[256] = "";
	int ret;

	if (!(s->dst->hello_flags & GW_HELLO_POSTCOPY) || s->dst->pcd)
		return gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "PC_PREPARE %s",
			       s->dst->pcd ? "twice" : "without postcopy in HELLO");
	ret = channels_ended(s);
	if (ret)
		return ret;
	t_joined = gw_now_ns();
	/* The pause and the resumed guest follow: every core is theirs (dest/populate.c). */
	dst_populate_stop(s);
	ret = pc_alloc(s);
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "no memory for postcopy");
	__atomic_store_n(&s->pc_state, GW_PC_PREPARED, __ATOMIC_RELEASE);
	/* The verification snapshot's userfaultfd gives the RAM up to ours. */
	gw_snapshot_disable(s->snap);
	ret = gw_uffd_post_open(&s->vm, &s->dst->pcd->uffd, &s->dst->pcd->user_only);
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret == -EOPNOTSUPP ? -EOPNOTSUPP : ret,
			       "cannot put guest RAM under userfaultfd: %s", strerror(-ret));
	t_registered = gw_now_ns();
	if (s->dst->pcd->user_only)
		gw_log(GW_LOG_WARN, "mig", "postcopy_user_faults_only",
		       "reason=\"no CAP_SYS_PTRACE: faults from inside the kernel (KVM) are not trapped\"");
	ret = pcd_admit_data(s, 1ull << s->nr_channels, why, sizeof(why));
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "preempt connection: %s", why);
	/* The first listener is done: a recovery may listen on the same address. */
	pcd_stop_listening(s);
	if (pthread_create(&s->dst->pcd->handler, NULL, pcd_handler_main, s->dst->pcd))
		return gw_fail(s, GW_PHASE_POSTCOPY, -EAGAIN, "postcopy fault handler thread");
	gw_thread_name(s->dst->pcd->handler, "gw-pc-fault");
	s->dst->pcd->handler_started = true;
	ret = pcd_start_receivers(s->dst->pcd);
	if (ret)
		return ret;
	/*
	 * New threads wait for a CPU behind the guest's vCPUs: each is past its
	 * set-up before PC_PREPARED, or it runs it inside the source's pause
	 * (perf sched: up to 1.2 ms late there). The handler, a receiver per
	 * channel and the preempt one.
	 */
	pcd_wait_threads_up(s->dst->pcd, 1 + s->nr_channels + 1);
	done.prepare_ns = gw_now_ns() - t0;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_PREPARED, &done);
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "sending PC_PREPARED: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "mig", "postcopy_prepared", "prepare_us=%llu channels_us=%llu register_us=%llu",
	       (unsigned long long)(done.prepare_ns / 1000), (unsigned long long)((t_joined - t0) / 1000),
	       (unsigned long long)((t_registered - t_joined) / 1000));
	return 0;
}

int pcd_dirty(struct gw_session *s, const struct gw_msg_pc_map *m)
{
	struct gw_pc_dst *pc = s->dst->pcd;
	struct gw_bitmap *u;
	uint64_t words;

	if (!pc || pc->complete || gw_pc_state(s) != GW_PC_PREPARED)
		return gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "PC_DIRTY outside the postcopy switch");
	if (m->block >= s->vm.nr_blocks)
		return gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "PC_DIRTY for block %u of %u", m->block, s->vm.nr_blocks);
	u = &pc->untrusted[m->block];
	words = gw_bitmap_words(u);
	if (m->first_page / 64 + m->nr_words > words)
		return gw_fail(s, GW_PHASE_RECEIVE, -ERANGE, "PC_DIRTY beyond block %u", m->block);
	for (uint32_t i = 0; i < m->nr_words; i++) {
		uint64_t w = gw_msg_pc_map_word(m, i), at = m->first_page / 64 + i;

		if (at == words - 1 && u->nr_bits % 64 && (w >> (u->nr_bits % 64)))
			return gw_fail(s, GW_PHASE_RECEIVE, -ERANGE, "PC_DIRTY names pages beyond block %u", m->block);
		u->words[at] |= w;
	}
	return 0;
}

int pcd_complete(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->dst->pcd;

	if (!pc || pc->complete)
		return gw_fail(s, GW_PHASE_FINAL, -EPROTO, "COMPLETE for postcopy without PC_PREPARE");
	pc->verify = (s->dst->hello_flags & GW_HELLO_VERIFY) != 0;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		struct gw_bitmap *u = &pc->untrusted[i];
		const struct gw_dst_block *db = &s->dst->dblk[i];

		/* A page that failed its CRC in precopy is trusted only if sent again since. */
		for (uint64_t w = 0; __atomic_load_n(&db->nr_stale, __ATOMIC_RELAXED) &&
		     w < gw_bitmap_words(u); w++) {
			uint64_t bad = __atomic_load_n(&db->stale.words[w], __ATOMIC_RELAXED) & ~u->words[w];

			if (bad)
				return gw_fail(s, GW_PHASE_FINAL, -EBADMSG, "page %llu of block %u failed its CRC "
					       "and is not in the map of pages to fetch",
					       (unsigned long long)(w * 64 + (unsigned)__builtin_ctzll(bad)), i);
		}
		pc->pages += gw_bitmap_weight(u);
		if (s->dst->dblk[i].fd >= 0)
			continue;
		/* Anonymous RAM: the stale copies go; the guest waits for the new ones. */
		pc->verify = false;
		for (uint64_t p = gw_bitmap_next_set(u, 0); p < u->nr_bits;) {
			uint64_t end = gw_bitmap_next_clear(u, p);
			int ret = gw_uffd_post_zap(pc->uffd, i, p, end - p);

			if (ret)
				return gw_fail(s, GW_PHASE_FINAL, ret, "dropping stale pages: %s", strerror(-ret));
			p = gw_bitmap_next_set(u, end);
		}
	}
	__atomic_store_n(&pc->remaining, pc->pages, __ATOMIC_RELEASE);
	pc->complete = true;
	gw_log(GW_LOG_INFO, "mig", "postcopy_map", "pages=%llu verify=%d", (unsigned long long)pc->pages,
	       pc->verify);
	return 0;
}

int pcd_go(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->dst->pcd;
	int n = s->vm.nr_vcpus;

	if (s->ops->postcopy_ram)
		n = s->ops->postcopy_ram(s->opaque, false);
	n = n > 0 && n <= GW_PC_MAX_VCPUS ? n : 0;
	/* The handler thread may be in `faults` (its periodic tick): set, never re-initialised. */
	gw_pc_faults_set_vcpus(&pc->faults, (unsigned)n);
	__atomic_store_n(&pc->nr_vcpus, n, __ATOMIC_RELEASE);	/* the handler's acquire */
	pthread_mutex_lock(&pc->req_lock);
	pc->link_up = true;
	pc->t_link_up_ns = gw_now_ns();
	pthread_mutex_unlock(&pc->req_lock);
	return 0;
}

void pcd_resumed(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->dst->pcd;

	pthread_mutex_lock(&s->lock);
	pc->t_resumed_ns = gw_now_ns();
	s->status = s->stats.status = GW_STATUS_POSTCOPY_ACTIVE;
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	__atomic_store_n(&s->pc_state, GW_PC_ACTIVE, __ATOMIC_RELEASE);
	gw_log(GW_LOG_INFO, "mig", "postcopy_active", "pages=%llu vcpus=%d", (unsigned long long)pc->pages,
	       pc->nr_vcpus);
	/* Best effort: without it the faults map the same pages, one by one. */
	pc->mapper_started = pthread_create(&pc->mapper, NULL, pcd_mapper_main, pc) == 0;
	if (pc->mapper_started)
		gw_thread_name(pc->mapper, "gw-pc-map");
}


/* ---- the end ---- */

/*
 * Verification: the pages precopy wrote that nobody touched since enter
 * the digest now (the rest did as they were placed or first touched).
 */
void pcd_sweep(struct gw_session *s, struct gw_pc_dst *pc)
{
	struct gw_page_digest sum = { 0 };
	uint8_t *buf = malloc(64 * PAGE);
	uint64_t t0 = gw_now_ns();
	int ret = buf ? 0 : -ENOMEM;

	for (unsigned b = 0; !ret && b < s->vm.nr_blocks; b++) {
		struct gw_dst_block *db = &s->dst->dblk[b];

		for (uint64_t w = 0; !ret && w < gw_bitmap_words(&db->written); w++) {
			uint64_t todo = db->written.words[w] & ~pc->untrusted[b].words[w] &
					~__atomic_load_n(&pc->settled[b].words[w], __ATOMIC_RELAXED);
			uint64_t first = w * 64, n = db->nr_pages - first < 64 ? db->nr_pages - first : 64;

			if (!todo)
				continue;
			pthread_mutex_lock(pcd_stripe(pc, first));
			ret = gw_pread_all(db->fd, buf, n * PAGE, (off_t)(db->fd_offset_bytes + first * PAGE));
			for (uint64_t k = 0; !ret && k < n; k++) {
				if (!(todo >> k & 1) || gw_bitmap_test_atomic(&pc->settled[b], first + k))
					continue;
				gw_page_digest_add(&sum, b, first + k, buf + k * PAGE);
				gw_bitmap_set_atomic(&pc->settled[b], first + k);
			}
			pthread_mutex_unlock(pcd_stripe(pc, first));
		}
	}
	free(buf);
	pthread_mutex_lock(&pc->lock);
	gw_page_digest_merge(&sum, &pc->sum);
	gw_page_digest_merge(&sum, &pc->handler_sum);
	pc->digest = (struct gw_digest){ sum.lo, sum.hi };
	pc->digest_err = ret;
	pthread_mutex_unlock(&pc->lock);
	gw_log(GW_LOG_INFO, "mig", "postcopy_digest", "sweep_us=%llu err=%d",
	       (unsigned long long)((gw_now_ns() - t0) / 1000), ret);
}

/* Every page is here: stop trapping, tell the VMM. */
static void finish(struct gw_session *s, struct gw_pc_dst *pc, bool verify)
{
	gw_conn_shutdown(&s->preempt);	/* the receivers wait for nothing more (control stays) */
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_conn_shutdown(&s->chans[i].conn);
	pcd_join_receivers(pc);
	pcd_stop_mapper(pc);	/* what it did not map, the sweep hashes */
	if (verify && pc->verify)
		pcd_sweep(s, pc);	/* the handler still maps (and hashes) first touches */
	pcd_stop_handler(pc);
	gw_uffd_post_unregister(pc->uffd);
	__atomic_store_n(&s->pc_state, GW_PC_DONE, __ATOMIC_RELEASE);
	pcd_publish(pc);
	if (s->ops->postcopy_ram)
		(void)s->ops->postcopy_ram(s->opaque, true);
}

int pcd_run(struct gw_session *s, uint8_t *buf, size_t cap, bool *unverified)
{
	struct gw_pc_dst *pc = s->dst->pcd;
	union gw_msg *m = malloc(sizeof(*m));
	int ret = m ? 0 : gw_fail(s, GW_PHASE_POSTCOPY, -ENOMEM, "no memory");

	/* The source pings every half second: silence past the I/O timeout is a dead link. */
	*unverified = false;
	gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	pcd_send_done(pc);	/* nothing was missing */
	while (!ret) {
		char why[160] = "";
		int type = gw_conn_recv_msg(&s->ctl, m, buf, cap, why, sizeof(why));

		if (type < 0) {
			if (!__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE) &&
			    __atomic_load_n(&pc->done_sent, __ATOMIC_ACQUIRE)) {
				/* Every page is here and the source was told: the VM needs nothing more. */
				gw_log(GW_LOG_WARN, "mig", "postcopy_end_lost", "reason=\"%s\"",
				       gw_conn_err_text(type, "source"));
				finish(s, pc, false);
				free(m);
				*unverified = true;
				return 0;
			}
			if (!gw_failed(s))
				gw_fail(s, GW_PHASE_POSTCOPY, type, "control connection: %s%s%s",
					gw_conn_err_text(type, "source"), why[0] ? ": " : "", why);
			ret = __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE);
			if (!ret)
				ret = pcd_recover(s, pc);
			continue;
		}
		switch (type) {
		case GW_MSG_PING:
			if (gw_conn_send_msg(&s->ctl, GW_MSG_PONG, &m->ping))
				gw_fail(s, GW_PHASE_POSTCOPY, -EPIPE, "sending PONG");
			break;
		case GW_MSG_PC_END:
			if (__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE))
				ret = gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "PC_END with %llu pages missing",
					      (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
			else
				goto out;
			break;
		case GW_MSG_ERROR:
			ret = gw_fail_from_peer(s, GW_PHASE_POSTCOPY, &m->error);
			break;
		default:
			ret = gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "unexpected %s on control during postcopy",
				      gw_frame_type_name((uint16_t)type));
		}
	}
	free(m);
	return ret;
out:
	free(m);
	finish(s, pc, true);
	return 0;
}

int pcd_digest(struct gw_session *s, struct gw_digest *out, uint64_t *faults)
{
	struct gw_pc_dst *pc = s->dst->pcd;
	struct gw_msg_pc_stats f;
	int ret;

	if (!pc->verify)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&pc->lock);
	*out = pc->digest;
	ret = pc->digest_err;
	pthread_mutex_unlock(&pc->lock);
	gw_pc_faults_figures(&pc->faults, gw_now_ns(), &f);
	*faults = f.faults;
	return ret;
}

void pcd_release(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->dst->pcd;

	if (!pc)
		return;
	if (gw_pc_state(s) == GW_PC_ACTIVE)
		gw_log(GW_LOG_ERROR, "mig", "postcopy_failed",
		       "vm=lost remaining_pages=%llu reason=\"the guest runs here with pages that will never come\"",
		       (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
	gw_session_shutdown_conns(s);
	pcd_join_receivers(pc);
	pcd_stop_mapper(pc);
	pcd_stop_handler(pc);
	pcd_publish(pc);
	/* Closing the userfaultfd wakes every thread still waiting in a fault. */
	gw_uffd_post_close(pc->uffd);
	if (pc->preempt_in_ready)
		gw_pages_in_release(&pc->preempt_in);
	if (pc->stop_fd >= 0)
		close(pc->stop_fd);
	for (unsigned i = 0; i < GW_MAX_RAM_BLOCKS; i++) {
		gw_bitmap_free(&pc->untrusted[i]);
		gw_bitmap_free(&pc->claimed[i]);
		gw_bitmap_free(&pc->received[i]);
		gw_bitmap_free(&pc->requested[i]);
		gw_bitmap_free(&pc->pushed[i]);
		gw_bitmap_free(&pc->settled[i]);
	}
	gw_pc_faults_destroy(&pc->faults);
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_destroy(&pc->stripes[i]);
	pthread_mutex_destroy(&pc->lock);
	pthread_mutex_destroy(&pc->req_lock);
	free(pc);
	s->dst->pcd = NULL;
	gw_conn_close(&s->preempt);
}
