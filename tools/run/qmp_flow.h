/* SPDX-License-Identifier: MIT */
/*
 * The QMP socket's parts of the flow libvirt drives (qmp_flow.c): TLS
 * credentials as QEMU's objects (object-add/object-del of tls-creds-x509,
 * tls-creds-psk, authz-simple) and the tls-creds, tls-hostname, tls-authz
 * parameters that name them; postcopy (migrate-start-postcopy,
 * migrate-recover, migrate with resume, migrate-pause);
 * pause-before-switchover's migrate-continue; query-migrate's
 * blocked-reasons. Called from the QMP thread only.
 */
#ifndef GW_CLI_QMP_FLOW_H
#define GW_CLI_QMP_FLOW_H

#include <jansson.h>
#include "common/params.h"
#include "common/qmp.h"
#include "run/run.h"

/* QEMU's GenericError with the reason: @e set, NULL returned (a command's refusal). */
json_t *qmp_fail(struct qmp_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* @s is one of the NULL-terminated @list. */
bool qmp_in_list(const char *const *list, const char *s);

json_t *qmp_do_object_add(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_object_del(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_getfd(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_closefd(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_migrate(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_migrate_start_postcopy(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_migrate_recover(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_migrate_pause(void *opaque, json_t *args, struct qmp_error *e);
json_t *qmp_do_migrate_continue(void *opaque, json_t *args, struct qmp_error *e);

/* query-migrate-parameters: add tls-creds, tls-hostname, tls-authz to @o. */
void qmp_tls_query(struct run_state *rs, json_t *o);
/*
 * migrate-set-parameters' @key with value @j into @ps (godwit's TLS string
 * parameters) and its QEMU name into @names (from qmp_tls_names): 1 taken,
 * 0 not a TLS name, -1 refused (@e set). qmp_tls_commit keeps the names for
 * query-migrate-parameters once the whole request was accepted.
 */
void qmp_tls_names(struct run_state *rs, struct run_qemu_tls *names);
int qmp_tls_take(struct run_state *rs, struct cli_params *ps, struct run_qemu_tls *names,
		 const char *key, json_t *j, struct qmp_error *e);
void qmp_tls_commit(struct run_state *rs, const struct run_qemu_tls *names);
/* query-migrate: add blocked-reasons (as QEMU, only when something blocks a migrate). */
void qmp_blocked_reasons(struct run_state *rs, json_t *o);

#endif
