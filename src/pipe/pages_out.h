/* SPDX-License-Identifier: MIT */
/*
 * The source's page pipeline, as pure stages: no sockets, no threads, no
 * session. A batch (a region of one RAM block and a mask of the pages to
 * send) plus a view of that block's RAM goes through
 *
 *   read      pages of an fd-backed block that are not mapped in this
 *             process: the span from the first to the last of them with one
 *             pread (no first-touch faults through the mapping, userfaultfd
 *             state left alone). Mapped pages (view->mapped) and anonymous
 *             RAM are read through the mapping by classify;
 *   classify  one visit per page: all zero (SIMD, early exit on data) or a
 *             discarded free page (not read) -> ZERO entry, no data; else
 *             a copy and the page's CRC32C over the copy while it is hot,
 *             and with XBZRLE and a cached copy, a delta of at most half a
 *             page -> XBZRLE; else NORMAL (cached for XBZRLE next time).
 *             Without codec or XBZRLE the data area is a list of pieces:
 *             each page's own slot in raw (a mapped page copied there, or
 *             the pread span in place), or with view->live guest memory
 *             itself (the copy then goes to a 4 KiB scratch, for the CRC
 *             only). With a codec or XBZRLE each record is copied once into
 *             the raw stream (compacted forward: the write position never
 *             passes the read position);
 *   compress  the whole raw stream as one unit with the configured codec, or
 *             the one compress=auto picks (codec_auto.h: one decision per
 *             batch, made after read and before classify, so that a batch
 *             auto sends raw is not copied for nothing), kept only when
 *             smaller;
 *   frame     the PAGES sub-header (flag PAGE_CRC), the entries, the CRC of
 *             each entry and the data area as an iovec ready for
 *             gw_conn_send_prefix_crc() (the frame CRC covers the first
 *             three parts, the page CRCs the data).
 *
 * A page sent from live guest memory may change between its CRC and the
 * kernel's copy. The frame reports which pages were sent that way
 * (gw_pages_out.live); the channel asks the dirty tracker which of them
 * were written since they were re-armed, once the kernel is done with them,
 * and names those in a PAGES_VOID frame. They will be sent again: the
 * tracker saw the write.
 *
 * The channel thread (channel.c) sends the result. One struct
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
#include <godwit/stats.h>
#include "pipe/codec_auto.h"
#include "wire/msg.h"

struct gw_xbzrle_cache;

#define GW_BATCH_MASK_WORDS (GW_WIRE_MAX_BATCH_PAGES / 64)
/* Sub-header, entries, CRCs, and at most one data piece per entry. */
#define GW_PAGES_MAX_IOV (3 + GW_WIRE_MAX_BATCH_PAGES)

/* What the migration thread hands a channel: copied by value, never shared. */
struct gw_batch {
	uint32_t block;
	uint32_t nr_pages;		/* region length, <= batch_pages */
	uint64_t first_page;		/* region start, in block pages */
	uint64_t mask[GW_BATCH_MASK_WORDS];	/* bit i: send first_page + i */
	bool discard;			/* free pages: ZERO entries, RAM not read */
};

/* How the pipeline reads one RAM block, for one batch. */
struct gw_ram_view {
	uint32_t block;			/* index in the layout */
	const uint8_t *host;		/* mapping */
	int fd;				/* backing fd, or -1: read through the mapping */
	uint64_t fd_offset_bytes;
	/*
	 * fd-backed blocks: bit i set when region page i is mapped here (read
	 * through the mapping without a fault); NULL = none. Anonymous blocks
	 * are always read through the mapping.
	 */
	const uint64_t *mapped;
	/*
	 * Mapped pages may be sent straight from guest memory: the caller can
	 * name afterwards the pages written during the send (a dirty backend
	 * with `written`). Otherwise they are copied first.
	 */
	bool live;
};

/*
 * The buffers one frame lives in until it is sent: a channel builds the
 * next frame in one while the previous one is being sent from the other.
 */
struct gw_pages_buf {
	uint8_t *raw;			/* raw stream of one batch (and the read span) */
	uint8_t *comp;			/* compressed data area */
	size_t comp_cap;
	uint64_t *entries;		/* le64 page entries of one batch */
	uint32_t *crcs;			/* le32 CRC32C per entry (0 for ZERO) */
	struct iovec *iov;		/* GW_PAGES_MAX_IOV: the frame's parts */
	uint64_t live[GW_BATCH_MASK_WORDS];	/* region pages of the frame sent from guest memory */
	uint32_t nr_live;		/* their number */
	uint8_t scratch[GW_PAGE_BYTES] __attribute__((aligned(64)));	/* a live page's CRC copy */
};
#define GW_PAGES_OUT_BUFS 2

/*
 * compress=auto, per channel: batches with data by what they became, for
 * the codec_auto log line (an operator asks why auto chose as it did).
 */
struct gw_auto_tally {
	uint64_t fast_link;		/* raw: the link is no slower than lz4 */
	uint64_t probe_raw;		/* raw: the probe said incompressible */
	uint64_t model_raw;		/* raw: no codec was cheaper */
	uint64_t not_smaller;		/* compressed, sent raw: no smaller */
	uint64_t lz4;			/* sent with lz4 */
	uint64_t zstd_fast, zstd_ratio;	/* sent with zstd at its fast / ratio level */
	uint64_t level_changes;		/* zstd level switches (gw_auto_choice.level_changed) */
};

struct gw_pages_out {
	enum gw_codec_id codec;		/* configured: a codec or GW_CODEC_AUTO */
	int level;			/* configured level, 0 = each codec's default */
	struct gw_pages_buf buf[GW_PAGES_OUT_BUFS];
	void *ctx[GW_CODEC__COUNT];	/* created on first use */
	int ctx_level[GW_CODEC__COUNT];	/* the level ctx[i] was made at */
	struct gw_xbzrle_cache *xb;	/* NULL: XBZRLE off */
	struct gw_codec_auto autoc;	/* compress=auto: estimates, sampling, probe */
	struct gw_auto_tally tally;	/* compress=auto: what its batches became */
};

/* One batch, ready to send. */
struct gw_pages_frame {
	struct gw_msg_pages_hdr ph;
	uint8_t hdr[GW_PAGES_HDR_BYTES];
	struct iovec *iov;		/* the buffer's iov: sub-header, entries, CRCs, data pieces */
	int iovcnt;			/* 0: nothing to send (empty mask) */
	int crc_iovcnt;			/* leading parts the frame CRC covers (3) */
	uint32_t nr_normal, nr_zero, nr_xbzrle;	/* pages by kind */
	size_t raw_bytes;		/* payload before compression */
	size_t data_bytes;		/* payload as sent */
	size_t payload_bytes;		/* sub-header + entries + CRCs + data */
	uint64_t stage_ns[GW_STAGE__COUNT];	/* read, classify, compress of this batch */
};

/* Buffers and (with @xbzrle_cache_bytes) the XBZRLE cache. 0 or -ENOMEM. */
int gw_pages_out_init(struct gw_pages_out *po, enum gw_codec_id codec, int level,
		      size_t xbzrle_cache_bytes);
void gw_pages_out_release(struct gw_pages_out *po);

/*
 * All four stages for @b, into buffer po->buf[@slot] (which must not be
 * in use: a frame built earlier in it has been sent). @link_ns_per_byte is
 * the link's cost per wire byte as the channel sees it (for auto). 0 with
 * @f filled (f->iovcnt == 0 for an empty batch), or -errno from reading RAM
 * or a codec. po->buf[@slot].live names the pages whose data in @f points
 * into guest memory.
 */
int gw_pages_out_build(struct gw_pages_out *po, unsigned slot, const struct gw_ram_view *ram,
		       const struct gw_batch *b, uint32_t round, double link_ns_per_byte,
		       struct gw_pages_frame *f);

#endif
