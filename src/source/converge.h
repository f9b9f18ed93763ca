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

#endif
