/* SPDX-License-Identifier: MIT */
/*
 * Precopy rounds on the source's migration thread: harvest the dirty
 * pages, hand them to the channels region by region, measure the round,
 * and decide with the convergence model (converge.h) whether the rest fits
 * the downtime limit; throttle (auto-converge) or limit the dirty rate when
 * the guest outruns the link (throttle.h).
 *
 * The bitmaps of pages to send (c->dirty), free and sent are shared with
 * free-page hints (gw_session_hint_free, any thread): all of them change
 * under s->src->hint_lock (source.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "pipe/channel.h"
#include "source/postcopy.h"
#include "source/source.h"

/*
 * A round shorter than this waits for the rest of it before the next one:
 * a guest that dirties a handful of pages cannot make the loop spin.
 */
#define MIN_ROUND_NS 10000000ull
/* A round lasts at least this many times the last harvest (harvests stay a small share). */
#define ROUND_PER_HARVEST 4
/* Switchover work the model cannot measure beforehand: pause, state save and load. */
#define SWITCH_WORK_NS 500000ull
/* How long a switch decision waits for the PONG that says the destination's backlog. */
#define IN_FLIGHT_WAIT_MS 1000
/* In flight, this little needs no known pace: a few ms at any rate the model allows. */
#define IN_FLIGHT_SMALL_BYTES (1u << 20)
/* drain_in_flight: how long it waits at most, and how often it asks. */
#define DRAIN_MAX_MS 2000
#define DRAIN_POLL_MS 5

/* Counters of the channels, read at a round's start and end. */
struct round_mark {
	uint64_t t_ns, wire_bytes, pages, zero_pages, void_pages;
	uint64_t stage_ns[GW_STAGE__COUNT];
};

static void round_mark(struct gw_session *s, struct round_mark *m)
{
	m->t_ns = gw_now_ns();
	m->wire_bytes = src_wire_bytes(s);
	m->zero_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
	m->pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) + m->zero_pages +
		   __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	m->void_pages = __atomic_load_n(&s->ctr_void_pages, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < GW_STAGE__COUNT; i++)
		m->stage_ns[i] = __atomic_load_n(&s->ctr_stage_ns[i], __ATOMIC_RELAXED);
}

static int harvest(struct gw_session *s, struct src_ctx *c, bool last)
{
	uint64_t t0 = gw_now_ns();
	ssize_t n;

	/*
	 * The channels are drained here. collect_last leaves pages unprotected,
	 * so `written` would call every page sent after it suspect: copy them.
	 */
	if (last)
		__atomic_store_n(&s->dirty_final, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&s->src->hint_lock);
	n = last && s->dirty.ops->collect_last ? s->dirty.ops->collect_last(&s->dirty, c->dirty) :
		s->dirty.ops->collect(&s->dirty, c->dirty);
	/*
	 * The pages the VMM's devices reported: in every round, the final one
	 * included (the VMM stopped its devices before its pause hook
	 * returned, so every mark is in), and so in the pages a postcopy
	 * switch leaves to send. Before the free pages below: a device-written
	 * page is not free.
	 */
	c->device_pages = n >= 0 ? gw_devdirty_take(&s->devdirty, c->dirty) : 0;
	c->harvested_pages = (n > 0 ? (uint64_t)n : 0) + c->device_pages;
	c->dirty_pages = 0;
	for (unsigned i = 0; n >= 0 && i < s->vm.nr_blocks; i++) {
		c->dirty_pages += gw_bitmap_weight(&c->dirty[i]);
		gw_bitmap_andnot(&c->free[i], &c->dirty[i]);	/* written since its hint */
	}
	pthread_mutex_unlock(&s->src->hint_lock);
	c->harvest_ns = gw_now_ns() - t0;
	/*
	 * The pages reported were written between the previous collect and
	 * this one: that is the rate's span, not the round's, which leaves out
	 * what ran after the previous harvest (want_switch waiting for a PONG
	 * or for the destination to drain, up to seconds).
	 */
	c->dirty_interval_ns = c->harvest_at_ns && t0 > c->harvest_at_ns ? t0 - c->harvest_at_ns : 0;
	c->harvest_at_ns = t0;
	if (n < 0)
		return gw_fail(s, GW_PHASE_ROUND, (int)n, "dirty harvest (%s): %s",
			       s->dirty.ops->name, strerror((int)-n));
	pthread_mutex_lock(&s->lock);
	s->stats.dirty_sync_count++;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int src_harvest(struct gw_session *s, struct src_ctx *c)
{
	return harvest(s, c, false);
}

int src_harvest_last(struct gw_session *s, struct src_ctx *c)
{
	return harvest(s, c, true);
}

/*
 * The next batch of block @bi from page *@pos: the region holding the next
 * page of @bm, its pages, bits cleared (and set in @sent). False when none
 * is left.
 */
static bool take_region(struct gw_session *s, struct gw_bitmap *bm, struct gw_bitmap *sent,
			unsigned bi, uint64_t *pos, uint32_t batch_pages, struct gw_batch *b)
{
	uint64_t p, end;

	pthread_mutex_lock(&s->src->hint_lock);
	p = gw_bitmap_next_set(bm, *pos);
	if (p >= bm->nr_bits) {
		pthread_mutex_unlock(&s->src->hint_lock);
		return false;
	}
	memset(b, 0, sizeof(*b));
	b->block = bi;
	b->first_page = p / batch_pages * batch_pages;
	end = b->first_page + batch_pages < bm->nr_bits ? b->first_page + batch_pages : bm->nr_bits;
	b->nr_pages = (uint32_t)(end - b->first_page);
	for (; p < end; p = gw_bitmap_next_set(bm, p + 1)) {
		b->mask[(p - b->first_page) / 64] |= 1ULL << ((p - b->first_page) % 64);
		gw_bitmap_set(sent, p);
	}
	gw_bitmap_clear_range(bm, b->first_page, b->nr_pages);
	pthread_mutex_unlock(&s->src->hint_lock);
	*pos = end;
	return true;
}

/*
 * Hand the pages of c->dirty[@bi] from page *@pos on to the channels,
 * region by region: a region of batch_pages pages always goes to the same
 * channel ((region + block) % channels: the ordering rule of channel.h).
 * The backend re-arms tracking for a region just before it is queued. With
 * @discard the pages go as zeros without being read (src_queue_discards).
 * 0 or the sticky error; *@cut when it stopped before the block's end
 * (*@pos says where): @deadline_ns (0: none) passed, or postcopy was asked.
 */
static int queue_block(struct gw_session *s, struct src_ctx *c, unsigned bi, bool discard,
		       uint64_t *pos, uint64_t deadline_ns, bool *cut)
{
	uint32_t batch_pages = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	struct gw_batch b;
	int ret;

	*cut = false;
	while (take_region(s, &c->dirty[bi], &c->sent[bi], bi, pos, batch_pages, &b)) {
		uint64_t region = b.first_page / batch_pages;

		b.discard = discard;
		/*
		 * Re-arm before the read, except in the final round: the guest is
		 * paused and tracking ends (collect_last re-arms nothing), so a
		 * KVM_CLEAR_DIRTY_LOG per batch there would only add to the downtime.
		 */
		if (!discard && s->dirty.ops->clear && !__atomic_load_n(&s->dirty_final, __ATOMIC_RELAXED)) {
			ret = s->dirty.ops->clear(&s->dirty, bi, b.first_page, b.nr_pages, b.mask);
			if (ret)
				return gw_fail(s, GW_PHASE_ROUND, ret, "dirty clear: %s", strerror(-ret));
		}
		ret = gw_channel_push(&s->chans[(region + bi) % s->nr_channels], &b);
		if (ret)
			return ret;
		if (gw_now_ns() - c->last_publish_ns > 100000000ull) {
			c->last_publish_ns = gw_now_ns();
			src_publish(s, c);
		}
		/* gw_session_start_postcopy: the round ends here (not the final one). */
		*cut = (deadline_ns && gw_now_ns() >= deadline_ns) ||
		       (!c->switched_over && __atomic_load_n(&s->pc_start_req, __ATOMIC_ACQUIRE));
		if (*cut)
			return 0;
	}
	return 0;
}

int src_drain(struct gw_session *s)
{
	for (unsigned i = 0; i < s->nr_channels; i++) {
		int ret = gw_channel_drain(&s->chans[i]);

		if (ret)
			return ret;
	}
	return gw_failed(s);
}

/* Whether the pass has pages left after where it stopped (else it is done, not cut). */
static bool pass_has_more(struct gw_session *s, struct src_ctx *c)
{
	bool more;

	pthread_mutex_lock(&s->src->hint_lock);
	more = gw_bitmap_next_set(&c->dirty[c->pass_block], c->pass_pos) < c->dirty[c->pass_block].nr_bits;
	for (unsigned bi = c->pass_block + 1; !more && bi < s->vm.nr_blocks; bi++)
		more = gw_bitmap_next_set(&c->dirty[bi], 0) < c->dirty[bi].nr_bits;
	pthread_mutex_unlock(&s->src->hint_lock);
	return more;
}

int src_queue_round(struct gw_session *s, struct src_ctx *c, uint64_t deadline_ns)
{
	struct gw_msg_round m = { .round = gw_round(s), .dirty_pages = c->dirty_pages };
	struct gw_msg_ping ping = { .token = gw_now_ns() };
	int ret = gw_conn_send_msg(&s->ctl, GW_MSG_ROUND, &m);

	/* A round-trip sample for the model: the destination answers at once. */
	if (!ret && !c->switched_over)
		ret = gw_conn_send_msg(&s->ctl, GW_MSG_PING, &ping);
	if (ret)
		return gw_fail(s, GW_PHASE_ROUND, ret, "sending ROUND: %s", strerror(-ret));
	if (!deadline_ns) {		/* a whole sweep */
		c->pass_block = 0;
		c->pass_pos = 0;
	}
	c->pass_done = false;
	for (; c->pass_block < s->vm.nr_blocks; c->pass_block++, c->pass_pos = 0) {
		bool cut;

		ret = queue_block(s, c, c->pass_block, false, &c->pass_pos, deadline_ns, &cut);
		if (ret)
			return ret;
		if (cut && pass_has_more(s, c))
			return 0;	/* mid-pass: the next round goes on from here */
	}
	c->pass_block = 0;	/* the pass is done: the next one starts over */
	c->pass_pos = 0;
	c->pass_done = true;
	return 0;
}

int src_send_round(struct gw_session *s, struct src_ctx *c, uint64_t deadline_ns)
{
	int ret = src_queue_round(s, c, deadline_ns);

	return ret ? ret : src_drain(s);
}

/*
 * A free page the destination holds data for (sent before its hint) goes
 * as a ZERO entry after the final round, on its region's channel (so after
 * that data). Free pages never sent are zeros there already. Takes no time
 * when the guest freed its memory before the migration.
 */
int src_queue_discards(struct gw_session *s, struct src_ctx *c)
{
	int ret;

	c->discarded_pages = 0;
	/*
	 * No hint ever: nothing is free, and walking bitmaps of the whole RAM
	 * inside the pause would cost what the RAM size costs (7 ms for 64 GiB).
	 */
	if (!__atomic_load_n(&s->src->hint_ranges, __ATOMIC_RELAXED))
		return 0;
	for (unsigned bi = 0; bi < s->vm.nr_blocks; bi++) {
		uint64_t pos = 0;
		bool cut;	/* never: no deadline, and switched over */

		/* c->dirty is empty after a whole sweep: reuse it for the free pages sent. */
		gw_bitmap_or(&c->dirty[bi], &c->free[bi]);
		gw_bitmap_and(&c->dirty[bi], &c->sent[bi]);
		c->discarded_pages += gw_bitmap_weight(&c->dirty[bi]);
		ret = queue_block(s, c, bi, true, &pos, 0, &cut);
		if (ret)
			return ret;
	}
	if (c->discarded_pages || __atomic_load_n(&s->src->hinted_pages, __ATOMIC_RELAXED))
		gw_log(GW_LOG_INFO, "mig", "free_discarded", "pages=%llu",
		       (unsigned long long)c->discarded_pages);
	return 0;
}

/*
 * The round's line in the statistics table and the log. @dirty_ns: the time
 * over which the guest wrote c->harvested_pages (between the last two harvests).
 */
static void record_round(struct gw_session *s, struct src_ctx *c, uint64_t dirty_at_start,
			 const struct round_mark *m0, const struct round_mark *m1, uint64_t dirty_ns)
{
	uint64_t ns = m1->t_ns - m0->t_ns, bytes = m1->wire_bytes - m0->wire_bytes;
	uint64_t pages = m1->pages - m0->pages, round = gw_round(s);
	uint64_t rate_pps = dirty_ns ? (uint64_t)((double)c->harvested_pages * 1e9 / (double)dirty_ns) : 0;
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);

	pthread_mutex_lock(&s->lock);
	s->stats.rounds = (uint32_t)round + 1;
	s->stats.dirty_pages_rate = rate_pps;
	if (round < GW_STATS_ROUNDS_KEPT) {
		s->stats_round[round] = (struct gw_round_stats){
			.size = sizeof(struct gw_round_stats), .round = (uint32_t)round, .duration_ns = ns, .dirty_pages = dirty_at_start,
			.sent_bytes = bytes, .normal_pages = pages - (m1->zero_pages - m0->zero_pages),
			.zero_pages = m1->zero_pages - m0->zero_pages,
			.skipped_pages = round == 0 ? c->skipped_pages : 0,
			.rate_bps = ns ? (uint64_t)((__uint128_t)bytes * 1000000000ull / ns) : 0,
			.dirty_rate_pps = rate_pps,
			.expected_downtime_ns = exp_ns == UINT64_MAX ? 0 : exp_ns,
			.expected_downtime_unknown = exp_ns == UINT64_MAX,
			.throttle_pct = c->thr.pct, .dirty_limit = c->thr.dirty_limit_on,
			.void_pages = m1->void_pages - m0->void_pages,
		};
		for (unsigned i = 0; i < GW_STAGE__COUNT; i++)
			s->stats_round[round].stage_ns[i] = m1->stage_ns[i] - m0->stage_ns[i];
		s->stats.nr_rounds_kept = (unsigned)round + 1;
	}
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_INFO, "mig", "round_end",
	       "round=%llu sent_bytes=%llu pages=%llu duration_us=%llu rate_bps=%llu dirty_pages=%llu "
	       "dirty_rate_pps=%llu expected_downtime_us=%lld throttle_pct=%u dirty_limit=%d harvest_us=%llu "
	       "read_us=%llu classify_us=%llu compress_us=%llu send_us=%llu settle_us=%llu void_pages=%llu "
	       "device_pages=%llu harvested_pages=%llu dirty_interval_us=%llu",
	       (unsigned long long)round, (unsigned long long)bytes, (unsigned long long)pages,
	       (unsigned long long)(ns / 1000), (unsigned long long)c->conv.rate_bps,
	       (unsigned long long)c->dirty_pages, (unsigned long long)rate_pps,
	       exp_ns == UINT64_MAX ? -1ll : (long long)(exp_ns / 1000), c->thr.pct, c->thr.dirty_limit_on,
	       (unsigned long long)(c->harvest_ns / 1000),
	       (unsigned long long)((m1->stage_ns[GW_STAGE_READ] - m0->stage_ns[GW_STAGE_READ]) / 1000),
	       (unsigned long long)((m1->stage_ns[GW_STAGE_CLASSIFY] - m0->stage_ns[GW_STAGE_CLASSIFY]) / 1000),
	       (unsigned long long)((m1->stage_ns[GW_STAGE_COMPRESS] - m0->stage_ns[GW_STAGE_COMPRESS]) / 1000),
	       (unsigned long long)((m1->stage_ns[GW_STAGE_SEND] - m0->stage_ns[GW_STAGE_SEND]) / 1000),
	       (unsigned long long)((m1->stage_ns[GW_STAGE_SETTLE] - m0->stage_ns[GW_STAGE_SETTLE]) / 1000),
	       (unsigned long long)(m1->void_pages - m0->void_pages), (unsigned long long)c->device_pages,
	       (unsigned long long)c->harvested_pages, (unsigned long long)(dirty_ns / 1000));
}

/*
 * Past converge-timeout-ms, or at escalation's last step, the policy decides: true to go on with another
 * round; false when precopy ends, *@end saying how (GW_SRC_CONVERGED when
 * forced, GW_SRC_FAILED with the timeout recorded when it cancels).
 */
static bool converge_policy(struct gw_session *s, struct src_ctx *c, uint64_t t_precopy_ns,
			    enum gw_src_outcome *end)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_CONVERGE_TIMEOUT_MS);
	uint64_t limit_us = src_limit_ns(s, c) / 1000;
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
	int64_t policy = gw_param(s, GW_PARAM_CONVERGE_POLICY);
	/* The last step acts on a round that does not fit: one that fits waits for its switchover. */
	bool last_step = c->esc.stage == GW_ESC_TIMEOUT_ACTION && exp_ns > limit_us * 1000;
	char when[48];


	if (policy == GW_CONVERGE_KEEP_GOING ||
	    (!last_step && (!timeout_ms || gw_now_ns() - t_precopy_ns <= timeout_ms * 1000000ull)))
		return true;
	if (policy == GW_CONVERGE_FORCE) {
		gw_log(GW_LOG_WARN, "mig", "converge_forced", "round=%u expected_downtime_us=%llu limit_us=%llu",
		       gw_round(s), (unsigned long long)(exp_ns / 1000), (unsigned long long)limit_us);
		*end = GW_SRC_CONVERGED;
		return false;
	}
	if (last_step)
		snprintf(when, sizeof(when), "after every escalation step");
	else
		snprintf(when, sizeof(when), "within %llu ms", (unsigned long long)timeout_ms);
	gw_fail(s, GW_PHASE_ROUND, -ETIMEDOUT, "did not converge %s (expected downtime %llu ms > limit %llu ms)",
		when, (unsigned long long)(exp_ns / 1000000), (unsigned long long)(limit_us / 1000));
	*end = GW_SRC_FAILED;
	return false;
}

/*
 * The model's fixed cost: switchover work, the final harvest (as long as
 * the last one) and two round trips (COMPLETE/READY, GO/RESUMED).
 */
static void update_fixed_cost(struct gw_session *s, struct src_ctx *c)
{
	pthread_mutex_lock(&s->lock);
	c->rtt_ns = s->src->ping_rtt_ns;
	pthread_mutex_unlock(&s->lock);
	c->conv.fixed_cost_ns = SWITCH_WORK_NS + c->harvest_ns + 2 * c->rtt_ns;
}

/*
 * The model's view of this round's end: the dirty set's fall over the last
 * three rounds against what they sent (c->dirty_hist_pages, sent_hist_pages).
 */
static struct gw_converge_view converge_view(struct gw_session *s, struct src_ctx *c, uint64_t dirty_bps,
					     uint64_t sent_pages)
{
	struct gw_converge_view v = {
		.dirty_pages = c->dirty_pages, .dirty_bps = dirty_bps,
		.limit_ns = src_limit_ns(s, c),
		.cap_bps = (uint64_t)gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS),
	};

	if (c->hist_rounds == 3) {
		v.sent_pages = c->sent_hist_pages[0] + c->sent_hist_pages[1] + sent_pages;
		v.fell_pages = c->dirty_hist_pages[2] > c->dirty_pages ? c->dirty_hist_pages[2] - c->dirty_pages : 0;
	}
	memmove(c->dirty_hist_pages + 1, c->dirty_hist_pages, 2 * sizeof(c->dirty_hist_pages[0]));
	memmove(c->sent_hist_pages + 1, c->sent_hist_pages, 2 * sizeof(c->sent_hist_pages[0]));
	c->dirty_hist_pages[0] = c->dirty_pages;
	c->sent_hist_pages[0] = sent_pages;
	if (c->hist_rounds < 3)
		c->hist_rounds++;
	return v;
}

/* The verdict (c->verdict) and, unless it fits, what it means in words and what would help (c->hint). */
static void explain(struct gw_session *s, struct src_ctx *c, uint64_t dirty_bps, uint64_t sent_pages)
{
	struct gw_converge_view v = converge_view(s, c, dirty_bps, sent_pages);
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
	double limit_ms = v.limit_ns / 1e6, exp_ms = exp_ns / 1e6, mib = 1048576.0;
	const char *help = c->thr.pct || c->thr.dirty_limit_on ? "a higher throttle, or postcopy" :
			   "auto-converge, a dirty limit or postcopy";
	char hint[sizeof(c->hint)] = "";

	c->verdict = gw_converge_judge(&c->conv, &v, &c->verdict_eta_ns);
	switch (c->verdict) {
	case GW_CONVERGE_FIXED_COST:
		snprintf(hint, sizeof(hint), "the switchover alone takes %.1f ms (a harvest of %.1f ms, two "
			 "round trips of %.1f ms), over the %.1f ms limit: raise downtime-limit",
			 c->conv.fixed_cost_ns / 1e6, c->harvest_ns / 1e6, c->rtt_ns / 1e6, limit_ms);
		break;
	case GW_CONVERGE_OUTRUN:
		snprintf(hint, sizeof(hint), "the guest dirties %.1f MiB/s, the link moves %.1f MiB/s: "
			 "enable %s, or raise downtime-limit", dirty_bps / mib, c->conv.rate_bps / mib, help);
		break;
	case GW_CONVERGE_FLAT:
		snprintf(hint, sizeof(hint), "the guest writes again what is sent (%llu pages left after three "
			 "rounds sent %llu): enable %s, or raise downtime-limit",
			 (unsigned long long)c->dirty_pages, (unsigned long long)v.sent_pages, help);
		break;
	case GW_CONVERGE_DRAINING:
	case GW_CONVERGE_CAPPED:
		snprintf(hint, sizeof(hint), "converging at %s %.1f MiB/s (the guest dirties %.1f MiB/s): "
			 "expected downtime %.1f ms, limit %.1f ms, fits in about %.1f s",
			 c->verdict == GW_CONVERGE_CAPPED ? "the max-bandwidth cap of" : "the link's",
			 c->conv.rate_bps / mib, dirty_bps / mib, exp_ms, limit_ms, c->verdict_eta_ns / 1e9);
		break;
	case GW_CONVERGE_UNKNOWN:
	case GW_CONVERGE_FITS:
		break;
	}
	if (!gw_converging(c->verdict) && strcmp(hint, c->hint))
		gw_log(GW_LOG_WARN, "mig", "not_converging", "round=%u reason=\"%s\"", gw_round(s), hint);
	snprintf(c->hint, sizeof(c->hint), "%s", hint);
}

/* Auto-converge and the dirty limit after a round; applied through the VMM. */
static void throttle(struct gw_session *s, struct src_ctx *c, uint64_t dirty_bytes, uint64_t sent_bytes)
{
	struct gw_throttle_params p = {
		.auto_converge = (gw_param(s, GW_PARAM_AUTO_CONVERGE) || c->esc.stage >= GW_ESC_AUTO_CONVERGE) &&
				 s->ops->throttle,
		.initial_pct = (unsigned)gw_param(s, GW_PARAM_CPU_THROTTLE_INITIAL),
		.increment_pct = (unsigned)gw_param(s, GW_PARAM_CPU_THROTTLE_INCREMENT),
		.max_pct = (unsigned)gw_param(s, GW_PARAM_MAX_CPU_THROTTLE),
		.tailslow = gw_param(s, GW_PARAM_CPU_THROTTLE_TAILSLOW) != 0,
		.threshold_pct = (unsigned)gw_param(s, GW_PARAM_THROTTLE_TRIGGER_THRESHOLD),
		.dirty_limit_bps = s->ops->dirty_limit ? (uint64_t)gw_param(s, GW_PARAM_DIRTY_LIMIT_BPS) : 0,
		.dirty_limit_from_start = gw_param(s, GW_PARAM_DIRTY_LIMIT_START) == GW_DIRTY_LIMIT_FROM_START,
	};
	struct gw_throttle before = c->thr;

	gw_throttle_round(&c->thr, &p, dirty_bytes, sent_bytes);
	if (c->thr.pct != before.pct) {
		s->ops->throttle(s->opaque, c->thr.pct);
		gw_log(GW_LOG_INFO, "mig", "throttle", "round=%u cpu_throttle_pct=%u", gw_round(s), c->thr.pct);
	}
	if (c->thr.dirty_limit_bps != before.dirty_limit_bps) {
		s->ops->dirty_limit(s->opaque, c->thr.dirty_limit_bps);
		gw_log(GW_LOG_INFO, "mig", "dirty_limit", "round=%u dirty_limit_bps=%llu", gw_round(s),
		       (unsigned long long)c->thr.dirty_limit_bps);
	}
}

/*
 * When the round that starts at @t0_ns ends at the latest (0: at the end of
 * the pass): round-max-ms, stretched to ROUND_PER_HARVEST harvests' time. Short rounds let the model and the throttle see a guest that
 * dirties a large set while one pass over it takes seconds.
 */
static uint64_t round_deadline(struct gw_session *s, const struct src_ctx *c, uint64_t t0_ns)
{
	uint64_t max_ns = (uint64_t)gw_param(s, GW_PARAM_ROUND_MAX_MS) * 1000000ull;

	if (!max_ns)
		return 0;
	if (max_ns < ROUND_PER_HARVEST * c->harvest_ns)
		max_ns = ROUND_PER_HARVEST * c->harvest_ns;
	return t0_ns + max_ns;
}

/* Sleep out the rest of a short round. */
static void pace_round(uint64_t t0_ns)
{
	uint64_t ns = gw_now_ns() - t0_ns;
	struct timespec ts;

	if (ns >= MIN_ROUND_NS)
		return;
	ts = (struct timespec){ .tv_sec = 0, .tv_nsec = (long)(MIN_ROUND_NS - ns) };
	nanosleep(&ts, NULL);
}

/* @a + @b, at most UINT64_MAX: the peer's figure comes off the wire. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/*
 * Data sent and not yet taken in by the destination: what our kernel holds
 * unacknowledged on the channels (SIOCOUTQ) and what the destination's
 * holds unread, from a PONG asked for now (IN_FLIGHT_WAIT_MS at most; with
 * none the last figure stands). A destination slower than the link (one
 * writing a page cache it allocates) lets tens of MB pile up there, and
 * must read all of it before READY: in the pause, that is downtime. A
 * byte moving between the two kernels meanwhile may count twice: never
 * less than there is.
 */
static uint64_t in_flight_bytes(struct gw_session *s)
{
	struct gw_msg_ping ping = { .token = gw_now_ns() };
	struct timespec deadline = gw_deadline_ms(IN_FLIGHT_WAIT_MS);
	uint64_t out = 0, peer;

	for (unsigned i = 0; i < s->nr_channels; i++)
		out += gw_conn_queued_bytes(&s->chans[i].conn, false);
	pthread_mutex_lock(&s->lock);
	peer = s->src->peer_backlog_bytes;
	pthread_mutex_unlock(&s->lock);
	if (gw_conn_send_msg(&s->ctl, GW_MSG_PING, &ping))
		return add_sat(out, peer);	/* a broken connection fails the migration elsewhere */
	pthread_mutex_lock(&s->lock);
	while (s->src->pong_token != ping.token && !s->err.code &&
	       pthread_cond_timedwait(&s->cond, &s->lock, &deadline) != ETIMEDOUT)
		;
	peer = s->src->peer_backlog_bytes;
	pthread_mutex_unlock(&s->lock);
	return add_sat(out, peer);
}

/*
 * The switchover waits: the destination holds @bytes0 in flight, more than
 * IN_FLIGHT_SMALL_BYTES, and either its pace is unknown or they do not fit
 * at that pace. Poll until it took them in (the guest runs meanwhile; what
 * it writes goes in the next round), DRAIN_MAX_MS at most, and take its pace
 * from what went: the transfer rate measured at our end counts bytes that
 * only filled socket buffers, not the destination's (a destination writing
 * a page cache it allocates took in 0.25 GB/s of a 1.45 GB/s "rate").
 */
static void drain_in_flight(struct gw_session *s, struct src_ctx *c, uint64_t bytes0)
{
	uint64_t t0_ns = gw_now_ns(), t_ns = t0_ns, bytes = bytes0;
	struct timespec poll = { .tv_sec = 0, .tv_nsec = DRAIN_POLL_MS * 1000000l };

	while (bytes > IN_FLIGHT_SMALL_BYTES && t_ns - t0_ns < DRAIN_MAX_MS * 1000000ull && !gw_failed(s)) {
		nanosleep(&poll, NULL);
		bytes = in_flight_bytes(s);
		t_ns = gw_now_ns();
	}
	if (bytes < bytes0 && t_ns > t0_ns) {
		/* Saturated: bytes0 is the peer's figure, up to UINT64_MAX. */
		__uint128_t bps = (__uint128_t)(bytes0 - bytes) * 1000000000ull / (t_ns - t0_ns);

		c->conv.in_flight_rate_bps = bps > UINT64_MAX ? UINT64_MAX : (uint64_t)bps;
	}
	gw_log(GW_LOG_INFO, "mig", "switch_deferred",
	       "round=%u in_flight_bytes=%llu left_bytes=%llu drain_us=%llu in_flight_rate_bps=%llu",
	       gw_round(s), (unsigned long long)bytes0, (unsigned long long)bytes,
	       (unsigned long long)((t_ns - t0_ns) / 1000), (unsigned long long)c->conv.in_flight_rate_bps);
}

/*
 * Whether to switch over now. Nothing dirty: if the switchover's own cost
 * fits the limit (the rate may be unknown: an idle guest). With harvests
 * about 1 ms apart a guest can write nothing between two of them; that
 * must not bypass a limit the switchover alone exceeds. Otherwise when the
 * rest fits, at the end of a pass only: mid-pass, the rest holds pages not
 * sent yet in this pass, which cost the guest nothing to send while it
 * runs. Then the bytes in flight are measured and must fit too, at the
 * destination's pace; more than a little at a pace not known yet, or not
 * fitting, makes precopy go on while the destination catches up
 * (drain_in_flight).
 */
static bool want_switch(struct gw_session *s, struct src_ctx *c)
{
	uint64_t bytes;

	c->conv.in_flight_bytes = 0;
	if ((c->dirty_pages && !c->pass_done) || !src_escalate_fits(s, c))
		return false;
	bytes = in_flight_bytes(s);
	c->conv.in_flight_bytes = bytes;
	if ((bytes <= IN_FLIGHT_SMALL_BYTES || c->conv.in_flight_rate_bps) && src_escalate_fits(s, c))
		return true;
	drain_in_flight(s, c, bytes);
	c->conv.in_flight_bytes = 0;
	return false;
}

enum gw_src_outcome src_precopy(struct gw_session *s, struct src_ctx *c)
{
	uint64_t t_precopy_ns = gw_now_ns();
	enum gw_src_outcome end = GW_SRC_FAILED;

	throttle(s, c, 0, 0);	/* a dirty limit "from the start" */
	for (;;) {
		uint64_t dirty_at_start = c->dirty_pages, dirty_ns;
		struct round_mark m0, m1;

		gw_log(GW_LOG_INFO, "mig", "round_start", "round=%u dirty_pages=%llu",
		       gw_round(s), (unsigned long long)c->dirty_pages);
		gw_emit_round(s, gw_round(s), c->dirty_pages, false);
		round_mark(s, &m0);
		if (src_send_round(s, c, round_deadline(s, c, m0.t_ns)))
			return GW_SRC_FAILED;
		round_mark(s, &m1);
		gw_converge_round(&c->conv, m1.wire_bytes - m0.wire_bytes, m1.t_ns - m0.t_ns, m1.pages - m0.pages);
		/*
		 * A round that sent nothing cannot spin the loop: harvest at once
		 * (an idle guest). Nor can round 0, which ran once: a guest that
		 * populated little (a large guest never touched: 76 pages of
		 * 64 GiB) is not made to wait 10 ms for its first harvest.
		 */
		if (m1.pages != m0.pages && gw_round(s) > 0)
			pace_round(m0.t_ns);
		if (src_harvest(s, c))
			return GW_SRC_FAILED;
		update_fixed_cost(s, c);
		dirty_ns = c->dirty_interval_ns;	/* the guest wrote these since the last harvest */
		throttle(s, c, c->harvested_pages * GW_PAGE_BYTES, m1.wire_bytes - m0.wire_bytes);
		explain(s, c, dirty_ns ? (uint64_t)((double)c->harvested_pages * GW_PAGE_BYTES * 1e9 /
						    (double)dirty_ns) : 0, m1.pages - m0.pages);
		record_round(s, c, dirty_at_start, &m0, &m1, dirty_ns);
		src_escalate(s, c);
		src_publish(s, c);
		__atomic_store_n(&s->round, gw_round(s) + 1, __ATOMIC_RELAXED);
		if (want_switch(s, c))
			return GW_SRC_CONVERGED;
		if (pcs_want_switch(s, c, t_precopy_ns, false))
			return GW_SRC_POSTCOPY;
		if (!converge_policy(s, c, t_precopy_ns, &end))
			return end;
		/* Nothing dirty, over the limit: the next round sends nothing; pace it here. */
		if (!c->dirty_pages)
			pace_round(m0.t_ns);
	}
}
