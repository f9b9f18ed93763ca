/* SPDX-License-Identifier: MIT */
/*
 * Byte streams under the framed connection (net/io.h): how a frame's bytes
 * reach the socket and come back. A connection is framed (header, CRC,
 * sequence, deadlines) by io.c whatever carries it; the stream below is
 * one of these, chosen once, when the connection gets its socket
 * (gw_conn_adopt) or starts TLS on it (gw_conn_start_tls):
 *
 *   plain  (stream_plain.c)  sendmsg/recvmsg through the transport's
 *          gw_sock_ops; blocking sockets whose timeouts are cut to the
 *          frame's deadline; MSG_ZEROCOPY and SCM_RIGHTS where the
 *          transport's sockets are the kernel's;
 *   tls    (stream_tls.c)    a TLS session (net/tls.h) on a kernel socket,
 *          non-blocking: each call of the session that would block waits on
 *          the socket below (the transport's poll) until the frame's
 *          deadline. Records are sealed straight from the frame's parts
 *          and opened straight into the caller's memory (tls_rec.c), or
 *          gathered into full records where OpenSSL keeps them. Nothing is
 *          zero-copy (records are encrypted copies), no descriptors pass.
 *
 * One file per stream, static functions, one exported const ops each,
 * listed in gw_streams[] (stream.c) for the tests that walk the table.
 */
#ifndef GW_NET_STREAM_H
#define GW_NET_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct gw_conn;

/* What goes with one frame's bytes besides the bytes. */
struct gw_stream_send {
	const int *fds;			/* SCM_RIGHTS with the first bytes; NULL: none */
	int nr_fds;
	int zc_from;			/* parts from this index on go with MSG_ZEROCOPY (= iovcnt: none) */
	uint32_t *zc_calls;		/* incremented by the zero-copy send ids used; NULL with no zero-copy */
	uint64_t deadline_ns;		/* the frame leaves whole by then (CLOCK_MONOTONIC); 0 = no limit */
};

/*
 * The calls on a connection's stream. All take the connection (its fd,
 * transport ops and deadlines) and return 0 or -errno unless said.
 */
struct gw_stream_ops {
	const char *name;		/* "plain", "tls" */
	bool zerocopy;			/* may send with MSG_ZEROCOPY (when the transport's sockets are kernel ones) */
	bool fds;			/* may pass descriptors (likewise) */
	/*
	 * All of @iov (its parts are modified in place) by x->deadline_ns.
	 * send_lock held. -EINVAL for descriptors it cannot pass.
	 */
	int (*send)(struct gw_conn *c, struct iovec *iov, int iovcnt, const struct gw_stream_send *x);
	/*
	 * Exactly the bytes of @iov (modified in place) by the frame's
	 * deadline (c->frame_deadline_ns); with @fds, up to @max_fds
	 * descriptors sent with them are stored and counted in *@nr_fds.
	 * Receiving thread. -ECONNRESET when the peer closed.
	 */
	int (*recv)(struct gw_conn *c, struct iovec *iov, int iovcnt, int *fds, int max_fds, int *nr_fds);
	/* Received bytes the stream holds already: a read needs nothing from the socket. */
	bool (*pending)(struct gw_conn *c);
	/*
	 * The socket's own SO_RCVTIMEO or SO_SNDTIMEO (@opt), for streams that
	 * block on it; a no-op for those that wait with the deadline. fd_lock held.
	 */
	int (*set_timeout)(struct gw_conn *c, int opt, uint64_t ms);
	/* Wake every thread blocked on the stream (shutdown both ways). fd_lock held. */
	void (*shutdown)(struct gw_conn *c);
	/* Close the socket (if any: fd may be -1) and free what the stream holds on it. Both locks held. */
	void (*close)(struct gw_conn *c);
	/* The stream's last failure in plain words ("" when none). */
	const char *(*error)(const struct gw_conn *c);
};

extern const struct gw_stream_ops gw_stream_plain;
extern const struct gw_stream_ops gw_stream_tls;
/* Every stream, NULL-terminated (tests walk it). */
extern const struct gw_stream_ops *const gw_streams[];

#endif
