/* SPDX-License-Identifier: MIT */
/*
 * Data channels. Source: the migration thread walks the dirty bitmaps and
 * queues batches (a region of at most batch_pages pages plus a mask of the
 * pages to send); the channel thread reads, classifies (zero / normal /
 * XBZRLE), compresses and sends them. Destination: the channel thread
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
#include <godwit/params.h>
#include "net/io.h"
#include "wire/wire.h"

struct gw_session;
struct gw_codec_ops;
struct gw_xbzrle_cache;

#define GW_BATCH_MASK_WORDS (GW_WIRE_MAX_BATCH_PAGES / 64)
#define GW_CHAN_QUEUE_LEN 16

struct gw_batch {
	uint32_t block;
	uint32_t nr_pages;		/* region length, <= batch_pages */
	uint64_t first_page;		/* region start, in block pages */
	uint64_t mask[GW_BATCH_MASK_WORDS];	/* bit i: send first_page + i */
};

struct gw_channel {
	/* Set at creation. */
	struct gw_session *s;
	unsigned index;
	struct gw_conn conn;		/* receive side: channel thread only */
	pthread_t thread;
	bool thread_started;		/* migration thread */

	/* Source queue: guarded by qlock. */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;		/* queue changed (both directions) */
	struct gw_batch q[GW_CHAN_QUEUE_LEN];
	unsigned q_head, q_len;
	bool busy;			/* the thread holds a batch */
	bool end_requested;		/* send CHAN_END after the queue drains */
	bool exited;			/* the thread returned */

	/* Channel thread only. */
	void *codec_ctx[GW_CODEC__COUNT];	/* lazily created, one per codec */
	int codec_id;			/* configured: enum gw_codec_id (AUTO possible) */
	struct gw_xbzrle_cache *xb;
	uint8_t *raw_buf;		/* raw stream of one batch */
	uint8_t *comp_buf;		/* compressed data area / received data */
	uint64_t *entries;		/* le64 entries of one batch */
	size_t comp_cap;
	uint64_t frames, pages;		/* PAGES frames and entries on this channel */
	/* Codec auto: per codec, smoothed cost per raw byte and output/input ratio. */
	struct {
		double ns_per_byte, ratio;
	} est[GW_CODEC__COUNT];
	double link_ns_per_byte;	/* measured send cost per wire byte, 0 = unknown */
	uint64_t auto_batches;
};

/* Allocate buffers and codec contexts. 0 or -errno. */
int gw_channel_setup(struct gw_channel *ch, struct gw_session *s, unsigned index, int fd);
void gw_channel_release(struct gw_channel *ch);

/* Source. Queue a batch (blocks while the queue is full). 0 or the sticky error. */
int gw_channel_push(struct gw_channel *ch, const struct gw_batch *b);
/* Wait until every queued batch was sent. 0 or the sticky error. */
int gw_channel_drain(struct gw_channel *ch);
/* Ask for CHAN_END after the queue drains; the thread then exits. */
void gw_channel_finish(struct gw_channel *ch);
void *gw_channel_send_main(void *arg);

/* Destination: receive until CHAN_END. */
void *gw_channel_recv_main(void *arg);

/*
 * Allocate and set up @n channels without sockets, then publish them in @s
 * (shutdown can see them from then on). 0 or the sticky error.
 */
int gw_channels_create(struct gw_session *s, unsigned n);
/* Start one thread per channel of @s running @fn. 0 or the sticky error. */
int gw_channels_start(struct gw_session *s, void *(*fn)(void *));

#endif
