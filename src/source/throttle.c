/* SPDX-License-Identifier: MIT */
/* Auto-converge and the dirty limit, as arithmetic (see throttle.h). */
#include "source/throttle.h"

static unsigned next_pct(const struct gw_throttle *t, const struct gw_throttle_params *p,
			 uint64_t dirty_bytes, uint64_t threshold_bytes)
{
	unsigned inc = p->increment_pct, pct;

	if (!t->pct)
		return p->initial_pct < p->max_pct ? p->initial_pct : p->max_pct;
	if (p->tailslow && dirty_bytes) {
		/* What still runs, times the share of it the link cannot absorb. */
		double running = 100.0 - t->pct;
		double ideal = running * ((double)threshold_bytes / (double)dirty_bytes);
		unsigned want = (unsigned)(running - ideal);

		inc = want < inc ? want : inc;
		if (!inc)
			inc = 1;
	}
	pct = t->pct + inc;
	return pct < p->max_pct ? pct : p->max_pct;
}

void gw_throttle_round(struct gw_throttle *t, const struct gw_throttle_params *p,
		       uint64_t dirty_bytes, uint64_t sent_bytes)
{
	uint64_t threshold_bytes = sent_bytes * p->threshold_pct / 100;

	/* Live changes first. */
	if (!p->auto_converge)
		t->pct = 0;
	if (t->pct > p->max_pct)
		t->pct = p->max_pct;
	if (!p->dirty_limit_bps)
		t->dirty_limit_on = false;
	if (p->dirty_limit_bps && p->dirty_limit_from_start)
		t->dirty_limit_on = true;
	if (dirty_bytes <= threshold_bytes) {
		t->high_rounds = 0;
	} else if (++t->high_rounds >= 2) {
		t->high_rounds = 0;
		if (p->auto_converge)
			t->pct = next_pct(t, p, dirty_bytes, threshold_bytes);
		if (p->dirty_limit_bps)
			t->dirty_limit_on = true;
	}
	t->dirty_limit_bps = t->dirty_limit_on ? p->dirty_limit_bps : 0;
}
