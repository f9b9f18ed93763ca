/* SPDX-License-Identifier: MIT */
/* The destination's page pipeline: check, decompress, plan, apply (see pages_in.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "codec/xbzrle.h"
#include "pipe/pages_in.h"
#include "util/crc32c.h"
#include "util/fdio.h"

#define PAGE GW_PAGE_BYTES
#define RAW_CAP (GW_WIRE_MAX_BATCH_PAGES * (PAGE + 2))

int gw_pages_in_init(struct gw_pages_in *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->data_cap = RAW_CAP + (RAW_CAP >> 4) + 65536;
	pi->data = malloc(pi->data_cap);
	pi->raw = malloc(RAW_CAP);
	pi->entries = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(uint64_t));
	pi->crcs = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(uint32_t));
	pi->writes = malloc(GW_WIRE_MAX_BATCH_PAGES * sizeof(*pi->writes));
	pi->pending = malloc(GW_VOID_PENDING_MAX * sizeof(*pi->pending));
	if (!pi->data || !pi->raw || !pi->entries || !pi->crcs || !pi->writes || !pi->pending) {
		gw_pages_in_release(pi);
		return -ENOMEM;
	}
	return 0;
}

void gw_pages_in_release(struct gw_pages_in *pi)
{
	for (unsigned i = 0; i < GW_CODEC__COUNT; i++)
		if (pi->ctx[i])
			gw_codec_get((enum gw_codec_id)i)->ctx_free(pi->ctx[i]);
	free(pi->data);
	free(pi->raw);
	free(pi->entries);
	free(pi->crcs);
	free(pi->writes);
	free(pi->pending);
	memset(pi, 0, sizeof(*pi));
}

static uint64_t entry_at(const struct gw_pages_in *pi, uint32_t i)
{
	return gw_le64_get((const uint8_t *)&pi->entries[i]);
}

static uint32_t crc_at(const struct gw_pages_in *pi, uint32_t i)
{
	return gw_le32_get((const uint8_t *)&pi->crcs[i]);
}

static bool is_bad(const struct gw_pages_in *pi, uint32_t i)
{
	return pi->bad[i / 64] >> (i % 64) & 1;
}

int gw_pages_in_check(struct gw_pages_in *pi, const struct gw_dst_layout *l,
		      const struct gw_msg_pages_hdr *ph, struct gw_pages_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	plan->ph = *ph;
	if (ph->block >= l->nr_blocks || gw_wire_codec_to_id(ph->codec, &plan->codec))
		return -EPROTO;
	plan->blk = &l->blocks[ph->block];
	for (uint32_t i = 0; i < ph->nr_entries; i++) {
		uint64_t e = entry_at(pi, i);

		if (gw_page_entry_page(e) >= plan->blk->nr_pages)
			return -ERANGE;
		switch (gw_page_entry_kind(e)) {
		case GW_PAGE_NORMAL: plan->nr_normal++; break;
		case GW_PAGE_ZERO:
			if ((ph->flags & GW_PAGES_F_PAGE_CRC) && crc_at(pi, i))
				return -EPROTO;	/* no data, no CRC */
			plan->nr_zero++;
			break;
		case GW_PAGE_XBZRLE: plan->nr_xbzrle++; break;
		default: return -EPROTO;
		}
	}
	if (plan->nr_xbzrle && !l->xbzrle)
		return -EPROTO;
	/* Without XBZRLE the stream is exactly the normal pages; with it, at least their bytes. */
	if (!plan->nr_xbzrle && ph->raw_bytes != (uint64_t)plan->nr_normal * PAGE)
		return -EPROTO;
	if (ph->raw_bytes < (uint64_t)plan->nr_normal * PAGE + (uint64_t)plan->nr_xbzrle * 2)
		return -EPROTO;
	if (ph->data_bytes > pi->data_cap)
		return -EPROTO;
	plan->direct = plan->codec == GW_CODEC_NONE && !plan->nr_xbzrle &&
		       (plan->blk->fd < 0 || plan->blk->map_write);
	memset(pi->bad, 0, sizeof(pi->bad));
	return 0;
}

int gw_pages_in_direct_iov(const struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			   uint32_t *next, struct iovec *iov, int max)
{
	int cnt = 0;

	for (; *next < plan->ph.nr_entries; (*next)++) {
		uint64_t e = entry_at(pi, *next);
		uint8_t *dst;

		if (gw_page_entry_kind(e) != GW_PAGE_NORMAL)
			continue;
		dst = plan->blk->host + gw_page_entry_page(e) * PAGE;
		if (cnt && (uint8_t *)iov[cnt - 1].iov_base + iov[cnt - 1].iov_len == dst) {
			iov[cnt - 1].iov_len += PAGE;
			continue;
		}
		if (cnt == max)
			break;
		iov[cnt++] = (struct iovec){ dst, PAGE };
	}
	return cnt;
}

static void *codec_ctx(struct gw_pages_in *pi, enum gw_codec_id id, const struct gw_codec_ops **ops)
{
	*ops = gw_codec_get(id);
	if (*ops && !pi->ctx[id])
		pi->ctx[id] = (*ops)->ctx_new((*ops)->default_level);
	return *ops ? pi->ctx[id] : NULL;
}

int gw_pages_in_decompress(struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			   const uint8_t **raw)
{
	const struct gw_codec_ops *ops;
	void *ctx;

	*raw = pi->data;
	if (plan->codec == GW_CODEC_NONE)
		return 0;
	ctx = codec_ctx(pi, plan->codec, &ops);
	if (!ops)
		return -EOPNOTSUPP;
	if (!ctx)
		return -ENOMEM;
	if (ops->decompress(ctx, pi->data, plan->ph.data_bytes, pi->raw, plan->ph.raw_bytes))
		return -EUCLEAN;
	*raw = pi->raw;
	return 0;
}

int gw_pages_in_verify(struct gw_pages_in *pi, struct gw_pages_plan *plan, const uint8_t *raw)
{
	uint64_t off = 0, len = plan->ph.raw_bytes;

	plan->nr_bad = 0;
	memset(pi->bad, 0, sizeof(pi->bad));
	if (!(plan->ph.flags & GW_PAGES_F_PAGE_CRC))
		return 0;
	for (uint32_t i = 0; i < plan->ph.nr_entries; i++) {
		uint64_t e = entry_at(pi, i);
		const uint8_t *rec;
		size_t rec_len;

		switch (gw_page_entry_kind(e)) {
		case GW_PAGE_NORMAL:
			rec_len = PAGE;
			if (plan->direct) {
				rec = plan->blk->host + gw_page_entry_page(e) * PAGE;
				break;
			}
			if (len - off < PAGE)
				return -EPROTO;
			rec = raw + off;
			break;
		case GW_PAGE_XBZRLE:
			if (plan->direct || len - off < 2)
				return -EPROTO;
			rec_len = 2 + (size_t)gw_le16_get(raw + off);
			if (rec_len > len - off)
				return -EPROTO;
			rec = raw + off;
			break;
		default:
			continue;
		}
		off += rec_len;
		if (gw_crc32c(0, rec, rec_len) != crc_at(pi, i)) {
			pi->bad[i / 64] |= 1ULL << (i % 64);
			plan->nr_bad++;
		}
	}
	return 0;
}

int gw_pages_in_suspect(struct gw_pages_in *pi, const struct gw_pages_plan *plan, uint32_t seq)
{
	for (uint32_t i = 0; i < plan->ph.nr_entries; i++) {
		uint64_t page = gw_page_entry_page(entry_at(pi, i));

		if (!is_bad(pi, i))
			continue;
		if (pi->nr_pending == GW_VOID_PENDING_MAX)
			return -EBADMSG;
		pi->pending[pi->nr_pending++] = (struct gw_void_pending){ seq, plan->ph.block, page };
		if (plan->direct)	/* whatever arrived is in RAM now */
			gw_bitmap_set_atomic(&plan->blk->written, page);
		if (!gw_bitmap_test_atomic(&plan->blk->stale, page)) {
			gw_bitmap_set_atomic(&plan->blk->stale, page);
			__atomic_fetch_add(&plan->blk->nr_stale, 1, __ATOMIC_RELAXED);
		}
	}
	return 0;
}

int gw_pages_in_void(struct gw_pages_in *pi, const struct gw_dst_layout *l,
		     const struct gw_msg_pages_void *v)
{
	if (v->block >= l->nr_blocks)
		return -EPROTO;
	for (uint32_t k = 0; k < v->count; k++) {
		if (v->pages[k] >= l->blocks[v->block].nr_pages)
			return -EPROTO;
		for (uint32_t i = 0; i < pi->nr_pending; i++) {
			struct gw_void_pending *p = &pi->pending[i];

			if (p->seq == v->seq && p->block == v->block && p->page == v->pages[k]) {
				*p = pi->pending[--pi->nr_pending];
				break;
			}
		}
	}
	return 0;
}

/* Length of the run of normal pages from entry @i that are contiguous in the block. */
static uint32_t normal_run(const struct gw_pages_in *pi, const struct gw_pages_plan *plan, uint32_t i)
{
	uint64_t first = gw_page_entry_page(entry_at(pi, i));
	uint32_t run = 1;

	while (i + run < plan->ph.nr_entries) {
		uint64_t e = entry_at(pi, i + run);

		if (gw_page_entry_kind(e) != GW_PAGE_NORMAL || gw_page_entry_page(e) != first + run ||
		    is_bad(pi, i + run))
			break;
		run++;
	}
	return run;
}

int gw_pages_in_plan_writes(struct gw_pages_in *pi, const struct gw_pages_plan *plan,
			    const uint8_t *raw)
{
	uint64_t off = 0, len = raw ? plan->ph.raw_bytes : 0;
	int n = 0;

	for (uint32_t i = 0; i < plan->ph.nr_entries; i++) {
		uint64_t e = entry_at(pi, i);
		struct gw_page_write *w = &pi->writes[n++];

		*w = (struct gw_page_write){ .kind = gw_page_entry_kind(e), .page = gw_page_entry_page(e),
					     .nr_pages = 1 };
		if (is_bad(pi, i)) {
			/* Not applied from a buffer; already in RAM when direct. Stale until sent again. */
			n--;
			if (!raw)
				continue;
			if (w->kind == GW_PAGE_NORMAL)
				off += PAGE;
			else if (w->kind == GW_PAGE_XBZRLE)
				off += 2 + (uint64_t)gw_le16_get(raw + off);	/* bounds checked by verify */
			if (off > len)
				return -EPROTO;
			continue;
		}
		if (w->kind == GW_PAGE_NORMAL) {
			w->nr_pages = normal_run(pi, plan, i);
			i += w->nr_pages - 1;
			if (!raw)
				continue;	/* received in place */
			if ((uint64_t)w->nr_pages * PAGE > len - off)
				return -EPROTO;
			w->src = raw + off;
			off += (uint64_t)w->nr_pages * PAGE;
		} else if (w->kind == GW_PAGE_XBZRLE) {
			if (!raw || len - off < 2)
				return -EPROTO;
			w->src_len = gw_le16_get(raw + off);
			off += 2;
			if (w->src_len > len - off)
				return -EPROTO;
			w->src = raw + off;
			off += w->src_len;
		}
	}
	return off == len ? n : -EPROTO;
}

static off_t page_off(const struct gw_dst_block *blk, uint64_t page)
{
	return (off_t)(blk->fd_offset_bytes + page * PAGE);
}

static void apply_zero(struct gw_dst_block *blk, uint64_t page)
{
	static const uint8_t zero_page[PAGE];

	if (!gw_bitmap_test_atomic(&blk->written, page))
		return;	/* still the zero it started as */
	if (blk->fd < 0 || blk->map_write || gw_pwrite_all(blk->fd, zero_page, PAGE, page_off(blk, page)))
		memset(blk->host + page * PAGE, 0, PAGE);
	gw_bitmap_clear_atomic(&blk->written, page);
}

static int apply_xbzrle(struct gw_dst_block *blk, const struct gw_page_write *w)
{
	uint8_t tmp[PAGE];
	int ret;

	if (blk->fd < 0 || blk->map_write)
		return gw_xbzrle_decode(w->src, w->src_len, blk->host + w->page * PAGE, PAGE) ? -EUCLEAN : 0;
	ret = gw_pread_all(blk->fd, tmp, PAGE, page_off(blk, w->page));
	if (ret)
		return ret;
	if (gw_xbzrle_decode(w->src, w->src_len, tmp, PAGE))
		return -EUCLEAN;
	return gw_pwrite_all(blk->fd, tmp, PAGE, page_off(blk, w->page));
}

static int apply_normal(struct gw_dst_block *blk, const struct gw_page_write *w)
{
	size_t len = (size_t)w->nr_pages * PAGE;

	if (!w->src)
		return 0;
	if (blk->fd >= 0 && !blk->map_write)
		return gw_pwrite_all(blk->fd, w->src, len, page_off(blk, w->page));
	memcpy(blk->host + w->page * PAGE, w->src, len);
	return 0;
}

/* A page written correctly again is no longer stale. */
static void unstale(struct gw_dst_block *blk, uint64_t page, uint32_t nr)
{
	if (!__atomic_load_n(&blk->nr_stale, __ATOMIC_RELAXED))
		return;
	for (uint32_t k = 0; k < nr; k++)
		if (gw_bitmap_test_atomic(&blk->stale, page + k))
			gw_bitmap_clear_atomic(&blk->stale, page + k);
}

int gw_pages_in_apply(struct gw_dst_block *blk, const struct gw_page_write *w, int n)
{
	for (int i = 0; i < n; i++) {
		int ret = 0;

		unstale(blk, w[i].page, w[i].nr_pages);
		switch (w[i].kind) {
		case GW_PAGE_ZERO:
			apply_zero(blk, w[i].page);
			continue;
		case GW_PAGE_NORMAL:
			ret = apply_normal(blk, &w[i]);
			break;
		case GW_PAGE_XBZRLE:
			ret = apply_xbzrle(blk, &w[i]);
			break;
		}
		if (ret)
			return ret;
		for (uint32_t k = 0; k < w[i].nr_pages; k++)
			gw_bitmap_set_atomic(&blk->written, w[i].page + k);
	}
	return 0;
}
