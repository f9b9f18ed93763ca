/* SPDX-License-Identifier: MIT */
/* Convergence arithmetic (see converge.h). Units: bytes, ns, bytes/s. */
#include <stdint.h>
#include "source/converge.h"

/*
 * A round's rate weighs in proportion to its length, half at most (from
 * this length on): a short round mostly measures socket buffers filling,
 * not the link (a 1 ms round once made a 32 MB/s link look like 110 MB/s).
 */
#define GW_CONVERGE_FULL_WEIGHT_NS 100000000ull
/*
 * A round that sent less than this measured socket buffers, not the link:
 * it gives no rate. A dirty set this small leaves in one socket write, so
 * with no rate yet it costs the round trips the fixed cost already holds
 * (an idle KVM guest's timer dirties 2 pages a round and never sends more).
 */
#define GW_CONVERGE_MIN_RATE_BYTES 65536ull

void gw_converge_init(struct gw_converge *c, uint32_t page_size_bytes)
{
	c->rate_bps = 0;
	c->wire_bytes_per_page = page_size_bytes;
	c->fixed_cost_ns = 2000000;	/* 2 ms until measured */
	c->in_flight_bytes = 0;
	c->in_flight_rate_bps = 0;
}

void gw_converge_round(struct gw_converge *c, uint64_t bytes, uint64_t ns, uint64_t pages)
{
	uint64_t rate_bps;

	if (pages)
		c->wire_bytes_per_page = (double)bytes / (double)pages;
	if (!ns || bytes < GW_CONVERGE_MIN_RATE_BYTES)
		return;
	rate_bps = (uint64_t)((__uint128_t)bytes * 1000000000ull / ns);
	if (!c->rate_bps) {
		c->rate_bps = rate_bps;
	} else {
		double w = ns >= GW_CONVERGE_FULL_WEIGHT_NS ? 0.5 : 0.5 * (double)ns / GW_CONVERGE_FULL_WEIGHT_NS;

		c->rate_bps = (uint64_t)((double)c->rate_bps + ((double)rate_bps - (double)c->rate_bps) * w);
	}
}

uint64_t gw_converge_expected_ns(const struct gw_converge *c, uint64_t dirty_pages)
{
	double bytes = (double)dirty_pages * c->wire_bytes_per_page + (double)c->in_flight_bytes;
	double in_flight_ns = 0;

	if (!dirty_pages && !c->in_flight_bytes)
		return c->fixed_cost_ns;
	if (!c->rate_bps)
		return bytes <= GW_CONVERGE_MIN_RATE_BYTES ? c->fixed_cost_ns : UINT64_MAX;
	if (c->in_flight_rate_bps) {	/* the destination's own pace for what it holds */
		bytes -= (double)c->in_flight_bytes;
		in_flight_ns = (double)c->in_flight_bytes * 1e9 / (double)c->in_flight_rate_bps;
	}
	return (uint64_t)(bytes * 1e9 / (double)c->rate_bps + in_flight_ns) + c->fixed_cost_ns;
}

bool gw_converge_fits(const struct gw_converge *c, uint64_t dirty_pages, uint64_t limit_us)
{
	uint64_t exp_ns = gw_converge_expected_ns(c, dirty_pages);

	return exp_ns != UINT64_MAX && exp_ns <= limit_us * 1000ull;
}

enum gw_converge_state gw_converge_judge(const struct gw_converge *c, const struct gw_converge_view *v,
					 uint64_t *eta_ns)
{
	uint64_t exp_ns = gw_converge_expected_ns(c, v->dirty_pages);
	double left;

	*eta_ns = 0;
	if (exp_ns != UINT64_MAX && exp_ns <= v->limit_ns)
		return GW_CONVERGE_FITS;
	if (c->fixed_cost_ns > v->limit_ns)
		return GW_CONVERGE_FIXED_COST;
	if (!c->rate_bps || exp_ns == UINT64_MAX)
		return GW_CONVERGE_UNKNOWN;
	if (v->dirty_bps >= c->rate_bps)
		return GW_CONVERGE_OUTRUN;
	if (v->sent_pages && v->fell_pages * 10 < v->sent_pages)
		return GW_CONVERGE_FLAT;
	left = 1.0 - (double)v->dirty_bps / (double)c->rate_bps;
	*eta_ns = (uint64_t)((double)(exp_ns - v->limit_ns) / left);
	return v->cap_bps && c->rate_bps * 10 >= v->cap_bps * 9 ? GW_CONVERGE_CAPPED : GW_CONVERGE_DRAINING;
}
