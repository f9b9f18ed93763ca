/* SPDX-License-Identifier: MIT */
/*
 * A data channel's destination side (chan_recv.h): one frame at a time,
 * header first; PAGES frames are checked and applied by the stages of
 * pages_in.c, straight into RAM where they can be.
 */
#include <errno.h>
#include <string.h>
#include "pipe/chan_int.h"

#define RECV_IOV_MAX 64

/* Receive the data area of a checked frame: straight into RAM, or into the buffer. */
static int recv_data(struct gw_channel *ch, const struct gw_pages_plan *plan, uint32_t *crc)
{
	struct iovec iov[RECV_IOV_MAX];
	uint32_t next = 0;
	int cnt, ret;

	if (!plan->direct) {
		iov[0] = (struct iovec){ ch->rx.in.data, plan->ph.data_bytes };
		return gw_conn_recv_iov(&ch->conn, iov, 1, crc);
	}
	while ((cnt = gw_pages_in_direct_iov(&ch->rx.in, plan, &next, iov, RECV_IOV_MAX)) > 0) {
		ret = gw_conn_recv_iov(&ch->conn, iov, cnt, crc);
		if (ret)
			return ret;
	}
	return 0;
}

static void count_received(struct gw_channel *ch, const struct gw_pages_plan *plan)
{
	struct gw_session *s = ch->s;

	ch->frames++;
	ch->pages += plan->ph.nr_entries;
	/* Pages are what keeps a destination's migration alive (dest/setup.c, dst_conn_watch). */
	if (plan->ph.nr_entries)
		__atomic_store_n(&s->rx_progress_ns, gw_now_ns(), __ATOMIC_RELAXED);
	if (plan->ph.raw_bytes)
		__atomic_fetch_add(&ch->codec_bytes[plan->codec], plan->ph.raw_bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_normal_pages, plan->nr_normal, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_xbzrle_pages, plan->nr_xbzrle, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zero_pages, plan->nr_zero, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_raw_bytes, (uint64_t)(plan->nr_normal + plan->nr_xbzrle) * GW_PAGE_BYTES,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_wire_payload_bytes, plan->ph.data_bytes, __ATOMIC_RELAXED);
}

static void add_since(struct gw_session *s, enum gw_stage st, uint64_t *t)
{
	uint64_t now = gw_now_ns();

	gw_chan_add_stage(s, st, now - *t);
	*t = now;
}

/*
 * Verification snapshot: a block written through its mapping is protected
 * after each frame rather than ahead (a protected page would fault the
 * receive). Frames are whole regions, so whole digest chunks.
 */
static void protect_written(struct gw_channel *ch, const struct gw_pages_plan *plan)
{
	uint64_t first = gw_page_entry_page(gw_le64_get((const uint8_t *)&ch->rx.in.entries[0]));
	uint64_t last = gw_page_entry_page(gw_le64_get((const uint8_t *)&ch->rx.in.entries[plan->ph.nr_entries - 1]));

	if (ch->s->snap && plan->blk->map_write && last >= first)
		(void)gw_snapshot_protect(ch->s->snap, plan->ph.block, first, last - first + 1);
}

/*
 * One PAGES frame: header -> sub-header -> entries [+ page CRCs -> frame
 * CRC] -> check -> data -> [frame CRC] -> decompress -> page CRCs -> apply.
 */
static int recv_pages(struct gw_channel *ch, const struct gw_frame_hdr *h, uint32_t *crc)
{
	struct gw_session *s = ch->s;
	uint8_t phbuf[GW_PAGES_HDR_BYTES];
	struct iovec iov[2] = { { phbuf, sizeof(phbuf) } };
	struct gw_msg_pages_hdr ph;
	struct gw_pages_plan plan;
	uint64_t t = gw_now_ns();
	const uint8_t *raw;
	bool page_crc;
	int ret, nr;

	if (h->len < GW_PAGES_HDR_BYTES)
		return -EPROTO;
	ret = gw_conn_recv_iov(&ch->conn, iov, 1, crc);
	if (!ret && gw_msg_pages_hdr_decode(phbuf, h->len, &ph))
		ret = -EPROTO;
	if (ret)
		return ret;
	page_crc = ph.flags & GW_PAGES_F_PAGE_CRC;
	iov[0] = (struct iovec){ ch->rx.in.entries, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES };
	iov[1] = (struct iovec){ ch->rx.in.crcs, gw_pages_crc_bytes(&ph) };
	ret = gw_conn_recv_iov(&ch->conn, iov, 2, crc);
	if (!ret && page_crc)
		ret = gw_conn_recv_check(h, *crc);	/* all but the data area, checked page by page */
	add_since(s, GW_STAGE_RECV, &t);
	if (!ret)
		ret = gw_pages_in_check(&ch->rx.in, s->layout, &ph, &plan);
	add_since(s, GW_STAGE_CHECK, &t);
	if (!ret)
		ret = recv_data(ch, &plan, page_crc ? NULL : crc);
	if (!ret && !page_crc)
		ret = gw_conn_recv_check(h, *crc);
	add_since(s, GW_STAGE_RECV, &t);
	if (!ret)
		ret = gw_pages_in_decompress(&ch->rx.in, &plan, &raw);
	add_since(s, GW_STAGE_DECOMPRESS, &t);
	if (!ret)
		ret = gw_pages_in_verify(&ch->rx.in, &plan, plan.direct ? NULL : raw);
	if (!ret && plan.nr_bad) {
		ret = gw_pages_in_suspect(&ch->rx.in, &plan, h->seq);
		ch->rx.void_next = ph.flags & GW_PAGES_F_SETTLE_NEXT;
		ch->rx.void_seq = h->seq;
	}
	add_since(s, GW_STAGE_CHECK, &t);
	if (ret)
		return ret;
	nr = gw_pages_in_plan_writes(&ch->rx.in, &plan, plan.direct ? NULL : raw);
	if (nr < 0)
		return nr;
	ret = gw_pages_in_apply(plan.blk, ch->rx.in.writes, nr);
	if (!ret)
		protect_written(ch, &plan);
	add_since(s, GW_STAGE_APPLY, &t);
	if (!ret) {
		count_received(ch, &plan);
		if (plan.direct)
			__atomic_fetch_add(&s->ctr_direct_pages, plan.nr_normal, __ATOMIC_RELAXED);
	}
	return ret;
}

/* A page failed its CRC and the PAGES_VOID that had to name it did not. */
static int suspect_error(struct gw_channel *ch, const struct gw_void_pending *p)
{
	return gw_fail(ch->s, GW_PHASE_RECEIVE, -EBADMSG,
		       "channel %u: checksum mismatch: page %llu of block %u in frame %u (not named "
		       "as written while sent)", ch->index, (unsigned long long)p->page, p->block, p->seq);
}

/* PAGES_VOID: pages of an earlier frame the guest wrote while they were sent. */
static int recv_void(struct gw_channel *ch, const struct gw_frame_hdr *h, uint32_t *crc)
{
	struct gw_msg_pages_void *m = &ch->rx.void_msg;
	uint8_t *buf = (uint8_t *)ch->rx.in.data;	/* between frames: free */
	struct iovec iov = { buf, h->len };	/* h->len bounded by the header check */
	int ret;

	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (!ret)
		ret = gw_conn_recv_check(h, *crc);
	if (!ret)
		ret = gw_msg_decode(GW_MSG_PAGES_VOID, buf, h->len, m, NULL, 0);
	if (!ret)
		ret = gw_pages_in_void(&ch->rx.in, ch->s->layout, m);
	if (!ret && ch->rx.void_next) {
		ch->rx.void_next = false;
		for (uint32_t i = 0; i < ch->rx.in.nr_pending; i++)
			if (ch->rx.in.pending[i].seq == ch->rx.void_seq)
				return suspect_error(ch, &ch->rx.in.pending[i]);
	}
	return ret;
}

/* CHAN_END: the channel's totals must match what arrived. */
static int recv_end(struct gw_channel *ch, const struct gw_frame_hdr *h, uint32_t *crc)
{
	uint8_t buf[64];
	struct iovec iov = { buf, h->len };
	struct gw_msg_chan_end m;
	int ret;

	if (h->len > sizeof(buf))
		return -EPROTO;
	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (!ret)
		ret = gw_conn_recv_check(h, *crc);
	if (!ret)
		ret = gw_msg_decode(GW_MSG_CHAN_END, buf, h->len, &m, NULL, 0);
	if (ret)
		return ret;
	if (ch->rx.in.nr_pending)
		return gw_fail(ch->s, GW_PHASE_FINAL, -EBADMSG,
			       "channel %u: %u page(s) failed their CRC and no PAGES_VOID named them "
			       "(first: block %u page %llu)", ch->index, ch->rx.in.nr_pending,
			       ch->rx.in.pending[0].block, (unsigned long long)ch->rx.in.pending[0].page);
	if (m.index != ch->index || m.frames != ch->frames || m.pages != ch->pages)
		return gw_fail(ch->s, GW_PHASE_FINAL, -EPROTO,
			       "channel %u: end says %llu frames/%llu pages, received %llu/%llu",
			       ch->index, (unsigned long long)m.frames, (unsigned long long)m.pages,
			       (unsigned long long)ch->frames, (unsigned long long)ch->pages);
	ch->rx.end_seen = true;
	return 0;
}

/* An ERROR frame on a data connection: the source's reason becomes ours. */
static int recv_error(struct gw_channel *ch, const struct gw_frame_hdr *h, uint32_t *crc)
{
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	struct iovec iov = { buf, h->len };
	struct gw_msg_error m;
	int ret;

	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);	/* h->len bounded by the header check */
	if (!ret)
		ret = gw_conn_recv_check(h, *crc);
	if (!ret)
		ret = gw_msg_decode(GW_MSG_ERROR, buf, h->len, &m, NULL, 0);
	return ret ? ret : gw_fail_from_peer(ch->s, GW_PHASE_RECEIVE, &m);
}

/* Receive one frame. 1 when the channel ended (CHAN_END), 0 to go on, or -errno. */
static int recv_one(struct gw_channel *ch)
{
	struct gw_session *s = ch->s;
	struct gw_frame_hdr h;
	uint32_t crc;
	int ret = gw_conn_recv_hdr(&ch->conn, &h, &crc);

	if (ret)
		return ret;
	GW_FAULT_POINT(s, GW_FAULT_DST_STALL, gw_round(s));
	if (ch->rx.void_next && h.type != GW_MSG_PAGES_VOID) {
		for (uint32_t i = 0; i < ch->rx.in.nr_pending; i++)
			if (ch->rx.in.pending[i].seq == ch->rx.void_seq)
				return suspect_error(ch, &ch->rx.in.pending[i]);
		ch->rx.void_next = false;
	}
	switch (h.type) {
	case GW_MSG_PAGES:
		GW_FAULT_POINT(s, GW_FAULT_DST_SLOW, 0);
		GW_FAULT_POINT(s, GW_FAULT_DST_ROUND0, ch->conn.bytes_recv);
		return recv_pages(ch, &h, &crc);
	case GW_MSG_PAGES_VOID:
		return recv_void(ch, &h, &crc);
	case GW_MSG_CHAN_END:
		ret = recv_end(ch, &h, &crc);
		return ret ? ret : 1;
	case GW_MSG_ERROR:
		return recv_error(ch, &h, &crc);
	default:
		return gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "channel %u: unexpected %s frame",
			       ch->index, gw_frame_type_name(h.type));
	}
}

void *gw_channel_recv_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_session *s = ch->s;
	int ret = 0;

	gw_log_set_side(s->side);
	while (!ret && !gw_failed(s))
		ret = recv_one(ch);
	/* Idle past the session's progress (pages on any channel): the same words as the control loop's. */
	if (ret == -ETIMEDOUT && !gw_failed(s) && !gw_conn_recv_why(&ch->conn)[0])
		gw_fail(s, GW_PHASE_RECEIVE, ret, "channel %u: the source sent no pages for %lld ms: the migration "
			"stalled", ch->index, (long long)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	else if (ret < 0 && !gw_failed(s))
		gw_fail(s, GW_PHASE_RECEIVE, ret, "channel %u: %s", ch->index,
			gw_conn_recv_why(&ch->conn)[0] ? gw_conn_recv_why(&ch->conn) : gw_conn_err_text(ret, "source"));
	return NULL;
}

int gw_chan_recv_init(struct gw_channel *ch)
{
	return gw_pages_in_init(&ch->rx.in);
}

void gw_chan_recv_release(struct gw_channel *ch)
{
	gw_pages_in_release(&ch->rx.in);
}
