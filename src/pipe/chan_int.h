/* SPDX-License-Identifier: MIT */
/*
 * Between the channel files only: channel.c (the common part: set-up,
 * threads, tear-down) calls each role's part; chan_send.c calls the live
 * sends of chan_live.c.
 */
#ifndef GW_CHAN_INT_H
#define GW_CHAN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "core/session_int.h"
#include "pipe/channel.h"

/* Pipeline stage time, all channels (ns == 0 adds nothing and costs no atomic). */
static inline void gw_chan_add_stage(struct gw_session *s, enum gw_stage st, uint64_t ns)
{
	if (ns)
		__atomic_fetch_add(&s->ctr_stage_ns[st], ns, __ATOMIC_RELAXED);
}

/* Role parts, on a zeroed channel whose common part is set: 0 or -errno. Release undoes init. */
int gw_chan_send_init(struct gw_channel *ch);
void gw_chan_send_release(struct gw_channel *ch);
void gw_chan_send_wake(struct gw_channel *ch);
int gw_chan_recv_init(struct gw_channel *ch);
void gw_chan_recv_release(struct gw_channel *ch);

/* ---- live sends (chan_live.c): pages straight from guest memory ---- */

/* Prep thread: may this batch's mapped pages be sent from guest memory? */
bool gw_chan_live_ok(const struct gw_channel *ch);
/* Prep thread: which pages of @b are mapped here (into @mask), or NULL to read them all. */
const uint64_t *gw_chan_mapped(struct gw_channel *ch, const struct gw_batch *b,
			       const struct gw_ram_block *blk, uint64_t *mask);
/* Send thread, at its start: MSG_ZEROCOPY on the connection when asked and possible. */
void gw_chan_zc_setup(struct gw_channel *ch);
/* Send thread: may this frame go with MSG_ZEROCOPY? */
bool gw_chan_zc_frame(const struct gw_channel *ch, const struct gw_out_slot *sl);
/*
 * Send thread, @sl just sent (@zc: with MSG_ZEROCOPY): settle its live
 * pages now or once the kernel is done; with @all, wait until every frame
 * in flight is settled. 0 or the sticky error.
 */
int gw_chan_live_sent(struct gw_channel *ch, struct gw_out_slot *sl, bool zc, bool all);
/* Send thread, at its end: settle what is in flight (unless failed), publish the zero-copy counters. */
int gw_chan_live_end(struct gw_channel *ch, int ret);

#endif
