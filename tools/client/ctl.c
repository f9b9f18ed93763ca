/* SPDX-License-Identifier: MIT */
/*
 * Where `godwit migrate` and `godwit status` send their requests (cli.h,
 * struct cli_ctl): the godwit API socket (one request per connection), or
 * a QMP socket, godwit's or QEMU's, through qmp_client.c. Over QMP godwit's
 * parameters go by QEMU's names and units (qemu_names.c) and some become
 * capabilities (xbzrle, multifd, auto-converge, dirty-limit); QEMU's
 * answers are read back into the status object of docs/api.md.
 */
#include "client/client.h"
#include "common/qemu_names.h"
#include "client/qmp_client.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/*
 * A source whose migration completed is paused (QEMU: finish-migrate) for
 * a moment before postmigrate: its status is not settled for at most this
 * many polls, so that the report names the state it stays in.
 */
#define QMP_SETTLE_POLLS 50

struct cli_ctl {
	bool qmp;
	char path[PATH_MAX];
	char name[PATH_MAX + 32];
	struct qmpc *q;			/* QMP: the connection */
	unsigned unsettled_polls;	/* QMP: completed, the source not postmigrate yet */
};

struct cli_ctl *cli_ctl_open(const char *path, bool qmp, char *err, size_t err_len)
{
	struct cli_ctl *c = calloc(1, sizeof(*c));

	if (!c) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	c->qmp = qmp;
	snprintf(c->path, sizeof(c->path), "%s", path);
	snprintf(c->name, sizeof(c->name), "the %s at %s", qmp ? "QMP socket" : "API", path);
	if (qmp) {
		c->q = qmpc_open(path, err, err_len);
		if (!c->q) {
			free(c);
			return NULL;
		}
	}
	return c;
}

void cli_ctl_close(struct cli_ctl *c)
{
	if (!c)
		return;
	qmpc_close(c->q);
	free(c);
}

const char *cli_ctl_name(const struct cli_ctl *c)
{
	return c->name;
}

/* ---- QMP ---- */

/* godwit's VM state name for QEMU's run state. */
static const char *vm_status_of(const char *runstate)
{
	if (!strcmp(runstate, "inmigrate"))
		return "incoming";
	if (!strcmp(runstate, "prelaunch"))
		return "created";
	return runstate;
}

/* tcp:HOST:PORT or unix:PATH of QEMU's first SocketAddress, into @buf ("" when none). */
static void url_of(const json_t *mig, char *buf, size_t len)
{
	const json_t *a = json_array_get(js_get(mig, "socket-address"), 0);
	const char *type = js_str(js_get(a, "type"), "");

	buf[0] = '\0';
	if (!strcmp(type, "inet"))
		snprintf(buf, len, "tcp:%s:%s", js_str(js_get(a, "host"), "?"), js_str(js_get(a, "port"), "?"));
	else if (!strcmp(type, "unix"))
		snprintf(buf, len, "unix:%s", js_str(js_get(a, "path"), "?"));
}

static int qmp_status(struct cli_ctl *c, json_t **out, char *err, size_t err_len)
{
	static const char *const copied[] = {
		"total-time", "setup-time", "downtime", "expected-downtime", "ram",
		"cpu-throttle-percentage", "error-desc", NULL,
	};
	json_t *mig = NULL, *run = NULL, *o;
	char url[PATH_MAX + 16];
	const char *vs;
	bool source;
	int r;

	r = qmpc_execute(c->q, "query-migrate", NULL, &mig, err, err_len);
	if (!r)
		r = qmpc_execute(c->q, "query-status", NULL, &run, err, err_len);
	o = r ? NULL : json_object();
	if (!o) {
		json_decref(mig);
		json_decref(run);
		return r ? r : -ENOMEM;
	}
	url_of(mig, url, sizeof(url));
	js_set_str(o, "status", js_str(js_get(mig, "status"), "none"));
	for (const char *const *k = copied; *k; k++)
		if (js_get(mig, *k))
			json_object_set(o, *k, js_get(mig, *k));
	source = !url[0] && strcmp(js_str(js_get(run, "status"), ""), "inmigrate");
	vs = vm_status_of(js_str(js_get(run, "status"), "?"));
	js_set_str(o, "role", source ? "source" : "destination");
	js_set_str(o, "vm-status", vs);
	if (url[0])
		js_set_str(o, "incoming-url", url);
	if (source && cli_status_is(o, GW_STATUS_COMPLETED) &&
	    (!strcmp(vs, "paused") || !strcmp(vs, "finish-migrate")) && c->unsettled_polls++ < QMP_SETTLE_POLLS)
		json_object_set_new(o, "settled", json_false());
	json_decref(mig);
	json_decref(run);
	*out = o;
	return 0;
}

/* QMP capability @name to @on. */
static int set_cap(struct cli_ctl *c, const char *name, bool on, char *err, size_t err_len)
{
	json_t *a = json_pack("{s:[{s:s,s:b}]}", "capabilities", "capability", name, "state", on);

	return qmpc_execute(c->q, "migrate-set-capabilities", a, NULL, err, err_len);
}

/*
 * godwit's @ps as QEMU's capabilities and parameters, set on the QMP
 * server. A parameter QEMU has no name for is refused before anything is
 * sent.
 */
static int qmp_apply_params(struct cli_ctl *c, const struct cli_params *ps, bool caps_too,
			    char *err, size_t err_len)
{
	json_t *params = json_object();
	int64_t codec = -1, level = 0;
	int r = 0;

	if (!params)
		return -ENOMEM;
	for (unsigned i = 0; i < GW_SPARAM__COUNT; i++) {
		if (ps->str_set[i]) {	/* QEMU's tls-creds names an object, not a directory */
			snprintf(err, err_len, "%s cannot be set over QMP: give it to 'godwit run' or use --api",
				 gw_str_param_name((enum gw_str_param)i));
			r = -EINVAL;
			goto out;
		}
	}
	for (unsigned i = 0; i < ps->nr; i++) {
		enum gw_param p = ps->v[i].p;
		int64_t v = ps->v[i].value;
		const struct qemu_param *q = qemu_param_of(p);

		if (!q && p != GW_PARAM_AUTO_CONVERGE && p != GW_PARAM_POSTCOPY) {
			snprintf(err, err_len, "%s has no QEMU name: it cannot be set over QMP (use --api)",
				 gw_param_info(p)->name);
			r = -EINVAL;
			goto out;
		}
		if (p == GW_PARAM_COMPRESS)
			codec = v;
		if (p == GW_PARAM_COMPRESS_LEVEL) {
			level = v;
			continue;
		}
		if (p == GW_PARAM_CHANNELS || p == GW_PARAM_XBZRLE_CACHE_BYTES ||
		    p == GW_PARAM_AUTO_CONVERGE || p == GW_PARAM_DIRTY_LIMIT_BPS || p == GW_PARAM_POSTCOPY) {
			const char *cap = p == GW_PARAM_CHANNELS ? "multifd" :
					  p == GW_PARAM_XBZRLE_CACHE_BYTES ? "xbzrle" :
					  p == GW_PARAM_AUTO_CONVERGE ? "auto-converge" :
					  p == GW_PARAM_POSTCOPY ? "postcopy-ram" : "dirty-limit";
			bool on = p == GW_PARAM_CHANNELS ? v > 1 : v > 0;

			if (!caps_too && on) {
				snprintf(err, err_len, "%s turns QEMU's capability '%s' on: not while migrating",
					 gw_param_info(p)->name, cap);
				r = -EINVAL;
				goto out;
			}
			if (caps_too) {
				r = set_cap(c, cap, on, err, err_len);
				if (r)
					goto out;
			}
			if (!on || p == GW_PARAM_AUTO_CONVERGE || p == GW_PARAM_POSTCOPY)
				continue;
			if (p == GW_PARAM_DIRTY_LIMIT_BPS)
				v += q->scale - 1;	/* QEMU takes whole MiB/s: round up */
		}
		if (q->kind == QEMU_BOOL)
			json_object_set_new(params, q->name, json_boolean(v));
		else if (q->kind == QEMU_CODEC)
			json_object_set_new(params, q->name, json_string(gw_codec_name((enum gw_codec_id)v)));
		else
			json_object_set_new(params, q->name, json_integer(v / q->scale));
	}
	if (level)
		json_object_set_new(params, codec == GW_CODEC_ZLIB ? "multifd-zlib-level" :
				    "multifd-zstd-level", json_integer(level));
	if (json_object_size(params))
		r = qmpc_execute(c->q, "migrate-set-parameters", json_incref(params), NULL, err, err_len);
out:
	json_decref(params);
	return r;
}

/* ---- the operations ---- */

int cli_ctl_status(struct cli_ctl *c, json_t **st, char *err, size_t err_len)
{
	*st = NULL;
	if (c->qmp)
		return qmp_status(c, st, err, err_len);
	return cli_api(c->path, "status", st, err, err_len);
}

int cli_ctl_migrate(struct cli_ctl *c, const char *url, const struct cli_params *ps,
		    char *err, size_t err_len)
{
	json_t *reply = NULL;
	char *line;
	int r;

	if (c->qmp) {
		r = qmp_apply_params(c, ps, true, err, err_len);
		return r ? r : qmpc_execute(c->q, "migrate", json_pack("{s:s}", "uri", url), NULL,
					    err, err_len);
	}
	line = cli_params_line("migrate", url, ps);
	if (!line) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	r = cli_api(c->path, line, &reply, err, err_len);
	free(line);
	json_decref(reply);
	return r;
}

/* Whether the status says a migration runs (a cancel has something to cancel). */
static bool running(const json_t *st)
{
	const char *s = js_str(js_get(st, "status"), "none");

	return strcmp(s, "none") && !cli_status_is(st, GW_STATUS_COMPLETED) &&
	       !cli_status_is(st, GW_STATUS_FAILED) && !cli_status_is(st, GW_STATUS_CANCELLED) &&
	       !cli_status_is(st, GW_STATUS_UNKNOWN);
}

int cli_ctl_cancel(struct cli_ctl *c, char *err, size_t err_len)
{
	json_t *reply = NULL, *st = NULL;
	int r;

	if (c->qmp) {
		r = qmp_status(c, &st, err, err_len);
		if (!r && !running(st)) {
			snprintf(err, err_len, "no migration is running");
			r = -ENOENT;
		}
		json_decref(st);
		return r ? r : qmpc_execute(c->q, "migrate_cancel", NULL, NULL, err, err_len);
	}
	r = cli_api(c->path, "cancel", &reply, err, err_len);
	json_decref(reply);
	if (r == -EINVAL && strstr(err, "no migration is running"))
		r = -ENOENT;
	return r;
}

int cli_ctl_set(struct cli_ctl *c, const struct cli_params *ps, char *applied, size_t applied_len,
		char *err, size_t err_len)
{
	json_t *reply = NULL, *st = NULL;
	char *line;
	int r;

	if (c->qmp) {
		bool now;

		r = qmp_status(c, &st, err, err_len);
		now = !r && running(st);
		json_decref(st);
		if (!r)
			r = qmp_apply_params(c, ps, !now, err, err_len);
		snprintf(applied, applied_len, "%s", now ? "now" : "next-migration");
		return r;
	}
	line = cli_params_line("set", NULL, ps);
	if (!line) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	r = cli_api(c->path, line, &reply, err, err_len);
	free(line);
	snprintf(applied, applied_len, "%s", js_str(js_get(reply, "applied"), "?"));
	json_decref(reply);
	return r;
}

int cli_ctl_incoming(struct cli_ctl *c, const char *url, char *bound, size_t bound_len,
		     char *err, size_t err_len)
{
	json_t *reply = NULL, *mig = NULL;
	char *line;
	int r;

	if (c->qmp) {
		r = qmpc_execute(c->q, "migrate-incoming", json_pack("{s:s}", "uri", url), NULL, err, err_len);
		if (!r)
			r = qmpc_execute(c->q, "query-migrate", NULL, &mig, err, err_len);
		if (!r)
			url_of(mig, bound, bound_len);
		if (!r && !bound[0])
			snprintf(bound, bound_len, "%s", url);
		json_decref(mig);
		return r;
	}
	if (asprintf(&line, "incoming url=%s", url) < 0) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	r = cli_api(c->path, line, &reply, err, err_len);
	free(line);
	snprintf(bound, bound_len, "%s", js_str(js_get(reply, "url"), url));
	json_decref(reply);
	return r;
}

int cli_ctl_start_postcopy(struct cli_ctl *c, char *err, size_t err_len)
{
	json_t *reply = NULL;
	int r;

	if (c->qmp)
		return qmpc_execute(c->q, "migrate-start-postcopy", NULL, NULL, err, err_len);
	r = cli_api(c->path, "start-postcopy", &reply, err, err_len);
	json_decref(reply);
	return r;
}

int cli_ctl_postcopy_reconnect(struct cli_ctl *c, bool recover, const char *url, char *bound,
			       size_t bound_len, char *err, size_t err_len)
{
	json_t *reply = NULL;
	char *line;
	int r;

	snprintf(bound, bound_len, "%s", url);
	if (c->qmp) {
		/* QEMU: migrate-recover on the destination, migrate with resume on the source. */
		if (recover)
			return qmpc_execute(c->q, "migrate-recover", json_pack("{s:s}", "uri", url), NULL,
					    err, err_len);
		return qmpc_execute(c->q, "migrate", json_pack("{s:s,s:b}", "uri", url, "resume", 1), NULL,
				    err, err_len);
	}
	if (asprintf(&line, "%s url=%s", recover ? "recover" : "resume", url) < 0) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	r = cli_api(c->path, line, &reply, err, err_len);
	free(line);
	if (!r)
		snprintf(bound, bound_len, "%s", js_str(js_get(reply, "url"), url));
	json_decref(reply);
	return r;
}
