/* SPDX-License-Identifier: MIT */
/*
 * echo: interrupt-driven. vCPU 0 sets up every NIC with receive interrupts
 * (VNET_DRV_RX_IRQ), routes their lines (nic.h) and sends every frame back
 * out of the NIC it came from, source and destination MAC swapped; with
 * nothing to do it halts until the next interrupt (`sti; hlt`, so that
 * one arriving between the check and the halt wakes it). `written` counts
 * frames sent, `ticks` interrupts taken. The other vCPUs halt.
 */
#include "nic.h"

static struct vnet_drv nics[GW_GUEST_NET_MAX_NICS];

/* Frames sent back by every NIC, or a driver error. */
static int echo_pass(unsigned n, unsigned budget)
{
	static const struct vnet_fwd_cfg back;	/* no MAC set: back to each frame's sender */
	int sent = 0;

	for (unsigned i = 0; i < n; i++) {
		int r = vnet_fwd_pass(&nics[i], 1, &back, budget);	/* one NIC: out of itself */

		if (r < 0)
			return r;
		sent += r;
	}
	return sent;
}

static int rx_waiting(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (vnet_drv_rx_pending(&nics[i]))
			return 1;
	return 0;
}

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	struct vnet_fwd_cfg unused;
	struct gw_vcpu_area *a = vcpu_area(idx);
	unsigned n, budget;

	(void)bi;
	guest_init(idx, "echo");
	n = idx ? 0 : nic_setup_all(nics, VNET_DRV_RX_IRQ);
	if (n)
		nic_irq_route();
	nic_fwd_cfg(&unused, &budget);
	for (uint64_t sent = read_u64(&a->written); n;) {
		int r = echo_pass(n, budget);

		if (r < 0)
			nic_fail(0, r);
		if (r > 0) {
			sent += (unsigned)r;
			publish_u64(&a->written, sent);
		} else if (!rx_waiting(n)) {
			__asm__ __volatile__("sti; hlt; cli" ::: "memory");
		}
	}
	guest_halt_forever();
}
