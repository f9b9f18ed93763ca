/* SPDX-License-Identifier: MIT */
/*
 * Rate limit of peer-caused log lines (see lograte.h). GCRA: an event's
 * bucket is a time, tat; a line at @now passes while tat - now leaves room
 * for it within the burst, and moves tat one period on.
 */
#include <string.h>
#include <godwit/log.h>
#include "util/lograte.h"

void gw_lograte_init(struct gw_lograte *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
}

void gw_lograte_destroy(struct gw_lograte *r)
{
	gw_lograte_flush(r, gw_now_ns(), true);
	pthread_mutex_destroy(&r->lock);
}

/* r->lock held. */
static void report(struct gw_lograte_event *e, uint64_t now_ns)
{
	gw_log(GW_LOG_WARN, "mig", "log_suppressed", "event=%s count=%llu window_s=%.1f", e->event,
	       (unsigned long long)e->dropped, (now_ns - e->first_drop_ns) / 1e9);
	e->dropped = 0;
}

/* r->lock held: the slot of @event (the last one when all are taken). */
static struct gw_lograte_event *slot(struct gw_lograte *r, const char *event)
{
	for (unsigned i = 0; i < GW_LOGRATE_EVENTS; i++) {
		struct gw_lograte_event *e = &r->ev[i];

		if (!e->event)
			e->event = event;
		if (!strcmp(e->event, event))
			return e;
	}
	return &r->ev[GW_LOGRATE_EVENTS - 1];
}

bool gw_lograte_allow(struct gw_lograte *r, const char *event, uint64_t now_ns)
{
	const uint64_t room_ns = (GW_LOGRATE_BURST - 1) * GW_LOGRATE_PERIOD_NS;
	struct gw_lograte_event *e;
	bool ok;

	pthread_mutex_lock(&r->lock);
	e = slot(r, event);
	if (e->tat_ns < now_ns)
		e->tat_ns = now_ns;
	ok = e->tat_ns - now_ns <= room_ns;
	if (ok) {
		e->tat_ns += GW_LOGRATE_PERIOD_NS;
		if (e->dropped && now_ns - e->first_drop_ns >= GW_LOGRATE_REPORT_NS)
			report(e, now_ns);
	} else if (!e->dropped++) {
		e->first_drop_ns = now_ns;
	}
	pthread_mutex_unlock(&r->lock);
	return ok;
}

uint64_t gw_lograte_flush(struct gw_lograte *r, uint64_t now_ns, bool all)
{
	uint64_t next = 0;

	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < GW_LOGRATE_EVENTS; i++) {
		struct gw_lograte_event *e = &r->ev[i];
		uint64_t due = e->first_drop_ns + GW_LOGRATE_REPORT_NS;

		if (!e->dropped)
			continue;
		if (all || now_ns >= due)
			report(e, now_ns);
		else if (!next || due < next)
			next = due;
	}
	pthread_mutex_unlock(&r->lock);
	return next;
}
