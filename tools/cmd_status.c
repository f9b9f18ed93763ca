/* SPDX-License-Identifier: MIT */
/*
 * godwit status: the migration statistics of a running VM plus its state
 * ("vm-status"), workload, guest progress counter and last verify result.
 * godwit check: run the workload's verification now.
 */
#include "cli.h"

#include <signal.h>
#include <string.h>

static const char *const skip_ok[] = { "ok", NULL };

/* Parses the common "--api PATH [--json]" command line. */
static int parse_api_json(int argc, char **argv, const char *cmd, const char **api,
			  bool *json, void (*usage)(FILE *))
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		{ "api", required_argument, NULL, OPT_API },
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*api = NULL;
	*json = false;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			usage(stdout);
			return -CLI_EXIT_OK - 1;
		case OPT_API:
			*api = optarg;
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
	if (!*api) {
		cli_usage_error(cmd, "--api PATH is required");
		return CLI_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void status_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit status --api PATH [--json]\n"
		"Migration statistics (QEMU query-migrate names) and the VM's state:\n"
		"vm-status, workload, guest-progress-count, verify-check.\n");
}

int cmd_status(int argc, char **argv)
{
	struct json *st;
	const char *api;
	char err[512];
	bool json;
	int ret;

	ret = parse_api_json(argc, argv, "status", &api, &json, status_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	if (cli_api(api, "status", &st, err, sizeof(err))) {
		cli_error("status: %s", err);
		return CLI_EXIT_FAIL;
	}
	if (json) {
		putchar('{');
		json_write_members(stdout, st, skip_ok);
		puts("}");
	} else {
		struct report_extra x;

		printf("vm-status:         %s (%s)\n", json_str(json_get(st, "vm-status"), "?"),
		       json_str(json_get(st, "role"), "?"));
		printf("workload:          %s, progress %.0f\n", json_str(json_get(st, "workload"), "?"),
		       json_num(json_get(st, "guest-progress-count"), 0));
		printf("verify-check:      %s\n", json_str(json_get(st, "verify-check"), "n/a"));
		if (json_get(st, "incoming-url"))
			printf("incoming-url:      %s\n", json_str(json_get(st, "incoming-url"), ""));
		report_extra_init(&x);
		if (cli_status_is(st, GW_STATUS_NONE))
			printf("migration:         none yet\n");
		else if (cli_status_terminal(st))
			report_print(stdout, st, &x);
		else {
			const char *hint = json_str(json_get(st, "converge-hint"), "");

			report_progress_line(stdout, st);
			putchar('\n');
			if (hint[0])
				printf("why:               %s\n", hint);
		}
	}
	json_free(st);
	return CLI_EXIT_OK;
}

static void check_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit check --api PATH [--json]\n"
		"Verify the guest workload's memory now (the verify workload pauses its vCPUs\n"
		"while checking). Exit status: 0 ok, 1 mismatch or error, 2 nothing to verify.\n");
}

int cmd_check(int argc, char **argv)
{
	struct json *r;
	const char *api, *result;
	char err[512];
	bool json;
	int ret;

	ret = parse_api_json(argc, argv, "check", &api, &json, check_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	if (cli_api(api, "check", &r, err, sizeof(err))) {
		cli_error("check: %s", err);
		return CLI_EXIT_FAIL;
	}
	result = json_str(json_get(r, "result"), "?");
	if (json) {
		putchar('{');
		json_write_members(stdout, r, skip_ok);
		puts("}");
	} else {
		const char *msg = json_str(json_get(r, "message"), NULL);

		printf("check: %s%s%s\n", result, msg ? ": " : "", msg ? msg : "");
	}
	ret = !strcmp(result, "ok") ? CLI_EXIT_OK :
	      !strcmp(result, "n/a") ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
	json_free(r);
	return ret;
}

static void quit_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit quit --api PATH\n"
		"Stop a running godwit (as SIGTERM would: a running migration is cancelled).\n");
}

int cmd_quit(int argc, char **argv)
{
	struct json *r;
	const char *api;
	char err[512];
	bool json;
	int ret;

	ret = parse_api_json(argc, argv, "quit", &api, &json, quit_usage);
	if (ret)
		return ret < 0 ? CLI_EXIT_OK : ret;
	if (cli_api(api, "quit", &r, err, sizeof(err))) {
		cli_error("quit: %s", err);
		return CLI_EXIT_FAIL;
	}
	json_free(r);
	return CLI_EXIT_OK;
}
