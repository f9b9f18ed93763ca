/* SPDX-License-Identifier: MIT */
/* The table of VMM backends (vmm.h), in preference order for --accel auto. */
#include <string.h>
#include "vmm.h"
#include "kvm/kvm_vm.h"

const struct vmm_backend *const vmm_backends[] = {
	&vmm_kvm,
	/* TODO(integration): &vmm_soft, once the soft backend's entry lands (another branch). */
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
