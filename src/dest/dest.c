/* SPDX-License-Identifier: MIT */
/*
 * The destination's migration thread: the state machine (see dest.h).
 *
 *   setup     HELLO, layout, HELLO_ACK, data channels (dest/setup.c)
 *   active    control loop: EXTENTS* (before round 0), ROUND*, STATE
 *   complete  COMPLETE: join the channels, check totals, load the state,
 *             READY
 *   handover  GO: snapshot RAM (verify), resume, RESUMED
 *   verify    the digest of RAM as at resume, taken while the guest runs
 *             (mem/snapshot.h), compared with the source's VERIFY: VERIFIED
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "net/admit.h"
#include "pipe/channel.h"
#include "dest/dest.h"
#include "mem/digest.h"
#include "mem/snapshot.h"
#include "dest/postcopy.h"
#include "util/state.h"
#include "util/fdio.h"

/* What the control loop has seen so far. */
struct dst_ctx {
	struct gw_state *state;		/* decoded STATE */
	bool have_state;
	bool round_seen;		/* a ROUND arrived: no more EXTENTS */
	uint8_t *buf;			/* control payloads (STATE is the largest) */
	size_t cap;
	struct gw_bitmap written[GW_MAX_RAM_BLOCKS];	/* the layout's bitmaps, by value */
};

/* Wait for every channel thread to see CHAN_END; check their totals. */
static int join_channels(struct gw_session *s, uint64_t total_pages)
{
	uint64_t pages = 0;
	int ret;

	gw_channels_join(s);
	ret = gw_failed(s);
	if (ret)
		return ret;
	for (unsigned i = 0; i < s->nr_channels; i++) {
		if (!s->chans[i].rx.end_seen)
			return gw_fail(s, GW_PHASE_FINAL, -EPROTO, "channel %u ended without CHAN_END", i);
		pages += s->chans[i].pages;
	}
	if (pages != total_pages)
		return gw_fail(s, GW_PHASE_FINAL, -EPROTO, "COMPLETE says %llu pages, channels received %llu",
			       (unsigned long long)total_pages, (unsigned long long)pages);
	return 0;
}

static int load_state(struct gw_session *s, struct gw_state *st)
{
	int ret;

	if (GW_FAULT_DUE(s, GW_FAULT_DST_REFUSE_STATE, 0))
		return gw_fail(s, GW_PHASE_FINAL, -ENOEXEC, "device state refused: fault injection");
	ret = s->ops->load_state(s->opaque, st);
	if (ret)
		return gw_fail(s, GW_PHASE_FINAL, -ENOEXEC, "device state refused: %s",
			       st->reject_reason[0] ? st->reject_reason : strerror(-ret));
	return 0;
}

/*
 * Precopy COMPLETE: no page may still hold what failed its CRC (a page the
 * guest wrote while it was sent live was sent again after, since the
 * source's tracker saw the write). 0 or -EBADMSG, recorded.
 */
static int no_stale_pages(struct gw_session *s)
{
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		const struct gw_dst_block *db = &s->dst->dblk[i];
		uint64_t p;

		if (!__atomic_load_n(&db->nr_stale, __ATOMIC_RELAXED))
			continue;
		p = gw_bitmap_next_set(&db->stale, 0);
		if (p < db->nr_pages)
			return gw_fail(s, GW_PHASE_FINAL, -EBADMSG, "page %llu of block %u failed its CRC "
				       "and was not sent again", (unsigned long long)p, i);
	}
	return 0;
}

/* COMPLETE: everything arrived, checked and loaded; answer READY. */
static int on_complete(struct gw_session *s, struct dst_ctx *d, const struct gw_msg_complete *m)
{
	struct gw_msg_ready ready;
	uint64_t t0 = gw_now_ns();
	int ret;

	/* COMPLETE to the resume is the critical path: rt-priority (dropped before resume). */
	gw_thread_critical(s, "switchover");
	if (m->nr_channels != s->nr_channels)
		return gw_fail(s, GW_PHASE_FINAL, -EPROTO, "COMPLETE for %u channels, %u open",
			       m->nr_channels, s->nr_channels);
	if (!d->have_state)
		return gw_fail(s, GW_PHASE_FINAL, -EPROTO, "COMPLETE before STATE");
	if (!(m->flags & GW_COMPLETE_POSTCOPY) != !s->dst->pcd)
		return gw_fail(s, GW_PHASE_FINAL, -EPROTO, "COMPLETE %s postcopy after %s",
			       s->dst->pcd ? "without" : "with", s->dst->pcd ? "PC_PREPARE" : "no PC_PREPARE");
	ret = join_channels(s, m->total_pages);
	if (!ret)
		ret = s->dst->pcd ? pcd_complete(s) : no_stale_pages(s);
	if (ret)
		return ret;
	gw_log(GW_LOG_INFO, "mig", "final_received", "pages=%llu",
	       (unsigned long long)(__atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
				    __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED) +
				    __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED)));
	GW_FAULT_POINT(s, GW_FAULT_DST_FINAL, 0);
	ret = load_state(s, d->state);
	if (ret)
		return ret;
	ready.load_ns = gw_now_ns() - t0;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_READY, &ready);
	if (ret)
		return gw_fail(s, GW_PHASE_HANDOVER, ret, "sending READY: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "mig", "ready_sent", "load_us=%llu", (unsigned long long)(ready.load_ns / 1000));
	GW_FAULT_POINT(s, GW_FAULT_DST_AFTER_READY, 0);
	return 0;
}

/*
 * Testing: one byte of the first page this migration wrote is changed
 * before resume. A local migration writes none: then the first page of the
 * last block (guest RAM in both VMMs), which the guest's own check reads.
 */
static void fault_corrupt_page(struct gw_session *s)
{
	bool local = s->dst->hello_flags & GW_HELLO_LOCAL;

	if (!GW_FAULT_DUE(s, GW_FAULT_DST_CORRUPT_PAGE, 0))
		return;
	for (unsigned i = local ? s->vm.nr_blocks - 1 : 0; i < s->vm.nr_blocks; i++) {
		struct gw_dst_block *db = &s->dst->dblk[i];
		uint64_t p = local ? 0 : gw_bitmap_next_set(&db->written, 0);
		uint8_t byte;

		if (p >= db->nr_pages)
			continue;
		gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=dst-corrupt-page block=%u page=%llu",
		       i, (unsigned long long)p);
		if (db->fd >= 0 && !gw_pread_all(db->fd, &byte, 1, (off_t)(db->fd_offset_bytes + p * GW_PAGE_BYTES))) {
			byte ^= 0x5a;
			(void)gw_pwrite_all(db->fd, &byte, 1, (off_t)(db->fd_offset_bytes + p * GW_PAGE_BYTES));
		} else {
			db->host[p * GW_PAGE_BYTES] ^= 0x5a;
		}
		return;
	}
}

/*
 * Verification (HELLO_VERIFY, not local): protect what this migration
 * wrote that is not protected yet (most was, during precopy), so that its
 * digest can be taken as at resume while the guest runs. Pages it did not
 * write are still the zero they started as.
 */
static void snapshot_arm(struct gw_session *s, struct dst_ctx *d)
{
	int ret;

	if (!s->snap)
		return;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		d->written[i] = s->dst->dblk[i].written;
	ret = gw_snapshot_arm(s->snap, d->written);
	if (ret) {
		/* Freed at the end, after the populate thread, which may still protect ahead. */
		gw_log(GW_LOG_WARN, "mig", "snapshot_unavailable", "err=\"%s\"", strerror(-ret));
		s->dst->snap_err = ret;
	}
}

/* After READY only GO (or ERROR) may come; then resume and answer RESUMED. */
static int wait_go_and_resume(struct gw_session *s, struct dst_ctx *d)
{
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	struct gw_msg_resumed resumed;
	uint64_t t_go;
	union gw_msg m;
	int type, ret;

	/* The source sends GO right after READY: a long silence means it is gone. */
	gw_conn_watch_progress(&s->ctl, NULL);
	gw_conn_set_idle_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	type = gw_conn_recv_msg(&s->ctl, &m, buf, sizeof(buf), NULL, 0);
	if (type < 0)
		return gw_fail(s, GW_PHASE_HANDOVER, type, "waiting for GO: %s", gw_conn_err_text(type, "source"));
	if (type == GW_MSG_ERROR)
		return gw_fail_from_peer(s, GW_PHASE_HANDOVER, &m.error);
	if (type != GW_MSG_GO)
		return gw_fail(s, GW_PHASE_HANDOVER, -EPROTO, "the source broke the protocol: it sent %s "
			       "where GO was due", gw_frame_type_name((uint16_t)type));
	t_go = gw_now_ns();
	GW_FAULT_POINT(s, GW_FAULT_DST_AFTER_GO, 0);
	fault_corrupt_page(s);
	if (s->dst->pcd)
		pcd_go(s);
	else
		snapshot_arm(s, d);
	/*
	 * Still at rt-priority: dropped before the resume, this thread waited
	 * for a CPU behind the postcopy threads that GO starts on both sides
	 * (0.5 ms of a 3 ms downtime here). The VMM's threads set their own
	 * policy (gw_vm_ops.resume).
	 */
	ret = s->ops->resume(s->opaque);
	resumed.resume_mono_ns = gw_now_ns();
	gw_thread_normal(s);
	resumed.go_to_resume_ns = resumed.resume_mono_ns - t_go;
	gw_log(GW_LOG_INFO, "mig", "vm_resume", "where=destination ok=%d go_to_resume_us=%llu",
	       ret == 0, (unsigned long long)(resumed.go_to_resume_ns / 1000));
	if (ret)
		return gw_fail(s, GW_PHASE_HANDOVER, ret, "resuming the VM failed: %s", strerror(-ret));
	if (s->dst->pcd)
		pcd_resumed(s);
	/* The VM runs here now: a lost RESUMED does not change that (postcopy: a recovery follows). */
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_RESUMED, &resumed);
	if (ret && s->dst->pcd)
		gw_fail(s, GW_PHASE_HANDOVER, ret, "sending RESUMED: %s", strerror(-ret));
	else if (ret)
		gw_log(GW_LOG_WARN, "mig", "resumed_not_sent", "reason=\"source gone after GO\"");
	return 0;
}

static int on_round(struct gw_session *s, struct dst_ctx *d, const struct gw_msg_round *m)
{
	uint32_t cur = gw_round(s);

	/* Round 0 first, then strictly increasing. */
	if (d->round_seen ? m->round <= cur : m->round != 0)
		return gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "ROUND %u after round %u", m->round, cur);
	if (!d->round_seen)
		dst_populate_start(s);
	d->round_seen = true;
	__atomic_store_n(&s->round, m->round, __ATOMIC_RELAXED);
	/* As the source counts them: precopy rounds done (the final ROUND is number "rounds"). */
	pthread_mutex_lock(&s->lock);
	s->stats.rounds = m->round;
	pthread_mutex_unlock(&s->lock);
	gw_debug("mig", "round_start", "round=%u dirty_pages=%llu", m->round,
		 (unsigned long long)m->dirty_pages);
	gw_emit_round(s, m->round, m->dirty_pages, false);
	GW_FAULT_POINT(s, GW_FAULT_DST_ROUND_N, m->round);
	GW_FAULT_POINT(s, GW_FAULT_DST_STALL, m->round);
	return 0;
}

/*
 * One control message. 0 or the sticky error; *@resumed once COMPLETE was
 * handled through RESUMED (the VM runs here: the control loop is over).
 */
static int control_one(struct gw_session *s, struct dst_ctx *d, int type, union gw_msg *m, bool *resumed)
{
	int ret;

	switch (type) {
	case GW_MSG_EXTENTS:
		ret = d->round_seen ? -EPROTO : dst_extents_add(s, &m->extents);
		return ret ? gw_fail(s, GW_PHASE_RECEIVE, ret, "bad EXTENTS frame") : 0;
	case GW_MSG_PC_PREPARE:
		dst_progress(s);
		return d->have_state ? gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "PC_PREPARE after STATE") :
		       pcd_prepare(s);
	case GW_MSG_PC_DIRTY:
		return pcd_dirty(s, &m->pc_map);
	case GW_MSG_ROUND:
		return on_round(s, d, &m->round);
	case GW_MSG_STATE:	/* a second one fails to decode (no state to fill) */
		gw_events_hold(s);	/* the source is paused: none until the resume (events.c) */
		gw_set_status(s, GW_STATUS_DEVICE);
		d->have_state = true;
		dst_progress(s);
		return 0;
	case GW_MSG_COMPLETE:
		dst_progress(s);
		gw_conn_set_wait_end(&s->ctl, 0);	/* the precopy is over: its bound too */
		gw_set_status(s, GW_STATUS_HANDOVER);
		ret = on_complete(s, d, &m->complete);
		if (!ret)
			ret = wait_go_and_resume(s, d);
		gw_events_release(s);
		*resumed = !ret;
		return ret;
	case GW_MSG_PING:	/* answered at once: the source measures the round trip */
		m->ping.backlog_bytes = 0;
		for (unsigned i = 0; i < s->nr_channels; i++)
			m->ping.backlog_bytes += gw_conn_queued_bytes(&s->chans[i].conn, true);
		ret = gw_conn_send_msg(&s->ctl, GW_MSG_PONG, &m->ping);
		return ret ? gw_fail(s, GW_PHASE_RECEIVE, ret, "sending PONG: %s", strerror(-ret)) : 0;
	case GW_MSG_ERROR:
		return gw_fail_from_peer(s, GW_PHASE_RECEIVE, &m->error);
	default:
		return gw_fail(s, GW_PHASE_RECEIVE, -EPROTO, "unexpected %s frame on control",
			       gw_frame_type_name((uint16_t)type));
	}
}

static void set_verify(struct gw_session *s, enum gw_verify v, const struct gw_msg_verified *m)
{
	pthread_mutex_lock(&s->lock);
	s->stats.verify = v;
	s->stats.verified = v == GW_VERIFY_OK;
	if (m) {
		s->stats.verify_dst_ns = m->verify_ns;
		s->stats.verify_faults = m->snapshot_faults;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Our digest as at resume (while the guest runs), ready for the comparison. */
static void snapshot_digest(struct gw_session *s, struct dst_ctx *d, struct gw_msg_verified *v)
{
	uint64_t t = gw_now_ns(), pc_faults = 0;
	struct gw_digest mine;
	int ret = s->dst->pcd ? pcd_digest(s, &mine, &pc_faults) :
		  s->dst->snap_err ? s->dst->snap_err : !s->snap ? -EOPNOTSUPP : gw_snapshot_digest(s->snap, 2, &mine);

	if (ret) {
		gw_log(GW_LOG_WARN, "mig", "verify_unavailable", "err=\"%s\"", strerror(-ret));
		v->flags = GW_VERIFIED_UNAVAILABLE;
	} else {
		*v = (struct gw_msg_verified){ .digest_lo = mine.lo, .digest_hi = mine.hi,
					       .verify_ns = gw_now_ns() - t,
					       .snapshot_faults = s->dst->pcd ? pc_faults : gw_snapshot_faults(s->snap) };
	}
	/* Every chunk is unprotected now; the snapshot is freed after the populate thread. */
}

/*
 * After RESUMED: compare our digest as at resume with the source's (VERIFY),
 * answer VERIFIED. The VM runs here whatever the answer: a mismatch is
 * reported loudly on both sides, and the source keeps its copy.
 */
static void dst_verify(struct gw_session *s, struct dst_ctx *d)
{
	uint64_t wait_ms = gw_verify_wait_ms(s);
	struct gw_msg_verified v = { 0 };
	enum gw_verify result;
	union gw_msg m;
	int type;

	if (!(s->dst->hello_flags & GW_HELLO_VERIFY) || (s->dst->hello_flags & GW_HELLO_LOCAL))
		return;
	set_verify(s, GW_VERIFY_PENDING, NULL);
	snapshot_digest(s, d, &v);
	gw_conn_watch_progress(&s->ctl, NULL);
	gw_conn_set_idle_timeout(&s->ctl, wait_ms);
	type = gw_conn_recv_msg(&s->ctl, &m, d->buf, d->cap, NULL, 0);
	if (type != GW_MSG_VERIFY) {
		gw_log(GW_LOG_WARN, "mig", "verify_unknown", "reason=\"no VERIFY from the source (%s)\"",
		       type < 0 ? gw_conn_err_text(type, "source") : gw_frame_type_name((uint16_t)type));
		set_verify(s, GW_VERIFY_UNKNOWN, &v);
		return;
	}
	if (!(v.flags & GW_VERIFIED_UNAVAILABLE) && v.digest_lo == m.verify.digest_lo &&
	    v.digest_hi == m.verify.digest_hi)
		v.flags |= GW_VERIFIED_MATCH;
	if (gw_conn_send_msg(&s->ctl, GW_MSG_VERIFIED, &v))
		gw_log(GW_LOG_WARN, "mig", "verified_not_sent", "reason=\"source gone\"");
	result = (v.flags & GW_VERIFIED_UNAVAILABLE) ? GW_VERIFY_UNKNOWN :
		 (v.flags & GW_VERIFIED_MATCH) ? GW_VERIFY_OK : GW_VERIFY_MISMATCH;
	set_verify(s, result, &v);
	gw_log(result == GW_VERIFY_MISMATCH ? GW_LOG_ERROR : GW_LOG_INFO, "mig",
	       result == GW_VERIFY_OK ? "verified" : result == GW_VERIFY_MISMATCH ? "verify_mismatch" : "verify_unknown",
	       "source=%016llx%016llx destination=%016llx%016llx dst_us=%llu faults=%llu",
	       (unsigned long long)m.verify.digest_hi, (unsigned long long)m.verify.digest_lo,
	       (unsigned long long)v.digest_hi, (unsigned long long)v.digest_lo,
	       (unsigned long long)(v.verify_ns / 1000), (unsigned long long)v.snapshot_faults);
}

/*
 * When the precopy must be over (precopy-limit-ms from the HELLO; by
 * default 60 s plus 1 s per 64 MiB announced): a source that trickles
 * pages cannot hold this destination for ever.
 */
static uint64_t precopy_end_ns(struct gw_session *s)
{
	uint64_t limit_ms = (uint64_t)gw_param(s, GW_PARAM_PRECOPY_LIMIT_MS), t0;

	pthread_mutex_lock(&s->lock);
	t0 = s->t_start_ns;
	if (!limit_ms)
		limit_ms = 60000 + (s->stats.ram_total_bytes >> 26) * 1000;
	pthread_mutex_unlock(&s->lock);
	return t0 + limit_ms * 1000000ull;
}

/* A wait on the control connection timed out: the precopy's bound, or a stall. */
static int control_timeout(struct gw_session *s, uint64_t end_ns)
{
	if (gw_now_ns() >= end_ns)
		return gw_fail(s, GW_PHASE_RECEIVE, -ETIMEDOUT, "the precopy did not end within %llu ms "
			       "(precopy-limit-ms)", (unsigned long long)((end_ns - s->t_start_ns) / 1000000));
	return gw_fail(s, GW_PHASE_RECEIVE, -ETIMEDOUT, "the source sent no pages for %lld ms: the migration "
		       "stalled", (long long)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
}

static int control_loop(struct gw_session *s)
{
	uint64_t end_ns = precopy_end_ns(s);
	struct dst_ctx d = { .cap = gw_frame_max_payload(GW_MSG_STATE) };
	union gw_msg *m = malloc(sizeof(*m));
	bool resumed = false, verify;
	int ret = 0;

	d.buf = malloc(d.cap);
	d.state = calloc(1, sizeof(*d.state));
	if (!d.buf || !d.state || !m) {
		ret = gw_fail(s, GW_PHASE_RECEIVE, -ENOMEM, "no memory");
		goto out;
	}
	gw_state_init(d.state);
	/*
	 * The control connection is quiet while the data connections carry
	 * pages: its waits end when nothing arrived anywhere for io-timeout-ms.
	 */
	dst_conn_watch(s, &s->ctl);
	gw_conn_set_wait_end(&s->ctl, end_ns);
	while (!ret && !resumed) {
		char why[160];
		int type;

		m->state.st = d.have_state ? NULL : d.state;	/* a second STATE is refused */
		type = gw_conn_recv_msg(&s->ctl, m, d.buf, d.cap, why, sizeof(why));
		if (type == -ETIMEDOUT && !gw_failed(s))
			ret = control_timeout(s, end_ns);
		else if (type < 0)
			ret = gw_failed(s) ? gw_failed(s) :
				gw_fail(s, GW_PHASE_RECEIVE, type, "control connection: %s%s%s",
					gw_conn_err_text(type, "source"), why[0] ? ": " : "", why);
		else
			ret = control_one(s, &d, type, m, &resumed);
	}
	verify = !ret;
	if (!ret && s->dst->pcd) {
		/* Postcopy: the migration goes on until every page is here (hashing at its end). */
		bool unverified;

		ret = pcd_run(s, d.buf, d.cap, &unverified);
		verify = !ret && !unverified;	/* completed, but the source gone before PC_END */
	}
	gw_thread_normal(s);	/* a failure between COMPLETE and the resume left it raised */
	if (verify)
		dst_verify(s, &d);
out:
	if (d.state)
		gw_state_release(d.state);
	free(d.state);
	free(d.buf);
	free(m);
	return ret;
}

/* The live channels' counters into s->stats_chan_* (s->lock held); their sum. */
static uint64_t gw_dst_channels_locked(struct gw_session *s)
{
	uint64_t bytes = 0;

	for (unsigned i = 0; s->chans && i < s->nr_channels && i < GW_WIRE_MAX_CHANNELS; i++) {
		const struct gw_channel *ch = &s->chans[i];

		s->stats_chan_bytes[i] = __atomic_load_n(&ch->conn.bytes_recv, __ATOMIC_RELAXED);
		bytes += s->stats_chan_bytes[i];
		for (unsigned c = 0; c < GW_CODEC__COUNT; c++)
			s->stats_chan_codec_bytes[i][c] = __atomic_load_n(&ch->codec_bytes[c], __ATOMIC_RELAXED);
	}
	return bytes;
}

/*
 * The figures of what this side received so far (bytes on every connection,
 * the page rate) into @st, and per channel and per codec into the channel
 * rows, from the connections' atomic counters. Caller holds s->lock (the
 * channel array).
 */
static void gw_dst_stats_locked(struct gw_session *s, struct gw_stats *st)
{
	uint64_t pages, now_ns = gw_now_ns();
	uint64_t elapsed_ns = s->t_start_ns && now_ns > s->t_start_ns ? now_ns - s->t_start_ns : 0;
	uint64_t bytes = __atomic_load_n(&s->ctl.bytes_recv, __ATOMIC_RELAXED);

	if (!s->t_start_ns)
		return;		/* no HELLO yet: nothing received */
	st->normal_pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED);
	st->duplicate_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
	st->xbzrle_pages = __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	st->normal_bytes = st->normal_pages * GW_PAGE_BYTES;
	st->payload_bytes_raw = __atomic_load_n(&s->ctr_raw_bytes, __ATOMIC_RELAXED);
	st->payload_bytes_wire = __atomic_load_n(&s->ctr_wire_payload_bytes, __ATOMIC_RELAXED);
	if (s->chans)
		st->nr_channels = s->nr_channels;
	bytes += gw_dst_channels_locked(s);
	/* Once the channels are gone, the last figures taken stay. */
	if (s->chans || !st->transferred_bytes)
		st->transferred_bytes = bytes;
	if (s->status != GW_STATUS_COMPLETED && s->status != GW_STATUS_FAILED &&
	    s->status != GW_STATUS_CANCELLED && elapsed_ns) {
		pages = st->normal_pages + st->duplicate_pages + st->xbzrle_pages;
		st->total_time_ns = elapsed_ns;
		st->pages_per_second = (uint64_t)((double)pages * 1e9 / (double)elapsed_ns);
		st->rate_bps = (uint64_t)((double)st->transferred_bytes * 1e9 / (double)elapsed_ns);
	}
}

/* The destination's last counters (its channels are gone by now), s->lock held. */
static void final_stats_locked(struct gw_session *s)
{
	s->stats.nr_channels = s->nr_channels;
	s->stats.normal_pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED);
	s->stats.duplicate_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
	s->stats.xbzrle_pages = __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	s->stats.normal_bytes = s->stats.normal_pages * GW_PAGE_BYTES;
	s->stats.total_time_ns = s->t_start_ns ? gw_now_ns() - s->t_start_ns : 0;
}

static void dst_end(struct gw_session *s, int ret)
{
	struct gw_end end = { .status = ret ? GW_STATUS_FAILED : GW_STATUS_COMPLETED,
			      .vm = "not_resumed", .stats_locked = final_stats_locked };
	bool idle;

	pthread_mutex_lock(&s->lock);
	idle = !s->t_start_ns;
	pthread_mutex_unlock(&s->lock);
	/* Stopped before any source arrived (gw_session_cancel): nothing failed. */
	if (ret == -ECANCELED && idle) {
		end.status = GW_STATUS_CANCELLED;
		end.quiet = true;
	}
	gw_end_publish(s, &end);
}

static void *gw_dest_main(void *arg)
{
	struct gw_session *s = arg;
	int ret;

	gw_log_set_side(s->side);
	__atomic_store_n(&s->round, 0, __ATOMIC_RELAXED);
	ret = dst_handshake(s);
	if (!ret)
		ret = dst_accept_channels(s);
	if (!ret) {
		gw_set_status(s, GW_STATUS_ACTIVE);
		pthread_mutex_lock(&s->lock);
		s->stats.setup_time_ns = gw_now_ns() - s->t_start_ns;
		pthread_mutex_unlock(&s->lock);
		ret = control_loop(s);
		gw_events_release(s);	/* a failure after STATE */
	}
	__atomic_store_n(&s->ctl_quiet, true, __ATOMIC_RELEASE);
	if (ret)
		gw_session_shutdown_conns(s);
	gw_channels_join(s);
	pcd_release(s);
	dst_populate_end(s);
	gw_snapshot_free(s->snap);	/* after the populate thread, which protects ahead */
	s->snap = NULL;
	pthread_mutex_lock(&s->lock);
	gw_dst_stats_locked(s, &s->stats);
	pthread_mutex_unlock(&s->lock);
	gw_channels_destroy(s);
	gw_conn_close(&s->ctl);
	dst_layout_release(s);
	gw_admit_close(s->adm, ret ? "its migration failed" : "it received its VM");
	dst_end(s, ret);
	return NULL;
}

const struct gw_role_ops gw_dest_role = {
	.name = "destination",
	.main = gw_dest_main,
	.stats_locked = gw_dst_stats_locked,
	.channels_locked = gw_dst_channels_locked,
	.shutdown_channels = gw_channels_shutdown,
};
