/* SPDX-License-Identifier: MIT */
/*
 * The handover, the protocol's riskiest step, written once for precopy and
 * postcopy: GO, then RESUMED (docs/protocol.md#handover-and-failure-semantics).
 * Exactly one copy of the VM may run, so each way out says who owns it:
 *
 *   GO withheld    an error or a cancel came first, or the destination has
 *                  just closed the control connection: the VM is ours
 *                  (c->paused), the caller resumes it. GW_SRC_FAILED.
 *   GO refused     an ERROR from the destination after GO: it reports that
 *                  it did not resume (it sends nothing but RESUMED once the
 *                  VM runs there), so the VM is still ours. GW_SRC_FAILED.
 *   RESUMED        the VM runs there: the downtime is final. GW_SRC_RESUMED.
 *   no RESUMED     a timeout, a broken link, GO's own send failing: the VM
 *                  may run there, so it is never resumed here by us
 *                  (c->paused cleared). GW_SRC_UNKNOWN; see no_resumed()
 *                  for what precopy and postcopy each do then.
 *
 * Once GO has left, cancel is refused (s->go_sent, set under s->lock).
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include "source/postcopy.h"
#include "source/source.h"

/*
 * Just before GO, without blocking: is the destination still there? A
 * destination that died a moment ago (its FIN or reset is queued) must not
 * be sent GO: the source would be left not knowing whether the VM runs
 * there. The control reader may be about to turn a last ERROR of the
 * destination into the sticky error: that reason is the better one, so it
 * gets a moment (bounded) before ours is recorded. 0 or the sticky error.
 */
static int check_alive_before_go(struct gw_session *s)
{
	struct timespec deadline;
	int ret = gw_conn_peer_alive(&s->ctl);

	if (!ret)
		return 0;
	deadline = gw_deadline_ms(200);
	pthread_mutex_lock(&s->lock);
	while (!s->err.code && pthread_cond_timedwait(&s->cond, &s->lock, &deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_WARN, "mig", "go_withheld", "reason=\"the destination closed the control connection\"");
	return gw_fail(s, GW_PHASE_HANDOVER, ret, "the destination closed the control connection before GO: "
		       "the VM stays here");
}

/*
 * GO, unless an error (cancel included) was recorded first: decided under
 * one lock. c->t.go is stamped just before the send: the destination may
 * resume before this thread runs again (on a busy host it can wait a
 * scheduler tick after the send), and a stamp taken after the send would
 * come later than the resume it is compared with (resume_time). *@sent
 * says whether GO may have left; 0 or -errno.
 */
static int send_go(struct gw_session *s, struct src_ctx *c, bool *sent)
{
	int ret = check_alive_before_go(s);

	*sent = false;
	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	ret = s->err.code;
	if (!ret)
		s->go_sent = true;	/* from here cancel is refused */
	pthread_mutex_unlock(&s->lock);
	*sent = !ret;
	if (ret)
		return ret;
	c->t.go = gw_now_ns();
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_GO, NULL);
	gw_log(GW_LOG_INFO, "mig", "go_sent", "ok=%d", ret == 0);
	return ret;
}

/*
 * GO left, RESUMED did not come (@err: why). The one thing both modes do:
 * never resume the VM here by ourselves, and send no ERROR (the
 * destination may run the VM; an ERROR would not stop it).
 * Precopy ends here: the sticky error says the outcome is unknown, status
 * unknown, the VM stays paused until the operator asks the destination and
 * resolves. GW_SRC_UNKNOWN.
 * Postcopy (@recoverable) keeps the pages a running destination faults on:
 * the silence is recorded as a broken link (pc_state is active, so it
 * pauses instead of failing) and the recovery, or the operator's resolve,
 * settles who runs the VM: GW_SRC_UNKNOWN. An error that no recovery
 * mends (a protocol error, an abandon) ends it: GW_SRC_FAILED, the VM lost.
 */
static enum gw_src_outcome no_resumed(struct gw_session *s, struct src_ctx *c, int err, bool recoverable)
{
	c->paused = false;
	if (recoverable) {
		if (!gw_failed(s))
			gw_fail(s, GW_PHASE_HANDOVER, err, "GO sent but RESUMED not received (%s)", strerror(-err));
		gw_log(GW_LOG_ERROR, "mig", "outcome_unknown",
		       "reason=\"GO sent, RESUMED not received: paused; recover if the destination runs the VM, "
		       "else resolve source\"");
		return __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE) ? GW_SRC_FAILED : GW_SRC_UNKNOWN;
	}
	pthread_mutex_lock(&s->lock);
	gw_error_set_locked(s, GW_PHASE_HANDOVER, err,
			    "GO sent but RESUMED not received (%s): the VM may run on the destination; "
			    "the source stays paused: ask the destination (godwit status on its API), then "
			    "resolve here: godwit migrate --resolve destination if it runs the VM, else "
			    "--resolve source", strerror(-err));
	pthread_mutex_unlock(&s->lock);
	gw_log(GW_LOG_ERROR, "mig", "outcome_unknown",
	       "reason=\"no RESUMED after GO: source stays paused, ask the destination\"");
	gw_set_status(s, GW_STATUS_UNKNOWN);
	return GW_SRC_UNKNOWN;
}

/*
 * When the destination resumed. One kernel (same boot id): its own clock
 * says. Otherwise from ours: GO sent + one way + its GO-to-resume time,
 * one way = (round trip - its time) / 2.
 */
static uint64_t resume_time(const struct gw_session *s, const struct src_times *t,
			    const struct gw_msg_resumed *r, bool *measured)
{
	uint64_t rtt = t->resumed_rx - t->go, own = r->go_to_resume_ns < rtt ? r->go_to_resume_ns : rtt;

	*measured = s->same_clock && r->resume_mono_ns >= t->go && r->resume_mono_ns <= t->resumed_rx;
	if (*measured)
		return r->resume_mono_ns;
	return t->go + (rtt - own) / 2 + own;
}

/* The downtime and its parts, from the stamps; published under the lock. */
static void publish_downtime(struct gw_session *s, struct src_ctx *c)
{
	const struct src_times *t = &c->t;
	struct gw_downtime_breakdown bd = {
		.pause_ns = t->paused - t->pause, .final_harvest_ns = t->harvested - t->paused,
		/* The final pages are queued before the state is saved and drain after it is sent. */
		.final_send_ns = (t->queued - t->harvested) + (t->pages_sent - t->state_sent),
		.state_save_ns = t->state_saved - t->queued, .state_send_ns = t->state_sent - t->state_saved,
		.dst_load_ns = t->ready - t->pages_sent,
		.handover_ns = t->resumed - t->ready,
	};

	pthread_mutex_lock(&s->lock);
	s->stats.downtime = bd;
	s->stats.downtime_ns = t->resumed - t->pause;
	s->stats.downtime_measured = c->resume_measured;
	if (c->postcopy) {
		/* The VM runs there; the migration ends when every page has arrived. */
		s->stats.status = s->status = GW_STATUS_POSTCOPY_ACTIVE;
	} else {
		s->stats.total_time_ns = t->resumed - s->t_start_ns;
		s->stats.status = s->status = GW_STATUS_COMPLETED;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	gw_events_release(s);	/* the destination resumed: what the downtime held */
	c->handed_over = !c->postcopy;
}

/*
 * The rules that once differed between the precopy and postcopy copies:
 *  - A refusal is an error recorded with a code and reported by the peer
 *    (err.code && err.from_peer): in postcopy a broken link is not recorded
 *    in err (it sets pc_broken, err stays empty), and only a recorded error
 *    is the destination's word that it did not resume. Anything else after
 *    GO is silence, and silence never gives the VM back.
 *  - It returns at normal scheduling priority whatever the outcome (one
 *    copy called gw_thread_normal, the other left it to source.c): the
 *    pause to the resume ends at RESUMED's arrival or the end of its wait,
 *    the wait itself stays at rt-priority so that RESUMED's stamp is not
 *    late, and postcopy's threads started after it inherit its priority.
 * @recoverable: postcopy, where from GO on a broken link pauses the
 * migration (pc_state active: see error.c) instead of ending it.
 */
enum gw_src_outcome src_handover(struct gw_session *s, struct src_ctx *c, bool recoverable)
{
	struct gw_msg_resumed r;
	struct gw_error err;
	bool sent;
	int ret;

	GW_FAULT_POINT(s, GW_FAULT_SRC_DELAY_GO, 0);
	/* Active before GO leaves: the destination's first PC_STATS may beat our next line. */
	if (recoverable)
		__atomic_store_n(&s->pc_state, GW_PC_ACTIVE, __ATOMIC_RELEASE);
	ret = send_go(s, c, &sent);
	if (!sent) {
		if (recoverable)
			__atomic_store_n(&s->pc_state, GW_PC_PREPARED, __ATOMIC_RELEASE);
		gw_thread_normal(s);
		return GW_SRC_FAILED;	/* c->paused: the caller resumes the VM here */
	}
	if (!ret)
		ret = src_wait_mbox(s, GW_MSG_RESUMED, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	c->t.resumed_rx = gw_now_ns();
	gw_thread_normal(s);
	gw_error_get(s, &err);
	if (ret && err.code && err.from_peer) {
		gw_log(GW_LOG_WARN, "mig", "go_refused", "reason=\"%s\"", err.msg);
		return GW_SRC_FAILED;	/* c->paused: the caller resumes the VM here */
	}
	if (ret)
		return no_resumed(s, c, ret, recoverable);
	pthread_mutex_lock(&s->lock);
	r = s->src->mbox_resumed;
	pthread_mutex_unlock(&s->lock);
	c->t.resumed = resume_time(s, &c->t, &r, &c->resume_measured);
	publish_downtime(s, c);
	return GW_SRC_RESUMED;
}
