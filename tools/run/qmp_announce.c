/* SPDX-License-Identifier: MIT */
/* announce-self and the announce-* parameters over QMP (qmp_announce.h). */
#include "run/qmp_announce.h"
#include "common/qemu_names.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define GENERIC "GenericError"

/* Integer argument @name of announce-self (required, as in QEMU's AnnounceParameters), in [lo, hi]. */
static int announce_int(json_t *args, const char *name, int64_t lo, int64_t hi, int64_t *out,
			struct qmp_error *e)
{
	json_t *j = json_object_get(args, name);

	if (!j) {
		qmp_error_set(e, GENERIC, "Parameter '%s' is missing", name);
		return -1;
	}
	if (!json_is_integer(j)) {
		qmp_error_set(e, GENERIC, "Parameter '%s' expects integer", name);
		return -1;
	}
	*out = json_integer_value(j);
	if (*out < lo || *out > hi) {
		qmp_error_set(e, GENERIC, "Parameter '%s' expects a value between %" PRId64 " and %"
			      PRId64, name, lo, hi);
		return -1;
	}
	return 0;
}

/* interfaces (an array of NIC names) and id into @p. 0, or -1 with @e. */
static int announce_names(json_t *args, struct vmm_announce_params *p, struct qmp_error *e)
{
	json_t *ifs = json_object_get(args, "interfaces"), *id = json_object_get(args, "id"), *v;
	size_t i;

	if (ifs && !json_is_array(ifs)) {
		qmp_error_set(e, GENERIC, "Parameter 'interfaces' expects array");
		return -1;
	}
	if (ifs && json_array_size(ifs) > VMM_ANNOUNCE_INTERFACES_MAX) {
		qmp_error_set(e, GENERIC, "Parameter 'interfaces' expects at most %d names",
			      VMM_ANNOUNCE_INTERFACES_MAX);
		return -1;
	}
	json_array_foreach(ifs, i, v) {
		const char *name = json_string_value(v);

		if (!name || !name[0] || strlen(name) >= VMM_ANNOUNCE_NAME_MAX) {
			qmp_error_set(e, GENERIC, "Parameter 'interfaces[%zu]' expects a name of 1 "
				      "to %d characters", i, VMM_ANNOUNCE_NAME_MAX - 1);
			return -1;
		}
		snprintf(p->interfaces[p->nr_interfaces++], VMM_ANNOUNCE_NAME_MAX, "%s", name);
	}
	if (id && (!json_is_string(id) || strlen(json_string_value(id)) >= VMM_ANNOUNCE_NAME_MAX)) {
		qmp_error_set(e, GENERIC, "Parameter 'id' expects a string of at most %d characters",
			      VMM_ANNOUNCE_NAME_MAX - 1);
		return -1;
	}
	if (id)
		snprintf(p->id, sizeof(p->id), "%s", json_string_value(id));
	return 0;
}

/*
 * RARP rounds from each NIC now (or those named in interfaces), by the VM
 * (vmm_vm_announce): a VM without a NIC says so. QEMU checks no bounds
 * here; godwit checks migrate-set-parameters' ones, so that a typo cannot
 * start 10^9 rounds.
 */
json_t *qmp_do_announce_self(void *opaque, json_t *args, struct qmp_error *e)
{
	struct run_state *rs = opaque;
	struct vmm_announce_params p;
	char why[128];
	int ret;

	vmm_announce_params_default(&p);
	if (announce_int(args, "initial", 0, VMM_ANNOUNCE_DELAY_MS_MAX, &p.initial_ms, e) ||
	    announce_int(args, "max", 0, VMM_ANNOUNCE_DELAY_MS_MAX, &p.max_ms, e) ||
	    announce_int(args, "rounds", 0, VMM_ANNOUNCE_ROUNDS_MAX, &p.rounds, e) ||
	    announce_int(args, "step", VMM_ANNOUNCE_STEP_MS_MIN, VMM_ANNOUNCE_STEP_MS_MAX,
			 &p.step_ms, e) ||
	    announce_names(args, &p, e))
		return NULL;
	if (vmm_announce_params_check(&p, why, sizeof(why))) {
		qmp_error_set(e, GENERIC, "%s", why);
		return NULL;
	}
	ret = vmm_vm_announce(rs->vm, &p);
	if (ret == -EOPNOTSUPP)
		qmp_error_set(e, GENERIC, "announce-self: this VM has no NIC to announce");
	else if (ret)
		qmp_error_set(e, GENERIC, "announce-self failed: %s", strerror(-ret));
	return ret ? NULL : json_object();
}

/* The field of @p that QEMU's announce-* parameter @q names. */
static int64_t *announce_field(struct vmm_announce_params *p, enum qemu_vmm_param q)
{
	switch (q) {
	case QEMU_VMM_ANNOUNCE_INITIAL: return &p->initial_ms;
	case QEMU_VMM_ANNOUNCE_MAX: return &p->max_ms;
	case QEMU_VMM_ANNOUNCE_ROUNDS: return &p->rounds;
	case QEMU_VMM_ANNOUNCE_STEP:
	case QEMU_VMM__COUNT: break;
	}
	return &p->step_ms;
}

void qmp_announce_query(struct run_state *rs, json_t *o)
{
	struct vmm_announce_params p;

	if (vmm_vm_announce_params_get(rs->vm, &p))
		return;		/* no NIC: QEMU's announce-* are left out */
	for (const struct qemu_vmm_param_name *q = qemu_vmm_params; q->name; q++)
		json_object_set_new(o, q->name, json_integer(*announce_field(&p, q->p)));
}

void qmp_announce_change_init(struct run_state *rs, struct qmp_announce_change *c)
{
	memset(c, 0, sizeof(*c));
	c->have = vmm_vm_announce_params_get(rs->vm, &c->p) == 0;
}

int qmp_announce_take(struct qmp_announce_change *c, const char *key, json_t *j,
		      struct qmp_error *e)
{
	const struct qemu_vmm_param_name *q = qemu_vmm_param_by_name(key);

	if (!q)
		return 0;
	if (!c->have) {
		qmp_error_set(e, GENERIC, "Parameter '%s' is not supported by godwit: this VM has no "
			      "NIC to announce", key);
		return -1;
	}
	if (!json_is_integer(j)) {
		qmp_error_set(e, GENERIC, "Parameter '%s' expects uint64", key);
		return -1;
	}
	*announce_field(&c->p, q->p) = json_integer_value(j);
	c->set = true;
	return 1;
}

int qmp_announce_check(const struct qmp_announce_change *c, struct qmp_error *e)
{
	char why[128];

	if (c->set && vmm_announce_params_check(&c->p, why, sizeof(why))) {
		qmp_error_set(e, GENERIC, "%s", why);
		return -1;
	}
	return 0;
}

int qmp_announce_apply(struct run_state *rs, const struct qmp_announce_change *c,
		       struct qmp_error *e)
{
	int ret;

	if (!c->set)
		return 0;
	/* Checked before: the VM refuses only if it lost its NICs meanwhile. */
	ret = vmm_vm_announce_params_set(rs->vm, &c->p);
	if (ret)
		qmp_error_set(e, GENERIC, "announce parameters not applied: %s", strerror(-ret));
	return ret ? -1 : 0;
}
