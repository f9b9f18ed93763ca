/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the godwit command line: exit codes, option ids and
 * option sets (run options and migrate options are reused by demo), the
 * API client helpers and the report printer.
 *
 * Everything here runs on the main thread of the tool unless said otherwise.
 */
#ifndef GW_CLI_H
#define GW_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <godwit/godwit.h>

#include "json.h"

enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	/* the operation failed (or, check: mismatch) */
	CLI_EXIT_USAGE = 2,	/* bad command line (check: n/a) */
};

#define CLI_API_TIMEOUT_MS 10000	/* one API request/answer */
#define CLI_POLL_INTERVAL_MS 100	/* status polling while a migration runs */
#define CLI_SETS_MAX 64			/* --set options per command */

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
	OPT_TLS_CREDS,
	OPT_TLS_PSK,
	OPT_TLS_HOSTNAME,
	OPT_TLS_AUTHZ,
	OPT_MAX_MEMORY,
	OPT_TLS,
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

struct cli_param {
	enum gw_param p;
	int64_t value;
};

/* A list of parameter settings, later ones win; string parameters (TLS) beside. */
struct cli_params {
	unsigned nr;
	struct cli_param v[CLI_SETS_MAX];
	bool str_set[GW_SPARAM__COUNT];
	char str[GW_SPARAM__COUNT][GW_SPARAM_MAX_BYTES];
};
/* Add or replace; -E2BIG when full. */
int cli_params_put(struct cli_params *ps, enum gw_param p, int64_t value);
/* Set a string parameter: -EINVAL when too long or with blanks (API words cannot hold them). */
int cli_params_put_str(struct cli_params *ps, enum gw_str_param p, const char *value);
/* Settings in @ps, integer and string ones. */
unsigned cli_params_count(const struct cli_params *ps);
/* Apply every setting of @ps to @s: 0, or the first refusal with the parameter's name in @err. */
int cli_params_apply(const struct cli_params *ps, struct gw_session *s, char *err, size_t err_len);

/* `run` options; also the VM half of `demo`. */
struct run_opts {
	uint64_t memory_bytes;
	bool memory_given;		/* --memory on the command line */
	unsigned nr_vcpus;
	const char *accel;		/* "auto", "soft", "kvm" */
	const char *workload;		/* NULL = the VM's default */
	const char *fill;		/* soft_fill name */
	uint64_t seed;
	bool seed_given;
	const char *memory_file;
	bool prealloc;			/* allocate and zero RAM at start (-mem-prealloc) */
	const char *api_path;
	const char *incoming_url;
	struct cli_params params;	/* --set */
	const char *log_level;		/* NULL = default (info) */
	bool exit_after_migrate;
	bool max_memory_given;		/* --max-memory */
};
void run_opts_init(struct run_opts *o);

/* Migration options; `demo` shares them. */
struct migrate_opts {
	const char *to;
	struct cli_params params;
	bool converge_timeout_given, on_timeout_given;
	bool detach, json, cancel;
	const char *resolve;		/* --resolve source|destination */
};

/*
 * Apply one option of the sets above. 0 = taken, 1 = not one of this set,
 * -1 = bad value (error already printed as "godwit @cmd: ...").
 */
int run_opt_apply(struct run_opts *o, int id, const char *arg, const char *cmd);
int migrate_opt_apply(struct migrate_opts *o, int id, const char *arg, const char *cmd);
/* Called after parsing: --converge-timeout without --on-timeout means cancel. */
void migrate_opts_finish(struct migrate_opts *o);

/*
 * Report an unknown option / missing value after getopt_long returned '?'
 * or ':' (opterr must be 0 and the optstring start with ':').
 */
void cli_bad_option(const char *cmd, int ret, char **argv);
/* "godwit CMD: <msg> (see 'godwit CMD --help')" on stderr. */
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "godwit: <msg>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print the parameter table (name, range, default, live) for --help. */
void cli_print_params(FILE *out);

/*
 * Send @line to the API at @path, parse the answer. On {"ok":true,...}
 * returns 0 and the object in *@reply (json_free it). Otherwise -errno with
 * a one-line reason in @err (the server's "error" when it refused).
 */
int cli_api(const char *path, const char *line, struct json **reply, char *err, size_t err_len);

/* Status names the engine reports, compared by the engine's own spelling. */
bool cli_status_is(const struct json *st, enum gw_status which);
bool cli_status_terminal(const struct json *st);	/* completed/failed/cancelled/unknown */

/* "CMD [url=URL] name=value ..." for the API (malloc'ed), NULL on ENOMEM. */
char *cli_params_line(const char *cmd, const char *url, const struct cli_params *ps);

/*
 * Poll "status" on @api every CLI_POLL_INTERVAL_MS until the migration
 * reached a terminal status; the last status object in *@final. Shows a
 * progress line on stderr when @progress. Stops early when *@stop (may be
 * NULL) becomes non-zero: -EINTR. 0 or -errno with @err set.
 */
int cli_wait_migration(const char *api, bool progress, volatile sig_atomic_t *stop,
		       struct json **final, char *err, size_t err_len);

/* Extra facts a report can show beyond the engine's statistics. */
struct report_extra {
	int verified;			/* 1 yes, 0 no, -1 not known: taken from the stats */
	int guest_progress;		/* 1 yes, 0 no, -1 not measured */
	const char *verify_detail;	/* e.g. "workload check ok", may be NULL */
	const char *source_vm_status;
	const char *destination_vm_status;
};
void report_extra_init(struct report_extra *x);
/* A readable report of a status object (the engine's stats JSON + ours). */
void report_print(FILE *out, const struct json *st, const struct report_extra *x);
/* A one-line progress summary (no newline) for polling. */
void report_progress_line(FILE *out, const struct json *st);

/* Milliseconds since an arbitrary point, CLOCK_MONOTONIC. */
int64_t cli_now_ms(void);
void cli_sleep_ms(unsigned ms);

int cmd_run(int argc, char **argv);
int cmd_migrate(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_quit(int argc, char **argv);

#endif
