/* SPDX-License-Identifier: MIT */
/*
 * godwit demo: both ends on this host as two child processes of this one
 * (demo_child.c), in steps:
 *
 *   parse     run options (the VM), migrate options, the demo's own
 *   prepare   a private directory for the API sockets and the two logs
 *             (kept: the report says where), the listen URL
 *   start     destination: godwit run --incoming URL --api DIR/dst.sock
 *             (URL defaults to tcp:127.0.0.1:0; its stdout line "incoming
 *             <url>" tells the port it bound); source: godwit run --api
 *             DIR/src.sock <run options>, until its vm-status is running
 *   migrate   through the source's API, followed to the end with the
 *             progress line (Ctrl-C cancels it, a second one leaves)
 *   observe   destination: guest progress sampled every ~200 ms until it
 *             moved (10 s at most), the workload's verification result
 *   report    text or --json
 *   teardown  quit both, reap both (SIGKILL after a grace period)
 *
 * Every exit path quits or kills and reaps the children. Exit status 0
 * only if the migration completed, was verified and the guest made
 * progress on the destination.
 */
#include "cli/demo.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEMO_START_TIMEOUT_MS 300000	/* source filled its RAM and runs */
#define DEMO_RESUME_TIMEOUT_MS 10000	/* destination VM runs after completion */
#define DEMO_PROGRESS_GAP_MS 200	/* between progress samples */
#define DEMO_PROGRESS_TIMEOUT_MS 10000	/* the destination's guest shows progress */
#define DEMO_EXIT_WAIT_MS 10000		/* a child whose stdout closed has exited */

/* One demo, on the main thread. */
struct demo {
	/* Options. */
	struct run_opts ro;		/* the source VM's (and the destination's size) */
	struct migrate_opts mo;
	const char *keep_logs;		/* --keep-logs DIR, NULL: the private directory */
	bool verbose;			/* children log to stderr too (as they go) */
	const char *listen_url;		/* --to, or the default, or local_url */
	bool dst_prealloc;		/* destination created with --memory --prealloc */
	bool local;			/* --local: RAM fds over a unix: socket */
	bool verify_on;			/* the RAM digest check runs */
	bool tls_gen;			/* --tls: throw-away certificates in tls_dir */

	/* What was started, released by teardown. */
	struct child src, dst;
	struct argv_buf sa, da;
	char tmpdir[PATH_MAX];		/* "" until created */
	char local_url[PATH_MAX + 16];	/* unix:TMPDIR/mig.sock */
	char tls_dir[PATH_MAX];		/* TMPDIR/tls with --tls, "" otherwise */
	int dst_out[2];			/* the destination's stdout */
	int src_log, dst_log;		/* STDERR_FILENO (--verbose) or the log files */
	char logs[2 * PATH_MAX + 16];	/* "DIR/src.log, DIR/dst.log", "" with --verbose */
	char dst_log_path[PATH_MAX + 8];	/* DIR/dst.log, "" with --verbose */

	/* Results. */
	char url[512];			/* where the destination listens */
	json_t *final;		/* the source's last status */
	bool completed;
	int verified;			/* 1 every check that ran passed, 0 not */
	int progress;			/* guest progress on the destination: 1, 0, -1 n/a */
	uint64_t p1, p2;		/* progress samples */
	char dst_check[300];		/* the destination's verify-check */
	char detail[400];		/* what "verified" is made of */
};

static void demo_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit demo [RUN OPTIONS] [MIGRATE OPTIONS] [--to URL] [--json] [--keep-logs DIR]\n"
		"Run a destination and a source on this host, migrate once, report.\n"
		"\n"
		"Run options (for the source; the destination takes the source's layout):\n"
		"  --memory SIZE (default 1G) --vcpus N (default 1) --accel kvm|soft|auto (default auto)\n"
		"  --seed N (default 1) --workload SPEC (default verify)\n"
		"  --fill zero|mix|random|text|none (default none) --memory-file PATH (source only)\n"
		"  --prealloc (source; default off) --log-level error|warn|info|debug (default info)\n"
		"  --dirty-track auto|kvm-ring|kvm-log|uffd-wp (default auto)\n"
		"Migrate options (defaults as in 'godwit migrate --help'): --channels N\n"
		"  --compress ALG[:LEVEL] --xbzrle[=SIZE] --downtime-limit MS --max-bandwidth RATE\n"
		"  --converge-timeout MS --on-timeout cancel|force|keep-going --local --no-verify\n"
		"  --set PARAM=VALUE --auto-converge --dirty-limit RATE --dirty-limit-start\n"
		"  --tls-creds DIR --tls-psk FILE --tls-hostname NAME   (both ends use them)\n"
		"Demo options:\n"
		"  --to URL          where the destination listens (default tcp:127.0.0.1:0,\n"
		"                    with --local a unix: socket in a private directory); checked,\n"
		"                    with the workload and both VMs' RAM, before either starts\n"
		"  --dst-set P=V     parameter for the destination's session (repeatable)\n"
		"  --no-dst-prealloc the destination takes its size from the migration and\n"
		"                    allocates RAM as pages arrive (default: it is created with\n"
		"                    the source's --memory and --prealloc, before migrating)\n"
		"  --tls             mutual TLS 1.3 with a throw-away CA and certificates made\n"
		"                    with openssl in the demo's private directory\n"
		"  --json            print one JSON object: the statistics plus verified,\n"
		"                    verified-detail, guest-progress, source-vm-status,\n"
		"                    destination-vm-status, logs\n"
		"                    (default: a progress line on a terminal, then the report)\n"
		"  --keep-logs DIR   write the children's logs to DIR/src.log and DIR/dst.log\n"
		"                    (default: in the demo's own directory under $TMPDIR or /tmp,\n"
		"                    kept; the report says where)\n"
		"  --verbose         the children's logs go to stderr as they are written instead\n"
		"  --progress auto|always|never   the progress line (default auto: on a terminal)\n"
		"\n"
		"Verified: a check ran and none failed: the RAM digests (not with --local: one\n"
		"copy of RAM, \"RAM shared (local)\") and the workload's own check on the\n"
		"destination (dirty, verify, balloon; idle has none).\n"
		"Exit status: 0 if the migration completed, was verified and the guest made\n"
		"progress on the destination; 1 otherwise; 2 bad usage.\n");
}

static void demo_init(struct demo *d)
{
	memset(d, 0, sizeof(*d));
	run_opts_init(&d->ro);
	d->ro.workload = "verify";
	d->dst_prealloc = true;
	d->src.name = "src";
	d->dst.name = "dst";
	d->dst_out[0] = d->dst_out[1] = -1;
	d->src_log = d->dst_log = STDERR_FILENO;
	d->progress = -1;
	snprintf(d->dst_check, sizeof(d->dst_check), "n/a");
}

/* One option: the demo's own, the VM's (run) or the migration's. 0, or non-zero: bad. */
static int demo_opt_apply(struct demo *d, int c, const char *arg)
{
	int taken;

	switch (c) {
	case OPT_KEEP_LOGS:
		d->keep_logs = arg;
		return 0;
	case OPT_VERBOSE:
		d->verbose = true;
		return 0;
	case OPT_PROGRESS:
		return cli_parse_progress(arg, &d->mo.progress, "demo");
	case OPT_NO_DST_PREALLOC:
		d->dst_prealloc = false;
		return 0;
	case OPT_TO:
		if (d->listen_url)
			return cli_repeated("demo", "--to", d->listen_url, arg);
		d->listen_url = arg;
		return 0;
	case OPT_DST_SET:
		/* Checked here so that a typo fails before anything starts. */
		return run_opt_apply(&d->ro, OPT_SET, arg, "demo");
	case OPT_JSON:
		d->mo.json = true;
		return 0;
	case OPT_TLS:
		d->tls_gen = true;
		return 0;
	case OPT_SET:
		/* --set belongs to the migration; the rest of run's to the VM. */
		return migrate_opt_apply(&d->mo, c, arg, "demo");
	default:
		taken = run_opt_apply(&d->ro, c, arg, "demo");
		return taken == 1 ? migrate_opt_apply(&d->mo, c, arg, "demo") : taken;
	}
}

/*
 * What the children would refuse, refused before either starts: the URL,
 * the workload, the backend's limits, and both VMs' RAM on this one host.
 * -1 to go on, else the exit code.
 */
static int demo_check(const struct demo *d)
{
	const struct vmm_backend *be = vmm_backend_by_name(d->ro.accel);
	struct vmm_config cfg;
	struct vmm_workload wl;
	char why[400];
	bool src_all, dst_all = d->dst_prealloc && !d->local;
	uint64_t pages = d->ro.memory_bytes / GW_PAGE_BYTES;

	if (d->listen_url && gw_url_check(d->listen_url, true, why, sizeof(why))) {
		cli_usage_error("demo", "--to: %s", why);
		return CLI_EXIT_USAGE;
	}
	if (vmm_workload_parse(d->ro.workload, &wl, why, sizeof(why))) {
		cli_usage_error("demo", "--workload: %s", why);
		return CLI_EXIT_USAGE;
	}
	/* The source's RAM is all touched: at start, or by a workload over all of it (verify's default). */
	src_all = d->ro.prealloc || strcmp(d->ro.fill, "none") || vmm_workload_ws_pages(&wl, pages) >= pages;
	run_config_of(&d->ro, false, &cfg);
	if (be && be->check_config(&cfg, why, sizeof(why))) {	/* auto: the children choose */
		cli_usage_error("demo", "--accel %s: %s", d->ro.accel, why);
		return CLI_EXIT_USAGE;
	}
	if (run_memory_check(&d->ro, (unsigned)src_all + dst_all,
			     src_all && dst_all ? "both VMs on this host use all of theirs (the source's RAM "
			     "filled, preallocated or written whole by its workload; the destination's preallocated)" :
			     src_all ? "the source uses all of its RAM (filled, preallocated or written whole by its "
			     "workload)" : "the destination preallocates all of its RAM",
			     dst_all ? ", or give --no-dst-prealloc" : ", or use --fill none", "demo"))
		return CLI_EXIT_FAIL;
	return -1;
}

/* -1 to go on, else the exit code (help, bad usage). */
static int demo_parse(struct demo *d, int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		CLI_RUN_VM_OPTS,
		CLI_MIGRATE_PARAM_OPTS,
		{ "to", required_argument, NULL, OPT_TO },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "keep-logs", required_argument, NULL, OPT_KEEP_LOGS },
		{ "verbose", no_argument, NULL, OPT_VERBOSE },
		{ "progress", required_argument, NULL, OPT_PROGRESS },
		{ "dst-set", required_argument, NULL, OPT_DST_SET },
		{ "no-dst-prealloc", no_argument, NULL, OPT_NO_DST_PREALLOC },
		{ "tls", no_argument, NULL, OPT_TLS },
		{ NULL, 0, NULL, 0 },
	};
	const struct gw_param_info *verify = gw_param_info(GW_PARAM_VERIFY);
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			demo_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':') {
			cli_bad_option("demo", c, argv);
			return CLI_EXIT_USAGE;
		}
		if (demo_opt_apply(d, c, optarg))
			return CLI_EXIT_USAGE;
	}
	if (optind < argc) {
		cli_usage_error("demo", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (migrate_opts_check(&d->mo, true, "demo"))
		return CLI_EXIT_USAGE;
	if (run_opts_check_nics(&d->ro, "demo"))
		return CLI_EXIT_USAGE;
	d->verify_on = cli_params_value(&d->mo.params, GW_PARAM_VERIFY, verify ? verify->def : 1) != 0;
	d->local = cli_params_value(&d->mo.params, GW_PARAM_LOCAL, 0) != 0;
	if (d->tls_gen && (d->mo.params.str_set[GW_SPARAM_TLS_CREDS] || d->mo.params.str_set[GW_SPARAM_TLS_PSK])) {
		cli_usage_error("demo", "--tls makes its own certificates: not with --tls-creds or --tls-psk");
		return CLI_EXIT_USAGE;
	}
	return demo_check(d);
}

/* The private directory of the API sockets. 0, or -1 with the error printed. */
static int make_tmpdir(struct demo *d)
{
	char tmpdir[PATH_MAX];

	snprintf(tmpdir, sizeof(tmpdir), "%s/godwit-demo.XXXXXX",
		 getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		cli_error("demo: cannot create a directory for the API sockets: %s", strerror(errno));
		return -1;
	}
	memcpy(d->tmpdir, tmpdir, sizeof(tmpdir));
	return 0;
}

/* --tls: throw-away credentials for both ends. 0, or -1 printed. */
static int demo_prepare_tls(struct demo *d)
{
	char err[256];

	if (snprintf(d->tls_dir, sizeof(d->tls_dir), "%s/tls", d->tmpdir) >= (int)sizeof(d->tls_dir) ||
	    demo_tls_creds(d->tls_dir, err, sizeof(err))) {
		cli_error("demo: --tls: %s", d->tls_dir[0] ? err : "TMPDIR path too long");
		return -1;
	}
	cli_params_put_str(&d->mo.params, GW_SPARAM_TLS_CREDS, d->tls_dir);
	if (!d->mo.json)
		fprintf(stderr, "godwit demo: throw-away CA and certificates in %s (removed at exit)\n", d->tls_dir);
	return 0;
}

/* Socket paths, the listen URL, log files, the destination's stdout pipe. 0, or -1 printed. */
static int demo_prepare(struct demo *d)
{
	if (snprintf(d->src.api, sizeof(d->src.api), "%s/src.sock", d->tmpdir) >= (int)sizeof(d->src.api) ||
	    snprintf(d->dst.api, sizeof(d->dst.api), "%s/dst.sock", d->tmpdir) >= (int)sizeof(d->dst.api)) {
		cli_error("demo: TMPDIR path too long");
		return -1;
	}
	/* --local passes RAM fds, which only a unix: socket can carry. */
	if (d->local && !d->listen_url) {
		d->listen_url = d->local_url;
		if (snprintf(d->local_url, sizeof(d->local_url), "unix:%s/mig.sock", d->tmpdir) >=
		    (int)sizeof(d->local_url)) {
			cli_error("demo: TMPDIR path too long");
			return -1;
		}
	}
	if (!d->listen_url)
		d->listen_url = "tcp:127.0.0.1:0";
	if (!d->verbose) {
		const char *dir = d->keep_logs ? d->keep_logs : d->tmpdir;

		if (d->keep_logs && mkdir(d->keep_logs, 0755) && errno != EEXIST) {
			cli_error("demo: cannot create %s: %s", d->keep_logs, strerror(errno));
			return -1;
		}
		d->src_log = demo_open_log(dir, "src");
		d->dst_log = demo_open_log(dir, "dst");
		if (d->src_log < 0 || d->dst_log < 0)
			return -1;
		snprintf(d->logs, sizeof(d->logs), "%s/src.log, %s/dst.log", dir, dir);
		snprintf(d->dst_log_path, sizeof(d->dst_log_path), "%s/dst.log", dir);
	}
	if (pipe2(d->dst_out, O_CLOEXEC)) {
		cli_error("demo: pipe: %s", strerror(errno));
		return -1;
	}
	return d->tls_gen ? demo_prepare_tls(d) : 0;
}

static void dst_args(struct demo *d)
{
	struct argv_buf *a = &d->da;

	demo_argv_add(a, "godwit");
	demo_argv_add(a, "run");
	demo_argv_add(a, "--incoming=%s", d->listen_url);
	demo_argv_add(a, "--api=%s", d->dst.api);
	demo_argv_add(a, "--vcpus=%u", d->ro.nr_vcpus);
	/*
	 * Like a real destination, it is created with the guest's size before
	 * the migrate command and its RAM preallocated (QEMU -mem-prealloc):
	 * first touches of memory are not part of the migration. With --local
	 * it maps the source's memory instead: nothing to preallocate.
	 */
	if (d->dst_prealloc && !d->local) {
		demo_argv_add(a, "--memory=%" PRIu64, d->ro.memory_bytes);
		demo_argv_add(a, "--prealloc");
	}
	demo_argv_add(a, "--accel=%s", d->ro.accel);
	if (d->ro.log_level)
		demo_argv_add(a, "--log-level=%s", d->ro.log_level);
	for (unsigned i = 0; i < d->ro.params.nr; i++)
		demo_argv_add(a, "--set=%s=%" PRId64, gw_param_info(d->ro.params.v[i].p)->name,
			      d->ro.params.v[i].value);
	/* TLS: the same credentials on both ends (one directory holds both sides' files). */
	if (d->mo.params.str_set[GW_SPARAM_TLS_CREDS])
		demo_argv_add(a, "--tls-creds=%s", d->mo.params.str[GW_SPARAM_TLS_CREDS]);
	if (d->mo.params.str_set[GW_SPARAM_TLS_PSK])
		demo_argv_add(a, "--tls-psk=%s", d->mo.params.str[GW_SPARAM_TLS_PSK]);
}

static void src_args(struct demo *d)
{
	struct argv_buf *a = &d->sa;

	demo_argv_add(a, "godwit");
	demo_argv_add(a, "run");
	demo_argv_add(a, "--api=%s", d->src.api);
	demo_argv_add(a, "--memory=%" PRIu64, d->ro.memory_bytes);
	demo_argv_add(a, "--vcpus=%u", d->ro.nr_vcpus);
	demo_argv_add(a, "--accel=%s", d->ro.accel);
	demo_argv_add(a, "--workload=%s", d->ro.workload);
	demo_argv_add(a, "--fill=%s", d->ro.fill);
	demo_argv_add(a, "--seed=%" PRIu64, d->ro.seed);
	if (d->ro.memory_file)
		demo_argv_add(a, "--memory-file=%s", d->ro.memory_file);
	if (d->ro.prealloc)
		demo_argv_add(a, "--prealloc");
	for (unsigned i = 0; i < d->ro.params.nr; i++)	/* --dirty-track: the VM is made for it */
		if (d->ro.params.v[i].p == GW_PARAM_DIRTY_BACKEND)
			demo_argv_add(a, "--set=dirty-backend=%" PRId64, d->ro.params.v[i].value);
	if (d->ro.log_level)
		demo_argv_add(a, "--log-level=%s", d->ro.log_level);
}

/* Both children, until the destination listens and the source runs. 0, or -1 printed. */
static int demo_start(struct demo *d)
{
	char err[512];
	int ret;

	dst_args(d);
	src_args(d);
	if (demo_spawn(&d->dst, &d->da, d->dst_out[1], d->dst_log)) {
		cli_error("demo: cannot start the destination: %s", strerror(errno));
		return -1;
	}
	close(d->dst_out[1]);
	d->dst_out[1] = -1;
	/* The source's stdout joins our stderr: our stdout is the report. */
	if (demo_spawn(&d->src, &d->sa, d->src_log, d->src_log)) {
		cli_error("demo: cannot start the source: %s", strerror(errno));
		return -1;
	}
	ret = demo_read_incoming(d->dst_out[0], &d->dst, d->url, sizeof(d->url));
	/* Its stdout closed: it is exiting; reap it to say how (bounded: a hang guard). */
	for (int i = 0; ret == -EPIPE && i < DEMO_EXIT_WAIT_MS / 20 && !demo_child_gone(&d->dst); i++)
		cli_sleep_ms(20);
	if (ret == -EPIPE && demo_child_gone(&d->dst)) {
		char how[64], why[600] = "";

		demo_child_exit_text(&d->dst, how, sizeof(how));
		if (d->dst_log_path[0])
			demo_log_reason(d->dst_log_path, why, sizeof(why));
		cli_error("demo: the destination %s before listening%s%s%s%s%s", how, why[0] ? ": " : "", why,
			  d->dst_log_path[0] ? " (its log: " : "", d->dst_log_path, d->dst_log_path[0] ? ")" : "");
		return -1;
	} else if (ret) {
		cli_error("demo: no 'incoming URL' line from the destination: %s", strerror(-ret));
		return -1;
	}
	if (demo_wait_vm_status(&d->src, "running", DEMO_START_TIMEOUT_MS, NULL, err, sizeof(err))) {
		cli_error("demo: the source did not start: %s", err);
		return -1;
	}
	return 0;
}

/* Ask the source to migrate, follow it to the end. 0, or -1 printed. */
static int demo_migrate(struct demo *d)
{
	struct cli_watch w = {
		.progress = d->mo.json && d->mo.progress == CLI_PROGRESS_AUTO ? CLI_PROGRESS_NEVER :
			    d->mo.progress,
		.interrupts = &demo_stop, .cancel_on_interrupt = true,
	};
	char err[512];
	int ret;

	if (!d->mo.json)
		fprintf(stderr, "godwit demo: migrating to %s%s%s\n", d->url,
			d->logs[0] ? "; logs: " : "", d->logs);
	w.ctl = cli_ctl_open(d->src.api, false, err, sizeof(err));
	if (!w.ctl || cli_ctl_migrate(w.ctl, d->url, &d->mo.params, err, sizeof(err))) {
		cli_error("demo: migrate: %s", err);
		cli_ctl_close(w.ctl);
		return -1;
	}
	ret = cli_watch_migration(&w, &d->final, err, sizeof(err));
	cli_ctl_close(w.ctl);
	if (ret) {
		cli_error("demo: while migrating: %s", err);
		return -1;
	}
	d->completed = cli_status_is(d->final, GW_STATUS_COMPLETED);
	return 0;
}

/* No automatic check result on the destination yet: ask for one. */
static void ask_check(struct demo *d)
{
	json_t *r;
	char err[512];
	const char *res;

	if (cli_api(d->dst.api, "check", &r, err, sizeof(err)))
		return;
	res = js_str(js_get(r, "result"), "n/a");
	if (!strcmp(res, "mismatch"))
		snprintf(d->dst_check, sizeof(d->dst_check), "failed: %s",
			 js_str(js_get(r, "message"), ""));
	else
		snprintf(d->dst_check, sizeof(d->dst_check), "%s", res);
	json_decref(r);
}

/* After completion: does the guest run on the destination, and did its check pass? */
static void demo_observe(struct demo *d)
{
	json_t *st = NULL;
	int64_t deadline_ms;
	char err[512];

	if (demo_wait_vm_status(&d->dst, "running", DEMO_RESUME_TIMEOUT_MS, &st, err, sizeof(err))) {
		cli_error("demo: destination: %s", err);
		d->progress = 0;
		return;
	}
	d->p1 = (uint64_t)js_num(js_get(st, "guest-progress-count"), 0);
	json_decref(st);
	/*
	 * The guest may start late (the verify workload first checks all its
	 * RAM, slower on a busy host): sample until it moved or the deadline,
	 * so that the machine's speed never decides.
	 */
	deadline_ms = cli_now_ms() + DEMO_PROGRESS_TIMEOUT_MS;
	do {
		cli_sleep_ms(DEMO_PROGRESS_GAP_MS);
		if (cli_api(d->dst.api, "status", &st, err, sizeof(err)))
			break;
		d->p2 = (uint64_t)js_num(js_get(st, "guest-progress-count"), 0);
		snprintf(d->dst_check, sizeof(d->dst_check), "%s",
			 js_str(js_get(st, "verify-check"), "n/a"));
		json_decref(st);
	} while (d->p2 <= d->p1 && cli_now_ms() < deadline_ms && !demo_stop);
	d->progress = d->p2 > d->p1;
	if (!strcmp(d->dst_check, "n/a"))
		ask_check(d);
}

/*
 * verified: at least one check ran, and none failed. The RAM digests are
 * compared when asked, except in a local migration: the destination maps
 * the source's RAM, one copy, so there is nothing to compare ("RAM
 * shared"), and what verifies it is the guest's own check on the
 * destination (the workload's, e.g. verify or dirty).
 */
static void demo_verdict(struct demo *d)
{
	bool digest = js_bool(js_get(d->final, "verified"), false);
	const char *verify = js_str(js_get(d->final, "verify"), "off");
	bool compared = strcmp(verify, gw_verify_name(GW_VERIFY_OFF)) != 0;
	int run = 0, bad = 0;

	if (d->verify_on && compared) {
		run++;
		bad += !digest;
	}
	if (!strcmp(d->dst_check, "ok"))
		run++;
	else if (strcmp(d->dst_check, "n/a"))
		run++, bad++;
	d->verified = run > 0 && !bad;
	snprintf(d->detail, sizeof(d->detail), "%s%s, workload check %s",
		 compared ? "RAM digests " : d->local ? "RAM shared (local)" : "RAM digests not compared",
		 !compared ? "" : !strcmp(verify, gw_verify_name(GW_VERIFY_OK)) ? "equal" : verify,
		 d->dst_check);
}

/* The report on stdout; the exit code. */
static int demo_report(struct demo *d)
{
	static const char *const skip[] = {
		"ok", "role", "vm-status", "verified", "verify-check", "guest-progress-count",
		"ram-shmem-bytes", "incoming-url", "settled", NULL,
	};
	char src_vs[64], dst_vs[64];

	demo_vm_status_now(&d->src, src_vs, sizeof(src_vs));
	demo_vm_status_now(&d->dst, dst_vs, sizeof(dst_vs));
	if (d->mo.json) {
		json_t *out = js_copy_without(d->final, skip);

		if (out) {
			js_set_bool(out, "verified", d->verified);
			js_set_bool(out, "guest-progress", d->progress > 0);
			js_set_str(out, "source-vm-status", src_vs);
			js_set_str(out, "destination-vm-status", dst_vs);
			js_set_str(out, "destination-verify-check", d->dst_check);
			if (d->detail[0])
				js_set_str(out, "verified-detail", d->detail);
			json_object_set_new(out, "guest-progress-samples",
					    json_pack("[I,I]", (json_int_t)d->p1, (json_int_t)d->p2));
			if (d->logs[0])
				js_set_str(out, "logs", d->logs);
			js_write(stdout, out);
			putchar('\n');
		}
		json_decref(out);
	} else {
		struct report_extra x;

		report_extra_init(&x);
		x.verified = d->completed ? d->verified : -1;
		x.verify_detail = d->detail[0] ? d->detail : NULL;
		x.guest_progress = d->progress;
		x.source_vm_status = src_vs;
		x.destination_vm_status = dst_vs;
		x.logs = d->logs[0] ? d->logs : NULL;
		report_print(stdout, d->final, &x);
	}
	fflush(stdout);
	return d->completed && d->verified && d->progress > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static void demo_teardown(struct demo *d)
{
	json_decref(d->final);
	demo_child_stop(&d->src, !demo_stop);
	demo_child_stop(&d->dst, !demo_stop);
	for (unsigned i = 0; i < 2; i++)
		if (d->dst_out[i] >= 0)
			close(d->dst_out[i]);
	if (d->src_log > STDERR_FILENO)
		close(d->src_log);
	if (d->dst_log > STDERR_FILENO)
		close(d->dst_log);
	unlink(d->src.api);
	unlink(d->dst.api);
	if (d->tls_dir[0])
		demo_tls_remove(d->tls_dir);
	if (d->listen_url == d->local_url)
		unlink(d->local_url + 5);
	/* The directory stays while it holds the logs. */
	if (!d->logs[0] || d->keep_logs)
		rmdir(d->tmpdir);
	demo_argv_free(&d->sa);
	demo_argv_free(&d->da);
}

/* Everything after parsing: the exit code. */
static int demo_run(struct demo *d)
{
	int ret = CLI_EXIT_FAIL;

	demo_catch_signals();
	if (make_tmpdir(d))
		return CLI_EXIT_FAIL;
	if (!demo_prepare(d) && !demo_start(d) && !demo_migrate(d)) {
		if (d->completed) {
			demo_observe(d);
			demo_verdict(d);
		}
		ret = demo_report(d);
	}
	demo_teardown(d);
	if (demo_stop && ret != CLI_EXIT_OK) {
		fprintf(stderr, "godwit demo: interrupted; both children stopped\n");
		ret = CLI_EXIT_INTERRUPTED;
	}
	return ret;
}

int cmd_demo(int argc, char **argv)
{
	struct demo d;
	int ret;

	demo_init(&d);
	ret = demo_parse(&d, argc, argv);
	return ret < 0 ? demo_run(&d) : ret;
}
