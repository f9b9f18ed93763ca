/* SPDX-License-Identifier: MIT */
/*
 * godwit run: the requests of its API socket (docs/api.md): status,
 * params, events, migrate, incoming, set, cancel, check, resolve,
 * start-postcopy, continue, resume, recover, quit.
 * One request at a time, on the API server's thread; each answers one JSON
 * object (events then keeps the connection as a stream).
 *
 * Threads: see run.h. The work is run_ops.c's; this file reads requests
 * and words answers.
 */
#include "run/run.h"
#include "run/run_events.h"
#include "common/cli_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static json_t *handle_status(struct run_state *rs)
{
	json_t *o = run_status(rs);

	if (!o)
		return api_error("out of memory");
	/* "ok" first, as every answer has it. */
	{
		json_t *r = api_ok();

		if (!r || json_object_update(r, o)) {
			json_decref(r);
			json_decref(o);
			return api_error("out of memory");
		}
		json_decref(o);
		return r;
	}
}

/*
 * The PARAM=VALUE pairs of a request (all but @skip) into @ps: godwit's
 * names or QEMU's (values then in QEMU's units). NULL, or the error answer.
 */
static json_t *request_params(const struct api_request *req, const char *const *skip,
			      struct cli_params *ps)
{
	char err[256];

	for (unsigned i = 0; i < req->nr_args; i++) {
		const char *const *k;
		enum gw_str_param sp;
		enum gw_param p;
		int64_t v;

		for (k = skip; k && *k && strcmp(*k, req->args[i].key); k++)
			;
		if (k && *k)
			continue;
		if (!gw_str_param_by_name(req->args[i].key, &sp)) {
			if (cli_params_put_str(ps, sp, req->args[i].value))
				return api_error("%s: empty, too long or holds blanks", req->args[i].key);
			continue;
		}
		if (cli_parse_named_param(req->args[i].key, req->args[i].value, &p, &v, err, sizeof(err)))
			return api_error("%s", err);
		if (cli_params_put(ps, p, v))
			return api_error("too many parameters");
	}
	return NULL;
}

static json_t *handle_migrate(struct run_state *rs, const struct api_request *req)
{
	static const char *const skip[] = { "url", NULL };
	struct cli_params ps = { 0 };
	const char *url = api_arg(req, "url");
	char err[RUN_ERR_MAX];
	json_t *r;

	if (!url || !*url)
		return api_error("migrate needs url=tcp:HOST:PORT or url=unix:PATH");
	r = request_params(req, skip, &ps);
	if (r)
		return r;
	if (run_migrate(rs, url, &ps, err, sizeof(err)))
		return api_error("%s", err);
	r = api_ok();
	if (r && js_set_str(r, "url", url)) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

static json_t *handle_incoming(struct run_state *rs, const struct api_request *req)
{
	const char *url = api_arg(req, "url"), *eoe = api_arg(req, "exit-on-error");
	char err[RUN_ERR_MAX];
	bool exit_on_error = true;
	json_t *r;

	if (!url || !*url)
		return api_error("incoming needs url=tcp:HOST:PORT or url=unix:PATH");
	if (eoe) {
		if (!strcmp(eoe, "no") || !strcmp(eoe, "false") || !strcmp(eoe, "off"))
			exit_on_error = false;
		else if (strcmp(eoe, "yes") && strcmp(eoe, "true") && strcmp(eoe, "on"))
			return api_error("exit-on-error takes yes or no, not '%s'", eoe);
	}
	for (unsigned i = 0; i < req->nr_args; i++)
		if (strcmp(req->args[i].key, "url") && strcmp(req->args[i].key, "exit-on-error"))
			return api_error("incoming takes url= and exit-on-error=, not '%s'", req->args[i].key);
	if (run_incoming(rs, url, exit_on_error, err, sizeof(err)))
		return api_error("%s", err);
	pthread_mutex_lock(&rs->lock);
	r = api_ok();
	if (r && js_set_str(r, "url", gw_incoming_url(rs->sess))) {
		json_decref(r);
		r = NULL;
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

static json_t *handle_set(struct run_state *rs, const struct api_request *req)
{
	struct cli_params ps = { 0 };
	char err[RUN_ERR_MAX];
	bool now;
	json_t *r;

	if (!req->nr_args)
		return api_error("set needs PARAM=VALUE pairs");
	r = request_params(req, NULL, &ps);
	if (r)
		return r;
	if (run_set(rs, &ps, &now, err, sizeof(err)))
		return api_error("%s", err);
	r = api_ok();
	if (r && js_set_str(r, "applied", now ? "now" : "next-migration")) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

/* Every parameter as a migration started now would get it: value, default, live, QEMU's name. */
static json_t *handle_params(struct run_state *rs)
{
	int64_t v[GW_PARAM__COUNT];
	json_t *r = api_ok(), *list = json_object();
	int bad = !r || !list;

	run_params_now(rs, v);
	for (int p = 0; !bad && p < GW_PARAM__COUNT; p++) {
		const struct gw_param_info *pi = gw_param_info((enum gw_param)p);
		const char *name = cli_param_value_name((enum gw_param)p, v[p]);
		json_t *o = json_object();

		bad |= !o;
		if (bad)
			break;
		bad |= js_set_int(o, "value", v[p]);
		if (name)
			bad |= js_set_str(o, "name", name);
		bad |= js_set_int(o, "default", pi->def);
		bad |= js_set_bool(o, "live", pi->live);
		bad |= json_object_set_new(list, pi->name, o);
	}
	pthread_mutex_lock(&rs->lock);
	if (!bad)
		bad |= js_set_str(r, "applies-to", rs->migrating && rs->sess_role == GW_ROLE_SOURCE ?
				  "running-migration" : "next-migration");
	pthread_mutex_unlock(&rs->lock);
	if (!bad)
		bad |= json_object_set_new(r, "parameters", list) != 0;
	else
		json_decref(list);
	if (bad) {
		json_decref(r);
		return api_error("out of memory");
	}
	return r;
}

/* Keep the connection: one JSON line per event from now on. */
static json_t *handle_events(struct run_state *rs, const struct api_request *req, int fd)
{
	json_t *r;

	if (req->nr_args)
		return api_error("events takes no arguments");
	if (!run_events_stream_room(rs->events))
		return api_error("too many event streams (at most %d): close one", RUN_EVENTS_STREAMS_MAX);
	r = api_ok();
	if (!r || js_set_str(r, "stream", "events") || api_send_json(fd, r)) {
		json_decref(r);
		return api_error("out of memory");
	}
	json_decref(r);
	shutdown(fd, SHUT_RD);	/* from now on only its hang-up wakes the hub's watcher */
	if (run_events_add_stream(rs->events, fd))
		close(fd);
	return NULL;
}

static json_t *handle_cancel(struct run_state *rs)
{
	char err[RUN_ERR_MAX];

	if (run_cancel(rs, err, sizeof(err)))
		return api_error("%s", err);
	return api_ok();
}

static json_t *check_answer(const char *result, const char *message)
{
	json_t *r = api_ok();

	if (r && (js_set_str(r, "result", result) || (message && js_set_str(r, "message", message)))) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

static json_t *handle_check(struct run_state *rs)
{
	char msg[RUN_CHECK_MSG_MAX] = "";
	enum vmm_state vs = rs->be->state(rs->vm);
	int ret;

	if (vs == VMM_INCOMING || vs == VMM_CREATED) {
		snprintf(msg, sizeof(msg), "the VM is %s", vmm_state_name(vs));
		return check_answer("n/a", msg);
	}
	ret = rs->be->check(rs->vm, msg, sizeof(msg));
	pthread_mutex_lock(&rs->lock);
	if (ret == 0)
		snprintf(rs->check, sizeof(rs->check), "ok");
	else if (ret == -EIO)
		snprintf(rs->check, sizeof(rs->check), "failed: %s", msg);
	pthread_mutex_unlock(&rs->lock);
	gw_log(GW_LOG_INFO, "cli", "check", "result=%s detail=\"%s\"",
	       ret == 0 ? "ok" : ret == -EIO ? "mismatch" : ret == -EOPNOTSUPP ? "n/a" : "error",
	       ret == 0 || ret == -EIO ? msg : ret == -EOPNOTSUPP ? "nothing to verify" : strerror(-ret));
	if (ret == 0)
		return check_answer("ok", NULL);
	if (ret == -EIO)
		return check_answer("mismatch", msg);
	if (ret == -EOPNOTSUPP)
		return check_answer("n/a", "this workload has nothing to verify (use --workload verify or dirty)");
	return api_error("check failed: %s", strerror(-ret));
}

static bool postcopy_paused(struct gw_session *s)
{
	struct gw_stats *st = calloc(1, sizeof(*st));
	bool paused;

	if (!st)
		return false;
	st->size = sizeof(*st);
	gw_session_stats(s, st);
	paused = st->status == GW_STATUS_POSTCOPY_PAUSED;
	free(st);
	return paused;
}

/* After an unknown outcome: the operator says where the VM runs. */
static json_t *handle_resolve(struct run_state *rs, const struct api_request *req)
{
	const char *runs = api_arg(req, "runs");
	json_t *r;
	int ret;

	if (!runs || (strcmp(runs, "source") && strcmp(runs, "destination")))
		return api_error("resolve needs runs=source or runs=destination");
	pthread_mutex_lock(&rs->lock);
	if (rs->sess && rs->sess_role == GW_ROLE_SOURCE && rs->migrating && postcopy_paused(rs->sess)) {
		/* Postcopy, GO sent and RESUMED lost: only "source" can apply, and only then. */
		ret = gw_session_resolve(rs->sess, !strcmp(runs, "destination"));
		r = ret ? api_error("cannot resolve: the destination answered GO (it runs the VM and needs "
				    "its pages): recover it (--recover there, --resume here)") : api_ok();
	} else if (!rs->sess || rs->sess_role != GW_ROLE_SOURCE || rs->migrating) {
		r = api_error("no finished outgoing migration to resolve");
	} else {
		ret = gw_session_resolve(rs->sess, !strcmp(runs, "destination"));
		if (ret == -EINVAL)
			r = api_error("the last migration's outcome is neither unknown nor a verify mismatch: nothing to resolve");
		else if (ret)
			r = api_error("resuming the VM failed: %s", strerror(-ret));
		else {
			if (!strcmp(runs, "destination"))
				rs->be->set_postmigrate(rs->vm);
			r = api_ok();
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return r;
}

/* start-postcopy and continue: no arguments, one run_ops.c call. */
static json_t *handle_no_args(struct run_state *rs, const struct api_request *req,
			      int (*op)(struct run_state *, char *, size_t))
{
	char err[RUN_ERR_MAX];

	if (req->nr_args)
		return api_error("%s takes no arguments", req->cmd);
	if (op(rs, err, sizeof(err)))
		return api_error("%s", err);
	return api_ok();
}

/* Postcopy paused: resume url=URL (source) or recover url=URL (destination). */
static json_t *handle_postcopy_reconnect(struct run_state *rs, const struct api_request *req)
{
	bool recover = !strcmp(req->cmd, "recover");
	const char *url = api_arg(req, "url");
	char err[RUN_ERR_MAX], bound[PATH_MAX + 16];
	json_t *r;

	if (!url || !*url)
		return api_error("%s needs url=tcp:HOST:PORT or url=unix:PATH", req->cmd);
	for (unsigned i = 0; i < req->nr_args; i++)
		if (strcmp(req->args[i].key, "url"))
			return api_error("%s takes url= only, not '%s'", req->cmd, req->args[i].key);
	if (run_postcopy_reconnect(rs, recover, url, bound, sizeof(bound), err, sizeof(err)))
		return api_error("%s", err);
	r = api_ok();
	if (r && js_set_str(r, "url", bound)) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

json_t *run_api_handler(void *opaque, const struct api_request *req, int fd)
{
	struct run_state *rs = opaque;

	/* The API thread logs as the side this process plays. */
	gw_log_set_side(rs->dest ? "dst" : "src");
	if (!strcmp(req->cmd, "status"))
		return handle_status(rs);
	if (!strcmp(req->cmd, "params"))
		return handle_params(rs);
	if (!strcmp(req->cmd, "events"))
		return handle_events(rs, req, fd);
	if (!strcmp(req->cmd, "migrate"))
		return handle_migrate(rs, req);
	if (!strcmp(req->cmd, "incoming"))
		return handle_incoming(rs, req);
	if (!strcmp(req->cmd, "set"))
		return handle_set(rs, req);
	if (!strcmp(req->cmd, "cancel"))
		return handle_cancel(rs);
	if (!strcmp(req->cmd, "check"))
		return handle_check(rs);
	if (!strcmp(req->cmd, "resolve"))
		return handle_resolve(rs, req);
	if (!strcmp(req->cmd, "start-postcopy"))
		return handle_no_args(rs, req, run_start_postcopy);
	if (!strcmp(req->cmd, "continue"))
		return handle_no_args(rs, req, run_continue);
	if (!strcmp(req->cmd, "resume") || !strcmp(req->cmd, "recover"))
		return handle_postcopy_reconnect(rs, req);
	if (!strcmp(req->cmd, "quit")) {
		gw_log(GW_LOG_INFO, "cli", "quit_requested", "from=api");
		run_request_quit();
		return api_ok();
	}
	return api_error("unknown command '%s' (status, params, events, migrate, incoming, cancel, "
			 "set, check, resolve, start-postcopy, continue, resume, recover, quit)", req->cmd);
}
