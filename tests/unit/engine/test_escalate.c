/* SPDX-License-Identifier: MIT */
/*
 * Invariant: escalation (escalate.c) takes its steps in their order --
 * the downtime limit raised in escalate-downtime-steps equal steps up to
 * its maximum, then auto-converge, then postcopy, then the timeout action
 * -- each only after escalate-window-rounds rounds in a row whose expected
 * downtime did not fall below 95% of the best seen; rounds with no rate do
 * not count; a fall restarts the window. A step the migration cannot take
 * (no throttle, postcopy not allowed, a maximum below the limit) is
 * skipped. Off (or switched off live) nothing is in force and the user's
 * limit holds. A round may switch over at the user's limit always, at a
 * raised limit only within 5% of the best expected downtime seen.
 */
#include "source/escalate.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define MS 1000000ull

static const struct gw_escalate_params base = {
	.on = true, .base_limit_ns = 10 * MS, .max_limit_ns = 50 * MS, .downtime_steps = 4,
	.window_rounds = 3, .can_auto_converge = true, .can_postcopy = true,
};

/* Feed @n rounds of @exp_ns; the steps taken among them. */
static unsigned feed(struct gw_escalate *e, const struct gw_escalate_params *p, uint64_t exp_ns, unsigned n)
{
	unsigned steps = 0;

	for (unsigned i = 0; i < n; i++)
		steps += gw_escalate_round(e, p, exp_ns);
	return steps;
}

static void test_order(void)
{
	struct gw_escalate e = { 0 };
	static const uint64_t want_limit_ms[] = { 20, 30, 40, 50 };

	/* The first round sets the best; 3 flat rounds after it take a step. */
	TEST_CHECK(feed(&e, &base, 100 * MS, 3) == 0 && e.stage == GW_ESC_NONE, "no step in the first window");
	TEST_CHECK(e.limit_ns == 10 * MS, "the user's limit: %llu", (unsigned long long)e.limit_ns);
	for (unsigned i = 0; i < 4; i++) {
		TEST_CHECK(feed(&e, &base, 100 * MS, 3) == 1 && e.stage == GW_ESC_DOWNTIME, "step %u: downtime", i);
		TEST_CHECK(e.downtime_step == i + 1 && e.limit_ns == want_limit_ms[i] * MS, "step %u: limit %llu",
			   i, (unsigned long long)e.limit_ns);
	}
	TEST_CHECK(feed(&e, &base, 100 * MS, 3) == 1 && e.stage == GW_ESC_AUTO_CONVERGE, "then auto-converge");
	TEST_CHECK(feed(&e, &base, 100 * MS, 3) == 1 && e.stage == GW_ESC_POSTCOPY, "then postcopy");
	TEST_CHECK(feed(&e, &base, 100 * MS, 3) == 1 && e.stage == GW_ESC_TIMEOUT_ACTION, "then the action");
	TEST_CHECK(feed(&e, &base, 100 * MS, 9) == 0 && e.steps_taken == 7, "nothing after the last: %u",
		   e.steps_taken);
	TEST_CHECK(e.limit_ns == 50 * MS, "the maximum stays in force");
}

static void test_trigger(void)
{
	struct gw_escalate e = { 0 };
	uint64_t exp = 1000 * MS;	/* 20 falls of 10% stay above every limit */

	/* Falling by more than 5% a round: never a step. */
	for (unsigned i = 0; i < 20; i++, exp = exp * 9 / 10)
		TEST_CHECK(!gw_escalate_round(&e, &base, exp), "round %u falls: no step", i);
	/* Falling by less than 5%: no progress. */
	exp = e.best_ns;
	TEST_CHECK(feed(&e, &base, exp - exp / 50, 2) == 0 && e.still_rounds == 2, "two flat rounds: no step");
	TEST_CHECK(!gw_escalate_round(&e, &base, UINT64_MAX) && e.still_rounds == 2, "no rate: not counted");
	exp = e.best_ns / 2;
	TEST_CHECK(!gw_escalate_round(&e, &base, exp) && e.still_rounds == 0, "a fall restarts the window");
	TEST_CHECK(e.best_ns == exp, "best %llu", (unsigned long long)e.best_ns);
	TEST_CHECK(feed(&e, &base, exp - exp / 100, 3) == 1, "3 rounds within 5%% of the best: a step");
}

static void test_skips(void)
{
	struct gw_escalate_params p = base;
	struct gw_escalate e = { 0 };

	p.max_limit_ns = p.base_limit_ns;	/* nothing to raise */
	p.can_auto_converge = false;
	feed(&e, &p, 100 * MS, 1);
	TEST_CHECK(feed(&e, &p, 100 * MS, 3) == 1 && e.stage == GW_ESC_POSTCOPY, "straight to postcopy: %s",
		   gw_escalate_stage_name(e.stage));
	p.can_postcopy = false;
	e = (struct gw_escalate){ 0 };
	feed(&e, &p, 100 * MS, 1);
	TEST_CHECK(feed(&e, &p, 100 * MS, 3) == 1 && e.stage == GW_ESC_TIMEOUT_ACTION, "straight to the action");
}

static void test_live(void)
{
	struct gw_escalate_params p = base;
	struct gw_escalate e = { 0 };

	feed(&e, &p, 100 * MS, 4);
	TEST_CHECK(e.stage == GW_ESC_DOWNTIME && e.limit_ns == 20 * MS, "one step");
	p.max_limit_ns = 90 * MS;	/* a new maximum: the step's limit follows */
	gw_escalate_round(&e, &p, 100 * MS);
	TEST_CHECK(e.limit_ns == 30 * MS, "limit %llu", (unsigned long long)e.limit_ns);
	p.on = false;
	gw_escalate_round(&e, &p, 100 * MS);
	TEST_CHECK(e.stage == GW_ESC_NONE && e.steps_taken == 0 && e.limit_ns == 10 * MS, "off: nothing in force");
	TEST_CHECK(!gw_escalate_may_switch(&e, &p, 30 * MS) && gw_escalate_may_switch(&e, &p, 10 * MS),
		   "off: the user's limit");
}

static void test_switch_at_best(void)
{
	struct gw_escalate e = { 0 };

	feed(&e, &base, 100 * MS, 1);
	feed(&e, &base, 25 * MS, 1);	/* best 25 ms */
	feed(&e, &base, 40 * MS, 3);	/* one step: limit 20 ms */
	feed(&e, &base, 40 * MS, 3);	/* another: limit 30 ms */
	TEST_CHECK(e.limit_ns == 30 * MS && e.best_ns == 25 * MS, "limit %llu best %llu",
		   (unsigned long long)e.limit_ns, (unsigned long long)e.best_ns);
	TEST_CHECK(!gw_escalate_may_switch(&e, &base, 29 * MS), "fits the raised limit, but worse than the best");
	TEST_CHECK(gw_escalate_may_switch(&e, &base, 26 * MS), "within 5%% of the best");
	TEST_CHECK(gw_escalate_may_switch(&e, &base, 9 * MS), "the user's limit: always");
	TEST_CHECK(!gw_escalate_may_switch(&e, &base, 31 * MS), "over the raised limit");
	TEST_CHECK(!gw_escalate_may_switch(&e, &base, UINT64_MAX), "no rate: never");
	/* Rounds that fit but not near the best: no step; after a window, the next that fits. */
	TEST_CHECK(feed(&e, &base, 29 * MS, 2) == 0 && !gw_escalate_may_switch(&e, &base, 29 * MS),
		   "two rounds that fit, not near the best: wait");
	TEST_CHECK(feed(&e, &base, 29 * MS, 1) == 0 && gw_escalate_may_switch(&e, &base, 29 * MS),
		   "a window of them: switch (fit_rounds %u)", e.fit_rounds);
	TEST_CHECK(e.limit_ns == 30 * MS && e.steps_taken == 2, "no step while it fits: %u", e.steps_taken);
}

int main(void)
{
	test_order();
	test_trigger();
	test_skips();
	test_live();
	test_switch_at_best();
	TEST_EXIT();
}
