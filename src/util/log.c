/* SPDX-License-Identifier: MIT */
/*
 * The event log. One line per event:
 *   "%6lu.%09lu %-3s %-5s %-6s %s key=value..."
 * Seconds are printed with at least six digits and grow as needed: the stamp
 * never truncates. Lines are formatted into a stack buffer and written with
 * one write() by the default sink, so lines of concurrent threads and of
 * two processes sharing a terminal do not interleave. Whatever a caller
 * formatted, a line leaves with no control byte and no invalid UTF-8
 * (gw_text_clean): a peer's string a site forgot to escape (gw_log_str)
 * can neither split the line nor reach a terminal as an escape sequence.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <godwit/log.h>
#include "util/escape.h"

#define GW_LOG_LINE_MAX 1024

static void stderr_sink(void *opaque, enum gw_log_level level, const char *line)
{
	char buf[GW_LOG_LINE_MAX + 1];
	size_t n = strlen(line);

	if (n > GW_LOG_LINE_MAX)
		n = GW_LOG_LINE_MAX;
	memcpy(buf, line, n);
	buf[n++] = '\n';
	/* Best effort: a log write that fails has nowhere to be reported. */
	if (write(STDERR_FILENO, buf, n) < 0)
		return;
}

/*
 * Process-wide settings: written at start-up by the embedding program.
 * Quiet by default (warnings and errors): a program that embeds the engine
 * asks for the per-round lines with gw_log_set_level(GW_LOG_INFO).
 */
static struct {
	gw_log_sink_fn sink;
	void *opaque;
	int level;
} log_cfg = { stderr_sink, NULL, GW_LOG_WARN };

static __thread char log_side[4] = "---";

void gw_log_set_sink(gw_log_sink_fn fn, void *opaque)
{
	log_cfg.opaque = opaque;
	__atomic_store_n(&log_cfg.sink, fn ? fn : stderr_sink, __ATOMIC_RELEASE);
}

void gw_log_set_level(enum gw_log_level level)
{
	__atomic_store_n(&log_cfg.level, (int)level, __ATOMIC_RELAXED);
}

void gw_log_set_side(const char *side)
{
	snprintf(log_side, sizeof(log_side), "%s", side ? side : "---");
}

uint64_t gw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *const level_names[] = { "ERROR", "WARN", "INFO", "DEBUG" };

void gw_log(enum gw_log_level level, const char *subsys, const char *event,
	    const char *fmt, ...)
{
	char line[GW_LOG_LINE_MAX], clean[GW_LOG_LINE_MAX];
	const char *out = line;
	uint64_t now_ns;
	va_list ap;
	int n;

	if ((int)level > __atomic_load_n(&log_cfg.level, __ATOMIC_RELAXED))
		return;
	now_ns = gw_now_ns();
	n = snprintf(line, sizeof(line), "%6lu.%09lu %-3s %-5s %-6s %s",
		     (unsigned long)(now_ns / 1000000000ull),
		     (unsigned long)(now_ns % 1000000000ull), log_side,
		     level_names[level <= GW_LOG_DEBUG ? level : GW_LOG_DEBUG],
		     subsys, event);
	if (n > 0 && (size_t)n < sizeof(line) - 2 && fmt && fmt[0]) {
		line[n++] = ' ';
		va_start(ap, fmt);
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	if (gw_text_needs_clean(line)) {
		gw_text_clean(clean, sizeof(clean), line);
		out = clean;
	}
	__atomic_load_n(&log_cfg.sink, __ATOMIC_ACQUIRE)(log_cfg.opaque, level, out);
}

const char *gw_size_str(char *buf, size_t size, uint64_t bytes)
{
	static const char units[] = "KMGT";
	int u = 3;

	if (!buf || !size)
		return buf;
	/* Exact in a unit, in at most 4 digits ("1536K", not "15954672K"). */
	while (u >= 0 && (bytes < (1ull << (10 * (u + 1))) || bytes % (1ull << (10 * (u + 1))) ||
			  bytes >> (10 * (u + 1)) > 9999))
		u--;
	if (u >= 0)
		snprintf(buf, size, "%llu%c", (unsigned long long)(bytes >> (10 * (u + 1))), units[u]);
	else if (bytes < 1024)
		snprintf(buf, size, "%llu", (unsigned long long)bytes);
	else {
		for (u = 3; bytes < (1ull << (10 * (u + 1))); u--)
			;
		snprintf(buf, size, "%.1f%c", (double)bytes / (double)(1ull << (10 * (u + 1))), units[u]);
	}
	return buf;
}
