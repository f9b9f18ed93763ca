/* SPDX-License-Identifier: MIT */
/*
 * Text that came from a peer, made safe for a log line, a reason, the
 * statistics and a terminal. gw_log_str() (include/godwit/log.h) is the
 * escaper for a quoted value; gw_text_clean() is the logger's safety net.
 */
#ifndef GW_ESCAPE_H
#define GW_ESCAPE_H

#include <stddef.h>
#include <godwit/log.h>

/*
 * @in into @out (@size bytes, NUL-terminated) with every control byte
 * (< 0x20, 0x7f), every byte of invalid UTF-8 and of the C1, line-separator
 * and bidi-override characters written \xNN; '"' and '\' are kept. Text
 * that gw_log_str() produced passes unchanged (the two never escape twice).
 * Cut at a whole character or escape when @out is too small. Returns the
 * length written.
 */
size_t gw_text_clean(char *out, size_t size, const char *in);

/* Whether gw_text_clean() would change @in. */
int gw_text_needs_clean(const char *in);

#endif
