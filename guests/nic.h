/* SPDX-License-Identifier: MIT */
/*
 * The NIC guests' side of the devices (l2fwd, echo): MMIO register access,
 * the IOAPIC route of the NICs' lines, and the interrupt handler. The
 * virtio driver itself is common/vnet_drv.[ch], shared with the soft VM;
 * this file gives it what only the tiny KVM guest knows.
 *
 * Interrupts: every NIC's IOAPIC pin (struct gw_boot_net gsi[i]) goes to
 * vCPU 0 on GW_GUEST_VEC_NIC, level-triggered, active high (the device
 * holds its line while its InterruptStatus is non-zero). The handler
 * acknowledges every NIC's InterruptStatus (the device drops its line),
 * counts the interrupt in vCPU 0's `ticks`, ORs what it acknowledged into
 * `nic_isr_seen`, then EOIs the LAPIC. That EOI reaches the IOAPIC (the
 * vector is level-triggered) and clears the pin's remote IRR: a line still
 * high fires again.
 */
#ifndef GW_GUEST_NIC_H
#define GW_GUEST_NIC_H

#include "guest.h"
#include "vnet_drv.h"

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

/* The NICs' boot info (GW_GUEST_NET_INFO_GPA). */
static inline const struct gw_boot_net *nic_boot(void)
{
	return (const struct gw_boot_net *)(uintptr_t)GW_GUEST_NET_INFO_GPA;
}

/* The boot info's NIC count, bounded by the ABI's. */
unsigned nic_count(void);
/*
 * NIC @i answers as a virtio-mmio v2 network device (magic, version,
 * device id 1): 0, or -1. Either way a line on the serial console.
 */
int nic_probe(unsigned i);
/* Route every NIC's pin to vCPU 0 on GW_GUEST_VEC_NIC (interrupts still off). */
void nic_irq_route(void);
/*
 * Probe and set up every NIC (vnet_drv_setup with @flags) in its area
 * (GW_GUEST_NET_GPA + i * GW_GUEST_NET_AREA_BYTES): how many. A NIC that
 * fails stops the guest (nic_fail).
 */
unsigned nic_setup_all(struct vnet_drv *nics, uint32_t flags);
/* The boot info's forwarding MACs (vnet_fwd_pass) and frames per pass. */
void nic_fwd_cfg(struct vnet_fwd_cfg *cfg, unsigned *budget);
/* A driver error on NIC @i: a serial line, state FAILED, GW_PV_PANIC; never returns. */
void nic_fail(unsigned i, int err) __attribute__((noreturn));

#endif
