/* SPDX-License-Identifier: MIT */
/*
 * The source's switchover (everything between the pause and GO; the
 * handover itself is handover.c) and, after it, the verification of the
 * two RAM digests. Inside the pause only what must be there: pause, final
 * harvest and pages, state, COMPLETE, the destination's READY. Each step
 * stamps src_times; the downtime breakdown is their differences, so its
 * parts add up to the downtime: pause request to the destination's resume.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "pipe/channel.h"
#include "mem/digest.h"
#include "source/postcopy.h"
#include "source/source.h"

int src_wait_mbox(struct gw_session *s, uint16_t type, uint64_t timeout_ms)
{
	struct timespec deadline = gw_deadline_ms(timeout_ms);
	uint32_t bit = 1u << type;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	while (!(s->src->mbox_seen & bit) && !gw_failed(s) && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&s->cond, &s->lock, &deadline);
	ret = (s->src->mbox_seen & bit) ? 0 : gw_failed(s) ? gw_failed(s) : -ETIMEDOUT;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/*
 * pause-before-switchover: the VM is paused already; wait, with the VM
 * paused and observers awake, for gw_session_continue() or the first
 * error (a cancel: the failure path resumes the VM here).
 */
static int pre_switchover_wait(struct gw_session *s)
{
	uint64_t t0_ns = gw_now_ns();
	int ret;

	/* Waiting before it says so: a continue sent on the status event counts. */
	pthread_mutex_lock(&s->lock);
	s->src->pre_switchover = true;
	pthread_mutex_unlock(&s->lock);
	gw_set_status(s, GW_STATUS_PRE_SWITCHOVER);
	gw_log(GW_LOG_INFO, "mig", "pre_switchover", "round=%u", gw_round(s));
	pthread_mutex_lock(&s->lock);
	while (!s->src->continued && !gw_failed(s))
		pthread_cond_wait(&s->cond, &s->lock);
	s->src->pre_switchover = false;
	ret = gw_failed(s);
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		gw_log(GW_LOG_INFO, "mig", "continue", "waited_us=%llu",
		       (unsigned long long)((gw_now_ns() - t0_ns) / 1000));
	return ret;
}

int gw_session_continue(struct gw_session *s)
{
	int ret = -EINVAL;

	if (!s || s->role != GW_ROLE_SOURCE)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->src->pre_switchover && !s->src->continued) {
		s->src->continued = true;
		pthread_cond_broadcast(&s->cond);
		ret = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static int vm_pause_now(struct gw_session *s, struct src_ctx *c)
{
	int ret;

	c->t.pause = gw_now_ns();
	ret = s->ops->pause(s->opaque);
	if (ret)
		return gw_fail(s, GW_PHASE_FINAL, ret, "pausing the vCPUs: %s", strerror(-ret));
	c->paused = true;
	c->t.paused = gw_now_ns();
	gw_log(GW_LOG_INFO, "mig", "vm_pause", "round=%u pause_us=%llu", gw_round(s),
	       (unsigned long long)((c->t.paused - c->t.pause) / 1000));
	return 0;
}

int src_pause_vm(struct gw_session *s, struct src_ctx *c)
{
	bool wait = gw_param(s, GW_PARAM_PAUSE_BEFORE_SWITCHOVER);
	int ret;

	src_publish(s, c);
	c->switched_over = true;
	if (s->ops->hints_stop)
		s->ops->hints_stop(s->opaque);
	pthread_mutex_lock(&s->src->hint_lock);
	s->src->hint_target = NULL;	/* the VM stops: no more hints */
	s->src->hint_free = NULL;
	pthread_mutex_unlock(&s->src->hint_lock);
	/* The downtime counts from this pause, the wait for a continue included. */
	if (wait && ((ret = vm_pause_now(s, c)) || (ret = pre_switchover_wait(s))))
		return ret;
	if (wait)
		c->t.paused = gw_now_ns();	/* the breakdown's pause part holds the wait */
	gw_events_hold(s);	/* to the resume: no observer wakes inside the downtime */
	gw_set_status(s, GW_STATUS_DEVICE);
	/* The pause to the resume is the critical path: rt-priority from here (gw_thread_normal after). */
	gw_thread_critical(s, "switchover");
	return wait ? 0 : vm_pause_now(s, c);
}

/* The last harvest; the last pages (and the discards) queued on every channel. */
static int final_pages_queue(struct gw_session *s, struct src_ctx *c, bool local)
{
	int ret;

	c->t.harvested = c->t.queued = c->t.paused;
	if (local)
		return 0;
	ret = src_harvest_last(s, c);
	if (ret)
		return ret;
	c->t.harvested = gw_now_ns();
	gw_log(GW_LOG_INFO, "mig", "final_round", "round=%u dirty_pages=%llu",
	       gw_round(s), (unsigned long long)c->dirty_pages);
	gw_emit_round(s, gw_round(s), c->dirty_pages, true);
	ret = src_queue_round(s, c, 0);
	if (!ret)
		ret = src_queue_discards(s, c);
	c->t.queued = gw_now_ns();
	return ret;
}

int src_end_channels(struct gw_session *s)
{
	int ret = src_drain(s);

	if (ret)
		return ret;
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_channel_finish(&s->chans[i]);
	gw_channels_join(s);
	return gw_failed(s);
}

/* The final pages out, the channels ended. */
static int final_pages_end(struct gw_session *s, struct src_ctx *c, bool local)
{
	int ret;

	c->t.pages_sent = c->t.state_sent;
	if (local)
		return 0;
	ret = src_end_channels(s);
	if (ret)
		return ret;
	c->t.pages_sent = gw_now_ns();
	gw_log(GW_LOG_INFO, "mig", "final_sent", "pages=%llu queue_us=%llu after_state_us=%llu",
	       (unsigned long long)c->dirty_pages,
	       (unsigned long long)((c->t.queued - c->t.harvested) / 1000),
	       (unsigned long long)((c->t.pages_sent - c->t.state_sent) / 1000));
	c->dirty_pages = 0;
	return 0;
}

/* Saved and sent while the channels still send the last pages they hold. */
int src_send_state(struct gw_session *s, struct src_ctx *c)
{
	struct gw_msg_state m = { .st = &c->state };
	int ret = 0;

	gw_state_init(&c->state);
	if (s->ops->save_state)
		ret = s->ops->save_state(s->opaque, &c->state);
	if (ret)
		return gw_fail(s, GW_PHASE_FINAL, ret, "saving device state: %s", strerror(-ret));
	c->t.state_saved = gw_now_ns();
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_STATE, &m);
	if (ret)
		return gw_fail(s, GW_PHASE_FINAL, ret, "sending state: %s", strerror(-ret));
	c->t.state_sent = gw_now_ns();
	gw_log(GW_LOG_INFO, "mig", "state_sent", "sections=%u bytes=%zu save_us=%llu send_us=%llu",
	       gw_state_count(&c->state), c->state.total_bytes,
	       (unsigned long long)((c->t.state_saved - c->t.queued) / 1000),
	       (unsigned long long)((c->t.state_sent - c->t.state_saved) / 1000));
	return 0;
}

/* COMPLETE (totals, @flags), then the destination's READY. */
int src_complete_and_ready(struct gw_session *s, struct src_ctx *c, uint32_t flags)
{
	struct gw_msg_complete m = { .nr_channels = s->nr_channels, .flags = flags };
	struct gw_msg_ready r;
	int ret;

	for (unsigned i = 0; i < s->nr_channels; i++)
		m.total_pages += s->chans[i].pages;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_COMPLETE, &m);
	if (ret)
		return gw_fail(s, GW_PHASE_FINAL, ret, "sending COMPLETE: %s", strerror(-ret));
	gw_set_status(s, GW_STATUS_HANDOVER);
	ret = src_wait_mbox(s, GW_MSG_READY, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	if (ret)
		return ret == -ETIMEDOUT ? gw_fail(s, GW_PHASE_HANDOVER, ret,
			"destination did not answer ready within the I/O timeout") : ret;
	c->t.ready = gw_now_ns();
	pthread_mutex_lock(&s->lock);
	r = s->src->mbox_ready;
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_INFO, "mig", "ready", "dst_load_us=%llu round_trip_us=%llu",
	       (unsigned long long)(r.load_ns / 1000),
	       (unsigned long long)((c->t.ready - c->t.pages_sent) / 1000));
	return 0;
}

int src_switchover(struct gw_session *s, struct src_ctx *c, bool local)
{
	int ret = src_pause_vm(s, c);

	if (!ret)
		ret = final_pages_queue(s, c, local);
	if (!ret)
		ret = src_send_state(s, c);
	if (!ret)
		ret = final_pages_end(s, c, local);
	return ret ? ret : src_complete_and_ready(s, c, 0);
}

static void set_verify(struct gw_session *s, enum gw_verify v, uint64_t src_ns,
		       const struct gw_msg_verified *m)
{
	pthread_mutex_lock(&s->lock);
	s->stats.verify = v;
	s->stats.verified = v == GW_VERIFY_OK;
	s->stats.verify_src_ns = src_ns;
	if (m) {
		s->stats.verify_dst_ns = m->verify_ns;
		s->stats.verify_faults = m->snapshot_faults;
	}
	pthread_mutex_unlock(&s->lock);
}

/*
 * After GO the source's VM never runs again unless the operator says so:
 * its RAM is frozen, so it is hashed now, out of the downtime. The
 * destination hashed its RAM as it was at resume (mem/snapshot.h) and
 * compares. A mismatch is loud; the source keeps its copy for the operator.
 */
void src_verify(struct gw_session *s, struct src_ctx *c)
{
	struct gw_msg_verify m = { 0 };
	struct gw_msg_verified v;
	struct gw_digest dg;
	uint64_t t = gw_now_ns();
	int ret;

	if (!gw_param(s, GW_PARAM_VERIFY) || gw_param(s, GW_PARAM_LOCAL))
		return;
	set_verify(s, GW_VERIFY_PENDING, 0, NULL);
	/* Free pages are zeros on the destination (never sent, or discarded). */
	ret = c->postcopy ? pcs_digest(s, c, &dg) : gw_ram_digest_except(&s->vm, 2, c->free, &dg);
	m = (struct gw_msg_verify){ dg.lo, dg.hi, gw_now_ns() - t };
	if (!ret)
		ret = gw_conn_send_msg(&s->ctl, GW_MSG_VERIFY, &m);
	if (!ret)
		ret = src_wait_mbox(s, GW_MSG_VERIFIED, gw_verify_wait_ms(s));
	if (ret) {
		gw_log(GW_LOG_WARN, "mig", "verify_unknown", "reason=\"%s\"", strerror(-ret));
		set_verify(s, GW_VERIFY_UNKNOWN, m.verify_ns, NULL);
		return;
	}
	pthread_mutex_lock(&s->lock);
	v = s->src->mbox_verified;
	pthread_mutex_unlock(&s->lock);
	if (v.flags & GW_VERIFIED_UNAVAILABLE) {
		gw_log(GW_LOG_WARN, "mig", "verify_unknown", "reason=\"the destination cannot snapshot its RAM\"");
		set_verify(s, GW_VERIFY_UNKNOWN, m.verify_ns, &v);
		return;
	}
	set_verify(s, (v.flags & GW_VERIFIED_MATCH) ? GW_VERIFY_OK : GW_VERIFY_MISMATCH, m.verify_ns, &v);
	gw_log((v.flags & GW_VERIFIED_MATCH) ? GW_LOG_INFO : GW_LOG_ERROR, "mig",
	       (v.flags & GW_VERIFIED_MATCH) ? "verified" : "verify_mismatch",
	       "source=%016llx%016llx destination=%016llx%016llx src_us=%llu dst_us=%llu faults=%llu%s",
	       (unsigned long long)m.digest_hi, (unsigned long long)m.digest_lo,
	       (unsigned long long)v.digest_hi, (unsigned long long)v.digest_lo,
	       (unsigned long long)(m.verify_ns / 1000), (unsigned long long)(v.verify_ns / 1000),
	       (unsigned long long)v.snapshot_faults,
	       (v.flags & GW_VERIFIED_MATCH) ? "" : " action=\"the source keeps its copy: resolve\"");
}
