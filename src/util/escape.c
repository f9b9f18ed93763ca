/* SPDX-License-Identifier: MIT */
/*
 * Escaping a peer's bytes (see escape.h). One classification for both
 * escapers: printable ASCII is kept (in a quoted value '"' and '\' get a
 * backslash), well-formed UTF-8 is kept unless it is a character that moves
 * or splits what a reader sees (C1 controls U+0080..U+009F, U+2028..U+202E,
 * U+2066..U+2069), and every other byte becomes \xNN. The output holds no
 * byte below 0x20, no 0x7f and only valid UTF-8: it cannot end a log line,
 * reach a terminal as an escape sequence or break a JSON string.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "util/escape.h"

/*
 * Bytes of the well-formed UTF-8 character at @p (2..4), 0 if there is none
 * (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF). The
 * string's NUL stops a sequence: it is no continuation byte.
 */
static size_t utf8_len(const unsigned char *p, uint32_t *cp)
{
	size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	uint32_t c;

	if (!n || p[0] > 0xf4)
		return 0;
	c = p[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* Characters that are well-formed but steer a terminal or a viewer. */
static bool steers(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/*
 * What the character at @p becomes: its bytes in @tmp (up to 16), their
 * count returned, and the input bytes it consumed in *@used.
 */
static size_t one(const unsigned char *p, bool quoted, char tmp[16], size_t *used)
{
	uint32_t c = 0;
	size_t n;

	*used = 1;
	if (p[0] >= 0x20 && p[0] < 0x7f) {
		if (quoted && (p[0] == '"' || p[0] == '\\')) {
			tmp[0] = '\\';
			tmp[1] = (char)p[0];
			return 2;
		}
		tmp[0] = (char)p[0];
		return 1;
	}
	n = p[0] >= 0x80 ? utf8_len(p, &c) : 0;
	if (n && !steers(c)) {
		memcpy(tmp, p, n);
		*used = n;
		return n;
	}
	if (!n)
		n = 1;
	for (size_t i = 0; i < n; i++)
		snprintf(tmp + 4 * i, 5, "\\x%02x", p[i]);
	*used = n;
	return 4 * n;
}

static size_t escape(char *out, size_t size, const char *in, bool quoted)
{
	const unsigned char *p = (const unsigned char *)(in ? in : "");
	size_t o = 0;

	if (!out || !size)
		return 0;
	while (*p) {
		char tmp[16];
		size_t used, n = one(p, quoted, tmp, &used);

		if (o + n >= size)
			break;	/* never half a character or half an escape */
		memcpy(out + o, tmp, n);
		o += n;
		p += used;
	}
	out[o] = 0;
	return o;
}

const char *gw_log_str(char *buf, size_t size, const char *s)
{
	escape(buf, size, s, true);
	return buf ? buf : "";
}

size_t gw_text_clean(char *out, size_t size, const char *in)
{
	return escape(out, size, in, false);
}

int gw_text_needs_clean(const char *in)
{
	const unsigned char *p = (const unsigned char *)in;

	while (*p) {
		char tmp[16];
		size_t used, n = one(p, false, tmp, &used);

		if (n != used)
			return 1;
		p += used;
	}
	return 0;
}
