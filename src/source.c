/* SPDX-License-Identifier: MIT */
/*
 * Source side of a migration (the migration thread): connect, handshake,
 * precopy rounds, switchover, two-step handover. The source owns the VM
 * until it sends GO: every failure before that resumes the VM (if paused)
 * and reports failed. After GO, a lost RESUMED leaves the VM paused and the
 * status "unknown" (docs/protocol.md, "Handover").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include "channel.h"
#include "converge.h"
#include "mem/digest.h"
#include "mem/populated.h"
#include "session_int.h"


struct src_ctx {
	struct gw_bitmap dirty[GW_MAX_RAM_BLOCKS];	/* pages to send */
	struct gw_converge conv;
	uint64_t ram_pages, dirty_pages, skipped_pages;
	uint64_t cpu_user0_ns, cpu_sys0_ns;
	uint64_t last_publish_ns;	/* live statistics every 100 ms */
	bool switched_over;		/* expected downtime frozen at the decision */
	bool paused;
	struct gw_state state;
};

static uint64_t wire_bytes(struct gw_session *s)
{
	uint64_t n = __atomic_load_n(&s->ctl.bytes_sent, __ATOMIC_RELAXED);

	for (unsigned i = 0; s->chans && i < s->nr_channels; i++)
		n += __atomic_load_n(&s->chans[i].conn.bytes_sent, __ATOMIC_RELAXED);
	return n;
}

/* Publish counters into the stats snapshot (under the lock). */
static void publish(struct gw_session *s, struct src_ctx *c)
{
	uint64_t user_ns, sys_ns, elapsed_ns = gw_now_ns() - s->t_start_ns;
	struct gw_stats *st = &s->stats;

	gw_cpu_times(&user_ns, &sys_ns);
	pthread_mutex_lock(&s->lock);
	st->ram_total_bytes = c->ram_pages * 4096;
	st->transferred_bytes = wire_bytes(s);
	st->remaining_bytes = c->dirty_pages * 4096;
	st->normal_pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED);
	st->duplicate_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
	st->xbzrle_pages = __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	st->normal_bytes = st->normal_pages * 4096;
	st->skipped_pages = c->skipped_pages;
	st->payload_bytes_raw = __atomic_load_n(&s->ctr_raw_bytes, __ATOMIC_RELAXED);
	st->payload_bytes_wire = __atomic_load_n(&s->ctr_wire_payload_bytes, __ATOMIC_RELAXED);
	st->rate_bps = c->conv.rate_bps;
	st->pages_per_second = elapsed_ns ?
		(uint64_t)((st->normal_pages + st->duplicate_pages + st->xbzrle_pages) * 1e9 / (double)elapsed_ns) : 0;
	if (!c->switched_over) {
		st->expected_downtime_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
		if (st->expected_downtime_ns == UINT64_MAX)
			st->expected_downtime_ns = 0;
	}
	st->nr_channels = s->nr_channels;
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++)
		st->channel_bytes[i] = __atomic_load_n(&s->chans[i].conn.bytes_sent, __ATOMIC_RELAXED);
	st->cpu_user_ns = user_ns - c->cpu_user0_ns;
	st->cpu_sys_ns = sys_ns - c->cpu_sys0_ns;
	if (st->status != GW_STATUS_COMPLETED)
		st->total_time_ns = elapsed_ns;
	pthread_mutex_unlock(&s->lock);
}

/* ---- control reader: the only thread receiving on the control connection ---- */
static void *ctl_reader_main(void *arg)
{
	struct gw_session *s = arg;
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	struct gw_frame_hdr h;

	gw_log_set_side(s->side);
	for (;;) {
		ssize_t n = gw_conn_recv(&s->ctl, &h, buf, sizeof(buf), NULL, 0, NULL);

		if (n < 0) {
			if (!__atomic_load_n(&s->ctl_quiet, __ATOMIC_ACQUIRE) && !gw_failed(s))
				gw_fail(s, "control", (int)n, false, "control connection: %s",
					n == -ECONNRESET ? "destination closed it" :
					n == -EBADMSG ? "checksum mismatch" :
					n == -EPROTO ? "malformed frame from the destination" : strerror((int)-n));
			return NULL;
		}
		if (h.type == GW_MSG_ERROR) {
			gw_fail_from_peer_frame(s, "control", buf, (size_t)n);
			return NULL;
		}
		if ((h.type != GW_MSG_READY && h.type != GW_MSG_RESUMED) || (size_t)n > sizeof(s->mbox)) {
			gw_fail(s, "control", -EPROTO, false, "unexpected %s frame from the destination",
				gw_wire_type_name(h.type));
			return NULL;
		}
		pthread_mutex_lock(&s->lock);
		s->mbox_type = h.type;
		memcpy(s->mbox, buf, (size_t)n);
		s->mbox_len = (size_t)n;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (h.type == GW_MSG_RESUMED)
			return NULL;
	}
}

/* Wait for the control reader to deliver @type. 0 or the sticky error. */
static int wait_mbox(struct gw_session *s, uint16_t type, void *out, size_t *len)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);	/* s->cond uses the monotonic clock */
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->lock);
	while (s->mbox_type != type && !s->err.code && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	if (s->mbox_type == type) {
		memcpy(out, s->mbox, s->mbox_len);
		*len = s->mbox_len;
		ret = 0;
	} else {
		ret = s->err.code ? s->err.code : -ETIMEDOUT;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Receive one frame of @type on a connection nobody else reads yet. */
static int recv_expect(struct gw_session *s, struct gw_conn *c, uint16_t type,
		       void *buf, size_t cap, const char *phase)
{
	struct gw_frame_hdr h;
	ssize_t n = gw_conn_recv(c, &h, buf, cap, NULL, 0, NULL);

	if (n < 0)
		return gw_fail(s, phase, (int)n, false, "waiting for %s: %s", gw_wire_type_name(type),
			       n == -ECONNRESET ? "destination closed the connection" :
			       n == -EPROTO ? "malformed frame" : strerror((int)-n));
	if (h.type == GW_MSG_ERROR)
		return gw_fail_from_peer_frame(s, phase, buf, (size_t)n);
	if (h.type != type)
		return gw_fail(s, phase, -EPROTO, false, "expected %s, got %s",
			       gw_wire_type_name(type), gw_wire_type_name(h.type));
	return (int)n;
}

static int connect_conn(struct gw_session *s, const char *phase)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	int fd = s->url.ops->connect(s->url.addr, timeout_ms);

	if (fd < 0)
		return gw_fail(s, phase, fd, false, "cannot connect to %s: %s", s->url_str, strerror(-fd));
	return fd;
}

static int handshake(struct gw_session *s)
{
	struct gw_msg_hello hello = { .min_version = 1, .max_version = GW_WIRE_VERSION };
	uint8_t buf[64 + GW_MAX_RAM_BLOCKS * 56];
	struct gw_wbuf w;
	struct gw_rbuf r;
	int fd, ret, fds[GW_MAX_RAM_BLOCKS];

	fd = connect_conn(s, "setup");
	if (fd < 0)
		return fd;
	gw_conn_set_fd(&s->ctl, fd);
	gw_conn_set_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	if (getrandom(s->mig_id, sizeof(s->mig_id), 0) != sizeof(s->mig_id))
		return gw_fail(s, "setup", -EIO, false, "no random migration id");
	memcpy(hello.id, s->mig_id, sizeof(hello.id));
	hello.page_size_bytes = 4096;
	hello.nr_channels = s->nr_channels;
	hello.codec = (uint32_t)gw_param(s, GW_PARAM_COMPRESS);
	hello.codec_level = (uint32_t)gw_param(s, GW_PARAM_COMPRESS_LEVEL);
	hello.flags = (gw_param(s, GW_PARAM_LOCAL) ? GW_HELLO_LOCAL : 0) |
		      (gw_param(s, GW_PARAM_VERIFY) ? GW_HELLO_VERIFY : 0) |
		      (gw_param(s, GW_PARAM_XBZRLE_CACHE_BYTES) ? GW_HELLO_XBZRLE : 0);
	hello.batch_pages = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	hello.nr_blocks = s->vm.nr_blocks;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		memcpy(hello.blocks[i].name, s->vm.blocks[i].name, GW_RAM_NAME_MAX);
		hello.blocks[i].name[GW_RAM_NAME_MAX - 1] = 0;
		hello.blocks[i].gpa = s->vm.blocks[i].gpa;
		hello.blocks[i].size_bytes = s->vm.blocks[i].size_bytes;
		hello.blocks[i].page_size_bytes = s->vm.blocks[i].page_size_bytes;
		fds[i] = s->vm.blocks[i].fd;
	}
	gw_wbuf_init(&w, buf, sizeof(buf));
	gw_msg_hello_encode(&w, &hello);
	s->rtt_ns = gw_now_ns();
	ret = gw_conn_send_buf(&s->ctl, GW_MSG_HELLO, buf, w.len);
	if (!ret && (hello.flags & GW_HELLO_LOCAL)) {
		gw_wbuf_init(&w, buf, sizeof(buf));
		gw_put_le32(&w, s->vm.nr_blocks);
		for (unsigned i = 0; i < s->vm.nr_blocks; i++)
			gw_put_le32(&w, i);
		struct iovec iov = { buf, w.len };
		ret = gw_conn_send(&s->ctl, GW_MSG_FDS, 0, &iov, 1, fds, (int)s->vm.nr_blocks);
	}
	if (ret)
		return gw_fail(s, "setup", ret, false, "sending HELLO: %s", strerror(-ret));
	ret = recv_expect(s, &s->ctl, GW_MSG_HELLO_ACK, buf, sizeof(buf), "setup");
	if (ret < 0)
		return ret;
	s->rtt_ns = gw_now_ns() - s->rtt_ns;	/* includes the peer's layout setup: an upper bound */
	gw_rbuf_init(&r, buf, (size_t)ret);
	uint32_t version = gw_get_le32(&r), flags = gw_get_le32(&r);
	if (gw_rbuf_done(&r) || version != GW_WIRE_VERSION || flags != hello.flags)
		return gw_fail(s, "setup", -EPROTO, false, "HELLO_ACK invalid (version %u flags 0x%x)",
			       version, flags);
	gw_log(GW_LOG_INFO, "mig", "handshake_done", "version=%u channels=%u codec=%s flags=0x%x",
	       version, s->nr_channels, gw_codec_name((enum gw_codec_id)hello.codec), flags);
	return 0;
}

static int open_channels(struct gw_session *s)
{
	int err = gw_channels_create(s, s->nr_channels);

	if (err)
		return err;
	for (unsigned i = 0; i < s->nr_channels; i++) {
		uint8_t buf[GW_WIRE_ID_BYTES + 4 + 512];
		struct gw_wbuf w;
		int fd = connect_conn(s, "setup"), ret;

		if (fd < 0)
			return fd;
		gw_conn_set_fd(&s->chans[i].conn, fd);
		if (gw_failed(s))	/* cancelled meanwhile: the shutdown missed this fd */
			return gw_failed(s);
		gw_conn_set_timeout(&s->chans[i].conn, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
		gw_wbuf_init(&w, buf, sizeof(buf));
		gw_put_bytes(&w, s->mig_id, GW_WIRE_ID_BYTES);
		gw_put_le32(&w, i);
		ret = gw_conn_send_buf(&s->chans[i].conn, GW_MSG_CHAN_HELLO, buf, w.len);
		if (ret)
			return gw_fail(s, "setup", ret, false, "channel %u hello: %s", i, strerror(-ret));
		ret = recv_expect(s, &s->chans[i].conn, GW_MSG_CHAN_ACK, buf, sizeof(buf), "setup");
		if (ret < 0)
			return ret;
	}
	return gw_channels_start(s, gw_channel_send_main);
}

/* Populated ranges as EXTENTS frames: the destination pre-populates them. */
static int send_extents(struct gw_session *s, unsigned block, const struct gw_bitmap *b)
{
	size_t cap = 8 + 16 * 4096;
	uint8_t *buf = malloc(cap);
	uint64_t pos = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (!ret) {
		struct gw_wbuf w;
		uint32_t count = 0;

		gw_wbuf_init(&w, buf, cap);
		gw_put_le32(&w, block);
		gw_put_le32(&w, 0);	/* count, patched below */
		while (count < 4096 && (pos = gw_bitmap_next_set(b, pos)) < b->nr_bits) {
			uint64_t end = gw_bitmap_next_clear(b, pos);

			gw_put_le64(&w, pos);
			gw_put_le64(&w, end - pos);
			count++;
			pos = end;
		}
		if (!count)
			break;
		buf[4] = (uint8_t)count;
		buf[5] = (uint8_t)(count >> 8);
		ret = gw_conn_send_buf(&s->ctl, GW_MSG_EXTENTS, buf, w.len);
	}
	free(buf);
	return ret;
}

static int send_round(struct gw_session *s, uint64_t dirty_pages)
{
	uint8_t buf[16];
	struct gw_wbuf w;

	gw_wbuf_init(&w, buf, sizeof(buf));
	gw_put_le32(&w, s->round);
	gw_put_le32(&w, 0);
	gw_put_le64(&w, dirty_pages);
	return gw_conn_send_buf(&s->ctl, GW_MSG_ROUND, buf, w.len);
}

/*
 * Hand every dirty page to the channels, region by region (a region of
 * batch_pages pages always goes to the same channel), clearing the bits.
 * Then wait until the channels sent everything.
 */
static int send_dirty(struct gw_session *s, struct src_ctx *c)
{
	uint32_t batch_pages = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	int ret;

	for (unsigned bi = 0; bi < s->vm.nr_blocks; bi++) {
		struct gw_bitmap *bm = &c->dirty[bi];
		uint64_t pos = 0;

		while ((pos = gw_bitmap_next_set(bm, pos)) < bm->nr_bits) {
			uint64_t region = pos / batch_pages;
			struct gw_batch b = { .block = bi, .first_page = region * batch_pages };
			uint64_t end = b.first_page + batch_pages;

			if (end > bm->nr_bits)
				end = bm->nr_bits;
			b.nr_pages = (uint32_t)(end - b.first_page);
			for (uint64_t p = pos; p < end; p = gw_bitmap_next_set(bm, p + 1)) {
				b.mask[(p - b.first_page) / 64] |= 1ULL << ((p - b.first_page) % 64);
				if (p + 1 >= end)
					break;
			}
			gw_bitmap_clear_range(bm, b.first_page, b.nr_pages);
			if (s->dirty.ops && s->dirty.ops->clear) {
				ret = s->dirty.ops->clear(&s->dirty, bi, b.first_page, b.nr_pages);
				if (ret)
					return gw_fail(s, "round", ret, false, "dirty clear: %s", strerror(-ret));
			}
			ret = gw_channel_push(&s->chans[(region + bi) % s->nr_channels], &b);
			if (ret)
				return ret;
			pos = end;
			if (gw_now_ns() - c->last_publish_ns > 100000000ull) {
				c->last_publish_ns = gw_now_ns();
				publish(s, c);
			}
		}
	}
	for (unsigned i = 0; i < s->nr_channels; i++) {
		ret = gw_channel_drain(&s->chans[i]);
		if (ret)
			return ret;
	}
	return gw_failed(s);
}

static int harvest(struct gw_session *s, struct src_ctx *c)
{
	ssize_t n = s->dirty.ops->collect(&s->dirty, c->dirty);

	if (n < 0)
		return gw_fail(s, "round", (int)n, false, "dirty harvest (%s): %s",
			       s->dirty.ops->name, strerror((int)-n));
	c->dirty_pages = 0;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		c->dirty_pages += gw_bitmap_weight(&c->dirty[i]);
	pthread_mutex_lock(&s->lock);
	s->stats.dirty_sync_count++;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void record_round(struct gw_session *s, struct src_ctx *c, uint64_t dirty_at_start,
			 uint64_t bytes, uint64_t ns, uint64_t pages, uint64_t dirty_rate,
			 uint64_t zero_pages)
{
	struct gw_round_stats *r;

	pthread_mutex_lock(&s->lock);
	s->stats.rounds = s->round + 1;
	s->stats.dirty_pages_rate = dirty_rate;
	if (s->round < GW_STATS_MAX_ROUNDS) {
		r = &s->stats.round[s->round];
		r->round = s->round;
		r->duration_ns = ns;
		r->dirty_pages = dirty_at_start;
		r->sent_bytes = bytes;
		r->normal_pages = pages - zero_pages;
		r->zero_pages = zero_pages;
		r->skipped_pages = s->round == 0 ? c->skipped_pages : 0;
		r->rate_bps = ns ? (uint64_t)((__uint128_t)bytes * 1000000000ull / ns) : 0;
		r->expected_downtime_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
		if (r->expected_downtime_ns == UINT64_MAX)
			r->expected_downtime_ns = 0;
		s->stats.nr_rounds_kept = s->round + 1;
	}
	pthread_mutex_unlock(&s->lock);
}

static int precopy(struct gw_session *s, struct src_ctx *c)
{
	uint64_t limit_us, t_precopy_ns = gw_now_ns();
	int ret;

	for (;;) {
		uint64_t t0 = gw_now_ns(), b0 = wire_bytes(s), dirty_at_start = c->dirty_pages;
		uint64_t z0 = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
		uint64_t p0 = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
			      __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED) +
			      __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
		uint64_t ns, bytes, pages, timeout_ms;
		int64_t policy;

		gw_log(GW_LOG_INFO, "mig", "round_start", "round=%u dirty_pages=%llu",
		       s->round, (unsigned long long)c->dirty_pages);
		ret = send_round(s, c->dirty_pages);
		if (ret)
			return gw_fail(s, "round", ret, false, "sending ROUND: %s", strerror(-ret));
		ret = send_dirty(s, c);
		if (ret)
			return ret;
		ns = gw_now_ns() - t0;
		bytes = wire_bytes(s) - b0;
		pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
			__atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED) +
			__atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED) - p0;
		gw_converge_round(&c->conv, bytes, ns, pages);
		ret = harvest(s, c);
		if (ret)
			return ret;
		uint64_t dirty_rate = ns ? (uint64_t)((double)c->dirty_pages * 1e9 / (double)ns) : 0;
		record_round(s, c, dirty_at_start, bytes, ns, pages, dirty_rate,
			     __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED) - z0);
		publish(s, c);
		limit_us = (uint64_t)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US);
		uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
		gw_log(GW_LOG_INFO, "mig", "round_end",
		       "round=%u sent_bytes=%llu pages=%llu duration_us=%llu rate_bps=%llu dirty_pages=%llu dirty_rate_pps=%llu expected_downtime_us=%lld",
		       s->round, (unsigned long long)bytes, (unsigned long long)pages,
		       (unsigned long long)(ns / 1000), (unsigned long long)c->conv.rate_bps,
		       (unsigned long long)c->dirty_pages, (unsigned long long)dirty_rate,
		       exp_ns == UINT64_MAX ? -1ll : (long long)(exp_ns / 1000));
		__atomic_store_n(&s->round, s->round + 1, __ATOMIC_RELAXED);
		if (gw_converge_fits(&c->conv, c->dirty_pages, limit_us))
			return 0;
		timeout_ms = (uint64_t)gw_param(s, GW_PARAM_CONVERGE_TIMEOUT_MS);
		policy = gw_param(s, GW_PARAM_CONVERGE_POLICY);
		if (timeout_ms && policy != GW_CONVERGE_KEEP_GOING &&
		    gw_now_ns() - t_precopy_ns > timeout_ms * 1000000ull) {
			if (policy == GW_CONVERGE_FORCE) {
				gw_log(GW_LOG_WARN, "mig", "converge_forced",
				       "round=%u expected_downtime_us=%llu limit_us=%llu",
				       s->round, (unsigned long long)(exp_ns / 1000),
				       (unsigned long long)limit_us);
				return 0;
			}
			return gw_fail(s, "round", -ETIMEDOUT, false,
				       "did not converge within %llu ms (expected downtime %llu ms > limit %llu ms)",
				       (unsigned long long)timeout_ms, (unsigned long long)(exp_ns / 1000000),
				       (unsigned long long)(limit_us / 1000));
		}
	}
}

static int setup_tracking(struct gw_session *s, struct src_ctx *c)
{
	enum gw_dirty_backend_id want = (enum gw_dirty_backend_id)gw_param(s, GW_PARAM_DIRTY_BACKEND);
	int ret;

	ret = gw_dirty_select(&s->dirty, &s->vm, want);
	if (ret)
		return gw_fail(s, "setup", ret, false, "no usable dirty-tracking backend%s",
			       want ? " of the kind asked for" : "");
	ret = s->dirty.ops->start(&s->dirty);
	if (ret)
		return gw_fail(s, "setup", ret, false, "dirty tracking %s: %s",
			       s->dirty.ops->name, strerror(-ret));
	s->dirty_started = true;
	pthread_mutex_lock(&s->lock);
	snprintf(s->stats.dirty_backend, sizeof(s->stats.dirty_backend), "%s", s->dirty.ops->name);
	pthread_mutex_unlock(&s->lock);
	/* Round 0: everything populated. Started tracking first, so writes
	 * racing with this scan are caught by round 1. */
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		const char *method = "all";
		ssize_t n = gw_populated_scan(&s->vm.blocks[i], &c->dirty[i], &method);

		if (n < 0) {
			gw_bitmap_set_all(&c->dirty[i]);
			n = (ssize_t)c->dirty[i].nr_bits;
		}
		c->dirty_pages += (uint64_t)n;
		c->skipped_pages += c->dirty[i].nr_bits - (uint64_t)n;
		gw_log(GW_LOG_INFO, "mig", "populated_scan", "block=%s method=%s populated_pages=%lld skipped_pages=%llu",
		       s->vm.blocks[i].name, method, (long long)n,
		       (unsigned long long)(c->dirty[i].nr_bits - (uint64_t)n));
		ret = send_extents(s, i, &c->dirty[i]);
		if (ret)
			return gw_fail(s, "setup", ret, false, "sending EXTENTS: %s", strerror(-ret));
	}
	return 0;
}

/* Switchover: everything between pause and GO. */
static int final_phase(struct gw_session *s, struct src_ctx *c, bool local)
{
	struct gw_downtime_breakdown *bd = &s->stats.downtime;
	uint64_t t, verify_ns = 0;
	struct gw_digest dg = { 0, 0 };
	uint8_t buf[64];
	struct gw_wbuf w;
	size_t len;
	int ret;

	publish(s, c);
	c->switched_over = true;
	gw_set_status(s, GW_STATUS_DEVICE);
	s->t_pause_ns = gw_now_ns();
	ret = s->ops->pause(s->opaque);
	if (ret)
		return gw_fail(s, "final", ret, false, "pausing the vCPUs: %s", strerror(-ret));
	c->paused = true;
	t = gw_now_ns();
	bd->pause_ns = t - s->t_pause_ns;
	gw_log(GW_LOG_INFO, "mig", "vm_pause", "round=%u pause_us=%llu", s->round,
	       (unsigned long long)(bd->pause_ns / 1000));

	if (!local) {
		ret = harvest(s, c);
		if (ret)
			return ret;
		bd->final_harvest_ns = gw_now_ns() - t;
		t = gw_now_ns();
		gw_log(GW_LOG_INFO, "mig", "final_round", "round=%u dirty_pages=%llu",
		       s->round, (unsigned long long)c->dirty_pages);
		ret = send_round(s, c->dirty_pages);
		if (ret)
			return gw_fail(s, "final", ret, false, "sending ROUND: %s", strerror(-ret));
		ret = send_dirty(s, c);
		if (ret)
			return ret;
		for (unsigned i = 0; i < s->nr_channels; i++)
			gw_channel_finish(&s->chans[i]);
		for (unsigned i = 0; i < s->nr_channels; i++) {
			pthread_join(s->chans[i].thread, NULL);
			s->chans[i].thread_started = false;
		}
		ret = gw_failed(s);
		if (ret)
			return ret;
		bd->final_send_ns = gw_now_ns() - t;
		gw_log(GW_LOG_INFO, "mig", "final_sent", "pages=%llu final_send_us=%llu",
		       (unsigned long long)c->dirty_pages, (unsigned long long)(bd->final_send_ns / 1000));
		c->dirty_pages = 0;
	}

	t = gw_now_ns();
	gw_state_init(&c->state);
	if (s->ops->save_state) {
		ret = s->ops->save_state(s->opaque, &c->state);
		if (ret)
			return gw_fail(s, "final", ret, false, "saving device state: %s", strerror(-ret));
	}
	bd->state_save_ns = gw_now_ns() - t;
	t = gw_now_ns();
	{
		size_t n = gw_msg_state_size(&c->state);
		uint8_t *sb = malloc(n);
		struct gw_wbuf sw;

		if (!sb)
			return gw_fail(s, "final", -ENOMEM, false, "state buffer");
		gw_wbuf_init(&sw, sb, n);
		gw_msg_state_encode(&sw, &c->state);
		ret = gw_conn_send_buf(&s->ctl, GW_MSG_STATE, sb, sw.len);
		free(sb);
		if (ret)
			return gw_fail(s, "final", ret, false, "sending state: %s", strerror(-ret));
	}
	bd->state_send_ns = gw_now_ns() - t;
	gw_log(GW_LOG_INFO, "mig", "state_sent", "sections=%u bytes=%zu save_us=%llu send_us=%llu",
	       gw_state_count(&c->state), c->state.total_bytes,
	       (unsigned long long)(bd->state_save_ns / 1000), (unsigned long long)(bd->state_send_ns / 1000));

	if (gw_param(s, GW_PARAM_VERIFY)) {
		t = gw_now_ns();
		ret = gw_ram_digest(&s->vm, 2, &dg);
		if (ret)
			return gw_fail(s, "final", ret, false, "RAM digest: %s", strerror(-ret));
		verify_ns = gw_now_ns() - t;
		gw_log(GW_LOG_INFO, "mig", "digest", "xxh3=%016llx%016llx verify_us=%llu",
		       (unsigned long long)dg.hi, (unsigned long long)dg.lo,
		       (unsigned long long)(verify_ns / 1000));
	}
	t = gw_now_ns();
	gw_wbuf_init(&w, buf, sizeof(buf));
	gw_put_le32(&w, s->nr_channels);
	gw_put_le32(&w, gw_param(s, GW_PARAM_VERIFY) ? GW_COMPLETE_DIGEST : 0);
	gw_put_le64(&w, dg.lo);
	gw_put_le64(&w, dg.hi);
	uint64_t total_pages = 0;
	for (unsigned i = 0; i < s->nr_channels; i++)
		total_pages += s->chans[i].pages;
	gw_put_le64(&w, total_pages);
	gw_put_le64(&w, verify_ns);
	ret = gw_conn_send_buf(&s->ctl, GW_MSG_COMPLETE, buf, w.len);
	if (ret)
		return gw_fail(s, "final", ret, false, "sending COMPLETE: %s", strerror(-ret));

	gw_set_status(s, GW_STATUS_HANDOVER);
	ret = wait_mbox(s, GW_MSG_READY, buf, &len);
	if (ret)
		return ret == -ETIMEDOUT ? gw_fail(s, "handover", ret, false,
			"destination did not answer ready within the I/O timeout") : ret;
	{
		struct gw_rbuf r;

		gw_rbuf_init(&r, buf, len);
		uint32_t flags = gw_get_le32(&r);
		gw_get_le32(&r);
		uint64_t load_ns = gw_get_le64(&r), dst_verify_ns = gw_get_le64(&r);

		if (gw_rbuf_done(&r))
			return gw_fail(s, "handover", -EPROTO, false, "malformed READY");
		bd->dst_load_ns = load_ns;
		bd->verify_ns = verify_ns + dst_verify_ns;
		pthread_mutex_lock(&s->lock);
		s->stats.verified = (flags & GW_READY_VERIFIED) != 0;
		pthread_mutex_unlock(&s->lock);
		gw_log(GW_LOG_INFO, "mig", "ready", "verified=%d dst_load_us=%llu dst_verify_us=%llu",
		       !!(flags & GW_READY_VERIFIED), (unsigned long long)(load_ns / 1000),
		       (unsigned long long)(dst_verify_ns / 1000));
	}
	return 0;
}

/* GO, then wait for RESUMED. Past GO the source never resumes by itself. */
static int handover(struct gw_session *s)
{
	struct gw_downtime_breakdown *bd = &s->stats.downtime;
	uint64_t t_go, rtt_ns, go_to_resume_ns = 0;
	uint8_t buf[64];
	size_t len;
	int ret;

	if (gw_fault_armed(s, GW_FAULT_SRC_DELAY_GO)) {
		uint64_t ms = (uint64_t)gw_param(s, GW_PARAM_FAULT_ARG);
		struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };

		gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=delay_go ms=%llu", (unsigned long long)ms);
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&s->lock);
	if (s->err.code) {
		ret = s->err.code;
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	s->go_sent = true;	/* from here cancel is refused */
	pthread_mutex_unlock(&s->lock);
	t_go = gw_now_ns();
	ret = gw_conn_send_buf(&s->ctl, GW_MSG_GO, NULL, 0);
	gw_log(GW_LOG_INFO, "mig", "go_sent", "ok=%d", ret == 0);
	if (!ret)
		ret = wait_mbox(s, GW_MSG_RESUMED, buf, &len);
	if (ret && s->err.from_peer) {
		/*
		 * The destination answered GO with ERROR: it reports that it did
		 * not resume (dest.c sends nothing but RESUMED once the VM runs
		 * there), so the VM is still ours to run.
		 */
		gw_log(GW_LOG_WARN, "mig", "go_refused", "reason=\"%s\"", s->err.msg);
		return ret;
	}
	if (ret) {
		pthread_mutex_lock(&s->lock);
		if (!s->err.code) {
			s->err.code = ret;
			snprintf(s->err.phase, sizeof(s->err.phase), "handover");
			snprintf(s->err.msg, sizeof(s->err.msg),
				 "GO sent but RESUMED not received (%s): the VM may run on the destination; "
				 "the source stays paused: ask the destination", strerror(-ret));
		}
		pthread_mutex_unlock(&s->lock);
		gw_log(GW_LOG_ERROR, "mig", "outcome_unknown",
		       "reason=\"no RESUMED after GO: source stays paused, ask the destination\"");
		gw_set_status(s, GW_STATUS_UNKNOWN);
		return 1;
	}
	rtt_ns = gw_now_ns() - t_go;
	if (len == 8)
		memcpy(&go_to_resume_ns, buf, 8);
	go_to_resume_ns = le64toh(go_to_resume_ns);
	if (go_to_resume_ns > rtt_ns)
		go_to_resume_ns = rtt_ns;
	/* One way = (round trip - destination's own time) / 2. */
	bd->handover_ns = (rtt_ns - go_to_resume_ns) / 2 + go_to_resume_ns;
	uint64_t end_ns = t_go + bd->handover_ns;
	uint64_t pause_total = end_ns - s->t_pause_ns;
	pthread_mutex_lock(&s->lock);
	s->stats.downtime_ns = pause_total > bd->verify_ns ? pause_total - bd->verify_ns : 0;
	s->stats.total_time_ns = end_ns - s->t_start_ns;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void teardown(struct gw_session *s, struct src_ctx *c)
{
	struct gw_channel *chans;
	unsigned n;

	__atomic_store_n(&s->ctl_quiet, true, __ATOMIC_RELEASE);
	gw_session_shutdown_conns(s);
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++)
		if (s->chans[i].thread_started)
			pthread_join(s->chans[i].thread, NULL);
	if (s->ctl_reader_started)
		pthread_join(s->ctl_reader, NULL);
	s->ctl_reader_started = false;
	/* Detached first: a concurrent cancel must not walk freed channels. */
	chans = gw_session_detach_channels(s, &n);
	for (unsigned i = 0; i < n; i++)
		gw_channel_release(&chans[i]);
	free(chans);
	gw_conn_close(&s->ctl);
	if (s->dirty_started)
		s->dirty.ops->stop(&s->dirty);
	s->dirty_started = false;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		gw_bitmap_free(&c->dirty[i]);
	gw_state_release(&c->state);
}

void *gw_source_main(void *arg)
{
	struct gw_session *s = arg;
	struct src_ctx *c = calloc(1, sizeof(*c));
	bool local = gw_param(s, GW_PARAM_LOCAL) != 0;
	struct gw_stats *st = &s->stats;
	enum gw_status final_status;
	int ret = 0;

	gw_log_set_side(s->side);
	s->t_start_ns = gw_now_ns();
	s->round = 0;
	s->nr_channels = local ? 0 : (unsigned)gw_param(s, GW_PARAM_CHANNELS);
	__atomic_store_n(&s->ctl_quiet, false, __ATOMIC_RELEASE);
	s->ctr_normal_pages = s->ctr_zero_pages = s->ctr_xbzrle_pages = 0;
	s->ctr_raw_bytes = s->ctr_wire_payload_bytes = 0;
	s->mbox_type = 0;
	if (!c) {
		ret = gw_fail(s, "setup", -ENOMEM, false, "no memory");
		goto out_nomem;
	}
	gw_state_init(&c->state);
	gw_cpu_times(&c->cpu_user0_ns, &c->cpu_sys0_ns);
	gw_converge_init(&c->conv, 4096);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		c->ram_pages += s->vm.blocks[i].size_bytes / 4096;
		if (gw_bitmap_init(&c->dirty[i], s->vm.blocks[i].size_bytes / 4096)) {
			ret = gw_fail(s, "setup", -ENOMEM, false, "no memory for dirty bitmaps");
			goto out;
		}
	}
	pthread_mutex_lock(&s->lock);
	snprintf(st->codec, sizeof(st->codec), "%s",
		 gw_codec_name((enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS)));
	st->ram_total_bytes = c->ram_pages * 4096;
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_INFO, "mig", "mig_start",
	       "url=%s ram_bytes=%llu channels=%u compress=%s local=%d downtime_limit_us=%lld max_bandwidth_bps=%lld",
	       s->url_str, (unsigned long long)(c->ram_pages * 4096), s->nr_channels,
	       st->codec, local, (long long)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US),
	       (long long)gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS));

	ret = handshake(s);
	if (ret)
		goto out;
	/* Fixed part of the downtime: state, COMPLETE/READY/GO/RESUMED round trips. */
	c->conv.fixed_cost_ns = 1000000 + 3 * (s->rtt_ns < 100000000 ? s->rtt_ns : 100000000);
	/*
	 * The destination is silent on control during precopy: the reader
	 * waits without a timeout; a dead peer shows as a send timeout or a
	 * TCP error, and handover waits are bounded by wait_mbox().
	 */
	gw_conn_set_recv_timeout(&s->ctl, 0);
	if (pthread_create(&s->ctl_reader, NULL, ctl_reader_main, s) == 0)
		s->ctl_reader_started = true;
	else {
		ret = gw_fail(s, "setup", -EAGAIN, false, "control reader thread");
		goto out;
	}
	if (!local) {
		ret = open_channels(s);
		if (!ret)
			ret = setup_tracking(s, c);
		if (ret)
			goto out;
	}
	pthread_mutex_lock(&s->lock);
	st->setup_time_ns = gw_now_ns() - s->t_start_ns;
	pthread_mutex_unlock(&s->lock);
	gw_set_status(s, GW_STATUS_ACTIVE);
	if (!local) {
		ret = precopy(s, c);
		if (ret)
			goto out;
	}
	ret = final_phase(s, c, local);
	if (ret)
		goto out;
	ret = handover(s);
out:
	if (ret < 0 && c && c->paused) {
		/* Before GO the VM is ours: run it again. */
		int r2 = s->ops->resume(s->opaque);

		gw_log(r2 ? GW_LOG_ERROR : GW_LOG_INFO, "mig", "vm_resume",
		       "where=source reason=migration_failed ok=%d", r2 == 0);
		c->paused = false;
	}
	if (c)
		publish(s, c);
	if (c)
		teardown(s, c);
out_nomem:
	if (ret == 1)
		final_status = GW_STATUS_UNKNOWN;
	else if (ret)
		final_status = __atomic_load_n(&s->cancelled, __ATOMIC_ACQUIRE) ? GW_STATUS_CANCELLED : GW_STATUS_FAILED;
	else
		final_status = GW_STATUS_COMPLETED;
	if (final_status == GW_STATUS_COMPLETED) {
		struct gw_downtime_breakdown *bd = &st->downtime;

		gw_log(GW_LOG_INFO, "mig", "mig_done",
		       "status=completed total_ms=%.3f downtime_ms=%.3f setup_ms=%.3f transferred_bytes=%llu rounds=%u "
		       "pause_us=%llu final_harvest_us=%llu final_send_us=%llu state_save_us=%llu state_send_us=%llu "
		       "dst_load_us=%llu handover_us=%llu verify_us=%llu verified=%d",
		       st->total_time_ns / 1e6, st->downtime_ns / 1e6, st->setup_time_ns / 1e6,
		       (unsigned long long)st->transferred_bytes, st->rounds,
		       (unsigned long long)(bd->pause_ns / 1000), (unsigned long long)(bd->final_harvest_ns / 1000),
		       (unsigned long long)(bd->final_send_ns / 1000), (unsigned long long)(bd->state_save_ns / 1000),
		       (unsigned long long)(bd->state_send_ns / 1000), (unsigned long long)(bd->dst_load_ns / 1000),
		       (unsigned long long)(bd->handover_ns / 1000), (unsigned long long)(bd->verify_ns / 1000),
		       st->verified);
	} else if (final_status != GW_STATUS_UNKNOWN) {
		gw_log(GW_LOG_ERROR, "mig", "mig_failed", "status=%s phase=%s reason=\"%s\" vm=running_on_source",
		       gw_status_name(final_status), s->err.phase, s->err.msg);
	}
	pthread_mutex_lock(&s->lock);
	s->status = final_status;
	st->status = final_status;
	s->running = false;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	free(c);
	return NULL;
}
