/* SPDX-License-Identifier: MIT */
/*
 * Inside the acceptor (admit.h), in two files:
 *   net/admit.c       the queue shared with the migration thread, the
 *                     holder, refusals, start and stop;
 *   net/admit_open.c  the acceptor thread: openings in their pools, their
 *                     phases, eviction, deadlines.
 */
#ifndef GW_ADMIT_INT_H
#define GW_ADMIT_INT_H

#include <pthread.h>
#include "net/admit.h"
#include "util/lograte.h"
#include "wire/frame.h"

enum opening_phase {
	PH_PEEK,			/* TLS destination: plain godwit, or a TLS ClientHello? */
	PH_HANDSHAKE,			/* TLS handshake */
	PH_HDR,				/* the first frame's header */
	PH_BODY,			/* its payload */
};

/*
 * The pool an opening is in (admit.h): each has its own cap, and a
 * newcomer to a full pool evicts only from that pool, so what an opening
 * sent protects it from everything that sent less.
 */
enum opening_pool {
	POOL_SILENT,			/* accepted, nothing read yet: the oldest goes first */
	POOL_HANDSHAKE,			/* a TLS handshake begun: the one whose handshake moved least recently goes */
	POOL_FRAME,			/* its first frame begun (plain, or after an authorized handshake): as above, by bytes */
	POOL__COUNT,
};

/* A connection in its opening. Acceptor thread only. */
struct opening {
	int fd;				/* -1: free slot; a socket of the admission's sock ops */
	const struct gw_sock_ops *sock;	/* how fd is driven (the transport's) */
	struct gw_tls *tls;
	enum opening_phase phase;
	enum opening_pool pool;
	short events;			/* what it waits for */
	uint64_t t_accept_ns, deadline_ns;
	uint64_t progress_ns;		/* its last step: accepted, a byte of its frame, a handshake state */
	int tls_stage;			/* the handshake's state at its last step (gw_tls_handshake_stage) */
	uint8_t hdr[GW_WIRE_HDR_BYTES];
	size_t hdr_got;
	struct gw_frame_hdr h;
	uint8_t *payload;
	size_t body_got;
	char peer[GW_ADMIT_PEER_MAX];
};

struct gw_admit {
	/* Set at start, read-only after. */
	int listen_fd;
	const struct gw_sock_ops *sock;	/* the transport's calls (rsockets are not kernel fds) */
	struct gw_tls_ctx *tls;
	uint64_t opening_ms;
	bool recovery;			/* PC_RECOVER accepted as a first frame */
	char side[4];
	int wake_pipe[2];		/* [1] written to stop the acceptor */
	pthread_t thread;

	/* Acceptor thread only. */
	struct opening op[GW_ADMIT_MAX_OPENING];

	/* Every line a peer can cause, from any thread (its own lock). */
	struct gw_lograte lograte;

	pthread_mutex_t lock;		/* guards the fields below */
	pthread_cond_t cond;		/* CLOCK_MONOTONIC: queue changed or woken */
	struct gw_admitted queue[GW_ADMIT_QUEUE];
	unsigned q_len;
	bool woken;			/* gw_admit_take returns -ECANCELED */
	bool held;			/* a HELLO was accepted: id and identity valid */
	uint8_t id[GW_WIRE_ID_BYTES];
	uint8_t challenge[GW_WIRE_ID_BYTES];	/* what its data connections echo */
	char identity[GW_TLS_PEER_MAX];
	char holder[GW_ADMIT_PEER_MAX + 64];	/* "" free; else who holds the destination */
	uint64_t held_since_ns;
	char closed_why[128];		/* "" running; else why every HELLO is refused */
	uint64_t refused;
};

/* admit.c */
/* ERROR (@code -errno, 0: none) on a connection nobody else uses, without waiting long; then close it. */
void admit_refuse_fd(const struct gw_sock_ops *sock, int fd, struct gw_tls *tls, int code, const char *reason);
/* A refusal's line, rate-limited, and counted. @peer, @reason: safe text. */
void admit_log_refusal(struct gw_admit *a, const char *event, const char *peer, const char *reason);
/* a->lock held: the ERROR text for a HELLO while this destination is not free. */
void admit_busy_text(struct gw_admit *a, char *buf, size_t len);

/* admit_open.c: the acceptor thread. */
void *admit_acceptor_main(void *arg);

#endif
