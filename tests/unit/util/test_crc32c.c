/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_crc32c is the standard CRC-32C (Castagnoli, reflected,
 * init/xorout 0xFFFFFFFF) and is chainable: for any split of a buffer,
 * gw_crc32c(gw_crc32c(0, a, la), b, lb) == gw_crc32c(0, a||b, la+lb), and
 * both equal a bitwise reference. Checked on the "123456789" check value,
 * on empty input, and on random buffers, lengths, alignments and splits.
 */
#include "util/crc32c.h"
#include "test_util.h"

#include <stdint.h>

TEST_DEFINE_FAILURES;

/* Bit at a time, straight from the definition: nothing to share with ISA-L. */
static uint32_t ref_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

int main(void)
{
	enum { MAX_LEN = 9000 };
	static unsigned char buf[MAX_LEN + 64];

	TEST_CHECK(gw_crc32c(0, "123456789", 9) == 0xe3069283u,
		   "check value %#x, want 0xe3069283", gw_crc32c(0, "123456789", 9));
	TEST_CHECK(ref_crc32c(0, "123456789", 9) == 0xe3069283u, "reference check value %#x",
		   ref_crc32c(0, "123456789", 9));
	TEST_CHECK(gw_crc32c(0, NULL, 0) == 0, "empty from 0: %#x", gw_crc32c(0, NULL, 0));
	TEST_CHECK(gw_crc32c(0x12345678u, buf, 0) == 0x12345678u, "empty keeps crc");
	/* 32 zero bytes: an RFC 3720 (iSCSI) B.4 test vector. */
	TEST_CHECK(gw_crc32c(0, buf, 32) == 0x8a9136aau, "32 zeros: %#x", gw_crc32c(0, buf, 32));

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rnd();

	for (int iter = 0; iter < 3000; iter++) {
		size_t len = iter < 300 ? (size_t)iter : (size_t)(rnd() % (MAX_LEN + 1));
		size_t off = rnd() % 64;
		const unsigned char *p = buf + off;
		uint32_t want = ref_crc32c(0, p, len);
		uint32_t got = gw_crc32c(0, p, len);
		size_t s1 = len ? rnd() % (len + 1) : 0;
		size_t s2 = s1 + (len - s1 ? rnd() % (len - s1 + 1) : 0);
		uint32_t c;

		TEST_CHECK(got == want, "len %zu off %zu: %#x, reference %#x", len, off, got, want);
		c = gw_crc32c(0, p, s1);
		TEST_CHECK(c == ref_crc32c(0, p, s1), "prefix len %zu", s1);
		c = gw_crc32c(c, p + s1, s2 - s1);
		c = gw_crc32c(c, p + s2, len - s2);
		TEST_CHECK(c == want, "len %zu split %zu/%zu: %#x, want %#x", len, s1, s2, c, want);
		/* A non-zero seed chains the same way through the reference. */
		TEST_CHECK(gw_crc32c(0xdeadbeefu, p, len) == ref_crc32c(0xdeadbeefu, p, len),
			   "seeded len %zu", len);
	}
	TEST_EXIT();
}
