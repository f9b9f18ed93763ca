/* SPDX-License-Identifier: MIT */
/*
 * Framed connections: frames (header, CRC, sequence numbers, deadlines)
 * over a byte stream (net/stream.h: plain, or a TLS session, net/tls.h)
 * on one socket of a transport, a send sequence and a receive sequence. Sends on one connection may come
 * from several threads (the control connection: migration thread and error
 * reporting), so they take send_lock; receives happen on exactly one thread
 * per connection.
 *
 * Deadlines are per frame, not per system call: once a frame's first byte
 * arrived, all of it must arrive within the frame timeout (a peer dripping
 * a byte now and then does not stretch it), and a frame sent must leave
 * whole within the same time. Waiting for the next frame's first byte is
 * bounded separately (the idle timeout), or by the progress of the whole
 * session (gw_conn_watch_progress): a destination's control connection
 * may stay silent while its data connections carry pages.
 */
#ifndef GW_IO_H
#define GW_IO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/types.h>
#include "net/transport.h"
#include "wire/frame.h"
#include "wire/msg.h"

struct gw_tls;
struct gw_tls_ctx;
struct gw_stream_ops;

#define GW_CONN_WHY_BYTES 320	/* room for a refused header's reason (gw_frame_hdr_why) */

struct gw_conn {
	int fd;				/* fd_lock and send_lock to change; -1 when closed */
	const struct gw_sock_ops *sock;	/* how fd is driven (transport); changes with fd */
	const struct gw_stream_ops *stream;	/* how the frames' bytes go (plain, TLS): chosen with fd or TLS, under both locks */
	struct gw_tls *tls;		/* the TLS stream's session (identity, info), NULL = plain (kernel sockets only); changes with fd */
	pthread_mutex_t fd_lock;	/* close vs shutdown: never held across I/O */
	pthread_mutex_t send_lock;	/* guards send_seq and the socket's write side */
	uint32_t send_seq;		/* under send_lock */
	uint32_t recv_seq;		/* receiving thread only */
	uint64_t bytes_sent;		/* added under send_lock; atomic reads (stats) */
	uint64_t bytes_recv;		/* written by the receiving thread only; atomic reads (stats) */
	/* Deadlines (see above). */
	uint64_t send_frame_ms;		/* send_lock: a frame leaves whole within this; 0 = no limit */
	bool sndtimeo_cut;		/* send_lock: SO_SNDTIMEO lowered for the rest of a frame */
	uint64_t recv_frame_ms;		/* atomic (set by any thread, read by the receiver): a begun frame arrives within this; 0 = no limit */
	uint64_t idle_ms;		/* atomic (set by any thread, read by the receiver): wait for a frame's first byte; 0 = for ever */
	uint64_t *progress_ns;		/* set before the receiving thread starts; NULL = none */
	bool progress_stamps;		/* as progress_ns: each frame begun stamps it (else only waits on it) */
	uint64_t wait_end_ns;		/* receiving thread: a wait for the next frame ends by then whatever
					   the progress (CLOCK_MONOTONIC); 0 = none */
	uint64_t frame_deadline_ns;	/* receiving thread: the frame being received, 0 = none */
	bool rcvtimeo_cut;		/* atomic (receiving thread, and gw_conn_set_recv_timeout): SO_RCVTIMEO lowered for the rest of a frame */
	char recv_why[GW_CONN_WHY_BYTES];	/* receiving thread: why the last header was refused, "" none */
#ifdef GW_FAULT_INJECTION
	bool fault_corrupt_next;	/* test builds: flip a payload bit after the CRC (send_lock) */
#endif
};

/* Initialise (once, before other threads can see @c); @fd is a kernel socket or -1. */
void gw_conn_init(struct gw_conn *c, int fd);
/* Give an initialised, closed connection a new plain socket of @sock (NULL: kernel); sequences restart. */
void gw_conn_set_fd(struct gw_conn *c, int fd, const struct gw_sock_ops *sock);
/*
 * The same with a TLS session on @fd (NULL: plain) whose first @recv_seq
 * frames were read already (admission read the first one). Takes both.
 * A TLS session is only ever on a kernel socket.
 */
void gw_conn_adopt(struct gw_conn *c, int fd, const struct gw_sock_ops *sock, struct gw_tls *tls,
		   uint32_t recv_seq);
/*
 * Client: start TLS on the connection's socket (the source side) and
 * complete the handshake within @timeout_ms. @host: the name the server's
 * certificate must carry when none is configured. 0, or -errno with the
 * reason in plain words in @why; -EOPNOTSUPP when the socket is not a
 * kernel one (rdma:).
 */
int gw_conn_start_tls(struct gw_conn *c, struct gw_tls_ctx *ctx, const char *host, uint64_t timeout_ms,
		      char *why, size_t why_len);
/*
 * Why the last frame header received was refused (version, type, length,
 * flags, sequence), "" when none was: the receiving thread, after its
 * receive failed with -EPROTO or -EPROTONOSUPPORT.
 */
const char *gw_conn_recv_why(const struct gw_conn *c);
/* The TLS failure behind the last error of this connection ("" when none or plain). */
const char *gw_conn_tls_error(const struct gw_conn *c);
/* Close the socket (and its TLS session). Safe against a concurrent shutdown or send. */
void gw_conn_close(struct gw_conn *c);
/* Wake any thread blocked on this connection (shutdown both ways); any thread. */
void gw_conn_shutdown(struct gw_conn *c);
/*
 * Frame timeout both ways, and the idle timeout: a silent peer gives
 * -ETIMEDOUT. Before the connection is shared (or by its receiving thread).
 */
int gw_conn_set_timeout(struct gw_conn *c, uint64_t timeout_ms);
/* Frame timeout of sends alone: any thread (the first error is sent with a short one). */
int gw_conn_set_send_timeout(struct gw_conn *c, uint64_t timeout_ms);
/*
 * How long the receiving thread waits for the next frame to begin
 * (0 = for ever: liveness from sends and TCP, or from the session's
 * progress). Receiving thread, or before it starts.
 */
void gw_conn_set_idle_timeout(struct gw_conn *c, uint64_t timeout_ms);
/*
 * Receive side only: the idle timeout and, unless @timeout_ms is 0 (wait
 * for ever for the next frame, as a postcopy connection waits for page
 * requests), the frame timeout. 0 or -errno. Receiving thread, or before
 * it starts.
 */
int gw_conn_set_recv_timeout(struct gw_conn *c, uint64_t timeout_ms);
/*
 * Receives on @c stamp *@progress_ns (atomic, CLOCK_MONOTONIC) with every
 * frame begun, and an idle wait ends with -ETIMEDOUT only once the stamp,
 * shared by every connection of a migration, is older than the idle
 * timeout: the migration as a whole made no progress. Before the
 * receiving thread starts.
 */
void gw_conn_watch_progress(struct gw_conn *c, uint64_t *progress_ns);
/*
 * The same, but frames on @c never stamp *@progress_ns: the session stamps
 * it where it sees progress of its own kind (a destination: pages). Before
 * the receiving thread starts.
 */
void gw_conn_wait_progress(struct gw_conn *c, uint64_t *progress_ns);
/*
 * Waits for @c's next frame end with -ETIMEDOUT at @end_ns
 * (CLOCK_MONOTONIC) however the session progresses; 0 = no such end.
 * Receiving thread.
 */
void gw_conn_set_wait_end(struct gw_conn *c, uint64_t end_ns);
/*
 * Without blocking: 0 when the peer may still be there, -ECONNRESET when
 * it closed or reset the connection (a FIN or an error is queued).
 */
int gw_conn_peer_alive(struct gw_conn *c);
/*
 * Bytes the kernel holds for the connection: @inbound, received and not yet
 * read (SIOCINQ); else written and not yet acknowledged by the peer, or for
 * a UNIX socket not yet read by it (SIOCOUTQ). 0 when the transport cannot
 * tell (not a kernel socket). Any thread: a query of the fd only.
 */
uint64_t gw_conn_queued_bytes(const struct gw_conn *c, bool inbound);

/*
 * Send one frame: payload gathered from @iov. 0 or -errno (-EPIPE,
 * -ETIMEDOUT, -ECONNRESET...). @fds/@nr_fds, when not NULL, are passed with
 * SCM_RIGHTS on the first bytes (unix sockets only).
 */
int gw_conn_send(struct gw_conn *c, uint16_t type, const struct iovec *iov, int iovcnt,
		 const int *fds, int nr_fds);
/*
 * Send one PAGES frame whose CRC covers the header and the first
 * @crc_iovcnt parts of @iov only (a PAGE_CRC frame: the data area is
 * checked page by page). With @zc_calls (kernel TCP with SO_ZEROCOPY on)
 * the parts after those go with MSG_ZEROCOPY: their memory must stay valid
 * until the kernel reports the send complete (net/zerocopy.h), and
 * *@zc_calls is incremented by the send ids used. *@seq gets the frame's
 * sequence number. 0 or -errno.
 */
int gw_conn_send_prefix_crc(struct gw_conn *c, uint16_t type, const struct iovec *iov, int iovcnt,
			    int crc_iovcnt, uint32_t *zc_calls, uint32_t *seq);
/* Encode the typed message @m (wire/msg.h; NULL for GO) and send it. 0 or -errno. */
int gw_conn_send_msg(struct gw_conn *c, uint16_t type, const void *m);
/* The same with descriptors (FDS). */
int gw_conn_send_msg_fds(struct gw_conn *c, uint16_t type, const void *m, const int *fds, int nr_fds);
/* Send ERROR with a code and a reason (best effort, short timeout). */
int gw_conn_send_error(struct gw_conn *c, int neg_errno, const char *reason);

/*
 * Wait for the next frame (idle timeout), receive its header and check it
 * (magic, version, type, length, seq). 0, -EPROTO, -EPROTONOSUPPORT,
 * -ECONNRESET (peer closed), -ETIMEDOUT, -EACCES (TLS refusal). The
 * caller then reads exactly h->len payload bytes with gw_conn_recv_* (the
 * frame's deadline runs) and finishes with gw_conn_recv_check(), which
 * verifies the CRC.
 */
int gw_conn_recv_hdr(struct gw_conn *c, struct gw_frame_hdr *h, uint32_t *crc_state);
/* Read exactly the bytes described by @iov, folding them into the CRC (@crc_state NULL: not). */
int gw_conn_recv_iov(struct gw_conn *c, const struct iovec *iov, int iovcnt, uint32_t *crc_state);
int gw_conn_recv_check(const struct gw_frame_hdr *h, uint32_t crc_state);
/*
 * Whole frame into @buf (capacity @cap): payload length or -errno;
 * -EPROTO when the payload exceeds @cap. When @fds is not NULL, up to
 * @max_fds received descriptors are stored and counted in *nr_fds.
 */
ssize_t gw_conn_recv(struct gw_conn *c, struct gw_frame_hdr *h, void *buf, size_t cap,
		     int *fds, int max_fds, int *nr_fds);

/*
 * Receive one whole frame (any type but PAGES) and decode it into @m
 * (wire/msg.h). @buf, @cap hold the payload while @m is used (a decoded
 * EXTENTS points into it); set m->state.st first where a STATE may come.
 * Returns the frame's type (> 0) or -errno: -EPROTO (malformed: @why says
 * why), -EBADMSG, -ECONNRESET (peer closed), -ETIMEDOUT, -EACCES (TLS:
 * @why says which check failed).
 */
int gw_conn_recv_msg(struct gw_conn *c, union gw_msg *m, void *buf, size_t cap,
		     char *why, size_t why_len);
/* The same, keeping up to @max_fds descriptors sent with the frame (FDS). */
int gw_conn_recv_msg_fds(struct gw_conn *c, union gw_msg *m, void *buf, size_t cap,
			 int *fds, int max_fds, int *nr_fds, char *why, size_t why_len);

#endif
