/* SPDX-License-Identifier: MIT */
/*
 * Following a migration from the command line (cli.h, cli_watch_migration):
 * status polled every CLI_POLL_INTERVAL_MS, and from it
 *  - the progress line: phase, round (numbered as in the report's round
 *    table), percent of RAM sent, what remains (falling as pages go),
 *    link rate, dirty rate, expected downtime, an ETA, the throttle, the
 *    convergence model's verdict (a destination: what it received). On a
 *    terminal one line redrawn; elsewhere (--progress=always) a plain line
 *    per second and per round;
 *  - the --timeline CSV: one row per poll and one per round (the round
 *    table's figures, timed at the round's end);
 *  - Ctrl-C: the first cancels the migration and says so, the second
 *    leaves without waiting.
 * Everything here runs on the tool's main thread (the signal handler only
 * counts).
 */
#include "client/client.h"
#include "common/cli_parse.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PLAIN_LINE_MS 1000		/* a plain progress line at most this often */
#define DRAIN_SMOOTH 0.3		/* weight of the newest sample of the page rate */

/* Between polls: what the line and the timeline need to remember. */
struct progress {
	bool tty;			/* redraw one line */
	bool show;
	bool shown;			/* something is on the line */
	int64_t last_plain_ms;
	long long last_round;		/* round of the last plain line */
	char last_status[16];		/* status of the last plain line */
	double last_ms;			/* total-time of the previous sample */
	double last_pages;		/* pages handled at the previous sample */
	double drain_bps;		/* smoothed: RAM bytes handled per second */
	FILE *timeline;
	unsigned rounds_written;	/* round-table rows already in the timeline */
};

static volatile sig_atomic_t *interrupt_counter;

static void on_interrupt(int sig)
{
	(void)sig;
	if (interrupt_counter)
		(*interrupt_counter)++;
}

void cli_catch_interrupts(volatile sig_atomic_t *counter)
{
	struct sigaction act;

	interrupt_counter = counter;
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_interrupt;	/* no SA_RESTART: sleeps and polls end early */
	sigemptyset(&act.sa_mask);
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
}

static double num(const json_t *o, const char *path)
{
	return js_path_num(o, path, 0);
}

static const char *human_bytes(double b, char *buf, size_t len)
{
	return cli_fmt_bytes(b > 0 ? (uint64_t)b : 0, buf, len);
}

static void human_time(double s, char *buf, size_t len)
{
	if (s < 0 || !isfinite(s))
		snprintf(buf, len, "?");
	else if (s < 10)
		snprintf(buf, len, "%.1f s", s);
	else if (s < 3600)
		snprintf(buf, len, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
	else
		snprintf(buf, len, "%.0fh%02.0fm", floor(s / 3600), fmod(s / 60, 60));
}

/* The page rate: RAM bytes the engine handles per second (zero pages too), smoothed. */
static void sample_drain(struct progress *p, const json_t *st)
{
	double t = num(st, "total-time");
	double pages = num(st, "ram.normal") + num(st, "ram.duplicate") + num(st, "ram.xbzrle-pages");

	if (t > p->last_ms && p->last_ms > 0 && pages >= p->last_pages) {
		double bps = (pages - p->last_pages) * GW_PAGE_BYTES * 1000.0 / (t - p->last_ms);

		p->drain_bps = p->drain_bps > 0 ? p->drain_bps * (1 - DRAIN_SMOOTH) + bps * DRAIN_SMOOTH : bps;
	}
	p->last_ms = t;
	p->last_pages = pages;
}

/*
 * The round in progress, numbered as in the report's round table (0 = the
 * first pass). QEMU has no round count: its dirty-sync-count is 1 during
 * the first pass.
 */
static long long current_round(const json_t *st)
{
	if (js_get(st, "rounds"))
		return (long long)num(st, "rounds");
	return num(st, "ram.dirty-sync-count") > 0 ? (long long)num(st, "ram.dirty-sync-count") - 1 : 0;
}

/* The link rate in bytes/s: godwit's smoothed one, else (QEMU) the average from mbps. */
static double link_bps(const json_t *st)
{
	if (js_path(st, "ram.rate-bps"))
		return num(st, "ram.rate-bps");
	return num(st, "ram.mbps") * 1e6 / 8;
}

/*
 * The model's verdict (converge-state): converging at the link's rate or at
 * the max-bandwidth cap, or why not; "" when it fits or is not known yet.
 * Without a verdict (QEMU) only "converging": false says something.
 */
static const char *converge_label(const json_t *st)
{
	static const struct { const char *state, *label; } labels[] = {
		{ "draining", ", converging at the link's rate" },
		{ "capped", ", converging at the max-bandwidth cap" },
		{ "outrun", ", NOT converging: the guest dirties faster than the link moves" },
		{ "flat", ", NOT converging: the guest writes again what is sent" },
		{ "fixed-cost", ", NOT converging: the switchover alone is over the limit" },
	};
	const char *state = js_str(js_get(st, "converge-state"), NULL);

	if (!state)
		return js_bool(js_get(st, "converging"), true) ? "" : ", NOT converging";
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
		if (!strcmp(state, labels[i].state))
			return labels[i].label;
	return "";
}

/* Converging toward the limit, the model's time until it fits (converge-eta); else -1. */
static double converge_eta_s(const json_t *st)
{
	const char *state = js_str(js_get(st, "converge-state"), "");

	if (strcmp(state, "draining") && strcmp(state, "capped"))
		return -1;
	return js_get(st, "converge-eta") ? num(st, "converge-eta") / 1000.0 : -1;
}

/* @o's expected downtime in ms with @decimals and @unit, or @unknown where no rate gave one yet. */
static void expected_text(const json_t *o, int decimals, const char *unit, const char *unknown,
			  char *buf, size_t len)
{
	if (!js_bool(js_get(o, "expected-downtime-known"), true))
		snprintf(buf, len, "%s", unknown);
	else
		snprintf(buf, len, "%.*f%s", decimals, js_num(js_get(o, "expected-downtime"), 0), unit);
}

/* A destination has no rounds: what it received, and whether its VM runs yet. */
static void dest_line(const json_t *st, const char *status, char *buf, size_t len)
{
	char got[32], total[32];

	human_bytes(num(st, "ram.transferred"), got, sizeof(got));
	human_bytes(num(st, "ram.total"), total, sizeof(total));
	snprintf(buf, len, "%s (destination): %s received of %s RAM, %.1f MiB/s%s", status, got, total,
		 num(st, "ram.mbps") * 1e6 / 8 / 1048576.0,
		 !strcmp(js_str(js_get(st, "vm-status"), ""), "running") ? ", the VM runs here" : "");
}

static void line_text(struct progress *p, const json_t *st, char *buf, size_t len)
{
	double total = num(st, "ram.total"), remaining = num(st, "ram.remaining");
	double pct = total > 0 ? 100.0 * (total - remaining) / total : 0;
	bool converging = js_bool(js_get(st, "converging"), true);
	const char *status = js_str(js_get(st, "status"), "?");
	char rem[32], sent[32], eta[32], expd[32];
	size_t at;

	if (!strcmp(status, "setup")) {
		snprintf(buf, len, "setup: connecting, agreeing on the RAM layout and channels");
		return;
	}
	if (!strcmp(status, "completed")) {
		snprintf(buf, len, "completed: the VM runs on the destination; comparing the RAM digests");
		return;
	}
	if (!strcmp(status, "failed") || !strcmp(status, "cancelled") || !strcmp(status, "unknown")) {
		snprintf(buf, len, "%s: settling", status);
		return;
	}
	if (cli_status_postcopy(st)) {
		at = (size_t)snprintf(buf, len, "%s %.0f ms: %.0f pages missing, %.0f requested, blocktime "
				      "%.1f ms, fault p99 %.0f us", status, num(st, "postcopy.postcopy-time"),
				      num(st, "postcopy.remaining"), num(st, "postcopy.requests"),
				      num(st, "postcopy-blocktime"), num(st, "postcopy.fault-latency-us.p99"));
		if (at < len && cli_status_is(st, GW_STATUS_POSTCOPY_PAUSED))
			snprintf(buf + at, len - at, " -- PAUSED (%s): --recover URL on the destination, "
				 "then --resume --to URL here", js_str(js_path(st, "postcopy.reason"), "link lost"));
		return;
	}
	if (!strcmp(js_str(js_get(st, "role"), "source"), "destination")) {
		dest_line(st, status, buf, len);
		return;
	}
	human_bytes(remaining, rem, sizeof(rem));
	human_bytes(num(st, "ram.transferred"), sent, sizeof(sent));
	expected_text(st, 1, " ms", "?", expd, sizeof(expd));
	if (!strcmp(status, "active") && !converging && current_round(st) > 0)
		snprintf(eta, sizeof(eta), "none");
	else if (!strcmp(status, "active") && converge_eta_s(st) >= 0)
		human_time(converge_eta_s(st), eta, sizeof(eta));
	else if (p->drain_bps > 0)
		human_time(remaining / p->drain_bps, eta, sizeof(eta));
	else
		snprintf(eta, sizeof(eta), "?");
	at = (size_t)snprintf(buf, len,
			      "%s round %lld: %.1f%%, %s left, %s sent, link %.0f MiB/s, "
			      "dirtied %.1f MiB/s, expected downtime %s, ETA %s",
			      status, current_round(st), pct, rem, sent, link_bps(st) / 1048576.0,
			      num(st, "ram.dirty-pages-rate") * GW_PAGE_BYTES / 1048576.0,
			      expd, eta);
	if (at < len && num(st, "cpu-throttle-percentage") > 0)
		at += (size_t)snprintf(buf + at, len - at, ", throttle %.0f%%",
				       num(st, "cpu-throttle-percentage"));
	if (at < len && num(st, "dirty-limit-rate") > 0)
		at += (size_t)snprintf(buf + at, len - at, ", dirty limit on");
	if (at < len && strcmp(status, "active") == 0)
		snprintf(buf + at, len - at, "%s", converge_label(st));
}

static void show(struct progress *p, const json_t *st)
{
	char buf[400];
	long long round = current_round(st);

	if (!p->show)
		return;
	line_text(p, st, buf, sizeof(buf));
	if (p->tty) {
		fprintf(stderr, "\r%s\033[K", buf);
		p->shown = true;
	} else if (cli_now_ms() - p->last_plain_ms >= PLAIN_LINE_MS || round != p->last_round ||
		   strcmp(p->last_status, js_str(js_get(st, "status"), ""))) {
		fprintf(stderr, "progress: %s\n", buf);
		p->last_plain_ms = cli_now_ms();
		p->last_round = round;
		snprintf(p->last_status, sizeof(p->last_status), "%s", js_str(js_get(st, "status"), ""));
	}
	fflush(stderr);
}

static void line_done(struct progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = false;
}

/* Say something on its own line, the progress line redrawn after it. */
static void say(struct progress *p, const char *msg)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
	fprintf(stderr, "godwit: %s\n", msg);
}

void cli_progress_line(const json_t *st, char *buf, size_t len)
{
	struct progress p = { .drain_bps = num(st, "ram.pages-per-second") * GW_PAGE_BYTES };

	line_text(&p, st, buf, len);
}

/* ---- timeline ---- */

static void timeline_header(FILE *f)
{
	fprintf(f, "# godwit migrate --timeline: one row per %d ms poll (kind=sample) and per round "
		"(kind=round, at the round's end)\n", CLI_POLL_INTERVAL_MS);
	fprintf(f, "time_ms,kind,phase,round,remaining_bytes,transferred_bytes,rate_bps,"
		"dirty_rate_bps,expected_downtime_ms,throttle_pct\n");
}

/* expected_downtime_ms is empty where no rate gave one. */
static void timeline_sample(struct progress *p, const json_t *st)
{
	const json_t *table = js_get(st, "round-table");
	size_t n = json_array_size(table);
	char expd[32];

	if (!p->timeline)
		return;
	/* Rounds that ended since the last poll, timed from the migration's start. */
	while (p->rounds_written < n) {
		double t = num(st, "setup-time");
		const json_t *r = NULL;

		for (size_t i = 0; i <= p->rounds_written; i++) {
			r = json_array_get(table, i);
			t += js_num(js_get(r, "duration"), 0);
		}
		expected_text(r, 3, "", "", expd, sizeof(expd));
		fprintf(p->timeline, "%.3f,round,active,%.0f,,%.0f,%.0f,%.0f,%s,%.0f\n", t,
			js_num(js_get(r, "round"), 0), js_num(js_get(r, "sent-bytes"), 0),
			js_num(js_get(r, "rate-bps"), 0),
			js_num(js_get(r, "dirty-rate-pps"), 0) * GW_PAGE_BYTES, expd,
			js_num(js_get(r, "cpu-throttle-percentage"), 0));
		p->rounds_written++;
	}
	expected_text(st, 3, "", "", expd, sizeof(expd));
	fprintf(p->timeline, "%.3f,sample,%s,%lld,%.0f,%.0f,%.0f,%.0f,%s,%.0f\n",
		num(st, "total-time"), js_str(js_get(st, "status"), "?"), current_round(st),
		num(st, "ram.remaining"), num(st, "ram.transferred"), link_bps(st),
		num(st, "ram.dirty-pages-rate") * GW_PAGE_BYTES, expd,
		num(st, "cpu-throttle-percentage"));
	fflush(p->timeline);
}

/* ---- the loop ---- */


/* The first Ctrl-C: cancel and say so. */
static void interrupted_once(struct cli_watch *w, struct progress *p)
{
	char err[512], msg[700];
	int r;

	if (!w->cancel_on_interrupt) {
		say(p, "interrupted: leaving (the migration goes on)");
		return;
	}
	r = cli_ctl_cancel(w->ctl, err, sizeof(err));
	if (!r) {
		w->interrupted = true;
		say(p, "cancelling the migration (Ctrl-C again to leave without waiting)");
	} else if (r == -ENOENT) {
		say(p, "interrupted: the migration is over already; its report follows");
	} else {
		snprintf(msg, sizeof(msg), "cannot cancel: %s; waiting for the outcome (Ctrl-C again to leave)",
			 err);
		say(p, msg);
	}
}

int cli_watch_migration(struct cli_watch *w, json_t **final, char *err, size_t err_len)
{
	struct progress p = { .last_round = -1 };
	sig_atomic_t seen = 0;
	int ret = 0;

	*final = NULL;
	p.tty = isatty(STDERR_FILENO);
	p.show = w->progress == CLI_PROGRESS_ALWAYS || (w->progress == CLI_PROGRESS_AUTO && p.tty);
	if (w->timeline) {
		p.timeline = fopen(w->timeline, "w");
		if (!p.timeline) {
			snprintf(err, err_len, "--timeline %s: %s", w->timeline, strerror(errno));
			return -errno;
		}
		timeline_header(p.timeline);
	}
	for (;;) {
		json_t *st;

		if (w->interrupts && *w->interrupts != seen) {
			seen = *w->interrupts;
			if (seen >= 2 || !w->cancel_on_interrupt) {
				if (w->cancel_on_interrupt)
					say(&p, "left without waiting: the cancel goes on; 'godwit status' tells the outcome");
				snprintf(err, err_len, "interrupted");
				ret = -EINTR;
				break;
			}
			interrupted_once(w, &p);
		}
		ret = cli_ctl_status(w->ctl, &st, err, err_len);
		if (ret)
			break;
		sample_drain(&p, st);
		timeline_sample(&p, st);
		if (cli_status_terminal(st)) {
			*final = st;
			break;
		}
		show(&p, st);
		json_decref(st);
		cli_sleep_ms_interruptible(CLI_POLL_INTERVAL_MS, w->interrupts, seen);
	}
	line_done(&p);
	if (p.timeline && fclose(p.timeline) && !ret) {
		snprintf(err, err_len, "--timeline %s: %s", w->timeline, strerror(errno));
		ret = -EIO;
	}
	return ret;
}
