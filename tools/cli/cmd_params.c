/* SPDX-License-Identifier: MIT */
/*
 * godwit params: the parameter table of this binary, or with --api PATH
 * the values a running VM's next (or running) migration uses.
 * godwit version: this binary's and the library's versions.
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <signal.h>
#include <string.h>

static void params_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit params [--api PATH] [--json]\n"
		"Without --api: every migration parameter (name, live or setup, values, default,\n"
		"QEMU's name). With --api: the values a running VM's migrations use now (the\n"
		"running one's, else the next one's), as QEMU's query-migrate-parameters reads them.\n"
		"\n"
		"  --api PATH   the VM's godwit API socket (default: none, print the table)\n"
		"  --json       one JSON object (default: text)\n"
		"\n"
		"Exit status: 0, 1 the API did not answer, 2 bad usage.\n");
}

/* The table as JSON: {"NAME":{"default":..,"min":..,"max":..,"live":..,...},...}. */
static void table_json(void)
{
	json_t *o = json_object();

	for (int p = 0; o && p < GW_PARAM__COUNT; p++) {
		const struct gw_param_info *pi = gw_param_info((enum gw_param)p);
		char names[128];
		json_t *e = json_pack("{s:I,s:I,s:I,s:b,s:s}", "default", (json_int_t)pi->def,
				      "min", (json_int_t)pi->min, "max", (json_int_t)pi->max,
				      "live", pi->live, "help", pi->help ? pi->help : "");

		cli_param_value_names((enum gw_param)p, names, sizeof(names));
		if (e && names[0])
			js_set_str(e, "values", names);
		json_object_set_new(o, pi->name, e);
	}
	js_write(stdout, o);
	putchar('\n');
	json_decref(o);
}

static int show_vm(const char *api, bool json)
{
	const json_t *list;
	const char *key;
	json_t *r, *v;
	char err[512];

	if (cli_api(api, "params", &r, err, sizeof(err))) {
		cli_error("params: %s", err);
		return CLI_EXIT_FAIL;
	}
	list = js_get(r, "parameters");
	if (json) {
		json_t *out = json_pack("{s:O,s:O}", "applies-to", js_get(r, "applies-to"),
					"parameters", list);

		js_write(stdout, out);
		putchar('\n');
		json_decref(out);
		json_decref(r);
		return CLI_EXIT_OK;
	}
	printf("Parameters of %s's %s:\n", api,
	       !strcmp(js_str(js_get(r, "applies-to"), ""), "running-migration") ?
	       "running migration" : "next migration");
	json_object_foreach((json_t *)list, key, v) {
		const char *name = js_str(js_get(v, "name"), NULL);
		double val = js_num(js_get(v, "value"), 0), def = js_num(js_get(v, "default"), 0);

		if (name)
			printf("  %-26s %-14s%s\n", key, name, val != def ? "  (changed)" : "");
		else
			printf("  %-26s %-14.0f%s\n", key, val, val != def ? "  (changed)" : "");
	}
	json_decref(r);
	return CLI_EXIT_OK;
}

int cmd_params(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		{ "api", required_argument, NULL, OPT_API },
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const char *api = NULL;
	bool json = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			params_usage(stdout);
			return CLI_EXIT_OK;
		case OPT_API:
			api = optarg;
			break;
		case OPT_JSON:
			json = true;
			break;
		default:
			cli_bad_option("params", c, argv);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cli_usage_error("params", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	if (api)
		return show_vm(api, json);
	if (json)
		table_json();
	else
		cli_print_params(stdout);
	return CLI_EXIT_OK;
}

static void version_usage(FILE *out)
{
	fprintf(out,
		"usage: godwit version [--json]\n"
		"This godwit's version, and the libgodwit it runs with.\n"
		"\n"
		"  --json   one JSON object (default: one line)\n");
}

int cmd_version(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_OPT_HELP,
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			version_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c != OPT_JSON) {
			cli_bad_option("version", c, argv);
			return CLI_EXIT_USAGE;
		}
		json = true;
	}
	if (optind < argc) {
		cli_usage_error("version", "unexpected argument '%s'", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (json)
		printf("{\"godwit\":\"%s\",\"libgodwit\":\"%s\"}\n", GW_VERSION_STRING, gw_version());
	else
		printf("godwit %s (libgodwit %s)\n", GW_VERSION_STRING, gw_version());
	return CLI_EXIT_OK;
}
