/* SPDX-License-Identifier: MIT */
/*
 * The end of a migration, on either side: the last figures, the final log
 * line, the terminal status, and the wake-up of everyone who waits for it.
 * One function so that both sides end in the same order: what a waiter or
 * an observer is told (running false, status) comes after every figure
 * and line it may read, and the status is set once, under s->lock.
 */
#include <stdio.h>
#include "core/session_int.h"

void gw_end_publish(struct gw_session *s, const struct gw_end *e)
{
	struct gw_stats st = { .size = sizeof(st) };
	char fields[768] = "";

	if (e->stats_locked) {
		pthread_mutex_lock(&s->lock);
		e->stats_locked(s);
		pthread_mutex_unlock(&s->lock);
	}
	gw_session_stats(s, &st);
	gw_log_pipeline(s);
	if (e->status == GW_STATUS_COMPLETED) {
		if (e->done_fields)
			e->done_fields(&st, fields, sizeof(fields));
		gw_log(GW_LOG_INFO, "mig", "mig_done", "status=completed total_ms=%.3f%s",
		       st.total_time_ns / 1e6, fields);
		if (e->after_done)
			e->after_done(&st);
	} else if (e->status != GW_STATUS_UNKNOWN && !e->quiet) {
		/* Unknown said so already (outcome_unknown): the VM is neither failed nor here. */
		gw_log(GW_LOG_ERROR, "mig", "mig_failed", "status=%s phase=%s reason=\"%s\" vm=%s",
		       gw_status_name(e->status), st.error_phase, st.error, e->vm);
	}
	pthread_mutex_lock(&s->lock);
	s->status = e->status;
	s->stats.status = e->status;
	s->running = false;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
}
