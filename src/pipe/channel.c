/* SPDX-License-Identifier: MIT */
/*
 * Data channel threads: queue, thread, connection (see channel.h). The
 * page work is done by the pipeline stages of pages_out.c and pages_in.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pipe/channel.h"
#include "mem/mapped.h"
#include "core/session_int.h"
#include "util/thread_name.h"

/* ---------------- source ---------------- */

int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b)
{
	int err = 0;

	pthread_mutex_lock(&ch->qlock);
	if (ch->q_len == GW_CHAN_QUEUE_LEN)	/* full: wait for room for a run of batches */
		while (ch->q_len > GW_CHAN_QUEUE_REFILL && !(err = gw_failed(ch->s)) && !ch->exited)
			pthread_cond_wait(&ch->space_cond, &ch->qlock);
	if (!err && ch->exited)
		err = -EPIPE;
	if (!err) {
		ch->q[(ch->q_head + ch->q_len) % GW_CHAN_QUEUE_LEN] = *b;
		ch->q_len++;
		pthread_cond_signal(&ch->work_cond);
	}
	pthread_mutex_unlock(&ch->qlock);
	return err;
}

int gw_channel_drain(struct gw_channel *ch)
{
	int err = 0;

	pthread_mutex_lock(&ch->qlock);
	while ((ch->q_len || ch->pending) && !(err = gw_failed(ch->s)) && !ch->exited)
		pthread_cond_wait(&ch->space_cond, &ch->qlock);
	pthread_mutex_unlock(&ch->qlock);
	return err ? err : gw_failed(ch->s);
}

void gw_channel_finish(struct gw_channel *ch)
{
	pthread_mutex_lock(&ch->qlock);
	ch->end_requested = true;
	pthread_cond_signal(&ch->work_cond);
	pthread_mutex_unlock(&ch->qlock);
}

void gw_channel_wake_all(struct gw_channel *ch)
{
	pthread_mutex_lock(&ch->qlock);
	pthread_cond_broadcast(&ch->space_cond);
	pthread_cond_broadcast(&ch->work_cond);
	pthread_cond_broadcast(&ch->ready_cond);
	pthread_mutex_unlock(&ch->qlock);
}

/* qlock held: a batch or frame is done; tell a drain waiting for the last one. */
static void batch_done_locked(struct gw_channel *ch)
{
	ch->pending--;
	if (!ch->pending && !ch->q_len)
		pthread_cond_signal(&ch->space_cond);
}

/* Prep: the next batch, or false when done (end requested and drained, or failure). */
static bool queue_pop(struct gw_channel *ch, struct gw_batch *b)
{
	bool got = false;

	pthread_mutex_lock(&ch->qlock);
	while (!ch->q_len && !ch->end_requested && !gw_failed(ch->s))
		pthread_cond_wait(&ch->work_cond, &ch->qlock);
	if (!gw_failed(ch->s) && ch->q_len) {
		*b = ch->q[ch->q_head];
		ch->q_head = (ch->q_head + 1) % GW_CHAN_QUEUE_LEN;
		ch->q_len--;
		ch->pending++;
		got = true;
		/* A waiting producer waits for the refill mark (no syscall without a waiter). */
		if (ch->q_len <= GW_CHAN_QUEUE_REFILL)
			pthread_cond_signal(&ch->space_cond);
	}
	pthread_mutex_unlock(&ch->qlock);
	return got;
}

static void add_stage(struct gw_session *s, enum gw_stage st, uint64_t ns)
{
	if (ns)
		__atomic_fetch_add(&s->ctr_stage_ns[st], ns, __ATOMIC_RELAXED);
}

/* The link cost the send thread measured, for the prep thread's auto. */
static double link_cost(struct gw_channel *ch)
{
	uint64_t bits = __atomic_load_n(&ch->link_cost_bits, __ATOMIC_RELAXED);
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/*
 * What the link costs per wire byte, for compress=auto: the kernel's TCP
 * delivery rate where there is one, else the time this send waited.
 * Published for the prep thread with the max-bandwidth share applied.
 */
static void sample_link(struct gw_channel *ch, size_t data_bytes, uint64_t send_ns)
{
	struct gw_session *s = ch->s;
	uint64_t rate_bps, bits;
	bool app_limited;
	double cost;

	if (data_bytes >= 65536) {
		if (ch->conn.sock->kernel && gw_tcp_delivery_rate(ch->conn.fd, &rate_bps, &app_limited) == 0)
			gw_codec_auto_sample_tcp(&ch->link_est, rate_bps, app_limited);
		else
			gw_codec_auto_sample_wait(&ch->link_est, (double)send_ns / (double)data_bytes);
	}
	cost = gw_codec_auto_link_cost(&ch->link_est, gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS), s->nr_channels);
	memcpy(&bits, &cost, sizeof(bits));
	__atomic_store_n(&ch->link_cost_bits, bits, __ATOMIC_RELAXED);
}

static void count_sent(struct gw_channel *ch, const struct gw_out_slot *sl)
{
	const struct gw_pages_frame *f = &sl->f;
	struct gw_session *s = ch->s;

	enum gw_codec_id codec;

	ch->frames++;
	ch->pages += f->ph.nr_entries;
	if (f->raw_bytes && !gw_wire_codec_to_id(f->ph.codec, &codec))
		__atomic_fetch_add(&ch->codec_bytes[codec], f->raw_bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_normal_pages, f->nr_normal, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zero_pages, f->nr_zero, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_xbzrle_pages, f->nr_xbzrle, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_raw_bytes, (uint64_t)(f->nr_normal + f->nr_xbzrle) * GW_PAGE_BYTES,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_wire_payload_bytes, f->data_bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_live_pages, sl->nr_live, __ATOMIC_RELAXED);
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
	struct gw_msg_pages_void *v = &ch->void_msg;
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
	add_stage(s, GW_STAGE_SETTLE, gw_now_ns() - t0);
	return 0;
}

/*
 * MSG_ZEROCOPY: settle the frames whose sends completed; with @all, wait
 * until every frame in flight is settled (before the channel may count as
 * drained: a harvest must not run while live pages are unsettled).
 */
static int settle_zc(struct gw_channel *ch, bool all)
{
	struct gw_session *s = ch->s;

	while (ch->inflight_len) {
		struct gw_live_frame *lf = &ch->inflight[ch->inflight_head];
		bool must = all || ch->inflight_len == GW_CHAN_ZC_INFLIGHT;
		int ret = gw_zc_reap(&ch->zc, ch->conn.fd, must ? 1000 : 0);

		if (ret && ret != -ETIMEDOUT)
			return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: zero-copy completion: %s",
				       ch->index, strerror(-ret));
		if ((int32_t)(ch->zc.done - lf->zc_end) < 0) {
			if (!must)
				return 0;
			if (gw_failed(s))
				return gw_failed(s);
			continue;	/* timed out: wait again (the sticky error ends it) */
		}
		ret = settle(ch, lf);
		if (ret)
			return ret;
		ch->inflight_head = (ch->inflight_head + 1) % GW_CHAN_ZC_INFLIGHT;
		ch->inflight_len--;
	}
	return 0;
}

/*
 * Pages sent from guest memory itself? Measured here (docs/architecture.md):
 * no faster than a copy through the mapping, whose CRC is over hot data,
 * so auto copies.
 */
static bool send_live(int64_t path)
{
	return path == GW_SEND_LIVE || path == GW_SEND_ZEROCOPY;
}

/* Which pages of the batch are mapped here, when the pipeline can use it. */
static const uint64_t *mapped_pages(struct gw_channel *ch, const struct gw_batch *b,
				    const struct gw_ram_block *blk, double link, uint64_t *mask)
{
	if (blk->fd < 0 || b->discard || ch->pagemap_fd < 0 ||
	    gw_param(ch->s, GW_PARAM_SEND_PATH) == GW_SEND_PREAD)
		return NULL;
	if (gw_mapped_mask(ch->pagemap_fd, blk->host + b->first_page * GW_PAGE_BYTES, b->nr_pages, mask))
		return NULL;
	return mask;
}

/* Prep thread: build batch @b into slot @si. 0 or the sticky error. */
static int prep_batch(struct gw_channel *ch, const struct gw_batch *b, unsigned si)
{
	struct gw_session *s = ch->s;
	struct gw_out_slot *sl = &ch->slot[si];
	const struct gw_ram_block *blk = &s->vm.blocks[b->block];
	double link = link_cost(ch);
	uint64_t mask[GW_BATCH_MASK_WORDS], t0 = gw_now_ns();
	const uint64_t *mapped;
	struct gw_ram_view ram;
	int ret;

	/*
	 * Tracking runs before the first batch is queued: the backend is known
	 * by now. Not after the final harvest: the guest is paused and nothing
	 * is re-armed any more (precopy.c harvest). Nor once devices report
	 * writes (mem/devdirty.h: no PAGES_VOID could name theirs in time).
	 */
	ch->live_ok = send_live(gw_param(s, GW_PARAM_SEND_PATH)) && s->dirty_started && s->dirty.ops->written &&
		      !__atomic_load_n(&s->dirty_final, __ATOMIC_ACQUIRE) && !gw_devdirty_seen(&s->devdirty);
	mapped = mapped_pages(ch, b, blk, link, mask);
	add_stage(s, GW_STAGE_READ, gw_now_ns() - t0);
	ram = (struct gw_ram_view){ b->block, blk->host, blk->fd, blk->fd_offset_bytes, mapped, ch->live_ok };
	ret = gw_pages_out_build(&ch->out, si, &ram, b, gw_round(s), link, &sl->f);
	if (ret)
		return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: preparing pages: %s",
			       ch->index, strerror(-ret));
	for (unsigned i = GW_STAGE_READ; i <= GW_STAGE_COMPRESS; i++)
		add_stage(s, (enum gw_stage)i, sl->f.stage_ns[i]);
	sl->lf = (struct gw_live_frame){ .block = b->block, .nr_pages = b->nr_pages,
					 .first_page = b->first_page };
	memcpy(sl->lf.live, ch->out.buf[si].live, sizeof(sl->lf.live));
	sl->nr_live = ch->out.buf[si].nr_live;
	return 0;
}

/* Send thread: one built frame, then settle its live pages. 0 or the sticky error. */
static int send_slot(struct gw_channel *ch, struct gw_out_slot *sl, bool last)
{
	struct gw_session *s = ch->s;
	struct gw_pages_frame *f = &sl->f;
	uint64_t t_send;
	bool zc;
	int ret;

	if (!f->iovcnt)
		return 0;
#ifdef GW_FAULT_INJECTION
	if (gw_fault_armed(s, GW_FAULT_SRC_CORRUPT) && f->data_bytes && ch->frames + 1 == gw_fault_arg(s))
		ch->conn.fault_corrupt_next = true;
#endif
	/* Zero-copy only when every data piece is guest memory (the buffers are reused). */
	zc = ch->zc_on && sl->nr_live && sl->nr_live == f->nr_normal && !f->nr_xbzrle &&
	     f->ph.codec == GW_WIRE_CODEC_NONE;
	if (!zc) {	/* any PAGES_VOID for this frame comes right after it */
		f->ph.flags |= GW_PAGES_F_SETTLE_NEXT;
		gw_msg_pages_hdr_encode(f->hdr, &f->ph);
	}
	t_send = gw_now_ns();
	gw_ratelimit(s, GW_WIRE_HDR_BYTES + f->payload_bytes);
	ret = gw_conn_send_prefix_crc(&ch->conn, GW_MSG_PAGES, f->iov, f->iovcnt, f->crc_iovcnt,
				      zc ? &ch->zc.sent : NULL, &sl->lf.seq);
	if (ret)
		return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: sending pages: %s",
			       ch->index, strerror(-ret));
	add_stage(s, GW_STAGE_SEND, gw_now_ns() - t_send);
	sample_link(ch, f->data_bytes, gw_now_ns() - t_send);
	count_sent(ch, sl);
	if (sl->nr_live && !zc)
		ret = settle(ch, &sl->lf);	/* sendmsg copied the pages before returning */
	else if (sl->nr_live) {
		sl->lf.zc_end = ch->zc.sent;
		ch->inflight[(ch->inflight_head + ch->inflight_len) % GW_CHAN_ZC_INFLIGHT] = sl->lf;
		ch->inflight_len++;
	}
	/* Drained means settled: no live page may be unsettled at a harvest. */
	return ret ? ret : settle_zc(ch, last);
}

static void *send_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_session *s = ch->s;
	int ret = 0;

	gw_log_set_side(s->side);
	if (gw_param(s, GW_PARAM_SEND_PATH) == GW_SEND_ZEROCOPY) {
		/*
		 * MSG_ZEROCOPY needs a kernel socket the pages go to as they
		 * are: not an rsocket, and not TLS (each record is an encrypted
		 * copy, made by OpenSSL or by kTLS). Those send through the
		 * copy path: pages are settled as soon as the send returns.
		 */
		const char *why = ch->conn.tls ? "TLS: records are encrypted copies" :
				  !ch->conn.sock->kernel ? "not a kernel socket" : NULL;

		ret = why ? -EOPNOTSUPP : gw_zc_enable(ch->conn.fd);
		ch->zc_on = !ret;
		if (ret && ch->index == 0)
			gw_log(GW_LOG_WARN, "mig", "zerocopy_unavailable", "err=\"%s\" fallback=copy",
			       why ? why : strerror(-ret));
		ret = 0;
	}
	pthread_mutex_lock(&ch->qlock);
	for (;;) {
		struct gw_out_slot *sl;
		bool last;

		while (!ch->slot_ready && !ch->prep_done && !gw_failed(s))
			pthread_cond_wait(&ch->ready_cond, &ch->qlock);
		if (gw_failed(s) || !ch->slot_ready)
			break;
		sl = &ch->slot[ch->slot_ready_head];
		ch->slot_ready_head = (ch->slot_ready_head + 1) % GW_PAGES_OUT_BUFS;
		ch->slot_ready--;
		last = ch->pending == 1 && !ch->q_len;
		pthread_mutex_unlock(&ch->qlock);
		ret = send_slot(ch, sl, last);
		pthread_mutex_lock(&ch->qlock);
		ch->slot_busy--;
		pthread_cond_signal(&ch->work_cond);	/* a prep thread waiting for a buffer */
		batch_done_locked(ch);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&ch->qlock);
	if (!ret && !gw_failed(s))
		ret = settle_zc(ch, true);
	__atomic_fetch_add(&s->ctr_zc_sends, ch->zc.completed, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zc_copied, ch->zc.copied, __ATOMIC_RELAXED);
	if (!ret && !gw_failed(s)) {
		struct gw_msg_chan_end m = { .index = ch->index, .frames = ch->frames, .pages = ch->pages };

		ret = gw_conn_send_msg(&ch->conn, GW_MSG_CHAN_END, &m);
		if (ret)
			gw_fail(s, GW_PHASE_FINAL, ret, "channel %u: sending end: %s", ch->index, strerror(-ret));
	}
	return NULL;
}

/*
 * The channel's prep thread: it starts the send thread, builds each batch
 * into a free buffer and hands it over, and joins the send thread at the end.
 */
void *gw_channel_send_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_session *s = ch->s;
	unsigned next = 0;
	struct gw_batch b;
	bool sender;
	int ret;

	gw_log_set_side(s->side);
	ret = -pthread_create(&ch->send_thread, NULL, send_main, ch);
	sender = !ret;
	if (sender)
		gw_thread_name(ch->send_thread, "gw-src-ch%u-tx", ch->index);
	if (ret)
		gw_fail(s, GW_PHASE_SETUP, ret, "channel %u: send thread", ch->index);
	while (!ret && queue_pop(ch, &b)) {
		pthread_mutex_lock(&ch->qlock);
		while (ch->slot_busy == GW_PAGES_OUT_BUFS && !gw_failed(s))
			pthread_cond_wait(&ch->work_cond, &ch->qlock);
		pthread_mutex_unlock(&ch->qlock);
		ret = gw_failed(s);
		if (!ret)
			ret = prep_batch(ch, &b, next);
		pthread_mutex_lock(&ch->qlock);
		if (!ret) {
			ch->slot_busy++;
			ch->slot_ready++;
			next = (next + 1) % GW_PAGES_OUT_BUFS;
			pthread_cond_signal(&ch->ready_cond);
		} else {
			batch_done_locked(ch);
		}
		pthread_mutex_unlock(&ch->qlock);
	}
	pthread_mutex_lock(&ch->qlock);
	ch->prep_done = true;
	pthread_cond_broadcast(&ch->ready_cond);
	pthread_mutex_unlock(&ch->qlock);
	if (sender)
		pthread_join(ch->send_thread, NULL);
	pthread_mutex_lock(&ch->qlock);
	ch->exited = true;
	pthread_cond_broadcast(&ch->space_cond);
	pthread_mutex_unlock(&ch->qlock);
	return NULL;
}

/* ---------------- destination ---------------- */

#define RECV_IOV_MAX 64

/* Receive the data area of a checked frame: straight into RAM, or into the buffer. */
static int recv_data(struct gw_channel *ch, const struct gw_pages_plan *plan, uint32_t *crc)
{
	struct iovec iov[RECV_IOV_MAX];
	uint32_t next = 0;
	int cnt, ret;

	if (!plan->direct) {
		iov[0] = (struct iovec){ ch->in.data, plan->ph.data_bytes };
		return gw_conn_recv_iov(&ch->conn, iov, 1, crc);
	}
	while ((cnt = gw_pages_in_direct_iov(&ch->in, plan, &next, iov, RECV_IOV_MAX)) > 0) {
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

	add_stage(s, st, now - *t);
	*t = now;
}

/*
 * Verification snapshot: a block written through its mapping is protected
 * after each frame rather than ahead (a protected page would fault the
 * receive). Frames are whole regions, so whole digest chunks.
 */
static void protect_written(struct gw_channel *ch, const struct gw_pages_plan *plan)
{
	uint64_t first = gw_page_entry_page(gw_le64_get((const uint8_t *)&ch->in.entries[0]));
	uint64_t last = gw_page_entry_page(gw_le64_get((const uint8_t *)&ch->in.entries[plan->ph.nr_entries - 1]));

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
	iov[0] = (struct iovec){ ch->in.entries, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES };
	iov[1] = (struct iovec){ ch->in.crcs, gw_pages_crc_bytes(&ph) };
	ret = gw_conn_recv_iov(&ch->conn, iov, 2, crc);
	if (!ret && page_crc)
		ret = gw_conn_recv_check(h, *crc);	/* all but the data area, checked page by page */
	add_since(s, GW_STAGE_RECV, &t);
	if (!ret)
		ret = gw_pages_in_check(&ch->in, s->layout, &ph, &plan);
	add_since(s, GW_STAGE_CHECK, &t);
	if (!ret)
		ret = recv_data(ch, &plan, page_crc ? NULL : crc);
	if (!ret && !page_crc)
		ret = gw_conn_recv_check(h, *crc);
	add_since(s, GW_STAGE_RECV, &t);
	if (!ret)
		ret = gw_pages_in_decompress(&ch->in, &plan, &raw);
	add_since(s, GW_STAGE_DECOMPRESS, &t);
	if (!ret)
		ret = gw_pages_in_verify(&ch->in, &plan, plan.direct ? NULL : raw);
	if (!ret && plan.nr_bad) {
		ret = gw_pages_in_suspect(&ch->in, &plan, h->seq);
		ch->void_next = ph.flags & GW_PAGES_F_SETTLE_NEXT;
		ch->void_seq = h->seq;
	}
	add_since(s, GW_STAGE_CHECK, &t);
	if (ret)
		return ret;
	nr = gw_pages_in_plan_writes(&ch->in, &plan, plan.direct ? NULL : raw);
	if (nr < 0)
		return nr;
	ret = gw_pages_in_apply(plan.blk, ch->in.writes, nr);
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
	struct gw_msg_pages_void *m = &ch->void_msg;
	uint8_t *buf = (uint8_t *)ch->in.data;	/* between frames: free */
	struct iovec iov = { buf, h->len };	/* h->len bounded by the header check */
	int ret;

	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (!ret)
		ret = gw_conn_recv_check(h, *crc);
	if (!ret)
		ret = gw_msg_decode(GW_MSG_PAGES_VOID, buf, h->len, m, NULL, 0);
	if (!ret)
		ret = gw_pages_in_void(&ch->in, ch->s->layout, m);
	if (!ret && ch->void_next) {
		ch->void_next = false;
		for (uint32_t i = 0; i < ch->in.nr_pending; i++)
			if (ch->in.pending[i].seq == ch->void_seq)
				return suspect_error(ch, &ch->in.pending[i]);
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
	if (ch->in.nr_pending)
		return gw_fail(ch->s, GW_PHASE_FINAL, -EBADMSG,
			       "channel %u: %u page(s) failed their CRC and no PAGES_VOID named them "
			       "(first: block %u page %llu)", ch->index, ch->in.nr_pending,
			       ch->in.pending[0].block, (unsigned long long)ch->in.pending[0].page);
	if (m.index != ch->index || m.frames != ch->frames || m.pages != ch->pages)
		return gw_fail(ch->s, GW_PHASE_FINAL, -EPROTO,
			       "channel %u: end says %llu frames/%llu pages, received %llu/%llu",
			       ch->index, (unsigned long long)m.frames, (unsigned long long)m.pages,
			       (unsigned long long)ch->frames, (unsigned long long)ch->pages);
	ch->end_seen = true;
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
	if (gw_fault_armed(s, GW_FAULT_DST_STALL) && gw_round(s) >= gw_fault_arg(s))
		gw_fault_stall(s);
	if (ch->void_next && h.type != GW_MSG_PAGES_VOID) {
		for (uint32_t i = 0; i < ch->in.nr_pending; i++)
			if (ch->in.pending[i].seq == ch->void_seq)
				return suspect_error(ch, &ch->in.pending[i]);
		ch->void_next = false;
	}
	switch (h.type) {
	case GW_MSG_PAGES:
		if (gw_fault_armed(s, GW_FAULT_DST_SLOW))
			gw_fault_sleep_us(s);
		if (gw_fault_armed(s, GW_FAULT_DST_ROUND0) && gw_round(s) == 0 &&
		    ch->conn.bytes_recv >= gw_fault_arg(s))
			gw_fault_die(s, GW_FAULT_DST_ROUND0);
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
	if (ret < 0 && !gw_failed(s))
		gw_fail(s, GW_PHASE_RECEIVE, ret, "channel %u: %s", ch->index, gw_conn_err_text(ret, "source"));
	return NULL;
}

/* ---------------- set-up and tear-down ---------------- */

/* compress=auto: what this channel's batches became (docs/log-events.md). */
static void log_auto_tally(struct gw_channel *ch)
{
	const struct gw_auto_tally *t = &ch->out.tally;
	const struct gw_codec_auto *a = &ch->out.autoc;

	if (ch->out.codec != GW_CODEC_AUTO || !(t->fast_link + t->probe_raw + t->model_raw + t->not_smaller +
						 t->lz4 + t->zstd_fast + t->zstd_ratio))
		return;
	gw_log(GW_LOG_INFO, "mig", "codec_auto",
	       "channel=%u fast_link=%llu probe_raw=%llu model_raw=%llu not_smaller=%llu lz4=%llu "
	       "zstd_fast=%llu zstd_ratio=%llu level_changes=%llu link_ns_per_byte=%.2f "
	       "zstd_ns_per_byte=%.2f zstd_est_ratio=%.3f lz4_ns_per_byte=%.2f lz4_est_ratio=%.3f",
	       ch->index, (unsigned long long)t->fast_link, (unsigned long long)t->probe_raw,
	       (unsigned long long)t->model_raw, (unsigned long long)t->not_smaller,
	       (unsigned long long)t->lz4, (unsigned long long)t->zstd_fast,
	       (unsigned long long)t->zstd_ratio, (unsigned long long)t->level_changes, link_cost(ch),
	       a->est[GW_CODEC_ZSTD].ns_per_byte, a->est[GW_CODEC_ZSTD].ratio,
	       a->est[GW_CODEC_LZ4].ns_per_byte, a->est[GW_CODEC_LZ4].ratio);
}

static void channel_release(struct gw_channel *ch, enum gw_role role)
{
	if (role == GW_ROLE_SOURCE) {
		log_auto_tally(ch);
		gw_pages_out_release(&ch->out);
	}
	else
		gw_pages_in_release(&ch->in);
	if (ch->pagemap_fd >= 0)
		close(ch->pagemap_fd);
	gw_conn_close(&ch->conn);
	pthread_mutex_destroy(&ch->qlock);
	pthread_cond_destroy(&ch->space_cond);
	pthread_cond_destroy(&ch->work_cond);
	pthread_cond_destroy(&ch->ready_cond);
}

static int channel_setup(struct gw_channel *ch, struct gw_session *s, unsigned index)
{
	int64_t xb = gw_param(s, GW_PARAM_XBZRLE_CACHE_BYTES);

	memset(ch, 0, sizeof(*ch));
	ch->s = s;
	ch->index = index;
	gw_conn_init(&ch->conn, -1);
	pthread_mutex_init(&ch->qlock, NULL);
	pthread_cond_init(&ch->space_cond, NULL);
	pthread_cond_init(&ch->work_cond, NULL);
	pthread_cond_init(&ch->ready_cond, NULL);
	ch->pagemap_fd = -1;
	if (s->role == GW_ROLE_DEST)
		return gw_pages_in_init(&ch->in);
	ch->pagemap_fd = gw_pagemap_open();	/* none: every fd-backed page goes through pread */
	gw_codec_auto_init(&ch->link_est);
	/* The XBZRLE cache is split over the channels: a page never changes channel. */
	return gw_pages_out_init(&ch->out, (enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS),
				 (int)gw_param(s, GW_PARAM_COMPRESS_LEVEL),
				 xb > 0 ? (size_t)xb / s->nr_channels : 0);
}

int gw_channels_create(struct gw_session *s, unsigned n)
{
	struct gw_channel *chans = calloc(n ? n : 1, sizeof(*chans));

	if (!chans)
		return gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory for channels");
	for (unsigned i = 0; i < n; i++) {
		int ret = channel_setup(&chans[i], s, i);

		if (ret) {
			for (unsigned j = 0; j <= i; j++)
				channel_release(&chans[j], s->role);
			free(chans);
			return gw_fail(s, GW_PHASE_SETUP, ret, "channel %u setup: %s", i, strerror(-ret));
		}
	}
	gw_session_publish_channels(s, chans, n);
	return 0;
}

int gw_channels_start(struct gw_session *s, void *(*fn)(void *))
{
	for (unsigned i = 0; i < s->nr_channels; i++) {
		int ret = -pthread_create(&s->chans[i].thread, NULL, fn, &s->chans[i]);

		if (ret)
			return gw_fail(s, GW_PHASE_SETUP, ret, "channel thread");
		gw_thread_name(s->chans[i].thread, "gw-%s-ch%u", s->role == GW_ROLE_SOURCE ? "src" : "dst", i);
		s->chans[i].thread_started = true;
	}
	return 0;
}

void gw_channels_join(struct gw_session *s)
{
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++) {
		if (s->chans[i].thread_started)
			pthread_join(s->chans[i].thread, NULL);
		s->chans[i].thread_started = false;
	}
}

void gw_channels_destroy(struct gw_session *s)
{
	unsigned n;
	/* Detached first: a concurrent cancel must not walk freed channels. */
	struct gw_channel *chans = gw_session_detach_channels(s, &n);

	for (unsigned i = 0; i < n; i++)
		channel_release(&chans[i], s->role);
	free(chans);
}

void gw_channels_shutdown(struct gw_channel *chans, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		gw_conn_shutdown(&chans[i].conn);
		gw_channel_wake_all(&chans[i]);
	}
}
