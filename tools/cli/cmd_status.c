/* SPDX-License-Identifier: MIT */
/*
 * godwit status: the migration statistics of a running VM plus its state
 * ("vm-status"), workload, guest progress counter and last verify result;
 * from the godwit API, or from a QMP socket (godwit's or QEMU's).
 * godwit check: run the workload's verification now.
 * godwit quit: stop a running godwit.
 */
#include "cli/cli.h"

#include <signal.h>
#include <string.h>

static const char *const skip_ok[] = { "ok", NULL };

/*
 * The common "--api PATH [--qmp PATH] [--json]" command line (@qmp NULL:
 * no --qmp). 0 to go on, -1 after --help (exit 0), else the exit code.
 */
static int parse_common(int argc, char **argv, const char *cmd, const char **api,
			const char **qmp, bool *json, void (*usage)(FILE *))
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		{ "api", required_argument, NULL, OPT_API },
		{ "qmp", required_argument, NULL, OPT_QMP },
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*api = NULL;
	if (qmp)
		*qmp = NULL;
	*json = false;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			usage(stdout);
			return -1;
		case OPT_API:
			*api = optarg;
			break;
		case OPT_QMP:
			if (!qmp) {
				cli_usage_error(cmd, "--qmp: '%s' is a godwit API request (give --api PATH)", cmd);
				return CLI_EXIT_USAGE;
			}
			*qmp = optarg;
			break;
		case OPT_JSON:
			*json = true;
			break;
		default:
			cli_bad_option(cmd, c, argv);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (!*api == !(qmp && *qmp)) {
		cli_usage_error(cmd, *api ? "give --api PATH or --qmp PATH, not both" :
				qmp ? "--api PATH (or --qmp PATH) is required" : "--api PATH is required");
		return CLI_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void status_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit status (--api PATH | --qmp PATH) [--json]\n"
		"Migration statistics (QEMU query-migrate names) and the VM's state:\n"
		"vm-status, workload, guest-progress-count, verify-check.\n"
		"\n"
		"  --api PATH   the VM's godwit API socket\n"
		"  --qmp PATH   or a QMP socket (godwit run --qmp, or QEMU's -qmp): QEMU's figures\n"
		"  --json       one JSON object (default: text)\n"
		"\n"
		"Exit status: 0, 1 when the socket does not answer, 2 bad usage.\n");
}

/* A destination that has no migration yet says where it waits. */
static void print_waiting(const json_t *st)
{
	const char *url = js_str(js_get(st, "incoming-url"), "");

	if (url[0])
		printf("migration:         none yet: waiting for a source on %s\n", url);
	else
		printf("migration:         none yet: waiting for 'godwit migrate --incoming URL' "
		       "(or QMP migrate-incoming)\n");
}

static void print_status(const json_t *st)
{
	const char *role = js_str(js_get(st, "role"), "?");
	struct report_extra x;
	char line[400];

	/* QMP names no accelerator: none is shown rather than "?". */
	printf("vm-status:         %s (%s%s%s)\n", js_str(js_get(st, "vm-status"), "?"), role,
	       js_get(st, "accel") ? ", accel " : "", js_str(js_get(st, "accel"), ""));
	if (js_get(st, "workload"))
		printf("workload:          %s, progress %.0f\n", js_str(js_get(st, "workload"), "?"),
		       js_num(js_get(st, "guest-progress-count"), 0));
	if (js_get(st, "verify-check"))
		printf("verify-check:      %s\n", js_str(js_get(st, "verify-check"), "n/a"));
	if (js_get(st, "incoming-url") && js_str(js_get(st, "incoming-url"), "")[0])
		printf("incoming-url:      %s\n", js_str(js_get(st, "incoming-url"), ""));
	report_extra_init(&x);
	if (cli_status_is(st, GW_STATUS_NONE) && !strcmp(role, "destination")) {
		print_waiting(st);
	} else if (cli_status_is(st, GW_STATUS_NONE)) {
		printf("migration:         none yet\n");
	} else if (cli_status_terminal(st)) {
		report_print(stdout, st, &x);
	} else {
		const char *hint = js_str(js_get(st, "converge-hint"), "");

		cli_progress_line(st, line, sizeof(line));
		printf("migration:         %s\n", line);
		if (hint[0])
			printf("%-19s%s\n", js_bool(js_get(st, "converging"), true) ? "how:" : "why:", hint);
	}
}

int cmd_status(int argc, char **argv)
{
	struct cli_ctl *ctl;
	const char *api, *qmp;
	char err[512];
	json_t *st;
	bool json;
	int ret;

	ret = parse_common(argc, argv, "status", &api, &qmp, &json, status_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	ctl = cli_ctl_open(api ? api : qmp, qmp != NULL, err, sizeof(err));
	if (!ctl || cli_ctl_status(ctl, &st, err, sizeof(err))) {
		cli_error("status: %s", err);
		cli_ctl_close(ctl);
		return CLI_EXIT_FAIL;
	}
	cli_ctl_close(ctl);
	if (json) {
		json_t *out = js_copy_without(st, skip_ok);

		js_write(stdout, out);
		putchar('\n');
		json_decref(out);
	} else {
		print_status(st);
	}
	json_decref(st);
	return CLI_EXIT_OK;
}

static void check_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit check --api PATH [--json]\n"
		"Verify the guest workload's memory now (the dirty, verify and balloon workloads\n"
		"pause their vCPUs while checking).\n"
		"\n"
		"  --api PATH   the VM's godwit API socket\n"
		"  --json       one JSON object (default: one line of text)\n"
		"\n"
		"Exit status: 0 ok, 1 mismatch or error, 2 nothing to verify or bad usage.\n");
}

int cmd_check(int argc, char **argv)
{
	const char *api, *result;
	char err[512];
	json_t *r;
	bool json;
	int ret;

	ret = parse_common(argc, argv, "check", &api, NULL, &json, check_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	if (cli_api(api, "check", &r, err, sizeof(err))) {
		cli_error("check: %s", err);
		return CLI_EXIT_FAIL;
	}
	result = js_str(js_get(r, "result"), "?");
	if (json) {
		json_t *out = js_copy_without(r, skip_ok);

		js_write(stdout, out);
		putchar('\n');
		json_decref(out);
	} else {
		const char *msg = js_str(js_get(r, "message"), NULL);

		printf("check: %s%s%s\n", result, msg ? ": " : "", msg ? msg : "");
	}
	ret = !strcmp(result, "ok") ? CLI_EXIT_OK :
	      !strcmp(result, "n/a") ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
	json_decref(r);
	return ret;
}

static void quit_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit quit --api PATH\n"
		"Stop a running godwit (as SIGTERM would: a running migration is cancelled; an\n"
		"idle destination exits 0 saying 'no migration received').\n"
		"\n"
		"  --api PATH   the VM's godwit API socket\n"
		"\n"
		"Exit status: 0 asked, 1 the API did not answer, 2 bad usage.\n");
}

int cmd_quit(int argc, char **argv)
{
	const char *api;
	char err[512];
	json_t *r;
	bool json;
	int ret;

	ret = parse_common(argc, argv, "quit", &api, NULL, &json, quit_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	if (json) {
		cli_usage_error("quit", "--json: quit prints nothing");
		return CLI_EXIT_USAGE;
	}
	if (cli_api(api, "quit", &r, err, sizeof(err))) {
		cli_error("quit: %s", err);
		return CLI_EXIT_FAIL;
	}
	json_decref(r);
	return CLI_EXIT_OK;
}
