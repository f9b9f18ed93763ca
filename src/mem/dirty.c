/* SPDX-License-Identifier: MIT */
/*
 * The table of dirty-tracking backends and the choice among them.
 * Preference order: the KVM dirty ring, the KVM dirty bitmap (both only for
 * a KVM VM: their probes say -EOPNOTSUPP when kvm_vm_fd < 0, and a VM has
 * either a ring or a bitmap), then uffd-wp, which works on any process memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <godwit/session.h>
#include "mem/dirty.h"

extern const struct gw_dirty_ops gw_dirty_kvm_ring;
extern const struct gw_dirty_ops gw_dirty_kvm_log;
extern const struct gw_dirty_ops gw_dirty_uffd_wp;

const struct gw_dirty_ops *const gw_dirty_backends[] = {
	&gw_dirty_kvm_ring,
	&gw_dirty_kvm_log,
	&gw_dirty_uffd_wp,
	NULL,
};

#define NR_DIRTY_BACKENDS_MAX 8

/* Filled once from gw_dirty_backends[]; read-only afterwards. */
static const char *backend_names[NR_DIRTY_BACKENDS_MAX + 1];
static pthread_once_t backend_names_once = PTHREAD_ONCE_INIT;

static void backend_names_fill(void)
{
	unsigned n = 0;

	for (unsigned i = 0; gw_dirty_backends[i] && n < NR_DIRTY_BACKENDS_MAX; i++)
		backend_names[n++] = gw_dirty_backends[i]->name;
	backend_names[n] = NULL;
}

const char *const *gw_dirty_backend_names(void)
{
	pthread_once(&backend_names_once, backend_names_fill);
	return backend_names;
}

int gw_dirty_select(struct gw_dirty *d, const struct gw_vm_info *vm,
		    enum gw_dirty_backend_id want)
{
	int last = -EOPNOTSUPP;

	if (!d || !vm)
		return -EINVAL;
	for (unsigned i = 0; gw_dirty_backends[i]; i++) {
		const struct gw_dirty_ops *ops = gw_dirty_backends[i];
		int ret;

		if (want != GW_DIRTY_AUTO && ops->id != want)
			continue;
		ret = ops->probe(vm);
		if (ret == 0) {
			d->ops = ops;
			d->vm = vm;
			d->priv = NULL;
			return 0;
		}
		last = ret;
		if (want != GW_DIRTY_AUTO)
			break;
	}
	/* An explicit backend that is not in the table is simply unsupported. */
	return last < 0 ? last : -EOPNOTSUPP;
}
