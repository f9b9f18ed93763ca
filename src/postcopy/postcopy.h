/* SPDX-License-Identifier: MIT */
/*
 * Postcopy: switch over first, fetch the rest on demand, recover from a
 * broken link (docs/protocol.md#postcopy). One interface per side (each
 * side's files and who owns what: pc_src_int.h, pc_dst_int.h):
 *
 *   postcopy_src.c  the switch (channels ended, PC_PREPARE, pause, the map
 *                   of pages not to trust, state, COMPLETE, GO), then the
 *                   postcopy phase: pages requested on the preempt
 *                   connection answered at once, the rest pushed on the
 *                   data channels around recent requests (postcopy_pick.h),
 *                   until the destination has every page; recovery.
 *   postcopy_dst.c  PC_PREPARE (channels joined, RAM under userfaultfd,
 *                   mem/uffd_post.h, preempt connection admitted), the map,
 *                   then the postcopy phase: a fault handler turning faults
 *                   into requests, receivers placing pages once each
 *                   (postcopy_fault.h keeps the account); recovery.
 *
 * Before GO the precopy rules hold: the source owns the VM and any failure
 * resumes it there. From GO (source) / resume (destination) on, the VM's
 * newest state is split: a broken connection pauses both sides
 * (postcopy-paused) until an operator reconnects them; the death of either
 * process, or a protocol error, loses the VM.
 *
 * Threads: struct gw_pc_src / gw_pc_dst hang off the session (s->pcs,
 * s->pcd) and belong to the migration thread; what other threads share is
 * written field by field in the two files.
 */
#ifndef GW_POSTCOPY_H
#define GW_POSTCOPY_H

#include <stdbool.h>
#include <stddef.h>
#include "core/session_int.h"

struct src_ctx;
struct gw_digest;

static inline enum gw_pc_state gw_pc_state(const struct gw_session *s)
{
	return (enum gw_pc_state)__atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE);
}

/* ---- source (postcopy_src.c) ---- */

/* At a round end (or a batch boundary with @mid_round): switch to postcopy now? */
bool src_pc_want_switch(struct gw_session *s, struct src_ctx *c, uint64_t t_precopy_ns, bool mid_round);
/*
 * The switch and the postcopy phase, after src_precopy returned
 * SRC_POSTCOPY. 0 once every page is on the destination (status still
 * postcopy-active: the caller verifies and ends), or the error.
 */
int src_postcopy(struct gw_session *s, struct src_ctx *c);
/* The control reader got a postcopy message: 0 handled, -EPROTO not expected now. */
int src_pc_ctl_msg(struct gw_session *s, int type, const union gw_msg *m);
/* The control reader's last message once postcopy switched: PC_DONE (no verify) or VERIFIED. */
bool src_pc_last_message(struct gw_session *s, int type);
/* The source's postcopy verification digest (frozen RAM). 0 or -errno. */
int src_pc_digest(struct gw_session *s, struct src_ctx *c, struct gw_digest *out);
/* Free what src_postcopy left (the caller's teardown). */
void src_pc_release(struct gw_session *s);

/* ---- destination (postcopy_dst.c) ---- */

/* HELLO_POSTCOPY asked: can this host do it? 0, or -errno with @why. */
int dst_pc_probe(char *why, size_t why_len);
/* PC_PREPARE. 0 or the sticky error. */
int dst_pc_prepare(struct gw_session *s);
/* PC_DIRTY. 0 or the sticky error. */
int dst_pc_dirty(struct gw_session *s, const struct gw_msg_pc_map *m);
/* COMPLETE with GW_COMPLETE_POSTCOPY, before READY. 0 or the sticky error. */
int dst_pc_complete(struct gw_session *s);
/* GO received, right before resume: arm. 0 or the sticky error. */
int dst_pc_go(struct gw_session *s);
/* The VM resumed: postcopy-active. */
void dst_pc_resumed(struct gw_session *s);
/*
 * The postcopy phase, on the migration thread, until PC_END (pausing and
 * recovering as needed). @buf/@cap hold control payloads. 0,
 * GW_PC_UNVERIFIED (every page arrived but the source went away before
 * PC_END: completed, nothing to verify with), or the error.
 */
#define GW_PC_UNVERIFIED 1
int dst_pc_run(struct gw_session *s, uint8_t *buf, size_t cap);
/* Verification: the digest of RAM as at resume. 0, or -errno (unavailable). */
int dst_pc_digest(struct gw_session *s, struct gw_digest *out, uint64_t *faults);
/* Stop threads, drop the userfaultfd, free (the migration thread's end). */
void dst_pc_release(struct gw_session *s);

#endif
