/* SPDX-License-Identifier: MIT */
/* Page bitmaps: one bit per page, 64-bit words, bit i of word w = page 64*w+i. */
#ifndef GW_BITMAP_H
#define GW_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_bitmap {
	uint64_t *words;
	uint64_t nr_bits;		/* pages covered */
};

/* Allocate (zeroed). 0 or -ENOMEM. */
int gw_bitmap_init(struct gw_bitmap *b, uint64_t nr_bits);
/*
 * The same, every page of the words written once now: for a bitmap that is
 * first written inside the pause, where a first touch of fresh memory costs
 * ~10 us per 4 KiB page on a nested host (64 pages for 8 GiB of guest RAM).
 */
int gw_bitmap_init_prefaulted(struct gw_bitmap *b, uint64_t nr_bits);
void gw_bitmap_free(struct gw_bitmap *b);
static inline uint64_t gw_bitmap_words(const struct gw_bitmap *b) { return (b->nr_bits + 63) / 64; }

static inline void gw_bitmap_set(struct gw_bitmap *b, uint64_t i)
{ b->words[i / 64] |= 1ULL << (i % 64); }
static inline void gw_bitmap_clear(struct gw_bitmap *b, uint64_t i)
{ b->words[i / 64] &= ~(1ULL << (i % 64)); }
static inline bool gw_bitmap_test(const struct gw_bitmap *b, uint64_t i)
{ return b->words[i / 64] >> (i % 64) & 1; }

/* Thread-safe variants for bitmaps written by several threads. */
static inline void gw_bitmap_set_atomic(struct gw_bitmap *b, uint64_t i)
{ __atomic_fetch_or(&b->words[i / 64], 1ULL << (i % 64), __ATOMIC_RELAXED); }
static inline bool gw_bitmap_test_atomic(const struct gw_bitmap *b, uint64_t i)
{ return __atomic_load_n(&b->words[i / 64], __ATOMIC_RELAXED) >> (i % 64) & 1; }
static inline void gw_bitmap_clear_atomic(struct gw_bitmap *b, uint64_t i)
{ __atomic_fetch_and(&b->words[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELAXED); }
/* Returns the previous value of the bit. */
static inline bool gw_bitmap_test_and_set_atomic(struct gw_bitmap *b, uint64_t i)
{ return __atomic_fetch_or(&b->words[i / 64], 1ULL << (i % 64), __ATOMIC_RELAXED) >> (i % 64) & 1; }

void gw_bitmap_set_range(struct gw_bitmap *b, uint64_t start, uint64_t count);
void gw_bitmap_clear_range(struct gw_bitmap *b, uint64_t start, uint64_t count);
void gw_bitmap_set_all(struct gw_bitmap *b);	/* bits past nr_bits stay clear */
void gw_bitmap_zero(struct gw_bitmap *b);
uint64_t gw_bitmap_weight(const struct gw_bitmap *b);	/* popcount */
/* dst |= src, dst &= src, dst &= ~src; same size. */
void gw_bitmap_or(struct gw_bitmap *dst, const struct gw_bitmap *src);
void gw_bitmap_and(struct gw_bitmap *dst, const struct gw_bitmap *src);
void gw_bitmap_andnot(struct gw_bitmap *dst, const struct gw_bitmap *src);
/* Clear [start, start + count) (clamped); how many of those bits were set. */
uint64_t gw_bitmap_take_range(struct gw_bitmap *b, uint64_t start, uint64_t count);
/* Whether any bit of [first, first + count) is set (bounded: never scans past it). */
bool gw_bitmap_any_in_range(const struct gw_bitmap *b, uint64_t first, uint64_t count);
/* Next set bit at or after @from, or nr_bits when none. */
uint64_t gw_bitmap_next_set(const struct gw_bitmap *b, uint64_t from);
/* Next clear bit at or after @from, or nr_bits when none. */
uint64_t gw_bitmap_next_clear(const struct gw_bitmap *b, uint64_t from);

#endif
