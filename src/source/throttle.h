/* SPDX-License-Identifier: MIT */
/*
 * What to do about a guest that dirties memory faster than the link moves
 * it: auto-converge (throttle the vCPUs, QEMU's rule) and the dirty limit.
 * Pure: the source calls it after each round with what the round measured;
 * it says what to apply through the VMM's callbacks.
 *
 * A round is "too fast" when the bytes dirtied during it exceed
 * throttle-trigger-threshold percent of the bytes it sent. After two such
 * rounds in a row (the count then restarts):
 *  - auto-converge: the first step throttles to cpu-throttle-initial, each
 *    later one adds cpu-throttle-increment, up to max-cpu-throttle; with
 *    cpu-throttle-tailslow a step adds only what the rates say is missing:
 *    min(increment, running x (1 - threshold bytes / dirtied bytes));
 *  - the dirty limit (when its start is "on no convergence") switches on.
 * A dirty limit that starts "from the start" is on from the first round.
 * The parameters are live: auto-converge switched off drops the throttle,
 * a lower max-cpu-throttle caps it, a dirty limit set to 0 is off, and a
 * changed limit in force follows the new value.
 */
#ifndef GW_THROTTLE_H
#define GW_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

struct gw_throttle_params {
	bool auto_converge;
	unsigned initial_pct, increment_pct, max_pct;
	bool tailslow;
	unsigned threshold_pct;
	uint64_t dirty_limit_bps;	/* per vCPU, 0 = no dirty limit */
	bool dirty_limit_from_start;
};

/* State across rounds (the source's migration thread). */
struct gw_throttle {
	unsigned pct;			/* throttle in force */
	unsigned high_rounds;		/* consecutive too-fast rounds */
	bool dirty_limit_on;
	uint64_t dirty_limit_bps;	/* the limit in force when on */
};

/* After a round that sent @sent_bytes while @dirty_bytes were dirtied: the new state. */
void gw_throttle_round(struct gw_throttle *t, const struct gw_throttle_params *p,
		       uint64_t dirty_bytes, uint64_t sent_bytes);

#endif
