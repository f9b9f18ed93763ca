/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the source (see postcopy.h, docs/protocol.md#postcopy).
 *
 *   switch     VM running: every data channel drains and sends CHAN_END;
 *              PC_PREPARE; the preempt connection; PC_PREPARED (the
 *              destination applied every precopy page). Then the pause:
 *              final harvest, PC_DIRTY (the pages not to trust: dirty
 *              since their last copy, never sent, or freed after being
 *              sent), STATE, COMPLETE(POSTCOPY), READY, GO, RESUMED. The
 *              downtime is that pause; it does not depend on the dirty rate.
 *   postcopy   a server thread answers page requests on the preempt
 *              connection at once (never behind a background batch); one
 *              pusher per data channel sends the remaining pages, around
 *              recent requests first (postcopy_pick.h); the migration
 *              thread pings the destination every PING_MS and publishes
 *              statistics, until PC_DONE (every page placed), then PC_END.
 *   recovery   a broken connection (gw_failed() reports s->pc_broken) stops
 *              every thread; status postcopy-paused until gw_postcopy_resume
 *              names the destination's recovery URL: PC_RECOVER (migration
 *              id), the destination's map of pages still missing
 *              (PC_NEEDED, authoritative: it replaces ours), new data and
 *              preempt connections, and the threads start again.
 *
 * After GO the source never resumes the VM by itself: the destination may
 * run it. Before GO every failure resumes it (c->paused, source.c).
 *
 * Threads: struct gw_pc_src belongs to the migration thread, except: the
 * push order (pick, todo, zero) under pc->lock (pushers, server, the
 * migration thread during recovery); the counters pushed/answered/requests
 * and the flag done are atomic; pout belongs to the server thread.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "channel.h"
#include "net/tls.h"
#include "codec/xbzrle.h"
#include "mem/digest.h"
#include "mem/page_digest.h"
#include "postcopy.h"
#include "postcopy_pick.h"
#include "source.h"

#define PING_MS 500			/* heartbeat on control during postcopy */
#define MAP_WORDS GW_WIRE_MAX_MAP_WORDS

struct pc_pusher {
	struct gw_pc_src *pc;
	unsigned index;			/* data channel */
	pthread_t thread;
	bool started;			/* migration thread */
};

struct gw_pc_src {
	struct gw_session *s;
	struct src_ctx *c;

	pthread_mutex_t lock;		/* guards pick, todo, zero */
	struct gw_bitmap todo[GW_MAX_RAM_BLOCKS];	/* pages still to send */
	struct gw_bitmap zero[GW_MAX_RAM_BLOCKS];	/* of todo: freed pages, sent as zeros */
	struct gw_pc_pick pick;

	struct gw_pages_out pout;	/* server thread: codec none, no XBZRLE */
	bool pout_ready;
	struct pc_pusher push[GW_WIRE_MAX_CHANNELS];
	pthread_t server;
	bool server_started;

	uint64_t pages;			/* pages the destination did not trust at the switch */
	uint64_t pushed, answered, requests;	/* atomic: pages pushed, pages answered, pages asked */
	bool done;			/* atomic: PC_DONE received */
	bool cut_fired;			/* atomic: the src-pc-cut fault point fired */
	bool resumed_seen;		/* RESUMED arrived (else, paused: the destination may not run) */
	uint64_t t_resumed_ns, t_done_ns, t_paused_ns, paused_ns;
	uint32_t recoveries;
};

/* ---- the decision ---- */

int gw_session_start_postcopy(struct gw_session *s)
{
	int ret = 0;

	if (!s || s->role != GW_ROLE_SOURCE)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->running || !gw_param(s, GW_PARAM_POSTCOPY))
		ret = -EINVAL;
	else if (gw_pc_state(s) != GW_PC_NONE || s->go_sent ||
		 __atomic_exchange_n(&s->pc_start_req, true, __ATOMIC_ACQ_REL))
		ret = -EALREADY;
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		gw_log(GW_LOG_INFO, "mig", "postcopy_requested", "by=request");
	return ret;
}

bool src_pc_want_switch(struct gw_session *s, struct src_ctx *c, uint64_t t_precopy_ns, bool mid_round)
{
	uint64_t rounds = (uint64_t)gw_param(s, GW_PARAM_POSTCOPY_AFTER_ROUNDS);
	uint64_t after_ms = (uint64_t)gw_param(s, GW_PARAM_POSTCOPY_AFTER_MS);
	uint64_t auto_rounds = (uint64_t)gw_param(s, GW_PARAM_POSTCOPY_AUTO_ROUNDS);
	uint64_t exp_ns = gw_converge_expected_ns(&c->conv, c->dirty_pages);
	const char *why = NULL;

	if (!gw_param(s, GW_PARAM_POSTCOPY) || gw_param(s, GW_PARAM_LOCAL))
		return false;
	if (__atomic_load_n(&s->pc_start_req, __ATOMIC_ACQUIRE))
		why = "request";
	if (mid_round)
		goto out;	/* policies are judged at round ends */
	if (!why && rounds && gw_round(s) >= rounds)
		why = "rounds";
	if (!why && after_ms && gw_now_ns() - t_precopy_ns >= after_ms * 1000000ull)
		why = "time";
	/* auto: the expected downtime has not fallen by a tenth for auto_rounds rounds. */
	if (!c->pc_best_exp_ns || (exp_ns != UINT64_MAX && exp_ns * 10 < c->pc_best_exp_ns * 9)) {
		c->pc_best_exp_ns = exp_ns;
		c->pc_flat_rounds = 0;
	} else {
		c->pc_flat_rounds++;
	}
	if (!why && auto_rounds && c->pc_flat_rounds >= auto_rounds)
		why = "auto";
out:
	if (why)
		gw_log(GW_LOG_INFO, "mig", "postcopy_decided",
		       "reason=%s round=%u dirty_pages=%llu expected_downtime_us=%lld", why, gw_round(s),
		       (unsigned long long)c->dirty_pages,
		       exp_ns == UINT64_MAX ? -1ll : (long long)(exp_ns / 1000));
	return why != NULL;
}

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
static int pc_connect(struct gw_session *s, const struct gw_url *url, struct gw_conn *conn,
		      char *why, size_t why_len)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	int fd = url->ops->connect(url->addr, timeout_ms), ret;
	char host[256], tls_why[180] = "";

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
		snprintf(why, why_len, "TLS: %s", tls_why);
	return ret;
}

/* One message on a connection nobody else reads. Its type, or -errno with @why. */
static int pc_recv(struct gw_conn *conn, union gw_msg *m, void *buf, size_t cap, char *why, size_t why_len)
{
	int type = gw_conn_recv_msg(conn, m, buf, cap, why, why_len);

	if (type == GW_MSG_ERROR) {
		snprintf(why, why_len, "destination: %.200s", m->error.reason);
		return gw_wire_err_to_errno(m->error.code);
	}
	if (type < 0 && !why[0])
		snprintf(why, why_len, "%s", gw_conn_err_text(type, "destination"));
	return type;
}

/* A data (or, index nr_channels, the preempt) connection: CHAN_HELLO, CHAN_ACK. 0 or -errno. */
static int open_data_conn(struct gw_session *s, const struct gw_url *url, struct gw_conn *conn,
			  unsigned index, char *why, size_t why_len)
{
	struct gw_msg_chan_hello hello = { .index = index };
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	union gw_msg m;
	char cwhy[200];
	int ret;

	memcpy(hello.id, s->mig_id, sizeof(hello.id));
	ret = pc_connect(s, url, conn, cwhy, sizeof(cwhy));
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
	ret = pc_recv(conn, &m, buf, sizeof(buf), why, why_len);
	if (ret >= 0 && (ret != GW_MSG_CHAN_ACK || m.chan_ack.index != index)) {
		snprintf(why, why_len, "connection %u not acknowledged", index);
		ret = -EPROTO;
	}
	return ret < 0 ? ret : 0;
}

/* ---- the switch, VM running ---- */

static int pc_alloc(struct gw_session *s, struct src_ctx *c)
{
	struct gw_pc_src *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return gw_fail(s, "postcopy", -ENOMEM, false, "no memory");
	pc->s = s;
	pc->c = c;
	pthread_mutex_init(&pc->lock, NULL);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		if (gw_bitmap_init(&pc->zero[i], c->dirty[i].nr_bits))
			return gw_fail(s, "postcopy", -ENOMEM, false, "no memory for postcopy bitmaps");
	if (gw_pages_out_init(&pc->pout, GW_CODEC_NONE, 0, 0))
		return gw_fail(s, "postcopy", -ENOMEM, false, "no memory for the preempt connection");
	pc->pout_ready = true;
	s->pcs = pc;
	return 0;
}

/* Every data channel sends what it holds, then CHAN_END; their threads end. */
static int end_channels(struct gw_session *s)
{
	int ret = src_drain(s);

	if (ret)
		return ret;
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_channel_finish(&s->chans[i]);
	gw_channels_join(s);
	ret = gw_failed(s);
	for (unsigned i = 0; !ret && i < s->nr_channels; i++) {
		struct gw_pages_out *po = &s->chans[i].out;

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
static int switch_prepare(struct gw_session *s)
{
	uint64_t t0 = gw_now_ns();
	char why[256] = "";
	int ret;

	if (s->nr_channels >= GW_WIRE_MAX_CHANNELS)
		return gw_fail(s, "postcopy", -EINVAL, false, "postcopy needs at most %u channels",
			       GW_WIRE_MAX_CHANNELS - 1);
	ret = end_channels(s);
	if (ret)
		return ret;
	__atomic_store_n(&s->pc_state, GW_PC_PREPARED, __ATOMIC_RELEASE);
	tune_conn(s, &s->ctl);
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_PREPARE, NULL);
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "sending PC_PREPARE: %s", strerror(-ret));
	ret = open_data_conn(s, &s->url, &s->preempt, s->nr_channels, why, sizeof(why));
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "preempt connection: %s", why);
	gw_conn_set_recv_timeout(&s->preempt, 0);	/* requests come when the guest faults */
	ret = src_wait_mbox(s, GW_MSG_PC_PREPARED, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	if (ret)
		return ret == -ETIMEDOUT ? gw_fail(s, "postcopy", ret, false,
			"destination did not prepare for postcopy within the I/O timeout") : ret;
	gw_log(GW_LOG_INFO, "mig", "postcopy_prepared", "prepare_us=%llu",
	       (unsigned long long)((gw_now_ns() - t0) / 1000));
	return 0;
}

/* ---- the switch, VM paused ---- */

/* One block's bitmap as PC_DIRTY pieces, all-zero stretches skipped. 0 or -errno. */
static int send_map(struct gw_session *s, struct gw_conn *conn, uint16_t type, unsigned block,
		    const struct gw_bitmap *b)
{
	uint64_t nw = gw_bitmap_words(b), w = 0;

	for (;;) {
		struct gw_msg_pc_map m = { .block = block };
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
		ret = gw_conn_send_msg(conn, type, &m);
		if (ret)
			return ret;
		w = end;
	}
}

/*
 * Paused: the last harvest says what changed since the copies the
 * destination holds. Not to trust there: the pages still to send (dirty
 * since their last copy, or never sent in an interrupted pass) and the
 * free pages it holds data for (sent before their hint; sent as zeros).
 */
static int build_map(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
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
		memset(&c->dirty[i], 0, sizeof(c->dirty[i]));
		ret = gw_bitmap_init(&c->dirty[i], pc->todo[i].nr_bits);
		if (ret)
			return gw_fail(s, "postcopy", ret, false, "no memory for postcopy bitmaps");
		gw_bitmap_or(&pc->zero[i], &c->free[i]);
		gw_bitmap_and(&pc->zero[i], &c->sent[i]);
		gw_bitmap_or(&pc->todo[i], &pc->zero[i]);
		pc->pages += gw_bitmap_weight(&pc->todo[i]);
		zero_pages += gw_bitmap_weight(&pc->zero[i]);
	}
	gw_pc_pick_init(&pc->pick, s->vm.nr_blocks, pc->todo, pc->zero,
			(uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES));
	c->discarded_pages = zero_pages;
	gw_log(GW_LOG_INFO, "mig", "postcopy_map", "round=%u pages=%llu zero_pages=%llu harvest_us=%llu",
	       gw_round(s), (unsigned long long)pc->pages, (unsigned long long)zero_pages,
	       (unsigned long long)((c->t.harvested - c->t.paused) / 1000));
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		ret = send_map(s, &s->ctl, GW_MSG_PC_DIRTY, i, &pc->todo[i]);
		if (ret)
			return gw_fail(s, "postcopy", ret, false, "sending the postcopy map: %s", strerror(-ret));
	}
	c->t.queued = gw_now_ns();
	return 0;
}

static int switch_pause(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
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
static void publish_locked(struct gw_session *s, struct gw_pc_src *pc)
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

static void publish(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	pthread_mutex_lock(&pc->lock);
	c->dirty_pages = pc->pick.left_pages;
	pthread_mutex_unlock(&pc->lock);
	src_publish(s, c);
	pthread_mutex_lock(&s->lock);
	publish_locked(s, pc);
	pthread_mutex_unlock(&s->lock);
}

/*
 * GO: from here a broken connection pauses the migration (s->pc_state
 * active). RESUMED settles who runs the VM: without it (timeout, broken
 * link) the destination may run it, so the source does not resume it and
 * waits for a recovery, or an operator's resolve. An ERROR answer means the
 * destination did not resume: the VM is still the source's.
 */
static int pc_handover(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	struct gw_msg_resumed r;
	struct gw_error err;
	uint64_t t_rx;
	bool sent;
	int ret;

	src_fault_delay_go(s);
	/* Active before GO leaves: the destination's first PC_STATS may beat our next line. */
	__atomic_store_n(&s->pc_state, GW_PC_ACTIVE, __ATOMIC_RELEASE);
	ret = src_send_go(s, &sent);
	if (!sent) {
		__atomic_store_n(&s->pc_state, GW_PC_PREPARED, __ATOMIC_RELEASE);
		return ret;
	}
	c->t.go = gw_now_ns();
	if (ret)
		ret = gw_fail(s, "handover", ret, false, "sending GO: %s", strerror(-ret));
	else
		ret = src_wait_mbox(s, GW_MSG_RESUMED, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	t_rx = gw_now_ns();
	gw_error_get(s, &err);
	if (ret && err.code && err.from_peer) {
		gw_log(GW_LOG_WARN, "mig", "go_refused", "reason=\"%s\"", err.msg);
		return ret;	/* c->paused: the caller resumes the VM here */
	}
	c->paused = false;	/* it may run there now: never resumed here by us */
	gw_thread_normal(s);
	if (ret == -ETIMEDOUT && !gw_failed(s))
		gw_fail(s, "handover", -ETIMEDOUT, false, "no RESUMED within the I/O timeout");
	if (ret) {
		gw_log(GW_LOG_ERROR, "mig", "outcome_unknown",
		       "reason=\"GO sent, RESUMED not received: paused; recover if the destination runs the VM, "
		       "else resolve source\"");
		return __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE) ? ret : 0;
	}
	pthread_mutex_lock(&s->lock);
	r = s->mbox_resumed;
	pthread_mutex_unlock(&s->lock);
	c->t.resumed = src_resume_time(s, &c->t, &r, t_rx, &c->resume_measured);
	gw_thread_normal(s);	/* the critical path ends here; threads started from now on inherit */
	pc->resumed_seen = true;
	pc->t_resumed_ns = t_rx;
	src_publish_downtime(s, c);
	gw_log(GW_LOG_INFO, "mig", "postcopy_active", "downtime_ms=%.3f pages=%llu",
	       (c->t.resumed - c->t.pause) / 1e6, (unsigned long long)pc->pages);
	return 0;
}

/* ---- the postcopy phase ---- */

static void count_frame(struct gw_session *s, const struct gw_pages_frame *f)
{
	__atomic_fetch_add(&s->ctr_normal_pages, f->nr_normal, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zero_pages, f->nr_zero, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_raw_bytes, (uint64_t)f->nr_normal * GW_PAGE_BYTES, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_wire_payload_bytes, f->data_bytes, __ATOMIC_RELAXED);
}

/*
 * Build batch @b with @po and send it on @conn. 0 or the error, recorded
 * unless PC_DONE came (every page is there: the connections are being shut).
 */
static int send_pages(struct gw_session *s, struct gw_pages_out *po, struct gw_conn *conn,
		      const struct gw_batch *b, bool capped, const char *what)
{
	const struct gw_ram_block *blk = &s->vm.blocks[b->block];
	/*
	 * The guest is paused here: pages are stable, so they are copied (never
	 * sent live, no PAGES_VOID after the switch), fd-backed ones by pread.
	 */
	struct gw_ram_view ram = { b->block, blk->host, blk->fd, blk->fd_offset_bytes, NULL, false };
	double link = gw_codec_auto_link_cost(&po->autoc, gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS),
					      s->nr_channels);
	struct gw_pages_frame f;
	/* One frame at a time on this thread: buffer 0, free again once sent. */
	int ret = gw_pages_out_build(po, 0, &ram, b, gw_round(s), link, &f);

	if (ret)
		return gw_fail(s, "postcopy", ret, false, "%s: preparing pages: %s", what, strerror(-ret));
	if (!f.iovcnt)
		return 0;
	if (capped)
		gw_ratelimit(s, GW_WIRE_HDR_BYTES + f.payload_bytes);
	ret = gw_conn_send_prefix_crc(conn, GW_MSG_PAGES, f.iov, f.iovcnt, f.crc_iovcnt, NULL, NULL);
	if (ret && __atomic_load_n(&s->pcs->done, __ATOMIC_ACQUIRE))
		return ret;
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "%s: sending pages: %s", what, strerror(-ret));
	count_frame(s, &f);
	return 0;
}

static unsigned batch_pages(const struct gw_batch *b)
{
	unsigned n = 0;

	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++)
		n += (unsigned)__builtin_popcountll(b->mask[w]);
	return n;
}

/* Testing: src-pc-cut:N cuts every connection once N pages were pushed, as a broken link would. */
static void fault_cut(struct gw_session *s, struct gw_pc_src *pc, uint64_t pushed)
{
	if (!gw_fault_armed(s, GW_FAULT_SRC_PC_CUT) || pushed < gw_fault_arg(s) ||
	    __atomic_exchange_n(&pc->cut_fired, true, __ATOMIC_ACQ_REL))
		return;
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=src-pc-cut pushed=%llu action=cut",
	       (unsigned long long)pushed);
	gw_fail(s, "postcopy", -ECONNRESET, false, "fault injection: every connection cut");
}

/* One data channel: the next region of the push order, until none is left. */
static void *pusher_main(void *arg)
{
	struct pc_pusher *p = arg;
	struct gw_pc_src *pc = p->pc;
	struct gw_session *s = pc->s;
	struct gw_channel *ch = &s->chans[p->index];

	gw_log_set_side(s->side);
	while (!gw_failed(s)) {
		struct gw_batch b;
		bool got;
		uint64_t n;

		pthread_mutex_lock(&pc->lock);
		got = gw_pc_pick_next(&pc->pick, &b);
		pthread_mutex_unlock(&pc->lock);
		if (!got)
			break;
		if (send_pages(s, &ch->out, &ch->conn, &b, true, "postcopy push"))
			break;
		n = __atomic_add_fetch(&pc->pushed, batch_pages(&b), __ATOMIC_RELAXED);
		fault_cut(s, pc, n);
	}
	return NULL;
}

/* The pages of one PC_REQ, answered on the preempt connection region by region. */
static int answer(struct gw_session *s, struct gw_pc_src *pc, const struct gw_msg_pc_req *m)
{
	uint32_t region = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	uint64_t nr_pages = s->vm.blocks[m->block].size_bytes / GW_PAGE_BYTES;
	struct gw_batch b[2];		/* [0] normal, [1] zeros: never in one frame */
	int ret = 0;

	memset(b, 0, sizeof(b));
	for (uint32_t i = 0; i <= m->count && !ret; i++) {
		uint64_t page = i < m->count ? gw_msg_pc_req_page(m, i) : UINT64_MAX;
		bool zero;

		/* A batch is one region: flush when the next page lies elsewhere. */
		for (int k = 0; k < 2; k++) {
			if (b[k].nr_pages && (page == UINT64_MAX || page / region * region != b[k].first_page)) {
				ret = send_pages(s, &pc->pout, &s->preempt, &b[k], false, "preempt connection");
				if (!ret)
					__atomic_fetch_add(&pc->answered, batch_pages(&b[k]), __ATOMIC_RELAXED);
				memset(&b[k], 0, sizeof(b[k]));
			}
		}
		if (page == UINT64_MAX || ret)
			break;
		pthread_mutex_lock(&pc->lock);
		(void)gw_pc_pick_take(&pc->pick, m->block, page);
		gw_pc_pick_hint(&pc->pick, m->block, page);
		zero = gw_bitmap_test(&pc->zero[m->block], page);
		pthread_mutex_unlock(&pc->lock);
		{
			struct gw_batch *t = &b[zero];
			uint64_t first = page / region * region;

			t->block = m->block;
			t->first_page = first;
			t->nr_pages = (uint32_t)(first + region < nr_pages ? region : nr_pages - first);
			t->discard = zero;
			t->mask[(page - first) / 64] |= 1ull << ((page - first) % 64);
		}
	}
	return ret;
}

/* Page requests, answered at once: the only thread receiving on the preempt connection. */
static void *server_main(void *arg)
{
	struct gw_pc_src *pc = arg;
	struct gw_session *s = pc->s;
	uint8_t *buf = malloc(gw_frame_max_payload(GW_MSG_PC_REQ));
	union gw_msg m;

	gw_log_set_side(s->side);
	gw_thread_critical(s, "postcopy-server");
	while (buf && !gw_failed(s)) {
		char why[160] = "";
		int type = gw_conn_recv_msg(&s->preempt, &m, buf, gw_frame_max_payload(GW_MSG_PC_REQ),
					    why, sizeof(why));

		if (type < 0) {
			if (!__atomic_load_n(&pc->done, __ATOMIC_ACQUIRE) && !gw_failed(s))
				gw_fail(s, "postcopy", type, false, "preempt connection: %s%s%s",
					gw_conn_err_text(type, "destination"), why[0] ? ": " : "", why);
			break;
		}
		if (type == GW_MSG_ERROR) {
			gw_fail_from_peer(s, "postcopy", &m.error);
			break;
		}
		if (type != GW_MSG_PC_REQ) {
			gw_fail(s, "postcopy", -EPROTO, false, "unexpected %s on the preempt connection",
				gw_frame_type_name((uint16_t)type));
			break;
		}
		if (m.pc_req.block >= s->vm.nr_blocks) {
			gw_fail(s, "postcopy", -ERANGE, false, "page request for block %u of %u",
				m.pc_req.block, s->vm.nr_blocks);
			break;
		}
		for (uint32_t i = 0; i < m.pc_req.count; i++)
			if (gw_msg_pc_req_page(&m.pc_req, i) >= s->vm.blocks[m.pc_req.block].size_bytes / GW_PAGE_BYTES) {
				gw_fail(s, "postcopy", -ERANGE, false, "page request for page %llu outside block %u",
					(unsigned long long)gw_msg_pc_req_page(&m.pc_req, i), m.pc_req.block);
				goto out;
			}
		__atomic_fetch_add(&pc->requests, m.pc_req.count, __ATOMIC_RELAXED);
		if (answer(s, pc, &m.pc_req))
			break;
	}
out:
	free(buf);
	return NULL;
}

static int start_threads(struct gw_session *s, struct gw_pc_src *pc)
{
	if (pthread_create(&pc->server, NULL, server_main, pc))
		return gw_fail(s, "postcopy", -EAGAIN, false, "postcopy server thread");
	pc->server_started = true;
	for (unsigned i = 0; i < s->nr_channels; i++) {
		pc->push[i] = (struct pc_pusher){ .pc = pc, .index = i };
		if (pthread_create(&pc->push[i].thread, NULL, pusher_main, &pc->push[i]))
			return gw_fail(s, "postcopy", -EAGAIN, false, "postcopy pusher thread");
		pc->push[i].started = true;
	}
	return 0;
}

static void join_threads(struct gw_session *s, struct gw_pc_src *pc)
{
	for (unsigned i = 0; i < GW_WIRE_MAX_CHANNELS; i++)
		if (pc->push[i].started) {
			pthread_join(pc->push[i].thread, NULL);
			pc->push[i].started = false;
		}
	if (pc->server_started) {
		gw_conn_shutdown(&s->preempt);
		pthread_join(pc->server, NULL);
		pc->server_started = false;
	}
}

/* ---- recovery ---- */

int gw_postcopy_resume(struct gw_session *s, const char *url)
{
	struct gw_url u;
	char why[200];
	int ret = 0;

	if (!s || s->role != GW_ROLE_SOURCE || !url || gw_url_parse(url, &u, why, sizeof(why)))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->running || s->status != GW_STATUS_POSTCOPY_PAUSED)
		ret = s->status == GW_STATUS_POSTCOPY_RECOVER ? -EBUSY : -EINVAL;
	else if (s->pc_resume_url[0])
		ret = -EBUSY;
	else
		snprintf(s->pc_resume_url, sizeof(s->pc_resume_url), "%s", url);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		gw_log(GW_LOG_INFO, "mig", "postcopy_resume_requested", "url=%s", url);
	return ret;
}

/* The destination's map of missing pages replaces ours. 0 or -errno with @why. */
static int take_needed(struct gw_session *s, struct gw_pc_src *pc, const struct gw_msg_pc_map *m,
		       char *why, size_t why_len)
{
	struct gw_bitmap *t;
	uint64_t words;

	if (m->block >= s->vm.nr_blocks) {
		snprintf(why, why_len, "PC_NEEDED for block %u", m->block);
		return -EPROTO;
	}
	t = &pc->todo[m->block];
	words = gw_bitmap_words(t);
	if (m->first_page / 64 + m->nr_words > words) {
		snprintf(why, why_len, "PC_NEEDED beyond block %u", m->block);
		return -ERANGE;
	}
	for (uint32_t i = 0; i < m->nr_words; i++) {
		uint64_t w = gw_msg_pc_map_word(m, i), at = m->first_page / 64 + i;

		if (at == words - 1 && t->nr_bits % 64 && (w >> (t->nr_bits % 64))) {
			snprintf(why, why_len, "PC_NEEDED names pages beyond block %u", m->block);
			return -ERANGE;
		}
		t->words[at] |= w;
	}
	return 0;
}

/* PC_RECOVER, the map of what is missing, PC_RECOVERED. 0 or -errno with @why. */
static int exchange_maps(struct gw_session *s, struct gw_pc_src *pc, char *why, size_t why_len)
{
	struct gw_msg_pc_recover rec = { .recoveries = pc->recoveries + 1 };
	size_t cap = gw_frame_max_payload(GW_MSG_PC_NEEDED);
	uint8_t *buf = malloc(cap);
	uint64_t needed = 0;
	union gw_msg m;
	int ret;

	if (!buf)
		return -ENOMEM;
	memcpy(rec.id, s->mig_id, sizeof(rec.id));
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_RECOVER, &rec);
	pthread_mutex_lock(&pc->lock);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		gw_bitmap_zero(&pc->todo[i]);
	while (!ret) {
		why[0] = 0;
		ret = pc_recv(&s->ctl, &m, buf, cap, why, why_len);
		if (ret == GW_MSG_PC_NEEDED) {
			ret = take_needed(s, pc, &m.pc_map, why, why_len);
			continue;
		}
		if (ret == GW_MSG_PC_RECOVERED)
			break;
		if (ret >= 0) {
			snprintf(why, why_len, "unexpected %s", gw_frame_type_name((uint16_t)ret));
			ret = -EPROTO;
		}
	}
	for (unsigned i = 0; ret >= 0 && i < s->vm.nr_blocks; i++) {
		gw_bitmap_and(&pc->zero[i], &pc->todo[i]);
		needed += gw_bitmap_weight(&pc->todo[i]);
	}
	if (ret >= 0 && needed != m.pc_recovered.needed_pages) {
		snprintf(why, why_len, "PC_RECOVERED counts %llu missing pages, the map %llu",
			 (unsigned long long)m.pc_recovered.needed_pages, (unsigned long long)needed);
		ret = -EPROTO;
	}
	gw_pc_pick_reset(&pc->pick);
	pthread_mutex_unlock(&pc->lock);
	free(buf);
	if (ret >= 0)
		gw_log(GW_LOG_INFO, "mig", "postcopy_needed", "pages=%llu", (unsigned long long)needed);
	return ret < 0 ? ret : 0;
}

/* Connect everything again at @url_str. 0 or -errno with @why (nothing recorded). */
static int reconnect(struct gw_session *s, struct gw_pc_src *pc, const char *url_str, char *why, size_t why_len)
{
	struct gw_url url;
	char cwhy[200];
	int ret = gw_url_parse(url_str, &url, why, why_len);

	if (ret)
		return ret;
	ret = pc_connect(s, &url, &s->ctl, cwhy, sizeof(cwhy));
	if (ret) {
		snprintf(why, why_len, "cannot connect to %.100s: %.130s", url_str, cwhy);
		return ret;
	}
	ret = exchange_maps(s, pc, why, why_len);
	for (unsigned i = 0; !ret && i < s->nr_channels; i++)
		ret = open_data_conn(s, &url, &s->chans[i].conn, i, why, why_len);
	if (!ret)
		ret = open_data_conn(s, &url, &s->preempt, s->nr_channels, why, why_len);
	if (ret)
		return ret;
	gw_conn_set_recv_timeout(&s->preempt, 0);
	gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	s->url = url;
	snprintf(s->url_str, sizeof(s->url_str), "%s", url_str);
	return 0;
}

static void close_conns(struct gw_session *s)
{
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_conn_close(&s->chans[i].conn);
}

static void set_paused(struct gw_session *s, enum gw_status st, const char *reason)
{
	pthread_mutex_lock(&s->lock);
	s->status = s->stats.status = st;
	if (reason)
		snprintf(s->stats.postcopy_reason, sizeof(s->stats.postcopy_reason), "%s", reason);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
}

/*
 * A connection broke: stop everything, wait for the operator's URL, and
 * reconnect, as often as it takes. 0 once running again, or the sticky
 * error (the session is being freed).
 */
static int recover(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	char url[GW_URL_MAX], why[256];
	int ret;

	gw_session_shutdown_conns(s);
	join_threads(s, pc);
	src_join_ctl_reader(s);
	close_conns(s);
	pc->t_paused_ns = gw_now_ns();
	set_paused(s, GW_STATUS_POSTCOPY_PAUSED, NULL);
	gw_log(GW_LOG_WARN, "mig", "postcopy_paused", "pages_left=%llu resumed_seen=%d",
	       (unsigned long long)pc->pick.left_pages, pc->resumed_seen);
	for (;;) {
		pthread_mutex_lock(&s->lock);
		s->pc_resolvable = !pc->resumed_seen;
		while (!s->pc_resume_url[0] && !s->err.code && !s->pc_resolve_source)
			pthread_cond_wait(&s->cond, &s->lock);
		snprintf(url, sizeof(url), "%s", s->pc_resume_url);
		ret = s->err.code;
		if (!ret && s->pc_resolve_source && !s->pc_resume_url[0]) {
			/* The operator found the VM not running there: it is ours again. */
			__atomic_store_n(&s->err.code, -ECANCELED, __ATOMIC_RELEASE);
			snprintf(s->err.phase, sizeof(s->err.phase), "handover");
			snprintf(s->err.msg, sizeof(s->err.msg), "GO sent, RESUMED lost; the operator resolved: "
				 "the VM runs on the source");
			ret = -ECANCELED;
			c->paused = true;
		}
		s->pc_resolvable = false;
		if (!ret)
			s->status = s->stats.status = GW_STATUS_POSTCOPY_RECOVER;
		pthread_mutex_unlock(&s->lock);
		gw_emit_status(s);
		if (ret)
			return ret;
		gw_log(GW_LOG_INFO, "mig", "postcopy_recover", "url=%s", url);
		why[0] = 0;
		ret = reconnect(s, pc, url, why, sizeof(why));
		pthread_mutex_lock(&s->lock);
		s->pc_resume_url[0] = 0;
		pthread_mutex_unlock(&s->lock);
		if (!ret)
			break;
		gw_log(GW_LOG_WARN, "mig", "postcopy_recover_failed", "url=%s reason=\"%s\"", url, why);
		close_conns(s);
		set_paused(s, GW_STATUS_POSTCOPY_PAUSED, why);
	}
	pc->resumed_seen = true;	/* the destination answered the recovery: it runs the VM */
	if (!pc->t_resumed_ns)
		pc->t_resumed_ns = pc->t_paused_ns;
	pc->paused_ns += gw_now_ns() - pc->t_paused_ns;
	pc->t_paused_ns = 0;
	pc->recoveries++;
	__atomic_store_n(&s->pc_broken, 0, __ATOMIC_RELEASE);
	gw_log(GW_LOG_INFO, "mig", "postcopy_recovered", "recoveries=%u paused_ms=%.3f pages_left=%llu",
	       pc->recoveries, pc->paused_ns / 1e6, (unsigned long long)pc->pick.left_pages);
	ret = src_start_ctl_reader(s);
	if (!ret)
		ret = start_threads(s, pc);
	if (!ret)
		set_paused(s, GW_STATUS_POSTCOPY_ACTIVE, "");
	return ret;
}

/* Until PC_DONE: heartbeat, statistics; a recovery whenever a connection breaks. */
static int run(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	int ret = 0;

	if (pc->resumed_seen) {
		gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
		ret = start_threads(s, pc);
	}
	while (!ret) {
		struct timespec deadline = gw_deadline_ms(PING_MS);
		struct gw_msg_ping ping;

		pthread_mutex_lock(&s->lock);
		while (!__atomic_load_n(&pc->done, __ATOMIC_ACQUIRE) && !gw_failed(s) &&
		       pthread_cond_timedwait(&s->cond, &s->lock, &deadline) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&s->lock);
		if (__atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE))
			return __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE);
		if (gw_failed(s)) {
			ret = recover(s, c, pc);
			continue;
		}
		if (__atomic_load_n(&pc->done, __ATOMIC_ACQUIRE))
			break;
		ping.token = gw_now_ns();
		ret = gw_conn_send_msg(&s->ctl, GW_MSG_PING, &ping);
		if (ret)	/* a broken link pauses (next turn), anything else ends it */
			gw_fail(s, "postcopy", ret, false, "heartbeat: %s", strerror(-ret));
		ret = 0;
		publish(s, c, pc);
	}
	if (ret)
		return ret;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_END, NULL);
	if (ret)
		gw_log(GW_LOG_WARN, "mig", "postcopy_end_not_sent", "reason=\"%s\"", strerror(-ret));
	join_threads(s, pc);	/* after PC_END: the destination stops listening first */
	return 0;
}

int src_postcopy(struct gw_session *s, struct src_ctx *c)
{
	struct gw_pc_src *pc;
	int ret;

	c->postcopy = true;
	ret = pc_alloc(s, c);
	if (ret)
		return ret;
	pc = s->pcs;
	ret = switch_prepare(s);
	if (!ret)
		ret = switch_pause(s, c, pc);
	if (!ret)
		ret = pc_handover(s, c, pc);
	if (!ret)
		ret = run(s, c, pc);
	pthread_mutex_lock(&s->lock);
	publish_locked(s, pc);
	if (!ret) {
		s->stats.total_time_ns = pc->t_done_ns - s->t_start_ns;
		s->stats.postcopy_remaining_pages = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!ret) {
		c->handed_over = true;	/* total time final */
		c->dirty_pages = 0;
	}
	return ret;
}

/* ---- the control reader's postcopy messages ---- */

/* The destination's figures into the statistics (s->lock held). */
static void take_figures_locked(struct gw_session *s, const struct gw_msg_pc_stats *m)
{
	struct gw_stats *st = &s->stats;

	st->postcopy_remaining_pages = m->remaining_pages;
	st->postcopy_requests = m->requests;
	st->postcopy_placed_requested = m->placed_requested;
	st->postcopy_placed_pushed = m->placed_pushed;
	st->postcopy_dup_pages = m->dup_pages;
	st->postcopy_faults = m->faults;
	st->postcopy_local_faults = m->local_faults;
	st->postcopy_blocktime_ns = m->blocktime_ns;
	st->postcopy_vcpu_blocktime_total_ns = m->vcpu_blocktime_total_ns;
	st->postcopy_nr_vcpus = m->nr_vcpus;
	memcpy(st->postcopy_vcpu_blocktime_ns, m->vcpu_blocktime_ns, sizeof(st->postcopy_vcpu_blocktime_ns));
	st->postcopy_latency_p50_ns = m->latency_p50_ns;
	st->postcopy_latency_p99_ns = m->latency_p99_ns;
	st->postcopy_latency_max_ns = m->latency_max_ns;
	st->postcopy_latency_samples = m->latency_samples;
}

int src_pc_ctl_msg(struct gw_session *s, int type, const union gw_msg *m)
{
	struct gw_pc_src *pc = s->pcs;
	enum gw_pc_state state = gw_pc_state(s);

	switch (type) {
	case GW_MSG_PC_PREPARED:
		if (state != GW_PC_PREPARED)
			return -EPROTO;
		pthread_mutex_lock(&s->lock);
		s->mbox_seen |= 1u << type;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		return 0;
	case GW_MSG_PC_STATS:
	case GW_MSG_PC_DONE:
		if ((state != GW_PC_ACTIVE && state != GW_PC_DONE) || !pc)
			return -EPROTO;
		pthread_mutex_lock(&s->lock);
		take_figures_locked(s, &m->pc_stats);
		if (type == GW_MSG_PC_DONE && !pc->t_done_ns) {
			pc->t_done_ns = gw_now_ns();
			__atomic_store_n(&s->pc_state, GW_PC_DONE, __ATOMIC_RELEASE);
			__atomic_store_n(&pc->done, true, __ATOMIC_RELEASE);
			gw_log(GW_LOG_INFO, "mig", "postcopy_complete", "remaining_pages=%llu",
			       (unsigned long long)m->pc_stats.remaining_pages);
		}
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		return 0;
	default:
		return -EPROTO;
	}
}

bool src_pc_last_message(struct gw_session *s, int type)
{
	bool verify = gw_param(s, GW_PARAM_VERIFY) && !gw_param(s, GW_PARAM_LOCAL);

	return type == (verify ? GW_MSG_VERIFIED : GW_MSG_PC_DONE);
}

int src_pc_digest(struct gw_session *s, struct src_ctx *c, struct gw_digest *out)
{
	struct gw_page_digest d;
	int ret = gw_page_digest_ram(&s->vm, 2, c->free, &d);

	out->lo = d.lo;
	out->hi = d.hi;
	return ret;
}

void src_pc_release(struct gw_session *s)
{
	struct gw_pc_src *pc = s->pcs;

	if (!pc)
		return;
	join_threads(s, pc);
	for (unsigned i = 0; i < GW_MAX_RAM_BLOCKS; i++) {
		gw_bitmap_free(&pc->todo[i]);
		gw_bitmap_free(&pc->zero[i]);
	}
	if (pc->pout_ready)
		gw_pages_out_release(&pc->pout);
	pthread_mutex_destroy(&pc->lock);
	free(pc);
	s->pcs = NULL;
}
