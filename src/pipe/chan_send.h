/* SPDX-License-Identifier: MIT */
/*
 * A data channel's source side (the common part: channel.h). The migration
 * thread walks the dirty bitmaps and queues batches; the channel's prep
 * thread turns each into a PAGES frame (read, classify, compress) in one of
 * two buffers, and its send thread sends the frames in order, settles their
 * live pages (PAGES_VOID, chan_live.c) and ends with CHAN_END when asked:
 * preparing batch k+1 overlaps sending batch k.
 */
#ifndef GW_CHAN_SEND_H
#define GW_CHAN_SEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "net/zerocopy.h"
#include "pipe/codec_auto.h"
#include "pipe/pages_out.h"
#include "wire/msg.h"

struct gw_channel;

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

/*
 * One frame buffer of the prep -> send hand-off (out.buf[] of the same
 * index). The prep thread fills a free one, the send thread reads it once
 * it is ready: slot_busy and slot_ready (qlock) say which is whose.
 */
struct gw_out_slot {
	struct gw_pages_frame f;	/* iovec into out.buf[its index] */
	struct gw_live_frame lf;	/* where, and which pages went live */
	uint32_t nr_live;
};

struct gw_chan_send {
	/*
	 * Queue and prep -> send hand-off: guarded by qlock. One condition
	 * per waiter, signalled only on the change it waits for: a wake-up
	 * costs an IPI and a context switch (several microseconds in a VM),
	 * and one shared condition woke all three threads ~3 times per batch
	 * (docs/architecture.md, the hand-off).
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
	struct gw_out_slot slot[GW_PAGES_OUT_BUFS];	/* contents: see struct gw_out_slot */
	uint64_t link_cost_bits;	/* atomic: the send thread's link cost (double), for auto */

	/*
	 * Prep thread only (the postcopy pusher of this channel uses out once
	 * the prep thread was joined); the migration thread starts it.
	 */
	pthread_t thread;		/* the send thread: started and joined by the prep thread */
	int pagemap_fd;			/* set at creation: which pages are mapped here; -1 = none known */
	struct gw_pages_out out;	/* buffers: see slot */
	bool live_ok;			/* mapped pages may be sent from guest memory */

	/* Send thread only. */
	struct gw_codec_auto link_est;	/* the link's cost (link fields only) */
	bool zc_on;			/* MSG_ZEROCOPY in use on conn */
	struct gw_zc zc;		/* its completions */
	struct gw_live_frame inflight[GW_CHAN_ZC_INFLIGHT];	/* sent, not settled */
	unsigned inflight_head, inflight_len;
	struct gw_msg_pages_void void_msg;	/* the PAGES_VOID being built */
};

/* Queue a batch (blocks while the queue is full). 0 or the sticky error. */
int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b);
/* Wait until every queued batch was sent. 0 or the sticky error. */
int gw_channel_drain(struct gw_channel *ch);
/* Ask for CHAN_END after the queue drains; the thread then exits. */
void gw_channel_finish(struct gw_channel *ch);
/* The channel's prep thread (gw_channels_start); it runs the send thread. */
void *gw_channel_send_main(void *arg);

#endif
