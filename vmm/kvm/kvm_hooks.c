/* SPDX-License-Identifier: MIT */
/*
 * The KVM VM's hooks under the base (vm_base.h): how its vCPUs pause,
 * resume, start and stop (kvm_pause.h, kvm_vcpu.c), its state sections
 * (kvm_state.c), the one RAM layout a destination accepts (received fds
 * taken, or memfds made), the workload check and progress (kvm_check.c).
 * The base calls them with ctl held, except progress and vcpu_tid (any
 * thread, lock-free).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <godwit/log.h>
#include "kvm/kvm_boot.h"
#include "kvm/kvm_internal.h"

static void hook_pause_vcpus(struct vmm_vm *b)
{
	struct kvm_vm *vm = kvm_of(b);
	uint64_t t0 = gw_now_ns();

	kvm_pause_all(&vm->pause);
	gw_debug("kvm", "paused", "vcpus=%u us=%.1f", vm->base.nr_vcpus, (gw_now_ns() - t0) / 1e3);
}

static void hook_resume_vcpus(struct vmm_vm *b)
{
	kvm_pause_resume_all(&kvm_of(b)->pause);
}

static int hook_start_vcpus(struct vmm_vm *b)
{
	return kvm_vcpus_start(kvm_of(b), false);
}

static void hook_stop_vcpus(struct vmm_vm *b)
{
	kvm_vcpus_stop(kvm_of(b));
}

static int hook_save_state(struct vmm_vm *b, struct gw_state *st)
{
	return b->nr_vcpus ? kvm_state_save(kvm_of(b), st) : -EINVAL;
}

/* Incoming but loaded already, or with vCPUs: not ready for a state or RAM. */
static const char *hook_load_busy(const struct vmm_vm *b)
{
	return b->loaded ? " (state loaded)" : b->nr_vcpus ? "" : NULL;
}

static int hook_load_state(struct vmm_vm *b, struct gw_state *st)
{
	struct kvm_vm *vm = kvm_of(b);
	int ret;

	if (b->info.nr_blocks != 2)
		return gw_state_reject(st, -EINVAL, "KVM VM has no RAM yet");
	ret = kvm_state_load(vm, st);
	if (!ret)
		kvm_publish_info(vm);
	return ret;
}

/* The only layout a KVM destination accepts: "sys" at 0 sized for "ram" at 4 GiB. */
static int check_layout(const struct gw_vm_info *want, char *reason, size_t reason_len)
{
	const struct gw_ram_block *s, *r;

	if (!want || want->nr_blocks != 2) {
		kvm_why(reason, reason_len, "the source is not a KVM VM (its RAM is %u block%s, a KVM guest's "
			"is 2: sys and ram): start the destination with --accel soft, or migrate from a "
			"KVM source", want ? want->nr_blocks : 0, want && want->nr_blocks == 1 ? "" : "s");
		return -EINVAL;
	}
	s = &want->blocks[KVM_BLOCK_SYS];
	r = &want->blocks[KVM_BLOCK_RAM];
	if (strncmp(s->name, "sys", sizeof(s->name)) || strncmp(r->name, "ram", sizeof(r->name)) ||
	    s->gpa != 0 || r->gpa != GW_GUEST_RAM_GPA) {
		kvm_why(reason, reason_len, "the source is not a KVM VM (its RAM blocks are not sys at 0 and "
			"ram at %#llx): start the destination with --accel soft, or migrate from a KVM "
			"source", (unsigned long long)GW_GUEST_RAM_GPA);
		return -EINVAL;
	}
	if (s->page_size_bytes != GW_PAGE_BYTES || r->page_size_bytes != GW_PAGE_BYTES ||
	    !r->size_bytes || r->size_bytes % GW_PAGE_BYTES || r->size_bytes > KVM_MAX_RAM_BYTES ||
	    s->size_bytes != kvm_boot_sys_bytes(r->size_bytes)) {
		kvm_why(reason, reason_len, "the source's KVM RAM (sys %llu bytes, ram %llu bytes) is not a "
			"size this KVM VMM runs (a multiple of 4K, at most %lluG)",
			(unsigned long long)s->size_bytes, (unsigned long long)r->size_bytes,
			(unsigned long long)(KVM_MAX_RAM_BYTES >> 30));
		return -EINVAL;
	}
	return 0;
}

/* ctl held, layout checked: create the blocks or take the received fds. */
static int setup_blocks(struct kvm_vm *vm, const struct gw_vm_info *want, bool *taken,
			char *reason, size_t reason_len)
{
	int ret = 0;

	if (vm->base.info.nr_blocks) {
		for (unsigned i = 0; i < 2 && !ret; i++) {
			if (vm->base.info.blocks[i].size_bytes != want->blocks[i].size_bytes) {
				vmm_memory_mismatch(reason, reason_len,
						    want->blocks[KVM_BLOCK_RAM].size_bytes,
						    vm->base.info.blocks[KVM_BLOCK_RAM].size_bytes);
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

/*
 * The source's vCPU count and CPU profile (0, none: not said) against the
 * vCPUs made ahead (--vcpus) and this host's KVM: the load would refuse
 * them after the whole precopy and a pause of the source.
 */
static int check_source_vm(const struct kvm_vm *vm, const struct gw_vm_info *want, char *reason,
			   size_t reason_len)
{
	unsigned nr = want->nr_vcpus, most = vm->caps.max_vcpus < KVM_MAX_VCPUS ? vm->caps.max_vcpus : KVM_MAX_VCPUS;
	struct kvm_compat *src;
	char why[KVM_MSG_MAX];
	int ret;

	if (nr && nr < vm->vcpus_ahead) {
		kvm_why(reason, reason_len, "the source's VM has %u vCPU%s and this destination was made with %u "
			"(--vcpus %u): start the destination with --vcpus %u", nr, nr == 1 ? "" : "s",
			vm->vcpus_ahead, vm->vcpus_ahead, nr);
		return -ERANGE;
	}
	if (nr > most) {
		kvm_why(reason, reason_len, "the source's VM has %u vCPUs, this host's KVM runs at most %u", nr, most);
		return -ERANGE;
	}
	if (!want->cpu_profile_bytes || !vm->host_compat)
		return 0;	/* not said, or this host not probed: the load checks */
	src = malloc(sizeof(*src));
	if (!src)
		return -ENOMEM;
	ret = kvm_compat_from_profile(want->cpu_profile, want->cpu_profile_bytes, nr, src, why, sizeof(why));
	if (!ret)
		ret = kvm_compat_check(src, vm->host_compat, why, sizeof(why));
	if (ret)
		kvm_why(reason, reason_len, "this host cannot run the source's vCPUs: %s", why);
	else
		gw_log(GW_LOG_INFO, "kvm", "source_cpu_checked", "vcpus=%u profile_bytes=%u", nr,
		       want->cpu_profile_bytes);
	free(src);
	return ret ? -ERANGE : 0;
}

static int hook_setup_ram(struct vmm_vm *b, const struct gw_vm_info *want, char *reason,
			  size_t reason_len)
{
	struct kvm_vm *vm = kvm_of(b);
	bool taken[2] = { false, false };
	int ret;

	ret = check_source_vm(vm, want, reason, reason_len);
	if (!ret)
		ret = check_layout(want, reason, reason_len);
	if (!ret)
		ret = setup_blocks(vm, want, taken, reason, reason_len);
	if (!ret) {
		kvm_layout_workload(vm);
		kvm_publish_info(vm);
	}
	/* Received fds are ours: never leak them. */
	for (unsigned i = 0; want && i < want->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++)
		if (want->blocks[i].fd >= 0 && (i >= 2 || !taken[i]))
			close(want->blocks[i].fd);
	return ret;
}

/* verify, and dirty run by the dirty guest (another image's writes are not known). */
static bool hook_checkable(const struct vmm_vm *b)
{
	return kvm_workload_checkable(kvm_of_const(b));
}

/*
 * The workload's check (verify or dirty, kvm_check.c). Under postcopy the
 * base defers it to the end: KVM reaches guest RAM through the memslots'
 * host addresses, the very mappings the engine put under userfaultfd (a
 * vCPU touching a page not there yet makes KVM_RUN fault on it in the
 * kernel and wait until the engine's fault handler places it), and the
 * check reads with pread.
 */
static int hook_check(struct vmm_vm *b, char *msg, size_t msg_len)
{
	return kvm_check_verify(kvm_of(b), msg, msg_len);
}

/* Through the fds while postcopy_incomplete is set (stale, never blocking). */
static uint64_t hook_progress(const struct vmm_vm *b)
{
	return kvm_progress(kvm_of_const(b));
}

static pid_t hook_vcpu_tid(const struct vmm_vm *b, unsigned i)
{
	return atomic_load(&((struct kvm_vm *)kvm_of_const(b))->vcpus[i].tid);
}

static void hook_free(struct vmm_vm *b)
{
	kvm_vm_free(kvm_of(b));
}

const struct vmm_vm_hooks kvm_hooks = {
	.name = "KVM",
	.subsys = "kvm",
	.pause_vcpus = hook_pause_vcpus,
	.resume_vcpus = hook_resume_vcpus,
	.start_vcpus = hook_start_vcpus,
	.stop_vcpus = hook_stop_vcpus,
	.save_state = hook_save_state,
	.load_busy = hook_load_busy,
	.load_state = hook_load_state,
	.setup_ram = hook_setup_ram,
	.checkable = hook_checkable,
	.check = hook_check,
	.progress = hook_progress,
	.vcpu_tid = hook_vcpu_tid,
	.free = hook_free,
};
