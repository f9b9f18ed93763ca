/* SPDX-License-Identifier: MIT */
/*
 * The destination's page pipeline, as pure stages: no sockets, no threads,
 * no session. Everything here is hostile input. A PAGES frame goes through
 *
 *   check       the sub-header and every entry against the layout agreed
 *               at the handshake (block index, page index inside the
 *               block, kinds, XBZRLE allowed, sizes): a plan;
 *   receive     (channel.c) the data area, straight into guest RAM when the
 *               plan says so (codec none, no XBZRLE, RAM reached through its
 *               mapping), else into a buffer; then the frame's CRC;
 *   decompress  bounded: exactly raw_bytes out or a refusal;
 *   plan writes entries + raw stream -> a list of writes (runs of normal
 *               pages, zero pages, XBZRLE patches), every length checked;
 *   apply       one function writes them: pwrite runs for fd-backed RAM,
 *               copies through the mapping otherwise.
 *
 * Destination RAM starts zero (gw_session_new), so a zero page is written
 * only where this migration wrote data before (the `written` bitmap).
 *
 * Threads: a struct gw_pages_in per channel, owned by its thread. The
 * layout (struct gw_dst_block) is set before channel threads start and
 * read-only after, except the `written` bitmaps: several channels may
 * touch one word, so every access is atomic.
 */
#ifndef GW_PAGES_IN_H
#define GW_PAGES_IN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <godwit/params.h>
#include "mem/bitmap.h"
#include "wire/msg.h"

/* One RAM block as the destination writes it. */
struct gw_dst_block {
	uint8_t *host;			/* mapping */
	int fd;				/* backing fd, or -1: written through the mapping */
	uint64_t fd_offset_bytes;
	uint64_t nr_pages;
	struct gw_bitmap written;	/* pages holding data this migration wrote: atomic bit ops */
};

struct gw_dst_layout {
	unsigned nr_blocks;
	struct gw_dst_block *blocks;	/* nr_blocks */
	bool xbzrle;			/* HELLO allowed XBZRLE entries */
};

/* A checked PAGES frame. */
struct gw_pages_plan {
	struct gw_msg_pages_hdr ph;
	enum gw_codec_id codec;
	struct gw_dst_block *blk;
	uint32_t nr_normal, nr_zero, nr_xbzrle;
	bool direct;			/* receive the data area straight into guest RAM */
};

/* A write into one block. */
struct gw_page_write {
	enum gw_page_kind kind;
	uint64_t page;			/* first page */
	uint32_t nr_pages;		/* NORMAL: run length; else 1 */
	const uint8_t *src;		/* NORMAL: nr_pages pages (NULL: already in place);
					   XBZRLE: the delta */
	uint32_t src_len;		/* XBZRLE: delta bytes */
};

struct gw_pages_in {
	uint8_t *data;			/* data area as received */
	size_t data_cap;
	uint8_t *raw;			/* decompressed raw stream */
	uint64_t *entries;		/* le64 entries as received */
	struct gw_page_write *writes;	/* at most one per entry */
	void *ctx[GW_CODEC__COUNT];	/* decompression contexts, created on first use */
};

/* 0 or -ENOMEM. */
int gw_pages_in_init(struct gw_pages_in *pi);
void gw_pages_in_release(struct gw_pages_in *pi);

/*
 * Check the sub-header @ph (decoded against its frame) and the entries in
 * pi->entries against @l. 0 and @plan, -EPROTO (malformed), -ERANGE (a
 * page outside its block).
 */
int gw_pages_in_check(const struct gw_pages_in *pi, const struct gw_dst_layout *l,
		      const struct gw_msg_pages_hdr *ph, struct gw_pages_plan *plan);
/*
 * For a direct plan: the iovec receiving the data area into guest RAM,
 * contiguous pages coalesced. Writes at most @max segments starting at
 * entry *@next and advances it; returns the number of segments.
 */
int gw_pages_in_direct_iov(const struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			   uint32_t *next, struct iovec *iov, int max);
/*
 * The raw stream of a received data area (pi->data): itself, or its
 * decompression (exactly raw_bytes, bounded). 0 and *@raw, -EUCLEAN (corrupt),
 * -EOPNOTSUPP (codec not built here), -ENOMEM.
 */
int gw_pages_in_decompress(struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			   const uint8_t **raw);
/*
 * Entries + raw stream (NULL for a direct plan) -> pi->writes. Returns the
 * number of writes, or -EPROTO when the stream does not match the entries.
 */
int gw_pages_in_plan_writes(struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			    const uint8_t *raw);
/* Apply @n writes to @blk. 0, -EUCLEAN (bad XBZRLE delta), -errno from pwrite. */
int gw_pages_in_apply(struct gw_dst_block *blk, const struct gw_page_write *w, int n);

#endif
