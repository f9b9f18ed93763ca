/* SPDX-License-Identifier: MIT */
/*
 * The godwit commands' shared pieces: option ids and option sets (run
 * options and migrate options are reused by demo), applying them, the
 * messages of a bad command line, and the commands themselves.
 *
 * Everything here runs on the main thread of the tool unless said otherwise.
 */
#ifndef GW_CLI_H
#define GW_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <godwit/godwit.h>

#include "client/client.h"
#include "common/cli_parse.h"
#include "common/exit.h"
#include "common/json.h"
#include "common/params.h"
#include "run/opts.h"

/* Long option ids; short options are only -h. */
enum cli_opt {
	OPT_HELP = 'h',
	OPT_MEMORY = 256,
	OPT_VCPUS,
	OPT_ACCEL,
	OPT_WORKLOAD,
	OPT_FILL,
	OPT_SEED,
	OPT_MEMORY_FILE,
	OPT_PREALLOC,
	OPT_NO_DST_PREALLOC,
	OPT_API,
	OPT_INCOMING,
	OPT_SET,
	OPT_LOG_LEVEL,
	OPT_EXIT_AFTER_MIGRATE,
	OPT_TO,
	OPT_CHANNELS,
	OPT_COMPRESS,
	OPT_XBZRLE,
	OPT_DOWNTIME_LIMIT,
	OPT_MAX_BANDWIDTH,
	OPT_CONVERGE_TIMEOUT,
	OPT_ON_TIMEOUT,
	OPT_LOCAL,
	OPT_NO_VERIFY,
	OPT_AUTO_CONVERGE,
	OPT_DIRTY_LIMIT,
	OPT_DIRTY_LIMIT_START,
	OPT_DETACH,
	OPT_JSON,
	OPT_CANCEL,
	OPT_RESOLVE,
	OPT_KEEP_LOGS,
	OPT_DST_SET,
	OPT_QMP,
	OPT_PROGRESS,
	OPT_TIMELINE,
	OPT_VERBOSE,
	OPT_INCOMING_URL,		/* migrate --incoming URL: a deferred destination listens */
	OPT_POSTCOPY,
	OPT_POSTCOPY_AFTER,
	OPT_START_POSTCOPY,
	OPT_RESUME,
	OPT_RECOVER,
	OPT_DIRTY_TRACK,		/* --dirty-track NAME: the dirty-backend parameter, known at VM creation */
	OPT_TLS_CREDS,
	OPT_TLS_PSK,
	OPT_TLS_HOSTNAME,
	OPT_TLS_AUTHZ,
	OPT_MAX_MEMORY,
	OPT_TLS,
	OPT_NIC,
	OPT_HOST,			/* tls-certs --host NAME */
	OPT_CLIENT_NAME,		/* tls-certs --client-name NAME */
	OPT_DAYS,			/* tls-certs --days N */
};

#define CLI_OPT_HELP { "help", no_argument, NULL, OPT_HELP }
/* Options of `run` that `demo` passes on to its children. */
#define CLI_RUN_VM_OPTS							\
	{ "memory", required_argument, NULL, OPT_MEMORY },		\
	{ "vcpus", required_argument, NULL, OPT_VCPUS },		\
	{ "accel", required_argument, NULL, OPT_ACCEL },		\
	{ "workload", required_argument, NULL, OPT_WORKLOAD },		\
	{ "fill", required_argument, NULL, OPT_FILL },			\
	{ "seed", required_argument, NULL, OPT_SEED },			\
	{ "memory-file", required_argument, NULL, OPT_MEMORY_FILE },	\
	{ "prealloc", no_argument, NULL, OPT_PREALLOC },		\
	{ "dirty-track", required_argument, NULL, OPT_DIRTY_TRACK },	\
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL }
/* Parameters of a migration (`migrate`, `demo`). */
#define CLI_MIGRATE_PARAM_OPTS						\
	{ "channels", required_argument, NULL, OPT_CHANNELS },		\
	{ "compress", required_argument, NULL, OPT_COMPRESS },		\
	{ "xbzrle", optional_argument, NULL, OPT_XBZRLE },		\
	{ "downtime-limit", required_argument, NULL, OPT_DOWNTIME_LIMIT }, \
	{ "max-bandwidth", required_argument, NULL, OPT_MAX_BANDWIDTH },	\
	{ "converge-timeout", required_argument, NULL, OPT_CONVERGE_TIMEOUT }, \
	{ "on-timeout", required_argument, NULL, OPT_ON_TIMEOUT },	\
	{ "local", no_argument, NULL, OPT_LOCAL },			\
	{ "no-verify", no_argument, NULL, OPT_NO_VERIFY },		\
	{ "auto-converge", no_argument, NULL, OPT_AUTO_CONVERGE },	\
	{ "dirty-limit", required_argument, NULL, OPT_DIRTY_LIMIT },	\
	{ "dirty-limit-start", no_argument, NULL, OPT_DIRTY_LIMIT_START }, \
	{ "postcopy", no_argument, NULL, OPT_POSTCOPY },		\
	{ "postcopy-after", required_argument, NULL, OPT_POSTCOPY_AFTER }, \
	{ "tls-creds", required_argument, NULL, OPT_TLS_CREDS },	\
	{ "tls-psk", required_argument, NULL, OPT_TLS_PSK },		\
	{ "tls-hostname", required_argument, NULL, OPT_TLS_HOSTNAME },	\
	{ "set", required_argument, NULL, OPT_SET }
/* TLS and admission options of `run` (a destination's, or a source's outgoing migrations'). */
#define CLI_RUN_TLS_OPTS						\
	{ "tls-creds", required_argument, NULL, OPT_TLS_CREDS },	\
	{ "tls-psk", required_argument, NULL, OPT_TLS_PSK },		\
	{ "tls-hostname", required_argument, NULL, OPT_TLS_HOSTNAME },	\
	{ "tls-authz", required_argument, NULL, OPT_TLS_AUTHZ },	\
	{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY }

#define CLI_XBZRLE_DEFAULT_BYTES (64ull << 20)

void run_opts_init(struct run_opts *o);

/* Migration options; `demo` shares them. */
struct migrate_opts {
	const char *to;
	struct cli_params params;
	bool on_timeout_given;		/* --on-timeout: migrate_opts_check reads it */
	bool detach, json, cancel;
	const char *resolve;		/* --resolve source|destination */
	const char *incoming;		/* --incoming URL (a deferred destination) */
	enum cli_progress progress;
	const char *timeline;		/* --timeline FILE, NULL = none */
	bool start_postcopy;		/* --start-postcopy */
	bool resume;			/* --resume (with --to: the destination's recovery URL) */
	const char *recover;		/* --recover URL (destination) */
};

/*
 * Apply one option of the sets above. 0 = taken, 1 = not one of this set,
 * -1 = bad value (error already printed as "godwit @cmd: ...").
 */
int run_opt_apply(struct run_opts *o, int id, const char *arg, const char *cmd);
int migrate_opt_apply(struct migrate_opts *o, int id, const char *arg, const char *cmd);
/*
 * Called after parsing: --on-timeout without a converge timeout is refused
 * when @starting a migration. 0, or -1 printed as "godwit @cmd: ...".
 */
int migrate_opts_check(const struct migrate_opts *o, bool starting, const char *cmd);
/*
 * After parsing: l2fwd and echo drive the guest's NICs, so without a --nic
 * they are a usage error (printed as "godwit @cmd: ..."): -1, else 0. A bad
 * spec is left to the VM, which refuses it with its reason.
 */
int run_opts_check_nics(const struct run_opts *o, const char *cmd);

/*
 * Report an unknown option / missing value after getopt_long returned '?'
 * or ':' (opterr must be 0 and the optstring start with ':').
 */
void cli_bad_option(const char *cmd, int ret, char **argv);
/* An option that takes one value given twice: the usage error printed; returns -1. */
int cli_repeated(const char *cmd, const char *opt, const char *first, const char *again);
/* "godwit CMD: <msg> (see 'godwit CMD --help')" on stderr. */
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "godwit: <msg>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print the parameter table (name, values, default, live, QEMU's name) for --help. */
void cli_print_params(FILE *out);
/* Parse --progress auto|always|never. 0, or -1 with the error printed. */
int cli_parse_progress(const char *arg, enum cli_progress *out, const char *cmd);

/*
 * `run`'s checks before anything is made (run_check.c). run_check: -1 to
 * go on with @cfg and *@be, else the exit code (the error printed).
 */
int run_check(const struct run_opts *o, bool dest, struct vmm_config *cfg, const struct vmm_backend **be);
/* The VM configuration @o asks for (@dest: a destination's). */
void run_config_of(const struct run_opts *o, bool dest, struct vmm_config *cfg);
/* The backend for --accel @accel that can make @cfg, or NULL printed and *@code the exit code. */
const struct vmm_backend *run_choose_backend(const char *accel, const struct vmm_config *cfg, int *code);
/* The built backends' names in preference order, separated by @sep. */
void run_backend_names(char *buf, size_t len, const char *sep);
/*
 * Whether @o's --memory fits this host with @copies VMs allocating it at
 * start (hostmem.h: @by, @alt). 0, or -1 with "godwit @cmd: --memory ..." printed.
 */
int run_memory_check(const struct run_opts *o, unsigned copies, const char *by, const char *alt,
		     const char *cmd);

int cmd_run(int argc, char **argv);
int cmd_migrate(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_tls_certs(int argc, char **argv);
int cmd_quit(int argc, char **argv);
int cmd_params(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_version(int argc, char **argv);

#endif
