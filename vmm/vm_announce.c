/* SPDX-License-Identifier: MIT */
/*
 * The VM's NICs announced (vmm/dev/announce.h): after an incoming migration
 * resumes the VM, one RARP per NIC per round, QEMU's schedule, so that the
 * switches learn the NICs' new port; and QMP's announce-self on request.
 * The announcer runs on its own thread: the resume only wakes it, and the
 * rounds go out while the guest runs, outside the downtime.
 *
 * Threads: announce_lock guards the fields below it in struct vmm_vm (the
 * QMP thread sets parameters and asks announce-self, the engine's resume
 * and pause start and stop the post-switchover announcer). The announcers
 * call virtio_net_send_raw, which takes the device's own locks.
 */
#include <errno.h>
#include <stdio.h>
#include <godwit/log.h>
#include "dev/announce.h"
#include "dev/virtio_net.h"
#include "vm_base.h"

/* A new announcer over the NICs @p wants (every NIC for the post-switchover one). */
static struct vmm_announce *announcer_new(struct vmm_vm *vm, const struct vmm_announce_params *p)
{
	struct vmm_announce *a = vmm_announce_new(p);

	if (!a)
		return NULL;
	vmm_announce_set_log_side(a, "dst");
	for (unsigned i = 0; i < vm->nr_nics; i++) {
		char name[32];

		snprintf(name, sizeof(name), "virtio-net%u", i);
		if (vmm_announce_params_wants(p, name) && virtio_net_announce_add(a, vm->nics[i]) < 0) {
			vmm_announce_destroy(a);
			return NULL;
		}
	}
	return a;
}

void vmm_vm_announce_init(struct vmm_vm *vm)
{
	pthread_mutex_init(&vm->announce_lock, NULL);
	vmm_announce_params_default(&vm->announce_params);
}

void vmm_vm_announce_prepare(struct vmm_vm *vm)
{
	if (!vm->nr_nics)
		return;
	pthread_mutex_lock(&vm->announce_lock);
	if (!vm->announce)
		vm->announce = announcer_new(vm, &vm->announce_params);
	if (vm->announce)
		(void)vmm_announce_prepare(vm->announce);
	pthread_mutex_unlock(&vm->announce_lock);
}

void vmm_vm_announce_after_incoming(struct vmm_vm *vm)
{
	if (!vm->nr_nics)
		return;
	pthread_mutex_lock(&vm->announce_lock);
	if (!vm->announce)
		vm->announce = announcer_new(vm, &vm->announce_params);
	else
		(void)vmm_announce_set_params(vm->announce, &vm->announce_params);
	if (!vm->announce || vmm_announce_start(vm->announce))
		gw_log(GW_LOG_WARN, vm->hooks->subsys, "announce_failed", "nics=%u", vm->nr_nics);
	pthread_mutex_unlock(&vm->announce_lock);
}

void vmm_vm_announce_stop(struct vmm_vm *vm)
{
	pthread_mutex_lock(&vm->announce_lock);
	if (vm->announce)
		vmm_announce_stop(vm->announce);
	if (vm->announce_qmp)
		vmm_announce_stop(vm->announce_qmp);
	pthread_mutex_unlock(&vm->announce_lock);
}

void vmm_vm_announce_release(struct vmm_vm *vm)
{
	pthread_mutex_lock(&vm->announce_lock);
	vmm_announce_destroy(vm->announce);
	vmm_announce_destroy(vm->announce_qmp);
	vm->announce = vm->announce_qmp = NULL;
	pthread_mutex_unlock(&vm->announce_lock);
}

/* announce.h's hooks, for this VM: QMP's announce-self and the announce-* parameters. */
int vmm_vm_announce(struct vmm *v, const struct vmm_announce_params *p)
{
	struct vmm_vm *vm = (struct vmm_vm *)v;
	int ret = 0;

	if (!vm->nr_nics)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&vm->announce_lock);
	/* A later call restarts: one schedule at a time, as QEMU's for one id. */
	vmm_announce_destroy(vm->announce_qmp);
	vm->announce_qmp = announcer_new(vm, p);
	if (!vm->announce_qmp)
		ret = -ENOMEM;
	else
		ret = vmm_announce_start(vm->announce_qmp);
	pthread_mutex_unlock(&vm->announce_lock);
	return ret;
}

int vmm_vm_announce_params_get(struct vmm *v, struct vmm_announce_params *out)
{
	struct vmm_vm *vm = (struct vmm_vm *)v;

	if (!vm->nr_nics)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&vm->announce_lock);
	*out = vm->announce_params;
	pthread_mutex_unlock(&vm->announce_lock);
	return 0;
}

int vmm_vm_announce_params_set(struct vmm *v, const struct vmm_announce_params *p)
{
	struct vmm_vm *vm = (struct vmm_vm *)v;

	if (!vm->nr_nics)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&vm->announce_lock);
	vm->announce_params = *p;
	vm->announce_params.nr_interfaces = 0;	/* the migration's announce covers every NIC */
	vm->announce_params.id[0] = '\0';
	pthread_mutex_unlock(&vm->announce_lock);
	return 0;
}
