/* SPDX-License-Identifier: MIT */
/*
 * A data channel's source side (chan_send.h): the queue the migration
 * thread fills, the prep thread building frames, the send thread sending
 * them (its live pages: chan_live.c), the link estimate for compress=auto.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "mem/mapped.h"
#include "pipe/chan_int.h"
#include "util/thread_name.h"

/* ---------------- the queue (migration thread -> prep thread) ---------------- */

int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b)
{
	struct gw_chan_send *tx = &ch->tx;
	int err = 0;

	pthread_mutex_lock(&tx->qlock);
	if (tx->q_len == GW_CHAN_QUEUE_LEN)	/* full: wait for room for a run of batches */
		while (tx->q_len > GW_CHAN_QUEUE_REFILL && !(err = gw_failed(ch->s)) && !tx->exited)
			pthread_cond_wait(&tx->space_cond, &tx->qlock);
	if (!err && tx->exited)
		err = -EPIPE;
	if (!err) {
		tx->q[(tx->q_head + tx->q_len) % GW_CHAN_QUEUE_LEN] = *b;
		tx->q_len++;
		pthread_cond_signal(&tx->work_cond);
	}
	pthread_mutex_unlock(&tx->qlock);
	return err;
}

int gw_channel_drain(struct gw_channel *ch)
{
	struct gw_chan_send *tx = &ch->tx;
	int err = 0;

	pthread_mutex_lock(&tx->qlock);
	while ((tx->q_len || tx->pending) && !(err = gw_failed(ch->s)) && !tx->exited)
		pthread_cond_wait(&tx->space_cond, &tx->qlock);
	pthread_mutex_unlock(&tx->qlock);
	return err ? err : gw_failed(ch->s);
}

void gw_channel_finish(struct gw_channel *ch)
{
	struct gw_chan_send *tx = &ch->tx;

	pthread_mutex_lock(&tx->qlock);
	tx->end_requested = true;
	pthread_cond_signal(&tx->work_cond);
	pthread_mutex_unlock(&tx->qlock);
}

void gw_chan_send_wake(struct gw_channel *ch)
{
	struct gw_chan_send *tx = &ch->tx;

	pthread_mutex_lock(&tx->qlock);
	pthread_cond_broadcast(&tx->space_cond);
	pthread_cond_broadcast(&tx->work_cond);
	pthread_cond_broadcast(&tx->ready_cond);
	pthread_mutex_unlock(&tx->qlock);
}

/* qlock held: a batch or frame is done; tell a drain waiting for the last one. */
static void batch_done_locked(struct gw_chan_send *tx)
{
	tx->pending--;
	if (!tx->pending && !tx->q_len)
		pthread_cond_signal(&tx->space_cond);
}

/* Prep: the next batch, or false when done (end requested and drained, or failure). */
static bool queue_pop(struct gw_channel *ch, struct gw_batch *b)
{
	struct gw_chan_send *tx = &ch->tx;
	bool got = false;

	pthread_mutex_lock(&tx->qlock);
	while (!tx->q_len && !tx->end_requested && !gw_failed(ch->s))
		pthread_cond_wait(&tx->work_cond, &tx->qlock);
	if (!gw_failed(ch->s) && tx->q_len) {
		*b = tx->q[tx->q_head];
		tx->q_head = (tx->q_head + 1) % GW_CHAN_QUEUE_LEN;
		tx->q_len--;
		tx->pending++;
		got = true;
		/* A waiting producer waits for the refill mark (no syscall without a waiter). */
		if (tx->q_len <= GW_CHAN_QUEUE_REFILL)
			pthread_cond_signal(&tx->space_cond);
	}
	pthread_mutex_unlock(&tx->qlock);
	return got;
}

/* ---------------- the link estimate (send thread -> prep thread) ---------------- */

/* The link cost the send thread measured, for the prep thread's auto. */
static double link_cost(struct gw_channel *ch)
{
	uint64_t bits = __atomic_load_n(&ch->tx.link_cost_bits, __ATOMIC_RELAXED);
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
	struct gw_link_sample ls = { .data_bytes = data_bytes, .send_ns = send_ns, .nr_channels = s->nr_channels,
				     .cap_bps = gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS) };
	uint64_t bits;
	double cost;

	if (data_bytes >= GW_AUTO_LINK_SAMPLE_MIN_BYTES && ch->conn.sock->kernel)
		ls.tcp = gw_tcp_delivery_rate(ch->conn.fd, &ls.tcp_rate_bps, &ls.tcp_app_limited) == 0;
	cost = gw_codec_auto_link_sample(&ch->tx.link_est, &ls);
	memcpy(&bits, &cost, sizeof(bits));
	__atomic_store_n(&ch->tx.link_cost_bits, bits, __ATOMIC_RELAXED);
}

/* ---------------- prep thread: one frame ---------------- */

/* Prep thread: build batch @b into slot @si. 0 or the sticky error. */
static int prep_batch(struct gw_channel *ch, const struct gw_batch *b, unsigned si)
{
	struct gw_chan_send *tx = &ch->tx;
	struct gw_session *s = ch->s;
	struct gw_out_slot *sl = &tx->slot[si];
	const struct gw_ram_block *blk = &s->vm.blocks[b->block];
	double link = link_cost(ch);
	uint64_t mask[GW_BATCH_MASK_WORDS], t0 = gw_now_ns();
	const uint64_t *mapped;
	struct gw_ram_view ram;
	int ret;

	tx->live_ok = gw_chan_live_ok(ch);
	mapped = gw_chan_mapped(ch, b, blk, mask);
	gw_chan_add_stage(s, GW_STAGE_READ, gw_now_ns() - t0);
	ram = (struct gw_ram_view){ b->block, blk->host, blk->fd, blk->fd_offset_bytes, mapped, tx->live_ok };
	ret = gw_pages_out_build(&tx->out, si, &ram, b, gw_round(s), link, &sl->f);
	if (ret)
		return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: preparing pages: %s",
			       ch->index, strerror(-ret));
	for (unsigned i = GW_STAGE_READ; i <= GW_STAGE_COMPRESS; i++)
		gw_chan_add_stage(s, (enum gw_stage)i, sl->f.stage_ns[i]);
	sl->lf = (struct gw_live_frame){ .block = b->block, .nr_pages = b->nr_pages,
					 .first_page = b->first_page };
	memcpy(sl->lf.live, tx->out.buf[si].live, sizeof(sl->lf.live));
	sl->nr_live = tx->out.buf[si].nr_live;
	return 0;
}

/* ---------------- send thread: the frames in order ---------------- */

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
	GW_FAULT_CORRUPT_NEXT(s, &ch->conn, f->data_bytes ? ch->frames + 1 : 0);
	zc = gw_chan_zc_frame(ch, sl);
	if (!zc) {	/* any PAGES_VOID for this frame comes right after it */
		f->ph.flags |= GW_PAGES_F_SETTLE_NEXT;
		gw_msg_pages_hdr_encode(f->hdr, &f->ph);
	}
	t_send = gw_now_ns();
	gw_ratelimit(s, GW_WIRE_HDR_BYTES + f->payload_bytes);
	ret = gw_conn_send_prefix_crc(&ch->conn, GW_MSG_PAGES, f->iov, f->iovcnt, f->crc_iovcnt,
				      zc ? &ch->tx.zc.sent : NULL, &sl->lf.seq);
	if (ret)
		return gw_fail(s, GW_PHASE_SEND, ret, "channel %u: sending pages: %s",
			       ch->index, strerror(-ret));
	gw_chan_add_stage(s, GW_STAGE_SEND, gw_now_ns() - t_send);
	sample_link(ch, f->data_bytes, gw_now_ns() - t_send);
	count_sent(ch, sl);
	return gw_chan_live_sent(ch, sl, zc, last);
}

static void *send_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_chan_send *tx = &ch->tx;
	struct gw_session *s = ch->s;
	int ret = 0;

	gw_log_set_side(s->side);
	gw_chan_zc_setup(ch);
	pthread_mutex_lock(&tx->qlock);
	for (;;) {
		struct gw_out_slot *sl;
		bool last;

		while (!tx->slot_ready && !tx->prep_done && !gw_failed(s))
			pthread_cond_wait(&tx->ready_cond, &tx->qlock);
		if (gw_failed(s) || !tx->slot_ready)
			break;
		sl = &tx->slot[tx->slot_ready_head];
		tx->slot_ready_head = (tx->slot_ready_head + 1) % GW_PAGES_OUT_BUFS;
		tx->slot_ready--;
		last = tx->pending == 1 && !tx->q_len;
		pthread_mutex_unlock(&tx->qlock);
		ret = send_slot(ch, sl, last);
		pthread_mutex_lock(&tx->qlock);
		tx->slot_busy--;
		pthread_cond_signal(&tx->work_cond);	/* a prep thread waiting for a buffer */
		batch_done_locked(tx);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&tx->qlock);
	ret = gw_chan_live_end(ch, ret);
	if (!ret && !gw_failed(s)) {
		struct gw_msg_chan_end m = { .index = ch->index, .frames = ch->frames, .pages = ch->pages };

		ret = gw_conn_send_msg(&ch->conn, GW_MSG_CHAN_END, &m);
		if (ret)
			gw_fail(s, GW_PHASE_FINAL, ret, "channel %u: sending end: %s", ch->index, strerror(-ret));
	}
	return NULL;
}

/* ---------------- prep thread: the loop ---------------- */

/*
 * The channel's prep thread: it starts the send thread, builds each batch
 * into a free buffer and hands it over, and joins the send thread at the end.
 */
void *gw_channel_send_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_chan_send *tx = &ch->tx;
	struct gw_session *s = ch->s;
	unsigned next = 0;
	struct gw_batch b;
	bool sender;
	int ret;

	gw_log_set_side(s->side);
	ret = -pthread_create(&tx->thread, NULL, send_main, ch);
	sender = !ret;
	if (sender)
		gw_thread_name(tx->thread, "gw-src-ch%u-tx", ch->index);
	if (ret)
		gw_fail(s, GW_PHASE_SETUP, ret, "channel %u: send thread", ch->index);
	while (!ret && queue_pop(ch, &b)) {
		pthread_mutex_lock(&tx->qlock);
		while (tx->slot_busy == GW_PAGES_OUT_BUFS && !gw_failed(s))
			pthread_cond_wait(&tx->work_cond, &tx->qlock);
		pthread_mutex_unlock(&tx->qlock);
		ret = gw_failed(s);
		if (!ret)
			ret = prep_batch(ch, &b, next);
		pthread_mutex_lock(&tx->qlock);
		if (!ret) {
			tx->slot_busy++;
			tx->slot_ready++;
			next = (next + 1) % GW_PAGES_OUT_BUFS;
			pthread_cond_signal(&tx->ready_cond);
		} else {
			batch_done_locked(tx);
		}
		pthread_mutex_unlock(&tx->qlock);
	}
	pthread_mutex_lock(&tx->qlock);
	tx->prep_done = true;
	pthread_cond_broadcast(&tx->ready_cond);
	pthread_mutex_unlock(&tx->qlock);
	if (sender)
		pthread_join(tx->thread, NULL);
	pthread_mutex_lock(&tx->qlock);
	tx->exited = true;
	pthread_cond_broadcast(&tx->space_cond);
	pthread_mutex_unlock(&tx->qlock);
	return NULL;
}

/* ---------------- set-up and tear-down ---------------- */

/* compress=auto: what this channel's batches became (docs/log-events.md). */
static void log_auto_tally(struct gw_channel *ch)
{
	const struct gw_auto_tally *t = &ch->tx.out.tally;
	const struct gw_codec_auto *a = &ch->tx.out.autoc;

	if (ch->tx.out.codec != GW_CODEC_AUTO || !(t->fast_link + t->probe_raw + t->model_raw + t->not_smaller +
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

int gw_chan_send_init(struct gw_channel *ch)
{
	struct gw_chan_send *tx = &ch->tx;
	struct gw_session *s = ch->s;
	int64_t xb = gw_param(s, GW_PARAM_XBZRLE_CACHE_BYTES);

	pthread_mutex_init(&tx->qlock, NULL);
	pthread_cond_init(&tx->space_cond, NULL);
	pthread_cond_init(&tx->work_cond, NULL);
	pthread_cond_init(&tx->ready_cond, NULL);
	tx->pagemap_fd = gw_pagemap_open();	/* none: every fd-backed page goes through pread */
	gw_codec_auto_init(&tx->link_est);
	/* The XBZRLE cache is split over the channels: a page never changes channel. */
	return gw_pages_out_init(&tx->out, (enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS),
				 (int)gw_param(s, GW_PARAM_COMPRESS_LEVEL),
				 xb > 0 ? (size_t)xb / s->nr_channels : 0);
}

void gw_chan_send_release(struct gw_channel *ch)
{
	struct gw_chan_send *tx = &ch->tx;

	log_auto_tally(ch);
	gw_pages_out_release(&tx->out);
	if (tx->pagemap_fd >= 0)
		close(tx->pagemap_fd);
	pthread_mutex_destroy(&tx->qlock);
	pthread_cond_destroy(&tx->space_cond);
	pthread_cond_destroy(&tx->work_cond);
	pthread_cond_destroy(&tx->ready_cond);
}
