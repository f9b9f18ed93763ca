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

static const char *const gw_fault_names[GW_FAULT__COUNT] = {
	[GW_FAULT_DST_ROUND0] = "dst-round0",
	[GW_FAULT_DST_ROUND_N] = "dst-round-n",
	[GW_FAULT_DST_FINAL] = "dst-final",
	[GW_FAULT_DST_AFTER_READY] = "dst-after-ready",
	[GW_FAULT_DST_AFTER_GO] = "dst-after-go",
	[GW_FAULT_DST_BAD_FRAME] = "dst-bad-frame",
	[GW_FAULT_DST_REFUSE_STATE] = "dst-refuse-state",
	[GW_FAULT_DST_STALL] = "dst-stall",
	[GW_FAULT_SRC_CORRUPT] = "src-corrupt",
	[GW_FAULT_SRC_DELAY_GO] = "src-delay-go",
	[GW_FAULT_DST_CORRUPT_PAGE] = "dst-corrupt-page",
	[GW_FAULT_SRC_PC_CUT] = "src-pc-cut",
	[GW_FAULT_DST_PC_CUT] = "dst-pc-cut",
	[GW_FAULT_DST_SLOW] = "dst-slow",
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
		if (strlen(gw_fault_names[i]) == len && !strncmp(spec, gw_fault_names[i], len)) {
			s->fault_point = (enum gw_fault_point)i;
			s->fault_arg = colon ? strtoull(colon + 1, NULL, 0) : 0;
			gw_log(GW_LOG_WARN, "fault", "fault_armed", "point=%s arg=%llu",
			       gw_fault_names[i], (unsigned long long)s->fault_arg);
			return;
		}
	}
	gw_log(GW_LOG_ERROR, "fault", "fault_unknown", "spec=\"%s\"", spec);
}

bool gw_fault_armed(const struct gw_session *s, enum gw_fault_point point)
{
	return s->fault_point == point;
}

uint64_t gw_fault_arg(const struct gw_session *s)
{
	return s->fault_arg;
}

void gw_fault_die(struct gw_session *s, enum gw_fault_point point)
{
	if (!gw_fault_armed(s, point))
		return;
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=%s action=die", gw_fault_names[point]);
	raise(SIGKILL);
}

void gw_fault_sleep_us(const struct gw_session *s)
{
	uint64_t us = gw_fault_arg(s);
	struct timespec ts = { .tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

void gw_fault_stall(struct gw_session *s)
{
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=%s action=stall",
	       gw_fault_names[s->fault_point]);
	pthread_mutex_lock(&s->lock);
	while (!s->err.code)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}
