/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_size_str() writes a size as godwit's options take it: the
 * largest of T/G/M/K that divides it exactly in at most 4 digits, else bytes
 * below 1K, else one decimal of the largest unit below it; and the written text always fits its
 * buffer, NUL-terminated, for any value (16 bytes hold UINT64_MAX's).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <godwit/log.h>
#include "test_util.h"

TEST_DEFINE_FAILURES;

static void expect(uint64_t bytes, const char *want)
{
	char out[16];

	gw_size_str(out, sizeof(out), bytes);
	TEST_CHECK(!strcmp(out, want), "gw_size_str(%llu): got '%s', want '%s'", (unsigned long long)bytes,
		   out, want);
}

int main(void)
{
	char small[4];

	expect(0, "0");
	expect(1000, "1000");
	expect(1024, "1K");
	expect(1536 << 10, "1536K");
	expect(256ull << 20, "256M");
	expect(260ull << 20, "260M");
	expect(1ull << 30, "1G");
	expect(1ull << 40, "1T");
	expect(3ull << 40, "3T");
	expect((1ull << 20) + 1, "1.0M");
	expect(16337584128ull, "15.2G");	/* 15954672K: exact, but no one writes it */
	expect(9999ull << 10, "9999K");
	expect(10000ull << 10, "9.8M");
	expect(UINT64_MAX, "16777216.0T");
	gw_size_str(small, sizeof(small), 256ull << 20);
	TEST_CHECK(!strcmp(small, "256"), "cut to its buffer: '%s'", small);
	TEST_CHECK(gw_size_str(NULL, 0, 1) == NULL, "a NULL buffer is returned as is");
	TEST_EXIT();
}
