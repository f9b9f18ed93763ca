/* SPDX-License-Identifier: MIT */
/*
 * The QMP socket's announce parts (qmp_announce.c): the announce-self
 * command, and QEMU's announce-* migration parameters, which are the VM's
 * (vmm/dev/announce.h), not the engine's. Called from the QMP thread.
 */
#ifndef GW_CLI_QMP_ANNOUNCE_H
#define GW_CLI_QMP_ANNOUNCE_H

#include <stdbool.h>
#include <jansson.h>
#include "common/qmp.h"
#include "dev/announce.h"
#include "run/run.h"

/* QEMU's announce-self (docs/qmp.md). */
json_t *qmp_do_announce_self(void *opaque, json_t *args, struct qmp_error *e);

/* query-migrate-parameters: add announce-* to @o when the VM has them. */
void qmp_announce_query(struct run_state *rs, json_t *o);

/* A migrate-set-parameters request's announce-* values. */
struct qmp_announce_change {
	struct vmm_announce_params p;	/* the VM's, then the request's */
	bool have;			/* the VM has announce parameters (a NIC) */
	bool set;			/* the request names one */
};
void qmp_announce_change_init(struct run_state *rs, struct qmp_announce_change *c);
/* @key with value @j: 1 taken, 0 not an announce-* name, -1 refused (@e set). */
int qmp_announce_take(struct qmp_announce_change *c, const char *key, json_t *j,
		      struct qmp_error *e);
/* Bounds of the values taken, before anything is applied: 0, or -1 with @e. */
int qmp_announce_check(const struct qmp_announce_change *c, struct qmp_error *e);
/* Hand them to the VM (nothing when none was named): 0, or -1 with @e. */
int qmp_announce_apply(struct run_state *rs, const struct qmp_announce_change *c,
		       struct qmp_error *e);

#endif
