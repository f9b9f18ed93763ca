/* SPDX-License-Identifier: MIT */
/*
 * The KVM backend of the reference VMM (vmm.h): a KVM VM with 1..64 vCPUs
 * (one thread each), the in-kernel irqchip and optionally a PIT, RAM in
 * memfds (block "sys" at 0 for boot structures and the guest image, block
 * "ram" at 4 GiB for the workload), vCPUs started in 64-bit mode by the VMM
 * (kvm_boot.h), a tiny guest per workload (guests/, embedded), the serial
 * port 0x3f8 printed into the log (subsystem "kvm"), a paravirtual port
 * (guest_abi.h), complete vCPU and VM state as named sections
 * (kvm_state_codec.h), and the KVM dirty bitmap or dirty ring for the
 * engine's kvm-log / kvm-ring trackers.
 *
 * Tests and tools reach KVM-only settings through kvm_vm_opts.
 */
#ifndef GW_KVM_VM_H
#define GW_KVM_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "vmm.h"

extern const struct vmm_backend vmm_kvm;

#define KVM_MAX_VCPUS 64u
#define KVM_DEFAULT_RING_ENTRIES 16384u	/* 256 KiB of struct kvm_dirty_gfn per vCPU */

/*
 * Dirty tracking the VM is prepared for, decided at creation (KVM enables
 * the ring before any vCPU exists; a VM with a ring has no bitmap).
 */
enum kvm_dirty_mode {
	KVM_DIRTY_MODE_AUTO = 0,	/* vmm_config.dirty_backend decides; default: the bitmap */
	KVM_DIRTY_MODE_RING,		/* kvm-ring (refused where KVM lacks it) */
	KVM_DIRTY_MODE_LOG,		/* kvm-log (bitmap) only: no ring */
};

struct kvm_vm_opts {
	const char *guest;		/* guest image name; NULL: the workload's */
	enum kvm_dirty_mode dirty;	/* overrides vmm_config.dirty_backend when not AUTO */
	uint32_t ring_entries;		/* dirty ring entries per vCPU, 0: default */
	bool no_pit;			/* do not create the in-kernel PIT */
	uint64_t compute_iters;		/* compute guest: iterations */
	uint64_t tick_ns;		/* idle guest: LAPIC timer period, 0: 1 ms */
	int guest_recheck;		/* verify guest re-check after migration: 1 on, 0 off, -1 auto */
};

/* vmm_kvm.create with KVM-only options (@opts NULL = defaults). NULL, errno, reason. */
struct vmm *vmm_kvm_create_opts(const struct vmm_config *cfg, const struct kvm_vm_opts *opts,
				char *err, size_t err_len);

/* What a guest reported through the paravirtual port (tests, status). */
struct kvm_guest_report {
	uint64_t guest_checks_ok;	/* GW_PV_VERIFY_RESULT ok */
	uint64_t guest_checks_bad;	/* GW_PV_VERIFY_RESULT failed */
	uint64_t panics;		/* GW_PV_PANIC, triple faults, entry failures */
	uint64_t dirty_ring_full_exits;
	bool done;			/* GW_PV_DONE seen (compute) */
	uint64_t result;		/* its argument */
};
void vmm_kvm_guest_report(const struct vmm *vm, struct kvm_guest_report *out);

/* Host address of guest-physical @gpa in block "sys" or "ram", or NULL. */
void *vmm_kvm_gpa_to_host(const struct vmm *vm, uint64_t gpa, uint64_t len);

#endif
