/* SPDX-License-Identifier: MIT */
/* Device-dirty pages: two-level atomic bitmaps per RAM block (devdirty.h says why it is safe). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "mem/devdirty.h"

int gw_devdirty_init(struct gw_devdirty *d, const struct gw_vm_info *vm)
{
	memset(d, 0, sizeof(*d));
	for (unsigned i = 0; i < vm->nr_blocks; i++) {
		struct gw_devdirty_block *b = &d->b[i];
		uint64_t nr_words;

		b->gpa = vm->blocks[i].gpa;
		b->size_bytes = vm->blocks[i].size_bytes;
		b->nr_pages = b->size_bytes / GW_PAGE_BYTES;
		nr_words = (b->nr_pages + 63) / 64;
		b->pages = calloc(nr_words, sizeof(uint64_t));
		b->words = calloc((nr_words + 63) / 64, sizeof(uint64_t));
		d->nr_blocks = i + 1;
		if (!b->pages || !b->words) {
			gw_devdirty_free(d);
			return -ENOMEM;
		}
	}
	return 0;
}

void gw_devdirty_free(struct gw_devdirty *d)
{
	for (unsigned i = 0; i < d->nr_blocks; i++) {
		free(d->b[i].pages);
		free(d->b[i].words);
	}
	memset(d, 0, sizeof(*d));
}

/* Set bits [@first, @first + @count) of pages word @w (count >= 1, within the word). */
static void mark_word(struct gw_devdirty_block *b, uint64_t w, unsigned first, unsigned count)
{
	uint64_t mask = (count == 64 ? ~0ull : ((1ull << count) - 1)) << first;
	uint64_t bit = 1ull << (w % 64);

	__atomic_fetch_or(&b->pages[w], mask, __ATOMIC_SEQ_CST);
	if (!(__atomic_load_n(&b->words[w / 64], __ATOMIC_SEQ_CST) & bit))
		__atomic_fetch_or(&b->words[w / 64], bit, __ATOMIC_SEQ_CST);
}

int gw_devdirty_mark(struct gw_devdirty *d, uint64_t gpa, uint64_t len_bytes)
{
	for (unsigned i = 0; i < d->nr_blocks; i++) {
		struct gw_devdirty_block *b = &d->b[i];
		uint64_t off = gpa - b->gpa, p, last;

		if (gpa < b->gpa || off >= b->size_bytes)
			continue;
		if (len_bytes > b->size_bytes - off)
			return -EINVAL;
		if (!len_bytes)
			return 0;
		if (!__atomic_load_n(&d->seen, __ATOMIC_RELAXED))
			__atomic_store_n(&d->seen, 1, __ATOMIC_RELAXED);
		p = off / GW_PAGE_BYTES;
		last = (off + len_bytes - 1) / GW_PAGE_BYTES;
		while (p <= last) {
			unsigned first = (unsigned)(p % 64);
			unsigned count = last / 64 == p / 64 ? (unsigned)(last - p + 1) : 64 - first;

			mark_word(b, p / 64, first, count);
			p += count;
		}
		return 0;
	}
	return -EINVAL;
}

/* Take block @b's marks, ORed into @out (NULL: dropped). How many were taken. */
static uint64_t take_block(struct gw_devdirty_block *b, uint64_t *out)
{
	uint64_t nr_words = (b->nr_pages + 63) / 64, taken = 0;

	for (uint64_t k = 0; k < (nr_words + 63) / 64; k++) {
		uint64_t sum;

		if (!__atomic_load_n(&b->words[k], __ATOMIC_RELAXED))
			continue;
		sum = __atomic_exchange_n(&b->words[k], 0, __ATOMIC_SEQ_CST);
		while (sum) {
			uint64_t w = k * 64 + (uint64_t)__builtin_ctzll(sum);
			uint64_t v = __atomic_exchange_n(&b->pages[w], 0, __ATOMIC_SEQ_CST);

			sum &= sum - 1;
			taken += (uint64_t)__builtin_popcountll(v);
			if (out)
				out[w] |= v;
		}
	}
	return taken;
}

void gw_devdirty_reset(struct gw_devdirty *d)
{
	for (unsigned i = 0; i < d->nr_blocks; i++)
		take_block(&d->b[i], NULL);
}

uint64_t gw_devdirty_take(struct gw_devdirty *d, struct gw_bitmap *out)
{
	uint64_t taken = 0;

	for (unsigned i = 0; i < d->nr_blocks; i++)
		taken += take_block(&d->b[i], out[i].words);
	return taken;
}
