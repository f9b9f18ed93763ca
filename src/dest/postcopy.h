/* SPDX-License-Identifier: MIT */
/*
 * Postcopy's destination side, as the rest of dest/ sees it: PC_PREPARE
 * (channels joined, RAM under userfaultfd, the preempt connection admitted),
 * the map of pages not to trust, then the postcopy phase: a fault handler
 * turning faults into requests, receivers placing each page once; recovery
 * (docs/protocol.md#postcopy; who owns what: pc_int.h). The VM resumes here
 * only on GO; from then on a broken link pauses instead of failing.
 */
#ifndef GW_DEST_POSTCOPY_H
#define GW_DEST_POSTCOPY_H

#include <stdbool.h>
#include <stddef.h>
#include "core/session_int.h"

struct gw_digest;


/* HELLO_POSTCOPY asked: can this host do it? 0, or -errno with @why. */
int pcd_probe(char *why, size_t why_len);
/* PC_PREPARE. 0 or the sticky error. */
int pcd_prepare(struct gw_session *s);
/* PC_DIRTY. 0 or the sticky error. */
int pcd_dirty(struct gw_session *s, const struct gw_msg_pc_map *m);
/* COMPLETE with GW_COMPLETE_POSTCOPY, before READY. 0 or the sticky error. */
int pcd_complete(struct gw_session *s);
/* GO received, right before resume: arm. 0 or the sticky error. */
int pcd_go(struct gw_session *s);
/* The VM resumed: postcopy-active. */
void pcd_resumed(struct gw_session *s);
/*
 * The postcopy phase, on the migration thread, until PC_END (pausing and
 * recovering as needed). @buf/@cap hold control payloads. 0 or the error;
 * *@unverified when every page arrived but the source went away before
 * PC_END (completed, nothing to verify with).
 */
int pcd_run(struct gw_session *s, uint8_t *buf, size_t cap, bool *unverified);
/* Verification: the digest of RAM as at resume. 0, or -errno (unavailable). */
int pcd_digest(struct gw_session *s, struct gw_digest *out, uint64_t *faults);
/* Stop threads, drop the userfaultfd, free (the migration thread's end). */
void pcd_release(struct gw_session *s);

#endif
