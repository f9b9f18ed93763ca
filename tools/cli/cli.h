/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the godwit command line: exit codes, option ids and
 * option sets (run options and migrate options are reused by demo), the
 * control clients (API, QMP), following a migration (progress line,
 * timeline, Ctrl-C) and the report printer.
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

#include "common/json.h"
#include "common/cli_parse.h"
#include "common/params.h"

enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	/* the operation failed (or, check: mismatch) */
	CLI_EXIT_USAGE = 2,	/* bad command line (check: n/a) */
	CLI_EXIT_INTERRUPTED = 130,	/* Ctrl-C: migrate cancelled it, or left without waiting */
};

#define CLI_API_TIMEOUT_MS 10000	/* one API request/answer */
#define CLI_POLL_INTERVAL_MS 100	/* status polling while a migration runs */

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
	const char *qmp_path;
	const char *incoming_url;	/* URL, or "defer" */
	struct cli_params params;	/* --set */
	const char *log_level;		/* NULL = default (info) */
	bool exit_after_migrate;
	bool max_memory_given;		/* --max-memory */
};
void run_opts_init(struct run_opts *o);

/* --progress: when the live progress line is shown (progress.c). */
enum cli_progress {
	CLI_PROGRESS_AUTO = 0,		/* on a terminal only: one line redrawn */
	CLI_PROGRESS_ALWAYS,		/* on a terminal redrawn, else a plain line per second */
	CLI_PROGRESS_NEVER,
};

/* Migration options; `demo` shares them. */
struct migrate_opts {
	const char *to;
	struct cli_params params;
	bool converge_timeout_given, on_timeout_given;
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

/* Print the parameter table (name, values, default, live, QEMU's name) for --help. */
void cli_print_params(FILE *out);
/* Parse --progress auto|always|never. 0, or -1 with the error printed. */
int cli_parse_progress(const char *arg, enum cli_progress *out, const char *cmd);

/*
 * Send @line to the API at @path, parse the answer. On {"ok":true,...}
 * returns 0 and the object in *@reply (json_decref it). Otherwise -errno
 * with a one-line reason in @err (the server's "error" when it refused).
 */
int cli_api(const char *path, const char *line, json_t **reply, char *err, size_t err_len);

/* Status names the engine reports, compared by the engine's own spelling. */
bool cli_status_is(const json_t *st, enum gw_status which);
/*
 * Over and settled: failed, cancelled, unknown, or completed with the
 * digests compared (verify not pending); and the VM process did what the
 * end means there ("settled", when the status has it).
 */
bool cli_status_terminal(const json_t *st);

/*
 * Where `migrate` and `status` send their requests: a godwit API socket or
 * a QMP socket (godwit's, or QEMU's own). ctl.c and qmp_client.c.
 */
struct cli_ctl;
/* Open @path as the API (@qmp false) or as QMP. NULL with the reason in @err. */
struct cli_ctl *cli_ctl_open(const char *path, bool qmp, char *err, size_t err_len);
void cli_ctl_close(struct cli_ctl *c);
/* The status object of docs/api.md (from QMP: query-migrate and query-status). 0 or -errno. */
int cli_ctl_status(struct cli_ctl *c, json_t **st, char *err, size_t err_len);
/* Start a migration to @url with @ps. 0 or -errno. */
int cli_ctl_migrate(struct cli_ctl *c, const char *url, const struct cli_params *ps,
		    char *err, size_t err_len);
/* Cancel the running migration. 0, -ENOENT (none runs), -errno. */
int cli_ctl_cancel(struct cli_ctl *c, char *err, size_t err_len);
/* Change parameters; *@applied "now" or "next-migration". 0 or -errno. */
int cli_ctl_set(struct cli_ctl *c, const struct cli_params *ps, char *applied, size_t applied_len,
		char *err, size_t err_len);
/* Tell a deferred destination where to listen; the bound URL in @bound. 0 or -errno. */
int cli_ctl_incoming(struct cli_ctl *c, const char *url, char *bound, size_t bound_len,
		     char *err, size_t err_len);
/* Switch the running migration to postcopy now (QMP: migrate-start-postcopy). 0 or -errno. */
int cli_ctl_start_postcopy(struct cli_ctl *c, char *err, size_t err_len);
/*
 * Postcopy paused: listen on @url on the destination (@recover; QMP
 * migrate-recover), or reconnect the source to @url (QMP: migrate with
 * resume). The URL in use in @bound. 0 or -errno.
 */
int cli_ctl_postcopy_reconnect(struct cli_ctl *c, bool recover, const char *url, char *bound,
			       size_t bound_len, char *err, size_t err_len);
/* "the API at PATH" / "the QMP socket at PATH", for messages. */
const char *cli_ctl_name(const struct cli_ctl *c);

/*
 * Follow a migration until cli_status_terminal: the live progress line on
 * stderr (progress.c), the --timeline samples, and Ctrl-C: the first
 * *@interrupts cancels the migration (when @cancel_on_interrupt) and says
 * so, a second one leaves at once (-EINTR). The last status in *@final.
 * 0 or -errno with @err set.
 */
struct cli_watch {
	struct cli_ctl *ctl;
	enum cli_progress progress;
	const char *timeline;			/* CSV file, NULL = none */
	volatile sig_atomic_t *interrupts;	/* Ctrl-C count, NULL = none */
	bool cancel_on_interrupt;
	bool interrupted;			/* out: a Ctrl-C asked to cancel */
};
int cli_watch_migration(struct cli_watch *w, json_t **final, char *err, size_t err_len);
/* The progress line of one status (ETA from the average page rate), for `godwit status`. */
void cli_progress_line(const json_t *st, char *buf, size_t len);
/* Install the SIGINT/SIGTERM handler that counts into *@counter (no SA_RESTART). */
void cli_catch_interrupts(volatile sig_atomic_t *counter);

/* A printable word for the postcopy section of a report (postcopy-paused etc.). */
bool cli_status_postcopy(const json_t *st);

/* Extra facts a report can show beyond the engine's statistics. */
struct report_extra {
	int verified;			/* 1 yes, 0 no, -1 not known: taken from the stats */
	int guest_progress;		/* 1 yes, 0 no, -1 not measured */
	const char *verify_detail;	/* e.g. "workload check ok", may be NULL */
	const char *source_vm_status;
	const char *destination_vm_status;
	const char *logs;		/* where the logs are, may be NULL */
};
void report_extra_init(struct report_extra *x);
/* A readable report of a status object (the engine's stats JSON + ours). */
void report_print(FILE *out, const json_t *st, const struct report_extra *x);

/* Milliseconds since an arbitrary point, CLOCK_MONOTONIC. */
int64_t cli_now_ms(void);
void cli_sleep_ms(unsigned ms);
/* Sleep @ms, or less when *@counter (may be NULL) moves away from @seen (a signal came). */
void cli_sleep_ms_interruptible(unsigned ms, volatile sig_atomic_t *counter, sig_atomic_t seen);

int cmd_run(int argc, char **argv);
int cmd_migrate(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_quit(int argc, char **argv);
int cmd_params(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_version(int argc, char **argv);

#endif
