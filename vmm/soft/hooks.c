/* SPDX-License-Identifier: MIT */
/*
 * The soft VM's hooks under the base (vm_base.h) and vmm_soft, its entry in
 * the backend table of vmm.h: how its vCPUs pause, resume, start and stop
 * (vcpu.c), its state section (state.c), RAM for a source's layout
 * (ram.c), the workload check (check.c: dirty, verify, balloon), progress
 * and free-page hints (run.c). A struct vmm * of this backend is a struct
 * soft_vm *, its base first.
 *
 * Threads: the base calls the hooks with ctl held, except progress and
 * vcpu_tid (atomics, any thread) and the hint hooks, which take hint_lock
 * and base.lock (hints_start waits for the vCPUs, which must not wait for
 * ctl).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include "soft/soft_internal.h"

static void hook_pause_vcpus(struct vmm_vm *b)
{
	soft_vcpus_pause(soft_of(b));
}

static void hook_resume_vcpus(struct vmm_vm *b)
{
	soft_vcpus_resume(soft_of(b));
}

static int hook_start_vcpus(struct vmm_vm *b)
{
	return soft_vcpus_start(soft_of(b), soft_run_vcpu);
}

static void hook_stop_vcpus(struct vmm_vm *b)
{
	soft_vcpus_stop(soft_of(b));
}

static int hook_save_state(struct vmm_vm *b, struct gw_state *st)
{
	return soft_state_save(soft_of(b), st);
}

static int hook_load_state(struct vmm_vm *b, struct gw_state *st)
{
	return soft_state_load(soft_of(b), st);
}

static int hook_setup_ram(struct vmm_vm *b, const struct gw_vm_info *want, char *reason,
			  size_t reason_len)
{
	struct soft_vm *vm = soft_of(b);
	int ret;

	if (want->nr_vcpus > SOFT_MAX_VCPUS) {	/* any other count: the load takes the source's */
		snprintf(reason, reason_len, "the source's VM has %u vCPUs, the soft VM runs at most %d",
			 want->nr_vcpus, SOFT_MAX_VCPUS);
		return -ERANGE;
	}
	ret = soft_ram_setup(vm, want, reason, reason_len);
	if (!ret)
		soft_run_layout(vm);
	return ret;
}

static int hook_check(struct vmm_vm *b, char *msg, size_t msg_len)
{
	return soft_check_verify(soft_of(b), msg, msg_len);
}

static uint64_t hook_progress(const struct vmm_vm *b)
{
	return soft_vm_progress(soft_of_const(b));
}

static pid_t hook_vcpu_tid(const struct vmm_vm *b, unsigned i)
{
	return atomic_load(&soft_of((struct vmm_vm *)b)->vcpus[i].tid);
}

static void hook_hints_start(struct vmm_vm *b, struct gw_session *s)
{
	soft_run_hints_start(soft_of(b), s);
}

static void hook_hints_stop(struct vmm_vm *b)
{
	soft_run_hints_stop(soft_of(b));
}

static void hook_free(struct vmm_vm *b)
{
	soft_vm_free(soft_of(b));
}

const struct vmm_vm_hooks soft_hooks = {
	.name = "soft",
	.subsys = "soft",
	.pause_vcpus = hook_pause_vcpus,
	.resume_vcpus = hook_resume_vcpus,
	.start_vcpus = hook_start_vcpus,
	.stop_vcpus = hook_stop_vcpus,
	.save_state = hook_save_state,
	.load_state = hook_load_state,
	.setup_ram = hook_setup_ram,
	.check = hook_check,
	.progress = hook_progress,
	.vcpu_tid = hook_vcpu_tid,
	.hints_start = hook_hints_start,
	.hints_stop = hook_hints_stop,
	.free = hook_free,
};

static struct vmm *be_create(const struct vmm_config *cfg, char *err, size_t err_len)
{
	return (struct vmm *)soft_vm_create(cfg, err, err_len);
}

const struct vmm_backend vmm_soft = {
	.name = "soft",
	.probe = soft_probe,
	.check_config = soft_config_check,
	.create = be_create,
	.engine_ops = &vmm_vm_engine_ops_hints,
	VMM_VM_BACKEND_ENTRIES,
};
