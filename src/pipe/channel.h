/* SPDX-License-Identifier: MIT */
/*
 * Data channels: a queue, threads and a connection each; the page work is
 * the pipeline's (pages_out.h, pages_in.h). Source: the migration thread
 * walks the dirty bitmaps and queues batches; the channel's prep thread
 * turns each into a PAGES frame (read, classify, compress) in one of two
 * buffers, and its send thread sends the frames in order, settles their
 * live pages (PAGES_VOID) and ends with CHAN_END when asked: preparing
 * batch k+1 overlaps sending batch k. Destination: the channel thread
 * receives, checks and applies PAGES frames until CHAN_END.
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
#include "net/io.h"
#include "net/zerocopy.h"
#include "pipe/pages_in.h"
#include "pipe/pages_out.h"

struct gw_session;

#define GW_CHAN_QUEUE_LEN 16
/*
 * A producer that found the queue full waits until it is down to this many
 * batches, then refills it: one wake-up per GW_CHAN_QUEUE_LEN -
 * GW_CHAN_QUEUE_REFILL batches, not one per batch.
 */
#define GW_CHAN_QUEUE_REFILL (GW_CHAN_QUEUE_LEN / 2)
/* Zero-copy frames a channel may have in flight before it waits for the kernel. */
#define GW_CHAN_ZC_INFLIGHT 8

/*
 * A frame sent with pages straight from guest memory, not settled yet:
 * once the kernel is done with those pages (at once for a copying send,
 * at its completion for MSG_ZEROCOPY) the dirty backend says which were
 * written meanwhile, and they are named in a PAGES_VOID.
 */
struct gw_live_frame {
	uint32_t block;
	uint32_t nr_pages;		/* region length */
	uint64_t first_page;		/* region start */
	uint64_t live[GW_BATCH_MASK_WORDS];	/* region pages sent from guest memory */
	uint32_t seq;			/* the PAGES frame's sequence number */
	uint32_t zc_end;		/* MSG_ZEROCOPY: complete once zc.done reaches this */
};

struct gw_channel {
	/* Set at creation. */
	struct gw_session *s;
	unsigned index;
	struct gw_conn conn;		/* receive side: channel thread only */
	pthread_t thread;		/* destination: receiver; source: prep */
	bool thread_started;		/* migration thread */
	pthread_t send_thread;		/* source: started and joined by the prep thread */

	/*
	 * Source queue and prep -> send hand-off: guarded by qlock. One
	 * condition per waiter, signalled only on the change it waits for: a
	 * wake-up costs an IPI and a context switch (several microseconds in
	 * a VM), and one shared condition woke all three threads ~3 times per
	 * batch (docs/architecture.md, the hand-off).
	 */
	pthread_mutex_t qlock;
	pthread_cond_t space_cond;	/* migration thread: queue down to the refill mark, drained, exited */
	pthread_cond_t work_cond;	/* prep thread: a batch queued, a buffer freed, end requested */
	pthread_cond_t ready_cond;	/* send thread: a frame built, prep done */
	struct gw_batch q[GW_CHAN_QUEUE_LEN];
	unsigned q_head, q_len;
	unsigned pending;		/* batches taken from q, not yet sent and settled */
	bool end_requested;		/* send CHAN_END after the queue drains */
	bool prep_done;			/* the prep thread hands over no more frames */
	bool exited;			/* the threads returned */
	unsigned slot_ready_head;	/* first built frame not taken by the send thread */
	unsigned slot_ready;		/* built frames waiting to be sent */
	unsigned slot_busy;		/* buffers in use: ready or being sent */
	struct gw_out_slot {
		struct gw_pages_frame f;	/* iovec into out.buf[its index] */
		struct gw_live_frame lf;	/* where, and which pages went live */
		uint32_t nr_live;
	} slot[GW_PAGES_OUT_BUFS];
	uint64_t link_cost_bits;	/* atomic: the send thread's link cost (double), for auto */

	/* Channel thread only; the migration thread reads them after joining it. */
	struct gw_pages_out out;	/* source: prep thread (buffers: see slot) */
	struct gw_codec_auto link_est;	/* source, send thread: the link's cost (link fields only) */
	struct gw_pages_in in;		/* destination */
	int pagemap_fd;			/* source: which pages are mapped here; -1 = none known */
	bool live_ok;			/* source: mapped pages may be sent from guest memory */
	bool zc_on;			/* source: MSG_ZEROCOPY in use on conn */
	struct gw_zc zc;		/* source: its completions */
	struct gw_live_frame inflight[GW_CHAN_ZC_INFLIGHT];	/* source: sent, not settled */
	unsigned inflight_head, inflight_len;
	struct gw_msg_pages_void void_msg;	/* source: the PAGES_VOID being built; destination: the one received */
	uint64_t frames, pages;		/* PAGES frames and entries on this channel (source: send thread) */
	uint64_t codec_bytes[GW_CODEC__COUNT];	/* atomic: page bytes (before compression)
						   each codec carried, for the statistics */
	bool end_seen;			/* destination: CHAN_END received and matching */
	bool void_next;			/* destination: the next frame must be PAGES_VOID for void_seq */
	uint32_t void_seq;
};

/* Source. Queue a batch (blocks while the queue is full). 0 or the sticky error. */
int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b);
/* Wait until every queued batch was sent. 0 or the sticky error. */
int gw_channel_drain(struct gw_channel *ch);
/* Ask for CHAN_END after the queue drains; the thread then exits. */
void gw_channel_finish(struct gw_channel *ch);
/* Wake every thread waiting on the channel (a failure or a shutdown): they check the sticky error. */
void gw_channel_wake_all(struct gw_channel *ch);
/* Shut every channel's connection and wake its threads (the roles' shutdown_channels). */
void gw_channels_shutdown(struct gw_channel *chans, unsigned n);
void *gw_channel_send_main(void *arg);

/* Destination: receive until CHAN_END. */
void *gw_channel_recv_main(void *arg);

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
