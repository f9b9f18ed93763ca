/* SPDX-License-Identifier: MIT */
/*
 * A new VM's guest memory and vCPUs: the guest image (ELF), the boot-info
 * page and vCPU areas (guest_abi.h), page tables, GDT and TSS (kvm_boot.h);
 * vCPUs with CPUID, long-mode system registers, XCR0 and entry registers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <godwit/log.h>
#include "kvm/kvm_boot.h"
#include "kvm/kvm_elf.h"
#include "kvm/kvm_guests.h"
#include "kvm/kvm_internal.h"
#include "kvm/kvm_mmio_dev.h"

#define RECHECK_AUTO_MAX_PAGES 4096ull	/* guest re-check by default up to 16 MiB */
#define XCR0_USER_MASK 0xe7ull		/* x87, SSE, AVX, AVX-512 (opmask, ZMM_Hi256, Hi16_ZMM) */

struct gw_boot_info *kvm_boot_info(const struct kvm_vm *vm)
{
	return kvm_gpa_host(vm, GW_GUEST_BOOT_GPA, sizeof(struct gw_boot_info));
}

struct gw_vcpu_area *kvm_vcpu_area(const struct kvm_vm *vm, unsigned i)
{
	return kvm_gpa_host(vm, GW_GUEST_VCPU_AREA_GPA + i * GW_VCPU_AREA_BYTES, GW_VCPU_AREA_BYTES);
}

void kvm_layout_workload(struct kvm_vm *vm)
{
	char spec[VMM_WORKLOAD_SPEC_MAX];

	vm->base.ws_pages = vmm_workload_ws_pages(&vm->base.wl, vm->base.ram_pages);
	vmm_workload_format(&vm->base.wl, vm->base.ws_pages, spec, sizeof(spec));
	/* Readers (the report, status, QMP) copy it under vm->base.lock, not ctl. */
	pthread_mutex_lock(&vm->base.lock);
	memcpy(vm->base.spec, spec, sizeof(spec));
	pthread_mutex_unlock(&vm->base.lock);
}

static int load_image(struct kvm_vm *vm, uint8_t *sys, char *why, size_t why_len)
{
	const struct kvm_guest_image *g = kvm_guest_image_find(vm->guest);
	struct kvm_elf_image img;
	char reason[KVM_MSG_MAX];
	int ret;

	if (!g) {
		kvm_why(why, why_len, "no guest image called '%s'", vm->guest);
		return -ENOENT;
	}
	ret = kvm_elf_parse(g->elf, g->elf_bytes, GW_GUEST_IMAGE_GPA, GW_GUEST_IMAGE_END, &img,
			    reason, sizeof(reason));
	if (ret) {
		kvm_why(why, why_len, "guest %s: %s", g->name, reason);
		return ret;
	}
	ret = kvm_elf_load(g->elf, &img, sys, 0, vm->base.info.blocks[KVM_BLOCK_SYS].size_bytes);
	if (ret) {
		kvm_why(why, why_len, "guest %s does not fit block sys", g->name);
		return ret;
	}
	vm->entry_gpa = img.entry;
	return 0;
}

uint64_t kvm_pace_per_vcpu(uint64_t rate_pps, unsigned nr_vcpus)
{
	uint64_t r = rate_pps / (nr_vcpus ? nr_vcpus : 1);

	return rate_pps && !r ? 1 : r;
}

static uint32_t guest_workload(const struct kvm_vm *vm)
{
	if (!strcmp(vm->guest, "compute"))
		return GW_GUEST_WL_COMPUTE;
	if (!strcmp(vm->guest, "l2fwd"))
		return GW_GUEST_WL_L2FWD;
	if (!strcmp(vm->guest, "echo"))
		return GW_GUEST_WL_ECHO;
	switch (vm->base.wl.kind) {
	case VMM_WL_DIRTY: return GW_GUEST_WL_DIRTY;
	case VMM_WL_VERIFY: return GW_GUEST_WL_VERIFY;
	default: return GW_GUEST_WL_IDLE;
	}
}

/*
 * The writing guests always call GW_PV_PACE after a batch, rate or not:
 * that call is where the engine's throttle and dirty limit hold a vCPU.
 */
static bool writes(const struct kvm_vm *vm)
{
	uint32_t w = guest_workload(vm);

	return w == GW_GUEST_WL_DIRTY || w == GW_GUEST_WL_VERIFY;
}

_Static_assert(VMM_WL_NET_MAX_NICS >= GW_GUEST_NET_MAX_NICS, "a MAC for every guest NIC");
_Static_assert(KVM_VIRTIO_MMIO_MAX * VMM_DEV_WINDOW_BYTES <= KVM_BOOT_HUGE_BYTES,
	       "every device window in the 2 MiB the boot page tables map");

/*
 * The NICs' boot info: kvm_mmio_dev.h's layout (the same whatever the
 * guest), and the workload's destination MACs and frames per pass (l2fwd).
 */
static void write_boot_net(struct kvm_vm *vm, unsigned nr_nics)
{
	struct gw_boot_net *net = kvm_gpa_host(vm, GW_GUEST_NET_INFO_GPA, sizeof(*net));
	const struct vmm_workload *wl = &vm->base.wl;

	memset(net, 0, sizeof(*net));
	net->nr_nics = nr_nics < GW_GUEST_NET_MAX_NICS ? nr_nics : GW_GUEST_NET_MAX_NICS;
	net->budget = wl->budget_frames ? wl->budget_frames : VMM_WL_FWD_BUDGET_DEFAULT;
	for (unsigned i = 0; i < net->nr_nics; i++) {
		net->mmio_gpa[i] = KVM_VIRTIO_MMIO_BASE_GPA + (uint64_t)i * VMM_DEV_WINDOW_BYTES;
		net->gsi[i] = KVM_VIRTIO_MMIO_GSI_BASE + i;
		memcpy(net->dst_mac[i], wl->dst_mac[i], sizeof(net->dst_mac[i]));
		net->dst_set[i] = wl->dst_set[i];
	}
}

/* Boot info and vCPU slices; pacing as the soft VM's: ~100 calls/s at low rates. */
static void write_boot_info(struct kvm_vm *vm, unsigned nr_vcpus, unsigned nr_nics)
{
	struct gw_boot_info *bi = kvm_boot_info(vm);
	uint64_t per_vcpu = kvm_pace_per_vcpu(vm->base.wl.rate_pps, nr_vcpus);
	uint64_t batch = 64;
	bool recheck = vm->opts.guest_recheck > 0 ||
		       (vm->opts.guest_recheck < 0 && vm->base.ws_pages <= RECHECK_AUTO_MAX_PAGES);

	if (per_vcpu && per_vcpu / 100 < batch)
		batch = per_vcpu / 100 ? per_vcpu / 100 : 1;
	vm->pace_rate_pps = per_vcpu;
	memset(bi, 0, sizeof(*bi));
	bi->magic = GW_BOOT_MAGIC;
	bi->abi_version = GW_GUEST_ABI_VERSION;
	bi->nr_vcpus = nr_vcpus;
	bi->workload = guest_workload(vm);
	bi->flags = (vm->base.wl.pattern_page ? GW_BOOT_PATTERN_PAGE : 0) |
		    (per_vcpu || writes(vm) ? GW_BOOT_PACED : 0) | (recheck ? GW_BOOT_RECHECK : 0);
	bi->ram_gpa = GW_GUEST_RAM_GPA;
	bi->ram_pages = vm->base.ram_pages;
	bi->ws_pages = vm->base.ws_pages;
	bi->pace_batch_pages = batch;
	bi->seed = vm->seed;
	bi->tick_apic_count = vm->opts.tick_ns ? vm->opts.tick_ns : 1000000;
	bi->compute_iters = vm->opts.compute_iters;
	write_boot_net(vm, nr_nics);
	for (unsigned i = 0; i < nr_vcpus; i++) {
		struct gw_vcpu_area *a = kvm_vcpu_area(vm, i);
		uint64_t first = vm->base.ws_pages * i / nr_vcpus;

		memset(a, 0, sizeof(*a));
		a->first_page = first;
		a->nr_pages = vm->base.ws_pages * (i + 1) / nr_vcpus - first;
	}
}

/* Everything block "sys" holds at boot, for @nr_vcpus vCPUs and @nr_nics NICs. Needs both blocks. */
int kvm_boot_write(struct kvm_vm *vm, unsigned nr_vcpus, unsigned nr_nics, char *why,
		   size_t why_len)
{
	const struct gw_ram_block *sb = &vm->base.info.blocks[KVM_BLOCK_SYS];
	struct kvm_boot_range r[KVM_BOOT_RANGES];
	uint8_t *sys = sb->host;
	uint64_t pt_bytes;
	unsigned n;
	int ret;

	ret = load_image(vm, sys, why, why_len);
	if (ret)
		return ret;
	kvm_boot_gdt_build(sys + GW_GUEST_GDT_GPA, GW_GUEST_TSS_GPA);
	kvm_boot_tss_build(sys + GW_GUEST_TSS_GPA);
	n = kvm_boot_ranges(vm->base.info.blocks[KVM_BLOCK_RAM].size_bytes, r);
	pt_bytes = sb->size_bytes - GW_GUEST_PT_GPA;
	ret = kvm_boot_pt_build(sys + GW_GUEST_PT_GPA, pt_bytes, GW_GUEST_PT_GPA, r, n);
	if (ret) {
		kvm_why(why, why_len, "page tables: %s", strerror(-ret));
		return ret;
	}
	write_boot_info(vm, nr_vcpus, nr_nics);
	return 0;
}

/* Per-vCPU CPUID: the APIC IDs (leaf 1 EBX[31:24], leaves 0xb/0x1f EDX) say which vCPU this is. */
static void cpuid_set_apic_id(struct kvm_cpuid_entry2 *e, uint32_t n, unsigned idx)
{
	for (uint32_t i = 0; i < n; i++) {
		if (e[i].function == 1)
			e[i].ebx = (e[i].ebx & 0x00ffffffu) | (uint32_t)idx << 24;
		else if (e[i].function == 0xb || e[i].function == 0x1f)
			e[i].edx = idx;
	}
}

static int vcpu_cpuid(struct kvm_vcpu *v, const struct kvm_cpuid_entry2 *e, uint32_t n)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(*e));
	int ret;

	if (!c)
		return -ENOMEM;
	c->nent = n;
	memcpy(c->entries, e, n * sizeof(*e));
	cpuid_set_apic_id(c->entries, c->nent, v->index);
	ret = ioctl(v->fd, KVM_SET_CPUID2, c) < 0 ? -errno : 0;
	free(c);
	return ret;
}

/* A fresh vCPU at the guest's entry, 64-bit mode (the selftests' way). */
static int vcpu_boot_regs(struct kvm_vm *vm, struct kvm_vcpu *v, uint64_t entry)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_RUNNABLE };
	struct kvm_xcrs xcrs = { .nr_xcrs = 1 };

	if (ioctl(v->fd, KVM_GET_SREGS, &sregs) < 0)
		return -errno;
	kvm_boot_sregs(&sregs, GW_GUEST_PT_GPA, vm->xcr0 != 0);
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs) < 0)
		return -errno;
	if (vm->xcr0) {
		xcrs.xcrs[0].xcr = 0;
		xcrs.xcrs[0].value = vm->xcr0;
		if (ioctl(v->fd, KVM_SET_XCRS, &xcrs) < 0)
			return -errno;
	}
	memset(&regs, 0, sizeof(regs));
	regs.rip = entry;
	regs.rsp = GW_GUEST_STACK_GPA + (v->index + 1) * GW_GUEST_STACK_BYTES;
	regs.rdi = v->index;
	regs.rsi = GW_GUEST_BOOT_GPA;
	regs.rflags = 0x2;
	if (ioctl(v->fd, KVM_SET_REGS, &regs) < 0)
		return -errno;
	return ioctl(v->fd, KVM_SET_MP_STATE, &mp) < 0 ? -errno : 0;
}

struct kvm_cpuid_entry2 *kvm_supported_cpuid(int kvm_fd, uint32_t *n)
{
	for (uint32_t cap = 128; cap <= 4096; cap *= 2) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + cap * sizeof(c->entries[0]));
		struct kvm_cpuid_entry2 *e;

		if (!c)
			return NULL;
		c->nent = cap;
		if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			*n = c->nent;
			e = malloc(c->nent * sizeof(*e) + 1);
			if (e) {
				memcpy(e, c->entries, c->nent * sizeof(*e));
				/*
				 * KVM fills the APIC IDs in with those of the host CPU
				 * the ioctl ran on: zero them, so that two calls (the
				 * source's and the destination's compatibility probe)
				 * give the same template (a mismatch made the
				 * destination probe MSRs again inside the downtime,
				 * ~15 ms here). Each vCPU gets its own at creation.
				 */
				cpuid_set_apic_id(e, c->nent, 0);
			}
			free(c);
			return e;
		}
		free(c);
		if (errno != E2BIG)
			return NULL;
	}
	errno = E2BIG;
	return NULL;
}

/* XCR0 for the guests: the user-state components KVM offers (AVX-512 all or none). */
static uint64_t guest_xcr0(const struct kvm_cpuid_entry2 *e, uint32_t n)
{
	const struct kvm_cpuid_entry2 *l1 = kvm_compat_cpuid_find(e, n, 1, 0);
	const struct kvm_cpuid_entry2 *d = kvm_compat_cpuid_find(e, n, 0xd, 0);
	uint64_t x;

	if (!l1 || !(l1->ecx & (1u << 26)) || !d)	/* no XSAVE */
		return 0;
	x = ((uint64_t)d->edx << 32 | d->eax) & XCR0_USER_MASK;
	if ((x & 0xe0) != 0xe0)
		x &= ~0xe0ull;
	if (!(x & 4))
		x &= ~0xe0ull;
	return x | 1;
}

/* MSRs of KVM_GET_MSR_INDEX_LIST that @vcpu_fd can both read and write back. */
static int probe_msrs(int kvm_fd, int vcpu_fd, uint32_t *out, uint32_t *nr_out)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *list;
	struct { struct kvm_msrs h; struct kvm_msr_entry e; } one;

	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return -errno;
	list = calloc(1, sizeof(*list) + probe.nmsrs * sizeof(list->indices[0]));
	if (!list)
		return -ENOMEM;
	list->nmsrs = probe.nmsrs;
	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, list) < 0) {
		free(list);
		return -errno;
	}
	*nr_out = 0;
	for (uint32_t i = 0; i < list->nmsrs && *nr_out < KVM_COMPAT_MAX_MSRS; i++) {
		memset(&one, 0, sizeof(one));
		one.h.nmsrs = 1;
		one.e.index = list->indices[i];
		if (ioctl(vcpu_fd, KVM_GET_MSRS, &one) != 1 || ioctl(vcpu_fd, KVM_SET_MSRS, &one) != 1)
			continue;
		out[(*nr_out)++] = list->indices[i];
	}
	free(list);
	return 0;
}

int kvm_probe_msrs_tmp(int kvm_fd, const struct kvm_cpuid_entry2 *cpuid, uint32_t nr_cpuid,
		       uint32_t *out, uint32_t *nr_out)
{
	struct kvm_vcpu v = { .index = 0 };
	int vm_fd, ret;

	*nr_out = 0;
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (vm_fd < 0)
		return -errno;
	if (ioctl(vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		ret = -errno;
		goto out_vm;
	}
	v.fd = ioctl(vm_fd, KVM_CREATE_VCPU, 0ul);
	if (v.fd < 0) {
		ret = -errno;
		goto out_vm;
	}
	ret = vcpu_cpuid(&v, cpuid, nr_cpuid);
	if (!ret)
		ret = probe_msrs(kvm_fd, v.fd, out, nr_out);
	close(v.fd);
out_vm:
	close(vm_fd);
	return ret;
}

static int vcpu_create_one(struct kvm_vm *vm, unsigned i, char *why, size_t why_len)
{
	struct kvm_vcpu *v = &vm->vcpus[i];
	uint64_t ring_bytes = (uint64_t)vm->ring_entries * sizeof(struct kvm_dirty_gfn);
	void *run;

	v->vm = vm;
	v->index = i;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)i);
	if (v->fd < 0) {
		int e = errno;

		kvm_why(why, why_len, "KVM_CREATE_VCPU %u: %s", i, strerror(e));
		return -e;
	}
	run = mmap(NULL, vm->caps.vcpu_mmap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (run == MAP_FAILED) {
		int e = errno;

		kvm_why(why, why_len, "mmap of vCPU %u's kvm_run: %s", i, strerror(e));
		return -e;
	}
	v->run = run;
	if (ring_bytes) {
		void *ring = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
				  (off_t)KVM_DIRTY_LOG_PAGE_OFFSET * getpagesize());

		if (ring == MAP_FAILED) {
			int e = errno;

			kvm_why(why, why_len, "mmap of vCPU %u's dirty ring: %s", i, strerror(e));
			return -e;
		}
		v->ring = ring;
		vm->rings[i] = ring;
	}
	return 0;
}

int kvm_vcpus_create(struct kvm_vm *vm, unsigned nr, const struct kvm_cpuid_entry2 *cpuid,
		     uint32_t nr_cpuid, bool boot_regs, char *why, size_t why_len)
{
	unsigned made = vm->vcpus_ahead;	/* made before a load: they never ran */
	bool same;
	int ret = 0;

	if (nr < made) {
		kvm_why(why, why_len, "this destination was made with %u vCPUs (--vcpus), the state has %u",
			made, nr);
		return -EINVAL;
	}
	/* The same template as the vCPUs made ahead got: KVM_SET_CPUID2 (~0.1 ms each here) again is moot. */
	same = made && vm->cpuid && nr_cpuid == vm->nr_cpuid &&
	       !memcmp(cpuid, vm->cpuid, nr_cpuid * sizeof(*cpuid));
	free(vm->cpuid);
	vm->cpuid = malloc(nr_cpuid * sizeof(*cpuid) + 1);
	if (!vm->cpuid)
		return -ENOMEM;
	memcpy(vm->cpuid, cpuid, nr_cpuid * sizeof(*cpuid));
	vm->nr_cpuid = nr_cpuid;
	vm->xcr0 = guest_xcr0(cpuid, nr_cpuid);
	for (unsigned i = 0; i < nr; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (i >= made)
			ret = vcpu_create_one(vm, i, why, why_len);
		vm->base.nr_vcpus = i + 1;	/* what exists is destroyed on failure */
		/* KVM takes a new CPUID until the vCPU's first KVM_RUN. */
		if (!ret && !(i < made && same) && (ret = vcpu_cpuid(v, cpuid, nr_cpuid)) < 0)
			kvm_why(why, why_len, "KVM_SET_CPUID2 on vCPU %u: %s", i, strerror(-ret));
		/* A loaded VM keeps the source's MSR list (checked restorable here). */
		if (!ret && i == 0 && !vm->nr_msrs &&
		    (ret = probe_msrs(vm->kvm_fd, v->fd, vm->msrs, &vm->nr_msrs)) < 0)
			kvm_why(why, why_len, "MSR list: %s", strerror(-ret));
		if (!ret && boot_regs && (ret = vcpu_boot_regs(vm, v, vm->entry_gpa)) < 0)
			kvm_why(why, why_len, "vCPU %u boot registers: %s", i, strerror(-ret));
		if (ret)
			return ret;
	}
	vm->base.nr_vcpus = nr > made ? nr : made;
	vm->vcpus_ahead = 0;
	vm->base.info.nr_vcpus = nr;
	kvm_pause_set_vcpus(&vm->pause, nr);
	return 0;
}

void kvm_vcpus_destroy(struct kvm_vm *vm)
{
	uint64_t ring_bytes = (uint64_t)vm->ring_entries * sizeof(struct kvm_dirty_gfn);

	unsigned nr = vm->base.nr_vcpus > vm->vcpus_ahead ? vm->base.nr_vcpus : vm->vcpus_ahead;

	for (unsigned i = 0; i < nr; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (v->ring)
			munmap(v->ring, ring_bytes);
		if (v->run)
			munmap(v->run, vm->caps.vcpu_mmap_bytes);
		if (v->fd >= 0)
			close(v->fd);
		v->ring = NULL;
		v->run = NULL;
		v->fd = -1;
		vm->rings[i] = NULL;
	}
	vm->base.nr_vcpus = 0;
	vm->base.info.nr_vcpus = 0;
	free(vm->cpuid);
	vm->cpuid = NULL;
	vm->nr_cpuid = 0;
}
