/* SPDX-License-Identifier: MIT */
/*
 * godwit migrate: talk to a running VM's API socket.
 *   --to URL        start a migration, then poll status until it ends
 *   --cancel        cancel the running migration
 *   --set P=V ...   (or --max-bandwidth / --downtime-limit without --to)
 *                   change parameters, live ones take effect at once
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *cli_params_line(const char *cmd, const char *url, const struct cli_params *ps)
{
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	unsigned i;

	if (!f)
		return NULL;
	fputs(cmd, f);
	if (url)
		fprintf(f, " url=%s", url);
	for (i = 0; i < ps->nr; i++)
		fprintf(f, " %s=%" PRId64, gw_param_info(ps->v[i].p)->name, ps->v[i].value);
	for (i = 0; i < GW_SPARAM__COUNT; i++)
		if (ps->str_set[i])
			fprintf(f, " %s=%s", gw_str_param_name((enum gw_str_param)i), ps->str[i]);
	if (fclose(f)) {
		free(line);
		return NULL;
	}
	return line;
}

int cli_wait_migration(const char *api, bool progress, volatile sig_atomic_t *stop,
		       struct json **final, char *err, size_t err_len)
{
	bool shown = false;
	int ret;

	*final = NULL;
	for (;;) {
		struct json *st;

		if (stop && *stop) {
			snprintf(err, err_len, "interrupted");
			ret = -EINTR;
			break;
		}
		ret = cli_api(api, "status", &st, err, err_len);
		if (ret)
			break;
		if (cli_status_terminal(st)) {
			*final = st;
			break;
		}
		if (progress) {
			fputc('\r', stderr);
			report_progress_line(stderr, st);
			fputs("\033[K", stderr);
			shown = true;
		}
		json_free(st);
		cli_sleep_ms(CLI_POLL_INTERVAL_MS);
	}
	if (shown)
		fputc('\n', stderr);
	return ret;
}

static void migrate_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit migrate --api PATH --to URL [OPTIONS]   start a migration and wait for it\n"
		"       godwit migrate --api PATH --cancel             cancel the running migration\n"
		"       godwit migrate --api PATH --resolve source|destination\n"
		"                      after an 'unknown' outcome (go sent, resumed lost), say where\n"
		"                      the VM runs once you asked the destination: 'source' resumes it here\n"
		"       godwit migrate --api PATH --set PARAM=VALUE    change parameters (live ones at once)\n"
		"\n"
		"  --to URL                  destination: tcp:HOST:PORT or unix:PATH\n"
		"  --channels N              data connections\n"
		"  --compress ALG[:LEVEL]    zstd, lz4, zlib, isal, auto or none\n"
		"  --xbzrle[=CACHE_SIZE]     delta-encode re-sent pages (default cache 64M)\n"
		"  --downtime-limit MS       switch over when the expected downtime fits\n"
		"  --max-bandwidth RATE      bytes per second over all channels (K/M/G), 0 = none\n"
		"  --converge-timeout MS     give up converging after this long ...\n"
		"  --on-timeout cancel|force ... and cancel (default) or switch over anyway\n"
		"  --local                   same host: pass RAM by file descriptor (unix: only)\n"
		"  --no-verify               skip the RAM digest comparison (it runs after resume)\n"
		"  --auto-converge           throttle the vCPUs while the guest outruns the link\n"
		"  --dirty-limit RATE        cap each vCPU's dirty rate (bytes/s, K/M/G) when\n"
		"                            precopy does not converge ...\n"
		"  --dirty-limit-start       ... or from the start\n"
		"  --tls-creds DIR           mutual TLS 1.3: ca-cert.pem, client-cert.pem, client-key.pem\n"
		"                            (QEMU's x509 layout)\n"
		"  --tls-hostname NAME       the name in the destination's certificate (default: the\n"
		"                            URL's host)\n"
		"  --tls-psk FILE            TLS 1.3 with a pre-shared key (QEMU's keys.psk)\n"
		"  --set PARAM=VALUE         any parameter below (repeatable)\n"
		"  --detach                  return once the migration started\n"
		"  --json                    print the final statistics as one JSON object\n"
		"\n"
		"Exit status: 0 completed, 1 failed/cancelled/unknown or error, 2 bad usage.\n\n");
	cli_print_params(out);
}

/* The command line into @o and @api. -1 to go on, else the exit code (help, bad usage). */
static int parse_args(int argc, char **argv, struct migrate_opts *o, const char **api)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		CLI_MIGRATE_PARAM_OPTS,
		{ "api", required_argument, NULL, OPT_API },
		{ "to", required_argument, NULL, OPT_TO },
		{ "cancel", no_argument, NULL, OPT_CANCEL },
		{ "resolve", required_argument, NULL, OPT_RESOLVE },
		{ "detach", no_argument, NULL, OPT_DETACH },
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	*api = NULL;
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
		if (c == OPT_API) {
			*api = optarg;
			continue;
		}
		if (migrate_opt_apply(o, c, optarg, "migrate"))
			return CLI_EXIT_USAGE;
	}
	if (optind < argc) {
		cli_usage_error("migrate", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (!*api) {
		cli_usage_error("migrate", "--api PATH is required");
		return CLI_EXIT_USAGE;
	}
	migrate_opts_finish(o);
	return -1;
}

/* --resolve source|destination after an unknown outcome. */
static int do_resolve(const struct migrate_opts *o, const char *api)
{
	struct json *reply;
	char req[64], err[512];

	if (o->to || cli_params_count(&o->params) || o->cancel) {
		cli_usage_error("migrate", "--resolve takes no other option");
		return CLI_EXIT_USAGE;
	}
	snprintf(req, sizeof(req), "resolve runs=%s", o->resolve);
	if (cli_api(api, req, &reply, err, sizeof(err))) {
		cli_error("resolve: %s", err);
		return CLI_EXIT_FAIL;
	}
	json_free(reply);
	printf(o->json ? "{\"resolved\":\"%s\"}\n" : "resolved: the VM runs on the %s\n", o->resolve);
	return CLI_EXIT_OK;
}

static int do_cancel(const struct migrate_opts *o, const char *api)
{
	struct json *reply;
	char err[512];

	if (o->to || cli_params_count(&o->params)) {
		cli_usage_error("migrate", "--cancel takes no --to or parameters");
		return CLI_EXIT_USAGE;
	}
	if (cli_api(api, "cancel", &reply, err, sizeof(err))) {
		cli_error("cancel: %s", err);
		return CLI_EXIT_FAIL;
	}
	json_free(reply);
	if (!o->json)
		printf("cancel requested\n");
	else
		printf("{\"cancel\":\"requested\"}\n");
	return CLI_EXIT_OK;
}

/* Parameters without --to: applied now (live ones) or to the next migration. */
static int do_set(const struct migrate_opts *o, const char *api)
{
	struct json *reply;
	char err[512], *line;

	if (!cli_params_count(&o->params)) {
		cli_usage_error("migrate", "nothing to do: give --to URL, --cancel or --set PARAM=VALUE");
		return CLI_EXIT_USAGE;
	}
	line = cli_params_line("set", NULL, &o->params);
	if (!line || cli_api(api, line, &reply, err, sizeof(err))) {
		cli_error("set: %s", line ? err : "out of memory");
		free(line);
		return CLI_EXIT_FAIL;
	}
	if (o->json) {
		json_write(stdout, reply);
		putchar('\n');
	} else {
		printf("set: applied %s\n", json_str(json_get(reply, "applied"), "?"));
	}
	json_free(reply);
	free(line);
	return CLI_EXIT_OK;
}

/* --to URL: start the migration, then (unless --detach) wait for it and report. */
static int do_migrate(const struct migrate_opts *o, const char *api)
{
	static const char *const skip_ok[] = { "ok", NULL };
	struct json *reply = NULL, *st = NULL;
	char err[512], *line;
	int ret;

	line = cli_params_line("migrate", o->to, &o->params);
	if (!line) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	ret = cli_api(api, line, &reply, err, sizeof(err));
	free(line);
	if (ret) {
		cli_error("migrate: %s", err);
		return CLI_EXIT_FAIL;
	}
	json_free(reply);
	if (o->detach) {
		if (o->json)
			printf("{\"migrate\":\"started\"}\n");
		else
			printf("migration to %s started\n", o->to);
		return CLI_EXIT_OK;
	}
	ret = cli_wait_migration(api, !o->json && isatty(STDERR_FILENO), NULL, &st, err, sizeof(err));
	if (ret) {
		cli_error("while waiting for the migration: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (o->json) {
		putchar('{');
		json_write_members(stdout, st, skip_ok);
		puts("}");
	} else {
		struct report_extra x;

		report_extra_init(&x);
		x.source_vm_status = json_str(json_get(st, "vm-status"), NULL);
		report_print(stdout, st, &x);
	}
	ret = cli_status_is(st, GW_STATUS_COMPLETED) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
	if (!strcmp(json_str(json_get(st, "verify"), "off"), gw_verify_name(GW_VERIFY_MISMATCH))) {
		cli_error("VERIFY MISMATCH: the destination's RAM differs from the source's; the source "
			  "keeps its copy paused: stop the destination, then --resolve source");
		ret = CLI_EXIT_FAIL;
	}
	json_free(st);
	fflush(stdout);
	return ret;
}

int cmd_migrate(int argc, char **argv)
{
	struct migrate_opts o;
	const char *api;
	int ret = parse_args(argc, argv, &o, &api);

	if (ret >= 0)
		return ret;
	signal(SIGPIPE, SIG_IGN);
	if (o.resolve)
		return do_resolve(&o, api);
	if (o.cancel)
		return do_cancel(&o, api);
	if (!o.to)
		return do_set(&o, api);
	return do_migrate(&o, api);
}
