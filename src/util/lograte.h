/* SPDX-License-Identifier: MIT */
/*
 * The one rate limit on log lines a remote peer can cause (refusals,
 * evictions, busy answers: net/admit.c owns one per acceptor). A token
 * bucket per event: GW_LOGRATE_BURST lines at once, then one per
 * GW_LOGRATE_PERIOD_NS; lines over it are counted, and the count is logged
 * as `log_suppressed event=E count=N window_s=S` at most every
 * GW_LOGRATE_REPORT_NS per event (before the next line of that event that
 * is let through, from gw_lograte_flush() once the interval passed, and
 * at the end). Thread-safe. Times are the caller's CLOCK_MONOTONIC ns, so
 * that a test decides nothing by the clock.
 */
#ifndef GW_LOGRATE_H
#define GW_LOGRATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define GW_LOGRATE_BURST 20
#define GW_LOGRATE_PERIOD_NS 1000000000ull	/* one more line a second after the burst */
#define GW_LOGRATE_REPORT_NS 10000000000ull	/* a log_suppressed line per event at most every 10 s */
#define GW_LOGRATE_EVENTS 8			/* event names kept (more share the last slot) */

struct gw_lograte_event {
	const char *event;		/* NULL: free; a string that outlives the limiter */
	uint64_t tat_ns;		/* when the bucket is full again (GCRA's theoretical arrival time) */
	uint64_t dropped;		/* lines not written since the last report */
	uint64_t first_drop_ns;		/* of those, the first */
};

struct gw_lograte {
	pthread_mutex_t lock;		/* guards ev[] */
	struct gw_lograte_event ev[GW_LOGRATE_EVENTS];
};

void gw_lograte_init(struct gw_lograte *r);
void gw_lograte_destroy(struct gw_lograte *r);	/* reports what is still counted */

/*
 * Whether a line of @event may be written at @now_ns. A count of dropped
 * lines due for a report is logged first (WARN, subsystem "mig").
 */
bool gw_lograte_allow(struct gw_lograte *r, const char *event, uint64_t now_ns);

/*
 * Log the counts whose interval passed by @now_ns (@all: every count).
 * Returns when the next one is due (0: none counted).
 */
uint64_t gw_lograte_flush(struct gw_lograte *r, uint64_t now_ns, bool all);

#endif
