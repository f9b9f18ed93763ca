/* SPDX-License-Identifier: MIT */
/* The event hub of godwit run (see run_events.h). */
#include "run/run_events.h"
#include "common/api.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct sink {
	run_sink_fn fn;
	void *opaque;
	void (*release)(void *opaque);
	int hup_fd;			/* -1, or a socket whose hang-up removes the sink */
	uint64_t id;			/* unique in the hub: the watcher names sinks by it */
	struct sink *next;
};

struct run_events {
	pthread_mutex_t lock;		/* guards the list, the counts and stop; orders the events */
	struct sink *sinks;
	unsigned nr_streams;		/* sinks with a hup_fd */
	uint64_t next_id;
	bool stop;			/* the watcher ends */
	int wake[2];			/* [1] written when the watched set changes (non-blocking) */
	pthread_t watcher;		/* polls every hup_fd: a stream whose client left goes at once */
};

static void *watcher_main(void *arg);

static void wake_watcher(struct run_events *h)
{
	while (write(h->wake[1], "x", 1) < 0 && errno == EINTR)
		;	/* EAGAIN: a wake-up is pending already */
}

struct run_events *run_events_new(void)
{
	struct run_events *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK))
		goto fail;
	if (pthread_create(&h->watcher, NULL, watcher_main, h)) {
		close(h->wake[0]);
		close(h->wake[1]);
		goto fail;
	}
	(void)pthread_setname_np(h->watcher, "gw-events");
	return h;
fail:
	pthread_mutex_destroy(&h->lock);
	free(h);
	return NULL;
}

static void release_list(struct sink *k)
{
	while (k) {
		struct sink *next = k->next;

		if (k->release)
			k->release(k->opaque);
		free(k);
		k = next;
	}
}

void run_events_free(struct run_events *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_mutex_unlock(&h->lock);
	wake_watcher(h);
	pthread_join(h->watcher, NULL);
	release_list(h->sinks);
	close(h->wake[0]);
	close(h->wake[1]);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static int add_sink(struct run_events *h, run_sink_fn fn, void *opaque, void (*release)(void *), int hup_fd)
{
	struct sink *k = calloc(1, sizeof(*k)), **tail;
	int ret = 0;

	if (!k)
		return -ENOMEM;
	k->fn = fn;
	k->opaque = opaque;
	k->release = release;
	k->hup_fd = hup_fd;
	pthread_mutex_lock(&h->lock);
	if (hup_fd >= 0 && h->nr_streams >= RUN_EVENTS_STREAMS_MAX) {
		ret = -ENOSPC;
	} else {
		k->id = ++h->next_id;
		h->nr_streams += hup_fd >= 0;
		for (tail = &h->sinks; *tail; tail = &(*tail)->next)
			;
		*tail = k;
	}
	pthread_mutex_unlock(&h->lock);
	if (ret)
		free(k);
	else if (hup_fd >= 0)
		wake_watcher(h);
	return ret;
}

int run_events_add(struct run_events *h, run_sink_fn fn, void *opaque, void (*release)(void *))
{
	return add_sink(h, fn, opaque, release, -1);
}

/* Caller holds h->lock. Unlink @k (at *@p). */
static void unlink_locked(struct run_events *h, struct sink **p, struct sink *k)
{
	*p = k->next;
	k->next = NULL;
	h->nr_streams -= k->hup_fd >= 0;
}

/* The sink @id, if still there and still on @fd: removed and released. */
static void remove_id(struct run_events *h, uint64_t id, int fd)
{
	struct sink **p, *gone = NULL;

	pthread_mutex_lock(&h->lock);
	for (p = &h->sinks; *p; p = &(*p)->next) {
		if ((*p)->id == id && (*p)->hup_fd == fd) {
			gone = *p;
			unlink_locked(h, p, gone);
			break;
		}
	}
	pthread_mutex_unlock(&h->lock);
	release_list(gone);
}

/*
 * Every stream's socket, polled for its client's hang-up only (the
 * server's side is shut for reading, so nothing else wakes it): a client
 * that closed is dropped now, not at the next event, which on an idle VM
 * may never come. Sinks are named by id, so a socket number reused after a
 * sink went never drops another.
 */
static void *watcher_main(void *arg)
{
	struct run_events *h = arg;

	for (;;) {
		struct pollfd pfd[1 + RUN_EVENTS_STREAMS_MAX];
		uint64_t ids[1 + RUN_EVENTS_STREAMS_MAX];
		nfds_t n = 1;
		char buf[64];

		pfd[0] = (struct pollfd){ .fd = h->wake[0], .events = POLLIN };
		pthread_mutex_lock(&h->lock);
		if (h->stop) {
			pthread_mutex_unlock(&h->lock);
			break;
		}
		for (struct sink *k = h->sinks; k && n < 1 + RUN_EVENTS_STREAMS_MAX; k = k->next) {
			if (k->hup_fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = k->hup_fd, .events = 0 };	/* POLLHUP, POLLERR */
			ids[n++] = k->id;
		}
		pthread_mutex_unlock(&h->lock);
		if (poll(pfd, n, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			while (read(h->wake[0], buf, sizeof(buf)) > 0)
				;
		for (nfds_t i = 1; i < n; i++)
			if (pfd[i].revents)
				remove_id(h, ids[i], pfd[i].fd);
	}
	return NULL;
}

void run_events_remove(struct run_events *h, void *opaque)
{
	struct sink **p, *gone = NULL;

	pthread_mutex_lock(&h->lock);
	for (p = &h->sinks; *p; p = &(*p)->next) {
		if ((*p)->opaque == opaque) {
			gone = *p;
			unlink_locked(h, p, gone);
			break;
		}
	}
	pthread_mutex_unlock(&h->lock);
	release_list(gone);
}

void run_events_emit(struct run_events *h, const struct run_event *ev)
{
	struct sink **p, *gone = NULL;
	bool watched = false;

	pthread_mutex_lock(&h->lock);
	for (p = &h->sinks; *p;) {
		struct sink *k = *p;

		if (k->fn(k->opaque, ev)) {
			p = &k->next;
			continue;
		}
		unlink_locked(h, p, k);
		watched |= k->hup_fd >= 0;
		k->next = gone;
		gone = k;
	}
	pthread_mutex_unlock(&h->lock);
	release_list(gone);
	if (watched)
		wake_watcher(h);	/* its socket is closed: out of the poll set */
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
	ret = add_sink(h, stream_sink, st, stream_release, fd);
	if (ret)
		free(st);
	return ret;
}

bool run_events_stream_room(struct run_events *h)
{
	bool room;

	pthread_mutex_lock(&h->lock);
	room = h->nr_streams < RUN_EVENTS_STREAMS_MAX;
	pthread_mutex_unlock(&h->lock);
	return room;
}
