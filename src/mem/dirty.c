/* SPDX-License-Identifier: MIT */
/*
 * The table of dirty-tracking backends and the choice among them.
 * Preference order: the KVM dirty ring, the KVM dirty bitmap (both only for
 * a KVM VM: their probes say -EOPNOTSUPP when kvm_vm_fd < 0, and a VM has
 * either a ring or a bitmap), then uffd-wp, which works on any process memory.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <godwit/session.h>
#include "mem/dirty.h"
#include "util/abi.h"

extern const struct gw_dirty_ops gw_dirty_kvm_ring;
extern const struct gw_dirty_ops gw_dirty_kvm_log;
extern const struct gw_dirty_ops gw_dirty_uffd_wp;

const struct gw_dirty_ops *const gw_dirty_backends[] = {
	&gw_dirty_kvm_ring,
	&gw_dirty_kvm_log,
	&gw_dirty_uffd_wp,
	NULL,
};

/*
 * The first backend of the table that @id allows and whose probe accepts
 * @vm: 0 and *@out, else the last probe's error (-EOPNOTSUPP when @id
 * names none). @why, when given: the chosen backend's name, or why the
 * last one probed refused.
 */
static int first_usable(enum gw_dirty_backend_id id, const struct gw_vm_info *vm,
			const struct gw_dirty_ops **out, char *why, size_t why_len)
{
	int last = -EOPNOTSUPP;

	for (unsigned i = 0; gw_dirty_backends[i]; i++) {
		const struct gw_dirty_ops *ops = gw_dirty_backends[i];
		int ret;

		if (id != GW_DIRTY_AUTO && ops->id != id)
			continue;
		ret = ops->probe(vm);
		if (ret == 0) {
			if (why && why_len)
				snprintf(why, why_len, "%s", ops->name);
			*out = ops;
			return 0;
		}
		last = ret;
		if (why && why_len)
			snprintf(why, why_len, "%s: %s", ops->name, strerror(-ret));
	}
	return last < 0 ? last : -EOPNOTSUPP;
}

int gw_dirty_select(struct gw_dirty *d, const struct gw_vm_info *vm,
		    enum gw_dirty_backend_id want)
{
	const struct gw_dirty_ops *ops;
	int ret;

	if (!d || !vm)
		return -EINVAL;
	ret = first_usable(want, vm, &ops, NULL, 0);
	if (ret)
		return ret;
	d->ops = ops;
	d->vm = vm;
	d->priv = NULL;
	return 0;
}

int gw_dirty_probe(enum gw_dirty_backend_id id, const struct gw_vm_info *vm, char *why, size_t why_len)
{
	const struct gw_dirty_ops *ops;
	struct gw_vm_info v;	/* the VMM's struct may be older than the backends' */
	int ret = vm ? gw_vm_info_copy_in(&v, vm) : 0;

	if (ret) {
		if (why && why_len)
			snprintf(why, why_len, "bad gw_vm_info (size %u)", vm->size);
		return ret;
	}
	return first_usable(id, vm ? &v : NULL, &ops, why, why_len);
}
