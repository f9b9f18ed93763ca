/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a peer's string escaped by gw_log_str() holds no byte below
 * 0x20, no 0x7f, no unescaped '"' or '\', and only valid UTF-8 without C1,
 * line-separator or bidi-override characters; valid UTF-8 and printable
 * ASCII are kept as they are; the output is cut at a whole character or
 * escape, never beyond its buffer. gw_text_clean() (the logger's net)
 * escapes the same bytes but keeps '"' and '\', so it leaves gw_log_str's
 * output unchanged. A line logged with raw control bytes reaches the sink
 * as one line. The peer-lines rate limit (util/lograte.c) lets a burst of
 * GW_LOGRATE_BURST lines through, then one per period, counts the rest
 * and reports the count; driven with explicit times (nothing timed).
 */
#include <stdio.h>
#include <string.h>
#include <godwit/log.h>
#include "util/escape.h"
#include "util/lograte.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static void expect(const char *in, const char *want)
{
	char out[GW_LOG_STR_MAX(64)];

	gw_log_str(out, sizeof(out), in);
	TEST_CHECK(!strcmp(out, want), "gw_log_str: got '%s', want '%s'", out, want);
}

/* No byte of @s may split a line, steer a terminal or end a quoted value early. */
static void check_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		TEST_CHECK(*p >= 0x20 && *p != 0x7f, "control byte 0x%02x in '%s'", *p, s);
		if (*p == '\\') {
			TEST_CHECK(p[1] == '\\' || p[1] == '"' || p[1] == 'x', "lone backslash in '%s'", s);
			p++;
		} else {
			TEST_CHECK(*p != '"', "unescaped quote in '%s'", s);
		}
	}
	TEST_CHECK(!gw_text_needs_clean(s), "'%s' still needs cleaning", s);
}

static void test_escaper(void)
{
	char out[GW_LOG_STR_MAX(64)], small[8], clean[64];

	expect("ram0", "ram0");
	expect("", "");
	expect("a\"b", "a\\\"b");
	expect("a\\b", "a\\\\b");
	expect("\"\nX mig_done status=completed", "\\\"\\x0aX mig_done status=completed");
	expect("\r\t\x7f", "\\x0d\\x09\\x7f");
	expect("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m");
	expect("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa6", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xa6");
	expect("\xff\xfe", "\\xff\\xfe");
	expect("\xc3", "\\xc3");				/* truncated sequence */
	expect("\xc0\xaf", "\\xc0\\xaf");			/* overlong '/' */
	expect("\xed\xa0\x80", "\\xed\\xa0\\x80");		/* a surrogate */
	expect("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");	/* past U+10FFFF */
	expect("\xc2\x9b" "2J", "\\xc2\\x9b2J");		/* C1 CSI, as UTF-8 */
	expect("a\xe2\x80\xa8" "b", "a\\xe2\\x80\\xa8b");	/* U+2028 line separator */
	expect("\xe2\x80\xae" "evil", "\\xe2\\x80\\xaeevil");	/* U+202E right-to-left override */

	/* Cut at a whole escape or character, within the buffer. */
	gw_log_str(small, sizeof(small), "ab\ncd");
	TEST_CHECK(!strcmp(small, "ab\\x0ac"), "cut: '%s'", small);
	gw_log_str(small, sizeof(small), "abcde\n");
	TEST_CHECK(!strcmp(small, "abcde"), "cut before an escape: '%s'", small);
	gw_log_str(small, sizeof(small), "abcde\xc3\xa9");
	TEST_CHECK(!strcmp(small, "abcde\xc3\xa9"), "a character that fits: '%s'", small);
	gw_log_str(small, sizeof(small), "abcdef\xc3\xa9");
	TEST_CHECK(!strcmp(small, "abcdef"), "cut before a character: '%s'", small);
	gw_log_str(small, 1, "abc");
	TEST_CHECK(small[0] == 0, "one byte: empty");
	TEST_CHECK(!strcmp(gw_log_str(out, sizeof(out), NULL), ""), "NULL is empty");

	/* Every byte value, alone and in a mix: the output is always safe. */
	for (int c = 1; c < 256; c++) {
		char in[4] = { 'x', (char)c, 'y', 0 };

		gw_log_str(out, sizeof(out), in);
		check_safe(out);
		gw_text_clean(clean, sizeof(clean), in);
		TEST_CHECK(!gw_text_needs_clean(clean), "clean of 0x%02x is clean", c);
	}

	/* The net keeps quotes and backslashes, and leaves escaped text as it is. */
	gw_text_clean(clean, sizeof(clean), "a\"b\\c\nd\xff");
	TEST_CHECK(!strcmp(clean, "a\"b\\c\\x0ad\\xff"), "clean: '%s'", clean);
	gw_log_str(out, sizeof(out), "\"\n\x1b\xff\xc3\xa9\\");
	gw_text_clean(clean, sizeof(clean), out);
	TEST_CHECK(!strcmp(clean, out), "clean changed escaped text: '%s' -> '%s'", out, clean);
}

/* ---- the logger's net ---- */

static char lines[64][1100];
static unsigned nr_lines;

static void sink(void *opaque, enum gw_log_level level, const char *line)
{
	(void)opaque, (void)level;
	if (nr_lines < 64)
		snprintf(lines[nr_lines], sizeof(lines[0]), "%s", line);
	nr_lines++;
}

static unsigned count(const char *words)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nr_lines && i < 64; i++)
		n += strstr(lines[i], words) != NULL;
	return n;
}

static void test_log_net(void)
{
	nr_lines = 0;
	gw_log_set_sink(sink, NULL);
	/* A site that forgot gw_log_str: still one line, no control byte. */
	gw_log(GW_LOG_WARN, "mig", "hello_refused", "reason=\"%s\"", "x\"\n99.0 dst INFO mig mig_done\x1b[2J\xff");
	gw_log_set_sink(NULL, NULL);
	TEST_ASSERT(nr_lines == 1, "%u lines", nr_lines);
	TEST_CHECK(!gw_text_needs_clean(lines[0]), "a control byte or bad UTF-8 left: %s", lines[0]);
	TEST_CHECK(strstr(lines[0], "\\x0a99.0 dst INFO mig mig_done\\x1b[2J\\xff") != NULL, "net: %s", lines[0]);
}

/* ---- the rate limit, at explicit times ---- */

static void test_lograte(void)
{
	const uint64_t s = 1000000000ull, t0 = 5 * s;
	struct gw_lograte r;
	unsigned ok = 0;

	nr_lines = 0;
	gw_log_set_sink(sink, NULL);
	gw_lograte_init(&r);
	for (unsigned i = 0; i < 1000; i++)
		ok += gw_lograte_allow(&r, "hello_refused", t0 + i * 1000);	/* 1000 in 1 ms */
	TEST_CHECK(ok == GW_LOGRATE_BURST, "%u of a burst of 1000 let through", ok);
	/* Another event has its own bucket. */
	TEST_CHECK(gw_lograte_allow(&r, "conn_refused", t0), "another event is not limited by the first");
	/* One more per period after the burst. */
	TEST_CHECK(!gw_lograte_allow(&r, "hello_refused", t0 + s / 2), "half a period: none");
	TEST_CHECK(gw_lograte_allow(&r, "hello_refused", t0 + s + 1000), "a period later: one");
	TEST_CHECK(!gw_lograte_allow(&r, "hello_refused", t0 + s + 2000), "then none");
	TEST_CHECK(nr_lines == 0, "no report before its interval (%u lines)", nr_lines);
	/* The count is reported once its interval passed, then nothing is left. */
	/* 980 of the burst, the one half a period later and the last one. */
	TEST_CHECK(gw_lograte_flush(&r, t0 + s, false) == t0 + 20 * 1000 + GW_LOGRATE_REPORT_NS, "next report due");
	gw_lograte_flush(&r, t0 + 20 * 1000 + GW_LOGRATE_REPORT_NS, false);
	TEST_CHECK(nr_lines == 1 && count("log_suppressed event=hello_refused count=982 "),
		   "report: %s", nr_lines ? lines[0] : "(none)");
	TEST_CHECK(gw_lograte_flush(&r, t0 + 20 * s, false) == 0, "nothing left");
	/* A quiet time refills the bucket whole. */
	ok = 0;
	for (unsigned i = 0; i < 100; i++)
		ok += gw_lograte_allow(&r, "hello_refused", t0 + 100 * s + i);
	TEST_CHECK(ok == GW_LOGRATE_BURST, "%u after a quiet time", ok);
	gw_lograte_destroy(&r);	/* reports the 80 counted */
	TEST_CHECK(count("log_suppressed event=hello_refused count=80 ") == 1, "final report");
	gw_log_set_sink(NULL, NULL);
}

int main(void)
{
	test_escaper();
	test_log_net();
	test_lograte();
	TEST_EXIT();
}
