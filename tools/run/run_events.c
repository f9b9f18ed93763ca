/* SPDX-License-Identifier: MIT */
/* The event hub of godwit run (see run_events.h). */
#include "run/run_events.h"
#include "common/api.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct sink {
	run_sink_fn fn;
	void *opaque;
	void (*release)(void *opaque);
	struct sink *next;
};

struct run_events {
	pthread_mutex_t lock;		/* guards the list and orders the events */
	struct sink *sinks;
};

struct run_events *run_events_new(void)
{
	struct run_events *h = calloc(1, sizeof(*h));

	if (h)
		pthread_mutex_init(&h->lock, NULL);
	return h;
}

void run_events_free(struct run_events *h)
{
	if (!h)
		return;
	while (h->sinks) {
		struct sink *k = h->sinks;

		h->sinks = k->next;
		if (k->release)
			k->release(k->opaque);
		free(k);
	}
	pthread_mutex_destroy(&h->lock);
	free(h);
}

int run_events_add(struct run_events *h, run_sink_fn fn, void *opaque, void (*release)(void *))
{
	struct sink *k = calloc(1, sizeof(*k)), **tail;

	if (!k)
		return -ENOMEM;
	k->fn = fn;
	k->opaque = opaque;
	k->release = release;
	pthread_mutex_lock(&h->lock);
	for (tail = &h->sinks; *tail; tail = &(*tail)->next)
		;
	*tail = k;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void run_events_remove(struct run_events *h, void *opaque)
{
	struct sink **p, *gone = NULL;

	pthread_mutex_lock(&h->lock);
	for (p = &h->sinks; *p; p = &(*p)->next) {
		if ((*p)->opaque == opaque) {
			gone = *p;
			*p = gone->next;
			break;
		}
	}
	pthread_mutex_unlock(&h->lock);
	if (gone && gone->release)
		gone->release(gone->opaque);
	free(gone);
}

void run_events_emit(struct run_events *h, const struct run_event *ev)
{
	struct sink **p, *gone = NULL;

	pthread_mutex_lock(&h->lock);
	for (p = &h->sinks; *p;) {
		struct sink *k = *p;

		if (k->fn(k->opaque, ev)) {
			p = &k->next;
			continue;
		}
		*p = k->next;
		k->next = gone;
		gone = k;
	}
	pthread_mutex_unlock(&h->lock);
	while (gone) {
		struct sink *k = gone;

		gone = k->next;
		if (k->release)
			k->release(k->opaque);
		free(k);
	}
}

static const char *type_name(enum run_event_type t)
{
	switch (t) {
	case RUN_EV_STATUS: return "status";
	case RUN_EV_ROUND: return "round";
	case RUN_EV_VM: return "vm";
	}
	return "?";
}

void run_event_fill_stats(struct run_event *ev, const struct gw_stats *st)
{
	ev->transferred_bytes = st->transferred_bytes;
	ev->remaining_bytes = st->remaining_bytes;
	ev->total_bytes = st->ram_total_bytes;
	ev->expected_downtime_ms = (double)(st->expected_downtime_ns / 1000) / 1000.0;
	ev->expected_downtime_known = !st->expected_downtime_unknown;
	snprintf(ev->escalate_step, sizeof(ev->escalate_step), "%s", st->escalate_step);
	ev->escalate_limit_ms = (double)(st->escalate_limit_ns / 1000) / 1000.0;
}

json_t *run_event_json(const struct run_event *ev)
{
	json_t *o = json_object();
	int r = 0;

	if (!o)
		return NULL;
	r |= js_set_str(o, "event", type_name(ev->type));
	r |= js_set_real(o, "time", (double)(ev->mono_ns / 1000) / 1e6);
	if (ev->type != RUN_EV_VM)
		r |= js_set_str(o, "role", ev->role == GW_ROLE_DEST ? "destination" : "source");
	r |= js_set_str(o, "status", gw_status_name(ev->status));
	if (ev->type == RUN_EV_ROUND) {
		r |= js_set_int(o, "round", ev->round);
		r |= js_set_int(o, "dirty-pages", (long long)ev->dirty_pages);
		r |= js_set_bool(o, "final", ev->final);
	}
	r |= js_set_str(o, "vm-status", ev->vm_status ? ev->vm_status : "?");
	if (ev->type != RUN_EV_VM) {
		r |= js_set_int(o, "transferred", (long long)ev->transferred_bytes);
		r |= js_set_int(o, "remaining", (long long)ev->remaining_bytes);
		r |= js_set_int(o, "total", (long long)ev->total_bytes);
		r |= js_set_real(o, "expected-downtime", ev->expected_downtime_ms);
		r |= js_set_bool(o, "expected-downtime-known", ev->expected_downtime_known);
		if (ev->escalate_step[0]) {	/* a source past its first round */
			r |= js_set_str(o, "escalate-step", ev->escalate_step);
			r |= js_set_real(o, "downtime-limit", ev->escalate_limit_ms);
		}
	}
	if (ev->error && ev->error[0])
		r |= js_set_str(o, "error-desc", ev->error);
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

struct stream {
	int fd;
};

static bool stream_sink(void *opaque, const struct run_event *ev)
{
	struct stream *st = opaque;
	json_t *o = run_event_json(ev);
	int ret = o ? api_send_json_nowait(st->fd, o) : -ENOMEM;

	json_decref(o);
	return ret == 0;
}

static void stream_release(void *opaque)
{
	struct stream *st = opaque;

	close(st->fd);
	free(st);
}

int run_events_add_stream(struct run_events *h, int fd)
{
	struct stream *st = malloc(sizeof(*st));
	int ret;

	if (!st)
		return -ENOMEM;
	st->fd = fd;
	ret = run_events_add(h, stream_sink, st, stream_release);
	if (ret)
		free(st);
	return ret;
}
