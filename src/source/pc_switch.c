/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the source: the connections postcopy opens (tuned to notice a
 * dead link) and the switch, on the migration thread: channels ended,
 * PC_PREPARE, the preempt connection; then paused: the map of pages not to
 * trust, state, COMPLETE; the handover is handover.c (pc_int.h).
 */
#include "source/pc_int.h"

/* ---- connections ---- */

/* Postcopy connections notice a dead link within the I/O timeout even with data in flight. */
static void tune_conn(struct gw_session *s, struct gw_conn *conn)
{
	unsigned ms = (unsigned)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);

	if (conn->fd >= 0)
		(void)conn->sock->setsockopt(conn->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
}

/*
 * Connect @conn to @url with the I/O timeout, through TLS when the session
 * has credentials (the destination's acceptor refuses anything else, as
 * for the first connections). 0 or -errno with @why.
 */
int pcs_connect(struct gw_session *s, const struct gw_url *url, struct gw_conn *conn,
		      char *why, size_t why_len)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	int fd = url->ops->connect(url->addr, timeout_ms), ret;
	char host[256], tls_why[180] = "", esc[GW_LOG_STR_MAX(180)];

	if (fd < 0) {
		snprintf(why, why_len, "%s", strerror(-fd));
		return fd;
	}
	gw_conn_set_fd(conn, fd, url->ops->sock);
	gw_conn_set_timeout(conn, timeout_ms);
	tune_conn(s, conn);
	if (!s->tls_ctx)
		return 0;
	gw_url_host(url, host, sizeof(host));
	ret = gw_conn_start_tls(conn, s->tls_ctx, host, timeout_ms, tls_why, sizeof(tls_why));
	if (ret)
		snprintf(why, why_len, "TLS: %s", gw_log_str(esc, sizeof(esc), tls_why));	/* may quote the peer */
	return ret;
}

/* One message on a connection nobody else reads. Its type, or -errno with @why. */
int pcs_recv(struct gw_conn *conn, union gw_msg *m, void *buf, size_t cap, char *why, size_t why_len)
{
	int type = gw_conn_recv_msg(conn, m, buf, cap, why, why_len);

	if (type == GW_MSG_ERROR) {
		char esc[GW_LOG_STR_MAX(200)];	/* the peer's words */

		snprintf(why, why_len, "destination: %.200s", gw_log_str(esc, sizeof(esc), m->error.reason));
		return gw_wire_err_to_errno(m->error.code);
	}
	if (type < 0 && !why[0])
		snprintf(why, why_len, "%s", gw_conn_err_text(type, "destination"));
	return type;
}

/* A data (or, index nr_channels, the preempt) connection: CHAN_HELLO, CHAN_ACK. 0 or -errno. */
int pcs_open_data_conn(struct gw_session *s, const struct gw_url *url, struct gw_conn *conn,
			  unsigned index, char *why, size_t why_len)
{
	struct gw_msg_chan_hello hello;
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	union gw_msg m;
	char cwhy[200];
	int ret;

	src_chan_hello(s, &hello, index);
	ret = pcs_connect(s, url, conn, cwhy, sizeof(cwhy));
	if (ret) {
		snprintf(why, why_len, "connection %u: %s", index, cwhy);
		return ret;
	}
	ret = gw_conn_send_msg(conn, GW_MSG_CHAN_HELLO, &hello);
	if (ret) {
		snprintf(why, why_len, "connection %u: %s", index, strerror(-ret));
		return ret;
	}
	why[0] = 0;
	ret = pcs_recv(conn, &m, buf, sizeof(buf), why, why_len);
	if (ret >= 0 && (ret != GW_MSG_CHAN_ACK || m.chan_ack.index != index)) {
		snprintf(why, why_len, "connection %u not acknowledged", index);
		ret = -EPROTO;
	}
	return ret < 0 ? ret : 0;
}

/* ---- the switch, VM running ---- */

int pcs_alloc(struct gw_session *s, struct src_ctx *c)
{
	struct gw_pc_src *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return gw_fail(s, GW_PHASE_POSTCOPY, -ENOMEM, "no memory");
	pc->s = s;
	pc->c = c;
	gw_mutex_init_pi(&pc->lock);	/* the server waits for a pusher holding it */
	/* Written in the pause: their memory is touched now, not there. */
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		if (gw_bitmap_init_prefaulted(&pc->zero[i], c->dirty[i].nr_bits) ||
		    gw_bitmap_init_prefaulted(&pc->next_dirty[i], c->dirty[i].nr_bits))
			return gw_fail(s, GW_PHASE_POSTCOPY, -ENOMEM, "no memory for postcopy bitmaps");
	if (gw_pages_out_init(&pc->pout, GW_CODEC_NONE, 0, 0))
		return gw_fail(s, GW_PHASE_POSTCOPY, -ENOMEM, "no memory for the preempt connection");
	pc->pout_ready = true;
	s->src->pcs = pc;
	return 0;
}

/* The data channels end (CHAN_END); their connections stay for postcopy's pushers. */
static int end_channels(struct gw_session *s)
{
	int ret = src_end_channels(s);

	for (unsigned i = 0; !ret && i < s->nr_channels; i++) {
		struct gw_pages_out *po = &s->chans[i].tx.out;

		/* No XBZRLE after the switch: pages go whole (the destination refuses deltas). */
		gw_xbzrle_cache_free(po->xb);
		po->xb = NULL;
		tune_conn(s, &s->chans[i].conn);
	}
	return ret;
}

/*
 * VM running: channels ended, PC_PREPARE, the preempt connection, and
 * PC_PREPARED (the destination applied every page sent so far and traps
 * first touches). Outside the downtime.
 */
int pcs_switch_prepare(struct gw_session *s)
{
	uint64_t t0 = gw_now_ns();
	char why[256] = "";
	int ret;

	if (s->nr_channels >= GW_WIRE_MAX_CHANNELS)
		return gw_fail(s, GW_PHASE_POSTCOPY, -EINVAL, "postcopy needs at most %u channels",
			       GW_WIRE_MAX_CHANNELS - 1);
	ret = end_channels(s);
	if (ret)
		return ret;
	__atomic_store_n(&s->pc_state, GW_PC_PREPARED, __ATOMIC_RELEASE);
	tune_conn(s, &s->ctl);
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_PREPARE, NULL);
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "sending PC_PREPARE: %s", strerror(-ret));
	ret = pcs_open_data_conn(s, &s->url, &s->preempt, s->nr_channels, why, sizeof(why));
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "preempt connection: %s", why);
	gw_conn_set_recv_timeout(&s->preempt, 0);	/* requests come when the guest faults */
	ret = src_wait_mbox(s, GW_MSG_PC_PREPARED, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	if (ret)
		return ret == -ETIMEDOUT ? gw_fail(s, GW_PHASE_POSTCOPY, ret,
			"destination did not prepare for postcopy within the I/O timeout") : ret;
	gw_log(GW_LOG_INFO, "mig", "postcopy_prepared", "prepare_us=%llu",
	       (unsigned long long)((gw_now_ns() - t0) / 1000));
	return 0;
}

/* ---- the switch, VM paused ---- */

/*
 * One block's bitmap as PC_DIRTY pieces, all-zero stretches skipped, sent
 * from the bitmap itself (gw_msg_pc_map_iov): encoding a piece took a
 * fresh 64 KiB buffer, whose first touches cost 0.2 ms of the pause here.
 * 0 or -errno.
 */
static int send_map(struct gw_session *s, struct gw_conn *conn, uint16_t type, unsigned block,
		    const struct gw_bitmap *b)
{
	uint64_t nw = gw_bitmap_words(b), w = 0;

	for (;;) {
		struct gw_msg_pc_map m = { .block = block };
		uint8_t hdr[16];
		struct iovec iov[2];
		uint64_t end;
		int ret;

		while (w < nw && !b->words[w])
			w++;
		if (w >= nw)
			return 0;
		end = w + MAP_WORDS < nw ? w + MAP_WORDS : nw;
		while (end > w + 1 && !b->words[end - 1])
			end--;
		m.nr_words = (uint32_t)(end - w);
		m.first_page = w * 64;
		m.words = b->words + w;
		ret = gw_msg_pc_map_iov(&m, hdr, iov);
		ret = ret == -EOPNOTSUPP ? gw_conn_send_msg(conn, type, &m) :
		      ret ? ret : gw_conn_send(conn, type, iov, 2, NULL, 0);
		if (ret)
			return ret;
		w = end;
	}
}

/*
 * zero = (zero | free) & sent, todo |= zero, in one pass over the words
 * (inside the pause: five passes over an 8 GiB guest's maps took 0.2 ms).
 * Returns the pages of todo; *@zero_pages those of zero.
 */
static uint64_t merge_map(struct gw_bitmap *todo, struct gw_bitmap *zero, const struct gw_bitmap *free_,
			  const struct gw_bitmap *sent, uint64_t *zero_pages)
{
	uint64_t nw = gw_bitmap_words(todo), pages = 0, zeros = 0;

	for (uint64_t w = 0; w < nw; w++) {
		uint64_t z = (zero->words[w] | free_->words[w]) & sent->words[w];

		zero->words[w] = z;
		todo->words[w] |= z;
		pages += (uint64_t)__builtin_popcountll(todo->words[w]);
		zeros += (uint64_t)__builtin_popcountll(z);
	}
	*zero_pages += zeros;
	return pages;
}

/*
 * Paused: the last harvest says what changed since the copies the
 * destination holds. Not to trust there: the pages still to send (dirty
 * since their last copy, or never sent in an interrupted pass) and the
 * free pages it holds data for (sent before their hint; sent as zeros).
 */
static int build_map(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	/* No hint ever: every free map is empty, and so are the zero maps (allocated empty). */
	bool hints = __atomic_load_n(&s->src->hint_ranges, __ATOMIC_RELAXED) != 0;
	uint64_t zero_pages = 0;
	int ret;

	ret = src_harvest_last(s, c);
	if (ret)
		return ret;
	c->t.harvested = gw_now_ns();
	pc->pages = 0;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		/* The dirty bitmap becomes the todo map (hints stopped at the pause). */
		pc->todo[i] = c->dirty[i];
		c->dirty[i] = pc->next_dirty[i];
		memset(&pc->next_dirty[i], 0, sizeof(pc->next_dirty[i]));
		pc->pages += hints ? merge_map(&pc->todo[i], &pc->zero[i], &c->free[i], &c->sent[i], &zero_pages) :
			     gw_bitmap_weight(&pc->todo[i]);
	}
	gw_pc_pick_init_counted(&pc->pick, s->vm.nr_blocks, pc->todo, pc->zero,
				(uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES), pc->pages);
	c->discarded_pages = zero_pages;
	gw_log(GW_LOG_INFO, "mig", "postcopy_map", "round=%u pages=%llu zero_pages=%llu harvest_us=%llu",
	       gw_round(s), (unsigned long long)pc->pages, (unsigned long long)zero_pages,
	       (unsigned long long)((c->t.harvested - c->t.paused) / 1000));
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		ret = send_map(s, &s->ctl, GW_MSG_PC_DIRTY, i, &pc->todo[i]);
		if (ret)
			return gw_fail(s, GW_PHASE_POSTCOPY, ret, "sending the postcopy map: %s", strerror(-ret));
	}
	c->t.queued = gw_now_ns();
	return 0;
}

int pcs_switch_pause(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	int ret = src_pause_vm(s, c);

	if (!ret)
		ret = build_map(s, c, pc);
	if (!ret)
		ret = src_send_state(s, c);
	if (ret)
		return ret;
	c->t.pages_sent = c->t.state_sent;	/* no page is sent inside this pause */
	return src_complete_and_ready(s, c, GW_COMPLETE_POSTCOPY);
}

/* Publish the postcopy figures of this side (s->lock held). */
void pcs_publish_locked(struct gw_session *s, struct gw_pc_src *pc)
{
	struct gw_stats *st = &s->stats;
	uint64_t now = gw_now_ns();

	st->postcopy = true;
	st->postcopy_pages = pc->pages;
	st->postcopy_pushed_pages = __atomic_load_n(&pc->pushed, __ATOMIC_RELAXED);
	st->postcopy_answered_pages = __atomic_load_n(&pc->answered, __ATOMIC_RELAXED);
	st->postcopy_recoveries = pc->recoveries;
	st->postcopy_paused_ns = pc->paused_ns + (pc->t_paused_ns ? now - pc->t_paused_ns : 0);
	if (pc->t_resumed_ns)
		st->postcopy_time_ns = (pc->t_done_ns ? pc->t_done_ns : now) - pc->t_resumed_ns;
}

void pcs_publish(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	pthread_mutex_lock(&pc->lock);
	c->dirty_pages = pc->pick.left_pages;
	pthread_mutex_unlock(&pc->lock);
	src_publish(s, c);
	pthread_mutex_lock(&s->lock);
	pcs_publish_locked(s, pc);
	pthread_mutex_unlock(&s->lock);
}

/*
 * The one handover (handover.c), recoverable: from GO on a broken link
 * pauses the migration. What postcopy adds after RESUMED: the postcopy
 * clock starts, and the run starts its threads (pc->resumed_seen); without
 * RESUMED (GW_SRC_UNKNOWN) the run's first turn pauses for a recovery,
 * which the destination answers only if it runs the VM. 0, or the sticky
 * error: GO withheld or refused (c->paused: resumed here), or an error
 * after GO (the VM is lost).
 */
int pcs_handover(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	enum gw_src_outcome o = src_handover(s, c, true);

	if (o == GW_SRC_FAILED)
		return gw_failed(s) ? gw_failed(s) : -EIO;
	if (o != GW_SRC_RESUMED)
		return 0;
	pc->resumed_seen = true;
	pc->t_resumed_ns = c->t.resumed_rx;
	gw_log(GW_LOG_INFO, "mig", "postcopy_active", "downtime_ms=%.3f pages=%llu",
	       (c->t.resumed - c->t.pause) / 1e6, (unsigned long long)pc->pages);
	return 0;
}
