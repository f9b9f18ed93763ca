/* SPDX-License-Identifier: MIT */
/*
 * Events for whoever embeds the engine (session.h, gw_session_set_event_fn):
 * status changes and round starts, delivered as they happen from the
 * thread that caused them, never under s->lock, so that the callback may
 * read the statistics. Only the migration thread emits while a migration
 * runs (and gw_session_resolve's caller after it ended): events of one
 * session never overlap and arrive in order.
 *
 * Inside the downtime they are held (gw_events_hold, from the pause on
 * the source and from STATE on the destination, to the resume or the
 * failure): a callback wakes the embedder's threads and its clients (an
 * API stream, the CLI printing progress), and on a host with few cores
 * they ran while vCPUs with their pause kick pending waited for a CPU
 * (perf sched, 0.5-0.6 ms of the pause). Held events keep the time they
 * happened (mono_ns) and their order; gw_events_release delivers them.
 * ev_held and the queue belong to the migration thread, like emitting.
 */
#include <errno.h>
#include "core/session_int.h"

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

static void deliver(struct gw_session *s, const struct gw_event *ev)
{
	gw_event_fn fn;
	void *opaque;

	pthread_mutex_lock(&s->lock);
	fn = s->ev_fn;
	opaque = s->ev_opaque;
	pthread_mutex_unlock(&s->lock);
	if (fn)
		fn(opaque, ev);
}

static void emit(struct gw_session *s, struct gw_event *ev)
{
	pthread_mutex_lock(&s->lock);
	ev->status = s->status;
	pthread_mutex_unlock(&s->lock);
	ev->role = s->role;
	ev->mono_ns = gw_now_ns();
	if (!s->ev_held) {
		deliver(s, ev);
		return;
	}
	if (s->ev_nr_held == GW_EVENTS_HELD_MAX)
		gw_events_release(s);	/* never lost: late is better (more than a downtime holds) */
	s->ev_queue[s->ev_nr_held++] = *ev;
	s->ev_held = true;
}

void gw_events_hold(struct gw_session *s)
{
	s->ev_held = true;
}

void gw_events_release(struct gw_session *s)
{
	unsigned n = s->ev_nr_held;

	s->ev_held = false;
	s->ev_nr_held = 0;
	for (unsigned i = 0; i < n; i++)
		deliver(s, &s->ev_queue[i]);
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
