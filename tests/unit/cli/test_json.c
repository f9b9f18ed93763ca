// SPDX-License-Identifier: MIT
/*
 * Invariant: the tool's JSON helpers over libjansson read what the API
 * and QMP sockets exchange (objects, arrays, escapes, \u with surrogate
 * pairs, numbers with exponents), refuse malformed input with a reason
 * that says where, give typed reads with defaults along dotted paths,
 * turn any bytes into a valid JSON string (invalid UTF-8 becomes '?'), and
 * write compactly in insertion order, milliseconds rounded to the
 * microsecond printing as written ("12.345", not 12.345000000000001).
 */
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static char *to_text(const json_t *v)
{
	char *s = js_dumps(v);

	TEST_ASSERT(s, "js_dumps");
	return s;
}

static void round_trip(const char *text)
{
	char err[128] = "";
	json_t *v = js_parse(text, strlen(text), err, sizeof(err));
	char *out;

	TEST_CHECK(v, "'%s' rejected: %s", text, err);
	if (!v)
		return;
	out = to_text(v);
	TEST_CHECK(!strcmp(out, text), "'%s' wrote back as '%s'", text, out);
	free(out);
	json_decref(v);
}

static void rejected(const char *text)
{
	char err[128] = "";
	json_t *v = js_parse(text, strlen(text), err, sizeof(err));

	TEST_CHECK(!v && strstr(err, "line"), "'%s' accepted (or no position: '%s')", text, err);
	json_decref(v);
}

int main(void)
{
	static const char doc[] =
		" {\"ok\":true,\"status\":\"completed\",\"downtime\":12.345,"
		"\"ram\":{\"transferred\":268435456,\"mbps\":1.5e3},"
		"\"rounds\":[{\"round\":0},{\"round\":1}],\"s\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\","
		"\"n\":null,\"f\":false} ";
	const char *const skip[] = { "ok", "n", NULL };
	char err[128], *buf, bad[] = "a\xff" "b\xc3";
	json_t *v, *c, *o;
	double ms;

	v = js_parse(doc, strlen(doc), err, sizeof(err));
	TEST_ASSERT(v, "document rejected: %s", err);
	TEST_CHECK(js_bool(js_get(v, "ok"), false), "ok");
	TEST_CHECK(!strcmp(js_str(js_get(v, "status"), ""), "completed"), "status");
	TEST_CHECK(js_num(js_get(v, "downtime"), 0) == 12.345, "downtime");
	TEST_CHECK(js_path_num(v, "ram.transferred", 0) == 268435456.0, "ram.transferred");
	TEST_CHECK(js_path_num(v, "ram.mbps", 0) == 1500.0, "ram.mbps");
	TEST_CHECK(js_path_num(v, "ram.nope", -1) == -1, "missing member default");
	TEST_CHECK(js_path(v, "status.x") == NULL, "path through a string");
	TEST_CHECK(!strcmp(js_str(js_get(v, "s"), ""), "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80"),
		   "escapes decoded: '%s'", js_str(js_get(v, "s"), ""));
	TEST_CHECK(json_is_null(js_get(v, "n")), "null");
	TEST_CHECK(!js_bool(js_get(v, "f"), true), "false");
	TEST_CHECK(js_num(js_get(json_array_get(js_get(v, "rounds"), 1), "round"), 0) == 1,
		   "array element");
	TEST_CHECK(js_str(js_get(v, "downtime"), "def")[0] == 'd', "typed read of another type");

	c = js_copy_without(v, skip);
	buf = to_text(c);
	TEST_CHECK(!strncmp(buf, "{\"status\":\"completed\",\"downtime\":12.345,", 40),
		   "members in order, compact: %s", buf);
	TEST_CHECK(!strstr(buf, "\"ok\"") && !strstr(buf, "\"n\""), "skipped members: %s", buf);
	free(buf);
	json_decref(c);
	json_decref(v);

	/* Milliseconds rounded to the microsecond print as written. */
	o = json_object();
	ms = (double)((1093123456ull + 500) / 1000) / 1000.0;
	TEST_ASSERT(!js_set_real(o, "t", ms) && !js_set_real(o, "w", 5.0) &&
		    !js_set_int(o, "i", 42) && !js_set_bool(o, "b", true) && !js_set_str(o, "s", bad),
		    "setters");
	buf = to_text(o);
	TEST_CHECK(!strcmp(buf, "{\"t\":1093.123,\"w\":5.0,\"i\":42,\"b\":true,\"s\":\"a?b?\"}"),
		   "written: %s", buf);
	free(buf);
	json_decref(o);

	round_trip("{\"a\":[1,-2.5,30000000000.0,0],\"b\":{},\"c\":[],\"d\":\"x\\ty\"}");
	round_trip("\"\\u0001\"");

	rejected("");
	rejected("{");
	rejected("{\"a\" 1}");
	rejected("{\"a\":1,}");
	rejected("[1 2]");
	rejected("01");
	rejected("1.");
	rejected("-");
	rejected("tru");
	rejected("\"abc");
	rejected("\"\\x\"");
	rejected("\"\\u12\"");
	rejected("\"a\nb\"");
	rejected("{} x");
	rejected("{1:2}");
	rejected("{\"a\":1,\"a\":2}");
	rejected("12345678901234567890123");
	TEST_EXIT();
}
