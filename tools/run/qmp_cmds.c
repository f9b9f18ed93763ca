/* SPDX-License-Identifier: MIT */
/*
 * godwit run --qmp PATH: QEMU's migration commands and events on top of
 * run_ops.c, with QEMU's names, units and reply shapes (docs/qmp.md), so
 * that QEMU tooling can drive a godwit VM. Parameters and capabilities map
 * onto godwit's parameters through qemu_names.c (a capability a build lacks
 * is one entry there and fails with its reason); the commands of libvirt's
 * flow (TLS objects, postcopy, migrate-continue) are in qmp_flow.c.
 *
 * Threads: the commands run on the QMP server's thread; the event sink on
 * whichever thread emits (run_events.h), and it never takes rs->lock.
 */
#include "run/run.h"
#include "run/run_events.h"
#include "common/cli_parse.h"
#include "common/qemu_names.h"
#include "common/qmp.h"
#include "run/qmp_announce.h"
#include "run/qmp_flow.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* QEMU's parameters godwit does not have: refused by name, not as unknown. */
static const char *const qemu_params_missing[] = {
	"compress-level", "compress-threads", "compress-wait-thread", "decompress-threads", "x-checkpoint-delay", "block-incremental",
	"max-postcopy-bandwidth", "block-bitmap-mapping", "x-vcpu-dirty-limit-period", "mode",
	"zero-page-detection", "avail-switchover-bandwidth", "multifd-qatzip-level", "direct-io",
	NULL,
};
/* QEMU's capabilities godwit does not have: "false" is accepted (it is off), "true" refused. */
static const char *const qemu_caps_missing[] = {
	"zero-blocks", "compress", "rdma-pin-all", "x-colo", "release-ram", "block", "return-path",
	"x-ignore-shared", "validate-uuid", "background-snapshot",
	"zero-copy-send", "postcopy-preempt", "postcopy-blocktime", "late-block-activate",
	"switchover-ack", "mapped-ram", NULL,
};

#define QEMU_XBZRLE_DEFAULT_BYTES (64ll << 20)
#define QEMU_MULTIFD_DEFAULT_CHANNELS 2
#define QEMU_DIRTY_LIMIT_DEFAULT_BPS (1ll << 20)

/* ---- negotiation, version, commands, run state ---- */

static json_t *qmp_do_qmp_capabilities(void *opaque, json_t *args, struct qmp_error *e)
{
	json_t *enable = json_object_get(args, "enable"), *v;
	size_t i;

	if (enable && !json_is_array(enable))
		return qmp_fail(e, "Invalid parameter type for '%s', expected: array", "enable");
	json_array_foreach(enable, i, v) {
		if (!json_is_string(v))
			return qmp_fail(e, "Invalid parameter type for '%s', expected: string", "enable[]");
		return qmp_fail(e, "Capability '%s' not available", json_string_value(v));
	}
	return json_object();
}

static json_t *version_object(void)
{
	char package[64];

	snprintf(package, sizeof(package), "godwit %s", gw_version());
	return json_pack("{s:{s:i,s:i,s:i},s:s}", "qemu", "micro", GW_VERSION_PATCH, "minor",
			 GW_VERSION_MINOR, "major", GW_VERSION_MAJOR, "package", package);
}

static json_t *qmp_do_query_version(void *opaque, json_t *args, struct qmp_error *e)
{
	return version_object();
}

static const struct qmp_command qmp_table[];

static json_t *qmp_do_query_commands(void *opaque, json_t *args, struct qmp_error *e)
{
	json_t *a = json_array();

	for (const struct qmp_command *k = qmp_table; a && k->name; k++)
		json_array_append_new(a, json_pack("{s:s}", "name", k->name));
	return a;
}

static json_t *qmp_do_query_status(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	const char *vs = run_vm_status(rs);

	return json_pack("{s:s,s:b,s:b}", "status", qemu_runstate_name(vs), "singlestep", 0,
			 "running", !strcmp(vs, "running"));
}

static json_t *qmp_do_stop(void *opaque, json_t *args, struct qmp_error *e)
{
	char err[RUN_ERR_MAX];

	if (run_stop(opaque, err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	return json_object();
}

static json_t *qmp_do_cont(void *opaque, json_t *args, struct qmp_error *e)
{
	char err[RUN_ERR_MAX];

	if (run_cont(opaque, err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	return json_object();
}

static json_t *qmp_do_quit(void *opaque, json_t *args, struct qmp_error *e)
{
	gw_log(GW_LOG_INFO, "cli", "quit_requested", "from=qmp");
	run_request_quit();
	return json_object();
}

/* ---- query-migrate ---- */

static enum gw_status status_of(const json_t *st)
{
	const char *name = js_str(js_get(st, "status"), "none");

	for (int i = GW_STATUS_NONE; strcmp(gw_status_name((enum gw_status)i), "invalid"); i++)
		if (!strcmp(gw_status_name((enum gw_status)i), name))
			return (enum gw_status)i;
	return GW_STATUS_FAILED;
}

static json_int_t ms_int(const json_t *st, const char *key)
{
	return (json_int_t)llround(js_num(js_get(st, key), 0));
}

static json_int_t num_int(const json_t *o, const char *key)
{
	return (json_int_t)js_num(js_get(o, key), 0);
}

/* MigrationStats of QEMU from godwit's "ram" object. */
static json_t *ram_stats(const json_t *st, bool completed)
{
	const json_t *ram = js_get(st, "ram");
	json_int_t normal = num_int(ram, "normal");

	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
			 "transferred", num_int(ram, "transferred"),
			 "remaining", completed ? 0 : num_int(ram, "remaining"),
			 "total", num_int(ram, "total"),
			 "duplicate", num_int(ram, "duplicate"),
			 "skipped", (json_int_t)0,
			 "normal", normal,
			 "normal-bytes", num_int(ram, "normal-bytes"),
			 "mbps", js_num(js_get(ram, "mbps"), 0),
			 "dirty-pages-rate", completed ? 0 : num_int(ram, "dirty-pages-rate"),
			 "dirty-sync-count", num_int(ram, "dirty-sync-count"),
			 "dirty-sync-missed-zero-copy", (json_int_t)0,
			 "postcopy-requests", (json_int_t)0,
			 "page-size", (json_int_t)GW_PAGE_BYTES,
			 "multifd-bytes", (json_int_t)0,
			 "pages-per-second", num_int(ram, "pages-per-second"),
			 "precopy-bytes", num_int(ram, "transferred"),
			 "downtime-bytes", (json_int_t)0);
}

/* QEMU's SocketAddress of a godwit URL, or NULL. */
static json_t *socket_address(const char *url)
{
	const char *colon;

	if (!strncmp(url, "unix:", 5))
		return json_pack("{s:s,s:s}", "type", "unix", "path", url + 5);
	if (strncmp(url, "tcp:", 4) || !(colon = strrchr(url + 4, ':')))
		return NULL;
	return json_pack("{s:s,s:s%,s:s}", "type", "inet", "host", url + 4,
			 (size_t)(colon - url - 4), "port", colon + 1);
}

static json_t *qmp_do_query_migrate(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	json_t *st = run_status(rs), *out = json_object();
	enum gw_status s;
	const char *url;
	bool active;

	if (!st || !out) {
		json_decref(st);
		json_decref(out);
		return qmp_fail(e, "%s", "out of memory");
	}
	s = status_of(st);
	url = js_str(js_get(st, "incoming-url"), "");
	/* QEMU's destination has completed once its VM runs (godwit's compares digests still). */
	if (url[0] && (s == GW_STATUS_DEVICE || s == GW_STATUS_HANDOVER) && !strcmp(run_vm_status(rs), "running"))
		s = GW_STATUS_COMPLETED;
	if (url[0]) {
		json_t *a = socket_address(url);

		if (a)
			json_object_set_new(out, "socket-address", json_pack("[o]", a));
	}
	qmp_blocked_reasons(rs, out);
	if (s == GW_STATUS_NONE) {
		json_decref(st);
		return out;	/* no migration has happened: {} as QEMU answers */
	}
	json_object_set_new(out, "status", json_string(qemu_status_name(s)));
	active = s == GW_STATUS_ACTIVE || s == GW_STATUS_DEVICE || s == GW_STATUS_HANDOVER ||
		 s == GW_STATUS_PRE_SWITCHOVER || (s >= GW_STATUS_POSTCOPY_ACTIVE && s <= GW_STATUS_POSTCOPY_RECOVER);
	if (active || s == GW_STATUS_COMPLETED) {
		json_object_set_new(out, "setup-time", json_integer(ms_int(st, "setup-time")));
		json_object_set_new(out, "total-time", json_integer(ms_int(st, "total-time")));
		/* The downtime is the source's figure (it paused the VM); QEMU's destination has none. */
		if (s == GW_STATUS_COMPLETED && !url[0])
			json_object_set_new(out, "downtime", json_integer(ms_int(st, "downtime")));
		else
			json_object_set_new(out, "expected-downtime",
					    json_integer(ms_int(st, "expected-downtime")));
		json_object_set_new(out, "ram", ram_stats(st, s == GW_STATUS_COMPLETED));
		if (js_num(js_get(st, "cpu-throttle-percentage"), 0) > 0)
			json_object_set_new(out, "cpu-throttle-percentage",
					    json_integer(num_int(st, "cpu-throttle-percentage")));
	}
	if ((s == GW_STATUS_FAILED || s == GW_STATUS_UNKNOWN) && js_get(st, "error-desc"))
		json_object_set_new(out, "error-desc", js_string(js_str(js_get(st, "error-desc"), "")));
	json_decref(st);
	return out;
}

/* ---- migrate, migrate_cancel, migrate-incoming, migrate-start-postcopy ---- */

static json_t *qmp_do_migrate_cancel(void *opaque, json_t *args, struct qmp_error *e)
{
	char err[RUN_ERR_MAX];
	int ret = run_cancel(opaque, err, sizeof(err));

	/* As QEMU: cancelling when nothing runs is no error. */
	if (ret && ret != -ENOENT)
		return qmp_fail(e, "%s", err);
	return json_object();
}

static json_t *qmp_do_migrate_incoming(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	json_t *uri = json_object_get(args, "uri"), *eoe = json_object_get(args, "exit-on-error");
	char err[RUN_ERR_MAX];

	if (!uri)
		return qmp_fail(e, "Parameter '%s' is missing", "uri");
	if (!json_is_string(uri))
		return qmp_fail(e, "Invalid parameter type for '%s', expected: string", "uri");
	if (eoe && !json_is_boolean(eoe))
		return qmp_fail(e, "Invalid parameter type for '%s', expected: boolean", "exit-on-error");
	if (!rs->dest)
		return qmp_fail(e, "%s", "'-incoming' was not specified on the command line");
	if (run_incoming(rs, json_string_value(uri), !eoe || json_is_true(eoe), err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	return json_object();
}

/* ---- parameters and capabilities ---- */

/* QEMU's value of @q from godwit's values @v (the capabilities decide some). */
static json_t *param_value(const struct run_state *rs, const struct qemu_param *q, const int64_t *v)
{
	int64_t x = v[q->p];

	switch (q->p) {
	case GW_PARAM_XBZRLE_CACHE_BYTES:
		x = x ? x : __atomic_load_n(&rs->qemu.xbzrle_cache_bytes, __ATOMIC_RELAXED);
		break;
	case GW_PARAM_CHANNELS:
		x = x > 1 ? x : __atomic_load_n(&rs->qemu.multifd_channels, __ATOMIC_RELAXED);
		break;
	case GW_PARAM_DIRTY_LIMIT_BPS:
		x = x ? x : __atomic_load_n(&rs->qemu.dirty_limit_bps, __ATOMIC_RELAXED);
		break;
	default:
		break;
	}
	if (q->kind == QEMU_BOOL)
		return json_boolean(x);
	if (q->kind == QEMU_CODEC)
		return json_string(gw_codec_name((enum gw_codec_id)x));
	return json_integer(x / q->scale);
}

static json_t *qmp_do_query_migrate_parameters(void *opaque, json_t *args, struct qmp_error *e)
{
	int64_t v[GW_PARAM__COUNT];
	json_t *o = json_object();

	run_params_now(opaque, v);
	for (const struct qemu_param *q = qemu_params; o && q->name; q++)
		json_object_set_new(o, q->name, param_value(opaque, q, v));
	if (o) {
		qmp_announce_query(opaque, o);
		qmp_tls_query(opaque, o);
	}
	return o;
}

/* What a QMP request changes: godwit parameters, and QEMU's values kept while a capability is off. */
struct qemu_change {
	struct cli_params ps;
	struct run_qemu_caps caps;
};

/* QEMU value @j of @q into godwit's units (checked). 0, or -1 with @e set. */
static int param_from_json(const struct qemu_param *q, json_t *j, int64_t *out, struct qmp_error *e)
{
	const struct gw_param_info *pi = gw_param_info(q->p);
	char err[256];
	int64_t x;

	if (q->kind == QEMU_BOOL) {
		if (!json_is_boolean(j))
			goto type;
		*out = json_is_true(j);
		return 0;
	}
	if (q->kind == QEMU_CODEC) {
		if (!json_is_string(j))
			goto type;
		if (cli_parse_param_value(q->p, json_string_value(j), out, err, sizeof(err))) {
			qmp_error_set(e, "GenericError", "Parameter '%s' does not accept value '%s'",
				      q->name, json_string_value(j));
			return -1;
		}
		return 0;
	}
	if (!json_is_integer(j))
		goto type;
	x = json_integer_value(j);
	if (x < 0 || (q->scale > 1 && x > INT64_MAX / q->scale) || x * q->scale < pi->min ||
	    x * q->scale > pi->max) {
		qmp_error_set(e, "GenericError", "Parameter '%s' expects a value in [%" PRId64 ", %" PRId64
			      "] (%s)", q->name, (pi->min + q->scale - 1) / q->scale, pi->max / q->scale,
			      q->unit[0] ? q->unit : "no unit");
		return -1;
	}
	*out = x * q->scale;
	return 0;
type:
	/* QEMU's words: "expects uint64" for its integers. */
	qmp_error_set(e, "GenericError", "Parameter '%s' expects %s", q->name,
		      q->kind == QEMU_BOOL ? "bool" : q->kind == QEMU_CODEC ? "string" : "uint64");
	return -1;
}

static json_t *qmp_do_migrate_set_parameters(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	struct qemu_change ch = { .ps = { 0 } };
	struct qmp_announce_change ann;
	struct run_qemu_tls names;
	int64_t now[GW_PARAM__COUNT], x;
	int ret;
	char err[RUN_ERR_MAX];
	const char *key;
	bool live;
	json_t *j;

	run_params_now(rs, now);
	ch.caps = rs->qemu;
	qmp_announce_change_init(rs, &ann);
	qmp_tls_names(rs, &names);
	json_object_foreach(args, key, j) {
		const struct qemu_param *q = qemu_param_by_name(key);

		ret = qmp_announce_take(&ann, key, j, e);	/* announce-*: the VM's */
		if (!ret)
			ret = qmp_tls_take(rs, &ch.ps, &names, key, j, e);
		if (ret < 0)
			return NULL;
		if (ret)
			continue;
		if (!q && qmp_in_list(qemu_params_missing, key))
			return qmp_fail(e, "Parameter '%s' is not supported by godwit", key);
		if (!q)
			return qmp_fail(e, "Parameter '%s' is unexpected", key);
		if (param_from_json(q, j, &x, e))
			return NULL;
		/* Sizes and counts of a capability that is off are kept for when it is turned on. */
		if (q->p == GW_PARAM_XBZRLE_CACHE_BYTES && !now[q->p]) {
			ch.caps.xbzrle_cache_bytes = x;
			continue;
		}
		if (q->p == GW_PARAM_CHANNELS && now[q->p] <= 1) {
			ch.caps.multifd_channels = x;
			continue;
		}
		if (q->p == GW_PARAM_DIRTY_LIMIT_BPS && !now[q->p]) {
			ch.caps.dirty_limit_bps = x;
			continue;
		}
		cli_params_put(&ch.ps, q->p, x);
	}
	if (qmp_announce_check(&ann, e))
		return NULL;
	if (cli_params_count(&ch.ps) && run_set(rs, &ch.ps, &live, err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	if (qmp_announce_apply(rs, &ann, e))
		return NULL;
	qmp_tls_commit(rs, &names);
	pthread_mutex_lock(&rs->lock);
	rs->qemu.xbzrle_cache_bytes = ch.caps.xbzrle_cache_bytes;
	rs->qemu.multifd_channels = ch.caps.multifd_channels;
	rs->qemu.dirty_limit_bps = ch.caps.dirty_limit_bps;
	pthread_mutex_unlock(&rs->lock);
	return json_object();
}

/* State of capability @name from godwit's values @v. */
static bool cap_state(const struct run_state *rs, const char *name, const int64_t *v)
{
	if (!strcmp(name, "events"))
		return __atomic_load_n(&rs->qemu.events, __ATOMIC_RELAXED);
	if (!strcmp(name, "xbzrle"))
		return v[GW_PARAM_XBZRLE_CACHE_BYTES] > 0;
	if (!strcmp(name, "auto-converge"))
		return v[GW_PARAM_AUTO_CONVERGE] != 0;
	if (!strcmp(name, "multifd"))
		return v[GW_PARAM_CHANNELS] > 1;
	if (!strcmp(name, "dirty-limit"))
		return v[GW_PARAM_DIRTY_LIMIT_BPS] > 0;
	if (!strcmp(name, "postcopy-ram"))
		return v[GW_PARAM_POSTCOPY] != 0;
	if (!strcmp(name, "pause-before-switchover"))
		return v[GW_PARAM_PAUSE_BEFORE_SWITCHOVER] != 0;
	return false;
}

static json_t *qmp_do_query_migrate_capabilities(void *opaque, json_t *args, struct qmp_error *e)
{
	int64_t v[GW_PARAM__COUNT];
	json_t *a = json_array();

	run_params_now(opaque, v);
	for (const struct qemu_cap *c = qemu_caps; a && c->name; c++)
		json_array_append_new(a, json_pack("{s:s,s:b}", "capability", c->name, "state",
						   cap_state(opaque, c->name, v)));
	return a;
}

/* Capability @name to @on into @ch (godwit's values now in @v). 0, or -1 with @e set. */
static int cap_apply(struct run_state *rs, const char *name, bool on, const int64_t *v,
		     struct qemu_change *ch, struct qmp_error *e)
{
	const struct qemu_cap *c = qemu_cap_by_name(name);

	if (!c && qmp_in_list(qemu_caps_missing, name)) {
		if (on) {
			qmp_error_set(e, "GenericError", "Capability '%s' is not supported by godwit", name);
			return -1;
		}
		return 0;
	}
	if (!c) {
		qmp_error_set(e, "GenericError", "Parameter 'capability' does not accept value '%s'", name);
		return -1;
	}
	if (c->missing) {
		if (on) {
			qmp_error_set(e, "GenericError", "%s", c->missing);
			return -1;
		}
		return 0;
	}
	if (!strcmp(name, "events")) {
		ch->caps.events = on;
	} else if (!strcmp(name, "xbzrle")) {
		if (on != cap_state(rs, name, v))
			cli_params_put(&ch->ps, GW_PARAM_XBZRLE_CACHE_BYTES, on ? ch->caps.xbzrle_cache_bytes : 0);
		if (!on && v[GW_PARAM_XBZRLE_CACHE_BYTES])
			ch->caps.xbzrle_cache_bytes = v[GW_PARAM_XBZRLE_CACHE_BYTES];
	} else if (!strcmp(name, "auto-converge")) {
		cli_params_put(&ch->ps, GW_PARAM_AUTO_CONVERGE, on);
	} else if (!strcmp(name, "postcopy-ram")) {
		cli_params_put(&ch->ps, GW_PARAM_POSTCOPY, on);
	} else if (!strcmp(name, "pause-before-switchover")) {
		cli_params_put(&ch->ps, GW_PARAM_PAUSE_BEFORE_SWITCHOVER, on);
	} else if (!strcmp(name, "multifd")) {
		if (on != cap_state(rs, name, v))
			cli_params_put(&ch->ps, GW_PARAM_CHANNELS, on ? ch->caps.multifd_channels : 1);
		if (!on && v[GW_PARAM_CHANNELS] > 1)
			ch->caps.multifd_channels = v[GW_PARAM_CHANNELS];
	} else if (!strcmp(name, "dirty-limit")) {
		if (on != cap_state(rs, name, v))
			cli_params_put(&ch->ps, GW_PARAM_DIRTY_LIMIT_BPS, on ? ch->caps.dirty_limit_bps : 0);
		if (!on && v[GW_PARAM_DIRTY_LIMIT_BPS])
			ch->caps.dirty_limit_bps = v[GW_PARAM_DIRTY_LIMIT_BPS];
	}
	return 0;
}

static json_t *qmp_do_migrate_set_capabilities(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	json_t *caps = json_object_get(args, "capabilities"), *c;
	struct qemu_change ch = { .ps = { 0 } };
	int64_t v[GW_PARAM__COUNT];
	char err[RUN_ERR_MAX];
	bool live;
	size_t i;

	if (!caps)
		return qmp_fail(e, "Parameter '%s' is missing", "capabilities");
	if (!json_is_array(caps))
		return qmp_fail(e, "Invalid parameter type for '%s', expected: array", "capabilities");
	if (__atomic_load_n(&rs->migrating, __ATOMIC_ACQUIRE))
		return qmp_fail(e, "%s", "There's a migration process in progress");
	run_params_now(rs, v);
	pthread_mutex_lock(&rs->lock);
	ch.caps = rs->qemu;
	pthread_mutex_unlock(&rs->lock);
	json_array_foreach(caps, i, c) {
		json_t *name = json_object_get(c, "capability"), *state = json_object_get(c, "state");

		if (!json_is_string(name) || !json_is_boolean(state))
			return qmp_fail(e, "%s", "Invalid parameter type for 'capabilities', expected: "
				    "{\"capability\": string, \"state\": boolean}");
		if (cap_apply(rs, json_string_value(name), json_is_true(state), v, &ch, e))
			return NULL;
	}
	if (ch.ps.nr && run_set(rs, &ch.ps, &live, err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	pthread_mutex_lock(&rs->lock);
	__atomic_store_n(&rs->qemu.events, ch.caps.events, __ATOMIC_RELAXED);
	rs->qemu.xbzrle_cache_bytes = ch.caps.xbzrle_cache_bytes;
	rs->qemu.multifd_channels = ch.caps.multifd_channels;
	rs->qemu.dirty_limit_bps = ch.caps.dirty_limit_bps;
	pthread_mutex_unlock(&rs->lock);
	return json_object();
}

/* ---- the table ---- */

static const char *const no_args[] = { NULL };
static const char *const caps_args[] = { "enable", NULL };
static const char *const migrate_args[] = { "uri", "blk", "inc", "detach", "resume", NULL };
static const char *const incoming_args[] = { "uri", "exit-on-error", NULL };
static const char *const set_caps_args[] = { "capabilities", NULL };
static const char *const id_args[] = { "id", NULL };
static const char *const uri_args[] = { "uri", NULL };
static const char *const continue_args[] = { "state", NULL };
static const char *const fd_args[] = { "fdname", NULL };
static const char *const announce_args[] = { "initial", "max", "rounds", "step", "interfaces",
					     "id", NULL };
static const char *const set_params_args[] = {
	/* Checked by the command itself: QEMU's names, known or not to godwit. */
	"*", NULL,
};

static const struct qmp_command qmp_table[] = {
	{ "qmp_capabilities", qmp_do_qmp_capabilities, caps_args },
	{ "query-version", qmp_do_query_version, no_args },
	{ "query-commands", qmp_do_query_commands, no_args },
	{ "query-status", qmp_do_query_status, no_args },
	{ "query-migrate", qmp_do_query_migrate, no_args },
	{ "migrate", qmp_do_migrate, migrate_args },
	{ "migrate_cancel", qmp_do_migrate_cancel, no_args },
	{ "migrate-incoming", qmp_do_migrate_incoming, incoming_args },
	{ "migrate-start-postcopy", qmp_do_migrate_start_postcopy, no_args },
	{ "migrate-recover", qmp_do_migrate_recover, uri_args },
	{ "migrate-pause", qmp_do_migrate_pause, no_args },
	{ "migrate-continue", qmp_do_migrate_continue, continue_args },
	{ "object-add", qmp_do_object_add, set_params_args },
	{ "object-del", qmp_do_object_del, id_args },
	{ "getfd", qmp_do_getfd, fd_args },
	{ "closefd", qmp_do_closefd, fd_args },
	{ "migrate-set-parameters", qmp_do_migrate_set_parameters, set_params_args },
	{ "query-migrate-parameters", qmp_do_query_migrate_parameters, no_args },
	{ "migrate-set-capabilities", qmp_do_migrate_set_capabilities, set_caps_args },
	{ "query-migrate-capabilities", qmp_do_query_migrate_capabilities, no_args },
	{ "announce-self", qmp_do_announce_self, announce_args },
	{ "stop", qmp_do_stop, no_args },
	{ "cont", qmp_do_cont, no_args },
	{ "quit", qmp_do_quit, no_args },
	{ NULL, NULL, NULL },
};

/* ---- events ---- */

struct qmp_sink {
	struct run_state *rs;
	struct qmp_server *srv;
	const char *last;		/* hub lock: the last MIGRATION status sent */
	enum gw_status last_status;	/* hub lock: the last status seen */
};

static bool qmp_sink(void *opaque, const struct run_event *ev)
{
	struct qmp_sink *k = opaque;
	bool events = __atomic_load_n(&k->rs->qemu.events, __ATOMIC_RELAXED);
	enum gw_status prev = k->last_status;
	const char *st;

	switch (ev->type) {
	case RUN_EV_STATUS:
		st = qemu_status_name(ev->status);
		if (events && (!k->last || strcmp(k->last, st))) {
			json_t *d = json_pack("{s:s}", "status", st);

			qmp_server_event(k->srv, "MIGRATION", d);
			json_decref(d);
		}
		k->last = st;
		/* The VM stops for the switchover here (at pre-switchover when it waits there),
		 * and runs there once it arrived. */
		if (ev->role == GW_ROLE_SOURCE && (ev->status == GW_STATUS_PRE_SWITCHOVER ||
		    (ev->status == GW_STATUS_DEVICE && prev != GW_STATUS_PRE_SWITCHOVER)))
			qmp_server_event(k->srv, "STOP", NULL);
		k->last_status = ev->status;
		if (ev->role == GW_ROLE_DEST && ev->status == GW_STATUS_COMPLETED)
			qmp_server_event(k->srv, "RESUME", NULL);
		break;
	case RUN_EV_ROUND:
		if (events && ev->role == GW_ROLE_SOURCE) {
			json_t *d = json_pack("{s:I}", "pass", (json_int_t)ev->round + 1);

			qmp_server_event(k->srv, "MIGRATION_PASS", d);
			json_decref(d);
		}
		break;
	case RUN_EV_VM:
		qmp_server_event(k->srv, ev->vm_status && !strcmp(ev->vm_status, "running") ?
				 "RESUME" : "STOP", NULL);
		break;
	}
	return true;
}

struct run_qmp {
	struct qmp_server *srv;
	struct qmp_sink *sink;		/* owned by the hub once added */
};

struct run_qmp *run_qmp_start(struct run_state *rs, const char *path, char *err, size_t err_len)
{
	struct run_qmp *q = calloc(1, sizeof(*q));
	struct qmp_sink *k = calloc(1, sizeof(*k));
	json_t *version = version_object(), *g = NULL;

	if (!q || !k || !version || !(g = json_pack("{s:O,s:[]}", "version", version, "capabilities"))) {
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	q->srv = qmp_server_start(path, qmp_table, rs, g, err, err_len);
	if (!q->srv)
		goto fail;
	k->rs = rs;
	k->srv = q->srv;
	if (run_events_add(rs->events, qmp_sink, k, free)) {
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	q->sink = k;
	json_decref(g);
	json_decref(version);
	return q;
fail:
	qmp_server_stop(q ? q->srv : NULL);
	free(k);
	free(q);
	json_decref(g);
	json_decref(version);
	return NULL;
}

void run_qmp_stop(struct run_state *rs, struct run_qmp *q)
{
	if (!q)
		return;
	/* The sink goes first: no event may reach a stopped server. */
	run_events_remove(rs->events, q->sink);
	qmp_server_stop(q->srv);
	free(q);
}
