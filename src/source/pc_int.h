/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the source, internal: struct gw_pc_src and what its files
 * share. The files, one concern each (protocol: postcopy_src.c):
 *
 *   postcopy_src.c     the decision to switch, the postcopy phase's loop on
 *                      the migration thread, the control reader's messages
 *   pc_src_switch.c    postcopy connections; the switch, VM running then paused
 *   pc_src_serve.c     the server thread (requests) and the pushers
 *   pc_src_recover.c   recovery from a broken link
 *
 * Threads: struct gw_pc_src belongs to the migration thread, except: the
 * push order (pick, todo, zero) under pc->lock (pushers, server, the
 * migration thread during recovery); the counters pushed/answered/requests
 * and the flag done are atomic; pout belongs to the server thread.
 */
#ifndef GW_PC_SRC_INT_H
#define GW_PC_SRC_INT_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "pipe/channel.h"
#include "net/tls.h"
#include "codec/xbzrle.h"
#include "mem/digest.h"
#include "mem/page_digest.h"
#include "source/postcopy.h"
#include "postcopy/pick.h"
#include "source/source.h"
#include "util/pi_mutex.h"

#define PING_MS 500			/* heartbeat on control during postcopy */
#define MAP_WORDS GW_WIRE_MAX_MAP_WORDS

struct pc_pusher {
	struct gw_pc_src *pc;
	unsigned index;			/* data channel */
	pthread_t thread;
	bool started;			/* migration thread */
};

struct gw_pc_src {
	struct gw_session *s;
	struct src_ctx *c;

	pthread_mutex_t lock;		/* guards pick, todo, zero; priority inheritance */
	struct gw_bitmap todo[GW_MAX_RAM_BLOCKS];	/* pages still to send */
	struct gw_bitmap zero[GW_MAX_RAM_BLOCKS];	/* of todo: freed pages, sent as zeros */
	/* Migration thread: allocated before the pause, become c->dirty at the switch. */
	struct gw_bitmap next_dirty[GW_MAX_RAM_BLOCKS];
	struct gw_pc_pick pick;

	struct gw_pages_out pout;	/* server thread: codec none, no XBZRLE */
	bool pout_ready;
	struct pc_pusher push[GW_WIRE_MAX_CHANNELS];
	pthread_t server;
	bool server_started;

	uint64_t pages;			/* pages the destination did not trust at the switch */
	uint64_t pushed, answered, requests;	/* atomic: pages pushed, pages answered, pages asked */
	bool done;			/* atomic: PC_DONE received */
	bool cut_fired;			/* atomic: the src-pc-cut fault point fired */
	bool resumed_seen;		/* RESUMED arrived (else, paused: the destination may not run) */
	uint64_t t_resumed_ns, t_done_ns, t_paused_ns, paused_ns;
	uint32_t recoveries;
};

/* ---- pc_src_switch.c ---- */

/*
 * Connect @conn to @url with the I/O timeout, through TLS when the session
 * has credentials (the destination's acceptor refuses anything else, as
 * for the first connections). 0 or -errno with @why.
 */
int pcs_connect(struct gw_session *s, const struct gw_url *url, struct gw_conn *conn,
		      char *why, size_t why_len);

/* One message on a connection nobody else reads. Its type, or -errno with @why. */
int pcs_recv(struct gw_conn *conn, union gw_msg *m, void *buf, size_t cap, char *why, size_t why_len);

/* A data (or, index nr_channels, the preempt) connection: CHAN_HELLO, CHAN_ACK. 0 or -errno. */
int pcs_open_data_conn(struct gw_session *s, const struct gw_url *url, struct gw_conn *conn,
			  unsigned index, char *why, size_t why_len);

int pcs_alloc(struct gw_session *s, struct src_ctx *c);

/*
 * VM running: channels ended, PC_PREPARE, the preempt connection, and
 * PC_PREPARED (the destination applied every page sent so far and traps
 * first touches). Outside the downtime.
 */
int pcs_switch_prepare(struct gw_session *s);

int pcs_switch_pause(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc);

/* Publish the postcopy figures of this side (s->lock held). */
void pcs_publish_locked(struct gw_session *s, struct gw_pc_src *pc);

void pcs_publish(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc);

/*
 * GO: from here a broken connection pauses the migration (s->pc_state
 * active). RESUMED settles who runs the VM: without it (timeout, broken
 * link) the destination may run it, so the source does not resume it and
 * waits for a recovery, or an operator's resolve. An ERROR answer means the
 * destination did not resume: the VM is still the source's.
 */
int pcs_handover(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc);

/* ---- pc_src_serve.c ---- */

/* The pages of one PC_REQ, answered on the preempt connection region by region. */
int pcs_answer(struct gw_session *s, struct gw_pc_src *pc, const struct gw_msg_pc_req *m);

int pcs_start_threads(struct gw_session *s, struct gw_pc_src *pc);

void pcs_join_threads(struct gw_session *s, struct gw_pc_src *pc);

/* ---- pc_src_recover.c ---- */

/*
 * A connection broke: stop everything, wait for the operator's URL, and
 * reconnect, as often as it takes. 0 once running again, or the sticky
 * error (the session is being freed).
 */
int pcs_recover(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc);

#endif
