/* SPDX-License-Identifier: MIT */
/*
 * Session lifecycle, the public entry points above every role: create (the
 * role's ops and its own state, source/ or dest/) and free, start a
 * migration (URL and TLS checks, the listening socket, the migration
 * thread), wait, resolve an unknown outcome; free-page hints. Status, the
 * acceptor and the channel array as the other threads see them are in
 * core/conns.c; the sticky error, cancel and abandon in core/error.c; the
 * statistics snapshot and thread helpers in core/util.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "net/admit.h"
#include "pipe/channel.h"
#include "net/tls.h"
#include "core/session_int.h"
#include "dest/dest.h"
#include "source/source.h"
#include "util/abi.h"
#include "util/thread_name.h"

struct gw_session *gw_session_new(enum gw_role role, const struct gw_vm_info *vm,
				  const struct gw_vm_ops *ops, void *opaque)
{
	struct gw_session *s;
	int ret;

	if ((role != GW_ROLE_SOURCE && role != GW_ROLE_DEST) || !vm || !ops) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s && role == GW_ROLE_DEST && !(s->dst = calloc(1, sizeof(*s->dst)))) {
		free(s);
		s = NULL;
	}
	if (s && role == GW_ROLE_SOURCE && !(s->src = calloc(1, sizeof(*s->src)))) {
		free(s);
		s = NULL;
	}
	if (!s)
		return NULL;
	/* The VMM's structs at the library's size, then checked. */
	ret = gw_vm_ops_copy_in(&s->ops_copy, ops);
	if (!ret)
		ret = gw_session_take_vm_info(s, vm);
	if (!ret && (!s->ops_copy.pause || !s->ops_copy.resume ||
		     (role == GW_ROLE_SOURCE && s->vm.nr_blocks == 0) ||
		     (role == GW_ROLE_DEST && !s->ops_copy.load_state)))
		ret = -EINVAL;
	for (unsigned i = 0; !ret && i < s->vm.nr_blocks; i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];

		if (!b->host || b->page_size_bytes != GW_PAGE_BYTES || !b->size_bytes ||
		    b->size_bytes % b->page_size_bytes)
			ret = -EINVAL;
	}
	/* Device-dirty bitmaps: a source's, for the session's life (mark_dirty never waits). */
	if (!ret && role == GW_ROLE_SOURCE)
		ret = gw_devdirty_init(&s->devdirty, &s->vm);
	if (ret) {
		free(s->dst);
		free(s->src);
		free(s);
		errno = -ret;
		return NULL;
	}
	s->role = role;
	s->role_ops = role == GW_ROLE_SOURCE ? &gw_source_role : &gw_dest_role;
	s->ops = &s->ops_copy;
	s->opaque = opaque;
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
	if (s->src)
		pthread_mutex_init(&s->src->hint_lock, NULL);
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

void gw_session_free(struct gw_session *s)
{
	if (!s)
		return;
	if (gw_session_cancel(s) == -EALREADY && __atomic_load_n(&s->pc_state, __ATOMIC_ACQUIRE) >= GW_PC_ACTIVE)
		gw_abandon_postcopy(s);	/* nobody would finish it */
	join_thread(s);
	gw_session_stop_admit(s);
	gw_tls_ctx_free(s->tls_ctx);
	if (s->listen_fd >= 0 && s->url.ops) {
		s->url.ops->sock->close(s->listen_fd);
		s->url.ops->unlisten(s->url.addr, &s->url.lid);
	}
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	if (s->src)
		pthread_mutex_destroy(&s->src->hint_lock);
	free(s->src);
	gw_devdirty_free(&s->devdirty);
	free(s->dst);
	free(s);
}

int gw_session_hint_free(struct gw_session *s, unsigned block, uint64_t first_page, uint64_t nr_pages)
{
	int ret = -EAGAIN;

	if (!s || s->role != GW_ROLE_SOURCE || block >= s->vm.nr_blocks)
		return -EINVAL;
	pthread_mutex_lock(&s->src->hint_lock);
	if (s->src->hint_target) {
		struct gw_bitmap *b = &s->src->hint_target[block];

		ret = -EINVAL;
		if (first_page < b->nr_bits && nr_pages <= b->nr_bits - first_page) {
			uint64_t dropped = gw_bitmap_take_range(b, first_page, nr_pages);

			gw_bitmap_set_range(&s->src->hint_free[block], first_page, nr_pages);
			__atomic_fetch_add(&s->src->hinted_pages, dropped, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->src->hint_ranges, 1, __ATOMIC_RELAXED);
			ret = 0;
		}
	}
	pthread_mutex_unlock(&s->src->hint_lock);
	return ret;
}

int gw_session_mark_dirty(struct gw_session *s, uint64_t gpa, uint64_t len_bytes)
{
	/* No lock, no check of a running migration: marks between migrations are dropped at the next start. */
	if (!s || s->role != GW_ROLE_SOURCE)
		return -EINVAL;
	return gw_devdirty_mark(&s->devdirty, gpa, len_bytes);
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
	if (applies && (destination_runs || !s->src->pc_resolvable)) {
		pthread_mutex_unlock(&s->lock);
		*ret = -EINVAL;	/* the VM runs there: it needs its pages, recover */
		return 1;
	}
	if (applies)
		s->src->pc_resolve_source = true;
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

/* @url into @u, its transport usable on this host: 0, or -EINVAL / -ENODEV with @why. */
static int url_usable(const char *url, bool listen, struct gw_url *u, char *why, size_t why_len)
{
	int ret = listen ? gw_url_parse_listen(url, u, why, why_len) : gw_url_parse(url, u, why, why_len);

	if (!ret && u->ops->usable)
		ret = u->ops->usable(why, why_len);
	return ret;
}

int gw_url_check(const char *url, bool listen, char *why, size_t why_len)
{
	struct gw_url u;
	char buf[400] = "";
	int ret = url ? url_usable(url, listen, &u, buf, sizeof(buf)) : -EINVAL;

	if (why && why_len)
		snprintf(why, why_len, "%s", ret ? buf : "");
	return ret;
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
	if (s->role == GW_ROLE_SOURCE) {	/* no round yet: the model knows nothing */
		s->stats.converging = true;
		s->stats.converge_state = GW_CONVERGE_UNKNOWN;
		s->stats.expected_downtime_unknown = true;
	}
	s->ev_status = GW_STATUS_NONE;
	s->go_sent = false;
	if (s->src) {
		s->src->pc_resolvable = false;
		s->src->pc_resolve_source = false;
	}
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
	} else {
		gw_thread_name(s->thread, "gw-mig-%s", s->role == GW_ROLE_SOURCE ? "src" : "dst");
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* A request refused before anything started: the reason goes to the stats. */
static int refuse_quiet(struct gw_session *s, const char *why)
{
	pthread_mutex_lock(&s->lock);
	if (!s->running) {
		memset(&s->err, 0, sizeof(s->err));	/* a request refused before: replaced */
		gw_error_set_locked(s, GW_PHASE_REQUEST, -EINVAL, "%s", why);
	}
	pthread_mutex_unlock(&s->lock);
	return -EINVAL;
}

static int refuse(struct gw_session *s, const char *why)
{
	gw_log(GW_LOG_ERROR, "mig", "bad_request", "reason=\"%s\"", why);
	return refuse_quiet(s, why);
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
	if (url_usable(url, false, &s->url, why, sizeof(why)))
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
	return start_thread(s, s->role_ops->main);
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
	ret = url_usable(url, true, &s->url, why, sizeof(why));
	if (ret) {
		refuse(s, why);
		return ret;	/* -EINVAL, or -ENODEV: rdma: without a device */
	}
	snprintf(s->url_str, sizeof(s->url_str), "%s", url);
	ret = tls_prepare(s, GW_TLS_SERVER, why, sizeof(why));
	if (ret)
		return refuse(s, why);
	fd = s->url.ops->listen(s->url.addr, s->bound_url, sizeof(s->bound_url), &s->url.lid);
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
	ret = start_thread(s, s->role_ops->main);
	if (!ret)
		return 0;
	gw_session_stop_admit(s);
fail:
	s->url.ops->sock->close(fd);
	s->url.ops->unlisten(s->url.addr, &s->url.lid);
	s->listen_fd = -1;
	return ret;
}
