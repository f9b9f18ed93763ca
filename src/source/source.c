/* SPDX-License-Identifier: MIT */
/*
 * The source's migration thread: set-up, the state machine, the end.
 *
 *   setup       connect, HELLO / HELLO_ACK, [FDS], data channels, dirty
 *               tracking, EXTENTS
 *   precopy     rounds until the expected downtime fits (source/precopy.c)
 *   switchover  pause ... READY (source/switchover.c)
 *   handover    GO, RESUMED (handover.c)
 *   end         before GO: resume the VM if paused; tear down
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "pipe/channel.h"
#include "mem/populated.h"
#include "source/postcopy.h"
#include "net/tls.h"
#include "source/source.h"

uint64_t src_wire_bytes(struct gw_session *s)
{
	uint64_t n = __atomic_load_n(&s->ctl.bytes_sent, __ATOMIC_RELAXED);

	for (unsigned i = 0; s->chans && i < s->nr_channels; i++)
		n += __atomic_load_n(&s->chans[i].conn.bytes_sent, __ATOMIC_RELAXED);
	return n;
}

void src_publish(struct gw_session *s, struct src_ctx *c)
{
	uint64_t user_ns, sys_ns, now_ns = gw_now_ns(), wire = src_wire_bytes(s);
	uint64_t normal = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED);
	uint64_t zero = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
	uint64_t xbzrle = __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
	struct gw_stats *st = &s->stats;
	uint64_t pending = 0;

	gw_cpu_times(&user_ns, &sys_ns);
	/* Pages still to queue, falling as the round goes (c->dirty_pages is the round's start). */
	pthread_mutex_lock(&s->src->hint_lock);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		pending += gw_bitmap_weight(&c->dirty[i]);
	pthread_mutex_unlock(&s->src->hint_lock);
	pthread_mutex_lock(&s->lock);
	st->ram_total_bytes = c->ram_pages * GW_PAGE_BYTES;
	st->transferred_bytes = wire;
	st->remaining_bytes = pending * GW_PAGE_BYTES;
	st->normal_pages = normal;
	st->duplicate_pages = zero;
	st->xbzrle_pages = xbzrle;
	st->normal_bytes = normal * GW_PAGE_BYTES;
	st->skipped_pages = c->skipped_pages;
	st->payload_bytes_raw = __atomic_load_n(&s->ctr_raw_bytes, __ATOMIC_RELAXED);
	st->payload_bytes_wire = __atomic_load_n(&s->ctr_wire_payload_bytes, __ATOMIC_RELAXED);
	st->rate_bps = c->conv.rate_bps;
	st->free_hinted_pages = __atomic_load_n(&s->src->hinted_pages, __ATOMIC_RELAXED);
	st->free_discarded_pages = c->discarded_pages;
	st->rtt_ns = s->src->ping_rtt_ns;
	st->throttle_pct = c->thr.pct;
	st->dirty_limit_bps = c->thr.dirty_limit_bps;
	st->converging = gw_converging(c->verdict);
	st->converge_state = c->verdict;
	st->converge_eta_ns = c->verdict_eta_ns;
	snprintf(st->converge_hint, sizeof(st->converge_hint), "%s", c->hint);
	st->pages_per_second = now_ns > s->t_start_ns ?
		(uint64_t)((normal + zero + xbzrle) * 1e9 / (double)(now_ns - s->t_start_ns)) : 0;
	if (!c->switched_over) {
		st->expected_downtime_ns = exp_ns == UINT64_MAX ? 0 : exp_ns;
		st->expected_downtime_unknown = exp_ns == UINT64_MAX;
	}
	st->nr_channels = s->nr_channels;
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++) {
		s->stats_chan_bytes[i] = __atomic_load_n(&s->chans[i].conn.bytes_sent, __ATOMIC_RELAXED);
		for (unsigned k = 0; k < GW_CODEC__COUNT; k++)
			s->stats_chan_codec_bytes[i][k] =
				__atomic_load_n(&s->chans[i].codec_bytes[k], __ATOMIC_RELAXED);
	}
	st->cpu_user_ns = user_ns - c->cpu_user0_ns;
	st->cpu_sys_ns = sys_ns - c->cpu_sys0_ns;
	if (!c->handed_over)
		st->total_time_ns = now_ns - s->t_start_ns;
	pthread_mutex_unlock(&s->lock);
}

/* ---- set-up ---- */

/*
 * The first answer, to HELLO, was not a godwit destination's of this wire
 * version: say what the peer at the URL did, in the user's terms, and what
 * to check. @why: the connection's reason for a refused header, escaped.
 */
static int hello_ack_fail(struct gw_session *s, int got, const char *why)
{
	static const char check[] = "check the URL (a destination prints the one it listens on, "
				    "'incoming URL')";
	const char *url = s->url_str;

	if (got == -ETIMEDOUT)
		return gw_fail(s, GW_PHASE_SETUP, got, "the peer at %s accepted the connection but did not "
			       "answer within %lld ms (io-timeout-ms): it is not a godwit destination, or it "
			       "is stuck; %s", url, (long long)gw_param(s, GW_PARAM_IO_TIMEOUT_MS), check);
	if (got == -ECONNRESET)
		return gw_fail(s, GW_PHASE_SETUP, got, "the peer at %s closed the connection without "
			       "answering: it is not a godwit destination, or it refused this source "
			       "without saying why (see its log); %s", url, check);
	if (got == -EPROTO || got == -EBADMSG)
		return gw_fail(s, GW_PHASE_SETUP, -EPROTO, "the peer at %s is not a godwit destination: "
			       "its answer is not a godwit frame (an HTTP or other server?); %s", url, check);
	if (got == -EPROTONOSUPPORT && why[0])	/* names both wire versions and releases */
		return gw_fail(s, GW_PHASE_SETUP, got, "the destination at %s answered in %s", url, why);
	if (got < 0)
		return gw_fail(s, GW_PHASE_SETUP, got, "waiting for the destination at %s to answer: %s",
			       url, strerror(-got));
	return gw_fail(s, GW_PHASE_SETUP, -EPROTO, "the peer at %s is not a godwit destination: it "
		       "answered with %s%s, not HELLO_ACK; %s", url, gw_frame_type_name((uint16_t)got),
		       got == GW_MSG_HELLO ? " (it echoes what it receives)" : "", check);
}

/* Receive one message of @type on a connection nobody else reads yet. */
static int recv_expect(struct gw_session *s, struct gw_conn *c, uint16_t type, union gw_msg *m,
		       enum gw_phase phase)
{
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	char why[GW_CONN_WHY_BYTES] = "", esc[GW_LOG_STR_MAX(GW_CONN_WHY_BYTES)];
	int got = gw_conn_recv_msg(c, m, buf, sizeof(buf), why, sizeof(why));

	gw_log_str(esc, sizeof(esc), why);	/* a TLS refusal may name the destination's certificate */
	if (got < 0 && got == -EACCES && why[0])	/* a TLS refusal: the words say it all */
		return gw_fail(s, phase, got, "waiting for %s: %s", gw_frame_type_name(type), esc);
	if (type == GW_MSG_HELLO_ACK && got != GW_MSG_ERROR && got != type)
		return hello_ack_fail(s, got, esc);
	if (got < 0)
		return gw_fail(s, phase, got, "waiting for %s: %s%s%s", gw_frame_type_name(type),
			       gw_conn_err_text(got, "destination"), why[0] ? ": " : "", esc);
	if (got == GW_MSG_ERROR)
		return gw_fail_from_peer(s, phase, &m->error);
	if (got != type)
		return gw_fail(s, phase, -EPROTO, "the destination broke the protocol: it sent %s where %s "
			       "was due", gw_frame_type_name((uint16_t)got), gw_frame_type_name(type));
	return 0;
}

/* The TLS session of the control connection, in the log and the statistics. */
static void note_tls(struct gw_session *s, struct gw_conn *c, uint64_t t0_ns)
{
	struct gw_tls_info ti;
	char peer[GW_LOG_STR_MAX(GW_TLS_PEER_MAX)];	/* the destination's CN: its bytes */

	gw_tls_info(c->tls, &ti);
	gw_log_str(peer, sizeof(peer), gw_tls_peer(c->tls));
	gw_log(c == &s->ctl ? GW_LOG_INFO : GW_LOG_DEBUG, "mig", "tls_handshake",
	       "conn=%s peer=\"%s\" mode=%s version=%s cipher=%s ktls_tx=%d ktls_rx=%d records=%s us=%llu",
	       c == &s->ctl ? "control" : "data", peer, ti.mode, ti.version, ti.cipher,
	       ti.ktls_tx, ti.ktls_rx, ti.records, (unsigned long long)((gw_now_ns() - t0_ns) / 1000));
	if (c != &s->ctl)
		return;
	pthread_mutex_lock(&s->lock);
	snprintf(s->stats.tls, sizeof(s->stats.tls), "%s", ti.mode);
	gw_log_str(s->stats.tls_peer, sizeof(s->stats.tls_peer), gw_tls_peer(c->tls));
	snprintf(s->stats.tls_cipher, sizeof(s->stats.tls_cipher), "%s", ti.cipher);
	s->stats.ktls_tx = ti.ktls_tx;
	s->stats.ktls_rx = ti.ktls_rx;
	snprintf(s->stats.tls_records, sizeof(s->stats.tls_records), "%s", ti.records);
	pthread_mutex_unlock(&s->lock);
}

/* Why a connect failed, in words: a name that does not resolve, no socket at a path. */
static const char *connect_err_text(const struct gw_session *s, int err)
{
	if (err == -ENOENT)
		return s->url.ops->tls_host_in_url ? "the host name does not resolve" : "no socket at that path";
	if (err == -ECONNREFUSED)
		return "connection refused (nothing listens there)";
	return strerror(-err);
}

static int connect_conn(struct gw_session *s, struct gw_conn *c)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS), t0 = gw_now_ns();
	int fd = s->url.ops->connect(s->url.addr, timeout_ms), ret;
	char why[400], host[256], esc[GW_LOG_STR_MAX(400)];

	if (fd < 0)
		return gw_fail(s, GW_PHASE_SETUP, fd, "cannot connect to %s: %s", s->url_str, connect_err_text(s, fd));
	gw_conn_set_fd(c, fd, s->url.ops->sock);
	if (gw_failed(s))	/* cancelled meanwhile: the shutdown missed this fd */
		return gw_failed(s);
	gw_conn_set_timeout(c, timeout_ms);
	if (!s->tls_ctx)
		return 0;
	/* Refused before any RAM is read: the handshake comes before HELLO. */
	gw_url_host(&s->url, host, sizeof(host));
	ret = gw_conn_start_tls(c, s->tls_ctx, host, timeout_ms, why, sizeof(why));
	if (ret)
		return gw_fail(s, GW_PHASE_SETUP, ret, "TLS with %s: %s", s->url_str,
			       gw_log_str(esc, sizeof(esc), why));	/* may name the peer's certificate */
	note_tls(s, c, t0);
	return 0;
}

_Static_assert(GW_CPU_PROFILE_MAX_BYTES <= GW_WIRE_MAX_PROFILE_BYTES, "a VMM's CPU profile fits HELLO");

static void hello_build(struct gw_session *s, struct gw_msg_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->min_version = GW_WIRE_VERSION;
	h->max_version = GW_WIRE_VERSION;
	memcpy(h->id, s->mig_id, sizeof(h->id));
	memcpy(h->boot_id, s->boot_id, sizeof(h->boot_id));
	h->page_size_bytes = GW_PAGE_BYTES;
	h->nr_channels = s->nr_channels;
	h->codec = gw_wire_codec_from_id((enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS));
	h->codec_level = (int32_t)gw_param(s, GW_PARAM_COMPRESS_LEVEL);
	h->flags = (gw_param(s, GW_PARAM_LOCAL) ? GW_HELLO_LOCAL : 0) |
		   (gw_param(s, GW_PARAM_POSTCOPY) && !gw_param(s, GW_PARAM_LOCAL) ? GW_HELLO_POSTCOPY : 0) |
		   (gw_param(s, GW_PARAM_VERIFY) ? GW_HELLO_VERIFY : 0) |
		   (gw_param(s, GW_PARAM_XBZRLE_CACHE_BYTES) ? GW_HELLO_XBZRLE : 0) |
		   (s->vm.nr_vcpus && s->vm.nr_vcpus <= GW_WIRE_MAX_HELLO_VCPUS ? GW_HELLO_VM : 0);
	if (h->flags & GW_HELLO_VM) {	/* a VMM that gives no count sends no VM part */
		h->nr_vcpus = s->vm.nr_vcpus;
		h->profile_bytes = s->vm.cpu_profile_bytes;	/* <= GW_CPU_PROFILE_MAX_BYTES (abi.c) */
		if (h->profile_bytes)
			memcpy(h->profile, s->vm.cpu_profile, h->profile_bytes);
	}
	h->batch_pages = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	h->nr_blocks = s->vm.nr_blocks;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		snprintf(h->blocks[i].name, sizeof(h->blocks[i].name), "%s", s->vm.blocks[i].name);
		h->blocks[i].gpa = s->vm.blocks[i].gpa;
		h->blocks[i].size_bytes = s->vm.blocks[i].size_bytes;
		h->blocks[i].page_size_bytes = s->vm.blocks[i].page_size_bytes;
	}
}

/* Local migration: the RAM fds, by SCM_RIGHTS, in block order. */
static int send_fds(struct gw_session *s)
{
	struct gw_msg_fds m = { .count = s->vm.nr_blocks };
	int fds[GW_MAX_RAM_BLOCKS];

	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		m.block[i] = i;
		fds[i] = s->vm.blocks[i].fd;
	}
	return gw_conn_send_msg_fds(&s->ctl, GW_MSG_FDS, &m, fds, (int)s->vm.nr_blocks);
}

static int handshake(struct gw_session *s)
{
	struct gw_msg_hello *hello = malloc(sizeof(*hello));
	union gw_msg ack;
	int ret;

	if (!hello)
		return gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory");
	ret = connect_conn(s, &s->ctl);
	if (!ret && getrandom(s->mig_id, sizeof(s->mig_id), 0) != sizeof(s->mig_id))
		ret = gw_fail(s, GW_PHASE_SETUP, -EIO, "no random migration id");
	if (ret)
		goto out;
	hello_build(s, hello);
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_HELLO, hello);
	if (!ret && (hello->flags & GW_HELLO_LOCAL))
		ret = send_fds(s);
	if (ret) {
		/* Under TLS the destination may have refused us, and said why. */
		ret = gw_fail(s, GW_PHASE_SETUP, ret, "sending HELLO: %s",
			      gw_conn_tls_error(&s->ctl)[0] ? gw_conn_tls_error(&s->ctl) : strerror(-ret));
		goto out;
	}
	ret = recv_expect(s, &s->ctl, GW_MSG_HELLO_ACK, &ack, GW_PHASE_SETUP);
	if (ret)
		goto out;
	if (ack.hello_ack.version != GW_WIRE_VERSION || ack.hello_ack.flags != hello->flags) {
		ret = gw_fail(s, GW_PHASE_SETUP, -EPROTO, "the destination accepted with protocol version %u "
			      "and options 0x%x, not the %u and 0x%x this source asked for: run releases of one "
			      "wire version on both ends", ack.hello_ack.version, ack.hello_ack.flags,
			      GW_WIRE_VERSION, hello->flags);
		goto out;
	}
	memcpy(s->challenge, ack.hello_ack.challenge, sizeof(s->challenge));
	/* One kernel on both ends (all zeros: unknown): the destination's clock is ours. */
	s->same_clock = !memcmp(ack.hello_ack.boot_id, s->boot_id, GW_WIRE_ID_BYTES) &&
			memcmp(s->boot_id, (uint8_t[GW_WIRE_ID_BYTES]){ 0 }, GW_WIRE_ID_BYTES);
	gw_log(GW_LOG_INFO, "mig", "handshake_done", "version=%u channels=%u codec=%s flags=0x%x same_clock=%d",
	       ack.hello_ack.version, s->nr_channels,
	       gw_codec_name((enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS)), hello->flags, s->same_clock);
out:
	free(hello);
	return ret;
}

void src_chan_hello(const struct gw_session *s, struct gw_msg_chan_hello *m, unsigned index)
{
	*m = (struct gw_msg_chan_hello){ .index = index };
	memcpy(m->id, s->mig_id, sizeof(m->id));
	memcpy(m->challenge, s->challenge, sizeof(m->challenge));
}

static int open_channels(struct gw_session *s)
{
	int ret = gw_channels_create(s, s->nr_channels);

	for (unsigned i = 0; !ret && i < s->nr_channels; i++) {
		struct gw_msg_chan_hello m;
		union gw_msg ack;

		src_chan_hello(s, &m, i);
		ret = connect_conn(s, &s->chans[i].conn);
		if (ret)
			break;
		ret = gw_conn_send_msg(&s->chans[i].conn, GW_MSG_CHAN_HELLO, &m);
		if (ret) {
			ret = gw_fail(s, GW_PHASE_SETUP, ret, "channel %u hello: %s", i, strerror(-ret));
			break;
		}
		ret = recv_expect(s, &s->chans[i].conn, GW_MSG_CHAN_ACK, &ack, GW_PHASE_SETUP);
		if (!ret && ack.chan_ack.index != i)
			ret = gw_fail(s, GW_PHASE_SETUP, -EPROTO, "channel %u acknowledged as %u",
				      i, ack.chan_ack.index);
	}
	return ret ? ret : gw_channels_start(s, gw_channel_send_main);
}

/* Populated ranges of block @block as EXTENTS frames: the destination pre-populates them. */
#define EXTENTS_PER_FRAME 4096u		/* 64 KiB frames, well under GW_WIRE_MAX_EXTENTS */
static int send_extents(struct gw_session *s, unsigned block, const struct gw_bitmap *b)
{
	struct gw_extent *ext = malloc(EXTENTS_PER_FRAME * sizeof(*ext));
	struct gw_msg_extents m = { .block = block, .ext = ext };
	uint64_t pos = 0;
	int ret = 0;

	if (!ext)
		return -ENOMEM;
	while (!ret) {
		m.count = 0;
		while (m.count < EXTENTS_PER_FRAME && (pos = gw_bitmap_next_set(b, pos)) < b->nr_bits) {
			uint64_t end = gw_bitmap_next_clear(b, pos);

			ext[m.count++] = (struct gw_extent){ pos, end - pos };
			pos = end;
		}
		if (!m.count)
			break;
		ret = gw_conn_send_msg(&s->ctl, GW_MSG_EXTENTS, &m);
	}
	free(ext);
	return ret;
}

static int start_tracking(struct gw_session *s)
{
	enum gw_dirty_backend_id want = (enum gw_dirty_backend_id)gw_param(s, GW_PARAM_DIRTY_BACKEND);
	uint64_t t0_ns = gw_now_ns();
	int ret = gw_dirty_select(&s->dirty, &s->vm, want);

	if (ret)
		return gw_fail(s, GW_PHASE_SETUP, ret, "no usable dirty-tracking backend%s",
			       want ? " of the kind asked for" : "");
	gw_devdirty_reset(&s->devdirty);	/* round 0 reads every page after this */
	ret = s->dirty.ops->start(&s->dirty);
	if (ret)
		return gw_fail(s, GW_PHASE_SETUP, ret, "dirty tracking %s: %s",
			       s->dirty.ops->name, strerror(-ret));
	s->dirty_started = true;
	gw_log(GW_LOG_INFO, "mig", "tracking_started", "backend=%s us=%llu", s->dirty.ops->name,
	       (unsigned long long)((gw_now_ns() - t0_ns) / 1000));
	pthread_mutex_lock(&s->lock);
	snprintf(s->stats.dirty_backend, sizeof(s->stats.dirty_backend), "%s", s->dirty.ops->name);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/*
 * Tracking first, then round 0's pages: everything populated (writes racing
 * with the scan are caught by round 1).
 */
static int setup_round0(struct gw_session *s, struct src_ctx *c)
{
	int ret = start_tracking(s);

	c->harvest_at_ns = gw_now_ns();	/* the first harvest reports the writes since */
	for (unsigned i = 0; !ret && i < s->vm.nr_blocks; i++) {
		const char *method = "all";
		ssize_t n = gw_populated_scan(&s->vm.blocks[i], &c->dirty[i], &method);

		if (n < 0) {
			gw_bitmap_set_all(&c->dirty[i]);
			n = (ssize_t)c->dirty[i].nr_bits;
		}
		c->dirty_pages += (uint64_t)n;
		c->skipped_pages += c->dirty[i].nr_bits - (uint64_t)n;
		gw_log(GW_LOG_INFO, "mig", "populated_scan",
		       "block=%s method=%s populated_pages=%lld skipped_pages=%llu",
		       s->vm.blocks[i].name, method, (long long)n,
		       (unsigned long long)(c->dirty[i].nr_bits - (uint64_t)n));
	}
	return ret;
}

/*
 * Round 0's pages, less the ones hinted free by now, announced to the
 * destination: it allocates them ahead of the stream, not the free ones.
 */
static int announce_round0(struct gw_session *s, struct src_ctx *c)
{
	int ret = 0;

	c->dirty_pages = 0;
	for (unsigned i = 0; !ret && i < s->vm.nr_blocks; i++) {
		struct gw_bitmap now;

		ret = gw_bitmap_init(&now, c->dirty[i].nr_bits);
		if (ret)
			break;
		pthread_mutex_lock(&s->src->hint_lock);	/* hints change c->dirty meanwhile */
		gw_bitmap_or(&now, &c->dirty[i]);
		pthread_mutex_unlock(&s->src->hint_lock);
		c->dirty_pages += gw_bitmap_weight(&now);
		ret = send_extents(s, i, &now);
		gw_bitmap_free(&now);
	}
	return ret ? gw_fail(s, GW_PHASE_SETUP, ret, "sending EXTENTS: %s", strerror(-ret)) : 0;
}

/* Free-page hints from now on: the VMM clears pages from round 0's set. */
static void hints_start(struct gw_session *s, struct src_ctx *c)
{
	if (!s->ops->hints_start || !gw_param(s, GW_PARAM_FREE_PAGE_HINTS))
		return;
	pthread_mutex_lock(&s->src->hint_lock);
	s->src->hint_target = c->dirty;
	s->src->hint_free = c->free;
	pthread_mutex_unlock(&s->src->hint_lock);
	s->ops->hints_start(s->opaque, s);
}

static int setup(struct gw_session *s, struct src_ctx *c, bool local)
{
	uint64_t t0_ns = gw_now_ns(), t1_ns = 0, t2_ns = 0, t3_ns = 0;
	int ret = handshake(s);

	if (!ret)
		ret = src_start_ctl_reader(s);
	if (!ret && !local) {
		t1_ns = gw_now_ns();
		ret = open_channels(s);
	}
	if (!ret && !local) {
		t2_ns = gw_now_ns();
		ret = setup_round0(s, c);
	}
	if (!ret && !local) {
		t3_ns = gw_now_ns();
		hints_start(s, c);
		ret = announce_round0(s, c);
	}
	if (ret)
		return ret;
	if (!local)
		gw_log(GW_LOG_INFO, "mig", "setup_done",
		       "handshake_us=%llu channels_us=%llu tracking_scan_us=%llu announce_us=%llu",
		       (unsigned long long)((t1_ns - t0_ns) / 1000), (unsigned long long)((t2_ns - t1_ns) / 1000),
		       (unsigned long long)((t3_ns - t2_ns) / 1000),
		       (unsigned long long)((gw_now_ns() - t3_ns) / 1000));
	pthread_mutex_lock(&s->lock);
	s->stats.setup_time_ns = gw_now_ns() - s->t_start_ns;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- the end ---- */

void src_unthrottle(struct gw_session *s, struct src_ctx *c)
{
	if (c->thr.pct && s->ops->throttle)
		s->ops->throttle(s->opaque, 0);
	if (c->thr.dirty_limit_on && s->ops->dirty_limit)
		s->ops->dirty_limit(s->opaque, 0);
	c->thr.pct = 0;
	c->thr.dirty_limit_on = false;
	c->thr.dirty_limit_bps = 0;
}

static void teardown(struct gw_session *s, struct src_ctx *c)
{
	bool hints_were_on;

	pthread_mutex_lock(&s->src->hint_lock);
	hints_were_on = s->src->hint_target != NULL;
	s->src->hint_target = NULL;
	s->src->hint_free = NULL;
	pthread_mutex_unlock(&s->src->hint_lock);
	if (hints_were_on && s->ops->hints_stop)
		s->ops->hints_stop(s->opaque);
	src_unthrottle(s, c);
	__atomic_store_n(&s->ctl_quiet, true, __ATOMIC_RELEASE);
	gw_session_shutdown_conns(s);
	gw_channels_join(s);
	src_join_ctl_reader(s);
	pcs_release(s);
	gw_channels_destroy(s);
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	if (s->dirty_started)
		s->dirty.ops->stop(&s->dirty);
	s->dirty_started = false;
	__atomic_store_n(&s->dirty_final, false, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		gw_bitmap_free(&c->dirty[i]);
		gw_bitmap_free(&c->free[i]);
		gw_bitmap_free(&c->sent[i]);
	}
	gw_state_release(&c->state);
}

/* mig_done's downtime breakdown (docs/log-events.md#the-mig_done-breakdown-line). */
static void done_fields(const struct gw_stats *st, char *buf, size_t len)
{
	const struct gw_downtime_breakdown *bd = &st->downtime;

	snprintf(buf, len, " downtime_ms=%.3f downtime_measured=%d setup_ms=%.3f "
		 "transferred_bytes=%llu rounds=%u pause_us=%llu final_harvest_us=%llu final_send_us=%llu "
		 "state_save_us=%llu state_send_us=%llu dst_load_us=%llu handover_us=%llu verify=%s",
		 st->downtime_ns / 1e6, st->downtime_measured, st->setup_time_ns / 1e6,
		 (unsigned long long)st->transferred_bytes, st->rounds,
		 (unsigned long long)(bd->pause_ns / 1000), (unsigned long long)(bd->final_harvest_ns / 1000),
		 (unsigned long long)(bd->final_send_ns / 1000), (unsigned long long)(bd->state_save_ns / 1000),
		 (unsigned long long)(bd->state_send_ns / 1000), (unsigned long long)(bd->dst_load_ns / 1000),
		 (unsigned long long)(bd->handover_ns / 1000), gw_verify_name(st->verify));
}

/* After mig_done, a migration that went through postcopy: its figures. */
static void postcopy_done(const struct gw_stats *st)
{
	if (!st->postcopy)
		return;
	gw_log(GW_LOG_INFO, "mig", "postcopy_done",
	       "postcopy_ms=%.3f paused_ms=%.3f recoveries=%u pages=%llu requests=%llu pushed=%llu "
	       "answered=%llu duplicates=%llu blocktime_ms=%.3f vcpu_blocktime_ms=%.3f "
	       "latency_p50_us=%.1f latency_p99_us=%.1f latency_max_us=%.1f",
	       st->postcopy_time_ns / 1e6, st->postcopy_paused_ns / 1e6, st->postcopy_recoveries,
	       (unsigned long long)st->postcopy_pages, (unsigned long long)st->postcopy_requests,
	       (unsigned long long)st->postcopy_pushed_pages, (unsigned long long)st->postcopy_answered_pages,
	       (unsigned long long)st->postcopy_dup_pages, st->postcopy_blocktime_ns / 1e6,
	       st->postcopy_vcpu_blocktime_total_ns / 1e6, st->postcopy_latency_p50_ns / 1e3,
	       st->postcopy_latency_p99_ns / 1e3, st->postcopy_latency_max_ns / 1e3);
}

/* Before GO the VM is ours: run it again if we paused it. */
static void resume_after_failure(struct gw_session *s, struct src_ctx *c)
{
	int ret = s->ops->resume(s->opaque);

	gw_log(ret ? GW_LOG_ERROR : GW_LOG_INFO, "mig", "vm_resume",
	       "where=source reason=migration_failed ok=%d", ret == 0);
	c->paused = false;
}

static int src_ctx_init(struct gw_session *s, struct src_ctx *c)
{
	gw_state_init(&c->state);
	gw_cpu_times(&c->cpu_user0_ns, &c->cpu_sys0_ns);
	gw_converge_init(&c->conv, GW_PAGE_BYTES);
	c->verdict = GW_CONVERGE_UNKNOWN;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		uint64_t pages = s->vm.blocks[i].size_bytes / GW_PAGE_BYTES;

		c->ram_pages += pages;
		if (gw_bitmap_init(&c->dirty[i], pages) || gw_bitmap_init(&c->free[i], pages) ||
		    gw_bitmap_init(&c->sent[i], pages))
			return gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory for dirty bitmaps");
	}
	pthread_mutex_lock(&s->lock);
	snprintf(s->stats.codec, sizeof(s->stats.codec), "%s",
		 gw_codec_name((enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS)));
	s->stats.ram_total_bytes = c->ram_pages * GW_PAGE_BYTES;
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_INFO, "mig", "mig_start",
	       "url=%s ram_bytes=%llu channels=%u compress=%s local=%d downtime_limit_us=%lld max_bandwidth_bps=%lld",
	       s->url_str, (unsigned long long)(c->ram_pages * GW_PAGE_BYTES), s->nr_channels,
	       gw_codec_name((enum gw_codec_id)gw_param(s, GW_PARAM_COMPRESS)),
	       gw_param(s, GW_PARAM_LOCAL) != 0, (long long)gw_param(s, GW_PARAM_DOWNTIME_LIMIT_US),
	       (long long)gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS));
	return 0;
}

static void src_reset(struct gw_session *s, bool local)
{
	__atomic_store_n(&s->round, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->pc_state, GW_PC_NONE, __ATOMIC_RELEASE);
	__atomic_store_n(&s->pc_broken, 0, __ATOMIC_RELEASE);
	s->nr_channels = local ? 0 : (unsigned)gw_param(s, GW_PARAM_CHANNELS);
	__atomic_store_n(&s->ctl_quiet, false, __ATOMIC_RELEASE);
	__atomic_store_n(&s->ctr_normal_pages, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr_zero_pages, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr_xbzrle_pages, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr_raw_bytes, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr_wire_payload_bytes, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->src->hinted_pages, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	s->src->mbox_seen = 0;
	s->src->ping_rtt_ns = 0;
	s->src->pong_token = 0;
	s->src->peer_backlog_bytes = 0;
	s->src->pc_resume_url[0] = 0;
	pthread_mutex_unlock(&s->lock);
}

/* The status a migration ends with, from how it ended. */
static enum gw_status end_status(struct gw_session *s, enum gw_src_outcome o)
{
	if (o == GW_SRC_COMPLETED)
		return GW_STATUS_COMPLETED;
	if (o == GW_SRC_UNKNOWN)
		return GW_STATUS_UNKNOWN;
	return __atomic_load_n(&s->cancelled, __ATOMIC_ACQUIRE) ? GW_STATUS_CANCELLED : GW_STATUS_FAILED;
}

/* Set-up, then precopy rounds and the switchover, or postcopy: how it ended. */
static enum gw_src_outcome migrate(struct gw_session *s, struct src_ctx *c, bool local)
{
	enum gw_src_outcome o;

	if (src_ctx_init(s, c) || setup(s, c, local))
		return GW_SRC_FAILED;
	src_publish(s, c);	/* round 0's pages and RAM size before anyone sees "active" */
	gw_set_status(s, GW_STATUS_ACTIVE);
	o = local ? GW_SRC_CONVERGED : src_precopy(s, c);
	if (o == GW_SRC_POSTCOPY)
		return src_postcopy(s, c) ? GW_SRC_FAILED : GW_SRC_COMPLETED;
	if (o != GW_SRC_CONVERGED || src_switchover(s, c, local))
		return GW_SRC_FAILED;
	o = src_handover(s, c, false);
	return o == GW_SRC_RESUMED ? GW_SRC_COMPLETED : o;
}

static void *gw_source_main(void *arg)
{
	struct gw_session *s = arg;
	bool local = gw_param(s, GW_PARAM_LOCAL) != 0;
	struct src_ctx *c = calloc(1, sizeof(*c));
	enum gw_src_outcome o = GW_SRC_FAILED;
	struct gw_end end = { .done_fields = done_fields, .after_done = postcopy_done };
	bool resumed_here = false;

	gw_log_set_side(s->side);
	gw_emit_status(s);	/* setup, set by gw_migrate_start */
	src_reset(s, local);
	if (c)
		o = migrate(s, c, local);
	else
		gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory");
	gw_thread_normal(s);	/* the switchover raised it (rt-priority) */
	if (o == GW_SRC_COMPLETED)
		src_verify(s, c);
	/* c->paused: the VM is still ours (before GO, GO refused, or resolved back here). */
	if (o == GW_SRC_FAILED && c && c->paused) {
		resume_after_failure(s, c);
		resumed_here = true;
	}
	gw_events_release(s);	/* a switchover that failed held them (src_pause_vm) */
	if (c) {
		src_publish(s, c);
		teardown(s, c);
	}
	free(c);
	end.status = end_status(s, o);
	/*
	 * A failure after GO that did not give the VM back (postcopy: it ran
	 * there with pages missing) loses it; any other runs it here. Not
	 * "postcopy switched": a switch that fails before GO, or that the
	 * operator resolves to the source, resumes the VM here.
	 */
	pthread_mutex_lock(&s->lock);
	end.vm = s->go_sent && !resumed_here ? "lost" : "running_on_source";
	pthread_mutex_unlock(&s->lock);
	gw_end_publish(s, &end);
	return NULL;
}

const struct gw_role_ops gw_source_role = {
	.name = "source",
	.main = gw_source_main,
	.shutdown_channels = gw_channels_shutdown,
};
