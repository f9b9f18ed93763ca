/* SPDX-License-Identifier: MIT */
/*
 * The destination's page pipeline, as pure stages: no sockets, no threads,
 * no session. Everything here is hostile input. A PAGES frame goes through
 *
 *   check       the sub-header and every entry against the layout agreed
 *               at the handshake (block index, page index inside the
 *               block, kinds, XBZRLE allowed, sizes): a plan;
 *   receive     (channel.c) the data area, straight into guest RAM when the
 *               plan says so (codec none, no XBZRLE, and RAM written through
 *               its mapping: anonymous, or fd-backed and mapped here, so no
 *               page faults), else into a buffer; the frame's CRC (for a
 *               PAGE_CRC frame it covers everything but the data area);
 *   decompress  bounded: exactly raw_bytes out or a refusal;
 *   verify      PAGE_CRC frames: every page (record) against its CRC. A
 *               mismatch is a suspect: it must be named by a PAGES_VOID
 *               frame (the source saw the guest write the page while it
 *               was sent) before CHAN_END, else the channel fails with
 *               -EBADMSG; a suspect page is not applied from a buffer and
 *               stays "stale" until a later frame writes it correctly;
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
	bool map_write;			/* fd-backed but mapped here: written through the mapping */
	struct gw_bitmap written;	/* pages holding data this migration wrote: atomic bit ops */
	struct gw_bitmap stale;		/* pages that failed their CRC, not written again yet:
					   atomic bit ops; empty at COMPLETE */
	uint64_t nr_stale;		/* atomic: bits ever set in stale (0: nothing to clear) */
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
	uint32_t nr_bad;		/* verify: entries whose CRC failed (pi->bad) */
};

/* A page that failed its CRC, waiting for the PAGES_VOID that names it. */
struct gw_void_pending {
	uint32_t seq;			/* the PAGES frame on this connection */
	uint32_t block;
	uint64_t page;
};
#define GW_VOID_PENDING_MAX 4096

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
	uint32_t *crcs;			/* le32 CRC per entry as received (PAGE_CRC frames) */
	uint64_t bad[GW_WIRE_MAX_BATCH_PAGES / 64];	/* verify: entry i failed its CRC */
	struct gw_void_pending *pending;	/* GW_VOID_PENDING_MAX */
	uint32_t nr_pending;
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
int gw_pages_in_check(struct gw_pages_in *pi, const struct gw_dst_layout *l,
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
 * PAGE_CRC frames: check every data entry against its CRC, over guest RAM
 * for a direct plan, else over @raw. Sets pi->bad and plan->nr_bad; 0, or
 * -EPROTO when a ZERO entry carries a CRC or the records overrun the stream.
 * No-op (0) for frames without PAGE_CRC (their frame CRC covered the data).
 */
int gw_pages_in_verify(struct gw_pages_in *pi, struct gw_pages_plan *plan, const uint8_t *raw);
/*
 * Record the failed pages of @plan as suspects of frame @seq, and mark them
 * stale in their block. 0, or -EBADMSG when too many wait for a PAGES_VOID.
 */
int gw_pages_in_suspect(struct gw_pages_in *pi, const struct gw_pages_plan *plan, uint32_t seq);
/*
 * A PAGES_VOID: drop the suspects it names (a named page that had not
 * failed is fine: the source names every page written during the send).
 * 0, or -EPROTO for a block or page outside the layout.
 */
int gw_pages_in_void(struct gw_pages_in *pi, const struct gw_dst_layout *l,
		     const struct gw_msg_pages_void *v);
/*
 * Entries + raw stream (NULL for a direct plan) -> pi->writes, leaving out
 * the entries that failed their CRC. Returns the number of writes, or
 * -EPROTO when the stream does not match the entries.
 */
int gw_pages_in_plan_writes(struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			    const uint8_t *raw);
/*
 * Apply @n writes to @blk (mapping or pwrite; written through the mapping
 * when the block is anonymous or map_write). 0, -EUCLEAN (bad XBZRLE
 * delta), -errno from pwrite.
 */
int gw_pages_in_apply(struct gw_dst_block *blk, const struct gw_page_write *w, int n);

#endif
