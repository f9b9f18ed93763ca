/* SPDX-License-Identifier: MIT */
/*
 * The engine's callbacks of every VM (struct gw_vm_ops, opaque = the
 * VM's struct vmm_vm *), written once over the backend's hooks
 * (vm_base.h): the lifecycle, RAM set-up on a destination, the throttles,
 * free-page hints and the postcopy hooks.
 *
 * Threads: every callback takes ctl, except throttle and dirty_limit (one
 * atomic store each, read by the vCPU threads), vcpu_of_thread (lock-free:
 * a fault handler asks) and the hint callbacks (the backend's hooks lock
 * what they need: hints_start waits for the vCPUs, which must not wait for
 * ctl).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <godwit/log.h>
#include "dev/virtio_net.h"
#include "vm_base.h"

static int ops_pause(void *opaque)
{
	return vmm_vm_pause(opaque);
}

static int ops_resume(void *opaque)
{
	return vmm_vm_resume(opaque);
}

static int ops_save_state(void *opaque, struct gw_state *st)
{
	struct vmm_vm *vm = opaque;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	if (vmm_vm_state(vm) == VMM_RUNNING)
		ret = -EBUSY;		/* the engine pauses first */
	else
		ret = vm->hooks->save_state(vm, st);
	/* The NICs last (after KVM's irqchip): their carry sections as late as can be. */
	for (unsigned i = 0; !ret && i < vm->nr_nics; i++)
		ret = virtio_net_save_state(vm->nics[i], st);
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* How many NICs the source had: its "virtio-netN" sections, N from 0 without a hole. */
static unsigned state_nics(const struct gw_state *st)
{
	unsigned n = 0;
	char name[32];
	uint32_t version;
	size_t len;

	for (;; n++) {
		snprintf(name, sizeof(name), "virtio-net%u", n);
		if (!gw_state_find(st, name, &version, &len))
			return n;
	}
}

/* ctl held: NULL when the VM waits for a migration, else the note for its refusal. */
static const char *not_waiting(const struct vmm_vm *vm)
{
	const char *busy = vm->hooks->load_busy ? vm->hooks->load_busy(vm) : NULL;

	if (vmm_vm_state(vm) != VMM_INCOMING)
		return busy ? busy : "";
	return busy;
}

static int ops_load_state(void *opaque, struct gw_state *st)
{
	struct vmm_vm *vm = opaque;
	const char *busy;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	busy = not_waiting(vm);
	if (busy) {
		ret = gw_state_reject(st, -EBUSY, "%s VM is %s%s, not waiting for a migration",
				      vm->hooks->name, vmm_state_name(vmm_vm_state(vm)), busy);
	} else if (state_nics(st) != vm->nr_nics) {
		/* Before anything is applied: the guest would lose or gain a NIC. */
		ret = gw_state_reject(st, -EINVAL, "the source VM has %u NIC(s), this destination %u: "
				      "give it as many --nic", state_nics(st), vm->nr_nics);
	} else {
		ret = vm->hooks->load_state(vm, st);
		/* The NICs after the VM's own sections; a refusal leaves the VM unloaded. */
		for (unsigned i = 0; !ret && i < vm->nr_nics; i++)
			ret = virtio_net_load_state(vm->nics[i], st);
		if (!ret)
			vm->loaded = true;
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

static int ops_setup_ram(void *opaque, const struct gw_vm_info *want, struct gw_vm_info *out,
			 char *reason, size_t reason_len)
{
	struct vmm_vm *vm = opaque;
	uint64_t t0 = gw_now_ns();
	const char *busy;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	busy = not_waiting(vm);
	if (busy) {
		snprintf(reason, reason_len, "%s VM is %s%s, not waiting for a migration",
			 vm->hooks->name, vmm_state_name(vmm_vm_state(vm)), busy);
		vmm_vm_close_received(want);	/* received fds are ours: never leak them */
		ret = -EBUSY;
	} else {
		ret = vm->hooks->setup_ram(vm, want, reason, reason_len);
		if (!ret && vm->nr_nics && vmm_vm_dev_mem_refresh(vm)) {
			snprintf(reason, reason_len, "%s VM: guest RAM in %u blocks, more than its "
				 "devices can address", vm->hooks->name, vm->info.nr_blocks);
			ret = -ENOSPC;
		}
	}
	if (!ret) {
		/* Accepted: every received fd is mapped (a hook closes none it was given then). */
		vm->ram_shared = false;
		for (unsigned i = 0; i < want->nr_blocks; i++)
			vm->ram_shared |= want->blocks[i].fd >= 0;
		*out = vm->info;
		gw_log(GW_LOG_INFO, vm->hooks->subsys, "ram_setup",
		       "blocks=%u ram_bytes=%" PRIu64 " local=%d us=%.1f", vm->info.nr_blocks,
		       vm->ram_pages * GW_PAGE_BYTES, vm->ram_shared,
		       (double)(gw_now_ns() - t0) / 1000.0);
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* Auto-converge and dirty limit: one atomic store each, applied at the vCPUs' pace calls. */
static int ops_throttle(void *opaque, unsigned pct)
{
	struct vmm_vm *vm = opaque;

	if (pct > 99)
		return -EINVAL;
	atomic_store(&vm->throttle_pct, pct);
	return 0;
}

static int ops_dirty_limit(void *opaque, uint64_t bytes_per_sec)
{
	struct vmm_vm *vm = opaque;

	atomic_store(&vm->dirty_limit_bps, bytes_per_sec);
	return 0;
}

static void ops_hints_start(void *opaque, struct gw_session *s)
{
	struct vmm_vm *vm = opaque;

	vm->hooks->hints_start(vm, s);
}

static void ops_hints_stop(void *opaque)
{
	struct vmm_vm *vm = opaque;

	vm->hooks->hints_stop(vm);
}

/* Lock-free: nr_vcpus is fixed before the resume that starts the threads. */
static int ops_vcpu_of_thread(void *opaque, pid_t tid)
{
	const struct vmm_vm *vm = opaque;

	for (unsigned i = 0; tid && i < vm->nr_vcpus; i++)
		if (vm->hooks->vcpu_tid(vm, i) == tid)
			return (int)i;
	return -1;
}

/*
 * Postcopy (destination): RAM incomplete from the resume on (@complete
 * false: the vCPUs start without the post-migration check; returns the
 * vCPU count), then complete (the check the first resume deferred runs
 * now when vmm_vm_check_at_resume says so, vCPUs paused).
 */
static int ops_postcopy_ram(void *opaque, bool complete)
{
	struct vmm_vm *vm = opaque;

	if (!complete)
		atomic_store(&vm->postcopy_incomplete, true);	/* before the resume (engine) */
	/*
	 * bench/bench.py reads the guest's rate during postcopy from the two
	 * lines. progress never blocks: while postcopy_incomplete is set a
	 * backend may read a stale copy (KVM: through the fds), exact at
	 * complete=1.
	 */
	gw_log(GW_LOG_INFO, vm->hooks->subsys, "postcopy_ram", "complete=%d progress=%" PRIu64,
	       complete, vm->hooks->progress(vm));
	if (!complete)
		return (int)vm->nr_vcpus;
	pthread_mutex_lock(&vm->ctl);
	atomic_store(&vm->postcopy_incomplete, false);
	if (vmm_vm_check_at_resume(vm) && vmm_vm_state(vm) == VMM_RUNNING) {
		/* Every page is here: the check the first resume deferred, the vCPUs parked. */
		vm->hooks->pause_vcpus(vm);
		vmm_vm_post_check_run(vm);
		vm->hooks->resume_vcpus(vm);
	}
	pthread_mutex_unlock(&vm->ctl);
	return 0;
}

/* Every VM's callbacks; the two tables differ only in free-page hints. */
#define VM_OPS_COMMON							\
	.size = sizeof(struct gw_vm_ops),				\
	.pause = ops_pause,						\
	.resume = ops_resume,						\
	.save_state = ops_save_state,					\
	.load_state = ops_load_state,					\
	.setup_ram = ops_setup_ram,					\
	.throttle = ops_throttle,					\
	.dirty_limit = ops_dirty_limit,					\
	.vcpu_of_thread = ops_vcpu_of_thread,				\
	.postcopy_ram = ops_postcopy_ram

const struct gw_vm_ops vmm_vm_engine_ops = { VM_OPS_COMMON };

/* For backends with hint hooks only: with hints_start set, the engine hands the VM round 0 under its hint lock. */
const struct gw_vm_ops vmm_vm_engine_ops_hints = {
	VM_OPS_COMMON,
	.hints_start = ops_hints_start,
	.hints_stop = ops_hints_stop,
};
