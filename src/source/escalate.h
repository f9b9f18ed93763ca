/* SPDX-License-Identifier: MIT */
/*
 * Escalation (escalate=1, opt-in): what an operator does by hand to a
 * migration that does not converge, as one policy whose steps are named
 * and taken in this order, each when the previous one stopped helping:
 *   1. downtime-limit: raise the downtime limit in escalate-downtime-steps
 *      equal steps from downtime-limit-us up to escalate-downtime-max-us;
 *   2. auto-converge: throttle the vCPUs (skipped when the VMM cannot, or
 *      auto-converge is on already);
 *   3. postcopy: switch to postcopy (only when the migration may: postcopy=1);
 *   4. timeout-action: converge-policy's action (cancel: fail, the source
 *      runs on; force: switch over now; keep-going: go on at the last limit).
 * The trigger is the model's, never wall time: a step is taken when the
 * expected downtime has not fallen below 95% of the best it has been for
 * escalate-window-rounds rounds in a row (rounds with no rate do not count).
 * The switchover: at the user's limit as always; at a raised limit in a
 * round whose expected downtime is within 5% of the best seen, so a raised
 * limit is not spent on a worse round than the model already had; after
 * escalate-window-rounds rounds in a row that fit the raised limit but not
 * near the best, at the next that fits (the best does not come back). A
 * round that fits the limit in force takes no step: the limit is not what
 * it lacks.
 * Every parameter is live: read at each round's end.
 */
#ifndef GW_SOURCE_ESCALATE_H
#define GW_SOURCE_ESCALATE_H

#include <stdbool.h>
#include <stdint.h>

enum gw_escalate_stage {
	GW_ESC_NONE = 0,		/* no step taken: the user's limit */
	GW_ESC_DOWNTIME = 1,		/* the limit raised, step downtime_step of downtime_steps */
	GW_ESC_AUTO_CONVERGE = 2,
	GW_ESC_POSTCOPY = 3,
	GW_ESC_TIMEOUT_ACTION = 4,
};

struct gw_escalate_params {
	bool on;
	uint64_t base_limit_ns;		/* downtime-limit-us */
	uint64_t max_limit_ns;		/* escalate-downtime-max-us (below the base: no raise) */
	unsigned downtime_steps;	/* escalate-downtime-steps, >= 1 */
	unsigned window_rounds;		/* escalate-window-rounds, >= 1 */
	bool can_auto_converge;		/* the VMM throttles and auto-converge is not on already */
	bool can_postcopy;		/* postcopy=1, not local */
};

/* State across rounds (the source's migration thread only). */
struct gw_escalate {
	enum gw_escalate_stage stage;
	unsigned downtime_step;		/* steps of the limit taken, 0..downtime_steps */
	unsigned still_rounds;		/* rounds since the best expected downtime fell */
	unsigned fit_rounds;		/* rounds in a row that fit the limit in force, none near the best */
	unsigned steps_taken;		/* every step, in order */
	uint64_t best_ns;		/* best expected downtime seen, 0 none yet */
	uint64_t limit_ns;		/* the downtime limit in force */
};

/* "none", "downtime-limit", "auto-converge", "postcopy", "timeout-action". */
const char *gw_escalate_stage_name(enum gw_escalate_stage stage);
/*
 * After a round whose expected downtime is @exp_ns (UINT64_MAX unknown):
 * the new state; true when a step was taken in this round.
 */
bool gw_escalate_round(struct gw_escalate *e, const struct gw_escalate_params *p, uint64_t exp_ns);
/* Whether a round expecting @exp_ns may switch over (see the top). */
bool gw_escalate_may_switch(const struct gw_escalate *e, const struct gw_escalate_params *p, uint64_t exp_ns);

#endif
