/* SPDX-License-Identifier: MIT */
/*
 * Events of a running godwit VM, fanned out to whoever listens: API
 * streams (`godwit events`, docs/api.md) and the QMP socket (MIGRATION,
 * MIGRATION_PASS, STOP, RESUME; docs/qmp.md).
 *
 * Sources: the engine's callback (gw_session_set_event_fn) on its
 * migration thread; the watcher, which announces a migration's end only
 * once it settled it (the source VM marked postmigrate, or kept); QMP stop
 * and cont. Sinks are called one event at a time under the hub's mutex, in
 * the order events were emitted; a sink must not block (sockets are
 * written without waiting; a reader that does not keep up is dropped).
 */
#ifndef GW_CLI_RUN_EVENTS_H
#define GW_CLI_RUN_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <godwit/godwit.h>
#include "common/json.h"

enum run_event_type {
	RUN_EV_STATUS = 1,		/* a migration's status changed */
	RUN_EV_ROUND,			/* a round starts */
	RUN_EV_VM,			/* the VM was paused or resumed on request */
};

struct run_event {
	enum run_event_type type;
	enum gw_role role;		/* STATUS, ROUND: of the session */
	enum gw_status status;		/* the migration's status */
	uint32_t round;			/* ROUND: 0 = first pass; STATUS: current */
	uint64_t dirty_pages;		/* ROUND: pages it sends */
	bool final;			/* ROUND: the final one, VM paused */
	const char *vm_status;		/* the VM's state now ("running", ...) */
	uint64_t transferred_bytes;	/* the statistics when it happened */
	uint64_t remaining_bytes;
	uint64_t total_bytes;
	double expected_downtime_ms;
	bool expected_downtime_known;	/* false: no rate yet, expected_downtime_ms is 0 */
	char escalate_step[16];		/* source: escalation's last step ("none" while off), "" none */
	double escalate_limit_ms;	/* source: the downtime limit in force */
	const char *error;		/* STATUS failed/cancelled: the reason, else "" */
	uint64_t mono_ns;		/* CLOCK_MONOTONIC */
};

/* The figures of @ev taken from the statistics @st (transferred, expected downtime, escalation). */
void run_event_fill_stats(struct run_event *ev, const struct gw_stats *st);

/* False: remove this sink (then @release(opaque) is called). */
typedef bool (*run_sink_fn)(void *opaque, const struct run_event *ev);

struct run_events;

struct run_events *run_events_new(void);
/* Releases every sink. NULL is fine. */
void run_events_free(struct run_events *h);
/* Add a sink; @release (may be NULL) when it is removed or the hub freed. 0 or -ENOMEM. */
int run_events_add(struct run_events *h, run_sink_fn fn, void *opaque, void (*release)(void *));
/* Remove the sink with @opaque, if any (its release is called). */
void run_events_remove(struct run_events *h, void *opaque);
/* To every sink, in order. */
void run_events_emit(struct run_events *h, const struct run_event *ev);

/* An event as one godwit JSON line object ({"event":"status",...}). NULL: no memory. */
json_t *run_event_json(const struct run_event *ev);

#define RUN_EVENTS_STREAMS_MAX 32	/* API event streams at once: each holds a descriptor */

/*
 * API stream sink: @fd (a kept API connection, shut for reading) gets
 * run_event_json lines until it cannot take one more without waiting, or
 * until its client hangs up (a thread of the hub watches for that); then
 * it is closed. 0, -ENOSPC (RUN_EVENTS_STREAMS_MAX already), -ENOMEM; on
 * error @fd is the caller's still.
 */
int run_events_add_stream(struct run_events *h, int fd);
/* Room for one more stream (only the API thread adds them, so it stays true until it does). */
bool run_events_stream_room(struct run_events *h);

#endif
