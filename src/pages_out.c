/* SPDX-License-Identifier: MIT */
/* The source's page pipeline: read, classify, compress, frame (see pages_out.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/log.h>
#include "codec/codec.h"
#include "codec/xbzrle.h"
#include "mem/zero.h"
#include "pages_out.h"
#include "util/fdio.h"

#define PAGE GW_PAGE_BYTES
/* Raw stream bound: every entry a normal page or an XBZRLE record (le16 + delta). */
#define RAW_CAP (GW_WIRE_MAX_BATCH_PAGES * (PAGE + 2))
#define XBZRLE_MAX_DELTA (PAGE / 2)	/* a bigger delta goes as a normal page */

int gw_pages_out_init(struct gw_pages_out *po, enum gw_codec_id codec, int level,
		      size_t xbzrle_cache_bytes)
{
	memset(po, 0, sizeof(*po));
	po->codec = codec;
	po->level = level;
	po->raw = malloc(RAW_CAP);
	po->entries = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(uint64_t));
	po->comp_cap = RAW_CAP + (RAW_CAP >> 4) + 65536;	/* >= every codec's bound */
	po->comp = malloc(po->comp_cap);
	if (xbzrle_cache_bytes)
		po->xb = gw_xbzrle_cache_new(xbzrle_cache_bytes, PAGE);
	gw_codec_auto_init(&po->autoc);
	if (!po->raw || !po->entries || !po->comp || (xbzrle_cache_bytes && !po->xb)) {
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
	free(po->raw);
	free(po->entries);
	free(po->comp);
	memset(po, 0, sizeof(*po));
}

/* The context of codec @id (created on first use), or NULL. */
static void *codec_ctx(struct gw_pages_out *po, enum gw_codec_id id, const struct gw_codec_ops **ops)
{
	int level = po->level;

	*ops = gw_codec_get(id);
	if (!*ops)
		return NULL;
	if (!po->ctx[id]) {
		/* auto uses each codec's default level */
		if (level == 0 || po->codec == GW_CODEC_AUTO)
			level = (*ops)->default_level;
		if (level < (*ops)->min_level)
			level = (*ops)->min_level;
		if (level > (*ops)->max_level)
			level = (*ops)->max_level;
		po->ctx[id] = (*ops)->ctx_new(level);
	}
	return po->ctx[id];
}

/* ---- stage 1: read ---- */

/*
 * fd-backed RAM: read the span from the first to the last page to send
 * into raw with one pread; *span_first is its first page (index in the
 * region). Anonymous RAM: *span_first = -1, pages are read through the
 * mapping by classify. 0 or -errno.
 */
static int stage_read(struct gw_pages_out *po, const struct gw_ram_view *ram,
		      const struct gw_batch *b, int64_t *span_first)
{
	uint64_t first = UINT64_MAX, last = 0;

	*span_first = -1;
	if (ram->fd < 0 || b->discard)
		return 0;
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		if (!b->mask[w])
			continue;
		if (first == UINT64_MAX)
			first = w * 64 + (unsigned)__builtin_ctzll(b->mask[w]);
		last = w * 64 + 63 - (unsigned)__builtin_clzll(b->mask[w]);
	}
	if (first == UINT64_MAX)
		return 0;
	*span_first = (int64_t)first;
	return gw_pread_all(ram->fd, po->raw, (last - first + 1) * PAGE,
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

/*
 * Classify every page of the mask, writing entries and compacting data
 * forward in raw (the write position never passes the read position: a
 * record is at most a page), so the span is consumed before it is
 * overwritten.
 */
static void stage_classify(struct gw_pages_out *po, const struct gw_ram_view *ram,
			   const struct gw_batch *b, int64_t span_first, struct gw_pages_frame *f)
{
	uint32_t n = 0;
	size_t raw_len = 0;

	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		for (uint64_t bits = b->mask[w]; bits; bits &= bits - 1) {
			uint64_t idx = w * 64 + (unsigned)__builtin_ctzll(bits), page = b->first_page + idx;
			const uint8_t *src = span_first >= 0 ? po->raw + (idx - (uint64_t)span_first) * PAGE
							     : ram->host + page * PAGE;
			uint8_t *slot = po->raw + raw_len;
			uint64_t key = (uint64_t)b->block << 48 | page;
			enum gw_page_kind kind = GW_PAGE_NORMAL;
			size_t rec;

			if (b->discard || gw_is_zero(src, PAGE)) {
				uint8_t *old = po->xb ? gw_xbzrle_cache_get(po->xb, key) : NULL;

				if (old)
					memset(old, 0, PAGE);
				kind = GW_PAGE_ZERO;
				f->nr_zero++;
			} else {
				/* A snapshot (mapping) or compaction (span): the guest may write meanwhile. */
				if (slot != src)
					memmove(slot, src, PAGE);
				rec = po->xb ? try_xbzrle(po, key, slot) : 0;
				if (rec) {
					kind = GW_PAGE_XBZRLE;
					raw_len += rec;
					f->nr_xbzrle++;
				} else {
					raw_len += PAGE;
					f->nr_normal++;
				}
			}
			gw_le64_put((uint8_t *)&po->entries[n++], gw_page_entry(page, kind));
		}
	}
	f->ph.nr_entries = n;
	f->raw_bytes = raw_len;
}

/* ---- stage 3: compress ---- */

/* The codec for this batch: the configured one, or auto's pick. */
static enum gw_codec_id choose_codec(struct gw_pages_out *po, size_t raw_len, double link)
{
	struct gw_codec_auto *a = &po->autoc;
	double probe = -1;
	uint64_t batch_no;

	if (po->codec != GW_CODEC_AUTO)
		return po->codec;
	if (!gw_codec_auto_link_is_slow(a, link))
		return GW_CODEC_NONE;	/* no codec is even set up on a fast link */
	batch_no = a->slow_batches++;
	if (raw_len >= 2 * GW_AUTO_PROBE_BYTES && gw_codec_auto_wants_probe(a, link, batch_no)) {
		const struct gw_codec_ops *ops;
		void *ctx = codec_ctx(po, GW_CODEC_LZ4, &ops);
		ssize_t got = ctx ? ops->compress(ctx, po->raw, GW_AUTO_PROBE_BYTES,
						  po->probe, sizeof(po->probe)) : -1;

		if (got > 0)
			probe = (double)got / GW_AUTO_PROBE_BYTES;
	}
	return gw_codec_auto_pick(a, link, batch_no, probe);
}

/* Compress raw into comp when a codec applies and it pays. 0 or -errno. */
static int stage_compress(struct gw_pages_out *po, double link, struct gw_pages_frame *f,
			  const uint8_t **data)
{
	enum gw_codec_id id = f->raw_bytes ? choose_codec(po, f->raw_bytes, link) : GW_CODEC_NONE;
	const struct gw_codec_ops *ops;
	uint64_t t0;
	void *ctx;
	ssize_t n;

	*data = po->raw;
	f->data_bytes = f->raw_bytes;
	f->ph.codec = GW_WIRE_CODEC_NONE;
	if (id == GW_CODEC_NONE)
		return 0;
	ctx = codec_ctx(po, id, &ops);
	if (!ctx)
		return -EOPNOTSUPP;
	t0 = gw_now_ns();
	n = ops->compress(ctx, po->raw, f->raw_bytes, po->comp, po->comp_cap);
	if (n > 0)
		gw_codec_auto_sample_codec(&po->autoc, id, gw_now_ns() - t0, f->raw_bytes, (size_t)n);
	if (n > 0 && (size_t)n < f->raw_bytes) {
		f->ph.codec = gw_wire_codec_from_id(id);
		*data = po->comp;
		f->data_bytes = (size_t)n;
	}
	return 0;
}

/* ---- stage 4: frame ---- */

static void stage_frame(struct gw_pages_out *po, const uint8_t *data, struct gw_pages_frame *f)
{
	size_t entries_bytes = (size_t)f->ph.nr_entries * GW_PAGES_ENTRY_BYTES;

	f->ph.raw_bytes = (uint32_t)f->raw_bytes;
	f->ph.data_bytes = (uint32_t)f->data_bytes;
	gw_msg_pages_hdr_encode(f->hdr, &f->ph);
	f->iov[0] = (struct iovec){ f->hdr, sizeof(f->hdr) };
	f->iov[1] = (struct iovec){ po->entries, entries_bytes };
	f->iov[2] = (struct iovec){ (void *)data, f->data_bytes };
	f->iovcnt = f->data_bytes ? 3 : 2;
	f->payload_bytes = sizeof(f->hdr) + entries_bytes + f->data_bytes;
}

int gw_pages_out_build(struct gw_pages_out *po, const struct gw_ram_view *ram,
		       const struct gw_batch *b, uint32_t round, double link_ns_per_byte,
		       struct gw_pages_frame *f)
{
	const uint8_t *data;
	int64_t span_first;
	int ret;

	memset(f, 0, sizeof(*f));
	f->ph.block = b->block;
	f->ph.round = round;
	ret = stage_read(po, ram, b, &span_first);
	if (ret)
		return ret;
	stage_classify(po, ram, b, span_first, f);
	if (!f->ph.nr_entries)
		return 0;
	ret = stage_compress(po, link_ns_per_byte, f, &data);
	if (ret)
		return ret;
	stage_frame(po, data, f);
	return 0;
}
