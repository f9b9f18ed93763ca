/* SPDX-License-Identifier: MIT */
/*
 * Data channel threads: queue, thread, connection (see channel.h). The
 * page work is done by the pipeline stages of pages_out.c and pages_in.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "channel.h"
#include "session_int.h"

/* ---------------- source ---------------- */

int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b)
{
	int err = 0;

	pthread_mutex_lock(&ch->qlock);
	while (ch->q_len == GW_CHAN_QUEUE_LEN && !(err = gw_failed(ch->s)) && !ch->exited)
		pthread_cond_wait(&ch->qcond, &ch->qlock);
	if (!err && ch->exited)
		err = -EPIPE;
	if (!err) {
		ch->q[(ch->q_head + ch->q_len) % GW_CHAN_QUEUE_LEN] = *b;
		ch->q_len++;
		pthread_cond_broadcast(&ch->qcond);
	}
	pthread_mutex_unlock(&ch->qlock);
	return err;
}

int gw_channel_drain(struct gw_channel *ch)
{
	int err = 0;

	pthread_mutex_lock(&ch->qlock);
	while ((ch->q_len || ch->busy) && !(err = gw_failed(ch->s)) && !ch->exited)
		pthread_cond_wait(&ch->qcond, &ch->qlock);
	pthread_mutex_unlock(&ch->qlock);
	return err ? err : gw_failed(ch->s);
}

void gw_channel_finish(struct gw_channel *ch)
{
	pthread_mutex_lock(&ch->qlock);
	ch->end_requested = true;
	pthread_cond_broadcast(&ch->qcond);
	pthread_mutex_unlock(&ch->qlock);
}

/* Take the next batch, or false when the thread must end (end requested and drained, or failure). */
static bool queue_pop(struct gw_channel *ch, struct gw_batch *b)
{
	bool got = false;

	pthread_mutex_lock(&ch->qlock);
	while (!ch->q_len && !ch->end_requested && !gw_failed(ch->s))
		pthread_cond_wait(&ch->qcond, &ch->qlock);
	if (!gw_failed(ch->s) && ch->q_len) {
		*b = ch->q[ch->q_head];
		ch->q_head = (ch->q_head + 1) % GW_CHAN_QUEUE_LEN;
		ch->q_len--;
		ch->busy = true;
		got = true;
		pthread_cond_broadcast(&ch->qcond);
	}
	pthread_mutex_unlock(&ch->qlock);
	return got;
}

static void queue_done(struct gw_channel *ch, bool exited)
{
	pthread_mutex_lock(&ch->qlock);
	ch->busy = false;
	ch->exited = exited;
	pthread_cond_broadcast(&ch->qcond);
	pthread_mutex_unlock(&ch->qlock);
}

/*
 * What the link costs per wire byte, for compress=auto: the kernel's TCP
 * delivery rate where there is one, else the time this send waited.
 */
static void sample_link(struct gw_channel *ch, size_t data_bytes, uint64_t send_ns)
{
	uint64_t rate_bps;
	bool app_limited;

	if (data_bytes < 65536)
		return;
	if (gw_tcp_delivery_rate(ch->conn.fd, &rate_bps, &app_limited) == 0)
		gw_codec_auto_sample_tcp(&ch->out.autoc, rate_bps, app_limited);
	else
		gw_codec_auto_sample_wait(&ch->out.autoc, (double)send_ns / (double)data_bytes);
}

static void count_sent(struct gw_channel *ch, const struct gw_pages_frame *f)
{
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
}

static int send_batch(struct gw_channel *ch, const struct gw_batch *b)
{
	struct gw_session *s = ch->s;
	const struct gw_ram_block *blk = &s->vm.blocks[b->block];
	struct gw_ram_view ram = { b->block, blk->host, blk->fd, blk->fd_offset_bytes };
	double link = gw_codec_auto_link_cost(&ch->out.autoc, gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS),
					      s->nr_channels);
	struct gw_pages_frame f;
	uint64_t t_send;
	int ret;

	ret = gw_pages_out_build(&ch->out, &ram, b, gw_round(s), link, &f);
	if (ret)
		return gw_fail(s, "send", ret, false, "channel %u: preparing pages: %s",
			       ch->index, strerror(-ret));
	if (!f.iovcnt)
		return 0;
#ifdef GW_FAULT_INJECTION
	if (gw_fault_armed(s, GW_FAULT_SRC_CORRUPT) && f.data_bytes && ch->frames + 1 == gw_fault_arg(s))
		ch->conn.fault_corrupt_next = true;
#endif
	gw_ratelimit(s, GW_WIRE_HDR_BYTES + f.payload_bytes);
	t_send = gw_now_ns();
	ret = gw_conn_send(&ch->conn, GW_MSG_PAGES, f.iov, f.iovcnt, NULL, 0);
	if (ret)
		return gw_fail(s, "send", ret, false, "channel %u: sending pages: %s",
			       ch->index, strerror(-ret));
	sample_link(ch, f.data_bytes, gw_now_ns() - t_send);
	count_sent(ch, &f);
	return 0;
}

void *gw_channel_send_main(void *arg)
{
	struct gw_channel *ch = arg;
	struct gw_session *s = ch->s;
	struct gw_batch b;
	int ret = 0;

	gw_log_set_side(s->side);
	while (!ret && queue_pop(ch, &b)) {
		ret = send_batch(ch, &b);
		queue_done(ch, false);
	}
	if (!ret && !gw_failed(s)) {
		struct gw_msg_chan_end m = { .index = ch->index, .frames = ch->frames, .pages = ch->pages };

		ret = gw_conn_send_msg(&ch->conn, GW_MSG_CHAN_END, &m);
		if (ret)
			gw_fail(s, "final", ret, false, "channel %u: sending end: %s", ch->index, strerror(-ret));
	}
	queue_done(ch, true);
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

/* One PAGES frame: header -> sub-header -> entries -> check -> data -> CRC -> decompress -> apply. */
static int recv_pages(struct gw_channel *ch, const struct gw_frame_hdr *h, uint32_t *crc)
{
	uint8_t phbuf[GW_PAGES_HDR_BYTES];
	struct iovec iov = { phbuf, sizeof(phbuf) };
	struct gw_msg_pages_hdr ph;
	struct gw_pages_plan plan;
	const uint8_t *raw;
	int ret, nr;

	if (h->len < GW_PAGES_HDR_BYTES)
		return -EPROTO;
	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (!ret && gw_msg_pages_hdr_decode(phbuf, h->len, &ph))
		ret = -EPROTO;
	if (ret)
		return ret;
	iov = (struct iovec){ ch->in.entries, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES };
	ret = gw_conn_recv_iov(&ch->conn, &iov, 1, crc);
	if (!ret)
		ret = gw_pages_in_check(&ch->in, &ch->s->layout, &ph, &plan);
	if (!ret)
		ret = recv_data(ch, &plan, crc);
	if (!ret)
		ret = gw_conn_recv_check(h, *crc);
	if (!ret)
		ret = gw_pages_in_decompress(&ch->in, &plan, &raw);
	if (ret)
		return ret;
	nr = gw_pages_in_plan_writes(&ch->in, &plan, plan.direct ? NULL : raw);
	if (nr < 0)
		return nr;
	ret = gw_pages_in_apply(plan.blk, ch->in.writes, nr);
	if (!ret)
		count_received(ch, &plan);
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
	if (m.index != ch->index || m.frames != ch->frames || m.pages != ch->pages)
		return gw_fail(ch->s, "final", -EPROTO, false,
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
	return ret ? ret : gw_fail_from_peer(ch->s, "receive", &m);
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
	switch (h.type) {
	case GW_MSG_PAGES:
		if (gw_fault_armed(s, GW_FAULT_DST_ROUND0) && gw_round(s) == 0 &&
		    ch->conn.bytes_recv >= gw_fault_arg(s))
			gw_fault_die(s, GW_FAULT_DST_ROUND0);
		return recv_pages(ch, &h, &crc);
	case GW_MSG_CHAN_END:
		ret = recv_end(ch, &h, &crc);
		return ret ? ret : 1;
	case GW_MSG_ERROR:
		return recv_error(ch, &h, &crc);
	default:
		return gw_fail(s, "receive", -EPROTO, false, "channel %u: unexpected %s frame",
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
		gw_fail(s, "receive", ret, false, "channel %u: %s", ch->index, gw_conn_err_text(ret, "source"));
	return NULL;
}

/* ---------------- set-up and tear-down ---------------- */

static void channel_release(struct gw_channel *ch, enum gw_role role)
{
	if (role == GW_ROLE_SOURCE)
		gw_pages_out_release(&ch->out);
	else
		gw_pages_in_release(&ch->in);
	gw_conn_close(&ch->conn);
	pthread_mutex_destroy(&ch->qlock);
	pthread_cond_destroy(&ch->qcond);
}

static int channel_setup(struct gw_channel *ch, struct gw_session *s, unsigned index)
{
	int64_t xb = gw_param(s, GW_PARAM_XBZRLE_CACHE_BYTES);

	memset(ch, 0, sizeof(*ch));
	ch->s = s;
	ch->index = index;
	gw_conn_init(&ch->conn, -1);
	pthread_mutex_init(&ch->qlock, NULL);
	pthread_cond_init(&ch->qcond, NULL);
	if (s->role == GW_ROLE_DEST)
		return gw_pages_in_init(&ch->in);
	/* The XBZRLE cache is split over the channels: a page never changes channel. */
	return gw_pages_out_init(&ch->out, (enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS),
				 (int)gw_param(s, GW_PARAM_COMPRESS_LEVEL),
				 xb > 0 ? (size_t)xb / s->nr_channels : 0);
}

int gw_channels_create(struct gw_session *s, unsigned n)
{
	struct gw_channel *chans = calloc(n ? n : 1, sizeof(*chans));

	if (!chans)
		return gw_fail(s, "setup", -ENOMEM, false, "no memory for channels");
	for (unsigned i = 0; i < n; i++) {
		int ret = channel_setup(&chans[i], s, i);

		if (ret) {
			for (unsigned j = 0; j <= i; j++)
				channel_release(&chans[j], s->role);
			free(chans);
			return gw_fail(s, "setup", ret, false, "channel %u setup: %s", i, strerror(-ret));
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
			return gw_fail(s, "setup", ret, false, "channel thread");
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
