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

_Static_assert(VNET_DRV_AREA_BYTES <= GW_GUEST_NET_AREA_BYTES, "the driver's area fits its place");
_Static_assert(VNET_DRV_MAX_NICS >= GW_GUEST_NET_MAX_NICS, "the driver forwards between all NICs");

unsigned nic_count(void)
{
	uint32_t n = nic_boot()->nr_nics;

	return n < GW_GUEST_NET_MAX_NICS ? n : GW_GUEST_NET_MAX_NICS;
}

void nic_fwd_cfg(struct vnet_fwd_cfg *cfg, unsigned *budget)
{
	const struct gw_boot_net *net = nic_boot();

	for (unsigned i = 0; i < GW_GUEST_NET_MAX_NICS; i++) {
		for (unsigned k = 0; k < 6; k++)
			cfg->dst_mac[i][k] = net->dst_mac[i][k];
		cfg->dst_set[i] = net->dst_set[i];
	}
	*budget = net->budget ? net->budget : 1;
}

int nic_probe(unsigned i)
{
	uint64_t r = nic_boot()->mmio_gpa[i];
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

static uint32_t regs_rd32(void *ctx, uint32_t off)
{
	return mmio_read32((uint64_t)(uintptr_t)ctx + off);
}

static void regs_wr32(void *ctx, uint32_t off, uint32_t v)
{
	mmio_write32((uint64_t)(uintptr_t)ctx + off, v);
}

void nic_fail(unsigned i, int err)
{
	serial_puts("nic=");
	serial_put_u64(i);
	serial_puts(" driver error=");
	serial_put_u64((uint64_t)-err);
	serial_puts("\n");
	guest_exception(GW_GUEST_VEC_NIC, 0, (uint64_t)-err);
}

unsigned nic_setup_all(struct vnet_drv *nics, uint32_t flags)
{
	unsigned n = nic_count();

	for (unsigned i = 0; i < n; i++) {
		struct vnet_io io = {
			.rd32 = regs_rd32, .wr32 = regs_wr32,
			.ctx = (void *)(uintptr_t)nic_boot()->mmio_gpa[i],
		};
		uint64_t area = GW_GUEST_NET_GPA + i * GW_GUEST_NET_AREA_BYTES;
		int ret;

		if (nic_probe(i))
			nic_fail(i, VNET_ENODEV);
		ret = vnet_drv_setup(&nics[i], &io, area, (void *)(uintptr_t)area, flags);
		if (ret)
			nic_fail(i, ret);
	}
	return n;
}

static void ioapic_write(uint32_t reg, uint32_t v)
{
	mmio_write32(GW_GUEST_IOAPIC_GPA + IOAPIC_REGSEL, reg);
	mmio_write32(GW_GUEST_IOAPIC_GPA + IOAPIC_WIN, v);
}

void nic_irq_route(void)
{
	for (unsigned i = 0; i < nic_count(); i++) {
		uint32_t pin = nic_boot()->gsi[i];

		if (pin >= IOAPIC_PINS)
			continue;
		ioapic_write(IOAPIC_REDTBL(pin) + 1, 0u << 24);		/* destination: APIC ID 0 */
		ioapic_write(IOAPIC_REDTBL(pin), IOAPIC_LEVEL | GW_GUEST_VEC_NIC);
	}
}

void guest_nic_irq(void)
{
	struct gw_vcpu_area *a = vcpu_area(0);
	uint64_t seen = 0;

	for (unsigned i = 0; i < nic_count(); i++) {
		uint64_t r = nic_boot()->mmio_gpa[i];
		uint32_t isr = mmio_read32(r + MMIO_INTERRUPT_STATUS);

		if (isr)
			mmio_write32(r + MMIO_INTERRUPT_ACK, isr);
		seen |= isr;
	}
	publish_u64(&a->nic_isr_seen, read_u64(&a->nic_isr_seen) | seen);
	publish_u64(&a->ticks, read_u64(&a->ticks) + 1);
	wrmsr(X2APIC_EOI, 0);
}
