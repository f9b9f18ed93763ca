/* SPDX-License-Identifier: MIT */
/*
 * The source's control reader: the only thread that receives on the
 * control connection once set-up is done. It hands READY, RESUMED and
 * VERIFIED to the migration thread (a mailbox under s->lock, waited on by
 * src_wait_mbox), keeps the round-trip estimate from PONGs, gives
 * postcopy's messages to postcopy.c, and turns an ERROR or a broken
 * connection into the sticky error (or, in postcopy, a broken link).
 */
#include <errno.h>
#include "source/postcopy.h"
#include "source/source.h"
#include "util/thread_name.h"

/* Deliver READY / RESUMED / VERIFIED to the migration thread. */
static void mbox_put(struct gw_session *s, int type, const union gw_msg *m)
{
	pthread_mutex_lock(&s->lock);
	s->src->mbox_seen |= 1u << type;
	if (type == GW_MSG_READY)
		s->src->mbox_ready = m->ready;
	else if (type == GW_MSG_RESUMED)
		s->src->mbox_resumed = m->resumed;
	else
		s->src->mbox_verified = m->verified;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/*
 * A PONG: one round-trip sample of the control connection, smoothed 7/8,
 * and the destination's receive backlog (src_in_flight_bytes waits for it).
 */
static void pong(struct gw_session *s, const struct gw_msg_ping *m)
{
	uint64_t now = gw_now_ns(), rtt;

	if (m->token > now)
		return;
	rtt = now - m->token;
	pthread_mutex_lock(&s->lock);
	s->src->ping_rtt_ns = s->src->ping_rtt_ns ? (s->src->ping_rtt_ns * 7 + rtt) / 8 : rtt;
	s->src->pong_token = m->token;
	s->src->peer_backlog_bytes = m->backlog_bytes;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/*
 * The migration ends after RESUMED, or after VERIFIED when the digests are
 * compared; postcopy after PC_DONE or VERIFIED.
 */
static bool last_message(struct gw_session *s, int type)
{
	bool verify = gw_param(s, GW_PARAM_VERIFY) && !gw_param(s, GW_PARAM_LOCAL);

	if (gw_pc_state(s) != GW_PC_NONE)
		return pcs_last_message(s, type);
	return type == (verify ? GW_MSG_VERIFIED : GW_MSG_RESUMED);
}

static void *ctl_reader_main(void *arg)
{
	struct gw_session *s = arg;
	uint8_t buf[1024];	/* ERROR, PC_STATS and PC_DONE are the largest */
	char why[160];
	union gw_msg m;

	gw_log_set_side(s->side);
	gw_thread_critical(s, "control-reader");
	for (;;) {
		int type = gw_conn_recv_msg(&s->ctl, &m, buf, sizeof(buf), why, sizeof(why));

		if (type < 0) {
			if (!__atomic_load_n(&s->ctl_quiet, __ATOMIC_ACQUIRE) && !gw_failed(s))
				gw_fail(s, GW_PHASE_CONTROL, type, "control connection: %s%s%s",
					gw_conn_err_text(type, "destination"), why[0] ? ": " : "", why);
			return NULL;
		}
		if (type == GW_MSG_ERROR) {
			gw_fail_from_peer(s, GW_PHASE_CONTROL, &m.error);
			return NULL;
		}
		if (type == GW_MSG_PONG) {
			pong(s, &m.ping);
			continue;
		}
		if (type >= GW_MSG_PC_PREPARE) {
			if (pcs_ctl_msg(s, type, &m)) {
				gw_fail(s, GW_PHASE_CONTROL, -EPROTO, "unexpected %s frame from the destination",
					gw_frame_type_name((uint16_t)type));
				return NULL;
			}
			if (last_message(s, type))
				return NULL;
			continue;
		}
		if (type != GW_MSG_READY && type != GW_MSG_RESUMED && type != GW_MSG_VERIFIED) {
			gw_fail(s, GW_PHASE_CONTROL, -EPROTO, "unexpected %s frame from the destination",
				gw_frame_type_name((uint16_t)type));
			return NULL;
		}
		mbox_put(s, type, &m);
		if (last_message(s, type))
			return NULL;
	}
}

int src_start_ctl_reader(struct gw_session *s)
{
	/*
	 * The destination is silent on control during precopy: the reader
	 * waits without a timeout; a dead peer shows as a send timeout or a
	 * TCP error, and handover waits are bounded by wait_mbox().
	 */
	gw_conn_set_idle_timeout(&s->ctl, 0);
	if (pthread_create(&s->src->ctl_reader, NULL, ctl_reader_main, s))
		return gw_fail(s, GW_PHASE_SETUP, -EAGAIN, "control reader thread");
	gw_thread_name(s->src->ctl_reader, "gw-src-ctl");
	s->src->ctl_reader_started = true;
	return 0;
}

void src_join_ctl_reader(struct gw_session *s)
{
	if (s->src->ctl_reader_started)
		pthread_join(s->src->ctl_reader, NULL);
	s->src->ctl_reader_started = false;
}
