/* SPDX-License-Identifier: MIT */
/*
 * Precopy rounds on the source's migration thread: harvest the dirty
 * pages, hand them to the channels region by region, measure the round,
 * and decide with the convergence model (converge.h) whether the rest fits
 * the downtime limit.
 */
#include <errno.h>
#include <string.h>
#include "channel.h"
#include "source.h"

/* Counters of the channels, read at a round's start and end. */
struct round_mark {
	uint64_t t_ns, wire_bytes, pages, zero_pages;
};

static void round_mark(struct gw_session *s, struct round_mark *m)
{
	m->t_ns = gw_now_ns();
	m->wire_bytes = src_wire_bytes(s);
	m->zero_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
	m->pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) + m->zero_pages +
		   __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
}

int src_harvest(struct gw_session *s, struct src_ctx *c)
{
	ssize_t n = s->dirty.ops->collect(&s->dirty, c->dirty);

	if (n < 0)
		return gw_fail(s, "round", (int)n, false, "dirty harvest (%s): %s",
			       s->dirty.ops->name, strerror((int)-n));
	c->dirty_pages = 0;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		c->dirty_pages += gw_bitmap_weight(&c->dirty[i]);
	pthread_mutex_lock(&s->lock);
	s->stats.dirty_sync_count++;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* The batch for the region holding page @pos of block @bi: its dirty pages, bits cleared. */
static void take_region(struct gw_bitmap *bm, unsigned bi, uint64_t pos, uint32_t batch_pages,
			struct gw_batch *b)
{
	uint64_t region = pos / batch_pages, end;

	memset(b, 0, sizeof(*b));
	b->block = bi;
	b->first_page = region * batch_pages;
	end = b->first_page + batch_pages < bm->nr_bits ? b->first_page + batch_pages : bm->nr_bits;
	b->nr_pages = (uint32_t)(end - b->first_page);
	for (uint64_t p = pos; p < end; p = gw_bitmap_next_set(bm, p + 1)) {
		b->mask[(p - b->first_page) / 64] |= 1ULL << ((p - b->first_page) % 64);
		if (p + 1 >= end)
			break;
	}
	gw_bitmap_clear_range(bm, b->first_page, b->nr_pages);
}

/*
 * Hand every dirty page of block @bi to the channels, region by region: a
 * region of batch_pages pages always goes to the same channel
 * ((region + block) % channels: the ordering rule of channel.h). The
 * backend re-arms tracking for a region just before it is queued.
 */
static int queue_block(struct gw_session *s, struct src_ctx *c, unsigned bi)
{
	uint32_t batch_pages = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	struct gw_bitmap *bm = &c->dirty[bi];
	uint64_t pos = 0;
	struct gw_batch b;
	int ret;

	while ((pos = gw_bitmap_next_set(bm, pos)) < bm->nr_bits) {
		uint64_t region = pos / batch_pages;

		take_region(bm, bi, pos, batch_pages, &b);
		if (s->dirty.ops->clear) {
			ret = s->dirty.ops->clear(&s->dirty, bi, b.first_page, b.nr_pages);
			if (ret)
				return gw_fail(s, "round", ret, false, "dirty clear: %s", strerror(-ret));
		}
		ret = gw_channel_push(&s->chans[(region + bi) % s->nr_channels], &b);
		if (ret)
			return ret;
		pos = b.first_page + b.nr_pages;
		if (gw_now_ns() - c->last_publish_ns > 100000000ull) {
			c->last_publish_ns = gw_now_ns();
			src_publish(s, c);
		}
	}
	return 0;
}

int src_send_round(struct gw_session *s, struct src_ctx *c)
{
	struct gw_msg_round m = { .round = gw_round(s), .dirty_pages = c->dirty_pages };
	int ret = gw_conn_send_msg(&s->ctl, GW_MSG_ROUND, &m);

	if (ret)
		return gw_fail(s, "round", ret, false, "sending ROUND: %s", strerror(-ret));
	for (unsigned bi = 0; bi < s->vm.nr_blocks; bi++) {
		ret = queue_block(s, c, bi);
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < s->nr_channels; i++) {
		ret = gw_channel_drain(&s->chans[i]);
		if (ret)
			return ret;
	}
	return gw_failed(s);
}

/* The round's line in the statistics table and the log. */
static void record_round(struct gw_session *s, struct src_ctx *c, uint64_t dirty_at_start,
			 const struct round_mark *m0, const struct round_mark *m1)
{
	uint64_t ns = m1->t_ns - m0->t_ns, bytes = m1->wire_bytes - m0->wire_bytes;
	uint64_t pages = m1->pages - m0->pages, round = gw_round(s);
	uint64_t rate_pps = ns ? (uint64_t)((double)c->dirty_pages * 1e9 / (double)ns) : 0;
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);

	pthread_mutex_lock(&s->lock);
	s->stats.rounds = (uint32_t)round + 1;
	s->stats.dirty_pages_rate = rate_pps;
	if (round < GW_STATS_MAX_ROUNDS) {
		s->stats.round[round] = (struct gw_round_stats){
			.round = (uint32_t)round, .duration_ns = ns, .dirty_pages = dirty_at_start,
			.sent_bytes = bytes, .normal_pages = pages - (m1->zero_pages - m0->zero_pages),
			.zero_pages = m1->zero_pages - m0->zero_pages,
			.skipped_pages = round == 0 ? c->skipped_pages : 0,
			.rate_bps = ns ? (uint64_t)((__uint128_t)bytes * 1000000000ull / ns) : 0,
			.expected_downtime_ns = exp_ns == UINT64_MAX ? 0 : exp_ns,
		};
		s->stats.nr_rounds_kept = (unsigned)round + 1;
	}
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_INFO, "mig", "round_end",
	       "round=%llu sent_bytes=%llu pages=%llu duration_us=%llu rate_bps=%llu dirty_pages=%llu "
	       "dirty_rate_pps=%llu expected_downtime_us=%lld",
	       (unsigned long long)round, (unsigned long long)bytes, (unsigned long long)pages,
	       (unsigned long long)(ns / 1000), (unsigned long long)c->conv.rate_bps,
	       (unsigned long long)c->dirty_pages, (unsigned long long)rate_pps,
	       exp_ns == UINT64_MAX ? -1ll : (long long)(exp_ns / 1000));
}

/* Past converge-timeout-ms: 0 = switch over (force), 1 = go on, or the error (cancel). */
static int converge_policy(struct gw_session *s, struct src_ctx *c, uint64_t t_precopy_ns)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_CONVERGE_TIMEOUT_MS);
	uint64_t limit_us = (uint64_t)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US);
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
	int64_t policy = gw_param(s, GW_PARAM_CONVERGE_POLICY);

	if (!timeout_ms || policy == GW_CONVERGE_KEEP_GOING ||
	    gw_now_ns() - t_precopy_ns <= timeout_ms * 1000000ull)
		return 1;
	if (policy == GW_CONVERGE_FORCE) {
		gw_log(GW_LOG_WARN, "mig", "converge_forced", "round=%u expected_downtime_us=%llu limit_us=%llu",
		       gw_round(s), (unsigned long long)(exp_ns / 1000), (unsigned long long)limit_us);
		return 0;
	}
	return gw_fail(s, "round", -ETIMEDOUT, false,
		       "did not converge within %llu ms (expected downtime %llu ms > limit %llu ms)",
		       (unsigned long long)timeout_ms, (unsigned long long)(exp_ns / 1000000),
		       (unsigned long long)(limit_us / 1000));
}

int src_precopy(struct gw_session *s, struct src_ctx *c)
{
	uint64_t t_precopy_ns = gw_now_ns();

	for (;;) {
		uint64_t dirty_at_start = c->dirty_pages;
		struct round_mark m0, m1;
		int ret;

		gw_log(GW_LOG_INFO, "mig", "round_start", "round=%u dirty_pages=%llu",
		       gw_round(s), (unsigned long long)c->dirty_pages);
		round_mark(s, &m0);
		ret = src_send_round(s, c);
		if (ret)
			return ret;
		round_mark(s, &m1);
		gw_converge_round(&c->conv, m1.wire_bytes - m0.wire_bytes, m1.t_ns - m0.t_ns, m1.pages - m0.pages);
		ret = src_harvest(s, c);
		if (ret)
			return ret;
		record_round(s, c, dirty_at_start, &m0, &m1);
		src_publish(s, c);
		__atomic_store_n(&s->round, gw_round(s) + 1, __ATOMIC_RELAXED);
		if (gw_converge_fits(&c->conv, c->dirty_pages, (uint64_t)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US)))
			return 0;
		ret = converge_policy(s, c, t_precopy_ns);
		if (ret <= 0)
			return ret;
	}
}
