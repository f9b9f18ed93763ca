/* SPDX-License-Identifier: MIT */
/*
 * Data channels, the part both roles share (see channel.h): set-up,
 * threads, tear-down. The source side is chan_send.c (and chan_live.c),
 * the destination side chan_recv.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "pipe/chan_int.h"
#include "util/thread_name.h"

void gw_channel_wake_all(struct gw_channel *ch)
{
	/* The destination's channel thread blocks only on its connection (shut down by then). */
	if (ch->s->role == GW_ROLE_SOURCE)
		gw_chan_send_wake(ch);
}

static void channel_release(struct gw_channel *ch)
{
	if (ch->s->role == GW_ROLE_SOURCE)
		gw_chan_send_release(ch);
	else
		gw_chan_recv_release(ch);
	gw_conn_close(&ch->conn);
}

static int channel_setup(struct gw_channel *ch, struct gw_session *s, unsigned index)
{
	memset(ch, 0, sizeof(*ch));
	ch->s = s;
	ch->index = index;
	gw_conn_init(&ch->conn, -1);
	return s->role == GW_ROLE_SOURCE ? gw_chan_send_init(ch) : gw_chan_recv_init(ch);
}

int gw_channels_create(struct gw_session *s, unsigned n)
{
	struct gw_channel *chans = calloc(n ? n : 1, sizeof(*chans));

	if (!chans)
		return gw_fail(s, GW_PHASE_SETUP, -ENOMEM, "no memory for channels");
	for (unsigned i = 0; i < n; i++) {
		int ret = channel_setup(&chans[i], s, i);

		if (ret) {
			for (unsigned j = 0; j <= i; j++)
				channel_release(&chans[j]);
			free(chans);
			return gw_fail(s, GW_PHASE_SETUP, ret, "channel %u setup: %s", i, strerror(-ret));
		}
	}
	gw_session_publish_channels(s, chans, n);
	return 0;
}

int gw_channels_start(struct gw_session *s, void *(*fn)(void *))
{
	for (unsigned i = 0; i < s->nr_channels; i++) {
		int ret = -pthread_create(&s->chans[i].thread, NULL, fn, &s->chans[i]);

		if (ret)
			return gw_fail(s, GW_PHASE_SETUP, ret, "channel thread");
		gw_thread_name(s->chans[i].thread, "gw-%s-ch%u", s->role == GW_ROLE_SOURCE ? "src" : "dst", i);
		s->chans[i].thread_started = true;
	}
	return 0;
}

void gw_channels_join(struct gw_session *s)
{
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++) {
		if (s->chans[i].thread_started)
			pthread_join(s->chans[i].thread, NULL);
		s->chans[i].thread_started = false;
	}
}

void gw_channels_destroy(struct gw_session *s)
{
	unsigned n;
	/* Detached first: a concurrent cancel must not walk freed channels. */
	struct gw_channel *chans = gw_session_detach_channels(s, &n);

	for (unsigned i = 0; i < n; i++)
		channel_release(&chans[i]);
	free(chans);
}

void gw_channels_shutdown(struct gw_channel *chans, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		gw_conn_shutdown(&chans[i].conn);
		gw_channel_wake_all(&chans[i]);
	}
}
