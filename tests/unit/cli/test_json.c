// SPDX-License-Identifier: MIT
/*
 * Invariant: the tool's JSON reader accepts what RFC 8259 accepts (as far
 * as the API produces it: objects, arrays, escapes, \u with surrogate
 * pairs, numbers with exponents), rejects malformed input with a reason,
 * bounds nesting, and writing a parsed value back gives the same text for
 * compact input, numbers kept digit for digit.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static char *to_text(const struct json *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	TEST_ASSERT(f, "open_memstream");
	json_write(f, v);
	fclose(f);
	return buf;
}

static void round_trip(const char *text)
{
	char err[128] = "";
	struct json *v = json_parse(text, err, sizeof(err));
	char *out;

	TEST_CHECK(v, "'%s' rejected: %s", text, err);
	if (!v)
		return;
	out = to_text(v);
	TEST_CHECK(!strcmp(out, text), "'%s' wrote back as '%s'", text, out);
	free(out);
	json_free(v);
}

static void rejected(const char *text)
{
	char err[128] = "";
	struct json *v = json_parse(text, err, sizeof(err));

	TEST_CHECK(!v && err[0], "'%s' accepted (or no reason)", text);
	json_free(v);
}

int main(void)
{
	static const char doc[] =
		" {\"ok\":true,\"status\":\"completed\",\"downtime\":12.345,"
		"\"ram\":{\"transferred\":268435456,\"mbps\":1.5e3},"
		"\"rounds\":[{\"round\":0},{\"round\":1}],\"s\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\","
		"\"n\":null,\"f\":false} ";
	const char *const skip[] = { "ok", "n", NULL };
	struct json *v;
	char err[128], *buf = NULL, deep[200];
	size_t len = 0;
	FILE *f;
	int i;

	v = json_parse(doc, err, sizeof(err));
	TEST_ASSERT(v, "document rejected: %s", err);
	TEST_CHECK(json_bool(json_get(v, "ok"), false), "ok");
	TEST_CHECK(!strcmp(json_str(json_get(v, "status"), ""), "completed"), "status");
	TEST_CHECK(json_num(json_get(v, "downtime"), 0) == 12.345, "downtime");
	TEST_CHECK(json_path_num(v, "ram.transferred", 0) == 268435456.0, "ram.transferred");
	TEST_CHECK(json_path_num(v, "ram.mbps", 0) == 1500.0, "ram.mbps");
	TEST_CHECK(json_path_num(v, "ram.nope", -1) == -1, "missing member default");
	TEST_CHECK(json_path(v, "status.x") == NULL, "path through a string");
	TEST_CHECK(!strcmp(json_str(json_get(v, "s"), ""), "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80"),
		   "escapes decoded: '%s'", json_str(json_get(v, "s"), ""));
	TEST_CHECK(json_get(v, "n") && json_get(v, "n")->type == JSON_NULL, "null");
	TEST_CHECK(!json_bool(json_get(v, "f"), true), "false");
	TEST_CHECK(json_get(v, "rounds")->child->next->child->number == 1, "array element");

	f = open_memstream(&buf, &len);
	TEST_ASSERT(f, "open_memstream");
	TEST_CHECK(json_write_members(f, v, skip) == 6, "members written");
	fclose(f);
	TEST_CHECK(!strncmp(buf, "\"status\":\"completed\",\"downtime\":12.345,", 39),
		   "members: %s", buf);
	TEST_CHECK(!strstr(buf, "\"ok\"") && !strstr(buf, "\"n\""), "skipped members: %s", buf);
	free(buf);
	json_free(v);

	round_trip("{\"a\":[1,-2.5,3e+10,0],\"b\":{},\"c\":[],\"d\":\"x\\ty\"}");
	round_trip("12345678901234567890");
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
	for (i = 0; i < 100; i++)
		deep[i] = '[';
	deep[100] = '\0';
	rejected(deep);
	TEST_EXIT();
}
