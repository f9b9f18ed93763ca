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
#include "source/throttle.h"
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

/* QEMU's defaults with auto-converge on (a macro: static tables need constant initializers). */
#define AC { .auto_converge = true, .initial_pct = 20, .increment_pct = 10, .max_pct = 99, \
	     .threshold_pct = 50 }

static const struct throttle_case cases[] = {
	{ "nothing asked", { .initial_pct = 20, .increment_pct = 10, .max_pct = 99, .threshold_pct = 50 },
	  { { 900 * MB, 100 * MB, 0, false }, { 900 * MB, 100 * MB, 0, false } }, 2 },
	{ "keeps up: never", AC,
	  { { 50 * MB, 100 * MB, 0, false }, { 50 * MB, 100 * MB, 0, false }, { 40 * MB, 100 * MB, 0, false } }, 3 },
	{ "second too-fast round acts", AC,
	  { { 60 * MB, 100 * MB, 0, false }, { 60 * MB, 100 * MB, 20, false },
	    { 60 * MB, 100 * MB, 20, false }, { 60 * MB, 100 * MB, 30, false } }, 4 },
	{ "a good round resets the count", AC,
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

/* Parameters change while the migration runs: the state follows them. */
static void test_live_changes(void)
{
	struct gw_throttle_params p = AC;
	struct gw_throttle t = { 0 };

	p.dirty_limit_bps = 8 * MB;
	for (int i = 0; i < 4; i++)
		gw_throttle_round(&t, &p, 900 * MB, 100 * MB);
	TEST_CHECK(t.pct == 30 && t.dirty_limit_on && t.dirty_limit_bps == 8 * MB,
		   "ramp: %u%% limit %d %llu", t.pct, t.dirty_limit_on, (unsigned long long)t.dirty_limit_bps);
	p.max_pct = 25;
	gw_throttle_round(&t, &p, 900 * MB, 100 * MB);
	TEST_CHECK(t.pct == 25, "lower max-cpu-throttle caps it: %u%%", t.pct);
	p.dirty_limit_bps = 2 * MB;
	gw_throttle_round(&t, &p, 10 * MB, 100 * MB);
	TEST_CHECK(t.dirty_limit_bps == 2 * MB, "the limit in force follows: %llu",
		   (unsigned long long)t.dirty_limit_bps);
	p.auto_converge = false;
	p.dirty_limit_bps = 0;
	gw_throttle_round(&t, &p, 900 * MB, 100 * MB);
	TEST_CHECK(t.pct == 0 && !t.dirty_limit_on && !t.dirty_limit_bps,
		   "switched off: %u%% limit %d", t.pct, t.dirty_limit_on);
}

int main(void)
{
	test_live_changes();
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
