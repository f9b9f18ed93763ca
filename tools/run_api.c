/* SPDX-License-Identifier: MIT */
/*
 * godwit run: the requests of its API socket (docs/api.md): status,
 * migrate, set, cancel, check, resolve, quit. One request at a time, on the
 * API server's thread; each writes exactly one JSON object.
 *
 * Threads: see run.h. Handlers take rs->lock for the session fields and
 * call the VM backend, which serialises itself.
 */
#include "run.h"
#include "cli_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

static void handle_status(struct run_state *rs, FILE *out)
{
	struct gw_stats *st = calloc(1, sizeof(*st));
	char vc[RUN_CHECK_MSG_MAX + 16];
	char *extra = NULL;
	size_t extra_len = 0;
	FILE *x;
	const char *wl;

	if (!st) {
		api_reply_error(out, "out of memory");
		return;
	}
	x = open_memstream(&extra, &extra_len);
	if (!x) {
		free(st);
		api_reply_error(out, "out of memory");
		return;
	}
	pthread_mutex_lock(&rs->lock);
	if (rs->sess)
		gw_session_stats(rs->sess, st);
	else
		st->status = GW_STATUS_NONE;
	verify_check_text(rs, vc, sizeof(vc));
	fprintf(x, "\"ok\":true,\"role\":\"%s\",\"vm-status\":",
		rs->sess && rs->sess_role == GW_ROLE_DEST ? "destination" : "source");
	json_write_string(x, run_vm_status(rs));
	wl = rs->be->workload(rs->vm);
	fputs(",\"workload\":", x);
	json_write_string(x, wl ? wl : "idle");
	fprintf(x, ",\"guest-progress-count\":%" PRIu64 ",\"verify-check\":",
		rs->be->progress(rs->vm));
	json_write_string(x, vc);
	if (rs->sess && rs->sess_role == GW_ROLE_DEST) {
		fputs(",\"incoming-url\":", x);
		json_write_string(x, gw_incoming_url(rs->sess));
	}
	pthread_mutex_unlock(&rs->lock);
	if (fclose(x)) {
		free(st);
		api_reply_error(out, "out of memory");
		return;
	}
	gw_stats_json(st, extra, out);
	free(extra);
	free(st);
}

/*
 * The PARAM=VALUE pairs of an API request (all but @skip_key) into @ps.
 * On a bad pair: an error reply, -1.
 */
static int request_params(const struct api_request *req, const char *skip_key,
			  struct cli_params *ps, FILE *out)
{
	char err[256];

	for (unsigned i = 0; i < req->nr_args; i++) {
		enum gw_str_param sp;
		enum gw_param p;
		int64_t v;

		if (skip_key && !strcmp(req->args[i].key, skip_key))
			continue;
		if (!gw_str_param_by_name(req->args[i].key, &sp)) {
			if (cli_params_put_str(ps, sp, req->args[i].value)) {
				api_reply_error(out, "%s: value too long", req->args[i].key);
				return -1;
			}
			continue;
		}
		if (gw_param_by_name(req->args[i].key, &p)) {
			api_reply_error(out, "unknown parameter '%s'", req->args[i].key);
			return -1;
		}
		if (cli_parse_param_value(p, req->args[i].value, &v, err, sizeof(err))) {
			api_reply_error(out, "%s", err);
			return -1;
		}
		cli_params_put(ps, p, v);
	}
	return 0;
}

/* Caller holds rs->lock. Why a new outgoing migration cannot start (reply sent), or false. */
static bool migrate_refused(struct run_state *rs, FILE *out)
{
	enum vmm_state vs;

	if (rs->migrating) {
		api_reply_error(out, "a migration is already running");
		return true;
	}
	if (rs->sess && rs->sess_role == GW_ROLE_SOURCE) {
		struct gw_stats *st = calloc(1, sizeof(*st));
		bool unknown;

		if (!st) {
			api_reply_error(out, "out of memory");
			return true;
		}
		gw_session_stats(rs->sess, st);
		unknown = st->status == GW_STATUS_UNKNOWN;
		free(st);
		/* The destination may run this VM now: two copies must never run. */
		if (unknown) {
			api_reply_error(out, "the last migration's outcome is unknown (go sent, no answer): "
					"ask the destination; this VM stays paused and cannot migrate");
			return true;
		}
	}
	vs = rs->be->state(rs->vm);
	if (vs != VMM_RUNNING && vs != VMM_PAUSED) {
		api_reply_error(out, "the VM is %s: nothing to migrate", vmm_state_name(vs));
		return true;
	}
	return false;
}

/* A source session with @ps, migrating to @url; NULL with the reply sent. */
static struct gw_session *source_start(struct run_state *rs, const struct cli_params *ps,
				       const char *url, FILE *out)
{
	struct gw_session *s = gw_session_new(GW_ROLE_SOURCE, rs->be->info(rs->vm),
					      rs->be->engine_ops, rs->vm);
	char why[600];
	int ret;

	if (!s) {
		api_reply_error(out, "cannot create a migration session: %s", strerror(errno));
		return NULL;
	}
	if (cli_params_apply(ps, s, why, sizeof(why))) {
		api_reply_error(out, "%s", why);
		gw_session_free(s);
		return NULL;
	}
	ret = gw_migrate_start(s, url);
	if (ret) {
		gw_session_error(s, why, sizeof(why));
		api_reply_error(out, "cannot start the migration to %s: %s", url,
				why[0] ? why : strerror(-ret));
		gw_session_free(s);
		return NULL;
	}
	return s;
}

static void handle_migrate(struct run_state *rs, const struct api_request *req, FILE *out)
{
	struct cli_params ps = rs->base;
	const char *url = api_arg(req, "url");
	struct gw_session *s;
	int ret;

	if (!url || !*url) {
		api_reply_error(out, "migrate needs url=tcp:HOST:PORT or url=unix:PATH");
		return;
	}
	if (request_params(req, "url", &ps, out))
		return;

	pthread_mutex_lock(&rs->lock);
	if (migrate_refused(rs, out))
		goto out;
	/* A session migrates once: a finished one (failed, or the incoming
	 * one of a VM that now runs here) is replaced by a fresh source. */
	run_watcher_join(rs);
	s = source_start(rs, &ps, url, out);
	if (!s)
		goto out;
	gw_session_free(rs->sess);
	rs->sess = s;
	rs->sess_role = GW_ROLE_SOURCE;
	ret = run_watcher_start(rs);
	if (ret) {
		/* Without a watcher nobody would mark the end: give up now. */
		gw_session_cancel(s);
		gw_session_wait(s);
		api_reply_error(out, "cannot start the watcher thread: %s", strerror(-ret));
		goto out;
	}
	gw_log(GW_LOG_INFO, "cli", "migrate_requested", "url=%s", url);
	fputs("{\"ok\":true,\"url\":", out);
	json_write_string(out, url);
	fputc('}', out);
out:
	pthread_mutex_unlock(&rs->lock);
}
static void handle_set(struct run_state *rs, const struct api_request *req, FILE *out)
{
	struct cli_params ps = { 0 };
	unsigned i;
	int ret;

	if (!req->nr_args) {
		api_reply_error(out, "set needs PARAM=VALUE pairs");
		return;
	}
	if (request_params(req, NULL, &ps, out))
		return;
	pthread_mutex_lock(&rs->lock);
	/* Check every pair first so that a refusal changes nothing. */
	for (i = 0; rs->migrating && i < GW_SPARAM__COUNT; i++) {
		if (ps.str_set[i]) {
			api_reply_error(out, "%s is a setup parameter: it cannot change while a migration runs",
					gw_str_param_name((enum gw_str_param)i));
			goto out;
		}
	}
	for (i = 0; i < GW_SPARAM__COUNT; i++) {
		if (ps.str_set[i]) {
			cli_params_put_str(&rs->base, (enum gw_str_param)i, ps.str[i]);
			gw_log(GW_LOG_INFO, "cli", "param_set", "name=%s value=%s live=0",
			       gw_str_param_name((enum gw_str_param)i), ps.str[i]);
		}
	}
	if (rs->migrating) {
		for (i = 0; i < ps.nr; i++) {
			if (!gw_param_info(ps.v[i].p)->live) {
				api_reply_error(out, "%s is a setup parameter: it cannot change while a migration runs",
						gw_param_info(ps.v[i].p)->name);
				goto out;
			}
		}
	}
	for (i = 0; i < ps.nr; i++) {
		if (rs->migrating) {
			ret = gw_session_set(rs->sess, ps.v[i].p, ps.v[i].value);
			if (ret) {
				api_reply_error(out, "%s=%" PRId64 ": %s", gw_param_info(ps.v[i].p)->name,
						ps.v[i].value, strerror(-ret));
				goto out;
			}
		}
		cli_params_put(&rs->base, ps.v[i].p, ps.v[i].value);
		gw_log(GW_LOG_INFO, "cli", "param_set", "name=%s value=%" PRId64 " live=%d",
		       gw_param_info(ps.v[i].p)->name, ps.v[i].value, rs->migrating);
	}
	fprintf(out, "{\"ok\":true,\"applied\":%s}", rs->migrating ? "\"now\"" : "\"next-migration\"");
out:
	pthread_mutex_unlock(&rs->lock);
}

static void handle_cancel(struct run_state *rs, FILE *out)
{
	int ret;

	pthread_mutex_lock(&rs->lock);
	if (!rs->migrating) {
		api_reply_error(out, "no migration is running");
		goto out;
	}
	ret = gw_session_cancel(rs->sess);
	if (ret)
		api_reply_error(out, "cannot cancel: %s (the handover may already be under way)",
				strerror(-ret));
	else
		fputs("{\"ok\":true}", out);
out:
	pthread_mutex_unlock(&rs->lock);
}

static void handle_check(struct run_state *rs, FILE *out)
{
	char msg[RUN_CHECK_MSG_MAX] = "";
	enum vmm_state vs = rs->be->state(rs->vm);
	int ret;

	if (vs == VMM_INCOMING || vs == VMM_CREATED) {
		fprintf(out, "{\"ok\":true,\"result\":\"n/a\",\"message\":\"the VM is %s\"}",
			vmm_state_name(vs));
		return;
	}
	ret = rs->be->check(rs->vm, msg, sizeof(msg));
	pthread_mutex_lock(&rs->lock);
	if (ret == 0)
		snprintf(rs->check, sizeof(rs->check), "ok");
	else if (ret == -EIO)
		snprintf(rs->check, sizeof(rs->check), "failed: %s", msg);
	pthread_mutex_unlock(&rs->lock);
	if (ret == 0) {
		fputs("{\"ok\":true,\"result\":\"ok\"}", out);
	} else if (ret == -EIO) {
		fputs("{\"ok\":true,\"result\":\"mismatch\",\"message\":", out);
		json_write_string(out, msg);
		fputc('}', out);
	} else if (ret == -EOPNOTSUPP) {
		fputs("{\"ok\":true,\"result\":\"n/a\",\"message\":", out);
		json_write_string(out, "this workload has nothing to verify (use --workload verify)");
		fputc('}', out);
	} else {
		api_reply_error(out, "check failed: %s", strerror(-ret));
	}
	gw_log(GW_LOG_INFO, "cli", "check", "ret=%d msg=\"%s\"", ret, msg);
}

/* After an unknown outcome: the operator says where the VM runs. */
static void handle_resolve(struct run_state *rs, const struct api_request *req, FILE *out)
{
	const char *runs = NULL;
	int ret;

	for (unsigned i = 0; i < req->nr_args; i++)
		if (!strcmp(req->args[i].key, "runs"))
			runs = req->args[i].value;
	if (!runs || (strcmp(runs, "source") && strcmp(runs, "destination"))) {
		api_reply_error(out, "resolve needs runs=source or runs=destination");
		return;
	}
	pthread_mutex_lock(&rs->lock);
	if (!rs->sess || rs->sess_role != GW_ROLE_SOURCE || rs->migrating) {
		api_reply_error(out, "no finished outgoing migration to resolve");
	} else {
		ret = gw_session_resolve(rs->sess, !strcmp(runs, "destination"));
		if (ret == -EINVAL)
			api_reply_error(out, "the last migration's outcome is neither unknown nor a verify mismatch: nothing to resolve");
		else if (ret)
			api_reply_error(out, "resuming the VM failed: %s", strerror(-ret));
		else {
			if (!strcmp(runs, "destination"))
				rs->be->set_postmigrate(rs->vm);
			fputs("{\"ok\":true}", out);
		}
	}
	pthread_mutex_unlock(&rs->lock);
}

void run_api_handler(void *opaque, const struct api_request *req, FILE *out)
{
	struct run_state *rs = opaque;

	/* The API thread logs as the side this process plays. */
	gw_log_set_side(rs->dest ? "dst" : "src");
	if (!strcmp(req->cmd, "status")) {
		handle_status(rs, out);
	} else if (!strcmp(req->cmd, "migrate")) {
		handle_migrate(rs, req, out);
	} else if (!strcmp(req->cmd, "set")) {
		handle_set(rs, req, out);
	} else if (!strcmp(req->cmd, "cancel")) {
		handle_cancel(rs, out);
	} else if (!strcmp(req->cmd, "check")) {
		handle_check(rs, out);
	} else if (!strcmp(req->cmd, "resolve")) {
		handle_resolve(rs, req, out);
	} else if (!strcmp(req->cmd, "quit")) {
		fputs("{\"ok\":true}", out);
		gw_log(GW_LOG_INFO, "cli", "quit_requested", "from=api");
		run_request_quit();
	} else {
		api_reply_error(out, "unknown command '%s' (status, migrate, cancel, set, check, resolve, quit)",
				req->cmd);
	}
}
