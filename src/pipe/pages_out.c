/* SPDX-License-Identifier: MIT */
/* The source's page pipeline: read, classify, compress, frame (see pages_out.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/log.h>
#include "codec/codec.h"
#include "codec/xbzrle.h"
#include "mem/zero.h"
#include "pipe/pages_out.h"
#include "util/crc32c.h"
#include "util/fdio.h"

#define PAGE GW_PAGE_BYTES
/* Raw stream bound: every entry a normal page or an XBZRLE record (le16 + delta). */
#define RAW_CAP (GW_WIRE_MAX_BATCH_PAGES * (PAGE + 2))
#define XBZRLE_MAX_DELTA (PAGE / 2)	/* a bigger delta goes as a normal page */
/*
 * Classify asks for the cache lines of the page this many pages ahead of
 * the one it reads. The hardware prefetchers stop at 4 KiB boundaries, so
 * without it each page starts with a cold miss on its first line (and a TLB
 * miss), which the zero check waits for. Measured on 1 GiB of mix content
 * read cold through the mapping (zero check, copy, CRC32C of non-zero
 * pages), 3 passes: no prefetch 271-294 ns/page; first line only 285-335;
 * the whole page 1 ahead 175-200, 2 ahead 163-186, 4 ahead 165-191,
 * 16 ahead 190-203.
 */
#define PREFETCH_AHEAD_PAGES 2
#define CACHE_LINE_BYTES 64

int gw_pages_out_init(struct gw_pages_out *po, enum gw_codec_id codec, int level,
		      size_t xbzrle_cache_bytes)
{
	bool ok = true;

	memset(po, 0, sizeof(*po));
	po->codec = codec;
	po->level = level;
	for (unsigned i = 0; i < GW_PAGES_OUT_BUFS; i++) {
		struct gw_pages_buf *pb = &po->buf[i];

		/* Touched only as far as batches go (batch-pages): malloc commits nothing yet. */
		pb->raw = malloc(RAW_CAP);
		pb->entries = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(uint64_t));
		pb->crcs = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(uint32_t));
		pb->iov = malloc(GW_PAGES_MAX_IOV * sizeof(struct iovec));
		pb->comp_cap = RAW_CAP + (RAW_CAP >> 4) + 65536;	/* >= every codec's bound */
		pb->comp = malloc(pb->comp_cap);
		ok = ok && pb->raw && pb->entries && pb->crcs && pb->iov && pb->comp;
	}
	if (xbzrle_cache_bytes)
		po->xb = gw_xbzrle_cache_new(xbzrle_cache_bytes, PAGE);
	gw_codec_auto_init(&po->autoc);
	if (!ok || (xbzrle_cache_bytes && !po->xb)) {
		gw_pages_out_release(po);
		return -ENOMEM;
	}
	return 0;
}

void gw_pages_out_release(struct gw_pages_out *po)
{
	for (unsigned i = 0; i < GW_CODEC__COUNT; i++)
		if (po->ctx[i])
			gw_codec_get((enum gw_codec_id)i)->ctx_free(po->ctx[i]);
	gw_xbzrle_cache_free(po->xb);
	for (unsigned i = 0; i < GW_PAGES_OUT_BUFS; i++) {
		free(po->buf[i].raw);
		free(po->buf[i].entries);
		free(po->buf[i].crcs);
		free(po->buf[i].iov);
		free(po->buf[i].comp);
	}
	memset(po, 0, sizeof(*po));
}

bool gw_pages_out_copies(const struct gw_pages_out *po, double link_ns_per_byte)
{
	if (po->xb)
		return true;
	if (po->codec == GW_CODEC_NONE)
		return false;
	/* auto sets no codec up on a fast link: the data goes as it lies */
	return po->codec != GW_CODEC_AUTO || gw_codec_auto_link_is_slow(&po->autoc, link_ns_per_byte);
}

/* The context of codec @id (created on first use), or NULL. */
static void *codec_ctx(struct gw_pages_out *po, enum gw_codec_id id, const struct gw_codec_ops **ops)
{
	int level = po->level;

	*ops = gw_codec_get(id);
	if (!*ops)
		return NULL;
	if (!po->ctx[id]) {
		/* auto uses its own level per codec (codec_auto.h) */
		if (po->codec == GW_CODEC_AUTO)
			level = gw_codec_auto_level(&po->autoc, id, (*ops)->default_level);
		else if (level == 0)
			level = (*ops)->default_level;
		if (level < (*ops)->min_level)
			level = (*ops)->min_level;
		if (level > (*ops)->max_level)
			level = (*ops)->max_level;
		po->ctx[id] = (*ops)->ctx_new(level);
	}
	return po->ctx[id];
}

static bool bit(const uint64_t *m, uint64_t i)
{
	return m && (m[i / 64] >> (i % 64) & 1);
}

/*
 * Region page @idx + PREFETCH_AHEAD_PAGES, when classify will read it
 * through the mapping: its lines on their way to the cache. A prefetch
 * never faults; pages not mapped here are read by pread instead. Inlined
 * by force: GCC 12's IPA finds a function of prefetches without side
 * effects and drops every call to it (no prefetcht0 left in the object).
 */
static inline __attribute__((always_inline)) void prefetch_ahead(const struct gw_ram_view *ram, const struct gw_batch *b, uint64_t idx)
{
	uint64_t next = idx + PREFETCH_AHEAD_PAGES;
	const uint8_t *p;

	if (b->discard || next >= b->nr_pages || (ram->fd >= 0 && !bit(ram->mapped, next)))
		return;
	p = ram->host + (b->first_page + next) * PAGE;
	for (unsigned off = 0; off < PAGE; off += CACHE_LINE_BYTES)
		__builtin_prefetch(p + off);
}

/* ---- stage 1: read ---- */

/*
 * fd-backed RAM: the pages to send that are not mapped here are read with
 * one pread, the span from the first to the last of them, into raw at the
 * offset of the first (raw + first * PAGE): page i of the region then sits
 * at raw + i * PAGE, never behind the compaction's write position.
 * 0 or -errno.
 */
static int stage_read(struct gw_pages_buf *pb, const struct gw_ram_view *ram,
		      const struct gw_batch *b)
{
	uint64_t first = UINT64_MAX, last = 0;

	if (ram->fd < 0 || b->discard)
		return 0;
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		uint64_t bits = b->mask[w] & ~(ram->mapped ? ram->mapped[w] : 0);

		if (!bits)
			continue;
		if (first == UINT64_MAX)
			first = w * 64 + (unsigned)__builtin_ctzll(bits);
		last = w * 64 + 63 - (unsigned)__builtin_clzll(bits);
	}
	if (first == UINT64_MAX)
		return 0;
	return gw_pread_all(ram->fd, pb->raw + first * PAGE, (last - first + 1) * PAGE,
			    (off_t)(ram->fd_offset_bytes + (b->first_page + first) * PAGE));
}

/* ---- stage 2: classify ---- */

/*
 * A non-zero page already at @slot: replace it by an XBZRLE record when the
 * cache holds the previous copy and the delta is small. Returns the record
 * length (2 + delta), or 0 to send the page whole (then it is cached).
 */
static size_t try_xbzrle(struct gw_pages_out *po, uint64_t key, uint8_t *slot)
{
	uint8_t delta[XBZRLE_MAX_DELTA];
	uint8_t *old = gw_xbzrle_cache_get(po->xb, key);
	ssize_t n;

	if (!old) {
		gw_xbzrle_cache_put(po->xb, key, slot);
		return 0;
	}
	n = gw_xbzrle_encode(old, slot, PAGE, delta, sizeof(delta));
	if (n < 0) {
		memcpy(old, slot, PAGE);
		return 0;
	}
	memcpy(old, slot, PAGE);
	slot[0] = (uint8_t)n;
	slot[1] = (uint8_t)(n >> 8);
	memcpy(slot + 2, delta, (size_t)n);
	return 2 + (size_t)n;
}

/* The data area as pieces: contiguous records coalesce into one iovec. */
struct pieces {
	struct iovec *iov;		/* first data slot of the frame's iovec */
	int n;
};

static void piece_add(struct pieces *p, const uint8_t *ptr, size_t len)
{
	if (p->n && (const uint8_t *)p->iov[p->n - 1].iov_base + p->iov[p->n - 1].iov_len == ptr) {
		p->iov[p->n - 1].iov_len += len;
		return;
	}
	p->iov[p->n++] = (struct iovec){ (void *)ptr, len };
}

/*
 * Classify every page of the mask in one visit each: entries, CRCs, and
 * either the raw stream (@copy: records compacted forward in raw, CRC over
 * the copy) or pieces: guest memory itself (mapped pages, view->live), or
 * each page's own slot in raw (the pread span, or a copy of a mapped page).
 * Where a page is read from: the span when it was not mapped, else the
 * mapping.
 */
static void stage_classify(struct gw_pages_out *po, struct gw_pages_buf *pb,
			   const struct gw_ram_view *ram, const struct gw_batch *b, bool copy,
			   struct pieces *pc, struct gw_pages_frame *f)
{
	bool anon = ram->fd < 0;
	uint32_t n = 0;
	size_t raw_len = 0;

	memset(pb->live, 0, sizeof(pb->live));
	pb->nr_live = 0;
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		for (uint64_t bits = b->mask[w]; bits; bits &= bits - 1) {
			uint64_t idx = w * 64 + (unsigned)__builtin_ctzll(bits), page = b->first_page + idx;
			bool in_map = anon || bit(ram->mapped, idx);
			const uint8_t *src = in_map ? ram->host + page * PAGE : pb->raw + idx * PAGE;
			uint64_t key = (uint64_t)b->block << 48 | page;
			enum gw_page_kind kind = GW_PAGE_NORMAL;
			uint32_t crc = 0;

			prefetch_ahead(ram, b, idx);
			if (b->discard || gw_is_zero(src, PAGE)) {
				uint8_t *old = po->xb ? gw_xbzrle_cache_get(po->xb, key) : NULL;

				if (old)
					memset(old, 0, PAGE);
				kind = GW_PAGE_ZERO;
				f->nr_zero++;
			} else if (copy) {
				/* A stable copy: the guest may write the page meanwhile. */
				uint8_t *slot = pb->raw + raw_len;
				size_t rec;

				if (slot != src)
					memmove(slot, src, PAGE);
				rec = po->xb ? try_xbzrle(po, key, slot) : 0;
				if (rec) {
					kind = GW_PAGE_XBZRLE;
					f->nr_xbzrle++;
				} else {
					rec = PAGE;
					f->nr_normal++;
				}
				crc = gw_crc32c(0, slot, rec);
				raw_len += rec;
			} else if (in_map && ram->live) {
				/*
				 * Sent from guest memory itself. The CRC is taken over
				 * a copy in a hot 4 KiB scratch: ISA-L's CRC reads cold
				 * memory at a third of the speed of a copy followed by
				 * a CRC of the copy (bench/limits_bench, read+crc).
				 */
				memcpy(pb->scratch, src, PAGE);
				crc = gw_crc32c(0, pb->scratch, PAGE);
				piece_add(pc, src, PAGE);
				pb->live[w] |= 1ULL << (idx % 64);
				pb->nr_live++;
				raw_len += PAGE;
				f->nr_normal++;
			} else {
				/*
				 * A stable copy where the page has its own slot (raw +
				 * idx * PAGE): the pread span has it there already, a
				 * mapped page is copied there; CRC over the hot copy.
				 */
				uint8_t *slot = pb->raw + idx * PAGE;

				if (in_map)
					memcpy(slot, src, PAGE);
				crc = gw_crc32c(0, slot, PAGE);
				piece_add(pc, slot, PAGE);
				raw_len += PAGE;
				f->nr_normal++;
			}
			gw_le32_put((uint8_t *)&pb->crcs[n], crc);
			gw_le64_put((uint8_t *)&pb->entries[n++], gw_page_entry(page, kind));
		}
	}
	f->ph.nr_entries = n;
	f->raw_bytes = raw_len;
}

/* ---- stage 3: compress ---- */

/* The codec for this batch: the configured one, or auto's pick. */
static enum gw_codec_id choose_codec(struct gw_pages_out *po, const uint8_t *raw, size_t raw_len,
				     double link)
{
	struct gw_codec_auto *a = &po->autoc;
	double probe = -1;
	enum gw_codec_id id;
	uint64_t batch_no;

	if (po->codec != GW_CODEC_AUTO)
		return po->codec;
	if (!gw_codec_auto_link_is_slow(a, link)) {
		po->tally.fast_link++;
		return GW_CODEC_NONE;	/* no codec is even set up on a fast link */
	}
	batch_no = a->slow_batches++;
	if (gw_codec_auto_tune(a, link)) {
		po->tally.level_changes++;
		/* zstd's level changed: a new context at the new level on its next use */
		if (po->ctx[GW_CODEC_ZSTD]) {
			gw_codec_get(GW_CODEC_ZSTD)->ctx_free(po->ctx[GW_CODEC_ZSTD]);
			po->ctx[GW_CODEC_ZSTD] = NULL;
		}
	}
	if (raw_len >= 2 * GW_AUTO_PROBE_BYTES && gw_codec_auto_wants_probe(a, link, batch_no)) {
		size_t step = raw_len / GW_AUTO_PROBE_SLICES / PAGE * PAGE;	/* page starts, mostly */
		const struct gw_codec_ops *ops;
		void *ctx = codec_ctx(po, GW_CODEC_LZ4, &ops);
		ssize_t got;

		for (unsigned i = 0; i < GW_AUTO_PROBE_SLICES; i++)
			memcpy(po->probe_in + i * PAGE, raw + i * step, PAGE);
		got = ctx ? ops->compress(ctx, po->probe_in, GW_AUTO_PROBE_BYTES, po->probe, sizeof(po->probe)) : -1;

		if (got > 0)
			probe = (double)got / GW_AUTO_PROBE_BYTES;
	}
	id = gw_codec_auto_pick(a, link, batch_no, probe);
	if (id == GW_CODEC_NONE && probe > GW_AUTO_PROBE_INCOMPRESSIBLE)
		po->tally.probe_raw++;
	else if (id == GW_CODEC_NONE)
		po->tally.model_raw++;
	return id;
}

static void tally_sent(struct gw_pages_out *po, enum gw_codec_id id, bool smaller)
{
	if (!smaller)
		po->tally.not_smaller++;
	else if (id == GW_CODEC_LZ4)
		po->tally.lz4++;
	else if (po->autoc.zstd_level == GW_AUTO_ZSTD_LEVEL_RATIO)
		po->tally.zstd_ratio++;
	else
		po->tally.zstd_fast++;
}

/*
 * Compress raw (a copied batch) into comp when a codec applies and it pays;
 * the data area becomes one piece, raw or comp. 0 or -errno.
 */
static int stage_compress(struct gw_pages_out *po, struct gw_pages_buf *pb, double link,
			  struct gw_pages_frame *f, struct pieces *pc)
{
	enum gw_codec_id id = f->raw_bytes ? choose_codec(po, pb->raw, f->raw_bytes, link) : GW_CODEC_NONE;
	const struct gw_codec_ops *ops;
	uint64_t t0;
	void *ctx;
	ssize_t n;

	/* auto on a fast link copies nothing (gw_pages_out_copies): its data goes as it lies */
	if (po->codec == GW_CODEC_AUTO && !f->raw_bytes && f->nr_normal)
		po->tally.fast_link++;

	f->data_bytes = f->raw_bytes;
	f->ph.codec = GW_WIRE_CODEC_NONE;
	pc->n = 0;
	if (f->raw_bytes)
		piece_add(pc, pb->raw, f->raw_bytes);
	if (id == GW_CODEC_NONE)
		return 0;
	ctx = codec_ctx(po, id, &ops);
	if (!ctx)
		return -EOPNOTSUPP;
	t0 = gw_now_ns();
	n = ops->compress(ctx, pb->raw, f->raw_bytes, pb->comp, pb->comp_cap);
	if (n > 0)
		gw_codec_auto_sample_codec(&po->autoc, id, gw_now_ns() - t0, f->raw_bytes, (size_t)n);
	if (n > 0 && (size_t)n < f->raw_bytes) {
		f->ph.codec = gw_wire_codec_from_id(id);
		pc->iov[0] = (struct iovec){ pb->comp, (size_t)n };
		f->data_bytes = (size_t)n;
	}
	if (po->codec == GW_CODEC_AUTO)
		tally_sent(po, id, n > 0 && (size_t)n < f->raw_bytes);
	return 0;
}

/* ---- stage 4: frame ---- */

static void stage_frame(struct gw_pages_buf *pb, const struct pieces *pc, struct gw_pages_frame *f)
{
	size_t entries_bytes = (size_t)f->ph.nr_entries * GW_PAGES_ENTRY_BYTES;

	f->ph.flags = GW_PAGES_F_PAGE_CRC;
	f->ph.raw_bytes = (uint32_t)f->raw_bytes;
	f->ph.data_bytes = (uint32_t)f->data_bytes;
	gw_msg_pages_hdr_encode(f->hdr, &f->ph);
	f->iov = pb->iov;
	f->iov[0] = (struct iovec){ f->hdr, sizeof(f->hdr) };
	f->iov[1] = (struct iovec){ pb->entries, entries_bytes };
	f->iov[2] = (struct iovec){ pb->crcs, gw_pages_crc_bytes(&f->ph) };
	f->crc_iovcnt = 3;
	f->iovcnt = 3 + pc->n;
	f->payload_bytes = sizeof(f->hdr) + entries_bytes + gw_pages_crc_bytes(&f->ph) + f->data_bytes;
}

int gw_pages_out_build(struct gw_pages_out *po, unsigned slot, const struct gw_ram_view *ram,
		       const struct gw_batch *b, uint32_t round, double link_ns_per_byte,
		       struct gw_pages_frame *f)
{
	struct gw_pages_buf *pb = &po->buf[slot % GW_PAGES_OUT_BUFS];
	struct pieces pc = { pb->iov + 3, 0 };
	/* A codec or XBZRLE needs the raw stream contiguous: records compacted in raw. */
	bool copy = gw_pages_out_copies(po, link_ns_per_byte);
	uint64_t t0, t1, t2;
	int ret;

	memset(f, 0, sizeof(*f));
	f->ph.block = b->block;
	f->ph.round = round;
	/* Copied anyway: mapped pages are read through the mapping, others with pread. */
	t0 = gw_now_ns();
	ret = stage_read(pb, ram, b);
	if (ret)
		return ret;
	t1 = gw_now_ns();
	stage_classify(po, pb, ram, b, copy, &pc, f);
	t2 = gw_now_ns();
	f->stage_ns[GW_STAGE_READ] = t1 - t0;
	f->stage_ns[GW_STAGE_CLASSIFY] = t2 - t1;
	if (!f->ph.nr_entries)
		return 0;
	if (copy) {
		ret = stage_compress(po, pb, link_ns_per_byte, f, &pc);
		if (ret)
			return ret;
		f->stage_ns[GW_STAGE_COMPRESS] = gw_now_ns() - t2;
	} else {
		f->data_bytes = f->raw_bytes;
	}
	stage_frame(pb, &pc, f);
	return 0;
}
