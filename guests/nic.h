/* SPDX-License-Identifier: MIT */
/*
 * The NIC guests' side of the devices (l2fwd, echo): MMIO register access,
 * the IOAPIC route of the NICs' lines, and the interrupt handler. The
 * virtio driver itself is common/vnet_drv.[ch], shared with the soft VM;
 * this file gives it what only the tiny KVM guest knows.
 *
 * Interrupts: every NIC's IOAPIC pin (boot info nic_gsi_base + i) goes to
 * vCPU 0 on GW_GUEST_VEC_NIC, level-triggered, active high (the device
 * holds its line while its InterruptStatus is non-zero). The handler
 * acknowledges every NIC's InterruptStatus (the device drops its line),
 * counts the interrupt in vCPU 0's `ticks` (and ORs what it acked into
 * `nic_isr_seen`), then EOIs the LAPIC, whose
 * EOI reaches the IOAPIC (level-triggered vector) and clears the pin's
 * remote IRR: a line still high fires again.
 */
#ifndef GW_GUEST_NIC_H
#define GW_GUEST_NIC_H

#include "guest.h"

static inline uint32_t mmio_read32(uint64_t gpa)
{
	uint32_t v = *(volatile uint32_t *)(uintptr_t)gpa;

	barrier();
	return v;
}

static inline void mmio_write32(uint64_t gpa, uint32_t v)
{
	barrier();
	*(volatile uint32_t *)(uintptr_t)gpa = v;
}

/* The boot info's NIC count, bounded by the ABI's. */
unsigned nic_count(const struct gw_boot_info *bi);
/* NIC @i's register page. */
uint64_t nic_regs_gpa(const struct gw_boot_info *bi, unsigned i);
/* NIC @i's driver area (GW_GUEST_NET_NIC_BYTES, guest_abi.h). */
uint64_t nic_area_gpa(const struct gw_boot_info *bi, unsigned i);
/*
 * NIC @i answers as a virtio-mmio v2 network device (magic, version,
 * device id 1): 0, or -1 after a line on the serial console.
 */
int nic_probe(const struct gw_boot_info *bi, unsigned i);
/* Route every NIC's pin to vCPU 0 on GW_GUEST_VEC_NIC (interrupts still off). */
void nic_irq_route(const struct gw_boot_info *bi);

#endif
