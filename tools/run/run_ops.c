/* SPDX-License-Identifier: MIT */
/*
 * godwit run: what can be asked of the VM, whichever socket asks (the
 * godwit API, run_api.c; QMP, qmp_cmds.c). Each operation takes rs->lock
 * for the session fields and answers 0, or -errno with a reason for a
 * human.
 *
 * Threads: see run.h. The engine's event callback (engine_event) runs on
 * the migration thread and never takes rs->lock: the API thread holds it
 * while it starts or, on a failure, waits for a migration thread.
 */
#include "run/run.h"
#include "run/run_events.h"
#include "common/cli_parse.h"
#include "run/stats_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static int refuse(char *err, size_t err_len, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(char *err, size_t err_len, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
	return code;
}

static bool terminal(enum gw_status st)
{
	return st == GW_STATUS_COMPLETED || st == GW_STATUS_FAILED || st == GW_STATUS_CANCELLED ||
	       st == GW_STATUS_UNKNOWN;
}

/* A run_event with the statistics of @s now. */
static void event_fill(struct run_state *rs, struct gw_session *s, struct run_event *ev)
{
	struct gw_stats *st = malloc(sizeof(*st));

	ev->vm_status = run_vm_status(rs);
	ev->error = "";
	if (!st)
		return;
	st->size = sizeof(*st);
	gw_session_stats(s, st);
	run_event_fill_stats(ev, st);
	free(st);
}

/*
 * The engine's events. A migration's end is held back: the watcher
 * announces it once it settled it (run_watch.c), so that whoever hears
 * "completed" finds the source postmigrate.
 */
static void engine_event(void *opaque, const struct gw_event *ge)
{
	struct run_state *rs = opaque;
	struct run_event ev = {
		.type = ge->type == GW_EVENT_ROUND ? RUN_EV_ROUND : RUN_EV_STATUS,
		.role = ge->role, .status = ge->status, .round = ge->round,
		.dirty_pages = ge->dirty_pages, .final = ge->final, .mono_ns = ge->mono_ns,
	};
	struct gw_session *s;

	if (ev.type == RUN_EV_STATUS && terminal(ev.status) &&
	    __atomic_load_n(&rs->migrating, __ATOMIC_ACQUIRE))
		return;
	/* The session of the event is current: it is replaced only once its watcher settled it. */
	s = __atomic_load_n(&rs->sess, __ATOMIC_ACQUIRE);
	if (s)
		event_fill(rs, s, &ev);
	run_events_emit(rs->events, &ev);
}

int run_session_prepare(struct run_state *rs, struct gw_session *s, const struct cli_params *ps,
			char *err, size_t err_len)
{
	int ret;

	char why[RUN_ERR_MAX];

	ret = cli_params_apply(ps, s, why, sizeof(why));
	if (ret)
		return refuse(err, err_len, ret, "%s", why);
	ret = gw_session_set_event_fn(s, engine_event, rs);
	return ret ? refuse(err, err_len, ret, "events: %s", strerror(-ret)) : 0;
}

/* The current session's role name; a destination waiting for "incoming" has none yet. */
static const char *role_name(const struct run_state *rs)
{
	if (rs->sess)
		return rs->sess_role == GW_ROLE_DEST ? "destination" : "source";
	return rs->dest ? "destination" : "source";
}

/* Caller holds rs->lock. "ok", "failed: ...", or "n/a". */
static void verify_check_text(struct run_state *rs, char *buf, size_t len)
{
	char msg[RUN_CHECK_MSG_MAX];
	int r;

	if (rs->check[0]) {
		snprintf(buf, len, "%s", rs->check);
		return;
	}
	msg[0] = '\0';
	r = rs->be->post_migration_check(rs->vm, msg, sizeof(msg));
	if (r > 0)
		snprintf(buf, len, "ok");
	else if (r < 0)
		snprintf(buf, len, "failed: %s", msg[0] ? msg : "mismatch");
	else
		snprintf(buf, len, "n/a");
}

/*
 * Bytes of the VM's RAM files (memfd, shmem) that hold memory: what a
 * destination committed as pages arrived, which no RSS shows until mapped
 * and touched. Each file counted once (blocks may share one).
 */
static long long ram_shmem_bytes(const struct gw_vm_info *vi)
{
	long long bytes = 0;
	struct stat sb;

	for (unsigned i = 0; vi && i < vi->nr_blocks; i++) {
		bool seen = false;

		for (unsigned j = 0; j < i; j++)
			seen |= vi->blocks[j].fd == vi->blocks[i].fd;
		if (vi->blocks[i].fd >= 0 && !seen && !fstat(vi->blocks[i].fd, &sb))
			bytes += (long long)sb.st_blocks * 512;
	}
	return bytes;
}

json_t *run_status(struct run_state *rs)
{
	struct gw_stats *st = calloc(1, sizeof(*st));
	char vc[RUN_CHECK_MSG_MAX + 16];
	char wl[VMM_WORKLOAD_SPEC_MAX];
	json_t *o = NULL;
	int r = 0;

	if (!st)
		return NULL;
	st->size = sizeof(*st);
	pthread_mutex_lock(&rs->lock);
	if (rs->sess)
		gw_session_stats(rs->sess, st);
	else
		st->status = GW_STATUS_NONE;
	o = stats_json(rs->sess, st);
	if (!o)
		goto out;
	verify_check_text(rs, vc, sizeof(vc));
	rs->be->workload(rs->vm, wl, sizeof(wl));
	r |= js_set_str(o, "role", role_name(rs));
	r |= js_set_str(o, "vm-status", run_vm_status(rs));
	r |= js_set_str(o, "accel", rs->be->name);	/* the --accel backend running the VM */
	r |= js_set_str(o, "workload", wl);
	r |= js_set_int(o, "guest-progress-count", (long long)rs->be->progress(rs->vm));
	r |= js_set_int(o, "ram-shmem-bytes", ram_shmem_bytes(rs->vm ? rs->be->info(rs->vm) : NULL));
	r |= js_set_str(o, "verify-check", vc);
	if (rs->dest)
		r |= js_set_str(o, "incoming-url", rs->sess && rs->sess_role == GW_ROLE_DEST ?
				gw_incoming_url(rs->sess) : "");
	/* The watcher has done what the end means here (postmigrate, or kept). */
	r |= js_set_bool(o, "settled", !rs->migrating);
	if (r) {
		json_decref(o);
		o = NULL;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	free(st);
	return o;
}

/* Caller holds rs->lock. Why a new outgoing migration cannot start, or 0. */
static int migrate_refused(struct run_state *rs, char *err, size_t err_len)
{
	enum vmm_state vs;

	if (rs->migrating)
		return refuse(err, err_len, -EBUSY, "a migration is already running");
	if (rs->sess && rs->sess_role == GW_ROLE_SOURCE) {
		struct gw_stats *st = calloc(1, sizeof(*st));
		bool unknown, mismatch;

		if (!st)
			return refuse(err, err_len, -ENOMEM, "out of memory");
		st->size = sizeof(*st);
		gw_session_stats(rs->sess, st);
		unknown = st->status == GW_STATUS_UNKNOWN;
		mismatch = st->status == GW_STATUS_COMPLETED && st->verify == GW_VERIFY_MISMATCH &&
			   rs->be->state(rs->vm) == VMM_PAUSED;
		free(st);
		/* The destination may run this VM now: two copies must never run. */
		if (unknown)
			return refuse(err, err_len, -EPERM,
				      "the last migration's outcome is unknown (go sent, no answer): "
				      "ask the destination; this VM stays paused and cannot migrate");
		if (mismatch)
			return refuse(err, err_len, -EPERM,
				      "the last migration's RAM digests differ and the destination runs "
				      "the VM: resolve it first (godwit migrate --resolve source|destination)");
	}
	vs = rs->be->state(rs->vm);
	if (vs != VMM_RUNNING && vs != VMM_PAUSED)
		return refuse(err, err_len, -EINVAL, "the VM is %s: nothing to migrate",
			      vmm_state_name(vs));
	return 0;
}

/* What this host can give now: MemAvailable (/proc/meminfo), else its free RAM; bytes, 0 unknown. */
static uint64_t host_available_bytes(void)
{
	long pages = sysconf(_SC_AVPHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	if (kib)
		return (uint64_t)kib << 10;
	return pages > 0 && page_bytes > 0 ? (uint64_t)pages * (uint64_t)page_bytes : 0;
}

/*
 * A destination never commits more memory than it was given: a VM built
 * from --memory has its RAM already, and its VMM refuses any other layout
 * before anything is allocated, in --memory's words (the engine's cap would
 * speak of the KVM VMM's own block beside the guest's --memory); without
 * --memory, --max-memory, else what this host can give when it starts
 * listening (MemAvailable), never all of its RAM.
 */
int run_dest_memory_cap(struct run_state *rs, struct gw_session *s, char *err, size_t err_len)
{
	uint64_t cap;
	int ret;

	if (rs->opts->max_memory_given || rs->opts->memory_given)
		return 0;	/* --max-memory is in rs->base, applied with the other parameters */
	cap = host_available_bytes();
	ret = cap ? gw_session_set(s, GW_PARAM_MAX_MEMORY_BYTES, (int64_t)cap) : 0;
	return ret ? refuse(err, err_len, ret, "cannot set the memory cap: %s", strerror(-ret)) : 0;
}

int run_migrate(struct run_state *rs, const char *url, const struct cli_params *ps,
		char *err, size_t err_len)
{
	struct cli_params all;
	struct gw_session *s;
	char why[256];
	int ret;

	if (!url || !*url)
		return refuse(err, err_len, -EINVAL, "migrate needs a URL (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)");
	pthread_mutex_lock(&rs->lock);
	ret = migrate_refused(rs, err, err_len);
	if (ret)
		goto out;
	all = rs->base;
	for (unsigned i = 0; ps && i < ps->nr; i++)
		cli_params_put(&all, ps->v[i].p, ps->v[i].value);
	for (unsigned i = 0; ps && i < GW_SPARAM__COUNT; i++)
		if (ps->str_set[i])
			cli_params_put_str(&all, (enum gw_str_param)i, ps->str[i]);
	/* A session migrates once: a finished one (failed, or the incoming
	 * one of a VM that now runs here) is replaced by a fresh source. */
	run_watcher_join(rs);
	s = gw_session_new(GW_ROLE_SOURCE, rs->be->info(rs->vm), rs->be->engine_ops, rs->vm);
	if (!s) {
		ret = refuse(err, err_len, -errno, "cannot create a migration session: %s", strerror(errno));
		goto out;
	}
	ret = run_session_prepare(rs, s, &all, err, err_len);
	if (ret) {
		gw_session_free(s);
		goto out;
	}
	/* The devices report to the new session from now on, never to the one freed below. */
	rs->be->set_session(rs->vm, s);
	gw_session_free(rs->sess);
	__atomic_store_n(&rs->sess, s, __ATOMIC_RELEASE);
	rs->sess_role = GW_ROLE_SOURCE;
	/* Before the engine can end it: its end is the watcher's to announce. */
	__atomic_store_n(&rs->migrating, true, __ATOMIC_RELEASE);
	ret = gw_migrate_start(s, url);
	if (ret) {
		__atomic_store_n(&rs->migrating, false, __ATOMIC_RELEASE);
		gw_session_error(s, why, sizeof(why));
		ret = refuse(err, err_len, ret, "cannot start the migration to %s: %s", url,
			     why[0] ? why : strerror(-ret));
		goto out;
	}
	ret = run_watcher_start(rs);
	if (ret) {
		/* Without a watcher nobody would mark the end: give up now. */
		gw_session_cancel(s);
		gw_session_wait(s);
		__atomic_store_n(&rs->migrating, false, __ATOMIC_RELEASE);
		ret = refuse(err, err_len, ret, "cannot start the watcher thread: %s", strerror(-ret));
		goto out;
	}
	gw_log(GW_LOG_INFO, "cli", "migrate_requested", "url=%s", url);
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int run_cancel(struct run_state *rs, char *err, size_t err_len)
{
	int ret;

	pthread_mutex_lock(&rs->lock);
	if (!rs->migrating || !rs->sess) {
		ret = refuse(err, err_len, -ENOENT, "no migration is running");
	} else {
		ret = gw_session_cancel(rs->sess);
		if (ret)
			refuse(err, err_len, ret, "cannot cancel: %s (the handover may already be under way)",
			       strerror(-ret));
		else
			gw_log(GW_LOG_INFO, "cli", "cancel_requested", "role=%s", role_name(rs));
	}
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int run_set(struct run_state *rs, const struct cli_params *ps, bool *now, char *err, size_t err_len)
{
	unsigned i;
	int ret = 0;

	pthread_mutex_lock(&rs->lock);
	*now = rs->migrating && rs->sess_role == GW_ROLE_SOURCE;
	/* Check every pair first so that a refusal changes nothing. */
	for (i = 0; *now && i < GW_SPARAM__COUNT; i++) {
		if (ps->str_set[i]) {
			ret = refuse(err, err_len, -EBUSY,
				     "%s is a setup parameter: it cannot change while a migration runs",
				     gw_str_param_name((enum gw_str_param)i));
			goto out;
		}
	}
	for (i = 0; *now && i < ps->nr; i++) {
		if (!gw_param_info(ps->v[i].p)->live) {
			ret = refuse(err, err_len, -EBUSY,
				     "%s is a setup parameter: it cannot change while a migration runs",
				     gw_param_info(ps->v[i].p)->name);
			goto out;
		}
	}
	for (i = 0; i < ps->nr; i++) {
		if (*now) {
			ret = gw_session_set(rs->sess, ps->v[i].p, ps->v[i].value);
			if (ret) {
				refuse(err, err_len, ret, "%s=%" PRId64 ": %s", gw_param_info(ps->v[i].p)->name,
				       ps->v[i].value, strerror(-ret));
				goto out;
			}
		}
		cli_params_put(&rs->base, ps->v[i].p, ps->v[i].value);
		gw_log(GW_LOG_INFO, "cli", "param_set", "name=%s value=%" PRId64 " live=%d",
		       gw_param_info(ps->v[i].p)->name, ps->v[i].value, *now);
	}
	for (i = 0; i < GW_SPARAM__COUNT; i++) {
		if (ps->str_set[i]) {
			cli_params_put_str(&rs->base, (enum gw_str_param)i, ps->str[i]);
			gw_log(GW_LOG_INFO, "cli", "param_set", "name=%s value=%s live=0",
			       gw_str_param_name((enum gw_str_param)i), ps->str[i]);
		}
	}
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

void run_params_now(struct run_state *rs, int64_t values[GW_PARAM__COUNT])
{
	for (int p = 0; p < GW_PARAM__COUNT; p++)
		values[p] = gw_param_info((enum gw_param)p)->def;
	pthread_mutex_lock(&rs->lock);
	if (rs->migrating && rs->sess && rs->sess_role == GW_ROLE_SOURCE) {
		for (int p = 0; p < GW_PARAM__COUNT; p++)
			gw_session_get(rs->sess, (enum gw_param)p, &values[p]);
	} else {
		for (unsigned i = 0; i < rs->base.nr; i++)
			values[rs->base.v[i].p] = rs->base.v[i].value;
	}
	pthread_mutex_unlock(&rs->lock);
}

int run_incoming(struct run_state *rs, const char *url, bool exit_on_error,
		 char *err, size_t err_len)
{
	struct gw_session *s;
	int ret;

	if (!url || !*url)
		return refuse(err, err_len, -EINVAL, "incoming needs a URL (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)");
	pthread_mutex_lock(&rs->lock);
	if (!rs->dest) {
		ret = refuse(err, err_len, -EINVAL, "this VM was not started with --incoming: it is no destination");
		goto out;
	}
	if (!rs->defer || rs->sess) {
		ret = refuse(err, err_len, -EALREADY, "the incoming migration has already been started%s",
			     rs->sess ? "" : " (--incoming URL)");
		goto out;
	}
	s = gw_session_new(GW_ROLE_DEST, rs->be->info(rs->vm), rs->be->engine_ops, rs->vm);
	if (!s) {
		ret = refuse(err, err_len, -errno, "cannot create the destination session: %s",
			     strerror(errno));
		goto out;
	}
	ret = run_session_prepare(rs, s, &rs->base, err, err_len);
	if (!ret)
		ret = run_dest_memory_cap(rs, s, err, err_len);
	if (!ret) {
		ret = gw_incoming_start(s, url);
		if (ret)
			refuse(err, err_len, ret, "cannot listen on %s: %s", url, strerror(-ret));
	}
	if (ret) {
		gw_session_free(s);
		goto out;
	}
	__atomic_store_n(&rs->sess, s, __ATOMIC_RELEASE);
	rs->sess_role = GW_ROLE_DEST;
	rs->exit_on_error = exit_on_error;
	__atomic_store_n(&rs->migrating, true, __ATOMIC_RELEASE);
	ret = run_watcher_start(rs);
	if (ret) {
		__atomic_store_n(&rs->migrating, false, __ATOMIC_RELEASE);
		gw_session_cancel(s);
		gw_session_wait(s);
		refuse(err, err_len, ret, "cannot start the watcher thread: %s", strerror(-ret));
		goto out;
	}
	printf("incoming %s\n", gw_incoming_url(s));
	fflush(stdout);
	gw_log(GW_LOG_INFO, "cli", "incoming_requested", "url=%s exit_on_error=%d",
	       gw_incoming_url(s), exit_on_error);
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int run_start_postcopy(struct run_state *rs, char *err, size_t err_len)
{
	int ret = -EINVAL;

	pthread_mutex_lock(&rs->lock);
	if (rs->migrating && rs->sess && rs->sess_role == GW_ROLE_SOURCE)
		ret = gw_session_start_postcopy(rs->sess);
	pthread_mutex_unlock(&rs->lock);
	if (ret == -EINVAL)
		return refuse(err, err_len, ret, "no outgoing migration with postcopy allowed runs "
			      "(migrate with --postcopy, or postcopy=1)");
	if (ret == -EALREADY)
		return refuse(err, err_len, ret, "postcopy already requested or under way");
	if (ret)
		return refuse(err, err_len, ret, "start-postcopy: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "cli", "start_postcopy_requested", "from=request");
	return 0;
}

int run_migrate_blocked(struct run_state *rs, char *err, size_t err_len)
{
	int ret;

	pthread_mutex_lock(&rs->lock);
	ret = rs->dest || rs->migrating ? 0 : migrate_refused(rs, err, err_len);
	pthread_mutex_unlock(&rs->lock);
	return ret == -EPERM ? ret : 0;
}

int run_continue(struct run_state *rs, char *err, size_t err_len)
{
	int ret = -EINVAL;

	pthread_mutex_lock(&rs->lock);
	if (rs->migrating && rs->sess && rs->sess_role == GW_ROLE_SOURCE)
		ret = gw_session_continue(rs->sess);
	pthread_mutex_unlock(&rs->lock);
	if (ret)
		return refuse(err, err_len, ret, "Migration not in expected state: no outgoing migration "
			      "waits at pre-switchover (capability pause-before-switchover)");
	gw_log(GW_LOG_INFO, "cli", "continue_requested", "state=pre-switchover");
	return 0;
}

int run_postcopy_reconnect(struct run_state *rs, bool recover, const char *url, char *bound,
			   size_t bound_len, char *err, size_t err_len)
{
	int ret = -EINVAL;

	if (!url || !*url)
		return refuse(err, err_len, -EINVAL, "%s needs a URL (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)",
			      recover ? "recover" : "resume");
	pthread_mutex_lock(&rs->lock);
	if (rs->migrating && rs->sess && rs->sess_role == (recover ? GW_ROLE_DEST : GW_ROLE_SOURCE))
		ret = recover ? gw_postcopy_recover(rs->sess, url) : gw_postcopy_resume(rs->sess, url);
	if (!ret)
		snprintf(bound, bound_len, "%s", recover ? gw_incoming_url(rs->sess) : url);
	pthread_mutex_unlock(&rs->lock);
	if (ret == -EINVAL)
		return refuse(err, err_len, ret, "no %s migration is postcopy-paused here (or a bad URL)",
			      recover ? "incoming" : "outgoing");
	if (ret == -EBUSY)
		return refuse(err, err_len, ret, "a recovery is already under way");
	if (ret)
		return refuse(err, err_len, ret, "%s: %s", recover ? "recover" : "resume", strerror(-ret));
	gw_log(GW_LOG_INFO, "cli", recover ? "recover_requested" : "resume_requested", "url=%s", bound);
	return 0;
}

static void vm_event(struct run_state *rs)
{
	struct run_event ev = { .type = RUN_EV_VM, .vm_status = run_vm_status(rs),
				.mono_ns = 0, .error = "" };
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ev.mono_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	pthread_mutex_lock(&rs->lock);
	if (rs->sess) {
		struct gw_stats *st = malloc(sizeof(*st));

		if (st) {
			st->size = sizeof(*st);
			gw_session_stats(rs->sess, st);
			ev.status = st->status;
			free(st);
		}
	}
	pthread_mutex_unlock(&rs->lock);
	run_events_emit(rs->events, &ev);
}

/* Caller holds rs->lock: why the vCPUs cannot be paused or resumed on request now, or 0. */
static int stop_cont_refused(struct run_state *rs, char *err, size_t err_len)
{
	enum vmm_state vs = rs->be->state(rs->vm);

	if (rs->migrating)
		return refuse(err, err_len, -EBUSY, "a migration is running: it pauses and resumes the VM itself");
	if (vs == VMM_INCOMING)
		return refuse(err, err_len, -EINVAL, "the VM waits for an incoming migration: it runs once that completes");
	if (vs == VMM_POSTMIGRATE)
		return refuse(err, err_len, -EPERM, "the VM was migrated away: it must not run here again");
	if (vs != VMM_RUNNING && vs != VMM_PAUSED)
		return refuse(err, err_len, -EINVAL, "the VM is %s", vmm_state_name(vs));
	return 0;
}

int run_stop(struct run_state *rs, char *err, size_t err_len)
{
	int ret;

	pthread_mutex_lock(&rs->lock);
	ret = stop_cont_refused(rs, err, err_len);
	if (!ret && rs->be->state(rs->vm) == VMM_RUNNING) {
		ret = rs->be->engine_ops->pause(rs->vm);
		if (ret)
			refuse(err, err_len, ret, "pausing the VM: %s", strerror(-ret));
	}
	pthread_mutex_unlock(&rs->lock);
	if (!ret) {
		gw_log(GW_LOG_INFO, "cli", "vm_stopped", "by=request");
		vm_event(rs);
	}
	return ret;
}

int run_cont(struct run_state *rs, char *err, size_t err_len)
{
	int ret;

	pthread_mutex_lock(&rs->lock);
	ret = stop_cont_refused(rs, err, err_len);
	if (!ret && rs->sess && rs->sess_role == GW_ROLE_SOURCE) {
		/* After an unknown outcome only "resolve" may resume it: the destination may run it. */
		struct gw_stats *st = malloc(sizeof(*st));

		if (st) {
			st->size = sizeof(*st);
			gw_session_stats(rs->sess, st);
			if (st->status == GW_STATUS_UNKNOWN || st->verify == GW_VERIFY_MISMATCH)
				ret = refuse(err, err_len, -EPERM,
					     "the last migration's outcome is unresolved: ask the destination, "
					     "then resolve it (godwit migrate --resolve)");
			free(st);
		}
	}
	if (!ret && rs->be->state(rs->vm) == VMM_PAUSED) {
		ret = rs->be->engine_ops->resume(rs->vm);
		if (ret)
			refuse(err, err_len, ret, "resuming the VM: %s", strerror(-ret));
	}
	pthread_mutex_unlock(&rs->lock);
	if (!ret) {
		gw_log(GW_LOG_INFO, "cli", "vm_resumed", "by=request");
		vm_event(rs);
	}
	return ret;
}
