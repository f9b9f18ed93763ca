/* SPDX-License-Identifier: MIT */
/*
 * The engine's callbacks of a KVM VM (struct gw_vm_ops kvm_engine_ops):
 * pause, resume, save and load through the shared lifecycle (lifecycle.h),
 * RAM set-up on a destination (the one layout accepted, received fds),
 * throttling, and the postcopy hooks. Every callback takes vm->ctl (the
 * lifecycle's do it for their hooks), except the atomic stores of the
 * throttles and the lock-free vCPU lookup.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <godwit/log.h>
#include "lifecycle.h"
#include "kvm/kvm_boot.h"
#include "kvm/kvm_internal.h"

/* The lifecycle's hooks (lifecycle.h): ctl held. */
static enum vmm_state life_state(const void *vm)
{
	return kvm_vmm_state(vm);
}

static void life_set_state(void *vm, enum vmm_state st)
{
	kvm_set_vmm_state(vm, st);
}

static void life_join_post_check(void *vm)
{
	kvm_join_post_check(vm);
}

static void life_pause_vcpus(void *opaque)
{
	struct kvm_vm *vm = opaque;
	uint64_t t0 = gw_now_ns();

	kvm_pause_all(&vm->pause);
	gw_debug("kvm", "paused", "vcpus=%u us=%.1f", vm->nr_vcpus, (gw_now_ns() - t0) / 1e3);
}

static void life_resume_vcpus(void *opaque)
{
	kvm_pause_resume_all(&((struct kvm_vm *)opaque)->pause);
}

static int life_start_first(void *vm)
{
	return kvm_start_first_locked(vm);
}

static int life_save_state(void *opaque, struct gw_state *st)
{
	struct kvm_vm *vm = opaque;

	return vm->nr_vcpus ? kvm_state_save(vm, st) : -EINVAL;
}

/* Incoming but loaded already, or with vCPUs: not ready for a state. */
static const char *life_load_busy(const void *opaque)
{
	const struct kvm_vm *vm = opaque;

	return vm->loaded ? " (state loaded)" : vm->nr_vcpus ? "" : NULL;
}

static int life_load_state(void *opaque, struct gw_state *st)
{
	struct kvm_vm *vm = opaque;
	int ret;

	if (vm->info.nr_blocks != 2)
		return gw_state_reject(st, -EINVAL, "KVM VM has no RAM yet");
	ret = kvm_state_load(vm, st);
	if (!ret) {
		vm->loaded = true;
		kvm_publish_info(vm);
	}
	return ret;
}

static const struct vmm_life_ops kvm_life_ops = {
	.name = "KVM",
	.state = life_state,
	.set_state = life_set_state,
	.join_post_check = life_join_post_check,
	.pause_vcpus = life_pause_vcpus,
	.resume_vcpus = life_resume_vcpus,
	.start_first = life_start_first,
	.save_state = life_save_state,
	.load_busy = life_load_busy,
	.load_state = life_load_state,
};

static struct vmm_life life_of(struct kvm_vm *vm)
{
	return (struct vmm_life){ .ops = &kvm_life_ops, .vm = vm, .ctl = &vm->ctl };
}

static int ops_pause(void *opaque)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_pause(&l);
}

static int ops_resume(void *opaque)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_resume(&l);
}

static int ops_save_state(void *opaque, struct gw_state *st)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_save_state(&l, st);
}

static int ops_load_state(void *opaque, struct gw_state *st)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_load_state(&l, st);
}

/* The only layout a KVM destination accepts: "sys" at 0 sized for "ram" at 4 GiB. */
static int check_layout(const struct gw_vm_info *want, char *reason, size_t reason_len)
{
	const struct gw_ram_block *s, *r;

	if (!want || want->nr_blocks != 2) {
		kvm_why(reason, reason_len, "KVM VM needs 2 RAM blocks (sys, ram), source has %u",
			want ? want->nr_blocks : 0);
		return -EINVAL;
	}
	s = &want->blocks[KVM_BLOCK_SYS];
	r = &want->blocks[KVM_BLOCK_RAM];
	if (strncmp(s->name, "sys", sizeof(s->name)) || strncmp(r->name, "ram", sizeof(r->name)) ||
	    s->gpa != 0 || r->gpa != GW_GUEST_RAM_GPA) {
		kvm_why(reason, reason_len, "RAM layout is not a KVM guest's (want sys@0, ram@%#llx)",
			(unsigned long long)GW_GUEST_RAM_GPA);
		return -EINVAL;
	}
	if (s->page_size_bytes != GW_PAGE_BYTES || r->page_size_bytes != GW_PAGE_BYTES ||
	    !r->size_bytes || r->size_bytes % GW_PAGE_BYTES || r->size_bytes > KVM_MAX_RAM_BYTES ||
	    s->size_bytes != kvm_boot_sys_bytes(r->size_bytes)) {
		kvm_why(reason, reason_len, "RAM blocks of %llu and %llu bytes refused",
			(unsigned long long)s->size_bytes, (unsigned long long)r->size_bytes);
		return -EINVAL;
	}
	return 0;
}

/* ctl held, layout checked: create the blocks or take the received fds. */
static int setup_blocks(struct kvm_vm *vm, const struct gw_vm_info *want, bool *taken,
			char *reason, size_t reason_len)
{
	int ret = 0;

	if (vm->info.nr_blocks) {
		for (unsigned i = 0; i < 2 && !ret; i++) {
			if (vm->info.blocks[i].size_bytes != want->blocks[i].size_bytes) {
				kvm_why(reason, reason_len, "layout mismatch: source %s is %llu bytes, here %llu",
					want->blocks[i].name,
					(unsigned long long)want->blocks[i].size_bytes,
					(unsigned long long)vm->info.blocks[i].size_bytes);
				return -EINVAL;
			}
		}
		for (unsigned i = 0; i < 2 && !ret; i++) {
			if (want->blocks[i].fd < 0)
				continue;
			taken[i] = true;	/* kvm_ram_replace owns it, also on failure */
			ret = kvm_ram_replace(vm, i, want->blocks[i].fd, want->blocks[i].fd_offset_bytes,
					      reason, reason_len);
		}
		return ret;
	}
	for (unsigned i = 0; i < 2 && !ret; i++) {
		const struct gw_ram_block *b = &want->blocks[i];
		bool fresh;

		taken[i] = true;		/* kvm_ram_add owns it, also on failure */
		ret = kvm_ram_add(vm, b->name, b->gpa, b->size_bytes, b->fd, b->fd_offset_bytes,
				  &fresh, reason, reason_len);
	}
	return ret;
}

static int ops_setup_ram(void *opaque, const struct gw_vm_info *want, struct gw_vm_info *out,
			 char *reason, size_t reason_len)
{
	struct kvm_vm *vm = opaque;
	bool taken[2] = { false, false };
	uint64_t t0 = gw_now_ns();
	int ret;

	pthread_mutex_lock(&vm->ctl);
	if (kvm_vmm_state(vm) != VMM_INCOMING || vm->nr_vcpus) {
		kvm_why(reason, reason_len, "KVM VM is %s, not waiting for a migration",
			vmm_state_name(kvm_vmm_state(vm)));
		ret = -EBUSY;
	} else {
		ret = check_layout(want, reason, reason_len);
		if (!ret)
			ret = setup_blocks(vm, want, taken, reason, reason_len);
	}
	if (!ret) {
		kvm_layout_workload(vm);
		kvm_publish_info(vm);
		*out = vm->info;
		gw_log(GW_LOG_INFO, "kvm", "ram_setup", "ram_bytes=%" PRIu64 " local=%d us=%.1f",
		       vm->ram_pages * GW_PAGE_BYTES, want->blocks[0].fd >= 0,
		       (double)(gw_now_ns() - t0) / 1000.0);
	}
	/* Received fds are ours: never leak them. */
	for (unsigned i = 0; want && i < want->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++)
		if (want->blocks[i].fd >= 0 && (i >= 2 || !taken[i]))
			close(want->blocks[i].fd);
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* Auto-converge and dirty limit: one atomic store each, applied at the vCPUs' pace calls. */
static int ops_throttle(void *opaque, unsigned pct)
{
	struct kvm_vm *vm = opaque;

	if (pct > 99)
		return -EINVAL;
	atomic_store(&vm->throttle_pct, pct);
	return 0;
}

static int ops_dirty_limit(void *opaque, uint64_t bytes_per_sec)
{
	struct kvm_vm *vm = opaque;

	atomic_store(&vm->dirty_limit_bps, bytes_per_sec);
	return 0;
}

/*
 * Postcopy (destination). KVM reaches guest RAM through the memslots' host
 * addresses, the very mappings the engine put under userfaultfd: a vCPU
 * touching a page not there yet makes KVM_RUN fault on it in the kernel
 * and wait until the engine's fault handler places it. The VMM's own
 * accesses go through the mappings too (PV calls on vCPU threads), except
 * progress (the fds: stale, never blocking) and the verify check (pread:
 * deferred to the end).
 */
static int ops_vcpu_of_thread(void *opaque, pid_t tid)
{
	struct kvm_vm *vm = opaque;

	/* Lock-free: nr_vcpus is fixed before the resume that starts the threads. */
	for (unsigned i = 0; tid && i < vm->nr_vcpus; i++)
		if (atomic_load(&vm->vcpus[i].tid) == tid)
			return (int)i;
	return -1;
}

static int ops_postcopy_ram(void *opaque, bool complete)
{
	struct kvm_vm *vm = opaque;

	if (!complete)
		atomic_store(&vm->postcopy_incomplete, true);	/* before the resume (engine) */
	/*
	 * progress= as the soft VM logs it (bench/bench.py reads the guest's
	 * rate during postcopy from the two lines). Read through the fd while
	 * postcopy_incomplete is set (a read through the mapping could wait for
	 * a page): at complete=0 that may be the copy precopy sent (lower than
	 * at the pause), at complete=1 every page is here and it is exact.
	 */
	gw_log(GW_LOG_INFO, "kvm", "postcopy_ram", "complete=%d progress=%" PRIu64, complete,
	       kvm_progress(vm));
	if (!complete)
		return (int)vm->nr_vcpus;
	pthread_mutex_lock(&vm->ctl);
	atomic_store(&vm->postcopy_incomplete, false);
	if (kvm_workload_checkable(vm) && kvm_vmm_state(vm) == VMM_RUNNING) {
		/* Every page is here: the check the first resume deferred, the vCPUs parked. */
		kvm_pause_all(&vm->pause);
		kvm_post_check_run(vm);
		kvm_pause_resume_all(&vm->pause);
	}
	pthread_mutex_unlock(&vm->ctl);
	return 0;
}

const struct gw_vm_ops kvm_engine_ops = {
	.size = sizeof(struct gw_vm_ops),
	.pause = ops_pause,
	.resume = ops_resume,
	.save_state = ops_save_state,
	.load_state = ops_load_state,
	.setup_ram = ops_setup_ram,
	.throttle = ops_throttle,
	.dirty_limit = ops_dirty_limit,
	.vcpu_of_thread = ops_vcpu_of_thread,
	.postcopy_ram = ops_postcopy_ram,
};
