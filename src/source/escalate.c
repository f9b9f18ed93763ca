/* SPDX-License-Identifier: MIT */
/* Escalation as arithmetic (see escalate.h). Units: ns. */
#include <pthread.h>
#include <stdio.h>
#include "source/escalate.h"
#include "source/source.h"

const char *gw_escalate_stage_name(enum gw_escalate_stage stage)
{
	static const char *const names[] = {
		[GW_ESC_NONE] = "none", [GW_ESC_DOWNTIME] = "downtime-limit",
		[GW_ESC_AUTO_CONVERGE] = "auto-converge", [GW_ESC_POSTCOPY] = "postcopy",
		[GW_ESC_TIMEOUT_ACTION] = "timeout-action",
	};

	return (unsigned)stage < sizeof(names) / sizeof(names[0]) ? names[stage] : "unknown";
}

static uint64_t limit_at(const struct gw_escalate_params *p, unsigned step)
{
	if (p->max_limit_ns <= p->base_limit_ns || !step)
		return p->base_limit_ns;
	if (step >= p->downtime_steps)
		return p->max_limit_ns;
	return p->base_limit_ns + (p->max_limit_ns - p->base_limit_ns) * step / p->downtime_steps;
}

/* The next step after @e's, in the order of escalate.h; the stage to take. */
static enum gw_escalate_stage next_stage(const struct gw_escalate *e, const struct gw_escalate_params *p)
{
	if (e->stage <= GW_ESC_DOWNTIME && p->max_limit_ns > p->base_limit_ns &&
	    e->downtime_step < p->downtime_steps)
		return GW_ESC_DOWNTIME;
	if (e->stage < GW_ESC_AUTO_CONVERGE && p->can_auto_converge)
		return GW_ESC_AUTO_CONVERGE;
	if (e->stage < GW_ESC_POSTCOPY && p->can_postcopy)
		return GW_ESC_POSTCOPY;
	return GW_ESC_TIMEOUT_ACTION;
}

bool gw_escalate_round(struct gw_escalate *e, const struct gw_escalate_params *p, uint64_t exp_ns)
{
	bool stepped = false;

	if (!p->on) {	/* off, or switched off live: the user's limit, nothing in force */
		*e = (struct gw_escalate){ .limit_ns = p->base_limit_ns, .best_ns = e->best_ns };
		return false;
	}
	e->limit_ns = limit_at(p, e->downtime_step);	/* the base or the maximum may have changed */
	if (exp_ns != UINT64_MAX && exp_ns <= e->limit_ns) {	/* fits: wait for the best, no step */
		bool near_best = !e->best_ns || exp_ns <= e->best_ns + e->best_ns / 20;

		e->fit_rounds = near_best ? 0 : e->fit_rounds + 1;
		if (!e->best_ns || exp_ns < e->best_ns)
			e->best_ns = exp_ns;
		return false;
	}
	e->fit_rounds = 0;
	if (exp_ns != UINT64_MAX) {
		if (!e->best_ns || exp_ns < e->best_ns - e->best_ns / 20) {
			e->still_rounds = 0;
		} else if (++e->still_rounds >= p->window_rounds && e->stage != GW_ESC_TIMEOUT_ACTION) {
			e->stage = next_stage(e, p);
			if (e->stage == GW_ESC_DOWNTIME)
				e->downtime_step++;
			e->steps_taken++;
			e->still_rounds = 0;
			stepped = true;
		}
		if (!e->best_ns || exp_ns < e->best_ns)
			e->best_ns = exp_ns;
	}
	e->limit_ns = limit_at(p, e->downtime_step);
	return stepped;
}

bool gw_escalate_may_switch(const struct gw_escalate *e, const struct gw_escalate_params *p, uint64_t exp_ns)
{
	if (exp_ns == UINT64_MAX)
		return false;
	if (exp_ns <= p->base_limit_ns)
		return true;
	if (!p->on || exp_ns > e->limit_ns)
		return false;
	return !e->best_ns || exp_ns <= e->best_ns + e->best_ns / 20 || e->fit_rounds >= p->window_rounds;
}

/* ---- the source's use of it: parameters, log, statistics ---- */

static struct gw_escalate_params escalate_params(struct gw_session *s)
{
	return (struct gw_escalate_params){
		.on = gw_param(s, GW_PARAM_ESCALATE) != 0,
		.base_limit_ns = (uint64_t)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US) * 1000,
		.max_limit_ns = (uint64_t)gw_param(s, GW_PARAM_ESCALATE_DOWNTIME_MAX_US) * 1000,
		.downtime_steps = (unsigned)gw_param(s, GW_PARAM_ESCALATE_DOWNTIME_STEPS),
		.window_rounds = (unsigned)gw_param(s, GW_PARAM_ESCALATE_WINDOW_ROUNDS),
		.can_auto_converge = s->ops->throttle && !gw_param(s, GW_PARAM_AUTO_CONVERGE),
		.can_postcopy = gw_param(s, GW_PARAM_POSTCOPY) && !gw_param(s, GW_PARAM_LOCAL),
	};
}

uint64_t src_limit_ns(struct gw_session *s, const struct src_ctx *c)
{
	uint64_t base_ns = (uint64_t)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US) * 1000;

	return gw_param(s, GW_PARAM_ESCALATE) && c->esc.limit_ns > base_ns ? c->esc.limit_ns : base_ns;
}

bool src_escalate_fits(struct gw_session *s, struct src_ctx *c)
{
	struct gw_escalate_params p = escalate_params(s);

	return gw_escalate_may_switch(&c->esc, &p, gw_converge_expected_ns(&c->conv, c->dirty_pages));
}

void src_escalate(struct gw_session *s, struct src_ctx *c)
{
	struct gw_escalate_params p = escalate_params(s);
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);

	if (gw_escalate_round(&c->esc, &p, exp_ns))
		gw_log(GW_LOG_WARN, "mig", "escalate", "step=%s n=%u downtime_step=%u of=%u round=%u limit_us=%llu "
		       "expected_downtime_us=%lld best_expected_downtime_us=%llu window_rounds=%u",
		       gw_escalate_stage_name(c->esc.stage), c->esc.steps_taken, c->esc.downtime_step,
		       p.downtime_steps, gw_round(s), (unsigned long long)(c->esc.limit_ns / 1000),
		       exp_ns == UINT64_MAX ? -1ll : (long long)(exp_ns / 1000),
		       (unsigned long long)(c->esc.best_ns / 1000), p.window_rounds);
	pthread_mutex_lock(&s->lock);
	snprintf(s->stats.escalate_step, sizeof(s->stats.escalate_step), "%s",
		 gw_escalate_stage_name(c->esc.stage));
	s->stats.escalate_steps = c->esc.steps_taken;
	s->stats.escalate_limit_ns = src_limit_ns(s, c);
	s->stats.escalate_best_expected_ns = c->esc.best_ns;
	pthread_mutex_unlock(&s->lock);
}
