/* SPDX-License-Identifier: MIT */
/*
 * The destination's migration thread, in three files:
 *   dest_setup.c  admission: the first connection that opens with a valid
 *                 HELLO, the RAM layout (checked or built by the VMM), the
 *                 data connections presenting the migration id;
 *   populate.c    EXTENTS gathered before round 0, pre-populated by a
 *                 thread ahead of the stream;
 *   dest.c        the state machine: the control loop (EXTENTS, ROUND,
 *                 STATE, COMPLETE), READY, GO, resume, RESUMED.
 * Everything received is hostile. The VM is resumed only on GO, after
 * READY; on any failure what was received is discarded and the VM never
 * runs here.
 */
#ifndef GW_DEST_H
#define GW_DEST_H

#include "core/session_int.h"

/* dest_setup.c: HELLO, layout, HELLO_ACK; then the data channels. 0 or the sticky error. */
int dst_handshake(struct gw_session *s);
int dst_accept_channels(struct gw_session *s);
/* Release the layout's bitmaps. */
void dst_layout_release(struct gw_session *s);
/*
 * Receives of @c: each frame within io-timeout-ms; waiting for the next one
 * ends only when the whole migration (any connection) made no progress for
 * io-timeout-ms: a committed migration that stalls times out.
 */
void dst_conn_watch(struct gw_session *s, struct gw_conn *c);

/* populate.c */
/* Fold one EXTENTS message into the pending job. 0, -EPROTO, -ERANGE, -ENOMEM. */
int dst_extents_add(struct gw_session *s, const struct gw_msg_extents *m);
/* Round 0 starts: pre-populate the gathered extents in a thread (best effort). */
void dst_populate_start(struct gw_session *s);
/* A postcopy switch: no more steps (the thread ends after the current one). */
void dst_populate_stop(struct gw_session *s);
/* Join the thread, drop what was not started. */
void dst_populate_end(struct gw_session *s);
/* postcopy_dst.c: unmap fd-backed RAM ahead of a possible switch (populate thread). */
void dst_pc_unmap_ahead(struct gw_session *s);

#endif
