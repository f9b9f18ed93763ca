/* SPDX-License-Identifier: MIT */
/*
 * Postcopy's source side, as the rest of source/ sees it: switch over first,
 * then serve the pages the destination asks for and push the rest, recover
 * from a broken link (docs/protocol.md#postcopy; who owns what: pc_int.h).
 *
 * Before GO the precopy rules hold: the source owns the VM and any failure
 * resumes it here. From GO on, the VM's newest state is split: a broken
 * connection pauses both sides (postcopy-paused) until an operator
 * reconnects them; the death of either process, or a protocol error, loses
 * the VM.
 */
#ifndef GW_SOURCE_POSTCOPY_H
#define GW_SOURCE_POSTCOPY_H

#include <stdbool.h>
#include "core/session_int.h"

struct src_ctx;
struct gw_digest;


/* At a round end (or a batch boundary with @mid_round): switch to postcopy now? */
bool pcs_want_switch(struct gw_session *s, struct src_ctx *c, uint64_t t_precopy_ns, bool mid_round);
/*
 * The switch and the postcopy phase, after src_precopy returned
 * GW_SRC_POSTCOPY. 0 once every page is on the destination (status still
 * postcopy-active: the caller verifies and ends), or the error.
 */
int src_postcopy(struct gw_session *s, struct src_ctx *c);
/* The control reader got a postcopy message: 0 handled, -EPROTO not expected now. */
int pcs_ctl_msg(struct gw_session *s, int type, const union gw_msg *m);
/* The control reader's last message once postcopy switched: PC_DONE (no verify) or VERIFIED. */
bool pcs_last_message(struct gw_session *s, int type);
/* The source's postcopy verification digest (frozen RAM). 0 or -errno. */
int pcs_digest(struct gw_session *s, struct src_ctx *c, struct gw_digest *out);
/* Free what src_postcopy left (the caller's teardown). */
void pcs_release(struct gw_session *s);

#endif
