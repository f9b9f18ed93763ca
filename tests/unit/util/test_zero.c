/* SPDX-License-Identifier: MIT */
/*
 * Invariant: every zero-detection variant the CPU has returns true exactly
 * when all bytes of [buf, buf+len) are zero, for any alignment and any
 * length (0 included), and never depends on, or reads, bytes outside that
 * range. Checked for alignments 0..127 and lengths 0..9000, 4096 and 65536:
 * all-zero buffers with non-zero guard bytes on both sides must be zero; a
 * single non-zero byte at any position (every position for short lengths,
 * sampled for long ones) must make it non-zero. Buffers that end right
 * before, or start right after, a PROT_NONE page catch over-reads. The
 * dispatcher must pick the first usable variant of the preference table.
 */
#include "mem/zero.h"
#include "test_util.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

TEST_DEFINE_FAILURES;

#define GUARD_BYTES 64
#define MAX_ALIGN 128
#define MAX_LEN 65536

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static unsigned char *area;	/* GUARD | MAX_ALIGN | MAX_LEN | GUARD, 4 KiB aligned */

static void check_one(const struct gw_zero_variant *v, size_t align, size_t len,
		      bool all_positions)
{
	unsigned char *buf = area + GUARD_BYTES + align;
	unsigned char bit = (unsigned char)(1u << (rnd() % 8));

	/* Non-zero guards around an all-zero range. */
	memset(buf - GUARD_BYTES, 0xa5, GUARD_BYTES);
	memset(buf + len, 0x5a, GUARD_BYTES);
	TEST_CHECK(v->is_zero(buf, len), "%s: align %zu len %zu: zero range with guards "
		   "reported non-zero", v->name, align, len);

	if (all_positions) {
		for (size_t pos = 0; pos < len; pos++) {
			buf[pos] = bit;
			TEST_CHECK(!v->is_zero(buf, len), "%s: align %zu len %zu: byte %zu = %#x "
				   "missed", v->name, align, len, pos, bit);
			buf[pos] = 0;
		}
	} else if (len) {
		/* Head and tail edges, every 64-byte boundary region near both ends, random. */
		size_t picks[48], n = 0;

		for (size_t k = 0; k < 8 && k < len; k++) {
			picks[n++] = k;
			picks[n++] = len - 1 - k;
		}
		for (size_t k = 0; k < 16; k++)
			picks[n++] = (size_t)(rnd() % len);
		for (size_t k = 0; k < 16; k++) {
			/* Just before / after an aligned 64-byte edge of the address. */
			size_t edge = (64 - ((uintptr_t)buf % 64)) % 64 + 64 * (rnd() % (len / 64 + 1));

			picks[n++] = (edge + len - (k & 1)) % len;
		}
		for (size_t k = 0; k < n; k++) {
			size_t pos = picks[k];

			buf[pos] = bit;
			TEST_CHECK(!v->is_zero(buf, len), "%s: align %zu len %zu: byte %zu = %#x "
				   "missed", v->name, align, len, pos, bit);
			buf[pos] = 0;
		}
	}
	memset(buf - GUARD_BYTES, 0, GUARD_BYTES);
	memset(buf + len, 0, GUARD_BYTES);
}

/* A buffer flush against a PROT_NONE page on either side: any over-read faults. */
static void check_fenced(const struct gw_zero_variant *v)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t data = 4 * (size_t)page;
	unsigned char *map = mmap(NULL, data + 2 * (size_t)page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	TEST_ASSERT(map != MAP_FAILED, "mmap fenced buffer");
	TEST_ASSERT(mprotect(map, (size_t)page, PROT_NONE) == 0, "mprotect low fence");
	TEST_ASSERT(mprotect(map + page + data, (size_t)page, PROT_NONE) == 0,
		    "mprotect high fence");
	unsigned char *lo = map + page, *hi = map + page + data;

	for (size_t len = 0; len <= data; len += len < 600 ? 1 : 61) {
		TEST_CHECK(v->is_zero(hi - len, len), "%s: len %zu ending at a fence", v->name,
			   len);
		TEST_CHECK(v->is_zero(lo, len), "%s: len %zu starting at a fence", v->name, len);
		if (len) {
			hi[-1] = 1;
			TEST_CHECK(!v->is_zero(hi - len, len), "%s: len %zu last byte", v->name,
				   len);
			hi[-1] = 0;
			lo[0] = 1;
			TEST_CHECK(!v->is_zero(lo, len), "%s: len %zu first byte", v->name, len);
			lo[0] = 0;
		}
	}
	/* Every alignment of short buffers just below the high fence. */
	for (size_t len = 0; len < 300; len++)
		for (size_t a = 0; a < MAX_ALIGN; a++)
			TEST_CHECK(v->is_zero(hi - len - a, len), "%s: len %zu, %zu before fence",
				   v->name, len, a);
	munmap(map, data + 2 * (size_t)page);
}

static void check_variant(const struct gw_zero_variant *v)
{
	for (size_t len = 0; len <= 9000; len++) {
		if (len <= 600) {
			/* Short lengths: every alignment, every position. */
			for (size_t a = 0; a < MAX_ALIGN; a++)
				check_one(v, a, len, len <= 300 || a % 16 == 0 || a % 16 == 15);
		} else {
			/* Longer: every alignment for some lengths, a few for the rest. */
			bool every_align = len % 97 == 0 || len % 64 < 2 || len % 64 == 63;

			for (size_t a = 0; a < MAX_ALIGN; a++)
				if (every_align || a == 0 || a == len % MAX_ALIGN ||
				    a == (len * 7 + 3) % MAX_ALIGN)
					check_one(v, a, len, false);
		}
	}
	for (size_t a = 0; a < MAX_ALIGN; a++) {
		check_one(v, a, 4096, a % 32 == 0 || a == 1 || a == 127);
		check_one(v, a, MAX_LEN, a == 0 || a == 63);
	}
	check_fenced(v);
}

int main(void)
{
	const struct gw_zero_variant *first_usable = NULL;
	int nr_tested = 0;

	/* C11 wants the size to be a multiple of the alignment. */
	area = aligned_alloc(4096, (2 * GUARD_BYTES + MAX_ALIGN + MAX_LEN + 4095) / 4096 * 4096);
	TEST_ASSERT(area, "aligned_alloc");
	memset(area, 0, 2 * GUARD_BYTES + MAX_ALIGN + MAX_LEN);

	for (size_t i = 0; gw_zero_variants[i]; i++) {
		const struct gw_zero_variant *v = gw_zero_variants[i];

		if (!v->cpu_has()) {
			printf("variant %s: not on this CPU, skipped\n", v->name);
			continue;
		}
		if (!first_usable)
			first_usable = v;
		check_variant(v);
		printf("variant %s: checked\n", v->name);
		nr_tested++;
	}
	TEST_ASSERT(nr_tested > 0, "no usable variant: portable must always be usable");

	TEST_CHECK(gw_zero_selected() == first_usable, "selected %s, first usable %s",
		   gw_zero_selected()->name, first_usable->name);
	gw_zero_init();		/* idempotent */
	TEST_CHECK(gw_zero_selected() == first_usable, "selection changed after init");
	area[GUARD_BYTES + 4000] = 7;
	TEST_CHECK(!gw_is_zero(area + GUARD_BYTES, 4096), "gw_is_zero missed a byte");
	area[GUARD_BYTES + 4000] = 0;
	TEST_CHECK(gw_is_zero(area + GUARD_BYTES, 4096), "gw_is_zero on a zero page");
	free(area);
	TEST_EXIT();
}
