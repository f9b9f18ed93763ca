/* SPDX-License-Identifier: MIT */
/*
 * The destination's migration thread, in three files:
 *   dest/setup.c  admission: the first connection that opens with a valid
 *                 HELLO, the RAM layout (checked or built by the VMM), the
 *                 data connections presenting the migration id;
 *   dest/populate.c    EXTENTS gathered before round 0, pre-populated by a
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
#include "pipe/pages_in.h"

/*
 * What only the destination's session holds (s->dst, allocated with the
 * session). Owners as marked: "mig" is the migration thread.
 */
struct gw_pc_dst;

struct gw_dst_state {
	char src_identity[GW_TLS_PEER_MAX];	/* the source's TLS identity at HELLO ("" plain): a
					   recovery must present it; mig, set before postcopy
					   (gw_postcopy_recover reads it after) */
	char src_holder[GW_TLS_PEER_MAX + 128];	/* who holds this destination (BUSY's text); as above */
	struct gw_dst_block dblk[GW_MAX_RAM_BLOCKS];	/* see pages_in.h; mig, before channels */
	struct gw_dst_layout layout;	/* mig, set before channel threads start (s->layout) */
	uint32_t hello_flags;		/* from HELLO, set before channel threads start */
	int snap_err;			/* mig: why there is no (usable) snapshot, 0 = none or usable */
	void *pop_job;			/* mig: extents gathered before round 0 */
	pthread_t populate_thread;	/* mig */
	bool populate_running;		/* mig */
	bool populate_stop;		/* atomic: no more steps (a postcopy switch) */
	struct gw_pc_dst *pcd;		/* mig (dest/postcopy.c) */
	bool pc_recover_listening;	/* s->lock: listen_fd is the recovery's */
};

/* dest/setup.c: HELLO, layout, HELLO_ACK; then the data channels. 0 or the sticky error. */
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
/* The migration progressed (pages arrived, a step towards its end): any thread. */
void dst_progress(struct gw_session *s);

/* dest/populate.c */
/* Fold one EXTENTS message into the pending job. 0, -EPROTO, -ERANGE, -ENOMEM. */
int dst_extents_add(struct gw_session *s, const struct gw_msg_extents *m);
/* Round 0 starts: pre-populate the gathered extents in a thread (best effort). */
void dst_populate_start(struct gw_session *s);
/* A postcopy switch: no more steps (the thread ends after the current one). */
void dst_populate_stop(struct gw_session *s);
/* Join the thread, drop what was not started. */
void dst_populate_end(struct gw_session *s);
/* dest/postcopy.c: unmap fd-backed RAM ahead of a possible switch (populate thread). */
void pcd_unmap_ahead(struct gw_session *s);

#endif
