/* SPDX-License-Identifier: MIT */
/*
 * Admission on the destination: who may talk to it, and how long a
 * stranger may take.
 *
 * One thread, the acceptor, owns the listening socket for the life of the
 * session. It accepts every connection at once, so the listen backlog
 * never fills, and gives each a deadline for its whole opening: the TLS
 * handshake (when the destination has credentials), then its first frame,
 * whole. Many of them progress at once (non-blocking, one poll loop), so
 * an idle, dripping, silent or garbage connection never delays another.
 *
 * Openings are kept in three pools by what they sent, each with its own
 * cap: silent (accepted, nothing read: GW_ADMIT_SILENT), in a TLS
 * handshake (GW_ADMIT_HANDSHAKE), in their first frame (plain, or after an
 * authorized handshake: GW_ADMIT_FRAME). An opening enters a pool only
 * from the one before, and a newcomer to a full pool evicts from that pool
 * alone: the opening whose last step is oldest (a step: accepted, a byte
 * of the first frame, a handshake message taken), never one with bytes
 * waiting, which is read instead. Bytes that came with a connection are
 * read at its accept. So no number of silent connections can evict one
 * that sent a byte, no parked half frame can evict one that progresses,
 * and no unauthenticated handshake can evict an authenticated source. An
 * evicted peer gets ERROR BUSY with the reason where it can read one
 * (plain, or after its handshake).
 *
 * A connection whose first frame is HELLO or CHAN_HELLO (CRC checked) is
 * queued for the migration thread (gw_admit_take); anything else is
 * refused with an ERROR frame on its own connection and closed. Once the
 * migration thread accepted a HELLO (gw_admit_hold), a data connection
 * must present that migration's id (and, with TLS, the control
 * connection's identity), and a HELLO from anyone else is refused at once
 * with ERROR BUSY naming who holds the destination. Nothing here touches
 * RAM or the VM.
 *
 * A postcopy recovery listener (gw_admit_config.recovery) is held from
 * its start: its control connection opens with PC_RECOVER instead of
 * HELLO, and must present the migration id and the TLS identity of the
 * source that sent the HELLO, as data connections do.
 *
 * Threads: the acceptor owns its opening connections; the queue, the
 * migration id, the holder and the counters are under a->lock, shared with
 * the migration thread and whoever stops or wakes it.
 */
#ifndef GW_ADMIT_H
#define GW_ADMIT_H

#include <stdbool.h>
#include <stdint.h>
#include "net/tls.h"
#include "net/transport.h"
#include "wire/wire.h"

#define GW_ADMIT_SILENT 64		/* openings that sent nothing yet */
#define GW_ADMIT_HANDSHAKE 32		/* openings in their TLS handshake */
#define GW_ADMIT_FRAME 32		/* openings in their first frame */
#define GW_ADMIT_MAX_OPENING (GW_ADMIT_SILENT + GW_ADMIT_HANDSHAKE + GW_ADMIT_FRAME)
#define GW_ADMIT_QUEUE (GW_WIRE_MAX_CHANNELS + 8)	/* admitted, not yet taken */
#define GW_ADMIT_PEER_MAX 256

struct gw_admit;

/* A connection through its opening: its first frame read and CRC-checked. */
struct gw_admitted {
	int fd;				/* -1 once taken over (gw_conn_adopt) or released */
	const struct gw_sock_ops *sock;	/* how fd is driven (the transport's calls) */
	struct gw_tls *tls;		/* NULL: plain */
	uint16_t type;			/* GW_MSG_HELLO, GW_MSG_CHAN_HELLO or (recovery) GW_MSG_PC_RECOVER */
	uint8_t *payload;		/* the first frame's payload (malloc'ed) */
	uint32_t len;
	char peer[GW_ADMIT_PEER_MAX];	/* "127.0.0.1:40222", then " CN=..." with TLS (escaped: gw_log_str) */
	char identity[GW_TLS_PEER_MAX];	/* the TLS identity, "" plain */
};

struct gw_admit_config {
	int listen_fd;			/* stays the caller's */
	const struct gw_sock_ops *sock;	/* the transport's socket calls; NULL: the kernel's */
	struct gw_tls_ctx *tls;		/* NULL: plain connections only (always so on rdma:) */
	uint64_t opening_ms;		/* accept -> first frame whole, TLS handshake included */
	const char *side;		/* log side of the acceptor thread */
	bool recovery;			/* postcopy recovery: PC_RECOVER accepted as a first frame */
};

/* Start the acceptor. NULL with errno. */
struct gw_admit *gw_admit_start(const struct gw_admit_config *cfg);
/* Stop and join it; close what it holds. NULL is fine. */
void gw_admit_stop(struct gw_admit *a);

/*
 * Migration thread: the next admitted connection whose first frame is
 * @type, by @deadline_ns (0: no deadline). 0 and *@out, -ETIMEDOUT, or
 * -ECANCELED after gw_admit_wake().
 */
int gw_admit_take(struct gw_admit *a, uint16_t type, uint64_t deadline_ns, struct gw_admitted *out);
/* Interrupt gw_admit_take() from now on (the session fails or ends); any thread. */
void gw_admit_wake(struct gw_admit *a);
/*
 * A HELLO was accepted: data connections must present @id, echo
 * @challenge (what HELLO_ACK sent) and come from the TLS identity
 * @identity ("" plain); other HELLOs are refused as busy, held by
 * @holder (who and from where, for their ERROR). Queued HELLOs are refused
 * now.
 */
void gw_admit_hold(struct gw_admit *a, const uint8_t id[GW_WIRE_ID_BYTES],
		   const uint8_t challenge[GW_WIRE_ID_BYTES], const char *identity, const char *holder);
/* The migration ended: every later HELLO is refused with @why. */
void gw_admit_close(struct gw_admit *a, const char *why);
/*
 * Whether a log line of @event that a peer caused (a refusal, a busy
 * answer) may be written now: every such line of this destination is
 * under one rate limit (util/lograte.h), whichever thread writes it. Any
 * thread.
 */
bool gw_admit_log_allow(struct gw_admit *a, const char *event);
/* Connections refused so far (statistics). */
uint64_t gw_admit_refused(struct gw_admit *a);

/* Refuse @c with ERROR @code (-errno) and @reason on its connection, then close and free it. */
void gw_admitted_refuse(struct gw_admitted *c, int code, const char *reason);
/* Free what @c still holds (fd and TLS session unless taken over, payload). */
void gw_admitted_release(struct gw_admitted *c);

#endif
