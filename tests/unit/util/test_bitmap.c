/* SPDX-License-Identifier: MIT */
/*
 * Invariant: after any sequence of bitmap operations, a gw_bitmap holds
 * exactly the bits of a naive bool-array model: test() agrees bit by bit,
 * weight() equals the model's count, next_set()/next_clear() return the
 * model's next such bit (or nr_bits), and bits past nr_bits in the last
 * word stay clear. Sizes include 0, 1 and values around multiples of 64;
 * ranges start and end at unaligned positions and may run past nr_bits.
 */
#include "mem/bitmap.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdint.h>

TEST_DEFINE_FAILURES;

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic so failures reproduce. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static uint64_t model_next(const bool *m, uint64_t n, uint64_t from, bool want)
{
	for (uint64_t i = from; i < n; i++)
		if (m[i] == want)
			return i;
	return n;
}

static void check_equal(const struct gw_bitmap *b, const bool *m, const char *op)
{
	uint64_t n = b->nr_bits, count = 0;

	for (uint64_t i = 0; i < n; i++) {
		TEST_CHECK(gw_bitmap_test(b, i) == m[i], "after %s: bit %lu of %lu: %d, model %d",
			   op, (unsigned long)i, (unsigned long)n, gw_bitmap_test(b, i), m[i]);
		count += m[i];
	}
	TEST_CHECK(gw_bitmap_weight(b) == count, "after %s: weight %lu, model %lu (nr_bits %lu)",
		   op, (unsigned long)gw_bitmap_weight(b), (unsigned long)count,
		   (unsigned long)n);
	if (n % 64)
		TEST_CHECK((b->words[n / 64] >> (n % 64)) == 0,
			   "after %s: tail bits past nr_bits %lu set: %#lx", op,
			   (unsigned long)n, (unsigned long)b->words[n / 64]);

	/* Exhaustive next_* for small maps, sampled (plus edges) for big ones. */
	uint64_t step = n <= 300 ? 1 : n / 97 + 1;

	for (uint64_t from = 0; from <= n + 2; from += step) {
		uint64_t exp_set = model_next(m, n, from, true);
		uint64_t exp_clear = model_next(m, n, from, false);

		TEST_CHECK(gw_bitmap_next_set(b, from) == exp_set,
			   "after %s: next_set(%lu) = %lu, model %lu (nr_bits %lu)", op,
			   (unsigned long)from, (unsigned long)gw_bitmap_next_set(b, from),
			   (unsigned long)exp_set, (unsigned long)n);
		TEST_CHECK(gw_bitmap_next_clear(b, from) == exp_clear,
			   "after %s: next_clear(%lu) = %lu, model %lu (nr_bits %lu)", op,
			   (unsigned long)from, (unsigned long)gw_bitmap_next_clear(b, from),
			   (unsigned long)exp_clear, (unsigned long)n);
	}
	/* any_in_range against the model, over ranges near word edges and the end. */
	for (uint64_t k = 0; k < 16 && n; k++) {
		uint64_t first = rnd_below(n), len = rnd_below(200) + 1;
		bool exp = false;

		for (uint64_t i = first; i < first + len && i < n; i++)
			exp |= m[i];
		TEST_CHECK(gw_bitmap_any_in_range(b, first, len) == exp,
			   "after %s: any_in_range(%lu, %lu) = %d, model %d", op, (unsigned long)first,
			   (unsigned long)len, gw_bitmap_any_in_range(b, first, len), exp);
	}
	for (uint64_t k = 0; k < 8 && n; k++) {
		uint64_t from = n - 1 - rnd_below(n < 130 ? n : 130);

		TEST_CHECK(gw_bitmap_next_set(b, from) == model_next(m, n, from, true),
			   "after %s: next_set(%lu) near end", op, (unsigned long)from);
		TEST_CHECK(gw_bitmap_next_clear(b, from) == model_next(m, n, from, false),
			   "after %s: next_clear(%lu) near end", op, (unsigned long)from);
	}
}

/* A random range that often starts/ends on or near word edges and past the end. */
static void rnd_range(uint64_t n, uint64_t *start, uint64_t *count)
{
	switch (rnd() % 4) {
	case 0:
		*start = rnd_below(n + 2);
		*count = rnd_below(n + 2);
		break;
	case 1:
		*start = rnd_below(n / 64 + 1) * 64 + rnd_below(3) - (rnd() & 1);
		*count = rnd_below(n / 64 + 1) * 64 + rnd_below(3) - (rnd() & 1);
		break;
	case 2:
		*start = rnd_below(n + 1);
		*count = rnd_below(70);
		break;
	default:
		*start = rnd_below(n + 1);
		*count = UINT64_MAX - rnd_below(3);	/* to the end, no overflow */
		break;
	}
	if (*start > n + 1)
		*start = 0;
}

static void model_range(bool *m, uint64_t n, uint64_t start, uint64_t count, bool v)
{
	for (uint64_t i = start; i < n && i - start < count; i++)
		m[i] = v;
}

static void run_size(uint64_t n, unsigned nr_ops)
{
	struct gw_bitmap b, other;
	bool *m = calloc(n + 1, sizeof(bool));
	bool *mo = calloc(n + 1, sizeof(bool));

	TEST_ASSERT(m && mo, "calloc model of %lu bits", (unsigned long)n);
	TEST_ASSERT(gw_bitmap_init(&b, n) == 0, "init %lu bits", (unsigned long)n);
	TEST_ASSERT(gw_bitmap_init(&other, n) == 0, "init %lu bits", (unsigned long)n);
	check_equal(&b, m, "init");

	for (unsigned op = 0; op < nr_ops; op++) {
		uint64_t start, count, i;
		const char *name;

		switch (rnd() % 11) {
		case 0:
		case 1:
			if (!n)
				continue;
			i = rnd_below(n);
			gw_bitmap_set(&b, i);
			m[i] = true;
			name = "set";
			break;
		case 2:
			if (!n)
				continue;
			i = rnd_below(n);
			gw_bitmap_clear(&b, i);
			m[i] = false;
			name = "clear";
			break;
		case 3:
			rnd_range(n, &start, &count);
			gw_bitmap_set_range(&b, start, count);
			model_range(m, n, start, count, true);
			name = "set_range";
			break;
		case 4:
			rnd_range(n, &start, &count);
			gw_bitmap_clear_range(&b, start, count);
			model_range(m, n, start, count, false);
			name = "clear_range";
			break;
		case 5:
			if (rnd() % 4)
				continue;
			gw_bitmap_set_all(&b);
			model_range(m, n, 0, n, true);
			name = "set_all";
			break;
		case 6:
			if (rnd() % 4)
				continue;
			gw_bitmap_zero(&b);
			model_range(m, n, 0, n, false);
			name = "zero";
			break;
		case 7:
			/* OR in a sparse random map built with ranges and single bits. */
			gw_bitmap_zero(&other);
			model_range(mo, n, 0, n, false);
			for (int k = 0; k < 4; k++) {
				rnd_range(n, &start, &count);
				if (count > 200)
					count = rnd_below(200);
				gw_bitmap_set_range(&other, start, count);
				model_range(mo, n, start, count, true);
				if (n) {
					i = rnd_below(n);
					gw_bitmap_set(&other, i);
					mo[i] = true;
				}
			}
			check_equal(&other, mo, "or source");
			gw_bitmap_or(&b, &other);
			for (i = 0; i < n; i++)
				m[i] |= mo[i];
			name = "or";
			break;
		case 8:
			if (!n)
				continue;
			i = rnd_below(n);
			gw_bitmap_set_atomic(&b, i);
			m[i] = true;
			name = "set_atomic";
			break;
		case 9: {
			bool was;

			if (!n)
				continue;
			i = rnd_below(n);
			was = gw_bitmap_test_and_set_atomic(&b, i);
			TEST_CHECK(was == m[i], "test_and_set(%lu) returned %d, model %d",
				   (unsigned long)i, was, m[i]);
			m[i] = true;
			name = "test_and_set_atomic";
			break;
		}
		default:
			continue;
		}
		check_equal(&b, m, name);
	}
	gw_bitmap_free(&b);
	gw_bitmap_free(&other);
	gw_bitmap_free(NULL);
	free(m);
	free(mo);
}

/* Deterministic edge cases the random walk could miss. */
static void edge_cases(void)
{
	struct gw_bitmap b;

	TEST_ASSERT(gw_bitmap_init(&b, 130) == 0, "init 130");
	gw_bitmap_set_all(&b);
	TEST_CHECK(gw_bitmap_weight(&b) == 130, "set_all weight %lu",
		   (unsigned long)gw_bitmap_weight(&b));
	TEST_CHECK(gw_bitmap_next_clear(&b, 0) == 130, "full map: next_clear = nr_bits");
	gw_bitmap_clear_range(&b, 63, 2);	/* straddles the first word edge */
	TEST_CHECK(gw_bitmap_next_clear(&b, 0) == 63, "next_clear after straddle");
	TEST_CHECK(gw_bitmap_next_set(&b, 63) == 65, "next_set after straddle");
	gw_bitmap_zero(&b);
	TEST_CHECK(gw_bitmap_next_set(&b, 0) == 130, "empty map: next_set = nr_bits");
	gw_bitmap_set_range(&b, 64, 64);	/* exactly one whole word */
	TEST_CHECK(b.words[0] == 0 && b.words[1] == ~0ULL && b.words[2] == 0,
		   "whole-word range: %#lx %#lx %#lx", (unsigned long)b.words[0],
		   (unsigned long)b.words[1], (unsigned long)b.words[2]);
	gw_bitmap_set_range(&b, 129, 1000);	/* runs past nr_bits: clamped */
	TEST_CHECK(b.words[2] == 2, "clamped range: %#lx", (unsigned long)b.words[2]);
	gw_bitmap_free(&b);

	TEST_ASSERT(gw_bitmap_init(&b, 0) == 0, "init 0");
	TEST_CHECK(gw_bitmap_weight(&b) == 0, "empty weight");
	TEST_CHECK(gw_bitmap_next_set(&b, 0) == 0 && gw_bitmap_next_clear(&b, 5) == 0,
		   "empty next_*");
	gw_bitmap_set_all(&b);
	gw_bitmap_set_range(&b, 0, 10);
	gw_bitmap_free(&b);
}

int main(void)
{
	static const uint64_t sizes[] = {
		0, 1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 200, 255, 256, 257, 1000, 4097,
	};

	edge_cases();
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		run_size(sizes[s], sizes[s] > 1000 ? 300 : 1500);
	for (int k = 0; k < 20; k++)
		run_size(1 + rnd_below(700), 300);
	TEST_EXIT();
}
