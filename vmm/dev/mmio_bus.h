/* SPDX-License-Identifier: MIT */
/*
 * Guest-physical MMIO regions of a VM and the one dispatch both VMMs use:
 * the KVM backend calls vmm_mmio_access from its KVM_EXIT_MMIO handler
 * (vmm/kvm/kvm_mmio_dev.c), the soft VM's vCPU threads call it directly
 * for their register accesses.
 *
 * Threads: regions are registered at creation, before any vCPU runs, and
 * read-only afterwards: dispatch takes no lock (each region's handler
 * takes its own).
 */
#ifndef GW_VMM_MMIO_BUS_H
#define GW_VMM_MMIO_BUS_H

#include <stdbool.h>
#include <stdint.h>

#define VMM_MMIO_MAX_REGIONS 16
#define VMM_MMIO_MAX_ACCESS_BYTES 8	/* KVM's kvm_run.mmio.data */

/* One access at byte @off of the region; a read fills @data[0..len). */
typedef void (*vmm_mmio_fn)(void *opaque, uint64_t off, void *data, uint32_t len, bool is_write);

struct vmm_mmio_region {
	uint64_t base_gpa, len_bytes;
	vmm_mmio_fn fn;
	void *opaque;
};

struct vmm_mmio_bus {
	struct vmm_mmio_region regions[VMM_MMIO_MAX_REGIONS];
	unsigned nr;
};

/* 0, or -EINVAL (empty, wraps), -EEXIST (overlaps a region), -ENOSPC. */
int vmm_mmio_register(struct vmm_mmio_bus *bus, uint64_t base_gpa, uint64_t len_bytes,
		      vmm_mmio_fn fn, void *opaque);
/*
 * Dispatch an access of @len (1..8) bytes at @gpa. true when a region took
 * it; false when none covers all of it (a read then returns all ones in
 * @data, as an unclaimed bus does).
 */
bool vmm_mmio_access(const struct vmm_mmio_bus *bus, uint64_t gpa, void *data, uint32_t len,
		     bool is_write);

#endif
