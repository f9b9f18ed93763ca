/* SPDX-License-Identifier: MIT */
/*
 * Creating a KVM VM (vmm_kvm_create_opts): the configuration checked, the
 * dirty-ring decision (made before any vCPU exists), the VM allocated and
 * freed, its RAM blocks and their initial content, and for a source the
 * boot structures and vCPUs; the guest image table's lookup. The lifecycle
 * and the engine's callbacks are the base's (vm_base.h) over kvm_hooks.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <godwit/log.h>
#include "fill.h"
#include "kvm/kvm_boot.h"
#include "kvm/kvm_guests.h"
#include "kvm/kvm_internal.h"
#include "kvm/kvm_mmio_dev.h"

#define FILL_THREADS 2

const struct kvm_guest_image *kvm_guest_image_find(const char *name)
{
	for (const struct kvm_guest_image *g = kvm_guest_images; g->name; g++)
		if (!strcmp(g->name, name))
			return g;
	return NULL;
}

/* The guest image that runs @kind (the guests/ of the same name). */
static const char *workload_guest(enum vmm_workload_kind kind)
{
	switch (kind) {
	case VMM_WL_DIRTY: return "dirty";
	case VMM_WL_VERIFY: return "verify";
	case VMM_WL_L2FWD: return "l2fwd";
	case VMM_WL_ECHO: return "echo";
	default: return "idle";
	}
}

int kvm_check_config(const struct vmm_config *cfg, char *err, size_t err_len)
{
	struct vmm_workload wl;
	char why[KVM_MSG_MAX] = "";

	if (cfg->nr_vcpus < 1 || cfg->nr_vcpus > KVM_MAX_VCPUS) {
		kvm_why(err, err_len, "vcpus must be 1..%u, not %u", KVM_MAX_VCPUS, cfg->nr_vcpus);
		return -EINVAL;
	}
	if (cfg->memory_bytes % GW_PAGE_BYTES || cfg->memory_bytes > KVM_MAX_RAM_BYTES ||
	    (!cfg->memory_bytes && !cfg->incoming)) {
		vmm_memory_refused(err, err_len, cfg->memory_bytes, GW_PAGE_BYTES, KVM_MAX_RAM_BYTES);
		return -EINVAL;
	}
	if ((unsigned)cfg->fill > VMM_FILL_TEXT) {
		kvm_why(err, err_len, "unknown fill");
		return -EINVAL;
	}
	if (vmm_workload_parse(cfg->workload, &wl, why, sizeof(why))) {
		kvm_why(err, err_len, "%s", why);
		return -EINVAL;
	}
	if (wl.kind == VMM_WL_BALLOON) {	/* no guest frees pages: refused, not run as idle */
		kvm_why(err, err_len, "the balloon workload (free-page hints) runs on the soft VM only: "
			"use --accel soft");
		return -EOPNOTSUPP;
	}
	if (vmm_workload_needs_nic(&wl) && !cfg->nr_nics && !cfg->incoming) {
		kvm_why(err, err_len, "the %s workload drives NICs: give at least one (--nic)",
			workload_guest(wl.kind));
		return -EINVAL;
	}
	return 0;
}

/*
 * The dirty ring: decided now, since KVM wants it before any vCPU exists,
 * and a VM with a ring has no dirty bitmap. Only when asked (as QEMU's
 * dirty-ring-size): the bitmap (kvm-log) is the default because it holds
 * whatever the guest does, while rings overflow on hosts that run guests
 * through KVM's instruction emulator (src/mem/dirty_kvm_ring.c).
 */
static uint32_t ring_entries_for(const struct kvm_vm *vm, const struct vmm_config *cfg)
{
	enum kvm_dirty_mode m = vm->opts.dirty;

	if (m == KVM_DIRTY_MODE_AUTO && cfg->dirty_backend == GW_DIRTY_KVM_RING)
		m = KVM_DIRTY_MODE_RING;
	if (m != KVM_DIRTY_MODE_RING)
		return 0;
	return vm->opts.ring_entries ? vm->opts.ring_entries : KVM_DEFAULT_RING_ENTRIES;
}

static struct kvm_vm *vm_alloc(const struct vmm_config *cfg, const struct kvm_vm_opts *opts)
{
	struct kvm_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	if (opts)
		vm->opts = *opts;
	else
		vm->opts.guest_recheck = -1;
	vm->kvm_fd = vm->vm_fd = vm->ring_full_efd = -1;
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++) {
		vm->vcpus[i].fd = -1;
		vm->vcpus[i].vm = vm;
		vm->vcpus[i].index = i;
	}
	vmm_vm_init(&vm->base, &kvm_hooks);
	kvm_pause_init(&vm->pause, kvm_kick, vm);
	vm->memory_file = cfg->memory_file ? strdup(cfg->memory_file) : NULL;
	vm->prealloc = cfg->prealloc;
	vm->fill = cfg->incoming ? VMM_FILL_NONE : cfg->fill;
	vm->seed = cfg->seed;
	vm->has_pit = !vm->opts.no_pit;
	return vm;
}

void kvm_vm_free(struct kvm_vm *vm)
{
	kvm_vcpus_stop(vm);	/* a destination's threads made ahead, parked (none if stopped) */
	kvm_vcpus_destroy(vm);
	vmm_vm_devices_destroy(&vm->base);	/* before their RAM and the VM fd (lines) */
	vmm_vm_ram_release(&vm->base);
	if (vm->ring_full_efd >= 0)
		close(vm->ring_full_efd);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	kvm_pause_destroy(&vm->pause);
	kvm_state_load_ahead_free(vm);
	free(vm->host_compat);
	free((char *)vm->memory_file);
	vmm_vm_release(&vm->base);
	free(vm);
}

/* Publish what the engine's trackers need (kvm-log, kvm-ring). */
_Static_assert(KVM_PROFILE_MAX_BYTES <= GW_CPU_PROFILE_MAX_BYTES, "the CPU profile fits gw_vm_info's bound");

void kvm_publish_info(struct kvm_vm *vm)
{
	vm->base.info.kvm_vm_fd = vm->vm_fd;
	vm->base.info.nr_vcpus = vm->base.nr_vcpus;
	vm->base.info.kvm_dirty_ring_entries = vm->ring_entries;
	vm->base.info.kvm_dirty_rings = vm->ring_entries ? vm->rings : NULL;
	vm->base.info.kvm_dirty_ring_fetch = vm->ring_entries ? vm->ring_fetch : NULL;
	vm->base.info.kvm_dirty_ring_full_efd = vm->ring_full_efd;
	vm->base.info.cpu_profile = vm->cpu_profile;
	vm->base.info.cpu_profile_bytes = vm->cpuid ? (uint32_t)kvm_compat_profile(vm->cpuid, vm->nr_cpuid,
										 vm->caps.compat, vm->caps.xsave_bytes,
										 vm->cpu_profile) : 0;
}

/* Blocks "sys" and "ram" for @ram_bytes of workload RAM. */
static int ram_create(struct kvm_vm *vm, uint64_t ram_bytes, bool *ram_fresh,
		      char *why, size_t why_len)
{
	bool fresh;
	int ret;

	ret = kvm_ram_add(vm, "sys", 0, kvm_boot_sys_bytes(ram_bytes), -1, 0, &fresh, why, why_len);
	if (!ret)
		ret = kvm_ram_add(vm, "ram", GW_GUEST_RAM_GPA, ram_bytes, -1, 0, ram_fresh, why, why_len);
	return ret;
}

/* Initial content of block "ram" (page indices from its start). */
static int fill_ram(struct kvm_vm *vm, bool fresh, char *why, size_t why_len)
{
	struct gw_vm_info ram_only = { .size = sizeof(ram_only), .nr_blocks = 1,
				       .blocks = &vm->base.blocks[KVM_BLOCK_RAM], .kvm_vm_fd = -1 };
	uint64_t t0 = gw_now_ns();
	int ret;

	ret = vmm_fill_ram(&ram_only, vm->fill, vm->seed, fresh, FILL_THREADS);
	if (ret) {
		kvm_why(why, why_len, "fill: %s", strerror(-ret));
		return ret;
	}
	vm->init_fill = vm->fill;
	vm->init_seed = vm->seed;
	vm->init_known = fresh || vm->fill != VMM_FILL_NONE;
	if (vm->fill != VMM_FILL_NONE)
		gw_log(GW_LOG_INFO, "kvm", "ram_filled", "fill=%s bytes=%" PRIu64 " ms=%.1f",
		       vmm_fill_name(vm->fill), vm->base.ram_pages * GW_PAGE_BYTES, (gw_now_ns() - t0) / 1e6);
	return 0;
}

/* vCPUs 0..@nr-1 with this host's supported CPUID (kvm_vcpus_create). */
static int vcpus_host_cpuid(struct kvm_vm *vm, unsigned nr, bool boot_regs, char *why, size_t why_len)
{
	uint32_t nr_cpuid = 0;
	struct kvm_cpuid_entry2 *cpuid = kvm_supported_cpuid(vm->kvm_fd, &nr_cpuid);
	int ret;

	if (!cpuid) {
		ret = -errno;
		kvm_why(why, why_len, "KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
		return ret;
	}
	ret = kvm_vcpus_create(vm, nr, cpuid, nr_cpuid, boot_regs, why, why_len);
	free(cpuid);
	return ret;	/* on failure what exists is destroyed with the VM */
}

/*
 * A destination makes its --vcpus (default 1) now, with this host's CPUID:
 * creating a vCPU costs ~0.3 ms here (KVM_CREATE_VCPU, its mappings,
 * KVM_SET_CPUID2), which the load would otherwise spend inside the downtime.
 * The load gives them the source's CPUID and adds any more the state has.
 */
static int vcpus_ahead(struct kvm_vm *vm, unsigned nr, char *why, size_t why_len)
{
	uint64_t t0 = gw_now_ns();
	int ret = vcpus_host_cpuid(vm, nr, false, why, why_len);

	if (ret)
		return ret;
	/* Made, not loaded: the VM still has no CPU state (nr_vcpus 0 means that). */
	vm->vcpus_ahead = vm->base.nr_vcpus;
	vm->base.nr_vcpus = 0;
	vm->base.info.nr_vcpus = 0;
	kvm_pause_set_vcpus(&vm->pause, 0);
	if (kvm_state_load_ahead(vm, nr))
		gw_log(GW_LOG_WARN, "kvm", "load_ahead_failed", "vcpus=%u: the load allocates its own", nr);
	/* Their threads too, parked until the first start. */
	ret = kvm_vcpus_start(vm, true);
	if (ret) {
		kvm_why(why, why_len, "vCPU threads: %s", strerror(-ret));
		return ret;
	}
	gw_log(GW_LOG_INFO, "kvm", "vcpus_ahead", "vcpus=%u us=%.1f", nr, (gw_now_ns() - t0) / 1e3);
	return 0;
}

/* A source VM: RAM, content, boot structures, vCPUs at the guest's entry. */
static int build_source(struct kvm_vm *vm, const struct vmm_config *cfg, char *why, size_t why_len)
{
	bool fresh;
	int ret;

	ret = ram_create(vm, cfg->memory_bytes, &fresh, why, why_len);
	if (!ret)
		ret = fill_ram(vm, fresh, why, why_len);
	if (ret)
		return ret;
	kvm_layout_workload(vm);
	ret = kvm_boot_write(vm, cfg->nr_vcpus, cfg->nr_nics, why, why_len);
	if (ret)
		return ret;
	return vcpus_host_cpuid(vm, cfg->nr_vcpus, true, why, why_len);
}

/* The workload (kvm_check_config checked it) and the guest that runs it. 0 or -errno. */
static int workload_setup(struct kvm_vm *vm, const struct vmm_config *cfg, char *why,
			  size_t why_len)
{
	int ret = vmm_workload_parse(cfg->workload, &vm->base.wl, why, why_len);

	if (ret)
		return ret;
	snprintf(vm->guest, sizeof(vm->guest), "%s",
		 vm->opts.guest ? vm->opts.guest : workload_guest(vm->base.wl.kind));
	return 0;
}

struct vmm *vmm_kvm_create_opts(const struct vmm_config *cfg, const struct kvm_vm_opts *opts,
				char *err, size_t err_len)
{
	char why[KVM_MSG_MAX] = "";
	struct kvm_vm *vm;
	int ret;

	if (!cfg) {
		errno = EINVAL;
		return NULL;
	}
	ret = kvm_check_config(cfg, err, err_len);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	vm = vm_alloc(cfg, opts);
	if (!vm) {
		errno = ENOMEM;
		return NULL;
	}
	ret = workload_setup(vm, cfg, why, sizeof(why));	/* checked above */
	if (ret)
		goto fail;
	ret = kvm_open_dev(why, sizeof(why));
	if (ret < 0)
		goto fail;
	vm->kvm_fd = ret;
	ret = kvm_probe_caps(vm->kvm_fd, -1, &vm->caps, why, sizeof(why));
	if (ret)
		goto fail;
	vm->ring_entries = ring_entries_for(vm, cfg);
	ret = kvm_vm_fd_setup(vm, why, sizeof(why));
	if (ret)
		goto fail;
	if (cfg->incoming && kvm_host_compat_probe(vm))
		gw_log(GW_LOG_WARN, "kvm", "host_probe_failed", "the load will probe instead");
	if (cfg->incoming)
		ret = vcpus_ahead(vm, cfg->nr_vcpus, why, sizeof(why));
	if (ret)
		goto fail;
	kvm_layout_workload(vm);	/* no RAM yet on a destination: ws 0 until setup/load */
	if (cfg->memory_bytes && cfg->incoming) {
		bool fresh;

		ret = ram_create(vm, cfg->memory_bytes, &fresh, why, sizeof(why));
		kvm_layout_workload(vm);
	} else if (cfg->memory_bytes) {
		ret = build_source(vm, cfg, why, sizeof(why));
	}
	if (ret)
		goto fail;
	kvm_publish_info(vm);
	vm->base.dev_base_gpa = KVM_VIRTIO_MMIO_BASE_GPA;
	vm->base.dev_gsi_base = KVM_VIRTIO_MMIO_GSI_BASE;
	vm->base.dev_irq = &kvm_virtio_irq_line;
	vm->base.dev_irq_opaque = vm;
	ret = vmm_vm_devices_create(&vm->base, cfg, why, sizeof(why));
	if (ret)
		goto fail;
	vmm_vm_set_state(&vm->base, cfg->incoming ? VMM_INCOMING : VMM_CREATED);
	gw_log(GW_LOG_INFO, "kvm", "vm_created", "memory_bytes=%" PRIu64 " vcpus=%u fill=%s "
	       "workload=%s guest=%s dirty_ring_entries=%u pit=%d msrs=%u incoming=%d",
	       cfg->memory_bytes, cfg->incoming ? 0 : cfg->nr_vcpus, vmm_fill_name(vm->fill),
	       vm->base.spec, vm->guest, vm->ring_entries, vm->has_pit, vm->nr_msrs, cfg->incoming);
	return (struct vmm *)vm;
fail:
	kvm_why(err, err_len, "%s", why[0] ? why : strerror(-ret));
	kvm_vm_free(vm);
	errno = ret < 0 ? -ret : EINVAL;
	return NULL;
}
