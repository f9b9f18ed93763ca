/* SPDX-License-Identifier: MIT */
/*
 * The source's migration thread, in files that follow the protocol:
 *   source.c      set-up (connect, HELLO, channels, tracking, EXTENTS),
 *                 the state machine, the end (resume on failure, teardown);
 *   source/precopy.c     rounds: harvest, batches to channels, convergence;
 *   source/switchover.c  pause, final pages, state, COMPLETE / READY;
 *   handover.c    GO and RESUMED, for precopy and postcopy alike;
 *   control.c     the control reader thread (READY, RESUMED, VERIFIED, PONG).
 * Postcopy's source side is postcopy.c and pc_*.c (pc_int.h).
 * The source owns the VM until it sends GO: every failure before that
 * resumes the VM (if paused) and reports failed. After GO, a lost RESUMED
 * leaves the VM paused and the status "unknown" (docs/protocol.md).
 *
 * Threads: struct src_ctx belongs to the migration thread; what others may
 * read is published into s->stats under s->lock (src_publish).
 */
#ifndef GW_SOURCE_H
#define GW_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include "source/converge.h"
#include "mem/bitmap.h"
#include "core/session_int.h"
#include "util/state.h"
#include "source/throttle.h"
#include "source/escalate.h"

/*
 * What only the source's session holds (s->src, allocated with the
 * session). "lock" is s->lock; "mig" the migration thread.
 */
struct gw_src_state {
	uint64_t ping_rtt_ns;		/* lock: smoothed PING -> PONG, 0 = none yet */
	uint64_t pong_token;		/* lock: the token of the last PONG (cond on arrival) */
	uint64_t peer_backlog_bytes;	/* lock: that PONG's backlog_bytes */

	/* The control reader hands READY / RESUMED / VERIFIED over here. */
	pthread_t ctl_reader;		/* mig */
	bool ctl_reader_started;	/* mig */
	uint32_t mbox_seen;		/* lock: bit (1 << type) for each type delivered */
	struct gw_msg_ready mbox_ready;	/* lock */
	struct gw_msg_resumed mbox_resumed;	/* lock */
	struct gw_msg_verified mbox_verified;	/* lock */

	/* Free-page hints (gw_session_hint_free, any thread). */
	pthread_mutex_t hint_lock;	/* guards the three fields below and the bitmaps they name */
	struct gw_bitmap *hint_target;	/* hint_lock: the pages to send (mig's), NULL = no hints now */
	struct gw_bitmap *hint_free;	/* hint_lock: with hint_target, the pages free now (src_ctx.free) */
	uint64_t hinted_pages;		/* atomic: pages dropped from sending by hints */
	uint64_t hint_ranges;		/* atomic: hints recorded (0: the free bitmaps are empty) */

	bool pre_switchover;		/* lock: paused, waiting for gw_session_continue() */
	bool continued;			/* lock: gw_session_continue() came (cond on it) */

	/* Postcopy. */
	struct gw_pc_src *pcs;		/* mig (source/postcopy.c) */
	char pc_resume_url[GW_URL_MAX];	/* lock: a recovery asked for ("" none) */
	bool pc_resolvable;		/* lock: paused after GO without RESUMED */
	bool pc_resolve_source;		/* lock: the operator says the destination does not run it */
};

/*
 * CLOCK_MONOTONIC at each step of the switchover, in this order: the
 * breakdown is their differences. The state is saved and sent while the
 * channels still send the last pages they were given.
 */
struct src_times {
	uint64_t pause;			/* pause requested */
	uint64_t paused;		/* no vCPU runs */
	uint64_t harvested;		/* final harvest done */
	uint64_t queued;		/* final pages queued on the channels */
	uint64_t state_saved;
	uint64_t state_sent;
	uint64_t pages_sent;		/* final pages out, channels ended */
	uint64_t ready;			/* READY received */
	uint64_t go;			/* GO sent */
	uint64_t resumed_rx;		/* RESUMED received, or its wait ended */
	uint64_t resumed;		/* the destination resumed (its clock, or estimated) */
};

/*
 * How the source's migration, or one of its phases, ended: what a phase
 * returns where "0 or -errno" cannot say it (a step inside a phase still
 * returns 0 or -errno). GW_SRC_FAILED always comes with the sticky error,
 * which says why; whether the VM is then resumed here is c->paused's to
 * say (set at the pause, cleared once GO left and was not refused).
 */
enum gw_src_outcome {
	GW_SRC_FAILED,		/* the sticky error (a cancel included) */
	GW_SRC_CONVERGED,	/* precopy: switch over now (it fits, or the policy forces it) */
	GW_SRC_POSTCOPY,	/* precopy: switch to postcopy now */
	GW_SRC_RESUMED,		/* handover: RESUMED came, the VM runs on the destination */
	GW_SRC_UNKNOWN,		/* handover: GO left, RESUMED did not come: never resumed here */
	GW_SRC_COMPLETED,	/* the migration completed (after RESUMED; postcopy: after PC_DONE) */
};

/*
 * Free-page hints (gw_session_hint_free) take pages out of dirty and put
 * them in free; a harvest takes the pages written since out of free again.
 * At the switchover, the free pages the destination holds data for (sent)
 * are sent as ZERO entries ("discarded"): both sides then hold zeros there,
 * and the RAM digests compare free pages as zeros.
 */
struct src_ctx {
	struct gw_bitmap dirty[GW_MAX_RAM_BLOCKS];	/* pages to send; s->hint_lock while hints run */
	struct gw_bitmap free[GW_MAX_RAM_BLOCKS];	/* hinted free, not written since; s->hint_lock */
	struct gw_bitmap sent[GW_MAX_RAM_BLOCKS];	/* handed to a channel at least once; s->hint_lock */
	struct gw_converge conv;
	uint64_t ram_pages, skipped_pages;
	uint64_t dirty_pages;		/* pages to send now: weight of dirty after a harvest */
	uint64_t harvested_pages;	/* pages the last harvest reported written since the one before */
	uint64_t device_pages;		/* of those, reported by the VMM's devices (gw_session_mark_dirty) */
	uint64_t harvest_ns;		/* how long the last harvest took */
	uint64_t harvest_at_ns;		/* when the last harvest began (tracking's start before the first) */
	uint64_t dirty_interval_ns;	/* from the harvest before the last to the last: harvested_pages' span */
	uint64_t rtt_ns;		/* control round trip, as the model last read it */
	/* Where the pass stopped when a round ended mid-pass (round-max-ms). */
	unsigned pass_block;
	uint64_t pass_pos;
	bool pass_done;			/* the last round ended its pass: a switchover may follow */
	uint64_t discarded_pages;	/* free pages sent as zeros at the switchover */
	uint64_t cpu_user0_ns, cpu_sys0_ns;
	uint64_t last_publish_ns;	/* live statistics every 100 ms */
	bool switched_over;		/* expected downtime frozen at the decision */
	bool paused;			/* paused by us and still ours: resumed here on failure */
	bool handed_over;		/* RESUMED received: total time is final */
	bool resume_measured;		/* the destination's resume stamp was usable (same clock) */
	bool postcopy;			/* switching or switched to postcopy (postcopy.c) */
	struct src_times t;
	struct gw_state state;
	struct gw_throttle thr;		/* auto-converge and dirty limit in force */
	struct gw_escalate esc;		/* escalation's steps taken (escalate.h) */
	char hint[192];			/* the verdict in words, "" when it fits (explain) */
	enum gw_converge_state verdict;	/* the model's verdict at the last round's end */
	uint64_t verdict_eta_ns;	/* converging: time until it fits, from the rates */
	uint64_t dirty_hist_pages[3];	/* dirty set after each of the last three harvests, newest first */
	uint64_t sent_hist_pages[3];	/* pages sent in each of those rounds */
	unsigned hist_rounds;		/* rounds in the history (at most 3) */
	uint64_t pc_best_exp_ns;	/* postcopy auto: lowest expected downtime so far */
	unsigned pc_flat_rounds;	/* postcopy auto: rounds since it last fell by a tenth */
};

/*
 * Escalation after a round's model update (escalate.c): takes the step the
 * model calls for, logs it and publishes it in the statistics.
 */
void src_escalate(struct gw_session *s, struct src_ctx *c);
/* Whether the expected downtime lets this round switch over (the user's limit, or escalation's). */
bool src_escalate_fits(struct gw_session *s, struct src_ctx *c);
/* The downtime limit in force, ns: the user's, or the one escalation raised it to. */
uint64_t src_limit_ns(struct gw_session *s, const struct src_ctx *c);

/* Publish counters into the stats snapshot (under the lock). */
void src_publish(struct gw_session *s, struct src_ctx *c);
/* Wire bytes sent so far on every connection. */
uint64_t src_wire_bytes(struct gw_session *s);

/* control.c: the control reader (restarted by a postcopy recovery). 0 or the sticky error. */
/* The CHAN_HELLO of data connection @index: the migration id, the destination's challenge. */
void src_chan_hello(const struct gw_session *s, struct gw_msg_chan_hello *m, unsigned index);
int src_start_ctl_reader(struct gw_session *s);
void src_join_ctl_reader(struct gw_session *s);

/* source/precopy.c */
/* Harvest the dirty pages into c->dirty. 0 or the sticky error. */
int src_harvest(struct gw_session *s, struct src_ctx *c);
/* The last harvest (VM paused, tracking ends): the backend's collect_last when it has one. */
int src_harvest_last(struct gw_session *s, struct src_ctx *c);
/*
 * Send ROUND and queue the pages of c->dirty on the channels. The pass goes
 * on from where the last round stopped; it stops at @deadline_ns (0: none,
 * a whole sweep from the start). 0 or the sticky error.
 */
int src_queue_round(struct gw_session *s, struct src_ctx *c, uint64_t deadline_ns);
/* Wait until every channel sent what it was given. 0 or the sticky error. */
int src_drain(struct gw_session *s);
/* src_queue_round, then src_drain. */
int src_send_round(struct gw_session *s, struct src_ctx *c, uint64_t deadline_ns);
/* Paused, after the final round: queue the free pages sent before, as zeros. 0 or the sticky error. */
int src_queue_discards(struct gw_session *s, struct src_ctx *c);
/*
 * Rounds until the expected downtime fits (or the policy says stop):
 * GW_SRC_CONVERGED, GW_SRC_POSTCOPY or GW_SRC_FAILED.
 */
enum gw_src_outcome src_precopy(struct gw_session *s, struct src_ctx *c);

/* Throttle and dirty limit back to none (the migration ends either way). */
void src_unthrottle(struct gw_session *s, struct src_ctx *c);

/* source/switchover.c */
/* Stop the vCPUs (hints off, status device). 0 or the sticky error. */
int src_pause_vm(struct gw_session *s, struct src_ctx *c);
/* Save and send the device state. 0 or the sticky error. */
int src_send_state(struct gw_session *s, struct src_ctx *c);
/* COMPLETE with @flags (GW_COMPLETE_*), then wait for READY. 0 or the sticky error. */
int src_complete_and_ready(struct gw_session *s, struct src_ctx *c, uint32_t flags);
/* Every data channel sends what it holds, then CHAN_END; their threads joined. 0 or the sticky error. */
int src_end_channels(struct gw_session *s);
/* Pause, final pages, state, COMPLETE, READY. 0 or the sticky error. */
int src_switchover(struct gw_session *s, struct src_ctx *c, bool local);
/*
 * handover.c, for precopy and postcopy (@recoverable: from GO on, a broken
 * link pauses for a recovery). GO, then RESUMED: GW_SRC_RESUMED (downtime
 * published; status completed, or postcopy-active), GW_SRC_UNKNOWN (GO
 * left, RESUMED did not: c->paused cleared; precopy: status unknown;
 * postcopy: paused for a recovery) or GW_SRC_FAILED (GO withheld or
 * refused, c->paused kept: resume here; postcopy after GO: the VM is
 * lost). Returns at normal scheduling priority.
 */
enum gw_src_outcome src_handover(struct gw_session *s, struct src_ctx *c, bool recoverable);
/* After RESUMED: hash the frozen RAM, VERIFY, wait for VERIFIED. Never fails the migration. */
void src_verify(struct gw_session *s, struct src_ctx *c);
/* Wait for the control reader to deliver @type. 0 or the sticky error (-ETIMEDOUT). */
int src_wait_mbox(struct gw_session *s, uint16_t type, uint64_t timeout_ms);

#endif
