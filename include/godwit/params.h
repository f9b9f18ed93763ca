/* SPDX-License-Identifier: MIT */
/*
 * Migration parameters: one enum, one setter, one bounds query. Defaults and
 * bounds live in one table (src/params.c). A parameter is either setup-only
 * (fixed once the migration starts) or live-tunable (may change while it runs).
 */
#ifndef GODWIT_PARAMS_H
#define GODWIT_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/export.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gw_param {
	GW_PARAM_DOWNTIME_LIMIT_US = 0,	/* switch over when expected downtime fits; live */
	GW_PARAM_MAX_BANDWIDTH_BPS,	/* cap over all channels, bytes/s, 0 = none; live */
	GW_PARAM_CHANNELS,		/* data connections, 1..64; setup */
	GW_PARAM_COMPRESS,		/* enum gw_codec_id; setup */
	GW_PARAM_COMPRESS_LEVEL,	/* codec level, 0 = codec default; setup */
	GW_PARAM_XBZRLE_CACHE_BYTES,	/* 0 = XBZRLE off; setup */
	GW_PARAM_LOCAL,			/* 1 = pass RAM fds (unix: only); setup */
	GW_PARAM_VERIFY,		/* 1 = RAM digests compared after resume; setup */
	GW_PARAM_IO_TIMEOUT_MS,		/* a peer silent this long is dead; setup */
	GW_PARAM_CONVERGE_TIMEOUT_MS,	/* 0 = keep going; live */
	GW_PARAM_CONVERGE_POLICY,	/* enum gw_converge_policy; live */
	GW_PARAM_BATCH_PAGES,		/* pages per batch (and per stable region); setup */
	GW_PARAM_DIRTY_BACKEND,		/* enum gw_dirty_backend_id; setup */
	/* Auto-converge (QEMU's names and semantics): throttle the vCPUs through
	 * gw_vm_ops.throttle when the guest dirties faster than the link moves. */
	GW_PARAM_AUTO_CONVERGE,		/* 0 / 1; live */
	GW_PARAM_CPU_THROTTLE_INITIAL,	/* percent, first step; live */
	GW_PARAM_CPU_THROTTLE_INCREMENT,/* percent added per step; live */
	GW_PARAM_CPU_THROTTLE_TAILSLOW,	/* 0 / 1: smaller steps near the rate that converges; live */
	GW_PARAM_MAX_CPU_THROTTLE,	/* percent cap; live */
	GW_PARAM_THROTTLE_TRIGGER_THRESHOLD,	/* percent: dirtied bytes over sent bytes of a
					   round that counts as "too fast"; live */
	/* Dirty limit: cap each vCPU's dirty rate through gw_vm_ops.dirty_limit. */
	GW_PARAM_DIRTY_LIMIT_BPS,	/* bytes/s per vCPU, 0 = off; live */
	GW_PARAM_DIRTY_LIMIT_START,	/* enum gw_dirty_limit_start; live */
	GW_PARAM_ROUND_MAX_MS,		/* a round ends after this long, mid-pass; 0 = whole passes; live */
	GW_PARAM_FREE_PAGE_HINTS,	/* 1 = take free-page hints from the VMM; setup */
	/* Postcopy: switch over first, fetch the rest on demand (docs/protocol.md#postcopy). */
	GW_PARAM_POSTCOPY,		/* 1 = this migration may switch to postcopy; setup */
	GW_PARAM_POSTCOPY_AFTER_ROUNDS,	/* switch after this many precopy rounds, 0 = not by rounds; live */
	GW_PARAM_POSTCOPY_AFTER_MS,	/* switch after this long in precopy, 0 = not by time; live */
	GW_PARAM_POSTCOPY_AUTO_ROUNDS,	/* switch when the expected downtime has not fallen for
					   this many rounds, 0 = off; live */
	GW_PARAM_RT_PRIORITY,		/* SCHED_FIFO priority of the latency-critical threads
					   (switchover, page requests), 0 = normal scheduling; setup */
	GW_PARAM_SEND_PATH,		/* enum gw_send_path; setup */
	GW_PARAM_RECV_PATH,		/* enum gw_recv_path (destination); setup */
	GW_PARAM_MAX_MEMORY_BYTES,	/* destination: refuse a source with more RAM than this, 0 = no
					   limit but the VMM's; setup */
	GW_PARAM_POSTCOPY_BACKGROUND_NICE,	/* nice of the threads that stream pages nobody asked
					   for during postcopy, so the guest keeps its CPUs; setup */
	GW_PARAM_PRECOPY_LIMIT_MS,	/* destination: the precopy (HELLO accepted to COMPLETE) ends
					   within this, 0 = 60 s plus 1 s per 64 MiB announced; setup */
	GW_PARAM_PAUSE_BEFORE_SWITCHOVER,	/* 1 = the source pauses the VM, reports
					   GW_STATUS_PRE_SWITCHOVER and waits for gw_session_continue()
					   before the final round (QEMU's pause-before-switchover); setup */
	/* Escalation (docs/params.md): opt-in steps taken when the expected
	 * downtime stops falling: raise the limit, auto-converge, postcopy,
	 * then converge-policy's action. */
	GW_PARAM_ESCALATE,		/* 0 / 1; live */
	GW_PARAM_ESCALATE_DOWNTIME_MAX_US,	/* the highest limit its first step raises to; live */
	GW_PARAM_ESCALATE_DOWNTIME_STEPS,	/* steps from downtime-limit-us up to it; live */
	GW_PARAM_ESCALATE_WINDOW_ROUNDS,	/* rounds without a fall of the expected downtime
					   that take the next step; live */
	GW_PARAM__COUNT
};

enum gw_codec_id {
	GW_CODEC_NONE = 0,
	GW_CODEC_ZSTD = 1,
	GW_CODEC_LZ4  = 2,
	GW_CODEC_ZLIB = 3,
	GW_CODEC_ISAL = 4,		/* ISA-L deflate, interoperable with zlib */
	GW_CODEC_AUTO = 5,		/* decided per batch */
	GW_CODEC__COUNT
};

enum gw_converge_policy {
	GW_CONVERGE_KEEP_GOING = 0,	/* ignore the timeout */
	GW_CONVERGE_CANCEL = 1,		/* at the timeout: fail, source keeps running */
	GW_CONVERGE_FORCE = 2,		/* at the timeout: switch over anyway */
};

/* How the source hands page data to the kernel (docs/architecture.md, measured there). */
enum gw_send_path {
	GW_SEND_AUTO = 0,		/* the path measured best here: copy (docs/architecture.md) */
	GW_SEND_COPY = 1,		/* a stable copy: memcpy through the mapping where it is
					   mapped, pread elsewhere; CRC over the copy */
	GW_SEND_ZEROCOPY = 2,		/* as live, with MSG_ZEROCOPY (TCP; completions settle pages) */
	GW_SEND_LIVE = 3,		/* mapped pages sent from guest memory itself (sendmsg copies),
					   pages written meanwhile named in PAGES_VOID */
	GW_SEND_PREAD = 4,		/* every page of fd-backed RAM through pread, no mapping */
};

/* How the destination writes fd-backed RAM. */
enum gw_recv_path {
	GW_RECV_AUTO = 0,		/* through the mapping when it is all mapped (preallocated),
					   else pwrite into the file */
	GW_RECV_FILE = 1,		/* always pwrite into the file */
};

enum gw_dirty_limit_start {
	GW_DIRTY_LIMIT_ON_NO_CONVERGE = 0,	/* when the dirty rate stays above the link (QEMU) */
	GW_DIRTY_LIMIT_FROM_START = 1,		/* as soon as precopy starts */
};

enum gw_dirty_backend_id {
	GW_DIRTY_AUTO = 0,		/* first backend of the table whose probe says yes */
	GW_DIRTY_UFFD_WP = 1,
	GW_DIRTY_KVM_LOG = 2,
	GW_DIRTY_KVM_RING = 3,
};


/* Set a parameter. 0, -EINVAL (unknown or out of bounds), -EBUSY (setup-only while running). */
struct gw_session;
GW_EXPORT int gw_session_set(struct gw_session *s, enum gw_param p, int64_t value);
/* Read a parameter. 0 or -EINVAL. */
GW_EXPORT int gw_session_get(const struct gw_session *s, enum gw_param p, int64_t *value);

/*
 * String parameters: TLS (docs/security.md). Setup-only; "" = unset.
 * TLS is on when tls-creds or tls-psk is set (not both), on the source
 * (TLS client) and the destination (TLS server) alike; a side with TLS
 * refuses a peer without it, before any RAM is touched.
 */
enum gw_str_param {
	GW_SPARAM_TLS_CREDS = 0,	/* directory in QEMU's x509 layout: ca-cert.pem, server-cert.pem,
					   server-key.pem (destination), client-cert.pem, client-key.pem
					   (source), optional ca-crl.pem */
	GW_SPARAM_TLS_PSK,		/* pre-shared keys, QEMU's keys.psk: "identity:hexkey" lines
					   (the source presents the first) */
	GW_SPARAM_TLS_HOSTNAME,		/* source: the name the destination's certificate must carry
					   (default: the URL's host) */
	GW_SPARAM_TLS_AUTHZ,		/* destination: client names accepted (certificate CN or DNS
					   name, or PSK identity), comma-separated; "" = any authenticated */
	GW_SPARAM__COUNT
};
#define GW_SPARAM_MAX_BYTES 512		/* with the NUL */

/*
 * Set a string parameter (copied). 0, -EINVAL (unknown, too long or with
 * whitespace or control characters), -EBUSY (while a migration runs).
 */
struct gw_session;
GW_EXPORT int gw_session_set_str(struct gw_session *s, enum gw_str_param p, const char *value);
/* Copy a string parameter into @buf. 0 or -EINVAL. */
GW_EXPORT int gw_session_get_str(struct gw_session *s, enum gw_str_param p, char *buf, size_t len);
/* "tls-creds", ...; NULL for an unknown parameter. */
GW_EXPORT const char *gw_str_param_name(enum gw_str_param p);
/* Look a string parameter up by name: 0 and *p set, or -ENOENT. */
GW_EXPORT int gw_str_param_by_name(const char *name, enum gw_str_param *p);

struct gw_param_info {
	const char *name;		/* CLI / API spelling, e.g. "downtime-limit-us" */
	int64_t min, max, def;
	bool live;			/* may change during a migration */
	const char *help;
};
/* NULL for an unknown parameter. */
GW_EXPORT const struct gw_param_info *gw_param_info(enum gw_param p);
/* Look a parameter up by name: 0 and *p set, or -ENOENT. */
GW_EXPORT int gw_param_by_name(const char *name, enum gw_param *p);

/* Names of codecs; NULL when out of range. gw_codec_by_name: id or -ENOENT. */
GW_EXPORT const char *gw_codec_name(enum gw_codec_id id);
GW_EXPORT int gw_codec_by_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
