/* SPDX-License-Identifier: MIT */
/*
 * l2fwd: DPDK-style poll-mode forwarding, no interrupts. vCPU 0 sets up
 * every NIC with the shared driver (common/vnet_drv.c) in its area of
 * block sys and forwards for ever: NIC 0 <-> 1 (2 <-> 3) with the MAC
 * header rewritten, or back out of the one NIC with source and
 * destination swapped (vnet_fwd_pass; the MACs and frames per pass from
 * struct gw_boot_net). `written` counts frames sent. The
 * other vCPUs halt. A migrated guest carries on from its RAM: the driver's
 * state and rings are there.
 */
#include "nic.h"

static struct vnet_drv nics[GW_GUEST_NET_MAX_NICS];

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	static struct vnet_fwd_cfg cfg;
	struct gw_vcpu_area *a = vcpu_area(idx);
	unsigned n, budget;

	(void)bi;
	guest_init(idx, "l2fwd");
	n = idx ? 0 : nic_setup_all(nics, 0);
	nic_fwd_cfg(&cfg, &budget);
	for (uint64_t sent = read_u64(&a->written); n;) {
		int r = vnet_fwd_pass(nics, n, &cfg, budget);

		if (r < 0)
			nic_fail(0, r);
		if (r > 0) {
			sent += (unsigned)r;
			publish_u64(&a->written, sent);
		}
	}
	guest_halt_forever();
}
