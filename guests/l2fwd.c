/* SPDX-License-Identifier: MIT */
/* l2fwd: probe the NICs (first step). */
#include "nic.h"

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	guest_init(idx, "l2fwd");
	if (idx)
		guest_halt_forever();
	for (unsigned i = 0; i < nic_count(bi); i++)
		if (nic_probe(bi, i))
			guest_halt_forever();
	guest_halt_forever();
}
