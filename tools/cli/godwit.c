/* SPDX-License-Identifier: MIT */
/*
 * godwit: the command line. One binary, subcommands in the spirit of
 * ch-remote and QEMU's monitor:
 *
 *   godwit run      a VM (source, or destination with --incoming), serving an API
 *                   socket and/or a QMP socket
 *   godwit migrate  ask a running VM to migrate, cancel it or tune it while it runs
 *   godwit status   migration statistics and the VM's state
 *   godwit events   follow a running VM's events
 *   godwit params   the parameter table, or a running VM's parameters
 *   godwit check    run the workload's verification now
 *   godwit demo     both ends on this host, one migration, one report
 *   godwit tls-certs  a test CA and certificates for --tls-creds
 *   godwit quit     stop a running VM process
 *   godwit version  the version
 *
 * Exit codes: 0 success, 1 failure, 2 bad command line.
 */
#include "cli/cli.h"

#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: godwit COMMAND [OPTIONS]   (godwit COMMAND --help for details)\n"
		"\n"
		"Commands:\n"
		"  run       run a VM: a source, or a destination with --incoming URL|defer\n"
		"  migrate   migrate a running VM (--to URL), --cancel it, --set a parameter,\n"
		"            or tell a deferred destination where to listen (--incoming URL)\n"
		"  status    migration statistics and VM state of a running VM\n"
		"  events    follow a running VM's events as JSON lines\n"
		"  params    the migration parameters (with --api: a running VM's values)\n"
		"  check     verify the guest workload's memory now\n"
		"  demo      run both ends on this host and migrate once\n"
		"  tls-certs make a test CA and certificates for --tls-creds in a directory\n"
		"  quit      stop a running VM process\n"
		"  version   print the version\n"
		"\n"
		"Sizes accept K/M/G/T suffixes (powers of 1024); rates are bytes per second.\n"
		"URLs: tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT.\n"
		"Exit status: 0 success, 1 failure, 2 bad command line (each command says more).\n");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "run", cmd_run },
		{ "migrate", cmd_migrate },
		{ "status", cmd_status },
		{ "events", cmd_events },
		{ "params", cmd_params },
		{ "check", cmd_check },
		{ "demo", cmd_demo },
		{ "tls-certs", cmd_tls_certs },
		{ "quit", cmd_quit },
		{ "version", cmd_version },
	};
	const char *cmd;
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (!strcmp(cmd, "--version"))
		return cmd_version(1, argv + 1);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	cli_usage_error(NULL, "unknown command '%s'", cmd);
	return CLI_EXIT_USAGE;
}
