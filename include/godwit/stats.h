/* SPDX-License-Identifier: MIT */
/*
 * Migration statistics. Names follow QEMU's query-migrate where one exists;
 * units are in every field name. The godwit tool converts them to its JSON
 * contract (milliseconds, mbps) at its edge (tools/stats_json.c).
 */
#ifndef GODWIT_STATS_H
#define GODWIT_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/export.h>
#include <godwit/params.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gw_status {
	GW_STATUS_NONE = 0,		/* no migration yet */
	GW_STATUS_SETUP,		/* connecting, handshake */
	GW_STATUS_ACTIVE,		/* precopy rounds */
	GW_STATUS_DEVICE,		/* paused: final pages and state */
	GW_STATUS_HANDOVER,		/* ready/go exchange */
	GW_STATUS_COMPLETED,
	GW_STATUS_FAILED,		/* source owns and runs the VM */
	GW_STATUS_CANCELLED,		/* like failed, by request */
	GW_STATUS_UNKNOWN,		/* go sent, resumed never came: source stays paused */
	/* Postcopy (QEMU's names): the VM runs on the destination, pages still come. */
	GW_STATUS_POSTCOPY_ACTIVE,
	GW_STATUS_POSTCOPY_PAUSED,	/* a connection broke: both sides wait for a recovery */
	GW_STATUS_POSTCOPY_RECOVER,	/* reconnecting, exchanging what is still missing */
	GW_STATUS_PRE_SWITCHOVER,	/* GW_PARAM_PAUSE_BEFORE_SWITCHOVER: paused, waiting for
					   gw_session_continue() before the final round */
};
GW_EXPORT const char *gw_status_name(enum gw_status st);

/*
 * Stages of the page pipeline, timed on the channel threads (summed over
 * channels: with N channels they may add up to N times the wall time).
 * Source: read (pread of unmapped pages, which pages are mapped),
 * classify (zero check, CRC, copies, XBZRLE), compress, send (rate limit
 * and sendmsg, so a slow link shows here), settle (which pages the guest
 * wrote while they were sent, PAGES_VOID). Destination: recv (socket
 * reads), check (entries, plan, page CRCs), decompress, apply (writes into
 * RAM).
 */
enum gw_stage {
	GW_STAGE_READ = 0,
	GW_STAGE_CLASSIFY,
	GW_STAGE_COMPRESS,
	GW_STAGE_SEND,
	GW_STAGE_SETTLE,
	GW_STAGE_RECV,
	GW_STAGE_CHECK,
	GW_STAGE_DECOMPRESS,
	GW_STAGE_APPLY,
	GW_STAGE__COUNT
};
GW_EXPORT const char *gw_stage_name(enum gw_stage st);	/* "read", "classify", ... */

/*
 * Room in the statistics for stages and codecs: arrays indexed by enum
 * gw_stage or enum gw_codec_id are this long, so that a new stage or codec
 * (appended to its enum) does not move the fields after them. Entries past
 * the enum's count are 0.
 */
#define GW_STATS_STAGES 16
#define GW_STATS_CODECS 16

/*
 * The statistics structs can grow (Linux's clone_args rule): each begins
 * with uint32_t size, which the caller sets to sizeof the struct it was
 * built with; the library fills the fields both know, leaves alone every
 * byte past @size, and zeroes what it does not know of a larger struct. New
 * fields are only ever appended, so the figures of an older caller keep
 * their offsets. A size below the struct's first version (the _SIZE_VER0
 * constants, which never change) is refused with -EINVAL. libgodwit(3).
 */
#define GW_ROUND_STATS_SIZE_VER0 224	/* first version of struct gw_round_stats */
#define GW_CHANNEL_STATS_SIZE_VER0 144	/* first version of struct gw_channel_stats */
#define GW_VCPU_STATS_SIZE_VER0 16	/* first version of struct gw_vcpu_stats */
#define GW_STATS_SIZE_VER0 1896		/* first version of struct gw_stats */

/* One precopy round, from gw_session_round(). */
struct gw_round_stats {
	uint32_t size;			/* caller: sizeof(struct gw_round_stats) */
	uint32_t round;
	uint64_t duration_ns;
	uint64_t dirty_pages;		/* pages to send at round start */
	uint64_t sent_bytes;		/* wire bytes of this round */
	uint64_t normal_pages, zero_pages, skipped_pages;
	uint64_t rate_bps;		/* measured transfer rate of this round */
	uint64_t dirty_rate_pps;	/* pages/s: the harvest after this round's pages over the time since the one before */
	uint64_t expected_downtime_ns;	/* estimate at round end; 0 when unknown (below) */
	uint32_t throttle_pct;		/* auto-converge throttle in force at round end */
	bool dirty_limit;		/* the dirty limit was in force at round end */
	uint64_t void_pages;		/* pages written while sent live (PAGES_VOID) */
	uint64_t stage_ns[GW_STATS_STAGES];	/* source stages of this round, all channels */
	bool expected_downtime_unknown;	/* no transfer rate measured yet: no estimate */
};

/* One data channel, from gw_session_channel(). */
struct gw_channel_stats {
	uint32_t size;			/* caller: sizeof(struct gw_channel_stats) */
	uint32_t channel;		/* its index, 0..nr_channels - 1 */
	uint64_t bytes;			/* wire bytes sent (source) or received (destination) */
	/* Page bytes (before compression) each codec carried, as actually used:
	 * with compress=auto the codec changes batch by batch. */
	uint64_t codec_bytes[GW_STATS_CODECS];	/* by enum gw_codec_id */
};

/* One vCPU of a postcopy destination, from gw_session_vcpu(). */
struct gw_vcpu_stats {
	uint32_t size;			/* caller: sizeof(struct gw_vcpu_stats) */
	uint32_t vcpu;			/* its index, 0..postcopy_nr_vcpus - 1 */
	uint64_t postcopy_blocktime_ns;	/* (dst) time it waited for pages (QEMU's postcopy-vcpu-blocktime) */
};

/*
 * The downtime in phases that add up to downtime_ns exactly, from the
 * source's pause request to the destination's resume. The state is saved
 * and sent while the channels still send the final pages they were given:
 * final_send_ns is the time spent queueing them plus the time they took
 * after the state was sent.
 */
struct gw_downtime_breakdown {
	uint64_t pause_ns;		/* pause request -> no vCPU runs */
	uint64_t final_harvest_ns;	/* last dirty harvest */
	uint64_t final_send_ns;		/* remaining pages on all channels (beside the state), channels ended */
	uint64_t state_save_ns;		/* vCPU and device state save */
	uint64_t state_send_ns;		/* state on the wire */
	uint64_t dst_load_ns;		/* COMPLETE sent -> READY received (destination checks
					   and loads the state; one round trip) */
	uint64_t handover_ns;		/* READY received -> VM resumed on the destination */
};

/* Verification: the two RAM digests, compared after the VM resumed. */
enum gw_verify {
	GW_VERIFY_OFF = 0,		/* not asked (or local migration: one copy of RAM) */
	GW_VERIFY_PENDING,		/* resumed, digests being computed */
	GW_VERIFY_OK,			/* equal */
	GW_VERIFY_MISMATCH,		/* different: the source keeps its copy for the operator */
	GW_VERIFY_UNKNOWN,		/* the peer went away before answering */
};
GW_EXPORT const char *gw_verify_name(enum gw_verify v);	/* "off", "pending", "ok", ... */

/*
 * What the convergence model says at a round's end (source): the expected
 * downtime fits the limit, or it falls toward it (at the link's rate, or at
 * the max-bandwidth cap), or why it does not. gw_stats.converging is true
 * for the first four.
 */
enum gw_converge_state {
	GW_CONVERGE_FITS = 0,		/* fits the limit (and before the first round) */
	GW_CONVERGE_UNKNOWN,		/* no transfer rate measured yet */
	GW_CONVERGE_DRAINING,		/* falls toward the limit at the link's rate */
	GW_CONVERGE_CAPPED,		/* falls toward it, the link held at max-bandwidth */
	GW_CONVERGE_OUTRUN,		/* the guest dirties at least as fast as the link moves */
	GW_CONVERGE_FLAT,		/* the guest writes again what is sent: the dirty set stays */
	GW_CONVERGE_FIXED_COST,		/* the switchover alone is over the limit */
};

/*
 * The scalar figures of a migration, from gw_session_stats(). The tables
 * (rounds, channels, vCPUs) have their own calls; their lengths are here.
 */
struct gw_stats {
	uint32_t size;			/* caller: sizeof(struct gw_stats) */
	enum gw_status status;
	char error[512];		/* first error, "" when none */
	char error_phase[32];
	int error_code;			/* -errno */

	uint64_t total_time_ns;		/* migrate command -> destination resumed */
	uint64_t setup_time_ns;		/* migrate command -> round 0 starts */
	uint64_t downtime_ns;		/* source pause -> destination resume, all of it */
	uint64_t expected_downtime_ns;

	/* ram */
	uint64_t ram_total_bytes;
	uint64_t transferred_bytes;	/* wire bytes, all channels, headers included */
	uint64_t remaining_bytes;	/* dirty pages still to send * page size */
	uint64_t duplicate_pages;	/* zero pages (QEMU's name) */
	uint64_t normal_pages;
	uint64_t normal_bytes;
	uint64_t skipped_pages;		/* never populated: not even read */
	uint64_t xbzrle_pages;
	uint64_t dirty_sync_count;	/* harvests */
	uint64_t rate_bps;		/* smoothed transfer rate */
	uint64_t pages_per_second;
	uint64_t dirty_pages_rate;	/* pages/s: the last harvest's pages over the time since the one before */
	uint64_t free_hinted_pages;	/* dropped from sending by free-page hints */
	uint64_t free_discarded_pages;	/* free pages sent before, zeroed at the switchover */
	uint64_t payload_bytes_raw;	/* page bytes before compression */
	uint64_t payload_bytes_wire;	/* page bytes after compression */

	uint64_t rtt_ns;		/* control connection round trip, smoothed (PING) */
	uint32_t throttle_pct;		/* cpu-throttle-percentage now */
	uint64_t dirty_limit_bps;	/* per-vCPU dirty limit in force, 0 = none */
	bool converging;		/* expected downtime fits or falls toward the limit (converge_state) */
	char converge_hint[192];	/* why it does not converge and what would help, or how fast it
					   converges; "" when it fits */

	uint32_t rounds;
	unsigned nr_rounds_kept;	/* rounds 0..nr_rounds_kept - 1 have a gw_session_round() row */
	unsigned nr_channels;		/* gw_session_channel() rows */

	struct gw_downtime_breakdown downtime;
	bool downtime_measured;		/* one clock on both ends (else resume time estimated) */
	enum gw_verify verify;
	bool verified;			/* verify == GW_VERIFY_OK */
	uint64_t verify_src_ns;		/* source digest, after GO, VM paused there */
	uint64_t verify_dst_ns;		/* destination digest, while the guest runs */
	uint64_t verify_faults;		/* guest writes that waited for a chunk's hash */
	uint64_t cpu_user_ns, cpu_sys_ns;	/* this process during the migration */
	uint64_t stage_ns[GW_STATS_STAGES];	/* pipeline stages, all channels (this side's) */
	uint64_t live_pages;		/* source: pages sent straight from guest memory */
	uint64_t void_pages;		/* source: of those, written while sent (sent again later) */
	uint64_t direct_pages;		/* destination: pages received straight into guest memory */
	uint64_t zerocopy_sends, zerocopy_copied;	/* source: MSG_ZEROCOPY sends completed; of those
							   the kernel copied anyway (loopback, veth) */
	char dirty_backend[16];
	char codec[16];

	/*
	 * Postcopy. From the switch on, the newest state of the VM is split:
	 * the destination runs it, the source holds the pages not sent yet;
	 * postcopy_time_ns says how long that lasted. Figures marked (dst) come
	 * from the destination (on the source: its last report).
	 */
	bool postcopy;			/* this migration switched to postcopy */
	uint64_t postcopy_time_ns;	/* destination resumed -> every page placed (so far) */
	uint64_t postcopy_paused_ns;	/* of which, paused for recovery */
	uint32_t postcopy_recoveries;	/* reconnections after a broken link */
	uint64_t postcopy_pages;	/* pages the destination could not trust at the switch */
	uint64_t postcopy_remaining_pages;	/* (dst) not placed yet */
	uint64_t postcopy_requests;	/* (dst) pages asked for on the preempt connection (QEMU's name) */
	uint64_t postcopy_pushed_pages;	/* source: pages sent by the background stream */
	uint64_t postcopy_answered_pages;	/* source: pages sent on the preempt connection */
	uint64_t postcopy_placed_requested;	/* (dst) placed from answers to requests */
	uint64_t postcopy_placed_pushed;	/* (dst) placed from the background stream */
	uint64_t postcopy_dup_pages;	/* (dst) copies dropped: the page was there already */
	uint64_t postcopy_faults;	/* (dst) userfaults, vCPUs and other threads */
	uint64_t postcopy_local_faults;	/* (dst) of which resolved without the network */
	uint64_t postcopy_blocktime_ns;	/* (dst) every vCPU blocked at once (QEMU's postcopy-blocktime) */
	uint64_t postcopy_vcpu_blocktime_total_ns;	/* (dst) summed over the vCPUs */
	unsigned postcopy_nr_vcpus;	/* (dst) gw_session_vcpu() rows */
	uint64_t postcopy_latency_p50_ns, postcopy_latency_p99_ns, postcopy_latency_max_ns;	/* (dst)
					   fault -> page placed, faults that waited for the network */
	uint64_t postcopy_latency_samples;
	char postcopy_reason[192];	/* why paused, or why the last recovery attempt failed */
	/* Security (docs/security.md). */
	char tls[8];			/* "none", "x509", "psk" */
	char tls_peer[192];		/* the peer, authenticated: "CN=name" or "psk:identity" */
	char tls_cipher[48];		/* e.g. "TLS_AES_128_GCM_SHA256" */
	bool ktls_tx, ktls_rx;		/* the kernel does the TLS record layer (control connection) */
	char tls_records[8];		/* who does the records: "kernel", "godwit", "openssl" */
	uint64_t conns_refused;		/* destination: connections refused at admission so far */
	/* Convergence at the last round's end (source). */
	enum gw_converge_state converge_state;
	uint64_t converge_eta_ns;	/* draining or capped: time until the expected downtime fits, from
					   the rates; 0 otherwise */
	bool expected_downtime_unknown;	/* no transfer rate measured yet: expected_downtime_ns is 0 */
	/* Escalation (escalate=1, source; docs/params.md). */
	char escalate_step[16];		/* the last step taken: "none", "downtime-limit", "auto-converge",
					   "postcopy", "timeout-action"; "" before the first round */
	uint32_t escalate_steps;	/* steps taken so far */
	uint64_t escalate_limit_ns;	/* the downtime limit in force (the user's until raised) */
	uint64_t escalate_best_expected_ns;	/* the lowest expected downtime the model has seen, 0 none */
};

#ifdef __cplusplus
}
#endif
#endif
