/* SPDX-License-Identifier: MIT */
/* The backend table and the names of vmm.h. */
#include <string.h>
#include "vmm.h"

/* Preference order: the first that probes is what --accel auto runs. */
const struct vmm_backend *const vmm_backends[] = {
#ifdef GW_VMM_KVM
	&vmm_kvm,	/* vmm/kvm/: x86-64 builds */
#endif
	&vmm_soft,
	NULL,
};

const struct vmm_backend *vmm_backend_by_name(const char *name)
{
	for (unsigned i = 0; name && vmm_backends[i]; i++)
		if (!strcmp(vmm_backends[i]->name, name))
			return vmm_backends[i];
	return NULL;
}

const char *vmm_state_name(enum vmm_state st)
{
	switch (st) {
	case VMM_CREATED: return "created";
	case VMM_INCOMING: return "incoming";
	case VMM_RUNNING: return "running";
	case VMM_PAUSED: return "paused";
	case VMM_POSTMIGRATE: return "postmigrate";
	case VMM_SHUTDOWN: return "shutdown";
	}
	return "?";
}
