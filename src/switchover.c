/* SPDX-License-Identifier: MIT */
/*
 * The source's switchover (everything between the pause and GO) and the
 * handover (GO, RESUMED). Inside the pause only what must be there: pause,
 * final harvest and pages, state, COMPLETE, the destination's READY.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "channel.h"
#include "mem/digest.h"
#include "source.h"

/* Wait for the control reader to deliver @type. 0 or the sticky error (-ETIMEDOUT). */
static int wait_mbox(struct gw_session *s, uint16_t type)
{
	struct timespec deadline = gw_deadline_ms((uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	while (s->mbox_type != type && !s->err.code && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&s->cond, &s->lock, &deadline);
	ret = s->mbox_type == type ? 0 : s->err.code ? s->err.code : -ETIMEDOUT;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static int pause_vm(struct gw_session *s, struct src_ctx *c)
{
	int ret;

	src_publish(s, c);
	c->switched_over = true;
	gw_set_status(s, GW_STATUS_DEVICE);
	s->t_pause_ns = gw_now_ns();
	ret = s->ops->pause(s->opaque);
	if (ret)
		return gw_fail(s, "final", ret, false, "pausing the vCPUs: %s", strerror(-ret));
	c->paused = true;
	c->bd.pause_ns = gw_now_ns() - s->t_pause_ns;
	gw_log(GW_LOG_INFO, "mig", "vm_pause", "round=%u pause_us=%llu", gw_round(s),
	       (unsigned long long)(c->bd.pause_ns / 1000));
	return 0;
}

/* Last harvest and last pages on every channel, then CHAN_END and the channel threads joined. */
static int final_pages(struct gw_session *s, struct src_ctx *c)
{
	uint64_t t = gw_now_ns();
	int ret = src_harvest(s, c);

	if (ret)
		return ret;
	c->bd.final_harvest_ns = gw_now_ns() - t;
	t = gw_now_ns();
	gw_log(GW_LOG_INFO, "mig", "final_round", "round=%u dirty_pages=%llu",
	       gw_round(s), (unsigned long long)c->dirty_pages);
	ret = src_send_round(s, c);
	if (ret)
		return ret;
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_channel_finish(&s->chans[i]);
	gw_channels_join(s);
	ret = gw_failed(s);
	if (ret)
		return ret;
	c->bd.final_send_ns = gw_now_ns() - t;
	gw_log(GW_LOG_INFO, "mig", "final_sent", "pages=%llu final_send_us=%llu",
	       (unsigned long long)c->dirty_pages, (unsigned long long)(c->bd.final_send_ns / 1000));
	c->dirty_pages = 0;
	return 0;
}

static int send_state(struct gw_session *s, struct src_ctx *c)
{
	struct gw_msg_state m = { .st = &c->state };
	uint64_t t = gw_now_ns();
	int ret = 0;

	gw_state_init(&c->state);
	if (s->ops->save_state)
		ret = s->ops->save_state(s->opaque, &c->state);
	if (ret)
		return gw_fail(s, "final", ret, false, "saving device state: %s", strerror(-ret));
	c->bd.state_save_ns = gw_now_ns() - t;
	t = gw_now_ns();
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_STATE, &m);
	if (ret)
		return gw_fail(s, "final", ret, false, "sending state: %s", strerror(-ret));
	c->bd.state_send_ns = gw_now_ns() - t;
	gw_log(GW_LOG_INFO, "mig", "state_sent", "sections=%u bytes=%zu save_us=%llu send_us=%llu",
	       gw_state_count(&c->state), c->state.total_bytes,
	       (unsigned long long)(c->bd.state_save_ns / 1000),
	       (unsigned long long)(c->bd.state_send_ns / 1000));
	return 0;
}

/* COMPLETE: totals, and the RAM digest when verifying. */
static int send_complete(struct gw_session *s, struct src_ctx *c)
{
	struct gw_msg_complete m = { .nr_channels = s->nr_channels };
	struct gw_digest dg = { 0, 0 };
	int ret;

	if (gw_param(s, GW_PARAM_VERIFY)) {
		uint64_t t = gw_now_ns();

		ret = gw_ram_digest(&s->vm, 2, &dg);
		if (ret)
			return gw_fail(s, "final", ret, false, "RAM digest: %s", strerror(-ret));
		c->bd.verify_ns = m.verify_ns = gw_now_ns() - t;
		m.flags = GW_COMPLETE_DIGEST;
		gw_log(GW_LOG_INFO, "mig", "digest", "xxh3=%016llx%016llx verify_us=%llu",
		       (unsigned long long)dg.hi, (unsigned long long)dg.lo,
		       (unsigned long long)(m.verify_ns / 1000));
	}
	m.digest_lo = dg.lo;
	m.digest_hi = dg.hi;
	for (unsigned i = 0; i < s->nr_channels; i++)
		m.total_pages += s->chans[i].pages;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_COMPLETE, &m);
	return ret ? gw_fail(s, "final", ret, false, "sending COMPLETE: %s", strerror(-ret)) : 0;
}

static int wait_ready(struct gw_session *s, struct src_ctx *c)
{
	struct gw_msg_ready r;
	int ret = wait_mbox(s, GW_MSG_READY);

	if (ret)
		return ret == -ETIMEDOUT ? gw_fail(s, "handover", ret, false,
			"destination did not answer ready within the I/O timeout") : ret;
	pthread_mutex_lock(&s->lock);
	r = s->mbox_ready;
	s->stats.verified = (r.flags & GW_READY_VERIFIED) != 0;
	pthread_mutex_unlock(&s->lock);
	c->bd.dst_load_ns = r.load_ns;
	c->bd.verify_ns += r.verify_ns;
	gw_log(GW_LOG_INFO, "mig", "ready", "verified=%d dst_load_us=%llu dst_verify_us=%llu",
	       !!(r.flags & GW_READY_VERIFIED), (unsigned long long)(r.load_ns / 1000),
	       (unsigned long long)(r.verify_ns / 1000));
	return 0;
}

int src_switchover(struct gw_session *s, struct src_ctx *c, bool local)
{
	int ret = pause_vm(s, c);

	if (!ret && !local)
		ret = final_pages(s, c);
	if (!ret)
		ret = send_state(s, c);
	if (!ret)
		ret = send_complete(s, c);
	if (ret)
		return ret;
	gw_set_status(s, GW_STATUS_HANDOVER);
	return wait_ready(s, c);
}

/* Testing: wait between READY and GO (the destination may die meanwhile). */
static void fault_delay_go(struct gw_session *s)
{
	uint64_t ms = gw_fault_arg(s);
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };

	if (!gw_fault_armed(s, GW_FAULT_SRC_DELAY_GO))
		return;
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=src-delay-go ms=%llu", (unsigned long long)ms);
	nanosleep(&ts, NULL);
}

/* GO, unless an error (cancel included) was recorded first: decided under one lock. */
static int send_go(struct gw_session *s)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = s->err.code;
	if (!ret)
		s->go_sent = true;	/* from here cancel is refused */
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_GO, NULL);
	gw_log(GW_LOG_INFO, "mig", "go_sent", "ok=%d", ret == 0);
	return ret;
}

/* RESUMED lost after GO: the VM may run there. Stay paused, say so. */
static int outcome_unknown(struct gw_session *s, int err)
{
	pthread_mutex_lock(&s->lock);
	if (!s->err.code) {
		__atomic_store_n(&s->err.code, err, __ATOMIC_RELEASE);
		snprintf(s->err.phase, sizeof(s->err.phase), "handover");
		snprintf(s->err.msg, sizeof(s->err.msg),
			 "GO sent but RESUMED not received (%s): the VM may run on the destination; "
			 "the source stays paused: ask the destination", strerror(-err));
	}
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_ERROR, "mig", "outcome_unknown",
	       "reason=\"no RESUMED after GO: source stays paused, ask the destination\"");
	gw_set_status(s, GW_STATUS_UNKNOWN);
	return 1;
}

int src_handover(struct gw_session *s, struct src_ctx *c)
{
	uint64_t t_go, rtt_ns, go_to_resume_ns, end_ns;
	struct gw_error err;
	int ret;

	fault_delay_go(s);
	ret = send_go(s);
	if (ret && !s->go_sent)
		return ret;
	t_go = gw_now_ns();
	if (!ret)
		ret = wait_mbox(s, GW_MSG_RESUMED);
	gw_error_get(s, &err);
	if (ret && err.from_peer) {
		/*
		 * The destination answered GO with ERROR: it reports that it did
		 * not resume (it sends nothing but RESUMED once the VM runs
		 * there), so the VM is still ours to run.
		 */
		gw_log(GW_LOG_WARN, "mig", "go_refused", "reason=\"%s\"", err.msg);
		return ret;
	}
	if (ret)
		return outcome_unknown(s, ret);
	rtt_ns = gw_now_ns() - t_go;
	pthread_mutex_lock(&s->lock);
	go_to_resume_ns = s->mbox_resumed.go_to_resume_ns;
	pthread_mutex_unlock(&s->lock);
	if (go_to_resume_ns > rtt_ns)
		go_to_resume_ns = rtt_ns;
	/* One way = (round trip - destination's own time) / 2. */
	c->bd.handover_ns = (rtt_ns - go_to_resume_ns) / 2 + go_to_resume_ns;
	end_ns = t_go + c->bd.handover_ns;
	pthread_mutex_lock(&s->lock);
	s->stats.downtime = c->bd;
	s->stats.downtime_ns = end_ns - s->t_pause_ns > c->bd.verify_ns ?
			       end_ns - s->t_pause_ns - c->bd.verify_ns : 0;
	s->stats.total_time_ns = end_ns - s->t_start_ns;
	pthread_mutex_unlock(&s->lock);
	c->handed_over = true;
	return 0;
}
