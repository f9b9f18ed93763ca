/* SPDX-License-Identifier: MIT */
/*
 * Live sends on the source side of a channel: pages sent straight from
 * guest memory (send-path live or zerocopy) are settled once the kernel is
 * done with them: the ones the guest wrote meanwhile are named in a
 * PAGES_VOID (docs/protocol.md). With MSG_ZEROCOPY that is at the send's
 * completion, so up to GW_CHAN_ZC_INFLIGHT frames wait for it.
 */
#include <errno.h>
#include <string.h>
#include "mem/compat/madv.h"
#include "mem/mapped.h"
#include "pipe/chan_int.h"

/*
 * Pages sent from guest memory itself? Measured here (docs/architecture.md):
 * no faster than a copy through the mapping, whose CRC is over hot data,
 * so auto copies.
 */
static bool send_live(int64_t path)
{
	return path == GW_SEND_LIVE || path == GW_SEND_ZEROCOPY;
}

/*
 * Tracking runs before the first batch is queued: the backend is known by
 * now. Not after the final harvest: the guest is paused and nothing is
 * re-armed any more (source/precopy.c harvest). Nor once devices report writes
 * (mem/devdirty.h: no PAGES_VOID could name theirs in time).
 */
bool gw_chan_live_ok(const struct gw_channel *ch)
{
	const struct gw_session *s = ch->s;

	return send_live(gw_param(s, GW_PARAM_SEND_PATH)) && s->dirty_started && s->dirty.ops->written &&
	       !__atomic_load_n(&s->dirty_final, __ATOMIC_ACQUIRE) && !gw_devdirty_seen(&s->devdirty);
}

/*
 * The batch's pages that are not mapped here (RAM in the page cache: a
 * guest paused or restored, a VMM that wrote it with pwrite) are mapped
 * now, MADV_POPULATE_READ on each run of them, and read through the
 * mapping like the rest: in the pipeline on this host the populate and
 * the copy cost about what pread and the copy of its buffer do, with less
 * source CPU and total time (docs/architecture.md, "A source in the page
 * cache"). A run the kernel refuses stays unmapped and
 * goes through pread. Only pages to send are populated: never-populated
 * memory is in no batch, so nothing new is allocated.
 */
static void populate_unmapped(const struct gw_ram_block *blk, const struct gw_batch *b, uint64_t *mask)
{
	uint64_t i = 0;

	while (i < b->nr_pages) {
		uint64_t end;

		if (!(b->mask[i / 64] >> (i % 64) & 1) || (mask[i / 64] >> (i % 64) & 1)) {
			i++;
			continue;
		}
		for (end = i + 1; end < b->nr_pages && (b->mask[end / 64] >> (end % 64) & 1) &&
				  !(mask[end / 64] >> (end % 64) & 1); end++)
			;
		if (!madvise(blk->host + (b->first_page + i) * GW_PAGE_BYTES, (end - i) * GW_PAGE_BYTES,
			     MADV_POPULATE_READ))
			for (; i < end; i++)
				mask[i / 64] |= 1ull << (i % 64);
		i = end;
	}
}

const uint64_t *gw_chan_mapped(struct gw_channel *ch, const struct gw_batch *b,
			       const struct gw_ram_block *blk, uint64_t *mask)
{
	if (blk->fd < 0 || b->discard || ch->tx.pagemap_fd < 0 ||
	    gw_param(ch->s, GW_PARAM_SEND_PATH) == GW_SEND_PREAD)
		return NULL;
	if (gw_mapped_mask(ch->tx.pagemap_fd, blk->host + b->first_page * GW_PAGE_BYTES, b->nr_pages, mask))
		return NULL;
	populate_unmapped(blk, b, mask);
	return mask;
}

void gw_chan_zc_setup(struct gw_channel *ch)
{
	/*
	 * MSG_ZEROCOPY needs a kernel socket the pages go to as they are: not
	 * an rsocket, and not TLS (each record is an encrypted copy, made by
	 * OpenSSL or by kTLS). Those send through the copy path: pages are
	 * settled as soon as the send returns.
	 */
	const char *why;
	int ret;

	if (gw_param(ch->s, GW_PARAM_SEND_PATH) != GW_SEND_ZEROCOPY)
		return;
	why = ch->conn.tls ? "TLS: records are encrypted copies" :
	      !ch->conn.sock->kernel ? "not a kernel socket" : NULL;
	ret = why ? -EOPNOTSUPP : gw_zc_enable(ch->conn.fd);
	ch->tx.zc_on = !ret;
	if (ret && ch->index == 0)
		gw_log(GW_LOG_WARN, "mig", "zerocopy_unavailable", "err=\"%s\" fallback=copy",
		       why ? why : strerror(-ret));
}

/* Zero-copy only when every data piece is guest memory (the buffers are reused). */
bool gw_chan_zc_frame(const struct gw_channel *ch, const struct gw_out_slot *sl)
{
	const struct gw_pages_frame *f = &sl->f;

	return ch->tx.zc_on && sl->nr_live && sl->nr_live == f->nr_normal && !f->nr_xbzrle &&
	       f->ph.codec == GW_WIRE_CODEC_NONE;
}

/*
 * The kernel is done with the live pages of @lf: name in a PAGES_VOID the
 * ones the guest wrote (or unmapped) since they were last re-armed, which
 * covers the whole time between their CRC and the kernel's copy. The
 * dirty tracker saw those writes: the pages will be sent again. 0 or the
 * sticky error.
 */
static int settle(struct gw_channel *ch, const struct gw_live_frame *lf)
{
	struct gw_session *s = ch->s;
	uint64_t t0 = gw_now_ns(), written[GW_BATCH_MASK_WORDS];
	struct gw_msg_pages_void *v = &ch->tx.void_msg;
	int ret;

	ret = s->dirty.ops->written(&s->dirty, lf->block, lf->first_page, lf->nr_pages, written);
	if (ret)
		return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: which pages changed while sent: %s",
			       ch->index, strerror(-ret));
	v->block = lf->block;
	v->seq = lf->seq;
	v->count = 0;
	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++)
		for (uint64_t bits = written[w] & lf->live[w]; bits; bits &= bits - 1)
			v->pages[v->count++] = lf->first_page + w * 64 + (unsigned)__builtin_ctzll(bits);
	if (v->count) {
		ret = gw_conn_send_msg(&ch->conn, GW_MSG_PAGES_VOID, v);
		if (ret)
			return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: sending PAGES_VOID: %s",
				       ch->index, strerror(-ret));
		__atomic_fetch_add(&s->ctr_void_pages, v->count, __ATOMIC_RELAXED);
	}
	gw_chan_add_stage(s, GW_STAGE_SETTLE, gw_now_ns() - t0);
	return 0;
}

/*
 * MSG_ZEROCOPY: settle the frames whose sends completed; with @all, wait
 * until every frame in flight is settled (before the channel may count as
 * drained: a harvest must not run while live pages are unsettled).
 */
static int settle_zc(struct gw_channel *ch, bool all)
{
	struct gw_chan_send *tx = &ch->tx;
	struct gw_session *s = ch->s;

	while (tx->inflight_len) {
		struct gw_live_frame *lf = &tx->inflight[tx->inflight_head];
		bool must = all || tx->inflight_len == GW_CHAN_ZC_INFLIGHT;
		int ret = gw_zc_reap(&tx->zc, ch->conn.fd, must ? 1000 : 0);

		if (ret && ret != -ETIMEDOUT)
			return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: zero-copy completion: %s",
				       ch->index, strerror(-ret));
		if ((int32_t)(tx->zc.done - lf->zc_end) < 0) {
			if (!must)
				return 0;
			if (gw_failed(s))
				return gw_failed(s);
			continue;	/* timed out: wait again (the sticky error ends it) */
		}
		ret = settle(ch, lf);
		if (ret)
			return ret;
		tx->inflight_head = (tx->inflight_head + 1) % GW_CHAN_ZC_INFLIGHT;
		tx->inflight_len--;
	}
	return 0;
}

int gw_chan_live_sent(struct gw_channel *ch, struct gw_out_slot *sl, bool zc, bool all)
{
	struct gw_chan_send *tx = &ch->tx;
	int ret = 0;

	if (sl->nr_live && !zc)
		ret = settle(ch, &sl->lf);	/* sendmsg copied the pages before returning */
	else if (sl->nr_live) {
		sl->lf.zc_end = tx->zc.sent;
		tx->inflight[(tx->inflight_head + tx->inflight_len) % GW_CHAN_ZC_INFLIGHT] = sl->lf;
		tx->inflight_len++;
	}
	/* Drained means settled: no live page may be unsettled at a harvest. */
	return ret ? ret : settle_zc(ch, all);
}

int gw_chan_live_end(struct gw_channel *ch, int ret)
{
	struct gw_session *s = ch->s;

	if (!ret && !gw_failed(s))
		ret = settle_zc(ch, true);
	__atomic_fetch_add(&s->ctr_zc_sends, ch->tx.zc.completed, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zc_copied, ch->tx.zc.copied, __ATOMIC_RELAXED);
	return ret;
}
