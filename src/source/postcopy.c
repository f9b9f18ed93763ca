/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the source (see source/postcopy.h, docs/protocol.md#postcopy).
 *
 *   switch     VM running: every data channel drains and sends CHAN_END;
 *              PC_PREPARE; the preempt connection; PC_PREPARED (the
 *              destination applied every precopy page). Then the pause:
 *              final harvest, PC_DIRTY (the pages not to trust: dirty
 *              since their last copy, never sent, or freed after being
 *              sent), STATE, COMPLETE(POSTCOPY), READY, GO, RESUMED. The
 *              downtime is that pause; it does not depend on the dirty rate.
 *   postcopy   a server thread answers page requests on the preempt
 *              connection at once (never behind a background batch); one
 *              pusher per data channel sends the remaining pages, around
 *              recent requests first (postcopy/pick.h); the migration
 *              thread pings the destination every PING_MS and publishes
 *              statistics, until PC_DONE (every page placed), then PC_END.
 *   recovery   a broken connection (gw_failed() reports s->pc_broken) stops
 *              every thread; status postcopy-paused until gw_postcopy_resume
 *              names the destination's recovery URL: PC_RECOVER (migration
 *              id), the destination's map of pages still missing
 *              (PC_NEEDED, authoritative: it replaces ours), new data and
 *              preempt connections, and the threads start again.
 *
 * After GO the source never resumes the VM by itself: the destination may
 * run it. Before GO every failure resumes it (c->paused, source.c).
 *
 * Threads: struct gw_pc_src belongs to the migration thread, except: the
 * push order (pick, todo, zero) under pc->lock (pushers, server, the
 * migration thread during recovery); the counters pushed/answered/requests
 * and the flag done are atomic; pout belongs to the server thread.
 */
#include "source/pc_int.h"

/* ---- the decision ---- */

int gw_session_start_postcopy(struct gw_session *s)
{
	int ret = 0;

	if (!s || s->role != GW_ROLE_SOURCE)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->running || !gw_param(s, GW_PARAM_POSTCOPY))
		ret = -EINVAL;
	else if (gw_pc_state(s) != GW_PC_NONE || s->go_sent ||
		 __atomic_exchange_n(&s->pc_start_req, true, __ATOMIC_ACQ_REL))
		ret = -EALREADY;
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		gw_log(GW_LOG_INFO, "mig", "postcopy_requested", "by=request");
	return ret;
}

bool pcs_want_switch(struct gw_session *s, struct src_ctx *c, uint64_t t_precopy_ns, bool mid_round)
{
	uint64_t rounds = (uint64_t)gw_param(s, GW_PARAM_POSTCOPY_AFTER_ROUNDS);
	uint64_t after_ms = (uint64_t)gw_param(s, GW_PARAM_POSTCOPY_AFTER_MS);
	uint64_t auto_rounds = (uint64_t)gw_param(s, GW_PARAM_POSTCOPY_AUTO_ROUNDS);
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
	const char *why = NULL;

	if (!gw_param(s, GW_PARAM_POSTCOPY) || gw_param(s, GW_PARAM_LOCAL))
		return false;
	if (__atomic_load_n(&s->pc_start_req, __ATOMIC_ACQUIRE))
		why = "request";
	if (mid_round)
		goto out;	/* policies are judged at round ends */
	if (!why && rounds && gw_round(s) >= rounds)
		why = "rounds";
	if (!why && after_ms && gw_now_ns() - t_precopy_ns >= after_ms * 1000000ull)
		why = "time";
	if (!why && c->esc.stage == GW_ESC_POSTCOPY)
		why = "escalate";	/* escalation's postcopy step (escalate.h) */
	/* auto: the expected downtime has not fallen by a tenth for auto_rounds rounds. */
	if (!c->pc_best_exp_ns || (exp_ns != UINT64_MAX && exp_ns * 10 < c->pc_best_exp_ns * 9)) {
		c->pc_best_exp_ns = exp_ns;
		c->pc_flat_rounds = 0;
	} else {
		c->pc_flat_rounds++;
	}
	if (!why && auto_rounds && c->pc_flat_rounds >= auto_rounds)
		why = "auto";
out:
	if (why)
		gw_log(GW_LOG_INFO, "mig", "postcopy_decided",
		       "reason=%s round=%u dirty_pages=%llu expected_downtime_us=%lld", why, gw_round(s),
		       (unsigned long long)c->dirty_pages,
		       exp_ns == UINT64_MAX ? -1ll : (long long)(exp_ns / 1000));
	return why != NULL;
}


/* Until PC_DONE: heartbeat, statistics; a recovery whenever a connection breaks. */
static int run(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	int ret = 0;

	if (pc->resumed_seen) {
		gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
		ret = pcs_start_threads(s, pc);
	}
	while (!ret) {
		struct timespec deadline = gw_deadline_ms(PING_MS);
		struct gw_msg_ping ping;

		pthread_mutex_lock(&s->lock);
		while (!__atomic_load_n(&pc->done, __ATOMIC_ACQUIRE) && !gw_failed(s) &&
		       pthread_cond_timedwait(&s->cond, &s->lock, &deadline) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&s->lock);
		if (__atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE))
			return __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE);
		if (gw_failed(s)) {
			ret = pcs_recover(s, c, pc);
			continue;
		}
		if (__atomic_load_n(&pc->done, __ATOMIC_ACQUIRE))
			break;
		ping.token = gw_now_ns();
		ret = gw_conn_send_msg(&s->ctl, GW_MSG_PING, &ping);
		if (ret)	/* a broken link pauses (next turn), anything else ends it */
			gw_fail(s, GW_PHASE_POSTCOPY, ret, "heartbeat: %s", strerror(-ret));
		ret = 0;
		pcs_publish(s, c, pc);
	}
	if (ret)
		return ret;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_END, NULL);
	if (ret)
		gw_log(GW_LOG_WARN, "mig", "postcopy_end_not_sent", "reason=\"%s\"", strerror(-ret));
	pcs_join_threads(s, pc);	/* after PC_END: the destination stops listening first */
	return 0;
}

int src_postcopy(struct gw_session *s, struct src_ctx *c)
{
	struct gw_pc_src *pc;
	int ret;

	c->postcopy = true;
	ret = pcs_alloc(s, c);
	if (ret)
		return ret;
	pc = s->src->pcs;
	ret = pcs_switch_prepare(s);
	if (!ret)
		ret = pcs_switch_pause(s, c, pc);
	if (!ret)
		ret = pcs_handover(s, c, pc);
	if (!ret)
		ret = run(s, c, pc);
	pthread_mutex_lock(&s->lock);
	pcs_publish_locked(s, pc);
	if (!ret) {
		s->stats.total_time_ns = pc->t_done_ns - s->t_start_ns;
		s->stats.postcopy_remaining_pages = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!ret) {
		c->handed_over = true;	/* total time final */
		c->dirty_pages = 0;
	}
	return ret;
}

/* ---- the control reader's postcopy messages ---- */

/* The destination's figures into the statistics (s->lock held). */
static void take_figures_locked(struct gw_session *s, const struct gw_msg_pc_stats *m)
{
	struct gw_stats *st = &s->stats;

	st->postcopy_remaining_pages = m->remaining_pages;
	st->postcopy_requests = m->requests;
	st->postcopy_placed_requested = m->placed_requested;
	st->postcopy_placed_pushed = m->placed_pushed;
	st->postcopy_dup_pages = m->dup_pages;
	st->postcopy_faults = m->faults;
	st->postcopy_local_faults = m->local_faults;
	st->postcopy_blocktime_ns = m->blocktime_ns;
	st->postcopy_vcpu_blocktime_total_ns = m->vcpu_blocktime_total_ns;
	st->postcopy_nr_vcpus = m->nr_vcpus;
	memcpy(s->stats_vcpu_blocktime_ns, m->vcpu_blocktime_ns, sizeof(s->stats_vcpu_blocktime_ns));
	st->postcopy_latency_p50_ns = m->latency_p50_ns;
	st->postcopy_latency_p99_ns = m->latency_p99_ns;
	st->postcopy_latency_max_ns = m->latency_max_ns;
	st->postcopy_latency_samples = m->latency_samples;
}

int pcs_ctl_msg(struct gw_session *s, int type, const union gw_msg *m)
{
	struct gw_pc_src *pc = s->src->pcs;
	enum gw_pc_state state = gw_pc_state(s);

	switch (type) {
	case GW_MSG_PC_PREPARED:
		if (state != GW_PC_PREPARED)
			return -EPROTO;
		pthread_mutex_lock(&s->lock);
		s->src->mbox_seen |= 1u << type;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		return 0;
	case GW_MSG_PC_STATS:
	case GW_MSG_PC_DONE:
		if ((state != GW_PC_ACTIVE && state != GW_PC_DONE) || !pc)
			return -EPROTO;
		pthread_mutex_lock(&s->lock);
		take_figures_locked(s, &m->pc_stats);
		if (type == GW_MSG_PC_DONE && !pc->t_done_ns) {
			pc->t_done_ns = gw_now_ns();
			__atomic_store_n(&s->pc_state, GW_PC_DONE, __ATOMIC_RELEASE);
			__atomic_store_n(&pc->done, true, __ATOMIC_RELEASE);
			gw_log(GW_LOG_INFO, "mig", "postcopy_complete", "remaining_pages=%llu",
			       (unsigned long long)m->pc_stats.remaining_pages);
		}
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		return 0;
	default:
		return -EPROTO;
	}
}

bool pcs_last_message(struct gw_session *s, int type)
{
	bool verify = gw_param(s, GW_PARAM_VERIFY) && !gw_param(s, GW_PARAM_LOCAL);

	return type == (verify ? GW_MSG_VERIFIED : GW_MSG_PC_DONE);
}

int pcs_digest(struct gw_session *s, struct src_ctx *c, struct gw_digest *out)
{
	struct gw_page_digest d;
	int ret = gw_page_digest_ram(&s->vm, 2, c->free, &d);

	out->lo = d.lo;
	out->hi = d.hi;
	return ret;
}

void pcs_release(struct gw_session *s)
{
	struct gw_pc_src *pc = s->src->pcs;

	if (!pc)
		return;
	pcs_join_threads(s, pc);
	for (unsigned i = 0; i < GW_MAX_RAM_BLOCKS; i++) {
		gw_bitmap_free(&pc->todo[i]);
		gw_bitmap_free(&pc->zero[i]);
		gw_bitmap_free(&pc->next_dirty[i]);
	}
	if (pc->pout_ready)
		gw_pages_out_release(&pc->pout);
	pthread_mutex_destroy(&pc->lock);
	free(pc);
	s->src->pcs = NULL;
}
