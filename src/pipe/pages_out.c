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
	gw_codec_auto_release(&po->autoc);
	for (unsigned i = 0; i < GW_PAGES_OUT_BUFS; i++) {
		free(po->buf[i].raw);
		free(po->buf[i].entries);
		free(po->buf[i].crcs);
		free(po->buf[i].iov);
		free(po->buf[i].comp);
	}
	memset(po, 0, sizeof(*po));
}

/*
 * The context of codec @id at @level (0: the codec's default), or NULL.
 * Made on first use, and again when the level asked for changed (auto
 * moves zstd's).
 */
static void *codec_ctx(struct gw_pages_out *po, enum gw_codec_id id, int level, const struct gw_codec_ops **ops)
{
	*ops = gw_codec_get(id);
	if (!*ops)
		return NULL;
	if (level == 0)
		level = (*ops)->default_level;
	if (level < (*ops)->min_level)
		level = (*ops)->min_level;
	if (level > (*ops)->max_level)
		level = (*ops)->max_level;
	if (po->ctx[id] && po->ctx_level[id] != level) {
		(*ops)->ctx_free(po->ctx[id]);
		po->ctx[id] = NULL;
	}
	if (!po->ctx[id]) {
		po->ctx[id] = (*ops)->ctx_new(level);
		po->ctx_level[id] = level;
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

/* What the auto decision sees of a batch: its pages where they lie (after stage_read). */
struct batch_pages {
	const struct gw_pages_buf *pb;
	const struct gw_ram_view *ram;
	const struct gw_batch *b;
};

/* Page @i of the batch's mask, through the mapping or in the pread span; NULL past the end. */
static const uint8_t *batch_page(const void *arg, uint32_t i)
{
	const struct batch_pages *v = arg;

	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++) {
		uint64_t bits = v->b->mask[w], idx;
		unsigned n = (unsigned)__builtin_popcountll(bits);

		if (i >= n) {
			i -= n;
			continue;
		}
		while (i--)
			bits &= bits - 1;
		idx = w * 64 + (unsigned)__builtin_ctzll(bits);
		if (v->ram->fd < 0 || bit(v->ram->mapped, idx))
			return v->ram->host + (v->b->first_page + idx) * PAGE;
		return v->pb->raw + idx * PAGE;
	}
	return NULL;
}

/*
 * The codec for this batch, and its level: the configured one, or the
 * auto decision's (one call: sampling, probe and level inside). Free
 * pages carry no data: nothing to decide.
 */
static struct gw_auto_choice choose_codec(struct gw_pages_out *po, const struct gw_pages_buf *pb,
					  const struct gw_ram_view *ram, const struct gw_batch *b, double link)
{
	struct gw_auto_choice none = { .codec = GW_CODEC_NONE, .probe_ratio = -1 };
	struct batch_pages v = { pb, ram, b };
	struct gw_auto_input in = { .link_ns_per_byte = link, .page = batch_page, .arg = &v };

	if (po->codec != GW_CODEC_AUTO)
		return (struct gw_auto_choice){ .codec = po->codec, .level = po->level, .probe_ratio = -1 };
	if (b->discard)
		return none;
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++)
		in.nr_pages += (uint32_t)__builtin_popcountll(b->mask[w]);
	return gw_codec_auto_decide(&po->autoc, &in);
}

/* compress=auto: what the batch became, for the codec_auto log line; and auto learns from it. */
static void auto_done(struct gw_pages_out *po, const struct gw_auto_choice *c, const struct gw_pages_frame *f,
		      uint64_t compress_ns, size_t out_bytes)
{
	struct gw_auto_tally *t = &po->tally;
	struct gw_auto_result r = { .raw_bytes = f->raw_bytes, .out_bytes = out_bytes, .compress_ns = compress_ns };

	if (po->codec != GW_CODEC_AUTO || !c->why)
		return;
	gw_codec_auto_feed(&po->autoc, c, &r);
	t->level_changes += c->level_changed;
	if (!f->raw_bytes)
		return;		/* all zero: no data went, raw or not */
	if (c->why == GW_AUTO_FAST_LINK)
		t->fast_link++;
	else if (c->why == GW_AUTO_PROBE_RAW)
		t->probe_raw++;
	else if (c->codec == GW_CODEC_NONE)
		t->model_raw++;
	else if (f->ph.codec == GW_WIRE_CODEC_NONE)
		t->not_smaller++;
	else if (c->codec == GW_CODEC_LZ4)
		t->lz4++;
	else if (c->level == GW_AUTO_ZSTD_LEVEL_RATIO)
		t->zstd_ratio++;
	else
		t->zstd_fast++;
}

/*
 * Compress raw (a copied batch) into comp with the codec chosen (@c), if
 * any, kept when smaller; the data area becomes one piece, raw or comp.
 * 0 or -errno.
 */
static int stage_compress(struct gw_pages_out *po, struct gw_pages_buf *pb, const struct gw_auto_choice *c,
			  struct gw_pages_frame *f, struct pieces *pc)
{
	const struct gw_codec_ops *ops;
	uint64_t t0, ns = 0;
	ssize_t n = 0;
	void *ctx;

	f->data_bytes = f->raw_bytes;
	f->ph.codec = GW_WIRE_CODEC_NONE;
	pc->n = 0;
	if (f->raw_bytes)
		piece_add(pc, pb->raw, f->raw_bytes);
	if (c->codec != GW_CODEC_NONE && f->raw_bytes) {
		ctx = codec_ctx(po, c->codec, c->level, &ops);
		if (!ctx)
			return -EOPNOTSUPP;
		t0 = gw_now_ns();
		n = ops->compress(ctx, pb->raw, f->raw_bytes, pb->comp, pb->comp_cap);
		ns = gw_now_ns() - t0;
		if (n > 0 && (size_t)n < f->raw_bytes) {
			f->ph.codec = gw_wire_codec_from_id(c->codec);
			pc->iov[0] = (struct iovec){ pb->comp, (size_t)n };
			f->data_bytes = (size_t)n;
		}
	}
	auto_done(po, c, f, ns, n > 0 ? (size_t)n : 0);
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
	struct gw_auto_choice c;
	uint64_t t0, t1, t2, t_choose;
	bool copy;
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
	c = choose_codec(po, pb, ram, b, link_ns_per_byte);
	/* A codec or XBZRLE needs the raw stream contiguous: records compacted in raw. */
	copy = po->xb || c.codec != GW_CODEC_NONE;
	t_choose = gw_now_ns();
	stage_classify(po, pb, ram, b, copy, &pc, f);
	t2 = gw_now_ns();
	f->stage_ns[GW_STAGE_READ] = t1 - t0;
	f->stage_ns[GW_STAGE_CLASSIFY] = t2 - t_choose;
	f->stage_ns[GW_STAGE_COMPRESS] = t_choose - t1;	/* auto's probe */
	if (copy) {
		ret = stage_compress(po, pb, &c, f, &pc);
		if (ret)
			return ret;
		f->stage_ns[GW_STAGE_COMPRESS] += gw_now_ns() - t2;
	} else {
		f->data_bytes = f->raw_bytes;
		auto_done(po, &c, f, 0, 0);
	}
	if (!f->ph.nr_entries)
		return 0;
	stage_frame(pb, &pc, f);
	return 0;
}
