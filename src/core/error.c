/* SPDX-License-Identifier: MIT */
/*
 * The sticky first error of a migration: recording it once (gw_fail), telling
 * the peer and waking blocked threads, a broken link during postcopy (which
 * pauses instead of failing), cancel and abandon, and the texts of errors.
 * Lifecycle is in session.c; this file only records and reports failures.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "core/session_int.h"
#include "util/escape.h"

static const char *const phase_names[GW_PHASE__COUNT] = {
	[GW_PHASE_NONE] = "", [GW_PHASE_REQUEST] = "request", [GW_PHASE_LISTEN] = "listen",
	[GW_PHASE_CANCEL] = "cancel", [GW_PHASE_SETUP] = "setup", [GW_PHASE_ROUND] = "round",
	[GW_PHASE_FINAL] = "final", [GW_PHASE_HANDOVER] = "handover", [GW_PHASE_SEND] = "send",
	[GW_PHASE_RECEIVE] = "receive", [GW_PHASE_CONTROL] = "control",
	[GW_PHASE_POSTCOPY] = "postcopy",
};

const char *gw_phase_name(enum gw_phase phase)
{
	return (unsigned)phase < GW_PHASE__COUNT ? phase_names[phase] : "?";
}

/* Record the first error; caller holds s->lock. True if this one was first. */
static bool fail_record_locked(struct gw_session *s, enum gw_phase phase, int code,
			       bool from_peer, const char *msg)
{
	if (s->err.code)
		return false;
	__atomic_store_n(&s->err.code, code, __ATOMIC_RELEASE);
	s->err.from_peer = from_peer;
	s->err.phase = phase;
	/*
	 * The reason is logged, reported (statistics, JSON) and sent: sites
	 * escaped the peer's bytes they quote (gw_log_str); whatever one forgot,
	 * no control byte or invalid UTF-8 is kept (gw_text_clean).
	 */
	gw_text_clean(s->err.msg, sizeof(s->err.msg), msg);
	pthread_cond_broadcast(&s->cond);
	return true;
}

bool gw_error_set_locked(struct gw_session *s, enum gw_phase phase, int code, const char *fmt, ...)
{
	char msg[sizeof(s->err.msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail_record_locked(s, phase, code, false, msg);
}

/* After the first error: log it, tell the peer why, wake blocked threads. */
static void fail_notify(struct gw_session *s, enum gw_phase phase, int code, bool from_peer,
			const char *msg)
{
	gw_log(GW_LOG_ERROR, "mig", "error", "phase=%s code=%d reason=\"%s\"%s",
	       gw_phase_name(phase), code, msg, from_peer ? " from=peer" : "");
	if (!from_peer)
		gw_conn_send_error(&s->ctl, code, msg);	/* -EPIPE when not connected */
	gw_session_shutdown_conns(s);
}

/*
 * The owner frees a session whose migration is in postcopy (a process
 * quitting, say): nobody will finish it, so it ends now, failed. Before the
 * switch a cancel does it.
 */
void gw_abandon_postcopy(struct gw_session *s)
{
	static const char msg[] = "abandoned during postcopy (the owner is going away): the VM is lost";
	bool first;

	pthread_mutex_lock(&s->lock);
	first = s->running && fail_record_locked(s, GW_PHASE_POSTCOPY, -ECANCELED, false, msg);
	pthread_mutex_unlock(&s->lock);
	if (first)
		fail_notify(s, GW_PHASE_POSTCOPY, -ECANCELED, false, msg);
}

int gw_session_abandon(struct gw_session *s)
{
	if (!s || !__atomic_load_n(&s->running, __ATOMIC_ACQUIRE))
		return -EINVAL;
	if (gw_session_cancel(s) == 0)
		return 0;
	/* Precopy after GO: the wait for RESUMED is bounded, nothing to end. */
	if (__atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) >= GW_PC_ACTIVE)
		gw_abandon_postcopy(s);
	return 0;
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
 * it needs, so both wait for a recovery (source/postcopy.c, dest/postcopy.c).
 * True when @code was taken that way.
 */
static bool postcopy_link_lost(struct gw_session *s, enum gw_phase phase, int code, const char *msg)
{
	int none = 0;

	if (__atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) != GW_PC_ACTIVE || !link_errno(code) ||
	    __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE))
		return false;
	if (__atomic_compare_exchange_n(&s->pc_broken, &none, code, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		gw_log(GW_LOG_WARN, "mig", "postcopy_link_lost", "phase=%s code=%d reason=\"%s\"",
		       gw_phase_name(phase), code, msg);
		pthread_mutex_lock(&s->lock);
		snprintf(s->stats.postcopy_reason, sizeof(s->stats.postcopy_reason), "link lost: %.*s",
			 (int)sizeof(s->stats.postcopy_reason) - 20, msg);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
	gw_session_shutdown_conns(s);
	return true;
}

/* gw_fail's body: @from_peer when the peer reported it (no ERROR sent back). */
static int fail(struct gw_session *s, enum gw_phase phase, int code, bool from_peer, const char *msg)
{
	bool first;

	if (code >= 0)
		code = -EIO;
	if (!from_peer && postcopy_link_lost(s, phase, code, msg))
		return code;
	pthread_mutex_lock(&s->lock);
	first = fail_record_locked(s, phase, code, from_peer, msg);
	pthread_mutex_unlock(&s->lock);
	if (!first) {
		gw_debug("mig", "error_dropped", "phase=%s reason=\"%s\"", gw_phase_name(phase), msg);
		return code;
	}
	fail_notify(s, phase, code, from_peer, msg);
	return code;
}

int gw_fail(struct gw_session *s, enum gw_phase phase, int code, const char *fmt, ...)
{
	char msg[sizeof(s->err.msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail(s, phase, code, false, msg);
}

int gw_failed(struct gw_session *s)
{
	int code = __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE);

	return code ? code : __atomic_load_n(&s->pc_broken, __ATOMIC_ACQUIRE);
}

int gw_fail_from_peer(struct gw_session *s, enum gw_phase phase, const struct gw_msg_error *m)
{
	/* Whole escapes that fit after the longer prefix. */
	char msg[sizeof(s->err.msg)], esc[sizeof(s->err.msg) - sizeof("the destination says: ") + 1];

	/* The peer's words: printable ASCII once decoded, and escaped (a '\') like any peer string. */
	snprintf(msg, sizeof(msg), "the %s says: %s", s->role == GW_ROLE_SOURCE ? "destination" : "source",
		 gw_log_str(esc, sizeof(esc), m->reason));
	return fail(s, phase, gw_wire_err_to_errno(m->code), true, msg);
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
	case -ETIMEDOUT: return !strcmp(who, "source") ? "the source sent nothing within io-timeout-ms" :
					      "the destination sent nothing within io-timeout-ms";
	default: return strerror(-err);
	}
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
	first = fail_record_locked(s, idle ? GW_PHASE_LISTEN : GW_PHASE_CANCEL, -ECANCELED, false,
				   idle ? idle_msg : msg);
	pthread_mutex_unlock(&s->lock);
	if (first && idle) {
		gw_log(GW_LOG_INFO, "mig", "incoming_stopped", "reason=\"%s\"", idle_msg);
		gw_session_shutdown_conns(s);
	} else if (first) {
		fail_notify(s, GW_PHASE_CANCEL, -ECANCELED, false, msg);
	}
	return 0;
}

const char *gw_session_error(struct gw_session *s, char *buf, size_t len)
{
	pthread_mutex_lock(&s->lock);
	snprintf(buf, len, "%s", s->err.msg);
	pthread_mutex_unlock(&s->lock);
	return buf;
}
