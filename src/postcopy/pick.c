/* SPDX-License-Identifier: MIT */
/* The source's push order after the postcopy switch (see postcopy/pick.h). */
#include <string.h>
#include "postcopy/pick.h"

static uint64_t count_todo(const struct gw_pc_pick *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nr_blocks; i++)
		n += gw_bitmap_weight(&p->todo[i]);
	return n;
}

void gw_pc_pick_init_counted(struct gw_pc_pick *p, unsigned nr_blocks, struct gw_bitmap *todo,
			     const struct gw_bitmap *zero, uint32_t region_pages, uint64_t todo_pages)
{
	memset(p, 0, sizeof(*p));
	p->nr_blocks = nr_blocks;
	p->todo = todo;
	p->zero = zero;
	p->region_pages = region_pages ? region_pages : 1;
	p->left_pages = todo_pages;
}

void gw_pc_pick_init(struct gw_pc_pick *p, unsigned nr_blocks, struct gw_bitmap *todo,
		     const struct gw_bitmap *zero, uint32_t region_pages)
{
	gw_pc_pick_init_counted(p, nr_blocks, todo, zero, region_pages, 0);
	p->left_pages = count_todo(p);
}

void gw_pc_pick_reset(struct gw_pc_pick *p)
{
	memset(p->st, 0, sizeof(p->st));
	p->sweep_block = 0;
	p->sweep_pos = 0;
	p->left_pages = count_todo(p);
}

void gw_pc_pick_hint(struct gw_pc_pick *p, unsigned block, uint64_t page)
{
	struct gw_pc_stream *lru = &p->st[0];

	if (block >= p->nr_blocks)
		return;
	p->requests++;
	for (unsigned i = 0; i < GW_PC_STREAMS; i++) {
		struct gw_pc_stream *s = &p->st[i];

		if (s->on && s->block == block && page + GW_PC_STREAM_REACH >= s->pos &&
		    page <= s->pos + GW_PC_STREAM_REACH) {
			s->pos = page + 1;
			s->asked = p->requests;
			return;
		}
		if (!s->on || (lru->on && s->asked < lru->asked))
			lru = s;
	}
	*lru = (struct gw_pc_stream){ .on = true, .block = block, .pos = page + 1, .asked = p->requests };
}

bool gw_pc_pick_take(struct gw_pc_pick *p, unsigned block, uint64_t page)
{
	struct gw_bitmap *t;

	if (block >= p->nr_blocks || page >= p->todo[block].nr_bits)
		return false;
	t = &p->todo[block];
	if (!gw_bitmap_test(t, page))
		return false;
	gw_bitmap_clear(t, page);
	p->left_pages--;
	return true;
}

/*
 * The pages to push of the region holding @page of @block into @b: the
 * non-zero ones if any, else the zero ones; their bits cleared.
 */
static void take_region(struct gw_pc_pick *p, unsigned block, uint64_t page, struct gw_batch *b)
{
	struct gw_bitmap *t = &p->todo[block];
	const struct gw_bitmap *z = p->zero ? &p->zero[block] : NULL;
	uint64_t first = page / p->region_pages * p->region_pages;
	uint64_t end = first + p->region_pages < t->nr_bits ? first + p->region_pages : t->nr_bits;
	bool want_zero = true;

	for (uint64_t q = gw_bitmap_next_set(t, first); q < end; q = gw_bitmap_next_set(t, q + 1))
		if (!z || !gw_bitmap_test(z, q)) {
			want_zero = false;
			break;
		}
	memset(b, 0, sizeof(*b));
	b->block = block;
	b->first_page = first;
	b->nr_pages = (uint32_t)(end - first);
	b->discard = want_zero && z;
	for (uint64_t q = gw_bitmap_next_set(t, first); q < end; q = gw_bitmap_next_set(t, q + 1)) {
		if (z && gw_bitmap_test(z, q) != want_zero)
			continue;
		b->mask[(q - first) / 64] |= 1ull << ((q - first) % 64);
		gw_bitmap_clear(t, q);
		p->left_pages--;
	}
}

/* Serve the next active stream that still has something within reach. */
static bool from_streams(struct gw_pc_pick *p, struct gw_batch *b)
{
	for (unsigned k = 0; k < GW_PC_STREAMS; k++) {
		struct gw_pc_stream *s = &p->st[(p->rr + k) % GW_PC_STREAMS];
		uint64_t q;

		if (!s->on)
			continue;
		q = gw_bitmap_next_set(&p->todo[s->block], s->pos);
		if (q >= p->todo[s->block].nr_bits || q > s->pos + GW_PC_STREAM_REACH) {
			s->on = false;	/* nothing left near it */
			continue;
		}
		take_region(p, s->block, q, b);
		s->pos = b->first_page + b->nr_pages;
		p->rr = (p->rr + k + 1) % GW_PC_STREAMS;
		return true;
	}
	return false;
}

bool gw_pc_pick_next(struct gw_pc_pick *p, struct gw_batch *b)
{
	if (!p->left_pages)
		return false;
	if (from_streams(p, b))
		return true;
	for (; p->sweep_block < p->nr_blocks; p->sweep_block++, p->sweep_pos = 0) {
		struct gw_bitmap *t = &p->todo[p->sweep_block];
		uint64_t q = gw_bitmap_next_set(t, p->sweep_pos);

		if (q < t->nr_bits) {
			take_region(p, p->sweep_block, q, b);
			p->sweep_pos = b->first_page + b->nr_pages;
			return true;
		}
	}
	/* Pages taken back behind the sweep (a recovery): start over once. */
	p->sweep_block = 0;
	p->sweep_pos = 0;
	for (unsigned bi = 0; bi < p->nr_blocks; bi++) {
		uint64_t q = gw_bitmap_next_set(&p->todo[bi], 0);

		if (q < p->todo[bi].nr_bits) {
			take_region(p, bi, q, b);
			p->sweep_block = bi;
			p->sweep_pos = b->first_page + b->nr_pages;
			return true;
		}
	}
	p->left_pages = 0;
	return false;
}
