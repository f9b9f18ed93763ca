// SPDX-License-Identifier: MIT
/*
 * Invariant: the progress line and the report say what the status object
 * knows, and nothing it does not:
 *  - a migration converging at its max-bandwidth cap (converge-state
 *    "capped") is labelled so, with the model's ETA, never "NOT converging";
 *    a guest dirtying faster than the link is "NOT converging" and says so;
 *  - an expected downtime no rate gave yet (expected-downtime-known false)
 *    shows as "?", in the line and in the round table, never as 0;
 *  - a round table the engine cut (rounds > rows) says which rounds it left out;
 *  - a converging migration's hint is "how:", beside "converging"; one
 *    that fits says "fits the limit";
 *  - a downtime from QMP (no downtime-measured) is "as query-migrate gives
 *    it", with no expected downtime QMP did not give;
 *  - a destination's line shows what it received, no rounds and no ETA.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static json_t *parse(const char *text)
{
	char err[128] = "";
	json_t *v = js_parse(text, strlen(text), err, sizeof(err));

	TEST_ASSERT(v, "test JSON: %s", err);
	return v;
}

static void line_of(const char *text, char *buf, size_t len)
{
	json_t *st = parse(text);

	cli_progress_line(st, buf, len);
	json_decref(st);
}

/* The report of @text; the caller frees it. */
static char *report_of(const char *text)
{
	json_t *st = parse(text);
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);

	TEST_ASSERT(f, "open_memstream");
	report_print(f, st, NULL);
	fclose(f);
	json_decref(st);
	return out;
}

#define ACTIVE "\"status\":\"active\",\"role\":\"source\",\"rounds\":5,\"total-time\":3000," \
	"\"ram\":{\"total\":4294967296,\"remaining\":4000000000,\"transferred\":100000000,\"rate-bps\":20971520," \
	"\"dirty-pages-rate\":358},\"expected-downtime\":190000.0,"

static void progress_lines(void)
{
	char l[400];

	line_of("{" ACTIVE "\"converging\":true,\"converge-state\":\"capped\",\"converge-eta\":14000}", l, sizeof(l));
	TEST_CHECK(strstr(l, ", converging at the max-bandwidth cap") && !strstr(l, "NOT"), "capped: %s", l);
	TEST_CHECK(strstr(l, "ETA 0m14s"), "capped: the model's ETA: %s", l);
	line_of("{" ACTIVE "\"converging\":true,\"converge-state\":\"draining\",\"converge-eta\":2500}", l, sizeof(l));
	TEST_CHECK(strstr(l, ", converging at the link's rate") && strstr(l, "ETA 2.5 s"), "draining: %s", l);
	line_of("{" ACTIVE "\"converging\":false,\"converge-state\":\"outrun\"}", l, sizeof(l));
	TEST_CHECK(strstr(l, "NOT converging: the guest dirties faster than the link moves") &&
		   strstr(l, "ETA none"), "outrun: %s", l);
	line_of("{" ACTIVE "\"converging\":false,\"converge-state\":\"flat\"}", l, sizeof(l));
	TEST_CHECK(strstr(l, "NOT converging: the guest writes again what is sent"), "flat: %s", l);
	/* QEMU gives no verdict: only converging false says something. */
	line_of("{" ACTIVE "\"converging\":false}", l, sizeof(l));
	TEST_CHECK(strstr(l, ", NOT converging") && !strstr(l, "NOT converging:"), "no state: %s", l);
	line_of("{" ACTIVE "\"converging\":true,\"converge-state\":\"fits\"}", l, sizeof(l));
	TEST_CHECK(!strstr(l, "converging"), "fits: %s", l);
	line_of("{" ACTIVE "\"expected-downtime-known\":false,\"converge-state\":\"unknown\"}", l, sizeof(l));
	TEST_CHECK(strstr(l, "expected downtime ?,") && !strstr(l, "190000"), "unknown: %s", l);
	line_of("{\"status\":\"handover\",\"role\":\"destination\",\"vm-status\":\"running\",\"rounds\":0,"
		"\"ram\":{\"total\":67108864,\"transferred\":58525468,\"mbps\":265.4}}", l, sizeof(l));
	TEST_CHECK(strstr(l, "handover (destination): 55.81 MiB received of 64.00 MiB RAM") &&
		   strstr(l, "the VM runs here") && !strstr(l, "round") && !strstr(l, "ETA"), "destination: %s", l);
}

/* A completed source with @rows round rows of which the first has no known expected downtime. */
static char *rounds_report(unsigned rows, unsigned rounds)
{
	size_t cap = 256 + rows * 128, at;
	char *text = malloc(cap), *out;

	TEST_ASSERT(text, "malloc");
	at = (size_t)snprintf(text, cap, "{\"status\":\"completed\",\"role\":\"source\",\"downtime\":3.0,"
			      "\"downtime-measured\":true,\"expected-downtime\":2.5,\"rounds\":%u,"
			      "\"ram\":{\"normal\":10},\"round-table\":[", rounds);
	for (unsigned i = 0; i < rows; i++)
		at += (size_t)snprintf(text + at, cap - at, "%s{\"round\":%u,\"expected-downtime\":%s,"
				       "\"expected-downtime-known\":%s}", i ? "," : "", i, i ? "7.25" : "0.0",
				       i ? "true" : "false");
	snprintf(text + at, cap - at, "]}");
	out = report_of(text);
	free(text);
	return out;
}

static void round_tables(void)
{
	char *r = rounds_report(64, 70);

	TEST_CHECK(strstr(r, "(rounds 64-69 not shown: the table keeps the first 64 rounds)"), "cut table:\n%s", r);
	TEST_CHECK(strstr(r, "            ?") && strstr(r, "7.250"), "unknown expected downtime as ?:\n%s", r);
	free(r);
	r = rounds_report(3, 3);
	TEST_CHECK(!strstr(r, "not shown"), "whole table says nothing:\n%s", r);
	free(r);
}

static void convergence_and_downtime(void)
{
	char *r;

	r = report_of("{\"status\":\"failed\",\"role\":\"source\",\"error-desc\":\"did not converge within 3000 ms\","
		      "\"ram\":{\"normal\":100},\"cpu-throttle-percentage\":0,\"rtt\":0.2,\"converging\":true,"
		      "\"converge-state\":\"capped\",\"converge-hint\":\"converging at the max-bandwidth cap of 20.0 "
		      "MiB/s\"}");
	TEST_CHECK(strstr(r, "rtt 0.200 ms, converging\n") && strstr(r, "  how:") && !strstr(r, "not converging"),
		   "capped, cancelled at the timeout:\n%s", r);
	free(r);
	r = report_of("{\"status\":\"completed\",\"role\":\"source\",\"ram\":{\"normal\":100},"
		      "\"cpu-throttle-percentage\":0,\"rtt\":0.2,\"converging\":true,\"converge-state\":\"fits\"}");
	TEST_CHECK(strstr(r, "converging") == NULL && strstr(r, "fits the limit"), "fits:\n%s", r);
	free(r);
	/* From QMP: downtime, no downtime-measured, no expected-downtime once completed. */
	r = report_of("{\"status\":\"completed\",\"role\":\"source\",\"total-time\":1730,\"downtime\":193,"
		      "\"ram\":{\"normal\":100}}");
	TEST_CHECK(strstr(r, "downtime:          193.000 ms (as query-migrate gives it)\n"), "QMP downtime:\n%s", r);
	TEST_CHECK(!strstr(r, "expected") && !strstr(r, "RTT/2"), "QMP: nothing QMP did not say:\n%s", r);
	free(r);
	r = report_of("{\"status\":\"completed\",\"role\":\"source\",\"downtime\":5,\"downtime-measured\":false,"
		      "\"expected-downtime\":0,\"expected-downtime-known\":false,\"ram\":{\"normal\":100}}");
	TEST_CHECK(strstr(r, "(expected: unknown; resume estimated as RESUMED minus RTT/2)"), "unknown expected:\n%s", r);
	free(r);
}

int main(void)
{
	progress_lines();
	round_tables();
	convergence_and_downtime();
	TEST_EXIT();
}
