/* SPDX-License-Identifier: MIT */
/*
 * godwit migrate: talk to a running VM's API socket (or QMP socket).
 *   --to URL        start a migration, then follow it to its end (progress
 *                   line, --timeline, Ctrl-C cancels) and report
 *   --cancel        cancel the running migration
 *   --set P=V ...   (or --max-bandwidth / --downtime-limit without --to)
 *                   change parameters, live ones take effect at once
 *   --incoming URL  a destination started with --incoming defer listens
 *   --resolve ...   settle an unknown outcome
 *   --start-postcopy  switch the running migration to postcopy now
 *   --recover URL   (destination, postcopy-paused) listen at URL again
 *   --resume --to URL (source, postcopy-paused) reconnect to the destination
 *                   listening at URL, then follow as for --to
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void migrate_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit migrate (--api PATH | --qmp PATH) --to URL [OPTIONS]   migrate, follow, report\n"
		"       godwit migrate (--api PATH | --qmp PATH) --cancel             cancel the running migration\n"
		"       godwit migrate (--api PATH | --qmp PATH) --set PARAM=VALUE    change parameters\n"
		"       godwit migrate (--api PATH | --qmp PATH) --incoming URL       a destination started with\n"
		"                      --incoming defer listens on URL now\n"
		"       godwit migrate (--api PATH | --qmp PATH) --start-postcopy  switch a running migration\n"
		"                      to postcopy now (it needs --postcopy)\n"
		"       godwit migrate (--api DST | --qmp DST) --recover URL  postcopy paused: the destination\n"
		"                      listens at URL for the source's reconnection\n"
		"       godwit migrate (--api SRC | --qmp SRC) --resume --to URL  postcopy paused: the source\n"
		"                      reconnects to URL, then follows as for --to\n"
		"       godwit migrate --api PATH --resolve source|destination\n"
		"                      after an 'unknown' outcome (go sent, resumed lost) or a verify\n"
		"                      mismatch, say where the VM runs once you asked (or stopped) the\n"
		"                      destination: 'source' resumes it here\n"
		"\n"
		"  --api PATH                the VM's godwit API socket (godwit run --api)\n"
		"  --qmp PATH                or its QMP socket (godwit run --qmp, or QEMU's -qmp): parameters\n"
		"                            go by QEMU's names; those QEMU has no name for are refused\n"
		"  --to URL                  destination: tcp:HOST:PORT or unix:PATH\n"
		"  --channels N              data connections (default 1)\n"
		"  --compress ALG[:LEVEL]    zstd, lz4, zlib, isal, auto or none (default none)\n"
		"  --xbzrle[=CACHE_SIZE]     delta-encode re-sent pages (default off; cache 64M when given)\n"
		"  --downtime-limit MS       switch over when the expected downtime fits (default 300)\n"
		"  --max-bandwidth RATE      bytes per second over all channels, K/M/G/T (default 0 = none)\n"
		"  --converge-timeout MS     give up converging after this long (default 0 = never) ...\n"
		"  --on-timeout cancel|force|keep-going  ... and then (default cancel; with --to it\n"
		"                            needs a converge timeout)\n"
		"  --local                   same host: pass RAM by file descriptor (unix: only; default off)\n"
		"  --no-verify               skip the RAM digest comparison (default: compared after resume)\n"
		"  --auto-converge           throttle the vCPUs while the guest outruns the link (default off)\n"
		"  --dirty-limit RATE        cap each vCPU's dirty rate (bytes/s, K/M/G/T) when precopy\n"
		"                            does not converge (default 0 = off) ...\n"
		"  --dirty-limit-start       ... or from the start\n"
		"  --postcopy                allow switching to postcopy: resume on the destination first,\n"
		"                            fetch the rest on demand (default off; --start-postcopy\n"
		"                            switches, or ...)\n"
		"  --postcopy-after WHEN     ... switch by itself: 'auto' (the expected downtime has not\n"
		"                            fallen by a tenth for 3 rounds), N (after N precopy rounds) or a\n"
		"                            duration (2000ms, 2s: after that long in precopy); implies\n"
		"                            --postcopy (default: never by itself)\n"
		"  --tls-creds DIR           mutual TLS 1.3: ca-cert.pem, client-cert.pem, client-key.pem\n"
		"                            (QEMU's x509 layout; default: none, plain)\n"
		"  --tls-hostname NAME       the name in the destination's certificate (default: the\n"
		"                            URL's host)\n"
		"  --tls-psk FILE            TLS 1.3 with a pre-shared key (QEMU's keys.psk; default: none)\n"
		"  --set PARAM=VALUE         any parameter below, by godwit's or QEMU's name (repeatable)\n"
		"  --detach                  return once the migration started (default: follow it)\n"
		"  --progress auto|always|never  the live progress line on stderr: auto (default) on a\n"
		"                            terminal only; always: also plain lines when not a terminal\n"
		"  --timeline FILE           write a CSV sample every 100 ms and per round (bench/plot.py;\n"
		"                            default: none)\n"
		"  --json                    print the final statistics as one JSON object\n"
		"\n"
		"Ctrl-C while following cancels the migration (the source keeps its VM); a second\n"
		"Ctrl-C leaves without waiting.\n"
		"Exit status: 0 completed, 1 failed/cancelled/unknown or error, 2 bad usage,\n"
		"130 interrupted by Ctrl-C.\n\n");
	cli_print_params(out);
}

/* The command line into @o, @path, @qmp. -1 to go on, else the exit code (help, bad usage). */
/* What the options ask for, together: 0, or a usage error (printed). */
static int check_actions(const struct migrate_opts *o, const char *api, const char *qmp_path)
{
	if (!api == !qmp_path) {
		cli_usage_error("migrate", api ? "give --api PATH or --qmp PATH, not both" :
				"--api PATH (or --qmp PATH) is required");
		return -1;
	}
	if (o->resolve && qmp_path) {
		cli_usage_error("migrate", "--resolve is a godwit API request: give --api PATH");
		return -1;
	}
	if ((o->start_postcopy || o->recover || o->resume) &&
	    (cli_params_count(&o->params) || o->cancel || o->incoming || o->resolve ||
	     (o->start_postcopy + !!o->recover + o->resume) > 1 || (o->to && !o->resume))) {
		cli_usage_error("migrate", "--%s takes no other action or parameters%s",
				o->start_postcopy ? "start-postcopy" : o->recover ? "recover" : "resume",
				o->resume ? " (only --to URL)" : "");
		return -1;
	}
	if (o->resume && !o->to) {
		cli_usage_error("migrate", "--resume needs --to URL (where the destination's --recover listens)");
		return -1;
	}
	if (o->to && !qmp_path) {
		char why[256];

		if (gw_url_check(o->to, false, why, sizeof(why))) {
			cli_usage_error("migrate", "--to %s: %s", o->to, why);
			return -1;
		}
	}
	if ((o->timeline || o->detach) && !o->to) {
		cli_usage_error("migrate", "%s goes with --to URL", o->detach ? "--detach" : "--timeline");
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct migrate_opts *o, const char **path, bool *qmp)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		CLI_MIGRATE_PARAM_OPTS,
		{ "api", required_argument, NULL, OPT_API },
		{ "qmp", required_argument, NULL, OPT_QMP },
		{ "to", required_argument, NULL, OPT_TO },
		{ "cancel", no_argument, NULL, OPT_CANCEL },
		{ "resolve", required_argument, NULL, OPT_RESOLVE },
		{ "incoming", required_argument, NULL, OPT_INCOMING_URL },
		{ "start-postcopy", no_argument, NULL, OPT_START_POSTCOPY },
		{ "resume", no_argument, NULL, OPT_RESUME },
		{ "recover", required_argument, NULL, OPT_RECOVER },
		{ "detach", no_argument, NULL, OPT_DETACH },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "progress", required_argument, NULL, OPT_PROGRESS },
		{ "timeline", required_argument, NULL, OPT_TIMELINE },
		{ NULL, 0, NULL, 0 },
	};
	const char *api = NULL, *qmp_path = NULL;
	int c;

	memset(o, 0, sizeof(*o));
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			migrate_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == '?' || c == ':') {
			cli_bad_option("migrate", c, argv);
			return CLI_EXIT_USAGE;
		}
		if (c == OPT_API || c == OPT_QMP) {
			const char **at = c == OPT_API ? &api : &qmp_path;

			if (*at) {
				cli_repeated("migrate", c == OPT_API ? "--api" : "--qmp", *at, optarg);
				return CLI_EXIT_USAGE;
			}
			*at = optarg;
			continue;
		}
		if (migrate_opt_apply(o, c, optarg, "migrate"))
			return CLI_EXIT_USAGE;
	}
	if (optind < argc) {
		cli_usage_error("migrate", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (check_actions(o, api, qmp_path))
		return CLI_EXIT_USAGE;
	*path = api ? api : qmp_path;
	*qmp = qmp_path != NULL;
	return migrate_opts_check(o, o->to != NULL, "migrate") ? CLI_EXIT_USAGE : -1;
}

/* --resolve source|destination after an unknown outcome or a verify mismatch. */
static int do_resolve(const struct migrate_opts *o, const char *api)
{
	json_t *reply;
	char req[64], err[512];

	if (o->to || cli_params_count(&o->params) || o->cancel || o->incoming) {
		cli_usage_error("migrate", "--resolve takes no other option");
		return CLI_EXIT_USAGE;
	}
	snprintf(req, sizeof(req), "resolve runs=%s", o->resolve);
	if (cli_api(api, req, &reply, err, sizeof(err))) {
		cli_error("resolve: %s", err);
		return CLI_EXIT_FAIL;
	}
	json_decref(reply);
	printf(o->json ? "{\"resolved\":\"%s\"}\n" : "resolved: the VM runs on the %s\n", o->resolve);
	return CLI_EXIT_OK;
}

static int do_cancel(const struct migrate_opts *o, struct cli_ctl *ctl)
{
	char err[512];

	if (o->to || cli_params_count(&o->params) || o->incoming) {
		cli_usage_error("migrate", "--cancel takes no --to, --incoming or parameters");
		return CLI_EXIT_USAGE;
	}
	if (cli_ctl_cancel(ctl, err, sizeof(err))) {
		cli_error("cancel: %s", err);
		return CLI_EXIT_FAIL;
	}
	printf(o->json ? "{\"cancel\":\"requested\"}\n" : "cancel requested\n");
	return CLI_EXIT_OK;
}

static int do_incoming(const struct migrate_opts *o, struct cli_ctl *ctl)
{
	char err[512], bound[PATH_MAX + 16];

	if (o->to || cli_params_count(&o->params)) {
		cli_usage_error("migrate", "--incoming takes no --to or parameters (give those to 'godwit run')");
		return CLI_EXIT_USAGE;
	}
	if (cli_ctl_incoming(ctl, o->incoming, bound, sizeof(bound), err, sizeof(err))) {
		cli_error("incoming: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (o->json)
		printf("{\"incoming\":\"%s\"}\n", bound);
	else
		printf("incoming %s\n", bound);
	return CLI_EXIT_OK;
}

/* Parameters without --to: applied now (live ones) or to the next migration. */
static int do_set(const struct migrate_opts *o, struct cli_ctl *ctl)
{
	char err[512], applied[32];

	if (!cli_params_count(&o->params)) {
		cli_usage_error("migrate", "nothing to do: give --to URL, --cancel, --incoming URL or --set PARAM=VALUE");
		return CLI_EXIT_USAGE;
	}
	if (cli_ctl_set(ctl, &o->params, applied, sizeof(applied), err, sizeof(err))) {
		cli_error("set: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (o->json)
		printf("{\"applied\":\"%s\"}\n", applied);
	else
		printf("set: applied %s\n", applied);
	return CLI_EXIT_OK;
}

/* --start-postcopy, --recover URL: one request, one line of answer. */
static int do_postcopy_request(const struct migrate_opts *o, struct cli_ctl *ctl)
{
	char err[512], bound[PATH_MAX + 16];

	if (o->start_postcopy) {
		if (cli_ctl_start_postcopy(ctl, err, sizeof(err))) {
			cli_error("start-postcopy: %s", err);
			return CLI_EXIT_FAIL;
		}
		printf(o->json ? "{\"start-postcopy\":\"requested\"}\n" : "postcopy requested\n");
		return CLI_EXIT_OK;
	}
	if (cli_ctl_postcopy_reconnect(ctl, true, o->recover, bound, sizeof(bound), err, sizeof(err))) {
		cli_error("recover: %s", err);
		return CLI_EXIT_FAIL;
	}
	printf(o->json ? "{\"recover\":\"%s\"}\n" : "recovering: listening at %s\n", bound);
	return CLI_EXIT_OK;
}

/* Follow the migration to its end and report it. */
static int follow_and_report(const struct migrate_opts *o, struct cli_ctl *ctl)
{
	static const char *const skip_ok[] = { "ok", "settled", NULL };
	static volatile sig_atomic_t interrupts;
	struct cli_watch w = {
		.ctl = ctl, .progress = o->json ? CLI_PROGRESS_NEVER : o->progress,
		.timeline = o->timeline, .interrupts = &interrupts, .cancel_on_interrupt = true,
	};
	json_t *st = NULL;
	char err[512];
	int ret;

	if (o->progress == CLI_PROGRESS_ALWAYS)
		w.progress = CLI_PROGRESS_ALWAYS;	/* asked for, even with --json (on stderr) */
	cli_catch_interrupts(&interrupts);
	ret = cli_watch_migration(&w, &st, err, sizeof(err));
	if (ret == -EINTR)
		return CLI_EXIT_INTERRUPTED;
	if (ret) {
		cli_error("while following the migration: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (o->json) {
		json_t *out = js_copy_without(st, skip_ok);

		js_write(stdout, out);
		putchar('\n');
		json_decref(out);
	} else {
		struct report_extra x;

		report_extra_init(&x);
		x.source_vm_status = js_str(js_get(st, "vm-status"), NULL);
		for (unsigned i = 0; i < o->params.nr; i++)
			if (o->params.v[i].p == GW_PARAM_LOCAL && o->params.v[i].value)
				x.verify_detail = "RAM shared (local), no digests: the guest's check on the "
						  "destination verifies it (godwit check there)";
		report_print(stdout, st, &x);
	}
	ret = cli_status_is(st, GW_STATUS_COMPLETED) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
	if (!strcmp(js_str(js_get(st, "verify"), "off"), gw_verify_name(GW_VERIFY_MISMATCH))) {
		cli_error("VERIFY MISMATCH: the destination's RAM differs from the source's; the source "
			  "keeps its copy paused: stop the destination, then --resolve source");
		ret = CLI_EXIT_FAIL;
	}
	if (w.interrupted && cli_status_is(st, GW_STATUS_CANCELLED)) {
		cli_error("migration cancelled (Ctrl-C); the source keeps running its VM");
		ret = CLI_EXIT_INTERRUPTED;
	}
	json_decref(st);
	fflush(stdout);
	return ret;
}

/* --to URL: start the migration (or, with --resume, reconnect a paused postcopy), then follow it. */
static int do_migrate(const struct migrate_opts *o, struct cli_ctl *ctl)
{
	char err[512], bound[PATH_MAX + 16];

	if (o->resume) {
		if (cli_ctl_postcopy_reconnect(ctl, false, o->to, bound, sizeof(bound), err, sizeof(err))) {
			cli_error("resume: %s", err);
			return CLI_EXIT_FAIL;
		}
	} else if (cli_ctl_migrate(ctl, o->to, &o->params, err, sizeof(err))) {
		cli_error("migrate: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (o->detach) {
		if (o->json)
			printf(o->resume ? "{\"resume\":\"started\"}\n" : "{\"migrate\":\"started\"}\n");
		else
			printf(o->resume ? "reconnecting to %s\n" : "migration to %s started\n", o->to);
		return CLI_EXIT_OK;
	}
	return follow_and_report(o, ctl);
}

int cmd_migrate(int argc, char **argv)
{
	struct migrate_opts o;
	struct cli_ctl *ctl;
	const char *path;
	char err[512];
	bool qmp;
	int ret = parse_args(argc, argv, &o, &path, &qmp);

	if (ret >= 0)
		return ret;
	signal(SIGPIPE, SIG_IGN);
	if (o.resolve)
		return do_resolve(&o, path);
	ctl = cli_ctl_open(path, qmp, err, sizeof(err));
	if (!ctl) {
		cli_error("migrate: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (o.start_postcopy || o.recover)
		ret = do_postcopy_request(&o, ctl);
	else if (o.cancel)
		ret = do_cancel(&o, ctl);
	else if (o.incoming)
		ret = do_incoming(&o, ctl);
	else if (!o.to)
		ret = do_set(&o, ctl);
	else
		ret = do_migrate(&o, ctl);
	cli_ctl_close(ctl);
	return ret;
}
