/* SPDX-License-Identifier: MIT */
/* The NIC guests' MMIO, IOAPIC and interrupt handler (nic.h). */
#include "nic.h"

#define IOAPIC_REGSEL 0x00
#define IOAPIC_WIN 0x10
#define IOAPIC_REDTBL(pin) (0x10u + 2u * (pin))
#define IOAPIC_LEVEL (1u << 15)		/* trigger mode: level (fixed delivery, physical) */
#define IOAPIC_PINS 24u			/* KVM's in-kernel IOAPIC */
#define X2APIC_EOI 0x80b

#define MMIO_MAGIC_VALUE 0x000
#define MMIO_VERSION 0x004
#define MMIO_DEVICE_ID 0x008
#define MMIO_INTERRUPT_STATUS 0x060
#define MMIO_INTERRUPT_ACK 0x064
#define MMIO_MAGIC 0x74726976u		/* "virt" */
#define VIRTIO_ID_NET 1u

static const struct gw_boot_info *boot(void)
{
	return (const struct gw_boot_info *)(uintptr_t)GW_GUEST_BOOT_GPA;
}

unsigned nic_count(const struct gw_boot_info *bi)
{
	return bi->nr_nics < GW_GUEST_NET_MAX_NICS ? bi->nr_nics : GW_GUEST_NET_MAX_NICS;
}

uint64_t nic_regs_gpa(const struct gw_boot_info *bi, unsigned i)
{
	return bi->nic_mmio_gpa + i * bi->nic_mmio_stride_bytes;
}

uint64_t nic_area_gpa(const struct gw_boot_info *bi, unsigned i)
{
	return bi->net_gpa + i * bi->net_nic_bytes;
}

int nic_probe(const struct gw_boot_info *bi, unsigned i)
{
	uint64_t r = nic_regs_gpa(bi, i);
	uint32_t magic = mmio_read32(r + MMIO_MAGIC_VALUE), version = mmio_read32(r + MMIO_VERSION);
	uint32_t id = mmio_read32(r + MMIO_DEVICE_ID);

	serial_puts("nic=");
	serial_put_u64(i);
	serial_puts(" magic=");
	serial_put_u64(magic);
	serial_puts(" version=");
	serial_put_u64(version);
	serial_puts(" device=");
	serial_put_u64(id);
	serial_puts("\n");
	return magic == MMIO_MAGIC && version == 2 && id == VIRTIO_ID_NET ? 0 : -1;
}

static void ioapic_write(uint32_t reg, uint32_t v)
{
	mmio_write32(GW_GUEST_IOAPIC_GPA + IOAPIC_REGSEL, reg);
	mmio_write32(GW_GUEST_IOAPIC_GPA + IOAPIC_WIN, v);
}

void nic_irq_route(const struct gw_boot_info *bi)
{
	for (unsigned i = 0; i < nic_count(bi); i++) {
		uint32_t pin = bi->nic_gsi_base + i;

		if (pin >= IOAPIC_PINS)
			continue;
		ioapic_write(IOAPIC_REDTBL(pin) + 1, 0u << 24);		/* destination: APIC ID 0 */
		ioapic_write(IOAPIC_REDTBL(pin), IOAPIC_LEVEL | GW_GUEST_VEC_NIC);
	}
}

void guest_nic_irq(void)
{
	const struct gw_boot_info *bi = boot();
	struct gw_vcpu_area *a = vcpu_area(0);
	uint64_t seen = 0;

	for (unsigned i = 0; i < nic_count(bi); i++) {
		uint64_t r = nic_regs_gpa(bi, i);
		uint32_t isr = mmio_read32(r + MMIO_INTERRUPT_STATUS);

		if (isr)
			mmio_write32(r + MMIO_INTERRUPT_ACK, isr);
		seen |= isr;
	}
	publish_u64(&a->nic_isr_seen, read_u64(&a->nic_isr_seen) | seen);
	publish_u64(&a->ticks, read_u64(&a->ticks) + 1);
	wrmsr(X2APIC_EOI, 0);
}
