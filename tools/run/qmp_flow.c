/* SPDX-License-Identifier: MIT */
/*
 * The QMP commands of the flow libvirt drives on every migration (see
 * qmp_flow.h, docs/qmp.md): QEMU's TLS objects mapped onto godwit's TLS
 * string parameters (an x509 object's dir is godwit's tls-creds, a PSK
 * object's dir/keys.psk its tls-psk, an authz-simple's identity its
 * tls-authz), postcopy and its recovery on run_ops.c, and the continue of
 * pause-before-switchover. Every refusal is QEMU's GenericError with the
 * reason; nothing is started or changed by a refused command.
 */
#include "run/qmp_flow.h"
#include "common/json.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

json_t *qmp_fail(struct qmp_error *e, const char *fmt, ...)
{
	va_list ap;

	e->cls = "GenericError";
	va_start(ap, fmt);
	vsnprintf(e->desc, sizeof(e->desc), fmt, ap);
	va_end(ap);
	return NULL;
}

/* A string argument @name of @args: the value, or NULL with @e set (@need: missing is an error). */
static const char *str_arg(json_t *args, const char *name, bool need, bool *given, struct qmp_error *e)
{
	json_t *j = json_object_get(args, name);

	*given = j != NULL;
	if (!j && need)
		qmp_fail(e, "Parameter '%s' is missing", name);
	else if (j && !json_is_string(j))
		qmp_fail(e, "Invalid parameter type for '%s', expected: string", name);
	else
		return j ? json_string_value(j) : "";
	return NULL;
}

static struct run_qemu_obj *obj_find(struct run_state *rs, const char *id)
{
	for (unsigned i = 0; id[0] && i < RUN_QEMU_OBJS_MAX; i++)
		if (!strcmp(rs->qtls.obj[i].id, id))
			return &rs->qtls.obj[i];
	return NULL;
}

/* QEMU's names of each type's properties; anything else is "unexpected". */
static const char *const x509_props[] = { "qom-type", "id", "dir", "endpoint", "verify-peer",
					  "sanity-check", "priority", NULL };
static const char *const psk_props[] = { "qom-type", "id", "dir", "endpoint", "username",
					 "priority", NULL };
static const char *const authz_props[] = { "qom-type", "id", "identity", NULL };

bool qmp_in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

/* The creds' endpoint and dir into @o: 0, or -1 with @e set. */
static int creds_props(json_t *args, struct run_qemu_obj *o, bool psk, struct qmp_error *e)
{
	json_t *vp = json_object_get(args, "verify-peer");
	const char *dir, *ep;
	bool given;

	if (!(dir = str_arg(args, "dir", false, &given, e)) || !(ep = str_arg(args, "endpoint", false, &given, e)))
		return -1;
	if (given && strcmp(ep, "client") && strcmp(ep, "server")) {
		qmp_fail(e, "Parameter 'endpoint' does not accept value '%s'", ep);
		return -1;
	}
	o->server = !strcmp(ep, "server");	/* QEMU's default: client */
	if (vp && !json_is_boolean(vp)) {
		qmp_fail(e, "Invalid parameter type for '%s', expected: boolean", "verify-peer");
		return -1;
	}
	if (json_is_false(vp)) {
		qmp_fail(e, "%s", "verify-peer false is not supported by godwit: both sides always verify "
		     "the peer (mutual TLS)");
		return -1;
	}
	if (json_object_get(args, "username")) {
		qmp_fail(e, "%s", "Parameter 'username' is not supported by godwit: the source presents the "
		     "first identity of keys.psk");
		return -1;
	}
	if (!dir[0] || strpbrk(dir, " \t\r\n") ||
	    snprintf(o->value, sizeof(o->value), "%s%s", dir, psk ? "/keys.psk" : "") >= (int)sizeof(o->value)) {
		qmp_fail(e, "Parameter 'dir' expects a path without blanks, shorter than %d bytes",
		     GW_SPARAM_MAX_BYTES - 10);
		return -1;
	}
	/* As QEMU, a missing directory or key file fails here, not at the migration. */
	if (access(o->value, R_OK)) {
		qmp_fail(e, "Unable to access credentials %s: %s", o->value, strerror(errno));
		return -1;
	}
	return 0;
}

json_t *qmp_do_getfd(void *opaque, json_t *args, struct qmp_error *e)
{
	return qmp_fail(e, "%s", "No file descriptor supplied via SCM_RIGHTS: godwit does not take file "
			"descriptors over QMP (fd: URIs are not supported; use tcp: or unix:)");
}

json_t *qmp_do_closefd(void *opaque, json_t *args, struct qmp_error *e)
{
	const char *name;
	bool given;

	if (!(name = str_arg(args, "fdname", true, &given, e)))
		return NULL;
	return qmp_fail(e, "File descriptor named '%.64s' not found", name);
}

json_t *qmp_do_object_add(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	struct run_qemu_obj o = { .type = NULL }, *slot = NULL;
	const char *type, *id, *key, *ident;
	const char *const *props;
	bool given;
	json_t *j;

	if (!(type = str_arg(args, "qom-type", true, &given, e)) || !(id = str_arg(args, "id", true, &given, e)))
		return NULL;
	if (!strcmp(type, "tls-creds-x509"))
		props = x509_props, o.type = "tls-creds-x509";
	else if (!strcmp(type, "tls-creds-psk"))
		props = psk_props, o.type = "tls-creds-psk";
	else if (!strcmp(type, "authz-simple"))
		props = authz_props, o.type = "authz-simple";
	else
		return qmp_fail(e, "Parameter 'qom-type' does not accept value '%s' (godwit has tls-creds-x509, "
			    "tls-creds-psk, authz-simple)", type);
	json_object_foreach(args, key, j)
		if (!qmp_in_list(props, key))
			return qmp_fail(e, "Parameter '%s' is unexpected", key);
	if (!id[0] || strlen(id) >= RUN_QEMU_ID_MAX || strpbrk(id, " \t\r\n/"))
		return qmp_fail(e, "Parameter 'id' expects an identifier (1 to %d characters, no blanks)",
			    RUN_QEMU_ID_MAX - 1);
	if (o.type[0] == 'a') {
		if (!(ident = str_arg(args, "identity", true, &given, e)))
			return NULL;
		if (!ident[0] || strlen(ident) >= sizeof(o.value) || strpbrk(ident, " \t\r\n,"))
			return qmp_fail(e, "%s", "Parameter 'identity' expects one name without blanks or commas");
		snprintf(o.value, sizeof(o.value), "%s", ident);
	} else if (creds_props(args, &o, !strcmp(type, "tls-creds-psk"), e)) {
		return NULL;
	}
	snprintf(o.id, sizeof(o.id), "%s", id);
	pthread_mutex_lock(&rs->lock);
	for (unsigned i = 0; !obj_find(rs, id) && !slot && i < RUN_QEMU_OBJS_MAX; i++)
		if (!rs->qtls.obj[i].id[0])
			slot = &rs->qtls.obj[i];
	if (slot)
		*slot = o;
	pthread_mutex_unlock(&rs->lock);
	if (!slot)
		return obj_find(rs, id) ? qmp_fail(e, "attempt to add duplicate property '%s' to object (type "
					       "'container')", id) :
			qmp_fail(e, "godwit keeps at most %d objects: object-del one first", RUN_QEMU_OBJS_MAX);
	gw_log(GW_LOG_INFO, "cli", "object_add", "type=%s", o.type);
	return json_object();
}

json_t *qmp_do_object_del(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	struct run_qemu_obj *o;
	const char *id;
	bool given, busy;

	if (!(id = str_arg(args, "id", true, &given, e)))
		return NULL;
	pthread_mutex_lock(&rs->lock);
	o = obj_find(rs, id);
	busy = o && rs->migrating && (!strcmp(rs->qtls.creds, id) || !strcmp(rs->qtls.authz, id));
	if (o && !busy)
		memset(o, 0, sizeof(*o));
	pthread_mutex_unlock(&rs->lock);
	if (!o)
		return qmp_fail(e, "object '%s' not found", id);
	if (busy)
		return qmp_fail(e, "object '%s' is in use by the running migration", id);
	return json_object();
}

void qmp_tls_query(struct run_state *rs, json_t *o)
{
	pthread_mutex_lock(&rs->lock);
	json_object_set_new(o, "tls-creds", json_string(rs->qtls.creds));
	json_object_set_new(o, "tls-hostname", json_string(rs->qtls.hostname));
	json_object_set_new(o, "tls-authz", json_string(rs->qtls.authz));
	pthread_mutex_unlock(&rs->lock);
}

/* tls-creds @id (or "" = none) into @ps: 0, or -1 with @e set. */
static int creds_take(struct run_state *rs, struct cli_params *ps, const char *id, struct qmp_error *e)
{
	struct run_qemu_obj o = { .type = NULL }, *f;

	pthread_mutex_lock(&rs->lock);
	f = obj_find(rs, id);
	if (f)
		o = *f;
	pthread_mutex_unlock(&rs->lock);
	if (id[0] && (!f || o.type[0] == 'a')) {
		qmp_fail(e, "No TLS credentials with id '%s'", id);
		return -1;
	}
	if (id[0] && o.server != rs->dest) {
		qmp_fail(e, "Expecting TLS credentials with a %s endpoint ('%s' is for the %s side)",
		     rs->dest ? "server" : "client", id, o.server ? "listening" : "connecting");
		return -1;
	}
	cli_params_put_str(ps, GW_SPARAM_TLS_CREDS, id[0] && !strcmp(o.type, "tls-creds-x509") ? o.value : "");
	cli_params_put_str(ps, GW_SPARAM_TLS_PSK, id[0] && !strcmp(o.type, "tls-creds-psk") ? o.value : "");
	return 0;
}

int qmp_tls_take(struct run_state *rs, struct cli_params *ps, struct run_qemu_tls *names,
		 const char *key, json_t *j, struct qmp_error *e)
{
	struct run_qemu_obj *f;
	char ident[GW_SPARAM_MAX_BYTES] = "";
	const char *v;

	if (strcmp(key, "tls-creds") && strcmp(key, "tls-hostname") && strcmp(key, "tls-authz"))
		return 0;
	/* QEMU takes a null here too (StrOrNull): the same as "". */
	if (!json_is_string(j) && !json_is_null(j)) {
		qmp_fail(e, "Invalid parameter type for '%s', expected: string", key);
		return -1;
	}
	v = json_is_string(j) ? json_string_value(j) : "";
	if (strlen(v) >= RUN_QEMU_ID_MAX && strcmp(key, "tls-hostname")) {
		qmp_fail(e, "No object with id '%.32s...'", v);
		return -1;
	}
	if (!strcmp(key, "tls-creds")) {
		if (creds_take(rs, ps, v, e))
			return -1;
		snprintf(names->creds, sizeof(names->creds), "%s", v);
		return 1;
	}
	if (!strcmp(key, "tls-hostname")) {
		if (cli_params_put_str(ps, GW_SPARAM_TLS_HOSTNAME, v)) {
			qmp_fail(e, "Parameter 'tls-hostname' expects a host name without blanks");
			return -1;
		}
		snprintf(names->hostname, sizeof(names->hostname), "%s", v);
		return 1;
	}
	pthread_mutex_lock(&rs->lock);
	f = obj_find(rs, v);
	if (f && f->type[0] == 'a')
		snprintf(ident, sizeof(ident), "%s", f->value);
	pthread_mutex_unlock(&rs->lock);
	if (v[0] && !ident[0]) {
		qmp_fail(e, "No authz-simple object with id '%s'", v);
		return -1;
	}
	cli_params_put_str(ps, GW_SPARAM_TLS_AUTHZ, ident);
	snprintf(names->authz, sizeof(names->authz), "%s", v);
	return 1;
}

void qmp_tls_names(struct run_state *rs, struct run_qemu_tls *names)
{
	pthread_mutex_lock(&rs->lock);
	*names = rs->qtls;
	pthread_mutex_unlock(&rs->lock);
}

void qmp_tls_commit(struct run_state *rs, const struct run_qemu_tls *names)
{
	pthread_mutex_lock(&rs->lock);
	memcpy(rs->qtls.creds, names->creds, sizeof(rs->qtls.creds));
	memcpy(rs->qtls.hostname, names->hostname, sizeof(rs->qtls.hostname));
	memcpy(rs->qtls.authz, names->authz, sizeof(rs->qtls.authz));
	pthread_mutex_unlock(&rs->lock);
}

/* ---- migrate, postcopy, the continue ---- */

json_t *qmp_do_migrate(void *opaque, json_t *args, struct qmp_error *e)
{
	json_t *uri = json_object_get(args, "uri"), *resume = json_object_get(args, "resume");
	char err[RUN_ERR_MAX], bound[GW_SPARAM_MAX_BYTES];
	const char *u;

	if (!uri)
		return qmp_fail(e, "Parameter '%s' is missing", "uri");
	if (!json_is_string(uri))
		return qmp_fail(e, "Invalid parameter type for '%s', expected: string", "uri");
	if (resume && !json_is_boolean(resume))
		return qmp_fail(e, "Invalid parameter type for '%s', expected: boolean", "resume");
	if (json_is_true(json_object_get(args, "blk")) || json_is_true(json_object_get(args, "inc")))
		return qmp_fail(e, "%s", "block migration is not supported by godwit");
	u = json_string_value(uri);
	if (!strncmp(u, "fd:", 3) || !strncmp(u, "exec:", 5) || !strncmp(u, "file:", 5) || !strncmp(u, "rdma:", 5))
		return qmp_fail(e, "Migration URI '%.16s' is not supported by godwit: use tcp:HOST:PORT or "
			    "unix:PATH (no getfd: godwit opens its own connections)", u);
	if (json_is_true(resume)) {
		if (run_postcopy_reconnect(opaque, false, u, bound, sizeof(bound), err, sizeof(err)))
			return qmp_fail(e, "%s", err);
		return json_object();
	}
	if (run_migrate(opaque, u, NULL, err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	return json_object();
}

json_t *qmp_do_migrate_start_postcopy(void *opaque, json_t *args, struct qmp_error *e)
{
	char err[RUN_ERR_MAX];
	int64_t v[GW_PARAM__COUNT];
	int ret;

	run_params_now(opaque, v);
	if (!v[GW_PARAM_POSTCOPY])
		return qmp_fail(e, "%s", "Enable postcopy with migrate_set_capability before the start of migration");
	ret = run_start_postcopy(opaque, err, sizeof(err));
	if (ret == -EINVAL)
		return qmp_fail(e, "%s", "Postcopy must be started after migration has been started");
	if (ret)
		return qmp_fail(e, "%s", err);
	return json_object();
}

json_t *qmp_do_migrate_recover(void *opaque, json_t *args, struct qmp_error *e)
{
	char err[RUN_ERR_MAX], bound[GW_SPARAM_MAX_BYTES];
	const char *uri;
	bool given;

	if (!(uri = str_arg(args, "uri", true, &given, e)))
		return NULL;
	if (!((struct run_state *)opaque)->dest)
		return qmp_fail(e, "%s", "Migrate recover can only be run when postcopy is paused.");
	if (run_postcopy_reconnect(opaque, true, uri, bound, sizeof(bound), err, sizeof(err)))
		return qmp_fail(e, "Migrate recover can only be run when postcopy is paused. (%s)", err);
	return json_object();
}

json_t *qmp_do_migrate_pause(void *opaque, json_t *args, struct qmp_error *e)
{
	return qmp_fail(e, "%s", "migrate-pause is not supported by godwit: postcopy pauses by itself when a "
		    "connection breaks (status postcopy-paused), then migrate-recover and migrate resume=true");
}

json_t *qmp_do_migrate_continue(void *opaque, json_t *args, struct qmp_error *e)
{
	char err[RUN_ERR_MAX];
	const char *state;
	bool given;

	if (!(state = str_arg(args, "state", true, &given, e)))
		return NULL;
	if (strcmp(state, "pre-switchover"))
		return qmp_fail(e, "Parameter 'state' does not accept value '%s' (godwit pauses only at "
			    "pre-switchover)", state);
	if (run_continue(opaque, err, sizeof(err)))
		return qmp_fail(e, "%s", err);
	return json_object();
}

void qmp_blocked_reasons(struct run_state *rs, json_t *o)
{
	char err[RUN_ERR_MAX];

	if (run_migrate_blocked(rs, err, sizeof(err)))
		json_object_set_new(o, "blocked-reasons", json_pack("[s]", err));
}
