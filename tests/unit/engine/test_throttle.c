/* SPDX-License-Identifier: MIT */
/*
 * Invariant: auto-converge and the dirty limit (throttle.c) act as QEMU's
 * rule says. A round is too fast when it dirtied more than
 * throttle-trigger-threshold percent of what it sent; only the second too-
 * fast round in a row acts (then the count restarts); a round that keeps
 * up resets the count. Auto-converge starts at cpu-throttle-initial, adds
 * cpu-throttle-increment per step up to max-cpu-throttle; with tailslow a
 * step adds at most what the rates say is missing (and at least 1). The
 * dirty limit switches on at the same trigger, or from the first round
 * when its start says so. Nothing happens when neither is asked for.
 */
#include "throttle.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define MB (1000000ull)

struct step {
	uint64_t dirty, sent;		/* the round's bytes */
	unsigned want_pct;
	bool want_limit;
};

struct throttle_case {
	const char *name;
	struct gw_throttle_params p;
	struct step steps[8];
	unsigned nr;
};

static const struct gw_throttle_params ac = { .auto_converge = true, .initial_pct = 20,
	.increment_pct = 10, .max_pct = 99, .threshold_pct = 50 };

static const struct throttle_case cases[] = {
	{ "nothing asked", { .initial_pct = 20, .increment_pct = 10, .max_pct = 99, .threshold_pct = 50 },
	  { { 900 * MB, 100 * MB, 0, false }, { 900 * MB, 100 * MB, 0, false } }, 2 },
	{ "keeps up: never", ac,
	  { { 50 * MB, 100 * MB, 0, false }, { 50 * MB, 100 * MB, 0, false }, { 40 * MB, 100 * MB, 0, false } }, 3 },
	{ "second too-fast round acts", ac,
	  { { 60 * MB, 100 * MB, 0, false }, { 60 * MB, 100 * MB, 20, false },
	    { 60 * MB, 100 * MB, 20, false }, { 60 * MB, 100 * MB, 30, false } }, 4 },
	{ "a good round resets the count", ac,
	  { { 60 * MB, 100 * MB, 0, false }, { 10 * MB, 100 * MB, 0, false },
	    { 60 * MB, 100 * MB, 0, false }, { 60 * MB, 100 * MB, 20, false } }, 4 },
	{ "capped at max", { .auto_converge = true, .initial_pct = 20, .increment_pct = 30, .max_pct = 60,
			     .threshold_pct = 50 },
	  { { 9 * MB, 1 * MB, 0, false }, { 9 * MB, 1 * MB, 20, false }, { 9 * MB, 1 * MB, 20, false },
	    { 9 * MB, 1 * MB, 50, false }, { 9 * MB, 1 * MB, 50, false }, { 9 * MB, 1 * MB, 60, false } }, 6 },
	/* tailslow at 20%: running 80; threshold 50 of 100 = 50; dirty 60: ideal 80*50/60 = 66.7 -> +13 capped 10;
	   dirty 52: ideal 76.9 -> +3 */
	{ "tailslow: small steps near balance", { .auto_converge = true, .initial_pct = 20, .increment_pct = 10,
						  .max_pct = 99, .tailslow = true, .threshold_pct = 50 },
	  { { 60 * MB, 100 * MB, 0, false }, { 60 * MB, 100 * MB, 20, false },
	    { 52 * MB, 100 * MB, 20, false }, { 52 * MB, 100 * MB, 23, false } }, 4 },
	{ "dirty limit on no convergence", { .threshold_pct = 50, .dirty_limit_bps = 1 * MB },
	  { { 60 * MB, 100 * MB, 0, false }, { 60 * MB, 100 * MB, 0, true }, { 1 * MB, 100 * MB, 0, true } }, 3 },
	{ "dirty limit from the start", { .threshold_pct = 50, .dirty_limit_bps = 1 * MB,
					  .dirty_limit_from_start = true },
	  { { 0, 0, 0, true }, { 1 * MB, 100 * MB, 0, true } }, 2 },
	{ "both", { .auto_converge = true, .initial_pct = 20, .increment_pct = 10, .max_pct = 99,
		    .threshold_pct = 50, .dirty_limit_bps = 4 * MB },
	  { { 80 * MB, 100 * MB, 0, false }, { 80 * MB, 100 * MB, 20, true } }, 2 },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct throttle_case *c = &cases[i];
		struct gw_throttle t = { 0 };

		for (unsigned k = 0; k < c->nr; k++) {
			gw_throttle_round(&t, &c->p, c->steps[k].dirty, c->steps[k].sent);
			TEST_CHECK(t.pct == c->steps[k].want_pct && t.dirty_limit_on == c->steps[k].want_limit,
				   "%s, round %u: throttle %u%% limit %d, want %u%% %d", c->name, k, t.pct,
				   t.dirty_limit_on, c->steps[k].want_pct, c->steps[k].want_limit);
		}
	}
	TEST_EXIT();
}
