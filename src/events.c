/* SPDX-License-Identifier: MIT */
/*
 * Events for whoever embeds the engine (session.h, gw_session_set_event_fn):
 * status changes and round starts, delivered as they happen from the
 * thread that caused them, never under s->lock, so that the callback may
 * read the statistics. Only the migration thread emits while a migration
 * runs (and gw_session_resolve's caller after it ended): events of one
 * session never overlap and arrive in order.
 */
#include <errno.h>
#include "session_int.h"

int gw_session_set_event_fn(struct gw_session *s, gw_event_fn fn, void *opaque)
{
	int ret = 0;

	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->running) {
		ret = -EBUSY;
	} else {
		s->ev_fn = fn;
		s->ev_opaque = opaque;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static void emit(struct gw_session *s, struct gw_event *ev)
{
	gw_event_fn fn;
	void *opaque;

	pthread_mutex_lock(&s->lock);
	fn = s->ev_fn;
	opaque = s->ev_opaque;
	ev->status = s->status;
	pthread_mutex_unlock(&s->lock);
	if (!fn)
		return;
	ev->role = s->role;
	ev->mono_ns = gw_now_ns();
	fn(opaque, ev);
}

void gw_emit_status(struct gw_session *s)
{
	struct gw_event ev = { .type = GW_EVENT_STATUS, .round = gw_round(s) };
	enum gw_status now;

	pthread_mutex_lock(&s->lock);
	now = s->status;
	if (now == s->ev_status) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->ev_status = now;
	pthread_mutex_unlock(&s->lock);
	emit(s, &ev);
}

void gw_emit_round(struct gw_session *s, uint32_t round, uint64_t dirty_pages, bool final)
{
	struct gw_event ev = { .type = GW_EVENT_ROUND, .round = round, .dirty_pages = dirty_pages,
			       .final = final };

	emit(s, &ev);
}
