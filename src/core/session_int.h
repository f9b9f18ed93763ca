/* SPDX-License-Identifier: MIT */
/*
 * Internal layout of a session and the helpers shared by the engine files.
 * struct gw_session holds what more than one role uses; a field only the
 * source uses lives in struct gw_src_state (source/source.h, s->src), one
 * only the destination uses in struct gw_dst_state (dest/dest.h, s->dst).
 * core/ reaches the layers above it only through s->role_ops.
 *
 * Threads:
 *  - the API thread (any caller of session.h functions);
 *  - the migration thread (s->role_ops->main: source/source.c,
 *    dest/dest.c), which owns the control connection's receive side (the
 *    source hands it to its control reader), the dirty tracker, the round
 *    loop and the handover;
 *  - one channel thread per data connection (sender on the source,
 *    receiver on the destination);
 *  - source: the control reader; destination: the populate thread.
 * Field comments say who writes each field and how it is read: "lock"
 * means under s->lock for both; "atomic" means __atomic builtins only.
 */
#ifndef GW_SESSION_INT_H
#define GW_SESSION_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <godwit/godwit.h>
#include "core/fault.h"
#include "mem/bitmap.h"
#include "mem/devdirty.h"
#include "mem/dirty.h"
#include "net/io.h"
#include "net/tls.h"
#include "net/transport.h"
#include "mem/snapshot.h"
#include "wire/msg.h"

/* Events a downtime may hold (events.c); more are delivered late, never lost. */
#define GW_EVENTS_HELD_MAX 16

struct gw_channel;
struct gw_pc_src;
struct gw_pc_dst;

/* Postcopy phase of a migration (s->pc_state, atomic). */
enum gw_pc_state {
	GW_PC_NONE = 0,			/* precopy rules: the source owns the VM */
	GW_PC_PREPARED,			/* committed to postcopy; GO not sent yet (source still owns it) */
	GW_PC_ACTIVE,			/* the VM runs on the destination: a broken link pauses, never fails */
	GW_PC_DONE,			/* every page placed */
};

/*
 * Where a migration was when its first error happened. Internal: the name
 * (gw_phase_name) is what leaves the engine, in the statistics and the log.
 */
enum gw_phase {
	GW_PHASE_NONE,
	GW_PHASE_REQUEST,	/* a request refused before anything started */
	GW_PHASE_LISTEN,	/* a destination stopped before any source came */
	GW_PHASE_CANCEL,
	GW_PHASE_SETUP,		/* handshake, channels, tracking */
	GW_PHASE_ROUND,		/* precopy rounds */
	GW_PHASE_FINAL,		/* paused: the last pages and the state */
	GW_PHASE_HANDOVER,	/* READY, GO, RESUMED */
	GW_PHASE_SEND,		/* a source channel */
	GW_PHASE_RECEIVE,	/* a destination channel */
	GW_PHASE_CONTROL,	/* the control connection */
	GW_PHASE_POSTCOPY,
	GW_PHASE__COUNT
};
/* "setup", "round", ...; "?" out of range. */
const char *gw_phase_name(enum gw_phase phase);

/* The first error of a migration: recorded once, never overwritten. */
struct gw_error {
	int code;			/* -errno, 0 = none; stored atomically under lock */
	enum gw_phase phase;
	char msg[512];
	bool from_peer;			/* the peer reported it (no ERROR sent back) */
};

#define GW_STATS_ROUNDS_KEPT 64		/* rows of the per-round table */

/*
 * What the session calls in the layers above core/, by role: set by
 * gw_session_new (session.c), so that core/ never names source/, dest/ or
 * pipe/. Every hook is required unless marked optional.
 */
struct gw_role_ops {
	const char *name;			/* "source", "destination" */
	void *(*main)(void *session);		/* the migration thread */
	/* Optional: this side's live figures into @out; caller holds s->lock. */
	void (*stats_locked)(struct gw_session *s, struct gw_stats *out);
	/* Optional: the live channels' counters into s->stats_chan_* (s->lock held); their sum. */
	uint64_t (*channels_locked)(struct gw_session *s);
	/* Shut every channel's connection and wake its threads (any thread, s->lock held). */
	void (*shutdown_channels)(struct gw_channel *chans, unsigned n);
};

struct gw_channel;
struct gw_dst_layout;
struct gw_dst_state;
struct gw_src_state;

struct gw_session {
	/* Set at creation, then read-only. */
	enum gw_role role;
	const struct gw_role_ops *role_ops;
	const struct gw_vm_ops *ops;	/* &ops_copy */
	struct gw_vm_ops ops_copy;	/* the VMM's table at the library's size (hooks it lacks: NULL) */
	void *opaque;
	char side[4];			/* "src" / "dst" for the log */
	uint8_t boot_id[GW_WIRE_ID_BYTES];	/* this kernel's boot: equal on both ends = one clock */
#ifdef GW_FAULT_INJECTION
	enum gw_fault_point fault_point;	/* test builds: from GW_FAULT */
	uint64_t fault_arg;
#endif

	/* RAM layout: set at creation (source) or by the migration thread
	 * before any channel thread starts (destination); read-only after. */
	struct gw_vm_info vm;		/* blocks: vm_blocks */
	struct gw_ram_block vm_blocks[GW_MAX_RAM_BLOCKS];

	pthread_mutex_t lock;		/* guards the fields marked "lock" */
	pthread_cond_t cond;		/* CLOCK_MONOTONIC; status, error or mailbox changed */
	int64_t params[GW_PARAM__COUNT];/* lock to write; atomic reads (gw_param) */
	char sparams[GW_SPARAM__COUNT][GW_SPARAM_MAX_BYTES];	/* lock (setup-only: copied at start) */
	bool running;			/* lock: a migration thread exists */
	bool thread_joined;		/* lock */
	pthread_t thread;		/* lock */
	enum gw_status status;		/* lock */
	struct gw_error err;		/* lock (err.code: also atomic reads, gw_failed) */
	bool go_sent;			/* lock: the source gave the VM away */
	bool cancelled;			/* atomic */
	struct gw_stats stats;		/* lock: the published snapshot (scalars) */
	/* lock: the tables beside it, copied out a row at a time (gw_session_round, ...). */
	struct gw_round_stats stats_round[GW_STATS_ROUNDS_KEPT];	/* stats.nr_rounds_kept rows */
	uint64_t stats_chan_bytes[GW_WIRE_MAX_CHANNELS];	/* stats.nr_channels rows */
	uint64_t stats_chan_codec_bytes[GW_WIRE_MAX_CHANNELS][GW_CODEC__COUNT];
	uint64_t stats_vcpu_blocktime_ns[GW_WIRE_MAX_VCPUS];	/* stats.postcopy_nr_vcpus rows */
	uint64_t t_start_ns;		/* lock: migrate command / first HELLO */

	/* Migration thread only, unless noted. */
	struct gw_url url;		/* set before the thread starts */
	char url_str[GW_URL_MAX];	/* set before the thread starts */
	char bound_url[GW_URL_MAX];	/* set before the thread starts */
	int listen_fd;			/* destination; set before the thread starts */
	struct gw_conn ctl;		/* control connection; send side locked */
	unsigned nr_channels;		/* lock to publish with chans */
	struct gw_channel *chans;	/* lock to publish and detach; array of nr_channels */
	uint8_t mig_id[GW_WIRE_ID_BYTES];
	/*
	 * The destination's random bytes for this migration (HELLO_ACK): drawn
	 * by the destination, echoed in every CHAN_HELLO by the source, so a
	 * recorded stream cannot open the data connections of another.
	 */
	uint8_t challenge[GW_WIRE_ID_BYTES];
	struct gw_dirty dirty;
	bool dirty_started;		/* migration thread, before the first batch is queued */
	bool dirty_final;		/* atomic: set by the migration thread before the final
					   harvest (collect_last re-arms nothing): from then on
					   channels copy pages, never send them live */
	uint32_t round;			/* atomic: current round, read by channel threads */
	bool ctl_quiet;			/* atomic: migration over, control read errors are expected */
	bool same_clock;		/* the peer runs on this kernel: its CLOCK_MONOTONIC is ours */

	/* Counters, added by channel threads: atomic. */
	uint64_t ctr_normal_pages, ctr_zero_pages, ctr_xbzrle_pages;
	uint64_t ctr_raw_bytes, ctr_wire_payload_bytes;
	uint64_t ctr_stage_ns[GW_STAGE__COUNT];	/* pipeline stage times, all channels */
	uint64_t ctr_live_pages, ctr_void_pages;	/* source: sent from guest memory; named in PAGES_VOID */
	uint64_t ctr_direct_pages;	/* destination: received straight into guest memory */
	uint64_t ctr_zc_sends, ctr_zc_copied;	/* source: MSG_ZEROCOPY sends completed; of those, copied */


	/*
	 * Source: pages the VMM's devices wrote (gw_session_mark_dirty, any
	 * thread, lock-free; mem/devdirty.h). Allocated by gw_session_new,
	 * freed by gw_session_free; reset when tracking starts and taken at
	 * every harvest by the migration thread. Destination: no blocks.
	 */
	struct gw_devdirty devdirty;

	/* TLS credentials of this migration (net/tls.h), NULL = plain: made by
	 * gw_migrate_start / gw_incoming_start before the thread, freed by the next
	 * start or gw_session_free. */
	struct gw_tls_ctx *tls_ctx;

	/* Destination. */
	struct gw_admit *adm;		/* lock: the acceptor (admit.h), from gw_incoming_start until
					   postcopy's preempt connection (then a recovery's, while it
					   listens) or gw_session_free; stopped by gw_session_stop_admit */
	uint64_t adm_refused;		/* lock: connections refused by acceptors stopped already */
	uint64_t rx_progress_ns;	/* atomic: the destination's migration last progressed (pages, a step
					   towards its end: dest/setup.c dst_conn_watch) */
	/* The RAM layout the receivers apply pages to (the destination's, in
	 * dst), set before channel threads start; NULL on the source. */
	const struct gw_dst_layout *layout;
	struct gw_snapshot *snap;	/* verify: RAM as at resume; migration thread, and the
					   populate thread while it runs (protects ahead) */
	struct gw_src_state *src;	/* source only (source/source.h); set at creation */
	struct gw_dst_state *dst;	/* destination only (dest/dest.h); set at creation */

	/* Events (events.c): the callback, set while no migration runs. */
	gw_event_fn ev_fn;		/* lock */
	void *ev_opaque;		/* lock */
	enum gw_status ev_status;	/* lock: the last status emitted */
	bool ev_held;			/* migration thread: events wait in ev_queue */
	unsigned ev_nr_held;		/* migration thread */
	struct gw_event ev_queue[GW_EVENTS_HELD_MAX];	/* migration thread */
	/*
	 * Postcopy (source/postcopy.h, dest/postcopy.h). pc_state and pc_broken are atomic: pc_broken
	 * (-errno, 0 = none) is set by the first connection failure while
	 * GW_PC_ACTIVE instead of the sticky error, and gw_failed() reports it
	 * so that every thread of the broken connections stops; the migration
	 * thread clears it once a recovery has replaced them.
	 */
	int pc_state;			/* atomic: enum gw_pc_state */
	int pc_broken;			/* atomic */
	bool pc_start_req;		/* atomic: gw_session_start_postcopy asked */
	struct gw_conn preempt;		/* the page-request connection (both sides) */

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

static inline uint32_t gw_round(const struct gw_session *s)
{
	return __atomic_load_n(&s->round, __ATOMIC_RELAXED);
}

/*
 * Record the first error (later ones are logged and dropped), send its reason
 * to the peer on the control connection and wake every thread blocked on a
 * socket. Returns @code (-EIO for a non-negative one).
 */
int gw_fail(struct gw_session *s, enum gw_phase phase, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * The one way to set the sticky error by hand, caller holding s->lock: true
 * if it was the first (then the caller logs and notifies as it needs); no
 * ERROR is sent and nothing is woken here.
 */
bool gw_error_set_locked(struct gw_session *s, enum gw_phase phase, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * The sticky error code, 0 when none; during postcopy also a broken link
 * (s->pc_broken) until a recovery. Cheap: threads poll it per batch.
 */
int gw_failed(struct gw_session *s);
/*
 * core/error.c: end a migration in postcopy as failed because its owner is
 * going away (gw_session_free, gw_session_abandon); nothing when none runs.
 */
void gw_abandon_postcopy(struct gw_session *s);
/* A copy of the sticky error, taken under the lock. */
void gw_error_get(struct gw_session *s, struct gw_error *out);
/* Turn a received ERROR message into the sticky error (from the peer). */
int gw_fail_from_peer(struct gw_session *s, enum gw_phase phase, const struct gw_msg_error *m);
/* Text for an errno met on a connection, from @who's side ("source", "destination"). */
const char *gw_conn_err_text(int err, const char *who);

void gw_set_status(struct gw_session *s, enum gw_status st);
/* A VMM's gw_vm_info into s->vm, blocks copied (session.c). 0, -EINVAL, -E2BIG. */
int gw_session_take_vm_info(struct gw_session *s, const struct gw_vm_info *in);
/* Wake every blocked channel/control read and write (any thread). */
void gw_session_shutdown_conns(struct gw_session *s);
/* Destination: publish @a as the session's acceptor (under s->lock). */
void gw_session_set_admit(struct gw_session *s, struct gw_admit *a);
/* Destination: stop and join the acceptor, if any; its refusals stay counted. Not under s->lock. */
void gw_session_stop_admit(struct gw_session *s);
/* Publish a fully initialised channel array (fds -1) for shutdown to see. */
void gw_session_publish_channels(struct gw_session *s, struct gw_channel *chans, unsigned n);
/* Take the channel array back (threads joined); the caller releases it. */
struct gw_channel *gw_session_detach_channels(struct gw_session *s, unsigned *n);
/* This kernel's boot id (/proc/sys/kernel/random/boot_id), zeros when unknown. */
void gw_boot_id(uint8_t out[GW_WIRE_ID_BYTES]);
/*
 * How long one side waits for the other's digest after resume: the I/O
 * timeout plus hashing time for the RAM at a conservative 256 MiB/s.
 */
uint64_t gw_verify_wait_ms(const struct gw_session *s);
/* The CLOCK_MONOTONIC deadline @ms from now, for timed waits on s->cond. */
struct timespec gw_deadline_ms(uint64_t ms);

/*
 * events.c: tell the embedder's callback (if any) that the status changed
 * (once per change) or that a round starts. Never with s->lock held.
 */
void gw_emit_status(struct gw_session *s);
/* Downtime: events wait (in order, with their times) until the release. */
void gw_events_hold(struct gw_session *s);
void gw_events_release(struct gw_session *s);
void gw_emit_round(struct gw_session *s, uint32_t round, uint64_t dirty_pages, bool final);

static inline enum gw_pc_state gw_pc_state(const struct gw_session *s)
{
	return (enum gw_pc_state)__atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE);
}

/* The two roles (source/source.c, dest/dest.c); session.c picks one. */
extern const struct gw_role_ops gw_source_role, gw_dest_role;

/* The "pipeline" log line: this side's stage times (us, ns per page) and page paths. */
void gw_log_pipeline(struct gw_session *s);

/* CPU time of this process so far (getrusage), for the statistics. */
void gw_cpu_times(uint64_t *user_ns, uint64_t *sys_ns);

/*
 * The calling thread is on the critical path (switchover, control, postcopy
 * requests): SCHED_FIFO at rt-priority when set, best effort (a warning).
 * Threads created meanwhile inherit it: only leaf threads (readers, the
 * fault handler) keep it for their life; the migration threads raise it for
 * the switchover alone and drop it (gw_thread_normal) before anything that
 * starts threads (the VMM's resume) or does bulk work.
 */
void gw_thread_critical(struct gw_session *s, const char *what);
void gw_thread_normal(struct gw_session *s);

/*
 * The calling thread moves pages nobody waits for (postcopy's background
 * stream): SCHED_OTHER at postcopy-background-nice, when set, so that on a
 * host whose CPUs the guest needs the guest runs first. For the thread's
 * life; best effort (a warning).
 */
void gw_thread_background(struct gw_session *s, const char *what);

/* Rate limit: wait until @bytes may be sent under max-bandwidth-bps. */
void gw_ratelimit(struct gw_session *s, uint64_t bytes);

/*
 * What one side says about the end of its migration (gw_end_publish). The
 * order is fixed there: stats_locked, the "pipeline" line, the final line
 * (mig_done, or mig_failed with @vm; none for unknown, which said so when
 * it happened, nor when @quiet), then status, running false, waiters woken,
 * observers told.
 */
struct gw_end {
	enum gw_status status;		/* completed, failed, cancelled or unknown */
	const char *vm;			/* failed or cancelled: where the VM is (mig_failed's vm=) */
	bool quiet;			/* no mig_failed: nothing failed (no source ever came) */
	/* The side's last figures into s->stats, s->lock held; NULL: all published. */
	void (*stats_locked)(struct gw_session *s);
	/* Completed: mig_done's fields after total_ms (" key=value..."), from @st; NULL: none. */
	void (*done_fields)(const struct gw_stats *st, char *buf, size_t len);
	/* Completed: the lines that follow mig_done; NULL: none. */
	void (*after_done)(const struct gw_stats *st);
};

/* The end of a migration, either side (core/end.c). The migration thread's last call. */
void gw_end_publish(struct gw_session *s, const struct gw_end *e);

#endif
