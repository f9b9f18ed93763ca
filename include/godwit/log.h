/* SPDX-License-Identifier: MIT */
/*
 * godwit event log: one line per event.
 *
 *   <mono-seconds>.<ns> <side> <level> <subsys> <event> key=value ...
 *
 * The stamp is CLOCK_MONOTONIC, at least 6 digits of seconds (wider when
 * needed, never truncated) and exactly 9 of nanoseconds, so that lines of the
 * source and the destination on one host can be subtracted directly.
 * Never log per page: per batch, per round or per event.
 */
#ifndef GODWIT_LOG_H
#define GODWIT_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/export.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gw_log_level {
	GW_LOG_ERROR = 0,
	GW_LOG_WARN  = 1,
	GW_LOG_INFO  = 2,
	GW_LOG_DEBUG = 3,
};

/* A sink receives one complete line, without the trailing newline. */
typedef void (*gw_log_sink_fn)(void *opaque, enum gw_log_level level, const char *line);

/*
 * Process-wide log settings. The side tag ("src", "dst", "cli", ...) is
 * per thread so that both ends can run in one process (tests): threads
 * started by the engine inherit the side of the session that started them.
 * Defaults: sink = stderr, level = WARN (warnings and errors only: an
 * embedder that wants the engine's per-round and per-phase lines sets
 * GW_LOG_INFO), side = "---".
 */
GW_EXPORT void gw_log_set_sink(gw_log_sink_fn fn, void *opaque);
GW_EXPORT void gw_log_set_level(enum gw_log_level level);
GW_EXPORT void gw_log_set_side(const char *side);	/* thread-local, at most 3 chars kept */

/* The one entry point. @fmt holds the key=value fields (may be ""). */
GW_EXPORT void gw_log(enum gw_log_level level, const char *subsys, const char *event,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * A string from a peer (a block or section name, a certificate's subject, a
 * PSK identity, a reason it sent), escaped for a quoted log value into
 * @buf (@size bytes, NUL-terminated): '"' and '\' get a backslash; control
 * bytes (< 0x20, 0x7f: newline, ESC), bytes of invalid UTF-8 and the C1,
 * line-separator and bidi-override characters become \xNN; valid UTF-8
 * is kept. Cut at a whole character or escape. Returns @buf. Every log
 * field whose bytes came from outside goes through it:
 *     char esc[GW_LOG_STR_MAX(GW_RAM_NAME_MAX)];
 *     gw_log(..., "block=\"%s\"", gw_log_str(esc, sizeof(esc), name));
 * As a safety net gw_log() itself writes any control byte or invalid
 * UTF-8 left in a line as \xNN: no line can be split or steer a terminal.
 */
GW_EXPORT const char *gw_log_str(char *buf, size_t size, const char *s);
#define GW_LOG_STR_MAX(n) (4 * (size_t)(n) + 1)	/* room for @n bytes escaped, and the NUL */

/*
 * @bytes written as godwit's options take a size, for messages a user
 * reads: the largest of T, G, M, K that divides it exactly in at most 4
 * digits ("512M", "1G", "1536K"), else bytes below 1K ("1000"), else one
 * decimal of the largest unit below it ("15.2G", which the options take
 * back as a size). Into
 * @buf (@size bytes, NUL-terminated; 16 hold any value). Returns @buf.
 */
GW_EXPORT const char *gw_size_str(char *buf, size_t size, uint64_t bytes);

/* CLOCK_MONOTONIC in nanoseconds. */
GW_EXPORT uint64_t gw_now_ns(void);

#ifdef GW_LOG_DEBUG_ENABLED
#define gw_debug(subsys, event, ...) gw_log(GW_LOG_DEBUG, subsys, event, __VA_ARGS__)
#else
/* Compiled out, but the arguments stay type-checked and count as used. */
#define gw_debug(subsys, event, ...) do { if (0) gw_log(GW_LOG_DEBUG, subsys, event, __VA_ARGS__); } while (0)
#endif

#ifdef __cplusplus
}
#endif
#endif
