/* SPDX-License-Identifier: MIT */
/*
 * Internal layout of a session and the helpers shared by source.c, dest.c
 * and channel.c.
 *
 * Threads:
 *  - the API thread (any caller of session.h functions);
 *  - the migration thread (source: source_main; destination: dest_main),
 *    which owns the control connection's receive side, the dirty tracker,
 *    the round loop and the handover;
 *  - one channel thread per data connection (sender on the source,
 *    receiver on the destination).
 * Field comments say who writes each field; "lock" means s->lock.
 */
#ifndef GW_SESSION_INT_H
#define GW_SESSION_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <godwit/godwit.h>
#include "mem/bitmap.h"
#include "mem/dirty.h"
#include "net/io.h"
#include "state.h"
#include "net/transport.h"
#include "wire/wire.h"

struct gw_channel;

/* The first error of a migration: recorded once, never overwritten. */
struct gw_error {
	int code;			/* -errno, 0 = none */
	char phase[32];			/* "setup", "round0", "final", "handover", ... */
	char msg[256];
	bool from_peer;			/* the peer reported it (no ERROR sent back) */
};

/* Destination-side per-block receive state. */
struct gw_dst_block {
	uint8_t *host;			/* set by the migration thread before channels start */
	int fd;				/* backing fd or -1: pages are written with pwrite */
	uint64_t fd_offset_bytes;
	uint64_t nr_pages;
	struct gw_bitmap written;	/* pages holding non-zero data: atomic bit ops */
};

struct gw_session {
	/* Set at creation, then read-only. */
	enum gw_role role;
	const struct gw_vm_ops *ops;
	void *opaque;
	char side[4];			/* "src" / "dst" for the log */

	/* RAM layout: set at creation (source) or by the migration thread
	 * before any channel thread starts (destination); read-only after. */
	struct gw_vm_info vm;

	pthread_mutex_t lock;		/* guards the fields marked "lock" */
	pthread_cond_t cond;		/* signalled when status changes */
	int64_t params[GW_PARAM__COUNT];/* lock to write; atomic reads */
	bool running;			/* lock: a migration thread exists */
	bool thread_joined;		/* lock */
	pthread_t thread;		/* lock */
	enum gw_status status;		/* lock */
	struct gw_error err;		/* lock: first error, sticky */
	bool go_sent;			/* lock: source gave the VM away */
	bool cancelled;			/* atomic */
	struct gw_stats stats;		/* lock: published snapshot + live counters below */

	/* Migration thread only, unless noted. */
	struct gw_url url;
	char url_str[GW_URL_MAX];
	char bound_url[GW_URL_MAX];	/* lock */
	int listen_fd;			/* destination; shutdown() by cancel */
	struct gw_conn ctl;		/* control connection; send side locked */
	unsigned nr_channels;
	struct gw_channel *chans;	/* array of nr_channels */
	uint8_t mig_id[GW_WIRE_ID_BYTES];
	struct gw_dirty dirty;
	bool dirty_started;
	uint32_t round;			/* current round: atomic reads by channels */
	uint64_t t_start_ns, t_pause_ns;
	uint64_t rtt_ns;		/* HELLO -> HELLO_ACK, source */

	/* Counters updated by channel threads with atomics; folded into stats. */
	uint64_t ctr_normal_pages, ctr_zero_pages, ctr_xbzrle_pages;
	uint64_t ctr_raw_bytes, ctr_wire_payload_bytes;

	/* Source: the control reader thread hands READY / RESUMED over here. */
	pthread_t ctl_reader;
	bool ctl_reader_started;	/* migration thread */
	bool ctl_quiet;			/* atomic: migration over, reader errors are expected */
	uint16_t mbox_type;		/* lock: last frame type delivered, 0 = none */
	uint8_t mbox[64];		/* lock */
	size_t mbox_len;		/* lock */

	/* Destination only. */
	struct gw_dst_block dblk[GW_MAX_RAM_BLOCKS];	/* see struct */
	uint32_t hello_flags;		/* from HELLO */
	uint32_t codec, codec_level, batch_pages;
	int local_fds[GW_MAX_RAM_BLOCKS];
	void *pop_job;			/* migration thread: extents gathered before round 0 */
	pthread_t populate_thread;
	bool populate_running;

	/* Shared rate limiter (live parameter max-bandwidth). */
	pthread_mutex_t rl_lock;
	uint64_t rl_next_ns;		/* rl_lock: when the next byte may leave */
};

/* Parameters: atomic read of the current value. */
static inline int64_t gw_param(const struct gw_session *s, enum gw_param p)
{
	return __atomic_load_n(&s->params[p], __ATOMIC_RELAXED);
}
void gw_params_defaults(int64_t *values);

/*
 * Record the first error (later ones are logged and dropped) and wake every
 * thread blocked on a socket. Unless @from_peer, the reason is also sent to
 * the peer on the control connection. Returns @code.
 */
int gw_fail(struct gw_session *s, const char *phase, int code, bool from_peer,
	    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The sticky error code, 0 when none. Cheap: threads poll it per batch. */
int gw_failed(struct gw_session *s);
void gw_set_status(struct gw_session *s, enum gw_status st);
/* Wake every blocked channel/control read and write (any thread). */
void gw_session_shutdown_conns(struct gw_session *s);
/* Publish a fully initialised channel array (fds -1) for shutdown to see. */
void gw_session_publish_channels(struct gw_session *s, struct gw_channel *chans, unsigned n);
/* Take the channel array back (threads joined); the caller releases it. */
struct gw_channel *gw_session_detach_channels(struct gw_session *s, unsigned *n);

/* Testing: die like kill -9 if @point is armed (and @arg matches). */
void gw_fault_maybe_die(struct gw_session *s, enum gw_fault_point point, uint64_t arg);
bool gw_fault_armed(struct gw_session *s, enum gw_fault_point point);

/* Source and destination migration threads. */
void *gw_source_main(void *arg);
void *gw_dest_main(void *arg);

/* CPU time of this process so far (getrusage), for the statistics. */
void gw_cpu_times(uint64_t *user_ns, uint64_t *sys_ns);

/* Rate limit: wait until @bytes may be sent under max-bandwidth-bps. */
void gw_ratelimit(struct gw_session *s, uint64_t bytes);

/* Receive an ERROR frame's payload and turn it into the sticky error. */
int gw_fail_from_peer_frame(struct gw_session *s, const char *phase, const void *buf, size_t len);

#endif
