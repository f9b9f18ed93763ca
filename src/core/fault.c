/* SPDX-License-Identifier: MIT */
/* Fault injection for tests (see fault.h). Built only with GW_FAULT_INJECTION. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/fault.h"
#include "core/session_int.h"

#ifndef GW_FAULT_INJECTION
#error "fault.c belongs to test builds only (GW_FAULT_INJECTION)"
#endif

/* When a reached point fires, from the value @v its site passes and the armed argument. */
enum fault_rule {
	FIRE_ALWAYS,		/* as soon as it is reached */
	FIRE_AT_LEAST,		/* v >= arg */
	FIRE_NTH,		/* v == arg, v = 0 never */
	FIRE_ROUND0_AT_LEAST,	/* round 0 and v >= arg */
};

/* What it does then; ACT_BY_SITE: the site acts on GW_FAULT_DUE. */
enum fault_action {
	ACT_BY_SITE,
	ACT_DIE,		/* log, raise(SIGKILL) */
	ACT_STALL,		/* log, wait until the session fails */
	ACT_SLEEP_US,		/* sleep arg us, not logged (once per frame) */
	ACT_SLEEP_MS,		/* log, sleep arg ms */
};

static const struct fault_def {
	const char *name;	/* GW_FAULT=name[:arg] */
	enum fault_rule rule;
	enum fault_action action;
} gw_faults[GW_FAULT__COUNT] = {
	[GW_FAULT_DST_ROUND0] = { "dst-round0", FIRE_ROUND0_AT_LEAST, ACT_DIE },	/* v: channel bytes received */
	[GW_FAULT_DST_ROUND_N] = { "dst-round-n", FIRE_AT_LEAST, ACT_DIE },		/* v: round */
	[GW_FAULT_DST_FINAL] = { "dst-final", FIRE_ALWAYS, ACT_DIE },
	[GW_FAULT_DST_AFTER_READY] = { "dst-after-ready", FIRE_ALWAYS, ACT_DIE },
	[GW_FAULT_DST_AFTER_GO] = { "dst-after-go", FIRE_ALWAYS, ACT_DIE },
	[GW_FAULT_DST_BAD_FRAME] = { "dst-bad-frame", FIRE_ALWAYS, ACT_BY_SITE },
	[GW_FAULT_DST_REFUSE_STATE] = { "dst-refuse-state", FIRE_ALWAYS, ACT_BY_SITE },
	[GW_FAULT_DST_STALL] = { "dst-stall", FIRE_AT_LEAST, ACT_STALL },		/* v: round */
	[GW_FAULT_SRC_CORRUPT] = { "src-corrupt", FIRE_NTH, ACT_BY_SITE },		/* v: data frame number */
	[GW_FAULT_SRC_DELAY_GO] = { "src-delay-go", FIRE_ALWAYS, ACT_SLEEP_MS },
	[GW_FAULT_DST_CORRUPT_PAGE] = { "dst-corrupt-page", FIRE_ALWAYS, ACT_BY_SITE },
	[GW_FAULT_SRC_PC_CUT] = { "src-pc-cut", FIRE_AT_LEAST, ACT_BY_SITE },	/* v: pages pushed */
	[GW_FAULT_DST_PC_CUT] = { "dst-pc-cut", FIRE_AT_LEAST, ACT_BY_SITE },	/* v: pages placed */
	[GW_FAULT_DST_SLOW] = { "dst-slow", FIRE_ALWAYS, ACT_SLEEP_US },
};

void gw_fault_init(struct gw_session *s)
{
	const char *spec = getenv("GW_FAULT");
	const char *colon;
	size_t len;

	s->fault_point = GW_FAULT_NONE;
	s->fault_arg = 0;
	if (!spec || !*spec)
		return;
	colon = strchr(spec, ':');
	len = colon ? (size_t)(colon - spec) : strlen(spec);
	for (unsigned i = 1; i < GW_FAULT__COUNT; i++) {
		if (strlen(gw_faults[i].name) == len && !strncmp(spec, gw_faults[i].name, len)) {
			s->fault_point = (enum gw_fault_point)i;
			s->fault_arg = colon ? strtoull(colon + 1, NULL, 0) : 0;
			gw_log(GW_LOG_WARN, "fault", "fault_armed", "point=%s arg=%llu",
			       gw_faults[i].name, (unsigned long long)s->fault_arg);
			return;
		}
	}
	gw_log(GW_LOG_ERROR, "fault", "fault_unknown", "spec=\"%s\"", spec);
}

static bool fires(const struct gw_session *s, enum fault_rule rule, uint64_t v)
{
	switch (rule) {
	case FIRE_ALWAYS:
		return true;
	case FIRE_AT_LEAST:
		return v >= s->fault_arg;
	case FIRE_NTH:
		return v && v == s->fault_arg;
	case FIRE_ROUND0_AT_LEAST:
		return gw_round(s) == 0 && v >= s->fault_arg;
	}
	return false;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000) };

	nanosleep(&ts, NULL);
}

/* Stop here until the session fails (a destination that stops reading). */
static void stall(struct gw_session *s)
{
	pthread_mutex_lock(&s->lock);
	while (!s->err.code)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

bool gw_fault_fire(struct gw_session *s, enum gw_fault_point point, uint64_t v)
{
	const struct fault_def *d = &gw_faults[point];

	if (s->fault_point != point || !fires(s, d->rule, v))
		return false;
	switch (d->action) {
	case ACT_BY_SITE:
		break;
	case ACT_DIE:
		gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=%s action=die", d->name);
		raise(SIGKILL);
		break;
	case ACT_STALL:
		gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=%s action=stall", d->name);
		stall(s);
		break;
	case ACT_SLEEP_US:
		sleep_ns(s->fault_arg * 1000);
		break;
	case ACT_SLEEP_MS:
		gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=%s ms=%llu", d->name,
		       (unsigned long long)s->fault_arg);
		sleep_ns(s->fault_arg * 1000000);
		break;
	}
	return true;
}
