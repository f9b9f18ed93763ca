/* SPDX-License-Identifier: MIT */
/*
 * A data channel's destination side (the common part: channel.h): the
 * channel thread receives, checks and applies PAGES frames, takes the
 * PAGES_VOID that follow them, until CHAN_END.
 */
#ifndef GW_CHAN_RECV_H
#define GW_CHAN_RECV_H

#include <stdbool.h>
#include <stdint.h>
#include "pipe/pages_in.h"
#include "wire/msg.h"

/*
 * Channel thread only; the migration thread reads end_seen after joining
 * it, and the postcopy receiver of this channel then uses in.
 */
struct gw_chan_recv {
	struct gw_pages_in in;
	struct gw_msg_pages_void void_msg;	/* the PAGES_VOID received */
	bool end_seen;			/* CHAN_END received and matching */
	bool void_next;			/* the next frame must be PAGES_VOID for void_seq */
	uint32_t void_seq;
};

/* The channel thread (gw_channels_start): receive until CHAN_END. */
void *gw_channel_recv_main(void *arg);

#endif
