/* SPDX-License-Identifier: MIT */
/* Session lifecycle, the sticky error, status and statistics snapshots. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "admit.h"
#include "channel.h"
#include "net/tls.h"
#include "session_int.h"

struct gw_session *gw_session_new(enum gw_role role, const struct gw_vm_info *vm,
				  const struct gw_vm_ops *ops, void *opaque)
{
	struct gw_session *s;

	if ((role != GW_ROLE_SOURCE && role != GW_ROLE_DEST) || !vm || !ops ||
	    !ops->pause || !ops->resume || vm->nr_blocks > GW_MAX_RAM_BLOCKS ||
	    (role == GW_ROLE_SOURCE && vm->nr_blocks == 0) ||
	    (role == GW_ROLE_DEST && !ops->load_state)) {
		errno = EINVAL;
		return NULL;
	}
	for (unsigned i = 0; i < vm->nr_blocks; i++) {
		const struct gw_ram_block *b = &vm->blocks[i];

		if (!b->host || b->page_size_bytes != GW_PAGE_BYTES || !b->size_bytes ||
		    b->size_bytes % b->page_size_bytes) {
			errno = EINVAL;
			return NULL;
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->role = role;
	s->ops = ops;
	s->opaque = opaque;
	s->vm = *vm;
	snprintf(s->side, sizeof(s->side), "%s", role == GW_ROLE_SOURCE ? "src" : "dst");
	pthread_mutex_init(&s->lock, NULL);
	{
		pthread_condattr_t ca;

		/* Handover waits are timed: immune to wall-clock steps. */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	pthread_mutex_init(&s->rl_lock, NULL);
	pthread_mutex_init(&s->hint_lock, NULL);
	gw_boot_id(s->boot_id);
	gw_params_defaults(s->params);
	s->listen_fd = -1;
	gw_conn_init(&s->ctl, -1);
	gw_conn_init(&s->preempt, -1);
	s->thread_joined = true;
	gw_fault_init(s);
	return s;
}

static void join_thread(struct gw_session *s)
{
	bool join = false;

	pthread_mutex_lock(&s->lock);
	if (!s->thread_joined) {
		s->thread_joined = true;
		join = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (join)
		pthread_join(s->thread, NULL);
}

static void abandon_postcopy(struct gw_session *s);

void gw_session_free(struct gw_session *s)
{
	if (!s)
		return;
	if (gw_session_cancel(s) == -EALREADY && __atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) >= GW_PC_ACTIVE)
		abandon_postcopy(s);	/* nobody would finish it */
	join_thread(s);
	gw_session_stop_admit(s);
	gw_tls_ctx_free(s->tls_ctx);
	if (s->listen_fd >= 0 && s->url.ops) {
		s->url.ops->sock->close(s->listen_fd);
		s->url.ops->unlisten(s->url.addr);
	}
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

void gw_session_stop_admit(struct gw_session *s)
{
	struct gw_admit *a;

	pthread_mutex_lock(&s->lock);
	a = s->adm;
	s->adm = NULL;
	if (a)
		s->adm_refused += gw_admit_refused(a);
	pthread_mutex_unlock(&s->lock);
	gw_admit_stop(a);
}

void gw_session_set_admit(struct gw_session *s, struct gw_admit *a)
{
	pthread_mutex_lock(&s->lock);
	s->adm = a;
	pthread_mutex_unlock(&s->lock);
}

void gw_session_shutdown_conns(struct gw_session *s)
{
	/* s->lock: the channel array is detached under it before being freed. */
	pthread_mutex_lock(&s->lock);
	gw_conn_shutdown(&s->ctl);
	gw_conn_shutdown(&s->preempt);
	gw_admit_wake(s->adm);	/* the acceptor goes on refusing strangers until gw_session_free */
	for (unsigned i = 0; s->chans && i < s->nr_channels; i++) {
		struct gw_channel *ch = &s->chans[i];

		gw_conn_shutdown(&ch->conn);
		gw_channel_wake_all(ch);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Record the first error; caller holds s->lock. True if this one was first. */
static bool fail_record_locked(struct gw_session *s, const char *phase, int code,
			       bool from_peer, const char *msg)
{
	if (s->err.code)
		return false;
	__atomic_store_n(&s->err.code, code, __ATOMIC_RELEASE);
	s->err.from_peer = from_peer;
	snprintf(s->err.phase, sizeof(s->err.phase), "%s", phase);
	snprintf(s->err.msg, sizeof(s->err.msg), "%s", msg);
	pthread_cond_broadcast(&s->cond);
	return true;
}

/* After the first error: log it, tell the peer why, wake blocked threads. */
static void fail_notify(struct gw_session *s, const char *phase, int code, bool from_peer,
			const char *msg)
{
	gw_log(GW_LOG_ERROR, "mig", "error", "phase=%s code=%d reason=\"%s\"%s",
	       phase, code, msg, from_peer ? " from=peer" : "");
	if (!from_peer)
		gw_conn_send_error(&s->ctl, code, msg);	/* -EPIPE when not connected */
	gw_session_shutdown_conns(s);
}

/*
 * The owner frees a session whose migration is in postcopy (a process
 * quitting, say): nobody will finish it, so it ends now, failed. Before the
 * switch a cancel does it.
 */
static void abandon_postcopy(struct gw_session *s)
{
	static const char msg[] = "abandoned during postcopy (the owner is going away): the VM is lost";
	bool first;

	pthread_mutex_lock(&s->lock);
	first = s->running && fail_record_locked(s, "postcopy", -ECANCELED, false, msg);
	pthread_mutex_unlock(&s->lock);
	if (first)
		fail_notify(s, "postcopy", -ECANCELED, false, msg);
}

int gw_session_abandon(struct gw_session *s)
{
	if (!s || !__atomic_load_n(&s->running, __ATOMIC_ACQUIRE))
		return -EINVAL;
	if (gw_session_cancel(s) == 0)
		return 0;
	/* Precopy after GO: the wait for RESUMED is bounded, nothing to end. */
	if (__atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) >= GW_PC_ACTIVE)
		abandon_postcopy(s);
	return 0;
}

void gw_session_publish_channels(struct gw_session *s, struct gw_channel *chans, unsigned n)
{
	pthread_mutex_lock(&s->lock);
	s->chans = chans;
	s->nr_channels = n;
	pthread_mutex_unlock(&s->lock);
}

struct gw_channel *gw_session_detach_channels(struct gw_session *s, unsigned *n)
{
	struct gw_channel *chans;

	pthread_mutex_lock(&s->lock);
	chans = s->chans;
	*n = chans ? s->nr_channels : 0;
	s->chans = NULL;
	pthread_mutex_unlock(&s->lock);
	return chans;
}

/* Errors that mean the connection (or the link) is gone, not that a peer misbehaved. */
static bool link_errno(int code)
{
	switch (code) {
	case -ECONNRESET: case -EPIPE: case -ETIMEDOUT: case -ECONNABORTED: case -ENOTCONN:
	case -EHOSTUNREACH: case -ENETUNREACH: case -ENETDOWN: case -EHOSTDOWN: case -ECONNREFUSED:
		return true;
	default:
		return false;
	}
}

/*
 * During postcopy a broken connection pauses the migration instead of
 * failing it: the VM runs on the destination and the source holds pages
 * it needs, so both wait for a recovery (postcopy_src.c, postcopy_dst.c).
 * True when @code was taken that way.
 */
static bool postcopy_link_lost(struct gw_session *s, const char *phase, int code, const char *msg)
{
	int none = 0;

	if (__atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) != GW_PC_ACTIVE || !link_errno(code) ||
	    __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE))
		return false;
	if (__atomic_compare_exchange_n(&s->pc_broken, &none, code, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		gw_log(GW_LOG_WARN, "mig", "postcopy_link_lost", "phase=%s code=%d reason=\"%s\"", phase, code, msg);
		pthread_mutex_lock(&s->lock);
		snprintf(s->stats.postcopy_reason, sizeof(s->stats.postcopy_reason), "link lost: %.*s",
			 (int)sizeof(s->stats.postcopy_reason) - 20, msg);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
	gw_session_shutdown_conns(s);
	return true;
}

int gw_fail(struct gw_session *s, const char *phase, int code, bool from_peer,
	    const char *fmt, ...)
{
	char msg[512];
	bool first;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (code >= 0)
		code = -EIO;
	if (!from_peer && postcopy_link_lost(s, phase, code, msg))
		return code;
	pthread_mutex_lock(&s->lock);
	first = fail_record_locked(s, phase, code, from_peer, msg);
	pthread_mutex_unlock(&s->lock);
	if (!first) {
		gw_debug("mig", "error_dropped", "phase=%s reason=\"%s\"", phase, msg);
		return code;
	}
	fail_notify(s, phase, code, from_peer, msg);
	return code;
}

int gw_failed(struct gw_session *s)
{
	int code = __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE);

	return code ? code : __atomic_load_n(&s->pc_broken, __ATOMIC_ACQUIRE);
}

int gw_fail_from_peer(struct gw_session *s, const char *phase, const struct gw_msg_error *m)
{
	return gw_fail(s, phase, gw_wire_err_to_errno(m->code), true, "peer: %s", m->reason);
}

void gw_error_get(struct gw_session *s, struct gw_error *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->err;
	pthread_mutex_unlock(&s->lock);
}

const char *gw_conn_err_text(int err, const char *who)
{
	switch (err) {
	case -ECONNRESET: return !strcmp(who, "source") ? "the source closed the connection" :
					       "the destination closed the connection";
	case -EBADMSG: return "checksum mismatch";
	case -EPROTO: return "malformed frame";
	case -ERANGE: return "page outside guest RAM";
	case -EUCLEAN: return "corrupt compressed or XBZRLE payload";
	case -ETIMEDOUT: return "peer silent past the I/O timeout";
	default: return strerror(-err);
	}
}

void gw_boot_id(uint8_t out[GW_WIRE_ID_BYTES])
{
	char txt[64] = "";
	unsigned n = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	memset(out, 0, GW_WIRE_ID_BYTES);
	if (!f)
		return;
	if (!fgets(txt, sizeof(txt), f))
		txt[0] = 0;
	fclose(f);
	/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": 32 hex digits. */
	for (const char *p = txt; *p && n < 2 * GW_WIRE_ID_BYTES; p++) {
		int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (v < 0)
			continue;
		out[n / 2] |= (uint8_t)(n % 2 ? v : v << 4);
		n++;
	}
}

int gw_session_hint_free(struct gw_session *s, unsigned block, uint64_t first_page, uint64_t nr_pages)
{
	int ret = -EAGAIN;

	if (!s || s->role != GW_ROLE_SOURCE || block >= s->vm.nr_blocks)
		return -EINVAL;
	pthread_mutex_lock(&s->hint_lock);
	if (s->hint_target) {
		struct gw_bitmap *b = &s->hint_target[block];

		ret = -EINVAL;
		if (first_page < b->nr_bits && nr_pages <= b->nr_bits - first_page) {
			uint64_t dropped = gw_bitmap_take_range(b, first_page, nr_pages);

			gw_bitmap_set_range(&s->hint_free[block], first_page, nr_pages);
			__atomic_fetch_add(&s->hinted_pages, dropped, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->hint_ranges, 1, __ATOMIC_RELAXED);
			ret = 0;
		}
	}
	pthread_mutex_unlock(&s->hint_lock);
	return ret;
}

void gw_log_pipeline(struct gw_session *s)
{
	uint64_t pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
			 __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED) +
			 __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	unsigned from = s->role == GW_ROLE_SOURCE ? GW_STAGE_READ : GW_STAGE_RECV;
	unsigned to = s->role == GW_ROLE_SOURCE ? GW_STAGE_SETTLE : GW_STAGE_APPLY;
	char buf[512];
	size_t n = 0;

	for (unsigned i = from; i <= to && n < sizeof(buf); i++) {
		uint64_t ns = __atomic_load_n(&s->ctr_stage_ns[i], __ATOMIC_RELAXED);

		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s_us=%llu %s_ns_per_page=%.1f",
				      gw_stage_name((enum gw_stage)i), (unsigned long long)(ns / 1000),
				      gw_stage_name((enum gw_stage)i), pages ? (double)ns / (double)pages : 0.0);
	}
	gw_log(GW_LOG_INFO, "mig", "pipeline", "pages=%llu live_pages=%llu void_pages=%llu direct_pages=%llu "
	       "zerocopy_sends=%llu zerocopy_copied=%llu%s", (unsigned long long)pages,
	       (unsigned long long)__atomic_load_n(&s->ctr_live_pages, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_void_pages, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_direct_pages, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_zc_sends, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_zc_copied, __ATOMIC_RELAXED), buf);
}

uint64_t gw_verify_wait_ms(const struct gw_session *s)
{
	uint64_t ram_bytes = 0;

	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		ram_bytes += s->vm.blocks[i].size_bytes;
	return (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS) + ram_bytes / ((256u << 20) / 1000);
}

struct timespec gw_deadline_ms(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);	/* s->cond uses the monotonic clock */
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

void gw_set_status(struct gw_session *s, enum gw_status st)
{
	pthread_mutex_lock(&s->lock);
	s->status = st;
	s->stats.status = st;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
}

int gw_session_cancel(struct gw_session *s)
{
	if (!s)
		return -EINVAL;
	static const char msg[] = "migration cancelled by request";
	static const char idle_msg[] = "no migration received";
	bool first, idle;

	/* Checked and recorded under one lock: GO cannot slip in between. */
	pthread_mutex_lock(&s->lock);
	if (!s->running || s->go_sent || __atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) >= GW_PC_ACTIVE) {
		pthread_mutex_unlock(&s->lock);
		return -EALREADY;
	}
	/* A destination no source reached yet: stopping it is no failure. */
	idle = s->role == GW_ROLE_DEST && !s->t_start_ns;
	__atomic_store_n(&s->cancelled, true, __ATOMIC_RELEASE);
	first = fail_record_locked(s, idle ? "listen" : "cancel", -ECANCELED, false,
				   idle ? idle_msg : msg);
	pthread_mutex_unlock(&s->lock);
	if (first && idle) {
		gw_log(GW_LOG_INFO, "mig", "incoming_stopped", "reason=\"%s\"", idle_msg);
		gw_session_shutdown_conns(s);
	} else if (first) {
		fail_notify(s, "cancel", -ECANCELED, false, msg);
	}
	return 0;
}

int gw_session_wait(struct gw_session *s)
{
	int ret;

	join_thread(s);
	pthread_mutex_lock(&s->lock);
	ret = s->status == GW_STATUS_COMPLETED ? 0 : (s->err.code ? s->err.code : -EIO);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void gw_session_stats(struct gw_session *s, struct gw_stats *out)
{
	uint64_t t_start_ns;

	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->status = s->status;
	out->error_code = s->err.code;
	snprintf(out->error, sizeof(out->error), "%s", s->err.msg);
	snprintf(out->error_phase, sizeof(out->error_phase), "%s", s->err.phase);
	t_start_ns = s->t_start_ns;
	if (s->role == GW_ROLE_DEST)
		gw_dst_stats_locked(s, out);
	out->conns_refused = s->adm_refused + (s->adm ? gw_admit_refused(s->adm) : 0);
	pthread_mutex_unlock(&s->lock);
	/* Pipeline counters: atomics that only grow, final once the channels ended. */
	for (unsigned i = 0; i < GW_STAGE__COUNT; i++)
		out->stage_ns[i] = __atomic_load_n(&s->ctr_stage_ns[i], __ATOMIC_RELAXED);
	out->live_pages = __atomic_load_n(&s->ctr_live_pages, __ATOMIC_RELAXED);
	out->void_pages = __atomic_load_n(&s->ctr_void_pages, __ATOMIC_RELAXED);
	out->direct_pages = __atomic_load_n(&s->ctr_direct_pages, __ATOMIC_RELAXED);
	out->zerocopy_sends = __atomic_load_n(&s->ctr_zc_sends, __ATOMIC_RELAXED);
	out->zerocopy_copied = __atomic_load_n(&s->ctr_zc_copied, __ATOMIC_RELAXED);
	/* Live counters (atomics) between publications. */
	if (out->status != GW_STATUS_COMPLETED && out->status != GW_STATUS_FAILED &&
	    out->status != GW_STATUS_CANCELLED && out->status != GW_STATUS_UNKNOWN &&
	    out->status != GW_STATUS_NONE) {
		out->normal_pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED);
		out->duplicate_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
		out->xbzrle_pages = __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
		out->normal_bytes = out->normal_pages * GW_PAGE_BYTES;
		/* The clock runs until the handover ends (completed sets the final figure). */
		if (t_start_ns)
			out->total_time_ns = gw_now_ns() - t_start_ns;
	}
}

/*
 * Postcopy, source paused after GO without RESUMED: the operator found that
 * the destination does not run the VM. The migration thread resumes it
 * here and ends failed. 1 when this case applied (*@ret set), else 0.
 */
static int resolve_postcopy(struct gw_session *s, bool destination_runs, int *ret)
{
	bool applies;

	pthread_mutex_lock(&s->lock);
	applies = s->role == GW_ROLE_SOURCE && s->running && s->status == GW_STATUS_POSTCOPY_PAUSED;
	if (applies && (destination_runs || !s->pc_resolvable)) {
		pthread_mutex_unlock(&s->lock);
		*ret = -EINVAL;	/* the VM runs there: it needs its pages, recover */
		return 1;
	}
	if (applies)
		s->pc_resolve_source = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (!applies)
		return 0;
	join_thread(s);
	gw_log(GW_LOG_WARN, "mig", "outcome_resolved", "destination_runs=0 source_resumed=1 after=postcopy_paused");
	*ret = 0;
	return 1;
}

int gw_session_resolve(struct gw_session *s, bool destination_runs)
{
	bool unknown, mismatch;
	int ret = 0;

	if (resolve_postcopy(s, destination_runs, &ret))
		return ret;
	join_thread(s);
	pthread_mutex_lock(&s->lock);
	unknown = s->status == GW_STATUS_UNKNOWN;
	mismatch = s->status == GW_STATUS_COMPLETED && s->stats.verify == GW_VERIFY_MISMATCH;
	pthread_mutex_unlock(&s->lock);
	if (s->role != GW_ROLE_SOURCE || (!unknown && !mismatch))
		return -EINVAL;
	if (!destination_runs)
		ret = s->ops->resume(s->opaque);
	gw_log(GW_LOG_WARN, "mig", "outcome_resolved", "destination_runs=%d source_resumed=%d after=%s",
	       destination_runs, !destination_runs && !ret, unknown ? "unknown" : "verify_mismatch");
	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	if (!destination_runs) {
		s->stats.verify = mismatch ? GW_VERIFY_MISMATCH : s->stats.verify;
		snprintf(s->err.msg, sizeof(s->err.msg), "%s",
			 mismatch ? "verify mismatch: the operator resumed the VM on the source" :
				    "outcome unknown: the operator resumed the VM on the source");
	}
	s->status = s->stats.status = destination_runs ? GW_STATUS_COMPLETED : GW_STATUS_FAILED;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	return 0;
}

const char *gw_incoming_url(const struct gw_session *s)
{
	return s ? s->bound_url : "";
}

static int start_thread(struct gw_session *s, void *(*fn)(void *))
{
	int ret;

	pthread_mutex_lock(&s->lock);
	if (s->running || !s->thread_joined) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	memset(&s->err, 0, sizeof(s->err));
	__atomic_store_n(&s->err.code, 0, __ATOMIC_RELEASE);
	memset(&s->stats, 0, sizeof(s->stats));
	/* A destination has no migration until a source's HELLO arrives. */
	s->status = s->role == GW_ROLE_SOURCE ? GW_STATUS_SETUP : GW_STATUS_NONE;
	s->stats.status = s->status;
	s->ev_status = GW_STATUS_NONE;
	s->go_sent = false;
	s->pc_resolvable = false;
	s->pc_resolve_source = false;
	__atomic_store_n(&s->pc_start_req, false, __ATOMIC_RELAXED);
	__atomic_store_n(&s->cancelled, false, __ATOMIC_RELAXED);
	s->t_start_ns = s->role == GW_ROLE_SOURCE ? gw_now_ns() : 0;
	s->running = true;
	s->thread_joined = false;
	ret = -pthread_create(&s->thread, NULL, fn, s);
	if (ret) {
		s->running = false;
		s->thread_joined = true;
		s->status = GW_STATUS_NONE;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* A request refused before anything started: the reason goes to the stats. */
static int refuse_quiet(struct gw_session *s, const char *why)
{
	pthread_mutex_lock(&s->lock);
	if (!s->running) {
		memset(&s->err, 0, sizeof(s->err));
		__atomic_store_n(&s->err.code, -EINVAL, __ATOMIC_RELEASE);
		snprintf(s->err.phase, sizeof(s->err.phase), "request");
		snprintf(s->err.msg, sizeof(s->err.msg), "%s", why);
	}
	pthread_mutex_unlock(&s->lock);
	return -EINVAL;
}

static int refuse(struct gw_session *s, const char *why)
{
	gw_log(GW_LOG_ERROR, "mig", "bad_request", "reason=\"%s\"", why);
	return refuse_quiet(s, why);
}

const char *gw_session_error(struct gw_session *s, char *buf, size_t len)
{
	pthread_mutex_lock(&s->lock);
	snprintf(buf, len, "%s", s->err.msg);
	pthread_mutex_unlock(&s->lock);
	return buf;
}

/* The TLS parameters as set now. */
static void tls_config(struct gw_session *s, struct gw_tls_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	pthread_mutex_lock(&s->lock);
	snprintf(cfg->creds_dir, sizeof(cfg->creds_dir), "%s", s->sparams[GW_SPARAM_TLS_CREDS]);
	snprintf(cfg->psk_file, sizeof(cfg->psk_file), "%s", s->sparams[GW_SPARAM_TLS_PSK]);
	snprintf(cfg->hostname, sizeof(cfg->hostname), "%.255s", s->sparams[GW_SPARAM_TLS_HOSTNAME]);
	snprintf(cfg->authz, sizeof(cfg->authz), "%s", s->sparams[GW_SPARAM_TLS_AUTHZ]);
	pthread_mutex_unlock(&s->lock);
}

/*
 * This migration's TLS credentials into s->tls_ctx (NULL without TLS),
 * checked before anything connects or listens. 0, or -errno with @why.
 */
static int tls_prepare(struct gw_session *s, enum gw_tls_role role, char *why, size_t why_len)
{
	struct gw_tls_config cfg;

	gw_tls_ctx_free(s->tls_ctx);
	s->tls_ctx = NULL;
	tls_config(s, &cfg);
	if (!gw_tls_config_on(&cfg))
		return 0;
	if (role == GW_TLS_CLIENT && gw_param(s, GW_PARAM_LOCAL)) {
		snprintf(why, why_len, "local migration passes memory file descriptors, which TLS cannot "
			 "carry: use it without --tls-creds/--tls-psk (the unix: socket is mode 0600)");
		return -EINVAL;
	}
	if (role == GW_TLS_CLIENT && cfg.creds_dir[0] && !cfg.hostname[0] && !s->url.ops->tls_host_in_url) {
		snprintf(why, why_len, "%s: with certificates, give --tls-hostname (the name in the "
			 "destination's certificate)", s->url_str);
		return -EINVAL;
	}
	if (!s->url.ops->sock->kernel) {
		/* OpenSSL reads and writes a kernel socket itself; an rsocket is not one. */
		snprintf(why, why_len, "%s: TLS is not available over %s: (rsockets are not kernel sockets "
			 "OpenSSL can drive): use tcp: with --tls-creds/--tls-psk, or %s: without TLS",
			 s->url_str, s->url.ops->scheme, s->url.ops->scheme);
		return -EOPNOTSUPP;
	}
	s->tls_ctx = gw_tls_ctx_new(role, &cfg, why, why_len);
	return s->tls_ctx ? 0 : -errno;
}

int gw_migrate_start(struct gw_session *s, const char *url)
{
	char why[400];
	int ret;

	if (!s || s->role != GW_ROLE_SOURCE || !url)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	ret = s->running ? -EBUSY : 0;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	ret = gw_url_parse(url, &s->url, why, sizeof(why));
	if (ret)
		return refuse(s, why);
	if (s->url.ops->usable && s->url.ops->usable(why, sizeof(why)))
		return refuse(s, why);
	if (gw_param(s, GW_PARAM_LOCAL) && !s->url.ops->can_pass_fds) {
		snprintf(why, sizeof(why), "local migration passes memory fds: it needs unix:, not %s:",
			 s->url.ops->scheme);
		return refuse(s, why);
	}
	if (gw_param(s, GW_PARAM_LOCAL)) {
		for (unsigned i = 0; i < s->vm.nr_blocks; i++)
			if (s->vm.blocks[i].fd < 0) {
				snprintf(why, sizeof(why), "local migration needs fd-backed RAM; block %s is anonymous",
					 s->vm.blocks[i].name);
				return refuse(s, why);
			}
	}
	snprintf(s->url_str, sizeof(s->url_str), "%s", url);
	ret = tls_prepare(s, GW_TLS_CLIENT, why, sizeof(why));
	if (ret)
		return refuse(s, why);
	return start_thread(s, gw_source_main);
}

int gw_incoming_start(struct gw_session *s, const char *url)
{
	struct gw_admit_config ac = { .side = "dst" };
	struct gw_admit *a;
	char why[400];
	int fd, ret;

	if (!s || s->role != GW_ROLE_DEST || !url)
		return -EINVAL;
	if (s->listen_fd >= 0)
		return -EBUSY;
	ret = gw_url_parse_listen(url, &s->url, why, sizeof(why));
	if (ret)
		return refuse(s, why);
	if (s->url.ops->usable && (ret = s->url.ops->usable(why, sizeof(why)))) {
		refuse(s, why);
		return ret;	/* -ENODEV: rdma: without a device */
	}
	snprintf(s->url_str, sizeof(s->url_str), "%s", url);
	ret = tls_prepare(s, GW_TLS_SERVER, why, sizeof(why));
	if (ret)
		return refuse(s, why);
	fd = s->url.ops->listen(s->url.addr, s->bound_url, sizeof(s->bound_url));
	if (fd < 0) {
		if (fd == -EEXIST)
			snprintf(why, sizeof(why), "%s: the path exists and is not a socket: refusing to replace it", url);
		else if (fd == -EADDRINUSE)
			snprintf(why, sizeof(why), "%s: in use (something listens there already)", url);
		else if (fd == -ENOENT)
			snprintf(why, sizeof(why), "%s: the host name does not resolve", url);
		else
			snprintf(why, sizeof(why), "%s: %s", url, strerror(-fd));
		gw_log(GW_LOG_ERROR, "mig", "listen_failed", "url=%s err=\"%s\"", url, why);
		refuse_quiet(s, why);
		return fd;
	}
	s->listen_fd = fd;
	snprintf(s->url_str, sizeof(s->url_str), "%s", url);
	ac.listen_fd = fd;
	ac.sock = s->url.ops->sock;
	ac.tls = s->tls_ctx;
	ac.opening_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	a = gw_admit_start(&ac);
	if (!a) {
		ret = -errno;
		goto fail;
	}
	gw_session_set_admit(s, a);
	gw_log(GW_LOG_INFO, "mig", "incoming_listen", "url=%s tls=%s", s->bound_url,
	       s->tls_ctx ? gw_tls_ctx_mode(s->tls_ctx) : "none");
	ret = start_thread(s, gw_dest_main);
	if (!ret)
		return 0;
	gw_session_stop_admit(s);
fail:
	s->url.ops->sock->close(fd);
	s->url.ops->unlisten(s->url.addr);
	s->listen_fd = -1;
	return ret;
}

void gw_thread_critical(struct gw_session *s, const char *what)
{
	struct sched_param sp = { .sched_priority = (int)gw_param(s, GW_PARAM_RT_PRIORITY) };
	int ret;

	if (!sp.sched_priority)
		return;
	ret = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (ret)
		gw_log(GW_LOG_WARN, "mig", "rt_priority_refused", "thread=%s priority=%d err=\"%s\"", what,
		       sp.sched_priority, strerror(ret));
}

void gw_thread_normal(struct gw_session *s)
{
	struct sched_param sp = { .sched_priority = 0 };

	if (gw_param(s, GW_PARAM_RT_PRIORITY))
		(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
}

/* CPU time of this process, for the statistics. */
void gw_cpu_times(uint64_t *user_ns, uint64_t *sys_ns)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000;
	*sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000;
}
