/* SPDX-License-Identifier: MIT */
/*
 * The session's shared state that every role changes: its status, the
 * connections every thread may have to wake (control, preempt, the data
 * channels published by pipe/, the destination's acceptor). The channels are
 * woken through the role's ops (core/ never reaches into pipe/).
 */
#include "core/session_int.h"
#include "net/admit.h"

void gw_session_stop_admit(struct gw_session *s)
{
	struct gw_admit *a;

	pthread_mutex_lock(&s->lock);
	a = s->adm;
	s->adm = NULL;
	if (a)
		s->adm_refused += gw_admit_refused(a);
	pthread_mutex_unlock(&s->lock);
	gw_admit_stop(a);
}

void gw_session_set_admit(struct gw_session *s, struct gw_admit *a)
{
	pthread_mutex_lock(&s->lock);
	s->adm = a;
	pthread_mutex_unlock(&s->lock);
}

void gw_session_shutdown_conns(struct gw_session *s)
{
	/* s->lock: the channel array is detached under it before being freed. */
	pthread_mutex_lock(&s->lock);
	gw_conn_shutdown(&s->ctl);
	gw_conn_shutdown(&s->preempt);
	gw_admit_wake(s->adm);	/* the acceptor goes on refusing strangers until gw_session_free */
	if (s->chans)
		s->role_ops->shutdown_channels(s->chans, s->nr_channels);
	pthread_mutex_unlock(&s->lock);
}

void gw_session_publish_channels(struct gw_session *s, struct gw_channel *chans, unsigned n)
{
	pthread_mutex_lock(&s->lock);
	s->chans = chans;
	s->nr_channels = n;
	pthread_mutex_unlock(&s->lock);
}

struct gw_channel *gw_session_detach_channels(struct gw_session *s, unsigned *n)
{
	struct gw_channel *chans;

	pthread_mutex_lock(&s->lock);
	chans = s->chans;
	*n = chans ? s->nr_channels : 0;
	s->chans = NULL;
	pthread_mutex_unlock(&s->lock);
	return chans;
}

void gw_set_status(struct gw_session *s, enum gw_status st)
{
	pthread_mutex_lock(&s->lock);
	s->status = st;
	s->stats.status = st;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
}
