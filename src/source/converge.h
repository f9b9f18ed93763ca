/* SPDX-License-Identifier: MIT */
/*
 * Convergence model. Expected downtime = bytes still to send / transfer
 * rate + a fixed cost (state save, send, load, handover round trips).
 * Bytes still to send are dirty pages times the wire bytes a page cost in
 * the last round (zero pages and compression make it less than a page),
 * plus the bytes in flight: sent, and not yet taken in by the destination
 * (socket buffers of both kernels), which it takes in during the pause, at
 * the rate it was last seen taking them in (in_flight_rate_bps; the
 * transfer rate until measured).
 */
#ifndef GW_CONVERGE_H
#define GW_CONVERGE_H

#include <stdbool.h>
#include <stdint.h>
#include <godwit/stats.h>

struct gw_converge {
	uint64_t rate_bps;		/* smoothed transfer rate, bytes/s; 0 = unknown */
	double wire_bytes_per_page;	/* last round; page size until measured */
	uint64_t fixed_cost_ns;		/* state + handover estimate */
	uint64_t in_flight_bytes;	/* sent, not yet taken in by the destination; 0 = not measured */
	uint64_t in_flight_rate_bps;	/* how fast the destination took them in; 0 = unknown */
};

void gw_converge_init(struct gw_converge *c, uint32_t page_size_bytes);
/* Fold in one round: @bytes sent in @ns for @pages pages. */
void gw_converge_round(struct gw_converge *c, uint64_t bytes, uint64_t ns, uint64_t pages);
/*
 * Expected downtime in ns for @dirty_pages still to send; with no measured
 * rate: the fixed cost for at most 64 KiB, else UINT64_MAX (unknown).
 */
uint64_t gw_converge_expected_ns(const struct gw_converge *c, uint64_t dirty_pages);
/* True when the expected downtime fits @limit_us. */
bool gw_converge_fits(const struct gw_converge *c, uint64_t dirty_pages, uint64_t limit_us);

/* Fits, or falls toward the limit (or no rate to say otherwise yet). */
static inline bool gw_converging(enum gw_converge_state st)
{
	return st <= GW_CONVERGE_CAPPED;
}

/* What a round's end shows the verdict (gw_converge_judge). */
struct gw_converge_view {
	uint64_t dirty_pages;		/* still to send */
	uint64_t dirty_bps;		/* the guest's dirty rate, page bytes/s */
	uint64_t limit_ns;		/* downtime-limit */
	uint64_t cap_bps;		/* max-bandwidth, 0 = none */
	uint64_t sent_pages;		/* sent in the last three rounds; 0 = fewer rounds yet */
	uint64_t fell_pages;		/* how far the dirty set fell over them (0 if it grew) */
};

/*
 * The verdict, the first that applies: fits; the fixed cost alone is over
 * the limit; no rate yet (unknown); the guest dirties at least as fast as
 * the link moves (outrun); the dirty set fell by less than a tenth of what
 * the last three rounds sent (flat: the guest writes again what is sent);
 * else it converges, capped when the link runs at nine tenths of the cap
 * or more. Converging, *@eta_ns is the time until the expected downtime
 * fits: it falls by 1 - dirty/rate ns a ns. Otherwise *@eta_ns is 0.
 */
enum gw_converge_state gw_converge_judge(const struct gw_converge *c, const struct gw_converge_view *v,
					 uint64_t *eta_ns);

#endif
