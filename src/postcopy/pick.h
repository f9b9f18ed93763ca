/* SPDX-License-Identifier: MIT */
/*
 * Which pages the source pushes next after the postcopy switch (pure
 * logic: no I/O, no clock, no locks; the caller serialises).
 *
 * A guest that faulted on page p of a block will most likely touch p + 1,
 * p + 2, ... next (a vCPU walking its memory), so each page request moves
 * a stream there: the background channels push the pages that follow the
 * request, region by region, before the vCPU gets to them. Up to
 * GW_PC_STREAMS streams (one per vCPU walking, typically) are served in
 * turn, one region each; a request near a stream (within
 * GW_PC_STREAM_REACH pages) moves that stream, any other one replaces the
 * stream asked least recently. A stream ends when nothing is left to push
 * within reach of it. With no stream, a sweep takes the remaining pages in
 * address order.
 *
 * A batch is one region (the stable regions of precopy, batch-pages long)
 * holding pages to push; free pages that the destination holds data for
 * go as zeros (batch.discard), never in the same batch as the others.
 */
#ifndef GW_POSTCOPY_PICK_H
#define GW_POSTCOPY_PICK_H

#include <stdbool.h>
#include <stdint.h>
#include "mem/bitmap.h"
#include "pipe/pages_out.h"

#define GW_PC_STREAMS 8
#define GW_PC_STREAM_REACH 2048u	/* pages (8 MiB): a request this close moves a stream */

struct gw_pc_stream {
	bool on;
	unsigned block;
	uint64_t pos;			/* next page to look at */
	uint64_t asked;			/* request counter when last moved (LRU) */
};

struct gw_pc_pick {
	unsigned nr_blocks;
	struct gw_bitmap *todo;		/* per block, by reference: pages to push; cleared as taken */
	const struct gw_bitmap *zero;	/* per block, by reference: of those, the ones sent as zeros */
	uint32_t region_pages;
	struct gw_pc_stream st[GW_PC_STREAMS];
	unsigned rr;			/* next stream to serve */
	uint64_t requests;		/* hints so far */
	unsigned sweep_block;
	uint64_t sweep_pos;
	uint64_t left_pages;		/* pages still in todo */
};

/* @todo and @zero: one bitmap per block, alive as long as @p. */
void gw_pc_pick_init(struct gw_pc_pick *p, unsigned nr_blocks, struct gw_bitmap *todo,
		     const struct gw_bitmap *zero, uint32_t region_pages);
/* The same when the caller counted @todo already (@todo_pages): no pass over it. */
void gw_pc_pick_init_counted(struct gw_pc_pick *p, unsigned nr_blocks, struct gw_bitmap *todo,
			     const struct gw_bitmap *zero, uint32_t region_pages, uint64_t todo_pages);
/* The destination asked for @page of @block: push what follows it next. */
void gw_pc_pick_hint(struct gw_pc_pick *p, unsigned block, uint64_t page);
/* @page of @block goes another way (answer to a request): true when it was still to push. */
bool gw_pc_pick_take(struct gw_pc_pick *p, unsigned block, uint64_t page);
/* The next batch to push; false when nothing is left. */
bool gw_pc_pick_next(struct gw_pc_pick *p, struct gw_batch *b);
/* Forget the streams (after a recovery, todo was replaced). */
void gw_pc_pick_reset(struct gw_pc_pick *p);

#endif
