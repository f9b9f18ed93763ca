/* SPDX-License-Identifier: MIT */
/*
 * godwit run: one watcher thread per migration waits for its end.
 *
 * Source: on completion the VM is marked postmigrate (it must never run
 * again here); on failure or cancel it keeps running and the process keeps
 * serving: losing the VM because a migration failed is the one thing a
 * source must never do.
 * Destination: on completion the VM runs here; on failure the process says
 * why on stderr and exits 1 (unless asked to stay: exit-on-error off);
 * stopped before any source arrived, it says "no migration received" and
 * the process exits 0.
 *
 * Either way the end is announced (run_events.c) only once settled.
 *
 * Threads: see run.h.
 */
#include "run/run.h"
#include "run/run_events.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void run_request_quit(void)
{
	kill(getpid(), SIGUSR1);
}

const char *run_vm_status(const struct run_state *rs)
{
	return vmm_state_name(rs->be->state(rs->vm));
}

/* What a migration's end means here, logged or said. */
static void report_end(struct run_state *rs, enum gw_role role, int ret,
		       const struct gw_stats *st)
{
	if (role == GW_ROLE_SOURCE) {
		if (ret == 0 && st && st->verify == GW_VERIFY_MISMATCH) {
			/* The destination runs a VM whose RAM differs: keep ours, paused, for the operator. */
			gw_log(GW_LOG_ERROR, "cli", "migration_verify_mismatch",
			       "vm=%s action=\"stop the destination, then: godwit migrate --resolve source\"",
			       run_vm_status(rs));
			fprintf(stderr, "godwit: VERIFY MISMATCH: the destination's RAM differs from this source's; "
				"this VM stays paused here. Stop the destination, then run "
				"'godwit migrate --api ... --resolve source' to resume it here.\n");
		} else if (ret == 0) {
			rs->be->set_postmigrate(rs->vm);
			gw_log(GW_LOG_INFO, "cli", "migration_completed", "vm=postmigrate");
		} else {
			gw_log(GW_LOG_ERROR, "cli", "migration_failed", "status=%s err=%d reason=\"%s\" vm=%s",
			       st ? gw_status_name(st->status) : "?", ret, st ? st->error : "",
			       run_vm_status(rs));
		}
	} else if (ret == 0) {
		gw_log(GW_LOG_INFO, "cli", "incoming_completed", "vm=%s", run_vm_status(rs));
	} else if (st && st->status == GW_STATUS_CANCELLED) {
		/* Stopped (quit, SIGTERM) before any source arrived: nothing failed (logged as mig incoming_stopped). */
		fprintf(stderr, "godwit: no migration received\n");
	} else {
		fprintf(stderr, "godwit: incoming migration failed: %s%s%s (the VM did not resume here%s)\n",
			st && st->error[0] ? st->error : strerror(ret < 0 ? -ret : EIO),
			st && st->error_phase[0] ? " in phase " : "",
			st && st->error_phase[0] ? st->error_phase : "",
			rs->exit_on_error ? "" : "; exit-on-error is off: this process stays, restart it "
			"for another incoming migration");
	}
}

/* The end, announced once settled: "completed" finds the source postmigrate. */
static void announce_end(struct run_state *rs, enum gw_role role, const struct gw_stats *st)
{
	struct run_event ev = {
		.type = RUN_EV_STATUS, .role = role, .status = st ? st->status : GW_STATUS_FAILED,
		.round = st ? st->rounds : 0, .vm_status = run_vm_status(rs),
		.error = st ? st->error : "",
	};
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ev.mono_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (st)
		run_event_fill_stats(&ev, st);
	run_events_emit(rs->events, &ev);
}

static void *watcher_thread(void *arg)
{
	struct run_state *rs = arg;
	struct gw_session *s;
	enum gw_role role;
	struct gw_stats *st;
	int ret;

	gw_log_set_side(rs->dest ? "dst" : "src");
	pthread_mutex_lock(&rs->lock);
	s = rs->sess;
	role = rs->sess_role;
	pthread_mutex_unlock(&rs->lock);

	ret = gw_session_wait(s);
	st = calloc(1, sizeof(*st));
	if (st) {
		st->size = sizeof(*st);
		gw_session_stats(s, st);
	}
	report_end(rs, role, ret, st);

	pthread_mutex_lock(&rs->lock);
	__atomic_store_n(&rs->migrating, false, __ATOMIC_RELEASE);
	if (role == GW_ROLE_DEST && ret && !(st && st->status == GW_STATUS_CANCELLED)) {
		if (rs->exit_on_error) {
			rs->exit_code = CLI_EXIT_FAIL;
			run_request_quit();
		}
	} else if (rs->opts->exit_after_migrate && !(st && st->verify == GW_VERIFY_MISMATCH)) {
		rs->exit_code = ret ? CLI_EXIT_FAIL : CLI_EXIT_OK;
		run_request_quit();
	}
	pthread_mutex_unlock(&rs->lock);
	announce_end(rs, role, st);
	free(st);
	return NULL;
}

int run_watcher_start(struct run_state *rs)
{
	int ret = pthread_create(&rs->watcher, NULL, watcher_thread, rs);

	if (ret)
		return -ret;
	(void)pthread_setname_np(rs->watcher, "gw-watch");
	rs->watcher_started = true;
	return 0;
}

void run_watcher_join(struct run_state *rs)
{
	if (rs->watcher_started) {
		pthread_join(rs->watcher, NULL);
		rs->watcher_started = false;
	}
}
