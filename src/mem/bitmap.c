/* SPDX-License-Identifier: MIT */
/*
 * Page bitmaps, word at a time.
 *
 * Invariant kept by every function here: bits at positions >= nr_bits in
 * the last word are clear. gw_bitmap_weight(), gw_bitmap_next_set() and
 * gw_bitmap_or() rely on it (or() preserves it because both sides hold it).
 * Range functions clamp to nr_bits, so they cannot break it either.
 *
 * Thread ownership: a struct gw_bitmap is owned by its caller; none of the
 * functions here are atomic (see the _atomic inlines in bitmap.h).
 */
#include "mem/bitmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int gw_bitmap_init(struct gw_bitmap *b, uint64_t nr_bits)
{
	uint64_t nr_words = (nr_bits + 63) / 64;

	b->words = NULL;
	b->nr_bits = 0;
	if (nr_bits > UINT64_MAX - 63 || nr_words > SIZE_MAX / sizeof(uint64_t))
		return -ENOMEM;
	/* calloc(0) may return NULL: keep one word so words is never NULL. */
	b->words = calloc(nr_words ? nr_words : 1, sizeof(uint64_t));
	if (!b->words)
		return -ENOMEM;
	b->nr_bits = nr_bits;
	return 0;
}

int gw_bitmap_init_prefaulted(struct gw_bitmap *b, uint64_t nr_bits)
{
	const uint64_t words_per_page = 4096 / sizeof(uint64_t);
	int ret = gw_bitmap_init(b, nr_bits);

	/* A store per page (volatile: calloc's memory is known to be zero). */
	for (uint64_t w = 0; !ret && w < gw_bitmap_words(b); w += words_per_page)
		((volatile uint64_t *)b->words)[w] = 0;
	return ret;
}

void gw_bitmap_free(struct gw_bitmap *b)
{
	if (!b)
		return;
	free(b->words);
	b->words = NULL;
	b->nr_bits = 0;
}

/* Mask of bits [lo, hi) within one word, 0 <= lo < hi <= 64. */
static inline uint64_t word_mask(unsigned lo, unsigned hi)
{
	uint64_t upto_hi = hi == 64 ? ~0ULL : (1ULL << hi) - 1;

	return upto_hi & ~((1ULL << lo) - 1);
}

/* Clamp [start, start+count) to [0, nr_bits); returns false when empty. */
static bool clamp_range(const struct gw_bitmap *b, uint64_t start, uint64_t count,
			uint64_t *end)
{
	if (start >= b->nr_bits || count == 0)
		return false;
	*end = count > b->nr_bits - start ? b->nr_bits : start + count;
	return true;
}

void gw_bitmap_set_range(struct gw_bitmap *b, uint64_t start, uint64_t count)
{
	uint64_t end, w, last_w;

	if (!clamp_range(b, start, count, &end))
		return;
	w = start / 64;
	last_w = (end - 1) / 64;
	if (w == last_w) {
		b->words[w] |= word_mask(start % 64, (unsigned)((end - 1) % 64) + 1);
		return;
	}
	b->words[w] |= word_mask(start % 64, 64);
	for (w++; w < last_w; w++)
		b->words[w] = ~0ULL;
	b->words[last_w] |= word_mask(0, (unsigned)((end - 1) % 64) + 1);
}

void gw_bitmap_clear_range(struct gw_bitmap *b, uint64_t start, uint64_t count)
{
	uint64_t end, w, last_w;

	if (!clamp_range(b, start, count, &end))
		return;
	w = start / 64;
	last_w = (end - 1) / 64;
	if (w == last_w) {
		b->words[w] &= ~word_mask(start % 64, (unsigned)((end - 1) % 64) + 1);
		return;
	}
	b->words[w] &= ~word_mask(start % 64, 64);
	for (w++; w < last_w; w++)
		b->words[w] = 0;
	b->words[last_w] &= ~word_mask(0, (unsigned)((end - 1) % 64) + 1);
}

void gw_bitmap_set_all(struct gw_bitmap *b)
{
	uint64_t nr_words = gw_bitmap_words(b);

	if (!nr_words)
		return;
	memset(b->words, 0xff, nr_words * sizeof(uint64_t));
	if (b->nr_bits % 64)
		b->words[nr_words - 1] = word_mask(0, (unsigned)(b->nr_bits % 64));
}

/*
 * The whole-map operations below write a word only when it changes, and
 * skip zero words: a guest's maps are large (2 MiB per 64 GiB) and mostly
 * zero, and every first write to a page of a fresh map is a page fault
 * (1.5 ms per 2 MiB on the nested hosts here), every unchanged word
 * written back a write that costs the same on a map still untouched.
 * __builtin_popcountll is a libgcc call without -mpopcnt (x86-64 baseline).
 */
void gw_bitmap_zero(struct gw_bitmap *b)
{
	uint64_t nr_words = gw_bitmap_words(b);

	for (uint64_t w = 0; w < nr_words; w++)
		if (b->words[w])
			b->words[w] = 0;
}

uint64_t gw_bitmap_weight(const struct gw_bitmap *b)
{
	uint64_t nr_words = gw_bitmap_words(b), sum = 0;

	for (uint64_t w = 0; w < nr_words; w++)
		if (b->words[w])
			sum += (uint64_t)__builtin_popcountll(b->words[w]);
	return sum;
}

void gw_bitmap_or(struct gw_bitmap *dst, const struct gw_bitmap *src)
{
	uint64_t nr_words = gw_bitmap_words(dst);

	for (uint64_t w = 0; w < nr_words; w++)
		if (src->words[w] & ~dst->words[w])
			dst->words[w] |= src->words[w];
}

void gw_bitmap_and(struct gw_bitmap *dst, const struct gw_bitmap *src)
{
	uint64_t nr_words = gw_bitmap_words(dst);

	for (uint64_t w = 0; w < nr_words; w++)
		if (dst->words[w] & ~src->words[w])
			dst->words[w] &= src->words[w];
}

void gw_bitmap_andnot(struct gw_bitmap *dst, const struct gw_bitmap *src)
{
	uint64_t nr_words = gw_bitmap_words(dst);

	for (uint64_t w = 0; w < nr_words; w++)
		if (dst->words[w] & src->words[w])
			dst->words[w] &= ~src->words[w];
}

uint64_t gw_bitmap_take_range(struct gw_bitmap *b, uint64_t start, uint64_t count)
{
	uint64_t end, n = 0;

	if (!clamp_range(b, start, count, &end))
		return 0;
	for (uint64_t w = start / 64; w <= (end - 1) / 64; w++) {
		unsigned lo = w == start / 64 ? (unsigned)(start % 64) : 0;
		unsigned hi = w == (end - 1) / 64 ? (unsigned)((end - 1) % 64) + 1 : 64;
		uint64_t m = word_mask(lo, hi);

		n += (uint64_t)__builtin_popcountll(b->words[w] & m);
		b->words[w] &= ~m;
	}
	return n;
}

uint64_t gw_bitmap_next_set(const struct gw_bitmap *b, uint64_t from)
{
	uint64_t nr_words = gw_bitmap_words(b), w, word;

	if (from >= b->nr_bits)
		return b->nr_bits;
	w = from / 64;
	word = b->words[w] & ~((1ULL << (from % 64)) - 1);
	for (;;) {
		if (word) {
			uint64_t bit = w * 64 + (uint64_t)__builtin_ctzll(word);

			/* Tail bits are clear, but stay safe if a caller broke that. */
			return bit < b->nr_bits ? bit : b->nr_bits;
		}
		if (++w >= nr_words)
			return b->nr_bits;
		word = b->words[w];
	}
}

uint64_t gw_bitmap_next_clear(const struct gw_bitmap *b, uint64_t from)
{
	uint64_t nr_words = gw_bitmap_words(b), w, word;

	if (from >= b->nr_bits)
		return b->nr_bits;
	w = from / 64;
	/* Invert, so that clear bits become set; mask off bits below @from. */
	word = ~b->words[w] & ~((1ULL << (from % 64)) - 1);
	for (;;) {
		if (word) {
			uint64_t bit = w * 64 + (uint64_t)__builtin_ctzll(word);

			/* Inverted tail bits past nr_bits read as "clear": clamp. */
			return bit < b->nr_bits ? bit : b->nr_bits;
		}
		if (++w >= nr_words)
			return b->nr_bits;
		word = ~b->words[w];
	}
}

bool gw_bitmap_any_in_range(const struct gw_bitmap *b, uint64_t first, uint64_t count)
{
	uint64_t end = first + count;

	if (end > b->nr_bits)
		end = b->nr_bits;
	while (first < end) {
		uint64_t w = first / 64, bit = first % 64;
		uint64_t n = 64 - bit < end - first ? 64 - bit : end - first;
		uint64_t mask = (n == 64 ? ~0ULL : ((1ULL << n) - 1)) << bit;

		if (b->words[w] & mask)
			return true;
		first += n;
	}
	return false;
}
