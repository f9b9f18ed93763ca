/* SPDX-License-Identifier: MIT */
/*
 * Data channels: a connection and threads each, and a part by role: the
 * source's queue, frame buffers and live sends (chan_send.h), or the
 * destination's receive state (chan_recv.h). The page work is the
 * pipeline's (pages_out.h, pages_in.h).
 *
 * Ordering guarantee: a page always travels on the same channel (region
 * r of block b goes to channel (r + b) % nr_channels), and TCP/UNIX keep a
 * connection in order, so a page re-sent in round k+1 always arrives after
 * its copy of round k. No cross-channel sync is needed between rounds.
 */
#ifndef GW_CHANNEL_H
#define GW_CHANNEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <godwit/params.h>
#include "net/io.h"
#include "pipe/chan_recv.h"
#include "pipe/chan_send.h"

struct gw_session;

struct gw_channel {
	/* Set at creation. */
	struct gw_session *s;
	unsigned index;
	/*
	 * Connected by the migration thread before the channel threads start;
	 * then sent on by the source's send thread, received on by the
	 * destination's channel thread (its own locks: net/io.h).
	 */
	struct gw_conn conn;
	pthread_t thread;		/* destination: receiver; source: prep */
	bool thread_started;		/* migration thread */

	/* By the session's role (set at creation): only that member is set up. */
	union {
		struct gw_chan_send tx;	/* GW_ROLE_SOURCE */
		struct gw_chan_recv rx;	/* GW_ROLE_DEST */
	};

	/*
	 * The sending or receiving thread; the migration thread reads them
	 * after joining it. Away from the source's qlock: written per frame.
	 */
	uint64_t frames, pages;		/* PAGES frames and entries on this channel */
	uint64_t codec_bytes[GW_CODEC__COUNT];	/* atomic: page bytes (before compression)
						   each codec carried, for the statistics */
};

/* Wake every thread waiting on the channel (a failure or a shutdown): they check the sticky error. */
void gw_channel_wake_all(struct gw_channel *ch);
/* Shut every channel's connection and wake its threads (the roles' shutdown_channels). */
void gw_channels_shutdown(struct gw_channel *chans, unsigned n);

/*
 * Allocate and set up @n channels without sockets (pipeline state for the
 * session's role), then publish them in @s (shutdown can see them from then
 * on). 0 or the sticky error.
 */
int gw_channels_create(struct gw_session *s, unsigned n);
/* Start one thread per channel of @s running @fn. 0 or the sticky error. */
int gw_channels_start(struct gw_session *s, void *(*fn)(void *));
/* Join every started channel thread (migration thread). */
void gw_channels_join(struct gw_session *s);
/* Detach the channels from @s and free them (threads joined). */
void gw_channels_destroy(struct gw_session *s);

#endif
