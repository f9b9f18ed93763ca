/* SPDX-License-Identifier: MIT */
/*
 * Talking to a running godwit: requests over its API (cli_api.c), the
 * control clients for the API and QMP (ctl.c, qmp_client.c), following a
 * migration (progress line, timeline, Ctrl-C: progress.c) and the report
 * printer (report.c).
 *
 * Everything here runs on the main thread of the tool unless said otherwise.
 */
#ifndef GW_CLI_CLIENT_H
#define GW_CLI_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <godwit/godwit.h>

#include "common/json.h"
#include "common/params.h"

#define CLI_API_TIMEOUT_MS 10000	/* one API request/answer */
#define CLI_POLL_INTERVAL_MS 100	/* status polling while a migration runs */

/* --progress: when the live progress line is shown (progress.c). */
enum cli_progress {
	CLI_PROGRESS_AUTO = 0,		/* on a terminal only: one line redrawn */
	CLI_PROGRESS_ALWAYS,		/* on a terminal redrawn, else a plain line per second */
	CLI_PROGRESS_NEVER,
};

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

#endif
