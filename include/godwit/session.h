/* SPDX-License-Identifier: MIT */
/*
 * A migration session: one source or one destination of one VM.
 *
 * Source:       s = gw_session_new(GW_ROLE_SOURCE, &vm, &ops, opaque);
 *               gw_session_set(s, GW_PARAM_..., v);
 *               gw_migrate_start(s, "tcp:host:port");   (runs in its own thread)
 *               gw_session_wait(s);                      (or poll gw_session_stats)
 * Destination:  s = gw_session_new(GW_ROLE_DEST, &vm, &ops, opaque);
 *               gw_incoming_start(s, "tcp:0.0.0.0:port");
 *               gw_session_wait(s);   completed = the VM has been resumed here
 *
 * Ownership: the session is owned by the thread that created it; the
 * functions below may be called from any thread (they lock internally),
 * except gw_session_free, which must be the last call.
 */
#ifndef GODWIT_SESSION_H
#define GODWIT_SESSION_H

#include <godwit/log.h>
#include <godwit/params.h>
#include <godwit/stats.h>
#include <godwit/vm.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gw_role {
	GW_ROLE_SOURCE = 1,
	GW_ROLE_DEST = 2,
};

/*
 * Create a session. A destination's RAM must read as zero
 * (fresh memfd or anonymous memory): zero pages and never-populated pages
 * are not written, and the RAM digest (verify, on by default) catches RAM
 * that was not. For a destination whose RAM is created
 * from the source's layout (ops->setup_ram), @vm may have nr_blocks == 0.
 * @vm and @ops are copied (set their size fields, vm.h). Returns NULL with
 * errno set (EINVAL, E2BIG: a struct larger than the library knows with
 * fields set that it does not, ENOMEM).
 */
GW_EXPORT struct gw_session *gw_session_new(enum gw_role role, const struct gw_vm_info *vm,
				  const struct gw_vm_ops *ops, void *opaque);
/* Waits for a running migration to end (cancelling it first). NULL is fine. */
GW_EXPORT void gw_session_free(struct gw_session *s);

/*
 * Source: start migrating to @url ("tcp:HOST:PORT" or "unix:PATH").
 * Returns 0 once the migration thread runs, -EINVAL (bad URL or parameters,
 * e.g. local with tcp:), -EBUSY (already running), -errno.
 */
GW_EXPORT int gw_migrate_start(struct gw_session *s, const char *url);

/*
 * Why the last migration failed or gw_migrate_start refused: copied into
 * @buf ("" when nothing failed). Returns @buf.
 */
GW_EXPORT const char *gw_session_error(struct gw_session *s, char *buf, size_t len);

/*
 * After a migration ended GW_STATUS_UNKNOWN (GO sent, RESUMED lost), or
 * completed with a verification mismatch (the source kept its copy), the
 * operator, having asked or stopped the destination, settles it:
 * @destination_runs false resumes the VM here and ends "failed"; true ends
 * "completed". 0, -EINVAL (nothing to settle), or the resume error.
 */
GW_EXPORT int gw_session_resolve(struct gw_session *s, bool destination_runs);

/*
 * Destination: listen on @url and receive one migration in a thread.
 * The listening socket exists when this returns 0 (so a source may connect
 * at once). For tcp:HOST:0 the chosen port can be read with
 * gw_incoming_url(). -EADDRINUSE, -EINVAL, -errno.
 */
GW_EXPORT int gw_incoming_start(struct gw_session *s, const char *url);
/* The URL actually bound (port resolved). "" before gw_incoming_start. */
GW_EXPORT const char *gw_incoming_url(const struct gw_session *s);

/*
 * Whether @url names a transport this library has and this host can use,
 * with a well-formed address: a destination's (@listen, tcp:HOST:0 allowed)
 * or a source's. Nothing is opened or resolved. 0; -EINVAL (malformed,
 * unknown scheme) or -ENODEV (rdma: without a device) with the reason in
 * @why, "" on success. Lets a caller refuse a URL before making its VM.
 */
GW_EXPORT int gw_url_check(const char *url, bool listen, char *why, size_t why_len);

/*
 * Cancel: the source fails with -ECANCELED and keeps running the VM,
 * unless "go" was already sent (then it has no effect). 0 or -EALREADY.
 */
GW_EXPORT int gw_session_cancel(struct gw_session *s);

/*
 * The caller is going away (a VMM quitting): end the migration whatever its
 * phase. Before GO it is a cancel; after the postcopy switch the VM's state
 * is split and this loses the VM (logged as such). gw_session_free does it
 * too. 0 or -EINVAL (nothing running).
 */
GW_EXPORT int gw_session_abandon(struct gw_session *s);

/* Block until the migration ends. Returns 0 on completed, else the error. */
GW_EXPORT int gw_session_wait(struct gw_session *s);

/*
 * Free-page hint (source, between the VM ops' hints_start and hints_stop):
 * pages [@first_page, @first_page + @nr_pages) of block @block hold nothing
 * the guest needs. They are not sent unless written again: a write after
 * this call returns is caught by dirty tracking and the page goes. The
 * guest must not write them while the call runs. Any thread; it may wait
 * while the migration thread harvests dirty pages (milliseconds per GiB
 * of populated RAM with uffd-wp). 0, -EINVAL (range), -EAGAIN (no
 * migration is taking hints now).
 */
GW_EXPORT int gw_session_hint_free(struct gw_session *s, unsigned block, uint64_t first_page,
				   uint64_t nr_pages);

/*
 * Device writes (source): the VMM's devices wrote guest RAM at guest-physical
 * [@gpa, @gpa + @len_bytes) behind the dirty tracker's back: an I/O thread
 * filling receive buffers and used rings is no vCPU, so KVM's dirty log and
 * ring never see it, and uffd-wp sees only writes through the block's host
 * mapping. Call it after the bytes are written (a report before them could
 * be harvested before they change, and the change never sent), whatever
 * the tracker, on every source session, migrating or not: the pages are
 * sent again with the next harvest of every round, the final one included,
 * and so under postcopy.
 *
 * Threads and cost: any thread, any time between gw_session_new and
 * gw_session_free, concurrently with everything; lock-free, never waits
 * and never fails for lack of memory (the bitmaps, a bit per page, are
 * made by gw_session_new): an atomic OR per 64 pages of the range, one more
 * the first time in a harvest a 256 KiB stretch is marked, and a look-up
 * among the RAM blocks. Cheap enough to call per buffer. Outside a
 * migration the marks are kept and dropped when the next one starts
 * tracking (its first pass reads every page anyway).
 *
 * The pause contract: the VMM's pause hook (gw_vm_ops.pause) must stop
 * its devices touching guest RAM, and report what they wrote, before it
 * returns. The final harvest runs right after; a device write after it is
 * lost, which the RAM digest (GW_PARAM_VERIFY) then reports. After a
 * postcopy switch the devices run on the destination, never here (the
 * source's guest stays paused until the migration ends): nothing to report.
 * If the migration fails, resume restarts them and reporting goes on.
 *
 * Send paths: once any device reported on a session, pages are never sent
 * straight from guest memory (GW_SEND_LIVE, GW_SEND_ZEROCOPY copy first,
 * as the default does): a report comes after its write, too late to name a
 * page torn while the kernel sent it, and the destination would refuse its
 * checksum. A VMM with devices that asks for those paths has its devices
 * report before the migration starts (their first writes do).
 *
 * On the destination nothing is reported: its devices start after the
 * resume, and under postcopy they must write guest RAM through the block's
 * host mapping (gw_vm_ops.postcopy_ram), where a page not received yet
 * faults and waits for its page as a vCPU does; a write through another
 * mapping of the file would be overwritten when the page arrives. A kernel
 * write on the VMM's behalf (read() from a tap into guest RAM) waits the same
 * only with a userfaultfd that traps kernel-mode faults (which KVM needs
 * anyway); with a user-mode-only one it fails with EFAULT: copy through a
 * buffer of the VMM's.
 *
 * 0 (also for @len_bytes 0 inside a block); -EINVAL when @s is NULL or a
 * destination, or the range is not inside one RAM block.
 */
GW_EXPORT int gw_session_mark_dirty(struct gw_session *s, uint64_t gpa, uint64_t len_bytes);

/*
 * Whether dirty-tracking backend @id (GW_DIRTY_AUTO: any of them) can track
 * @vm on this host; @vm NULL asks about plain process memory (what a VMM
 * checks before it offers to migrate). 0 with the backend's name in @why,
 * or -EOPNOTSUPP / -errno with the reason in @why (may be NULL).
 */
GW_EXPORT int gw_dirty_probe(enum gw_dirty_backend_id id, const struct gw_vm_info *vm,
			     char *why, size_t why_len);

/* What gw_session_set_event_fn's callback is told. */
enum gw_event_type {
	GW_EVENT_STATUS = 1,		/* the migration's status changed (to ev->status) */
	GW_EVENT_ROUND = 2,		/* a round starts: precopy, or the final one (paused) */
};

struct gw_event {
	enum gw_event_type type;
	enum gw_role role;		/* of the session */
	enum gw_status status;		/* the status now */
	uint32_t round;			/* the round (0 = the first pass over RAM); for
					   STATUS the round in progress */
	uint64_t dirty_pages;		/* ROUND: pages to send in it (source), announced (destination) */
	bool final;			/* ROUND, source: the final round, vCPUs paused */
	uint64_t mono_ns;		/* CLOCK_MONOTONIC when it happened */
};

typedef void (*gw_event_fn)(void *opaque, const struct gw_event *ev);

/*
 * Call @fn (NULL: no more) for the events of this session's migrations, as
 * they happen: every status change once (setup, active, device, ...,
 * completed or failed), every round start. It runs on the engine's
 * migration thread (for gw_session_resolve, on its caller's), one event at
 * a time and in order, with no engine lock held: it may call
 * gw_session_stats(), must not call gw_session_free(), and should return
 * quickly (the migration waits meanwhile). 0, -EBUSY while a migration
 * runs, -EINVAL.
 */
GW_EXPORT int gw_session_set_event_fn(struct gw_session *s, gw_event_fn fn, void *opaque);
/*
 * Source, status GW_STATUS_PRE_SWITCHOVER (GW_PARAM_PAUSE_BEFORE_SWITCHOVER):
 * go on with the switchover's final round (QEMU's migrate-continue). 0,
 * -EINVAL (not a source, or not waiting there). gw_session_cancel() at that
 * point ends the migration and resumes the VM on the source.
 */
GW_EXPORT int gw_session_continue(struct gw_session *s);
/*
 * Postcopy (docs/protocol.md#postcopy). Source, a migration started with
 * GW_PARAM_POSTCOPY: switch to postcopy now, without waiting for precopy to
 * converge (QEMU's migrate-start-postcopy). 0, -EINVAL (postcopy not
 * enabled, or no migration), -EALREADY (switching or switched already).
 */
GW_EXPORT int gw_session_start_postcopy(struct gw_session *s);
/*
 * Source, status postcopy-paused: reconnect to @url, where the destination
 * listens for the recovery (gw_postcopy_recover). Returns once the request
 * is handed to the migration thread: 0, -EINVAL (bad URL, not paused),
 * -EBUSY (a recovery is under way). The status says how it goes; a failed
 * attempt leaves it postcopy-paused with the reason in postcopy_reason.
 */
GW_EXPORT int gw_postcopy_resume(struct gw_session *s, const char *url);
/*
 * Destination, status postcopy-paused: listen on @url for the source's
 * reconnection (authenticated by the migration id). 0 once listening
 * (gw_incoming_url() gives the port), -EINVAL (bad URL, not paused),
 * -EBUSY (listening already), -errno.
 */
GW_EXPORT int gw_postcopy_recover(struct gw_session *s, const char *url);

/*
 * Snapshot of the statistics; safe while running. Set out->size to
 * sizeof(*out) first (stats.h: the library fills what both sides know, and
 * nothing past out->size). The figures are taken under one lock, as the
 * migration publishes them. 0, or -EINVAL (NULL, or out->size below
 * GW_STATS_SIZE_VER0).
 */
GW_EXPORT int gw_session_stats(struct gw_session *s, struct gw_stats *out);
/*
 * Row @idx of a statistics table, with out->size set as for
 * gw_session_stats(). Rounds: 0..nr_rounds_kept - 1; a row is written once,
 * when its round ends. Channels: 0..nr_channels - 1; counters that only
 * grow, read at the call (so at least what a gw_stats taken before
 * summed). vCPUs: 0..postcopy_nr_vcpus - 1, updated with the postcopy
 * figures. 0, -ENOENT when @idx is past the table's end, -EINVAL (NULL, or
 * out->size below the struct's _SIZE_VER0).
 */
GW_EXPORT int gw_session_round(struct gw_session *s, unsigned idx, struct gw_round_stats *out);
GW_EXPORT int gw_session_channel(struct gw_session *s, unsigned idx, struct gw_channel_stats *out);
GW_EXPORT int gw_session_vcpu(struct gw_session *s, unsigned idx, struct gw_vcpu_stats *out);

#ifdef __cplusplus
}
#endif
#endif
