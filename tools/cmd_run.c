/* SPDX-License-Identifier: MIT */
/*
 * godwit run: one VM (of the backend --accel picks from vmm.h's table) and
 * its API socket.
 *
 * Source mode: the VM runs; "migrate" over the API starts a source session
 * and a watcher thread that waits for its end. On completion the VM is
 * marked postmigrate (it must never run again here); on failure or cancel
 * it keeps running and the process keeps serving: losing the VM because a
 * migration failed is the one thing a source must never do.
 *
 * Destination mode (--incoming URL): the VM waits for one migration; the
 * bound URL is printed as "incoming <url>" on stdout as soon as the socket
 * listens. On completion the VM runs here; on failure the process says why
 * on stderr and exits 1.
 *
 * Threads: main (set-up, then sigwaitinfo until quit/signal, then tear-down),
 * the API thread (all request handlers), one watcher thread per migration,
 * and the engine's and the VM's own threads. SIGINT, SIGTERM and SIGUSR1 are
 * blocked in every thread and taken by main alone; the other threads ask
 * main to quit by sending SIGUSR1 to the process.
 */
#include "cli.h"
#include "api.h"
#include "cli_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vmm.h"

#define CHECK_MSG_MAX 256

struct run_state {
	/* Set before the API thread starts, read-only afterwards. */
	const struct run_opts *opts;
	const struct vmm_backend *be;	/* the --accel backend chosen */
	struct vmm *vm;			/* calls into it are thread-safe (vmm.h) */
	bool dest;			/* started with --incoming */

	pthread_mutex_t lock;		/* guards everything below */
	struct gw_session *sess;	/* current session; replaced only by the API
					   thread (migrate) and by main at tear-down */
	enum gw_role sess_role;
	bool watcher_started;		/* a watcher exists and was not joined */
	bool migrating;			/* the watcher has not seen the end yet */
	pthread_t watcher;
	struct cli_params base;		/* --set and API "set": every new session gets them */
	char check[CHECK_MSG_MAX + 16];	/* last explicit check: "ok", "failed: ...", "" none */
	int exit_code;
};

static void request_quit(void)
{
	kill(getpid(), SIGUSR1);
}

static void apply_params(struct gw_session *s, const struct cli_params *ps)
{
	unsigned i;

	for (i = 0; i < ps->nr; i++) {
		int ret = gw_session_set(s, ps->v[i].p, ps->v[i].value);

		if (ret)
			gw_log(GW_LOG_WARN, "cli", "param_rejected", "name=%s value=%" PRId64 " err=%d",
			       gw_param_info(ps->v[i].p)->name, ps->v[i].value, ret);
	}
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
	if (st)
		gw_session_stats(s, st);

	if (role == GW_ROLE_SOURCE) {
		if (ret == 0) {
			rs->be->set_postmigrate(rs->vm);
			gw_log(GW_LOG_INFO, "cli", "migration_completed", "vm=postmigrate");
		} else {
			gw_log(GW_LOG_ERROR, "cli", "migration_failed", "status=%s err=%d reason=\"%s\" vm=%s",
			       st ? gw_status_name(st->status) : "?", ret, st ? st->error : "",
			       vmm_state_name(rs->be->state(rs->vm)));
		}
	} else {
		if (ret == 0) {
			gw_log(GW_LOG_INFO, "cli", "incoming_completed", "vm=%s",
			       vmm_state_name(rs->be->state(rs->vm)));
		} else {
			fprintf(stderr, "godwit: incoming migration failed: %s%s%s (the VM did not resume here)\n",
				st && st->error[0] ? st->error : strerror(ret < 0 ? -ret : EIO),
				st && st->error_phase[0] ? " in phase " : "",
				st && st->error_phase[0] ? st->error_phase : "");
		}
	}

	pthread_mutex_lock(&rs->lock);
	rs->migrating = false;
	if (role == GW_ROLE_DEST && ret) {
		rs->exit_code = CLI_EXIT_FAIL;
		request_quit();
	} else if (rs->opts->exit_after_migrate) {
		rs->exit_code = ret ? CLI_EXIT_FAIL : CLI_EXIT_OK;
		request_quit();
	}
	pthread_mutex_unlock(&rs->lock);
	free(st);
	return NULL;
}

/* Caller holds rs->lock. */
static int start_watcher(struct run_state *rs)
{
	int ret = pthread_create(&rs->watcher, NULL, watcher_thread, rs);

	if (ret)
		return -ret;
	rs->watcher_started = true;
	rs->migrating = true;
	return 0;
}

/* Caller holds rs->lock and rs->migrating is false: the watcher only returns now. */
static void join_watcher(struct run_state *rs)
{
	if (rs->watcher_started) {
		pthread_join(rs->watcher, NULL);
		rs->watcher_started = false;
	}
}

static const char *vm_status(const struct run_state *rs)
{
	return vmm_state_name(rs->be->state(rs->vm));
}

/* Caller holds rs->lock. "ok", "failed: ...", or "n/a". */
static void verify_check_text(struct run_state *rs, char *buf, size_t len)
{
	char msg[CHECK_MSG_MAX];
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
	char vc[CHECK_MSG_MAX + 16];
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
	json_write_string(x, vm_status(rs));
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
		enum gw_param p;
		int64_t v;

		if (skip_key && !strcmp(req->args[i].key, skip_key))
			continue;
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

static void handle_migrate(struct run_state *rs, const struct api_request *req, FILE *out)
{
	struct cli_params ps = rs->base;
	const char *url = api_arg(req, "url");
	enum vmm_state vs;
	struct gw_session *s;
	unsigned i;
	int ret;

	if (!url || !*url) {
		api_reply_error(out, "migrate needs url=tcp:HOST:PORT or url=unix:PATH");
		return;
	}
	if (request_params(req, "url", &ps, out))
		return;

	pthread_mutex_lock(&rs->lock);
	if (rs->migrating) {
		api_reply_error(out, "a migration is already running");
		goto out;
	}
	if (rs->sess && rs->sess_role == GW_ROLE_SOURCE) {
		struct gw_stats *st = calloc(1, sizeof(*st));
		bool unknown;

		if (!st) {
			api_reply_error(out, "out of memory");
			goto out;
		}
		gw_session_stats(rs->sess, st);
		unknown = st->status == GW_STATUS_UNKNOWN;
		free(st);
		/* The destination may run this VM now: two copies must never run. */
		if (unknown) {
			api_reply_error(out, "the last migration's outcome is unknown (go sent, no answer): "
					"ask the destination; this VM stays paused and cannot migrate");
			goto out;
		}
	}
	vs = rs->be->state(rs->vm);
	if (vs != VMM_RUNNING && vs != VMM_PAUSED) {
		api_reply_error(out, "the VM is %s: nothing to migrate", vmm_state_name(vs));
		goto out;
	}
	/* A session migrates once: a finished one (failed, or the incoming
	 * one of a VM that now runs here) is replaced by a fresh source. */
	join_watcher(rs);
	s = gw_session_new(GW_ROLE_SOURCE, rs->be->info(rs->vm), rs->be->engine_ops, rs->vm);
	if (!s) {
		api_reply_error(out, "cannot create a migration session: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < ps.nr; i++) {
		ret = gw_session_set(s, ps.v[i].p, ps.v[i].value);
		if (ret) {
			api_reply_error(out, "%s=%" PRId64 ": %s", gw_param_info(ps.v[i].p)->name,
					ps.v[i].value, strerror(-ret));
			gw_session_free(s);
			goto out;
		}
	}
	ret = gw_migrate_start(s, url);
	if (ret) {
		char why[256];

		gw_session_error(s, why, sizeof(why));
		api_reply_error(out, "cannot start the migration to %s: %s", url,
				why[0] ? why : strerror(-ret));
		gw_session_free(s);
		goto out;
	}
	gw_session_free(rs->sess);
	rs->sess = s;
	rs->sess_role = GW_ROLE_SOURCE;
	ret = start_watcher(rs);
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
	char msg[CHECK_MSG_MAX] = "";
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
			api_reply_error(out, "the last migration's outcome is not unknown: nothing to resolve");
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

static void api_handler(void *opaque, const struct api_request *req, FILE *out)
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
		request_quit();
	} else {
		api_reply_error(out, "unknown command '%s' (status, migrate, cancel, set, check, resolve, quit)",
				req->cmd);
	}
}

/* The names of the built backends, in preference order, separated by @sep. */
static void backend_names(char *buf, size_t len, const char *sep)
{
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned i = 0; vmm_backends[i] && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? sep : "",
				       vmm_backends[i]->name);
}

static void run_usage(FILE *out)
{
	char names[64];

	backend_names(names, sizeof(names), ", ");
	fprintf(out,
		"usage: godwit run [OPTIONS]\n"
		"Run a VM and serve its API socket until 'quit', SIGINT or SIGTERM.\n"
		"\n"
		"  --memory SIZE          guest RAM (default 1G; a destination takes the source's\n"
		"                         layout unless given)\n"
		"  --vcpus N              soft vCPUs, 1..64 (default 1)\n"
		"  --accel kvm|soft|auto  backend (default auto = the first usable of: %s)\n"
		"  --workload SPEC        idle | dirty:ws=SIZE,pattern=page|byte,rate=N | verify[:ws=SIZE,rate=N]\n"
		"  --fill zero|mix|random|text|none   RAM content prepared on the host (default none)\n"
		"  --seed N               content and workload seed (default 1)\n"
		"  --memory-file PATH     map RAM from this file instead of a memfd\n"
		"  --prealloc             allocate and zero all RAM at start, like QEMU's -mem-prealloc\n"
		"                         (a destination given --memory is then ready before migrating)\n"
		"  --api PATH             serve the control socket here (see docs/api.md)\n"
		"  --incoming URL         be a destination: listen on URL (tcp:HOST:PORT, port 0 = any;\n"
		"                         unix:PATH) and print 'incoming <bound-url>' on stdout\n"
		"  --set PARAM=VALUE      migration parameter for this VM's sessions (repeatable)\n"
		"  --log-level error|warn|info|debug\n"
		"  --exit-after-migrate   exit once a migration ended: 0 completed, 1 otherwise\n"
		"\n", names);
	cli_print_params(out);
}

static int set_log_level(const char *name)
{
	static const struct { const char *n; enum gw_log_level l; } levels[] = {
		{ "error", GW_LOG_ERROR }, { "warn", GW_LOG_WARN },
		{ "info", GW_LOG_INFO }, { "debug", GW_LOG_DEBUG },
	};
	size_t i;

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		if (!strcmp(levels[i].n, name)) {
			gw_log_set_level(levels[i].l);
			return 0;
		}
	}
	return -EINVAL;
}

/* --accel auto: the first backend that probes, each one skipped logged with why. */
static const struct vmm_backend *choose_auto(const char *names)
{
	char why[256];

	for (unsigned i = 0; vmm_backends[i]; i++) {
		const struct vmm_backend *be = vmm_backends[i];

		why[0] = '\0';
		if (be->probe(why, sizeof(why)) == 0) {
			gw_log(GW_LOG_INFO, "cli", "accel", "chosen=%s reason=\"first usable of %s: %s\"",
			       be->name, names, why);
			return be;
		}
		gw_log(GW_LOG_INFO, "cli", "accel_skipped", "backend=%s reason=\"%s\"", be->name, why);
	}
	cli_error("--accel auto: no usable backend (tried %s; see the accel_skipped lines)", names);
	return NULL;
}

/* The backend for --accel @accel, or NULL with the error printed. */
static const struct vmm_backend *choose_backend(const char *accel)
{
	const struct vmm_backend *be;
	char why[256] = "", names[64];

	backend_names(names, sizeof(names), ", ");
	if (!strcmp(accel, "auto"))
		return choose_auto(names);
	be = vmm_backend_by_name(accel);
	if (!be) {
		cli_error("--accel %s: this godwit has no %s backend (built: %s)", accel, accel, names);
		return NULL;
	}
	if (be->probe(why, sizeof(why))) {
		cli_error("--accel %s: not usable here: %s", accel, why);
		return NULL;
	}
	gw_log(GW_LOG_INFO, "cli", "accel", "chosen=%s reason=\"asked for: %s\"", be->name, why);
	return be;
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		CLI_RUN_VM_OPTS,
		{ "api", required_argument, NULL, OPT_API },
		{ "incoming", required_argument, NULL, OPT_INCOMING },
		{ "set", required_argument, NULL, OPT_SET },
		{ "exit-after-migrate", no_argument, NULL, OPT_EXIT_AFTER_MIGRATE },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o;
	struct run_state rs;
	struct vmm_config cfg;
	struct api_server *api = NULL;
	enum vmm_fill fill = VMM_FILL_NONE;
	sigset_t sigs;
	char err[256];
	int c, ret, sig;

	run_opts_init(&o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			run_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':') {
			cli_bad_option("run", c, argv);
			return CLI_EXIT_USAGE;
		}
		if (run_opt_apply(&o, c, optarg, "run"))
			return CLI_EXIT_USAGE;
	}
	if (optind < argc) {
		cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}

	/* Before any thread exists, so that every thread inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&rs, 0, sizeof(rs));
	pthread_mutex_init(&rs.lock, NULL);
	rs.opts = &o;
	rs.dest = o.incoming_url != NULL;
	rs.base = o.params;
	gw_log_set_side(rs.dest ? "dst" : "src");
	if (o.log_level)
		set_log_level(o.log_level);
	rs.be = choose_backend(o.accel);
	if (!rs.be)
		return CLI_EXIT_FAIL;
	vmm_fill_parse(o.fill, &fill);

	memset(&cfg, 0, sizeof(cfg));
	cfg.memory_bytes = rs.dest && !o.memory_given ? 0 : o.memory_bytes;
	cfg.nr_vcpus = o.nr_vcpus;
	cfg.memory_file = o.memory_file;
	cfg.prealloc = o.prealloc;
	cfg.fill = rs.dest ? VMM_FILL_NONE : fill;
	cfg.seed = o.seed;
	cfg.workload = o.workload;
	cfg.incoming = rs.dest;
	err[0] = '\0';
	rs.vm = rs.be->create(&cfg, err, sizeof(err));
	if (!rs.vm) {
		cli_error("cannot create the VM: %s", err[0] ? err : strerror(errno));
		return CLI_EXIT_FAIL;
	}
	ret = CLI_EXIT_FAIL;
	if (rs.dest) {
		rs.sess = gw_session_new(GW_ROLE_DEST, rs.be->info(rs.vm), rs.be->engine_ops, rs.vm);
		if (!rs.sess) {
			cli_error("cannot create the destination session: %s", strerror(errno));
			goto out_vm;
		}
		rs.sess_role = GW_ROLE_DEST;
		apply_params(rs.sess, &rs.base);
	} else {
		c = rs.be->start(rs.vm);
		if (c) {
			cli_error("cannot start the VM: %s", strerror(-c));
			goto out_vm;
		}
	}
	if (o.api_path) {
		api = api_server_start(o.api_path, api_handler, &rs, err, sizeof(err));
		if (!api) {
			cli_error("API: %s", err);
			goto out_sess;
		}
		gw_log(GW_LOG_INFO, "cli", "api_listen", "path=%s", o.api_path);
	}
	if (rs.dest) {
		c = gw_incoming_start(rs.sess, o.incoming_url);
		if (c) {
			cli_error("cannot listen on %s: %s", o.incoming_url, strerror(-c));
			goto out_api;
		}
		printf("incoming %s\n", gw_incoming_url(rs.sess));
		fflush(stdout);
		pthread_mutex_lock(&rs.lock);
		c = start_watcher(&rs);
		pthread_mutex_unlock(&rs.lock);
		if (c) {
			cli_error("cannot start the watcher thread: %s", strerror(-c));
			goto out_api;
		}
	}
	gw_log(GW_LOG_INFO, "cli", "vm_ready", "vm=%s memory_bytes=%" PRIu64 " vcpus=%u fill=%s workload=%s",
	       vm_status(&rs), cfg.memory_bytes, cfg.nr_vcpus, vmm_fill_name(cfg.fill),
	       rs.be->workload(rs.vm) ? rs.be->workload(rs.vm) : "idle");

	for (;;) {
		sig = sigwaitinfo(&sigs, NULL);
		if (sig >= 0 || errno != EINTR)
			break;
	}
	gw_log(GW_LOG_INFO, "cli", "shutdown", "signal=%s", sig == SIGUSR1 ? "quit" : strsignal(sig));
	pthread_mutex_lock(&rs.lock);
	ret = rs.exit_code;
	pthread_mutex_unlock(&rs.lock);

out_api:
	api_server_stop(api);
out_sess:
	/* No API thread now: main alone touches rs.sess. */
	pthread_mutex_lock(&rs.lock);
	if (rs.migrating && rs.sess)
		gw_session_cancel(rs.sess);
	pthread_mutex_unlock(&rs.lock);
	if (rs.watcher_started)
		pthread_join(rs.watcher, NULL);
	if (rs.dest && ret == CLI_EXIT_OK && rs.be->state(rs.vm) == VMM_INCOMING)
		ret = CLI_EXIT_FAIL;	/* interrupted before any migration arrived */
	gw_session_free(rs.sess);
out_vm:
	rs.be->destroy(rs.vm);
	pthread_mutex_destroy(&rs.lock);
	return ret;
}
