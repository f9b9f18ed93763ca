/* SPDX-License-Identifier: MIT */
/*
 * The source's page pipeline, as pure stages: no sockets, no threads, no
 * session. A batch (a region of one RAM block and a mask of the pages to
 * send) plus a view of that block's RAM goes through
 *
 *   read      the span from the first to the last page to send, with one
 *             pread for fd-backed RAM (no first-touch faults through the
 *             mapping, userfaultfd state left alone), else the mapping;
 *   classify  per page: all zero (SIMD), or a discarded free page (not
 *             read at all) -> ZERO entry, no data; with XBZRLE
 *             and a cached copy, a delta of at most half a page -> XBZRLE;
 *             else NORMAL (cached for XBZRLE next time). Pages are compacted
 *             forward inside the raw buffer: a page is copied once;
 *   compress  the whole raw stream as one unit with the configured codec, or
 *             the one compress=auto picks (codec_auto.h), kept only when
 *             smaller;
 *   frame     the PAGES sub-header, the entries and the data area as an
 *             iovec ready for gw_conn_send(),
 *
 * and the channel thread (channel.c) sends the result. One struct
 * gw_pages_out per channel, owned by its thread: buffers, one codec context
 * per codec used, the XBZRLE cache, the auto estimates.
 */
#ifndef GW_PAGES_OUT_H
#define GW_PAGES_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <godwit/params.h>
#include "codec_auto.h"
#include "wire/msg.h"

struct gw_xbzrle_cache;

#define GW_BATCH_MASK_WORDS (GW_WIRE_MAX_BATCH_PAGES / 64)

/* What the migration thread hands a channel: copied by value, never shared. */
struct gw_batch {
	uint32_t block;
	uint32_t nr_pages;		/* region length, <= batch_pages */
	uint64_t first_page;		/* region start, in block pages */
	uint64_t mask[GW_BATCH_MASK_WORDS];	/* bit i: send first_page + i */
	bool discard;			/* free pages: ZERO entries, RAM not read */
};

/* How the pipeline reads one RAM block. */
struct gw_ram_view {
	uint32_t block;			/* index in the layout */
	const uint8_t *host;		/* mapping */
	int fd;				/* backing fd, or -1: read through the mapping */
	uint64_t fd_offset_bytes;
};

struct gw_pages_out {
	enum gw_codec_id codec;		/* configured: a codec or GW_CODEC_AUTO */
	int level;			/* configured level, 0 = each codec's default */
	uint8_t *raw;			/* raw stream of one batch (and the read span) */
	uint8_t *comp;			/* compressed data area */
	size_t comp_cap;
	uint64_t *entries;		/* le64 page entries of one batch */
	void *ctx[GW_CODEC__COUNT];	/* created on first use */
	struct gw_xbzrle_cache *xb;	/* NULL: XBZRLE off */
	struct gw_codec_auto autoc;
	uint8_t probe[GW_AUTO_PROBE_BYTES + 1024];	/* auto's probe output */
};

/* One batch, ready to send. */
struct gw_pages_frame {
	struct gw_msg_pages_hdr ph;
	uint8_t hdr[GW_PAGES_HDR_BYTES];
	struct iovec iov[3];
	int iovcnt;			/* 0: nothing to send (empty mask) */
	uint32_t nr_normal, nr_zero, nr_xbzrle;	/* pages by kind */
	size_t raw_bytes;		/* payload before compression */
	size_t data_bytes;		/* payload as sent */
	size_t payload_bytes;		/* sub-header + entries + data */
};

/* Buffers and (with @xbzrle_cache_bytes) the XBZRLE cache. 0 or -ENOMEM. */
int gw_pages_out_init(struct gw_pages_out *po, enum gw_codec_id codec, int level,
		      size_t xbzrle_cache_bytes);
void gw_pages_out_release(struct gw_pages_out *po);

/*
 * All four stages for @b. @link_ns_per_byte is the link's cost per wire
 * byte as the channel sees it (for auto). 0 with @f filled (f->iovcnt == 0
 * for an empty batch), or -errno from reading RAM or a codec.
 */
int gw_pages_out_build(struct gw_pages_out *po, const struct gw_ram_view *ram,
		       const struct gw_batch *b, uint32_t round, double link_ns_per_byte,
		       struct gw_pages_frame *f);

#endif
